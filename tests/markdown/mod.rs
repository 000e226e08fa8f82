//! The documentation's Markdown, as the tests that check it read it: the files (README.md and
//! every `docs/*.md`), their fenced code blocks, their headings' anchors and their links.
//!
//! Included by tests/readme.rs and tests/doc_links.rs, so not every item is used by both.
#![allow(dead_code)] // each includer uses a different subset

use std::fs;
use std::path::{Path, PathBuf};

/// The repository's root.
pub fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// One documentation file: its path relative to the root (`README.md`, `docs/cli.md`) and text.
pub struct Doc {
    pub path: String,
    pub text: String,
}

/// README.md and every `docs/*.md`, in that order (docs sorted by name).
pub fn docs() -> Vec<Doc> {
    let mut paths = vec![PathBuf::from("README.md")];
    let mut more: Vec<PathBuf> = fs::read_dir(root().join("docs"))
        .expect("read docs/")
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .map(|p| p.strip_prefix(root()).unwrap().to_path_buf())
        .collect();
    more.sort();
    paths.extend(more);
    assert!(paths.len() >= 2, "docs/ has no Markdown file");
    paths
        .into_iter()
        .map(|p| Doc {
            text: fs::read_to_string(root().join(&p))
                .unwrap_or_else(|e| panic!("{}: {e}", p.display())),
            path: p.to_string_lossy().into_owned(),
        })
        .collect()
}

/// The one documentation file at `path` (relative to the root).
pub fn doc(path: &str) -> Doc {
    docs()
        .into_iter()
        .find(|d| d.path == path)
        .unwrap_or_else(|| panic!("no documentation file {path}"))
}

/// One fenced code block.
pub struct Block {
    /// The file it is in, relative to the root.
    pub file: String,
    pub lang: String,
    pub text: String,
    /// The line of the opening fence, from 1.
    pub line: usize,
    /// The line before the opening fence.
    pub before: String,
}

impl Block {
    /// `file:line`, for messages.
    pub fn at(&self) -> String {
        format!("{}:{}", self.file, self.line)
    }
}

/// The fenced code blocks of a Markdown file, with their language and first line.
pub fn blocks(d: &Doc) -> Vec<Block> {
    let mut out = Vec::new();
    let mut open: Option<Block> = None;
    let mut prev = "";
    for (i, line) in d.text.lines().enumerate() {
        match (&mut open, line.strip_prefix("```")) {
            (None, Some(lang)) => {
                open = Some(Block {
                    file: d.path.clone(),
                    lang: lang.trim().to_string(),
                    text: String::new(),
                    line: i + 1,
                    before: prev.to_string(),
                })
            }
            (Some(_), Some("")) => out.push(open.take().unwrap()),
            (Some(b), _) => {
                b.text.push_str(line);
                b.text.push('\n');
            }
            (None, None) => {}
        }
        prev = line;
    }
    assert!(open.is_none(), "{} has an unclosed code block", d.path);
    out
}

/// Every code block of every documentation file.
pub fn all_blocks() -> Vec<Block> {
    docs().iter().flat_map(blocks).collect()
}

/// `s` without the indentation its lines share, and without leading/trailing blank lines.
pub fn dedent(s: &str) -> String {
    let lines: Vec<&str> = s.lines().collect();
    let indent = lines
        .iter()
        .filter(|l| !l.trim().is_empty())
        .map(|l| l.len() - l.trim_start().len())
        .min()
        .unwrap_or(0);
    let body: Vec<&str> = lines
        .iter()
        .map(|l| {
            if l.len() >= indent {
                &l[indent..]
            } else {
                l.trim()
            }
        })
        .collect();
    body.join("\n").trim_matches('\n').to_string()
}

/// The commands of an `sh` block: comments dropped, `\` continuations joined, trailing
/// comments cut.
pub fn sh_lines(block: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    for line in block.lines() {
        let line = line.trim();
        if line.starts_with('#') || line.is_empty() {
            continue;
        }
        if let Some(head) = line.strip_suffix('\\') {
            cur.push_str(head);
            continue;
        }
        cur.push_str(line);
        let cmd = match cur.find("  #").or_else(|| cur.find(" # ")) {
            Some(i) => cur[..i].trim().to_string(),
            None => cur.trim().to_string(),
        };
        out.push(cmd);
        cur.clear();
    }
    out
}

/// The lines of a Markdown text outside its fenced code blocks, with their numbers (from 1).
pub fn prose_lines(md: &str) -> Vec<(usize, &str)> {
    let mut fenced = false;
    let mut out = Vec::new();
    for (i, line) in md.lines().enumerate() {
        if line.starts_with("```") {
            fenced = !fenced;
        } else if !fenced {
            out.push((i + 1, line));
        }
    }
    out
}

/// GitHub's anchor for a heading's text: lower case, each space a `-`, and every character
/// but letters, digits, `-` and `_` dropped (backticks and punctuation included).
pub fn slug(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            _ => None,
        })
        .collect()
}

/// The anchors of a Markdown text's headings (`#` to `######`), a repeated one numbered as
/// GitHub numbers it (`x`, `x-1`, `x-2`).
pub fn anchors(md: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for (_, line) in prose_lines(md) {
        let hashes = line.chars().take_while(|&c| c == '#').count();
        let Some(text) = line[hashes..].strip_prefix(' ') else {
            continue;
        };
        if !(1..=6).contains(&hashes) {
            continue;
        }
        let base = slug(text);
        let mut anchor = base.clone();
        let mut n = 0;
        while out.contains(&anchor) {
            n += 1;
            anchor = format!("{base}-{n}");
        }
        out.push(anchor);
    }
    out
}

/// A Markdown text with its fenced code blocks blanked (each line kept, empty).
fn prose(md: &str) -> String {
    let mut kept = vec![""; md.lines().count()];
    for (n, line) in prose_lines(md) {
        kept[n - 1] = line;
    }
    kept.join("\n")
}

/// The targets of the inline links (`[text](target)`) of a Markdown text outside code blocks
/// and code spans (which may run over several lines), with the line each is on.
pub fn links(md: &str) -> Vec<(usize, String)> {
    let text = prose(md);
    let b = text.as_bytes();
    let run = |i: usize| b[i..].iter().take_while(|&&c| c == b'`').count();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'`' {
            // A code span: up to the next run of exactly as many backticks, if there is one.
            let k = run(i);
            let mut j = i + k;
            let mut close = None;
            while j < b.len() {
                if b[j] == b'`' {
                    let r = run(j);
                    if r == k {
                        close = Some(j + r);
                        break;
                    }
                    j += r;
                } else {
                    j += 1;
                }
            }
            i = close.unwrap_or(i + k);
        } else if b[i..].starts_with(b"](") {
            let after = &text[i + 2..];
            let end = after.find(')').unwrap_or(after.len());
            let line = text[..i].matches('\n').count() + 1;
            out.push((line, after[..end].trim().to_string()));
            i += 2 + end;
        } else {
            i += 1;
        }
    }
    out
}
