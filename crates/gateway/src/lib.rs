//! toolgate's team gateway (ARCHITECTURE.md, "Adding a tool family"; `docs/gateway.md`): the
//! people and programs that may use a shared `toolgate serve --http`, and how a request proves
//! it is one of them.
//!
//! - `names`: which principal names are valid (they reach logs, pages and paths).
//! - `keys`: API keys (`tg_<id>_<secret>`, 256 random bits, kept as a SHA-256 digest, scoped,
//!   revocable) and [`KeyAuthenticator`], which admits a request to `/mcp` by its key.
//! - `grants`, `access`: grants (who may use which tools, `toolgate admin grant`) and access
//!   requests (`request_access`, `toolgate admin access`); `toolgate::granted` limits what
//!   `/mcp` lists and runs to the caller's grants; `changes`: each user's counter of grant
//!   changes, which their MCP sessions watch to send `notifications/tools/list_changed`.
//! - `grant_input`: a new grant as a person writes it (`toolgate admin grant add`'s flags, the
//!   page's form, `POST /api/grants`), read by one piece of code for all three.
//! - `cache`: keys' verifications and callers' compiled grants kept between requests, under
//!   the store's revisions ([`CachedGrants`]).
//! - `admin`: what `toolgate admin` does (users, groups, agents, keys), over the store's
//!   [`IdentityStore`](toolgate_store::IdentityStore).
//! - `signin/`: signing in to the page (OIDC with PKCE, a local argon2id password), sessions
//!   and CSRF tokens; `tokens`: `/mcp`'s authenticator (API keys, and the OIDC provider's
//!   JWT access tokens).
//! - `page/`: the web page at `/` (grants, keys, access requests, users, audit search and
//!   export, the approvals inbox with live updates), server-rendered behind a strict
//!   Content-Security-Policy.

mod access;
mod admin;
mod cache;
mod changes;
mod error;
mod grant_input;
mod grants;
mod keys;
mod names;
mod page;
mod signin;
mod tokens;

pub use access::{Narrowing, RequestAccess, shown as shown_request};
pub use admin::{Admin, NewKey};
pub use cache::CachedGrants;
pub use changes::{follow_store, grant_changes};
pub use error::GatewayError;
pub use grant_input::{GrantInput, duration_ms, split_list};
pub use grants::{
    ADMIN_TOOL, Access, Decided, Grants, HOME_TOOLS, REQUEST_ACCESS, ToolRef, check_pattern, check_server,
};
pub use keys::{KeyAuthenticator, KeyScope, KeyText};
pub use names::check_name;
pub use page::{
    Decision, Page, PageData, PendingCall, UpstreamKind, UpstreamServer, UpstreamSignIns, protected_resource_mount,
};
pub use signin::{MIN_PASSWORD, Oidc, OidcConfig, SignIn, hash_password, set_password};
pub use tokens::GatewayAuthenticator;

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

/// The `[gateway]` section of `toolgate.toml`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct GatewayConfig {
    /// Serve as a team gateway: `toolgate serve --http` admits only requests with a valid API
    /// key (`toolgate admin key create`), and each call is made as the key's user.
    pub enabled: bool,
    /// Where each user's workspace is made (`DIR/NAME`).
    pub workspaces: Option<PathBuf>,
    /// toolgate's own tools every user and agent may use without a grant (names or `*`
    /// patterns); unset: all of them (`["*"]`); `[]`: each needs a grant. A bridged server's
    /// tools always need one (`toolgate admin grant add`).
    pub default_tools: Option<Vec<String>>,
    /// Where people and clients reach the gateway (`https://gw.example.com`), for the OIDC
    /// redirect URI and the protected-resource metadata; default `http://ADDR` of `--http`.
    pub url: Option<String>,
    /// Sign-in to the page with an OpenID Connect provider, whose access tokens `/mcp`
    /// accepts too.
    pub oidc: Option<OidcConfig>,
    /// Where each decision on an access request made on this server (the page, `/api/access`)
    /// is posted as JSON (`{"event": "access_decided", "request": ...}`), to tell the requester
    /// (a chat or mail relay); unset: `[approval] notify_url`, if any.
    pub notify_url: Option<String>,
    /// `[gateway.policy.USER]`: a user's own tool policy (the keys of `[tools]`: `profile`,
    /// `allow`, `deny`, `ask`, ...), in place of the gateway's `[tools]` policy on that user's
    /// gate (per-user workspaces). Grants still decide what the user may call within it.
    pub policy: std::collections::BTreeMap<String, toolgate_policy::PolicyConfig>,
}
