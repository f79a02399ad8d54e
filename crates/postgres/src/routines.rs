//! [`RoutineStore`] on PostgreSQL: routines, their fires, the scheduler lease and seen webhook
//! signatures, shared by every node, with the rules of SQLite's (`toolgate-store`'s
//! `routines.rs`).
//!
//! What several nodes add, and how it holds here:
//! - a fire is claimed by its unique (routine, scheduled instant) key (`INSERT ... ON CONFLICT
//!   DO NOTHING`), after the conditional move of the routine's `next_fire_ms`: a second claimer
//!   on any node waits for the first's row lock, then matches nothing, so one fire never runs
//!   twice;
//! - one scheduler at a time holds the lease, a row with an expiry taken or renewed by one
//!   atomic statement (`scheduler_lease`);
//! - a webhook signature is recorded by one statement that inserts it, or takes over an expired
//!   record, or does nothing: of two nodes receiving one request, one accepts it.
//!
//! Times are the callers' wall clocks, as in SQLite (the lease's expiry too): nodes' clocks must
//! agree to well within the lease's lifetime (seconds; NTP gives milliseconds). A node whose
//! clock runs ahead takes over a live lease early; one behind keeps an expired one late.

use deadpool_postgres::GenericClient;
use tokio_postgres::Row;
use toolgate_store::{RoutineFire, RoutineStore, StoreError, StoredRoutine};

use crate::PgStore;
use crate::error::PgError;

const COLUMNS: &str = "name, owner, spec, enabled, next_fire_ms, last_fire_ms, created_ms, updated_ms, grants_agent";
const FIRE_COLUMNS: &str = "routine, scheduled_ms, fired_ms, trigger_kind, status, job_id, detail";
const SET_FIRE: &str = "UPDATE routine_fires SET status = $3, job_id = COALESCE($4, job_id),
    detail = COALESCE($5, detail) WHERE routine = $1 AND scheduled_ms = $2";

fn routine(r: &Row) -> Result<StoredRoutine, PgError> {
    let spec: String = r.try_get(2)?;
    let spec = serde_json::from_str(&spec).map_err(|e| PgError::Data(format!("a routine's definition: {e}")))?;
    Ok(StoredRoutine {
        name: r.try_get(0)?,
        owner: r.try_get(1)?,
        spec,
        enabled: r.try_get(3)?,
        next_fire_ms: r.try_get(4)?,
        last_fire_ms: r.try_get(5)?,
        created_ms: r.try_get(6)?,
        updated_ms: r.try_get(7)?,
        grants_agent: r.try_get(8)?,
    })
}

fn fire(r: &Row) -> Result<RoutineFire, PgError> {
    Ok(RoutineFire {
        routine: r.try_get(0)?,
        scheduled_ms: r.try_get(1)?,
        fired_ms: r.try_get(2)?,
        trigger: r.try_get(3)?,
        status: r.try_get(4)?,
        job_id: r.try_get(5)?,
        detail: r.try_get(6)?,
    })
}

/// One claim inside the caller's transaction: the advance (when asked, only from the expected
/// `next_fire_ms`), then the fire's row under its unique key. `false` when either loses; the
/// caller then rolls back what this wrote.
async fn claim_one(
    c: &impl GenericClient,
    f: &RoutineFire,
    advance: Option<(i64, Option<i64>)>,
) -> Result<bool, PgError> {
    if let Some((expected, next)) = advance {
        let moved = c
            .execute(
                "UPDATE routines SET next_fire_ms = $3, last_fire_ms = $4 WHERE name = $1 AND next_fire_ms = $2",
                &[&f.routine, &expected, &next, &f.scheduled_ms],
            )
            .await?;
        if moved == 0 {
            return Ok(false);
        }
    } else {
        c.execute("UPDATE routines SET last_fire_ms = $2 WHERE name = $1", &[&f.routine, &f.scheduled_ms]).await?;
    }
    let sql = format!(
        "INSERT INTO routine_fires ({FIRE_COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, $7)
         ON CONFLICT (routine, scheduled_ms) DO NOTHING"
    );
    let inserted = c
        .execute(sql.as_str(), &[&f.routine, &f.scheduled_ms, &f.fired_ms, &f.trigger, &f.status, &f.job_id, &f.detail])
        .await?;
    Ok(inserted > 0)
}

impl RoutineStore for PgStore {
    fn routine_insert(&self, r: &StoredRoutine) -> Result<bool, StoreError> {
        let r = r.clone();
        self.run("creating a routine", move |c| async move {
            let sql = format!(
                "INSERT INTO routines ({COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
                 ON CONFLICT (name) DO NOTHING"
            );
            let n = c
                .execute(
                    sql.as_str(),
                    &[
                        &r.name,
                        &r.owner,
                        &r.spec.to_string(),
                        &r.enabled,
                        &r.next_fire_ms,
                        &r.last_fire_ms,
                        &r.created_ms,
                        &r.updated_ms,
                        &r.grants_agent,
                    ],
                )
                .await?;
            Ok(n > 0)
        })
    }

    fn routine_update(&self, r: &StoredRoutine) -> Result<bool, StoreError> {
        let r = r.clone();
        self.run("updating a routine", move |c| async move {
            let n = c
                .execute(
                    "UPDATE routines SET owner = $2, spec = $3, enabled = $4, next_fire_ms = $5, last_fire_ms = $6,
                     updated_ms = $7, grants_agent = $8 WHERE name = $1",
                    &[
                        &r.name,
                        &r.owner,
                        &r.spec.to_string(),
                        &r.enabled,
                        &r.next_fire_ms,
                        &r.last_fire_ms,
                        &r.updated_ms,
                        &r.grants_agent,
                    ],
                )
                .await?;
            Ok(n > 0)
        })
    }

    fn routine_get(&self, name: &str) -> Result<Option<StoredRoutine>, StoreError> {
        let name = name.to_owned();
        self.run("reading a routine", move |c| async move {
            let sql = format!("SELECT {COLUMNS} FROM routines WHERE name = $1");
            c.query_opt(sql.as_str(), &[&name]).await?.as_ref().map(routine).transpose()
        })
    }

    fn routine_list(&self, owner: Option<&str>) -> Result<Vec<StoredRoutine>, StoreError> {
        let owner = owner.map(str::to_owned);
        self.run("listing routines", move |c| async move {
            let sql = format!("SELECT {COLUMNS} FROM routines WHERE $1::text IS NULL OR owner = $1 ORDER BY name");
            c.query(sql.as_str(), &[&owner]).await?.iter().map(routine).collect()
        })
    }

    fn routine_delete(&self, name: &str) -> Result<bool, StoreError> {
        let name = name.to_owned();
        self.run("deleting a routine", move |c| async move {
            Ok(c.execute("DELETE FROM routines WHERE name = $1", &[&name]).await? > 0)
        })
    }

    fn routines_due(&self, now_ms: i64, limit: usize) -> Result<Vec<StoredRoutine>, StoreError> {
        let limit = limit as i64;
        self.run("finding due routines", move |c| async move {
            let sql = format!(
                "SELECT {COLUMNS} FROM routines WHERE enabled AND next_fire_ms <= $1
                 ORDER BY next_fire_ms, name LIMIT $2"
            );
            c.query(sql.as_str(), &[&now_ms, &limit]).await?.iter().map(routine).collect()
        })
    }

    fn routine_fire_claim(&self, f: &RoutineFire, advance: Option<(i64, Option<i64>)>) -> Result<bool, StoreError> {
        let f = f.clone();
        self.run("claiming a routine fire", move |mut c| async move {
            let tx = c.transaction().await?;
            if !claim_one(&tx, &f, advance).await? {
                tx.rollback().await?;
                return Ok(false);
            }
            tx.commit().await?;
            Ok(true)
        })
    }

    fn routine_fires_claim(
        &self,
        claims: &[(RoutineFire, Option<(i64, Option<i64>)>)],
    ) -> Result<Vec<bool>, StoreError> {
        if claims.is_empty() {
            return Ok(Vec::new());
        }
        let claims = claims.to_vec();
        self.run("claiming routine fires", move |mut c| async move {
            let mut tx = c.transaction().await?;
            let mut won = Vec::with_capacity(claims.len());
            for (f, advance) in &claims {
                // A savepoint per fire: a fire that loses (taken, or next_fire moved) leaves
                // nothing behind, and the others still commit.
                let sp = tx.savepoint("fire").await?;
                let ok = claim_one(&sp, f, *advance).await?;
                if ok {
                    sp.commit().await?;
                } else {
                    sp.rollback().await?;
                }
                won.push(ok);
            }
            tx.commit().await?;
            Ok(won)
        })
    }

    fn routine_fires_recent(&self, names: &[&str], limit: usize) -> Result<Vec<Vec<RoutineFire>>, StoreError> {
        if names.is_empty() {
            return Ok(Vec::new());
        }
        let names: Vec<String> = names.iter().map(|n| (*n).to_owned()).collect();
        let limit = limit as i64;
        self.run("reading routines' recent fires", move |c| async move {
            // One statement: one snapshot for the whole batch.
            let sql = format!(
                "SELECT {FIRE_COLUMNS} FROM (
                     SELECT {FIRE_COLUMNS},
                            row_number() OVER (PARTITION BY routine ORDER BY scheduled_ms DESC) AS nth
                     FROM routine_fires WHERE routine = ANY($1)) recent
                 WHERE nth <= $2 ORDER BY routine, scheduled_ms DESC"
            );
            let rows = c.query(sql.as_str(), &[&names, &limit]).await?;
            let mut out: Vec<Vec<RoutineFire>> = vec![Vec::new(); names.len()];
            for row in &rows {
                let f = fire(row)?;
                // A name asked twice gets its fires twice, as SQLite's answer has them.
                for (i, name) in names.iter().enumerate() {
                    if *name == f.routine {
                        out[i].push(f.clone());
                    }
                }
            }
            Ok(out)
        })
    }

    fn routine_fires_set(&self, fires: &[RoutineFire]) -> Result<(), StoreError> {
        if fires.is_empty() {
            return Ok(());
        }
        let fires = fires.to_vec();
        self.run("recording routine fires", move |mut c| async move {
            let tx = c.transaction().await?;
            let stmt = tx.prepare(SET_FIRE).await?;
            for f in &fires {
                tx.execute(&stmt, &[&f.routine, &f.scheduled_ms, &f.status, &f.job_id, &f.detail]).await?;
            }
            tx.commit().await?;
            Ok(())
        })
    }

    fn routine_advance(&self, name: &str, expected: Option<i64>, next: Option<i64>) -> Result<bool, StoreError> {
        let name = name.to_owned();
        self.run("advancing a routine", move |c| async move {
            let n = c
                .execute(
                    "UPDATE routines SET next_fire_ms = $3 WHERE name = $1 AND next_fire_ms IS NOT DISTINCT FROM $2",
                    &[&name, &expected, &next],
                )
                .await?;
            Ok(n > 0)
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
        let (routine, status) = (routine.to_owned(), status.to_owned());
        let (job_id, detail) = (job_id.map(str::to_owned), detail.map(str::to_owned));
        self.run("recording a routine fire", move |c| async move {
            c.execute(SET_FIRE, &[&routine, &scheduled_ms, &status, &job_id, &detail]).await?;
            Ok(())
        })
    }

    fn routine_fires(&self, routine: &str, limit: usize) -> Result<Vec<RoutineFire>, StoreError> {
        let (routine, limit) = (routine.to_owned(), limit as i64);
        self.run("reading a routine's fires", move |c| async move {
            let sql = format!(
                "SELECT {FIRE_COLUMNS} FROM routine_fires WHERE routine = $1 ORDER BY scheduled_ms DESC LIMIT $2"
            );
            c.query(sql.as_str(), &[&routine, &limit]).await?.iter().map(fire).collect()
        })
    }

    fn routine_fires_in(&self, status: &str, limit: usize) -> Result<Vec<RoutineFire>, StoreError> {
        let (status, limit) = (status.to_owned(), limit as i64);
        self.run("reading routine fires", move |c| async move {
            let sql = format!("SELECT {FIRE_COLUMNS} FROM routine_fires WHERE status = $1 ORDER BY fired_ms LIMIT $2");
            c.query(sql.as_str(), &[&status, &limit]).await?.iter().map(fire).collect()
        })
    }

    fn routine_fires_since(&self, since_ms: i64) -> Result<u64, StoreError> {
        self.run("counting routine fires", move |c| async move {
            let n: i64 = c
                .query_one(
                    "SELECT COUNT(*) FROM routine_fires WHERE fired_ms >= $1 AND status != 'skipped'",
                    &[&since_ms],
                )
                .await?
                .try_get(0)?;
            Ok(n.max(0) as u64)
        })
    }

    fn scheduler_lease(&self, name: &str, holder: &str, now_ms: i64, ttl_ms: i64) -> Result<bool, StoreError> {
        let (name, holder) = (name.to_owned(), holder.to_owned());
        self.run("taking the scheduler lease", move |c| async move {
            // A row with an expiry, not a session advisory lock: the pool hands connections
            // from call to call (a session lock would be held by whichever call had that
            // connection, and dropped or kept by accident when the pool recycles it), and a
            // leader whose node dies, or is cut off from the database while its connection
            // lingers, must lose the lease after the TTL rather than when the server notices.
            // One statement: insert, or take over an expired lease, or renew one's own; two
            // nodes at once serialize on the row, and the second's condition is checked against
            // what the first wrote. Expiry is compared with the caller's clock (`now_ms`).
            let n = c
                .execute(
                    "INSERT INTO scheduler_leases (name, holder, expires_ms) VALUES ($1, $2, $3)
                     ON CONFLICT (name) DO UPDATE SET holder = excluded.holder, expires_ms = excluded.expires_ms
                     WHERE scheduler_leases.holder = excluded.holder OR scheduler_leases.expires_ms <= $4",
                    &[&name, &holder, &now_ms.saturating_add(ttl_ms), &now_ms],
                )
                .await?;
            Ok(n > 0)
        })
    }

    fn scheduler_release(&self, name: &str, holder: &str) -> Result<(), StoreError> {
        let (name, holder) = (name.to_owned(), holder.to_owned());
        self.run("releasing the scheduler lease", move |c| async move {
            c.execute("DELETE FROM scheduler_leases WHERE name = $1 AND holder = $2", &[&name, &holder]).await?;
            Ok(())
        })
    }

    fn webhook_seen(&self, routine: &str, key: &str, now_ms: i64, expires_ms: i64) -> Result<bool, StoreError> {
        let (routine, key) = (routine.to_owned(), key.to_owned());
        self.run("recording a webhook signature", move |c| async move {
            c.execute("DELETE FROM webhook_seen WHERE expires_ms <= $1", &[&now_ms]).await?;
            // One statement decides: a new key, or an expired record taken over, is accepted; a
            // live one (or one another node records at this moment) is a replay.
            let n = c
                .execute(
                    "INSERT INTO webhook_seen (routine, key, expires_ms) VALUES ($1, $2, $3)
                     ON CONFLICT (routine, key) DO UPDATE SET expires_ms = excluded.expires_ms
                     WHERE webhook_seen.expires_ms <= $4",
                    &[&routine, &key, &expires_ms, &now_ms],
                )
                .await?;
            Ok(n > 0)
        })
    }
}
