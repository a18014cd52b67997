//! Reading what users hand lockcheck (scenario files, reports, expectations, regressions, a
//! matrix): a size cap before anything is parsed, a JSON document that must end where its value
//! ends, and error messages that quote the input only in part.
//!
//! Every file lockcheck reads goes through here, so that a file past the cap is refused before
//! a byte of it is read, `lockcheck run /dev/zero` (or a FIFO, which would block) is refused as
//! no regular file, and an error quoting a 50 MB string prints a line.
//!
//! What lockcheck prints of its input goes through here too: a quoted value is clipped and its
//! control characters escaped ([`clip`]), a whole line for the terminal has its escape sequences
//! escaped ([`terminal_text`]), and a number read as a float is written in at most
//! [`FLOAT_CHARS`] characters ([`float_text`]).

use serde::de::DeserializeOwned;
use std::io::Read;
use std::path::Path;

/// The largest scenario or expectations file read (a scenario of the most faults allowed,
/// [`crate::limits::MAX_FAULTS`], takes about 1.5 MB).
pub const MAX_SCENARIO_BYTES: u64 = 16 << 20;
/// The largest report, regressions file or `matrix.json` read (a report holds a whole history).
pub const MAX_REPORT_BYTES: u64 = 1 << 30;
/// The most characters of one quoted input an error message repeats.
const QUOTE_CHARS: usize = 60;

/// The text of the file at `path`, refused when it is larger than `cap` bytes or not UTF-8.
/// Reads at most `cap + 1` bytes whatever the file claims (`/dev/zero` claims nothing).
pub fn read_text(path: &Path, cap: u64) -> std::io::Result<String> {
    // A FIFO would block the open until someone writes to it, and a device such as /dev/zero
    // would be read up to the cap for nothing: only a regular file is an input. Looked at
    // before the open (which a FIFO would block) and again on the opened file.
    let regular = |m: std::fs::Metadata| {
        if m.is_file() {
            Ok(())
        } else {
            Err(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                "not a regular file (lockcheck reads files, not devices, FIFOs or directories)",
            ))
        }
    };
    let too_large = || {
        std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("larger than {} (the most lockcheck reads)", bytes_text(cap)),
        )
    };
    regular(std::fs::metadata(path)?)?;
    let file = std::fs::File::open(path)?;
    let meta = file.metadata()?;
    regular(meta.clone())?;
    // A regular file says how long it is: one past the cap is refused before a byte of it is
    // read (it used to be read up to the cap first, a gigabyte for a report).
    if meta.len() > cap {
        return Err(too_large());
    }
    // The file may grow while it is read: never more than the cap all the same.
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    file.take(cap + 1).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > cap {
        return Err(too_large());
    }
    String::from_utf8(bytes).map_err(|e| {
        std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("not UTF-8 text (byte {})", e.utf8_error().valid_up_to()),
        )
    })
}

/// `n` bytes for people: `16 MiB`, `1 GiB`, `512 bytes`.
fn bytes_text(n: u64) -> String {
    match n {
        n if n >= 1 << 30 && n % (1 << 30) == 0 => format!("{} GiB", n >> 30),
        n if n >= 1 << 20 && n % (1 << 20) == 0 => format!("{} MiB", n >> 20),
        n => format!("{n} bytes"),
    }
}

/// Where a JSON document went wrong: the path of the value at fault (`params.ttl_ms`, `.` for
/// the whole) and what is wrong there, its quotes clipped ([`clip_quotes`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JsonError {
    /// The path inside the document.
    pub path: String,
    /// What is wrong.
    pub message: String,
}

/// Parses `text` as one JSON document of type `T`: unknown shapes name their path, and text
/// after the document (a second object, stray characters) is an error, not ignored.
pub fn parse_json<T: DeserializeOwned>(text: &str) -> Result<T, JsonError> {
    let de = &mut serde_json::Deserializer::from_str(text);
    let value: T = serde_path_to_error::deserialize(&mut *de).map_err(|e| JsonError {
        path: e.path().to_string(),
        message: clip_quotes(&e.into_inner().to_string()),
    })?;
    de.end().map_err(|e| JsonError {
        path: ".".into(),
        message: format!("text after the end of the document ({e})"),
    })?;
    Ok(value)
}

/// Checks that `text`, the JSON `parsed` was read from, writes as an object (`{...}`) every value
/// that `parsed` holds as one: serde also takes a struct from a list of its fields in order, so
/// `"workload": [3, 1000]` would quietly be read as `acquisitions_per_client` and `hold_ms`,
/// and a list in the wrong order would run another scenario than the one meant. A list where
/// an object belongs is refused, naming where.
pub fn objects_as_written<T: serde::Serialize>(text: &str, parsed: &T) -> Result<(), JsonError> {
    let input: serde_json::Value = serde_json::from_str(text).map_err(|e| JsonError {
        path: ".".into(),
        message: clip_quotes(&e.to_string()),
    })?;
    objects_where_written(&input, parsed)
}

/// [`objects_as_written`] of a document already read as a value: `input` as written (a TOML
/// file's table, converted), `parsed` what was read from it.
pub fn objects_where_written<T: serde::Serialize>(
    input: &serde_json::Value,
    parsed: &T,
) -> Result<(), JsonError> {
    fn walk(
        input: &serde_json::Value,
        canonical: &serde_json::Value,
        path: &str,
    ) -> Result<(), JsonError> {
        use serde_json::Value;
        match (input, canonical) {
            (Value::Array(_), Value::Object(_)) => Err(JsonError {
                path: if path.is_empty() {
                    ".".into()
                } else {
                    path.into()
                },
                message: "expected an object with named fields (`{...}`), got a list: \
                          lockcheck does not read fields by position"
                    .into(),
            }),
            (Value::Object(given), Value::Object(fields)) => {
                for (key, value) in given {
                    if let Some(field) = fields.get(key) {
                        let at = if path.is_empty() {
                            key.clone()
                        } else {
                            format!("{path}.{key}")
                        };
                        walk(value, field, &at)?;
                    }
                }
                Ok(())
            }
            (Value::Array(given), Value::Array(items)) => {
                for (i, (value, item)) in given.iter().zip(items).enumerate() {
                    walk(value, item, &format!("{path}[{i}]"))?;
                }
                Ok(())
            }
            _ => Ok(()),
        }
    }
    let canonical = serde_json::to_value(parsed).map_err(|e| JsonError {
        path: ".".into(),
        message: e.to_string(),
    })?;
    walk(input, &canonical, "")
}

/// `text` if short; else its start, with how long it was; its control characters escaped
/// ([`escape_controls`]). For quoting user input (a name, a key, a path) in an error or a line.
pub fn clip(text: &str) -> String {
    if text.chars().count() <= QUOTE_CHARS {
        return escape_controls(text, false).into_owned();
    }
    let start: String = text.chars().take(QUOTE_CHARS).collect();
    format!("{}… ({} bytes)", escape_controls(&start, false), text.len())
}

/// Whether `c` would act on a terminal rather than show: a control character (C0, DEL, C1: the
/// escape that starts a colour or a cursor move, a carriage return that overwrites a line) or
/// one that reorders the text around it (the bidirectional overrides and isolates).
fn acts(c: char) -> bool {
    c.is_control() || matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

/// `text` with every character that would act on a terminal written as an escape (`\u{1b}`,
/// `\r`, `\n`); with `keep_lines`, new lines and tabs stay as they are (a message of several
/// lines). Text without such characters comes back as it is.
pub fn escape_controls(text: &str, keep_lines: bool) -> std::borrow::Cow<'_, str> {
    let escaped = |c: char| acts(c) && !(keep_lines && (c == '\n' || c == '\t'));
    if !text.chars().any(escaped) {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        if escaped(c) {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    std::borrow::Cow::Owned(out)
}

/// A line (or lines) for the terminal: every character that would act on it escaped, but new
/// lines and tabs ([`escape_controls`]). What the binary prints, its verdicts and its errors,
/// goes through this, so that a name read from a file (a key, a client, a scenario, a path)
/// cannot move the cursor, recolour or rewrite what was printed.
pub fn terminal_text(text: &str) -> std::borrow::Cow<'_, str> {
    escape_controls(text, true)
}

/// The most characters [`float_text`] writes.
pub const FLOAT_CHARS: usize = 24;

/// `x` for people: as Rust writes it (`0.25`, `1.5`, `100`) when that is short, else in
/// scientific notation (`1e308`, `1e-300`), which is never longer than [`FLOAT_CHARS`]: Rust
/// writes 1e308 with 309 digits, and an error quoting a float read from a file must stay a line.
pub fn float_text(x: f64) -> String {
    let plain = format!("{x}");
    if plain.len() <= FLOAT_CHARS {
        plain
    } else {
        format!("{x:e}")
    }
}

/// `message` with every quoted part (between backticks or double quotes, as serde and toml
/// quote input) clipped ([`clip`]).
pub fn clip_quotes(message: &str) -> String {
    let mut out = message.to_string();
    for quote in ['`', '"'] {
        out = out
            .split(quote)
            .enumerate()
            .map(|(i, part)| if i % 2 == 1 { clip(part) } else { part.into() })
            .collect::<Vec<_>>()
            .join(&quote.to_string());
    }
    // Whatever was not quoted (an unterminated quote, a line echoed by a parser) is bounded too.
    if out.chars().count() > 4 * QUOTE_CHARS {
        clip_long(&out)
    } else {
        out
    }
}

fn clip_long(text: &str) -> String {
    let start: String = text.chars().take(4 * QUOTE_CHARS).collect();
    format!("{start}… ({} bytes of message cut)", text.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_past_the_cap_is_refused_without_reading_it_all() {
        // Sparse: a file that claims 1 GiB and takes no room.
        let path = std::env::temp_dir().join(format!("lockcheck-cap-{}", std::process::id()));
        let file = std::fs::File::create(&path).unwrap();
        file.set_len(1 << 30).unwrap();
        let e = read_text(&path, 1 << 20).unwrap_err();
        assert!(e.to_string().contains("larger than 1 MiB"), "{e}");
        std::fs::remove_file(&path).unwrap();
    }

    /// Issue 40 item 7: a device is refused before it is read, and a FIFO before the open
    /// that would block until someone writes to it.
    #[test]
    fn only_a_regular_file_is_read() {
        for path in ["/dev/zero", "/tmp"] {
            let e = read_text(Path::new(path), 1 << 20).unwrap_err();
            assert!(e.to_string().contains("not a regular file"), "{path}: {e}");
        }
        let fifo = std::env::temp_dir().join(format!("lockcheck-fifo-{}", std::process::id()));
        let made = std::process::Command::new("mkfifo").arg(&fifo).status();
        if made.is_ok_and(|s| s.success()) {
            let e = read_text(&fifo, 1 << 20).unwrap_err();
            assert!(e.to_string().contains("not a regular file"), "{e}");
            std::fs::remove_file(&fifo).unwrap();
        }
    }

    /// Issue 40 item 7: a name read from a file cannot act on the terminal it is printed to.
    #[test]
    fn what_would_act_on_a_terminal_is_escaped() {
        let name = "red\u{1b}[31m\rX\u{7}\u{9b}2J\u{202e}gnp.exe";
        let quoted = clip(name);
        assert_eq!(quoted, "red\\u{1b}[31m\\rX\\u{7}\\u{9b}2J\\u{202e}gnp.exe");
        assert!(!quoted.chars().any(acts), "{quoted:?}");
        // A quoted value is one line; a message keeps its lines and tabs.
        assert_eq!(clip("a\nb\tc"), "a\\nb\\tc");
        assert_eq!(terminal_text("a\n\tb\u{1b}c"), "a\n\tb\\u{1b}c");
        // Text without them is not copied.
        assert!(matches!(
            terminal_text("plain ünïcödé"),
            std::borrow::Cow::Borrowed(_)
        ));
        // Long: clipped, then escaped.
        let long = format!("{}\u{1b}", "x".repeat(100));
        assert!(clip(&long).ends_with("… (101 bytes)"), "{}", clip(&long));
    }

    /// Issue 40 item 7: a float read from a file is written in a few characters.
    #[test]
    fn a_float_is_written_in_a_few_characters() {
        assert_eq!(float_text(0.25), "0.25");
        assert_eq!(float_text(1.5), "1.5");
        assert_eq!(float_text(100.0), "100");
        assert_eq!(float_text(0.005), "0.005");
        assert_eq!(float_text(1e308), "1e308");
        assert_eq!(float_text(1e-300), "1e-300");
        assert_eq!(float_text(f64::MAX), "1.7976931348623157e308");
        for x in [
            f64::MIN,
            f64::MIN_POSITIVE,
            -1e-300,
            f64::NAN,
            f64::INFINITY,
            1e21,
            123456.789,
        ] {
            let text = float_text(x);
            assert!(text.chars().count() <= FLOAT_CHARS, "{x}: {text}");
            if x.is_finite() {
                assert_eq!(text.parse::<f64>().unwrap(), x, "{text}");
            }
        }
    }

    #[test]
    fn text_after_the_document_is_an_error() {
        let e = parse_json::<serde_json::Value>("{\"a\": 1} {\"b\": 2}").unwrap_err();
        assert!(e.message.contains("text after the end"), "{e:?}");
        let e = parse_json::<serde_json::Value>("{\"a\": 1}\n}").unwrap_err();
        assert!(e.message.contains("text after the end"), "{e:?}");
        assert!(parse_json::<serde_json::Value>("{\"a\": 1}\n  \n").is_ok());
    }

    #[test]
    fn a_huge_quoted_value_is_not_echoed_in_full() {
        let long = "x".repeat(5_000_000);
        let message = format!("unknown variant `{long}`, expected one of `a`, `b`");
        let clipped = clip_quotes(&message);
        assert!(clipped.len() < 400, "{}", clipped.len());
        assert!(clipped.contains("(5000000 bytes)"), "{clipped}");
        assert!(clipped.ends_with("expected one of `a`, `b`"), "{clipped}");
        assert_eq!(
            clip_quotes("invalid type: string \"ab\""),
            "invalid type: string \"ab\""
        );
    }
}
