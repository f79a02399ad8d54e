//! The build loop (seed 004 §7): analyze → scaffold → implement → build → fix → test → validate
//! → register, on the agent runtime.
//!
//! The model implements (its `write`/`exec` calls go through the gate as the build agent, for
//! the caller's user); after each of its answers the builder itself builds and tests through the
//! gate's `exec`, validates a WASM result (`validate.rs`) and runs its cases, and feeds every
//! failure back to the model as the next message of the same session. Limits: at most
//! [`Limits::max_turns`] model turns in all and [`Limits::timeout`] of wall time; two answers in
//! a row without a tool call (a model "stuck in planning") end the build at once.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tokio::sync::Notify;
use toolgate_agent::{Event, EventSink, RunOutcome, RunSpec, Runtime, ToolCaller};
use toolgate_core::{CallContext, ToolError, ToolOutput};

use super::templates::{Kind, Lang, Template};
use super::validate;
use crate::text::{clip, clip_tail};

/// The seed's limits (`BuilderConfig`).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Limits {
    /// Model turns over the whole build (default 10).
    pub max_turns: u32,
    /// Wall time of the whole build (default 600 s).
    pub timeout: Duration,
    /// Answers without a tool call in a row that end the build (default 2).
    pub text_only: u32,
}

impl Default for Limits {
    fn default() -> Self {
        Limits { max_turns: 10, timeout: Duration::from_secs(600), text_only: 2 }
    }
}

/// The tools the build agent is offered (policy may hide more): it writes the files; the
/// builder builds and tests them itself and tells it what failed (fewer tools also keep a small
/// local model's prompt short).
pub(crate) const AGENT_TOOLS: &[&str] = &["read", "write"];

/// The most of a command's output fed back to the model.
const FEEDBACK_CHARS: usize = 6000;

/// One build, resolved and scaffolded.
pub(crate) struct Build {
    pub kind: Kind,
    pub lang: Lang,
    pub name: String,
    pub description: String,
    /// The project folder, relative to the workspace.
    pub dir: String,
    pub template: Template,
    pub agent: String,
    pub register: bool,
    pub limits: Limits,
}

/// Seed 004 §7's `BuildPhase` log.
#[derive(Debug, Default)]
struct Log(Vec<Value>, Option<Instant>);

impl Log {
    fn phase(&mut self, phase: &str, detail: impl Into<String>) {
        let started = *self.1.get_or_insert_with(Instant::now);
        let detail: String = detail.into();
        tracing::debug!(phase, detail, "build_software");
        self.0.push(json!({"phase": phase, "ms": started.elapsed().as_millis() as u64, "detail": clip(&detail, 500)}));
    }
}

/// How a round of the model ended.
enum Round {
    Done(RunOutcome),
    OverTurns,
    TimedOut,
    Cancelled,
    Failed(String),
}

/// Runs the build: the result for the caller, or a failure that says what happened and what
/// was left in the project folder.
pub(crate) async fn run(
    b: Build,
    rt: Arc<Runtime>,
    caller: Arc<dyn ToolCaller>,
    ctx: &CallContext,
) -> Result<ToolOutput, ToolError> {
    let started = Instant::now();
    let deadline = tokio::time::Instant::now() + b.limits.timeout;
    let mut log = Log::default();
    log.phase("analyzing", format!("{} in {}, named {:?}", b.kind.as_str(), b.lang.as_str(), b.name));
    scaffold(&ctx.workspace, &b).map_err(|e| ToolError::failed(format!("cannot scaffold {}: {e}", b.dir)))?;
    log.phase("scaffolding", format!("{} files in {}/", b.template.files.len(), b.dir));

    let turns = Arc::new(AtomicU32::new(0));
    let over = Arc::new(Notify::new());
    let session = Arc::new(std::sync::Mutex::new(None::<String>));
    let sink: EventSink = {
        let (turns, over, session, max) = (turns.clone(), over.clone(), session.clone(), b.limits.max_turns);
        Arc::new(move |e: &Event<'_>| {
            if let Event::Assistant { session: s, .. } = e {
                session.lock().unwrap_or_else(|p| p.into_inner()).get_or_insert_with(|| (*s).to_owned());
                // The turn past the budget is not acted on: the round is dropped.
                if turns.fetch_add(1, Ordering::SeqCst) + 1 > max {
                    over.notify_one();
                }
            }
        })
    };
    let mut message = super::templates::instructions(&b.template, b.kind, b.lang, &b.dir, &b.description);
    let mut text_only = 0u32;
    let mut rounds = 0u32;
    let fail = |log: &mut Log, why: String| -> Result<ToolOutput, ToolError> {
        log.phase("failed", why.clone());
        Err(ToolError::failed(format!(
            "build_software failed: {why}\nThe project is left in `{}/` for you to inspect or continue.",
            b.dir
        )))
    };
    loop {
        rounds += 1;
        log.phase(if rounds == 1 { "implementing" } else { "fixing" }, clip(&message, 300));
        let current = session.lock().unwrap_or_else(|p| p.into_inner()).clone();
        let round = {
            let sink = sink.clone();
            let work = async {
                match current {
                    None => {
                        let mut spec = RunSpec::new(b.agent.clone(), message.clone());
                        spec.label = Some(format!("build_software {}", b.name));
                        spec.only_tools = Some(AGENT_TOOLS.iter().map(|t| (*t).to_owned()).collect());
                        spec.events = Some(sink);
                        rt.run(spec, ctx).await
                    }
                    Some(s) => rt.send(&s, &message, Some(sink)).await,
                }
            };
            // Biased, the budget first: whenever the run yields (a tool call, a model request),
            // a turn past the budget ends the round there, before the run asks the model again.
            // Polled in random order, the run could win the race and make one more request.
            tokio::select! {
                biased;
                () = over.notified() => Round::OverTurns,
                () = ctx.cancel.cancelled() => Round::Cancelled,
                () = tokio::time::sleep_until(deadline) => Round::TimedOut,
                r = work => match r {
                    Ok(o) => Round::Done(o),
                    Err(e) => Round::Failed(e.to_string()),
                },
            }
        };
        // A run that never yielded may have finished past the budget: over all the same.
        let over_budget = turns.load(Ordering::SeqCst) > b.limits.max_turns;
        let outcome = match round {
            Round::OverTurns => return fail(&mut log, looped(b.limits.max_turns)),
            Round::Done(_) if over_budget => return fail(&mut log, looped(b.limits.max_turns)),
            Round::Done(o) => o,
            Round::TimedOut => {
                return fail(&mut log, format!("the build took longer than {} s", b.limits.timeout.as_secs()));
            }
            Round::Cancelled => return Err(ToolError::failed("build_software was cancelled")),
            Round::Failed(e) => return fail(&mut log, format!("the build agent could not run: {e}")),
        };
        if session.lock().unwrap_or_else(|p| p.into_inner()).is_none() {
            *session.lock().unwrap_or_else(|p| p.into_inner()) = Some(outcome.session.clone());
        }
        if outcome.status != toolgate_agent::RunStatus::Done {
            let why = outcome.error.clone().unwrap_or_else(|| outcome.status.as_str().to_owned());
            return fail(&mut log, format!("the build agent's run ended {}: {why}", outcome.status.as_str()));
        }
        if outcome.tool_calls == 0 {
            text_only += 1;
            if text_only >= b.limits.text_only {
                return fail(
                    &mut log,
                    format!(
                        "the model answered {text_only} times in a row without calling a tool (stuck planning): {}",
                        clip(&outcome.answer, 300)
                    ),
                );
            }
        } else {
            text_only = 0;
        }
        // The builder's own turn: build, test, validate.
        match check(&b, &caller, ctx, &mut log).await {
            Ok(result) => {
                return finish(&b, &caller, ctx, &mut log, result, turns.load(Ordering::SeqCst), started).await;
            }
            Err(Problem::Environment(why)) => return fail(&mut log, why),
            Err(Problem::Fix(feedback)) => {
                message = if outcome.tool_calls == 0 {
                    format!("You answered without calling a tool. Call the tools now.\n\n{feedback}")
                } else {
                    feedback
                };
            }
        }
        if turns.load(Ordering::SeqCst) >= b.limits.max_turns {
            return fail(
                &mut log,
                format!(
                    "the model used its {} turns and the result still fails: {}",
                    b.limits.max_turns,
                    clip(&message, 1500)
                ),
            );
        }
    }
}

fn looped(max: u32) -> String {
    format!("the model used its {max} turns without a working result (the builder loops)")
}

/// Writes the template's files into the project folder (created; an existing project of that
/// name is refused by the caller before this).
fn scaffold(workspace: &Path, b: &Build) -> std::io::Result<()> {
    let dir = workspace.join(&b.dir);
    std::fs::create_dir_all(&dir)?;
    for (rel, content) in &b.template.files {
        let path = dir.join(rel);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)?;
        }
        std::fs::write(&path, content)?;
    }
    Ok(())
}

/// What a passing check leaves for registration.
struct Checked {
    /// The component, for `wasm_tool`.
    wasm: Option<(validate::Shape, String)>,
    tests: String,
}

/// The builder's turn: the feedback for the model, or the checked result.
async fn check(b: &Build, caller: &Arc<dyn ToolCaller>, ctx: &CallContext, log: &mut Log) -> Result<Checked, Problem> {
    check_inner(b, caller, ctx, log).await
}

/// Why a check did not pass.
enum Problem {
    /// Something the model can fix: the feedback it gets.
    Fix(String),
    /// Something only the operator can fix (the sandbox's limits or readable folders): the
    /// build stops at once instead of spending the model's turns.
    Environment(String),
}

impl From<String> for Problem {
    fn from(s: String) -> Self {
        Problem::Fix(s)
    }
}

/// A build failure that no code change fixes, in words for the operator.
fn environment_problem(out: &str) -> Option<String> {
    // componentize-py's wasmtime ("mmap failed to reserve"), and jco's Node, whose V8 reserves
    // about 10 GiB of address space for each WebAssembly memory ("Cannot allocate Wasm memory").
    if out.contains("mmap failed to reserve")
        || out.contains("Cannot allocate memory")
        || out.contains("Cannot allocate Wasm memory")
    {
        return Some(
            "the build tool could not reserve memory in the sandbox (componentize-py reserves several GiB of address \
             space, jco's Node about 10 GiB for each WebAssembly memory): raise `[runtime.sandbox.limits] \
             address_space_bytes` (16 GiB, 17179869184, is enough for componentize-py; jco needs 64 GiB, 68719476736)"
                .to_owned(),
        );
    }
    // A program or library outside the readable folders (a pyenv shim's `python3`, jco's
    // node_modules): the sandbox's own refusal names the folder.
    if let Some(line) = out.lines().find(|l| l.contains("blocked by the sandbox") && l.contains("outside the readable"))
    {
        return Some(format!(
            "the sandbox cannot run the build or test command: {}",
            clip(line.trim_start_matches("blocked by the sandbox: "), 600)
        ));
    }
    if out.contains("failed to create cache directory") {
        return Some(
            "the build tool could not create its cache folder in the sandbox (wizer's wasmtime, run by jco with no \
             HOME): use jco from `cargo xtask deps` (.cache/wasm/npm), whose wizer the template wraps"
                .to_owned(),
        );
    }
    let missing = out.lines().any(|l| l.contains("componentize-py") || l.contains("jco"))
        && (out.contains(": not found")
            || out.contains("No such file or directory")
            || out.contains("Permission denied"));
    missing.then(|| {
        "the sandbox cannot run the build tool: add its installation (componentize-py's venv and the Python it was \
         made from, or jco's node_modules) to `[runtime.sandbox] extra_readable`"
            .to_owned()
    })
}

async fn check_inner(
    b: &Build,
    caller: &Arc<dyn ToolCaller>,
    ctx: &CallContext,
    log: &mut Log,
) -> Result<Checked, Problem> {
    let dir = ctx.workspace.join(&b.dir);
    if !dir.join(&b.template.main).is_file() {
        return Err(Problem::Fix(format!(
            "`{}/{}` does not exist yet: write it with the `write` tool.",
            b.dir, b.template.main
        )));
    }
    if let Some(cmd) = &b.template.build {
        log.phase("building", cmd.clone());
        let (ok, out) = exec(caller, ctx, cmd, &b.dir).await;
        if !ok {
            if let Some(why) = environment_problem(&out) {
                return Err(Problem::Environment(why));
            }
            return Err(Problem::Fix(format!(
                "The build (`{cmd}` in `{}`) failed. Fix the code, then answer.\n{out}",
                b.dir
            )));
        }
    }
    match b.kind {
        Kind::WasmTool => {
            let component = dir.join(&b.template.artifact);
            log.phase("validating", b.template.artifact.clone());
            let caps = validate::capabilities(&component, &b.name)?;
            let bytes = toolgate_wasm::read_regular_file(&component, 64 << 20)
                .map_err(|e| format!("the build did not produce `{}/{}`: {e}", b.dir, b.template.artifact))?;
            let max = caps.limits.component_mb.map_or(10 << 20, |mb| u64::from(mb) << 20);
            let shape = validate::check(&bytes, max)
                .map_err(|f| format!("The component is not valid:\n- {}", f.join("\n- ")))?;
            let runtime = toolgate_wasm::runtime_in(&ctx.workspace.join(".toolgate"))
                .map_err(|e| format!("toolgate's WASM runtime could not start: {e}"))?;
            let prepared = validate::link(&runtime, &bytes, &caps, &b.name).await?;
            log.phase("testing", "tests.json in the WASM runtime, no capabilities");
            let text = std::fs::read_to_string(dir.join("tests.json"))
                .map_err(|_| format!("`{}/tests.json` is missing: write it (a JSON array of test cases).", b.dir))?;
            let passed = validate::run_cases(&runtime, &prepared, &b.name, &caps, &text).await.map_err(|f| {
                format!("Tests failed. Fix `{}` (or a wrong case), then answer.\n- {}", b.template.main, f.join("\n- "))
            })?;
            Ok(Checked { wasm: Some((shape, prepared.hash)), tests: format!("{passed} cases passed") })
        }
        _ => {
            let Some(cmd) = &b.template.test else {
                return Ok(Checked { wasm: None, tests: "no tests".into() });
            };
            log.phase("testing", cmd.clone());
            let (ok, out) = exec(caller, ctx, cmd, &b.dir).await;
            if !ok {
                return Err(Problem::Fix(format!(
                    "The tests (`{cmd}` in `{}`) failed. Fix them, then answer.\n{out}",
                    b.dir
                )));
            }
            Ok(Checked { wasm: None, tests: format!("`{cmd}` passed") })
        }
    }
}

/// Registers a WASM result through `tool_install` (approval always), then the summary.
async fn finish(
    b: &Build,
    caller: &Arc<dyn ToolCaller>,
    ctx: &CallContext,
    log: &mut Log,
    checked: Checked,
    turns: u32,
    started: Instant,
) -> Result<ToolOutput, ToolError> {
    let artifact = format!("{}/{}", b.dir, b.template.artifact);
    let mut registered = None;
    let text;
    if let Some((shape, hash)) = &checked.wasm {
        if b.register {
            log.phase("registering", format!("tool_install {} as wasm__{}", artifact, b.name));
            let params = json!({"name": b.name, "path": artifact});
            match caller.call(&gate_ctx(caller, ctx), "tool_install", params).await {
                Ok(_) => registered = Some(format!("wasm__{}", b.name)),
                Err(e) => {
                    log.phase("failed", format!("tool_install: {e}"));
                    return Err(ToolError::failed(format!(
                        "build_software built and tested `{artifact}` (BLAKE3 {hash}), but it was not installed: {e}\n\
                         Install it later with `tool_install {{\"name\": \"{}\", \"path\": \"{artifact}\"}}` or \
                         `toolgate wasm install {artifact} --name {}`.",
                        b.name, b.name
                    )));
                }
            }
        }
        let mut t = format!(
            "Built `{artifact}` ({} bytes, BLAKE3 {hash}), a component of the toolgate:tool world exporting {}; {}.",
            shape.size,
            shape.exports.join(", "),
            checked.tests
        );
        match &registered {
            Some(tool) => t.push_str(&format!(" Installed as `{tool}`: call it like any tool.")),
            None => t.push_str(" Not installed (register: false): `tool_install` it when wanted."),
        }
        text = t;
    } else {
        text = format!("Built `{artifact}` in `{}/`; {}.", b.dir, checked.tests);
    }
    log.phase("complete", text.clone());
    Ok(ToolOutput::text(text).with_meta(json!({
        "type": b.kind.as_str(),
        "language": b.lang.as_str(),
        "dir": b.dir,
        "artifact": artifact,
        "registered": registered,
        "turns": turns,
        "duration_ms": started.elapsed().as_millis() as u64,
        "log": log.0,
    })))
}

/// A context for the builder's own calls: the caller's identity, cancelled with its call.
fn gate_ctx(caller: &Arc<dyn ToolCaller>, ctx: &CallContext) -> CallContext {
    let mut c = caller.context();
    c.identity = ctx.identity.clone();
    c.provider = ctx.provider.clone();
    c.subagent_depth = ctx.subagent_depth;
    c.ancestors = ctx.ancestors.clone();
    c.cancel = ctx.cancel.child_token();
    c.progress = ctx.progress.clone();
    c
}

/// Runs `cmd` in `dir` through the gate's `exec`: whether it exited 0, and what the model reads.
async fn exec(caller: &Arc<dyn ToolCaller>, ctx: &CallContext, cmd: &str, dir: &str) -> (bool, String) {
    let params = json!({"command": cmd, "workdir": dir, "timeout": 300});
    match caller.call(&gate_ctx(caller, ctx), "exec", params).await {
        Ok(out) => {
            let code = out.meta.as_ref().and_then(|m| m.get("exit_code")).and_then(Value::as_i64);
            (code == Some(0), clip_tail(&out.text_content(), FEEDBACK_CHARS))
        }
        Err(e) => (false, clip_tail(&e.to_string(), FEEDBACK_CHARS)),
    }
}

/// The project folder for `name` under `builds/`: `builds/NAME`, or `builds/NAME-2`, ... when
/// taken (a build never overwrites an earlier one).
pub(crate) fn project_dir(workspace: &Path, name: &str) -> String {
    let base = PathBuf::from("builds");
    (1..1000)
        .map(|i| if i == 1 { base.join(name) } else { base.join(format!("{name}-{i}")) })
        .find(|d| !workspace.join(d).exists())
        .unwrap_or_else(|| base.join(format!("{name}-{}", std::process::id())))
        .to_string_lossy()
        .into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_only_the_operator_can_fix_is_told_to_the_operator() {
        // jco's Node under a 32 GiB RLIMIT_AS.
        let v8 = "RangeError: WebAssembly.instantiate(): Out of memory: Cannot allocate Wasm memory for new instance";
        assert!(environment_problem(v8).unwrap().contains("68719476736"));
        // A pyenv shim in the sandbox.
        let shim = "blocked by the sandbox: /root/.pyenv/libexec/pyenv is outside the readable paths (...)";
        let why = environment_problem(shim).unwrap();
        assert!(why.contains("/root/.pyenv/libexec/pyenv") && !why.contains("blocked by the sandbox: /"), "{why}");
        let cache = "Error: failed to create cache directory: /root/.cache/wasmtime";
        assert!(environment_problem(cache).unwrap().contains("wizer"));
        // What the model can fix is not.
        assert!(environment_problem("error[E0308]: mismatched types").is_none());
        assert!(environment_problem("SyntaxError: Unexpected token ';'").is_none());
    }
}
