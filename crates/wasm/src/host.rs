//! The host side of the `toolgate:tool` world: per-call state and the imports a guest calls.
//! Every import checks the tool's capabilities and the per-call budgets before doing anything.

use std::sync::Arc;

use serde_json::Value;
use toolgate_core::CallContext;
use wasmtime::component::ResourceTable;
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};

use crate::Capabilities;
use crate::services::{HttpOrigin, HttpRequest, Services};

wasmtime::component::bindgen!({
    path: "wit",
    world: "tool",
    imports: { default: async },
    exports: { default: async },
});

use toolgate::tool::{http, log, secrets, tools, workspace};

/// At most this many log messages per call; later ones are counted and dropped.
pub const MAX_LOG_ENTRIES: usize = 1000;
/// Each log message is cut to this many bytes.
pub const MAX_LOG_BYTES: usize = 4096;
/// At most this many HTTP requests per call.
pub const MAX_HTTP_REQUESTS: u32 = 50;
/// At most this many tool invocations per call.
pub const MAX_TOOL_INVOCATIONS: u32 = 20;
/// A file read through `workspace.read` is at most this large.
pub const MAX_READ_BYTES: usize = 1 << 20;

/// One message a guest logged.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogEntry {
    /// `trace` .. `error`.
    pub level: &'static str,
    /// The message, at most [`MAX_LOG_BYTES`].
    pub message: String,
}

/// Memory and table limits of one store.
#[derive(Debug)]
pub(crate) struct Limiter {
    pub(crate) memory: usize,
    pub(crate) instances: usize,
    pub(crate) tables: usize,
    /// Set when a growth was refused, so the error can say why the guest stopped.
    pub(crate) memory_refused: bool,
}

impl wasmtime::ResourceLimiter for Limiter {
    fn memory_growing(&mut self, _current: usize, desired: usize, _max: Option<usize>) -> wasmtime::Result<bool> {
        let ok = desired <= self.memory;
        self.memory_refused |= !ok;
        Ok(ok)
    }

    fn table_growing(&mut self, _current: usize, desired: usize, _max: Option<usize>) -> wasmtime::Result<bool> {
        Ok(desired <= 100_000)
    }

    fn instances(&self) -> usize {
        self.instances
    }

    fn tables(&self) -> usize {
        self.tables
    }

    fn memories(&self) -> usize {
        crate::runtime::MAX_MEMORIES
    }
}

/// Everything one call's store holds.
pub(crate) struct HostState {
    wasi: WasiCtx,
    table: ResourceTable,
    pub(crate) limiter: Limiter,
    caps: Arc<Capabilities>,
    services: Services,
    /// The call being served (none while describing at install).
    ctx: Option<CallContext>,
    /// The tool's registered name, for logs.
    tool: Arc<str>,
    pub(crate) logs: Vec<LogEntry>,
    pub(crate) logs_dropped: usize,
    http_requests: u32,
    invocations: u32,
}

impl std::fmt::Debug for HostState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HostState").field("tool", &self.tool).finish_non_exhaustive()
    }
}

impl HostState {
    pub(crate) fn new(
        tool: Arc<str>,
        caps: Arc<Capabilities>,
        services: Services,
        ctx: Option<CallContext>,
        limits: crate::CallLimits,
    ) -> Self {
        // No preopened directories, no environment, no arguments, no sockets, stdout and
        // stderr discarded: WASI is only there because guest toolchains import it.
        let wasi = WasiCtx::builder().allow_tcp(false).allow_udp(false).allow_ip_name_lookup(false).build();
        HostState {
            wasi,
            table: ResourceTable::new(),
            limiter: Limiter {
                memory: limits.memory_bytes,
                instances: limits.instances,
                tables: limits.tables,
                memory_refused: false,
            },
            caps,
            services,
            ctx,
            tool,
            logs: Vec::new(),
            logs_dropped: 0,
            http_requests: 0,
            invocations: 0,
        }
    }
}

impl WasiView for HostState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView { ctx: &mut self.wasi, table: &mut self.table }
    }
}

impl log::Host for HostState {
    async fn log(&mut self, level: log::Level, message: String) {
        if self.logs.len() >= MAX_LOG_ENTRIES {
            self.logs_dropped += 1;
            return;
        }
        let level = match level {
            log::Level::Trace => "trace",
            log::Level::Debug => "debug",
            log::Level::Info => "info",
            log::Level::Warn => "warn",
            log::Level::Error => "error",
        };
        let mut message = message;
        if message.len() > MAX_LOG_BYTES {
            let mut cut = MAX_LOG_BYTES;
            while !message.is_char_boundary(cut) {
                cut -= 1;
            }
            message.truncate(cut);
        }
        tracing::debug!(tool = %self.tool, level, "{message}");
        self.logs.push(LogEntry { level, message });
    }
}

impl workspace::Host for HostState {
    async fn read(&mut self, path: String) -> Result<String, String> {
        if self.caps.workspace.is_none() {
            return Err("capability `workspace` is not granted to this tool".into());
        }
        let rel = normalize_guest_path(&path)?;
        if !self.caps.read_allowed(&rel) {
            return Err(format!("`{rel}` is outside the paths this tool may read"));
        }
        let (Some(reader), Some(ctx)) = (&self.services.workspace, &self.ctx) else {
            return Err("workspace reading is not available in this context".into());
        };
        let bytes = reader.read(&ctx.workspace, &rel, MAX_READ_BYTES).await?;
        String::from_utf8(bytes).map_err(|_| format!("`{rel}` is not UTF-8 text"))
    }
}

impl http::Host for HostState {
    async fn send(&mut self, req: http::Request) -> Result<http::Response, String> {
        let client = self.services.http.clone();
        let request = HttpRequest { method: req.method, url: req.url, headers: req.headers, body: req.body };
        let (tool, ctx) = (Arc::clone(&self.tool), self.ctx.clone());
        let origin = HttpOrigin { tool: &tool, ctx: ctx.as_ref(), index: self.http_requests.saturating_add(1) };
        let Some(cap) = self.caps.http.clone() else {
            let reason = "capability `http` is not granted to this tool".to_owned();
            // Recorded once per call, like the budget below.
            if let Some(client) = &client
                && self.http_requests == 0
            {
                client.refused(origin, &request, &reason);
                self.http_requests = u32::MAX;
            }
            return Err(reason);
        };
        let Some(client) = client else {
            return Err("HTTP is not available in this toolgate build".into());
        };
        if self.http_requests >= MAX_HTTP_REQUESTS {
            let reason = format!("at most {MAX_HTTP_REQUESTS} HTTP requests per call");
            // One audit row for the first refusal: a guest looping on `send` must not flood
            // the log.
            if self.http_requests == MAX_HTTP_REQUESTS {
                client.refused(origin, &request, &reason);
                self.http_requests += 1;
            }
            return Err(reason);
        }
        self.http_requests += 1;
        let resp = client.send(origin, &cap, request).await?;
        Ok(http::Response { status: resp.status, headers: resp.headers, body: resp.body })
    }
}

impl secrets::Host for HostState {
    async fn exists(&mut self, name: String) -> bool {
        if !self.caps.secret_allowed(&name) {
            return false;
        }
        self.services.secrets.as_ref().is_some_and(|s| s.exists(&name))
    }
}

impl tools::Host for HostState {
    async fn invoke(&mut self, alias: String, params: String) -> Result<String, String> {
        let Some(target) = self.caps.tools.as_ref().and_then(|t| t.aliases.get(&alias)).cloned() else {
            return Err(format!("no tool alias `{alias}` is granted to this tool"));
        };
        if self.invocations >= MAX_TOOL_INVOCATIONS {
            return Err(format!("at most {MAX_TOOL_INVOCATIONS} tool calls per call"));
        }
        self.invocations += 1;
        let (Some(invoker), Some(ctx)) = (&self.services.invoker, &self.ctx) else {
            return Err("calling tools is not available in this context".into());
        };
        let params: Value = serde_json::from_str(&params).map_err(|e| format!("params are not JSON: {e}"))?;
        match invoker.invoke(ctx, &target, params).await {
            Ok(out) => Ok(out.text_content()),
            // The guest knows the alias, never the real name.
            Err(e) => Err(e.to_string().replace(&target, &alias)),
        }
    }
}

/// A guest path as a workspace-relative path: no absolute paths, no `..`, no NUL, no Windows
/// forms. The reader confines it again (the kernel does, for the file tools' reader).
fn normalize_guest_path(path: &str) -> Result<String, String> {
    if path.is_empty() || path.contains('\0') || path.contains('\\') || path.as_bytes().get(1) == Some(&b':') {
        return Err("give a workspace-relative path with `/` separators".into());
    }
    if path.starts_with('/') {
        return Err("absolute paths are not allowed; give a workspace-relative path".into());
    }
    let mut parts = Vec::new();
    for c in path.split('/') {
        match c {
            "" | "." => {}
            ".." => return Err("`..` is not allowed".into()),
            c => parts.push(c),
        }
    }
    if parts.is_empty() {
        return Err("name a file".into());
    }
    if parts[0] == ".toolgate" {
        return Err("`.toolgate/` is never readable".into());
    }
    Ok(parts.join("/"))
}

#[cfg(test)]
mod tests {
    use super::normalize_guest_path;

    #[test]
    fn guest_paths_stay_relative() {
        assert_eq!(normalize_guest_path("./a//b.txt").unwrap(), "a/b.txt");
        for bad in ["/etc/passwd", "../x", "a/../../x", "C:\\x", "a\0b", "", ".toolgate/secret.key", "a\\b"] {
            assert!(normalize_guest_path(bad).is_err(), "{bad:?}");
        }
    }
}
