//! A node's address: the parsed URL, its `Display` with the password redacted, its
//! resolution.

use std::fmt;
use std::net::SocketAddr;

use super::Resolver;
use crate::error::Error;
use crate::resp;
use crate::tls::NOT_COMPILED;

/// The port a sentinel listens on when its URL names none.
pub const SENTINEL_PORT: u16 = 26379;

/// The port a cluster's seed listens on when its URL names none.
const REDIS_PORT: u16 = 6379;

/// One node: a Redis master parsed from `redis://[user:password@]host[:port][/db]`, the same
/// with `rediss://` (TLS), or `host:port`; or a failover group, whose master the library asks
/// its sentinels for, parsed from
/// `redis+sentinel://[[user]:password@]host[:port][,host[:port]…]/SERVICE[/db]` (sentinel
/// port 26379 when omitted; `rediss+sentinel://` for TLS to the sentinels and the master).
/// A failover group's credentials and database are its master's; the sentinels' own
/// credentials, if they need any, are [`Config::sentinel_auth`](crate::Config::sentinel_auth).
/// Or a Redis Cluster, one node of the quorum whose keys are spread over its shards, parsed
/// from `redis+cluster://[[user]:password@]host[:port][,host[:port]…]`: seed nodes, asked for
/// the slot map (port 6379 when omitted; `rediss+cluster://` for TLS; a cluster has database
/// 0 only).
///
/// Its `Display` form never shows the password (and starts with `rediss://` for TLS).
#[derive(Clone, PartialEq, Eq)]
pub struct NodeAddr {
    host: String,
    port: u16,
    username: Option<String>,
    password: Option<String>,
    db: i64,
    tls: bool,
    /// A failover group's sentinels (host, port); empty for a plain node.
    sentinels: Vec<(String, u16)>,
    /// A failover group's service name (the master's name in the sentinels' configuration).
    service: Option<String>,
    /// A Redis Cluster (`redis+cluster://`): `sentinels` holds its seed nodes then.
    cluster: bool,
    /// `?durable=true`: the node keeps every acknowledged write across restarts and failovers,
    /// so restart quarantine is off for it.
    durable: bool,
}

/// The form a sentinel URL takes, for messages.
const SENTINEL_FORM: &str =
    "redis+sentinel://[[user]:password@]host[:port][,host[:port]...]/SERVICE[/db]";

/// The form a cluster URL takes, for messages.
pub(crate) const CLUSTER_FORM: &str =
    "redis+cluster://[[user]:password@]host[:port][,host[:port]...]";

impl NodeAddr {
    /// Parses a node address. Accepts `redis://[user:password@]host[:port][/db]` (port 6379
    /// when omitted), the same with `rediss://` for TLS (see
    /// [`TlsOptions`](crate::TlsOptions)), and `host:port`. Rejects other schemes
    /// (`unix://`), query strings, port 0 and database numbers that are not integers from 0 to
    /// 2^31 − 1 (what Redis `SELECT` accepts at most; the server's `databases` setting is
    /// checked at connect), and `rediss://` when the library was built without its `tls`
    /// feature. Whitespace around the URL is ignored, so that a node list split at its commas
    /// may have spaces after them (`"10.0.0.1:6379, 10.0.0.2:6379"`).
    pub fn parse(url: &str) -> Result<NodeAddr, Error> {
        let (url, durable) = Self::split_durable(url.trim())?;
        let mut addr = Self::parse_base(url)?;
        addr.durable = durable;
        Ok(addr)
    }

    /// Takes a trailing `?durable=true` or `?durable=false` off `url`; any other query is left
    /// in place, for the URL parsers to refuse.
    fn split_durable(url: &str) -> Result<(&str, bool), Error> {
        let Some((base, query)) = url.split_once('?') else {
            return Ok((url, false));
        };
        match query {
            "durable=true" => Ok((base, true)),
            "durable=false" => Ok((base, false)),
            q if q.starts_with("durable=") => Err(Error::invalid(format!(
                "durable must be true or false, got {:?}",
                &q["durable=".len()..]
            ))),
            _ => Err(Error::invalid(
                "query parameters are not supported in node URLs, except ?durable=true \
                 (a node whose failovers and restarts keep every write: no restart quarantine)",
            )),
        }
    }

    fn parse_base(url: &str) -> Result<NodeAddr, Error> {
        if let Some(group) = Self::parse_sentinel(url)? {
            return Ok(group);
        }
        if let Some(cluster) = Self::parse_cluster(url)? {
            return Ok(cluster);
        }
        let p = resp::parse_url(url).map_err(Error::InvalidInput)?;
        if p.tls && !cfg!(feature = "tls") {
            return Err(Error::invalid(NOT_COMPILED));
        }
        Ok(NodeAddr {
            host: p.host,
            port: p.port,
            username: p.username,
            password: p.password,
            db: p.db,
            tls: p.tls,
            sentinels: Vec::new(),
            service: None,
            cluster: false,
            durable: false,
        })
    }

    /// Parses a `redis+sentinel://` or `rediss+sentinel://` URL; `Ok(None)` for any other
    /// scheme. Each sentinel's `host[:port]` and the credentials are checked by the plain
    /// URL parser, so they follow the same rules (and percent-decoding) as a `redis://` URL.
    fn parse_sentinel(url: &str) -> Result<Option<NodeAddr>, Error> {
        let bad = |why: &str| Error::invalid(format!("{why}: expected {SENTINEL_FORM}"));
        let Some((tls, rest)) = split_scheme(url, "sentinel", &bad)? else {
            return Ok(None);
        };
        let Some((authority, path)) = rest.split_once('/') else {
            return Err(bad("a sentinel URL names its service"));
        };
        let (username, password, hosts) = split_userinfo(authority, &bad)?;
        let sentinels = Self::parse_host_list(hosts, SENTINEL_PORT, "sentinel", &bad)?;
        let mut parts = path.split('/');
        let service = parts.next().unwrap_or_default();
        if service.is_empty() {
            return Err(bad("a sentinel URL names its service"));
        }
        let db = match parts.next() {
            None | Some("") => 0,
            Some(d) => {
                resp::parse_url(&format!("redis://127.0.0.1:1/{d}"))
                    .map_err(|m| bad(&format!("database: {m}")))?
                    .db
            }
        };
        if parts.next().is_some() {
            return Err(bad("too many path segments"));
        }
        let (host, port) = sentinels[0].clone();
        Ok(Some(NodeAddr {
            host,
            port,
            username,
            password,
            db,
            tls,
            sentinels,
            service: Some(service.to_string()),
            cluster: false,
            durable: false,
        }))
    }

    /// Parses a `redis+cluster://` or `rediss+cluster://` URL; `Ok(None)` for any other
    /// scheme. The seeds and credentials follow the rules of a `redis://` URL's.
    fn parse_cluster(url: &str) -> Result<Option<NodeAddr>, Error> {
        let bad = |why: &str| Error::invalid(format!("{why}: expected {CLUSTER_FORM}"));
        let Some((tls, rest)) = split_scheme(url, "cluster", &bad)? else {
            return Ok(None);
        };
        let authority = match rest.split_once('/') {
            Some((a, "")) => a,
            Some(_) => return Err(bad("a cluster has database 0 only, and no path")),
            None => rest,
        };
        let (username, password, hosts) = split_userinfo(authority, &bad)?;
        let seeds = Self::parse_host_list(hosts, REDIS_PORT, "seed", &bad)?;
        let (host, port) = seeds[0].clone();
        Ok(Some(NodeAddr {
            host,
            port,
            username,
            password,
            db: 0,
            tls,
            sentinels: seeds,
            service: None,
            cluster: true,
            durable: false,
        }))
    }

    /// A sentinel or cluster URL's `host[:port][,host[:port]…]`, each checked as a
    /// `redis://` URL's would be (`port` when omitted), none twice; `what` names one in
    /// messages.
    fn parse_host_list(
        hosts: &str,
        port: u16,
        what: &str,
        bad: &dyn Fn(&str) -> Error,
    ) -> Result<Vec<(String, u16)>, Error> {
        let mut sentinels: Vec<(String, u16)> = Vec::new();
        for h in hosts.split(',') {
            let h = h.trim();
            if h.is_empty() {
                return Err(bad(&format!("empty {what} address")));
            }
            let has_port = match h.strip_prefix('[') {
                Some(v6) => v6.contains("]:"),
                None => h.contains(':'),
            };
            let with_port = if has_port {
                h.to_string()
            } else {
                format!("{h}:{port}")
            };
            let p = resp::parse_url(&format!("redis://{with_port}"))
                .map_err(|m| bad(&format!("{what} {h:?}: {m}")))?;
            if sentinels.contains(&(p.host.clone(), p.port)) {
                return Err(bad(&format!("{what} {h:?} is listed twice")));
            }
            sentinels.push((p.host, p.port));
        }
        Ok(sentinels)
    }

    /// True for a failover group (`redis+sentinel://`): its master is found by asking its
    /// sentinels.
    pub fn is_sentinel(&self) -> bool {
        self.service.is_some()
    }

    /// True for a Redis Cluster (`redis+cluster://`): each key goes to the shard primary
    /// that owns its slot.
    pub fn is_cluster(&self) -> bool {
        self.cluster
    }

    /// A cluster's seed nodes, as (host, port), in the URL's order; empty for other nodes.
    pub fn seeds(&self) -> &[(String, u16)] {
        if self.cluster { &self.sentinels } else { &[] }
    }

    /// True for a node marked `?durable=true`: one whose restarts and failovers keep every
    /// acknowledged write (a managed service that promises it, or a master with
    /// `appendfsync always` and no failover), so restart quarantine is off for it alone.
    pub fn is_durable(&self) -> bool {
        self.durable
    }

    /// A failover group's service name (the name its sentinels know its master by).
    pub fn service(&self) -> Option<&str> {
        self.service.as_deref()
    }

    /// A failover group's sentinels, as (host, port); empty for other nodes.
    pub fn sentinels(&self) -> &[(String, u16)] {
        if self.cluster { &[] } else { &self.sentinels }
    }

    /// True for a `rediss://` node: its connections are TLS.
    pub fn is_tls(&self) -> bool {
        self.tls
    }

    /// The host name or IP address (for a failover group: its first sentinel's; for a
    /// cluster, its first seed's).
    pub fn host(&self) -> &str {
        &self.host
    }

    /// The TCP port (for a failover group: its first sentinel's; for a cluster, its first
    /// seed's).
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The ACL user name, if any.
    pub fn username(&self) -> Option<&str> {
        self.username.as_deref()
    }

    /// True when a password is configured (the password itself is never exposed).
    pub fn has_password(&self) -> bool {
        self.password.is_some()
    }

    /// The logical database (`SELECT`), 0 by default.
    pub fn db(&self) -> i64 {
        self.db
    }

    pub(crate) fn password(&self) -> Option<&str> {
        self.password.as_deref()
    }

    /// One shard primary of this cluster, at `host:port`: a plain node with the cluster's
    /// credentials and TLS.
    pub(crate) fn shard(&self, host: &str, port: u16) -> NodeAddr {
        NodeAddr {
            host: host.to_string(),
            port,
            sentinels: Vec::new(),
            service: None,
            cluster: false,
            ..self.clone()
        }
    }

    /// Resolves the host to socket addresses through `r` (blocking, for names).
    pub(crate) fn resolve(&self, r: &Resolver) -> Result<Vec<SocketAddr>, String> {
        r.resolve(&self.host, self.port)
            .map_err(|e| format!("{self}: {e}"))
    }

    /// Whether the host is a name, not an IP address (a plain node then looks it up again at
    /// each reconnection).
    pub(crate) fn host_is_name(&self) -> bool {
        let bare = self.host.trim_start_matches('[').trim_end_matches(']');
        bare.parse::<std::net::IpAddr>().is_err()
    }

    /// A failover group's sentinels, each resolved to its first address through `r`
    /// (blocking, for names).
    pub(crate) fn resolve_sentinels(&self, r: &Resolver) -> Result<Vec<SocketAddr>, String> {
        self.sentinels
            .iter()
            .map(|(h, p)| {
                r.resolve(h, *p)
                    .map(|a| a[0])
                    .map_err(|e| format!("{self}: sentinel {h}:{p}: {e}"))
            })
            .collect()
    }
}

/// `url` without its scheme, `redis+KIND://` or `rediss+KIND://` (TLS): whether TLS, and the
/// rest; `Ok(None)` for another scheme. TLS without the `tls` feature, query strings and
/// fragments are refused (`bad` says what was expected).
fn split_scheme<'u>(
    url: &'u str,
    kind: &str,
    bad: &dyn Fn(&str) -> Error,
) -> Result<Option<(bool, &'u str)>, Error> {
    let (tls, rest) = if let Some(r) = url.strip_prefix(&format!("redis+{kind}://")) {
        (false, r)
    } else if let Some(r) = url.strip_prefix(&format!("rediss+{kind}://")) {
        (true, r)
    } else {
        return Ok(None);
    };
    if tls && !cfg!(feature = "tls") {
        return Err(Error::invalid(NOT_COMPILED));
    }
    if rest.contains(['?', '#']) {
        return Err(bad("query parameters and fragments are not supported"));
    }
    Ok(Some((tls, rest)))
}

/// An authority's `[[user]:password@]` (checked as a `redis://` URL's would be, with its
/// percent-decoding) and the host list after it.
fn split_userinfo<'a>(
    authority: &'a str,
    bad: &dyn Fn(&str) -> Error,
) -> Result<(Option<String>, Option<String>, &'a str), Error> {
    let Some((u, hosts)) = authority.rsplit_once('@') else {
        return Ok((None, None, authority));
    };
    let p = resp::parse_url(&format!("redis://{u}@127.0.0.1:1"))
        .map_err(|m| bad(&format!("credentials: {m}")))?;
    Ok((p.username, p.password, hosts))
}

/// `host` as a URL writes it: an IPv6 address in brackets.
fn bracketed(host: &str) -> String {
    if host.contains(':') && !host.starts_with('[') {
        format!("[{host}]")
    } else {
        host.to_string()
    }
}

impl fmt::Display for NodeAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let host = bracketed(&self.host);
        match (self.tls, self.is_sentinel(), self.cluster) {
            (true, true, _) => f.write_str("rediss+sentinel://")?,
            (false, true, _) => f.write_str("redis+sentinel://")?,
            (true, false, true) => f.write_str("rediss+cluster://")?,
            (false, false, true) => f.write_str("redis+cluster://")?,
            (true, false, false) => f.write_str("rediss://")?,
            (false, false, false) => {}
        }
        match (&self.username, &self.password) {
            (Some(u), Some(_)) => write!(f, "{u}:***@")?,
            (None, Some(_)) => f.write_str(":***@")?,
            (Some(u), None) => write!(f, "{u}@")?,
            (None, None) => {}
        }
        let list = || -> String {
            let l: Vec<String> = (self.sentinels.iter())
                .map(|(h, p)| format!("{}:{p}", bracketed(h)))
                .collect();
            l.join(",")
        };
        if let Some(service) = &self.service {
            write!(f, "{}/{service}", list())?;
        } else if self.cluster {
            f.write_str(&list())?;
        } else {
            write!(f, "{host}:{}", self.port)?;
        }
        if self.db != 0 {
            write!(f, "/{}", self.db)?;
        }
        if self.durable {
            f.write_str("?durable=true")?;
        }
        Ok(())
    }
}

impl fmt::Debug for NodeAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "NodeAddr({self})")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rediss_is_tls_or_says_tls_was_not_compiled_in() {
        let r = NodeAddr::parse("rediss://:hunter2@127.0.0.1:6380/2");
        if cfg!(feature = "tls") {
            let a = r.unwrap();
            assert!(a.is_tls() && a.has_password() && a.db() == 2);
            assert_eq!(a.to_string(), "rediss://:***@127.0.0.1:6380/2");
            assert!(!NodeAddr::parse("redis://127.0.0.1:6380").unwrap().is_tls());
        } else {
            let e = r.unwrap_err();
            assert!(
                matches!(&e, Error::InvalidInput(m) if m.contains("not compiled in")),
                "{e}"
            );
            assert!(!e.to_string().contains("hunter2"));
        }
    }

    #[test]
    fn a_sentinel_url_names_its_sentinels_service_and_database() {
        let a =
            NodeAddr::parse("redis+sentinel://u:pw@127.0.0.1,127.0.0.2:5000/mymaster/3").unwrap();
        assert!(a.is_sentinel() && !a.is_tls() && a.has_password());
        assert_eq!(a.username(), Some("u"));
        assert_eq!(a.service(), Some("mymaster"));
        assert_eq!(a.db(), 3);
        assert_eq!(
            a.sentinels(),
            &[
                ("127.0.0.1".to_string(), 26379),
                ("127.0.0.2".to_string(), 5000)
            ]
        );
        assert_eq!(
            a.to_string(),
            "redis+sentinel://u:***@127.0.0.1:26379,127.0.0.2:5000/mymaster/3"
        );
        let b = NodeAddr::parse("redis+sentinel://[::1]:26380/m").unwrap();
        assert_eq!(b.sentinels(), &[("::1".to_string(), 26380)]);
        assert_eq!(b.to_string(), "redis+sentinel://[::1]:26380/m");
        assert!(
            !NodeAddr::parse("redis://127.0.0.1:1")
                .unwrap()
                .is_sentinel()
        );
        for (bad, says) in [
            ("redis+sentinel://127.0.0.1:26379", "names its service"),
            ("redis+sentinel://127.0.0.1:26379/", "names its service"),
            ("redis+sentinel://127.0.0.1,,127.0.0.2/m", "empty sentinel"),
            ("redis+sentinel://127.0.0.1:0/m", "port 0"),
            (
                "redis+sentinel://127.0.0.1,127.0.0.1:26379/m",
                "listed twice",
            ),
            ("redis+sentinel://127.0.0.1/m/x", "database"),
            ("redis+sentinel://127.0.0.1/m/1/2", "too many"),
            ("redis+sentinel://127.0.0.1/m?x=1", "query"),
        ] {
            let e = NodeAddr::parse(bad).expect_err(bad).to_string();
            assert!(e.contains(says), "{bad}: {e}");
            assert!(e.contains("SERVICE") || says == "query", "{bad}: {e}");
        }
        let d = NodeAddr::parse("redis+sentinel://127.0.0.1/m/2?durable=true").unwrap();
        assert!(d.is_durable() && d.db() == 2);
        assert_eq!(
            d.to_string(),
            "redis+sentinel://127.0.0.1:26379/m/2?durable=true"
        );
        let p = NodeAddr::parse("redis://127.0.0.1:7000?durable=true").unwrap();
        assert!(p.is_durable() && p.to_string().ends_with("?durable=true"));
        assert!(
            !NodeAddr::parse("127.0.0.1:7000?durable=false")
                .unwrap()
                .is_durable()
        );
        for (bad, says) in [
            ("redis://127.0.0.1:7000?durable=yes", "true or false"),
            ("redis://127.0.0.1:7000?db=1", "except ?durable=true"),
        ] {
            let e = NodeAddr::parse(bad).expect_err(bad).to_string();
            assert!(e.contains(says), "{bad}: {e}");
        }
        let e = NodeAddr::parse("redis+sentinel://:hunter2@127.0.0.1:0/m").unwrap_err();
        assert!(!e.to_string().contains("hunter2"), "{e}");
    }

    #[test]
    fn a_cluster_url_names_its_seeds() {
        let a = NodeAddr::parse("redis+cluster://u:pw@127.0.0.1,[::1]:7001").unwrap();
        assert!(a.is_cluster() && !a.is_sentinel() && !a.is_tls() && a.has_password());
        assert_eq!(
            a.seeds(),
            &[("127.0.0.1".to_string(), 6379), ("::1".to_string(), 7001)]
        );
        assert!(a.sentinels().is_empty());
        assert_eq!((a.host(), a.port(), a.db()), ("127.0.0.1", 6379, 0));
        assert_eq!(
            a.to_string(),
            "redis+cluster://u:***@127.0.0.1:6379,[::1]:7001"
        );
        let d = NodeAddr::parse("redis+cluster://127.0.0.1:7000/?durable=true").unwrap();
        assert!(d.is_durable() && d.is_cluster());
        assert_eq!(d.to_string(), "redis+cluster://127.0.0.1:7000?durable=true");
        assert!(
            NodeAddr::parse("redis://127.0.0.1:1")
                .unwrap()
                .seeds()
                .is_empty()
        );
        if cfg!(feature = "tls") {
            let t = NodeAddr::parse("rediss+cluster://127.0.0.1:7000").unwrap();
            assert!(t.is_tls() && t.is_cluster());
            assert_eq!(t.to_string(), "rediss+cluster://127.0.0.1:7000");
        }
        for (bad, says) in [
            ("redis+cluster://127.0.0.1:7000/1", "database 0 only"),
            ("redis+cluster://127.0.0.1,,127.0.0.2", "empty seed"),
            ("redis+cluster://127.0.0.1:0", "port 0"),
            ("redis+cluster://127.0.0.1,127.0.0.1:6379", "listed twice"),
            ("redis+cluster://127.0.0.1?x=1", "except ?durable=true"),
            ("redis+cluster://", "empty seed"),
        ] {
            let e = NodeAddr::parse(bad).expect_err(bad).to_string();
            assert!(e.contains(says), "{bad}: {e}");
        }
    }

    /// A node list split at its commas keeps the spaces after them: they are not part of the
    /// URL.
    #[test]
    fn whitespace_around_a_url_is_ignored() {
        let nodes = "redis://127.0.0.1:7001, 127.0.0.1:7002 ,\tredis+sentinel://127.0.0.1/m ";
        let parsed: Vec<String> = (nodes.split(','))
            .map(|u| NodeAddr::parse(u).expect(u).to_string())
            .collect();
        assert_eq!(
            parsed,
            [
                "127.0.0.1:7001",
                "127.0.0.1:7002",
                "redis+sentinel://127.0.0.1:26379/m"
            ]
        );
        let e = NodeAddr::parse("  ").unwrap_err().to_string();
        assert!(e.contains("empty node address"), "{e}");
    }
}
