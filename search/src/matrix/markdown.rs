//! The matrix for people: `matrix.md`.

use super::{has_fencing, Budget, CellResult, Matrix, FOR_UPDATE_WAIT_TIMEOUT_MS};
use lockcheck_core::scenario::Algorithm;
use std::collections::BTreeMap;
use std::fmt::Write as _;

impl Matrix {
    /// The matrix for people: a table of verdicts, then each UNSAFE cell's story and report.
    pub fn to_markdown(&self) -> String {
        let mut md = String::new();
        let budget = match self.budget {
            Budget::Cases(n) => format!("{n} cases per cell"),
            Budget::Seconds(s) => format!(
                "{s} s of wall time per cell (each cell shows the cases it ran; rerun one with \
                 `--cases`)"
            ),
        };
        let _ = writeln!(md, "# Verdict matrix\n");
        if let Some(shard) = self.shard {
            let _ = writeln!(
                md,
                "**Shard {} of {}: a partial matrix** (each cell covers this shard's slice of \
                 its cases). Join the shards with `lockcheck merge DIR…`.\n",
                shard.index + 1,
                shard.count
            );
        }
        let _ = writeln!(
            md,
            "`{}` (lockcheck {}): seed {}, {budget}.\n\n\
             Each cell is one search: the algorithm, with the resource checking its fencing token \
             or not, under one fault profile. **UNSAFE**: a safety violation (two holders at the \
             resource, or a lock freed under its holder), shrunk to a minimal counterexample \
             whose report replays byte for byte. *not found*: nothing in that many cases, which \
             covered that much simulated time — not a proof of safety. Liveness failures \
             (deadlocks) and order are not counted here (`lockcheck explore` without \
             `--safety-only` searches for them).\n",
            self.command(),
            self.lockcheck,
            self.seed
        );
        let header: Vec<&str> = self.profiles.iter().map(|p| p.name()).collect();
        let _ = writeln!(md, "| algorithm | {} |", header.join(" | "));
        let _ = writeln!(md, "|---|{}", "---|".repeat(header.len()));
        let mut skipped: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for row in self.cells.chunks(self.profiles.len().max(1)) {
            let Some(first) = row.first() else { continue };
            let row_name = match (&first.spec.variant, &first.spec.script) {
                (Some(variant), _) => format!("{}@{variant}", first.spec.algorithm.name()),
                (None, Some(file)) => format!("{}:{file}", first.spec.algorithm.name()),
                (None, None) => first.spec.algorithm.name().to_string(),
            };
            let row_name = match first.spec.nodes {
                Some(n) => format!("{row_name}/{n}"),
                None => row_name,
            };
            let name = if first.spec.fencing {
                format!("{row_name} + fencing")
            } else {
                row_name
            };
            let cells: Vec<String> = row
                .iter()
                .map(|c| match &c.result {
                    CellResult::Found { case_index, .. } => format!(
                        "[**UNSAFE**](#{}){}",
                        c.id,
                        if case_index.is_none() {
                            " (regression)"
                        } else {
                            ""
                        }
                    ),
                    CellResult::NotFound {
                        cases,
                        simulated_ns,
                    } => format!("not found: {cases} cases, {}", hours(*simulated_ns)),
                    CellResult::Skipped { reason } => {
                        skipped
                            .entry(reason.clone())
                            .or_default()
                            .push(c.id.clone());
                        "—".to_string()
                    }
                })
                .collect();
            let _ = writeln!(md, "| {name} | {} |", cells.join(" | "));
        }
        md.push('\n');
        for (reason, ids) in &skipped {
            let _ = writeln!(md, "— skipped ({}): {reason}.", ids.join(", "));
        }
        // A user's lock is fenced as its file says, in its one row.
        let without: Vec<&str> = self
            .algorithms
            .iter()
            .filter_map(|name| Algorithm::from_name(name))
            .filter(|a| !has_fencing(*a))
            .map(|a| a.name())
            .collect();
        if !without.is_empty() {
            let _ = writeln!(
                md,
                "No fencing row for {}: no monotonic token to check (a scenario refuses \
                 `fencing: true` for them).",
                without.join(", ")
            );
        }
        let _ = writeln!(
            md,
            "\nParameters: every default (docs/scenarios.md), except one replica in \
             the `failover` cells, `wait_timeout_ms` {FOR_UPDATE_WAIT_TIMEOUT_MS} for \
             `mysql-for-update-held`, and `restart_delay_ms` raised to the lease by \
             `crash-delayed-restart`. `clock-drift` draws rates within ±5 % (five times \
             Redlock's drift factor); `partition` draws cuts of up to twice the lease. Each \
             cell's exact parameters are in `matrix.json`."
        );
        if self.algorithms.iter().any(|name| name.contains('@')) {
            let _ = writeln!(
                md,
                "\nA row `ALGORITHM@VARIANT` is the algorithm as an older range of its library's \
                 versions behaves (`lockcheck explore --help` lists each variant, its versions \
                 and the source files it follows; the plain row is the current release)."
            );
        }
        if self.algorithms.iter().any(|name| name.contains(':')) {
            let _ = writeln!(
                md,
                "\nA row `ALGORITHM:FILE` is your lock: the algorithm runs the scripts of FILE \
                 (embedded in each cell's parameters, so its reports replay without the file), \
                 fenced when FILE says its acquire script returns a token."
            );
        }
        let mut any = false;
        for c in &self.cells {
            let CellResult::Found {
                cases,
                case_index,
                story,
                report,
            } = &c.result
            else {
                continue;
            };
            if !any {
                let _ = writeln!(md, "\n## UNSAFE cells");
                any = true;
            }
            let found = match case_index {
                Some(k) => format!("Found at case {k} ({cases} cases run)."),
                None => format!(
                    "A persisted regression still fails; the search did not reach it in \
                     {cases} cases."
                ),
            };
            let shard = self
                .shard
                .map(|s| format!(" --shard {}/{}", s.index + 1, s.count))
                .unwrap_or_default();
            let flags = c
                .params
                .as_ref()
                .ok_or_else(|| "no parameters recorded".to_string())
                .and_then(|params| c.spec.explore_flags(params));
            let careful = if self.careful.is_never() {
                String::new()
            } else {
                format!(" --careful {}", self.careful.name())
            };
            let rerun = match (case_index, flags) {
                (Some(k), Ok(flags)) => format!(
                    "rerun: `lockcheck explore {flags}{careful} --seed {} --cases {}{shard}`",
                    self.seed,
                    k + 1
                ),
                (Some(_), Err(why)) => format!("no `lockcheck explore` reruns it ({why})"),
                (None, _) => "`lockcheck replay` reruns it".to_string(),
            };
            let _ = writeln!(
                md,
                "\n### {}\n\n{found} {story}\n\nReport: [{report}]({report}) · {rerun}",
                c.id
            );
        }
        md
    }
}

/// Simulated time for people: hours with one decimal.
pub fn hours(ns: u64) -> String {
    format!("{:.1} h", ns as f64 / 3.6e12)
}
