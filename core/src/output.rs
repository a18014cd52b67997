//! Writing the files lockcheck leaves behind (reports, timelines, regressions, the matrix) so
//! that no interruption or link can spoil them.
//!
//! A regression file truncated by a killed search made every later search of that cell exit 2,
//! and a report written through a planted symbolic link lands wherever the link points. So a
//! file is written whole to a temporary file in its own directory and renamed over its name (a
//! rename within a file system is atomic: a reader, or the next run, sees the old file or the
//! new one, never a part), and a name that is a symbolic link, or whose directory is one, is
//! refused rather than followed.

use std::io::{self, Write};
use std::path::Path;

/// Writes `contents` to `path` atomically: a temporary file beside it, flushed to disk, then
/// renamed over it. Refuses a `path` that is a symbolic link (an error of kind `InvalidInput`).
pub fn write_atomically(path: &Path, contents: &[u8]) -> io::Result<()> {
    if path
        .symlink_metadata()
        .is_ok_and(|m| m.file_type().is_symlink())
    {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "is a symbolic link; lockcheck does not write through links",
        ));
    }
    let dir = match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir,
        _ => Path::new("."),
    };
    // The directory named for the output (`--out`, `--report`, `OUT/regressions`) is not
    // followed either: a link planted there would send every file into its target.
    if dir
        .symlink_metadata()
        .is_ok_and(|m| m.file_type().is_symlink())
    {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "{} is a symbolic link to a directory; lockcheck does not write through links \
                 (name the directory itself)",
                dir.display()
            ),
        ));
    }
    let name = path
        .file_name()
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "names no file"))?;
    let temp = dir.join(format!(
        ".{}.{}.tmp",
        name.to_string_lossy(),
        std::process::id()
    ));
    let written = (|| {
        // create_new: never through a link or over another writer's temporary file.
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&temp)?;
        file.write_all(contents)?;
        file.sync_all()?;
        std::fs::rename(&temp, path)
    })();
    if written.is_err() {
        let _ = std::fs::remove_file(&temp);
    }
    written
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(name: &str) -> std::path::PathBuf {
        let dir =
            std::env::temp_dir().join(format!("lockcheck-output-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn a_file_is_replaced_whole_and_no_temporary_file_is_left() {
        let dir = scratch("replace");
        let path = dir.join("r.json");
        write_atomically(&path, b"old").unwrap();
        write_atomically(&path, b"new").unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"new");
        let names: Vec<_> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, vec![std::ffi::OsString::from("r.json")]);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_symbolic_link_is_refused_and_its_target_untouched() {
        let dir = scratch("link");
        let outside = dir.join("outside.txt");
        std::fs::write(&outside, "keep").unwrap();
        let link = dir.join("r.json");
        std::os::unix::fs::symlink(&outside, &link).unwrap();
        let e = write_atomically(&link, b"evil").unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidInput);
        assert_eq!(std::fs::read_to_string(&outside).unwrap(), "keep");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// Issue 40 item 4: an output directory that is a link to another directory is not
    /// written through.
    #[test]
    fn a_directory_that_is_a_symbolic_link_is_refused_and_its_target_untouched() {
        let dir = scratch("dirlink");
        let target = dir.join("elsewhere");
        std::fs::create_dir_all(&target).unwrap();
        let link = dir.join("out");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        let e = write_atomically(&link.join("r.json"), b"evil").unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidInput);
        assert!(
            e.to_string().contains("symbolic link to a directory"),
            "{e}"
        );
        assert_eq!(std::fs::read_dir(&target).unwrap().count(), 0);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
