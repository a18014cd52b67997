//! The HTML timeline of a report: one self-contained file a person opens in a browser to see the
//! story of a run at a glance.
//!
//! [`render`] draws a lane per node (clients, servers, the resource, the liveness probe): on a
//! client's lane the lock as the client *believes* it holds it (from its acquisition until its
//! release returns) under the validity it was given, with the part it went on believing after
//! that validity ended marked; on a server's lane the lock keys as the server kept them; on the
//! resource's lane who was inside, with every overlap highlighted. The fault schedule is shaded
//! over the lanes it struck (pauses, crash → restart, partitions, message faults), clock jumps and
//! drifts are marked, each violation is a marker across every lane, and a small chart per moved
//! clock plots its local reading against true time (as its error, local − true, so that a 1 %
//! drift shows). Every mark carries its history entries as its hover text. The header states the
//! verdict in one sentence and the command that replays it.
//!
//! The file has no external resource of any kind (CSS, SVG and a few lines of script are inline,
//! and a Content-Security-Policy forbids loading anything), so it can be mailed, attached to a CI
//! run or committed next to its report, and it opens the same anywhere without a network.
//!
//! Rendering is a pure function of the report: no I/O, no clock, no hash-map order, so the same
//! report always yields byte-identical HTML (the committed reference timeline is checked so).

mod compare;
mod faults;
mod lanes;
mod layout;
mod svg;

use crate::report::Report;

pub use compare::side_by_side;

/// The report as one self-contained HTML document (inline CSS, inline SVG, a few lines of inline
/// script for the hover panel and the zoom). Deterministic: the same report yields the same bytes.
/// Never panics on a report it can read, valid or not: what it cannot draw (fault bands of an
/// invalid scenario) it leaves out and says so in the page.
pub fn render(report: &Report) -> String {
    svg::document(report, &layout::layout(report))
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::history::{Kind, Op};

    /// The story of the CLI's tests: two clients, a 10 s lease, client-0 paused for 15 s while
    /// it holds the lock; client-1 takes the expired lock and both are inside at once. A
    /// simulated run's report, kept as a file because this crate cannot run the simulator:
    /// `lockcheck-sim`'s test `timeline_fixtures` checks that the simulation still gives exactly
    /// this report (and rewrites it with `LOCKCHECK_BLESS=1`).
    pub(crate) fn pause_report() -> Report {
        let report = fixture(include_str!("../../tests/data/timeline-pause.json"));
        assert!(
            !report.violations.is_empty(),
            "the pause story finds its violation"
        );
        report
    }

    /// The same clients without faults: nothing to find.
    pub(crate) fn quiet_report() -> Report {
        let report = fixture(include_str!("../../tests/data/timeline-quiet.json"));
        assert!(report.violations.is_empty());
        report
    }

    fn fixture(json: &str) -> Report {
        let report: Report = serde_json::from_str(json).expect("the fixture is a report");
        assert_eq!(
            report.history.digest(),
            report.history_hash,
            "the fixture is intact"
        );
        report
    }

    #[test]
    fn the_same_report_renders_byte_identical_html() {
        let report = pause_report();
        assert_eq!(render(&report), render(&report.clone()));
        assert_eq!(render(&report), render(&pause_report()));
    }

    #[test]
    fn a_violation_marker_exists_exactly_when_there_is_a_violation() {
        let html = render(&pause_report());
        assert_eq!(html.matches("class=\"violation\"").count(), 1);
        assert!(html.contains("id=\"violation-0\""));
        assert!(html.contains("class=\"overlap\""));
        let quiet = render(&quiet_report());
        assert!(!quiet.contains("class=\"violation\""));
        assert!(!quiet.contains("class=\"overlap\""));
        assert!(quiet.contains("NO VIOLATION"));
    }

    #[test]
    fn the_page_loads_nothing_from_anywhere() {
        let html = render(&pause_report());
        for forbidden in [
            "http://", "https://", " src=", " href=", "@import", "url(http",
        ] {
            assert!(!html.contains(forbidden), "the page contains {forbidden:?}");
        }
        assert!(html.contains("Content-Security-Policy\" content=\"default-src 'none'"));
    }

    #[test]
    fn the_header_states_the_verdict_and_the_replay_command() {
        let mut report = pause_report();
        report.replay_command = "lockcheck replay reports/x-1234abcd.json".into();
        let html = render(&report);
        assert!(html.contains(&format!(
            "<span class=\"badge\">UNSAFE</span>{}</p>",
            report.summary
        )));
        assert!(html.contains(
            "<code id=\"replay-command\">lockcheck replay reports/x-1234abcd.json</code>"
        ));
        assert!(html.contains(&format!("<dt>seed</dt><dd>{}</dd>", report.seed)));
        assert!(html.contains("<li>500 ms: pause client-0 for 15000 ms</li>"));
        for lane in ["client-0", "client-1", "redis-0", "resource"] {
            assert!(html.contains(&format!("data-lane=\"{lane}\"")), "{lane}");
        }
        assert!(html.contains("class=\"fault-band pause\""));
    }

    #[test]
    fn text_from_the_report_is_escaped() {
        let mut report = pause_report();
        let hostile = "<script>alert('x')</script> & \"quoted\"";
        report.summary = hostile.into();
        report.replay_command = hostile.into();
        report.violations[0].story = hostile.into();
        report.history.push(
            1,
            "client-0",
            1,
            Kind::Observe,
            Op::Note {
                text: hostile.into(),
            },
        );
        let html = render(&report);
        assert!(!html.contains("<script>alert"));
        assert!(!html.contains("\"quoted\""));
        assert!(html
            .contains("&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt; &amp; &quot;quoted&quot;"));
        // The page's own script is the only one.
        assert_eq!(html.matches("<script>").count(), 1);
    }

    #[test]
    fn a_real_run_says_it_is_not_byte_replayable() {
        let mut report = pause_report();
        report.world = crate::report::RunWorld::Real;
        report.replay_command = "lockcheck real --scenario s.json".into();
        let html = render(&report);
        assert!(html.contains("against real servers"));
        assert!(html.contains("Rerun: <code id=\"replay-command\">"));
        assert!(html.contains("not byte-replayable"));
    }
}
