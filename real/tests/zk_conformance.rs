//! Conformance of the simulated ZooKeeper server with the real one: random sequences of requests
//! go through the model (`lockcheck_sim::zookeeper::model::ZkModel`, driven directly) and through
//! a real ZooKeeper server (through [`RealZk`], the store the algorithms use), and every reply
//! must be the same.
//!
//! Each sequence runs under a fresh persistent parent (`/c0`, `/c1`, …), so sequence numbers start
//! from the same place in both worlds, and mixes creates in all four modes (sequential prefixes
//! included, some ending in `/`), deletes with version -1, the right version and wrong ones,
//! `exists` and `getChildren`, on names under the parent, on nodes the sequence created, on the
//! root and ZooKeeper's own nodes, and on malformed paths. Each ends with an `exists` and a
//! `getChildren` of its parent. One server and one session serve every sequence (so the tree
//! grows across them, identically in both worlds).
//!
//! Compared: created paths (sequence suffixes included), error kinds, children (sorted: neither
//! server promises an order), and the stat fields that do not depend on time or on the
//! transaction counter: `version`, `cversion`, `dataLength`, `numChildren`, and whether the node
//! is ephemeral and owned by the requesting session. Not compared: zxids, times, and the
//! session id's value (the real one is time-based, the model's a counter).
//!
//! Documented differences, left out of the generated requests:
//! - `create("/")`: the Rust client refuses it before sending (`BadArguments`), where the Java
//!   client, which the model follows, lets the server answer `NodeExists`.
//! - Watches: their events come asynchronously from the real server; they are covered by the
//!   lock stories (`tests/zookeeper_servers.rs`) rather than compared reply for reply here.
//!
//! The count of sequences is asserted: at least 1,000 run every time.
//!
//! Without ZooKeeper (java and its jar) this test prints one line saying how to install it and
//! passes, except under CI (`CI=true`), where it fails.

use lockcheck_algorithms::zookeeper::store::{CreateMode, Stat, ZkError, ZkStore};
use lockcheck_core::scenario::DEFAULT_TICK_TIME_MS;
use lockcheck_real::gate::PauseGate;
use lockcheck_real::launcher::{Launcher, ZooKeeper};
use lockcheck_real::zk_store::RealZk;
use lockcheck_sim::zookeeper::model::{Op, OpResult, SessionId, ZkModel};
use proptest::prelude::*;
use proptest::test_runner::{Config, RngAlgorithm, TestCaseError, TestRng, TestRunner};
use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
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
    Exists(Target),
    Children(Target),
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
        3 => (target(), prop_oneof![Just(-1), 0..3, Just(7)])
            .prop_map(|(t, v)| Request::Delete(t, v)),
        2 => target().prop_map(Request::Exists),
        2 => target().prop_map(Request::Children),
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

/// The model with its one session, its clocks standing still (the session never expires).
struct Model {
    zk: ZkModel,
    session: SessionId,
}

impl Model {
    fn apply(&mut self, op: Op) -> Reply {
        let mut events = Vec::new();
        let created = |path: &String, zk: &ZkModel, session| {
            let stat = zk.stat(path).expect("a created node exists");
            Reply::Created(path.clone(), Comparable::of(&stat, Some(session)))
        };
        match self.zk.apply(self.session, &op, 0, 0, &mut events) {
            OpResult::Created(path) => created(&path, &self.zk, self.session),
            OpResult::Deleted => Reply::Deleted,
            OpResult::Stat(stat) => {
                Reply::Stat(stat.map(|s| Comparable::of(&s, Some(self.session))))
            }
            OpResult::Children(mut children) => {
                children.sort();
                Reply::Children(children)
            }
            OpResult::Error(e) => Reply::Error(e),
            other => panic!("a reply to a request this test does not send: {other:?}"),
        }
    }
}

/// Sends `op` to the real server.
async fn real_apply(store: &RealZk, op: &Op) -> Result<Reply, String> {
    let session = store.session_id();
    let stat = |s: &Stat| Comparable::of(s, store.session_id().or(session));
    let reply = match op {
        Op::Create { path, data, mode } => store
            .create(path, data.clone(), *mode)
            .await
            .map(|r| r.map(|(path, s)| Reply::Created(path, stat(&s)))),
        Op::Delete { path, version } => store
            .delete(path, *version)
            .await
            .map(|r| r.map(|()| Reply::Deleted)),
        Op::Exists { path, .. } => store
            .exists(path, false)
            .await
            .map(|r| r.map(|s| Reply::Stat(s.as_ref().map(stat)))),
        Op::GetChildren { path, .. } => store.get_children(path, false).await.map(|r| {
            r.map(|mut children| {
                children.sort();
                Reply::Children(children)
            })
        }),
        other => return Err(format!("not sent by this test: {other:?}")),
    };
    match reply {
        Ok(Ok(reply)) => Ok(reply),
        Ok(Err(e)) => Ok(Reply::Error(e)),
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
        Request::Exists(target) => Op::Exists {
            path: paths.resolve(target),
            watch: false,
        },
        Request::Children(target) => Op::GetChildren {
            path: paths.resolve(target),
            watch: false,
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
        Request::Exists(Target::Parent),
        Request::Children(Target::Parent),
    ];
    let all = std::iter::once(&setup)
        .chain(requests)
        .chain(closing.iter());
    let mut log = Vec::new();
    for (i, request) in all.enumerate() {
        let op = op_of(request, &paths);
        let simulated = model.borrow_mut().apply(op.clone());
        let real = real_apply(store, &op).await.map_err(TestCaseError::fail)?;
        log.push(format!("{i}: {op:?} -> {real:?}"));
        *tally.borrow_mut().entry(kind_of(&real, &op)).or_default() += 1;
        if simulated != real {
            return Err(TestCaseError::fail(format!(
                "divergence at request {i} of the sequence under {parent}:\n  request: \
                 {op:?}\n  model: {simulated:?}\n  real:  {real:?}\nsequence so far:\n  {}",
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
    ] {
        assert!(tally.contains_key(kind), "no {kind} reply: {tally:?}");
    }
}
