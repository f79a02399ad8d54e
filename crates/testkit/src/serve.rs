//! A `serve --http` on a free port, for the tests that drive a server with peers: the
//! `toolgate` binary (`toolgate serve`) or the conformance suite's (`toolgate-conformance
//! serve`), which take the same `--workspace DIR serve --http ADDR` and print a banner with the
//! URL that ends with "Ctrl-C stops the server".

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// A workspace with `hello.txt` in it.
pub fn workspace() -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("temp dir");
    std::fs::write(dir.path().join("hello.txt"), "hello file\n").expect("write hello.txt");
    dir
}

/// `BINARY --workspace WS serve --http 127.0.0.1:0 EXTRA...` over its own workspace, killed
/// on drop.
#[derive(Debug)]
pub struct HttpServer {
    child: Child,
    /// `http://127.0.0.1:PORT/mcp`.
    pub url: String,
    /// The bearer token from `<ws>/.toolgate/http-token`, when the server made one.
    pub token: Option<String>,
    /// What the server printed on stderr up to its banner's end.
    pub banner: String,
    /// The workspace served (an empty folder of its own for a node started
    /// [beside](HttpServer::start_beside) another).
    pub ws: tempfile::TempDir,
}

impl Drop for HttpServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl HttpServer {
    /// The server's process id (its `/proc/PID`).
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Starts `binary`'s server and waits for its banner (up to the line that ends with "Ctrl-C
    /// stops the server").
    pub fn start(binary: impl AsRef<Path>, extra: &[&str]) -> HttpServer {
        Self::start_in(binary, workspace(), extra)
    }

    /// [`HttpServer::start`] on a workspace the test prepared (its config, its users).
    pub fn start_in(binary: impl AsRef<Path>, ws: tempfile::TempDir, extra: &[&str]) -> HttpServer {
        Self::start_with_env(binary, ws, extra, &[])
    }

    /// [`HttpServer::start_in`] with `env` added to the server's environment.
    pub fn start_with_env(
        binary: impl AsRef<Path>,
        ws: tempfile::TempDir,
        extra: &[&str],
        env: &[(&str, &str)],
    ) -> HttpServer {
        let workspace = ws.path().to_owned();
        Self::spawn(binary.as_ref(), ws, &workspace, extra, env)
    }

    /// A second node on `other`'s workspace, as nodes behind one load balancer share a
    /// filesystem: its `ws` is an empty folder of its own (kept for the struct), the workspace
    /// it serves is `other.ws`.
    pub fn start_beside(binary: impl AsRef<Path>, other: &HttpServer, env: &[(&str, &str)]) -> HttpServer {
        Self::start_beside_with(binary, other, &[], env)
    }

    /// [`HttpServer::start_beside`] with `extra` arguments for `serve` (`--dialect NAME`: a node
    /// set otherwise than the shared workspace's file says).
    pub fn start_beside_with(
        binary: impl AsRef<Path>,
        other: &HttpServer,
        extra: &[&str],
        env: &[(&str, &str)],
    ) -> HttpServer {
        let scratch = tempfile::tempdir().expect("temp dir");
        Self::spawn(binary.as_ref(), scratch, other.ws.path(), extra, env)
    }

    fn spawn(
        binary: &Path,
        ws: tempfile::TempDir,
        workspace: &Path,
        extra: &[&str],
        env: &[(&str, &str)],
    ) -> HttpServer {
        let mut child = Command::new(binary)
            .envs(env.iter().copied())
            .arg("--workspace")
            .arg(workspace)
            .args(["serve", "--http", "127.0.0.1:0"])
            .args(extra)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("start {} serve --http: {e}", binary.display()));
        let stderr = child.stderr.take().expect("stderr");
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut banner = String::new();
            let mut sent = false;
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if !sent {
                    banner.push_str(&line);
                    banner.push('\n');
                    if line.contains("Ctrl-C stops the server") {
                        let _ = tx.send(banner.clone());
                        sent = true;
                    }
                }
            }
            if !sent {
                let _ = tx.send(banner);
            }
        });
        let banner = rx.recv_timeout(Duration::from_secs(60)).expect("serve --http printed its banner");
        let url = banner
            .split_whitespace()
            .find(|w| w.starts_with("http://") && w.ends_with("/mcp"))
            .unwrap_or_else(|| panic!("no URL in the banner:\n{banner}"))
            .to_owned();
        let token = std::fs::read_to_string(workspace.join(".toolgate/http-token")).ok().map(|t| t.trim().to_owned());
        HttpServer { child, url, token, banner, ws }
    }
}
