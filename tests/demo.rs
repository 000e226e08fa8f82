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
