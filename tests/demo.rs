//! The demo a newcomer runs first must work: it starts its own nodes, kills one halfway, and
//! exits 0 only when the counter equals the number of increments.

use std::process::Command;

#[test]
fn demo_runs_and_reports_a_consistent_counter() {
    let profile = if cfg!(debug_assertions) {
        vec![]
    } else {
        vec!["--release"]
    };
    let out = Command::new(env!("CARGO"))
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .args(["run", "--quiet", "--example", "demo"])
        .args(profile)
        .args(["--", "--threads", "3", "--increments", "20"])
        .output()
        .expect("run the demo");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert!(stdout.contains("killed node 2"), "{stdout}");
    assert!(
        stdout.contains("counter:                  60 (expected 60)"),
        "{stdout}"
    );
    assert!(stdout.contains("OK: every increment"), "{stdout}");
}

/// A directory of links to every program on `PATH` but `left_out`: a `PATH` for a machine
/// that lacks them.
fn path_without(left_out: &[&str], dir: &std::path::Path) -> std::ffi::OsString {
    std::fs::create_dir_all(dir).unwrap();
    let path = std::env::var_os("PATH").unwrap_or_default();
    for d in std::env::split_paths(&path) {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in entries.flatten() {
            let name = e.file_name();
            let link = dir.join(&name);
            if left_out.iter().any(|l| name == *l) || link.exists() {
                continue;
            }
            let _ = std::os::unix::fs::symlink(e.path(), link);
        }
    }
    dir.as_os_str().to_owned()
}

#[test]
fn the_readme_demo_command_needs_no_go_python_or_valgrind() {
    let dir = std::env::temp_dir().join(format!("redlock-demo-path-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let left_out = ["go", "gofmt", "python3", "python", "pytest", "valgrind"];
    let path = path_without(&left_out, &dir.join("bin"));
    let root = env!("CARGO_MANIFEST_DIR");
    let out = Command::new(format!("{root}/.ci/demo"))
        .current_dir(root)
        .env("PATH", &path)
        .args(["--threads", "2", "--increments", "10"])
        .output()
        .expect("run .ci/demo");
    let _ = std::fs::remove_dir_all(&dir);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert!(!stderr.contains("is required"), "{stderr}");
    assert!(stdout.contains("OK: every increment"), "{stdout}");
}
