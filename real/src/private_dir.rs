//! Where real mode keeps what it later loads or runs: the servers' directories (their
//! configuration files, the clock files their time-shift library maps) and the time-shift
//! library itself, which every server with a clock fault preloads.
//!
//! Nothing there may come from another user of the machine. The shared temp directory is
//! writable by everyone, and a path in it that can be guessed (a fixed name, a process id) can
//! be made first by someone else: a directory full of their files, or a library of theirs that a
//! server would preload. So real mode writes only under a directory of its user's own,
//! `$TMPDIR/lockcheck-<uid>`, made with mode 0700; a path by that name that is not a directory,
//! is a symbolic link, belongs to another user or lets others in is refused, never used. Inside
//! it, each run makes its own directory, which must not exist before.

use crate::error::RealError;
use std::io::ErrorKind;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// The user's private directory under the temp directory, made if needed (see the module's
/// documentation).
pub fn user_dir() -> Result<PathBuf, RealError> {
    // SAFETY: geteuid has no preconditions and cannot fail.
    let uid = unsafe { libc::geteuid() };
    let dir = std::env::temp_dir().join(format!("lockcheck-{uid}"));
    match std::fs::DirBuilder::new().mode(0o700).create(&dir) {
        Ok(()) => {}
        Err(e) if e.kind() == ErrorKind::AlreadyExists => {}
        Err(source) => return Err(RealError::Io { path: dir, source }),
    }
    check_private(&dir, uid)?;
    Ok(dir)
}

/// A new directory for one run, `<user dir>/<prefix>-<pid>-<n>`: made by this call (an existing
/// one is never reused), mode 0700.
pub fn fresh(prefix: &str) -> Result<PathBuf, RealError> {
    static MADE: AtomicU64 = AtomicU64::new(0);
    let parent = user_dir()?;
    loop {
        let n = MADE.fetch_add(1, Ordering::Relaxed);
        let dir = parent.join(format!("{prefix}-{}-{n}", std::process::id()));
        match std::fs::DirBuilder::new().mode(0o700).create(&dir) {
            Ok(()) => return Ok(dir),
            // Left by an earlier process with the same id that did not end cleanly.
            Err(e) if e.kind() == ErrorKind::AlreadyExists => continue,
            Err(source) => return Err(RealError::Io { path: dir, source }),
        }
    }
}

/// Refuses `dir` unless it is a real directory (not a link to one) owned by `uid` that nobody
/// else may enter or write.
fn check_private(dir: &Path, uid: u32) -> Result<(), RealError> {
    let meta = std::fs::symlink_metadata(dir).map_err(|source| RealError::Io {
        path: dir.to_path_buf(),
        source,
    })?;
    let refuse = |why: String| {
        Err(RealError::Io {
            path: dir.to_path_buf(),
            source: std::io::Error::new(
                ErrorKind::PermissionDenied,
                format!("{why}; real mode keeps its servers' files and libraries only in a directory of its own user's with mode 0700: remove it, or set TMPDIR elsewhere"),
            ),
        })
    };
    if !meta.file_type().is_dir() {
        return refuse("not a directory (or a symbolic link)".into());
    }
    if meta.uid() != uid {
        return refuse(format!("owned by uid {}, not {uid}", meta.uid()));
    }
    let mode = meta.permissions().mode() & 0o777;
    if mode & 0o077 != 0 {
        return refuse(format!("mode {mode:o} lets other users in"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runs_get_directories_of_their_own_that_only_their_user_can_enter() {
        let (a, b) = (fresh("test").unwrap(), fresh("test").unwrap());
        assert_ne!(a, b);
        for dir in [&a, &b] {
            let mode = std::fs::metadata(dir).unwrap().permissions().mode() & 0o777;
            assert_eq!(mode, 0o700, "{}", dir.display());
            assert_eq!(dir.parent(), Some(user_dir().unwrap().as_path()));
            std::fs::remove_dir(dir).unwrap();
        }
    }

    #[test]
    fn a_directory_others_may_write_or_a_link_is_refused() {
        // SAFETY: as in `user_dir`.
        let uid = unsafe { libc::geteuid() };
        let base = fresh("test").unwrap();
        let open = base.join("open");
        std::fs::DirBuilder::new()
            .mode(0o700)
            .create(&open)
            .unwrap();
        std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o777)).unwrap();
        let err = check_private(&open, uid).unwrap_err().to_string();
        assert!(err.contains("mode 777 lets other users in"), "{err}");
        let link = base.join("link");
        std::os::unix::fs::symlink(&base, &link).unwrap();
        let err = check_private(&link, uid).unwrap_err().to_string();
        assert!(err.contains("symbolic link"), "{err}");
        let err = check_private(&base, uid + 1).unwrap_err().to_string();
        assert!(err.contains("owned by uid"), "{err}");
        check_private(&base, uid).unwrap();
        std::fs::remove_dir_all(&base).unwrap();
    }
}
