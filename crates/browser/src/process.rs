//! One Chromium process: launched contained, behind toolgate's vetting proxy, driven over a pipe.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use toolgate_fetch::Fetcher;
use toolgate_fetch::proxy::{ProxyEvent, ProxyLog};

use crate::cdp::{Cdp, EventSink};
use crate::error::BrowserError;

/// How long a protocol command may take before it is abandoned.
pub(crate) const COMMAND_TIMEOUT: Duration = Duration::from_secs(30);

/// Most data (heap) one browser process may have, renderers included (`RLIMIT_DATA`).
pub(crate) const MAX_PROCESS_DATA: u64 = 2 << 30;

/// The browser-level events: which targets (tabs) exist in which context, so a page that opens
/// tabs without end is cut off at the cap.
#[derive(Debug, Default)]
pub(crate) struct Targets {
    /// Context id → its page targets, oldest first.
    pages: Mutex<HashMap<String, Vec<String>>>,
    max_tabs: usize,
    /// Tabs closed because of the cap, per context (reported once).
    closed_over_cap: Mutex<HashMap<String, usize>>,
}

impl Targets {
    pub(crate) fn pages(&self, context: &str) -> Vec<String> {
        self.pages.lock().unwrap_or_else(PoisonError::into_inner).get(context).cloned().unwrap_or_default()
    }

    pub(crate) fn max_tabs(&self) -> usize {
        self.max_tabs
    }

    pub(crate) fn take_closed_over_cap(&self, context: &str) -> usize {
        self.closed_over_cap.lock().unwrap_or_else(PoisonError::into_inner).remove(context).unwrap_or(0)
    }
}

impl EventSink for Targets {
    fn event(&self, method: &str, params: &Value) -> Option<(String, Value)> {
        let info = &params["targetInfo"];
        match method {
            "Target.targetCreated" if info["type"] == "page" => {
                let context = info["browserContextId"].as_str().unwrap_or_default().to_owned();
                let target = info["targetId"].as_str().unwrap_or_default().to_owned();
                let mut pages = self.pages.lock().unwrap_or_else(PoisonError::into_inner);
                let list = pages.entry(context.clone()).or_default();
                if list.len() >= self.max_tabs {
                    *self.closed_over_cap.lock().unwrap_or_else(PoisonError::into_inner).entry(context).or_default() +=
                        1;
                    return Some(("Target.closeTarget".to_owned(), json!({"targetId": target})));
                }
                list.push(target);
                None
            }
            "Target.targetDestroyed" => {
                let target = params["targetId"].as_str().unwrap_or_default();
                for list in self.pages.lock().unwrap_or_else(PoisonError::into_inner).values_mut() {
                    list.retain(|t| t != target);
                }
                None
            }
            _ => None,
        }
    }
}

/// A running Chromium with its proxy. Dropping it kills the browser (its process group and,
/// where namespaces work, its PID namespace) and removes its profile folder.
#[derive(Debug)]
pub(crate) struct Process {
    pub(crate) cdp: Arc<Cdp>,
    pub(crate) targets: Arc<Targets>,
    pub(crate) proxy_log: Arc<ProxyLog>,
    child: Mutex<Option<tokio::process::Child>>,
    pgid: Option<u32>,
    profile: PathBuf,
    proxy_cancel: CancellationToken,
    /// The network namespace Chromium runs in, whose only way out is the proxy (`None` where
    /// this machine does not allow one); held for the browser's life.
    _netns: Option<toolgate_sandbox::NetNamespace>,
    /// What the network boundary is, in words (for `start`'s result).
    pub(crate) network: String,
}

/// What a launch needs.
#[derive(Debug, Clone)]
pub(crate) struct Launch<'a> {
    pub(crate) chromium: &'a Path,
    pub(crate) profile_root: &'a Path,
    pub(crate) fetcher: &'a Fetcher,
    pub(crate) max_tabs: usize,
}

impl Process {
    pub(crate) async fn start(launch: Launch<'_>) -> Result<Process, BrowserError> {
        if find_program(launch.chromium).is_none() {
            return Err(BrowserError::Launch(format!(
                "`{}` is not installed (or not on PATH); install Debian's chromium (`cargo xtask deps`, or `apt-get install chromium`)",
                launch.chromium.display()
            )));
        }
        std::fs::create_dir_all(launch.profile_root)
            .map_err(|e| BrowserError::Launch(format!("cannot create {}: {e}", launch.profile_root.display())))?;
        let profile = tempfile::Builder::new()
            .prefix("profile-")
            .tempdir_in(launch.profile_root)
            .map_err(|e| BrowserError::Launch(format!("cannot create a profile folder: {e}")))?
            .keep();
        // The vetting proxy: the browser's only way out. Where network namespaces work, Chromium
        // runs in one with only loopback, and the proxy listens inside it (its own connections
        // leave from here): nothing else is reachable even if Chromium ignored its proxy flags.
        let proxy_error = |e: std::io::Error| BrowserError::Launch(format!("cannot start the browser's proxy: {e}"));
        let (netns, listener, network) = match toolgate_sandbox::NetNamespace::new()
            .and_then(|ns| ns.listen_loopback().map(|l| (ns, l)))
        {
            Ok((ns, listener)) => (
                Some(ns),
                listener,
                "Chromium runs in a network namespace of its own whose only way out is toolgate's proxy".to_owned(),
            ),
            Err(e) => (
                None,
                std::net::TcpListener::bind("127.0.0.1:0").map_err(proxy_error)?,
                format!(
                    "no network namespace on this machine ({e}); Chromium's proxy settings are the boundary (every connection through toolgate's proxy, no bypass, no QUIC, WebRTC only proxied)"
                ),
            ),
        };
        listener.set_nonblocking(true).map_err(proxy_error)?;
        let listener = TcpListener::from_std(listener).map_err(proxy_error)?;
        let proxy_addr = listener
            .local_addr()
            .map_err(|e| BrowserError::Launch(format!("cannot start the browser's proxy: {e}")))?;
        let proxy_log = Arc::new(ProxyLog::default());
        let proxy_cancel = CancellationToken::new();
        tokio::spawn(toolgate_fetch::proxy::serve_policy(
            listener,
            launch.fetcher.clone(),
            Arc::clone(&proxy_log),
            "browser".to_owned(),
            proxy_cancel.clone(),
        ));
        let result =
            Self::spawn(&launch, &profile, proxy_addr, Arc::clone(&proxy_log), proxy_cancel.clone(), (netns, network))
                .await;
        if result.is_err() {
            proxy_cancel.cancel();
            let _ = std::fs::remove_dir_all(&profile);
        }
        result
    }

    async fn spawn(
        launch: &Launch<'_>,
        profile: &Path,
        proxy: std::net::SocketAddr,
        proxy_log: Arc<ProxyLog>,
        proxy_cancel: CancellationToken,
        (netns, network): (Option<toolgate_sandbox::NetNamespace>, String),
    ) -> Result<Process, BrowserError> {
        let mut args: Vec<String> = [
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            "--no-default-browser-check",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--disable-extensions",
            "--disable-default-apps",
            "--disable-breakpad",
            "--disable-dev-shm-usage",
            "--mute-audio",
            "--no-pings",
            "--disable-domain-reliability",
            "--disable-client-side-phishing-detection",
            "--disable-field-trial-config",
            "--metrics-recording-only",
            "--hide-scrollbars",
            "--remote-debugging-pipe",
            // Every connection through the proxy, loopback included (`<-loopback>` removes the
            // implicit bypass); no QUIC (UDP would not go through it); WebRTC only proxied.
            "--proxy-bypass-list=<-loopback>",
            "--disable-quic",
            "--force-webrtc-ip-handling-policy=disable_non_proxied_udp",
            "--webrtc-ip-handling-policy=disable_non_proxied_udp",
            // Chromium resolves no name itself: the proxy does, once, and vets the address.
            "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1",
            // Same-site and cross-site frames in one renderer, so one accessibility tree call
            // per frame reaches every iframe.
            "--disable-site-isolation-trials",
            "--disable-features=IsolateOrigins,site-per-process,Translate,MediaRouter,OptimizationHints,PreconnectToSearch,NetworkTimeServiceQuerying",
            "--dns-prefetch-disable",
            "--window-size=1280,800",
            // Chromium's own calls to Google at start, each pointed at an address it never
            // connects to (port 1 is one of its unsafe ports, refused before any socket): the
            // accounts list of the default profile (`accounts.google.com`), Google Cloud
            // Messaging's check-in (`android.clients.google.com`, `mtalk.google.com`), the
            // search preconnect (`www.google.com`) and Google APIs (`*.googleapis.com`).
            // `--disable-background-networking` and the features above do not stop them.
            "--gaia-url=http://127.0.0.1:1",
            "--google-apis-url=http://127.0.0.1:1",
            "--google-base-url=http://127.0.0.1:1",
            "--gcm-checkin-url=http://127.0.0.1:1",
            "--gcm-mcs-endpoint=http://127.0.0.1:1",
            "--gcm-registration-url=http://127.0.0.1:1",
        ]
        .iter()
        .map(|s| (*s).to_owned())
        .collect();
        args.push(format!("--proxy-server=http://{proxy}"));
        args.push(format!("--user-data-dir={}", profile.display()));
        args.push("about:blank".to_owned());
        let log = std::fs::File::create(profile.join("chromium.log"))
            .map_err(|e| BrowserError::Launch(format!("cannot create the browser's log: {e}")))?;
        // fd 3 is what Chromium reads commands from and fd 4 where it writes: the shell moves our
        // stdin and stdout pipes there before it becomes Chromium. It also caps each process's
        // data (RLIMIT_DATA, inherited by every renderer): a page that allocates without end
        // crashes its renderer at the cap instead of taking the machine's memory (Chromium's own
        // sandbox sets such a cap, and it runs without that sandbox here). A lower cap already
        // in force stays.
        let mut cmd = std::process::Command::new("/bin/sh");
        cmd.arg("-c")
            .arg(format!("ulimit -d {} 2>/dev/null; exec \"$@\" 3<&0 4>&1 </dev/null >&2", MAX_PROCESS_DATA / 1024))
            .arg("sh")
            .arg(launch.chromium)
            .args(&args)
            .current_dir(profile)
            .env_clear()
            .env("PATH", "/usr/local/bin:/usr/bin:/bin")
            .env("HOME", profile)
            .env("LANG", "C.UTF-8")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::from(log));
        {
            use std::os::unix::process::CommandExt;
            cmd.process_group(0);
        }
        if let Some(ns) = &netns {
            ns.enter(&mut cmd);
        }
        // Chromium and every process it starts die with toolgate.
        toolgate_sandbox::contain(&mut cmd);
        let mut cmd = tokio::process::Command::from(cmd);
        cmd.kill_on_drop(true);
        let mut child =
            cmd.spawn().map_err(|e| BrowserError::Launch(format!("cannot run {}: {e}", launch.chromium.display())))?;
        let pgid = child.id();
        let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
            return Err(BrowserError::Launch("the browser's pipes were not set up".to_owned()));
        };
        let targets = Arc::new(Targets { max_tabs: launch.max_tabs, ..Targets::default() });
        let cdp = Cdp::new(stdin, stdout, Arc::clone(&targets) as Arc<dyn EventSink>);
        let process = Process {
            cdp,
            targets,
            proxy_log,
            child: Mutex::new(Some(child)),
            pgid,
            profile: profile.to_owned(),
            proxy_cancel,
            _netns: netns,
            network,
        };
        // The first answer says the browser is up.
        if let Err(e) = process.cdp.send(None, "Browser.getVersion", json!({}), Duration::from_secs(20)).await {
            let log = std::fs::read_to_string(profile.join("chromium.log")).unwrap_or_default();
            let tail: String =
                log.lines().rev().take(5).collect::<Vec<_>>().into_iter().rev().collect::<Vec<_>>().join("\n");
            return Err(BrowserError::Launch(format!("{e}; its log ends with:\n{tail}")));
        }
        process.cdp.send(None, "Target.setDiscoverTargets", json!({"discover": true}), COMMAND_TIMEOUT).await?;
        Ok(process)
    }

    /// Where the proxy's log is now, for [`Process::refusals_since`].
    pub(crate) fn proxy_mark(&self) -> u64 {
        self.proxy_log.mark()
    }

    /// The connections the proxy refused since `mark` (a [`Process::proxy_mark`]).
    pub(crate) fn refusals_since(&self, mark: u64) -> Vec<ProxyEvent> {
        self.proxy_log.events_since(mark).into_iter().filter(|e| e.refused.is_some()).collect()
    }

    /// Errors when the proxy refused the address `url` (the page a navigation landed on) since
    /// `mark` (a [`Process::proxy_mark`]): Chromium then shows the proxy's refusal, not the site,
    /// so it is an error, not "opened".
    pub(crate) fn check_landed(&self, url: &str, mark: u64) -> Result<(), BrowserError> {
        let Ok(parsed) = url::Url::parse(url) else { return Ok(()) };
        let (Some(host), Some(port)) = (parsed.host_str(), parsed.port_or_known_default()) else { return Ok(()) };
        let target = format!("{}:{port}", host.trim_matches(['[', ']']));
        let refused = self.refusals_since(mark).into_iter().find(|e| e.target == target);
        match refused.and_then(|e| e.refused) {
            Some(why) => {
                Err(BrowserError::Refused(format!("{url} was not opened: toolgate's proxy refused it: {why}")))
            }
            None => Ok(()),
        }
    }

    /// Whether the browser is still running.
    pub(crate) fn alive(&self) -> bool {
        !self.cdp.closed.is_cancelled()
    }

    fn kill(&self) {
        self.proxy_cancel.cancel();
        if let Some(pgid) = self.pgid.and_then(|p| i32::try_from(p).ok()) {
            let _ = nix::sys::signal::killpg(nix::unistd::Pid::from_raw(pgid), nix::sys::signal::Signal::SIGKILL);
        }
        if let Some(mut child) = self.child.lock().unwrap_or_else(PoisonError::into_inner).take() {
            let _ = child.start_kill();
            // Reap it in the background so no zombie is left.
            if let Ok(handle) = tokio::runtime::Handle::try_current() {
                handle.spawn(async move {
                    let _ = child.wait().await;
                });
            }
        }
        let _ = std::fs::remove_dir_all(&self.profile);
    }

    /// Closes the browser politely, then kills what is left.
    pub(crate) async fn shutdown(&self) {
        let _ = self.cdp.send(None, "Browser.close", json!({}), Duration::from_secs(3)).await;
        let child = self.child.lock().unwrap_or_else(PoisonError::into_inner).take();
        if let Some(mut child) = child
            && tokio::time::timeout(Duration::from_secs(3), child.wait()).await.is_err()
        {
            let _ = child.start_kill();
            let _ = child.wait().await;
        }
        self.kill();
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        self.kill();
    }
}

/// `program` itself when it is a path, else the first match on `PATH`.
fn find_program(program: &Path) -> Option<PathBuf> {
    if program.components().count() > 1 {
        return program.is_file().then(|| program.to_owned());
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path).map(|dir| dir.join(program)).find(|candidate| candidate.is_file())
}
