//! Behaviour of the sandbox through its public API: real processes, real Landlock and seccomp,
//! canary files in temporary directories. Each attack test plants a canary and checks that the
//! attack did not reach it. These tests run as whatever user runs `cargo test` (root included:
//! Landlock and seccomp confine root too).

#![allow(unsafe_code, clippy::unwrap_used)]

use std::fs;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use tempfile::TempDir;
use tokio_util::sync::CancellationToken;
use toolgate_sandbox::{
    CommandSpec, DenialKind, ExitStatusKind, Network, RunResult, Sandbox, SandboxMode, SandboxPolicy, status,
};

/// A workspace and, next to it, a directory outside every sandbox rule with a canary.
struct Fixture {
    ws: TempDir,
    outside: TempDir,
}

impl Fixture {
    fn new() -> Self {
        let ws = tempfile::Builder::new().prefix("tg-ws-").tempdir().unwrap();
        let outside = tempfile::Builder::new().prefix("tg-outside-").tempdir().unwrap();
        fs::write(outside.path().join("canary"), "CANARY-SECRET-1234\n").unwrap();
        Fixture { ws, outside }
    }

    fn ws(&self) -> &Path {
        self.ws.path()
    }

    fn canary(&self) -> PathBuf {
        self.outside.path().join("canary")
    }

    fn policy(&self) -> SandboxPolicy {
        SandboxPolicy::workspace_write(self.ws())
    }

    fn sandbox(&self) -> Sandbox {
        Sandbox::new(self.policy()).unwrap()
    }

    fn assert_canary_intact(&self) {
        assert_eq!(fs::read_to_string(self.canary()).unwrap(), "CANARY-SECRET-1234\n");
        let entries: Vec<_> = fs::read_dir(self.outside.path()).unwrap().flatten().map(|e| e.file_name()).collect();
        assert_eq!(entries.len(), 1, "something was created outside the workspace: {entries:?}");
    }
}

async fn sh(sandbox: &Sandbox, cwd: &Path, script: &str) -> RunResult {
    let spec = CommandSpec::shell(script, cwd).timeout(Duration::from_secs(20));
    sandbox.run(spec, CancellationToken::new()).await.unwrap()
}

fn path_denials(r: &RunResult) -> Vec<(PathBuf, bool)> {
    r.denials
        .iter()
        .filter_map(|d| match &d.kind {
            DenialKind::Path { path, write } => Some((path.clone(), *write)),
            _ => None,
        })
        .collect()
}

/// Processes on the host whose command line contains `token`.
fn processes_with(token: &str) -> Vec<String> {
    let mut found = Vec::new();
    for entry in fs::read_dir("/proc").unwrap().flatten() {
        if !entry.file_name().to_string_lossy().chars().all(|c| c.is_ascii_digit()) {
            continue;
        }
        if let Ok(cmd) = fs::read(entry.path().join("cmdline")) {
            let cmd = String::from_utf8_lossy(&cmd).replace('\0', " ");
            if cmd.contains(token) {
                found.push(format!("{}: {cmd}", entry.file_name().to_string_lossy()));
            }
        }
    }
    found
}

fn rss_kib() -> u64 {
    let status = fs::read_to_string("/proc/self/status").unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

mod basics {
    use super::*;

    #[tokio::test]
    async fn runs_and_reports_enforcement() {
        let f = Fixture::new();
        let sb = f.sandbox();
        let r = sh(&sb, f.ws(), "echo out; echo err >&2; exit 3").await;
        assert_eq!(r.exit, ExitStatusKind::Code(3));
        assert_eq!(r.output.text(), "out\nerr\n");
        let e = &r.enforcement;
        assert!(e.confined);
        assert_eq!(e.mode, SandboxMode::WorkspaceWrite);
        assert!(e.landlock_abi.is_some() && e.seccomp && e.no_new_privs && e.network_blocked);
        assert!(e.to_string().starts_with("sandboxed (workspace-write, network off)"), "{e}");
        assert!(r.denials.is_empty(), "{:?}", r.denials);
    }

    #[tokio::test]
    async fn writes_in_workspace_and_private_tmp() {
        let f = Fixture::new();
        let sb = f.sandbox();
        fs::create_dir(f.ws().join("sub")).unwrap();
        let r = sh(&sb, &f.ws().join("sub"), "echo hi > ../made; echo tmp > \"$TMPDIR/t\"; cat \"$TMPDIR/t\"").await;
        assert!(r.exit.success(), "{}", r.output.text());
        assert_eq!(fs::read_to_string(f.ws().join("made")).unwrap(), "hi\n");
        assert_eq!(r.output.text(), "tmp\n");
    }

    #[tokio::test]
    async fn signals_and_missing_programs() {
        let f = Fixture::new();
        let sb = f.sandbox();
        let r = sh(&sb, f.ws(), "kill -SEGV $$").await;
        assert_eq!(r.exit, ExitStatusKind::Signal(libc::SIGSEGV));
        let spec = CommandSpec::new("no-such-program-xyz", Vec::<String>::new(), f.ws());
        let err = sb.run(spec, CancellationToken::new()).await.unwrap_err();
        assert!(err.to_string().contains("no-such-program-xyz"), "{err}");
    }

    #[tokio::test]
    async fn executing_a_program_outside_the_allowed_paths_is_an_error() {
        let f = Fixture::new();
        let sb = f.sandbox();
        let tool = f.outside.path().join("tool");
        fs::copy("/bin/true", &tool).unwrap();
        let spec = CommandSpec::new(&tool, Vec::<String>::new(), f.ws());
        let err = sb.run(spec, CancellationToken::new()).await.unwrap_err();
        let text = err.to_string();
        // Landlock refuses to execute it, or the mount namespace hid its directory.
        assert!(
            text.contains("tool") && (text.contains("Permission denied") || text.contains("No such file")),
            "{text}"
        );
    }

    #[tokio::test]
    async fn status_says_what_is_enforced() {
        let s = status();
        let text = s.to_string();
        assert!(text.contains("landlock:") && text.contains("seccomp:") && text.contains("namespaces:"), "{text}");
    }

    #[tokio::test]
    async fn read_only_mode_writes_nothing() {
        let f = Fixture::new();
        let sb = Sandbox::new(SandboxPolicy::read_only(f.ws())).unwrap();
        let r = sh(&sb, f.ws(), "cat /etc/hostname >/dev/null; echo x > new.txt").await;
        assert!(!r.exit.success());
        assert!(!f.ws().join("new.txt").exists());
        assert!(path_denials(&r).iter().any(|(p, w)| p.ends_with("new.txt") && *w), "{:?}", r.denials);
    }

    #[tokio::test]
    async fn full_access_is_reported_as_not_confined() {
        let f = Fixture::new();
        let policy = SandboxPolicy { mode: SandboxMode::FullAccess, network: Network::On, ..f.policy() };
        let sb = Sandbox::new(policy).unwrap();
        let r = sh(&sb, f.ws(), "cat \"$1\" 2>&1; true").await;
        assert!(!r.enforcement.confined);
        assert!(r.enforcement.is_unsandboxed());
        assert!(r.enforcement.to_string().starts_with("not confined"), "{}", r.enforcement);
    }

    #[tokio::test]
    async fn background_process_stdin_poll_and_kill() {
        let f = Fixture::new();
        let sb = f.sandbox();
        let mut spec = CommandSpec::new("/bin/cat", Vec::<String>::new(), f.ws());
        spec.stdin = true;
        let mut p = sb.spawn(spec).unwrap();
        p.write_stdin(b"hello\n").await.unwrap();
        let deadline = Instant::now() + Duration::from_secs(5);
        let mut seen = String::new();
        while !seen.contains("hello") && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(20)).await;
            seen.push_str(&p.poll_output());
        }
        assert_eq!(seen, "hello\n");
        assert_eq!(p.poll_output(), "");
        // More than a pipe holds: write_stdin waits for the command to read.
        let big = vec![b'x'; 1 << 20];
        p.write_stdin(&big).await.unwrap();
        p.close_stdin();
        let r = p.wait().await.unwrap();
        assert!(r.exit.success());
        assert_eq!(r.output.total_bytes, 6 + (1 << 20));

        let mut p = sb.spawn(CommandSpec::new("/bin/sleep", ["30"], f.ws())).unwrap();
        let t = Instant::now();
        p.kill_tree().await.unwrap();
        assert!(t.elapsed() < Duration::from_secs(5));
        assert!(matches!(p.try_wait().unwrap(), Some(ExitStatusKind::Signal(_))));
    }
}

mod concurrency {
    use super::*;

    /// A signal sent the moment `spawn` returns, while the namespace's init may still be setting
    /// up and the command not yet started, must still reach the command: the init queues it and
    /// forwards it once the command runs. Each signal arrives once.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_signal_sent_during_setup_reaches_the_command_once() {
        let f = Fixture::new();
        let sb = f.sandbox();
        for _ in 0..20 {
            let mut p = sb.spawn(CommandSpec::new("/bin/sleep", ["60"], f.ws())).unwrap();
            p.signal(libc::SIGTERM).unwrap();
            let exit = tokio::time::timeout(Duration::from_secs(20), p.wait_exit()).await;
            let exit = exit.expect("SIGTERM sent during setup was lost: sleep 60 still runs").unwrap();
            assert_eq!(exit, ExitStatusKind::Signal(libc::SIGTERM));
        }
        // Counted by the command: one SIGUSR1 sent, one received.
        let script = "n=0; trap 'n=$((n+1))' USR1; echo ready; while [ ! -e go ]; do sleep 0.02; done; echo got $n";
        let p = sb.spawn(CommandSpec::shell(script, f.ws())).unwrap();
        let deadline = Instant::now() + Duration::from_secs(20);
        let mut seen = String::new();
        while !seen.contains("ready") && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(20)).await;
            seen.push_str(&p.poll_output());
        }
        p.signal(libc::SIGUSR1).unwrap();
        tokio::time::sleep(Duration::from_millis(300)).await;
        fs::write(f.ws().join("go"), "").unwrap();
        let r = tokio::time::timeout(Duration::from_secs(20), p.wait()).await.unwrap().unwrap();
        // (The loop's `sleep` may die of the signal too, as in any process group.)
        assert!(r.output.text().ends_with("got 1\n"), "{}", r.output.text());
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn parallel_runs_keep_their_own_output_and_stdin() {
        let f = Fixture::new();
        let sb = std::sync::Arc::new(f.sandbox());
        let mut tasks = Vec::new();
        for i in 0..12 {
            let sb = std::sync::Arc::clone(&sb);
            let ws = f.ws().to_path_buf();
            tasks.push(tokio::spawn(async move {
                let mut spec = CommandSpec::shell(format!("cat; echo run-{i}"), ws).timeout(Duration::from_secs(20));
                spec.stdin = true;
                let r = sb.run(spec, CancellationToken::new()).await.unwrap();
                (i, r)
            }));
        }
        for t in tasks {
            let (i, r) = t.await.unwrap();
            assert_eq!(r.exit, ExitStatusKind::Code(0));
            assert_eq!(r.output.text(), format!("run-{i}\n"));
        }
    }

    #[tokio::test]
    async fn dropping_a_running_process_kills_its_tree() {
        let f = Fixture::new();
        let sb = f.sandbox();
        let p = sb.spawn(CommandSpec::shell("/bin/sleep 987671 & /bin/sleep 987672", f.ws())).unwrap();
        tokio::time::sleep(Duration::from_millis(200)).await;
        assert!(!processes_with("sleep 98767").is_empty());
        drop(p);
        tokio::time::sleep(Duration::from_millis(200)).await;
        assert!(processes_with("sleep 98767").is_empty(), "{:?}", processes_with("sleep 98767"));
    }
}

mod attacks {
    use super::*;

    #[tokio::test]
    async fn write_outside_workspace() {
        let f = Fixture::new();
        let sb = f.sandbox();
        let canary = f.canary();
        let target = f.outside.path().join("new");
        let script = format!(
            "echo pwned > {c}; echo pwned >> {c}; rm -f {c}; echo pwned > {t}; mkdir {t}.d; touch /etc/pwned; \
             echo x > /root/pwned; cp /bin/true /usr/local/bin/pwned",
            c = canary.display(),
            t = target.display()
        );
        let r = sh(&sb, f.ws(), &script).await;
        f.assert_canary_intact();
        assert!(!Path::new("/etc/pwned").exists() && !Path::new("/root/pwned").exists());
        assert!(!Path::new("/usr/local/bin/pwned").exists());
        let denied = path_denials(&r);
        assert!(denied.iter().any(|(p, _)| p == &canary), "{denied:?}\n{}", r.output.text());
        assert!(denied.iter().any(|(p, w)| p == Path::new("/etc/pwned") && *w), "{denied:?}");
        assert!(r.denials.iter().all(|d| d.to_string().starts_with("blocked by the sandbox: ")));
    }

    #[tokio::test]
    async fn hard_link_to_a_read_only_file_then_written() {
        let f = Fixture::new();
        let readable = tempfile::Builder::new().prefix("tg-readable-").tempdir().unwrap();
        let canary = readable.path().join("canary");
        fs::write(&canary, "CANARY\n").unwrap();
        let policy = SandboxPolicy { extra_readable: vec![readable.path().to_path_buf()], ..f.policy() };
        let sb = Sandbox::new(policy).unwrap();
        let r = sh(
            &sb,
            f.ws(),
            &format!("cat {c}; ln {c} hard; echo pwned >> hard; echo pwned >> {c}", c = canary.display()),
        )
        .await;
        assert!(r.output.text().starts_with("CANARY"), "{}", r.output.text());
        assert_eq!(fs::read_to_string(&canary).unwrap(), "CANARY\n");
        assert!(path_denials(&r).iter().any(|(p, w)| p == &canary && *w), "{:?}", r.denials);
    }

    #[tokio::test]
    async fn read_outside_readable_set() {
        let f = Fixture::new();
        let sb = f.sandbox();
        let r = sh(&sb, f.ws(), &format!("cat {}; ls {}", f.canary().display(), f.outside.path().display())).await;
        assert!(!r.output.text().contains("CANARY-SECRET"), "{}", r.output.text());
        let denied = path_denials(&r);
        assert!(denied.iter().any(|(p, w)| p == &f.canary() && !*w), "{denied:?}");
        // The home directory and /etc/shadow are not readable either (as root too).
        let r = sh(&sb, f.ws(), "cat /etc/shadow; ls /root /home").await;
        assert!(!r.output.text().contains("root:"), "{}", r.output.text());
        assert!(!r.exit.success());
        // System directories are.
        let r = sh(&sb, f.ws(), "cat /etc/passwd >/dev/null && ls /usr/bin >/dev/null && echo ok").await;
        assert_eq!(r.output.text(), "ok\n");
    }

    #[tokio::test]
    async fn cd_dotdot_tricks() {
        let f = Fixture::new();
        let sb = f.sandbox();
        fs::create_dir_all(f.ws().join("a/b")).unwrap();
        let rel = pathdiff(f.outside.path(), &f.ws().join("a/b"));
        let script = format!(
            "cd ..; cd ..; cd ..; echo pwned > escaped.txt; cd {ws}/a/b; echo pwned > {rel}/canary; \
             echo pwned > ../../../{name}/canary; cd /; echo pwned > {out}/canary",
            ws = f.ws().display(),
            rel = rel.display(),
            name = f.outside.path().file_name().unwrap().to_string_lossy(),
            out = f.outside.path().display(),
        );
        let r = sh(&sb, &f.ws().join("a/b"), &script).await;
        f.assert_canary_intact();
        assert!(!f.ws().parent().unwrap().join("escaped.txt").exists());
        assert!(!path_denials(&r).is_empty(), "{}", r.output.text());
    }

    /// `outside` relative to `from`, with `..` components.
    fn pathdiff(outside: &Path, from: &Path) -> PathBuf {
        let mut rel = PathBuf::new();
        for _ in from.components().skip(1) {
            rel.push("..");
        }
        rel.join(outside.strip_prefix("/").unwrap())
    }

    #[tokio::test]
    async fn symlink_pointing_out_then_written_through() {
        let f = Fixture::new();
        let sb = f.sandbox();
        // A link planted before the run, and one made by the command itself; a dangling one too.
        std::os::unix::fs::symlink(f.canary(), f.ws().join("planted")).unwrap();
        let script = format!(
            "ln -s {c} made; echo pwned > made; echo pwned > planted; ln -s {d} dangling; echo pwned > dangling; \
             ln -s {o} dirlink; echo pwned > dirlink/new; cat planted",
            c = f.canary().display(),
            d = f.outside.path().join("new").display(),
            o = f.outside.path().display(),
        );
        let r = sh(&sb, f.ws(), &script).await;
        f.assert_canary_intact();
        assert!(!r.output.text().contains("CANARY-SECRET"), "{}", r.output.text());
    }

    #[tokio::test]
    async fn network_connect_with_network_off() {
        let f = Fixture::new();
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let port = listener.local_addr().unwrap().port();
        let sb = f.sandbox();
        let script = format!(
            "/usr/bin/bash -c 'echo hi > /dev/tcp/127.0.0.1/{port}'; /usr/bin/python3 -c \"import socket; socket.create_connection(('127.0.0.1', {port}))\"; \
             /usr/bin/perl -e 'use IO::Socket::INET; IO::Socket::INET->new(PeerAddr => \"127.0.0.1:{port}\") or die \"perl: $!\\n\"'"
        );
        let r = sh(&sb, f.ws(), &script).await;
        std::thread::sleep(Duration::from_millis(100));
        assert!(listener.accept().is_err(), "a sandboxed process connected: {}", r.output.text());
        assert!(r.denials.iter().any(|d| d.kind == DenialKind::Network), "{:?}\n{}", r.denials, r.output.text());

        // Positive control: with the network on, the same connection arrives.
        let on = Sandbox::new(SandboxPolicy { network: Network::On, ..f.policy() }).unwrap();
        let r = sh(&on, f.ws(), &format!("/usr/bin/bash -c 'echo hi > /dev/tcp/127.0.0.1/{port}'")).await;
        assert!(r.exit.success(), "{}", r.output.text());
        std::thread::sleep(Duration::from_millis(100));
        assert!(listener.accept().is_ok());
    }

    /// Landlock does not mediate `connect` to a UNIX socket path (tmux, ssh-agent, docker): the
    /// directories that hold them are hidden behind an empty tmpfs, network on or off.
    #[tokio::test]
    async fn unix_sockets_outside_are_unreachable() {
        let f = Fixture::new();
        let sock = f.outside.path().join("agent.sock");
        let listener = std::os::unix::net::UnixListener::bind(&sock).unwrap();
        listener.set_nonblocking(true).unwrap();
        let script = format!(
            "/usr/bin/python3 -c \"import socket; s = socket.socket(socket.AF_UNIX); s.connect('{}'); print('connected')\"",
            sock.display()
        );
        for network in [Network::Off, Network::On] {
            let sb = Sandbox::new(SandboxPolicy { network, ..f.policy() }).unwrap();
            if !sb.enforcement().namespaces.mount {
                eprintln!("no mount namespace: socket hiding not available, skipping");
                return;
            }
            let r = sh(&sb, f.ws(), &script).await;
            assert!(!r.output.text().contains("connected"), "{}", r.output.text());
            assert!(listener.accept().is_err(), "a sandboxed process reached the socket");
        }
    }

    #[tokio::test]
    async fn fork_bomb_is_contained() {
        let f = Fixture::new();
        let mut policy = f.policy();
        policy.limits.max_processes = 64;
        let sb = Sandbox::new(policy).unwrap();
        let spec = CommandSpec::new("/usr/bin/bash", ["-c", "bomb() { bomb | bomb & }; bomb; sleep 3"], f.ws())
            .timeout(Duration::from_secs(4));
        let t = Instant::now();
        let r = sb.run(spec, CancellationToken::new()).await.unwrap();
        assert!(t.elapsed() < Duration::from_secs(12), "took {:?}", t.elapsed());
        // The test process (and the machine) still works, and no bomb process is left.
        let ok = sh(&sb, f.ws(), "echo alive").await;
        assert_eq!(ok.output.text(), "alive\n");
        tokio::time::sleep(Duration::from_millis(200)).await;
        assert!(processes_with("bomb() {").is_empty(), "{:?}", processes_with("bomb() {"));
        assert!(r.enforcement.process_limit.is_some(), "{}", r.enforcement);
    }

    #[tokio::test]
    async fn memory_bomb_hits_the_address_space_limit() {
        let f = Fixture::new();
        let mut policy = f.policy();
        policy.limits.address_space_bytes = 512 << 20;
        let sb = Sandbox::new(policy).unwrap();
        let r = sh(&sb, f.ws(), "/usr/bin/python3 -c 'a = bytearray(1 << 30); print(\"allocated\")'").await;
        assert!(!r.exit.success());
        assert!(!r.output.text().contains("allocated"), "{}", r.output.text());
        assert!(r.output.text().contains("MemoryError"), "{}", r.output.text());
    }

    #[tokio::test]
    async fn endless_output_is_capped_and_memory_stays_flat() {
        let f = Fixture::new();
        let sb = f.sandbox();
        let log = f.ws().join("out.log");
        let mut spec =
            CommandSpec::new("/usr/bin/yes", ["endless output line"], f.ws()).timeout(Duration::from_secs(3));
        spec.output_cap_bytes = 64 * 1024;
        spec.log_path = Some(log.clone());
        spec.log_max_bytes = 4 << 20;
        let before = rss_kib();
        let r = sb.run(spec, CancellationToken::new()).await.unwrap();
        let grown = rss_kib().saturating_sub(before);
        assert_eq!(r.exit, ExitStatusKind::TimedOut);
        assert!(r.output.truncated);
        assert!(r.output.total_bytes > 10 << 20, "only {} bytes", r.output.total_bytes);
        assert!(r.output.head.len() + r.output.tail.len() <= 64 * 1024);
        assert!(r.output.tail.ends_with("endless output line\n") || r.output.tail.contains("endless"));
        let log_len = fs::metadata(&log).unwrap().len();
        assert!(log_len <= (4 << 20) + 200, "log grew to {log_len}");
        assert!(grown < 32 * 1024, "RSS grew by {grown} KiB");
    }

    #[tokio::test]
    async fn timeout_kills_grandchildren_that_ignore_sigterm() {
        let f = Fixture::new();
        let sb = f.sandbox();
        let script = "trap '' TERM; (trap '' TERM; exec /bin/sleep 987651) & \
                      /usr/bin/setsid /bin/sh -c \"trap '' TERM; exec /bin/sleep 987652\" & \
                      /bin/sleep 987653";
        let spec = CommandSpec::shell(script, f.ws()).timeout(Duration::from_secs(1));
        let t = Instant::now();
        let r = sb.run(spec, CancellationToken::new()).await.unwrap();
        assert_eq!(r.exit, ExitStatusKind::TimedOut);
        assert!(t.elapsed() < Duration::from_secs(1) + Duration::from_secs(5), "{:?}", t.elapsed());
        tokio::time::sleep(Duration::from_millis(200)).await;
        for token in ["sleep 987651", "sleep 987652", "sleep 987653"] {
            assert!(processes_with(token).is_empty(), "{token} survived: {:?}", processes_with(token));
        }
    }

    #[tokio::test]
    async fn cancellation_kills_the_tree() {
        let f = Fixture::new();
        let sb = f.sandbox();
        let cancel = CancellationToken::new();
        let c2 = cancel.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(300)).await;
            c2.cancel();
        });
        let spec = CommandSpec::shell("/bin/sleep 987661 & /bin/sleep 987662", f.ws());
        let r = sb.run(spec, cancel).await.unwrap();
        assert_eq!(r.exit, ExitStatusKind::Cancelled);
        tokio::time::sleep(Duration::from_millis(200)).await;
        assert!(processes_with("sleep 98766").is_empty());
    }

    #[tokio::test]
    async fn secrets_in_the_parent_environment_are_not_visible() {
        // SAFETY: the test sets variables before any command reads them; concurrent tests only
        // read the environment through std, which locks.
        unsafe {
            std::env::set_var("TOOLGATE_TEST_API_KEY", "sk-planted-secret-1");
            std::env::set_var("AWS_SECRET_ACCESS_KEY", "planted-secret-2");
            std::env::set_var("UNLISTED_VARIABLE", "planted-secret-3");
        }
        let f = Fixture::new();
        let sb = f.sandbox();
        let r = sh(&sb, f.ws(), "env; cat /proc/self/environ").await;
        let out = r.output.text();
        assert!(!out.contains("planted-secret"), "{out}");
        assert!(out.contains("PATH="), "{out}");
        // Nor can the command read the parent's environment through /proc.
        let r = sh(&sb, f.ws(), &format!("cat /proc/{}/environ", std::process::id())).await;
        assert!(!r.output.text().contains("planted-secret"), "{}", r.output.text());
        // Caller-approved variables do reach the command.
        let spec = CommandSpec::shell("echo $GREETING", f.ws()).env("GREETING", "hello");
        let r = sb.run(spec, CancellationToken::new()).await.unwrap();
        assert_eq!(r.output.text(), "hello\n");
    }

    #[tokio::test]
    async fn git_hooks_and_config_stay_read_only() {
        let f = Fixture::new();
        fs::create_dir_all(f.ws().join(".git/hooks")).unwrap();
        fs::write(f.ws().join(".git/config"), "[core]\n").unwrap();
        fs::create_dir_all(f.ws().join(".toolgate")).unwrap();
        fs::write(f.ws().join(".toolgate/state.db"), "STATE-SECRET").unwrap();
        let sb = f.sandbox();
        let r = sh(
            &sb,
            f.ws(),
            "echo evil > .git/hooks/pre-commit; echo '[core] hooksPath=/tmp' >> .git/config; \
             mv .git .git-old; mv .git/hooks .git/h2; rm -rf .git/hooks; cat .toolgate/state.db; \
             echo x > .toolgate/new; mkdir -p .git/objects && echo ok > .git/objects/x && echo objects-writable",
        )
        .await;
        assert!(!f.ws().join(".git/hooks/pre-commit").exists());
        assert_eq!(fs::read_to_string(f.ws().join(".git/config")).unwrap(), "[core]\n");
        assert!(f.ws().join(".git/hooks").is_dir() && !f.ws().join(".git-old").exists());
        let out = r.output.text();
        assert!(!out.contains("STATE-SECRET"), "{out}");
        assert!(!f.ws().join(".toolgate/new").exists());
        assert!(out.contains("objects-writable"), "{out}");
        assert!(path_denials(&r).iter().any(|(p, w)| p.ends_with(".git/hooks/pre-commit") && *w), "{:?}", r.denials);
    }

    #[tokio::test]
    async fn missing_hooks_dir_and_hooks_path_are_protected() {
        let f = Fixture::new();
        fs::create_dir_all(f.ws().join(".git")).unwrap();
        fs::write(f.ws().join(".git/config"), "[core]\n\thooksPath = .husky\n").unwrap();
        fs::create_dir_all(f.ws().join(".husky")).unwrap();
        let sb = f.sandbox();
        let r = sh(
            &sb,
            f.ws(),
            "mkdir -p .git/hooks; echo evil > .git/hooks/pre-commit; echo evil > .husky/pre-commit; echo ok > src.txt",
        )
        .await;
        assert!(!f.ws().join(".git/hooks/pre-commit").exists(), "{}", r.output.text());
        assert!(!f.ws().join(".husky/pre-commit").exists(), "{}", r.output.text());
        assert!(f.ws().join("src.txt").exists());
        assert!(path_denials(&r).iter().any(|(p, _)| p.ends_with(".husky/pre-commit")), "{:?}", r.denials);
    }

    #[cfg(target_arch = "x86_64")]
    #[tokio::test]
    async fn forbidden_syscalls_are_killed_with_sigsys() {
        let f = Fixture::new();
        let sb = f.sandbox();
        // ptrace (101 on x86_64) through perl's raw syscall.
        let r = sh(&sb, f.ws(), "exec /usr/bin/perl -e 'syscall(101, 0, 0, 0, 0); print \"survived\\n\"'").await;
        assert_eq!(r.exit, ExitStatusKind::Signal(libc::SIGSYS), "{}", r.output.text());
        assert!(r.denials.iter().any(|d| d.kind == DenialKind::Syscall));
        // New user namespaces are refused.
        let r = sh(&sb, f.ws(), "/usr/bin/unshare -U /bin/true && echo escaped").await;
        assert!(!r.output.text().contains("escaped"), "{}", r.output.text());
        // Signals cannot reach processes outside the sandbox (the test process itself).
        let r = sh(&sb, f.ws(), &format!("kill -TERM {} && echo sent", std::process::id())).await;
        assert!(!r.output.text().contains("sent"), "{}", r.output.text());
    }
}

/// What `ps` and `/proc` show a command: its own processes, not another command's (of the same
/// sandbox or another one: another user's, in a gateway), not the host's.
mod proc_visibility {
    use super::*;

    /// Pids listed in `/proc`, `ps`'s command lines, and whether the host's pid `$HOST` and its
    /// command line can be read (the words are split in the script, which `ps` shows).
    const LOOK: &str = r#"
        echo "pids: $(cd /proc && ls -d [0-9]* | tr '\n' ' ')"
        ps -eo pid=,args= | sed 's/^/ps: /'
        for d in /proc/[0-9]*; do echo "cmdline: $(tr '\0' ' ' < $d/cmdline)"; done
        test -e /proc/$HOST && echo "host pid ""visible"
        cat /proc/$HOST/cmdline 2>/dev/null && echo "host cmdline ""read"
        true
    "#;

    fn skip_without_own_proc() -> bool {
        if !status().own_proc {
            eprintln!("this machine cannot give a PID namespace its own /proc: commands see the host's");
            return true;
        }
        false
    }

    fn pids(text: &str) -> Vec<u32> {
        let line = text.lines().find_map(|l| l.strip_prefix("pids: ")).unwrap_or_else(|| panic!("{text}"));
        line.split_whitespace().map(|p| p.parse().unwrap()).collect()
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_command_sees_neither_another_commands_processes_nor_the_hosts() {
        if skip_without_own_proc() {
            return;
        }
        let f = Fixture::new();
        let other = Fixture::new();
        let first = f.sandbox();
        let second = other.sandbox();
        // Another call's background process (same sandbox), another user's (another sandbox),
        // and one of the host.
        let mut same = first.spawn(CommandSpec::new("/bin/sleep", ["4831.71"], f.ws())).unwrap();
        let mut theirs = second.spawn(CommandSpec::new("/bin/sleep", ["4831.72"], other.ws())).unwrap();
        let host = KillOnDrop(std::process::Command::new("/bin/sleep").arg("4831.73").spawn().unwrap());
        let all_running = || ["4831.71", "4831.72", "4831.73"].iter().all(|m| !processes_with(m).is_empty());
        let deadline = Instant::now() + Duration::from_secs(10);
        while !all_running() && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert!(all_running(), "{:?}", processes_with("sleep 4831.7"));

        for (sandbox, ws) in [(&first, f.ws()), (&second, other.ws())] {
            let spec =
                CommandSpec::shell(LOOK, ws).env("HOST", host.0.id().to_string()).timeout(Duration::from_secs(20));
            let r = sandbox.run(spec, CancellationToken::new()).await.unwrap();
            let text = r.output.text();
            assert!(r.exit.success(), "{:?}: {text}", r.exit);
            assert!(r.enforcement.own_proc, "{}", r.enforcement);
            assert!(!text.contains("4831.7"), "another process is visible:\n{text}");
            assert!(!text.contains("host pid visible") && !text.contains("host cmdline read"), "{text}");
            // The namespace's init (1), the shell (2) and what the shell started: nothing else.
            let pids = pids(&text);
            assert!(pids.contains(&1) && pids.iter().all(|p| *p < 50), "{pids:?}\n{text}");
            assert!(text.lines().any(|l| l.starts_with("ps: ") && l.contains("ps -eo")), "{text}");
        }

        same.kill_tree().await.unwrap();
        theirs.kill_tree().await.unwrap();
    }

    /// A host process that ends with the test, failed or not.
    struct KillOnDrop(std::process::Child);

    impl Drop for KillOnDrop {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn what_tools_read_in_proc_still_works() {
        if skip_without_own_proc() {
            return;
        }
        let f = Fixture::new();
        let sb = f.sandbox();
        let script = r#"
            echo "self: $(readlink /proc/self)"
            echo "exe: $(readlink /proc/self/exe)"
            echo "cpus: $(grep -c ^processor /proc/cpuinfo)"
            echo "nproc: $(nproc)"
            grep ^MemTotal: /proc/meminfo
            grep -c . /proc/self/status | sed 's/^/status lines: /'
            ls /proc/self/fd >/dev/null && echo "fd listed"
            echo x > /proc/self/comm && echo "proc written"
            true
        "#;
        let r = sh(&sb, f.ws(), script).await;
        let text = r.output.text();
        assert!(r.exit.success(), "{text}");
        let host_cpus =
            fs::read_to_string("/proc/cpuinfo").unwrap().lines().filter(|l| l.starts_with("processor")).count();
        let nproc = std::thread::available_parallelism().unwrap().get();
        assert!(text.contains(&format!("cpus: {host_cpus}\n")), "{text}");
        assert!(text.contains(&format!("nproc: {nproc}\n")), "{text}");
        assert!(text.contains("MemTotal:") && text.contains("fd listed"), "{text}");
        assert!(text.lines().any(|l| l.starts_with("exe: /") && l.ends_with("/readlink")), "{text}");
        // `self` is the shell's pid in its own namespace: small, not the host's.
        let own: u32 = text.lines().find_map(|l| l.strip_prefix("self: ")).unwrap().parse().unwrap();
        assert!(own < 50, "{text}");
        // /proc stays read-only to the command (as the host's was).
        assert!(!text.contains("proc written"), "{text}");
        // And the status says so.
        assert!(status().to_string().contains("/proc:       the PID namespace's own"), "{}", status());
        assert!(r.enforcement.to_string().contains("own /proc"), "{}", r.enforcement);
    }
}

mod lifetime {
    use super::*;

    /// The id of the calling thread, from `/proc/thread-self` (`<pid>/task/<tid>`).
    fn thread_id() -> String {
        let link = fs::read_link("/proc/thread-self").unwrap();
        link.file_name().unwrap().to_string_lossy().into_owned()
    }

    /// Every child asks for `PR_SET_PDEATHSIG`, which fires when the *thread* that cloned it
    /// ends. Tokio's blocking-pool threads retire when idle: a command spawned from one must
    /// outlive it (the clone is made on the sandbox's own thread, which never ends). The
    /// process-death side is tested with a real `kill -9` in `crates/cli/tests/it/kill.rs`.
    #[test]
    fn a_command_outlives_the_thread_that_spawned_it() {
        let fx = Fixture::new();
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_keep_alive(Duration::from_millis(20))
            .enable_all()
            .build()
            .unwrap();
        let sandbox = std::sync::Arc::new(fx.sandbox());
        runtime.block_on(async {
            let (sb, ws) = (sandbox.clone(), fx.ws().to_path_buf());
            let (mut process, tid) = tokio::task::spawn_blocking(move || {
                let process = sb.spawn(CommandSpec::shell("sleep 30", &ws)).unwrap();
                (process, thread_id())
            })
            .await
            .unwrap();
            let task = PathBuf::from(format!("/proc/self/task/{tid}"));
            let start = Instant::now();
            while task.exists() {
                assert!(start.elapsed() < Duration::from_secs(20), "the blocking-pool thread did not retire");
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            tokio::time::sleep(Duration::from_millis(300)).await;
            assert_eq!(process.try_wait().unwrap(), None, "the command died with the thread that spawned it");
            process.kill_tree().await.unwrap();
        });
    }

    /// What a contained process reports about itself: its pid, its parent's, and the death
    /// signal (`/proc` shows no field for it: Python's ctypes calls `prctl(PR_GET_PDEATHSIG)`).
    const SELF_REPORT: &str = "import ctypes, ctypes.util, os; l = ctypes.CDLL(ctypes.util.find_library('c')); \
                               s = ctypes.c_int(); l.prctl(2, ctypes.byref(s)); print(os.getpid(), s.value)";

    fn contained(script: &str) -> (std::process::Command, bool) {
        let mut cmd = std::process::Command::new("sh");
        cmd.args(["-c", script]).stdin(std::process::Stdio::null());
        let whole_tree = toolgate_sandbox::contain(&mut cmd);
        (cmd, whole_tree)
    }

    /// The command asks for `SIGKILL` when its parent dies, and runs as the first process of its
    /// own PID namespace where the machine allows one (this one does: the kill test needs it).
    #[test]
    fn a_contained_command_dies_with_its_parent_and_leads_its_own_pid_namespace() {
        let (mut cmd, whole_tree) = contained(&format!("exec python3 -c \"{SELF_REPORT}\""));
        assert!(whole_tree, "this machine has user and PID namespaces: {:?}", toolgate_sandbox::status());
        let out = cmd.output().unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "1 9", "pid 1, PR_GET_PDEATHSIG is SIGKILL");
    }

    /// The caller sees the command's exit code and output as if it had started it directly, and
    /// gets them when the command ends (the relay holds none of the pipes).
    #[test]
    fn a_contained_command_keeps_its_exit_code_stdin_and_output() {
        let (mut cmd, _) = contained("read line; echo \"got $line\"; echo oops >&2; exit 7");
        cmd.stdin(std::process::Stdio::piped()).stdout(std::process::Stdio::piped());
        cmd.stderr(std::process::Stdio::piped());
        let mut child = cmd.spawn().unwrap();
        {
            use std::io::Write;
            child.stdin.take().unwrap().write_all(b"hello\n").unwrap();
        }
        let out = child.wait_with_output().unwrap();
        assert_eq!(out.status.code(), Some(7));
        assert_eq!(String::from_utf8_lossy(&out.stdout), "got hello\n");
        assert_eq!(String::from_utf8_lossy(&out.stderr), "oops\n");
        let mut missing = std::process::Command::new("/nonexistent/program");
        toolgate_sandbox::contain(&mut missing);
        let err = missing.spawn().expect_err("a missing program is a spawn error, as without containment");
        assert_eq!(err.kind(), std::io::ErrorKind::NotFound, "{err}");
    }

    /// Killing the process the caller started (`kill_on_drop`, toolgate's death) takes every
    /// process the command started, including one that left its session with `setsid`.
    #[test]
    fn killing_a_contained_command_kills_what_it_started() {
        let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().subsec_nanos();
        let marker = format!("1000.{}{nanos:09}", std::process::id());
        let (mut cmd, _) = contained(&format!("setsid sleep {marker} & sleep {marker}"));
        let mut child = cmd.stdout(std::process::Stdio::null()).spawn().unwrap();
        let running = || sleeps_with(&marker);
        let start = Instant::now();
        while running() < 2 {
            assert!(start.elapsed() < Duration::from_secs(20), "both sleeps started");
            std::thread::sleep(Duration::from_millis(20));
        }
        child.kill().unwrap();
        child.wait().unwrap();
        let start = Instant::now();
        while running() > 0 {
            assert!(start.elapsed() < Duration::from_secs(20), "the sleeps outlived the killed command");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Processes whose command line holds `marker`.
    fn sleeps_with(marker: &str) -> usize {
        fs::read_dir("/proc")
            .unwrap()
            .flatten()
            .filter(|e| e.file_name().to_str().is_some_and(|n| n.parse::<u32>().is_ok()))
            .filter_map(|e| fs::read(e.path().join("cmdline")).ok())
            .filter(|c| String::from_utf8_lossy(c).contains(marker))
            .count()
    }
}

// A server over its standard streams (bridged MCP servers).

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_gets_three_pipes_and_its_environment_alone() {
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
    let f = Fixture::new();
    let sandbox = f.sandbox();
    // Echoes each stdin line on stdout and says its environment's variable count on stderr.
    let mut spec = CommandSpec::shell("env | wc -l >&2; while read line; do echo \"got $line\"; done", f.ws());
    spec.clear_env = true;
    spec.env.push(("ONLY".into(), "this".into()));
    let mut server = sandbox.spawn_server(spec).unwrap();
    server.stdin.write_all(b"ping\n").await.unwrap();
    let mut stdout = BufReader::new(server.stdout).lines();
    assert_eq!(stdout.next_line().await.unwrap().as_deref(), Some("got ping"));
    let mut stderr = BufReader::new(server.stderr).lines();
    let count: usize = stderr.next_line().await.unwrap().unwrap().trim().parse().unwrap();
    // ONLY, TMPDIR, PWD and what sh sets itself (no PATH, HOME or anything of toolgate's).
    assert!(count <= 5, "{count} variables");
    drop(server.stdin);
    assert_eq!(server.process.wait_exit().await.unwrap(), ExitStatusKind::Code(0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_only_server_writes_its_state_folder_inside_the_hidden_toolgate_folder_only() {
    let f = Fixture::new();
    let state = f.ws().join(".toolgate/mcp/demo");
    fs::create_dir_all(&state).unwrap();
    fs::write(f.ws().join(".toolgate/state.db"), "SECRETS").unwrap();
    fs::write(f.ws().join("notes.txt"), "workspace file\n").unwrap();
    let policy =
        SandboxPolicy { extra_writable: vec![PathBuf::from(".toolgate/mcp/demo")], ..SandboxPolicy::read_only(f.ws()) };
    let sandbox = Sandbox::new(policy).unwrap();
    let r = sh(
        &sandbox,
        f.ws(),
        "cat notes.txt; echo kept > .toolgate/mcp/demo/state; ls -A .toolgate; cat .toolgate/state.db; \
         echo no > notes.txt; echo no > new.txt; echo no > \"$TMPDIR/tmp-ok\" && echo tmp-ok",
    )
    .await;
    let text = r.output.text();
    assert!(text.contains("workspace file"), "{text}");
    assert_eq!(fs::read_to_string(state.join("state")).unwrap(), "kept\n");
    // Only the state folder's path shows in .toolgate; the database is not there to read.
    assert!(!text.contains("SECRETS") && text.contains("state.db: No such file"), "{text}");
    assert_eq!(text.lines().nth(1), Some("mcp"), "{text}");
    assert_eq!(fs::read_to_string(f.ws().join("notes.txt")).unwrap(), "workspace file\n");
    assert!(!f.ws().join("new.txt").exists());
    assert!(text.contains("tmp-ok"), "{text}");
    f.assert_canary_intact();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_proxied_server_reaches_its_listener_and_nothing_else() {
    use std::io::Read;
    let f = Fixture::new();
    // A listener on the host's loopback that the server must not reach.
    let host = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let host_port = host.local_addr().unwrap().port();
    host.set_nonblocking(true).unwrap();
    let proxy_port = 18_000 + (std::process::id() % 1000) as u16;
    let policy = SandboxPolicy { proxy_port: Some(proxy_port), ..SandboxPolicy::read_only(f.ws()) };
    let sandbox = Sandbox::new(policy).unwrap();
    let script = format!(
        "import socket\n\
         try:\n    socket.create_connection(('127.0.0.1', {host_port}), timeout=2); print('host reached')\n\
         except OSError as e:\n    print('host refused:', e)\n\
         s = socket.create_connection(('127.0.0.1', {proxy_port}), timeout=5)\n\
         s.sendall(b'through the proxy\\n')\n\
         print('sent')\n"
    );
    let spec = CommandSpec::new("/usr/bin/python3", ["-c".to_string(), script], f.ws());
    let mut server = sandbox.spawn_server(spec).unwrap();
    let listener = server.proxy_listener.take().expect("the listener of the proxied network");
    listener.set_nonblocking(true).unwrap();
    let started = Instant::now();
    let mut conn = loop {
        match listener.accept() {
            Ok((conn, _)) => break conn,
            // A hang guard, not a timing assertion.
            Err(_) if started.elapsed() < Duration::from_secs(60) => std::thread::sleep(Duration::from_millis(20)),
            Err(e) => {
                let mut err = String::new();
                let _ = tokio::io::AsyncReadExt::read_to_string(&mut server.stderr, &mut err).await;
                panic!("no connection: {e}; stderr: {err}");
            }
        }
    };
    conn.set_nonblocking(false).unwrap();
    let mut got = String::new();
    conn.read_to_string(&mut got).unwrap();
    assert_eq!(got, "through the proxy\n");
    let mut out = String::new();
    let mut stdout = server.stdout;
    tokio::io::AsyncReadExt::read_to_string(&mut stdout, &mut out).await.unwrap();
    assert!(out.contains("host refused") && out.contains("sent"), "{out}");
    assert!(host.accept().is_err(), "the host's listener was reached");
}

// Every command is reaped: a long-lived server (`toolgate serve`) runs thousands.

/// Whether `pid` is a zombie child of this process (ended, never reaped: it holds its pid and
/// the descriptor the sandbox watched it with).
fn zombie_child(pid: u32) -> bool {
    let Ok(stat) = fs::read_to_string(format!("/proc/{pid}/stat")) else { return false };
    // `pid (comm) S ppid ...`; the name may hold spaces and parentheses.
    let Some((_, rest)) = stat.rsplit_once(") ") else { return false };
    let mut fields = rest.split_whitespace();
    let state = fields.next();
    let ppid = fields.next().and_then(|p| p.parse::<u32>().ok());
    state == Some("Z") && ppid == Some(std::process::id())
}

/// Short commands, each waited for, leave neither a zombie nor a descriptor behind. With a PID
/// namespace the init reports the command's exit and then exits itself; the wait that saw the
/// init's exit first (both arrive at once) took the descriptor's readiness, and the reaper
/// handed the init afterwards waited for it forever: a zombie and a pidfd per such command
/// (the load run's stdio servers grew by 90 descriptors).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_command_is_reaped_and_its_descriptors_closed() {
    let f = Fixture::new();
    let sb = std::sync::Arc::new(f.sandbox());
    // Four at a time, as a server's clients make them.
    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..4 {
        let (sb, ws) = (std::sync::Arc::clone(&sb), f.ws().to_path_buf());
        tasks.spawn(async move {
            let mut pids = Vec::new();
            for _ in 0..30 {
                let p = sb.spawn(CommandSpec::new("/bin/true", Vec::<String>::new(), &ws)).unwrap();
                pids.push(p.pid());
                let r = tokio::time::timeout(Duration::from_secs(20), p.wait()).await.expect("true ends").unwrap();
                assert!(r.exit.success(), "{:?}", r.exit);
            }
            pids
        });
    }
    let mut pids = Vec::new();
    while let Some(done) = tasks.join_next().await {
        pids.extend(done.unwrap());
    }
    // The init is reaped in the background once it reported: give that a bounded moment.
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut left: Vec<u32> = pids.clone();
    while !left.is_empty() && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
        left.retain(|&p| zombie_child(p));
    }
    assert!(left.is_empty(), "{} of {} commands were never reaped: {left:?}", left.len(), pids.len());
}
