//! The simulator's nemesis: carries out a scenario's [`Actions`] at true times.
//!
//! The schedule is expanded once, in `lockcheck_core::schedule`; one task on the simulator's main
//! node sleeps to each action and applies it to the simulated world. Partitions are counted per
//! link (in [`World`]), so overlapping partitions heal correctly.

use crate::world::World;
use lockcheck_core::history::{Kind, Op};
use lockcheck_core::scenario::CrashScope;
use lockcheck_core::schedule::{Action, Actions, Cut};
use lockcheck_core::topology::Topology;
use madsim::runtime::Handle;
use std::sync::Arc;
use std::time::Duration;

/// Applies the actions of `timeline` that are due now, at once, and returns the rest.
///
/// The runner calls this after creating the client nodes and before any of them has run: a fault
/// scheduled for the run's start (a partition at 0 ms) is in place for the clients' first
/// request, instead of racing it.
pub fn apply_due(world: &World, mut timeline: Actions) -> Actions {
    let now = world.true_ns();
    let due = timeline.iter().take_while(|(at, _, _)| *at <= now).count();
    for (_, action, text) in timeline.drain(..due) {
        apply(world, action, text);
    }
    timeline
}

/// Applies `timeline` in order, sleeping to each action's time. Runs on the main node.
pub async fn run(world: Arc<World>, timeline: Actions) {
    for (at, action, text) in timeline {
        let now = world.true_ns();
        if at > now {
            madsim::time::sleep(Duration::from_nanos(at - now)).await;
        }
        apply(&world, action, text);
    }
}

/// Applies one action now and records it.
fn apply(world: &World, action: Action, text: String) {
    let handle = Handle::current();
    let topology = &world.topology;
    let target = match &action {
        Action::Pause(n)
        | Action::Resume(n)
        | Action::Crash(n, _)
        | Action::Restart(n)
        | Action::ClockJump(n, _)
        | Action::ClockDrift(n, _)
        | Action::MessagesStart(n, ..)
        | Action::MessagesEnd(n, _)
        | Action::MessagesSettled(n)
        | Action::Skipped(n)
        | Action::Failover(n) => *n,
        Action::Cut(_, cut) | Action::Heal(_, cut) => cut.group[0],
    };
    let id = |n: usize| world.node_id(n);
    let kind = action.kind();
    let moves_reach = matches!(
        action,
        Action::Pause(_)
            | Action::Resume(_)
            | Action::Crash(..)
            | Action::Restart(_)
            | Action::Cut(..)
            | Action::Heal(..)
    );
    match action {
        Action::Skipped(_) | Action::MessagesSettled(_) => {}
        Action::Failover(n) => world.set_primary(n),
        Action::Pause(n) => world.pause(&handle, n),
        Action::Resume(n) => world.resume(&handle, n),
        Action::Crash(n, scope) => {
            handle.kill(id(n));
            world.set_crashed(n, scope);
            // A dead process's kernel closes its sockets: its peers hear of it at once. A dead
            // machine says nothing; its peers learn by their timeouts.
            if scope == CrashScope::Process {
                crate::net::reset_connections(world, n);
            }
        }
        Action::Restart(n) => {
            handle.restart(id(n));
            world.set_restarted(n);
        }
        Action::ClockJump(n, by) => world.adjust_clock(n, |c, t| c.jump(t, by)),
        Action::ClockDrift(n, rate) => world.adjust_clock(n, |c, t| c.set_rate(t, rate)),
        // The network (crate::net) drops or holds messages on cut links when they are sent.
        Action::Cut(_, cut) => {
            for (a, b) in links_across(topology, &cut) {
                world.links().cut(a, b, cut.hold);
            }
        }
        Action::Heal(_, cut) => {
            for (a, b) in links_across(topology, &cut) {
                world.links().heal(a, b, cut.hold);
                if !world.links().is_cut(a, b) {
                    crate::net::release_held(world, a, b);
                }
            }
        }
        Action::MessagesStart(n, fault, loss, delay) => {
            world
                .links()
                .set_message_fault(n, fault, Some((loss, delay)))
        }
        Action::MessagesEnd(n, fault) => world.links().set_message_fault(n, fault, None),
    }
    if moves_reach {
        world.reach_changed();
    }
    world.record(
        target,
        Kind::Observe,
        Op::Nemesis {
            kind: kind.to_string(),
            action: text,
            target: Some(topology.name(target).to_string()),
        },
    );
}

/// Both directions of every link the partition cuts: between its group and its other side (by
/// default every other node). The liveness probe is left out: it starts only after every
/// partition has healed.
fn links_across(topology: &Topology, cut: &Cut) -> Vec<(usize, usize)> {
    let mut links = Vec::new();
    for &a in &cut.group {
        for b in (0..topology.len()).filter(|&b| {
            cut.cuts(a, b) && topology.role(b) != lockcheck_core::topology::Role::Probe
        }) {
            links.push((a, b));
            links.push((b, a));
        }
    }
    links
}
