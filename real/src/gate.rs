//! A client's pause gate: how a "client pause" fault is real in this harness.
//!
//! The lock algorithms and the workload run as tasks in this process, so a paused client cannot
//! be a stopped OS process. Instead every client owns a gate, and its task passes the gate at each
//! of its await points: before and after every [`Env::sleep`](lockcheck_algorithms::Env::sleep),
//! before and after every store call, before and after every touch of the resource. While the gate
//! is closed, the task waits there. To the servers and the resource this is what a frozen process
//! looks like: nothing is sent, and replies and timers that fire meanwhile are acted upon only
//! after the pause, when the task goes on from where it stopped.
//!
//! A client library may also run tasks of its own that no gate stops: the ZooKeeper client pings
//! its server from a task of the crate. So the gate freezes the client's network as well: every
//! [`Link`] attached to it (the client's proxy to each server) is cut while the gate is closed,
//! and nothing the library sends or is sent reaches the other side until the pause ends. The
//! server hears nothing from the client, as from a frozen process, and expires its session once
//! the timeout passes. What the library sees is not quite a frozen process's view: it keeps
//! running, so it notices the silence while paused (the ZooKeeper crate reports the connection
//! lost after 2/5 of the session timeout and gives the session up after 7/5 of it), where a
//! frozen client notices it on waking. Either way the client learns of the loss only after the
//! pause, because notices are handed out only while the gate is open.

use crate::proxy::Link;
use std::sync::{Arc, Mutex};
use tokio::sync::watch;

/// A gate that a client's task passes at every await point. Cloning gives another handle to the
/// same gate (the nemesis holds one, the client's env and stores hold others).
#[derive(Clone, Debug)]
pub struct PauseGate {
    /// `true` while paused.
    paused: Arc<watch::Sender<bool>>,
    /// The client's network links, cut while paused.
    links: Arc<Mutex<Vec<Link>>>,
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
            links: Arc::new(Mutex::new(Vec::new())),
        }
    }

    /// Freezes `link` with the client from now on: cut while the gate is closed (at once, if it
    /// is closed now).
    pub fn attach(&self, link: Link) {
        let mut links = self.links.lock().unwrap_or_else(|p| p.into_inner());
        if self.is_closed() {
            link.cut();
        }
        links.push(link);
    }

    /// Closes the gate: the client stops at its next await point, and its links are cut.
    pub fn close(&self) {
        let links = self.links.lock().unwrap_or_else(|p| p.into_inner());
        if !self.paused.send_replace(true) {
            links.iter().for_each(Link::cut);
        }
    }

    /// Opens the gate: a client waiting at it goes on, and its links pass again (unless a
    /// partition still cuts them).
    pub fn open(&self) {
        let links = self.links.lock().unwrap_or_else(|p| p.into_inner());
        if self.paused.send_replace(false) {
            links.iter().for_each(Link::heal);
        }
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

    #[tokio::test(flavor = "current_thread")]
    async fn a_closed_gate_cuts_its_links_once_and_opening_heals_them() {
        let upstream = std::net::SocketAddr::from(([127, 0, 0, 1], 9));
        let proxy = crate::proxy::Proxy::start(upstream, 0).await.unwrap();
        let other = crate::proxy::Proxy::start(upstream, 0).await.unwrap();
        let gate = PauseGate::new();
        gate.attach(proxy.link());
        gate.close();
        gate.close();
        // Attached while closed: cut at once.
        gate.attach(other.link());
        use crate::proxy::Mode;
        assert_eq!(proxy.link().mode(), Mode::Blackhole);
        assert_eq!(other.link().mode(), Mode::Blackhole);
        // A partition that outlasts the pause keeps the link cut.
        other.link().cut();
        gate.open();
        assert_eq!(proxy.link().mode(), Mode::Pass, "closed twice, healed once");
        assert_eq!(other.link().mode(), Mode::Blackhole);
        other.link().heal();
        assert_eq!(other.link().mode(), Mode::Pass);
    }
}
