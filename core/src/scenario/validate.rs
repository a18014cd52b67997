//! What a scenario file can get wrong that its shape cannot express, each error naming its
//! field. The rules of one backend are its module's (`crate::backend`), asked at fixed points so
//! that messages come in one order whatever the backend.

use super::*;

impl Scenario {
    /// Checks everything a file can get wrong that its shape cannot express.
    pub fn validate(&self) -> Result<(), ScenarioError> {
        self.validate_ranges().map_err(ScenarioError::Invalid)?;
        self.validate_server_clocks()
            .map_err(ScenarioError::Invalid)?;
        let bad = |m: String| Err(ScenarioError::Invalid(m));
        let p = &self.params;
        let algorithm = self.algorithm;
        let name = algorithm.name();
        let description = algorithm.description();
        let backend = algorithm.backend();
        if p.ttl_ms.is_some() && p.ttl_ms_for(algorithm).is_none() {
            return bad(format!(
                "params.ttl_ms: {name} has no lease (its lock ends when {}), so a TTL does not apply",
                match description.lease {
                    Lease::Session => "the holder's session does",
                    _ => "it is released or the server ends the transaction",
                }
            ));
        }
        // Each backend's group applies to the algorithms on that backend only. (Checked for every
        // generated case, so the given names are worked out only for the message.)
        let foreign = crate::backend::ALL
            .iter()
            .filter(|&&on| on != backend)
            .find_map(|&on| on.given(p).map(|given| (on, given)));
        if let Some((on, given)) = foreign {
            return bad(format!(
                "params.{} ({}): {name} does not run on {}; its settings are params.{}",
                on.name(),
                given.join(", "),
                on.name(),
                backend.name()
            ));
        }
        let policies: Vec<Persistence> = p
            .per_node
            .values()
            .filter_map(|n| n.persistence)
            .chain(p.persistence)
            .collect();
        let common = Common {
            algorithm,
            watchdog: p.watchdog,
            fencing: p.fencing,
            policies: &policies,
        };
        backend
            .check_group(p, &common)
            .map_err(ScenarioError::Invalid)?;
        if p.allow_even_nodes && description.servers == Servers::One {
            return bad(format!(
                "params.allow_even_nodes: {name} runs against one server; it applies to a lock \
                 over independent masters"
            ));
        }
        match description.servers {
            // One service: how many servers make one is the backend's rule.
            Servers::One => {
                if let Some(n) = p.nodes.filter(|&n| n != 1) {
                    backend
                        .check_nodes(name, n)
                        .map_err(ScenarioError::Invalid)?;
                }
            }
            Servers::Masters { default, min } => {
                let n = p.nodes.unwrap_or(default);
                if n < min {
                    return bad(format!(
                        "params.nodes: {name} needs at least {min} masters, got {n}"
                    ));
                }
                if n.is_multiple_of(2) && !p.allow_even_nodes {
                    return bad(format!(
                        "params.nodes: {n} {name} masters need a quorum of {} yet tolerate no \
                         more failures than {} would; use an odd number, or set \
                         params.allow_even_nodes: true",
                        n / 2 + 1,
                        n - 1
                    ));
                }
            }
        }
        backend
            .check_servers(p, &common)
            .map_err(ScenarioError::Invalid)?;
        if let Some(variant) = &p.variant {
            let shown = crate::input::clip(variant);
            if description.variants.is_empty() {
                return bad(format!(
                    "params.variant: {name} has no library variants ('{shown}' given); it \
                     follows one behaviour"
                ));
            }
            if description.variant(Some(variant)).is_none() {
                return bad(format!(
                    "params.variant: unknown variant '{shown}' of {name} (known: {})",
                    description.variant_names().join(", ")
                ));
            }
        }
        if p.watchdog && !description.renews {
            return bad(format!(
                "params.watchdog: {name} has no watchdog: {}",
                match description.lease {
                    Lease::Session => "its session is kept alive by the client all along",
                    _ => "nothing renews its lock while it is held",
                }
            ));
        }
        if p.fencing {
            if let Fencing::Unavailable(why) = description.fencing {
                return bad(format!(
                    "params.fencing: {name} has no fencing token: {why}"
                ));
            }
        }
        let topology = self.topology();
        for node in p.per_node.keys() {
            let server = topology
                .index_of(node)
                .is_some_and(|i| topology.role(i) == crate::topology::Role::Server);
            if !server {
                return bad(format!(
                    "params.per_node: '{}' is not a server of this scenario",
                    input::clip(node)
                ));
            }
        }
        backend
            .check_server_settings(p, &common)
            .map_err(ScenarioError::Invalid)?;
        if self.workload.read_fraction.is_some() && !self.algorithm.has_readers() {
            let with_readers: Vec<&str> = Algorithm::ALL
                .iter()
                .filter(|a| a.has_readers())
                .map(|a| a.name())
                .collect();
            return bad(format!(
                "workload.read_fraction: {} has no shared mode; it applies to {}",
                self.algorithm.name(),
                with_readers.join(", ")
            ));
        }
        if self.workload.reentrant_depth > 1 && !self.algorithm.reentrant() {
            return bad(format!(
                "workload.reentrant_depth: {} is not reentrant; a nested acquire would wait for \
                 the client's own lock",
                self.algorithm.name()
            ));
        }
        if self.workload.hold_until_validity && !self.algorithm.reports_validity(p) {
            return bad(format!(
                "workload.hold_until_validity: {} has no lease (here), so its lock reports no \
                 validity to hold until; a client doing so would never stop",
                self.algorithm.name()
            ));
        }
        if self.workload.hold_until_validity && p.watchdog {
            return bad(
                "workload.hold_until_validity with params.watchdog: the watchdog keeps renewing, \
                 so a client holding until its validity ends would never stop"
                    .into(),
            );
        }
        self.validate_history_size()
            .map_err(ScenarioError::Invalid)?;
        self.validate_faults()
    }

    /// Pinned server clock origins name servers of the scenario and lie within
    /// [`crate::limits::ORIGIN_SPAN_MS`].
    fn validate_server_clocks(&self) -> Result<(), String> {
        use crate::backend::zookeeper::ENSEMBLE_CLOCK;
        use crate::limits::ORIGIN_SPAN_MS;
        let scenario = self;
        let ServerClocks::Pinned(origins) = &scenario.server_clocks else {
            return Ok(());
        };
        let topology = scenario.topology();
        let servers: Vec<&str> = topology
            .with_role(crate::topology::Role::Server)
            .into_iter()
            .map(|s| topology.name(s))
            .collect();
        for (node, ms) in origins {
            if scenario.is_zookeeper_ensemble() && node != ENSEMBLE_CLOCK {
                return Err(format!(
                    "server_clocks.pinned: '{}' is a member of an ensemble, whose members share \
                     {ENSEMBLE_CLOCK}'s clock in the simulation: pin {ENSEMBLE_CLOCK}",
                    crate::input::clip(node)
                ));
            }
            if !servers.contains(&node.as_str()) {
                return Err(format!(
                    "server_clocks.pinned: '{}' is not a server of this scenario (its servers: {})",
                    crate::input::clip(node),
                    servers.join(", ")
                ));
            }
            if *ms >= ORIGIN_SPAN_MS {
                return Err(format!(
                    "server_clocks.pinned.{node}: an origin must be below {ORIGIN_SPAN_MS} ms, got {ms}"
                ));
            }
        }
        Ok(())
    }

    /// The workload fits in one run's history: a run that does every critical section it asks
    /// for records at least [`limits::workload_entries`] entries, and a history holds at most
    /// [`limits::MAX_HISTORY_ENTRIES`]. Refused before it runs, naming what asks for the most.
    /// (What grows with time instead, waits and retries, is folded or stops the run at the cap:
    /// [`crate::history::Recording`].)
    fn validate_history_size(&self) -> Result<(), String> {
        use crate::limits::{
            workload_entries, MAX_HISTORY_ENTRIES, NESTED_ENTRIES, SECTION_ENTRIES,
        };
        let w = &self.workload;
        let sections = u64::from(self.clients) * u64::from(w.acquisitions_per_client);
        let depth = u64::from(w.reentrant_depth);
        // The watchdog renews every third of the lease while a section is held.
        let renewals = match self.params.ttl_ms_for(self.algorithm) {
            Some(ttl) if self.params.watchdog && !w.hold_until_validity => {
                w.hold_ms.saturating_mul(3) / ttl.max(1)
            }
            _ => 0,
        };
        let max = MAX_HISTORY_ENTRIES as u64;
        let entries = workload_entries(sections, depth, renewals);
        if entries <= max {
            return Ok(());
        }
        let per_section = workload_entries(1, depth, renewals);
        let nested = NESTED_ENTRIES * (depth - 1);
        let (field, why) = if renewals > SECTION_ENTRIES + nested {
            (
                "workload.hold_ms",
                format!(
                    ", {renewals} of them the watchdog's renewals of a {} ms lease over a {} ms \
                     hold",
                    self.params.ttl_ms_for(self.algorithm).unwrap_or(0),
                    w.hold_ms
                ),
            )
        } else if nested > SECTION_ENTRIES {
            (
                "workload.reentrant_depth",
                format!(", {nested} of them for {} nested acquisitions", depth - 1),
            )
        } else {
            ("workload.acquisitions_per_client", String::new())
        };
        Err(format!(
            "{field}: {} client(s) × {} critical section(s) would record at least {entries} \
             history entries ({per_section} a section{why}), more than a run keeps ({max}); \
             {} section(s) in all would fit",
            self.clients,
            w.acquisitions_per_client,
            max / per_section
        ))
    }

    /// Every number within its documented range ([`crate::limits`]), each error naming its
    /// field: what keeps simulated time from overflowing and the simulator within what it can
    /// build, whatever the file says.
    fn validate_ranges(&self) -> Result<(), String> {
        use crate::limits::{self, any_ms, positive_ms, within};
        let p = &self.params;
        positive_ms("duration_ms", self.duration_ms)?;
        within("clients", self.clients, 1, limits::MAX_CLIENTS)?;
        if let Some(key) = &p.key {
            check_key(key).map_err(|e| format!("params.key: {e}"))?;
        }
        if let Some(n) = p.nodes {
            within("params.nodes", n, 1, limits::MAX_NODES)?;
        }
        if let Some(ttl) = p.ttl_ms {
            positive_ms("params.ttl_ms", ttl)?;
        }
        if !(0.0..1.0).contains(&p.drift_factor) {
            return Err(format!(
                "params.drift_factor must be in [0, 1), got {}",
                crate::input::float_text(p.drift_factor)
            ));
        }
        any_ms("params.restart_delay_ms", p.restart_delay_ms)?;
        for (node, n) in &p.per_node {
            if let Some(delay) = n.restart_delay_ms {
                any_ms(
                    &format!("params.per_node.{}.restart_delay_ms", input::clip(node)),
                    delay,
                )?;
            }
        }
        positive_ms("params.retry_delay_ms", p.retry_delay_ms)?;
        if let Some(n) = p.retry_count {
            within("params.retry_count", n, 1, limits::MAX_RETRY_COUNT)?;
        }
        crate::backend::check_ranges(p)?;
        positive_ms("params.request_timeout_ms", p.request_timeout_ms)?;
        let w = &self.workload;
        within(
            "workload.acquisitions_per_client",
            w.acquisitions_per_client,
            1,
            limits::MAX_ACQUISITIONS,
        )?;
        any_ms("workload.hold_ms", w.hold_ms)?;
        any_ms("workload.think_ms", w.think_ms)?;
        within(
            "workload.reentrant_depth",
            w.reentrant_depth,
            1,
            limits::MAX_REENTRANT_DEPTH,
        )?;
        if let Some(f) = w.read_fraction {
            if !(0.0..=1.0).contains(&f) {
                return Err(format!(
                    "workload.read_fraction must be in [0, 1], got {}",
                    crate::input::float_text(f)
                ));
            }
        }
        if self.faults.len() > limits::MAX_FAULTS {
            return Err(format!(
                "faults: at most {} faults, got {}",
                limits::MAX_FAULTS,
                self.faults.len()
            ));
        }
        let mut delays: u64 = 0;
        for (i, fault) in self.faults.iter().enumerate() {
            let field = |name: &str| format!("faults[{i}] ({}): {name}", fault.kind());
            match fault {
                Fault::Pause { for_ms, .. } | Fault::Partition { for_ms, .. } => {
                    positive_ms(&field("for_ms"), *for_ms)?
                }
                Fault::Loss { for_ms, rate, .. } => {
                    positive_ms(&field("for_ms"), *for_ms)?;
                    if !(0.0..=1.0).contains(rate) {
                        return Err(format!(
                            "{} must be in [0, 1], got {}",
                            field("rate"),
                            crate::input::float_text(*rate)
                        ));
                    }
                }
                Fault::Delay {
                    for_ms, extra_ms, ..
                } => {
                    positive_ms(&field("for_ms"), *for_ms)?;
                    positive_ms(&field("extra_ms"), *extra_ms)?;
                    delays = delays.saturating_add(*extra_ms);
                    if delays > limits::MAX_MS {
                        return Err(format!(
                            "{}: the delays' extra_ms add up to more than {} ms (365 days); \
                             overlapping delays add up, so their sum is bounded",
                            field("extra_ms"),
                            limits::MAX_MS
                        ));
                    }
                }
                Fault::ClockJump { by_ms, .. } => {
                    if *by_ms == 0 {
                        return Err(format!("{} must not be 0", field("by_ms")));
                    }
                    let max = limits::MAX_MS as i64;
                    within(&field("by_ms"), *by_ms, -max, max)
                        .map_err(|e| format!("{e} ms (at most 365 days either way)"))?;
                }
                Fault::ClockDrift { rate, .. }
                    if !(*rate > 0.0 && *rate <= limits::MAX_DRIFT_RATE) =>
                {
                    return Err(format!(
                        "{} must be in (0, {}], got {}",
                        field("rate"),
                        limits::MAX_DRIFT_RATE,
                        crate::input::float_text(*rate)
                    ));
                }
                _ => {}
            }
        }
        Ok(())
    }

    fn validate_faults(&self) -> Result<(), ScenarioError> {
        let topology = self.topology();
        let mut order: Vec<(u64, usize)> = self
            .faults
            .iter()
            .enumerate()
            .map(|(i, f)| (f.at_ms(), i))
            .collect();
        order.sort();
        // Whether each node is down, replayed in time order (restarts must follow crashes), and
        // which server is the primary.
        let mut down: BTreeMap<&str, bool> = BTreeMap::new();
        let mut primary = format!("{}-0", self.algorithm.server_prefix());
        // How far each node's wall clock is off by its jumps so far: at most MAX_MS either way,
        // so that it stays a valid time whatever the jumps' order.
        let mut jumped: BTreeMap<&str, i64> = BTreeMap::new();
        for (_, i) in order {
            let fault = &self.faults[i];
            let at = |m: &str| {
                Err(ScenarioError::Invalid(format!(
                    "faults[{i}] ({}): {m}",
                    fault.kind()
                )))
            };
            if fault.at_ms() >= self.duration_ms {
                return at(&format!(
                    "at_ms {} is not before the end of the run (duration_ms {})",
                    fault.at_ms(),
                    self.duration_ms
                ));
            }
            for node in fault.nodes() {
                if topology.index_of(node).is_none() {
                    return at(&format!(
                        "no node named '{}' (this scenario has {})",
                        input::clip(node),
                        topology.listed()
                    ));
                }
                if node == Topology::RESOURCE && !matches!(fault, Fault::Partition { .. }) {
                    return at(
                        "the resource is the checker's observer; only partitions may name it",
                    );
                }
            }
            match fault {
                Fault::Partition { isolate, .. } if isolate.is_empty() => {
                    return at("isolate must name at least one node");
                }
                Fault::Partition {
                    from: Some(from), ..
                } if from.is_empty() => {
                    return at("from must name at least one node (or be left out: everyone else)");
                }
                Fault::Partition {
                    isolate,
                    from: Some(from),
                    ..
                } if from.iter().any(|n| isolate.contains(n)) => {
                    let both: Vec<&str> = from
                        .iter()
                        .filter(|n| isolate.contains(n))
                        .map(String::as_str)
                        .collect();
                    return at(&format!(
                        "{} on both sides of the cut (isolate and from)",
                        both.join(", ")
                    ));
                }
                Fault::ClockJump { node, by_ms, .. } => {
                    let total = jumped.entry(node).or_default();
                    *total += by_ms;
                    if total.unsigned_abs() > crate::limits::MAX_MS {
                        return at(&format!(
                            "by_ms: {node}'s clock jumps add up to {total} ms here, beyond 365 \
                             days either way"
                        ));
                    }
                }
                Fault::Crash { node, .. } if down.insert(node, true) == Some(true) => {
                    return at(&format!("{node} is already down"));
                }
                Fault::Restart { node, .. } if down.insert(node, false) != Some(true) => {
                    return at(&format!("{node} was not crashed before this restart"));
                }
                Fault::Failover { node, .. } => {
                    if self.params.redis.replicas == 0 {
                        return at("there is no replica to promote (params.redis.replicas is 0)");
                    }
                    let is_server = topology
                        .index_of(node)
                        .is_some_and(|i| topology.role(i) == crate::topology::Role::Server);
                    if !is_server {
                        return at(&format!("{node} is not a server"));
                    }
                    if *node == primary {
                        return at(&format!("{node} is already the primary"));
                    }
                    primary = node.clone();
                }
                _ => {}
            }
        }
        Ok(())
    }
}
