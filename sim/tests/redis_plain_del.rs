//! redis-plain-del: the blog-post lock (`SET NX PX`, released by a plain `DEL`) beside
//! single-redis, which differs only in releasing by compare-and-delete. Seeds 000 and 001 warn
//! that the plain `DEL` frees whoever holds the lock by then; these stories show it.

mod common;

use common::paused_holder;
use common::search::{find, nothing_found};
use lockcheck_core::checker::ViolationKind;
use lockcheck_core::profile::FaultProfile;
use lockcheck_core::scenario::Params;
use lockcheck_core::Algorithm;
use lockcheck_sim::run;

#[test]
fn a_paused_holders_plain_del_frees_the_next_holders_lock() {
    let outcome = run(&paused_holder(Algorithm::RedisPlainDel));
    let kinds: Vec<ViolationKind> = outcome.violations.iter().map(|v| v.kind).collect();
    assert!(
        kinds.contains(&ViolationKind::ForeignRelease),
        "client-0's DEL deletes client-1's lock: {:#?}",
        outcome.violations
    );
    let foreign = outcome
        .violations
        .iter()
        .find(|v| v.kind == ViolationKind::ForeignRelease)
        .unwrap();
    assert!(foreign.story.contains("client-0"), "{}", foreign.story);
}

#[test]
fn the_same_story_with_a_compare_and_delete_frees_nobody_elses_lock() {
    let outcome = run(&paused_holder(Algorithm::SingleRedis));
    assert!(
        outcome
            .violations
            .iter()
            .all(|v| v.kind != ViolationKind::ForeignRelease),
        "{:#?}",
        outcome.violations
    );
}

#[test]
fn without_faults_nothing_is_found() {
    nothing_found(&common::search::options(
        Algorithm::RedisPlainDel,
        &[FaultProfile::None],
        Params::default(),
        500,
    ));
}

#[test]
fn a_search_of_pauses_finds_a_foreign_release() {
    let finding = find(&common::search::options(
        Algorithm::RedisPlainDel,
        &[FaultProfile::Pause],
        Params::default(),
        300,
    ));
    assert!(
        finding
            .outcome
            .violations
            .iter()
            .any(|v| v.kind == ViolationKind::ForeignRelease),
        "{:#?}",
        finding.outcome.violations
    );
}
