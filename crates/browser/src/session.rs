//! [`Browsers`]: the pool of browser sessions (one browser context each) over one Chromium.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use serde_json::json;
use toolgate_fetch::Fetcher;
use toolgate_store::{Local, LocalStore};
use toolgate_tools::runtime::{NodeForwarder, Owners};

use crate::error::BrowserError;
use crate::page::Tab;
use crate::process::{COMMAND_TIMEOUT, Launch, Process};

/// How the pool starts and limits browsers.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct BrowserConfig {
    /// The Chromium binary (Debian's `chromium`).
    pub chromium: PathBuf,
    /// Where fresh profile folders are made (`WORKSPACE/.toolgate/browser`).
    pub profile_root: PathBuf,
    /// The fetcher whose policy (SSRF ranges, `allow_private`, domain lists) the browser's
    /// proxy enforces on every connection.
    pub fetcher: Fetcher,
    /// Most tabs one session may have; tabs a page opens past it are closed at once.
    pub max_tabs: usize,
    /// Most sessions at once.
    pub max_sessions: usize,
    /// How long a navigation waits for the page's load event.
    pub load_timeout: Duration,
}

impl BrowserConfig {
    /// Defaults: `chromium` from `PATH`, 20 tabs, 16 sessions, a 20 s load wait.
    pub fn new(profile_root: impl Into<PathBuf>, fetcher: Fetcher) -> Self {
        BrowserConfig {
            chromium: PathBuf::from("chromium"),
            profile_root: profile_root.into(),
            fetcher,
            max_tabs: 20,
            max_sessions: 16,
            load_timeout: Duration::from_secs(20),
        }
    }

    /// Waits at most `timeout` for a page's load event (calls may give their own `timeout_ms`).
    pub fn load_timeout(mut self, timeout: Duration) -> Self {
        self.load_timeout = timeout;
        self
    }

    /// Uses `path` as the Chromium binary.
    pub fn chromium(mut self, path: impl Into<PathBuf>) -> Self {
        self.chromium = path.into();
        self
    }
}

/// The browsers of one toolgate: sessions by key (a user, an MCP session), each its own browser
/// context (cookies, storage, tabs) in one Chromium started on first use. Cheap to clone.
///
/// Dropping the last clone kills the browser.
#[derive(Debug, Clone)]
pub struct Browsers {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    config: BrowserConfig,
    /// The running browser; replaced when it died.
    process: tokio::sync::Mutex<Option<Arc<Process>>>,
    sessions: Mutex<HashMap<String, BrowserSession>>,
    /// Which node holds each session, with several nodes on one store: the sessions opened
    /// for a caller ([`Browsers::session_for`]) are recorded there while they run.
    owners: Owners,
    /// The last sessions of callers that ended with their browser (killed, crashed), newest
    /// last, at most [`ENDED_KEPT`]: a call naming one is told so ([`Browsers::ended`]).
    ended: Mutex<std::collections::VecDeque<Ended>>,
}

/// A caller's session that ended with its browser: its id, user and workspace.
#[derive(Debug)]
struct Ended {
    id: String,
    user: String,
    workspace: PathBuf,
}

/// How many ended sessions a pool remembers.
const ENDED_KEPT: usize = 256;

impl Drop for Inner {
    fn drop(&mut self) {
        let sessions = self.sessions.get_mut().unwrap_or_else(PoisonError::into_inner);
        self.owners.forget(sessions.values().map(|s| s.id()));
    }
}

/// The prefix of a session's id.
const ID_PREFIX: &str = "tg-browser-";

/// Whether `id` has the form of a session id (`tg-browser-` and 32 lowercase hex digits): an id
/// a model sends is checked before it is looked up anywhere.
pub fn valid_session_id(id: &str) -> bool {
    id.strip_prefix(ID_PREFIX)
        .is_some_and(|hex| hex.len() == 32 && hex.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)))
}

/// A fresh, unpredictable session id.
fn new_session_id() -> Result<String, BrowserError> {
    let mut bytes = [0u8; 16];
    getrandom::fill(&mut bytes).map_err(|e| BrowserError::Refused(format!("no random bytes for a session id: {e}")))?;
    Ok(format!("{ID_PREFIX}{}", bytes.iter().map(|b| format!("{b:02x}")).collect::<String>()))
}

impl Browsers {
    /// A pool; nothing starts until the first [`Browsers::session`].
    pub fn new(config: BrowserConfig) -> Self {
        Browsers {
            inner: Arc::new(Inner {
                config,
                process: tokio::sync::Mutex::new(None),
                sessions: Mutex::new(HashMap::new()),
                owners: Owners::new(Local::BrowserSession),
                ended: Mutex::new(std::collections::VecDeque::new()),
            }),
        }
    }

    /// The pool's configuration.
    pub fn config(&self) -> &BrowserConfig {
        &self.inner.config
    }

    /// Records every session opened for a caller in `store`, with this node
    /// (`toolgate_tools::runtime::serve_as_node`), so a `browser` call naming it that reaches
    /// another node of the same store finds the node that holds it (once).
    pub fn share_across_nodes(&self, store: Arc<dyn LocalStore>) {
        self.inner.owners.set_store(store);
    }

    /// Sends a `browser` call about a session another node holds to that node with `forwarder`
    /// (once; without one, the call is answered with where the session is).
    pub fn forward_with(&self, forwarder: Arc<dyn NodeForwarder>) {
        self.inner.owners.set_forwarder(forwarder);
    }

    /// The records of which node holds each session.
    pub(crate) fn owners(&self) -> &Owners {
        &self.inner.owners
    }

    /// Drops the records of `sessions` (closed, or gone with their browser).
    fn forget<'a>(&self, sessions: impl IntoIterator<Item = &'a BrowserSession>) {
        self.inner.owners.forget(sessions.into_iter().filter(|s| s.inner.holder.is_some()).map(BrowserSession::id));
    }

    /// Ends the sessions whose browser died (killed, crashed): out of the pool, their records
    /// out of the shared store (so no node lists them or sends calls to them), and remembered
    /// as ended for the calls that name them. Returns how many.
    fn reap(&self) -> usize {
        let dead: Vec<BrowserSession> = {
            let mut sessions = self.inner.sessions.lock().unwrap_or_else(PoisonError::into_inner);
            let keys: Vec<String> =
                sessions.iter().filter(|(_, s)| !s.inner.process.alive()).map(|(k, _)| k.clone()).collect();
            keys.iter().filter_map(|k| sessions.remove(k)).collect()
        };
        self.forget(&dead);
        let mut ended = self.inner.ended.lock().unwrap_or_else(PoisonError::into_inner);
        for session in &dead {
            if let Some((user, workspace)) = &session.inner.holder {
                if ended.len() >= ENDED_KEPT {
                    ended.pop_front();
                }
                ended.push_back(Ended {
                    id: session.id().to_owned(),
                    user: user.clone(),
                    workspace: workspace.clone(),
                });
            }
        }
        dead.len()
    }

    /// Whether `user`'s session `id` in `workspace` ended with its browser (lately: the pool
    /// remembers the last [`ENDED_KEPT`]). Reaps first, so a call that comes before the watch
    /// on the browser noticed its death is answered the same.
    pub fn ended(&self, id: &str, user: &str, workspace: &Path) -> bool {
        self.reap();
        let ended = self.inner.ended.lock().unwrap_or_else(PoisonError::into_inner);
        ended.iter().any(|e| e.id == id && e.user == user && e.workspace == workspace)
    }

    /// Reaps the pool as soon as `process` exits, killed or crashed (its DevTools pipe closes),
    /// instead of at the next call: the other nodes stop listing its sessions and sending
    /// calls to them. Holds the pool weakly: a dropped pool is not kept alive by its watch.
    fn watch(&self, process: &Process) {
        let (closed, pool) = (process.cdp.closed.clone(), Arc::downgrade(&self.inner));
        let Ok(runtime) = tokio::runtime::Handle::try_current() else { return };
        runtime.spawn(async move {
            closed.cancelled().await;
            if let Some(inner) = pool.upgrade() {
                let n = Browsers { inner }.reap();
                if n > 0 {
                    tracing::info!("the browser exited: {n} browser sessions ended with it");
                }
            }
        });
    }

    async fn process(&self) -> Result<Arc<Process>, BrowserError> {
        let mut slot = self.inner.process.lock().await;
        if let Some(p) = slot.as_ref().filter(|p| p.alive()) {
            return Ok(Arc::clone(p));
        }
        // A dead browser's sessions are gone with it.
        self.reap();
        let config = &self.inner.config;
        let process = Arc::new(
            Process::start(Launch {
                chromium: &config.chromium,
                profile_root: &config.profile_root,
                fetcher: &config.fetcher,
                max_tabs: config.max_tabs,
            })
            .await?,
        );
        self.watch(&process);
        *slot = Some(Arc::clone(&process));
        Ok(process)
    }

    /// The session `key`, started (a new browser context with one blank tab) if it has none.
    pub async fn session(&self, key: &str) -> Result<BrowserSession, BrowserError> {
        self.open(key, None).await
    }

    /// [`Browsers::session`] for `user` in `workspace`: a session it starts is theirs (found by
    /// its id with [`Browsers::by_id`], listed by [`Browsers::of`]) and recorded in the shared
    /// store while it runs.
    pub async fn session_for(&self, key: &str, user: &str, workspace: &Path) -> Result<BrowserSession, BrowserError> {
        self.open(key, Some((user.to_owned(), workspace.to_path_buf()))).await
    }

    /// The running session `id` of `user` in `workspace` (anyone else's is none).
    pub fn by_id(&self, id: &str, user: &str, workspace: &Path) -> Option<BrowserSession> {
        let sessions = self.inner.sessions.lock().unwrap_or_else(PoisonError::into_inner);
        sessions.values().find(|s| s.id() == id && s.held_by(user, workspace) && s.alive()).cloned()
    }

    /// The running sessions of `user` in `workspace`, oldest first.
    pub fn of(&self, user: &str, workspace: &Path) -> Vec<BrowserSession> {
        let sessions = self.inner.sessions.lock().unwrap_or_else(PoisonError::into_inner);
        let mut of: Vec<BrowserSession> =
            sessions.values().filter(|s| s.held_by(user, workspace) && s.alive()).cloned().collect();
        of.sort_by_key(|s| s.inner.started);
        of
    }

    async fn open(&self, key: &str, holder: Option<(String, PathBuf)>) -> Result<BrowserSession, BrowserError> {
        if let Some(s) = self.existing(key) {
            return Ok(s);
        }
        let process = self.process().await?;
        {
            let sessions = self.inner.sessions.lock().unwrap_or_else(PoisonError::into_inner);
            if let Some(s) = sessions.get(key).filter(|s| s.alive()) {
                return Ok(s.clone());
            }
            if sessions.len() >= self.inner.config.max_sessions {
                return Err(BrowserError::Refused(format!(
                    "{} browser sessions are open, the most allowed; stop one (action `stop`) first",
                    sessions.len()
                )));
            }
        }
        let session = BrowserSession::start(key, holder, process, self.inner.config.load_timeout).await?;
        let replaced = {
            let mut sessions = self.inner.sessions.lock().unwrap_or_else(PoisonError::into_inner);
            sessions.insert(key.to_owned(), session.clone())
        };
        self.forget(&replaced);
        if let Some((user, workspace)) = &session.inner.holder {
            self.inner.owners.record(session.id(), workspace, user, "browser session");
        }
        Ok(session)
    }

    /// The session `key` if it is running.
    pub fn existing(&self, key: &str) -> Option<BrowserSession> {
        let sessions = self.inner.sessions.lock().unwrap_or_else(PoisonError::into_inner);
        sessions.get(key).filter(|s| s.alive()).cloned()
    }

    /// Closes the session `key` (its context, tabs and cookies). Returns whether there was one.
    pub async fn close(&self, key: &str) -> bool {
        let session = self.inner.sessions.lock().unwrap_or_else(PoisonError::into_inner).remove(key);
        match session {
            Some(s) => {
                self.forget([&s]);
                s.close().await;
                true
            }
            None => false,
        }
    }

    /// Closes every session and the browser.
    pub async fn shutdown(&self) {
        let all: Vec<BrowserSession> =
            self.inner.sessions.lock().unwrap_or_else(PoisonError::into_inner).drain().map(|(_, s)| s).collect();
        self.forget(&all);
        if let Some(p) = self.inner.process.lock().await.take() {
            p.shutdown().await;
        }
    }

    /// Whether a browser runs (for tests and status).
    pub async fn running(&self) -> bool {
        self.inner.process.lock().await.as_ref().is_some_and(|p| p.alive())
    }

    /// The last connections the running browser asked its proxy for (at most 32, newest last;
    /// each `host:port` and why it was refused, if it was); empty when no browser runs. For
    /// status and tests: everything Chromium tried to reach is here.
    pub async fn connections(&self) -> Vec<toolgate_fetch::proxy::ProxyEvent> {
        self.inner.process.lock().await.as_ref().map(|p| p.proxy_log.events()).unwrap_or_default()
    }
}

/// One browser context: its own cookies, storage and tabs. Cheap to clone.
#[derive(Debug, Clone)]
pub struct BrowserSession {
    pub(crate) inner: Arc<SessionInner>,
}

#[derive(Debug)]
pub(crate) struct SessionInner {
    pub(crate) key: String,
    /// Its id (`tg-browser-...`): how a call names it, on any node.
    id: String,
    /// The user and the workspace it was opened for, if for a caller.
    holder: Option<(String, PathBuf)>,
    started: std::time::Instant,
    pub(crate) context_id: String,
    pub(crate) process: Arc<Process>,
    /// Attached tabs, and which one actions go to.
    pub(crate) tabs: Mutex<(Vec<Arc<Tab>>, usize)>,
    /// How long a navigation waits for the load event unless the call says (the pool's
    /// [`BrowserConfig::load_timeout`]).
    pub(crate) load_timeout: Duration,
    closed: std::sync::atomic::AtomicBool,
}

/// What a navigation did.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Navigated {
    /// The URL the tab shows now (after redirects).
    pub url: String,
    /// Whether the load event came before the wait ended.
    pub loaded: bool,
}

impl BrowserSession {
    async fn start(
        key: &str,
        holder: Option<(String, PathBuf)>,
        process: Arc<Process>,
        load_timeout: Duration,
    ) -> Result<BrowserSession, BrowserError> {
        let id = new_session_id()?;
        let cdp = &process.cdp;
        let context =
            cdp.send(None, "Target.createBrowserContext", json!({"disposeOnDetach": true}), COMMAND_TIMEOUT).await?;
        let context_id = context["browserContextId"].as_str().unwrap_or_default().to_owned();
        cdp.send(
            None,
            "Browser.setDownloadBehavior",
            json!({"behavior": "deny", "browserContextId": context_id, "eventsEnabled": true}),
            COMMAND_TIMEOUT,
        )
        .await?;
        let session = BrowserSession {
            inner: Arc::new(SessionInner {
                key: key.to_owned(),
                id,
                holder,
                started: std::time::Instant::now(),
                context_id,
                process,
                tabs: Mutex::new((Vec::new(), 0)),
                closed: std::sync::atomic::AtomicBool::new(false),
                load_timeout,
            }),
        };
        session.open_tab("about:blank").await?;
        Ok(session)
    }

    /// The session's key.
    pub fn key(&self) -> &str {
        &self.inner.key
    }

    /// The session's id (`tg-browser-...`).
    pub fn id(&self) -> &str {
        &self.inner.id
    }

    /// Whether it was opened for `user` in `workspace`.
    fn held_by(&self, user: &str, workspace: &Path) -> bool {
        self.inner.holder.as_ref().is_some_and(|(u, w)| u == user && w == workspace)
    }

    fn alive(&self) -> bool {
        !self.inner.closed.load(std::sync::atomic::Ordering::Relaxed) && self.inner.process.alive()
    }

    /// Opens a new tab at `url` (`about:blank` or an http(s) URL) and makes it the current one.
    pub(crate) async fn open_tab(&self, url: &str) -> Result<Arc<Tab>, BrowserError> {
        if let Some(why) = crate::page::scheme_refusal(url) {
            return Err(BrowserError::Refused(why));
        }
        let max = self.inner.process.targets.max_tabs();
        if self.inner.process.targets.pages(&self.inner.context_id).len() >= max {
            return Err(BrowserError::Refused(format!(
                "this session has {max} tabs open, the most allowed; close one (action `tabs`, `close`: INDEX) first"
            )));
        }
        let cdp = &self.inner.process.cdp;
        let created = cdp
            .send(
                None,
                "Target.createTarget",
                json!({"url": "about:blank", "browserContextId": self.inner.context_id}),
                COMMAND_TIMEOUT,
            )
            .await?;
        let target_id = created["targetId"].as_str().unwrap_or_default().to_owned();
        let tab = Tab::attach(cdp, &target_id).await?;
        {
            let mut tabs = self.inner.tabs.lock().unwrap_or_else(PoisonError::into_inner);
            tabs.0.push(Arc::clone(&tab));
            tabs.1 = tabs.0.len() - 1;
        }
        if url != "about:blank" {
            tab.navigate(url, self.inner.load_timeout).await?;
        }
        Ok(tab)
    }

    /// The current tab (attaching to tabs a page opened, dropping closed ones).
    pub(crate) async fn current(&self) -> Result<Arc<Tab>, BrowserError> {
        let live = self.inner.process.targets.pages(&self.inner.context_id);
        let current = {
            let mut tabs = self.inner.tabs.lock().unwrap_or_else(PoisonError::into_inner);
            let before = tabs.0.get(tabs.1).map(|t| t.target_id.clone());
            tabs.0.retain(|t| {
                let keep = live.contains(&t.target_id);
                if !keep {
                    t.detach();
                }
                keep
            });
            let index = before.and_then(|id| tabs.0.iter().position(|t| t.target_id == id));
            tabs.1 = index.unwrap_or(tabs.0.len().saturating_sub(1));
            tabs.0.get(tabs.1).cloned()
        };
        match current {
            Some(tab) => Ok(tab),
            None => self.open_tab("about:blank").await,
        }
    }

    /// Attaches to every tab of this context not attached yet (tabs a page opened).
    pub(crate) async fn sync_tabs(&self) -> Result<Vec<Arc<Tab>>, BrowserError> {
        let live = self.inner.process.targets.pages(&self.inner.context_id);
        let known: Vec<String> = {
            let tabs = self.inner.tabs.lock().unwrap_or_else(PoisonError::into_inner);
            tabs.0.iter().map(|t| t.target_id.clone()).collect()
        };
        for target in live.iter().filter(|t| !known.contains(t)) {
            if let Ok(tab) = Tab::attach(&self.inner.process.cdp, target).await {
                self.inner.tabs.lock().unwrap_or_else(PoisonError::into_inner).0.push(tab);
            }
        }
        self.current().await?;
        Ok(self.inner.tabs.lock().unwrap_or_else(PoisonError::into_inner).0.clone())
    }

    /// Goes to `url` in the current tab and waits for it to load (at most the pool's load
    /// timeout; a page that never finishes is left loading and `loaded` is false).
    pub async fn navigate(&self, url: &str) -> Result<Navigated, BrowserError> {
        let tab = self.current().await?;
        let loaded = tab.navigate(url, self.inner.load_timeout).await?;
        Ok(Navigated { url: tab.url(), loaded })
    }

    /// A PNG of the current tab: the viewport, or the whole page with `full_page`; `size` sets
    /// the viewport (CSS pixels, 16 to 4096 each way) first.
    pub async fn screenshot(&self, full_page: bool, size: Option<(u32, u32)>) -> Result<Vec<u8>, BrowserError> {
        Ok(self.current().await?.screenshot(full_page, size).await?.0.bytes)
    }

    /// Closes the session: its tabs, cookies and storage are gone.
    pub async fn close(&self) {
        if self.inner.closed.swap(true, std::sync::atomic::Ordering::Relaxed) {
            return;
        }
        let tabs = std::mem::take(&mut self.inner.tabs.lock().unwrap_or_else(PoisonError::into_inner).0);
        for tab in tabs {
            tab.detach();
        }
        let _ = self
            .inner
            .process
            .cdp
            .send(
                None,
                "Target.disposeBrowserContext",
                json!({"browserContextId": self.inner.context_id}),
                Duration::from_secs(10),
            )
            .await;
    }
}
