//! Rounds over socket pairs: late, silent, half and garbage replies, early return, owed
//! replies, NOSCRIPT, idle probes, the stale limit, caps, and concurrent callers sharing one
//! connection per node.

use super::*;
use crate::error::NodeOutcome;
use crate::node::conn::Conn;
use crate::node::health::Hs;
use crate::node::{ConnSettings, Link, Node};
use crate::resp::Reply;
use crate::timing::Clock;
use crate::timing::SystemClock;
use socket2::Socket;
use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::thread;
use std::time::Duration;

fn settings() -> ConnSettings {
    ConnSettings {
        connect_timeout: Duration::from_millis(100),
        stale_limit: Duration::from_secs(5),
        backoff_min: Duration::from_millis(10),
        backoff_max: Duration::from_millis(100),
    }
}

/// A cluster of `n` nodes over socket pairs; returns the peers' ends. The nodes have no
/// address, so a reconnect fails with "no address".
fn pairs_with(n: usize, settings: ConnSettings) -> (Cluster, Vec<UnixStream>) {
    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    let now = clock.now();
    let mut links = Vec::new();
    let mut peers = Vec::new();
    for i in 0..n {
        let (a, b) = UnixStream::pair().unwrap();
        links.push(Link::with_conn(
            Node::bare(i),
            Conn::from_socket(Socket::from(a)),
            now,
        ));
        peers.push(b);
    }
    let cluster = Cluster {
        links: links.into_iter().map(Arc::new).collect(),
        settings,
        clock,
        quorum: quorum(n),
        policy_enabled: false,
        trust_epoch: AtomicU64::new(0),
        metrics: Registry::new(n),
    };
    (cluster, peers)
}

fn pairs(n: usize) -> (Cluster, Vec<UnixStream>) {
    pairs_with(n, settings())
}

fn any_reply(_: usize, r: &Reply) -> NodeOutcome {
    match r {
        Reply::Error { text, .. } => NodeOutcome::ServerError(text.clone()),
        _ => NodeOutcome::Success,
    }
}

fn req(cmd: &[u8]) -> Request<'_> {
    Request {
        cmd: Cmd::Same(cmd),
        fallback: None,
        combine: None,
        slot: None,
        slots: None,
        split: None,
        grants: false,
        work: 1,
    }
}

fn all(node_timeout: Duration) -> Limits {
    Limits {
        node_timeout,
        cap: None,
        until: Until::All,
    }
}

fn read_cmd(peer: &mut impl Read, expect: &[u8]) {
    let mut buf = vec![0u8; expect.len()];
    peer.read_exact(&mut buf).unwrap();
    assert_eq!(buf, expect);
}

/// A peer that, for each expected command, reads it and then writes the given reply.
fn answer(
    mut peer: UnixStream,
    script: Vec<(&'static [u8], &'static [u8])>,
) -> thread::JoinHandle<UnixStream> {
    thread::spawn(move || {
        for (cmd, reply) in script {
            read_cmd(&mut peer, cmd);
            peer.write_all(reply).unwrap();
        }
        peer
    })
}

const PING: &[u8] = b"*1\r\n$4\r\nPING\r\n";
const ECHO: &[u8] = b"*1\r\n$4\r\nECHO\r\n";
const A: &[u8] = b"*1\r\n$1\r\nA\r\n";

#[test]
fn late_silent_and_half_replies() {
    let (cluster, mut peers) = pairs(4);
    let mut p3 = peers.pop().unwrap();
    let p2 = peers.pop().unwrap();
    let mut p1 = peers.pop().unwrap();
    let p0 = peers.pop().unwrap();
    // Node 0 answers at once; node 1 late but in time; node 2 never; node 3 half a reply.
    let h1 = thread::spawn(move || {
        read_cmd(&mut p1, PING);
        thread::sleep(Duration::from_millis(30));
        p1.write_all(b"+PONG\r\n").unwrap();
        p1
    });
    let h0 = answer(p0, vec![(PING, b"+PONG\r\n")]);
    let h3 = thread::spawn(move || {
        read_cmd(&mut p3, PING);
        p3.write_all(b"+PO").unwrap();
        p3
    });
    let start = SystemClock.now();
    let r = cluster
        .round(&req(PING), &any_reply, all(Duration::from_millis(200)))
        .unwrap();
    let elapsed = start.elapsed();
    let (_p0, mut p1, mut p3) = (h0.join().unwrap(), h1.join().unwrap(), h3.join().unwrap());
    let pong = Some(Reply::Status("PONG".into()));
    assert_eq!(r.replies[0], pong);
    assert_eq!(r.replies[1], pong);
    assert_eq!(r.outcomes[2], NodeOutcome::Timeout);
    assert_eq!(r.outcomes[3], NodeOutcome::Timeout);
    assert!(elapsed >= Duration::from_millis(200) && elapsed < Duration::from_secs(2));
    // Nodes 2 and 3 owe a reply now.
    let owed: Vec<_> = (0..4).map(|i| cluster.owed(i)).collect();
    assert_eq!(owed, vec![Some(0), Some(0), Some(1), Some(1)]);

    // Next round: node 3 completes its stale reply then answers the new command with a
    // different value; node 1 answers; the stale half reply must not be taken for the new
    // one.
    let h3 = thread::spawn(move || {
        read_cmd(&mut p3, ECHO);
        p3.write_all(b"NG\r\n:42\r\n").unwrap();
        p3
    });
    let h1 = thread::spawn(move || {
        read_cmd(&mut p1, ECHO);
        p1.write_all(b":7\r\n").unwrap();
        p1
    });
    let r = cluster
        .round(&req(ECHO), &any_reply, all(Duration::from_millis(300)))
        .unwrap();
    h3.join().unwrap();
    h1.join().unwrap();
    assert_eq!(r.replies[3], Some(Reply::Int(42)));
    assert_eq!(r.replies[1], Some(Reply::Int(7)));
    drop(p2);
}

#[test]
fn early_return_counts_owed_replies_and_discards_them() {
    let (cluster, mut peers) = pairs(3);
    let slow = peers.pop().unwrap();
    let fast: Vec<_> = peers
        .into_iter()
        .map(|p| answer(p, vec![(A, b":1\r\n")]))
        .collect();
    let start = SystemClock.now();
    let r = cluster
        .round(&req(A), &any_reply, Limits::quorum(Duration::from_secs(5)))
        .unwrap();
    assert!(start.elapsed() < Duration::from_millis(2500));
    assert_eq!(r.outcomes[2], NodeOutcome::Pending);
    assert_eq!(r.successes(), 2);
    assert_eq!(cluster.owed(2), Some(1));
    // The slow node answers the old command (":1") and then the new one (":2").
    let fast: Vec<_> = fast
        .into_iter()
        .map(|h| answer(h.join().unwrap(), vec![(A, b":2\r\n")]))
        .collect();
    let slow = answer(slow, vec![(A, b":1\r\n"), (A, b":2\r\n")]);
    let r = cluster
        .round(&req(A), &any_reply, all(Duration::from_secs(5)))
        .unwrap();
    assert!(
        r.replies.iter().all(|r| *r == Some(Reply::Int(2))),
        "{:?}",
        r.replies
    );
    assert_eq!(cluster.owed(2), Some(0));
    for h in fast {
        h.join().unwrap();
    }
    slow.join().unwrap();
}

#[test]
fn closed_and_garbage_peers_fail_without_waiting() {
    let (cluster, mut peers) = pairs(2);
    let garbage = answer(peers.pop().unwrap(), vec![(A, b"?garbage\r\n")]);
    let mut closer = peers.pop().unwrap();
    let closed = thread::spawn(move || read_cmd(&mut closer, A));
    let start = SystemClock.now();
    let r = cluster
        .round(&req(A), &any_reply, all(Duration::from_secs(5)))
        .unwrap();
    assert!(start.elapsed() < Duration::from_millis(2500));
    assert!(
        matches!(&r.outcomes[0], NodeOutcome::Unreachable(_)),
        "{:?}",
        r.outcomes
    );
    assert!(
        matches!(&r.outcomes[1], NodeOutcome::Protocol(_)),
        "{:?}",
        r.outcomes
    );
    assert_eq!((cluster.owed(0), cluster.owed(1)), (None, None));
    closed.join().unwrap();
    garbage.join().unwrap();
}

#[test]
fn idle_connections_closed_by_the_node_are_not_used() {
    let (cluster, mut peers) = pairs(2);
    drop(peers.pop()); // node 1 went away while its connection sat idle
    let alive = answer(peers.pop().unwrap(), vec![(A, b":1\r\n")]);
    thread::sleep(Duration::from_millis(10)); // idle long enough to be probed
    let r = cluster
        .round(&req(A), &any_reply, all(Duration::from_secs(5)))
        .unwrap();
    assert_eq!(r.replies[0], Some(Reply::Int(1)));
    // Node 1's dead connection was replaced by a fresh connect attempt (which fails here
    // only because test nodes have no address), not written to.
    assert!(
        matches!(&r.outcomes[1], NodeOutcome::Unreachable(s) if s == "no address"),
        "{:?}",
        r.outcomes
    );
    alive.join().unwrap();
}

#[test]
fn noscript_falls_back_once() {
    let (cluster, mut peers) = pairs(1);
    let mut p = peers.pop().unwrap();
    let h = thread::spawn(move || {
        read_cmd(&mut p, b"SHA\r\n");
        p.write_all(b"-NOSCRIPT No matching script\r\n").unwrap();
        read_cmd(&mut p, b"EVAL\r\n");
        p.write_all(b":1\r\n").unwrap();
        p
    });
    let req = Request {
        cmd: Cmd::Same(b"SHA\r\n"),
        fallback: Some(b"EVAL\r\n"),
        combine: None,
        slot: None,
        slots: None,
        split: None,
        grants: false,
        work: 1,
    };
    let r = cluster
        .round(&req, &any_reply, all(Duration::from_secs(5)))
        .unwrap();
    h.join().unwrap();
    assert_eq!(r.replies[0], Some(Reply::Int(1)));
}

#[test]
fn noscript_falls_back_even_after_the_caller_left() {
    // The release case: the round returns at quorum before the slow node answers
    // NOSCRIPT; the EVAL form must still be sent, by whoever reads that reply later.
    let (cluster, mut peers) = pairs(3);
    let mut slow = peers.pop().unwrap();
    let fast: Vec<_> = peers
        .into_iter()
        .map(|p| answer(p, vec![(b"SHA\r\n", b":1\r\n"), (A, b":5\r\n")]))
        .collect();
    let sha = Request {
        cmd: Cmd::Same(b"SHA\r\n"),
        fallback: Some(b"EVAL\r\n"),
        combine: None,
        slot: None,
        slots: None,
        split: None,
        grants: false,
        work: 1,
    };
    let r = cluster
        .round(&sha, &any_reply, Limits::quorum(Duration::from_secs(5)))
        .unwrap();
    assert_eq!(r.outcomes[2], NodeOutcome::Pending);
    let h = thread::spawn(move || {
        read_cmd(&mut slow, b"SHA\r\n");
        slow.write_all(b"-NOSCRIPT No matching script\r\n").unwrap();
        // The next round reads the NOSCRIPT before it writes: the fallback first, then
        // that round's command.
        read_cmd(&mut slow, b"EVAL\r\n");
        read_cmd(&mut slow, A);
        slow.write_all(b":1\r\n:5\r\n").unwrap();
        slow
    });
    thread::sleep(Duration::from_millis(20));
    let r = cluster
        .round(&req(A), &any_reply, all(Duration::from_secs(5)))
        .unwrap();
    h.join().unwrap();
    // The slow node's ":1" answered the fallback (discarded); ":5" is this round's.
    assert!(r.replies.iter().all(|r| *r == Some(Reply::Int(5))), "{r:?}");
    for f in fast {
        f.join().unwrap();
    }
}

#[test]
fn a_connection_closed_behind_owed_replies_is_reconnected_not_failed() {
    let (cluster, peers) = pairs(2);
    let round = |ms| {
        cluster
            .round(&req(PING), &any_reply, all(Duration::from_millis(ms)))
            .unwrap()
    };
    // Neither node answers within the round: both owe a reply.
    let r = round(20);
    assert!(r.outcomes.iter().all(|o| *o == NodeOutcome::Timeout));
    assert_eq!((cluster.owed(0), cluster.owed(1)), (Some(1), Some(1)));
    // Both answer late; node 1 then closes the connection (it restarted).
    let mut peers = peers.into_iter();
    let mut p0 = peers.next().unwrap();
    let mut p1 = peers.next().unwrap();
    p0.write_all(b"+LATE\r\n").unwrap();
    p1.write_all(b"+LATE\r\n").unwrap();
    drop(p1);
    thread::sleep(crate::node::link::PROBE_AFTER * 2);
    let h0 = thread::spawn(move || {
        let mut buf = [0u8; 28];
        p0.read_exact(&mut buf).unwrap(); // both PINGs
        p0.write_all(b"+PONG\r\n").unwrap();
        p0
    });
    let r = round(500);
    let _p0 = h0.join().unwrap();
    // Node 0: the late reply discarded, this round's answered. Node 1: its connection was
    // found closed before use and a new one attempted (this test's nodes have no
    // address), instead of the round writing to a dead connection.
    assert_eq!(r.replies[0], Some(Reply::Status("PONG".into())));
    assert_eq!(
        r.outcomes[1],
        NodeOutcome::Unreachable("no address".into()),
        "{r:?}"
    );
}

#[test]
fn stale_connections_are_closed_and_backoff_applies() {
    let s = ConnSettings {
        stale_limit: Duration::from_millis(20),
        ..settings()
    };
    let (cluster, _peers) = pairs_with(1, s);
    let r = cluster
        .round(&req(b"X\r\n"), &any_reply, all(Duration::from_millis(5)))
        .unwrap();
    assert_eq!(r.outcomes[0], NodeOutcome::Timeout);
    thread::sleep(Duration::from_millis(30));
    // The owed reply is older than the stale limit: the connection is dropped, and the
    // node is in backoff, so it is not contacted at all.
    let r = cluster
        .round(&req(b"X\r\n"), &any_reply, all(Duration::from_millis(5)))
        .unwrap();
    assert!(
        matches!(&r.outcomes[0], NodeOutcome::Backoff(_)),
        "{:?}",
        r.outcomes
    );
    assert_eq!(cluster.owed(0), None);
}

#[test]
fn cap_shortens_the_deadline() {
    let (cluster, _peers) = pairs(1);
    let start = SystemClock.now();
    let limits = Limits {
        node_timeout: Duration::from_secs(5),
        cap: Some(start + Duration::from_millis(20)),
        until: Until::All,
    };
    let r = cluster.round(&req(b"X\r\n"), &any_reply, limits).unwrap();
    assert_eq!(r.outcomes[0], NodeOutcome::Timeout);
    assert!(start.elapsed() < Duration::from_millis(2500));
}

#[test]
fn concurrent_rounds_share_one_connection_and_each_gets_its_own_reply() {
    // One node; 8 threads × 50 rounds, each sending its own number. The peer answers
    // every command with the number it carried: a reply handed to the wrong caller shows.
    let (cluster, mut peers) = pairs(1);
    let cluster = Arc::new(cluster);
    let peer = peers.pop().unwrap();
    let echo = thread::spawn(move || {
        let mut r = crate::resp::ReplyReader::new();
        let mut n = 0;
        let mut peer = peer;
        while n < 400 {
            // Commands are RESP arrays of bulk strings; parse them with the reply parser.
            match r.next(&mut peer) {
                Ok(Some(Reply::Array(a))) => {
                    let Reply::Bulk(v) = &a[1] else { panic!() };
                    let out = format!(":{}\r\n", String::from_utf8_lossy(v));
                    peer.write_all(out.as_bytes()).unwrap();
                    n += 1;
                }
                other => panic!("{other:?}"),
            }
        }
        peer // kept open until the end of the test
    });
    let threads: Vec<_> = (0..8)
        .map(|t| {
            let c = Arc::clone(&cluster);
            thread::spawn(move || {
                for i in 0..50 {
                    let v = t * 1000 + i;
                    let mut cmd = Vec::new();
                    crate::resp::pack(&[b"ECHO", v.to_string().as_bytes()], &mut cmd);
                    let r = c
                        .round(&req(&cmd), &any_reply, all(Duration::from_secs(10)))
                        .unwrap();
                    assert_eq!(r.replies[0], Some(Reply::Int(v as i64)));
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let _peer = echo.join().unwrap();
    assert_eq!(cluster.owed(0), Some(0));
}

#[test]
fn a_caller_that_leaves_hands_the_connection_to_one_still_waiting() {
    // Three nodes. Round A drives all three links; it is decided by nodes 0 and 1, while
    // node 2 has not answered. Round B (another thread) waits only for node 2, whose link
    // A drives. When A leaves, B must be handed node 2's link and read its reply there.
    let (cluster, mut peers) = pairs(3);
    let cluster = Arc::new(cluster);
    let mut p2 = peers.pop().unwrap();
    let fast: Vec<_> = peers
        .into_iter()
        .map(|p| answer(p, vec![(A, b":1\r\n")]))
        .collect();
    // B's request goes to node 2 only.
    let b_cmds: Vec<Option<Vec<u8>>> = vec![None, None, Some(ECHO.to_vec())];
    let (tx, rx) = std::sync::mpsc::channel();
    let c = Arc::clone(&cluster);
    let a = thread::spawn(move || {
        let r = c
            .round(&req(A), &any_reply, Limits::quorum(Duration::from_secs(10)))
            .unwrap();
        tx.send(()).unwrap();
        r
    });
    // Node 2 receives A's command; wait until B's command is queued behind it too.
    read_cmd(&mut p2, A);
    let c = Arc::clone(&cluster);
    let b = thread::spawn(move || {
        let req = Request {
            cmd: Cmd::PerNode(&b_cmds),
            fallback: None,
            combine: None,
            slot: None,
            slots: None,
            split: None,
            grants: false,
            work: 1,
        };
        c.round(&req, &any_reply, all(Duration::from_secs(10)))
            .unwrap()
    });
    read_cmd(&mut p2, ECHO);
    let ra = a.join().unwrap();
    rx.recv().unwrap();
    assert_eq!(ra.outcomes[2], NodeOutcome::Pending);
    // Now A is gone; node 2 answers both commands.
    p2.write_all(b":1\r\n:99\r\n").unwrap();
    let rb = b.join().unwrap();
    assert_eq!(rb.replies[2], Some(Reply::Int(99)));
    for f in fast {
        f.join().unwrap();
    }
}

#[test]
fn quorum_edges() {
    let expected = [(1, 1), (2, 2), (3, 2), (4, 3), (5, 3), (6, 4), (7, 4)];
    for (n, q) in expected {
        assert_eq!(quorum(n), q, "n = {n}");
        // A majority: two quorums always intersect, and a minority can fail.
        assert!(2 * q > n);
        assert!(n - q < q);
    }
}

#[test]
fn a_command_held_behind_a_handshake_is_written_even_after_the_caller_left() {
    use std::net::TcpListener;
    // Nodes 0 and 1 answer at once over socket pairs; node 2 is reached over TCP through a
    // new connection whose handshake ("HS") is answered only after the round has returned.
    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    let now = clock.now();
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let mut links = Vec::new();
    let mut peers = Vec::new();
    for i in 0..2 {
        let (a, b) = UnixStream::pair().unwrap();
        links.push(Link::with_conn(
            Node::bare(i),
            Conn::from_socket(Socket::from(a)),
            now,
        ));
        peers.push(answer(b, vec![(A, b":1\r\n")]));
    }
    let mut slow = Node::bare(2);
    *slow.master_addr.lock().unwrap() = Some(listener.local_addr().unwrap());
    slow.handshake = b"*1\r\n$2\r\nHS\r\n".to_vec();
    slow.handshake_kinds = vec![Hs::Required];
    links.push(Link::new(slow, now));
    let cluster = Cluster {
        links: links.into_iter().map(Arc::new).collect(),
        settings: settings(),
        clock,
        quorum: 2,
        policy_enabled: false,
        trust_epoch: AtomicU64::new(0),
        metrics: Registry::new(3),
    };
    let r = cluster
        .round(&req(A), &any_reply, Limits::quorum(Duration::from_secs(5)))
        .unwrap();
    assert_eq!(r.outcomes[2], NodeOutcome::Pending);
    let (mut node2, _) = listener.accept().unwrap();
    node2
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    read_cmd(&mut node2, b"*1\r\n$2\r\nHS\r\n");
    thread::sleep(Duration::from_millis(50));
    // Nothing else arrived before the handshake succeeded.
    node2.set_nonblocking(true).unwrap();
    assert!(node2.read(&mut [0u8; 1]).is_err());
    node2.set_nonblocking(false).unwrap();
    node2.write_all(b"+OK\r\n").unwrap();
    // No round runs any more, yet the held command arrives.
    read_cmd(&mut node2, A);
    for p in peers {
        p.join().unwrap();
    }
}

#[test]
fn replies_only_a_cluster_node_sends_say_cluster_mode_is_not_supported() {
    let (cluster, mut peers) = pairs(3);
    let p2 = peers.pop().unwrap();
    let p1 = peers.pop().unwrap();
    let p0 = peers.pop().unwrap();
    let h0 = answer(p0, vec![(PING, b"+PONG\r\n")]);
    let h1 = answer(p1, vec![(PING, b"-MOVED 3999 127.0.0.1:6381\r\n")]);
    let h2 = answer(p2, vec![(PING, b"-CLUSTERDOWN Hash slot not served\r\n")]);
    let r = cluster
        .round(&req(PING), &any_reply, all(Duration::from_secs(5)))
        .unwrap();
    let _peers = (h0.join().unwrap(), h1.join().unwrap(), h2.join().unwrap());
    assert_eq!(r.outcomes[0], NodeOutcome::Success);
    for (i, text) in [
        (1, "MOVED 3999 127.0.0.1:6381"),
        (2, "CLUSTERDOWN Hash slot not served"),
    ] {
        assert_eq!(
            r.outcomes[i],
            NodeOutcome::ServerError(format!(
                "a Redis Cluster node, named as a plain node: name the cluster as one node, \
                 redis+cluster://host:port[,host:port...] (its seed nodes): the node answered \
                 {text}"
            ))
        );
    }
}

#[test]
fn a_quorum_lost_to_refused_credentials_is_an_auth_error() {
    let auth = || NodeOutcome::AuthFailed("WRONGPASS invalid username-password pair".into());
    let down = || NodeOutcome::Unreachable("connection refused".into());
    let kind = |n: usize, outcomes: Vec<NodeOutcome>| {
        let (cluster, _peers) = pairs(n);
        match cluster.failure(
            cluster.report(Op::Acquire, outcomes, None),
            Error::NotAcquired,
        ) {
            Error::NotAcquired(_) => "not acquired",
            Error::Unavailable(_) => "unavailable",
            Error::Auth(_) => "auth",
            e => panic!("{e}"),
        }
    };
    use NodeOutcome::{Pending, Rejected, Success};
    // Without the refusing nodes a quorum is out of reach; with them it would not be.
    assert_eq!(kind(3, vec![Success, auth(), auth()]), "auth");
    assert_eq!(kind(3, vec![Rejected, auth(), down()]), "auth");
    assert_eq!(
        kind(5, vec![Success, Success, auth(), down(), down()]),
        "auth"
    );
    // Out of reach even had they answered: the other failures decide.
    assert_eq!(
        kind(5, vec![Success, auth(), down(), down(), down()]),
        "unavailable"
    );
    assert_eq!(kind(3, vec![Success, down(), down()]), "unavailable");
    // A quorum was possible: a refusal, whatever the refusing nodes said.
    assert_eq!(kind(3, vec![Rejected, Pending, auth()]), "not acquired");
}

/// Several commands written as one entry: their three replies, as one array.
const P3: &[u8] = b"*1\r\n$2\r\nP3\r\n";

fn parts3(parts: &[Reply]) -> Reply {
    // The third part 0 stands for a lost marker, as the plain acquisition's EXISTS.
    if parts.get(2) == Some(&Reply::Int(0)) {
        return Reply::Error {
            code: "NOMARKER".into(),
            text: "NOMARKER no restart-quarantine marker on this node".into(),
        };
    }
    Reply::Array(parts.to_vec())
}

fn req3(cmd: &[u8]) -> Request<'_> {
    Request {
        combine: Some(Combine {
            parts: 3,
            f: parts3,
        }),
        ..req(cmd)
    }
}

fn ints(v: &[i64]) -> Option<Reply> {
    Some(Reply::Array(v.iter().map(|n| Reply::Int(*n)).collect()))
}

#[test]
fn a_multi_part_entry_consumes_all_its_replies_after_its_caller_left() {
    let (cluster, mut peers) = pairs(3);
    // Node 2 is trusted, its marker known to be there (as after a handshake).
    let node2 = &cluster.links[2].node;
    let t0 = cluster.now();
    let info = Reply::Bulk(b"# Server\r\nrun_id:d\r\nuptime_in_seconds:500\r\n".to_vec());
    node2.on_handshake_reply(Hs::Info, &info, t0).unwrap();
    node2
        .on_handshake_reply(Hs::Marker, &Reply::Bulk(b"d".to_vec()), t0)
        .unwrap();
    assert!(node2.trusted());
    let mut slow = peers.pop().unwrap();
    let fast: Vec<_> = peers
        .into_iter()
        .map(|p| answer(p, vec![(P3, b":1\r\n:2\r\n:3\r\n"), (A, b":5\r\n")]))
        .collect();
    let r = cluster
        .round(
            &req3(P3),
            &any_reply,
            Limits::quorum(Duration::from_secs(5)),
        )
        .unwrap();
    assert_eq!(r.replies[0], ints(&[1, 2, 3]));
    assert_eq!(r.replies[1], ints(&[1, 2, 3]));
    assert_eq!(r.outcomes[2], NodeOutcome::Pending);
    assert_eq!(cluster.owed(2), Some(1));
    // Node 2 answers the three parts late (the marker found gone), then the next command.
    read_cmd(&mut slow, P3);
    let h = thread::spawn(move || {
        slow.write_all(b":1\r\n:2\r\n").unwrap();
        read_cmd(&mut slow, A);
        slow.write_all(b":0\r\n:5\r\n").unwrap();
        slow
    });
    thread::sleep(Duration::from_millis(20));
    let r = cluster
        .round(&req(A), &any_reply, all(Duration::from_secs(5)))
        .unwrap();
    let _slow = h.join().unwrap();
    // All three parts went to the entry nobody waited for; the new caller got its own reply.
    assert!(r.replies.iter().all(|r| *r == Some(Reply::Int(5))), "{r:?}");
    assert_eq!(cluster.owed(2), Some(0));
    // The combined reply was seen by the link although nobody waited for it.
    assert!(
        matches!(
            node2.standing(),
            Standing::Quarantined {
                reason: crate::error::QuarantineReason::NoMarker,
                ..
            }
        ),
        "{:?}",
        node2.standing()
    );
    for f in fast {
        f.join().unwrap();
    }
}

#[test]
fn a_multi_part_entry_reads_replies_split_across_reads() {
    let (cluster, mut peers) = pairs(1);
    let mut p = peers.pop().unwrap();
    let h = thread::spawn(move || {
        read_cmd(&mut p, P3);
        for chunk in [&b":1\r"[..], b"\n", b":2\r\n", b":3", b"\r\n"] {
            p.write_all(chunk).unwrap();
            thread::sleep(Duration::from_millis(10));
        }
        read_cmd(&mut p, A);
        p.write_all(b":7\r\n").unwrap();
        p
    });
    let r = cluster
        .round(&req3(P3), &any_reply, all(Duration::from_secs(5)))
        .unwrap();
    assert_eq!(r.replies[0], ints(&[1, 2, 3]));
    assert_eq!(cluster.owed(0), Some(0));
    let r = cluster
        .round(&req(A), &any_reply, all(Duration::from_secs(5)))
        .unwrap();
    assert_eq!(r.replies[0], Some(Reply::Int(7)));
    h.join().unwrap();
}

#[test]
fn a_connection_closed_between_parts_fails_the_call() {
    let (cluster, mut peers) = pairs(2);
    let mut p1 = peers.pop().unwrap();
    let p0 = answer(peers.pop().unwrap(), vec![(P3, b":1\r\n:2\r\n:3\r\n")]);
    let h1 = thread::spawn(move || {
        read_cmd(&mut p1, P3);
        p1.write_all(b":1\r\n").unwrap(); // one part of three, then closed
    });
    let start = SystemClock.now();
    let r = cluster
        .round(&req3(P3), &any_reply, all(Duration::from_secs(5)))
        .unwrap();
    assert!(start.elapsed() < Duration::from_millis(2500));
    h1.join().unwrap();
    p0.join().unwrap();
    assert_eq!(r.replies[0], ints(&[1, 2, 3]));
    assert_eq!(r.replies[1], None);
    assert_eq!(
        r.outcomes[1],
        NodeOutcome::Unreachable("connection closed by the node".into()),
        "{r:?}"
    );
    assert_eq!(cluster.owed(1), None);
}
