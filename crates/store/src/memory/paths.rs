//! Memory paths: `MEMORY.md` (or `memory.md`) and files under `memory/`, nothing else.

use super::MemoryError;

/// The files agents load as their identity; memory tools never write them.
pub const IDENTITY_FILES: &[&str] = &["IDENTITY.md", "SOUL.md", "AGENTS.md", "USER.md"];

/// Longest memory path, in bytes.
const MAX_PATH_BYTES: usize = 512;
/// Deepest folder nesting under `memory/`.
const MAX_DEPTH: usize = 16;

/// Normalizes a model-supplied memory path (`./memory//a.md` -> `memory/a.md`) or says why it is
/// refused. `dir` allows `memory` itself and folders (for listing).
pub fn normalize(input: &str, dir: bool) -> Result<String, MemoryError> {
    let bad = |reason: String| MemoryError::InvalidPath { path: shorten(input), reason };
    if input.len() > MAX_PATH_BYTES {
        return Err(bad(format!("it is longer than {MAX_PATH_BYTES} bytes")));
    }
    if input.chars().any(|c| c.is_control()) {
        return Err(bad("it contains control characters".into()));
    }
    if input.contains('\\') {
        return Err(bad("use `/` to separate folders".into()));
    }
    if input.starts_with('/') || input.starts_with('~') {
        return Err(bad("give a path relative to the workspace, such as `memory/notes.md`".into()));
    }
    let parts: Vec<&str> = input.split('/').filter(|p| !p.is_empty() && *p != ".").collect();
    if parts.contains(&"..") {
        return Err(bad("`..` is not allowed: memory paths stay inside `memory/`".into()));
    }
    if let Some(hidden) = parts.iter().find(|p| p.starts_with('.')) {
        return Err(bad(format!("`{hidden}` is hidden; memory paths cannot name hidden files or folders")));
    }
    match parts.as_slice() {
        [] if dir => Ok(String::new()),
        [one] if *one == "MEMORY.md" || *one == "memory.md" => Ok((*one).to_owned()),
        ["memory"] if dir => Ok("memory".to_owned()),
        ["memory", rest @ ..] if !rest.is_empty() => {
            if rest.len() > MAX_DEPTH {
                return Err(bad(format!("it is nested deeper than {MAX_DEPTH} folders")));
            }
            Ok(parts.join("/"))
        }
        [one] if IDENTITY_FILES.iter().any(|f| f.eq_ignore_ascii_case(one)) => Err(bad(format!(
            "`{one}` is an identity file; memory tools cannot touch it (use the file tools, which ask for approval)"
        ))),
        _ => Err(bad("memory paths are `MEMORY.md` or a path under `memory/`, such as `memory/projects.md`".into())),
    }
}

/// A path a note may be written to: a file, ending in `.md`.
pub fn normalize_note(input: &str) -> Result<String, MemoryError> {
    let path = normalize(input, false)?;
    if !path.ends_with(".md") {
        return Err(MemoryError::InvalidPath {
            path: shorten(input),
            reason: "notes are Markdown files: end the name with `.md`".into(),
        });
    }
    Ok(path)
}

/// Whether a workspace-relative path is a memory note (for the file tools' interceptor).
pub fn is_memory_path(rel: &str) -> bool {
    rel == "MEMORY.md" || rel == "memory.md" || (rel.starts_with("memory/") && rel.ends_with(".md"))
}

fn shorten(s: &str) -> String {
    let mut out: String = s.chars().filter(|c| !c.is_control()).take(120).collect();
    if out.len() < s.len() {
        out.push_str("...");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepted_and_normalized() {
        assert_eq!(normalize("MEMORY.md", false).unwrap(), "MEMORY.md");
        assert_eq!(normalize("./memory//daily/2026-01-02.md", false).unwrap(), "memory/daily/2026-01-02.md");
        assert_eq!(normalize("memory", true).unwrap(), "memory");
        assert_eq!(normalize("", true).unwrap(), "");
    }

    #[test]
    fn escapes_and_identity_files_are_refused() {
        for bad in [
            "../etc/passwd",
            "memory/../../x.md",
            "/etc/passwd",
            "memory/.git/config",
            "SOUL.md",
            "IDENTITY.md",
            "notes.md",
            "memory\\x.md",
            "memory/a\0.md",
            "~/.ssh/id_rsa",
            "memory",
            "",
        ] {
            assert!(normalize(bad, false).is_err(), "{bad:?}");
        }
        let err = normalize("SOUL.md", false).unwrap_err().to_string();
        assert!(err.contains("identity file"), "{err}");
        assert!(normalize_note("memory/x.txt").is_err());
    }
}
