//! Signing in to bridged MCP servers from the page: each user sees the servers they sign in to
//! for themself (`[mcp.servers.NAME]` without `shared`), signs in to one by OAuth (the browser
//! goes to the server's authorization server and comes back to `/upstream/callback`) or stores
//! their own key for one that takes a key, and signs out. The credentials are the user's own,
//! kept where `toolgate mcp login NAME --user USER` keeps them ([`UpstreamSignIns`], implemented
//! by the binary over the bridge's vault).
//!
//! The redirect is bound to the user who started it: a `state` this page made for another user
//! (an attacker's sign-in, sent to a victim's browser to link the victim to the attacker's
//! account) is refused and used up.

use std::fmt::Debug;

use toolgate_core::async_trait;

/// How a server takes a user's credential.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UpstreamKind {
    /// OAuth 2.1: the user signs in through the browser.
    OAuth,
    /// A static key the user pastes (`user_key_header`).
    Key,
}

/// One bridged server a user signs in to for themself, as the page lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UpstreamServer {
    /// The server's name (`[mcp.servers.NAME]`).
    pub name: String,
    /// How it takes the user's credential.
    pub kind: UpstreamKind,
    /// Whether the user has one stored.
    pub signed_in: bool,
}

/// The page's port to the bridged servers' per-user sign-ins.
#[async_trait]
pub trait UpstreamSignIns: Send + Sync + Debug {
    /// The servers `user` signs in to for themself.
    fn servers(&self, user: &str) -> Vec<UpstreamServer>;
    /// Begins `user`'s OAuth sign-in to `server`, to come back to `redirect_uri`: the URL to
    /// send the browser to.
    async fn begin(&self, user: &str, server: &str, redirect_uri: &str) -> Result<String, String>;
    /// Finishes the sign-in the redirect's `state` names, for `user` only: the server's name.
    async fn finish(&self, user: &str, state: &str, code: &str, issuer: Option<&str>) -> Result<String, String>;
    /// Stores `key` as `user`'s own for `server` (a server that takes a key).
    fn set_key(&self, user: &str, server: &str, key: &str) -> Result<(), String>;
    /// Forgets `user`'s credential for `server`: whether there was one.
    fn sign_out(&self, user: &str, server: &str) -> Result<bool, String>;
}

/// The path the authorization server sends the browser back to.
pub(crate) const CALLBACK: &str = "/upstream/callback";

/// What the page was given: the sign-ins, and the callback URL the authorization servers send
/// browsers back to (the gateway's public URL, `[gateway] url`).
#[derive(Debug)]
pub(crate) struct Upstream {
    pub(crate) signins: std::sync::Arc<dyn UpstreamSignIns>,
    pub(crate) callback: String,
}

impl super::Inner {
    /// `POST /upstream/NAME/signin | signout | key` (the CSRF token checked already).
    pub(super) async fn upstream_post(
        &self,
        rest: &str,
        form: &[(String, String)],
        session: &super::Session,
    ) -> http::Response<toolgate_mcp::HttpBody> {
        let back = |notice: Result<String, String>| self.dashboard(session, &[], Some(notice));
        let Some(up) = self.upstream.get() else {
            return back(Err("this gateway has no bridged servers to sign in to".to_owned()));
        };
        let me = session.user.as_str();
        let Some((server, action)) = rest.split_once('/') else {
            return toolgate_mcp::reply::text(404, "no such page");
        };
        match action {
            "signin" => match up.signins.begin(me, server, &up.callback).await {
                Ok(url) => super::redirect(&url),
                Err(e) => back(Err(e)),
            },
            "signout" => back(match up.signins.sign_out(me, server) {
                Ok(true) => Ok(format!("signed out of `{server}`: your next call of it needs a new sign-in")),
                Ok(false) => Ok(format!("you were not signed in to `{server}`")),
                Err(e) => Err(e),
            }),
            "key" => {
                let key = super::field(form, "key").trim();
                // What a key may be is the sign-ins' to say (as `toolgate mcp login --key` does).
                if key.is_empty() {
                    return back(Err("paste the key first".to_owned()));
                }
                back(up.signins.set_key(me, server, key).map(|()| {
                    format!(
                        "your key for `{server}` is stored (encrypted); only your calls send it, from your next one"
                    )
                }))
            }
            _ => toolgate_mcp::reply::text(404, "no such page"),
        }
    }

    /// `GET /upstream/callback`: the authorization server's redirect, for the signed-in user
    /// who started it only.
    pub(super) async fn upstream_callback(
        &self,
        query: &[(String, String)],
        session: &super::Session,
    ) -> http::Response<toolgate_mcp::HttpBody> {
        let failed = |why: String| {
            let mut response = self.dashboard(session, &[], Some(Err(why)));
            *response.status_mut() = http::StatusCode::BAD_REQUEST;
            response
        };
        let Some(up) = self.upstream.get() else { return failed("nothing to sign in to here".to_owned()) };
        let error = super::field(query, "error");
        if !error.is_empty() {
            return failed(format!(
                "the server's sign-in was refused: {} {}",
                printable(error),
                printable(super::field(query, "error_description"))
            ));
        }
        let (state, code) = (super::field(query, "state"), super::field(query, "code"));
        if state.is_empty() || code.is_empty() {
            return failed("the redirect has no code or state; start the sign-in again from the page".to_owned());
        }
        let issuer = Some(super::field(query, "iss")).filter(|i| !i.is_empty());
        match up.signins.finish(&session.user, state, code, issuer).await {
            Ok(server) => {
                tracing::info!(user = session.user, server, "signed in to an upstream server from the page");
                super::redirect("/#upstream")
            }
            Err(e) => failed(e),
        }
    }
}

/// At most 200 visible characters of a value the redirect carried (it is escaped when shown).
fn printable(text: &str) -> String {
    text.chars().filter(|c| !c.is_control()).take(200).collect()
}

/// The page's "Upstream servers" section: each server the user signs in to for themself.
pub(crate) fn section(html: &mut String, servers: &[UpstreamServer], csrf: &str) {
    use std::fmt::Write as _;

    use super::render::{csrf_field, esc, url_segment};
    if servers.is_empty() {
        return;
    }
    html.push_str(
        "<section class=\"card\" id=\"upstream\"><h2>My upstream sign-ins</h2>\
         <p class=\"empty\">Bridged MCP servers you sign in to for yourself: your calls use your own \
         credential, never anyone else's.</p><table class=\"grid\"><thead><tr><th>Server</th><th>Credential</th>\
         <th>State</th><th></th></tr></thead><tbody>",
    );
    for s in servers {
        let name = esc(&s.name);
        let path = esc(&url_segment(&s.name));
        let (how, state) = match (s.kind, s.signed_in) {
            (UpstreamKind::OAuth, true) => ("OAuth sign-in", "signed in"),
            (UpstreamKind::OAuth, false) => ("OAuth sign-in", "not signed in"),
            (UpstreamKind::Key, true) => ("your key", "signed in"),
            (UpstreamKind::Key, false) => ("your key", "not signed in"),
        };
        let action = match (s.kind, s.signed_in) {
            (_, true) => format!(
                "<form method=\"post\" action=\"/upstream/{path}/signout\">{}\
                 <button class=\"button danger small\">Sign out</button></form>",
                csrf_field(csrf)
            ),
            (UpstreamKind::OAuth, false) => format!(
                "<form method=\"post\" action=\"/upstream/{path}/signin\">{}\
                 <button class=\"button primary small\">Sign in</button></form>",
                csrf_field(csrf)
            ),
            (UpstreamKind::Key, false) => format!(
                "<form method=\"post\" action=\"/upstream/{path}/key\" class=\"row\">{}\
                 <input type=\"password\" name=\"key\" autocomplete=\"off\" placeholder=\"your key\" required>\
                 <button class=\"button primary small\">Store</button></form>",
                csrf_field(csrf)
            ),
        };
        let pill = if s.signed_in { "active" } else { "expired" };
        let _ = write!(
            html,
            "<tr id=\"upstream-{name}\"><td><code>{name}</code></td><td>{how}</td>\
             <td><span class=\"pill {pill}\" id=\"upstream-{name}-state\">{state}</span></td><td>{action}</td></tr>"
        );
    }
    html.push_str("</tbody></table></section>");
}
