//! What a load balancer and an operator ask of `toolgate serve --http` (`docs/operations.md`):
//! `/healthz` (the process answers), `/readyz` (its state database answers) and `/metrics`
//! (Prometheus' text format, admins only).

use std::sync::Arc;
use std::time::Instant;

use futures::future::BoxFuture;
use toolgate_mcp::{HttpBody, HttpRoute, Mount, RouteAuth, RouteRequest, reply};
use toolgate_store::{ApprovalFilter, ApprovalStatus};

use crate::Gate;
use crate::approvals::PendingApprovals;

/// The three endpoints of `gate`'s HTTP server, started at `started`, whose approvals inbox is
/// `pending`.
pub fn mounts(gate: &Arc<Gate>, pending: Arc<PendingApprovals>, started: Instant) -> Vec<Mount> {
    vec![
        // Probes come from a load balancer without credentials; they say nothing but up or not.
        Mount::new("/healthz", RouteAuth::Own, Arc::new(Health)),
        Mount::new("/readyz", RouteAuth::Own, Arc::new(Ready { gate: Arc::clone(gate) })),
        Mount::new("/metrics", RouteAuth::Admin, Arc::new(Metrics { pending, started })),
    ]
}

#[derive(Debug)]
struct Health;

impl HttpRoute for Health {
    fn serve(&self, _req: RouteRequest) -> BoxFuture<'static, http::Response<HttpBody>> {
        Box::pin(async { reply::text(200, "ok\n") })
    }
}

#[derive(Debug)]
struct Ready {
    gate: Arc<Gate>,
}

impl HttpRoute for Ready {
    fn serve(&self, _req: RouteRequest) -> BoxFuture<'static, http::Response<HttpBody>> {
        let answer = match self.gate.services().stores.as_ref().map(|s| s.grants.grants_revision()) {
            Some(Ok(_)) => reply::text(200, "ready\n"),
            Some(Err(e)) => {
                tracing::warn!("readiness: the state database does not answer: {e}");
                reply::text(503, "not ready: the state database does not answer\n")
            }
            None => reply::text(503, "not ready: this server has no state database\n"),
        };
        Box::pin(async move { answer })
    }
}

#[derive(Debug)]
struct Metrics {
    pending: Arc<PendingApprovals>,
    started: Instant,
}

impl HttpRoute for Metrics {
    fn serve(&self, _req: RouteRequest) -> BoxFuture<'static, http::Response<HttpBody>> {
        let mut text = crate::metrics::process().render();
        let filter = ApprovalFilter { status: vec![ApprovalStatus::Pending], ..Default::default() };
        if let Ok(pending) = self.pending.find(&filter) {
            text.push_str("# HELP toolgate_pending_approvals Tool calls waiting in the approvals inbox.\n");
            text.push_str("# TYPE toolgate_pending_approvals gauge\n");
            text.push_str(&format!("toolgate_pending_approvals {}\n", pending.len()));
        }
        text.push_str("# HELP toolgate_uptime_seconds Time since this server started.\n");
        text.push_str("# TYPE toolgate_uptime_seconds gauge\n");
        text.push_str(&format!("toolgate_uptime_seconds {}\n", self.started.elapsed().as_secs_f64()));
        text.push_str("# HELP toolgate_build_info The running version.\n");
        text.push_str("# TYPE toolgate_build_info gauge\n");
        text.push_str(&format!("toolgate_build_info{{version=\"{}\"}} 1\n", env!("CARGO_PKG_VERSION")));
        let answer = reply::bytes(200, "text/plain; version=0.0.4; charset=utf-8", text);
        Box::pin(async move { answer })
    }
}
