//! This process as a node of a shared store (`[node]`, `[store] url`): what is inherently local
//! to it (background processes) is recorded in the store with its name and URL, so a call
//! about it that reaches another node is answered with where it runs (`toolgate_tools::runtime`'s
//! `owners`). `toolgate serve` announces the node once it listens ([`announce`]).

use std::net::SocketAddr;

use toolgate_store::ProcessStore;
use toolgate_tools::runtime::{ThisNode, serve_as_node};

use crate::config::Config;

/// This node as `config` and the address it listens on make it: `[node] name`, else the host
/// name and the port (unique among nodes on one machine too); `[node] url`, else the URL it
/// listens at (right on one machine; behind a load balancer set `[node] url` to the node's own
/// address, which the other nodes and the callers can reach).
pub fn this_node(config: &Config, local: SocketAddr) -> ThisNode {
    let name = config.node.name.clone().filter(|n| !n.trim().is_empty()).unwrap_or_else(|| {
        let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
        let host = host.trim();
        format!("{}:{}", if host.is_empty() { "localhost" } else { host }, local.port())
    });
    let url = config.node.url.clone().filter(|u| !u.trim().is_empty()).unwrap_or_else(|| format!("http://{local}/mcp"));
    ThisNode { name, url: Some(url) }
}

/// Makes this process the node [`this_node`] describes, and, with a shared store, drops the
/// records its previous run left (its processes ended with it). A store that does not answer
/// is logged: calls still work, only the stale records stay until the next start.
pub fn announce(config: &Config, local: SocketAddr) -> ThisNode {
    let node = this_node(config, local);
    if !serve_as_node(node.clone()) {
        return node;
    }
    if let Some(url) = &config.store.url {
        match crate::state::shared(url).and_then(|store| store.processes_forget_node(&node.name)) {
            Ok(0) => {}
            Ok(n) => {
                tracing::info!("node {}: dropped {n} records of background processes of its previous run", node.name)
            }
            Err(e) => tracing::warn!("node {}: cannot drop its previous run's process records: {e}", node.name),
        }
    }
    node
}
