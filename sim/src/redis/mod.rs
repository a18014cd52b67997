//! The simulated Redis server: a pure state machine ([`model`]) running scripts with an embedded
//! Lua (`lua`), whose `redis.call` reads its arguments with Redis's command parser ([`parse`]),
//! wrapped as a madsim node ([`node`]), and the client side ([`store`]).

mod bit;
mod cjson;
mod lua;
pub mod model;
pub mod node;
pub mod parse;
pub mod store;

pub use lua::compile as compile_script;
pub use model::{KeyEffect, RedisModel, Snapshot};
pub use store::SimRedis;
