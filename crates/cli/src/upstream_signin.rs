//! The page's per-user sign-ins to bridged MCP servers (`toolgate_gateway::page::UpstreamSignIns`),
//! over the gateway's vault: the same records `toolgate mcp login NAME --user USER` writes
//! (`mcp.user.USER.oauth.NAME`, `mcp.user.USER.key.NAME`), through a [`UserVault`] that can reach
//! that user's records only. Which servers count is read from the configuration in force (a
//! reload that adds one shows it).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use toolgate::core::async_trait;
use toolgate::gateway::{UpstreamKind, UpstreamServer, UpstreamSignIns};
use toolgate::reload::ConfigControl;
use toolgate_mcp::bridge::ServerConfig;
use toolgate_mcp::bridge::oauth::{self, PendingLogin, SecretVault, UserVault};

/// How long a begun sign-in waits for its redirect.
const PENDING_FOR: Duration = Duration::from_secs(10 * 60);
/// Sign-ins waiting at once; the oldest is dropped past this (each holds little, but a user
/// could start many).
const MAX_PENDING: usize = 256;

/// [`UpstreamSignIns`] of one gateway.
pub(crate) struct PageSignIns {
    config: Arc<ConfigControl>,
    vault: Arc<dyn SecretVault>,
    /// Begun sign-ins by their `state`: whose, since when.
    pending: Mutex<HashMap<String, (String, Instant, PendingLogin)>>,
}

impl std::fmt::Debug for PageSignIns {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PageSignIns").finish_non_exhaustive()
    }
}

impl PageSignIns {
    pub(crate) fn new(config: Arc<ConfigControl>, vault: Arc<dyn SecretVault>) -> Self {
        PageSignIns { config, vault, pending: Mutex::default() }
    }

    fn mine(&self, user: &str) -> UserVault {
        UserVault::new(Arc::clone(&self.vault), user)
    }

    /// Server `name` if users sign in to it for themselves.
    fn server(&self, name: &str) -> Result<(ServerConfig, UpstreamKind), String> {
        let config = self.config.current();
        let server = config.mcp.servers.get(name).filter(|s| s.enabled && s.url.is_some());
        match server.and_then(|s| kind(s).map(|k| (s.clone(), k))) {
            Some(found) => Ok(found),
            None => Err(format!("there is no server `{name}` you sign in to for yourself")),
        }
    }
}

/// How users sign in to `server` for themselves, or `None` (shared, or stdio).
fn kind(server: &ServerConfig) -> Option<UpstreamKind> {
    if server.shared || server.url.is_none() {
        None
    } else if server.user_key_header.is_some() {
        Some(UpstreamKind::Key)
    } else {
        Some(UpstreamKind::OAuth)
    }
}

#[async_trait]
impl UpstreamSignIns for PageSignIns {
    fn servers(&self, user: &str) -> Vec<UpstreamServer> {
        let config = self.config.current();
        let mine = self.mine(user);
        config
            .mcp
            .servers
            .iter()
            .filter(|(_, s)| s.enabled)
            .filter_map(|(name, s)| {
                let kind = kind(s)?;
                let record = match kind {
                    UpstreamKind::OAuth => oauth::vault_key(name),
                    UpstreamKind::Key => oauth::key_vault_key(name),
                };
                let signed_in = mine.get(&record).ok().flatten().is_some();
                Some(UpstreamServer { name: name.clone(), kind, signed_in })
            })
            .collect()
    }

    async fn begin(&self, user: &str, server: &str, redirect_uri: &str) -> Result<String, String> {
        let (config, kind) = self.server(server)?;
        if kind != UpstreamKind::OAuth {
            return Err(format!("`{server}` takes a key, not a sign-in: paste yours in its form"));
        }
        let vault: Arc<dyn SecretVault> = Arc::new(self.mine(user));
        let login = oauth::begin_login(server, &config, vault, redirect_uri).await.map_err(|e| e.to_string())?;
        let url = login.authorization_url().to_owned();
        let mut pending = self.pending.lock().unwrap_or_else(PoisonError::into_inner);
        pending.retain(|_, (_, since, _)| since.elapsed() < PENDING_FOR);
        if pending.len() >= MAX_PENDING
            && let Some(oldest) = pending.iter().min_by_key(|(_, (_, since, _))| *since).map(|(s, _)| s.clone())
        {
            pending.remove(&oldest);
        }
        pending.insert(login.state().to_owned(), (user.to_owned(), Instant::now(), login));
        Ok(url)
    }

    async fn finish(&self, user: &str, state: &str, code: &str, issuer: Option<&str>) -> Result<String, String> {
        // Used up whatever happens next: a state works once.
        let found = self.pending.lock().unwrap_or_else(PoisonError::into_inner).remove(state);
        let Some((owner, since, login)) = found else {
            return Err("this sign-in is unknown or was used already; start it again from the page".to_owned());
        };
        if owner != user {
            tracing::warn!(user, "refused an upstream sign-in redirect begun by another user");
            return Err("this sign-in was not started by you; start your own from the page".to_owned());
        }
        if since.elapsed() >= PENDING_FOR {
            return Err("this sign-in took longer than 10 minutes; start it again from the page".to_owned());
        }
        let server = login.server().to_owned();
        login.finish(code, issuer).await.map_err(|e| e.to_string())?;
        Ok(server)
    }

    fn set_key(&self, user: &str, server: &str, key: &str) -> Result<(), String> {
        let (_, kind) = self.server(server)?;
        if kind != UpstreamKind::Key {
            return Err(format!("`{server}` takes a sign-in, not a key"));
        }
        crate::mcp::check_key(key)?;
        self.mine(user).put(&oauth::key_vault_key(server), key.as_bytes()).map_err(|e| e.to_string())
    }

    fn sign_out(&self, user: &str, server: &str) -> Result<bool, String> {
        let (_, kind) = self.server(server)?;
        let mine = self.mine(user);
        match kind {
            UpstreamKind::OAuth => oauth::logout(server, &mine).map_err(|e| e.to_string()),
            UpstreamKind::Key => mine.delete(&oauth::key_vault_key(server)).map_err(|e| e.to_string()),
        }
    }
}
