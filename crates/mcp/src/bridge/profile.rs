//! The sandbox a stdio server runs in: `[mcp.servers.NAME.sandbox]` and the defaults, turned
//! into a [`SandboxPolicy`] for the sandbox `exec` uses.
//!
//! The default profile, for a server whose supply chain nobody checked:
//! - **reads** the system paths every sandboxed program reads (`/usr`, `/etc` without its
//!   secrets, toolgate's `PATH`, ...), the workspace, its `cwd`, and the server's own installation: the
//!   prefix its program (and a script's `#!` interpreter) lives in (`venv/bin/python` → `venv`,
//!   through symlinks too), the folder
//!   or `node_modules` tree of any argument that is a path, and a launcher's cache (`~/.npm`
//!   for `npx`, `~/.cache/uv` for `uvx`);
//! - **writes** its own state folder `.toolgate/mcp/NAME/` (the rest of `.toolgate`, where the
//!   secrets are, stays hidden), a private temporary folder, and the launcher's cache;
//! - has **no network**; a launcher (`npx`, `uvx`) gets a network of its own whose only way out
//!   is toolgate's vetting proxy, to its package registry.
//!
//! `read`, `write`, `network = "proxy"` with `allow_hosts`, and `network = "host"` widen it;
//! `enabled = false` drops it (logged).

use std::path::{Component, Path, PathBuf};

use toolgate_sandbox::{Network, ResourceLimits, SandboxMode, SandboxPolicy};

use toolgate_fetch::proxy::AllowHosts;

use super::config::{ServerConfig, ServerNetwork, expand_env};

/// A long-lived server is not a command: no CPU-time limit (it would end a busy server after
/// ten minutes of work), and room for runtimes that reserve large address ranges up front
/// (V8's WebAssembly cage); the rest as for `exec`.
fn server_limits() -> ResourceLimits {
    ResourceLimits { cpu_seconds: u64::MAX, address_space_bytes: 64 << 30, ..ResourceLimits::default() }
}

/// A server's profile, resolved against the machine.
#[derive(Debug, Clone)]
pub(crate) struct Profile {
    /// What the sandbox enforces.
    pub policy: SandboxPolicy,
    /// `.toolgate/mcp/NAME` (created).
    pub state_dir: PathBuf,
    /// Entries that allow more than a profile should (`/`, the home folder, the host's
    /// network), said in the log.
    pub warnings: Vec<String>,
    /// With a proxied network: what the proxy lets through.
    pub proxy: Option<Proxied>,
}

/// A proxied network's allow list.
#[derive(Debug, Clone)]
pub(crate) struct Proxied {
    /// `allow_hosts` and the launcher's registries.
    pub allow: AllowHosts,
    /// The registries added for the launcher, said in the log.
    pub registries: Vec<String>,
}

/// The proxy's port inside the server's own network namespace (nothing else listens there).
pub(crate) const PROXY_PORT: u16 = 3128;

/// The package registries a launcher fetches from.
fn launcher_registries(program: &Path) -> &'static [&'static str] {
    match program.file_name().and_then(|n| n.to_str()) {
        Some("npx" | "npm") => &["registry.npmjs.org"],
        Some("uvx" | "uv") => &["pypi.org", "files.pythonhosted.org"],
        _ => &[],
    }
}

impl Profile {
    /// One line for `toolgate mcp list` and the log.
    pub(crate) fn summary(&self) -> String {
        let network = match (&self.proxy, self.policy.network) {
            (Some(proxied), _) if proxied.allow.is_empty() => {
                "network through toolgate's proxy (no host allowed)".to_owned()
            }
            (Some(proxied), _) if !proxied.registries.is_empty() => {
                format!("network through toolgate's proxy (with its registries: {})", proxied.registries.join(", "))
            }
            (Some(_), _) => "network through toolgate's proxy".to_owned(),
            (None, Network::Off) => "network off".to_owned(),
            (None, Network::On) => "network host".to_owned(),
        };
        format!(
            "sandboxed: reads the workspace and {} more path(s), writes {} and {} more, {network}",
            self.policy.extra_readable.len(),
            self.state_dir.display(),
            self.policy.extra_writable.len().saturating_sub(1),
        )
    }
}

/// The profile of server `name` started as `program` in `cwd`; `None` when its sandbox is off.
/// Errors are configuration errors (an unset variable, a `write` entry that is a symlink out of
/// the workspace) for a message that names the entry.
pub(crate) fn resolve(
    name: &str,
    config: &ServerConfig,
    workspace: &Path,
    program: &Path,
    cwd: &Path,
) -> Result<Option<Profile>, String> {
    let sandbox = &config.sandbox;
    if !sandbox.enabled {
        return Ok(None);
    }
    let workspace = workspace.canonicalize().map_err(|e| format!("workspace {}: {e}", workspace.display()))?;
    let home = std::env::var_os("HOME").map(PathBuf::from).filter(|h| h.is_absolute());
    let state_dir = workspace.join(".toolgate/mcp").join(name);
    // In `.toolgate/`, which is its owner's alone (0700).
    std::os::unix::fs::DirBuilderExt::mode(std::fs::DirBuilder::new().recursive(true), 0o700)
        .create(&state_dir)
        .map_err(|e| format!("cannot create the server's state folder {}: {e}", state_dir.display()))?;

    let mut read = installation(program, cwd, &config.args);
    // The working directory the user configured (`npx` finds a package installed there).
    if let Ok(cwd) = cwd.canonicalize()
        && !cwd.starts_with(&workspace)
        && !is_system_root(&cwd)
    {
        read.push(cwd);
    }
    let mut write = vec![state_dir.clone()];
    for cache in launcher_caches(program, home.as_deref()) {
        if cache.is_dir() {
            write.push(cache);
        }
    }
    let mut warnings = Vec::new();
    for (key, entries, into) in [("read", &sandbox.read, &mut read), ("write", &sandbox.write, &mut write)] {
        for entry in entries {
            let path = expand_path(entry, &workspace, home.as_deref())
                .map_err(|e| format!("[mcp.servers.{name}.sandbox] {key} `{entry}`: {e}"))?;
            if key == "write" {
                check_stays_inside(entry, &path, &workspace)
                    .map_err(|e| format!("[mcp.servers.{name}.sandbox] write `{entry}`: {e}"))?;
            }
            if let Some(warning) = too_wide(&path, home.as_deref()) {
                warnings.push(format!("[mcp.servers.{name}.sandbox] {key} `{entry}` {warning}"));
            }
            into.push(path);
        }
    }
    let registries = launcher_registries(program);
    let network =
        sandbox.network.unwrap_or(if registries.is_empty() { ServerNetwork::Off } else { ServerNetwork::Proxy });
    let proxy = match network {
        ServerNetwork::Proxy => {
            let setting = format!("[mcp.servers.{name}.sandbox] allow_hosts");
            let mut allow =
                AllowHosts::parse(&sandbox.allow_hosts, setting.clone()).map_err(|e| format!("{setting}: {e}"))?;
            let registries: Vec<String> = registries.iter().map(|r| r.to_string()).collect();
            allow.extend(&AllowHosts::parse(&registries, setting).map_err(|e| e.to_string())?);
            Some(Proxied { allow, registries })
        }
        ServerNetwork::Host => {
            warnings.push(format!("[mcp.servers.{name}.sandbox] network = \"host\": the server reaches any host"));
            None
        }
        ServerNetwork::Off => None,
    };
    read.sort();
    read.dedup();
    write.sort();
    write.dedup();
    let policy = SandboxPolicy {
        mode: SandboxMode::ReadOnly,
        network: if network == ServerNetwork::Host { Network::On } else { Network::Off },
        proxy_port: proxy.as_ref().map(|_| PROXY_PORT),
        workspace,
        extra_writable: write,
        extra_readable: read,
        limits: server_limits(),
        ..SandboxPolicy::default()
    };
    Ok(Some(Profile { policy, state_dir, warnings, proxy }))
}

/// The folders the server's own code lives in: for its program (before and after symlinks) and
/// each argument naming a path, the project of the `node_modules` tree it is in, else the
/// program's prefix or the argument's folder.
fn installation(program: &Path, cwd: &Path, args: &[String]) -> Vec<PathBuf> {
    let mut dirs = Vec::new();
    let mut add = |dir: Option<PathBuf>| {
        if let Some(dir) = dir.filter(|d| !is_system_root(d)) {
            dirs.push(dir);
        }
    };
    if program.is_absolute() {
        // A script's interpreter too (a venv's entry point runs the venv's python, which is a
        // symlink into the Python it was made from).
        let interpreter = shebang(program);
        for path in [Some(program.to_path_buf()), program.canonicalize().ok(), interpreter.clone()]
            .into_iter()
            .chain([interpreter.and_then(|i| i.canonicalize().ok())])
            .flatten()
        {
            add(node_project(&path).or_else(|| prefix(&path)));
        }
        // pyenv's shims run pyenv itself, which reads its whole tree.
        if let Some(root) = program.ancestors().find(|a| a.file_name().is_some_and(|n| n == ".pyenv")) {
            add(Some(root.to_path_buf()));
        }
    }
    for arg in args {
        let path = cwd.join(arg.trim_start_matches("--").split_once('=').map_or(arg.as_str(), |(_, v)| v));
        let Ok(path) = path.canonicalize() else { continue };
        add(node_project(&path)
            .or_else(|| if path.is_dir() { Some(path.clone()) } else { path.parent().map(Path::to_path_buf) }));
    }
    dirs
}

/// The interpreter a script names on its `#!` line (`/usr/bin/env` is left to `PATH`).
fn shebang(program: &Path) -> Option<PathBuf> {
    use std::io::Read;
    let mut head = [0u8; 256];
    let n = std::fs::File::open(program).and_then(|mut f| f.read(&mut head)).ok()?;
    let line = head[..n].strip_prefix(b"#!")?.split(|&b| b == b'\n').next()?;
    let interpreter = std::str::from_utf8(line).ok()?.split_whitespace().next()?;
    Some(PathBuf::from(interpreter)).filter(|p| p.is_absolute())
}

/// The folder holding the outermost `node_modules` above `path` (Node resolves packages up
/// through every `node_modules` there).
fn node_project(path: &Path) -> Option<PathBuf> {
    path.ancestors()
        .filter(|a| a.file_name().is_some_and(|n| n == "node_modules"))
        .last()?
        .parent()
        .map(Path::to_path_buf)
}

/// `PREFIX` of `PREFIX/bin/program`, else the program's folder.
fn prefix(program: &Path) -> Option<PathBuf> {
    let dir = program.parent()?;
    if dir.file_name().is_some_and(|n| n == "bin") {
        dir.parent().map(Path::to_path_buf)
    } else {
        Some(dir.to_path_buf())
    }
}

/// `/` and the system folders every profile reads anyway (adding `/` would open everything).
fn is_system_root(dir: &Path) -> bool {
    dir.components().filter(|c| matches!(c, Component::Normal(_))).count() == 0
        || ["/usr", "/bin", "/sbin", "/lib", "/lib64", "/etc", "/var", "/opt"].iter().any(|s| dir == Path::new(s))
}

/// Where `npx` and `uvx` keep the packages they fetch: the server needs to read and update them.
fn launcher_caches(program: &Path, home: Option<&Path>) -> Vec<PathBuf> {
    let Some(home) = home else { return Vec::new() };
    match program.file_name().and_then(|n| n.to_str()) {
        Some("npx" | "npm") => vec![home.join(".npm")],
        Some("uvx" | "uv") => vec![home.join(".cache/uv"), home.join(".local/share/uv")],
        _ => Vec::new(),
    }
}

/// `~/x`, `${VAR}/x`, an absolute path, or a path relative to the workspace.
fn expand_path(entry: &str, workspace: &Path, home: Option<&Path>) -> Result<PathBuf, String> {
    let expanded = expand_env(entry)?;
    let path = match expanded.strip_prefix('~') {
        Some(rest) if rest.is_empty() || rest.starts_with('/') => {
            let home = home.ok_or("`~` needs HOME to be set")?;
            home.join(rest.trim_start_matches('/'))
        }
        _ => PathBuf::from(&expanded),
    };
    Ok(if path.is_absolute() { path } else { workspace.join(path) })
}

/// A workspace-relative `write` entry that resolves outside the workspace (a symlink planted
/// by whoever could write the workspace) is refused: write access goes where the link points.
fn check_stays_inside(entry: &str, path: &Path, workspace: &Path) -> Result<(), String> {
    if Path::new(entry).is_absolute() || entry.starts_with('~') || entry.starts_with("${") {
        return Ok(());
    }
    let resolved = path.canonicalize().unwrap_or_else(|_| path.to_path_buf());
    if resolved.starts_with(workspace) && !path.components().any(|c| c == Component::ParentDir) {
        return Ok(());
    }
    Err(format!("it resolves to {}, outside the workspace; write that path itself if it is meant", resolved.display()))
}

/// Why an entry is wider than a profile should be, if it is.
fn too_wide(path: &Path, home: Option<&Path>) -> Option<&'static str> {
    if path.components().filter(|c| matches!(c, Component::Normal(_))).count() == 0 {
        Some("allows the whole file system")
    } else if home.is_some_and(|h| path == h) {
        Some("allows the whole home folder (SSH keys, cloud credentials, other projects)")
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bridge::ServerSandbox;

    fn stdio(args: &[&str], sandbox: ServerSandbox) -> ServerConfig {
        ServerConfig {
            command: Some("node".into()),
            args: args.iter().map(|a| a.to_string()).collect(),
            sandbox,
            ..ServerConfig::default()
        }
    }

    #[test]
    fn the_default_reads_the_installation_and_writes_the_state_folder() {
        let ws = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let script = ws.path().join("tools/node_modules/pkg/dist/index.js");
        std::fs::create_dir_all(script.parent().unwrap_or(ws.path())).unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(&script, "").unwrap_or_else(|e| panic!("{e}"));
        let config = stdio(&["tools/node_modules/pkg/dist/index.js"], ServerSandbox::default());
        let profile = resolve("demo", &config, ws.path(), Path::new("/opt/node/bin/node"), ws.path())
            .unwrap_or_else(|e| panic!("{e}"))
            .unwrap_or_else(|| panic!("sandboxed by default"));
        let ws = ws.path().canonicalize().unwrap_or_else(|e| panic!("{e}"));
        assert!(profile.policy.extra_readable.contains(&PathBuf::from("/opt/node")));
        assert!(profile.policy.extra_readable.contains(&ws.join("tools")), "{:?}", profile.policy.extra_readable);
        assert_eq!(profile.policy.extra_writable, vec![ws.join(".toolgate/mcp/demo")]);
        assert!(profile.state_dir.is_dir());
        assert_eq!(profile.policy.mode, SandboxMode::ReadOnly);
        assert_eq!(profile.policy.network, Network::Off);
        assert!(profile.warnings.is_empty());
    }

    #[test]
    fn wide_entries_warn_and_a_symlink_out_of_the_workspace_is_refused() {
        let ws = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let outside = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        std::os::unix::fs::symlink(outside.path(), ws.path().join("out")).unwrap_or_else(|e| panic!("{e}"));
        let wide = ServerSandbox { read: vec!["/".into()], ..ServerSandbox::default() };
        let profile = resolve("demo", &stdio(&[], wide), ws.path(), Path::new("node"), ws.path())
            .unwrap_or_else(|e| panic!("{e}"))
            .unwrap_or_else(|| panic!("sandboxed"));
        assert!(profile.warnings.iter().any(|w| w.contains("whole file system")), "{:?}", profile.warnings);

        let linked = ServerSandbox { write: vec!["out".into()], ..ServerSandbox::default() };
        let err = resolve("demo", &stdio(&[], linked), ws.path(), Path::new("node"), ws.path()).unwrap_err();
        assert!(err.contains("write `out`") && err.contains("outside the workspace"), "{err}");
        let climbing = ServerSandbox { write: vec!["../x".into()], ..ServerSandbox::default() };
        assert!(resolve("demo", &stdio(&[], climbing), ws.path(), Path::new("node"), ws.path()).is_err());

        // A launcher reaches its registry through the proxy unless told otherwise.
        let npx =
            resolve("demo", &stdio(&[], ServerSandbox::default()), ws.path(), Path::new("/usr/bin/npx"), ws.path())
                .unwrap_or_else(|e| panic!("{e}"))
                .unwrap_or_else(|| panic!("sandboxed"));
        assert_eq!(npx.proxy.as_ref().map(|p| p.registries.clone()), Some(vec!["registry.npmjs.org".to_owned()]));
        assert_eq!(npx.policy.proxy_port, Some(PROXY_PORT));
        let offline = ServerSandbox { network: Some(ServerNetwork::Off), ..ServerSandbox::default() };
        let npx = resolve("demo", &stdio(&[], offline), ws.path(), Path::new("/usr/bin/npx"), ws.path())
            .unwrap_or_else(|e| panic!("{e}"))
            .unwrap_or_else(|| panic!("sandboxed"));
        assert!(npx.proxy.is_none() && npx.policy.proxy_port.is_none());
        let host = ServerSandbox { network: Some(ServerNetwork::Host), ..ServerSandbox::default() };
        let profile = resolve("demo", &stdio(&[], host), ws.path(), Path::new("node"), ws.path())
            .unwrap_or_else(|e| panic!("{e}"))
            .unwrap_or_else(|| panic!("sandboxed"));
        assert!(profile.warnings.iter().any(|w| w.contains("reaches any host")), "{:?}", profile.warnings);

        let off = ServerSandbox { enabled: false, ..ServerSandbox::default() };
        assert!(resolve("demo", &stdio(&[], off), ws.path(), Path::new("node"), ws.path()).is_ok_and(|p| p.is_none()));
    }
}
