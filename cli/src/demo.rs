//! `redlock demo`: three local nodes, a command run under the lock, a second client turned
//! away, and `inspect` while the lock is held and after. Every command is printed as a
//! complete, shell-quoted line and run exactly as printed (through `sh -c`), so that it can
//! be copied and run again.

use std::ffi::OsString;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::thread::JoinHandle;

use crate::EXIT_ERROR;
use crate::args::{Opt, next, string, unexpected};
use crate::local::{LocalNodes, server_program};

/// This command's `--help`.
pub const HELP: &str = "\
redlock demo — a first try of `redlock run` and `redlock inspect`

usage: redlock demo [-n URL[,URL…]]

Starts three local redis-servers (no persistence, on free loopback ports), runs a command
under a lock with `redlock run` while a second `redlock run` is turned away, shows
`redlock inspect` while the lock is held and after, and stops the servers. Each command is
printed in full and run exactly as printed, so it can be copied. Needs redis-server on the
PATH, unless -n names nodes of your own (they are left running, so the printed commands
work there after the demo; the lock is named demo-report).

options:
  -n, --nodes URL[,URL…]       use these nodes instead of starting three
  -h, --help                   this help";

/// The resource the demo locks.
const RESOURCE: &str = "demo-report";

pub fn main(args: Vec<OsString>) -> u8 {
    let mut nodes: Option<String> = None;
    let mut p = lexopt::Parser::from_args(args);
    let parsed: Result<bool, String> = (|| {
        while let Some(arg) = next(&mut p, &[('n', "nodes"), ('h', "help")])? {
            match &arg {
                Opt::Long(n) if n == "nodes" => nodes = Some(string(&mut p, "--nodes")?),
                Opt::Long(n) if n == "help" => return Ok(false),
                other => return Err(unexpected(other)),
            }
        }
        Ok(true)
    })();
    match parsed {
        Ok(true) => {}
        Ok(false) => {
            println!("{HELP}");
            return 0;
        }
        Err(e) => {
            eprintln!("redlock demo: {e} (see `redlock demo --help`)");
            return EXIT_ERROR;
        }
    }
    match demo(nodes) {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("redlock demo: {e}");
            EXIT_ERROR
        }
    }
}

/// One word for `sh`: left bare when it has no character the shell would interpret,
/// single-quoted otherwise (a `'` inside becomes `'\''`).
pub fn quote(word: &str) -> String {
    let plain = |b: u8| b.is_ascii_alphanumeric() || b"-_./:,=@%+".contains(&b);
    if !word.is_empty() && word.bytes().all(plain) {
        word.to_string()
    } else {
        format!("'{}'", word.replace('\'', r"'\''"))
    }
}

/// How to name this program in a printed command: `redlock` when that is what the PATH
/// finds, its full path otherwise (say `target/release/redlock` in a checkout).
fn program_name(me: &Path) -> String {
    let me_real = std::fs::canonicalize(me).ok();
    let on_path = std::env::var_os("PATH").and_then(|path| {
        std::env::split_paths(&path)
            .map(|d| d.join("redlock"))
            .find(|p| p.is_file())
    });
    match (on_path.and_then(|p| std::fs::canonicalize(p).ok()), me_real) {
        (Some(found), Some(me)) if found == me => "redlock".into(),
        _ => me.to_string_lossy().into_owned(),
    }
}

/// Prints `$ LINE` and returns the command that runs exactly LINE.
fn shell(program: &str, args: &[&str]) -> Command {
    let line = std::iter::once(quote(program))
        .chain(args.iter().map(|a| quote(a)))
        .collect::<Vec<_>>()
        .join(" ");
    println!("$ {line}");
    let _ = std::io::stdout().flush();
    let mut c = Command::new("sh");
    c.arg("-c").arg(&line);
    c
}

/// The nodes the demo uses: the user's, or three local ones it starts (and stops when the
/// returned handle is dropped).
fn nodes_for(own_nodes: Option<String>) -> Result<(String, Option<LocalNodes>), String> {
    if let Some(n) = own_nodes {
        return Ok((n, None));
    }
    if Command::new(server_program())
        .arg("--version")
        .stdout(Stdio::null())
        .output()
        .is_err()
    {
        return Err("redis-server not found on the PATH (apt-get install redis-server)".into());
    }
    println!("starting 3 local redis-server nodes...");
    let started = LocalNodes::start(3)?;
    Ok((started.urls().join(","), Some(started)))
}

/// Runs the first `redlock run`, which holds the lock for 2 s, and returns once its command
/// says it holds it; its output goes on through a thread of ours.
fn start_holder(rl: &str, nodes: &str) -> Result<(Child, JoinHandle<()>), String> {
    // The holder: its output comes through us, so we go on only once it holds the lock.
    let child_script = "echo \"  [child] holding $REDLOCK_RESOURCE, fencing token \
                        $REDLOCK_FENCING_TOKEN, $REDLOCK_VALIDITY_MS ms of validity\"; \
                        sleep 2; echo \"  [child] done\"";
    let mut holder = shell(
        rl,
        &[
            "run",
            "-n",
            nodes,
            "-r",
            RESOURCE,
            "-t",
            "2s",
            "-f",
            "--",
            "sh",
            "-c",
            child_script,
        ],
    );
    let mut holder = holder
        .stdout(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot run sh: {e}"))?;
    let mut lines = BufReader::new(holder.stdout.take().ok_or("no pipe from the holder")?).lines();
    // Until the child says it holds the lock (or the holder ends, having failed).
    for line in lines.by_ref() {
        let line = line.map_err(|e| e.to_string())?;
        println!("{line}");
        if line.contains("[child] holding") {
            break;
        }
    }
    let echo = std::thread::spawn(move || {
        for line in lines.map_while(Result::ok) {
            println!("{line}");
        }
    });

    Ok((holder, echo))
}

fn demo(own_nodes: Option<String>) -> Result<(), String> {
    let me: PathBuf =
        std::env::current_exe().map_err(|e| format!("cannot find this program: {e}"))?;
    let rl = program_name(&me);
    let (nodes, cluster) = nodes_for(own_nodes)?;
    println!("nodes: {nodes}");
    println!("(each command below is complete and runs exactly as printed)\n");

    let (mut holder, echo) = start_holder(&rl, &nodes)?;

    println!();
    let mut second = shell(
        &rl,
        &[
            "run",
            "-n",
            &nodes,
            "-r",
            RESOURCE,
            "-t",
            "2s",
            "--",
            "echo",
            "  [second] got it",
        ],
    );
    if let Ok(s) = second.status() {
        println!(
            "  -> exit status {} (123: not acquired, the lock is held)",
            s.code().unwrap_or(-1)
        );
    }

    println!("\n# while the lock is held:");
    let _ = shell(&rl, &["inspect", "-n", &nodes]).status();

    let status = holder.wait();
    let _ = echo.join();
    println!(
        "\nthe first run exited with {}; the lock was released\n",
        status.map(|s| s.code().unwrap_or(-1)).unwrap_or(-1)
    );

    let _ = shell(
        &rl,
        &[
            "run",
            "-n",
            &nodes,
            "-r",
            RESOURCE,
            "-t",
            "2s",
            "-w",
            "1s",
            "--",
            "echo",
            "  [second] got it now",
        ],
    )
    .status();

    println!("\n# after:");
    let _ = shell(&rl, &["inspect", "-n", &nodes]).status();
    if cluster.is_some() {
        println!("\nstopping the nodes");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::quote;

    #[test]
    fn words_are_quoted_for_sh() {
        assert_eq!(
            quote("redis://127.0.0.1:7001,x"),
            "redis://127.0.0.1:7001,x"
        );
        assert_eq!(quote("--ttl"), "--ttl");
        assert_eq!(quote(""), "''");
        assert_eq!(quote("a b"), "'a b'");
        assert_eq!(quote("$HOME"), "'$HOME'");
        assert_eq!(quote("it's"), r"'it'\''s'");
        assert_eq!(quote("~x"), "'~x'");
    }
}
