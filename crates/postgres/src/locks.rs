//! [`LockStore`] on PostgreSQL: path locks (`lock_paths`) every node honours, with the rules of
//! SQLite's (`toolgate-store`'s `locks.rs`). The nodes mount the same workspaces, so a lock
//! taken on node A must stop a clashing take on node B.
//!
//! Which locks clash is the caller's predicate, a plain closure that cannot go to the store's
//! thread where the queries run. So a take checks first, then writes only if what it checked
//! is still what is there: it reads the workspace's live locks of other owners, asks the
//! predicate on the caller's thread, and then, in one transaction holding the workspace's
//! advisory lock, reads them again and inserts only when they are unchanged. Every take of a
//! workspace holds that lock until it commits, so two takers never both pass the second read
//! (the later one sees the earlier one's lock and checks again). An advisory lock rather than a
//! row lock: a workspace with no lock yet has no row to lock, and a row lock cannot stop an
//! insert. Releases and sweeps only remove locks, which can never make a passed check wrong,
//! so they do not take it.

use deadpool_postgres::GenericClient;
use tokio_postgres::Row;
use toolgate_store::{LockOwner, LockStore, PathLock, StoreError};

use crate::PgStore;
use crate::error::PgError;

/// The first key of the advisory lock that serializes the takes of one workspace (the bytes of
/// "tlck"); the second is the hash of the workspace. Two workspaces whose hashes collide only
/// wait for each other.
const TAKE_LOCK: i32 = 0x746c_636b;

/// How many times a take checks again because another take or release changed the workspace's
/// locks in between, before it gives up with an error that says to try again.
const ATTEMPTS: usize = 64;

const COLUMNS: &str = "token, workspace, member, agent, session, globs, created_ms, expires_ms";

fn lock(r: &Row) -> Result<PathLock, PgError> {
    let globs: String = r.try_get(5)?;
    let globs = serde_json::from_str(&globs)
        .map_err(|e| PgError::Data(format!("a path lock's globs are not a JSON list of text: {e}")))?;
    Ok(PathLock {
        token: r.try_get(0)?,
        workspace: r.try_get(1)?,
        owner: LockOwner { user: r.try_get(2)?, agent: r.try_get(3)?, session: r.try_get(4)? },
        globs,
        created_ms: r.try_get(6)?,
        expires_ms: r.try_get(7)?,
    })
}

/// The live locks of `workspace`, oldest first (ties in the order they were taken).
async fn live(c: &impl GenericClient, workspace: &str, now_ms: i64) -> Result<Vec<PathLock>, PgError> {
    let sql =
        format!("SELECT {COLUMNS} FROM path_locks WHERE workspace = $1 AND expires_ms > $2 ORDER BY created_ms, seq");
    c.query(sql.as_str(), &[&workspace, &now_ms]).await?.iter().map(lock).collect()
}

/// The locks a take by `owner` is checked against: live, same workspace, another owner.
fn others(all: Vec<PathLock>, owner: &LockOwner) -> Vec<PathLock> {
    all.into_iter().filter(|l| l.owner != *owner).collect()
}

/// What the writing step of a take found.
enum Write {
    /// The locks checked were still the live ones: the lock is in.
    Taken,
    /// They changed in between: these are the live locks of other owners now, to check again.
    Changed(Vec<PathLock>),
}

impl PgStore {
    /// Inserts `lock` if the live locks of other owners in its workspace are still `checked`,
    /// under the workspace's advisory lock; sweeps expired locks on the way.
    fn write_checked(&self, lock: &PathLock, now_ms: i64, checked: Vec<PathLock>) -> Result<Write, StoreError> {
        let lock = lock.clone();
        let globs = serde_json::to_string(&lock.globs).unwrap_or_else(|_| "[]".to_owned());
        self.run("taking a path lock", move |mut c| async move {
            let tx = c.transaction().await?;
            // Held until commit or rollback: the next taker of this workspace reads after this
            // one's insert is visible.
            tx.execute("SELECT pg_advisory_xact_lock($1, hashtext($2))", &[&TAKE_LOCK, &lock.workspace]).await?;
            tx.execute("DELETE FROM path_locks WHERE expires_ms <= $1", &[&now_ms]).await?;
            let now = others(live(&tx, &lock.workspace, now_ms).await?, &lock.owner);
            if now != checked {
                tx.rollback().await?;
                return Ok(Write::Changed(now));
            }
            let sql = format!("INSERT INTO path_locks ({COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)");
            tx.execute(
                sql.as_str(),
                &[
                    &lock.token,
                    &lock.workspace,
                    &lock.owner.user,
                    &lock.owner.agent,
                    &lock.owner.session,
                    &globs,
                    &lock.created_ms,
                    &lock.expires_ms,
                ],
            )
            .await?;
            tx.commit().await?;
            Ok(Write::Taken)
        })
    }
}

impl LockStore for PgStore {
    fn lock_take(
        &self,
        lock: &PathLock,
        now_ms: i64,
        conflicts: &dyn Fn(&PathLock) -> bool,
    ) -> Result<Option<PathLock>, StoreError> {
        let mut checked = others(self.locks_live(&lock.workspace, now_ms)?, &lock.owner);
        for _ in 0..ATTEMPTS {
            if let Some(clash) = checked.iter().find(|other| conflicts(other)) {
                // Nothing written: the clashing lock was live when it was read.
                return Ok(Some(clash.clone()));
            }
            match self.write_checked(lock, now_ms, checked)? {
                Write::Taken => return Ok(None),
                Write::Changed(now) => checked = now,
            }
        }
        Err(PgError::Data(format!(
            "the path locks of {} kept changing while this lock was checked ({ATTEMPTS} times); try again",
            lock.workspace
        ))
        .doing("taking a path lock"))
    }

    fn lock_release(&self, token: &str, owner: &LockOwner, now_ms: i64) -> Result<bool, StoreError> {
        let (token, owner) = (token.to_owned(), owner.clone());
        self.run("releasing a path lock", move |c| async move {
            let n = c
                .execute(
                    "DELETE FROM path_locks
                     WHERE token = $1 AND member = $2 AND agent = $3 AND session = $4 AND expires_ms > $5",
                    &[&token, &owner.user, &owner.agent, &owner.session, &now_ms],
                )
                .await?;
            Ok(n > 0)
        })
    }

    fn locks_live(&self, workspace: &str, now_ms: i64) -> Result<Vec<PathLock>, StoreError> {
        let workspace = workspace.to_owned();
        self.run("listing path locks", move |c| async move { live(&c, &workspace, now_ms).await })
    }

    fn locks_sweep(&self, now_ms: i64) -> Result<usize, StoreError> {
        self.run("sweeping expired path locks", move |c| async move {
            let n = c.execute("DELETE FROM path_locks WHERE expires_ms <= $1", &[&now_ms]).await?;
            Ok(usize::try_from(n).unwrap_or(usize::MAX))
        })
    }
}
