//! W3C trace context (`traceparent`, `tracestate`) carried across a call's edges when traces
//! are exported (`[telemetry]`, `docs/operations.md` "Traces"): a transport hands a request's
//! context to the gate ([`crate::CallContext::trace_parent`]), whose call span continues it, and
//! a tool that calls another server sends the context of the span it runs in ([`current`]).
//!
//! Everything here is off until the exporter is installed ([`set_on`]): then [`on`] is one
//! atomic load, and a transport reads no header and allocates nothing.

use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, Ordering};

/// The longest `traceparent` taken: version 00's is 55 bytes; a later version may append
/// fields, which are not read.
pub const MAX_TRACEPARENT: usize = 256;

/// The longest `tracestate` taken (W3C's 32 members fit in 512 bytes); a longer one is dropped
/// whole, the `traceparent` still taken.
pub const MAX_TRACESTATE: usize = 512;

static ON: AtomicBool = AtomicBool::new(false);

/// What tells the context of the span the current task runs in (set by the exporter's owner).
static CURRENT: OnceLock<fn() -> Option<TraceHeaders>> = OnceLock::new();

/// Whether call spans are exported, so that trace context is worth reading and sending.
#[inline]
pub fn on() -> bool {
    ON.load(Ordering::Relaxed)
}

/// Turns reading and sending trace context on (the exporter started) or off (it stopped);
/// `current` gives the context of the span the running task is in.
pub fn set_on(on: bool, current: fn() -> Option<TraceHeaders>) {
    let _ = CURRENT.set(current);
    ON.store(on, Ordering::Release);
}

/// The headers to send with a request made now, for the span the running task is in (a tool's
/// `execute` stage); `None` when traces are off or no span is exported.
pub fn current() -> Option<TraceHeaders> {
    if !on() {
        return None;
    }
    CURRENT.get().and_then(|current| current())
}

/// A W3C trace context, checked: a `traceparent` of a known shape whose ids are not zero, and
/// a `tracestate` of printable ASCII within [`MAX_TRACESTATE`] bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TraceHeaders {
    traceparent: String,
    tracestate: Option<String>,
}

impl TraceHeaders {
    /// The context `traceparent` and `tracestate` (as a request or `_meta` gave them) name, or
    /// `None` when `traceparent` is not a valid one (wrong length, not lower-case hex, a zero
    /// trace or span id, version `ff`): the call is then a trace of its own. A `tracestate`
    /// that is too long or not printable ASCII is dropped, the `traceparent` still taken.
    pub fn parse(traceparent: &str, tracestate: Option<&str>) -> Option<TraceHeaders> {
        let traceparent = traceparent.trim_matches([' ', '\t']);
        if !valid_traceparent(traceparent) {
            return None;
        }
        let tracestate = tracestate
            .map(|s| s.trim_matches([' ', '\t']))
            .filter(|s| !s.is_empty() && s.len() <= MAX_TRACESTATE && s.bytes().all(|b| (0x20..0x7f).contains(&b)));
        // A later version's extra fields are not ours to pass on: version 00 is what is read.
        Some(TraceHeaders { traceparent: traceparent[..55].to_owned(), tracestate: tracestate.map(str::to_owned) })
    }

    /// The `traceparent` value (55 bytes: `version-traceid-spanid-flags`).
    pub fn traceparent(&self) -> &str {
        &self.traceparent
    }

    /// The `tracestate` value, if one came and was kept.
    pub fn tracestate(&self) -> Option<&str> {
        self.tracestate.as_deref()
    }

    /// The HTTP headers that carry it (`traceparent`, then `tracestate` when there is one), as
    /// name and value; both values are printable ASCII (checked by [`TraceHeaders::parse`]).
    pub fn headers(&self) -> impl Iterator<Item = (&'static str, &str)> {
        std::iter::once(("traceparent", self.traceparent.as_str()))
            .chain(self.tracestate.as_deref().map(|state| ("tracestate", state)))
    }
}

/// `version-traceid-spanid-flags` in lower-case hex (W3C Trace Context, level 1): version 00 is
/// exactly 55 bytes; a later version (not `ff`) is at least that, with `-` after the flags.
fn valid_traceparent(value: &str) -> bool {
    let bytes = value.as_bytes();
    if bytes.len() < 55 || bytes.len() > MAX_TRACEPARENT {
        return false;
    }
    let hex = |range: std::ops::Range<usize>| bytes[range].iter().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'));
    let nonzero = |range: std::ops::Range<usize>| bytes[range].iter().any(|&b| b != b'0');
    let shape = hex(0..2)
        && bytes[2] == b'-'
        && hex(3..35)
        && bytes[35] == b'-'
        && hex(36..52)
        && bytes[52] == b'-'
        && hex(53..55);
    if !shape || &bytes[0..2] == b"ff" || !nonzero(3..35) || !nonzero(36..52) {
        return false;
    }
    match &bytes[0..2] {
        b"00" => bytes.len() == 55,
        _ => bytes.len() == 55 || bytes[55] == b'-',
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

    #[test]
    fn a_valid_traceparent_is_taken_with_its_state() {
        let t = TraceHeaders::parse(GOOD, Some("vendor=abc,other=1")).unwrap();
        assert_eq!(t.traceparent(), GOOD);
        assert_eq!(t.tracestate(), Some("vendor=abc,other=1"));
        let sent: Vec<_> = t.headers().collect();
        assert_eq!(sent, [("traceparent", GOOD), ("tracestate", "vendor=abc,other=1")]);
        assert_eq!(TraceHeaders::parse(GOOD, None).unwrap().headers().count(), 1, "no tracestate header for none");
        // Surrounding blanks are allowed by the header grammar.
        assert_eq!(TraceHeaders::parse(&format!(" {GOOD}\t"), None).unwrap().traceparent(), GOOD);
        // A later version with more fields: its first four are read, the rest not passed on.
        let later = "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-whatever";
        assert_eq!(TraceHeaders::parse(later, None).unwrap().traceparent(), &later[..55]);
    }

    #[test]
    fn an_invalid_or_hostile_traceparent_is_ignored() {
        let long = format!("01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-{}", "a".repeat(300));
        for bad in [
            "",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-",
            "00-4bf92f3577b34da6a3ce929d0e0e47-00f067aa0ba902b7-01",
            "00-4BF92F3577B34DA6A3CE929D0E0E4736-00F067AA0BA902B7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e473g-00f067aa0ba902b7-01",
            "00-+bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
            "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00_4bf92f3577b34da6a3ce929d0e0e4736_00f067aa0ba902b7_01",
            "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01x",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01\r\nx-evil: 1",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-é1",
            &long,
        ] {
            assert_eq!(TraceHeaders::parse(bad, None), None, "{bad:?}");
        }
    }

    #[test]
    fn a_bad_tracestate_is_dropped_and_the_parent_kept() {
        for bad in ["a=b\r\nx: y", &"k=v,".repeat(200), "", "é=1"] {
            let t = TraceHeaders::parse(GOOD, Some(bad)).unwrap();
            assert_eq!(t.tracestate(), None, "{bad:?}");
        }
    }

    #[test]
    fn nothing_is_current_while_off() {
        assert!(!on());
        assert_eq!(current(), None);
    }
}
