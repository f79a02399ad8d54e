//! Unpredictable ids (boundary ids, call ids, tokens) from the operating system's generator.

use std::fmt::Write;

/// `bytes` random bytes from the OS, hex-encoded (`2 * bytes` characters).
///
/// Falls back to a hash of the time and a counter only if the OS generator fails, which on
/// Linux means `getrandom(2)` itself is unavailable.
pub fn hex_id(bytes: usize) -> String {
    let mut buf = vec![0u8; bytes];
    if getrandom::fill(&mut buf).is_err() {
        fallback_fill(&mut buf);
    }
    let mut out = String::with_capacity(bytes * 2);
    for b in buf {
        let _ = write!(out, "{b:02x}");
    }
    out
}

fn fallback_fill(buf: &mut [u8]) {
    use std::hash::{BuildHasher, Hasher};
    use std::sync::atomic::{AtomicU64, Ordering};
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    for chunk in buf.chunks_mut(8) {
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        h.write_u64(COUNTER.fetch_add(1, Ordering::Relaxed));
        h.write_u128(std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos()));
        let v = h.finish().to_le_bytes();
        chunk.copy_from_slice(&v[..chunk.len()]);
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn ids_are_hex_and_differ() {
        let a = super::hex_id(8);
        let b = super::hex_id(8);
        assert_eq!(a.len(), 16);
        assert!(a.bytes().all(|c| c.is_ascii_hexdigit()));
        assert_ne!(a, b);
    }
}
