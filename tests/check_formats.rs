//! `lockcheck check` for CI (issue 39 item 5): its output formats read by real parsers, `--only`,
//! the timeline beside every FAIL's report, and `--accept`'s entries parsed back.

mod common;

use common::Scratch;
use lockcheck_core::verdict::VerdictKind;
use lockcheck_search::expectations::{self, Expectation};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// Runs the binary in `dir`, so that the report paths it prints are relative to it.
fn lockcheck_in(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_lockcheck"))
        .current_dir(dir)
        .args(args)
        .output()
        .expect("the binary runs")
}

fn stdout(o: &Output) -> String {
    String::from_utf8(o.stdout.clone()).expect("standard output is UTF-8")
}

fn text(o: &Output) -> String {
    format!("{}{}", stdout(o), String::from_utf8_lossy(&o.stderr))
}

/// Four entries, three of them wrong: a search said not-found that is unsafe (its `about` full of
/// characters XML and GitHub's commands must escape, its seed the file's), a fenced search said
/// unsafe that finds nothing in its budget, one right, and a story said safe that is unsafe.
/// Comments, one on the `expect` line itself, which `--accept` must keep.
const FILE: &str = r#"# CI's expectations
seed = 5

[[expect]]
name = "pause-said-safe"
about = "a <pause> & \"quotes\", 'apostrophes', 100%: more"
algorithm = "single-redis"
faults = ["pause"]
cases = 100
expect = "not-found"   # we hoped

# a fenced lock next
[[expect]]
name = "fencing-said-unsafe"
algorithm = "single-redis"
params = { fencing = true }
faults = ["pause"]
cases = 20
seed = 3
'expect' = 'unsafe'

[[expect]]
name = "none"
algorithm = "single-redis"
faults = ["none"]
cases = 10
expect = "not-found"

[[expect]]
name = "story-said-safe"
scenario = "stories/waiter.json"
variant = "etcd-3.4"
expect = "safe"
"#;

const ABOUT: &str = "a <pause> & \"quotes\", 'apostrophes', 100%: more";

/// A scratch directory holding [`FILE`] (as `ci.toml`) and its story.
fn scratch(name: &str) -> (Scratch, PathBuf) {
    let scratch = Scratch::new(name);
    let story = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("sim/tests/scenarios/etcd-waiter-whose-lease-ran-out.json"),
    )
    .unwrap();
    std::fs::create_dir_all(scratch.0.join("stories")).unwrap();
    scratch.file("stories/waiter.json", &story);
    let file = scratch.file("ci.toml", FILE);
    (scratch, file)
}

/// `check ci.toml --out out` with `extra`.
fn check(dir: &Path, extra: &[&str]) -> Output {
    let mut args = vec!["check", "ci.toml", "--out", "out"];
    args.extend(extra);
    lockcheck_in(dir, &args)
}

#[test]
fn every_format_says_the_same_verdicts_in_its_own_syntax() {
    let (scratch, _) = scratch("formats");
    let dir = &scratch.0;

    // text: a FAIL names its report and, beside it, the timeline; both are there.
    let o = check(dir, &[]);
    let all = text(&o);
    assert_eq!(o.status.code(), Some(1), "{all}");
    assert_eq!(all.lines().filter(|l| l.starts_with("FAIL")).count(), 3);
    for fail in ["pause-said-safe", "story-said-safe"] {
        let at = all
            .lines()
            .position(|l| l.starts_with("FAIL") && l.contains(fail))
            .unwrap_or_else(|| panic!("no FAIL line for {fail}: {all}"));
        let under: Vec<&str> = all.lines().skip(at + 1).take(4).map(str::trim).collect();
        let report = under
            .iter()
            .find_map(|l| l.strip_prefix("report: "))
            .unwrap_or_else(|| panic!("{fail}: no report line: {all}"));
        let timeline = under
            .iter()
            .find_map(|l| l.strip_prefix("timeline: "))
            .unwrap_or_else(|| panic!("{fail}: no timeline line: {all}"));
        assert_eq!(timeline, report.replace(".json", ".html"), "{all}");
        assert!(dir.join(report).is_file(), "{report}");
        assert!(dir.join(timeline).is_file(), "{timeline}");
    }
    assert!(all.contains(&format!("expected because: {ABOUT}")), "{all}");
    assert!(
        all.contains("check: 4 entries, 1 as expected, 3 not;"),
        "{all}"
    );

    // json: one document, nothing else on standard output.
    let o = check(dir, &["--format", "json"]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    let doc: serde_json::Value = serde_json::from_str(&stdout(&o)).expect("one JSON document");
    assert_eq!(doc["file"], "ci.toml");
    let entries = doc["entries"].as_array().unwrap();
    let names: Vec<&str> = entries
        .iter()
        .map(|e| e["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "pause-said-safe",
            "fencing-said-unsafe",
            "none",
            "story-said-safe"
        ]
    );
    let lines: Vec<u64> = entries
        .iter()
        .map(|e| e["line"].as_u64().unwrap())
        .collect();
    assert_eq!(lines, [4, 13, 22, 29]);
    let status: Vec<&str> = entries
        .iter()
        .map(|e| e["status"].as_str().unwrap())
        .collect();
    assert_eq!(status, ["fail", "fail", "ok", "fail"]);
    let (unsafe_, lost, story) = (&entries[0], &entries[1], &entries[3]);
    assert_eq!(unsafe_["expect"], "not-found");
    assert_eq!(unsafe_["found"]["word"], "UNSAFE");
    assert!(unsafe_["found"]["violations"]["mutual_exclusion"].as_u64() >= Some(1));
    assert_eq!(unsafe_["about"], ABOUT);
    assert_eq!(lost["expected"], "UNSAFE");
    assert_eq!(lost["found"]["word"], "not found");
    assert!(lost["report"].is_null() && lost["timeline"].is_null());
    assert_eq!(lost["cases"], 20);
    assert_eq!(story["check"], "story");
    assert_eq!(story["found"]["word"], "UNSAFE");
    assert!(story["story"]
        .as_str()
        .unwrap()
        .contains("two holders at once"));
    for e in [unsafe_, story] {
        let (report, timeline) = (
            e["report"].as_str().unwrap(),
            e["timeline"].as_str().unwrap(),
        );
        assert_eq!(timeline, report.replace(".json", ".html"));
        assert!(dir.join(timeline).is_file(), "{timeline}");
    }
    assert_eq!(doc["totals"]["entries"], 4);
    assert_eq!(doc["totals"]["ok"], 1);
    assert_eq!(doc["totals"]["failed"], 3);

    // junit: read by a real XML parser.
    let o = check(dir, &["--format", "junit"]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    let xml = stdout(&o);
    let parsed = roxmltree::Document::parse(&xml).unwrap_or_else(|e| panic!("{e}: {xml}"));
    let root = parsed.root_element();
    assert_eq!(root.tag_name().name(), "testsuites");
    let suites: Vec<_> = root.children().filter(|n| n.is_element()).collect();
    assert_eq!(suites.len(), 1, "{xml}");
    let suite = suites[0];
    assert_eq!(suite.tag_name().name(), "testsuite");
    assert_eq!(suite.attribute("name"), Some("lockcheck check ci.toml"));
    assert_eq!(suite.attribute("tests"), Some("4"));
    assert_eq!(suite.attribute("failures"), Some("3"));
    let cases: Vec<_> = suite
        .children()
        .filter(|n| n.has_tag_name("testcase"))
        .collect();
    assert_eq!(cases.len(), 4, "{xml}");
    let names: Vec<&str> = cases.iter().filter_map(|c| c.attribute("name")).collect();
    assert_eq!(names, names_of(entries));
    for (case, line) in cases.iter().zip(["4", "13", "22", "29"]) {
        assert_eq!(case.attribute("classname"), Some("lockcheck.check"));
        assert_eq!(case.attribute("file"), Some("ci.toml"));
        assert_eq!(case.attribute("line"), Some(line));
        let time: f64 = case.attribute("time").unwrap().parse().unwrap();
        assert!(time >= 0.0);
    }
    let failures: Vec<_> = parsed
        .descendants()
        .filter(|n| n.has_tag_name("failure"))
        .collect();
    assert_eq!(failures.len(), 3, "{xml}");
    assert!(cases[2].children().all(|n| !n.is_element()), "{xml}");
    let first = failures[0];
    assert_eq!(
        first.parent().unwrap().attribute("name"),
        Some("pause-said-safe")
    );
    let message = first.attribute("message").unwrap();
    assert!(
        message.starts_with("expected not found, got UNSAFE (mutual_exclusion)"),
        "{message}"
    );
    let body = first.text().unwrap();
    assert!(
        body.starts_with(&format!("expected because: {ABOUT}\n")),
        "{body}"
    );
    assert!(body.contains("\ntimeline: "), "{body}");
    assert_eq!(
        failures[2].attribute("message"),
        Some("expected safe, got UNSAFE (the story's run: mutual_exclusion)")
    );

    // github: an ::error per failure at its line, one line each, the ok line and the summary.
    let o = check(dir, &["--format", "github"]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    let out = stdout(&o);
    let errors: Vec<&str> = out.lines().filter(|l| l.starts_with("::error ")).collect();
    assert_eq!(errors.len(), 3, "{out}");
    assert!(errors[0].starts_with(
        "::error file=ci.toml,line=4,title=lockcheck check pause-said-safe::expected not found, \
         got UNSAFE"
    ));
    assert!(errors[0]
        .contains("%0Aexpected because: a <pause> & \"quotes\", 'apostrophes', 100%25: more%0A"));
    assert!(errors[0].contains("%0Atimeline: out/"), "{out}");
    assert!(
        errors[1].starts_with("::error file=ci.toml,line=13,"),
        "{out}"
    );
    assert!(out
        .lines()
        .any(|l| l.starts_with("ok    none (ci.toml:22)")));
    assert!(out.lines().any(|l| l.starts_with("check: 4 entries")));
    assert_eq!(out.lines().count(), 5, "{out}");
}

fn names_of(entries: &[serde_json::Value]) -> Vec<&str> {
    entries
        .iter()
        .map(|e| e["name"].as_str().unwrap())
        .collect()
}

#[test]
fn only_runs_the_named_entries_and_an_unknown_name_is_a_usage_error() {
    let (scratch, _) = scratch("only");
    let dir = &scratch.0;
    let o = check(dir, &["--only", "none,nonesuch", "--format", "json"]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(o.stdout.is_empty(), "{}", text(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("'nonesuch'"), "{err}");
    assert!(
        err.contains("pause-said-safe, fencing-said-unsafe, none, story-said-safe"),
        "{err}"
    );
    assert!(!dir.join("out").exists(), "nothing runs on bad input");

    let o = check(dir, &["--only", "none"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert_eq!(
        stdout(&o).lines().next().unwrap_or(""),
        "ok    none (ci.toml:22): not found in 10 cases (0.1 h simulated)"
    );
    assert!(stdout(&o).contains("check: 1 entries, 1 as expected, 0 not;"));

    for args in [
        &["--only", "none,story-said-safe"][..],
        &["--only", "none", "--only", "story-said-safe"],
    ] {
        let o = check(dir, args);
        assert_eq!(o.status.code(), Some(1), "{args:?}: {}", text(&o));
        let out = stdout(&o);
        let run: Vec<&str> = out
            .lines()
            .filter(|l| l.starts_with("ok") || l.starts_with("FAIL"))
            .filter_map(|l| l.split_whitespace().nth(1))
            .collect();
        assert_eq!(run, ["none", "story-said-safe"], "{args:?}");
    }
}

/// The entry as run, apart from its verdict and where it stands.
fn apart_from_expect(e: &Expectation) -> Expectation {
    Expectation {
        expect: VerdictKind::Found,
        line: 0,
        ..e.clone()
    }
}

#[test]
fn accept_prints_the_entries_that_would_expect_what_was_found_and_edits_nothing() {
    let (scratch, file) = scratch("accept");
    let dir = &scratch.0;
    let o = check(dir, &["--accept"]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    let printed = stdout(&o);
    // The people's lines go to standard error; standard output is TOML only.
    assert!(String::from_utf8_lossy(&o.stderr).contains("FAIL  pause-said-safe"));
    assert_eq!(std::fs::read_to_string(&file).unwrap(), FILE, "edited");

    let accepted =
        expectations::parse(&printed, &file).unwrap_or_else(|e| panic!("{e}: {printed}"));
    let original = expectations::parse(FILE, &file).unwrap();
    let names: Vec<&str> = accepted.iter().map(|e| e.name.as_str()).collect();
    assert_eq!(
        names,
        ["pause-said-safe", "fencing-said-unsafe", "story-said-safe"]
    );
    for e in &accepted {
        let was = original.iter().find(|o| o.name == e.name).unwrap();
        assert_eq!(apart_from_expect(e), apart_from_expect(was), "{printed}");
        assert_ne!(e.expect, was.expect, "{}: {printed}", e.name);
    }
    // What was written stays as written: the comment on the expect line, the quoted key, and the
    // seed the first entry took from the file.
    assert!(
        printed.contains("expect = \"unsafe\"   # we hoped\n"),
        "{printed}"
    );
    assert!(printed.contains("'expect' = \"not-found\"\n"), "{printed}");
    assert!(printed.contains("seed = 5"), "{printed}");
    assert!(printed.contains(
        "scenario = \"stories/waiter.json\"\nvariant = \"etcd-3.4\"\nexpect = \"unsafe\""
    ));
    assert!(!printed.contains("a fenced lock next"), "{printed}");

    // --accept prints TOML: no other format beside it.
    let o = check(dir, &["--accept", "--format", "json"]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
}

#[test]
fn check_help_lists_the_formats_and_the_violation_kinds() {
    let o = lockcheck_in(Path::new("."), &["check", "--help"]);
    assert_eq!(o.status.code(), Some(0));
    let help = stdout(&o);
    for word in [
        "text",
        "json",
        "junit",
        "github",
        "--only",
        "--accept",
        "never edits",
    ] {
        assert!(help.contains(word), "{word}: {help}");
    }
    for kind in lockcheck_core::checker::ViolationKind::ALL {
        assert!(help.contains(kind.name()), "{}: {help}", kind.name());
    }
}
