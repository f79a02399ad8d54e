//! The background process table: every process `exec` started with `background: true`, shared
//! by `exec`, `process` and `execute_code`.
//!
//! Each entry owns its [`RunningProcess`] behind an async mutex (the `process` tool's actions
//! take turns), and a watchdog task per entry reaps the process when it exits and stops it at
//! its deadline. Dropping the table (the gate dropping its tools, server shutdown) stops every
//! process: `SIGTERM` to each process group, then, after [`KILL_GRACE`], `SIGKILL` to those
//! left, before the drop returns.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::{Mutex as AsyncMutex, OwnedMutexGuard};
use toolgate_core::{CancellationToken, ToolError};
use toolgate_sandbox::{ExitStatusKind, KILL_GRACE, RunningProcess, Sandbox, SandboxError};

use super::owners::Owners;

/// How often a watchdog checks whether its process exited.
const WATCH_EVERY: Duration = Duration::from_millis(250);

/// How long a `write` waits for the process to take its input.
const WRITE_WAIT: Duration = Duration::from_secs(5);

/// Finished entries kept per workspace for `list` and `poll`.
const KEEP_FINISHED: usize = 64;

/// Who stopped a process, when toolgate did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum StoppedBy {
    /// `process kill`.
    Kill,
    /// Its `timeout` passed.
    Timeout,
}

/// The mutable part of an entry.
#[derive(Debug, Default)]
struct EntryState {
    exit: Option<ExitStatusKind>,
    ended: Option<Instant>,
    stopped_by: Option<StoppedBy>,
}

/// What a new entry is made of.
#[derive(Debug)]
pub(crate) struct NewEntry {
    pub(crate) id: String,
    pub(crate) workspace: PathBuf,
    pub(crate) user: String,
    pub(crate) command: String,
    pub(crate) safe: bool,
    pub(crate) log: PathBuf,
    pub(crate) deadline: Option<Duration>,
    pub(crate) sandbox: Arc<Sandbox>,
}

/// One background process.
#[derive(Debug)]
pub(crate) struct Entry {
    /// The id the model uses.
    pub(crate) id: String,
    /// The workspace it runs in (only calls in that workspace see it).
    pub(crate) workspace: PathBuf,
    /// The user who started it (only that user's calls see it).
    pub(crate) user: String,
    /// The command line (or `python code`, ...), for listing.
    pub(crate) command: String,
    /// Whether the command was classified safe (then writing its stdin needs no approval).
    pub(crate) safe: bool,
    /// The full log.
    pub(crate) log: PathBuf,
    /// The host pid of the process group leader.
    pub(crate) pid: u32,
    /// How it is sandboxed, in words.
    pub(crate) enforcement: String,
    /// When it started.
    pub(crate) started: Instant,
    deadline: Option<Instant>,
    process: Arc<AsyncMutex<RunningProcess>>,
    /// Set while a `write` may be blocked inside the lock (the process does not read): then the
    /// process cannot be reaped, so its group id cannot be reused, and a kill may signal it
    /// without the lock.
    writing: Arc<AtomicBool>,
    state: Mutex<EntryState>,
    /// Keeps the sandbox (its private temporary folder) alive while the process runs.
    _sandbox: Arc<Sandbox>,
}

impl Entry {
    fn state(&self) -> std::sync::MutexGuard<'_, EntryState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// How it ended, `None` while it runs.
    pub(crate) fn exit(&self) -> Option<ExitStatusKind> {
        self.state().exit
    }

    /// Who stopped it, when toolgate did.
    pub(crate) fn stopped_by(&self) -> Option<StoppedBy> {
        self.state().stopped_by
    }

    /// How long it ran (so far).
    pub(crate) fn runtime(&self) -> Duration {
        match self.state().ended {
            Some(end) => end.duration_since(self.started),
            None => self.started.elapsed(),
        }
    }

    fn record(&self, exit: ExitStatusKind, by: Option<StoppedBy>) {
        let mut st = self.state();
        if st.exit.is_none() {
            st.exit = Some(exit);
            st.ended = Some(Instant::now());
            st.stopped_by = by;
        }
    }

    /// The status in words.
    pub(crate) fn status(&self) -> String {
        match (self.exit(), self.stopped_by()) {
            (None, _) => format!("running (pid {})", self.pid),
            (Some(_), Some(StoppedBy::Kill)) => "killed (process group stopped by `process kill`)".to_owned(),
            (Some(_), Some(StoppedBy::Timeout)) => "timed out (process group stopped)".to_owned(),
            (Some(exit), None) => exit.to_string(),
        }
    }

    /// Takes the lock for a stop: if a blocked `write` holds it, kills the group first so the
    /// write fails and lets go.
    async fn lock_for_stop(&self) -> tokio::sync::MutexGuard<'_, RunningProcess> {
        match self.lock_unless_writing().await {
            Some(guard) => guard,
            None => {
                signal_group(self.pid, libc::SIGKILL);
                self.process.lock().await
            }
        }
    }

    /// Takes the lock, or `None` while a `write` the process does not read holds it.
    async fn lock_unless_writing(&self) -> Option<tokio::sync::MutexGuard<'_, RunningProcess>> {
        loop {
            if let Ok(guard) = self.process.try_lock() {
                return Some(guard);
            }
            if self.writing.load(Ordering::SeqCst) {
                return None;
            }
            if let Ok(guard) = tokio::time::timeout(Duration::from_millis(100), self.process.lock()).await {
                return Some(guard);
            }
        }
    }

    /// Reaps the process if it exited; returns how it ended.
    pub(crate) async fn refresh(&self) -> Option<ExitStatusKind> {
        if let Some(exit) = self.exit() {
            return Some(exit);
        }
        match self.lock_unless_writing().await {
            Some(mut p) => self.reap(&mut p),
            None => None,
        }
    }

    fn reap(&self, p: &mut RunningProcess) -> Option<ExitStatusKind> {
        match p.try_wait() {
            Ok(Some(exit)) => {
                self.record(exit, None);
                self.exit()
            }
            _ => self.exit(),
        }
    }

    /// The output since the last poll, and how the process ended if it did; `None` while a
    /// `write` waits for the process to read its input (the output cannot be taken then).
    pub(crate) async fn poll(&self) -> Option<(String, Option<ExitStatusKind>)> {
        let mut p = self.lock_unless_writing().await?;
        let exit = self.reap(&mut p);
        // After the exit, give the output pump a moment to read what is left in the pipe.
        if exit.is_some() {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        Some((p.poll_output(), exit))
    }

    /// Sends `signal` to the process group.
    pub(crate) async fn signal(&self, signal: i32) -> Result<(), ToolError> {
        let Some(mut p) = self.lock_unless_writing().await else {
            // A blocked writer holds the handle, so the process has not been reaped.
            signal_group(self.pid, signal);
            return Ok(());
        };
        if self.reap(&mut p).is_some() {
            return Err(ToolError::failed(format!("process {} already ended ({})", self.id, self.status())));
        }
        p.signal(signal).map_err(|e| ToolError::failed(format!("cannot signal process {}: {e}", self.id)))
    }

    /// Stops the process group (`SIGTERM`, `SIGKILL` after 3 s) and reaps it.
    pub(crate) async fn stop(&self, by: StoppedBy) -> Result<ExitStatusKind, ToolError> {
        let mut p = self.lock_for_stop().await;
        if let Some(exit) = self.reap(&mut p) {
            return Ok(exit);
        }
        p.kill_tree().await.map_err(|e| ToolError::failed(format!("cannot stop process {}: {e}", self.id)))?;
        let exit = p.try_wait().ok().flatten().unwrap_or(ExitStatusKind::Signal(libc::SIGKILL));
        self.record(exit, Some(by));
        Ok(exit)
    }

    /// Writes `data` to the process's stdin, then closes it if `close`.
    pub(crate) async fn write(&self, data: Vec<u8>, close: bool) -> Result<(), ToolError> {
        let mut guard: OwnedMutexGuard<RunningProcess> = loop {
            if let Ok(guard) = Arc::clone(&self.process).try_lock_owned() {
                break guard;
            }
            if self.writing.load(Ordering::SeqCst) {
                return Err(ToolError::failed(format!(
                    "an earlier write to process {} is still waiting for it to read its input; poll it, read \
                     its log, or kill it",
                    self.id
                )));
            }
            if let Ok(guard) =
                tokio::time::timeout(Duration::from_millis(100), Arc::clone(&self.process).lock_owned()).await
            {
                break guard;
            }
        };
        if self.reap(&mut guard).is_some() {
            return Err(ToolError::failed(format!(
                "process {} already ended ({}); its stdin is closed",
                self.id,
                self.status()
            )));
        }
        self.writing.store(true, Ordering::SeqCst);
        let writing = Arc::clone(&self.writing);
        let task = tokio::spawn(async move {
            let r = if data.is_empty() { Ok(()) } else { guard.write_stdin(&data).await };
            if close {
                guard.close_stdin();
            }
            // Cleared while the lock is still held (the guard drops after this).
            writing.store(false, Ordering::SeqCst);
            r
        });
        let waited = tokio::time::timeout(WRITE_WAIT, task).await;
        match waited {
            Ok(joined) => match joined {
                Ok(Ok(())) => Ok(()),
                Ok(Err(e)) => Err(stdin_error(&self.id, e)),
                Err(e) => Err(ToolError::failed(format!("writing to process {} failed: {e}", self.id))),
            },
            // The write goes on in the background (the flag stays set until the process is
            // stopped or reads its input).
            Err(_) => Err(ToolError::failed(format!(
                "process {} has not read its input within {} s (its input buffer is full); the rest is \
                 written when it reads. Poll it, or kill it",
                self.id,
                WRITE_WAIT.as_secs()
            ))),
        }
    }
}

fn stdin_error(id: &str, e: SandboxError) -> ToolError {
    ToolError::failed(format!("cannot write to process {id}: {e} (it may have closed its input or ended)"))
}

/// A signal to a process group, without its handle. Only used while the handle's lock is held
/// by a blocked writer, which guarantees the group has not been reaped (so its id is not reused).
fn signal_group(pid: u32, signal: i32) {
    let pid = i32::try_from(pid).ok().and_then(rustix::process::Pid::from_raw);
    if let (Some(pid), Some(signal)) = (pid, rustix::process::Signal::from_named_raw(signal)) {
        let _ = rustix::process::kill_process_group(pid, signal);
    }
}

/// Every background process of every workspace.
#[derive(Debug)]
pub(crate) struct ProcessTable {
    entries: Mutex<Vec<Arc<Entry>>>,
    max_live: usize,
    /// Cancelled when the table drops: stops the watchdogs.
    shutdown: CancellationToken,
    /// Where the other nodes of a shared store learn which node holds each process.
    pub(crate) owners: Owners,
}

impl ProcessTable {
    pub(crate) fn new(max_live: usize) -> Self {
        ProcessTable {
            entries: Mutex::new(Vec::new()),
            max_live,
            shutdown: CancellationToken::new(),
            owners: Owners::new(toolgate_store::Local::Process),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Arc<Entry>>> {
        self.entries.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Starts a process with `spawn` and adds it, unless the workspace already runs the maximum.
    pub(crate) fn start(
        &self,
        new: NewEntry,
        spawn: impl FnOnce() -> Result<RunningProcess, ToolError>,
    ) -> Result<Arc<Entry>, ToolError> {
        let mut entries = self.lock();
        let live = entries.iter().filter(|e| e.workspace == new.workspace && e.exit().is_none()).count();
        if live >= self.max_live {
            return Err(ToolError::failed(format!(
                "{live} background processes are already running in this workspace (the limit is {}); stop \
                 some with the `process` tool (`{{\"action\": \"list\"}}`, then `{{\"action\": \"kill\", \"id\": ...}}`)",
                self.max_live
            )));
        }
        let process = spawn()?;
        let entry = Arc::new(Entry {
            pid: process.pid(),
            enforcement: process.enforcement().to_string(),
            id: new.id,
            workspace: new.workspace,
            user: new.user,
            command: new.command,
            safe: new.safe,
            log: new.log,
            started: Instant::now(),
            deadline: new.deadline.map(|d| Instant::now() + d),
            process: Arc::new(AsyncMutex::new(process)),
            writing: Arc::new(AtomicBool::new(false)),
            state: Mutex::new(EntryState::default()),
            _sandbox: new.sandbox,
        });
        // Forget the oldest finished entries of this workspace beyond the limit.
        let finished: Vec<usize> = entries
            .iter()
            .enumerate()
            .filter(|(_, e)| e.workspace == entry.workspace && e.exit().is_some())
            .map(|(i, _)| i)
            .collect();
        let mut forgotten = Vec::new();
        if finished.len() >= KEEP_FINISHED {
            let pruned: HashSet<usize> = finished[..=finished.len() - KEEP_FINISHED].iter().copied().collect();
            forgotten = pruned.iter().map(|&i| entries[i].id.clone()).collect();
            let mut i = 0;
            entries.retain(|_| {
                i += 1;
                !pruned.contains(&(i - 1))
            });
        }
        entries.push(Arc::clone(&entry));
        tokio::spawn(watch(Arc::clone(&entry), self.shutdown.clone()));
        drop(entries);
        // Recorded before `exec` returns the id, so a call about it reaching another node at
        // once finds it.
        self.owners.record(&entry.id, &entry.workspace, &entry.user, &entry.command);
        self.owners.forget(forgotten.iter().map(String::as_str));
        Ok(entry)
    }

    /// The entry `id`, if it belongs to this workspace and user.
    pub(crate) fn get(&self, id: &str, workspace: &Path, user: &str) -> Option<Arc<Entry>> {
        self.lock().iter().find(|e| e.id == id && e.workspace == workspace && e.user == user).cloned()
    }

    /// The entry `id` in any workspace (for the approval prompt, which has no context).
    pub(crate) fn find(&self, id: &str) -> Option<Arc<Entry>> {
        self.lock().iter().find(|e| e.id == id).cloned()
    }

    /// The entries of this workspace and user, oldest first.
    pub(crate) fn list(&self, workspace: &Path, user: &str) -> Vec<Arc<Entry>> {
        self.lock().iter().filter(|e| e.workspace == workspace && e.user == user).cloned().collect()
    }

    /// Whether no process was ever started (nothing for the drop to stop or clean up).
    pub(crate) fn is_empty(&self) -> bool {
        self.lock().is_empty()
    }

    /// Whether `id` names a process that still runs (its log must not be pruned).
    pub(crate) fn is_live(&self, id: &str) -> bool {
        self.lock().iter().any(|e| e.id == id && e.exit().is_none())
    }
}

/// Reaps the entry's process when it exits; stops it at its deadline.
async fn watch(entry: Arc<Entry>, shutdown: CancellationToken) {
    loop {
        let wait = match entry.deadline {
            Some(d) => d.saturating_duration_since(Instant::now()).min(WATCH_EVERY),
            None => WATCH_EVERY,
        };
        tokio::select! {
            () = shutdown.cancelled() => return,
            () = tokio::time::sleep(wait) => {}
        }
        if entry.deadline.is_some_and(|d| Instant::now() >= d) {
            let _ = entry.stop(StoppedBy::Timeout).await;
            return;
        }
        if entry.refresh().await.is_some() {
            return;
        }
    }
}

impl Drop for ProcessTable {
    fn drop(&mut self) {
        self.shutdown.cancel();
        let entries = std::mem::take(&mut *self.lock());
        self.owners.forget(entries.iter().map(|e| e.id.as_str()));
        let mut held = Vec::new();
        for e in &entries {
            if e.exit().is_some() {
                continue;
            }
            match e.process.try_lock() {
                Ok(guard) => held.push(guard),
                Err(_) if e.writing.load(Ordering::SeqCst) => signal_group(e.pid, libc::SIGKILL),
                // Another task holds it (a watchdog stopping it); the process dies with that
                // task's last reference at the latest.
                Err(_) => {}
            }
        }
        for p in &held {
            let _ = p.signal(libc::SIGTERM);
        }
        let deadline = Instant::now() + KILL_GRACE;
        loop {
            let mut alive = false;
            for p in held.iter_mut() {
                if matches!(p.try_wait(), Ok(None)) {
                    alive = true;
                }
            }
            if !alive || Instant::now() >= deadline {
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        for p in held.iter_mut() {
            if matches!(p.try_wait(), Ok(None)) {
                let _ = p.signal(libc::SIGKILL);
            }
        }
        // Dropping the handles (with the last reference to each entry) reaps what is left.
    }
}
