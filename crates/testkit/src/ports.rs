//! Peers that only take fixed ports (from their environment): a free port to hand them, and a
//! start that tries again on new ports when another test took one first.
//!
//! A port found free can be taken before the peer binds it: by a test running beside it or by
//! an outgoing connection's local port. So [`free`] picks below the kernel's ephemeral range
//! (where outgoing connections never land), at random (so parallel tests rarely pick the same),
//! and [`Listening::start`] starts the peer again when it fails to bind.

use std::hash::{BuildHasher, RandomState};
use std::io::{BufRead, BufReader};
use std::net::{Ipv4Addr, Ipv6Addr, TcpListener};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex, mpsc};
use std::time::Duration;

/// Attempts before [`Listening::start`] gives up: a clash twice in a row is already rare.
const ATTEMPTS: usize = 8;

/// A loopback port that nothing listens on now, on IPv4 or IPv6 (Node listens on `::`).
pub fn free() -> u16 {
    let below = ephemeral_start().max(2048);
    let random = RandomState::new();
    for salt in 0u64.. {
        let port = 1024 + (random.hash_one(salt) % u64::from(below - 1024)) as u16;
        // One at a time: `::` is dual-stack, so it clashes with a held 127.0.0.1 listener.
        let v4_free = TcpListener::bind((Ipv4Addr::LOCALHOST, port)).is_ok();
        let v6 = TcpListener::bind((Ipv6Addr::UNSPECIFIED, port));
        if v4_free && !matches!(&v6, Err(e) if e.kind() == std::io::ErrorKind::AddrInUse) {
            return port;
        }
    }
    unreachable!("the loop above only ends by returning")
}

/// The first port the kernel hands to outgoing connections (32768 when it cannot be read).
fn ephemeral_start() -> u16 {
    std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|range| range.split_whitespace().next()?.parse().ok())
        .unwrap_or(32768)
}

/// A peer process listening on the ports it was given, killed on drop.
#[derive(Debug)]
pub struct Listening {
    child: Child,
    /// The ports it was started with, in the order `command` took them.
    pub ports: Vec<u16>,
}

impl Drop for Listening {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Listening {
    /// Starts `command(ports)` on `count` free ports and waits until it has said every line in
    /// `ready` (on stdout or stderr). When it exits first saying a port was in use, it is started again on new
    /// ports; any other early exit fails the test with its stderr.
    pub fn start(count: usize, ready: &[&str], command: impl Fn(&[u16]) -> Command) -> Listening {
        let mut clashes = Vec::new();
        for _ in 0..ATTEMPTS {
            let ports: Vec<u16> = (0..count).map(|_| free()).collect();
            match Self::try_start(command(&ports), ports, ready) {
                Ok(started) => return started,
                Err(Failure::Clash(stderr)) => clashes.push(stderr),
                Err(Failure::Other(message)) => panic!("{message}"),
            }
        }
        panic!("the peer found its port in use {ATTEMPTS} times:\n{}", clashes.join("\n---\n"))
    }

    fn try_start(mut command: Command, ports: Vec<u16>, ready: &[&str]) -> Result<Listening, Failure> {
        command.stdout(Stdio::piped()).stderr(Stdio::piped());
        let mut child = command.spawn().unwrap_or_else(|e| panic!("start {command:?}: {e}"));
        // Both streams are read for the ready lines (peers print them on either) and drained for
        // the peer's whole life (a full pipe would stall it); stderr is kept for the error.
        let (tx, rx) = mpsc::channel();
        let stdout = child.stdout.take().expect("stdout");
        let to_ready = tx.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                let _ = to_ready.send(line);
            }
        });
        let errors = Arc::new(Mutex::new(String::new()));
        let sink = errors.clone();
        let stderr = child.stderr.take().expect("stderr");
        let stderr_read = std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                let mut errors = sink.lock().unwrap_or_else(|e| e.into_inner());
                errors.push_str(&line);
                errors.push('\n');
                drop(errors);
                let _ = tx.send(line);
            }
        });
        let mut started = Listening { child, ports };
        let mut missing: Vec<&str> = ready.to_vec();
        while !missing.is_empty() {
            // A hang guard, not a timing assertion. Both streams close when the peer exits.
            match rx.recv_timeout(Duration::from_secs(120)) {
                Ok(line) => missing.retain(|want| !line.contains(want)),
                Err(mpsc::RecvTimeoutError::Timeout) => {
                    return Err(Failure::Other(format!(
                        "the peer said none of {missing:?} in 120 s; stderr:\n{}",
                        errors.lock().unwrap_or_else(|e| e.into_inner())
                    )));
                }
                Err(mpsc::RecvTimeoutError::Disconnected) => {
                    // It exited. Its stderr is complete once the reader ends.
                    let status = started.child.wait();
                    let _ = stderr_read.join();
                    let stderr = errors.lock().unwrap_or_else(|e| e.into_inner()).clone();
                    return Err(if stderr.contains("EADDRINUSE") || stderr.contains("ddress already in use") {
                        Failure::Clash(stderr)
                    } else {
                        Failure::Other(format!("the peer did not start ({status:?}); stderr:\n{stderr}"))
                    });
                }
            }
        }
        Ok(started)
    }
}

enum Failure {
    /// It could not bind a port it was given.
    Clash(String),
    Other(String),
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A Python listener on `port` that says "listening" once bound.
    fn python_listener(port: u16) -> Command {
        let mut command = Command::new("python3");
        command.arg("-c").arg(format!(
            "import socket,time\ns=socket.socket()\ns.bind(('127.0.0.1',{port}))\ns.listen()\nprint('listening',flush=True)\ntime.sleep(60)"
        ));
        command
    }

    #[test]
    fn a_clash_starts_the_peer_again_on_new_ports() {
        let taken = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).expect("bind");
        let taken_port = taken.local_addr().expect("addr").port();
        let attempts = std::cell::Cell::new(0);
        let peer = Listening::start(1, &["listening"], |ports| {
            attempts.set(attempts.get() + 1);
            // The first attempt finds its port taken, as when another test got there first.
            python_listener(if attempts.get() == 1 { taken_port } else { ports[0] })
        });
        assert_eq!(attempts.get(), 2);
        assert!(std::net::TcpStream::connect((Ipv4Addr::LOCALHOST, peer.ports[0])).is_ok());
    }

    #[test]
    #[should_panic(expected = "did not start")]
    fn another_early_exit_fails_with_its_stderr() {
        Listening::start(1, &["listening"], |_| {
            let mut command = Command::new("python3");
            command.args(["-c", "raise SystemExit('no config')"]);
            command
        });
    }
}
