//! Path rules: denied paths (invisible and refused) and instruction files (writes need approval).

use globset::{Glob, GlobBuilder, GlobSet, GlobSetBuilder};

use super::config::FsConfig;

/// Always denied for reading and writing: toolgate's own state.
const ALWAYS_DENIED: &[&str] = &[".toolgate"];
/// Always denied for writing: code that runs on git operations, and toolgate's config.
const ALWAYS_DENIED_WRITES: &[&str] = &[".git/hooks", ".git/config", "toolgate.toml"];

/// Compiled path rules.
#[derive(Debug)]
pub(crate) struct PathRules {
    denied: GlobSet,
    denied_writes: GlobSet,
    instruction: GlobSet,
    instruction_names: Vec<String>,
}

/// Why a glob in the configuration is invalid.
#[derive(Debug)]
pub(crate) struct BadGlob {
    pub(crate) glob: String,
    pub(crate) error: globset::Error,
}

fn glob(pattern: &str) -> Result<Glob, BadGlob> {
    GlobBuilder::new(pattern)
        .literal_separator(true)
        .build()
        .map_err(|error| BadGlob { glob: pattern.to_owned(), error })
}

/// Adds `pattern` and everything beneath it; a pattern without `/` matches at any depth.
fn add_tree(b: &mut GlobSetBuilder, pattern: &str) -> Result<(), BadGlob> {
    let p = pattern.trim_start_matches("./").trim_end_matches('/');
    let p = p
        .strip_prefix('/')
        .map(str::to_owned)
        .unwrap_or_else(|| if p.contains('/') || p.starts_with("**") { p.to_owned() } else { format!("**/{p}") });
    b.add(glob(&p)?);
    b.add(glob(&format!("{p}/**"))?);
    Ok(())
}

impl PathRules {
    /// Compiles the rules of `config`.
    pub(crate) fn new(config: &FsConfig) -> Result<PathRules, BadGlob> {
        let mut denied = GlobSetBuilder::new();
        for p in ALWAYS_DENIED {
            add_tree(&mut denied, &format!("/{p}"))?;
        }
        for p in &config.denied {
            add_tree(&mut denied, p)?;
        }
        let mut denied_writes = GlobSetBuilder::new();
        for p in ALWAYS_DENIED_WRITES {
            add_tree(&mut denied_writes, &format!("/{p}"))?;
        }
        for p in &config.denied_writes {
            add_tree(&mut denied_writes, p)?;
        }
        let mut instruction = GlobSetBuilder::new();
        let mut instruction_names = Vec::new();
        for p in &config.instruction_files {
            if p.contains('/') || p.contains('*') || p.contains('?') || p.contains('[') {
                instruction.add(glob(p.trim_start_matches("./"))?);
            } else {
                instruction_names.push(p.to_lowercase());
            }
        }
        let build = |b: GlobSetBuilder| b.build().map_err(|error| BadGlob { glob: "(set)".to_owned(), error });
        Ok(PathRules {
            denied: build(denied)?,
            denied_writes: build(denied_writes)?,
            instruction: build(instruction)?,
            instruction_names,
        })
    }

    /// Whether `rel` (workspace-relative, normalized) is hidden and refused for every access.
    pub(crate) fn denied(&self, rel: &str) -> bool {
        !rel.is_empty() && self.denied.is_match(rel)
    }

    /// Whether `rel` is refused for writing.
    pub(crate) fn denied_write(&self, rel: &str) -> bool {
        self.denied(rel) || (!rel.is_empty() && self.denied_writes.is_match(rel))
    }

    /// Whether `rel` is an instruction file agents load into their prompts.
    pub(crate) fn instruction_file(&self, rel: &str) -> bool {
        let name = rel.rsplit('/').next().unwrap_or(rel).to_lowercase();
        self.instruction_names.contains(&name) || self.instruction.is_match(rel)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_rules() {
        let mut config = FsConfig::default();
        config.denied.push("*.pem".to_owned());
        config.denied.push("secrets/".to_owned());
        let r = PathRules::new(&config).map_err(|b| b.glob).unwrap_or_else(|g| panic!("bad glob {g}"));
        assert!(r.denied(".toolgate"));
        assert!(r.denied(".toolgate/db.sqlite"));
        assert!(!r.denied("a/.toolgate"));
        assert!(!r.denied(".toolgateX"));
        assert!(r.denied("a/b/key.pem"));
        assert!(r.denied("secrets/x/y"));
        assert!(!r.denied(".git/config"));
        assert!(r.denied_write(".git/config"));
        assert!(r.denied_write(".git/hooks/pre-commit"));
        assert!(r.denied_write("toolgate.toml"));
        assert!(!r.denied_write("sub/toolgate.toml"));
        assert!(r.instruction_file("CLAUDE.md"));
        assert!(r.instruction_file("docs/agents.md"));
        assert!(r.instruction_file(".github/copilot-instructions.md"));
        assert!(!r.instruction_file("README.md"));
    }
}
