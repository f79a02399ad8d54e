//! [`Browsers`]: the pool of browser sessions (one browser context each) over one Chromium.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use serde_json::json;
use toolgate_fetch::Fetcher;

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
}

impl Browsers {
    /// A pool; nothing starts until the first [`Browsers::session`].
    pub fn new(config: BrowserConfig) -> Self {
        Browsers {
            inner: Arc::new(Inner {
                config,
                process: tokio::sync::Mutex::new(None),
                sessions: Mutex::new(HashMap::new()),
            }),
        }
    }

    /// The pool's configuration.
    pub fn config(&self) -> &BrowserConfig {
        &self.inner.config
    }

    async fn process(&self) -> Result<Arc<Process>, BrowserError> {
        let mut slot = self.inner.process.lock().await;
        if let Some(p) = slot.as_ref().filter(|p| p.alive()) {
            return Ok(Arc::clone(p));
        }
        // A dead browser's sessions are gone with it.
        self.inner.sessions.lock().unwrap_or_else(PoisonError::into_inner).clear();
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
        *slot = Some(Arc::clone(&process));
        Ok(process)
    }

    /// The session `key`, started (a new browser context with one blank tab) if it has none.
    pub async fn session(&self, key: &str) -> Result<BrowserSession, BrowserError> {
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
        let session = BrowserSession::start(key, process, self.inner.config.load_timeout).await?;
        let mut sessions = self.inner.sessions.lock().unwrap_or_else(PoisonError::into_inner);
        sessions.insert(key.to_owned(), session.clone());
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
                s.close().await;
                true
            }
            None => false,
        }
    }

    /// Closes every session and the browser.
    pub async fn shutdown(&self) {
        self.inner.sessions.lock().unwrap_or_else(PoisonError::into_inner).clear();
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
    async fn start(key: &str, process: Arc<Process>, load_timeout: Duration) -> Result<BrowserSession, BrowserError> {
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
