//! `redlock inspect`: lock keys per node, and leaked ones, found with SCAN (never KEYS).

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::time::Duration;

use redlock::{Holder, HolderKind, Holders, KeyInfo, KeyKind, NodeHold, Redlock};

use crate::args::{Opt, next, string, unexpected};
use crate::{EXIT_ERROR, NODE_OPTS_HELP, NodeOpts};

fn show(bytes: &[u8]) -> String {
    bytes.escape_ascii().to_string()
}

/// This command's `--help`.
pub const HELP: &str = "\
redlock inspect — show lock keys on each node, and find leaked ones

usage: redlock inspect -n URL[,URL…] [-p PREFIX] [--max-ttl DURATION] [--fail-on-leak]
       redlock inspect -n URL[,URL…] -r NAME

Scans every node with SCAN (never KEYS) for lock keys (redlock:<resource>) whose resource
starts with PREFIX, and prints, per resource and node, whether the key is there, its
remaining TTL and a short form of the holder's token (a reentrant or shared lock's hash is
named as such; -r shows its holders). Keys with no TTL, or a TTL beyond the maximum TTL,
are listed as leaked: they would block their resource for good (or far too long). Then the
semaphores whose name starts with PREFIX, with the permits held on each node, and the fair
locks' queues, with the waiters queued on each node.

With -r NAME: who holds NAME. One read of its key on every node, showing per node whether it
is free, held or could not be asked, the holder's label (`redlock run --label`, HOST:PID by
default; a reentrant lock's owner id), how long it has been held and its TTL there, and the
holder a quorum agrees on. A snapshot: it can change as soon as it is printed.

options (DURATION: 500ms, 10s, 1.5s, 2m, 1h or 1m30s; a number needs a unit, except 0):
  -p, --prefix PREFIX          only resources starting with PREFIX (default: all)
  -r, --resource NAME          who holds NAME (exit status 0 held, 4 not held on a quorum)
      --fail-on-leak           exit 3 when a leaked key is found
NODE_OPTS
  -h, --help                   this help

environment: an option left off the command line is read from the [VARIABLE] shown beside
it (the command line wins; an empty variable counts as unset).

exit status:
  0    scanned every node
  1    a node could not be scanned
  3    a leaked key was found, with --fail-on-leak
  4    with -r: NAME is not held on a quorum of nodes
  125  usage error";

/// Short options of `redlock inspect`.
const SHORTS: [(char, &str); 4] = [
    ('n', "nodes"),
    ('p', "prefix"),
    ('r', "resource"),
    ('h', "help"),
];

pub fn main(args: Vec<OsString>) -> u8 {
    let mut nodes = NodeOpts::default();
    let mut prefix = String::new();
    let mut fail_on_leak = false;
    let mut resource: Option<String> = None;
    let mut p = lexopt::Parser::from_args(args);
    let parsed: Result<bool, String> = (|| {
        while let Some(arg) = next(&mut p, &SHORTS)? {
            if let Opt::Long(name) = &arg
                && nodes.take(name, &mut p)?
            {
                continue;
            }
            match &arg {
                Opt::Long(n) if n == "prefix" => prefix = string(&mut p, "--prefix")?,
                Opt::Long(n) if n == "fail-on-leak" => fail_on_leak = true,
                Opt::Long(n) if n == "resource" => {
                    resource = Some(string(&mut p, "--resource")?);
                }
                Opt::Long(n) if n == "help" => return Ok(false),
                other => return Err(unexpected(other)),
            }
        }
        Ok(true)
    })();
    match parsed {
        Ok(true) => {}
        Ok(false) => {
            println!("{}", HELP.replace("NODE_OPTS", NODE_OPTS_HELP));
            return 0;
        }
        Err(e) => {
            eprintln!("redlock inspect: {e} (see `redlock inspect --help`)");
            return EXIT_ERROR;
        }
    }
    if let Err(e) = nodes.resolve() {
        eprintln!("redlock inspect: {e} (see `redlock inspect --help`)");
        return EXIT_ERROR;
    }
    let config = nodes.config();
    let max_ttl = Duration::from_millis(nodes.max_ttl_ms());
    let mgr = match Redlock::new(config) {
        Ok(m) => m,
        Err(e) => {
            eprintln!("redlock inspect: {e}");
            return EXIT_ERROR;
        }
    };
    if let Some(r) = resource {
        return holders(&mgr, &r);
    }
    scan_and_report(&mgr, &prefix, max_ttl, fail_on_leak)
}

/// Scans every node for lock keys and fencing counters under `prefix` and prints them, and
/// the keys that outlive the maximum TTL (leaks); the exit status.
fn scan_and_report(mgr: &Redlock, prefix: &str, max_ttl: Duration, fail_on_leak: bool) -> u8 {
    let p = prefix.as_bytes();
    let scanned = (|| -> Result<_, redlock::Error> {
        Ok((
            mgr.scan(KeyKind::Lock, p)?,
            mgr.scan(KeyKind::FencingCounter, p)?,
            mgr.scan(KeyKind::Semaphore, p)?,
            mgr.scan(KeyKind::FairQueue, p)?,
            mgr.scan(KeyKind::Election, p)?,
        ))
    })();
    let (locks, counters, sems, queues, elections) = match scanned {
        Ok(s) => s,
        Err(e) => {
            eprintln!("redlock inspect: {e}");
            return 1;
        }
    };
    for f in &locks.failed {
        eprintln!("node {} ({}): cannot scan: {}", f.index, f.addr, f.outcome);
    }
    let addrs = node_names(mgr);
    print_locks(&locks.keys, &addrs, prefix);
    let leaked = print_leaks(&locks.keys, &addrs, max_ttl);
    print_counted(&sems.keys, &addrs, "semaphore(s)", "PERMITS HELD");
    print_counted(&queues.keys, &addrs, "fair queue(s)", "WAITERS");
    print_elections(mgr, &elections.keys, &addrs);
    println!(
        "{} fencing counter(s) (redlock-fence:*; they never expire, by design)",
        counters.keys.len()
    );
    if !locks.failed.is_empty() {
        1
    } else if fail_on_leak && leaked > 0 {
        3
    } else {
        0
    }
}

/// One line per resource and node: the remaining TTL and the first bytes of the token.
fn print_locks(keys: &[KeyInfo], addrs: &[String], prefix: &str) {
    let mut by_resource: BTreeMap<&[u8], Vec<&KeyInfo>> = BTreeMap::new();
    for k in keys {
        by_resource.entry(&k.resource).or_default().push(k);
    }
    println!(
        "{} lock key(s) for {} resource(s) on {} node(s){}",
        keys.len(),
        by_resource.len(),
        addrs.len(),
        if prefix.is_empty() {
            String::new()
        } else {
            format!(" (prefix {prefix:?})")
        }
    );
    if !by_resource.is_empty() {
        println!("{:<32} {:<24} {:>10}  TOKEN", "RESOURCE", "NODE", "TTL ms");
    }
    for (resource, on) in &by_resource {
        for (i, addr) in addrs.iter().enumerate() {
            let name = format!("{i} {addr}");
            let line = match on.iter().find(|k| k.node == i) {
                Some(k) => {
                    let ttl = k
                        .ttl
                        .map_or_else(|| "no TTL".to_string(), |t| t.as_millis().to_string());
                    let token = match &k.value {
                        // `<token>.<ms> <label>`: the token's start and the label.
                        Some(v) => match v.iter().position(|&b| b == b' ') {
                            Some(sp) => {
                                format!("{}… {}", show(&v[..v.len().min(8)]), show(&v[sp + 1..]))
                            }
                            None => format!("{}…", show(&v[..v.len().min(8)])),
                        },
                        None => not_a_string(k),
                    };
                    match &k.shard {
                        Some(shard) => format!("{ttl:>10}  {token} (shard {shard})"),
                        None => format!("{ttl:>10}  {token}"),
                    }
                }
                None => format!("{:>10}", "-"),
            };
            let res = if i == 0 {
                show(resource)
            } else {
                String::new()
            };
            println!("{res:<32} {name:<24} {line}");
        }
    }
}

/// What a lock key that is not a string holds: a reentrant or shared lock's hash, or a key of
/// another type under the prefix (not a lock).
fn not_a_string(k: &KeyInfo) -> String {
    match k.key_type.as_str() {
        "hash" => format!(
            "(a reentrant or shared lock's hash; -r {} shows its holders)",
            show(&k.resource)
        ),
        t => format!("(a {t}, not a lock key)"),
    }
}

/// One line per name and node of a semaphore or fair queue: its TTL and how many permits are
/// held, or waiters queued, there (`what`).
fn print_counted(keys: &[KeyInfo], addrs: &[String], title: &str, what: &str) {
    print_named(
        keys,
        addrs,
        title,
        what,
        |k| k.members.unwrap_or(0).to_string(),
        |_| (),
    );
}

/// One line per election held and node: the key's TTL and the first bytes of the
/// leadership's token; then the leader a quorum agrees on (read now), its term and value.
fn print_elections(mgr: &Redlock, keys: &[KeyInfo], addrs: &[String]) {
    let token = |k: &KeyInfo| {
        let t = k.value.as_deref().unwrap_or_default();
        format!("{}…", show(&t[..t.len().min(8)]))
    };
    let leader = |name: &[u8]| match mgr.election(name).leader() {
        Ok(Some(l)) => println!(
            "  leader: term {}, value {:?}, valid {} ms more (a quorum agrees)",
            l.term,
            String::from_utf8_lossy(&l.value),
            l.validity.as_millis()
        ),
        Ok(None) => println!("  leader: none that a quorum agrees on"),
        Err(e) => println!("  leader: cannot be read: {e}"),
    };
    let title = "election(s) with a leader's key";
    print_named(keys, addrs, title, "TOKEN", token, leader);
}

/// The keys by name (their resource): `<count> <title>`, then per name one line per node
/// with the key's TTL and `cell` of it (under the column `what`), then `after(name)`.
fn print_named(
    keys: &[KeyInfo],
    addrs: &[String],
    title: &str,
    what: &str,
    cell: impl Fn(&KeyInfo) -> String,
    after: impl Fn(&[u8]),
) {
    let mut by_name: BTreeMap<&[u8], Vec<&KeyInfo>> = BTreeMap::new();
    for k in keys {
        by_name.entry(&k.resource).or_default().push(k);
    }
    println!("{} {title}", by_name.len());
    if by_name.is_empty() {
        return;
    }
    println!("{:<32} {:<24} {:>10}  {what}", "NAME", "NODE", "TTL ms");
    for (name, on) in &by_name {
        for (i, addr) in addrs.iter().enumerate() {
            let node = format!("{i} {addr}");
            let line = match on.iter().find(|k| k.node == i) {
                Some(k) => {
                    let ttl = k.ttl.map_or("no TTL".into(), |t| t.as_millis().to_string());
                    format!("{ttl:>10}  {}", cell(k))
                }
                None => format!("{:>10}", "-"),
            };
            let shown = if i == 0 { show(name) } else { String::new() };
            println!("{shown:<32} {node:<24} {line}");
        }
        after(name);
    }
}

/// Lists the keys without a TTL or with one beyond the maximum; returns how many.
fn print_leaks(keys: &[KeyInfo], addrs: &[String], max_ttl: Duration) -> usize {
    let max_ms = max_ttl.as_millis();
    let leaked: Vec<&KeyInfo> = keys
        .iter()
        .filter(|k| k.ttl.is_none_or(|t| t > max_ttl))
        .collect();
    if leaked.is_empty() {
        println!("no leaked lock keys (none without a TTL or with a TTL over {max_ms} ms)");
        return 0;
    }
    println!(
        "LEAKED: {} key(s) without a TTL or with a TTL over {max_ms} ms:",
        leaked.len()
    );
    for k in &leaked {
        let why = match k.ttl {
            None => "no TTL".to_string(),
            Some(t) => format!("TTL {} ms", t.as_millis()),
        };
        println!(
            "  node {} ({}): {} — {why}",
            k.node,
            addrs[k.node],
            show(&k.key)
        );
    }
    leaked.len()
}

/// `inspect -r NAME`: who holds NAME, per node and on a quorum. Exit status 0 when a holder
/// is on a quorum, 4 when not, 125 for a name the library refuses.
fn holders(mgr: &Redlock, resource: &str) -> u8 {
    let seen = match mgr.holders(resource) {
        Ok(h) => h,
        Err(e) => {
            eprintln!("redlock inspect: --resource: {e}");
            return EXIT_ERROR;
        }
    };
    print!("{}", describe_holders(&seen, &node_names(mgr)));
    if seen.is_locked() { 0 } else { 4 }
}

/// Each node's address as reports show it; a failover group's followed by the master its
/// sentinels named and the promotions seen (`redis+sentinel://…/svc (master 10.0.0.5:6379,
/// 1 promotion seen)`).
fn node_names(mgr: &Redlock) -> Vec<String> {
    mgr.node_states()
        .into_iter()
        .map(|s| match (&s.master, s.promotions_seen) {
            (Some(m), n) => format!(
                "{} (master {m}, {n} promotion{} seen)",
                s.addr,
                if n == 1 { "" } else { "s" }
            ),
            (None, 0) => s.addr,
            (None, n) => format!("{} ({n} promotions seen)", s.addr),
        })
        .collect()
}

pub fn ms(d: Option<Duration>) -> String {
    d.map_or_else(|| "-".to_string(), |d| format!("{}ms", d.as_millis()))
}

pub fn kind(k: HolderKind) -> &'static str {
    match k {
        HolderKind::Lock => "lock",
        HolderKind::Reentrant => "reentrant lock",
        HolderKind::Shared => "shared lock",
        _ => "a key that is not this library's lock",
    }
}

/// Who a holder is, as people read it: its label, else its id; shared holders, who have
/// neither, as such.
pub fn who(h: &Holder) -> String {
    match (&h.label, h.kind) {
        (Some(l), _) => format!("{l:?}"),
        (None, HolderKind::Shared) => "shared holders".into(),
        (None, _) if h.id.is_empty() => "an unnamed holder".into(),
        (None, _) => show(&h.id),
    }
}

/// The text `inspect -r` prints.
fn describe_holders(seen: &Holders, addrs: &[String]) -> String {
    let mut out = String::new();
    let key = show(&seen.key);
    match seen.holder() {
        Some(h) => out.push_str(&format!(
            "{:?} (key {key}) is held on a quorum by {} ({}), for {}; on a quorum for {} more \
             unless renewed\n",
            String::from_utf8_lossy(&seen.resource),
            who(&h),
            kind(h.kind),
            ms(h.held_for),
            h.ttl.map_or_else(
                || "ever (no TTL)".to_string(),
                |t| format!("{}ms", t.as_millis())
            ),
        )),
        None => out.push_str(&format!(
            "{:?} (key {key}) is not held on a quorum ({} of {} nodes hold a key for it; {} \
             needed)\n",
            String::from_utf8_lossy(&seen.resource),
            seen.held_on(),
            seen.nodes.len(),
            seen.quorum
        )),
    }
    out.push_str(&format!(
        "{:<24} {:<8} {:>10} {:>10}  HOLDER\n",
        "NODE", "STATE", "TTL", "HELD FOR"
    ));
    for (i, (n, addr)) in seen.nodes.iter().zip(addrs).enumerate() {
        let name = format!("{i} {addr}");
        let line = match n {
            NodeHold::Free => format!("{:<8}", "free"),
            NodeHold::Held(h) => {
                let who = h.label.clone().unwrap_or_else(|| who(h));
                let ttl = h
                    .ttl
                    .map_or_else(|| "no TTL".to_string(), |t| format!("{}ms", t.as_millis()));
                format!(
                    "{:<8} {ttl:>10} {:>10}  {who} ({})",
                    "held",
                    ms(h.held_for),
                    kind(h.kind)
                )
            }
            NodeHold::Failed(why) => format!("{:<8} {why}", "failed"),
            _ => format!("{n:?}"),
        };
        out.push_str(format!("{name:<24} {line}").trim_end());
        out.push('\n');
    }
    out
}
