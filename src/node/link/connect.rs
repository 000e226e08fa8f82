//! Starting a link's connection: to the node's address, its handshake first; or, for a
//! failover group, to its master once found. Before a group's connection reaches the master,
//! it asks the group's sentinels where the master is, one sentinel at a time, over the same connection slot (see
//! node/health/sentinel.rs for the rule). Commands written meanwhile are held, and handed from
//! each connection to the next: the master's handshake goes before them, as on any new
//! connection. Everything happens in the callers' `poll(2)`, under their deadlines: a silent
//! sentinel is given up on when its patience runs out ([`Link::probe`]), a refused or closed
//! one at once.

use std::io;
use std::time::{Duration, Instant};

use super::{Entry, Link, Purpose, State};
use crate::error::NodeOutcome;
use crate::node::call::Wakes;
use crate::node::conn::{Conn, unreachable_from};
use crate::node::health::{self, Ask, ConnSettings, Discovery, Endpoint, Group, Next};
use crate::resp::Reply;

impl Link {
    /// Starts a new connection: to the node, or for a failover group to its first sentinel.
    pub(super) fn connect(
        &self,
        st: &mut State,
        now: Instant,
        settings: &ConnSettings,
        wakes: &mut Wakes,
    ) -> Result<(), NodeOutcome> {
        if let Some(skipped) = self.node.backoff(now) {
            return Err(skipped);
        }
        if self.node.group.is_some() {
            return self.connect_group(st, now, settings, wakes);
        }
        // A node named by a host name looks it up again, within half the connect timeout.
        let conn = match self.node.address(now + settings.connect_timeout / 2) {
            Some(addr) => Conn::connect(addr, &self.node.handshake, self.node.tls.as_ref()),
            None => Err(io::Error::new(
                io::ErrorKind::AddrNotAvailable,
                "no address",
            )),
        };
        match conn {
            Ok(mut c) => {
                // A TLS handshake still silent halfway through the connect timeout is probed.
                c.probe_from(now + settings.connect_timeout / 2);
                self.node.connected();
                st.conn = Some(c);
                st.generation += 1;
                st.parts.clear(); // nothing is owed on a new connection
                st.asked_oks = 0;
                let entries = self.handshake_entries(now, self.node.tls.is_none());
                st.pending.extend(entries);
                Ok(())
            }
            Err(e) => {
                let outcome = unreachable_from(&e);
                self.node.record_failure(now, &outcome, settings, true);
                Err(outcome)
            }
        }
    }

    /// The entries of a new connection's handshake; `timed`: its first reply is a round-trip
    /// sample (over TLS it also waits for the TLS handshake, round trips and signatures: no
    /// fair sample).
    fn handshake_entries(&self, now: Instant, timed: bool) -> impl Iterator<Item = Entry> + '_ {
        self.node
            .handshake_kinds
            .iter()
            .enumerate()
            .map(move |(i, k)| Entry {
                purpose: Purpose::Handshake(*k),
                sent_at: now,
                timed: timed && i == 0,
                work: Duration::ZERO,
            })
    }

    fn group(&self) -> &Group {
        self.node.group.as_ref().expect("a failover group's link")
    }

    /// Starts a connection to a failover group: its first sentinel is asked for the master.
    pub(super) fn connect_group(
        &self,
        st: &mut State,
        now: Instant,
        s: &ConnSettings,
        w: &mut Wakes,
    ) -> Result<(), NodeOutcome> {
        st.discovery = Some(Discovery::new(now, Group::patience(s.connect_timeout)));
        self.ask_sentinel(st, 0, now, s, w);
        match st.conn {
            Some(_) => Ok(()),
            None => Err(self
                .node
                .backoff(now)
                .unwrap_or_else(|| NodeOutcome::Sentinel("no sentinel could be asked".into()))),
        }
    }

    /// Replaces the connection with `next` (its handshake's entries first), handing on the
    /// commands held behind the old one's handshake.
    fn replace_conn(&self, st: &mut State, mut next: Conn, entries: Vec<Entry>) {
        if let Some(mut old) = st.conn.take() {
            let held = old.take_held();
            // `next` is starting: these are held behind its handshake in turn.
            let _ = next.send(&held);
        }
        st.conn = Some(next);
        st.generation += 1;
        st.parts.clear();
        st.pending.retain(|e| {
            !matches!(
                e.purpose,
                Purpose::Sentinel(_) | Purpose::Handshake(_) | Purpose::Health(_)
            )
        });
        for e in entries.into_iter().rev() {
            st.pending.push_front(e);
        }
    }

    /// Asks sentinel `i` (a new connection).
    fn ask_sentinel(
        &self,
        st: &mut State,
        i: usize,
        now: Instant,
        s: &ConnSettings,
        w: &mut Wakes,
    ) {
        let g = self.group();
        let at = g.sentinel_addr(i, now + Group::patience(s.connect_timeout));
        match Conn::connect(at, &g.hello, g.sentinel_tls[i].as_ref()) {
            Ok(c) => {
                let entries = g
                    .hello_kinds
                    .iter()
                    .map(|k| Entry {
                        purpose: Purpose::Sentinel(*k),
                        sent_at: now,
                        timed: false,
                        work: Duration::ZERO,
                    })
                    .collect();
                self.replace_conn(st, c, entries);
            }
            Err(e) => {
                let why = health::describe(&unreachable_from(&e));
                self.sentinel_failed(st, why, now, s, w);
            }
        }
    }

    /// The sentinel being asked failed (unreachable, silent, refused our credentials): the
    /// next is asked, or the search ends.
    pub(super) fn sentinel_failed(
        &self,
        st: &mut State,
        why: String,
        now: Instant,
        s: &ConnSettings,
        w: &mut Wakes,
    ) {
        let g = self.group();
        let Some(d) = st.discovery.as_mut() else {
            return;
        };
        let next = d.failed(g, why, now);
        self.follow(st, next, now, s, w);
    }

    /// A reply from the sentinel being asked.
    pub(super) fn on_sentinel_reply(
        &self,
        st: &mut State,
        kind: Ask,
        reply: &Reply,
        now: Instant,
        s: &ConnSettings,
        w: &mut Wakes,
    ) {
        match (kind, reply) {
            (Ask::Auth, Reply::Error { text, .. }) => {
                let why = format!("refused the sentinel credentials: {text}");
                self.sentinel_failed(st, why, now, s, w);
            }
            (Ask::Auth, _) => {}
            (Ask::Master, r) => {
                let g = self.group();
                let Some(d) = st.discovery.as_mut() else {
                    return;
                };
                let next = d.answered(g, r, now);
                self.follow(st, next, now, s, w);
            }
        }
    }

    fn follow(&self, st: &mut State, next: Next, now: Instant, s: &ConnSettings, w: &mut Wakes) {
        match next {
            Next::Ask(i) => self.ask_sentinel(st, i, now, s, w),
            Next::Master(addr) => self.connect_master(st, addr, now, s, w),
            Next::Fail(why) => {
                st.discovery = None;
                self.fail_all(st, NodeOutcome::Sentinel(why), now, s, w);
            }
        }
    }

    /// Connects to the master the sentinels named (a host name resolved within a sentinel's
    /// patience at most); its handshake confirms `role:master`.
    fn connect_master(
        &self,
        st: &mut State,
        named: Endpoint,
        now: Instant,
        s: &ConnSettings,
        w: &mut Wakes,
    ) {
        st.discovery = None;
        let g = self.group();
        let by = now + Group::patience(s.connect_timeout);
        let addr = match g.lookups.resolve_by(&named.host, named.port, by) {
            Ok(a) => a,
            Err(why) => {
                let why = format!("the sentinels name the master {named}: {why}");
                return self.fail_all(st, NodeOutcome::Sentinel(why), now, s, w);
            }
        };
        self.node.set_master(addr, &named.host);
        // The certificate is checked against the name the sentinels gave (an address or a
        // host name).
        let tls = match g.master_tls.as_ref().map(|c| c.client(&named.host)) {
            Some(Err(why)) => return self.fail_all(st, NodeOutcome::Tls(why), now, s, w),
            Some(Ok(c)) => Some(c),
            None => None,
        };
        match Conn::connect(addr, &self.node.handshake, tls.as_ref()) {
            Ok(mut c) => {
                c.probe_from(now + s.connect_timeout / 2);
                self.node.connected();
                let entries = self.handshake_entries(now, false).collect();
                self.replace_conn(st, c, entries);
            }
            Err(e) => self.fail_all(st, unreachable_from(&e), now, s, w),
        }
    }
}
