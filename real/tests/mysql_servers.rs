//! The MySQL locks against a real MariaDB server that lockcheck starts itself, each test a story
//! with the verdict it must reach, which is also the simulation's verdict for the same scenario
//! (every run is checked against it). Only verdicts are asserted, never timings: the stories are
//! timed from the server's own timeouts with margins of hundreds of milliseconds.
//!
//! Without MariaDB installed these tests print one line saying how to install it and pass,
//! except under CI (`CI=true`), where they fail: CI must install it (`.ci/run` does).

use lockcheck_algorithms::mysql::{Outcome, Statement};
use lockcheck_core::checker::ViolationKind;
use lockcheck_core::scenario::FlushPolicy;
use lockcheck_core::scenario::{Algorithm, Fault, Persistence, Scenario, Workload};
use lockcheck_real::launcher::{Launcher, MariaDb, ServerKind, MARIADBD};
use lockcheck_real::mysql_store::Session;
use lockcheck_real::profile::{self, Profile, Shape};
use lockcheck_real::{run, RealError, RealRun};
use std::cell::RefCell;

mod common;

use common::{assert_safe, assert_two_holders_including, kinds, one_at_a_time, sections};

/// Whether MariaDB is installed (mariadbd and mariadb-install-db, in /usr/sbin too); see
/// [`common::installed`].
fn mariadb_installed() -> bool {
    let kind = MariaDb::of(&Scenario::new(Algorithm::MysqlRow), "mysql-0")
        .expect("the default settings are whole seconds");
    common::installed(&kind)
}

/// Whether `pid` is a live mariadbd.
fn mariadbd_alive(pid: u32) -> bool {
    common::alive(pid, MARIADBD)
}

/// [`common::run_real`] for MariaDB.
fn run_real(scenario: &Scenario) -> RealRun {
    common::run_real(scenario, MARIADBD)
}

/// `clients` clients, the story's TTL (the lease, or for mysql-for-update-held the server's
/// `wait_timeout`) 2 s: a whole number of seconds, as MariaDB counts it.
fn shape(clients: u32) -> Shape {
    Shape {
        clients,
        ttl_ms: 2_000,
        ..Shape::default()
    }
}

fn three_clients_without_faults(algorithm: Algorithm) {
    if !mariadb_installed() {
        return;
    }
    let _serial = one_at_a_time();
    let s = profile::scenario(algorithm, Profile::None, &shape(3)).unwrap();
    let real = run_real(&s);
    assert_safe(&real);
    assert_eq!(real.server_pids.len(), 1);
    assert_eq!(
        sections(&real),
        9,
        "every client did its 3 critical sections"
    );
}

/// The `partition` story on a real MariaDB: `mysql-row`'s lease ends at the TTL while the network
/// holds its holder's exit write, which then lands inside the next holder's section; the
/// database's fence turns it away.
#[test]
fn a_write_a_partition_held_past_the_lease_breaks_mysql_row_and_the_fence_turns_it_away() {
    if !mariadb_installed() {
        return;
    }
    let _serial = one_at_a_time();
    let mut s = profile::scenario(Algorithm::MysqlRow, Profile::Partition, &shape(3)).unwrap();
    let real = run_real(&s);
    assert_two_holders_including(&real, "client-0");
    s.params.fencing = true;
    let real = run_real(&s);
    assert_safe(&real);
}

#[test]
fn three_clients_without_faults_never_share_mysql_row() {
    three_clients_without_faults(Algorithm::MysqlRow);
}

#[test]
fn three_clients_without_faults_never_share_mysql_unique() {
    three_clients_without_faults(Algorithm::MysqlUnique);
}

#[test]
fn three_clients_without_faults_never_share_mysql_for_update_held() {
    three_clients_without_faults(Algorithm::MysqlForUpdateHeld);
}

#[test]
fn a_holder_paused_past_wait_timeout_loses_the_transaction_held_lock_as_in_the_simulation() {
    // client-0 holds the row lock of its open transaction; paused from 0.4 s to 2.5 s, its
    // connection sits idle past wait_timeout (2 s): the server closes it, rolls back, and the
    // SELECT … FOR UPDATE that client-1 has had waiting since 0.2 s gets the row. client-0 wakes
    // inside client-1's critical section.
    if !mariadb_installed() {
        return;
    }
    let _serial = one_at_a_time();
    let s = profile::scenario(Algorithm::MysqlForUpdateHeld, Profile::Pause, &shape(3)).unwrap();
    let real = run_real(&s);
    assert_two_holders_including(&real, "client-0");
}

#[test]
fn fencing_turns_the_holder_whose_connection_timed_out_away_at_the_real_resource() {
    if !mariadb_installed() {
        return;
    }
    let _serial = one_at_a_time();
    let mut s =
        profile::scenario(Algorithm::MysqlForUpdateHeld, Profile::Pause, &shape(2)).unwrap();
    s.params.fencing = true;
    let real = run_real(&s);
    assert_safe(&real);
    assert!(
        real.outcome
            .stale_accesses
            .iter()
            .any(|a| a.client == "client-0"),
        "the stale holder was rejected: {:?}",
        real.outcome.stale_accesses
    );
}

#[test]
fn a_forward_jump_of_the_database_clock_hands_mysql_row_to_a_second_holder() {
    // mysql-row's lease is judged by NOW() on the server: mysql-0's wall clock jumps two leases
    // forward at 0.6 s (through the time-shift library under mariadbd) while client-0 works
    // until 1.5 s, and the next client finds its row stale.
    if !mariadb_installed() {
        return;
    }
    let _serial = one_at_a_time();
    let s = profile::scenario(Algorithm::MysqlRow, Profile::ClockJump, &shape(3)).unwrap();
    let real = run_real(&s);
    assert_two_holders_including(&real, "client-0");
}

#[test]
fn the_same_jump_leaves_the_transaction_held_lock_safe() {
    // mysql-for-update-held's lock ends with its holder's connection, and MariaDB times idle
    // connections on the kernel's clock: a jump of the wall clock ends nothing.
    if !mariadb_installed() {
        return;
    }
    let _serial = one_at_a_time();
    let s =
        profile::scenario(Algorithm::MysqlForUpdateHeld, Profile::ClockJump, &shape(3)).unwrap();
    let real = run_real(&s);
    assert_safe(&real);
    assert_eq!(sections(&real), 3, "every client had its section");
}

/// client-0 takes the lock (client-1 is held back for 200 ms) and works for 1 s; at 400 ms
/// mysql-0 is killed and restarted at once, with `persistence` for its commits.
fn crash_while_held(algorithm: Algorithm, persistence: Persistence) -> Scenario {
    let mut s = Scenario::new(algorithm);
    s.params.persistence = Some(persistence);
    s.workload = Workload {
        acquisitions_per_client: 1,
        hold_ms: 1_000,
        think_ms: 100,
        ..Workload::default()
    };
    s.duration_ms = 20_000;
    let mysql = || "mysql-0".to_string();
    s.faults = vec![
        Fault::Pause {
            at_ms: 0,
            node: "client-1".into(),
            for_ms: 200,
        },
        Fault::Crash {
            at_ms: 400,
            node: mysql(),
            scope: lockcheck_core::scenario::CrashScope::Process,
        },
        Fault::Restart {
            at_ms: 400,
            node: mysql(),
        },
    ];
    s.validate().unwrap();
    s
}

#[test]
fn crash_and_immediate_restart_with_durable_commits_never_breaks_mysql_row() {
    // The lock is a committed row: InnoDB's recovery brings it back, so client-1 finds it held
    // and waits for client-0's release (which reconnects after the restart).
    if !mariadb_installed() {
        return;
    }
    let _serial = one_at_a_time();
    let real = run_real(&crash_while_held(Algorithm::MysqlRow, Persistence::Always));
    assert_eq!(real.server_pids.len(), 2, "killed and started again");
    assert_safe(&real);
    assert_eq!(sections(&real), 2);
}

#[test]
fn a_server_restart_rolls_back_the_transaction_held_lock_under_its_holder() {
    // The crash under mysql-for-update-held: recovery rolls client-0's open transaction back,
    // and client-1, which asks only after the restart, gets the row while client-0 still works.
    // (`a_killed_server_fails_the_waiting_statement_at_once_in_both_worlds` has client-1 waiting
    // for the row when the server dies.)
    if !mariadb_installed() {
        return;
    }
    let _serial = one_at_a_time();
    let mut s = crash_while_held(Algorithm::MysqlForUpdateHeld, Persistence::Always);
    s.workload.hold_ms = 2_000;
    s.faults[0] = Fault::Pause {
        at_ms: 0,
        node: "client-1".into(),
        for_ms: 600,
    };
    let real = run_real(&s);
    assert_eq!(real.server_pids.len(), 2, "killed and started again");
    assert_eq!(
        kinds(&real.outcome.violations),
        vec![ViolationKind::MutualExclusion]
    );
}

#[test]
fn a_killed_server_fails_the_waiting_statement_at_once_in_both_worlds() {
    // client-1 is blocked in `SELECT … FOR UPDATE` behind client-0 when the server is killed:
    // the kill resets its connection, so the statement fails at once (in the simulation too,
    // since a process crash resets connections), client-1 asks again after the restart and
    // gets the row that recovery freed under client-0: two holders in both worlds.
    if !mariadb_installed() {
        return;
    }
    let _serial = one_at_a_time();
    let mut s = crash_while_held(Algorithm::MysqlForUpdateHeld, Persistence::Always);
    s.workload.hold_ms = 2_000;
    let real = run_real(&s);
    assert_eq!(real.server_pids.len(), 2, "killed and started again");
    assert_two_holders_including(&real, "client-0");
}

#[test]
fn a_killed_client_releases_its_transaction_lock_at_once_in_both_worlds() {
    // client-0 holds mysql-for-update-held (its open transaction's row lock) and is killed at
    // 1 s. Its socket closes, MariaDB rolls the transaction back, and client-1, blocked on the
    // row, gets it at once: long before the 30 s wait_timeout that is the only way out when
    // the client's machine dies instead (the simulation's machine crash).
    if !mariadb_installed() {
        return;
    }
    let _serial = one_at_a_time();
    let mut s = Scenario::new(Algorithm::MysqlForUpdateHeld);
    s.params.mysql.wait_timeout_ms = Some(30_000);
    s.workload = Workload {
        acquisitions_per_client: 1,
        hold_ms: 5_000,
        think_ms: 100,
        ..Workload::default()
    };
    s.duration_ms = 20_000;
    s.faults = vec![
        Fault::Pause {
            at_ms: 0,
            node: "client-1".into(),
            for_ms: 200,
        },
        Fault::Crash {
            at_ms: 1_000,
            node: "client-0".into(),
            scope: lockcheck_core::scenario::CrashScope::Process,
        },
    ];
    s.validate().unwrap();
    let real = run_real(&s);
    assert_safe(&real);
    let entered_ms = |outcome: &lockcheck_core::Outcome| {
        outcome
            .history
            .entries
            .iter()
            .find(|e| {
                matches!(
                    &e.op,
                    lockcheck_core::history::Op::Resource {
                        client,
                        phase: lockcheck_core::history::Phase::Enter,
                        accepted: true,
                        ..
                    } if client == "client-1"
                )
            })
            .map(|e| e.true_ns / 1_000_000)
            .expect("client-1 entered")
    };
    // Before client-0's hold would have ended (6 s), and far before wait_timeout (30 s).
    assert!(
        entered_ms(&real.outcome) < 6_000,
        "{}",
        entered_ms(&real.outcome)
    );
    assert!(entered_ms(&lockcheck_sim::run(&s)) < 6_000);
}

#[test]
fn timeouts_that_are_not_whole_seconds_are_refused_before_anything_starts() {
    let mut s = Scenario::new(Algorithm::MysqlForUpdateHeld);
    s.params.mysql.wait_timeout_ms = Some(1_500);
    match run(&s) {
        Err(RealError::Unsupported(why)) => {
            assert!(why.contains("wait_timeout_ms = 1500"), "{why}")
        }
        other => panic!("expected a refusal, got {other:?}"),
    }
}

#[test]
fn a_killed_server_recovers_its_commits_on_restart_and_a_dropped_launcher_leaves_none_running() {
    if !mariadb_installed() {
        return;
    }
    let _serial = one_at_a_time();
    let kind = || {
        Box::new(MariaDb {
            wait_timeout_s: 60,
            lock_wait_timeout_s: 5,
            flush: FlushPolicy::AtCommit,
            database: lockcheck_real::launcher::mariadb::DATABASE.to_string(),
        }) as Box<dyn ServerKind>
    };
    let launcher = RefCell::new(Launcher::new().unwrap());
    let index = launcher
        .borrow_mut()
        .add("mysql-0", kind(), Vec::new())
        .unwrap();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let addr = launcher.borrow().addr(index);
    let row = runtime.block_on(async {
        Launcher::until_ready(&launcher, index).await.unwrap();
        let mut session = Session::open(addr).await.unwrap();
        let insert = Statement::Insert {
            resource: "kept".into(),
            locker: "client-0".into(),
            count: 1,
            version: 7,
        };
        assert_eq!(
            session.execute(&insert).await.unwrap(),
            Ok(Outcome::Done { affected: 1 })
        );
        // kill -9 right after the commit's reply: innodb_flush_log_at_trx_commit=1 kept it.
        launcher.borrow_mut().respawn(index).unwrap();
        Launcher::until_ready(&launcher, index).await.unwrap();
        let mut session = Session::open(addr).await.unwrap();
        let select = Statement::SelectForUpdate {
            resource: "kept".into(),
        };
        session.execute(&select).await.unwrap()
    });
    match row {
        Ok(Outcome::Row(Some(row))) => {
            assert_eq!((row.locker.as_str(), row.version), ("client-0", 7))
        }
        other => panic!("the committed row was lost: {other:?}"),
    }
    let pids = launcher.borrow().started_pids();
    assert_eq!(pids.len(), 2);
    assert!(mariadbd_alive(pids[1]));
    drop(runtime);
    drop(launcher);
    assert!(pids.iter().all(|&pid| !mariadbd_alive(pid)), "{pids:?}");
}
