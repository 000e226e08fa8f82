use super::*;
use crate::resp::ReplyReader;

/// A reply captured from redis-server 7.0.15: a cluster of three primaries (ports 17001 to
/// 17003), each with a replica that was still loading.
fn captured(bytes: &[u8]) -> Reply {
    ReplyReader::new()
        .next(bytes)
        .expect("a valid reply")
        .expect("a whole reply")
}

fn at(port: u16) -> Endpoint {
    Endpoint {
        host: "127.0.0.1".into(),
        port,
    }
}

#[test]
fn cluster_shards_names_each_primary_and_its_slots() {
    let shards = parse_shards(&captured(include_bytes!("shards-7.0.resp")), false, "seed").unwrap();
    assert_eq!(shards.len(), 3);
    assert_eq!(shards[0].primary, at(17002));
    assert_eq!(shards[0].ranges, vec![(5461, 10922)]);
    assert_eq!(
        shards[0].id.as_deref(),
        Some("609bc3a46d1d6a92dfb337931c62cce874cee561")
    );
    assert_eq!(shards[1].primary, at(17001));
    assert_eq!(shards[2].ranges, vec![(10923, 16383)]);
    // Over TLS the port is `tls-port`, which a plain cluster does not report.
    assert!(parse_shards(&captured(include_bytes!("shards-7.0.resp")), true, "seed").is_err());
}

#[test]
fn cluster_slots_gives_the_same_map() {
    let slots = parse_slots(&captured(include_bytes!("slots-7.0.resp")), "seed").unwrap();
    let shards = parse_shards(&captured(include_bytes!("shards-7.0.resp")), false, "seed").unwrap();
    let (mut a, mut b) = (SlotMap::new(), SlotMap::new());
    a.load(&slots);
    b.load(&shards);
    for slot in 0..SLOTS {
        let (x, y) = (a.owner(slot).unwrap(), b.owner(slot).unwrap());
        assert_eq!(a.primaries()[x], b.primaries()[y], "slot {slot}");
    }
}

#[test]
fn a_map_learns_from_moved_and_keeps_indexes() {
    let mut m = SlotMap::new();
    assert_eq!(m.owner(7), None);
    let shards = parse_slots(&captured(include_bytes!("slots-7.0.resp")), "seed").unwrap();
    m.load(&shards);
    assert_eq!(m.owner(0), Some(0));
    assert_eq!(m.moved(0, &at(17003)), 2);
    assert_eq!(m.owner(0), Some(2));
    assert_eq!(m.moved(1, &at(17009)), 3);
    // A reload forgets the moves but keeps every primary's index.
    m.load(&shards);
    assert_eq!(m.owner(0), Some(0));
    assert_eq!(m.owner(1), Some(0));
    assert_eq!(m.primaries().len(), 4);
}

#[test]
fn redirects_are_read_from_errors() {
    let err = |text: &str| Reply::Error {
        code: text.split(' ').next().unwrap().into(),
        text: text.into(),
    };
    assert_eq!(
        redirect(&err("MOVED 12182 127.0.0.1:17003"), "seed"),
        Some(Redirect {
            ask: false,
            slot: 12182,
            to: at(17003)
        })
    );
    let r = redirect(&err("ASK 1 [::1]:6380"), "seed").unwrap();
    assert!(r.ask);
    assert_eq!(r.to.host, "::1");
    assert_eq!(r.to.to_string(), "[::1]:6380");
    // An unknown endpoint is the host asked.
    assert_eq!(redirect(&err("MOVED 5 :6380"), "h").unwrap().to.host, "h");
    assert_eq!(redirect(&err("MOVED 16384 h:1"), "seed"), None);
    assert_eq!(redirect(&err("MOVED x h:1"), "seed"), None);
    assert_eq!(redirect(&err("MOVED 1 h"), "seed"), None);
    assert_eq!(redirect(&err("ERR MOVED 1 h:1"), "seed"), None);
    assert_eq!(redirect(&Reply::Ok, "seed"), None);
}

#[test]
fn malformed_answers_are_errors() {
    assert!(parse_shards(&Reply::Ok, false, "s").is_err());
    assert!(parse_slots(&Reply::Int(1), "s").is_err());
    let odd = Reply::Array(vec![Reply::Array(vec![
        Reply::Bulk(b"slots".to_vec()),
        Reply::Array(vec![Reply::Int(0)]),
        Reply::Bulk(b"nodes".to_vec()),
        Reply::Array(vec![]),
    ])]);
    assert!(parse_shards(&odd, false, "s").is_err());
    let no_primary = Reply::Array(vec![Reply::Array(vec![
        Reply::Bulk(b"slots".to_vec()),
        Reply::Array(vec![]),
        Reply::Bulk(b"nodes".to_vec()),
        Reply::Array(vec![]),
    ])]);
    assert_eq!(parse_shards(&no_primary, false, "s").unwrap(), vec![]);
}
