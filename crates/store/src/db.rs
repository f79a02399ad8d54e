use std::path::{Path, PathBuf};
use std::sync::Mutex;

use rusqlite::{Connection, OpenFlags};

use crate::StoreError;
use crate::error::Context;

mod private;

/// The schema version a database opened by this build reaches: how many migrations it has.
pub const SCHEMA_VERSION: usize = MIGRATIONS.len();

/// The schema version the audit chain's migration brings (a test rewinds a database to just
/// before it, whatever migrations came later).
#[doc(hidden)]
pub fn audit_chain_version() -> usize {
    MIGRATIONS.iter().position(|m| *m == AUDIT_CHAIN).map_or(0, |i| i + 1)
}

/// Creates the database at `path` with only the first `version` migrations run, as a build of
/// that time would have left it (a test of a later migration starts from there).
#[doc(hidden)]
pub fn create_at_version(path: &Path, version: usize) -> Result<(), StoreError> {
    let mut conn = Connection::open(path).doing("opening a database at an old version")?;
    let tx = conn.transaction().doing("migrating")?;
    for sql in &MIGRATIONS[..version.min(MIGRATIONS.len())] {
        tx.execute_batch(sql).doing("migrating")?;
    }
    tx.pragma_update(None, "user_version", version.min(MIGRATIONS.len()) as i64).doing("migrating")?;
    tx.commit().doing("migrating")
}

/// Schema migrations, applied in order; `PRAGMA user_version` records how many ran.
pub(crate) const MIGRATIONS: &[&str] = &[
    // 1: the audit log.
    "CREATE TABLE audit (
        id TEXT PRIMARY KEY,
        ts_ms INTEGER NOT NULL,
        user TEXT NOT NULL,
        agent TEXT NOT NULL,
        session TEXT NOT NULL,
        provider TEXT,
        tool TEXT NOT NULL,
        params TEXT NOT NULL,
        decision TEXT NOT NULL,
        outcome TEXT NOT NULL,
        error TEXT,
        duration_us INTEGER NOT NULL,
        output_bytes INTEGER NOT NULL
    );
    CREATE INDEX audit_ts ON audit(ts_ms);",
    // 2: "allow always" approval grants.
    "CREATE TABLE approval_grants (
        id INTEGER PRIMARY KEY,
        user TEXT NOT NULL,
        agent TEXT NOT NULL,
        tool TEXT NOT NULL,
        subject TEXT NOT NULL,
        shown TEXT NOT NULL,
        created_ms INTEGER NOT NULL,
        UNIQUE (user, agent, tool, subject)
    );",
    // 3: secrets (MCP OAuth tokens), each value AES-256-GCM sealed: nonce || ciphertext.
    "CREATE TABLE secrets (
        name TEXT PRIMARY KEY,
        value BLOB NOT NULL,
        updated_ms INTEGER NOT NULL
    );",
    // 4: agent sessions, their messages, team task boards and team messages (toolgate-agent).
    "CREATE TABLE agent_sessions (
        id TEXT PRIMARY KEY,
        agent TEXT NOT NULL,
        user TEXT NOT NULL,
        parent TEXT,
        kind TEXT NOT NULL,
        label TEXT,
        status TEXT NOT NULL,
        depth INTEGER NOT NULL DEFAULT 0,
        task TEXT NOT NULL,
        result TEXT,
        error TEXT,
        input_tokens INTEGER NOT NULL DEFAULT 0,
        output_tokens INTEGER NOT NULL DEFAULT 0,
        cost_usd REAL NOT NULL DEFAULT 0,
        created_ms INTEGER NOT NULL,
        updated_ms INTEGER NOT NULL
    );
    CREATE INDEX agent_sessions_parent ON agent_sessions(parent);
    CREATE INDEX agent_sessions_created ON agent_sessions(created_ms);
    CREATE TABLE agent_messages (
        session TEXT NOT NULL,
        seq INTEGER NOT NULL,
        role TEXT NOT NULL,
        content TEXT NOT NULL,
        tool_calls TEXT,
        tool_call_id TEXT,
        tool_name TEXT,
        is_error INTEGER NOT NULL DEFAULT 0,
        ts_ms INTEGER NOT NULL,
        PRIMARY KEY (session, seq)
    );
    CREATE TABLE team_tasks (
        id INTEGER PRIMARY KEY,
        team TEXT NOT NULL,
        subject TEXT NOT NULL,
        description TEXT NOT NULL,
        priority INTEGER NOT NULL DEFAULT 0,
        status TEXT NOT NULL,
        owner TEXT,
        blocked_by TEXT NOT NULL DEFAULT '[]',
        result TEXT,
        created_ms INTEGER NOT NULL
    );
    CREATE INDEX team_tasks_team ON team_tasks(team, status);
    CREATE TABLE team_messages (
        id INTEGER PRIMARY KEY,
        team TEXT NOT NULL,
        sender TEXT NOT NULL,
        recipient TEXT,
        content TEXT NOT NULL,
        ts_ms INTEGER NOT NULL
    );",
    // 5: audit rows written before a call runs ("started"), with the writer process, so a
    // later start can close those of a dead process as "interrupted".
    "ALTER TABLE audit ADD COLUMN subject TEXT;
    ALTER TABLE audit ADD COLUMN writer_pid INTEGER;
    ALTER TABLE audit ADD COLUMN writer_token TEXT;
    CREATE INDEX audit_started ON audit(writer_pid) WHERE outcome = 'started';",
    // 6: custom tools added with `toolgate tools add` (definitions as JSON text; `custom_tools.rs`).
    "CREATE TABLE IF NOT EXISTS custom_tools (
        name TEXT PRIMARY KEY,
        definition TEXT NOT NULL,
        updated_ms INTEGER NOT NULL
    );",
    // 7: memory notes, their chunks, full-text index and vectors (`memory/index.rs`).
    crate::memory::SCHEMA,
    // 8: what a tool adds to its call's record (`CallContext::audit`: the web tools' status and
    // final URL).
    "ALTER TABLE audit ADD COLUMN detail TEXT;",
    // 9: which process runs an agent session, so that only a dead process's sessions are
    // closed as orphans (`sessions_fail_orphans`), not those another live toolgate runs.
    "ALTER TABLE agent_sessions ADD COLUMN writer_pid INTEGER;
     ALTER TABLE agent_sessions ADD COLUMN writer_token TEXT;",
    // 10: agent handoff: the messages of `conversation` (the session the user talks to) go to
    // `to_session` until the route is cleared (`handoff` in `sessions.rs`).
    "CREATE TABLE handoff_routes (
        conversation TEXT PRIMARY KEY,
        user TEXT NOT NULL,
        from_agent TEXT NOT NULL,
        to_agent TEXT NOT NULL,
        to_session TEXT NOT NULL,
        reason TEXT NOT NULL,
        created_ms INTEGER NOT NULL
     );
     CREATE INDEX handoff_routes_to ON handoff_routes (to_session);",
    // 11: a counter bumped by every change to the memory index, so a process keeping the
    // vectors in memory sees another process's changes with one read (`memory/index.rs`).
    "CREATE TABLE memory_meta (id INTEGER PRIMARY KEY CHECK (id = 1), generation INTEGER NOT NULL);
     INSERT INTO memory_meta (id, generation) VALUES (1, 0);",
    // 12: vectors of texts other than memory notes (skills for `skill_search`), by model and
    // the text's sha256, so a new process does not embed them again (`embedding_cache.rs`).
    "CREATE TABLE embedding_cache (
        model TEXT NOT NULL,
        hash TEXT NOT NULL,
        vec BLOB NOT NULL,
        used_ms INTEGER NOT NULL,
        PRIMARY KEY (model, hash)
     ) WITHOUT ROWID;",
    // 13: the name a call used when the caller's dialect names the tool differently
    // (`Read` for `read`; `toolgate-dialect`).
    "ALTER TABLE audit ADD COLUMN called_as TEXT;",
    // Path locks (`lock_paths`), shared by every process on the workspace (`locks.rs`).
    "CREATE TABLE path_locks (
        token TEXT PRIMARY KEY,
        workspace TEXT NOT NULL,
        user TEXT NOT NULL,
        agent TEXT NOT NULL,
        session TEXT NOT NULL,
        globs TEXT NOT NULL,
        created_ms INTEGER NOT NULL,
        expires_ms INTEGER NOT NULL
     );
     CREATE INDEX path_locks_workspace ON path_locks (workspace, expires_ms);",
    // Teams that run (`sessions.rs`): a claim's lease, so a crashed teammate's task goes back to
    // `pending`; full-text search over subject, description and result (FTS5, external content
    // kept in step by triggers); each member's read marker for unread-only mailbox reads.
    "ALTER TABLE team_tasks ADD COLUMN claimed_ms INTEGER;
     ALTER TABLE team_tasks ADD COLUMN lease_until_ms INTEGER;
     CREATE VIRTUAL TABLE team_tasks_fts USING fts5(
        subject, description, result, content = 'team_tasks', content_rowid = 'id', tokenize = 'porter unicode61'
     );
     CREATE TRIGGER team_tasks_fts_insert AFTER INSERT ON team_tasks BEGIN
        INSERT INTO team_tasks_fts (rowid, subject, description, result)
        VALUES (new.id, new.subject, new.description, new.result);
     END;
     CREATE TRIGGER team_tasks_fts_delete AFTER DELETE ON team_tasks BEGIN
        INSERT INTO team_tasks_fts (team_tasks_fts, rowid, subject, description, result)
        VALUES ('delete', old.id, old.subject, old.description, old.result);
     END;
     CREATE TRIGGER team_tasks_fts_update AFTER UPDATE OF subject, description, result ON team_tasks BEGIN
        INSERT INTO team_tasks_fts (team_tasks_fts, rowid, subject, description, result)
        VALUES ('delete', old.id, old.subject, old.description, old.result);
        INSERT INTO team_tasks_fts (rowid, subject, description, result)
        VALUES (new.id, new.subject, new.description, new.result);
     END;
     INSERT INTO team_tasks_fts (team_tasks_fts) VALUES ('rebuild');
     CREATE TABLE team_message_reads (
        team TEXT NOT NULL,
        reader TEXT NOT NULL,
        last_id INTEGER NOT NULL,
        PRIMARY KEY (team, reader)
     ) WITHOUT ROWID;
     CREATE INDEX team_messages_team ON team_messages (team, id);",
    // `session_status` of a session the runtime does not keep (an MCP client's): its calls.
    "CREATE INDEX audit_session ON audit (session, ts_ms);",
    // Teams (`sessions.rs`): the session holding a claim (leases are renewed by session, not by
    // member name), and the session and user that posted a task (its result goes there).
    "ALTER TABLE team_tasks ADD COLUMN claim_session TEXT;
     ALTER TABLE team_tasks ADD COLUMN posted_session TEXT;
     ALTER TABLE team_tasks ADD COLUMN posted_user TEXT;",
    // Routines (`routines.rs`): definitions with their next and last fire, one row per fire
    // keyed by (routine, scheduled instant) so one fire never runs twice, the scheduler lease
    // (one scheduler per workspace), and webhook signatures already accepted (replays).
    "CREATE TABLE routines (
        name TEXT PRIMARY KEY,
        owner TEXT NOT NULL,
        spec TEXT NOT NULL,
        enabled INTEGER NOT NULL,
        next_fire_ms INTEGER,
        last_fire_ms INTEGER,
        created_ms INTEGER NOT NULL,
        updated_ms INTEGER NOT NULL
     );
     CREATE INDEX routines_due ON routines (enabled, next_fire_ms);
     CREATE TABLE routine_fires (
        routine TEXT NOT NULL,
        scheduled_ms INTEGER NOT NULL,
        fired_ms INTEGER NOT NULL,
        trigger TEXT NOT NULL,
        status TEXT NOT NULL,
        job_id TEXT,
        detail TEXT,
        PRIMARY KEY (routine, scheduled_ms)
     );
     CREATE INDEX routine_fires_fired ON routine_fires (fired_ms);
     CREATE INDEX routine_fires_status ON routine_fires (status);
     CREATE TABLE scheduler_leases (name TEXT PRIMARY KEY, holder TEXT NOT NULL, expires_ms INTEGER NOT NULL);
     CREATE TABLE webhook_seen (
        routine TEXT NOT NULL,
        key TEXT NOT NULL,
        expires_ms INTEGER NOT NULL,
        PRIMARY KEY (routine, key)
     );",
    // The message outbox (`outbox.rs`): messages the `message` tool could not deliver.
    "CREATE TABLE message_outbox (
        id TEXT PRIMARY KEY,
        user TEXT NOT NULL,
        channel TEXT NOT NULL,
        address TEXT NOT NULL,
        subject TEXT,
        content TEXT NOT NULL,
        attempts INTEGER NOT NULL,
        last_error TEXT NOT NULL,
        created_ms INTEGER NOT NULL
     );
     CREATE INDEX message_outbox_user ON message_outbox (user, created_ms);",
    // Background jobs (`jobs.rs`): the job with its creator's lease, and its event log.
    "CREATE TABLE jobs (
        id TEXT PRIMARY KEY,
        user TEXT NOT NULL,
        session TEXT NOT NULL,
        title TEXT NOT NULL,
        description TEXT NOT NULL,
        mode TEXT NOT NULL,
        project_dir TEXT NOT NULL,
        credentials TEXT NOT NULL,
        origin TEXT,
        state TEXT NOT NULL,
        result TEXT,
        error TEXT,
        agent_session TEXT,
        created_ms INTEGER NOT NULL,
        started_ms INTEGER,
        finished_ms INTEGER,
        lease_owner TEXT,
        lease_until_ms INTEGER
     );
     CREATE INDEX jobs_user ON jobs (user, created_ms);
     CREATE INDEX jobs_lease ON jobs (state, lease_until_ms);
     CREATE TABLE job_events (
        job TEXT NOT NULL,
        seq INTEGER NOT NULL,
        ts_ms INTEGER NOT NULL,
        kind TEXT NOT NULL,
        text TEXT NOT NULL,
        PRIMARY KEY (job, seq)
     ) WITHOUT ROWID;",
    // A team gateway's identities (`identity.rs`): users, groups and agents under one name
    // space, group memberships, and API keys kept as digests.
    "CREATE TABLE principals (
        name TEXT PRIMARY KEY,
        kind TEXT NOT NULL CHECK (kind IN ('user', 'group', 'agent')),
        owner TEXT,
        admin INTEGER NOT NULL DEFAULT 0,
        disabled INTEGER NOT NULL DEFAULT 0,
        password TEXT,
        created_ms INTEGER NOT NULL
     );
     CREATE TABLE memberships (
        user TEXT NOT NULL,
        grp TEXT NOT NULL,
        group_admin INTEGER NOT NULL DEFAULT 0,
        PRIMARY KEY (user, grp)
     ) WITHOUT ROWID;
     CREATE TABLE api_keys (
        id TEXT PRIMARY KEY,
        principal TEXT NOT NULL,
        digest BLOB NOT NULL,
        scope TEXT NOT NULL,
        created_ms INTEGER NOT NULL,
        created_by TEXT NOT NULL,
        expires_ms INTEGER,
        revoked_ms INTEGER,
        last_used_ms INTEGER,
        note TEXT NOT NULL
     );
     CREATE INDEX api_keys_principal ON api_keys (principal, created_ms);",
    AUDIT_CHAIN,
    // Jobs a server claims (`jobs.rs`): what a process that did not create a job needs to run
    // it (the owner's agent name, the agent, the credentials' variables; never a value). Its own
    // table, so the migration can run again on its own result.
    "CREATE TABLE IF NOT EXISTS job_specs (job TEXT PRIMARY KEY, spec TEXT NOT NULL) WITHOUT ROWID;",
    // One grant store (`grants.rs`): a gateway's grants and the "allow always" decisions
    // (moved from `approval_grants`), and access requests.
    crate::grants::MIGRATION,
    // The tools an agent session's run was limited to (`sessions.rs`): a continued session is
    // offered no more. Its own table, so the migration can run again on its own result.
    "CREATE TABLE IF NOT EXISTS agent_session_tools (session TEXT PRIMARY KEY, tools TEXT NOT NULL) WITHOUT ROWID;",
    // The approvals inbox (`approvals.rs`): tool calls waiting for a person, bound to the
    // caller, the arguments' digest, the policy revision and an expiry; each change an event.
    "CREATE TABLE approvals (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        call_id TEXT NOT NULL,
        user TEXT NOT NULL,
        agent TEXT NOT NULL,
        session TEXT NOT NULL,
        tool TEXT NOT NULL,
        server TEXT,
        subject TEXT NOT NULL,
        args_digest TEXT NOT NULL,
        shown TEXT NOT NULL,
        reason TEXT NOT NULL,
        policy_revision TEXT NOT NULL,
        batch TEXT,
        created_ms INTEGER NOT NULL,
        expires_ms INTEGER NOT NULL,
        status TEXT NOT NULL
            CHECK (status IN ('pending', 'allowed', 'allowed_always', 'denied', 'expired')),
        decided_by TEXT,
        decided_ms INTEGER,
        message TEXT,
        notify_error TEXT,
        used_ms INTEGER
     );
     CREATE INDEX approvals_pending ON approvals (status, expires_ms);
     CREATE INDEX approvals_call ON approvals (user, agent, tool, args_digest);
     CREATE TABLE approval_events (
        seq INTEGER PRIMARY KEY AUTOINCREMENT,
        approval INTEGER NOT NULL REFERENCES approvals (id),
        kind TEXT NOT NULL,
        by TEXT NOT NULL,
        at_ms INTEGER NOT NULL,
        detail TEXT
     );
     CREATE INDEX approval_events_of ON approval_events (approval, seq);",
    // The gateway page's sessions (`identity.rs`): the SHA-256 digest of each cookie, never the
    // cookie, so a restart of `toolgate serve` keeps people signed in.
    "CREATE TABLE IF NOT EXISTS page_sessions (
        digest BLOB PRIMARY KEY,
        user TEXT NOT NULL,
        created_ms INTEGER NOT NULL,
        expires_ms INTEGER NOT NULL
     ) WITHOUT ROWID;
     CREATE INDEX IF NOT EXISTS page_sessions_expiry ON page_sessions (expires_ms);",
    // A gateway grant's argument rule (`grants.rs`, issue 28 item 4).
    crate::grants::ARG_RULE_MIGRATION,
    // Revisions of identities and grants (`revisions.rs`), bumped by triggers in the
    // transaction of every change, read by the gateway's caches on each request.
    crate::revisions::MIGRATION,
    // The audit logs open now (`audit.rs`): a row left by a dead process marks a gap.
    "CREATE TABLE IF NOT EXISTS audit_writers (pid INTEGER NOT NULL, token TEXT, opened_ms INTEGER NOT NULL);",
    // When an approval nobody could be notified of is denied (`approvals.rs`), kept in the
    // row so a restarted server still applies it.
    "ALTER TABLE approvals ADD COLUMN fallback_ms INTEGER;",
    // The gateway principal a routine acts for (`routines.rs`): its fires are held to that
    // principal's grants as they are when it fires.
    "ALTER TABLE routines ADD COLUMN grants_agent TEXT;",
    // Why the requester of a decided access request could not be told (their webhook failed),
    // and when (`grants.rs`): kept on the request, shown on the page and to `request_access`.
    crate::grants::NOTIFY_MIGRATION,
    // Which node holds each background process (`processes.rs`), for calls that reach
    // another node.
    crate::processes::MIGRATION,
    // Which node holds each browser session (`processes.rs`), likewise.
    crate::processes::BROWSER_MIGRATION,
];

/// The audit log's hash chain (`audit/chain.rs`): each completed row's position, the hash of the
/// row before it and its own; the chain's ends (moved by retention and by every append). The
/// rows already there are chained by [`migrate`] right after this runs.
const AUDIT_CHAIN: &str = "ALTER TABLE audit ADD COLUMN seq INTEGER;
     ALTER TABLE audit ADD COLUMN prev_hash TEXT;
     ALTER TABLE audit ADD COLUMN hash TEXT;
     CREATE UNIQUE INDEX audit_seq ON audit (seq) WHERE seq IS NOT NULL;
     CREATE TABLE audit_chain (
        id INTEGER PRIMARY KEY CHECK (id = 1),
        start_seq INTEGER NOT NULL,
        start_hash TEXT NOT NULL,
        head_seq INTEGER NOT NULL,
        head_hash TEXT NOT NULL
     );
     INSERT INTO audit_chain VALUES (1, 1, '0000000000000000000000000000000000000000000000000000000000000000',
        0, '0000000000000000000000000000000000000000000000000000000000000000');";

/// The state database in SQLite: one connection, for reads and small writes off the hot path.
///
/// It implements every area's trait ([`crate::GrantStore`], [`crate::SecretStore`],
/// [`crate::SessionStore`], [`crate::CustomToolStore`], [`crate::EmbeddingCache`],
/// [`crate::LockStore`]) with the SQL
/// in that area's module, and answers the audit log's reads; the audit log's writes go through
/// [`crate::AuditLog`], whose writer thread has a connection of its own.
#[derive(Debug)]
pub struct Store {
    path: PathBuf,
    conn: Mutex<Connection>,
}

impl Store {
    /// Opens or creates the database at `path` (and its parent folder), in WAL mode, with the
    /// schema migrated to the current version.
    pub fn open(path: &Path) -> Result<Store, StoreError> {
        let conn = open_connection(path)?;
        Ok(Store { path: path.to_owned(), conn: Mutex::new(conn) })
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Runs `f` with the connection.
    pub(crate) fn with<T>(&self, f: impl FnOnce(&Connection) -> Result<T, StoreError>) -> Result<T, StoreError> {
        let conn = self.conn.lock().unwrap_or_else(|e| e.into_inner());
        f(&conn)
    }

    /// [`Store::with`] for what needs the connection itself (a transaction of its own).
    pub(crate) fn with_mut<T>(
        &self,
        f: impl FnOnce(&mut Connection) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        let mut conn = self.conn.lock().unwrap_or_else(|e| e.into_inner());
        f(&mut conn)
    }
}

pub(crate) fn open_connection(path: &Path) -> Result<Connection, StoreError> {
    let open_err =
        |source: Box<dyn std::error::Error + Send + Sync>| StoreError::Open { path: path.to_owned(), source };
    // `:memory:` is SQLite's name for a database that is no file.
    if path != Path::new(":memory:") {
        if let Some(parent) = path.parent() {
            private::prepare_dir(parent).map_err(|e| open_err(Box::new(e)))?;
        }
        private::prepare_db_file(path).map_err(|e| open_err(Box::new(e)))?;
    }
    let flags = OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_CREATE | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    let mut conn = Connection::open_with_flags(path, flags).map_err(|e| open_err(Box::new(e)))?;
    conn.busy_handler(Some(busy_wait)).map_err(|e| open_err(Box::new(e)))?;
    conn.execute_batch("PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL; PRAGMA foreign_keys = ON;")
        .map_err(|e| open_err(Box::new(e)))?;
    migrate(&mut conn).map_err(|e| open_err(Box::new(e)))?;
    Ok(conn)
}

/// Waits for another connection's write lock (this process's audit writer, another process),
/// for about 5 s in all. Not `busy_timeout`: SQLite's own wait sleeps 1, 2, 5, 10 ms and more
/// between tries, while a write here holds the lock for tens of microseconds, so those sleeps
/// were most of a contended write's time (a team's board and an agent's turns beside the
/// audit writer: `docs/benchmarks.md`, the agent runtime). This tries again after 20 µs,
/// doubling up to 5 ms.
fn busy_wait(tries: i32) -> bool {
    // 20 µs << 8 is about 5 ms; the first 9 tries wait about 10 ms in all, then 5 ms each.
    const SHORT: i32 = 9;
    const TRIES: i32 = SHORT + 1000;
    if tries >= TRIES {
        return false;
    }
    let step = std::time::Duration::from_micros(20 << tries.clamp(0, 8));
    std::thread::sleep(step);
    true
}

pub(crate) fn migrate(conn: &mut Connection) -> Result<(), StoreError> {
    // Every open but a new build's first finds the schema current: one read, no write lock.
    let version = conn.query_row("PRAGMA user_version", [], |r| r.get::<_, i64>(0)).doing("migrating")?;
    if version == MIGRATIONS.len() as i64 {
        return Ok(());
    }
    let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate).doing("migrating")?;
    let version: usize = tx.query_row("PRAGMA user_version", [], |r| r.get::<_, i64>(0)).doing("migrating")? as usize;
    for (i, sql) in MIGRATIONS.iter().enumerate().skip(version) {
        tx.execute_batch(sql).doing("migrating")?;
        if *sql == AUDIT_CHAIN {
            crate::audit::adopt_unchained(&tx).doing("chaining the existing audit rows")?;
        }
        tx.pragma_update(None, "user_version", (i + 1) as i64).doing("migrating")?;
    }
    tx.commit().doing("migrating")
}
