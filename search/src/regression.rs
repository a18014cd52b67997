//! Persisted failures: every failing scenario a search finds is kept in `OUT/regressions/ID.json`
//! and run again, first, the next time the same search runs — as proptest's regression files do,
//! but with whole scenarios, so that a failure once found is not lost when the generator, the
//! seed or the budget changes and the search no longer reaches it.
//!
//! A file keeps every failure of one cell (a matrix cell, a `check` entry, an `explore` search),
//! each with the search it came from: a scenario is replayed only for the same algorithm,
//! parameters and fault profiles, because under other settings its failure would prove nothing
//! about this search.

use crate::explore::{Careful, ExploreOptions};
use lockcheck_core::checker::ViolationKind;
use lockcheck_core::profile::FaultProfile;
use lockcheck_core::scenario::{Algorithm, Params, Scenario, ScenarioError};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use thiserror::Error;

/// A regression file that cannot be read or written.
#[derive(Debug, Error)]
pub enum RegressionError {
    /// The file could not be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The file is not a lockcheck regression file.
    #[error("{path}: not a lockcheck regression file: {message}")]
    Malformed {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
    /// A scenario inside the file is not runnable.
    #[error("{path}: regression {index}: {source}")]
    Scenario {
        /// The file.
        path: PathBuf,
        /// Which entry, from 0.
        index: usize,
        /// Why.
        source: ScenarioError,
    },
}

/// What decides whether a failure found by one search says anything about another: everything
/// that shapes the cases, but not the seed, the budget, the threads or the shard (a scenario
/// found under any of those is just as valid a case of this search).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SearchKey {
    /// The algorithm.
    pub algorithm: Algorithm,
    /// Its parameters.
    pub params: Params,
    /// The fault profiles searched.
    pub profiles: Vec<FaultProfile>,
    /// `--max-drift`.
    pub max_drift: f64,
    /// `--max-partition-ms`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_partition_ms: Option<u64>,
    /// Whether only safety violations counted.
    pub safety_only: bool,
    /// The only violation kind that counted, if one was named.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub only: Option<ViolationKind>,
    /// Which clients checked their lock before each access (`ExploreOptions::careful`);
    /// absent when none did, as in files written before it existed.
    #[serde(default, skip_serializing_if = "Careful::is_never")]
    pub careful: Careful,
}

impl SearchKey {
    /// The key of the search `options` describes.
    pub fn of(options: &ExploreOptions) -> SearchKey {
        SearchKey {
            algorithm: options.algorithm,
            params: options.params.clone(),
            profiles: options.profiles.clone(),
            max_drift: options.max_drift,
            max_partition_ms: options.max_partition_ms,
            safety_only: options.safety_only,
            only: options.only,
            careful: options.careful,
        }
    }
}

/// One persisted failure.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Regression {
    /// The search that found it.
    pub search: SearchKey,
    /// The seed of that search: with `case_index`, where to find the failure again (`explore
    /// --seed S --cases K+1`), which people are told when the failure settles a cell.
    pub found_with_seed: u64,
    /// The failing case's index in that search. Every file lockcheck wrote has it: a failure is
    /// persisted only when a search finds it.
    pub case_index: u64,
    /// The (shrunk) failing scenario: runnable as is.
    pub scenario: Scenario,
    /// The history hash it had when found. A replay whose history differs still counts if it
    /// fails, but it is told (the simulator or the algorithm changed since).
    pub history_hash: String,
}

/// The file's shape.
#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct RegressionFile {
    /// Oldest first: replayed in this order.
    regressions: Vec<Regression>,
}

/// Where the regressions of cell `id` are kept under the output directory `out`.
pub fn path(out: &Path, id: &str) -> PathBuf {
    out.join("regressions").join(format!("{id}.json"))
}

/// The persisted failures of cell `id` found by a search with `key`, oldest first (none when the
/// file does not exist). Entries of other searches stay in the file but are not returned.
pub fn load(out: &Path, id: &str, key: &SearchKey) -> Result<Vec<Regression>, RegressionError> {
    Ok(read(&path(out, id))?
        .regressions
        .into_iter()
        .filter(|r| r.search == *key)
        .collect())
}

/// Adds `regression` to cell `id`'s file unless the same scenario is already there for the same
/// search.
pub fn record(out: &Path, id: &str, regression: Regression) -> Result<(), RegressionError> {
    let file = path(out, id);
    let _lock = lock(&file)?;
    let mut all = read(&file)?;
    let known = all
        .regressions
        .iter()
        .any(|r| r.search == regression.search && r.scenario == regression.scenario);
    if known {
        return Ok(());
    }
    all.regressions.push(regression);
    write(&file, &all)
}

/// Removes `scenario`'s entry for the search `key` from cell `id`'s file: a failure kept as
/// drawn, once its shrunk form is recorded. Nothing when it is not there.
pub fn forget(
    out: &Path,
    id: &str,
    key: &SearchKey,
    scenario: &Scenario,
) -> Result<(), RegressionError> {
    let file = path(out, id);
    let _lock = lock(&file)?;
    let mut all = read(&file)?;
    let before = all.regressions.len();
    all.regressions
        .retain(|r| !(r.search == *key && r.scenario == *scenario));
    if all.regressions.len() == before {
        return Ok(());
    }
    write(&file, &all)
}

/// Adds the failures persisted for cell `id` under the output directories `sources` (the shards
/// of one matrix) to the file of cell `id` under `out`, each failure (the same search and
/// scenario) once: `out`'s own entries first, as they are, then the sources' by case index,
/// lowest first, with equal indices in the order of `sources`. A failure in two sources keeps
/// its first entry; so the file is the same whatever order the shards' directories were
/// written in, and the failure the unsharded search finds (the lowest case) comes first, as it
/// does in the unsharded run's file. Writes nothing when there is nothing to keep.
pub fn merge(out: &Path, id: &str, sources: &[&Path]) -> Result<(), RegressionError> {
    let file = path(out, id);
    let _lock = lock(&file)?;
    let mut all = read(&file)?;
    let mut found = Vec::new();
    for source in sources {
        found.extend(read(&path(source, id))?.regressions);
    }
    found.sort_by_key(|r| r.case_index);
    let before = all.regressions.len();
    for r in found {
        let known = all
            .regressions
            .iter()
            .any(|k| k.search == r.search && k.scenario == r.scenario);
        if !known {
            all.regressions.push(r);
        }
    }
    if all.regressions.len() == before {
        return Ok(());
    }
    write(&file, &all)
}

/// Takes the advisory lock of the directory that holds `file` (`OUT/regressions`), held until
/// the returned handle is dropped: two searches on the same output directory (two `check`s, a
/// `matrix` and an `explore`) read, add to and write a cell's file one after the other, so
/// neither's failure is lost to the other's write. The directory itself is locked (`flock` on
/// its descriptor), so no lock file is left beside the regressions.
fn lock(file: &Path) -> Result<std::fs::File, RegressionError> {
    let dir = file.parent().unwrap_or(Path::new("."));
    let io = |source| RegressionError::Io {
        path: dir.to_path_buf(),
        source,
    };
    std::fs::create_dir_all(dir).map_err(io)?;
    let handle = std::fs::File::open(dir).map_err(io)?;
    handle.lock().map_err(io)?;
    Ok(handle)
}

fn write(file: &Path, all: &RegressionFile) -> Result<(), RegressionError> {
    let io = |source| RegressionError::Io {
        path: file.to_path_buf(),
        source,
    };
    if let Some(dir) = file.parent() {
        std::fs::create_dir_all(dir).map_err(io)?;
    }
    let json = serde_json::to_string_pretty(all).expect("regressions serialize");
    lockcheck_core::output::write_atomically(file, (json + "\n").as_bytes()).map_err(io)
}

fn read(file: &Path) -> Result<RegressionFile, RegressionError> {
    let text = match lockcheck_core::input::read_text(file, lockcheck_core::input::MAX_REPORT_BYTES)
    {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(RegressionFile::default()),
        Err(source) => {
            return Err(RegressionError::Io {
                path: file.to_path_buf(),
                source,
            })
        }
    };
    let parsed: RegressionFile =
        lockcheck_core::input::parse_json(&text).map_err(|e| RegressionError::Malformed {
            path: file.to_path_buf(),
            message: format!("at {}: {}", e.path, e.message),
        })?;
    for (index, r) in parsed.regressions.iter().enumerate() {
        r.scenario
            .validate()
            .map_err(|source| RegressionError::Scenario {
                path: file.to_path_buf(),
                index,
                source,
            })?;
    }
    Ok(parsed)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::explore::ExploreOptions;

    fn failure(case_index: u64, seed: u64) -> Regression {
        let options = ExploreOptions::new(Algorithm::SingleRedis, vec![FaultProfile::Pause], 9, 0);
        let mut scenario = Scenario::new(Algorithm::SingleRedis);
        scenario.seed = seed;
        Regression {
            search: SearchKey::of(&options),
            found_with_seed: 0,
            case_index,
            scenario,
            history_hash: "h".into(),
        }
    }

    #[test]
    fn merge_keeps_out_first_then_every_shards_failure_once_by_case_index() {
        let root = std::env::temp_dir().join(format!("lockcheck-regmerge-{}", std::process::id()));
        std::fs::remove_dir_all(&root).ok();
        let (out, s1, s2) = (root.join("out"), root.join("s1"), root.join("s2"));
        record(&out, "c", failure(40, 1)).unwrap();
        record(&s1, "c", failure(6, 2)).unwrap();
        record(&s1, "c", failure(2, 3)).unwrap();
        record(&s2, "c", failure(3, 4)).unwrap();
        // The same scenario as out's, found again at another case: kept once, as out has it.
        record(&s2, "c", failure(1, 1)).unwrap();
        merge(&out, "c", &[&s1, &s2]).unwrap();
        let merged = read(&path(&out, "c")).unwrap().regressions;
        let order: Vec<(u64, u64)> = merged
            .iter()
            .map(|r| (r.case_index, r.scenario.seed))
            .collect();
        assert_eq!(order, [(40, 1), (2, 3), (3, 4), (6, 2)]);
        // The shards in the other order: the same file.
        let again = root.join("again");
        record(&again, "c", failure(40, 1)).unwrap();
        merge(&again, "c", &[&s2, &s1]).unwrap();
        assert_eq!(read(&path(&again, "c")).unwrap().regressions, merged);
        // Nothing to keep: nothing written.
        merge(&root.join("none"), "d", &[&s1, &s2]).unwrap();
        assert!(!path(&root.join("none"), "d").exists());
        std::fs::remove_dir_all(&root).ok();
    }

    /// Issue 40 item 5: searches on the same output directory at once (threads here, processes
    /// in use: the lock is the file's, not the process's) lose none of each other's failures.
    #[test]
    fn failures_recorded_at_once_are_all_kept() {
        let out = std::env::temp_dir().join(format!("lockcheck-reglock-{}", std::process::id()));
        std::fs::remove_dir_all(&out).ok();
        std::thread::scope(|scope| {
            for writer in 0..8u64 {
                let out = &out;
                scope.spawn(move || {
                    for k in 0..12u64 {
                        record(out, "c", failure(k, writer * 100 + k)).unwrap();
                    }
                });
            }
        });
        assert_eq!(read(&path(&out, "c")).unwrap().regressions.len(), 8 * 12);
        std::fs::remove_dir_all(&out).ok();
    }
}
