//! `redlock run --metrics-listen ADDR`: the manager's metrics in the Prometheus text format,
//! served over HTTP at `/metrics` while `run` lives. The server is tiny_http and lives only in
//! this tool: the library renders the text ([`redlock::Metrics::to_prometheus`]) and never
//! listens anywhere.

use std::net::{SocketAddr, ToSocketAddrs};

use redlock::Redlock;
use tiny_http::{Header, Method, Response, Server};

/// The content type of the Prometheus text exposition format, version 0.0.4.
const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// Binds `listen` (`HOST:PORT`; port 0 picks a free one) and serves `mgr`'s metrics from a
/// thread of its own until the process exits. Returns the address bound. Errors name the
/// flag.
pub fn serve(listen: &str, mgr: Redlock) -> Result<SocketAddr, String> {
    let addr = listen
        .to_socket_addrs()
        .map_err(|e| e.to_string())
        .and_then(|mut a| a.next().ok_or_else(|| "no address".to_string()))
        .map_err(|e| {
            format!(
                "--metrics-listen: expected HOST:PORT such as 127.0.0.1:9464, got {listen:?} ({e})"
            )
        })?;
    let server = Server::http(addr)
        .map_err(|e| format!("--metrics-listen {listen}: cannot listen on {addr}: {e}"))?;
    let bound = server.server_addr().to_ip().unwrap_or(addr);
    std::thread::Builder::new()
        .name("metrics-http".into())
        .spawn(move || answer(&server, &mgr))
        .map_err(|e| format!("--metrics-listen: cannot start the server thread: {e}"))?;
    Ok(bound)
}

/// Answers requests one after another: the body is a few kilobytes, rendered on demand.
fn answer(server: &Server, mgr: &Redlock) {
    for req in server.incoming_requests() {
        let path = req.url().split('?').next().unwrap_or("");
        let response = match (req.method(), path) {
            (Method::Get | Method::Head, "/metrics") => Response::from_string(
                mgr.metrics().to_prometheus(),
            )
            .with_header(Header::from_bytes("Content-Type", CONTENT_TYPE).expect("a valid header")),
            (Method::Get | Method::Head, _) => {
                Response::from_string("not found: the metrics are at /metrics\n")
                    .with_status_code(404)
            }
            _ => Response::from_string("only GET and HEAD\n").with_status_code(405),
        };
        // A client that went away is its own problem; keep serving the others.
        let _ = req.respond(response);
    }
}
