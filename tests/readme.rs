//! Every code block of README.md and of every `docs/*.md` is run by some test, and this file
//! proves it ([`every_code_block_of_the_docs_is_run_by_a_test`]).
//!
//! * A `rust` block is a whole program in `examples/` (the block is the file, byte for byte;
//!   [`the_rust_examples_run`] runs each against real nodes, given as `REDLOCK_NODES`), a run
//!   of consecutive lines of one of those programs (the README's quickstart), or a fragment
//!   that a test runs verbatim between `// README:begin` and `// README:end` (here, and in
//!   tests/reentrant.rs and tests/tls.rs), with a manager `mgr` on real nodes in scope.
//! * Every `c` block is compiled as a program (its node addresses replaced by real nodes') and
//!   run ([`the_c_blocks_compile_and_run`]).
//! * Every line of an `sh` block is run by [`the_sh_blocks_run`] (node lists replaced by real
//!   nodes), or by the test file that the block's `<!-- tests/FILE.rs runs … -->` marker
//!   names, or is named in [`SH_ELSEWHERE`] with what runs it.
//! * The README's one `toml`, one `python` and one `go` block are its quickstart's: cargo
//!   resolves the first ([`the_cargo_dependency_line_resolves`]), python3 runs the second
//!   through the binding ([`the_python_quickstart_runs`]), and `go run` the third as the body
//!   of a function ([`the_go_quickstart_runs`]). No other file may have such a block.
//! * `text` blocks are not code. A block with any other language, or none, fails.
//!
//! tests/doc_links.rs checks the files' links. The Python and Go bindings' own READMEs are
//! checked by their suites the same way.

mod markdown;
mod support;

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use markdown::{Block, all_blocks, blocks, dedent, doc, root, sh_lines};
use redlock::{Config, Error, Redlock, RenewOptions};
use support::Cluster;

/// The regions between `// README:begin` and `// README:end` in the Rust tests, dedented.
fn test_regions() -> Vec<String> {
    let mut out = Vec::new();
    for entry in fs::read_dir(root().join("tests")).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|e| e != "rs") {
            continue;
        }
        let text = fs::read_to_string(&path).unwrap();
        let mut rest = text.as_str();
        while let Some(b) = rest.find("// README:begin\n") {
            let after = &rest[b + "// README:begin\n".len()..];
            let e = after.find("// README:end").expect("README:end");
            out.push(dedent(&after[..e]));
            rest = &after[e..];
        }
    }
    out
}

/// The examples this file runs; a Rust block that is a whole program, or a run of lines of one,
/// must be one of them.
const RUN_EXAMPLES: [&str; 3] = ["quickstart", "acquire_options", "wait_for_release"];

/// Whether `text` (a dedented block) is one of [`RUN_EXAMPLES`], or at least three consecutive
/// lines of one of them, dedented alike.
fn in_a_run_example(text: &str) -> bool {
    let want = text.lines().count();
    RUN_EXAMPLES.iter().any(|name| {
        let Ok(file) = fs::read_to_string(root().join(format!("examples/{name}.rs"))) else {
            return false;
        };
        let lines: Vec<&str> = file.lines().collect();
        file.trim() == text
            || (want >= 3 && lines.windows(want).any(|w| dedent(&w.join("\n")) == text))
    })
}

/// `sh` lines that other tests (or CI itself) run, and which.
const SH_ELSEWHERE: &[(&str, &str)] = &[
    (
        ".ci/demo",
        "tests/demo.rs runs the demo example it builds and runs",
    ),
    (
        ".ci/run",
        "CI: this is the command CI runs on a clean clone",
    ),
    (
        "cargo build --release",
        "CI: .ci/run builds the release library",
    ),
    (
        "make -C bindings/c",
        "tests/c_api.rs builds the C programs so",
    ),
];

/// An `sh` block preceded by `<!-- tests/FILE.rs runs … -->` is run by that test file, which
/// reads the block by that very marker.
fn run_by_marked_test(b: &Block) -> bool {
    let Some(marker) = b
        .before
        .trim()
        .strip_prefix("<!-- ")
        .and_then(|m| m.strip_suffix(" -->"))
    else {
        return false;
    };
    let Some(file) = marker.split_whitespace().next() else {
        return false;
    };
    file.starts_with("tests/")
        && fs::read_to_string(root().join(file)).is_ok_and(|t| t.contains(marker))
}

/// Whether block `b` (one of `all`) is run by a test, by the rules of this file's header;
/// `regions` are the tests' `README:begin` regions.
fn is_run(b: &Block, all: &[Block], regions: &[String]) -> bool {
    let text = dedent(&b.text);
    match b.lang.as_str() {
        "rust" => in_a_run_example(&text) || regions.contains(&text),
        // the_c_blocks_compile_and_run runs every one.
        "c" | "text" => true,
        "sh" => sh_lines(&b.text).iter().all(|l| {
            let marked = run_by_marked_test(b)
                && ["cc ", "make ", "export "].iter().any(|p| l.starts_with(p));
            marked || runnable_sh(l) || SH_ELSEWHERE.iter().any(|(c, _)| l.starts_with(c))
        }),
        // The README's quickstart blocks, each run by its own test below.
        "toml" | "python" | "go" => {
            b.file == "README.md" && all.iter().filter(|x| x.lang == b.lang).count() == 1
        }
        _ => false,
    }
}

#[test]
fn every_code_block_of_the_docs_is_run_by_a_test() {
    let regions = test_regions();
    let all = all_blocks();
    assert!(all.len() >= 20, "found only {} blocks", all.len());
    for file in [
        "README.md",
        "docs/primitives.md",
        "docs/c-api.md",
        "docs/cli.md",
    ] {
        assert!(all.iter().any(|b| b.file == file), "no block in {file}");
    }
    let problems: Vec<String> = all
        .iter()
        .filter(|b| !is_run(b, &all, &regions))
        .map(|b| format!("{} ```{}", b.at(), b.lang))
        .collect();
    assert!(
        problems.is_empty(),
        "code blocks that no test runs (make the block an example, a README:begin region of a \
         test, or an sh line the harness runs): {problems:?}"
    );
}

/// Lines [`the_sh_blocks_run`] runs: the `redlock` tool's, the variables they read, and the
/// tool's demo through cargo.
fn runnable_sh(line: &str) -> bool {
    line.starts_with("redlock ")
        || line.starts_with("export REDLOCK_")
        || line.starts_with("cargo run --release --bin redlock -- ")
}

/// `text` with the docs' example nodes (`redis://10.0.0.1:6379` …, as many as `urls`)
/// replaced by `urls`; fails if an example address is left.
fn with_nodes(text: &str, urls: &[String]) -> String {
    let mut out = text.to_string();
    for (i, url) in urls.iter().enumerate() {
        out = out.replace(&format!("redis://10.0.0.{}:6379", i + 1), url);
    }
    assert!(!out.contains("10.0.0."), "unreplaced node address: {out}");
    out
}

/// Whether, within a few seconds, no node holds a lock key (`redlock:*`; fencing counters
/// stay by design). An unlock returns at quorum, so the last node may take a moment.
fn no_lock_keys(cluster: &Cluster) -> bool {
    support::eventually(Duration::from_secs(5), || {
        cluster.servers.iter().all(|s| {
            let keys: Vec<Vec<u8>> = redis::cmd("KEYS")
                .arg("redlock:*")
                .query(&mut s.client())
                .unwrap();
            keys.is_empty()
        })
    })
}

/// The directory the test binaries and examples of this build live in.
fn target_dir() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    exe.parent().unwrap().parent().unwrap().to_path_buf()
}

#[test]
fn the_rust_examples_run() {
    let cluster = Cluster::start(3);
    for name in RUN_EXAMPLES {
        let bin = target_dir().join("examples").join(name);
        let out = Command::new(&bin)
            .env("REDLOCK_NODES", cluster.urls().join(","))
            .output()
            .unwrap_or_else(|e| panic!("{}: {e}", bin.display()));
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{name}: {stderr}");
        if name == "quickstart" {
            // Success reads as success: no report of a refusal, on stdout or stderr.
            let stdout = String::from_utf8_lossy(&out.stdout);
            assert!(
                stdout.starts_with("acquired orders:42, valid for ")
                    && stdout.contains("\nreleased orders:42\n")
                    && stdout.ends_with("orders:43 is held (by our guard), as expected\n")
                    && stderr.is_empty(),
                "{name}: {stdout}{stderr}"
            );
        }
        assert!(no_lock_keys(&cluster), "{name} left a lock key");
    }
}

/// `REDLOCK_NODES` written with a space after each comma works: the quickstart splits it at
/// the commas, and the library ignores the spaces around each URL.
#[test]
fn the_quickstart_takes_a_node_list_with_spaces() {
    let cluster = Cluster::start(3);
    let bin = target_dir().join("examples").join("quickstart");
    let out = Command::new(&bin)
        .env("REDLOCK_NODES", cluster.urls().join(", "))
        .output()
        .unwrap_or_else(|e| panic!("{}: {e}", bin.display()));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(no_lock_keys(&cluster), "the quickstart left a lock key");
}

/// A failed quickstart prints what `main` returning `Err` prints, `Error: {:?}`: the error's
/// message, not a dump of its structure.
#[test]
fn the_quickstart_prints_a_failure_as_its_message() {
    let mut cluster = Cluster::start(3);
    let urls = cluster.urls().join(",");
    for s in &mut cluster.servers {
        s.kill();
    }
    let bin = target_dir().join("examples").join("quickstart");
    let out = Command::new(&bin)
        .env("REDLOCK_NODES", urls)
        .output()
        .unwrap_or_else(|e| panic!("{}: {e}", bin.display()));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(
        stderr.starts_with("Error: unavailable: 0/3 granted (quorum 2); node 0 (127.0.0.1:")
            && !stderr.contains("Report {")
            && !stderr.contains("NodeReport"),
        "{stderr}"
    );
}

/// The `c` blocks of every documentation file: the README's quickstart among them.
fn c_blocks() -> Vec<Block> {
    let out: Vec<Block> = all_blocks().into_iter().filter(|b| b.lang == "c").collect();
    assert!(
        out.iter().any(|b| b.file == "README.md"),
        "the README has no c block"
    );
    out
}

/// C block `block`, a whole program compiled as pasted (only the example node addresses are
/// replaced by `urls`), into `dir`; returns the program.
fn c_block_program(block: &Block, urls: &[String], dir: &Path) -> PathBuf {
    let mut program = block.text.clone();
    for (i, url) in urls.iter().enumerate() {
        let example = format!("redis://127.0.0.1:700{}", i + 1);
        assert!(
            program.contains(&example),
            "{}: names {example}",
            block.at()
        );
        program = program.replace(&example, url);
    }
    fs::create_dir_all(dir).unwrap();
    let src = dir.join("block.c");
    let bin = dir.join("block");
    fs::write(&src, program).unwrap();
    let lib = target_dir().join("libredlock.a");
    let cc = Command::new("cc")
        .arg(&src)
        .arg(format!("-I{}", root().join("include").display()))
        .arg(&lib)
        .args(["-lpthread", "-ldl", "-lm", "-o"])
        .arg(&bin)
        .output()
        .unwrap();
    assert!(
        cc.status.success(),
        "{}: {}",
        block.at(),
        String::from_utf8_lossy(&cc.stderr)
    );
    bin
}

/// A fresh temporary directory for this process, named after `what`.
fn temp_dir(what: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("redlock-docs-{what}-{}", std::process::id()));
    let _ = fs::remove_dir_all(&dir);
    fs::create_dir_all(&dir).unwrap();
    dir
}

#[test]
fn the_c_blocks_compile_and_run() {
    let cluster = Cluster::start(3);
    let dir = temp_dir("c");
    for (i, block) in c_blocks().iter().enumerate() {
        let bin = c_block_program(block, &cluster.urls(), &dir.join(i.to_string()));
        let out = Command::new(&bin).output().unwrap();
        // The blocks print only on failure.
        assert!(
            out.status.success() && out.stderr.is_empty(),
            "{}: {}",
            block.at(),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(no_lock_keys(&cluster), "{} left a lock key", block.at());
    }
    let _ = fs::remove_dir_all(&dir);
}

/// Each C block's failure reads once (`unavailable: 0/3 granted …`, not `unavailable:
/// unavailable: …`).
#[test]
fn the_c_blocks_print_a_failure_once() {
    let mut cluster = Cluster::start(3);
    let urls = cluster.urls();
    for s in &mut cluster.servers {
        s.kill();
    }
    let dir = temp_dir("c-down");
    for (i, block) in c_blocks().iter().enumerate() {
        let bin = c_block_program(block, &urls, &dir.join(i.to_string()));
        let out = Command::new(&bin).output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            !out.status.success()
                && stderr.starts_with("unavailable: 0/3 granted (quorum 2); node 0 (")
                && !stderr.contains("unavailable: unavailable"),
            "{}: {stderr}",
            block.at()
        );
    }
    let _ = fs::remove_dir_all(&dir);
}

/// Every `redlock …` line of the docs' `sh` blocks, with its example node list replaced by real
/// nodes, run from a directory holding the scripts the lines name.
#[test]
fn the_sh_blocks_run() {
    let cluster = Cluster::start(3);
    let dir = temp_dir("sh");
    let script = dir.join("make-report.sh");
    fs::write(
        &script,
        "#!/bin/sh\necho \"report under token $REDLOCK_FENCING_TOKEN\"\n",
    )
    .unwrap();
    fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let path = format!(
        "{}:{}",
        target_dir().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let mut ran = 0;
    for b in all_blocks().iter().filter(|b| b.lang == "sh") {
        // One shell per block, so that an `export` reaches the lines after it.
        let lines: Vec<String> = sh_lines(&b.text)
            .into_iter()
            .filter(|l| runnable_sh(l))
            .map(|l| with_nodes(&l, &cluster.urls()))
            .collect();
        if lines.is_empty() {
            continue;
        }
        let script = format!("set -e\n{}\n", lines.join("\n"));
        let out = Command::new("sh")
            .arg("-c")
            .arg(&script)
            // cargo lines run in the checkout; the others beside the scripts they name.
            .current_dir(if script.contains("cargo ") {
                root()
            } else {
                &dir
            })
            .env("PATH", &path)
            .env("CARGO_TARGET_DIR", target_dir().parent().unwrap())
            .env_remove("REDLOCK_NODES")
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}: {script}\n{}{}",
            b.at(),
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        ran += lines.len();
    }
    let _ = fs::remove_dir_all(&dir);
    assert!(ran >= 6, "ran only {ran} redlock lines");
}

/// The README's one block in `lang`, its quickstart's.
fn readme_block(lang: &str) -> Block {
    let mut found = blocks(&doc("README.md"));
    found.retain(|b| b.lang == lang);
    assert_eq!(found.len(), 1, "README.md must have one {lang} block");
    found.remove(0)
}

/// The README's `Cargo.toml` lines, in a new package (the path pointed at this checkout):
/// cargo resolves them, offline, to this package, whose library is `redlock`.
#[test]
fn the_cargo_dependency_line_resolves() {
    let block = readme_block("toml");
    assert!(block.text.contains("\"../redlock\""), "{}", block.text);
    let deps = block.text.replace(
        "\"../redlock\"",
        &format!("{:?}", root().display().to_string()),
    );
    let dir = std::env::temp_dir().join(format!("redlock-readme-dep-{}", std::process::id()));
    fs::create_dir_all(dir.join("src")).unwrap();
    fs::write(
        dir.join("Cargo.toml"),
        format!("[package]\nname = \"app\"\nversion = \"0.0.0\"\nedition = \"2024\"\n\n{deps}"),
    )
    .unwrap();
    fs::write(
        dir.join("src/main.rs"),
        "use redlock::Redlock;\nfn main() {}\n",
    )
    .unwrap();
    let out = Command::new(env!("CARGO"))
        .args(["metadata", "--offline", "--format-version", "1"])
        .current_dir(&dir)
        .output()
        .unwrap();
    let _ = fs::remove_dir_all(&dir);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // The dependency is this package, and its library target is named `redlock`.
    assert!(text.contains("\"name\":\"redlock-quorum\""), "{text}");
    assert!(
        text.contains("\"kind\":[\"lib\",\"cdylib\",\"staticlib\"]")
            || text.contains("\"name\":\"redlock\",\"src_path\""),
        "{text}"
    );
}

/// The README's Python quickstart, as pasted (only the example nodes replaced by real ones),
/// run by python3 with the binding of this checkout and the library of this build.
#[test]
fn the_python_quickstart_runs() {
    let block = readme_block("python");
    let cluster = Cluster::start(3);
    let program = with_nodes(&block.text, &cluster.urls());
    let out = Command::new("python3")
        .arg("-c")
        .arg(&program)
        .env("PYTHONPATH", root().join("bindings/python"))
        .env("REDLOCK_LIB", target_dir().join("libredlock.so"))
        .output()
        .expect("run python3");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success()
            && stdout.starts_with("acquired orders:42, valid for ")
            && stdout.ends_with("\nacquired orders:43\n"),
        "{}: {stdout}{stderr}",
        block.at()
    );
    assert!(no_lock_keys(&cluster), "{} left a lock key", block.at());
}

/// The README's Go quickstart, the body of `func run(nodes []string) error` in a program of a
/// module of its own that uses the binding of this checkout (a `replace` directive; the binding
/// links this checkout's `target/release` library), run with `go run` against real nodes.
#[test]
fn the_go_quickstart_runs() {
    let block = readme_block("go");
    let cluster = Cluster::start(3);
    let dir = temp_dir("go");
    let binding = "github.com/redlock-quorum/redlock/bindings/go";
    fs::write(
        dir.join("go.mod"),
        format!(
            "module quickstart\n\ngo 1.22\n\nrequire {binding} v0.0.0\n\nreplace {binding} => {}\n",
            root().join("bindings/go").display()
        ),
    )
    .unwrap();
    let main = format!(
        "package main\n\nimport (\n\t\"fmt\"\n\t\"os\"\n\t\"strings\"\n\t\"time\"\n\n\
         \tredlock \"{binding}\"\n)\n\nvar _ = time.Second\n\n\
         func run(nodes []string) error {{\n{}}}\n\n\
         func main() {{\n\tif err := run(strings.Split(os.Getenv(\"REDLOCK_NODES\"), \",\")); \
         err != nil {{\n\t\tfmt.Fprintln(os.Stderr, err)\n\t\tos.Exit(1)\n\t}}\n\
         \tfmt.Println(\"quickstart done\")\n}}\n",
        block.text
    );
    fs::write(dir.join("main.go"), main).unwrap();
    let out = Command::new("go")
        .args(["run", "."])
        .current_dir(&dir)
        .env("REDLOCK_NODES", cluster.urls().join(","))
        .env("GOFLAGS", "-mod=mod")
        .env("GOPROXY", "off")
        .env("GOWORK", "off")
        .env("CGO_ENABLED", "1")
        .output()
        .expect("run go");
    let _ = fs::remove_dir_all(&dir);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout == "quickstart done\n",
        "{}: {stdout}{}",
        block.at(),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(no_lock_keys(&cluster), "{} left a lock key", block.at());
}

fn with_manager(f: impl FnOnce(&Redlock) -> Result<(), Error>) {
    let cluster = Cluster::start(3);
    let mgr = Redlock::new(support::config(cluster.urls())).unwrap();
    f(&mgr).unwrap();
    assert!(no_lock_keys(&cluster), "the fragment left a lock key");
}

#[test]
fn the_auto_renewal_fragment_runs() {
    let parts = ["header", "rows", "footer"];
    let written = std::cell::RefCell::new(Vec::new());
    let write = |part: &str| {
        std::thread::sleep(Duration::from_millis(20));
        written.borrow_mut().push(part.to_string());
    };
    with_manager(|mgr| {
        // README:begin
        let lease = mgr.lock("report:daily", Duration::from_secs(10))?;
        lease.auto_renew(
            RenewOptions::new()
                .max_hold(Duration::from_secs(600)) // bound: 1 hour by default
                .on_lost(|l| {
                    let resource = String::from_utf8_lossy(l.resource());
                    eprintln!("lost {resource}: {:?}", l.lost_reason());
                }),
        )?;
        for part in parts {
            if lease.is_lost() {
                break; // stop: the lock may be someone else's by now
            }
            write(part); // each step much shorter than the TTL
        }
        lease.unlock()?; // stops renewal first; NotHeld if the lease was lost
        // README:end
        Ok(())
    });
    assert_eq!(written.into_inner(), ["header", "rows", "footer"]);
}

#[test]
fn the_who_holds_fragment_runs() {
    let cluster = Cluster::start(3);
    let nodes = cluster.urls();
    let run = || -> Result<redlock::Holders, Error> {
        // README:begin
        let label = format!("{}:{}", "billing-7", std::process::id()); // host:pid
        let mgr = Redlock::new(Config::new(nodes.clone()).label(label))?;
        let lease = mgr.lock("invoices", Duration::from_secs(30))?;
        let seen = mgr.holders("invoices")?; // from any process: one read on every node
        if let Some(h) = seen.holder() {
            // The holder a quorum agrees on: its label, for how long, and how long it has left
            let who = h.label.as_deref().unwrap_or("(no label)");
            println!("{who} for {:?}, {:?} left", h.held_for, h.ttl);
        }
        for (i, node) in seen.nodes.iter().enumerate() {
            println!("node {i}: {node:?}"); // Free, Held(holder with its TTL there), Failed(why)
        }
        lease.unlock()?;
        // README:end
        Ok(seen)
    };
    let seen = run().unwrap();
    let h = seen.holder().expect("held on a quorum");
    let label = format!("billing-7:{}", std::process::id());
    assert_eq!(h.label.as_deref(), Some(label.as_str()));
    assert!(h.held_for.is_some() && h.ttl.is_some());
    assert!(no_lock_keys(&cluster));
}

#[test]
fn the_shared_lock_fragment_runs() {
    with_manager(|mgr| {
        // README:begin
        use redlock::{LockOptions, Wait};
        let read = LockOptions::new().shared(true);
        let a = mgr.acquire("catalog", Duration::from_secs(10), &read)?; // readers hold together
        let b = mgr.acquire("catalog", Duration::from_secs(10), &read)?;
        assert!(a.is_shared() && b.is_shared());
        a.unlock()?;
        b.unlock()?; // the last reader out wakes a waiting writer
        let write = LockOptions::new().wait(Wait::For(Duration::from_secs(5)));
        let w = mgr.acquire("catalog", Duration::from_secs(10), &write)?; // exclusive
        w.unlock()?;
        // README:end
        Ok(())
    });
}

#[test]
fn the_several_resources_fragment_runs() {
    with_manager(|mgr| {
        // README:begin
        use redlock::LockOptions;
        let both = ["account:1", "account:2"];
        let lease = mgr.acquire_many(&both, Duration::from_secs(10), &LockOptions::new())?;
        assert_eq!(lease.resources(), [b"account:1", b"account:2"]);
        // ... move money from one account to the other ...
        lease.unlock()?; // both released
        // README:end
        Ok(())
    });
}

#[test]
fn the_semaphore_fragment_runs() {
    with_manager(|mgr| {
        // README:begin
        use redlock::{LockOptions, Wait};
        let exports = mgr.semaphore("exports", 4)?; // at most 4 at a time
        let wait = LockOptions::new().wait(Wait::For(Duration::from_secs(30)));
        let permit = exports.acquire(Duration::from_secs(60), &wait)?;
        let (slot, permits) = permit.permit().unwrap(); // which of the 4 slots, and 4
        // ... run one export ...
        permit.unlock()?; // wakes one waiter
        // README:end
        assert!(slot < permits && permits == 4);
        Ok(())
    });
}

#[test]
fn the_fair_lock_fragment_runs() {
    with_manager(|mgr| {
        // README:begin
        use redlock::{LockOptions, Wait};
        let fair = LockOptions::new()
            .fair(true)
            .wait(Wait::For(Duration::from_secs(30)));
        let lease = mgr.acquire("payroll", Duration::from_secs(10), &fair)?; // in arrival order
        // ... the critical section ...
        lease.unlock()?; // wakes the next ticket's waiter, and only it
        // README:end
        assert!(lease.is_fair() && lease.ticket().is_none());
        Ok(())
    });
}

#[test]
fn the_fencing_fragment_runs() {
    with_manager(|mgr| {
        let earlier = mgr.lock_fenced("account:7", Duration::from_secs(10))?;
        let first = earlier.fencing_token().unwrap();
        earlier.unlock()?;
        // README:begin
        let lease = mgr.lock_fenced("account:7", Duration::from_secs(10))?;
        let token = lease.fencing_token().unwrap(); // strictly greater than every earlier grant's
        // UPDATE accounts SET balance = $2, fence = $1 WHERE id = 7 AND fence < $1   (0 rows: stale)
        // README:end
        assert!(token > first);
        lease.unlock()
    });
}
