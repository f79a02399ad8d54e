//! The configuration several nodes share (`[store] url`): the sections a running gate reloads
//! (`reload.rs`) — `[tools]` (the policy, custom tools), `[mcp]` (bridged servers) and `[gate]
//! dialect` — stored as TOML in the PostgreSQL database (`toolgate_postgres::StoredConfig`), so a
//! change made through one node is in force on all of them.
//!
//! - **Loading**: a node's configuration is its files, environment and flags with the stored
//!   sections on top: a section the database holds replaces the files' one whole (`overlay`),
//!   so every node runs the same policy whatever its own file says. Nothing stored: the files.
//! - **Changing**: `gateway config_apply` and `toolgate admin config push` check the new
//!   sections first (they must load on this node, the policy compile, the dialect exist) and
//!   store nothing otherwise ([`SharedConfig::put`]). `config_apply` stores its patch only
//!   over the sections it read ([`SharedConfig::put_over`]: made again over a newer text when
//!   another change came first), so two admins applying at once both keep their change; `push`
//!   replaces them whole; `clear` removes them (the nodes go back to their files).
//! - **Following**: storing raises the `config` revision, whose trigger notifies every node; a
//!   node reads the revision every [`POLL`] (from memory while its `LISTEN` connection hears
//!   everything, so this costs nothing) and reloads when it moved ([`follow`]). Notifications are
//!   lossy: a node whose connection dropped reads the revision from the database until it is
//!   back, and reads every revision again when it is, so a change it did not hear is still
//!   found. A reload that fails on a node keeps its previous configuration and logs why.

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering::SeqCst};
use std::time::Duration;

use tokio_util::sync::CancellationToken;
use toml::{Table, Value};
use toolgate_postgres::{PgStore, StoredConfig};

use crate::Gate;
use crate::config::{Config, StoreConfig};

/// How often a node compares the `config` revision with the one it loaded.
pub const POLL: Duration = Duration::from_millis(250);

/// How many times a change is made again over a configuration another node changed meanwhile
/// before it is refused ([`SharedConfig::put_over`]).
pub const APPLY_ATTEMPTS: usize = 5;

/// The largest shared configuration stored, in bytes.
pub const MAX_BYTES: usize = 256 * 1024;

/// The top-level sections shared whole.
const WHOLE: [&str; 2] = ["tools", "mcp"];

/// `[gate]`'s keys that are shared (the rest stay each node's).
const GATE_KEYS: [&str; 1] = ["dialect"];

/// What the shared sections are called, for messages.
pub const SHARED_NAMES: &str = "[tools], [mcp] and [gate] dialect";

/// Loads the node's configuration layers with a shared layer on top (`None`: the files alone).
pub type LoadWith = Box<dyn Fn(Option<&Table>) -> Result<Config, String> + Send + Sync>;

/// Splits a TOML layer into its shared sections and the names of the others (`[sandbox]`,
/// `[gate] timeout_secs`).
pub fn split(text: &str) -> Result<(Table, Vec<String>), String> {
    let table: Table = toml::from_str(text).map_err(|e| format!("not TOML: {}", e.to_string().trim()))?;
    Ok(split_table(table))
}

/// [`split`] of a parsed layer.
fn split_table(table: Table) -> (Table, Vec<String>) {
    let (mut shared, mut others) = (Table::new(), Vec::new());
    for (key, value) in table {
        if WHOLE.contains(&key.as_str()) {
            shared.insert(key, value);
        } else if key == "gate"
            && let Value::Table(gate) = value
        {
            let mut kept = Table::new();
            for (k, v) in gate {
                if GATE_KEYS.contains(&k.as_str()) {
                    kept.insert(k, v);
                } else {
                    others.push(format!("[gate] {k}"));
                }
            }
            if !kept.is_empty() {
                shared.insert(key, Value::Table(kept));
            }
        } else {
            others.push(format!("[{key}]"));
        }
    }
    (shared, others)
}

/// Puts `shared` over `merged` (every other layer, merged): a section it holds replaces the
/// same section whole, `[gate]`'s shared keys one by one.
pub fn overlay(merged: &mut Table, shared: &Table) {
    for (key, value) in shared {
        match (key.as_str(), value) {
            ("gate", Value::Table(keys)) => {
                let gate = merged.entry("gate").or_insert_with(|| Value::Table(Table::new()));
                if let Value::Table(gate) = gate {
                    for (k, v) in keys.iter().filter(|(k, _)| GATE_KEYS.contains(&k.as_str())) {
                        gate.insert(k.clone(), v.clone());
                    }
                }
            }
            (key, value) if WHOLE.contains(&key) => {
                merged.insert(key.to_owned(), value.clone());
            }
            _ => {}
        }
    }
}

/// The checks a reload makes that need no running gate: the policy compiles and the dialect
/// exists. (A gate also builds the custom tools: [`Gate::check_config`].)
pub fn check(config: &Config) -> Result<(), String> {
    toolgate_policy::Policy::new(config.tools.policy.clone())
        .map_err(|e| format!("the policy does not compile: {e}"))?;
    toolgate_dialect::dialect(&config.gate.dialect).map_err(|e| e.to_string())?;
    Ok(())
}

/// The shared configuration of one database, and how this node loads its own layers.
pub struct SharedConfig {
    store: PgStore,
    load_with: LoadWith,
    /// The `config` revision of the configuration last loaded.
    loaded: AtomicI64,
}

impl std::fmt::Debug for SharedConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SharedConfig").field("loaded", &self.loaded).finish_non_exhaustive()
    }
}

impl SharedConfig {
    /// The shared configuration of `store`'s database; `None` without `[store] url` (the files
    /// are the whole configuration).
    pub fn open(store: &StoreConfig, load_with: LoadWith) -> Result<Option<Arc<SharedConfig>>, String> {
        let Some(url) = &store.url else { return Ok(None) };
        let store = crate::state::shared(url).map_err(|e| e.to_string())?;
        Ok(Some(Arc::new(SharedConfig { store, load_with, loaded: AtomicI64::new(0) })))
    }

    /// The revision and the stored text (`None`: nothing stored yet).
    pub fn stored(&self) -> Result<(i64, Option<StoredConfig>), String> {
        self.store.shared_config().map_err(|e| e.to_string())
    }

    /// The stored sections, parsed (`None`: nothing stored), and their revision.
    fn layer(&self) -> Result<(i64, Option<Table>), String> {
        let (revision, stored) = self.stored()?;
        let layer = stored
            .map(|s| split(&s.text).map(|(shared, _)| shared))
            .transpose()
            .map_err(|e| format!("the shared configuration in the database (revision {revision}) is {e}"))?;
        Ok((revision, layer))
    }

    /// The stored sections (`None`: nothing stored).
    pub fn sections(&self) -> Result<Option<Table>, String> {
        self.layer().map(|(_, layer)| layer)
    }

    /// This node's configuration: its layers with the stored sections on top.
    pub fn load(&self) -> Result<Config, String> {
        let (revision, layer) = self.layer()?;
        let config = (self.load_with)(layer.as_ref())?;
        self.loaded.store(revision, SeqCst);
        Ok(config)
    }

    /// The configuration this node would load with `sections` stored instead, unchecked (the
    /// caller checks it as a reload would: [`Gate::check_config`]).
    pub fn load_over(&self, sections: &Table) -> Result<Config, String> {
        text_of(sections)?;
        (self.load_with)(Some(sections))
    }

    /// Stores `sections` (shared ones only: anything else is refused) once they load on this
    /// node and pass [`check`]; the new revision. `by`: who, for `toolgate admin config show`.
    /// It replaces what is stored whole, whatever that is (`toolgate admin config push`); a
    /// change over what is stored is [`Self::put_over`].
    pub fn put(&self, sections: &Table, by: &str) -> Result<i64, String> {
        let text = text_of(sections)?;
        check(&(self.load_with)(Some(sections))?)?;
        self.store.shared_config_put(&text, by).map_err(|e| e.to_string())
    }

    /// Stores `patched(stored)` — a change made over the stored sections, `None` when nothing
    /// is stored — only if nothing else was stored meanwhile; otherwise reads the new stored
    /// sections and makes the change again over them (a patch merged onto the newer text keeps
    /// both changes), up to [`APPLY_ATTEMPTS`] times, then refuses. `patched` checks what it
    /// returns ([`Self::load_over`] and a reload's checks, as `config_apply` does): it runs on
    /// every attempt, so nothing is checked twice. The new revision; `patched`'s own error is
    /// returned as it is.
    pub fn put_over<E: From<String>>(
        &self,
        by: &str,
        mut patched: impl FnMut(Option<Table>) -> Result<Table, E>,
    ) -> Result<i64, E> {
        for _ in 0..APPLY_ATTEMPTS {
            let (revision, stored) = self.layer()?;
            let text = text_of(&patched(stored)?)?;
            if let Some(new) = self.store.shared_config_put_at(&text, by, revision).map_err(|e| e.to_string())? {
                return Ok(new);
            }
        }
        Err(E::from(format!(
            "the shared configuration changed while this patch was applied ({APPLY_ATTEMPTS} times in a row): apply it \
             again"
        )))
    }

    /// Removes the stored sections: every node goes back to its own files' on the revision
    /// change. The revision after, and what was removed (`None`: nothing was stored).
    pub fn clear(&self) -> Result<(i64, Option<StoredConfig>), String> {
        self.store.shared_config_clear().map_err(|e| e.to_string())
    }

    /// The `config` revision now.
    pub fn revision(&self) -> Result<i64, String> {
        self.store.config_revision().map_err(|e| e.to_string())
    }

    /// The revision of the configuration last loaded.
    pub fn loaded_revision(&self) -> i64 {
        self.loaded.load(SeqCst)
    }
}

/// `sections` as the text to store: shared sections only, at most [`MAX_BYTES`].
fn text_of(sections: &Table) -> Result<String, String> {
    let (_, others) = split_table(sections.clone());
    if !others.is_empty() {
        return Err(format!("only {SHARED_NAMES} are shared; {} stay in each node's toolgate.toml", others.join(", ")));
    }
    let text = toml::to_string(sections).map_err(|e| e.to_string())?;
    if text.len() > MAX_BYTES {
        return Err(format!("the shared configuration would be {} bytes, over {MAX_BYTES}", text.len()));
    }
    Ok(text)
}

/// Reloads `gate` whenever the `config` revision moves away from the one it loaded, until
/// `shutdown` (see the module's documentation). Must run on a Tokio runtime.
pub fn follow(gate: &Arc<Gate>, shared: Arc<SharedConfig>, shutdown: CancellationToken) {
    let gate = Arc::downgrade(gate);
    tokio::spawn(async move {
        let mut seen = shared.loaded_revision();
        loop {
            tokio::select! {
                () = tokio::time::sleep(POLL) => {}
                () = shutdown.cancelled() => return,
            }
            let revision = match shared.revision() {
                Ok(r) => r,
                Err(e) => {
                    tracing::debug!("cannot read the shared configuration's revision: {e}");
                    continue;
                }
            };
            if revision == seen || revision == shared.loaded_revision() {
                seen = revision;
                continue;
            }
            seen = revision;
            let Some(gate) = gate.upgrade() else { return };
            match gate.reload_config() {
                Ok(r) => tracing::info!(
                    "shared configuration revision {revision} in force: {} custom and skill tools, MCP servers \
                     stopped [{}], started [{}]",
                    r.tools.len(),
                    r.mcp_stopped.join(", "),
                    r.mcp_started.join(", ")
                ),
                Err(e) => tracing::warn!(
                    "the shared configuration's revision {revision} was not put in force on this node, the previous \
                     configuration stays: {e}"
                ),
            }
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_sections_a_reload_applies_are_shared() {
        let (shared, others) = split(
            "[tools]\ndeny = [\"exec\"]\n[gate]\ndialect = \"goclaw\"\ntimeout_secs = 5\n[sandbox]\nmode = \"off\"",
        )
        .unwrap();
        assert_eq!(shared["tools"]["deny"][0].as_str(), Some("exec"));
        assert_eq!(shared["gate"].as_table().map(Table::len), Some(1), "{shared}");
        assert_eq!(others, ["[gate] timeout_secs", "[sandbox]"]);
        assert!(split("[tools\n").unwrap_err().starts_with("not TOML"));
    }

    #[test]
    fn a_stored_section_replaces_the_files_one_whole() {
        let mut merged: Table = toml::from_str(
            "[tools]\nallow = [\"*\"]\ndeny = [\"web_fetch\"]\n[gate]\ntimeout_secs = 9\ndialect = \"x\"",
        )
        .unwrap();
        let shared: Table = toml::from_str("[tools]\ndeny = [\"exec\"]\n[gate]\ndialect = \"goclaw\"").unwrap();
        overlay(&mut merged, &shared);
        assert_eq!(merged["tools"].as_table().map(|t| t.len()), Some(1), "the file's allow is gone: {merged}");
        assert_eq!(merged["gate"]["timeout_secs"].as_integer(), Some(9), "a node's own [gate] keys stay");
        assert_eq!(merged["gate"]["dialect"].as_str(), Some("goclaw"));
        let mut untouched = merged.clone();
        overlay(&mut untouched, &Table::new());
        assert_eq!(untouched, merged, "nothing stored: the files alone");
    }

    #[test]
    fn a_policy_that_does_not_compile_or_an_unknown_dialect_is_refused() {
        let config = |text: &str| toml::from_str::<Config>(text).unwrap();
        assert!(check(&config("[tools]\ndeny = [\"exec\"]")).is_ok());
        let bad = check(&config("[tools]\ndeny = [\"exec(\"]")).unwrap_err();
        assert!(bad.contains("policy does not compile") && bad.contains("exec("), "{bad}");
        assert!(check(&config("[gate]\ndialect = \"nope\"")).is_err());
    }
}
