//! `redlock inspect`: lock keys per node, and leaked ones, found with SCAN (never KEYS).

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::time::Duration;

use redlock::{FENCE_PREFIX, KEY_PREFIX, NodeAddr};

use crate::{EXIT_ERROR, NODE_OPTS_HELP, NodeOpts, Opt, next, string, unexpected};

const HELP: &str = "\
redlock inspect — show lock keys on each node, and find leaked ones

usage: redlock inspect --nodes URL[,URL…] [--prefix P] [--max-ttl MS] [--fail-on-leak]

Scans every node with SCAN (never KEYS) for lock keys (redlock:<resource>) whose resource
starts with P, and prints, per resource and node, whether the key is there, its remaining
TTL and a short form of the holder's token. Keys with no TTL, or a TTL beyond the maximum,
are listed as leaked: they would block their resource for good (or far too long).

options:
  --prefix P           only resources starting with P (default: all)
  --fail-on-leak       exit 3 when a leaked key is found
NODE_OPTS

exit status: 0; 1 if a node could not be scanned; 3 with --fail-on-leak and a leak; 125 usage.";

struct Found {
    node: usize,
    key: Vec<u8>,
    pttl: i64,
    value: Option<Vec<u8>>,
}

/// Escapes the glob characters of a SCAN MATCH pattern.
fn glob_escape(s: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(s.len());
    for &b in s {
        if matches!(b, b'*' | b'?' | b'[' | b']' | b'\\') {
            out.push(b'\\');
        }
        out.push(b);
    }
    out
}

fn show(bytes: &[u8]) -> String {
    bytes.escape_ascii().to_string()
}

/// A key found by a scan: its name, PTTL, and value when it is a string.
type Scanned = (Vec<u8>, i64, Option<Vec<u8>>);

fn scan(url: &str, pattern: &[u8]) -> Result<Vec<Scanned>, String> {
    let url = if url.contains("://") {
        url.to_string()
    } else {
        format!("redis://{url}")
    };
    let client = redis::Client::open(url.as_str()).map_err(|e| e.to_string())?;
    let mut con = client
        .get_connection_with_timeout(Duration::from_secs(2))
        .map_err(|e| e.to_string())?;
    let _ = con.set_read_timeout(Some(Duration::from_secs(5)));
    let mut cursor: u64 = 0;
    let mut keys: Vec<Vec<u8>> = Vec::new();
    for _ in 0..1_000_000 {
        let (next, batch): (u64, Vec<Vec<u8>>) = redis::cmd("SCAN")
            .arg(cursor)
            .arg("MATCH")
            .arg(pattern)
            .arg("COUNT")
            .arg(1000)
            .query(&mut con)
            .map_err(|e| e.to_string())?;
        keys.extend(batch);
        cursor = next;
        if cursor == 0 {
            break;
        }
    }
    keys.sort();
    keys.dedup();
    let mut out = Vec::with_capacity(keys.len());
    for chunk in keys.chunks(500) {
        let mut pipe = redis::pipe();
        for k in chunk {
            pipe.cmd("PTTL").arg(k).cmd("TYPE").arg(k);
        }
        let replies: Vec<redis::Value> = pipe.query(&mut con).map_err(|e| e.to_string())?;
        let mut strings = Vec::new();
        for (i, k) in chunk.iter().enumerate() {
            let pttl = match &replies[2 * i] {
                redis::Value::Int(n) => *n,
                _ => -2,
            };
            let is_string = matches!(&replies[2 * i + 1],
                redis::Value::SimpleString(t) if t == "string");
            if pttl != -2 {
                strings.push((k.clone(), pttl, is_string));
            }
        }
        for (k, pttl, is_string) in strings {
            let value = if is_string {
                redis::cmd("GET")
                    .arg(&k)
                    .query::<Option<Vec<u8>>>(&mut con)
                    .map_err(|e| e.to_string())?
            } else {
                None
            };
            out.push((k, pttl, value));
        }
    }
    Ok(out)
}

pub fn main(args: Vec<OsString>) -> u8 {
    let mut nodes = NodeOpts::new();
    let mut prefix = String::new();
    let mut fail_on_leak = false;
    let mut p = lexopt::Parser::from_args(args);
    let parsed: Result<bool, String> = (|| {
        while let Some(arg) = next(&mut p)? {
            if let Opt::Long(name) = &arg
                && nodes.take(name, &mut p)?
            {
                continue;
            }
            match &arg {
                Opt::Long(n) if n == "prefix" => prefix = string(&mut p, "--prefix")?,
                Opt::Long(n) if n == "fail-on-leak" => fail_on_leak = true,
                Opt::Long(n) if n == "help" => return Ok(false),
                Opt::Short('h') => return Ok(false),
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
    if nodes.nodes.is_empty() {
        eprintln!("redlock inspect: --nodes is required (see `redlock inspect --help`)");
        return EXIT_ERROR;
    }
    let max_ttl = nodes.max_ttl.unwrap_or(60_000) as i64;
    let mut addrs = Vec::new();
    for (i, url) in nodes.nodes.iter().enumerate() {
        match NodeAddr::parse(url) {
            Ok(a) => addrs.push(a),
            Err(e) => {
                eprintln!("redlock inspect: node {i}: {e}");
                return EXIT_ERROR;
            }
        }
    }
    let mut pattern = KEY_PREFIX.to_vec();
    pattern.extend(glob_escape(prefix.as_bytes()));
    pattern.push(b'*');
    let mut fence_pattern = FENCE_PREFIX.to_vec();
    fence_pattern.extend(glob_escape(prefix.as_bytes()));
    fence_pattern.push(b'*');

    let mut found: Vec<Found> = Vec::new();
    let mut counters = 0;
    let mut failed = false;
    for (i, url) in nodes.nodes.iter().enumerate() {
        match scan(url, &pattern) {
            Ok(keys) => found.extend(keys.into_iter().map(|(key, pttl, value)| Found {
                node: i,
                key,
                pttl,
                value,
            })),
            Err(e) => {
                eprintln!("node {i} ({}): cannot scan: {e}", addrs[i]);
                failed = true;
                continue;
            }
        }
        if let Ok(c) = scan(url, &fence_pattern) {
            counters += c.len();
        }
    }

    let mut by_resource: BTreeMap<Vec<u8>, Vec<&Found>> = BTreeMap::new();
    for f in &found {
        by_resource
            .entry(f.key[KEY_PREFIX.len()..].to_vec())
            .or_default()
            .push(f);
    }
    println!(
        "{} lock key(s) for {} resource(s) on {} node(s){}",
        found.len(),
        by_resource.len(),
        nodes.nodes.len(),
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
            let line = match on.iter().find(|f| f.node == i) {
                Some(f) => {
                    let ttl = if f.pttl < 0 {
                        "no TTL".to_string()
                    } else {
                        f.pttl.to_string()
                    };
                    let token = match &f.value {
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
    let leaked: Vec<&Found> = found
        .iter()
        .filter(|f| f.pttl == -1 || f.pttl > max_ttl)
        .collect();
    if leaked.is_empty() {
        println!("no leaked lock keys (none without a TTL or with a TTL over {max_ttl} ms)");
    } else {
        println!(
            "LEAKED: {} key(s) without a TTL or with a TTL over {max_ttl} ms:",
            leaked.len()
        );
        for f in &leaked {
            let why = if f.pttl == -1 {
                "no TTL".to_string()
            } else {
                format!("TTL {} ms", f.pttl)
            };
            println!(
                "  node {} ({}): {} — {why}",
                f.node,
                addrs[f.node],
                show(&f.key)
            );
        }
    }
    println!("{counters} fencing counter(s) (redlock-fence:*; they never expire, by design)");
    if failed {
        1
    } else if fail_on_leak && !leaked.is_empty() {
        3
    } else {
        0
    }
}
