//! What the `toolgate` binary must not contain: the MCP conformance suite's fixtures and client
//! live in the test-only `toolgate-conformance` crate (docs/mcp-conformance.md), and nothing of
//! them may reach the binary a user runs.
//!
//! The binary checked is the one this test binary was built with (`CARGO_BIN_EXE_toolgate`, a
//! debug build: its symbol table, string constants and debug info are all in the file, so a
//! module, a type, a source path or a message of that code would show). A release build is the
//! same code with less in the file, so what is absent here is absent there too.

use std::path::Path;

use crate::support::npm::TOOLGATE;

/// Byte strings that only the conformance code has: its module, types and source paths
/// (`toolgate_mcp::conformance`, `WithConformanceFixtures`, `conformance_client.rs`), the
/// client's messages and environment variables (`conformance client: …`,
/// `MCP_CONFORMANCE_SCENARIO`), the `--conformance` flag, and fixtures' names and texts.
const FORBIDDEN: &[&str] = &[
    "conformance",
    "Conformance",
    "CONFORMANCE",
    "test_simple_text",
    "test_input_required_result",
    "json_schema_2020_12_tool",
    "test://static-text",
    "This is a simple text response for testing.",
];

/// Strings of code that is in the binary (a message, a module path, a type): the search must
/// find them, or it proves nothing.
const PRESENT: &[&str] = &["Ctrl-C stops the server", "toolgate_mcp", "McpServer"];

/// For each of `patterns`: how often it occurs in `bytes` and what surrounds its first
/// occurrence (`None`: absent). One pass over the bytes for all of them.
fn search(bytes: &[u8], patterns: &[&str]) -> Vec<Option<(usize, String)>> {
    let searcher = aho_corasick::AhoCorasick::new(patterns).unwrap();
    let mut hits = vec![(0, usize::MAX); patterns.len()];
    for m in searcher.find_iter(bytes) {
        let (count, first) = &mut hits[m.pattern().as_usize()];
        *count += 1;
        *first = (*first).min(m.start());
    }
    hits.into_iter()
        .zip(patterns)
        .map(|((count, first), pattern)| {
            (count > 0).then(|| {
                let around = &bytes[first.saturating_sub(40)..(first + pattern.len() + 40).min(bytes.len())];
                let around = String::from_utf8_lossy(around);
                (count, around.chars().map(|c| if c.is_control() { '.' } else { c }).collect())
            })
        })
        .collect()
}

/// The forbidden strings in `bytes`, described; and whether every [`PRESENT`] one was found.
fn forbidden_in(bytes: &[u8]) -> (Vec<String>, bool) {
    let patterns: Vec<&str> = FORBIDDEN.iter().chain(PRESENT).copied().collect();
    let hits = search(bytes, &patterns);
    let (forbidden, present) = hits.split_at(FORBIDDEN.len());
    let found = FORBIDDEN
        .iter()
        .zip(forbidden)
        .filter_map(|(needle, hit)| hit.as_ref().map(|(n, around)| format!("{needle:?} ({n}x), first in {around:?}")))
        .collect();
    (found, present.iter().all(Option::is_some))
}

#[test]
fn the_toolgate_binary_contains_no_conformance_code() {
    let bytes = std::fs::read(Path::new(TOOLGATE)).unwrap_or_else(|e| panic!("cannot read {TOOLGATE}: {e}"));
    let (found, searched) = forbidden_in(&bytes);
    assert!(searched, "the search did not find {PRESENT:?} in {TOOLGATE}: it proves nothing");
    assert!(
        found.is_empty(),
        "{TOOLGATE} contains conformance code (it belongs in crates/conformance):\n  {}",
        found.join("\n  ")
    );
}

#[test]
fn the_search_finds_planted_strings_case_sensitively() {
    let planted = b"\0_ZN12toolgate_mcp11conformance8Fixtures\0test_simple_text\0McpServer\0";
    let (found, searched) = forbidden_in(planted);
    assert_eq!(found.len(), 2, "{found:?}");
    assert!(found[0].starts_with("\"conformance\" (1x), first in"), "{found:?}");
    assert!(found[1].starts_with("\"test_simple_text\" (1x)"), "{found:?}");
    assert!(!searched, "the planted bytes lack the server's banner");
}
