//! The hard rules as properties over random configurations: deny beats allow, the subagent lists
//! cannot be re-opened, a sub-agent never gains anything, opaque calls are never pre-approved,
//! and another simple command never makes a call more permissive.

use proptest::prelude::*;
use toolgate_core::Touches;
use toolgate_policy::{AgentPolicy, Caller, Parent, Policy, PolicyConfig, Profile, ProviderPolicy, ToolRef, Verdict};

use crate::tool_refs;

const NAMES: &[&str] = &[
    "read",
    "write",
    "exec",
    "process",
    "web_fetch",
    "cron",
    "sessions_spawn",
    "message",
    "image",
    "group:fs",
    "group:web",
    "group:sessions",
    "group:runtime",
    "group:mcp",
    "group:mcp:github",
    "mcp__github__*",
    "*",
    "unknown_tool",
];
const RULES: &[&str] = &[
    "exec(cargo test:*)",
    "exec(rm -rf:*)",
    "exec(*)",
    "exec(git push:*)",
    "exec(cargo:*)",
    "read(src/**)",
    "read(secrets/**)",
    "read(*.env)",
    "write(src/**)",
    "write(Cargo.toml)",
    "web_fetch(domain:example.com)",
    "mcp__github__*(path:docs/**)",
];
const COMMANDS: &[&str] = &["cargo test", "cargo build", "rm -rf x", "git push", "ls", "/usr/bin/cargo test -q"];
const PATHS: &[&str] = &["src/a.rs", "secrets/k", "prod.env", "Cargo.toml", "docs/x.md", "../up", "src", "src/**"];

fn names() -> impl Strategy<Value = Vec<String>> {
    prop::collection::vec(prop::sample::select(NAMES), 0..3).prop_map(|v| v.into_iter().map(String::from).collect())
}

fn with_rules() -> impl Strategy<Value = Vec<String>> {
    (names(), prop::collection::vec(prop::sample::select(RULES), 0..3)).prop_map(|(mut n, r)| {
        n.extend(r.into_iter().map(String::from));
        n
    })
}

fn profile() -> impl Strategy<Value = Option<Profile>> {
    prop::option::of(prop::sample::select(&[Profile::Minimal, Profile::Coding, Profile::Messaging, Profile::Full][..]))
}

fn agent() -> impl Strategy<Value = AgentPolicy> {
    (with_rules(), with_rules(), with_rules(), with_rules()).prop_map(|(allow, also_allow, deny, ask)| AgentPolicy {
        allow,
        also_allow,
        deny,
        ask,
        ..AgentPolicy::default()
    })
}

fn config() -> impl Strategy<Value = PolicyConfig> {
    (profile(), with_rules(), with_rules(), with_rules(), with_rules(), profile(), names(), names(), agent(), agent())
        .prop_map(|(profile, allow, also_allow, deny, ask, p_profile, p_allow, p_deny, main, worker)| {
            let mut cfg = PolicyConfig { profile, allow, also_allow, deny, ask, ..PolicyConfig::default() };
            cfg.by_provider.insert(
                "openai".into(),
                ProviderPolicy { profile: p_profile, allow: p_allow, deny: p_deny, ..ProviderPolicy::default() },
            );
            cfg.agents.insert("main".into(), main);
            cfg.agents.insert("worker".into(), worker);
            cfg
        })
}

fn touches() -> impl Strategy<Value = Touches> {
    (
        prop::collection::vec(prop::sample::select(COMMANDS), 0..3),
        prop::collection::vec(prop::sample::select(PATHS), 0..2),
        prop::collection::vec(prop::sample::select(PATHS), 0..2),
        prop::collection::vec(prop::sample::select(&["example.com", "evil.com"][..]), 0..2),
        any::<bool>(),
    )
        .prop_map(|(commands, reads, writes, hosts, opaque)| Touches {
            commands: commands.iter().map(|c| c.split_whitespace().map(String::from).collect()).collect(),
            reads: reads.into_iter().map(String::from).collect(),
            writes: writes.into_iter().map(String::from).collect(),
            hosts: hosts.into_iter().map(String::from).collect(),
            opaque,
        })
}

fn rank(v: Verdict) -> u8 {
    match v {
        Verdict::Allow => 0,
        Verdict::ToolDefault => 1,
        Verdict::Ask => 2,
        Verdict::Deny => 3,
    }
}

fn callers<R>(provider: Option<&str>, f: impl Fn(&Caller<'_>, &Caller<'_>) -> R) -> R {
    let mut main = Caller::main();
    main.provider = provider;
    let worker = Caller::subagent("worker", &main);
    f(&main, &worker)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

    #[test]
    fn deny_beats_every_allow(cfg in config(), idx in 0..34usize, openai in any::<bool>()) {
        let tools = tool_refs();
        let t = tools[idx % tools.len()];
        let mut cfg = cfg;
        cfg.deny.push(t.name.to_owned());
        for list in [&mut cfg.allow, &mut cfg.also_allow] {
            list.push(t.name.to_owned());
        }
        for a in cfg.agents.values_mut() {
            a.allow.push(t.name.to_owned());
            a.also_allow.push(t.name.to_owned());
        }
        let policy = Policy::new(cfg).unwrap();
        callers(openai.then_some("openai"), |main, worker| {
            prop_assert!(!policy.visible(t, main).visible);
            prop_assert!(!policy.visible(t, worker).visible);
            prop_assert_eq!(policy.decide(t, &Touches::default(), main).verdict, Verdict::Deny);
            Ok(())
        })?;
    }

    #[test]
    fn subagent_lists_cannot_be_reopened(cfg in config()) {
        let mut cfg = cfg;
        for name in ["cron", "sessions_spawn", "memory_get"] {
            cfg.allow.push(name.to_owned());
            cfg.also_allow.push(name.to_owned());
            for a in cfg.agents.values_mut() {
                a.allow.push(name.to_owned());
                a.also_allow.push(name.to_owned());
            }
        }
        let policy = Policy::new(cfg).unwrap();
        callers(None, |_, worker| {
            for (name, group) in [("cron", "automation"), ("sessions_spawn", "sessions"), ("memory_get", "memory")] {
                prop_assert!(!policy.visible(ToolRef::new(name, group), worker).visible, "{name}");
            }
            Ok(())
        })?;
    }

    #[test]
    fn subagents_never_gain(cfg in config(), t in touches(), openai in any::<bool>()) {
        let policy = Policy::new(cfg).unwrap();
        let tools = tool_refs();
        callers(openai.then_some("openai"), |main, worker| {
            for tool in &tools {
                let (m, w) = (policy.visible(*tool, main).visible, policy.visible(*tool, worker).visible);
                prop_assert!(m || !w, "{} visible to the worker only", tool.name);
                let (dm, dw) = (policy.decide(*tool, &t, main), policy.decide(*tool, &t, worker));
                prop_assert!(rank(dw.verdict) >= rank(dm.verdict), "{}: worker {} < main {}\n{}", tool.name, dw.verdict, dm.verdict, dw);
            }
            Ok(())
        })?;
        // A parent given as a tool set bounds visibility the same way.
        let visible_to_main: std::collections::BTreeSet<String> =
            callers(None, |main, _| policy.visible_tools(&tools, main).into_iter().map(String::from).collect());
        let worker = Caller::agent("worker").with_depth(1).with_parent(Parent::Tools(&visible_to_main));
        for name in policy.visible_tools(&tools, &worker) {
            prop_assert!(visible_to_main.contains(name));
        }
    }

    #[test]
    fn opaque_is_never_pre_approved(cfg in config(), t in touches()) {
        let policy = Policy::new(cfg).unwrap();
        let t = Touches { opaque: true, ..t };
        for tool in tool_refs() {
            prop_assert_ne!(policy.decide(tool, &t, &Caller::main()).verdict, Verdict::Allow);
        }
    }

    #[test]
    fn another_command_never_loosens(cfg in config(), t in touches(), extra in prop::sample::select(COMMANDS)) {
        prop_assume!(!t.commands.is_empty());
        let policy = Policy::new(cfg).unwrap();
        let mut more = t.clone();
        more.commands.push(extra.split_whitespace().map(String::from).collect());
        for tool in tool_refs() {
            let (before, after) = (policy.decide(tool, &t, &Caller::main()), policy.decide(tool, &more, &Caller::main()));
            prop_assert!(rank(after.verdict) >= rank(before.verdict), "{}: {} then {}", tool.name, before.verdict, after.verdict);
        }
    }

    #[test]
    fn more_deny_never_shows_more(cfg in config(), extra in prop::sample::select(NAMES)) {
        let before = Policy::new(cfg.clone()).unwrap();
        let mut cfg = cfg;
        cfg.deny.push(extra.to_owned());
        let after = Policy::new(cfg).unwrap();
        let tools = tool_refs();
        let main = Caller::main();
        let shown: Vec<&str> = after.visible_tools(&tools, &main);
        let before_shown = before.visible_tools(&tools, &main);
        for name in shown {
            prop_assert!(before_shown.contains(&name));
        }
    }
}
