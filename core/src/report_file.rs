//! A report on disk: its JSON, its HTML timeline beside it and, for a real run, its scenario.
//!
//! Apart from [`crate::report`] so that the report (the data) does not depend on its picture:
//! the timeline draws reports, and writing both files is the one place that needs both.

use crate::output;
use crate::report::{shell_quote, ClientRun, Report, ReportError, RunWorld};
use crate::timeline;
use std::path::{Path, PathBuf};

impl Report {
    /// Writes the report as `DIR/NAME-HASH.json` and returns the path; sets `replay_command`.
    /// Its HTML timeline is written beside it ([`Report::timeline_path`]). A real run's scenario
    /// is written beside it too (`DIR/NAME-HASH.scenario.json`), and its command reruns that
    /// scenario against real servers.
    pub fn write(&mut self, dir: &Path, name: &str) -> Result<PathBuf, ReportError> {
        let io = |path: &Path| {
            let path = path.to_path_buf();
            move |source| ReportError::Io { path, source }
        };
        std::fs::create_dir_all(dir).map_err(io(dir))?;
        let path = self.path_in(dir, name);
        let stem = format!("{name}-{}", self.hash8());
        self.replay_command = match self.world {
            RunWorld::Simulation => format!("lockcheck replay {}", path.display()),
            RunWorld::Real => {
                let scenario = dir.join(format!("{stem}.scenario.json"));
                let json =
                    serde_json::to_string_pretty(&self.scenario).expect("a scenario serializes");
                output::write_atomically(&scenario, (json + "\n").as_bytes())
                    .map_err(io(&scenario))?;
                // A run of the user's library reruns that library, not lockcheck's rendition.
                let client = self
                    .client
                    .as_ref()
                    .map(ClientRun::flags)
                    .unwrap_or_default();
                format!(
                    "lockcheck real --scenario {}{client} (a real run is not byte-replayable: \
                     this reruns its scenario; `lockcheck run` simulates it{})",
                    shell_quote(&scenario.display().to_string()),
                    if client.is_empty() {
                        ""
                    } else {
                        " with lockcheck's rendition"
                    }
                )
            }
        };
        let json = serde_json::to_string_pretty(self).expect("a report always serializes");
        output::write_atomically(&path, (json + "\n").as_bytes()).map_err(io(&path))?;
        self.write_timeline(&path)?;
        Ok(path)
    }

    /// Where [`Report::write`] writes the report as `name` in `dir`: `DIR/NAME-HASH.json`.
    pub fn path_in(&self, dir: &Path, name: &str) -> PathBuf {
        dir.join(format!("{name}-{}.json", self.hash8()))
    }

    /// The first 8 characters of the history's hash, which name the report's files.
    pub(crate) fn hash8(&self) -> &str {
        self.history_hash.get(..8).unwrap_or(&self.history_hash)
    }

    /// Where the HTML timeline of the report at `json` goes: beside it, the same stem with
    /// `.html` (`DIR/NAME-HASH.html`), so that a report and its picture are found together.
    pub fn timeline_path(json: &Path) -> PathBuf {
        json.with_extension("html")
    }

    /// Writes the report's HTML timeline ([`timeline::render`]) beside the report file
    /// at `json` and returns its path. `lockcheck timeline` uses it to draw reports written
    /// before the timeline existed, or drawn by an older lockcheck.
    pub fn write_timeline(&self, json: &Path) -> Result<PathBuf, ReportError> {
        let path = Report::timeline_path(json);
        output::write_atomically(&path, timeline::render(self).as_bytes()).map_err(|source| {
            ReportError::Io {
                path: path.clone(),
                source,
            }
        })?;
        Ok(path)
    }
}
