//! Redis Cluster's key slots, as the servers compute them, and the names that keep a
//! primitive's keys in one slot.
//!
//! A cluster splits the key space into [`SLOTS`] slots and each shard owns some of them. A
//! key's slot is the CRC16 (XMODEM) of its *hash tag* modulo [`SLOTS`]: the bytes between the
//! first `{` and the first `}` after it, when there are any, else the whole key
//! ([`key_slot`], [`hash_tag`]). A script may only touch keys of one slot, so every key one of
//! the library's commands names on a cluster node shares the lock key's slot:
//! [`companion_key`] names a companion key (a fencing counter, a fair queue, …) so that it
//! does. [`slot_tag`] gives, for every slot, a short tag that hashes to it (the per-slot
//! markers' names).
//!
//! This module is a leaf: bytes in, numbers and bytes out.

use std::sync::OnceLock;

/// The number of slots of a Redis Cluster (16384).
pub const SLOTS: u16 = 16384;

/// CRC16 with the XMODEM parameters (polynomial 0x1021, initial value 0), the checksum Redis
/// Cluster's key hashing uses.
const CRC16: crc::Crc<u16> = crc::Crc::<u16>::new(&crc::CRC_16_XMODEM);

/// The hash tag of `key`: the bytes between its first `{` and the first `}` after that, when
/// there are any (`None` for no `{`, no `}` after it, or an empty `{}`). Only the tag is
/// hashed when there is one, so keys with the same tag share a slot.
pub fn hash_tag(key: &[u8]) -> Option<&[u8]> {
    let open = key.iter().position(|&b| b == b'{')?;
    let rest = &key[open + 1..];
    let close = rest.iter().position(|&b| b == b'}')?;
    (close > 0).then(|| &rest[..close])
}

/// The slot of `key`, as every Redis Cluster node computes it (`CLUSTER KEYSLOT`).
pub fn key_slot(key: &[u8]) -> u16 {
    CRC16.checksum(hash_tag(key).unwrap_or(key)) % SLOTS
}

/// The name of a companion key of `key` (its fencing counter, fair queue, intent, …) on a
/// manager with cluster nodes: `prefix` followed by `key` when `key` has a hash tag, else by
/// `{key}`, so that the companion is in `key`'s slot.
///
/// `None` when no such name is safe: `key` starts with `{` (its companion could be another
/// key's: `{k}` tagged and `k` untagged would both name `prefix{k}`), or it has no hash tag
/// but contains a `}` (a tag around it would stop there) or is empty (`{}` is no tag).
/// `prefix` must contain no `{`.
pub fn companion_key(prefix: &[u8], key: &[u8]) -> Option<Vec<u8>> {
    debug_assert!(!prefix.contains(&b'{'));
    if key.first() == Some(&b'{') {
        return None;
    }
    if hash_tag(key).is_some() {
        return Some([prefix, key].concat());
    }
    if key.is_empty() || key.contains(&b'}') {
        return None;
    }
    Some([prefix, b"{", key, b"}"].concat())
}

/// The slot every key of `keys` is in, if they share one (and there is at least one).
pub(crate) fn common_slot<'a>(keys: impl IntoIterator<Item = &'a [u8]>) -> Option<u16> {
    let mut it = keys.into_iter().map(key_slot);
    let first = it.next()?;
    it.all(|s| s == first).then_some(first)
}

/// `keys` grouped by slot: each slot with its keys (in their order), the slots in the order
/// they first appear.
pub(crate) fn by_slot<'a>(keys: impl IntoIterator<Item = &'a [u8]>) -> Vec<(u16, Vec<&'a [u8]>)> {
    let mut groups: Vec<(u16, Vec<&'a [u8]>)> = Vec::new();
    for key in keys {
        let slot = key_slot(key);
        match groups.iter_mut().find(|(s, _)| *s == slot) {
            Some((_, g)) => g.push(key),
            None => groups.push((slot, vec![key])),
        }
    }
    groups
}

/// A short tag that hashes to `slot` (taken modulo [`SLOTS`]): the smallest decimal number
/// whose slot it is. A key `…{TAG}…` is in that slot. The table is computed once, on first
/// use (a few hundred thousand checksums).
pub fn slot_tag(slot: u16) -> &'static str {
    static TAGS: OnceLock<Box<[Box<str>]>> = OnceLock::new();
    let tags = TAGS.get_or_init(|| {
        let mut tags: Vec<Option<Box<str>>> = vec![None; usize::from(SLOTS)];
        let mut left = tags.len();
        let mut n: u64 = 0;
        while left > 0 {
            let s = n.to_string();
            let t = &mut tags[usize::from(key_slot(s.as_bytes()))];
            if t.is_none() {
                *t = Some(s.into_boxed_str());
                left -= 1;
            }
            n += 1;
        }
        tags.into_iter().flatten().collect()
    });
    &tags[usize::from(slot % SLOTS)]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_checksum_is_xmodem() {
        // The CRC catalogue's check value, and the example of the Redis Cluster specification.
        assert_eq!(CRC16.checksum(b"123456789"), 0x31C3);
        assert_eq!(key_slot(b"123456789"), 0x31C3 % SLOTS);
    }

    #[test]
    fn the_tag_is_between_the_first_open_and_the_next_close() {
        assert_eq!(hash_tag(b"{user1000}.following"), Some(&b"user1000"[..]));
        assert_eq!(hash_tag(b"foo{}{bar}"), None);
        assert_eq!(hash_tag(b"foo{{bar}}zap"), Some(&b"{bar"[..]));
        assert_eq!(hash_tag(b"foo{bar}{zap}"), Some(&b"bar"[..]));
        assert_eq!(hash_tag(b"no tag"), None);
        assert_eq!(hash_tag(b"open{only"), None);
        assert_eq!(hash_tag(b"close}only"), None);
        assert_eq!(
            key_slot(b"{user1000}.following"),
            key_slot(b"{user1000}.followers")
        );
        assert_eq!(
            key_slot(b"foo{}{bar}"),
            CRC16.checksum(b"foo{}{bar}") % SLOTS
        );
    }

    #[test]
    fn a_companion_shares_its_keys_slot() {
        for key in [
            &b"redlock:r"[..],
            b"redlock:{user}:1",
            b"redlock:{{x}",
            b"redlock:open{",
            b"redlock:\xff\x00",
        ] {
            let c = companion_key(b"redlock-fence:", key).unwrap();
            assert_eq!(key_slot(&c), key_slot(key), "{c:?}");
        }
        assert_eq!(
            companion_key(b"p:", b"redlock:r").unwrap(),
            b"p:{redlock:r}".to_vec()
        );
        assert_eq!(
            companion_key(b"p:", b"redlock:{u}x").unwrap(),
            b"p:redlock:{u}x".to_vec()
        );
        // Refused: could not share the slot, or could collide.
        assert_eq!(companion_key(b"p:", b"redlock:a}b"), None);
        assert_eq!(companion_key(b"p:", b"redlock:{}b"), None);
        assert_eq!(companion_key(b"p:", b"{k}"), None);
        assert_eq!(companion_key(b"p:", b"{k"), None);
        assert_eq!(companion_key(b"p:", b""), None);
    }

    #[test]
    fn every_slot_has_a_tag_that_hashes_to_it() {
        for slot in 0..SLOTS {
            let tag = slot_tag(slot);
            assert_eq!(key_slot(tag.as_bytes()), slot);
            assert_eq!(
                key_slot(format!("redlock-marker:{{{tag}}}").as_bytes()),
                slot
            );
        }
        assert_eq!(slot_tag(SLOTS), slot_tag(0));
    }
}
