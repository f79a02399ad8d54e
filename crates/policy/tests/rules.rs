//! Argument rules: deny → ask → allow, per simple command, and the classic bypasses. The argv
//! arrives already unwrapped by the shell analyzer (`toolgate-guard`), so each case below is
//! written as the simple commands the analyzer reports for the shell line in its comment.

use crate::check_decide;

const RULES: &str = r#"
allow = [
  "exec(cargo test:*)",
  "exec(npm run build)",
  "read(src/**)",
  "write(src/**)",
  "web_fetch(domain:example.com)",
  "mcp__github__*(path:docs/**)",
]
ask = ["exec(git push:*)", "write(Cargo.toml)"]
deny = [
  "exec(rm -rf:*)",
  "exec(git push --force:*)",
  "read(secrets/**)",
  "read(*.env)",
  "web_fetch(domain:evil.com)",
]
"#;

#[test]
fn commands_per_simple_command() {
    const ALLOW: &str = "allow `exec(cargo test:*)` in [tools].allow";
    const DENY_RM: &str = "deny `exec(rm -rf:*)` in [tools].deny";
    const DENY_FORCE: &str = "deny `exec(git push --force:*)` in [tools].deny";
    const ASK_PUSH: &str = "ask `exec(git push:*)` in [tools].ask";
    check_decide(&[
        (RULES, "exec", "cmd cargo test", "main", ALLOW),
        (RULES, "exec", "cmd cargo test --release -p core", "main", ALLOW),
        (RULES, "exec", "cmd cargo testx", "main", "tool default"),
        (RULES, "exec", "cmd cargo build", "main", "tool default"),
        // Exact rule: no extra arguments.
        (RULES, "exec", "cmd npm run build", "main", "allow `exec(npm run build)` in [tools].allow"),
        (RULES, "exec", "cmd npm run build --prod", "main", "tool default"),
        // argv[0] by basename, but only from a system directory for allow rules.
        (RULES, "exec", "cmd /usr/bin/cargo test", "main", ALLOW),
        (RULES, "exec", "cmd ./cargo test", "main", "tool default"),
        (RULES, "exec", "cmd /work/ws/cargo test", "main", "tool default"),
        (RULES, "exec", "cmd ./rm -rf x", "main", DENY_RM),
        // `cargo test && rm -rf x`: deny matches ANY simple command.
        (RULES, "exec", "cmd cargo test | cmd rm -rf x", "main", DENY_RM),
        // `cargo test\necho pwned`, `cargo test & curl x | sh`: allow must match EVERY command.
        (RULES, "exec", "cmd cargo test | cmd echo pwned", "main", "tool default"),
        (RULES, "exec", "cmd cargo test | cmd curl x | cmd sh", "main", "tool default"),
        // `cargo test $(rm -rf x)`: the substitution is its own simple command ...
        (RULES, "exec", "cmd cargo test $(rm -rf x) | cmd rm -rf x", "main", DENY_RM),
        // ... and when the analyzer cannot follow it, the call is opaque: never allowed.
        (RULES, "exec", "cmd cargo test | opaque", "main", "ask"),
        (RULES, "exec", "opaque", "main", "ask"),
        (RULES, "exec", "cmd rm -rf x | opaque", "main", DENY_RM),
        // Wrappers are unwrapped before policy: `env FOO=1 cargo test`, `sudo rm -rf /`,
        // `sh -c 'cargo test; rm -fr x'`, `timeout 5 git push -f`.
        (RULES, "exec", "cmd cargo test", "main", ALLOW),
        (RULES, "exec", "cmd rm -rf /", "main", DENY_RM),
        (RULES, "exec", "cmd cargo test | cmd rm -fr x", "main", DENY_RM),
        // Options: split, reordered, clustered, abbreviated, with values.
        (RULES, "exec", "cmd rm -r -f x", "main", DENY_RM),
        (RULES, "exec", "cmd rm x -Rrf", "main", DENY_RM),
        (RULES, "exec", "cmd git push origin --force", "main", DENY_FORCE),
        (RULES, "exec", "cmd git push --forc origin", "main", DENY_FORCE),
        (RULES, "exec", "cmd git push --force=true", "main", DENY_FORCE),
        (RULES, "exec", "cmd git push --force-with-lease", "main", ASK_PUSH),
        // Long-form synonyms of short options are the shell classifier's job (pinned here).
        (RULES, "exec", "cmd rm --recursive --force x", "main", "tool default"),
        // Ask matches ANY simple command, and comes before allow.
        (RULES, "exec", "cmd git push origin main", "main", ASK_PUSH),
        (RULES, "exec", "cmd cargo test | cmd git push", "main", ASK_PUSH),
        // Paths an exec call touches are judged by read/write rules too.
        (RULES, "exec", "cmd cat secrets/key | read secrets/key", "main", "deny `read(secrets/**)` in [tools].deny"),
        (RULES, "exec", "cmd cargo test | write target/out", "main", ALLOW),
        (RULES, "exec", "cmd cargo test | write Cargo.toml", "main", "ask `write(Cargo.toml)` in [tools].ask"),
        // `exec(...)` deny and ask rules bind every tool that runs commands; allow rules only `exec`.
        (RULES, "process", "cmd rm -rf x", "main", DENY_RM),
        (RULES, "process", "cmd git push", "main", ASK_PUSH),
        (RULES, "process", "cmd cargo test", "main", "tool default"),
        // No commands at all: nothing for an allow rule to match.
        (RULES, "exec", "", "main", "tool default"),
    ]);
}

#[test]
fn paths() {
    const DENY_SECRETS: &str = "deny `read(secrets/**)` in [tools].deny";
    const ALLOW_READ: &str = "allow `read(src/**)` in [tools].allow";
    check_decide(&[
        (RULES, "read", "read src/main.rs", "main", ALLOW_READ),
        (RULES, "read", "read ./src/main.rs", "main", ALLOW_READ),
        (RULES, "read", "read src//a/./b.rs", "main", ALLOW_READ),
        (RULES, "read", "read README.md", "main", "tool default"),
        (RULES, "read", "", "main", "tool default"),
        // Allow needs every path.
        (RULES, "read", "read src/a.rs | read README.md", "main", "tool default"),
        // `read(...)` allow rules pre-approve the other read-only file tools.
        (RULES, "glob", "read src/**/*.rs", "main", ALLOW_READ),
        (RULES, "grep", "read src/*.rs", "main", ALLOW_READ),
        (RULES, "grep", "read src/**/*.rs | read tests/**/*.rs", "main", "tool default"),
        // A recursive read of `src` may reach `src/prod.env`: the unanchored deny rule wins.
        (RULES, "grep", "read src/**", "main", "deny `read(*.env)` in [tools].deny"),
        ("allow = [\"read(src/**)\"]", "grep", "read src/**", "main", ALLOW_READ),
        // Deny: any path, normalized, case-folded, escaping paths always.
        (RULES, "read", "read secrets/key", "main", DENY_SECRETS),
        (RULES, "read", "read src/a.rs | read secrets/key", "main", DENY_SECRETS),
        (RULES, "read", "read ./secrets/../secrets/key", "main", DENY_SECRETS),
        (RULES, "read", "read src/../secrets/key", "main", DENY_SECRETS),
        (RULES, "read", "read Secrets/KEY", "main", DENY_SECRETS),
        (RULES, "read", "read ../outside", "main", DENY_SECRETS),
        (RULES, "read", "read src/../../outside", "main", DENY_SECRETS),
        (RULES, "read", "read /etc/passwd", "main", DENY_SECRETS),
        (RULES, "read", "read src/secrets/key", "main", ALLOW_READ),
        (RULES, "read", "read config/prod.env", "main", "deny `read(*.env)` in [tools].deny"),
        (RULES, "read", "read .env", "main", "deny `read(*.env)` in [tools].deny"),
        // A directory or glob read that may reach a protected path.
        (RULES, "grep", "read secrets", "main", DENY_SECRETS),
        (RULES, "grep", "read .", "main", DENY_SECRETS),
        (RULES, "grep", "read **/*.rs", "main", DENY_SECRETS),
        (RULES, "ls", "read src", "main", ALLOW_READ),
        // `grep` and `glob` given a directory read everything under it.
        (RULES, "grep", "read src", "main", "deny `read(*.env)` in [tools].deny"),
        (RULES, "glob", "read ./config/", "main", "deny `read(*.env)` in [tools].deny"),
        (RULES, "grep", "read src/main.rs", "main", ALLOW_READ),
        ("allow = [\"read(src/**)\"]\ndeny = [\"read(secrets/**)\"]", "grep", "read src", "main", ALLOW_READ),
        ("deny = [\"read(secrets/**)\"]", "grep", "read /", "main", "deny `read(secrets/**)` in [tools].deny"),
        // Read deny rules apply to every tool's reads, write rules to every tool's writes.
        (RULES, "mcp__github__create_issue", "read secrets/token", "main", DENY_SECRETS),
        (RULES, "write", "write src/lib.rs", "main", "allow `write(src/**)` in [tools].allow"),
        (RULES, "edit", "write src/lib.rs", "main", "allow `write(src/**)` in [tools].allow"),
        (RULES, "write", "write Cargo.toml", "main", "ask `write(Cargo.toml)` in [tools].ask"),
        (RULES, "edit", "write src/../Cargo.toml", "main", "ask `write(Cargo.toml)` in [tools].ask"),
        (RULES, "write", "write ../src/x", "main", "ask `write(Cargo.toml)` in [tools].ask"),
        (RULES, "write", "write src/lib.rs | write README.md", "main", "tool default"),
        // `read(...)` allow rules do not pre-approve writes, nor a read tool's odd writes.
        (RULES, "write", "write src/../src/x.rs", "main", "allow `write(src/**)` in [tools].allow"),
        (RULES, "exec", "read src/main.rs", "main", "tool default"),
        // `path:` rules of a named tool cover its reads and writes.
        (
            RULES,
            "mcp__github__create_issue",
            "read docs/a.md",
            "main",
            "allow `mcp__github__*(path:docs/**)` in [tools].allow",
        ),
        (RULES, "mcp__github__list_issues", "read docs/a.md | write src/x", "main", "tool default"),
        (RULES, "mcp__slack__post", "read docs/a.md", "main", "tool default"),
    ]);
}

#[test]
fn hosts() {
    const ALLOW: &str = "allow `web_fetch(domain:example.com)` in [tools].allow";
    const DENY: &str = "deny `web_fetch(domain:evil.com)` in [tools].deny";
    check_decide(&[
        (RULES, "web_fetch", "host example.com", "main", ALLOW),
        (RULES, "web_fetch", "host docs.example.com", "main", ALLOW),
        (RULES, "web_fetch", "host Example.COM.", "main", ALLOW),
        (RULES, "web_fetch", "host example.com.evil.net", "main", "tool default"),
        (RULES, "web_fetch", "host notexample.com", "main", "tool default"),
        (RULES, "web_fetch", "host example.com | host other.org", "main", "tool default"),
        (RULES, "web_fetch", "host evil.com", "main", DENY),
        (RULES, "web_fetch", "host a.b.evil.com", "main", DENY),
        (RULES, "web_fetch", "host example.com | host evil.com", "main", DENY),
        // Host rules name one tool.
        (RULES, "web_search", "host evil.com", "main", "tool default"),
        (
            "deny = [\"*(domain:evil.com)\"]",
            "web_search",
            "host evil.com",
            "main",
            "deny `*(domain:evil.com)` in [tools].deny",
        ),
        ("allow = [\"web_fetch(domain:*.example.com)\"]", "web_fetch", "host example.com", "main", "tool default"),
        (
            "allow = [\"web_fetch(domain:*.example.com)\"]",
            "web_fetch",
            "host a.example.com",
            "main",
            "allow `web_fetch(domain:*.example.com)` in [tools].allow",
        ),
    ]);
}

#[test]
fn layers_ask_lists_and_visibility() {
    check_decide(&[
        // Hidden tools are denied for calls, naming what hid them.
        ("allow = [\"read\"]", "exec", "cmd ls", "main", "deny [tools].allow (it does not name `exec`)"),
        ("deny = [\"exec\"]", "exec", "cmd ls", "main", "deny `exec` in [tools].deny"),
        ("profile = \"minimal\"", "exec", "cmd ls", "main", "deny profile `minimal` ([tools].profile)"),
        // A plain name in `ask`: every call asks, even one an allow rule matches.
        (
            "ask = [\"exec\"]\nallow = [\"exec(cargo test:*)\"]",
            "exec",
            "cmd cargo test",
            "main",
            "ask `exec` in [tools].ask",
        ),
        ("ask = [\"group:web\"]", "web_fetch", "host example.com", "main", "ask `group:web` in [tools].ask"),
        // A plain allow entry only makes a tool visible; it pre-approves nothing.
        ("allow = [\"exec\"]", "exec", "cmd cargo test", "main", "tool default"),
        ("allow = [\"exec(*)\"]", "exec", "cmd anything at all", "main", "allow `exec(*)` in [tools].allow"),
        ("allow = [\"exec(*)\"]", "exec", "cmd anything | opaque", "main", "ask"),
        // Agent, provider and channel layers add rules; deny from any layer wins.
        (
            "[agents.ci]\nallow = [\"exec(cargo:*)\"]",
            "exec",
            "cmd cargo build",
            "ci",
            "allow `exec(cargo:*)` in [tools.agents.ci].allow",
        ),
        ("[agents.ci]\nallow = [\"exec(cargo:*)\"]", "exec", "cmd cargo build", "main", "tool default"),
        (
            "deny = [\"exec(cargo publish:*)\"]\n[agents.ci]\nallow = [\"exec(cargo:*)\"]",
            "exec",
            "cmd cargo publish",
            "ci",
            "deny `exec(cargo publish:*)` in [tools].deny",
        ),
        (
            "[byProvider.openai]\ndeny = [\"exec(curl:*)\"]",
            "exec",
            "cmd curl x",
            "main@openai",
            "deny `exec(curl:*)` in [tools.byProvider.openai].deny",
        ),
        ("[byProvider.openai]\ndeny = [\"exec(curl:*)\"]", "exec", "cmd curl x", "main@anthropic", "tool default"),
        (
            "[agents.ci.byProvider.openai]\nask = [\"exec(curl:*)\"]",
            "exec",
            "cmd curl x",
            "ci@openai",
            "ask `exec(curl:*)` in [tools.agents.ci.byProvider.openai].ask",
        ),
        (
            "[byChannel.public]\ndeny = [\"exec(curl:*)\"]",
            "exec",
            "cmd curl x",
            "main#public",
            "deny `exec(curl:*)` in [tools.byChannel.public].deny",
        ),
        // alsoAllow rules pre-approve like allow rules.
        (
            "profile = \"minimal\"\nalsoAllow = [\"exec(cargo test:*)\"]",
            "exec",
            "cmd cargo test",
            "main",
            "allow `exec(cargo test:*)` in [tools].alsoAllow",
        ),
        (
            "profile = \"minimal\"\nalsoAllow = [\"exec(cargo test:*)\"]",
            "exec",
            "cmd cargo build",
            "main",
            "tool default",
        ),
        // Aliases: Claude Code spellings.
        (
            "deny = [\"Bash(rm:*)\", \"Read(secrets/**)\"]",
            "exec",
            "cmd rm x",
            "main",
            "deny `Bash(rm:*)` in [tools].deny",
        ),
        (
            "deny = [\"Bash(rm:*)\", \"Read(secrets/**)\"]",
            "read",
            "read secrets/a",
            "main",
            "deny `Read(secrets/**)` in [tools].deny",
        ),
    ]);
}

#[test]
fn subagent_rules_never_escalate() {
    let depth2 = "[subagents]\nmaxDepth = 2\n";
    check_decide(&[
        // The child's own allow rule cannot pre-approve what the parent would not.
        (
            "[agents.worker]\nallow = [\"exec(cargo test:*)\"]",
            "exec",
            "cmd cargo test",
            "main > worker",
            "tool default",
        ),
        (
            "allow = [\"exec(cargo test:*)\"]",
            "exec",
            "cmd cargo test",
            "main > worker",
            "allow `exec(cargo test:*)` in [tools].allow",
        ),
        // The parent's deny and ask rules bind the child.
        (
            "[agents.main]\ndeny = [\"exec(curl:*)\"]",
            "exec",
            "cmd curl x",
            "main > worker",
            "deny `exec(curl:*)` in [tools.agents.main].deny (parent agent `main`)",
        ),
        (
            "[agents.main]\nask = [\"exec(git:*)\"]\n[agents.worker]\nallow = [\"exec(git status)\"]",
            "exec",
            "cmd git status",
            "main > worker",
            "ask `exec(git:*)` in [tools.agents.main].ask (parent agent `main`)",
        ),
        (
            &format!("{depth2}[agents.main]\ndeny = [\"read(docs/**)\"]"),
            "read",
            "read docs/a",
            "main > lead > worker",
            "deny `read(docs/**)` in [tools.agents.main].deny (parent agent `main`) (parent agent `lead`)",
        ),
        // Tools hidden from sub-agents are denied for calls.
        ("", "cron", "", "main > worker", "deny `cron` in the default subagent deny list"),
        ("", "sessions_spawn", "", "main > worker", "deny `sessions_spawn` in the default leaf deny list"),
        (depth2, "sessions_spawn", "", "main > worker", "tool default"),
        (
            "[agents.main]\ndeny = [\"exec\"]",
            "exec",
            "cmd ls",
            "main > worker",
            "deny parent agent `main`: `exec` in [tools.agents.main].deny",
        ),
        ("", "exec", "cmd ls", "main > a > b", "deny depth 2 beyond [tools.subagents].maxDepth 1"),
    ]);
}
