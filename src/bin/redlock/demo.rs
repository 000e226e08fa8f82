//! `redlock demo`: three local nodes, a command run under the lock, a second client turned
//! away, and `inspect` before, during and after.

use std::ffi::OsString;
use std::process::Command;
use std::time::Duration;

use crate::EXIT_ERROR;
use crate::local::{LocalNodes, server_program};

/// This command's `--help`.
pub const HELP: &str = "\
redlock demo — a first try: starts three local redis-servers (no persistence, on free
loopback ports), runs a command under a lock with `redlock run` while a second `redlock run`
is turned away, shows `redlock inspect` while the lock is held and after, and stops the
servers. Needs redis-server on the PATH.";

pub fn main(args: Vec<OsString>) -> u8 {
    if args
        .iter()
        .any(|a| a == "--help" || a == "-h" || a == "help")
    {
        println!("{HELP}");
        return 0;
    }
    if let Some(a) = args.first() {
        eprintln!(
            "redlock demo: unexpected argument {:?} (see `redlock demo --help`)",
            a.to_string_lossy()
        );
        return EXIT_ERROR;
    }
    match demo() {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("redlock demo: {e}");
            EXIT_ERROR
        }
    }
}

fn demo() -> Result<(), String> {
    if Command::new(server_program())
        .arg("--version")
        .output()
        .is_err()
    {
        return Err("redis-server not found on the PATH (apt-get install redis-server)".into());
    }
    let me = std::env::current_exe().map_err(|e| format!("cannot find this program: {e}"))?;
    println!("starting 3 local redis-server nodes...");
    let cluster = LocalNodes::start(3)?;
    let nodes = cluster.urls().join(",");
    println!("nodes: {nodes}\n");
    let common = ["--nodes", &nodes];
    let redlock = |args: &[&str]| {
        let mut c = Command::new(&me);
        c.args(args).args(common);
        c
    };

    println!("$ redlock run --resource report --ttl 2000 --fenced -- sh -c '…; sleep 2'");
    let mut holder = redlock(&["run"])
        .args(["--resource", "report", "--ttl", "2000", "--fenced", "--"])
        .args([
            "sh",
            "-c",
            "echo \"  [child] holding $REDLOCK_RESOURCE, fencing token \
             $REDLOCK_FENCING_TOKEN, $REDLOCK_VALIDITY_MS ms of validity\"; sleep 2; \
             echo '  [child] done'",
        ])
        .spawn()
        .map_err(|e| e.to_string())?;
    std::thread::sleep(Duration::from_millis(700));

    println!("\n$ redlock run --resource report --ttl 2000 -- echo 'second client'");
    let second = redlock(&["run"])
        .args(["--resource", "report", "--ttl", "2000", "--", "echo"])
        .arg("  [second] got it")
        .status();
    if let Ok(s) = second {
        println!(
            "  -> exit status {} (123: not acquired, the lock is held)",
            s.code().unwrap_or(-1)
        );
    }

    println!("\n$ redlock inspect   (while the lock is held)");
    let _ = redlock(&["inspect"]).status();

    let status = holder.wait();
    println!(
        "\nthe first run exited with {}; the lock was released",
        status.map(|s| s.code().unwrap_or(-1)).unwrap_or(-1)
    );

    println!("\n$ redlock run --resource report --ttl 2000 --wait 1000 -- echo …");
    let _ = redlock(&["run"])
        .args([
            "--resource",
            "report",
            "--ttl",
            "2000",
            "--wait",
            "1000",
            "--",
        ])
        .args(["echo", "  [second] got it now"])
        .status();

    println!("\n$ redlock inspect   (after)");
    let _ = redlock(&["inspect"]).status();
    println!("\nstopping the nodes");
    Ok(())
}
