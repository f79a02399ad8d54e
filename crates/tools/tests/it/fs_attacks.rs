//! Traversal and symlink attacks on the fs tools, and the swap race.
//!
//! Every attack aims at a canary folder outside the workspace (or at `/etc`); each test checks
//! both the tool's answer and that the canary was neither read nor changed.

use crate::fs_support;

use std::os::unix::fs::symlink;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use fs_support::Ws;
use serde_json::json;
use toolgate_core::ToolError;

const SECRET: &str = "CANARY-SECRET-7f3a";

/// A canary folder beside the workspace with a secret file.
fn canary(ws: &Ws) -> std::path::PathBuf {
    let c = ws.outside().join("canary");
    std::fs::create_dir_all(&c).unwrap_or_else(|e| panic!("{e}"));
    std::fs::write(c.join("secret.txt"), SECRET).unwrap_or_else(|e| panic!("{e}"));
    c
}

fn canary_untouched(c: &Path) {
    let names: Vec<String> = std::fs::read_dir(c)
        .unwrap_or_else(|e| panic!("{e}"))
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names, vec!["secret.txt".to_owned()], "the canary folder changed");
    assert_eq!(std::fs::read_to_string(c.join("secret.txt")).unwrap_or_default(), SECRET);
}

/// Calls every path-taking tool with `path` and checks none succeeds in leaking or writing.
async fn refused_everywhere(ws: &Ws, path: &str) {
    let calls = [
        ("read", json!({ "path": path })),
        ("write", json!({ "path": path, "content": "pwned" })),
        ("edit", json!({ "path": path, "old_string": SECRET, "new_string": "pwned" })),
        ("multi_edit", json!({ "path": path, "edits": [{ "old_string": SECRET, "new_string": "pwned" }] })),
        ("ls", json!({ "path": path })),
        ("grep", json!({ "pattern": "CANARY", "path": path, "output_mode": "content" })),
        ("glob", json!({ "pattern": "**/*", "path": path })),
        ("apply_patch", json!({ "patch": format!("*** Begin Patch\n*** Add File: {path}\n+pwned\n*** End Patch") })),
    ];
    for (tool, params) in calls {
        match ws.call(tool, params).await {
            Ok(out) => {
                let text = out.text_content();
                assert!(!text.contains(SECRET), "{tool}({path:?}) leaked the canary: {text}");
                assert!(
                    tool == "write" || tool == "apply_patch" || !text.contains("pwned"),
                    "{tool}({path:?}) succeeded: {text}"
                );
            }
            Err(e) => assert!(!e.to_string().contains(SECRET), "{tool}: {e}"),
        }
    }
}

#[tokio::test]
async fn traversal_in_every_position_is_refused() {
    let ws = Ws::new();
    let c = canary(&ws);
    ws.put("a/b/inside.txt", "inside\n");
    let escapes = [
        "../canary/secret.txt",
        "../../etc/passwd",
        "a/../../canary/secret.txt",
        "a/b/../../../canary/secret.txt",
        "./../canary/secret.txt",
        "a/./../.././canary/secret.txt",
        "..",
        "../",
        "a/b/../../..",
        "/etc/passwd",
        "/",
        "~/.ssh/id_rsa",
    ];
    for p in escapes {
        let e = ws.err("read", json!({ "path": p })).await;
        assert!(matches!(e, ToolError::InvalidParams { .. }), "{p}: expected a refusal before any access, got {e}");
        refused_everywhere(&ws, p).await;
    }
    let abs = format!("{}/canary/secret.txt", ws.outside().display());
    let e = ws.err("read", json!({ "path": abs })).await;
    assert!(e.to_string().contains("outside the workspace"), "{e}");
    refused_everywhere(&ws, &abs).await;
    // An absolute path inside the workspace is fine.
    let inside = format!("{}/a/b/inside.txt", ws.root.display());
    assert!(ws.ok("read", json!({ "path": inside })).await.contains("inside"));
    // `..` that stays inside is fine.
    assert!(ws.ok("read", json!({ "path": "a/b/../b/inside.txt" })).await.contains("inside"));
    canary_untouched(&c);
}

#[tokio::test]
async fn encoded_and_overlong_sequences_are_literal_names() {
    let ws = Ws::new();
    let c = canary(&ws);
    for p in [
        "%2e%2e/canary/secret.txt",
        "..%2fcanary%2fsecret.txt",
        "%2e%2e%2f%2e%2e%2fetc%2fpasswd",
        "%c0%ae%c0%ae/canary/secret.txt",
        "..%c0%afcanary",
        "..%252f..%252fetc/passwd",
        "\u{2025}/canary/secret.txt",
        "..\\canary\\secret.txt",
        "....//canary/secret.txt",
    ] {
        let e = ws.err("read", json!({ "path": p })).await;
        assert!(matches!(e, ToolError::NotFound { .. }), "{p}: {e}");
        refused_everywhere(&ws, p).await;
    }
    // A literal name with such characters is a normal file inside the workspace.
    ws.ok("write", json!({ "path": "%2e%2e/x.txt", "content": "ok" })).await;
    assert_eq!(ws.get_str("%2e%2e/x.txt"), "ok");
    canary_untouched(&c);
}

#[tokio::test]
async fn nul_bytes_are_refused() {
    let ws = Ws::new();
    for p in ["a\0b", "\0", "ok.txt\0../../etc/passwd"] {
        let e = ws.err("read", json!({ "path": p })).await;
        assert!(e.to_string().contains("NUL"), "{e}");
        let e = ws.err("write", json!({ "path": p, "content": "x" })).await;
        assert!(e.to_string().contains("NUL"), "{e}");
    }
}

#[tokio::test]
async fn symlinks_leaving_the_workspace_are_refused() {
    let ws = Ws::new();
    let c = canary(&ws);
    symlink("/etc", ws.root.join("etc_link")).unwrap_or_else(|e| panic!("{e}"));
    symlink(&c, ws.root.join("canary_abs")).unwrap_or_else(|e| panic!("{e}"));
    symlink("../canary", ws.root.join("canary_rel")).unwrap_or_else(|e| panic!("{e}"));
    symlink(c.join("secret.txt"), ws.root.join("secret_link.txt")).unwrap_or_else(|e| panic!("{e}"));
    symlink(c.join("not-yet.txt"), ws.root.join("dangling.txt")).unwrap_or_else(|e| panic!("{e}"));
    symlink("../canary/new-dir/x", ws.root.join("dangling_rel")).unwrap_or_else(|e| panic!("{e}"));
    symlink("/proc/self/root/etc", ws.root.join("proc_root")).unwrap_or_else(|e| panic!("{e}"));
    std::fs::create_dir(ws.root.join("sub")).unwrap_or_else(|e| panic!("{e}"));
    symlink("../../canary", ws.root.join("sub/up")).unwrap_or_else(|e| panic!("{e}"));

    for p in [
        "etc_link/passwd",
        "etc_link",
        "canary_abs/secret.txt",
        "canary_abs",
        "canary_rel/secret.txt",
        "secret_link.txt",
        "dangling.txt",
        "dangling_rel",
        "proc_root/passwd",
        "sub/up/secret.txt",
        "canary_abs/new.txt",
    ] {
        let e = ws.err("read", json!({ "path": p })).await;
        assert!(!e.to_string().contains(SECRET), "{p}: {e}");
        let e = ws.err("write", json!({ "path": p, "content": "pwned" })).await;
        assert!(
            matches!(e, ToolError::Denied { .. } | ToolError::ExecutionFailed { .. } | ToolError::InvalidParams { .. }),
            "{p}: {e}"
        );
        refused_everywhere(&ws, p).await;
    }
    // Searching the whole workspace never follows the links out.
    let out = ws.ok("grep", json!({ "pattern": "CANARY", "output_mode": "content" })).await;
    assert!(out.contains("No matches"), "{out}");
    let out = ws.ok("glob", json!({ "pattern": "**/*" })).await;
    assert!(!out.contains("secret.txt\n") || !out.contains("canary"), "{out}");
    let out = ws.ok("ls", json!({ "recursive": true })).await;
    assert!(!out.contains(SECRET));
    assert!(!c.join("not-yet.txt").exists());
    assert!(!c.join("new-dir").exists());
    canary_untouched(&c);
    // /etc untouched: the links were refused before any write.
    assert!(!Path::new("/etc/pwned").exists());
}

#[tokio::test]
async fn magic_links_are_refused() {
    let ws = Ws::new();
    let c = canary(&ws);
    symlink("/proc/self/cwd", ws.root.join("cwd")).unwrap_or_else(|e| panic!("{e}"));
    symlink("/proc/self/fd", ws.root.join("fds")).unwrap_or_else(|e| panic!("{e}"));
    for p in ["cwd/Cargo.toml", "fds/0", "fds", "/proc/self/root/etc/passwd", "/proc/self/environ"] {
        let e = ws.err("read", json!({ "path": p })).await;
        assert!(!e.to_string().contains("root:"), "{p}: {e}");
        refused_everywhere(&ws, p).await;
    }
    canary_untouched(&c);
}

#[tokio::test]
async fn hard_links_to_outside_files_are_not_written() {
    let ws = Ws::new();
    let c = canary(&ws);
    std::fs::hard_link(c.join("secret.txt"), ws.root.join("hard.txt")).unwrap_or_else(|e| panic!("{e}"));
    // Reading is allowed (the content is reachable in the workspace anyway); writing is not.
    ws.ok("read", json!({ "path": "hard.txt" })).await;
    let e = ws.err("write", json!({ "path": "hard.txt", "content": "pwned" })).await;
    assert!(e.to_string().contains("hard link"), "{e}");
    let e = ws.err("edit", json!({ "path": "hard.txt", "old_string": SECRET, "new_string": "pwned" })).await;
    assert!(e.to_string().contains("hard link"), "{e}");
    let patch = "*** Begin Patch\n*** Update File: hard.txt\n@@\n-CANARY-SECRET-7f3a\n+pwned\n*** End Patch";
    let e = ws.err("apply_patch", json!({ "patch": patch })).await;
    assert!(e.to_string().contains("hard link"), "{e}");
    let patch = "*** Begin Patch\n*** Delete File: hard.txt\n*** End Patch";
    assert!(ws.call("apply_patch", json!({ "patch": patch })).await.is_err());
    canary_untouched(&c);
}

#[tokio::test]
async fn inside_links_to_denied_paths_are_denied() {
    let ws = Ws::new();
    ws.put(".toolgate/db", "state");
    ws.put(".git/hooks/pre-commit", "#!/bin/sh\n");
    symlink(".toolgate", ws.root.join("sneaky")).unwrap_or_else(|e| panic!("{e}"));
    symlink(".git/hooks", ws.root.join("hooks")).unwrap_or_else(|e| panic!("{e}"));
    symlink("toolgate.toml", ws.root.join("cfg.toml")).unwrap_or_else(|e| panic!("{e}"));
    let e = ws.err("read", json!({ "path": "sneaky/db" })).await;
    assert!(matches!(e, ToolError::Denied { .. }), "{e}");
    let e = ws.err("write", json!({ "path": "sneaky/new", "content": "x" })).await;
    assert!(matches!(e, ToolError::Denied { .. }), "{e}");
    let e = ws.err("write", json!({ "path": "hooks/post-checkout", "content": "evil" })).await;
    assert!(matches!(e, ToolError::Denied { .. }), "{e}");
    let e = ws.err("write", json!({ "path": "cfg.toml", "content": "evil" })).await;
    assert!(matches!(e, ToolError::Denied { .. }), "{e}");
    let e = ws.err("ls", json!({ "path": "sneaky" })).await;
    assert!(matches!(e, ToolError::Denied { .. }), "{e}");
    assert!(!ws.exists(".toolgate/new") && !ws.exists(".git/hooks/post-checkout") && !ws.exists("toolgate.toml"));
    // Listing and searching never show the denied folder.
    let out = ws.ok("ls", json!({ "recursive": true })).await;
    assert!(!out.contains(".toolgate"), "{out}");
    assert!(out.contains("sneaky -> (a path denied by policy)"), "{out}");
    let out = ws.ok("grep", json!({ "pattern": "state" })).await;
    assert!(out.contains("No matches"), "{out}");
}

/// A thread keeps swapping `ws/d` between a real folder and a symlink to the canary while the
/// tools read and write through `d/` thousands of times. The canary is never read or changed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn swap_race_never_touches_the_canary() {
    let ws = Ws::new();
    let c = canary(&ws);
    std::fs::write(c.join("f.txt"), SECRET).unwrap_or_else(|e| panic!("{e}"));
    let d = ws.root.join("d");
    let real = ws.root.join("d_real");
    std::fs::create_dir(&real).unwrap_or_else(|e| panic!("{e}"));
    std::fs::write(real.join("f.txt"), "inside\n").unwrap_or_else(|e| panic!("{e}"));
    std::fs::rename(&real, &d).unwrap_or_else(|e| panic!("{e}"));
    let link_tmp = ws.root.join("d_link");
    symlink(&c, &link_tmp).unwrap_or_else(|e| panic!("{e}"));

    let stop = Arc::new(AtomicBool::new(false));
    let swapper = {
        let stop = stop.clone();
        let (d, link_tmp) = (d.clone(), link_tmp.clone());
        std::thread::spawn(move || {
            // Atomically exchange `d` (the real folder) and `d_link` (the symlink to the canary),
            // so `d` is always one or the other.
            let mut swaps = 0u64;
            while !stop.load(Ordering::Relaxed) {
                let cwd = rustix::fs::CWD;
                if rustix::fs::renameat_with(cwd, &d, cwd, &link_tmp, rustix::fs::RenameFlags::EXCHANGE).is_ok() {
                    swaps += 1;
                }
                if swaps.is_multiple_of(64) {
                    std::thread::yield_now();
                }
            }
            swaps
        })
    };

    let mut reads_ok = 0;
    let mut writes_ok = 0;
    let mut refused = 0;
    for i in 0..2000 {
        match ws.call("read", json!({ "path": "d/f.txt" })).await {
            Ok(out) => {
                let text = out.text_content();
                assert!(!text.contains(SECRET), "read leaked the canary at iteration {i}");
                reads_ok += 1;
            }
            Err(e) => {
                assert!(!e.to_string().contains(SECRET));
                refused += 1;
            }
        }
        let name = format!("d/w{}.txt", i % 7);
        match ws.call("write", json!({ "path": name, "content": "written\n" })).await {
            Ok(_) => writes_ok += 1,
            Err(_) => refused += 1,
        }
        if i % 50 == 0 {
            for (tool, params) in [
                ("grep", json!({ "pattern": "CANARY", "output_mode": "content" })),
                ("ls", json!({ "path": "d" })),
                ("glob", json!({ "pattern": "**/*.txt" })),
            ] {
                if let Ok(out) = ws.call(tool, params).await {
                    let text = out.text_content();
                    assert!(!text.contains(SECRET), "{tool} leaked the canary");
                    assert!(!text.contains("secret.txt"), "{tool} listed the canary: {text}");
                }
            }
        }
    }
    stop.store(true, Ordering::Relaxed);
    let swaps = swapper.join().unwrap_or_else(|_| panic!("swapper panicked"));
    assert!(swaps > 100, "the race did not run ({swaps} swaps)");
    // Both sides of the race were hit: some calls went through the real folder, some met the link.
    assert!(reads_ok > 0 && writes_ok > 0 && refused > 0, "reads {reads_ok}, writes {writes_ok}, refused {refused}");
    // The canary holds exactly what it held.
    let mut names: Vec<String> = std::fs::read_dir(&c)
        .unwrap_or_else(|e| panic!("{e}"))
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(names, vec!["f.txt".to_owned(), "secret.txt".to_owned()], "files appeared in the canary");
    assert_eq!(std::fs::read_to_string(c.join("f.txt")).unwrap_or_default(), SECRET);
    assert_eq!(std::fs::read_to_string(c.join("secret.txt")).unwrap_or_default(), SECRET);
}
