//! OAuth 2.1 with PKCE (S256) for bridged HTTP servers, on rmcp's auth machinery.
//!
//! - [`login`] (behind `toolgate mcp login NAME`): discover the server's authorization server
//!   (RFC 9728 protected-resource metadata, then RFC 8414 authorization-server metadata),
//!   register the client (a pre-registered `client_id`, else a client ID metadata document when
//!   configured and supported, else dynamic client registration), send the user's browser to the
//!   authorization URL, take the redirect on a loopback listener, check `state`, exchange the
//!   code with the PKCE verifier, and store the credentials in the [`SecretVault`].
//! - [`authorized_client`]: for the bridge, an HTTP client that adds the stored token, refreshes
//!   it when it is about to expire, and on a 401 refreshes once and retries once; a second 401
//!   is an error telling the user to sign in again.
//! - [`logout`]: forget the stored credentials.
//!
//! Credentials live in the vault under `mcp.oauth.NAME` (rmcp's `StoredCredentials` as JSON;
//! the `toolgate` crate encrypts them with AES-256-GCM). No token is ever logged or put in an
//! error message.
//!
//! - `oauth/vault.rs`: the vault trait and rmcp's credential store over it.
//! - `oauth/callback.rs`: the loopback redirect listener.
//! - `oauth/client.rs`: the bridge's HTTP client.

mod callback;
mod client;
mod vault;

use std::sync::Arc;
use std::time::Duration;

use rmcp::transport::auth::{
    AuthClient, AuthError, AuthorizationManager, AuthorizationMetadataSource, AuthorizationRequest,
    AuthorizationSession, OAuthClientConfig,
};
use tokio::net::TcpListener;
use tokio::time::Instant;

use super::{ServerConfig, expand_env};
use callback::{CALLBACK_PATH, Page, Redirect, printable};
pub use client::{AuthorizedClient, login_required_message};
use vault::VaultCredentialStore;
pub use vault::{
    KEY_VAULT_PREFIX, SecretVault, USER_VAULT_PREFIX, UserVault, VAULT_PREFIX, VaultError, key_vault_key,
    parse_user_key_vault_key, parse_user_vault_key, user_key_vault_key, user_vault_key, vault_key,
};

/// How long [`login`] waits for the browser by default.
pub const DEFAULT_LOGIN_TIMEOUT: Duration = Duration::from_secs(5 * 60);

/// The client name sent with dynamic client registration.
const CLIENT_NAME: &str = "toolgate";

/// Why signing in to a server, or using its stored credentials, failed. Every message names
/// the server and says what to do; none contains a token.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum OAuthError {
    /// The server entry cannot use OAuth (no `url`, or a setting that does not expand).
    #[error("[mcp.servers.{server}]: {problem}")]
    Config {
        /// The server's name.
        server: String,
        /// What is wrong.
        problem: String,
    },
    /// The server publishes no OAuth metadata, so there is nothing to sign in to.
    #[error(
        "MCP server `{server}` publishes no OAuth metadata (RFC 9728 protected-resource or RFC 8414 authorization-server metadata); it may not need a login, or it expects a token in `headers`"
    )]
    NoOAuth {
        /// The server's name.
        server: String,
    },
    /// Metadata discovery failed.
    #[error("cannot find out how to sign in to MCP server `{server}`: {detail}")]
    Discovery {
        /// The server's name.
        server: String,
        /// What went wrong (server text made printable and short).
        detail: String,
    },
    /// No way to get a client ID.
    #[error(
        "cannot register toolgate with the authorization server of MCP server `{server}`: {detail}. If the provider needs a pre-registered app, register one (redirect URI http://127.0.0.1:PORT/callback with a fixed `redirect_port`) and set `client_id` (and `client_secret`) in [mcp.servers.{server}.oauth]"
    )]
    Registration {
        /// The server's name.
        server: String,
        /// What went wrong.
        detail: String,
    },
    /// The loopback listener for the redirect could not be opened.
    #[error(
        "cannot listen on 127.0.0.1:{port} for the sign-in redirect: {source}; choose another `redirect_port` in [mcp.servers.{server}.oauth] (or remove it to use any free port)"
    )]
    Listen {
        /// The server's name.
        server: String,
        /// The port asked for (0: any).
        port: u16,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The browser did not come back in time.
    #[error(
        "no sign-in redirect arrived within {} s; run `toolgate mcp login {server}` again and finish signing in in the browser", timeout.as_secs()
    )]
    Timeout {
        /// The server's name.
        server: String,
        /// How long toolgate waited.
        timeout: Duration,
    },
    /// The authorization server refused (the user declined, or the request was invalid).
    #[error("the authorization server of MCP server `{server}` refused the sign-in: {error}")]
    Refused {
        /// The server's name.
        server: String,
        /// The `error` (and description) it sent, made printable.
        error: String,
    },
    /// Exchanging the code for tokens failed.
    #[error(
        "signing in to MCP server `{server}` failed while exchanging the authorization code: {detail}; run `toolgate mcp login {server}` again"
    )]
    Exchange {
        /// The server's name.
        server: String,
        /// What went wrong.
        detail: String,
    },
    /// The stored credentials exist but cannot be used any more; a new login is needed.
    #[error("the stored sign-in for MCP server `{server}` cannot be used ({why}); run `toolgate mcp login {server}`")]
    LoginRequired {
        /// The server's name.
        server: String,
        /// Why.
        why: String,
    },
    /// Reading or writing the token store failed.
    #[error("cannot use the stored OAuth credentials of MCP server `{server}`: {detail}")]
    Vault {
        /// The server's name.
        server: String,
        /// What the vault said.
        detail: String,
    },
    /// The HTTP client could not be built.
    #[error("cannot set up an HTTP client for MCP server `{server}`: {detail}")]
    Client {
        /// The server's name.
        server: String,
        /// What went wrong.
        detail: String,
    },
}

/// How the client got its ID.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Registration {
    /// `client_id` from the config.
    PreRegistered,
    /// The client ID metadata document URL from the config.
    MetadataDocument,
    /// Dynamic client registration at the authorization server.
    Dynamic,
}

/// What a successful [`login`] stored (no secrets).
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct LoginOutcome {
    /// The OAuth client ID used.
    pub client_id: String,
    /// How the client ID was obtained.
    pub registration: Registration,
    /// The scopes granted.
    pub scopes: Vec<String>,
    /// The access token's lifetime, when the server said.
    pub expires_in: Option<Duration>,
    /// Whether a refresh token was issued (without one, an expired token means a new login).
    pub refreshable: bool,
}

/// Knobs of [`login_with`].
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct LoginOptions {
    /// How long to wait for the browser's redirect.
    pub timeout: Duration,
}

impl Default for LoginOptions {
    fn default() -> Self {
        LoginOptions { timeout: DEFAULT_LOGIN_TIMEOUT }
    }
}

impl LoginOptions {
    /// Waits `timeout` for the redirect instead of five minutes.
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }
}

/// Installs rustls' ring provider as the process default (once; "already installed" is fine),
/// which reqwest needs before it can build a client that speaks https.
pub fn install_crypto_provider() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}

/// Signs in to server `name` through the browser and stores the credentials in `vault`.
/// `on_url` gets the authorization URL to open (the CLI prints it and tries `xdg-open`). Waits
/// up to five minutes for the redirect; see [`login_with`].
pub async fn login(
    name: &str,
    server: &ServerConfig,
    vault: Arc<dyn SecretVault>,
    on_url: impl FnOnce(&str) + Send,
) -> Result<LoginOutcome, OAuthError> {
    login_with(name, server, vault, LoginOptions::default(), on_url).await
}

/// [`login`] with options.
pub async fn login_with(
    name: &str,
    server: &ServerConfig,
    vault: Arc<dyn SecretVault>,
    options: LoginOptions,
    on_url: impl FnOnce(&str) + Send,
) -> Result<LoginOutcome, OAuthError> {
    let settings = server.oauth.clone().unwrap_or_default();
    let port = settings.redirect_port.unwrap_or(0);
    let listener = TcpListener::bind(("127.0.0.1", port)).await.map_err(|source| OAuthError::Listen {
        server: name.to_owned(),
        port,
        source,
    })?;
    let bound =
        listener.local_addr().map_err(|source| OAuthError::Listen { server: name.to_owned(), port, source })?.port();
    let redirect_uri = format!("http://127.0.0.1:{bound}{CALLBACK_PATH}");
    let pending = begin_login(name, server, vault, &redirect_uri).await?;

    on_url(pending.authorization_url());

    let deadline = Instant::now() + options.timeout;
    let (code, issuer, stream) = match callback::wait(&listener, pending.state(), deadline).await {
        Some(Redirect::Code { code, issuer, stream }) => (code, issuer, stream),
        Some(Redirect::Refused { error }) => return Err(OAuthError::Refused { server: name.to_owned(), error }),
        None => return Err(OAuthError::Timeout { server: name.to_owned(), timeout: options.timeout }),
    };
    drop(listener);
    let outcome = pending.finish(&code, issuer.as_deref()).await;
    callback::finish(stream, if outcome.is_ok() { Page::Done } else { Page::Failed }).await;
    outcome
}

/// A sign-in begun by [`begin_login`]: the browser is to be sent to
/// [`PendingLogin::authorization_url`], and the redirect's `code` handed to
/// [`PendingLogin::finish`] (a team gateway's page takes the redirect on its own callback URL).
pub struct PendingLogin {
    name: String,
    session: AuthorizationSession,
    store: VaultCredentialStore,
    auth_url: String,
    state: String,
    registration: Registration,
    metadata_url: Option<String>,
}

impl std::fmt::Debug for PendingLogin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PendingLogin").field("server", &self.name).finish_non_exhaustive()
    }
}

/// Discovers server `name`'s authorization server, registers the client for `redirect_uri`
/// when needed, and prepares the authorization URL (PKCE S256, a fresh `state`). The
/// credentials [`PendingLogin::finish`] gets are stored in `vault`.
pub async fn begin_login(
    name: &str,
    server: &ServerConfig,
    vault: Arc<dyn SecretVault>,
    redirect_uri: &str,
) -> Result<PendingLogin, OAuthError> {
    let url = server_url(name, server)?;
    let settings = server.oauth.clone().unwrap_or_default();
    let client_secret = settings
        .client_secret
        .as_deref()
        .map(expand_env)
        .transpose()
        .map_err(|e| config_err(name, format!("`oauth.client_secret`: {e}")))?;
    if client_secret.is_some() && settings.client_id.is_none() {
        return Err(config_err(name, "`oauth.client_secret` needs `oauth.client_id`".into()));
    }

    let mut manager = manager(name, url).await?;
    let store = VaultCredentialStore::new(vault, name);
    manager.set_credential_store(store.clone());

    // The 401 challenge names the server's metadata (RFC 9728 §5.1); without one, rmcp probes
    // the well-known locations.
    let challenge = probe_challenge(url).await;
    let resolution = manager
        .resolve_metadata_from_challenge(challenge.as_deref())
        .await
        .map_err(|e| OAuthError::Discovery { server: name.to_owned(), detail: describe(&e) })?;
    if resolution.source == AuthorizationMetadataSource::LegacyEndpointFallback {
        return Err(OAuthError::NoOAuth { server: name.to_owned() });
    }
    let cimd_supported = resolution
        .metadata
        .additional_fields
        .get("client_id_metadata_document_supported")
        .and_then(|v| v.as_bool())
        .unwrap_or(false);
    manager.set_metadata(resolution.metadata);

    let mut request = AuthorizationRequest::new(redirect_uri.to_owned()).with_client_name(CLIENT_NAME);
    if !settings.scopes.is_empty() {
        request = request.with_scopes(settings.scopes.iter().cloned());
    }
    if let Some(challenge) = &challenge {
        request = request.with_challenge(challenge.clone());
    }
    let registration = if let Some(client_id) = &settings.client_id {
        request = request.with_preregistered_client(client_id.clone());
        if let Some(secret) = client_secret {
            request = request.with_client_secret(secret);
        }
        Registration::PreRegistered
    } else if let Some(metadata_url) = &settings.client_metadata_url {
        request = request.with_client_metadata_url(metadata_url.clone());
        if cimd_supported { Registration::MetadataDocument } else { Registration::Dynamic }
    } else {
        Registration::Dynamic
    };

    let session = AuthorizationSession::new(manager, request).await.map_err(|(_, e)| match e {
        AuthError::RegistrationFailed(_) => OAuthError::Registration { server: name.to_owned(), detail: describe(&e) },
        e => OAuthError::Discovery { server: name.to_owned(), detail: describe(&e) },
    })?;
    let auth_url = session.get_authorization_url().to_owned();
    let parsed = url::Url::parse(&auth_url).map_err(|e| OAuthError::Discovery {
        server: name.to_owned(),
        detail: format!("the authorization URL is not a URL: {e}"),
    })?;
    // The URL comes from the server's metadata and is handed to a browser opener: a `file:` or
    // custom-scheme URL there would launch a program (the mcp-remote bug, CVE-2025-6514).
    if !browser_safe(&parsed) {
        return Err(OAuthError::Discovery {
            server: name.to_owned(),
            detail: format!(
                "the authorization endpoint `{}` is neither https nor http on a loopback address; refusing to open it",
                printable(&format!("{}://{}", parsed.scheme(), parsed.host_str().unwrap_or_default()), 200)
            ),
        });
    }
    let state = parsed.query_pairs().find(|(k, _)| k == "state").map(|(_, v)| v.into_owned()).ok_or_else(|| {
        OAuthError::Discovery { server: name.to_owned(), detail: "the authorization URL carries no `state`".into() }
    })?;
    Ok(PendingLogin {
        name: name.to_owned(),
        session,
        store,
        auth_url,
        state,
        registration,
        metadata_url: settings.client_metadata_url,
    })
}

impl PendingLogin {
    /// Where the person's browser signs in (checked: https, or http on a loopback address).
    pub fn authorization_url(&self) -> &str {
        &self.auth_url
    }

    /// The `state` the redirect must carry back (compare it before calling [`Self::finish`]).
    pub fn state(&self) -> &str {
        &self.state
    }

    /// The server this sign-in is for.
    pub fn server(&self) -> &str {
        &self.name
    }

    /// Exchanges the redirect's `code` (with the PKCE verifier; `issuer`: the redirect's `iss`,
    /// RFC 9207, when it had one) and stores the credentials; reads them back, so a vault that
    /// drops writes is caught here.
    pub async fn finish(self, code: &str, issuer: Option<&str>) -> Result<LoginOutcome, OAuthError> {
        let name = self.name;
        let token = self.session.handle_callback_with_issuer(code, &self.state, issuer).await.map_err(|e| match e {
            AuthError::CredentialStoreError(detail) => OAuthError::Vault { server: name.clone(), detail },
            e => OAuthError::Exchange { server: name.clone(), detail: describe(&e) },
        })?;
        let stored = self
            .store
            .load_credentials()
            .await
            .map_err(|e| OAuthError::Vault { server: name.clone(), detail: describe(&e) })?
            .ok_or_else(|| OAuthError::Vault {
                server: name.clone(),
                detail: "the credentials were not stored".into(),
            })?;
        // Read through serde: rmcp does not re-export oauth2's `TokenResponse` trait.
        let token = serde_json::to_value(&token).unwrap_or_default();
        Ok(LoginOutcome {
            registration: if stored.client_id == self.metadata_url.unwrap_or_default() {
                Registration::MetadataDocument
            } else {
                self.registration
            },
            client_id: stored.client_id,
            scopes: stored.granted_scopes,
            expires_in: token.get("expires_in").and_then(|v| v.as_u64()).map(Duration::from_secs),
            refreshable: token.get("refresh_token").is_some_and(|v| !v.is_null()),
        })
    }
}

/// A page keeps a [`PendingLogin`] between the request that starts a sign-in and its redirect.
const _: fn() = || {
    fn kept_across_requests<T: Send + 'static>() {}
    kept_across_requests::<PendingLogin>();
};

/// An HTTP client for server `name` that uses the credentials [`login`] stored, or `None` when
/// there are none. Hand it to `StreamableHttpClientTransport::with_client`.
///
/// This discovers the server's metadata again (to know the token endpoint for refreshes), so it
/// needs the network; it sends no token yet.
pub async fn authorized_client(
    name: &str,
    server: &ServerConfig,
    vault: Arc<dyn SecretVault>,
) -> Result<Option<AuthorizedClient>, OAuthError> {
    let url = server_url(name, server)?;
    let store = VaultCredentialStore::new(vault, name);
    let Some(stored) = store
        .load_credentials()
        .await
        .map_err(|e| OAuthError::Vault { server: name.to_owned(), detail: describe(&e) })?
    else {
        return Ok(None);
    };
    let mut manager = manager(name, url).await?;
    manager.set_credential_store(store);
    let usable = manager.initialize_from_store().await.map_err(|e| match e {
        AuthError::CredentialStoreError(detail) => OAuthError::Vault { server: name.to_owned(), detail },
        e => OAuthError::Discovery { server: name.to_owned(), detail: describe(&e) },
    })?;
    if !usable {
        let why = if stored.token_response.is_none() {
            "no token is stored"
        } else {
            "the server's authorization server changed since the login"
        };
        return Err(OAuthError::LoginRequired { server: name.to_owned(), why: why.into() });
    }
    // A confidential pre-registered client authenticates its refreshes with its secret, which is
    // in the config, not the store.
    if let Some(oauth) = &server.oauth
        && oauth.client_id.as_deref() == Some(stored.client_id.as_str())
        && let Some(secret) = &oauth.client_secret
    {
        let secret = expand_env(secret).map_err(|e| config_err(name, format!("`oauth.client_secret`: {e}")))?;
        manager
            .configure_client(OAuthClientConfig::new(stored.client_id.clone(), url).with_client_secret(secret))
            .map_err(|e| OAuthError::Discovery { server: name.to_owned(), detail: describe(&e) })?;
    }
    // No redirects: the bearer token goes to the configured URL only.
    let http = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .map_err(|e| OAuthError::Client { server: name.to_owned(), detail: e.to_string() })?;
    Ok(Some(AuthorizedClient::new(AuthClient::new(http, manager), name)))
}

/// Forgets server `name`'s stored credentials; returns whether there were any. (The tokens are
/// not revoked at the server: they stop being used and expire.)
pub fn logout(name: &str, vault: &dyn SecretVault) -> Result<bool, OAuthError> {
    vault.delete(&vault_key(name)).map_err(|e| OAuthError::Vault { server: name.to_owned(), detail: e.0 })
}

/// Whether credentials for server `name` are stored (for `toolgate mcp list`).
pub fn is_logged_in(name: &str, vault: &dyn SecretVault) -> Result<bool, OAuthError> {
    vault
        .get(&vault_key(name))
        .map(|v| v.is_some())
        .map_err(|e| OAuthError::Vault { server: name.to_owned(), detail: e.0 })
}

fn config_err(server: &str, problem: String) -> OAuthError {
    OAuthError::Config { server: server.to_owned(), problem }
}

fn server_url<'a>(name: &str, server: &'a ServerConfig) -> Result<&'a str, OAuthError> {
    server.url.as_deref().ok_or_else(|| config_err(name, "OAuth applies to `url` servers; this one has none".into()))
}

/// rmcp's manager for `url`, with rmcp's address policy: metadata, token and registration URLs
/// may be loopback (or private) only when the server URL itself is, so a public server cannot
/// point toolgate's requests at services on this machine or network (SSRF). That is what
/// `AuthorizationManager::new` enforces; `new_allowing_private_addresses` would lift it for
/// every server, so it is not used.
async fn manager(name: &str, url: &str) -> Result<AuthorizationManager, OAuthError> {
    install_crypto_provider();
    AuthorizationManager::new(url)
        .await
        .map_err(|e| OAuthError::Client { server: name.to_owned(), detail: describe(&e) })
}

/// The server's `WWW-Authenticate` challenge to an anonymous request, if it sends one. A GET
/// changes nothing on the server (a POST could open a session).
async fn probe_challenge(url: &str) -> Option<String> {
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(30))
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .ok()?;
    // What a client sends first, an `initialize` POST, is what every protected server must
    // challenge; some answer a GET with 404 or 405 instead. GET is the fallback.
    let initialize = serde_json::json!({
        "jsonrpc": "2.0",
        "id": 0,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": {"name": CLIENT_NAME, "version": env!("CARGO_PKG_VERSION")},
        },
    });
    let post = client
        .post(url)
        .header(http::header::ACCEPT, "application/json, text/event-stream")
        .header(http::header::CONTENT_TYPE, "application/json")
        .body(initialize.to_string());
    let get = client.get(url).header(http::header::ACCEPT, "text/event-stream, application/json");
    for request in [post, get] {
        let Ok(response) = request.send().await else { continue };
        if response.status() != reqwest::StatusCode::UNAUTHORIZED {
            continue;
        }
        let header = response.headers().get(http::header::WWW_AUTHENTICATE)?.to_str().ok()?;
        return (header.len() <= 4096).then(|| header.to_owned());
    }
    None
}

/// Whether an authorization URL may go to a browser: https, or http to a loopback host (local
/// development servers and the tests).
fn browser_safe(url: &url::Url) -> bool {
    match url.scheme() {
        "https" => true,
        "http" => match url.host() {
            Some(url::Host::Domain(host)) => host.eq_ignore_ascii_case("localhost"),
            Some(url::Host::Ipv4(ip)) => ip.is_loopback(),
            Some(url::Host::Ipv6(ip)) => ip.is_loopback(),
            None => false,
        },
        _ => false,
    }
}

/// An rmcp auth error as one printable line of bounded length (it may quote server text).
fn describe(e: &AuthError) -> String {
    let mut text = e.to_string();
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    printable(&text, 400)
}

#[cfg(test)]
mod tests {
    use super::vault::tests::MemoryVault;
    use super::*;

    #[test]
    fn only_https_or_loopback_http_goes_to_the_browser() {
        let ok = |u: &str| browser_safe(&url::Url::parse(u).unwrap());
        assert!(ok("https://auth.example.com/authorize?x=1"));
        assert!(ok("http://127.0.0.1:9000/authorize") && ok("http://localhost/a") && ok("http://[::1]:1/a"));
        for bad in [
            "http://auth.example.com/authorize",
            "file:///Applications/Evil.app",
            "javascript:alert(1)",
            "x-custom-handler://run?cmd=rm",
            "http://127.0.0.1.evil.com/a",
        ] {
            assert!(!ok(bad), "{bad}");
        }
    }

    #[tokio::test]
    async fn nothing_stored_means_no_client_and_logout_is_idempotent() {
        let vault: Arc<dyn SecretVault> = Arc::new(MemoryVault::default());
        let server = ServerConfig { url: Some("https://mcp.example.invalid/mcp".into()), ..Default::default() };
        assert!(authorized_client("ex", &server, vault.clone()).await.unwrap().is_none());
        assert!(!is_logged_in("ex", vault.as_ref()).unwrap());
        vault.put("mcp.oauth.ex", b"{}").unwrap();
        assert!(is_logged_in("ex", vault.as_ref()).unwrap());
        assert!(logout("ex", vault.as_ref()).unwrap());
        assert!(!logout("ex", vault.as_ref()).unwrap());
    }

    #[tokio::test]
    async fn stored_credentials_for_an_https_server_build_tls_clients_and_report_an_unreachable_server() {
        // The TLS stack must be usable (reqwest panics without a crypto provider); the server
        // itself is a closed loopback port, so discovery fails with an error naming it.
        let vault: Arc<dyn SecretVault> = Arc::new(MemoryVault::default());
        let creds =
            serde_json::json!({"client_id": "c", "token_response": {"access_token": "a", "token_type": "bearer"}});
        vault.put("mcp.oauth.tls", creds.to_string().as_bytes()).unwrap();
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let server = ServerConfig { url: Some(format!("https://127.0.0.1:{port}/mcp")), ..Default::default() };
        let err = authorized_client("tls", &server, vault).await.unwrap_err();
        assert!(matches!(err, OAuthError::Discovery { .. }), "{err:?}");
        assert!(err.to_string().contains("MCP server `tls`"), "{err}");
    }

    #[tokio::test]
    async fn a_command_server_cannot_log_in() {
        let vault: Arc<dyn SecretVault> = Arc::new(MemoryVault::default());
        let server = ServerConfig { command: Some("srv".into()), ..Default::default() };
        let err = login("local", &server, vault, |_| {}).await.unwrap_err();
        assert!(err.to_string().contains("[mcp.servers.local]") && err.to_string().contains("`url`"), "{err}");
    }

    #[test]
    fn the_login_hint_names_the_command() {
        let msg = login_required_message("github");
        assert!(msg.contains("`toolgate mcp login github`"), "{msg}");
    }
}
