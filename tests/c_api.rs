//! Builds the C example and the C test programs (`bindings/c`) against the release library and
//! `include/redlock.h`, and runs them against real redis-server nodes: each test program both
//! plain and under `valgrind --leak-check=full --error-exitcode=1`. The test programs that share
//! `bindings/c/harness.h`, one per concern, each get their own tests (`test_lock::…`), so a
//! failure names the concern. Runs the "Build and link" lines of docs/c-api.md as written (read
//! from that file): an install into a temporary prefix, then a static and a dynamic program
//! through pkg-config, checked with `ldd` and run.

mod support;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, OnceLock};

use support::Cluster;
use support::tls::Pki;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Runs `make -C bindings/c` once per test binary (it builds the release library first).
fn build(link: &str) -> PathBuf {
    static STATIC: OnceLock<()> = OnceLock::new();
    static DYNAMIC: OnceLock<()> = OnceLock::new();
    let once = if link == "dynamic" { &DYNAMIC } else { &STATIC };
    let build_dir = root().join("bindings/c/build").join(link);
    once.get_or_init(|| {
        let out = Command::new("make")
            .arg("-C")
            .arg(root().join("bindings/c"))
            .arg(format!("LINK={link}"))
            .arg(format!("BUILD={}", build_dir.display()))
            .output()
            .expect("run make (is it installed?)");
        assert!(
            out.status.success(),
            "make failed:\n{}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    });
    build_dir
}

fn run(cmd: &mut Command) -> Output {
    let out = cmd.output().expect("spawn");
    eprintln!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// Runs one test program against three fresh nodes. One program at a time per way of running
/// (static, dynamic, valgrind): as many at once as when they were one program, so that the
/// programs' timing bounds see the load they always did.
fn run_test_program(bin: &Path, how: &str) {
    static STATIC: Mutex<()> = Mutex::new(());
    static DYNAMIC: Mutex<()> = Mutex::new(());
    static VALGRIND: Mutex<()> = Mutex::new(());
    let valgrind = how == "valgrind";
    let one_at_a_time = match how {
        "static" => &STATIC,
        "dynamic" => &DYNAMIC,
        _ => &VALGRIND,
    };
    // A failed test poisons the lock; the next program runs all the same.
    let _turn = one_at_a_time.lock().unwrap_or_else(|e| e.into_inner());
    let cluster = Cluster::start(3);
    let mut cmd = program(bin, valgrind, None);
    let out = run(cmd.args(cluster.urls()));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "C tests failed: {:?}", out.status);
    assert!(stdout.contains(" 0 failures"), "{stdout}");
    if valgrind {
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!stderr.contains("definitely lost"), "{stderr}");
    }
}

/// `bin` as it is, or under `valgrind --leak-check=full` (definite leaks and every error fail
/// it), with `suppressions` if given.
fn program(bin: &Path, valgrind: bool, suppressions: Option<&Path>) -> Command {
    if !valgrind {
        return Command::new(bin);
    }
    let mut c = Command::new("valgrind");
    c.args([
        "--leak-check=full",
        "--errors-for-leak-kinds=definite",
        "--error-exitcode=1",
        "--quiet",
    ]);
    if let Some(s) = suppressions {
        c.arg(format!("--suppressions={}", s.display()));
    }
    c.arg(bin);
    c
}

fn require_valgrind() {
    let have = Command::new("valgrind")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    assert!(
        have,
        "valgrind not found: the C API's memory checks need it (apt-get install valgrind)"
    );
}

/// The tests of one C test program (bindings/c/<name>.c, in the Makefile's TESTS): statically
/// and dynamically linked, and statically linked under valgrind.
macro_rules! c_test_program {
    ($($name:ident),* $(,)?) => {$(
        mod $name {
            use super::*;

            #[test]
            fn passes_statically_linked() {
                run_test_program(&build("static").join(stringify!($name)), "static");
            }

            #[test]
            fn passes_dynamically_linked() {
                run_test_program(&build("dynamic").join(stringify!($name)), "dynamic");
            }

            #[test]
            fn is_clean_under_valgrind() {
                require_valgrind();
                run_test_program(&build("static").join(stringify!($name)), "valgrind");
            }
        }
    )*};
}

c_test_program!(
    test_inputs,
    test_lock,
    test_renew,
    test_wait,
    test_shared_many,
    test_semaphore,
    test_fair,
    test_election,
);

/// Runs `test_tls` (bindings/c/test_tls.c) against three nodes that serve TLS only and
/// require a client certificate, with a CA and certificates made for this run. Under valgrind,
/// with bindings/c/valgrind-tls.supp: two reports on ring's AES-GCM assembly that memcheck
/// cannot follow (the file says why); every other error and every definite leak still fails.
fn run_tls_program(bin: &Path, valgrind: bool) {
    let pki = Pki::new();
    let cluster = Cluster::start_tls(3, &pki.serve().auth_clients());
    let supp = root().join("bindings/c/valgrind-tls.supp");
    let mut cmd = program(bin, valgrind, Some(&supp));
    cmd.arg(&pki.ca).arg(&pki.client_cert).arg(&pki.client_key);
    let out = run(cmd.args(cluster.urls()));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "C TLS tests failed: {:?}", out.status);
    assert!(stdout.contains(" 0 failures"), "{stdout}");
    // The verification-off switch says so on stderr (C hosts have no logger).
    assert!(
        stderr.contains("TLS certificate verification is OFF"),
        "{stderr}"
    );
    if valgrind {
        assert!(!stderr.contains("definitely lost"), "{stderr}");
    }
}

#[test]
fn c_tls_program_passes() {
    run_tls_program(&build("static").join("test_tls"), false);
}

#[test]
fn c_tls_program_is_clean_under_valgrind() {
    run_tls_program(&build("static").join("test_tls"), true);
}

/// Runs `test_sentinel` (bindings/c/test_sentinel.c): a master watched by two sentinels, one of
/// them requiring a password.
fn run_sentinel_program(bin: &Path, valgrind: bool) {
    let master = support::RedisServer::start();
    let open = support::sentinel::Sentinel::start("svc", master.port, 1);
    let locked = support::sentinel::Sentinel::start_with_password("svc", master.port, "s3cret");
    let mut cmd = program(bin, valgrind, None);
    cmd.arg(format!("redis+sentinel://{}/svc", open.host_port()))
        .arg(format!("redis+sentinel://{}/svc", locked.host_port()))
        .arg("s3cret");
    let out = run(&mut cmd);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "C sentinel tests failed: {:?}",
        out.status
    );
    assert!(stdout.contains(" 0 failures"), "{stdout}");
    if valgrind {
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!stderr.contains("definitely lost"), "{stderr}");
    }
}

#[test]
fn c_sentinel_program_passes() {
    run_sentinel_program(&build("static").join("test_sentinel"), false);
}

#[test]
fn c_sentinel_program_is_clean_under_valgrind() {
    require_valgrind();
    run_sentinel_program(&build("static").join("test_sentinel"), true);
}

/// Runs `test_cluster` (bindings/c/test_cluster.c): three Redis Clusters, one shard each.
fn run_cluster_program(bin: &Path, valgrind: bool) {
    let clusters: Vec<_> = (0..3)
        .map(|_| std::thread::spawn(|| support::redis_cluster::RedisCluster::start(1, 0)))
        .collect();
    let clusters: Vec<_> = clusters.into_iter().map(|h| h.join().unwrap()).collect();
    let mut cmd = program(bin, valgrind, None);
    for c in &clusters {
        cmd.arg(format!("redis+cluster://127.0.0.1:{}", c.servers[0].port));
    }
    let out = run(&mut cmd);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "C cluster tests failed: {:?}",
        out.status
    );
    assert!(stdout.contains(" 0 failures"), "{stdout}");
    if valgrind {
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!stderr.contains("definitely lost"), "{stderr}");
    }
}

#[test]
fn c_cluster_program_passes() {
    run_cluster_program(&build("static").join("test_cluster"), false);
}

#[test]
fn c_cluster_program_is_clean_under_valgrind() {
    require_valgrind();
    run_cluster_program(&build("static").join("test_cluster"), true);
}

#[test]
fn c_example_runs() {
    let cluster = Cluster::start(3);
    let out = run(Command::new(build("static").join("example")).args(cluster.urls()));
    assert!(out.status.success());
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("locked orders:42") && stdout.contains("unlocked"),
        "{stdout}"
    );
}

/// The example's failure reads once: `lock: unavailable: 0/3 granted …`, the status not
/// printed again before the message that already says it.
#[test]
fn c_example_prints_a_failure_once() {
    let mut cluster = Cluster::start(3);
    let urls = cluster.urls();
    for s in &mut cluster.servers {
        s.kill();
    }
    let out = run(Command::new(build("static").join("example")).args(&urls));
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.starts_with("lock: unavailable: 0/3 granted (quorum 2); node 0 (")
            && !stderr.contains("unavailable: unavailable"),
        "{stderr}"
    );
}

/// A scratch directory removed when dropped, on success and on a failed assertion alike.
struct TempDir(PathBuf);

impl TempDir {
    fn new(what: &str) -> TempDir {
        static COUNTER: AtomicUsize = AtomicUsize::new(0);
        let dir = std::env::temp_dir().join(format!(
            "redlock-{what}-{}-{}",
            std::process::id(),
            COUNTER.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("create a temporary directory");
        TempDir(dir)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The file whose "Build and link" blocks this file runs.
const BUILD_AND_LINK: &str = "docs/c-api.md";

/// The lines of the shell block of [`BUILD_AND_LINK`] that follows the line
/// `<!-- {marker} -->`: the commands this file runs are read from the docs, so the documented
/// lines cannot drift from what is tested.
fn docs_block(marker: &str) -> Vec<String> {
    let readme = std::fs::read_to_string(root().join(BUILD_AND_LINK))
        .unwrap_or_else(|e| panic!("read {BUILD_AND_LINK}: {e}"));
    let tag = format!("<!-- {marker} -->");
    let mut lines = readme.lines().skip_while(|l| l.trim() != tag);
    assert!(lines.next().is_some(), "{BUILD_AND_LINK} has no line {tag}");
    assert_eq!(
        lines.next(),
        Some("```sh"),
        "a ```sh block must follow {tag}"
    );
    let block: Vec<String> = lines
        .take_while(|l| *l != "```")
        .filter(|l| !l.trim().is_empty())
        .map(str::to_string)
        .collect();
    assert!(!block.is_empty(), "the block after {tag} is empty");
    block
}

/// The link mode a documented `cc` line is for, from its trailing comment (`# static`,
/// `# dynamic`).
fn link_mode(line: &str) -> &'static str {
    let comment = line.rsplit_once('#').map_or("", |(_, c)| c.trim());
    match comment {
        "static" => "static",
        "dynamic" => "dynamic",
        _ => panic!("a documented cc line must end with `# static` or `# dynamic`: {line}"),
    }
}

/// Runs documented lines with bash (`set -euo pipefail`), `make` lines from the repository root
/// and `cc` lines from `work`, which holds `app.c` (a copy of bindings/c/example.c); each
/// program a `cc` line writes (`-o app`) is renamed `app-static` or `app-dynamic` after its
/// line. Lines for which `run_line` is false are left out. Returns the programs built.
fn run_doc_lines(
    lines: &[String],
    run_line: impl Fn(&str) -> bool,
    work: &Path,
    env: &[(&str, &Path)],
) -> Vec<(&'static str, PathBuf)> {
    std::fs::copy(root().join("bindings/c/example.c"), work.join("app.c")).expect("copy app.c");
    let mut script = String::from("set -euo pipefail\n");
    let mut programs = Vec::new();
    for line in lines.iter().filter(|l| run_line(l)) {
        if line.starts_with("cc ") {
            let mode = link_mode(line);
            assert!(
                line.contains(" -o app "),
                "a cc line must write app: {line}"
            );
            script += &format!("cd {:?}\n{line}\nmv app app-{mode}\n", work);
            programs.push((mode, work.join(format!("app-{mode}"))));
        } else {
            script += &format!("cd {:?}\n{line}\n", root());
        }
    }
    let mut cmd = Command::new("bash");
    cmd.arg("-c").arg(&script);
    // What the documented lines set up must be enough: nothing inherited finds the library.
    cmd.env_remove("LD_LIBRARY_PATH")
        .env_remove("PKG_CONFIG_PATH");
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = run(&mut cmd);
    assert!(
        out.status.success(),
        "the documented lines failed ({:?}):\n{script}",
        out.status
    );
    programs
}

/// `ldd` of a program: the lines naming libredlock.
fn ldd_redlock(program: &Path) -> Vec<String> {
    // Without the LD_LIBRARY_PATH that cargo sets for tests: the rpath must do.
    let out = Command::new("ldd")
        .env_remove("LD_LIBRARY_PATH")
        .arg(program)
        .output()
        .expect("run ldd");
    assert!(out.status.success(), "ldd {}", program.display());
    let text = String::from_utf8_lossy(&out.stdout);
    eprintln!("ldd {}:\n{text}", program.display());
    text.lines()
        .filter(|l| l.contains("libredlock"))
        .map(|l| l.trim().to_string())
        .collect()
}

/// Checks each program's `ldd` (a static one has no libredlock.so, a dynamic one resolves it
/// from `libdir` with no LD_LIBRARY_PATH) and runs it against three real nodes.
fn check_programs(programs: &[(&'static str, PathBuf)], libdir: &Path) {
    let mut modes: Vec<_> = programs.iter().map(|(m, _)| *m).collect();
    modes.sort_unstable();
    assert_eq!(
        modes,
        ["dynamic", "static"],
        "one static and one dynamic line"
    );
    let cluster = Cluster::start(3);
    for (mode, program) in programs {
        let found = ldd_redlock(program);
        if *mode == "static" {
            assert!(found.is_empty(), "a static program needs {found:?}");
        } else {
            let want = format!(
                "libredlock.so => {}",
                libdir.join("libredlock.so").display()
            );
            assert!(
                found.len() == 1 && found[0].starts_with(&want),
                "want `{want}`, ldd says {found:?}"
            );
        }
        let out = run(Command::new(program)
            .env_remove("LD_LIBRARY_PATH")
            .args(cluster.urls()));
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "{mode} program: {:?}", out.status);
        assert!(
            stdout.contains("locked orders:42") && stdout.contains("unlocked"),
            "{mode} program: {stdout}"
        );
    }
}

/// The install block of docs/c-api.md, verbatim: `make install` into a temporary prefix, then the
/// dynamic and the static `pkg-config` lines; the dynamic program finds libredlock.so in the
/// prefix through the rpath, the static one does not need it.
#[test]
fn the_documented_install_and_pkg_config_lines_work() {
    build("static"); // the release library, once per test binary
    let tmp = TempDir::new("install");
    let (prefix, work) = (tmp.0.join("prefix"), tmp.0.join("work"));
    std::fs::create_dir_all(&work).unwrap();
    let lines = docs_block("tests/c_api.rs runs this block: install and link");
    assert!(
        lines[0].starts_with("make -C bindings/c install "),
        "{lines:?}"
    );
    let programs = run_doc_lines(&lines, |_| true, &work, &[("PREFIX", &prefix)]);
    check_programs(&programs, &prefix.join("lib"));

    let pc = |args: &[&str]| {
        let out = Command::new("pkg-config")
            .env("PKG_CONFIG_PATH", prefix.join("lib/pkgconfig"))
            .args(args)
            .arg("redlock")
            .output()
            .expect("run pkg-config");
        assert!(out.status.success(), "pkg-config {args:?}");
        String::from_utf8(out.stdout).unwrap().trim().to_string()
    };
    assert_eq!(pc(&["--modversion"]), env!("CARGO_PKG_VERSION"));
    let libdir = prefix.join("lib");
    assert!(
        pc(&["--libs"]).contains(&format!("-Wl,-rpath,{}", libdir.display())),
        "no rpath"
    );
    assert!(pc(&["--static", "--libs"]).ends_with("-lpthread -lm -ldl -lc"));
}

/// The lines of docs/c-api.md for linking against the source tree (its `cc` lines; the `cargo
/// build` and `make` lines are what `build` runs), from a directory where `include` and
/// `target` are the repository's.
#[test]
fn the_documented_source_tree_link_lines_work() {
    build("static");
    let tmp = TempDir::new("tree-link");
    for dir in ["include", "target"] {
        std::os::unix::fs::symlink(root().join(dir), tmp.0.join(dir)).expect("symlink");
    }
    let lines = docs_block("tests/c_api.rs runs the cc lines of this block: link in the tree");
    let programs = run_doc_lines(&lines, |l| l.starts_with("cc "), &tmp.0, &[]);
    check_programs(&programs, &tmp.0.join("target/release"));
}

#[test]
fn install_rejects_a_relative_prefix() {
    let out = Command::new("make")
        .arg("-C")
        .arg(root().join("bindings/c"))
        .args(["install", "PREFIX=relative/dir"])
        .output()
        .expect("run make install");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        stderr.contains("PREFIX must be an absolute path"),
        "{stderr}"
    );
    assert!(!root().join("bindings/c/relative").exists());
}
