//! Every relative link of README.md and of every `docs/*.md` leads somewhere: its file (or
//! folder) exists, and its `#anchor`, if any, is the anchor of a heading there as GitHub makes
//! it. Links to other sites (`https:`, `mailto:`) are not followed.

mod markdown;

use markdown::{anchors, docs, links, root, slug};
use std::fs;
use std::path::{Component, Path, PathBuf};

/// `path` with its `.` and `..` components resolved, without touching the file system; a
/// path that climbs above the root starts with `..`.
fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            Component::CurDir => {}
            // Above the root: kept, so that the caller refuses it.
            Component::ParentDir if !out.pop() => out.push(".."),
            Component::ParentDir => {}
            c => out.push(c),
        }
    }
    out
}

/// Why the link `target` of the file `from` (relative to the root) leads nowhere, if it does.
fn broken(from: &str, own: &[String], target: &str) -> Option<String> {
    if target.contains("://") || target.starts_with("mailto:") {
        return None;
    }
    let (file, anchor) = match target.split_once('#') {
        Some((f, a)) => (f, Some(a)),
        None => (target, None),
    };
    let path = if file.is_empty() {
        PathBuf::from(from)
    } else {
        normalize(&Path::new(from).parent().unwrap().join(file))
    };
    if path.starts_with("..") || !root().join(&path).exists() {
        return Some(format!("no file {}", path.display()));
    }
    let anchor = anchor?;
    if path.extension().is_none_or(|e| e != "md") {
        return Some(format!(
            "an anchor into {}, which is not Markdown",
            path.display()
        ));
    }
    let there = if file.is_empty() {
        own.to_vec()
    } else {
        anchors(&fs::read_to_string(root().join(&path)).unwrap())
    };
    (!there.iter().any(|a| a == anchor))
        .then(|| format!("no heading with the anchor #{anchor} in {}", path.display()))
}

#[test]
fn every_relative_link_of_the_docs_resolves() {
    let mut problems = Vec::new();
    let mut checked = 0;
    for d in docs() {
        let own = anchors(&d.text);
        for (line, target) in links(&d.text) {
            checked += 1;
            if let Some(why) = broken(&d.path, &own, &target) {
                problems.push(format!("{}:{line}: ({target}): {why}", d.path));
            }
        }
    }
    assert!(
        checked >= 40,
        "found only {checked} links: is the reader broken?"
    );
    assert!(
        problems.is_empty(),
        "broken links:\n{}",
        problems.join("\n")
    );
}

/// The reader's rules, on text made to break them.
#[test]
fn the_link_reader_follows_githubs_rules() {
    assert_eq!(
        slug("Failover groups (Sentinel) and managed endpoints"),
        "failover-groups-sentinel-and-managed-endpoints"
    );
    assert_eq!(
        slug("Key prefix, and sharing locks with redsync or node-redlock"),
        "key-prefix-and-sharing-locks-with-redsync-or-node-redlock"
    );
    assert_eq!(slug("The `redlock` tool"), "the-redlock-tool");
    let md = "# A\n\n## A\n\n```sh\n# not a heading [x](nowhere.md)\n```\n\
              see [b](#a-1) and `[c](in-code.md)`, ``a ` [d](in-code.md)``\n[e](x.md#y)\n";
    assert_eq!(anchors(md), ["a", "a-1"]);
    assert_eq!(
        links(md),
        [(8, "#a-1".to_string()), (9, "x.md#y".to_string())]
    );
    let own = anchors(md);
    assert_eq!(broken("README.md", &own, "#a-1"), None);
    assert!(broken("README.md", &own, "#b").is_some());
    assert!(broken("README.md", &own, "docs/none.md").is_some());
    assert_eq!(broken("docs/x.md", &own, "../README.md"), None);
    assert!(broken("README.md", &own, "../outside.md").is_some());
}
