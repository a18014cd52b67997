//! The nodes of a run and their names.
//!
//! Names are part of the user interface (`client-0`, `redis-0`, `resource`); indices are what the
//! simulator uses. Index order is fixed: clients, then servers, then the resource, then the
//! liveness probe, so a node's index never depends on anything but the scenario.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};

/// What a node is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Role {
    /// A lock client running the workload.
    Client,
    /// A lock server (Redis, …).
    Server,
    /// The protected resource, which observes every access in true order.
    Resource,
    /// The client that checks, after the faults, that the lock becomes free again. It is not a
    /// scenario node: faults cannot name it.
    Probe,
}

/// The nodes of one scenario.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Topology {
    names: Vec<String>,
    roles: Vec<Role>,
}

impl Topology {
    /// The resource's name.
    pub const RESOURCE: &'static str = "resource";
    /// The liveness probe's name.
    pub const PROBE: &'static str = "probe";
    /// What every client's name starts with (`client-0`, …).
    pub const CLIENT_PREFIX: &'static str = "client-";
    /// The port every simulated service listens on.
    pub const PORT: u16 = 6379;

    /// `clients` clients and `servers` servers (named `{prefix}-N`: `redis-0`, `zk-0`), the
    /// resource and the probe.
    pub fn new(clients: usize, servers: usize, prefix: &str) -> Topology {
        let mut names = Vec::new();
        let mut roles = Vec::new();
        for i in 0..clients {
            names.push(format!("{}{i}", Self::CLIENT_PREFIX));
            roles.push(Role::Client);
        }
        for i in 0..servers {
            names.push(format!("{prefix}-{i}"));
            roles.push(Role::Server);
        }
        names.push(Self::RESOURCE.to_string());
        roles.push(Role::Resource);
        names.push(Self::PROBE.to_string());
        roles.push(Role::Probe);
        Topology { names, roles }
    }

    /// All node names, probe excluded (it is not the user's to name).
    pub fn names(&self) -> Vec<String> {
        self.names
            .iter()
            .zip(&self.roles)
            .filter(|(_, r)| **r != Role::Probe)
            .map(|(n, _)| n.clone())
            .collect()
    }

    /// The names for an error message: all of them when there are a few, else the first and
    /// how many there are (a thousand clients make no readable line).
    pub fn listed(&self) -> String {
        let names = self.names();
        if names.len() <= 12 {
            return names.join(", ");
        }
        format!(
            "{}, …, {} ({} nodes)",
            names[..8].join(", "),
            names[names.len() - 1],
            names.len()
        )
    }

    /// Number of nodes, probe included.
    pub fn len(&self) -> usize {
        self.names.len()
    }

    /// Whether there are no nodes (never true for a built topology).
    pub fn is_empty(&self) -> bool {
        self.names.is_empty()
    }

    /// The index of a user-nameable node.
    pub fn index_of(&self, name: &str) -> Option<usize> {
        self.names
            .iter()
            .position(|n| n == name)
            .filter(|&i| self.roles[i] != Role::Probe)
    }

    /// The name of node `index`.
    pub fn name(&self, index: usize) -> &str {
        &self.names[index]
    }

    /// The role of node `index`.
    pub fn role(&self, index: usize) -> Role {
        self.roles[index]
    }

    /// Indices of the nodes with `role`, in order.
    pub fn with_role(&self, role: Role) -> Vec<usize> {
        (0..self.len()).filter(|&i| self.roles[i] == role).collect()
    }

    /// The resource's index.
    pub fn resource(&self) -> usize {
        self.with_role(Role::Resource)[0]
    }

    /// The probe's index.
    pub fn probe(&self) -> usize {
        self.with_role(Role::Probe)[0]
    }

    /// The simulated address of node `index`.
    pub fn addr(index: usize) -> SocketAddr {
        let ip = Ipv4Addr::new(10, 0, (index / 250) as u8, (index % 250 + 1) as u8);
        SocketAddr::new(IpAddr::V4(ip), Self::PORT)
    }

    /// The node at a simulated address.
    pub fn index_of_addr(addr: SocketAddr) -> Option<usize> {
        match addr.ip() {
            IpAddr::V4(ip) => {
                let [_, _, hi, lo] = ip.octets();
                Some(hi as usize * 250 + lo as usize - 1)
            }
            IpAddr::V6(_) => None,
        }
    }
}
