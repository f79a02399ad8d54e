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
        Mount::new("/metrics", RouteAuth::Admin, Arc::new(Metrics { gate: Arc::clone(gate), pending, started })),
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
    gate: Arc<Gate>,
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
        if let Some(queued) = self.gate.audit_log().and_then(|log| log.queued()) {
            text.push_str("# HELP toolgate_audit_queued Audit records queued and not yet written (grows while the database is away).\n");
            text.push_str("# TYPE toolgate_audit_queued gauge\n");
            text.push_str(&format!("toolgate_audit_queued {queued}\n"));
        }
        if let Some(stores) = self.gate.services().stores.as_ref() {
            queue_depths(stores, &mut text);
        }
        if let Some(shared) = crate::state::shared_status(&self.gate.config().store) {
            let pool = shared.pool;
            text.push_str(
                "# HELP toolgate_store_connections Connections of this node's pool to the shared database, by state.\n",
            );
            text.push_str("# TYPE toolgate_store_connections gauge\n");
            text.push_str(&format!(
                "toolgate_store_connections{{state=\"in_use\"}} {}\n",
                pool.open.saturating_sub(pool.idle)
            ));
            text.push_str(&format!("toolgate_store_connections{{state=\"idle\"}} {}\n", pool.idle));
            text.push_str("# HELP toolgate_store_connections_max The most connections the pool opens.\n");
            text.push_str("# TYPE toolgate_store_connections_max gauge\n");
            text.push_str(&format!("toolgate_store_connections_max {}\n", pool.max));
            text.push_str("# HELP toolgate_store_waiting Calls waiting for a connection to the shared database.\n");
            text.push_str("# TYPE toolgate_store_waiting gauge\n");
            text.push_str(&format!("toolgate_store_waiting {}\n", pool.waiting));
            text.push_str("# HELP toolgate_store_in_step 1 while other nodes' changes arrive by NOTIFY; 0 while each call reads them.\n");
            text.push_str("# TYPE toolgate_store_in_step gauge\n");
            text.push_str(&format!("toolgate_store_in_step {}\n", u8::from(shared.in_step)));
            if let Some(lag) = shared.notify_lag {
                text.push_str("# HELP toolgate_store_notify_lag_seconds How long this node's latest probe NOTIFY took to reach its LISTEN connection (sent every 5 s).\n");
                text.push_str("# TYPE toolgate_store_notify_lag_seconds gauge\n");
                text.push_str(&format!("toolgate_store_notify_lag_seconds {}\n", lag.as_secs_f64()));
            }
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

/// The work queues a scrape should watch: jobs by state (`queued` growing means no runner keeps
/// up) and messages waiting for a retry. On a shared store they count every node's.
fn queue_depths(stores: &toolgate_store::Stores, text: &mut String) {
    if let Ok(states) = stores.jobs.jobs_by_state() {
        text.push_str("# HELP toolgate_jobs Background jobs by state (every node's, on a shared store).\n");
        text.push_str("# TYPE toolgate_jobs gauge\n");
        for state in ["queued", "running"] {
            let n = states.iter().find(|(s, _)| s == state).map_or(0, |(_, n)| *n);
            text.push_str(&format!("toolgate_jobs{{state=\"{state}\"}} {n}\n"));
        }
        // The finished states, as the store names them (escaped all the same).
        for (state, n) in states.iter().filter(|(s, _)| s != "queued" && s != "running") {
            text.push_str(&format!("toolgate_jobs{{state=\"{}\"}} {n}\n", crate::metrics::label(state)));
        }
    }
    if let Ok(n) = stores.outbox.outbox_len() {
        text.push_str(
            "# HELP toolgate_outbox_messages Messages the `message` tool could not deliver yet, waiting for a retry.\n",
        );
        text.push_str("# TYPE toolgate_outbox_messages gauge\n");
        text.push_str(&format!("toolgate_outbox_messages {n}\n"));
    }
}
