//! Start-up cost of a sandboxed `/bin/true`, against no sandbox and against bubblewrap, measured
//! in the same run: `cargo bench -p toolgate-sandbox --bench start`.
//!
//! Each iteration starts `/bin/true` once per variant (interleaved, so drift hits all alike) and
//! waits for it to exit:
//!
//! - `plain`: `std::process::Command`, no sandbox;
//! - `toolgate`: [`Sandbox::run`] in workspace-write mode with the network off (Landlock,
//!   seccomp, user/mount/PID/IPC namespaces, rlimits, output pipe, exit report);
//! - `bwrap`: `bwrap --ro-bind / / --dev /dev --proc /proc --unshare-all --die-with-parent
//!   /bin/true` (Debian's `bubblewrap`; installed with `apt-get install -y bubblewrap` when
//!   missing and running as root).
//!
//! Prints the median and 90th percentile in microseconds and the ratios. Set `START_ITERS` to
//! change the number of iterations (default 200).

#![allow(clippy::unwrap_used)]

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use tokio_util::sync::CancellationToken;
use toolgate_sandbox::{CommandSpec, Network, Sandbox, SandboxMode, SandboxPolicy, status};

fn bwrap_available() -> bool {
    Command::new("bwrap")
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

fn ensure_bwrap() -> bool {
    if bwrap_available() {
        return true;
    }
    // SAFETY-free check for root: installing needs it.
    let root = std::fs::read_to_string("/proc/self/status")
        .map(|s| s.lines().any(|l| l.starts_with("Uid:") && l.split_whitespace().nth(1) == Some("0")))
        .unwrap_or(false);
    if !root {
        eprintln!("bwrap missing and not root: skipping the bubblewrap comparison");
        return false;
    }
    eprintln!("bwrap missing: apt-get install -y bubblewrap");
    let _ = Command::new("apt-get").args(["install", "-y", "bubblewrap"]).status();
    if !bwrap_available() {
        let _ = Command::new("apt-get").arg("update").status();
        let _ = Command::new("apt-get").args(["install", "-y", "bubblewrap"]).status();
    }
    bwrap_available()
}

fn time(f: impl FnOnce()) -> Duration {
    let t = Instant::now();
    f();
    t.elapsed()
}

fn stats(samples: &mut [Duration]) -> (f64, f64, f64) {
    samples.sort();
    let us = |d: Duration| d.as_secs_f64() * 1e6;
    (us(samples[samples.len() / 2]), us(samples[samples.len() * 9 / 10]), us(samples[0]))
}

fn main() {
    // `cargo bench` passes `--bench`; nothing else to parse.
    let iters: usize = std::env::var("START_ITERS").ok().and_then(|v| v.parse().ok()).unwrap_or(200);
    println!("{}\n", status());
    let have_bwrap = ensure_bwrap();
    let ws = tempfile::tempdir().unwrap();
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let sandbox = Sandbox::new(SandboxPolicy::workspace_write(ws.path())).unwrap();
    let full = SandboxPolicy {
        mode: SandboxMode::FullAccess,
        network: Network::On,
        ..SandboxPolicy::workspace_write(ws.path())
    };
    let unconfined = Sandbox::new(full).unwrap();
    println!("toolgate runs: {}\n", sandbox.enforcement());

    let plain = || {
        let s = Command::new("/bin/true").stdin(Stdio::null()).stdout(Stdio::null()).status().unwrap();
        assert!(s.success());
    };
    let toolgate = || {
        let spec = CommandSpec::new("/bin/true", Vec::<String>::new(), ws.path());
        let r = rt.block_on(sandbox.run(spec, CancellationToken::new())).unwrap();
        assert!(r.exit.success(), "{:?}", r.exit);
    };
    let toolgate_full = || {
        let spec = CommandSpec::new("/bin/true", Vec::<String>::new(), ws.path());
        let r = rt.block_on(unconfined.run(spec, CancellationToken::new())).unwrap();
        assert!(r.exit.success(), "{:?}", r.exit);
    };
    let bwrap = || {
        let s = Command::new("bwrap")
            .args(["--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--unshare-all", "--die-with-parent"])
            .arg("/bin/true")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .status()
            .unwrap();
        assert!(s.success(), "bwrap failed: {s}");
    };

    for _ in 0..10 {
        plain();
        toolgate();
        if have_bwrap {
            bwrap();
        }
    }
    let (mut p, mut t, mut b, mut u) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for _ in 0..iters {
        p.push(time(plain));
        t.push(time(toolgate));
        u.push(time(toolgate_full));
        if have_bwrap {
            b.push(time(bwrap));
        }
    }
    let (pm, p90, pmin) = stats(&mut p);
    let (tm, t90, tmin) = stats(&mut t);
    let (um, u90, umin) = stats(&mut u);
    println!("start /bin/true, {iters} runs each (µs)      median      p90      min");
    println!("  plain (no sandbox)                   {pm:9.0} {p90:8.0} {pmin:8.0}");
    println!("  toolgate full-access (no sandbox)    {um:9.0} {u90:8.0} {umin:8.0}");
    println!("  toolgate workspace-write, net off    {tm:9.0} {t90:8.0} {tmin:8.0}");
    if have_bwrap {
        let (bm, b90, bmin) = stats(&mut b);
        println!("  bwrap --unshare-all                  {bm:9.0} {b90:8.0} {bmin:8.0}");
        println!(
            "\ntoolgate / plain = {:.2}x, toolgate / bwrap = {:.2}x (target: < 1500 µs and <= 0.33x)",
            tm / pm,
            tm / bm
        );
    } else {
        println!("\ntoolgate / plain = {:.2}x (bwrap not available)", tm / pm);
    }
}
