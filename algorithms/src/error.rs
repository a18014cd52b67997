//! Errors of stores and algorithms.

use thiserror::Error;

/// Why a store call did not return a reply.
#[derive(Clone, Debug, Error, PartialEq, Eq)]
pub enum StoreError {
    /// No reply in time. The command may or may not have been applied: a real Redis applies a SET
    /// whose reply was lost, so an algorithm must treat this as "maybe applied".
    #[error("no reply within the request timeout (the command may have been applied)")]
    Timeout,
    /// The request was refused before reaching the server (connection refused, reset before
    /// sending). The command was certainly not applied.
    #[error("server unreachable: {0}")]
    Unreachable(String),
    /// The connection closed (the server process died, its socket was reset) after the request
    /// was sent and before its reply came. Like [`StoreError::Timeout`], the command may or may
    /// not have been applied; unlike it, the client learns at once instead of after its timeout.
    #[error("connection lost before the reply (the command may have been applied): {0}")]
    ConnectionLost(String),
}

impl StoreError {
    /// Whether the request may have been applied: no reply came, but the request may have
    /// reached the server (a timeout, or a connection lost after sending). An algorithm must
    /// then treat the command as "maybe applied".
    pub fn maybe_applied(&self) -> bool {
        matches!(self, StoreError::Timeout | StoreError::ConnectionLost(_))
    }
}

/// Why a lock operation failed (as opposed to "the lock is held by someone else", which is an
/// ordinary outcome, not an error).
#[derive(Clone, Debug, Error, PartialEq, Eq)]
pub enum LockError {
    /// The store did not answer.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The server answered with an error reply.
    #[error("server error: {0}")]
    Server(String),
    /// The server answered with a reply the algorithm does not expect (a bug in the model or a
    /// mismatched server version).
    #[error("unexpected reply: {0}")]
    UnexpectedReply(String),
    /// A user's script (`redis-script`) failed: a Lua runtime error, a key outside `KEYS`, a
    /// command the server refused. Kept apart from [`LockError::Server`] so that the history
    /// names the script at fault rather than blaming the server.
    #[error("the {script} script failed: {message}")]
    Script {
        /// Which script: `acquire`, `acquire[2]`, `release`, `extend`.
        script: String,
        /// The server's error reply, with the script's line when Redis gives one.
        message: String,
    },
}
