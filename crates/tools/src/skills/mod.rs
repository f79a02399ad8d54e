//! Skills in the Agent Skills format: a folder with a `SKILL.md` (YAML front matter, then
//! Markdown instructions) and the scripts and resources it mentions.
//!
//! Skills are found in the workspace's `skills/` and `.agents/skills/` folders and in the
//! user's skills folder (`$XDG_CONFIG_HOME/toolgate/skills`); a workspace skill overrides a
//! user skill of the same name, with a warning. They are read again on every call, so a new
//! or edited skill is seen at once.
//!
//! Progressive disclosure: `skill_list` gives names and descriptions, `skill_read` the body and
//! the list of bundled files, `skill_search` ranks skills by BM25 over name, description and
//! body, fused with a search by meaning when an embedding model is configured (`search`).
//! `skill_install` copies a skill folder from the workspace into `.agents/skills/` after
//! validating it and scanning it for supply-chain tricks (approval every time);
//! `skill_remove` deletes an installed one (approval every time).
//!
//! A skill may declare shell-template tools in its front matter (`tools:`, the same fields as
//! `[[tools.custom]]`); they are registered after the built-ins with the same rendering and
//! checks as custom tools ([`crate::custom`]), in group `skill:NAME`, running in the skill's
//! folder.
//!
//! The front matter is parsed with `serde-saphyr` (no `unsafe`, parse budgets) after a size
//! cap; `name` is 1–64 of `a-z0-9-` and equals the folder's name, `description` at most 1,024
//! characters.

mod archive;
mod scan;
mod search;
mod tools;

use std::collections::{BTreeMap, HashMap};
use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::SystemTime;

use serde::Deserialize;

pub use scan::{Finding, scan_skill};
pub use toolgate_core::bm25::Bm25;
pub use tools::tools;

use crate::custom::CustomToolDef;

/// Largest `SKILL.md` read, in bytes.
pub const MAX_SKILL_MD_BYTES: u64 = 512 * 1024;

/// Largest front matter parsed, in bytes.
pub const MAX_FRONT_MATTER_BYTES: usize = 64 * 1024;

/// Skills read from one folder at most.
pub const MAX_SKILLS_PER_DIR: usize = 2_000;

/// The workspace folders skills are found in, in order of precedence.
pub const WORKSPACE_DIRS: &[&str] = &[".agents/skills", "skills"];

/// Where installed skills go, relative to the workspace.
pub const INSTALL_DIR: &str = ".agents/skills";

/// Why a skill could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SkillError {
    /// The skill is not valid; `message` says why and what to fix.
    #[error("skill at {}: {message}", path.display())]
    Invalid {
        /// The skill's folder.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
}

/// Where a skill was found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SkillSource {
    /// In the workspace.
    Workspace,
    /// In the user's skills folder.
    User,
}

/// The front matter, as written.
#[derive(Debug, Deserialize)]
struct FrontMatter {
    name: String,
    description: String,
    #[serde(default)]
    license: Option<String>,
    #[serde(default)]
    compatibility: Option<String>,
    #[serde(default)]
    metadata: BTreeMap<String, String>,
    #[serde(default, rename = "allowed-tools")]
    allowed_tools: Option<String>,
    #[serde(default)]
    tools: Vec<CustomToolDef>,
}

/// One skill.
#[derive(Debug, Clone)]
pub struct Skill {
    /// `a-z0-9-`, the folder's name.
    pub name: String,
    /// What it is for and when to use it.
    pub description: String,
    /// Its license, if given.
    pub license: Option<String>,
    /// What it needs from the environment, if given.
    pub compatibility: Option<String>,
    /// Extra string properties.
    pub metadata: BTreeMap<String, String>,
    /// The tools the skill says it uses (`allowed-tools`, space-separated).
    pub allowed_tools: Vec<String>,
    /// Shell-template tools the skill declares.
    pub tools: Vec<CustomToolDef>,
    /// The Markdown after the front matter.
    pub body: String,
    /// The skill's folder (absolute).
    pub dir: PathBuf,
    /// Where it was found.
    pub source: SkillSource,
}

/// Whether `name` is a valid skill name: 1–64 of `a-z0-9-`, no leading, trailing or double `-`.
pub fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && name.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !name.starts_with('-')
        && !name.ends_with('-')
        && !name.contains("--")
}

/// Splits `text` into front matter and body.
fn split_front_matter(text: &str) -> Option<(&str, &str)> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let rest = text.strip_prefix("---\n").or_else(|| text.strip_prefix("---\r\n"))?;
    let mut offset = 0;
    for line in rest.split_inclusive('\n') {
        if line.trim_end() == "---" {
            return Some((&rest[..offset], &rest[offset + line.len()..]));
        }
        offset += line.len();
    }
    None
}

/// Parses a `SKILL.md`'s text for the skill in `dir`.
pub fn parse_skill(dir: &Path, text: &str, source: SkillSource) -> Result<Skill, SkillError> {
    let bad = |message: String| SkillError::Invalid { path: dir.to_path_buf(), message };
    let (yaml, body) = split_front_matter(text).ok_or_else(|| {
        bad("SKILL.md must start with YAML front matter between `---` lines (with `name` and `description`)".into())
    })?;
    if yaml.len() > MAX_FRONT_MATTER_BYTES {
        return Err(bad(format!("the front matter is {} bytes; at most {MAX_FRONT_MATTER_BYTES}", yaml.len())));
    }
    let options = serde_saphyr::options! {
        budget: serde_saphyr::budget! { max_events: 50_000, max_aliases: 0, max_anchors: 0 },
    };
    let fm: FrontMatter = serde_saphyr::from_str_with_options(yaml, options)
        .map_err(|e| bad(format!("invalid front matter: {}", first_line(&e.to_string()))))?;
    let folder = dir.file_name().and_then(|n| n.to_str()).unwrap_or_default();
    if !valid_name(&fm.name) {
        return Err(bad(format!(
            "`name` must be 1 to 64 of a-z, 0-9 and single inner `-` (got {:?})",
            fm.name.chars().take(80).collect::<String>()
        )));
    }
    if fm.name != folder {
        return Err(bad(format!("`name` is `{}` but the folder is `{folder}`; they must be equal", fm.name)));
    }
    let chars = fm.description.chars().count();
    if fm.description.trim().is_empty() || chars > 1024 {
        return Err(bad(format!("`description` must be 1 to 1024 characters (got {chars})")));
    }
    for def in &fm.tools {
        def.validate().map_err(|e| bad(format!("declared tool: {e}")))?;
    }
    Ok(Skill {
        name: fm.name,
        description: fm.description,
        license: fm.license,
        compatibility: fm.compatibility,
        metadata: fm.metadata,
        allowed_tools: fm.allowed_tools.map(|t| t.split_whitespace().map(str::to_owned).collect()).unwrap_or_default(),
        tools: fm.tools,
        body: body.to_owned(),
        dir: dir.to_path_buf(),
        source,
    })
}

fn first_line(s: &str) -> String {
    s.lines().next().unwrap_or_default().chars().take(300).collect()
}

/// Reads the skill in `dir` (which must hold a plain-file `SKILL.md`).
pub fn read_skill(dir: &Path, source: SkillSource) -> Result<Skill, SkillError> {
    let bad = |message: String| SkillError::Invalid { path: dir.to_path_buf(), message };
    let md = dir.join("SKILL.md");
    let meta = std::fs::symlink_metadata(&md).map_err(|e| bad(format!("no SKILL.md: {e}")))?;
    if !meta.is_file() {
        return Err(bad("SKILL.md is not a plain file (a symbolic link?)".into()));
    }
    if meta.len() > MAX_SKILL_MD_BYTES {
        return Err(bad(format!("SKILL.md is {} bytes; at most {MAX_SKILL_MD_BYTES}", meta.len())));
    }
    let text = std::fs::read_to_string(&md).map_err(|e| bad(format!("cannot read SKILL.md: {e}")))?;
    parse_skill(dir, &text, source)
}

/// The user's skills folder: `$XDG_CONFIG_HOME/toolgate/skills` (or `~/.config/...`).
pub fn user_dir() -> Option<PathBuf> {
    std::env::var_os("TOOLGATE_SKILLS_DIR").map(PathBuf::from).or_else(|| {
        std::env::var_os("XDG_CONFIG_HOME")
            .map(PathBuf::from)
            .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".config")))
            .map(|d| d.join("toolgate/skills"))
    })
}

/// `SKILL.md` files parsed at most once per (modification time, length): a listing of a
/// thousand skills then costs a thousand `stat`s, not a thousand YAML parses.
type Parsed = HashMap<PathBuf, (SystemTime, u64, SkillSource, Result<Skill, String>)>;
static PARSED: Mutex<Option<Parsed>> = Mutex::new(None);
/// Entries kept at most; past this the memo starts over.
const MAX_PARSED: usize = 20_000;

/// [`read_skill`] through the memo.
fn read_skill_memo(dir: &Path, source: SkillSource) -> Result<Skill, String> {
    let md = dir.join("SKILL.md");
    let Ok(meta) = std::fs::symlink_metadata(&md) else {
        return read_skill(dir, source).map_err(|e| e.to_string());
    };
    let (mtime, len) = (meta.modified().unwrap_or(SystemTime::UNIX_EPOCH), meta.len());
    let mut memo = PARSED.lock().unwrap_or_else(|e| e.into_inner());
    let memo = memo.get_or_insert_with(HashMap::new);
    // Invalid skills are remembered too: their warning comes back without a new parse.
    if let Some((t, l, s, parsed)) = memo.get(&md)
        && (*t, *l, *s) == (mtime, len, source)
    {
        return parsed.clone();
    }
    let parsed = read_skill(dir, source).map_err(|e| e.to_string());
    if memo.len() >= MAX_PARSED {
        memo.clear();
    }
    memo.insert(md, (mtime, len, source, parsed.clone()));
    parsed
}

/// A stamp of every skill folder's `SKILL.md` (path, modification time, length) in the places
/// [`discover`] looks: it changes whenever a skill is added, edited or removed. Only `stat`s:
/// what a search index built from the skills is cached by.
pub fn skills_stamp(workspace: &Path, user: Option<&Path>) -> u64 {
    let mut stamp = std::collections::hash_map::DefaultHasher::new();
    let roots = user.map(Path::to_path_buf).into_iter().chain(WORKSPACE_DIRS.iter().rev().map(|r| workspace.join(r)));
    for root in roots {
        root.hash(&mut stamp);
        let Ok(entries) = std::fs::read_dir(&root) else { continue };
        for entry in entries.flatten().take(MAX_SKILLS_PER_DIR) {
            if !entry.file_type().is_ok_and(|t| t.is_dir()) {
                continue;
            }
            let md = entry.path().join("SKILL.md");
            if let Ok(meta) = std::fs::symlink_metadata(&md) {
                (&md, meta.modified().unwrap_or(SystemTime::UNIX_EPOCH), meta.len()).hash(&mut stamp);
            }
        }
    }
    stamp.finish()
}

/// Every skill visible from `workspace`, by name, and warnings (invalid skills, overrides).
pub fn discover(workspace: &Path, user: Option<&Path>) -> (Vec<Skill>, Vec<String>) {
    let mut found: BTreeMap<String, Skill> = BTreeMap::new();
    let mut warnings = Vec::new();
    let mut roots: Vec<(PathBuf, SkillSource)> = Vec::new();
    if let Some(u) = user {
        roots.push((u.to_path_buf(), SkillSource::User));
    }
    // Lowest precedence first: later roots replace earlier ones.
    for rel in WORKSPACE_DIRS.iter().rev() {
        roots.push((workspace.join(rel), SkillSource::Workspace));
    }
    for (root, source) in roots {
        let Ok(entries) = std::fs::read_dir(&root) else { continue };
        for entry in entries.flatten().take(MAX_SKILLS_PER_DIR) {
            // Symbolic links are not followed: a skill folder must really be here.
            if !entry.file_type().is_ok_and(|t| t.is_dir()) {
                continue;
            }
            match read_skill_memo(&entry.path(), source) {
                Ok(skill) => {
                    if let Some(old) = found.get(&skill.name)
                        && old.source == SkillSource::User
                        && source == SkillSource::Workspace
                    {
                        warnings.push(format!(
                            "workspace skill `{}` overrides the user skill in {}",
                            skill.name,
                            old.dir.display()
                        ));
                    }
                    found.insert(skill.name.clone(), skill);
                }
                Err(e) => warnings.push(e),
            }
        }
    }
    (found.into_values().collect(), warnings)
}

/// Every file in a skill's folder, relative to it, sorted (at most `limit`).
pub fn bundled_files(dir: &Path, limit: usize) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else { continue };
        for e in entries.flatten() {
            if out.len() >= limit {
                break;
            }
            let Ok(t) = e.file_type() else { continue };
            let p = e.path();
            if t.is_dir() {
                stack.push(p);
            } else if t.is_file()
                && let Ok(rel) = p.strip_prefix(dir)
            {
                out.push(rel.to_string_lossy().into_owned());
            }
        }
    }
    out.sort();
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn discovery_and_its_stamp_follow_edits() {
        let ws = tempfile::tempdir().unwrap();
        let write = |name: &str, description: &str| {
            let dir = ws.path().join("skills").join(name);
            std::fs::create_dir_all(&dir).unwrap();
            std::fs::write(
                dir.join("SKILL.md"),
                format!("---\nname: {name}\ndescription: {description}\n---\nBody.\n"),
            )
            .unwrap();
        };
        write("alpha", "first");
        write("beta", "second");
        let (skills, _) = discover(ws.path(), None);
        assert_eq!(skills.len(), 2);
        let stamp = skills_stamp(ws.path(), None);
        assert_eq!(skills_stamp(ws.path(), None), stamp, "nothing changed");
        write("beta", "second, edited");
        let (skills, _) = discover(ws.path(), None);
        let edited = skills_stamp(ws.path(), None);
        assert_ne!(edited, stamp, "the stamp follows an edit");
        assert_eq!(skills.iter().find(|s| s.name == "beta").unwrap().description, "second, edited");
        std::fs::remove_dir_all(ws.path().join("skills/alpha")).unwrap();
        let (skills, _) = discover(ws.path(), None);
        let removed = skills_stamp(ws.path(), None);
        assert_eq!((skills.len(), removed != edited), (1, true));
    }

    #[test]
    fn front_matter_is_checked() {
        let dir = Path::new("/tmp/x/pdf");
        let ok = "---\nname: pdf\ndescription: Extract text.\nallowed-tools: Bash(pdftotext:*) Read\n---\n# Use\n";
        let s = parse_skill(dir, ok, SkillSource::Workspace).unwrap();
        assert_eq!(s.allowed_tools, ["Bash(pdftotext:*)", "Read"]);
        assert_eq!(s.body, "# Use\n");
        for (text, want) in [
            ("# no front matter\n", "front matter"),
            ("---\nname: other\ndescription: d\n---\n", "folder is `pdf`"),
            ("---\nname: Pdf\ndescription: d\n---\n", "`name`"),
            (&format!("---\nname: pdf\ndescription: {}\n---\n", "x".repeat(1025)), "1024"),
            ("---\nname: pdf\ndescription: [unclosed\n---\n", "invalid front matter"),
            ("---\nname: pdf\ndescription: d\n", "front matter"),
        ] {
            let err = parse_skill(dir, text, SkillSource::Workspace).unwrap_err().to_string();
            assert!(err.contains(want), "{text:?}: {err}");
        }
    }

    #[test]
    fn anchors_and_aliases_are_refused() {
        let dir = Path::new("/tmp/x/pdf");
        let bomb = "---\nname: pdf\ndescription: &a d\nlicense: *a\n---\n";
        assert!(parse_skill(dir, bomb, SkillSource::Workspace).is_err());
    }
}
