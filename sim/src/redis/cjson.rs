//! The `cjson` library Redis gives its scripts (lua-cjson 2.1.0, `deps/lua/src/lua_cjson.c`),
//! with Redis's default settings.
//!
//! Lock libraries keep structured values in a key (an owner with its thread and host, a queue
//! entry) and read them back in the script that releases or renews; a script that works against
//! Redis must not fail here for want of `cjson`, and must get the bytes Redis writes: numbers as
//! `%.14g`, `/` escaped as `\/`, an empty table as `{}`, a table's fields in Lua's own `next`
//! order (the simulated Redis runs the same Lua 5.1, whose string hash is unseeded, so the order
//! is Redis's), `null` as the light userdata `cjson.null`. Every error is lua-cjson's text,
//! raised as `luaL_error` raises it (see [`library_error`]).
//!
//! What is not here: the setting functions (`encode_max_depth`, `encode_keep_buffer`, `new`, …)
//! are refused when used, as anything the model lacks is (they change lua-cjson's state for
//! every later script, which the model's shared engine would carry across servers).

use mlua::{LightUserData, Lua, MultiValue, Table, Value};

use super::lua::{library_error, refuse_for_the_run};

/// lua-cjson's `DEFAULT_ENCODE_MAX_DEPTH` and `DEFAULT_DECODE_MAX_DEPTH`.
const MAX_DEPTH: usize = 1000;
/// `DEFAULT_SPARSE_RATIO` and `DEFAULT_SPARSE_SAFE`: an array whose largest index exceeds both
/// twice its element count and 10 is "excessively sparse" (an error, `DEFAULT_SPARSE_CONVERT` 0).
const SPARSE_RATIO: i64 = 2;
const SPARSE_SAFE: i64 = 10;

/// Builds the `cjson` table.
pub(super) fn library(lua: &Lua) -> mlua::Result<Table> {
    let cjson = lua.create_table()?;
    cjson.raw_set("encode", lua.create_function(encode)?)?;
    cjson.raw_set("decode", lua.create_function(decode)?)?;
    for name in [
        "encode_sparse_array",
        "encode_max_depth",
        "decode_max_depth",
        "encode_number_precision",
        "encode_keep_buffer",
        "encode_invalid_numbers",
        "decode_invalid_numbers",
        "new",
    ] {
        let refusal = lua.create_function(move |lua, _: MultiValue| {
            refuse_for_the_run(lua, format!("cjson.{name}"))
        })?;
        cjson.raw_set(name, refusal)?;
    }
    cjson.raw_set("null", null())?;
    cjson.raw_set("_NAME", "cjson")?;
    cjson.raw_set("_VERSION", "2.1.0")?;
    Ok(cjson)
}

/// `cjson.null`: a NULL light userdata, since a table cannot hold `nil`.
fn null() -> Value {
    Value::LightUserData(LightUserData(std::ptr::null_mut()))
}

/// Lua 5.1's name for a value's type (`lua_typename`), which lua-cjson's messages use: a light
/// userdata is "userdata", as is an mlua error.
fn type_name(value: &Value) -> &'static str {
    match value {
        Value::Nil => "nil",
        Value::Boolean(_) => "boolean",
        Value::Integer(_) | Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Table(_) => "table",
        Value::Function(_) => "function",
        Value::Thread(_) => "thread",
        _ => "userdata",
    }
}

/// A Lua number's value (mlua reads an integral 5.1 number as an `Integer`).
fn number(value: &Value) -> f64 {
    match value {
        Value::Integer(n) => *n as f64,
        Value::Number(n) => *n,
        _ => f64::NAN,
    }
}

/// `cjson.encode(value)`.
fn encode(lua: &Lua, args: MultiValue) -> mlua::Result<mlua::String> {
    if args.len() != 1 {
        return Err(library_error(
            lua,
            "bad argument #1 to 'encode' (expected 1 argument)",
        ));
    }
    let mut out = Vec::new();
    append(lua, &args[0], 0, &mut out)?;
    lua.create_string(out)
}

/// `json_append_data`: `value` as JSON at nesting `depth`.
fn append(lua: &Lua, value: &Value, depth: usize, out: &mut Vec<u8>) -> mlua::Result<()> {
    match value {
        Value::String(s) => append_string(&s.as_bytes(), out),
        Value::Integer(_) | Value::Number(_) => append_number(lua, number(value), value, out)?,
        Value::Boolean(b) => out.extend_from_slice(if *b { b"true" } else { b"false" }),
        Value::Nil => out.extend_from_slice(b"null"),
        Value::LightUserData(p) if p.0.is_null() => out.extend_from_slice(b"null"),
        Value::Table(t) => {
            let depth = depth + 1;
            if depth > MAX_DEPTH {
                let message = format!("Cannot serialise, excessive nesting ({depth})");
                return Err(library_error(lua, &message));
            }
            match array_length(lua, t)? {
                Some(len) if len > 0 => {
                    out.push(b'[');
                    for i in 1..=len {
                        if i > 1 {
                            out.push(b',');
                        }
                        append(lua, &t.raw_get::<Value>(i)?, depth, out)?;
                    }
                    out.push(b']');
                }
                _ => append_object(lua, t, depth, out)?,
            }
        }
        other => return Err(cannot_serialise(lua, other, "type not supported")),
    }
    Ok(())
}

/// lua-cjson's encoding error: "Cannot serialise TYPE: REASON".
fn cannot_serialise(lua: &Lua, value: &Value, reason: &str) -> mlua::Error {
    let message = format!("Cannot serialise {}: {reason}", type_name(value));
    library_error(lua, &message)
}

/// `lua_array_length`: the table's largest index when every key is an integer ≥ 1 (`None` for
/// an object), and the sparse-array error.
fn array_length(lua: &Lua, t: &Table) -> mlua::Result<Option<i64>> {
    let mut max = 0i64;
    let mut items = 0i64;
    for pair in t.pairs::<Value, Value>() {
        let (key, _) = pair?;
        let k = match key {
            Value::Integer(_) | Value::Number(_) => number(&key),
            _ => return Ok(None),
        };
        if k == 0.0 || k.floor() != k || k < 1.0 {
            return Ok(None);
        }
        max = max.max(k as i64);
        items += 1;
    }
    if max > items * SPARSE_RATIO && max > SPARSE_SAFE {
        return Err(cannot_serialise(
            lua,
            &Value::Table(t.clone()),
            "excessively sparse array",
        ));
    }
    Ok(Some(max))
}

/// `json_append_object`: fields in `next` order, number keys written as quoted numbers.
fn append_object(lua: &Lua, t: &Table, depth: usize, out: &mut Vec<u8>) -> mlua::Result<()> {
    out.push(b'{');
    let mut first = true;
    for pair in t.pairs::<Value, Value>() {
        let (key, value) = pair?;
        if !first {
            out.push(b',');
        }
        first = false;
        match &key {
            Value::Integer(_) | Value::Number(_) => {
                out.push(b'"');
                append_number(lua, number(&key), &key, out)?;
                out.extend_from_slice(b"\":");
            }
            Value::String(s) => {
                append_string(&s.as_bytes(), out);
                out.push(b':');
            }
            other => {
                return Err(cannot_serialise(
                    lua,
                    other,
                    "table key must be a number or string",
                ))
            }
        }
        append(lua, &value, depth, out)?;
    }
    out.push(b'}');
    Ok(())
}

/// `json_append_number`: `%.14g`, and no NaN or infinity (`DEFAULT_ENCODE_INVALID_NUMBERS` 0).
fn append_number(lua: &Lua, n: f64, value: &Value, out: &mut Vec<u8>) -> mlua::Result<()> {
    if !n.is_finite() {
        return Err(cannot_serialise(lua, value, "must not be NaN or Inf"));
    }
    // Lua 5.1 writes its numbers as `%.14g` too (`LUAI_NUMFMT`), through the same C library
    // lua-cjson's `fpconv_g_fmt` calls: its own conversion is lua-cjson's text.
    let text = lua
        .coerce_string(Value::Number(n))?
        .ok_or_else(|| mlua::Error::runtime("a number converts to a string"))?;
    out.extend_from_slice(&text.as_bytes());
    Ok(())
}

/// `json_append_string` with lua-cjson's `char2escape` table: control characters, `"`, `\`,
/// `/` and DEL escaped, every other byte as it is (no UTF-8 check).
fn append_string(bytes: &[u8], out: &mut Vec<u8>) {
    out.push(b'"');
    for &b in bytes {
        match b {
            b'"' => out.extend_from_slice(b"\\\""),
            b'\\' => out.extend_from_slice(b"\\\\"),
            b'/' => out.extend_from_slice(b"\\/"),
            0x08 => out.extend_from_slice(b"\\b"),
            b'\t' => out.extend_from_slice(b"\\t"),
            b'\n' => out.extend_from_slice(b"\\n"),
            0x0c => out.extend_from_slice(b"\\f"),
            b'\r' => out.extend_from_slice(b"\\r"),
            0..=0x1f | 0x7f => out.extend_from_slice(format!("\\u{b:04x}").as_bytes()),
            _ => out.push(b),
        }
    }
    out.push(b'"');
}

/// `cjson.decode(text)`.
fn decode(lua: &Lua, args: MultiValue) -> mlua::Result<Value> {
    if args.len() != 1 {
        return Err(library_error(
            lua,
            "bad argument #1 to 'decode' (expected 1 argument)",
        ));
    }
    // `luaL_checklstring`: a number is read as its text.
    let text = match &args[0] {
        Value::String(s) => s.as_bytes().to_vec(),
        Value::Integer(_) | Value::Number(_) => match lua.coerce_string(args[0].clone())? {
            Some(s) => s.as_bytes().to_vec(),
            None => Vec::new(),
        },
        other => {
            let message = format!(
                "bad argument #1 to 'decode' (string expected, got {})",
                type_name(other)
            );
            return Err(library_error(lua, &message));
        }
    };
    if text.len() >= 2 && (text[0] == 0 || text[1] == 0) {
        return Err(library_error(
            lua,
            "JSON parser does not support UTF-16 or UTF-32",
        ));
    }
    let mut parser = Parser {
        lua,
        data: &text,
        pos: 0,
        depth: 0,
    };
    let token = parser.next_token();
    let value = parser.value(token)?;
    let token = parser.next_token();
    if token.kind != Kind::End {
        return Err(parser.expected("the end", &token));
    }
    Ok(value)
}

/// lua-cjson's token types; their names appear in its messages.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Kind {
    ObjBegin,
    ObjEnd,
    ArrBegin,
    ArrEnd,
    String,
    Number,
    Boolean,
    Null,
    Colon,
    Comma,
    End,
    Error,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::ObjBegin => "T_OBJ_BEGIN",
            Kind::ObjEnd => "T_OBJ_END",
            Kind::ArrBegin => "T_ARR_BEGIN",
            Kind::ArrEnd => "T_ARR_END",
            Kind::String => "T_STRING",
            Kind::Number => "T_NUMBER",
            Kind::Boolean => "T_BOOLEAN",
            Kind::Null => "T_NULL",
            Kind::Colon => "T_COLON",
            Kind::Comma => "T_COMMA",
            Kind::End => "T_END",
            Kind::Error => "T_ERROR",
        }
    }
}

/// One token: where it starts (or, for an error, where the error is), and its value.
struct Token {
    kind: Kind,
    index: usize,
    string: Vec<u8>,
    number: f64,
    boolean: bool,
    /// An error token's reason ("invalid token", "unexpected end of string", …).
    error: &'static str,
}

impl Token {
    fn new(kind: Kind, index: usize) -> Token {
        Token {
            kind,
            index,
            string: Vec::new(),
            number: 0.0,
            boolean: false,
            error: "",
        }
    }

    fn error(index: usize, reason: &'static str) -> Token {
        Token {
            error: reason,
            ..Token::new(Kind::Error, index)
        }
    }
}

/// lua-cjson's parser over a NUL-terminated text: a byte past the end, or an embedded NUL, ends
/// it (C reads the string up to its first NUL).
struct Parser<'a> {
    lua: &'a Lua,
    data: &'a [u8],
    pos: usize,
    depth: usize,
}

impl Parser<'_> {
    fn at(&self, i: usize) -> u8 {
        self.data.get(i).copied().unwrap_or(0)
    }

    fn starts_with(&self, word: &[u8]) -> bool {
        self.data[self.pos.min(self.data.len())..].starts_with(word)
    }

    /// `json_next_token`.
    fn next_token(&mut self) -> Token {
        while matches!(self.at(self.pos), b' ' | b'\t' | b'\n' | b'\r') {
            self.pos += 1;
        }
        let index = self.pos;
        let simple = match self.at(index) {
            b'{' => Some(Kind::ObjBegin),
            b'}' => Some(Kind::ObjEnd),
            b'[' => Some(Kind::ArrBegin),
            b']' => Some(Kind::ArrEnd),
            b',' => Some(Kind::Comma),
            b':' => Some(Kind::Colon),
            0 => return Token::new(Kind::End, index),
            _ => None,
        };
        if let Some(kind) = simple {
            self.pos += 1;
            return Token::new(kind, index);
        }
        let ch = self.at(index);
        if !matches!(
            ch,
            b'f' | b'i' | b'I' | b'n' | b'N' | b't' | b'"' | b'+' | b'-'
        ) && !ch.is_ascii_digit()
        {
            return Token::error(index, "invalid token");
        }
        if ch == b'"' {
            return self.string_token();
        }
        // `DEFAULT_DECODE_INVALID_NUMBERS` is 1: whatever `strtod` reads is a number.
        if ch == b'-' || ch.is_ascii_digit() {
            return self.number_token();
        }
        for (word, kind, boolean) in [
            (&b"true"[..], Kind::Boolean, true),
            (b"false", Kind::Boolean, false),
            (b"null", Kind::Null, false),
        ] {
            if self.starts_with(word) {
                self.pos += word.len();
                let mut token = Token::new(kind, index);
                token.boolean = boolean;
                return token;
            }
        }
        if self.is_invalid_number() {
            return self.number_token();
        }
        Token::error(index, "invalid token")
    }

    /// `json_is_invalid_number`: what strict JSON refuses but `strtod` may read.
    fn is_invalid_number(&self) -> bool {
        let mut p = self.pos;
        if self.at(p) == b'+' {
            return true;
        }
        if self.at(p) == b'-' {
            p += 1;
        }
        let ch = self.at(p);
        if ch == b'0' {
            let next = self.at(p + 1);
            return next | 0x20 == b'x' || next.is_ascii_digit();
        }
        if ch <= b'9' {
            return false;
        }
        let rest = &self.data[p.min(self.data.len())..];
        let starts = |word: &[u8]| rest.len() >= 3 && rest[..3].eq_ignore_ascii_case(word);
        starts(b"inf") || starts(b"nan")
    }

    /// `json_next_number_token`: `strtod` at the current position.
    fn number_token(&mut self) -> Token {
        let index = self.pos;
        match strtod(&self.data[index..]) {
            Some((number, used)) => {
                self.pos += used;
                let mut token = Token::new(Kind::Number, index);
                token.number = number;
                token
            }
            None => Token::error(index, "invalid number"),
        }
    }

    /// `json_next_string_token`.
    fn string_token(&mut self) -> Token {
        let index = self.pos;
        self.pos += 1;
        let mut string = Vec::new();
        loop {
            let ch = self.at(self.pos);
            if ch == b'"' {
                break;
            }
            if ch == 0 {
                return Token::error(self.pos, "unexpected end of string");
            }
            if ch == b'\\' {
                let translated = match self.at(self.pos + 1) {
                    b'"' => b'"',
                    b'\\' => b'\\',
                    b'/' => b'/',
                    b'b' => 0x08,
                    b'f' => 0x0c,
                    b'n' => b'\n',
                    b'r' => b'\r',
                    b't' => b'\t',
                    b'u' => {
                        if self.unicode_escape(&mut string) {
                            continue;
                        }
                        return Token::error(self.pos, "invalid unicode escape code");
                    }
                    _ => return Token::error(self.pos, "invalid escape code"),
                };
                string.push(translated);
                self.pos += 2;
                continue;
            }
            string.push(ch);
            self.pos += 1;
        }
        self.pos += 1;
        let mut token = Token::new(Kind::String, index);
        token.string = string;
        token
    }

    /// `json_append_unicode_escape`: `\uXXXX` (a surrogate pair as two) as UTF-8.
    fn unicode_escape(&mut self, out: &mut Vec<u8>) -> bool {
        let hex4 = |at: usize| -> Option<u32> {
            (0..4).try_fold(0u32, |acc, i| {
                char::from(self.at(at + i))
                    .to_digit(16)
                    .map(|d| (acc << 4) | d)
            })
        };
        let Some(mut codepoint) = hex4(self.pos + 2) else {
            return false;
        };
        let mut length = 6;
        if codepoint & 0xF800 == 0xD800 {
            if codepoint & 0x400 != 0 {
                return false;
            }
            if self.at(self.pos + 6) != b'\\' || self.at(self.pos + 7) != b'u' {
                return false;
            }
            let Some(low) = hex4(self.pos + 8) else {
                return false;
            };
            if low & 0xFC00 != 0xDC00 {
                return false;
            }
            codepoint = (((codepoint & 0x3FF) << 10) | (low & 0x3FF)) + 0x10000;
            length = 12;
        }
        let c = codepoint;
        match c {
            0..=0x7F => out.push(c as u8),
            0x80..=0x7FF => {
                out.extend_from_slice(&[(c >> 6) as u8 | 0xC0, (c & 0x3F) as u8 | 0x80])
            }
            0x800..=0xFFFF => out.extend_from_slice(&[
                (c >> 12) as u8 | 0xE0,
                ((c >> 6) & 0x3F) as u8 | 0x80,
                (c & 0x3F) as u8 | 0x80,
            ]),
            _ => out.extend_from_slice(&[
                (c >> 18) as u8 | 0xF0,
                ((c >> 12) & 0x3F) as u8 | 0x80,
                ((c >> 6) & 0x3F) as u8 | 0x80,
                (c & 0x3F) as u8 | 0x80,
            ]),
        }
        self.pos += length;
        true
    }

    /// `json_throw_parse_error`.
    fn expected(&self, what: &str, token: &Token) -> mlua::Error {
        let found = if token.kind == Kind::Error {
            token.error
        } else {
            token.kind.name()
        };
        let message = format!(
            "Expected {what} but found {found} at character {}",
            token.index + 1
        );
        library_error(self.lua, &message)
    }

    /// `json_decode_descend`.
    fn descend(&mut self) -> mlua::Result<()> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            let message = format!(
                "Found too many nested data structures ({}) at character {}",
                self.depth, self.pos
            );
            return Err(library_error(self.lua, &message));
        }
        Ok(())
    }

    /// `json_process_value`.
    fn value(&mut self, token: Token) -> mlua::Result<Value> {
        Ok(match token.kind {
            Kind::String => Value::String(self.lua.create_string(&token.string)?),
            Kind::Number => Value::Number(token.number),
            Kind::Boolean => Value::Boolean(token.boolean),
            Kind::Null => null(),
            Kind::ObjBegin => Value::Table(self.object()?),
            Kind::ArrBegin => Value::Table(self.array()?),
            _ => return Err(self.expected("value", &token)),
        })
    }

    /// `json_parse_object_context`.
    fn object(&mut self) -> mlua::Result<Table> {
        self.descend()?;
        let table = self.lua.create_table()?;
        let mut token = self.next_token();
        if token.kind == Kind::ObjEnd {
            self.depth -= 1;
            return Ok(table);
        }
        loop {
            if token.kind != Kind::String {
                return Err(self.expected("object key string", &token));
            }
            let key = self.lua.create_string(&token.string)?;
            let colon = self.next_token();
            if colon.kind != Kind::Colon {
                return Err(self.expected("colon", &colon));
            }
            let value_token = self.next_token();
            let value = self.value(value_token)?;
            table.raw_set(key, value)?;
            let next = self.next_token();
            if next.kind == Kind::ObjEnd {
                self.depth -= 1;
                return Ok(table);
            }
            if next.kind != Kind::Comma {
                return Err(self.expected("comma or object end", &next));
            }
            token = self.next_token();
        }
    }

    /// `json_parse_array_context`.
    fn array(&mut self) -> mlua::Result<Table> {
        self.descend()?;
        let table = self.lua.create_table()?;
        let mut token = self.next_token();
        if token.kind == Kind::ArrEnd {
            self.depth -= 1;
            return Ok(table);
        }
        for i in 1.. {
            let value = self.value(token)?;
            table.raw_set(i, value)?;
            let next = self.next_token();
            if next.kind == Kind::ArrEnd {
                self.depth -= 1;
                return Ok(table);
            }
            if next.kind != Kind::Comma {
                return Err(self.expected("comma or array end", &next));
            }
            token = self.next_token();
        }
        unreachable!("the loop returns")
    }
}

/// C's `strtod` at the start of `text` (no leading space: the tokenizer has eaten it): the
/// number and how many bytes it used, or `None` when nothing converts. It reads what glibc
/// reads: a sign, `inf`/`infinity`, `nan` with an optional `(…)`, hexadecimal with a binary
/// exponent, and decimal with an exponent.
fn strtod(text: &[u8]) -> Option<(f64, usize)> {
    let at = |i: usize| text.get(i).copied().unwrap_or(0);
    let mut i = 0;
    let negative = match at(0) {
        b'-' => {
            i = 1;
            true
        }
        b'+' => {
            i = 1;
            false
        }
        _ => false,
    };
    let signed = |n: f64| if negative { -n } else { n };
    let rest = &text[i.min(text.len())..];
    let starts =
        |word: &[u8]| rest.len() >= word.len() && rest[..word.len()].eq_ignore_ascii_case(word);
    if starts(b"infinity") {
        return Some((signed(f64::INFINITY), i + 8));
    }
    if starts(b"inf") {
        return Some((signed(f64::INFINITY), i + 3));
    }
    if starts(b"nan") {
        let mut end = i + 3;
        if at(end) == b'(' {
            let mut j = end + 1;
            while at(j).is_ascii_alphanumeric() || at(j) == b'_' {
                j += 1;
            }
            if at(j) == b')' {
                end = j + 1;
            }
        }
        return Some((signed(f64::NAN), end));
    }
    if at(i) == b'0' && at(i + 1) | 0x20 == b'x' {
        if let Some((n, used)) = hex(&text[i + 2..]) {
            return Some((signed(n), i + 2 + used));
        }
        // "0x" with no digit after it is the number 0 followed by "x".
        return Some((signed(0.0), i + 1));
    }
    let start = i;
    let mut digits = 0;
    while at(i).is_ascii_digit() {
        i += 1;
        digits += 1;
    }
    if at(i) == b'.' {
        i += 1;
        while at(i).is_ascii_digit() {
            i += 1;
            digits += 1;
        }
    }
    if digits == 0 {
        return None;
    }
    if at(i) | 0x20 == b'e' {
        let mut j = i + 1;
        if matches!(at(j), b'+' | b'-') {
            j += 1;
        }
        if at(j).is_ascii_digit() {
            while at(j).is_ascii_digit() {
                j += 1;
            }
            i = j;
        }
    }
    let literal = std::str::from_utf8(&text[start..i]).ok()?;
    let n: f64 = literal.parse().ok()?;
    Some((signed(n), i))
}

/// The hexadecimal part of a `strtod` number after `0x`: digits, an optional fraction, an
/// optional binary exponent `p±N`.
fn hex(text: &[u8]) -> Option<(f64, usize)> {
    let at = |i: usize| text.get(i).copied().unwrap_or(0);
    let digit = |b: u8| char::from(b).to_digit(16);
    let mut i = 0;
    let mut value = 0f64;
    let mut digits = 0;
    while let Some(d) = digit(at(i)) {
        value = value * 16.0 + f64::from(d);
        i += 1;
        digits += 1;
    }
    let mut scale = 0i32;
    if at(i) == b'.' {
        let mut j = i + 1;
        while let Some(d) = digit(at(j)) {
            value = value * 16.0 + f64::from(d);
            scale -= 4;
            j += 1;
            digits += 1;
        }
        if digits > 0 {
            i = j;
        }
    }
    if digits == 0 {
        return None;
    }
    if at(i) | 0x20 == b'p' {
        let mut j = i + 1;
        let negative = at(j) == b'-';
        if matches!(at(j), b'+' | b'-') {
            j += 1;
        }
        if at(j).is_ascii_digit() {
            let mut exponent = 0i32;
            while at(j).is_ascii_digit() {
                exponent = exponent
                    .saturating_mul(10)
                    .saturating_add(i32::from(at(j) - b'0'));
                j += 1;
            }
            scale = scale.saturating_add(if negative { -exponent } else { exponent });
            i = j;
        }
    }
    Some((value * 2f64.powi(scale), i))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_are_written_as_printf_g_14() {
        let lua = Lua::new();
        lua.globals().set("cjson", library(&lua).unwrap()).unwrap();
        let text: String = lua
            .load("return cjson.encode({0.1, 1/3, 5, -0, 1e15, 123456789012345, 2^63, 0.0001, 0.00001})")
            .eval()
            .unwrap();
        assert_eq!(
            text,
            "[0.1,0.33333333333333,5,-0,1e+15,1.2345678901234e+14,9.2233720368548e+18,0.0001,1e-05]"
        );
    }

    #[test]
    fn strtod_reads_what_glibc_reads() {
        let cases: [(&str, Option<(f64, usize)>); 9] = [
            ("12.5e1 ", Some((125.0, 6))),
            ("-0", Some((-0.0, 2))),
            ("0x1F]", Some((31.0, 4))),
            ("0x", Some((0.0, 1))),
            ("1e", Some((1.0, 1))),
            ("+7", Some((7.0, 2))),
            ("-Infinity", Some((f64::NEG_INFINITY, 9))),
            ("-", None),
            (".5", Some((0.5, 2))),
        ];
        for (text, expected) in cases {
            assert_eq!(strtod(text.as_bytes()), expected, "{text}");
        }
    }
}
