//! A node's address: the parsed URL, its `Display` with the password redacted, its
//! resolution.

use std::fmt;
use std::net::{SocketAddr, ToSocketAddrs};

use crate::error::Error;
use crate::resp;
use crate::tls::NOT_COMPILED;

/// One Redis master, parsed from `redis://[user:password@]host[:port][/db]`, the same with
/// `rediss://` (TLS), or `host:port`.
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
}

impl NodeAddr {
    /// Parses a node address. Accepts `redis://[user:password@]host[:port][/db]` (port 6379
    /// when omitted), the same with `rediss://` for TLS (see
    /// [`TlsOptions`](crate::TlsOptions)), and `host:port`. Rejects other schemes
    /// (`unix://`), query strings, port 0 and database numbers that are not integers from 0 to
    /// 2^31 − 1 (what Redis `SELECT` accepts at most; the server's `databases` setting is
    /// checked at connect), and `rediss://` when the library was built without its `tls`
    /// feature.
    pub fn parse(url: &str) -> Result<NodeAddr, Error> {
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
        })
    }

    /// True for a `rediss://` node: its connections are TLS.
    pub fn is_tls(&self) -> bool {
        self.tls
    }

    /// The host name or IP address.
    pub fn host(&self) -> &str {
        &self.host
    }

    /// The TCP port.
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

    /// Resolves the host to socket addresses (a blocking DNS look-up for names).
    pub(crate) fn resolve(&self) -> Result<Vec<SocketAddr>, String> {
        let host = self.host.trim_start_matches('[').trim_end_matches(']');
        let addrs: Vec<SocketAddr> = (host, self.port)
            .to_socket_addrs()
            .map_err(|e| format!("cannot resolve {self}: {e}"))?
            .collect();
        if addrs.is_empty() {
            return Err(format!("{self} resolves to no address"));
        }
        Ok(addrs)
    }
}

impl fmt::Display for NodeAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let host = if self.host.contains(':') && !self.host.starts_with('[') {
            format!("[{}]", self.host)
        } else {
            self.host.clone()
        };
        if self.tls {
            f.write_str("rediss://")?;
        }
        match (&self.username, &self.password) {
            (Some(u), Some(_)) => write!(f, "{u}:***@")?,
            (None, Some(_)) => f.write_str(":***@")?,
            (Some(u), None) => write!(f, "{u}@")?,
            (None, None) => {}
        }
        write!(f, "{host}:{}", self.port)?;
        if self.db != 0 {
            write!(f, "/{}", self.db)?;
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
}
