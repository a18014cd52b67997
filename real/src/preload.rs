//! The small C libraries real mode preloads (`LD_PRELOAD`) into the servers it starts: the
//! time-shift library ([`crate::timeshift`]) and the peer-link library ([`crate::peerlink`]).
//!
//! Each is compiled from its source, embedded in lockcheck, with the system C compiler (`cc`,
//! which building lockcheck needs anyway), into the user's private directory
//! ([`crate::private_dir`]) under a name that carries the source's hash: a changed source is
//! never mistaken for an old build, and no other user can have put a library of theirs there.

use std::hash::{DefaultHasher, Hash, Hasher};
use std::path::PathBuf;
use std::process::Command;

/// The C compiler that builds the libraries.
pub const COMPILER: &str = "cc";

/// The library `name` built from `source`: an earlier build of the same source by this user if
/// there is one, else built now. The error says what failed, for the caller to wrap.
pub fn build(name: &str, source: &str) -> Result<PathBuf, String> {
    // A stable hash of the source: the same build for the same source, across processes.
    let mut hasher = DefaultHasher::new();
    source.hash(&mut hasher);
    let dir = crate::private_dir::user_dir().map_err(|e| e.to_string())?;
    let lib = dir.join(format!("lockcheck-{name}-{:016x}.so", hasher.finish()));
    if lib.exists() {
        return Ok(lib);
    }
    let pid = std::process::id();
    let source_path = dir.join(format!("lockcheck-{name}-{pid}.c"));
    let partial = dir.join(format!("lockcheck-{name}-{pid}.so.partial"));
    std::fs::write(&source_path, source).map_err(|e| format!("{}: {e}", source_path.display()))?;
    let output = Command::new(COMPILER)
        .args(["-shared", "-fPIC", "-O2", "-Wall", "-Werror", "-o"])
        .arg(&partial)
        .arg(&source_path)
        .output();
    let _ = std::fs::remove_file(&source_path);
    let output = output.map_err(|e| {
        format!("cannot run the C compiler `{COMPILER}` to build the {name} library: {e}")
    })?;
    if !output.status.success() {
        let _ = std::fs::remove_file(&partial);
        return Err(format!(
            "`{COMPILER}` failed to build the {name} library ({}):\n{}",
            output.status,
            String::from_utf8_lossy(&output.stderr)
        ));
    }
    // Another process may have built it meanwhile: a rename over it is atomic and harmless.
    std::fs::rename(&partial, &lib).map_err(|e| format!("{}: {e}", lib.display()))?;
    Ok(lib)
}
