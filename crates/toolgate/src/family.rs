//! Tool families: the one way a group of tools joins a gate (ARCHITECTURE.md, "Adding a tool
//! family").
//!
//! A family is a value implementing [`Family`]: from the shared [`Services`] (built once per
//! gate) and its configuration section it makes its tools, and optionally the JSON endpoints a
//! long-lived `toolgate serve --http` mounts beside `/mcp` and the background tasks it runs
//! until shutdown. [`builtin`] is the table of toolgate's own families, in registration
//! order; [`GateBuilder::family`](crate::GateBuilder::family) adds an embedder's.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use tokio_util::sync::CancellationToken;
use toolgate_core::Tool;
pub use toolgate_mcp::ApiHandler;
use toolgate_tools::custom::{NoSecrets, SecretSource};

use crate::GateError;
use crate::services::Services;

/// Background work of a family: runs until the shutdown token it was given is cancelled.
pub type Task = Pin<Box<dyn Future<Output = ()> + Send + 'static>>;

/// A group of tools with what it needs, built from the gate's [`Services`].
///
/// Every method has a default, so a family implements only what it brings.
pub trait Family: Send + Sync + std::fmt::Debug {
    /// Its name: the tool group of its tools and the path its endpoints are mounted under
    /// (`/api/NAME/...`).
    fn name(&self) -> &'static str;

    /// Its tools, made from the shared services and its part of the configuration
    /// (`services.config`). The built-in families' names are protected: no other tool can
    /// take them.
    fn tools(&self, services: &Services) -> Result<Vec<Arc<dyn Tool>>, GateError> {
        let _ = services;
        Ok(Vec::new())
    }

    /// JSON endpoints served under `/api/NAME/` by `toolgate serve --http`, behind the same
    /// bearer token and Host/Origin checks as `/mcp` (webhooks, a page's API, health).
    fn routes(&self, services: &Services) -> Option<Arc<dyn ApiHandler>> {
        let _ = services;
        None
    }

    /// Work a long-lived `toolgate serve` runs in the background (a scheduler, a listener,
    /// retention), each task ending when `shutdown` is cancelled.
    fn tasks(&self, services: &Services, shutdown: &CancellationToken) -> Vec<Task> {
        let _ = (services, shutdown);
        Vec::new()
    }
}

/// toolgate's own families, in registration order. A new family is one line here
/// (ARCHITECTURE.md, "Adding a tool family").
pub(crate) fn builtin() -> Vec<Arc<dyn Family>> {
    vec![
        Arc::new(Basic),
        Arc::new(Files),
        Arc::new(Runtime),
        Arc::new(Skills),
        Arc::new(Memory),
        Arc::new(Web),
        Arc::new(Agents),
        Arc::new(Extensions),
    ]
}

/// `echo`, `time`, `json` (`toolgate_tools::basic`).
#[derive(Debug)]
struct Basic;

impl Family for Basic {
    fn name(&self) -> &'static str {
        "basic"
    }

    fn tools(&self, _: &Services) -> Result<Vec<Arc<dyn Tool>>, GateError> {
        Ok(toolgate_tools::basic::tools())
    }
}

/// The file tools (`toolgate_tools::fs`), observed by memory when it is on.
#[derive(Debug)]
struct Files;

impl Family for Files {
    fn name(&self) -> &'static str {
        "fs"
    }

    fn tools(&self, s: &Services) -> Result<Vec<Arc<dyn Tool>>, GateError> {
        toolgate_tools::fs::tools_observed(s.config.fs.clone(), s.memory.as_ref().map(|m| m.hook.clone()))
            .map_err(|e| GateError::Fs(e.to_string()))
    }
}

/// `exec`, `process`, `execute_code` (`toolgate_tools::runtime`), on the shared runner.
#[derive(Debug)]
struct Runtime;

impl Family for Runtime {
    fn name(&self) -> &'static str {
        "runtime"
    }

    fn tools(&self, s: &Services) -> Result<Vec<Arc<dyn Tool>>, GateError> {
        // A toolgate killed with SIGKILL leaves its sandbox's temporary folder: remove those
        // of dead processes (one read of the temporary directory).
        toolgate_tools::runtime::Sandbox::sweep_stale_temp_dirs();
        Ok(toolgate_tools::runtime::tools(&s.runner))
    }
}

/// The `skill_*` tools (`toolgate_tools::skills`).
#[derive(Debug)]
struct Skills;

impl Family for Skills {
    fn name(&self) -> &'static str {
        "skills"
    }

    fn tools(&self, s: &Services) -> Result<Vec<Arc<dyn Tool>>, GateError> {
        let cache = s.stores.as_ref().map(|st| Arc::clone(&st.embeddings));
        Ok(toolgate_tools::skills::tools(&s.fetcher, s.embedder.clone(), cache))
    }
}

/// The `memory_*` tools, when `[memory]` is on.
#[derive(Debug)]
struct Memory;

impl Family for Memory {
    fn name(&self) -> &'static str {
        "memory"
    }

    fn tools(&self, s: &Services) -> Result<Vec<Arc<dyn Tool>>, GateError> {
        Ok(s.memory.iter().flat_map(|m| toolgate_tools::memory::tools(m.store.clone())).collect())
    }
}

/// `web_fetch`, `http`, `web_search`, `html_to_markdown`, on the shared fetcher.
#[derive(Debug)]
struct Web;

impl Family for Web {
    fn name(&self) -> &'static str {
        "web"
    }

    fn tools(&self, s: &Services) -> Result<Vec<Arc<dyn Tool>>, GateError> {
        // Search API keys: the environment first, then the store's secrets.
        let secrets: Arc<dyn SecretSource> = match &s.stores {
            Some(st) => Arc::new(crate::extensions::StoreSecrets(Arc::clone(&st.secrets))),
            None => Arc::new(NoSecrets),
        };
        Ok(toolgate_tools::web::tools(&s.config.web, &s.fetcher, Arc::clone(&s.detector), secrets))
    }
}

/// The agent tools, when `[agents]` exist (`toolgate_agent::tools`).
#[derive(Debug)]
struct Agents;

impl Family for Agents {
    fn name(&self) -> &'static str {
        "sessions"
    }

    fn tools(&self, s: &Services) -> Result<Vec<Arc<dyn Tool>>, GateError> {
        Ok(s.agents.iter().flat_map(toolgate_agent::tools).collect())
    }
}

/// `tool_list|search|install|auth|activate|remove` (`crate::extension_tools`).
#[derive(Debug)]
struct Extensions;

impl Family for Extensions {
    fn name(&self) -> &'static str {
        "extensions"
    }

    fn tools(&self, s: &Services) -> Result<Vec<Arc<dyn Tool>>, GateError> {
        Ok(crate::extension_tools::tools(&s.extension_shared()))
    }
}
