//! A run's memory does not grow with simulated time (#40 item 2): waits of 40 hours on a lease
//! of a year, run with their reports and replayed, peak at a few tens of MB. (Before: one
//! history entry per poll, 1.2 GB for single-redis; and the simulated MariaDB kept the token
//! of every refused insert of mysql-unique, 2 MB an hour.) One test in its own binary: the peak
//! is the largest of this process's children, so no other test may run one.

mod common;

use common::{lockcheck, report_in, stderr, stdout, Scratch};

/// The largest peak resident set of the children this process has waited for, in KB.
fn children_peak_kb() -> i64 {
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: getrusage writes one rusage into the struct it is given.
    let rc = unsafe { libc::getrusage(libc::RUSAGE_CHILDREN, &mut usage) };
    assert_eq!(rc, 0, "getrusage");
    usage.ru_maxrss
}

#[test]
fn a_forty_hour_wait_on_a_year_long_lease_peaks_at_a_few_tens_of_mb() {
    const PAUSE_MS: u64 = 40 * 3_600_000;
    const PEAK_KB: i64 = 64 * 1024;
    let scratch = Scratch::new("peak");
    for (algorithm, params) in [
        ("single-redis", r#""params": {"ttl_ms": 31536000000},"#),
        ("mysql-unique", ""),
    ] {
        let text = format!(
            r#"{{"algorithm": "{algorithm}", {params} "clients": 2,
                "workload": {{"acquisitions_per_client": 1, "hold_ms": 2000}},
                "duration_ms": {}, "seed": 7,
                "faults": [{{"at_ms": 500, "fault": "pause", "node": "client-0",
                             "for_ms": {PAUSE_MS}}}]}}"#,
            2 * PAUSE_MS
        );
        let file = scratch.file(&format!("{algorithm}.json"), &text);
        let out = scratch.sub(algorithm);
        let o = lockcheck(&[
            "run",
            file.to_str().unwrap(),
            "--report",
            out.to_str().unwrap(),
        ]);
        assert_eq!(o.status.code(), Some(0), "{}{}", stdout(&o), stderr(&o));
        let peak = children_peak_kb();
        assert!(peak < PEAK_KB, "{algorithm}: the run peaked at {peak} KB");
        let o = lockcheck(&["replay", report_in(&out).to_str().unwrap()]);
        assert_eq!(o.status.code(), Some(0), "{}{}", stdout(&o), stderr(&o));
        let peak = children_peak_kb();
        assert!(
            peak < PEAK_KB,
            "{algorithm}: the replay peaked at {peak} KB"
        );
    }
}
