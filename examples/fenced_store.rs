//! Fencing tokens end to end: two clients take turns on a lock, the first one "pauses" past
//! its lease, and the store — a Redis hash written through a script that accepts only larger
//! tokens — turns its late write away.
//!
//!     cargo run --example fenced_store
//!
//! The same check in SQL, for data in a database:
//!
//!     UPDATE accounts SET balance = $2, fence = $1 WHERE id = $3 AND fence < $1;
//!     -- 0 rows updated: a newer holder has written; abandon this write.

#[path = "../tests/support/mod.rs"]
mod support;

use std::time::Duration;

use redlock::{Redlock, scripts};

/// Writes `value` if `token` is larger than every token the record has seen.
fn fenced_write(store: &mut redis::Connection, token: u64, value: &str) -> bool {
    let accepted: i64 = redis::cmd("EVAL")
        .arg(scripts::FENCED_STORE_WRITE)
        .arg(1)
        .arg("account:7")
        .arg(token)
        .arg(value)
        .query(store)
        .expect("store write");
    accepted == 1
}

fn main() {
    let nodes = support::Cluster::start(3);
    let store_server = support::RedisServer::start();
    let mut store = store_server.client();
    let mgr = Redlock::new(support::config(nodes.urls())).expect("manager");

    let slow = mgr
        .lock_fenced("account:7", Duration::from_millis(300))
        .expect("lock");
    let t1 = slow.fencing_token().expect("fenced");
    println!("client A holds the lock with fencing token {t1}");

    println!("client A pauses (GC, swap, a stopped VM) for longer than its 300 ms lease...");
    std::thread::sleep(Duration::from_millis(400));

    let fast = mgr
        .lock_fenced("account:7", Duration::from_secs(5))
        .expect("lock");
    let t2 = fast.fencing_token().expect("fenced");
    println!("client B takes the lock with fencing token {t2}");
    println!(
        "client B writes: {}",
        if fenced_write(&mut store, t2, "written by B") {
            "accepted"
        } else {
            "rejected"
        }
    );
    fast.unlock().expect("unlock");

    println!(
        "client A wakes up (validity now {:?}) and writes anyway: {}",
        slow.validity(),
        if fenced_write(&mut store, t1, "written by A") {
            "accepted (BAD)"
        } else {
            "rejected"
        }
    );
    let value: String = redis::cmd("HGET")
        .arg("account:7")
        .arg("value")
        .query(&mut store)
        .expect("read");
    println!("the record says: {value:?}");
    assert_eq!(value, "written by B");
}
