//! Which simulated [`Server`](crate::server::Server) each backend runs: the one place a
//! backend's simulation is registered (an etcd cluster's members around the cluster's shared
//! state, made with the first member, as a ZooKeeper ensemble's). (Its client side is its store in [`crate::client`]'s
//! `SimStores`.)

use crate::etcd::cluster::Cluster;
use crate::etcd::member::EtcdMember;
use crate::etcd::node::EtcdServer;
use crate::mysql::node::MysqlServer;
use crate::redis::node::RedisServer;
use crate::server;
use crate::world::World;
use crate::zookeeper::ensemble::Ensemble;
use crate::zookeeper::member::ZkMember;
use crate::zookeeper::node::ZkServer;
use lockcheck_core::scenario::Backend;
use lockcheck_core::topology::Role;
use madsim::runtime::Handle;
use std::sync::Arc;

/// Creates server node `node` of `world`, running its algorithm's backend (for a ZooKeeper
/// ensemble, a member around the ensemble's shared state, made with the first member).
pub fn start_server(handle: &Handle, world: &Arc<World>, node: usize) {
    match world.scenario.algorithm.backend() {
        Backend::Redis => server::start::<RedisServer>(handle, world, node),
        Backend::ZooKeeper if world.scenario.is_zookeeper_ensemble() => {
            world.ensemble.get_or_init(|| {
                let members = world.topology.with_role(Role::Server);
                let started = members
                    .iter()
                    .map(|&m| world.mono_ns(m) / 1_000_000)
                    .collect();
                Arc::new(Ensemble::new(members, started))
            });
            server::start::<ZkMember>(handle, world, node)
        }
        Backend::ZooKeeper => server::start::<ZkServer>(handle, world, node),
        Backend::Mysql => server::start::<MysqlServer>(handle, world, node),
        Backend::Etcd if world.scenario.algorithm.servers(&world.scenario.params) > 1 => {
            world.etcd_cluster.get_or_init(|| {
                let members = world.topology.with_role(Role::Server);
                Arc::new(Cluster::new(members, world.scenario.seed))
            });
            server::start::<EtcdMember>(handle, world, node)
        }
        Backend::Etcd => server::start::<EtcdServer>(handle, world, node),
    }
}
