//! What a crashed server keeps: a setting of the scenario (`params.persistence`, each
//! `per_node` one) that each backend's module judges (`crate::backend`), in a file of its own so
//! that both read it without reading each other.

use serde::{Deserialize, Serialize};

/// What a crashed server keeps on restart.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Persistence {
    /// Nothing: a restarted server is empty.
    #[default]
    None,
    /// The data set as of the last whole second (Redis `appendfsync everysec`): up to a second of
    /// writes is lost.
    Everysec,
    /// Every write is on disk before it is acknowledged (`appendfsync always`).
    Always,
}
