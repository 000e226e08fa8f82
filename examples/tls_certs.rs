//! Writes a test CA, a node certificate (127.0.0.1, ::1, localhost) and a client certificate,
//! PEM, into a directory: for the Python and Go test suites, which start TLS nodes of their own.
//! Test material only, made at run time (rcgen, as tests/support/tls.rs makes it for the Rust
//! tests).
//!
//!     cargo run --release --example tls_certs -- DIR
//!
//! Files: DIR/ca.pem, DIR/server.pem, DIR/server.key, DIR/client.pem, DIR/client.key, and
//! DIR/other-ca.pem (a CA that signed nothing here: trusting it alone must fail).

#[path = "../tests/support/mod.rs"]
mod support;

fn main() {
    let dir = std::env::args()
        .nth(1)
        .unwrap_or_else(|| panic!("usage: tls_certs DIR"));
    let dir = std::path::PathBuf::from(dir);
    let pki = support::tls::Pki::in_dir(dir.clone(), "redlock test CA");
    let other = support::tls::Pki::in_dir(dir.join("other"), "another CA");
    std::fs::copy(&other.ca, dir.join("other-ca.pem")).expect("copy other-ca.pem");
    // The files must outlive this process (`other`'s directory goes with it).
    pki.keep();
    println!("{}", dir.display());
}
