//! What a link owes: one entry per command written on its connection (whom the reply is for,
//! when it was sent, what it costs the server), and the rule that tells a hung connection from
//! a busy one.

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::call::Call;
use super::health::{Ask, Hs};
use crate::resp::Reply;

/// Several commands written together as one entry (in one write, so nothing of another caller
/// comes between them), whose replies are combined into the one reply that stands for them:
/// the one the caller gets, and the one the link's own checks (`NOMARKER`) see.
#[derive(Clone, Copy)]
pub(crate) struct Combine {
    /// How many replies the commands get: the entry consumes exactly this many, whether or not
    /// its caller still waits, so that no later reply is ever taken for a part of it.
    pub parts: usize,
    /// The one reply the parts stand for.
    pub f: fn(&[Reply]) -> Reply,
}

/// What a command's entry expects back.
#[derive(Clone)]
pub(crate) enum Expect {
    /// One reply; with the `EVAL` form to send if the node answers `NOSCRIPT` to an `EVALSHA`.
    One(Option<Arc<[u8]>>),
    /// One reply per command of several written together, combined into one (no `NOSCRIPT`
    /// fallback: these are plain commands).
    Parts(Combine),
}

/// Whom a reply is for.
pub(super) enum Purpose {
    /// A handshake command of a new connection.
    Handshake(Hs),
    /// A question to a failover group's sentinel, while its master is being found.
    Sentinel(Ask),
    /// A health command after the handshake (a marker read or write): for the node itself.
    Health(Hs),
    /// A command: the call waiting for it (none if nobody waits), and what it expects back;
    /// `ack`: a `WAIT` was written right behind it, whose reply comes with its own; `asked`:
    /// each of its commands has an `ASKING` right before it (a cluster's `ASK` redirect),
    /// whose `+OK` is not one of its replies.
    Command {
        call: Option<Call>,
        expect: Expect,
        ack: bool,
        asked: bool,
        /// On a cluster node's shard: the command itself, to be written again where a
        /// redirect points when nobody follows it (see [`Redirected`]).
        resend: Option<Resend>,
    },
}

/// A command kept for a redirect nobody is there to follow, and how many it followed.
#[derive(Clone)]
pub(crate) struct Resend {
    pub cmd: Arc<[u8]>,
    pub hops: u8,
}

/// A redirect a cluster node's shard answered to a command whose caller had left (or that
/// had none: a release sent without waiting): queued for the next round or detached send on
/// the manager, which writes the command again where the redirect points.
pub(crate) struct Redirected {
    pub resend: Resend,
    pub expect: Expect,
    pub reply: Reply,
    /// The host of the shard that answered (a redirect may name "the host you asked").
    pub asked: String,
}

pub(super) struct Entry {
    pub(super) purpose: Purpose,
    pub(super) sent_at: Instant,
    /// Its reply's latency is a round-trip sample: the command was written at once on an
    /// established connection (not held behind a handshake, not a resend).
    pub(super) timed: bool,
    /// The server time its command may take beyond a one-key command's
    /// (`timing::work_allowance`).
    pub(super) work: Duration,
}

/// How many stale limits a connection's oldest owed reply may wait while the node still
/// answers, before the connection is closed all the same: the bound on the backlog of a node
/// that stays slower than the quorum's pace.
const BACKLOG_LIMITS: u32 = 10;

/// Whether a connection is hung, for a caller about to wait on it: it owes a reply and has
/// delivered none for longer than the stale limit (or its oldest owed reply has waited ten
/// stale limits, however steadily the node answers). A node that answers is busy, not hung:
/// on a busy machine a node slower than the quorum builds a queue of replies owed to callers
/// that left at quorum, and closing it would throw away the releases in that queue.
/// `oldest`: when the oldest owed reply's command was sent (`None`: nothing owed).
pub(super) fn stale(
    oldest: Option<Instant>,
    last_reply: Instant,
    now: Instant,
    limit: Duration,
) -> bool {
    oldest.is_some_and(|sent| {
        let owed = now.saturating_duration_since(sent);
        let silent = now.saturating_duration_since(sent.max(last_reply));
        silent > limit || owed > limit.saturating_mul(BACKLOG_LIMITS)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_node_that_answers_is_busy_not_hung() {
        let t0 = Instant::now();
        let s = Duration::from_secs;
        let limit = s(1);
        // Nothing owed: never stale.
        assert!(!stale(None, t0, t0 + s(100), limit));
        // Owed for 2 s with no reply since: hung.
        assert!(stale(Some(t0), t0, t0 + s(2), limit));
        // Owed for 2 s, but a reply (to a later or earlier command) came 0.5 s ago: a queue
        // behind a slow node, not a hung one.
        assert!(!stale(Some(t0), t0 + s(1) + s(1) / 2, t0 + s(2), limit));
        // A reply long before the command was sent says nothing about it.
        assert!(stale(Some(t0 + s(5)), t0, t0 + s(7), limit));
        // However steadily it answers, a backlog of ten stale limits is closed.
        assert!(!stale(Some(t0), t0 + s(10), t0 + s(10), limit));
        assert!(stale(Some(t0), t0 + s(11), t0 + s(11), limit));
    }
}
