//! Reading what users hand lockcheck (scenario files, reports, expectations, regressions, a
//! matrix): a size cap before anything is parsed, a JSON document that must end where its value
//! ends, and error messages that quote the input only in part.
//!
//! Every file lockcheck reads goes through here, so that a file past the cap is refused instead
//! of read without limit, `lockcheck run /dev/zero` (or a FIFO, which would block) is refused as
//! no regular file, and an error quoting a 50 MB string prints a line.

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
    regular(std::fs::metadata(path)?)?;
    let file = std::fs::File::open(path)?;
    regular(file.metadata()?)?;
    let mut bytes = Vec::new();
    file.take(cap + 1).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > cap {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("larger than {} (the most lockcheck reads)", bytes_text(cap)),
        ));
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
    let input: serde_json::Value = serde_json::from_str(text).map_err(|e| JsonError {
        path: ".".into(),
        message: clip_quotes(&e.to_string()),
    })?;
    let canonical = serde_json::to_value(parsed).map_err(|e| JsonError {
        path: ".".into(),
        message: e.to_string(),
    })?;
    walk(&input, &canonical, "")
}

/// `text` if short; else its start, with how long it was. For quoting user input in an error.
pub fn clip(text: &str) -> String {
    if text.chars().count() <= QUOTE_CHARS {
        return text.to_string();
    }
    let start: String = text.chars().take(QUOTE_CHARS).collect();
    format!("{start}… ({} bytes)", text.len())
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
