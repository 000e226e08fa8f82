//! `redlock elect`: run a command while this process leads an election, or print each leader
//! as it changes (`--observe`).

use std::ffi::OsString;
use std::io::Write;
use std::sync::atomic::Ordering;
use std::time::Duration;

use crossbeam::channel;
use redlock::{Error, Leader, LockOptions, Redlock, RenewOptions, Wait};

use crate::args::{Opt, duration_arg, duration_or_env, next, string, unexpected};
use crate::group::become_subreaper;
use crate::run::{
    EXIT_NOT_ACQUIRED, EXIT_UNAVAILABLE, PENDING, cancel_on_signal, install_forwarding, label,
    spawn_held, supervise,
};
use crate::{EXIT_ERROR, NODE_OPTS_HELP, NODE_SHORTS, NodeOpts, describe};

/// `--ttl` when neither the flag nor `REDLOCK_TTL` gives one: 10 s. The leadership is renewed
/// every TTL/3, so the TTL bounds how long a crashed leader keeps the others waiting.
const DEFAULT_TTL_MS: u64 = 10_000;

/// This command's `--help`.
pub const HELP: &str = "\
redlock elect — run a command while this process leads an election, or watch the leaders

usage: redlock elect -n URL[,URL…] -r NAME [-v VALUE] [-t TTL] [options] -- CMD [ARGS…]
       redlock elect -n URL[,URL…] -r NAME --observe
e.g.   redlock elect -n 10.0.0.1:6379,10.0.0.2:6379,10.0.0.3:6379 -r cron -v web-1 -- ./cron

Campaigns in election NAME with VALUE until this process leads (or --wait runs out), then
runs CMD while the leadership is renewed every TTL/3, and resigns when CMD and its process
group have exited; another candidate then leads at once. If the leadership is lost (a quorum
of nodes cannot confirm a renewal in time), CMD's process group gets SIGTERM, then SIGKILL
after --grace; the loss is noticed a margin before the leadership's validity ends (TTL/20,
at least 2ms, at most 250ms), so CMD should stop acting as leader when it gets SIGTERM.
Signals, process groups and the death of redlock itself are handled as `redlock run` handles
them.

With --observe, prints one line per leader, the current one first, then each new one as it
is elected (woken by the nodes' announcements, not by polling), until interrupted:
  term=TERM value=VALUE validity_ms=MS

options (DURATION: 500ms, 10s, 1.5s, 2m, 1h or 1m30s; a number needs a unit, except 0):
  -r, --resource NAME          the election's name (required; never read from the
                               environment)
  -v, --value VALUE            what this candidate announces as leader, such as its address
                               (default: the label)
  -t, --ttl DURATION           the leadership's TTL, at most --max-ttl (default 10s)
                                                                                [REDLOCK_TTL]
  -w, --wait DURATION          give up campaigning after this long (default: campaign until
                               leading)                                        [REDLOCK_WAIT]
      --observe                print each leader as it changes instead of campaigning
      --grace DURATION         after SIGTERM on a lost leadership, wait this long before
                               SIGKILL (default 5s)                           [REDLOCK_GRACE]
      --label TEXT             who leads, for `redlock inspect` (default HOST:PID of this
                               redlock)                                       [REDLOCK_LABEL]
NODE_OPTS
  -h, --help                   this help

CMD's environment has REDLOCK_ELECTION (NAME), REDLOCK_TERM and REDLOCK_FENCING_TOKEN (the
term: pass it to every store CMD writes, which should refuse a term below the highest it has
seen), REDLOCK_TTL_MS and REDLOCK_VALIDITY_MS.

exit status:
  CMD's own status (128 + N when it was killed by signal N)
  122  unavailable: too many nodes failed (or refused the credentials) for a quorum
  123  not leading when --wait ran out
  124  leadership lost while CMD ran; CMD was terminated
  125  usage error or other failure of redlock itself
  126  CMD could not be executed
  127  CMD not found";

/// Short options of `redlock elect`, beside [`NODE_SHORTS`].
const SHORTS: [(char, &str); 6] = [
    ('n', "nodes"),
    ('r', "resource"),
    ('v', "value"),
    ('t', "ttl"),
    ('w', "wait"),
    ('h', "help"),
];

/// `redlock elect`'s options.
#[derive(Default)]
struct Opts {
    nodes: NodeOpts,
    name: Option<String>,
    value: Option<String>,
    ttl: Option<u64>,
    wait: Option<u64>,
    observe: bool,
    grace: Option<u64>,
    label: Option<String>,
    cmd: Vec<OsString>,
}

fn parse(args: Vec<OsString>) -> Result<Option<Opts>, String> {
    debug_assert!(NODE_SHORTS.iter().all(|s| SHORTS.contains(s)));
    let mut o = Opts::default();
    let mut p = lexopt::Parser::from_args(args);
    while let Some(arg) = next(&mut p, &SHORTS)? {
        if let Opt::Long(name) = &arg
            && o.nodes.take(name, &mut p)?
        {
            continue;
        }
        match &arg {
            Opt::Long(n) => match n.as_str() {
                "resource" => o.name = Some(string(&mut p, "--resource")?),
                "value" => o.value = Some(string(&mut p, "--value")?),
                "ttl" => o.ttl = Some(duration_arg(&mut p, "--ttl")?),
                "wait" => o.wait = Some(duration_arg(&mut p, "--wait")?),
                "grace" => o.grace = Some(duration_arg(&mut p, "--grace")?),
                "label" => o.label = Some(string(&mut p, "--label")?),
                "observe" => o.observe = true,
                "help" => return Ok(None),
                _ => return Err(unexpected(&arg)),
            },
            Opt::Value(v) => {
                o.cmd.push(v.clone());
                o.cmd.extend(p.raw_args().map_err(|e| e.to_string())?);
            }
            other => return Err(unexpected(other)),
        }
    }
    o.nodes.resolve()?;
    match (&o.name, o.observe, o.cmd.is_empty()) {
        (None, _, _) => Err("--resource is required (the election's name)".into()),
        (_, true, false) => Err("--observe takes no command".into()),
        (_, false, true) => Err("no command given: put it after `--` (or use --observe)".into()),
        _ => Ok(Some(o)),
    }
}

pub fn main(args: Vec<OsString>) -> u8 {
    let o = match parse(args) {
        Ok(Some(o)) => o,
        Ok(None) => {
            println!("{}", HELP.replace("NODE_OPTS", NODE_OPTS_HELP));
            return 0;
        }
        Err(e) => {
            eprintln!("redlock elect: {e} (see `redlock elect --help`)");
            return EXIT_ERROR;
        }
    };
    let r = if o.observe { observe(&o) } else { lead(o) };
    match r {
        Ok(code) => code,
        Err((code, msg)) => {
            eprintln!("redlock elect: {msg}");
            code
        }
    }
}

/// The exit status and message for a failed campaign or read.
fn failed(e: &Error) -> (u8, String) {
    let code = match e {
        Error::NotAcquired(_) => EXIT_NOT_ACQUIRED,
        Error::Unavailable(_) | Error::Auth(_) => EXIT_UNAVAILABLE,
        _ => EXIT_ERROR,
    };
    (code, describe(e))
}

/// One leader as `--observe` prints it.
fn line(l: &Leader) -> String {
    format!(
        "term={} value={} validity_ms={}",
        l.term,
        String::from_utf8_lossy(&l.value),
        l.validity.as_millis()
    )
}

/// `--observe`: prints each leader, until killed.
fn observe(o: &Opts) -> Result<u8, (u8, String)> {
    let mgr = Redlock::new(o.nodes.config()).map_err(|e| (EXIT_ERROR, describe(&e)))?;
    let name = o.name.as_deref().unwrap_or_default();
    let mut observer = mgr.election(name).observe();
    loop {
        match observer.next_within(Duration::from_secs(3600)) {
            Ok(Some(l)) => {
                let mut out = std::io::stdout().lock();
                if writeln!(out, "{}", line(&l))
                    .and_then(|_| out.flush())
                    .is_err()
                {
                    return Ok(0); // the reader went away
                }
            }
            Ok(None) | Err(Error::Unavailable(_)) => {}
            Err(e) => return Err(failed(&e)),
        }
    }
}

/// Campaigns, then runs the command while leading.
fn lead(o: Opts) -> Result<u8, (u8, String)> {
    let cancel = cancel_on_signal();
    install_forwarding();
    let label = label(o.label.clone()).map_err(|e| (EXIT_ERROR, e))?;
    let config = o.nodes.config().label(label.clone());
    let mgr = Redlock::new(config).map_err(|e| (EXIT_ERROR, describe(&e)))?;
    let name = o.name.clone().unwrap_or_default();
    let ttl_ms = duration_or_env(o.ttl, "REDLOCK_TTL")
        .map_err(|e| (EXIT_ERROR, e))?
        .unwrap_or(DEFAULT_TTL_MS);
    let ttl = Duration::from_millis(ttl_ms);
    let wait = duration_or_env(o.wait, "REDLOCK_WAIT").map_err(|e| (EXIT_ERROR, e))?;
    let grace = duration_or_env(o.grace, "REDLOCK_GRACE")
        .map_err(|e| (EXIT_ERROR, e))?
        .unwrap_or(5000);
    let (lost_tx, lost_rx) = channel::bounded::<()>(1);
    let renewal = RenewOptions::new()
        .max_hold(Duration::from_secs(100 * 365 * 24 * 3600))
        .on_lost(move |_| {
            let _ = lost_tx.try_send(());
        });
    let mut opts = LockOptions::new().auto_renew(renewal);
    if let Some(ms) = wait {
        opts = opts.wait(Wait::For(Duration::from_millis(ms)));
    }
    if let Some(c) = cancel {
        opts = opts.cancel(c);
    }
    let value = o.value.clone().unwrap_or(label);
    let leadership = mgr
        .election(&name)
        .campaign(&value, ttl, &opts)
        .map_err(|e| {
            let sig = PENDING.load(Ordering::SeqCst);
            match (&e, sig) {
                (Error::Cancelled, 1..) => (
                    128u8.wrapping_add(sig as u8),
                    format!("signal {sig} while campaigning; not leading"),
                ),
                _ => failed(&e),
            }
        })?;
    let lease = leadership.into_lease();
    let pending = PENDING.swap(0, Ordering::SeqCst);
    if pending != 0 {
        let _ = lease.unlock();
        return Ok(128 + pending as u8);
    }
    become_subreaper();
    let term = lease.fencing_token().unwrap_or(0).to_string();
    let env = [
        ("REDLOCK_ELECTION", name.clone()),
        ("REDLOCK_TERM", term.clone()),
        ("REDLOCK_FENCING_TOKEN", term),
        ("REDLOCK_TTL_MS", ttl_ms.to_string()),
        (
            "REDLOCK_VALIDITY_MS",
            lease.validity().as_millis().to_string(),
        ),
    ];
    let child = spawn_held(&o.cmd, &env, &lease)?;
    Ok(supervise(child, &lease, &name, lost_rx, grace))
}
