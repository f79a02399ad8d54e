//! Approval channels beyond the terminal: the approvals inbox that a person answers over the
//! HTTP API (`GET /api/approvals`, `POST /api/approvals/{id}`), the `toolgate approvals` command
//! or a page, and a chain that tries channels in order (the MCP client's elicitation first,
//! then the inbox).
//!
//! The inbox ([`PendingApprovals`]) keeps its entries in the store's [`ApprovalStore`] (the
//! gateway's state database for `toolgate serve`; an in-memory database otherwise), so a pending
//! approval outlives the process that asked and any process on the database can decide it. An
//! entry is bound to the caller (user, agent), the tool, the digest of the exact arguments, the
//! policy revision and an expiry; the first decision wins; a retried call with the same
//! arguments finds its own entry and resumes from its decision (each decision runs one call).
//! A caller that cannot wait (a 2026-07-28 MCP client, or one past the bounded wait) is told
//! "waiting for approval N"; the MCP layer can add a sealed `requestState`
//! ([`request_state`]) and a URL that points at the entry.

pub mod request_state;

use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use tokio::sync::{broadcast, watch};
use toolgate_store::{
    ApprovalDecision, ApprovalEvent, ApprovalFilter, ApprovalRecord, ApprovalStatus, ApprovalStore, DecideOutcome,
    Store,
};

use crate::{ApprovalAnswer, ApprovalRequest, Approver};

/// How the inbox behaves (`[approval]` in `toolgate.toml`).
#[derive(Debug, Clone)]
pub struct InboxSettings {
    /// How long an entry can be decided; after that it is expired (a denial).
    pub expires: Duration,
    /// The longest a call waits for its decision before it is told "waiting for approval N"
    /// (the gate's `[approval] timeout_secs` bounds it too).
    pub wait: Duration,
    /// Refuse a decision by the user the call is made for.
    pub no_self_approval: bool,
    /// How often a waiting call looks at the store for a decision made by another process.
    pub poll: Duration,
    /// When notifying approvers of an entry failed: deny it after this long unless someone
    /// decided it (seed 003's fallback). `None`: it waits for its expiry.
    pub notify_fallback: Option<Duration>,
    /// Where the inbox's entries can be decided, for the URL a client shows (`{id}` is
    /// replaced by the entry's number), e.g. `http://127.0.0.1:8765/approvals/{id}`.
    pub url: Option<String>,
    /// How often the key that seals `requestState`s is replaced (the old one keeps opening
    /// states until they expire). The keys live in the secrets store of the durable inbox.
    pub key_rotation: Duration,
}

impl Default for InboxSettings {
    fn default() -> Self {
        InboxSettings {
            expires: Duration::from_secs(3600),
            wait: Duration::from_secs(600),
            no_self_approval: false,
            poll: Duration::from_millis(250),
            notify_fallback: Some(Duration::from_secs(300)),
            url: None,
            key_rotation: Duration::from_secs(7 * 24 * 3600),
        }
    }
}

impl InboxSettings {
    /// The settings `[approval]` asks for; a value that cannot work is an error that names it.
    pub fn from_config(config: &crate::config::ApprovalConfig) -> Result<InboxSettings, String> {
        let url_setting = |name: &str, value: &Option<String>| -> Result<Option<String>, String> {
            let Some(url) = value else { return Ok(None) };
            match reqwest::Url::parse(&url.replace("{id}", "1")) {
                Ok(u) if matches!(u.scheme(), "http" | "https") => Ok(Some(url.clone())),
                _ => Err(format!("[approval] {name} = {url:?} is not an http(s) URL; write e.g. https://host/path")),
            }
        };
        if config.expires_secs == 0 {
            return Err("[approval] expires_secs = 0 would expire every entry at once; use 1 or more".into());
        }
        if config.key_rotation_days == 0 {
            return Err("[approval] key_rotation_days = 0 would replace the key at every start; use 1 or more".into());
        }
        url_setting("notify_url", &config.notify_url)?;
        Ok(InboxSettings {
            expires: Duration::from_secs(config.expires_secs),
            wait: Duration::from_secs(config.wait_secs),
            no_self_approval: config.no_self_approval,
            notify_fallback: (config.notify_fallback_secs > 0)
                .then(|| Duration::from_secs(config.notify_fallback_secs)),
            url: url_setting("inbox_url", &config.inbox_url)?,
            key_rotation: Duration::from_secs(config.key_rotation_days.saturating_mul(86_400)),
            ..InboxSettings::default()
        })
    }
}

/// A change in the inbox, for a page's live updates (server-sent events).
#[derive(Debug, Clone, Serialize)]
pub struct InboxEvent {
    /// `new`, `decided`, `expired` or `notify_failed`.
    pub kind: &'static str,
    /// The entry as it stands after the change.
    pub approval: ApprovalRecord,
}

/// Tells approvers that an entry waits (a webhook, a chat message). A failure is recorded on
/// the entry, audited in its history, and the [`InboxSettings::notify_fallback`] applies.
#[async_trait::async_trait]
pub trait ApprovalNotifier: Send + Sync + std::fmt::Debug {
    /// Notifies; `Err` says what failed.
    async fn notify(&self, approval: &ApprovalRecord) -> Result<(), String>;
}

/// Posts each new entry (as the API shows it) to a URL; anything but a 2xx answer within
/// 10 s is a failure.
#[derive(Debug)]
pub struct WebhookNotifier {
    client: reqwest::Client,
    url: String,
}

impl WebhookNotifier {
    /// A notifier posting to `url`.
    pub fn new(url: &str) -> Result<Self, String> {
        // reqwest is built without a TLS provider of its own (an https URL needs one).
        let _ = rustls::crypto::ring::default_provider().install_default();
        let client = reqwest::Client::builder()
            .timeout(Duration::from_secs(10))
            // The receiver answers; following it elsewhere would post the entry to a third party.
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .map_err(|e| format!("[approval] notify_url: cannot build an HTTP client: {e}"))?;
        Ok(WebhookNotifier { client, url: url.to_owned() })
    }

    /// Posts `event` (a JSON object) to the URL: the same client, timeout and answer check as
    /// an approval's notification (the gateway tells requesters of access decisions this way).
    pub async fn post(&self, event: &Value) -> Result<(), String> {
        let body = event.to_string();
        let response = self
            .client
            .post(&self.url)
            .header("content-type", "application/json")
            .body(body)
            .send()
            .await
            .map_err(|e| format!("POST {}: {e}", self.url))?;
        if !response.status().is_success() {
            return Err(format!("POST {}: HTTP {}", self.url, response.status()));
        }
        Ok(())
    }
}

#[async_trait::async_trait]
impl ApprovalNotifier for WebhookNotifier {
    async fn notify(&self, approval: &ApprovalRecord) -> Result<(), String> {
        self.post(&json!({"event": "approval_pending", "approval": view(approval)})).await
    }
}

/// Why a decision was not recorded.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum DecideError {
    /// No such entry.
    #[error("no approval {0}; `GET /api/approvals` (or `toolgate approvals pending`) lists the pending ones")]
    NotFound(String),
    /// Someone decided first (or it expired).
    #[error("approval {} was already decided ({}{}); the first decision stands", .0.id, .0.status, .0.decided_by.as_deref().map(|b| format!(" by {b}")).unwrap_or_default())]
    AlreadyDecided(Box<ApprovalRecord>),
    /// It expired before this decision.
    #[error("approval {0} expired before it was decided; the call must be made again")]
    Expired(i64),
    /// The deciding user is the one the call is for, and `no_self_approval` is on.
    #[error("approval {0} is for a call of {1}'s: another person must decide it (no self-approval)")]
    SelfApproval(i64, String),
    /// The store failed; nothing was decided.
    #[error("the approvals inbox cannot be read or written: {0}")]
    Store(String),
}

/// A decision as the API takes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Run this call.
    AllowOnce,
    /// Run this call and later ones with the same subject.
    AllowAlways,
    /// Do not run it.
    Deny,
}

impl Decision {
    /// `allow_once` (`allow`), `allow_always` (`always`), `deny`.
    pub fn parse(word: &str) -> Option<Decision> {
        match word {
            "allow_once" | "allow" => Some(Decision::AllowOnce),
            "allow_always" | "always" => Some(Decision::AllowAlways),
            "deny" => Some(Decision::Deny),
            _ => None,
        }
    }

    fn status(&self) -> ApprovalStatus {
        match self {
            Decision::AllowOnce => ApprovalStatus::Allowed,
            Decision::AllowAlways => ApprovalStatus::AllowedAlways,
            Decision::Deny => ApprovalStatus::Denied,
        }
    }
}

/// The approvals inbox: entries in the store, waited on by the calls that asked, decided once.
#[derive(Debug)]
pub struct PendingApprovals {
    store: Option<Arc<dyn ApprovalStore>>,
    settings: InboxSettings,
    /// Bumped by every decision made in this process, so waiting calls look at once (a
    /// decision by another process is found by polling).
    decided: watch::Sender<u64>,
    events: broadcast::Sender<InboxEvent>,
    notifier: Mutex<Option<Arc<dyn ApprovalNotifier>>>,
    sealer: Option<request_state::Sealer>,
}

impl PendingApprovals {
    /// An inbox in an in-memory database: its entries end with the process. For a gate
    /// without a state database (tests, an embedder); `toolgate serve` uses [`Self::durable`].
    pub fn new() -> Arc<Self> {
        let store = match Store::open(std::path::Path::new(":memory:")) {
            Ok(store) => Some(Arc::new(store) as Arc<dyn ApprovalStore>),
            Err(e) => {
                tracing::error!("cannot open an in-memory approvals inbox: {e}; approvals are refused");
                None
            }
        };
        Self::make(store, InboxSettings::default(), request_state::Sealer::random())
    }

    /// An inbox over `store` (durable: the gateway's state database), sealing `requestState`s
    /// with the key ring kept in `secrets` (rotated every [`InboxSettings::key_rotation`]), so
    /// a state outlives a restart. When the ring cannot be read, states are refused (a retry
    /// still finds its entry by its arguments) and the error says why.
    pub fn durable(
        store: Arc<dyn ApprovalStore>,
        secrets: Arc<dyn toolgate_store::SecretStore>,
        settings: InboxSettings,
    ) -> Arc<Self> {
        let sealer = request_state::Sealer::from_secrets(secrets, settings.key_rotation, settings.expires, now_ms())
            .inspect_err(|e| tracing::error!("approvals inbox: {e}; requestStates are not issued"))
            .ok();
        Self::make(Some(store), settings, sealer)
    }

    /// The durable inbox in the workspace's state `db` (`.toolgate/state.db`, or the shared
    /// database of `[store] url`, `crate::state`), as `[approval]` sets it up: its entries,
    /// history and `requestState` keys are in the database, and new entries are posted to
    /// `notify_url` when one is set.
    pub fn open(db: &std::path::Path, config: &crate::config::Config) -> Result<Arc<Self>, String> {
        let stores =
            crate::state::open(&config.store, db).map_err(|e| format!("cannot open the approvals inbox: {e}"))?;
        let config = &config.approval;
        let settings = InboxSettings::from_config(config)?;
        let inbox = Self::durable(stores.approvals, stores.secrets, settings);
        if let Some(url) = &config.notify_url {
            inbox.set_notifier(Arc::new(WebhookNotifier::new(url)?));
        }
        Ok(inbox)
    }

    fn make(
        store: Option<Arc<dyn ApprovalStore>>,
        settings: InboxSettings,
        sealer: Option<request_state::Sealer>,
    ) -> Arc<Self> {
        let decided = watch::channel(0).0;
        // A decision made on another node wakes the calls waiting here at once (PostgreSQL);
        // else they find it at their next look (`InboxSettings::poll`).
        if let Some(store) = &store {
            let wake = decided.clone();
            store.approval_watch(Box::new(move || wake.send_modify(|n| *n += 1)));
        }
        Arc::new(PendingApprovals {
            sealer,
            store,
            settings,
            decided,
            events: broadcast::channel(256).0,
            notifier: Mutex::new(None),
        })
    }

    /// Notifies approvers of each new entry through `notifier`.
    pub fn set_notifier(&self, notifier: Arc<dyn ApprovalNotifier>) {
        *self.notifier.lock().unwrap_or_else(|e| e.into_inner()) = Some(notifier);
    }

    /// Its settings.
    pub fn settings(&self) -> &InboxSettings {
        &self.settings
    }

    /// New, decided, expired and failed-notification entries as they happen (for a page's
    /// server-sent events). A slow receiver skips what it missed (`Lagged`) and can list again.
    pub fn subscribe(&self) -> broadcast::Receiver<InboxEvent> {
        self.events.subscribe()
    }

    /// The pending entries, newest first.
    pub fn list(&self) -> Vec<ApprovalRecord> {
        self.find(&ApprovalFilter { status: vec![ApprovalStatus::Pending], ..Default::default() }).unwrap_or_default()
    }

    /// The entries `filter` selects, newest first (expired ones marked first).
    pub fn find(&self, filter: &ApprovalFilter) -> Result<Vec<ApprovalRecord>, DecideError> {
        let store = self.store()?;
        self.sweep(now_ms());
        store.approvals(filter).map_err(|e| DecideError::Store(e.to_string()))
    }

    /// One entry and its history.
    pub fn get(&self, id: i64) -> Result<(ApprovalRecord, Vec<ApprovalEvent>), DecideError> {
        let store = self.store()?;
        self.sweep(now_ms());
        let record = store
            .approval_get(id)
            .map_err(|e| DecideError::Store(e.to_string()))?
            .ok_or_else(|| DecideError::NotFound(id.to_string()))?;
        let events = store.approval_events(id).map_err(|e| DecideError::Store(e.to_string()))?;
        Ok((record, events))
    }

    /// Decides entry `id` as `by` (a principal name); the first decision wins.
    pub fn decide(
        &self,
        id: i64,
        decision: Decision,
        by: &str,
        message: Option<String>,
    ) -> Result<ApprovalRecord, DecideError> {
        let store = self.store()?;
        let now = now_ms();
        let current = store
            .approval_get(id)
            .map_err(|e| DecideError::Store(e.to_string()))?
            .ok_or_else(|| DecideError::NotFound(id.to_string()))?;
        // The entry's user never changes, so this check needs no transaction with the update.
        if self.settings.no_self_approval && current.user == by {
            let _ = store.approval_refused(id, by, "no self-approval", now);
            return Err(DecideError::SelfApproval(id, current.user));
        }
        let decision = ApprovalDecision { status: decision.status(), by: by.to_owned(), message, at_ms: now };
        match store.approval_decide(id, &decision).map_err(|e| DecideError::Store(e.to_string()))? {
            DecideOutcome::Decided(record) => {
                self.decided.send_modify(|n| *n += 1);
                let _ = self.events.send(InboxEvent { kind: "decided", approval: record.clone() });
                tracing::info!(approval = id, by, status = %record.status, "approval decided");
                Ok(record)
            }
            // Marked expired by a sweep before this decision: too late, not a conflict.
            DecideOutcome::AlreadyDecided(record) if record.status == ApprovalStatus::Expired => {
                let _ = store.approval_refused(id, by, "expired before this decision", now);
                Err(DecideError::Expired(id))
            }
            DecideOutcome::AlreadyDecided(record) => Err(DecideError::AlreadyDecided(Box::new(record))),
            DecideOutcome::Expired(record) => {
                self.decided.send_modify(|n| *n += 1);
                let _ = self.events.send(InboxEvent { kind: "expired", approval: record });
                Err(DecideError::Expired(id))
            }
            DecideOutcome::NotFound => Err(DecideError::NotFound(id.to_string())),
        }
    }

    /// Answers the pending entry of call `call_id` (the older API's ids).
    fn id_of_call(&self, call_id: &str) -> Option<i64> {
        self.list().into_iter().find(|r| r.call_id == call_id).map(|r| r.id)
    }

    /// Handles one request of the approvals API as `by` (the authenticated caller's user;
    /// `local` for the single-user token):
    ///
    /// - `GET /api/approvals`: `{"pending": [...]}`, newest first;
    /// - `GET /api/approvals/recent`: `{"approvals": [...]}`, the latest 200 in any state;
    /// - `GET /api/approvals/{id}`: `{"approval": {...}, "events": [...]}`;
    /// - `POST /api/approvals/{id}` with `{"decision": "allow_once" | "allow_always" | "deny",
    ///   "message": "..."}`: 200, or 404 (unknown), 409 (decided already), 410 (expired), 403
    ///   (self-approval).
    ///
    /// Returns the HTTP status and a JSON body, or `None` when the path is not part of this API.
    pub fn handle_api_as(&self, by: &str, method: &str, path: &str, body: &[u8]) -> Option<(u16, Value)> {
        let rest = path.strip_prefix("/api/approvals")?;
        if !(rest.is_empty() || rest.starts_with('/')) {
            return None;
        }
        let rest = rest.trim_end_matches('/');
        let error = |status: u16, e: &dyn std::fmt::Display| Some((status, json!({"error": e.to_string()})));
        match (method, rest) {
            ("GET", "") => {
                match self.find(&ApprovalFilter { status: vec![ApprovalStatus::Pending], ..Default::default() }) {
                    Ok(list) => Some((200, json!({"pending": list.iter().map(view).collect::<Vec<_>>()}))),
                    Err(e) => error(500, &e),
                }
            }
            ("GET", "/recent") => match self.find(&ApprovalFilter { limit: Some(200), ..Default::default() }) {
                Ok(list) => Some((200, json!({"approvals": list.iter().map(view).collect::<Vec<_>>()}))),
                Err(e) => error(500, &e),
            },
            ("GET", id) if id.len() > 1 => {
                let Some(id) = self.resolve(&id[1..]) else {
                    return error(404, &DecideError::NotFound(id[1..].to_owned()));
                };
                match self.get(id) {
                    Ok((record, events)) => Some((200, json!({"approval": view(&record), "events": events}))),
                    Err(e @ DecideError::NotFound(_)) => error(404, &e),
                    Err(e) => error(500, &e),
                }
            }
            ("POST", id) if id.len() > 1 => {
                #[derive(Deserialize)]
                #[serde(deny_unknown_fields)]
                struct Body {
                    decision: String,
                    #[serde(default)]
                    message: Option<String>,
                }
                let body: Body = match serde_json::from_slice(body) {
                    Ok(body) => body,
                    Err(e) => {
                        return error(
                            400,
                            &format!(
                                "invalid body: {e}; send {{\"decision\": \"allow_once\" | \"allow_always\" | \"deny\"}}"
                            ),
                        );
                    }
                };
                let Some(decision) = Decision::parse(&body.decision) else {
                    return error(
                        400,
                        &format!(
                            "unknown decision `{}`; use allow_once, allow_always or deny",
                            body.decision.chars().take(40).collect::<String>()
                        ),
                    );
                };
                if body.message.as_ref().is_some_and(|m| m.len() > 4096) {
                    return error(400, &"the message is longer than 4096 bytes; shorten it");
                }
                let Some(id) = self.resolve(&id[1..]) else {
                    return error(
                        404,
                        &format!(
                            "no pending approval `{}`; it may have been answered or have expired",
                            id[1..].chars().take(64).collect::<String>()
                        ),
                    );
                };
                match self.decide(id, decision, by, body.message) {
                    Ok(record) => Some((200, json!({"answered": id, "approval": view(&record)}))),
                    Err(e @ DecideError::NotFound(_)) => error(404, &e),
                    Err(e @ DecideError::AlreadyDecided(_)) => error(409, &e),
                    Err(e @ DecideError::Expired(_)) => error(410, &e),
                    Err(e @ DecideError::SelfApproval(..)) => error(403, &e),
                    Err(e @ DecideError::Store(_)) => error(500, &e),
                }
            }
            _ => error(405, &"use GET /api/approvals[/ID|/recent] or POST /api/approvals/ID"),
        }
    }

    /// [`Self::handle_api_as`] for the single-user server, whose token holder is `local`.
    pub fn handle_api(&self, method: &str, path: &str, body: &[u8]) -> Option<(u16, Value)> {
        self.handle_api_as("local", method, path, body)
    }

    /// An entry's number from the API's path: the number itself, or a pending call's id.
    fn resolve(&self, text: &str) -> Option<i64> {
        match text.parse::<i64>() {
            Ok(id) if id > 0 => Some(id),
            Ok(_) => None,
            Err(_) => self.id_of_call(text),
        }
    }

    fn store(&self) -> Result<&Arc<dyn ApprovalStore>, DecideError> {
        self.store.as_ref().ok_or_else(|| DecideError::Store("no approvals inbox could be opened".into()))
    }

    /// Marks overdue entries expired and tells subscribers.
    fn sweep(&self, now: i64) {
        let Some(store) = &self.store else { return };
        sweep(store.as_ref(), &self.decided, &self.events, now);
    }

    /// The entry this call waits on: its own earlier one (a retry resumes), or a new one.
    fn entry_for(&self, store: &Arc<dyn ApprovalStore>, request: &ApprovalRequest) -> Result<ApprovalRecord, String> {
        let now = now_ms();
        let id = &request.identity;
        let found = store
            .approval_find(&id.user, &id.agent, &request.tool, &request.digest, &request.policy_revision, now)
            .map_err(|e| e.to_string())?;
        if let Some(found) = found {
            return Ok(found);
        }
        let mut record = ApprovalRecord {
            id: 0,
            call_id: request.id.clone(),
            user: id.user.clone(),
            agent: id.agent.clone(),
            session: id.session.clone(),
            tool: request.tool.clone(),
            server: server_of(&request.tool),
            subject: request.subject.clone().unwrap_or_default(),
            args_digest: request.digest.clone(),
            shown: json!({"params": request.params, "subject": request.subject}),
            reason: request.reason.clone(),
            policy_revision: request.policy_revision.clone(),
            batch: request.batch.clone(),
            created_ms: now,
            expires_ms: now.saturating_add(self.settings.expires.as_millis() as i64),
            status: ApprovalStatus::Pending,
            decided_by: None,
            decided_ms: None,
            message: None,
            notify_error: None,
            used_ms: None,
            fallback_ms: None,
        };
        record.id = store.approval_add(&record).map_err(|e| e.to_string())?;
        let _ = self.events.send(InboxEvent { kind: "new", approval: record.clone() });
        self.notify(store, &record);
        Ok(record)
    }

    /// Notifies approvers in the background; a failure is recorded and audited on the entry,
    /// with the instant its fallback (deny unless decided) falls due: stored, so a restart
    /// does not disarm it. This process sweeps at that instant, so a waiting call is answered.
    fn notify(&self, store: &Arc<dyn ApprovalStore>, record: &ApprovalRecord) {
        let Some(notifier) = self.notifier.lock().unwrap_or_else(|e| e.into_inner()).clone() else { return };
        let (store, record, events) = (Arc::clone(store), record.clone(), self.events.clone());
        let (fallback, decided) = (self.settings.notify_fallback, self.decided.clone());
        tokio::spawn(async move {
            let Err(error) = notifier.notify(&record).await else { return };
            let error: String = error.chars().take(500).collect();
            tracing::warn!(approval = record.id, "could not notify approvers: {error}");
            let now = now_ms();
            let due = fallback.map(|after| now.saturating_add(after.as_millis() as i64));
            let _ = store.approval_notify_failed(record.id, &error, now, due);
            if let Ok(Some(now)) = store.approval_get(record.id) {
                let _ = events.send(InboxEvent { kind: "notify_failed", approval: now });
            }
            let Some(after) = fallback else { return };
            tokio::time::sleep(after).await;
            sweep(store.as_ref(), &decided, &events, now_ms());
        });
    }

    /// Waits for entry `id`'s decision until `deadline`; `None` when none came.
    async fn wait(&self, store: &Arc<dyn ApprovalStore>, id: i64, wait: Duration) -> Option<ApprovalRecord> {
        let deadline = tokio::time::Instant::now() + wait;
        let mut changes = self.decided.subscribe();
        loop {
            // Subscribed before reading, so a decision in between is not missed.
            changes.borrow_and_update();
            match store.approval_get(id) {
                Ok(Some(record)) if record.status != ApprovalStatus::Pending => return Some(record),
                Ok(Some(record)) if record.expires_ms.min(record.fallback_ms.unwrap_or(i64::MAX)) <= now_ms() => {
                    self.sweep(now_ms());
                    return store.approval_get(id).ok().flatten().or(Some(record));
                }
                Ok(Some(_)) => {}
                Ok(None) => return None,
                Err(e) => tracing::warn!(approval = id, "cannot read the approval: {e}"),
            }
            let step = self.settings.poll.min(deadline.saturating_duration_since(tokio::time::Instant::now()));
            if step.is_zero() {
                return None;
            }
            tokio::select! {
                _ = changes.changed() => {}
                () = tokio::time::sleep(step) => {}
            }
        }
    }

    /// Turns a decided entry into this call's answer, using it up; `None` when another run
    /// of the same call took it first.
    fn take(
        store: &Arc<dyn ApprovalStore>,
        record: &ApprovalRecord,
        request: &ApprovalRequest,
    ) -> Option<ApprovalAnswer> {
        let answer = Self::take_answer(store, record);
        if answer.is_some() {
            let _ = request.entry.set(record.id);
            if let Some(by) = &record.decided_by {
                let _ = request.decided_by.set(by.clone());
            }
        }
        answer
    }

    fn take_answer(store: &Arc<dyn ApprovalStore>, record: &ApprovalRecord) -> Option<ApprovalAnswer> {
        let answer = match record.status {
            ApprovalStatus::Allowed => ApprovalAnswer::AllowOnce,
            ApprovalStatus::AllowedAlways => ApprovalAnswer::AllowAlways,
            ApprovalStatus::Denied => ApprovalAnswer::Deny { message: record.message.clone() },
            ApprovalStatus::Expired => {
                return Some(ApprovalAnswer::Deny {
                    message: Some(format!("approval {} expired before anyone decided it", record.id)),
                });
            }
            ApprovalStatus::Pending => return None,
        };
        match store.approval_use(record.id, now_ms()) {
            Ok(true) => Some(answer),
            Ok(false) => None,
            Err(e) => {
                tracing::warn!(approval = record.id, "cannot mark the approval used: {e}");
                None
            }
        }
    }

    /// The URL of entry `id`, when one is configured.
    pub fn url_of(&self, id: i64) -> Option<String> {
        self.settings.url.as_ref().map(|u| u.replace("{id}", &id.to_string()))
    }
}

/// What the API shows of an entry: every field, the parameters as they were shown.
/// Expires the overdue entries of `store` and denies those whose notification fallback is due,
/// telling waiting calls and the page's event stream.
fn sweep(store: &dyn ApprovalStore, decided: &watch::Sender<u64>, events: &broadcast::Sender<InboxEvent>, now: i64) {
    match store.approval_expire(now) {
        Ok(changed) => {
            if !changed.is_empty() {
                decided.send_modify(|n| *n += 1);
            }
            for record in changed {
                let kind = if record.status == ApprovalStatus::Expired { "expired" } else { "decided" };
                let _ = events.send(InboxEvent { kind, approval: record });
            }
        }
        Err(e) => tracing::warn!("cannot expire overdue approvals: {e}"),
    }
}

fn view(r: &ApprovalRecord) -> Value {
    json!({
        "id": r.id,
        "call_id": r.call_id,
        "status": r.status,
        "tool": r.tool,
        "server": r.server,
        "params": r.shown.get("params").cloned().unwrap_or(Value::Null),
        "subject": r.shown.get("subject").cloned().unwrap_or(Value::Null),
        "reason": r.reason,
        "identity": {"user": r.user, "agent": r.agent, "session": r.session},
        "args_digest": r.args_digest,
        "policy_revision": r.policy_revision,
        "batch": r.batch,
        "created_ms": r.created_ms,
        "expires_ms": r.expires_ms,
        "decided_by": r.decided_by,
        "decided_ms": r.decided_ms,
        "message": r.message,
        "notify_error": r.notify_error,
        "fallback_ms": r.fallback_ms,
        "used_ms": r.used_ms,
    })
}

/// The bridged server of `mcp__SERVER__tool`.
fn server_of(tool: &str) -> Option<String> {
    let rest = tool.strip_prefix("mcp__")?;
    rest.split_once("__").map(|(server, _)| server.to_owned())
}

fn now_ms() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64)
}

#[async_trait::async_trait]
impl Approver for PendingApprovals {
    async fn ask(&self, request: &ApprovalRequest) -> Option<ApprovalAnswer> {
        let store = self.store.as_ref()?;
        self.sweep(now_ms());
        // A 2026-07-28 client's retry brings back the state it was given: it resumes from
        // that entry's decision, or is refused when the state is not its own.
        if let Some(text) = toolgate_mcp::echoed_request_state() {
            match self.resume(store, request, &text) {
                Resumed::Answer(answer) => return Some(answer),
                Resumed::StillPending(entry) if self.defer(&entry, request) => return None,
                Resumed::StillPending(_) => {}
                Resumed::Anew => {}
            }
        }
        // Twice at most: when another run of the same call used a decision first, this call
        // asks anew.
        for _ in 0..2 {
            let entry = match self.entry_for(store, request) {
                Ok(entry) => entry,
                Err(e) => {
                    tracing::error!("cannot put the approval in the inbox: {e}");
                    return None;
                }
            };
            if entry.status != ApprovalStatus::Pending {
                match Self::take(store, &entry, request) {
                    Some(answer) => return Some(answer),
                    None => continue,
                }
            }
            // A client that can be pointed at the inbox is, instead of waiting.
            if self.defer(&entry, request) {
                return None;
            }
            // Bounded by the gate's own timeout (it answers "deny" when that passes first).
            let wait = self.settings.wait.min(request.wait.saturating_sub(Duration::from_millis(200)));
            match self.wait(store, entry.id, wait).await {
                Some(decided) => match Self::take(store, &decided, request) {
                    Some(answer) => return Some(answer),
                    None => continue,
                },
                None => {
                    return Some(ApprovalAnswer::Waiting {
                        approval: entry.id,
                        url: self.url_of(entry.id),
                        expires_ms: entry.expires_ms,
                    });
                }
            }
        }
        None
    }
}

/// What a retry's `requestState` led to.
enum Resumed {
    /// The entry was decided: this is the call's answer.
    Answer(ApprovalAnswer),
    /// The entry still waits.
    StillPending(Box<ApprovalRecord>),
    /// The state no longer applies (its entry was used, or the policy changed): ask anew.
    Anew,
}

impl PendingApprovals {
    fn resume(&self, store: &Arc<dyn ApprovalStore>, request: &ApprovalRequest, text: &str) -> Resumed {
        let Some(sealer) = &self.sealer else { return Resumed::Anew };
        let id = &request.identity;
        let state = match sealer.open(text, &id.user, &id.agent, &request.digest, now_ms()) {
            Ok(state) => state,
            Err(e) => {
                tracing::warn!(user = %id.user, tool = %request.tool, "refused a requestState: {e}");
                return Resumed::Answer(ApprovalAnswer::Deny { message: Some(e.to_string()) });
            }
        };
        match store.approval_get(state.approval) {
            Ok(Some(entry)) if entry.policy_revision == request.policy_revision && entry.tool == request.tool => {
                if entry.status == ApprovalStatus::Pending {
                    return Resumed::StillPending(Box::new(entry));
                }
                Self::take(store, &entry, request).map_or(Resumed::Anew, Resumed::Answer)
            }
            Ok(_) => Resumed::Anew,
            Err(e) => {
                tracing::warn!(approval = state.approval, "cannot read the approval: {e}");
                Resumed::Anew
            }
        }
    }

    /// Points a 2026-07-28 client that declared URL elicitation at `entry`, with a sealed
    /// state for its retry; `false` when the client cannot be (it waits instead).
    fn defer(&self, entry: &ApprovalRecord, request: &ApprovalRequest) -> bool {
        let (Some(sealer), Some(url)) = (&self.sealer, self.url_of(entry.id)) else { return false };
        let state = request_state::RequestState {
            approval: entry.id,
            user: entry.user.clone(),
            agent: entry.agent.clone(),
            digest: request.digest.clone(),
            expires_ms: entry.expires_ms,
        };
        let Some(sealed) = sealer.seal(&state) else { return false };
        let message = format!(
            "`{}` waits for approval {} by someone else; open the link to see it, then retry",
            request.tool, entry.id
        );
        toolgate_mcp::defer_to_url(&message, &url, &sealed)
    }
}

/// Tries each channel in order; the first that can ask answers.
#[derive(Debug)]
pub struct FirstAvailable(pub Vec<Arc<dyn Approver>>);

#[async_trait::async_trait]
impl Approver for FirstAvailable {
    async fn ask(&self, request: &ApprovalRequest) -> Option<ApprovalAnswer> {
        for approver in &self.0 {
            if let Some(answer) = approver.ask(request).await {
                return Some(answer);
            }
        }
        None
    }
}
