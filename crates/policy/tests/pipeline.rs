//! Visibility: profiles × groups, provider / agent / channel layers, deny vs allow vs alsoAllow,
//! subagent and leaf lists, no escalation, unknown names, config errors.

use std::collections::BTreeSet;

use toolgate_policy::{Caller, Parent, Policy, PolicyWarning, ToolRef, WarningKind};

use crate::{TOOLS, check_visible, config, policy, tool_refs};

const ALL: &str = "read write edit grep glob ls exec process web_fetch web_search memory_search memory_get memory_write \
    sessions_list sessions_history sessions_send sessions_spawn subagents session_status browser canvas cron gateway \
    message delegate handoff team_tasks team_message image spawn echo mcp__github__create_issue \
    mcp__github__list_issues mcp__slack__post";

/// Hand-written profile contents over the test registry.
const PROFILES: &[(&str, &str)] = &[
    ("full", ALL),
    (
        "coding",
        "read write edit grep glob ls exec process memory_search memory_get memory_write sessions_list \
         sessions_history sessions_send sessions_spawn subagents session_status image",
    ),
    ("messaging", "sessions_list sessions_history sessions_send session_status message"),
    ("minimal", "session_status"),
];

/// Hand-written group contents over the test registry.
const GROUPS: &[(&str, &str)] = &[
    ("fs", "read write edit grep glob ls"),
    ("runtime", "exec process"),
    ("web", "web_fetch web_search"),
    ("memory", "memory_search memory_get memory_write"),
    ("sessions", "sessions_list sessions_history sessions_send sessions_spawn subagents session_status"),
    ("ui", "browser canvas"),
    ("automation", "cron gateway"),
    ("messaging", "message"),
    ("delegation", "delegate handoff"),
    ("teams", "team_tasks team_message"),
    (
        "toolgate",
        "read write edit grep glob ls exec process web_fetch web_search memory_search memory_get memory_write \
         sessions_list sessions_history sessions_send sessions_spawn subagents session_status browser canvas cron \
         gateway message delegate handoff team_tasks team_message image spawn echo",
    ),
    ("mcp", "mcp__github__create_issue mcp__github__list_issues mcp__slack__post"),
    ("mcp:github", "mcp__github__create_issue mcp__github__list_issues"),
    ("mcp:slack", "mcp__slack__post"),
];

fn words(s: &str) -> BTreeSet<&str> {
    s.split_whitespace().collect()
}

/// In registry order, the names in both sets.
fn intersect(a: &str, b: &str) -> String {
    let (a, b) = (words(a), words(b));
    TOOLS.iter().map(|(n, _)| *n).filter(|n| a.contains(n) && b.contains(n)).collect::<Vec<_>>().join(" ")
}

#[test]
fn no_profile_is_full() {
    check_visible(&[("", "main", ALL), ("", "coder@openai", ALL)]);
    assert_eq!(policy("").profile(), None);
}

#[test]
fn every_profile() {
    let cases: Vec<(String, &str, &str)> =
        PROFILES.iter().map(|(p, expect)| (format!("profile = \"{p}\""), "main", *expect)).collect();
    let cases: Vec<(&str, &str, &str)> = cases.iter().map(|(c, a, e)| (c.as_str(), *a, *e)).collect();
    check_visible(&cases);
}

#[test]
fn every_group() {
    let cases: Vec<(String, &str, &str)> =
        GROUPS.iter().map(|(g, expect)| (format!("allow = [\"group:{g}\"]"), "main", *expect)).collect();
    let cases: Vec<(&str, &str, &str)> = cases.iter().map(|(c, a, e)| (c.as_str(), *a, *e)).collect();
    check_visible(&cases);
}

#[test]
fn every_profile_times_every_group() {
    let mut owned = Vec::new();
    for (p, p_tools) in PROFILES {
        for (g, g_tools) in GROUPS {
            owned.push((format!("profile = \"{p}\"\nallow = [\"group:{g}\"]"), intersect(p_tools, g_tools)));
        }
    }
    let cases: Vec<(&str, &str, &str)> = owned.iter().map(|(c, e)| (c.as_str(), "main", e.as_str())).collect();
    assert_eq!(cases.len(), PROFILES.len() * GROUPS.len());
    check_visible(&cases);
}

#[test]
fn provider_and_agent_layers() {
    let provider_profile = "profile = \"coding\"\n[byProvider.openai]\nprofile = \"minimal\"";
    let layered = r#"
allow = ["group:fs", "group:runtime", "group:web"]
[byProvider.openai]
allow = ["read", "exec", "web_fetch"]
[agents.coder]
allow = ["read", "exec", "grep"]
[agents.coder.byProvider.openai]
allow = ["exec"]
"#;
    let coding = PROFILES[1].1;
    check_visible(&[
        // Step 2: a provider profile narrows the global one.
        (provider_profile, "main@openai", "session_status"),
        (provider_profile, "main@OpenAI/gpt-5", "session_status"),
        (provider_profile, "main@anthropic", coding),
        (provider_profile, "main", coding),
        // A provider profile cannot widen the global profile.
        ("profile = \"minimal\"\n[byProvider.openai]\nprofile = \"full\"", "main@openai", "session_status"),
        // Steps 3 to 6: each allow list intersects.
        (layered, "main", "read write edit grep glob ls exec process web_fetch web_search"),
        (layered, "main@openai", "read exec web_fetch"),
        (layered, "coder", "read grep exec"),
        (layered, "coder@openai", "exec"),
        (layered, "coder@anthropic", "read grep exec"),
        (layered, "other@anthropic", "read write edit grep glob ls exec process web_fetch web_search"),
        // Step 7: the channel ("group") layer.
        (
            "[byChannel.public]\nallow = [\"group:messaging\", \"web_search\"]\ndeny = [\"web_search\"]",
            "main#public",
            "message",
        ),
        ("[byChannel.public]\nallow = [\"group:messaging\"]", "main#private", ALL),
        // An agent allow list cannot widen the global one.
        ("allow = [\"read\"]\n[agents.coder]\nallow = [\"read\", \"exec\"]", "coder", "read"),
        // Provider deny.
        (
            "[byProvider.openai]\ndeny = [\"group:web\", \"group:mcp\"]",
            "main@openai",
            &intersect(ALL, GROUPS[10].1).replace("web_fetch web_search ", ""),
        ),
    ]);
}

#[test]
fn deny_allow_also_allow_precedence() {
    let also_allow_denied = intersect(
        ALL,
        "web_fetch web_search exec process memory_search memory_get memory_write sessions_list sessions_history sessions_send sessions_spawn subagents session_status browser canvas cron gateway message delegate handoff team_tasks team_message image spawn echo mcp__github__create_issue mcp__github__list_issues mcp__slack__post",
    );
    check_visible(&[
        ("allow = [\"group:fs\"]\ndeny = [\"write\"]", "main", "read edit grep glob ls"),
        // alsoAllow never re-opens a denied tool.
        ("deny = [\"group:fs\"]\nalsoAllow = [\"read\"]", "main", &also_allow_denied),
        ("deny = [\"*\"]\nalsoAllow = [\"read\"]", "main", ""),
        // alsoAllow re-adds what the profile or an allow list removed.
        (
            "profile = \"minimal\"\nalsoAllow = [\"read\", \"group:web\"]",
            "main",
            "read web_fetch web_search session_status",
        ),
        ("allow = [\"read\"]\nalsoAllow = [\"exec\"]", "main", "read exec"),
        ("allow = [\"read\"]\n[agents.coder]\nalsoAllow = [\"exec\"]", "coder", "read exec"),
        ("allow = [\"read\"]\n[agents.coder]\nalsoAllow = [\"exec\"]", "main", "read"),
        // Agent deny beats global allow and the agent's own alsoAllow.
        (
            "allow = [\"read\", \"exec\"]\n[agents.coder]\ndeny = [\"exec\"]\nalsoAllow = [\"exec\", \"web_fetch\"]",
            "coder",
            "read web_fetch",
        ),
        // Global deny beats agent allow and agent alsoAllow.
        ("deny = [\"exec\"]\n[agents.coder]\nallow = [\"exec\", \"read\"]\nalsoAllow = [\"exec\"]", "coder", "read"),
        // Wildcards and MCP groups.
        (
            "deny = [\"mcp__github__*\"]",
            "main",
            &ALL.replace(" mcp__github__create_issue mcp__github__list_issues", ""),
        ),
        ("deny = [\"group:mcp:slack\"]", "main", &ALL.replace(" mcp__slack__post", "")),
        (
            "allow = [\"group:mcp\"]\ndeny = [\"mcp__github__create_issue\"]",
            "main",
            "mcp__github__list_issues mcp__slack__post",
        ),
        // Argument rules in an allow list count as naming their tool, but only a list with a
        // plain entry narrows visibility.
        ("allow = [\"read\", \"exec(cargo test:*)\"]", "main", "read exec"),
        ("allow = [\"exec(cargo test:*)\"]", "main", ALL),
        ("allow = [\"exec\", \"read(src/**)\"]", "main", "read exec"),
        ("allow = [\"ls\", \"Edit(src/**)\"]", "main", "edit ls"),
        ("profile = \"minimal\"\nalsoAllow = [\"exec(cargo test:*)\"]", "main", "exec session_status"),
        // Aliases and custom groups.
        ("allow = [\"Bash\", \"read_file\"]", "main", "read exec"),
        (
            "allow = [\"group:review\"]\n[groups]\nreview = [\"read\", \"grep\", \"group:web\"]",
            "main",
            "read grep web_fetch web_search",
        ),
        (
            "allow = [\"group:outer\"]\n[groups]\nouter = [\"group:inner\", \"exec\"]\ninner = [\"ls\"]",
            "main",
            "ls exec",
        ),
    ]);
}

#[test]
fn subagent_and_leaf_lists() {
    let depth1 = "read write edit grep glob ls exec process web_fetch web_search browser canvas message delegate \
                  handoff team_tasks team_message image echo mcp__github__create_issue mcp__github__list_issues \
                  mcp__slack__post";
    let depth1_not_leaf = "read write edit grep glob ls exec process web_fetch web_search sessions_list \
                  sessions_history sessions_spawn subagents browser canvas message delegate handoff team_tasks \
                  team_message image spawn echo mcp__github__create_issue mcp__github__list_issues mcp__slack__post";
    let depth2 = "[subagents]\nmaxDepth = 2";
    check_visible(&[
        ("", "main", ALL),
        // Default maxDepth 1: a depth-1 sub-agent gets both lists.
        ("", "main > worker", depth1),
        // Deeper than maxDepth: nothing.
        ("", "main > worker > deeper", ""),
        // maxDepth 2: the leaf list only at depth 2.
        (depth2, "main > worker", depth1_not_leaf),
        (depth2, "main > worker > leaf", depth1),
        (depth2, "main > a > b > c", ""),
        // No allow or alsoAllow re-opens the subagent or leaf lists.
        (
            "alsoAllow = [\"cron\", \"session_status\"]\n[agents.worker]\nallow = [\"cron\", \"read\"]\nalsoAllow = [\"sessions_spawn\"]",
            "main > worker",
            "read",
        ),
        // Custom lists replace the defaults.
        ("[subagents]\ndeny = [\"exec\"]\nleafDeny = []", "main > worker", &ALL.replace(" exec", "")),
        (
            "[subagents]\ndeny = []\nleafDeny = [\"group:sessions\"]",
            "main > worker",
            &ALL.replace(" sessions_list sessions_history sessions_send sessions_spawn subagents session_status", ""),
        ),
        // maxDepth 0: any sub-agent sees nothing.
        ("[subagents]\nmaxDepth = 0", "main > worker", ""),
        ("[subagents]\nmaxDepth = 0", "main", ALL),
    ]);
}

/// A research sub-agent's own set passes the sub-agent deny list, and only that list: the leaf
/// list, the agent's own deny and the parent still apply, and a plain sub-agent gets nothing.
#[test]
fn a_sub_agents_own_set_passes_the_subagent_deny_list_only() {
    let set: Vec<String> = ["read", "memory_search", "memory_get", "sessions_spawn", "exec"].map(String::from).into();
    let tools = tool_refs();
    let seen = |toml_text: &str, exempt: &[String]| {
        let policy = policy(toml_text);
        let top = Caller::main();
        let worker = Caller::subagent("worker", &top).with_subagent_deny_exempt(exempt);
        let names = policy.visible_tools(&tools, &worker);
        ["read", "memory_search", "memory_get", "memory_write", "sessions_spawn", "exec"]
            .into_iter()
            .filter(|t| names.contains(t))
            .collect::<Vec<_>>()
            .join(" ")
    };
    assert_eq!(seen("", &set), "read memory_search memory_get exec", "the leaf list still hides sessions_spawn");
    assert_eq!(seen("", &[]), "read exec", "a plain sub-agent: memory denied");
    assert_eq!(seen("[agents.worker]\ndeny = [\"memory_get\"]", &set), "read memory_search exec");
    assert_eq!(seen("[agents.main]\ndeny = [\"memory_search\"]", &set), "read memory_get exec", "the parent's view");
    let policy = policy("");
    let top = Caller::main();
    let worker = Caller::subagent("worker", &top).with_subagent_deny_exempt(&set);
    let v = policy.visible(ToolRef::new("memory_search", "memory"), &worker);
    assert!(v.visible && v.trace.to_string().contains("research_tools"), "{}", v.trace);
}

#[test]
fn no_escalation() {
    let depth2 = "[subagents]\nmaxDepth = 2\n";
    check_visible(&[
        // A sub-agent never sees what its parent does not.
        ("[agents.main]\ndeny = [\"exec\"]\n[agents.worker]\nallow = [\"exec\", \"read\"]", "main > worker", "read"),
        (
            "[agents.lead]\nallow = [\"read\", \"grep\"]\n[agents.worker]\nalsoAllow = [\"exec\", \"web_fetch\"]",
            "lead > worker",
            "read grep",
        ),
        // ... nor what its grandparent does not.
        (
            &format!("{depth2}[agents.main]\nallow = [\"read\", \"grep\", \"exec\"]\n[agents.lead]\ndeny = [\"grep\"]"),
            "main > lead > worker",
            "read exec",
        ),
        // A sub-agent running under a different provider than its parent: both provider layers apply.
        (
            "[byProvider.openai]\ndeny = [\"exec\"]",
            "main@openai > worker@anthropic",
            &intersect(
                ALL,
                "read write edit grep glob ls process web_fetch web_search browser canvas message delegate handoff team_tasks team_message image echo mcp__github__create_issue mcp__github__list_issues mcp__slack__post",
            ),
        ),
    ]);

    // A parent narrowed some other way (a spawn call naming the child's tools).
    let policy = policy("");
    let parent_tools: BTreeSet<String> = ["read".to_owned(), "grep".to_owned(), "cron".to_owned()].into();
    let caller = Caller::agent("worker").with_depth(1).with_parent(Parent::Tools(&parent_tools));
    let tools = tool_refs();
    // cron is in the parent's set but on the subagent deny list.
    assert_eq!(policy.visible_tools(&tools, &caller), ["read", "grep"]);

    // A caller with a parent is a sub-agent even if its depth says 0.
    let main = Caller::main();
    let sloppy = Caller::agent("worker").with_parent(Parent::Caller(&main));
    assert_eq!(sloppy.effective_depth(), 1);
    assert!(!policy.visible(ToolRef::new("cron", "automation"), &sloppy).visible);
    let sloppy = Caller::agent("worker").with_parent(Parent::Tools(&parent_tools));
    assert_eq!(policy.visible_tools(&tools, &sloppy), ["read", "grep"]);

    // `Caller::with_chain` builds the parent chain.
    let depth = Caller::with_chain(&["main", "lead", "worker"], Some("openai"), |c| {
        (c.agent.to_owned(), c.depth, c.provider.map(str::to_owned), policy.visible_tools(&tools, c).len())
    });
    assert_eq!(depth, ("worker".to_owned(), 2, Some("openai".to_owned()), 0));
    assert_eq!(Caller::with_chain(&[], None, |c| (c.agent.to_owned(), c.depth)), ("main".to_owned(), 0));

    // `Caller::subagent` inherits provider and depth.
    let main = Caller::main().with_provider("openai");
    let child = Caller::subagent("worker", &main);
    assert_eq!((child.depth, child.provider), (1, Some("openai")));
}

#[test]
fn unknown_names_fail_closed() {
    check_visible(&[
        ("allow = [\"nonexistent_tool\"]", "main", ""),
        ("allow = [\"mcp__jira__create\"]", "main", ""),
        ("allow = [\"read\", \"typo_tool\"]", "main", "read"),
        ("allow = [\"group:nope\"]", "main", ""),
        ("[agents.coder]\nallow = [\"nonexistent_tool\"]", "coder", ""),
    ]);

    // The entry matches once such a tool appears.
    let p = policy("allow = [\"nonexistent_tool\", \"mcp__jira__create\"]");
    assert!(p.visible(ToolRef::new("nonexistent_tool", "toolgate"), &Caller::main()).visible);
    assert!(p.visible(ToolRef::new("mcp__jira__create", "mcp:jira"), &Caller::main()).visible);
    assert!(!p.visible(ToolRef::new("read", "fs"), &Caller::main()).visible);

    let warnings = |cfg: &str| -> Vec<String> { policy(cfg).warnings().iter().map(PolicyWarning::to_string).collect() };
    assert_eq!(
        warnings(
            "allow = [\"nonexistent_tool\", \"mcp__jira__create\"]\ndeny = [\"group:nope\", \"exec(rm:*)\", \"mytool(domain:x.com)\"]"
        ),
        [
            "[tools].allow: unknown tool `nonexistent_tool` (a typo?); the entry is kept and applies if such a tool is registered",
            "[tools].allow: `mcp__jira__create` names an MCP tool that is not loaded yet; the entry is kept and applies once the server registers it",
            "[tools].deny: unknown group `group:nope`; define it in [tools.groups] or check the spelling (it matches tools declaring that group)",
            "[tools].deny: unknown tool `mytool` (a typo?); the entry is kept and applies if such a tool is registered",
            "[tools].allow: every entry names an unknown tool, so this allow list lets nothing through until such tools appear (it does not fail open)",
        ]
    );
    assert!(
        warnings("profile = \"coding\"\nallow = [\"group:fs\", \"exec(cargo test:*)\", \"mcp__github__*\"]").is_empty()
    );
    // The default subagent lists mention tools toolgate may not have; they never warn.
    assert!(warnings("").is_empty());

    // Once tools are registered: entries matching none of them.
    let p = policy(
        "allow = [\"read\", \"mcp__jira__*\", \"web_fetch(domain:example.com)\", \"group:fs\"]\n[agents.x]\ndeny = [\"canvas\", \"tts\"]",
    );
    let found: Vec<(String, String, WarningKind)> =
        p.known_tools(&tool_refs()).into_iter().map(|w| (w.list, w.entry, w.kind)).collect();
    assert_eq!(
        found,
        [
            ("[tools].allow".to_owned(), "mcp__jira__*".to_owned(), WarningKind::NoRegisteredTool),
            ("[tools.agents.x].deny".to_owned(), "tts".to_owned(), WarningKind::NoRegisteredTool),
        ]
    );
}

#[test]
fn config_errors_name_the_entry() {
    let cases = [
        (
            "allow = [\"exec(cargo test:*\"]",
            "[tools].allow: invalid entry `exec(cargo test:*`: an argument rule must end with `)`",
        ),
        (
            "deny = [\"read(../x)\"]",
            "[tools].deny: invalid entry `read(../x)`: path patterns are workspace-relative: no `..`, `.` or empty components",
        ),
        ("deny = [\"read(a[)\"]", "[tools].deny: invalid entry `read(a[)`: "),
        (
            "allow = [\"web_fetch(example.com)\"]",
            "[tools].allow: invalid entry `web_fetch(example.com)`: say what the pattern matches: `domain:HOST`",
        ),
        (
            "ask = [\"web_fetch(domain:https://x.com/a)\"]",
            "[tools].ask: invalid entry `web_fetch(domain:https://x.com/a)`: a domain pattern is",
        ),
        (
            "deny = [\"group:fs(x)\"]",
            "[tools].deny: invalid entry `group:fs(x)`: an argument rule names one tool or a name wildcard, not a group",
        ),
        ("deny = [\"exec()\"]", "[tools].deny: invalid entry `exec()`: the pattern between the parentheses is empty"),
        ("deny = [\"exec(ca*go)\"]", "[tools].deny: invalid entry `exec(ca*go)`: `*` is only allowed at the end"),
        (
            "deny = [\"read(domain:x.com)\"]",
            "[tools].deny: invalid entry `read(domain:x.com)`: `domain:` patterns go with web tools",
        ),
        ("allow = [\"read file\"]", "[tools].allow: invalid entry `read file`: a tool entry is a tool name"),
        ("allow = [\"\"]", "[tools].allow: invalid entry ``: empty entry"),
        (
            "[subagents]\ndeny = [\"exec(rm:*)\"]",
            "[tools.subagents].deny: invalid entry `exec(rm:*)`: this list takes tool names, wildcards and groups, not argument rules",
        ),
        ("[groups]\nfs = [\"read\"]", "[tools.groups].fs: this group is built in"),
        ("[groups]\n\"mcp:x\" = [\"read\"]", "[tools.groups].mcp:x: this group is built in"),
        (
            "[groups]\na = [\"group:b\"]\nb = [\"group:a\"]",
            "[tools.groups].a: groups include each other in a cycle (a -> b -> a)",
        ),
        (
            "[agents.coder.byProvider.openai]\nallow = [\"exec(ca*go)\"]",
            "[tools.agents.coder.byProvider.openai].allow: invalid entry `exec(ca*go)`",
        ),
        ("[byChannel.\"team chat\"]\ndeny = [\"x y\"]", "[tools.byChannel.\"team chat\"].deny: invalid entry `x y`"),
    ];
    for (cfg, expect) in cases {
        let got = match Policy::new(config(cfg)) {
            Ok(_) => "compiled".to_owned(),
            Err(e) => e.to_string(),
        };
        assert!(got.starts_with(expect), "config:\n{cfg}\nexpected: {expect}\n     got: {got}");
    }
    // Unknown keys are refused by the config schema itself.
    for bad in [
        "alow = [\"read\"]",
        "[agents.x]\nprofile = \"full\"",
        "[subagents]\nmax_depth = 2",
        "profile = \"everything\"",
    ] {
        assert!(toml::from_str::<toolgate_policy::PolicyConfig>(bad).is_err(), "{bad}");
    }
}
