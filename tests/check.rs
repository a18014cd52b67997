//! The verbs that run many searches: `check` against expected verdicts (the known results run
//! here, in CI), `matrix`, and `merge` of sharded matrices.

mod common;

use common::Scratch;
use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Command, Output};

/// Runs the binary in `dir` (so that relative output paths, which reports embed in their replay
/// command, are the same for every run compared).
fn lockcheck_in(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_lockcheck"))
        .current_dir(dir)
        .args(args)
        .output()
        .expect("the binary runs")
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

#[test]
fn the_known_results_hold() {
    // The design's table of known results (expectations/known-results.toml): every known-unsafe
    // cell is found within its budget, and nothing is found in the known-safe ones.
    let scratch = Scratch::new("known");
    let file = Path::new(env!("CARGO_MANIFEST_DIR")).join("expectations/known-results.toml");
    let out = scratch.0.join("out");
    let o = lockcheck_in(
        &scratch.0,
        &[
            "check",
            file.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
        ],
    );
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert!(!text(&o).contains("FAIL"), "{}", text(&o));
}

const WRONG: &str = r#"
[[expect]]
name = "single-redis-pause-said-safe"
algorithm = "single-redis"
faults = ["pause"]
cases = 100
expect = "not-found"

[[expect]]
name = "single-redis-fencing-said-unsafe"
algorithm = "single-redis"
params = { fencing = true }
faults = ["pause"]
cases = 20
expect = "unsafe"

[[expect]]
name = "single-redis-none"
algorithm = "single-redis"
faults = ["none"]
cases = 10
expect = "not-found"
"#;

#[test]
fn a_wrong_expectation_exits_1_naming_the_report() {
    let scratch = Scratch::new("wrong");
    let file = scratch.file("wrong.toml", WRONG);
    let o = lockcheck_in(
        &scratch.0,
        &["check", file.to_str().unwrap(), "--out", "out"],
    );
    let all = text(&o);
    assert_eq!(o.status.code(), Some(1), "{all}");
    let fail = |name: &str| {
        all.lines()
            .find(|l| l.starts_with("FAIL") && l.contains(name))
            .unwrap_or_else(|| panic!("no FAIL line for {name}: {all}"))
            .to_string()
    };
    assert!(
        fail("single-redis-pause-said-safe").contains("got UNSAFE"),
        "{all}"
    );
    assert!(fail("single-redis-fencing-said-unsafe").contains("not found in 20 cases"));
    assert!(all
        .lines()
        .any(|l| l.starts_with("ok") && l.contains("single-redis-none")));
    // The unexpected violation's report is named, and it is there.
    let report = all
        .lines()
        .find_map(|l| l.trim().strip_prefix("report: "))
        .expect("the report path is printed");
    assert!(scratch.0.join(report).is_file(), "{report}: {all}");
}

/// A story entry: one scenario file, run once, with the verdict it must have.
#[test]
fn a_wrong_story_expectation_exits_1_naming_its_report_and_a_right_one_passes() {
    let scratch = Scratch::new("stories");
    let story = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("sim/tests/scenarios/etcd-waiter-whose-lease-ran-out.json"),
    )
    .unwrap();
    std::fs::create_dir_all(scratch.0.join("stories")).unwrap();
    scratch.file("stories/waiter.json", &story);
    let file = scratch.file(
        "stories.toml",
        r#"
[[expect]]
name = "etcd-3-4-said-safe"
scenario = "stories/waiter.json"
variant = "etcd-3.4"
expect = "safe"

[[expect]]
name = "etcd-3-5-safe"
scenario = "stories/waiter.json"
variant = "etcd-3.5"
expect = "safe"
"#,
    );
    let o = lockcheck_in(
        &scratch.0,
        &["check", file.to_str().unwrap(), "--out", "out"],
    );
    let all = text(&o);
    assert_eq!(o.status.code(), Some(1), "{all}");
    let fail = all
        .lines()
        .find(|l| l.starts_with("FAIL") && l.contains("etcd-3-4-said-safe"))
        .unwrap_or_else(|| panic!("no FAIL line: {all}"));
    assert!(fail.contains("expected safe, got UNSAFE"), "{all}");
    assert!(all.contains("two holders at once"), "{all}");
    assert!(all
        .lines()
        .any(|l| l.starts_with("ok") && l.contains("etcd-3-5-safe")));
    let report = all
        .lines()
        .find_map(|l| l.trim().strip_prefix("report: "))
        .expect("the report path is printed");
    assert!(scratch.0.join(report).is_file(), "{report}: {all}");
}

/// Issue 39 item 3: a story that ends in a deadlock and a stuck waiter is named by its worst
/// finding (DEADLOCK, not UNSAFE), and still gives its safety answer; an entry expecting a
/// liveness finding is named by that finding's word.
#[test]
fn a_liveness_finding_says_deadlock_and_still_gives_the_safety_answer() {
    let scratch = Scratch::new("liveness");
    let story = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("sim/tests/scenarios/redis-fair-dead-waiter-clock-ahead.json"),
    )
    .unwrap();
    std::fs::create_dir_all(scratch.0.join("stories")).unwrap();
    scratch.file("stories/fair.json", &story);
    let file = scratch.file(
        "stories.toml",
        r#"
[[expect]]
name = "fair-said-live"
scenario = "stories/fair.json"
safety_only = false
expect = "safe"

[[expect]]
name = "fair-said-stuck-free"
scenario = "stories/fair.json"
safety_only = false
violation = "stuck"
expect = "safe"
"#,
    );
    let o = lockcheck_in(
        &scratch.0,
        &["check", file.to_str().unwrap(), "--out", "out"],
    );
    let all = text(&o);
    assert_eq!(o.status.code(), Some(1), "{all}");
    let fail = |name: &str| {
        all.lines()
            .find(|l| l.starts_with("FAIL") && l.contains(name))
            .unwrap_or_else(|| panic!("no FAIL line for {name}: {all}"))
            .to_string()
    };
    let live = fail("fair-said-live");
    assert!(live.contains("expected safe, got DEADLOCK"), "{all}");
    assert!(!live.contains("UNSAFE"), "{all}");
    assert!(live.contains("safety held in this run"), "{all}");
    let stuck = fail("fair-said-stuck-free");
    assert!(
        stuck.contains("got STUCK (the story's run: stuck)"),
        "{all}"
    );
    assert!(stuck.contains("safety held in this run"), "{all}");
}

#[test]
fn a_malformed_expectations_file_exits_2_naming_the_line() {
    let scratch = Scratch::new("malformed");
    for (i, (body, line, needle)) in [
        (
            "[[expect]]\nname = \"a\"\nalgorithm = \"paxos\"\nfaults = [\"pause\"]\ncases = 5\nexpect = \"unsafe\"\n",
            3,
            "paxos",
        ),
        (
            "[[expect]]\nname = \"a\"\nalgorithm = \"redlock\"\nfaults = [\"pause\"]\ncases = 5\nexpect = \"maybe\"\n",
            6,
            "maybe",
        ),
        (
            "[[expect]]\nname = \"a\"\nalgorithm = \"redlock\"\nfaults = [\"pause\"]\ncases = 5\nexpect = \"safe\"\n",
            1,
            "never \"safe\"",
        ),
        (
            "# a comment\n[[expect]]\nname = \"a\"\nalgorithm = \"redlock\"\nparams = { fencing = true }\nfaults = [\"pause\"]\ncases = 5\nexpect = \"unsafe\"\n",
            2,
            "fencing",
        ),
        ("[[expect]\nname = 1\n", 1, ""),
    ]
    .into_iter()
    .enumerate()
    {
        let name = format!("bad{i}.toml");
        let file = scratch.file(&name, body);
        let o = lockcheck_in(&scratch.0, &["check", file.to_str().unwrap(), "--out", "out"]);
        let all = text(&o);
        assert_eq!(o.status.code(), Some(2), "{body}: {all}");
        assert!(all.contains(&format!("{name}:{line}: ")), "{body}: {all}");
        assert!(all.contains(needle), "{body}: {all}");
        assert!(!all.contains("panicked"), "{all}");
    }
}

/// Every file under `dir` (reports, timelines, the matrix, the regressions), by path relative to
/// `dir`.
fn files(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    fn walk(root: &Path, dir: &Path, into: &mut BTreeMap<String, Vec<u8>>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                walk(root, &path, into);
            } else {
                let name = path
                    .strip_prefix(root)
                    .unwrap()
                    .to_string_lossy()
                    .into_owned();
                into.insert(name, std::fs::read(&path).unwrap());
            }
        }
    }
    let mut all = BTreeMap::new();
    walk(dir, dir, &mut all);
    all
}

/// The entries of a regression file.
fn regressions(bytes: &[u8]) -> Vec<serde_json::Value> {
    let file: serde_json::Value = serde_json::from_slice(bytes).unwrap();
    file["regressions"].as_array().unwrap().clone()
}

const SMALL: &[&str] = &[
    "matrix",
    "--algorithms",
    "single-redis,zk-sequential",
    "--faults",
    "none,pause,failover",
    "--cases",
    "40",
    // Seed 7: the lowest failing cases of the UNSAFE cells fall in both shards (single-redis
    // failover's in shard 1, the pauses' in shard 2), and shards find higher ones too.
    "--seed",
    "7",
    "--out",
    "out",
];

fn small_matrix(dir: &Path, extra: &[&str]) -> BTreeMap<String, Vec<u8>> {
    std::fs::create_dir_all(dir).unwrap();
    let args: Vec<&str> = SMALL.iter().chain(extra).copied().collect();
    let o = lockcheck_in(dir, &args);
    assert_eq!(o.status.code(), Some(0), "{args:?}: {}", text(&o));
    files(&dir.join("out"))
}

#[test]
fn threads_and_merged_shards_write_the_same_matrix_and_reports() {
    let scratch = Scratch::new("shards");
    let one = small_matrix(&scratch.sub("one"), &["--jobs", "1"]);
    let two = small_matrix(&scratch.sub("two"), &["--jobs", "2"]);
    let json = String::from_utf8_lossy(&one["matrix.json"]).into_owned();
    assert!(json.contains("\"verdict\": \"unsafe\""), "{json}");
    assert!(json.contains("\"verdict\": \"not_found\""), "{json}");
    assert!(json.contains("\"verdict\": \"skipped\""), "{json}");
    assert!(
        one.keys().any(|k| k.starts_with("single-redis-pause-")),
        "{:?}",
        one.keys()
    );
    assert_eq!(one, two);

    assert!(
        one.keys().any(|k| k.starts_with("regressions/")),
        "{:?}",
        one.keys()
    );

    let merged = scratch.sub("merged");
    let s1 = small_matrix(&merged.join("s1"), &["--shard", "1/2"]);
    let s2 = small_matrix(&merged.join("s2"), &["--shard", "2/2"]);
    let o = lockcheck_in(&merged, &["merge", "s2/out", "s1/out", "--out", "out"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let joined = files(&merged.join("out"));
    // The matrix, every report and timeline: byte for byte the unsharded run's.
    let outside = |tree: &BTreeMap<String, Vec<u8>>| -> BTreeMap<String, Vec<u8>> {
        tree.iter()
            .filter(|(k, _)| !k.starts_with("regressions/"))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect()
    };
    assert_eq!(outside(&one), outside(&joined));
    // The regressions: the same files, each beginning with the unsharded run's failure, then the
    // failures the shards found past it (a shard's slice fails at a higher case too), none lost.
    let names = |tree: &BTreeMap<String, Vec<u8>>| -> Vec<String> {
        tree.keys()
            .filter(|k| k.starts_with("regressions/"))
            .cloned()
            .collect()
    };
    assert_eq!(names(&one), names(&joined));
    let mut past = 0;
    for name in names(&one) {
        let (whole, kept) = (regressions(&one[&name]), regressions(&joined[&name]));
        assert_eq!(whole[..], kept[..whole.len()], "{name}");
        for shard in [&s1, &s2] {
            for r in shard.get(&name).map(|b| regressions(b)).unwrap_or_default() {
                assert!(kept.contains(&r), "{name}: a shard's failure is lost: {r}");
            }
        }
        past += kept.len() - whole.len();
    }
    assert!(
        past > 0,
        "the shards found no failure past the unsharded search's"
    );
}

#[test]
fn merge_refuses_shards_that_do_not_fit() {
    let scratch = Scratch::new("misfit");
    for (dir, extra) in [
        ("a", vec!["--shard", "1/2", "--seed", "3", "--cases", "10"]),
        ("b", vec!["--shard", "2/2", "--seed", "3", "--cases", "10"]),
        ("c", vec!["--shard", "2/2", "--seed", "4", "--cases", "10"]),
        ("d", vec!["--shard", "2/3", "--seed", "3", "--cases", "10"]),
        ("e", vec!["--shard", "2/2", "--seed", "3", "--cases", "12"]),
        ("whole", vec!["--seed", "3", "--cases", "10"]),
    ] {
        let mut args = vec![
            "matrix",
            "--algorithms",
            "single-redis",
            "--faults",
            "none",
            "--out",
            "out",
        ];
        args.extend(extra);
        let o = lockcheck_in(&scratch.sub(dir), &args);
        assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    }
    // Shard 2/2's matrix.json edited, as a mix of runs would leave it: a cell that ran another
    // number of cases than the slice has, and a failing case that is not the shard's.
    let matrix = std::fs::read_to_string(scratch.0.join("b/out/matrix.json")).unwrap();
    let json: serde_json::Value = serde_json::from_str(&matrix).unwrap();
    let tampered = |name: &str, edit: &dyn Fn(&mut serde_json::Value)| {
        let mut json = json.clone();
        edit(&mut json["cells"][0]);
        let dir = scratch.sub(&format!("{name}/out"));
        std::fs::write(dir.join("matrix.json"), json.to_string()).unwrap();
    };
    tampered("fewer", &|cell| cell["cases"] = 4.into());
    tampered("foreign", &|cell| {
        *cell = serde_json::json!({
            "id": cell["id"], "algorithm": cell["algorithm"], "fencing": cell["fencing"],
            "profile": cell["profile"], "params": cell["params"], "verdict": "unsafe",
            "cases": 1, "case_index": 2, "story": "?", "report": "x.json",
        })
    });
    tampered("late", &|cell| {
        *cell = serde_json::json!({
            "id": cell["id"], "algorithm": cell["algorithm"], "fencing": cell["fencing"],
            "profile": cell["profile"], "params": cell["params"], "verdict": "unsafe",
            "cases": 6, "case_index": 11, "story": "?", "report": "x.json",
        })
    });
    for (dirs, needle) in [
        (vec!["a/out"], "missing"),
        (vec!["a/out", "a/out"], "given twice"),
        (vec!["a/out", "c/out"], "seeds"),
        (vec!["a/out", "d/out"], "shard counts"),
        (vec!["a/out", "e/out"], "budgets"),
        (vec!["whole/out"], "not a shard"),
        (vec!["a/out", "nowhere"], "nowhere"),
        (
            vec!["a/out", "fewer/out"],
            "4 cases run where the shard's slice has 5",
        ),
        (
            vec!["a/out", "foreign/out"],
            "case 2 is not in shard 2/2's slice",
        ),
        (vec!["a/out", "late/out"], "past the budget"),
    ] {
        let mut args = vec!["merge"];
        args.extend(&dirs);
        args.extend(["--out", "merged"]);
        let o = lockcheck_in(&scratch.0, &args);
        assert_eq!(o.status.code(), Some(2), "{dirs:?}: {}", text(&o));
        assert!(text(&o).contains(needle), "{dirs:?}: {}", text(&o));
        assert!(!scratch.0.join("merged").exists(), "{dirs:?}: written");
    }
    let o = lockcheck_in(&scratch.0, &["merge", "a/out", "b/out", "--out", "merged"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
}

/// Copies the files of `from` (a shard's output directory) into `to`.
fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let path = entry.unwrap().path();
        let target = to.join(path.file_name().unwrap());
        if path.is_dir() {
            copy_dir(&path, &target);
        } else {
            std::fs::copy(&path, &target).unwrap();
        }
    }
}

/// Issue 40 item 7: `merge` reads each shard's reports inside that shard's directory only (a
/// report path with `..`, an absolute one, a symbolic link out: refused), and checks each UNSAFE
/// cell against its report: a report swapped for another cell's, or edited, is refused naming
/// the cell, before anything is written.
#[test]
fn merge_refuses_a_report_outside_its_shard_or_not_the_cells_own() {
    let scratch = Scratch::new("merge-reports");
    small_matrix(&scratch.0.join("s1"), &["--shard", "1/2"]);
    small_matrix(&scratch.0.join("s2"), &["--shard", "2/2"]);
    let shard = scratch.0.join("s2/out");
    let matrix: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(shard.join("matrix.json")).unwrap()).unwrap();
    let found: Vec<usize> = matrix["cells"]
        .as_array()
        .unwrap()
        .iter()
        .enumerate()
        .filter(|(_, c)| c["verdict"] == "unsafe")
        .map(|(i, _)| i)
        .collect();
    let (a, b) = (found[0], *found.last().unwrap());
    let cell = |i: usize| matrix["cells"][i]["id"].as_str().unwrap().to_string();
    let report = |i: usize| matrix["cells"][i]["report"].as_str().unwrap().to_string();
    assert_ne!(cell(a), cell(b));
    let ok = lockcheck_in(
        &scratch.0,
        &["merge", "s1/out", "s2/out", "--out", "merged"],
    );
    assert_eq!(ok.status.code(), Some(0), "{}", text(&ok));
    std::fs::remove_dir_all(scratch.0.join("merged")).unwrap();

    type Tamper<'a> = Box<dyn Fn(&Path, &mut serde_json::Value) + 'a>;
    let edit_report = |edit: fn(&mut serde_json::Value)| -> Tamper<'_> {
        Box::new(move |dir: &Path, _: &mut serde_json::Value| {
            let path = dir.join(report(a));
            let mut json: serde_json::Value =
                serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
            edit(&mut json);
            std::fs::write(&path, serde_json::to_string_pretty(&json).unwrap()).unwrap();
        })
    };
    let cases: Vec<(&str, Tamper, &str)> = vec![
        (
            "up",
            Box::new(|dir: &Path, m: &mut serde_json::Value| {
                std::fs::copy(dir.join(report(a)), dir.join("../stolen.json")).unwrap();
                m["cells"][a]["report"] = "../stolen.json".into();
            }),
            "is not a file of the shard's own directory",
        ),
        (
            "absolute",
            Box::new(|dir: &Path, m: &mut serde_json::Value| {
                let outside = dir.join("../stolen.json");
                std::fs::copy(dir.join(report(a)), &outside).unwrap();
                m["cells"][a]["report"] = outside.to_str().unwrap().into();
            }),
            "is not a file of the shard's own directory",
        ),
        (
            "link",
            Box::new(|dir: &Path, _: &mut serde_json::Value| {
                let outside = dir.join("../stolen.json");
                std::fs::rename(dir.join(report(a)), &outside).unwrap();
                std::os::unix::fs::symlink(&outside, dir.join(report(a))).unwrap();
            }),
            "is a symbolic link",
        ),
        (
            "other-cell",
            Box::new(|_: &Path, m: &mut serde_json::Value| {
                m["cells"][a]["report"] = report(b).into();
            }),
            "is not this cell's",
        ),
        (
            "swapped",
            Box::new(|dir: &Path, _: &mut serde_json::Value| {
                std::fs::copy(dir.join(report(b)), dir.join(report(a))).unwrap();
            }),
            "is not this cell's",
        ),
        (
            "summary",
            edit_report(|r| r["summary"] = "no violation in this run".into()),
            "was edited: it does not replay as written (summary)",
        ),
        (
            "violations",
            edit_report(|r| r["violations"] = serde_json::json!([])),
            "tells another story than the cell",
        ),
        (
            "history",
            edit_report(|r| r["history"][3]["true_ns"] = 1.into()),
            "was edited: its history does not have the hash it records",
        ),
        (
            "story",
            Box::new(|_: &Path, m: &mut serde_json::Value| {
                m["cells"][a]["story"] = "a story of another run".into();
            }),
            "tells another story than the cell",
        ),
    ];
    for (name, tamper, needle) in cases {
        let dir = scratch.0.join(name).join("out");
        copy_dir(&shard, &dir);
        let mut m = matrix.clone();
        tamper(&dir, &mut m);
        std::fs::write(
            dir.join("matrix.json"),
            serde_json::to_string_pretty(&m).unwrap(),
        )
        .unwrap();
        let shard_out = format!("{name}/out");
        let o = lockcheck_in(
            &scratch.0,
            &["merge", "s1/out", &shard_out, "--out", "merged"],
        );
        let all = text(&o);
        assert_eq!(o.status.code(), Some(2), "{name}: {all}");
        assert!(
            all.contains(&format!("cell {}: report", cell(a))),
            "{name}: {all}"
        );
        assert!(all.contains(needle), "{name}: {all}");
        assert!(!scratch.0.join("merged").exists(), "{name}: written");
    }
}

#[test]
fn matrix_usage_errors_exit_2() {
    let scratch = Scratch::new("usage");
    for (args, needle) in [
        (vec!["--algorithms", "paxos"], "paxos"),
        (vec!["--faults", "meteor"], "meteor"),
        (vec!["--cases", "0"], "--cases"),
        (
            vec!["--cases", "5", "--budget-seconds", "5"],
            "--budget-seconds",
        ),
        (vec!["--budget-seconds", "5", "--shard", "1/2"], "--shard"),
        (vec!["--shard", "3/2"], "--shard"),
        (vec!["--jobs", "0"], "--jobs"),
    ] {
        let mut all = vec!["matrix", "--out", "out"];
        all.extend(&args);
        let o = lockcheck_in(&scratch.0, &all);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", text(&o));
        assert!(text(&o).contains(needle), "{args:?}: {}", text(&o));
    }
    assert!(
        !scratch.0.join("out").exists(),
        "nothing is written on bad input"
    );
}

#[test]
fn a_persisted_failure_is_replayed_first_and_keeps_its_cell_unsafe() {
    let scratch = Scratch::new("regressions");
    let args = |cases: &'static str| {
        vec![
            "matrix",
            "--algorithms",
            "single-redis",
            "--faults",
            "pause",
            "--cases",
            cases,
            "--out",
            "out",
        ]
    };
    let o = lockcheck_in(&scratch.0, &args("40"));
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let first = files(&scratch.0.join("out"));
    let persisted = scratch.0.join("out/regressions/single-redis-pause.json");
    assert!(persisted.is_file(), "{}", text(&o));

    // The same command again: the regression is replayed first, and the search still decides
    // the report, so every file is the same as the fresh run's.
    let o = lockcheck_in(&scratch.0, &args("40"));
    assert!(text(&o).contains("persisted failure"), "{}", text(&o));
    assert_eq!(first, files(&scratch.0.join("out")));

    // One case is too few for the search to reach the failure; the regression still finds it.
    let o = lockcheck_in(&scratch.0, &args("1"));
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let json = std::fs::read_to_string(scratch.0.join("out/matrix.json")).unwrap();
    assert!(json.contains("\"verdict\": \"unsafe\""), "{json}");
    assert!(!json.contains("case_index"), "{json}");
    let md = std::fs::read_to_string(scratch.0.join("out/matrix.md")).unwrap();
    assert!(md.contains("A persisted regression still fails"), "{md}");
}

#[test]
fn a_wall_time_budget_records_the_cases_each_cell_ran() {
    let scratch = Scratch::new("seconds");
    let matrix = |dir: &Path, budget: &[&str]| -> serde_json::Value {
        let mut args = vec![
            "matrix",
            "--algorithms",
            "single-redis",
            "--faults",
            "none,pause",
            "--out",
            "out",
        ];
        args.extend(budget);
        let o = lockcheck_in(dir, &args);
        assert_eq!(o.status.code(), Some(0), "{args:?}: {}", text(&o));
        serde_json::from_str(&std::fs::read_to_string(dir.join("out/matrix.json")).unwrap())
            .unwrap()
    };
    let timed_dir = scratch.sub("timed");
    let timed = matrix(&timed_dir, &["--budget-seconds", "1"]);
    assert_eq!(timed["budget"]["seconds"], 1);
    let cells = timed["cells"].as_array().unwrap();
    assert_eq!(cells.len(), 4, "{timed}");
    // Each cell again with `--cases` set to the cases it recorded: the same verdict, the same
    // counts and simulated time, the same report byte for byte. (A rerun searches every cell
    // with that many cases; only the cell that recorded them is compared.)
    for cell in cells {
        let cases = cell["cases"].as_u64().unwrap();
        assert!(cases >= 1, "{cell}");
        let dir = scratch.sub(&format!("cases-{}-{cases}", cell["id"].as_str().unwrap()));
        let rerun = matrix(&dir, &["--cases", &cases.to_string()]);
        let again = rerun["cells"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["id"] == cell["id"])
            .unwrap();
        assert_eq!(cell, again, "--cases {cases}");
        if let Some(report) = cell["report"].as_str() {
            for file in [report.to_string(), report.replace(".json", ".html")] {
                assert_eq!(
                    std::fs::read(timed_dir.join("out").join(&file)).unwrap(),
                    std::fs::read(dir.join("out").join(&file)).unwrap(),
                    "{file}"
                );
            }
        }
    }
}

/// Issue 39 item 1: the matrix takes the client a team writes as a setting of every cell
/// (`--careful always`): a compare-and-PEXPIRE watchdog stays safe under pauses there, an
/// owner-less extend does not; the setting is in `matrix.json`, the matrix's command and each
/// UNSAFE cell's rerun command, which finds the same case again.
#[test]
fn the_matrix_takes_careful_clients_as_a_setting_of_every_cell() {
    let scratch = Scratch::new("careful-matrix");
    let examples = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/redis-script");
    let rows = format!(
        "redis-script:{},redis-script:{}",
        examples.join("extend-any-owner.toml").display(),
        examples.join("watchdog.json").display()
    );
    let o = lockcheck_in(
        &scratch.0,
        &[
            "matrix",
            "--algorithms",
            &rows,
            "--faults",
            "pause",
            "--cases",
            "300",
            "--careful",
            "always",
            "--out",
            "out",
        ],
    );
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let md = std::fs::read_to_string(scratch.0.join("out/matrix.md")).unwrap();
    let row = |file: &str| {
        md.lines()
            .find(|l| l.starts_with("| redis-script:") && l.contains(file))
            .unwrap_or_else(|| panic!("no row {file}: {md}"))
            .to_string()
    };
    assert!(row("extend-any-owner.toml").contains("UNSAFE"), "{md}");
    assert!(!row("watchdog.json").contains("UNSAFE"), "{md}");
    assert!(md.contains("--careful always`"), "{md}");
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(scratch.0.join("out/matrix.json")).unwrap())
            .unwrap();
    assert_eq!(json["careful"], "always");
    let rerun = md
        .lines()
        .find_map(|l| l.split("rerun: `").nth(1))
        .unwrap_or_else(|| panic!("no rerun command: {md}"))
        .trim_end_matches('`')
        .to_string();
    assert!(rerun.contains(" --careful always "), "{rerun}");
    let mut args: Vec<&str> = rerun.split(' ').skip(1).collect();
    args.extend(["--out", "again"]);
    let o = lockcheck_in(&scratch.0, &args);
    assert_eq!(o.status.code(), Some(1), "{rerun}: {}", text(&o));
}
