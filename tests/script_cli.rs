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
    let single_redis_with_file = format!("single-redis:{plain_del}");
    let matrix_syntax = format!("redis-script:{}", syntax.display());
    let matrix_runtime = format!("redis-script:{}", runtime.display());
    let copy = scratch.file(
        "plain_DEL.toml",
        &std::fs::read_to_string(&plain_del)
            .unwrap()
            .replace("compare-and-delete.lua", &example("compare-and-delete.lua")),
    );
    let same_name = format!("redis-script:{plain_del},redis-script:{}", copy.display());
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
            "redis-script:FILE",
        ),
        (
            vec![
                "matrix",
                "--algorithms",
                &single_redis_with_file,
                "--out",
                out,
            ],
            "takes no file",
        ),
        (
            vec!["matrix", "--algorithms", &matrix_syntax, "--out", out],
            "the release script does not compile: user_script:2:",
        ),
        (
            vec!["matrix", "--algorithms", &matrix_runtime, "--out", out],
            "the release script failed",
        ),
        (
            vec!["matrix", "--algorithms", &same_name, "--out", out],
            "both would name their cells redis-script-plain-del",
        ),
        // A matrix row's variant is checked as a scenario's is.
        (
            vec![
                "matrix",
                "--algorithms",
                "redis-reentrant@nope",
                "--out",
                out,
            ],
            "unknown variant 'nope' of redis-reentrant (known: redisson-3.52+",
        ),
        (
            vec!["matrix", "--algorithms", "single-redis@x", "--out", out],
            "single-redis has no library variants",
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

/// A team's CI pins its own lock: `matrix --algorithms redis-script:FILE` puts the lock beside
/// lockcheck's own, with reports that replay without the file and rerun commands that search
/// the cell again; `check` takes `script = "FILE"` in an entry (the examples' own expectations).
#[test]
fn the_matrix_and_check_take_a_users_lock() {
    let scratch = Scratch::new("script-matrix");
    let out = scratch.sub("m");
    let rows = format!(
        "single-redis,redis-script:{},redis-script:{}",
        example("plain-del.toml"),
        example("fenced.toml")
    );
    let o = lockcheck(&[
        "matrix",
        "--algorithms",
        &rows,
        "--faults",
        "none,pause",
        "--cases",
        "200",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let md = std::fs::read_to_string(out.join("matrix.md")).unwrap();
    let row = |name: &str| {
        md.lines()
            .find(|l| l.starts_with(&format!("| {name} |")))
            .unwrap_or_else(|| panic!("no row {name}:\n{md}"))
            .to_string()
    };
    // The plain DEL is caught by pauses; the fenced lock, fenced as its file says, is not.
    let plain = row(&format!("redis-script:{}", example("plain-del.toml")));
    assert!(
        plain.contains("[**UNSAFE**](#redis-script-plain-del-pause)"),
        "{plain}"
    );
    let fenced = row(&format!(
        "redis-script:{} + fencing",
        example("fenced.toml")
    ));
    assert!(!fenced.contains("UNSAFE"), "{fenced}");
    // The UNSAFE cell's rerun command searches the cell again and finds the same violation.
    let rerun = md
        .lines()
        .find(|l| l.contains("redis-script-plain-del-pause-") && l.contains("rerun: `"))
        .unwrap_or_else(|| panic!("no rerun line:\n{md}"));
    let command = rerun
        .split("rerun: `")
        .nth(1)
        .unwrap()
        .trim_end_matches('`');
    let args: Vec<&str> = command.split(' ').skip(1).collect();
    assert!(args.contains(&"--script"), "{command}");
    let again = scratch.sub("again");
    let mut argv = args.clone();
    argv.extend(["--out", again.to_str().unwrap()]);
    let o = lockcheck(&argv);
    assert_eq!(o.status.code(), Some(1), "{command}: {}", stderr(&o));
    assert!(stdout(&o).contains("UNSAFE"), "{}", stdout(&o));
    // Its report replays without the script file.
    let report = std::fs::read_dir(&out)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| {
            let name = p.file_name().unwrap().to_string_lossy();
            name.starts_with("redis-script-plain-del-pause-") && name.ends_with(".json")
        })
        .expect("the cell's report");
    let replay = lockcheck(&["replay", report.to_str().unwrap()]);
    assert_eq!(replay.status.code(), Some(0), "{}", stdout(&replay));
    assert!(stdout(&replay).contains("identical"), "{}", stdout(&replay));

    // The examples' verdicts, pinned in an expectations file naming the scripts.
    let expectations = format!("{EXAMPLES}/expectations.toml");
    let check_out = scratch.sub("check");
    let o = lockcheck(&["check", &expectations, "--out", check_out.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{}{}", stdout(&o), stderr(&o));
    assert!(
        stdout(&o).contains("12 entries, 12 as expected"),
        "{}",
        stdout(&o)
    );

    // A lock that changed is caught: the plain DEL said safe under pauses fails the check.
    let wrong = scratch.file(
        "wrong.toml",
        &format!(
            "[[expect]]\nname = \"plain-del-said-safe\"\nalgorithm = \"redis-script\"\n\
             script = \"{}\"\nfaults = [\"pause\"]\ncases = 200\nexpect = \"not-found\"\n",
            example("plain-del.toml")
        ),
    );
    let o = lockcheck(&[
        "check",
        wrong.to_str().unwrap(),
        "--out",
        check_out.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(1), "{}{}", stdout(&o), stderr(&o));
    assert!(
        stdout(&o).contains("FAIL  plain-del-said-safe"),
        "{}",
        stdout(&o)
    );
    // A script file that is not there is a usage error naming the entry's line.
    let missing = scratch.file(
        "missing.toml",
        "[[expect]]\nname = \"gone\"\nalgorithm = \"redis-script\"\nscript = \"gone.toml\"\n\
         faults = [\"pause\"]\ncases = 10\nexpect = \"unsafe\"\n",
    );
    let o = lockcheck(&[
        "check",
        missing.to_str().unwrap(),
        "--out",
        check_out.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("missing.toml:1: [[expect]] 'gone': script:"),
        "{}",
        stderr(&o)
    );
    assert!(stderr(&o).contains("gone.toml"), "{}", stderr(&o));
}

/// Issue 39: a team pins its own Lua lock with `check` — careful clients under pauses, no
/// deadlock under crashes. Each way of breaking the lock a team commits fails that file with
/// exit 1 and a line naming the violation: an extend without an owner check (it renews the
/// next holder's lock for a holder that lost its own), a release by plain `DEL` (it removes the
/// next holder's lock), and an acquire split into `SET NX` then `PEXPIRE` (a crash between them
/// leaves a lock without expiry).
#[test]
fn a_teams_check_file_catches_each_way_of_breaking_its_lock() {
    const ACQUIRE: &str = "[acquire]\nscript = \"return redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2])\"\nkeys = [\"key\"]\nargv = [\"token\", \"ttl_ms\"]\nacquired = \"ok\"\n";
    const SPLIT_ACQUIRE: &str = "[[acquire]]\nscript = \"return redis.call('SET', KEYS[1], ARGV[1], 'NX')\"\nkeys = [\"key\"]\nargv = [\"token\"]\nacquired = \"ok\"\n\n[[acquire]]\nscript = \"return redis.call('PEXPIRE', KEYS[1], ARGV[1])\"\nkeys = [\"key\"]\nargv = [\"ttl_ms\"]\nacquired = \"1\"\n";
    const RELEASE: &str = "[release]\nscript = \"if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) else return 0 end\"\nkeys = [\"key\"]\nargv = [\"token\"]\nreleased = \"1\"\n";
    const PLAIN_RELEASE: &str = "[release]\nscript = \"return redis.call('DEL', KEYS[1])\"\nkeys = [\"key\"]\nreleased = \"1\"\n";
    const EXTEND: &str = "[extend]\nscript = \"if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('PEXPIRE', KEYS[1], ARGV[2]) else return 0 end\"\nkeys = [\"key\"]\nargv = [\"token\", \"ttl_ms\"]\nextended = \"1\"\n";
    const OWNERLESS_EXTEND: &str = "[extend]\nscript = \"return redis.call('PEXPIRE', KEYS[1], ARGV[1])\"\nkeys = [\"key\"]\nargv = [\"ttl_ms\"]\nextended = \"1\"\n";
    const EXPECTATIONS: &str = r#"seed = 0

[[expect]]
name = "our-lock-pause"
about = "our careful clients and our watchdog: no two holders, no lock freed or extended by another"
algorithm = "redis-script"
script = "our-lock.toml"
faults = ["pause"]
cases = 300
careful = "always"
expect = "not-found"

[[expect]]
name = "our-lock-crash"
about = "a crashed client's lock expires"
algorithm = "redis-script"
script = "our-lock.toml"
faults = ["crash-delayed-restart"]
cases = 600
safety_only = false
violation = "deadlock"
expect = "not-found"
"#;
    let scratch = Scratch::new("script-team");
    let check = |name: &str, lock: String| {
        let dir = scratch.sub(name);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("our-lock.toml"), lock).unwrap();
        std::fs::write(dir.join("ours.toml"), EXPECTATIONS).unwrap();
        let o = lockcheck(&[
            "check",
            dir.join("ours.toml").to_str().unwrap(),
            "--out",
            dir.join("out").to_str().unwrap(),
        ]);
        (o.status.code(), stdout(&o))
    };
    let (code, out) = check("ours", format!("{ACQUIRE}\n{RELEASE}\n{EXTEND}"));
    assert_eq!(code, Some(0), "{out}");
    let fails = |code: Option<i32>, out: &str, entry: &str, naming: &str| {
        assert_eq!(code, Some(1), "{out}");
        let line = out
            .lines()
            .find(|l| l.starts_with(&format!("FAIL  {entry} ")))
            .unwrap_or_else(|| panic!("no FAIL line for {entry}: {out}"));
        assert!(line.contains(naming), "{line}");
    };
    let (code, out) = check(
        "ownerless-extend",
        format!("{ACQUIRE}\n{RELEASE}\n{OWNERLESS_EXTEND}"),
    );
    fails(code, &out, "our-lock-pause", "foreign_extend");
    let (code, out) = check("plain-del", format!("{ACQUIRE}\n{PLAIN_RELEASE}\n{EXTEND}"));
    fails(code, &out, "our-lock-pause", "foreign_release");
    let (code, out) = check(
        "split-acquire",
        format!("{SPLIT_ACQUIRE}\n{RELEASE}\n{EXTEND}"),
    );
    fails(code, &out, "our-lock-crash", "got DEADLOCK (deadlock)");
}

/// A script that calls a command the simulated Redis does not model is refused with exit 2
/// naming the command, before any search: whether the name is written in the script (found
/// before the rehearsal, even in a branch no run reaches) or built at run time (refused when the
/// rehearsal calls it), and even when the script wraps the call in `pcall` — the refusal is no
/// Redis error a script could catch and carry on from.
#[test]
fn a_script_calling_a_command_the_simulation_lacks_exits_2_naming_it() {
    let scratch = Scratch::new("script-not-modelled");
    let release = "[release]\nscript = \"if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) else return 0 end\"\nkeys = [\"key\"]\nargv = [\"token\"]\nreleased = \"1\"\n";
    let literal = scratch.file(
        "literal.toml",
        &format!("[acquire]\nscript = \"\"\"\nif redis.call('EXISTS', KEYS[1]) == 42 then\n  pcall(redis.call, 'OBJECT', 'ENCODING', KEYS[1])\nend\nreturn redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2])\"\"\"\nkeys = [\"key\"]\nargv = [\"token\", \"ttl_ms\"]\nacquired = \"ok\"\n{release}"),
    );
    let built = scratch.file(
        "built.toml",
        &format!("[acquire]\nscript = \"\"\"\nlocal name = 'CLI' .. 'ENT'\nlocal ok = pcall(redis.call, name, 'ID')\nreturn redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2])\"\"\"\nkeys = [\"key\"]\nargv = [\"token\", \"ttl_ms\"]\nacquired = \"ok\"\n{release}"),
    );
    let out = scratch.sub("out");
    let out = out.to_str().unwrap();
    for (file, command) in [(&literal, "OBJECT"), (&built, "CLIENT")] {
        let file = file.to_str().unwrap();
        let row = format!("redis-script:{file}");
        for args in [
            vec![
                "explore",
                "--algorithm",
                "redis-script",
                "--script",
                file,
                "--faults",
                "none",
                "--out",
                out,
            ],
            vec!["matrix", "--algorithms", &row, "--out", out],
        ] {
            let o = lockcheck(&args);
            assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
            let expected = format!("not modelled by the simulated Redis: {command}");
            assert!(stderr(&o).contains(&expected), "{args:?}: {}", stderr(&o));
            assert!(
                stderr(&o).contains("the acquire script"),
                "{args:?}: {}",
                stderr(&o)
            );
        }
    }
}
