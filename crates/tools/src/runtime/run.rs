//! Running one foreground command to its end, and the output logs under `.toolgate/outputs/`.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use toolgate_core::{CancellationToken, ProgressSink, ToolError};
use toolgate_sandbox::{CommandSpec, ExitStatusKind, RunResult, Sandbox};

use super::sandboxes::sandbox_error;

/// Where logs live, relative to the workspace.
pub(crate) const OUTPUTS_DIR: &str = ".toolgate/outputs";

/// How many log files a workspace keeps; older ones are removed when new ones are made.
const KEEP_LOGS: usize = 200;

/// How often a long command reports progress.
const PROGRESS_EVERY: Duration = Duration::from_secs(10);

/// A new process id, unpredictable, and one of toolgate's own ids (`tg-proc-...`), which the
/// output stage never redacts: the model must be able to pass it to `process`.
pub(crate) fn new_id() -> String {
    toolgate_guard::ids::mint("proc")
}

/// Whether `id` has the shape [`new_id`] makes, or earlier versions made (8 hex digits), so it
/// is safe in a file name: lowercase letters, digits and inner dashes only.
pub(crate) fn valid_id(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= 96
        && !id.starts_with('-')
        && id.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
}

/// The log of `id`, relative to the workspace, as the model reads it.
pub(crate) fn rel_log(id: &str) -> String {
    format!("{OUTPUTS_DIR}/{id}.log")
}

/// Creates `<workspace>/.toolgate/outputs` if needed and checks that neither it nor
/// `.toolgate` is a symbolic link (the server writes logs there with its own rights).
pub(crate) fn outputs_dir(workspace: &Path) -> Result<PathBuf, ToolError> {
    let dir = workspace.join(OUTPUTS_DIR);
    // toolgate's state is its owner's alone (`.toolgate/` and what is in it: 0700).
    std::os::unix::fs::DirBuilderExt::mode(std::fs::DirBuilder::new().recursive(true), 0o700)
        .create(&dir)
        .map_err(|e| ToolError::failed(format!("cannot create {}: {e}", dir.display())))?;
    for p in [workspace.join(".toolgate"), dir.clone()] {
        let meta = std::fs::symlink_metadata(&p)
            .map_err(|e| ToolError::failed(format!("cannot inspect {}: {e}", p.display())))?;
        if !meta.is_dir() {
            return Err(ToolError::failed(format!(
                "{} is not a plain folder (a symbolic link?); toolgate will not write logs through it. \
                 Ask the user to remove it",
                p.display()
            )));
        }
    }
    Ok(dir)
}

/// Removes the oldest logs beyond [`KEEP_LOGS`], except those `keep` names.
pub(crate) fn prune_logs(dir: &Path, keep: impl Fn(&str) -> bool) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    let mut logs: Vec<(std::time::SystemTime, PathBuf)> = entries
        .flatten()
        .filter_map(|e| {
            let name = e.file_name();
            let id = name.to_str()?.strip_suffix(".log")?;
            if keep(id) {
                return None;
            }
            let meta = e.metadata().ok()?;
            meta.is_file().then(|| (meta.modified().unwrap_or(std::time::UNIX_EPOCH), e.path()))
        })
        .collect();
    if logs.len() <= KEEP_LOGS {
        return;
    }
    logs.sort();
    let excess = logs.len() - KEEP_LOGS;
    for (_, path) in logs.into_iter().take(excess) {
        let _ = std::fs::remove_file(path);
    }
}

/// Runs `spec` to its end in a task of its own, so that the process group is stopped properly
/// (`SIGTERM`, then `SIGKILL` after 3 s) however the call ends: the command exits, `timeout`
/// passes, `cancel` fires (caller, shutdown), or the caller drops this future (the gate's own
/// deadline), which cancels too.
///
/// The result's `exit` is [`ExitStatusKind::TimedOut`] or [`ExitStatusKind::Cancelled`] when
/// toolgate stopped the command.
pub(crate) async fn run_foreground(
    sandbox: Arc<Sandbox>,
    spec: CommandSpec,
    timeout: Duration,
    cancel: &CancellationToken,
    progress: ProgressSink,
) -> Result<RunResult, ToolError> {
    let token = cancel.child_token();
    let guard = token.clone().drop_guard();
    let task = tokio::spawn(async move {
        let started = Instant::now();
        let mut process = sandbox.spawn(spec)?;
        process.close_stdin();
        let deadline = tokio::time::sleep(timeout);
        tokio::pin!(deadline);
        let mut tick = tokio::time::interval_at(tokio::time::Instant::now() + PROGRESS_EVERY, PROGRESS_EVERY);
        let stopped = loop {
            tokio::select! {
                r = process.wait_exit() => { r?; break None; }
                () = &mut deadline => break Some(ExitStatusKind::TimedOut),
                () = token.cancelled() => break Some(ExitStatusKind::Cancelled),
                _ = tick.tick() => {
                    if progress.is_active() {
                        let secs = started.elapsed().as_secs();
                        progress.report(secs as f64, Some(timeout.as_secs() as f64), Some(format!("running for {secs} s")));
                    }
                }
            }
        };
        if stopped.is_some() {
            process.kill_tree().await?;
        }
        let mut result = process.wait().await?;
        if let Some(exit) = stopped {
            result.exit = exit;
        }
        Ok::<_, toolgate_sandbox::SandboxError>(result)
    });
    let joined = task.await;
    guard.disarm();
    match joined {
        Ok(Ok(result)) => Ok(result),
        Ok(Err(e)) => Err(sandbox_error(e)),
        Err(e) => Err(ToolError::failed(format!("the command's supervisor task failed: {e}"))),
    }
}
