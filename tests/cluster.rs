//! Redis Cluster nodes (issue #36), against real clusters: `redis-server --cluster-enabled yes`
//! processes joined by `redis-cli --cluster create`.
//!
//! What exists so far is the key slot and the names that keep a primitive's keys in one slot
//! (`redlock::slot`); these tests hold them to what the servers compute.

mod support;

use redlock::slot::{SLOTS, companion_key, key_slot, slot_tag};
use support::redis_cluster::RedisCluster;

/// Keys that exercise the hash-tag rule: braces in every position, empty tags, nested and
/// repeated ones, bytes that are not UTF-8. Deterministic (a linear congruential generator).
fn keys(n: usize) -> Vec<Vec<u8>> {
    const ALPHABET: &[u8] = b"{}{}ab:-\x00\xff";
    let mut x: u64 = 0x2545_F491_4F6C_DD1D;
    let mut next = move || {
        x = x
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        (x >> 33) as usize
    };
    (0..n)
        .map(|_| {
            let len = 1 + next() % 12;
            (0..len)
                .map(|_| ALPHABET[next() % ALPHABET.len()])
                .collect()
        })
        .collect()
}

#[test]
fn key_slots_and_companion_keys_agree_with_the_servers() {
    let c = RedisCluster::start(3, 0);

    // The cluster the later tests build on: three primaries that split every slot.
    let mut ranges = c.slot_ranges();
    ranges.sort();
    let mut next = 0u32;
    for (from, to, _) in &ranges {
        assert_eq!(u32::from(*from), next, "slots {ranges:?}");
        next = u32::from(*to) + 1;
    }
    assert_eq!(next, u32::from(SLOTS), "slots {ranges:?}");
    let mut owners: Vec<u16> = ranges.iter().map(|r| r.2).collect();
    owners.sort();
    owners.dedup();
    let mut ports: Vec<u16> = c.servers.iter().map(|s| s.port).collect();
    ports.sort();
    assert_eq!(owners, ports);

    let mut refused = 0;
    for key in keys(2_000) {
        assert_eq!(key_slot(&key), c.keyslot(&key), "key {key:?}");
        let lock_key = [&b"redlock:"[..], &key].concat();
        match companion_key(b"redlock-fence:", &lock_key) {
            Some(companion) => assert_eq!(
                c.keyslot(&companion),
                c.keyslot(&lock_key),
                "{companion:?} beside {lock_key:?}"
            ),
            None => refused += 1,
        }
    }
    // The generator makes both kinds; most keys have a companion.
    assert!(refused > 0 && refused < 1_000, "{refused} of 2000 refused");

    for slot in (0..SLOTS).step_by(37) {
        let marker = format!("redlock-marker:{{{}}}", slot_tag(slot));
        assert_eq!(c.keyslot(marker.as_bytes()), slot);
    }
}
