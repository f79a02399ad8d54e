//! `kill -9` of the real `toolgate` binary in the middle of a call: nothing it started survives
//! (the sandbox's init asks for `PR_SET_PDEATHSIG`, its PID namespace takes the rest), the
//! sandbox's temporary folder is swept by the next start, and the audit log keeps the call: a
//! "started" row written before the command ran, closed as "interrupted" by the next start.
//!
//! Each command carries a marker (`sleep 1000.<unique digits>`); a process belongs to the tree
//! when its command line holds the marker (the sandbox's init is a copy of toolgate and keeps
//! toolgate's command line; the commands show theirs). `serve` is driven by the official MCP
//! Python SDK (`tests/python/kill_mid_call.py`), installed by `cargo xtask deps`.

#![allow(clippy::unwrap_used)] // tests fail loudly on purpose

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use toolgate::store::{INTERRUPTED, STARTED, Store};

const TOOLGATE: &str = env!("CARGO_BIN_EXE_toolgate");

/// A workspace and a private `TMPDIR` for one test.
struct Scene {
    ws: tempfile::TempDir,
    tmp: tempfile::TempDir,
    /// `1000.<digits>`, unique to this test: the seconds every command sleeps.
    marker: String,
}

impl Scene {
    fn new() -> Scene {
        let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().subsec_nanos();
        Scene {
            ws: tempfile::tempdir().unwrap(),
            tmp: tempfile::tempdir().unwrap(),
            marker: format!("1000.{}{:09}", std::process::id(), nanos),
        }
    }

    /// Two processes per command: one that left the process group and session with `setsid`,
    /// one in the foreground.
    fn command(&self) -> String {
        format!("setsid sleep {m} & sleep {m}", m = self.marker)
    }

    fn toolgate(&self) -> Command {
        let mut cmd = Command::new(TOOLGATE);
        cmd.env("TMPDIR", self.tmp.path()).arg("--workspace").arg(self.ws.path()).args(["--approval", "never"]);
        cmd
    }

    fn run(&self, args: &[&str]) -> Output {
        let out = self.toolgate().args(args).output().unwrap();
        assert!(out.status.success(), "toolgate {args:?}: {}", String::from_utf8_lossy(&out.stderr));
        out
    }

    /// Processes whose command line holds the marker: `(pid, command line)`.
    fn tree(&self) -> Vec<(u32, String)> {
        let mut found = Vec::new();
        for entry in std::fs::read_dir("/proc").unwrap().flatten() {
            let Some(pid) = entry.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else { continue };
            let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) else { continue };
            let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
            if cmdline.contains(&self.marker) {
                found.push((pid, cmdline));
            }
        }
        found
    }

    /// Waits until both `sleep`s run.
    fn wait_for_sleeps(&self) {
        wait_until(
            "both sleeps to start",
            || self.tree().iter().filter(|(_, c)| c.starts_with("sleep ")).count() == 2,
            || format!("{:?}", self.tree()),
        );
    }

    /// After toolgate was killed: nothing of the tree remains.
    fn assert_tree_gone(&self) {
        wait_until(
            "every process of the killed toolgate's tree to end",
            || self.tree().is_empty(),
            || format!("still running: {:?}", self.tree()),
        );
    }

    fn sandbox_dirs(&self) -> Vec<PathBuf> {
        std::fs::read_dir(self.tmp.path())
            .unwrap()
            .flatten()
            .filter(|e| e.file_name().to_string_lossy().starts_with("toolgate-sandbox-"))
            .map(|e| e.path())
            .collect()
    }

    fn audit(&self) -> Vec<toolgate::store::AuditRecord> {
        Store::open(&self.ws.path().join(".toolgate/state.db")).unwrap().audit_tail(50).unwrap()
    }

    /// The exec call's row, while the call runs: written before the command started.
    fn assert_started_row(&self) {
        let rows = self.audit();
        let row = rows.iter().find(|r| r.tool == "exec" && r.params.contains(&self.marker));
        let row = row.unwrap_or_else(|| panic!("no audit row for the running exec call: {rows:#?}"));
        assert_eq!(row.outcome, STARTED, "{row:#?}");
        assert!(row.subject.as_deref().is_some_and(|s| s.contains(&self.marker)), "the normalized command: {row:#?}");
        assert!(row.decision.contains("policy:"), "the decision trace: {row:#?}");
    }

    /// Waits until the sandbox folder's owner (its name's pid) has finished exiting: under
    /// load a killed process can still be tearing down when its client returns, and a live
    /// owner's folder is rightly kept by the sweep.
    fn wait_for_sandbox_owner_to_exit(&self) {
        let owner = self.sandbox_dirs()[0]
            .file_name()
            .and_then(|n| n.to_str()?.strip_prefix("toolgate-sandbox-")?.split('-').next()?.parse::<u32>().ok())
            .expect("the folder names its owner's pid");
        wait_until(
            "the killed toolgate to finish exiting",
            || {
                std::fs::read_to_string(format!("/proc/{owner}/stat"))
                    .map_or(true, |stat| stat.rsplit(')').next().is_some_and(|rest| rest.trim_start().starts_with('Z')))
            },
            || format!("process {owner} still runs"),
        );
    }

    /// The next start: the sandbox's folder of the dead toolgate is removed, the call's row is
    /// closed as interrupted, and `toolgate audit` shows it.
    fn assert_next_start_cleans_up(&self) {
        assert_eq!(self.sandbox_dirs().len(), 1, "the killed toolgate left its sandbox folder");
        self.wait_for_sandbox_owner_to_exit();
        self.run(NEXT_START);
        assert_eq!(self.sandbox_dirs(), Vec::<PathBuf>::new(), "swept at the next start");
        let rows = self.audit();
        let row = rows.iter().find(|r| r.tool == "exec" && r.params.contains(&self.marker)).unwrap();
        assert_eq!(row.outcome, INTERRUPTED, "{row:#?}");
        assert!(row.error.as_deref().unwrap_or_default().contains("ended while this call ran"), "{row:#?}");
        let shown = String::from_utf8(self.run(&["audit"]).stdout).unwrap();
        let line = shown.lines().find(|l| l.contains(&self.marker)).unwrap_or_else(|| panic!("{shown}"));
        assert!(line.contains("interrupted") && line.contains("ended while this call ran"), "{line}");
    }
}

/// The next start that sweeps: a call that runs a command (its sandbox sweeps once per process
/// before it makes its own folder, which it removes when it ends). A server sweeps at its start;
/// a one-shot call of a tool that runs no command does not read the temporary directory.
const NEXT_START: &[&str] = &["call", "exec", r#"{"command":"true"}"#];

fn wait_until(what: &str, mut done: impl FnMut() -> bool, state: impl Fn() -> String) {
    let start = Instant::now();
    while !done() {
        assert!(start.elapsed() < Duration::from_secs(30), "timed out waiting for {what}: {}", state());
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Kills with SIGKILL (what `Child::kill` sends) and reaps.
fn kill_9(child: &mut Child) {
    child.kill().unwrap();
    child.wait().unwrap();
}

#[test]
fn kill_9_of_call_exec_leaves_nothing_running_and_the_call_in_the_audit_log() {
    let scene = Scene::new();
    let params = json!({"command": scene.command()}).to_string();
    let mut toolgate =
        scene.toolgate().args(["call", "exec", &params]).stdout(Stdio::null()).stderr(Stdio::null()).spawn().unwrap();
    scene.wait_for_sleeps();
    scene.assert_started_row();
    kill_9(&mut toolgate);
    scene.assert_tree_gone();
    scene.assert_next_start_cleans_up();
}

/// The venv's python with the MCP SDK (installed by `cargo xtask deps`).
fn python() -> PathBuf {
    let python = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../.cache/peers/venv/bin/python");
    let ok = Command::new(&python).args(["-c", "import mcp, httpx2"]).status().is_ok_and(|s| s.success());
    assert!(ok, "the MCP Python SDK is missing in {}: run `cargo xtask deps` and retry", python.display());
    python
}

fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/python/kill_mid_call.py")
}

/// Starts the Python client making `params`'s call; returns it once the call is sent.
fn client(scene: &Scene, args: &[&str], params: &Value) -> Child {
    let mut child = Command::new(python())
        .arg(script())
        .args(args)
        .env("TMPDIR", scene.tmp.path())
        .env("KILL_PARAMS", params.to_string())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            eprintln!("client: {line}");
            let _ = tx.send(line);
        }
    });
    let line = rx.recv_timeout(Duration::from_secs(60)).expect("the Python client sent its call");
    assert_eq!(line, "calling");
    child
}

/// The `toolgate` process the client started over stdio (its child).
fn child_of(parent: u32) -> u32 {
    let mut found = None;
    wait_until(
        "toolgate serve to start",
        || {
            found = std::fs::read_dir("/proc").unwrap().flatten().find_map(|e| {
                let pid = e.file_name().to_str()?.parse::<u32>().ok()?;
                let stat = std::fs::read_to_string(e.path().join("stat")).ok()?;
                let rest = &stat[stat.rfind(')')? + 2..];
                let ppid: u32 = rest.split(' ').nth(1)?.parse().ok()?;
                (ppid == parent && stat.contains("(toolgate)")).then_some(pid)
            });
            found.is_some()
        },
        String::new,
    );
    found.unwrap()
}

fn sigkill(pid: u32) {
    let status = Command::new("kill").args(["-9", &pid.to_string()]).status().unwrap();
    assert!(status.success());
}

/// `toolgate serve` over stdio, started by the Python client, killed mid-call.
fn serve_stdio(background: bool) {
    let scene = Scene::new();
    let params = json!({"command": scene.command(), "background": background});
    let mut client = client(&scene, &["stdio", TOOLGATE, scene.ws.path().to_str().unwrap()], &params);
    scene.wait_for_sleeps();
    let toolgate = child_of(client.id());
    if !background {
        scene.assert_started_row();
    }
    sigkill(toolgate);
    scene.assert_tree_gone();
    kill_9(&mut client);
    if background {
        // The call itself completed (it returned a process id); the process ran on.
        assert_eq!(scene.sandbox_dirs().len(), 1, "the killed toolgate left its sandbox folder");
        scene.wait_for_sandbox_owner_to_exit();
        scene.run(NEXT_START);
        assert_eq!(scene.sandbox_dirs(), Vec::<PathBuf>::new(), "swept at the next start");
    } else {
        scene.assert_next_start_cleans_up();
    }
}

#[test]
fn kill_9_of_serve_over_stdio_mid_call() {
    serve_stdio(false);
}

#[test]
fn kill_9_of_serve_over_stdio_with_a_background_process() {
    serve_stdio(true);
}

#[test]
fn kill_9_of_serve_over_http_mid_call() {
    let scene = Scene::new();
    let mut toolgate = scene
        .toolgate()
        .args(["serve", "--http", "127.0.0.1:0"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = toolgate.stderr.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if let Some(url) = line.split_whitespace().find(|w| w.starts_with("http://") && w.ends_with("/mcp")) {
                let _ = tx.send(url.to_owned());
            }
        }
    });
    let url = rx.recv_timeout(Duration::from_secs(30)).expect("toolgate serve --http printed its URL");
    let token = std::fs::read_to_string(scene.ws.path().join(".toolgate/http-token")).unwrap().trim().to_owned();
    let params = json!({"command": scene.command()});
    let mut client = client(&scene, &["http", &url, &token], &params);
    scene.wait_for_sleeps();
    scene.assert_started_row();
    kill_9(&mut toolgate);
    scene.assert_tree_gone();
    kill_9(&mut client);
    scene.assert_next_start_cleans_up();
}

impl Scene {
    /// With `toml` as the workspace's config, runs `toolgate ARGS`, waits for the commands'
    /// sleeps, kills toolgate with SIGKILL and checks that nothing of its tree survives.
    fn kill_9_with_config(&self, toml: &str, args: &[&str]) {
        std::fs::write(self.ws.path().join("toolgate.toml"), toml).unwrap();
        let mut toolgate = self
            .toolgate()
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        self.wait_for_sleeps();
        kill_9(&mut toolgate);
        self.assert_tree_gone();
    }
}

/// A hook's command runs outside the sandbox (it is the user's own script), but it and what it
/// starts still die with toolgate.
#[test]
fn kill_9_during_a_hook_leaves_nothing_running() {
    let scene = Scene::new();
    let config =
        format!("[[hooks.pre_tool_use]]\nmatcher = \"echo\"\ncommand = \"{}\"\ntimeout_secs = 600\n", scene.command());
    scene.kill_9_with_config(&config, &["call", "echo", r#"{"message":"hi"}"#]);
}

/// A bridged MCP server started over stdio (here one that never answers the handshake, so it is
/// still starting when toolgate dies) and what it starts die with `toolgate serve`.
#[test]
fn kill_9_of_serve_leaves_no_bridged_server_running() {
    let scene = Scene::new();
    let config = format!(
        "[mcp.servers.sleepy]\ncommand = \"sh\"\nargs = [\"-c\", \"{}\"]\nenv = {{ PATH = \"${{PATH}}\" }}\n",
        scene.command()
    );
    scene.kill_9_with_config(&config, &["serve", "--http", "127.0.0.1:0"]);
}
