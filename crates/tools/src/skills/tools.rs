//! `skill_list`, `skill_read`, `skill_search`, `skill_install`, `skill_remove`.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::{Value, json};
use toolgate_core::{
    Annotations, ApprovalRequirement, CallContext, CallSafety, Tool, ToolError, ToolOutput, ToolSpec, Touches,
    async_trait,
};

use toolgate_fetch::{Fetcher, Request};

use super::archive;
use super::{Bm25, INSTALL_DIR, Skill, SkillSource, bundled_files, discover, read_skill, scan_skill, user_dir};

/// Caps on a skill being installed.
const MAX_FILES: usize = 256;
const MAX_FILE_BYTES: u64 = 2 * 1024 * 1024;
const MAX_TOTAL_BYTES: u64 = 20 * 1024 * 1024;
/// Cap on an archive, downloaded or read from the workspace.
const MAX_ARCHIVE_BYTES: u64 = 10 * 1024 * 1024;

/// The five skill tools (group `skills`). `skill_install` downloads archives from https URLs
/// through `fetcher`, the web tools' SSRF-safe fetcher ([`crate::web::fetcher`]).
pub fn tools(fetcher: &Fetcher) -> Vec<Arc<dyn Tool>> {
    [Kind::List, Kind::Read, Kind::Search, Kind::Install, Kind::Remove]
        .into_iter()
        .map(|kind| Arc::new(SkillTool::new(kind, fetcher.clone())) as Arc<dyn Tool>)
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
}

fn name_param() -> Value {
    json!({"type": "string", "pattern": "^[a-z0-9]+(-[a-z0-9]+)*$", "maxLength": 64, "description": "The skill's name."})
}

impl SkillTool {
    fn new(kind: Kind, fetcher: Fetcher) -> Self {
        let (name, description, schema, annotations) = match kind {
            Kind::List => (
                "skill_list",
                "List the available skills (name and description). Read one with `skill_read` before following it.",
                json!({"type": "object", "properties": {}, "additionalProperties": false}),
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
                "Find skills relevant to a task, ranked by BM25 over their name, description and instructions.",
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

    async fn execute(&self, ctx: &CallContext, params: Value) -> Result<ToolOutput, ToolError> {
        let workspace = ctx.workspace.to_path_buf();
        let name = self.spec.name.clone();
        let kind = self.kind;
        let download = match (kind, params.get("url").and_then(Value::as_str)) {
            (Kind::Install, Some(_)) if params.get("path").is_some() => {
                return Err(ToolError::invalid(&name, "/url", "give `path` or `url`, not both"));
            }
            (Kind::Install, Some(url)) => Some(self.download(ctx, url).await?),
            _ => None,
        };
        // Folder walks, unpacking and copies are blocking I/O.
        tokio::task::spawn_blocking(move || match download {
            Some(archive) => install(&name, &workspace, &params, Some(archive)),
            None => run(kind, &name, &workspace, &params),
        })
        .await
        .map_err(|e| ToolError::failed(format!("the skill task failed: {e}")))?
    }
}

impl SkillTool {
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

fn run(kind: Kind, tool: &str, workspace: &Path, params: &Value) -> Result<ToolOutput, ToolError> {
    match kind {
        Kind::List => {
            let (skills, warnings) = discover(workspace, user_dir().as_deref());
            let mut text = String::new();
            if skills.is_empty() {
                text.push_str("no skills found (they live in skills/, .agents/skills/ or the user's skills folder)\n");
            }
            for s in &skills {
                text.push_str(&format!("{}: {}\n", s.name, s.description.replace('\n', " ")));
            }
            for w in &warnings {
                text.push_str(&format!("warning: {w}\n"));
            }
            let list: Vec<Value> = skills
                .iter()
                .map(|s| json!({"name": s.name, "description": s.description, "source": source_word(s.source)}))
                .collect();
            Ok(ToolOutput::text(text).with_structured(json!({"skills": list, "warnings": warnings})))
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
            Ok(ToolOutput::text(text).with_structured(json!({
                "name": skill.name, "files": files, "allowed_tools": skill.allowed_tools,
                "tools": skill.tools.iter().map(|t| t.name.clone()).collect::<Vec<_>>(),
            })))
        }
        Kind::Search => {
            let query = str_param(tool, params, "query")?;
            let limit = params.get("limit").and_then(Value::as_u64).unwrap_or(5).clamp(1, 50) as usize;
            let (skills, _) = discover(workspace, user_dir().as_deref());
            let docs: Vec<String> = skills
                .iter()
                .map(|s| format!("{0} {0} {0} {1} {1} {2}", s.name.replace('-', " "), s.description, s.body))
                .collect();
            let index = Bm25::new(docs.iter().map(String::as_str));
            let hits = index.search(query, limit);
            let mut text = String::new();
            if hits.is_empty() {
                text.push_str("no skill matches; try other words or `skill_list`\n");
            }
            let mut list = Vec::new();
            for (i, score) in hits {
                let s = &skills[i];
                text.push_str(&format!("{} ({score:.2}): {}\n", s.name, s.description.replace('\n', " ")));
                list.push(json!({"name": s.name, "score": score, "description": s.description}));
            }
            Ok(ToolOutput::text(text).with_structured(json!({"results": list})))
        }
        Kind::Install => install(tool, workspace, params, None),
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

/// Installs from a folder or archive in the workspace (`path`), or from `download` (an archive
/// fetched from `url`). An archive is unpacked into a private temporary folder first.
fn install(tool: &str, workspace: &Path, params: &Value, download: Option<Vec<u8>>) -> Result<ToolOutput, ToolError> {
    let replace = params.get("replace").and_then(Value::as_bool).unwrap_or(false);
    let archive = match download {
        Some(bytes) => Some(bytes),
        None => {
            let path = params.get("path").and_then(Value::as_str).ok_or_else(|| {
                ToolError::invalid(tool, "", "give `path` (a folder or archive in the workspace) or `url` (https)")
            })?;
            let real = confined_source(tool, workspace, path)?;
            if real.is_dir() {
                return install_folder(tool, workspace, &real, replace);
            }
            Some(read_archive(tool, &real, path)?)
        }
    };
    let bytes = archive.unwrap_or_default();
    let staging = tempfile::Builder::new()
        .prefix("toolgate-skill-")
        .tempdir()
        .map_err(|e| ToolError::failed(format!("cannot create a folder to unpack the skill in: {e}")))?;
    let caps = archive::Caps { files: MAX_FILES, file_bytes: MAX_FILE_BYTES, total_bytes: MAX_TOTAL_BYTES };
    let source = archive::unpack(&bytes, staging.path(), &caps)
        .map_err(|e| ToolError::failed(format!("the skill was not installed: the archive was refused: {e}")))?;
    install_folder(tool, workspace, &source, replace)
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

/// Installs the skill in the folder `source` (validated, scanned, copied, renamed into place).
fn install_folder(tool: &str, workspace: &Path, source: &Path, replace: bool) -> Result<ToolOutput, ToolError> {
    let source = source.to_path_buf();
    let skill = read_skill(&source, SkillSource::Workspace).map_err(|e| ToolError::failed(e.to_string()))?;
    let files = checked_files(tool, &source)?;
    let findings = scan_skill(&source);
    let blocking: Vec<String> =
        findings.iter().filter(|f| f.blocking).map(|f| format!("{}:{}: {}", f.file, f.line, f.what)).collect();
    if !blocking.is_empty() {
        return Err(ToolError::Denied {
            tool: tool.to_owned(),
            reason: format!("the skill `{}` was not installed; the scan found:\n{}", skill.name, blocking.join("\n")),
        });
    }
    let root = workspace.join(INSTALL_DIR);
    std::fs::create_dir_all(&root).map_err(|e| ToolError::failed(format!("cannot create {INSTALL_DIR}: {e}")))?;
    let target = root.join(&skill.name);
    if target.starts_with(&source) || source.starts_with(&target) {
        return Err(ToolError::invalid(tool, "/path", "the folder is already the installed skill"));
    }
    if target.exists() && !replace {
        return Err(ToolError::failed(format!(
            "a skill `{}` is already installed; pass `replace: true` to replace it",
            skill.name
        )));
    }
    // Copy into a temporary folder beside the target, then rename: nothing half-installed.
    let tmp = root.join(format!(".tmp-{}-{}", skill.name, toolgate_guard::random::hex_id(4)));
    let copy = || -> std::io::Result<()> {
        for rel in &files {
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
    Ok(ToolOutput::text(text).with_structured(json!({"name": skill.name, "files": files.len(), "notes": notes})))
}
