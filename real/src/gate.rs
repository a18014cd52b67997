//! A client's pause gate: how a "client pause" fault is real in this harness.
//!
//! The lock algorithms and the workload run as tasks in this process, so a paused client cannot
//! be a stopped OS process. Instead every client owns a gate, and its task passes the gate at each
//! of its await points: before and after every [`Env::sleep`](lockcheck_algorithms::Env::sleep),
//! before and after every store call, before and after every touch of the resource. While the gate
//! is closed, the task waits there. To the servers and the resource this is what a frozen process
//! looks like: nothing is sent, and replies and timers that fire meanwhile are acted upon only
//! after the pause, when the task goes on from where it stopped.

use std::sync::Arc;
use tokio::sync::watch;

/// A gate that a client's task passes at every await point. Cloning gives another handle to the
/// same gate (the nemesis holds one, the client's env and stores hold others).
#[derive(Clone, Debug)]
pub struct PauseGate {
    /// `true` while paused.
    paused: Arc<watch::Sender<bool>>,
}

impl Default for PauseGate {
    fn default() -> Self {
        PauseGate::new()
    }
}

impl PauseGate {
    /// An open gate.
    pub fn new() -> PauseGate {
        PauseGate {
            paused: Arc::new(watch::Sender::new(false)),
        }
    }

    /// Closes the gate: the client stops at its next await point.
    pub fn close(&self) {
        self.paused.send_replace(true);
    }

    /// Opens the gate: a client waiting at it goes on.
    pub fn open(&self) {
        self.paused.send_replace(false);
    }

    /// Whether the gate is closed.
    pub fn is_closed(&self) -> bool {
        *self.paused.borrow()
    }

    /// Returns at once when the gate is open; otherwise waits until it opens.
    pub async fn pass(&self) {
        if !self.is_closed() {
            return;
        }
        let mut paused = self.paused.subscribe();
        // The sender lives in `self`, so the channel cannot close while we wait.
        let _ = paused.wait_for(|paused| !*paused).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test(flavor = "current_thread")]
    async fn a_closed_gate_holds_until_opened() {
        let gate = PauseGate::new();
        gate.pass().await;
        gate.close();
        let waiting = tokio::time::timeout(Duration::from_millis(20), gate.pass()).await;
        assert!(waiting.is_err(), "a closed gate let the client through");
        let opener = gate.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(10)).await;
            opener.open();
        });
        tokio::time::timeout(Duration::from_secs(5), gate.pass())
            .await
            .expect("an opened gate lets the client through");
        assert!(!gate.is_closed());
    }
}
