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
