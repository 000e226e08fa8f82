//! Inspection: the lock keys (or fencing counters) on every node, found with `SCAN` (never
//! `KEYS`), with their remaining TTL and holder's token, through the manager's own
//! connections. `redlock inspect` is built on it; other tools can use it too.

use std::time::Duration;

use crate::config::{ELECTION_PREFIX, FAIR_PREFIX, FENCE_PREFIX, SEMAPHORE_PREFIX};
use crate::error::{Error, NodeOutcome, NodeReport};
use crate::lease::Shared;
use crate::quorum::{Cmd, Limits, Request, Until};
use crate::resp::Reply;
use crate::script::Script;

/// Inspection (`redlock inspect`, [`Redlock::scan`](crate::Redlock::scan)): one `SCAN` step
/// from cursor `ARGV[1]` over keys matching `ARGV[2]`, `ARGV[3]` keys at a time. Returns the
/// next cursor, then for each key found its name, its `PTTL`, its value if it is a string (nil
/// otherwise), its type, and how many members it has if it is a hash, sorted set, list or set
/// (nil otherwise): with `ARGV[4]` = `slots`, a hash's fields named `slot:…` (a semaphore's
/// permits held). Read-only; not loaded by the handshake (sent as `EVAL`).
pub const SCAN_KEYS: &str = "local r = redis.call('SCAN', ARGV[1], 'MATCH', ARGV[2], 'COUNT', ARGV[3]) \
local out = {r[1]} \
for _, k in ipairs(r[2]) do \
local t = redis.call('TYPE', k)['ok'] \
local v = false \
local n = false \
if t == 'string' then v = redis.call('GET', k) \
elseif t == 'hash' and ARGV[4] == 'slots' then \
n = 0 \
for _, f in ipairs(redis.call('HKEYS', k)) do \
if string.sub(f, 1, 5) == 'slot:' then n = n + 1 end \
end \
elseif t == 'hash' then n = redis.call('HLEN', k) \
elseif t == 'zset' then n = redis.call('ZCARD', k) \
elseif t == 'list' then n = redis.call('LLEN', k) \
elseif t == 'set' then n = redis.call('SCARD', k) end \
out[#out + 1] = k \
out[#out + 1] = redis.call('PTTL', k) \
out[#out + 1] = v \
out[#out + 1] = t \
out[#out + 1] = n \
end \
return out";

/// [`SCAN_KEYS`], for calls.
pub(crate) static SCAN_SCRIPT: Script = Script::new(SCAN_KEYS);

/// Which keys [`Redlock::scan`](crate::Redlock::scan) looks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum KeyKind {
    /// Lock keys: the manager's key prefix (`redlock:` by default, see
    /// [`Config::key_prefix`](crate::Config::key_prefix)) followed by the resource. With the
    /// empty prefix every key is a candidate, except the library's own counters, intent keys and
    /// marker.
    Lock,
    /// Fencing counters: `redlock-fence:<resource>` (they never expire, by design).
    FencingCounter,
    /// Semaphores: `redlock-sem:` followed by the lock key of the semaphore's name (see
    /// [`Redlock::semaphore`](crate::Redlock::semaphore)); [`KeyInfo::members`] is the number of
    /// permits held on that node.
    Semaphore,
    /// Fair locks' queues: `redlock-fair:` followed by the lock key (see
    /// [`LockOptions::fair`](crate::LockOptions::fair)); [`KeyInfo::members`] is the number of
    /// waiters queued on that node.
    FairQueue,
    /// Leader elections' keys: `redlock-elect:` followed by the lock key of the election's
    /// name (see [`Redlock::election`](crate::Redlock::election)); present where a leader
    /// holds the election, with its TTL and the leadership's token as the value.
    Election,
}

/// One key found on one node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyInfo {
    /// The node's position in the configuration.
    pub node: usize,
    /// For a cluster node: the shard primary ("host:port") the key was found on.
    pub shard: Option<String>,
    /// The key's full name (prefix included).
    pub key: Vec<u8>,
    /// The resource it is for (the key without its prefix).
    pub resource: Vec<u8>,
    /// The remaining TTL, or `None` if the key has no TTL.
    pub ttl: Option<Duration>,
    /// The value, when the key is a string: a lock's holder token, a counter's value.
    pub value: Option<Vec<u8>>,
    /// The key's Redis type (`string`, `hash`, `zset`, …): a plain lock is a string, a
    /// reentrant or shared lock a hash.
    pub key_type: String,
    /// How many members the key has, when it is a hash, sorted set, list or set (a reentrant
    /// or shared lock's entries; for [`KeyKind::Semaphore`] the permits held, for
    /// [`KeyKind::FairQueue`] the waiters); `None` for a string.
    pub members: Option<u64>,
}

/// What [`Redlock::scan`](crate::Redlock::scan) found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Scan {
    /// Every key found, by node and then by name.
    pub keys: Vec<KeyInfo>,
    /// The nodes that could not be scanned to the end, and why.
    pub failed: Vec<NodeReport>,
}

/// Keys per `SCAN` step and node.
const COUNT: &[u8] = b"1000";

/// At most this many `SCAN` steps per node (a keyspace of a billion keys at 1000 per step).
const MAX_STEPS: usize = 1_000_000;

/// How long one scan step may take on one node.
const STEP_TIMEOUT: Duration = Duration::from_secs(5);

/// How long one scan step waits: for every node, [`STEP_TIMEOUT`] each.
fn step_limits() -> Limits {
    Limits {
        node_timeout: STEP_TIMEOUT,
        cap: None,
        until: Until::All,
    }
}

/// Escapes the glob characters of a `SCAN MATCH` pattern.
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

/// The prefix of every key of `kind` under the lock key prefix `lock_prefix`.
fn kind_prefix(kind: KeyKind, lock_prefix: &[u8]) -> Vec<u8> {
    match kind {
        KeyKind::Lock => lock_prefix.to_vec(),
        KeyKind::FencingCounter => FENCE_PREFIX.to_vec(),
        KeyKind::Semaphore => [SEMAPHORE_PREFIX, lock_prefix].concat(),
        KeyKind::FairQueue => [FAIR_PREFIX, lock_prefix].concat(),
        KeyKind::Election => [ELECTION_PREFIX, lock_prefix].concat(),
    }
}

/// Scans every node for keys of `kind` whose resource starts with `prefix`.
pub(crate) fn scan(sh: &Shared, kind: KeyKind, prefix: &[u8]) -> Result<Scan, Error> {
    let key_prefix = kind_prefix(kind, &sh.cfg.key_prefix);
    let key_prefix = key_prefix.as_slice();
    let count_slots: &[u8] = if kind == KeyKind::Semaphore {
        b"slots"
    } else {
        b""
    };
    // Under a prefix other than the default, the pattern may also match the library's own
    // keys; those are never lock keys (see `Config::lock_key`).
    let own = |key: &[u8]| kind == KeyKind::Lock && crate::config::own_key(key);
    let mut pattern = key_prefix.to_vec();
    pattern.extend(glob_escape(prefix));
    pattern.push(b'*');
    let units = units(sh)?;
    let n = sh.cluster.len();
    // Per node, its units (one, or one per shard of a cluster node) and the one it is at.
    let mut cursors: Vec<Option<Vec<u8>>> = units.iter().map(|_| Some(b"0".to_vec())).collect();
    let mut failures: Vec<Option<NodeOutcome>> = vec![None; n];
    let mut keys = Vec::new();
    for _ in 0..MAX_STEPS {
        let (at, cmds, slots) = next_step(&units, &cursors, n, &pattern, count_slots);
        if cmds.iter().all(Option::is_none) {
            break;
        }
        let req = Request {
            cmd: Cmd::PerNode(&cmds),
            fallback: None,
            combine: None,
            slot: None,
            slots: Some(&slots),
            split: None,
            grants: false,
            work: 1,
        };
        let limits = step_limits();
        let round = sh.cluster.round(
            &req,
            &|_, r| parse(r).map_or_else(|e| e, |_| NodeOutcome::Success),
            limits,
        )?;
        for (i, u) in at.iter().enumerate() {
            let Some(u) = *u else { continue };
            let step = match &round.replies[i] {
                Some(r) => parse(r),
                None => Err(round.outcomes[i].clone()),
            };
            match step {
                Ok((next, found)) => {
                    let found = found.into_iter().filter(|f| !own(&f.0));
                    let shard = &units[u].shard;
                    keys.extend(found.map(|f| key_info((i, shard), key_prefix.len(), f)));
                    cursors[u] = (next != b"0").then_some(next);
                }
                Err(o) => {
                    failures[i] = Some(match &units[u].shard {
                        Some(s) => shard_failed(s, o),
                        None => o,
                    });
                    cursors[u] = None;
                }
            }
        }
    }
    keys.sort_by(|a, b| (a.node, &a.key).cmp(&(b.node, &b.key)));
    keys.dedup_by(|a, b| a.node == b.node && a.key == b.key);
    let failed = sh
        .cluster
        .nodes()
        .zip(failures)
        .filter_map(|(node, f)| {
            f.map(|outcome| NodeReport {
                index: node.index,
                addr: node.addr_text.clone(),
                outcome,
            })
        })
        .collect();
    Ok(Scan { keys, failed })
}

/// A key found: name, TTL, value (a string's), type, members (a collection's).
type Found = (
    Vec<u8>,
    Option<Duration>,
    Option<Vec<u8>>,
    String,
    Option<u64>,
);

/// What one scan walks with one cursor: a node, or one shard of a cluster node.
struct Unit {
    node: usize,
    /// The shard's primary ("host:port"), and a slot that routes to it.
    shard: Option<String>,
    slot: Option<u16>,
}

/// Every node's units. A cluster node whose slot map is not known yet is asked once first
/// (any command routed to it loads the map).
fn units(sh: &Shared) -> Result<Vec<Unit>, Error> {
    let n = sh.cluster.len();
    let unknown = |i: usize| sh.cluster.shard_slots(i).is_some_and(|s| s.is_empty());
    if (0..n).any(unknown) {
        let mut ping = Vec::new();
        crate::resp::pack(&[b"PING"], &mut ping);
        let req = Request {
            cmd: Cmd::Same(&ping),
            fallback: None,
            combine: None,
            slot: Some(0),
            slots: None,
            split: None,
            grants: false,
            work: 1,
        };
        let limits = step_limits();
        sh.cluster
            .round(&req, &|_, _| NodeOutcome::Success, limits)?;
    }
    let mut units = Vec::new();
    for node in 0..n {
        match sh.cluster.shard_slots(node) {
            Some(shards) => units.extend(shards.into_iter().map(|(s, slot)| Unit {
                node,
                shard: Some(s),
                slot: Some(slot),
            })),
            None => units.push(Unit {
                node,
                shard: None,
                slot: None,
            }),
        }
    }
    Ok(units)
}

type Step = (Vec<Option<usize>>, Vec<Option<Vec<u8>>>, Vec<Option<u16>>);

/// The next step of a scan: per node, the unit it is at (its first unit still scanning), the
/// command that continues that unit's cursor, and the slot that routes it there.
fn next_step(
    units: &[Unit],
    cursors: &[Option<Vec<u8>>],
    n: usize,
    pattern: &[u8],
    count_slots: &[u8],
) -> Step {
    let at: Vec<Option<usize>> = (0..n)
        .map(|i| (0..units.len()).find(|&u| units[u].node == i && cursors[u].is_some()))
        .collect();
    let cmds = (at.iter())
        .map(|u| {
            u.and_then(|u| cursors[u].as_ref())
                .map(|c| SCAN_SCRIPT.calls(&[], &[c, pattern, COUNT, count_slots]).1)
        })
        .collect();
    let slots = at.iter().map(|u| u.and_then(|u| units[u].slot)).collect();
    (at, cmds, slots)
}

/// A shard's failure, naming the shard.
fn shard_failed(shard: &str, o: NodeOutcome) -> NodeOutcome {
    let text = crate::node::health::describe(&o);
    NodeOutcome::ServerError(format!("shard {shard}: {text}"))
}

/// A key found on node `node` (on `shard` of a cluster node), whose resource follows a
/// prefix of `prefix_len` bytes.
fn key_info(
    (node, shard): (usize, &Option<String>),
    prefix_len: usize,
    (key, ttl, value, key_type, members): Found,
) -> KeyInfo {
    KeyInfo {
        node,
        shard: shard.clone(),
        resource: key[prefix_len.min(key.len())..].to_vec(),
        key,
        ttl,
        value,
        key_type,
        members,
    }
}

/// A reply of the scan script: the next cursor, and (key, TTL, value, type, members) per key
/// found.
fn parse(r: &Reply) -> Result<(Vec<u8>, Vec<Found>), NodeOutcome> {
    let bad = || NodeOutcome::Protocol(format!("unexpected scan reply: {}", r.describe()));
    let items = match r {
        Reply::Array(items) if items.len() % 5 == 1 => items,
        Reply::Error { text, .. } => return Err(NodeOutcome::ServerError(text.clone())),
        _ => return Err(bad()),
    };
    let Reply::Bulk(next) = &items[0] else {
        return Err(bad());
    };
    let mut found = Vec::with_capacity(items.len() / 5);
    for t in items[1..].chunks(5) {
        let (Reply::Bulk(k), Reply::Int(pttl)) = (&t[0], &t[1]) else {
            return Err(bad());
        };
        if *pttl == -2 {
            continue; // expired between SCAN and PTTL
        }
        let ttl = (*pttl >= 0).then(|| Duration::from_millis(*pttl as u64));
        let value = match &t[2] {
            Reply::Bulk(v) => Some(v.clone()),
            _ => None,
        };
        let key_type = match &t[3] {
            Reply::Bulk(v) => String::from_utf8_lossy(v).into_owned(),
            _ => return Err(bad()),
        };
        let members = match &t[4] {
            Reply::Int(n) => Some((*n).max(0) as u64),
            _ => None,
        };
        found.push((k.clone(), ttl, value, key_type, members));
    }
    Ok((next.clone(), found))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn glob_characters_are_escaped() {
        assert_eq!(glob_escape(b"a*b?[c]\\"), b"a\\*b\\?\\[c\\]\\\\".to_vec());
    }

    #[test]
    fn scan_replies_are_parsed_strictly() {
        let r = Reply::Array(vec![
            Reply::Bulk(b"17".to_vec()),
            Reply::Bulk(b"redlock:a".to_vec()),
            Reply::Int(900),
            Reply::Bulk(b"tok".to_vec()),
            Reply::Bulk(b"string".to_vec()),
            Reply::Nil,
            Reply::Bulk(b"redlock:b".to_vec()),
            Reply::Int(-1),
            Reply::Nil,
            Reply::Bulk(b"hash".to_vec()),
            Reply::Int(3),
            Reply::Bulk(b"redlock:gone".to_vec()),
            Reply::Int(-2),
            Reply::Nil,
            Reply::Bulk(b"none".to_vec()),
            Reply::Nil,
        ]);
        let (next, found) = parse(&r).unwrap();
        assert_eq!(next, b"17");
        assert_eq!(found.len(), 2);
        assert_eq!(found[0].1, Some(Duration::from_millis(900)));
        assert_eq!((found[0].3.as_str(), found[0].4), ("string", None));
        assert_eq!(found[1].1, None);
        assert_eq!(found[1].2, None);
        assert_eq!((found[1].3.as_str(), found[1].4), ("hash", Some(3)));
        assert!(parse(&Reply::Array(vec![])).is_err());
        assert!(parse(&Reply::Int(1)).is_err());
    }
}
