//! Where a client's random choices come from, the same in both worlds.
//!
//! Every random choice a client makes (its tokens and owner ids, its retry jitter, a reader or
//! writer role) is drawn from a stream of its own, seeded from the scenario's seed, the client's
//! node and how many times it was restarted. The stream does not depend on what any other node
//! drew, on the network or on the interleaving, so `lockcheck run` and `lockcheck real` of one
//! scenario file give each client the same choices, and a shrunk schedule keeps them.
//!
//! The generator is SplitMix64 (Steele, Lea and Flood, 2014), written out here rather than taken
//! from a crate: a report must replay to the same history under every later lockcheck, and a
//! crate's generator may change its stream between versions (`rand`'s `StdRng` says it may).

/// One client process's random stream.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClientRng {
    state: u64,
}

/// SplitMix64's increment (the golden ratio in 64 bits).
const GAMMA: u64 = 0x9E37_79B9_7F4A_7C15;

impl ClientRng {
    /// The stream of node `node` in a run seeded with `seed`, for its process after `restarts`
    /// restarts (0: the first process; a restarted client is a new process, with new tokens).
    pub fn for_client(seed: u64, node: usize, restarts: u64) -> ClientRng {
        // Each input goes through the finaliser before it is mixed in, so that neighbouring
        // seeds, nodes and restarts start far apart.
        let state = mix(seed) ^ mix(mix(node as u64 + 1) ^ GAMMA) ^ mix(restarts ^ (GAMMA << 1));
        ClientRng { state }
    }

    /// The next number of the stream.
    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(GAMMA);
        mix(self.state)
    }
}

/// The choice (a uniform u64) for section `section` (0-based) of the client at node `node` in a
/// run seeded with `seed`: what a read/write lock's client draws to read or write. A pure
/// function, apart from every stream, so that a section's role never hangs on how many numbers
/// the client drew before it.
pub fn section_choice(seed: u64, node: usize, section: u64) -> u64 {
    // A domain of its own: the client streams' inputs are mixed with other constants.
    const SECTIONS: u64 = 0x5EC7_1085_0F2A_11CE;
    mix(mix(seed ^ SECTIONS) ^ mix(node as u64 + 1) ^ mix(section.wrapping_add(GAMMA)))
}

/// SplitMix64's finaliser (a bijection on u64 with good avalanche): also what scatters any
/// number that must look random but decides nothing (real mode's port draws).
pub fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_stream_is_fixed_forever() {
        // SplitMix64 from state 0 after the first increment: the published reference values.
        let mut rng = ClientRng { state: 0 };
        assert_eq!(rng.next_u64(), 0xE220_A839_7B1D_CDAF);
        assert_eq!(rng.next_u64(), 0x6E78_9E6A_A1B9_65F4);
        // A client's stream: pinned, since reports replay by it.
        assert_eq!(
            ClientRng::for_client(7, 3, 0).next_u64(),
            7_713_182_170_392_216_004
        );
        assert_eq!(section_choice(7, 3, 0), 4_466_319_838_004_156_744);
    }

    #[test]
    fn clients_restarts_and_seeds_get_streams_of_their_own() {
        let first = |seed, node, restarts| ClientRng::for_client(seed, node, restarts).next_u64();
        let mut seen = std::collections::BTreeSet::new();
        for seed in 0..4 {
            for node in 0..4 {
                for restarts in 0..4 {
                    assert!(seen.insert(first(seed, node, restarts)));
                }
            }
        }
    }
}
