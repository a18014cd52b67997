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
/// one is never reused), mode 0700, and held (an advisory lock on it, until [`release`]) so that
/// no other process takes it for a stale one. First, the directories that runs killed before
/// they could remove their own left are removed ([`sweep`]).
pub fn fresh(prefix: &str) -> Result<PathBuf, RealError> {
    static MADE: AtomicU64 = AtomicU64::new(0);
    let parent = user_dir()?;
    sweep(&parent);
    loop {
        let n = MADE.fetch_add(1, Ordering::Relaxed);
        let dir = parent.join(format!("{prefix}-{}-{n}", std::process::id()));
        match std::fs::DirBuilder::new().mode(0o700).create(&dir) {
            Ok(()) => {
                hold(&dir);
                return Ok(dir);
            }
            // Left by an earlier process with the same id that did not end cleanly.
            Err(e) if e.kind() == ErrorKind::AlreadyExists => continue,
            Err(source) => return Err(RealError::Io { path: dir, source }),
        }
    }
}

/// The run directories this process holds, each with the open directory its lock is on.
static HELD: std::sync::Mutex<Vec<(PathBuf, std::fs::File)>> = std::sync::Mutex::new(Vec::new());

/// Takes the advisory lock of run directory `dir` ([`fresh`]) for as long as this process lives
/// or until [`release`]: the kernel drops it when the process ends, however it ends (SIGKILL
/// included), which is how [`sweep`] tells a directory in use from a stale one even where the
/// PID in its name says nothing (another PID namespace sharing the temp directory).
fn hold(dir: &Path) {
    let Ok(file) = std::fs::File::open(dir) else {
        return;
    };
    if try_lock(&file) {
        HELD.lock()
            .unwrap_or_else(|p| p.into_inner())
            .push((dir.to_path_buf(), file));
    }
}

/// Lets go of run directory `dir` ([`fresh`]), removed or about to be: its lock and the open
/// directory it is on.
pub fn release(dir: &Path) {
    HELD.lock()
        .unwrap_or_else(|p| p.into_inner())
        .retain(|(held, _)| held != dir);
}

/// Removes from `parent` (the user's directory) what runs that ended without cleaning up left
/// there (a `SIGKILL`, a machine that went down): each run directory `<prefix>-<pid>-<n>` of the
/// running user's whose process `pid` is gone and whose lock nobody holds, and the compiler's
/// leftovers of such a process (`lockcheck-<name>-<pid>.c`, `….so.partial`). Nothing is
/// followed: a symbolic link is never a run directory, and removing a directory removes the
/// links inside it, not what they point to. Best effort: what cannot be removed is left, with a
/// warning.
pub fn sweep(parent: &Path) {
    // SAFETY: as in `user_dir`.
    let uid = unsafe { libc::geteuid() };
    let Ok(entries) = std::fs::read_dir(parent) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(name) = name.to_str() else {
            continue;
        };
        // `symlink_metadata`: the entry itself, never what a link points to.
        let Ok(meta) = std::fs::symlink_metadata(entry.path()) else {
            continue;
        };
        if meta.uid() != uid {
            continue;
        }
        let path = entry.path();
        let removed = if meta.file_type().is_dir() {
            match run_dir_pid(name) {
                Some(pid) if gone(pid) && unheld(&path) => std::fs::remove_dir_all(&path),
                _ => continue,
            }
        } else if meta.file_type().is_file() {
            match build_leftover_pid(name) {
                Some(pid) if gone(pid) => std::fs::remove_file(&path),
                _ => continue,
            }
        } else {
            continue;
        };
        match removed {
            Ok(()) => tracing::debug!("removed {}, left by a run that ended", path.display()),
            Err(e) if e.kind() == ErrorKind::NotFound => {}
            Err(e) => tracing::warn!("could not remove {}: {e}", path.display()),
        }
    }
}

/// The PID in a run directory's name, `<prefix>-<pid>-<n>` ([`fresh`]).
fn run_dir_pid(name: &str) -> Option<u32> {
    let mut parts = name.rsplitn(3, '-');
    let n = parts.next()?;
    let pid = parts.next()?;
    let prefix = parts.next()?;
    let word = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    let prefix_ok = !prefix.is_empty()
        && prefix
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-');
    (prefix_ok && word(n) && word(pid)).then(|| pid.parse().ok())?
}

/// The PID in the name of a file a library's build left ([`crate::preload`]):
/// `lockcheck-<name>-<pid>.c` or `lockcheck-<name>-<pid>.so.partial`.
fn build_leftover_pid(name: &str) -> Option<u32> {
    let stem = name
        .strip_suffix(".c")
        .or_else(|| name.strip_suffix(".so.partial"))?;
    let (rest, pid) = stem.rsplit_once('-')?;
    if !rest.starts_with("lockcheck-") || pid.is_empty() || !pid.bytes().all(|b| b.is_ascii_digit())
    {
        return None;
    }
    pid.parse().ok()
}

/// Whether no process `pid` exists (`kill(pid, 0)` finds none). A process of another user's
/// exists (EPERM); this process and its parent always do.
fn gone(pid: u32) -> bool {
    let Ok(pid) = libc::pid_t::try_from(pid) else {
        return false;
    };
    if pid <= 0 {
        return false;
    }
    // SAFETY: signal 0 checks only that the process exists; nothing is sent.
    let result = unsafe { libc::kill(pid, 0) };
    result != 0 && std::io::Error::last_os_error().raw_os_error() == Some(libc::ESRCH)
}

/// Whether nobody holds the lock of run directory `dir` ([`hold`]): taken and let go at once.
fn unheld(dir: &Path) -> bool {
    std::fs::File::open(dir).is_ok_and(|f| try_lock(&f))
}

/// Takes `flock(LOCK_EX | LOCK_NB)` on `file` (an open directory): whether it was free. The lock
/// goes with the open file (closed: let go), and with the process, however it ends. (std's
/// `File::try_lock` is the same call, from Rust 1.89; this crate builds with 1.88.)
fn try_lock(file: &std::fs::File) -> bool {
    use std::os::fd::AsRawFd;
    // SAFETY: flock on a descriptor `file` owns, open for the duration of the call.
    unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) == 0 }
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

    /// A PID that no process has: a child that ran and was reaped.
    fn dead_pid() -> u32 {
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id();
        child.wait().unwrap();
        pid
    }

    /// Issue 40 item 7: a run killed with SIGKILL leaves its directory; the next run's
    /// `fresh` removes it, and only it: not a directory whose process lives, nor one whose lock
    /// is held, nor what a link points to, nor another user's.
    #[test]
    fn the_directories_of_runs_that_are_gone_are_removed_at_the_next_start() {
        let parent = user_dir().unwrap();
        let dead = dead_pid();
        let stale = parent.join(format!("real-{dead}-0"));
        std::fs::create_dir_all(stale.join("redis-0")).unwrap();
        std::fs::write(stale.join("redis-0/redis.conf"), "port 1\n").unwrap();
        let leftover = parent.join(format!("lockcheck-timeshift-{dead}.so.partial"));
        std::fs::write(&leftover, "").unwrap();
        // Kept: a link named as a stale run directory (the link goes, what it points to stays:
        // it is not a directory, so it is left alone), a directory of a live process (this
        // one's parent), and one this process holds.
        let target = fresh("test").unwrap();
        std::fs::write(target.join("keep"), "").unwrap();
        let link = parent.join(format!("real-{dead}-1"));
        std::os::unix::fs::symlink(&target, &link).unwrap();
        // SAFETY: getppid has no preconditions.
        let parent_pid = unsafe { libc::getppid() };
        let live = parent.join(format!("real-{parent_pid}-987654"));
        std::fs::create_dir_all(&live).unwrap();
        let held_elsewhere = parent.join(format!("real-{}-0", dead_pid()));
        std::fs::create_dir_all(&held_elsewhere).unwrap();
        let lock = std::fs::File::open(&held_elsewhere).unwrap();
        assert!(try_lock(&lock));
        // SAFETY: as in `user_dir`.
        let root = unsafe { libc::geteuid() } == 0;
        let foreign = parent.join(format!("real-{}-0", dead_pid()));
        if root {
            std::fs::create_dir_all(&foreign).unwrap();
            std::os::unix::fs::chown(&foreign, Some(65534), Some(65534)).unwrap();
        }

        let next = fresh("test").unwrap();
        assert!(!stale.exists(), "{} is left", stale.display());
        assert!(!leftover.exists(), "{} is left", leftover.display());
        assert!(target.join("keep").exists(), "a link was followed");
        assert!(
            std::fs::symlink_metadata(&link).is_ok(),
            "the link was removed"
        );
        assert!(live.exists(), "a live process's directory was removed");
        assert!(held_elsewhere.exists(), "a held directory was removed");
        if root {
            assert!(foreign.exists(), "another user's directory was removed");
            std::fs::remove_dir(&foreign).unwrap();
        }
        drop(lock);
        for dir in [&held_elsewhere, &live, &target, &next] {
            std::fs::remove_dir_all(dir).unwrap();
        }
        std::fs::remove_file(&link).unwrap();
        release(&target);
        release(&next);
    }

    #[test]
    fn only_names_a_run_or_a_build_gives_are_taken_for_a_process_id() {
        assert_eq!(run_dir_pid("real-123-0"), Some(123));
        assert_eq!(run_dir_pid("go-etcd-mutex-77-12"), Some(77));
        assert_eq!(run_dir_pid("lockcheck-timeshift-0123456789abcdef.so"), None);
        assert_eq!(run_dir_pid("real-x-0"), None);
        assert_eq!(run_dir_pid("-1-2"), None);
        assert_eq!(build_leftover_pid("lockcheck-peerlink-42.c"), Some(42));
        assert_eq!(
            build_leftover_pid("lockcheck-peerlink-42.so.partial"),
            Some(42)
        );
        assert_eq!(build_leftover_pid("lockcheck-peerlink-0123abcd.so"), None);
        assert_eq!(build_leftover_pid("notes-42.c"), None);
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
