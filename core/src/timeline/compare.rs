//! One page that sets several reports of the same story side by side: the simulation's run and
//! the real runs of a differential search's disagreement.
//!
//! Each report is drawn by [`super::render`] as always and embedded whole in a frame of its own
//! (`srcdoc`), so each keeps its own style, hover panel and zoom, and the page stays one file with
//! nothing to load. Above them, the lines that say in one screen what differed, where, and how to
//! rerun each world.

use super::svg::escape;
use crate::report::Report;
use std::fmt::Write;

/// A page with `summary` (one paragraph per line, as plain text) over one frame per pane, each
/// titled by its label. Deterministic: the same inputs yield the same bytes.
pub fn side_by_side(title: &str, summary: &[String], panes: &[(String, &Report)]) -> String {
    let mut out = String::with_capacity(65_536);
    let _ = write!(
        out,
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
         <meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; \
         style-src 'unsafe-inline'; script-src 'unsafe-inline'\">\n\
         <title>lockcheck: {}</title>\n<style>\n\
         body {{ font: 14px/1.45 system-ui, sans-serif; margin: 0 24px; color: #212121; }}\n\
         h1 {{ font-size: 20px; margin: 16px 0 8px; }}\n\
         h2 {{ font-size: 16px; margin: 16px 0 4px; }}\n\
         p {{ margin: 4px 0; }}\n\
         .panes {{ display: flex; gap: 12px; flex-wrap: wrap; }}\n\
         .pane {{ flex: 1 1 640px; min-width: 480px; }}\n\
         iframe {{ width: 100%; height: 900px; border: 1px solid #ccc; }}\n\
         </style>\n</head>\n<body>\n<h1>{}</h1>\n",
        escape(title),
        escape(title)
    );
    for line in summary {
        let _ = writeln!(out, "<p>{}</p>", escape(line));
    }
    out.push_str("<div class=\"panes\">\n");
    for (label, report) in panes {
        let _ = write!(
            out,
            "<section class=\"pane\">\n<h2>{}</h2>\n<iframe title=\"{}\" srcdoc=\"{}\"></iframe>\n\
             </section>\n",
            escape(label),
            escape(label),
            escape(&super::render(report))
        );
    }
    out.push_str("</div>\n</body>\n</html>\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::timeline::tests::{pause_report, quiet_report};

    #[test]
    fn each_report_is_a_frame_of_its_own_under_the_summary() {
        let (a, b) = (pause_report(), quiet_report());
        let page = side_by_side(
            "single-redis: <sim> vs real",
            &["the simulation says \"safe\"".to_string()],
            &[("simulation".into(), &a), ("real run 1".into(), &b)],
        );
        assert!(page.contains("<h1>single-redis: &lt;sim&gt; vs real</h1>"));
        assert!(page.contains("<p>the simulation says &quot;safe&quot;</p>"));
        assert_eq!(page.matches("<iframe").count(), 2);
        // The embedded documents are escaped whole: no markup of theirs leaks into the page.
        assert_eq!(page.matches("<html").count(), 1);
        assert!(page.contains("srcdoc=\"&lt;!DOCTYPE html&gt;"));
        assert_eq!(
            page,
            side_by_side(
                "single-redis: <sim> vs real",
                &["the simulation says \"safe\"".to_string()],
                &[("simulation".into(), &a), ("real run 1".into(), &b)]
            )
        );
    }
}
