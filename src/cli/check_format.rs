//! What `lockcheck check` writes on standard output, by `--format`: the text people read, and
//! JSON, JUnit XML and GitHub Actions workflow commands for CI. Every format is made from the
//! same judged entries ([`Judged`]), so they cannot disagree about a verdict.

use lockcheck_search::cell::CellStats;
use serde::Serialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// `--format`: what standard output carries.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// For people: an ok or FAIL line per entry, what a FAIL found under it, a summary.
    Text,
    /// One JSON document: per entry its verdict, the violation kinds counted, the report and
    /// timeline paths; then the totals.
    Json,
    /// JUnit XML: one testcase per entry, a failure per entry not as expected.
    Junit,
    /// GitHub Actions: an ::error annotation per entry not as expected, ok lines, the summary.
    Github,
}

/// One entry, run and judged against its expectation: everything any format says of it.
pub struct Judged {
    /// The entry's name.
    pub name: String,
    /// Its line in the file, from 1.
    pub line: usize,
    /// Why it is expected, as the entry says (`about`).
    pub about: Option<String>,
    /// Whether it is a story (one scenario run once) rather than a search.
    pub story_entry: bool,
    /// Its `expect`, in the file's words: `unsafe`, `not-found` or `safe`.
    pub expect: &'static str,
    /// The expected verdict, in the words a verdict is printed with ("UNSAFE", "not found").
    pub expected: &'static str,
    /// Whether what was found is what it expects.
    pub ok: bool,
    /// Whether a counted violation was found.
    pub found: bool,
    /// The verdict's word: UNSAFE, DEADLOCK, STUCK, ORDER, "not found" or "safe".
    pub word: &'static str,
    /// The verdict in one line, as the text format prints it.
    pub verdict: String,
    /// The violations that counted, by kind name, and how many of each.
    pub violations: BTreeMap<&'static str, usize>,
    /// The failing case's index, when a search found it (not when a persisted failure did).
    pub case_index: Option<u64>,
    /// Cases run: a search's up to the failing one, or all it ran; 1 for a story.
    pub cases: u32,
    /// The report written, if one was.
    pub report: Option<PathBuf>,
    /// The violation in one line, with the faults that caused it.
    pub story: Option<String>,
    /// What a FAIL shows under its line: the stories, the report and timeline paths, or why a
    /// search that found nothing failed.
    pub details: Vec<String>,
    /// Where the time went.
    pub stats: CellStats,
}

impl Judged {
    /// The report's HTML timeline, written beside it.
    pub fn timeline(&self) -> Option<PathBuf> {
        self.report
            .as_deref()
            .map(lockcheck_core::report::Report::timeline_path)
    }

    /// "expected X, got Y": the headline of a failure in every format.
    pub fn failure_message(&self) -> String {
        format!("expected {}, got {}", self.expected, self.verdict)
    }

    /// The lines under a failure's headline: why the entry expects what it does, then the
    /// details.
    fn failure_lines(&self) -> Vec<String> {
        self.about
            .iter()
            .map(|about| format!("expected because: {about}"))
            .chain(self.details.iter().cloned())
            .collect()
    }

    /// Seconds the entry took (search and shrinking), for JUnit's and JSON's `time`.
    fn seconds(&self) -> f64 {
        (self.stats.search + self.stats.shrink).as_secs_f64()
    }
}

/// The text format's lines for one entry (`at` is `FILE:LINE`): `ok` and the verdict, or `FAIL`,
/// what was expected and found, and the details indented under it.
pub fn text_lines(j: &Judged, at: &str) -> Vec<String> {
    if j.ok {
        return vec![format!("ok    {} ({at}): {}", j.name, j.verdict)];
    }
    std::iter::once(format!("FAIL  {} ({at}): {}", j.name, j.failure_message()))
        .chain(j.failure_lines().into_iter().map(|l| format!("      {l}")))
        .collect()
}

/// The github format's lines for one entry: the text format's `ok` line for an entry as
/// expected (the log stays readable), an `::error` workflow command at the entry's line for one
/// that is not (GitHub shows it as an annotation on the file, and the detail lines in it).
pub fn github_lines(j: &Judged, file: &Path, at: &str) -> Vec<String> {
    if j.ok {
        return text_lines(j, at);
    }
    let message = std::iter::once(j.failure_message())
        .chain(j.failure_lines())
        .collect::<Vec<_>>()
        .join("\n");
    vec![format!(
        "::error file={},line={},title={}::{}",
        github_property(&file.display().to_string()),
        j.line,
        github_property(&format!("lockcheck check {}", j.name)),
        github_data(&message)
    )]
}

/// A workflow command's message, escaped as GitHub's toolkit does (`escapeData`): `%`, CR and LF
/// would otherwise end or garble the command.
pub fn github_data(text: &str) -> String {
    text.replace('%', "%25")
        .replace('\r', "%0D")
        .replace('\n', "%0A")
}

/// A workflow command's property value (`escapeProperty`): as [`github_data`], and `:` and `,`,
/// which separate the properties and the message.
pub fn github_property(text: &str) -> String {
    github_data(text).replace(':', "%3A").replace(',', "%2C")
}

/// `lockcheck check --format json`: the one document written on standard output.
///
/// ```text
/// {
///   "file": "ours.toml",                 // the expectations file, as given
///   "entries": [{                        // the entries run, in the file's order
///     "name": "our-lock-pause",
///     "line": 4,                         // where its [[expect]] starts, from 1
///     "check": "search",                 // or "story"
///     "about": "…",                      // or null
///     "expect": "not-found",             // as the file says: "unsafe", "not-found", "safe"
///     "expected": "not found",           // the same in a verdict's words ("UNSAFE", "safe", …)
///     "status": "fail",                  // "ok" (as expected) or "fail"
///     "found": {
///       "word": "UNSAFE",                // UNSAFE, DEADLOCK, STUCK, ORDER, "not found", "safe"
///       "verdict": "UNSAFE (mutual_exclusion) at case 3 (4 cases)",  // the text format's
///       "violations": {"mutual_exclusion": 1}  // the kinds counted (ViolationKind names)
///     },
///     "case_index": 3,                   // the failing case; null unless a search found it
///     "cases": 4,                        // cases run (up to the failing one); 1 for a story
///     "report": "reports/check/our-lock-pause-1a2b3c4d.json",   // or null: none written
///     "timeline": "reports/check/our-lock-pause-1a2b3c4d.html", // beside the report, or null
///     "story": "client-0 paused 12 s > TTL 10 s at 3 s; then …", // the finding, or null
///     "details": ["…"],                  // the lines the text format prints under a FAIL;
///                                        // [] for an entry as expected
///     "seconds": 0.42                    // search and shrinking
///   }],
///   "totals": {"entries": 1, "ok": 0, "failed": 1, "cases": 4, "shrink_runs": 12,
///              "seconds": 0.5, "jobs": 2} // seconds: wall time of the whole check
/// }
/// ```
#[derive(Serialize)]
pub struct CheckJson {
    /// The expectations file, as given on the command line.
    pub file: String,
    /// The entries run, in the file's order.
    pub entries: Vec<EntryJson>,
    /// The counts over them.
    pub totals: TotalsJson,
}

/// One entry of [`CheckJson`].
#[derive(Serialize)]
pub struct EntryJson {
    /// The entry's name.
    pub name: String,
    /// Its `[[expect]]` line, from 1.
    pub line: usize,
    /// `search` or `story`.
    pub check: &'static str,
    /// Its `about`.
    pub about: Option<String>,
    /// Its `expect`, as written: `unsafe`, `not-found` or `safe`.
    pub expect: &'static str,
    /// The expected verdict in a verdict's words.
    pub expected: &'static str,
    /// `ok` or `fail`.
    pub status: &'static str,
    /// What was found.
    pub found: FoundJson,
    /// The failing case's index, when a search found one.
    pub case_index: Option<u64>,
    /// Cases run.
    pub cases: u32,
    /// The report, when one was written.
    pub report: Option<String>,
    /// Its HTML timeline.
    pub timeline: Option<String>,
    /// The finding in one line.
    pub story: Option<String>,
    /// The text format's lines under a FAIL; none for an entry as expected.
    pub details: Vec<String>,
    /// Seconds of search and shrinking.
    pub seconds: f64,
}

/// The verdict found, in [`EntryJson`].
#[derive(Serialize)]
pub struct FoundJson {
    /// UNSAFE, DEADLOCK, STUCK, ORDER, `not found` or `safe`.
    pub word: &'static str,
    /// The verdict in one line.
    pub verdict: String,
    /// The counted violations by kind name.
    pub violations: BTreeMap<&'static str, usize>,
}

/// The totals of [`CheckJson`].
#[derive(Serialize)]
pub struct TotalsJson {
    /// Entries run.
    pub entries: usize,
    /// As expected.
    pub ok: usize,
    /// Not as expected.
    pub failed: usize,
    /// Cases run in all.
    pub cases: u64,
    /// Runs spent shrinking in all.
    pub shrink_runs: u64,
    /// Wall time of the whole check.
    pub seconds: f64,
    /// Threads the entries ran on.
    pub jobs: usize,
}

/// A path as text for a machine format: lossy rather than refused when it is not UTF-8, since
/// the report was written and a path shown is better than none.
fn path_text(path: &Path) -> String {
    path.display().to_string()
}

/// The json format's document.
pub fn json(file: &Path, judged: &[Judged], wall: Duration, jobs: usize) -> String {
    let failed = judged.iter().filter(|j| !j.ok).count();
    let doc = CheckJson {
        file: path_text(file),
        entries: judged
            .iter()
            .map(|j| EntryJson {
                name: j.name.clone(),
                line: j.line,
                check: if j.story_entry { "story" } else { "search" },
                about: j.about.clone(),
                expect: j.expect,
                expected: j.expected,
                status: if j.ok { "ok" } else { "fail" },
                found: FoundJson {
                    word: j.word,
                    verdict: j.verdict.clone(),
                    violations: j.violations.clone(),
                },
                case_index: j.case_index,
                cases: j.cases,
                report: j.report.as_deref().map(path_text),
                timeline: j.timeline().as_deref().map(path_text),
                story: j.story.clone(),
                details: if j.ok { Vec::new() } else { j.details.clone() },
                seconds: j.seconds(),
            })
            .collect(),
        totals: TotalsJson {
            entries: judged.len(),
            ok: judged.len() - failed,
            failed,
            cases: judged.iter().map(|j| u64::from(j.stats.cases)).sum(),
            shrink_runs: judged.iter().map(|j| u64::from(j.stats.shrink_runs)).sum(),
            seconds: wall.as_secs_f64(),
            jobs,
        },
    };
    // Strings, numbers and maps with string keys only: serializing cannot fail.
    serde_json::to_string_pretty(&doc).unwrap_or_default()
}

/// The junit format's document: `<testsuites>` around one `<testsuite>` named after the file,
/// a `<testcase>` per entry with its file and line, and a `<failure>` in each entry not as
/// expected. The suite's `time` is the check's wall time (entries run in parallel, so it is less
/// than the sum of theirs).
pub fn junit(file: &Path, judged: &[Judged], wall: Duration) -> String {
    let failed = judged.iter().filter(|j| !j.ok).count();
    let file = xml(&file.display().to_string());
    let counts = format!(
        "tests=\"{}\" failures=\"{failed}\" errors=\"0\" skipped=\"0\" time=\"{:.3}\"",
        judged.len(),
        wall.as_secs_f64()
    );
    let mut out = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    out.push_str(&format!("<testsuites name=\"lockcheck check\" {counts}>\n"));
    out.push_str(&format!(
        "  <testsuite name=\"lockcheck check {file}\" {counts}>\n"
    ));
    for j in judged {
        let case = format!(
            "    <testcase classname=\"lockcheck.check\" name=\"{}\" file=\"{file}\" line=\"{}\" \
             time=\"{:.3}\"",
            xml(&j.name),
            j.line,
            j.seconds()
        );
        if j.ok {
            out.push_str(&format!("{case}/>\n"));
        } else {
            out.push_str(&format!(
                "{case}>\n      <failure message=\"{}\" type=\"{}\">{}</failure>\n    \
                 </testcase>\n",
                xml(&j.failure_message()),
                xml(j.word),
                xml(&j.failure_lines().join("\n"))
            ));
        }
    }
    out.push_str("  </testsuite>\n</testsuites>");
    out
}

/// `text` as XML character data or an attribute value: the five markup characters escaped, line
/// breaks and tabs as character references (an attribute's would otherwise be read as spaces),
/// and the characters XML 1.0 cannot hold at all replaced by U+FFFD, so that a story carrying a
/// control character never makes the document unreadable.
pub fn xml(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            '\n' => out.push_str("&#10;"),
            '\r' => out.push_str("&#13;"),
            '\t' => out.push_str("&#9;"),
            c if u32::from(c) < 0x20 || c == '\u{FFFE}' || c == '\u{FFFF}' => out.push('\u{FFFD}'),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn xml_escapes_markup_and_refuses_nothing() {
        assert_eq!(
            xml("a&b<c>d\"e'f\ng\u{1}"),
            "a&amp;b&lt;c&gt;d&quot;e&apos;f&#10;g\u{FFFD}"
        );
    }

    #[test]
    fn github_escapes_as_the_toolkit_does() {
        assert_eq!(github_data("50% a\r\nb, c: d"), "50%25 a%0D%0Ab, c: d");
        assert_eq!(github_property("x,y:z%\n"), "x%2Cy%3Az%25%0A");
    }
}
