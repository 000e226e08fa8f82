//! Conversions between the engine's types and the plain objects the JavaScript side reads:
//! options in, errors (with every node's outcome), holders and node states out.

use std::time::Duration;

use napi::bindgen_prelude::Buffer;
use napi_derive::napi;
use redlock::{
    Error, Holder, HolderKind, Holders, LockOptions, NodeHold, NodeOutcome, NodeState, Op,
    QuarantineReason, RenewOptions, Report, Wait,
};

/// An acquisition's options, as `lib/options.js` has checked and packed them: `wait_ms` −1
/// for the retry policy, the booleans as `FLAG_*` bits, 0 for "the default" in the others.
/// (Positional numbers, not an object: reading an object's fields through N-API costs a
/// property lookup each, on every call.)
pub struct AcquireOptions {
    pub wait_ms: i64,
    pub flags: u32,
    pub owner: Option<Buffer>,
    pub drop_out_ms: u32,
    pub max_hold_ms: u32,
    pub max_extensions: u32,
}

pub const FLAG_FENCED: u32 = 1;
pub const FLAG_NO_NOTIFY: u32 = 2;
pub const FLAG_SHARED: u32 = 4;
pub const FLAG_FAIR: u32 = 8;
pub const FLAG_AUTO_RENEW: u32 = 16;

/// The renewal bounds (0: the engine's defaults).
pub fn renew_options(max_hold_ms: u32, max_extensions: u32) -> RenewOptions {
    let mut r = RenewOptions::new();
    if max_hold_ms > 0 {
        r = r.max_hold(Duration::from_millis(max_hold_ms.into()));
    }
    if max_extensions > 0 {
        r = r.max_extensions(max_extensions);
    }
    r
}

pub fn lock_options(o: &AcquireOptions, renew: Option<RenewOptions>) -> LockOptions {
    let mut l = LockOptions::new().wait(match o.wait_ms {
        ms if ms < 0 => Wait::Retries,
        0 => Wait::No,
        ms => Wait::For(Duration::from_millis(ms as u64)),
    });
    let flag = |f: u32| o.flags & f != 0;
    l = l.fenced(flag(FLAG_FENCED));
    l = l.notify(!flag(FLAG_NO_NOTIFY));
    if let Some(owner) = &o.owner {
        l = l.owner(&owner[..]);
    }
    l = l.shared(flag(FLAG_SHARED));
    l = l.fair(flag(FLAG_FAIR));
    if o.drop_out_ms > 0 {
        l = l.drop_out(Duration::from_millis(o.drop_out_ms.into()));
    }
    if let Some(r) = renew {
        l = l.auto_renew(r);
    }
    l
}

/// One node's outcome of a step.
#[napi(object)]
pub struct NodeResult {
    pub index: u32,
    pub addr: String,
    /// `success`, `rejected`, `pending`, `timeout`, `unreachable`, `backoff`, `serverError`,
    /// `authFailed`, `protocol`, `tls`, `sentinel`, `unacknowledged`, `duplicate`,
    /// `quarantined`.
    pub outcome: String,
    /// The text of the outcomes that have one (the server's error, the socket's failure).
    pub message: Option<String>,
    pub remaining_ms: Option<f64>,
    pub reason: Option<String>,
    pub duplicate_of: Option<u32>,
}

/// A failure: `kind` names the error class, `message` is the engine's text.
#[napi(object)]
pub struct ErrorInfo {
    /// `notAcquired`, `notHeld`, `unavailable`, `auth`, `invalidArgument`, `internal`,
    /// `cancelled`.
    pub kind: String,
    pub message: String,
    /// The step a report describes: `acquire`, `release`, `extend`, `fence`.
    pub op: Option<String>,
    pub successes: Option<u32>,
    pub quorum: Option<u32>,
    pub detail: Option<String>,
    pub expires_in_ms: Option<f64>,
    pub nodes: Option<Vec<NodeResult>>,
}

fn ms(d: Duration) -> f64 {
    d.as_millis() as f64
}

pub fn reason_name(r: QuarantineReason) -> &'static str {
    match r {
        QuarantineReason::NoMarker => "noMarker",
        QuarantineReason::StaleMarker => "staleMarker",
        QuarantineReason::RestartSeen => "restartSeen",
        QuarantineReason::Promoted => "promoted",
        QuarantineReason::Young => "young",
        QuarantineReason::Undecided => "undecided",
        _ => "other",
    }
}

pub fn outcome(index: usize, addr: &str, o: &NodeOutcome) -> NodeResult {
    let mut r = NodeResult {
        index: index as u32,
        addr: addr.to_string(),
        outcome: String::new(),
        message: None,
        remaining_ms: None,
        reason: None,
        duplicate_of: None,
    };
    let (name, text) = match o {
        NodeOutcome::Success => ("success", None),
        NodeOutcome::Rejected => ("rejected", None),
        NodeOutcome::Pending => ("pending", None),
        NodeOutcome::Timeout => ("timeout", None),
        NodeOutcome::Unreachable(s) => ("unreachable", Some(s)),
        NodeOutcome::Backoff(s) => ("backoff", Some(s)),
        NodeOutcome::ServerError(s) => ("serverError", Some(s)),
        NodeOutcome::AuthFailed(s) => ("authFailed", Some(s)),
        NodeOutcome::Protocol(s) => ("protocol", Some(s)),
        NodeOutcome::Tls(s) => ("tls", Some(s)),
        NodeOutcome::Sentinel(s) => ("sentinel", Some(s)),
        NodeOutcome::Unacknowledged { .. } => ("unacknowledged", None),
        NodeOutcome::Duplicate { of } => {
            r.duplicate_of = Some(*of as u32);
            ("duplicate", None)
        }
        NodeOutcome::Quarantined {
            remaining, reason, ..
        } => {
            r.remaining_ms = Some(ms(*remaining));
            r.reason = Some(reason_name(*reason).to_string());
            ("quarantined", None)
        }
        _ => ("other", None),
    };
    r.outcome = name.to_string();
    r.message = text.cloned().or_else(|| match o {
        NodeOutcome::Unacknowledged { .. } | NodeOutcome::Quarantined { .. } => Some(o.to_string()),
        _ => None,
    });
    r
}

fn report_into(info: &mut ErrorInfo, r: &Report) {
    info.op = Some(
        match r.op {
            Op::Acquire => "acquire",
            Op::Release => "release",
            Op::Extend => "extend",
            Op::Fence => "fence",
            _ => "other",
        }
        .to_string(),
    );
    info.successes = Some(r.successes as u32);
    info.quorum = Some(r.quorum as u32);
    info.detail = r.detail.clone();
    info.expires_in_ms = r.expires_in.map(ms);
    info.nodes = Some(
        r.nodes
            .iter()
            .map(|n| outcome(n.index, &n.addr, &n.outcome))
            .collect(),
    );
}

pub fn error(e: &Error) -> ErrorInfo {
    let kind = match e {
        Error::NotAcquired(_) => "notAcquired",
        Error::NotHeld(_) => "notHeld",
        Error::Unavailable(_) => "unavailable",
        Error::Auth(_) => "auth",
        Error::InvalidInput(_) => "invalidArgument",
        Error::Cancelled => "cancelled",
        _ => "internal",
    };
    let mut info = ErrorInfo {
        kind: kind.to_string(),
        message: e.to_string(),
        op: None,
        successes: None,
        quorum: None,
        detail: None,
        expires_in_ms: None,
        nodes: None,
    };
    if let Some(r) = e.report() {
        report_into(&mut info, r);
    }
    info
}

pub fn internal(msg: impl Into<String>) -> ErrorInfo {
    error(&Error::Internal(msg.into()))
}

/// One holder, as `holders()` reports it.
#[napi(object)]
pub struct HolderInfo {
    /// `lock`, `reentrant`, `shared`, `other`.
    pub kind: String,
    pub id: Buffer,
    pub label: Option<String>,
    pub held_for_ms: Option<f64>,
    pub ttl_ms: Option<f64>,
}

#[napi(object)]
pub struct NodeHoldInfo {
    /// `free`, `held`, `failed`.
    pub state: String,
    pub holder: Option<HolderInfo>,
    pub failure: Option<NodeResult>,
}

#[napi(object)]
pub struct HoldersInfo {
    pub resource: Buffer,
    pub key: Buffer,
    pub quorum: u32,
    pub holder: Option<HolderInfo>,
    pub nodes: Vec<NodeHoldInfo>,
}

fn holder(h: &Holder) -> HolderInfo {
    HolderInfo {
        kind: match h.kind {
            HolderKind::Lock => "lock",
            HolderKind::Reentrant => "reentrant",
            HolderKind::Shared => "shared",
            _ => "other",
        }
        .to_string(),
        id: h.id.clone().into(),
        label: h.label.clone(),
        held_for_ms: h.held_for.map(ms),
        ttl_ms: h.ttl.map(ms),
    }
}

pub fn holders(h: &Holders, addrs: &[String]) -> HoldersInfo {
    let nodes = h
        .nodes
        .iter()
        .enumerate()
        .map(|(i, n)| match n {
            NodeHold::Free => NodeHoldInfo {
                state: "free".into(),
                holder: None,
                failure: None,
            },
            NodeHold::Held(x) => NodeHoldInfo {
                state: "held".into(),
                holder: Some(holder(x)),
                failure: None,
            },
            NodeHold::Failed(o) => NodeHoldInfo {
                state: "failed".into(),
                holder: None,
                failure: Some(outcome(i, addrs.get(i).map_or("", |s| s), o)),
            },
            _ => NodeHoldInfo {
                state: "other".into(),
                holder: None,
                failure: None,
            },
        })
        .collect();
    HoldersInfo {
        resource: h.resource.clone().into(),
        key: h.key.clone().into(),
        quorum: h.quorum as u32,
        holder: h.holder().as_ref().map(holder),
        nodes,
    }
}

#[napi(object)]
pub struct NodeStateInfo {
    pub index: u32,
    pub addr: String,
    pub quarantined: bool,
    pub remaining_ms: f64,
    pub reason: Option<String>,
    pub trusted: bool,
    pub run_id: Option<String>,
    pub rtt_ms: Option<f64>,
}

pub fn node_state(s: &NodeState) -> NodeStateInfo {
    NodeStateInfo {
        index: s.index as u32,
        addr: s.addr.clone(),
        quarantined: s.quarantined_for.is_some(),
        remaining_ms: s.quarantined_for.map_or(0.0, ms),
        reason: s.quarantine_reason.map(|r| reason_name(r).to_string()),
        trusted: s.trusted,
        run_id: s.run_id.clone(),
        rtt_ms: s.rtt.map(|d| d.as_secs_f64() * 1e3),
    }
}
