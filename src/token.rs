//! Unguessable lock tokens and retry jitter, both from the operating system's random source.

use crate::error::Error;

/// The number of random bytes in a token (hex-encoded to twice as many characters).
pub const TOKEN_BYTES: usize = 20;

/// A fresh token: 20 bytes from `getrandom`, as 40 lowercase hex characters.
pub(crate) fn new_token() -> Result<String, Error> {
    let mut raw = [0u8; TOKEN_BYTES];
    getrandom::fill(&mut raw)
        .map_err(|e| Error::Internal(format!("the OS random source failed: {e}")))?;
    Ok(hex(&raw))
}

/// A plain lock's value: a fresh token, then `.` and the wall-clock milliseconds at which the
/// attempt started, then a space and the holder's label if there is one:
/// `<40 hex>.<unix ms>[ <label>]`. Every script compares the whole value, so the value is
/// the lease's identity on the nodes; [`parse_value`] reads it back.
pub(crate) fn new_value(wall_ms: u64, label: Option<&str>) -> Result<String, Error> {
    let mut v = new_token()?;
    v.push('.');
    v.push_str(&wall_ms.to_string());
    if let Some(label) = label {
        v.push(' ');
        v.push_str(label);
    }
    Ok(v)
}

/// What a plain lock's value says, when it is one of ours: the wall-clock milliseconds at
/// which it was taken and its label. `None` for a value in another format (a bare token of
/// an earlier version, or another library's value).
pub(crate) fn parse_value(value: &[u8]) -> Option<(u64, Option<String>)> {
    let hex = value.get(..TOKEN_BYTES * 2)?;
    if !hex
        .iter()
        .all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase())
    {
        return None;
    }
    let rest = value.get(TOKEN_BYTES * 2..)?.strip_prefix(b".")?;
    let (ms, label) = match rest.iter().position(|&c| c == b' ') {
        Some(i) => (&rest[..i], Some(&rest[i + 1..])),
        None => (rest, None),
    };
    if ms.is_empty() || ms.len() > 20 || !ms.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let ms = std::str::from_utf8(ms).ok()?.parse().ok()?;
    let label = match label {
        Some(l) => Some(std::str::from_utf8(l).ok()?.to_string()),
        None => None,
    };
    Some((ms, label))
}

/// A uniformly distributed integer in `[0, bound]`.
pub(crate) fn uniform_inclusive(bound: u64) -> Result<u64, Error> {
    if bound == 0 {
        return Ok(0);
    }
    let r = getrandom::u64()
        .map_err(|e| Error::Internal(format!("the OS random source failed: {e}")))?;
    // The modulo bias is below 2^-40 for any bound a retry delay can have; irrelevant here.
    Ok(match bound.checked_add(1) {
        Some(m) => r % m,
        None => r,
    })
}

pub(crate) fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        s.push(DIGITS[(b >> 4) as usize] as char);
        s.push(DIGITS[(b & 15) as usize] as char);
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn tokens_are_40_hex_chars_and_distinct() {
        let mut seen = HashSet::new();
        for _ in 0..1000 {
            let t = new_token().unwrap();
            assert_eq!(t.len(), 40);
            assert!(
                t.bytes()
                    .all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase())
            );
            assert!(seen.insert(t));
        }
    }

    #[test]
    fn values_carry_time_and_label_and_read_back() {
        let v = new_value(1_764_000_000_123, Some("host:42 x")).unwrap();
        assert_eq!(&v[40..], ".1764000000123 host:42 x");
        assert_eq!(
            parse_value(v.as_bytes()),
            Some((1_764_000_000_123, Some("host:42 x".to_string())))
        );
        let bare = new_value(7, None).unwrap();
        assert_eq!(parse_value(bare.as_bytes()), Some((7, None)));
        let t = new_token().unwrap();
        assert_eq!(parse_value(t.as_bytes()), None);
        assert_eq!(parse_value(format!("{t}.").as_bytes()), None);
        assert_eq!(parse_value(format!("{t}.12a").as_bytes()), None);
        assert_eq!(parse_value(b"d4f1b3c0a2"), None);
        let upper = t.to_ascii_uppercase();
        assert_eq!(parse_value(format!("{upper}.1").as_bytes()), None);
    }

    #[test]
    fn uniform_stays_in_range_and_spreads() {
        let mut hit = [false; 5];
        for _ in 0..2000 {
            let v = uniform_inclusive(4).unwrap();
            assert!(v <= 4);
            hit[v as usize] = true;
        }
        assert!(hit.iter().all(|h| *h));
        assert_eq!(uniform_inclusive(0).unwrap(), 0);
        let _ = uniform_inclusive(u64::MAX).unwrap();
    }

    #[test]
    fn hex_encoding() {
        assert_eq!(hex(&[0x00, 0xab, 0xff]), "00abff");
    }
}
