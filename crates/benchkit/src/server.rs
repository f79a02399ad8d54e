//! `toolgate serve --http 127.0.0.1:0` as the benchmarks start it: the process, once it has
//! printed the URL it listens at, killed when dropped.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// What becomes of the server's standard error once its URL is read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Log {
    /// Read and dropped (the server must not write into a closed pipe).
    Drop,
    /// Copied to this process's standard error, each line marked `  server: `.
    Forward,
}

/// A running `toolgate serve --http` on a free loopback port.
#[derive(Debug)]
pub struct HttpServer {
    child: Child,
    /// `http://127.0.0.1:PORT/mcp`, as the server printed it.
    pub url: String,
    /// The bearer token it generated (`<workspace>/.toolgate/http-token`); `None` for a team
    /// gateway, which knows its callers by API keys.
    pub token: Option<String>,
}

impl HttpServer {
    /// Starts `binary --workspace WORKSPACE serve --http 127.0.0.1:0 EXTRA...` and waits until
    /// it prints its URL (it listens from then on). Panics, saying why, if it ends first.
    pub fn start(binary: &str, workspace: &Path, extra: &[&str], log: Log) -> HttpServer {
        let mut child = Command::new(binary)
            .arg("--workspace")
            .arg(workspace)
            .args(["serve", "--http", "127.0.0.1:0"])
            .args(extra)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {binary} serve --http: {e}"));
        let Some(stderr) = child.stderr.take() else { panic!("the server's stderr was not piped") };
        let mut lines = BufReader::new(stderr).lines().map_while(Result::ok);
        let mut said = Vec::new();
        let url = lines.by_ref().find_map(|line| {
            let url =
                line.split_whitespace().find(|w| w.starts_with("http://") && w.ends_with("/mcp")).map(str::to_owned);
            said.push(line);
            url
        });
        let Some(url) = url else {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{binary} serve --http ended without printing its URL:\n{}", said.join("\n"));
        };
        // Keep reading: the server must not write into a closed pipe.
        std::thread::spawn(move || {
            for line in lines {
                if log == Log::Forward {
                    eprintln!("  server: {line}");
                }
            }
        });
        let token = std::fs::read_to_string(workspace.join(".toolgate/http-token")).ok().map(|t| t.trim().to_owned());
        HttpServer { child, url, token }
    }

    /// The server's process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// `127.0.0.1:PORT`.
    pub fn addr(&self) -> &str {
        self.url.trim_start_matches("http://").trim_end_matches("/mcp")
    }

    /// User + system CPU time of the server so far (`/proc/PID/stat`).
    pub fn cpu(&self) -> Duration {
        let stat = std::fs::read_to_string(format!("/proc/{}/stat", self.pid())).unwrap_or_default();
        // Fields after the command's closing parenthesis; utime and stime are the 14th and 15th.
        let after = stat.rsplit_once(')').map_or("", |(_, rest)| rest);
        let ticks: u64 = after.split_whitespace().skip(11).take(2).filter_map(|f| f.parse::<u64>().ok()).sum();
        // The kernel's USER_HZ is 100 on Linux.
        Duration::from_millis(ticks * 10)
    }

    /// `kill -9`, and waits for the process to end.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// SIGTERM, as a service manager stops it; SIGKILL if it has not ended within `grace`.
    /// Says which it took.
    pub fn stop(mut self, grace: Duration) -> String {
        let _ = Command::new("kill").args(["-TERM", &self.pid().to_string()]).status();
        let deadline = Instant::now() + grace;
        while Instant::now() < deadline {
            if let Ok(Some(status)) = self.child.try_wait() {
                return format!("stopped on SIGTERM ({status})");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        self.kill();
        format!("did not stop within {} s of SIGTERM: killed", grace.as_secs())
    }
}

impl Drop for HttpServer {
    fn drop(&mut self) {
        self.kill();
    }
}
