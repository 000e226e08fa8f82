//! TLS for `rediss://` nodes: the options, the rustls client configuration they make, and one
//! connection's TLS session.
//!
//! This is the only module that uses rustls. It never sees a socket's readiness or a Redis
//! command: the connection (`node::conn`) hands it plaintext to encrypt and takes the records
//! to write, and hands it a reader over the socket when it wants plaintext back. The TLS
//! handshake is therefore driven by whoever drives the connection, in the same `poll(2)` and
//! under the same deadline as everything else.
//!
//! No certificate or key material ever appears in an error or a log: messages name files by
//! their path and problems by kind, never by content.
//!
//! Without the `tls` cargo feature only [`TlsOptions`] remains (so that the API is the same),
//! and a `rediss://` URL is invalid input.

use std::path::{Path, PathBuf};

/// TLS options for a manager's `rediss://` nodes (see
/// [`Config::tls`](crate::Config::tls)); plain `redis://` nodes ignore them, so a cluster may
/// mix both.
///
/// The defaults verify every node's certificate against the system's trust store (read once,
/// when the manager is built) and check that it names the host of the node's URL, an IP
/// address included; no client certificate is sent.
///
/// The files are read when the manager is built ([`Redlock::new`](crate::Redlock::new)): one
/// that is missing, unreadable or not the PEM it should be is
/// [`Error::InvalidInput`](crate::Error::InvalidInput) naming its path (never its content).
/// [`Config::check_tls`](crate::Config::check_tls) checks them sooner.
///
/// ```
/// use redlock::{Config, TlsOptions};
/// let cfg = Config::new(["rediss://10.0.0.1:6380", "rediss://10.0.0.2:6380", "rediss://10.0.0.3:6380"])
///     .tls(
///         TlsOptions::new()
///             .ca_file("/etc/redis/ca.pem")
///             .client_cert("/etc/redis/client.pem", "/etc/redis/client.key")
///             .server_name("redis.internal"),
///     );
/// assert_eq!(cfg.tls_options().ca_path(), Some(std::path::Path::new("/etc/redis/ca.pem")));
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TlsOptions {
    ca_file: Option<PathBuf>,
    client_cert: Option<(PathBuf, PathBuf)>,
    server_name: Option<String>,
    insecure_skip_verify: bool,
}

impl TlsOptions {
    /// The defaults: the system's trust store, no client certificate, the URL's host as the
    /// server name, verification on.
    pub fn new() -> TlsOptions {
        TlsOptions::default()
    }

    /// Trusts the CA certificates in this PEM file (one or more `CERTIFICATE` sections)
    /// instead of the system's trust store. Defaults to the system's trust store.
    pub fn ca_file(mut self, path: impl Into<PathBuf>) -> TlsOptions {
        self.ca_file = Some(path.into());
        self
    }

    /// Presents this client certificate (PEM: the certificate, then any intermediates) with
    /// its private key (PEM: PKCS#8, PKCS#1 or SEC1) to nodes that ask for one: mutual TLS,
    /// `tls-auth-clients yes`. Defaults to none.
    pub fn client_cert(mut self, cert: impl Into<PathBuf>, key: impl Into<PathBuf>) -> TlsOptions {
        self.client_cert = Some((cert.into(), key.into()));
        self
    }

    /// The name every TLS node's certificate must carry, and the name sent in the handshake
    /// (SNI), instead of the host of its URL: for nodes addressed by IP whose certificates
    /// name a host. A DNS name or an IP address. Defaults to each node's host.
    pub fn server_name(mut self, name: impl Into<String>) -> TlsOptions {
        self.server_name = Some(name.into());
        self
    }

    /// **Insecure: for tests only.** `true` accepts any certificate from any node: no check
    /// of who signed it, when it expires or what it names, so anyone on the path can read and
    /// change every command, and grant locks. The traffic is still encrypted. A warning is
    /// logged when a manager is built with it. Defaults to `false`.
    pub fn insecure_skip_verify(mut self, skip: bool) -> TlsOptions {
        self.insecure_skip_verify = skip;
        self
    }

    /// The CA file, if one is set (`None`: the system's trust store).
    pub fn ca_path(&self) -> Option<&Path> {
        self.ca_file.as_deref()
    }

    /// The client certificate and key files, if set.
    pub fn client_cert_paths(&self) -> Option<(&Path, &Path)> {
        self.client_cert
            .as_ref()
            .map(|(c, k)| (c.as_path(), k.as_path()))
    }

    /// The server name override, if set.
    pub fn server_name_override(&self) -> Option<&str> {
        self.server_name.as_deref()
    }

    /// Whether certificate verification is off (see
    /// [`insecure_skip_verify`](Self::insecure_skip_verify)).
    pub fn skips_verification(&self) -> bool {
        self.insecure_skip_verify
    }

    /// Checks the options now, as building a manager does: the server name's syntax, and
    /// that each file set can be read and holds what it should (without the `tls` feature:
    /// only that the files can be read). The error names the file, never its content.
    pub(crate) fn check(&self) -> Result<(), String> {
        self.check_server_name()?;
        imp::check_files(self)
    }

    /// The server name override's syntax: a DNS name or an IP address.
    pub(crate) fn check_server_name(&self) -> Result<(), String> {
        match &self.server_name {
            Some(name) => imp::check_name(name).map_err(|why| {
                format!("TLS server name {name:?} is not a valid DNS name or IP address: {why}")
            }),
            None => Ok(()),
        }
    }

    /// The client side of TLS for a manager's nodes: the files read, the configuration made.
    /// Logs a warning when verification is off.
    pub(crate) fn connector(&self) -> Result<Connector, String> {
        self.check_server_name()?;
        imp::connector(self)
    }
}

/// Reads `path` whole; an error names the file and what went wrong, never its content.
fn read_file(what: &str, path: &Path) -> Result<Vec<u8>, String> {
    std::fs::read(path)
        .map_err(|e| format!("cannot read the TLS {what} file {}: {e}", path.display()))
}

pub(crate) use imp::{Client, Connector, Session, failure};

#[cfg(feature = "tls")]
mod imp;

/// Without the `tls` feature: the options are read only for their files' existence, and no
/// TLS connection can exist (a `rediss://` URL is refused before any of this is used).
#[cfg(not(feature = "tls"))]
mod imp {
    use std::io::{self, Read};

    use crate::tls::{NOT_COMPILED, TlsOptions, read_file};

    pub(crate) fn check_files(o: &TlsOptions) -> Result<(), String> {
        if let Some(p) = &o.ca_file {
            read_file("CA", p)?;
        }
        if let Some((c, k)) = &o.client_cert {
            read_file("client certificate", c)?;
            read_file("client key", k)?;
        }
        Ok(())
    }

    pub(crate) fn check_name(name: &str) -> Result<(), &'static str> {
        if name.is_empty() {
            return Err("it is empty");
        }
        Ok(())
    }

    pub(crate) fn connector(_: &TlsOptions) -> Result<Connector, String> {
        Err(NOT_COMPILED.into())
    }

    /// Never made: TLS is not compiled in.
    pub(crate) enum Connector {}

    impl Connector {
        pub(crate) fn client(&self, _host: &str) -> Result<Client, String> {
            match *self {}
        }
    }

    /// Never made: TLS is not compiled in.
    #[derive(Clone)]
    pub(crate) enum Client {}

    impl Client {
        pub(crate) fn session(&self) -> io::Result<Session> {
            match *self {}
        }
    }

    /// Never made: TLS is not compiled in.
    pub(crate) enum Session {}

    impl Session {
        pub(crate) fn is_handshaking(&self) -> bool {
            match *self {}
        }
        pub(crate) fn write(&mut self, _: &[u8], _: &mut Vec<u8>) -> io::Result<()> {
            match *self {}
        }
        pub(crate) fn flush(&mut self, _: &mut Vec<u8>) {
            match *self {}
        }
        pub(crate) fn read(
            &mut self,
            _: &mut dyn Read,
            _: &mut [u8],
            _: &mut Vec<u8>,
        ) -> io::Result<usize> {
            match *self {}
        }
    }

    pub(crate) fn failure(_: &io::Error) -> Option<String> {
        None
    }
}

/// What a `rediss://` URL gets when the library was built without TLS.
pub(crate) const NOT_COMPILED: &str = "rediss:// (TLS) support was not compiled in: build the \
     library with the `tls` cargo feature (on by default)";
