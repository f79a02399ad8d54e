//! [`RunningProcess`]: a started command: stdin, output, signals, the group kill and the wait.

use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::io::Interest;
use tokio::io::unix::AsyncFd;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::child::{FORWARDED, REPORT_EXEC_FAILED, REPORT_EXITED, REPORT_SETUP_FAILED, STEPS};
use crate::command::{ExitStatusKind, RunResult};
use crate::denial::DenialContext;
use crate::enforcement::Enforcement;
use crate::error::SandboxError;
use crate::output::{self, CapturedOutput, SharedOutput};
use crate::sandbox::from_wait_status;

/// How long a process group has between `SIGTERM` and `SIGKILL`.
pub const KILL_GRACE: Duration = Duration::from_secs(3);

/// How long to wait for the output pipe to close after the command exited.
const DRAIN_GRACE: Duration = Duration::from_secs(2);

/// Why a run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Outcome {
    Exited,
    TimedOut,
    Cancelled,
}

/// What [`crate::Sandbox::spawn`] hands over.
pub(crate) struct Parts {
    pub(crate) pid: libc::pid_t,
    pub(crate) pidfd: OwnedFd,
    pub(crate) report: OwnedFd,
    pub(crate) init_mode: bool,
    pub(crate) program: PathBuf,
    pub(crate) stdin: Option<OwnedFd>,
    /// The captured output's pipe; `None` for a server, whose streams are the caller's.
    pub(crate) output_read: Option<OwnedFd>,
    pub(crate) output: SharedOutput,
    pub(crate) started: Instant,
    pub(crate) enforcement: Enforcement,
    pub(crate) denials: Arc<DenialContext>,
    pub(crate) cwd: PathBuf,
}

/// A command started by [`crate::Sandbox::spawn`].
///
/// The process leads its own session and process group; with a PID namespace it is the
/// namespace's init, so when it ends everything it started ends too. Dropping the handle kills
/// the whole group with `SIGKILL` and reaps it.
#[derive(Debug)]
pub struct RunningProcess {
    pid: libc::pid_t,
    /// `None` once reaped, or handed to a reaper task (init mode, after the init reported the
    /// command's exit; the init's own exit tears the namespaces down, which takes a while).
    pidfd: Option<AsyncFd<OwnedFd>>,
    /// The child's report pipe: setup or exec failures, and (init mode) the command's status.
    report: AsyncFd<OwnedFd>,
    report_buf: Vec<u8>,
    report_eof: bool,
    init_mode: bool,
    /// A setup or exec failure reported by the child: `(kind, a, b)`.
    failure: Option<(u32, i32, i32)>,
    program: PathBuf,
    stdin: Option<AsyncFd<OwnedFd>>,
    output: SharedOutput,
    eof: watch::Receiver<bool>,
    pump: JoinHandle<()>,
    started: Instant,
    enforcement: Enforcement,
    denials: Arc<DenialContext>,
    cwd: PathBuf,
    /// Set once the process has been reaped.
    status: Option<ExitStatusKind>,
}

impl RunningProcess {
    pub(crate) fn start(parts: Parts) -> Result<Self, SandboxError> {
        if tokio::runtime::Handle::try_current().is_err() {
            return Err(SandboxError::io(
                "starting the output pump",
                io::Error::other("Sandbox::spawn must be called inside a Tokio runtime"),
            ));
        }
        let reader = match parts.output_read {
            Some(fd) => {
                set_nonblocking(&fd).map_err(|e| SandboxError::io("configuring the output pipe", e))?;
                // SAFETY: an OwnedFd stays open and returns the same descriptor until it is
                // dropped, which happens only with the AsyncFd that owns it.
                Some(
                    unsafe { AsyncFd::register_with_interest(fd, Interest::READABLE) }
                        .map_err(|e| SandboxError::io("registering the output pipe", e.into()))?,
                )
            }
            None => None,
        };
        // SAFETY: as above.
        let pidfd = unsafe { AsyncFd::register_with_interest(parts.pidfd, Interest::READABLE) }
            .map_err(|e| SandboxError::io("registering the process descriptor", e.into()))?;
        set_nonblocking(&parts.report).map_err(|e| SandboxError::io("configuring the report pipe", e))?;
        // SAFETY: as above.
        let report = unsafe { AsyncFd::register_with_interest(parts.report, Interest::READABLE) }
            .map_err(|e| SandboxError::io("registering the report pipe", e.into()))?;
        let stdin = match parts.stdin {
            Some(fd) => {
                set_nonblocking(&fd).map_err(|e| SandboxError::io("configuring the stdin pipe", e))?;
                // SAFETY: as above.
                Some(
                    unsafe { AsyncFd::register_with_interest(fd, Interest::WRITABLE) }
                        .map_err(|e| SandboxError::io("registering the stdin pipe", e.into()))?,
                )
            }
            None => None,
        };
        let (tx, eof) = watch::channel(false);
        let pump = match reader {
            Some(reader) => tokio::spawn(pump(reader, Arc::clone(&parts.output), tx)),
            None => {
                output::lock(&parts.output).eof = true;
                let _ = tx.send(true);
                tokio::spawn(async {})
            }
        };
        Ok(RunningProcess {
            pid: parts.pid,
            pidfd: Some(pidfd),
            report,
            report_buf: Vec::new(),
            report_eof: false,
            init_mode: parts.init_mode,
            failure: None,
            program: parts.program,
            stdin,
            output: parts.output,
            eof,
            pump,
            started: parts.started,
            enforcement: parts.enforcement,
            denials: parts.denials,
            cwd: parts.cwd,
            status: None,
        })
    }

    /// The process id (on the host).
    pub fn pid(&self) -> u32 {
        self.pid as u32
    }

    /// How the command runs.
    pub fn enforcement(&self) -> &Enforcement {
        &self.enforcement
    }

    /// Writes all of `data` to the command's stdin (only when the spec asked for a stdin pipe),
    /// waiting while the pipe is full.
    pub async fn write_stdin(&mut self, data: &[u8]) -> Result<(), SandboxError> {
        let err = |e| SandboxError::io("writing to the command's stdin", e);
        let Some(stdin) = &self.stdin else {
            return Err(err(io::Error::new(io::ErrorKind::BrokenPipe, "the command has no stdin pipe")));
        };
        let mut rest = data;
        while !rest.is_empty() {
            let mut guard = stdin.writable().await.map_err(err)?;
            match guard.try_io(|fd| write_fd(fd.get_ref(), rest)) {
                Ok(Ok(n)) => rest = &rest[n..],
                Ok(Err(e)) if e.kind() == io::ErrorKind::Interrupted => {}
                Ok(Err(e)) => return Err(err(e)),
                Err(_would_block) => {}
            }
        }
        Ok(())
    }

    /// When the command was started.
    pub fn started(&self) -> Instant {
        self.started
    }

    /// Closes stdin (the command reads end of file).
    pub fn close_stdin(&mut self) {
        self.stdin = None;
    }

    /// The output written since the last poll.
    pub fn poll_output(&self) -> String {
        output::lock(&self.output).poll()
    }

    /// Everything captured so far (head and tail within the cap).
    pub fn output(&self) -> CapturedOutput {
        output::lock(&self.output).snapshot()
    }

    /// The full log file, if the spec asked for one.
    pub fn log_path(&self) -> Option<PathBuf> {
        output::lock(&self.output).snapshot().log_path
    }

    /// Sends `signal` to the whole process group. A no-op once the process was reaped.
    pub fn signal(&self, signal: i32) -> Result<(), SandboxError> {
        if self.status.is_some() {
            return Ok(());
        }
        // With a PID namespace, the init forwards the signals it can handle to the command (and
        // queues one sent before the command started); sending it to the group too would deliver
        // it twice. The init is signalled by its pid: until its setsid the group does not exist
        // yet. SIGKILL and SIGSTOP cannot be handled: they go to the init and the whole group.
        if self.init_mode {
            // SAFETY: kill on our own unreaped child.
            unsafe { libc::kill(self.pid, signal) };
            if FORWARDED.contains(&signal) {
                return Ok(());
            }
        }
        // SAFETY: kill on our own child's process group (the child called setsid, so the
        // group id is its pid; it cannot be reused before we reap the child).
        if unsafe { libc::kill(-self.pid, signal) } < 0 {
            let e = io::Error::last_os_error();
            if e.raw_os_error() != Some(libc::ESRCH) {
                return Err(SandboxError::io(format!("sending signal {signal} to process group {}", self.pid), e));
            }
            // No group yet: the child has not reached its setsid. It blocks signals until its
            // execve, so one sent to it now waits for the command.
            // SAFETY: kill on our own unreaped child.
            unsafe { libc::kill(self.pid, signal) };
        }
        Ok(())
    }

    fn kill_now(&self) {
        if self.status.is_some() {
            return;
        }
        // SAFETY: pidfd_send_signal on our own pidfd (SIGKILL also reaches a PID namespace's
        // init), then kill on the group; no memory is passed.
        unsafe {
            if let Some(pidfd) = &self.pidfd {
                libc::syscall(libc::SYS_pidfd_send_signal, pidfd.get_ref().as_raw_fd(), libc::SIGKILL, 0usize, 0u32);
            }
            libc::kill(-self.pid, libc::SIGKILL);
        }
    }

    /// Kills the process tree: `SIGTERM` to the group, then `SIGKILL` (to the group and to the
    /// namespace's init, which takes every process of the namespace with it) after
    /// [`KILL_GRACE`]. Returns once the process is reaped.
    pub async fn kill_tree(&mut self) -> Result<(), SandboxError> {
        if self.status.is_some() {
            return Ok(());
        }
        self.signal(libc::SIGTERM)?;
        if tokio::time::timeout(KILL_GRACE, self.wait_exit()).await.is_err() {
            self.kill_now();
            self.wait_exit().await?;
        }
        Ok(())
    }

    /// Reads the records the child wrote so far (non-blocking).
    fn drain_report(&mut self) -> Option<ExitStatusKind> {
        let mut exited = None;
        let mut buf = [0u8; 256];
        while !self.report_eof {
            match read_fd(self.report.get_ref(), &mut buf) {
                Ok(0) => self.report_eof = true,
                Ok(n) => self.report_buf.extend_from_slice(&buf[..n]),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => break, // WouldBlock (or a broken pipe: nothing more to read)
            }
        }
        while self.report_buf.len() >= 12 {
            let record: Vec<u8> = self.report_buf.drain(..12).collect();
            let word = |i: usize| [record[i], record[i + 1], record[i + 2], record[i + 3]];
            let kind = u32::from_ne_bytes(word(0));
            let (a, b) = (i32::from_ne_bytes(word(4)), i32::from_ne_bytes(word(8)));
            if kind == REPORT_EXITED {
                exited = Some(from_wait_status(a));
            } else {
                self.failure = self.failure.or(Some((kind, a, b)));
            }
        }
        exited
    }

    /// Returns the exit status if the command has exited (and reaps what can be reaped).
    pub fn try_wait(&mut self) -> Result<Option<ExitStatusKind>, SandboxError> {
        if let Some(s) = self.status {
            return Ok(Some(s));
        }
        let reported = self.drain_report();
        if self.init_mode
            && let Some(status) = reported
        {
            // The init reported the command's exit and is exiting; the kernel kills the rest
            // of the namespace. Reap the init in the background instead of waiting for the
            // namespaces to be torn down.
            if let Some(pidfd) = self.pidfd.take() {
                match tokio::runtime::Handle::try_current() {
                    Ok(rt) => drop(rt.spawn(reap(pidfd))),
                    Err(_) => reap_blocking(&pidfd),
                }
            }
            self.status = Some(status);
            return Ok(Some(status));
        }
        let Some(pidfd) = &self.pidfd else { return Ok(self.status) };
        // SAFETY: waitid with WNOWAIT only fills the zeroed siginfo.
        let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
        let fd = pidfd.get_ref().as_raw_fd() as libc::id_t;
        // SAFETY: see above.
        let r = unsafe { libc::waitid(libc::P_PIDFD, fd, &mut info, libc::WEXITED | libc::WNOHANG | libc::WNOWAIT) };
        if r < 0 {
            return Err(SandboxError::io("waiting for the command", io::Error::last_os_error()));
        }
        // SAFETY: si_pid is valid for waitid results.
        if unsafe { info.si_pid() } == 0 {
            return Ok(None);
        }
        // Kill what is left of the group while the leader is a zombie (the group id cannot be
        // reused yet). With a PID namespace the kernel already killed the rest.
        // SAFETY: signalling our own zombie's group; see `signal`.
        unsafe { libc::kill(-self.pid, libc::SIGKILL) };
        // SAFETY: reaps the zombie, filling the zeroed siginfo.
        let r = unsafe { libc::waitid(libc::P_PIDFD, fd, &mut info, libc::WEXITED) };
        if r < 0 {
            return Err(SandboxError::io("reaping the command", io::Error::last_os_error()));
        }
        self.pidfd = None;
        // SAFETY: si_status is valid for CLD_* codes.
        let raw = unsafe { info.si_status() };
        let direct =
            if info.si_code == libc::CLD_EXITED { ExitStatusKind::Code(raw) } else { ExitStatusKind::Signal(raw) };
        // Every writer is gone now: what the child said is in the pipe.
        let status = self.drain_report().or(reported).unwrap_or(direct);
        self.status = Some(status);
        Ok(Some(status))
    }

    /// Why the command never ran, once it has ended: a setup step of the sandbox or `execve`
    /// failed (for example Landlock refusing to execute a program outside the readable paths).
    pub fn start_error(&mut self) -> Option<SandboxError> {
        let _ = self.try_wait();
        self.failure.map(|failure| failure_error(failure, &self.program))
    }

    /// Waits until the command exits.
    pub async fn wait_exit(&mut self) -> Result<ExitStatusKind, SandboxError> {
        loop {
            if let Some(s) = self.try_wait()? {
                return Ok(s);
            }
            let pid_ready = async {
                match &self.pidfd {
                    Some(p) => p.readable().await.map(|mut g| g.clear_ready()),
                    None => std::future::pending().await,
                }
            };
            let report_ready = async {
                if self.report_eof {
                    std::future::pending().await
                } else {
                    self.report.readable().await.map(|mut g| g.clear_ready())
                }
            };
            tokio::select! {
                r = pid_ready => r,
                r = report_ready => r,
            }
            .map_err(|e| SandboxError::io("waiting for the command", e))?;
        }
    }

    /// Waits for the command to exit (no timeout: see [`crate::Sandbox::run`]) and returns the
    /// result.
    pub async fn wait(mut self) -> Result<RunResult, SandboxError> {
        self.wait_exit().await?;
        self.finish(Outcome::Exited).await
    }

    pub(crate) async fn finish(mut self, outcome: Outcome) -> Result<RunResult, SandboxError> {
        let status = self.wait_exit().await?;
        if let Some(failure) = self.failure {
            return Err(failure_error(failure, &self.program));
        }
        let mut eof = self.eof.clone();
        let _ = tokio::time::timeout(DRAIN_GRACE, eof.wait_for(|done| *done)).await;
        self.pump.abort();
        let output = output::lock(&self.output).snapshot();
        let signal = match status {
            ExitStatusKind::Signal(s) => Some(s),
            _ => None,
        };
        let text = format!("{}\n{}", output.head, output.tail);
        let denials = self.denials.find(&text, &self.cwd, signal);
        let exit = match outcome {
            Outcome::Exited => status,
            Outcome::TimedOut => ExitStatusKind::TimedOut,
            Outcome::Cancelled => ExitStatusKind::Cancelled,
        };
        Ok(RunResult { exit, output, duration: self.started.elapsed(), enforcement: self.enforcement.clone(), denials })
    }

    /// The working directory.
    pub fn cwd(&self) -> &Path {
        &self.cwd
    }
}

impl Drop for RunningProcess {
    fn drop(&mut self) {
        self.pump.abort();
        if let Some(pidfd) = &self.pidfd {
            if self.status.is_none() {
                self.kill_now();
            }
            reap_blocking(pidfd);
        }
    }
}

/// Reaps an init that reported its command's exit.
///
/// Looks before it waits: the readiness of the init's exit may have been taken already
/// ([`RunningProcess::wait_exit`] clears it when it wakes for it before it reads the report),
/// and a readiness that was cleared does not come again, so waiting first would wait forever,
/// leaving a zombie and its pidfd for each such command.
async fn reap(pidfd: AsyncFd<OwnedFd>) {
    // Readiness is cleared before the next look, so an exit after that look wakes the wait.
    while !try_reap(&pidfd) {
        match pidfd.readable().await {
            Ok(mut ready) => ready.clear_ready(),
            Err(_) => return reap_blocking(&pidfd),
        }
    }
}

/// Reaps our child behind `pidfd` if it has exited; `true` once there is nothing left to wait
/// for (reaped now, or before).
fn try_reap(pidfd: &AsyncFd<OwnedFd>) -> bool {
    // SAFETY: waitid on our own child fills the zeroed siginfo only.
    let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
    // SAFETY: see above.
    let r = unsafe {
        libc::waitid(libc::P_PIDFD, pidfd.get_ref().as_raw_fd() as libc::id_t, &mut info, libc::WEXITED | libc::WNOHANG)
    };
    if r < 0 {
        // ECHILD: reaped already; EINTR: look again.
        return io::Error::last_os_error().kind() != io::ErrorKind::Interrupted;
    }
    // SAFETY: si_pid is valid for waitid results.
    unsafe { info.si_pid() != 0 }
}

/// Waits for our child behind `pidfd` to exit and reaps it.
fn reap_blocking(pidfd: &AsyncFd<OwnedFd>) {
    // SAFETY: reaps our own child; fills the zeroed siginfo.
    unsafe {
        let mut info: libc::siginfo_t = std::mem::zeroed();
        libc::waitid(libc::P_PIDFD, pidfd.get_ref().as_raw_fd() as libc::id_t, &mut info, libc::WEXITED);
    }
}

async fn pump(reader: AsyncFd<OwnedFd>, output: SharedOutput, done: watch::Sender<bool>) {
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let Ok(mut guard) = reader.readable().await else { break };
        match guard.try_io(|fd| read_fd(fd.get_ref(), &mut buf)) {
            Ok(Ok(0)) => break,
            Ok(Ok(n)) => output::lock(&output).push(&buf[..n]),
            Ok(Err(e)) if e.kind() == io::ErrorKind::Interrupted => {}
            Ok(Err(_)) => break,
            Err(_would_block) => {}
        }
    }
    output::lock(&output).eof = true;
    let _ = done.send(true);
}

fn read_fd(fd: &OwnedFd, buf: &mut [u8]) -> io::Result<usize> {
    // SAFETY: reads into a valid buffer from a descriptor we own.
    let n = unsafe { libc::read(fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) };
    if n < 0 { Err(io::Error::last_os_error()) } else { Ok(n as usize) }
}

fn write_fd(fd: &OwnedFd, data: &[u8]) -> io::Result<usize> {
    // SAFETY: writes from a valid buffer to a descriptor we own.
    let n = unsafe { libc::write(fd.as_raw_fd(), data.as_ptr().cast(), data.len()) };
    if n < 0 { Err(io::Error::last_os_error()) } else { Ok(n as usize) }
}

fn set_nonblocking(fd: &OwnedFd) -> io::Result<()> {
    // SAFETY: fcntl on a descriptor we own.
    unsafe {
        let flags = libc::fcntl(fd.as_raw_fd(), libc::F_GETFL);
        if flags < 0 || libc::fcntl(fd.as_raw_fd(), libc::F_SETFL, flags | libc::O_NONBLOCK) < 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

/// The error for a failure record from the child.
fn failure_error((kind, a, b): (u32, i32, i32), program: &Path) -> SandboxError {
    match kind {
        REPORT_SETUP_FAILED => SandboxError::Setup {
            step: STEPS.get(a as usize).copied().unwrap_or("setting up the sandbox"),
            source: io::Error::from_raw_os_error(b),
        },
        REPORT_EXEC_FAILED => {
            SandboxError::Spawn { program: program.to_path_buf(), source: io::Error::from_raw_os_error(a) }
        }
        _ => SandboxError::Setup {
            step: "setting up the sandbox",
            source: io::Error::other(format!("unknown report {kind}")),
        },
    }
}
