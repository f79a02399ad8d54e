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
    let params: Value = serde_json::from_str(&raw).map_err(|e| {
        anyhow::anyhow!("the parameters are not valid JSON: {e}; pass an object such as '{{\"message\": \"hi\"}}'")
    })?;
    super::timings::lap("parameters");
    // One call, then the process ends: a job nobody waits for is left queued for a server, and
    // the audit rows are written on this thread (no writer threads for one call).
    let gate = global.gate_with(true, true, |c| c.automation.jobs.one_shot = true)?;
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
    let ctx = gate.context();
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
