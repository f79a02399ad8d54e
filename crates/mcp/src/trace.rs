//! The W3C trace context a `tools/call` request carries, for the gate's call span to continue
//! (`toolgate_core::trace`): `_meta`'s `traceparent` and `tracestate` (SEP-414, any transport),
//! else the Streamable HTTP request's headers. Read only while traces are exported.

use std::sync::Arc;

use rmcp::service::{RequestContext, RoleServer};
use toolgate_core::trace::TraceHeaders;

/// The valid trace context `request` carries, if traces are exported; `None` (the call starts a
/// trace of its own) for none, an invalid one, or more than one `traceparent` header.
pub(crate) fn parent(request: &RequestContext<RoleServer>) -> Option<Arc<TraceHeaders>> {
    if !toolgate_core::trace::on() {
        return None;
    }
    if let Some(traceparent) = request.meta.get_traceparent() {
        return TraceHeaders::parse(traceparent, request.meta.get_tracestate()).map(Arc::new);
    }
    let headers = &request.extensions.get::<http::request::Parts>()?.headers;
    from_headers(headers).map(Arc::new)
}

/// The context of `headers`: exactly one `traceparent` (two are ambiguous, and ignored), and a
/// `tracestate` only when there is one.
fn from_headers(headers: &http::HeaderMap) -> Option<TraceHeaders> {
    let one = |name: &str| {
        let mut all = headers.get_all(name).iter();
        match (all.next(), all.next()) {
            (Some(value), None) => value.to_str().ok(),
            _ => None,
        }
    };
    TraceHeaders::parse(one("traceparent")?, one("tracestate"))
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

    #[test]
    fn one_valid_header_is_taken_and_two_are_not() {
        let mut headers = http::HeaderMap::new();
        assert_eq!(from_headers(&headers), None);
        headers.insert("traceparent", GOOD.parse().unwrap());
        headers.insert("tracestate", "a=1".parse().unwrap());
        let taken = from_headers(&headers).unwrap();
        assert_eq!((taken.traceparent(), taken.tracestate()), (GOOD, Some("a=1")));
        headers.append("tracestate", "b=2".parse().unwrap());
        assert_eq!(from_headers(&headers).unwrap().tracestate(), None, "two tracestate headers: none kept");
        headers.append("traceparent", "00-11111111111111111111111111111111-2222222222222222-01".parse().unwrap());
        assert_eq!(from_headers(&headers), None, "two traceparent headers: a new trace");
        let mut bad = http::HeaderMap::new();
        bad.insert("traceparent", "00-00000000000000000000000000000000-00f067aa0ba902b7-01".parse().unwrap());
        assert_eq!(from_headers(&bad), None);
    }
}
