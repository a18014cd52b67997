//! The `bit` library Redis gives its scripts (LuaBitOp 1.0, `deps/lua/src/lua_bit.c`), which
//! stock Lua 5.1 does not have.
//!
//! LuaBitOp works on 32-bit integers held in Lua 5.1's doubles: each argument is rounded to the
//! nearest integer (ties to even, by adding 2^52 + 2^51) and taken modulo 2^32, and each result
//! is that number read as signed. Scripts use it for hashing and flags (`bit.band`, `bit.bxor`,
//! `bit.tohex`); a script that works against Redis must not fail here for want of it. An
//! argument error is LuaBitOp's text, placed as `luaL_error` places it (see
//! [`library_error`](super::lua::library_error)).

use mlua::{Lua, MultiValue, Table, Value};

/// An operation on one 32-bit argument.
type Unary = fn(u32) -> u32;
/// An operation on two.
type Binary = fn(u32, u32) -> u32;

/// Builds the `bit` table with LuaBitOp's functions.
pub(super) fn library(lua: &Lua) -> mlua::Result<Table> {
    let bit = lua.create_table()?;
    let unary: [(&str, Unary); 3] = [
        ("tobit", |b| b),
        ("bnot", |b| !b),
        ("bswap", u32::swap_bytes),
    ];
    for (name, op) in unary {
        let f = lua.create_function(move |lua, args: MultiValue| {
            Ok(signed(op(argument(lua, &args, 0, name)?)))
        })?;
        bit.raw_set(name, f)?;
    }
    let folds: [(&str, Binary); 3] = [
        ("band", |a, b| a & b),
        ("bor", |a, b| a | b),
        ("bxor", |a, b| a ^ b),
    ];
    for (name, op) in folds {
        let f = lua.create_function(move |lua, args: MultiValue| {
            let mut acc = argument(lua, &args, 0, name)?;
            for i in 1..args.len() {
                acc = op(acc, argument(lua, &args, i, name)?);
            }
            Ok(signed(acc))
        })?;
        bit.raw_set(name, f)?;
    }
    // The shift count is taken modulo 32, as LuaBitOp masks it with 31.
    let shifts: [(&str, Binary); 5] = [
        ("lshift", |b, n| b << n),
        ("rshift", |b, n| b >> n),
        ("arshift", |b, n| ((b as i32) >> n) as u32),
        ("rol", u32::rotate_left),
        ("ror", u32::rotate_right),
    ];
    for (name, op) in shifts {
        let f = lua.create_function(move |lua, args: MultiValue| {
            let b = argument(lua, &args, 0, name)?;
            let n = argument(lua, &args, 1, name)? & 31;
            Ok(signed(op(b, n)))
        })?;
        bit.raw_set(name, f)?;
    }
    let tohex = lua.create_function(|lua, args: MultiValue| {
        let mut b = argument(lua, &args, 0, "tohex")?;
        let n = match args.get(1) {
            None => 8,
            Some(_) => argument(lua, &args, 1, "tohex")? as i32,
        };
        let digits: &[u8; 16] = if n < 0 {
            b"0123456789ABCDEF"
        } else {
            b"0123456789abcdef"
        };
        let n = n.unsigned_abs().min(8) as usize;
        let mut out = vec![b'0'; n];
        for place in out.iter_mut().rev() {
            *place = digits[(b & 15) as usize];
            b >>= 4;
        }
        lua.create_string(&out)
    })?;
    bit.raw_set("tohex", tohex)?;
    Ok(bit)
}

/// A 32-bit result as LuaBitOp pushes it: signed.
fn signed(b: u32) -> i64 {
    i64::from(b as i32)
}

/// Argument `i` (from 0) of `name` as LuaBitOp's `barg` reads it: a number, or a string Lua
/// reads as one; rounded to the nearest integer, ties to even, modulo 2^32. Anything else is
/// Lua 5.1's argument error.
fn argument(lua: &Lua, args: &MultiValue, i: usize, name: &str) -> mlua::Result<u32> {
    let value = args.get(i).cloned().unwrap_or(Value::Nil);
    let type_name = if i < args.len() {
        value.type_name()
    } else {
        "no value"
    };
    let number = match value {
        Value::Integer(n) => Some(n as f64),
        Value::Number(n) => Some(n),
        Value::String(_) => lua.coerce_number(value)?,
        _ => None,
    };
    let Some(number) = number else {
        let message = format!(
            "bad argument #{} to '{name}' (number expected, got {type_name})",
            i + 1
        );
        return Err(super::lua::library_error(lua, &message));
    };
    // Adding 2^52 + 2^51 leaves the integer nearest to the number (ties to even) in the low 32
    // bits of the double's mantissa; infinities and NaN leave 0 there.
    let rounded = number.round_ties_even().rem_euclid(4_294_967_296.0);
    Ok(if rounded.is_finite() {
        rounded as u32
    } else {
        0
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(source: &str) -> String {
        let lua = Lua::new();
        lua.globals().set("bit", library(&lua).unwrap()).unwrap();
        lua.load(source)
            .eval::<mlua::String>()
            .unwrap()
            .to_string_lossy()
    }

    #[test]
    fn results_are_luabitops() {
        // Each as Redis 7.0's LuaBitOp answers it (checked against redis-server in the
        // conformance test).
        let cases = [
            ("bit.band(5, 3)", "1"),
            ("bit.bor(1, 2, 4, 8)", "15"),
            ("bit.bxor(7, 2)", "5"),
            ("bit.bnot(0)", "-1"),
            ("bit.tobit(0xffffffff)", "-1"),
            ("bit.tobit(2^32 + 5)", "5"),
            ("bit.tobit(2.5)", "2"),
            ("bit.tobit(3.5)", "4"),
            ("bit.tobit(-1.5)", "-2"),
            ("bit.tobit('12')", "12"),
            ("bit.lshift(1, 31)", "-2147483648"),
            ("bit.lshift(1, 33)", "2"),
            ("bit.rshift(-1, 28)", "15"),
            ("bit.arshift(-16, 2)", "-4"),
            ("bit.rol(0x80000001, 1)", "3"),
            ("bit.ror(1, 1)", "-2147483648"),
            ("bit.bswap(0x12345678)", "2018915346"),
            ("bit.tohex(255)", "000000ff"),
            ("bit.tohex(-1, -4)", "FFFF"),
            ("bit.tohex(0x12345678, 12)", "12345678"),
            ("bit.tohex(1, 0)", ""),
        ];
        for (expr, expected) in cases {
            assert_eq!(run(&format!("return tostring({expr})")), expected, "{expr}");
        }
    }

    #[test]
    fn a_non_number_is_lua_5_1s_argument_error() {
        let lua = Lua::new();
        lua.globals().set("bit", library(&lua).unwrap()).unwrap();
        let err = lua.load("return bit.band(1, {})").exec().unwrap_err();
        assert!(
            err.to_string()
                .contains("bad argument #2 to 'band' (number expected, got table)"),
            "{err}"
        );
        let err = lua.load("return bit.bnot()").exec().unwrap_err();
        assert!(err.to_string().contains("got no value"), "{err}");
    }
}
