//! Each Lua script, run directly on a real redis-server.

mod support;

use support::RedisServer;

fn eval(c: &mut redis::Connection, script: &str, key: &str, args: &[&str]) -> i64 {
    let mut cmd = redis::cmd("EVAL");
    cmd.arg(script).arg(1).arg(key);
    for a in args {
        cmd.arg(*a);
    }
    cmd.query(c).expect("EVAL")
}

#[test]
fn release_deletes_only_our_token() {
    let s = RedisServer::start();
    let mut c = s.client();
    redis::cmd("SET")
        .arg("k")
        .arg("mine")
        .arg("PX")
        .arg(10_000)
        .exec(&mut c)
        .unwrap();
    assert_eq!(eval(&mut c, redlock::scripts::RELEASE, "k", &["theirs"]), 0);
    assert_eq!(s.get(b"k").as_deref(), Some(&b"mine"[..]));
    assert_eq!(eval(&mut c, redlock::scripts::RELEASE, "k", &["mine"]), 1);
    assert_eq!(s.get(b"k"), None);
    assert_eq!(eval(&mut c, redlock::scripts::RELEASE, "k", &["mine"]), 0);
}

#[test]
fn extend_sets_the_ttl_only_for_our_token_and_never_creates_a_key() {
    let s = RedisServer::start();
    let mut c = s.client();
    assert_eq!(
        eval(&mut c, redlock::scripts::EXTEND, "k", &["mine", "5000"]),
        0
    );
    assert_eq!(s.pttl(b"k"), -2, "extend must not create a key");
    redis::cmd("SET")
        .arg("k")
        .arg("mine")
        .arg("PX")
        .arg(1_000)
        .exec(&mut c)
        .unwrap();
    assert_eq!(
        eval(&mut c, redlock::scripts::EXTEND, "k", &["theirs", "60000"]),
        0
    );
    assert!(s.pttl(b"k") <= 1_000);
    assert_eq!(
        eval(&mut c, redlock::scripts::EXTEND, "k", &["mine", "60000"]),
        1
    );
    assert!(s.pttl(b"k") > 59_000);
}

#[test]
fn fenced_acquire_returns_the_counter_only_when_it_sets_the_key() {
    let s = RedisServer::start();
    let mut c = s.client();
    let run = |c: &mut redis::Connection, token: &str| -> i64 {
        redis::cmd("EVAL")
            .arg(redlock::scripts::FENCED_ACQUIRE)
            .arg(2)
            .arg("lock")
            .arg("fence")
            .arg(token)
            .arg(5000)
            .query(c)
            .unwrap()
    };
    assert_eq!(run(&mut c, "a"), 0, "no counter yet");
    assert_eq!(run(&mut c, "b"), -1, "held");
    assert_eq!(s.get(b"lock").as_deref(), Some(&b"a"[..]));
    redis::cmd("DEL").arg("lock").exec(&mut c).unwrap();
    redis::cmd("SET").arg("fence").arg(41).exec(&mut c).unwrap();
    assert_eq!(run(&mut c, "c"), 41);
}

#[test]
fn acquire_grants_only_while_the_node_has_its_marker() {
    let s = RedisServer::start();
    let mut c = s.client();
    let run = |c: &mut redis::Connection, script: &str, keys: &[&str], token: &str| {
        let mut cmd = redis::cmd("EVAL");
        cmd.arg(script).arg(keys.len());
        for k in keys {
            cmd.arg(*k);
        }
        cmd.arg(token).arg(5000).query::<i64>(c)
    };
    let marker = std::str::from_utf8(redlock::MARKER_KEY).unwrap();
    // No marker: refused with NOMARKER, and nothing is set.
    let e = run(&mut c, redlock::scripts::ACQUIRE, &["lock", marker], "a").unwrap_err();
    assert_eq!(e.code(), Some("NOMARKER"), "{e}");
    assert_eq!(s.get(b"lock"), None);
    let e = run(
        &mut c,
        redlock::scripts::FENCED_ACQUIRE,
        &["lock", "fence", marker],
        "a",
    )
    .unwrap_err();
    assert_eq!(e.code(), Some("NOMARKER"), "{e}");
    assert_eq!(s.get(b"lock"), None);
    // With a marker: SET NX PX.
    s.mark();
    assert_eq!(
        run(&mut c, redlock::scripts::ACQUIRE, &["lock", marker], "a").unwrap(),
        1
    );
    assert_eq!(
        run(&mut c, redlock::scripts::ACQUIRE, &["lock", marker], "b").unwrap(),
        0
    );
    assert_eq!(s.get(b"lock").as_deref(), Some(&b"a"[..]));
    assert!(s.pttl(b"lock") > 4000);
    redis::cmd("DEL").arg("lock").exec(&mut c).unwrap();
    let r = run(
        &mut c,
        redlock::scripts::FENCED_ACQUIRE,
        &["lock", "fence", marker],
        "a",
    );
    assert_eq!(r.unwrap(), 0, "granted, no counter yet");
    // A flushed keyspace takes the marker with it: refused again.
    redis::cmd("FLUSHALL").exec(&mut c).unwrap();
    let e = run(&mut c, redlock::scripts::ACQUIRE, &["lock", marker], "a").unwrap_err();
    assert_eq!(e.code(), Some("NOMARKER"), "{e}");
}

#[test]
fn fence_write_raises_the_counter_only_for_the_holder_and_never_lowers_it() {
    let s = RedisServer::start();
    let mut c = s.client();
    let run = |c: &mut redis::Connection, token: &str, t: u64| -> i64 {
        redis::cmd("EVAL")
            .arg(redlock::scripts::FENCE_WRITE)
            .arg(2)
            .arg("lock")
            .arg("fence")
            .arg(token)
            .arg(t)
            .query(c)
            .unwrap()
    };
    redis::cmd("SET")
        .arg("lock")
        .arg("me")
        .exec(&mut c)
        .unwrap();
    assert_eq!(run(&mut c, "other", 9), 0);
    assert_eq!(s.get(b"fence"), None);
    assert_eq!(run(&mut c, "me", 9), 1);
    assert_eq!(s.get(b"fence").as_deref(), Some(&b"9"[..]));
    assert_eq!(run(&mut c, "me", 3), 1);
    assert_eq!(s.get(b"fence").as_deref(), Some(&b"9"[..]), "never lowered");
    assert_eq!(s.pttl(b"fence"), -1, "counters never expire");
}

#[test]
fn fenced_store_write_accepts_only_larger_tokens() {
    let s = RedisServer::start();
    let mut c = s.client();
    let write = |c: &mut redis::Connection, t: u64, v: &str| -> i64 {
        redis::cmd("EVAL")
            .arg(redlock::scripts::FENCED_STORE_WRITE)
            .arg(1)
            .arg("data")
            .arg(t)
            .arg(v)
            .query(c)
            .unwrap()
    };
    assert_eq!(write(&mut c, 5, "five"), 1);
    assert_eq!(write(&mut c, 4, "four"), 0);
    assert_eq!(write(&mut c, 5, "five again"), 0);
    assert_eq!(write(&mut c, 6, "six"), 1);
    let v: String = redis::cmd("HGET")
        .arg("data")
        .arg("value")
        .query(&mut c)
        .unwrap();
    assert_eq!(v, "six");
}

#[test]
fn renew_extends_ours_restores_missing_and_leaves_others() {
    let s = RedisServer::start();
    let mut c = s.client();
    redis::cmd("SET")
        .arg("k1")
        .arg("t1")
        .arg("PX")
        .arg(1000)
        .exec(&mut c)
        .unwrap();
    redis::cmd("SET")
        .arg("k3")
        .arg("someone")
        .exec(&mut c)
        .unwrap();
    redis::cmd("LPUSH").arg("k4").arg("x").exec(&mut c).unwrap();
    let out: Vec<i64> = redis::cmd("EVAL")
        .arg(redlock::scripts::RENEW)
        .arg(4)
        .arg("k1")
        .arg("k2")
        .arg("k3")
        .arg("k4")
        .arg("t1")
        .arg(60_000)
        .arg("t2")
        .arg(60_000)
        .arg("t3")
        .arg(60_000)
        .arg("t4")
        .arg(60_000)
        .query(&mut c)
        .unwrap();
    assert_eq!(out, vec![1, 2, 0, -1]);
    assert!(s.pttl(b"k1") > 59_000);
    assert_eq!(s.get(b"k2").as_deref(), Some(&b"t2"[..]));
    assert!(s.pttl(b"k2") > 59_000);
    assert_eq!(s.get(b"k3").as_deref(), Some(&b"someone"[..]));
    assert_eq!(s.pttl(b"k3"), -1);
}
