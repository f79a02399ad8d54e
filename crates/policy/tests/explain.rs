//! The explain output: `Decision` and `Visibility` printed, one line per step.

use crate::{policy, tool, touches, with_caller};

fn explain(cfg: &str, tool_name: &str, touch: &str, caller: &str) -> String {
    let policy = policy(cfg);
    let t = touches(touch);
    with_caller(caller, |c| policy.decide(tool(tool_name), &t, c).to_string())
}

fn check(cfg: &str, tool_name: &str, touch: &str, caller: &str, expect: &str) {
    let got = explain(cfg, tool_name, touch, caller);
    assert_eq!(got.trim_end(), expect.trim(), "\n--- got ---\n{got}");
}

#[test]
fn default_profile_is_stated() {
    check(
        "",
        "read",
        "read src/a.rs",
        "main",
        "
tool default: no policy rule decided; `read`'s own approval requirement applies
1 profile full (no profile configured; approvals and the sandbox protect a default setup): includes `read` -> kept
2 no rule no argument rule matched this call of `read` -> tool default",
    );
}

#[test]
fn deny_rule() {
    check(
        "profile = \"coding\"\ndeny = [\"exec(rm:*)\"]",
        "exec",
        "cmd cargo test | cmd rm -rf x",
        "main",
        "
deny: denied by rule `exec(rm:*)` in [tools].deny (it matched `rm -rf x`)
1 profile coding (from [tools].profile): `group:runtime` includes `exec` -> kept
2 deny rule `exec(rm:*)` from [tools].deny matched `rm -rf x` -> deny",
    );
}

#[test]
fn layered_visibility() {
    check(
        "allow = [\"group:fs\", \"group:web\"]\ndeny = [\"web_fetch\"]\nalsoAllow = [\"web_fetch\"]\n[byProvider.openai]\nallow = [\"web_search\"]",
        "web_fetch",
        "host example.com",
        "main@openai",
        "
deny: tool `web_fetch` is not available to agent `main`: hidden by `web_fetch` in [tools].deny; run `toolgate policy explain web_fetch` for the steps
1 profile full (no profile configured; approvals and the sandbox protect a default setup): includes `web_fetch` -> kept
2 allow [tools].allow: `group:web` names `web_fetch` -> kept
3 provider allow [tools.byProvider.openai].allow does not name `web_fetch` -> removed
4 deny [tools].deny: `web_fetch` names `web_fetch` -> unchanged
5 alsoAllow [tools].alsoAllow: `web_fetch` names `web_fetch`, but a deny list removed it (deny beats allow) -> unchanged",
    );
}

#[test]
fn subagent_with_parent() {
    check(
        "[agents.main]\nask = [\"exec(git:*)\"]\n[agents.worker]\nallow = [\"exec(git status)\"]",
        "exec",
        "cmd git status",
        "main > worker",
        "
ask: parent agent `main`: rule `exec(git:*)` in [tools.agents.main].ask asks for approval (it matched `git status`)
1 profile full (no profile configured; approvals and the sandbox protect a default setup): includes `exec` -> kept
2 subagent deny depth 1: the default subagent deny list does not name `exec` -> kept
3 leaf deny depth 1 is the maximum (1): the default leaf deny list does not name `exec` -> kept
4 parent checking parent agent `main` (depth 0) -> unchanged
  5 profile full (no profile configured; approvals and the sandbox protect a default setup): includes `exec` -> kept
6 allow rule `exec(git status)` from [tools.agents.worker].allow matched `git status` -> allow
7 parent checking parent agent `main`'s rules -> unchanged
  8 ask rule `exec(git:*)` from [tools.agents.main].ask matched `git status` -> ask
9 parent parent agent `main` says ask, stricter than allow -> ask",
    );
}

#[test]
fn visibility_display() {
    let policy = policy("");
    let out = with_caller("main > worker", |c| policy.visible(tool("cron"), c).to_string());
    assert_eq!(
        out.trim_end(),
        "hidden by `cron` in the default subagent deny list
1 profile full (no profile configured; approvals and the sandbox protect a default setup): includes `cron` -> kept
2 subagent deny depth 1: the default subagent deny list: `cron` names `cron` -> removed
3 leaf deny depth 1 is the maximum (1): the default leaf deny list does not name `cron` -> unchanged
4 parent checking parent agent `main` (depth 0) -> unchanged
  5 profile full (no profile configured; approvals and the sandbox protect a default setup): includes `cron` -> kept"
    );
}

#[test]
fn decision_serializes_for_the_audit_log() {
    let policy = policy("deny = [\"exec(rm:*)\"]");
    let d = policy.decide(tool("exec"), &touches("cmd rm x"), &toolgate_policy::Caller::main());
    let json = serde_json::to_value(&d).unwrap();
    assert_eq!(json["verdict"], "deny");
    assert_eq!(json["rule"], "`exec(rm:*)` in [tools].deny");
    assert_eq!(json["trace"][1]["stage"], "deny_rule");
    assert_eq!(json["trace"][1]["effect"], "deny");
    assert_eq!(json["trace"].as_array().map(Vec::len), Some(2));

    fn shared<T: Send + Sync + 'static>() {}
    shared::<toolgate_policy::Policy>();
}

#[test]
fn docs_example_config_compiles() {
    #[derive(serde::Deserialize)]
    struct File {
        tools: toolgate_policy::PolicyConfig,
    }
    let doc = include_str!("../../../docs/policy.md");
    let block = doc.split("```toml\n").nth(1).and_then(|rest| rest.split("```").next()).unwrap();
    let file: File = toml::from_str(block).unwrap();
    let policy = toolgate_policy::Policy::new(file.tools).unwrap();
    assert_eq!(policy.profile(), Some(toolgate_policy::Profile::Coding));
    assert!(policy.warnings().is_empty(), "{:?}", policy.warnings());
}
