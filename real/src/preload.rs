//! The small C libraries real mode preloads (`LD_PRELOAD`) into the servers it starts: the
//! time-shift library ([`crate::timeshift`]) and the peer-link library ([`crate::peerlink`]).
//!
//! Each is compiled from its source, embedded in lockcheck, with the system C compiler (`cc`,
//! which building lockcheck needs anyway), into the user's private directory
//! ([`crate::private_dir`]), where no other user can put a file. What a server loads is checked
//! every time it is asked for, not only the directory it is in:
//!
//! - the library is named after the SHA-256 of its own bytes (`lockcheck-NAME-SUM.so`), and a
//!   note named after the source's hash (`lockcheck-NAME-SOURCEHASH.sum`) says which library
//!   that source built: a changed source is never mistaken for an old build, and the note and
//!   the library it names can be written by two processes at once without ever disagreeing (a
//!   library's name is its content);
//! - before a path is handed to a server, the library must be a regular file (not a symbolic
//!   link), owned by the running user, writable by nobody else, and its bytes must hash to its
//!   name. One that is not (replaced, edited, truncated, opened to others) is never loaded: it
//!   is removed, with a warning, and the library built again.

use ring::digest::{digest, SHA256};
use std::hash::{DefaultHasher, Hash, Hasher};
use std::io::ErrorKind;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

/// The C compiler that builds the libraries.
pub const COMPILER: &str = "cc";

/// The library `name` built from `source`, checked (see the module's documentation): an earlier
/// build of the same source by this user if it passes the checks, else built now. The error says
/// what failed, for the caller to wrap.
pub fn build(name: &str, source: &str) -> Result<PathBuf, String> {
    let dir = crate::private_dir::user_dir().map_err(|e| e.to_string())?;
    build_in(&dir, name, source)
}

/// [`build`] into `dir`, a private directory of the running user's.
pub fn build_in(dir: &Path, name: &str, source: &str) -> Result<PathBuf, String> {
    // One build at a time in this process: its temporary files are named after the process.
    static BUILDING: Mutex<()> = Mutex::new(());
    let _one = BUILDING.lock().unwrap_or_else(|p| p.into_inner());
    // A stable hash of the source: the same build for the same source, across processes.
    let mut hasher = DefaultHasher::new();
    source.hash(&mut hasher);
    let note = dir.join(format!("lockcheck-{name}-{:016x}.sum", hasher.finish()));
    match built(dir, name, &note) {
        Ok(Some(lib)) => return Ok(lib),
        Ok(None) => {}
        Err((path, why)) => {
            tracing::warn!(
                "{}: {why}; not loaded: removed, and the {name} library built again",
                path.display()
            );
            remove(&path)?;
            let _ = std::fs::remove_file(&note);
        }
    }
    let bytes = compile(dir, name, source)?;
    let sum = hex(digest(&SHA256, &bytes).as_ref());
    let lib = library_path(dir, name, &sum);
    // The library under its content's name first, then the note that names it: a reader sees
    // no note, or a note naming a whole library.
    write_new(dir, &lib, &bytes, 0o700)?;
    write_new(dir, &note, format!("{sum}\n").as_bytes(), 0o600)?;
    match built(dir, name, &note) {
        Ok(Some(lib)) => Ok(lib),
        Ok(None) => Err(format!(
            "{}: the {name} library just built is gone",
            lib.display()
        )),
        Err((path, why)) => Err(format!(
            "{}: the {name} library just built fails its check: {why}",
            path.display()
        )),
    }
}

/// Where the library `name` whose bytes hash to `sum` lives.
fn library_path(dir: &Path, name: &str, sum: &str) -> PathBuf {
    dir.join(format!("lockcheck-{name}-{sum}.so"))
}

/// The library that `note` names, when it passes every check; `None` when there is no build of
/// this source yet; the file at fault and why, when something there must not be loaded.
fn built(dir: &Path, name: &str, note: &Path) -> Result<Option<PathBuf>, (PathBuf, String)> {
    let note_bytes = match private_file(note) {
        Ok(Some(bytes)) => bytes,
        Ok(None) => return Ok(None),
        Err(why) => return Err((note.to_path_buf(), why)),
    };
    let sum = String::from_utf8_lossy(&note_bytes).trim().to_string();
    let well_formed = sum.len() == 64 && sum.bytes().all(|b| b.is_ascii_hexdigit());
    if !well_formed {
        return Err((note.to_path_buf(), "not a SHA-256 sum".into()));
    }
    let lib = library_path(dir, name, &sum);
    let bytes = match private_file(&lib) {
        Ok(Some(bytes)) => bytes,
        Ok(None) => return Ok(None),
        Err(why) => return Err((lib, why)),
    };
    let actual = hex(digest(&SHA256, &bytes).as_ref());
    if actual != sum {
        return Err((
            lib,
            format!("its content is not what was built (SHA-256 {actual}, built {sum})"),
        ));
    }
    Ok(Some(lib))
}

/// The bytes of the file at `path` if it is one this user may trust: a regular file (a symbolic
/// link is refused, not followed), owned by the running user, writable by nobody else. `None`
/// when there is no such file.
fn private_file(path: &Path) -> Result<Option<Vec<u8>>, String> {
    let meta = match std::fs::symlink_metadata(path) {
        Ok(meta) => meta,
        Err(e) if e.kind() == ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e.to_string()),
    };
    if !meta.file_type().is_file() {
        return Err("not a regular file (a symbolic link, or something else)".into());
    }
    // SAFETY: geteuid has no preconditions and cannot fail.
    let uid = unsafe { libc::geteuid() };
    if meta.uid() != uid {
        return Err(format!("owned by uid {}, not {uid}", meta.uid()));
    }
    let mode = meta.permissions().mode() & 0o7777;
    if mode & 0o022 != 0 {
        return Err(format!("mode {mode:o} lets other users write it"));
    }
    // Opened without following a link: what was looked at is what is read.
    use std::os::unix::fs::OpenOptionsExt;
    let mut file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)
        .map_err(|e| e.to_string())?;
    let opened = file.metadata().map_err(|e| e.to_string())?;
    if opened.ino() != meta.ino() || opened.dev() != meta.dev() {
        return Err("replaced while it was checked".into());
    }
    let mut bytes = Vec::new();
    std::io::Read::read_to_end(&mut file, &mut bytes).map_err(|e| e.to_string())?;
    Ok(Some(bytes))
}

/// Removes the file at `path`, a link itself and never what it points to.
fn remove(path: &Path) -> Result<(), String> {
    match std::fs::remove_file(path) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == ErrorKind::NotFound => Ok(()),
        Err(e) => Err(format!(
            "{}: cannot remove it ({e}); remove it by hand",
            path.display()
        )),
    }
}

/// Writes `bytes` to `path` with `mode`: whole, to a new temporary file beside it, renamed over
/// it (a rename replaces a link, never writes through it).
fn write_new(dir: &Path, path: &Path, bytes: &[u8], mode: u32) -> Result<(), String> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    static MADE: AtomicU64 = AtomicU64::new(0);
    // `…-PID.so.partial`, as `private_dir::sweep` knows a build's leftovers.
    let partial = dir.join(format!(
        "lockcheck-write-{}-{}.so.partial",
        MADE.fetch_add(1, Ordering::Relaxed),
        std::process::id()
    ));
    let at = |e: std::io::Error| format!("{}: {e}", path.display());
    let written = (|| {
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(mode)
            .open(&partial)?;
        file.set_permissions(std::fs::Permissions::from_mode(mode))?;
        file.write_all(bytes)?;
        file.sync_all()?;
        std::fs::rename(&partial, path)
    })();
    if written.is_err() {
        let _ = std::fs::remove_file(&partial);
    }
    written.map_err(at)
}

/// Compiles `source` in `dir`: the library's bytes.
fn compile(dir: &Path, name: &str, source: &str) -> Result<Vec<u8>, String> {
    let pid = std::process::id();
    let source_path = dir.join(format!("lockcheck-{name}-{pid}.c"));
    let partial = dir.join(format!("lockcheck-{name}-{pid}.so.partial"));
    for stale in [&source_path, &partial] {
        remove(stale)?;
    }
    write_new(dir, &source_path, source.as_bytes(), 0o600)?;
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
    let bytes = std::fs::read(&partial).map_err(|e| format!("{}: {e}", partial.display()));
    let _ = std::fs::remove_file(&partial);
    bytes
}

/// Bytes as lowercase hex.
fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const SOURCE: &str = "int lockcheck_preload_test(void) { return 40; }\n";

    fn compiler() -> bool {
        crate::launcher::find_on_path(COMPILER).is_some()
    }

    /// Issue 40 item 1: a library in the private directory is loaded only as it was built. One
    /// edited, opened to other users, replaced by a link or given to another user is never
    /// handed to a server: it is removed and built again.
    #[test]
    fn a_library_planted_or_changed_after_its_build_is_never_loaded() {
        if !compiler() {
            return;
        }
        let dir = crate::private_dir::fresh("test").unwrap();
        let first = build_in(&dir, "probe", SOURCE).unwrap();
        let built = std::fs::read(&first).unwrap();
        assert_eq!(build_in(&dir, "probe", SOURCE).unwrap(), first, "reused");
        // SAFETY: as in `private_file`.
        let root = unsafe { libc::geteuid() } == 0;
        let elsewhere = dir.join("planted.so");
        std::fs::write(&elsewhere, b"not the library").unwrap();
        type Plant = fn(&Path, &Path);
        let plants: [(&str, Plant, bool); 5] = [
            (
                "edited",
                |lib, _| {
                    let mut bytes = std::fs::read(lib).unwrap();
                    bytes.extend_from_slice(b"planted");
                    std::fs::write(lib, bytes).unwrap();
                },
                true,
            ),
            (
                "truncated",
                |lib, _| std::fs::write(lib, b"").unwrap(),
                true,
            ),
            (
                "writable by others",
                |lib, _| {
                    std::fs::set_permissions(lib, std::fs::Permissions::from_mode(0o666)).unwrap()
                },
                true,
            ),
            (
                "a link",
                |lib, elsewhere| {
                    std::fs::remove_file(lib).unwrap();
                    std::os::unix::fs::symlink(elsewhere, lib).unwrap();
                },
                true,
            ),
            (
                "another user's",
                |lib, _| std::os::unix::fs::chown(lib, Some(65534), Some(65534)).unwrap(),
                root,
            ),
        ];
        for (what, plant, possible) in plants {
            if !possible {
                continue;
            }
            let lib = build_in(&dir, "probe", SOURCE).unwrap();
            plant(&lib, &elsewhere);
            let again = build_in(&dir, "probe", SOURCE).unwrap();
            let meta = std::fs::symlink_metadata(&again).unwrap();
            assert!(meta.file_type().is_file(), "{what}: not a regular file");
            assert_eq!(meta.permissions().mode() & 0o022, 0, "{what}: mode");
            assert_eq!(meta.uid(), unsafe { libc::geteuid() }, "{what}: owner");
            let bytes = std::fs::read(&again).unwrap();
            let sum = hex(digest(&SHA256, &bytes).as_ref());
            assert!(
                again.to_string_lossy().ends_with(&format!("-{sum}.so")),
                "{what}: {} does not hold what was built under that name",
                again.display()
            );
            assert_eq!(bytes.len(), built.len(), "{what}: not the library built");
            assert_eq!(
                std::fs::read(&elsewhere).unwrap(),
                b"not the library",
                "{what}: a link was followed"
            );
        }
        std::fs::remove_dir_all(&dir).unwrap();
        crate::private_dir::release(&dir);
    }
}
