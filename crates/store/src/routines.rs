//! Routines (`toolgate-automation`'s scheduler): the [`RoutineStore`] trait and its SQLite
//! implementation on [`Store`] (tables `routines`, `routine_fires`, `scheduler_leases`,
//! `webhook_seen`; their migration in `db.rs`).
//!
//! The store keeps a routine's definition as JSON it does not interpret; what it owns is the
//! bookkeeping that must hold across processes: `next_fire_ms` and `last_fire_ms` (a listing
//! reads them and never advances them), one row per fire keyed by (routine, scheduled instant)
//! so that one fire never runs twice, whichever process or node claims it, the scheduler lease
//! (one scheduler per workspace), and the webhook signatures already seen (replays refused).
//! Times are wall-clock Unix milliseconds from the caller.

use std::fmt::Debug;

use rusqlite::{OptionalExtension, TransactionBehavior};
use serde::{Deserialize, Serialize};

use crate::error::Context;
use crate::{Store, StoreError};

/// A stored routine.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StoredRoutine {
    /// Its name, unique in the database.
    pub name: String,
    /// The user it runs as.
    pub owner: String,
    /// The definition (trigger, schedule, time zone, prompt, action...), as the automation
    /// family writes it.
    pub spec: serde_json::Value,
    /// Whether it fires.
    pub enabled: bool,
    /// The next scheduled instant (cron routines), Unix milliseconds.
    pub next_fire_ms: Option<i64>,
    /// The scheduled instant of the last fire, Unix milliseconds.
    pub last_fire_ms: Option<i64>,
    /// When it was created.
    pub created_ms: i64,
    /// When it was last changed.
    pub updated_ms: i64,
    /// The team gateway principal it acts for, when a call under a gateway's grants made it
    /// (or last changed it): the agent that call acted as (with `owner`, the user). Each fire
    /// is held to that principal's grants as they are then. `None`: made outside a gateway's
    /// grants (the local user, the CLI).
    #[serde(default)]
    pub grants_agent: Option<String>,
}

/// One fire of a routine: a claimed scheduled instant and what became of it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RoutineFire {
    /// The routine.
    pub routine: String,
    /// The instant it is for (for a cron trigger the schedule's; for the others, when it was
    /// triggered), Unix milliseconds. With `routine`, the fire's unique key.
    pub scheduled_ms: i64,
    /// When it was claimed.
    pub fired_ms: i64,
    /// What triggered it: `cron`, `event`, `webhook`, `manual`, `catch_up`.
    pub trigger: String,
    /// `claimed` (written, its job not yet started), `started`, `skipped`, `failed`.
    pub status: String,
    /// The job that runs it, once started.
    pub job_id: Option<String>,
    /// Why it was skipped or failed; the event that triggered it.
    pub detail: Option<String>,
}

/// A fire to claim and, when it is a cron fire, the move of its routine's `next_fire_ms`
/// (expected, next): what [`RoutineStore::routine_fires_claim`] takes.
pub type FireClaim = (RoutineFire, Option<(i64, Option<i64>)>);

/// Routines, their fires, the scheduler lease and seen webhook signatures.
pub trait RoutineStore: Send + Sync + Debug {
    /// Inserts `routine`; returns `false` (and writes nothing) when one of that name exists.
    fn routine_insert(&self, routine: &StoredRoutine) -> Result<bool, StoreError>;

    /// Replaces the routine of `routine.name`; returns `false` when there is none.
    fn routine_update(&self, routine: &StoredRoutine) -> Result<bool, StoreError>;

    /// The routine `name`.
    fn routine_get(&self, name: &str) -> Result<Option<StoredRoutine>, StoreError>;

    /// Every routine, or those of `owner`, by name. Reads only.
    fn routine_list(&self, owner: Option<&str>) -> Result<Vec<StoredRoutine>, StoreError>;

    /// Deletes the routine `name` (its fires stay, for history); returns whether it existed.
    fn routine_delete(&self, name: &str) -> Result<bool, StoreError>;

    /// Enabled routines whose `next_fire_ms` is at or before `now_ms`, earliest first, at most
    /// `limit`.
    fn routines_due(&self, now_ms: i64, limit: usize) -> Result<Vec<StoredRoutine>, StoreError>;

    /// Claims `fire` atomically: inserts it unless a fire with its (routine, scheduled
    /// instant) exists, and, when `advance` is `Some((expected, next))`, moves the routine's
    /// `next_fire_ms` from `expected` to `next` and sets `last_fire_ms` to the fire's instant.
    /// Returns `false`, writing nothing, when the fire exists or `next_fire_ms` is no longer
    /// `expected` (another scheduler got there first).
    fn routine_fire_claim(&self, fire: &RoutineFire, advance: Option<(i64, Option<i64>)>) -> Result<bool, StoreError>;

    /// [`RoutineStore::routine_fire_claim`] for many fires in ONE transaction (a scheduler tick's
    /// due fires): each is claimed or not on its own terms, as if claimed alone, and the answer
    /// says which, in order. One commit instead of one per fire is what lets 1,000 routines due
    /// at one instant start within milliseconds of it.
    fn routine_fires_claim(&self, claims: &[FireClaim]) -> Result<Vec<bool>, StoreError>;

    /// The last `limit` fires of each routine of `names`, newest first, in the order of `names`
    /// (the overlap and cooldown checks of a tick's fires, in one read).
    fn routine_fires_recent(&self, names: &[&str], limit: usize) -> Result<Vec<Vec<RoutineFire>>, StoreError>;

    /// [`RoutineStore::routine_fire_set`] for many fires in one transaction: each fire's
    /// `status`, `job_id` and `detail` (the last two kept when `None`), matched by its routine
    /// and scheduled instant; the other fields are not written.
    fn routine_fires_set(&self, fires: &[RoutineFire]) -> Result<(), StoreError>;

    /// Moves `name`'s `next_fire_ms` from `expected` to `next` without a fire (a missed fire
    /// skipped); returns whether it moved.
    fn routine_advance(&self, name: &str, expected: Option<i64>, next: Option<i64>) -> Result<bool, StoreError>;

    /// Sets a fire's status, job and detail.
    fn routine_fire_set(
        &self,
        routine: &str,
        scheduled_ms: i64,
        status: &str,
        job_id: Option<&str>,
        detail: Option<&str>,
    ) -> Result<(), StoreError>;

    /// The last `limit` fires of `routine`, newest first.
    fn routine_fires(&self, routine: &str, limit: usize) -> Result<Vec<RoutineFire>, StoreError>;

    /// Fires of any routine in `status`, oldest first (`claimed` ones whose job never started,
    /// after a crash).
    fn routine_fires_in(&self, status: &str, limit: usize) -> Result<Vec<RoutineFire>, StoreError>;

    /// How many fires (of every routine) were claimed at or after `since_ms`, skipped ones not
    /// counted: the global cap's count.
    fn routine_fires_since(&self, since_ms: i64) -> Result<u64, StoreError>;

    /// Takes or renews the lease `name` for `holder` until `now_ms + ttl_ms`: when it is free,
    /// expired or already `holder`'s. Returns whether `holder` holds it now.
    fn scheduler_lease(&self, name: &str, holder: &str, now_ms: i64, ttl_ms: i64) -> Result<bool, StoreError>;

    /// Gives the lease up if `holder` holds it.
    fn scheduler_release(&self, name: &str, holder: &str) -> Result<(), StoreError>;

    /// Records that `routine`'s webhook accepted the request identified by `key` (its
    /// signature); returns `false` when it was already recorded and not expired (a replay).
    /// Records past `expires_ms` are swept on the way.
    fn webhook_seen(&self, routine: &str, key: &str, now_ms: i64, expires_ms: i64) -> Result<bool, StoreError>;
}

const COLUMNS: &str = "name, owner, spec, enabled, next_fire_ms, last_fire_ms, created_ms, updated_ms, grants_agent";
const FIRE_COLUMNS: &str = "routine, scheduled_ms, fired_ms, trigger, status, job_id, detail";
const SET_FIRE: &str = "UPDATE routine_fires SET status = ?3, job_id = COALESCE(?4, job_id),
    detail = COALESCE(?5, detail) WHERE routine = ?1 AND scheduled_ms = ?2";

/// One claim inside the caller's transaction: the advance (when asked, only from the expected
/// `next_fire_ms`), then the fire's row under its unique key. `false` when either loses; the
/// caller then rolls back what this wrote.
fn claim_one(
    conn: &rusqlite::Connection,
    f: &RoutineFire,
    advance: Option<(i64, Option<i64>)>,
) -> rusqlite::Result<bool> {
    if let Some((expected, next)) = advance {
        let moved = conn
            .prepare_cached(
                "UPDATE routines SET next_fire_ms = ?3, last_fire_ms = ?4 WHERE name = ?1 AND next_fire_ms = ?2",
            )?
            .execute(rusqlite::params![f.routine, expected, next, f.scheduled_ms])?;
        if moved == 0 {
            return Ok(false);
        }
    } else {
        conn.prepare_cached("UPDATE routines SET last_fire_ms = ?2 WHERE name = ?1")?
            .execute(rusqlite::params![f.routine, f.scheduled_ms])?;
    }
    let inserted = conn
        .prepare_cached(&format!(
            "INSERT OR IGNORE INTO routine_fires ({FIRE_COLUMNS}) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)"
        ))?
        .execute(rusqlite::params![f.routine, f.scheduled_ms, f.fired_ms, f.trigger, f.status, f.job_id, f.detail])?;
    Ok(inserted > 0)
}

fn routine_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<StoredRoutine> {
    let spec: String = r.get(2)?;
    let spec = serde_json::from_str(&spec)
        .map_err(|e| rusqlite::Error::FromSqlConversionFailure(2, rusqlite::types::Type::Text, Box::new(e)))?;
    Ok(StoredRoutine {
        name: r.get(0)?,
        owner: r.get(1)?,
        spec,
        enabled: r.get(3)?,
        next_fire_ms: r.get(4)?,
        last_fire_ms: r.get(5)?,
        created_ms: r.get(6)?,
        updated_ms: r.get(7)?,
        grants_agent: r.get(8)?,
    })
}

fn fire_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<RoutineFire> {
    Ok(RoutineFire {
        routine: r.get(0)?,
        scheduled_ms: r.get(1)?,
        fired_ms: r.get(2)?,
        trigger: r.get(3)?,
        status: r.get(4)?,
        job_id: r.get(5)?,
        detail: r.get(6)?,
    })
}

impl RoutineStore for Store {
    fn routine_insert(&self, r: &StoredRoutine) -> Result<bool, StoreError> {
        self.with(|conn| {
            conn.execute(
                &format!("INSERT OR IGNORE INTO routines ({COLUMNS}) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)"),
                rusqlite::params![
                    r.name,
                    r.owner,
                    r.spec.to_string(),
                    r.enabled,
                    r.next_fire_ms,
                    r.last_fire_ms,
                    r.created_ms,
                    r.updated_ms,
                    r.grants_agent
                ],
            )
            .map(|n| n > 0)
            .doing("creating a routine")
        })
    }

    fn routine_update(&self, r: &StoredRoutine) -> Result<bool, StoreError> {
        self.with(|conn| {
            conn.execute(
                "UPDATE routines SET owner = ?2, spec = ?3, enabled = ?4, next_fire_ms = ?5, last_fire_ms = ?6,
                 updated_ms = ?7, grants_agent = ?8 WHERE name = ?1",
                rusqlite::params![
                    r.name,
                    r.owner,
                    r.spec.to_string(),
                    r.enabled,
                    r.next_fire_ms,
                    r.last_fire_ms,
                    r.updated_ms,
                    r.grants_agent
                ],
            )
            .map(|n| n > 0)
            .doing("updating a routine")
        })
    }

    fn routine_get(&self, name: &str) -> Result<Option<StoredRoutine>, StoreError> {
        self.with(|conn| {
            conn.query_row(&format!("SELECT {COLUMNS} FROM routines WHERE name = ?1"), [name], routine_row)
                .optional()
                .doing("reading a routine")
        })
    }

    fn routine_list(&self, owner: Option<&str>) -> Result<Vec<StoredRoutine>, StoreError> {
        const DOING: &str = "listing routines";
        self.with(|conn| {
            let mut stmt = conn
                .prepare_cached(&format!("SELECT {COLUMNS} FROM routines WHERE ?1 IS NULL OR owner = ?1 ORDER BY name"))
                .doing(DOING)?;
            let rows = stmt.query_map([owner], routine_row).doing(DOING)?;
            rows.collect::<Result<Vec<_>, _>>().doing(DOING)
        })
    }

    fn routine_delete(&self, name: &str) -> Result<bool, StoreError> {
        self.with(|conn| {
            conn.execute("DELETE FROM routines WHERE name = ?1", [name]).map(|n| n > 0).doing("deleting a routine")
        })
    }

    fn routines_due(&self, now_ms: i64, limit: usize) -> Result<Vec<StoredRoutine>, StoreError> {
        const DOING: &str = "finding due routines";
        self.with(|conn| {
            let mut stmt = conn
                .prepare_cached(&format!(
                    "SELECT {COLUMNS} FROM routines WHERE enabled = 1 AND next_fire_ms <= ?1
                     ORDER BY next_fire_ms, name LIMIT ?2"
                ))
                .doing(DOING)?;
            let rows = stmt.query_map(rusqlite::params![now_ms, limit as i64], routine_row).doing(DOING)?;
            rows.collect::<Result<Vec<_>, _>>().doing(DOING)
        })
    }

    fn routine_fire_claim(&self, f: &RoutineFire, advance: Option<(i64, Option<i64>)>) -> Result<bool, StoreError> {
        const DOING: &str = "claiming a routine fire";
        self.with(|conn| {
            let tx = rusqlite::Transaction::new_unchecked(conn, TransactionBehavior::Immediate).doing(DOING)?;
            if !claim_one(&tx, f, advance).doing(DOING)? {
                // Dropping the transaction rolls a partial claim back.
                return Ok(false);
            }
            tx.commit().doing(DOING)?;
            Ok(true)
        })
    }

    fn routine_fires_claim(&self, claims: &[FireClaim]) -> Result<Vec<bool>, StoreError> {
        const DOING: &str = "claiming routine fires";
        if claims.is_empty() {
            return Ok(Vec::new());
        }
        self.with(|conn| {
            let mut tx = rusqlite::Transaction::new_unchecked(conn, TransactionBehavior::Immediate).doing(DOING)?;
            let mut won = Vec::with_capacity(claims.len());
            for (f, advance) in claims {
                // A savepoint per fire: a fire that loses (taken, or next_fire moved) leaves
                // nothing behind, and the others still commit.
                let sp = tx.savepoint().doing(DOING)?;
                let ok = claim_one(&sp, f, *advance).doing(DOING)?;
                if ok {
                    sp.commit().doing(DOING)?;
                }
                won.push(ok);
            }
            tx.commit().doing(DOING)?;
            Ok(won)
        })
    }

    fn routine_fires_recent(&self, names: &[&str], limit: usize) -> Result<Vec<Vec<RoutineFire>>, StoreError> {
        const DOING: &str = "reading routines' recent fires";
        if names.is_empty() {
            return Ok(Vec::new());
        }
        self.with(|conn| {
            // One read transaction: one snapshot for the whole batch, and no lock taken and
            // dropped per routine.
            let tx = rusqlite::Transaction::new_unchecked(conn, TransactionBehavior::Deferred).doing(DOING)?;
            let mut out = Vec::with_capacity(names.len());
            {
                let mut stmt = tx
                    .prepare_cached(&format!(
                        "SELECT {FIRE_COLUMNS} FROM routine_fires WHERE routine = ?1
                         ORDER BY scheduled_ms DESC LIMIT ?2"
                    ))
                    .doing(DOING)?;
                for name in names {
                    let rows = stmt.query_map(rusqlite::params![name, limit as i64], fire_row).doing(DOING)?;
                    out.push(rows.collect::<Result<Vec<_>, _>>().doing(DOING)?);
                }
            }
            tx.commit().doing(DOING)?;
            Ok(out)
        })
    }

    fn routine_fires_set(&self, fires: &[RoutineFire]) -> Result<(), StoreError> {
        const DOING: &str = "recording routine fires";
        if fires.is_empty() {
            return Ok(());
        }
        self.with(|conn| {
            let tx = rusqlite::Transaction::new_unchecked(conn, TransactionBehavior::Immediate).doing(DOING)?;
            {
                let mut stmt = tx.prepare_cached(SET_FIRE).doing(DOING)?;
                for f in fires {
                    stmt.execute(rusqlite::params![f.routine, f.scheduled_ms, f.status, f.job_id, f.detail])
                        .doing(DOING)?;
                }
            }
            tx.commit().doing(DOING)
        })
    }

    fn routine_advance(&self, name: &str, expected: Option<i64>, next: Option<i64>) -> Result<bool, StoreError> {
        self.with(|conn| {
            conn.execute(
                "UPDATE routines SET next_fire_ms = ?3 WHERE name = ?1 AND next_fire_ms IS ?2",
                rusqlite::params![name, expected, next],
            )
            .map(|n| n > 0)
            .doing("advancing a routine")
        })
    }

    fn routine_fire_set(
        &self,
        routine: &str,
        scheduled_ms: i64,
        status: &str,
        job_id: Option<&str>,
        detail: Option<&str>,
    ) -> Result<(), StoreError> {
        self.with(|conn| {
            conn.execute(SET_FIRE, rusqlite::params![routine, scheduled_ms, status, job_id, detail])
                .map(|_| ())
                .doing("recording a routine fire")
        })
    }

    fn routine_fires(&self, routine: &str, limit: usize) -> Result<Vec<RoutineFire>, StoreError> {
        const DOING: &str = "reading a routine's fires";
        self.with(|conn| {
            let mut stmt = conn
                .prepare_cached(&format!(
                    "SELECT {FIRE_COLUMNS} FROM routine_fires WHERE routine = ?1
                     ORDER BY scheduled_ms DESC LIMIT ?2"
                ))
                .doing(DOING)?;
            let rows = stmt.query_map(rusqlite::params![routine, limit as i64], fire_row).doing(DOING)?;
            rows.collect::<Result<Vec<_>, _>>().doing(DOING)
        })
    }

    fn routine_fires_in(&self, status: &str, limit: usize) -> Result<Vec<RoutineFire>, StoreError> {
        const DOING: &str = "reading routine fires";
        self.with(|conn| {
            let mut stmt = conn
                .prepare_cached(&format!(
                    "SELECT {FIRE_COLUMNS} FROM routine_fires WHERE status = ?1 ORDER BY fired_ms LIMIT ?2"
                ))
                .doing(DOING)?;
            let rows = stmt.query_map(rusqlite::params![status, limit as i64], fire_row).doing(DOING)?;
            rows.collect::<Result<Vec<_>, _>>().doing(DOING)
        })
    }

    fn routine_fires_since(&self, since_ms: i64) -> Result<u64, StoreError> {
        self.with(|conn| {
            conn.query_row(
                "SELECT COUNT(*) FROM routine_fires WHERE fired_ms >= ?1 AND status != 'skipped'",
                [since_ms],
                |r| r.get::<_, i64>(0),
            )
            .map(|n| n.max(0) as u64)
            .doing("counting routine fires")
        })
    }

    fn scheduler_lease(&self, name: &str, holder: &str, now_ms: i64, ttl_ms: i64) -> Result<bool, StoreError> {
        self.with(|conn| {
            // One statement: insert, or take over an expired lease, or renew one's own.
            conn.execute(
                "INSERT INTO scheduler_leases (name, holder, expires_ms) VALUES (?1, ?2, ?3)
                 ON CONFLICT (name) DO UPDATE SET holder = excluded.holder, expires_ms = excluded.expires_ms
                 WHERE scheduler_leases.holder = excluded.holder OR scheduler_leases.expires_ms <= ?4",
                rusqlite::params![name, holder, now_ms.saturating_add(ttl_ms), now_ms],
            )
            .map(|n| n > 0)
            .doing("taking the scheduler lease")
        })
    }

    fn scheduler_release(&self, name: &str, holder: &str) -> Result<(), StoreError> {
        self.with(|conn| {
            conn.execute("DELETE FROM scheduler_leases WHERE name = ?1 AND holder = ?2", [name, holder])
                .map(|_| ())
                .doing("releasing the scheduler lease")
        })
    }

    fn webhook_seen(&self, routine: &str, key: &str, now_ms: i64, expires_ms: i64) -> Result<bool, StoreError> {
        const DOING: &str = "recording a webhook signature";
        self.with(|conn| {
            conn.execute("DELETE FROM webhook_seen WHERE expires_ms <= ?1", [now_ms]).doing(DOING)?;
            conn.execute(
                "INSERT OR IGNORE INTO webhook_seen (routine, key, expires_ms) VALUES (?1, ?2, ?3)",
                rusqlite::params![routine, key, expires_ms],
            )
            .map(|n| n > 0)
            .doing(DOING)
        })
    }
}
