//! `EVAL`: Redis Lua scripts run against the model by an embedded Lua 5.1, the Lua Redis runs.
//!
//! Lock algorithms put their critical steps (compare-and-delete, compare-and-extend, acquire plus
//! fencing token) in scripts because Redis runs a script atomically. The model therefore runs the
//! very script text the algorithm sends to a real server, and this module reproduces what Redis 7
//! does around it (`eval.c`, `script_lua.c`): the body compiled as a chunk named `@user_script`,
//! the `KEYS`/`ARGV` globals, `redis.call` and `redis.pcall`, the conversions between Lua values
//! and replies, the error texts and where they say the error was, and the read-only globals.
//!
//! The language is Redis's: stock Lua 5.1.5 (numbers are doubles, `tostring(10/2)` is `"5"`,
//! `//`, `&` and `goto` do not parse, `math.pow`, `table.getn` and `unpack` are there, error texts
//! read "attempt to index local 'x' (a nil value)"), with the libraries Redis 7.0 loads: base
//! (without `print`, `dofile`, `loadfile`, `getfenv`, `setfenv`, `newproxy`, as Redis 7.0 removes
//! them), string, table, math, LuaBitOp's `bit` (`bit.rs`) and lua-cjson's `cjson`
//! (`cjson.rs`), both written in Rust to their C sources, plus `redis.sha1hex`, `redis.log`
//! (which logs nothing) and `redis.replicate_commands`. Since 5.1's string hash is unseeded, the
//! order in which `pairs` visits a table's string keys is Redis's own. The conformance test
//! `the_simulated_lua_is_redis_5_1_with_its_libraries` (in `lockcheck-real`) holds these to a
//! real redis-server, error texts word for word.
//!
//! Deliberate differences from Redis:
//! - What Redis 7.0 gives scripts and the model does not have is refused when used, as a command
//!   the model lacks is: `math.random` and `math.randomseed`, any field of `cmsgpack`, `struct`
//!   and `coroutine` (an error crossing `coroutine.resume` would reach the script as a host
//!   value, not Redis's `{err=…}` table), cjson's setting functions, `redis.setresp`,
//!   `redis.set_repl`, `redis.breakpoint`, `redis.debug`, and a script with a `#!` line (Redis
//!   7's script flags).
//! - A command the model does not have (or a form of one: `ZADD NX`, `ZRANGE … REV`) is refused
//!   with `not modelled by the simulated Redis: NAME`, which no `pcall` can catch (see
//!   [`NotModelled`]): answering with a Redis-looking error would let a script carry on against a
//!   server that is not Redis.
//! - A non-integral number passed to `redis.call` is written as Redis 7.2+ writes it (`0.1`), not
//!   as 7.0's `%.17g` (`0.10000000000000001`); see [`float_argument`].
//! - Read-only tables are proxies (stock Lua has none): `pairs`, `next`, `ipairs` and `rawget`
//!   look through them, but `#` and `rawequal` see the proxy. Scripts do not take the length of
//!   a library table.
//! - A library function's argument error named through `pcall(f, …)` (`pcall(bit.band, 1, {})`)
//!   names the function (`'band'`), where Redis's C code cannot and says `'?'`.
//! - Determinism: a table keyed by tables or functions is visited by `pairs` in an order that
//!   depends on addresses, in Redis too; a script whose outcome depends on that order would make
//!   replays diverge.
//! - A script that never ends hangs the caller: there is no `SCRIPT KILL` and no time limit.
//! - One Lua state per thread runs the scripts of every simulated server (starting a state per
//!   server per run was a twentieth of a Redlock run). Redis's read-only sandbox is what makes
//!   that sound: a script can leave nothing behind that the next script sees, whichever server
//!   it runs on. What a script could still observe of the state's past — `collectgarbage("count")`,
//!   the addresses `tostring` prints — is as unspecified as in Redis; a script that stops the
//!   collector has it restarted when it ends (in Redis it would stay stopped for that server,
//!   which changes memory, not replies).

use lockcheck_algorithms::redis::command::{
    double_to_integer, fpconv_dtoa, Command, Reply, Script,
};

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use mlua::{Function, Lua, LuaOptions, MultiValue, StdLib, Table, Value};

use super::model::{KeyEffect, Keyspace};
use super::parse::{parse_command, ParseError};

/// Redis compiles scripts under this chunk name, which is what appears in its error messages.
const USER_SCRIPT: &str = "@user_script";

/// The prelude's chunk name: its functions stand in for Redis's C code, so error positions skip
/// them.
const PRELUDE_NAME: &str = "=redis";

/// Deeper tables than this are not converted into a reply; Redis stops at its Lua stack limit the
/// same way, and a self-referencing table must not overflow the harness's stack.
const MAX_REPLY_DEPTH: usize = 1000;

/// Sets up what scripts see, once per engine: the `redis` API, Redis's `pcall`, and Redis 7's
/// read-only globals. Redis makes the global table and the library tables read-only so that one
/// script can neither leave state behind for the next nor break the sandbox; stock Lua has no
/// read-only tables, so scripts get proxies that reject writes. It returns the environment scripts
/// run in and the real `redis` table, into which the engine puts `call` and `pcall`.
const PRELUDE: &str = r#"
local status_reply, error_reply, error_value, is_refusal, refuse, refusing, sha1hex, gc_stopped = ...
local base = _G
local error, next, pairs, ipairs, rawget, rawset, setmetatable, tostring, type =
  error, next, pairs, ipairs, rawget, rawset, setmetatable, tostring, type
local collectgarbage, setfenv = collectgarbage, setfenv
local real_load, real_loadstring, real_pcall, real_xpcall = load, loadstring, pcall, xpcall

-- Lua 5.1's `pairs`, `next`, `ipairs` and `rawget` do not look through a proxy (5.1 has no
-- `__pairs`, and `ipairs` reads raw), where Redis's patched Lua makes the real tables read-only
-- in place: the sandbox's versions read the real table behind a proxy.
local real_of = {}
local function readonly(real)
  local proxy = setmetatable({}, {
    __index = real,
    __newindex = function() error("Attempt to modify a readonly table", 2) end,
    __metatable = false,
  })
  real_of[proxy] = real
  return proxy
end
function base.next(t, k)
  local real = real_of[t]
  if real then return next(real, k) end
  return next(t, k)
end
function base.pairs(t)
  local real = real_of[t]
  if real then return base.next, t, nil end
  local a, b, c = pairs(t)
  return a, b, c
end
function base.ipairs(t)
  local a, b, c = ipairs(real_of[t] or t)
  return a, b, c
end
function base.rawget(t, k)
  local v = rawget(real_of[t] or t, k)
  return v
end

-- Redis 7.0 removes these from the globals (its allow list), and Lua 5.1's debug-ish base
-- functions could change a function's environment behind the sandbox.
base.print, base.dofile, base.loadfile = nil, nil, nil
base.getfenv, base.setfenv, base.newproxy = nil, nil, nil
-- What Redis 7.0 gives scripts and the model does not have is refused when used, as a command
-- the model lacks is (no pcall catches it), not left to a nil that a script could test for or
-- a Lua error it could catch: the script would go on against a Redis that is not Redis.
-- (`refusing` makes a host function, so that the script's own frame stays on the stack for its
-- line even when it tail-calls the function: `return math.random(10)`.)
math.random, math.randomseed = refusing("math.random"), refusing("math.randomseed")
for _, name in ipairs({ "cmsgpack", "struct", "coroutine" }) do
  base[name] = setmetatable({}, {
    __index = function(_, field) refuse(name .. "." .. tostring(field)) end,
    __newindex = function() error("Attempt to modify a readonly table", 2) end,
    __metatable = false,
  })
end

local redis = {
  status_reply = status_reply, error_reply = error_reply, sha1hex = sha1hex,
  -- Logging changes no reply; effects replication is all Redis 7 does.
  log = function() end,
  LOG_DEBUG = 0, LOG_VERBOSE = 1, LOG_NOTICE = 2, LOG_WARNING = 3,
  replicate_commands = function() return true end,
  setresp = refusing("redis.setresp"), set_repl = refusing("redis.set_repl"),
  breakpoint = refusing("redis.breakpoint"), debug = refusing("redis.debug"),
}
local env = readonly(base)

-- Chunks loaded by a script get the script's environment, not the writable real globals (in
-- Redis, the globals a chunk gets are the read-only ones).
local function in_sandbox(f, ...)
  if f then setfenv(f, env) end
  return f, ...
end
function base.load(chunk, name)
  return in_sandbox(real_load(chunk, name))
end
function base.loadstring(chunk, name)
  return in_sandbox(real_loadstring(chunk, name))
end

function base.rawset(t, k, v)
  if real_of[t] then error("Attempt to modify a readonly table", 2) end
  return rawset(t, k, v)
end

-- The collector is shared by every simulated server's scripts (see the module's notes): a
-- script that stops it has it restarted when it ends.
function base.collectgarbage(opt, arg)
  if opt == "stop" then gc_stopped() end
  local a, b = collectgarbage(opt, arg)
  return a, b
end

-- Redis's redis.call raises an {err=...} table, and a library function (cjson, bit) a string;
-- here both raise host errors carrying the text, which a script that catches them sees as the
-- table or the string again.
local function as_lua(err)
  local value = error_value(err)
  if value ~= nil then return value end
  return err
end
-- Redis's own pcall hands back the error text, not the table. A command the simulated Redis
-- does not model is no Redis error: no pcall catches it, so the script cannot go on as if a
-- real server had answered.
local function pcall_result(ok, ...)
  if ok then return true, ... end
  if is_refusal((...)) then error((...), 0) end
  local err = as_lua((...))
  if type(err) == "table" then
    local text = err.err
    if type(text) == "string" or type(text) == "number" then return false, text end
  end
  return false, err
end
function base.pcall(f, ...)
  return pcall_result(real_pcall(f, ...))
end
local function xpcall_result(ok, ...)
  if not ok and is_refusal((...)) then error((...), 0) end
  return ok, ...
end
-- Lua 5.1's xpcall passes no arguments to the function.
function base.xpcall(f, handler)
  return xpcall_result(real_xpcall(f, function(err)
    if is_refusal(err) then return err end
    return handler(as_lua(err))
  end))
end

base.redis = readonly(redis)
-- Strings index the string library through their shared metatable, which `getmetatable("")`
-- hands to any script: Redis 7 makes both read-only, so that no script can add or replace a
-- string method for the scripts after it. The metatable answers `getmetatable` with a read-only
-- view of itself, whose `__index` is the read-only string library.
local string_metatable = getmetatable("")
base.string = readonly(string)
string_metatable.__index = base.string
string_metatable.__metatable = readonly(string_metatable)
base.table = readonly(table)
base.math = readonly(math)
base.bit = readonly(base.bit)
base.cjson = readonly(base.cjson)
base._G = env
setmetatable(base, {
  __index = function(_, name)
    error("Script attempted to access nonexistent global variable '" .. tostring(name) .. "'", 2)
  end,
  __metatable = false,
})
return env, redis
"#;

thread_local! {
    /// The prelude compiled once per thread: parsing it was a third of an engine's start-up, and
    /// every simulated Redis server that runs a script starts one.
    static PRELUDE_BYTECODE: std::cell::OnceCell<Vec<u8>> = const { std::cell::OnceCell::new() };
}

/// The prelude as a function of `lua`, loaded from the thread's compiled copy (with its debug
/// information, so its error positions stay the same).
fn prelude(lua: &Lua) -> mlua::Result<Function> {
    let bytecode = PRELUDE_BYTECODE.with(|cell| match cell.get() {
        Some(bytecode) => Ok::<_, mlua::Error>(bytecode.clone()),
        None => {
            let function = lua.load(PRELUDE).set_name(PRELUDE_NAME).into_function()?;
            Ok(cell.get_or_init(|| function.dump(false)).clone())
        }
    })?;
    lua.load(bytecode)
        .set_name(PRELUDE_NAME)
        .set_mode(mlua::ChunkMode::Binary)
        .into_function()
}

thread_local! {
    /// Set when a script stops the collector, which the engine then restarts once the script
    /// has ended (Lua 5.1 cannot be asked whether it runs).
    static GC_STOPPED: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

thread_local! {
    /// The thread's Lua engine, started by its first `EVAL` and used by every simulated server
    /// on the thread (see the module's notes).
    static ENGINE: std::cell::RefCell<Option<Engine>> = const { std::cell::RefCell::new(None) };
}

/// Runs a script atomically against `keyspace` on the thread's engine; see [`Engine::eval`].
pub(crate) fn eval(
    keyspace: &mut Keyspace,
    script: &Script,
    keys: &[String],
    args: &[String],
    now_ms: u64,
    effects: &mut Vec<KeyEffect>,
) -> Reply {
    ENGINE.with(|cell| {
        // Never borrowed twice: a script's `redis.call` runs a command, never another script.
        let mut slot = cell.borrow_mut();
        let engine = match &mut *slot {
            Some(engine) => engine,
            None => match Engine::new() {
                Ok(engine) => slot.insert(engine),
                Err(err) => return Reply::Error(format!("ERR cannot start the Lua engine: {err}")),
            },
        };
        engine.eval(keyspace, script, keys, args, now_ms, effects)
    })
}

/// Compiles `source` as Redis compiles a script (a chunk named `@user_script`) without running
/// it: Lua's message, which names the line, when it does not compile. A fresh bare state is
/// enough, since compiling reads no global.
pub fn compile(source: &str) -> Result<(), String> {
    if let Some(refusal) = shebang_refusal(source) {
        return Err(refusal);
    }
    let lua = Lua::new_with(StdLib::NONE, LuaOptions::default()).map_err(|e| e.to_string())?;
    load_script(&lua, source, None)
        .map(drop)
        .map_err(|err| match err {
            mlua::Error::SyntaxError { message, .. } => message,
            other => other.to_string(),
        })
}

/// The script compiled as Redis 7.0 compiles it (`luaCreateFunction`): the body is a chunk
/// named `@user_script` (so line numbers are the source's, and `...` is the chunk's empty
/// varargs), from text only (a precompiled chunk could break out of any sandbox).
fn load_script(lua: &Lua, source: &str, env: Option<&Table>) -> mlua::Result<Function> {
    let chunk = lua
        .load(source)
        .set_name(USER_SCRIPT)
        .set_mode(mlua::ChunkMode::Text);
    match env {
        Some(env) => chunk.set_environment(env.clone()).into_function(),
        None => chunk.into_function(),
    }
}

/// A `#!` first line declares Redis 7's script flags (`no-writes`, `allow-oom`, …), which change
/// what a script may do: the model does not have them, so such a script is refused.
fn shebang_refusal(source: &str) -> Option<String> {
    source
        .starts_with("#!")
        .then(|| NotModelled("a script's #! line (script flags)".into()).to_string())
}

/// How many scripts the thread's engine holds compiled.
#[cfg(test)]
pub(crate) fn cached_scripts() -> usize {
    ENGINE.with(|cell| cell.borrow().as_ref().map_or(0, Engine::cached_scripts))
}

/// A Lua state set up like Redis's scripting engine, with its script cache.
pub(crate) struct Engine {
    lua: Lua,
    /// The read-only view of the globals that scripts run in.
    env: Table,
    /// Taken before any script runs, so no script can replace what the engine calls.
    xpcall: Function,
    /// Redis's error handler for a script's run (see [`error_handler`]).
    handler: Function,
    /// Compiled scripts by SHA1, as Redis caches them (never evicted, as in Redis 7).
    scripts: BTreeMap<Arc<str>, Function>,
}

impl Engine {
    /// Creates the Lua state. This costs about 0.1 ms, a thousand times a plain command, so the
    /// model does it on its first `EVAL` only.
    pub(crate) fn new() -> mlua::Result<Engine> {
        let lua = Lua::new_with(
            StdLib::STRING | StdLib::TABLE | StdLib::MATH,
            LuaOptions::default(),
        )?;
        let globals = lua.globals();
        globals.raw_set("bit", super::bit::library(&lua)?)?;
        globals.raw_set("cjson", super::cjson::library(&lua)?)?;
        let xpcall: Function = globals.raw_get("xpcall")?;
        let tostring: Function = globals.raw_get("tostring")?;
        drop(globals);
        let handler =
            lua.create_function(move |lua, err: Value| error_handler(lua, &tostring, err))?;
        let status_reply =
            lua.create_function(|lua, args: MultiValue| match single_string(&args) {
                Some(s) => {
                    let t = lua.create_table()?;
                    t.raw_set("ok", s)?;
                    Ok(Value::Table(t))
                }
                None => error_table(lua, "ERR wrong number or type of arguments"),
            })?;
        let error_reply = lua.create_function(|lua, args: MultiValue| {
            match single_string(&args) {
                // Redis reads the text as an error reply, with or without the leading '-'.
                Some(s) => {
                    let s = s.to_string_lossy();
                    error_table(lua, s.strip_prefix('-').unwrap_or(&s))
                }
                None => error_table(lua, "ERR wrong number or type of arguments"),
            }
        })?;
        // What a script that catches a host error sees: `redis.call`'s `{err=…}` table, or a
        // library function's message.
        let error_value = lua.create_function(|lua, err: Value| {
            let Value::Error(err) = &err else {
                return Ok(Value::Nil);
            };
            if let Some(text) = call_error_text(err) {
                return error_table(lua, text);
            }
            match library_error_text(err) {
                Some(text) => Ok(Value::String(lua.create_string(text)?)),
                None => Ok(Value::Nil),
            }
        })?;
        let gc_stopped = lua.create_function(|_, ()| {
            GC_STOPPED.set(true);
            Ok(())
        })?;
        let is_refusal = lua.create_function(|_, err: Value| {
            Ok(matches!(&err, Value::Error(err) if refusal_text(err).is_some()))
        })?;
        let refuse = lua.create_function(|lua, what: String| refuse_for_the_run(lua, what))?;
        let refusing = lua.create_function(|lua, what: String| {
            lua.create_function(move |lua, _: MultiValue| refuse_for_the_run(lua, what.clone()))
        })?;
        // Redis's `redis.sha1hex`: the lower-case hex SHA1 of a string (an integer is read as
        // its text, as Lua 5.1's `lua_tolstring` does), computed as a script's own SHA1 is.
        let sha1hex = lua.create_function(|_, args: MultiValue| match args.front() {
            Some(Value::String(s)) if args.len() == 1 => {
                Ok(Script::new(&s.to_str()?).sha1.to_string())
            }
            Some(Value::Integer(n)) if args.len() == 1 => {
                Ok(Script::new(&n.to_string()).sha1.to_string())
            }
            _ => Err(mlua::Error::runtime(
                "wrong number of arguments or wrong argument type",
            )),
        })?;
        let (env, redis): (Table, Table) = prelude(&lua)?.call((
            status_reply,
            error_reply,
            error_value,
            is_refusal,
            refuse,
            refusing,
            sha1hex,
            gc_stopped,
        ))?;
        let call = lua.create_function(|lua, argv: MultiValue| {
            execute(lua, argv)?.map_err(|text| mlua::Error::external(CallError(text)))
        })?;
        let pcall = lua.create_function(|lua, argv: MultiValue| match execute(lua, argv)? {
            Ok(value) => Ok(value),
            Err(text) => error_table(lua, &text),
        })?;
        redis.raw_set("call", call)?;
        redis.raw_set("pcall", pcall)?;
        Ok(Engine {
            lua,
            env,
            xpcall,
            handler,
            scripts: BTreeMap::new(),
        })
    }

    /// Runs a script atomically against `keyspace`. Time is frozen for its whole run: every
    /// `redis.call` sees `now_ms`, as Redis 7 freezes the clock during a script. Writes made before
    /// a failing `redis.call` stay, as in Redis: scripts are atomic, not transactional.
    pub(crate) fn eval(
        &mut self,
        keyspace: &mut Keyspace,
        script: &Script,
        keys: &[String],
        args: &[String],
        now_ms: u64,
        effects: &mut Vec<KeyEffect>,
    ) -> Reply {
        let function = match self.function(script) {
            Ok(function) => function,
            Err(reply) => return reply,
        };
        // `redis.call` and `redis.pcall` are created once per engine (a scoped pair per run cost
        // as much as the script itself) and find the data through the state's app data: the
        // keyspace is moved in for the run and moved back out, whatever the outcome.
        self.lua.set_app_data(Target {
            keyspace: std::mem::take(keyspace),
            effects: std::mem::take(effects),
            now_ms,
            keys: script.keys_declared.then(|| keys.to_vec()),
            refused: None,
        });
        let run = || -> mlua::Result<Reply> {
            self.set_keys_and_argv(keys, args)?;
            let (ok, value) = self
                .xpcall
                .call::<(bool, Value)>((function, self.handler.clone()))?;
            Ok(if ok {
                lua_to_reply(&value, 0)
            } else {
                script_error(&value, &script.sha1)
            })
        };
        let reply = run();
        let target = self
            .lua
            .remove_app_data::<Target>()
            .expect("the target stays in place for the script's run");
        *keyspace = target.keyspace;
        *effects = target.effects;
        if GC_STOPPED.replace(false) {
            self.lua.gc_restart();
        }
        // However the script ended (a `pcall` inside an `xpcall` handler, or a refused library
        // function whose error a script caught by other means), a command the model refused is
        // the reply.
        if let Some(what) = target.refused {
            let refusal = NotModelled(what).to_string();
            return match reply {
                Ok(Reply::Error(text)) if text.starts_with(&refusal) => Reply::Error(text),
                _ => Reply::Error(format!("{refusal} script: {}.", script.sha1)),
            };
        }
        // Only a failure of the engine itself (e.g. out of memory) gets here; script errors are
        // replies.
        reply.unwrap_or_else(|err| Reply::Error(one_line(&format!("ERR {err}"))))
    }

    /// Sets the `KEYS` and `ARGV` globals to fresh tables of `keys` and `args`, as Redis does
    /// before each script. Done through Lua's C API in one protected call: building the two
    /// tables value by value through mlua's handles cost a third of an `EVAL`.
    fn set_keys_and_argv(&self, keys: &[String], args: &[String]) -> mlua::Result<()> {
        // SAFETY: the closure only pushes strings and tables and sets fields, with stack room
        // checked first, and leaves the stack as it found it. It owns nothing that needs
        // dropping, so a Lua error (out of memory) that jumps out of it skips no destructor;
        // `exec_raw` runs it protected and turns such an error into an `Err`.
        unsafe {
            self.lua.exec_raw::<()>((), |state| {
                use mlua::ffi;
                if ffi::lua_checkstack(state, 4) == 0 {
                    let text = "no room on the Lua stack for KEYS and ARGV";
                    ffi::lua_pushlstring(state, text.as_ptr().cast(), text.len());
                    ffi::lua_error(state);
                }
                ffi::lua_pushvalue(state, ffi::LUA_GLOBALSINDEX);
                for (name, values) in [("KEYS", keys), ("ARGV", args)] {
                    ffi::lua_pushlstring(state, name.as_ptr().cast(), name.len());
                    let size = std::ffi::c_int::try_from(values.len()).unwrap_or(0);
                    ffi::lua_createtable(state, size, 0);
                    for (i, value) in values.iter().enumerate() {
                        ffi::lua_pushlstring(state, value.as_ptr().cast(), value.len());
                        ffi::lua_rawseti(state, -2, i as ffi::lua_Integer + 1);
                    }
                    ffi::lua_rawset(state, -3);
                }
                ffi::lua_pop(state, 1);
            })
        }
    }

    /// The compiled script, compiling it on first use (see [`load_script`]), in the sandbox's
    /// environment.
    fn function(&mut self, script: &Script) -> Result<Function, Reply> {
        if let Some(function) = self.scripts.get(&script.sha1) {
            return Ok(function.clone());
        }
        if let Some(refusal) = shebang_refusal(&script.source) {
            return Err(Reply::Error(format!("{refusal} script: {}.", script.sha1)));
        }
        let function = load_script(&self.lua, &script.source, Some(&self.env)).map_err(|err| {
            let detail = match err {
                mlua::Error::SyntaxError { message, .. } => message,
                other => other.to_string(),
            };
            Reply::Error(one_line(&format!(
                "ERR Error compiling script (new function): {detail}"
            )))
        })?;
        self.scripts.insert(script.sha1.clone(), function.clone());
        Ok(function)
    }

    /// How many scripts are compiled.
    #[cfg(test)]
    pub(crate) fn cached_scripts(&self) -> usize {
        self.scripts.len()
    }
}

/// What `redis.call` runs against during one `EVAL`: moved into the Lua state's app data for the
/// script's run. Time is frozen for the whole run, as Redis 7 freezes it.
struct Target {
    keyspace: Keyspace,
    effects: Vec<KeyEffect>,
    now_ms: u64,
    /// A user's script's `KEYS`: the only keys its commands may name (see [`undeclared_key`]).
    keys: Option<Vec<String>>,
    /// The first command of the run the model does not have (see [`NotModelled`]).
    refused: Option<String>,
}

/// The error `redis.call` and `redis.pcall` raise for a command, or a form of one, that the
/// simulated Redis does not model ([`ParseError::NotModelled`]). It is no Redis error reply on
/// purpose: a script must not catch it and carry on against a server that is not Redis, so the
/// sandbox's `pcall` and `xpcall` pass it on, and the script's reply is this refusal however it
/// ended.
#[derive(Debug)]
struct NotModelled(String);

impl fmt::Display for NotModelled {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", ParseError::NotModelled(self.0.clone()))
    }
}

impl std::error::Error for NotModelled {}

/// Refuses `what`, which the model lacks, for the rest of the script's run (see [`NotModelled`]).
pub(super) fn refuse_for_the_run(lua: &Lua, what: String) -> mlua::Result<()> {
    if let Some(mut target) = lua.app_data_mut::<Target>() {
        target.refused.get_or_insert_with(|| what.clone());
    }
    Err(mlua::Error::external(NotModelled(what)))
}

/// The text of a [`NotModelled`], through the wrapping mlua adds when it leaves the callback.
fn refusal_text(err: &mlua::Error) -> Option<String> {
    match err {
        mlua::Error::CallbackError { cause, .. } => refusal_text(cause),
        other => other.downcast_ref::<NotModelled>().map(ToString::to_string),
    }
}

/// The error `redis.call` raises, carrying the text of the `{err=…}` table Redis would raise. A
/// Rust callback can only raise a Rust error, so the engine's handler and the script-visible
/// `pcall`/`xpcall` turn it back into the table (or its text) Redis scripts expect.
#[derive(Debug)]
struct CallError(String);

impl fmt::Display for CallError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for CallError {}

/// The text of a [`CallError`], through the wrapping mlua adds when it leaves the callback.
fn call_error_text(err: &mlua::Error) -> Option<&str> {
    match err {
        mlua::Error::CallbackError { cause, .. } => call_error_text(cause),
        other => other.downcast_ref::<CallError>().map(|e| e.0.as_str()),
    }
}

/// An error raised by a library function Redis gives scripts (`cjson`, `bit`): in Redis a Lua
/// string, which `luaL_error` prefixes with where its caller is (`user_script:1: `). mlua's host
/// functions can only raise a Rust error, so the text, prefix included, is computed where the
/// error is raised (see [`library_error`]), and the sandbox's `pcall` and the engine's handler
/// turn it back into the string.
#[derive(Debug)]
struct LibraryError(String);

impl fmt::Display for LibraryError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for LibraryError {}

/// The error a library function raises with `message`, as Lua 5.1's `luaL_error` words it: the
/// caller's position first (`user_script:3: `) when the caller is a Lua function, nothing when it
/// is a C function such as `pcall` (`pcall(cjson.decode, s)`).
pub(super) fn library_error(lua: &Lua, message: &str) -> mlua::Error {
    let place = lua
        .inspect_stack(1, |frame| {
            let line = frame.current_line()?;
            let source = frame.source().short_src?.into_owned();
            Some(format!("{source}:{line}: "))
        })
        .flatten()
        .unwrap_or_default();
    mlua::Error::external(LibraryError(format!("{place}{message}")))
}

/// The text of a [`LibraryError`], through the wrapping mlua adds when it leaves the callback.
fn library_error_text(err: &mlua::Error) -> Option<&str> {
    match err {
        mlua::Error::CallbackError { cause, .. } => library_error_text(cause),
        other => other.downcast_ref::<LibraryError>().map(|e| e.0.as_str()),
    }
}

/// Runs one command for `redis.call`/`redis.pcall`: `Ok` with the reply as Lua sees it, or `Err`
/// with the text for the `{err=…}` table when the command (or its arguments) failed.
fn execute(lua: &Lua, argv: MultiValue) -> mlua::Result<Result<Value, String>> {
    if argv.is_empty() {
        let err = "ERR Please specify at least one argument for this redis lib call";
        return Ok(Err(lua_error_text(err)));
    }
    let mut args = Vec::with_capacity(argv.len());
    for value in argv.iter() {
        args.push(match value {
            Value::String(s) => s.to_string_lossy(),
            Value::Integer(n) => n.to_string(),
            Value::Number(n) => float_argument(*n),
            _ => {
                let err = "ERR Lua redis lib command arguments must be strings or integers";
                return Ok(Err(lua_error_text(err)));
            }
        });
    }
    // A command never runs Lua, so this borrow is the only one while it lasts.
    let mut target = lua
        .app_data_mut::<Target>()
        .ok_or_else(|| mlua::Error::runtime("redis.call is only available while a script runs"))?;
    let Target {
        keyspace,
        effects,
        now_ms,
        keys,
        refused,
    } = &mut *target;
    // Once refused, always: a script that got past the refusal runs nothing more.
    if let Some(what) = refused {
        return Err(mlua::Error::external(NotModelled(what.clone())));
    }
    let reply = match parse_command(&args) {
        Ok(cmd) => match keys.as_deref().and_then(|keys| undeclared_key(&cmd, keys)) {
            Some(err) => Reply::Error(err),
            None => keyspace.exec(&cmd, *now_ms, effects),
        },
        Err(ParseError::Redis(err)) => Reply::Error(err),
        Err(ParseError::NotModelled(what)) => {
            *refused = Some(what.clone());
            return Err(mlua::Error::external(NotModelled(what)));
        }
    };
    drop(target);
    match reply {
        Reply::Error(err) => Ok(Err(lua_error_text(&err))),
        other => Ok(Ok(reply_to_lua(lua, &other)?)),
    }
}

/// The error for a command that names a key the script was not given in `KEYS`. Redis
/// Cluster routes a script by its `KEYS` and refuses a key that lives elsewhere; a standalone
/// Redis lets it pass, but a lock that does so breaks on the day it moves to a cluster, and
/// lockcheck could not know which keys to check and remove on a user's server. So the model
/// refuses it for a user's script ([`Script::keys_declared`]), deliberately stricter than a
/// standalone Redis; lockcheck's own scripts run as on a standalone Redis.
fn undeclared_key(cmd: &Command, keys: &[String]) -> Option<String> {
    let key = cmd
        .keys()
        .into_iter()
        .find(|k| !keys.iter().any(|d| d == k))?;
    Some(format!(
        "ERR Script attempted to access key '{}', which is not in KEYS (Redis Cluster would \
         refuse it; pass every key the script touches in KEYS)",
        key.chars().take(60).collect::<String>()
    ))
}

/// A reply as `redis.call` returns it: integer → integer, bulk → string, nil → `false`, status →
/// `{ok=…}`, error → `{err=…}`, array → array table.
fn reply_to_lua(lua: &Lua, reply: &Reply) -> mlua::Result<Value> {
    Ok(match reply {
        Reply::Nil => Value::Boolean(false),
        Reply::Int(n) => Value::Integer(*n),
        Reply::Bulk(s) => Value::String(lua.create_string(s)?),
        Reply::Status(s) => {
            let t = lua.create_table()?;
            t.raw_set("ok", s.as_str())?;
            Value::Table(t)
        }
        Reply::Error(err) => error_table(lua, err)?,
        Reply::Array(items) => {
            let t = lua.create_table_with_capacity(items.len(), 0)?;
            for (i, item) in items.iter().enumerate() {
                t.raw_set(i + 1, reply_to_lua(lua, item)?)?;
            }
            Value::Table(t)
        }
    })
}

/// The `{err=…}` table Redis builds for an error reply.
fn error_table(lua: &Lua, error: &str) -> mlua::Result<Value> {
    let t = lua.create_table()?;
    t.raw_set("err", lua_error_text(error))?;
    Ok(Value::Table(t))
}

/// The text Redis stores in an `{err=…}` table for an error reply (`luaPushErrorBuff`): the first
/// word is the error code, and a text without one gets `ERR`.
fn lua_error_text(error: &str) -> String {
    let (code, message) = error.split_once(' ').unwrap_or(("ERR", error));
    format!("{code} {}", message.trim_matches(['\r', '\n']))
}

/// The one string argument `redis.status_reply`/`redis.error_reply` accept (Redis takes no number
/// in its place).
fn single_string(args: &MultiValue) -> Option<&mlua::String> {
    match (args.len(), args.front()) {
        (1, Some(Value::String(s))) => Some(s),
        _ => None,
    }
}

/// A float argument to `redis.call` as Redis 7.2+ formats it (`luaArgsToRedisArgv`): an integral
/// value within ±2^62 as an integer (`double2ll`; every Lua 5.1 number is a double); anything
/// else as `fpconv_dtoa` writes it (`1e+20`, `1.5e-7`, `inf`). Redis 7.0 writes `%.17g`
/// (`0.10000000000000001`, `1e+17`) instead; lock scripts pass integers.
fn float_argument(n: f64) -> String {
    match double_to_integer(n) {
        Some(i) => i.to_string(),
        None => fpconv_dtoa(n),
    }
}

/// A script's return value as the reply Redis sends: number → integer (truncated toward zero),
/// string → bulk, `true` → 1, `false`/`nil` → nil, `{err=…}` → error, `{ok=…}` → status, other
/// table → array up to the first `nil`.
fn lua_to_reply(value: &Value, depth: usize) -> Reply {
    match value {
        Value::String(s) => Reply::Bulk(s.to_string_lossy()),
        Value::Boolean(true) => Reply::Int(1),
        Value::Integer(n) => Reply::Int(*n),
        // `as` truncates toward zero like Redis's C cast, and saturates where C is undefined.
        Value::Number(n) => Reply::Int(*n as i64),
        Value::Table(t) => table_to_reply(t, depth),
        _ => Reply::Nil,
    }
}

fn table_to_reply(t: &Table, depth: usize) -> Reply {
    if depth >= MAX_REPLY_DEPTH {
        return Reply::Error("ERR reached lua stack limit".into());
    }
    // Only string fields count, as in Redis: `{err=1}` is an (empty) array.
    if let Ok(Value::String(err)) = t.raw_get("err") {
        return Reply::Error(one_line(&err.to_string_lossy()));
    }
    if let Ok(Value::String(ok)) = t.raw_get("ok") {
        return Reply::Status(ok.to_string_lossy().replace(['\r', '\n'], " "));
    }
    let mut items = Vec::new();
    for i in 1.. {
        match t.raw_get::<Value>(i) {
            Ok(Value::Nil) | Err(_) => break,
            Ok(item) => items.push(lua_to_reply(&item, depth + 1)),
        }
    }
    Reply::Array(items)
}

/// Redis's `__redis__err__handler`: turns whatever a script raised into an `{err=…}` table (a
/// plain Lua error gets `ERR `), and records the script line it came from.
fn error_handler(lua: &Lua, tostring: &Function, err: Value) -> mlua::Result<Table> {
    let table = match err {
        Value::Table(t) => t,
        other => {
            let text = match &other {
                Value::Error(e) => call_error_text(e)
                    .map(str::to_owned)
                    .or_else(|| refusal_text(e))
                    .or_else(|| library_error_text(e).map(|text| format!("ERR {text}"))),
                _ => None,
            };
            let text = match text {
                Some(text) => text,
                None => format!(
                    "ERR {}",
                    tostring.call::<mlua::String>(other)?.to_string_lossy()
                ),
            };
            let t = lua.create_table()?;
            t.raw_set("err", text)?;
            t
        }
    };
    if let Some((source, line)) = raising_frame(lua) {
        table.raw_set("source", source)?;
        table.raw_set("line", line)?;
    }
    Ok(table)
}

/// Where the error was raised, as Redis's `__redis__err__handler` finds it: the function that
/// raised it, or its caller when that function is C (`redis.call`, `error`). Its source is
/// `@user_script` for the script's own code, or the text of a chunk the script loaded. The
/// prelude's Lua functions (the global-variable guard, `rawset`, `pcall`) stand in for Redis's C
/// and are passed over like C frames.
fn raising_frame(lua: &Lua) -> Option<(String, usize)> {
    // Between the handler and the script there are at most a few C and prelude frames.
    for level in 1..64 {
        let (source, line) = lua.inspect_stack(level, |frame| {
            let source = frame.source().source.map(|s| s.into_owned());
            (source, frame.current_line())
        })?;
        match (source, line) {
            (Some(source), Some(line)) if source != PRELUDE_NAME => return Some((source, line)),
            _ => {}
        }
    }
    None
}

/// The reply for a failed script, worded as Redis's `luaCallFunction` does:
/// `<err> script: <sha1>, on @user_script:<line>.`
fn script_error(err: &Value, sha1: &str) -> Reply {
    let Value::Table(t) = err else {
        // Only when the error handler itself failed.
        return Reply::Error(one_line(&format!(
            "ERR Error running script {sha1}, {err:?}"
        )));
    };
    let field = |name: &str| match t.raw_get::<Value>(name) {
        Ok(Value::String(s)) => Some(s.to_string_lossy()),
        Ok(Value::Integer(n)) => Some(n.to_string()),
        _ => None,
    };
    let mut text = field("err").unwrap_or_else(|| "ERR unknown script error".into());
    if let (Some(source), Some(line)) = (field("source"), field("line")) {
        text.push_str(&format!(" script: {sha1}, on {source}:{line}."));
    }
    Reply::Error(one_line(&text))
}

/// An error text that fits on one RESP line, as Redis makes it: trailing newlines dropped, inner
/// ones turned into spaces.
fn one_line(text: &str) -> String {
    text.trim_end_matches(['\r', '\n'])
        .replace(['\r', '\n'], " ")
}

#[cfg(test)]
mod tests {
    use crate::redis::model::{KeyEffect, RedisModel};
    use crate::redis::parse::parse_command;
    use lockcheck_algorithms::redis::command::{Command, Reply, Script};

    const COMPARE_AND_DELETE: &str = r#"if redis.call("GET", KEYS[1]) == ARGV[1] then return redis.call("DEL", KEYS[1]) else return 0 end"#;
    const COMPARE_AND_PEXPIRE: &str = r#"if redis.call("GET", KEYS[1]) == ARGV[1] then return redis.call("PEXPIRE", KEYS[1], ARGV[2]) else return 0 end"#;
    const ACQUIRE_WITH_FENCING: &str = r#"if redis.call("SET", KEYS[1], ARGV[1], "NX", "PX", ARGV[2]) then return redis.call("INCR", KEYS[2]) else return false end"#;
    /// Redisson's `RLock` acquire: KEYS[1] = lock, ARGV[1] = lease ms, ARGV[2] = owner. Nil when
    /// acquired (or re-entered), else the holder's remaining lease.
    const RLOCK_ACQUIRE: &str = "if (redis.call('exists', KEYS[1]) == 0) then redis.call('hincrby', KEYS[1], ARGV[2], 1); redis.call('pexpire', KEYS[1], ARGV[1]); return nil; end;
if (redis.call('hexists', KEYS[1], ARGV[2]) == 1) then redis.call('hincrby', KEYS[1], ARGV[2], 1); redis.call('pexpire', KEYS[1], ARGV[1]); return nil; end;
return redis.call('pttl', KEYS[1]);";
    /// Redisson's `RLock` unlock: KEYS[1] = lock, KEYS[2] = channel, ARGV[1] = unlock message,
    /// ARGV[2] = lease ms, ARGV[3] = owner. Nil if not the owner, 0 if still held (re-entered), 1
    /// when released.
    const RLOCK_UNLOCK: &str = "if (redis.call('hexists', KEYS[1], ARGV[3]) == 0) then return nil; end; local counter = redis.call('hincrby', KEYS[1], ARGV[3], -1); if (counter > 0) then redis.call('pexpire', KEYS[1], ARGV[2]); return 0; else redis.call('del', KEYS[1]); redis.call('publish', KEYS[2], ARGV[1]); return 1; end; return nil;";
    /// A minimal fair lock: KEYS[1] = lock, KEYS[2] = queue (list), KEYS[3] = deadlines (sorted
    /// set); ARGV[1] = owner, ARGV[2] = lease ms, ARGV[3] = the waiter's deadline. A waiter joins
    /// the queue once; only the head gets a free lock. Nil when granted, else the waiter's deadline.
    const FAIR_ACQUIRE: &str = r#"
if redis.call('zscore', KEYS[3], ARGV[1]) == false then
  redis.call('rpush', KEYS[2], ARGV[1])
  redis.call('zadd', KEYS[3], ARGV[3], ARGV[1])
end
if redis.call('lindex', KEYS[2], 0) == ARGV[1] and redis.call('exists', KEYS[1]) == 0 then
  redis.call('lpop', KEYS[2])
  redis.call('zrem', KEYS[3], ARGV[1])
  redis.call('hset', KEYS[1], ARGV[1], 1)
  redis.call('pexpire', KEYS[1], ARGV[2])
  return nil
end
return redis.call('zscore', KEYS[3], ARGV[1])"#;

    fn eval_cmd(source: &str, keys: &[&str], args: &[&str]) -> Command {
        Command::Eval {
            script: Script::new(source),
            keys: keys.iter().map(|s| s.to_string()).collect(),
            args: args.iter().map(|s| s.to_string()).collect(),
        }
    }

    fn eval_at(
        m: &mut RedisModel,
        now: u64,
        source: &str,
        keys: &[&str],
        args: &[&str],
    ) -> (Reply, Vec<KeyEffect>) {
        let mut effects = Vec::new();
        let reply = m.apply(&eval_cmd(source, keys, args), now, &mut effects);
        (reply, effects)
    }

    fn eval(m: &mut RedisModel, source: &str) -> Reply {
        eval_at(m, 0, source, &[], &[]).0
    }

    fn run(m: &mut RedisModel, line: &str, now: u64) -> Reply {
        let argv: Vec<String> = line.split(' ').map(String::from).collect();
        m.apply(&parse_command(&argv).unwrap(), now, &mut Vec::new())
    }

    fn error_text(reply: Reply) -> String {
        match reply {
            Reply::Error(text) => text,
            other => panic!("expected an error reply, got {other:?}"),
        }
    }

    fn bulk(s: &str) -> Reply {
        Reply::Bulk(s.into())
    }

    #[test]
    fn compare_and_delete_script_deletes_only_the_owners_key() {
        let mut m = RedisModel::new();
        run(&mut m, "SET lock alice PX 100", 0);
        let (r, effects) = eval_at(&mut m, 10, COMPARE_AND_DELETE, &["lock"], &["bob"]);
        assert_eq!(r, Reply::Int(0));
        assert!(effects.is_empty());
        assert_eq!(run(&mut m, "GET lock", 10), bulk("alice"));

        let (r, effects) = eval_at(&mut m, 10, COMPARE_AND_DELETE, &["lock"], &["alice"]);
        assert_eq!(r, Reply::Int(1));
        assert_eq!(
            effects,
            vec![KeyEffect::Deleted {
                key: "lock".into(),
                value: Some("alice".into())
            }]
        );
        assert!(m.is_empty());

        // An expired lock is not deleted by its former owner: the script sees nil.
        run(&mut m, "SET lock alice PX 100", 0);
        let (r, effects) = eval_at(&mut m, 101, COMPARE_AND_DELETE, &["lock"], &["alice"]);
        assert_eq!(r, Reply::Int(0));
        assert_eq!(
            effects,
            vec![KeyEffect::Expired {
                key: "lock".into(),
                value: Some("alice".into())
            }]
        );
    }

    #[test]
    fn compare_and_pexpire_script_extends_only_the_owners_key() {
        let mut m = RedisModel::new();
        run(&mut m, "SET lock alice PX 100", 0);
        let (r, effects) = eval_at(&mut m, 50, COMPARE_AND_PEXPIRE, &["lock"], &["bob", "1000"]);
        assert_eq!(r, Reply::Int(0));
        assert!(effects.is_empty());
        assert_eq!(run(&mut m, "PTTL lock", 50), Reply::Int(50));

        let (r, effects) = eval_at(
            &mut m,
            50,
            COMPARE_AND_PEXPIRE,
            &["lock"],
            &["alice", "1000"],
        );
        assert_eq!(r, Reply::Int(1));
        assert_eq!(
            effects,
            vec![KeyEffect::ExpiryChanged {
                key: "lock".into(),
                expires_at_ms: Some(1_050)
            }]
        );
        assert_eq!(run(&mut m, "PTTL lock", 50), Reply::Int(1_000));
    }

    #[test]
    fn fencing_script_returns_increasing_tokens_only_when_the_lock_is_free() {
        let mut m = RedisModel::new();
        let keys = ["lock", "fence"];
        let (r, effects) = eval_at(&mut m, 0, ACQUIRE_WITH_FENCING, &keys, &["alice", "100"]);
        assert_eq!(r, Reply::Int(1));
        assert_eq!(
            effects,
            vec![
                KeyEffect::Set {
                    key: "lock".into(),
                    value: "alice".into(),
                    expires_at_ms: Some(100)
                },
                KeyEffect::Set {
                    key: "fence".into(),
                    value: "1".into(),
                    expires_at_ms: None
                },
            ]
        );
        // Held: SET NX gives nil, which Lua sees as false, and the script returns false → nil.
        let (r, effects) = eval_at(&mut m, 100, ACQUIRE_WITH_FENCING, &keys, &["bob", "100"]);
        assert_eq!(r, Reply::Nil);
        assert!(effects.is_empty());
        let (r, _) = eval_at(&mut m, 101, ACQUIRE_WITH_FENCING, &keys, &["bob", "100"]);
        assert_eq!(r, Reply::Int(2));
        assert_eq!(run(&mut m, "GET lock", 101), bulk("bob"));
    }

    #[test]
    fn script_return_values_convert_like_redis() {
        let mut m = RedisModel::new();
        assert_eq!(eval(&mut m, "return 42"), Reply::Int(42));
        assert_eq!(eval(&mut m, "return 3.99"), Reply::Int(3));
        assert_eq!(eval(&mut m, "return -3.99"), Reply::Int(-3));
        assert_eq!(eval(&mut m, "return 10 / 4"), Reply::Int(2));
        assert_eq!(eval(&mut m, "return 'hi'"), bulk("hi"));
        assert_eq!(eval(&mut m, "return true"), Reply::Int(1));
        assert_eq!(eval(&mut m, "return false"), Reply::Nil);
        assert_eq!(eval(&mut m, "return nil"), Reply::Nil);
        assert_eq!(eval(&mut m, "local x = 1"), Reply::Nil);
        assert_eq!(eval(&mut m, "return redis.call"), Reply::Nil);
        assert_eq!(eval(&mut m, "return function() end"), Reply::Nil);
        assert_eq!(eval(&mut m, "return 1, 2"), Reply::Int(1));
    }

    #[test]
    fn status_and_error_tables_become_status_and_error_replies() {
        let mut m = RedisModel::new();
        assert_eq!(
            eval(&mut m, "return {ok='PONG'}"),
            Reply::Status("PONG".into())
        );
        assert_eq!(
            eval(&mut m, "return {err='MYERR went wrong'}"),
            Reply::Error("MYERR went wrong".into())
        );
        // `err` wins over `ok`, and only string fields count.
        assert_eq!(
            eval(&mut m, "return {ok='x', err='E x'}"),
            Reply::Error("E x".into())
        );
        assert_eq!(eval(&mut m, "return {err=1}"), Reply::Array(vec![]));
        assert_eq!(
            eval(&mut m, "return redis.status_reply('FINE')"),
            Reply::Status("FINE".into())
        );
        // error_reply keeps a code the text starts with, else adds ERR (Redis's luaPushErrorBuff).
        assert_eq!(
            eval(&mut m, "return redis.error_reply('MY Error')"),
            Reply::Error("MY Error".into())
        );
        assert_eq!(
            eval(&mut m, "return redis.error_reply('-NOPE not now')"),
            Reply::Error("NOPE not now".into())
        );
        assert_eq!(
            eval(&mut m, "return redis.error_reply('oops')"),
            Reply::Error("ERR oops".into())
        );
        assert_eq!(
            eval(&mut m, "return redis.status_reply(1)"),
            Reply::Error("ERR wrong number or type of arguments".into())
        );
        assert_eq!(
            eval(&mut m, "return redis.error_reply('a', 'b')"),
            Reply::Error("ERR wrong number or type of arguments".into())
        );
    }

    #[test]
    fn arrays_stop_at_the_first_nil_and_nest() {
        let mut m = RedisModel::new();
        assert_eq!(
            eval(&mut m, "return {1, 'two', {3, {ok='OK'}}, false, nil, 6}"),
            Reply::Array(vec![
                Reply::Int(1),
                bulk("two"),
                Reply::Array(vec![Reply::Int(3), Reply::Status("OK".into())]),
                Reply::Nil,
            ])
        );
        assert_eq!(eval(&mut m, "return {}"), Reply::Array(vec![]));
        assert_eq!(
            eval(&mut m, "return {KEYS[1], ARGV[1], #KEYS, #ARGV}"),
            Reply::Array(vec![])
        );
        let (r, _) = eval_at(
            &mut m,
            0,
            "return {KEYS[2], ARGV[1], #KEYS}",
            &["a", "b"],
            &["x"],
        );
        assert_eq!(r, Reply::Array(vec![bulk("b"), bulk("x"), Reply::Int(2)]));
        // A table that contains itself stops at a depth limit instead of overflowing the stack.
        let r = eval(&mut m, "local t = {}; t[1] = t; return t");
        let mut depth = 0;
        let mut cur = &r;
        while let Reply::Array(items) = cur {
            depth += 1;
            cur = &items[0];
        }
        assert_eq!(cur, &Reply::Error("ERR reached lua stack limit".into()));
        assert!(depth > 100);
    }

    #[test]
    fn redis_call_results_convert_to_lua_like_redis() {
        let mut m = RedisModel::new();
        run(&mut m, "SET s hello", 0);
        run(&mut m, "SET n 5", 0);
        let probe = r#"
            local set = redis.call('SET', 'k', 'v')
            local missing = redis.call('GET', 'nope')
            local n = redis.call('INCR', 'n')
            return {
                type(set), set.ok,
                type(missing), tostring(missing),
                type(n), n,
                type(redis.call('GET', 's')), redis.call('GET', 's'),
            }"#;
        assert_eq!(
            eval(&mut m, probe),
            Reply::Array(vec![
                bulk("table"),
                bulk("OK"),
                bulk("boolean"),
                bulk("false"),
                bulk("number"),
                Reply::Int(6),
                bulk("string"),
                bulk("hello"),
            ])
        );
        // A status table from redis.call goes back out as a status.
        assert_eq!(
            eval(&mut m, "return redis.call('SET', 'k', 'w')"),
            Reply::Status("OK".into())
        );
    }

    #[test]
    fn redis_call_error_aborts_the_script_but_keeps_earlier_writes() {
        let mut m = RedisModel::new();
        run(&mut m, "SET s abc", 0);
        let source = "redis.call('SET', 'before', '1')\nredis.call('INCR', 's')\nredis.call('SET', 'after', '1')";
        let sha1 = Script::new(source).sha1;
        let (r, effects) = eval_at(&mut m, 0, source, &[], &[]);
        assert_eq!(
            r,
            Reply::Error(format!(
                "ERR value is not an integer or out of range script: {sha1}, on @user_script:2."
            ))
        );
        assert_eq!(effects.len(), 1, "{effects:?}");
        assert_eq!(run(&mut m, "GET before", 0), bulk("1"));
        assert_eq!(run(&mut m, "EXISTS after", 0), Reply::Int(0));
    }

    #[test]
    fn redis_pcall_returns_the_error_table_and_the_script_goes_on() {
        let mut m = RedisModel::new();
        run(&mut m, "SET s abc", 0);
        assert_eq!(
            eval(
                &mut m,
                "local r = redis.pcall('INCR', 's'); return {type(r), r.err}"
            ),
            Reply::Array(vec![
                bulk("table"),
                bulk("ERR value is not an integer or out of range")
            ])
        );
        // Returning the table makes it the script's (undecorated) error reply.
        assert_eq!(
            eval(&mut m, "return redis.pcall('INCR', 's')"),
            Reply::Error("ERR value is not an integer or out of range".into())
        );
        assert_eq!(eval(&mut m, "return redis.pcall('GET', 's')"), bulk("abc"));
        // Lua's own pcall around redis.call yields the error text, as Redis's pcall does.
        assert_eq!(
            eval(
                &mut m,
                "local ok, e = pcall(redis.call, 'INCR', 's'); return {tostring(ok), e}"
            ),
            Reply::Array(vec![
                bulk("false"),
                bulk("ERR value is not an integer or out of range")
            ])
        );
        assert_eq!(
            eval(&mut m, "local ok, e = pcall(error, 'boom', 0); return e"),
            bulk("boom")
        );
        // xpcall's handler gets the {err=...} table, as in Redis (whose Lua 5.1 xpcall passes
        // no arguments to the function).
        assert_eq!(
            eval(
                &mut m,
                "local ok, e = xpcall(function() return redis.call('INCR', 's') end, function(e) return e end); return {type(e), e.err}"
            ),
            Reply::Array(vec![
                bulk("table"),
                bulk("ERR value is not an integer or out of range")
            ])
        );
    }

    #[test]
    fn redis_call_arguments_follow_redis_rules() {
        let mut m = RedisModel::new();
        // Numbers become their integer text; a float from `/` is integral here.
        assert_eq!(
            eval(
                &mut m,
                "redis.call('SET', 'k', 'v', 'PX', 1000 / 2); return redis.call('PTTL', 'k')"
            ),
            Reply::Int(500)
        );
        assert_eq!(
            eval(
                &mut m,
                "redis.call('SET', 'n', 7); return redis.call('GET', 'n')"
            ),
            bulk("7")
        );
        assert_eq!(
            eval(
                &mut m,
                "redis.call('SET', 'f', 2.5); return redis.call('GET', 'f')"
            ),
            bulk("2.5")
        );
        // Command names and options are case-insensitive.
        assert_eq!(
            eval(&mut m, "return redis.call('set', 'k', 'x', 'nx')"),
            Reply::Nil
        );
        let sha = |s: &str| Script::new(s).sha1.to_string();
        let cases = [
            (
                "return redis.call()",
                "ERR Please specify at least one argument for this redis lib call",
            ),
            (
                "return redis.call('GET', {})",
                "ERR Lua redis lib command arguments must be strings or integers",
            ),
            (
                "return redis.call('GET', nil)",
                "ERR Lua redis lib command arguments must be strings or integers",
            ),
            (
                "return redis.call('GET')",
                "ERR wrong number of arguments for 'get' command",
            ),
            (
                "return redis.call('SET', 'k', 'v', 'PX', 0)",
                "ERR invalid expire time in 'set' command",
            ),
            (
                "return redis.call('EVAL', 'return 1', 0)",
                "ERR This Redis command is not allowed from script",
            ),
        ];
        for (source, err) in cases {
            assert_eq!(
                eval(&mut m, source),
                Reply::Error(format!("{err} script: {}, on @user_script:1.", sha(source))),
                "{source}"
            );
        }
        assert_eq!(
            eval(&mut m, "return redis.pcall()"),
            Reply::Error("ERR Please specify at least one argument for this redis lib call".into())
        );
        let r = error_text(eval(&mut m, "return redis.call('FLUSHALL')"));
        assert!(
            r.starts_with("not modelled by the simulated Redis: FLUSHALL script: "),
            "{r}"
        );
    }

    #[test]
    fn a_command_the_model_lacks_cannot_be_caught_by_the_script() {
        let mut m = RedisModel::new();
        let refused = |what: &str, source: &str| {
            format!(
                "not modelled by the simulated Redis: {what} script: {}, on @user_script:1.",
                Script::new(source).sha1
            )
        };
        for source in [
            "return redis.call('OBJECT', 'ENCODING', 'k')",
            "return redis.pcall('OBJECT', 'ENCODING', 'k')",
            "local ok, err = pcall(redis.call, 'OBJECT', 'ENCODING', 'k') return 'caught'",
            "local ok, err = pcall(function() return redis.pcall('object', 'encoding', 'k') end) return 'caught'",
            "local ok, err = xpcall(function() return redis.call('OBJECT', 'ENCODING', 'k') end, function(e) return e end) return 'caught'",
        ] {
            assert_eq!(
                eval(&mut m, source),
                Reply::Error(refused("OBJECT", source)),
                "{source}"
            );
        }
        // A form of a modelled command that the model lacks is refused the same way.
        let source = "return redis.pcall('ZADD', 'z', 'NX', 1, 'a')";
        assert_eq!(
            eval(&mut m, source),
            Reply::Error(refused("ZADD NX", source))
        );
        // A handler that raises another error, which a pcall around the xpcall catches: the
        // reply is the refusal all the same, and no command runs after it.
        let source = "local ok = pcall(function() return xpcall(function() redis.call('CLIENT', 'ID') end, function() error('other') end) end) redis.call('SET', 'after', 1) return 'caught'";
        let Reply::Error(text) = eval(&mut m, source) else {
            panic!("{source}: not refused");
        };
        assert!(
            text.starts_with("not modelled by the simulated Redis: CLIENT"),
            "{text}"
        );
        assert!(m.is_empty(), "no command runs after the refusal");
        // The engine is usable after it.
        assert_eq!(eval(&mut m, "return 1"), Reply::Int(1));
    }

    #[test]
    fn float_arguments_are_formatted_as_redis_does() {
        use super::float_argument;
        assert_eq!(float_argument(2.0), "2");
        assert_eq!(float_argument(-3.0), "-3");
        assert_eq!(float_argument(2.5), "2.5");
        assert_eq!(float_argument(0.1), "0.1");
        assert_eq!(float_argument(1e16), "10000000000000000");
        // Integral values up to 2^62 are printed as integers (`double2ll`), not as `1e+17`.
        assert_eq!(float_argument(1e17), "100000000000000000");
        assert_eq!(float_argument(-0.0), "0");
        assert_eq!(float_argument(1e20), "1e+20");
        assert_eq!(float_argument(1.5e-7), "1.5e-7");
        assert_eq!(float_argument(0.0001), "0.0001");
        assert_eq!(float_argument(f64::INFINITY), "inf");
        assert_eq!(float_argument(f64::NEG_INFINITY), "-inf");
    }

    #[test]
    fn syntax_and_runtime_errors_become_err_replies_and_the_model_stays_usable() {
        // A thread of its own, so that its engine's cache holds only this test's scripts.
        std::thread::spawn(syntax_and_runtime_errors_on_a_fresh_engine)
            .join()
            .expect("the test thread ends");
    }

    fn syntax_and_runtime_errors_on_a_fresh_engine() {
        let mut m = RedisModel::new();
        run(&mut m, "SET k v", 0);

        let compile = error_text(eval(&mut m, "return +"));
        assert!(
            compile.starts_with("ERR Error compiling script (new function): user_script:1:"),
            "{compile}"
        );
        // Redis 7 compiles the body as a chunk, whose varargs are empty.
        assert_eq!(eval(&mut m, "return ..."), Reply::Nil);

        let source = "local x = nil\nreturn x + 1";
        let runtime = error_text(eval(&mut m, source));
        assert!(
            runtime.starts_with(
                "ERR user_script:2: attempt to perform arithmetic on local 'x' (a nil value)"
            ),
            "{runtime}"
        );
        assert!(
            runtime.ends_with(&format!(
                "script: {}, on @user_script:2.",
                Script::new(source).sha1
            )),
            "{runtime}"
        );

        let raised = error_text(eval(&mut m, "error('boom')"));
        assert!(
            raised.starts_with("ERR user_script:1: boom script: "),
            "{raised}"
        );
        let raised_table = error_text(eval(&mut m, "error({err='CUSTOM thing'})"));
        assert!(
            raised_table.starts_with("CUSTOM thing script: "),
            "{raised_table}"
        );

        assert_eq!(
            super::cached_scripts(),
            4,
            "failed compilations are not cached"
        );
        assert_eq!(run(&mut m, "GET k", 0), bulk("v"));
        assert_eq!(eval(&mut m, "return redis.call('GET', 'k')"), bulk("v"));
    }

    #[test]
    fn globals_are_read_only_and_nothing_leaks_between_scripts() {
        let mut m = RedisModel::new();
        let create = error_text(eval(&mut m, "x = 1"));
        assert!(
            create.starts_with("ERR user_script:1: Attempt to modify a readonly table script:"),
            "{create}"
        );
        let read = error_text(eval(&mut m, "return undefined_thing"));
        assert!(
            read.starts_with(
                "ERR user_script:1: Script attempted to access nonexistent global variable 'undefined_thing'"
            ),
            "{read}"
        );
        for escape in [
            "redis = nil",
            "redis.call = nil",
            "string.rep = nil",
            "_G.x = 1",
            "rawset(_G, 'x', 1)",
            "load('y = 1')()",
            "setmetatable(_G, nil)",
            "KEYS = {}",
            // Every string's metatable, and the string library behind it (Redis 7 refuses both).
            "getmetatable('').__index.x = 1",
            "getmetatable('').x = 1",
            "getmetatable('').__index = {upper = function() return 'hacked' end}",
            "rawset(getmetatable(''), '__index', {})",
            "setmetatable(getmetatable(''), {})",
        ] {
            let r = eval(&mut m, escape);
            assert!(matches!(r, Reply::Error(_)), "{escape} gave {r:?}");
        }
        // After all that, a fresh script sees a pristine environment, on this server and on any
        // other that shares the thread's engine.
        for m in [&mut m, &mut RedisModel::new()] {
            assert_eq!(
                eval(
                    m,
                    "return {type(redis.call), type(string.rep), rawget(_G, 'x') == nil and 'clean' or 'dirty', \
                     ('a'):upper(), tostring(getmetatable('').x), tostring(getmetatable('').__index == string)}"
                ),
                Reply::Array(
                    ["function", "function", "clean", "A", "nil", "true"]
                        .iter()
                        .map(|s| bulk(s))
                        .collect()
                )
            );
        }
        // Locals, and scripts' own tables, are as usual.
        assert_eq!(
            eval(
                &mut m,
                "local t = {}; rawset(t, 'a', 1); t.b = 2; return t.a + t.b"
            ),
            Reply::Int(3)
        );
    }

    #[test]
    fn only_deterministic_libraries_are_available() {
        let mut m = RedisModel::new();
        let probe = "return {type(os), type(io), type(print), type(dofile), type(require), \
                     type(math.random), type(math.floor), type(string.format), \
                     type(table.concat), type(unpack), type(cjson)}";
        // `type(os)` reads a nonexistent global, which Redis makes an error; use rawget instead.
        assert!(matches!(eval(&mut m, probe), Reply::Error(_)));
        let probe = "local g = {}; for _, n in ipairs({'os', 'io', 'print', 'dofile', 'require', 'loadfile'}) do \
                     g[#g + 1] = type(rawget(_G, n)) end; \
                     g[#g + 1] = type(math.floor); \
                     g[#g + 1] = type(string.format); g[#g + 1] = type(table.concat); \
                     g[#g + 1] = type(unpack); return g";
        let expected: Vec<Reply> = [
            "nil", "nil", "nil", "nil", "nil", "nil", "function", "function", "function",
            "function",
        ]
        .iter()
        .map(|s| bulk(s))
        .collect();
        assert_eq!(eval(&mut m, probe), Reply::Array(expected));
    }

    #[test]
    fn what_redis_gives_scripts_and_the_model_lacks_is_refused_when_used() {
        let mut m = RedisModel::new();
        for (source, what) in [
            ("return math.random(10)", "math.random"),
            (
                "local ok = pcall(math.randomseed, 1) return 1",
                "math.randomseed",
            ),
            (
                "return cjson.encode_max_depth(10)",
                "cjson.encode_max_depth",
            ),
            (
                "local ok = pcall(function() return coroutine.create(print) end) return 1",
                "coroutine.create",
            ),
            (
                "local ok = pcall(function() return cmsgpack.pack(1) end) return 1",
                "cmsgpack.pack",
            ),
            ("return redis.setresp(3)", "redis.setresp"),
        ] {
            let Reply::Error(text) = eval(&mut m, source) else {
                panic!("{source}: not refused");
            };
            assert!(
                text.starts_with(&format!(
                    "not modelled by the simulated Redis: {what} script: "
                )) && text.ends_with(", on @user_script:1."),
                "{source}: {text}"
            );
        }
        // Script flags change what a script may do; the model has none of them.
        let Reply::Error(text) = eval(&mut m, "#!lua flags=no-writes\nreturn 1") else {
            panic!("a #! line was not refused");
        };
        assert!(
            text.starts_with("not modelled by the simulated Redis: a script's #! line"),
            "{text}"
        );
        assert!(super::compile("#!lua\nreturn 1").is_err());
        // `type(cjson)` is a table in Redis too; what is cheap is there.
        assert_eq!(eval(&mut m, "return type(cjson)"), bulk("table"));
        assert_eq!(
            eval(&mut m, "return redis.sha1hex('x')"),
            bulk("11f6ad8ec52a2984abaafd7c3b516503785c2072")
        );
        assert_eq!(
            eval(
                &mut m,
                "redis.log(redis.LOG_WARNING, 'hi') return redis.replicate_commands()"
            ),
            Reply::Int(1)
        );
    }

    #[test]
    fn a_script_that_stops_the_collector_does_not_stop_it_for_the_next() {
        let mut m = RedisModel::new();
        assert_eq!(
            eval(&mut m, "collectgarbage('stop') return 1"),
            Reply::Int(1)
        );
        // Lua 5.1 cannot say whether the collector runs: garbage made by the next script is
        // collected (4 MB of tables would stay with the collector stopped).
        assert_eq!(
            eval(
                &mut m,
                "local before = collectgarbage('count') for i = 1, 100000 do local t = {} end \
                 return collectgarbage('count') < before + 1000"
            ),
            Reply::Int(1)
        );
    }

    #[test]
    fn time_is_frozen_during_a_script() {
        let mut m = RedisModel::new();
        let source = "redis.call('SET', KEYS[1], 'v', 'PX', 10)\n\
                      local s = 0\n\
                      for i = 1, 100000 do s = s + i end\n\
                      return redis.call('PTTL', KEYS[1])";
        let (r, _) = eval_at(&mut m, 1_000, source, &["k"], &[]);
        assert_eq!(r, Reply::Int(10));
    }

    #[test]
    fn scripts_are_compiled_once_per_sha1_on_a_thread() {
        // A thread of its own, so that no other test's scripts are in its engine.
        std::thread::spawn(|| {
            let mut m = RedisModel::new();
            assert_eq!(super::cached_scripts(), 0);
            for i in 0..3 {
                let i = i.to_string();
                let (r, _) = eval_at(&mut m, 0, "return ARGV[1]", &[], &[i.as_str()]);
                assert_eq!(r, bulk(&i));
            }
            assert_eq!(super::cached_scripts(), 1);
            eval(&mut m, "return 2");
            assert_eq!(super::cached_scripts(), 2);
            // Another server on the thread, and a restarted one, use the same compiled scripts.
            let mut other = RedisModel::restore(m.snapshot());
            assert_eq!(eval(&mut other, "return 2"), Reply::Int(2));
            assert_eq!(super::cached_scripts(), 2);
        })
        .join()
        .expect("the test thread ends");
    }

    #[test]
    fn scripts_see_expiry_and_emit_effects_like_direct_commands() {
        let mut m = RedisModel::new();
        run(&mut m, "SET gone x PX 5", 0);
        run(&mut m, "SET kept y", 0);
        let (r, effects) = eval_at(
            &mut m,
            6,
            "return {redis.call('EXISTS', KEYS[1]), redis.call('DEL', KEYS[1], KEYS[2]), redis.call('PEXPIRE', KEYS[2], 5)}",
            &["gone", "kept"],
            &[],
        );
        assert_eq!(
            r,
            Reply::Array(vec![Reply::Int(0), Reply::Int(1), Reply::Int(0)])
        );
        assert_eq!(
            effects,
            vec![
                KeyEffect::Expired {
                    key: "gone".into(),
                    value: Some("x".into())
                },
                KeyEffect::Deleted {
                    key: "kept".into(),
                    value: Some("y".into())
                },
            ]
        );
    }

    fn hash_field(field: &str, value: Option<&str>) -> KeyEffect {
        KeyEffect::HashField {
            key: "lock".into(),
            field: field.into(),
            value: value.map(String::from),
        }
    }

    #[test]
    fn redisson_rlock_acquire_is_reentrant_and_tells_others_the_remaining_lease() {
        let mut m = RedisModel::new();
        let (r, effects) = eval_at(&mut m, 1_000, RLOCK_ACQUIRE, &["lock"], &["30000", "a:1"]);
        assert_eq!(r, Reply::Nil);
        assert_eq!(
            effects,
            vec![
                hash_field("a:1", Some("1")),
                KeyEffect::ExpiryChanged {
                    key: "lock".into(),
                    expires_at_ms: Some(31_000)
                },
            ]
        );
        // The same owner again: re-entered, count 2, lease renewed.
        let (r, effects) = eval_at(&mut m, 1_010, RLOCK_ACQUIRE, &["lock"], &["30000", "a:1"]);
        assert_eq!(r, Reply::Nil);
        assert_eq!(effects[0], hash_field("a:1", Some("2")));
        assert_eq!(run(&mut m, "HGET lock a:1", 1_010), bulk("2"));
        // Another owner gets the remaining lease and changes nothing.
        let (r, effects) = eval_at(&mut m, 1_020, RLOCK_ACQUIRE, &["lock"], &["30000", "b:1"]);
        assert_eq!(r, Reply::Int(29_990));
        assert!(effects.is_empty());
        assert_eq!(run(&mut m, "HLEN lock", 1_020), Reply::Int(1));
        // Once the lease runs out the other owner gets it.
        let (r, effects) = eval_at(&mut m, 31_011, RLOCK_ACQUIRE, &["lock"], &["30000", "b:1"]);
        assert_eq!(r, Reply::Nil);
        assert_eq!(
            effects[..2],
            [
                KeyEffect::Expired {
                    key: "lock".into(),
                    value: None
                },
                hash_field("b:1", Some("1")),
            ]
        );
    }

    #[test]
    fn redisson_rlock_unlock_counts_down_then_deletes_and_publishes() {
        let mut m = RedisModel::new();
        for _ in 0..2 {
            eval_at(&mut m, 0, RLOCK_ACQUIRE, &["lock"], &["30000", "a:1"]);
        }
        let keys = ["lock", "redisson_lock__channel:{lock}"];
        let unlock = |m: &mut RedisModel, now: u64, owner: &str| {
            eval_at(m, now, RLOCK_UNLOCK, &keys, &["0", "30000", owner])
        };
        // Not the owner: nil, nothing touched.
        let (r, effects) = unlock(&mut m, 10, "b:1");
        assert_eq!(r, Reply::Nil);
        assert!(effects.is_empty());
        // First unlock of two: still held, lease renewed.
        let (r, effects) = unlock(&mut m, 10, "a:1");
        assert_eq!(r, Reply::Int(0));
        assert_eq!(
            effects,
            vec![
                hash_field("a:1", Some("1")),
                KeyEffect::ExpiryChanged {
                    key: "lock".into(),
                    expires_at_ms: Some(30_010)
                },
            ]
        );
        // Second: the count reaches 0 (HINCRBY keeps the field), then DEL removes the key.
        let (r, effects) = unlock(&mut m, 20, "a:1");
        assert_eq!(r, Reply::Int(1));
        assert_eq!(
            effects,
            vec![
                hash_field("a:1", Some("0")),
                KeyEffect::Deleted {
                    key: "lock".into(),
                    value: None
                },
            ]
        );
        assert!(m.is_empty(), "PUBLISH stores nothing");
        let (r, _) = unlock(&mut m, 30, "a:1");
        assert_eq!(r, Reply::Nil);
        let (r, _) = eval_at(&mut m, 30, RLOCK_ACQUIRE, &["lock"], &["30000", "b:1"]);
        assert_eq!(r, Reply::Nil);
    }

    #[test]
    fn fair_queue_script_grants_only_the_head_waiter_and_dequeues_it() {
        let mut m = RedisModel::new();
        let keys = ["lock", "queue", "timeouts"];
        let acquire = |m: &mut RedisModel, owner: &str, deadline: &str| {
            eval_at(m, 0, FAIR_ACQUIRE, &keys, &[owner, "30000", deadline]).0
        };
        run(&mut m, "HSET lock x 1", 0);
        // Lock held: a queues and is told its deadline.
        assert_eq!(acquire(&mut m, "a", "1500"), bulk("1500"));
        assert_eq!(run(&mut m, "LINDEX queue 0", 0), bulk("a"));
        assert_eq!(run(&mut m, "ZSCORE timeouts a", 0), bulk("1500"));
        assert_eq!(acquire(&mut m, "b", "2500.5"), bulk("2500.5"));
        run(&mut m, "DEL lock", 0);
        // Lock free, but b is not at the head: still waits, and is not queued twice.
        assert_eq!(acquire(&mut m, "b", "9999"), bulk("2500.5"));
        assert_eq!(run(&mut m, "LLEN queue", 0), Reply::Int(2));
        // a is at the head: granted, and leaves both the queue and the deadlines.
        assert_eq!(acquire(&mut m, "a", "1500"), Reply::Nil);
        assert_eq!(run(&mut m, "HGET lock a", 0), bulk("1"));
        assert_eq!(
            run(&mut m, "LRANGE queue 0 -1", 0),
            Reply::Array(vec![bulk("b")])
        );
        assert_eq!(
            run(&mut m, "ZRANGE timeouts 0 -1 WITHSCORES", 0),
            Reply::Array(vec![bulk("b"), bulk("2500.5")])
        );
        run(&mut m, "DEL lock", 0);
        // The last waiter's grant empties the queue and the deadlines: both keys go.
        let (r, effects) = eval_at(&mut m, 0, FAIR_ACQUIRE, &keys, &["b", "30000", "9999"]);
        assert_eq!(r, Reply::Nil);
        let deleted = |key: &str| KeyEffect::Deleted {
            key: key.into(),
            value: None,
        };
        let popped = KeyEffect::ListRemoved {
            key: "queue".into(),
            value: "b".into(),
        };
        assert_eq!(
            effects[..3],
            [popped, deleted("queue"), deleted("timeouts")]
        );
        assert_eq!(run(&mut m, "EXISTS queue", 0), Reply::Int(0));
        assert_eq!(run(&mut m, "EXISTS timeouts", 0), Reply::Int(0));
    }

    #[test]
    fn aggregate_replies_and_type_errors_reach_scripts_like_redis() {
        let mut m = RedisModel::new();
        run(&mut m, "HSET h a 1 b 2", 0);
        run(&mut m, "RPUSH l x y", 0);
        let probe = "local all = redis.call('hgetall', 'h'); \
                     local popped = redis.call('lpop', 'l', 5); \
                     return {#all, all[1], all[4], #popped, popped[2], \
                             tostring(redis.call('lpop', 'l', 1)), \
                             tostring(redis.call('zscore', 'none', 'm'))}";
        assert_eq!(
            eval(&mut m, probe),
            Reply::Array(vec![
                Reply::Int(4),
                bulk("a"),
                bulk("2"),
                Reply::Int(2),
                bulk("y"),
                bulk("false"),
                bulk("false"),
            ])
        );
        // A float computed in Lua reaches ZADD as Redis would format it.
        assert_eq!(
            eval(
                &mut m,
                "redis.call('zadd', 'z', 10 / 4, 'm'); return redis.call('zscore', 'z', 'm')"
            ),
            bulk("2.5")
        );
        let source = "return redis.call('hget', 'l', 'f')";
        let sha1 = Script::new(source).sha1;
        run(&mut m, "RPUSH l x", 0);
        assert_eq!(
            eval(&mut m, source),
            Reply::Error(format!(
                "WRONGTYPE Operation against a key holding the wrong kind of value script: {sha1}, on @user_script:1."
            ))
        );
    }
}
