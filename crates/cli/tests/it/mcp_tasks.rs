//! MCP tasks (`io.modelcontextprotocol/tasks`, SEP-2663, issue 27) through the real binary,
//! driven by rmcp's client (the official Python SDK 2.3.0 does not speak tasks): a client that
//! declares the extension gets a long `exec` back as a task, polls `tasks/get` to its result,
//! cancels one (its process is gone), and meets another user's task as "not found". Over
//! Streamable HTTP with a team gateway's keys (two users, two sessions each) and over stdio.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use rmcp::ServiceExt;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, CancelTaskParams, ClientCapabilities, ClientConfig,
    GetTaskParams, GetTaskResult, Implementation, TaskPayload, TaskStatus,
};
use rmcp::service::{RoleClient, RunningService};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use serde_json::{Value, json};

const TOOLGATE: &str = env!("CARGO_BIN_EXE_toolgate");

type Client = RunningService<RoleClient, ClientConfig>;

/// A client that declares the tasks extension (`tasks: true`) or not.
fn info(tasks: bool) -> ClientConfig {
    let capabilities =
        if tasks { ClientCapabilities::builder().enable_tasks().build() } else { ClientCapabilities::default() };
    ClientConfig::new(capabilities, Implementation::new("tasks-test", "1.0"))
}

async fn over_http(url: &str, key: &str, tasks: bool) -> Client {
    // reqwest is built without a TLS provider in this workspace (plain HTTP here all the same).
    let _ = rustls::crypto::ring::default_provider().install_default();
    let config = StreamableHttpClientTransportConfig::with_uri(url).auth_header(key.to_owned());
    info(tasks).serve(StreamableHttpClientTransport::from_config(config)).await.expect("MCP handshake over HTTP")
}

async fn over_stdio(ws: &Path) -> Client {
    let mut command = tokio::process::Command::new(TOOLGATE);
    command.arg("--workspace").arg(ws).arg("serve").env("XDG_CONFIG_HOME", ws.join(".xdg")).env_remove("RUST_LOG");
    let transport = rmcp::transport::TokioChildProcess::new(command).expect("start toolgate serve");
    info(true).serve(transport).await.expect("MCP handshake over stdio")
}

fn request(name: &str, args: Value) -> CallToolRequestParams {
    CallToolRequestParams::new(name.to_owned()).with_arguments(args.as_object().cloned().unwrap_or_default())
}

/// Calls `exec` with `command`; the task's id (the call must come back as a task).
async fn start(client: &Client, command: &str) -> String {
    match client.call_tool_once(request("exec", json!({ "command": command }))).await.expect("tools/call") {
        CallToolResponse::Task(created) => {
            assert_eq!(created.task.status, TaskStatus::Working, "{created:?}");
            created.task.task_id
        }
        other => panic!("a long call to a client that accepts tasks is a task: {other:?}"),
    }
}

/// Polls `tasks/get` until the task ends (or a minute passes).
async fn settle(client: &Client, id: &str) -> GetTaskResult {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let got = client.get_task(GetTaskParams::new(id)).await.expect("tasks/get");
        if got.task.status().is_terminal() || Instant::now() > deadline {
            return got;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The `result` of a completed task.
fn result_of(got: &GetTaskResult) -> Value {
    match &got.task.payload {
        TaskPayload::Completed { result } => Value::Object(result.clone()),
        other => panic!("not completed: {other:?}"),
    }
}

/// What an `exec` result's text says between "output:" and the end of its boundary (the
/// boundary's id and the timing differ from call to call).
fn exec_output(result: &Value) -> String {
    let text = result["content"][0]["text"].as_str().unwrap_or_default();
    let after = text.split_once("output:\n").map_or("", |(_, rest)| rest);
    after.split("</tool_output").next().unwrap_or_default().to_owned()
}

/// The JSON-RPC error a refused request carries, as text.
fn refusal(e: rmcp::service::ServiceError) -> String {
    match e {
        rmcp::service::ServiceError::McpError(e) => format!("{} {}", e.code.0, e.message),
        other => panic!("not a protocol error: {other}"),
    }
}

/// Whether a process whose command line is exactly `argv` runs on this machine (the sandbox's
/// PID namespace hides nothing from the host's /proc).
fn running(argv: &[&str]) -> bool {
    let wanted: Vec<u8> = argv.iter().flat_map(|a| a.bytes().chain([0])).collect();
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(Result::ok)
        .any(|e| std::fs::read(e.path().join("cmdline")).is_ok_and(|c| c == wanted))
}

fn admin(ws: &Path, args: &[&str]) -> String {
    let out = Command::new(TOOLGATE).arg("--workspace").arg(ws).arg("admin").args(args).output().unwrap();
    assert!(out.status.success(), "admin {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    // `key create` prints the key on a line of its own.
    text.lines().find(|l| l.trim().starts_with("tg_")).map_or(text.clone(), |l| l.trim().to_owned())
}

#[tokio::test(flavor = "multi_thread")]
async fn long_calls_become_tasks_kept_as_their_users_jobs_over_http() {
    let ws = toolgate_testkit::serve::workspace();
    std::fs::write(ws.path().join("toolgate.toml"), "[gateway]\nenabled = true\n\n[approval]\nmode = \"never\"\n")
        .unwrap();
    admin(ws.path(), &["user", "add", "ann"]);
    admin(ws.path(), &["user", "add", "bob"]);
    let ann_key = admin(ws.path(), &["key", "create", "--user", "ann"]);
    let bob_key = admin(ws.path(), &["key", "create", "--user", "bob"]);
    let server = toolgate_testkit::serve::HttpServer::start_in(TOOLGATE, ws, &[]);

    let ann = over_http(&server.url, &ann_key, true).await;
    let declared = ann.peer_info().and_then(|i| i.capabilities.extensions.clone()).unwrap_or_default();
    assert!(declared.contains_key("io.modelcontextprotocol/tasks"), "the server declares tasks: {declared:?}");

    // A task's result is the result a plain call gives.
    let command = "sleep 1; printf 'same answer\\n'";
    let id = start(&ann, command).await;
    let early = ann.get_task(GetTaskParams::new(&id)).await.expect("tasks/get at once");
    assert!(!early.task.status().is_terminal() || early.task.status() == TaskStatus::Completed, "{early:?}");
    let got = settle(&ann, &id).await;
    assert_eq!(got.task.status(), TaskStatus::Completed, "{got:?}");
    let as_task = result_of(&got);
    let plain_client = over_http(&server.url, &ann_key, false).await;
    let plain: CallToolResult =
        plain_client.call_tool(request("exec", json!({ "command": command }))).await.expect("a plain call");
    let plain = serde_json::to_value(plain).unwrap();
    assert_eq!(exec_output(&as_task), "same answer\n", "{as_task}");
    assert_eq!(exec_output(&as_task), exec_output(&plain), "task {as_task}\nplain {plain}");
    assert_eq!(as_task["content"].as_array().map(Vec::len), plain["content"].as_array().map(Vec::len));
    assert_eq!(as_task["isError"], plain["isError"]);
    assert_eq!(as_task["_meta"]["io.toolgate/result"]["exit_code"], 0, "{as_task}");
    assert_eq!(
        plain["_meta"]["io.toolgate/result"].as_object().map(|m| m.keys().collect::<Vec<_>>()),
        as_task["_meta"]["io.toolgate/result"].as_object().map(|m| m.keys().collect::<Vec<_>>()),
        "the same facts for programs"
    );

    // Another session of the same user sees it; a client that does not accept tasks gets none.
    let ann2 = over_http(&server.url, &ann_key, true).await;
    assert_eq!(settle(&ann2, &id).await.task.status(), TaskStatus::Completed);
    let refused = plain_client.get_task(GetTaskParams::new(&id)).await.map(drop).map_err(refusal);
    assert!(refused.is_err(), "a client that did not declare tasks: {refused:?}");

    // Another user: "not found", like an id that never existed; nor can he cancel it.
    let bob = over_http(&server.url, &bob_key, true).await;
    let sleeper = ["sleep", "6007"];
    let running_id = start(&ann, "sleep 6007").await;
    let deadline = Instant::now() + Duration::from_secs(30);
    while !running(&sleeper) && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(running(&sleeper), "the task's command started");
    for theirs in [&id, &running_id] {
        let seen = refusal(bob.get_task(GetTaskParams::new(theirs.as_str())).await.unwrap_err());
        assert!(seen.starts_with("-32602") && seen.contains("no task"), "{seen}");
        let cancel = refusal(bob.cancel_task(CancelTaskParams::new(theirs.as_str())).await.unwrap_err());
        assert!(cancel.starts_with("-32602") && cancel.contains("no task"), "{cancel}");
    }
    assert!(running(&sleeper), "bob's cancel touched nothing");
    let never = refusal(bob.get_task(GetTaskParams::new("00000000-0000-0000-0000-000000000000")).await.unwrap_err());
    assert_eq!(never.replace("00000000-0000-0000-0000-000000000000", "ID"), {
        let theirs = refusal(bob.get_task(GetTaskParams::new(running_id.as_str())).await.unwrap_err());
        theirs.replace(&running_id, "ID")
    });

    // Bad ids are clear errors.
    for bad in ["", "nope", "../../etc/passwd", &"x".repeat(10_000)] {
        let e = refusal(ann.get_task(GetTaskParams::new(bad)).await.unwrap_err());
        assert!(e.starts_with("-32602") && e.contains("no task") && e.contains("taskId"), "{e}");
        assert!(e.len() < 400, "a hostile id is not echoed whole: {} bytes", e.len());
    }

    // Cancelling a running task kills its process; the task says cancelled.
    ann2.cancel_task(CancelTaskParams::new(&running_id)).await.expect("tasks/cancel by its owner, another session");
    let deadline = Instant::now() + Duration::from_secs(30);
    while running(&sleeper) && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(!running(&sleeper), "the cancelled task's process is gone");
    let got = settle(&ann, &running_id).await;
    assert_eq!(got.task.status(), TaskStatus::Cancelled, "{got:?}");
    // Cancelling an ended task changes nothing.
    ann.cancel_task(CancelTaskParams::new(&id)).await.expect("cancel of an ended task is acknowledged");
    assert_eq!(settle(&ann, &id).await.task.status(), TaskStatus::Completed);

    // The tasks are the user's jobs.
    let jobs = ann.call_tool(request("list_jobs", json!({"filter": "all"}))).await.expect("list_jobs");
    let text = serde_json::to_string(&jobs.content).unwrap();
    assert!(text.contains(&id) && text.contains(&running_id), "{text}");
    let theirs = bob.call_tool(request("list_jobs", json!({"filter": "all"}))).await.expect("list_jobs");
    let text = serde_json::to_string(&theirs.content).unwrap();
    assert!(!text.contains(&id) && !text.contains(&running_id), "{text}");

    // Short calls stay plain calls.
    let echo = ann.call_tool_once(request("echo", json!({"text": "hi"}))).await.expect("echo");
    assert!(matches!(echo, CallToolResponse::Complete(_)), "{echo:?}");
    for c in [ann, ann2, bob, plain_client] {
        let _ = c.cancel().await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn tasks_over_stdio() {
    let ws = toolgate_testkit::serve::workspace();
    std::fs::write(ws.path().join("toolgate.toml"), "[approval]\nmode = \"never\"\n").unwrap();
    let client = over_stdio(ws.path()).await;
    let id = start(&client, "printf 'from a task\\n'").await;
    let got = settle(&client, &id).await;
    let result = result_of(&got);
    assert_eq!(exec_output(&result), "from a task\n", "{result}");
    assert_eq!(result["isError"], false);
    // A tool error is a completed task whose result has isError, as a plain call's would.
    let id = start(&client, "exit 3").await;
    let result = result_of(&settle(&client, &id).await);
    assert_eq!(result["_meta"]["io.toolgate/result"]["exit_code"], 3, "{result}");
    let e = refusal(client.get_task(GetTaskParams::new("nope")).await.unwrap_err());
    assert!(e.starts_with("-32602") && e.contains("no task `nope`"), "{e}");
    let _ = client.cancel().await;
}

/// Whether the server `client` talks to declared the tasks extension.
fn declares_tasks(client: &Client) -> bool {
    client
        .peer_info()
        .and_then(|i| i.capabilities.extensions.clone())
        .unwrap_or_default()
        .contains_key("io.modelcontextprotocol/tasks")
}

#[tokio::test(flavor = "multi_thread")]
async fn which_tools_run_as_tasks_is_a_setting() {
    // `echo` made a task tool, `exec` not: the list is the setting, not a fixed one.
    let ws = toolgate_testkit::serve::workspace();
    std::fs::write(
        ws.path().join("toolgate.toml"),
        "[approval]\nmode = \"never\"\n\n[automation]\ntask_tools = [\"echo\"]\n",
    )
    .unwrap();
    let client = over_stdio(ws.path()).await;
    assert!(declares_tasks(&client));
    let id = match client.call_tool_once(request("echo", json!({"message": "as a task"}))).await.expect("echo") {
        CallToolResponse::Task(created) => created.task.task_id,
        other => panic!("echo is a task tool here: {other:?}"),
    };
    let result = result_of(&settle(&client, &id).await);
    assert!(result.to_string().contains("as a task"), "{result}");
    let plain = client.call_tool_once(request("exec", json!({"command": "echo plain"}))).await.expect("exec");
    assert!(matches!(plain, CallToolResponse::Complete(_)), "exec is not in task_tools: {plain:?}");
    let _ = client.cancel().await;

    // Empty: no tasks at all, and the server does not declare them.
    let ws = toolgate_testkit::serve::workspace();
    std::fs::write(ws.path().join("toolgate.toml"), "[approval]\nmode = \"never\"\n\n[automation]\ntask_tools = []\n")
        .unwrap();
    let client = over_stdio(ws.path()).await;
    assert!(!declares_tasks(&client), "no task tools, no tasks extension");
    let plain = client.call_tool_once(request("exec", json!({"command": "echo plain"}))).await.expect("exec");
    assert!(matches!(plain, CallToolResponse::Complete(_)), "{plain:?}");
    let _ = client.cancel().await;

    // A bad value is refused when the configuration is read, saying where.
    let ws = toolgate_testkit::serve::workspace();
    std::fs::write(ws.path().join("toolgate.toml"), "[automation]\ntask_tools = \"exec\"\n").unwrap();
    let out = Command::new(TOOLGATE).arg("--workspace").arg(ws.path()).args(["call", "echo", "{}"]).output().unwrap();
    let text = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && text.contains("task_tools"), "{text}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_task_tool_that_is_no_tool_is_warned_with_the_tools_there_are() {
    // A typo (`exce`) beside a real name: the server says which name is no tool and lists the
    // tools it has; the real name still runs as a task, and the typo makes nothing a task.
    let ws = toolgate_testkit::serve::workspace();
    std::fs::write(
        ws.path().join("toolgate.toml"),
        "[approval]\nmode = \"never\"\n\n[automation]\ntask_tools = [\"exce\", \"echo\"]\n",
    )
    .unwrap();
    let mut command = tokio::process::Command::new(TOOLGATE);
    command.arg("--workspace").arg(ws.path()).arg("serve").env("XDG_CONFIG_HOME", ws.path().join(".xdg"));
    command.env_remove("RUST_LOG").env_remove("TOOLGATE_LOG");
    let (transport, stderr) = rmcp::transport::TokioChildProcess::builder(command)
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("start toolgate serve");
    let client = info(true).serve(transport).await.expect("MCP handshake over stdio");
    assert!(declares_tasks(&client));
    let id = match client.call_tool_once(request("echo", json!({"message": "still a task"}))).await.expect("echo") {
        CallToolResponse::Task(created) => created.task.task_id,
        other => panic!("echo is listed, so it is a task: {other:?}"),
    };
    assert!(result_of(&settle(&client, &id).await).to_string().contains("still a task"));
    let plain = client.call_tool_once(request("exec", json!({"command": "echo plain"}))).await.expect("exec");
    assert!(matches!(plain, CallToolResponse::Complete(_)), "exec is not listed (only `exce`): {plain:?}");
    let _ = client.cancel().await;

    // The server has ended (its stdin closed): its stderr is whole.
    let mut log = String::new();
    tokio::io::AsyncReadExt::read_to_string(&mut stderr.expect("stderr piped"), &mut log).await.unwrap();
    let warning = log.lines().find(|l| l.contains("task_tools names `exce`")).unwrap_or_else(|| panic!("{log}"));
    assert!(warning.contains("WARN") && warning.contains("no tool of this gate"), "{warning}");
    let (_, known) = warning.split_once("The tools now: ").unwrap_or_else(|| panic!("{warning}"));
    let known: Vec<&str> = known.trim().split(", ").collect();
    for tool in ["echo", "exec", "create_job", "build_software"] {
        assert!(known.contains(&tool), "{tool} is a tool here: {known:?}");
    }
    assert!(!known.contains(&"exce"), "{known:?}");
    assert!(!log.contains("task_tools names `echo`"), "echo is a tool: {log}");
}

#[tokio::test(flavor = "multi_thread")]
async fn per_user_gateway_workspaces_offer_tasks_kept_in_each_users_workspace() {
    let ws = toolgate_testkit::serve::workspace();
    std::fs::write(
        ws.path().join("toolgate.toml"),
        "[gateway]\nenabled = true\nworkspaces = \"users\"\n\n[approval]\nmode = \"never\"\n",
    )
    .unwrap();
    admin(ws.path(), &["user", "add", "ann"]);
    admin(ws.path(), &["user", "add", "bob"]);
    let ann_key = admin(ws.path(), &["key", "create", "--user", "ann"]);
    let bob_key = admin(ws.path(), &["key", "create", "--user", "bob"]);
    let server = toolgate_testkit::serve::HttpServer::start_in(TOOLGATE, ws, &[]);

    let ann = over_http(&server.url, &ann_key, true).await;
    assert!(declares_tasks(&ann), "a per-user gateway declares tasks");
    // The task runs in ann's own workspace: `pwd` is there, and the file lands there.
    let id = start(&ann, "pwd; echo mine > task.txt").await;
    let result = result_of(&settle(&ann, &id).await);
    let users = server.ws.path().join("users");
    let ann_ws = users.join("ann").canonicalize().unwrap();
    assert_eq!(exec_output(&result).trim(), ann_ws.display().to_string(), "{result}");
    assert_eq!(std::fs::read_to_string(ann_ws.join("task.txt")).unwrap(), "mine\n");
    // Its record is a job in ann's state database, not the gateway's nor bob's.
    let ann_db = toolgate::store::Store::open(&ann_ws.join(".toolgate/state.db")).unwrap();
    let job = toolgate::store::JobStore::job(&ann_db, &id).unwrap().expect("the task's job in ann's workspace");
    assert_eq!((job.user.as_str(), job.origin.as_deref()), ("ann", Some("mcp-task")));

    // Bob: not found, whether he asks or cancels; his own tasks work in his workspace.
    let bob = over_http(&server.url, &bob_key, true).await;
    let seen = refusal(bob.get_task(GetTaskParams::new(id.as_str())).await.unwrap_err());
    assert!(seen.starts_with("-32602") && seen.contains("no task"), "{seen}");
    let cancel = refusal(bob.cancel_task(CancelTaskParams::new(id.as_str())).await.unwrap_err());
    assert!(cancel.starts_with("-32602") && cancel.contains("no task"), "{cancel}");
    let his = start(&bob, "cat ../ann/task.txt 2>&1; echo bobs").await;
    let result = result_of(&settle(&bob, &his).await);
    let out = exec_output(&result);
    assert!(out.contains("bobs") && !out.contains("mine"), "bob's task cannot read ann's workspace: {out}");
    let bob_db = toolgate::store::Store::open(&users.join("bob/.toolgate/state.db")).unwrap();
    assert!(toolgate::store::JobStore::job(&bob_db, &id).unwrap().is_none());
    assert!(toolgate::store::JobStore::job(&bob_db, &his).unwrap().is_some());
    // Another session of ann's finds her task.
    let ann2 = over_http(&server.url, &ann_key, true).await;
    assert_eq!(settle(&ann2, &id).await.task.status(), TaskStatus::Completed);
    for c in [ann, ann2, bob] {
        let _ = c.cancel().await;
    }
}
