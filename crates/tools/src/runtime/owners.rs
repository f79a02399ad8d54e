//! Which node holds each background process or browser session, when several `toolgate serve`
//! nodes share one store (`[store] url`).
//!
//! A background process runs on the node that started it: its pipes, its process group and its
//! sandbox cannot move; so does a browser session (its Chromium, tabs and cookies). So every one
//! a serving node starts is recorded in the store ([`LocalStore`], a table per [`Local`] kind)
//! with the node's name and URL, the workspace and the user, and removed when the node forgets
//! it. A call about one that reaches a node which does not hold the id reads the record: the
//! caller's own process or session on another node is forwarded there ([`NodeForwarder`]), or,
//! when that node does not answer (a TCP connection within [`PROBE_WITHIN`]) or no forwarder is
//! set, answered with the node's name, its URL and whether it answers; anyone else's id, or an
//! unknown one, is "not found", exactly as on one node.
//!
//! The node is this process ([`serve_as_node`], set once by `toolgate serve` when it listens);
//! an [`Owners`] records nothing until then, nor without a store ([`Owners::set_store`]). The
//! `process` tool has one (in the runner's table), the `browser` tool another
//! (`toolgate-browser`'s pool).

use std::path::Path;
use std::sync::{Arc, LazyLock, OnceLock};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde_json::Value;
use toolgate_core::{CallContext, ToolError, ToolOutput};
use toolgate_guard::leak::LeakDetector;
use toolgate_store::{Local, LocalOwner, LocalStore};

/// How long the answer about a process on another node waits to learn whether that node answers.
pub const PROBE_WITHIN: Duration = Duration::from_secs(2);

/// This process as a node of a shared store.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ThisNode {
    /// Its name, unique among the nodes (`[node] name`).
    pub name: String,
    /// Where it answers MCP, as the other nodes and clients reach it (`[node] url`).
    pub url: Option<String>,
}

static THIS_NODE: OnceLock<ThisNode> = OnceLock::new();

/// Makes this process the node `node`: from now on its background processes and browser
/// sessions are recorded in the store of every [`Owners`] that has one. Once per process;
/// returns whether this call set it.
pub fn serve_as_node(node: ThisNode) -> bool {
    THIS_NODE.set(node).is_ok()
}

/// This process as a node, once `toolgate serve` said so.
pub fn this_node() -> Option<&'static ThisNode> {
    THIS_NODE.get()
}

/// The parameter the node link adds to a call it forwards: the forwarding node's name, kept in
/// the owner's audit row. What the owner acts on is the key the call came with
/// (`CallContext::forwarded_by`): a `via` any caller writes changes nothing.
pub const VIA: &str = "via";

/// The tool whose calls are about `kind`: the one a forwarded call is made with.
pub fn tool_of(kind: Local) -> &'static str {
    match kind {
        Local::Process => "process",
        Local::BrowserSession => "browser",
    }
}

/// Sends a call about a process or a browser session to the node that holds it, as the caller,
/// through that node's own gate (its policy, approvals and audit log apply there). Implemented
/// where the node link lives (`toolgate`'s `node`); without one, a call reaching the wrong node
/// is answered with where the thing is.
#[toolgate_core::async_trait]
pub trait NodeForwarder: Send + Sync + std::fmt::Debug {
    /// Makes the call `params` of the tool `tool` ([`tool_of`] the record's kind) on `owner`'s
    /// node as `ctx`'s user, by `ctx`'s deadline, with the approval `ctx` says this node's gate
    /// gave it (`CallContext::approved`); its answer, or why it could not be made.
    async fn forward(
        &self,
        tool: &str,
        owner: &LocalOwner,
        ctx: &CallContext,
        params: &Value,
    ) -> Result<ToolOutput, String>;
}

/// Which node holds each thing of one [`Local`] kind: records what this node starts, finds
/// what other nodes hold, forwards calls about it.
#[derive(Debug)]
pub struct Owners {
    kind: Local,
    store: OnceLock<Arc<dyn LocalStore>>,
    forwarder: OnceLock<Arc<dyn NodeForwarder>>,
}

/// The key a workspace is recorded under: its canonical path, as every node mounts it.
fn workspace_key(workspace: &Path) -> String {
    workspace.to_string_lossy().into_owned()
}

/// What the shared store keeps to show (a process's command): cut, with secrets redacted as
/// the audit log's parameters are (every node's operators read the database; the user who ran
/// it sees it in `list` on the other nodes).
fn shown_command(command: &str) -> String {
    static DETECTOR: LazyLock<LeakDetector> = LazyLock::new(LeakDetector::new);
    let cut: String = command.chars().take(500).collect();
    let redacted = DETECTOR.redact(&cut);
    if redacted.blocked { "[command withheld: it holds a secret]".to_owned() } else { redacted.text }
}

fn now_ms() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

impl Owners {
    /// The records of `kind`; nothing is recorded until [`Owners::set_store`].
    pub fn new(kind: Local) -> Owners {
        Owners { kind, store: OnceLock::new(), forwarder: OnceLock::new() }
    }

    /// Records in `store` from now on (once; later calls are ignored).
    pub fn set_store(&self, store: Arc<dyn LocalStore>) {
        let _ = self.store.set(store);
    }

    /// Forwards calls about what other nodes hold with `forwarder` (once).
    pub fn set_forwarder(&self, forwarder: Arc<dyn NodeForwarder>) {
        let _ = self.forwarder.set(forwarder);
    }

    /// The store and this node, when both are set.
    fn shared(&self) -> Option<(&Arc<dyn LocalStore>, &'static ThisNode)> {
        Some((self.store.get()?, this_node()?))
    }

    /// Records what this node just started (`command`: what it is, shown in listings). A
    /// failure is logged: it still works here, only the other nodes cannot name its node.
    pub fn record(&self, id: &str, workspace: &Path, user: &str, command: &str) {
        let Some((store, node)) = self.shared() else { return };
        let row = LocalOwner {
            id: id.to_owned(),
            workspace: workspace_key(workspace),
            user: user.to_owned(),
            node: node.name.clone(),
            node_url: node.url.clone(),
            command: shown_command(command),
            started_ms: now_ms(),
        };
        if let Err(e) = store.local_record(self.kind, &row) {
            tracing::warn!("{} {id} is not recorded in the shared store: {e}", self.kind.noun());
        }
    }

    /// Removes the records of what this node forgot.
    pub fn forget<'a>(&self, ids: impl IntoIterator<Item = &'a str>) {
        let Some((store, node)) = self.shared() else { return };
        for id in ids {
            if let Err(e) = store.local_forget(self.kind, id, &node.name) {
                tracing::warn!("{} {id} is still recorded in the shared store: {e}", self.kind.noun());
            }
        }
    }

    /// What of `user`'s in `workspace` other nodes hold.
    pub fn elsewhere(&self, workspace: &Path, user: &str) -> Vec<LocalOwner> {
        let Some((store, node)) = self.shared() else { return Vec::new() };
        match store.locals_of(self.kind, &workspace_key(workspace), user) {
            Ok(rows) => rows.into_iter().filter(|p| p.node != node.name).collect(),
            Err(e) => {
                tracing::warn!("cannot list the other nodes' {}s: {e}", self.kind.noun());
                Vec::new()
            }
        }
    }

    /// The caller's `id` that another node holds, from the store's record; `None` when there
    /// is none (or it is another user's or workspace's, which stays invisible: the same answer
    /// as an id that never existed; or this node's own stale record of something it forgot).
    /// An error when the store does not answer.
    pub fn owner_elsewhere(&self, id: &str, workspace: &Path, user: &str) -> Option<Result<LocalOwner, ToolError>> {
        let (store, node) = self.shared()?;
        let owner = match store.local_owner(self.kind, id) {
            Ok(owner) => owner?,
            Err(e) => {
                return Some(Err(ToolError::failed(format!(
                    "{} `{id}` is not on this node (`{}`), and the shared store that says which node holds it \
                     did not answer: {e}",
                    self.kind.noun(),
                    node.name
                ))));
            }
        };
        if owner.user != user || owner.workspace != workspace_key(workspace) || owner.node == node.name {
            return None;
        }
        Some(Ok(owner))
    }

    /// The call `params` of `ctx`'s caller about `owner`'s process or session, which reached
    /// this node: forwarded to the owner when it answers and a forwarder is set; else an error
    /// naming the owner, its URL and whether it answers.
    pub async fn answer(&self, owner: &LocalOwner, ctx: &CallContext, params: &Value) -> Result<ToolOutput, ToolError> {
        let here = this_node().map_or("", |n| n.name.as_str());
        let kind = self.kind;
        let Some(url) = owner.node_url.as_deref() else {
            return Err(ToolError::failed(no_url(kind, owner, here)));
        };
        if let Err(why) = probe(url).await {
            return Err(ToolError::failed(down(kind, owner, url, &why)));
        }
        let Some(forwarder) = self.forwarder.get() else {
            return Err(ToolError::failed(up(kind, owner, url, here)));
        };
        let what = kind.noun();
        // Sent here by another node's link (its key says so, not the call's `via`, which any
        // caller can write), yet not here: that node's record or URL leads to the wrong node.
        // Never sent on (two nodes whose URLs point at each other would pass it back and forth).
        if let Some(via) = &ctx.forwarded_by {
            return Err(ToolError::failed(format!(
                "{what} {} is on node `{}` ({url}), but node `{via}` sent this call here, to node `{here}`, \
                 which does not hold it; a call is forwarded once only. Check each node's `[node] url`",
                owner.id, owner.node
            )));
        }
        match forwarder.forward(tool_of(kind), owner, ctx, params).await {
            Ok(out) => Ok(out),
            Err(why) => Err(ToolError::failed(format!(
                "{what} {} is on node `{}` ({url}); the call was sent there and failed: {why}",
                owner.id, owner.node
            ))),
        }
    }
}

/// What else can be done from any node about `kind`.
fn meanwhile(kind: Local, id: &str) -> String {
    match kind {
        Local::Process => {
            format!(" Its output so far can be read from any node with {{\"action\": \"log\", \"id\": \"{id}\"}}")
        }
        Local::BrowserSession => {
            " A new session can be started on this node with {\"action\": \"start\"} (without `session`)".to_owned()
        }
    }
}

/// Something whose node gave no URL.
fn no_url(kind: Local, owner: &LocalOwner, here: &str) -> String {
    let (what, id) = (kind.noun(), &owner.id);
    format!(
        "{what} {id} is on node `{}`, not on this node (`{here}`): a {what} stays on the node that started it, and \
         that node gave no URL (`[node] url`). Send the call to that node.{}",
        owner.node,
        meanwhile(kind, id)
    )
}

/// Something whose node answers, with no forwarder to send the call there.
fn up(kind: Local, owner: &LocalOwner, url: &str, here: &str) -> String {
    let (what, id) = (kind.noun(), &owner.id);
    format!(
        "{what} {id} is on node `{}` ({url}), not on this node (`{here}`): a {what} stays on the node that started \
         it, and this node does not forward calls. That node answers: send this call to {url}.{}",
        owner.node,
        meanwhile(kind, id)
    )
}

/// Something whose node does not answer.
fn down(kind: Local, owner: &LocalOwner, url: &str, why: &str) -> String {
    let (what, id) = (kind.noun(), &owner.id);
    format!(
        "{what} {id} is on node `{}` ({url}), which is down or unreachable ({why}): a {what} stays on the node that \
         started it, so it can only be reached there once that node is back.{}",
        owner.node,
        meanwhile(kind, id)
    )
}

/// Whether the node at `url` takes a TCP connection within [`PROBE_WITHIN`].
async fn probe(url: &str) -> Result<(), String> {
    let parsed = url::Url::parse(url).map_err(|e| format!("its URL does not parse: {e}"))?;
    if !matches!(parsed.scheme(), "http" | "https") {
        return Err(format!("its URL is not http(s): {}", parsed.scheme()));
    }
    let host = parsed.host_str().ok_or("its URL names no host")?.trim_start_matches('[').trim_end_matches(']');
    let port = parsed.port_or_known_default().ok_or("its URL names no port")?;
    let target = format!("{host}:{port}");
    let host = host.to_owned();
    // A plain connect on a blocking thread (the name may need resolving), bounded as a whole.
    let connect = tokio::task::spawn_blocking(move || {
        use std::net::ToSocketAddrs;
        let addrs = (host.as_str(), port).to_socket_addrs()?;
        let mut last = std::io::Error::new(std::io::ErrorKind::NotFound, "the name resolves to no address");
        for addr in addrs {
            match std::net::TcpStream::connect_timeout(&addr, PROBE_WITHIN) {
                Ok(_) => return Ok(()),
                Err(e) => last = e,
            }
        }
        Err(last)
    });
    match tokio::time::timeout(PROBE_WITHIN, connect).await {
        Ok(Ok(Ok(()))) => Ok(()),
        Ok(Ok(Err(e))) => Err(format!("connecting to {target}: {e}")),
        Ok(Err(e)) => Err(format!("connecting to {target}: {e}")),
        Err(_) => Err(format!("no connection to {target} within {} s", PROBE_WITHIN.as_secs())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_node_that_does_not_listen_is_down_and_one_that_listens_answers() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        assert_eq!(probe(&format!("http://127.0.0.1:{port}/mcp")).await, Ok(()));
        drop(listener);
        let down = probe(&format!("http://127.0.0.1:{port}/mcp")).await.unwrap_err();
        assert!(down.contains(&format!("127.0.0.1:{port}")), "{down}");
        assert!(probe("file:///etc/passwd").await.unwrap_err().contains("not http(s)"));
        assert!(probe("not a url").await.unwrap_err().contains("does not parse"));
    }

    #[test]
    fn a_command_is_kept_with_its_secrets_redacted() {
        let kept = shown_command("GITHUB_TOKEN=ghp_FAKEaB3dE5fG7hJ9kL1mN3pQ5rS7tU9vW1xY ./deploy.sh");
        assert_eq!(kept, "GITHUB_TOKEN=[REDACTED:github-pat-classic] ./deploy.sh");
        assert_eq!(shown_command(&"x".repeat(2000)).len(), 500);
    }
}
