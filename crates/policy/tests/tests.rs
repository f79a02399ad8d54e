//! Behaviour of the policy through its public API: table-driven, one `check` helper per question.

#![allow(clippy::unwrap_used)]

use toolgate_core::Touches;
use toolgate_policy::{Caller, Parent, Policy, PolicyConfig, ToolRef};

/// The registry every table runs against: (name, group), in listing order.
const TOOLS: &[(&str, &str)] = &[
    ("read", "fs"),
    ("write", "fs"),
    ("edit", "fs"),
    ("grep", "fs"),
    ("glob", "fs"),
    ("ls", "fs"),
    ("exec", "runtime"),
    ("process", "runtime"),
    ("web_fetch", "web"),
    ("web_search", "web"),
    ("memory_search", "memory"),
    ("memory_get", "memory"),
    ("memory_write", "memory"),
    ("sessions_list", "sessions"),
    ("sessions_history", "sessions"),
    ("sessions_send", "sessions"),
    ("sessions_spawn", "sessions"),
    ("subagents", "sessions"),
    ("session_status", "sessions"),
    ("browser", "ui"),
    ("canvas", "ui"),
    ("cron", "automation"),
    ("gateway", "automation"),
    ("message", "messaging"),
    ("delegate", "delegation"),
    ("handoff", "delegation"),
    ("team_tasks", "teams"),
    ("team_message", "teams"),
    ("image", "toolgate"),
    ("spawn", "toolgate"),
    ("echo", "toolgate"),
    ("mcp__github__create_issue", "mcp:github"),
    ("mcp__github__list_issues", "mcp:github"),
    ("mcp__slack__post", "mcp:slack"),
];

fn tool_refs() -> Vec<ToolRef<'static>> {
    TOOLS.iter().map(|(n, g)| ToolRef::new(n, g)).collect()
}

fn tool(name: &str) -> ToolRef<'_> {
    let group = TOOLS.iter().find(|(n, _)| *n == name).map_or("toolgate", |(_, g)| *g);
    ToolRef::new(name, group)
}

fn config(toml_text: &str) -> PolicyConfig {
    toml::from_str(toml_text).unwrap_or_else(|e| panic!("bad test config: {e}\n{toml_text}"))
}

fn policy(toml_text: &str) -> Policy {
    Policy::new(config(toml_text)).unwrap_or_else(|e| panic!("policy error: {e}"))
}

/// Runs `f` with the caller described by `spec`: `agent[@provider][#channel]`, sub-agents
/// chained with ` > ` (`main > researcher` is `researcher` at depth 1, child of `main`).
fn with_caller<R>(spec: &str, f: impl FnOnce(&Caller<'_>) -> R) -> R {
    let parts: Vec<(String, Option<String>, Option<String>)> = spec
        .split(" > ")
        .map(|p| {
            let (rest, channel) = match p.split_once('#') {
                Some((r, c)) => (r, Some(c.to_owned())),
                None => (p, None),
            };
            let (agent, provider) = match rest.split_once('@') {
                Some((a, pr)) => (a, Some(pr.to_owned())),
                None => (rest, None),
            };
            (agent.to_owned(), provider, channel)
        })
        .collect();
    fn chain<R>(
        parts: &[(String, Option<String>, Option<String>)],
        parent: Option<&Caller<'_>>,
        depth: u32,
        f: impl FnOnce(&Caller<'_>) -> R,
    ) -> R {
        let (agent, provider, channel) = &parts[0];
        let caller = Caller {
            agent,
            provider: provider.as_deref(),
            channel: channel.as_deref(),
            depth,
            parent: parent.map(Parent::Caller),
            subagent_deny_exempt: &[],
        };
        if parts.len() == 1 { f(&caller) } else { chain(&parts[1..], Some(&caller), depth + 1, f) }
    }
    chain(&parts, None, 0, f)
}

/// The space-separated names visible to `caller` under `toml_text`.
fn visible(toml_text: &str, caller: &str) -> String {
    let policy = policy(toml_text);
    let tools = tool_refs();
    with_caller(caller, |c| policy.visible_tools(&tools, c).join(" "))
}

/// Parses touches: `cmd cargo test | cmd rm -rf x | read a | write b | host h | opaque`.
fn touches(spec: &str) -> Touches {
    let mut t = Touches::default();
    for part in spec.split(" | ").map(str::trim).filter(|p| !p.is_empty()) {
        let (kind, rest) = part.split_once(' ').unwrap_or((part, ""));
        match kind {
            "cmd" => t.commands.push(rest.split_whitespace().map(str::to_owned).collect()),
            "read" => t.reads.push(rest.to_owned()),
            "write" => t.writes.push(rest.to_owned()),
            "host" => t.hosts.push(rest.to_owned()),
            "opaque" => t.opaque = true,
            other => panic!("unknown touch kind {other}"),
        }
    }
    t
}

/// `verdict` or `verdict RULE`, for the decision on one call.
fn decide(toml_text: &str, tool_name: &str, touch: &str, caller: &str) -> String {
    let policy = policy(toml_text);
    let t = touches(touch);
    with_caller(caller, |c| {
        let d = policy.decide(tool(tool_name), &t, c);
        match d.rule {
            Some(rule) => format!("{} {rule}", d.verdict),
            None => d.verdict.to_string(),
        }
    })
}

fn check_visible(cases: &[(&str, &str, &str)]) {
    let mut failures = Vec::new();
    for (cfg, caller, expect) in cases {
        let got = visible(cfg, caller);
        if got != *expect {
            failures.push(format!("config:\n{cfg}\ncaller: {caller}\nexpected: {expect}\n     got: {got}\n"));
        }
    }
    assert!(failures.is_empty(), "{} case(s) failed:\n{}", failures.len(), failures.join("\n"));
}

fn check_decide(cases: &[(&str, &str, &str, &str, &str)]) {
    let mut failures = Vec::new();
    for (cfg, tool_name, touch, caller, expect) in cases {
        let got = decide(cfg, tool_name, touch, caller);
        if got != *expect {
            failures.push(format!(
                "config:\n{cfg}\ncall: {caller} {tool_name} [{touch}]\nexpected: {expect}\n     got: {got}\n"
            ));
        }
    }
    assert!(failures.is_empty(), "{} case(s) failed:\n{}", failures.len(), failures.join("\n"));
}

mod explain;
mod pipeline;
mod properties;
mod rules;
