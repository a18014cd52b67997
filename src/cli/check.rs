//! `lockcheck check`: searches and stories against the verdicts they must reach.

use super::check_accept;
use super::check_format::{self, Format, Judged};
use super::progress::{progress_bar, rates};
use super::{usage, EXIT_FOUND, EXIT_OK};
use lockcheck_core::checker::{safety_answer, Severity, ViolationKind};
use lockcheck_core::report::Report;
use lockcheck_core::verdict::{Coverage, VerdictKind};
use lockcheck_search::cell::{self, CellSearch, CellStats, CellVerdict, Searched};
use lockcheck_search::expectations::{Check, Expectation, Story};
use lockcheck_search::explore::ExploreOptions;
use lockcheck_search::matrix;
use std::collections::BTreeMap;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::time::Instant;

/// What one entry's run came to.
enum Ran {
    /// A search's result, and what it searched.
    Search(
        Result<Searched, lockcheck_search::cell::CellError>,
        Box<ExploreOptions>,
    ),
    /// A story's run: the violations that count (their kinds and one-line stories), and its
    /// report.
    Story {
        counted: Vec<(ViolationKind, String)>,
        /// The run's safety answer, whatever counted ([`safety_answer`]).
        safety: String,
        report: anyhow::Result<std::path::PathBuf>,
        stats: CellStats,
    },
}

/// Runs a story entry once, and writes its report into `out` under the entry's name.
fn run_story(name: &str, story: &Story, out: &Path) -> Ran {
    let started = Instant::now();
    let outcome = lockcheck_sim::run(&story.scenario);
    let counted = story
        .counted(&outcome.violations)
        .iter()
        .map(|v| (v.kind, v.story.clone()))
        .collect();
    let mut report = Report::of_run(&story.scenario, &outcome);
    let report = report.write(out, name).map_err(anyhow::Error::from);
    Ran::Story {
        counted,
        safety: safety_answer(&outcome.violations, true),
        report,
        stats: CellStats {
            cases: 1,
            search: started.elapsed(),
            shrink_runs: 0,
            shrink: Default::default(),
            regressions: 0,
            regression_failed: false,
            regressions_changed: 0,
        },
    }
}

/// `lockcheck check`'s arguments.
#[derive(clap::Args)]
pub struct CheckArgs {
    /// The expectations file.
    pub file: PathBuf,
    /// Where to write reports of the violations found, and the regressions.
    #[arg(long, value_name = "DIR", default_value = "reports/check")]
    pub out: PathBuf,
    /// Entries searched at once [default: all cores]. Never changes a verdict.
    #[arg(long, value_name = "J")]
    pub jobs: Option<usize>,
    /// What standard output carries: the text for people, or a format for CI (only it is
    /// written there; the progress bar and errors go to standard error).
    #[arg(long, value_enum, value_name = "FORMAT", default_value_t = Format::Text)]
    pub format: Format,
    /// Run only the entry of this name. Repeat it (--only a --only b) or give several names
    /// separated by commas (--only a,b). An unknown name is an error (exit 2) that lists the
    /// file's names.
    #[arg(long, value_name = "NAME", value_delimiter = ',')]
    pub only: Vec<String>,
    /// Print, for each entry whose result was not the expected one, its TOML as it would have
    /// to be written to expect what was found (its `expect` changed, its other keys and
    /// comments as written). This only prints, on standard output, and never edits the file;
    /// the usual text lines go to standard error. Not with --format.
    #[arg(long, conflicts_with = "format")]
    pub accept: bool,
}

/// Runs `lockcheck check FILE`.
pub fn check(args: CheckArgs) -> anyhow::Result<u8> {
    let jobs = super::parse_jobs(args.jobs)?;
    let (file, out, format) = (args.file.as_path(), args.out.as_path(), args.format);
    let all = lockcheck_search::expectations::read(file).map_err(|e| usage(e.to_string()))?;
    let entries = select(&all, &args.only)?;
    // With --accept standard output is the entries' TOML, for pasting: people's lines move to
    // standard error.
    let show = |line: &str| {
        if args.accept {
            let _ = writeln!(
                std::io::stderr(),
                "{}",
                lockcheck_core::input::terminal_text(line)
            );
        } else {
            say!("{line}");
        }
    };
    let bar = progress_bar(entries.len() as u64, "entries")?;
    let started = Instant::now();
    let results = cell::in_parallel(&entries, jobs, |&(_, entry)| {
        let ran = match &entry.check {
            // A persisted failure that still fails settles an entry expected not-found (it is
            // UNSAFE, exit 1) at once. An entry expected UNSAFE is searched anyway: its search
            // must still find the violation within its budget, whatever old files the out dir
            // holds.
            Check::Search(options) => Ran::Search(
                cell::search(
                    &CellSearch {
                        id: entry.name.clone(),
                        options: options.clone(),
                        out: out.to_path_buf(),
                        settle_on_regression: entry.expect == VerdictKind::NotFound,
                    },
                    &|| {},
                ),
                Box::new(options.clone()),
            ),
            Check::Story(story) => run_story(&entry.name, story, out),
        };
        bar.inc(1);
        ran
    });
    bar.finish_and_clear();
    let mut judged = Vec::new();
    let mut unwritten = Vec::new();
    for (&(_, entry), ran) in entries.iter().zip(results) {
        let (j, not_written) = judge(file, entry, ran)?;
        unwritten.extend(
            not_written
                .into_iter()
                .map(|e| format!("{}: {e}", entry.name)),
        );
        // The formats for people print as they go, as they always have: an error in a later
        // entry leaves the earlier ones said. The machine formats are one document, or none.
        let at = format!("{}:{}", file.display(), entry.line);
        match format {
            Format::Text => check_format::text_lines(&j, &at)
                .iter()
                .for_each(|line| show(line)),
            Format::Github => check_format::github_lines(&j, file, &at)
                .iter()
                .for_each(|line| say!("{line}")),
            Format::Json | Format::Junit => {}
        }
        judged.push(j);
    }
    let failed = judged.iter().filter(|j| !j.ok).count();
    let wall = started.elapsed();
    match format {
        Format::Text | Format::Github => {
            let stats: Vec<&CellStats> = judged.iter().map(|j| &j.stats).collect();
            show(&format!(
                "check: {} entries, {} as expected, {failed} not; {}",
                judged.len(),
                judged.len() - failed,
                rates(&stats, wall, jobs, true)
            ));
        }
        Format::Json => say!("{}", check_format::json(file, &judged, wall, jobs)),
        Format::Junit => say!("{}", check_format::junit(file, &judged, wall)),
    }
    if args.accept {
        print_accepted(file, &all, &entries, &judged)?;
    }
    let code = if failed > 0 { EXIT_FOUND } else { EXIT_OK };
    Ok(super::after_writes(code, &unwritten))
}

/// The entries `--only` names (all of them when it names none), each with its index in the file.
fn select<'a>(
    all: &'a [Expectation],
    only: &[String],
) -> anyhow::Result<Vec<(usize, &'a Expectation)>> {
    if let Some(unknown) = only
        .iter()
        .find(|name| !all.iter().any(|e| &e.name == *name))
    {
        let known: Vec<&str> = all.iter().map(|e| e.name.as_str()).collect();
        return Err(usage(format!(
            "--only: no entry named '{}' (the file's entries: {})",
            lockcheck_core::input::clip(unknown),
            known.join(", ")
        )));
    }
    Ok(all
        .iter()
        .enumerate()
        .filter(|(_, e)| only.is_empty() || only.contains(&e.name))
        .collect())
}

/// `--accept`: the text of every entry not as expected, rewritten to expect what was found, each
/// under a comment saying what changed.
fn print_accepted(
    file: &Path,
    all: &[Expectation],
    entries: &[(usize, &Expectation)],
    judged: &[Judged],
) -> anyhow::Result<()> {
    let text = lockcheck_core::input::read_text(file, lockcheck_core::input::MAX_SCENARIO_BYTES)
        .map_err(|e| usage(format!("{}: {e}", file.display())))?;
    let mut first = true;
    for (&(index, entry), j) in entries.iter().zip(judged).filter(|(_, j)| !j.ok) {
        let word = match (j.found, j.story_entry) {
            (true, _) => "unsafe",
            (false, true) => "safe",
            (false, false) => "not-found",
        };
        if !first {
            say!();
        }
        first = false;
        say!(
            "# {} ({}:{}): {}",
            entry.name,
            file.display(),
            entry.line,
            j.failure_message()
        );
        match check_accept::accepted(&text, file, all, index, word) {
            Ok(toml) => say!("{}", toml.trim_end_matches('\n')),
            Err(why) => say!("# {why}"),
        }
    }
    Ok(())
}

/// One entry's run judged against what it expects; with what of it could not be written (its
/// report, its regression entry), which is said after the verdicts rather than instead of them.
fn judge(file: &Path, entry: &Expectation, ran: Ran) -> anyhow::Result<(Judged, Vec<String>)> {
    let mut unwritten = Vec::new();
    let expected = match (&entry.check, entry.expect) {
        (_, VerdictKind::Found) => expected_word(&entry.check),
        (Check::Search(_), VerdictKind::NotFound) => "not found",
        (Check::Story(_), VerdictKind::NotFound) => "safe",
    };
    let expect = match (&entry.check, entry.expect) {
        (_, VerdictKind::Found) => "unsafe",
        (Check::Search(_), VerdictKind::NotFound) => "not-found",
        (Check::Story(_), VerdictKind::NotFound) => "safe",
    };
    let failed =
        |e: &dyn std::fmt::Display| usage(format!("{}: {}: {e}", file.display(), entry.name));
    let judged = match ran {
        Ran::Search(result, options) => {
            let searched = result.map_err(|e| failed(&e))?;
            unwritten.extend(searched.unwritten.iter().cloned());
            let (verdict, details) = search_verdict(&options, &searched);
            let mut j = Judged {
                name: entry.name.clone(),
                line: entry.line,
                about: entry.about.clone(),
                story_entry: false,
                expect,
                expected,
                ok: entry.met_by(&searched.verdict),
                found: false,
                word: "not found",
                verdict,
                violations: BTreeMap::new(),
                case_index: None,
                cases: searched.stats.cases,
                report: None,
                story: None,
                details,
                stats: searched.stats,
            };
            match &searched.verdict {
                CellVerdict::Found(u) => {
                    let counted: Vec<ViolationKind> = u
                        .report
                        .violations
                        .iter()
                        .map(|v| v.kind)
                        .filter(|&k| lockcheck_search::explore::counts(&options, k))
                        .collect();
                    j.found = true;
                    j.word =
                        lockcheck_search::explore::worst_counted(&options, &u.report.violations)
                            .unwrap_or(Severity::Unsafe)
                            .word();
                    j.violations = tally(&counted);
                    j.case_index = u.case_index;
                    j.cases = u.cases;
                    j.report = searched.unwritten.is_empty().then(|| u.path.clone());
                    j.story = Some(u.story.clone());
                }
                CellVerdict::NotFound(coverage) => j.cases = coverage.cases,
            }
            j
        }
        Ran::Story {
            counted,
            safety,
            report,
            stats,
        } => {
            let report = match report {
                Ok(path) => Some(path),
                Err(e) => {
                    unwritten.push(e.to_string());
                    None
                }
            };
            let found = !counted.is_empty();
            let worst = counted.iter().map(|(k, _)| k.severity()).min();
            let verdict = if let Some(worst) = worst {
                let kinds: Vec<&str> = counted.iter().map(|(k, _)| k.name()).collect();
                let safety = if worst == Severity::Unsafe {
                    String::new()
                } else {
                    format!("; {safety}")
                };
                format!(
                    "{} (the story's run: {}){safety}",
                    worst.word(),
                    kinds.join(", ")
                )
            } else {
                "safe (no violation in the story's run)".to_string()
            };
            let kinds: Vec<ViolationKind> = counted.iter().map(|(k, _)| *k).collect();
            let story = counted.first().map(|(_, s)| s.clone());
            let mut details: Vec<String> = counted.into_iter().map(|(_, s)| s).collect();
            match &report {
                Some(report) => {
                    details.push(format!("report: {}", report.display()));
                    details.push(format!(
                        "timeline: {}",
                        Report::timeline_path(report).display()
                    ));
                }
                None => details.push("report: could not be written (why: below)".into()),
            }
            Judged {
                name: entry.name.clone(),
                line: entry.line,
                about: entry.about.clone(),
                story_entry: true,
                expect,
                expected,
                ok: found == (entry.expect == VerdictKind::Found),
                found,
                word: worst.map_or("safe", Severity::word),
                verdict,
                violations: tally(&kinds),
                case_index: None,
                cases: 1,
                report,
                story,
                details,
                stats,
            }
        }
    };
    Ok((judged, unwritten))
}

/// How many violations of each kind, by the kinds' names.
fn tally(kinds: &[ViolationKind]) -> BTreeMap<&'static str, usize> {
    let mut counts = BTreeMap::new();
    for kind in kinds {
        *counts.entry(kind.name()).or_insert(0) += 1;
    }
    counts
}

/// A search's verdict in one line, and what to show when it was not the expected one.
fn search_verdict(options: &ExploreOptions, searched: &Searched) -> (String, Vec<String>) {
    let settled = if searched.stats.regression_failed && searched.stats.cases == 0 {
        " (a persisted failure still fails)"
    } else {
        ""
    };
    match &searched.verdict {
        CellVerdict::Found(u) => {
            let worst = lockcheck_search::explore::worst_counted(options, &u.report.violations)
                .unwrap_or(Severity::Unsafe);
            // The kinds it counted, by the names an entry's `violation` takes.
            let kinds: std::collections::BTreeSet<&str> = u
                .report
                .violations
                .iter()
                .filter(|v| lockcheck_search::explore::counts(options, v.kind))
                .map(|v| v.kind.name())
                .collect();
            let kinds = kinds.into_iter().collect::<Vec<_>>().join(", ");
            let word = format!("{} ({kinds})", worst.word());
            let verdict = match (u.case_index, &u.regression) {
                (Some(k), _) => format!("{word} at case {k} ({} cases)", u.cases),
                (None, Some(persisted)) => {
                    format!(
                        "{word}{settled} (persisted{})",
                        super::explore::origin(persisted)
                    )
                }
                (None, None) => format!("{word}{settled}"),
            };
            // A liveness finding still says whether its case was safe.
            let verdict = if worst == Severity::Unsafe {
                verdict
            } else {
                format!("{verdict}; {}", safety_answer(&u.report.violations, true))
            };
            (
                verdict,
                vec![
                    u.story.clone(),
                    format!("report: {}", u.path.display()),
                    format!("timeline: {}", Report::timeline_path(&u.path).display()),
                ],
            )
        }
        CellVerdict::NotFound(Coverage {
            cases,
            simulated_ns,
        }) => (
            format!(
                "not found in {cases} cases ({} simulated)",
                matrix::hours(*simulated_ns)
            ),
            vec![
                "the known violation was not found within the budget: a change lost it, or the \
                 entry needs more cases or other params"
                    .to_string(),
            ],
        ),
    }
}

/// What an entry expected to find, in the words its finding would have: UNSAFE when it counts
/// safety violations only (the default), the word of the one kind it counts (`violation`), or
/// any violation.
fn expected_word(check: &Check) -> &'static str {
    let (safety_only, only) = match check {
        Check::Search(options) => (options.safety_only, options.only),
        Check::Story(story) => (story.safety_only, story.only),
    };
    match only {
        Some(kind) => kind.severity().word(),
        None if safety_only => "UNSAFE",
        None => "a violation (UNSAFE, DEADLOCK, STUCK or ORDER)",
    }
}
