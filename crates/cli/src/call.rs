//! `toolgate call TOOL [JSON] [--json]`.

use std::io::Read;
use std::process::ExitCode;

use anyhow::Context;
use serde_json::Value;

use super::GlobalArgs;

#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// The tool to call (aliases like `bash` or `Read` work too).
    tool: String,
    /// The parameters as a JSON object; `-` reads them from stdin; omitted means `{}`.
    params: Option<String>,
    /// Print the whole result (content blocks and structured output) as JSON.
    #[arg(long)]
    json: bool,
    /// The session the call belongs to (letters, digits, `.`, `_`, `-`; at most 64). Runs that
    /// name no session share the workspace's `default` one (its canvas, its locks, its jobs), as
    /// a person at one terminal would; agents that take turns on a workspace each name their own,
    /// so that a lock one of them takes binds the others.
    #[arg(long)]
    session: Option<String>,
}

/// The session `--session` names, checked; `None` when none is named.
fn session_of(named: Option<&str>) -> anyhow::Result<Option<String>> {
    let Some(name) = named else { return Ok(None) };
    let fine = |c: char| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-');
    if name.is_empty() || name.len() > 64 || !name.chars().all(fine) {
        anyhow::bail!(
            "--session `{}` is not a session name: use 1 to 64 letters, digits, `.`, `_` or `-` (for example --session fix-login)",
            name.escape_debug()
        );
    }
    Ok(Some(name.to_owned()))
}

pub(crate) async fn run(global: &GlobalArgs, args: Args) -> anyhow::Result<ExitCode> {
    let raw = match args.params.as_deref() {
        None => "{}".to_owned(),
        Some("-") => {
            let mut s = String::new();
            std::io::stdin().read_to_string(&mut s).context("cannot read parameters from stdin")?;
            s
        }
        Some(s) => s.to_owned(),
    };
    let session = session_of(args.session.as_deref())?;
    let params: Value = serde_json::from_str(&raw).map_err(|e| {
        anyhow::anyhow!("the parameters are not valid JSON: {e}; pass an object such as '{{\"message\": \"hi\"}}'")
    })?;
    super::timings::lap("parameters");
    // One call, then the process ends: a job nobody waits for is left queued for a server, and
    // the audit rows are written on this thread (no writer threads for one call).
    let gate = global.gate_with(true, true, |c| c.automation.jobs.one_shot = true)?;
    super::logging::start_traces(&gate.services().config.telemetry)?;
    // Installed WASM tools are loaded (hash-checked, compiled or read from the cache) only for
    // a call to one of them: any other call would pay for every component.
    if args.tool.to_ascii_lowercase().starts_with("wasm__") {
        super::wasm::load(&gate).await;
        super::timings::lap("wasm tools");
    }
    // Bridged MCP servers connect in the background; a call to one of their tools waits for
    // its server's first connection attempt.
    gate.start_mcp();
    super::timings::lap("mcp start");
    let mut ctx = gate.context();
    if let Some(session) = session {
        ctx.identity.session = session;
    }
    let result = gate.call(&ctx, &args.tool, params).await;
    super::timings::lap("the call");
    gate.shutdown();
    super::timings::lap("shutdown + audit flush");
    let code = match result {
        Ok(output) => {
            if args.json {
                outln!("{}", serde_json::to_string_pretty(&output)?);
            } else {
                let text = output.text_content();
                if text.is_empty() {
                    if let Some(structured) = &output.structured {
                        outln!("{}", serde_json::to_string_pretty(structured)?);
                    }
                } else {
                    outln!("{text}");
                }
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            if args.json {
                let err = serde_json::json!({"error": {"kind": e.kind(), "message": e.to_string()}});
                eprintln!("{}", serde_json::to_string_pretty(&err)?);
            } else {
                eprintln!("error: {e}");
            }
            ExitCode::from(1)
        }
    };
    super::timings::lap("output");
    // The audit rows are committed (direct log, flushed by `shutdown`) and the output written:
    // tearing the gate down now (every structure freed, each SQLite connection's closing
    // checkpoint with its fsync, after which the next call starts a new WAL and syncs it) only
    // costs this process ms before it exits. Unless the call may have started something whose
    // drop stops or removes it (a process or sandbox of the runner, Chromium, a bridged MCP
    // server, a WASM tool), the gate is left to the process's exit; SQLite reads the WAL it
    // leaves, as after any exit without a close.
    if leaves_nothing_to_stop(&gate, &ctx, &args.tool) {
        std::mem::forget(gate);
    } else {
        drop(gate);
    }
    super::timings::lap("gate drop (audit threads end)");
    Ok(code)
}

/// Whether a one-shot call of `tool` left nothing that the gate's drop stops or removes.
fn leaves_nothing_to_stop(gate: &toolgate::Gate, ctx: &toolgate::core::CallContext, tool: &str) -> bool {
    let Some(spec) = gate.visible_tool(ctx, tool) else { return false };
    let name = spec.name.to_ascii_lowercase();
    gate.services().runner.is_unused() && !name.starts_with("browser") && !name.contains("__")
}

#[cfg(test)]
mod tests {
    use super::session_of;

    #[test]
    fn a_named_session_is_checked_and_none_keeps_the_default() {
        assert_eq!(session_of(None).unwrap(), None);
        assert_eq!(session_of(Some("fix-login_2.b")).unwrap().as_deref(), Some("fix-login_2.b"));
        for bad in ["", "a b", "../x", "x\n`y`", &"s".repeat(65)] {
            let e = session_of(Some(bad)).unwrap_err().to_string();
            assert!(e.contains("is not a session name") && e.contains("--session fix-login"), "{bad:?}: {e}");
        }
    }
}
