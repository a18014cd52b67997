//! `lockcheck real --client` with what the user declares of the library (`--client-keys`,
//! `--client-lease-ms`): what cannot be used as given is refused (exit 2) before anything
//! starts, with the reason. No server is needed: the refusals come first.

mod common;

use common::{lockcheck, stderr};

/// `lockcheck real ARGS` exits 2 and its stderr holds `said`.
fn refused(args: &[&str], said: &str) {
    let mut all = vec!["real"];
    all.extend_from_slice(args);
    let o = lockcheck(&all);
    assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
    assert!(
        stderr(&o).contains(said),
        "{args:?}: expected '{said}' in:\n{}",
        stderr(&o)
    );
}

#[test]
fn the_declarations_need_a_client() {
    refused(
        &["--algorithm", "single-redis", "--client-keys", "lock:{key}"],
        "--client <COMMAND>",
    );
    refused(
        &["--algorithm", "single-redis", "--client-lease-ms", "60000"],
        "--client <COMMAND>",
    );
}

#[test]
fn a_pattern_without_the_key_is_refused_as_naming_the_users_data() {
    let e = "'users:*' does not hold {key}";
    refused(
        &[
            "--algorithm",
            "single-redis",
            "--client",
            "true",
            "--client-keys",
            "lock:{key},users:*",
        ],
        e,
    );
    refused(
        &[
            "--algorithm",
            "single-redis",
            "--client",
            "true",
            "--client-keys",
            "lock:{key},users:*",
        ],
        "your own data, not the run's",
    );
    // The same with a search: refused before any case is drawn.
    refused(
        &[
            "--algorithm",
            "single-redis",
            "--cases",
            "2",
            "--client",
            "true",
            "--client-keys",
            "users:*",
        ],
        e,
    );
}

#[test]
fn patterns_the_backend_cannot_take_are_refused() {
    for (algorithm, pattern, said) in [
        ("single-redis", "*:{key}", "a '*' may only end a pattern"),
        ("zk-sequential", "locks/{key}", "starts with '/'"),
        ("mysql-row", "lock_{key}", "MariaDB library's own tables"),
    ] {
        refused(
            &[
                "--algorithm",
                algorithm,
                "--client",
                "true",
                "--client-keys",
                pattern,
            ],
            said,
        );
    }
}

#[test]
fn a_declared_lease_is_positive_and_at_most_a_year() {
    for ms in ["0", "31536000001"] {
        refused(
            &[
                "--algorithm",
                "single-redis",
                "--client",
                "true",
                "--client-lease-ms",
                ms,
            ],
            &format!("--client-lease-ms {ms}: a lease is a positive number of ms"),
        );
    }
    refused(
        &[
            "--algorithm",
            "single-redis",
            "--client",
            "true",
            "--client-lease-ms",
            "-5",
        ],
        "-5",
    );
}
