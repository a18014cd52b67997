//! What the search's tests share: [`search`], also the simulator's backend tests' helper
//! (`sim/tests/common/mod.rs` includes the same file), since those pin a model's verdicts by the
//! searches that find them.

#![allow(dead_code)] // each test binary uses its own part

pub mod search;
