//! Behaviour of the fs tools through their public API.

use crate::fs_support;

use fs_support::Ws;
use serde_json::json;
use toolgate_core::{ApprovalRequirement, Content, RateClass, ToolError};
use toolgate_tools::fs::{FsConfig, WriteSafety};

// ---------------------------------------------------------------- read

#[tokio::test]
async fn read_numbers_lines_and_pages() {
    let ws = Ws::new();
    let body: String = (1..=3000).map(|i| format!("line {i}\n")).collect();
    ws.put("big.txt", &body);
    let out = ws.ok("read", json!({ "path": "big.txt" })).await;
    assert!(out.starts_with("     1\tline 1\n     2\tline 2\n"), "{}", &out[..60]);
    assert!(out.contains("  2000\tline 2000\n"));
    assert!(!out.contains("line 2001\n"));
    assert!(out.contains("To read on, call `read` with offset=2001"), "{}", &out[out.len() - 200..]);

    let out = ws.ok("read", json!({ "path": "big.txt", "offset": 2999, "limit": 5 })).await;
    assert_eq!(out, "  2999\tline 2999\n  3000\tline 3000\n");

    // The byte page cuts before the line limit.
    let wide: String = (1..=2000).map(|i| format!("{i:0>100}\n")).collect();
    ws.put("wide.txt", &wide);
    let out = ws.ok("read", json!({ "path": "wide.txt" })).await;
    assert!(out.len() < 52 * 1024, "{}", out.len());
    assert!(out.contains("page limit of 51200 bytes"));
    let out = ws.ok("read", json!({ "path": "wide.txt", "max_bytes": 524288 })).await;
    assert!(out.contains("  2000\t"));
}

/// A file over 8 MiB is read a page at a time: the same numbered lines as a small file, no
/// count of lines it did not reach, the exact count once a page reaches the end, and
/// read-before-write by size and modification time.
#[tokio::test]
async fn read_pages_a_large_file_without_reading_it_all() {
    let ws = Ws::with_config(FsConfig { max_write_bytes: 32 << 20, ..FsConfig::default() });
    let lines = 400_000u64;
    let body: String = (1..=lines).map(|i| format!("log line {i:>12} of the big file\n")).collect();
    assert!(body.len() > 8 << 20);
    ws.put("big.log", &body);
    let out = ws.ok("read", json!({ "path": "big.log", "limit": 3 })).await;
    assert!(out.starts_with("     1\tlog line            1 of the big file\n"), "{out}");
    assert!(out.contains("     3\tlog line            3"), "{out}");
    assert!(out.contains("of at least ") && out.contains("offset=4"), "{out}");
    assert!(!out.contains(&lines.to_string()), "no count it did not take: {out}");

    let deep = ws.ok("read", json!({ "path": "big.log", "offset": 250_000, "limit": 2 })).await;
    assert!(deep.starts_with("250000\tlog line       250000 of") && deep.contains("250001\t"), "{deep}");
    let last = ws.ok("read", json!({ "path": "big.log", "offset": lines - 1 })).await;
    assert_eq!(
        last,
        format!(
            "{:>6}\tlog line {:>12} of the big file\n{lines}\tlog line {lines:>12} of the big file\n",
            lines - 1,
            lines - 1
        )
    );
    for past in [lines + 1, lines + 50] {
        let e = ws.err("read", json!({ "path": "big.log", "offset": past })).await;
        assert!(e.to_string().contains(&format!("which has {lines} lines")), "{e}");
    }
    // A last line without a newline still counts.
    ws.put("tail.log", format!("{body}no newline"));
    let e = ws.err("read", json!({ "path": "tail.log", "offset": lines + 3 })).await;
    assert!(e.to_string().contains(&format!("which has {} lines", lines + 1)), "{e}");

    // Read before write holds: the page read allows an edit; a change on disk since is refused.
    ws.ok(
        "edit",
        json!({ "path": "big.log", "old_string": "log line            7 of", "new_string": "LOG LINE 7 of" }),
    )
    .await;
    ws.ok("read", json!({ "path": "big.log", "limit": 1 })).await;
    ws.put("big.log", &body);
    let e =
        ws.err("edit", json!({ "path": "big.log", "old_string": "log line            8 of", "new_string": "x" })).await;
    assert!(e.to_string().contains("changed on disk"), "{e}");
}

/// Reads `path` (page `offset`, 2 lines) until its notice gives an exact count, for at most 60 s.
async fn read_until_counted(ws: &Ws, path: &str, offset: u64) -> toolgate_core::ToolOutput {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        let out = ws
            .call("read", json!({ "path": path, "offset": offset, "limit": 2 }))
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        let meta = out.meta.clone().unwrap_or_default();
        if meta["total_lines"].is_u64() {
            return out;
        }
        assert!(meta["total_lines_at_least"].is_u64(), "{meta}");
        assert!(std::time::Instant::now() < deadline, "the line count never came in: {meta}");
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
}

/// A large file's first page says "at least N lines" (N lines that do exist) and starts a count
/// in the background; once it is in, pages in the middle come from its checkpoints and say the
/// exact total; a file changed since is never reported with the old total.
#[tokio::test]
async fn read_counts_a_large_file_in_the_background_for_later_calls() {
    let ws = Ws::with_config(FsConfig { max_write_bytes: 32 << 20, ..FsConfig::default() });
    let lines = 300_000u64;
    let line = |i: u64| format!("entry {i:>9}: the quick brown fox\n");
    let body: String = (1..=lines).map(line).collect();
    assert!(body.len() > 8 << 20);
    ws.put("big.log", &body);

    let first = ws.call("read", json!({ "path": "big.log", "limit": 10 })).await.unwrap_or_else(|e| panic!("{e}"));
    let text = first.text_content();
    let meta = first.meta.clone().unwrap_or_default();
    let at_least = meta["total_lines_at_least"].as_u64().unwrap_or_else(|| panic!("{meta}"));
    assert!(meta["total_lines"].is_null(), "{meta}");
    assert!((11..=lines).contains(&at_least), "{at_least}");
    assert!(
        text.contains(&format!("[Showing lines 1-10 of at least {at_least} lines of a file of {} bytes", body.len())),
        "{text}"
    );
    assert!(text.contains("a later call says how many") && text.contains("offset=11"), "{text}");

    // Pages at and around the checkpoints (every 65,536 lines) and in between, exact.
    let counted = read_until_counted(&ws, "big.log", 1).await;
    assert_eq!(counted.meta.unwrap_or_default()["total_lines"], json!(lines));
    for offset in [2, 65_535, 65_536, 65_537, 131_073, 150_001, 262_144, lines - 1] {
        let out = ws.ok("read", json!({ "path": "big.log", "offset": offset, "limit": 2 })).await;
        let want = format!("{offset:>6}\t{}{:>6}\t{}", line(offset), offset + 1, line(offset + 1));
        assert!(out.starts_with(&want), "offset {offset}: {out}");
        if offset + 1 < lines {
            assert!(out.contains(&format!("of {lines} (the limit of 2 lines)")), "{out}");
        }
    }
    let e = ws.err("read", json!({ "path": "big.log", "offset": lines + 1 })).await;
    assert!(e.to_string().contains(&format!("which has {lines} lines")), "{e}");

    // Changed on disk: 5 more lines. The next call must not say the old total.
    let more: String = (lines + 1..=lines + 5).map(line).collect();
    std::fs::OpenOptions::new()
        .append(true)
        .open(ws.root.join("big.log"))
        .and_then(|mut f| std::io::Write::write_all(&mut f, more.as_bytes()))
        .unwrap_or_else(|e| panic!("{e}"));
    let out = ws.call("read", json!({ "path": "big.log", "offset": 150_000, "limit": 2 })).await;
    let out = out.unwrap_or_else(|e| panic!("{e}"));
    let meta = out.meta.clone().unwrap_or_default();
    assert_ne!(meta["total_lines"], json!(lines), "an old count for a changed file: {meta}");
    assert!(out.text_content().starts_with(&format!("150000\t{}", line(150_000))), "{}", out.text_content());
    let recounted = read_until_counted(&ws, "big.log", 200_000).await;
    assert_eq!(recounted.meta.unwrap_or_default()["total_lines"], json!(lines + 5));
    let last = ws.ok("read", json!({ "path": "big.log", "offset": lines + 4 })).await;
    assert_eq!(last, format!("{:>6}\t{}{:>6}\t{}", lines + 4, line(lines + 4), lines + 5, line(lines + 5)));

    // Replaced by a shorter file of the same name: the new one's lines, not the old count.
    let short: String = (1..=250_000u64).map(|i| format!("other {i:>9}: jumps over the lazy dog\n")).collect();
    ws.put("big.log", &short);
    let e = ws.err("read", json!({ "path": "big.log", "offset": 260_000 })).await;
    assert!(e.to_string().contains("which has 250000 lines"), "{e}");
}

#[tokio::test]
async fn read_cuts_long_lines_and_handles_edge_cases() {
    let ws = Ws::new();
    ws.put("long.txt", format!("{}\nshort\n", "x".repeat(2500)));
    let out = ws.ok("read", json!({ "path": "long.txt" })).await;
    assert!(out.contains("… [line truncated: 500 more characters]"));
    assert!(out.contains("     2\tshort"));

    ws.put("crlf.txt", "a\r\nb\r\n");
    assert_eq!(ws.ok("read", json!({ "path": "crlf.txt" })).await, "     1\ta\n     2\tb\n");

    ws.put("empty.txt", "");
    assert!(ws.ok("read", json!({ "path": "empty.txt" })).await.contains("empty"));

    let e = ws.err("read", json!({ "path": "crlf.txt", "offset": 10 })).await;
    assert!(e.to_string().contains("past the end"), "{e}");

    std::fs::create_dir(ws.root.join("dir")).unwrap_or_else(|e| panic!("{e}"));
    let e = ws.err("read", json!({ "path": "dir" })).await;
    assert!(e.to_string().contains("use `ls`"), "{e}");

    let e = ws.err("read", json!({ "path": "missing.txt" })).await;
    assert!(matches!(e, ToolError::NotFound { .. }), "{e}");
}

#[tokio::test]
async fn read_refuses_binary_and_returns_images() {
    let ws = Ws::new();
    ws.put("blob.bin", b"\x7fELF\x00\x01\x02binary");
    let e = ws.err("read", json!({ "path": "blob.bin" })).await;
    assert!(e.to_string().contains("binary file"), "{e}");
    // Seen, so it may be replaced.
    ws.ok("write", json!({ "path": "blob.bin", "content": "text now" })).await;

    let mut png = b"\x89PNG\r\n\x1a\n".to_vec();
    png.extend_from_slice(&[0u8; 32]);
    ws.put("pic.png", &png);
    let out = ws.call("read", json!({ "path": "pic.png" })).await.unwrap_or_else(|e| panic!("{e}"));
    let image = out.content.iter().find_map(|c| match c {
        Content::Image { data, mime_type } => Some((data.clone(), mime_type.clone())),
        _ => None,
    });
    let (data, mime) = image.unwrap_or_else(|| panic!("no image content"));
    assert_eq!(mime, "image/png");
    assert!(data.starts_with("iVBORw0KGgo"));
}

// ---------------------------------------------------------------- write

#[tokio::test]
async fn write_creates_parents_and_needs_a_read_to_overwrite() {
    let ws = Ws::new();
    let out = ws.ok("write", json!({ "path": "a/b/c.txt", "content": "hello\n" })).await;
    assert!(out.starts_with("Created `a/b/c.txt`"), "{out}");
    assert_eq!(ws.get_str("a/b/c.txt"), "hello\n");

    // Own writes count as seen.
    ws.ok("write", json!({ "path": "a/b/c.txt", "content": "again\n" })).await;

    ws.put("old.txt", "old\n");
    let e = ws.err("write", json!({ "path": "old.txt", "content": "new\n" })).await;
    assert!(e.to_string().contains("has not been read"), "{e}");
    assert_eq!(ws.get_str("old.txt"), "old\n");

    ws.ok("read", json!({ "path": "old.txt" })).await;
    ws.ok("write", json!({ "path": "old.txt", "content": "new\n" })).await;
    assert_eq!(ws.get_str("old.txt"), "new\n");

    // Changed on disk since the read: refused.
    ws.put("old.txt", "changed by someone else\n");
    let e = ws.err("write", json!({ "path": "old.txt", "content": "mine\n" })).await;
    assert!(e.to_string().contains("changed on disk"), "{e}");

    // No temporary files are left behind.
    let names: Vec<String> = std::fs::read_dir(&ws.root)
        .unwrap_or_else(|e| panic!("{e}"))
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    assert!(names.iter().all(|n| !n.contains("toolgate-")), "{names:?}");
}

#[tokio::test]
async fn write_safety_is_per_session_and_has_modes() {
    let ws = Ws::new();
    ws.put("f.txt", "x\n");
    ws.ok("read", json!({ "path": "f.txt" })).await;
    let other = ws.ctx_as("main", "other-session");
    let e = ws.call_ctx(&other, "write", json!({ "path": "f.txt", "content": "y" })).await;
    assert!(e.is_err(), "another session has not read the file");

    let warn = Ws::with_config(FsConfig { write_safety: WriteSafety::Warn, ..FsConfig::default() });
    warn.put("f.txt", "x\n");
    let out = warn.ok("write", json!({ "path": "f.txt", "content": "y\n" })).await;
    assert!(out.contains("warning:"), "{out}");

    let off = Ws::with_config(FsConfig { write_safety: WriteSafety::Off, ..FsConfig::default() });
    off.put("f.txt", "x\n");
    let out = off.ok("edit", json!({ "path": "f.txt", "old_string": "x", "new_string": "z" })).await;
    assert!(!out.contains("warning"), "{out}");
    assert_eq!(off.get_str("f.txt"), "z\n");
}

#[tokio::test]
async fn write_caps_size_and_denies_protected_paths() {
    let ws = Ws::new();
    let big = "x".repeat(5 * 1024 * 1024 + 1);
    let e = ws.err("write", json!({ "path": "big.txt", "content": big })).await;
    assert!(e.to_string().contains("limit"), "{e}");
    assert!(!ws.exists("big.txt"));

    for p in [".toolgate/state.db", ".git/hooks/pre-commit", ".git/config", "toolgate.toml", "./.toolgate/x"] {
        let e = ws.err("write", json!({ "path": p, "content": "x" })).await;
        assert!(matches!(e, ToolError::Denied { .. }), "{p}: {e}");
        assert!(!ws.exists(p), "{p}");
    }
    ws.put(".toolgate/secret", "s");
    let e = ws.err("read", json!({ "path": ".toolgate/secret" })).await;
    assert!(e.to_string().contains("denied by policy"), "{e}");
    // .git/config is readable, not writable.
    ws.put(".git/config", "[core]\n");
    ws.ok("read", json!({ "path": ".git/config" })).await;
}

#[tokio::test]
async fn instruction_files_need_approval() {
    let ws = Ws::new();
    let write = ws.tool("write");
    let s = write.safety(&json!({ "path": "CLAUDE.md", "content": "x" }));
    assert_eq!(s.approval, ApprovalRequirement::UnlessAutoApproved);
    assert!(s.approval_reason.as_deref().unwrap_or_default().contains("instruction file"));
    assert_eq!(s.rate_class, RateClass::FileWrite);
    assert_eq!(s.touches.writes, vec!["CLAUDE.md".to_owned()]);
    for p in ["docs/SOUL.md", "memory.md", "AGENTS.md"] {
        let s = ws.tool("edit").safety(&json!({ "path": p, "old_string": "a", "new_string": "b" }));
        assert_eq!(s.approval, ApprovalRequirement::UnlessAutoApproved, "{p}");
    }
    let s = write.safety(&json!({ "path": "README.md", "content": "x" }));
    assert_eq!(s.approval, ApprovalRequirement::Never);

    let patch = "*** Begin Patch\n*** Add File: x.txt\n+a\n*** Update File: IDENTITY.md\n*** Move to: y.md\n@@\n-a\n+b\n*** End Patch";
    let s = ws.tool("apply_patch").safety(&json!({ "patch": patch }));
    assert_eq!(s.touches.writes, vec!["x.txt".to_owned(), "IDENTITY.md".to_owned(), "y.md".to_owned()]);
    assert_eq!(s.approval, ApprovalRequirement::UnlessAutoApproved);
    let s = ws.tool("apply_patch").safety(&json!({ "patch": "not a patch" }));
    assert!(s.touches.writes.is_empty());

    // A link with an innocent name to an instruction file is refused.
    ws.put("CLAUDE.md", "rules\n");
    std::os::unix::fs::symlink("CLAUDE.md", ws.root.join("notes.md")).unwrap_or_else(|e| panic!("{e}"));
    ws.ok("read", json!({ "path": "notes.md" })).await;
    let e = ws.err("write", json!({ "path": "notes.md", "content": "evil" })).await;
    assert!(e.to_string().contains("instruction file"), "{e}");
    assert_eq!(ws.get_str("CLAUDE.md"), "rules\n");

    let read = ws.tool("read");
    assert!(read.spec().annotations.read_only);
    assert_eq!(read.spec().group, "fs");
    for t in ws.tools.values() {
        assert_eq!(t.spec().input_schema["additionalProperties"], json!(false), "{}", t.spec().name);
        assert_eq!(t.spec().group, "fs");
    }
}

#[tokio::test]
async fn write_through_an_inside_symlink_keeps_the_link() {
    let ws = Ws::new();
    ws.put("real.txt", "a\n");
    std::os::unix::fs::symlink("real.txt", ws.root.join("alias.txt")).unwrap_or_else(|e| panic!("{e}"));
    ws.ok("read", json!({ "path": "alias.txt" })).await;
    ws.ok("write", json!({ "path": "alias.txt", "content": "b\n" })).await;
    assert_eq!(ws.get_str("real.txt"), "b\n");
    assert!(ws.root.join("alias.txt").symlink_metadata().is_ok_and(|m| m.file_type().is_symlink()));
}

// ---------------------------------------------------------------- edit

#[tokio::test]
async fn edit_replaces_once_or_explains() {
    let ws = Ws::new();
    ws.put("f.rs", "fn a() {\n    x = 1;\n}\nfn b() {\n    x = 1;\n}\n");
    ws.ok("read", json!({ "path": "f.rs" })).await;
    let e = ws.err("edit", json!({ "path": "f.rs", "old_string": "    x = 1;", "new_string": "    x = 2;" })).await;
    assert!(e.to_string().contains("occurs 2 times") && e.to_string().contains("lines 2, 5"), "{e}");

    let out = ws
        .ok(
            "edit",
            json!({ "path": "f.rs", "old_string": "fn b() {\n    x = 1;", "new_string": "fn b() {\n    x = 2;" }),
        )
        .await;
    assert!(out.contains("1 replacement"), "{out}");
    assert_eq!(ws.get_str("f.rs"), "fn a() {\n    x = 1;\n}\nfn b() {\n    x = 2;\n}\n");

    let e = ws.err("edit", json!({ "path": "f.rs", "old_string": "fn b() {\n  x = 2;", "new_string": "y" })).await;
    let msg = e.to_string();
    assert!(msg.contains("not found") && msg.contains("closest region is lines 4-5"), "{msg}");
    assert!(msg.contains("     5\t    x = 2;"), "{msg}");

    ws.ok("edit", json!({ "path": "f.rs", "old_string": "x", "new_string": "y", "replace_all": true })).await;
    assert_eq!(ws.get_str("f.rs"), "fn a() {\n    y = 1;\n}\nfn b() {\n    y = 2;\n}\n");

    let e = ws.err("edit", json!({ "path": "f.rs", "old_string": "     1\tfn a() {", "new_string": "b" })).await;
    assert!(e.to_string().contains("line-number prefix"), "{e}");

    let e = ws.err("edit", json!({ "path": "nope.rs", "old_string": "a", "new_string": "b" })).await;
    assert!(matches!(e, ToolError::NotFound { .. }), "{e}");
}

#[tokio::test]
async fn edit_preserves_crlf_and_bom() {
    let ws = Ws::new();
    ws.put("win.txt", "\u{feff}one\r\ntwo\r\nthree\r\n");
    ws.ok("read", json!({ "path": "win.txt" })).await;
    ws.ok("edit", json!({ "path": "win.txt", "old_string": "one\ntwo", "new_string": "uno\ndos\nmas" })).await;
    assert_eq!(ws.get("win.txt"), "\u{feff}uno\r\ndos\r\nmas\r\nthree\r\n".as_bytes());
}

#[tokio::test]
async fn edit_matches_crlf_regions_of_mixed_files() {
    let ws = Ws::new();
    ws.put("mixed.txt", "lf line\nwin one\r\nwin two\r\n");
    ws.ok("read", json!({ "path": "mixed.txt" })).await;
    ws.ok("edit", json!({ "path": "mixed.txt", "old_string": "win one\nwin two", "new_string": "a\nb" })).await;
    assert_eq!(ws.get("mixed.txt"), b"lf line\na\r\nb\r\n");
}

#[tokio::test]
async fn multi_edit_is_all_or_nothing() {
    let ws = Ws::new();
    ws.put("m.txt", "alpha\nbeta\ngamma\n");
    ws.ok("read", json!({ "path": "m.txt" })).await;
    let e = ws
        .err(
            "multi_edit",
            json!({ "path": "m.txt", "edits": [
                { "old_string": "alpha", "new_string": "ALPHA" },
                { "old_string": "missing", "new_string": "x" }
            ]}),
        )
        .await;
    assert!(e.to_string().contains("/edits/1/old_string") && e.to_string().contains("No edit was applied"), "{e}");
    assert_eq!(ws.get_str("m.txt"), "alpha\nbeta\ngamma\n");
    ws.ok(
        "multi_edit",
        json!({ "path": "m.txt", "edits": [
            { "old_string": "alpha", "new_string": "ALPHA" },
            { "old_string": "ALPHA\nbeta", "new_string": "AB" }
        ]}),
    )
    .await;
    assert_eq!(ws.get_str("m.txt"), "AB\ngamma\n");
}

mod edit_properties {
    use proptest::prelude::*;
    use serde_json::json;

    use super::Ws;

    proptest! {
        #![proptest_config(ProptestConfig { cases: 48, .. ProptestConfig::default() })]

        /// Applying an edit and then the reverse edit restores the file byte for byte
        /// (whatever the line endings and BOM).
        #[test]
        fn edit_then_reverse_restores(
            before in "[a-c \\n]{0,40}",
            needle in "[xyz]{1,4}",
            after in "[a-c \\n]{0,40}",
            replacement in "[pq\\n]{0,6}",
            crlf in any::<bool>(),
            bom in any::<bool>(),
        ) {
            let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().map_err(|e| TestCaseError::fail(e.to_string()))?;
            rt.block_on(async {
                let ws = Ws::new();
                let mut text = format!("{before}{needle}{after}");
                if crlf { text = text.replace('\n', "\r\n"); }
                let mut bytes = Vec::new();
                if bom { bytes.extend_from_slice("\u{feff}".as_bytes()); }
                bytes.extend_from_slice(text.as_bytes());
                ws.put("p.txt", &bytes);
                ws.ok("read", json!({ "path": "p.txt" })).await;
                // The needle is unique (the rest has no x, y, z); the replacement is unique too
                // when it is marked.
                let new = format!("<{replacement}>");
                ws.ok("edit", json!({ "path": "p.txt", "old_string": needle, "new_string": new })).await;
                ws.ok("edit", json!({ "path": "p.txt", "old_string": new, "new_string": needle })).await;
                prop_assert_eq!(ws.get("p.txt"), bytes);
                Ok(())
            })?;
        }
    }
}

// ---------------------------------------------------------------- grep, glob, ls

fn search_tree(ws: &Ws) {
    ws.put(".gitignore", "ignored/\n*.log\n");
    ws.put("src/main.rs", "fn main() {\n    println!(\"hello\");\n}\n");
    ws.put("src/lib.rs", "pub fn hello() {}\n// HELLO again\n");
    ws.put("docs/readme.md", "say hello\n");
    ws.put("ignored/x.rs", "hello\n");
    ws.put("debug.log", "hello\n");
    ws.put(".toolgate/db", "hello\n");
    ws.put("node_modules/pkg/index.js", "hello\n");
}

/// One file over 64 MiB in every mode (line numbering is off in `count` and
/// `files_with_matches` mode, on in content mode), and one with a NUL byte in its head.
#[tokio::test]
async fn grep_searches_a_large_file_in_every_mode() {
    let ws = Ws::new();
    let lines = 1_200_000u64;
    let mut body = String::with_capacity(70 << 20);
    for i in 1..=lines {
        let tag = if i % 1000 == 0 { "needle" } else { "hay" };
        body.push_str(&format!("{i:>10} {tag} the quick brown fox jumps over the lazy dog\n"));
    }
    assert!(body.len() > 64 << 20, "{}", body.len());
    ws.put("big.log", &body);
    let count = ws.ok("grep", json!({ "pattern": "needle", "path": "big.log", "output_mode": "count" })).await;
    assert_eq!(count, format!("big.log:{}\n", lines / 1000));
    let files = ws.ok("grep", json!({ "pattern": "needle", "path": "big.log" })).await;
    assert_eq!(files, "big.log\n");
    let none = ws.ok("grep", json!({ "pattern": "absent-word", "path": "big.log", "output_mode": "count" })).await;
    assert!(none.starts_with("No matches"), "{none}");
    let content =
        ws.ok("grep", json!({ "pattern": "^ +1099000 needle", "path": "big.log", "output_mode": "content" })).await;
    assert!(content.starts_with("big.log:1099000:   1099000 needle"), "{content}");
    // A NUL byte in the first 64 KiB: binary, skipped, as for any file.
    ws.put("bin.log", format!("\0{body}"));
    let bin = ws.ok("grep", json!({ "pattern": "needle", "path": "bin.log", "output_mode": "count" })).await;
    assert!(bin.starts_with("No matches"), "{bin}");
}

#[tokio::test]
async fn grep_modes_filters_and_ignores() {
    let ws = Ws::new();
    search_tree(&ws);
    let out = ws.ok("grep", json!({ "pattern": "hello" })).await;
    assert_eq!(out, "docs/readme.md\nnode_modules/pkg/index.js\nsrc/lib.rs\nsrc/main.rs\n");

    let out = ws.ok("grep", json!({ "pattern": "hello", "output_mode": "content", "type": "rust" })).await;
    assert_eq!(out, "src/lib.rs:1:pub fn hello() {}\nsrc/main.rs:2:    println!(\"hello\");\n");

    let out = ws
        .ok("grep", json!({ "pattern": "hello", "output_mode": "count", "glob": "*.rs", "case_insensitive": true }))
        .await;
    assert_eq!(out, "src/lib.rs:2\nsrc/main.rs:1\n");

    let out = ws.ok("grep", json!({ "pattern": "main", "output_mode": "content", "context": 1, "path": "src" })).await;
    assert_eq!(out, "src/main.rs:1:fn main() {\nsrc/main.rs-2-    println!(\"hello\");\n");

    let out = ws.ok("grep", json!({ "pattern": "main\\(\\) \\{\\n\\s+println", "multiline": true })).await;
    assert_eq!(out, "src/main.rs\n");

    let out = ws.ok("grep", json!({ "pattern": "hello", "head_limit": 2 })).await;
    assert!(out.contains("showing 2 of 4 files"), "{out}");

    let out = ws.ok("grep", json!({ "pattern": "hello", "path": "src/lib.rs", "output_mode": "content" })).await;
    assert_eq!(out, "src/lib.rs:1:pub fn hello() {}\n");

    // Ignore files of folders above the searched one (inside the workspace) still apply.
    ws.put("src/trace.log", "hello\n");
    ws.put("src/.gitignore", "skip.rs\n");
    ws.put("src/deep/skip.rs", "hello\n");
    let out = ws.ok("grep", json!({ "pattern": "hello", "path": "src/deep" })).await;
    assert!(out.contains("No matches"), "{out}");
    let out = ws.ok("grep", json!({ "pattern": "hello", "path": "src" })).await;
    assert_eq!(out, "src/lib.rs\nsrc/main.rs\n");

    let e = ws.err("grep", json!({ "pattern": "(" })).await;
    assert!(e.to_string().contains("regular expression"), "{e}");
    let e = ws.err("grep", json!({ "pattern": "x", "path": ".toolgate" })).await;
    assert!(matches!(e, ToolError::Denied { .. }), "{e}");
}

#[tokio::test]
async fn glob_is_newest_first_and_ignore_aware() {
    let ws = Ws::new();
    search_tree(&ws);
    let old = std::time::SystemTime::now() - std::time::Duration::from_secs(3600);
    let f = std::fs::File::options().write(true).open(ws.root.join("src/lib.rs")).unwrap_or_else(|e| panic!("{e}"));
    f.set_modified(old).unwrap_or_else(|e| panic!("{e}"));
    let out = ws.ok("glob", json!({ "pattern": "**/*.rs" })).await;
    assert_eq!(out, "src/main.rs\nsrc/lib.rs\n");
    let out = ws.ok("glob", json!({ "pattern": "*.rs", "path": "src" })).await;
    assert_eq!(out, "src/main.rs\nsrc/lib.rs\n");
    let out = ws.ok("glob", json!({ "pattern": "**/*.rs", "limit": 1 })).await;
    assert!(out.starts_with("src/main.rs\n") && out.contains("Showing the 1 newest of 2"), "{out}");
    let out = ws.ok("glob", json!({ "pattern": "*.rs" })).await;
    assert!(out.contains("No files match") && out.contains("**/*.rs"), "{out}");
    let out = ws.ok("glob", json!({ "pattern": "**/*" })).await;
    assert!(!out.contains(".toolgate") && !out.contains("debug.log") && !out.contains("ignored/"), "{out}");

    let capped = Ws::with_config(FsConfig { glob_max_results: 2, ..FsConfig::default() });
    search_tree(&capped);
    let out = capped.ok("glob", json!({ "pattern": "**/*" })).await;
    assert!(out.contains("Showing the 2 newest of 4"), "{out}");
}

#[tokio::test]
async fn ls_shows_types_sizes_and_skips() {
    let ws = Ws::new();
    search_tree(&ws);
    std::os::unix::fs::symlink("src/main.rs", ws.root.join("link.rs")).unwrap_or_else(|e| panic!("{e}"));
    let out = ws.ok("ls", json!({})).await;
    assert!(out.contains("dir           -  src/"), "{out}");
    assert!(out.contains("file         15  .gitignore"), "{out}");
    assert!(out.contains("link          -  link.rs -> src/main.rs"), "{out}");
    assert!(!out.contains(".toolgate"), "{out}");
    assert!(!out.contains("\n  file"), "not recursive: {out}");

    let out = ws.ok("ls", json!({ "recursive": true })).await;
    assert!(out.contains("  file         37  main.rs"), "{out}");
    assert!(out.contains("node_modules/  (not entered"), "{out}");
    assert!(!out.contains("index.js"), "{out}");
    let out = ws.ok("ls", json!({ "path": "node_modules", "recursive": true })).await;
    assert!(out.contains("index.js"), "{out}");

    for i in 0..600 {
        ws.put(&format!("many/f{i:03}"), "");
    }
    let out = ws.ok("ls", json!({ "path": "many" })).await;
    assert!(out.contains("Listing cut at 500 entries"), "{}", &out[out.len() - 200..]);
    let e = ws.err("ls", json!({ "path": ".toolgate" })).await;
    assert!(matches!(e, ToolError::Denied { .. }), "{e}");
}

#[tokio::test]
async fn configured_denied_globs_are_invisible() {
    let ws =
        Ws::with_config(FsConfig { denied: vec!["*.pem".to_owned(), "secrets/".to_owned()], ..FsConfig::default() });
    ws.put("keys/server.pem", "hello key\n");
    ws.put("secrets/token.txt", "hello token\n");
    ws.put("ok.txt", "hello\n");
    assert_eq!(ws.ok("grep", json!({ "pattern": "hello" })).await, "ok.txt\n");
    assert_eq!(ws.ok("glob", json!({ "pattern": "**/*" })).await, "ok.txt\n");
    let out = ws.ok("ls", json!({ "recursive": true })).await;
    assert!(!out.contains("server.pem") && !out.contains("secrets"), "{out}");
    for p in ["keys/server.pem", "secrets/token.txt", "secrets"] {
        let e = ws.err("read", json!({ "path": p })).await;
        assert!(e.to_string().contains("denied by policy"), "{p}: {e}");
        let e = ws.err("write", json!({ "path": p, "content": "x" })).await;
        assert!(matches!(e, ToolError::Denied { .. }), "{p}: {e}");
    }
}

// ---------------------------------------------------------------- locks

#[tokio::test]
async fn locks_refuse_other_agents() {
    let ws = Ws::new();
    let a = ws.ctx_as("alice", "s1");
    let b = ws.ctx_as("bob", "s2");
    let out = ws.call_ctx(&a, "lock_paths", json!({ "globs": ["src/**"], "ttl_ms": 60000 })).await;
    let out = out.unwrap_or_else(|e| panic!("{e}"));
    let token = out.meta.as_ref().and_then(|s| s["token"].as_str()).unwrap_or_default().to_owned();
    assert!(token.starts_with("tg-lock-"), "{token}");
    assert!(toolgate_guard::ids::is_ours(&token));

    let e = ws.call_ctx(&b, "write", json!({ "path": "src/x.rs", "content": "b" })).await;
    let msg = e.err().map(|e| e.to_string()).unwrap_or_default();
    assert!(msg.contains("locked by agent `alice`") && msg.contains("until"), "{msg}");
    assert!(!ws.exists("src/x.rs"));
    let e = ws.call_ctx(&b, "lock_paths", json!({ "globs": ["src/x.rs"] })).await;
    assert!(e.is_err());
    let patch = "*** Begin Patch\n*** Add File: src/y.rs\n+x\n*** End Patch";
    assert!(ws.call_ctx(&b, "apply_patch", json!({ "patch": patch })).await.is_err());

    ws.call_ctx(&a, "write", json!({ "path": "src/x.rs", "content": "a" })).await.unwrap_or_else(|e| panic!("{e}"));
    let out = ws.call_ctx(&b, "unlock_paths", json!({ "tokens": [token.clone()] })).await;
    assert!(out.is_ok_and(|o| o.text_content().contains("Released 0")));
    ws.call_ctx(&a, "unlock_paths", json!({ "tokens": [token] })).await.unwrap_or_else(|e| panic!("{e}"));
    ws.call_ctx(&b, "write", json!({ "path": "src/z.rs", "content": "b" })).await.unwrap_or_else(|e| panic!("{e}"));

    // Expired locks stop binding.
    ws.call_ctx(&a, "lock_paths", json!({ "globs": ["doc.md"], "ttl_ms": 1 })).await.unwrap_or_else(|e| panic!("{e}"));
    tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    ws.call_ctx(&b, "write", json!({ "path": "doc.md", "content": "b" })).await.unwrap_or_else(|e| panic!("{e}"));
}

// ---------------------------------------------------------------- apply_patch beyond the conformance set

#[tokio::test]
async fn apply_patch_preserves_crlf_bom_and_refuses_ambiguity() {
    let ws = Ws::new();
    ws.put("w.txt", "\u{feff}a\r\nb\r\nc\r\n");
    let patch = "*** Begin Patch\n*** Update File: w.txt\n@@\n a\n-b\n+B\n*** End Patch";
    let out = ws.ok("apply_patch", json!({ "patch": patch })).await;
    assert_eq!(out, "Success. Updated the following files:\nM w.txt\n");
    assert_eq!(ws.get("w.txt"), "\u{feff}a\r\nB\r\nc\r\n".as_bytes());

    ws.put("dup.py", "def a():\n    return 1\n\ndef b():\n    return 1\n");
    ws.put("other.txt", "keep\n");
    let patch = "*** Begin Patch\n*** Update File: other.txt\n@@\n-keep\n+changed\n*** Update File: dup.py\n@@\n-    return 1\n+    return 2\n*** End Patch";
    let e = ws.err("apply_patch", json!({ "patch": patch })).await;
    assert!(e.to_string().contains("in 2 places") && e.to_string().contains("lines 2, 5"), "{e}");
    assert_eq!(ws.get_str("other.txt"), "keep\n", "all or nothing");

    let patch = "*** Begin Patch\n*** Update File: dup.py\n@@ def b():\n-    return 1\n+    return 2\n*** End Patch";
    ws.ok("apply_patch", json!({ "patch": patch })).await;
    assert_eq!(ws.get_str("dup.py"), "def a():\n    return 1\n\ndef b():\n    return 2\n");

    let patch = "*** Begin Patch\n*** Add File: ../escape.txt\n+x\n*** End Patch";
    let e = ws.err("apply_patch", json!({ "patch": patch })).await;
    assert!(e.to_string().contains("outside the workspace"), "{e}");
    assert!(!ws.outside().join("escape.txt").exists());

    let patch = "*** Begin Patch\n*** Add File: .toolgate/x\n+x\n*** End Patch";
    assert!(matches!(ws.err("apply_patch", json!({ "patch": patch })).await, ToolError::Denied { .. }));
}
