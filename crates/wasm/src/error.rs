//! What can go wrong loading or running a WASM tool.

use std::path::PathBuf;
use std::time::Duration;

use toolgate_core::ToolError;

/// Why a component could not be installed, loaded or run.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum WasmError {
    /// The bytes are not a WebAssembly component (a core module, or not WebAssembly at all).
    #[error(
        "not a WebAssembly component: {detail}; build it for the `toolgate:tool@0.1.0` world (componentize-py, jco componentize, cargo component, or wasm-tools component new)"
    )]
    NotAComponent {
        /// What the validator said.
        detail: String,
    },
    /// A component that does not fit the `toolgate:tool` world (missing exports, unknown imports).
    #[error("the component does not target the `toolgate:tool@0.1.0` world: {detail}")]
    WrongWorld {
        /// What did not match.
        detail: String,
    },
    /// The component file is larger than allowed.
    #[error(
        "the component is {size} bytes, more than the limit of {limit} bytes; a person allows a larger one (an interpreter: Python, JavaScript) with `limits.component_mb` in its capability file"
    )]
    TooLarge {
        /// Its size.
        size: u64,
        /// The limit.
        limit: u64,
    },
    /// The installed file changed since it was installed.
    #[error(
        "`{path}` changed since it was installed (BLAKE3 {actual}, installed {expected}); refusing to run it. If the change is yours, run `toolgate wasm install` again"
    )]
    Tampered {
        /// The file.
        path: PathBuf,
        /// The hash recorded at install.
        expected: String,
        /// The hash of the file now.
        actual: String,
    },
    /// What `describe` returned is unusable.
    #[error("the component's `describe` is invalid: {detail}")]
    BadDescription {
        /// What is wrong.
        detail: String,
    },
    /// The capability file is invalid or asks for something never granted.
    #[error("invalid capabilities: {detail}")]
    BadCapabilities {
        /// What is wrong, and where.
        detail: String,
    },
    /// The guest used up its fuel (its CPU budget).
    #[error("the tool used up its CPU budget ({fuel} units of fuel) and was stopped")]
    FuelExhausted {
        /// The budget.
        fuel: u64,
    },
    /// The guest ran past its deadline (epoch interruption).
    #[error("the tool ran longer than {}s and was stopped", .after.as_secs_f64())]
    Deadline {
        /// The deadline.
        after: Duration,
    },
    /// The guest asked for more memory than it may have.
    #[error("the tool tried to use more than {limit} bytes of memory and was stopped")]
    MemoryLimit {
        /// The limit in bytes.
        limit: usize,
    },
    /// The component creates more core instances, tables or memories than it may.
    #[error(
        "the tool needs more instances or tables than its limits allow ({instances} instances, {tables} tables): {detail}; a person raises them with `limits.instances` / `limits.tables` in its capability file"
    )]
    CountLimit {
        /// What wasmtime said.
        detail: String,
        /// The instance limit.
        instances: usize,
        /// The table limit.
        tables: usize,
    },
    /// The guest overflowed its stack (deep recursion).
    #[error("the tool overflowed its stack (too deep recursion) and was stopped")]
    StackOverflow,
    /// The guest trapped (a bug in the tool: unreachable, out-of-bounds access, ...).
    #[error("the tool crashed: {detail}")]
    Trap {
        /// The trap, as wasmtime describes it.
        detail: String,
    },
    /// The guest's result is larger than allowed.
    #[error("the tool returned {size} bytes, more than the limit of {limit} bytes")]
    OutputTooLarge {
        /// Its size.
        size: usize,
        /// The limit.
        limit: usize,
    },
    /// Compiling or instantiating failed for a reason of the host (engine, cache, linker).
    #[error("wasm engine: {detail}")]
    Engine {
        /// What wasmtime said.
        detail: String,
    },
    /// A file could not be read or written.
    #[error("{doing} `{path}`: {source}")]
    Io {
        /// What was being done.
        doing: &'static str,
        /// The file.
        path: PathBuf,
        /// The error.
        source: std::io::Error,
    },
    /// The state database failed.
    #[error(transparent)]
    Store(#[from] toolgate_store::StoreError),
    /// The encrypted store (manifests) failed.
    #[error(transparent)]
    Secret(#[from] toolgate_store::SecretError),
    /// No installed tool has this name.
    #[error("no WASM tool named `{name}` is installed; `toolgate wasm list` shows them")]
    NotInstalled {
        /// The name.
        name: String,
    },
}

impl WasmError {
    pub(crate) fn engine(e: impl std::fmt::Display) -> Self {
        WasmError::Engine { detail: format!("{e:#}") }
    }

    /// The error as a model reads it when `tool` failed during a call.
    pub fn into_tool_error(self, tool: &str) -> ToolError {
        match self {
            WasmError::Deadline { after } => ToolError::Timeout { tool: tool.to_owned(), after },
            other => ToolError::failed(format!("WASM tool `{tool}`: {other}")),
        }
    }
}
