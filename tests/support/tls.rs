//! TLS for the test nodes: a CA and certificates made at run time with rcgen (no committed
//! keys, no `openssl` command), written as PEM files to a temporary directory that lives as
//! long as a server or a test still uses it.
//!
//! Every node certificate names `127.0.0.1`, `::1` and `localhost` unless a test asks for
//! other names; keys are ECDSA P-256.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose,
};

static COUNTER: AtomicUsize = AtomicUsize::new(0);

/// A directory removed when the last user drops it, unless kept.
struct Dir(PathBuf, std::sync::atomic::AtomicBool);

impl Drop for Dir {
    fn drop(&mut self) {
        if !self.1.load(Ordering::Relaxed) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}

/// A test CA with a node certificate and a client certificate it signed.
pub struct Pki {
    dir: Arc<Dir>,
    ca_params: CertificateParams,
    ca_key: KeyPair,
    /// The CA certificate (PEM).
    pub ca: PathBuf,
    /// A node certificate for 127.0.0.1, ::1 and localhost, and its key.
    pub server_cert: PathBuf,
    pub server_key: PathBuf,
    /// A client certificate (for mutual TLS) and its key.
    pub client_cert: PathBuf,
    pub client_key: PathBuf,
}

const LOCAL_NAMES: [&str; 3] = ["127.0.0.1", "::1", "localhost"];

impl Pki {
    /// A new CA (named `name` in its subject) and its certificates, in a new directory.
    pub fn new() -> Pki {
        Pki::named("redlock test CA")
    }

    /// A new CA whose subject is `name`.
    pub fn named(name: &str) -> Pki {
        let dir = std::env::temp_dir().join(format!(
            "redlock-tls-{}-{}",
            std::process::id(),
            COUNTER.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("create the certificates' directory");
        Pki::in_dir(dir, name)
    }

    /// The same in `dir` (created if needed; removed with its files when the last user drops
    /// it, unless [`keep`](Self::keep) was called).
    pub fn in_dir(dir: PathBuf, name: &str) -> Pki {
        std::fs::create_dir_all(&dir).expect("create the certificates' directory");
        let ca_key = KeyPair::generate().expect("CA key");
        let mut ca_params = CertificateParams::new(Vec::<String>::new()).expect("CA params");
        ca_params.distinguished_name.push(DnType::CommonName, name);
        ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca_params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let ca_cert = ca_params.self_signed(&ca_key).expect("self-sign the CA");
        let ca = dir.join("ca.pem");
        write(&ca, &ca_cert.pem());
        let mut p = Pki {
            dir: Arc::new(Dir(dir, false.into())),
            ca_params,
            ca_key,
            ca,
            server_cert: PathBuf::new(),
            server_key: PathBuf::new(),
            client_cert: PathBuf::new(),
            client_key: PathBuf::new(),
        };
        (p.server_cert, p.server_key) = p.issue("server", &LOCAL_NAMES, Validity::Now, false);
        (p.client_cert, p.client_key) = p.issue("client", &["redlock-client"], Validity::Now, true);
        p
    }

    /// The directory the files are in.
    pub fn dir(&self) -> &Path {
        &self.dir.0
    }

    /// Leaves the directory and its files in place when the last user is dropped.
    pub fn keep(&self) {
        self.dir.1.store(true, Ordering::Relaxed);
    }

    /// Issues a certificate for `names` (a server's, or a client's with `client`), valid now or
    /// expired; writes `<file>.pem` and `<file>.key`, returns their paths.
    pub fn issue(
        &self,
        file: &str,
        names: &[&str],
        validity: Validity,
        client: bool,
    ) -> (PathBuf, PathBuf) {
        let key = KeyPair::generate().expect("key");
        let names: Vec<String> = names.iter().map(|n| n.to_string()).collect();
        let mut params = CertificateParams::new(names.clone()).expect("params");
        params.distinguished_name.push(
            DnType::CommonName,
            names.first().cloned().unwrap_or_default(),
        );
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        params.extended_key_usages = vec![if client {
            ExtendedKeyUsagePurpose::ClientAuth
        } else {
            ExtendedKeyUsagePurpose::ServerAuth
        }];
        if validity == Validity::Expired {
            params.not_before = rcgen::date_time_ymd(2001, 1, 1);
            params.not_after = rcgen::date_time_ymd(2002, 1, 1);
        }
        let issuer = Issuer::from_params(&self.ca_params, &self.ca_key);
        let cert = params.signed_by(&key, &issuer).expect("sign");
        let (c, k) = (
            self.dir().join(format!("{file}.pem")),
            self.dir().join(format!("{file}.key")),
        );
        write(&c, &cert.pem());
        write(&k, &key.serialize_pem());
        (c, k)
    }

    /// How a node serves TLS with this CA's node certificate.
    pub fn serve(&self) -> TlsServe {
        self.serve_with(&self.server_cert, &self.server_key)
    }

    /// How a node serves TLS with another certificate (signed by this CA or not).
    pub fn serve_with(&self, cert: &Path, key: &Path) -> TlsServe {
        TlsServe {
            cert: cert.to_path_buf(),
            key: key.to_path_buf(),
            ca: self.ca.clone(),
            auth_clients: false,
            client_cert: self.client_cert.clone(),
            client_key: self.client_key.clone(),
            _dir: Arc::clone(&self.dir),
        }
    }

    /// The library's options that trust this CA.
    pub fn options(&self) -> redlock::TlsOptions {
        redlock::TlsOptions::new().ca_file(&self.ca)
    }

    /// The same, with this CA's client certificate (mutual TLS).
    pub fn options_with_client_cert(&self) -> redlock::TlsOptions {
        self.options()
            .client_cert(&self.client_cert, &self.client_key)
    }
}

/// When a certificate is valid.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Validity {
    /// From 1975 to 4096 (rcgen's default).
    Now,
    /// 2001 to 2002.
    Expired,
}

fn write(path: &Path, text: &str) {
    std::fs::write(path, text).unwrap_or_else(|e| panic!("write {}: {e}", path.display()));
}

/// How a test node serves TLS: `--port 0 --tls-port P` with these files.
#[derive(Clone)]
pub struct TlsServe {
    pub cert: PathBuf,
    pub key: PathBuf,
    /// The CA the node checks client certificates against.
    pub ca: PathBuf,
    /// `--tls-auth-clients yes`: a client must present a certificate signed by `ca`.
    pub auth_clients: bool,
    /// What the tests' inspection client presents (the node accepts it).
    pub client_cert: PathBuf,
    pub client_key: PathBuf,
    _dir: Arc<Dir>,
}

impl TlsServe {
    /// The same with `--tls-auth-clients yes` (mutual TLS).
    pub fn auth_clients(mut self) -> TlsServe {
        self.auth_clients = true;
        self
    }

    /// The `redis-server` arguments, for TLS on `port` and no plain port.
    pub fn args(&self, port: u16) -> Vec<String> {
        let p = |p: &Path| p.display().to_string();
        vec![
            "--port".into(),
            "0".into(),
            "--tls-port".into(),
            port.to_string(),
            "--tls-cert-file".into(),
            p(&self.cert),
            "--tls-key-file".into(),
            p(&self.key),
            "--tls-ca-cert-file".into(),
            p(&self.ca),
            "--tls-auth-clients".into(),
            if self.auth_clients { "yes" } else { "no" }.into(),
        ]
    }

    /// A blocking inspection client for `url` (a `rediss://` URL), which trusts the node
    /// whatever its certificate (the tests inspect their own nodes, even those with a bad
    /// certificate on purpose) and presents the client certificate.
    pub fn client(&self, url: &str) -> redis::RedisResult<redis::Client> {
        let url = if url.contains('#') {
            url.to_string()
        } else if url.trim_start_matches("rediss://").contains('/') {
            format!("{url}#insecure")
        } else {
            format!("{url}/#insecure")
        };
        let read = |p: &Path| std::fs::read(p).expect("read a test certificate");
        redis::Client::build_with_tls(
            url.as_str(),
            redis::TlsCertificates {
                client_tls: Some(redis::ClientTlsConfig {
                    client_cert: read(&self.client_cert),
                    client_key: read(&self.client_key),
                }),
                root_cert: None,
            },
        )
    }
}
