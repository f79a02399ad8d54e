//! What the tools need from the gate: confined files, provider requests with keys, and
//! external programs run in the sandbox in a private scratch folder.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use toolgate_core::{CallContext, ToolError};
use toolgate_fetch::{Fetcher, Request, Response};
use toolgate_sandbox::{CommandSpec, RunResult, Sandbox, SandboxMode, SandboxPolicy};
use toolgate_tools::custom::SecretSource;
use toolgate_tools::fs::FsState;

use crate::config::{Endpoint, MediaConfig};

/// Shared by every tool of the family.
#[derive(Debug)]
pub(crate) struct Host {
    pub(crate) config: MediaConfig,
    fs: Arc<FsState>,
    fetcher: Fetcher,
    secrets: Arc<dyn SecretSource>,
    /// The template of the programs' sandbox (limits, fallback); its workspace is replaced by
    /// each run's scratch folder.
    sandbox: SandboxPolicy,
}

impl Host {
    pub(crate) fn new(setup: &crate::Setup) -> Host {
        Host {
            config: setup.config.clone(),
            fs: Arc::clone(&setup.fs),
            fetcher: setup.fetcher.clone(),
            secrets: Arc::clone(&setup.secrets),
            sandbox: setup.sandbox.clone(),
        }
    }

    /// The bytes of a workspace file, confined like the file tools, at most `max_input_bytes`.
    pub(crate) fn read(&self, ctx: &CallContext, path: &str) -> Result<Vec<u8>, ToolError> {
        let max = usize::try_from(self.config.max_input_bytes).unwrap_or(usize::MAX);
        self.fs.read_confined(ctx, path, max).map_err(|e| match e {
            ToolError::ExecutionFailed { message } if message.contains("is larger than") => {
                ToolError::failed(format!("{message} ([media] max_input_bytes); use a smaller file"))
            }
            other => other,
        })
    }

    /// Writes a file to the workspace, confined and atomic; returns its path.
    pub(crate) fn write(
        &self,
        ctx: &CallContext,
        tool: &str,
        path: &str,
        bytes: &[u8],
        overwrite: bool,
    ) -> Result<String, ToolError> {
        let max = usize::try_from(self.config.max_output_bytes).unwrap_or(usize::MAX);
        self.fs.write_confined(ctx, tool, path, bytes, max, overwrite)
    }

    /// The endpoint's key: the environment variable `api_key_env`, else the stored secret of
    /// that name. `None` when the endpoint names no key.
    pub(crate) fn key(&self, what: &str, endpoint: &Endpoint) -> Result<Option<String>, ToolError> {
        let Some(name) = endpoint.api_key_env.as_deref() else { return Ok(None) };
        if let Some(k) = std::env::var(name).ok().filter(|k| !k.trim().is_empty()) {
            return Ok(Some(k.trim().to_owned()));
        }
        let stored = self.secrets.secret(name).map_err(|e| {
            ToolError::failed(format!("cannot read the key `{name}` for {what} from the secrets store: {e}"))
        })?;
        match stored.filter(|k| !k.trim().is_empty()) {
            Some(k) => Ok(Some(k.trim().to_owned())),
            None => Err(ToolError::failed(format!(
                "no API key for {what}: set the environment variable `{name}` or store it with `toolgate tools secret \
                 {name}`"
            ))),
        }
    }

    /// Sends `req` through the SSRF-safe fetcher. The key never appears in an error: the
    /// provider's answer is cut and scrubbed of it.
    pub(crate) async fn send(
        &self,
        ctx: &CallContext,
        service: &str,
        mut req: Request,
        key: Option<&str>,
        max_bytes: u64,
    ) -> Result<Response, ToolError> {
        req.max_bytes = Some(max_bytes);
        if req.timeout.is_none() {
            req.timeout = Some(Duration::from_secs(120));
        }
        let resp = self.fetcher.fetch(req, &ctx.cancel).await.map_err(|e| ToolError::ExternalService {
            service: service.to_owned(),
            message: scrub(&e.to_string(), key),
        })?;
        if resp.status >= 400 {
            let (body, _) = resp.text();
            let excerpt: String = body.chars().take(300).collect();
            return Err(ToolError::ExternalService {
                service: service.to_owned(),
                message: format!(
                    "HTTP {}: {}; check the [media] endpoint, model and key, or try again later",
                    resp.status,
                    scrub(excerpt.trim(), key)
                ),
            });
        }
        Ok(resp)
    }

    /// Runs `program` with `args` in the sandbox, inside `scratch` (its only writable folder; no
    /// network, no shell). Refused clearly when the program is not installed.
    pub(crate) async fn run(
        &self,
        ctx: &CallContext,
        program: &str,
        args: Vec<String>,
        scratch: &Path,
    ) -> Result<RunResult, ToolError> {
        let Some(path) = find_program(program) else {
            return Err(ToolError::failed(format!(
                "`{program}` is not installed on this machine; install it (Debian: `apt-get install {}`, or `cargo \
                 xtask deps`)",
                debian_package(program)
            )));
        };
        let policy = SandboxPolicy {
            mode: SandboxMode::WorkspaceWrite,
            network: toolgate_sandbox::Network::Off,
            workspace: scratch.to_path_buf(),
            extra_writable: Vec::new(),
            extra_readable: Vec::new(),
            read_only_subpaths: Vec::new(),
            hidden_subpaths: Vec::new(),
            ..self.sandbox.clone()
        };
        let sandbox = Sandbox::new(policy)
            .map_err(|e| ToolError::failed(format!("cannot prepare the sandbox for `{program}`: {e}")))?;
        let spec = CommandSpec::new(path, args, scratch.to_path_buf())
            .timeout(Duration::from_secs(self.config.program_timeout_secs.max(1)));
        let result = sandbox
            .run(spec, ctx.cancel.clone())
            .await
            .map_err(|e| ToolError::failed(format!("`{program}` could not be started: {e}")))?;
        // With `[runtime.sandbox] allow_unsandboxed_fallback` a program may have run unconfined:
        // the audit row says so rather than letting it pass as sandboxed.
        if result.enforcement.is_unsandboxed() {
            let why = result.enforcement.fallback_reason.as_deref().unwrap_or("the sandbox could not be enforced");
            ctx.audit.set(format!("`{program}` ran without the sandbox: {why}"));
        }
        if !result.exit.success() {
            let out = result.output.text();
            let tail: String = out.chars().rev().take(400).collect::<Vec<_>>().into_iter().rev().collect();
            return Err(ToolError::ExecutionFailed {
                message: format!("`{program}` failed ({}): {}", result.exit, tail.trim()),
            });
        }
        Ok(result)
    }

    /// Whether `program` is installed.
    pub(crate) fn has(&self, program: &str) -> bool {
        find_program(program).is_some()
    }
}

/// A private scratch folder for one call's programs, removed when dropped.
pub(crate) fn scratch() -> Result<tempfile::TempDir, ToolError> {
    tempfile::Builder::new()
        .prefix("toolgate-media-")
        .tempdir()
        .map_err(|e| ToolError::failed(format!("cannot create a scratch folder: {e}")))
}

/// `program` on `PATH` (a name without a slash), else in the usual system folders.
fn find_program(program: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain(["/usr/bin", "/usr/local/bin", "/bin"].map(PathBuf::from))
        .map(|dir| dir.join(program))
        .find(|p| p.is_file())
}

fn debian_package(program: &str) -> &str {
    match program {
        "ffprobe" => "ffmpeg",
        other => other,
    }
}

/// `text` with every occurrence of `key` replaced.
pub(crate) fn scrub(text: &str, key: Option<&str>) -> String {
    match key {
        Some(k) if k.len() >= 4 => text.replace(k, "[key]"),
        _ => text.to_owned(),
    }
}
