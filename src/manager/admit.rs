//! [`Redlock::admit_new_nodes`]: the operator's word that nodes are new.

use super::Redlock;
use crate::error::Error;

impl Redlock {
    /// Trusts nodes the operator **knows are new** (they never held a lock of this library),
    /// so that they count at once instead of after a restart quarantine.
    ///
    /// Restart quarantine cannot tell a new server from one that restarted empty or was
    /// flushed: neither has a marker. So when nodes are added to a cluster that has met this
    /// library before (one used node and two new ones; growing from 3 nodes to 5), the new
    /// ones wait out the maximum TTL ([`QuarantineReason::NoMarker`]). If a node you admit did
    /// in fact hold a lock and lose it, a second holder may be granted that lock before the
    /// first one's TTL is over: admit only servers you started empty yourself.
    ///
    /// `nodes` are indexes in the configuration (as reports name them: "node 2"). Each one is
    /// contacted; one already trusted is left as it is; one quarantined for a reason a new
    /// server can have ([`NoMarker`](crate::QuarantineReason::NoMarker),
    /// [`Young`](crate::QuarantineReason::Young),
    /// [`Undecided`](crate::QuarantineReason::Undecided)) is trusted and its marker written;
    /// the call returns once every marker write is confirmed.
    ///
    /// Errors: [`Error::InvalidInput`] for an index out of range, a cluster node
    /// (`redis+cluster://`: its shards follow the quarantine rules), restart quarantine turned
    /// off, or a node quarantined for what it did (a restart this manager saw, a promotion, a
    /// marker of another server: those are not new); [`Error::Unavailable`] when a node does
    /// not answer or its marker write is not confirmed (nodes before it in `nodes` may have
    /// been admitted).
    ///
    /// [`QuarantineReason::NoMarker`]: crate::QuarantineReason::NoMarker
    /// [`QuarantineReason`]: crate::QuarantineReason
    pub fn admit_new_nodes(&self, nodes: &[usize]) -> Result<(), Error> {
        let sh = &self.shared;
        let timeout = sh.budget.release_bound() + sh.cluster.settings().connect_timeout;
        sh.cluster.admit(nodes, timeout)
    }
}
