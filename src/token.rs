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
