//! The `redlock` command-line tool against real redis-server processes.

#[path = "../../tests/support/mod.rs"]
mod support;

use std::process::{Command, Output, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use support::{Cluster, RedisServer, eventually};

/// The variables `redlock` reads: cleared in every test's commands, so that the caller's
/// environment cannot change what a test sees; tests that exercise them set them.
const READ_VARS: [&str; 10] = [
    "REDLOCK_NODES",
    "REDLOCK_TTL",
    "REDLOCK_WAIT",
    "REDLOCK_MAX_HOLD",
    "REDLOCK_GRACE",
    "REDLOCK_CONFLICT_EXIT_CODE",
    "REDLOCK_MAX_TTL",
    "REDLOCK_NODE_TIMEOUT",
    "REDLOCK_KEY_PREFIX",
    "REDLOCK_LABEL",
];

fn redlock() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_redlock"));
    for v in READ_VARS {
        c.env_remove(v);
    }
    c
}

fn text(o: &Output) -> String {
    format!(
        "status {:?}\nstdout:\n{}\nstderr:\n{}",
        o.status.code(),
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// `redlock run` on nodes the test started, with the defaults (restart quarantine on).
fn run(nodes: &str, args: &[&str]) -> Command {
    let mut c = redlock();
    c.args(["run", "--nodes", nodes]).args(args);
    c
}

#[test]
fn run_holds_the_lock_while_the_command_runs_and_returns_its_status() {
    let cluster = Cluster::start(3);
    let nodes = cluster.urls().join(",");
    // The first command leaves a file as it ends; the second says whether it was there.
    let dir = temp_dir("holds");
    let done = dir.join("first-done");
    let holder = run(&nodes, &["--resource", "job", "--ttl", "1s", "--"])
        .args([
            "sh",
            "-c",
            &format!("echo started; sleep 2; touch {}; exit 7", done.display()),
        ])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    // Wait until the command runs (the lock is held by then).
    assert!(eventually(Duration::from_secs(5), || cluster
        .present(b"redlock:job")
        == 3));
    // A second run without --wait is refused with the documented status...
    let refused = run(&nodes, &["--resource", "job", "--ttl", "1s", "--", "true"])
        .output()
        .unwrap();
    assert_eq!(refused.status.code(), Some(123), "{}", text(&refused));
    assert!(String::from_utf8_lossy(&refused.stderr).contains("not acquired"));
    // ...and with --wait it gets the lock once the first command exits (after its 1 s TTL
    // has been renewed past: the command runs 2 s).
    let waited = run(
        &nodes,
        &["--resource", "job", "--ttl", "1s", "--wait", "10s", "--"],
    )
    .args([
        "sh",
        "-c",
        &format!(
            "if [ -e {} ]; then echo after; else echo during; fi",
            done.display()
        ),
    ])
    .output()
    .unwrap();
    assert_eq!(waited.status.code(), Some(0), "{}", text(&waited));
    // The second command ran after the first had ended, however long the machine took to
    // start either: not a measure of time, which a busy machine stretches.
    assert_eq!(
        String::from_utf8_lossy(&waited.stdout).trim(),
        "after",
        "the second command ran while the first held the lock: {}",
        text(&waited)
    );
    let _ = std::fs::remove_dir_all(&dir);
    let first = holder.wait_with_output().unwrap();
    assert_eq!(first.status.code(), Some(7), "the command's own status");
    assert!(String::from_utf8_lossy(&first.stdout).contains("started"));
    // Released on the way out.
    assert!(eventually(Duration::from_secs(2), || cluster
        .present(b"redlock:job")
        == 0));
}

#[test]
fn run_passes_the_fencing_token_and_validity_to_the_command() {
    let cluster = Cluster::start(3);
    let nodes = cluster.urls().join(",");
    let out = run(
        &nodes,
        &["--resource", "env", "--ttl", "5s", "--fenced", "--"],
    )
    .args([
        "sh",
        "-c",
        "echo \"$REDLOCK_RESOURCE $REDLOCK_FENCING_TOKEN $REDLOCK_TTL_MS $REDLOCK_VALIDITY_MS\"",
    ])
    .output()
    .unwrap();
    assert!(out.status.success(), "{}", text(&out));
    let line = String::from_utf8_lossy(&out.stdout);
    let f: Vec<&str> = line.split_whitespace().collect();
    assert_eq!(f[0], "env");
    assert_eq!(f[1], "1");
    assert_eq!(f[2], "5000");
    let validity: u64 = f[3].parse().unwrap();
    assert!(validity > 4000 && validity <= 5000, "{validity}");
}

#[test]
fn a_killed_majority_terminates_the_command_with_the_lost_status() {
    let mut cluster = Cluster::start(3);
    let nodes = cluster.urls().join(",");
    let holder = run(
        &nodes,
        &[
            "--resource",
            "lost",
            "--ttl",
            "1s",
            "--node-timeout",
            "100ms",
            "--grace",
            "500ms",
            "--",
        ],
    )
    .args(["sh", "-c", "echo running; sleep 30"])
    .stdout(Stdio::piped())
    .stderr(Stdio::piped())
    .spawn()
    .unwrap();
    assert!(eventually(Duration::from_secs(5), || cluster
        .present(b"redlock:lost")
        == 3));
    let killed = Instant::now();
    cluster.servers[0].kill();
    cluster.servers[1].kill();
    let out = holder.wait_with_output().unwrap();
    let took = killed.elapsed();
    assert_eq!(out.status.code(), Some(124), "{}", text(&out));
    assert!(String::from_utf8_lossy(&out.stderr).contains("lost"));
    // Within about one TTL (1 s) and the grace (500 ms), not after the command's 30 s: half
    // of that leaves a busy machine all the time it may need.
    eprintln!("the command ended {took:?} after the majority was killed");
    assert!(took < Duration::from_secs(15), "{took:?}");
}

#[test]
fn signals_are_forwarded_and_the_lock_released() {
    let cluster = Cluster::start(3);
    let nodes = cluster.urls().join(",");
    let mut holder = run(&nodes, &["--resource", "sig", "--ttl", "2s", "--"])
        .args(["sleep", "30"])
        .spawn()
        .unwrap();
    assert!(eventually(Duration::from_secs(5), || cluster
        .present(b"redlock:sig")
        == 3));
    thread::sleep(Duration::from_millis(100));
    // SAFETY: kill(2) on the PID of a child this test spawned and has not reaped.
    assert_eq!(unsafe { libc::kill(holder.id() as i32, libc::SIGTERM) }, 0);
    let status = holder.wait().unwrap();
    // sleep died of the forwarded SIGTERM: 128 + 15.
    assert_eq!(status.code(), Some(143));
    assert!(eventually(Duration::from_secs(2), || cluster
        .present(b"redlock:sig")
        == 0));
}

/// True once process `pid` catches signal `sig` (its handler is installed), from the
/// `SigCgt` mask in `/proc/PID/status`.
fn catches(pid: u32, sig: libc::c_int) -> bool {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("SigCgt:"))
        .and_then(|m| u64::from_str_radix(m.trim(), 16).ok())
        .is_some_and(|mask| mask & (1 << (sig - 1)) != 0)
}

#[test]
fn a_signal_ends_a_wait_for_the_lock_at_once_with_nothing_held() {
    let cluster = Cluster::start(3);
    let nodes = cluster.urls().join(",");
    let mut holder = run(
        &nodes,
        &["-r", "wait-sig", "-t", "10s", "--", "sleep", "60"],
    )
    .spawn()
    .unwrap();
    assert!(eventually(Duration::from_secs(10), || cluster
        .present(b"redlock:wait-sig")
        == 3));
    let holder_value = cluster.servers[0].get(b"redlock:wait-sig");
    for (sig, code) in [(libc::SIGINT, 130), (libc::SIGTERM, 143)] {
        let mut waiter = run(&nodes, &["-r", "wait-sig", "-t", "10s", "-w", "1m", "--"])
            .args(["echo", "ran"])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        // Once its handlers are in place (the signal then means "stop waiting").
        assert!(eventually(Duration::from_secs(10), || catches(
            waiter.id(),
            sig
        )));
        thread::sleep(Duration::from_millis(200));
        let sent = Instant::now();
        // SAFETY: kill(2) on the PID of a child this test spawned and has not reaped.
        assert_eq!(unsafe { libc::kill(waiter.id() as i32, sig) }, 0);
        // Not when the holder lets go (60 s) or the wait runs out (1 m): at once.
        let ended = eventually(Duration::from_secs(20), || {
            matches!(waiter.try_wait(), Ok(Some(_)))
        });
        if !ended {
            let _ = waiter.kill();
        }
        let out = waiter.wait_with_output().unwrap();
        assert!(
            ended,
            "still waiting 20 s after signal {sig}: {}",
            text(&out)
        );
        eprintln!("signal {sig} ended the wait in {:?}", sent.elapsed());
        assert_eq!(out.status.code(), Some(code), "{}", text(&out));
        assert!(!String::from_utf8_lossy(&out.stdout).contains("ran"));
        assert!(
            String::from_utf8_lossy(&out.stderr)
                .contains("while waiting for the lock; nothing is held"),
            "{}",
            text(&out)
        );
        // The holder's lock is untouched.
        assert_eq!(cluster.servers[0].get(b"redlock:wait-sig"), holder_value);
    }
    // SAFETY: kill(2) on the PID of a child this test spawned and has not reaped.
    unsafe { libc::kill(holder.id() as i32, libc::SIGTERM) };
    holder.wait().unwrap();
    assert!(eventually(Duration::from_secs(5), || cluster
        .present(b"redlock:wait-sig")
        == 0));
}

#[test]
fn background_children_keep_the_lock_until_the_process_group_is_gone() {
    let cluster = Cluster::start(3);
    let nodes = cluster.urls().join(",");
    let dir = temp_dir("background");
    let done = dir.join("background-done");
    // The command exits at once; its background child finishes a second later, and writes a
    // file as its last act.
    let script = format!("(sleep 1; touch {}) & exit 7", done.display());
    let out = run(&nodes, &["-r", "bg", "-t", "5s", "--", "sh", "-c", &script])
        .output()
        .unwrap();
    // The command's status, returned once the whole group was gone: the child had finished.
    assert_eq!(out.status.code(), Some(7), "{}", text(&out));
    assert!(
        done.exists(),
        "redlock released before the background child ended"
    );
    assert!(eventually(Duration::from_secs(5), || cluster
        .present(b"redlock:bg")
        == 0));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn run_reports_usage_errors_and_missing_commands() {
    let cluster = Cluster::start(1);
    let nodes = cluster.urls().join(",");
    let cases: [(&[&str], i32, &str); 4] = [
        (
            &["--ttl", "1s", "--", "true"],
            125,
            "--resource is required",
        ),
        (&["--resource", "r", "--ttl", "1s"], 125, "no command"),
        (
            &["--resource", "r", "--ttl", "soon", "--", "true"],
            125,
            "--ttl",
        ),
        (
            &["--resource", "r", "--ttl", "1s", "--", "/no/such/cmd"],
            127,
            "cannot run",
        ),
    ];
    for (args, code, says) in cases {
        let out = run(&nodes, args).output().unwrap();
        assert_eq!(out.status.code(), Some(code), "{args:?}: {}", text(&out));
        assert!(
            String::from_utf8_lossy(&out.stderr).contains(says),
            "{args:?}: {}",
            text(&out)
        );
    }
    // A malformed node names the node, never the password.
    let out = redlock()
        .args([
            "run",
            "--nodes",
            "redis://:hunter2@127.0.0.1:99999",
            "--resource",
            "r",
            "--ttl",
            "1s",
            "--",
            "true",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(125));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("node 0") && !err.contains("hunter2"), "{err}");
    // Nodes down: unavailable.
    let out = redlock()
        .args([
            "run",
            "--nodes",
            "127.0.0.1:1,127.0.0.1:2,127.0.0.1:3",
            "--resource",
            "r",
            "--ttl",
            "1s",
            "--",
            "true",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(122), "{}", text(&out));
}

#[test]
fn every_command_has_help() {
    for args in [
        &["--help"][..],
        &["help"],
        &["run", "--help"],
        &["inspect", "--help"],
        &["elect", "--help"],
        &["demo", "--help"],
    ] {
        let out = redlock().args(args).output().unwrap();
        assert!(out.status.success(), "{args:?}");
        assert!(
            String::from_utf8_lossy(&out.stdout).contains("usage") || args[0] == "demo",
            "{args:?}"
        );
    }
    let out = redlock().args(["frobnicate"]).output().unwrap();
    assert_eq!(out.status.code(), Some(125));
    // A bare `redlock` prints the usage, to stderr, as a usage error.
    let out = redlock().output().unwrap();
    assert_eq!(out.status.code(), Some(125));
    assert!(out.stdout.is_empty());
    let usage = String::from_utf8_lossy(&out.stderr);
    assert!(
        usage.contains("usage:") && usage.contains("redlock run -n"),
        "{usage}"
    );
    // Short options are documented beside their long forms.
    let out = redlock().args(["run", "-h"]).output().unwrap();
    let help = String::from_utf8_lossy(&out.stdout);
    for opt in [
        "-n, --nodes",
        "-r, --resource",
        "-t, --ttl",
        "-w, --wait",
        "-f, --fenced",
        "-E, --conflict-exit-code",
        "-h, --help",
        "[REDLOCK_TTL]",
        "[REDLOCK_NODES]",
    ] {
        assert!(help.contains(opt), "{opt} missing from:\n{help}");
    }
}

/// `redlock run` with the command `sh -c 'echo $REDLOCK_TTL_MS'`: the TTL it used.
fn ttl_seen(c: &mut Command) -> Result<u64, String> {
    let out = c
        .args(["--", "sh", "-c", "echo $REDLOCK_TTL_MS"])
        .output()
        .unwrap();
    if !out.status.success() {
        return Err(text(&out));
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().parse().unwrap())
}

#[test]
fn durations_take_units_and_short_options_and_the_environment_work() {
    let cluster = Cluster::start(3);
    let nodes = cluster.urls().join(",");
    let short = |ttl: &str| {
        let mut c = redlock();
        c.args(["run", "-n", &nodes, "-r", "units", "-t", ttl]);
        c
    };
    assert_eq!(ttl_seen(&mut short("2s")), Ok(2000));
    assert_eq!(
        ttl_seen(&mut short("1.5s")),
        Ok(1500),
        "a fraction with a unit"
    );
    assert_eq!(ttl_seen(&mut short("750ms")), Ok(750));
    // No --ttl: 30 s, documented in --help (the lock is renewed while the command runs).
    assert_eq!(ttl_seen(&mut run(&nodes, &["-r", "units"])), Ok(30_000));
    assert_eq!(
        ttl_seen(short("1m30s").args(["--max-ttl", "2m"])),
        Ok(90_000)
    );
    assert_eq!(
        ttl_seen(&mut run(&nodes, &["-fr", "units", "-t5s"])),
        Ok(5000)
    );
    // From the environment: the nodes and the TTL; a flag wins over its variable.
    let from_env = || {
        let mut c = redlock();
        c.args(["run", "-r", "units"])
            .env("REDLOCK_NODES", &nodes)
            .env("REDLOCK_TTL", "3s");
        c
    };
    assert_eq!(ttl_seen(&mut from_env()), Ok(3000));
    assert_eq!(ttl_seen(from_env().args(["-t", "4s"])), Ok(4000));
    // An empty variable counts as unset: the default.
    assert_eq!(ttl_seen(from_env().env("REDLOCK_TTL", "")), Ok(30_000));
    // Bad values: the flag or the variable is named, with the accepted forms.
    const FORMS: &str = "500ms, 10s, 1.5s, 2m, 1h";
    let cases: Vec<(Command, &[&str])> = vec![
        (
            short("10x"),
            &["--ttl: \"10x\" is not a duration (unknown unit", FORMS],
        ),
        (
            short("-5s"),
            &["--ttl: \"-5s\" is not a duration (negative)", FORMS],
        ),
        // A bare number never silently means milliseconds: both spellings are shown.
        (
            short("10"),
            &["--ttl: \"10\" is not a duration (no unit: write 10s for seconds or 10ms"],
        ),
        (
            {
                let mut c = from_env();
                c.env("REDLOCK_TTL", "30");
                c
            },
            &[
                "environment variable REDLOCK_TTL: \"30\"",
                "write 30s for seconds or 30ms",
            ],
        ),
        (short("1.5ms"), &["(finer than a millisecond)"]),
        (short("99999999999999999999ms"), &["(too large)"]),
        (
            short("2h"),
            &["--ttl 2h is above the maximum TTL, 1m", "--max-ttl"],
        ),
        (short("2ms"), &["--ttl must be at least 3ms"]),
        (
            {
                let mut c = from_env();
                c.env("REDLOCK_TTL", "10x");
                c
            },
            &[
                "environment variable REDLOCK_TTL: \"10x\" is not a duration",
                FORMS,
            ],
        ),
        (
            {
                let mut c = short("1s");
                c.env("REDLOCK_WAIT", "soon");
                c
            },
            &["environment variable REDLOCK_WAIT", FORMS],
        ),
        (
            {
                let mut c = short("1s");
                c.env("REDLOCK_MAX_TTL", "1d");
                c
            },
            &["environment variable REDLOCK_MAX_TTL: \"1d\" is not a duration (unknown unit"],
        ),
        (
            {
                let mut c = short("1s");
                c.args(["--grace", ""]);
                c
            },
            &["--grace: \"\" is not a duration (empty)", FORMS],
        ),
        (
            {
                let mut c = short("1s");
                c.args(["-E", "256"]);
                c
            },
            &["--conflict-exit-code: expected an exit status from 0 to 255, got \"256\""],
        ),
        (
            {
                let mut c = short("1s");
                c.env("REDLOCK_CONFLICT_EXIT_CODE", "-1");
                c
            },
            &["environment variable REDLOCK_CONFLICT_EXIT_CODE: expected an exit status"],
        ),
    ];
    for (mut c, says) in cases {
        let out = c.args(["--", "true"]).output().unwrap();
        assert_eq!(out.status.code(), Some(125), "{c:?}: {}", text(&out));
        let err = String::from_utf8_lossy(&out.stderr);
        for s in says {
            assert!(err.contains(s), "{c:?}: wanted {s:?} in {}", text(&out));
        }
        assert!(!err.contains("Config::"), "library names leak: {err}");
    }
}

#[test]
fn the_conflict_exit_code_is_chosen_like_flocks() {
    let cluster = Cluster::start(3);
    let nodes = cluster.urls().join(",");
    let mgr = redlock::Redlock::new(support::config(cluster.urls())).unwrap();
    let lease = mgr.try_lock("busy", Duration::from_secs(30)).unwrap();
    let status = |extra: &[&str], env: Option<&str>| {
        let mut c = run(&nodes, &["-r", "busy", "-t", "1s"]);
        c.args(extra).args(["--", "true"]);
        if let Some(v) = env {
            c.env("REDLOCK_CONFLICT_EXIT_CODE", v);
        }
        let out = c.output().unwrap();
        assert!(
            String::from_utf8_lossy(&out.stderr).contains("not acquired"),
            "{}",
            text(&out)
        );
        out.status.code()
    };
    assert_eq!(status(&[], None), Some(123), "the default");
    assert_eq!(status(&["-E", "7"], None), Some(7));
    assert_eq!(status(&["--conflict-exit-code=0"], None), Some(0));
    assert_eq!(status(&[], Some("9")), Some(9));
    assert_eq!(status(&["-E", "7"], Some("9")), Some(7), "the flag wins");
    lease.unlock().unwrap();
}

#[test]
fn a_nested_run_never_takes_the_outer_locks_name_or_ttl() {
    let cluster = Cluster::start(3);
    let nodes = cluster.urls().join(",");
    // The outer run gets its nodes from REDLOCK_NODES, which the inner runs inherit; its
    // command sees REDLOCK_RESOURCE=outer and REDLOCK_TTL_MS=5000, which they must not use.
    let script = r#"
        "$RL" run -t 5s -- true; echo "no-resource=$?"
        "$RL" run -r inner -- sh -c 'echo "inner-ttl=$REDLOCK_TTL_MS"'; echo "no-ttl=$?"
        "$RL" run -r inner -t 5s -- sh -c 'echo "inner-holds=$REDLOCK_RESOURCE"'; echo "inner=$?"
        "$RL" run -r "$REDLOCK_RESOURCE" -t 5s -- true; echo "same=$?"
    "#;
    let out = redlock()
        .args(["run", "-r", "outer", "-t", "5s", "--", "sh", "-c", script])
        .env("REDLOCK_NODES", &nodes)
        .env("RL", env!("CARGO_BIN_EXE_redlock"))
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    for line in [
        "no-resource=125",
        // No -t: the default 30 s, not the outer run's 5 s.
        "inner-ttl=30000",
        "no-ttl=0",
        "inner-holds=inner",
        "inner=0",
        // Naming the outer lock on purpose works, and meets the outer lock.
        "same=123",
    ] {
        assert!(stdout.lines().any(|l| l == line), "{line}: {}", text(&out));
    }
    assert!(
        stderr.contains("--resource is required (REDLOCK_RESOURCE is not read"),
        "{stderr}"
    );
}

#[test]
fn shared_runs_run_together_and_exclude_an_exclusive_one() {
    let cluster = Cluster::start(3);
    let nodes = cluster.urls().join(",");
    // Inside a shared run of "doc": another shared run of it runs, an exclusive one is refused.
    let script = r#"
        "$RL" run -s -r doc -t 5s -- true; echo "shared=$?"
        "$RL" run --shared -r doc -t 5s -- true; echo "shared-long=$?"
        "$RL" run -r doc -t 5s -- true; echo "exclusive=$?"
    "#;
    let out = redlock()
        .args([
            "run", "-s", "-r", "doc", "-t", "5s", "--", "sh", "-c", script,
        ])
        .env("REDLOCK_NODES", &nodes)
        .env("RL", env!("CARGO_BIN_EXE_redlock"))
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    for line in ["shared=0", "shared-long=0", "exclusive=123"] {
        assert!(stdout.lines().any(|l| l == line), "{line}: {}", text(&out));
    }
    // And inside an exclusive run, a shared one is refused.
    let out = redlock()
        .args(["run", "-r", "doc", "-t", "5s", "--", "sh", "-c"])
        .arg(r#""$RL" run -s -r doc -t 5s -- true; echo "shared=$?""#)
        .env("REDLOCK_NODES", &nodes)
        .env("RL", env!("CARGO_BIN_EXE_redlock"))
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out));
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("shared=123"),
        "{}",
        text(&out)
    );
    for s in &cluster.servers {
        assert_eq!(s.lock_keys(), 0);
    }
}

/// `inspect -r` says who holds a resource: the label `run` stores (HOST:PID by default, or
/// `--label`), per node and on a quorum; exit status 0 held, 4 not held.
#[test]
fn a_refusal_names_the_holder_and_inspect_names_shared_holders() {
    let cluster = Cluster::start(3);
    let nodes = cluster.urls().join(",");
    let me = env!("CARGO_BIN_EXE_redlock");
    // Inside a run labelled vm:11310, another run of the lock is refused and says by whom.
    let script = r#""$RL" run -r named -- true; echo "inner=$?""#;
    let out = run(&nodes, &["-r", "named", "--label", "vm:11310", "--"])
        .args(["sh", "-c", script])
        .env("REDLOCK_NODES", &nodes)
        .env("RL", me)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out));
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("inner=123"),
        "{}",
        text(&out)
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("held by \"vm:11310\" (lock), for ")
            && stderr.contains("redlock inspect -r named"),
        "{stderr}"
    );
    // A shared lock is shown as one, held by shared holders (it has no label of its own).
    let out = run(&nodes, &["-s", "-r", "doc", "--"])
        .args([me, "inspect", "-r", "doc"])
        .env("REDLOCK_NODES", &nodes)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert!(
        stdout.contains("is held on a quorum by shared holders (shared lock)"),
        "{stdout}"
    );
    assert_eq!(
        stdout.matches("shared holders (shared lock)").count(),
        4,
        "{stdout}"
    );
}

#[test]
fn inspect_says_why_a_node_cannot_be_scanned_in_words() {
    let cluster = Cluster::start(2);
    let dead = support::free_port();
    let nodes = format!("{},redis://127.0.0.1:{dead}", cluster.urls().join(","));
    let out = redlock().args(["inspect", "-n", &nodes]).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(
        stderr.contains(&format!("node 2 (127.0.0.1:{dead}): cannot scan: ")),
        "{stderr}"
    );
    // Words, not a Rust value: `Unreachable("connection refused")` was printed before.
    assert!(
        !stderr.contains("Unreachable(") && !stderr.contains("(\""),
        "{stderr}"
    );
}

#[test]
fn inspect_resource_names_the_holder_run_labelled() {
    let cluster = Cluster::start(3);
    let nodes = cluster.urls().join(",");
    let me = env!("CARGO_BIN_EXE_redlock");
    // The command asks who holds its own lock: `redlock run`'s default label, HOST:PID.
    let out = run(
        &nodes,
        &["-r", "who", "-t", "10s", "--", me, "inspect", "-r", "who"],
    )
    .env("REDLOCK_NODES", &nodes)
    .output()
    .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert!(stdout.contains("is held on a quorum by \""), "{stdout}");
    let label = stdout.split('"').nth(3).unwrap_or_default().to_string();
    let (host, pid) = label.rsplit_once(':').unwrap_or_default();
    assert!(
        !host.is_empty() && pid.parse::<u32>().is_ok(),
        "{label:?} in {stdout}"
    );
    assert_eq!(
        stdout.matches(&format!("{label} (lock)")).count(),
        3,
        "{stdout}"
    );
    // An explicit label, under a key prefix of its own (which inspect must be told too).
    let out = run(
        &nodes,
        &[
            "-r",
            "who",
            "-t",
            "10s",
            "--label",
            "nightly@web-1",
            "--key-prefix",
            "jobs:",
            "--",
        ],
    )
    .args([me, "inspect", "--key-prefix", "jobs:", "-r", "who"])
    .env("REDLOCK_NODES", &nodes)
    .output()
    .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert!(
        stdout.contains("(key jobs:who) is held on a quorum by \"nightly@web-1\""),
        "{stdout}"
    );
    // Released: not held, exit status 4.
    let out = redlock()
        .args(["inspect", "-n", &nodes, "-r", "who"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(4), "{}", text(&out));
    assert!(String::from_utf8_lossy(&out.stdout).contains("not held on a quorum"));
    // Bad labels are usage errors naming the flag.
    let out = run(
        &nodes,
        &["-r", "who", "-t", "10s", "--label", "a\tb", "--", "true"],
    )
    .output()
    .unwrap();
    assert_eq!(out.status.code(), Some(125), "{}", text(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("--label"),
        "{}",
        text(&out)
    );
}

#[test]
fn inspect_shows_held_locks_and_finds_leaked_keys() {
    let cluster = Cluster::start(3);
    let nodes = cluster.urls().join(",");
    // A key someone left without a TTL, on one node.
    redis::cmd("SET")
        .arg("redlock:stuck")
        .arg("0123456789abcdef")
        .exec(&mut cluster.servers[1].client())
        .unwrap();
    let mgr = redlock::Redlock::new(support::config(cluster.urls())).unwrap();
    let lease = mgr.try_lock("orders:42", Duration::from_secs(30)).unwrap();
    assert!(eventually(Duration::from_secs(2), || cluster
        .present(lease.key())
        == 3));
    let out = redlock()
        .args(["inspect", "--nodes", &nodes, "--fail-on-leak"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(3), "{}", text(&out));
    let short = &lease.token()[..8];
    let rows: Vec<&str> = stdout.lines().filter(|l| l.contains(short)).collect();
    assert_eq!(rows.len(), 3, "{stdout}");
    for row in rows {
        let ttl: i64 = row
            .split_whitespace()
            .rev()
            .nth(1)
            .unwrap()
            .parse()
            .unwrap();
        assert!(ttl > 25_000 && ttl <= 30_000, "{row}");
    }
    assert!(stdout.contains("LEAKED: 1 key"), "{stdout}");
    assert!(
        stdout.contains(&format!(
            "node 1 (127.0.0.1:{}): redlock:stuck — no TTL",
            cluster.servers[1].port
        )),
        "{stdout}"
    );
    // The prefix narrows the scan.
    let out = redlock()
        .args(["inspect", "--nodes", &nodes, "--prefix", "orders:"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success());
    assert!(
        stdout.contains("3 lock key(s) for 1 resource(s)"),
        "{stdout}"
    );
    assert!(stdout.contains("no leaked lock keys"), "{stdout}");
    lease.unlock().unwrap();
    // A node that cannot be scanned is named, and the status says so.
    let s = RedisServer::start_with(&["--requirepass", "pw"]);
    let out = redlock()
        .args([
            "inspect",
            "--nodes",
            &format!("redis://:wrong@127.0.0.1:{}", s.port),
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("node 0 (:***@127.0.0.1") && !err.contains("wrong"),
        "{err}"
    );
}

/// `inspect` shows each kind of lock as what it is: a reentrant lock's hash, a key of another
/// type under the prefix, a semaphore's permits held, a fair lock's queued waiters and an
/// election's leader.
#[test]
fn inspect_shows_each_kind_of_lock_as_what_it_is() {
    let cluster = Cluster::start(3);
    let nodes = cluster.urls().join(",");
    let mgr = std::sync::Arc::new(redlock::Redlock::new(support::config(cluster.urls())).unwrap());
    let ttl = Duration::from_secs(30);
    let owned = redlock::LockOptions::new()
        .owner("me")
        .wait(redlock::Wait::No);
    let reentrant = mgr.acquire("rent", ttl, &owned).unwrap();
    let pool = mgr.semaphore("pool", 3).unwrap();
    let permits = [
        pool.try_acquire(ttl).unwrap(),
        pool.try_acquire(ttl).unwrap(),
    ];
    let fair = redlock::LockOptions::new().fair(true);
    let holder = mgr
        .acquire("fq", ttl, &fair.clone().wait(redlock::Wait::No))
        .unwrap();
    // A waiter queued behind the holder, until it is released (or 30 s).
    let waiter = {
        let mgr = std::sync::Arc::clone(&mgr);
        let wait = redlock::Wait::Until(std::time::Instant::now() + ttl);
        std::thread::spawn(move || mgr.acquire("fq", ttl, &fair.wait(wait)).map(|l| l.unlock()))
    };
    let queued = |s: &RedisServer| {
        redis::cmd("HLEN")
            .arg("redlock-fair:redlock:fq")
            .query::<i64>(&mut s.client())
            .unwrap_or(0)
            > 0
    };
    assert!(
        eventually(Duration::from_secs(20), || cluster
            .servers
            .iter()
            .all(queued)),
        "the waiter never queued"
    );
    let leading = mgr
        .election("sched")
        .campaign(
            "10.0.0.1:80",
            ttl,
            &redlock::LockOptions::new().wait(redlock::Wait::No),
        )
        .unwrap();
    redis::cmd("RPUSH")
        .arg("redlock:alist")
        .arg("x")
        .exec(&mut cluster.servers[0].client())
        .unwrap();
    let out = redlock().args(["inspect", "-n", &nodes]).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{}", text(&out));
    let row = |name: &str| {
        stdout
            .lines()
            .find(|l| l.starts_with(name))
            .unwrap_or("")
            .to_string()
    };
    assert!(
        row("rent ").contains("(a reentrant or shared lock's hash; -r rent shows its holders)"),
        "{stdout}"
    );
    assert!(
        row("alist ").contains("(a list, not a lock key)"),
        "{stdout}"
    );
    assert!(stdout.contains("1 semaphore(s)"), "{stdout}");
    assert!(row("pool ").trim_end().ends_with(" 2"), "{stdout}");
    assert!(stdout.contains("1 fair queue(s)"), "{stdout}");
    assert!(row("fq ").contains(" 1"), "{stdout}");
    assert!(
        stdout.contains("1 election(s) with a leader's key"),
        "{stdout}"
    );
    assert!(row("sched ").contains('…'), "{stdout}");
    let told = format!(
        "  leader: term {}, value \"10.0.0.1:80\", valid ",
        leading.term()
    );
    assert!(stdout.contains(&told), "{stdout}");
    leading.resign().unwrap();
    holder.unlock().unwrap();
    waiter.join().unwrap().unwrap().unwrap();
    for p in permits {
        p.unlock().unwrap();
    }
    reentrant.unlock().unwrap();
}

/// The command lines `redlock demo` printed (`$ …`), checked to be complete.
fn printed_commands(stdout: &str, nodes: &str) -> Vec<String> {
    let lines: Vec<String> = stdout
        .lines()
        .filter_map(|l| l.strip_prefix("$ "))
        .map(str::to_string)
        .collect();
    assert_eq!(lines.len(), 5, "{stdout}");
    for l in &lines {
        // This test's binary is not on the PATH: the demo names it by its full path.
        assert!(
            l.starts_with(&format!("{} ", env!("CARGO_BIN_EXE_redlock"))),
            "{l}"
        );
        assert!(
            l.contains(&format!(" -n {nodes} ")) || l.ends_with(&format!(" -n {nodes}")),
            "{l}"
        );
    }
    lines
}

#[test]
fn the_demo_runs() {
    let out = redlock().arg("demo").output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{}", text(&out));
    assert!(
        stdout.contains("[child] holding demo-report, fencing token 1"),
        "{stdout}"
    );
    assert!(stdout.contains("exit status 123"), "{stdout}");
    assert!(stdout.contains("[second] got it now"), "{stdout}");
    let nodes = stdout
        .lines()
        .find_map(|l| l.strip_prefix("nodes: "))
        .unwrap();
    printed_commands(&stdout, nodes);
}

#[test]
fn the_demos_printed_commands_run_as_shown() {
    // The demo on this test's nodes, which outlive it: then its printed lines can be run
    // again, through sh, exactly as a reader would paste them.
    let cluster = Cluster::start(3);
    let nodes = cluster.urls().join(",");
    let out = redlock().args(["demo", "-n", &nodes]).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{}", text(&out));
    assert!(stdout.contains("exit status 123"), "{stdout}");
    assert!(!stdout.contains("stopping the nodes"), "{stdout}");
    let lines = printed_commands(&stdout, &nodes);
    let mut outputs = String::new();
    for line in &lines {
        let mut sh = Command::new("sh");
        sh.args(["-c", line]);
        for v in READ_VARS {
            sh.env_remove(v);
        }
        let out = sh.output().unwrap();
        // The lock is free each time now: every line succeeds.
        assert_eq!(out.status.code(), Some(0), "{line}: {}", text(&out));
        outputs.push_str(&String::from_utf8_lossy(&out.stdout));
    }
    for says in [
        "[child] holding demo-report, fencing token 2",
        "[child] done",
        "[second] got it\n",
        "[second] got it now",
        "0 lock key(s) for 0 resource(s) on 3 node(s)",
    ] {
        assert!(outputs.contains(says), "{says}: {outputs}");
    }
}

/// A process's start time (field 22 of /proc/PID/stat), or None when it is gone or a zombie:
/// a zombie has exited and is only waiting for whoever inherited it to reap it.
fn started_at(pid: i32) -> Option<String> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) is in parentheses and may contain spaces: split after it.
    let rest = &stat[stat.rfind(')')? + 2..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    if matches!(fields.first(), Some(&"Z") | Some(&"X")) {
        return None;
    }
    fields.get(19).map(|s| s.to_string())
}

/// Reads a PID a command wrote to `path`, waiting up to `timeout` for it to appear.
fn pid_from(path: &std::path::Path, timeout: Duration) -> i32 {
    let mut pid = None;
    assert!(
        eventually(timeout, || {
            pid = std::fs::read_to_string(path)
                .ok()
                .and_then(|s| s.trim().parse().ok());
            pid.is_some()
        }),
        "{} never written",
        path.display()
    );
    pid.unwrap()
}

#[test]
fn a_killed_supervisor_takes_its_command_and_the_command_group_with_it() {
    let cluster = Cluster::start(3);
    let nodes = cluster.urls().join(",");
    let dir = temp_dir("killed-supervisor");
    let (child_file, grandchild_file) = (dir.join("child"), dir.join("grandchild"));
    // The command (sh) starts a grandchild in its process group, writes both PIDs (each
    // file renamed into place, so never read half-written) and waits.
    let script = format!(
        "sleep 60 & echo $! > {g}.tmp && mv {g}.tmp {g}; echo $$ > {c}.tmp && mv {c}.tmp {c}; wait",
        g = grandchild_file.display(),
        c = child_file.display()
    );
    let mut supervisor = run(&nodes, &["--resource", "orphan", "--ttl", "2s", "--"])
        .args(["sh", "-c", &script])
        .spawn()
        .unwrap();
    let child = pid_from(&child_file, Duration::from_secs(20));
    let grandchild = pid_from(&grandchild_file, Duration::from_secs(20));
    let (child_start, grandchild_start) = (started_at(child), started_at(grandchild));
    assert!(child_start.is_some() && grandchild_start.is_some());
    let alive = |pid, start: &Option<String>| started_at(pid).as_ref() == start.as_ref();
    let killed = Instant::now();
    supervisor.kill().unwrap(); // SIGKILL: no handler runs, nothing is cleaned up in-process
    supervisor.wait().unwrap();
    // Both must be gone long before the lock's key expires (2 s) — and certainly within 10 s
    // on a loaded machine. Without the fix both live on for a minute, with PPID 1.
    let gone = eventually(Duration::from_secs(10), || {
        !alive(child, &child_start) && !alive(grandchild, &grandchild_start)
    });
    let took = killed.elapsed();
    // Clean up whatever is left before asserting, so a failure leaves no stray sleep behind.
    for (pid, start) in [(child, &child_start), (grandchild, &grandchild_start)] {
        if alive(pid, start) {
            // SAFETY: kill(2) on a PID this test's command reported and that still has the
            // start time it had then (so it is that process, not a reused PID).
            unsafe { libc::kill(pid, libc::SIGKILL) };
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    assert!(
        gone,
        "the command (pid {child}) or its group (pid {grandchild}) outlived the killed \
         supervisor by {took:?}"
    );
    eprintln!("the command and its group were gone {took:?} after SIGKILL to redlock");
}

/// SIGKILL to `redlock`'s whole process group takes its group watcher too: then only the
/// kernel's parent-death signal (Linux) is left to stop the command itself.
#[cfg(target_os = "linux")]
#[test]
fn a_killed_supervisor_and_watcher_still_take_the_command_with_them() {
    use std::os::unix::process::CommandExt;
    let cluster = Cluster::start(3);
    let nodes = cluster.urls().join(",");
    let dir = temp_dir("killed-group");
    let child_file = dir.join("child");
    let script = format!(
        "echo $$ > {c}.tmp && mv {c}.tmp {c}; exec sleep 60",
        c = child_file.display()
    );
    let mut supervisor = run(&nodes, &["--resource", "orphan2", "--ttl", "2s", "--"])
        .args(["sh", "-c", &script])
        .process_group(0)
        .spawn()
        .unwrap();
    let child = pid_from(&child_file, Duration::from_secs(20));
    let start = started_at(child);
    assert!(start.is_some());
    let killed = Instant::now();
    // SAFETY: kill(2) on the process group of a child this test spawned and has not reaped.
    assert_eq!(
        unsafe { libc::kill(-(supervisor.id() as i32), libc::SIGKILL) },
        0
    );
    supervisor.wait().unwrap();
    let gone = eventually(Duration::from_secs(10), || started_at(child) != start);
    let took = killed.elapsed();
    if !gone {
        // SAFETY: kill(2) on the PID the command reported, still with its start time.
        unsafe { libc::kill(child, libc::SIGKILL) };
    }
    let _ = std::fs::remove_dir_all(&dir);
    assert!(
        gone,
        "the command (pid {child}) outlived redlock by {took:?}"
    );
    eprintln!("the command was gone {took:?} after SIGKILL to redlock's process group");
}

/// A fresh temporary directory of this test's own.
fn temp_dir(name: &str) -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("redlock-cli-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

#[test]
fn new_nodes_beside_a_used_one_are_admitted_by_the_operator() {
    let cluster = Cluster::start(3);
    let urls = cluster.urls();
    let nodes = urls.join(",");
    // Node 0 alone has held a lock: it has a marker, the two new ones have none.
    let out = run(&urls[0], &["-r", "grow", "-t", "1s", "--", "true"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let quick = || {
        run(&nodes, &["-r", "grow", "-t", "1s", "--", "true"])
            .output()
            .unwrap()
    };
    let out = quick();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(122), "{}", text(&out));
    assert!(
        err.contains("or it is new: admit a node you know is new"),
        "{err}"
    );
    assert!(
        err.contains("`redlock admit -n … 1 2` trusts them now"),
        "{err}"
    );
    // The operator says they are new: trusted at once, in every later run too.
    let out = redlock()
        .args(["admit", "-n", &nodes, "1", "2"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert!(String::from_utf8_lossy(&out.stdout).contains("node 2 is trusted"));
    let out = quick();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    // Usage errors name what is wrong.
    for (args, says) in [
        (vec!["admit", "-n", &nodes], "name the nodes to admit"),
        (vec!["admit", "-n", &nodes, "x"], "is not a node index"),
        (
            vec!["admit", "-n", &nodes, "3"],
            "node 3: there are 3 nodes (0 to 2)",
        ),
    ] {
        let out = redlock().args(&args).output().unwrap();
        assert_eq!(out.status.code(), Some(125), "{args:?}: {}", text(&out));
        assert!(
            String::from_utf8_lossy(&out.stderr).contains(says),
            "{}",
            text(&out)
        );
    }
}

#[test]
fn restart_quarantine_errors_say_what_to_do_on_the_command_line() {
    let mut cluster = Cluster::start(3);
    let nodes = cluster.urls().join(",");
    let quick = || {
        run(&nodes, &["-r", "q", "-t", "1s", "--", "true"])
            .output()
            .unwrap()
    };
    // A first run marks every node (a brand-new cluster is trusted at once).
    let out = quick();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    // Two of three restart empty: no quorum can count on them for a maximum TTL (60 s).
    cluster.servers[0].restart();
    cluster.servers[1].restart();
    let mut err = String::new();
    assert!(
        eventually(Duration::from_secs(20), || {
            let out = quick();
            assert_eq!(
                out.status.code(),
                Some(122),
                "never granted: {}",
                text(&out)
            );
            err = String::from_utf8_lossy(&out.stderr).into_owned();
            err.contains("restart quarantine")
        }),
        "{err}"
    );
    for says in [
        "hint: 2 of 3 node(s) (node 0, node 1) restarted or lost their data",
        "(--max-ttl)",
        "`redlock admit -n … 0 1` trusts them now",
        "wait it out within one run, with --wait 6", // 61s, or 60s if a second went by
        "Pass --no-quarantine only if these nodes persist every write (appendfsync always)",
    ] {
        assert!(err.contains(says), "wanted {says:?} in {err}");
    }
    assert!(!err.contains("Config::"), "{err}");
    // The advice works: waiting it out in one run (a short maximum TTL keeps this short)...
    let out = run(
        &nodes,
        &[
            "-r",
            "q",
            "-t",
            "1s",
            "--max-ttl",
            "2s",
            "-w",
            "30s",
            "--",
            "true",
        ],
    )
    .output()
    .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    // ...after which every run trusts the nodes again.
    let out = quick();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    // And --no-quarantine counts restarted nodes at once.
    cluster.servers[0].restart();
    cluster.servers[1].restart();
    let out = run(
        &nodes,
        &["-r", "q", "-t", "1s", "--no-quarantine", "--", "true"],
    )
    .output()
    .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
}

#[test]
fn metrics_are_served_over_http_while_the_command_runs() {
    let cluster = Cluster::start(3);
    let nodes = cluster.urls().join(",");
    // The command scrapes its own supervisor: port 0 picks a free port (no race with other
    // tests over a port chosen in advance), and REDLOCK_METRICS_ADDR says which.
    let scrape = r#"
import os, urllib.request, urllib.error
base = "http://" + os.environ["REDLOCK_METRICS_ADDR"]
r = urllib.request.urlopen(base + "/metrics", timeout=20)
print("content-type:", r.headers["Content-Type"])
print(r.read().decode())
try:
    urllib.request.urlopen(base + "/elsewhere", timeout=20)
except urllib.error.HTTPError as e:
    print("elsewhere:", e.code)
"#;
    let out = run(
        &nodes,
        &[
            "-r",
            "scraped",
            "-t",
            "5s",
            "--metrics-listen",
            "127.0.0.1:0",
            "--",
        ],
    )
    .args(["python3", "-c", scrape])
    .output()
    .unwrap();
    assert!(out.status.success(), "{}", text(&out));
    let body = String::from_utf8_lossy(&out.stdout);
    for line in [
        "content-type: text/plain; version=0.0.4; charset=utf-8",
        "redlock_acquire_total{result=\"granted\"} 1",
        "redlock_acquire_total{result=\"not_acquired\"} 0",
        "# TYPE redlock_acquire_wait_seconds histogram",
        "elsewhere: 404",
    ] {
        assert!(body.lines().any(|l| l == line), "{line}: {}", text(&out));
    }
    // The flag is named when it cannot be honoured: a port in use, an address that is none.
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let taken = taken.local_addr().unwrap().to_string();
    for (listen, says) in [
        (
            taken.as_str(),
            format!("--metrics-listen {taken}: cannot listen"),
        ),
        ("nope", "--metrics-listen: expected HOST:PORT".to_string()),
    ] {
        let out = run(
            &nodes,
            &[
                "-r",
                "scraped",
                "-t",
                "5s",
                "--metrics-listen",
                listen,
                "--",
                "true",
            ],
        )
        .output()
        .unwrap();
        assert_eq!(out.status.code(), Some(125), "{}", text(&out));
        assert!(
            String::from_utf8_lossy(&out.stderr).contains(&says),
            "{says}: {}",
            text(&out)
        );
    }
    // Nothing was locked by the refused runs.
    assert_eq!(cluster.present(b"redlock:scraped"), 0);
}
