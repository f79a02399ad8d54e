//! [`Pairings`]: the nodes this one is paired with, kept as sealed secrets.

use std::sync::Arc;

use serde::{Deserialize, Serialize};
use toolgate_store::{SecretError, SecretStore};

/// The prefix of the secrets that hold pairings (`node/NAME`).
pub const PAIRING_PREFIX: &str = "node/";
const PREFIX: &str = PAIRING_PREFIX;

/// Another node: where it serves and the API key this node calls it with.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Pairing {
    /// Its name here (`[a-z0-9_-]`, 1 to 64 characters).
    pub name: String,
    /// Its MCP endpoint (`https://host/mcp`).
    pub url: String,
    /// The API key it gave this node (a user or agent of its gateway).
    pub key: String,
}

impl std::fmt::Debug for Pairing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the key.
        f.debug_struct("Pairing").field("name", &self.name).field("url", &self.url).finish_non_exhaustive()
    }
}

/// The pairings of this node (and of every node on the same shared database).
#[derive(Debug, Clone)]
pub struct Pairings {
    secrets: Arc<dyn SecretStore>,
}

/// Why a pairing could not be added or read.
#[derive(Debug)]
pub enum PairingError {
    /// The name, URL or key is not acceptable; the text says why and what to do.
    Invalid(String),
    /// The secret store failed.
    Store(SecretError),
}

impl std::fmt::Display for PairingError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PairingError::Invalid(why) => f.write_str(why),
            PairingError::Store(e) => write!(f, "cannot read or write the pairings: {e}"),
        }
    }
}

impl std::error::Error for PairingError {}

impl From<SecretError> for PairingError {
    fn from(e: SecretError) -> Self {
        PairingError::Store(e)
    }
}

impl Pairings {
    /// The pairings kept in `secrets`.
    pub fn new(secrets: Arc<dyn SecretStore>) -> Pairings {
        Pairings { secrets }
    }

    /// Pairs with `name` at `url` with `key`, replacing an earlier pairing of that name.
    pub fn add(&self, name: &str, url: &str, key: &str) -> Result<(), PairingError> {
        check_name(name)?;
        if !(url.starts_with("http://") || url.starts_with("https://")) {
            return Err(PairingError::Invalid(format!(
                "the node's URL must be its MCP endpoint, http(s)://HOST/mcp, not `{url}`"
            )));
        }
        if key.is_empty() || key.chars().any(|c| c.is_control() || c == ' ') {
            return Err(PairingError::Invalid(
                "the key must be the node's API key (`toolgate admin key create` on that node), one word".into(),
            ));
        }
        let pairing = Pairing { name: name.to_owned(), url: url.to_owned(), key: key.to_owned() };
        let value = serde_json::to_vec(&pairing).map_err(|e| PairingError::Invalid(e.to_string()))?;
        Ok(self.secrets.secret_put(&format!("{PREFIX}{name}"), &value)?)
    }

    /// Unpairs `name`; whether it was paired.
    pub fn remove(&self, name: &str) -> Result<bool, PairingError> {
        check_name(name)?;
        Ok(self.secrets.secret_delete(&format!("{PREFIX}{name}"))?)
    }

    /// One pairing.
    pub fn get(&self, name: &str) -> Result<Option<Pairing>, PairingError> {
        check_name(name)?;
        let Some(value) = self.secrets.secret_get(&format!("{PREFIX}{name}"))? else { return Ok(None) };
        serde_json::from_slice(&value)
            .map(Some)
            .map_err(|e| PairingError::Invalid(format!("the pairing of `{name}` is damaged ({e}); add it again")))
    }

    /// Every pairing, by name.
    pub fn list(&self) -> Result<Vec<Pairing>, PairingError> {
        let names = self.secrets.secret_keys(PREFIX)?;
        let mut out = Vec::with_capacity(names.len());
        for name in names {
            if let Some(pairing) = self.get(&name[PREFIX.len()..])? {
                out.push(pairing);
            }
        }
        Ok(out)
    }
}

fn check_name(name: &str) -> Result<(), PairingError> {
    let ok = (1..=64).contains(&name.len())
        && name.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'_');
    if ok {
        Ok(())
    } else {
        Err(PairingError::Invalid(format!(
            "a node's name is 1 to 64 of a-z, 0-9, `-` and `_`, not `{}`",
            name.chars().take(80).collect::<String>()
        )))
    }
}
