//! Denials: what the sandbox blocked, from real signals only.
//!
//! - `SIGSYS`: the seccomp filter killed the command (certain).
//! - A line of output with an errno text (`Permission denied`, `Operation not permitted`,
//!   `Read-only file system`) that names a path the policy confines: not writable (outside the
//!   writable roots, or a read-only subpath) or not readable. This is a heuristic over the
//!   command's own error messages: a program that reports an error without the path, or in
//!   another language, is missed; a `Permission denied` on a confined path that had another cause
//!   (file mode bits) is attributed to the sandbox. Errors on paths the policy does not confine
//!   are never reported.
//! - With the network off, `Address family not supported by protocol` (the errno our seccomp
//!   filter answers to `socket(AF_INET*)`; a normal Linux host supports those families).

use std::fmt;
use std::path::{Component, Path, PathBuf};

use serde::Serialize;

use crate::policy::SandboxMode;
use crate::rules::Grant;

/// What was blocked.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
#[non_exhaustive]
pub enum DenialKind {
    /// Access to a path the policy does not allow.
    Path {
        /// The path as resolved against the working directory.
        path: PathBuf,
        /// `true` for a denied write (the path is readable, read-only, or does not exist yet),
        /// `false` for a denied read (the path exists outside the readable set).
        write: bool,
    },
    /// Opening a network socket while the network is off.
    Network,
    /// A system call forbidden by the seccomp filter (`SIGSYS`).
    Syscall,
}

/// One thing the sandbox blocked, with the evidence.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Denial {
    /// What was blocked.
    #[serde(flatten)]
    pub kind: DenialKind,
    /// The evidence: the output line, or the signal.
    pub evidence: String,
}

impl fmt::Display for Denial {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.kind {
            DenialKind::Path { path, write: true } => {
                write!(f, "blocked by the sandbox: writing {} is not allowed ({})", path.display(), self.evidence)
            }
            DenialKind::Path { path, write: false } => {
                write!(
                    f,
                    "blocked by the sandbox: {} is outside the readable paths ({})",
                    path.display(),
                    self.evidence
                )
            }
            DenialKind::Network => {
                write!(f, "blocked by the sandbox: network access is off ({})", self.evidence)
            }
            DenialKind::Syscall => write!(
                f,
                "blocked by the sandbox: the command was killed by SIGSYS for a forbidden system call \
                 (ptrace, mount, kexec, module loading, setns, ...)"
            ),
        }
    }
}

/// What the heuristic needs to know about the policy.
#[derive(Debug, Clone)]
pub(crate) struct DenialContext {
    pub(crate) mode: SandboxMode,
    pub(crate) network_off: bool,
    pub(crate) rules: Vec<(PathBuf, Grant)>,
    pub(crate) read_only: Vec<PathBuf>,
    /// Directories covered by an empty tmpfs, with the paths bound back into them.
    pub(crate) hidden: Vec<(PathBuf, Vec<PathBuf>)>,
}

impl DenialContext {
    fn covered(&self, path: &Path, pred: impl Fn(Grant) -> bool) -> bool {
        self.rules.iter().any(|(root, grant)| pred(*grant) && path.starts_with(root))
    }

    fn writable(&self, path: &Path) -> bool {
        if self.read_only.iter().any(|ro| path.starts_with(ro)) {
            return false;
        }
        self.covered(path, |g| matches!(g, Grant::Write | Grant::Device))
    }

    /// Under a hidden root and not bound back: the command saw an empty directory.
    fn hidden(&self, path: &Path) -> bool {
        self.hidden.iter().any(|(root, keeps)| path.starts_with(root) && !keeps.iter().any(|k| path.starts_with(k)))
    }

    fn readable(&self, path: &Path) -> bool {
        self.covered(path, |g| !matches!(g, Grant::ListDir))
    }

    /// Denials found in `text` (the captured output) and the exit signal.
    pub(crate) fn find(&self, text: &str, cwd: &Path, signal: Option<i32>) -> Vec<Denial> {
        let mut out: Vec<Denial> = Vec::new();
        if signal == Some(libc::SIGSYS) && self.mode != SandboxMode::FullAccess {
            out.push(Denial { kind: DenialKind::Syscall, evidence: "SIGSYS".into() });
        }
        for line in text.lines().take(5000) {
            if out.len() >= 20 {
                break;
            }
            // Matched case-blind, with the errno names: Node says `EACCES: permission denied`.
            let lower = line.to_ascii_lowercase();
            if self.network_off && (lower.contains("address family not supported") || line.contains("EAFNOSUPPORT")) {
                if !out.iter().any(|d| d.kind == DenialKind::Network) {
                    out.push(Denial { kind: DenialKind::Network, evidence: clip(line) });
                }
                continue;
            }
            if self.mode == SandboxMode::FullAccess {
                continue;
            }
            if line.contains("No such file or directory") || line.contains("Directory nonexistent") {
                // Only a path under a directory the sandbox hid counts.
                for candidate in path_candidates(line) {
                    let path = normalize(&cwd.join(&candidate));
                    if self.hidden(&path) {
                        let kind = DenialKind::Path { path, write: false };
                        if !out.iter().any(|d| d.kind == kind) {
                            out.push(Denial { kind, evidence: clip(line) });
                        }
                        break;
                    }
                }
                continue;
            }
            let read_only_fs = lower.contains("read-only file system") || line.contains("EROFS");
            let errno_text = read_only_fs
                || ["permission denied", "operation not permitted"].iter().any(|t| lower.contains(t))
                || ["EACCES", "EPERM"].iter().any(|t| line.contains(t));
            if !errno_text {
                continue;
            }
            for candidate in path_candidates(line) {
                let path = normalize(&cwd.join(&candidate));
                let readable = self.readable(&path);
                // EROFS under a writable root comes from our read-only mounts (a hooks path
                // found in .git/config at spawn time, too).
                if readable && self.writable(&path) && !read_only_fs {
                    continue; // not confined by us
                }
                let write = readable || read_only_fs || std::fs::symlink_metadata(&path).is_err();
                let kind = DenialKind::Path { path, write };
                if !out.iter().any(|d| d.kind == kind) {
                    out.push(Denial { kind, evidence: clip(line) });
                }
                break;
            }
        }
        out
    }
}

fn clip(line: &str) -> String {
    let line = line.trim();
    match line.char_indices().nth(200) {
        Some((i, _)) => format!("{}...", &line[..i]),
        None => line.to_string(),
    }
}

/// Words of an error line that may be the path: first the last word before `: <errno text>`
/// (the `program: path: strerror` format of `perror` and most tools), then quoted strings, then
/// words containing `/` or starting with `.` (except a leading `program:`), stripped of
/// punctuation.
fn path_candidates(line: &str) -> Vec<String> {
    let mut found = Vec::new();
    for errno_text in [
        ": Permission denied",
        ": Operation not permitted",
        ": Read-only file system",
        ": No such file or directory",
        ": Directory nonexistent",
    ] {
        if let Some(i) = line.find(errno_text)
            && let Some(word) = line[..i].split_whitespace().last()
        {
            let w = word.trim_matches(|c: char| "'\"`‘’“”:,;()[]<>".contains(c));
            if !w.is_empty() && !w.chars().all(|c| c.is_ascii_digit()) {
                found.push(w.to_string());
            }
        }
    }
    for quote in ['\'', '"', '`', '‘', '’', '“', '”'] {
        for (i, part) in line.split(quote).enumerate() {
            if i % 2 == 1 && looks_like_path(part) {
                found.push(part.to_string());
            }
        }
    }
    for (i, word) in line.split_whitespace().enumerate() {
        if i == 0 && word.ends_with(':') {
            continue; // the program name
        }
        let w = word.trim_matches(|c: char| "'\"`‘’“”:,;()[]<>".contains(c));
        if looks_like_path(w) && !found.iter().any(|f| f == w) {
            found.push(w.to_string());
        }
    }
    found
}

fn looks_like_path(s: &str) -> bool {
    !s.is_empty() && !s.contains(' ') && (s.contains('/') || s.starts_with('.')) && !s.contains("://")
}

/// Resolves `.` and `..` lexically.
fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            other => out.push(other),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ctx() -> DenialContext {
        DenialContext {
            mode: SandboxMode::WorkspaceWrite,
            network_off: true,
            rules: vec![(PathBuf::from("/usr"), Grant::ReadExec), (PathBuf::from("/ws"), Grant::Write)],
            read_only: vec![PathBuf::from("/ws/.git/hooks")],
            hidden: vec![(PathBuf::from("/home"), vec![])],
        }
    }

    #[test]
    fn finds_confined_paths_only() {
        let c = ctx();
        let text = "sh: 1: cannot create /etc/x: Permission denied\n\
                    touch: cannot touch '/ws/.git/hooks/pre-commit': Read-only file system\n\
                    cp: cannot open '/ws/ok.txt': Permission denied\n\
                    cat: ../../home/u/.ssh/id_rsa: Permission denied\n";
        let d = c.find(text, Path::new("/ws/sub"), None);
        let paths: Vec<String> = d
            .iter()
            .filter_map(|d| match &d.kind {
                DenialKind::Path { path, .. } => Some(path.display().to_string()),
                _ => None,
            })
            .collect();
        assert_eq!(paths, vec!["/etc/x", "/ws/.git/hooks/pre-commit", "/home/u/.ssh/id_rsa"]);
    }

    #[test]
    fn sigsys_and_network() {
        let c = ctx();
        let d = c.find("OSError: [Errno 97] Address family not supported by protocol", Path::new("/ws"), Some(31));
        assert_eq!(d.len(), 2);
        assert!(d[0].to_string().starts_with("blocked by the sandbox"));
    }
}
