//! The documentation cannot go stale unnoticed (#43 item 2). README.md and every docs/*.md page:
//!
//! - every relative link resolves to a file of the repository, and a `#anchor` into a Markdown
//!   file to one of its headings (GitHub's slugs);
//! - every `lockcheck SUBCOMMAND … --flag` and `cargo run --release -- SUBCOMMAND … --flag`
//!   written in code names a subcommand of the binary and flags its `SUBCOMMAND --help` lists;
//! - every console sample of a simulation command (`explore`, `matrix`, `replay`) is what the
//!   binary prints for it today (timing lines aside), and every committed report a page names
//!   exists;
//! - the README's excerpt of the verdict matrix and its totals, and docs/matrix-and-check.md's
//!   count of the reference run's cells and cases, are those of `reports/`;
//! - every "seed 00N" label is defined once, in docs/algorithms.md;
//! - README.md stays short: at most 250 lines.
//!
//! Quick and server-free: the samples it runs take well under a second each.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

/// The repository's root (the root package's manifest directory).
fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// README.md and docs/*.md, as (path relative to the root, text).
fn pages() -> Vec<(String, String)> {
    let mut names = vec!["README.md".to_string()];
    let mut docs: Vec<String> = std::fs::read_dir(root().join("docs"))
        .expect("docs/ exists")
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".md"))
        .map(|n| format!("docs/{n}"))
        .collect();
    docs.sort();
    names.extend(docs);
    names
        .into_iter()
        .map(|n| {
            let text = std::fs::read_to_string(root().join(&n)).unwrap();
            (n, text)
        })
        .collect()
}

/// A fenced code block: its info string (language) and its lines.
struct Fence {
    lang: String,
    lines: Vec<String>,
}

/// A page cut into prose lines (outside fenced blocks) and fenced blocks, in order.
enum Part {
    Prose(String),
    Fence(Fence),
}

fn parts(text: &str) -> Vec<Part> {
    let mut out = Vec::new();
    let mut fence: Option<(String, Fence)> = None;
    for line in text.lines() {
        let trimmed = line.trim_start();
        if let Some((marker, f)) = fence.as_mut() {
            if trimmed.starts_with(marker.as_str()) && trimmed.trim() == marker.as_str() {
                out.push(Part::Fence(std::mem::replace(
                    f,
                    Fence {
                        lang: String::new(),
                        lines: Vec::new(),
                    },
                )));
                fence = None;
            } else {
                f.lines.push(line.to_string());
            }
            continue;
        }
        if trimmed.starts_with("```") {
            let ticks = trimmed.chars().take_while(|&c| c == '`').count();
            let marker = "`".repeat(ticks);
            let lang = trimmed[ticks..].trim().to_string();
            fence = Some((
                marker,
                Fence {
                    lang,
                    lines: Vec::new(),
                },
            ));
            continue;
        }
        out.push(Part::Prose(line.to_string()));
    }
    assert!(fence.is_none(), "a code fence is never closed");
    out
}

/// A prose line split into text outside inline code and the inline code spans (a span opens
/// with a run of N backticks and closes at the next run of exactly N).
fn split_code_spans(line: &str) -> (String, Vec<String>) {
    let chars: Vec<char> = line.chars().collect();
    let mut text = String::new();
    let mut spans = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        if chars[i] != '`' {
            text.push(chars[i]);
            i += 1;
            continue;
        }
        let n = chars[i..].iter().take_while(|&&c| c == '`').count();
        // Find the closing run of exactly n backticks.
        let mut j = i + n;
        let mut close = None;
        while j < chars.len() {
            if chars[j] == '`' {
                let m = chars[j..].iter().take_while(|&&c| c == '`').count();
                if m == n {
                    close = Some(j);
                    break;
                }
                j += m;
            } else {
                j += 1;
            }
        }
        match close {
            Some(j) => {
                spans.push(chars[i + n..j].iter().collect());
                text.push(' ');
                i = j + n;
            }
            None => {
                // An unmatched run is literal text.
                for _ in 0..n {
                    text.push('`');
                }
                i += n;
            }
        }
    }
    (text, spans)
}

/// GitHub's anchor for a heading's text: inline links reduced to their text, lower-cased,
/// everything but letters, digits, `_`, `-` and spaces dropped, spaces made hyphens.
fn slug(heading: &str) -> String {
    // [text](url) -> text
    let mut plain = String::new();
    let mut rest = heading;
    while let Some(open) = rest.find('[') {
        plain.push_str(&rest[..open]);
        let after = &rest[open + 1..];
        match after.find("](") {
            Some(mid) if after[mid + 2..].contains(')') => {
                plain.push_str(&after[..mid]);
                let close = after[mid + 2..].find(')').unwrap();
                rest = &after[mid + 2 + close + 1..];
            }
            _ => {
                plain.push('[');
                rest = after;
            }
        }
    }
    plain.push_str(rest);
    plain
        .trim()
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || *c == '_' || *c == '-' || *c == ' ')
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

/// The anchors of a Markdown file's headings (duplicates numbered as GitHub numbers them).
fn anchors(text: &str) -> BTreeSet<String> {
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    let mut out = BTreeSet::new();
    for part in parts(text) {
        let Part::Prose(line) = part else { continue };
        let hashes = line.chars().take_while(|&c| c == '#').count();
        if !(1..=6).contains(&hashes) || !line[hashes..].starts_with(' ') {
            continue;
        }
        let heading = line[hashes..].trim().trim_end_matches('#').trim();
        let s = slug(heading);
        let n = seen.entry(s.clone()).or_insert(0);
        out.insert(if *n == 0 {
            s.clone()
        } else {
            format!("{s}-{n}")
        });
        *n += 1;
    }
    out
}

/// The targets of the Markdown links on a prose line (outside inline code).
fn link_targets(line: &str) -> Vec<String> {
    let (text, _) = split_code_spans(line);
    let mut out = Vec::new();
    let mut rest = text.as_str();
    while let Some(i) = rest.find("](") {
        let after = &rest[i + 2..];
        let Some(close) = after.find(')') else { break };
        out.push(after[..close].trim().to_string());
        rest = &after[close + 1..];
    }
    out
}

#[test]
fn every_relative_link_and_anchor_resolves() {
    let mut broken = Vec::new();
    let mut checked = 0;
    for (page, text) in pages() {
        let dir = Path::new(&page).parent().unwrap().to_path_buf();
        for part in parts(&text) {
            let Part::Prose(line) = part else { continue };
            for target in link_targets(&line) {
                if target.contains("://") || target.starts_with("mailto:") {
                    continue;
                }
                checked += 1;
                let (path, anchor) = match target.split_once('#') {
                    Some((p, a)) => (p.to_string(), Some(a.to_string())),
                    None => (target.clone(), None),
                };
                let file = if path.is_empty() {
                    root().join(&page)
                } else {
                    root().join(&dir).join(&path)
                };
                if !file.exists() {
                    broken.push(format!("{page}: ({target}): no file {}", file.display()));
                    continue;
                }
                if let Some(anchor) = anchor {
                    if !file.to_string_lossy().ends_with(".md") {
                        continue;
                    }
                    let text = std::fs::read_to_string(&file).unwrap();
                    if !anchors(&text).contains(&anchor) {
                        broken.push(format!(
                            "{page}: ({target}): no heading with the anchor #{anchor}"
                        ));
                    }
                }
            }
        }
    }
    assert!(
        checked > 50,
        "only {checked} links found: is the parser broken?"
    );
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
}

fn help(args: &[&str]) -> String {
    let o = Command::new(env!("CARGO_BIN_EXE_lockcheck"))
        .args(args)
        .output()
        .expect("the binary runs");
    assert!(o.status.success(), "lockcheck {args:?} failed");
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// The subcommands `lockcheck --help` lists.
fn subcommands() -> BTreeSet<String> {
    let text = help(&["--help"]);
    let mut out = BTreeSet::new();
    let mut inside = false;
    for line in text.lines() {
        if line.starts_with("Commands:") {
            inside = true;
            continue;
        }
        if inside {
            if line.trim().is_empty() {
                break;
            }
            if let Some(name) = line.split_whitespace().next() {
                out.insert(name.to_string());
            }
        }
    }
    assert!(out.contains("explore") && out.contains("real"), "{out:?}");
    out
}

/// The long flags a `--help` text defines (its option lines, not its prose).
fn defined_flags(help: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for line in help.lines() {
        let t = line.trim_start();
        let t = match t.strip_prefix('-') {
            Some(r) if r.len() > 2 && r.as_bytes()[1] == b',' => r[2..].trim_start(),
            _ => t,
        };
        if let Some(r) = t.strip_prefix("--") {
            let name: String = r
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '-')
                .collect();
            if !name.is_empty() {
                out.insert(format!("--{name}"));
            }
        }
    }
    out
}

/// Every command written in code: (page, the subcommand word or "" for none, the flags).
fn written_commands() -> Vec<(String, String, String, Vec<String>)> {
    let mut out = Vec::new();
    for (page, text) in pages() {
        let mut codes: Vec<String> = Vec::new();
        for part in parts(&text) {
            match part {
                Part::Prose(line) => codes.extend(split_code_spans(&line).1),
                Part::Fence(f) => {
                    let console = f.lang == "console";
                    let mut joined: Vec<String> = Vec::new();
                    let mut pending = String::new();
                    for line in &f.lines {
                        if let Some(head) = line.trim_end().strip_suffix('\\') {
                            pending.push_str(head);
                            pending.push(' ');
                            continue;
                        }
                        pending.push_str(line);
                        joined.push(std::mem::take(&mut pending));
                    }
                    for line in joined {
                        if f.lang.is_empty() {
                            // A plain block (a file tree, a sketch) is prose: only its inline
                            // code counts.
                            codes.extend(split_code_spans(&line).1);
                        } else if console {
                            // Only what is typed: output lines are not commands.
                            if let Some(cmd) = line.trim_start().strip_prefix("$ ") {
                                codes.push(cmd.to_string());
                            }
                        } else {
                            // A shell, YAML or TOML comment ends the command; a comment
                            // line counts only when it is a command (`#   lockcheck …`).
                            let cut = line.find(" #").unwrap_or(line.len());
                            let line = line[..cut].trim_start();
                            match line.strip_prefix('#') {
                                Some(comment) => {
                                    let comment = comment.trim_start();
                                    if comment.starts_with("lockcheck ")
                                        || comment.starts_with("cargo run ")
                                    {
                                        codes.push(comment.to_string());
                                    }
                                }
                                None => codes.push(line.to_string()),
                            }
                        }
                    }
                }
            }
        }
        for code in codes {
            for (start, prefix) in find_invocations(&code) {
                let rest = &code[start + prefix.len()..];
                // The command ends at a pipe, a list or a redirection.
                let end = rest.find(['|', ';', '>', '&']).unwrap_or(rest.len());
                let rest = strip_single_quoted(&rest[..end]);
                let mut words = rest.split_whitespace();
                let first = words.clone().next().unwrap_or("").to_string();
                let sub = if first.starts_with('-') {
                    String::new()
                } else {
                    words.next();
                    // The word itself, without the punctuation of the text around it
                    // (`lockcheck check`'s closing backtick, a parenthesis).
                    let word: String = first
                        .chars()
                        .take_while(|c| c.is_ascii_lowercase() || *c == '-')
                        .collect();
                    if word.is_empty() {
                        // Prose ("lockcheck (built from …)"), not a command.
                        continue;
                    }
                    word
                };
                let flags = words
                    .filter_map(|w| w.strip_prefix("--"))
                    .map(|w| {
                        let name: String = w
                            .chars()
                            .take_while(|c| c.is_ascii_alphanumeric() || *c == '-')
                            .collect();
                        format!("--{name}")
                    })
                    .filter(|f| f.len() > 2)
                    .collect();
                let flags = if sub.is_empty() {
                    rest.split_whitespace()
                        .filter(|w| w.starts_with("--"))
                        .map(|w| w.to_string())
                        .collect()
                } else {
                    flags
                };
                out.push((page.clone(), code.clone(), sub, flags));
            }
        }
    }
    out
}

/// Where `lockcheck ` or `cargo run --release -- ` starts a command in a piece of code.
fn find_invocations(code: &str) -> Vec<(usize, &'static str)> {
    let mut out = Vec::new();
    for prefix in ["cargo run --release -- ", "lockcheck "] {
        let mut from = 0;
        while let Some(i) = code[from..].find(prefix) {
            let at = from + i;
            let before = code[..at].chars().next_back();
            let standalone = before
                .map(|c| !(c.is_alphanumeric() || matches!(c, '_' | '-' | '/' | '.' | '\'')))
                .unwrap_or(true);
            // "cargo run --release -- x" also contains "lockcheck"-free text; and a
            // "lockcheck " inside it cannot occur, so no double counting.
            if standalone {
                out.push((at, prefix));
            }
            from = at + prefix.len();
        }
    }
    out
}

/// A command line with its single-quoted arguments (a `--client 'COMMAND'`) removed.
fn strip_single_quoted(s: &str) -> String {
    let mut out = String::new();
    let mut quoted = false;
    for c in s.chars() {
        if c == '\'' {
            quoted = !quoted;
            out.push(' ');
        } else if !quoted {
            out.push(c);
        }
    }
    out
}

#[test]
fn every_written_command_names_a_real_subcommand_and_its_flags() {
    let subs = subcommands();
    let mut flags_of: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    flags_of.insert(String::new(), defined_flags(&help(&["--help"])));
    let mut wrong = Vec::new();
    let commands = written_commands();
    assert!(
        commands.len() > 40,
        "only {} commands found: is the parser broken?",
        commands.len()
    );
    for (page, code, sub, flags) in commands {
        if !sub.is_empty() && !subs.contains(&sub) {
            wrong.push(format!(
                "{page}: `{code}`: `{sub}` is not a subcommand ({subs:?})"
            ));
            continue;
        }
        let known = flags_of
            .entry(sub.clone())
            .or_insert_with(|| defined_flags(&help(&[&sub, "--help"])));
        for flag in flags {
            if !known.contains(&flag) {
                wrong.push(format!(
                    "{page}: `{code}`: `lockcheck {sub} --help` lists no {flag}"
                ));
            }
        }
    }
    assert!(wrong.is_empty(), "stale commands:\n{}", wrong.join("\n"));
}

#[test]
fn the_readme_is_short() {
    let readme = std::fs::read_to_string(root().join("README.md")).unwrap();
    let lines = readme.lines().count();
    assert!(
        lines <= 250,
        "README.md has {lines} lines; the rest belongs in docs/"
    );
    // CI reads the test command from the line after the marker's fence (.ci/run).
    let mut it = readme
        .lines()
        .skip_while(|l| !l.contains("<!-- test-command -->"));
    assert!(
        it.next().is_some(),
        "README.md lost its test-command marker"
    );
    assert_eq!(it.next(), Some("```sh"));
    assert_eq!(it.next(), Some("cargo test --workspace --release"));
}

/// A console sample: the command it shows and the lines it says the command prints.
struct Sample {
    page: String,
    command: String,
    lines: Vec<String>,
}

/// Console samples of commands: a ```console block whose first line is `$ COMMAND`, or one
/// right after a ```sh block of a single command.
fn samples() -> Vec<Sample> {
    let mut out = Vec::new();
    for (page, text) in pages() {
        let mut last_sh: Option<String> = None;
        for part in parts(&text) {
            match part {
                Part::Prose(line) => {
                    if !line.trim().is_empty() {
                        last_sh = None;
                    }
                }
                Part::Fence(f) if f.lang == "sh" => {
                    let lines: Vec<&String> =
                        f.lines.iter().filter(|l| !l.trim().is_empty()).collect();
                    last_sh = (lines.len() == 1).then(|| lines[0].trim().to_string());
                }
                Part::Fence(f) if f.lang == "console" => {
                    let (command, lines) = match f.lines.first() {
                        Some(first) if first.starts_with("$ ") => {
                            (Some(first[2..].to_string()), f.lines[1..].to_vec())
                        }
                        _ => (last_sh.clone(), f.lines.clone()),
                    };
                    if let Some(command) = command {
                        out.push(Sample {
                            page: page.clone(),
                            command,
                            lines,
                        });
                    }
                    last_sh = None;
                }
                Part::Fence(_) => last_sh = None,
            }
        }
    }
    out
}

#[test]
fn console_samples_of_the_simulation_are_what_the_binary_prints() {
    let scratch = std::env::temp_dir().join(format!("lockcheck-test-docs-{}", std::process::id()));
    let mut checked = 0;
    let mut stale = Vec::new();
    for sample in samples() {
        let args: Vec<String> = sample
            .command
            .trim_start_matches("cargo run --release -- ")
            .trim_start_matches("lockcheck ")
            .split_whitespace()
            .map(String::from)
            .collect();
        // Only the deterministic simulation's commands; real mode's samples depend on the
        // machine and its servers.
        if !matches!(
            args.first().map(String::as_str),
            Some("explore" | "matrix" | "replay")
        ) {
            continue;
        }
        checked += 1;
        // Write into a scratch directory, never into reports/: the sample's own output
        // directory (`--out DIR`, or `reports` by default) stands for it.
        let out = scratch.join(format!("sample-{checked}"));
        std::fs::remove_dir_all(&out).ok();
        let mut run_args = args.clone();
        let mut shown_dir = default_out(&args[0]);
        if args[0] != "replay" {
            match args.iter().position(|a| a == "--out") {
                Some(i) => {
                    shown_dir = args[i + 1].trim_end_matches('/').to_string();
                    run_args[i + 1] = out.to_string_lossy().into_owned();
                }
                None => {
                    run_args.push("--out".into());
                    run_args.push(out.to_string_lossy().into_owned());
                }
            }
        }
        let o = Command::new(env!("CARGO_BIN_EXE_lockcheck"))
            .args(&run_args)
            .current_dir(root())
            .output()
            .expect("the binary runs");
        let printed = format!(
            "{}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        )
        .replace(&*out.to_string_lossy(), &shown_dir);
        let printed: Vec<&str> = printed.lines().map(str::trim_end).collect();
        for line in &sample.lines {
            let line = line.trim_end();
            // Timings change from run to run; "..." and "…" stand for lines or text left out.
            if line.trim().is_empty() || line.trim() == "..." || line.starts_with("search: ") {
                continue;
            }
            let found = match line.split_once('…') {
                Some((head, _)) => printed.iter().any(|p| p.starts_with(head)),
                None => printed.contains(&line),
            };
            if !found {
                stale.push(format!(
                    "{}: `{}` no longer prints\n    {line}\n  it prints:\n    {}",
                    sample.page,
                    sample.command,
                    printed.join("\n    ")
                ));
            }
        }
    }
    std::fs::remove_dir_all(&scratch).ok();
    assert!(
        checked >= 4,
        "only {checked} console samples of the simulation found"
    );
    assert!(stale.is_empty(), "stale samples:\n{}", stale.join("\n"));
}

#[test]
fn every_committed_report_a_page_names_exists() {
    let mut missing = Vec::new();
    for (page, text) in pages() {
        let mut rest = text.as_str();
        while let Some(i) = rest.find("reports/") {
            let name: String = rest[i + "reports/".len()..]
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '.' | '_'))
                .collect();
            rest = &rest[i + "reports/".len()..];
            let name = name.trim_end_matches('.');
            // A report is named CELL-HASH.json (or .html), HASH 8 hex digits.
            let Some(stem) = name
                .strip_suffix(".json")
                .or_else(|| name.strip_suffix(".html"))
            else {
                continue;
            };
            let hash = stem.rsplit('-').next().unwrap_or("");
            if hash.len() != 8 || !hash.chars().all(|c| c.is_ascii_hexdigit()) {
                continue;
            }
            if !root().join("reports").join(name).exists() {
                missing.push(format!("{page}: reports/{name}"));
            }
        }
    }
    assert!(
        missing.is_empty(),
        "reports named but not committed:\n{}",
        missing.join("\n")
    );
}

/// The cells of a Markdown table: (first column, header) -> cell.
fn table_cells(lines: &[&str]) -> BTreeMap<(String, String), String> {
    let rows: Vec<Vec<String>> = lines
        .iter()
        .map(|l| {
            l.trim()
                .trim_matches('|')
                .split('|')
                .map(|c| c.trim().to_string())
                .collect()
        })
        .collect();
    let header = &rows[0];
    let mut out = BTreeMap::new();
    for row in rows.iter().skip(2) {
        for (i, cell) in row.iter().enumerate().skip(1) {
            if let Some(h) = header.get(i) {
                out.insert((row[0].clone(), h.clone()), cell.clone());
            }
        }
    }
    out
}

/// The first table of a text whose header starts with `| algorithm |`.
fn matrix_table(text: &str) -> Vec<&str> {
    text.lines()
        .skip_while(|l| !l.starts_with("| algorithm |"))
        .take_while(|l| l.starts_with('|'))
        .collect()
}

/// A cell's verdict, in words: UNSAFE, not found, or skipped.
fn verdict(cell: &str) -> &'static str {
    if cell.contains("UNSAFE") {
        "UNSAFE"
    } else if cell.starts_with("not found") {
        "not found"
    } else if cell.starts_with('—') {
        "skipped"
    } else {
        "?"
    }
}

#[test]
fn the_readmes_matrix_excerpt_and_totals_are_the_reference_runs() {
    let readme = std::fs::read_to_string(root().join("README.md")).unwrap();
    let matrix = std::fs::read_to_string(root().join("reports/matrix.md")).unwrap();
    let excerpt = table_cells(&matrix_table(&readme));
    let reference = table_cells(&matrix_table(&matrix));
    assert!(excerpt.len() >= 20, "the README's matrix excerpt is gone");
    let mut wrong = Vec::new();
    for ((row, column), cell) in &excerpt {
        match reference.get(&(row.clone(), column.clone())) {
            None => wrong.push(format!("{row} × {column}: not in reports/matrix.md")),
            Some(r) if verdict(r) != verdict(cell) || verdict(cell) == "?" => wrong.push(format!(
                "{row} × {column}: the README says {cell}, reports/matrix.md {}",
                verdict(r)
            )),
            Some(_) => {}
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));

    // "350 cells, seed 0, 1000 cases per cell: 165 UNSAFE, 163 not found, 22 skipped".
    let flat = readme.split_whitespace().collect::<Vec<_>>().join(" ");
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(root().join("reports/matrix.json")).unwrap())
            .unwrap();
    let cells = json["cells"].as_array().unwrap();
    let count = |v: &str| cells.iter().filter(|c| c["verdict"] == v).count();
    let totals = format!(
        "{} cells, seed {}, {} cases per cell: {} UNSAFE, {} not found, {} skipped",
        cells.len(),
        json["seed"],
        matrix
            .split("seed 0, ")
            .nth(1)
            .and_then(|s| s.split(" cases per cell").next())
            .unwrap_or("?"),
        count("unsafe"),
        count("not_found"),
        count("skipped")
    );
    assert!(
        flat.contains(&totals),
        "the README's matrix totals should read \"{totals}\""
    );

    // docs/matrix-and-check.md: "(2 threads; 350 cells, 167,931 cases: …)".
    let cases: u64 = cells.iter().filter_map(|c| c["cases"].as_u64()).sum();
    let digits = cases.to_string();
    let mut grouped = String::new();
    for (i, d) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            grouped.push(',');
        }
        grouped.push(d);
    }
    let said = format!("{} cells, {grouped} cases", cells.len());
    let page = std::fs::read_to_string(root().join("docs/matrix-and-check.md")).unwrap();
    let page = page.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(
        page.contains(&said),
        "docs/matrix-and-check.md should say the reference run's \"{said}\""
    );
}

#[test]
fn every_seed_label_is_defined_in_the_algorithms_page() {
    let algorithms = std::fs::read_to_string(root().join("docs/algorithms.md")).unwrap();
    for (page, text) in pages() {
        let mut rest = text.as_str();
        while let Some(i) = rest.find("seed 00") {
            let n = &rest[i + "seed 00".len()..][..1];
            assert!(
                algorithms.contains(&format!("| seed 00{n} | ")),
                "{page} says seed 00{n}, which docs/algorithms.md does not define"
            );
            rest = &rest[i + 1..];
        }
    }
}

/// The directory `lockcheck SUB` writes to without `--out`, as its `--help` says
/// (`[default: …]` on the `--out` option), so that a sample's paths are checked against the
/// binary's default, not a copy of it.
fn default_out(sub: &str) -> String {
    let o = Command::new(env!("CARGO_BIN_EXE_lockcheck"))
        .args([sub, "--help"])
        .output()
        .expect("the binary runs");
    let help = String::from_utf8_lossy(&o.stdout).into_owned();
    let Some(at) = help.find("--out <DIR>") else {
        return "reports".into();
    };
    let rest = &help[at..];
    let end = rest[2..].find("\n  -").map_or(rest.len(), |i| i + 2);
    rest[..end]
        .split("[default: ")
        .nth(1)
        .and_then(|d| d.split(']').next())
        .unwrap_or("reports")
        .to_string()
}
