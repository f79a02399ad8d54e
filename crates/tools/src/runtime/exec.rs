//! `exec`: run a shell command in the sandbox, in the foreground or in the background.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use toolgate_core::{Annotations, CallContext, CallSafety, Tool, ToolError, ToolOutput, ToolSpec};
use toolgate_sandbox::{CommandSpec, KILL_GRACE};

use super::classify::ShellCheck;
use super::render::{self, Finished};
use super::run::{new_id, outputs_dir, prune_logs, rel_log, run_foreground};
use super::sandboxes::sandbox_error;
use super::table::NewEntry;
use super::{Runtime, resolve_workdir};

const NAME: &str = "exec";

/// Time the gate's deadline allows beyond the command's own, so that the sandbox's kill
/// (`SIGTERM`, 3 s, `SIGKILL`) and the collection of the output finish first.
pub(crate) const DEADLINE_GRACE: Duration = Duration::from_secs(KILL_GRACE.as_secs() + 7);

/// The `exec` tool.
#[derive(Debug)]
pub struct ExecTool {
    spec: ToolSpec,
    runtime: Arc<Runtime>,
}

impl ExecTool {
    pub(crate) fn new(runtime: Arc<Runtime>) -> Self {
        let c = &runtime.config;
        let spec = ToolSpec::new(
            NAME,
            format!(
                "Run a shell command with `bash -c` in the workspace, inside an OS sandbox ({} mode, network {}). \
                 Returns the exit code, the duration, how the command was sandboxed and its output (stdout and \
                 stderr interleaved); output longer than {} characters keeps its start and end, and the whole \
                 output can be paged with the `process` tool. The command is stopped after `timeout` seconds \
                 (default {}, at most {}). With `background: true` it returns a process id at once: read the \
                 output with `process` (`poll`, `log`), send input with `write`, stop it with `kill`. Read-only \
                 commands run at once; others may need a person's approval; some (piping downloads into a \
                 shell, fork bombs, ...) are always refused.",
                c.sandbox.mode,
                c.sandbox.network,
                c.output_max_chars,
                c.default_timeout_secs,
                c.max_timeout_secs
            ),
            json!({
                "type": "object",
                "properties": {
                    "command": { "type": "string", "minLength": 1, "description": "The command line, run with `bash -c`." },
                    "workdir": { "type": "string", "description": "Working directory, relative to the workspace root (default: the root)." },
                    "env": {
                        "type": "object",
                        "description": "Extra environment variables (values are treated as secrets and never shown).",
                        "propertyNames": { "pattern": "^[A-Za-z_][A-Za-z0-9_]*$" },
                        "additionalProperties": { "type": "string" }
                    },
                    "timeout": {
                        "type": "integer", "minimum": 1, "maximum": c.max_timeout_secs,
                        "description": format!("Seconds before the command is stopped (default {}, at most {}); for background processes, none unless given.", c.default_timeout_secs, c.max_timeout_secs)
                    },
                    "background": { "type": "boolean", "description": "Start it and return a process id at once (default false)." }
                },
                "required": ["command"],
                "additionalProperties": false
            }),
        )
        .group("runtime")
        .annotations(Annotations::default());
        ExecTool { spec, runtime }
    }
}

/// The `env` parameter's names.
pub(crate) fn env_names(params: &Value) -> Vec<&str> {
    params.get("env").and_then(Value::as_object).map(|m| m.keys().map(String::as_str).collect()).unwrap_or_default()
}

/// The `env` parameter, checked.
pub(crate) fn env_pairs(tool: &str, params: &Value) -> Result<Vec<(String, String)>, ToolError> {
    let Some(map) = params.get("env").and_then(Value::as_object) else { return Ok(Vec::new()) };
    let mut out = Vec::with_capacity(map.len());
    for (k, v) in map {
        let valid_name = k.bytes().next().is_some_and(|b| b.is_ascii_alphabetic() || b == b'_')
            && k.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_');
        if !valid_name {
            return Err(ToolError::invalid(tool, format!("/env/{k}"), "variable names are letters, digits and `_`"));
        }
        let Some(v) = v.as_str() else {
            return Err(ToolError::invalid(tool, format!("/env/{k}"), "values must be strings"));
        };
        if v.contains('\0') {
            return Err(ToolError::invalid(tool, format!("/env/{k}"), "values cannot contain NUL bytes"));
        }
        out.push((k.clone(), v.to_owned()));
    }
    Ok(out)
}

/// An optional non-negative integer parameter.
pub(crate) fn opt_u64(tool: &str, params: &Value, name: &str) -> Result<Option<u64>, ToolError> {
    match params.get(name) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => v.as_u64().map(Some).ok_or_else(|| {
            ToolError::invalid(tool, format!("/{name}"), format!("`{name}` must be a non-negative integer"))
        }),
    }
}

/// One command to launch, from `exec` or `execute_code`.
pub(crate) struct Launch {
    pub(crate) program: PathBuf,
    pub(crate) args: Vec<String>,
    pub(crate) workdir: PathBuf,
    pub(crate) env: Vec<(String, String)>,
    /// The command as listed by `process list`.
    pub(crate) display: String,
    /// Whether the command was classified safe.
    pub(crate) safe: bool,
    /// `None` for a background process without a deadline.
    pub(crate) timeout: Option<Duration>,
    pub(crate) background: bool,
}

impl Runtime {
    /// Runs a command in the call's workspace sandbox and renders the result.
    pub(crate) async fn launch(&self, ctx: &CallContext, l: Launch) -> Result<ToolOutput, ToolError> {
        let workspace: &std::path::Path = &ctx.workspace;
        let sandbox = self.sandboxes.get(workspace)?;
        let dir = outputs_dir(workspace)?;
        prune_logs(&dir, |id| self.table.is_live(id));
        let id = new_id();
        let log = dir.join(format!("{id}.log"));
        let mut spec = CommandSpec::new(l.program, l.args, l.workdir);
        spec.env = l.env;
        spec.output_cap_bytes = self.capture_bytes();
        spec.log_path = Some(log.clone());
        spec.log_max_bytes = self.config.log_max_bytes;
        if l.background {
            spec.stdin = true;
            let new = NewEntry {
                id: id.clone(),
                workspace: workspace.to_path_buf(),
                user: ctx.identity.user.clone(),
                command: l.display,
                safe: l.safe,
                log,
                deadline: l.timeout,
                sandbox: Arc::clone(&sandbox),
            };
            let entry = self.table.start(new, || sandbox.spawn(spec).map_err(sandbox_error))?;
            let deadline = match l.timeout {
                Some(t) => format!("it is stopped after {} s", t.as_secs()),
                None => "it runs until it exits, is killed, or the server stops".to_owned(),
            };
            let text = format!(
                "started background process {id} (pid {}); {deadline}\nsandbox: {}\nlog: {}\n\
                 [Read new output with the `process` tool: {{\"action\": \"poll\", \"id\": \"{id}\"}}; send input \
                 with {{\"action\": \"write\", \"id\": \"{id}\", \"input\": \"...\"}}; stop it with \
                 {{\"action\": \"kill\", \"id\": \"{id}\"}}.]",
                entry.pid,
                entry.enforcement,
                rel_log(&id)
            );
            return Ok(ToolOutput::text(text).with_meta(json!({
                "id": id,
                "pid": entry.pid,
                "background": true,
                "log": rel_log(&id),
                "sandbox": entry.enforcement,
            })));
        }
        let timeout = l.timeout.unwrap_or(Duration::from_secs(self.config.default_timeout_secs));
        spec.timeout = timeout;
        let result = run_foreground(sandbox, spec, timeout, &ctx.cancel, ctx.progress.clone()).await?;
        if result.exit == toolgate_sandbox::ExitStatusKind::Cancelled {
            let _ = std::fs::remove_file(&log);
            return Err(ToolError::Cancelled);
        }
        let rel = rel_log(&id);
        let (out, truncated) = render::finished(Finished {
            id: &id,
            result: &result,
            timeout,
            max_timeout_secs: self.config.max_timeout_secs,
            max_chars: self.config.output_max_chars,
            rel_log: Some(&rel),
            workspace,
        });
        if !truncated {
            // The whole output is in the result: the log is not needed.
            let _ = std::fs::remove_file(&log);
            let mut out = out;
            if let Some(s) = out.meta.as_mut() {
                s["log"] = Value::Null;
            }
            return Ok(out);
        }
        Ok(out)
    }
}

#[toolgate_core::async_trait]
impl Tool for ExecTool {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    fn safety(&self, params: &Value) -> CallSafety {
        let command = params.get("command").and_then(Value::as_str).unwrap_or_default();
        let mut safety = ShellCheck::new(command, &env_names(params)).safety(NAME);
        let background = params.get("background").and_then(Value::as_bool).unwrap_or(false);
        if !background {
            let secs =
                params.get("timeout").and_then(Value::as_u64).unwrap_or(self.runtime.config.default_timeout_secs);
            safety.timeout = Some(Duration::from_secs(secs.min(self.runtime.config.max_timeout_secs)) + DEADLINE_GRACE);
        }
        safety
    }

    async fn execute(&self, ctx: &CallContext, params: Value) -> Result<ToolOutput, ToolError> {
        let command =
            params.get("command").and_then(Value::as_str).filter(|c| !c.trim().is_empty()).ok_or_else(|| {
                ToolError::invalid(NAME, "/command", "`command` is required: a non-empty command line")
            })?;
        let env = env_pairs(NAME, &params)?;
        let names: Vec<&str> = env.iter().map(|(k, _)| k.as_str()).collect();
        let check = ShellCheck::new(command, &names);
        if let Some(refusal) = check.refusal(NAME) {
            return Err(refusal);
        }
        let background = params.get("background").and_then(Value::as_bool).unwrap_or(false);
        let requested = opt_u64(NAME, &params, "timeout")?;
        let timeout =
            if background && requested.is_none() { None } else { Some(self.runtime.timeout(NAME, requested)?) };
        let workdir = resolve_workdir(NAME, &ctx.workspace, params.get("workdir").and_then(Value::as_str))?;
        let launch = Launch {
            program: self.runtime.bash.clone(),
            args: vec!["-c".to_owned(), command.to_owned()],
            workdir,
            env,
            display: command.to_owned(),
            safe: check.class == toolgate_guard::shell::CommandClass::Safe,
            timeout,
            background,
        };
        self.runtime.launch(ctx, launch).await
    }
}
