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
        .arg(10_000) // alive until our EXTEND below, however busy the machine
        .exec(&mut c)
        .unwrap();
    assert_eq!(
        eval(&mut c, redlock::scripts::EXTEND, "k", &["theirs", "60000"]),
        0
    );
    assert!(s.pttl(b"k") <= 10_000);
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
    let run = |c: &mut redis::Connection, token: &str| -> redis::Value {
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
    // The counter comes back as a string, never through a Lua number.
    let counter = |s: &str| redis::Value::BulkString(s.as_bytes().to_vec());
    assert_eq!(run(&mut c, "a"), counter("0"), "no counter yet");
    // Refused: -2 - PTTL, the holder's time left.
    match run(&mut c, "b") {
        redis::Value::Int(n) => assert!((-5002..=-1002).contains(&n), "{n}"),
        other => panic!("held: {other:?}"),
    }
    assert_eq!(s.get(b"lock").as_deref(), Some(&b"a"[..]));
    redis::cmd("DEL").arg("lock").exec(&mut c).unwrap();
    redis::cmd("SET").arg("fence").arg(41).exec(&mut c).unwrap();
    assert_eq!(run(&mut c, "c"), counter("41"));
    redis::cmd("DEL").arg("lock").exec(&mut c).unwrap();
    // 2^53 + 1, which a double would round to 2^53.
    redis::cmd("SET")
        .arg("fence")
        .arg("9007199254740993")
        .exec(&mut c)
        .unwrap();
    assert_eq!(run(&mut c, "d"), counter("9007199254740993"));
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
    // Refused: -2 - PTTL, the holder's time left.
    let refused = run(&mut c, redlock::scripts::ACQUIRE, &["lock", marker], "b").unwrap();
    assert!((-5002..=-1002).contains(&refused), "{refused}");
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
    let run = |c: &mut redis::Connection, token: &str, t: &str| {
        redis::cmd("EVAL")
            .arg(redlock::scripts::FENCE_WRITE)
            .arg(2)
            .arg("lock")
            .arg("fence")
            .arg(token)
            .arg(t)
            .query::<i64>(c)
    };
    redis::cmd("SET")
        .arg("lock")
        .arg("me")
        .exec(&mut c)
        .unwrap();
    assert_eq!(run(&mut c, "other", "9").unwrap(), 0);
    assert_eq!(s.get(b"fence"), None);
    assert_eq!(run(&mut c, "me", "9").unwrap(), 1);
    assert_eq!(s.get(b"fence").as_deref(), Some(&b"9"[..]));
    assert_eq!(run(&mut c, "me", "3").unwrap(), 1);
    assert_eq!(s.get(b"fence").as_deref(), Some(&b"9"[..]), "never lowered");
    assert_eq!(s.pttl(b"fence"), -1, "counters never expire");
    // Exact beyond 2^53, where Lua's doubles would call these equal, and up to 2^64 - 1.
    for (t, now) in [
        ("9007199254740993", "9007199254740993"),
        ("9007199254740992", "9007199254740993"),
        ("9007199254740994", "9007199254740994"),
        ("10000000000000000000", "10000000000000000000"),
        ("9999999999999999999", "10000000000000000000"),
        ("18446744073709551614", "18446744073709551614"),
        ("18446744073709551615", "18446744073709551615"),
        ("18446744073709551606", "18446744073709551615"),
    ] {
        assert_eq!(run(&mut c, "me", t).unwrap(), 1, "{t}");
        assert_eq!(
            s.get(b"fence").as_deref(),
            Some(now.as_bytes()),
            "after {t}"
        );
    }
    // Not a counter: refused with an error, the counter untouched.
    for bad in ["18446744073709551616", "-1", "07", "1e3", "", "x"] {
        assert!(run(&mut c, "me", bad).is_err(), "{bad:?}");
    }
    assert_eq!(
        s.get(b"fence").as_deref(),
        Some(&b"18446744073709551615"[..])
    );
}

#[test]
fn fenced_store_write_accepts_only_larger_tokens() {
    let s = RedisServer::start();
    let mut c = s.client();
    let write = |c: &mut redis::Connection, t: &str, v: &str| {
        redis::cmd("EVAL")
            .arg(redlock::scripts::FENCED_STORE_WRITE)
            .arg(1)
            .arg("data")
            .arg(t)
            .arg(v)
            .query::<i64>(c)
    };
    let value = |c: &mut redis::Connection| -> String {
        redis::cmd("HGET")
            .arg("data")
            .arg("value")
            .query(c)
            .unwrap()
    };
    assert_eq!(write(&mut c, "5", "five").unwrap(), 1);
    assert_eq!(write(&mut c, "4", "four").unwrap(), 0);
    assert_eq!(write(&mut c, "5", "five again").unwrap(), 0);
    assert_eq!(write(&mut c, "6", "six").unwrap(), 1);
    assert_eq!(value(&mut c), "six");
    // Beyond 2^53 every token is told apart from its neighbours.
    assert_eq!(write(&mut c, "9007199254740993", "a").unwrap(), 1);
    assert_eq!(write(&mut c, "9007199254740992", "stale").unwrap(), 0);
    assert_eq!(write(&mut c, "9007199254740993", "again").unwrap(), 0);
    assert_eq!(write(&mut c, "9007199254740994", "b").unwrap(), 1);
    assert_eq!(write(&mut c, "18446744073709551615", "last").unwrap(), 1);
    assert_eq!(write(&mut c, "18446744073709551614", "stale").unwrap(), 0);
    assert_eq!(value(&mut c), "last");
    // Not a token: an error, and nothing written.
    for bad in ["18446744073709551616", "-7", "0x10", "010", "", "nine"] {
        assert!(write(&mut c, bad, "bad").is_err(), "{bad:?}");
    }
    assert_eq!(value(&mut c), "last");
}

#[test]
fn renew_extends_ours_reports_missing_and_leaves_others() {
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
    // A missing key is reported, never re-created by the script.
    assert_eq!(s.get(b"k2"), None);
    assert_eq!(s.get(b"k3").as_deref(), Some(&b"someone"[..]));
    assert_eq!(s.pttl(b"k3"), -1);
}

#[test]
fn acquire_without_a_marker_key_skips_the_check_and_reports_the_holders_ttl() {
    let s = RedisServer::start();
    let mut c = s.client();
    assert_eq!(
        eval(&mut c, redlock::scripts::ACQUIRE, "lock", &["a", "5000"]),
        1
    );
    let n = eval(&mut c, redlock::scripts::ACQUIRE, "lock", &["b", "5000"]);
    let pttl = -2 - n;
    assert!((1000..=5000).contains(&pttl), "{n}");
    // A key without a TTL (not ours to set, but possible): refused with 0.
    redis::cmd("SET")
        .arg("plain")
        .arg("x")
        .exec(&mut c)
        .unwrap();
    assert_eq!(
        eval(&mut c, redlock::scripts::ACQUIRE, "plain", &["b", "5000"]),
        0
    );
}

#[test]
fn release_announces_on_the_keys_channel_and_discard_does_not() {
    let s = RedisServer::start();
    let mut c = s.client();
    let mut sub = s.client();
    let mut ps = sub.as_pubsub();
    ps.subscribe("k").unwrap();
    ps.set_read_timeout(Some(std::time::Duration::from_millis(300)))
        .unwrap();
    let set = |c: &mut redis::Connection, v: &str| {
        redis::cmd("SET")
            .arg("k")
            .arg(v)
            .arg("PX")
            .arg(10_000)
            .exec(c)
            .unwrap()
    };
    // DISCARD deletes our key silently; RELEASE of another's token neither deletes nor
    // announces.
    set(&mut c, "mine");
    assert_eq!(eval(&mut c, redlock::scripts::DISCARD, "k", &["mine"]), 1);
    assert_eq!(s.get(b"k"), None);
    set(&mut c, "theirs");
    assert_eq!(eval(&mut c, redlock::scripts::RELEASE, "k", &["mine"]), 0);
    assert!(ps.get_message().is_err(), "nothing announced yet");
    // RELEASE of ours deletes and announces on the key's own name.
    set(&mut c, "mine");
    assert_eq!(eval(&mut c, redlock::scripts::RELEASE, "k", &["mine"]), 1);
    let msg = ps.get_message().expect("the release is announced");
    assert_eq!(msg.get_channel_name(), "k");
}

/// EVAL of `script` with `keys` and `args`, as any reply type.
fn eval_keys<T: redis::FromRedisValue>(
    c: &mut redis::Connection,
    script: &str,
    keys: &[&str],
    args: &[&str],
) -> T {
    let mut cmd = redis::cmd("EVAL");
    cmd.arg(script).arg(keys.len());
    for k in keys {
        cmd.arg(*k);
    }
    for a in args {
        cmd.arg(*a);
    }
    cmd.query(c).expect("EVAL")
}

#[test]
fn reentrant_holds_are_idempotent_and_the_key_lives_as_long_as_the_latest() {
    use redlock::scripts::{REENTRANT_ACQUIRE, REENTRANT_EXTEND, REENTRANT_RELEASE};
    let s = RedisServer::start();
    let mut c = s.client();
    let acquire = |c: &mut redis::Connection, hold: &str, ttl: &str, owner: &str| -> i64 {
        eval_keys(c, REENTRANT_ACQUIRE, &["k", "f"], &[hold, ttl, owner, "0"])
    };
    let release = |c: &mut redis::Connection, hold: &str, owner: &str| -> i64 {
        eval_keys(c, REENTRANT_RELEASE, &["k"], &[hold, "1", owner])
    };
    assert_eq!(acquire(&mut c, "a", "10000", "o1"), 1);
    // The same hold twice is one hold; a second hold of the same owner is added.
    assert_eq!(acquire(&mut c, "a", "10000", "o1"), 1);
    assert_eq!(acquire(&mut c, "b", "60000", "o1"), 1);
    let fields: Vec<String> = redis::cmd("HKEYS").arg("k").query(&mut c).unwrap();
    assert_eq!(fields.len(), 4, "{fields:?}"); // owner, since (the tenure's start), hold:a, hold:b
    assert!(fields.iter().any(|f| f == "since"), "{fields:?}");
    assert!(
        s.pttl(b"k") > 59_000,
        "the key lives as long as its latest hold"
    );
    // Another owner is refused with the remaining TTL; nothing of it is written.
    let refused = acquire(&mut c, "x", "10000", "o2");
    assert!(refused < -59_000, "{refused}");
    // Releasing a hold that never landed, or twice, removes nothing.
    assert_eq!(release(&mut c, "never", "o1"), 0);
    assert_eq!(release(&mut c, "b", "o2"), 0, "another owner's release");
    assert_eq!(release(&mut c, "b", "o1"), 1, "hold a is left");
    assert_eq!(release(&mut c, "b", "o1"), 0);
    assert!(s.pttl(b"k") <= 10_000, "now only hold a's TTL");
    // Extend acts on its own hold only, and never creates one.
    let extend = |c: &mut redis::Connection, hold: &str| -> i64 {
        eval_keys(c, REENTRANT_EXTEND, &["k"], &[hold, "30000", "o1"])
    };
    assert_eq!(extend(&mut c, "b"), 0);
    assert_eq!(extend(&mut c, "a"), 1);
    assert!(s.pttl(b"k") > 29_000);
    assert_eq!(release(&mut c, "a", "o1"), 2, "the last hold frees the key");
    assert_eq!(s.pttl(b"k"), -2);
    // A plain lock's key (a string) is another owner's.
    redis::cmd("SET")
        .arg("k")
        .arg("token")
        .arg("PX")
        .arg(5000)
        .exec(&mut c)
        .unwrap();
    assert!(acquire(&mut c, "a", "10000", "o1") <= -2);
    assert_eq!(release(&mut c, "a", "o1"), 0);
    assert_eq!(s.get(b"k").as_deref(), Some(&b"token"[..]));
}

#[test]
fn the_reentrant_store_write_accepts_the_same_tenure_again_and_never_a_lower_token() {
    let s = RedisServer::start();
    let mut c = s.client();
    let write = |c: &mut redis::Connection, t: &str| -> i64 {
        eval_keys(
            c,
            redlock::scripts::FENCED_STORE_WRITE_REENTRANT,
            &["data"],
            &[t, "v"],
        )
    };
    assert_eq!(write(&mut c, "5"), 1);
    assert_eq!(write(&mut c, "5"), 1, "the same tenure writes again");
    assert_eq!(write(&mut c, "4"), 0);
    assert_eq!(write(&mut c, "9007199254740993"), 1);
    assert_eq!(write(&mut c, "9007199254740992"), 0);
    assert_eq!(write(&mut c, "9007199254740993"), 1);
    assert_eq!(write(&mut c, "18446744073709551615"), 1);
    assert_eq!(write(&mut c, "18446744073709551614"), 0);
}

/// One FAIR_ACQUIRE call on `k` (counter `c`, queue `q`): value, TTL 10 s, ticket, life.
fn fair_acquire(
    c: &mut redis::Connection,
    value: &str,
    ticket: &str,
    life_ms: &str,
) -> redis::Value {
    eval_keys(
        c,
        redlock::scripts::FAIR_ACQUIRE,
        &["k", "c", "q", "n"],
        &[value, "10000", ticket, life_ms, "0"],
    )
}

/// A refusal `{-2 - ms or -1, counter}`, as (code, counter).
fn fair_refusal(v: &redis::Value) -> Option<(i64, String)> {
    match v {
        redis::Value::Array(items) => match items.as_slice() {
            [redis::Value::Int(code), redis::Value::BulkString(c)] => {
                Some((*code, String::from_utf8(c.clone()).unwrap()))
            }
            _ => None,
        },
        _ => None,
    }
}

#[test]
fn fair_acquire_grants_only_the_lowest_live_ticket_and_proposes_from_the_counter() {
    let s = RedisServer::start();
    let mut c = s.client();
    let granted = redis::Value::Int(1);
    // Nobody queued and the key free: granted without a ticket.
    assert_eq!(fair_acquire(&mut c, "h", "", "5000"), granted);
    // Held: a caller without a ticket is refused with the holder's TTL and the counter ("0").
    let (code, counter) = fair_refusal(&fair_acquire(&mut c, "a", "", "5000")).unwrap();
    assert!((-10_002..=-9_000).contains(&code), "{code}");
    assert_eq!(counter, "0");
    // Tickets queue (the counter rises to each), and are refused while the key is held.
    assert!(fair_refusal(&fair_acquire(&mut c, "b", "8", "5000")).is_some());
    assert!(fair_refusal(&fair_acquire(&mut c, "a", "7", "5000")).is_some());
    assert_eq!(s.get(b"n").as_deref(), Some(&b"8"[..]));
    // Tickets never move the fencing counter: a reentrant holder's tenure keeps its token.
    assert_eq!(s.get(b"c"), None);
    let (_, counter) = fair_refusal(&fair_acquire(&mut c, "z", "", "5000")).unwrap();
    assert_eq!(counter, "8");
    let _: i64 = eval_keys(
        &mut c,
        redlock::scripts::FAIR_RELEASE,
        &["k", "q", "n"],
        &["h", "1"],
    );
    // Free, but "a" (ticket 7) is the head: "b", and a newcomer without a ticket, are refused
    // with the time until the head's entry drops out.
    let (code, _) = fair_refusal(&fair_acquire(&mut c, "b", "8", "5000")).unwrap();
    assert!((-5_002..=-4_000).contains(&code), "{code}");
    assert!(fair_refusal(&fair_acquire(&mut c, "n", "", "5000")).is_some());
    assert_eq!(s.get(b"k"), None);
    // The head is granted, and granted again if it asks again (its own value).
    assert_eq!(fair_acquire(&mut c, "a", "7", "5000"), granted);
    assert_eq!(fair_acquire(&mut c, "a", "7", "5000"), granted);
    let _: i64 = eval_keys(
        &mut c,
        redlock::scripts::FAIR_RELEASE,
        &["k", "q", "n"],
        &["a", "1"],
    );
    // A ticket unknown here but lower than the head's is learned, and goes first.
    assert_eq!(fair_acquire(&mut c, "x", "3", "5000"), granted);
    let _: i64 = eval_keys(
        &mut c,
        redlock::scripts::FAIR_RELEASE,
        &["k", "q", "n"],
        &["x", "1"],
    );
    assert_eq!(fair_acquire(&mut c, "b", "8", "5000"), granted);
    let _: i64 = eval_keys(
        &mut c,
        redlock::scripts::FAIR_RELEASE,
        &["k", "q", "n"],
        &["b", "1"],
    );
    // Everybody served: the queue is gone.
    assert!(s.pttl(b"q") == -2 && s.pttl(b"n") == -2);
}

#[test]
fn fair_acquire_drops_expired_entries_and_breaks_ties_by_value() {
    let s = RedisServer::start();
    let mut c = s.client();
    // "dead" (ticket 1) stops refreshing; "live" (ticket 2) does. Dead's entry lives 1 s:
    // long enough that it is still there when live first asks, however busy the machine.
    assert_eq!(
        fair_acquire(&mut c, "dead", "1", "1000"),
        redis::Value::Int(1)
    );
    let _: i64 = eval_keys(
        &mut c,
        redlock::scripts::FAIR_RELEASE,
        &["k", "q", "n"],
        &["dead", "0"],
    );
    assert!(fair_refusal(&fair_acquire(&mut c, "dead", "1", "1000")).is_none());
    let _: i64 = eval_keys(&mut c, redlock::scripts::DISCARD, &["k"], &["dead"]);
    assert!(fair_refusal(&fair_acquire(&mut c, "live", "2", "5000")).is_some());
    std::thread::sleep(std::time::Duration::from_millis(1100));
    assert_eq!(
        fair_acquire(&mut c, "live", "2", "5000"),
        redis::Value::Int(1)
    );
    let _: i64 = eval_keys(
        &mut c,
        redlock::scripts::FAIR_RELEASE,
        &["k", "q", "n"],
        &["live", "1"],
    );
    // Equal tickets: the lower value (byte by byte) goes first, whoever asks first.
    assert!(fair_refusal(&fair_acquire(&mut c, "w\u{e9}", "5", "5000")).is_none());
    let _: i64 = eval_keys(&mut c, redlock::scripts::DISCARD, &["k"], &["w\u{e9}"]);
    assert!(fair_refusal(&fair_acquire(&mut c, "wb", "5", "5000")).is_none());
    let _: i64 = eval_keys(&mut c, redlock::scripts::DISCARD, &["k"], &["wb"]);
    assert!(fair_refusal(&fair_acquire(&mut c, "wa", "5", "5000")).is_none());
    let _: i64 = eval_keys(&mut c, redlock::scripts::DISCARD, &["k"], &["wa"]);
    assert!(fair_refusal(&fair_acquire(&mut c, "w\u{e9}", "5", "5000")).is_some());
    assert!(fair_refusal(&fair_acquire(&mut c, "wb", "5", "5000")).is_some());
    assert_eq!(
        fair_acquire(&mut c, "wa", "5", "5000"),
        redis::Value::Int(1)
    );
    // A bad ticket is an error, and changes nothing.
    let r: redis::RedisResult<redis::Value> = redis::cmd("EVAL")
        .arg(redlock::scripts::FAIR_ACQUIRE)
        .arg(4)
        .arg("k")
        .arg("c")
        .arg("q")
        .arg("n")
        .arg("v")
        .arg("10000")
        .arg("07")
        .arg("5000")
        .arg("0")
        .query(&mut c);
    assert!(r.is_err());
}

#[test]
fn fair_release_wakes_the_next_ticket_alone() {
    let s = RedisServer::start();
    let mut c = s.client();
    let mut sub = s.client();
    let mut ps = sub.as_pubsub();
    ps.psubscribe("q:*").unwrap();
    ps.subscribe("k").unwrap();
    ps.set_read_timeout(Some(std::time::Duration::from_millis(300)))
        .unwrap();
    assert_eq!(fair_acquire(&mut c, "h", "", "5000"), redis::Value::Int(1));
    for (v, t) in [("b", "2"), ("a", "1"), ("c", "3")] {
        assert!(fair_refusal(&fair_acquire(&mut c, v, t, "5000")).is_some());
    }
    // Leaving while the key is held announces nothing.
    let left: i64 = eval_keys(
        &mut c,
        redlock::scripts::FAIR_RELEASE,
        &["k", "q", "n"],
        &["c", "0"],
    );
    assert_eq!(left, 1);
    assert!(ps.get_message().is_err(), "nothing announced yet");
    // The release: on the key's channel, and on the head's ("a") only.
    let r: i64 = eval_keys(
        &mut c,
        redlock::scripts::FAIR_RELEASE,
        &["k", "q", "n"],
        &["h", "1"],
    );
    assert_eq!(r, 1);
    let mut channels = vec![
        ps.get_message().unwrap().get_channel_name().to_string(),
        ps.get_message().unwrap().get_channel_name().to_string(),
    ];
    channels.sort();
    assert_eq!(channels, ["k", "q:a"]);
    assert!(ps.get_message().is_err(), "one wake-up only");
    // The head gives up while the key is free: the next one ("b") is woken.
    let left: i64 = eval_keys(
        &mut c,
        redlock::scripts::FAIR_RELEASE,
        &["k", "q", "n"],
        &["a", "0"],
    );
    assert_eq!(left, 1);
    assert_eq!(ps.get_message().unwrap().get_channel_name(), "q:b");
    assert!(ps.get_message().is_err(), "one wake-up only");
}
