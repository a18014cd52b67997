//! How a real 3-member etcd cluster (Debian's etcd 3.4.23, default timing: heartbeat 100 ms,
//! election timeout 1000 ms, CheckQuorum on, pre-vote off) behaves when its members are cut
//! apart (`lockcheck_real::etcd_cluster::Cluster::cut`): the instrument a simulated cluster is to
//! be built against and judged by.
//!
//! Pinned, each with generous bounds only (a slow machine can only make a figure larger), the
//! figures measured printed (`--nocapture`):
//! - a leader isolated from both followers: the followers elect a new leader, and the old one
//!   says it leads until CheckQuorum steps it down; a keep-alive it gets meanwhile renews the
//!   lease (etcd 3.4's `lessor.Renew` is local to the leader, no raft), and one it gets after
//!   stepping down fails once the request timeout has passed; the new leader promotes the
//!   lease to its TTL plus the election timeout, as after a crash;
//! - a write sent to the isolated leader is never committed (its client gets an error after the
//!   request timeout) and is gone after the heal, when the old leader follows the majority's
//!   leader and has the write the majority committed meanwhile;
//! - a keep-alive sent to a follower cut from its leader (which forwards it over the peer port,
//!   `POST /leases`) hangs until the follower's request timeout, then fails, while the other
//!   follower's is answered at once.
//!
//! Without etcd this test prints one line saying how to install it and passes, except under CI
//! (`CI=true`), where it fails.

mod common;

use lockcheck_algorithms::etcd::{LeaseId, Op, Range, Txn};
use lockcheck_algorithms::StoreError;
use lockcheck_real::etcd_cluster::{self, member_status, Cluster, Status};
use lockcheck_real::etcd_gateway::{int, txn_json};
use lockcheck_real::etcd_store::EtcdClient;
use lockcheck_real::launcher::{Etcd, Launcher};
use serde_json::{json, Value};
use std::cell::RefCell;
use std::net::SocketAddr;
use std::rc::Rc;
use std::time::{Duration, Instant};

/// etcd's request timeout with the default timing (`ServerConfig.ReqTimeout`: 5 s plus two
/// election timeouts): how long a member waits for a proposal to commit, or for a lease renewal
/// it forwards to its leader, before it answers with an error.
const REQUEST_TIMEOUT: Duration = Duration::from_millis(7_000);

/// Bound for what must happen: only a hang fails on it, never slowness.
const EVENTUALLY: Duration = Duration::from_secs(30);

fn runtime() -> (tokio::runtime::Runtime, tokio::task::LocalSet) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    (runtime, tokio::task::LocalSet::new())
}

fn put(key: &str, lease: LeaseId) -> Txn {
    Txn {
        compare: vec![],
        success: vec![Op::Put {
            key: key.into(),
            value: "v".into(),
            lease,
        }],
        failure: vec![],
    }
}

/// Runs `test` against a fresh 3-member cluster, then checks that every member is gone.
fn with_cluster<F>(test: impl FnOnce(Cluster) -> F)
where
    F: std::future::Future<Output = ()>,
{
    let (rt, local) = runtime();
    let launcher = Rc::new(RefCell::new(Launcher::new().unwrap()));
    local.block_on(&rt, async {
        let cluster = etcd_cluster::launch(3, &launcher).await.unwrap();
        test(cluster).await;
    });
    let pids = launcher.borrow().started_pids();
    assert_eq!(pids.len(), 3);
    drop(launcher);
    for pid in &pids {
        assert!(!common::alive(*pid, "etcd"), "etcd {pid} left running");
    }
}

/// The member of `among` that says it leads, once one does.
async fn leader_among(members: &[SocketAddr], among: &[usize]) -> (usize, Status) {
    let since = Instant::now();
    loop {
        for &m in among {
            if let Some(status) = member_status(members[m]).await {
                if status.leads() {
                    return (m, status);
                }
            }
        }
        assert!(since.elapsed() < EVENTUALLY, "no leader among {among:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The leader every member follows, once all follow one that has applied an entry of a term
/// above `term` (a new leader applies its term's first entry at once): what a heal that forces
/// an election comes to. Fails if none does in time.
async fn settled_above(members: &[SocketAddr], term: u64) -> (usize, Status) {
    let since = Instant::now();
    loop {
        let (l, s) = leader_among(members, &[0, 1, 2]).await;
        let mut agree = s.term > term;
        for &m in members {
            agree &= member_status(m).await.is_some_and(|o| o.leader == s.member);
        }
        if agree {
            return (l, s);
        }
        assert!(
            since.elapsed() < EVENTUALLY,
            "no leader all follow in a term above {term}: {s:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A keep-alive's answer as the gateway gives it: the TTL, or the error.
fn kept_alive(answer: &Result<(u16, Value), StoreError>) -> Result<i64, String> {
    match answer {
        Ok((_, body)) => match body.get("result") {
            Some(result) => Ok(int(result, "TTL")),
            None => Err(body.to_string()),
        },
        Err(e) => Err(e.to_string()),
    }
}

/// One `LeaseKeepAlive` through the gateway at `addr`, on a connection of its own: the
/// answer, and how long it took.
async fn keep_alive(
    addr: SocketAddr,
    lease: LeaseId,
    timeout: Duration,
) -> (Result<i64, String>, Duration) {
    let sent = Instant::now();
    let answer = EtcdClient::new(addr, timeout)
        .call("/v3/lease/keepalive", json!({ "ID": lease.to_string() }))
        .await;
    (kept_alive(&answer), sent.elapsed())
}

/// A leader cut off from both followers: they elect a new leader (no sooner than an election
/// timeout after the cut), and the old leader keeps saying it leads until CheckQuorum steps it
/// down (no sooner either: its first check after the cut can still count the followers'
/// answers from before it), so for a while two members say they lead. A keep-alive the old
/// leader gets at once, and one it gets while the new leader leads too, is answered from its own
/// lessor with the lease's whole TTL; one it gets after stepping down waits for a leader for
/// the request timeout and fails (`etcdserver: no leader`). The new leader's lessor gives the lease its TTL plus the election timeout
/// (3 s → 3 s left, rounded down, right after the promotion; 2 without the extension), as after
/// a leader's crash (`etcd_conformance.rs`).
#[test]
fn an_isolated_leader_is_replaced_and_steps_down_by_check_quorum() {
    if !common::installed(&Etcd) {
        return;
    }
    let _serial = common::one_at_a_time();
    with_cluster(|cluster| async move {
        let members = cluster.members().to_vec();
        let (old, before) = leader_among(&members, &[0, 1, 2]).await;
        let majority: Vec<usize> = (0..3).filter(|&m| m != old).collect();
        let client = EtcdClient::new(members[majority[0]], Duration::from_secs(10));
        let (lease, ttl) = client.grant(3).await.unwrap();
        assert_eq!(ttl, 3);
        client
            .txn(&put("/isolated/k", lease))
            .await
            .unwrap()
            .unwrap();

        cluster.isolate(old);
        let cut = Instant::now();
        let (renewed, renewed_in) = keep_alive(members[old], lease, Duration::from_secs(10)).await;
        let still_leads = member_status(members[old]).await.is_some_and(|s| s.leads());

        // Watched together: the majority's election, the new leader's promotion of the lease,
        // the old leader's step-down, and a keep-alive at the old leader while both lead.
        let (mut elected, mut promoted, mut stepped_down) = (None, None, None);
        let mut overlap = None;
        let mut late = None;
        while elected.is_none() || promoted.is_none() || stepped_down.is_none() {
            assert!(
                cut.elapsed() < EVENTUALLY,
                "elected {elected:?}, promoted {promoted:?}, stepped down {stepped_down:?}"
            );
            if elected.is_none() {
                for &m in &majority {
                    if let Some(s) = member_status(members[m]).await.filter(Status::leads) {
                        elected = Some((cut.elapsed(), m, s));
                    }
                }
            }
            if let (Some((_, new, _)), None) = (elected, promoted) {
                // Until the new leader has applied its term's first entry, the lease has no
                // deadline (a follower's lessor) and its TTL reads as huge.
                let (_, answer) = EtcdClient::new(members[new], Duration::from_secs(10))
                    .call(
                        "/v3/kv/lease/timetolive",
                        json!({ "ID": lease.to_string() }),
                    )
                    .await
                    .unwrap();
                let left = int(&answer, "TTL");
                if left <= 3 + 1 {
                    promoted = Some((cut.elapsed(), left));
                }
            }
            if stepped_down.is_none() {
                match member_status(members[old]).await {
                    Some(s) if !s.leads() => {
                        stepped_down = Some((cut.elapsed(), s));
                        // Now a follower without a leader.
                        late = Some(tokio::task::spawn_local(keep_alive(
                            members[old],
                            lease,
                            EVENTUALLY,
                        )));
                    }
                    Some(_) if elected.is_some() && overlap.is_none() => {
                        let (answer, _) =
                            keep_alive(members[old], lease, Duration::from_secs(2)).await;
                        let at = cut.elapsed();
                        let still = member_status(members[old]).await.is_some_and(|s| s.leads());
                        overlap = Some((answer, at, still));
                    }
                    _ => {}
                }
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let (elected, new, new_status) = elected.unwrap();
        let (promoted, left) = promoted.unwrap();
        let (stepped_down, old_status) = stepped_down.unwrap();
        let (late, late_in) = late.unwrap().await.unwrap();
        let (accepted, unidentified) = cluster.peer_connections();
        eprintln!(
            "isolated leader etcd-{old} (term {}): its keep-alive at once answered {renewed:?} \
             in {renewed_in:?} (still leading: {still_leads}); etcd-{new} elected {elected:?} \
             after the cut (term {}); etcd-{old} stepped down {stepped_down:?} after the cut \
             (term {} then, leader {}); a keep-alive at the old leader while both led: \
             {overlap:?} (answer, when, still leading after); the lease promoted with {left} s \
             left {promoted:?} after the cut; a keep-alive at the old leader after it stepped \
             down answered {late:?} in {late_in:?}; peer connections {accepted}, unidentified \
             {unidentified}",
            before.term, new_status.term, old_status.term, old_status.leader
        );
        assert_eq!(
            renewed,
            Ok(3),
            "the isolated leader renews from its own lessor"
        );
        assert!(
            still_leads,
            "the keep-alive came before the old leader stepped down"
        );
        let timeout = Duration::from_millis(1_000);
        // Neither can happen before an election timeout without the followers (less the last
        // heartbeat's 100 ms); a slow machine only makes them later.
        assert!(
            elected >= timeout - Duration::from_millis(150),
            "{elected:?}"
        );
        assert!(
            stepped_down >= timeout - Duration::from_millis(150),
            "{stepped_down:?}"
        );
        // `raftTerm` is the term of the last entry a member applied: the new leader says it
        // leads as soon as it is elected, and shows its term once it applied that term's first
        // entry, which on a loaded machine comes later (this assertion read both at term 2
        // twice). Its term is read again until it shows, within EVENTUALLY.
        let mut new_term = new_status.term;
        while new_term <= before.term && cut.elapsed() < EVENTUALLY {
            tokio::time::sleep(Duration::from_millis(20)).await;
            if let Some(s) = member_status(members[new]).await {
                new_term = s.term;
            }
        }
        assert!(
            new_term > before.term,
            "the new leader etcd-{new} still shows term {new_term}, the old leader's {}",
            before.term
        );
        if let Some((answer, _, true)) = &overlap {
            assert_eq!(
                answer,
                &Ok(3),
                "the old leader renews while a new one leads"
            );
        }
        assert_eq!(left, 3, "TTL 3 s + the 1 s extension, rounded down");
        assert!(late.is_err(), "no leader to renew it: {late:?}");
        assert!(
            late_in >= REQUEST_TIMEOUT - Duration::from_millis(500),
            "{late_in:?}"
        );
        assert_eq!(unidentified, 0, "every peer connection's dialler was found");
    });
}

/// A write sent to a leader just cut off from both followers is appended to its log only: the
/// majority never has it, so it is never committed, and its client gets an error once the
/// request timeout has passed. The same write to the majority, once it has a leader, commits.
/// After the heal the old leader follows a leader of the majority's, has what the majority
/// committed, and the write it took alone is gone (raft replaced its uncommitted entry). The heal
/// costs the majority its leader: the old leader campaigned alone meanwhile (pre-vote is off in
/// etcd 3.4), so its answer to the leader's first heartbeat carries a higher term, which
/// deposes the leader (CheckQuorum's rule for a stale heartbeat), and the majority elects one
/// again, in a term above the old leader's.
#[test]
fn a_write_to_an_isolated_leader_is_never_committed_and_is_gone_after_the_heal() {
    if !common::installed(&Etcd) {
        return;
    }
    let _serial = common::one_at_a_time();
    with_cluster(|cluster| async move {
        let members = cluster.members().to_vec();
        let (old, before) = leader_among(&members, &[0, 1, 2]).await;
        let majority: Vec<usize> = (0..3).filter(|&m| m != old).collect();

        cluster.isolate(old);
        let cut = Instant::now();
        let lost = tokio::task::spawn_local({
            let addr = members[old];
            async move {
                let answer = EtcdClient::new(addr, EVENTUALLY)
                    .call("/v3/kv/txn", txn_json(&put("/isolated/lost", 0)))
                    .await;
                (answer, cut.elapsed())
            }
        });
        let (new, new_status) = leader_among(&members, &majority).await;
        let elected = cut.elapsed();
        let follower = majority.iter().copied().find(|&m| m != new).unwrap();
        let majority_client = EtcdClient::new(members[follower], Duration::from_secs(10));
        majority_client
            .txn(&put("/isolated/kept", 0))
            .await
            .expect("the majority answers")
            .expect("and commits");
        let committed = cut.elapsed();
        let (lost, failed_in) = lost.await.unwrap();

        cluster.heal_all();
        let healed = Instant::now();
        // The old leader's campaigns alone raised its term above the majority's: the heal
        // forces an election, and the old leader follows its winner.
        let (after, after_status) = settled_above(&members, new_status.term).await;
        let followed_in = healed.elapsed();
        let old_client = EtcdClient::new(members[old], Duration::from_secs(10));
        let (lost_kvs, _) = old_client
            .range(&Range::key("/isolated/lost"))
            .await
            .unwrap();
        let (kept_kvs, _) = old_client
            .range(&Range::key("/isolated/kept"))
            .await
            .unwrap();
        let (lost_on_majority, _) = majority_client
            .range(&Range::key("/isolated/lost"))
            .await
            .unwrap();
        let (accepted, unidentified) = cluster.peer_connections();
        eprintln!(
            "isolated leader etcd-{old} (term {}); etcd-{new} elected {elected:?} after the cut \
             (term {}); the majority's write committed {committed:?} after the cut; the write \
             to the old leader answered {} {failed_in:?} after the cut; after the heal all \
             follow etcd-{after} (term {}) within {followed_in:?}; peer connections \
             {accepted}, unidentified {unidentified}",
            before.term,
            new_status.term,
            match &lost {
                Ok((status, body)) => format!("{status} {body}"),
                Err(e) => e.to_string(),
            },
            after_status.term,
        );
        assert!(
            !matches!(&lost, Ok((200, _))),
            "the isolated leader committed a write alone: {lost:?}"
        );
        assert!(
            failed_in >= REQUEST_TIMEOUT - Duration::from_millis(500),
            "{failed_in:?}"
        );
        assert_ne!(after, old, "the old leader's log is behind: it cannot win");
        assert!(
            lost_kvs.is_empty(),
            "the uncommitted write survived the heal"
        );
        assert!(lost_on_majority.is_empty());
        assert_eq!(kept_kvs.len(), 1, "the old leader has the majority's write");
        assert_eq!(unidentified, 0, "every peer connection's dialler was found");
    });
}

/// A follower cut from its leader (the other follower still reaches both) forwards a keep-alive
/// to the leader over the peer port (`POST /leases`), where it hangs (the cut holds it) until
/// the follower's request timeout, and the client gets an error: the lease is not renewed. The
/// other follower's keep-alive, forwarded over a link that passes, is answered at once with the
/// whole TTL. Meanwhile the leader keeps leading (the other follower answers it), and the
/// cut-off follower campaigns alone (pre-vote is off), so at the heal its higher term deposes
/// the leader and the cluster elects one again, in a higher term (it may be the cut-off
/// follower itself: its log is as long as theirs).
#[test]
fn a_keep_alive_at_a_follower_cut_from_its_leader_fails_after_the_request_timeout() {
    if !common::installed(&Etcd) {
        return;
    }
    let _serial = common::one_at_a_time();
    with_cluster(|cluster| async move {
        let members = cluster.members().to_vec();
        let (leader, before) = leader_among(&members, &[0, 1, 2]).await;
        let (cut_off, other) = ((leader + 1) % 3, (leader + 2) % 3);
        let (lease, ttl) = EtcdClient::new(members[other], Duration::from_secs(10))
            .grant(10)
            .await
            .unwrap();
        assert_eq!(ttl, 10);

        cluster.cut(cut_off, leader);
        let cut = Instant::now();
        let forwarded = tokio::task::spawn_local(keep_alive(members[cut_off], lease, EVENTUALLY));
        let (control, control_in) =
            keep_alive(members[other], lease, Duration::from_secs(10)).await;
        let mut still_leads = true;
        while !forwarded.is_finished() {
            assert!(cut.elapsed() < EVENTUALLY + Duration::from_secs(1));
            let leads = member_status(members[leader])
                .await
                .is_some_and(|s| s.leads());
            still_leads &= leads;
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let (forwarded, forwarded_in) = forwarded.await.unwrap();
        let cut_off_status = member_status(members[cut_off]).await;

        cluster.heal_all();
        let healed = Instant::now();
        // The cut-off follower's campaigns alone raised its term: the heal forces an election.
        let (after, after_status) = settled_above(&members, before.term).await;
        let agreed_in = healed.elapsed();
        let (accepted, unidentified) = cluster.peer_connections();
        eprintln!(
            "etcd-{cut_off} cut from leader etcd-{leader} (term {}): its keep-alive answered \
             {forwarded:?} in {forwarded_in:?}; etcd-{other}'s answered {control:?} in \
             {control_in:?}; etcd-{leader} led throughout: {still_leads}; etcd-{cut_off} then \
             said {cut_off_status:?}; after the heal all follow etcd-{after} (term {}) within \
             {agreed_in:?}; peer connections {accepted}, unidentified {unidentified}",
            before.term, after_status.term,
        );
        assert_eq!(
            control,
            Ok(10),
            "the other follower's keep-alive renews the lease"
        );
        assert!(forwarded.is_err(), "renewed across the cut: {forwarded:?}");
        assert!(
            forwarded_in >= REQUEST_TIMEOUT - Duration::from_millis(500),
            "{forwarded_in:?}"
        );
        assert!(
            still_leads,
            "the leader lost its lead with a quorum behind it"
        );
        assert_eq!(unidentified, 0, "every peer connection's dialler was found");
    });
}
