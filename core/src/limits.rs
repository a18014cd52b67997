//! The range of every number lockcheck reads: in a scenario, a report's scenario, an
//! expectations entry and a flag. Out of range is an error naming the field (exit 2), never a
//! silent wrap, a saturated timer or a run that ends at once.
//!
//! The bounds are chosen so that simulated time cannot overflow: every duration is at most
//! [`MAX_MS`] (365 days, MariaDB's largest `wait_timeout`), so a run's horizon (a few such spans
//! added up) stays far below the 584 years a `u64` of nanoseconds holds; and so that a run cannot
//! ask the simulator for more than it can build (madsim gives each node an address of its own and
//! runs out near 64,000). [`markdown`] is the table docs/scenarios.md shows; a test keeps the two equal.

use std::fmt::Display;

/// The longest duration any field accepts, in ms: 365 days (MariaDB's largest `wait_timeout`).
pub const MAX_MS: u64 = 365 * 24 * 60 * 60 * 1_000;
/// The most clients a scenario may have.
pub const MAX_CLIENTS: u32 = 1_000;
/// The most servers (`params.nodes`) a scenario may have.
pub const MAX_NODES: u32 = 99;
/// The most replicas of a single-server lock.
pub const MAX_REPLICAS: u32 = 16;
/// How far back a drawn server clock origin may lie ([`crate::server_clock`]), and the bound of
/// a pinned one: an hour of uptime, many ticks and lessor loops of every length lockcheck runs,
/// so the phase is uniform.
pub const ORIGIN_SPAN_MS: u64 = 3_600_000;
/// The shortest session lease a scenario may ask of etcd: what etcd grants at least with its
/// default timing (1.5 × the 1 s election timeout, rounded up).
pub const MIN_ETCD_LEASE_TTL_S: u64 = 2;
/// The longest session lease a scenario may ask of etcd: an hour.
pub const MAX_ETCD_LEASE_TTL_S: u64 = 3_600;
/// The most critical sections per client.
pub const MAX_ACQUISITIONS: u32 = 100_000;
/// The deepest nesting of a reentrant lock.
pub const MAX_REENTRANT_DEPTH: u32 = 1_000;
/// The most attempts per acquisition.
pub const MAX_RETRY_COUNT: u32 = 1_000_000;
/// The most faults in one schedule.
pub const MAX_FAULTS: usize = 10_000;
/// The fastest (and, as its inverse, the slowest) a clock may drift: `rate` is in (0, 100].
pub const MAX_DRIFT_RATE: f64 = 100.0;
/// The largest search budget in cases (`--cases`, an expectation's `cases`, a shard count).
pub const MAX_CASES: u32 = 1_000_000_000;
/// The most threads a search or a check runs (`--jobs`).
pub const MAX_JOBS: usize = 1_024;
/// The largest time budget per matrix cell, in seconds (`--budget-seconds`): 30 days.
pub const MAX_BUDGET_SECONDS: u64 = 30 * 24 * 60 * 60;

/// The most entries one run's history holds ([`crate::history::Recording`]). A run that would
/// record more stops there and is refused (exit 2) naming what made it long; a workload that
/// asks for more ([`workload_entries`]) is refused before it runs. An entry is about 400 bytes
/// in memory, 260 in a report and up to 700 in its timeline, and drawing the timeline takes
/// the most: at the cap a run with its report peaks near 1.2 GB (docs/scenarios.md, "Bounds").
pub const MAX_HISTORY_ENTRIES: usize = 500_000;

/// The fewest history entries one critical section records: the acquisition (invoke, an
/// attempt, ok), the two accesses (invoke, the resource's observation and ok each), the release
/// (invoke, ok), and the lock written and removed on a server.
pub const SECTION_ENTRIES: u64 = 13;

/// The fewest entries a nested acquisition of a reentrant lock adds: its acquire (invoke, an
/// attempt, ok) and its release (invoke, ok).
pub const NESTED_ENTRIES: u64 = 5;

/// The fewest history entries a run records if it does every critical section its workload asks
/// for: `sections` in all, `depth` acquisitions deep, each renewed `renewals` times while held
/// (a renewal moves the lock's expiry on a server: an entry). Saturates rather than wraps.
pub fn workload_entries(sections: u64, depth: u64, renewals: u64) -> u64 {
    let per_section = SECTION_ENTRIES
        .saturating_add(NESTED_ENTRIES.saturating_mul(depth.saturating_sub(1)))
        .saturating_add(renewals);
    sections.saturating_mul(per_section)
}

/// `Ok` when `lo <= value <= hi`; else why, naming `field`.
pub fn within<T: PartialOrd + Display>(field: &str, value: T, lo: T, hi: T) -> Result<(), String> {
    if value >= lo && value <= hi {
        Ok(())
    } else {
        Err(format!("{field} must be within {lo}..={hi}, got {value}"))
    }
}

/// A duration in ms that must be positive: `1..=MAX_MS`.
pub fn positive_ms(field: &str, ms: u64) -> Result<(), String> {
    within(field, ms, 1, MAX_MS).map_err(|e| format!("{e} ms (at most 365 days)"))
}

/// A duration in ms that may be zero: `0..=MAX_MS`.
pub fn any_ms(field: &str, ms: u64) -> Result<(), String> {
    within(field, ms, 0, MAX_MS).map_err(|e| format!("{e} ms (at most 365 days)"))
}

/// The documented ranges, one row per field: (field, range, what bounds it).
pub fn rows() -> Vec<(&'static str, String, &'static str)> {
    let ms = |lo: u64| format!("{lo}..={MAX_MS} ms");
    vec![
        ("`duration_ms`", ms(1), "365 days"),
        ("`clients`", format!("1..={MAX_CLIENTS}"), ""),
        ("`seed`", "0..=18446744073709551615".into(), "any u64"),
        (
            "`params.nodes`",
            format!("1..={MAX_NODES}"),
            "redlock: odd and at least 3; the ZooKeeper locks: 1 or odd; the others: 1",
        ),
        ("`params.ttl_ms`", ms(1), ""),
        ("`params.drift_factor`", "[0, 1)".into(), ""),
        (
            "`params.restart_delay_ms`, `params.per_node.*.restart_delay_ms`",
            ms(0),
            "",
        ),
        ("`params.retry_delay_ms`", ms(1), ""),
        ("`params.retry_count`", format!("1..={MAX_RETRY_COUNT}"), ""),
        ("`params.redis.replicas`", format!("0..={MAX_REPLICAS}"), ""),
        ("`params.redis.replication_lag_ms`", ms(1), ""),
        (
            "`params.redis.wait_replicas`",
            "0..=`params.redis.replicas`".into(),
            "",
        ),
        (
            "`params.redis.wait_timeout_ms`, `params.mysql.wait_timeout_ms`",
            ms(1),
            "",
        ),
        ("`params.mysql.lock_wait_timeout_ms`", ms(1), ""),
        ("`params.redis.queue_timeout_ms`", ms(1), ""),
        (
            "`params.zookeeper.session_timeout_ms`",
            "4000..=40000 ms".into(),
            "what a ZooKeeper server with the default tickTime grants",
        ),
        (
            "`params.etcd.lease_ttl_s`",
            format!("{MIN_ETCD_LEASE_TTL_S}..={MAX_ETCD_LEASE_TTL_S} s"),
            "etcd grants at least 2 s with its default timing (1.5 × the 1 s election timeout, \
             rounded up) and would raise a shorter TTL silently",
        ),
        ("`params.request_timeout_ms`", ms(1), ""),
        (
            "`workload.acquisitions_per_client`",
            format!("1..={MAX_ACQUISITIONS}"),
            "",
        ),
        ("`workload.hold_ms`, `workload.think_ms`", ms(0), ""),
        (
            "`workload.reentrant_depth`",
            format!("1..={MAX_REENTRANT_DEPTH}"),
            "above 1 for reentrant locks only",
        ),
        ("`workload.read_fraction`", "[0, 1]".into(), ""),
        (
            "history entries a workload asks for: 13 a critical section (`clients` × \
             `workload.acquisitions_per_client`), 5 more per nested acquisition, 1 per watchdog \
             renewal",
            format!("0..={MAX_HISTORY_ENTRIES}"),
            "a run keeps at most this many entries (see Bounds)",
        ),
        ("`faults`", format!("0..={MAX_FAULTS} entries"), ""),
        ("`faults[].at_ms`", "0..`duration_ms`".into(), ""),
        (
            "`faults[].for_ms`, `faults[].extra_ms`",
            ms(1),
            "pause, partition, loss, delay",
        ),
        (
            "`faults[].extra_ms` of every delay, added up",
            ms(0),
            "overlapping delays add up",
        ),
        (
            "`faults[].by_ms` (clock_jump)",
            format!("-{MAX_MS}..={MAX_MS} ms, not 0"),
            "",
        ),
        (
            "`faults[].by_ms` of one node's jumps, added up at every jump",
            format!("-{MAX_MS}..={MAX_MS} ms"),
            "a wall clock at most 365 days off",
        ),
        (
            "`faults[].rate` (clock_drift)",
            format!("(0, {MAX_DRIFT_RATE}]"),
            "",
        ),
        ("`faults[].rate` (loss)", "[0, 1]".into(), ""),
        (
            "`--cases`, an expectation's `cases`",
            format!("1..={MAX_CASES}"),
            "",
        ),
        ("`--max-drift`, `max_drift`", "[0, 1)".into(), ""),
        ("`--max-partition-ms`, `max_partition_ms`", ms(1), ""),
        ("`--jobs`", format!("1..={MAX_JOBS}"), ""),
        (
            "`--budget-seconds`",
            format!("1..={MAX_BUDGET_SECONDS}"),
            "30 days per cell",
        ),
        ("`--shard I/N`", format!("1 <= I <= N <= {MAX_CASES}"), ""),
    ]
}

/// [`rows`] as the Markdown table docs/scenarios.md shows.
pub fn markdown() -> String {
    let mut out = String::from("| Field | Range | Note |\n|---|---|---|\n");
    for (field, range, note) in rows() {
        out.push_str(&format!("| {field} | {range} | {note} |\n"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_docs_show_these_ranges() {
        let readme = include_str!("../../docs/scenarios.md");
        let table = markdown();
        assert!(
            readme.contains(&table),
            "docs/scenarios.md's \"Ranges\" table is not the code's; it should read:\n{table}"
        );
    }

    #[test]
    fn out_of_range_names_the_field_and_the_range() {
        let e = positive_ms("params.ttl_ms", 0).unwrap_err();
        assert!(
            e.contains("params.ttl_ms must be within 1..=31536000000"),
            "{e}"
        );
        assert!(positive_ms("params.ttl_ms", MAX_MS).is_ok());
        assert!(positive_ms("params.ttl_ms", MAX_MS + 1).is_err());
        assert!(any_ms("workload.hold_ms", 0).is_ok());
    }
}
