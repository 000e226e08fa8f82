//! The one public error type, with the outcome on every node.

use std::fmt;

/// Which step of the algorithm a [`Report`] describes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Op {
    /// `SET key token NX PX ttl` on every node.
    Acquire,
    /// The owner-checked delete script on every node.
    Release,
    /// The owner-checked `PEXPIRE` script on every node.
    Extend,
    /// The second step of a fenced acquisition: writing the fencing token back to the
    /// per-resource counters where the key still holds our token.
    Fence,
    /// A leader's new value ([`Leadership::proclaim`](crate::Leadership::proclaim)), written
    /// where the election key still holds its token.
    Proclaim,
    /// A read of an election's leader on every node
    /// ([`Election::leader`](crate::Election::leader)).
    Leader,
}

impl Op {
    fn verb(self) -> &'static str {
        match self {
            Op::Acquire => "granted",
            Op::Release => "confirmed the release",
            Op::Extend => "extended",
            Op::Fence => "confirmed the fencing token",
            Op::Proclaim => "confirmed the new value",
            Op::Leader => "answered",
        }
    }
}

/// What happened on one node during one step.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum NodeOutcome {
    /// The node did what was asked: granted the lock, deleted our key, or extended it.
    Success,
    /// The node answered but refused: for an acquisition the key is held by another token; for
    /// release and extend the key is absent or holds another token.
    Rejected,
    /// The command was sent, but the step's outcome was decided before this node replied, so
    /// its reply was not waited for: a quorum had already succeeded, or the other nodes'
    /// failures and refusals had already made a quorum impossible (a report says which). It
    /// says nothing about the node's health. Its late reply is read and discarded before the
    /// connection carries anything else.
    Pending,
    /// No reply within the step's bound (see `Config::node_timeout`): for an acquisition the
    /// acquire bound, for an extension the validity, for a release the stale limit. Declared
    /// only after reading whatever the node's socket already held. For a release the command
    /// was sent all the same: the node runs it when it reads it.
    Timeout,
    /// The node could not be reached: connection refused, reset or closed, or a socket error.
    /// The text says which.
    Unreachable(String),
    /// Not contacted during this step: the node failed recently and is waiting out its
    /// reconnect backoff. The text is the last failure.
    Backoff(String),
    /// The node answered with an error reply (`-ERR …`, `-WRONGTYPE …`); the text is the
    /// server's.
    ServerError(String),
    /// The node refused this client's credentials: its `AUTH` failed (`WRONGPASS`, or a
    /// password the server does not expect), or it answered `NOAUTH` (a password is required)
    /// or `NOPERM` (the ACL user may not run a command or touch a key). The text is the
    /// server's. Reported for the step whose connection failed this way, and for the steps
    /// during the reconnect backoff that follows (the node is then not contacted).
    AuthFailed(String),
    /// The node sent something that is not the expected RESP reply.
    Protocol(String),
    /// The TLS session with a `rediss://` node failed: its certificate is not trusted (signed
    /// by an unknown CA, expired, issued for another name), it refused ours or asked for one
    /// this client lacks (mutual TLS), or it does not speak TLS. The text says which (never
    /// with key or certificate material). Reported for the step whose connection failed this
    /// way, and for the steps during the reconnect backoff that follows.
    Tls(String),
    /// A failover group's master could not be found or confirmed: no sentinel answered, none
    /// knows the service, the sentinels named different masters, or the server they named is
    /// not a master (`role:slave`). The text says which, naming the sentinels and servers.
    /// The next connection asks the sentinels again.
    Sentinel(String),
    /// A failover group granted, but its `WAIT` saw fewer replicas acknowledge the grant in
    /// time than [`Config::replica_acks`](crate::Config::replica_acks) asks for: the grant does
    /// not count, and is released.
    Unacknowledged {
        /// Replicas that acknowledged it.
        acknowledged: u64,
        /// Replicas required.
        wanted: u32,
    },
    /// The node is the same redis-server as node `of` (the same `run_id`, reached through
    /// another address): it counts in no round, or that server would vote twice.
    Duplicate {
        /// The lower-indexed node it duplicates.
        of: usize,
    },
    /// The node may have lost keys it held (a restart, a flushed keyspace), so its grant does
    /// not count (restart quarantine). `remaining` is how much longer, `reason` why.
    #[non_exhaustive]
    Quarantined {
        /// How long until the node counts again at the latest (an undecided node may count
        /// sooner: as soon as every node has answered).
        remaining: std::time::Duration,
        /// Why the node is not trusted.
        reason: QuarantineReason,
    },
}

/// Why a node is in restart quarantine: it may have lost keys it held, so its grants do not
/// count until the maximum TTL has passed since the loss (see docs/operations.md,
/// "Restart quarantine").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum QuarantineReason {
    /// The node has no marker while other nodes do (or it had one and lost it): it restarted
    /// empty, or its keyspace was flushed. Counted from when the loss was first seen.
    NoMarker,
    /// The node's marker holds another `run_id`: it restarted from disk (AOF or RDB), or it
    /// is a replica promoted after a failover (the marker was replicated from the old
    /// master), possibly without the latest writes either way. Counted from when this
    /// manager first saw it so, not from the server's start.
    StaleMarker,
    /// This manager saw the node's `run_id` change on a reconnect: a restart, or a failover
    /// behind the same address. Counted from when it saw the change.
    RestartSeen,
    /// The server's replication history shows a promotion (a replica made master) that its
    /// marker does not know of, or this manager saw its replication id change: it may lack
    /// the last writes of the master it replaced. Counted from when this manager first saw it
    /// so.
    Promoted,
    /// No node has a marker yet (a cluster meeting this library for the first time), and this
    /// node has been up for less than the maximum TTL. Counted from its start.
    Young,
    /// No node has a marker yet, and not every node has answered: a brand-new cluster is
    /// trusted as soon as all of them have.
    Undecided,
}

impl QuarantineReason {
    /// A short explanation, for messages.
    pub fn describe(self) -> &'static str {
        match self {
            QuarantineReason::NoMarker => {
                "no marker: it restarted empty or its data was flushed, or it is new: admit a \
                 node you know is new with admit_new_nodes or `redlock admit`"
            }
            QuarantineReason::StaleMarker => {
                "stale marker: it restarted from disk, possibly without its latest writes"
            }
            QuarantineReason::RestartSeen => "restart seen: its run_id changed",
            QuarantineReason::Promoted => {
                "promoted: a replica made master, possibly without its old master's last writes"
            }
            QuarantineReason::Young => {
                "up for less than the maximum TTL, and no node has a marker yet"
            }
            QuarantineReason::Undecided => {
                "no node has a marker yet and not every node has answered; a brand-new \
                 cluster is trusted once all have, or after the maximum TTL"
            }
        }
    }
}

impl fmt::Display for QuarantineReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.describe())
    }
}

/// What happened on a node, as the step reports print it, for a reader with no step at hand
/// (a failed scan, a `holders` read): a success and a refusal in general words.
impl fmt::Display for NodeOutcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NodeOutcome::Success => f.write_str("succeeded"),
            NodeOutcome::Rejected => f.write_str("refused"),
            NodeOutcome::Pending => f.write_str("not waited for"),
            other => other.describe(Op::Acquire, false, f),
        }
    }
}

impl NodeOutcome {
    /// True for [`NodeOutcome::Success`].
    pub fn is_success(&self) -> bool {
        matches!(self, NodeOutcome::Success)
    }

    /// True when the node gave a definite answer, success or refusal; false for timeouts,
    /// unreachable nodes, errors and replies still pending.
    pub fn is_answer(&self) -> bool {
        matches!(self, NodeOutcome::Success | NodeOutcome::Rejected)
    }

    /// `quorum`: whether the step reached its quorum, which tells why a pending node's reply
    /// was not waited for.
    fn describe(&self, op: Op, quorum: bool, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NodeOutcome::Success => f.write_str(op.verb()),
            NodeOutcome::Rejected => f.write_str(match op {
                Op::Acquire => "held by another owner",
                Op::Release | Op::Extend | Op::Fence | Op::Proclaim => "not held by this token",
                Op::Leader => "refused the read",
            }),
            // A release that was written has been sent: a node that did not answer in time
            // runs it when it reads it, so it is not confirmed, but not refused either.
            NodeOutcome::Pending => Self::not_waited_for(op, quorum, f),
            NodeOutcome::Timeout if op == Op::Release => {
                f.write_str("sent, not confirmed (no reply in time)")
            }
            NodeOutcome::Timeout => f.write_str("timeout"),
            NodeOutcome::Unreachable(s) => f.write_str(s),
            NodeOutcome::Backoff(s) => write!(f, "skipped during reconnect backoff ({s})"),
            NodeOutcome::ServerError(s) => write!(f, "server error: {s}"),
            NodeOutcome::AuthFailed(s) => write!(f, "authentication failed: {s}"),
            NodeOutcome::Protocol(s) => write!(f, "protocol error: {s}"),
            NodeOutcome::Tls(s) => write!(f, "TLS failed: {s}"),
            NodeOutcome::Sentinel(s) => write!(f, "failover group: {s}"),
            NodeOutcome::Unacknowledged {
                acknowledged,
                wanted,
            } => write!(
                f,
                "granted, but {acknowledged} of the {wanted} replicas required acknowledged it \
                 in time: it does not count (released)"
            ),
            NodeOutcome::Duplicate { of } => write!(
                f,
                "the same server as node {of} (same run_id): it does not count; list each \
                 server once"
            ),
            NodeOutcome::Quarantined { remaining, reason } => write!(
                f,
                "in restart quarantine for another {:.1} s ({reason})",
                remaining.as_secs_f64()
            ),
        }
    }
}

impl NodeOutcome {
    /// A [`NodeOutcome::Pending`] node: the round was decided without its reply, either
    /// because a quorum had already succeeded or because one had become impossible. Either
    /// way the node itself may be healthy: it just was not waited for.
    fn not_waited_for(op: Op, quorum: bool, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // A release that was written has been sent: the node runs it when it reads it, so it
        // is not confirmed, but not refused either.
        let sent = if op == Op::Release { "sent, " } else { "" };
        if quorum {
            write!(
                f,
                "{sent}not waited for: a quorum had already {}",
                op.verb()
            )
        } else {
            write!(f, "{sent}not waited for: a quorum was already impossible")
        }
    }
}

/// One node's line in a [`Report`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeReport {
    /// The node's position in the configured node list, from 0.
    pub index: usize,
    /// The node's address, with any password replaced by `***`.
    pub addr: String,
    /// What happened there.
    pub outcome: NodeOutcome,
}

/// The per-node outcome of one step (an acquisition, a release or an extension).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Report {
    /// The step described.
    pub op: Op,
    /// How many nodes succeeded.
    pub successes: usize,
    /// The number of successes needed: `N / 2 + 1`.
    pub quorum: usize,
    /// One entry per configured node, in configuration order.
    pub nodes: Vec<NodeReport>,
    /// Extra detail, for example "validity exhausted: 1203 ms elapsed of a 1000 ms TTL".
    pub detail: Option<String>,
    /// For an acquisition refused by every node that answered: how long until the holder's
    /// key has expired on enough of them for a quorum to be free, from the remaining TTLs the
    /// nodes reported (the longest wait, should the holder never release). `None` otherwise.
    pub expires_in: Option<std::time::Duration>,
}

impl Report {
    /// True when at least a quorum of nodes succeeded.
    pub fn has_quorum(&self) -> bool {
        self.successes >= self.quorum
    }
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.nodes.is_empty() {
            // Decided locally, before any node was contacted.
            return f.write_str(self.detail.as_deref().unwrap_or("no node contacted"));
        }
        write!(
            f,
            "{}/{} {} (quorum {})",
            self.successes,
            self.nodes.len(),
            self.op.verb(),
            self.quorum
        )?;
        if let Some(d) = &self.detail {
            write!(f, "; {d}")?;
        }
        for n in self.nodes.iter().filter(|n| !n.outcome.is_success()) {
            write!(f, "; node {} ({}): ", n.index, n.addr)?;
            n.outcome.describe(self.op, self.has_quorum(), f)?;
        }
        Ok(())
    }
}

/// Everything that can go wrong.
///
/// Lock-level failures carry a [`Report`] with the outcome on every node; its `Display` reads
/// like `not acquired: 2/5 granted (quorum 3); node 1 (127.0.0.1:7002): timeout; …`.
///
/// `Debug` (`{:?}`) writes the same text as `Display`, so that a `main` returning
/// `Result<(), Error>` (which prints its error with `{:?}`), `unwrap` and `expect` show a
/// readable message. The alternate form `{:#?}` shows the structure: the variant, the
/// [`Report`] and every [`NodeReport`], field by field.
#[derive(Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Error {
    /// The lock is held elsewhere: too few nodes granted it for a quorum, or the grants came
    /// too late to leave any validity. Retrying later may succeed.
    NotAcquired(Report),
    /// Release or extend could not confirm ownership on a quorum: the lock expired, was
    /// already released, or was taken over. The caller must assume it no longer holds it.
    NotHeld(Report),
    /// Too many nodes failed (timeouts, refused connections, errors) for a quorum to be
    /// possible. Nothing is known about who holds the lock.
    Unavailable(Report),
    /// Like [`Error::Unavailable`], but the nodes that refused this client's credentials
    /// ([`NodeOutcome::AuthFailed`]: a wrong password or user, a password missing, an ACL
    /// user without the needed permissions) are what stands between the other nodes and a
    /// quorum: had they answered, a quorum would have been possible. Fix the node URLs or the
    /// ACLs; retrying alone will not help. Nothing is known about who holds the lock.
    Auth(Report),
    /// Bad input: a malformed node URL, a TTL out of range, an empty resource name, … Nothing
    /// was sent to any node.
    InvalidInput(String),
    /// An operating-system facility failed (the random number source, `poll(2)`), or a
    /// condition this library believed impossible happened.
    Internal(String),
    /// The acquisition was cancelled through its [`Cancel`](crate::Cancel) handle. Nothing is
    /// held: whatever an attempt under way was granted has been released.
    Cancelled,
}

impl Error {
    /// The per-node report, for the variants that have one.
    pub fn report(&self) -> Option<&Report> {
        match self {
            Error::NotAcquired(r) | Error::NotHeld(r) | Error::Unavailable(r) | Error::Auth(r) => {
                Some(r)
            }
            Error::InvalidInput(_) | Error::Internal(_) | Error::Cancelled => None,
        }
    }

    pub(crate) fn invalid(msg: impl Into<String>) -> Self {
        Error::InvalidInput(msg.into())
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::NotAcquired(r) => write!(f, "not acquired: {r}"),
            Error::NotHeld(r) => write!(f, "not held: {r}"),
            Error::Unavailable(r) => write!(f, "unavailable: {r}"),
            Error::Auth(r) => write!(f, "authentication failed: {r}"),
            Error::InvalidInput(s) => write!(f, "invalid input: {s}"),
            Error::Internal(s) => write!(f, "internal error: {s}"),
            Error::Cancelled => f.write_str("cancelled"),
        }
    }
}

impl fmt::Debug for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if !f.alternate() {
            return fmt::Display::fmt(self, f);
        }
        // The derived form, through a mirror of the enum that derives it.
        #[allow(dead_code)] // its fields are read by the derived Debug only
        #[derive(Debug)]
        enum Error<'a> {
            NotAcquired(&'a Report),
            NotHeld(&'a Report),
            Unavailable(&'a Report),
            Auth(&'a Report),
            InvalidInput(&'a str),
            Internal(&'a str),
            Cancelled,
        }
        let mirror = match self {
            Self::NotAcquired(r) => Error::NotAcquired(r),
            Self::NotHeld(r) => Error::NotHeld(r),
            Self::Unavailable(r) => Error::Unavailable(r),
            Self::Auth(r) => Error::Auth(r),
            Self::InvalidInput(s) => Error::InvalidInput(s),
            Self::Internal(s) => Error::Internal(s),
            Self::Cancelled => Error::Cancelled,
        };
        fmt::Debug::fmt(&mirror, f)
    }
}

impl std::error::Error for Error {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn message_names_failing_nodes() {
        let node = |index, outcome| NodeReport {
            index,
            addr: format!("127.0.0.1:700{index}"),
            outcome,
        };
        let r = Report {
            op: Op::Acquire,
            successes: 2,
            quorum: 3,
            nodes: vec![
                node(0, NodeOutcome::Success),
                node(1, NodeOutcome::Timeout),
                node(2, NodeOutcome::Success),
                node(3, NodeOutcome::Rejected),
                node(4, NodeOutcome::Unreachable("connection refused".into())),
            ],
            detail: None,
            expires_in: None,
        };
        assert_eq!(
            Error::NotAcquired(r).to_string(),
            "not acquired: 2/5 granted (quorum 3); node 1 (127.0.0.1:7001): timeout; \
             node 3 (127.0.0.1:7003): held by another owner; \
             node 4 (127.0.0.1:7004): connection refused"
        );
    }

    fn node(index: usize, outcome: NodeOutcome) -> NodeReport {
        NodeReport {
            index,
            addr: format!("127.0.0.1:700{index}"),
            outcome,
        }
    }

    fn report(op: Op, outcomes: Vec<NodeOutcome>) -> Report {
        Report {
            op,
            successes: outcomes.iter().filter(|o| o.is_success()).count(),
            quorum: outcomes.len() / 2 + 1,
            nodes: (outcomes.into_iter().enumerate())
                .map(|(i, o)| node(i, o))
                .collect(),
            detail: None,
            expires_in: None,
        }
    }

    /// `main() -> Result<(), Error>` prints `Error: {:?}`: the readable text, not a dump.
    #[test]
    fn debug_reads_like_display_and_the_alternate_form_shows_the_structure() {
        let down = || NodeOutcome::Unreachable("connection refused".into());
        let e = Error::Unavailable(report(
            Op::Acquire,
            vec![down(), down(), NodeOutcome::Rejected],
        ));
        let text = "unavailable: 0/3 granted (quorum 2); node 0 (127.0.0.1:7000): connection \
                    refused; node 1 (127.0.0.1:7001): connection refused; node 2 \
                    (127.0.0.1:7002): held by another owner";
        assert_eq!(e.to_string(), text);
        assert_eq!(format!("{e:?}"), text);
        let dump = format!("{e:#?}");
        assert!(dump.starts_with("Unavailable(\n    Report {\n"), "{dump}");
        assert!(
            dump.contains("op: Acquire,") && dump.contains("NodeReport {"),
            "{dump}"
        );
        let invalid = Error::InvalidInput("empty resource".into());
        assert_eq!(format!("{invalid:?}"), "invalid input: empty resource");
        assert_eq!(
            format!("{invalid:#?}"),
            "InvalidInput(\n    \"empty resource\",\n)"
        );
        assert_eq!(format!("{:#?}", Error::Cancelled), "Cancelled");
    }

    /// A healthy node whose reply the round did not wait for is not said to have failed to
    /// reply: the report says why it was not waited for.
    #[test]
    fn an_outcome_alone_reads_as_words_not_a_dump() {
        let o = NodeOutcome::Unreachable("connection refused".into());
        assert_eq!(o.to_string(), "connection refused");
        assert_eq!(NodeOutcome::Timeout.to_string(), "timeout");
        assert_eq!(
            NodeOutcome::ServerError("ERR x".into()).to_string(),
            "server error: ERR x"
        );
        assert_eq!(NodeOutcome::Pending.to_string(), "not waited for");
    }

    #[test]
    fn a_pending_node_is_described_as_not_waited_for() {
        let down = || NodeOutcome::Unreachable("connection refused".into());
        let impossible = report(Op::Acquire, vec![down(), down(), NodeOutcome::Pending]);
        assert_eq!(
            Error::Unavailable(impossible).to_string(),
            "unavailable: 0/3 granted (quorum 2); node 0 (127.0.0.1:7000): connection refused; \
             node 1 (127.0.0.1:7001): connection refused; node 2 (127.0.0.1:7002): not waited \
             for: a quorum was already impossible"
        );
        let mut reached = report(
            Op::Acquire,
            vec![
                NodeOutcome::Success,
                NodeOutcome::Success,
                NodeOutcome::Pending,
            ],
        );
        reached.detail = Some("validity exhausted".into());
        assert!(
            Error::NotAcquired(reached)
                .to_string()
                .ends_with("node 2 (127.0.0.1:7002): not waited for: a quorum had already granted")
        );
        let release = report(Op::Release, vec![down(), down(), NodeOutcome::Pending]);
        assert!(Error::Unavailable(release).to_string().ends_with(
            "node 2 (127.0.0.1:7002): sent, not waited for: a quorum was already impossible"
        ));
    }
}
