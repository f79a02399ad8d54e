//! The page's HTML. Every value goes through [`esc`]; attributes are always double-quoted.

use std::fmt::Write;

use toolgate_store::{AccessRequest, AccessStatus, ApiKeyRecord, AuditRecord, Principal, PrincipalKind, ToolGrant};

use super::PendingCall;
use super::audit::{AuditFilter, format_time};

/// Text made safe inside HTML text and double- or single-quoted attributes.
pub(crate) fn esc(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            // Controls other than tab and newline have no business on a page.
            c if c.is_control() && c != '\n' && c != '\t' => out.push('\u{fffd}'),
            c => out.push(c),
        }
    }
    out
}

/// Long values (parameters, traces) shown whole on hover, clipped in the table.
fn clip(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return esc(text);
    }
    let head: String = text.chars().take(max).collect();
    format!("{}…", esc(&head))
}

fn head(title: &str) -> String {
    format!(
        "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
         <title>{}</title><link rel=\"stylesheet\" href=\"/static/page.css\">\
         <script src=\"/static/page.js\" defer></script></head>",
        esc(title)
    )
}

pub(crate) fn signin(issuer: Option<&str>, form_token: &str, error: Option<&str>) -> String {
    let mut html = head("Sign in · toolgate");
    html.push_str(
        "<body class=\"signin\"><main class=\"card narrow\"><h1><span class=\"logo\">tg</span> toolgate gateway</h1>",
    );
    if let Some(error) = error {
        let _ = write!(html, "<p class=\"notice error\">{}</p>", esc(error));
    }
    if let Some(issuer) = issuer {
        let _ = write!(
            html,
            "<a class=\"button primary wide\" href=\"/signin/oidc\">Sign in with your organization</a>\
             <p class=\"muted small\">{}</p><div class=\"or\"><span>or, on this machine</span></div>",
            esc(issuer)
        );
    }
    let _ = write!(
        html,
        "<form method=\"post\" action=\"/signin/password\" class=\"stack\">\
         <input type=\"hidden\" name=\"csrf\" value=\"{}\">\
         <label>User <input name=\"user\" autocomplete=\"username\" required></label>\
         <label>Password <input name=\"password\" type=\"password\" autocomplete=\"current-password\" required></label>\
         <button class=\"button\" type=\"submit\">Sign in with a password</button></form>\
         <p class=\"muted small\">A local password is set with <code>toolgate admin password set NAME</code>.</p>\
         </main></body></html>",
        esc(form_token)
    );
    html
}

/// Everything the dashboard shows.
#[derive(Debug)]
pub(crate) struct View {
    pub(crate) user: String,
    /// Admins see everyone's things and the admin sections.
    pub(crate) admin: bool,
    pub(crate) csrf: String,
    pub(crate) principals: Vec<Principal>,
    pub(crate) keys: Vec<ApiKeyRecord>,
    pub(crate) grants: Vec<ToolGrant>,
    pub(crate) requests: Vec<AccessRequest>,
    pub(crate) pending: Vec<PendingCall>,
    pub(crate) audit: Vec<AuditRecord>,
    pub(crate) audit_error: Option<String>,
    /// What could not be read (the page shows the rest).
    pub(crate) errors: Vec<String>,
    pub(crate) filter: AuditFilter,
    pub(crate) notice: Option<Result<String, String>>,
    pub(crate) new_key: Option<(String, String)>,
    /// What the grant form had when it was refused (shown again, escaped, to be corrected).
    pub(crate) grant_form: Vec<(String, String)>,
    /// The bridged servers the user signs in to for themself.
    pub(crate) upstream: Vec<super::UpstreamServer>,
    pub(crate) now_ms: i64,
}

impl View {
    /// A view with nothing in it but who looks (for the fragments the script fetches).
    pub(crate) fn empty(session: &super::Session) -> View {
        View {
            user: session.user.clone(),
            admin: session.admin,
            csrf: session.csrf.clone(),
            principals: Vec::new(),
            keys: Vec::new(),
            grants: Vec::new(),
            requests: Vec::new(),
            pending: Vec::new(),
            audit: Vec::new(),
            audit_error: None,
            errors: Vec::new(),
            filter: AuditFilter::default(),
            notice: None,
            new_key: None,
            grant_form: Vec::new(),
            upstream: Vec::new(),
            now_ms: crate::admin::now_ms(),
        }
    }
}

pub(crate) fn csrf_field(csrf: &str) -> String {
    format!("<input type=\"hidden\" name=\"csrf\" value=\"{}\">", esc(csrf))
}

pub(crate) fn dashboard(v: &View) -> String {
    let mut html = head("toolgate gateway");
    let nav = if v.admin {
        format!(
            "<a href=\"#inbox\">Approvals <span class=\"badge\" id=\"pending-count\">{}</span></a>\
             <a href=\"#access\">Requests</a><a href=\"#grants\">Grants</a><a href=\"#audit\">Audit</a>\
             <a href=\"#keys\">API keys</a><a href=\"#users\">Users</a>",
            v.pending.len()
        )
    } else {
        "<a href=\"#grants\">My grants</a><a href=\"#access\">Requests</a><a href=\"#audit\">My calls</a>\
         <a href=\"#keys\">My API keys</a>"
            .to_owned()
    };
    let _ = write!(
        html,
        "<body><header class=\"top\"><div class=\"brand\"><span class=\"logo\">tg</span> toolgate gateway</div>\
         <nav>{nav}</nav>\
         <form method=\"post\" action=\"/signout\" class=\"inline\">{}<span class=\"who\">{}{}</span>\
         <button class=\"button ghost\" type=\"submit\">Sign out</button></form></header><main>",
        csrf_field(&v.csrf),
        esc(&v.user),
        if v.admin { " · admin" } else { "" },
    );
    for e in &v.errors {
        let _ = write!(html, "<p class=\"notice error\">{}</p>", esc(e));
    }
    match &v.notice {
        Some(Ok(text)) => {
            let _ = write!(html, "<p class=\"notice ok\">{}</p>", esc(text));
        }
        Some(Err(text)) => {
            let _ = write!(html, "<p class=\"notice error\">{}</p>", esc(text));
        }
        None => {}
    }
    if let Some((id, text)) = &v.new_key {
        let _ = write!(
            html,
            "<section class=\"card key-once\"><h2>New key {}</h2><p>Copy it now: it is shown only this once.</p>\
             <pre class=\"secret\" id=\"new-key\">{}</pre></section>",
            esc(id),
            esc(text)
        );
    }
    if v.admin {
        let _ = write!(
            html,
            "<section class=\"card\" id=\"inbox\"><h2>Approvals inbox <span class=\"live\" id=\"live\">live</span></h2>\
             <div id=\"inbox-body\">{}</div></section>",
            inbox(&v.pending, &v.csrf)
        );
    }
    access_section(&mut html, v);
    grants_section(&mut html, v);
    audit_section(&mut html, v);
    keys_section(&mut html, v);
    super::upstream::section(&mut html, &v.upstream, &v.csrf);
    if v.admin {
        users_section(&mut html, v);
    }
    html.push_str("</main></body></html>");
    html
}

/// The inbox's body (also fetched alone by the script when the SSE stream says it changed).
pub(crate) fn inbox(pending: &[PendingCall], csrf: &str) -> String {
    if pending.is_empty() {
        return "<p class=\"empty\">Nothing waits for a decision.</p>".to_owned();
    }
    let mut html = String::from("<ul class=\"inbox\">");
    for p in pending {
        let what = p.subject.as_deref().unwrap_or(&p.params);
        let _ = write!(
            html,
            "<li class=\"pending\"><div class=\"ask\"><div><strong>{user}</strong> <span class=\"muted\">via {agent}</span> \
             wants to run <code class=\"tool\">{tool}</code></div>\
             <pre class=\"what\">{what}</pre><div class=\"muted small\">why: {reason}</div>\
             <details><summary>parameters</summary><pre>{params}</pre></details></div>\
             <form method=\"post\" action=\"/approvals/{id_attr}\" class=\"decide\">{csrf}\
             <button class=\"button primary\" name=\"decision\" value=\"allow_once\">Approve once</button>\
             <button class=\"button\" name=\"decision\" value=\"allow_always\">Always</button>\
             <button class=\"button danger\" name=\"decision\" value=\"deny\">Deny</button></form></li>",
            user = esc(&p.user),
            agent = esc(&p.agent),
            tool = esc(&p.tool),
            what = esc(what),
            reason = esc(&p.reason),
            params = esc(&p.params),
            id_attr = esc(&url_segment(&p.id)),
            csrf = csrf_field(csrf),
        );
    }
    html.push_str("</ul>");
    html
}

/// A path segment: only characters that need no escaping in a URL.
pub(crate) fn url_segment(text: &str) -> String {
    text.chars().filter(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.')).collect()
}

fn audit_section(html: &mut String, v: &View) {
    let f = &v.filter;
    let input = |name: &str, label: &str, value: &str, kind: &str| {
        format!("<label>{label}<input name=\"{name}\" type=\"{kind}\" value=\"{}\"></label>", esc(value))
    };
    let query = f.query();
    let suffix = if query.is_empty() { String::new() } else { format!("?{query}") };
    let _ = write!(
        html,
        "<section class=\"card\" id=\"audit\"><h2>{title}</h2><form method=\"get\" action=\"/\" class=\"filters\">{}{}{}{}{}{}{}{}\
         <div class=\"actions\"><button class=\"button primary\" type=\"submit\">Search</button>\
         <a class=\"button ghost\" href=\"/#audit\">Clear</a>\
         <a class=\"button ghost\" href=\"/audit.jsonl{sfx}\">JSONL</a><a class=\"button ghost\" href=\"/audit.csv{sfx}\">CSV</a></div></form>",
        // A user's own rows are all of one user: no user filter.
        if v.admin { input("user", "User", &f.user, "text") } else { String::new() },
        input("agent", "Agent", &f.agent, "text"),
        input("tool", "Tool", &f.tool, "text"),
        input("decision", "Decision", &f.decision, "text"),
        input("outcome", "Outcome", &f.outcome, "text"),
        input("params", "Parameters", &f.params, "text"),
        input("from", "From (UTC)", &f.from, "datetime-local"),
        input("to", "To (UTC)", &f.to, "datetime-local"),
        sfx = esc(&suffix),
        title = if v.admin { "Audit" } else { "My calls" },
    );
    if let Some(e) = &v.audit_error {
        let _ = write!(html, "<p class=\"notice error\">cannot read the audit log: {}</p>", esc(e));
    }
    if v.audit.is_empty() {
        html.push_str("<p class=\"empty\">No calls match.</p></section>");
        return;
    }
    html.push_str(
        "<div class=\"scroll\"><table class=\"grid\"><thead><tr><th>Time (UTC)</th><th>User</th><th>Agent</th>\
         <th>Tool</th><th>Parameters</th><th>Decision</th><th>Outcome</th><th class=\"num\">ms</th></tr></thead><tbody>",
    );
    for r in &v.audit {
        let outcome_class = if r.outcome == "ok" { "ok" } else { "bad" };
        let _ = write!(
            html,
            "<tr><td class=\"nowrap\">{}</td><td>{}</td><td>{}</td><td><code>{}</code></td>\
             <td class=\"params\" title=\"{}\"><code>{}</code></td><td title=\"{}\">{}</td>\
             <td><span class=\"pill {outcome_class}\">{}</span></td><td class=\"num\">{:.1}</td></tr>",
            esc(&format_time(r.ts_ms)),
            esc(&r.user),
            esc(&r.agent),
            esc(&r.tool),
            esc(&r.params),
            clip(&r.params, 90),
            esc(&r.decision),
            clip(&r.decision, 40),
            esc(&r.outcome),
            r.duration_us as f64 / 1000.0,
        );
    }
    html.push_str("</tbody></table></div></section>");
}

fn when(ms: Option<i64>) -> String {
    ms.map_or("—".to_owned(), |ms| format_time(ms)[..16].to_owned())
}

fn or_all(list: &[String]) -> String {
    if list.is_empty() { "all".to_owned() } else { list.join(", ") }
}

/// The admin's form for a new grant: the fields of `toolgate admin grant add`, refilled with
/// what was typed when the grant was refused.
fn grant_form(html: &mut String, v: &View) {
    let typed = |name: &str| esc(v.grant_form.iter().find(|(k, _)| k == name).map_or("", |(_, value)| value.as_str()));
    let mode = v.grant_form.iter().find(|(k, _)| k == "mode").map_or("allow", |(_, m)| m.as_str());
    let options: String = ["allow", "ask", "deny"]
        .iter()
        .map(|m| format!("<option value=\"{m}\"{}>{m}</option>", if *m == mode { " selected" } else { "" }))
        .collect();
    let _ = write!(
        html,
        "<form method=\"post\" action=\"/grants\" class=\"row\" id=\"grant-form\">{csrf}\
         <label>For<input name=\"to\" required placeholder=\"user, group or agent\" value=\"{to}\"></label>\
         <label>Server<input name=\"server\" placeholder=\"toolgate's own\" value=\"{server}\"></label>\
         <label>Tools<input name=\"tools\" placeholder=\"all, or exec, git_*\" value=\"{tools}\"></label>\
         <label>Never<input name=\"deny_tools\" placeholder=\"delete_*\" value=\"{deny}\"></label>\
         <label>Mode<select name=\"mode\">{options}</select></label>\
         <label>Argument rule<input name=\"args\" placeholder=\"exec(git *)\" value=\"{args}\"></label>\
         <label>Expires in<input name=\"expires\" placeholder=\"30d\" size=\"6\" value=\"{expires}\"></label>\
         <label>Note<input name=\"note\" value=\"{note}\"></label>\
         <button class=\"button primary\" type=\"submit\">Add grant</button></form>",
        csrf = csrf_field(&v.csrf),
        to = typed("to"),
        server = typed("server"),
        tools = typed("tools"),
        deny = typed("deny_tools"),
        args = typed("args"),
        expires = typed("expires"),
        note = typed("note"),
    );
}

fn grants_section(html: &mut String, v: &View) {
    let title = if v.admin { "Grants" } else { "My grants" };
    let _ = write!(
        html,
        "<section class=\"card\" id=\"grants\"><h2>{title}</h2>\
         <p class=\"muted small\">toolgate's own tools need no grant unless <code>[gateway] default_tools</code> says so; \
         a bridged server's tools always do. Grants are added here by an admin, with <code>toolgate admin grant add</code> \
         or by approving a request.</p>"
    );
    if v.admin {
        grant_form(html, v);
    }
    if v.grants.is_empty() {
        html.push_str("<p class=\"empty\">No grants.</p></section>");
        return;
    }
    html.push_str(
        "<table class=\"grid\"><thead><tr><th>#</th><th>For</th><th>Server</th><th>Tools</th><th>Denied</th><th>Mode</th>\
         <th>Argument rule</th><th>Expires</th><th>By</th><th>State</th><th></th></tr></thead><tbody>",
    );
    for g in &v.grants {
        let state = if !g.enabled {
            "disabled"
        } else if g.expires_ms.is_some_and(|e| e <= v.now_ms) {
            "expired"
        } else {
            "active"
        };
        let actions = if v.admin {
            let (toggle, label) = if g.enabled { ("disable", "Disable") } else { ("enable", "Enable") };
            format!(
                "<div class=\"decide\"><form method=\"post\" action=\"/grants/{id}/{toggle}\">{csrf}\
                 <button class=\"button ghost small\">{label}</button></form>\
                 <form method=\"post\" action=\"/grants/{id}/revoke\">{csrf}\
                 <button class=\"button danger small\">Revoke</button></form></div>",
                id = g.id,
                csrf = csrf_field(&v.csrf)
            )
        } else {
            String::new()
        };
        let _ = write!(
            html,
            "<tr id=\"grant-{}\"><td>{}</td><td>{}</td><td>{}</td><td><code>{}</code></td><td><code>{}</code></td><td>{}</td>\
             <td><code class=\"rule\">{}</code></td><td>{}</td><td>{}</td><td><span class=\"pill {state}\">{state}</span></td>\
             <td>{actions}</td></tr>",
            g.id,
            g.id,
            esc(&g.subject),
            esc(g.server.as_deref().unwrap_or("toolgate")),
            esc(&or_all(&g.tool_allow)),
            esc(&g.tool_deny.join(", ")),
            esc(g.mode.as_str()),
            esc(g.arg_rule.as_deref().unwrap_or("")),
            esc(&when(g.expires_ms)),
            esc(&g.granted_by),
        );
    }
    html.push_str("</tbody></table></section>");
}

fn access_section(html: &mut String, v: &View) {
    let _ = write!(
        html,
        "<section class=\"card\" id=\"access\"><h2>Access requests <span class=\"live\" id=\"requests-live\">live</span></h2>\
         <form method=\"post\" action=\"/access\" class=\"row\">{}\
         <label>Tool<input name=\"tool\" placeholder=\"exec, fetch, git_*\"></label>\
         <label>Server<input name=\"server\" placeholder=\"a bridged server\"></label>\
         <label class=\"grow\">Reason<input name=\"reason\" required placeholder=\"what you need it for\"></label>\
         <button class=\"button primary\" type=\"submit\">Request access</button></form>",
        csrf_field(&v.csrf)
    );
    let _ = write!(html, "<div id=\"access-body\">{}</div></section>", access_rows(v));
}

/// The requests table (also fetched alone by the script when the event stream says the
/// requests changed: a decision reaches the requester's open page).
pub(crate) fn access_rows(v: &View) -> String {
    let mut html = String::new();
    if v.requests.is_empty() {
        html.push_str("<p class=\"empty\">No requests.</p>");
        return html;
    }
    html.push_str(
        "<table class=\"grid\"><thead><tr><th>#</th><th>Who</th><th>Asks for</th><th>Reason</th><th>Asked</th>\
         <th>State</th><th></th></tr></thead><tbody>",
    );
    for r in &v.requests {
        let what = match (&r.server, &r.tool) {
            (Some(server), Some(tool)) => format!("{tool} on {server}"),
            (Some(server), None) => format!("server {server}"),
            (None, Some(tool)) => tool.clone(),
            (None, None) => "—".to_owned(),
        };
        let status = r.status.as_str();
        let action = if r.status == AccessStatus::Pending && v.admin && r.user != v.user {
            format!(
                "<form method=\"post\" action=\"/access/{id}/approve\" class=\"decide\">{csrf}\
                 <input name=\"tools\" placeholder=\"only (tools)\" size=\"10\">\
                 <input name=\"expires\" placeholder=\"for (30d)\" size=\"7\">\
                 <button class=\"button primary small\">Approve</button></form>\
                 <form method=\"post\" action=\"/access/{id}/reject\" class=\"decide\">{csrf}\
                 <button class=\"button danger small\">Reject</button></form>",
                id = r.id,
                csrf = csrf_field(&v.csrf),
            )
        } else {
            let by = r.decided_by.as_deref().map(|b| format!("by {b}")).unwrap_or_default();
            let said = r.message.as_deref().map(|m| format!(": {m}")).unwrap_or_default();
            // The requester's webhook failed: they may not know yet (seen here and audited).
            let failed = r
                .notify_error
                .as_deref()
                .map(|e| {
                    format!(
                        " <span class=\"pill bad\" id=\"request-{}-notify\" title=\"{}\">not told</span> \
                         <span class=\"muted small\">the requester's webhook failed {}: {}</span>",
                        r.id,
                        esc(e),
                        esc(&when(r.notify_failed_ms)),
                        clip(e, 160)
                    )
                })
                .unwrap_or_default();
            format!("<span class=\"muted small\">{}</span>{failed}", esc(&format!("{by}{said}")))
        };
        let _ = write!(
            html,
            "<tr><td>{}</td><td>{}</td><td><code>{}</code></td><td>{}</td><td>{}</td>\
             <td><span class=\"pill {status}\" id=\"request-{id}-state\">{status}</span></td><td>{action}</td></tr>",
            r.id,
            esc(&r.requester),
            esc(&what),
            clip(&r.reason, 120),
            esc(&when(Some(r.created_ms))),
            id = r.id,
        );
    }
    html.push_str("</tbody></table>");
    html
}

fn keys_section(html: &mut String, v: &View) {
    let (title, who) = if v.admin {
        ("API keys", "<label>User or agent<input name=\"user\" required></label>".to_owned())
    } else {
        (
            "My API keys",
            format!(
                "<label>For<input name=\"user\" value=\"{}\" placeholder=\"you or your agent\"></label>",
                esc(&v.user)
            ),
        )
    };
    let _ = write!(
        html,
        "<section class=\"card\" id=\"keys\"><h2>{title}</h2><form method=\"post\" action=\"/keys\" class=\"row\">{}\
         {who}<label>Note<input name=\"note\"></label>\
         <label>Expires in<input name=\"expires\" placeholder=\"90d\"></label>\
         <button class=\"button primary\" type=\"submit\">Create key</button></form>",
        csrf_field(&v.csrf)
    );
    if v.keys.is_empty() {
        html.push_str("<p class=\"empty\">No keys yet.</p></section>");
        return;
    }
    html.push_str(
        "<table class=\"grid\"><thead><tr><th>Id</th><th>For</th><th>Note</th><th>Created</th><th>Expires</th>\
         <th>Last used</th><th>State</th><th></th></tr></thead><tbody>",
    );
    for k in &v.keys {
        let state = if k.revoked_ms.is_some() {
            "revoked"
        } else if k.expires_ms.is_some_and(|e| e <= v.now_ms) {
            "expired"
        } else {
            "active"
        };
        let revoke = if state == "active" {
            format!(
                "<form method=\"post\" action=\"/keys/{}/revoke\">{}<button class=\"button danger small\">Revoke</button></form>",
                esc(&url_segment(&k.id)),
                csrf_field(&v.csrf)
            )
        } else {
            String::new()
        };
        let _ = write!(
            html,
            "<tr><td><code>{}</code></td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td>\
             <td><span class=\"pill {state}\">{state}</span></td><td>{revoke}</td></tr>",
            esc(&k.id),
            esc(&k.principal),
            esc(&k.note),
            esc(&when(Some(k.created_ms))),
            esc(&when(k.expires_ms)),
            esc(&when(k.last_used_ms)),
        );
    }
    html.push_str("</tbody></table></section>");
}

fn users_section(html: &mut String, v: &View) {
    let _ = write!(
        html,
        "<section class=\"card\" id=\"users\"><h2>Users and workspaces</h2><form method=\"post\" action=\"/users\" class=\"row\">{}\
         <label>Name<input name=\"name\" required pattern=\"[A-Za-z0-9][A-Za-z0-9._@-]{{0,63}}\"></label>\
         <label>Groups<input name=\"group\" placeholder=\"ops, dev\"></label>\
         <label class=\"check\"><input type=\"checkbox\" name=\"admin\"> admin</label>\
         <button class=\"button primary\" type=\"submit\">Add user</button></form>",
        csrf_field(&v.csrf)
    );
    html.push_str(
        "<table class=\"grid\"><thead><tr><th>Name</th><th>Kind</th><th>Owner</th><th>Role</th><th>State</th>\
         <th>Added</th><th></th></tr></thead><tbody>",
    );
    for p in &v.principals {
        let kind = match p.kind {
            PrincipalKind::User => "user",
            PrincipalKind::Group => "group",
            PrincipalKind::Agent => "agent",
        };
        let state = if p.disabled { "disabled" } else { "active" };
        let toggle = match (p.kind, p.disabled) {
            (PrincipalKind::Group, _) => String::new(),
            (_, disabled) => format!(
                "<form method=\"post\" action=\"/users/{}/{}\">{}<button class=\"button small {}\">{}</button></form>",
                esc(&url_segment(&p.name)),
                if disabled { "enable" } else { "disable" },
                csrf_field(&v.csrf),
                if disabled { "" } else { "ghost" },
                if disabled { "Enable" } else { "Disable" },
            ),
        };
        let _ = write!(
            html,
            "<tr><td><strong>{}</strong></td><td>{kind}</td><td>{}</td><td>{}</td><td><span class=\"pill {state}\">{state}</span></td>\
             <td>{}</td><td>{toggle}</td></tr>",
            esc(&p.name),
            esc(p.owner.as_deref().unwrap_or("—")),
            if p.admin { "admin" } else { "" },
            esc(&format_time(p.created_ms)[..10]),
        );
    }
    html.push_str("</tbody></table></section>");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escaping_covers_text_and_attributes() {
        assert_eq!(esc("<script>\"x\"&'y'</script>"), "&lt;script&gt;&quot;x&quot;&amp;&#39;y&#39;&lt;/script&gt;");
        assert_eq!(esc("a\u{0}b\u{1b}c"), "a\u{fffd}b\u{fffd}c");
        assert_eq!(url_segment("ab/../c\"><x"), "ab..cx");
    }

    #[test]
    fn a_refused_grant_form_comes_back_escaped_and_a_hostile_rule_stays_text() {
        let session = crate::signin::Session { user: "lee".into(), admin: true, csrf: "t".into(), expires_ms: 0 };
        let mut view = View::empty(&session);
        view.grant_form = vec![
            ("to".into(), "ann".into()),
            ("tools".into(), "<script>alert(1)</script>".into()),
            ("args".into(), "exec(\" onerror=alert(1) x=\")".into()),
            ("mode".into(), "ask".into()),
        ];
        view.grants = vec![toolgate_store::ToolGrant {
            id: 3,
            subject: "ann".into(),
            server: None,
            tool_allow: vec!["exec".into()],
            tool_deny: Vec::new(),
            enabled: false,
            config_overrides: serde_json::json!({}),
            mode: toolgate_store::GrantMode::Allow,
            arg_rule: Some("exec(<img src=x onerror=alert(1)>)".into()),
            expires_ms: None,
            granted_by: "lee".into(),
            request: None,
            note: String::new(),
            created_ms: 1,
        }];
        let mut html = String::new();
        grants_section(&mut html, &view);
        assert!(!html.contains("<script>") && !html.contains("<img") && !html.contains("\" onerror"), "{html}");
        assert!(html.contains("value=\"&lt;script&gt;alert(1)&lt;/script&gt;\""), "refilled: {html}");
        assert!(html.contains("<option value=\"ask\" selected>"), "{html}");
        assert!(html.contains("/grants/3/enable") && html.contains("/grants/3/revoke"), "{html}");
        assert!(html.contains("exec(&lt;img src=x onerror=alert(1)&gt;)"), "{html}");
    }

    #[test]
    fn a_hostile_parameter_stays_text_in_the_inbox() {
        let call = PendingCall {
            id: "c1\"><script>".into(),
            user: "<img src=x onerror=alert(1)>".into(),
            agent: "a".into(),
            tool: "exec".into(),
            params: "{\"command\":\"</pre><script>alert(1)</script>\"}".into(),
            subject: None,
            reason: "<b>ask</b>".into(),
        };
        let html = inbox(&[call], "t");
        assert!(!html.contains("<script>") && !html.contains("<img") && !html.contains("<b>"), "{html}");
    }
}
