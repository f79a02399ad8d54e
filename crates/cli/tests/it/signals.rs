//! SIGTERM, SIGINT and SIGHUP stop the real `toolgate serve` as its client leaving does: the
//! call in flight is cancelled (its command killed, its audit row completed as "cancelled"),
//! the process exits promptly with 128 + the signal's number, and a second signal during a slow
//! shutdown exits at once. Over stdio for every kind of stdout a client gives it: pipes (the
//! Python SDK, Codex), a socket pair (Node), a file and /dev/null (where stdin used to be read
//! by a blocking thread the runtime waited for, so a signal was ignored until stdin closed).
//!
//! Commands carry a marker (`sleep 1000.<unique digits>`), as in `kill.rs`: a process belongs to
//! the call when its command line holds it.

#![allow(clippy::unwrap_used)] // tests fail loudly on purpose

use std::fs::File;
use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::process::{Child, ChildStdout, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use toolgate::store::{AuditRecord, STARTED, Store};

const TOOLGATE: &str = env!("CARGO_BIN_EXE_toolgate");

/// The signals, by `kill -s` name, with their numbers.
const SIGNALS: [(&str, i32); 3] = [("TERM", 15), ("INT", 2), ("HUP", 1)];

/// A hang guard, not a benchmark: the exit takes well under a second.
const DEADLINE: Duration = Duration::from_secs(5);

/// Where `serve`'s stdout goes (stdin is a pipe, or the socket, from the test).
#[derive(Debug, Clone, Copy)]
enum Stdout {
    Pipe,
    Socket,
    File,
    Null,
}

/// A workspace with `toolgate serve` running in it, and the test's end of its stdin.
struct Server {
    ws: tempfile::TempDir,
    /// `1000.<digits>`, unique to this server: the seconds its commands sleep.
    marker: String,
    child: Child,
    input: Box<dyn Write>,
    /// The read end of a stdout pipe, kept open so that writes to it do not fail.
    _output: Option<ChildStdout>,
}

impl Server {
    fn start(stdout: Stdout, config: &str) -> Server {
        let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().subsec_nanos();
        let marker = format!("1000.{}{:09}", std::process::id(), nanos);
        let ws = tempfile::tempdir().unwrap();
        std::fs::write(ws.path().join("toolgate.toml"), config.replace("MARKER", &marker)).unwrap();
        let mut cmd = Command::new(TOOLGATE);
        cmd.arg("--workspace").arg(ws.path()).args(["--approval", "never", "serve"]);
        cmd.stderr(File::create(ws.path().join("stderr.txt")).unwrap());
        let mut socket = None;
        match stdout {
            Stdout::Pipe => cmd.stdin(Stdio::piped()).stdout(Stdio::piped()),
            Stdout::File => cmd.stdin(Stdio::piped()).stdout(File::create(ws.path().join("stdout.txt")).unwrap()),
            Stdout::Null => cmd.stdin(Stdio::piped()).stdout(Stdio::null()),
            Stdout::Socket => {
                let (ours, theirs) = UnixStream::pair().unwrap();
                socket = Some(ours);
                cmd.stdin(std::os::fd::OwnedFd::from(theirs.try_clone().unwrap()))
                    .stdout(std::os::fd::OwnedFd::from(theirs))
            }
        };
        let mut child = cmd.spawn().unwrap();
        let input: Box<dyn Write> = match socket {
            Some(socket) => Box::new(socket),
            None => Box::new(child.stdin.take().unwrap()),
        };
        let output = child.stdout.take();
        let mut server = Server { ws, marker, child, input, _output: output };
        server.send(json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "signals", "version": "1"}}}));
        server.send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        server
    }

    fn send(&mut self, message: Value) {
        writeln!(self.input, "{message}").unwrap();
    }

    fn call(&mut self, id: u32, tool: &str, arguments: Value) {
        self.send(json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": {"name": tool, "arguments": arguments}}));
    }

    /// Starts a call that is not read-only (so its audit row is written before it runs) and
    /// waits until its command runs.
    fn call_in_flight(&mut self) {
        self.call(1, "exec", json!({"command": format!("sleep {} && touch after", self.marker)}));
        self.wait_for_row("exec", STARTED);
        wait_until("the command to start", || self.running().iter().any(|c| c.starts_with("sleep ")), || self.state());
    }

    /// The audit row of the call of `tool` with the marker in its parameters.
    fn row(&self, tool: &str) -> Option<AuditRecord> {
        let store = Store::open(&self.ws.path().join(".toolgate/state.db")).ok()?;
        store.audit_tail(50).ok()?.into_iter().find(|r| r.tool == tool && r.params.contains(&self.marker))
    }

    fn wait_for_row(&self, tool: &str, outcome: &str) {
        let written = || self.row(tool).is_some_and(|r| r.outcome == outcome);
        wait_until(&format!("a {outcome:?} audit row for {tool}"), written, || self.state());
    }

    /// Command lines of the processes holding the marker (the call's command, a hook's).
    fn running(&self) -> Vec<String> {
        let mut found = Vec::new();
        for entry in std::fs::read_dir("/proc").unwrap().flatten() {
            let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) else { continue };
            let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
            if cmdline.contains(&self.marker) {
                found.push(cmdline);
            }
        }
        found
    }

    fn stderr(&self) -> String {
        let mut text = String::new();
        let _ = File::open(self.ws.path().join("stderr.txt")).and_then(|mut f| f.read_to_string(&mut text));
        text
    }

    fn state(&self) -> String {
        format!("running: {:?}\nstderr: {}", self.running(), self.stderr())
    }

    fn wait_for_exit(&mut self, after: &str) -> ExitStatus {
        let status = wait_for_exit(&mut self.child);
        status.unwrap_or_else(|| panic!("toolgate still ran {DEADLINE:?} after {after}\n{}", self.state()))
    }

    /// Nothing toolgate started runs any more.
    fn assert_nothing_runs(&self) {
        wait_until("the call's processes to end", || self.running().is_empty(), || self.state());
    }
}

/// Sends `signal` (a `kill -s` name) to `child`.
fn kill(child: &Child, signal: &str) {
    let status = Command::new("kill").args(["-s", signal, &child.id().to_string()]).status().unwrap();
    assert!(status.success(), "kill -s {signal}");
}

/// Waits (at most [`DEADLINE`]) for `child` to exit; `None` (and `child` killed) if it does not.
fn wait_for_exit(child: &mut Child) -> Option<ExitStatus> {
    let start = Instant::now();
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return Some(status);
        }
        if start.elapsed() > DEADLINE {
            child.kill().unwrap();
            child.wait().unwrap();
            return None;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn wait_until(what: &str, mut done: impl FnMut() -> bool, state: impl Fn() -> String) {
    let start = Instant::now();
    while !done() {
        assert!(start.elapsed() < Duration::from_secs(30), "timed out waiting for {what}\n{}", state());
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Every signal, idle and with a call in flight, with `stdout`.
fn check_stdio(stdout: Stdout) {
    for (signal, number) in SIGNALS {
        for in_flight in [false, true] {
            let case = format!("SIG{signal}, stdout {stdout:?}, {}", if in_flight { "mid-call" } else { "idle" });
            let mut server = Server::start(stdout, "");
            if in_flight {
                server.call_in_flight();
            } else {
                // A finished call: the server is up, initialized and idle.
                server.call(1, "echo", json!({"message": server.marker}));
                server.wait_for_row("echo", "ok");
            }
            kill(&server.child, signal);
            let status = server.wait_for_exit(&case);
            assert_eq!(status.code(), Some(128 + number), "{case}: {status:?}\n{}", server.state());
            server.assert_nothing_runs();
            if in_flight {
                let row = server.row("exec").unwrap();
                assert_eq!(row.outcome, "cancelled", "{case}: {row:#?}");
            }
        }
    }
}

#[test]
fn a_signal_stops_serve_over_stdio_with_pipes() {
    check_stdio(Stdout::Pipe);
}

#[test]
fn a_signal_stops_serve_over_stdio_with_a_socket_pair() {
    check_stdio(Stdout::Socket);
}

#[test]
fn a_signal_stops_serve_over_stdio_with_stdout_to_a_file() {
    check_stdio(Stdout::File);
}

#[test]
fn a_signal_stops_serve_over_stdio_with_stdout_to_dev_null() {
    check_stdio(Stdout::Null);
}

/// A post-tool-use hook of the cancelled call makes the shutdown slow (the hook is waited for);
/// a second signal exits at once. Nothing survives, and the call's row stays "started" for the
/// next start to close as interrupted, as after `kill -9`.
#[test]
fn a_second_signal_exits_at_once() {
    // `; true`: the shell stays (it cannot hand its process over to `sleep`).
    let slow_hook =
        "[[hooks.post_tool_use]]\nmatcher = \"exec\"\ncommand = \"sleep MARKER; true\"\ntimeout_secs = 600\n";
    for (signal, number) in SIGNALS {
        let mut server = Server::start(Stdout::File, slow_hook);
        server.call_in_flight();
        kill(&server.child, signal);
        // The call was cancelled and its hook runs: the shutdown waits for it.
        wait_until(
            "the post-tool-use hook to start",
            || server.running().iter().any(|c| c.starts_with("sh -c sleep")),
            || server.state(),
        );
        assert!(server.child.try_wait().unwrap().is_none(), "the shutdown waits for the hook");
        kill(&server.child, signal);
        let status = server.wait_for_exit(&format!("a second SIG{signal}"));
        assert_eq!(status.code(), Some(128 + number), "SIG{signal}: {status:?}\n{}", server.state());
        assert!(server.stderr().contains("a second signal"), "{}", server.state());
        server.assert_nothing_runs();
        assert_eq!(server.row("exec").unwrap().outcome, STARTED);
    }
}

/// `serve --http` stops on each signal with the same exit status.
#[test]
fn a_signal_stops_serve_over_http_with_its_exit_status() {
    for (signal, number) in SIGNALS {
        let ws = tempfile::tempdir().unwrap();
        let mut child = Command::new(TOOLGATE)
            .arg("--workspace")
            .arg(ws.path())
            .args(["serve", "--http", "127.0.0.1:0"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        // The banner names the URL once the listener is bound.
        let mut stderr = child.stderr.take().unwrap();
        let mut seen = Vec::new();
        let mut byte = [0u8];
        while !String::from_utf8_lossy(&seen).contains("/mcp") && stderr.read(&mut byte).unwrap() == 1 {
            seen.push(byte[0]);
        }
        kill(&child, signal);
        let status = wait_for_exit(&mut child).unwrap_or_else(|| panic!("serve --http ran on after SIG{signal}"));
        assert_eq!(status.code(), Some(128 + number), "SIG{signal}: {status:?}");
    }
}
