//! Builds the C example and the C test program (`bindings/c`) against the release library and
//! `include/redlock.h`, and runs them against real redis-server nodes: the test program both
//! plain and under `valgrind --leak-check=full --error-exitcode=1`.

mod support;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

use support::Cluster;

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

fn run_test_program(bin: &Path, valgrind: bool) {
    let cluster = Cluster::start(3);
    let mut cmd = if valgrind {
        let mut c = Command::new("valgrind");
        c.args([
            "--leak-check=full",
            "--errors-for-leak-kinds=definite",
            "--error-exitcode=1",
            "--quiet",
        ])
        .arg(bin);
        c
    } else {
        Command::new(bin)
    };
    let out = run(cmd.args(cluster.urls()));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "C tests failed: {:?}", out.status);
    assert!(stdout.contains(" 0 failures"), "{stdout}");
    if valgrind {
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!stderr.contains("definitely lost"), "{stderr}");
    }
}

#[test]
fn c_test_program_passes_statically_linked() {
    run_test_program(&build("static").join("test_redlock"), false);
}

#[test]
fn c_test_program_passes_dynamically_linked() {
    run_test_program(&build("dynamic").join("test_redlock"), false);
}

#[test]
fn c_test_program_is_clean_under_valgrind() {
    let have = Command::new("valgrind")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    assert!(
        have,
        "valgrind not found: the C API's memory checks need it (apt-get install valgrind)"
    );
    run_test_program(&build("static").join("test_redlock"), true);
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

#[test]
fn installed_library_builds_with_pkg_config() {
    let prefix = std::env::temp_dir().join(format!("redlock-install-{}", std::process::id()));
    let out = Command::new("make")
        .arg("-C")
        .arg(root().join("bindings/c"))
        .arg(format!("PREFIX={}", prefix.display()))
        .arg("install")
        .output()
        .expect("run make install");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let pc_path = prefix.join("lib/pkgconfig");
    let flags = Command::new("pkg-config")
        .env("PKG_CONFIG_PATH", &pc_path)
        .args(["--cflags", "--libs", "redlock"])
        .output()
        .expect("run pkg-config (apt-get install pkg-config)");
    assert!(flags.status.success());
    let flags = String::from_utf8(flags.stdout).unwrap();
    assert!(flags.contains("-lredlock"), "{flags}");
    let version = Command::new("pkg-config")
        .env("PKG_CONFIG_PATH", &pc_path)
        .args(["--modversion", "redlock"])
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&version.stdout).trim(),
        env!("CARGO_PKG_VERSION")
    );
    let exe = prefix.join("example");
    let cc = Command::new("cc")
        .arg(root().join("bindings/c/example.c"))
        .arg("-o")
        .arg(&exe)
        .args(flags.split_whitespace())
        .output()
        .unwrap();
    assert!(
        cc.status.success(),
        "{}",
        String::from_utf8_lossy(&cc.stderr)
    );
    let cluster = Cluster::start(3);
    let run = Command::new(&exe)
        .env("LD_LIBRARY_PATH", prefix.join("lib"))
        .args(cluster.urls())
        .output()
        .unwrap();
    let _ = std::fs::remove_dir_all(&prefix);
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
}
