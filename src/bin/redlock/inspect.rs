//! `redlock inspect`: lock keys per node, and leaked ones, found with SCAN (never KEYS).

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::time::Duration;

use redlock::{KeyInfo, KeyKind, Redlock};

use crate::args::{Opt, next, string, unexpected};
use crate::{EXIT_ERROR, NODE_OPTS_HELP, NodeOpts};

fn show(bytes: &[u8]) -> String {
    bytes.escape_ascii().to_string()
}

/// This command's `--help`.
pub const HELP: &str = "\
redlock inspect — show lock keys on each node, and find leaked ones

usage: redlock inspect -n URL[,URL…] [-p PREFIX] [--max-ttl DURATION] [--fail-on-leak]

Scans every node with SCAN (never KEYS) for lock keys (redlock:<resource>) whose resource
starts with PREFIX, and prints, per resource and node, whether the key is there, its
remaining TTL and a short form of the holder's token. Keys with no TTL, or a TTL beyond the
maximum TTL, are listed as leaked: they would block their resource for good (or far too
long).

options (DURATION: 500ms, 10s, 2m, 1h or 1m30s; a bare number is milliseconds):
  -p, --prefix PREFIX          only resources starting with PREFIX (default: all)
      --fail-on-leak           exit 3 when a leaked key is found
NODE_OPTS
  -h, --help                   this help

environment: an option left off the command line is read from the [VARIABLE] shown beside
it (the command line wins; an empty variable counts as unset).

exit status:
  0    scanned every node
  1    a node could not be scanned
  3    a leaked key was found, with --fail-on-leak
  125  usage error";

/// Short options of `redlock inspect`.
const SHORTS: [(char, &str); 3] = [('n', "nodes"), ('p', "prefix"), ('h', "help")];

pub fn main(args: Vec<OsString>) -> u8 {
    let mut nodes = NodeOpts::default();
    let mut prefix = String::new();
    let mut fail_on_leak = false;
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
    let scanned = mgr
        .scan(KeyKind::Lock, prefix.as_bytes())
        .and_then(|locks| Ok((locks, mgr.scan(KeyKind::FencingCounter, prefix.as_bytes())?)));
    let (locks, counters) = match scanned {
        Ok(s) => s,
        Err(e) => {
            eprintln!("redlock inspect: {e}");
            return 1;
        }
    };
    for f in &locks.failed {
        eprintln!(
            "node {} ({}): cannot scan: {:?}",
            f.index, f.addr, f.outcome
        );
    }
    let addrs = mgr.node_addrs();
    print_locks(&locks.keys, &addrs, &prefix);
    let leaked = print_leaks(&locks.keys, &addrs, max_ttl);
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
                        Some(v) => format!("{}…", show(&v[..v.len().min(8)])),
                        None => "(not a string)".into(),
                    };
                    format!("{ttl:>10}  {token}")
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
