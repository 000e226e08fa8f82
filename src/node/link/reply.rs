//! What a link does with each reply it reads: hands it to the entry it answers (a part of a
//! multi-part entry is kept until the entry's last part; a grant waited on by `WAIT` keeps its
//! reply until the `WAIT`'s), answers handshake and health entries for the node itself, and
//! a command's entry for its caller: a `NOSCRIPT` answered with the `EVAL` form, a lost
//! marker told to the node, a `READONLY` server dropped.

use std::time::Instant;

use std::sync::Arc;

use super::{Entry, Expect, Link, Purpose, Redirected, Resend, State};
use crate::error::NodeOutcome;
use crate::node::call::{Call, Slot, Wakes, wake_later};
use crate::node::conn::unreachable_from;
use crate::node::health::{Action, ConnSettings, Hs};
use crate::resp::Reply;

/// A grant sent after `ASK` to a shard importing the slot answered `NOMARKER`: the slot's
/// marker may not have moved yet. It is no lost keyspace: the grant does not count (and is
/// undone), and says why.
fn marker_not_moved_yet(asked: bool, reply: Reply) -> Reply {
    if !(asked && reply.is_error_code("NOMARKER")) {
        return reply;
    }
    Reply::Error {
        code: "ERR".into(),
        text: "the slot is moving, and its restart-quarantine marker has not reached this \
               shard yet: not counted"
            .into(),
    }
}

/// A cluster's redirect reply (`MOVED`, `ASK`).
fn is_redirect(reply: &Reply) -> bool {
    reply.is_error_code("MOVED") || reply.is_error_code("ASK")
}

impl Link {
    /// Hands one reply to the entry it answers. A part of a multi-part entry is kept until
    /// the entry's last part arrives; the entry then answers with the combined reply, exactly
    /// where a single reply would have been dispatched.
    pub(super) fn dispatch(
        &self,
        st: &mut State,
        reply: Reply,
        now: Instant,
        s: &ConnSettings,
        w: &mut Wakes,
    ) {
        if let Some(main) = st.acked.take() {
            // The reply of the WAIT behind the first entry's command: the entry is complete.
            let acks = match reply {
                Reply::Int(n) => u64::try_from(n).unwrap_or(0),
                _ => 0, // WAIT refused (an error): no replica is known to have it
            };
            let entry = st.pending.pop_front().expect("an entry waits for its WAIT");
            return self.answer(st, entry, main, Some(acks), now, s, w);
        }
        if let Some(Purpose::Command { asked: true, .. }) = st.pending.front().map(|e| &e.purpose) {
            // An ASKING's reply comes before each of the entry's own.
            if st.asked_oks == st.parts.len() {
                st.asked_oks += 1;
                return;
            }
        }
        let reply = match st.pending.front().map(|e| &e.purpose) {
            None => {
                let what = NodeOutcome::Protocol("unsolicited reply".into());
                return self.fail_all(st, what, now, s, w);
            }
            Some(Purpose::Command {
                expect: Expect::Parts(c),
                ..
            }) => {
                let c = *c;
                st.parts.push(reply);
                if st.parts.len() < c.parts {
                    return; // the entry stays first: its next parts are the next replies
                }
                let combined = (c.f)(&st.parts);
                st.parts.clear();
                combined
            }
            Some(_) => reply,
        };
        if let Some(Purpose::Command { ack: true, .. }) = st.pending.front().map(|e| &e.purpose) {
            st.acked = Some(reply); // the entry stays first: its WAIT's reply is next
            return;
        }
        let entry = st.pending.pop_front().expect("looked at above");
        st.asked_oks = 0;
        match entry.purpose {
            Purpose::Health(kind) => {
                let _ = self.node.on_handshake_reply(kind, &reply, now);
            }
            Purpose::Sentinel(kind) => self.on_sentinel_reply(st, kind, &reply, now, s, w),
            Purpose::Handshake(kind) => {
                self.on_handshake_entry(st, &entry, kind, &reply, now, s, w)
            }
            Purpose::Command { .. } => self.answer(st, entry, reply, None, now, s, w),
        }
    }

    /// The reply to a handshake entry: the first one is a round-trip sample; a refusal fails
    /// the connection; the last one releases what was held behind the handshake.
    #[allow(clippy::too_many_arguments)] // a reply, what it answers, and the link's context
    fn on_handshake_entry(
        &self,
        st: &mut State,
        entry: &Entry,
        kind: Hs,
        reply: &Reply,
        now: Instant,
        s: &ConnSettings,
        w: &mut Wakes,
    ) {
        if entry.timed {
            // The first reply of a new connection: a TCP handshake and one command,
            // so at most about two round trips. Taken as it is: too long a timeout
            // costs nothing while a quorum answers, too short a one a failed step.
            self.node
                .rtt
                .sample(now.saturating_duration_since(entry.sent_at));
        }
        match self.node.on_handshake_reply(kind, reply, now) {
            Err(what) => {
                // WRONGPASS, NOAUTH, an out-of-range SELECT, cluster mode: the node is
                // unusable as configured. The commands held behind the handshake were
                // never sent.
                return self.fail_all(st, what, now, s, w);
            }
            Ok(Action::WriteMarker(run_id)) => {
                // Ahead of what is held behind the handshake: those grants need it.
                for cmd in self.node.marker_write_cmds(&run_id) {
                    self.push_health(st, &cmd, Hs::MarkerWrite, true, now);
                }
            }
            Ok(Action::ReadMarker { note, marker }) => {
                // Part of the handshake: nothing held behind it runs before it is read.
                for (key, kind) in [(note, Hs::LossNote), (marker, Hs::Marker)] {
                    let mut cmd = Vec::new();
                    crate::resp::pack(&[b"GET", &key], &mut cmd);
                    self.push_handshake(st, &cmd, kind, now);
                }
            }
            Ok(Action::None) => {}
        }
        let more = matches!(
            st.pending.front(),
            Some(Entry {
                purpose: Purpose::Handshake(_),
                ..
            })
        );
        if !more {
            self.node.record_success();
            if let Some(c) = st.conn.as_mut() {
                c.handshake_done(); // what was held is written by the next flush
            }
        }
    }

    /// The reply to a command's entry (a multi-part entry's combined one): a `NOSCRIPT`
    /// answered with the `EVAL` form, a lost marker told to the node, the reply handed to its
    /// caller if it still waits, with the replicas its `WAIT` counted (`acks`).
    #[allow(clippy::too_many_arguments)] // a reply, what it answers, and the link's context
    fn answer(
        &self,
        st: &mut State,
        entry: Entry,
        reply: Reply,
        acks: Option<u64>,
        now: Instant,
        s: &ConnSettings,
        w: &mut Wakes,
    ) {
        let (sent_at, timed, work) = (entry.sent_at, entry.timed, entry.work);
        let Purpose::Command {
            call,
            expect,
            ack,
            asked,
            resend,
        } = entry.purpose
        else {
            return; // dispatch hands over command entries only
        };
        if reply.is_error_code("NOSCRIPT")
            && let Expect::One(Some(fb)) = &expect
        {
            let again = (call, ack, resend.map(|r| r.hops));
            return self.send_eval(st, Arc::clone(fb), again, (sent_at, work), now, s, w);
        }
        if reply.is_error_code("READONLY") {
            return self.no_longer_master(st, call, &reply, now, s, w);
        }
        self.node.record_success();
        let reply = marker_not_moved_yet(asked, reply);
        if reply.is_error_code("NOMARKER") {
            // A grant found the quarantine marker gone: seen here, whether or not its caller
            // still waits, so that the loss counts from now.
            if let Some(value) = self.node.marker_lost(now) {
                // A durable node: its marker is written back, ahead of later commands.
                for cmd in self.node.marker_write_cmds(&value) {
                    self.push_health(st, &cmd, Hs::MarkerWrite, false, now);
                }
            }
        }
        // A redirect: its caller follows it; with no caller left, it is queued for the
        // manager's next step (see `Redirected`).
        let redirect = resend.is_some() && is_redirect(&reply);
        let queued = redirect.then(|| (reply.clone(), expect.clone()));
        let mut delivered = false;
        if let Some(c) = call {
            let latency = now.saturating_duration_since(sent_at);
            if c.fill(
                c.slot_for(self.node.index),
                Slot::Reply {
                    reply,
                    latency,
                    acks,
                },
            ) {
                delivered = true;
                // Read while its caller still waited, so promptly: a fair sample (a reply
                // nobody waited for may have been read long after it came).
                if timed {
                    self.node.rtt.sample(latency);
                }
                wake_later(w, &c);
            }
        }
        if let (false, Some((reply, expect)), Some(resend)) = (delivered, queued, resend) {
            self.queue_redirect(Redirected {
                resend,
                expect,
                reply,
                asked: String::new(),
            });
        }
    }

    /// The script cache was flushed: sends the `EVAL` form `fb` once, for the same call (or
    /// for nobody), behind whatever is queued already (written by the caller's flush once the
    /// lock is released).
    #[allow(clippy::too_many_arguments)] // the entry's parts, and the link's context
    fn send_eval(
        &self,
        st: &mut State,
        fb: Arc<[u8]>,
        (call, ack, hops): (Option<Call>, bool, Option<u8>),
        (sent_at, work): (Instant, std::time::Duration),
        now: Instant,
        s: &ConnSettings,
        w: &mut Wakes,
    ) {
        let wait = self.node.ack.as_ref().filter(|_| ack);
        let sent = st.conn.as_mut().map(|c| {
            c.send(&fb)
                .and_then(|()| wait.map_or(Ok(()), |a| c.send(&a.cmd)))
        });
        if let Some(Err(e)) = sent {
            return self.fail_all(st, unreachable_from(&e), now, s, w);
        }
        st.pending.push_back(Entry {
            purpose: Purpose::Command {
                call,
                expect: Expect::One(None),
                ack,
                asked: false,
                resend: hops.map(|hops| Resend {
                    cmd: Arc::clone(&fb),
                    hops,
                }),
            },
            sent_at,
            timed: false,
            work,
        });
    }

    /// Queues a redirect nobody follows for the cluster node's next step, naming this shard's
    /// host (a redirect may mean "the host you asked").
    fn queue_redirect(&self, mut r: Redirected) {
        let Some(q) = &self.redirected else { return };
        r.asked = (self.node.shard.as_ref()).map_or(String::new(), |s| s.endpoint.host.clone());
        q.lock().unwrap_or_else(|p| p.into_inner()).push(r);
    }

    /// A `READONLY` reply: the server became a replica under this connection (a failover that
    /// kept it alive). The connection is dropped, and the next one finds the master again.
    fn no_longer_master(
        &self,
        st: &mut State,
        call: Option<Call>,
        reply: &Reply,
        now: Instant,
        s: &ConnSettings,
        w: &mut Wakes,
    ) {
        let what = NodeOutcome::ServerError(format!(
            "the server is no longer a master ({})",
            reply.describe()
        ));
        if let Some(c) = call
            && c.fill(c.slot_for(self.node.index), Slot::Failed(what.clone()))
        {
            wake_later(w, &c);
        }
        self.fail_all(st, what, now, s, w);
    }
}
