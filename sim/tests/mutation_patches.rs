//! The mutation check (`sim/mutations/`) only means something while its patches still apply: a
//! patch whose lines moved is reported STALE by `sim/mutations/run`, which takes minutes and is
//! not part of this suite. This test makes a model change that leaves a patch behind fail here,
//! at once, so the mutation is made again on the changed code (see `sim/mutations/README.md`).

use std::path::Path;
use std::process::Command;

#[test]
fn every_mutation_patch_still_applies_to_the_tree() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let dir = root.join("sim/mutations");
    let mut patches: Vec<_> = std::fs::read_dir(&dir)
        .expect("sim/mutations exists")
        .map(|e| e.expect("a directory entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "patch"))
        .collect();
    patches.sort();
    assert!(!patches.is_empty(), "no patch in {}", dir.display());
    let git = Command::new("git")
        .arg("-C")
        .arg(&root)
        .args(["rev-parse", "--is-inside-work-tree"])
        .output();
    if !git.is_ok_and(|o| o.status.success()) {
        // A source tree without git (a tarball) or a machine without it: `sim/mutations/run`
        // cannot run there either, so there is nothing to keep applicable.
        eprintln!("not a git work tree (or no git): the mutation patches are not checked");
        return;
    }
    let mut stale = Vec::new();
    for patch in &patches {
        let o = Command::new("git")
            .arg("-C")
            .arg(&root)
            .args(["apply", "--check"])
            .arg(patch)
            .output()
            .expect("git runs");
        if !o.status.success() {
            stale.push(format!(
                "{}: {}",
                patch.file_name().unwrap().to_string_lossy(),
                String::from_utf8_lossy(&o.stderr).trim()
            ));
        }
    }
    assert!(
        stale.is_empty(),
        "mutation patches that no longer apply (make each again on the changed code):\n{}",
        stale.join("\n")
    );
}
