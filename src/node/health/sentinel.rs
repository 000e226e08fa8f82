//! Finding a failover group's master: what its sentinels are asked, what their answers mean,
//! and when the answers are enough. No sockets: the link asks one sentinel at a time over an
//! ordinary connection (see node/link.rs) and hands each answer or failure here.
//!
//! The rule. The sentinels are asked in the order the URL lists them, one at a time, each
//! with `SENTINEL get-master-addr-by-name SERVICE` on a new connection (after `AUTH` when
//! [`Config::sentinel_auth`](crate::Config::sentinel_auth) is set). Asking stops as soon as a
//! majority of the listed sentinels name the same address: that is the master. Otherwise every
//! sentinel is asked, and the master is the address the answering sentinels name, if they all
//! name the same one. Two different addresses are an error (the sentinels disagree: one of
//! them has not seen a failover yet, or they watch different groups under one name), as is no
//! address at all (no sentinel answered, or none knows the service). A sentinel that does not
//! answer within its share of the connect timeout is skipped. Whatever they name must then
//! say `role:master` in the master's own handshake (see handshake.rs): a sentinel that has not
//! seen a failover yet names a server that is now a replica, and a connection to it is
//! refused. Sentinels that announce host names (`announce-hostnames yes`) are compared by the
//! name they give, which the link then resolves by a sentinel's patience at most
//! (`config::lookup`; a TLS master is verified against that name). Nothing is cached: every
//! new connection to the group asks again, so a failover (which closes the old master's
//! clients, or leaves its address dead) is followed at the next connection.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use super::Endpoint;
use crate::config::Lookups;
use crate::resp::{self, Reply};
use crate::tls;

/// What the sentinels of a failover group are asked, and how to reach them.
pub(crate) struct Group {
    /// The service (master name) asked for.
    pub service: String,
    /// Each sentinel's address, in the URL's order.
    pub sentinels: Vec<SocketAddr>,
    /// For `rediss+sentinel://`: each sentinel's TLS client (the sentinel's host name), and
    /// what the master's TLS client is made from (the address the sentinels name).
    pub sentinel_tls: Vec<Option<tls::Client>>,
    pub master_tls: Option<std::sync::Arc<tls::Connector>>,
    /// The bytes every connection to a sentinel starts with, and what each reply is for.
    pub hello: Vec<u8>,
    pub hello_kinds: Vec<Ask>,
    /// Host names resolved: the master's, when the sentinels name one, and the sentinels'
    /// own when the URL names them so.
    pub lookups: Lookups,
    /// Each sentinel as the URL names it (host, port), when the manager set them: a name is
    /// looked up again before the sentinel is asked again.
    pub names: Vec<(String, u16)>,
    /// Each sentinel's address as last resolved (starting from `sentinels`), and whether it
    /// was asked yet.
    latest: std::sync::Mutex<Vec<(SocketAddr, bool)>>,
}

/// What a reply from a sentinel answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Ask {
    /// `AUTH` with the sentinels' credentials.
    Auth,
    /// `SENTINEL get-master-addr-by-name SERVICE`.
    Master,
}

impl Group {
    /// The group of `service` at `sentinels`, asked with `auth` (user, password) if given.
    pub(crate) fn new(
        service: &str,
        sentinels: Vec<SocketAddr>,
        auth: Option<(Option<&str>, &str)>,
        sentinel_tls: Vec<Option<tls::Client>>,
        master_tls: Option<std::sync::Arc<tls::Connector>>,
    ) -> Group {
        let mut hello = Vec::new();
        let mut hello_kinds = Vec::new();
        if let Some((user, pw)) = auth {
            match user {
                Some(u) => resp::pack(&[b"AUTH", u.as_bytes(), pw.as_bytes()], &mut hello),
                None => resp::pack(&[b"AUTH", pw.as_bytes()], &mut hello),
            }
            hello_kinds.push(Ask::Auth);
        }
        resp::pack(
            &[b"SENTINEL", b"get-master-addr-by-name", service.as_bytes()],
            &mut hello,
        );
        hello_kinds.push(Ask::Master);
        Group {
            service: service.to_string(),
            sentinels: sentinels.clone(),
            sentinel_tls,
            master_tls,
            hello,
            hello_kinds,
            lookups: Lookups::default(),
            names: Vec::new(),
            latest: std::sync::Mutex::new(sentinels.iter().map(|a| (*a, false)).collect()),
        }
    }

    /// Where sentinel `i` is asked now: the address its URL's host name resolves to by `by`
    /// (looked up again from its second ask on: sentinels that restart elsewhere, as pods
    /// do, keep being found), or else the last address known.
    pub(crate) fn sentinel_addr(&self, i: usize, by: Instant) -> SocketAddr {
        let (last, asked) = {
            let mut l = self.latest.lock().unwrap_or_else(|p| p.into_inner());
            let was = l[i];
            l[i].1 = true;
            was
        };
        let Some((host, port)) = self.names.get(i).filter(|_| asked) else {
            return last;
        };
        let a = self.lookups.refresh(host, *port, by, last);
        self.latest.lock().unwrap_or_else(|p| p.into_inner())[i].0 = a;
        a
    }

    /// How long one sentinel may stay silent before the next is asked: half the connect
    /// timeout, so that a second sentinel still has time within the first step.
    pub(crate) fn patience(connect_timeout: Duration) -> Duration {
        connect_timeout / 2
    }
}

/// What the link does next while finding a master.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Next {
    /// Ask sentinel `i` (a new connection).
    Ask(usize),
    /// Connect to the master the sentinels name (an IP address or a host name, and a port).
    Master(Endpoint),
    /// Give up for this connection: why (every sentinel asked and named).
    Fail(String),
}

/// One search for a group's master: who was asked, what each said.
#[derive(Debug)]
pub(crate) struct Discovery {
    /// The sentinel being asked.
    pub current: usize,
    /// When the current sentinel is given up on.
    pub give_up_at: Instant,
    patience: Duration,
    /// Per sentinel asked: what it said.
    said: Vec<(usize, Said)>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Said {
    Named(Endpoint),
    Unknown,
    Failed(String),
}

impl Discovery {
    /// A search that asks the first sentinel now, giving each `patience`.
    pub(crate) fn new(now: Instant, patience: Duration) -> Discovery {
        Discovery {
            current: 0,
            give_up_at: now + patience,
            patience,
            said: Vec::new(),
        }
    }

    /// The current sentinel answered `SENTINEL get-master-addr-by-name`.
    pub(crate) fn answered(&mut self, g: &Group, reply: &Reply, now: Instant) -> Next {
        let said = match reply {
            Reply::Nil => Said::Unknown,
            Reply::Array(items) => match items.as_slice() {
                [Reply::Bulk(h), Reply::Bulk(p)] => {
                    let host = String::from_utf8_lossy(h);
                    let port = String::from_utf8_lossy(p);
                    match port.parse::<u16>() {
                        Ok(port) if !host.is_empty() => Said::Named(Endpoint {
                            host: host.trim_start_matches('[').trim_end_matches(']').into(),
                            port,
                        }),
                        _ => Said::Failed(format!(
                            "named {host}:{port}, which is not a host and port"
                        )),
                    }
                }
                _ => Said::Failed(format!("answered {}", reply.describe())),
            },
            Reply::Error { text, .. } => Said::Failed(text.clone()),
            other => Said::Failed(format!("answered {}", other.describe())),
        };
        self.record(g, said, now)
    }

    /// The current sentinel failed: unreachable, silent, or refused our credentials.
    pub(crate) fn failed(&mut self, g: &Group, why: String, now: Instant) -> Next {
        self.record(g, Said::Failed(why), now)
    }

    fn record(&mut self, g: &Group, said: Said, now: Instant) -> Next {
        self.said.push((self.current, said));
        let next = self.decide(g);
        if let Next::Ask(i) = next {
            self.current = i;
            self.give_up_at = now + self.patience;
        }
        next
    }

    fn decide(&self, g: &Group) -> Next {
        let n = g.sentinels.len();
        let named: Vec<&Endpoint> = self
            .said
            .iter()
            .filter_map(|(_, s)| match s {
                Said::Named(a) => Some(a),
                _ => None,
            })
            .collect();
        if let Some(a) = named
            .iter()
            .find(|a| named.iter().filter(|b| b == a).count() > n / 2)
        {
            return Next::Master((*a).clone());
        }
        if self.current + 1 < n {
            return Next::Ask(self.current + 1);
        }
        let first = named.first().copied();
        match first {
            Some(a) if named.iter().all(|b| *b == a) => Next::Master(a.clone()),
            Some(_) => Next::Fail(format!(
                "the sentinels disagree on the master of {:?}: {}",
                g.service,
                self.list(g)
            )),
            None if self.said.iter().all(|(_, s)| *s == Said::Unknown) => Next::Fail(format!(
                "no sentinel knows a master named {:?} (is the service name right?): {}",
                g.service,
                self.list(g)
            )),
            None => Next::Fail(format!(
                "no sentinel named a master for {:?}: {}",
                g.service,
                self.list(g)
            )),
        }
    }

    /// What each sentinel said, for messages.
    fn list(&self, g: &Group) -> String {
        let each: Vec<String> = self
            .said
            .iter()
            .map(|(i, s)| {
                let what = match s {
                    Said::Named(a) => format!("names {a}"),
                    Said::Unknown => "does not know it".into(),
                    Said::Failed(why) => why.clone(),
                };
                let at = g.latest.lock().unwrap_or_else(|p| p.into_inner())[*i].0;
                format!("sentinel {at} {what}")
            })
            .collect();
        each.join("; ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn group(n: usize) -> Group {
        let sentinels = (0..n)
            .map(|i| format!("127.0.0.1:{}", 26379 + i).parse().unwrap())
            .collect();
        Group::new("svc", sentinels, None, vec![None; n], None)
    }

    fn named(port: u16) -> Reply {
        Reply::Array(vec![
            Reply::Bulk(b"127.0.0.9".to_vec()),
            Reply::Bulk(port.to_string().into_bytes()),
        ])
    }

    fn addr(port: u16) -> Endpoint {
        Endpoint {
            host: "127.0.0.9".into(),
            port,
        }
    }

    #[test]
    fn a_majority_ends_the_search_early_and_every_answer_counts_otherwise() {
        let t = Instant::now();
        let p = Duration::from_millis(100);
        let g = group(3);
        let mut d = Discovery::new(t, p);
        assert_eq!(d.answered(&g, &named(1), t), Next::Ask(1));
        assert_eq!(d.give_up_at, t + p);
        assert_eq!(d.answered(&g, &named(1), t), Next::Master(addr(1)));
        // One sentinel down, one silent, the last names the master: it is used (and its
        // role is checked at the master).
        let mut d = Discovery::new(t, p);
        assert_eq!(d.failed(&g, "connection refused".into(), t), Next::Ask(1));
        assert_eq!(d.failed(&g, "silent".into(), t), Next::Ask(2));
        assert_eq!(d.answered(&g, &named(2), t), Next::Master(addr(2)));
    }

    #[test]
    fn disagreement_unknown_service_and_silence_are_errors_that_name_each_sentinel() {
        let t = Instant::now();
        let p = Duration::from_millis(100);
        let g = group(3);
        let mut d = Discovery::new(t, p);
        d.answered(&g, &named(1), t);
        d.answered(&g, &named(2), t);
        match d.failed(&g, "connection refused".into(), t) {
            Next::Fail(m) => {
                assert!(m.contains("disagree") && m.contains("127.0.0.9:1"), "{m}");
                assert!(m.contains("127.0.0.1:26381 connection refused"), "{m}");
            }
            other => panic!("{other:?}"),
        }
        let mut d = Discovery::new(t, p);
        for _ in 0..2 {
            d.answered(&g, &Reply::Nil, t);
        }
        match d.answered(&g, &Reply::Nil, t) {
            Next::Fail(m) => assert!(m.contains("no sentinel knows a master named \"svc\"")),
            other => panic!("{other:?}"),
        }
        let mut d = Discovery::new(t, p);
        for _ in 0..2 {
            d.failed(&g, "connection refused".into(), t);
        }
        let bad = Reply::Array(vec![
            Reply::Bulk(b"redis.example".to_vec()),
            Reply::Bulk(b"port".to_vec()),
        ]);
        match d.answered(&g, &bad, t) {
            Next::Fail(m) => {
                assert!(
                    m.starts_with("no sentinel named a master for \"svc\""),
                    "{m}"
                );
                assert!(m.contains("named redis.example:port, which is not a host and port"));
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn sentinels_that_announce_host_names_agree_on_the_name() {
        let t = Instant::now();
        let p = Duration::from_millis(100);
        let g = group(3);
        let name = |host: &[u8]| {
            Reply::Array(vec![
                Reply::Bulk(host.to_vec()),
                Reply::Bulk(b"6379".to_vec()),
            ])
        };
        let master = Endpoint {
            host: "redis-0.example".into(),
            port: 6379,
        };
        let mut d = Discovery::new(t, p);
        assert_eq!(d.answered(&g, &name(b"redis-0.example"), t), Next::Ask(1));
        assert_eq!(
            d.answered(&g, &name(b"redis-0.example"), t),
            Next::Master(master)
        );
        // Another name is another master, even if it resolves to the same address.
        let mut d = Discovery::new(t, p);
        d.answered(&g, &name(b"redis-0.example"), t);
        d.answered(&g, &name(b"redis-1.example"), t);
        match d.failed(&g, "connection refused".into(), t) {
            Next::Fail(m) => assert!(m.contains("disagree"), "{m}"),
            other => panic!("{other:?}"),
        }
        // An IPv6 address the sentinel writes in brackets is the bare address.
        let mut d = Discovery::new(t, p);
        d.answered(&g, &name(b"[::1]"), t);
        let six = Endpoint {
            host: "::1".into(),
            port: 6379,
        };
        assert_eq!(d.answered(&g, &name(b"::1"), t), Next::Master(six));
    }
}
