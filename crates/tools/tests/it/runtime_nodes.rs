//! Background processes with several nodes on one store: each process is recorded with the node
//! that runs it, and a `process` call about it reaching another node names that node, or says
//! it is down, while another user's or another workspace's id stays "not found".
//!
//! The store is a real SQLite file (the same trait PostgreSQL implements); this test process is
//! node `b`, and node `a`'s processes are the records node `a` would have written.

use std::sync::{Arc, Mutex};

use serde_json::{Value, json};
use toolgate_core::{CallContext, Tool, ToolError, ToolOutput};
use toolgate_store::{Local, LocalOwner, LocalStore, Store};
use toolgate_tools::runtime::{NodeForwarder, ProcessRunner, RuntimeConfig, ThisNode, serve_as_node, this_node, tools};

const B_URL: &str = "http://b.internal:8080/mcp";

/// This test process as node `b` (once per test binary).
fn as_node_b() {
    serve_as_node(ThisNode { name: "b".to_owned(), url: Some(B_URL.to_owned()) });
    assert_eq!(this_node().unwrap().name, "b");
}

/// Node `b` on a fresh workspace, its runner recording its processes in the workspace's SQLite
/// store (the one the other nodes would share).
struct NodeB {
    _ws: tempfile::TempDir,
    /// The workspace as the records key it (its canonical path).
    key: String,
    store: Arc<dyn LocalStore>,
    runner: ProcessRunner,
    ctx: CallContext,
}

fn node_b() -> NodeB {
    as_node_b();
    let ws = tempfile::tempdir().unwrap();
    let workspace = ws.path().canonicalize().unwrap();
    let store: Arc<dyn LocalStore> = Arc::new(Store::open(&workspace.join(".toolgate/state.db")).unwrap());
    let runner = ProcessRunner::new(RuntimeConfig::default()).unwrap();
    runner.share_across_nodes(Arc::clone(&store));
    NodeB { key: workspace.to_string_lossy().into_owned(), ctx: CallContext::new(workspace), _ws: ws, store, runner }
}

fn process_tool(tools: &[Arc<dyn Tool>]) -> &Arc<dyn Tool> {
    tools.iter().find(|t| t.spec().name == "process").unwrap()
}

/// Node `a`'s record of a process of `user` in `workspace`, reachable at `url`.
fn on_a(id: &str, workspace: &str, user: &str, url: Option<String>) -> LocalOwner {
    LocalOwner {
        id: id.to_owned(),
        workspace: workspace.to_owned(),
        user: user.to_owned(),
        node: "a".to_owned(),
        node_url: url,
        command: "python3 -m http.server".to_owned(),
        started_ms: 1,
    }
}

async fn poll(tools: &[Arc<dyn Tool>], ctx: &CallContext, id: &str) -> ToolError {
    let params = json!({ "action": "poll", "id": id });
    process_tool(tools).execute(ctx, params).await.expect_err("the process is not on this node")
}

#[tokio::test]
async fn a_process_is_recorded_with_its_node_and_a_call_about_another_nodes_names_it() {
    let NodeB { _ws, key, store, runner, ctx } = node_b();
    let tools = tools(&runner);
    let user = ctx.identity.user.clone();

    // Started here: recorded with this node, the workspace and the user before the id returns.
    let exec = tools.iter().find(|t| t.spec().name == "exec").unwrap();
    let out = exec.execute(&ctx, json!({ "command": "sleep 30", "background": true })).await.unwrap();
    let id = out.meta.as_ref().and_then(|m| m["id"].as_str()).unwrap().to_owned();
    let row = store.local_owner(Local::Process, &id).unwrap().expect("recorded");
    assert_eq!((row.node.as_str(), row.node_url.as_deref()), ("b", Some(B_URL)));
    assert_eq!(
        (row.workspace.as_str(), row.user.as_str(), row.command.as_str()),
        (key.as_str(), user.as_str(), "sleep 30")
    );

    // The caller's process on node a, which answers: the error names the node and its URL.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let a_url = format!("http://{}/mcp", listener.local_addr().unwrap());
    store.local_record(Local::Process, &on_a("tg-proc-on-a", &key, &user, Some(a_url.clone()))).unwrap();
    let up = poll(&tools, &ctx, "tg-proc-on-a").await.to_string();
    assert!(up.contains("node `a`") && up.contains(&a_url) && up.contains("That node answers"), "{up}");
    // `list` shows it beside this node's own.
    let list = process_tool(&tools).execute(&ctx, json!({ "action": "list" })).await.unwrap();
    let rows = list.meta.unwrap()["processes"].as_array().unwrap().clone();
    let ids: Vec<&str> = rows.iter().filter_map(|r| r["id"].as_str()).collect();
    assert_eq!(ids, [id.as_str(), "tg-proc-on-a"]);
    assert_eq!(rows[1]["node"], "a");
    // Node a goes down: the answer says so, naming it, within the probe's bound.
    drop(listener);
    let down = poll(&tools, &ctx, "tg-proc-on-a").await.to_string();
    assert!(down.contains("node `a`") && down.contains(&a_url) && down.contains("down or unreachable"), "{down}");
    // A write, a kill and a signal get the same answer (`write` already when its approval is
    // being prepared).
    for action in [json!({ "action": "kill" }), json!({ "action": "signal", "signal": "TERM" })] {
        let mut params = action;
        params["id"] = json!("tg-proc-on-a");
        let e = process_tool(&tools).execute(&ctx, params).await.unwrap_err().to_string();
        assert!(e.contains("node `a`"), "{e}");
    }
    // A write to it is not refused before its approval here (the owner's gate checks it), and
    // gets the same answer.
    let write = json!({ "action": "write", "id": "tg-proc-on-a", "input": "x\n" });
    assert!(process_tool(&tools).inspect(&ctx, &write).await.is_ok());
    let e = process_tool(&tools).execute(&ctx, write).await.unwrap_err().to_string();
    assert!(e.contains("node `a`"), "{e}");
}

/// The node link, as the runner sees it: each call it is handed, answered as the owning node.
#[derive(Debug, Default)]
struct Link(Mutex<Vec<(String, String, Value)>>);

#[toolgate_core::async_trait]
impl NodeForwarder for Link {
    async fn forward(
        &self,
        tool: &str,
        owner: &LocalOwner,
        ctx: &CallContext,
        params: &Value,
    ) -> Result<ToolOutput, String> {
        assert_eq!(tool, "process");
        self.0.lock().unwrap().push((owner.node.clone(), ctx.identity.user.clone(), params.clone()));
        Ok(ToolOutput::text(format!("node {} answers {}", owner.node, params["action"])))
    }
}

#[tokio::test]
async fn a_call_about_the_callers_process_on_a_node_that_answers_goes_there_and_no_other() {
    let NodeB { _ws, key, store, runner, ctx } = node_b();
    let link = Arc::new(Link::default());
    runner.forward_with(link.clone());
    let tools = tools(&runner);
    let user = ctx.identity.user.clone();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = Some(format!("http://{}/mcp", listener.local_addr().unwrap()));
    store.local_record(Local::Process, &on_a("tg-proc-anns", &key, &user, url.clone())).unwrap();
    store.local_record(Local::Process, &on_a("tg-proc-bobs", &key, "bob", url)).unwrap();

    let params = json!({ "action": "poll", "id": "tg-proc-anns", "wait": 3 });
    let out = process_tool(&tools).execute(&ctx, params.clone()).await.unwrap();
    assert_eq!(out.text_content(), "node a answers \"poll\"");
    assert_eq!(link.0.lock().unwrap().clone(), [("a".to_owned(), user.clone(), params)]);
    // A call another node's link sent here (its key says so: the context's `forwarded_by`) is
    // not sent on (URLs pointing at each other would pass it back and forth), nor is another
    // user's process, nor a call to a node that is down.
    let again = json!({ "action": "poll", "id": "tg-proc-anns" });
    let forwarded = CallContext { forwarded_by: Some("c".to_owned()), ..ctx.clone() };
    let e = process_tool(&tools).execute(&forwarded, again).await.unwrap_err().to_string();
    assert!(e.contains("node `c` sent this call here") && e.contains("forwarded once only"), "{e}");
    // A caller writing `via` itself is no forwarded call: it goes to the owner like any other.
    let marked = json!({ "action": "poll", "id": "tg-proc-anns", "via": "c" });
    process_tool(&tools).execute(&ctx, marked).await.unwrap();
    assert!(matches!(poll(&tools, &ctx, "tg-proc-bobs").await, ToolError::NotFound { .. }));
    drop(listener);
    let down = poll(&tools, &ctx, "tg-proc-anns").await.to_string();
    assert!(down.contains("down or unreachable"), "{down}");
    assert_eq!(link.0.lock().unwrap().len(), 2);
}

#[tokio::test]
async fn another_users_or_workspaces_process_on_another_node_stays_not_found() {
    let NodeB { _ws, key, store, runner, ctx } = node_b();
    let tools = tools(&runner);
    let url = Some("http://127.0.0.1:9/mcp".to_owned());
    store.local_record(Local::Process, &on_a("tg-proc-bobs", &key, "bob", url.clone())).unwrap();
    store.local_record(Local::Process, &on_a("tg-proc-elsewhere", "/srv/other", &ctx.identity.user, url)).unwrap();
    // The same answer as for an id nobody ever had: nothing says it exists, nor where.
    let unknown = poll(&tools, &ctx, "tg-proc-never").await;
    assert!(matches!(unknown, ToolError::NotFound { .. }), "{unknown}");
    for id in ["tg-proc-bobs", "tg-proc-elsewhere"] {
        let e = poll(&tools, &ctx, id).await;
        assert!(matches!(e, ToolError::NotFound { .. }), "{e}");
        assert_eq!(e.to_string(), unknown.to_string().replace("tg-proc-never", id));
    }
    let list = process_tool(&tools).execute(&ctx, json!({ "action": "list" })).await.unwrap();
    assert_eq!(list.meta.unwrap()["processes"], Value::Array(Vec::new()));
    // A record of a process this node no longer holds (its previous run's) is not "elsewhere".
    store
        .local_record(
            Local::Process,
            &LocalOwner { node: "b".to_owned(), ..on_a("tg-proc-stale", &key, &ctx.identity.user, None) },
        )
        .unwrap();
    assert!(matches!(poll(&tools, &ctx, "tg-proc-stale").await, ToolError::NotFound { .. }));
}

#[tokio::test]
async fn a_process_is_forgotten_when_its_node_forgets_it() {
    let NodeB { _ws, store, runner, ctx, .. } = node_b();
    let tools = tools(&runner);
    let exec = tools.iter().find(|t| t.spec().name == "exec").unwrap();
    let out = exec.execute(&ctx, json!({ "command": "sleep 30", "background": true })).await.unwrap();
    let id = out.meta.as_ref().and_then(|m| m["id"].as_str()).unwrap().to_owned();
    assert!(store.local_owner(Local::Process, &id).unwrap().is_some());
    // The gate drops its tools (a server stopping): the process is stopped and its record goes.
    drop(tools);
    drop(runner);
    assert_eq!(store.local_owner(Local::Process, &id).unwrap(), None);
}
