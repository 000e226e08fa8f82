//! TLS (`rediss://`) against real redis-server processes that serve TLS only (`--port 0
//! --tls-port P`), with a CA and certificates the tests make at run time (tests/support/tls.rs):
//! locks over TLS nodes and over a mix of TLS and plain ones; certificates that must be refused
//! (another CA, expired, another name) and mutual TLS, each failing with a typed error naming
//! the node while the other nodes decide; a node that accepts TCP and never completes the TLS
//! handshake; a plain Redis server on a `rediss://` URL, told apart before the deadline;
//! notification waiting, AUTH, SELECT and reconnection over TLS; options whose files are
//! missing or wrong. No key or certificate material may appear in an error or a log line.
//!
//! Liveness bounds are generous (the machine is small and loaded); safety checks are strict.

mod support;

use std::sync::Mutex;
use std::thread;
use std::time::{Duration, Instant};

use redlock::{Config, Error, LockOptions, NodeOutcome, Redlock, TlsOptions, Wait};
use support::tls::{Pki, TlsServe, Validity};
use support::{Cluster, RedisServer, SilentListener, eventually};

/// Captures every log line (all targets, down to debug), so that tests can check the warnings
/// and that no line ever holds key or certificate material.
struct Capture(Mutex<Vec<String>>);

impl log::Log for Capture {
    fn enabled(&self, _: &log::Metadata<'_>) -> bool {
        true
    }
    fn log(&self, r: &log::Record<'_>) {
        let line = format!("{} {} {}", r.level(), r.target(), r.args());
        self.0.lock().unwrap().push(line);
    }
    fn flush(&self) {}
}

static LOG: Capture = Capture(Mutex::new(Vec::new()));

fn logs() -> Vec<String> {
    let _ = log::set_logger(&LOG).map(|()| log::set_max_level(log::LevelFilter::Debug));
    LOG.0.lock().unwrap().clone()
}

/// Fails if `text` holds any line of the PEM files of `pki` (their base64 bodies, their
/// BEGIN/END lines).
fn assert_no_material(pki: &Pki, text: &str) {
    for entry in std::fs::read_dir(pki.dir()).unwrap() {
        let pem = std::fs::read_to_string(entry.unwrap().path()).unwrap();
        for line in pem.lines().filter(|l| l.len() >= 16) {
            assert!(!text.contains(line), "PEM material in: {text}");
        }
    }
    assert!(!text.contains("-----BEGIN"), "PEM material in: {text}");
}

/// Every captured log line so far passes [`assert_no_material`].
fn assert_logs_clean(pki: &Pki) {
    for l in logs() {
        assert_no_material(pki, &l);
    }
}

/// A configuration with the tests' generous timeouts.
fn config(urls: Vec<String>, tls: TlsOptions) -> Config {
    logs(); // installs the logger
    Config::new(urls)
        .tls(tls)
        .node_timeout(Duration::from_millis(500))
        .connect_timeout(Duration::from_millis(1000))
        .retry_delay(Duration::from_millis(20))
}

fn key(resource: &str) -> Vec<u8> {
    format!("redlock:{resource}").into_bytes()
}

/// Lock, extend, fenced lock and unlock over `cluster`, checking what every node holds.
fn lock_cycle(cluster: &Cluster, mgr: &Redlock, resource: &str) {
    let n = cluster.servers.len();
    let lease = mgr.try_lock(resource, Duration::from_secs(10)).unwrap();
    assert!(lease.acquisition().successes >= mgr.quorum());
    // The step returned at quorum; the slower nodes apply it too.
    let value = lease.value().as_bytes().to_vec();
    let all_hold = || cluster.holding(&key(resource), &value) == n;
    assert!(eventually(Duration::from_secs(5), all_hold));
    lease.extend(Duration::from_secs(20)).unwrap();
    let all_extended = || {
        let k = key(resource);
        cluster.servers.iter().all(|s| s.pttl(&k) > 10_000)
    };
    assert!(
        eventually(Duration::from_secs(5), all_extended),
        "the extension reached every node"
    );
    lease.unlock().unwrap();
    assert!(eventually(Duration::from_secs(5), || cluster
        .present(&key(resource))
        == 0));

    let opts = LockOptions::new().fenced(true);
    let first = mgr
        .acquire(resource, Duration::from_secs(10), &opts)
        .unwrap();
    let t1 = first.fencing_token().expect("a fencing token");
    first.unlock().unwrap();
    let second = mgr
        .acquire(resource, Duration::from_secs(10), &opts)
        .unwrap();
    assert!(second.fencing_token().unwrap() > t1);
    second.unlock().unwrap();
}

#[test]
fn lock_extend_unlock_and_fenced_over_five_tls_nodes() {
    let pki = Pki::new();
    let cluster = Cluster::start_tls(5, &pki.serve());
    assert!(cluster.urls().iter().all(|u| u.starts_with("rediss://")));
    let mgr = Redlock::new(config(cluster.urls(), pki.options())).unwrap();
    lock_cycle(&cluster, &mgr, "tls:five");
    assert_logs_clean(&pki);
}

#[test]
fn three_tls_nodes_and_two_plain_ones_make_one_cluster() {
    let pki = Pki::new();
    let serve = pki.serve();
    let handles: Vec<_> = (0..5)
        .map(|i| {
            let t = serve.clone();
            thread::spawn(move || {
                if i % 2 == 0 {
                    RedisServer::start_tls(&t)
                } else {
                    RedisServer::start()
                }
            })
        })
        .collect();
    let cluster = Cluster {
        servers: handles.into_iter().map(|h| h.join().unwrap()).collect(),
    };
    let urls = cluster.urls();
    assert_eq!(
        urls.iter().filter(|u| u.starts_with("rediss://")).count(),
        3
    );
    let mgr = Redlock::new(config(urls, pki.options())).unwrap();
    let addrs = mgr.node_addrs();
    assert!(addrs[0].starts_with("rediss://127.0.0.1:") && addrs[1].starts_with("127.0.0.1:"));
    lock_cycle(&cluster, &mgr, "tls:mixed");
}

/// Node `i`'s outcome in `report`, and the report's text.
fn tls_failure_of(e: &Error, i: usize) -> String {
    let r = e.report().unwrap_or_else(|| panic!("a report: {e}"));
    match &r.nodes[i].outcome {
        NodeOutcome::Tls(why) => why.clone(),
        other => panic!("node {i}: {other:?} in {e}"),
    }
}

#[test]
fn another_ca_an_expired_certificate_and_another_name_are_refused_naming_the_node() {
    let pki = Pki::new();
    let other = Pki::named("another CA");
    let (expired_c, expired_k) = pki.issue(
        "expired",
        &["127.0.0.1", "localhost"],
        Validity::Expired,
        false,
    );
    let (named_c, named_k) = pki.issue("named", &["redis.test"], Validity::Now, false);
    let serves: [TlsServe; 4] = [
        pki.serve(),
        other.serve(),
        pki.serve_with(&expired_c, &expired_k),
        pki.serve_with(&named_c, &named_k),
    ];
    let servers: Vec<RedisServer> = serves.iter().map(RedisServer::start_tls).collect();
    // A cluster in use: the bad node, never heard from, does not keep it undecided.
    servers[0].mark();
    let url = |i: usize| servers[i].url();
    // The good node alone: too few for a quorum of 2, so the step waits for every verdict.
    for (bad, says) in [
        (1, "not signed by a trusted CA"),
        (2, "has expired"),
        (3, "not valid for the name \"127.0.0.1\""),
    ] {
        let mgr = Redlock::new(config(vec![url(0), url(bad)], pki.options())).unwrap();
        let e = mgr
            .try_lock("tls:refused", Duration::from_secs(5))
            .unwrap_err();
        eprintln!("{e}");
        assert!(matches!(e, Error::Unavailable(_)), "{e}");
        let why = tls_failure_of(&e, 1);
        assert!(why.contains(says), "{why}");
        let text = e.to_string();
        assert!(
            text.contains(&format!("node 1 ({}): TLS failed: ", url(bad))),
            "{text}"
        );
        assert!(text.contains(says), "{text}");
        // The good node answered, or the step was decided (no quorum left) before it did.
        let good = &e.report().unwrap().nodes[0].outcome;
        assert!(
            matches!(good, NodeOutcome::Success | NodeOutcome::Pending),
            "{e}"
        );
        assert_no_material(&pki, &text);
        assert_no_material(&other, &text);
    }
    // During the reconnect backoff that follows, the node is not contacted and the TLS failure
    // is reported again (not a bare "backoff").
    let mgr = Redlock::new(
        config(vec![url(0), url(1)], pki.options())
            .reconnect_backoff(Duration::from_secs(30), Duration::from_secs(30)),
    )
    .unwrap();
    for _ in 0..2 {
        let e = mgr
            .try_lock("tls:backoff", Duration::from_secs(5))
            .unwrap_err();
        assert!(tls_failure_of(&e, 1).contains("not signed by a trusted CA"));
    }
    assert_logs_clean(&pki);
    assert_logs_clean(&other);
}

#[test]
fn the_other_nodes_decide_the_quorum_around_refused_certificates() {
    let pki = Pki::new();
    let other = Pki::named("another CA");
    let (expired_c, expired_k) = pki.issue("expired", &["127.0.0.1"], Validity::Expired, false);
    let serves = [
        pki.serve(),
        other.serve(),
        pki.serve(),
        pki.serve_with(&expired_c, &expired_k),
        pki.serve(),
    ];
    let cluster = Cluster {
        servers: serves.iter().map(RedisServer::start_tls).collect(),
    };
    // The good nodes carry the marker of a cluster in use: the bad ones, never heard from, do
    // not keep a brand-new cluster undecided.
    for i in [0, 2, 4] {
        cluster.servers[i].mark();
    }
    let mgr = Redlock::new(config(cluster.urls(), pki.options())).unwrap();
    let lease = mgr.try_lock("tls:quorum", Duration::from_secs(10)).unwrap();
    assert_eq!(lease.acquisition().successes, 3, "{}", lease.acquisition());
    assert_eq!(
        cluster.holding(&key("tls:quorum"), lease.value().as_bytes()),
        3
    );
    lease.unlock().unwrap();
    // The refusals are told per node (the first step may have decided before they came).
    assert!(
        eventually(Duration::from_secs(10), || {
            let lease = mgr.try_lock("tls:quorum", Duration::from_secs(10)).unwrap();
            let nodes = &lease.acquisition().nodes;
            let tls = |i: usize| matches!(&nodes[i].outcome, NodeOutcome::Tls(_));
            let ok = tls(1) && tls(3);
            lease.unlock().unwrap();
            ok
        }),
        "nodes 1 and 3 were never reported as TLS failures"
    );
}

#[test]
fn a_server_name_override_verifies_nodes_addressed_by_ip() {
    let pki = Pki::new();
    let (c, k) = pki.issue("named", &["redis.test"], Validity::Now, false);
    let cluster = Cluster::start_tls(3, &pki.serve_with(&c, &k));
    let e = Redlock::new(config(cluster.urls(), pki.options()))
        .unwrap()
        .try_lock("tls:name", Duration::from_secs(5))
        .unwrap_err();
    assert!(
        tls_failure_of(&e, 0).contains("server name override"),
        "{e}"
    );
    let mgr = Redlock::new(config(
        cluster.urls(),
        pki.options().server_name("redis.test"),
    ))
    .unwrap();
    lock_cycle(&cluster, &mgr, "tls:name");
    // A name the certificate does not carry is refused with the override too.
    let e = Redlock::new(config(
        cluster.urls(),
        pki.options().server_name("other.test"),
    ))
    .unwrap()
    .try_lock("tls:name", Duration::from_secs(5))
    .unwrap_err();
    assert!(tls_failure_of(&e, 0).contains("\"other.test\""), "{e}");
}

#[test]
fn mutual_tls_refuses_a_client_without_a_certificate_and_accepts_one_with_it() {
    let pki = Pki::new();
    let cluster = Cluster::start_tls(3, &pki.serve().auth_clients());
    let e = Redlock::new(config(cluster.urls(), pki.options()))
        .unwrap()
        .try_lock("tls:mutual", Duration::from_secs(5))
        .unwrap_err();
    eprintln!("{e}");
    assert!(matches!(e, Error::Unavailable(_)), "{e}");
    for i in 0..3 {
        let why = tls_failure_of(&e, i);
        assert!(why.contains("client certificate"), "{why}");
    }
    // A certificate from another CA is refused as well.
    let other = Pki::named("another CA");
    let e = Redlock::new(config(
        cluster.urls(),
        other.options_with_client_cert().ca_file(&pki.ca),
    ))
    .unwrap()
    .try_lock("tls:mutual", Duration::from_secs(5))
    .unwrap_err();
    assert!(tls_failure_of(&e, 0).contains("client certificate"), "{e}");
    let mgr = Redlock::new(config(cluster.urls(), pki.options_with_client_cert())).unwrap();
    lock_cycle(&cluster, &mgr, "tls:mutual");
    assert_logs_clean(&pki);
}

#[test]
fn a_node_that_never_completes_the_handshake_costs_the_step_nothing() {
    let pki = Pki::new();
    let cluster = Cluster::start_tls(4, &pki.serve());
    cluster.mark();
    let silent = SilentListener::start();
    let silent_url = format!("rediss://127.0.0.1:{}", silent.port);
    let mut urls = cluster.urls();
    urls.insert(2, silent_url.clone());
    // Long timeouts: a step that waited for the silent node would take 20 s (its connect
    // timeout and its node timeout). Half the connect timeout leaves a busy machine all the
    // time it needs for four TLS handshakes and a step.
    let cfg = config(urls, pki.options())
        .connect_timeout(Duration::from_secs(10))
        .node_timeout(Duration::from_secs(10));
    let mgr = Redlock::new(cfg).unwrap();
    for round in 0..3 {
        let t = Instant::now();
        let lease = mgr.try_lock("tls:silent", Duration::from_secs(30)).unwrap();
        let took = t.elapsed();
        eprintln!("round {round}: {took:?}");
        assert!(took < Duration::from_secs(5), "round {round}: {took:?}");
        let r = lease.acquisition();
        assert!(r.successes >= 3, "{r}");
        assert!(!r.nodes[2].outcome.is_answer(), "{r}");
        lease.unlock().unwrap();
    }
    // Needed for a quorum, the silent node costs its deadline and no more: connect timeout +
    // node timeout. (Each long enough for the good node's handshake and answer on a busy
    // machine: a good node that timed out too would end the step at its connect timeout.)
    let mgr = Redlock::new(
        config(vec![cluster.urls()[0].clone(), silent_url], pki.options())
            .connect_timeout(Duration::from_secs(1))
            .node_timeout(Duration::from_secs(1)),
    )
    .unwrap();
    let t = Instant::now();
    let e = mgr
        .try_lock("tls:silent2", Duration::from_secs(30))
        .unwrap_err();
    let took = t.elapsed();
    assert!(matches!(e, Error::Unavailable(_)), "{e}");
    assert_eq!(
        e.report().unwrap().nodes[1].outcome,
        NodeOutcome::Timeout,
        "{e}"
    );
    assert!(took >= Duration::from_millis(1950), "{took:?}");
    assert!(took < Duration::from_secs(5), "{took:?}");
}

#[test]
fn a_waiter_is_woken_by_a_release_over_tls() {
    let pki = Pki::new();
    let cluster = Cluster::start_tls(3, &pki.serve());
    let holder = Redlock::new(config(cluster.urls(), pki.options())).unwrap();
    // A waiter that polled would pause up to 30 s (under 3 s one time in ten): one granted
    // within 3 s was woken. (Not a bound of milliseconds: a busy machine may take a second
    // or two to schedule the wake-up.)
    let waiter =
        Redlock::new(config(cluster.urls(), pki.options()).retry_delay(Duration::from_secs(30)))
            .unwrap();
    let lease = holder
        .try_lock("tls:wake", Duration::from_secs(30))
        .unwrap();
    let w = thread::spawn(move || {
        let opts = LockOptions::new().wait(Wait::For(Duration::from_secs(20)));
        let r = waiter.acquire("tls:wake", Duration::from_secs(30), &opts);
        (r, Instant::now())
    });
    let subscribed = || {
        cluster
            .servers
            .iter()
            .filter(|s| {
                let list: String = redis::cmd("CLIENT")
                    .arg("LIST")
                    .arg("TYPE")
                    .arg("pubsub")
                    .query(&mut s.client())
                    .unwrap();
                list.lines().any(|l| !l.is_empty())
            })
            .count()
    };
    assert!(eventually(Duration::from_secs(10), || subscribed() >= 2));
    thread::sleep(Duration::from_millis(200));
    let released = Instant::now();
    lease.unlock().unwrap();
    let (r, at) = w.join().unwrap();
    let granted = r.unwrap();
    let after = at.saturating_duration_since(released);
    eprintln!("granted {after:?} after the release");
    assert!(
        after < Duration::from_secs(3),
        "granted {after:?} after the release"
    );
    granted.unlock().unwrap();
}

#[test]
fn auth_and_select_over_tls() {
    let pki = Pki::new();
    let serve = pki.serve();
    let servers: Vec<RedisServer> = (0..3)
        .map(|_| RedisServer::start_tls_with(&serve, &["--requirepass", "s3cret"]))
        .collect();
    let url = |s: &RedisServer, pw: &str| format!("rediss://:{pw}@127.0.0.1:{}/3", s.port);
    let urls: Vec<String> = servers.iter().map(|s| url(s, "s3cret")).collect();
    let mgr = Redlock::new(config(urls, pki.options())).unwrap();
    let lease = mgr.try_lock("tls:auth", Duration::from_secs(10)).unwrap();
    for s in &servers {
        let got: Option<String> = redis::cmd("GET")
            .arg(key("tls:auth"))
            .query(&mut s.client_url(&url(s, "s3cret")))
            .unwrap();
        assert_eq!(got.as_deref(), Some(lease.value()), "the key is in db 3");
    }
    lease.unlock().unwrap();
    // A wrong password over TLS is a refusal of the credentials, as in plain.
    let urls: Vec<String> = servers.iter().map(|s| url(s, "wrong")).collect();
    let e = Redlock::new(config(urls, pki.options()))
        .unwrap()
        .try_lock("tls:auth", Duration::from_secs(10))
        .unwrap_err();
    assert!(matches!(e, Error::Auth(_)), "{e}");
    assert!(!e.to_string().contains("wrong"), "{e}");
}

#[test]
fn a_restarted_tls_node_is_reconnected_and_quarantined() {
    let pki = Pki::new();
    let mut cluster = Cluster::start_tls(3, &pki.serve());
    let mgr = Redlock::new(
        config(cluster.urls(), pki.options())
            .max_ttl(Duration::from_secs(2))
            .reconnect_backoff(Duration::from_millis(5), Duration::from_millis(50)),
    )
    .unwrap();
    let ttl = Duration::from_millis(1500);
    mgr.try_lock("tls:restart", ttl).unwrap().unlock().unwrap();
    let run_id = cluster.servers[0].run_id();
    cluster.servers[0].restart();
    assert_ne!(cluster.servers[0].run_id(), run_id);
    let outcome = || match mgr.try_lock("tls:restart", ttl) {
        Ok(l) => {
            let o = l.acquisition().nodes[0].outcome.clone();
            l.unlock().unwrap();
            o
        }
        Err(e) => panic!("{e}"),
    };
    assert!(
        eventually(Duration::from_secs(10), || matches!(
            outcome(),
            NodeOutcome::Quarantined { .. }
        )),
        "the restarted node was never seen again over TLS"
    );
    assert!(
        eventually(Duration::from_secs(10), || outcome()
            == NodeOutcome::Success),
        "the restarted node never counted again"
    );
}

#[test]
fn plain_and_tls_ports_mixed_up_say_so() {
    let pki = Pki::new();
    let tls = RedisServer::start_tls(&pki.serve());
    let plain = RedisServer::start();
    let e = Redlock::new(config(
        vec![format!("rediss://127.0.0.1:{}", plain.port)],
        pki.options(),
    ))
    .unwrap()
    .try_lock("tls:ports", Duration::from_secs(5))
    .unwrap_err();
    // A plain node reads a ClientHello as the start of an inline command and waits for its
    // end; the probe that the silent handshake gets finds it answering in RESP.
    assert!(matches!(e, Error::Unavailable(_)), "{e}");
    assert!(tls_failure_of(&e, 0).contains("does not speak TLS"), "{e}");
    let e = Redlock::new(config(
        vec![format!("redis://127.0.0.1:{}", tls.port)],
        pki.options(),
    ))
    .unwrap()
    .try_lock("tls:ports", Duration::from_secs(5))
    .unwrap_err();
    assert!(matches!(e, Error::Unavailable(_)), "{e}");
}

/// A `rediss://` URL whose port is a plain Redis server's (issue #39, item 8). Redis reads the
/// ClientHello as the start of an inline command and waits, silent, for its line to end, so
/// the TLS handshake alone would only ever time out. The node must be reported as one that
/// does not speak TLS, and before the step's own deadline (well before: under the connect
/// timeout; the step would wait the connect timeout plus the node timeout).
#[test]
fn a_plain_server_on_a_rediss_url_is_told_not_to_speak_tls_before_the_deadline() {
    let pki = Pki::new();
    for pass in [None, Some("s3cret")] {
        let plain = match pass {
            None => RedisServer::start(),
            Some(pw) => RedisServer::start_with(&["--requirepass", pw]),
        };
        let connect_timeout = Duration::from_secs(4);
        let mgr = Redlock::new(
            config(
                vec![format!("rediss://127.0.0.1:{}", plain.port)],
                pki.options(),
            )
            .connect_timeout(connect_timeout)
            .node_timeout(Duration::from_secs(6)),
        )
        .unwrap();
        let t = Instant::now();
        let e = mgr
            .try_lock("tls:plain", Duration::from_secs(5))
            .unwrap_err();
        let took = t.elapsed();
        eprintln!("{took:?}: {e}");
        assert!(matches!(e, Error::Unavailable(_)), "{e}");
        let why = tls_failure_of(&e, 0);
        assert!(why.contains("does not speak TLS"), "{why}");
        assert!(why.contains("plain RESP"), "{why}");
        assert!(took < connect_timeout, "{took:?}: {e}");
        assert_logs_clean(&pki);
    }
    // A plain server that speaks first: with its one client slot taken, it answers a new
    // connection `-ERR max number of clients reached` and closes it. Those first bytes of the
    // handshake tell at once (before any probe is due: half the connect timeout).
    let plain = RedisServer::start_with(&["--maxclients", "1"]);
    let mut held = plain.client();
    let _: String = redis::cmd("PING").query(&mut held).unwrap();
    let connect_timeout = Duration::from_secs(20);
    let mgr = Redlock::new(
        config(
            vec![format!("rediss://127.0.0.1:{}", plain.port)],
            pki.options(),
        )
        .connect_timeout(connect_timeout),
    )
    .unwrap();
    let t = Instant::now();
    let e = mgr
        .try_lock("tls:plain", Duration::from_secs(5))
        .unwrap_err();
    let took = t.elapsed();
    eprintln!("{took:?}: {e}");
    let why = tls_failure_of(&e, 0);
    assert!(
        why.contains("does not speak TLS (it answered in plain RESP)"),
        "{why}"
    );
    assert!(took < connect_timeout / 2, "{took:?}: {e}");
}

#[test]
fn skipping_verification_is_explicit_and_logged() {
    let other = Pki::named("a CA nobody trusts");
    let cluster = Cluster::start_tls(3, &other.serve());
    let pki = Pki::new();
    let e = Redlock::new(config(cluster.urls(), pki.options()))
        .unwrap()
        .try_lock("tls:insecure", Duration::from_secs(5))
        .unwrap_err();
    assert!(tls_failure_of(&e, 0).contains("not signed by a trusted CA"));
    let mgr = Redlock::new(config(
        cluster.urls(),
        TlsOptions::new().insecure_skip_verify(true),
    ))
    .unwrap();
    assert!(
        logs()
            .iter()
            .any(|l| l.starts_with("WARN") && l.contains("verification is OFF")),
        "{:?}",
        logs()
    );
    lock_cycle(&cluster, &mgr, "tls:insecure");
}

#[test]
fn unusable_files_are_invalid_input_naming_the_path_never_the_content() {
    let pki = Pki::new();
    let other = Pki::named("another CA");
    let dir = pki.dir();
    let garbage = dir.join("garbage.pem");
    std::fs::write(
        &garbage,
        "-----BEGIN CERTIFICATE-----\nthis line is not base64 at all!!\n-----END CERTIFICATE-----\n",
    )
    .unwrap();
    let missing = dir.join("missing.pem");
    let node = vec!["rediss://127.0.0.1:1".to_string()];
    let cases: Vec<(TlsOptions, &std::path::Path, &str)> = vec![
        (TlsOptions::new().ca_file(&missing), &missing, "cannot read"),
        (
            TlsOptions::new().ca_file(&pki.client_key),
            &pki.client_key,
            "no CERTIFICATE",
        ),
        (TlsOptions::new().ca_file(&garbage), &garbage, "base64"),
        (
            pki.options().client_cert(&pki.client_cert, &missing),
            &missing,
            "cannot read",
        ),
        (
            pki.options()
                .client_cert(&pki.client_cert, &pki.client_cert),
            &pki.client_cert,
            "no PRIVATE KEY",
        ),
        (
            pki.options()
                .client_cert(&pki.client_cert, &other.client_key),
            &other.client_key,
            "does not belong to the certificate",
        ),
    ];
    for (opts, path, says) in cases {
        let text = refused_at_construction(&node, opts, path, says, "not base64 at all");
        assert_no_material(&pki, &text);
        assert_no_material(&other, &text);
    }
    // A file set for a cluster with no TLS node is still checked.
    let e = Redlock::new(config(
        vec!["redis://127.0.0.1:1".into()],
        TlsOptions::new().ca_file(&missing),
    ))
    .unwrap_err();
    assert!(e.to_string().contains("missing.pem"), "{e}");
    for bad in ["", "not a name!", "a..b"] {
        let e = Redlock::new(config(node.clone(), pki.options().server_name(bad))).unwrap_err();
        assert!(e.to_string().contains("TLS server name"), "{bad:?}: {e}");
    }
    // Everything right: built, and nothing is connected yet.
    let ok = Redlock::new(config(
        node,
        pki.options_with_client_cert().server_name("redis.test"),
    ));
    assert!(ok.is_ok());
}

/// A certificate file whose first certificate is sound but whose chain goes on with a
/// `CERTIFICATE` section that is valid base64 and not a certificate (issue #39, item 7): the
/// client chain is checked at construction as the CA file is, so this is `InvalidInput` naming
/// the file, not a manager whose every lock fails in the node's TLS alert. The same garbage in
/// the CA file, and in the key file, is refused naming those files.
#[test]
fn a_client_chain_with_a_certificate_that_does_not_parse_is_invalid_input() {
    let pki = Pki::new();
    let dir = pki.dir();
    let section = |kind: &str| {
        // Valid base64 ("this is not DER at all, only bytes"), not DER.
        format!(
            "-----BEGIN {kind}-----\ndGhpcyBpcyBub3QgREVSIGF0IGFsbCwgb25seSBieXRlcw==\n-----END {kind}-----\n"
        )
    };
    let chain = dir.join("client-chain.pem");
    let mut text = std::fs::read_to_string(&pki.client_cert).unwrap();
    text.push_str(&section("CERTIFICATE"));
    std::fs::write(&chain, text).unwrap();
    let ca = dir.join("ca-chain.pem");
    let mut text = std::fs::read_to_string(&pki.ca).unwrap();
    text.push_str(&section("CERTIFICATE"));
    std::fs::write(&ca, text).unwrap();
    let bad_key = dir.join("bad.key");
    std::fs::write(&bad_key, section("PRIVATE KEY")).unwrap();
    let node = vec!["rediss://127.0.0.1:1".to_string()];
    let cases: Vec<(TlsOptions, &std::path::Path, &str)> = vec![
        (
            pki.options().client_cert(&chain, &pki.client_key),
            &chain,
            "certificate 2 in it",
        ),
        (TlsOptions::new().ca_file(&ca), &ca, "BadEncoding"),
        (
            pki.options().client_cert(&pki.client_cert, &bad_key),
            &bad_key,
            "client key",
        ),
    ];
    for (opts, path, says) in cases {
        let text = refused_at_construction(&node, opts, path, says, "dGhpcyBpcyBub3Qg");
        assert_no_material(&pki, &text);
    }
}

/// The TLS section of docs/operations.md, run against TLS nodes with mutual TLS.
#[test]
fn the_readme_tls_fragment_runs() {
    let pki = Pki::new();
    let cluster = Cluster::start_tls(3, &pki.serve().auth_clients());
    let nodes = cluster.urls().join(",");
    let (ca, cert, key) = (&pki.ca, &pki.client_cert, &pki.client_key);
    let run = || -> Result<(), Error> {
        // README:begin
        let mgr = Redlock::new(
            Config::new(nodes.split(',')) // rediss://host:port, redis:// for plain nodes
                .tls(
                    TlsOptions::new()
                        .ca_file(ca) // default: the system's trust store
                        .client_cert(cert, key), // mutual TLS, when the nodes ask for it
                ),
        )?;
        let lease = mgr.lock("orders:42", Duration::from_secs(10))?;
        lease.unlock()?;
        // README:end
        Ok(())
    };
    run().unwrap();
}

/// Checks that TLS options `opts` are refused as `InvalidInput`, by `Config::check_tls` and by
/// `Redlock::new` alike, naming `path` and saying `says`, without the file's bytes `never`;
/// returns the message (the last of the two), for the caller's own checks.
fn refused_at_construction(
    node: &[String],
    opts: TlsOptions,
    path: &std::path::Path,
    says: &str,
    never: &str,
) -> String {
    let check = Config::check_tls(&opts).unwrap_err();
    let new = Redlock::new(config(node.to_vec(), opts)).unwrap_err();
    let mut last = String::new();
    for e in [check, new] {
        let text = e.to_string();
        assert!(matches!(e, Error::InvalidInput(_)), "{text}");
        assert!(text.contains(&path.display().to_string()), "{text}");
        assert!(text.contains(says), "{text}");
        assert!(!text.contains(never), "{text}");
        last = text;
    }
    last
}
