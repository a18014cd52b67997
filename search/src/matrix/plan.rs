//! The plan of a matrix: its rows (lockcheck's algorithms, their variants, a user's lock) and
//! the cells they make with the fault profiles, each with the parameters it searches with.

use super::FOR_UPDATE_WAIT_TIMEOUT_MS;
use lockcheck_algorithms::describe::{Fencing, Lease};
use lockcheck_core::profile::FaultProfile;
use lockcheck_core::report::shell_quote;
use lockcheck_core::scenario::{Algorithm, Params};
use lockcheck_sim::script_file::ScriptFile;
use serde::{Deserialize, Serialize};
use std::fmt::Write as _;
use std::path::Path;

/// A row of the matrix (with its fencing row, where it has one): one of lockcheck's algorithms
/// (as its library's current release, or a named variant for another range of versions:
/// `redis-reentrant@redisson-3.23`), or a user's lock, an algorithm that runs the user's
/// scripts with the scripts of a file (`--algorithms redis-script:FILE`).
#[derive(Clone, Debug, PartialEq)]
pub struct Row {
    /// The algorithm.
    pub algorithm: Algorithm,
    /// A library variant other than the default ([`Description::variants`]).
    ///
    /// [`Description::variants`]: lockcheck_algorithms::describe::Description::variants
    pub variant: Option<&'static str>,
    /// The user's lock, for an algorithm that runs the user's scripts.
    pub user: Option<UserLock>,
    /// Servers other than the default (`params.nodes`): a cluster of etcd members
    /// (`etcd-mutex/3`).
    pub nodes: Option<u32>,
}

/// The rows of `lockcheck matrix` without `--algorithms`: every one of lockcheck's own
/// algorithms, each followed by its library variants other than the default, so that the
/// verdicts of the versions people run stand beside the current release's.
pub fn default_rows() -> Vec<Row> {
    let mut rows = Vec::new();
    for algorithm in Algorithm::built_in() {
        rows.push(Row::built_in(algorithm));
        for variant in algorithm.description().variants.iter().skip(1) {
            rows.push(Row {
                variant: Some(variant.name),
                ..Row::built_in(algorithm)
            });
        }
        // A lock on one etcd member, and on the three-member cluster people run: what raft's
        // leader changes and round-robin clients do to the same lock.
        if algorithm == Algorithm::EtcdMutex {
            rows.push(Row {
                nodes: Some(3),
                ..Row::built_in(algorithm)
            });
        }
    }
    rows
}

/// A user's lock as a matrix row: the file of its scripts, read.
#[derive(Clone, Debug, PartialEq)]
pub struct UserLock {
    /// The file as `--algorithms` named it: the row's name and its cells' rerun commands say
    /// it so.
    pub file: String,
    /// What the file holds.
    pub script: ScriptFile,
}

impl Row {
    /// A row of one of lockcheck's own algorithms.
    pub fn built_in(algorithm: Algorithm) -> Row {
        Row {
            algorithm,
            variant: None,
            user: None,
            nodes: None,
        }
    }

    /// Its name as `--algorithms` takes it: `single-redis`, `redis-reentrant@redisson-3.23`,
    /// `redis-script:locks/mine.toml`, `etcd-mutex/3` (on three servers).
    pub fn name(&self) -> String {
        let mut name = self.algorithm.name().to_string();
        if let Some(variant) = self.variant {
            name = format!("{name}@{variant}");
        }
        if let Some(nodes) = self.nodes {
            name = format!("{name}/{nodes}");
        }
        if let Some(user) = &self.user {
            name = format!("{name}:{}", user.file);
        }
        name
    }

    /// What its cells' names begin with: the algorithm's name, then a variant's, or for a
    /// user's lock the file's name (`redis-reentrant-redisson-3.23`, `redis-script-mine`; see
    /// [`CellSpec::id`]).
    pub fn cell_prefix(&self) -> String {
        cell_prefix(
            self.algorithm,
            self.variant,
            self.user.as_ref().map(|u| u.file.as_str()),
            self.nodes,
        )
    }

    /// The parameters its cells start from: the defaults, with the row's variant, or a user's
    /// lock's scripts.
    fn base_params(&self) -> Params {
        let mut params = Params {
            variant: self.variant.map(str::to_string),
            nodes: self.nodes,
            ..Params::default()
        };
        if let Some(user) = &self.user {
            user.script.apply_to(&mut params);
        }
        params
    }
}

/// The beginning of a cell's name: `algorithm`'s name, followed by its variant's, or for a
/// user's lock by its script file's name without the extension, in lowercase letters, digits
/// and `-` (cell names name files), then `-N-servers` for a row on `nodes` servers.
fn cell_prefix(
    algorithm: Algorithm,
    variant: Option<&str>,
    file: Option<&str>,
    nodes: Option<u32>,
) -> String {
    let prefix = prefix_of(algorithm, variant, file);
    match nodes {
        Some(n) => format!("{prefix}-{n}-servers"),
        None => prefix,
    }
}

/// [`cell_prefix`] without the servers.
fn prefix_of(algorithm: Algorithm, variant: Option<&str>, file: Option<&str>) -> String {
    if let Some(variant) = variant {
        return format!("{}-{variant}", algorithm.name());
    }
    let Some(file) = file else {
        return algorithm.name().to_string();
    };
    let stem = Path::new(file)
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    let mut name = String::new();
    for c in stem.chars() {
        let c = c.to_ascii_lowercase();
        if c.is_ascii_lowercase() || c.is_ascii_digit() {
            name.push(c);
        } else if !name.ends_with('-') {
            name.push('-');
        }
    }
    let name = name.trim_matches('-');
    if name.is_empty() {
        format!("{}-script", algorithm.name())
    } else {
        format!("{}-{name}", algorithm.name())
    }
}

/// Which search a cell is.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CellSpec {
    /// The algorithm.
    pub algorithm: Algorithm,
    /// A library variant other than the default (also in the cell's parameters).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub variant: Option<String>,
    /// For a user's lock: the file of its scripts, as `--algorithms` named it (the scripts
    /// themselves are embedded in the cell's parameters).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub script: Option<String>,
    /// Servers other than the default (also in the cell's parameters).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nodes: Option<u32>,
    /// Whether the resource checks the lock's fencing token.
    pub fencing: bool,
    /// The fault profile.
    pub profile: FaultProfile,
}

impl CellSpec {
    /// The cell's name: `single-redis-pause`, `single-redis-fencing-pause`. Names its report and
    /// its regression file.
    pub fn id(&self) -> String {
        format!(
            "{}{}-{}",
            cell_prefix(
                self.algorithm,
                self.variant.as_deref(),
                self.script.as_deref(),
                self.nodes
            ),
            if self.fencing { "-fencing" } else { "" },
            self.profile.name()
        )
    }

    /// The parameters the cell searches with, from its row's `base` ([`plan`] gives it), or
    /// why the cell cannot be searched. Every cell takes the defaults (docs/scenarios.md; a user's lock
    /// with its scripts), except: fencing where the row says so; one replica for `failover`,
    /// which needs one to promote; and [`FOR_UPDATE_WAIT_TIMEOUT_MS`] for
    /// `mysql-for-update-held`.
    pub fn params(&self, base: Params) -> Result<Params, String> {
        let mut params = Params {
            fencing: self.fencing,
            ..base
        };
        if self.algorithm.lease() == Lease::IdleConnection {
            params.mysql.wait_timeout_ms = Some(FOR_UPDATE_WAIT_TIMEOUT_MS);
        }
        if self.profile == FaultProfile::Failover {
            if !has_replicas(self.algorithm) {
                return Err(
                    "no replica to promote: asynchronous replicas are modelled for the \
                            single-server Redis locks"
                        .into(),
                );
            }
            params.redis.replicas = 1;
        }
        params
            .check_for(self.algorithm)
            .map_err(|e| e.to_string())?;
        Ok(params)
    }

    /// The `lockcheck explore` flags that search this cell alone with `params` (its
    /// [`CellSpec::params`]; add `--cases`, `--seed`), or why there are none. Derived from the
    /// parameters themselves, not restated: every parameter that differs from its default
    /// becomes the `explore` flag of the same name (`wait_timeout_ms` → `--wait-timeout-ms`), so
    /// a parameter a cell comes to set cannot be left out of its rerun command. One that
    /// `explore` has no flag for is caught by the test that parses every cell's flags back.
    pub fn explore_flags(&self, params: &Params) -> Result<String, String> {
        let mut flags = format!("--algorithm {}", self.algorithm.name());
        // A user's lock: `--script FILE` sets what the file decides (the scripts, and with them
        // fencing and the watchdog); the other flags say what the cell sets beyond it.
        let mut base = Params::default();
        if let Some(file) = &self.script {
            let script = params
                .redis
                .script
                .clone()
                .ok_or("a user's lock without its scripts")?;
            ScriptFile {
                script,
                fencing: self.fencing,
            }
            .apply_to(&mut base);
            let _ = write!(flags, " --script {}", shell_quote(file));
        }
        let _ = write!(flags, " --faults {} --safety-only", self.profile.name());
        let to_map = |p: &Params| match serde_json::to_value(p) {
            Ok(serde_json::Value::Object(map)) => map,
            _ => unreachable!("params serialize to a JSON object"),
        };
        let (set, default) = (to_map(params), to_map(&base));
        if let Some(key) = default.keys().find(|k| !set.contains_key(*k)) {
            return Err(format!("params.{key}: no flag unsets it"));
        }
        // A backend's group (`redis: {replicas: 1}`) is set by the flags of its settings'
        // names (`--replicas 1`): explore's flags are flat.
        let mut changed: Vec<(&String, &serde_json::Value)> = Vec::new();
        for (key, value) in &set {
            if default.get(key) == Some(value) {
                continue;
            }
            match value {
                serde_json::Value::Object(group)
                    if matches!(key.as_str(), "redis" | "zookeeper" | "mysql") =>
                {
                    // Only the settings that differ from the base's (a user's lock's scripts
                    // are in the redis group, set by `--script`).
                    let base = default.get(key).and_then(|b| b.as_object());
                    changed.extend(
                        group
                            .iter()
                            .filter(|(k, v)| base.and_then(|b| b.get(*k)) != Some(*v)),
                    );
                }
                _ => changed.push((key, value)),
            }
        }
        for (key, value) in changed {
            let flag = format!("--{}", key.replace('_', "-"));
            match value {
                serde_json::Value::Bool(true) => {
                    let _ = write!(flags, " {flag}");
                }
                serde_json::Value::Number(n) => {
                    let _ = write!(flags, " {flag} {n}");
                }
                serde_json::Value::String(text) => {
                    let _ = write!(flags, " {flag} {text}");
                }
                other => return Err(format!("params.{key} = {other}: no flag sets it")),
            }
        }
        Ok(flags)
    }
}

/// Whether `algorithm` produces a fencing token: a scenario accepts `fencing: true` exactly then.
pub fn has_fencing(algorithm: Algorithm) -> bool {
    algorithm.description().fencing == Fencing::Token
}

/// Whether `algorithm` can run with asynchronous replicas (and so be failed over).
fn has_replicas(algorithm: Algorithm) -> bool {
    algorithm.description().replicas
}

/// The cells of `rows` × `profiles`, each with the parameters its row starts from (for
/// [`CellSpec::params`]): each algorithm, then its fencing variant where it has a token, each
/// under every profile, in the order given. A user's lock has one row, fenced when its file
/// says its acquire script returns a token.
pub fn plan(rows: &[Row], profiles: &[FaultProfile]) -> Vec<(CellSpec, Params)> {
    let mut cells = Vec::new();
    for row in rows {
        let base = row.base_params();
        let fencings: &[bool] = match (&row.user, has_fencing(row.algorithm)) {
            (Some(user), _) => &[user.script.fencing][..],
            (None, true) => &[false, true],
            (None, false) => &[false],
        };
        for &fencing in fencings {
            for &profile in profiles {
                let spec = CellSpec {
                    algorithm: row.algorithm,
                    variant: row.variant.map(str::to_string),
                    script: row.user.as_ref().map(|u| u.file.clone()),
                    nodes: row.nodes,
                    fencing,
                    profile,
                };
                cells.push((spec, base.clone()));
            }
        }
    }
    cells
}
