//! What the caretaker (quorum/care.rs) asks of a link: whether it needs a reader although
//! no caller waits on it, and to become that reader.

use super::{Driver, Link, State};
use crate::node::call::Call;

impl Link {
    /// True when the connection has work in progress that needs a reader even if no caller
    /// waits: a handshake whose commands are held behind it, or output the socket has not
    /// taken yet. Left alone, the held commands would be written only at the next round on
    /// this node, however late (see the caretaker in quorum/). While [draining](Self::drain),
    /// also any reply still owed.
    pub(super) fn needs_care(st: &State) -> bool {
        st.conn.as_ref().is_some_and(|c| {
            c.has_output() || (!st.pending.is_empty() && (c.is_starting() || st.draining))
        })
    }

    /// Its manager is gone: the link needs care until its connection owes no reply, so that
    /// the caretaker reads it to the end before it is closed (why: quorum/care.rs). True when
    /// nobody drives it and it needs care: the caller hands it to the caretaker.
    pub(crate) fn drain(&self) -> bool {
        let mut st = self.lock();
        st.draining = true;
        st.driver.is_none() && Self::needs_care(&st)
    }

    /// Makes `call` (the caretaker's) the driver of this link if nobody drives it and it needs
    /// care; true if it did.
    pub(crate) fn adopt(&self, call: &Call) -> bool {
        let mut st = self.lock();
        if st.driver.is_some() || !Self::needs_care(&st) {
            return false;
        }
        st.driver = Some(Driver {
            call: call.round,
            waker: call.waker_arc(),
        });
        true
    }

    /// True while the link needs care (see [`adopt`](Self::adopt)).
    pub(crate) fn wants_care(&self) -> bool {
        Self::needs_care(&self.lock())
    }

    /// True when nobody drives the link although it needs care.
    pub(crate) fn orphaned(&self) -> bool {
        let st = self.lock();
        st.driver.is_none() && Self::needs_care(&st)
    }
}
