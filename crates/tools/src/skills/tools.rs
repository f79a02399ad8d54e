//! `skill_list`, `skill_read`, `skill_search`, `skill_install`, `skill_remove`.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use toolgate_core::{
    Annotations, ApprovalRequirement, CallContext, CallSafety, Tool, ToolError, ToolOutput, ToolSpec, Touches,
    async_trait,
};

use toolgate_fetch::{Fetcher, Request};
use toolgate_store::EmbeddingCache;
use toolgate_store::memory::Embedder;

use super::archive;
use super::search::SkillVectors;
use super::{INSTALL_DIR, Skill, SkillSource, bundled_files, discover, read_skill, scan_skill, user_dir};

/// Caps on a skill being installed.
const MAX_FILES: usize = 256;
const MAX_FILE_BYTES: u64 = 2 * 1024 * 1024;
const MAX_TOTAL_BYTES: u64 = 20 * 1024 * 1024;
/// Cap on an archive, downloaded or read from the workspace.
const MAX_ARCHIVE_BYTES: u64 = 10 * 1024 * 1024;

/// The five skill tools (group `skills`). `skill_install` downloads archives from https URLs
/// through `fetcher`, the web tools' SSRF-safe fetcher ([`crate::web::fetcher`]);
/// `skill_search` also ranks by meaning with `embedder` (the memory tools' model), if any,
/// keeping the skills' vectors in `cache` (the state database), if any.
pub fn tools(
    fetcher: &Fetcher,
    embedder: Option<Arc<dyn Embedder>>,
    cache: Option<Arc<dyn EmbeddingCache>>,
) -> Vec<Arc<dyn Tool>> {
    let vectors = embedder.map(|e| Arc::new(SkillVectors::new(e, cache)));
    [Kind::List, Kind::Read, Kind::Search, Kind::Install, Kind::Remove]
        .into_iter()
        .map(|kind| {
            let mut tool = SkillTool::new(kind, fetcher.clone());
            if kind == Kind::Search {
                tool.vectors = vectors.clone();
            }
            Arc::new(tool) as Arc<dyn Tool>
        })
        .collect()
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    List,
    Read,
    Search,
    Install,
    Remove,
}

/// One of the skill tools.
#[derive(Debug)]
struct SkillTool {
    kind: Kind,
    spec: ToolSpec,
    fetcher: Fetcher,
    /// `skill_install`: skills staged and scanned by `inspect` before the approval, by call id,
    /// installed by `execute` from that very copy.
    staged: Mutex<HashMap<String, (Instant, Staged)>>,
    /// `skill_search`: the search by meaning, when an embedder is configured.
    vectors: Option<Arc<SkillVectors>>,
}

/// How long a staged skill waits for its approval.
const STAGED_TTL: Duration = Duration::from_secs(15 * 60);

/// A skill copied into a private temporary folder, validated and scanned.
#[derive(Debug)]
struct Staged {
    /// Keeps the folder alive.
    _tmp: tempfile::TempDir,
    dir: PathBuf,
    skill: Skill,
    files: Vec<PathBuf>,
    findings: Vec<super::Finding>,
    /// Where it came from, for messages.
    from: String,
}

fn name_param() -> Value {
    json!({"type": "string", "pattern": "^[a-z0-9]+(-[a-z0-9]+)*$", "maxLength": 64, "description": "The skill's name."})
}

impl SkillTool {
    fn new(kind: Kind, fetcher: Fetcher) -> Self {
        let (name, description, schema, annotations) = match kind {
            Kind::List => (
                "skill_list",
                "List the available skills (name and description; with `verbose`, also where each comes from, its \
                 folder, license, compatibility and allowed tools). Read one with `skill_read` before following it.",
                json!({"type": "object", "properties": {
                    "verbose": {"type": "boolean", "description": "Also each skill's source, folder, license, compatibility and allowed tools (default false)."}
                }, "additionalProperties": false}),
                Annotations::READ_ONLY,
            ),
            Kind::Read => (
                "skill_read",
                "Return a skill's instructions (SKILL.md after its front matter) and the list of files bundled with \
                 it. Run bundled scripts with `exec`.",
                json!({"type": "object", "properties": {"name": name_param()}, "required": ["name"], "additionalProperties": false}),
                Annotations::READ_ONLY,
            ),
            Kind::Search => (
                "skill_search",
                "Find skills relevant to a task, ranked by BM25 over their name, description and instructions, \
                 fused with a search by meaning when an embedding model is configured.",
                json!({"type": "object", "properties": {
                    "query": {"type": "string", "minLength": 1, "maxLength": 1000},
                    "limit": {"type": "integer", "minimum": 1, "maximum": 50}
                }, "required": ["query"], "additionalProperties": false}),
                Annotations::READ_ONLY,
            ),
            Kind::Install => (
                "skill_install",
                "Install a skill into `.agents/skills/NAME` from a folder or a .zip/.tar.gz archive in the \
                 workspace (`path`) or an archive at an https URL (`url`), after validating its SKILL.md and \
                 scanning it for supply-chain tricks. Needs a person's approval.",
                json!({"type": "object", "properties": {
                    "path": {"type": "string", "minLength": 1, "description": "The skill's folder or archive, relative to the workspace."},
                    "url": {"type": "string", "minLength": 1, "maxLength": 2048, "description": "An https URL of a .zip or .tar.gz archive of the skill (instead of `path`)."},
                    "replace": {"type": "boolean", "description": "Replace an installed skill of the same name (default false)."}
                }, "additionalProperties": false}),
                Annotations::LOCAL_WRITE,
            ),
            Kind::Remove => (
                "skill_remove",
                "Remove a skill installed in `.agents/skills/`. Needs a person's approval.",
                json!({"type": "object", "properties": {"name": name_param()}, "required": ["name"], "additionalProperties": false}),
                Annotations::LOCAL_DESTRUCTIVE,
            ),
        };
        SkillTool {
            kind,
            spec: ToolSpec::new(name, description, schema).group("skills").annotations(annotations),
            fetcher,
            staged: Mutex::new(HashMap::new()),
            vectors: None,
        }
    }
}

fn str_param<'a>(tool: &str, params: &'a Value, key: &str) -> Result<&'a str, ToolError> {
    params
        .get(key)
        .and_then(Value::as_str)
        .ok_or_else(|| ToolError::invalid(tool, format!("/{key}"), format!("`{key}` is required")))
}

fn find(tool: &str, workspace: &Path, name: &str) -> Result<Skill, ToolError> {
    let (skills, _) = discover(workspace, user_dir().as_deref());
    skills.into_iter().find(|s| s.name == name).ok_or_else(|| ToolError::NotFound {
        what: format!("skill `{name}`"),
        hint: Some(format!("list the skills with `skill_list` or `skill_search` (called from `{tool}`)")),
    })
}

fn source_word(s: SkillSource) -> &'static str {
    match s {
        SkillSource::Workspace => "workspace",
        SkillSource::User => "user",
    }
}

#[async_trait]
impl Tool for SkillTool {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    fn safety(&self, params: &Value) -> CallSafety {
        match self.kind {
            Kind::Install => {
                let path = params.get("path").and_then(Value::as_str);
                let url = params.get("url").and_then(Value::as_str);
                let from = match (path, url) {
                    (_, Some(url)) => format!("downloaded from {url}"),
                    (Some(path), None) => format!("in `{path}`"),
                    (None, None) => "(no source given)".to_owned(),
                };
                CallSafety {
                    approval: ApprovalRequirement::Always,
                    approval_reason: Some(
                        "installing a skill adds instructions and tools the model will follow".into(),
                    ),
                    approval_subject: Some(format!("install the skill {from} into {INSTALL_DIR}/")),
                    inspect: true,
                    touches: Touches {
                        reads: path.map(str::to_owned).into_iter().collect(),
                        writes: vec![INSTALL_DIR.to_owned()],
                        hosts: url.map(crate::web::host_of).unwrap_or_default(),
                        ..Touches::default()
                    },
                    ..CallSafety::default()
                }
            }
            Kind::Remove => {
                let name = params.get("name").and_then(Value::as_str).unwrap_or_default();
                CallSafety {
                    approval: ApprovalRequirement::Always,
                    approval_reason: Some("removing a skill deletes its folder".into()),
                    approval_subject: Some(format!("remove {INSTALL_DIR}/{name}")),
                    touches: Touches { writes: vec![format!("{INSTALL_DIR}/{name}")], ..Touches::default() },
                    ..CallSafety::default()
                }
            }
            _ => CallSafety { read_only: true, ..CallSafety::default() },
        }
    }

    /// `skill_install`: downloads (for a `url`), copies or unpacks the skill into a private
    /// folder, validates and scans it, so the approval request shows what the scan found; a
    /// blocking finding refuses the install before anyone is asked.
    async fn inspect(&self, ctx: &CallContext, params: &Value) -> Result<Vec<String>, ToolError> {
        if self.kind != Kind::Install {
            return Ok(Vec::new());
        }
        let staged = self.stage(ctx, params).await?;
        let mut notes = vec![format!(
            "the skill `{}` from {}: {} files; {}",
            staged.skill.name,
            staged.from,
            staged.files.len(),
            clip_line(&staged.skill.description, 300)
        )];
        if staged.findings.is_empty() {
            notes.push("supply-chain scan: nothing found".to_owned());
        } else {
            notes.push("supply-chain scan found (not blocking):".to_owned());
            notes.extend(staged.findings.iter().take(20).map(|f| format!("  {}:{}: {}", f.file, f.line, f.what)));
        }
        let mut map = self.staged.lock().unwrap_or_else(|e| e.into_inner());
        map.retain(|_, (at, _)| at.elapsed() < STAGED_TTL);
        map.insert(ctx.call_id.clone(), (Instant::now(), staged));
        Ok(notes)
    }

    async fn execute(&self, ctx: &CallContext, params: Value) -> Result<ToolOutput, ToolError> {
        let workspace = ctx.workspace.to_path_buf();
        let name = self.spec.name.clone();
        let kind = self.kind;
        if kind == Kind::Install {
            let taken = self.staged.lock().unwrap_or_else(|e| e.into_inner()).remove(&ctx.call_id);
            // Staged and shown before the approval (the gate inspects every install): what is
            // there now was not what the person saw.
            let Some((_, staged)) = taken else {
                return Err(ToolError::failed(format!(
                    "the skill checked before the approval is gone (kept {} minutes), so nothing was installed; call \
                     `skill_install` again",
                    STAGED_TTL.as_secs() / 60
                )));
            };
            let replace = params.get("replace").and_then(Value::as_bool).unwrap_or(false);
            return tokio::task::spawn_blocking(move || install_staged(&workspace, staged, replace))
                .await
                .map_err(|e| ToolError::failed(format!("the skill task failed: {e}")))?;
        }
        // Folder walks, deletions and the embedding model block.
        let vectors = self.vectors.clone();
        tokio::task::spawn_blocking(move || run(kind, &name, &workspace, &params, vectors.as_deref()))
            .await
            .map_err(|e| ToolError::failed(format!("the skill task failed: {e}")))?
    }
}

impl SkillTool {
    /// The skill of a `skill_install` call, staged: downloaded or read, unpacked or copied into a
    /// private temporary folder, validated and scanned; a blocking finding refuses it.
    async fn stage(&self, ctx: &CallContext, params: &Value) -> Result<Staged, ToolError> {
        let tool = self.spec.name.clone();
        let download = match (params.get("url").and_then(Value::as_str), params.get("path")) {
            (Some(_), Some(_)) => return Err(ToolError::invalid(&tool, "/url", "give `path` or `url`, not both")),
            (Some(url), None) => Some((url.to_owned(), self.download(ctx, url).await?)),
            _ => None,
        };
        let workspace = ctx.workspace.to_path_buf();
        let params = params.clone();
        tokio::task::spawn_blocking(move || stage(&tool, &workspace, &params, download))
            .await
            .map_err(|e| ToolError::failed(format!("the skill task failed: {e}")))?
    }

    /// An archive from an https URL, through the SSRF-safe fetcher, at most
    /// [`MAX_ARCHIVE_BYTES`] (decoded).
    async fn download(&self, ctx: &CallContext, url: &str) -> Result<Vec<u8>, ToolError> {
        let mut request = Request::get(url);
        request.require_https = true;
        request.max_bytes = Some(MAX_ARCHIVE_BYTES);
        request.progress = crate::web::download_progress(ctx);
        let resp = self
            .fetcher
            .fetch(request, &ctx.cancel)
            .await
            .map_err(|e| ToolError::failed(format!("cannot download the skill from {url}: {e}")))?;
        if resp.status != 200 {
            return Err(ToolError::failed(format!("cannot download the skill: {url} answered HTTP {}", resp.status)));
        }
        Ok(resp.body)
    }
}

fn run(
    kind: Kind,
    tool: &str,
    workspace: &Path,
    params: &Value,
    vectors: Option<&SkillVectors>,
) -> Result<ToolOutput, ToolError> {
    match kind {
        Kind::List => {
            let (skills, warnings) = discover(workspace, user_dir().as_deref());
            let mut text = String::new();
            if skills.is_empty() {
                text.push_str("no skills found (they live in skills/, .agents/skills/ or the user's skills folder)\n");
            }
            let verbose = params.get("verbose").and_then(Value::as_bool).unwrap_or(false);
            for s in &skills {
                text.push_str(&format!("{}: {}\n", s.name, s.description.replace('\n', " ")));
                if verbose {
                    text.push_str(&format!("  source: {}", source_word(s.source)));
                    if let Ok(rel) = s.dir.strip_prefix(workspace) {
                        text.push_str(&format!(", folder: {}", rel.display()));
                    }
                    for (label, value) in [("license", &s.license), ("compatibility", &s.compatibility)] {
                        if let Some(value) = value {
                            text.push_str(&format!(", {label}: {}", value.replace('\n', " ")));
                        }
                    }
                    if !s.allowed_tools.is_empty() {
                        text.push_str(&format!(", allowed tools: {}", s.allowed_tools.join(" ")));
                    }
                    text.push('\n');
                }
            }
            for w in &warnings {
                text.push_str(&format!("warning: {w}\n"));
            }
            let list: Vec<Value> = skills
                .iter()
                .map(|s| json!({"name": s.name, "description": s.description, "source": source_word(s.source)}))
                .collect();
            Ok(ToolOutput::text(text).with_meta(json!({"skills": list, "warnings": warnings})))
        }
        Kind::Read => {
            let skill = find(tool, workspace, str_param(tool, params, "name")?)?;
            let files = bundled_files(&skill.dir, 500);
            let mut text = format!("# skill {}\n{}\n", skill.name, skill.description);
            if !skill.allowed_tools.is_empty() {
                text.push_str(&format!("allowed tools: {}\n", skill.allowed_tools.join(" ")));
            }
            if let Ok(rel) = skill.dir.strip_prefix(workspace) {
                text.push_str(&format!("folder: {}\n", rel.display()));
            }
            text.push_str(&format!("files: {}\n\n{}", files.join(", "), skill.body));
            Ok(ToolOutput::text(text).with_meta(json!({
                "name": skill.name, "files": files, "allowed_tools": skill.allowed_tools,
                "tools": skill.tools.iter().map(|t| t.name.clone()).collect::<Vec<_>>(),
            })))
        }
        Kind::Search => {
            let query = str_param(tool, params, "query")?;
            let limit = params.get("limit").and_then(Value::as_u64).unwrap_or(5).clamp(1, 50) as usize;
            Ok(super::search::search(workspace, user_dir().as_deref(), query, limit, vectors))
        }
        Kind::Install => Err(ToolError::failed(format!("`{tool}` is run by its own path"))),
        Kind::Remove => {
            let name = str_param(tool, params, "name")?;
            if !super::valid_name(name) {
                return Err(ToolError::invalid(tool, "/name", "skill names are a-z, 0-9 and `-`"));
            }
            let dir = workspace.join(INSTALL_DIR).join(name);
            let meta = std::fs::symlink_metadata(&dir).map_err(|_| ToolError::NotFound {
                what: format!("installed skill `{name}` in {INSTALL_DIR}/"),
                hint: Some("skills under skills/ are part of the project: edit them as files".into()),
            })?;
            if !meta.is_dir() {
                return Err(ToolError::failed(format!(
                    "{INSTALL_DIR}/{name} is not a folder; ask the user to look at it"
                )));
            }
            std::fs::remove_dir_all(&dir)
                .map_err(|e| ToolError::failed(format!("cannot remove {INSTALL_DIR}/{name}: {e}")))?;
            Ok(ToolOutput::text(format!("removed skill `{name}`")))
        }
    }
}

/// The source folder of an install: inside the workspace, not in `.toolgate/`.
fn confined_source(tool: &str, workspace: &Path, path: &str) -> Result<PathBuf, ToolError> {
    let real = workspace.join(path).canonicalize().map_err(|e| ToolError::NotFound {
        what: format!("folder `{path}`"),
        hint: Some(format!("{e}; give the skill's folder relative to the workspace")),
    })?;
    if !real.starts_with(workspace) || real.starts_with(workspace.join(".toolgate")) {
        return Err(ToolError::invalid(tool, "/path", format!("`{path}` is outside the workspace")));
    }
    if !real.is_dir() && !real.is_file() {
        return Err(ToolError::invalid(tool, "/path", format!("`{path}` is neither a folder nor a file")));
    }
    Ok(real)
}

/// Every entry of `dir`, checked against the caps: plain files and folders only.
fn checked_files(tool: &str, dir: &Path) -> Result<Vec<PathBuf>, ToolError> {
    let mut files = Vec::new();
    let mut total = 0u64;
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let entries =
            std::fs::read_dir(&d).map_err(|e| ToolError::failed(format!("cannot list {}: {e}", d.display())))?;
        for e in entries.flatten() {
            let t = e
                .file_type()
                .map_err(|err| ToolError::failed(format!("cannot inspect {}: {err}", e.path().display())))?;
            let rel = e.path().strip_prefix(dir).map(Path::to_path_buf).unwrap_or_default();
            if t.is_symlink() {
                return Err(ToolError::failed(format!(
                    "the skill contains a symbolic link ({}); skills must be plain files, refused",
                    rel.display()
                )));
            }
            if t.is_dir() {
                stack.push(e.path());
                continue;
            }
            if !t.is_file() {
                return Err(ToolError::failed(format!(
                    "the skill contains a special file ({}); refused",
                    rel.display()
                )));
            }
            let len = e.metadata().map(|m| m.len()).unwrap_or(u64::MAX);
            if len > MAX_FILE_BYTES {
                return Err(ToolError::failed(format!(
                    "{} is {len} bytes; a skill file may have at most {MAX_FILE_BYTES}",
                    rel.display()
                )));
            }
            total = total.saturating_add(len);
            files.push(rel);
            if files.len() > MAX_FILES || total > MAX_TOTAL_BYTES {
                return Err(ToolError::failed(format!(
                    "the skill is too big: at most {MAX_FILES} files and {MAX_TOTAL_BYTES} bytes (called from `{tool}`)"
                )));
            }
        }
    }
    Ok(files)
}

/// Stages the skill of a `path` (a folder or archive in the workspace) or of `download` (an
/// archive fetched from a URL) in a private temporary folder: a folder is copied, an archive
/// unpacked, so what is scanned and approved is what gets installed, whatever happens to the
/// source meanwhile.
fn stage(
    tool: &str,
    workspace: &Path,
    params: &Value,
    download: Option<(String, Vec<u8>)>,
) -> Result<Staged, ToolError> {
    let tmp = tempfile::Builder::new()
        .prefix("toolgate-skill-")
        .tempdir()
        .map_err(|e| ToolError::failed(format!("cannot create a folder to stage the skill in: {e}")))?;
    let caps = archive::Caps { files: MAX_FILES, file_bytes: MAX_FILE_BYTES, total_bytes: MAX_TOTAL_BYTES };
    let unpack = |bytes: &[u8]| {
        archive::unpack(bytes, tmp.path(), &caps)
            .map_err(|e| ToolError::failed(format!("the skill was not installed: the archive was refused: {e}")))
    };
    let (dir, from) = match download {
        Some((url, bytes)) => (unpack(&bytes)?, url),
        None => {
            let path = params.get("path").and_then(Value::as_str).ok_or_else(|| {
                ToolError::invalid(tool, "", "give `path` (a folder or archive in the workspace) or `url` (https)")
            })?;
            let real = confined_source(tool, workspace, path)?;
            if real.is_dir() {
                let files = checked_files(tool, &real)?;
                let copy = tmp.path().join("skill");
                for rel in &files {
                    let to = copy.join(rel);
                    if let Some(parent) = to.parent() {
                        std::fs::create_dir_all(parent)
                            .map_err(|e| ToolError::failed(format!("cannot stage the skill: {e}")))?;
                    }
                    std::fs::copy(real.join(rel), &to)
                        .map_err(|e| ToolError::failed(format!("cannot stage the skill: {e}")))?;
                }
                // The copy is named after the folder, which the front matter's name must equal.
                let named = tmp.path().join(real.file_name().unwrap_or_default());
                std::fs::rename(&copy, &named)
                    .map_err(|e| ToolError::failed(format!("cannot stage the skill: {e}")))?;
                (named, format!("`{path}`"))
            } else {
                (unpack(&read_archive(tool, &real, path)?)?, format!("`{path}`"))
            }
        }
    };
    let skill = read_skill(&dir, SkillSource::Workspace).map_err(|e| ToolError::failed(e.to_string()))?;
    let files = checked_files(tool, &dir)?;
    let findings = scan_skill(&dir);
    let blocking: Vec<String> =
        findings.iter().filter(|f| f.blocking).map(|f| format!("{}:{}: {}", f.file, f.line, f.what)).collect();
    if !blocking.is_empty() {
        return Err(ToolError::Denied {
            tool: tool.to_owned(),
            reason: format!("the skill `{}` was not installed; the scan found:\n{}", skill.name, blocking.join("\n")),
        });
    }
    Ok(Staged { _tmp: tmp, dir, skill, files, findings, from })
}

fn clip_line(s: &str, max: usize) -> String {
    let flat = s.replace('\n', " ");
    if flat.chars().count() <= max { flat } else { format!("{}...", flat.chars().take(max).collect::<String>()) }
}

/// An archive file of the workspace, at most [`MAX_ARCHIVE_BYTES`].
fn read_archive(tool: &str, real: &Path, path: &str) -> Result<Vec<u8>, ToolError> {
    use std::io::Read;
    let file = std::fs::File::open(real).map_err(|e| ToolError::failed(format!("cannot read `{path}`: {e}")))?;
    let mut bytes = Vec::new();
    file.take(MAX_ARCHIVE_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| ToolError::failed(format!("cannot read `{path}`: {e}")))?;
    if bytes.len() as u64 > MAX_ARCHIVE_BYTES {
        return Err(ToolError::invalid(tool, "/path", format!("`{path}` is larger than {MAX_ARCHIVE_BYTES} bytes")));
    }
    if archive::Kind::sniff(&bytes).is_none() {
        return Err(ToolError::invalid(
            tool,
            "/path",
            format!("`{path}` is neither a folder nor a .zip/.tar.gz archive"),
        ));
    }
    Ok(bytes)
}

/// Installs a staged skill: copied beside its target, renamed into place.
fn install_staged(workspace: &Path, staged: Staged, replace: bool) -> Result<ToolOutput, ToolError> {
    let Staged { dir: source, skill, files, findings, .. } = &staged;
    let root = workspace.join(INSTALL_DIR);
    std::fs::create_dir_all(&root).map_err(|e| ToolError::failed(format!("cannot create {INSTALL_DIR}: {e}")))?;
    let target = root.join(&skill.name);
    if target.exists() && !replace {
        return Err(ToolError::failed(format!(
            "a skill `{}` is already installed; pass `replace: true` to replace it",
            skill.name
        )));
    }
    // Copy into a temporary folder beside the target, then rename: nothing half-installed.
    let tmp = root.join(format!(".tmp-{}-{}", skill.name, toolgate_guard::random::hex_id(4)));
    let copy = || -> std::io::Result<()> {
        for rel in files {
            let to = tmp.join(rel);
            if let Some(parent) = to.parent() {
                std::fs::create_dir_all(parent)?;
            }
            std::fs::copy(source.join(rel), &to)?;
        }
        if target.exists() {
            std::fs::remove_dir_all(&target)?;
        }
        std::fs::rename(&tmp, &target)
    };
    if let Err(e) = copy() {
        let _ = std::fs::remove_dir_all(&tmp);
        return Err(ToolError::failed(format!("cannot install the skill: {e}")));
    }
    let notes: Vec<String> = findings.iter().map(|f| format!("{}:{}: {}", f.file, f.line, f.what)).collect();
    let mut text =
        format!("installed skill `{}` ({} files) into {INSTALL_DIR}/{}\n", skill.name, files.len(), skill.name);
    if !notes.is_empty() {
        text.push_str(&format!("the scan noted (not blocking):\n{}\n", notes.join("\n")));
    }
    if !skill.tools.is_empty() {
        text.push_str("its declared tools are registered when the server reloads or restarts\n");
    }
    Ok(ToolOutput::text(text).with_meta(json!({"name": skill.name, "files": files.len(), "notes": notes})))
}
