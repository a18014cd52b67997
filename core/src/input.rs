//! Reading what users hand lockcheck (scenario files, reports, expectations, regressions, a
//! matrix): a size cap before anything is parsed, a JSON document that must end where its value
//! ends, and error messages that quote the input only in part.
//!
//! Every file lockcheck reads goes through here, so that `lockcheck run /dev/zero` fails at the
//! cap instead of growing without limit, and an error quoting a 50 MB string prints a line.

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
    let mut bytes = Vec::new();
    std::fs::File::open(path)?
        .take(cap + 1)
        .read_to_end(&mut bytes)?;
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
        let e = read_text(Path::new("/dev/zero"), 1 << 20).unwrap_err();
        assert!(e.to_string().contains("larger than 1 MiB"), "{e}");
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
