//! A simulated MariaDB server (InnoDB, REPEATABLE READ): the lock table, transactions per
//! connection, row locks that block, `innodb_lock_wait_timeout`, `wait_timeout`, and crash
//! recovery under `innodb_flush_log_at_trx_commit`, as a pure state machine.
//!
//! Nothing here does I/O, reads a clock or draws a random number: the caller passes the server's
//! clocks into every call ([`ServerTime`]). Two clocks, as in the real server: `NOW(3)` reads the
//! wall clock (so a jump of the database's clock moves every lease judged by it), while the
//! timeouts (`innodb_lock_wait_timeout`, `wait_timeout`, the once-a-second log flush) are
//! measured as durations, on the monotonic clock.
//!
//! The model speaks the algorithms crate's own [`Statement`], [`Outcome`] and [`SqlError`], so a
//! lock algorithm and the server it is checked against cannot disagree about the protocol.
//!
//! # Row locks
//!
//! Every statement of the protocol finds its row through the unique key on `resource_name`, and
//! all of them lock (there is no plain `SELECT`), so the model keeps one current version of each
//! row with an undo log per transaction, and no read views: whatever an uncommitted transaction
//! changed is locked by it, and anyone else who looks waits. Locks, per resource name:
//!
//! - **record lock**, exclusive (`FOR UPDATE`, `UPDATE`, `DELETE`, and the row an `INSERT`
//!   creates) or shared (the duplicate check of an `INSERT` that finds the row: InnoDB keeps that
//!   shared lock until the transaction ends). A transaction that deleted the row keeps its record
//!   lock on the name, so others wait until it commits (the row is then gone) or rolls back (it
//!   is back), as they wait on InnoDB's delete-marked record.
//! - **gap lock**: a locking read (or `UPDATE`/`DELETE`) of a MISSING name locks the gap where it
//!   would go. Gap locks never wait and never conflict with each other; they only make an
//!   `INSERT` of that name by another transaction wait (InnoDB's insert-intention lock).
//!
//! So two transactions that both find the row missing both hold the gap and both go on to insert
//! it: the first insert waits for the other's gap lock, the second would wait for the first's —
//! a cycle, which the server breaks by rolling the second back with 1213 (deadlock); the first
//! insert then goes through. That is what MariaDB 10.11 does at its default isolation for
//! `SELECT … FOR UPDATE` + `INSERT` on a unique key, and it is the classic deadlock of seed 000's
//! acquire. Where the model is coarser than InnoDB, on purpose:
//! - A gap is the resource name itself, not the interval between neighbouring index records, so
//!   a gap lock on one name never blocks inserting another; in InnoDB it blocks every name in
//!   the same interval. Identical for a table with one lock row, as a lockcheck run has.
//! - A deleted row is purged at commit. InnoDB purges later; until then a second locking reader
//!   of the name waits behind the first instead of getting a compatible gap lock.
//! - The deadlock victim is chosen as MariaDB's `Deadlock::report` chooses it: the transaction of
//!   the cycle with the least weight, its undo records plus its lock structures (the request
//!   that waits included), and on a tie the one whose request closed the cycle. The model counts
//!   the structures InnoDB creates for this protocol: the table's intention lock, per name an
//!   exclusive record lock and the row's own (clustered) lock for a locking read, update or
//!   delete of an existing row, a shared lock for an insert's duplicate check, a gap lock; an
//!   inserted row is locked implicitly, without a structure, until another transaction waits for
//!   it. InnoDB keeps one structure per index page and lock mode, the model one per name: the
//!   same for a table with one lock row. (Checked against a real MariaDB by
//!   `real/tests/mysql_conformance.rs`, where an earlier "the requester is always the victim"
//!   disagreed with InnoDB in 11 of 12 deadlocks.)
//! - Waiters are granted in the order they started waiting (MariaDB's FIFO; MySQL 8's
//!   contention-aware scheduling may differ), and a new request waits behind an earlier waiting
//!   request it conflicts with.
//!
//! A statement waiting for a lock is [`Applied::Blocked`]; its reply comes later as a
//! [`Notice::Reply`], when a lock it waited for is released (it then runs with the world as it is
//! at that moment, and with `NOW()` as of the moment it STARTED, as MariaDB evaluates `NOW()` once
//! per statement), or after `innodb_lock_wait_timeout` with 1205 (only the statement fails; the
//! transaction stays open with its locks, as `innodb_rollback_on_timeout=OFF` has it).
//!
//! # Connections
//!
//! A connection idle (no statement running) for `wait_timeout` is closed by the server and its
//! open transaction rolled back, locks released. A statement on a closed connection gets 2006.
//! A client that disconnects while its statement waits for a lock is noticed only when the wait
//! ends: the server thread is blocked in the lock wait, not reading the socket.
//!
//! # Durability
//!
//! What a machine crash leaves is [`MysqlModel::durable`]: the committed rows, the fence
//! sequence, the auto-increment counter. With [`FlushPolicy::AtCommit`]
//! (`innodb_flush_log_at_trx_commit=1`) every commit is on disk before its reply; with
//! [`FlushPolicy::EverySecond`] (`=2`) the log reaches the disk once a second, so commits since
//! the last flush are lost. A crash of the server PROCESS loses nothing committed with either:
//! the log sits in the operating system's cache (the node glue keeps [`MysqlModel::snapshot`] as
//! what was written, `sim/src/disk.rs`). Transactions in flight are never in it: recovery rolls
//! them back. Connections do not survive a restart.
//!
//! Iteration order matters for replay, so every collection is a `BTreeMap`/`BTreeSet` or a `Vec`.

pub use lockcheck_algorithms::mysql::store::{
    Outcome, Reply, Row, SqlError, Statement, MAX_NAME_CHARS, UNIQUE_KEY,
};
use lockcheck_core::scenario::FlushPolicy;
use std::collections::{BTreeMap, BTreeSet};

/// A connection's id (MariaDB's thread id). Never reused, not even across a restart, so a
/// client cannot mistake the new server's connection for its old one.
pub type ConnId = u64;

/// How often the log is flushed under [`FlushPolicy::EverySecond`].
pub const FLUSH_INTERVAL_MS: u64 = 1_000;

/// The server's settings that locks depend on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MysqlConfig {
    /// `innodb_lock_wait_timeout`, in ms (the server's unit is seconds; default 50 s).
    pub lock_wait_timeout_ms: u64,
    /// `wait_timeout`, in ms (the server's unit is seconds; default 8 hours).
    pub wait_timeout_ms: u64,
    /// `innodb_flush_log_at_trx_commit`.
    pub flush: FlushPolicy,
}

impl Default for MysqlConfig {
    /// MariaDB's defaults.
    fn default() -> Self {
        MysqlConfig {
            lock_wait_timeout_ms: 50_000,
            wait_timeout_ms: 28_800_000,
            flush: FlushPolicy::AtCommit,
        }
    }
}

/// The server's two clocks at one instant.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ServerTime {
    /// The wall clock, in ms since the Unix epoch: what `NOW(3)` returns. May jump.
    pub wall_ms: u64,
    /// The monotonic clock, in ms: what timeouts are measured on.
    pub mono_ms: u64,
}

/// What became of a statement.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Applied {
    /// It ran: its reply.
    Reply(Reply),
    /// It waits for a row lock; its reply will come as a [`Notice::Reply`].
    Blocked,
}

/// Something the server did for a connection other than answering the statement at hand.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Notice {
    /// A statement that was waiting for a row lock finished: its reply goes to `conn`.
    Reply {
        /// The connection.
        conn: ConnId,
        /// The statement's reply (its outcome once the lock was granted, 1205, or 1213).
        reply: Reply,
    },
    /// The server closed `conn` after `wait_timeout` of idleness, rolling its transaction back.
    Closed {
        /// The connection.
        conn: ConnId,
    },
}

/// What the server keeps on disk: the committed rows and the counters. No connections, no
/// transactions, no locks: recovery rolls back whatever was in flight.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Snapshot {
    rows: BTreeMap<String, Row>,
    /// The last value `NEXT VALUE FOR lock_fence` gave.
    fence: u64,
    /// The `id` the next inserted row gets (persisted since MariaDB 10.2.4).
    next_id: u64,
    next_conn: ConnId,
    config: MysqlConfig,
}

impl Snapshot {
    /// The row named `resource`, if committed.
    pub fn row(&self, resource: &str) -> Option<&Row> {
        self.rows.get(resource)
    }

    /// Every committed row, by name.
    pub fn rows(&self) -> impl Iterator<Item = &Row> {
        self.rows.values()
    }
}

/// A lock on a resource name.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum LockKind {
    /// A shared record lock (an insert's duplicate check).
    RecordS,
    /// An exclusive record lock.
    RecordX,
    /// A gap lock on a missing name.
    Gap,
    /// An insert's wait for others' gap locks; never held.
    InsertIntention,
}

/// The locks granted on one resource name.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct NameLocks {
    /// Record locks: `true` for exclusive.
    record: BTreeMap<ConnId, bool>,
    gap: BTreeSet<ConnId>,
}

impl NameLocks {
    fn is_empty(&self) -> bool {
        self.record.is_empty() && self.gap.is_empty()
    }
}

/// A lock structure InnoDB creates for a transaction: what the weight of a deadlock victim
/// candidate counts, besides its undo records.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Struct {
    /// The table's intention lock (`IX`), taken by the first row statement.
    Table,
    /// An exclusive record lock on the name's entry in the unique key.
    RecordX,
    /// The shared (next-key) lock of an insert's duplicate check.
    RecordS,
    /// A gap lock where a missing name would go.
    Gap,
    /// The exclusive lock on the row itself (the clustered index record), which a locking read,
    /// update or delete takes after the unique key's entry. An insert's new row is locked
    /// implicitly, without a structure, until another transaction asks for it.
    Clustered,
}

/// A before-image: what to put back under a name on rollback.
type Undo = (String, Option<Row>);

#[derive(Clone, Debug)]
struct Conn {
    /// The explicit transaction's undo log, when one is open (`BEGIN`); `None`: autocommit.
    txn: Option<Vec<Undo>>,
    /// Monotonic time of the end of its last statement (or of its connect): idle since then.
    idle_since_ms: u64,
    /// The client went away while a statement waited: close when the wait ends.
    gone: bool,
}

/// A statement waiting for a lock.
#[derive(Clone, Debug)]
struct Waiter {
    conn: ConnId,
    statement: Statement,
    /// `NOW()` of the statement: the wall clock when it started.
    started_wall_ms: u64,
    /// When the current lock wait began (monotonic).
    since_ms: u64,
    /// The `id` an insert took when it started.
    insert_id: Option<u64>,
    /// The lock it waits for.
    name: String,
    kind: LockKind,
}

/// The result of trying to run a statement.
enum Exec {
    Done(Reply),
    Wait {
        name: String,
        kind: LockKind,
        blockers: BTreeSet<ConnId>,
    },
}

/// One MariaDB server with the lock table and the fence sequence.
#[derive(Clone, Debug)]
pub struct MysqlModel {
    config: MysqlConfig,
    /// Current rows, uncommitted changes included (each locked by its writer).
    rows: BTreeMap<String, Row>,
    locks: BTreeMap<String, NameLocks>,
    /// Per connection: the lock structures its transaction holds, by name (`Table` under "").
    structs: BTreeMap<ConnId, BTreeSet<(String, Struct)>>,
    conns: BTreeMap<ConnId, Conn>,
    /// Statements waiting for locks, in the order they started waiting.
    waiters: Vec<Waiter>,
    fence: u64,
    next_id: u64,
    next_conn: ConnId,
    /// What a crash would leave.
    durable: Snapshot,
    /// Bumped whenever the committed rows or `durable` may have changed (a commit, a flush): a
    /// node that saw this value needs to diff and sync nothing.
    generation: u64,
    /// When the log is next flushed under [`FlushPolicy::EverySecond`] (monotonic).
    next_flush_ms: u64,
}

impl MysqlModel {
    /// A fresh server with an empty lock table, started at monotonic time `now_mono_ms`.
    pub fn new(config: MysqlConfig, now_mono_ms: u64) -> Self {
        let empty = Snapshot {
            rows: BTreeMap::new(),
            fence: 0,
            next_id: 1,
            next_conn: 1,
            config,
        };
        Self::restart(empty, now_mono_ms)
    }

    /// A server restarted from what its disk kept (crash recovery): the committed rows and
    /// counters, no connections, nothing locked.
    pub fn restart(snapshot: Snapshot, now_mono_ms: u64) -> Self {
        MysqlModel {
            config: snapshot.config,
            rows: snapshot.rows.clone(),
            locks: BTreeMap::new(),
            structs: BTreeMap::new(),
            conns: BTreeMap::new(),
            waiters: Vec::new(),
            fence: snapshot.fence,
            next_id: snapshot.next_id,
            next_conn: snapshot.next_conn,
            next_flush_ms: next_flush_after(now_mono_ms),
            durable: snapshot,
            generation: 0,
        }
    }

    /// A count that changes whenever the committed rows or the durable state may have changed;
    /// equal counts mean neither did.
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// The server's settings.
    pub fn config(&self) -> MysqlConfig {
        self.config
    }

    /// The committed state now: the rows without the changes of open transactions. Writing it to
    /// disk is what a flush does.
    pub fn snapshot(&self) -> Snapshot {
        let mut rows = self.rows.clone();
        for conn in self.conns.values() {
            for (name, before) in conn.txn.iter().flatten().rev() {
                restore(&mut rows, name, before.clone());
            }
        }
        Snapshot {
            rows,
            fence: self.fence,
            next_id: self.next_id,
            next_conn: self.next_conn,
            config: self.config,
        }
    }

    /// What a crash of the server's machine would leave on disk now, per the flush policy:
    /// restart from it with [`MysqlModel::restart`].
    pub fn durable(&self) -> &Snapshot {
        &self.durable
    }

    /// The row named `resource` as it is now, uncommitted changes included (for checkers).
    pub fn row(&self, resource: &str) -> Option<&Row> {
        self.rows.get(resource)
    }

    /// The connection holding an exclusive record lock on `resource`, if any (for checkers: the
    /// holder of a transaction-held lock).
    pub fn exclusive_holder(&self, resource: &str) -> Option<ConnId> {
        let locks = self.locks.get(resource)?;
        locks
            .record
            .iter()
            .find(|(_, exclusive)| **exclusive)
            .map(|(conn, _)| *conn)
    }

    /// Whether `conn` is open.
    pub fn is_open(&self, conn: ConnId) -> bool {
        self.conns.get(&conn).is_some_and(|c| !c.gone)
    }

    /// Whether `conn` has an explicit transaction open.
    pub fn in_transaction(&self, conn: ConnId) -> bool {
        self.conns.get(&conn).is_some_and(|c| c.txn.is_some())
    }

    /// Whether a statement of `conn` waits for a lock.
    pub fn is_waiting(&self, conn: ConnId) -> bool {
        self.waiters.iter().any(|w| w.conn == conn)
    }

    /// Opens a connection (in autocommit mode).
    pub fn connect(&mut self, now: ServerTime) -> ConnId {
        let id = self.next_conn;
        self.next_conn += 1;
        self.conns.insert(
            id,
            Conn {
                txn: None,
                idle_since_ms: now.mono_ms,
                gone: false,
            },
        );
        id
    }

    /// The client closes `conn`: its transaction is rolled back at once, or, if a statement of
    /// it waits for a lock, when that wait ends (the server does not notice before). Unblocked
    /// statements of others are appended to `notices`.
    pub fn disconnect(&mut self, conn: ConnId, now: ServerTime, notices: &mut Vec<Notice>) {
        self.tick(now, notices);
        if self.is_waiting(conn) {
            if let Some(c) = self.conns.get_mut(&conn) {
                c.gone = true;
            }
        } else if self.conns.contains_key(&conn) {
            self.close(conn);
            self.wake(now.mono_ms, notices);
        }
    }

    /// Runs one statement of `conn`.
    ///
    /// First whatever is due at `now` happens ([`MysqlModel::tick`]): a connection past its
    /// `wait_timeout` is closed before its statement can arrive, and gets 2006. A statement that
    /// must wait for a lock is [`Applied::Blocked`]; one that would close a wait cycle gets 1213
    /// and its transaction is rolled back. Statements of other connections that this one
    /// unblocked (by committing, rolling back, or ending an autocommit statement) are appended
    /// to `notices`, in the order the server ran them.
    pub fn apply(
        &mut self,
        conn: ConnId,
        statement: &Statement,
        now: ServerTime,
        notices: &mut Vec<Notice>,
    ) -> Applied {
        self.tick(now, notices);
        if !self.is_open(conn) {
            return Applied::Reply(Err(SqlError::ServerGone));
        }
        if self.is_waiting(conn) {
            return Applied::Reply(Err(SqlError::CommandsOutOfSync));
        }
        let insert_id = self.take_insert_id(statement);
        loop {
            let ahead = self.waiters.len();
            match self.try_run(conn, statement, now.wall_ms, ahead, insert_id) {
                Exec::Done(reply) => {
                    self.set_idle(conn, now.mono_ms);
                    self.wake(now.mono_ms, notices);
                    return Applied::Reply(reply);
                }
                Exec::Wait {
                    name,
                    kind,
                    blockers,
                } => {
                    if let Some(victim) = self.deadlock_victim_of(conn, &blockers) {
                        if victim == conn {
                            self.deadlock_victim(conn);
                            self.set_idle(conn, now.mono_ms);
                            self.wake(now.mono_ms, notices);
                            return Applied::Reply(Err(SqlError::Deadlock));
                        }
                        // Another transaction of the cycle was lighter: it is rolled back, and
                        // this statement asks again.
                        self.waiters.retain(|w| w.conn != victim);
                        self.deadlock_victim(victim);
                        self.complete(victim, Err(SqlError::Deadlock), now.mono_ms, notices);
                        continue;
                    }
                    self.waiters.push(Waiter {
                        conn,
                        statement: statement.clone(),
                        started_wall_ms: now.wall_ms,
                        since_ms: now.mono_ms,
                        insert_id,
                        name,
                        kind,
                    });
                    return Applied::Blocked;
                }
            }
        }
    }

    /// Does what is due at `now`, in deadline order: lock waits past `innodb_lock_wait_timeout`
    /// fail with 1205, connections idle for `wait_timeout` are closed (their transactions rolled
    /// back, [`Notice::Closed`]), statements their locks held up run, and under
    /// [`FlushPolicy::EverySecond`] the log is flushed. Call it at
    /// [`MysqlModel::next_deadline_ms`] at the latest, or a crash may lose more than a second.
    pub fn tick(&mut self, now: ServerTime, notices: &mut Vec<Notice>) {
        while let Some((at, event)) = self.next_event().filter(|(at, _)| *at <= now.mono_ms) {
            match event {
                Event::Flush => {
                    self.durable = self.snapshot();
                    self.generation += 1;
                    self.next_flush_ms = next_flush_after(at);
                    continue;
                }
                Event::LockWaitTimeout(index) => {
                    let waiter = self.waiters.remove(index);
                    self.complete(waiter.conn, Err(SqlError::LockWaitTimeout), at, notices);
                }
                Event::Idle(conn) => {
                    self.close(conn);
                    notices.push(Notice::Closed { conn });
                }
            }
            self.wake(at, notices);
        }
    }

    /// When [`MysqlModel::tick`] next has something to do (monotonic), if ever.
    pub fn next_deadline_ms(&self) -> Option<u64> {
        self.next_event().map(|(at, _)| at)
    }

    /// The earliest thing due: a log flush, a lock wait's timeout or an idle connection's, in
    /// that order on a tie.
    fn next_event(&self) -> Option<(u64, Event)> {
        let flush = (self.config.flush == FlushPolicy::EverySecond)
            .then_some((self.next_flush_ms, Event::Flush));
        let waits = self.waiters.iter().enumerate().map(|(i, w)| {
            let at = w.since_ms.saturating_add(self.config.lock_wait_timeout_ms);
            (at, Event::LockWaitTimeout(i))
        });
        let idle = self
            .conns
            .iter()
            .filter(|(id, c)| !c.gone && !self.is_waiting(**id))
            .map(|(id, c)| {
                let at = c.idle_since_ms.saturating_add(self.config.wait_timeout_ms);
                (at, Event::Idle(*id))
            });
        waits.chain(idle).chain(flush).min()
    }

    fn set_idle(&mut self, conn: ConnId, mono_ms: u64) {
        if let Some(c) = self.conns.get_mut(&conn) {
            c.idle_since_ms = mono_ms;
        }
    }

    /// A waiting statement finished with `reply` at `mono_ms`.
    fn complete(&mut self, conn: ConnId, reply: Reply, mono_ms: u64, notices: &mut Vec<Notice>) {
        if self.conns.get(&conn).is_some_and(|c| c.gone) {
            // The reply cannot be written: now the server sees the client is gone.
            self.close(conn);
            return;
        }
        self.set_idle(conn, mono_ms);
        notices.push(Notice::Reply { conn, reply });
    }

    /// Retries every waiting statement, oldest first, until none can run: a lock released may
    /// let one run, and what it does may let another.
    fn wake(&mut self, mono_ms: u64, notices: &mut Vec<Notice>) {
        'scan: loop {
            for index in 0..self.waiters.len() {
                let waiter = self.waiters[index].clone();
                let exec = self.try_run(
                    waiter.conn,
                    &waiter.statement,
                    waiter.started_wall_ms,
                    index,
                    waiter.insert_id,
                );
                match exec {
                    Exec::Done(reply) => {
                        self.waiters.remove(index);
                        self.complete(waiter.conn, reply, mono_ms, notices);
                        continue 'scan;
                    }
                    Exec::Wait {
                        name,
                        kind,
                        blockers,
                    } => {
                        if let Some(victim) = self.deadlock_victim_of(waiter.conn, &blockers) {
                            self.waiters.retain(|w| w.conn != victim);
                            self.deadlock_victim(victim);
                            self.complete(victim, Err(SqlError::Deadlock), mono_ms, notices);
                            continue 'scan;
                        }
                        let w = &mut self.waiters[index];
                        if (w.name.as_str(), w.kind) != (name.as_str(), kind) {
                            // A different lock (the row came or went meanwhile): a new wait.
                            w.name = name;
                            w.kind = kind;
                            w.since_ms = mono_ms;
                        }
                    }
                }
            }
            return;
        }
    }

    /// If `conn` waiting for `blockers` closes a cycle of waits, the transaction InnoDB rolls
    /// back to break it: the lightest of the cycle, weighing its undo records plus its lock
    /// structures (the one it asks for included), and `conn` on a tie (MariaDB's
    /// `Deadlock::report`).
    fn deadlock_victim_of(&self, conn: ConnId, blockers: &BTreeSet<ConnId>) -> Option<ConnId> {
        let cycle = self.cycle(conn, blockers)?;
        let weight = |c: ConnId| {
            let undo = self
                .conns
                .get(&c)
                .and_then(|c| c.txn.as_ref())
                .map_or(0, Vec::len);
            let structs = self.structs.get(&c).map_or(0, BTreeSet::len);
            // Every member of the cycle waits, so each has one structure more: its request.
            let weight = (undo + structs + 1) as u64;
            (weight << 1) | u64::from(c != conn)
        };
        cycle.into_iter().min_by_key(|&c| (weight(c), c))
    }

    /// The transactions of the cycle of waits that `conn` waiting for `blockers` closes, `conn`
    /// first; `None` if it closes none.
    fn cycle(&self, conn: ConnId, blockers: &BTreeSet<ConnId>) -> Option<Vec<ConnId>> {
        // Depth-first, remembering who led to whom, so the cycle can be read back.
        let mut came_from: BTreeMap<ConnId, ConnId> = BTreeMap::new();
        let mut stack: Vec<(ConnId, ConnId)> = blockers.iter().map(|&b| (b, conn)).collect();
        while let Some((next, from)) = stack.pop() {
            if next == conn {
                let mut cycle = vec![conn];
                let mut at = from;
                while at != conn {
                    cycle.push(at);
                    at = came_from[&at];
                }
                return Some(cycle);
            }
            if came_from.contains_key(&next) {
                continue;
            }
            came_from.insert(next, from);
            if let Some((index, w)) = self
                .waiters
                .iter()
                .enumerate()
                .find(|(_, w)| w.conn == next)
            {
                stack.extend(
                    self.blockers(w.conn, &w.name, w.kind, index)
                        .into_iter()
                        .map(|b| (b, next)),
                );
            }
        }
        None
    }

    /// The server broke a deadlock by rolling back `conn`'s transaction. The connection stays
    /// in transaction mode if it was (MySQL: "further statements become part of the
    /// transaction until COMMIT or ROLLBACK"), with nothing in it.
    fn deadlock_victim(&mut self, conn: ConnId) {
        self.rollback_changes(conn);
        self.release_locks(conn);
        if let Some(c) = self.conns.get_mut(&conn) {
            if c.txn.is_some() {
                c.txn = Some(Vec::new());
            }
        }
    }

    /// Ends `conn`: rolls its transaction back and releases its locks.
    fn close(&mut self, conn: ConnId) {
        self.rollback_changes(conn);
        self.release_locks(conn);
        self.conns.remove(&conn);
        self.waiters.retain(|w| w.conn != conn);
    }

    /// Puts back every before-image of `conn`'s transaction, newest first.
    fn rollback_changes(&mut self, conn: ConnId) {
        let undo = self
            .conns
            .get_mut(&conn)
            .and_then(|c| c.txn.as_mut())
            .map(std::mem::take)
            .unwrap_or_default();
        for (name, before) in undo.into_iter().rev() {
            restore(&mut self.rows, &name, before);
        }
    }

    fn release_locks(&mut self, conn: ConnId) {
        self.structs.remove(&conn);
        self.locks.retain(|_, locks| {
            locks.record.remove(&conn);
            locks.gap.remove(&conn);
            !locks.is_empty()
        });
    }

    /// The connections whose locks (granted, or requested by waiters ahead of position `ahead`)
    /// keep `conn` from getting `kind` on `name`.
    fn blockers(&self, conn: ConnId, name: &str, kind: LockKind, ahead: usize) -> BTreeSet<ConnId> {
        let mut blockers = BTreeSet::new();
        let held = self
            .locks
            .get(name)
            .and_then(|locks| locks.record.get(&conn).copied());
        // A lock the transaction already has (or a stronger one) is never waited for.
        match (kind, held) {
            (LockKind::RecordX, Some(true)) | (LockKind::RecordS, Some(_)) => return blockers,
            _ => {}
        }
        if let Some(locks) = self.locks.get(name) {
            let granted: Vec<ConnId> = match kind {
                LockKind::RecordX => locks.record.keys().copied().collect(),
                LockKind::RecordS => locks
                    .record
                    .iter()
                    .filter(|(_, exclusive)| **exclusive)
                    .map(|(c, _)| *c)
                    .collect(),
                LockKind::InsertIntention => locks.gap.iter().copied().collect(),
                LockKind::Gap => Vec::new(),
            };
            blockers.extend(granted.into_iter().filter(|c| *c != conn));
        }
        // Fairness: a record lock request queues behind earlier conflicting requests.
        for w in &self.waiters[..ahead.min(self.waiters.len())] {
            let conflicts = matches!(
                (kind, w.kind),
                (LockKind::RecordX, LockKind::RecordX | LockKind::RecordS)
                    | (LockKind::RecordS, LockKind::RecordX)
            );
            if conflicts && w.conn != conn && w.name == name {
                blockers.insert(w.conn);
            }
        }
        blockers
    }

    /// Runs `statement` for `conn` if the locks it needs are free, with `NOW()` = `wall_ms`;
    /// changes nothing when it must wait. `ahead`: how many waiters are ahead of it.
    fn try_run(
        &mut self,
        conn: ConnId,
        statement: &Statement,
        wall_ms: u64,
        ahead: usize,
        insert_id: Option<u64>,
    ) -> Exec {
        let reply = match statement {
            Statement::Begin => {
                if self.in_transaction(conn) {
                    self.commit(conn);
                }
                if let Some(c) = self.conns.get_mut(&conn) {
                    c.txn = Some(Vec::new());
                }
                Ok(Outcome::Done { affected: 0 })
            }
            Statement::Commit => {
                self.commit(conn);
                Ok(Outcome::Done { affected: 0 })
            }
            Statement::Rollback => {
                self.rollback_changes(conn);
                self.release_locks(conn);
                if let Some(c) = self.conns.get_mut(&conn) {
                    c.txn = None;
                }
                Ok(Outcome::Done { affected: 0 })
            }
            Statement::NextFence => {
                // Not transactional: durable as its own little commit.
                self.fence += 1;
                self.committed();
                Ok(Outcome::Value(self.fence))
            }
            _ => match self.run_on_row(conn, statement, wall_ms, ahead, insert_id) {
                Ok(reply) => reply,
                Err(wait) => return wait,
            },
        };
        // Autocommit: the statement was its own transaction. COMMIT and NEXT VALUE made theirs
        // durable already (a snapshot of every row is the cost of committed(), per statement).
        let made_durable = matches!(statement, Statement::Commit | Statement::NextFence);
        if !self.in_transaction(conn) {
            self.release_locks(conn);
            if !made_durable {
                self.committed();
            }
        }
        Exec::Done(reply)
    }

    /// The auto-increment `id` an `INSERT` takes as it starts (`innodb_autoinc_lock_mode=1`,
    /// MariaDB's default): before its duplicate check and any lock wait, so an insert that fails
    /// with 1062 or is rolled back leaves a hole, and ids are never reused while the counter
    /// is on disk. A value too long for its column is refused before.
    fn take_insert_id(&mut self, statement: &Statement) -> Option<u64> {
        if !matches!(statement, Statement::Insert { .. }) || too_long(statement).is_some() {
            return None;
        }
        let id = self.next_id;
        self.next_id += 1;
        Some(id)
    }

    fn commit(&mut self, conn: ConnId) {
        if let Some(c) = self.conns.get_mut(&conn) {
            c.txn = None;
        }
        self.release_locks(conn);
        self.committed();
    }

    /// A commit happened: under [`FlushPolicy::AtCommit`] it is on disk before its reply.
    fn committed(&mut self) {
        self.generation += 1;
        if self.config.flush == FlushPolicy::AtCommit {
            self.durable = self.snapshot();
        }
    }

    /// A statement on one row: `Err` with the wait when a lock is not free.
    fn run_on_row(
        &mut self,
        conn: ConnId,
        statement: &Statement,
        wall_ms: u64,
        ahead: usize,
        insert_id: Option<u64>,
    ) -> Result<Reply, Exec> {
        let name = statement.resource().unwrap_or_default().to_owned();
        if let Some(column) = too_long(statement) {
            return Ok(Err(SqlError::DataTooLong {
                column: column.to_owned(),
            }));
        }
        // The name "has a record" while the row exists or a transaction that deleted it still
        // holds its record lock.
        let record = self.rows.contains_key(&name)
            || self.locks.get(&name).is_some_and(|l| !l.record.is_empty());
        let kind = match (statement, record) {
            (Statement::Insert { .. }, true) => LockKind::RecordS,
            (Statement::Insert { .. }, false) => LockKind::InsertIntention,
            (_, true) => LockKind::RecordX,
            (_, false) => LockKind::Gap,
        };
        self.note(conn, "", Struct::Table);
        let blockers = self.blockers(conn, &name, kind, ahead);
        if !blockers.is_empty() {
            // A row inserted by a blocker and not yet committed is locked implicitly; InnoDB
            // makes that lock a structure of the blocker's as soon as someone has to wait for it.
            for &b in &blockers {
                let exclusive = self
                    .locks
                    .get(&name)
                    .is_some_and(|l| l.record.get(&b) == Some(&true));
                if exclusive {
                    self.note(b, &name, Struct::RecordX);
                }
            }
            return Err(Exec::Wait {
                name,
                kind,
                blockers,
            });
        }
        self.grant(conn, &name, kind);
        match kind {
            LockKind::RecordX if self.rows.contains_key(&name) => {
                self.note(conn, &name, Struct::RecordX);
                self.note(conn, &name, Struct::Clustered);
            }
            LockKind::RecordX => self.note(conn, &name, Struct::RecordX),
            LockKind::RecordS => self.note(conn, &name, Struct::RecordS),
            LockKind::Gap => self.note(conn, &name, Struct::Gap),
            LockKind::InsertIntention => {}
        }
        let current = self.rows.get(&name).cloned();
        let reply = match statement {
            Statement::SelectForUpdate { .. } => Ok(Outcome::Row(current)),
            Statement::Insert {
                locker,
                count,
                version,
                ..
            } => match current {
                Some(_) => Err(SqlError::DuplicateEntry {
                    entry: duplicate_entry(&name),
                    key: UNIQUE_KEY.to_owned(),
                }),
                None => {
                    let row = Row {
                        id: insert_id.unwrap_or(0),
                        resource_name: name.clone(),
                        locker: locker.clone(),
                        reentrant_cnt: *count,
                        create_time_ms: wall_ms,
                        update_time_ms: wall_ms,
                        version: *version,
                    };
                    self.grant(conn, &name, LockKind::RecordX);
                    self.write(conn, &name, Some(row));
                    Ok(Outcome::Done { affected: 1 })
                }
            },
            Statement::Update {
                locker,
                count,
                version,
                ..
            } => {
                let changed = current.filter(|row| row.locker == *locker).map(|row| Row {
                    reentrant_cnt: *count,
                    update_time_ms: wall_ms,
                    version: *version,
                    ..row
                });
                self.update(conn, &name, changed)
            }
            Statement::Claim {
                locker, version, ..
            } => {
                let changed = current.map(|row| claimed(row, locker, *version, wall_ms));
                self.update_locker(conn, &name, locker, changed)
            }
            Statement::TakeOver {
                locker,
                version,
                ttl_ms,
                ..
            } => {
                // `update_time < NOW(3) - INTERVAL ttl`: a date before the epoch matches nothing.
                let expired_before = wall_ms.checked_sub(*ttl_ms);
                let changed = current
                    .filter(|row| expired_before.is_some_and(|t| row.update_time_ms < t))
                    .map(|row| claimed(row, locker, *version, wall_ms));
                self.update_locker(conn, &name, locker, changed)
            }
            Statement::Delete { locker, .. } => {
                let matches = current
                    .as_ref()
                    .is_some_and(|row| locker.as_ref().is_none_or(|l| row.locker == *l));
                if matches {
                    self.write(conn, &name, None);
                }
                Ok(Outcome::Done {
                    affected: u64::from(matches),
                })
            }
            Statement::Begin | Statement::Commit | Statement::Rollback | Statement::NextFence => {
                unreachable!("not a row statement")
            }
        };
        Ok(reply)
    }

    /// An `UPDATE` that writes `locker`: a value too long for the column is refused (1406) only
    /// when a row matched and is about to be written — strict mode checks the value as it is
    /// assigned, so an `UPDATE` that matches nothing succeeds with 0 rows whatever it would have
    /// written. The row stays locked either way (a failed statement is undone, its locks are not).
    fn update_locker(
        &mut self,
        conn: ConnId,
        name: &str,
        locker: &str,
        changed: Option<Row>,
    ) -> Reply {
        if changed.is_some() && locker.chars().count() > MAX_NAME_CHARS {
            return Err(SqlError::DataTooLong {
                column: "locker".to_owned(),
            });
        }
        self.update(conn, name, changed)
    }

    /// Writes `changed` over the row if it differs: MariaDB's affected rows count only rows
    /// whose values changed.
    fn update(&mut self, conn: ConnId, name: &str, changed: Option<Row>) -> Reply {
        let Some(row) = changed else {
            return Ok(Outcome::Done { affected: 0 });
        };
        if self.rows.get(name) == Some(&row) {
            return Ok(Outcome::Done { affected: 0 });
        }
        self.write(conn, name, Some(row));
        Ok(Outcome::Done { affected: 1 })
    }

    /// Replaces the row under `name`, logging its before-image in `conn`'s transaction.
    fn write(&mut self, conn: ConnId, name: &str, row: Option<Row>) {
        let before = restore(&mut self.rows, name, row);
        if let Some(undo) = self.conns.get_mut(&conn).and_then(|c| c.txn.as_mut()) {
            undo.push((name.to_owned(), before));
        }
    }

    /// `conn`'s transaction has lock structure `s` on `name`.
    fn note(&mut self, conn: ConnId, name: &str, s: Struct) {
        self.structs
            .entry(conn)
            .or_default()
            .insert((name.to_owned(), s));
    }

    fn grant(&mut self, conn: ConnId, name: &str, kind: LockKind) {
        let locks = self.locks.entry(name.to_owned()).or_default();
        match kind {
            LockKind::RecordX => {
                locks.record.insert(conn, true);
            }
            LockKind::RecordS => {
                locks.record.entry(conn).or_insert(false);
            }
            LockKind::Gap => {
                locks.gap.insert(conn);
            }
            LockKind::InsertIntention => {}
        }
        if locks.is_empty() {
            self.locks.remove(name);
        }
    }
}

/// Something [`MysqlModel::tick`] does at a deadline.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Event {
    /// The log is flushed ([`FlushPolicy::EverySecond`]).
    Flush,
    /// The waiter at this index has waited `innodb_lock_wait_timeout`.
    LockWaitTimeout(usize),
    /// This connection has been idle for `wait_timeout`.
    Idle(ConnId),
}

/// The row as a claim or take-over writes it.
fn claimed(row: Row, locker: &str, version: u64, wall_ms: u64) -> Row {
    Row {
        locker: locker.to_owned(),
        reentrant_cnt: 1,
        update_time_ms: wall_ms,
        version,
        ..row
    }
}

/// Puts `row` under `name` (or removes it); returns what was there.
fn restore(rows: &mut BTreeMap<String, Row>, name: &str, row: Option<Row>) -> Option<Row> {
    match row {
        Some(row) => rows.insert(name.to_owned(), row),
        None => rows.remove(name),
    }
}

/// The column an `INSERT` would write too long a value into: strict mode refuses it with 1406
/// as the row is built, before any lock or auto-increment value is taken. (An `UPDATE` checks
/// its value only when it writes a matched row: [`MysqlModel::update_locker`]. Names compared in
/// a `WHERE` are not written, so a long one simply matches nothing.)
fn too_long(statement: &Statement) -> Option<&'static str> {
    let long = |s: &str| s.chars().count() > MAX_NAME_CHARS;
    match statement {
        Statement::Insert {
            resource, locker, ..
        } => {
            if long(resource) {
                Some("resource_name")
            } else if long(locker) {
                Some("locker")
            } else {
                None
            }
        }
        _ => None,
    }
}

/// The duplicate value as MariaDB's 1062 message prints it (`'%-.64T'`): whole up to 64 bytes;
/// longer, its first 61 bytes (cut back to a character boundary) and `...`.
fn duplicate_entry(name: &str) -> String {
    const WIDTH: usize = 64;
    if name.len() <= WIDTH {
        return name.to_owned();
    }
    let mut end = WIDTH - 3;
    while !name.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}...", &name[..end])
}

/// The next whole second of the monotonic clock after `mono_ms`.
fn next_flush_after(mono_ms: u64) -> u64 {
    (mono_ms / FLUSH_INTERVAL_MS + 1) * FLUSH_INTERVAL_MS
}
