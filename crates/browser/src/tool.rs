//! `browser {action, ...}`: one tool for the whole browser.

use std::path::PathBuf;
use std::sync::{Arc, PoisonError};
use std::time::Duration;

use serde_json::{Value, json};
use toolgate_core::{
    Annotations, ApprovalRequirement, CallContext, CallSafety, Content, RateClass, Tool, ToolError, ToolOutput,
    ToolSpec, Touches, async_trait,
};

use crate::error::BrowserError;
use crate::output::save;
use crate::page::{Clip, MAX_PAGE_HEIGHT, MAX_PAGE_WIDTH, Tab, scheme_refusal};
use crate::session::{BrowserSession, Browsers, valid_session_id};
use crate::snapshot::{self, Options};

/// Default character budget of a snapshot.
const DEFAULT_BUDGET: usize = 12_000;
/// Largest PNG returned inline (bytes); a larger one is saved only.
const MAX_INLINE_IMAGE: usize = 4 * 1024 * 1024;

const ACTIONS: &[&str] = &[
    "start",
    "stop",
    "sessions",
    "tabs",
    "open",
    "navigate",
    "back",
    "snapshot",
    "find",
    "click",
    "type",
    "fill_form",
    "press",
    "select",
    "hover",
    "scroll",
    "wait_for",
    "screenshot",
    "pdf",
    "console",
    "dialog",
    "evaluate",
];

/// The `browser` tool.
#[derive(Debug)]
pub struct BrowserTool {
    spec: ToolSpec,
    browsers: Browsers,
}

impl BrowserTool {
    /// The tool over `browsers`.
    pub fn new(browsers: Browsers) -> Self {
        let spec = ToolSpec::new(
            "browser",
            "Drive a headless Chromium for pages that need JavaScript. `action`: start | stop | sessions | tabs | \
             open | navigate | back | snapshot | find | click | type | fill_form | press | select | hover | \
             scroll | wait_for | screenshot | pdf | console | dialog | evaluate. Each connection has its own \
             session, started by the first action; `start` gives its id, which `session` names to act on it \
             from another connection (on whichever node holds it); `sessions` lists yours. `snapshot` returns the page's \
             accessibility tree, one line per element (`- button \"Submit\" [ref=e12]`); act on elements by \
             `ref`. Refs stay the same for the same element across snapshots and go stale when the page \
             navigates. Actions return a short result (new URL, dialogs, what was refused); add \
             `snapshot: true` for a snapshot after the action. Only http(s) pages; private addresses only \
             where the web tools' allow_private allows them. `evaluate` runs JavaScript in the page and is \
             approved by a person every time.",
            json!({
                "type": "object",
                "properties": {
                    "action": {"type": "string", "enum": ACTIONS},
                    "session": {"type": "string", "maxLength": 64, "description": "The id of one of your sessions (`tg-browser-...`, from `start` or `sessions`) to act on instead of this connection's own"},
                    "via": {"type": "string", "maxLength": 200, "description": "Set by another toolgate node that forwarded this call (leave it out)."},
                    "url": {"type": "string", "description": "open, navigate: an http(s) URL"},
                    "ref": {"type": "string", "description": "An element's ref from a snapshot (`e12`); snapshot: the subtree to show"},
                    "text": {"type": "string", "description": "type: the text; find, wait_for: the text to look for"},
                    "regex": {"type": "boolean", "description": "find, wait_for: `text` is a regular expression"},
                    "submit": {"type": "boolean", "description": "type: press Enter after the text"},
                    "fields": {
                        "type": "array", "maxItems": 100,
                        "items": {
                            "type": "object",
                            "properties": {"ref": {"type": "string"}, "value": {"type": "string"}},
                            "required": ["ref", "value"], "additionalProperties": false
                        },
                        "description": "fill_form: the fields and their values (checkboxes: \"true\"/\"false\"; selects: an option's value or label)"
                    },
                    "key": {"type": "string", "description": "press: Enter, Tab, Escape, Backspace, Delete, ArrowUp/Down/Left/Right, Home, End, PageUp, PageDown, Space or one character"},
                    "values": {"type": "array", "items": {"type": "string"}, "maxItems": 100, "description": "select: the options' values or labels"},
                    "dy": {"type": "integer", "minimum": -100000, "maximum": 100000, "description": "scroll: pixels down (negative: up), default 600; with `ref`, scrolls that element into view"},
                    "network_idle": {"type": "boolean", "description": "wait_for: no request in flight for 500 ms"},
                    "timeout_ms": {"type": "integer", "minimum": 100, "maximum": 60000, "description": "wait_for, navigate, open: the longest wait (default 20000: the pool's load timeout)"},
                    "full_page": {"type": "boolean", "description": "screenshot: the whole page, not just the viewport"},
                    "width": {"type": "integer", "minimum": 16, "maximum": 4096, "description": "screenshot: viewport width"},
                    "height": {"type": "integer", "minimum": 16, "maximum": 4096, "description": "screenshot: viewport height"},
                    "depth": {"type": "integer", "minimum": 0, "maximum": 200, "description": "snapshot: most levels shown"},
                    "max_chars": {"type": "integer", "minimum": 500, "maximum": 200000, "description": "snapshot: character budget (default 12000); a larger snapshot is saved to a file and summarized"},
                    "snapshot": {"type": "boolean", "description": "After the action, return a snapshot too"},
                    "tab": {"type": "integer", "minimum": 0, "maximum": 1000, "description": "tabs: make this tab current"},
                    "close": {"type": "integer", "minimum": 0, "maximum": 1000, "description": "tabs: close this tab"},
                    "accept": {"type": "boolean", "description": "dialog: accept (OK) or dismiss (Cancel)"},
                    "prompt_text": {"type": "string", "maxLength": 10000, "description": "dialog: the answer to a prompt()"},
                    "expression": {"type": "string", "maxLength": 100000, "description": "evaluate: a JavaScript expression (run in the page; approved every time)"}
                },
                "required": ["action"],
                "additionalProperties": false
            }),
        )
        .group("browser")
        .annotations(Annotations { read_only: false, destructive: false, idempotent: false, open_world: true });
        BrowserTool { spec, browsers }
    }
}

fn session_key(ctx: &CallContext) -> String {
    format!("{}\u{1f}{}", ctx.identity.user, ctx.identity.session)
}

fn err(e: BrowserError) -> ToolError {
    ToolError::failed(e.to_string())
}

fn host_of(url: &str) -> Vec<String> {
    url::Url::parse(url).ok().and_then(|u| u.host_str().map(|h| h.to_ascii_lowercase())).into_iter().collect()
}

#[async_trait]
impl Tool for BrowserTool {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    fn safety(&self, params: &Value) -> CallSafety {
        let action = params["action"].as_str().unwrap_or_default();
        let url = params["url"].as_str().unwrap_or_default();
        let mut safety = match action {
            "evaluate" => CallSafety::needs_approval(
                ApprovalRequirement::Always,
                "runs JavaScript the model wrote inside the page (it can act as the signed-in user of that site)",
            ),
            _ => CallSafety::default(),
        };
        safety.approval_subject = (action == "evaluate")
            .then(|| format!("browser evaluate: {}", params["expression"].as_str().unwrap_or_default()));
        safety.rate_class = if matches!(action, "open" | "navigate") { RateClass::Http } else { RateClass::Default };
        safety.read_only = matches!(action, "tabs" | "snapshot" | "find" | "console" | "screenshot");
        safety.touches = Touches { hosts: host_of(url), ..Touches::default() };
        let wait = params["timeout_ms"].as_u64().map_or(self.browsers.config().load_timeout, Duration::from_millis);
        safety.timeout = Some(wait + Duration::from_secs(60));
        // A session named by id may be another node's: the call is sent there, and may wait
        // for that node's approval (`evaluate`).
        safety.forwards = params.get("session").is_some_and(|s| !s.is_null());
        safety
    }

    async fn execute(&self, ctx: &CallContext, params: Value) -> Result<ToolOutput, ToolError> {
        let action = params["action"].as_str().unwrap_or_default().to_owned();
        let user = ctx.identity.user.as_str();
        let run = async {
            // A session named by id: this caller's, here or on the node that holds it.
            let named = match params.get("session") {
                None | Some(Value::Null) => None,
                Some(id) => Some(self.named(ctx, id, &params).await?),
            };
            let session = match named {
                Some(Named::Elsewhere(out)) => return Ok(out),
                Some(Named::Here(session)) => Some(session),
                None => None,
            };
            match action.as_str() {
                "sessions" => Ok(self.sessions(ctx)),
                "stop" => {
                    let key = session.as_ref().map_or_else(|| session_key(ctx), |s| s.key().to_owned());
                    let had = self.browsers.close(&key).await;
                    Ok(ToolOutput::text(if had {
                        "Browser session stopped: its tabs, cookies and storage are gone."
                    } else {
                        "No browser session was running."
                    }))
                }
                _ => {
                    let session = match session {
                        Some(s) => s,
                        None => {
                            self.browsers.session_for(&session_key(ctx), user, &ctx.workspace).await.map_err(err)?
                        }
                    };
                    Act { session, ctx, params: &params, workspace: ctx.workspace.to_path_buf() }.run(&action).await
                }
            }
        };
        tokio::select! {
            out = run => out,
            () = ctx.cancel.cancelled() => Err(ToolError::Cancelled),
        }
    }
}

/// The session a call names with `session`.
enum Named {
    /// It runs here.
    Here(BrowserSession),
    /// Another node holds it: its answer to the call (forwarded there).
    Elsewhere(ToolOutput),
}

impl BrowserTool {
    /// The caller's session `id` (the call's `session`): here, or the answer of the node that
    /// holds it. Only the store's record says where that is; anyone else's id, or one nobody
    /// had, is "not found" with nothing about any node.
    async fn named(&self, ctx: &CallContext, id: &Value, params: &Value) -> Result<Named, ToolError> {
        let user = ctx.identity.user.as_str();
        let id = id.as_str().filter(|id| valid_session_id(id)).ok_or_else(|| {
            ToolError::invalid(
                "browser",
                "/session",
                "`session` is a session id as `start` or `sessions` gives it: `tg-browser-` and 32 hex digits",
            )
        })?;
        if let Some(session) = self.browsers.by_id(id, user, &ctx.workspace) {
            return Ok(Named::Here(session));
        }
        // Its browser died here (killed, crashed): it is gone, and so is its record.
        if self.browsers.ended(id, user, &ctx.workspace) {
            let node = toolgate_tools::runtime::this_node()
                .map_or_else(|| "this node".to_owned(), |n| format!("node `{}`", n.name));
            return Err(ToolError::failed(format!(
                "the browser session {id} on {node} has ended: its browser exited (killed or crashed), and its \
                 tabs, cookies and storage went with it. Start a new one with {{\"action\": \"start\"}}"
            )));
        }
        let owners = self.browsers.owners();
        match owners.owner_elsewhere(id, &ctx.workspace, user) {
            Some(owner) => Ok(Named::Elsewhere(owners.answer(&owner?, ctx, params).await?)),
            None => Err(ToolError::NotFound {
                what: format!("browser session `{id}`"),
                hint: Some(
                    "list your sessions with {\"action\": \"sessions\"} (a session ends when it is stopped, when \
                     its browser exits and when its node stops; start a new one with {\"action\": \"start\"}); \
                     leave `session` out to use this connection's own"
                        .to_owned(),
                ),
            }),
        }
    }

    /// The caller's sessions here and on the other nodes.
    fn sessions(&self, ctx: &CallContext) -> ToolOutput {
        let user = ctx.identity.user.as_str();
        let here = self.browsers.of(user, &ctx.workspace);
        let elsewhere = self.browsers.owners().elsewhere(&ctx.workspace, user);
        if here.is_empty() && elsewhere.is_empty() {
            return ToolOutput::text("No browser sessions; the first action starts one.")
                .with_meta(json!({ "sessions": [] }));
        }
        let own = session_key(ctx);
        let mut text = format!("{} browser sessions:\n", here.len() + elsewhere.len());
        let mut rows = Vec::new();
        for s in &here {
            let mine = if s.key() == own { " (this connection's)" } else { "" };
            text.push_str(&format!("{}  on this node{mine}\n", s.id()));
            rows.push(json!({ "id": s.id(), "node": null, "this_connection": s.key() == own }));
        }
        for s in &elsewhere {
            let node = match &s.node_url {
                Some(url) => format!("{} ({url})", s.node),
                None => s.node.clone(),
            };
            text.push_str(&format!("{}  on node {node}\n", s.id));
            rows.push(json!({ "id": s.id, "node": s.node, "node_url": s.node_url }));
        }
        text.push_str("Act on one with `session`: its id.");
        ToolOutput::text(text).with_meta(json!({ "sessions": rows }))
    }
}

/// One action on one session.
struct Act<'a> {
    session: BrowserSession,
    ctx: &'a CallContext,
    params: &'a Value,
    workspace: PathBuf,
}

impl Act<'_> {
    fn str(&self, name: &str) -> Option<&str> {
        self.params[name].as_str()
    }

    fn need(&self, name: &str) -> Result<&str, ToolError> {
        self.str(name).filter(|s| !s.trim().is_empty()).ok_or_else(|| {
            ToolError::invalid(
                "browser",
                format!("/{name}"),
                format!("action `{}` needs `{name}`", self.params["action"].as_str().unwrap_or_default()),
            )
        })
    }

    fn timeout(&self) -> Duration {
        self.params["timeout_ms"].as_u64().map_or(self.session.inner.load_timeout, Duration::from_millis)
    }

    async fn run(&self, action: &str) -> Result<ToolOutput, ToolError> {
        let mark = self.session.inner.process.proxy_mark();
        let tab = self.session.current().await.map_err(err)?;
        let refused_before = tab.state.refused.lock().unwrap_or_else(PoisonError::into_inner).len();
        if !matches!(action, "dialog" | "tabs" | "console" | "start") {
            tab.check_dialog().map_err(err)?;
        }
        let mut out = match action {
            "start" => format!(
                "Browser session {} ready; current tab: {}. Network: {}.",
                self.session.id(),
                tab.url(),
                self.session.inner.process.network
            ),
            "tabs" => self.tabs().await?,
            "open" => {
                let url = self.need("url")?;
                let tab = self.session.open_tab("about:blank").await.map_err(err)?;
                let loaded = tab.navigate(url, self.timeout()).await.map_err(err)?;
                self.check_landed(&tab, mark)?;
                self.moved(&tab, loaded)
            }
            "navigate" => {
                let url = self.need("url")?;
                let loaded = tab.navigate(url, self.timeout()).await.map_err(err)?;
                self.check_landed(&tab, mark)?;
                self.moved(&tab, loaded)
            }
            "back" => self.back(&tab).await?,
            "snapshot" => return self.snapshot(&tab, true).await,
            "find" => self.find(&tab).await?,
            "click" => self.click(&tab).await?,
            "hover" => {
                let (x, y) = self.center(&tab, self.need("ref")?).await?;
                mouse(&tab, "mouseMoved", x, y).await?;
                format!("Hovered {}.", self.need("ref")?)
            }
            "type" => self.type_text(&tab).await?,
            "fill_form" => self.fill_form(&tab).await?,
            "press" => self.press(&tab).await?,
            "select" => self.select(&tab).await?,
            "scroll" => self.scroll(&tab).await?,
            "wait_for" => self.wait_for(&tab).await?,
            "screenshot" => return self.screenshot(&tab).await,
            "pdf" => self.pdf(&tab).await?,
            "console" => self.console(&tab),
            "dialog" => self.dialog(&tab).await?,
            "evaluate" => self.evaluate(&tab).await?,
            other => {
                return Err(ToolError::invalid(
                    "browser",
                    "/action",
                    format!("`{other}` is not an action; use one of {}", ACTIONS.join(", ")),
                ));
            }
        };
        // What was refused while the action ran, and a dialog it opened.
        let tab = self.session.current().await.map_err(err)?;
        let refused: Vec<String> = tab
            .state
            .refused
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .skip(refused_before)
            .cloned()
            .collect();
        for r in refused {
            out.push_str(&format!("\nRefused: {r}"));
        }
        for event in self.session.inner.process.refusals_since(mark) {
            if let Some(why) = event.refused {
                out.push_str(&format!("\nBlocked a connection to {}: {why}", event.target));
            }
        }
        let closed = self.session.inner.process.targets.take_closed_over_cap(&self.session.inner.context_id);
        if closed > 0 {
            out.push_str(&format!(
                "\nThe page tried to open more tabs than allowed ({}); {closed} were closed at once.",
                self.session.inner.process.targets.max_tabs()
            ));
        }
        if let Some(d) = tab.state.dialog.lock().unwrap_or_else(PoisonError::into_inner).clone() {
            out.push_str(&format!(
                "\nA {} dialog is open: \"{}\". Answer it with action `dialog` (`accept`: true or false).",
                d.kind, d.message
            ));
        }
        if self.params["snapshot"].as_bool() == Some(true) && action != "snapshot" {
            let snap = self.snapshot(&tab, false).await?;
            out.push_str("\n\n");
            out.push_str(&snap.text_content());
        }
        Ok(ToolOutput::text(out))
    }

    /// A page whose own address the proxy refused (a redirect to a blocked address) shows the
    /// proxy's refusal, not the site: an error, not "opened".
    fn check_landed(&self, tab: &Tab, mark: u64) -> Result<(), ToolError> {
        self.session.inner.process.check_landed(&tab.url(), mark).map_err(err)
    }

    fn moved(&self, tab: &Tab, loaded: bool) -> String {
        if loaded {
            format!("Opened {}.", tab.url())
        } else {
            format!(
                "Went to {} but it had not finished loading after {} ms; it keeps loading (take a snapshot, or wait_for text).",
                tab.url(),
                self.timeout().as_millis()
            )
        }
    }

    async fn tabs(&self) -> Result<String, ToolError> {
        let tabs = self.session.sync_tabs().await.map_err(err)?;
        if let Some(close) = self.params["close"].as_u64() {
            let tab = tabs.get(close as usize).ok_or_else(|| {
                ToolError::invalid("browser", "/close", format!("there is no tab {close}; there are {}", tabs.len()))
            })?;
            let _ = self
                .session
                .inner
                .process
                .cdp
                .send(None, "Target.closeTarget", json!({"targetId": tab.target_id}), Duration::from_secs(10))
                .await;
            tab.detach();
            self.session
                .inner
                .tabs
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .0
                .retain(|t| t.target_id != tab.target_id);
        }
        if let Some(select) = self.params["tab"].as_u64() {
            let mut guard = self.session.inner.tabs.lock().unwrap_or_else(PoisonError::into_inner);
            if select as usize >= guard.0.len() {
                return Err(ToolError::invalid(
                    "browser",
                    "/tab",
                    format!("there is no tab {select}; there are {}", guard.0.len()),
                ));
            }
            guard.1 = select as usize;
        }
        let current = self.session.current().await.map_err(err)?;
        let tabs = self.session.inner.tabs.lock().unwrap_or_else(PoisonError::into_inner).0.clone();
        let mut out = format!("{} tab(s):\n", tabs.len());
        for (i, t) in tabs.iter().enumerate() {
            let mark = if t.target_id == current.target_id { " (current)" } else { "" };
            out.push_str(&format!("{i}: {}{mark}\n", t.url()));
        }
        Ok(out.trim_end().to_owned())
    }

    async fn back(&self, tab: &Tab) -> Result<String, ToolError> {
        let history = tab.call("Page.getNavigationHistory", json!({})).await.map_err(err)?;
        let index = history["currentIndex"].as_i64().unwrap_or(0);
        if index <= 0 {
            return Ok("There is no earlier page in this tab.".to_owned());
        }
        let entry = &history["entries"][(index - 1) as usize];
        let url = entry["url"].as_str().unwrap_or_default();
        if let Some(why) = scheme_refusal(url) {
            return Err(err(BrowserError::Refused(why)));
        }
        let mut loads = tab.state.loads.subscribe();
        loads.mark_unchanged();
        tab.call("Page.navigateToHistoryEntry", json!({"entryId": entry["id"]})).await.map_err(err)?;
        let loaded = tab.wait_load(&mut loads, self.timeout()).await;
        Ok(self.moved(tab, loaded))
    }

    async fn snapshot(&self, tab: &Tab, alone: bool) -> Result<ToolOutput, ToolError> {
        let options = Options {
            depth: self.params["depth"].as_u64().map(|d| d as usize),
            root: if alone { self.str("ref").map(str::to_owned) } else { None },
        };
        let text = snapshot::render(tab, &options).await.map_err(err)?;
        let budget = self.params["max_chars"].as_u64().map_or(DEFAULT_BUDGET, |b| b as usize);
        let header = format!("Page: {}\n", tab.url());
        let chars = text.chars().count();
        if chars <= budget {
            return Ok(ToolOutput::text(format!("{header}{text}")));
        }
        let path = save(&self.workspace, "snapshot", "txt", format!("{header}{text}").as_bytes())?;
        let head: String = text.chars().take(budget.saturating_sub(600)).collect();
        let head = &head[..head.rfind('\n').unwrap_or(head.len())];
        Ok(ToolOutput::text(format!(
            "{header}{head}\n… The snapshot is {chars} characters, over the budget of {budget}: the whole of it is saved to {} (read it, or use `find`, a subtree `ref`, or `depth`).",
            path.display()
        )))
    }

    async fn find(&self, tab: &Tab) -> Result<String, ToolError> {
        let needle = self.need("text")?;
        let matcher: Box<dyn Fn(&str) -> bool + Send + Sync> = if self.params["regex"].as_bool() == Some(true) {
            let re =
                regex::RegexBuilder::new(needle).case_insensitive(true).size_limit(1 << 20).build().map_err(|e| {
                    ToolError::invalid("browser", "/text", format!("not a valid regular expression: {e}"))
                })?;
            Box::new(move |line| re.is_match(line))
        } else {
            let lower = needle.to_lowercase();
            Box::new(move |line| line.to_lowercase().contains(&lower))
        };
        let text = snapshot::render(tab, &Options::default()).await.map_err(err)?;
        let lines: Vec<&str> = text.lines().collect();
        let hits: Vec<usize> = (0..lines.len()).filter(|&i| matcher(lines[i])).collect();
        if hits.is_empty() {
            return Ok(format!("No line of the snapshot of {} matches `{needle}`.", tab.url()));
        }
        let mut out = format!("{} match(es) in the snapshot of {}:\n", hits.len(), tab.url());
        let mut last_shown = None;
        for &i in hits.iter().take(50) {
            let from = i.saturating_sub(1).max(last_shown.map_or(0, |l: usize| l + 1));
            let to = (i + 1).min(lines.len() - 1);
            if last_shown.is_some_and(|l| from > l + 1) {
                out.push_str("--\n");
            }
            for line in &lines[from..=to] {
                out.push_str(line);
                out.push('\n');
            }
            last_shown = Some(to);
        }
        if hits.len() > 50 {
            out.push_str(&format!("… and {} more; narrow the search.\n", hits.len() - 50));
        }
        Ok(out.trim_end().to_owned())
    }

    /// The center of a ref's element, scrolled into view.
    async fn center(&self, tab: &Tab, r: &str) -> Result<(f64, f64), ToolError> {
        let target = snapshot::resolve(tab, r).await.map_err(err)?;
        let id = target.backend_id;
        let _ = tab.call("DOM.scrollIntoViewIfNeeded", json!({"backendNodeId": id})).await;
        let quads = tab.call("DOM.getContentQuads", json!({"backendNodeId": id})).await.map_err(|_| {
            err(BrowserError::Refused(format!("element {r} is not visible (no box on the page); it cannot be clicked")))
        })?;
        let quad = quads["quads"][0].as_array().cloned().unwrap_or_default();
        if quad.len() < 8 {
            return Err(err(BrowserError::Refused(format!("element {r} is not visible (no box on the page)"))));
        }
        let xs: Vec<f64> = quad.iter().step_by(2).filter_map(Value::as_f64).collect();
        let ys: Vec<f64> = quad.iter().skip(1).step_by(2).filter_map(Value::as_f64).collect();
        Ok((xs.iter().sum::<f64>() / xs.len() as f64, ys.iter().sum::<f64>() / ys.len() as f64))
    }

    async fn click(&self, tab: &Tab) -> Result<String, ToolError> {
        let r = self.need("ref")?;
        let (x, y) = self.center(tab, r).await?;
        let url_before = tab.url();
        let mut loads = tab.state.loads.subscribe();
        loads.mark_unchanged();
        mouse(tab, "mouseMoved", x, y).await?;
        mouse(tab, "mousePressed", x, y).await?;
        mouse(tab, "mouseReleased", x, y).await?;
        Ok(self.after_input(tab, &mut loads, &url_before, format!("Clicked {r}.")).await)
    }

    /// After an input that may navigate: waits for a load that started, and says where it went.
    async fn after_input(
        &self,
        tab: &Tab,
        loads: &mut tokio::sync::watch::Receiver<u64>,
        url_before: &str,
        what: String,
    ) -> String {
        // A navigation starts within a moment of the input, or not at all.
        tokio::time::sleep(Duration::from_millis(150)).await;
        if tab.state.loading.load(std::sync::atomic::Ordering::Relaxed) {
            tab.wait_load(loads, self.timeout()).await;
        }
        let url = tab.url();
        if url != url_before { format!("{what} The page is now {url}.") } else { what }
    }

    async fn type_text(&self, tab: &Tab) -> Result<String, ToolError> {
        let r = self.need("ref")?;
        let text = self.str("text").unwrap_or_default();
        let target = snapshot::resolve(tab, r).await.map_err(err)?;
        tab.call("DOM.focus", json!({"backendNodeId": target.backend_id})).await.map_err(err)?;
        tab.call("Input.insertText", json!({"text": text})).await.map_err(err)?;
        let mut what = format!("Typed {} character(s) into {r}.", text.chars().count());
        if self.params["submit"].as_bool() == Some(true) {
            let url_before = tab.url();
            let mut loads = tab.state.loads.subscribe();
            loads.mark_unchanged();
            key(tab, "Enter").await?;
            what = self.after_input(tab, &mut loads, &url_before, format!("{what} Pressed Enter.")).await;
        }
        Ok(what)
    }

    async fn fill_form(&self, tab: &Tab) -> Result<String, ToolError> {
        let fields = self.params["fields"].as_array().cloned().unwrap_or_default();
        if fields.is_empty() {
            return Err(ToolError::invalid("browser", "/fields", "action `fill_form` needs `fields`: [{ref, value}]"));
        }
        let mut done = Vec::new();
        for field in &fields {
            let r = field["ref"].as_str().unwrap_or_default();
            let value = field["value"].as_str().unwrap_or_default();
            let target = snapshot::resolve(tab, r).await.map_err(err)?;
            let object = object_of(tab, target.backend_id).await?;
            let kind = call_on(
                tab,
                &object,
                "function(){return this.tagName === 'SELECT' ? 'select' : (this.type || '').toLowerCase()}",
                json!([]),
            )
            .await?;
            match kind.as_str().unwrap_or_default() {
                "select" => {
                    call_on(tab, &object, SELECT_FN, json!([[value]])).await?;
                }
                "checkbox" | "radio" => {
                    let want = matches!(value.to_ascii_lowercase().as_str(), "true" | "on" | "yes" | "1" | "checked");
                    let checked = call_on(tab, &object, "function(){return this.checked}", json!([])).await?;
                    if checked.as_bool() != Some(want) {
                        let (x, y) = self.center(tab, r).await?;
                        mouse(tab, "mousePressed", x, y).await?;
                        mouse(tab, "mouseReleased", x, y).await?;
                    }
                }
                _ => {
                    tab.call("DOM.focus", json!({"backendNodeId": target.backend_id})).await.map_err(err)?;
                    call_on(tab, &object, "function(){ if ('value' in this) { this.value = ''; } else if (this.isContentEditable) { this.textContent = ''; } }", json!([])).await?;
                    tab.call("Input.insertText", json!({"text": value})).await.map_err(err)?;
                }
            }
            let _ = tab.call("Runtime.releaseObject", json!({"objectId": object})).await;
            done.push(r.to_owned());
        }
        Ok(format!("Filled {} field(s): {}.", done.len(), done.join(", ")))
    }

    async fn press(&self, tab: &Tab) -> Result<String, ToolError> {
        let name = self.need("key")?;
        let url_before = tab.url();
        let mut loads = tab.state.loads.subscribe();
        loads.mark_unchanged();
        key(tab, name).await?;
        Ok(self.after_input(tab, &mut loads, &url_before, format!("Pressed {name}.")).await)
    }

    async fn select(&self, tab: &Tab) -> Result<String, ToolError> {
        let r = self.need("ref")?;
        let values = self.params["values"].clone();
        if values.as_array().is_none_or(|v| v.is_empty()) {
            return Err(ToolError::invalid(
                "browser",
                "/values",
                "action `select` needs `values`: the options to select",
            ));
        }
        let target = snapshot::resolve(tab, r).await.map_err(err)?;
        let object = object_of(tab, target.backend_id).await?;
        let chosen = call_on(tab, &object, SELECT_FN, json!([values])).await?;
        let _ = tab.call("Runtime.releaseObject", json!({"objectId": object})).await;
        match chosen.as_i64() {
            Some(-1) => Err(err(BrowserError::Invalid(format!("{r} is not a <select> element")))),
            Some(0) => Err(err(BrowserError::Invalid(format!(
                "none of the values matched an option of {r}; take a snapshot to see its options"
            )))),
            Some(n) => Ok(format!("Selected {n} option(s) in {r}.")),
            None => Ok(format!("Selected in {r}.")),
        }
    }

    async fn scroll(&self, tab: &Tab) -> Result<String, ToolError> {
        if let Some(r) = self.str("ref") {
            let target = snapshot::resolve(tab, r).await.map_err(err)?;
            tab.call("DOM.scrollIntoViewIfNeeded", json!({"backendNodeId": target.backend_id})).await.map_err(err)?;
            return Ok(format!("Scrolled {r} into view."));
        }
        let dy = self.params["dy"].as_i64().unwrap_or(600);
        tab.call(
            "Input.dispatchMouseEvent",
            json!({"type": "mouseWheel", "x": 100, "y": 100, "deltaX": 0, "deltaY": dy}),
        )
        .await
        .map_err(err)?;
        Ok(format!("Scrolled {dy} pixels."))
    }

    async fn wait_for(&self, tab: &Tab) -> Result<String, ToolError> {
        let deadline = tokio::time::Instant::now() + self.timeout();
        let text = self.str("text").filter(|t| !t.is_empty());
        let r = self.str("ref");
        let idle = self.params["network_idle"].as_bool() == Some(true);
        if text.is_none() && r.is_none() && !idle {
            return Err(ToolError::invalid(
                "browser",
                "",
                "action `wait_for` needs `text`, `ref` or `network_idle: true`",
            ));
        }
        let re =
            match (text, self.params["regex"].as_bool() == Some(true)) {
                (Some(t), true) => Some(regex::RegexBuilder::new(t).size_limit(1 << 20).build().map_err(|e| {
                    ToolError::invalid("browser", "/text", format!("not a valid regular expression: {e}"))
                })?),
                _ => None,
            };
        loop {
            let mut ok = true;
            if idle {
                ok &= tab.state.network_idle(Duration::from_millis(500));
            }
            if let Some(r) = r {
                ok &= snapshot::resolve(tab, r).await.is_ok();
            }
            if ok && let Some(t) = text {
                let snap = snapshot::render(tab, &Options::default()).await.map_err(err)?;
                ok = match &re {
                    Some(re) => re.is_match(&snap),
                    None => snap.contains(t),
                };
            }
            if ok {
                return Ok("The condition holds.".to_owned());
            }
            if tab.state.dialog.lock().unwrap_or_else(PoisonError::into_inner).is_some() {
                return Ok("Stopped waiting: a dialog opened.".to_owned());
            }
            if tokio::time::Instant::now() >= deadline {
                return Err(err(BrowserError::Timeout {
                    what: "waiting for the condition".to_owned(),
                    secs: self.timeout().as_secs(),
                }));
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    }

    async fn screenshot(&self, tab: &Tab) -> Result<ToolOutput, ToolError> {
        let size = match (self.params["width"].as_u64(), self.params["height"].as_u64()) {
            (Some(w), Some(h)) => Some((w as u32, h as u32)),
            (None, None) => None,
            _ => return Err(ToolError::invalid("browser", "/width", "give both `width` and `height`, or neither")),
        };
        let (png, page) = match self.str("ref") {
            Some(r) => {
                let target = snapshot::resolve(tab, r).await.map_err(err)?;
                let _ = tab.call("DOM.scrollIntoViewIfNeeded", json!({"backendNodeId": target.backend_id})).await;
                let model =
                    tab.call("DOM.getBoxModel", json!({"backendNodeId": target.backend_id})).await.map_err(|_| {
                        err(BrowserError::Refused(format!("element {r} is not visible (no box on the page)")))
                    })?;
                let b = &model["model"]["border"];
                let xs: Vec<f64> = (0..4).filter_map(|i| b[i * 2].as_f64()).collect();
                let ys: Vec<f64> = (0..4).filter_map(|i| b[i * 2 + 1].as_f64()).collect();
                let (x0, x1) = (xs.iter().cloned().fold(f64::MAX, f64::min), xs.iter().cloned().fold(0.0, f64::max));
                let (y0, y1) = (ys.iter().cloned().fold(f64::MAX, f64::min), ys.iter().cloned().fold(0.0, f64::max));
                let clip = Clip {
                    x: x0,
                    y: y0,
                    width: (x1 - x0).clamp(1.0, MAX_PAGE_WIDTH),
                    height: (y1 - y0).clamp(1.0, MAX_PAGE_HEIGHT),
                    scale: 1.0,
                };
                (tab.capture(Some(clip)).await.map_err(err)?, None)
            }
            None => tab.screenshot(self.params["full_page"].as_bool() == Some(true), size).await.map_err(err)?,
        };
        let bytes = png.bytes.len();
        let path = save(&self.workspace, "screenshot", "png", &png.bytes)?;
        let cut = page.and_then(|p| p.cut_note());
        let shown = bytes <= MAX_INLINE_IMAGE;
        let mut text = if shown {
            format!("Screenshot of {} ({bytes} bytes) saved to {}.", tab.url(), path.display())
        } else {
            format!(
                "Screenshot of {} saved to {} ({bytes} bytes, too large to show; take a viewport screenshot or a smaller size).",
                tab.url(),
                path.display(),
            )
        };
        if let Some(note) = &cut {
            text.push(' ');
            text.push_str(note);
            text.push_str(" To see the rest, scroll (action `scroll`) and take viewport screenshots, or screenshot an element (`ref`).");
        }
        let mut content = vec![Content::Text { text }];
        if shown {
            content.push(Content::Image { data: png.base64, mime_type: "image/png".to_owned() });
        }
        Ok(ToolOutput {
            content,
            structured: None,
            meta: Some(json!({"path": path, "bytes": bytes, "cut": cut.is_some()})),
        })
    }

    async fn pdf(&self, tab: &Tab) -> Result<String, ToolError> {
        let pdf = tab
            .call_for("Page.printToPDF", json!({"printBackground": true}), Duration::from_secs(60))
            .await
            .map_err(err)?;
        use base64::Engine as _;
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(pdf["data"].as_str().unwrap_or_default())
            .map_err(|e| ToolError::failed(format!("the browser sent a PDF that is not base64: {e}")))?;
        let path = save(&self.workspace, "page", "pdf", &bytes)?;
        Ok(format!("PDF of {} ({} bytes) saved to {}.", tab.url(), bytes.len(), path.display()))
    }

    fn console(&self, tab: &Tab) -> String {
        let lines: Vec<String> =
            tab.state.console.lock().unwrap_or_else(PoisonError::into_inner).iter().cloned().collect();
        if lines.is_empty() {
            return format!("No console messages from {}.", tab.url());
        }
        format!("Console of {} (last {}):\n{}", tab.url(), lines.len(), lines.join("\n"))
    }

    async fn dialog(&self, tab: &Tab) -> Result<String, ToolError> {
        let Some(d) = tab.state.dialog.lock().unwrap_or_else(PoisonError::into_inner).clone() else {
            return Ok("No dialog is open.".to_owned());
        };
        let accept = self.params["accept"].as_bool().unwrap_or(true);
        let mut params = json!({"accept": accept});
        if let Some(text) = self.str("prompt_text") {
            params["promptText"] = json!(text);
        }
        tab.call("Page.handleJavaScriptDialog", params).await.map_err(err)?;
        *tab.state.dialog.lock().unwrap_or_else(PoisonError::into_inner) = None;
        Ok(format!("{} the {} dialog \"{}\".", if accept { "Accepted" } else { "Dismissed" }, d.kind, d.message))
    }

    async fn evaluate(&self, tab: &Tab) -> Result<String, ToolError> {
        let expression = self.need("expression")?;
        let result = tab
            .call_for(
                "Runtime.evaluate",
                json!({"expression": expression, "returnByValue": true, "awaitPromise": true, "timeout": 10000, "userGesture": false}),
                Duration::from_secs(15),
            )
            .await
            .map_err(err)?;
        if let Some(ex) = result.get("exceptionDetails") {
            let text = ex["exception"]["description"].as_str().or(ex["text"].as_str()).unwrap_or("an exception");
            return Err(ToolError::failed(format!(
                "the script threw: {}",
                text.chars().take(2000).collect::<String>()
            )));
        }
        let value = &result["result"];
        let shown = match &value["value"] {
            Value::Null if value["type"] == "undefined" => "undefined".to_owned(),
            Value::String(s) => s.clone(),
            Value::Null => value["description"].as_str().unwrap_or("null").to_owned(),
            v => v.to_string(),
        };
        let _ = self.ctx;
        Ok(format!("Result: {}", shown.chars().take(50_000).collect::<String>()))
    }
}

/// Selects options by value or label; returns how many matched, or -1 when not a `<select>`.
const SELECT_FN: &str = "function(values){ if (this.tagName !== 'SELECT') return -1; let n = 0; \
    for (const o of this.options) { const on = values.includes(o.value) || values.includes(o.label) || values.includes(o.text.trim()); \
    if (on) n++; if (on || this.multiple) o.selected = on; } \
    if (n) { this.dispatchEvent(new Event('input', {bubbles: true})); this.dispatchEvent(new Event('change', {bubbles: true})); } return n; }";

async fn object_of(tab: &Tab, backend_id: i64) -> Result<String, ToolError> {
    let resolved = tab.call("DOM.resolveNode", json!({"backendNodeId": backend_id})).await.map_err(err)?;
    Ok(resolved["object"]["objectId"].as_str().unwrap_or_default().to_owned())
}

async fn call_on(tab: &Tab, object: &str, function: &str, args: Value) -> Result<Value, ToolError> {
    let args: Vec<Value> =
        args.as_array().cloned().unwrap_or_default().into_iter().map(|v| json!({"value": v})).collect();
    let result = tab
        .call(
            "Runtime.callFunctionOn",
            json!({"objectId": object, "functionDeclaration": function, "arguments": args, "returnByValue": true}),
        )
        .await
        .map_err(err)?;
    Ok(result["result"]["value"].clone())
}

async fn mouse(tab: &Tab, kind: &str, x: f64, y: f64) -> Result<(), ToolError> {
    let mut params = json!({"type": kind, "x": x, "y": y});
    if kind != "mouseMoved" {
        params["button"] = json!("left");
        params["clickCount"] = json!(1);
    }
    tab.input("Input.dispatchMouseEvent", params).await.map_err(err)?;
    Ok(())
}

/// Presses one named key.
async fn key(tab: &Tab, name: &str) -> Result<(), ToolError> {
    let (key, code, vk, text): (&str, String, i64, Option<String>) = match name {
        "Enter" => ("Enter", "Enter".into(), 13, Some("\r".into())),
        "Tab" => ("Tab", "Tab".into(), 9, None),
        "Escape" => ("Escape", "Escape".into(), 27, None),
        "Backspace" => ("Backspace", "Backspace".into(), 8, None),
        "Delete" => ("Delete", "Delete".into(), 46, None),
        "ArrowUp" => ("ArrowUp", "ArrowUp".into(), 38, None),
        "ArrowDown" => ("ArrowDown", "ArrowDown".into(), 40, None),
        "ArrowLeft" => ("ArrowLeft", "ArrowLeft".into(), 37, None),
        "ArrowRight" => ("ArrowRight", "ArrowRight".into(), 39, None),
        "Home" => ("Home", "Home".into(), 36, None),
        "End" => ("End", "End".into(), 35, None),
        "PageUp" => ("PageUp", "PageUp".into(), 33, None),
        "PageDown" => ("PageDown", "PageDown".into(), 34, None),
        "Space" | " " => (" ", "Space".into(), 32, Some(" ".into())),
        other if other.chars().count() == 1 => {
            let c = other.chars().next().unwrap_or(' ');
            (other, format!("Key{}", c.to_ascii_uppercase()), c.to_ascii_uppercase() as i64, Some(other.to_owned()))
        }
        other => {
            return Err(ToolError::invalid(
                "browser",
                "/key",
                format!(
                    "`{other}` is not a key this tool presses; use Enter, Tab, Escape, Backspace, Delete, ArrowUp, ArrowDown, ArrowLeft, ArrowRight, Home, End, PageUp, PageDown, Space or one character"
                ),
            ));
        }
    };
    let mut down = json!({"type": "keyDown", "key": key, "code": code, "windowsVirtualKeyCode": vk});
    if let Some(text) = &text {
        down["text"] = json!(text);
    }
    tab.input("Input.dispatchKeyEvent", down).await.map_err(err)?;
    tab.input(
        "Input.dispatchKeyEvent",
        json!({"type": "keyUp", "key": key, "code": code, "windowsVirtualKeyCode": vk}),
    )
    .await
    .map_err(err)?;
    Ok(())
}

/// The tools over `browsers`.
pub(crate) fn tools(browsers: &Browsers) -> Vec<Arc<dyn Tool>> {
    vec![Arc::new(BrowserTool::new(browsers.clone()))]
}
