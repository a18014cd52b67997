//! [`RedisStore`] over a real connection: a thin mapping of the algorithms' [`Command`]s onto the
//! `redis` crate, and of its replies onto [`Reply`], as the simulated Redis
//! (`lockcheck_sim::redis::model`) answers.
//!
//! - Every command goes out as the argument vector [`Command::to_argv`] builds (every variant has
//!   one), except scripts: [`Command::Eval`] is sent as `EVALSHA sha numkeys keys… args…` and, if
//!   the server answers `NOSCRIPT`, as `EVAL source …` (which also loads it for next time). The
//!   two round trips share one request timeout.
//! - Replies: integer → [`Reply::Int`], bulk string → [`Reply::Bulk`], nil → [`Reply::Nil`],
//!   status → [`Reply::Status`] (`+OK` → `Status("OK")`), error → [`Reply::Error`] with Redis's
//!   text (`ERR …`, `WRONGTYPE …`), array → [`Reply::Array`], element by element. The connection
//!   speaks RESP2, as the model does; RESP3-only types are mapped to their RESP2 form.
//! - No reply within the request timeout → [`StoreError::Timeout`] (the command may have been
//!   applied). A connection refused (the server is down) → [`StoreError::Unreachable`] (certainly
//!   not applied). A connection that breaks after the command was sent → `Timeout` too: the server
//!   may have applied it before it died.
//! - A broken connection is dropped and the next call connects again, as a client library with
//!   reconnection does; a timed-out one is kept (its late reply is discarded in order).
//! - Pub/sub ([`RedisStore::subscribe`]) goes over a connection of its own, as Redisson's does,
//!   opened at the first subscription. When it breaks (its stream ends), the next wait opens it
//!   again and subscribes to every channel kept; what was published in between is lost.
//!   Unsubscribing is local (see the trait), as in the simulation.
//! - Behind Sentinel ([`RealRedis::behind_sentinel`]), connecting starts by asking Sentinel which
//!   server is the primary, as a Sentinel-aware client library does; a `READONLY` reply (the
//!   server was demoted to a replica under the connection) drops the connection, so the next
//!   call asks again, and is [`StoreError::Unreachable`]: the write was not applied, and the
//!   primary was not reached.

use crate::endpoints::Login;
use crate::gate::PauseGate;
use crate::replication::SentinelRoute;
use futures_util::{FutureExt, StreamExt};
use lockcheck_algorithms::redis::{Command, RedisStore, Reply};
use lockcheck_algorithms::StoreError;
use redis::aio::{MultiplexedConnection, PubSubSink, PubSubStream};
use redis::{
    AsyncConnectionConfig, Client, ConnectionAddr, ConnectionInfo, IntoConnectionInfo, Msg,
    RedisConnectionInfo, Value,
};
use std::cell::RefCell;
use std::collections::{BTreeMap, VecDeque};
use std::net::SocketAddr;
use std::time::Duration;

/// Which server a connection goes to.
enum Target {
    /// Always this address.
    Fixed(SocketAddr),
    /// The primary Sentinel names at each (re)connection.
    Primary(SentinelRoute),
}

/// One client's connection to one real Redis server.
pub struct RealRedis {
    target: Target,
    timeout: Duration,
    gate: PauseGate,
    login: Login,
    connection: RefCell<Option<MultiplexedConnection>>,
    /// The subscription connection, once a lock subscribed.
    pubsub: RefCell<Option<PubSubLink>>,
    /// The channels subscribed, each with the messages received and not taken yet.
    channels: RefCell<BTreeMap<String, VecDeque<String>>>,
}

/// A subscription connection of its own, as Redisson opens one: its sink sends `SUBSCRIBE`,
/// its stream brings the messages (and ends when the connection breaks, when the link is
/// dropped).
struct PubSubLink {
    sink: PubSubSink,
    stream: PubSubStream,
}

/// Why one exchange did not produce a value.
enum Failure {
    /// Could not connect: the command was not sent.
    Refused(String),
    /// The connection broke with the command possibly sent.
    Broken(String),
}

impl RealRedis {
    /// A connection to the server at `addr`; each command waits at most `timeout` for its reply.
    /// The client passes `gate` before and after every command (see [`PauseGate`]). Nothing is
    /// connected until the first command.
    pub fn new(addr: SocketAddr, timeout: Duration, gate: PauseGate) -> RealRedis {
        RealRedis {
            target: Target::Fixed(addr),
            timeout,
            gate,
            login: Login::default(),
            connection: RefCell::new(None),
            pubsub: RefCell::new(None),
            channels: RefCell::new(BTreeMap::new()),
        }
    }

    /// A connection to whichever server Sentinel names the primary when it connects (and again
    /// after a broken connection or a `READONLY` reply), reached by `route`; otherwise as
    /// [`RealRedis::new`].
    pub fn behind_sentinel(route: SentinelRoute, timeout: Duration, gate: PauseGate) -> RealRedis {
        RealRedis {
            target: Target::Primary(route),
            timeout,
            gate,
            login: Login::default(),
            connection: RefCell::new(None),
            pubsub: RefCell::new(None),
            channels: RefCell::new(BTreeMap::new()),
        }
    }

    /// The same, logging in as `login` on every connection (`AUTH`).
    pub fn with_login(mut self, login: Login) -> RealRedis {
        self.login = login;
        self
    }

    /// The server to connect to now.
    async fn addr(&self) -> Result<SocketAddr, Failure> {
        Ok(match &self.target {
            Target::Fixed(addr) => *addr,
            // Boxed: the lookup's own connection would make every client's future deeper still.
            Target::Primary(route) => Box::pin(route.primary()).await.map_err(Failure::Refused)?,
        })
    }

    async fn connect(&self) -> Result<MultiplexedConnection, Failure> {
        let addr = self.addr().await?;
        let client = Client::open(connection_info(addr, &self.login))
            .map_err(|e| Failure::Refused(e.to_string()))?;
        // The store's own timeout bounds every call; the crate's would only get in its way.
        let config = AsyncConnectionConfig::new()
            .set_connection_timeout(None)
            .set_response_timeout(None);
        client
            .get_multiplexed_async_connection_with_config(&config)
            .await
            .map_err(|e| Failure::Refused(e.to_string()))
    }

    /// The open connection, connecting first if there is none.
    async fn connection(&self) -> Result<MultiplexedConnection, Failure> {
        if let Some(connection) = self.connection.borrow().as_ref() {
            // Clones share one socket and keep the order of requests.
            return Ok(connection.clone());
        }
        let connection = self.connect().await?;
        *self.connection.borrow_mut() = Some(connection.clone());
        Ok(connection)
    }

    /// Sends one argument vector and reads its reply.
    async fn send(&self, argv: &[String]) -> Result<Reply, Failure> {
        let mut connection = self.connection().await?;
        let mut cmd = redis::cmd(&argv[0]);
        for arg in &argv[1..] {
            cmd.arg(arg);
        }
        let replied = match connection.send_packed_command(&cmd).await {
            Ok(value) => Ok(reply_of(value)),
            // An error reply the crate raised as an error is a reply all the same.
            Err(e) if e.code().is_some() => Ok(Reply::Error(match (e.code(), e.detail()) {
                (Some(code), Some(detail)) => format!("{code} {detail}"),
                _ => e.code().unwrap_or("ERR").to_string(),
            })),
            Err(e) => {
                *self.connection.borrow_mut() = None;
                Err(Failure::Broken(e.to_string()))
            }
        };
        match replied {
            // A replica refuses writes: this is not the primary (any more).
            Ok(Reply::Error(e))
                if e.starts_with("READONLY") && matches!(self.target, Target::Primary(_)) =>
            {
                *self.connection.borrow_mut() = None;
                Err(Failure::Refused(e))
            }
            other => other,
        }
    }

    /// Opens the subscription connection and subscribes it to every channel kept, within the
    /// request timeout.
    async fn open_pubsub(&self) -> Result<(), StoreError> {
        let open = async {
            let addr = self.addr().await.map_err(|f| match f {
                Failure::Refused(why) | Failure::Broken(why) => why,
            })?;
            let client =
                Client::open(connection_info(addr, &self.login)).map_err(|e| e.to_string())?;
            let (mut sink, stream) = client
                .get_async_pubsub()
                .await
                .map_err(|e| e.to_string())?
                .split();
            let channels: Vec<String> = self.channels.borrow().keys().cloned().collect();
            for channel in channels {
                sink.subscribe(channel).await.map_err(|e| e.to_string())?;
            }
            Ok::<_, String>((sink, stream))
        };
        match tokio::time::timeout(self.timeout, open).await {
            Ok(Ok((sink, stream))) => {
                *self.pubsub.borrow_mut() = Some(PubSubLink { sink, stream });
                Ok(())
            }
            Ok(Err(why)) => Err(StoreError::Unreachable(why)),
            Err(_) => Err(StoreError::Timeout),
        }
    }

    /// The next message on the subscription connection; `None` when there is no connection or
    /// it broke (then it is dropped, and the next subscription or wait opens a new one). The
    /// stream is borrowed only while polled, so a read abandoned by its waiter's timer loses
    /// nothing.
    async fn next_pushed(&self) -> Option<Msg> {
        let next = std::future::poll_fn(|cx| match self.pubsub.borrow_mut().as_mut() {
            Some(link) => link.stream.poll_next_unpin(cx),
            None => std::task::Poll::Ready(None),
        })
        .await;
        if next.is_none() {
            *self.pubsub.borrow_mut() = None;
        }
        next
    }

    /// Takes in the messages that have arrived, without waiting for more.
    fn drain_messages(&self) {
        while let Some(Some(message)) = self.next_pushed().now_or_never() {
            self.keep(&message);
        }
    }

    /// A message that arrived: kept for its waiter if its channel is subscribed to.
    fn keep(&self, message: &Msg) {
        let mut channels = self.channels.borrow_mut();
        if let Some(queue) = channels.get_mut(message.get_channel_name()) {
            queue.push_back(message.get_payload::<String>().unwrap_or_default());
        }
    }

    /// One command, including the `EVALSHA` → `EVAL` fallback.
    async fn exchange(&self, command: &Command) -> Result<Reply, Failure> {
        let Command::Eval { script, keys, args } = command else {
            return self.send(&command.to_argv()).await;
        };
        let mut argv = vec![
            "EVALSHA".to_string(),
            script.sha1.to_string(),
            keys.len().to_string(),
        ];
        argv.extend(keys.iter().cloned());
        argv.extend(args.iter().cloned());
        match self.send(&argv).await? {
            Reply::Error(e) if e.starts_with("NOSCRIPT") => self.send(&command.to_argv()).await,
            reply => Ok(reply),
        }
    }
}

/// How to reach the server at `addr` as `login`. No `CLIENT SETINFO` on connect: the only
/// commands on the wire are the algorithm's (and `AUTH`, when there is a login).
pub fn connection_info(addr: SocketAddr, login: &Login) -> ConnectionInfo {
    let mut settings = RedisConnectionInfo::default().set_skip_set_lib_name();
    if let Some(user) = &login.user {
        settings = settings.set_username(user);
    }
    if let Some(password) = &login.password {
        settings = settings.set_password(password);
    }
    ConnectionAddr::Tcp(addr.ip().to_string(), addr.port())
        .into_connection_info()
        .expect("a TCP address is connection info")
        .set_redis_settings(settings)
}

/// A reply as the algorithms (and the simulated Redis) see it.
pub fn reply_of(value: Value) -> Reply {
    match value {
        Value::Nil => Reply::Nil,
        Value::Int(n) => Reply::Int(n),
        Value::BulkString(bytes) => Reply::Bulk(String::from_utf8_lossy(&bytes).into_owned()),
        Value::Array(items) | Value::Set(items) => {
            Reply::Array(items.into_iter().map(reply_of).collect())
        }
        Value::SimpleString(s) => Reply::Status(s),
        Value::Okay => Reply::Status("OK".into()),
        Value::ServerError(e) => Reply::Error(match e.details() {
            Some(detail) => format!("{} {detail}", e.code()),
            None => e.code().to_string(),
        }),
        // RESP3 only; a RESP2 connection never sees these. Their RESP2 forms:
        Value::Map(pairs) => Reply::Array(
            pairs
                .into_iter()
                .flat_map(|(k, v)| [reply_of(k), reply_of(v)])
                .collect(),
        ),
        Value::Attribute { data, .. } => reply_of(*data),
        Value::Double(d) => Reply::Bulk(lockcheck_algorithms::redis::command::format_double(d)),
        Value::Boolean(b) => Reply::Int(i64::from(b)),
        Value::VerbatimString { text, .. } => Reply::Bulk(text),
        Value::BigNumber(n) => Reply::Bulk(String::from_utf8_lossy(&n).into_owned()),
        Value::Push { data, .. } => Reply::Array(data.into_iter().map(reply_of).collect()),
        // `Value` is non-exhaustive.
        other => Reply::Error(format!(
            "ERR unexpected reply type from the server: {other:?}"
        )),
    }
}

impl RealRedis {
    /// One command, waiting at most `timeout` for its reply.
    async fn call_within(&self, command: Command, timeout: Duration) -> Result<Reply, StoreError> {
        self.gate.pass().await;
        let result = tokio::time::timeout(timeout, self.exchange(&command)).await;
        self.gate.pass().await;
        match result {
            Ok(Ok(reply)) => Ok(reply),
            Ok(Err(Failure::Refused(why))) => Err(StoreError::Unreachable(why)),
            Ok(Err(Failure::Broken(why))) => {
                tracing::debug!("connection broke: {why}");
                Err(StoreError::Timeout)
            }
            Err(_) => Err(StoreError::Timeout),
        }
    }
}

impl RedisStore for RealRedis {
    async fn call(&self, command: Command) -> Result<Reply, StoreError> {
        self.call_within(command, self.timeout).await
    }

    /// As the simulated store: the request timeout plus what the server holds the command
    /// (`WAIT`'s own timeout), so that a `WAIT` longer than the request timeout gets its reply.
    async fn call_blocking(&self, command: Command, blocks: Duration) -> Result<Reply, StoreError> {
        self.call_within(command, self.timeout + blocks).await
    }

    async fn subscribe(&self, channel: &str) -> Result<(), StoreError> {
        self.gate.pass().await;
        // A subscription starts counting afresh: what came before it wakes nobody.
        self.drain_messages();
        if self.pubsub.borrow().is_none() {
            self.open_pubsub().await?;
        }
        let sink = self.pubsub.borrow().as_ref().map(|link| link.sink.clone());
        let Some(mut sink) = sink else {
            return Err(StoreError::Unreachable("no subscription connection".into()));
        };
        match tokio::time::timeout(self.timeout, sink.subscribe(channel)).await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => {
                *self.pubsub.borrow_mut() = None;
                return Err(StoreError::Unreachable(e.to_string()));
            }
            Err(_) => return Err(StoreError::Timeout),
        }
        self.channels
            .borrow_mut()
            .insert(channel.to_owned(), VecDeque::new());
        self.gate.pass().await;
        Ok(())
    }

    /// Local, as in the simulation: the server keeps the subscription until the connection
    /// closes, and what it still sends for the channel is dropped on arrival.
    fn unsubscribe(&self, channel: &str) {
        self.channels.borrow_mut().remove(channel);
    }

    async fn next_message(&self, channel: &str) -> String {
        // Reconnections that failed in a row: they back off as Redisson's do.
        let mut failed = 0u32;
        loop {
            let taken = self
                .channels
                .borrow_mut()
                .get_mut(channel)
                .and_then(VecDeque::pop_front);
            if let Some(message) = taken {
                self.gate.pass().await;
                return message;
            }
            if self.pubsub.borrow().is_none() {
                // Reconnect and subscribe again, as a client library does; what was published
                // in between is lost.
                if self.open_pubsub().await.is_err() {
                    let backoff = Duration::from_millis(2 << failed.min(12)).min(self.timeout);
                    failed += 1;
                    tokio::time::sleep(backoff).await;
                }
                continue;
            }
            if let Some(message) = self.next_pushed().await {
                self.keep(&message);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replies_map_as_the_simulated_redis_answers() {
        assert_eq!(reply_of(Value::Nil), Reply::Nil);
        assert_eq!(reply_of(Value::Okay), Reply::Status("OK".into()));
        assert_eq!(reply_of(Value::Int(-2)), Reply::Int(-2));
        assert_eq!(
            reply_of(Value::BulkString(b"tok".to_vec())),
            Reply::Bulk("tok".into())
        );
        assert_eq!(
            reply_of(Value::Array(vec![Value::Int(1), Value::Nil])),
            Reply::Array(vec![Reply::Int(1), Reply::Nil])
        );
        let error = redis::parse_redis_value(
            b"-WRONGTYPE Operation against a key holding the wrong kind of value\r\n",
        )
        .unwrap();
        assert_eq!(
            reply_of(error),
            Reply::Error(
                "WRONGTYPE Operation against a key holding the wrong kind of value".into()
            )
        );
        let error = redis::parse_redis_value(b"-ERR syntax error\r\n").unwrap();
        assert_eq!(reply_of(error), Reply::Error("ERR syntax error".into()));
    }
}
