//! Installed tools: the component files under `.toolgate/tools/`, and for each one a manifest
//! (BLAKE3 of the file, capabilities, what it described) sealed in the state database's
//! encrypted store (AES-256-GCM authenticates it, so a manifest cannot be forged beside a
//! swapped file). Every load checks the file against its manifest.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use toolgate_store::{SecretStore, Store};

use crate::runtime::WasmRuntime;
use crate::{Capabilities, Services, WasmError, WasmTool};

/// Manifests are stored under this prefix in the store's encrypted key-value table; the
/// `secrets` capability never sees these names.
pub const MANIFEST_PREFIX: &str = "wasm-tool:";

/// A component's BLAKE3 hash, in hex: what a manifest pins and an approval shows.
pub fn component_hash(bytes: &[u8]) -> String {
    blake3::hash(bytes).to_hex().to_string()
}

/// What is recorded about one installed tool.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct InstalledTool {
    /// The installed name (the tool is `wasm__NAME`).
    pub name: String,
    /// The component file.
    pub file: PathBuf,
    /// BLAKE3 of the file at install (hex).
    pub hash: String,
    /// Its size in bytes.
    pub size: u64,
    /// What it was granted.
    pub capabilities: Capabilities,
    /// What `describe` said at install.
    pub description: String,
    /// Its parameters' schema at install.
    pub input_schema: serde_json::Value,
    /// When, in Unix milliseconds.
    pub installed_ms: i64,
}

/// Installs, lists, removes and loads WASM tools of one workspace.
#[derive(Debug, Clone)]
pub struct Installer {
    runtime: WasmRuntime,
    dir: PathBuf,
    store: Arc<Store>,
}

impl Installer {
    /// An installer keeping component files in `dir` (`.toolgate/tools`) and manifests in
    /// `store`.
    pub fn new(runtime: WasmRuntime, dir: impl Into<PathBuf>, store: Arc<Store>) -> Self {
        Installer { runtime, dir: dir.into(), store }
    }

    /// The runtime.
    pub fn runtime(&self) -> &WasmRuntime {
        &self.runtime
    }

    /// Validates, compiles and describes `file`, then copies it in as `name` (default: the
    /// name it describes) with `caps`. Replaces a tool of the same name.
    pub async fn install(
        &self,
        file: &Path,
        name: Option<&str>,
        caps: Capabilities,
    ) -> Result<InstalledTool, WasmError> {
        caps.validate()?;
        let limit = self.runtime.limits_for(&caps).component_bytes;
        let io = |doing, e| WasmError::Io { doing, path: file.to_owned(), source: e };
        let size = std::fs::metadata(file).map_err(|e| io("reading", e))?.len();
        if size > limit {
            return Err(WasmError::TooLarge { size, limit });
        }
        let bytes = std::fs::read(file).map_err(|e| io("reading", e))?;
        self.install_bytes(&bytes, name, caps).await
    }

    /// [`Installer::install`] of a component already read (the bytes a person approved).
    pub async fn install_bytes(
        &self,
        bytes: &[u8],
        name: Option<&str>,
        caps: Capabilities,
    ) -> Result<InstalledTool, WasmError> {
        caps.validate()?;
        let limit = self.runtime.limits_for(&caps).component_bytes;
        if bytes.len() as u64 > limit {
            return Err(WasmError::TooLarge { size: bytes.len() as u64, limit });
        }
        let prepared = self.runtime.prepare(bytes, &caps).await?;
        let name = name.unwrap_or(&prepared.description.name).to_owned();
        check_name(&name)?;
        std::fs::create_dir_all(&self.dir).map_err(|e| WasmError::Io {
            doing: "creating",
            path: self.dir.clone(),
            source: e,
        })?;
        let target = self.dir.join(format!("{name}.wasm"));
        write_atomic(&target, bytes)?;
        let caps_file = self.dir.join(format!("{name}.capabilities.json"));
        let caps_text =
            serde_json::to_string_pretty(&caps).map_err(|e| WasmError::BadCapabilities { detail: e.to_string() })?;
        write_atomic(&caps_file, caps_text.as_bytes())?;
        let installed = InstalledTool {
            name: name.clone(),
            file: target,
            hash: prepared.hash.clone(),
            size: bytes.len() as u64,
            capabilities: caps,
            description: prepared.description.description.clone(),
            input_schema: prepared.description.input_schema.clone(),
            installed_ms: now_ms(),
        };
        let manifest =
            serde_json::to_vec(&installed).map_err(|e| WasmError::BadCapabilities { detail: e.to_string() })?;
        self.store.secret_put(&format!("{MANIFEST_PREFIX}{name}"), &manifest)?;
        Ok(installed)
    }

    /// Every installed tool, by name.
    pub fn list(&self) -> Result<Vec<InstalledTool>, WasmError> {
        let mut out = Vec::new();
        for key in self.store.secret_keys(MANIFEST_PREFIX)? {
            if let Some(name) = key.strip_prefix(MANIFEST_PREFIX) {
                out.push(self.get(name)?);
            }
        }
        Ok(out)
    }

    /// The manifest of `name`.
    pub fn get(&self, name: &str) -> Result<InstalledTool, WasmError> {
        let raw = self
            .store
            .secret_get(&format!("{MANIFEST_PREFIX}{name}"))?
            .ok_or_else(|| WasmError::NotInstalled { name: name.to_owned() })?;
        serde_json::from_slice(&raw)
            .map_err(|e| WasmError::BadCapabilities { detail: format!("the manifest of `{name}` is unreadable: {e}") })
    }

    /// Removes `name` (its manifest and files).
    pub fn remove(&self, name: &str) -> Result<InstalledTool, WasmError> {
        let installed = self.get(name)?;
        self.store.secret_delete(&format!("{MANIFEST_PREFIX}{name}"))?;
        for f in [installed.file.clone(), self.dir.join(format!("{name}.capabilities.json"))] {
            match std::fs::remove_file(&f) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(WasmError::Io { doing: "removing", path: f, source: e }),
            }
        }
        Ok(installed)
    }

    /// Checks the installed file against its manifest's BLAKE3 hash.
    pub fn verify(&self, installed: &InstalledTool) -> Result<(), WasmError> {
        self.read_verified(installed).map(drop)
    }

    fn read_verified(&self, installed: &InstalledTool) -> Result<Vec<u8>, WasmError> {
        let bytes = std::fs::read(&installed.file).map_err(|e| WasmError::Io {
            doing: "reading",
            path: installed.file.clone(),
            source: e,
        })?;
        let actual = component_hash(&bytes);
        if actual != installed.hash {
            let (path, expected) = (installed.file.clone(), installed.hash.clone());
            return Err(WasmError::Tampered { path, expected, actual });
        }
        Ok(bytes)
    }

    /// Loads `name` as a tool, after checking its file against the manifest.
    pub async fn load(&self, name: &str, services: Services) -> Result<WasmTool, WasmError> {
        self.load_installed(self.get(name)?, services).await
    }

    /// Loads every installed tool; the ones that fail (an unreadable manifest too) come back
    /// with their error. Each manifest is decrypted once.
    pub async fn load_all(&self, services: &Services) -> Result<Vec<Result<WasmTool, (String, WasmError)>>, WasmError> {
        let mut out = Vec::new();
        for key in self.store.secret_keys(MANIFEST_PREFIX)? {
            let Some(name) = key.strip_prefix(MANIFEST_PREFIX) else { continue };
            let loaded = match self.get(name) {
                Ok(installed) => self.load_installed(installed, services.clone()).await,
                Err(e) => Err(e),
            };
            out.push(loaded.map_err(|e| (name.to_owned(), e)));
        }
        Ok(out)
    }

    async fn load_installed(&self, installed: InstalledTool, services: Services) -> Result<WasmTool, WasmError> {
        let bytes = self.read_verified(&installed)?;
        let prepared = self.runtime.prepare(&bytes, &installed.capabilities).await?;
        Ok(WasmTool::new(self.runtime.clone(), prepared, &installed.name, installed.capabilities, services))
    }
}

/// `[a-z0-9_-]{1,48}` (the registry name is `wasm__NAME`, at most 64 characters).
fn check_name(name: &str) -> Result<(), WasmError> {
    if name.is_empty()
        || name.len() > 48
        || name.contains("__")
        || !name.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_' || b == b'-')
    {
        return Err(WasmError::BadDescription {
            detail: format!("tool name `{}` must be 1-48 of a-z, 0-9, `_`, `-` without `__`", name.escape_debug()),
        });
    }
    Ok(())
}

fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), WasmError> {
    write_file_atomic(path, bytes).map_err(|e| WasmError::Io { doing: "writing", path: path.to_owned(), source: e })
}

/// Writes `bytes` to a uniquely named file beside `path`, then renames it over `path`: a reader
/// never sees half a file, and two writers (two components compiled at once) never share a
/// temporary file, so a file's name always matches its content.
pub(crate) fn write_file_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    let dir = path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
    let mut tmp = tempfile::NamedTempFile::new_in(dir)?;
    tmp.write_all(bytes)?;
    tmp.persist(path).map_err(|e| e.error)?;
    Ok(())
}

fn now_ms() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_millis() as i64).unwrap_or(0)
}
