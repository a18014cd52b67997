//! Conformance: the simulated Redis (`lockcheck_sim::redis::model`) against a real `redis-server`.
//!
//! proptest draws 1,000 random command sequences (SET with NX/XX/PX/GET, GET, DEL, EXISTS,
//! PEXPIRE, PTTL, INCR, the hash commands, and the project's own Lua scripts with random
//! arguments, release/extend/acquire among them) over a small key space, so that keys collide
//! across types and owners, with waits between them. Each sequence runs through the model and
//! through the real server, command by command, and every reply must agree. The sequence seed is
//! fixed, so CI runs the same 1,000 sequences every time; a divergence is shrunk to a minimal
//! sequence and printed with both replies.
//!
//! # Time
//!
//! Leases are long (5 s, 60 s) or short (20 to 300 ms, by `SET … PX`, `PEXPIRE` and the scripts'
//! lease arguments), and waits let the short ones run out within the sequence: a fixed wait
//! (10 to 200 ms), a wait until just before one of the next deadlines of the sequence's keys
//! ([`MARGIN_MS`] + 5 ms before it), or until just past one. The model is driven with the real
//! wall clock (the one `redis-server` expires keys by) read just before each command is sent, so
//! expiry is compared where locks rely on it: a key read, extended, released or taken over just
//! before its deadline and just after, `PTTL` counting down, scripts finding a lease gone.
//!
//! The real server answers at an instant between the reads of the clock before sending and after
//! the reply, and its deadlines are the model's plus at most the longest round trip so far (the
//! skew). Two rules make every comparison exact but for remaining times:
//! - Before each command the harness waits until no deadline of the sequence's keys is within
//!   [`MARGIN_MS`] (25 ms) ahead of the clock, or within the skew plus 25 ms behind it; so a
//!   command is never sent at a deadline.
//! - The reply must agree with the model's at both ends of the window of model times it can
//!   correspond to, `[sent − skew − 1 ms, answered + 1 ms]` (1 ms for the clocks' rounding):
//!   remaining times (`PTTL`, a script returning one) must lie between the two, everything else
//!   must be equal to both. That window holds no deadline, as the first rule sees to, unless the
//!   command's round trip itself outlasted the 25 ms margin; then either answer would be right,
//!   and the sequence ends there without failing (it is counted apart, and proptest draws
//!   another in its place, so 1,000 sequences are compared to their end).
//!
//! So expiry is pinned to within the margin, not to the millisecond: a model that expired keys
//! 40 ms late fails at once (tried), one 20 ms late would pass. The summary line says how many
//! commands were sent less than 100 ms before a deadline and after one, and how many found a key
//! past its deadline; the test fails if any of those is zero.
//!
//! # Documented differences
//!
//! The model follows Redis 7.2; Debian 12 ships 7.0.15:
//! - An error raised inside a script: 7.0 wraps it as `ERR Error running script (call to
//!   f_<sha1>): @user_script:…: WRONGTYPE …`, 7.2 replies the error itself with the script's
//!   position appended. Errors are therefore compared by their class (`WRONGTYPE`, `ERR`, …):
//!   the class is what a client acts on, the wording is not.
//!
//! Without `redis-server` on PATH the test prints one line saying how to install it and passes,
//! except under CI (`CI=true`), where it fails.

use lockcheck_algorithms::redis::command::{Command, Reply, Script, SetOptions};
use lockcheck_algorithms::redis::store::RedisStore;
use lockcheck_algorithms::redis::{fair, reentrant, single};
use lockcheck_core::scenario::Persistence;
use lockcheck_real::gate::PauseGate;
use lockcheck_real::launcher::{Launcher, Redis};
use lockcheck_real::redis_store::RealRedis;
use lockcheck_sim::redis::model::{KeyEffect, RedisModel};
use proptest::prelude::*;
use proptest::test_runner::{
    Config, RngAlgorithm, TestCaseError, TestCaseResult, TestRng, TestRunner,
};
use std::cell::{Cell, RefCell};
use std::io::Write;
use std::time::{Duration, SystemTime};

/// Sequences compared per run.
const SEQUENCES: u32 = 1_000;

/// A command with its key slots still abstract: keys are named per sequence when it runs, so no
/// sequence sees another's keys (shrinking reruns sequences against the same server).
#[derive(Clone, Debug)]
enum Step {
    Set {
        key: usize,
        value: &'static str,
        options: SetOptions,
    },
    Get(usize),
    Del(Vec<usize>),
    Exists(usize),
    PExpire(usize, i64),
    PTtl(usize),
    Incr(usize),
    HSet(usize, &'static str, &'static str),
    HGet(usize, &'static str),
    HIncrBy(usize, &'static str, i64),
    HDel(usize, &'static str),
    HLen(usize),
    /// One of [`SCRIPTS`], by index, with keys and arguments drawn for it.
    Eval {
        script: usize,
        keys: Vec<usize>,
        args: Vec<Arg>,
    },
    /// No command: time passes (see [`Wait`]).
    Wait(Wait),
}

/// A script argument: a value, or the client's wall clock in ms (what the fair lock passes).
#[derive(Clone, Debug)]
enum Arg {
    Text(&'static str),
    Now,
}

/// The project's scripts: source, number of keys, and how to draw each argument.
const SCRIPTS: &[(&str, usize, &[ArgKind])] = &[
    (single::RELEASE_LUA, 1, &[ArgKind::Owner]),
    (single::EXTEND_LUA, 1, &[ArgKind::Owner, ArgKind::Lease]),
    (
        single::ACQUIRE_FENCED_LUA,
        2,
        &[ArgKind::Owner, ArgKind::Lease],
    ),
    (reentrant::ACQUIRE_LUA, 1, &[ArgKind::Lease, ArgKind::Owner]),
    (
        reentrant::RELEASE_LUA,
        2,
        &[
            ArgKind::Message,
            ArgKind::Lease,
            ArgKind::Owner,
            ArgKind::Publish,
        ],
    ),
    (
        reentrant::RELEASE_LATCH_LUA,
        3,
        &[
            ArgKind::Message,
            ArgKind::Lease,
            ArgKind::Owner,
            ArgKind::Publish,
            ArgKind::Lease,
        ],
    ),
    (reentrant::RENEW_LUA, 1, &[ArgKind::Lease, ArgKind::Owner]),
    (
        reentrant::RENEW_BATCH_LUA,
        1,
        &[ArgKind::Lease, ArgKind::Owner],
    ),
    (
        fair::ACQUIRE_LUA,
        3,
        &[ArgKind::Lease, ArgKind::Owner, ArgKind::Lease, ArgKind::Now],
    ),
    (
        fair::TRY_ACQUIRE_LUA,
        3,
        &[ArgKind::Lease, ArgKind::Owner, ArgKind::Now],
    ),
    (
        fair::RELEASE_LUA,
        4,
        &[
            ArgKind::Message,
            ArgKind::Lease,
            ArgKind::Owner,
            ArgKind::Now,
        ],
    ),
    (fair::RENEW_LUA, 1, &[ArgKind::Lease, ArgKind::Owner]),
    (fair::FORCE_UNLOCK_LUA, 3, &[ArgKind::Message]),
    (fair::LEAVE_QUEUE_LUA, 2, &[ArgKind::Owner]),
];

#[derive(Clone, Copy, Debug)]
enum ArgKind {
    Owner,
    Lease,
    Message,
    Now,
    /// The command a Redisson unlock publishes with (`publish`; `spublish` on a sharded
    /// cluster).
    Publish,
}

/// Key slots per sequence: few, so that commands of different types meet on one key.
const KEYS: usize = 4;

fn key() -> impl Strategy<Value = usize> {
    0..KEYS
}

fn lease() -> impl Strategy<Value = &'static str> {
    prop::sample::select(vec!["5000", "60000", "0", "-5", "abc"])
}

/// Leases short enough to run out within a sequence: [`Step::Wait`]s and the guard before each
/// command let them.
const SHORT_LEASES: &[u64] = &[20, 60, 150, 300];

fn arg(kind: ArgKind) -> BoxedStrategy<Arg> {
    match kind {
        ArgKind::Owner => prop::sample::select(vec!["o1", "o2", "o1:1"])
            .prop_map(Arg::Text)
            .boxed(),
        ArgKind::Lease => prop_oneof![
            3 => prop::sample::select(vec!["5000", "60000"]).prop_map(Arg::Text),
            2 => prop::sample::select(vec!["60", "150", "300"]).prop_map(Arg::Text),
            1 => lease().prop_map(Arg::Text),
        ]
        .boxed(),
        ArgKind::Message => Just(Arg::Text("0")).boxed(),
        ArgKind::Now => Just(Arg::Now).boxed(),
        ArgKind::Publish => Just(Arg::Text("publish")).boxed(),
    }
}

fn eval() -> impl Strategy<Value = Step> {
    (0..SCRIPTS.len()).prop_flat_map(|script| {
        let (_, nkeys, kinds) = SCRIPTS[script];
        let args: Vec<BoxedStrategy<Arg>> = kinds.iter().map(|&k| arg(k)).collect();
        (prop::collection::vec(key(), nkeys), args).prop_map(move |(keys, args)| Step::Eval {
            script,
            keys,
            args,
        })
    })
}

fn value() -> impl Strategy<Value = &'static str> {
    prop::sample::select(vec!["o1", "o2", "1", "41", "x"])
}

fn field() -> impl Strategy<Value = &'static str> {
    prop::sample::select(vec!["o1", "o2", "o1:1"])
}

fn step() -> impl Strategy<Value = Step> {
    let set_options = (
        any::<bool>(),
        any::<bool>(),
        prop::option::of(prop_oneof![
            1 => Just(5_000u64),
            1 => Just(60_000),
            3 => prop::sample::select(SHORT_LEASES),
        ]),
        prop::bool::weighted(0.2),
    )
        .prop_map(|(nx, xx, px, get)| SetOptions {
            nx,
            xx,
            px,
            get,
            ..SetOptions::default()
        });
    prop_oneof![
        4 => (key(), value(), set_options).prop_map(|(key, value, options)| Step::Set {
            key,
            value,
            options
        }),
        2 => key().prop_map(Step::Get),
        2 => prop::collection::vec(key(), 1..3).prop_map(Step::Del),
        1 => key().prop_map(Step::Exists),
        2 => (key(), prop::sample::select(vec![0i64, -1, 5_000, 60_000, 40, 150, 300])).prop_map(|(k, ms)| Step::PExpire(k, ms)),
        2 => key().prop_map(Step::PTtl),
        1 => key().prop_map(Step::Incr),
        1 => (key(), field(), value()).prop_map(|(k, f, v)| Step::HSet(k, f, v)),
        1 => (key(), field()).prop_map(|(k, f)| Step::HGet(k, f)),
        1 => (key(), field(), prop::sample::select(vec![1i64, -1])).prop_map(|(k, f, by)| Step::HIncrBy(k, f, by)),
        1 => (key(), field()).prop_map(|(k, f)| Step::HDel(k, f)),
        1 => key().prop_map(Step::HLen),
        6 => eval(),
        4 => wait(),
    ]
}

/// How long a [`Step::Wait`] lasts.
#[derive(Clone, Copy, Debug)]
enum Wait {
    /// This many ms (pushed past any deadline it would end near, see [`MARGIN_MS`]).
    For(u64),
    /// Until [`MARGIN_MS`] + 5 ms before the k-th (modulo how many) future deadline of the
    /// sequence's keys, in deadline order: the command after it runs just before the expiry.
    Before(usize),
    /// Until just past the k-th future deadline's window: the command after it runs just after
    /// the expiry.
    After(usize),
}

fn wait() -> impl Strategy<Value = Step> {
    prop_oneof![
        1 => prop::sample::select(vec![10u64, 30, 80, 200]).prop_map(Wait::For),
        2 => (0usize..3).prop_map(Wait::Before),
        4 => (0usize..3).prop_map(Wait::After),
    ]
    .prop_map(Step::Wait)
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .expect("after 1970")
        .as_millis() as u64
}

impl Step {
    /// The command, with key slot `k` named `{prefix}:k`; `None` for a wait.
    fn command(&self, prefix: &str) -> Option<Command> {
        let k = |slot: &usize| format!("{prefix}:{slot}");
        Some(match self {
            Step::Wait(_) => return None,
            Step::Set {
                key,
                value,
                options,
            } => Command::Set {
                key: k(key),
                value: value.to_string(),
                options: *options,
            },
            Step::Get(key) => Command::Get { key: k(key) },
            Step::Del(keys) => Command::Del {
                keys: keys.iter().map(k).collect(),
            },
            Step::Exists(key) => Command::Exists { key: k(key) },
            Step::PExpire(key, ms) => Command::PExpire {
                key: k(key),
                ms: *ms,
            },
            Step::PTtl(key) => Command::PTtl { key: k(key) },
            Step::Incr(key) => Command::Incr { key: k(key) },
            Step::HSet(key, f, v) => Command::HSet {
                key: k(key),
                fields: vec![(f.to_string(), v.to_string())],
            },
            Step::HGet(key, f) => Command::HGet {
                key: k(key),
                field: f.to_string(),
            },
            Step::HIncrBy(key, f, by) => Command::HIncrBy {
                key: k(key),
                field: f.to_string(),
                increment: *by,
            },
            Step::HDel(key, f) => Command::HDel {
                key: k(key),
                fields: vec![f.to_string()],
            },
            Step::HLen(key) => Command::HLen { key: k(key) },
            Step::Eval { script, keys, args } => Command::Eval {
                script: Script::new(SCRIPTS[*script].0),
                keys: keys.iter().map(k).collect(),
                args: args
                    .iter()
                    .map(|a| match a {
                        Arg::Text(t) => t.to_string(),
                        Arg::Now => now_ms().to_string(),
                    })
                    .collect(),
            },
        })
    }
}

/// An error's class: the code a client acts on (`WRONGTYPE`, `ERR`, …), wherever 7.0 or 7.2 put
/// it in the text.
fn error_class(text: &str) -> String {
    for code in ["WRONGTYPE", "NOSCRIPT", "OOM", "BUSY"] {
        if text.contains(code) {
            return code.to_string();
        }
    }
    text.split_whitespace().next().unwrap_or("").to_string()
}

/// Whether `real` agrees with the model's replies at the two ends of the window of model times
/// the real server's answer corresponds to (see [`MARGIN_MS`]): `early` at its start, `late` at
/// its end, with no deadline between them, so the two differ at most in remaining lease times.
/// Errors agree by class; an integer agrees if it lies between the two (a remaining time the
/// window spans), anything else exactly.
fn agrees(early: &Reply, late: &Reply, real: &Reply) -> bool {
    match (early, late, real) {
        (Reply::Error(e), Reply::Error(l), Reply::Error(r)) => {
            error_class(e) == error_class(r) && error_class(l) == error_class(r)
        }
        (Reply::Int(e), Reply::Int(l), Reply::Int(r)) => (*e.min(l)..=*e.max(l)).contains(r),
        (Reply::Array(e), Reply::Array(l), Reply::Array(r)) => {
            e.len() == r.len()
                && l.len() == r.len()
                && e.iter().zip(l).zip(r).all(|((e, l), r)| agrees(e, l, r))
        }
        (e, l, r) => e == r && l == r,
    }
}

mod common;

/// Whether redis-server is installed; see [`common::installed`].
fn servers_installed() -> bool {
    common::installed(&Redis {
        persistence: Persistence::None,
    })
}

/// A runtime and one redis-server started under `persistence`, ready: the launcher (which
/// stops it when dropped) and the server's index.
fn started(persistence: Persistence) -> (tokio::runtime::Runtime, RefCell<Launcher>, usize) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let launcher = RefCell::new(Launcher::new().unwrap());
    let index = launcher
        .borrow_mut()
        .add_redis("redis-0", persistence)
        .unwrap();
    runtime
        .block_on(Launcher::until_ready(&launcher, index))
        .unwrap();
    (runtime, launcher, index)
}

/// Scripts that try to leave something behind for the scripts after them, which Redis's read-only
/// sandbox refuses; the model runs every server's scripts in one Lua state per thread and is only
/// sound if it refuses them too. Then a probe of what they tried to change.
const SANDBOX_ESCAPES: &[&str] = &[
    "x = 1",
    "rawset(_G, 'x', 1)",
    "redis.call = nil",
    "string.rep = nil",
    "getmetatable('').__index.x = 1",
    "getmetatable('').x = 1",
    "getmetatable('').__index = {upper = function() return 'hacked' end}",
    "rawset(getmetatable(''), '__index', {})",
    "return setmetatable(getmetatable(''), {})",
    "return {type(redis.call), type(string.rep), ('a'):upper(), tostring(getmetatable('').x), \
     tostring(getmetatable('').__index == string), tostring(rawget(_G, 'x'))}",
];

#[test]
fn the_simulated_lua_sandbox_refuses_what_redis_refuses() {
    if !servers_installed() {
        return;
    }
    let (runtime, launcher, index) = started(Persistence::None);
    let real = RealRedis::new(
        launcher.borrow().addr(index),
        Duration::from_secs(5),
        PauseGate::new(),
    );
    let mut model = RedisModel::new();
    let mut disagreements = Vec::new();
    for source in SANDBOX_ESCAPES {
        let command = Command::Eval {
            script: Script::new(source),
            keys: Vec::new(),
            args: Vec::new(),
        };
        let expected = model.apply(&command, now_ms(), &mut Vec::new());
        let got = runtime.block_on(real.call(command)).unwrap();
        if !agrees(&expected, &expected, &got) {
            disagreements.push(format!("{source}\n  model: {expected:?}\n  real:  {got:?}"));
        }
    }
    drop(launcher);
    assert!(disagreements.is_empty(), "{}", disagreements.join("\n"));
}

/// Scripts whose replies, errors word for word, tell Redis's Lua 5.1 (and the libraries Redis
/// loads into it) from Lua 5.4 (which the simulated Redis ran until stop 54): numbers without an integer
/// subtype, 5.1's syntax, its error texts, its library functions, `cjson` and `bit`, and the
/// order `pairs` visits string keys (5.1's string hash is unseeded, so it is Redis's order).
const LUA_5_1_CASES: &[&str] = &[
    "return tostring(10/2)",
    "return {tostring(2^53), tostring(2^63), tostring(0.1), tostring(-0.0), tostring(1e15)}",
    "return 7/2",
    "return string.format('%d', 3.7)",
    "return string.rep('a', 3, ',')",
    "return {math.pow(2, 10), table.getn({1, 2, 3}), math.mod(7, 3), select('#', unpack({1, 2, 3}))}",
    "return _VERSION",
    "return 7 // 2",
    "return ...",
    "return select('#', ...)",
    "goto x",
    "return 1 & 2",
    "return math.type(1)",
    "local x = nil; return x.y",
    "return ('x'):bad()",
    "return 1 + {}",
    "local n; return #n",
    "return {pcall(error)}",
    "return {xpcall(function(a) return a end, function(e) return e end, 5)}",
    "return xpcall(function() error('boom') end, function(e) return 'h:' .. tostring(e) end)",
    "return setfenv",
    "return getfenv",
    "return newproxy",
    "return loadstring('return 1 + 1')()",
    "return loadstring('x = 1')()",
    "local t = {a=1, b=2, c=3, d=4, e=5, f=6} local out = {} for k in pairs(t) do out[#out+1] = k end return out",
    "local out = {} for k in pairs(string) do if k == 'format' then out[1] = k end end return out",
    "local out = {} for k in pairs({x = 1, y = 2, z = 3, [1] = 'a', [2] = 'b'}) do out[#out+1] = tostring(k) end return out",
    // cjson
    "return cjson.encode({a=1,b={1,2,{c='x/y'}}, d=0.1, e=1/3})",
    "return {cjson.encode({}), cjson.encode({1, 2, 3}), cjson.encode({[1]=1, [3]=3}), cjson.encode('a\"b\\\\c\\n\\1\\127/'), cjson.encode(2^63), cjson.encode(true), cjson.encode(cjson.null)}",
    "return cjson.encode({[2]=1, [1.5]=2})",
    "return cjson.encode({[20]=1})",
    "return cjson.encode(function() end)",
    "return cjson.encode({[true]=1})",
    "return cjson.encode(1/0)",
    "return cjson.encode()",
    "return cjson.encode({n = {[10] = 1}})",
    r#"local t = cjson.decode([[{"a":[1,2,{"b":null}],"s":"\u00e9\/\ud83d\ude00"}]]) return {t.a[1], t.a[2], tostring(t.a[3].b == cjson.null), t.s, type(t.a[3].b)}"#,
    "return {cjson.decode(' 12.5e1 '), cjson.decode('0x10'), cjson.decode('-0'), tostring(cjson.decode('nan')), cjson.decode('[]')[1] == nil}",
    "return cjson.decode('x')",
    "return cjson.decode('[1,2')",
    "return cjson.decode('{\"a\":1,}')",
    "return cjson.decode('\"abc')",
    r#"return cjson.decode([["\q"]])"#,
    r#"return cjson.decode([["\ud800"]])"#,
    "return cjson.decode('[1] 2')",
    "return cjson.decode({})",
    "return cjson.decode(12)",
    "return cjson.encode(cjson.decode('{\"k\":\"v\",\"n\":[true,false]}'))",
    "local ok, e = pcall(function() return cjson.decode('x') end) return e",
    "local ok, e = pcall(cjson.decode, 'x') return e",
    "return {cjson._NAME, cjson._VERSION, type(cjson.null)}",
    // bit's errors, word for word
    "return bit.band(1, {})",
    "local ok, e = pcall(function() return bit.bnot() end) return e",
];

#[test]
fn the_simulated_lua_is_redis_5_1_with_its_libraries() {
    if !servers_installed() {
        return;
    }
    let (runtime, launcher, index) = started(Persistence::None);
    let real = RealRedis::new(
        launcher.borrow().addr(index),
        Duration::from_secs(5),
        PauseGate::new(),
    );
    let mut model = RedisModel::new();
    let mut disagreements = Vec::new();
    for source in LUA_5_1_CASES {
        let command = Command::Eval {
            script: Script::new(source),
            keys: Vec::new(),
            args: Vec::new(),
        };
        let expected = model.apply(&command, now_ms(), &mut Vec::new());
        let got = runtime.block_on(real.call(command)).unwrap();
        if expected != got {
            disagreements.push(format!("{source}\n  model: {expected:?}\n  real:  {got:?}"));
        }
    }
    drop(launcher);
    assert!(
        disagreements.is_empty(),
        "{} of {} scripts disagree:\n{}",
        disagreements.len(),
        LUA_5_1_CASES.len(),
        disagreements.join("\n")
    );
}

/// How far from a key's deadline a command is sent, in ms: before each command the harness
/// waits until no deadline of the sequence's keys lies within `MARGIN_MS` ahead of the clock, or
/// within the skew plus `MARGIN_MS` behind it (see [`Sequence::clear_of_deadlines`]). A command
/// takes well under a millisecond here, so 25 ms leave room for a scheduler's delay of the test
/// or of the server on a busy machine; a longer margin would only make sequences slower.
const MARGIN_MS: u64 = 25;

/// How far ahead a [`Wait::Before`] or [`Wait::After`] looks for a deadline: past the longest
/// short lease, short of the long ones.
const WAIT_HORIZON_MS: u64 = 1_000;

/// The deadlines of the model's keys, past ones included (a key stays until a command or the
/// active expiry removes it), earliest first.
fn deadlines(model: &RedisModel) -> Vec<u64> {
    let mut rest = RedisModel::restore(model.snapshot());
    let mut all = Vec::new();
    while let Some(deadline) = rest.next_expiry_ms() {
        all.push(deadline);
        rest.expire_due(deadline + 1, &mut Vec::new());
        assert_ne!(
            rest.next_expiry_ms(),
            Some(deadline),
            "the model's active expiry kept a key 1 ms past its deadline"
        );
    }
    all
}

/// Ends a sequence without failing it: a command's window held a deadline (see
/// [`Sequence::step`]), so either answer would be right.
const STRADDLED: &str = "a command's round trip straddled a deadline";

/// What the sequences did, for the summary and the coverage check.
#[derive(Default)]
struct Tally {
    commands: Cell<u64>,
    waits: Cell<u64>,
    /// Commands that found a key past its deadline (the model's lazy expiry).
    expired: Cell<u64>,
    /// Commands sent less than 100 ms before a deadline of the sequence's keys.
    just_before: Cell<u64>,
    /// Commands sent less than 100 ms after one.
    just_after: Cell<u64>,
    /// Sequences ended at a command whose window held a deadline.
    straddled: Cell<u64>,
    /// Time spent waiting, in ms.
    waited_ms: Cell<u64>,
}

fn add(cell: &Cell<u64>, n: u64) {
    cell.set(cell.get() + n);
}

/// One sequence's model and clock bookkeeping.
struct Sequence<'a> {
    model: RedisModel,
    /// The longest round trip of a command so far, in ms: each real deadline is the model's
    /// (computed from the time the command was sent) plus at most this.
    skew: u64,
    runtime: &'a tokio::runtime::Runtime,
    tally: &'a Tally,
}

impl Sequence<'_> {
    fn sleep_until(&self, target_ms: u64) {
        let now = now_ms();
        if target_ms > now {
            add(&self.tally.waited_ms, target_ms - now);
            let wait = Duration::from_millis(target_ms - now);
            self.runtime
                .block_on(async { tokio::time::sleep(wait).await });
        }
    }

    /// Waits until the clock is clear of every deadline: at least [`MARGIN_MS`] before it, or
    /// [`MARGIN_MS`] past it plus the skew.
    fn clear_of_deadlines(&self) {
        loop {
            let now = now_ms();
            let end = deadlines(&self.model)
                .into_iter()
                .filter(|&d| now + MARGIN_MS >= d && now <= d + self.skew + MARGIN_MS)
                .map(|d| d + self.skew + MARGIN_MS + 1)
                .max();
            match end {
                Some(end) => self.sleep_until(end),
                None => return,
            }
        }
    }

    /// A [`Step::Wait`].
    fn wait(&self, wait: Wait) {
        add(&self.tally.waits, 1);
        let now = now_ms();
        // Deadlines of the short leases only: a wait for a 5 s lease would cost seconds.
        let future = |first: u64| -> Vec<u64> {
            deadlines(&self.model)
                .into_iter()
                .filter(|&d| d > first && d <= now + WAIT_HORIZON_MS)
                .collect()
        };
        let target = match wait {
            Wait::For(ms) => Some(now + ms),
            Wait::Before(k) => {
                let ahead = future(now + MARGIN_MS + 5);
                (!ahead.is_empty()).then(|| ahead[k % ahead.len()] - MARGIN_MS - 5)
            }
            Wait::After(k) => {
                let ahead = future(now.saturating_sub(self.skew + MARGIN_MS + 1));
                (!ahead.is_empty()).then(|| ahead[k % ahead.len()] + self.skew + MARGIN_MS + 1)
            }
        };
        if let Some(target) = target {
            self.sleep_until(target);
        }
    }

    /// Runs `command` on both sides and compares.
    ///
    /// The real server answers at some instant `s` between `t0` (just before sending) and `t1`
    /// (just after the reply) on the same wall clock the model reads; its deadlines are the
    /// model's (set at the `t0` of their command) plus at most the skew. So it answers as the
    /// model would at some time in `[t0 − skew − 1, t1 + 1]` (1 ms for the clocks' rounding).
    /// Where no deadline lies in that window, the model's answers at both ends differ at most in
    /// remaining times, and the real one must lie between them. Where one does (only if the
    /// round trip outlasted [`MARGIN_MS`]), the answer could rightly be either: the sequence
    /// ends there without failing, and proptest draws another in its place.
    fn step(&mut self, real: &RealRedis, command: &Step, prefix: &str, i: usize) -> TestCaseResult {
        self.clear_of_deadlines();
        // Built now, after any wait: a script's clock argument is the time it is sent.
        let command = command.command(prefix).expect("a step with a command");
        let before = deadlines(&self.model);
        let t0 = now_ms();
        let got = self
            .runtime
            .block_on(real.call(command.clone()))
            .map_err(|e| TestCaseError::fail(format!("the real server failed: {e}")))?;
        let t1 = now_ms();
        add(&self.tally.commands, 1);
        let (lo, hi) = (t0.saturating_sub(self.skew + 1), t1 + 1);
        if before.iter().any(|&d| lo <= d && d < hi) {
            add(&self.tally.straddled, 1);
            return Err(TestCaseError::reject(STRADDLED));
        }
        if before.iter().any(|&d| t0 < d && d < t0 + 100) {
            add(&self.tally.just_before, 1);
        }
        if before.iter().any(|&d| d < t0 && t0 < d + 100) {
            add(&self.tally.just_after, 1);
        }
        let at =
            |now| RedisModel::restore(self.model.snapshot()).apply(&command, now, &mut Vec::new());
        let (early, late) = (at(lo), at(hi));
        let mut effects = Vec::new();
        self.model.apply(&command, t0, &mut effects);
        self.skew = self.skew.max(t1 - t0);
        add(
            &self.tally.expired,
            effects
                .iter()
                .filter(|e| matches!(e, KeyEffect::Expired { .. }))
                .count() as u64,
        );
        if !agrees(&early, &late, &got) {
            return Err(TestCaseError::fail(format!(
                "step {i}: {command:?}\n  model: {early:?} (at {lo} ms) .. {late:?} (at {hi} \
                 ms)\n  real:  {got:?} (sent at {t0} ms, answered by {t1} ms)"
            )));
        }
        Ok(())
    }
}

#[test]
fn the_simulated_redis_answers_as_a_real_redis_server_does() {
    if !servers_installed() {
        return;
    }
    let (runtime, launcher, index) = started(Persistence::None);
    let addr = launcher.borrow().addr(index);
    let real = RealRedis::new(addr, Duration::from_secs(5), PauseGate::new());

    let config = Config {
        cases: SEQUENCES,
        failure_persistence: None,
        max_shrink_iters: 4_096,
        ..Config::default()
    };
    let mut runner =
        TestRunner::new_with_rng(config, TestRng::deterministic_rng(RngAlgorithm::ChaCha));
    let runs = Cell::new(0u64);
    let tally = Tally::default();
    let result = runner.run(&prop::collection::vec(step(), 1..24), |steps| {
        // A fresh key space per run (shrinking reruns sequences on the same server).
        let prefix = format!("c{}", runs.get());
        runs.set(runs.get() + 1);
        let mut sequence = Sequence {
            model: RedisModel::new(),
            skew: 0,
            runtime: &runtime,
            tally: &tally,
        };
        for (i, step) in steps.iter().enumerate() {
            match step {
                Step::Wait(wait) => sequence.wait(*wait),
                _ => sequence.step(&real, step, &prefix, i)?,
            }
        }
        Ok(())
    });
    drop(launcher);
    if let Err(e) = result {
        panic!("the model and redis-server disagree: {e}");
    }
    let _ = writeln!(
        std::io::stderr().lock(),
        "redis conformance: {SEQUENCES} sequences compared to their end, of {} run; {} commands \
         compared, {} of them less than 100 ms before a deadline, {} less than 100 ms after one, \
         {} finding a key past its deadline; {} waits, {} ms waited; ended early, not counted: {} at a command whose round \
         trip straddled a deadline",
        runs.get(),
        tally.commands.get(),
        tally.just_before.get(),
        tally.just_after.get(),
        tally.expired.get(),
        tally.waits.get(),
        tally.waited_ms.get(),
        tally.straddled.get(),
    );
    // Time was exercised: keys were read just before their deadlines and found gone after.
    assert!(tally.just_before.get() > 0 && tally.just_after.get() > 0 && tally.expired.get() > 0);
}

/// `f`'s output, if it comes within 2 s.
fn within<T>(
    runtime: &tokio::runtime::Runtime,
    f: impl std::future::Future<Output = T>,
) -> Option<T> {
    runtime.block_on(async { tokio::time::timeout(Duration::from_secs(2), f).await.ok() })
}

/// Pub/sub as the simulated Redis models it (issue 20, item 5), shown on a real server through
/// the store the algorithms use (`RealRedis`, a subscription connection of its own):
/// - `PUBLISH` replies how many connections subscribe, and the message reaches a subscriber;
/// - a store's `unsubscribe` is local: the server keeps counting it until the connection ends,
///   and what it still sends is dropped on arrival (the model's `PUBLISH` counts the same way);
/// - a subscription dies with the server's process: after kill -9 and a restart `PUBLISH`
///   reaches nobody and replies 0 (the lock, under `appendfsync always`, is still there), and
///   what is published then is lost to the subscriber for good; once it reconnects, it
///   subscribes again and is reached again.
///
/// The simulated server answers each of these the same way (`RedisModel`'s counts, below, and
/// `sim/tests/redisson_wait.rs` for the connections).
#[test]
fn a_real_servers_pub_sub_reaches_subscribers_of_the_moment_and_dies_with_its_process() {
    if !servers_installed() {
        return;
    }
    let (runtime, launcher, index) = started(Persistence::Always);
    let addr = launcher.borrow().addr(index);
    let timeout = Duration::from_secs(5);
    let waiter = RealRedis::new(addr, timeout, PauseGate::new());
    let holder = RealRedis::new(addr, timeout, PauseGate::new());
    let publish = |message: &str| Command::Publish {
        channel: "ch".into(),
        message: message.into(),
    };
    // The model beside the server, the waiter's connection named by an address of its own.
    let model = RefCell::new(RedisModel::new());
    let conn: std::net::SocketAddr = "10.0.0.2:40001".parse().unwrap();
    // PUBLISH on both; the server's reply, once the model's agrees with it.
    let both = |message: &str| {
        let real = runtime.block_on(holder.call(publish(message)));
        let simulated = model
            .borrow_mut()
            .apply(&publish(message), now_ms(), &mut Vec::new());
        assert_eq!(real, Ok(simulated.clone()), "PUBLISH {message}");
        simulated
    };

    // Nobody subscribes: 0.
    assert_eq!(both("a"), Reply::Int(0));
    // One subscriber: 1, and it gets the message.
    runtime.block_on(waiter.subscribe("ch")).unwrap();
    model.borrow_mut().subscribe("ch", conn);
    assert_eq!(both("b"), Reply::Int(1));
    assert_eq!(
        within(&runtime, waiter.next_message("ch")),
        Some("b".to_string())
    );
    // Unsubscribed locally: still counted by the server (and the model), nothing handed out.
    waiter.unsubscribe("ch");
    assert_eq!(both("c"), Reply::Int(1));
    assert_eq!(within(&runtime, waiter.next_message("ch")), None);
    // Subscribed again: counted once, and "c" is not handed out.
    runtime.block_on(waiter.subscribe("ch")).unwrap();
    model.borrow_mut().subscribe("ch", conn);
    assert_eq!(both("d"), Reply::Int(1));
    assert_eq!(
        within(&runtime, waiter.next_message("ch")),
        Some("d".to_string())
    );

    // kill -9 and restart: the lock is kept, the subscription is not.
    let lock = Command::Set {
        key: "lock".into(),
        value: "holder".into(),
        options: SetOptions::default(),
    };
    assert_eq!(
        runtime.block_on(holder.call(lock)),
        Ok(Reply::Status("OK".into()))
    );
    launcher.borrow_mut().respawn(index).unwrap();
    runtime
        .block_on(Launcher::until_ready(&launcher, index))
        .unwrap();
    // The holder's connection broke with the process: its first call may fail, then works.
    let get = || Command::Get { key: "lock".into() };
    let kept = runtime
        .block_on(holder.call(get()))
        .or_else(|_| runtime.block_on(holder.call(get())));
    assert_eq!(kept, Ok(Reply::Bulk("holder".into())));
    // The model restarted from its snapshot: the subscription is gone there too.
    let snapshot = model.borrow().snapshot();
    *model.borrow_mut() = RedisModel::restore(snapshot);
    assert_eq!(
        both("lost"),
        Reply::Int(0),
        "a subscription does not survive its server's process"
    );
    // The subscriber learns that its connection broke when it next reads: it reconnects and
    // subscribes again; "lost" never comes, what is published after does.
    let reconnected = runtime.block_on(async {
        let read = waiter.next_message("ch");
        tokio::pin!(read);
        for _ in 0..50 {
            tokio::select! {
                message = &mut read => return Some(message),
                () = tokio::time::sleep(Duration::from_millis(100)) => {}
            }
            // Until the subscriber is back, PUBLISH reaches nobody.
            let _ = holder.call(publish("again")).await;
        }
        None
    });
    let message = reconnected.expect("the subscriber came back within 5 s");
    assert_eq!(message, "again");
    drop(launcher);
}

/// A key nobody reads is removed by Redis's active expiry cycle, which `serverCron` runs every
/// 100 ms (`hz` 10) on a grid set by the process's start, not at the key's deadline: twelve keys
/// whose deadlines are 37 ms apart (so at every phase of 100 ms) are each told expired
/// (keyspace notification `expired`) on one 100 ms grid. The simulated server expires unread
/// keys at the same cycle (`next_cycle` in `sim/src/redis/node.rs`, from its own start).
/// Asserted: every notification's time, modulo 100 ms, lies within half the cycle of the
/// first's (expiring at the deadlines would spread them over the whole cycle, 85 ms for these
/// deadlines), a margin for the machine's delays of 50 ms; the spread measured on an idle
/// machine is printed.
#[test]
fn a_real_server_expires_unread_keys_on_its_cycle_not_at_their_deadlines() {
    use futures_util::StreamExt;
    if !servers_installed() {
        return;
    }
    let (runtime, launcher, index) = started(Persistence::None);
    let addr = launcher.borrow().addr(index);
    const KEYS: u64 = 12;
    let arrivals = runtime.block_on(async {
        let client = redis::Client::open(format!("redis://{addr}")).unwrap();
        let mut conn = client.get_multiplexed_async_connection().await.unwrap();
        let _: () = redis::cmd("CONFIG")
            .arg("SET")
            .arg("notify-keyspace-events")
            .arg("Ex")
            .query_async(&mut conn)
            .await
            .unwrap();
        let mut pubsub = client.get_async_pubsub().await.unwrap();
        pubsub.subscribe("__keyevent@0__:expired").await.unwrap();
        for i in 0..KEYS {
            let _: () = redis::cmd("SET")
                .arg(format!("k{i}"))
                .arg("v")
                .arg("PX")
                .arg(300 + i * 37)
                .query_async(&mut conn)
                .await
                .unwrap();
        }
        let mut messages = pubsub.on_message();
        let mut arrivals = Vec::new();
        while arrivals.len() < KEYS as usize {
            let next = tokio::time::timeout(Duration::from_secs(5), messages.next()).await;
            let message = next
                .expect("an expiry is told within 5 s")
                .expect("the subscription stays open");
            let key: String = message.get_payload().unwrap();
            arrivals.push((key, std::time::Instant::now()));
        }
        arrivals
    });
    let first = arrivals[0].1;
    let phases: Vec<u64> = arrivals
        .iter()
        .map(|(_, at)| (at.duration_since(first).as_micros() as u64) % 100_000)
        .collect();
    // Circular distance from the first's phase (0), in µs.
    let off: Vec<u64> = phases.iter().map(|&p| p.min(100_000 - p)).collect();
    let widest = off.iter().copied().max().unwrap();
    println!("expiry notifications' distance from one 100 ms grid: at most {widest} µs");
    assert!(
        widest < 50_000,
        "the expiries are not on one 100 ms grid: {arrivals:?}, phases {phases:?} µs"
    );
}

/// The commands lock scripts use (issue 39, item 4), one case each: a short command sequence
/// sent as argument vectors, exactly as a script's `redis.call` passes them, to the model (through
/// the simulator's parser) and to redis-server, every reply compared. `{k}`, `{h}`, … name keys
/// of the case's own; `{ms+N}` is the wall clock N ms after the command is sent, `{s+N}` the
/// same in seconds (for `PXAT`, `EXPIREAT`, …). A line `EVAL|source|numkeys|keys…|args…` is a
/// script.
///
/// Leases are seconds long and no command is sent near a deadline, so replies agree exactly but
/// for remaining times, which must lie between the model's at both ends of the command's round
/// trip (as in [`Sequence::step`]). Errors agree word for word (the parser answers with Redis's
/// own texts), except those raised inside a script, which 7.0 and 7.2 word differently (see the
/// module's notes) and are compared by class. `TIME` must lie within the round trip.
const COMMAND_CASES: &[(&str, &[&str])] = &[
    (
        "SETNX",
        &[
            "SETNX {k} a",
            "SETNX {k} b",
            "GET {k}",
            "HSET {h} f v",
            "SETNX {h} x",
            "SETNX {k}",
        ],
    ),
    (
        "SETEX and PSETEX",
        &[
            "SETEX {k} 100 v",
            "TTL {k}",
            "PTTL {k}",
            "PSETEX {k} 5000 w",
            "PTTL {k}",
            "GET {k}",
            "SETEX {k} 0 v",
            "PSETEX {k} -1 v",
            "SETEX {k} x v",
            "SETEX {k} 9223372036854775 v",
            "SETEX {k} 10",
            "HSET {h} f v",
            "SETEX {h} 10 v",
            "TTL {h}",
        ],
    ),
    (
        "TTL and PTTL",
        &[
            "TTL {k}",
            "PTTL {k}",
            "SET {k} v",
            "TTL {k}",
            "PTTL {k}",
            "SET {k} v PX 2600",
            "TTL {k}",
            "PTTL {k}",
            "SET {k} v EX 3",
            "TTL {k}",
            "TTL {k} x",
        ],
    ),
    (
        "EXPIRE and PEXPIRE with NX, XX, GT, LT",
        &[
            "SET {k} v",
            "EXPIRE {k} 100 XX",
            "EXPIRE {k} 100 GT",
            "TTL {k}",
            "EXPIRE {k} 100 LT",
            "TTL {k}",
            "EXPIRE {k} 200 NX",
            "EXPIRE {k} 50 GT",
            "EXPIRE {k} 300 xx gt",
            "TTL {k}",
            "PEXPIRE {k} 5000 LT",
            "PTTL {k}",
            "PEXPIRE {k} 9000 LT",
            "EXPIRE {k} 1 NX XX",
            "EXPIRE {k} 1 NX GT",
            "EXPIRE {k} 1 GT LT",
            "EXPIRE {k} 1 FOO",
            "EXPIRE {k} abc NX",
            "EXPIRE {k} abc FOO",
            "PEXPIRE {k} 9223372036854775807 XX",
            "EXPIRE {k} 9223372036854776 GT",
            "PEXPIRE {none} 100 NX",
            "EXPIRE {none} -1 LT",
            "EXPIRE {k} -1 GT",
            "EXISTS {k}",
            "EXPIRE {k} -1 LT",
            "EXISTS {k}",
            "SET {k} v",
            "PEXPIRE {k} 0 NX",
            "EXISTS {k}",
            "SET {k} v",
            "EXPIRE {k} 100",
            "EXPIRE {k} 0 XX",
            "EXISTS {k}",
            "RPUSH {l} a",
            "EXPIRE {l} 100 NX",
            "TTL {l}",
            "EXPIRE {k}",
        ],
    ),
    (
        "EXPIREAT and PEXPIREAT",
        &[
            "SET {k} v",
            "PEXPIREAT {k} {ms+5000}",
            "PTTL {k}",
            "EXPIREAT {k} {s+100}",
            "TTL {k}",
            "EXPIREAT {k} {s+10} GT",
            "PEXPIREAT {k} {ms+5000} LT",
            "PTTL {k}",
            "PEXPIREAT {k} {ms+5000} NX",
            "PEXPIREAT {k} 1",
            "EXISTS {k}",
            "EXPIREAT {k} 1",
            "SET {k} v",
            "EXPIREAT {k} 0",
            "EXISTS {k}",
            "SET {k} v",
            "EXPIREAT {k} 9223372036854775807",
            "PEXPIREAT {k} 9223372036854775807",
            "TTL {k}",
            "PEXPIREAT {k} -5 XX",
            "EXISTS {k}",
        ],
    ),
    (
        "PERSIST",
        &[
            "PERSIST {k}",
            "SET {k} v",
            "PERSIST {k}",
            "EXPIRE {k} 100",
            "PERSIST {k}",
            "TTL {k}",
        ],
    ),
    (
        "GETSET",
        &[
            "GETSET {k} a",
            "SET {k} b PX 5000",
            "GETSET {k} c",
            "PTTL {k}",
            "GET {k}",
            "HSET {h} f v",
            "GETSET {h} x",
            "GETSET {k}",
        ],
    ),
    (
        "GETDEL",
        &[
            "GETDEL {k}",
            "SET {k} v PX 5000",
            "GETDEL {k}",
            "EXISTS {k}",
            "HSET {h} f v",
            "GETDEL {h}",
            "EXISTS {h}",
            "GETDEL {k} {h}",
        ],
    ),
    (
        "UNLINK",
        &[
            "SET {k} v",
            "RPUSH {l} a",
            "UNLINK {k} {l} {k} {none}",
            "EXISTS {k}",
            "EXISTS {l}",
            "UNLINK {k}",
            "UNLINK",
        ],
    ),
    (
        "SET with XX, GET, KEEPTTL, EXAT, PXAT",
        &[
            "SET {k} v XX",
            "SET {k} v",
            "SET {k} w XX GET",
            "SET {k} x PX 5000",
            "SET {k} y KEEPTTL",
            "PTTL {k}",
            "SET {k} z KEEPTTL GET",
            "PTTL {k}",
            "SET {k} a EXAT {s+100}",
            "TTL {k}",
            "SET {k} b PXAT {ms+5000}",
            "PTTL {k}",
            "SET {k} c PXAT 1",
            "GET {k}",
            "EXISTS {k}",
            "SET {k} c EXAT 1 GET",
            "SET {k} v KEEPTTL PX 100",
            "SET {k} v PX 100 KEEPTTL",
            "SET {k} v EX 1 PX 1",
            "SET {k} v PX 1 PXAT 1",
            "SET {k} v PX 1 PX 5000",
            "PTTL {k}",
            "SET {k} v NX NX",
            "SET {k} v NX XX",
            "SET {k} v EXAT 0",
            "SET {k} v PXAT -1",
            "SET {k} v PX abc FOO",
            "SET {k} v PX abc",
            "SET {k} v EX 9223372036854776",
            "SET {k} v EX 9223372036854775",
            "SET {k} v PX",
            "HSET {h} f v",
            "PEXPIRE {h} 5000",
            "SET {h} v KEEPTTL",
            "PTTL {h}",
            "SET {none} v KEEPTTL",
            "PTTL {none}",
        ],
    ),
    (
        "INCR, INCRBY, DECR, DECRBY",
        &[
            "INCR {n}",
            "INCRBY {n} 5",
            "DECR {n}",
            "DECRBY {n} 10",
            "INCRBY {n} -4",
            "DECRBY {n} -9223372036854775808",
            "DECRBY {n} -3",
            "SET {n} 9223372036854775807",
            "INCR {n}",
            "INCRBY {n} 1",
            "DECRBY {n} -1",
            "SET {n} -9223372036854775808",
            "DECR {n}",
            "INCRBY {n} -1",
            "INCRBY {n} 9223372036854775807",
            "INCRBY {n} 1.5",
            "DECRBY {n} x",
            "SET {n} abc",
            "DECR {n}",
            "SET {n} 01",
            "INCRBY {n} 1",
            "HSET {h} f v",
            "DECR {h}",
            "INCRBY {h} 1",
            "SET {n} 3 PX 5000",
            "DECR {n}",
            "PTTL {n}",
            "INCRBY {n}",
        ],
    ),
    (
        "hashes",
        &[
            "HSET {h} a 1 b 2",
            "HSET {h} a 3 c 4",
            "HGET {h} a",
            "HGET {h} z",
            "HGET {none} a",
            "HINCRBY {h} a 2",
            "HINCRBY {h} z -1",
            "HINCRBY {h} a x",
            "HSET {h} s abc",
            "HINCRBY {h} s 1",
            "HSET {h} big 9223372036854775807",
            "HINCRBY {h} big 1",
            "HEXISTS {h} a",
            "HEXISTS {h} q",
            "HEXISTS {none} a",
            "HLEN {h}",
            "HLEN {none}",
            "HGETALL {h}",
            "HGETALL {none}",
            "HDEL {h} a q a",
            "HDEL {h} b c z s big",
            "EXISTS {h}",
            "HSET {h} f",
            "HDEL {h}",
            "SET {k} v",
            "HGET {k} f",
            "HSET {k} f v",
            "HGETALL {k}",
        ],
    ),
    (
        "lists",
        &[
            "RPUSH {l} a b c",
            "LPUSH {l} z y",
            "LRANGE {l} 0 -1",
            "LRANGE {l} -2 100",
            "LRANGE {l} 3 1",
            "LINDEX {l} 0",
            "LINDEX {l} -1",
            "LINDEX {l} 10",
            "LLEN {l}",
            "LLEN {none}",
            "LPOP {l}",
            "RPOP {l}",
            "LPOP {l} 2",
            "RPOP {l} 0",
            "RPUSH {l} x b x b x",
            "LREM {l} 2 x",
            "LREM {l} -1 b",
            "LRANGE {l} 0 -1",
            "LREM {l} 0 b",
            "LREM {l} 0 nope",
            "LPOP {l} -1",
            "LPOP {none}",
            "LPOP {none} 1",
            "RPOP {l} 5",
            "EXISTS {l}",
            "LPUSH {l}",
            "SET {k} v",
            "LPUSH {k} a",
            "LRANGE {k} 0 -1",
        ],
    ),
    (
        "sorted sets",
        &[
            "ZADD {z} 1 a 2 b 3 c",
            "ZADD {z} 2.5 a 4 d",
            "ZSCORE {z} a",
            "ZSCORE {z} x",
            "ZCARD {z}",
            "ZCARD {none}",
            "ZRANGE {z} 0 -1 WITHSCORES",
            "ZRANGE {z} 1 2",
            "ZRANGE {z} -2 -1",
            "ZRANGEBYSCORE {z} (2 +inf",
            "ZRANGEBYSCORE {z} -inf 2.5 WITHSCORES",
            "ZRANGEBYSCORE {z} (2.5 (3",
            "ZREM {z} b x",
            "ZREMRANGEBYSCORE {z} (2.5 3",
            "ZRANGE {z} 0 -1",
            "ZREMRANGEBYSCORE {z} x 1",
            "ZREMRANGEBYSCORE {z} 5 1",
            "ZREMRANGEBYSCORE {none} -inf +inf",
            "ZREMRANGEBYSCORE {z} -inf +inf",
            "EXISTS {z}",
            "ZADD {z} nan a",
            "ZADD {z} 1",
            "ZREMRANGEBYSCORE {z} 1",
            "SET {k} v",
            "ZREMRANGEBYSCORE {k} -inf +inf",
            "ZADD {k} 1 a",
        ],
    ),
    ("PUBLISH", &["PUBLISH {k} hello", "PUBLISH {k}"]),
    ("TIME", &["TIME", "TIME x"]),
    (
        "the commands from a script",
        &[
            "EVAL|return redis.call('SETNX', KEYS[1], ARGV[1])|1|{k}|a",
            "EVAL|return redis.call('GETSET', KEYS[1], ARGV[1])|1|{k}|b",
            "EVAL|return redis.call('PEXPIRE', KEYS[1], ARGV[1], 'NX')|1|{k}|5000",
            "EVAL|return redis.call('TTL', KEYS[1])|1|{k}",
            "EVAL|return redis.call('GETDEL', KEYS[1])|1|{k}",
            "EVAL|return redis.call('INCRBY', KEYS[1], 7)|1|{n}",
            "EVAL|return redis.call('DECRBY', KEYS[1], 2)|1|{n}",
            "EVAL|local t = redis.call('TIME') return #t|0",
            "EVAL|return redis.pcall('SETEX', KEYS[1], 0, 'v')|1|{k}",
            "EVAL|return redis.call('UNLINK', KEYS[1], KEYS[2])|2|{k}|{n}",
            "EVAL|return redis.call('ZADD', KEYS[1], 1, 'a', 2, 'b') + redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', 1)|1|{z}",
        ],
    ),
    (
        "the bit library and the redis helpers",
        &[
            "EVAL|return {bit.band(5, 3), bit.bor(1, 2, 4, 8), bit.bxor(7, 2), bit.bnot(0), bit.tobit(0xffffffff), bit.tobit(2^32 + 5)}|0",
            "EVAL|return {tostring(bit.tobit(2.5)), tostring(bit.tobit(3.5)), tostring(bit.tobit(-1.5)), tostring(bit.tobit('12'))}|0",
            "EVAL|return {bit.lshift(1, 31), bit.lshift(1, 33), bit.rshift(-1, 28), bit.arshift(-16, 2), bit.rol(0x80000001, 1), bit.ror(1, 1), bit.bswap(0x12345678)}|0",
            "EVAL|return {bit.tohex(255), bit.tohex(-1, -4), bit.tohex(0x12345678, 12), bit.tohex(1, 0)}|0",
            "EVAL|return bit.tohex(bit.bxor(tonumber(ARGV[1]), 0x5bd1e995))|0|123456789",
            "EVAL|return bit.band(1, {})|0",
            "EVAL|return bit.bnot()|0",
            "EVAL|bit.band = nil|0",
            "EVAL|return {redis.sha1hex('x'), redis.sha1hex(''), type(cjson), redis.LOG_WARNING}|0",
            "EVAL|redis.log(redis.LOG_WARNING, 'from a conformance case') return redis.replicate_commands()|0",
        ],
    ),
];

/// One line of a [`COMMAND_CASES`] case with its keys and times filled in: the argument vector
/// for the real server and the command for the model (a parse error is the model's reply).
fn case_line(line: &str, case: usize, now: u64) -> (Vec<String>, Result<Command, Reply>) {
    let fill = |word: &str| -> String {
        let mut word = word.to_string();
        for name in ["k", "h", "l", "z", "n", "none"] {
            word = word.replace(&format!("{{{name}}}"), &format!("cmd{case}:{name}"));
        }
        if let Some(rest) = word.strip_prefix("{ms+") {
            let n: u64 = rest.trim_end_matches('}').parse().unwrap();
            return (now + n).to_string();
        }
        if let Some(rest) = word.strip_prefix("{s+") {
            let n: u64 = rest.trim_end_matches('}').parse().unwrap();
            return (now / 1000 + n).to_string();
        }
        word
    };
    if let Some(script) = line.strip_prefix("EVAL|") {
        let parts: Vec<&str> = script.split('|').collect();
        let source = parts[0];
        let numkeys: usize = parts[1].parse().unwrap();
        let rest: Vec<String> = parts[2..].iter().map(|w| fill(w)).collect();
        let (keys, args) = rest.split_at(numkeys);
        let mut argv = vec!["EVAL".to_string(), source.to_string(), numkeys.to_string()];
        argv.extend(rest.iter().cloned());
        let command = Command::Eval {
            script: Script::new(source),
            keys: keys.to_vec(),
            args: args.to_vec(),
        };
        return (argv, Ok(command));
    }
    let argv: Vec<String> = line.split(' ').map(fill).collect();
    let command = match lockcheck_sim::redis::parse::parse_command(&argv) {
        Ok(command) => Ok(command),
        Err(lockcheck_sim::redis::parse::ParseError::Redis(text)) => Err(Reply::Error(text)),
        Err(refused) => panic!("{line}: {refused}"),
    };
    (argv, command)
}

/// `argv` sent to the real server as it is.
async fn send_raw(
    conn: &mut redis::aio::MultiplexedConnection,
    argv: &[String],
) -> Result<Reply, redis::RedisError> {
    let mut cmd = redis::cmd(&argv[0]);
    for arg in &argv[1..] {
        cmd.arg(arg);
    }
    match conn.send_packed_command(&cmd).await {
        Ok(value) => Ok(lockcheck_real::redis_store::reply_of(value)),
        Err(e) if e.code().is_some() => Ok(Reply::Error(match (e.code(), e.detail()) {
            (Some(code), Some(detail)) => format!("{code} {detail}"),
            _ => e.code().unwrap_or("ERR").to_string(),
        })),
        Err(e) => Err(e),
    }
}

/// `TIME`'s reply in µs, if it is one.
fn time_us(reply: &Reply) -> Option<u64> {
    let Reply::Array(items) = reply else {
        return None;
    };
    match items.as_slice() {
        [Reply::Bulk(s), Reply::Bulk(us)] => {
            Some(s.parse::<u64>().ok()? * 1_000_000 + us.parse::<u64>().ok()?)
        }
        _ => None,
    }
}

/// Whether `real` agrees with the model's `early` and `late` replies: as [`agrees`], but errors
/// word for word (unless `by_class`).
fn agrees_exactly(early: &Reply, late: &Reply, real: &Reply, by_class: bool) -> bool {
    match (early, late, real) {
        (Reply::Error(e), Reply::Error(l), Reply::Error(r)) if !by_class => e == r && l == r,
        (Reply::Array(e), Reply::Array(l), Reply::Array(r)) => {
            e.len() == r.len()
                && l.len() == r.len()
                && e.iter()
                    .zip(l)
                    .zip(r)
                    .all(|((e, l), r)| agrees_exactly(e, l, r, by_class))
        }
        _ => agrees(early, late, real),
    }
}

#[test]
fn the_simulated_redis_answers_the_commands_lock_scripts_use_as_redis_does() {
    if !servers_installed() {
        return;
    }
    let (runtime, launcher, index) = started(Persistence::None);
    let addr = launcher.borrow().addr(index);
    let mut conn = runtime.block_on(async {
        let client = redis::Client::open(format!("redis://{addr}")).unwrap();
        client.get_multiplexed_async_connection().await.unwrap()
    });
    let mut disagreements = Vec::new();
    let mut compared = 0;
    for (case, (name, lines)) in COMMAND_CASES.iter().enumerate() {
        let mut model = RedisModel::new();
        let mut skew = 0;
        for line in *lines {
            let t0 = now_ms();
            let (argv, command) = case_line(line, case, t0);
            let got = runtime
                .block_on(send_raw(&mut conn, &argv))
                .unwrap_or_else(|e| panic!("{name}: {line}: the real server failed: {e}"));
            let t1 = now_ms();
            let (lo, hi) = (t0.saturating_sub(skew + 1), t1 + 1);
            skew = skew.max(t1 - t0);
            let (early, late) = match &command {
                Err(reply) => (reply.clone(), reply.clone()),
                Ok(command) => {
                    let at = |now| {
                        RedisModel::restore(model.snapshot()).apply(command, now, &mut Vec::new())
                    };
                    let replies = (at(lo), at(hi));
                    model.apply(command, t0, &mut Vec::new());
                    replies
                }
            };
            compared += 1;
            let agree = if argv[0] == "TIME" && argv.len() == 1 {
                time_us(&got).is_some_and(|us| (lo * 1000..(hi + 1) * 1000).contains(&us))
                    && time_us(&early).is_some()
            } else {
                agrees_exactly(&early, &late, &got, argv[0] == "EVAL")
            };
            if !agree {
                disagreements.push(format!(
                    "{name}: {line}\n  model: {early:?} .. {late:?}\n  real:  {got:?}"
                ));
            }
        }
    }
    drop(launcher);
    assert!(
        disagreements.is_empty(),
        "the model and redis-server disagree:\n{}",
        disagreements.join("\n")
    );
    let _ = writeln!(
        std::io::stderr().lock(),
        "redis conformance: {compared} commands of {} cases compared",
        COMMAND_CASES.len()
    );
}
