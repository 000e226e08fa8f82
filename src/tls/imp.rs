//! TLS over rustls with the ring provider: the client configuration made from
//! [`TlsOptions`], and one connection's session.

use std::fmt;
use std::io::{self, Read, Write};
use std::net::IpAddr;
use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::{CryptoProvider, WebPkiSupportedAlgorithms};
use rustls::pki_types::pem::{self, PemObject};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::server::ParsedCertificate;
use rustls::{
    AlertDescription, CertificateError, ClientConfig, ClientConnection, DigitallySignedStruct,
    RootCertStore, SignatureScheme,
};

use super::{TlsOptions, read_file};

/// The message for a file that is not what it should be.
fn bad_file(what: &str, path: &std::path::Path, why: &str) -> String {
    format!(
        "the TLS {what} file {} is not usable: {why}",
        path.display()
    )
}

fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// Why a PEM file could not be parsed, without anything from the file itself (the parser's
/// own messages quote the offending line).
fn pem_problem(e: &pem::Error) -> &'static str {
    match e {
        pem::Error::MissingSectionEnd { .. } => "a PEM section has no END line",
        pem::Error::IllegalSectionStart { .. } => "a PEM BEGIN line is malformed",
        pem::Error::Base64Decode(_) => "a PEM section is not valid base64",
        pem::Error::NoItemsFound => "it holds no PEM section of the expected kind",
        pem::Error::SectionTooLarge => "a PEM section is too large",
        _ => "it is not valid PEM",
    }
}

/// Every certificate in a PEM file (at least one).
fn certs(what: &str, path: &std::path::Path) -> Result<Vec<CertificateDer<'static>>, String> {
    let bytes = read_file(what, path)?;
    let certs = CertificateDer::pem_slice_iter(&bytes)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| bad_file(what, path, pem_problem(&e)))?;
    if certs.is_empty() {
        return Err(bad_file(what, path, "it holds no CERTIFICATE section"));
    }
    Ok(certs)
}

/// The private key in a PEM file.
fn key(path: &std::path::Path) -> Result<PrivateKeyDer<'static>, String> {
    let mut bytes = read_file("client key", path)?;
    let key = PrivateKeyDer::from_pem_slice(&bytes).map_err(|e| {
        let why = match e {
            pem::Error::NoItemsFound => {
                "it holds no PRIVATE KEY section (PKCS#8, PKCS#1 RSA or SEC1 EC)"
            }
            other => pem_problem(&other),
        };
        bad_file("client key", path, why)
    });
    // The parsed key wipes itself when dropped; wipe the file's bytes too.
    bytes.fill(0);
    std::hint::black_box(&bytes);
    key
}

/// The roots to verify nodes against: the CA file's, or the system's trust store.
fn roots(o: &TlsOptions) -> Result<RootCertStore, String> {
    let mut roots = RootCertStore::empty();
    match &o.ca_file {
        Some(path) => {
            for c in certs("CA", path)? {
                roots.add(c).map_err(|e| {
                    bad_file(
                        "CA",
                        path,
                        &format!("a certificate in it is not usable: {e}"),
                    )
                })?;
            }
        }
        None => {
            let found = rustls_native_certs::load_native_certs();
            let (added, _) = roots.add_parsable_certificates(found.certs);
            if added == 0 {
                let why = found
                    .errors
                    .first()
                    .map_or_else(|| "no certificate found".to_string(), |e| e.to_string());
                return Err(format!(
                    "no TLS CA file is set and the system's trust store has no usable \
                     certificate ({why}): install the system's CA certificates or set a CA \
                     file (TlsOptions::ca_file, redlock_config_set_tls_ca_file, tls_ca_file, \
                     WithTLSCAFile)"
                ));
            }
        }
    }
    Ok(roots)
}

pub(crate) fn check_files(o: &TlsOptions) -> Result<(), String> {
    if let Some(path) = &o.ca_file {
        roots(&TlsOptions {
            ca_file: Some(path.clone()),
            ..TlsOptions::default()
        })?;
    }
    finish(o, builder()?.with_root_certificates(RootCertStore::empty()))?;
    Ok(())
}

pub(crate) fn check_name(name: &str) -> Result<(), String> {
    ServerName::try_from(name)
        .map(|_| ())
        .map_err(|e| e.to_string())
}

fn builder() -> Result<rustls::ConfigBuilder<ClientConfig, rustls::WantsVerifier>, String> {
    ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("TLS cannot be set up: {e}"))
}

type WantsClientCert = rustls::ConfigBuilder<ClientConfig, rustls::client::WantsClientCert>;

/// The configuration, with the client certificate if one is set.
fn finish(o: &TlsOptions, b: WantsClientCert) -> Result<ClientConfig, String> {
    let Some((cert, key_path)) = &o.client_cert else {
        return Ok(b.with_no_client_auth());
    };
    let chain = certs("client certificate", cert)?;
    // rustls parses only the first certificate here (to match it with the key): one further
    // on that is not a certificate would be sent as it is, and every node would refuse every
    // handshake. Each one is parsed now, as the CA file's are.
    for (i, c) in chain.iter().enumerate() {
        ParsedCertificate::try_from(c).map_err(|e| {
            bad_file(
                "client certificate",
                cert,
                &format!("certificate {} in it is not usable: {e}", i + 1),
            )
        })?;
    }
    let key = key(key_path)?;
    // A key section that is no key rustls can sign with is the key file's fault alone.
    if provider()
        .key_provider
        .load_private_key(key.clone_key())
        .is_err()
    {
        return Err(bad_file(
            "client key",
            key_path,
            "it holds no key rustls can use (RSA, ECDSA P-256 or P-384, Ed25519)",
        ));
    }
    b.with_client_auth_cert(chain, key).map_err(|e| {
        let why = match e {
            rustls::Error::InconsistentKeys(_) => {
                "the key does not belong to the certificate".to_string()
            }
            other => describe(&other),
        };
        format!(
            "the TLS client certificate {} and key {} are not usable together: {why}",
            cert.display(),
            key_path.display()
        )
    })
}

pub(crate) fn connector(o: &TlsOptions) -> Result<Connector, String> {
    let builder = builder()?;
    let b = if o.insecure_skip_verify {
        log::warn!(
            "TLS certificate verification is OFF (insecure_skip_verify): any node, or anyone \
             on the path to it, is trusted; for tests only"
        );
        let algs = provider().signature_verification_algorithms;
        builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(NoVerify(algs)))
    } else {
        builder.with_root_certificates(roots(o)?)
    };
    let config = Arc::new(finish(o, b)?);
    Ok(Connector {
        config,
        name: o.server_name.clone(),
    })
}

/// The client side of TLS for a manager's nodes: one configuration, shared.
pub(crate) struct Connector {
    config: Arc<ClientConfig>,
    name: Option<String>,
}

impl Connector {
    /// The client for a node at `host` (a DNS name, an IP address, an IPv6 one in brackets):
    /// it verifies the server name override if one is set, else `host`.
    pub(crate) fn client(&self, host: &str) -> Result<Client, String> {
        let name = match &self.name {
            Some(n) => n.clone(),
            None => host
                .trim_start_matches('[')
                .trim_end_matches(']')
                .to_string(),
        };
        let server = match name.parse::<IpAddr>() {
            Ok(ip) => ServerName::IpAddress(ip.into()),
            Err(_) => ServerName::try_from(name.clone()).map_err(|e| {
                format!(
                    "{name:?} is not a valid TLS server name ({e}); set a server name override \
                     (TlsOptions::server_name)"
                )
            })?,
        };
        Ok(Client {
            config: Arc::clone(&self.config),
            server,
            name,
        })
    }
}

/// What one node's TLS connections start from.
#[derive(Clone)]
pub(crate) struct Client {
    config: Arc<ClientConfig>,
    server: ServerName<'static>,
    /// The name verified, for messages.
    name: String,
}

impl Client {
    /// A new session: its first records (the ClientHello) are ready to be flushed.
    pub(crate) fn session(&self) -> io::Result<Session> {
        let conn = ClientConnection::new(Arc::clone(&self.config), self.server.clone())
            .map_err(|e| io::Error::other(Failure(describe(&e))))?;
        Ok(Session {
            conn,
            name: self.name.clone(),
        })
    }
}

/// One connection's TLS session.
pub(crate) struct Session {
    conn: ClientConnection,
    name: String,
}

impl Session {
    /// True until the TLS handshake has completed.
    pub(crate) fn is_handshaking(&self) -> bool {
        self.conn.is_handshaking()
    }

    /// Encrypts `plain` and appends its records to `out`.
    pub(crate) fn write(&mut self, mut plain: &[u8], out: &mut Vec<u8>) -> io::Result<()> {
        while !plain.is_empty() {
            // rustls takes at most its buffer limit at a time: take the records out between.
            let n = self.conn.writer().write(plain)?;
            self.flush(out);
            if n == 0 {
                return Err(io::Error::other("the TLS session takes no more data"));
            }
            plain = &plain[n..];
        }
        Ok(())
    }

    /// Appends the records the session has to send (handshake messages, alerts) to `out`.
    pub(crate) fn flush(&mut self, out: &mut Vec<u8>) {
        while self.conn.wants_write() {
            // Writing to a Vec cannot fail.
            if self.conn.write_tls(out).is_err() {
                break;
            }
        }
    }

    /// Reads plaintext into `buf`: what was decrypted already, else records from `sock`
    /// (decrypted now; what the session must answer, such as the handshake's next flight,
    /// goes to `out`). `WouldBlock` when the socket has nothing more; `Ok(0)` when the node
    /// closed the connection; a TLS failure is an error [`failure`] recognises.
    pub(crate) fn read(
        &mut self,
        sock: &mut dyn Read,
        buf: &mut [u8],
        out: &mut Vec<u8>,
    ) -> io::Result<usize> {
        loop {
            match self.conn.reader().read(buf) {
                Ok(n) => return Ok(n),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(0),
                Err(e) => return Err(e),
            }
            match self.conn.read_tls(sock) {
                Ok(0) => return Ok(0),
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            }
            let processed = self.conn.process_new_packets();
            self.flush(out);
            if let Err(e) = processed {
                return Err(io::Error::other(Failure(self.explain(&e))));
            }
        }
    }

    /// A rustls error as a message for this node.
    fn explain(&self, e: &rustls::Error) -> String {
        use CertificateError as C;
        let fix = "connect by a name it carries, or set a server name override";
        match e {
            rustls::Error::InvalidCertificate(C::NotValidForName) => format!(
                "the node's certificate is not valid for the name {:?}: {fix}",
                self.name
            ),
            rustls::Error::InvalidCertificate(C::NotValidForNameContext { presented, .. }) => {
                format!(
                    "the node's certificate is not valid for the name {:?} (it is for {}): \
                     {fix}",
                    self.name,
                    presented.join(", ")
                )
            }
            other => describe(other),
        }
    }
}

/// A TLS failure carried in an `io::Error`, so that the connection can tell it from a socket
/// error.
#[derive(Debug)]
struct Failure(String);

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Failure {}

/// The TLS failure `e` carries, if it is one.
pub(crate) fn failure(e: &io::Error) -> Option<String> {
    e.get_ref()?.downcast_ref::<Failure>().map(|f| f.0.clone())
}

/// A rustls error in words, with a hint where the usual cause is known.
fn describe(e: &rustls::Error) -> String {
    use CertificateError as C;
    let cert = |why: &str| format!("the node's certificate {why}");
    match e {
        rustls::Error::InvalidCertificate(c) => match c {
            C::UnknownIssuer => cert(
                "is not signed by a trusted CA (unknown issuer): check the CA file, or the \
                 system's trust store",
            ),
            C::Expired | C::ExpiredContext { .. } => cert("has expired"),
            C::NotValidYet | C::NotValidYetContext { .. } => cert("is not valid yet"),
            C::BadSignature => cert("has a bad signature"),
            C::Revoked => cert("is revoked"),
            C::BadEncoding => cert("is malformed"),
            C::InvalidPurpose | C::InvalidPurposeContext { .. } => {
                cert("is not meant for a TLS server")
            }
            _ => format!("invalid certificate: {e}"),
        },
        rustls::Error::AlertReceived(a) => {
            let hint = match a {
                AlertDescription::CertificateRequired
                | AlertDescription::HandshakeFailure
                | AlertDescription::BadCertificate
                | AlertDescription::UnknownCA
                | AlertDescription::CertificateUnknown
                | AlertDescription::AccessDenied => {
                    ": it may require a client certificate (mutual TLS) that this client lacks \
                     or that it does not trust"
                }
                _ => "",
            };
            format!("the node refused the TLS session (alert {a:?}){hint}")
        }
        rustls::Error::InvalidMessage(_) | rustls::Error::InappropriateMessage { .. } => format!(
            "the node does not speak TLS ({e}): is this its TLS port? (plain nodes are redis://)"
        ),
        rustls::Error::NoCertificatesPresented => "the node presented no certificate".into(),
        other => other.to_string(),
    }
}

/// A verifier that accepts every certificate (see [`TlsOptions::insecure_skip_verify`]). The
/// handshake's signatures are still checked against the certificate presented, as rustls
/// requires, which proves nothing about who presented it.
#[derive(Debug)]
struct NoVerify(WebPkiSupportedAlgorithms);

impl ServerCertVerifier for NoVerify {
    fn verify_server_cert(
        &self,
        _: &CertificateDer<'_>,
        _: &[CertificateDer<'_>],
        _: &ServerName<'_>,
        _: &[u8],
        _: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.0)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.0)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.supported_schemes()
    }
}
