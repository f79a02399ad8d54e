//! The `message` tool (seed 002 §5) and its channel adapters: `message {to: "CHANNEL:address",
//! content}` sends on a channel the admin configured in `[automation.channels.NAME]`;
//! `message {action: "outbox"}` lists what could not be delivered; `resend` and `delete` (by id, the
//! caller's own entries only) send one again or drop it.
//!
//! - `http`: a generic webhook (JSON POST signed with HMAC-SHA256), Slack incoming webhooks,
//!   Telegram's Bot API `sendMessage`;
//! - `email`: SMTP with STARTTLS required (lettre on tokio and rustls);
//! - `inbound`: receiving, for `webhook`, `slack` and `telegram` channels with `receive = true`
//!   (`POST /hooks/messages/NAME`; each accepted message is the gate's `message` event);
//! - `mcp`: a logging notification (`notifications/message`, level `notice`, logger
//!   `toolgate.message`) to the MCP client of the call, through [`CallContext::client`].
//!
//! Every send: the channel must be configured (else the configured ones are listed, with how to
//! add one); the text is leak-scanned and refused if it holds a credential (the channel's own
//! secret included); a per-channel rate limit; a person approves by default when the channel
//! leaves the workspace; a failed try is retried with backoff, then the message is kept in the
//! outbox (`toolgate_store::OutboxStore`) and the call fails saying so.

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use toolgate_core::{
    Annotations, ApprovalRequirement, CallContext, CallSafety, ClientNote, RateClass, Tool, ToolError, ToolOutput,
    ToolSpec, async_trait,
};
use toolgate_guard::leak::LeakDetector;
use toolgate_store::{OutboxEntry, OutboxStore};
use toolgate_tools::custom::SecretSource;

use crate::Setup;

mod config;
mod email;
mod http;
pub mod inbound;
mod rate;

pub use config::{ChannelConfig, ChannelKind, Channels};
pub use http::{ID_HEADER, SIGNATURE_HEADER, TIMESTAMP_HEADER, signature};
use rate::RateWindow;

const TOOL: &str = "message";
/// The longest text sent (every adapter's services take less; Telegram 4096 characters).
const MAX_CONTENT: usize = 64 << 10;
/// The longest wait between tries.
const MAX_BACKOFF: Duration = Duration::from_secs(30);
/// Entries `resend` and `delete` look an id up among.
const OUTBOX_SCAN: usize = 10_000;

/// Entries `message {action: "outbox"}` lists at most.
const OUTBOX_LIST: usize = 50;

/// This module's tools.
pub(crate) fn tools(setup: &Setup) -> Vec<Arc<dyn Tool>> {
    vec![Arc::new(MessageTool::new(setup))]
}

/// One message on its way, as the adapters see it.
pub(crate) struct Outgoing<'a> {
    pub(crate) id: &'a str,
    pub(crate) channel: &'a str,
    pub(crate) address: &'a str,
    pub(crate) subject: Option<&'a str>,
    pub(crate) content: &'a str,
    pub(crate) timeout: Duration,
}

/// Why one try failed, and whether another may succeed.
#[derive(Debug)]
pub(crate) struct SendError {
    pub(crate) message: String,
    pub(crate) retry: bool,
    pub(crate) retry_after: Option<Duration>,
}

impl SendError {
    pub(crate) fn transient(message: impl Into<String>) -> Self {
        SendError { message: message.into(), retry: true, retry_after: None }
    }
    pub(crate) fn permanent(message: impl Into<String>) -> Self {
        SendError { message: message.into(), retry: false, retry_after: None }
    }
}

/// `message`.
#[derive(Debug)]
pub struct MessageTool {
    spec: ToolSpec,
    channels: Channels,
    secrets: Option<Arc<dyn SecretSource>>,
    outbox: Option<Arc<dyn OutboxStore>>,
    detector: Arc<LeakDetector>,
    /// Built on the first HTTP send: building it loads every root certificate (about 4 ms),
    /// which a process that never sends a message (one `toolgate call`) should not pay.
    client: std::sync::OnceLock<Result<reqwest::Client, String>>,
    /// Send times in the last minute, per channel (the rate limit), in ms since `epoch`.
    sent: RateWindow,
    epoch: Instant,
}

impl MessageTool {
    /// The tool over `setup`'s channels, secrets, outbox and leak detector.
    pub fn new(setup: &Setup) -> Self {
        let names: Vec<String> = setup.channels.iter().map(|(n, c)| format!("`{n}` ({})", c.kind.as_str())).collect();
        let configured = if names.is_empty() {
            "No channel is configured yet (the admin adds `[automation.channels.NAME]` to toolgate.toml).".to_owned()
        } else {
            format!("Configured channels: {}.", names.join(", "))
        };
        let spec = ToolSpec::new(
            TOOL,
            format!(
                "Send a message on a configured channel: `to` is `CHANNEL:address` (a Telegram chat id, an email \
                 address, a webhook's recipient; Slack and MCP channels take any address or none), `content` the \
                 plain text, `subject` for email. Messages that leave the workspace need approval. A message that \
                 cannot be delivered after retries is kept in the outbox: `{{\"action\": \"outbox\"}}` lists it, \
                 `{{\"action\": \"resend\", \"id\": ID}}` tries it again (approval as for a send) and \
                 `{{\"action\": \"delete\", \"id\": ID}}` drops it. {configured}"
            ),
            json!({
                "type": "object",
                "properties": {
                    "action": {"type": "string", "enum": ["send", "outbox", "resend", "delete"], "description": "`send` (the default), `outbox` to list undelivered messages, `resend` or `delete` one of yours by `id`"},
                    "id": {"type": "string", "maxLength": 64, "description": "resend, delete: the outbox entry's id"},
                    "to": {"type": "string", "description": "CHANNEL:address, for example `team:` or `alerts:ops@example.com`"},
                    "content": {"type": "string", "description": "The message text (plain text)"},
                    "subject": {"type": "string", "description": "Email subject (email channels only)"}
                },
                "additionalProperties": false
            }),
        )
        .group("automation")
        .annotations(Annotations { read_only: false, destructive: false, idempotent: false, open_world: true })
        .trusted_output();
        MessageTool {
            spec,
            channels: setup.channels.clone(),
            secrets: setup.secrets.clone(),
            outbox: setup.outbox.clone(),
            detector: Arc::clone(&setup.detector),
            client: std::sync::OnceLock::new(),
            sent: RateWindow::default(),
            epoch: Instant::now(),
        }
    }

    /// The channel `to` names and the address after it, or the error that lists what there is.
    fn resolve<'a>(&'a self, to: &'a str) -> Result<(&'a str, &'a ChannelConfig, &'a str), ToolError> {
        let (name, address) = to.split_once(':').ok_or_else(|| {
            ToolError::invalid(TOOL, "/to", format!("`{to}` is not `CHANNEL:address`; {}", self.listing()))
        })?;
        let address = address.trim();
        if let Some((n, c)) = self.channels.get_key_value(name) {
            return Ok((n, c, address));
        }
        // A kind names its channel when it is the only one of that kind (`slack:`).
        let mut of_kind = self.channels.iter().filter(|(_, c)| c.kind.as_str() == name);
        if let (Some((n, c)), None) = (of_kind.next(), of_kind.next()) {
            return Ok((n, c, address));
        }
        let known = ["webhook", "slack", "telegram", "email", "mcp"];
        let why = if known.contains(&name) {
            format!("no channel `{name}` is configured")
        } else {
            format!(
                "`{name}` is not a configured channel, and toolgate has no adapter for `{name}` (adapters: {})",
                known.join(", ")
            )
        };
        Err(ToolError::invalid(TOOL, "/to", format!("{why}; {}", self.listing())))
    }

    fn listing(&self) -> String {
        let names: Vec<String> = self.channels.iter().map(|(n, c)| format!("`{n}:` ({})", c.kind.as_str())).collect();
        let have = if names.is_empty() {
            "no channel is configured".to_owned()
        } else {
            format!("configured channels: {}", names.join(", "))
        };
        format!(
            "{have}. To add one, put `[automation.channels.NAME]` with `kind = \"webhook\" | \"slack\" | \"telegram\" | \
             \"email\" | \"mcp\"` and its settings (docs/automation.md, \"Message channels\") in toolgate.toml"
        )
    }

    fn secret(&self, channel: &str, c: &ChannelConfig) -> Result<Option<String>, ToolError> {
        let Some(name) = &c.secret else { return Ok(None) };
        let Some(secrets) = &self.secrets else {
            return Err(ToolError::failed(format!(
                "channel `{channel}` needs the secret `{name}`, but this gate has no state database to keep secrets in"
            )));
        };
        match secrets.secret(name) {
            Ok(Some(v)) => Ok(Some(v)),
            Ok(None) => Err(ToolError::failed(format!(
                "channel `{channel}` needs the secret `{name}`, which is not stored; store it with \
                 `toolgate tools secret {name}` (the value on standard input)"
            ))),
            Err(e) => Err(ToolError::failed(format!("reading the secret `{name}` of channel `{channel}`: {e}"))),
        }
    }

    /// Takes a slot of the channel's rate limit, or says when one frees.
    fn take_slot(&self, channel: &str, per_minute: u32) -> Result<(), ToolError> {
        let now_ms = i64::try_from(self.epoch.elapsed().as_millis()).unwrap_or(i64::MAX);
        self.sent.take(channel, per_minute, now_ms).map_err(|wait_secs| {
            ToolError::failed(format!(
                "channel `{channel}` sends at most {per_minute} messages a minute (rate_per_minute); the next slot frees in {wait_secs} s, \
                 try again then"
            ))
        })
    }

    /// One try on the channel's adapter.
    async fn try_send(
        &self,
        ctx: &CallContext,
        c: &ChannelConfig,
        secret: Option<&str>,
        m: &Outgoing<'_>,
    ) -> Result<(), SendError> {
        let client = || {
            self.client
                .get_or_init(http::client)
                .as_ref()
                .map_err(|e| SendError::permanent(format!("no HTTP client: {e}")))
        };
        let secret_or = || secret.ok_or_else(|| SendError::permanent("the channel's secret is missing"));
        match c.kind {
            ChannelKind::Webhook => {
                http::webhook(client()?, c.url.as_deref().unwrap_or_default(), secret_or()?, m).await
            }
            ChannelKind::Slack => http::slack(client()?, secret_or()?.trim(), m).await,
            ChannelKind::Telegram => {
                let base = c.api_base.as_deref().unwrap_or("https://api.telegram.org");
                http::telegram(client()?, base, secret_or()?.trim(), m).await
            }
            ChannelKind::Email => email::send(c, secret, m).await,
            ChannelKind::Mcp => match ctx.client.get() {
                Some(client) => {
                    let data = json!({"channel": m.channel, "to": m.address, "content": m.content, "id": m.id});
                    client
                        .notify(ClientNote { logger: "toolgate.message".to_owned(), data })
                        .await
                        .map_err(SendError::permanent)
                }
                None => Err(SendError::permanent(
                    "no MCP client is connected to this call (the CLI, jobs and routines have none); use another channel",
                )),
            },
        }
    }

    async fn send(&self, ctx: &CallContext, params: &Value) -> Result<ToolOutput, ToolError> {
        let to = params.get("to").and_then(Value::as_str).ok_or_else(|| {
            ToolError::invalid(TOOL, "/to", format!("`to` is required to send (`CHANNEL:address`); {}", self.listing()))
        })?;
        let content = params
            .get("content")
            .and_then(Value::as_str)
            .ok_or_else(|| ToolError::invalid(TOOL, "/content", "`content` is required to send: the message text"))?;
        let subject = params.get("subject").and_then(Value::as_str);
        self.deliver(ctx, to, content, subject, None).await
    }

    /// Sends `content` to `to`; `kept`: the outbox entry this is a resend of (same id, so a
    /// receiver drops a duplicate; removed when delivered, updated when not).
    async fn deliver(
        &self,
        ctx: &CallContext,
        to: &str,
        content: &str,
        subject: Option<&str>,
        kept: Option<&OutboxEntry>,
    ) -> Result<ToolOutput, ToolError> {
        let (channel, c, address) = self.resolve(to)?;
        config::check(channel, c).map_err(|e| ToolError::failed(format!("{e}; fix toolgate.toml")))?;
        check_message(c, address, content, subject)?;
        let secret = self.secret(channel, c)?;
        self.scan(channel, secret.as_deref(), [Some(content), subject, Some(address)])?;
        let secret = match c.kind {
            ChannelKind::Slack => Some(slack_url(channel, c, secret.as_deref().unwrap_or_default())?),
            ChannelKind::Telegram => {
                let token = secret.unwrap_or_default();
                if !http::telegram_token_ok(token.trim()) {
                    return Err(ToolError::failed(format!(
                        "the secret `{}` of channel `{channel}` is not a Telegram bot token (`123456:ABC...` from @BotFather)",
                        c.secret.as_deref().unwrap_or_default()
                    )));
                }
                Some(token)
            }
            _ => secret,
        };
        self.take_slot(channel, c.rate_per_minute)?;
        let id = kept.map_or_else(|| uuid::Uuid::new_v4().to_string(), |e| e.id.clone());
        let m = Outgoing {
            id: &id,
            channel,
            address,
            subject,
            content,
            timeout: Duration::from_secs(c.timeout_secs.max(1)),
        };
        let mut attempts = 0u32;
        let mut backoff = Duration::from_millis(c.backoff_ms);
        let last = loop {
            attempts += 1;
            let tried = tokio::select! {
                r = self.try_send(ctx, c, secret.as_deref(), &m) => r,
                () = ctx.cancel.cancelled() => Err(SendError::permanent("the call was cancelled")),
            };
            let e = match tried {
                Ok(()) => {
                    ctx.audit.set(format!("sent on {channel} ({}) after {attempts} tries", c.kind.as_str()));
                    if kept.is_some()
                        && let Some(outbox) = &self.outbox
                        && let Err(e) = outbox.outbox_delete(&id)
                    {
                        tracing::warn!(id, "a resent message stays in the outbox: {e}");
                    }
                    let text = format!("Sent to {channel}:{address} on {} (message {id}).", c.kind.as_str());
                    return Ok(ToolOutput::text(text).with_meta(json!({
                        "id": id, "channel": channel, "kind": c.kind.as_str(), "address": address, "attempts": attempts
                    })));
                }
                Err(e) => e,
            };
            if !e.retry || attempts > c.retries || ctx.cancel.is_cancelled() {
                break e;
            }
            let wait = e.retry_after.unwrap_or(backoff).min(MAX_BACKOFF);
            tracing::debug!(channel, attempts, error = %e.message, "message send failed; retrying in {wait:?}");
            tokio::select! {
                () = tokio::time::sleep(wait) => {}
                () = ctx.cancel.cancelled() => {}
            }
            backoff = (backoff * 2).min(MAX_BACKOFF);
        };
        let kept = match &self.outbox {
            Some(outbox) => {
                let entry = OutboxEntry {
                    id: id.clone(),
                    user: ctx.identity.user.clone(),
                    channel: channel.to_owned(),
                    address: address.to_owned(),
                    subject: subject.map(str::to_owned),
                    content: content.to_owned(),
                    attempts: attempts + kept.map_or(0, |e| e.attempts),
                    last_error: last.message.clone(),
                    created_ms: kept.map_or_else(|| chrono::Utc::now().timestamp_millis(), |e| e.created_ms),
                };
                match outbox.outbox_put(&entry) {
                    Ok(()) => {
                        format!("It is kept in the outbox as {id} (`message {{\"action\": \"outbox\"}}` lists it).")
                    }
                    Err(e) => format!("It could not be kept in the outbox either ({e}): it is lost."),
                }
            }
            None => "There is no state database, so it was not kept (no outbox).".to_owned(),
        };
        let tries = if attempts == 1 { "1 try".to_owned() } else { format!("{attempts} tries") };
        Err(ToolError::ExternalService {
            service: format!("channel `{channel}` ({})", c.kind.as_str()),
            message: format!("the message to `{to}` was not delivered after {tries}: {}. {kept}", last.message),
        })
    }

    /// Refuses text holding a credential: one the detector knows, or the channel's own secret.
    fn scan<'a>(
        &self,
        channel: &str,
        secret: Option<&str>,
        texts: impl IntoIterator<Item = Option<&'a str>>,
    ) -> Result<(), ToolError> {
        for text in texts.into_iter().flatten() {
            let findings = self.detector.scan(text);
            let own = secret.is_some_and(|s| s.trim().len() >= 6 && text.contains(s.trim()));
            if !findings.is_empty() || own {
                let mut rules: Vec<&str> = findings.iter().map(|f| f.rule_id).collect();
                if own {
                    rules.push("the channel's own secret");
                }
                rules.dedup();
                return Err(ToolError::failed(format!(
                    "not sent: the message holds what looks like a credential ({}) and a secret is never sent on a \
                     channel `{channel}`; remove it and send again",
                    rules.join(", ")
                )));
            }
        }
        Ok(())
    }

    /// The caller's outbox entry `params.id`; another user's is "not found" (not revealed).
    fn own_entry(&self, ctx: &CallContext, params: &Value) -> Result<OutboxEntry, ToolError> {
        let id = params.get("id").and_then(Value::as_str).map(str::trim).unwrap_or_default();
        if id.is_empty() {
            return Err(ToolError::invalid(
                TOOL,
                "/id",
                "`id` is required: an outbox entry's id (`action: outbox` lists them)",
            ));
        }
        let outbox = self
            .outbox
            .as_ref()
            .ok_or_else(|| ToolError::failed("There is no outbox: this gate has no state database."))?;
        let entries = outbox
            .outbox_list(Some(&ctx.identity.user), OUTBOX_SCAN)
            .map_err(|e| ToolError::failed(format!("reading the outbox: {e}")))?;
        entries.into_iter().find(|e| e.id == id).ok_or_else(|| ToolError::NotFound {
            what: format!("outbox entry `{}`", crate::text::clip(id, 64)),
            hint: Some("list yours with {\"action\": \"outbox\"}".to_owned()),
        })
    }

    /// Any user's outbox entry `id` (for the approval request; ownership is checked by
    /// `inspect` before anyone is asked).
    fn entry(&self, id: &str) -> Option<OutboxEntry> {
        let outbox = self.outbox.as_ref()?;
        outbox.outbox_list(None, OUTBOX_SCAN).ok()?.into_iter().find(|e| e.id == id)
    }

    async fn resend(&self, ctx: &CallContext, params: &Value) -> Result<ToolOutput, ToolError> {
        let e = self.own_entry(ctx, params)?;
        let to = format!("{}:{}", e.channel, e.address);
        self.deliver(ctx, &to, &e.content, e.subject.as_deref(), Some(&e)).await
    }

    fn delete(&self, ctx: &CallContext, params: &Value) -> Result<ToolOutput, ToolError> {
        let e = self.own_entry(ctx, params)?;
        let outbox = self.outbox.as_ref().ok_or_else(|| ToolError::failed("no outbox"))?;
        outbox.outbox_delete(&e.id).map_err(|err| ToolError::failed(format!("deleting from the outbox: {err}")))?;
        Ok(ToolOutput::text(format!(
            "Deleted {} (to {}:{}) from the outbox; it will not be sent.",
            e.id, e.channel, e.address
        ))
        .with_meta(json!({"id": e.id, "deleted": true})))
    }

    fn outbox(&self, ctx: &CallContext) -> Result<ToolOutput, ToolError> {
        let Some(outbox) = &self.outbox else {
            return Ok(ToolOutput::text("There is no outbox: this gate has no state database."));
        };
        let entries = outbox
            .outbox_list(Some(&ctx.identity.user), OUTBOX_LIST)
            .map_err(|e| ToolError::failed(format!("reading the outbox: {e}")))?;
        if entries.is_empty() {
            return Ok(
                ToolOutput::text("The outbox is empty: every message was delivered.").with_meta(json!({"count": 0}))
            );
        }
        let mut text = format!("{} undelivered message(s), newest first:\n", entries.len());
        for e in &entries {
            let when = chrono::DateTime::from_timestamp_millis(e.created_ms)
                .map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true))
                .unwrap_or_default();
            let subject = e.subject.as_deref().map(|s| format!(" subject {s:?}")).unwrap_or_default();
            text.push_str(&format!(
                "- {} {when} to {}:{}{subject}, {} tries, last error: {}\n  {:?}\n",
                e.id, e.channel, e.address, e.attempts, e.last_error, e.content
            ));
        }
        let rows: Vec<Value> = entries
            .iter()
            .map(|e| json!({"id": e.id, "channel": e.channel, "address": e.address, "attempts": e.attempts, "created_ms": e.created_ms}))
            .collect();
        Ok(ToolOutput::text(text).with_meta(json!({"count": entries.len(), "entries": rows})))
    }
}

/// The message's own checks, before any secret is read.
fn check_message(c: &ChannelConfig, address: &str, content: &str, subject: Option<&str>) -> Result<(), ToolError> {
    if content.trim().is_empty() {
        return Err(ToolError::invalid(TOOL, "/content", "`content` is empty; write the message text"));
    }
    if content.len() > MAX_CONTENT {
        return Err(ToolError::invalid(
            TOOL,
            "/content",
            format!("`content` is {} bytes; at most {MAX_CONTENT} are sent, shorten it", content.len()),
        ));
    }
    if !c.addresses.is_empty() && !c.addresses.iter().any(|a| a == address) {
        return Err(ToolError::invalid(
            TOOL,
            "/to",
            format!("`{address}` is not one of this channel's allowed addresses: {}", c.addresses.join(", ")),
        ));
    }
    if subject.is_some() && c.kind != ChannelKind::Email {
        return Err(ToolError::invalid(TOOL, "/subject", "only email channels have a `subject`; leave it out"));
    }
    if let Some(s) = subject
        && (s.contains(['\r', '\n']) || s.chars().count() > 200)
    {
        return Err(ToolError::invalid(TOOL, "/subject", "a subject is one line of at most 200 characters"));
    }
    match c.kind {
        ChannelKind::Telegram if !http::telegram_chat_ok(address) => Err(ToolError::invalid(
            TOOL,
            "/to",
            format!(
                "`{address}` is not a Telegram chat: use its numeric chat id (`telegram:123456789`) or a public `@channelname`"
            ),
        )),
        ChannelKind::Telegram if content.chars().count() > http::TELEGRAM_MAX_CHARS => Err(ToolError::invalid(
            TOOL,
            "/content",
            format!(
                "Telegram takes at most {} characters in a message; shorten it or split it",
                http::TELEGRAM_MAX_CHARS
            ),
        )),
        ChannelKind::Email if !email::address_ok(address) => Err(ToolError::invalid(
            TOOL,
            "/to",
            format!("`{address}` is not an email address; write `CHANNEL:name@example.com`"),
        )),
        _ => Ok(()),
    }
}

/// The Slack webhook URL from the secret, refused unless it is under the channel's API base
/// (`https://hooks.slack.com/services/...` by default), so a wrong secret cannot send elsewhere.
fn slack_url(channel: &str, c: &ChannelConfig, secret: &str) -> Result<String, ToolError> {
    let base = c.api_base.as_deref().unwrap_or("https://hooks.slack.com").trim_end_matches('/');
    let url = secret.trim();
    let ok = url.strip_prefix(base).is_some_and(|rest| {
        rest.starts_with("/services/") && !rest.contains("..") && !rest.contains(['?', '#', '@', ' '])
    });
    if !ok {
        return Err(ToolError::failed(format!(
            "the secret `{}` of channel `{channel}` is not a Slack incoming webhook URL under {base}/services/",
            c.secret.as_deref().unwrap_or_default()
        )));
    }
    Ok(url.to_owned())
}

#[async_trait]
impl Tool for MessageTool {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    fn safety(&self, params: &Value) -> CallSafety {
        let mut safety = CallSafety { rate_class: RateClass::Message, ..CallSafety::default() };
        let resent = match params.get("action").and_then(Value::as_str) {
            Some("outbox") => {
                safety.read_only = true;
                return safety;
            }
            Some("delete") => return safety,
            // A resend asks as its send did, for the entry's channel and address; `inspect`
            // refuses another user's entry before anyone is asked.
            Some("resend") => {
                safety.inspect = true;
                match params.get("id").and_then(Value::as_str).and_then(|id| self.entry(id.trim())) {
                    Some(e) => Some(format!("{}:{}", e.channel, e.address)),
                    None => return safety,
                }
            }
            _ => None,
        };
        let to = resent.as_deref().or_else(|| params.get("to").and_then(Value::as_str)).unwrap_or_default();
        if let Ok((name, c, address)) = self.resolve(to) {
            if c.needs_approval() {
                safety.approval = ApprovalRequirement::UnlessAutoApproved;
                safety.approval_reason = Some(
                    format!(
                        "sends a message to `{address}` outside the workspace on channel `{name}` ({})",
                        c.kind.as_str()
                    )
                    .into(),
                );
            }
            // "Allow always" covers this recipient on this channel, not any message anywhere.
            safety.approval_subject = Some(format!("{name}:{address}"));
            let host = c.url.as_deref().or(c.api_base.as_deref()).or(c.host.as_deref());
            if let Some(host) = host.and_then(host_of) {
                safety.touches.hosts.push(host);
            }
        }
        safety
    }

    async fn inspect(&self, ctx: &CallContext, params: &Value) -> Result<Vec<String>, ToolError> {
        let e = self.own_entry(ctx, params)?;
        Ok(vec![format!("resend outbox entry {} to {}:{} ({} tries so far)", e.id, e.channel, e.address, e.attempts)])
    }

    async fn execute(&self, ctx: &CallContext, params: Value) -> Result<ToolOutput, ToolError> {
        match params.get("action").and_then(Value::as_str).unwrap_or("send") {
            "send" => self.send(ctx, &params).await,
            "outbox" => self.outbox(ctx),
            "resend" => self.resend(ctx, &params).await,
            "delete" => self.delete(ctx, &params),
            other => Err(ToolError::invalid(
                TOOL,
                "/action",
                format!("unknown action `{other}`; use `send`, `outbox`, `resend` or `delete`"),
            )),
        }
    }
}

/// The host of a URL or a bare host name, lowercase, without port.
fn host_of(s: &str) -> Option<String> {
    let rest = s.split_once("://").map_or(s, |(_, r)| r);
    let authority = rest.split(['/', '?', '#']).next()?;
    let host = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    let host = if host.starts_with('[') { host.split(']').next().map(|h| &h[1..])? } else { host.split(':').next()? };
    (!host.is_empty()).then(|| host.to_ascii_lowercase())
}
