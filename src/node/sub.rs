//! One node's subscriber connection: the channels of released resources, for waiters.
//!
//! A connection of its own (a subscribed connection can carry nothing else), non-blocking and
//! driven by one thread, the manager's listener (`notify`): it says what to poll and when its
//! next deadline is, and turns what the node sends into [`SubEvent`]s. It starts with the
//! same `AUTH` and `SELECT` as every connection to the node, holds its `SUBSCRIBE`s until
//! they succeeded, gives up on a connect or handshake that takes longer than the connect
//! timeout plus the stale limit, and reconnects after a failure with the node's backoff
//! rules (doubling from the minimum to the maximum). Its messages are only hints to try
//! again, so they never need the trust a grant does: a node in restart quarantine may still
//! wake a waiter, whose attempt then counts that node's grant as any attempt does.

use std::net::SocketAddr;
use std::os::fd::RawFd;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use crate::mux::{Interest, Readiness};
use crate::node::conn::{self, Conn};
use crate::node::health::{ConnSettings, Node, auth_and_select};
use crate::resp::{self, ReadError, Reply};
use crate::tls;

/// What a subscriber connection reports.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum SubEvent {
    /// Connected and through its handshake: it has no subscription yet.
    Up,
    /// The connection failed or was closed: every subscription on it is gone.
    Down(String),
    /// The node confirmed a subscription.
    Subscribed(Vec<u8>),
    /// A release was announced on this channel (the channel, then the message: the released
    /// lease's token, which tells one release announced by several nodes from several).
    Message(Vec<u8>, Vec<u8>),
}

/// The subscriber connection to one node.
pub(crate) struct Sub {
    addr_text: String,
    /// The node's master address (a failover group's changes with its master).
    master: Arc<Mutex<Option<SocketAddr>>>,
    /// A group's master as its sentinels named it (what its certificate is checked against).
    master_name: Arc<Mutex<Option<String>>>,
    tls: Option<tls::Client>,
    /// For a `rediss+sentinel://` group: what the master's TLS client is made from.
    master_tls: Option<Arc<tls::Connector>>,
    handshake: Vec<u8>,
    handshake_len: usize,
    conn: Option<Conn>,
    /// Handshake replies still to come on `conn`.
    handshake_left: usize,
    /// When `conn` started connecting, while it is not up yet.
    starting_since: Option<Instant>,
    failures: u32,
    retry_at: Option<Instant>,
}

impl Sub {
    /// A subscriber for `node`, not connected.
    pub(crate) fn new(node: &Node) -> Sub {
        let (handshake, handshake_len) = auth_and_select(&node.addr);
        Sub {
            addr_text: node.addr_text.clone(),
            master: Arc::clone(&node.master_addr),
            master_name: Arc::clone(&node.master_name),
            tls: node.tls.clone(),
            master_tls: node.group.as_ref().and_then(|g| g.master_tls.clone()),
            handshake,
            handshake_len,
            conn: None,
            handshake_left: 0,
            starting_since: None,
            failures: 0,
            retry_at: None,
        }
    }

    /// Not connected, and the backoff allows a new connection now.
    pub(crate) fn may_connect(&self, now: Instant) -> bool {
        self.conn.is_none() && self.retry_at.is_none_or(|t| now >= t)
    }

    /// Starts connecting (its handshake is queued; subscriptions may be queued behind it).
    pub(crate) fn connect(&mut self, now: Instant, s: &ConnSettings, ev: &mut Vec<SubEvent>) {
        let Some(addr) = *self.master.lock().unwrap_or_else(|p| p.into_inner()) else {
            return self.fail(now, "no master address yet".into(), s, ev);
        };
        let name = self
            .master_name
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        let tls = match &self.master_tls {
            Some(c) => match c.client(&name.unwrap_or_else(|| addr.ip().to_string())) {
                Ok(c) => Some(c),
                Err(why) => return self.fail(now, why, s, ev),
            },
            None => self.tls.clone(),
        };
        match Conn::connect(addr, &self.handshake, tls.as_ref()) {
            Ok(c) => {
                self.conn = Some(c);
                self.handshake_left = self.handshake_len;
                self.starting_since = Some(now);
                if self.handshake_len == 0 {
                    // Nothing to wait for once the TCP connect completes.
                    self.check_up(ev);
                }
            }
            Err(e) => self.fail(now, format!("connect: {e}"), s, ev),
        }
    }

    /// Subscribes to `channels` (queued behind the handshake if it has not completed).
    pub(crate) fn subscribe(&mut self, channels: &[&[u8]], now: Instant, s: &ConnSettings) {
        self.command(b"SUBSCRIBE", channels, now, s);
    }

    /// Unsubscribes from `channels`.
    pub(crate) fn unsubscribe(&mut self, channels: &[&[u8]], now: Instant, s: &ConnSettings) {
        self.command(b"UNSUBSCRIBE", channels, now, s);
    }

    fn command(&mut self, verb: &[u8], channels: &[&[u8]], now: Instant, s: &ConnSettings) {
        if channels.is_empty() {
            return;
        }
        let Some(c) = self.conn.as_mut() else { return };
        let mut args: Vec<&[u8]> = Vec::with_capacity(channels.len() + 1);
        args.push(verb);
        args.extend_from_slice(channels);
        let mut cmd = Vec::new();
        resp::pack(&args, &mut cmd);
        if let Err(e) = c.send(&cmd) {
            let mut ev = Vec::new();
            self.fail(now, e.to_string(), s, &mut ev);
        }
    }

    /// What to poll for, while connected.
    pub(crate) fn interest(&self) -> Option<(RawFd, Interest)> {
        self.conn.as_ref().map(|c| (c.fd(), c.interest()))
    }

    /// When this connection next needs attention without any event: the end of its backoff
    /// (to reconnect), or the end of its connect-and-handshake allowance.
    pub(crate) fn deadline(&self, s: &ConnSettings) -> Option<Instant> {
        match (&self.conn, self.starting_since) {
            (None, _) => self.retry_at,
            (Some(_), Some(t)) => Some(t + s.connect_timeout + s.stale_limit),
            (Some(_), None) => None,
        }
    }

    /// Acts on the deadline: a connection not up in time is given up.
    pub(crate) fn on_deadline(&mut self, now: Instant, s: &ConnSettings, ev: &mut Vec<SubEvent>) {
        if let (Some(_), Some(t)) = (&self.conn, self.starting_since)
            && now >= t + s.connect_timeout + s.stale_limit
        {
            self.fail(now, "connect or handshake timeout".into(), s, ev);
        }
    }

    /// Does the connection's non-blocking I/O after `poll(2)` reported `ready`.
    pub(crate) fn on_ready(
        &mut self,
        ready: Readiness,
        now: Instant,
        s: &ConnSettings,
        ev: &mut Vec<SubEvent>,
    ) {
        if let Err(why) = self.io(ready, ev) {
            self.fail(now, why, s, ev);
        }
    }

    /// Writes what is queued, if the socket takes it.
    pub(crate) fn flush(&mut self, now: Instant, s: &ConnSettings, ev: &mut Vec<SubEvent>) {
        if let Err(why) = self.write() {
            self.fail(now, why, s, ev);
        }
    }

    fn write(&mut self) -> Result<(), String> {
        let Some(c) = self.conn.as_mut() else {
            return Ok(());
        };
        if let Some((sock, buf)) = c.take_output().map_err(|e| e.to_string())? {
            let n = conn::write_some(&sock, &buf).map_err(|e| e.to_string())?;
            c.put_back(buf, n).map_err(|e| e.to_string())?;
        }
        Ok(())
    }

    fn io(&mut self, ready: Readiness, ev: &mut Vec<SubEvent>) -> Result<(), String> {
        let Some(c) = self.conn.as_mut() else {
            return Ok(());
        };
        c.on_writable(ready).map_err(|e| format!("connect: {e}"))?;
        self.check_up(ev);
        self.write()?;
        loop {
            let Some(c) = self.conn.as_mut() else {
                return Ok(());
            };
            let reply = match c.next_reply() {
                Ok(Some(r)) => r,
                Ok(None) => {
                    // A TLS handshake may have completed: with no handshake commands of its
                    // own, the connection is up now; what the read queued goes out.
                    self.check_up(ev);
                    return self.write();
                }
                Err(ReadError::Closed) => return Err("connection closed by the node".into()),
                Err(ReadError::Io(e)) => return Err(e.to_string()),
                Err(ReadError::Protocol(p)) => return Err(format!("protocol error: {p}")),
                Err(ReadError::Tls(t)) => return Err(format!("TLS failed: {t}")),
            };
            if self.handshake_left > 0 {
                if let Reply::Error { text, .. } = &reply {
                    return Err(format!("handshake failed: {text}"));
                }
                self.handshake_left -= 1;
                if self.handshake_left == 0 {
                    self.check_up(ev);
                    self.write()?;
                }
                continue;
            }
            if let Some(e) = event(reply)? {
                ev.push(e);
            }
        }
    }

    /// Marks the connection up once connected with its handshake answered.
    fn check_up(&mut self, ev: &mut Vec<SubEvent>) {
        if self.starting_since.is_none() || self.handshake_left > 0 {
            return;
        }
        let Some(c) = self.conn.as_mut() else { return };
        // Every handshake reply is in (or none was asked for): what was held may go out.
        // While still connecting this changes nothing (the connect completes it).
        c.handshake_done();
        if !c.is_starting() {
            self.starting_since = None;
            self.failures = 0;
            self.retry_at = None;
            ev.push(SubEvent::Up);
        }
    }

    fn fail(&mut self, now: Instant, why: String, s: &ConnSettings, ev: &mut Vec<SubEvent>) {
        self.conn = None;
        self.starting_since = None;
        self.handshake_left = 0;
        let shift = self.failures.min(20);
        self.failures = self.failures.saturating_add(1);
        let wait = s
            .backoff_min
            .saturating_mul(1u32 << shift)
            .min(s.backoff_max);
        self.retry_at = Some(now + wait);
        log::debug!("subscriber to {}: {why}", self.addr_text);
        ev.push(SubEvent::Down(why));
    }
}

/// What one reply on a subscribed connection means.
fn event(reply: Reply) -> Result<Option<SubEvent>, String> {
    let Reply::Array(mut parts) = reply else {
        return match reply {
            Reply::Error { text, .. } => Err(format!("server error: {text}")),
            other => Err(format!("unexpected reply: {}", other.describe())),
        };
    };
    let kind = match parts.first() {
        Some(Reply::Bulk(k)) => k.clone(),
        _ => return Err("unexpected pub/sub reply".into()),
    };
    let channel = match parts.get_mut(1) {
        Some(Reply::Bulk(c)) => std::mem::take(c),
        _ => Vec::new(),
    };
    Ok(match kind.as_slice() {
        b"subscribe" => Some(SubEvent::Subscribed(channel)),
        b"message" => {
            let payload = match parts.get_mut(2) {
                Some(Reply::Bulk(p)) => std::mem::take(p),
                _ => Vec::new(),
            };
            Some(SubEvent::Message(channel, payload))
        }
        // Unsubscribe confirmations and pongs change nothing.
        _ => None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bulk(s: &str) -> Reply {
        Reply::Bulk(s.as_bytes().to_vec())
    }

    #[test]
    fn pub_sub_replies_become_events() {
        let sub = Reply::Array(vec![bulk("subscribe"), bulk("redlock:a"), Reply::Int(1)]);
        assert_eq!(
            event(sub).unwrap(),
            Some(SubEvent::Subscribed(b"redlock:a".to_vec()))
        );
        let msg = Reply::Array(vec![bulk("message"), bulk("redlock:a"), bulk("tok")]);
        assert_eq!(
            event(msg).unwrap(),
            Some(SubEvent::Message(b"redlock:a".to_vec(), b"tok".to_vec()))
        );
        let unsub = Reply::Array(vec![bulk("unsubscribe"), bulk("redlock:a"), Reply::Int(0)]);
        assert_eq!(event(unsub).unwrap(), None);
        assert!(event(Reply::Int(3)).is_err());
        assert!(event(Reply::Array(vec![Reply::Int(1)])).is_err());
        let err = Reply::Error {
            code: "NOPERM".into(),
            text: "NOPERM no permissions".into(),
        };
        assert!(event(err).unwrap_err().contains("NOPERM"));
    }
}
