//! [`Env`] for a real client: the host's clocks, tokio's timers, seeded randomness, and the
//! client's [`PauseGate`].

use crate::gate::PauseGate;
use lockcheck_algorithms::{Env, LockEvent};
use rand::rngs::StdRng;
use rand::{RngCore, SeedableRng};
use std::cell::RefCell;
use std::rc::Rc;
use std::sync::OnceLock;
use std::time::{Duration, Instant, SystemTime};

/// What a client's env does with the events its lock reports (the runner records them).
pub type Observer = Rc<dyn Fn(LockEvent)>;

/// The world as a real client sees it.
///
/// - `wall_now` is the host's wall clock ([`SystemTime`]); `mono_now` is [`Instant`], measured from
///   a process-wide origin. Every client shares both: the host has one clock.
/// - `sleep` is [`tokio::time::sleep`], with the client's gate passed before and after: a paused
///   client is frozen at its next await point, and a sleep that ends during the pause goes on only
///   when the pause is over (as a timer that fires in a stopped process is acted upon after
///   `SIGCONT`).
/// - `random_u64` draws from a [`StdRng`] seeded from the scenario's seed and the client's index,
///   so tokens and retry jitter are the same from run to run (the interleaving is not).
pub struct RealEnv {
    rng: RefCell<StdRng>,
    gate: PauseGate,
    observer: Option<Observer>,
}

/// The origin of every [`RealEnv::mono_now`] reading in this process.
fn mono_origin() -> Instant {
    static ORIGIN: OnceLock<Instant> = OnceLock::new();
    *ORIGIN.get_or_init(Instant::now)
}

impl RealEnv {
    /// The env of the client with index `client` in a run with seed `seed`, frozen by `gate`.
    pub fn new(seed: u64, client: usize, gate: PauseGate) -> RealEnv {
        // Different clients must draw different tokens from the same scenario seed.
        let stream = seed ^ (client as u64 + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        RealEnv {
            rng: RefCell::new(StdRng::seed_from_u64(stream)),
            gate,
            observer: None,
        }
    }

    /// Reports the lock's events to `observer`.
    pub fn with_observer(mut self, observer: Observer) -> RealEnv {
        self.observer = Some(observer);
        self
    }

    /// The client's pause gate.
    pub fn gate(&self) -> &PauseGate {
        &self.gate
    }
}

impl Env for RealEnv {
    fn wall_now(&self) -> Duration {
        SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .unwrap_or_default()
    }

    fn mono_now(&self) -> Duration {
        mono_origin().elapsed()
    }

    async fn sleep(&self, duration: Duration) {
        self.gate.pass().await;
        tokio::time::sleep(duration).await;
        self.gate.pass().await;
    }

    fn random_u64(&self) -> u64 {
        self.rng.borrow_mut().next_u64()
    }

    fn observe(&self, event: LockEvent) {
        if let Some(observer) = &self.observer {
            observer(event);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clients_of_one_seed_draw_different_tokens_and_the_same_ones_every_run() {
        let a = RealEnv::new(7, 0, PauseGate::new());
        let b = RealEnv::new(7, 1, PauseGate::new());
        let again = RealEnv::new(7, 0, PauseGate::new());
        let token = a.new_token();
        assert_ne!(token, b.new_token());
        assert_eq!(token, again.new_token());
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_sleep_that_ends_during_a_pause_waits_for_the_resume() {
        let gate = PauseGate::new();
        let env = RealEnv::new(0, 0, gate.clone());
        gate.close();
        let opener = gate.clone();
        let started = Instant::now();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(60)).await;
            opener.open();
        });
        env.sleep(Duration::from_millis(1)).await;
        assert!(started.elapsed() >= Duration::from_millis(60));
    }
}
