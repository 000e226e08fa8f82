//! Who holds a resource: one read-only script on every node at once, and the holder a quorum of
//! nodes agrees on. `Redlock::holders`, the C, Python and Go calls over it, and
//! `redlock inspect --resource` are built on it.
//!
//! It is a snapshot, not a lock: the answer can change the moment it is read, and a holder
//! found on a quorum can lose its lease just after. Use it to see and report, never to decide
//! whether it is safe to act (take the lock for that).

use std::time::Duration;

use crate::error::{Error, NodeOutcome};
use crate::lease::Shared;
use crate::quorum::{Cmd, Limits, Request, Until};
use crate::resp::Reply;
use crate::script::Script;
use crate::token;

/// Who holds a resource ([`Redlock::holders`](crate::Redlock::holders)): for the key
/// `KEYS[1]`, returns `{type, value, since, PTTL, now}`: the key's type (`none` when absent);
/// a string's value, or a hash's `owner` field (nil otherwise); a hash's `since` field (nil
/// otherwise); its `PTTL`; and the node's own clock in milliseconds, so that how long the
/// lock has been held is measured on one clock. Read-only; sent as `EVAL`.
pub const HOLDER: &str = "local t = redis.call('time') \
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) \
local k = KEYS[1] local ty = redis.call('type', k)['ok'] \
local v = false local s = false \
if ty == 'string' then v = redis.call('get', k) \
elseif ty == 'hash' then v = redis.call('hget', k, 'owner') s = redis.call('hget', k, 'since') end \
return {ty, v, s, redis.call('pttl', k), now}";

/// [`HOLDER`], for calls.
pub(crate) static HOLDER_SCRIPT: Script = Script::new(HOLDER);

/// What kind of key holds a resource on a node.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum HolderKind {
    /// A plain lock of this library: its value is a token, when it was taken and its label.
    Lock,
    /// A reentrant lock of this library: a hash with its owner id and when its tenure began.
    Reentrant,
    /// Shared (read) locks of this library ([`LockOptions::shared`](crate::LockOptions::shared)):
    /// one hash holding every shared holder's hold. Its id is empty and it has no label;
    /// `held_for` counts from when the first of the overlapping holders took it.
    Shared,
    /// Any other key (another library's lock, such as redsync's or node-redlock's under the
    /// same name, a value in an older format, or a key that is not a lock at all). It still
    /// excludes this library's locks on that node.
    Other,
}

/// Who holds a resource's key on one node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Holder {
    /// What kind of key it is.
    pub kind: HolderKind,
    /// The holder's identity: a plain lock's whole value (the same on every node it was taken
    /// on, unique to its lease), a reentrant lock's owner id, another string's value; empty
    /// for a key of another type.
    pub id: Vec<u8>,
    /// A person-readable name for the holder: the label of the manager that took a plain lock
    /// ([`Config::label`](crate::Config::label)), the owner id of a reentrant one (lossily
    /// decoded as UTF-8); `None` when there is none.
    pub label: Option<String>,
    /// How long the lock has been held: for a reentrant lock, since its tenure began, on the
    /// node's own clock; for a plain lock, since the holder's wall clock said it started its
    /// attempt, read against the node's clock (so off by as much as those two clocks
    /// disagree; never negative). `None` for other keys.
    pub held_for: Option<Duration>,
    /// The key's remaining TTL on this node; `None` when the key has no expiry.
    pub ttl: Option<Duration>,
}

/// What one node answered.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum NodeHold {
    /// The node has no key for the resource.
    Free,
    /// The node has a key for the resource.
    Held(Holder),
    /// The node could not be asked (down, timed out, refused the script, quarantined
    /// connection …).
    Failed(NodeOutcome),
}

/// What [`Redlock::holders`](crate::Redlock::holders) found: one entry per node, in the
/// configuration's order, and the holder a quorum agrees on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Holders {
    /// The resource asked about.
    pub resource: Vec<u8>,
    /// Its lock key (the key prefix followed by the resource).
    pub key: Vec<u8>,
    /// Each node's answer, by its position in the configuration.
    pub nodes: Vec<NodeHold>,
    /// How many nodes make a quorum.
    pub quorum: usize,
}

impl Holders {
    /// The holder found on at least a quorum of nodes (the same kind and identity), if any:
    /// its label, the longest `held_for` among those nodes, and as `ttl` how long it stays on
    /// a quorum unless it is renewed (the quorum-th longest TTL among those nodes; `None`
    /// when a quorum of them have no expiry).
    pub fn holder(&self) -> Option<Holder> {
        let held: Vec<&Holder> = self
            .nodes
            .iter()
            .filter_map(|n| match n {
                NodeHold::Held(h) => Some(h),
                _ => None,
            })
            .collect();
        for first in &held {
            let same: Vec<&&Holder> = held
                .iter()
                .filter(|h| h.kind == first.kind && h.id == first.id)
                .collect();
            if same.len() < self.quorum {
                continue;
            }
            let mut ttls: Vec<Option<Duration>> = same.iter().map(|h| h.ttl).collect();
            // Longest first, with "no expiry" longer than any TTL.
            ttls.sort_by(|a, b| match (a, b) {
                (None, None) => std::cmp::Ordering::Equal,
                (None, Some(_)) => std::cmp::Ordering::Less,
                (Some(_), None) => std::cmp::Ordering::Greater,
                (Some(x), Some(y)) => y.cmp(x),
            });
            return Some(Holder {
                kind: first.kind,
                id: first.id.clone(),
                label: first.label.clone(),
                held_for: same.iter().filter_map(|h| h.held_for).max(),
                ttl: ttls[self.quorum - 1],
            });
        }
        None
    }

    /// Whether some holder is on a quorum of nodes: the resource is locked (as of the read).
    pub fn is_locked(&self) -> bool {
        self.holder().is_some()
    }

    /// How many nodes hold some key for the resource, whoever's it is.
    pub fn held_on(&self) -> usize {
        self.nodes
            .iter()
            .filter(|n| matches!(n, NodeHold::Held(_)))
            .count()
    }

    /// How many nodes could not be asked.
    pub fn failed(&self) -> usize {
        self.nodes
            .iter()
            .filter(|n| matches!(n, NodeHold::Failed(_)))
            .count()
    }
}

/// Reads who holds `key` (the lock key of `resource`) on every node.
pub(crate) fn holders(sh: &Shared, resource: &[u8], key: &[u8]) -> Result<Holders, Error> {
    let eval = HOLDER_SCRIPT.calls(&[key], &[]).1;
    let req = Request {
        cmd: Cmd::Same(&eval),
        fallback: None,
        combine: None,
        slot: Some(crate::slot::key_slot(key)),
        slots: None,
        split: None,
        grants: false,
        work: 1,
    };
    let limits = Limits {
        node_timeout: sh.budget.acquire_bound(sh.cfg.max_ttl),
        cap: None,
        until: Until::All,
    };
    let round = sh.cluster.round(
        &req,
        &|_, r| parse(r).map_or_else(|e| e, |_| NodeOutcome::Success),
        limits,
    )?;
    let nodes = (0..sh.cluster.len())
        .map(|i| match &round.replies[i] {
            Some(r) => match parse(r) {
                Ok(Some(h)) => NodeHold::Held(h),
                Ok(None) => NodeHold::Free,
                Err(o) => NodeHold::Failed(o),
            },
            None => NodeHold::Failed(round.outcomes[i].clone()),
        })
        .collect();
    Ok(Holders {
        resource: resource.to_vec(),
        key: key.to_vec(),
        nodes,
        quorum: sh.cluster.quorum(),
    })
}

/// A reply of the holder script: `None` when the key is absent.
fn parse(r: &Reply) -> Result<Option<Holder>, NodeOutcome> {
    let bad = || NodeOutcome::Protocol(format!("unexpected holder reply: {}", r.describe()));
    let items = match r {
        Reply::Array(items) if items.len() == 5 => items,
        Reply::Error { text, .. } => return Err(NodeOutcome::ServerError(text.clone())),
        _ => return Err(bad()),
    };
    let (Reply::Bulk(ty), Reply::Int(pttl), Reply::Int(now)) = (&items[0], &items[3], &items[4])
    else {
        return Err(bad());
    };
    if ty == b"none" || *pttl == -2 {
        return Ok(None);
    }
    let bulk = |r: &Reply| match r {
        Reply::Bulk(b) => Some(b.clone()),
        _ => None,
    };
    let ttl = (*pttl >= 0).then(|| Duration::from_millis(*pttl as u64));
    let now = u64::try_from(*now).map_err(|_| bad())?;
    let since_ms = |since: u64| Duration::from_millis(now.saturating_sub(since));
    let value = bulk(&items[1]);
    let holder = match (ty.as_slice(), value) {
        (b"string", Some(v)) => match token::parse_value(&v) {
            Some((since, label)) => Holder {
                kind: HolderKind::Lock,
                id: v,
                label,
                held_for: Some(since_ms(since)),
                ttl,
            },
            None => other(v, ttl),
        },
        (b"hash", Some(owner)) => {
            let since = bulk(&items[2])
                .and_then(|s| String::from_utf8(s).ok())
                .and_then(|s| s.parse::<u64>().ok());
            let shared = owner.as_slice() == crate::config::SHARED_OWNER;
            Holder {
                kind: if shared {
                    HolderKind::Shared
                } else {
                    HolderKind::Reentrant
                },
                label: (!shared).then(|| String::from_utf8_lossy(&owner).into_owned()),
                id: owner,
                held_for: since.map(since_ms),
                ttl,
            }
        }
        _ => other(Vec::new(), ttl),
    };
    Ok(Some(holder))
}

fn other(id: Vec<u8>, ttl: Option<Duration>) -> Holder {
    Holder {
        kind: HolderKind::Other,
        id,
        label: None,
        held_for: None,
        ttl,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reply(ty: &str, v: Option<&[u8]>, since: Option<&str>, pttl: i64) -> Reply {
        Reply::Array(vec![
            Reply::Bulk(ty.as_bytes().to_vec()),
            v.map_or(Reply::Nil, |v| Reply::Bulk(v.to_vec())),
            since.map_or(Reply::Nil, |s| Reply::Bulk(s.as_bytes().to_vec())),
            Reply::Int(pttl),
            Reply::Int(10_000),
        ])
    }

    fn held(h: Holder) -> NodeHold {
        NodeHold::Held(h)
    }

    #[test]
    fn replies_are_read_by_kind() {
        assert_eq!(parse(&reply("none", None, None, -2)).unwrap(), None);
        let v = format!("{}.9000 web-1:42", "a".repeat(40));
        let h = parse(&reply("string", Some(v.as_bytes()), None, 700))
            .unwrap()
            .unwrap();
        assert_eq!(h.kind, HolderKind::Lock);
        assert_eq!(h.label.as_deref(), Some("web-1:42"));
        assert_eq!(h.held_for, Some(Duration::from_millis(1000)));
        assert_eq!(h.ttl, Some(Duration::from_millis(700)));
        // A holder whose clock runs ahead of the node's: never a negative duration.
        let ahead = format!("{}.20000", "b".repeat(40));
        let h = parse(&reply("string", Some(ahead.as_bytes()), None, 5))
            .unwrap()
            .unwrap();
        assert_eq!(h.held_for, Some(Duration::ZERO));
        let h = parse(&reply("hash", Some(b"job-7"), Some("4000"), -1))
            .unwrap()
            .unwrap();
        assert_eq!(h.kind, HolderKind::Reentrant);
        assert_eq!(h.label.as_deref(), Some("job-7"));
        assert_eq!(h.held_for, Some(Duration::from_millis(6000)));
        assert_eq!(h.ttl, None);
        let h = parse(&reply("string", Some(b"d41d8cd98f00b204"), None, 30))
            .unwrap()
            .unwrap();
        assert_eq!(
            (h.kind, h.label, h.held_for),
            (HolderKind::Other, None, None)
        );
        let h = parse(&reply("list", None, None, -1)).unwrap().unwrap();
        assert_eq!((h.kind, h.id.len()), (HolderKind::Other, 0));
        assert!(parse(&Reply::Int(1)).is_err());
        assert!(matches!(
            parse(&Reply::Error {
                code: "ERR".into(),
                text: "ERR x".into(),
            }),
            Err(NodeOutcome::ServerError(_))
        ));
    }

    #[test]
    fn the_holder_is_the_one_on_a_quorum() {
        let h = |id: &[u8], ttl: u64, held: u64| Holder {
            kind: HolderKind::Lock,
            id: id.to_vec(),
            label: Some("x".into()),
            held_for: Some(Duration::from_millis(held)),
            ttl: Some(Duration::from_millis(ttl)),
        };
        let mut hs = Holders {
            resource: b"r".to_vec(),
            key: b"redlock:r".to_vec(),
            nodes: vec![
                held(h(b"a", 900, 10)),
                held(h(b"a", 300, 12)),
                NodeHold::Free,
                held(h(b"b", 999, 1)),
                held(h(b"a", 600, 11)),
            ],
            quorum: 3,
        };
        let got = hs.holder().unwrap();
        assert_eq!(got.id, b"a");
        // On a quorum until the third-longest of 900, 600, 300.
        assert_eq!(got.ttl, Some(Duration::from_millis(300)));
        assert_eq!(got.held_for, Some(Duration::from_millis(12)));
        assert!(hs.is_locked());
        assert_eq!(hs.held_on(), 4);
        hs.nodes[4] = NodeHold::Failed(NodeOutcome::Timeout);
        assert_eq!(hs.holder(), None);
        assert!(!hs.is_locked());
        assert_eq!(hs.failed(), 1);
    }
}
