//! What to run ([`CommandSpec`]) and how it ended ([`RunResult`], [`ExitStatusKind`]).

use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

use serde::Serialize;

use crate::denial::Denial;
use crate::enforcement::Enforcement;
use crate::output::CapturedOutput;

/// One command to run in a [`crate::Sandbox`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommandSpec {
    /// The program: a path (absolute or relative to `cwd`), or a name looked up in the child's
    /// `PATH`.
    pub program: PathBuf,
    /// Arguments after the program name.
    pub args: Vec<String>,
    /// The working directory; a relative path is taken from the workspace. It must be inside
    /// the paths the sandbox shows (a directory under a hidden root such as `/tmp` that is not
    /// bound back does not exist for the command).
    pub cwd: PathBuf,
    /// Extra environment variables, already approved by the caller; added on top of the
    /// allowlist ([`toolgate_guard::env::SAFE_VARS`]) and not filtered again.
    pub env: Vec<(String, String)>,
    /// The environment is `env` alone (plus the sandbox's `TMPDIR` and `PWD`), without the
    /// allowlisted variables of toolgate's own: for bridged MCP servers, whose configuration
    /// names their whole environment.
    pub clear_env: bool,
    /// Give the command a stdin pipe ([`crate::RunningProcess::write_stdin`]); otherwise stdin
    /// is `/dev/null`. With [`crate::Sandbox::run`] the pipe is closed at once.
    pub stdin: bool,
    /// Wall-clock limit; then the process group gets `SIGTERM`, and `SIGKILL` 3 s later.
    pub timeout: Duration,
    /// Bytes of output kept in memory (half head, half tail).
    pub output_cap_bytes: usize,
    /// Where to stream the full output, if anywhere.
    pub log_path: Option<PathBuf>,
    /// The log file stops growing at this size.
    pub log_max_bytes: u64,
}

impl Default for CommandSpec {
    fn default() -> Self {
        CommandSpec {
            program: PathBuf::new(),
            args: Vec::new(),
            cwd: PathBuf::from("."),
            env: Vec::new(),
            clear_env: false,
            stdin: false,
            timeout: Duration::from_secs(120),
            output_cap_bytes: 256 * 1024,
            log_path: None,
            log_max_bytes: 256 * 1024 * 1024,
        }
    }
}

impl CommandSpec {
    /// `program` with `args`, in `cwd`, with the defaults (120 s, 256 KiB kept, no log).
    pub fn new<I, S>(program: impl Into<PathBuf>, args: I, cwd: impl Into<PathBuf>) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        CommandSpec {
            program: program.into(),
            args: args.into_iter().map(Into::into).collect(),
            cwd: cwd.into(),
            ..CommandSpec::default()
        }
    }

    /// `sh -c script` in `cwd`.
    pub fn shell(script: impl Into<String>, cwd: impl Into<PathBuf>) -> Self {
        CommandSpec::new("/bin/sh", ["-c".to_string(), script.into()], cwd)
    }

    /// Sets the timeout.
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// Adds an environment variable.
    pub fn env(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.env.push((name.into(), value.into()));
        self
    }
}

/// How a command ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case", tag = "kind", content = "value")]
pub enum ExitStatusKind {
    /// Exited with this code.
    Code(i32),
    /// Killed by this signal (not by toolgate).
    Signal(i32),
    /// Killed by toolgate after the timeout.
    TimedOut,
    /// Killed by toolgate after cancellation or shutdown.
    Cancelled,
}

impl ExitStatusKind {
    /// Exit code 0.
    pub fn success(&self) -> bool {
        *self == ExitStatusKind::Code(0)
    }
}

impl fmt::Display for ExitStatusKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ExitStatusKind::Code(c) => write!(f, "exit code {c}"),
            ExitStatusKind::Signal(s) => write!(f, "killed by signal {s}{}", signal_name(*s)),
            ExitStatusKind::TimedOut => f.write_str("timed out (process group killed)"),
            ExitStatusKind::Cancelled => f.write_str("cancelled (process group killed)"),
        }
    }
}

fn signal_name(sig: i32) -> &'static str {
    match sig {
        libc::SIGKILL => " (SIGKILL)",
        libc::SIGTERM => " (SIGTERM)",
        libc::SIGSEGV => " (SIGSEGV)",
        libc::SIGSYS => " (SIGSYS: forbidden system call)",
        libc::SIGXCPU => " (SIGXCPU: CPU time limit)",
        libc::SIGXFSZ => " (SIGXFSZ: file size limit)",
        libc::SIGABRT => " (SIGABRT)",
        _ => "",
    }
}

/// The result of [`crate::Sandbox::run`] or [`crate::RunningProcess::wait`].
#[derive(Debug, Clone)]
pub struct RunResult {
    /// How the command ended.
    pub exit: ExitStatusKind,
    /// What it printed.
    pub output: CapturedOutput,
    /// Wall-clock time from spawn to exit.
    pub duration: Duration,
    /// How the command actually ran.
    pub enforcement: Enforcement,
    /// What the sandbox blocked, from real signals (see [`Denial`]).
    pub denials: Vec<Denial>,
}
