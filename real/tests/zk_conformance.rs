//! Conformance of the simulated ZooKeeper server with the real one: random sequences of requests
//! go through the model (`lockcheck_sim::zookeeper::model::ZkModel`, driven directly) and through
//! a real ZooKeeper server (through [`RealZk`], the store the algorithms use), and every reply
//! must be the same.
//!
//! Each sequence runs under a fresh persistent parent (`/c0`, `/c1`, …), so sequence numbers start
//! from the same place in both worlds, and mixes creates in all four modes (sequential prefixes
//! included, some ending in `/`), deletes with version -1, the right version and wrong ones,
//! `exists` and `getChildren` with and without a watch, on names under the parent, on nodes the
//! sequence created, on the root and ZooKeeper's own nodes, and on malformed paths. Each ends
//! with an `exists` and a `getChildren` of its parent. One server and one session serve every
//! sequence (so the tree, and the watches left on it, carry over, identically in both worlds).
//!
//! Compared, after every request:
//! - created paths (sequence suffixes included), error kinds, children (sorted: neither server
//!   promises an order), and the stat fields `version`, `cversion`, `dataLength`,
//!   `numChildren`, and whether the node is ephemeral and owned by the requesting session;
//! - the zxids (`czxid`, `mzxid`, `pzxid`: the czxid is the fencing token of the locks) of every
//!   stat the sequence's replies showed so far, by their order and equality (each one's rank
//!   among the distinct values shown) and by their distance from the first one shown (so the
//!   number of transactions between any two, failed writes included: each takes a zxid). Their
//!   absolute values are not compared: they count whatever ran on the server before, and a
//!   real zxid carries the server's epoch in its high 32 bits (on this fresh standalone server
//!   they happen to coincide);
//! - the watch events the request fired for the session, as a set of (path, kind): where the
//!   model fires some, the real server's are awaited for up to 5 s (a slow machine delays them,
//!   it does not lose them); in any case the events that arrived with the reply are taken (the
//!   server sends a watch's notification before the reply of the request that fired it, on the
//!   same connection), and one the model does not fire that comes later still shows at the next
//!   request. A set, because the server sends one notification per path and kind, and the client
//!   library hands it to every watcher the session left on the path.
//!
//! Not compared: times (`ctime`, `mtime`: the model is given none here) and the session id's
//! value (the real one is time-based, the model's a counter).
//!
//! Session expiry costs seconds, so it is a test of its own rather than part of the 1,000
//! sequences: [`a_silent_session_ends_between_its_timeout_and_a_tick_later_and_its_ephemerals_fire_watches`]
//! runs a server with a 200 ms tick (the launcher's default stays 2 s) and the model with the
//! same tick and the test's monotonic clock. A session of 600 ms creates ephemeral nodes that
//! another session watches, renews itself with one last request, and its client goes away
//! without closing it. Compared: nothing has happened 100 ms before its timeout has passed since
//! that request; then the watch events (the ephemerals' `NodeDeleted` and the parent's
//! `NodeChildrenChanged`), the tree and the zxids afterwards (the session's end is one
//! transaction). Tolerance: the real server ends the session between its timeout and its timeout
//! plus one tick after its last renewal (its expirer works in ticks aligned on its own clock, the
//! model's on the test's), so the watcher must hear of it no earlier than the timeout after the
//! last request was sent, and no later than the timeout plus a tick plus 2 s (the expirer's
//! wake-up and the notification's way on a loaded machine) after the client went away. The
//! model's expiry lies in the same window.
//!
//! Documented differences, left out of the generated requests:
//! - `create("/")` and `delete("/")`: the Rust client refuses them before sending
//!   (`BadArguments`), where the Java client, which the model follows, lets the server answer
//!   (`NodeExists`; `BadArguments` for the delete, with a zxid spent, which the zxid comparison
//!   showed).
//! - `setData`/`getData` and their `NodeDataChanged` events: the store has no such requests (no
//!   lock uses them), so `mzxid` always equals `czxid` here.
//!
//! The count of sequences is asserted: at least 1,000 run every time.
//!
//! Without ZooKeeper (java and its jar) this test prints one line saying how to install it and
//! passes, except under CI (`CI=true`), where it fails.

use lockcheck_algorithms::zookeeper::store::{
    CreateMode, EventType, SessionState, Stat, ZkError, ZkNotice, ZkStore, Zxid,
};
use lockcheck_core::scenario::DEFAULT_TICK_TIME_MS;
use lockcheck_real::gate::PauseGate;
use lockcheck_real::launcher::{Launcher, ZooKeeper};
use lockcheck_real::zk_store::RealZk;
use lockcheck_sim::zookeeper::model::{Op, OpResult, SessionId, ZkModel};
use proptest::prelude::*;
use proptest::test_runner::{Config, RngAlgorithm, TestCaseError, TestRng, TestRunner};
use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;
use std::time::Duration;

/// How many sequences run.
const SEQUENCES: u32 = 1_000;
/// The session both worlds use throughout: long, so that no pause of the test ends it.
const SESSION_MS: u64 = 40_000;

/// Names under a sequence's parent that requests use; `…-` ones are sequential prefixes, and the
/// empty one (with a sequential mode) is `parent/`.
const NAMES: &[&str] = &["a", "b", "a/x", "b/y", "a/x/z", "s-", "a/s-", "", "e"];
/// Paths outside the sequence's parent.
const SPECIAL: &[&str] = &["/", "/zookeeper", "/zookeeper/quota", "/zookeeper/config"];
/// Paths the server must refuse (checked by the client before sending, as Java's does).
const MALFORMED: &[&str] = &["noslash", "/c/", "//x", "/x/./y", "/x/../y", "/x//y"];

/// Where a request goes.
#[derive(Clone, Debug)]
enum Target {
    /// A name under the parent (`NAMES`).
    Name(&'static str),
    /// The k-th node the sequence created so far (modulo how many; the parent if none).
    Created(usize),
    /// The parent itself.
    Parent,
    /// A path outside the parent (`SPECIAL`).
    Special(&'static str),
    /// A malformed path.
    Malformed(&'static str),
}

/// A request of a sequence.
#[derive(Clone, Debug)]
enum Request {
    Create(Target, CreateMode, Vec<u8>),
    Delete(Target, i32),
    /// `exists`, leaving a watch if `true`.
    Exists(Target, bool),
    /// `getChildren`, leaving a watch if `true`.
    Children(Target, bool),
}

fn target() -> impl Strategy<Value = Target> {
    prop_oneof![
        6 => prop::sample::select(NAMES).prop_map(Target::Name),
        4 => (0usize..8).prop_map(Target::Created),
        2 => Just(Target::Parent),
        1 => prop::sample::select(SPECIAL).prop_map(Target::Special),
        1 => prop::sample::select(MALFORMED).prop_map(Target::Malformed),
    ]
}

fn mode() -> impl Strategy<Value = CreateMode> {
    prop::sample::select(vec![
        CreateMode::Persistent,
        CreateMode::Ephemeral,
        CreateMode::PersistentSequential,
        CreateMode::EphemeralSequential,
    ])
}

fn request() -> impl Strategy<Value = Request> {
    prop_oneof![
        5 => (
            target().prop_filter("create(\"/\") is refused by the Rust client", |t| {
                !matches!(t, Target::Special("/"))
            }),
            mode(),
            prop::collection::vec(any::<u8>(), 0..4),
        )
            .prop_map(|(t, m, d)| Request::Create(t, m, d)),
        3 => (
            target().prop_filter("delete(\"/\") is refused by the Rust client", |t| {
                !matches!(t, Target::Special("/"))
            }),
            prop_oneof![Just(-1), 0..3, Just(7)]
        )
            .prop_map(|(t, v)| Request::Delete(t, v)),
        2 => (target(), any::<bool>()).prop_map(|(t, w)| Request::Exists(t, w)),
        2 => (target(), any::<bool>()).prop_map(|(t, w)| Request::Children(t, w)),
    ]
}

/// What of a stat both worlds must agree on.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Comparable {
    version: i32,
    cversion: i32,
    data_length: i32,
    num_children: i32,
    ephemeral: bool,
    /// Owned by the requesting session.
    ours: bool,
}

impl Comparable {
    fn of(stat: &Stat, session: Option<u64>) -> Comparable {
        Comparable {
            version: stat.version,
            cversion: stat.cversion,
            data_length: stat.data_length,
            num_children: stat.num_children,
            ephemeral: stat.ephemeral_owner != 0,
            ours: Some(stat.ephemeral_owner) == session,
        }
    }
}

/// A reply, as compared.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Reply {
    Created(String, Comparable),
    Deleted,
    Stat(Option<Comparable>),
    Children(Vec<String>),
    Error(ZkError),
}

/// One sequence's view of where its requests go.
struct Paths {
    parent: String,
    created: Vec<String>,
}

impl Paths {
    fn resolve(&self, target: &Target) -> String {
        match target {
            Target::Name(name) => format!("{}/{name}", self.parent),
            Target::Created(k) if !self.created.is_empty() => {
                self.created[k % self.created.len()].clone()
            }
            Target::Created(_) | Target::Parent => self.parent.clone(),
            Target::Special(path) | Target::Malformed(path) => (*path).to_string(),
        }
    }
}

/// The zxids a stat shows: `czxid`, `mzxid`, `pzxid`.
fn zxids(stat: &Stat) -> [Zxid; 3] {
    [stat.czxid, stat.mzxid, stat.pzxid]
}

/// The watch events a step fired for the session, as compared: which path, what happened. A set,
/// because the server sends one notification per path and kind, and the client library hands it
/// to every watcher its session left on the path (an `exists` and a `getChildren` watch on a
/// deleted node both hear its one `NodeDeleted`), where the model, as the server, counts one.
type Events = BTreeSet<(String, EventType)>;

/// The model with its one session, its clocks standing still (the session never expires).
struct Model {
    zk: ZkModel,
    session: SessionId,
}

impl Model {
    /// The reply, the zxids it shows, and the watch events it fired for the session.
    fn apply(&mut self, op: Op) -> (Reply, Vec<Zxid>, Events) {
        let mut events = Vec::new();
        let mut seen = Vec::new();
        let result = self.zk.apply(self.session, &op, 0, 0, &mut events);
        let mut stat = |s: &Stat| {
            seen.extend(zxids(s));
            Comparable::of(s, Some(self.session))
        };
        let reply = match result {
            OpResult::Created(path) => {
                let s = self.zk.stat(&path).expect("a created node exists");
                Reply::Created(path, stat(&s))
            }
            OpResult::Deleted => Reply::Deleted,
            OpResult::Stat(s) => Reply::Stat(s.as_ref().map(stat)),
            OpResult::Children(mut children) => {
                children.sort();
                Reply::Children(children)
            }
            OpResult::Error(e) => Reply::Error(e),
            other => panic!("a reply to a request this test does not send: {other:?}"),
        };
        let events = events
            .into_iter()
            .filter(|e| e.session == self.session)
            .map(|e| (e.path, e.kind))
            .collect();
        (reply, seen, events)
    }
}

/// How long the real server's watch events may take to arrive once the model says a step fired
/// some. Generous: a slow machine delays them, it does not lose them.
const EVENTS_WITHIN: Duration = Duration::from_secs(5);

/// Takes the notices the store holds now, after letting its watch tasks run (the server sends a
/// watch's notification before the reply of the request that fired it, on the same
/// connection, so by the time a reply is in, its events are in the client library too).
async fn drain(store: &RealZk, into: &mut Events) {
    for _ in 0..8 {
        tokio::task::yield_now().await;
    }
    while let Some(notice) = now_or_never(store.next_event()) {
        if let ZkNotice::Watch(event) = notice {
            into.insert((event.path, event.kind));
        }
    }
}

/// `future`'s output if it is ready at its first poll. (A timeout of zero would wait for the
/// timer's next millisecond tick, at every step.) Dropping the store's wait for a notice loses
/// none.
fn now_or_never<F: std::future::Future>(future: F) -> Option<F::Output> {
    let mut future = std::pin::pin!(future);
    let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
    match future.as_mut().poll(&mut cx) {
        std::task::Poll::Ready(output) => Some(output),
        std::task::Poll::Pending => None,
    }
}

/// The watch events the real server sent since the last call: at least `expected` (waiting up
/// to [`EVENTS_WITHIN`] for them), and whatever else came with them. An event the model does not
/// fire that arrives later still shows, at the next step.
async fn real_events(store: &RealZk, expected: &Events) -> Events {
    let mut got = Events::new();
    drain(store, &mut got).await;
    let deadline = tokio::time::Instant::now() + EVENTS_WITHIN;
    while !got.is_superset(expected) {
        match tokio::time::timeout_at(deadline, store.next_event()).await {
            Ok(ZkNotice::Watch(event)) => {
                got.insert((event.path, event.kind));
            }
            Ok(ZkNotice::State(_)) => {}
            Err(_) => break,
        }
    }
    drain(store, &mut got).await;
    got
}

/// Sends `op` to the real server; the reply and the zxids it shows.
async fn real_apply(store: &RealZk, op: &Op) -> Result<(Reply, Vec<Zxid>), String> {
    let session = store.session_id();
    let seen = RefCell::new(Vec::new());
    let stat = |s: &Stat| {
        seen.borrow_mut().extend(zxids(s));
        Comparable::of(s, store.session_id().or(session))
    };
    let reply = match op {
        Op::Create { path, data, mode } => store
            .create(path, data.clone(), *mode)
            .await
            .map(|r| r.map(|(path, s)| Reply::Created(path, stat(&s)))),
        Op::Delete { path, version } => store
            .delete(path, *version)
            .await
            .map(|r| r.map(|()| Reply::Deleted)),
        Op::Exists { path, watch } => store
            .exists(path, *watch)
            .await
            .map(|r| r.map(|s| Reply::Stat(s.as_ref().map(stat)))),
        Op::GetChildren { path, watch } => store.get_children(path, *watch).await.map(|r| {
            r.map(|mut children| {
                children.sort();
                Reply::Children(children)
            })
        }),
        other => return Err(format!("not sent by this test: {other:?}")),
    };
    match reply {
        Ok(Ok(reply)) => Ok((reply, seen.into_inner())),
        Ok(Err(e)) => Ok((Reply::Error(e), Vec::new())),
        Err(e) => Err(format!("the real server did not answer {op:?}: {e}")),
    }
}

fn op_of(request: &Request, paths: &Paths) -> Op {
    match request {
        Request::Create(target, mode, data) => {
            let path = match (target, mode.is_sequential()) {
                // `parent/` is a valid sequential prefix, and only that.
                (Target::Name(""), false) => paths.parent.clone(),
                _ => paths.resolve(target),
            };
            Op::Create {
                path,
                data: data.clone(),
                mode: *mode,
            }
        }
        Request::Delete(target, version) => Op::Delete {
            path: paths.resolve(target),
            version: *version,
        },
        Request::Exists(target, watch) => Op::Exists {
            path: paths.resolve(target),
            watch: *watch,
        },
        Request::Children(target, watch) => Op::GetChildren {
            path: paths.resolve(target),
            watch: *watch,
        },
    }
}

/// The kind of a reply, for the tally of what the sequences exercised.
fn kind_of(reply: &Reply, op: &Op) -> String {
    match (reply, op) {
        (Reply::Created(..), Op::Create { mode, .. }) => format!("created {mode:?}"),
        (Reply::Error(e), _) => format!("{e:?}"),
        (Reply::Stat(None), _) => "no node".into(),
        (Reply::Stat(Some(_)), _) => "stat".into(),
        (Reply::Children(c), _) if c.is_empty() => "no children".into(),
        (Reply::Children(_), _) => "children".into(),
        (reply, _) => format!("{reply:?}"),
    }
}

/// The zxids a sequence's replies showed, as compared: each one's rank among the distinct values
/// shown (so order and equality), and its distance from the first one (so the number of
/// transactions between any two, failed writes and session ends included, since each takes a
/// zxid). The absolute values differ (the real server's count started with whatever ran before
/// the test's session, and carries its epoch in the high 32 bits); the zxid 0 of the nodes a
/// fresh server starts with is the same in both, and compared as such.
fn zxid_shape(zxids: &[Zxid]) -> Vec<(usize, Option<Zxid>)> {
    let distinct: BTreeSet<Zxid> = zxids.iter().copied().collect();
    let base = zxids.iter().copied().find(|&z| z != 0);
    zxids
        .iter()
        .map(|&z| {
            let rank = distinct.range(..z).count();
            let distance = (z != 0).then(|| z - base.unwrap_or(0));
            (rank, distance)
        })
        .collect()
}

/// Runs one sequence under parent `/c{n}` in both worlds; the first divergence, if any. Counts
/// the kinds of reply in `tally`.
async fn check_sequence(
    store: &RealZk,
    model: &RefCell<Model>,
    n: u32,
    requests: &[Request],
    tally: &RefCell<BTreeMap<String, u32>>,
) -> Result<(), TestCaseError> {
    let parent = format!("/c{n}");
    let mut paths = Paths {
        parent: parent.clone(),
        created: Vec::new(),
    };
    let setup = Request::Create(Target::Parent, CreateMode::Persistent, Vec::new());
    let closing = [
        Request::Exists(Target::Parent, false),
        Request::Children(Target::Parent, false),
    ];
    let all = std::iter::once(&setup)
        .chain(requests)
        .chain(closing.iter());
    let mut log = Vec::new();
    // Every zxid the sequence's replies showed, in order, in each world.
    let (mut model_zxids, mut real_zxids) = (Vec::new(), Vec::new());
    for (i, request) in all.enumerate() {
        let op = op_of(request, &paths);
        let (simulated, zxids, fired) = model.borrow_mut().apply(op.clone());
        let (real, real_seen) = real_apply(store, &op).await.map_err(TestCaseError::fail)?;
        let real_fired = real_events(store, &fired).await;
        model_zxids.extend(zxids);
        real_zxids.extend(real_seen);
        log.push(format!("{i}: {op:?} -> {real:?}, events {real_fired:?}"));
        *tally.borrow_mut().entry(kind_of(&real, &op)).or_default() += 1;
        for (_, kind) in &real_fired {
            *tally
                .borrow_mut()
                .entry(format!("fired {kind:?}"))
                .or_default() += 1;
        }
        let divergence = if simulated != real {
            Some(format!("  model: {simulated:?}\n  real:  {real:?}"))
        } else if fired != real_fired {
            Some(format!(
                "  events fired, model: {fired:?}\n  events fired, real:  {real_fired:?}"
            ))
        } else if zxid_shape(&model_zxids) != zxid_shape(&real_zxids) {
            Some(format!(
                "  the zxids shown so far (czxid, mzxid, pzxid of each stat) differ in order or \
                 spacing:\n  model: {model_zxids:?}\n  real:  {real_zxids:?}"
            ))
        } else {
            None
        };
        if let Some(divergence) = divergence {
            return Err(TestCaseError::fail(format!(
                "divergence at request {i} of the sequence under {parent}:\n  request: \
                 {op:?}\n{divergence}\nsequence so far:\n  {}",
                log.join("\n  ")
            )));
        }
        if let Reply::Created(path, _) = real {
            paths.created.push(path);
        }
    }
    Ok(())
}

mod common;

#[test]
fn random_request_sequences_get_the_same_replies_from_the_model_and_a_real_server() {
    let kind = ZooKeeper {
        session_timeout_ms: SESSION_MS,
        tick_time_ms: DEFAULT_TICK_TIME_MS,
    };
    if !common::installed(&kind) {
        return;
    }
    let _serial = common::one_at_a_time();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let local = tokio::task::LocalSet::new();
    let launcher = RefCell::new(Launcher::new().unwrap());
    let server = launcher
        .borrow_mut()
        .add("zk-0", Box::new(kind), Vec::new())
        .unwrap();
    local
        .block_on(&runtime, Launcher::until_ready(&launcher, server))
        .unwrap();
    let addr = launcher.borrow().addr(server);
    let store = RealZk::new(
        addr,
        Duration::from_millis(SESSION_MS),
        // Generous: a request that times out fails the test as an error, not a divergence.
        Duration::from_secs(10),
        PauseGate::new(),
    );
    let mut zk = ZkModel::new();
    let (session, _) = zk.open_session(SESSION_MS, 0);
    let model = RefCell::new(Model { zk, session });

    // A fixed generator, so every run compares the same 1,000 sequences (as the Redis and MySQL
    // conformance tests do).
    let mut runner = TestRunner::new_with_rng(
        Config {
            cases: SEQUENCES,
            failure_persistence: None,
            ..Config::default()
        },
        TestRng::deterministic_rng(RngAlgorithm::ChaCha),
    );
    let sequences = Cell::new(0u32);
    let tally = RefCell::new(BTreeMap::new());
    let result = runner.run(&prop::collection::vec(request(), 5..=20), |requests| {
        let n = sequences.get();
        sequences.set(n + 1);
        local.block_on(
            &runtime,
            check_sequence(&store, &model, n, &requests, &tally),
        )
    });
    let session_kept = local.block_on(&runtime, async { store.session_id() });
    drop(store);
    let pids = launcher.borrow().started_pids();
    drop(launcher);
    if let Err(e) = result {
        panic!("{e}");
    }
    assert!(
        sequences.get() >= SEQUENCES,
        "only {} sequences ran",
        sequences.get()
    );
    assert!(session_kept.is_some(), "one session served every sequence");
    assert_eq!(pids.len(), 1);
    // The sequences reached every reply the requests can get, so that agreement means something.
    let tally = tally.into_inner();
    let _ = writeln!(std::io::stderr().lock(), "replies compared: {tally:?}");
    for kind in [
        "created Persistent",
        "created Ephemeral",
        "created PersistentSequential",
        "created EphemeralSequential",
        "Deleted",
        "stat",
        "no node",
        "children",
        "no children",
        "NoNode",
        "NodeExists",
        "BadVersion",
        "NotEmpty",
        "NoChildrenForEphemerals",
        "BadArguments",
        "fired NodeCreated",
        "fired NodeDeleted",
        "fired NodeChildrenChanged",
    ] {
        assert!(tally.contains_key(kind), "no {kind} reply: {tally:?}");
    }
}

/// The tick of the server in the session-expiry test: small, so that an expiry costs a fraction
/// of a second; the model is given the same.
const EXPIRY_TICK_MS: u64 = 200;
/// The session that goes silent: three ticks.
const SILENT_SESSION_MS: u64 = 3 * EXPIRY_TICK_MS;
/// The session that watches it: the longest the server grants (20 ticks), so that no pause of
/// the test ends it.
const WATCHER_SESSION_MS: u64 = 20 * EXPIRY_TICK_MS;
/// How late the watcher may hear of an expiry after the latest moment the server may end the
/// session: the expirer's wake-up and the notification's way to the client on a loaded machine.
/// Generous, since only the lower bound (never before the timeout) is what a lock relies on.
const DELIVERY_SLACK_MS: u64 = 2_000;

#[test]
fn a_silent_session_ends_between_its_timeout_and_a_tick_later_and_its_ephemerals_fire_watches() {
    let kind = ZooKeeper {
        session_timeout_ms: WATCHER_SESSION_MS,
        tick_time_ms: EXPIRY_TICK_MS,
    };
    if !common::installed(&kind) {
        return;
    }
    let _serial = common::one_at_a_time();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let local = tokio::task::LocalSet::new();
    let launcher = RefCell::new(Launcher::new().unwrap());
    let server = launcher
        .borrow_mut()
        .add("zk-0", Box::new(kind), Vec::new())
        .unwrap();
    local
        .block_on(&runtime, Launcher::until_ready(&launcher, server))
        .unwrap();
    let addr = launcher.borrow().addr(server);
    let store = |session_ms| {
        RealZk::new(
            addr,
            Duration::from_millis(session_ms),
            Duration::from_secs(10),
            PauseGate::new(),
        )
    };
    local.block_on(&runtime, async {
        // The model's monotonic clock is the test's.
        let start = std::time::Instant::now();
        let mono = || start.elapsed().as_millis() as u64;
        let mut zk = ZkModel::with_tick_time(EXPIRY_TICK_MS);
        let (mut model_zxids, mut real_zxids) = (Vec::new(), Vec::new());
        let watcher = store(WATCHER_SESSION_MS);
        let silent = store(SILENT_SESSION_MS);
        // Each store opens its session on its first request, as the model does here.
        let (w, negotiated) = zk.open_session(WATCHER_SESSION_MS, mono());
        assert_eq!(negotiated, WATCHER_SESSION_MS);
        let mut step = |zk: &mut ZkModel, session, op: Op, real: (Reply, Vec<Zxid>)| {
            let mut events = Vec::new();
            let (simulated, seen) = match zk.apply(session, &op, mono(), 0, &mut events) {
                OpResult::Created(path) => {
                    let s = zk.stat(&path).unwrap();
                    (
                        Reply::Created(path, Comparable::of(&s, Some(session))),
                        zxids(&s).to_vec(),
                    )
                }
                OpResult::Stat(s) => (
                    Reply::Stat(s.as_ref().map(|s| Comparable::of(s, Some(session)))),
                    s.as_ref().map(|s| zxids(s).to_vec()).unwrap_or_default(),
                ),
                OpResult::Children(mut c) => {
                    c.sort();
                    (Reply::Children(c), Vec::new())
                }
                other => panic!("not sent here: {other:?}"),
            };
            assert_eq!(simulated, real.0, "{op:?}");
            assert!(events.is_empty(), "{op:?} fired {events:?}");
            model_zxids.extend(seen);
            real_zxids.extend(real.1);
        };
        let create = |path: &str, mode| Op::Create {
            path: path.into(),
            data: Vec::new(),
            mode,
        };
        let exists = |path: &str, watch| Op::Exists {
            path: path.into(),
            watch,
        };
        let children = |path: &str, watch| Op::GetChildren {
            path: path.into(),
            watch,
        };
        let op = create("/t", CreateMode::Persistent);
        step(
            &mut zk,
            w,
            op.clone(),
            real_apply(&watcher, &op).await.unwrap(),
        );
        let (s, negotiated) = zk.open_session(SILENT_SESSION_MS, mono());
        assert_eq!(negotiated, SILENT_SESSION_MS);
        for (path, mode) in [
            ("/t/e", CreateMode::Ephemeral),
            ("/t/s-", CreateMode::EphemeralSequential),
            ("/t/p", CreateMode::Persistent),
        ] {
            let op = create(path, mode);
            step(
                &mut zk,
                s,
                op.clone(),
                real_apply(&silent, &op).await.unwrap(),
            );
        }
        // The watcher watches the silent session's nodes, a node that stays, and the parent.
        for op in [
            exists("/t/e", true),
            exists("/t/s-0000000001", true),
            exists("/t/p", true),
            children("/t", true),
        ] {
            step(
                &mut zk,
                w,
                op.clone(),
                real_apply(&watcher, &op).await.unwrap(),
            );
        }
        // The silent session's last request renews it (at `renewed` at the earliest, on the
        // server); then its client goes away without closing it, as a killed process does.
        let renewed = mono();
        let op = exists("/t/e", false);
        step(
            &mut zk,
            s,
            op.clone(),
            real_apply(&silent, &op).await.unwrap(),
        );
        drop(silent);
        let dropped = mono();
        let model_end = zk.next_expiry_ms().expect("two open sessions");
        assert!(
            (renewed + SILENT_SESSION_MS..=dropped + SILENT_SESSION_MS + EXPIRY_TICK_MS)
                .contains(&model_end),
            "the model ends the session at {model_end} ms, renewed at {renewed}..{dropped} ms"
        );

        // Shortly before the timeout has passed since the renewal, nothing has happened in
        // either world: a session never ends before its timeout.
        let before = renewed + SILENT_SESSION_MS - EXPIRY_TICK_MS / 2;
        tokio::time::sleep(Duration::from_millis(before.saturating_sub(mono()))).await;
        let op = exists("/t/e", false);
        step(
            &mut zk,
            w,
            op.clone(),
            real_apply(&watcher, &op).await.unwrap(),
        );
        let mut fired = Events::new();
        drain(&watcher, &mut fired).await;
        assert!(fired.is_empty(), "events before the timeout: {fired:?}");

        // The model's expirer ends the session at its deadline; the real server's within the
        // tick its own clock puts it in. Both delete its ephemerals in one transaction and fire
        // the watcher's watches.
        let mut events = Vec::new();
        assert_eq!(zk.expire_due(model_end, &mut events), vec![s]);
        let expected: Events = events
            .into_iter()
            .filter(|e| e.session == w)
            .map(|e| (e.path, e.kind))
            .collect();
        assert_eq!(expected.len(), 3, "{expected:?}");
        let latest = dropped + SILENT_SESSION_MS + EXPIRY_TICK_MS + DELIVERY_SLACK_MS;
        let mut real = Events::new();
        let mut first = None;
        while real != expected {
            let wait = Duration::from_millis(latest.saturating_sub(mono()));
            match tokio::time::timeout(wait, watcher.next_event()).await {
                Ok(ZkNotice::Watch(event)) => {
                    first.get_or_insert(mono());
                    real.insert((event.path, event.kind));
                }
                // Its session opened with its first request (`Connected`); any other change
                // would void the comparison.
                Ok(ZkNotice::State(SessionState::Connected)) => {}
                Ok(ZkNotice::State(state)) => panic!("the watcher's session changed: {state:?}"),
                Err(_) => panic!(
                    "by {latest} ms (renewed at {renewed}..{dropped} ms) the watcher heard \
                     {real:?}, the model fired {expected:?}"
                ),
            }
        }
        drain(&watcher, &mut real).await;
        assert_eq!(real, expected);
        let first = first.unwrap();
        assert!(
            first >= renewed + SILENT_SESSION_MS,
            "the session ended at {first} ms, before its timeout after its renewal at {renewed} ms"
        );

        // After: both trees agree, zxids included (the expiry is one transaction).
        for op in [
            exists("/t/e", false),
            exists("/t/s-0000000001", false),
            exists("/t/p", false),
            children("/t", false),
            exists("/t", false),
        ] {
            step(
                &mut zk,
                w,
                op.clone(),
                real_apply(&watcher, &op).await.unwrap(),
            );
        }
        assert_eq!(
            zxid_shape(&model_zxids),
            zxid_shape(&real_zxids),
            "zxids, model {model_zxids:?}, real {real_zxids:?}"
        );
        let _ = writeln!(
            std::io::stderr().lock(),
            "session expiry: renewed at {renewed}..{dropped} ms, timeout {SILENT_SESSION_MS} \
             ms, tick {EXPIRY_TICK_MS} ms: the model ends it at {model_end} ms, the watcher \
             heard it at {first} ms"
        );
    });
    let pids = launcher.borrow().started_pids();
    drop(launcher);
    for pid in pids {
        assert!(
            !common::alive(pid, "zookeeper"),
            "ZooKeeper {pid} left running"
        );
    }
}
