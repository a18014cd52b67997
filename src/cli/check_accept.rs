//! `lockcheck check --accept`: an entry's text as it would have to be written to expect what was
//! found. It is printed for a person to read and paste, never written into the file: a changed
//! verdict is a finding to understand first (a lost violation may be a broken search), not a
//! test to silence.

use lockcheck_core::verdict::VerdictKind;
use lockcheck_search::expectations::{self, Check, Expectation};
use std::path::Path;

/// The entry `all[index]` of the expectations file `path`, whose text is `text`, as written
/// there but with `expect = "WORD"`; or why it could not be rewritten.
///
/// The entry's text runs from its `[[expect]]` line to the next entry's, less the blank and
/// comment lines just before that (they head the next entry). Which line is its `expect` key is
/// decided by parsing back rather than by reading TOML here: each line that could be that key is
/// rewritten in turn, and the first whose text parses ([`expectations::parse`], relative to the
/// same folder, so that a story's or script's file is the same) to the same entry apart from its
/// verdict wins. A line inside a multi-line string cannot win, since its entry would differ. A
/// search that takes the file's top-level `seed` gets it written out, so that the text means the
/// same wherever it is pasted.
pub fn accepted(
    text: &str,
    path: &Path,
    all: &[Expectation],
    index: usize,
    word: &str,
) -> Result<String, String> {
    let entry = all.get(index).ok_or("no such entry")?;
    let lines: Vec<&str> = text.split_inclusive('\n').collect();
    let start = entry.line.saturating_sub(1);
    let end = all
        .get(index + 1)
        .map_or(lines.len(), |next| next.line.saturating_sub(1));
    let mut own: Vec<String> = lines
        .get(start..end)
        .ok_or("the entry's lines are not in the file")?
        .iter()
        .map(|l| l.to_string())
        .collect();
    while own.len() > 1
        && own.last().is_some_and(|l| {
            let t = l.trim();
            t.is_empty() || t.starts_with('#')
        })
    {
        own.pop();
    }
    if let Some(last) = own.last_mut() {
        if !last.ends_with('\n') {
            last.push('\n');
        }
    }
    let mut wanted = entry.clone();
    wanted.expect = if word == "unsafe" {
        VerdictKind::Found
    } else {
        VerdictKind::NotFound
    };
    wanted.line = 1;
    let seed = match &entry.check {
        Check::Search(options) => Some(options.seed),
        Check::Story(_) => None,
    };
    for at in (0..own.len()).filter(|&i| is_expect_key(&own[i])) {
        let Some(line) = with_value(&own[at], word) else {
            continue;
        };
        let mut candidate = own.clone();
        candidate[at] = line;
        let seeded = seed.map(|seed| {
            let mut c = candidate.clone();
            c.insert(1, format!("seed = {seed}  # the file's top-level seed\n"));
            c
        });
        for text in std::iter::once(candidate).chain(seeded).map(|c| c.concat()) {
            if expectations::parse(&text, path).is_ok_and(|e| e.len() == 1 && e[0] == wanted) {
                return Ok(text);
            }
        }
    }
    Err(format!(
        "its text could not be rewritten (write expect = \"{word}\" in it by hand)"
    ))
}

/// Whether `line` could set the key `expect` (bare or quoted).
fn is_expect_key(line: &str) -> bool {
    let t = line.trim_start();
    ["expect", "\"expect\"", "'expect'"].iter().any(|key| {
        t.strip_prefix(key)
            .is_some_and(|rest| rest.trim_start().starts_with('='))
    })
}

/// `line` (`expect = "…"  # comment`) with its string value replaced by `"WORD"`, the rest kept.
fn with_value(line: &str, word: &str) -> Option<String> {
    let eq = line.find('=')?;
    let after = &line[eq + 1..];
    let value_at = eq + 1 + (after.len() - after.trim_start().len());
    let quote = line[value_at..].chars().next()?;
    if quote != '"' && quote != '\'' {
        return None;
    }
    let mut escaped = false;
    let close = line[value_at + 1..].char_indices().find_map(|(i, c)| {
        let end = !escaped && c == quote;
        escaped = quote == '"' && !escaped && c == '\\';
        end.then_some(value_at + 1 + i)
    })?;
    Some(format!(
        "{}\"{word}\"{}",
        &line[..value_at],
        &line[close + 1..]
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_value_is_replaced_and_the_comment_kept() {
        assert_eq!(
            with_value("expect = \"not-found\"  # said so\n", "unsafe").as_deref(),
            Some("expect = \"unsafe\"  # said so\n")
        );
        assert_eq!(
            with_value("  'expect'='safe'\n", "unsafe").as_deref(),
            Some("  'expect'=\"unsafe\"\n")
        );
        assert_eq!(
            with_value("expect = \"a\\\"b\" # x\n", "safe").as_deref(),
            Some("expect = \"safe\" # x\n")
        );
        assert!(with_value("expect = 3\n", "safe").is_none());
        assert!(is_expect_key("  expect   = \"unsafe\""));
        assert!(!is_expect_key("expected = 1"));
        assert!(!is_expect_key("# expect = \"unsafe\""));
    }
}
