//! [`Env`] for a real client: the host's clocks, tokio's timers, seeded randomness, and the
//! client's [`PauseGate`].

use crate::gate::PauseGate;
use crate::timeshift::ClockShift;
use lockcheck_algorithms::{Env, LockEvent};
use lockcheck_core::randomness::ClientRng;
use std::cell::RefCell;
use std::rc::Rc;
use std::sync::OnceLock;
use std::time::Duration;

/// What a client's env does with the events its lock reports (the runner records them).
pub type Observer = Rc<dyn Fn(LockEvent)>;

/// The world as a real client sees it.
///
/// - `wall_now` and `mono_now` are the host's clocks (`CLOCK_REALTIME`, and `CLOCK_MONOTONIC`
///   measured from a process-wide origin) as the client's [`ClockShift`] moves them: untouched
///   until the nemesis jumps or drifts this client's clock, which it does as the simulator does.
/// - `sleep` is [`tokio::time::sleep`] for the duration as the client's clock measures it (a clock
///   running at rate 2 measures a second in half a real one), with the client's gate passed
///   before and after: a paused client is frozen at its next await point, and a sleep that ends
///   during the pause goes on only when the pause is over (as a timer that fires in a stopped
///   process is acted upon after `SIGCONT`).
/// - `random_u64` draws from the client's [`ClientRng`], seeded from the scenario's seed, the
///   client's node and its restarts exactly as the simulated client's is, so tokens, jitter and
///   roles are the same from run to run and the same as in the simulation of the scenario (the
///   interleaving is not).
pub struct RealEnv {
    rng: RefCell<ClientRng>,
    gate: PauseGate,
    clock: Rc<RefCell<ClockShift>>,
    observer: Option<Observer>,
}

/// The origin of every [`RealEnv::mono_now`] reading in this process, on the host's monotonic
/// clock in ns.
fn mono_origin_ns() -> i64 {
    static ORIGIN: OnceLock<i64> = OnceLock::new();
    *ORIGIN.get_or_init(|| ClockShift::default().mono_ns())
}

impl RealEnv {
    /// The env of the client at node `client` after `restarts` restarts, in a run with seed
    /// `seed`, frozen by `gate`.
    pub fn new(seed: u64, client: usize, restarts: u64, gate: PauseGate) -> RealEnv {
        RealEnv {
            rng: RefCell::new(ClientRng::for_client(seed, client, restarts)),
            gate,
            clock: Rc::default(),
            observer: None,
        }
    }

    /// Reads the client's clocks from `clock` (which the nemesis moves).
    pub fn with_clock(mut self, clock: Rc<RefCell<ClockShift>>) -> RealEnv {
        self.clock = clock;
        self
    }

    /// Reports the lock's events to `observer`.
    pub fn with_observer(mut self, observer: Observer) -> RealEnv {
        self.observer = Some(observer);
        self
    }
}

impl Env for RealEnv {
    fn wall_now(&self) -> Duration {
        Duration::from_nanos(self.clock.borrow().wall_ns().max(0) as u64)
    }

    fn mono_now(&self) -> Duration {
        let origin = mono_origin_ns();
        Duration::from_nanos((self.clock.borrow().mono_ns() - origin).max(0) as u64)
    }

    /// A rate change during the sleep is not followed: the sleep keeps the rate it began with.
    async fn sleep(&self, duration: Duration) {
        self.gate.pass().await;
        let real = self.clock.borrow().true_duration(duration);
        tokio::time::sleep(real).await;
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
    use std::time::Instant;

    #[test]
    fn clients_of_one_seed_draw_different_tokens_and_the_same_ones_every_run() {
        let a = RealEnv::new(7, 0, 0, PauseGate::new());
        let b = RealEnv::new(7, 1, 0, PauseGate::new());
        let again = RealEnv::new(7, 0, 0, PauseGate::new());
        let token = a.new_token();
        assert_ne!(token, b.new_token());
        assert_eq!(token, again.new_token());
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_fast_clock_sleeps_shorter_and_a_jump_moves_wall_time_only() {
        let clock = Rc::new(RefCell::new(ClockShift::default()));
        let env = RealEnv::new(0, 0, 0, PauseGate::new()).with_clock(clock.clone());
        let (wall, mono) = (env.wall_now(), env.mono_now());
        clock.borrow_mut().jump(3_600_000_000_000);
        assert!(env.wall_now() >= wall + Duration::from_secs(3_599));
        assert!(env.mono_now() < mono + Duration::from_secs(60));
        // At rate 1000 a client-clock minute is 60 real ms: the sleep ends, and the client's
        // monotonic clock has moved on by at least that minute.
        clock.borrow_mut().drift(1000.0);
        let before = env.mono_now();
        env.sleep(Duration::from_secs(60)).await;
        assert!(env.mono_now() >= before + Duration::from_secs(60));
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_sleep_that_ends_during_a_pause_waits_for_the_resume() {
        let gate = PauseGate::new();
        let env = RealEnv::new(0, 0, 0, gate.clone());
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
