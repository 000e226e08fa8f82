//! A cluster node's slot map: which shard primary owns each slot, read from the cluster's own
//! answers (`CLUSTER SHARDS`, or `CLUSTER SLOTS` on servers without it) and corrected by its
//! redirects (`MOVED`, `ASK`). No sockets: the links hand their replies here.
//!
//! A primary is named by the address clients should use: the `endpoint` a server announces
//! (its IP, host name, or `?` for unknown), and the port for the connection's kind (`port`, or
//! `tls-port` for TLS). An unknown or empty endpoint means "the host you asked", as the
//! specification says; the caller passes that host in.

use crate::resp::Reply;
use crate::slot::SLOTS;

/// Where a primary is reached.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct Endpoint {
    pub host: String,
    pub port: u16,
}

impl std::fmt::Display for Endpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.host.contains(':') {
            write!(f, "[{}]:{}", self.host, self.port)
        } else {
            write!(f, "{}:{}", self.host, self.port)
        }
    }
}

/// One shard as the cluster describes it: its primary, and the slot ranges it serves
/// (inclusive). A shard may serve none (all its slots moved away).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Shard {
    pub primary: Endpoint,
    /// The primary's node id (40 hex digits), when the answer gave it.
    pub id: Option<String>,
    pub ranges: Vec<(u16, u16)>,
}

/// A redirect read in a reply: `MOVED` (the slot has a new owner) or `ASK` (this one command
/// goes there, after `ASKING`: the slot is moving).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Redirect {
    pub ask: bool,
    pub slot: u16,
    pub to: Endpoint,
}

/// The owner of every slot: an index into the primaries seen, or none.
pub(crate) struct SlotMap {
    owner: Box<[u16]>,
    primaries: Vec<Endpoint>,
}

/// No owner known.
const NONE: u16 = u16::MAX;

impl SlotMap {
    /// A map that knows no owner.
    pub(crate) fn new() -> SlotMap {
        SlotMap {
            owner: vec![NONE; usize::from(SLOTS)].into_boxed_slice(),
            primaries: Vec::new(),
        }
    }

    /// Replaces every owner with what `shards` says; primaries seen before keep their index
    /// (links are kept by it), and slots no shard serves have no owner.
    pub(crate) fn load(&mut self, shards: &[Shard]) {
        self.owner.fill(NONE);
        for s in shards {
            let i = self.index_of(&s.primary);
            for &(from, to) in &s.ranges {
                for slot in from..=to.min(SLOTS - 1) {
                    self.owner[usize::from(slot)] = i;
                }
            }
        }
    }

    /// Records a `MOVED`: `slot` belongs to `to` now. Returns its primary's index.
    pub(crate) fn moved(&mut self, slot: u16, to: &Endpoint) -> usize {
        let i = self.index_of(to);
        self.owner[usize::from(slot % SLOTS)] = i;
        usize::from(i)
    }

    /// The index of the primary that owns `slot`, if known.
    pub(crate) fn owner(&self, slot: u16) -> Option<usize> {
        let i = self.owner[usize::from(slot % SLOTS)];
        (i != NONE).then_some(usize::from(i))
    }

    /// Every primary seen, by index (a primary that no longer owns a slot keeps its index).
    pub(crate) fn primaries(&self) -> &[Endpoint] {
        &self.primaries
    }

    /// Each primary that owns a slot, with the lowest slot it owns (a command with no key
    /// reaches that primary when routed by that slot), in the order of their first slots.
    pub(crate) fn owners(&self) -> Vec<(&Endpoint, u16)> {
        let mut seen: Vec<u16> = Vec::new();
        let mut out = Vec::new();
        for (slot, &o) in self.owner.iter().enumerate() {
            if o != NONE && !seen.contains(&o) {
                seen.push(o);
                out.push((&self.primaries[usize::from(o)], slot as u16));
            }
        }
        out
    }

    /// Every slot primary `e` owns, in order.
    pub(crate) fn slots_of(&self, e: &Endpoint) -> Vec<u16> {
        let Some(i) = self.primaries.iter().position(|p| p == e) else {
            return Vec::new();
        };
        (0..SLOTS)
            .filter(|&s| usize::from(self.owner[usize::from(s)]) == i)
            .collect()
    }

    /// The index of primary `e`, added if new.
    pub(crate) fn primary(&mut self, e: &Endpoint) -> usize {
        usize::from(self.index_of(e))
    }

    fn index_of(&mut self, e: &Endpoint) -> u16 {
        if let Some(i) = self.primaries.iter().position(|p| p == e) {
            return i as u16;
        }
        // At most one primary per slot is ever live; the table cannot outgrow SLOTS entries
        // in any real cluster, and an index never reaches NONE.
        self.primaries.push(e.clone());
        (self.primaries.len() - 1).min(usize::from(NONE - 1)) as u16
    }
}

/// Reads a redirect from an error reply's text (`MOVED 3999 127.0.0.1:6381`,
/// `ASK 3999 [::1]:6381`, or `MOVED 3999 :6381`, "the host you asked", which is `asked`).
pub(crate) fn redirect(reply: &Reply, asked: &str) -> Option<Redirect> {
    let Reply::Error { code, text } = reply else {
        return None;
    };
    let ask = match code.as_str() {
        "MOVED" => false,
        "ASK" => true,
        _ => return None,
    };
    let mut words = text.split_ascii_whitespace().skip(1);
    let slot: u16 = words.next()?.parse().ok().filter(|s| *s < SLOTS)?;
    let (host, port) = words.next()?.rsplit_once(':')?;
    let host = host.trim_start_matches('[').trim_end_matches(']');
    Some(Redirect {
        ask,
        slot,
        to: endpoint(host, port.parse().ok()?, asked),
    })
}

/// The address to use for an announced endpoint: `asked` when the server does not know its
/// own (`?` or empty).
fn endpoint(host: &str, port: u16, asked: &str) -> Endpoint {
    let host = if host.is_empty() || host == "?" {
        asked
    } else {
        host
    };
    Endpoint {
        host: host.to_string(),
        port,
    }
}

/// The shards in a `CLUSTER SHARDS` reply; `tls` picks each primary's `tls-port`.
/// Errors say what was malformed.
pub(crate) fn parse_shards(reply: &Reply, tls: bool, asked: &str) -> Result<Vec<Shard>, String> {
    let Reply::Array(shards) = reply else {
        return Err(format!("CLUSTER SHARDS: not an array: {reply:?}"));
    };
    let mut out = Vec::with_capacity(shards.len());
    for s in shards {
        let fields = map(s).ok_or("CLUSTER SHARDS: a shard is not a map")?;
        let slots = field(&fields, "slots").ok_or("CLUSTER SHARDS: a shard without slots")?;
        let Reply::Array(bounds) = slots else {
            return Err("CLUSTER SHARDS: slots is not an array".into());
        };
        let bounds: Option<Vec<u16>> = bounds.iter().map(int).collect();
        let bounds = bounds.ok_or("CLUSTER SHARDS: a slot is not a number")?;
        if bounds.len() % 2 != 0 {
            return Err("CLUSTER SHARDS: an odd number of slot bounds".into());
        }
        let ranges = bounds.chunks(2).map(|b| (b[0], b[1])).collect();
        let Some(Reply::Array(nodes)) = field(&fields, "nodes") else {
            return Err("CLUSTER SHARDS: a shard without nodes".into());
        };
        // A shard whose primary failed and has no successor yet has none: skipped.
        let Some(primary) = nodes.iter().filter_map(map).find(|n| {
            field(n, "role").and_then(text).as_deref() == Some("master")
                && field(n, "health").and_then(text).as_deref() != Some("fail")
        }) else {
            continue;
        };
        let port = field(&primary, if tls { "tls-port" } else { "port" })
            .and_then(int)
            .ok_or("CLUSTER SHARDS: a primary without a port for this connection")?;
        let host = field(&primary, "endpoint")
            .or_else(|| field(&primary, "ip"))
            .and_then(text)
            .unwrap_or_default();
        out.push(Shard {
            primary: endpoint(&host, port, asked),
            id: field(&primary, "id").and_then(text),
            ranges,
        });
    }
    Ok(out)
}

/// The shards in a `CLUSTER SLOTS` reply (one entry per slot range: first, last, the
/// primary's host, port and id, then its replicas). The port is whatever the server reports
/// for this connection's kind.
pub(crate) fn parse_slots(reply: &Reply, asked: &str) -> Result<Vec<Shard>, String> {
    let Reply::Array(ranges) = reply else {
        return Err(format!("CLUSTER SLOTS: not an array: {reply:?}"));
    };
    let mut out: Vec<Shard> = Vec::new();
    for r in ranges {
        let bad = || "CLUSTER SLOTS: a malformed range".to_string();
        let Reply::Array(r) = r else {
            return Err(bad());
        };
        let (Some(from), Some(to), Some(Reply::Array(p))) =
            (r.first().and_then(int), r.get(1).and_then(int), r.get(2))
        else {
            return Err(bad());
        };
        let host = p.first().and_then(text).ok_or_else(bad)?;
        let port = p.get(1).and_then(int).ok_or_else(bad)?;
        let primary = endpoint(&host, port, asked);
        match out.iter_mut().find(|s| s.primary == primary) {
            Some(s) => s.ranges.push((from, to)),
            None => out.push(Shard {
                primary,
                id: p.get(2).and_then(text),
                ranges: vec![(from, to)],
            }),
        }
    }
    Ok(out)
}

/// A RESP2 map: alternating names and values.
fn map(r: &Reply) -> Option<Vec<(String, &Reply)>> {
    let Reply::Array(items) = r else { return None };
    if items.len() % 2 != 0 {
        return None;
    }
    items
        .chunks(2)
        .map(|kv| text(&kv[0]).map(|k| (k, &kv[1])))
        .collect()
}

fn field<'a>(m: &[(String, &'a Reply)], name: &str) -> Option<&'a Reply> {
    m.iter().find(|(k, _)| k == name).map(|(_, v)| *v)
}

fn text(r: &Reply) -> Option<String> {
    match r {
        Reply::Bulk(b) => String::from_utf8(b.clone()).ok(),
        Reply::Status(s) => Some(s.clone()),
        _ => None,
    }
}

fn int(r: &Reply) -> Option<u16> {
    match r {
        Reply::Int(i) => u16::try_from(*i).ok(),
        Reply::Bulk(b) => std::str::from_utf8(b).ok()?.parse().ok(),
        _ => None,
    }
}

#[cfg(test)]
mod tests;
