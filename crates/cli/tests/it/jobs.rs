//! Background jobs through the real binary: a command job created over MCP (stdio) in a
//! `toolgate serve`, the server killed with SIGKILL while the job runs, then a new server on the
//! same workspace: the job is `failed: interrupted` with an event, its command did not outlive
//! the first server, and it was never run again.

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use toolgate::store::{JOB_INTERRUPTED, JobStore, Store};

const TOOLGATE: &str = env!("CARGO_BIN_EXE_toolgate");

/// `toolgate serve` over stdio on `ws`, initialized.
struct Server {
    child: Child,
    stdin: std::process::ChildStdin,
    lines: std::io::Lines<BufReader<std::process::ChildStdout>>,
}

impl Server {
    fn start(ws: &Path) -> Server {
        let mut child = Command::new(TOOLGATE)
            .arg("--workspace")
            .arg(ws)
            .arg("serve")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("start toolgate serve");
        let stdin = child.stdin.take().unwrap();
        let lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let mut s = Server { child, stdin, lines };
        s.request(
            1,
            "initialize",
            json!({"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "jobs-test", "version": "0"}}),
        );
        writeln!(s.stdin, r#"{{"jsonrpc":"2.0","method":"notifications/initialized"}}"#).unwrap();
        s
    }

    fn request(&mut self, id: u64, method: &str, params: Value) -> Value {
        let msg = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        writeln!(self.stdin, "{msg}").unwrap();
        loop {
            let line = self.lines.next().expect("an answer").unwrap();
            let v: Value = serde_json::from_str(&line).unwrap();
            if v["id"] == id {
                return v;
            }
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn job(ws: &Path, id: &str) -> toolgate::store::JobRecord {
    Store::open(&ws.join(".toolgate/state.db")).unwrap().job(id).unwrap().expect("the job")
}

fn wait_until(what: &str, mut ok: impl FnMut() -> bool) {
    let t = Instant::now();
    while !ok() {
        assert!(t.elapsed() < Duration::from_secs(30), "waited 30 s for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn processes_with(marker: &str) -> usize {
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter(|e| {
            std::fs::read(e.path().join("cmdline"))
                .is_ok_and(|c| String::from_utf8_lossy(&c).replace('\0', " ").contains(marker))
        })
        .count()
}

#[test]
fn a_job_running_when_serve_is_killed_is_failed_interrupted_after_restart_and_never_rerun() {
    let ws = tempfile::tempdir().unwrap();
    // A short lease so the restart need not wait 30 s; approvals off (the command is a sleep).
    std::fs::write(
        ws.path().join("toolgate.toml"),
        "[approval]\nmode = \"never\"\n\n[automation.jobs]\nlease_secs = 1\n",
    )
    .unwrap();
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().subsec_nanos();
    let marker = format!("1000.{}{nanos:09}", std::process::id());
    let mut server = Server::start(ws.path());
    let answer = server.request(
        2,
        "tools/call",
        json!({"name": "create_job", "arguments": {"title": "long", "mode": "command", "description": format!("sleep {marker}")}}),
    );
    let result = &answer["result"];
    assert_ne!(result["isError"], true, "{answer}");
    let id = result["structuredContent"]["job_id"]
        .as_str()
        .map(str::to_owned)
        .or_else(|| {
            let text = result["content"][0]["text"].as_str()?;
            let start = text.find("\"job_id\": \"")? + 11;
            Some(text[start..start + 36].to_owned())
        })
        .unwrap_or_else(|| panic!("no job id in {answer}"));
    wait_until("the job to run its command", || job(ws.path(), &id).state == "running" && processes_with(&marker) > 0);

    // SIGKILL: no chance to end the job or release its lease.
    drop(server);
    wait_until("the job's command to die with the server", || processes_with(&marker) == 0);
    assert_eq!(job(ws.path(), &id).state, "running", "nothing ended the job yet");

    // A new server sweeps at start (and every lease): the lease lapsed, the job is interrupted.
    std::thread::sleep(Duration::from_millis(1_100));
    let second = Server::start(ws.path());
    wait_until("the restarted server to end the job", || job(ws.path(), &id).state != "running");
    let j = job(ws.path(), &id);
    assert_eq!((j.state.as_str(), j.error.as_deref()), ("failed", Some(JOB_INTERRUPTED)), "{j:?}");
    let store = Store::open(&ws.path().join(".toolgate/state.db")).unwrap();
    let events = store.job_events(&id, 0, 100).unwrap();
    let states: Vec<&str> = events.iter().filter(|e| e.kind == "state").map(|e| e.text.as_str()).collect();
    assert_eq!(states.len(), 3, "{states:?}");
    assert_eq!(&states[..2], ["queued", "running"]);
    assert!(states[2].starts_with("failed: interrupted"), "{states:?}");
    // Never run again: no new command, and the record keeps its single start.
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(processes_with(&marker), 0, "the job was run again");
    assert_eq!(job(ws.path(), &id).started_ms, j.started_ms);
    // The CLI reads the same record (same user).
    let out = Command::new(TOOLGATE)
        .arg("--workspace")
        .arg(ws.path())
        .args(["call", "job_status", &json!({"job_id": &id[..8]}).to_string()])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success() && text.contains("failed: interrupted"), "{text}");
    drop(second);
}

/// `toolgate call TOOL PARAMS --json` on `ws`: the structured result.
fn call(ws: &Path, tool: &str, params: Value) -> Value {
    let out = Command::new(TOOLGATE)
        .arg("--workspace")
        .arg(ws)
        .args(["call", tool, &params.to_string(), "--json"])
        .output()
        .unwrap();
    let v: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|_| panic!("toolgate call {tool}: {}", String::from_utf8_lossy(&out.stderr)));
    v.get("structured").cloned().unwrap_or(v)
}

#[test]
fn a_claude_code_job_runs_the_real_claude_cli_in_the_sandbox() {
    // The Claude Code CLI from `cargo xtask deps`. No account is signed in here, so it runs and
    // refuses (`Not logged in`): the job fails with its words, from inside the sandbox.
    let claude = toolgate_testkit::npm::peer("@anthropic-ai/claude-code/bin/claude.exe");
    let package = claude.parent().unwrap().parent().unwrap().canonicalize().unwrap();
    let ws = tempfile::tempdir().unwrap();
    let config = format!(
        "[approval]\nmode = \"never\"\n\n[runtime.sandbox]\nextra_readable = [{:?}]\n\n[automation.jobs]\nclaude_bin = {:?}\n",
        package.display().to_string(),
        claude.canonicalize().unwrap().display().to_string()
    );
    std::fs::write(ws.path().join("toolgate.toml"), config).unwrap();
    let v = call(
        ws.path(),
        "create_job",
        json!({"title": "cc", "mode": "claude_code", "description": "say hi", "wait": true}),
    );
    assert_eq!(v["state"], "failed", "{v}");
    let error = v["error"].as_str().unwrap();
    assert!(error.contains("exited with code") && error.contains("sandboxed ("), "{error}");
    assert!(!error.contains("Permission denied"), "the CLI ran: {error}");
    // Without it, the job is refused before anything is stored.
    std::fs::write(ws.path().join("toolgate.toml"), "[automation.jobs]\nclaude_bin = \"/nonexistent/claude\"\n")
        .unwrap();
    let out = Command::new(TOOLGATE)
        .arg("--workspace")
        .arg(ws.path())
        .args(["call", "create_job", r#"{"title":"cc","mode":"claude_code","description":"x"}"#])
        .output()
        .unwrap();
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(!out.status.success() && text.contains("not installed"), "{text}");
}

/// A job created by the one-shot CLI is left queued without a lease (it would end with the CLI),
/// and the result says whether a server is there to run it; a `toolgate serve` started later
/// claims it and runs it, and with two servers on the workspace each queued job runs once.
#[test]
fn a_job_queued_by_the_cli_is_run_once_by_a_toolgate_serve_on_the_workspace() {
    let ws = tempfile::tempdir().unwrap();
    std::fs::write(ws.path().join("toolgate.toml"), "[approval]\nmode = \"never\"\n").unwrap();
    let create = |n: u32| {
        call(
            ws.path(),
            "create_job",
            json!({"title": format!("append {n}"), "mode": "command", "description": format!("echo ran-{n} >> runs.txt")}),
        )
    };
    let runs = || std::fs::read_to_string(ws.path().join("runs.txt")).unwrap_or_default();

    // No server: queued, and the result says nothing runs it yet.
    let first = create(1);
    let id1 = first["job_id"].as_str().unwrap_or_else(|| panic!("{first}")).to_owned();
    assert_eq!(first["state"], "queued", "{first}");
    assert_eq!(first["runs_in"], Value::Null, "{first}");
    assert!(first["note"].as_str().unwrap().contains("no toolgate server runs on this workspace"), "{first}");
    // The CLI is gone and nothing swept it: still queued, with no lease.
    let j = job(ws.path(), &id1);
    assert_eq!((j.state.as_str(), j.lease_owner.as_deref()), ("queued", None), "{j:?}");

    // A server starts: it claims the job and runs it.
    let _a = Server::start(ws.path());
    wait_until("the server to run the queued job", || job(ws.path(), &id1).state == "completed");
    assert_eq!(runs(), "ran-1\n");

    // Two servers now; each job the CLI queues runs once, by one of them.
    let _b = Server::start(ws.path());
    wait_until("both servers to announce themselves", || {
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as i64;
        Store::open(&ws.path().join(".toolgate/state.db")).unwrap().jobs_runners(now).unwrap().len() == 2
    });
    let ids: Vec<String> = (2..=6)
        .map(|n| {
            let v = create(n);
            assert_eq!(v["runs_in"], "a toolgate server on this workspace", "{v}");
            v["job_id"].as_str().unwrap().to_owned()
        })
        .collect();
    for id in &ids {
        wait_until("the servers to run the job", || job(ws.path(), id).state == "completed");
    }
    let mut lines: Vec<String> = runs().lines().map(str::to_owned).collect();
    lines.sort();
    assert_eq!(lines, ["ran-1", "ran-2", "ran-3", "ran-4", "ran-5", "ran-6"], "a job ran twice or not at all");
    let store = Store::open(&ws.path().join(".toolgate/state.db")).unwrap();
    for id in &ids {
        let kinds: Vec<String> = store.job_events(id, 0, 100).unwrap().into_iter().map(|e| e.kind).collect();
        assert_eq!(kinds.iter().filter(|k| *k == "claim").count(), 1, "{kinds:?}");
    }

    // With wait, the CLI runs the job itself and returns its end.
    let waited = call(
        ws.path(),
        "create_job",
        json!({"title": "here", "mode": "command", "description": "echo here", "wait": true}),
    );
    assert_eq!(waited["state"], "completed", "{waited}");
}

/// `toolgate` with `args` on `ws`, `stdin` fed in, run off the test's async runtime (the
/// scripted model server lives on it); its stdout, stderr and success.
async fn toolgate_async(ws: &Path, args: &[&str], stdin: &str) -> (String, String, bool) {
    use tokio::io::AsyncWriteExt;
    let mut child = tokio::process::Command::new(TOOLGATE)
        .arg("--workspace")
        .arg(ws)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut input = child.stdin.take().unwrap();
    input.write_all(stdin.as_bytes()).await.unwrap();
    drop(input);
    let out = tokio::time::timeout(Duration::from_secs(120), child.wait_with_output()).await.unwrap().unwrap();
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
        out.status.success(),
    )
}

/// Through the binary: `toolgate call create_job` with `wait` runs a sandbox job whose model
/// (the scripted server, standing in for the model only) asks for the credential with
/// `printenv CI_TOKEN` and `echo $CI_TOKEN`; the commands really get the value (its hash lands
/// in a file), and the value reaches neither the model's requests, nor the job's events or
/// result, nor the audit log. The job's calls leave their decision traces, although no server
/// forwards the gate's events in a one-shot CLI.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sandbox_job_through_the_cli_uses_a_credential_its_model_never_sees() {
    use crate::support::scripted::{Scripted, answer, call as model_call};
    let server = Scripted::start(vec![
        model_call("exec", json!({"command": "printenv CI_TOKEN"})),
        model_call(
            "exec",
            json!({"command": "echo \"token=$CI_TOKEN\"; printf %s \"$CI_TOKEN\" | sha256sum > hash.txt"}),
        ),
        answer("done: the token works"),
    ])
    .await;
    let ws = tempfile::tempdir().unwrap();
    let config = format!(
        "[approval]\nmode = \"never\"\n\n[providers.mock]\nbase_url = {:?}\n\n[agents.worker]\nprovider = \"mock\"\n\
         model = \"m\"\ndescription = \"does jobs\"\n",
        server.url
    );
    std::fs::write(ws.path().join("toolgate.toml"), config).unwrap();
    let secret = "ci-7f3a9c2e-river-lantern";
    let (_, err, ok) = toolgate_async(ws.path(), &["tools", "secret", "ci-token"], secret).await;
    assert!(ok, "storing the secret: {err}");

    let params = json!({"title": "check token", "description": "Check the CI token.", "credentials": ["ci-token"], "wait": true});
    let (out, err, ok) = toolgate_async(ws.path(), &["call", "create_job", &params.to_string(), "--json"], "").await;
    assert!(ok, "{out}\n{err}");
    assert!(!out.contains(secret) && !err.contains(secret), "{out}\n{err}");
    let v: Value = serde_json::from_str(&out).unwrap();
    let v = v.get("structured").cloned().unwrap_or(v);
    assert_eq!(v["state"], "completed", "{v}");
    assert_eq!(v["result"], "done: the token works");
    let id = v["job_id"].as_str().unwrap().to_owned();

    // The commands had the value.
    let hash = std::fs::read_to_string(ws.path().join("hash.txt")).unwrap();
    let expected = Command::new("sh").args(["-c", "printf %s \"$V\" | sha256sum"]).env("V", secret).output().unwrap();
    assert_eq!(hash, String::from_utf8(expected.stdout).unwrap());

    // The model's requests: 3, none with the value; its tool results show the redaction.
    let requests = server.requests();
    assert_eq!(requests.len(), 3, "{requests:#?}");
    for r in &requests {
        assert!(!r.to_string().contains(secret), "a model request carried the value: {r}");
    }
    // `printenv`'s bare value is the job's redaction; `token=VALUE` the gate's leak scan
    // catches first (a token assignment), so it is already redacted when the job's wrapper looks.
    let last = requests[2]["messages"].to_string();
    assert!(last.contains("output:\\n[REDACTED:CI_TOKEN]\\n"), "{last}");
    assert!(last.contains("token=[REDACTED:"), "{last}");

    // The job's events and the audit log, read from the store and through `toolgate audit`.
    let store = Store::open(&ws.path().join(".toolgate/state.db")).unwrap();
    let events = store.job_events(&id, 0, 500).unwrap();
    for e in &events {
        assert!(!e.text.contains(secret), "{e:?}");
    }
    let decisions: Vec<&str> = events.iter().filter(|e| e.kind == "decision").map(|e| e.text.as_str()).collect();
    assert_eq!(decisions.len(), 2, "each exec's decision, with no server running: {events:#?}");
    assert!(decisions.iter().all(|d| d.starts_with("exec: policy: ") && d.ends_with("-> ok")), "{decisions:?}");
    assert_eq!(events.last().map(|e| (e.kind.as_str(), e.text.as_str())), Some(("state", "completed")));
    let rows = store.audit_tail(500).unwrap();
    assert_eq!(rows.iter().filter(|r| r.tool == "exec").count(), 2, "{rows:#?}");
    for r in &rows {
        assert!(!format!("{r:?}").contains(secret), "{r:?}");
    }
    let (audit, err, ok) = toolgate_async(ws.path(), &["audit", "--json", "--tail", "200"], "").await;
    assert!(ok && audit.contains("exec"), "{audit}\n{err}");
    assert!(!audit.contains(secret), "{audit}");
    let transcript = format!(
        "{:?}",
        toolgate::store::SessionStore::session_messages(&store, v["agent_session"].as_str().unwrap(), 0).unwrap()
    );
    assert!(!transcript.contains(secret) && transcript.contains("[REDACTED:CI_TOKEN]"), "{transcript}");
}

/// A job's exec refused by policy, run by the one-shot CLI with `wait`: its decision event names
/// the rule that refused it.
#[test]
fn a_policy_refusal_in_a_cli_job_names_its_rule() {
    let ws = tempfile::tempdir().unwrap();
    std::fs::write(ws.path().join("toolgate.toml"), "[approval]\nmode = \"never\"\n\n[tools]\ndeny = [\"exec\"]\n")
        .unwrap();
    let v = call(
        ws.path(),
        "create_job",
        json!({"title": "refused", "mode": "command", "description": "echo hi", "wait": true}),
    );
    assert_eq!(v["state"], "failed", "{v}");
    let id = v["job_id"].as_str().unwrap();
    let store = Store::open(&ws.path().join(".toolgate/state.db")).unwrap();
    let events = store.job_events(id, 0, 100).unwrap();
    let decisions: Vec<&str> = events.iter().filter(|e| e.kind == "decision").map(|e| e.text.as_str()).collect();
    assert_eq!(decisions.len(), 1, "{events:#?}");
    assert!(
        decisions[0].starts_with("exec: policy: refused: ")
            && decisions[0].contains("[tools].deny")
            && decisions[0].ends_with("-> denied"),
        "{decisions:?}"
    );
    // The audit row's trace says the same.
    let row = store.audit_tail(50).unwrap().into_iter().find(|r| r.tool == "exec").expect("the exec row");
    assert!(format!("{row:?}").contains("[tools].deny"), "{row:?}");
}

/// A sandbox job with a credential queued by the one-shot CLI (no `wait`) is run by a
/// `toolgate serve` started later: the server resolves the secret again from the store (the
/// record keeps only its name) and its agent's command gets the value; the model never does.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_queued_sandbox_job_with_a_credential_runs_in_a_server_that_claims_it() {
    use crate::support::scripted::{Scripted, answer, call as model_call};
    let server = Scripted::start(vec![
        model_call("exec", json!({"command": "printf %s \"$DEPLOY_KEY\" | sha256sum > claimed.txt; echo $DEPLOY_KEY"})),
        answer("claimed and done"),
    ])
    .await;
    let ws = tempfile::tempdir().unwrap();
    let config = format!(
        "[approval]\nmode = \"never\"\n\n[providers.mock]\nbase_url = {:?}\n\n[agents.worker]\nprovider = \"mock\"\n\
         model = \"m\"\ndescription = \"does jobs\"\n",
        server.url
    );
    std::fs::write(ws.path().join("toolgate.toml"), config).unwrap();
    let secret = "deploy-0c41-harbor-signal";
    let (_, err, ok) = toolgate_async(ws.path(), &["tools", "secret", "deploy"], secret).await;
    assert!(ok, "{err}");
    let params = json!({"title": "deploy", "description": "Deploy.", "credentials": [{"secret": "deploy", "env": "DEPLOY_KEY"}]});
    let (out, err, ok) = toolgate_async(ws.path(), &["call", "create_job", &params.to_string(), "--json"], "").await;
    assert!(ok, "{out}\n{err}");
    let v: Value = serde_json::from_str(&out).unwrap();
    let v = v.get("structured").cloned().unwrap_or(v);
    assert_eq!(v["state"], "queued", "{v}");
    let id = v["job_id"].as_str().unwrap().to_owned();
    let store = Store::open(&ws.path().join(".toolgate/state.db")).unwrap();
    let record = store.job(&id).unwrap().unwrap();
    assert!(!format!("{record:?}").contains(secret), "the record keeps names only: {record:?}");

    let ws_path = ws.path().to_owned();
    let serve = tokio::task::spawn_blocking(move || Server::start(&ws_path)).await.unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    while !store.job(&id).unwrap().unwrap().is_finished() {
        assert!(Instant::now() < deadline, "the server did not run the job");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let done = store.job(&id).unwrap().unwrap();
    assert_eq!((done.state.as_str(), done.result.as_deref()), ("completed", Some("claimed and done")), "{done:?}");
    let hash = std::fs::read_to_string(ws.path().join("claimed.txt")).unwrap();
    let expected = Command::new("sh").args(["-c", "printf %s \"$V\" | sha256sum"]).env("V", secret).output().unwrap();
    assert_eq!(hash, String::from_utf8(expected.stdout).unwrap());
    let requests = server.requests();
    assert_eq!(requests.len(), 2, "{requests:#?}");
    assert!(!requests[1].to_string().contains(secret), "{}", requests[1]);
    assert!(requests[1].to_string().contains("[REDACTED:DEPLOY_KEY]"), "{}", requests[1]);
    let events = store.job_events(&id, 0, 500).unwrap();
    assert!(events.iter().any(|e| e.kind == "claim"), "{events:#?}");
    assert!(events.iter().all(|e| !e.text.contains(secret)), "{events:#?}");
    tokio::task::spawn_blocking(move || drop(serve)).await.unwrap();
}
