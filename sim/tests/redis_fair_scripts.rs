//! `redis-fair` against the simulated server: its scripts one by one (driven through
//! `RedisModel::apply`), then the client through the `Lock` trait on the manual-clock executor
//! of `common`.

mod common;

use common::{block_on, run_all, Clock, Manual, Task, EPOCH_MS};
use lockcheck_algorithms::redis::command::{Command, Reply, Script};
use lockcheck_algorithms::redis::fair::{
    FairConfig, RedisFair, ACQUIRE_LUA, FORCE_UNLOCK_LUA, LEAVE_QUEUE_LUA, RELEASE_LUA, RENEW_LUA,
    TRY_ACQUIRE_LUA,
};
use lockcheck_algorithms::redis::RedisStore;
use lockcheck_algorithms::LockEvent;
use lockcheck_algorithms::{Env, Guard, Lock, StoreError};
use lockcheck_sim::redis::RedisModel;
use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, VecDeque};
use std::rc::Rc;
use std::time::Duration;

/// Wall-clock origin of every test, in ms since the epoch: deadlines are absolute wall times.
const LEASE_MS: u64 = 1_000;
const WAIT_MS: u64 = 300;

fn config() -> FairConfig {
    FairConfig {
        key: "lock".into(),
        ttl: Duration::from_millis(LEASE_MS),
        drift_factor: 0.01,
        retry_delay: Duration::from_millis(50),
        retry_count: None,
        max_retry_delay: Duration::from_millis(50),
        wait_timeout: Duration::from_millis(WAIT_MS),
    }
}

// ---------------------------------------------------------------------------------------------
// The scripts, one call at a time. Times are ms after EPOCH_MS, on one clock shared by the server
// and (unless a test says otherwise) every client.

struct Server {
    model: RedisModel,
    config: FairConfig,
}

impl Server {
    fn new() -> Self {
        Server {
            model: RedisModel::new(),
            config: config(),
        }
    }

    fn run(&mut self, command: Command, at: u64) -> Reply {
        self.model.apply(&command, EPOCH_MS + at, &mut Vec::new())
    }

    fn eval(&mut self, source: &str, keys: Vec<String>, args: Vec<String>, at: u64) -> Reply {
        let script = Script::new(source);
        self.run(Command::Eval { script, keys, args }, at)
    }

    fn lock_keys(&self) -> Vec<String> {
        vec![
            self.config.key.clone(),
            self.config.queue_key(),
            self.config.timeout_key(),
        ]
    }

    /// The acquire-or-wait script, with `owner`'s clock reading `at + skew`.
    fn acquire_skewed(&mut self, owner: &str, at: u64, skew: u64) -> Reply {
        let args = vec![
            LEASE_MS.to_string(),
            owner.into(),
            WAIT_MS.to_string(),
            (EPOCH_MS + at + skew).to_string(),
        ];
        self.eval(ACQUIRE_LUA, self.lock_keys(), args, at)
    }

    fn acquire(&mut self, owner: &str, at: u64) -> Reply {
        self.acquire_skewed(owner, at, 0)
    }

    fn try_acquire(&mut self, owner: &str, at: u64) -> Reply {
        let args = vec![
            LEASE_MS.to_string(),
            owner.into(),
            (EPOCH_MS + at).to_string(),
        ];
        self.eval(TRY_ACQUIRE_LUA, self.lock_keys(), args, at)
    }

    fn release(&mut self, owner: &str, at: u64) -> Reply {
        let mut keys = self.lock_keys();
        keys.push(self.config.channel_prefix());
        let args = vec![
            "0".into(),
            LEASE_MS.to_string(),
            owner.into(),
            (EPOCH_MS + at).to_string(),
        ];
        self.eval(RELEASE_LUA, keys, args, at)
    }

    fn renew(&mut self, owner: &str, at: u64) -> Reply {
        let keys = vec![self.config.key.clone()];
        self.eval(
            RENEW_LUA,
            keys,
            vec![LEASE_MS.to_string(), owner.into()],
            at,
        )
    }

    fn force_unlock(&mut self, at: u64) -> Reply {
        let keys = vec![
            self.config.key.clone(),
            self.config.queue_key(),
            self.config.channel_prefix(),
        ];
        self.eval(FORCE_UNLOCK_LUA, keys, vec!["0".into()], at)
    }

    fn leave(&mut self, owner: &str, at: u64) -> Reply {
        let keys = vec![self.config.queue_key(), self.config.timeout_key()];
        self.eval(LEAVE_QUEUE_LUA, keys, vec![owner.into()], at)
    }

    /// The owners in the queue, head first.
    fn queue(&mut self, at: u64) -> Vec<String> {
        let key = self.config.queue_key();
        strings(self.run(
            Command::LRange {
                key,
                start: 0,
                stop: -1,
            },
            at,
        ))
    }

    /// The waiters' deadlines, earliest first, in ms after EPOCH_MS.
    fn deadlines(&mut self, at: u64) -> Vec<(String, u64)> {
        let key = self.config.timeout_key();
        let flat = strings(self.run(
            Command::ZRange {
                key,
                start: 0,
                stop: -1,
                with_scores: true,
            },
            at,
        ));
        flat.chunks(2)
            .map(|pair| (pair[0].clone(), pair[1].parse::<u64>().unwrap() - EPOCH_MS))
            .collect()
    }

    /// The lock hash: `(owner, count)` pairs.
    fn holders(&mut self, at: u64) -> Vec<(String, String)> {
        let key = self.config.key.clone();
        let flat = strings(self.run(Command::HGetAll { key }, at));
        flat.chunks(2)
            .map(|pair| (pair[0].clone(), pair[1].clone()))
            .collect()
    }

    fn holder(&mut self, at: u64) -> Option<String> {
        let holders = self.holders(at);
        assert!(holders.len() <= 1, "two owners in the hash: {holders:?}");
        holders.into_iter().next().map(|(owner, _)| owner)
    }

    fn exists(&mut self, key: String, at: u64) -> bool {
        self.run(Command::Exists { key }, at) == Reply::Int(1)
    }
}

fn strings(reply: Reply) -> Vec<String> {
    match reply {
        Reply::Array(items) => items
            .into_iter()
            .map(|item| match item {
                Reply::Bulk(s) => s,
                other => panic!("not a bulk string: {other:?}"),
            })
            .collect(),
        other => panic!("not an array: {other:?}"),
    }
}

fn busy(reply: &Reply) -> bool {
    matches!(reply, Reply::Int(_))
}

fn owners(names: &[&str]) -> Vec<String> {
    names.iter().map(|s| s.to_string()).collect()
}

#[test]
fn waiters_are_granted_in_fifo_order() {
    let mut s = Server::new();
    assert_eq!(s.acquire("A", 0), Reply::Nil);
    for (at, owner) in [(1, "B"), (2, "C"), (3, "D")] {
        assert_eq!(s.acquire(owner, at), Reply::Int((LEASE_MS - at) as i64));
    }
    assert_eq!(s.queue(4), owners(&["B", "C", "D"]));
    assert_eq!(
        s.deadlines(4),
        vec![
            ("B".into(), 1 + WAIT_MS),
            ("C".into(), 2 + WAIT_MS),
            ("D".into(), 3 + WAIT_MS)
        ]
    );

    assert_eq!(s.release("A", 10), Reply::Int(1));
    // The lock is free, but only the head may take it: the others keep their places.
    assert_eq!(s.acquire("D", 11), Reply::Int(-2));
    assert_eq!(s.acquire("C", 12), Reply::Int(-2));
    assert_eq!(s.holder(12), None);
    assert_eq!(s.queue(12), owners(&["B", "C", "D"]));
    assert_eq!(s.acquire("B", 13), Reply::Nil);
    assert_eq!(s.holder(13).as_deref(), Some("B"));
    assert_eq!(s.queue(13), owners(&["C", "D"]));
    // The polls reset the deadlines: D's is now the earlier one, which does not reorder the queue.
    assert_eq!(
        s.deadlines(13),
        vec![("D".into(), 11 + WAIT_MS), ("C".into(), 12 + WAIT_MS)]
    );

    assert_eq!(s.release("B", 20), Reply::Int(1));
    assert!(busy(&s.acquire("D", 21)));
    assert_eq!(s.acquire("C", 22), Reply::Nil);
    assert_eq!(s.release("C", 30), Reply::Int(1));
    assert_eq!(s.acquire("D", 31), Reply::Nil);
    // The last grant leaves neither a queue nor a deadline behind.
    assert!(!s.exists(s.config.queue_key(), 31));
    assert!(!s.exists(s.config.timeout_key(), 31));
}

#[test]
fn a_waiter_past_its_deadline_is_purged_and_the_next_is_granted() {
    let mut s = Server::new();
    assert_eq!(s.acquire("A", 0), Reply::Nil);
    assert!(busy(&s.acquire("B", 0)));
    assert!(busy(&s.acquire("C", 100)));
    assert!(busy(&s.acquire("C", 250)));
    assert_eq!(s.release("A", 260), Reply::Int(1));
    // B never polled again: at 299 its place is still kept, at 300 (= 0 + WAIT_MS) it is gone.
    assert_eq!(s.acquire("C", 299), Reply::Int(-2));
    assert_eq!(s.acquire("C", WAIT_MS), Reply::Nil);
    assert_eq!(s.holder(WAIT_MS).as_deref(), Some("C"));
    assert!(!s.exists(s.config.timeout_key(), WAIT_MS));
    // B comes back: it queues again, at the tail.
    assert!(busy(&s.acquire("B", 310)));
    assert_eq!(s.queue(310), owners(&["B"]));
}

#[test]
fn a_waiter_that_keeps_polling_keeps_its_place() {
    let mut s = Server::new();
    assert_eq!(s.acquire("A", 0), Reply::Nil);
    assert!(busy(&s.acquire("B", 0)));
    assert!(busy(&s.acquire("C", 10)));
    // B polls every 200 ms, well past its first deadline; A renews.
    for at in [200, 400, 600, 800] {
        assert!(busy(&s.acquire("B", at)));
        assert!(busy(&s.acquire("C", at + 10)));
        assert_eq!(s.renew("A", at + 20), Reply::Int(1));
    }
    assert_eq!(s.deadlines(810)[0], ("B".into(), 800 + WAIT_MS));
    assert_eq!(s.release("A", 900), Reply::Int(1));
    assert_eq!(s.acquire("C", 901), Reply::Int(-2));
    assert_eq!(s.acquire("B", 902), Reply::Nil);
}

#[test]
fn a_new_waiter_is_never_due_before_the_one_ahead() {
    let mut s = Server::new();
    assert_eq!(s.acquire("A", 0), Reply::Nil);
    // B's clock is 100 ms ahead, C's is not: C's deadline is raised to B's.
    assert!(busy(&s.acquire_skewed("B", 0, 100)));
    assert!(busy(&s.acquire("C", 50)));
    assert_eq!(
        s.deadlines(60),
        vec![("B".into(), 100 + WAIT_MS), ("C".into(), 100 + WAIT_MS)]
    );
    // Its next poll resets it to its own clock's view.
    assert!(busy(&s.acquire("C", 60)));
    assert_eq!(s.deadlines(60)[0], ("C".into(), 60 + WAIT_MS));
}

#[test]
fn a_client_clock_ahead_drops_live_waiters() {
    // The known weakness of Redisson's design: deadlines are judged by the caller's wall clock.
    let mut s = Server::new();
    assert_eq!(s.acquire("A", 0), Reply::Nil);
    assert!(busy(&s.acquire("B", 0)));
    assert!(busy(&s.acquire("C", 1)));
    assert_eq!(s.release("A", 10), Reply::Int(1));
    // D's clock runs WAIT_MS ahead: B and C, both polling on time, are dropped and D overtakes.
    assert_eq!(s.acquire_skewed("D", 11, WAIT_MS), Reply::Nil);
    assert_eq!(s.holder(11).as_deref(), Some("D"));
    assert!(s.queue(11).is_empty());
}

#[test]
fn try_acquire_never_enqueues_and_fails_while_anyone_waits() {
    let mut s = Server::new();
    assert_eq!(s.try_acquire("A", 0), Reply::Nil);
    assert_eq!(s.try_acquire("B", 1), Reply::Int((LEASE_MS - 1) as i64));
    assert!(!s.exists(s.config.queue_key(), 1));
    assert!(!s.exists(s.config.timeout_key(), 1));

    assert!(busy(&s.acquire("B", 2)));
    assert_eq!(s.release("A", 3), Reply::Int(1));
    // Free, but B waits: C's try fails and leaves no trace.
    assert_eq!(s.try_acquire("C", 4), Reply::Int(-2));
    assert_eq!(s.queue(4), owners(&["B"]));
    // The head itself may take it with a try.
    assert_eq!(s.try_acquire("B", 5), Reply::Nil);
    assert!(!s.exists(s.config.queue_key(), 5));
    // A try re-enters a lock the caller holds.
    assert_eq!(s.try_acquire("B", 6), Reply::Nil);
    assert_eq!(s.holders(6), vec![("B".into(), "2".into())]);
    // Expired waiters do not block a try.
    assert!(busy(&s.acquire("C", 7)));
    assert_eq!(s.release("B", 8), Reply::Int(0));
    assert_eq!(s.release("B", 9), Reply::Int(1));
    assert_eq!(s.try_acquire("D", 7 + WAIT_MS), Reply::Nil);
}

#[test]
fn reentrant_count_goes_up_and_down_and_the_key_goes_at_zero() {
    let mut s = Server::new();
    assert_eq!(s.acquire("A", 0), Reply::Nil);
    assert_eq!(s.acquire("A", 1), Reply::Nil);
    assert_eq!(s.try_acquire("A", 2), Reply::Nil);
    assert_eq!(s.holders(2), vec![("A".into(), "3".into())]);
    // Someone else's release does nothing.
    assert_eq!(s.release("B", 3), Reply::Nil);
    assert_eq!(s.holders(3), vec![("A".into(), "3".into())]);

    assert_eq!(s.release("A", 500), Reply::Int(0));
    // An inner release renews the lease.
    assert_eq!(
        s.run(Command::PTtl { key: "lock".into() }, 500),
        Reply::Int(LEASE_MS as i64)
    );
    assert_eq!(s.release("A", 501), Reply::Int(0));
    assert_eq!(s.holders(501), vec![("A".into(), "1".into())]);
    assert_eq!(s.release("A", 502), Reply::Int(1));
    assert!(!s.exists("lock".into(), 502));
    assert_eq!(s.release("A", 503), Reply::Nil);
}

#[test]
fn renewal_only_while_held() {
    let mut s = Server::new();
    assert_eq!(s.acquire("A", 0), Reply::Nil);
    assert_eq!(s.renew("B", 500), Reply::Int(0));
    assert_eq!(s.renew("A", 500), Reply::Int(1));
    let pttl = s.run(Command::PTtl { key: "lock".into() }, 600);
    assert_eq!(pttl, Reply::Int((LEASE_MS - 100) as i64));
    assert_eq!(s.release("A", 700), Reply::Int(1));
    assert_eq!(s.renew("A", 701), Reply::Int(0));
}

#[test]
fn an_expired_lease_frees_the_lock_for_the_head_only() {
    let mut s = Server::new();
    assert_eq!(s.acquire("A", 0), Reply::Nil);
    assert!(busy(&s.acquire("B", 900)));
    assert!(busy(&s.acquire("C", 950)));
    assert_eq!(s.acquire("C", LEASE_MS + 1), Reply::Int(-2));
    assert_eq!(s.acquire("B", LEASE_MS + 2), Reply::Nil);
    // A lost its lease: its release is refused.
    assert_eq!(s.release("A", LEASE_MS + 3), Reply::Nil);
    assert_eq!(s.holder(LEASE_MS + 3).as_deref(), Some("B"));
}

#[test]
fn force_unlock_frees_the_lock() {
    let mut s = Server::new();
    assert_eq!(s.acquire("A", 0), Reply::Nil);
    assert_eq!(s.acquire("A", 1), Reply::Nil);
    assert!(busy(&s.acquire("B", 2)));
    assert_eq!(s.force_unlock(3), Reply::Int(1));
    assert!(!s.exists("lock".into(), 3));
    // The queue is kept: the head takes the lock next.
    assert_eq!(s.queue(3), owners(&["B"]));
    assert_eq!(s.acquire("C", 4), Reply::Int(-2));
    assert_eq!(s.acquire("B", 5), Reply::Nil);
    assert_eq!(s.force_unlock(6), Reply::Int(1));
    assert_eq!(s.force_unlock(7), Reply::Int(0));
}

#[test]
fn leaving_removes_the_caller_from_queue_and_set() {
    let mut s = Server::new();
    assert_eq!(s.acquire("A", 0), Reply::Nil);
    for owner in ["B", "C", "D"] {
        assert!(busy(&s.acquire(owner, 1)));
    }
    assert_eq!(s.leave("C", 2), Reply::Int(1));
    assert_eq!(s.queue(2), owners(&["B", "D"]));
    assert_eq!(
        s.deadlines(2)
            .iter()
            .map(|d| d.0.clone())
            .collect::<Vec<_>>(),
        owners(&["B", "D"])
    );
    assert_eq!(s.leave("C", 3), Reply::Int(0));
    assert_eq!(s.leave("B", 4), Reply::Int(1));
    assert_eq!(s.leave("D", 5), Reply::Int(1));
    assert!(!s.exists(s.config.queue_key(), 5));
    assert!(!s.exists(s.config.timeout_key(), 5));
    assert_eq!(s.holder(5).as_deref(), Some("A"));
}

// ---------------------------------------------------------------------------------------------
// The client through the `Lock` trait, on the manual clock; `Env::sleep` is the only thing that
// waits here.

#[derive(Default)]
struct World {
    clock: Clock,
    model: RefCell<RedisModel>,
    /// Calls still to be applied and then answered with a timeout (a lost reply).
    lose_replies: Cell<u32>,
    /// The channels some waiter subscribed to, with what was published to each and not taken
    /// yet (one subscriber per channel: every waiter of a fair lock has its own).
    channels: RefCell<BTreeMap<String, VecDeque<String>>>,
    /// Every `(channel, message)` published, subscribed to or not.
    published: RefCell<Vec<(String, String)>>,
}

impl Manual for World {
    fn clock(&self) -> &Clock {
        &self.clock
    }
}

type Client = common::Client<World>;

impl World {
    fn run(&self, command: Command) -> Reply {
        let now = EPOCH_MS + self.clock.now.get();
        let mut model = self.model.borrow_mut();
        let reply = model.apply(&command, now, &mut Vec::new());
        for (channel, message) in model.take_published() {
            if let Some(queue) = self.channels.borrow_mut().get_mut(&channel) {
                queue.push_back(message.clone());
                self.clock.moved();
            }
            self.published.borrow_mut().push((channel, message));
        }
        reply
    }
}

struct Store(Rc<World>);

impl RedisStore for Store {
    async fn call(&self, command: Command) -> Result<Reply, StoreError> {
        let reply = self.0.run(command);
        let lost = self.0.lose_replies.get();
        if lost > 0 {
            self.0.lose_replies.set(lost - 1);
            return Err(StoreError::Timeout);
        }
        Ok(reply)
    }

    async fn subscribe(&self, channel: &str) -> Result<(), StoreError> {
        self.0
            .channels
            .borrow_mut()
            .insert(channel.into(), VecDeque::new());
        Ok(())
    }

    fn unsubscribe(&self, channel: &str) {
        self.0.channels.borrow_mut().remove(channel);
    }

    async fn next_message(&self, channel: &str) -> String {
        std::future::poll_fn(|_| {
            let mut channels = self.0.channels.borrow_mut();
            match channels.get_mut(channel).and_then(VecDeque::pop_front) {
                Some(message) => std::task::Poll::Ready(message),
                None => std::task::Poll::Pending,
            }
        })
        .await
    }
}

fn fair(world: &Rc<World>, owner: &str, config: FairConfig) -> RedisFair<Store> {
    RedisFair::new(Store(world.clone()), config, owner.into())
}

fn key_exists(world: &World, key: String) -> bool {
    world.run(Command::Exists { key }) == Reply::Int(1)
}

#[test]
fn blocking_acquires_are_granted_in_arrival_order() {
    let world = Rc::new(World::default());
    let names = ["A", "B", "C", "D", "E"];
    let grants = RefCell::new(Vec::<(&str, u64, u64)>::new());
    let tasks: Vec<Task<'_>> = names
        .iter()
        .enumerate()
        .map(|(i, &name)| {
            let world = world.clone();
            let grants = &grants;
            Box::pin(async move {
                let env = Client::new(&world, i as u64);
                let lock = fair(&world, name, config());
                // Arrive 5 ms apart; A holds long enough for everyone else to queue.
                env.sleep(Duration::from_millis(5 * i as u64)).await;
                let guard = lock
                    .acquire(&env, Duration::from_secs(10))
                    .await
                    .unwrap()
                    .expect("acquired within the wait");
                let start = world.clock.now.get();
                let hold = if i == 0 { 100 } else { 30 };
                env.sleep(Duration::from_millis(hold)).await;
                grants
                    .borrow_mut()
                    .push((name, start, world.clock.now.get()));
                assert!(lock.release(&env, &guard).await.unwrap());
            }) as Task<'_>
        })
        .collect();
    run_all(&world, tasks);

    let grants = grants.into_inner();
    let order: Vec<&str> = grants.iter().map(|g| g.0).collect();
    assert_eq!(order, names);
    for pair in grants.windows(2) {
        assert!(pair[0].2 <= pair[1].1, "overlapping holds: {pair:?}");
    }
    let config = config();
    assert!(!key_exists(&world, config.key.clone()));
    assert!(!key_exists(&world, config.queue_key()));
    assert!(!key_exists(&world, config.timeout_key()));
}

#[test]
fn giving_up_leaves_the_queue() {
    let world = Rc::new(World::default());
    let config = config();
    let a = Client::new(&world, 1);
    let b = Client::new(&world, 2);
    let holder = fair(&world, "A", config.clone());
    let guard = block_on(&world, holder.acquire(&a, Duration::ZERO)).unwrap();
    assert!(guard.is_some());

    // Out of time.
    let waiter = fair(&world, "B", config.clone());
    let started = world.clock.now.get();
    let got = block_on(&world, waiter.acquire(&b, Duration::from_millis(200))).unwrap();
    assert_eq!(got, None);
    // Redisson's wait lasts the wait given, on the waiter's wall clock, and no longer.
    assert_eq!(world.clock.now.get() - started, 200);
    assert!(!key_exists(&world, config.queue_key()));
    assert!(!key_exists(&world, config.timeout_key()));
    // Every attempt was reported as one failed attempt on one server: the first, the one at
    // once after subscribing, and one after each wait for a message (150 ms at most, half the
    // place-keeping deadline, then the 50 ms left).
    let events = b.events.borrow().clone();
    assert_eq!(events.len(), 3, "{events:?}");
    assert!(events.iter().all(|e| *e
        == LockEvent::Attempt {
            acquired: false,
            accepted: 0,
            of: 1
        }));

    // Out of attempts.
    let counted = fair(
        &world,
        "C",
        FairConfig {
            retry_count: Some(3),
            ..config.clone()
        },
    );
    let c = Client::new(&world, 3);
    let got = block_on(&world, counted.acquire(&c, Duration::from_secs(60))).unwrap();
    assert_eq!(got, None);
    assert_eq!(c.events.borrow().len(), 3);
    assert!(!key_exists(&world, config.queue_key()));
}

#[test]
fn polls_are_never_further_apart_than_half_the_wait_timeout() {
    let world = Rc::new(World::default());
    let config = FairConfig {
        retry_delay: Duration::from_secs(5),
        ..config()
    };
    let a = Client::new(&world, 1);
    let holder = fair(&world, "A", config.clone());
    let guard = block_on(&world, holder.acquire(&a, Duration::ZERO))
        .unwrap()
        .unwrap();
    // B would sleep up to 5 s between polls, and lose its place to C (which polls every 50 ms)
    // after 300 ms; capped at 150 ms, it keeps its place all the while A holds the lock.
    let (b, c) = (Client::new(&world, 2), Client::new(&world, 3));
    let first = fair(&world, "B", config.clone());
    let second = fair(&world, "C", self::config());
    let order = RefCell::new(Vec::new());
    run_all(
        &world,
        vec![
            Box::pin(async {
                let guard = first.acquire(&b, Duration::from_secs(10)).await.unwrap();
                order.borrow_mut().push("B");
                assert!(first.release(&b, &guard.unwrap()).await.unwrap());
            }),
            Box::pin(async {
                c.sleep(Duration::from_millis(1)).await;
                let guard = second.acquire(&c, Duration::from_secs(10)).await.unwrap();
                order.borrow_mut().push("C");
                assert!(second.release(&c, &guard.unwrap()).await.unwrap());
            }),
            Box::pin(async {
                // A holds for 3 s (ten wait timeouts), renewing its lease, then releases.
                for _ in 0..10 {
                    a.sleep(Duration::from_millis(300)).await;
                    world.run(Command::PExpire {
                        key: "lock".into(),
                        ms: LEASE_MS as i64,
                    });
                }
                assert!(holder.release(&a, &guard).await.unwrap());
            }),
        ],
    );
    assert_eq!(order.into_inner(), vec!["B", "C"]);
    assert!(world.clock.now.get() >= 3_000);
}

#[test]
fn the_release_publishes_to_the_head_waiter_which_takes_the_lock_at_once() {
    let world = Rc::new(World::default());
    let config = config();
    let (a, b, c) = (
        Client::new(&world, 1),
        Client::new(&world, 2),
        Client::new(&world, 3),
    );
    let holder = fair(&world, "A", config.clone());
    let guard = block_on(&world, holder.acquire(&a, Duration::ZERO))
        .unwrap()
        .unwrap();
    let (first, second) = (
        fair(&world, "B", config.clone()),
        fair(&world, "C", config.clone()),
    );
    let acquired = RefCell::new(Vec::new());
    run_all(
        &world,
        vec![
            Box::pin(async {
                let guard = first.acquire(&b, Duration::from_secs(10)).await.unwrap();
                acquired.borrow_mut().push(("B", world.clock.now.get()));
                assert!(first.release(&b, &guard.unwrap()).await.unwrap());
            }),
            Box::pin(async {
                c.sleep(Duration::from_millis(1)).await;
                let guard = second.acquire(&c, Duration::from_secs(10)).await.unwrap();
                acquired.borrow_mut().push(("C", world.clock.now.get()));
                assert!(second.release(&c, &guard.unwrap()).await.unwrap());
            }),
            Box::pin(async {
                // Released between two of the waiters' own attempts (every 150 ms).
                a.sleep(Duration::from_millis(220)).await;
                assert!(holder.release(&a, &guard).await.unwrap());
            }),
        ],
    );
    // Each release woke the waiter then at the head, on its own channel, in the same instant.
    assert_eq!(acquired.into_inner(), [("B", 220), ("C", 220)]);
    let published = world.published.borrow().clone();
    assert_eq!(
        published,
        [
            (config.channel_of("B"), "0".to_string()),
            (config.channel_of("C"), "0".to_string())
        ]
    );
}

#[test]
fn reentrant_through_the_lock_trait() {
    let world = Rc::new(World::default());
    let env = Client::new(&world, 1);
    let lock = fair(&world, "A", config());
    let outer = block_on(&world, lock.acquire(&env, Duration::ZERO))
        .unwrap()
        .unwrap();
    let inner = block_on(&world, lock.try_acquire(&env)).unwrap().unwrap();
    assert_eq!(lock.depth(), 2);
    assert_eq!(outer.token, "A");
    assert_eq!(outer.fence, None);
    let budget = LEASE_MS - LEASE_MS / 100 - 2;
    assert_eq!(
        outer.valid_until,
        outer.acquired_at + Duration::from_millis(budget)
    );

    // Another client cannot take it, by either path.
    let other = Client::new(&world, 2);
    let b = fair(&world, "B", config());
    assert_eq!(block_on(&world, b.try_acquire(&other)).unwrap(), None);
    assert!(!block_on(&world, b.release(&other, &inner)).unwrap());

    assert!(block_on(&world, lock.release(&env, &inner)).unwrap());
    assert!(key_exists(&world, "lock".into()));
    assert!(block_on(&world, lock.release(&env, &outer)).unwrap());
    assert!(!key_exists(&world, "lock".into()));
    assert_eq!(lock.depth(), 0);
    assert!(!block_on(&world, lock.release(&env, &outer)).unwrap());
}

#[test]
fn keep_alive_renews_while_held_and_stops_when_lost() {
    let world = Rc::new(World::default());
    let env = Client::new(&world, 1);
    let lock = fair(&world, "A", config());
    let guard = block_on(&world, lock.acquire(&env, Duration::ZERO))
        .unwrap()
        .unwrap();
    let shared = RefCell::new(guard.clone());
    run_all(
        &world,
        vec![
            Box::pin(lock.keep_alive(&env, &shared)),
            Box::pin(async {
                // Three renewals, then someone deletes the lock.
                env.sleep(Duration::from_millis(LEASE_MS + 100)).await;
                let admin = fair(&world, "admin", config());
                assert!(admin.force_unlock().await.unwrap());
            }),
        ],
    );
    assert!(shared.borrow().valid_until > guard.valid_until);
    assert!(world.clock.now.get() < 2 * LEASE_MS);
}

#[test]
fn force_unlock_frees_anyones_lock() {
    let world = Rc::new(World::default());
    let a = Client::new(&world, 1);
    let holder = fair(&world, "A", config());
    assert!(block_on(&world, holder.acquire(&a, Duration::ZERO))
        .unwrap()
        .is_some());
    let admin = fair(&world, "admin", config());
    assert!(block_on(&world, admin.force_unlock()).unwrap());
    assert!(!key_exists(&world, "lock".into()));
    assert!(!block_on(&world, admin.force_unlock()).unwrap());
    // The holder finds out at release.
    let guard = Guard {
        token: "A".into(),
        acquired_at: Duration::ZERO,
        valid_until: Duration::ZERO,
        fence: None,
    };
    assert!(!block_on(&world, holder.release(&a, &guard)).unwrap());
}

#[test]
fn a_first_acquire_whose_reply_is_lost_is_undone() {
    let world = Rc::new(World::default());
    let env = Client::new(&world, 1);
    let lock = fair(&world, "A", config());
    // The acquire is applied and its reply lost; the undo (a release) goes through.
    world.lose_replies.set(1);
    assert_eq!(block_on(&world, lock.try_acquire(&env)).unwrap(), None);
    assert!(!key_exists(&world, "lock".into()));
    assert_eq!(lock.depth(), 0);

    // A lost reply to a poll that only queued the caller keeps its place.
    let b = Client::new(&world, 2);
    let holder = fair(&world, "B", config());
    assert!(block_on(&world, holder.try_acquire(&b)).unwrap().is_some());
    world.lose_replies.set(1);
    assert_eq!(block_on(&world, lock.acquire_or_wait(&env)).unwrap(), None);
    let queue = world.run(Command::LRange {
        key: config().queue_key(),
        start: 0,
        stop: -1,
    });
    assert_eq!(queue, Reply::Array(vec![Reply::Bulk("A".into())]));

    // Nested: the outcome is left to the lease, never undone (which could free the outer level).
    let guard = block_on(&world, holder.try_acquire(&b)).unwrap().unwrap();
    world.lose_replies.set(1);
    assert!(block_on(&world, holder.try_acquire(&b)).is_err());
    let count = world.run(Command::HGet {
        key: "lock".into(),
        field: "B".into(),
    });
    assert_eq!(count, Reply::Bulk("3".into()));
    assert_eq!(holder.depth(), 2);
    let _ = guard;
}
