//! `redis-script` as a user meets it on the command line: `--script FILE`, the examples'
//! verdicts and exit codes, and a bad script refused with exit 2 naming the script and line.

mod common;

use common::{lockcheck, report_in, stderr, stdout, Scratch};

const EXAMPLES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/examples/redis-script");

fn example(name: &str) -> String {
    format!("{EXAMPLES}/{name}")
}

fn explore(script: &str, faults: &str, out: &std::path::Path) -> std::process::Output {
    lockcheck(&[
        "explore",
        "--algorithm",
        "redis-script",
        "--script",
        script,
        "--faults",
        faults,
        "--cases",
        "200",
        "--out",
        out.to_str().unwrap(),
    ])
}

#[test]
fn the_examples_verdicts_and_exit_codes() {
    let scratch = Scratch::new("script-examples");
    let safe = explore(
        &example("compare-and-delete.toml"),
        "none",
        &scratch.sub("safe"),
    );
    assert_eq!(safe.status.code(), Some(0), "{}", stderr(&safe));
    assert!(stdout(&safe).contains("NOT FOUND"), "{}", stdout(&safe));
    let plain = explore(&example("plain-del.toml"), "pause", &scratch.sub("plain"));
    assert_eq!(plain.status.code(), Some(1), "{}", stderr(&plain));
    assert!(stdout(&plain).contains("UNSAFE"), "{}", stdout(&plain));
    // The report embeds the scripts: it replays without the file.
    let report = report_in(&scratch.sub("plain"));
    let text = std::fs::read_to_string(&report).unwrap();
    assert!(text.contains("return redis.call('DEL', KEYS[1])"));
    let replay = lockcheck(&["replay", report.to_str().unwrap()]);
    assert_eq!(replay.status.code(), Some(0), "{}", stdout(&replay));
}

#[test]
fn bad_scripts_and_misplaced_ones_exit_2_naming_the_problem() {
    let scratch = Scratch::new("script-bad");
    let acquire = "[acquire]\nscript = \"return redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2])\"\nkeys = [\"key\"]\nargv = [\"token\", \"ttl_ms\"]\nacquired = \"ok\"\n";
    let syntax = scratch.file(
        "syntax.toml",
        &format!("{acquire}[release]\nscript = \"\"\"\nif redis.call('GET', KEYS[1]) == ARGV[1]\n  return redis.call('DEL', KEYS[1])\nend\"\"\"\nkeys = [\"key\"]\nargv = [\"token\"]\nreleased = \"1\"\n"),
    );
    let runtime = scratch.file(
        "runtime.toml",
        &format!("{acquire}[release]\nscript = \"return redis.call('DELETE', KEYS[1])\"\nkeys = [\"key\"]\nreleased = \"1\"\n"),
    );
    let out = scratch.sub("out");
    let out = out.to_str().unwrap();
    let plain_del = example("plain-del.toml");
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (
            vec![
                "explore",
                "--algorithm",
                "redis-script",
                "--faults",
                "none",
                "--out",
                out,
            ],
            "--script FILE",
        ),
        (
            vec![
                "explore",
                "--algorithm",
                "single-redis",
                "--script",
                &plain_del,
                "--faults",
                "none",
                "--out",
                out,
            ],
            "params.redis.script",
        ),
        (
            vec![
                "explore",
                "--algorithm",
                "redis-script",
                "--script",
                syntax.to_str().unwrap(),
                "--faults",
                "none",
                "--out",
                out,
            ],
            "the release script does not compile: user_script:2:",
        ),
        (
            vec![
                "explore",
                "--algorithm",
                "redis-script",
                "--script",
                runtime.to_str().unwrap(),
                "--faults",
                "none",
                "--out",
                out,
            ],
            "the release script failed",
        ),
        (
            vec![
                "explore",
                "--algorithm",
                "redis-script",
                "--script",
                "/nonexistent/lock.toml",
                "--faults",
                "none",
                "--out",
                out,
            ],
            "/nonexistent/lock.toml",
        ),
        (
            vec!["matrix", "--algorithms", "redis-script", "--out", out],
            "does not take your scripts yet",
        ),
    ];
    for (args, expected) in cases {
        let o = lockcheck(&args);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
        assert!(stderr(&o).contains(expected), "{args:?}: {}", stderr(&o));
    }
}

/// Real mode sends the same scripts by `EVAL` to a real `redis-server`: the compare-and-delete
/// lock runs clean without faults, and the plain `DEL` is caught by the pause story.
#[test]
fn real_mode_runs_the_users_scripts_on_a_real_redis() {
    if !common::installed("redis-server") {
        eprintln!("redis-server is not installed; skipped");
        return;
    }
    let clean = lockcheck(&[
        "real",
        "--algorithm",
        "redis-script",
        "--script",
        &example("compare-and-delete.toml"),
        "--faults",
        "none",
        "--duration-ms",
        "2000",
    ]);
    assert_eq!(clean.status.code(), Some(0), "{}", stderr(&clean));
    assert!(
        stdout(&clean).contains("no violation"),
        "{}",
        stdout(&clean)
    );
    let paused = lockcheck(&[
        "real",
        "--algorithm",
        "redis-script",
        "--script",
        &example("plain-del.toml"),
        "--faults",
        "pause",
    ]);
    assert_eq!(paused.status.code(), Some(1), "{}", stderr(&paused));
    assert!(stdout(&paused).contains("UNSAFE"), "{}", stdout(&paused));
}
