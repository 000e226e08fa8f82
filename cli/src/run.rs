//! `redlock run`: hold a lock while a command runs.

use std::ffi::OsString;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::process::Command;
use std::sync::atomic::{AtomicI32, Ordering};
use std::time::Duration;

use crossbeam::channel::{self, RecvTimeoutError};
use redlock::{Cancel, Error, Lease, LockOptions, MAX_RESOURCE_LEN, Redlock, RenewOptions, Wait};

use crate::args::{
    Opt, duration_arg, duration_or_env, env, exit_status, next, show_ms, string, unexpected,
};
use crate::group::{
    FORWARDED, GroupWatch, become_subreaper, group_alive, signal_child, stop_group,
};
use crate::{EXIT_ERROR, NODE_OPTS_HELP, NODE_SHORTS, NodeOpts, describe, inspect, metrics};

/// Exit status: too many nodes failed for a quorum.
pub const EXIT_UNAVAILABLE: u8 = 122;
/// Exit status: the lock was held elsewhere until `--wait` ran out (unless `-E` says otherwise).
pub const EXIT_NOT_ACQUIRED: u8 = 123;
/// Exit status: the lease was lost while the command ran; the command was terminated.
pub const EXIT_LOST: u8 = 124;

/// `--ttl` when neither the flag nor `REDLOCK_TTL` gives one: 30 s. The lock is renewed every
/// TTL/3 while the command runs, so the TTL bounds only how long a crashed holder blocks
/// others.
const DEFAULT_TTL_MS: u64 = 30_000;

/// This command's `--help`.
pub const HELP: &str = "\
redlock run — run a command while holding a distributed lock

usage: redlock run -n URL[,URL…] -r NAME [-t TTL] [options] -- CMD [ARGS…]
e.g.   redlock run -n 10.0.0.1:6379,10.0.0.2:6379,10.0.0.3:6379 -r nightly -t 10s -- ./job

Acquires NAME on a quorum of the nodes (waiting up to --wait), runs CMD while the lock is
renewed every TTL/3, and releases it when CMD and every process left in its process group
have exited (a background child keeps the lock, as it keeps a flock; the status is CMD's).
CMD runs in its own process group; signals to redlock (INT, TERM, HUP, QUIT, USR1, USR2)
are forwarded to that group. A signal while redlock still waits for the lock ends the wait
at once, with nothing held and status 128 + N. If the lease is lost (a quorum of nodes
cannot confirm a renewal in time, or --max-hold is reached), the group gets SIGTERM, then
SIGKILL after --grace.

If redlock itself dies, even by SIGKILL, CMD does not outlive it (its lock would expire
under it): a watcher process redlock forks sends CMD's process group SIGKILL, and on Linux
the kernel also sends CMD itself SIGKILL (PR_SET_PDEATHSIG). Not covered: processes that CMD
moved out of its process group (setsid, daemons); and if redlock and its watcher are killed
together (say a SIGKILL to redlock's own process group), only CMD itself is stopped, and
only on Linux: other systems have no parent-death signal.

options (DURATION: 500ms, 10s, 1.5s, 2m, 1h or 1m30s; a number needs a unit, except 0):
  -r, --resource NAME          the lock's name (required; never read from the environment)
  -t, --ttl DURATION           the lock's TTL, at most --max-ttl (default 30s;
                               renewed every TTL/3 while CMD runs)              [REDLOCK_TTL]
  -w, --wait DURATION          if the lock is held, retry for up to this long (default 0:
                               one try)                                        [REDLOCK_WAIT]
  -f, --fenced                 take a fencing token, passed to CMD as REDLOCK_FENCING_TOKEN
  -s, --shared                 a shared (read) lock, as flock -s: other shared runs of the
                               resource run beside this one, exclusive ones wait
  -E, --conflict-exit-code N   the exit status when the lock is held elsewhere (default 123)
                                                                 [REDLOCK_CONFLICT_EXIT_CODE]
      --max-hold DURATION      stop renewing after this long and treat the lease as lost
                               (default 1h)                                [REDLOCK_MAX_HOLD]
      --grace DURATION         after SIGTERM on a lost lease, wait this long before SIGKILL
                               (default 5s)                                   [REDLOCK_GRACE]
      --label TEXT             who holds the lock, for `redlock inspect -r NAME` (default
                               HOST:PID of this redlock; '' for none)         [REDLOCK_LABEL]
      --metrics-listen ADDR    while running, serve the lock's Prometheus metrics over HTTP
                               at http://ADDR/metrics (ADDR: 127.0.0.1:9464; port 0 picks a
                               free port, given to CMD as REDLOCK_METRICS_ADDR)
NODE_OPTS
  -h, --help                   this help

environment: an option left off the command line is read from the [VARIABLE] shown beside
it (the command line wins; an empty variable counts as unset; a bad value is an error that
names the variable). Never read from the environment: the resource (CMD's environment has
REDLOCK_RESOURCE, and a `redlock run` inside CMD must not take the outer lock's name by
accident), --fenced, --shared, --no-quarantine (a safety check is dropped only where it is
written) and --metrics-listen (a nested run would fight over the port).

CMD's environment also has REDLOCK_RESOURCE, REDLOCK_TTL_MS, REDLOCK_VALIDITY_MS (the
validity left when CMD started), with --fenced REDLOCK_FENCING_TOKEN, and with
--metrics-listen REDLOCK_METRICS_ADDR (the address bound). redlock reads none of these.

exit status:
  CMD's own status (128 + N when it was killed by signal N)
  122  unavailable: too many nodes failed (or refused the credentials) for a quorum
  123  not acquired: held elsewhere until --wait ran out (the status -E sets)
  124  lease lost while CMD ran; CMD was terminated
  125  usage error or other failure of redlock itself
  126  CMD could not be executed
  127  CMD not found";

/// Short options of `redlock run`, beside [`NODE_SHORTS`].
const SHORTS: [(char, &str); 8] = [
    ('n', "nodes"),
    ('r', "resource"),
    ('t', "ttl"),
    ('w', "wait"),
    ('f', "fenced"),
    ('s', "shared"),
    ('E', "conflict-exit-code"),
    ('h', "help"),
];

/// `redlock run`'s options, after the command line and the environment.
struct Opts {
    nodes: NodeOpts,
    resource: String,
    /// Milliseconds, here and below.
    ttl: u64,
    wait: u64,
    max_hold: u64,
    fenced: bool,
    shared: bool,
    grace: u64,
    conflict_exit_code: u8,
    metrics_listen: Option<String>,
    label: String,
    cmd: Vec<OsString>,
}

/// The options as given on the command line, before the environment fills the gaps.
#[derive(Default)]
struct Flags {
    nodes: NodeOpts,
    resource: Option<String>,
    ttl: Option<u64>,
    wait: Option<u64>,
    max_hold: Option<u64>,
    fenced: bool,
    shared: bool,
    grace: Option<u64>,
    conflict_exit_code: Option<u8>,
    metrics_listen: Option<String>,
    label: Option<String>,
    cmd: Vec<OsString>,
}

fn parse(args: Vec<OsString>) -> Result<Option<Opts>, String> {
    debug_assert!(NODE_SHORTS.iter().all(|s| SHORTS.contains(s)));
    let mut f = Flags::default();
    let mut p = lexopt::Parser::from_args(args);
    while let Some(arg) = next(&mut p, &SHORTS)? {
        if let Opt::Long(name) = &arg
            && f.nodes.take(name, &mut p)?
        {
            continue;
        }
        match &arg {
            Opt::Long(n) => match n.as_str() {
                "resource" => f.resource = Some(string(&mut p, "--resource")?),
                "ttl" => f.ttl = Some(duration_arg(&mut p, "--ttl")?),
                "wait" => f.wait = Some(duration_arg(&mut p, "--wait")?),
                "max-hold" => f.max_hold = Some(duration_arg(&mut p, "--max-hold")?),
                "grace" => f.grace = Some(duration_arg(&mut p, "--grace")?),
                "fenced" => f.fenced = true,
                "shared" => f.shared = true,
                "conflict-exit-code" => {
                    let v = string(&mut p, "--conflict-exit-code")?;
                    f.conflict_exit_code = Some(exit_status("--conflict-exit-code", &v)?);
                }
                "metrics-listen" => {
                    f.metrics_listen = Some(string(&mut p, "--metrics-listen")?);
                }
                "label" => f.label = Some(string(&mut p, "--label")?),
                "help" => return Ok(None),
                _ => return Err(unexpected(&arg)),
            },
            Opt::Value(v) => {
                f.cmd.push(v.clone());
                f.cmd.extend(p.raw_args().map_err(|e| e.to_string())?);
            }
            other => return Err(unexpected(other)),
        }
    }
    resolve(f).map(Some)
}

/// The library's own checks, made here so that the message names the flag: a TTL must
/// outlast its clock-drift allowance (2 ms + 1 %) and stay within the maximum TTL, and a
/// resource name must fit.
fn check_lock(resource: &str, ttl: u64, max_ttl: u64) -> Result<(), String> {
    if ttl < 3 {
        return Err(format!(
            "--ttl must be at least 3ms (it must outlast its clock-drift allowance of 2ms + \
             1 %), got {}",
            show_ms(ttl)
        ));
    }
    if resource.is_empty() {
        return Err("--resource must not be empty".into());
    }
    if resource.len() > MAX_RESOURCE_LEN {
        return Err(format!(
            "--resource is {} bytes long; the limit is {MAX_RESOURCE_LEN}",
            resource.len()
        ));
    }
    if ttl > max_ttl {
        return Err(format!(
            "--ttl {} is above the maximum TTL, {}: raise the maximum with --max-ttl (or \
             REDLOCK_MAX_TTL), or keep the TTL short: the lock is renewed every TTL/3 while \
             the command runs",
            show_ms(ttl),
            show_ms(max_ttl)
        ));
    }
    Ok(())
}

/// Fills the options the command line left out from the environment, applies the defaults
/// and checks the values, naming the flag (or the variable) at fault.
fn resolve(mut f: Flags) -> Result<Opts, String> {
    let Some(resource) = f.resource else {
        let mut e = String::from("--resource is required");
        if std::env::var_os("REDLOCK_RESOURCE").is_some() {
            e.push_str(
                " (REDLOCK_RESOURCE is not read: it names the lock of an outer `redlock run`; \
                 pass -r \"$REDLOCK_RESOURCE\" to mean it)",
            );
        }
        return Err(e);
    };
    let ttl = duration_or_env(f.ttl, "REDLOCK_TTL")?.unwrap_or(DEFAULT_TTL_MS);
    f.nodes.resolve()?;
    if f.cmd.is_empty() {
        return Err("no command given: put it after `--`".into());
    }
    check_lock(&resource, ttl, f.nodes.max_ttl_ms())?;
    let max_hold = duration_or_env(f.max_hold, "REDLOCK_MAX_HOLD")?.unwrap_or(3_600_000);
    if max_hold == 0 {
        return Err("--max-hold must be more than 0".into());
    }
    let conflict_exit_code = match f.conflict_exit_code {
        Some(c) => c,
        None => match env("REDLOCK_CONFLICT_EXIT_CODE")? {
            Some(v) => exit_status("environment variable REDLOCK_CONFLICT_EXIT_CODE", &v)?,
            None => EXIT_NOT_ACQUIRED,
        },
    };
    Ok(Opts {
        nodes: f.nodes,
        resource,
        ttl,
        wait: duration_or_env(f.wait, "REDLOCK_WAIT")?.unwrap_or(0),
        max_hold,
        fenced: f.fenced,
        shared: f.shared,
        grace: duration_or_env(f.grace, "REDLOCK_GRACE")?.unwrap_or(5000),
        conflict_exit_code,
        metrics_listen: f.metrics_listen,
        label: label(f.label)?,
        cmd: f.cmd,
    })
}

/// The holder label: `--label`, else `REDLOCK_LABEL`, else `HOST:PID` of this process; the
/// empty string for none. Checked here so that the error names the flag.
pub(crate) fn label(flag: Option<String>) -> Result<String, String> {
    let (l, name) = match flag {
        Some(l) => (l, "--label"),
        None => match env("REDLOCK_LABEL")? {
            Some(l) => (l, "REDLOCK_LABEL"),
            None => (
                format!("{}:{}", hostname(), std::process::id()),
                "the default label",
            ),
        },
    };
    redlock::Config::check_label(&l).map_err(|e| format!("{name}: {e}"))?;
    Ok(l)
}

/// This machine's host name ("localhost" if it cannot be read).
fn hostname() -> String {
    let mut buf = [0u8; 256];
    // SAFETY: gethostname(2) writes at most `buf.len()` bytes into our buffer.
    let rc = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) };
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    match std::str::from_utf8(&buf[..end]) {
        Ok(h) if rc == 0 && !h.is_empty() => h.to_string(),
        _ => "localhost".to_string(),
    }
}

/// The signal to forward to the command, and the command's PID once it runs.
static CHILD: AtomicI32 = AtomicI32::new(0);
pub(crate) static PENDING: AtomicI32 = AtomicI32::new(0);
/// The write end of the pipe that wakes [`cancel_on_signal`]'s thread (-1: none yet).
static WAKE: AtomicI32 = AtomicI32::new(-1);

extern "C" fn forward(sig: libc::c_int) {
    // Only async-signal-safe work here: atomics, kill(2) and write(2).
    let pid = CHILD.load(Ordering::SeqCst);
    if pid > 0 {
        // SAFETY: kill(2) is async-signal-safe; `-pid` is our child's process group.
        unsafe { libc::kill(-pid, sig) };
    } else {
        PENDING.store(sig, Ordering::SeqCst);
        let fd = WAKE.load(Ordering::SeqCst);
        if fd >= 0 {
            // SAFETY: write(2) is async-signal-safe; one byte from a static buffer to the
            // pipe's write end, which stays open for the life of the process.
            unsafe { libc::write(fd, b"s".as_ptr().cast(), 1) };
        }
    }
}

/// A handle that fires when one of the forwarded signals arrives before the command runs:
/// the acquisition waiting under it stops at once (the library's [`Cancel`], which leaves
/// nothing held). The handler may only write(2), so it writes a byte to a pipe, and a thread
/// that reads the pipe fires the handle. `None` if the pipe cannot be made (then a signal
/// still ends the run, once the acquisition returns).
pub(crate) fn cancel_on_signal() -> Option<Cancel> {
    use std::io::Read;
    use std::os::fd::{IntoRawFd, OwnedFd};
    let (mut read, write) = std::io::pipe().ok()?;
    // Never closed: the handler may write to it until the process exits.
    WAKE.store(OwnedFd::from(write).into_raw_fd(), Ordering::SeqCst);
    let cancel = Cancel::new();
    let fire = cancel.clone();
    std::thread::spawn(move || {
        let mut byte = [0u8; 1];
        if matches!(read.read(&mut byte), Ok(1)) {
            fire.fire();
        }
    });
    Some(cancel)
}

pub(crate) fn install_forwarding() {
    for sig in FORWARDED {
        // SAFETY: a zeroed sigaction is valid; the handler only touches atomics and calls
        // kill(2); sigaction(2) is given valid pointers.
        unsafe {
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = forward as *const () as usize;
            sa.sa_flags = libc::SA_RESTART;
            libc::sigemptyset(&mut sa.sa_mask);
            libc::sigaction(sig, &sa, std::ptr::null_mut());
        }
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
            eprintln!("redlock run: {e} (see `redlock run --help`)");
            return EXIT_ERROR;
        }
    };
    match run(o) {
        Ok(code) => code,
        Err((code, msg)) => {
            eprintln!("redlock run: {msg}");
            code
        }
    }
}

fn run(o: Opts) -> Result<u8, (u8, String)> {
    // First: a signal from here on ends the run with nothing held, however early it comes.
    let cancel = cancel_on_signal();
    install_forwarding();
    let config = o.nodes.config().label(o.label.clone());
    let mgr = Redlock::new(config).map_err(|e| (EXIT_ERROR, describe(&e)))?;
    let resource = o.resource.clone();
    let ttl = Duration::from_millis(o.ttl);
    // Listening before the lock is taken: a port in use fails at once, and the wait for the
    // lock is observable too.
    let metrics = match &o.metrics_listen {
        Some(listen) => {
            let addr = metrics::serve(listen, mgr.clone()).map_err(|e| (EXIT_ERROR, e))?;
            if addr.port() != 0 && listen.ends_with(":0") {
                eprintln!("redlock run: metrics at http://{addr}/metrics");
            }
            Some(addr)
        }
        None => None,
    };
    let (lease, lost_rx) = hold(&mgr, &o, &resource, ttl, cancel)?;
    let pending = PENDING.swap(0, Ordering::SeqCst);
    if pending != 0 {
        let _ = lease.unlock();
        return Ok(128 + pending as u8);
    }
    become_subreaper();
    let child = spawn(&o, &lease, &resource, ttl, metrics)?;
    Ok(supervise(child, &lease, &resource, lost_rx, o.grace))
}

/// Acquires the lock and starts its renewal; the receiver hears of a lost lease.
fn hold(
    mgr: &Redlock,
    o: &Opts,
    resource: &str,
    ttl: Duration,
    cancel: Option<Cancel>,
) -> Result<(Lease, channel::Receiver<()>), (u8, String)> {
    let wait = match o.wait {
        0 => Wait::No,
        ms => Wait::For(Duration::from_millis(ms)),
    };
    let mut opts = LockOptions::new()
        .wait(wait)
        .fenced(o.fenced)
        .shared(o.shared);
    if let Some(c) = cancel {
        opts = opts.cancel(c);
    }
    let acquired = mgr.acquire(resource, ttl, &opts);
    let lease = acquired.map_err(|e| {
        let sig = PENDING.load(Ordering::SeqCst);
        if let (Error::Cancelled, 1..) = (&e, sig) {
            let why = format!("signal {sig} while waiting for the lock; nothing is held");
            return (128u8.wrapping_add(sig as u8), why);
        }
        let code = match e {
            Error::NotAcquired(_) => o.conflict_exit_code,
            Error::Unavailable(_) | Error::Auth(_) => EXIT_UNAVAILABLE,
            _ => EXIT_ERROR,
        };
        let mut msg = describe(&e);
        if let Error::NotAcquired(_) = e {
            msg.push_str(&held_by(mgr, resource));
        }
        (code, msg)
    })?;
    let (lost_tx, lost_rx) = channel::bounded::<()>(1);
    let renewal = RenewOptions::new()
        .max_hold(Duration::from_millis(o.max_hold))
        .on_lost(move |_| {
            let _ = lost_tx.try_send(());
        });
    if let Err(e) = lease.auto_renew(renewal) {
        let _ = lease.unlock();
        return Err((EXIT_ERROR, describe(&e)));
    }
    Ok((lease, lost_rx))
}

/// Who holds `resource` on a quorum, as `inspect -r` would say, for a refusal's message
/// (empty when no one does, or the nodes cannot say).
fn held_by(mgr: &Redlock, resource: &str) -> String {
    let Some(h) = mgr.holders(resource).ok().and_then(|seen| seen.holder()) else {
        return String::new();
    };
    let left = h.ttl.map_or_else(
        || "it has no TTL".to_string(),
        |t| format!("free in at most {}ms unless renewed", t.as_millis()),
    );
    format!(
        "\nheld by {} ({}), for {}; {left} (see `redlock inspect -r {resource}`)",
        inspect::who(&h),
        inspect::kind(h.kind),
        inspect::ms(h.held_for),
    )
}

/// Starts the command in a process group of its own, with the lock's environment.
fn spawn(
    o: &Opts,
    lease: &Lease,
    resource: &str,
    ttl: Duration,
    metrics: Option<std::net::SocketAddr>,
) -> Result<std::process::Child, (u8, String)> {
    let mut env = vec![
        ("REDLOCK_RESOURCE", resource.to_string()),
        ("REDLOCK_TTL_MS", ttl.as_millis().to_string()),
        (
            "REDLOCK_VALIDITY_MS",
            lease.validity().as_millis().to_string(),
        ),
    ];
    if let Some(t) = lease.fencing_token() {
        env.push(("REDLOCK_FENCING_TOKEN", t.to_string()));
    }
    if let Some(addr) = metrics {
        env.push(("REDLOCK_METRICS_ADDR", addr.to_string()));
    }
    spawn_held(&o.cmd, &env, lease)
}

/// Starts `cmd` in a process group of its own with `env` added, dying with this process, while
/// `lease` is held (it is released if the command cannot start). Shared with `redlock elect`.
pub(crate) fn spawn_held(
    cmd_line: &[OsString],
    env: &[(&str, String)],
    lease: &Lease,
) -> Result<std::process::Child, (u8, String)> {
    let mut cmd = Command::new(&cmd_line[0]);
    // Its own process group, so that a lost lease stops everything the command started, and
    // a Ctrl-C at a terminal reaches it once (forwarded by us), not twice.
    cmd.process_group(0).args(&cmd_line[1..]);
    for (k, v) in env {
        cmd.env(k, v);
    }
    die_with_supervisor(&mut cmd);
    // `spawn` forks on this thread, the main thread, which lives until the process exits:
    // PR_SET_PDEATHSIG fires when the *thread* that forked the child exits, not the process,
    // so spawning from a short-lived thread would kill the command early. Keep it here.
    let child = cmd.spawn().map_err(|e| {
        let _ = lease.unlock();
        let code = if e.kind() == std::io::ErrorKind::NotFound {
            127
        } else {
            126
        };
        (
            code,
            format!("cannot run {:?}: {e}", cmd_line[0].to_string_lossy()),
        )
    })?;
    let pid = child.id() as i32;
    CHILD.store(pid, Ordering::SeqCst);
    let pending = PENDING.swap(0, Ordering::SeqCst);
    if pending != 0 {
        signal_child(pid, pending);
    }
    Ok(child)
}

/// Makes the command die with `redlock` on Linux: the kernel sends it SIGKILL when the thread
/// that forked it exits (PR_SET_PDEATHSIG), however `redlock` ends (SIGKILL and OOM kills
/// included). Only the command itself gets that signal; [`GroupWatch`] handles its group.
#[cfg(any(target_os = "linux", target_os = "android"))]
fn die_with_supervisor(cmd: &mut Command) {
    let supervisor = std::process::id() as libc::pid_t;
    // SAFETY: the closure runs in the forked child before exec and calls only
    // async-signal-safe functions (prctl, getppid, _exit); it allocates nothing.
    unsafe {
        cmd.pre_exec(move || {
            if libc::prctl(
                libc::PR_SET_PDEATHSIG,
                libc::SIGKILL as libc::c_ulong,
                0,
                0,
                0,
            ) != 0
            {
                return Err(std::io::Error::last_os_error());
            }
            // The supervisor may have died between fork and prctl, before the signal was
            // armed: then we have been re-parented already and must not run the command.
            if libc::getppid() != supervisor {
                libc::_exit(EXIT_LOST as libc::c_int);
            }
            Ok(())
        })
    };
}

/// Elsewhere there is no parent-death signal: [`GroupWatch`] alone kills the command.
#[cfg(not(any(target_os = "linux", target_os = "android")))]
fn die_with_supervisor(_cmd: &mut Command) {}

/// Waits for the command to exit, or for the lease to be lost (then terminates the command);
/// releases the lock either way. Returns the exit status of `run`.
pub(crate) fn supervise(
    mut child: std::process::Child,
    lease: &Lease,
    resource: &str,
    lost_rx: channel::Receiver<()>,
    grace: u64,
) -> u8 {
    let pid = child.id() as i32;
    // The command leads its own process group (process_group(0)): its PGID is its PID.
    let watch = GroupWatch::start(pid);
    if watch.is_none() {
        eprintln!(
            "redlock run: warning: cannot start the watcher that kills the command's process \
             group should redlock be killed"
        );
    }
    let (exit_tx, exit_rx) = channel::bounded(1);
    std::thread::spawn(move || {
        let _ = exit_tx.send(child.wait());
    });
    let status = channel::select! {
        recv(exit_rx) -> s => s.ok(),
        recv(lost_rx) -> _ => None,
    };
    if let Some(status) = status {
        // The command has exited; the lock stays held until its process group is gone too
        // (its background children keep the lock, as they keep a flock).
        let kept = wait_for_group(pid, &lost_rx, resource, lease, grace);
        CHILD.store(0, Ordering::SeqCst);
        if let Some(w) = watch {
            w.finish();
        }
        if !kept {
            let _ = lease.unlock();
            return EXIT_LOST;
        }
        let Ok(status) = status else {
            eprintln!("redlock run: waiting for the command failed");
            let _ = lease.unlock();
            return EXIT_ERROR;
        };
        if let Err(e) = lease.unlock() {
            eprintln!("redlock run: unlock after the command exited: {e}");
        }
        return exit_code(status);
    }
    report_lost(lease, resource);
    signal_child(pid, libc::SIGTERM);
    if let Err(RecvTimeoutError::Timeout) = exit_rx.recv_timeout(Duration::from_millis(grace)) {
        eprintln!("redlock run: the command ignored SIGTERM for {grace} ms; sending SIGKILL");
        signal_child(pid, libc::SIGKILL);
        let _ = exit_rx.recv();
    }
    // What the command left in its group goes too.
    stop_group(pid, grace);
    CHILD.store(0, Ordering::SeqCst);
    if let Some(w) = watch {
        w.finish();
    }
    // Clean up whatever keys are still ours (never another owner's).
    let _ = lease.unlock();
    EXIT_LOST
}

fn report_lost(lease: &Lease, resource: &str) {
    let why = lease
        .lost_reason()
        .map(|r| r.to_string())
        .unwrap_or_else(|| "lost".into());
    eprintln!("redlock run: lease on {resource:?} lost ({why}); terminating the command");
}

/// After the command itself exited: waits until its process group is empty, renewing the
/// lock meanwhile. False when the lease was lost first: the group was then stopped.
fn wait_for_group(
    pgid: i32,
    lost_rx: &channel::Receiver<()>,
    resource: &str,
    lease: &Lease,
    grace: u64,
) -> bool {
    while group_alive(pgid) {
        match lost_rx.recv_timeout(Duration::from_millis(20)) {
            Ok(()) => {
                report_lost(lease, resource);
                stop_group(pgid, grace);
                return false;
            }
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => std::thread::sleep(Duration::from_millis(20)),
        }
    }
    true
}

fn exit_code(status: std::process::ExitStatus) -> u8 {
    match (status.code(), status.signal()) {
        (Some(c), _) => c as u8,
        (None, Some(sig)) => 128u8.wrapping_add(sig as u8),
        _ => EXIT_ERROR,
    }
}
