//! The revisions of identities and grants, kept in memory while this node hears every change.
//! The gateway reads both on every call (its caches of keys and grants are keyed by them); a
//! round trip to PostgreSQL for each nearly doubled a call's cost.
//!
//! Where the values in memory come from, and why they are exact enough:
//! - **Other nodes' changes**: the revision trigger notifies `toolgate_revisions` with
//!   `name:value` at commit; the listener (`listen.rs`) takes it as a hint only and puts memory
//!   out of step, so the next read asks the table (whose values only grow, kept with
//!   `fetch_max`) and primes again. A key revoked on node B stops working on node A when the
//!   notification arrives: milliseconds. (The payload's value is not trusted: see
//!   [`Revisions::notified`].)
//! - **Notifications are lossy**, so memory answers only while it is *in step*: the listener
//!   is subscribed and every revision was read after its `LISTEN` (primed). Losing the
//!   connection (or its heartbeat going unanswered, `listen.rs`) ends that at once, and until
//!   the next priming every read goes to the database, as without the memory.
//! - **This node's own changes** must show at once (`revoke key`, then a call with it fails),
//!   even before their notification: every write that may raise a revision ends with
//!   [`Revisions::out_of_step`], so the next read goes to the database (and primes again).
//!
//! Races are settled by `epoch`: odd means in step. Priming reads the epoch *before* it reads
//! the database and marks it in step only if the epoch has not moved since (compare and swap):
//! a write that committed after that read moved it on its way out, so a priming that may have
//! missed the write fails and the next read looks again. A read answered from memory while a
//! write is still under way is ordered before that write, as it would be with the database.

use std::collections::HashMap;
use std::sync::atomic::AtomicBool;
use std::sync::atomic::Ordering::SeqCst;
use std::sync::atomic::{AtomicI64, AtomicU64};

use crate::error::PgError;

/// The channel the revision trigger notifies (migration "revisions notify").
pub(crate) const CHANNEL: &str = "toolgate_revisions";

/// The revisions kept in memory, by name (rows of the `revisions` table; `config`: the shared
/// configuration, `shared_config.rs`).
const NAMES: [&str; 3] = ["identity", "grants", "config"];

/// The revisions in memory and whether they may be used.
#[derive(Debug, Default)]
pub(crate) struct Revisions {
    values: [AtomicI64; NAMES.len()],
    /// Odd: the values are in step (see the module's docs).
    epoch: AtomicU64,
    /// The listener's connection is up and has issued its `LISTEN`.
    subscribed: AtomicBool,
    /// Reads answered by the database rather than memory.
    queries: AtomicU64,
}

fn slot(name: &str) -> Option<usize> {
    NAMES.iter().position(|n| *n == name)
}

impl Revisions {
    /// `name`'s value from memory, if memory is in step.
    pub(crate) fn cached(&self, name: &str) -> Option<i64> {
        let slot = slot(name)?;
        self.in_step().then(|| self.values[slot].load(SeqCst))
    }

    /// Whether reads are answered from memory.
    pub(crate) fn in_step(&self) -> bool {
        self.epoch.load(SeqCst) % 2 == 1
    }

    /// Raises `name` to at least `value` (from a notification or a read of the table).
    pub(crate) fn raise(&self, name: &str, value: i64) {
        if let Some(slot) = slot(name) {
            self.values[slot].fetch_max(value, SeqCst);
        }
    }

    /// Raises every revision read from the table.
    pub(crate) fn raise_all(&self, read: &HashMap<String, i64>) {
        for (name, value) in read {
            self.raise(name, *value);
        }
    }

    /// A notification says a revision changed: memory leaves step, and the next read asks the
    /// table (and primes again). Its value is not taken: anyone who may `NOTIFY` on the
    /// database could send a huge one, which `fetch_max` would keep, so that no later change
    /// moved the revision and the gateway's caches of revoked keys and grants stayed valid until
    /// a restart. The cost is one read per change per node.
    pub(crate) fn notified(&self, payload: &str) {
        if payload.split_once(':').and_then(|(name, _)| slot(name)).is_none() {
            tracing::debug!("PostgreSQL {CHANNEL}: a notification that names no known revision; reading them anyway");
        }
        self.out_of_step();
    }

    /// The epoch a priming starts from: read it before reading the table.
    pub(crate) fn epoch(&self) -> u64 {
        self.epoch.load(SeqCst)
    }

    /// Marks memory in step after a priming that started at `epoch`, unless something moved
    /// it since (the read may have missed a change). Whether it did.
    pub(crate) fn primed(&self, epoch: u64) -> bool {
        epoch.is_multiple_of(2) && self.epoch.compare_exchange(epoch, epoch + 1, SeqCst, SeqCst).is_ok()
    }

    /// Stops answering from memory until the next priming, and fails any priming under way.
    pub(crate) fn out_of_step(&self) {
        let _ = self.epoch.fetch_update(SeqCst, SeqCst, |e| Some(if e % 2 == 1 { e + 1 } else { e + 2 }));
    }

    /// Records whether the listener is subscribed (a read of the table may then prime).
    pub(crate) fn set_subscribed(&self, subscribed: bool) {
        self.subscribed.store(subscribed, SeqCst);
    }

    /// Whether the listener is subscribed.
    pub(crate) fn subscribed(&self) -> bool {
        self.subscribed.load(SeqCst)
    }

    /// Counts a read the database answered.
    pub(crate) fn counted_query(&self) {
        self.queries.fetch_add(1, SeqCst);
    }

    /// Reads the database answered.
    pub(crate) fn queries(&self) -> u64 {
        self.queries.load(SeqCst)
    }
}

/// Every revision in the table, by name.
pub(crate) async fn read_all(client: &tokio_postgres::Client) -> Result<HashMap<String, i64>, PgError> {
    let rows = client.query("SELECT name, value FROM revisions", &[]).await?;
    rows.iter().map(|r| Ok((r.try_get(0)?, r.try_get(1)?))).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_priming_that_started_before_a_write_does_not_count() {
        let r = Revisions::default();
        assert_eq!(r.cached("identity"), None, "nothing is in step before the first priming");
        let before = r.epoch();
        r.out_of_step(); // a write committed after the priming's read
        assert!(!r.primed(before));
        assert_eq!(r.cached("identity"), None);
        let after = r.epoch();
        r.raise("identity", 3);
        assert!(r.primed(after));
        assert_eq!(r.cached("identity"), Some(3));
        assert!(!r.primed(after), "an epoch primes once");
        r.out_of_step();
        assert_eq!(r.cached("identity"), None);
    }

    #[test]
    fn values_only_grow_and_any_notification_sends_reads_to_the_table() {
        let r = Revisions::default();
        r.raise("grants", 7);
        r.raise("grants", 5);
        assert!(r.primed(r.epoch()));
        assert_eq!(r.cached("grants"), Some(7), "a revision never goes back");
        assert_eq!(r.cached("other"), None, "only the revisions kept are answered from memory");
        // A forged value is never taken: every notification, well formed or not, only puts
        // memory out of step until the next read of the table primes it.
        for payload in ["identity:9223372036854775000", "grants", "other:9", ""] {
            r.notified(payload);
            assert_eq!(r.cached("identity"), None, "{payload:?}");
            assert!(r.primed(r.epoch()), "the next read primes again");
        }
        assert_eq!(r.cached("identity"), Some(0), "the forged value was not kept");
    }
}
