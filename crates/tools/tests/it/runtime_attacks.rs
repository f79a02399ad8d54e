//! Attacks through the `exec` and `execute_code` tools, each against a canary: the sandbox must
//! contain them, and the result must say what was blocked.

#![allow(clippy::unwrap_used)]

use crate::runtime_support;

use std::time::{Duration, Instant};

use runtime_support::{CANARY, Fixture, processes_with, wait_gone};
use serde_json::json;
use toolgate_core::ToolError;

/// Resident memory of this test process, in KiB.
fn rss_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn write_outside_the_workspace() {
    let f = Fixture::new();
    let outside = f.outside().display().to_string();
    let out = f
        .exec(json!({ "command": format!("echo pwned > {outside}/new; echo pwned >> {outside}/canary; touch /etc/tg-pwned; echo done") }))
        .await
        .unwrap();
    let text = out.text_content();
    f.assert_canary_intact();
    assert!(!std::path::Path::new("/etc/tg-pwned").exists());
    assert!(text.contains("blocked by the sandbox: writing"), "{text}");
    assert!(text.contains("extra_writable"), "{text}");
    assert!(text.contains("sandbox: sandboxed"), "{text}");
    assert!(!out.meta.unwrap()["denials"].as_array().unwrap().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn read_a_file_outside_the_readable_set() {
    let f = Fixture::new();
    let out = f
        .exec(json!({ "command": format!("cat {}; ls {}", f.canary().display(), f.outside().display()) }))
        .await
        .unwrap();
    let text = out.text_content();
    assert!(!text.contains(CANARY.trim()), "{text}");
    assert!(text.contains("blocked by the sandbox"), "{text}");
    assert!(text.contains("outside the readable paths"), "{text}");
    assert!(text.contains("extra_readable"), "{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cd_dotdot_tricks() {
    let f = Fixture::new();
    let outside_name = f.outside().file_name().unwrap().to_string_lossy().into_owned();
    let depth = f.ws().components().count();
    let up = "../".repeat(depth + 3);
    std::fs::create_dir(f.ws().join("sub")).unwrap();
    let script = format!(
        "cd ..; echo a > {outside_name}/a; cd {up}; echo b > tmp/{outside_name}/b; cat tmp/{outside_name}/canary; \
         cd {ws}/sub/../..; echo c > {outside_name}/c; cd -P /proc/self/cwd/..; echo d > {outside_name}/d; echo end",
        ws = f.ws().display()
    );
    let out = f.exec(json!({ "command": script, "workdir": "sub/.." })).await.unwrap();
    let text = out.text_content();
    f.assert_canary_intact();
    assert!(!text.contains(CANARY.trim()), "{text}");
    assert!(text.contains("end"), "{text}");
    // Outside paths are either hidden (an empty tmpfs over /tmp) or refused by Landlock.
    assert!(text.contains("No such file or directory") || text.contains("Permission denied"), "{text}");
    // After `cd` nobody knows the shell's directory: permission errors come with a note.
    if text.contains("Permission denied") && !text.contains("blocked by the sandbox") {
        assert!(text.contains("note: the output shows permission errors"), "{text}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn symlink_made_inside_pointing_out_then_written_through() {
    let f = Fixture::new();
    let script = format!(
        "ln -s {canary} link; ln -s {outside} dirlink; echo pwned > link; echo pwned >> link; echo x > dirlink/new; \
         cp /etc/hostname dirlink/; cat link; echo end",
        canary = f.canary().display(),
        outside = f.outside().display()
    );
    let out = f.exec(json!({ "command": script })).await.unwrap();
    let text = out.text_content();
    f.assert_canary_intact();
    assert!(!text.contains(CANARY.trim()), "{text}");
    assert!(text.contains("link: Permission denied") || text.contains("link: No such file or directory"), "{text}");
    if text.contains("Permission denied") && !text.contains("blocked by the sandbox") {
        assert!(text.contains("symbolic links"), "{text}");
    }
    // The links stay in the workspace, dangling as far as the sandbox is concerned.
    assert!(std::fs::symlink_metadata(f.ws().join("link")).unwrap().file_type().is_symlink());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn toolgate_state_cannot_be_replaced_by_a_link_out() {
    let f = Fixture::new();
    // The first call creates .toolgate/outputs; the next tries to swap it for a link outside.
    f.exec(json!({ "command": "true" })).await.unwrap();
    let script = format!(
        "rm -rf .toolgate; mv .toolgate gone; ln -sfn {outside} .toolgate/outputs; ls -la .toolgate; echo end",
        outside = f.outside().display()
    );
    let out = f.exec(json!({ "command": script })).await.unwrap();
    let text = out.text_content();
    assert!(text.contains("end"), "{text}");
    assert!(std::fs::symlink_metadata(f.ws().join(".toolgate")).unwrap().is_dir());
    assert!(std::fs::symlink_metadata(f.ws().join(".toolgate/outputs")).unwrap().is_dir());
    // A long output's log still goes inside the workspace.
    let out = f.exec(json!({ "command": "seq 1 100000" })).await.unwrap();
    let id = out.meta.unwrap()["id"].as_str().unwrap().to_owned();
    assert!(f.ws().join(format!(".toolgate/outputs/{id}.log")).is_file());
    f.assert_canary_intact();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn network_connect_with_network_off() {
    let f = Fixture::new();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let accepted = tokio::spawn(async move { listener.accept().await.is_ok() });
    let code = format!(
        "import socket\ntry:\n    socket.create_connection(('127.0.0.1', {port}), timeout=3)\n    print('CONNECTED')\nexcept OSError as e:\n    print('failed:', e)\n"
    );
    let out = f.code(json!({ "language": "python", "code": code })).await.unwrap();
    let text = out.text_content();
    assert!(!text.contains("CONNECTED"), "{text}");
    assert!(text.contains("blocked by the sandbox: network access is off"), "{text}");
    assert!(text.contains("network = \\\"on\\\"") || text.contains("network = \"on\""), "{text}");
    // Bash's own /dev/tcp is refused before it runs, and curl cannot connect either.
    let err = f.exec(json!({ "command": format!("echo hi > /dev/tcp/127.0.0.1/{port}") })).await.unwrap_err();
    assert!(matches!(err, ToolError::Denied { .. }), "{err}");
    if std::path::Path::new("/usr/bin/curl").exists() {
        let out =
            f.exec(json!({ "command": format!("curl -sS --max-time 3 http://127.0.0.1:{port}/") })).await.unwrap();
        assert!(!out.text_content().starts_with("exit code 0"), "{}", out.text_content());
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(!accepted.is_finished(), "the listener accepted a connection");
    accepted.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fork_bomb_is_contained() {
    let f = Fixture::new();
    // The classic one is refused before it runs.
    let err = f.exec(json!({ "command": ":(){ :|:& };:" })).await.unwrap_err();
    assert!(matches!(err, ToolError::Denied { .. }), "{err}");
    // One the analyzer does not recognize runs into the process limit and the timeout.
    let code = "import os, time\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        time.sleep(0.01)\n# forkbomb-4e1d";
    let t = Instant::now();
    let out = f.code(json!({ "language": "python", "code": code, "timeout": 3 })).await.unwrap();
    let text = out.text_content();
    assert!(text.starts_with("timed out after 3 s"), "{text}");
    assert!(t.elapsed() < Duration::from_secs(20), "{:?}", t.elapsed());
    assert!(wait_gone("forkbomb-4e1d").is_empty(), "fork bomb processes left");
    // The machine still runs commands.
    let out = f.exec(json!({ "command": "echo alive" })).await.unwrap();
    assert!(out.text_content().contains("alive"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn endless_output_is_capped_and_memory_stays_flat() {
    let f = Fixture::with_config(|c| c.log_max_bytes = 1 << 20);
    let before = rss_kib();
    let out = f.exec(json!({ "command": "yes 'endless output line'", "timeout": 3 })).await.unwrap();
    let after = rss_kib();
    let text = out.text_content();
    assert!(text.starts_with("timed out after 3 s"), "{}", &text[..200.min(text.len())]);
    assert!(text.chars().count() < 31_000, "{}", text.chars().count());
    let s = out.meta.unwrap();
    assert!(s["output_bytes"].as_u64().unwrap() > 10 << 20, "{s}");
    assert_eq!(s["truncated"], true);
    let log = f.ws().join(s["log"].as_str().unwrap());
    let size = std::fs::metadata(&log).unwrap().len();
    assert!(size <= (1 << 20) + 200, "log of {size} bytes");
    assert!(after < before + 64 * 1024, "memory grew from {before} KiB to {after} KiB");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn timeout_kills_a_grandchild_that_ignores_sigterm() {
    let f = Fixture::new();
    let t = Instant::now();
    let out = f
        .exec(json!({ "command": "bash -c 'trap \"\" TERM; sleep 777.4242' & setsid sleep 778.4242 & sleep 779.4242", "timeout": 1 }))
        .await
        .unwrap();
    assert!(out.text_content().starts_with("timed out after 1 s"), "{}", out.text_content());
    assert!(t.elapsed() < Duration::from_secs(10), "{:?}", t.elapsed());
    assert_eq!(processes_with(".4242"), Vec::<u32>::new(), "processes survived the timeout");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancellation_and_dropped_calls_kill_the_tree() {
    let f = Fixture::new();
    // Cancelled through the context.
    let cancel = f.ctx.cancel.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(500)).await;
        cancel.cancel();
    });
    let err =
        f.exec(json!({ "command": "bash -c 'trap \"\" TERM; sleep 801.5151' & sleep 802.5151" })).await.unwrap_err();
    assert!(matches!(err, ToolError::Cancelled), "{err}");
    assert_eq!(wait_gone(".5151"), Vec::<u32>::new());
    // The caller drops the call (as the gate does at its own deadline).
    let f = Fixture::new();
    let mut call = Box::pin(f.exec(json!({ "command": "bash -c 'trap \"\" TERM; sleep 803.6161' & sleep 804.6161" })));
    let running = tokio::select! {
        r = &mut call => panic!("the call ended: {r:?}"),
        () = tokio::time::sleep(Duration::from_millis(500)) => processes_with(".6161"),
    };
    assert!(running.len() >= 2, "the sleeps run before the drop: {running:?}");
    drop(call);
    assert_eq!(wait_gone(".6161"), Vec::<u32>::new());
}

/// Runs in a child test process that has a secret in its environment (see below).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "run by secrets_in_the_environment_are_not_visible with a planted secret"]
async fn planted_secret_child() {
    let Ok(secret) = std::env::var("AWS_SECRET_ACCESS_KEY") else { return };
    let f = Fixture::new();
    let out = f
        .exec(json!({ "command": "env; cat /proc/self/environ | tr '\\0' '\\n'; echo \"[$AWS_SECRET_ACCESS_KEY]\"" }))
        .await
        .unwrap();
    let text = out.text_content();
    assert!(text.contains("PATH="), "{text}");
    assert!(!text.contains(&secret), "the secret reached the command:\n{text}");
    assert!(text.contains("[]"), "{text}");
    let out = f.code(json!({ "language": "python", "code": "import os\nprint(sorted(os.environ))" })).await.unwrap();
    assert!(!out.text_content().contains("AWS_SECRET"), "{}", out.text_content());
    println!("PLANTED-SECRET-CHECKED");
}

#[test]
fn secrets_in_the_environment_are_not_visible() {
    let exe = std::env::current_exe().unwrap();
    let out = std::process::Command::new(exe)
        .args(["--exact", "runtime_attacks::planted_secret_child", "--ignored", "--nocapture"])
        .env("AWS_SECRET_ACCESS_KEY", "wJalrXUtnFEMI-K7MDENG-bPxRfiCYCANARY")
        .env("GITHUB_TOKEN", "ghp_canary000000000000000000000000000000")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert!(stdout.contains("PLANTED-SECRET-CHECKED"), "{stdout}\n{stderr}");
}
