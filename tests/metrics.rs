//! Metrics: the Prometheus text parses, and its counters match what the test did.

mod support;

use std::collections::HashMap;
use std::time::Duration;

use redlock::{Error, Redlock, RenewOptions};
use support::Cluster;

/// A strict reader of the Prometheus text exposition format (0.0.4): every line is a
/// `# HELP`, a `# TYPE` (counter, gauge or histogram) or a sample of a declared family, with
/// well-formed labels and a float value. Returns samples keyed by `name{labels}`.
fn parse(text: &str) -> HashMap<String, f64> {
    let mut types: HashMap<String, String> = HashMap::new();
    let mut samples = HashMap::new();
    for (n, line) in text.lines().enumerate() {
        let at = |what: &str| format!("line {}: {what}: {line:?}", n + 1);
        if let Some(rest) = line.strip_prefix("# HELP ") {
            let name = rest.split(' ').next().unwrap();
            assert!(valid_name(name), "{}", at("bad HELP name"));
            continue;
        }
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let mut f = rest.split(' ');
            let (name, kind) = (f.next().unwrap(), f.next().expect("a type"));
            assert!(valid_name(name), "{}", at("bad TYPE name"));
            assert!(
                ["counter", "gauge", "histogram"].contains(&kind),
                "{}",
                at("bad type")
            );
            assert!(
                types.insert(name.into(), kind.into()).is_none(),
                "{}",
                at("TYPE twice")
            );
            continue;
        }
        assert!(!line.starts_with('#'), "{}", at("unknown comment"));
        let (series, value) = line.rsplit_once(' ').expect("name and value");
        let v: f64 = value
            .parse()
            .unwrap_or_else(|_| panic!("{}", at("bad value")));
        let name = series.split('{').next().unwrap();
        assert!(valid_name(name), "{}", at("bad sample name"));
        let family = ["_bucket", "_sum", "_count"]
            .iter()
            .find_map(|s| {
                name.strip_suffix(s)
                    .filter(|f| types.get(*f).is_some_and(|t| t == "histogram"))
            })
            .unwrap_or(name);
        assert!(
            types.contains_key(family),
            "{}",
            at("sample before its TYPE")
        );
        if let Some(labels) = series.strip_prefix(name)
            && !labels.is_empty()
        {
            let inner = labels
                .strip_prefix('{')
                .and_then(|l| l.strip_suffix('}'))
                .unwrap_or_else(|| panic!("{}", at("bad label braces")));
            check_labels(inner, &at("bad labels"));
        }
        assert!(
            samples.insert(series.to_string(), v).is_none(),
            "{}",
            at("duplicate")
        );
    }
    samples
}

fn valid_name(n: &str) -> bool {
    !n.is_empty()
        && n.chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':')
        && !n.starts_with(|c: char| c.is_ascii_digit())
}

fn check_labels(mut s: &str, err: &str) {
    while !s.is_empty() {
        let (k, rest) = s.split_once("=\"").unwrap_or_else(|| panic!("{err}"));
        assert!(valid_name(k), "{err}");
        let mut end = None;
        let mut escaped = false;
        for (i, c) in rest.char_indices() {
            match (escaped, c) {
                (true, _) => escaped = false,
                (false, '\\') => escaped = true,
                (false, '"') => {
                    end = Some(i);
                    break;
                }
                _ => {}
            }
        }
        let end = end.unwrap_or_else(|| panic!("{err}"));
        s = rest[end + 1..]
            .strip_prefix(',')
            .unwrap_or(&rest[end + 1..]);
    }
}

#[test]
fn the_prometheus_text_parses_and_counts_what_happened() {
    let mut cluster = Cluster::start(3);
    let mgr = Redlock::new(
        support::config(cluster.urls())
            .retry_count(2)
            .retry_delay(Duration::from_millis(5))
            .node_timeout(Duration::from_millis(300)),
    )
    .unwrap();
    // 5 grants, unlocked; 1 extension.
    for i in 0..5 {
        let l = mgr
            .try_lock(format!("m{i}"), Duration::from_secs(5))
            .unwrap();
        if i == 0 {
            l.extend(Duration::from_secs(5)).unwrap();
        }
        l.unlock().unwrap();
    }
    // Held elsewhere: one lock call with 2 retries (3 attempts) ends not acquired.
    let held = mgr.try_lock("busy", Duration::from_secs(5)).unwrap();
    assert!(matches!(
        mgr.lock("busy", Duration::from_secs(5)),
        Err(Error::NotAcquired(_))
    ));
    // A double unlock counts as not held; bad input is counted too.
    held.unlock().unwrap();
    assert!(held.unlock().is_err());
    assert!(mgr.try_lock("", Duration::from_secs(1)).is_err());
    // A renewed lease.
    let r = mgr.try_lock("renewed", Duration::from_millis(300)).unwrap();
    r.auto_renew(RenewOptions::new()).unwrap();
    std::thread::sleep(Duration::from_millis(450));
    r.unlock().unwrap();
    // One node down for one attempt.
    cluster.servers[2].kill();
    mgr.try_lock("down", Duration::from_secs(1))
        .unwrap()
        .unlock()
        .unwrap();

    let m = mgr.metrics();
    let text = m.to_prometheus();
    let s = parse(&text);
    let get = |k: &str| {
        *s.get(k)
            .unwrap_or_else(|| panic!("{k} missing from\n{text}"))
    };
    assert_eq!(get(r#"redlock_acquire_total{result="granted"}"#), 8.0);
    assert_eq!(get(r#"redlock_acquire_total{result="not_acquired"}"#), 1.0);
    assert_eq!(get(r#"redlock_acquire_total{result="invalid_input"}"#), 1.0);
    // 5 + 1 + 3 + 1 + 1, and one more: the very first attempt on this brand-new cluster waits
    // for every node, which trusts them all, and the attempt is made again at once.
    assert_eq!(get("redlock_acquire_attempts_total"), 12.0);
    assert_eq!(get("redlock_acquire_retries_total"), 2.0);
    assert_eq!(get(r#"redlock_unlock_total{result="ok"}"#), 8.0);
    assert_eq!(get(r#"redlock_unlock_total{result="not_held"}"#), 1.0);
    assert_eq!(get(r#"redlock_extend_total{result="ok"}"#), 1.0);
    assert!(get("redlock_renewals_total") >= 1.0);
    assert_eq!(get("redlock_acquire_wait_seconds_count"), 8.0);
    assert_eq!(
        get(r#"redlock_acquire_wait_seconds_bucket{le="+Inf"}"#),
        8.0
    );
    assert_eq!(get("redlock_hold_seconds_count"), 8.0);
    assert_eq!(get("redlock_nodes_quarantined"), 0.0);
    let node2 = format!("node=\"2\",addr=\"127.0.0.1:{}\"", cluster.servers[2].port);
    assert!(
        get(&format!(
            "redlock_node_errors_total{{{node2},kind=\"unreachable\"}}"
        )) >= 1.0
    );
    let node0 = format!("node=\"0\",addr=\"127.0.0.1:{}\"", cluster.servers[0].port);
    assert!(get(&format!("redlock_node_requests_total{{{node0}}}")) >= 20.0);
    // Buckets are cumulative and end at the count.
    let mut last = 0.0;
    for b in redlock::BUCKETS {
        let v = get(&format!(
            "redlock_node_latency_seconds_bucket{{{node0},le=\"{b}\"}}"
        ));
        assert!(v >= last);
        last = v;
    }
    assert!(last <= get(&format!("redlock_node_latency_seconds_count{{{node0}}}")));
    assert!(get(&format!("redlock_node_latency_seconds_count{{{node0}}}")) > 0.0);
    // The snapshot agrees with the text.
    assert_eq!(m.grants, 8);
    assert_eq!(m.unlocks.not_held, 1);
}

#[test]
fn passwords_never_reach_the_metrics() {
    let s = support::RedisServer::start_with(&["--requirepass", "sekrit-pw"]);
    let mgr = Redlock::new(support::config(vec![format!(
        "redis://:sekrit-pw@127.0.0.1:{}",
        s.port
    )]))
    .unwrap();
    mgr.try_lock("p", Duration::from_secs(1))
        .unwrap()
        .unlock()
        .unwrap();
    let text = mgr.metrics().to_prometheus();
    assert!(!text.contains("sekrit-pw"));
    parse(&text);
}
