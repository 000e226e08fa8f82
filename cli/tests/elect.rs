//! `redlock elect` against real redis-server processes: a leader that is killed is replaced
//! by a waiting candidate with a higher term, and `--observe` prints each new term.

#[path = "../../tests/support/mod.rs"]
mod support;

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use support::{Cluster, eventually};

fn redlock() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_redlock"));
    for v in [
        "REDLOCK_NODES",
        "REDLOCK_TTL",
        "REDLOCK_WAIT",
        "REDLOCK_GRACE",
        "REDLOCK_LABEL",
    ] {
        c.env_remove(v);
    }
    c
}

/// Kills a child process this test started, and reaps it.
struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A leader line of `--observe`: its term and value.
fn parse(line: &str) -> Option<(u64, String)> {
    let mut term = None;
    let mut value = None;
    for field in line.split_whitespace() {
        if let Some(t) = field.strip_prefix("term=") {
            term = t.parse().ok();
        } else if let Some(v) = field.strip_prefix("value=") {
            value = Some(v.to_string());
        }
    }
    Some((term?, value?))
}

/// Waits (bounded) for the observer to print a leader whose value is `value`.
fn leader_with(lines: &mpsc::Receiver<String>, value: &str) -> u64 {
    let give_up = std::time::Instant::now() + Duration::from_secs(60);
    let mut seen = Vec::new();
    while std::time::Instant::now() < give_up {
        let Ok(line) = lines.recv_timeout(Duration::from_secs(1)) else {
            continue;
        };
        seen.push(line.clone());
        match parse(&line) {
            Some((term, v)) if v == value => return term,
            Some(_) => {}
            None => panic!("not a leader line: {line:?}"),
        }
    }
    panic!("no leader {value:?} printed within 60 s; printed: {seen:?}");
}

#[test]
fn a_killed_leader_is_replaced_and_observe_prints_the_new_term() {
    let cluster = Cluster::start(3);
    let nodes = cluster.urls().join(",");
    let dir = std::env::temp_dir().join(format!("redlock-elect-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let mut observer = redlock()
        .args(["elect", "-n", &nodes, "-r", "cron", "--observe"])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let out = observer.stdout.take().unwrap();
    let _observer = Killed(observer);
    let (tx, lines) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(out).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let a = redlock()
        .args(["elect", "-n", &nodes, "-r", "cron", "-v", "a", "-t", "2s"])
        .args(["--", "sleep", "600"])
        .spawn()
        .unwrap();
    let mut a = Killed(a);
    let term_a = leader_with(&lines, "a");
    let file = dir.join("b-term");
    let script = format!("echo \"$REDLOCK_TERM\" > {}; sleep 600", file.display());
    let b = redlock()
        .args(["elect", "-n", &nodes, "-r", "cron", "-v", "b", "-t", "2s"])
        .args(["--", "sh", "-c", &script])
        .spawn()
        .unwrap();
    let _b = Killed(b);
    // The leader dies without resigning: b leads once a's leadership has run out.
    a.0.kill().unwrap();
    let term_b = leader_with(&lines, "b");
    assert!(term_b > term_a, "term {term_a} then {term_b}");
    let read = || std::fs::read_to_string(&file).unwrap_or_default();
    assert!(
        eventually(Duration::from_secs(30), || read().trim()
            == term_b.to_string()),
        "b's command saw REDLOCK_TERM={:?}, the observer term {term_b}",
        read()
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn elect_reports_usage_errors() {
    for (args, says) in [
        (
            vec!["elect", "-n", "127.0.0.1:1", "--", "true"],
            "--resource",
        ),
        (vec!["elect", "-n", "127.0.0.1:1", "-r", "x"], "no command"),
        (
            vec![
                "elect",
                "-n",
                "127.0.0.1:1",
                "-r",
                "x",
                "--observe",
                "--",
                "true",
            ],
            "--observe",
        ),
        (
            vec![
                "elect",
                "-n",
                "127.0.0.1:1",
                "-r",
                "x",
                "-t",
                "10",
                "--",
                "true",
            ],
            "unit",
        ),
    ] {
        let o = redlock().args(&args).output().unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(125), "{args:?}: {err}");
        assert!(err.contains(says), "{args:?}: {err}");
    }
}
