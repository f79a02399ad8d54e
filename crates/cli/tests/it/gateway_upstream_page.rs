//! Signing in to a bridged MCP server from the gateway's page (issue 28 items 3 and 7), through
//! the binary: Ann signs in to the page with her password, starts the upstream sign-in there,
//! the test plays her browser at the real OAuth server on loopback (`mcp_oauth/per_user_server.cjs`,
//! the official TypeScript SDK's auth router), which sends it back to the page's callback; then
//! her calls through the official MCP Python SDK carry her token. Bob, handed Ann's redirect (a
//! login CSRF: it would link his account to Ann's upstream account), is refused, and the redirect
//! is used up. Signing out on the page applies to Ann's next call. A server that takes a static
//! key (`user_key_header`) gets the key Ann pastes in the page's form, sent by her calls only.

use std::path::Path;
use std::process::Command;

use reqwest::redirect::Policy;

use toolgate_testkit::ports::Listening;

use crate::gateway_upstream::{Upstream, call, call_tool, random_key};
use crate::mcp_oauth::{node, node_modules};
use crate::support::gateway::admin_with_input as admin;

const TOOLGATE: &str = env!("CARGO_BIN_EXE_toolgate");

/// A browser of one person: the page's cookies, no redirect followed by itself.
struct Browser {
    http: reqwest::Client,
    base: String,
    cookie: String,
}

fn cookie_of(response: &reqwest::Response, name: &str) -> Option<String> {
    response.headers().get_all("set-cookie").iter().filter_map(|v| v.to_str().ok()).find_map(|v| {
        let pair = v.split(';').next()?;
        pair.starts_with(&format!("{name}=")).then(|| pair.to_owned())
    })
}

fn form(pairs: &[(&str, &str)]) -> String {
    url::form_urlencoded::Serializer::new(String::new()).extend_pairs(pairs).finish()
}

fn csrf_of(html: &str) -> String {
    let at = html.find("name=\"csrf\" value=\"").expect("a CSRF field") + 19;
    html[at..at + 64].to_owned()
}

impl Browser {
    async fn sign_in(base: &str, user: &str, password: &str) -> Browser {
        let http = reqwest::Client::builder().redirect(Policy::none()).build().unwrap();
        let signin = http.get(format!("{base}/signin")).send().await.unwrap();
        let form_cookie = cookie_of(&signin, "tg_form").unwrap();
        let csrf = csrf_of(&signin.text().await.unwrap());
        let signed = http
            .post(format!("{base}/signin/password"))
            .header("Cookie", form_cookie)
            .header("Content-Type", "application/x-www-form-urlencoded")
            .body(form(&[("user", user), ("password", password), ("csrf", &csrf)]))
            .send()
            .await
            .unwrap();
        assert_eq!(signed.status(), 303, "{user} signs in");
        let cookie = cookie_of(&signed, "tg_session").unwrap();
        Browser { http, base: base.to_owned(), cookie }
    }

    async fn get(&self, url: &str) -> reqwest::Response {
        self.http.get(url).header("Cookie", &self.cookie).send().await.unwrap()
    }

    async fn page(&self) -> String {
        self.get(&format!("{}/", self.base)).await.text().await.unwrap()
    }

    async fn post(&self, path: &str) -> reqwest::Response {
        let csrf = csrf_of(&self.page().await);
        self.http
            .post(format!("{}{path}", self.base))
            .header("Cookie", &self.cookie)
            .header("Content-Type", "application/x-www-form-urlencoded")
            .body(form(&[("csrf", csrf.as_str())]))
            .send()
            .await
            .unwrap()
    }

    /// Starts the sign-in to `server` on the page; the authorization server's redirect back
    /// (its `Location`), as the browser would follow it.
    async fn begin(&self, upstream: &Upstream, person: &str, server: &str) -> String {
        let set = reqwest::Client::new().post(upstream.url(&format!("/test/subject?name={person}"))).send().await;
        assert!(set.unwrap().status().is_success());
        let started = self.post(&format!("/upstream/{server}/signin")).await;
        assert_eq!(started.status(), 303, "{:?}", started.text().await);
        let authorize = started.headers()["location"].to_str().unwrap().to_owned();
        assert!(authorize.starts_with(&upstream.url("/authorize")), "{authorize}");
        let back = self.http.get(&authorize).send().await.unwrap();
        assert!(back.status().is_redirection(), "{}", back.status());
        let callback = back.headers()["location"].to_str().unwrap().to_owned();
        assert!(callback.starts_with(&format!("{}/upstream/callback?", self.base)), "{callback}");
        callback
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_user_signs_in_to_an_upstream_server_from_the_page() {
    toolgate_mcp::bridge::oauth::install_crypto_provider();
    let upstream = Upstream::start();
    let ann_key = random_key("ann");
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/mcp_oauth/per_user_key_server.cjs");
    let keyed = Listening::start(1, &["per-user key fixture listening"], |ports| {
        let mut command = Command::new(node());
        let keys = format!("ann={ann_key}");
        command.arg(&script).env("NODE_MODULES", node_modules()).env("PORT", ports[0].to_string()).env("KEYS", keys);
        command
    });
    let ws = toolgate_testkit::serve::workspace();
    std::fs::write(
        ws.path().join("toolgate.toml"),
        format!(
            "[gateway]\nenabled = true\nworkspaces = \"users\"\n\n[mcp.servers.per]\nurl = \"{}\"\n\n\
             [mcp.servers.keyed]\nurl = \"http://127.0.0.1:{}/mcp\"\nuser_key_header = \"Authorization\"\n\
             user_key_prefix = \"Bearer \"\n",
            upstream.url("/mcp"),
            keyed.ports[0]
        ),
    )
    .unwrap();
    let mut keys = Vec::new();
    for user in ["ann", "bob"] {
        admin(ws.path(), &["user", "add", user], "");
        admin(ws.path(), &["password", "set", user], &format!("{user}'s long passphrase\n"));
        admin(ws.path(), &["grant", "add", "--to", user, "--server", "per"], "");
        admin(ws.path(), &["grant", "add", "--to", user, "--server", "keyed"], "");
        keys.push(admin(ws.path(), &["key", "create", "--user", user], ""));
    }
    let server = toolgate_testkit::serve::HttpServer::start_in(TOOLGATE, ws, &[]);
    let base = server.url.trim_end_matches("/mcp").to_owned();
    let url = server.url.clone();
    let ann = Browser::sign_in(&base, "ann", "ann's long passphrase").await;
    let bob = Browser::sign_in(&base, "bob", "bob's long passphrase").await;
    let page = ann.page().await;
    assert!(page.contains("id=\"upstream-per-state\">not signed in<"), "{page}");

    // Bob's browser is handed the redirect of a sign-in Ann started: refused, and used up.
    let anns = ann.begin(&upstream, "ann", "per").await;
    let refused = bob.get(&anns).await;
    assert_eq!(refused.status(), 400);
    assert!(refused.text().await.unwrap().contains("not started by you"));
    let again = ann.get(&anns).await;
    assert!(again.text().await.unwrap().contains("unknown or was used already"));
    let (error, text) = tokio::task::block_in_place(|| call(&url, &keys[1]));
    assert!(error && !text.contains("token of"), "bob is linked to nobody's account: {text}");

    // Ann's own sign-in: her calls carry her token.
    let mine = ann.begin(&upstream, "ann", "per").await;
    let done = ann.get(&mine).await;
    assert_eq!(done.status(), 303, "{:?}", done.text().await);
    let page = ann.page().await;
    assert!(page.contains("id=\"upstream-per-state\">signed in<"), "{page}");
    let (error, text) = tokio::task::block_in_place(|| call(&url, &keys[0]));
    assert!(!error && text.contains("token of ann; session opened by ann"), "{text}");
    let (error, text) = tokio::task::block_in_place(|| call(&url, &keys[1]));
    assert!(error && text.contains("needs your own sign-in"), "bob still has none: {text}");

    // A sign-in with a state the page never made, and a provider's refusal, change nothing.
    let forged = ann.get(&format!("{base}/upstream/callback?code=x&state=forged")).await;
    assert_eq!(forged.status(), 400);
    let denied = ann.get(&format!("{base}/upstream/callback?error=access_denied&state=x")).await;
    assert!(denied.text().await.unwrap().contains("access_denied"));

    // A key pasted in the page's form: her calls send it, nobody else's do; it is not on the page.
    let csrf = csrf_of(&ann.page().await);
    let stored = ann
        .http
        .post(format!("{base}/upstream/keyed/key"))
        .header("Cookie", &ann.cookie)
        .header("Content-Type", "application/x-www-form-urlencoded")
        .body(form(&[("csrf", csrf.as_str()), ("key", ann_key.as_str())]))
        .send()
        .await
        .unwrap();
    let shown = stored.text().await.unwrap();
    assert!(shown.contains("your key for `keyed` is stored") && !shown.contains(&ann_key), "{shown}");
    assert!(ann.page().await.contains("id=\"upstream-keyed-state\">signed in<"));
    let (error, text) = tokio::task::block_in_place(|| call_tool(&url, &keys[0], "mcp__keyed__whoami"));
    assert!(!error && text.contains("ann"), "{text}");
    let (error, text) = tokio::task::block_in_place(|| call_tool(&url, &keys[1], "mcp__keyed__whoami"));
    assert!(error && !text.contains(&ann_key), "bob has no key: {text}");
    // Without the CSRF token nothing is stored.
    let forged = ann
        .http
        .post(format!("{base}/upstream/keyed/key"))
        .header("Cookie", &bob.cookie)
        .header("Content-Type", "application/x-www-form-urlencoded")
        .body(form(&[("key", "attacker-key")]))
        .send()
        .await
        .unwrap();
    assert_eq!(forged.status(), 403);

    // Signing out on the page applies to her next call.
    let out = ann.post("/upstream/per/signout").await;
    assert_eq!(out.status(), 200);
    let (error, text) = tokio::task::block_in_place(|| call(&url, &keys[0]));
    assert!(error && text.contains("needs your own sign-in"), "{text}");
}
