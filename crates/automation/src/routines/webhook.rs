//! Webhook signatures: HMAC-SHA256 over the timestamp and the raw body, with a per-routine
//! secret from the secrets store.
//!
//! A sender signs `"{timestamp}.{raw body}"` with the routine's secret and sends
//!
//! ```text
//! POST /hooks/NAME
//! X-Toolgate-Timestamp: 1767225600            (Unix seconds)
//! X-Toolgate-Signature: sha256=<hex of HMAC-SHA256(secret, timestamp + "." + body)>
//! ```
//!
//! A request is refused when either header is missing or malformed, when the timestamp is more
//! than the replay window away from now, when the signature does not match (compared in
//! constant time), or when that signature was already accepted within the window (a replay:
//! the store remembers accepted signatures until they could no longer pass the timestamp
//! check). The secret never travels in the request and the body is never trusted before the
//! check.

use hmac::{Hmac, Mac};
use sha2::Sha256;

/// The header with the Unix-seconds timestamp.
pub const TIMESTAMP_HEADER: &str = "x-toolgate-timestamp";
/// The header with `sha256=<hex>`.
pub const SIGNATURE_HEADER: &str = "x-toolgate-signature";

/// Why a webhook request was refused. The message is what the sender reads.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SignatureError {
    /// A header is missing.
    #[error(
        "missing `{0}` header: sign the request with HMAC-SHA256 over \"TIMESTAMP.BODY\" and send `X-Toolgate-Timestamp: TIMESTAMP` and `X-Toolgate-Signature: sha256=HEX`"
    )]
    Missing(&'static str),
    /// A header is not in its format.
    #[error("malformed `{header}` header: {why}")]
    Malformed {
        /// Which header.
        header: &'static str,
        /// What is wrong.
        why: &'static str,
    },
    /// The timestamp is outside the window.
    #[error(
        "the timestamp is {skew_secs} s away from the server's clock, more than the {window_secs} s window: sign with the current time"
    )]
    Stale {
        /// How far off it is.
        skew_secs: i64,
        /// The window.
        window_secs: i64,
    },
    /// The signature does not match.
    #[error(
        "the signature does not match the body: sign \"TIMESTAMP.BODY\" (the raw body, byte for byte) with the routine's secret"
    )]
    Mismatch,
    /// This exact request was already accepted.
    #[error(
        "this request was already received (same timestamp and signature): a replay is refused; sign each delivery anew"
    )]
    Replay,
}

/// The signature of `body` sent at `timestamp`, as the `X-Toolgate-Signature` value.
pub fn sign(secret: &[u8], timestamp: i64, body: &[u8]) -> String {
    format!("sha256={}", hex(&mac(secret, timestamp, body)))
}

fn mac(secret: &[u8], timestamp: i64, body: &[u8]) -> Vec<u8> {
    // HMAC takes a key of any length; `new_from_slice` cannot fail for it.
    let mut m = match Hmac::<Sha256>::new_from_slice(secret) {
        Ok(m) => m,
        Err(_) => return Vec::new(),
    };
    m.update(timestamp.to_string().as_bytes());
    m.update(b".");
    m.update(body);
    m.finalize().into_bytes().to_vec()
}

pub(crate) fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

pub(crate) fn unhex(text: &str) -> Option<Vec<u8>> {
    if !text.len().is_multiple_of(2) {
        return None;
    }
    (0..text.len()).step_by(2).map(|i| u8::from_str_radix(text.get(i..i + 2)?, 16).ok()).collect()
}

/// A verified request: the signature (its replay key) and the timestamp.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verified {
    /// The lowercase hex signature: what the store remembers to refuse a replay.
    pub key: String,
    /// The sender's timestamp, Unix seconds.
    pub timestamp: i64,
}

/// Checks a request's headers against `body` and `secret` at `now_ms`; the replay check (the
/// store's) is the caller's, with [`Verified::key`].
pub fn verify(
    secret: &[u8],
    timestamp: Option<&str>,
    signature: Option<&str>,
    body: &[u8],
    now_ms: i64,
    window_secs: i64,
) -> Result<Verified, SignatureError> {
    let timestamp = timestamp.ok_or(SignatureError::Missing("X-Toolgate-Timestamp"))?;
    let signature = signature.ok_or(SignatureError::Missing("X-Toolgate-Signature"))?;
    let ts: i64 = timestamp.trim().parse().map_err(|_| SignatureError::Malformed {
        header: "X-Toolgate-Timestamp",
        why: "expected Unix seconds, such as 1767225600",
    })?;
    let hex_sig = signature.trim().strip_prefix("sha256=").ok_or(SignatureError::Malformed {
        header: "X-Toolgate-Signature",
        why: "expected `sha256=` and 64 hex digits",
    })?;
    let given = unhex(hex_sig).filter(|b| b.len() == 32).ok_or(SignatureError::Malformed {
        header: "X-Toolgate-Signature",
        why: "expected `sha256=` and 64 hex digits",
    })?;
    let skew = (now_ms / 1000).saturating_sub(ts);
    if skew.abs() > window_secs {
        return Err(SignatureError::Stale { skew_secs: skew, window_secs });
    }
    if !mac_ok(secret, &[ts.to_string().as_bytes(), b".", body], &given) {
        return Err(SignatureError::Mismatch);
    }
    Ok(Verified { key: hex(&given), timestamp: ts })
}

/// Whether `given` is the HMAC-SHA256 under `secret` of `parts` one after the other, compared
/// in constant time (shared with the inbound message channels, whose services sign other
/// strings with the same primitive).
pub(crate) fn mac_ok(secret: &[u8], parts: &[&[u8]], given: &[u8]) -> bool {
    let Ok(mut m) = Hmac::<Sha256>::new_from_slice(secret) else { return false };
    for p in parts {
        m.update(p);
    }
    m.verify_slice(given).is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECRET: &[u8] = b"a-routine-secret-of-32-bytes-xxx";
    const NOW: i64 = 1_767_225_600_000;

    fn check(ts: Option<&str>, sig: Option<&str>, body: &[u8]) -> Result<Verified, SignatureError> {
        verify(SECRET, ts, sig, body, NOW, 300)
    }

    #[test]
    fn a_signed_request_passes_and_every_tampering_fails() {
        let body = br#"{"event":"push"}"#;
        let ts = (NOW / 1000).to_string();
        let sig = sign(SECRET, NOW / 1000, body);
        assert!(check(Some(&ts), Some(&sig), body).is_ok());
        // Known answer, so the format is pinned: HMAC-SHA256("k", "1.b").
        assert_eq!(sign(b"k", 1, b"b"), format!("sha256={}", hex(&mac(b"k", 1, b"b"))));
        assert_eq!(check(Some(&ts), Some(&sig), br#"{"event":"push "}"#), Err(SignatureError::Mismatch));
        let other_ts = (NOW / 1000 - 1).to_string();
        assert_eq!(check(Some(&other_ts), Some(&sig), body), Err(SignatureError::Mismatch));
        let wrong_key = sign(b"another secret", NOW / 1000, body);
        assert_eq!(check(Some(&ts), Some(&wrong_key), body), Err(SignatureError::Mismatch));
        assert!(matches!(check(None, Some(&sig), body), Err(SignatureError::Missing(_))));
        assert!(matches!(check(Some(&ts), None, body), Err(SignatureError::Missing(_))));
        assert!(matches!(check(Some("yesterday"), Some(&sig), body), Err(SignatureError::Malformed { .. })));
        assert!(matches!(check(Some(&ts), Some("md5=abcd"), body), Err(SignatureError::Malformed { .. })));
        assert!(matches!(check(Some(&ts), Some("sha256=zz"), body), Err(SignatureError::Malformed { .. })));
        let old = NOW / 1000 - 301;
        let stale = check(Some(&old.to_string()), Some(&sign(SECRET, old, body)), body);
        assert!(matches!(stale, Err(SignatureError::Stale { skew_secs: 301, .. })), "{stale:?}");
    }
}
