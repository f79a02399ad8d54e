//! WASM tools through the gate: installed components are loaded into the registry and every
//! call passes the whole pipeline (validation against the declared schema, untrusted output);
//! `tools.invoke` calls back through `Gate::call`; a changed file is not loaded; `tool_install`
//! installs what a person approved.
#![allow(clippy::unwrap_used)] // tests fail loudly on purpose

use std::sync::Arc;

use serde_json::json;
use toolgate::Gate;
use toolgate::core::ToolError;
use toolgate::wasm::Capabilities;
use toolgate_testkit::wasm::Guest;

async fn install(ws: &std::path::Path, guest: &Guest<'_>, name: &str, caps: &str) {
    let file = ws.join(format!("{name}.wasm"));
    std::fs::write(&file, guest.component()).expect("write component");
    let installer = toolgate::wasm::installer(ws).expect("installer");
    let caps = Capabilities::from_json(caps).expect("caps");
    installer.install(&file, Some(name), caps).await.expect("install");
}

fn gate(ws: &std::path::Path) -> Arc<Gate> {
    Arc::new(Gate::builder(ws).build().expect("gate"))
}

#[tokio::test]
async fn an_installed_component_runs_through_the_pipeline() {
    let dir = tempfile::tempdir().expect("tempdir");
    install(dir.path(), &Guest::default(), "echo", "{}").await;
    let gate = gate(dir.path());
    assert!(toolgate::wasm::load_tools_from(&gate, None).await.failed.is_empty());
    let ctx = gate.context();
    let out = gate.call(&ctx, "wasm__echo", json!({"text": "hi"})).await.expect("call");
    let text = out.text_content();
    assert!(text.contains(r#"{"text":"hi"}"#), "{text}");
    // Untrusted output: wrapped in the boundary.
    assert!(text.contains("<tool_output"), "{text}");
    // The schema the component declared is enforced before the guest runs.
    let err = gate.call(&ctx, "wasm__echo", json!({"nope": 1})).await.expect_err("invalid");
    assert!(matches!(err, ToolError::InvalidParams { .. }), "{err}");
    let err = gate.call(&ctx, "wasm__echo", json!({"text": 5})).await.expect_err("invalid");
    assert!(matches!(err, ToolError::InvalidParams { .. }), "{err}");
    // The only tools about WASM are the loaded ones (installing is `tool_install`, with a
    // person's approval, or the CLI).
    let names: Vec<String> = gate.registry().all().iter().map(|t| t.tool.spec().name.clone()).collect();
    assert_eq!(names.iter().filter(|n| n.contains("wasm")).collect::<Vec<_>>(), ["wasm__echo"]);
}

#[tokio::test]
async fn a_guest_calls_tools_through_the_gate_by_alias() {
    let dir = tempfile::tempdir().expect("tempdir");
    let params = r#"{\"message\":\"from wasm\"}"#;
    let extra = format!(r#"(data (i32.const 3000) "say") (data (i32.const 3100) "{params}")"#);
    let execute = format!(
        "(call $invoke (i32.const 3000) (i32.const 3) (i32.const 3100) (i32.const {})) (i32.const 512)",
        params.replace('\\', "").len()
    );
    let guest = Guest {
        name: "caller",
        schema: r#"{"type":"object"}"#,
        imports: r#"(import "toolgate:tool/tools@0.1.0" "invoke" (func $invoke_raw (param i32 i32 i32 i32 i32)))"#,
        extra: &format!(
            "{extra} (func $invoke (param i32 i32 i32 i32) (call $invoke_raw (local.get 0) (local.get 1) (local.get 2) (local.get 3) (i32.const 512)))"
        ),
        execute: &execute,
        ..Guest::default()
    };
    install(dir.path(), &guest, "caller", r#"{"tools": {"aliases": {"say": "echo"}}}"#).await;
    // A tool that calls tools asks first.
    let strict = gate(dir.path());
    assert!(toolgate::wasm::load_tools_from(&strict, None).await.failed.is_empty());
    let err = strict.call(&strict.context(), "wasm__caller", json!({})).await.expect_err("asks");
    assert!(matches!(err, ToolError::NeedsApproval { .. }), "{err}");

    let mut config = toolgate::config::Config::default();
    config.approval.mode = toolgate::config::ApprovalMode::Never;
    let gate = Arc::new(Gate::builder(dir.path()).config(config).build().expect("gate"));
    assert!(toolgate::wasm::load_tools_from(&gate, None).await.failed.is_empty());
    let out = gate.call(&gate.context(), "wasm__caller", json!({})).await.expect("call");
    assert!(out.text_content().contains("from wasm"), "{}", out.text_content());
}

#[tokio::test]
async fn a_changed_file_is_not_loaded() {
    let dir = tempfile::tempdir().expect("tempdir");
    install(dir.path(), &Guest::default(), "echo", "{}").await;
    let file = dir.path().join(".toolgate/tools/echo.wasm");
    let mut bytes = std::fs::read(&file).expect("read");
    bytes.push(0);
    std::fs::write(&file, bytes).expect("tamper");
    let gate = gate(dir.path());
    let failed = toolgate::wasm::load_tools_from(&gate, None).await.failed;
    assert_eq!(failed.len(), 1);
    assert!(failed[0].1.to_string().contains("changed since it was installed"), "{}", failed[0].1);
    let err = gate.call(&gate.context(), "wasm__echo", json!({"text": "x"})).await.expect_err("not loaded");
    assert!(matches!(err, ToolError::UnknownTool { .. }), "{err}");
    // `tool_list` shows it, with why.
    let list = gate.call(&gate.context(), "tool_list", json!({"kind": "wasm"})).await.expect("tool_list");
    let text = list.text_content();
    assert!(text.contains("wasm__echo [not loaded: ") && text.contains("changed since it was installed"), "{text}");
    let rows = &list.meta.expect("the rows for programs")["tools"];
    assert_eq!(rows[0]["name"], "wasm__echo", "{rows}");
}

#[tokio::test]
async fn user_tools_load_everywhere_and_the_workspace_overrides_them() {
    let user = tempfile::tempdir().expect("tempdir");
    let installer = toolgate::wasm::user_installer(user.path()).expect("user installer");
    for guest in
        [Guest { description: "The user's echo.", ..Guest::default() }, Guest { name: "shout", ..Guest::default() }]
    {
        let file = user.path().join(format!("{}.wasm", guest.name));
        std::fs::write(&file, guest.component()).expect("write component");
        installer.install(&file, None, Capabilities::none()).await.expect("install");
    }
    assert!(user.path().join("tools/shout.wasm").is_file() && user.path().join("state.db").is_file());

    // A workspace without tools of its own gets the user's.
    let plain = tempfile::tempdir().expect("tempdir");
    let gate_plain = gate(plain.path());
    let report = toolgate::wasm::load_tools_from(&gate_plain, Some(user.path())).await;
    assert!(report.failed.is_empty() && report.warnings.is_empty(), "{report:?}");
    let echo = gate_plain.registry().resolve("wasm__echo").expect("the user's echo");
    assert_eq!(echo.tool.spec().description, "The user's echo.");

    // A workspace tool of the same name wins, with a warning; the others still load.
    let dir = tempfile::tempdir().expect("tempdir");
    let mine = Guest { description: "The workspace's echo.", ..Guest::default() };
    install(dir.path(), &mine, "echo", "{}").await;
    let gate = gate(dir.path());
    let report = toolgate::wasm::load_tools_from(&gate, Some(user.path())).await;
    assert!(report.failed.is_empty(), "{:?}", report.failed);
    assert_eq!(report.warnings.len(), 1, "{:?}", report.warnings);
    assert!(report.warnings[0].contains("`wasm__echo` replaces the user's tool"), "{}", report.warnings[0]);
    let echo = gate.registry().resolve("wasm__echo").expect("echo");
    assert_eq!(echo.tool.spec().description, "The workspace's echo.");
    let out = gate.call(&gate.context(), "wasm__shout", json!({"text": "from the user"})).await.expect("user tool");
    assert!(out.text_content().contains("from the user"), "{}", out.text_content());

    // The user's files are checked like the workspace's: a changed one is not loaded.
    let file = user.path().join("tools/shout.wasm");
    let mut bytes = std::fs::read(&file).expect("read");
    bytes.push(0);
    std::fs::write(&file, bytes).expect("tamper");
    let gate = self::gate(plain.path());
    let report = toolgate::wasm::load_tools_from(&gate, Some(user.path())).await;
    assert_eq!(report.failed.len(), 1, "{report:?}");
    assert!(report.failed[0].1.to_string().contains("changed since it was installed"), "{:?}", report.failed);
    assert!(gate.registry().resolve("wasm__shout").is_none() && gate.registry().resolve("wasm__echo").is_some());
}

mod http;

mod cli;

mod mcp;

use crate::support::hooks;

/// Answers every approval request with `answer`, keeping the requests; with `swap`, replaces
/// the component file while the person is being asked.
#[derive(Debug)]
struct Person {
    answer: toolgate::ApprovalAnswer,
    asked: std::sync::Mutex<Vec<toolgate::ApprovalRequest>>,
    swap: Option<(std::path::PathBuf, Vec<u8>)>,
}

#[async_trait::async_trait]
impl toolgate::Approver for Person {
    async fn ask(&self, request: &toolgate::ApprovalRequest) -> Option<toolgate::ApprovalAnswer> {
        self.asked.lock().unwrap().push(request.clone());
        if let Some((file, bytes)) = &self.swap {
            std::fs::write(file, bytes).unwrap();
        }
        Some(self.answer.clone())
    }
}

fn person(swap: Option<(std::path::PathBuf, Vec<u8>)>) -> Arc<Person> {
    Arc::new(Person { answer: toolgate::ApprovalAnswer::AllowOnce, asked: Default::default(), swap })
}

/// A gate over `ws` with `toml` as its `toolgate.toml`, asking `approver`.
fn builder_asking(ws: &std::path::Path, toml: &str, approver: Arc<Person>) -> toolgate::GateBuilder {
    std::fs::write(ws.join("toolgate.toml"), toml).unwrap();
    let sources = toolgate::config::ConfigSources {
        workspace_file: Some(ws.join("toolgate.toml")),
        ..toolgate::config::ConfigSources::default()
    };
    let config = sources.load(None).unwrap();
    Gate::builder(ws).config(config).approver(approver)
}

fn gate_asking(ws: &std::path::Path, toml: &str, approver: Arc<Person>) -> Arc<Gate> {
    Arc::new(builder_asking(ws, toml, approver).build().expect("gate"))
}

/// [`gate_asking`] with the default configuration, whose hook writes `content` to `file` after
/// the gate's checks, before the tool runs.
fn gate_writing_before_run(
    ws: &std::path::Path,
    approver: Arc<Person>,
    file: &std::path::Path,
    content: &'static str,
) -> Arc<Gate> {
    let hook = Arc::new(hooks::WritesBeforeRunning(file.to_path_buf(), content));
    Arc::new(builder_asking(ws, "", approver).hook(hook).build().expect("gate"))
}

/// `tool_install` of a component in the workspace: the person sees its hash and the grants of
/// its sidecar file, the tool is callable at once, and `tool_remove` takes it out.
#[tokio::test]
async fn tool_install_installs_a_component_a_person_approved_and_tool_remove_removes_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    let bytes = Guest::default().component();
    std::fs::create_dir_all(dir.path().join("components")).unwrap();
    std::fs::write(dir.path().join("components/echo.wasm"), &bytes).unwrap();
    const GRANTS: &str =
        r#"{"http": {"allow": [{"host": "api.example.com", "path_prefix": "/v1/", "methods": ["GET"]}]}}"#;
    let sidecar = dir.path().join("components/echo.capabilities.json");
    std::fs::write(&sidecar, GRANTS).unwrap();
    let approver = person(None);
    let gate = gate_asking(dir.path(), "", approver.clone());
    toolgate::wasm::load_tools_from(&gate, None).await;
    let ctx = gate.context();
    let install = json!({"name": "echo", "path": "components/echo.wasm"});
    let out = gate.call(&ctx, "tool_install", install.clone()).await.expect("install");
    assert!(out.text_content().contains("installed `wasm__echo`") && out.text_content().contains("callable now"));
    let subject = approver.asked.lock().unwrap()[0].subject.clone().unwrap();
    let hash = toolgate_wasm::component_hash(&bytes);
    assert!(subject.contains(&hash[..16]) && subject.contains("wasm__echo"), "{subject}");
    assert!(subject.contains("api.example.com"), "the grants are shown: {subject}");
    let echoed = gate.call(&ctx, "wasm__echo", json!({"text": "hi"})).await.expect("call");
    assert!(echoed.text_content().contains(r#"{"text":"hi"}"#));
    // Installed as the CLI would: the manifest pins the hash and the grants.
    let installed = toolgate::wasm::installer(dir.path()).unwrap().get("echo").unwrap();
    assert_eq!(installed.hash, hash);
    assert!(installed.capabilities.http.is_some());
    // Again without `replace`: refused.
    let err = gate.call(&ctx, "tool_install", install.clone()).await.expect_err("installed already");
    assert!(err.to_string().contains("pass `replace: true`"), "{err}");
    // With `replace`, the person sees what is replaced.
    let mut again = install.clone();
    again["replace"] = json!(true);
    gate.call(&ctx, "tool_install", again).await.expect("replace");
    let replaced = approver.asked.lock().unwrap().last().unwrap().subject.clone().unwrap();
    assert!(replaced.contains(&format!("replacing `wasm__echo` (BLAKE3 {hash}")), "{replaced}");
    // Removed (asked too): the tool is gone at once.
    gate.call(&ctx, "tool_remove", json!({"name": "wasm__echo"})).await.expect("remove");
    assert!(
        approver.asked.lock().unwrap().last().unwrap().subject.as_deref().unwrap().contains("remove the WASM tool")
    );
    let err = gate.call(&ctx, "wasm__echo", json!({"text": "x"})).await.expect_err("removed");
    assert!(matches!(err, ToolError::UnknownTool { .. }), "{err}");
    assert!(toolgate::wasm::installer(dir.path()).unwrap().get("echo").is_err());
    // A context that brings the approved subject along (a parent call's, a caller's) does not
    // stand for an approval: the sidecar cannot be read when the gate checks the call (no one
    // is asked), then is what was approved before.
    std::fs::write(&sidecar, "{ broken").unwrap();
    let unasked = person(None);
    let gate = gate_writing_before_run(dir.path(), unasked.clone(), &sidecar, GRANTS);
    let mut forged = gate.context();
    forged.approval_subject = Some(subject);
    let err = gate.call(&forged, "tool_install", install).await.expect_err("not approved");
    assert!(err.to_string().contains("changed after the approval request"), "{err}");
    assert!(unasked.asked.lock().unwrap().is_empty());
    assert!(toolgate::wasm::installer(dir.path()).unwrap().get("echo").is_err(), "nothing installed");
}

/// What the person approved is what gets installed, and no one approving means no install.
#[tokio::test]
async fn tool_install_refuses_a_swapped_file_and_installs_nothing_unasked() {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::create_dir_all(dir.path().join("components")).unwrap();
    let file = dir.path().join("components/echo.wasm");
    std::fs::write(&file, Guest::default().component()).unwrap();
    let other = Guest { description: "Something else entirely.", ..Guest::default() }.component();
    let install = json!({"name": "echo", "path": "components/echo.wasm"});
    // The file is replaced while the person looks at the request.
    let gate = gate_asking(dir.path(), "", person(Some((file.clone(), other))));
    let err = gate.call(&gate.context(), "tool_install", install.clone()).await.expect_err("swapped");
    assert!(err.to_string().contains("changed after the approval request"), "{err}");
    assert!(toolgate::wasm::installer(dir.path()).unwrap().get("echo").is_err(), "nothing installed");
    // `[approval] mode = "never"`: no person would see the grants, so it is refused.
    let approver = person(None);
    let gate = gate_asking(dir.path(), "[approval]\nmode = \"never\"\n", approver.clone());
    let err = gate.call(&gate.context(), "tool_install", install.clone()).await.expect_err("no person");
    assert!(err.to_string().contains("toolgate wasm install components/echo.wasm --name echo"), "{err}");
    assert!(approver.asked.lock().unwrap().is_empty());
    // Capabilities that could not be read when the gate checked the call (so no one was asked)
    // and can when it runs: nothing installed.
    let sidecar = dir.path().join("components/echo.capabilities.json");
    std::fs::write(&sidecar, "{ not json").unwrap();
    let grants = r#"{"http": {"allow": [{"host": "evil.example.com"}]}}"#;
    let approver = person(None);
    let gate = gate_writing_before_run(dir.path(), approver.clone(), &sidecar, grants);
    let err = gate.call(&gate.context(), "tool_install", install.clone()).await.expect_err("unasked");
    assert!(err.to_string().contains("changed after the approval request"), "{err}");
    assert!(approver.asked.lock().unwrap().is_empty());
    assert!(toolgate::wasm::installer(dir.path()).unwrap().get("echo").is_err(), "nothing installed");
    std::fs::remove_file(&sidecar).unwrap();
    // A FIFO in the component's place is refused, not waited on.
    let status = std::process::Command::new("mkfifo").arg(dir.path().join("components/pipe.wasm")).status().unwrap();
    assert!(status.success());
    let pipe = json!({"name": "pipe", "path": "components/pipe.wasm"});
    let gate = gate_asking(dir.path(), "", person(None));
    let err = gate.call(&gate.context(), "tool_install", pipe).await.expect_err("fifo");
    assert!(err.to_string().contains("not a file"), "{err}");
    // Outside the workspace, or not a component: refused before anyone is asked.
    for (path, want) in [("../x.wasm", "cannot find"), ("components/echo.capabilities.json", "not a `.wasm` file")] {
        let err = gate.call(&gate.context(), "tool_install", json!({"name": "x", "path": path})).await.expect_err(path);
        assert!(err.to_string().contains(want), "{path}: {err}");
    }
}
