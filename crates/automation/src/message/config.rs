//! `[automation.channels.NAME]`: the message channels an admin configures.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

/// The kinds of channel there is an adapter for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ChannelKind {
    /// A JSON POST to `url`, signed with HMAC-SHA256 over the timestamp and the raw body.
    Webhook,
    /// A Slack incoming webhook (the webhook URL is the secret).
    Slack,
    /// The Telegram Bot API's `sendMessage` (the bot token is the secret).
    Telegram,
    /// Email over SMTP with STARTTLS.
    Email,
    /// A logging notification to the MCP client of the call.
    Mcp,
}

impl ChannelKind {
    /// Its name in config and in `to`.
    pub fn as_str(self) -> &'static str {
        match self {
            ChannelKind::Webhook => "webhook",
            ChannelKind::Slack => "slack",
            ChannelKind::Telegram => "telegram",
            ChannelKind::Email => "email",
            ChannelKind::Mcp => "mcp",
        }
    }

    /// Whether a message on it reaches people or systems outside the workspace (every kind but
    /// `mcp`, which goes back to the caller's own client).
    pub fn leaves_workspace(self) -> bool {
        !matches!(self, ChannelKind::Mcp)
    }
}

/// One channel: `[automation.channels.NAME]`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ChannelConfig {
    /// Which adapter sends on it.
    pub kind: ChannelKind,
    /// `webhook`: where to POST.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// The name of the secret (`toolgate tools secret NAME`) the adapter needs: the HMAC key
    /// (`webhook`), the webhook URL (`slack`), the bot token (`telegram`), the SMTP password
    /// (`email`, with `username`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret: Option<String>,
    /// `slack`, `telegram`: the API's base URL (defaults `https://hooks.slack.com`,
    /// `https://api.telegram.org`); a test points it at a loopback receiver.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_base: Option<String>,
    /// `email`: the SMTP server.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
    /// `email`: its submission port (default 587).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub port: Option<u16>,
    /// `email`: the sender address.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from: Option<String>,
    /// `email`: the SMTP user name (with `secret` as its password).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub username: Option<String>,
    /// `email`: a PEM file of extra trusted root certificates (a private CA), besides the
    /// system's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ca_file: Option<PathBuf>,
    /// The only addresses allowed after `CHANNEL:` (empty: any).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub addresses: Vec<String>,
    /// Whether the channel also receives: `webhook`, `slack` and `telegram` channels then take
    /// messages at `POST /hooks/messages/NAME` of `toolgate serve --http`, each one a `message`
    /// event (`inbound.rs`). Default: no (a channel that does not receive answers 404).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub receive: bool,
    /// The name of the secret that proves an inbound request came from the service: the HMAC
    /// key (`webhook`; defaults to `secret`), the app's signing secret (`slack`), the
    /// `secret_token` given to `setWebhook` (`telegram`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub receive_secret: Option<String>,
    /// Messages a minute this channel takes in at most (default 60): past it, a verified
    /// message is refused with 429 and `Retry-After`, so the service delivers it again later.
    #[serde(default = "default_receive_rate")]
    pub receive_per_minute: u32,
    /// Whether a person approves each message (default: yes for every kind but `mcp`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approval: Option<bool>,
    /// Messages a minute this channel sends at most (default 20).
    #[serde(default = "default_rate")]
    pub rate_per_minute: u32,
    /// Tries after the first failed send (default 3).
    #[serde(default = "default_retries")]
    pub retries: u32,
    /// The first wait before a retry, doubled each time up to 30 s (default 1000 ms).
    #[serde(default = "default_backoff")]
    pub backoff_ms: u64,
    /// The deadline of one try (default 20 s).
    #[serde(default = "default_timeout")]
    pub timeout_secs: u64,
}

fn default_rate() -> u32 {
    20
}
fn default_receive_rate() -> u32 {
    60
}
fn default_retries() -> u32 {
    3
}
fn default_backoff() -> u64 {
    1000
}
fn default_timeout() -> u64 {
    20
}

impl ChannelConfig {
    /// A channel of `kind` with every default.
    pub fn new(kind: ChannelKind) -> Self {
        ChannelConfig {
            kind,
            url: None,
            secret: None,
            api_base: None,
            host: None,
            port: None,
            from: None,
            username: None,
            ca_file: None,
            addresses: Vec::new(),
            receive: false,
            receive_secret: None,
            receive_per_minute: default_receive_rate(),
            approval: None,
            rate_per_minute: default_rate(),
            retries: default_retries(),
            backoff_ms: default_backoff(),
            timeout_secs: default_timeout(),
        }
    }

    /// The secret (its name) an inbound request is verified with, if the kind has one.
    pub fn receive_secret_name(&self) -> Option<&str> {
        match self.kind {
            ChannelKind::Webhook => self.receive_secret.as_deref().or(self.secret.as_deref()),
            ChannelKind::Slack | ChannelKind::Telegram => self.receive_secret.as_deref(),
            ChannelKind::Email | ChannelKind::Mcp => None,
        }
    }

    /// Whether each message needs a person's approval.
    pub fn needs_approval(&self) -> bool {
        self.approval.unwrap_or(self.kind.leaves_workspace())
    }
}

/// The configured channels by name (`[automation.channels]`).
pub type Channels = BTreeMap<String, ChannelConfig>;

/// What is wrong with a channel's configuration, if anything (checked when the tool is built
/// and again on each send, so a bad entry names itself instead of failing somewhere deep).
pub(crate) fn check(name: &str, c: &ChannelConfig) -> Result<(), String> {
    let missing = |key: &str| format!("[automation.channels.{name}] (kind = \"{}\") needs `{key}`", c.kind.as_str());
    match c.kind {
        ChannelKind::Webhook => {
            let url = c.url.as_deref().ok_or_else(|| missing("url"))?;
            if !(url.starts_with("https://") || url.starts_with("http://")) {
                return Err(format!("[automation.channels.{name}] url `{url}` is not an http(s) URL"));
            }
            c.secret.as_ref().ok_or_else(|| missing("secret (the HMAC key's secret name)"))?;
        }
        ChannelKind::Slack => {
            c.secret.as_ref().ok_or_else(|| missing("secret (the secret holding the incoming webhook URL)"))?;
        }
        ChannelKind::Telegram => {
            c.secret.as_ref().ok_or_else(|| missing("secret (the secret holding the bot token)"))?;
        }
        ChannelKind::Email => {
            c.host.as_ref().ok_or_else(|| missing("host"))?;
            c.from.as_ref().ok_or_else(|| missing("from"))?;
            if c.username.is_some() != c.secret.is_some() {
                return Err(format!(
                    "[automation.channels.{name}] needs both `username` and `secret` (the password's secret name), or neither"
                ));
            }
        }
        ChannelKind::Mcp => {}
    }
    if c.rate_per_minute == 0 {
        return Err(format!("[automation.channels.{name}] rate_per_minute must be at least 1"));
    }
    Ok(())
}
