//! The set of tools a gate can call, with protected names and aliases.

use std::collections::BTreeMap;
use std::sync::{Arc, RwLock};

use crate::{ParamValidator, Tool};

/// Names reserved for toolgate's built-in tools, whether or not they are registered: a dynamic
/// tool (MCP, WASM, config) can never take one, so enabling a built-in later cannot be hijacked.
pub const RESERVED_NAMES: &[&str] = &[
    "echo",
    "time",
    "json",
    "read",
    "write",
    "edit",
    "multi_edit",
    "apply_patch",
    "grep",
    "glob",
    "ls",
    "lock_paths",
    "unlock_paths",
    "exec",
    "process",
    "execute_code",
    "web_fetch",
    "web_search",
    "http",
    "memory_search",
    "memory_write",
    "memory_read",
    "memory_get",
    "memory_tree",
    "cron",
    "spawn",
    "subagent",
    "sessions_list",
    "sessions_send",
    "message",
    "tool_search",
    "tool_list",
    "tool_install",
    "tool_auth",
    "tool_activate",
    "tool_remove",
    // The families to come (automation, gateway, nodes, browser and media): a dynamic tool
    // must not hold a name before its built-in arrives.
    "browser",
    "canvas",
    "image",
    "audio",
    "video",
    "tts",
    "capture_screenshot",
    "nodes",
    "gateway",
    "build_software",
    "create_job",
    "list_jobs",
    "job_status",
    "cancel_job",
    "job_events",
    "job_prompt",
    "routine_create",
    "routine_list",
    "routine_update",
    "routine_delete",
    "routine_history",
];

/// Tool-name aliases models use, from other runtimes' names (alias, canonical).
const TOOL_ALIASES: &[(&str, &str)] = &[
    ("bash", "exec"),
    ("shell", "exec"),
    ("run_command", "exec"),
    ("apply-patch", "apply_patch"),
    ("applypatch", "apply_patch"),
    ("read_file", "read"),
    ("write_file", "write"),
    ("edit_file", "edit"),
    ("multiedit", "multi_edit"),
    ("list_dir", "ls"),
    ("list_directory", "ls"),
    ("fetch", "web_fetch"),
    ("webfetch", "web_fetch"),
    ("websearch", "web_search"),
    ("sessions_status", "session_status"),
    ("delegate_to_agent", "delegate"),
];

/// The canonical name of a tool as models and other runtimes write it: a known alias
/// (`bash`, `Bash`, `read_file`, `WebFetch`) becomes the built-in's name, a built-in in another
/// case (`Read`) becomes lowercase, anything else is returned as it is.
pub fn canonical_tool_name(name: &str) -> std::borrow::Cow<'_, str> {
    let lower = name.to_ascii_lowercase();
    if let Some((_, canonical)) = TOOL_ALIASES.iter().find(|(alias, _)| *alias == lower) {
        return std::borrow::Cow::Borrowed(canonical);
    }
    if lower != name && RESERVED_NAMES.contains(&lower.as_str()) {
        return std::borrow::Cow::Owned(lower);
    }
    std::borrow::Cow::Borrowed(name)
}

/// Why a tool could not be registered.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RegistryError {
    /// A dynamic tool tried to take a built-in or reserved name (or one of their aliases).
    #[error(
        "the tool name `{name}` is reserved for a built-in tool; register it under another name (bridged MCP tools are named `mcp__SERVER__TOOL`)"
    )]
    ProtectedName {
        /// The refused name.
        name: String,
    },
    /// Another tool already has this name.
    #[error("a tool named `{name}` is already registered")]
    Duplicate {
        /// The name in use.
        name: String,
    },
    /// The name is not 1 to 64 characters of `A-Z a-z 0-9 _ -`, which every provider accepts.
    #[error("invalid tool name `{name}`: use 1 to 64 characters from A-Z, a-z, 0-9, `_` and `-`")]
    InvalidName {
        /// The refused name.
        name: String,
    },
    /// The tool's input schema cannot be used.
    #[error("{message}")]
    InvalidSchema {
        /// The tool.
        name: String,
        /// What is wrong with its schema.
        message: String,
    },
}

/// A tool in the registry, with its compiled validator.
pub struct RegisteredTool {
    /// The tool.
    pub tool: Arc<dyn Tool>,
    /// Its compiled parameter checker.
    pub validator: ParamValidator,
    /// Whether it is a built-in (protected) tool.
    pub builtin: bool,
}

impl std::fmt::Debug for RegisteredTool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RegisteredTool").field("name", &self.tool.spec().name).field("builtin", &self.builtin).finish()
    }
}

/// The tools a gate knows, shared by every call. Dynamic tools can come and go at run time
/// (an MCP server reconnects), so the map sits behind a lock that calls only read.
#[derive(Debug)]
pub struct Registry {
    tools: RwLock<BTreeMap<String, Arc<RegisteredTool>>>,
    /// More protected names, lowercase ([`Registry::reserve`]: every dialect's names).
    reserved: RwLock<std::collections::BTreeSet<String>>,
    /// Bumped on every insert and removal, so servers can tell their clients the list changed.
    generation: tokio::sync::watch::Sender<u64>,
}

impl Default for Registry {
    fn default() -> Self {
        Registry {
            tools: RwLock::default(),
            reserved: RwLock::default(),
            generation: tokio::sync::watch::Sender::new(0),
        }
    }
}

impl Registry {
    /// An empty registry.
    pub fn new() -> Self {
        Registry::default()
    }

    /// Registers a built-in tool; its name becomes protected.
    pub fn register_builtin(&self, tool: Arc<dyn Tool>) -> Result<(), RegistryError> {
        self.insert(tool, true)
    }

    /// Registers a dynamic tool (MCP, WASM, user-defined). Refused when it would shadow a
    /// built-in or reserved name or one of their aliases.
    pub fn register_dynamic(&self, tool: Arc<dyn Tool>) -> Result<(), RegistryError> {
        let name = tool.spec().name.clone();
        if self.reserved(&name) || self.read().get(&name).is_some_and(|t| t.builtin) {
            return Err(RegistryError::ProtectedName { name });
        }
        self.insert(tool, false)
    }

    /// Replaces a set of dynamic tools in one step (a configuration reload): every tool in
    /// `tools` is checked first (name, schema, not shadowing a built-in or reserved name), and
    /// only when all pass are they inserted, each replacing the dynamic tool of its name, and
    /// the dynamic tools named in `remove` (and not in `tools`) taken out. A call that already
    /// resolved a tool finishes on it. Nothing changes on an error.
    pub fn swap_dynamic(&self, tools: Vec<Arc<dyn Tool>>, remove: &[String]) -> Result<(), RegistryError> {
        let mut prepared = Vec::with_capacity(tools.len());
        {
            let current = self.read();
            for tool in tools {
                let name = tool.spec().name.clone();
                if self.reserved(&name) || current.get(&name).is_some_and(|t| t.builtin) {
                    return Err(RegistryError::ProtectedName { name });
                }
                if prepared.iter().any(|(n, _): &(String, _)| *n == name) {
                    return Err(RegistryError::Duplicate { name });
                }
                let entry = Self::prepare(tool, false)?;
                prepared.push((name, entry));
            }
        }
        let mut map = self.write();
        // Checked again under the write lock: a built-in may have been registered meanwhile.
        if let Some((name, _)) = prepared.iter().find(|(name, _)| map.get(name).is_some_and(|t| t.builtin)) {
            return Err(RegistryError::ProtectedName { name: name.clone() });
        }
        for name in remove {
            if map.get(name).is_some_and(|t| !t.builtin) && !prepared.iter().any(|(n, _)| n == name) {
                map.remove(name);
            }
        }
        for (name, entry) in prepared {
            map.insert(name, Arc::new(entry));
        }
        drop(map);
        self.changed();
        Ok(())
    }

    /// Protects more names (in any case) from dynamic tools, as [`RESERVED_NAMES`] are: a
    /// gate reserves every name any dialect gives a tool (`Read`, `read_file`, `shell`).
    pub fn reserve(&self, names: impl IntoIterator<Item = String>) {
        let mut reserved = self.reserved.write().unwrap_or_else(|e| e.into_inner());
        reserved.extend(names.into_iter().map(|n| n.to_ascii_lowercase()));
    }

    fn reserved(&self, name: &str) -> bool {
        let lower = name.to_ascii_lowercase();
        RESERVED_NAMES.contains(&lower.as_str())
            || TOOL_ALIASES.iter().any(|(alias, _)| *alias == lower)
            || self.reserved.read().unwrap_or_else(|e| e.into_inner()).contains(&lower)
    }

    /// Removes a dynamic tool. Built-ins cannot be removed. Returns whether a tool was removed.
    pub fn unregister_dynamic(&self, name: &str) -> bool {
        let mut tools = self.write();
        if tools.get(name).is_some_and(|t| !t.builtin) {
            tools.remove(name);
            drop(tools);
            self.changed();
            true
        } else {
            false
        }
    }

    /// A receiver that sees a new value whenever a tool is added or removed (an MCP server
    /// connected, reconnected or changed its list).
    pub fn changes(&self) -> tokio::sync::watch::Receiver<u64> {
        self.generation.subscribe()
    }

    /// Tells the receivers of [`Registry::changes`] that the list they show changed though no
    /// tool did (a reload gave the tools another dialect's names).
    pub fn touch(&self) {
        self.changed();
    }

    fn changed(&self) {
        self.generation.send_modify(|g| *g += 1);
    }

    fn insert(&self, tool: Arc<dyn Tool>, builtin: bool) -> Result<(), RegistryError> {
        let name = tool.spec().name.clone();
        let entry = Self::prepare(tool, builtin)?;
        let mut tools = self.write();
        if tools.contains_key(&name) {
            return Err(RegistryError::Duplicate { name });
        }
        tools.insert(name, Arc::new(entry));
        drop(tools);
        self.changed();
        Ok(())
    }

    /// Checks a tool's name and compiles its validator.
    fn prepare(tool: Arc<dyn Tool>, builtin: bool) -> Result<RegisteredTool, RegistryError> {
        let spec = tool.spec();
        let name = spec.name.clone();
        if !valid_name(&name) {
            return Err(RegistryError::InvalidName { name });
        }
        // A built-in tool's schema is a constant (a test compiles every one): compiled on its
        // first call. Anything else is checked now, so a bad schema fails registration.
        let validator = if builtin {
            ParamValidator::new_lazy(&name, &spec.input_schema)
        } else {
            ParamValidator::new(&name, &spec.input_schema)
        }
        .map_err(|message| RegistryError::InvalidSchema { name: name.clone(), message })?;
        Ok(RegisteredTool { tool, validator, builtin })
    }

    /// Finds a tool by name or alias: the exact name first, then a known alias, then the same
    /// two ignoring ASCII case (`Read`, `Bash`).
    pub fn resolve(&self, name: &str) -> Option<Arc<RegisteredTool>> {
        let tools = self.read();
        if let Some(t) = tools.get(name) {
            return Some(t.clone());
        }
        let lower = name.to_ascii_lowercase();
        let by_alias = |n: &str| TOOL_ALIASES.iter().find(|(a, _)| *a == n).and_then(|(_, c)| tools.get(*c));
        by_alias(name).or_else(|| tools.get(&lower)).or_else(|| by_alias(&lower)).cloned()
    }

    /// The closest registered name to `name`, for "did you mean" messages.
    pub fn suggest(&self, name: &str) -> Option<String> {
        let lower = name.to_ascii_lowercase();
        self.read()
            .keys()
            .map(|k| (strsim::jaro_winkler(&k.to_ascii_lowercase(), &lower), k))
            .filter(|(score, _)| *score >= 0.75)
            .max_by(|a, b| a.0.total_cmp(&b.0))
            .map(|(_, k)| k.clone())
    }

    /// Every registered tool, sorted by name.
    pub fn all(&self) -> Vec<Arc<RegisteredTool>> {
        self.read().values().cloned().collect()
    }

    /// How many tools are registered.
    pub fn len(&self) -> usize {
        self.read().len()
    }

    /// Whether no tool is registered.
    pub fn is_empty(&self) -> bool {
        self.read().is_empty()
    }

    /// Tool-name aliases, as (alias, canonical) pairs.
    pub fn aliases() -> &'static [(&'static str, &'static str)] {
        TOOL_ALIASES
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, BTreeMap<String, Arc<RegisteredTool>>> {
        // A panic while holding the lock cannot leave the map half-written (inserts are single
        // operations), so a poisoned lock is still safe to use.
        self.tools.read().unwrap_or_else(|e| e.into_inner())
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, BTreeMap<String, Arc<RegisteredTool>>> {
        self.tools.write().unwrap_or_else(|e| e.into_inner())
    }
}

fn valid_name(name: &str) -> bool {
    (1..=64).contains(&name.len()) && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;
    use crate::{CallContext, ToolError, ToolOutput, ToolSpec};

    struct Named(ToolSpec);

    #[async_trait::async_trait]
    impl Tool for Named {
        fn spec(&self) -> &ToolSpec {
            &self.0
        }
        async fn execute(&self, _: &CallContext, _: Value) -> Result<ToolOutput, ToolError> {
            Ok(ToolOutput::default())
        }
    }

    fn tool(name: &str) -> Arc<dyn Tool> {
        Arc::new(Named(ToolSpec::new(name, "test", json!({"type": "object"}))))
    }

    #[test]
    fn dynamic_tools_cannot_shadow_builtins_or_reserved_names() {
        let r = Registry::new();
        r.register_builtin(tool("echo")).unwrap();
        r.register_builtin(tool("custom_builtin")).unwrap();
        for name in ["echo", "custom_builtin", "exec", "EXEC", "bash", "Read", "apply-patch"] {
            assert!(
                matches!(r.register_dynamic(tool(name)), Err(RegistryError::ProtectedName { .. })),
                "{name} must be protected"
            );
        }
        r.register_dynamic(tool("mcp__srv__echo")).unwrap();
        assert!(matches!(r.register_dynamic(tool("mcp__srv__echo")), Err(RegistryError::Duplicate { .. })));
        assert!(!r.unregister_dynamic("echo"), "built-ins stay");
        assert!(r.unregister_dynamic("mcp__srv__echo"));
    }

    #[test]
    fn reserved_names_are_protected_in_any_case_and_swaps() {
        let r = Registry::new();
        for name in ["browser", "Cron", "capture_screenshot", "routine_create"] {
            assert!(matches!(r.register_dynamic(tool(name)), Err(RegistryError::ProtectedName { .. })), "{name}");
        }
        r.register_dynamic(tool("list_files")).unwrap();
        r.unregister_dynamic("list_files");
        r.reserve(["list_files".to_owned(), "WebSearch".to_owned()]);
        for name in ["list_files", "LIST_FILES", "websearch", "WebSearch"] {
            assert!(matches!(r.register_dynamic(tool(name)), Err(RegistryError::ProtectedName { .. })), "{name}");
            assert!(
                matches!(r.swap_dynamic(vec![tool(name)], &[]), Err(RegistryError::ProtectedName { .. })),
                "{name}"
            );
        }
    }

    #[test]
    fn swap_dynamic_replaces_all_or_nothing() {
        let r = Registry::new();
        r.register_builtin(tool("echo")).unwrap();
        r.register_dynamic(tool("old_one")).unwrap();
        r.register_dynamic(tool("kept")).unwrap();
        let held = r.resolve("kept").unwrap();
        let before = *r.changes().borrow();
        // A bad set (one tool shadows a built-in, one has a bad name) changes nothing.
        for bad in [vec![tool("new_one"), tool("echo")], vec![tool("new_one"), tool("bad name")]] {
            assert!(r.swap_dynamic(bad, &["old_one".into()]).is_err());
            assert!(r.resolve("old_one").is_some() && r.resolve("new_one").is_none());
        }
        assert!(r.swap_dynamic(vec![tool("dup"), tool("dup")], &[]).is_err(), "duplicates in one set");
        r.swap_dynamic(vec![tool("new_one"), tool("kept")], &["old_one".into(), "kept".into(), "echo".into()]).unwrap();
        assert!(r.resolve("old_one").is_none(), "removed");
        assert!(r.resolve("new_one").is_some(), "added");
        assert!(!Arc::ptr_eq(&held, &r.resolve("kept").unwrap()), "replaced, not removed");
        assert!(r.resolve("echo").is_some(), "a built-in in `remove` stays");
        assert_eq!(*r.changes().borrow(), before + 1, "one change for the whole swap");
    }

    #[test]
    fn names_are_checked() {
        let r = Registry::new();
        for bad in ["", "has space", "dot.ted", &"x".repeat(65)] {
            assert!(matches!(r.register_builtin(tool(bad)), Err(RegistryError::InvalidName { .. })), "{bad:?}");
        }
    }

    #[test]
    fn aliases_and_case_resolve() {
        let r = Registry::new();
        r.register_builtin(tool("exec")).unwrap();
        r.register_builtin(tool("apply_patch")).unwrap();
        r.register_builtin(tool("read")).unwrap();
        for (asked, found) in [
            ("bash", "exec"),
            ("Bash", "exec"),
            ("apply-patch", "apply_patch"),
            ("Read", "read"),
            ("read_file", "read"),
        ] {
            assert_eq!(r.resolve(asked).unwrap().tool.spec().name, found, "{asked}");
        }
        assert!(r.resolve("rm").is_none());
        assert_eq!(r.suggest("exce").as_deref(), Some("exec"));
        assert_eq!(r.suggest("zzzzzz"), None);
    }
}
