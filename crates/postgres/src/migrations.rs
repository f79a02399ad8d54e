//! PostgreSQL's schema: its own DDL, in versions like SQLite's list (`toolgate-store`'s
//! `db.rs`), for the areas this crate implements. New versions go at the END; a version, once
//! released, never changes.
//!
//! Column names differ from SQLite's where SQLite's are reserved words here (`user` is
//! `member` or `for_user`); types are PostgreSQL's own (`BOOLEAN`, `BIGINT`, `BYTEA`).

use deadpool_postgres::Object;

use crate::error::PgError;

/// The schema version a database migrated by this build has: how many migrations it has.
pub const SCHEMA_VERSION: usize = MIGRATIONS.len();

/// The key of the transaction-level advisory lock migrations run under (any fixed number
/// that no other program on the database uses; these are the bytes of "tgschema").
const MIGRATION_LOCK: i64 = 0x7467_7363_6865_6d61;

/// The migrations, applied in order; `toolgate_schema.version` records how many ran.
pub(crate) const MIGRATIONS: &[&str] = &[
    // 1: a team gateway's identities (`identity.rs`): users, groups and agents under one name
    // space, group memberships, API keys kept as digests, and the page's sessions (digests of
    // cookies).
    "CREATE TABLE principals (
        name TEXT PRIMARY KEY,
        kind TEXT NOT NULL CHECK (kind IN ('user', 'group', 'agent')),
        owner TEXT,
        admin BOOLEAN NOT NULL DEFAULT false,
        disabled BOOLEAN NOT NULL DEFAULT false,
        password TEXT,
        created_ms BIGINT NOT NULL
     );
     CREATE TABLE memberships (
        member TEXT NOT NULL,
        grp TEXT NOT NULL,
        group_admin BOOLEAN NOT NULL DEFAULT false,
        PRIMARY KEY (member, grp)
     );
     CREATE TABLE api_keys (
        id TEXT PRIMARY KEY,
        principal TEXT NOT NULL,
        digest BYTEA NOT NULL,
        scope TEXT NOT NULL,
        created_ms BIGINT NOT NULL,
        created_by TEXT NOT NULL,
        expires_ms BIGINT,
        revoked_ms BIGINT,
        last_used_ms BIGINT,
        note TEXT NOT NULL
     );
     CREATE INDEX api_keys_principal ON api_keys (principal, created_ms);
     CREATE TABLE page_sessions (
        digest BYTEA PRIMARY KEY,
        member TEXT NOT NULL,
        created_ms BIGINT NOT NULL,
        expires_ms BIGINT NOT NULL
     );
     CREATE INDEX page_sessions_expiry ON page_sessions (expires_ms);",
    // 2: one grant store (`grants.rs`): a gateway's grants and the "allow always" decisions
    // (`arg_subject` set), and access requests. Lists are JSON text, as in SQLite.
    "CREATE TABLE grants (
        id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        subject TEXT NOT NULL,
        agent TEXT,
        server TEXT,
        tool_allow TEXT NOT NULL DEFAULT '[]',
        tool_deny TEXT NOT NULL DEFAULT '[]',
        enabled BOOLEAN NOT NULL DEFAULT true,
        config_overrides TEXT NOT NULL DEFAULT '{}',
        mode TEXT NOT NULL CHECK (mode IN ('allow', 'ask', 'deny')),
        arg_subject TEXT,
        arg_rule TEXT,
        expires_ms BIGINT,
        granted_by TEXT NOT NULL,
        request BIGINT,
        note TEXT NOT NULL DEFAULT '',
        created_ms BIGINT NOT NULL
     );
     CREATE INDEX grants_subject ON grants (subject);
     CREATE UNIQUE INDEX grants_always ON grants (subject, agent, tool_allow, arg_subject)
        WHERE arg_subject IS NOT NULL;
     CREATE TABLE access_requests (
        id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        requester TEXT NOT NULL,
        for_user TEXT NOT NULL,
        server TEXT,
        tool TEXT,
        reason TEXT NOT NULL,
        status TEXT NOT NULL CHECK (status IN ('pending', 'approved', 'rejected')),
        created_ms BIGINT NOT NULL,
        decided_by TEXT,
        decided_ms BIGINT,
        message TEXT,
        grant_id BIGINT
     );
     CREATE UNIQUE INDEX access_requests_pending
        ON access_requests (requester, coalesce(server, ''), coalesce(tool, '')) WHERE status = 'pending';
     CREATE INDEX access_requests_status ON access_requests (status, id);",
    // 3: revisions of identities and grants, raised by triggers in the transaction of every
    // change, whichever node or code path makes it (SQLite's `revisions.rs` keeps the same
    // rows). Row triggers, as SQLite's: a statement that changes nothing raises nothing. A
    // key's `last_used_ms` is not among the columns that raise it.
    "CREATE TABLE revisions (name TEXT PRIMARY KEY, value BIGINT NOT NULL);
     INSERT INTO revisions (name, value) VALUES ('identity', 1), ('grants', 1);
     CREATE FUNCTION toolgate_raise_revision() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            UPDATE revisions SET value = value + 1 WHERE name = TG_ARGV[0];
            RETURN NULL;
        END
     $$;
     CREATE TRIGGER principals_revision AFTER INSERT OR UPDATE OR DELETE ON principals
        FOR EACH ROW EXECUTE FUNCTION toolgate_raise_revision('identity');
     CREATE TRIGGER memberships_revision AFTER INSERT OR UPDATE OR DELETE ON memberships
        FOR EACH ROW EXECUTE FUNCTION toolgate_raise_revision('identity');
     CREATE TRIGGER api_keys_revision
        AFTER INSERT OR DELETE OR UPDATE OF id, principal, digest, scope, expires_ms, revoked_ms ON api_keys
        FOR EACH ROW EXECUTE FUNCTION toolgate_raise_revision('identity');
     CREATE TRIGGER grants_revision AFTER INSERT OR UPDATE OR DELETE ON grants
        FOR EACH ROW EXECUTE FUNCTION toolgate_raise_revision('grants');",
    // 4: why the requester of a decided access request could not be told (their webhook
    // failed), and when (SQLite's `grants::NOTIFY_MIGRATION`).
    "ALTER TABLE access_requests ADD COLUMN notify_error TEXT, ADD COLUMN notify_failed_ms BIGINT;",
    // 5: the approvals inbox (`approvals.rs`): calls waiting for a person, decided once on
    // whichever node the person uses, and each change an event (SQLite's `approvals` and
    // `approval_events`, `user` and `by` renamed). A decision, expiry or denial notifies
    // `toolgate_approvals` at commit, so the nodes' waiting calls look at once (`listen.rs`).
    "CREATE TABLE approvals (
        id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        call_id TEXT NOT NULL,
        for_user TEXT NOT NULL,
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
        created_ms BIGINT NOT NULL,
        expires_ms BIGINT NOT NULL,
        status TEXT NOT NULL
            CHECK (status IN ('pending', 'allowed', 'allowed_always', 'denied', 'expired')),
        decided_by TEXT,
        decided_ms BIGINT,
        message TEXT,
        notify_error TEXT,
        used_ms BIGINT,
        fallback_ms BIGINT
     );
     CREATE INDEX approvals_pending ON approvals (status, expires_ms);
     CREATE INDEX approvals_call ON approvals (for_user, agent, tool, args_digest);
     CREATE TABLE approval_events (
        seq BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        approval BIGINT NOT NULL REFERENCES approvals (id),
        kind TEXT NOT NULL,
        actor TEXT NOT NULL,
        at_ms BIGINT NOT NULL,
        detail TEXT
     );
     CREATE INDEX approval_events_of ON approval_events (approval, seq);
     CREATE FUNCTION toolgate_approval_changed() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            PERFORM pg_notify('toolgate_approvals', NEW.id::text);
            RETURN NULL;
        END
     $$;
     CREATE TRIGGER approvals_changed AFTER UPDATE OF status ON approvals
        FOR EACH ROW EXECUTE FUNCTION toolgate_approval_changed();",
    // 6: secrets every node reads (`secrets.rs`): sealed values, the key never stored here.
    "CREATE TABLE secrets (name TEXT PRIMARY KEY, value BYTEA NOT NULL, updated_ms BIGINT NOT NULL);",
    // 7: jobs and routines every node sees (`jobs.rs`, `routines.rs`): jobs with their leases
    // and event logs, the live job runners, routines with one row per fire keyed by (routine,
    // scheduled instant), the scheduler lease, and webhook signatures already accepted. Ids and
    // names sort bytewise (`COLLATE "C"`), as SQLite's do, whatever the database's locale.
    "CREATE TABLE jobs (
        id TEXT COLLATE \"C\" PRIMARY KEY,
        member TEXT NOT NULL,
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
        created_ms BIGINT NOT NULL,
        started_ms BIGINT,
        finished_ms BIGINT,
        lease_owner TEXT,
        lease_until_ms BIGINT,
        spec TEXT NOT NULL DEFAULT '{}'
     );
     CREATE INDEX jobs_member ON jobs (member, created_ms);
     CREATE INDEX jobs_lease ON jobs (state, lease_until_ms);
     CREATE INDEX jobs_unclaimed ON jobs (created_ms, id) WHERE state = 'queued' AND lease_owner IS NULL;
     CREATE TABLE job_events (
        job TEXT NOT NULL,
        seq BIGINT NOT NULL,
        ts_ms BIGINT NOT NULL,
        kind TEXT NOT NULL,
        body TEXT NOT NULL,
        PRIMARY KEY (job, seq)
     );
     CREATE TABLE job_runners (runner TEXT COLLATE \"C\" PRIMARY KEY, until_ms BIGINT NOT NULL);
     CREATE TABLE routines (
        name TEXT COLLATE \"C\" PRIMARY KEY,
        owner TEXT NOT NULL,
        spec TEXT NOT NULL,
        enabled BOOLEAN NOT NULL,
        next_fire_ms BIGINT,
        last_fire_ms BIGINT,
        created_ms BIGINT NOT NULL,
        updated_ms BIGINT NOT NULL,
        grants_agent TEXT
     );
     CREATE INDEX routines_due ON routines (next_fire_ms) WHERE enabled;
     CREATE TABLE routine_fires (
        routine TEXT COLLATE \"C\" NOT NULL,
        scheduled_ms BIGINT NOT NULL,
        fired_ms BIGINT NOT NULL,
        trigger_kind TEXT NOT NULL,
        status TEXT NOT NULL,
        job_id TEXT,
        detail TEXT,
        PRIMARY KEY (routine, scheduled_ms)
     );
     CREATE INDEX routine_fires_fired ON routine_fires (fired_ms);
     CREATE INDEX routine_fires_status ON routine_fires (status, fired_ms);
     CREATE TABLE scheduler_leases (name TEXT PRIMARY KEY, holder TEXT NOT NULL, expires_ms BIGINT NOT NULL);
     CREATE TABLE webhook_seen (
        routine TEXT NOT NULL,
        key TEXT NOT NULL,
        expires_ms BIGINT NOT NULL,
        PRIMARY KEY (routine, key)
     );
     CREATE INDEX webhook_seen_expiry ON webhook_seen (expires_ms);",
    // 8: the audit log (`audit.rs`): one hash chain per workspace (`audit_chains`), rows keyed
    // by workspace and call id, written by `COPY`; `audit_writers` holds each open log's
    // heartbeat (the database's clock), so any node can tell a log whose node died.
    "CREATE TABLE audit (
        pos BIGINT GENERATED ALWAYS AS IDENTITY,
        workspace TEXT NOT NULL,
        id TEXT NOT NULL,
        ts_ms BIGINT NOT NULL,
        member TEXT NOT NULL,
        agent TEXT NOT NULL,
        session TEXT NOT NULL,
        provider TEXT,
        tool TEXT NOT NULL,
        params TEXT NOT NULL,
        decision TEXT NOT NULL,
        outcome TEXT NOT NULL,
        error TEXT,
        duration_us BIGINT NOT NULL,
        output_bytes BIGINT NOT NULL,
        subject TEXT,
        detail TEXT,
        called_as TEXT,
        writer TEXT,
        seq BIGINT,
        prev_hash TEXT,
        hash TEXT,
        PRIMARY KEY (workspace, id),
        UNIQUE (workspace, seq)
     );
     CREATE INDEX audit_recent ON audit (workspace, ts_ms, pos);
     CREATE INDEX audit_running ON audit (workspace, writer) WHERE outcome = 'started';
     CREATE INDEX audit_by_member ON audit (workspace, member, ts_ms);
     CREATE TABLE audit_chains (
        workspace TEXT PRIMARY KEY,
        start_seq BIGINT NOT NULL,
        start_hash TEXT NOT NULL,
        head_seq BIGINT NOT NULL,
        head_hash TEXT NOT NULL
     );
     CREATE TABLE audit_writers (
        writer TEXT PRIMARY KEY,
        workspace TEXT NOT NULL,
        node TEXT NOT NULL,
        pid BIGINT NOT NULL,
        opened_ms BIGINT NOT NULL,
        beat_ms BIGINT NOT NULL
     );",
    // 9: a raised revision also notifies `toolgate_revisions` with `name:value` at commit, so
    // every node keeps the revisions in memory instead of reading them on each call
    // (`revisions.rs`).
    "CREATE OR REPLACE FUNCTION toolgate_raise_revision() RETURNS trigger LANGUAGE plpgsql AS $$
        DECLARE
            raised BIGINT;
        BEGIN
            UPDATE revisions SET value = value + 1 WHERE name = TG_ARGV[0] RETURNING value INTO raised;
            PERFORM pg_notify('toolgate_revisions', TG_ARGV[0] || ':' || raised);
            RETURN NULL;
        END
     $$;",
    // 10: path locks, custom tools and the message outbox, kept by every node (`locks.rs`,
    // `custom_tools.rs`, `outbox.rs`; SQLite's `path_locks`, `custom_tools`, `message_outbox`,
    // `user` renamed). `seq` orders locks taken in the same millisecond as they were taken.
    "CREATE TABLE path_locks (
        token TEXT PRIMARY KEY,
        workspace TEXT NOT NULL,
        member TEXT NOT NULL,
        agent TEXT NOT NULL,
        session TEXT NOT NULL,
        globs TEXT NOT NULL,
        created_ms BIGINT NOT NULL,
        expires_ms BIGINT NOT NULL,
        seq BIGINT GENERATED ALWAYS AS IDENTITY
     );
     CREATE INDEX path_locks_workspace ON path_locks (workspace, expires_ms);
     CREATE INDEX path_locks_expiry ON path_locks (expires_ms);
     CREATE TABLE custom_tools (
        name TEXT PRIMARY KEY,
        definition TEXT NOT NULL,
        updated_ms BIGINT NOT NULL
     );
     CREATE TABLE message_outbox (
        id TEXT PRIMARY KEY,
        for_user TEXT NOT NULL,
        channel TEXT NOT NULL,
        address TEXT NOT NULL,
        subject TEXT,
        content TEXT NOT NULL,
        attempts BIGINT NOT NULL,
        last_error TEXT NOT NULL,
        created_ms BIGINT NOT NULL
     );
     CREATE INDEX message_outbox_user ON message_outbox (for_user, created_ms);",
    // 11: agent sessions, their messages, team task boards, team messages and handoff routes
    // (`sessions.rs`). A session records the host and process running it (only that host can
    // tell whether it still runs); team tasks are searched with PostgreSQL's own text search.
    "CREATE TABLE agent_sessions (
        pos BIGINT GENERATED ALWAYS AS IDENTITY,
        id TEXT PRIMARY KEY,
        agent TEXT NOT NULL,
        member TEXT NOT NULL,
        parent TEXT,
        kind TEXT NOT NULL,
        label TEXT,
        status TEXT NOT NULL,
        depth BIGINT NOT NULL DEFAULT 0,
        task TEXT NOT NULL,
        result TEXT,
        error TEXT,
        input_tokens BIGINT NOT NULL DEFAULT 0,
        output_tokens BIGINT NOT NULL DEFAULT 0,
        cost_usd DOUBLE PRECISION NOT NULL DEFAULT 0,
        created_ms BIGINT NOT NULL,
        updated_ms BIGINT NOT NULL,
        only_tools TEXT,
        writer_node TEXT,
        writer_pid BIGINT,
        writer_token TEXT
     );
     CREATE INDEX agent_sessions_parent ON agent_sessions (parent);
     CREATE INDEX agent_sessions_created ON agent_sessions (created_ms);
     CREATE INDEX agent_sessions_running ON agent_sessions (writer_node) WHERE status = 'running';
     CREATE TABLE agent_messages (
        session TEXT NOT NULL,
        seq BIGINT NOT NULL,
        role TEXT NOT NULL,
        content TEXT NOT NULL,
        tool_calls TEXT,
        tool_call_id TEXT,
        tool_name TEXT,
        is_error BOOLEAN NOT NULL DEFAULT false,
        ts_ms BIGINT NOT NULL,
        PRIMARY KEY (session, seq)
     );
     CREATE TABLE team_tasks (
        id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        team TEXT NOT NULL,
        subject TEXT NOT NULL,
        description TEXT NOT NULL,
        priority BIGINT NOT NULL DEFAULT 0,
        status TEXT NOT NULL,
        owner TEXT,
        blocked_by JSONB NOT NULL DEFAULT '[]',
        result TEXT,
        created_ms BIGINT NOT NULL,
        claimed_ms BIGINT,
        lease_until_ms BIGINT,
        claim_session TEXT,
        posted_session TEXT,
        posted_user TEXT
     );
     CREATE INDEX team_tasks_team ON team_tasks (team, status);
     CREATE INDEX team_tasks_text ON team_tasks
        USING gin (to_tsvector('english', subject || ' ' || description || ' ' || COALESCE(result, '')));
     CREATE TABLE team_messages (
        id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        team TEXT NOT NULL,
        sender TEXT NOT NULL,
        recipient TEXT,
        content TEXT NOT NULL,
        ts_ms BIGINT NOT NULL
     );
     CREATE INDEX team_messages_team ON team_messages (team, id);
     CREATE TABLE team_message_reads (
        team TEXT NOT NULL,
        reader TEXT NOT NULL,
        last_id BIGINT NOT NULL,
        PRIMARY KEY (team, reader)
     );
     CREATE TABLE handoff_routes (
        conversation TEXT PRIMARY KEY,
        member TEXT NOT NULL,
        from_agent TEXT NOT NULL,
        to_agent TEXT NOT NULL,
        to_session TEXT NOT NULL,
        reason TEXT NOT NULL,
        created_ms BIGINT NOT NULL
     );
     CREATE INDEX handoff_routes_to ON handoff_routes (to_session);",
    // 12: which node holds each background process (`processes.rs`; SQLite's
    // `background_processes`, `user` renamed), for a `process` call that reaches another node.
    "CREATE TABLE background_processes (
        id TEXT PRIMARY KEY,
        workspace TEXT NOT NULL,
        for_user TEXT NOT NULL,
        node TEXT NOT NULL,
        node_url TEXT,
        command TEXT NOT NULL,
        started_ms BIGINT NOT NULL
     );
     CREATE INDEX background_processes_owner ON background_processes (workspace, for_user);
     CREATE INDEX background_processes_node ON background_processes (node);",
    // 13: memory (`memory.rs`): notes, chunks and vectors per workspace, as SQLite's
    // `memory_docs`, `memory_chunks` and `memory_vectors`; a chunk's words in a `tsvector` for
    // PostgreSQL's own text search; one change counter per workspace (`memory_generations`, as
    // SQLite's `memory_meta`); and the embedding cache (`embedding_cache.rs`), as SQLite's.
    "CREATE TABLE memory_docs (
        workspace TEXT NOT NULL,
        scope TEXT NOT NULL,
        path TEXT NOT NULL,
        hash TEXT NOT NULL,
        mtime_ns BIGINT NOT NULL,
        size BIGINT NOT NULL,
        content TEXT,
        updated_ms BIGINT NOT NULL,
        PRIMARY KEY (workspace, scope, path)
     );
     CREATE TABLE memory_chunks (
        id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        workspace TEXT NOT NULL,
        scope TEXT NOT NULL,
        path TEXT NOT NULL,
        start_line BIGINT NOT NULL,
        end_line BIGINT NOT NULL,
        heading TEXT NOT NULL,
        text TEXT NOT NULL,
        hash TEXT NOT NULL,
        words TSVECTOR NOT NULL
     );
     CREATE INDEX memory_chunks_doc ON memory_chunks (workspace, scope, path);
     CREATE INDEX memory_chunks_words ON memory_chunks USING gin (words);
     CREATE TABLE memory_vectors (
        chunk_id BIGINT PRIMARY KEY REFERENCES memory_chunks (id) ON DELETE CASCADE,
        workspace TEXT NOT NULL,
        scope TEXT NOT NULL,
        model TEXT NOT NULL,
        vec BYTEA NOT NULL
     );
     CREATE INDEX memory_vectors_model ON memory_vectors (workspace, scope, model);
     CREATE TABLE memory_generations (
        workspace TEXT PRIMARY KEY,
        generation BIGINT NOT NULL
     );
     CREATE TABLE embedding_cache (
        model TEXT NOT NULL,
        hash TEXT NOT NULL,
        vec BYTEA NOT NULL,
        used_ms BIGINT NOT NULL,
        PRIMARY KEY (model, hash)
     );
     CREATE INDEX embedding_cache_used ON embedding_cache (used_ms);",
    // 14: the configuration every node shares (`shared_config.rs`): one row of TOML, who stored
    // it and when; a change raises the `config` revision and notifies, as a grant does.
    "CREATE TABLE shared_config (
        id SMALLINT PRIMARY KEY CHECK (id = 1),
        text TEXT NOT NULL,
        changed_by TEXT NOT NULL,
        changed_ms BIGINT NOT NULL
     );
     INSERT INTO revisions (name, value) VALUES ('config', 1);
     CREATE TRIGGER shared_config_revision AFTER INSERT OR UPDATE OR DELETE ON shared_config
        FOR EACH ROW EXECUTE FUNCTION toolgate_raise_revision('config');",
    // 15: which node holds each browser session (`processes.rs`; SQLite's `browser_sessions`,
    // `user` renamed), for a `browser` call naming a session that reaches another node.
    "CREATE TABLE browser_sessions (
        id TEXT PRIMARY KEY,
        workspace TEXT NOT NULL,
        for_user TEXT NOT NULL,
        node TEXT NOT NULL,
        node_url TEXT,
        command TEXT NOT NULL,
        started_ms BIGINT NOT NULL
     );
     CREATE INDEX browser_sessions_owner ON browser_sessions (workspace, for_user);
     CREATE INDEX browser_sessions_node ON browser_sessions (node);",
    // 16: a key a node's link makes for one forwarded call (its scope names the node,
    // `"forwarded_by"`, which no tool name or address range can hold) is made and revoked
    // without raising the `identity` revision: that would reload every node's identities for
    // each forwarded call. Authenticators never keep such a key, so its revocation holds from
    // its next request. Every other key raises it as before.
    "DROP TRIGGER api_keys_revision ON api_keys;
     CREATE TRIGGER api_keys_added_revision AFTER INSERT ON api_keys
        FOR EACH ROW WHEN (strpos(NEW.scope, '\"forwarded_by\"') = 0)
        EXECUTE FUNCTION toolgate_raise_revision('identity');
     CREATE TRIGGER api_keys_changed_revision
        AFTER UPDATE OF id, principal, digest, scope, expires_ms, revoked_ms ON api_keys
        FOR EACH ROW WHEN (strpos(OLD.scope, '\"forwarded_by\"') = 0 OR strpos(NEW.scope, '\"forwarded_by\"') = 0)
        EXECUTE FUNCTION toolgate_raise_revision('identity');
     CREATE TRIGGER api_keys_removed_revision AFTER DELETE ON api_keys
        FOR EACH ROW WHEN (strpos(OLD.scope, '\"forwarded_by\"') = 0)
        EXECUTE FUNCTION toolgate_raise_revision('identity');",
    // 17: 16 skipped any key whose scope held the text `"forwarded_by"`, but that is also a
    // valid tool name (`--tools forwarded_by,*`): such a person's key was made and revoked
    // without raising the revision, and, kept by every authenticator (its scope names no node),
    // stayed usable after its revocation. Only the field itself counts now: `"forwarded_by":`
    // (the scope is `serde_json`'s compact text; no tool name or address holds a `"` or `:`
    // after that word, and a quote inside a string is escaped).
    "DROP TRIGGER api_keys_added_revision ON api_keys;
     DROP TRIGGER api_keys_changed_revision ON api_keys;
     DROP TRIGGER api_keys_removed_revision ON api_keys;
     CREATE TRIGGER api_keys_added_revision AFTER INSERT ON api_keys
        FOR EACH ROW WHEN (strpos(NEW.scope, '\"forwarded_by\":') = 0)
        EXECUTE FUNCTION toolgate_raise_revision('identity');
     CREATE TRIGGER api_keys_changed_revision
        AFTER UPDATE OF id, principal, digest, scope, expires_ms, revoked_ms ON api_keys
        FOR EACH ROW WHEN (strpos(OLD.scope, '\"forwarded_by\":') = 0 OR strpos(NEW.scope, '\"forwarded_by\":') = 0)
        EXECUTE FUNCTION toolgate_raise_revision('identity');
     CREATE TRIGGER api_keys_removed_revision AFTER DELETE ON api_keys
        FOR EACH ROW WHEN (strpos(OLD.scope, '\"forwarded_by\":') = 0)
        EXECUTE FUNCTION toolgate_raise_revision('identity');",
];

/// Applies the migrations `client`'s database lacks, all in one transaction under the
/// advisory lock: a second node starting at the same moment waits for the first to commit,
/// then finds the schema current.
pub(crate) async fn migrate(mut client: Object) -> Result<usize, PgError> {
    let tx = client.transaction().await?;
    tx.execute("SELECT pg_advisory_xact_lock($1)", &[&MIGRATION_LOCK]).await?;
    tx.batch_execute("CREATE TABLE IF NOT EXISTS toolgate_schema (version BIGINT NOT NULL)").await?;
    let version: Option<i64> = tx.query_one("SELECT max(version) FROM toolgate_schema", &[]).await?.try_get(0)?;
    let version = usize::try_from(version.unwrap_or(0)).unwrap_or(usize::MAX);
    if version > MIGRATIONS.len() {
        return Err(PgError::Data(format!(
            "the database's schema is version {version}, newer than this build's {}: upgrade toolgate on \
             this node to the version the other nodes run",
            MIGRATIONS.len()
        )));
    }
    for sql in &MIGRATIONS[version..] {
        tx.batch_execute(sql).await?;
    }
    if version < MIGRATIONS.len() {
        tx.execute("DELETE FROM toolgate_schema", &[]).await?;
        tx.execute("INSERT INTO toolgate_schema (version) VALUES ($1)", &[&(MIGRATIONS.len() as i64)]).await?;
    }
    tx.commit().await?;
    Ok(MIGRATIONS.len())
}

/// The version recorded in the database (0 before the first migration).
pub(crate) async fn version(client: Object) -> Result<usize, PgError> {
    let exists: bool = client.query_one("SELECT to_regclass('toolgate_schema') IS NOT NULL", &[]).await?.try_get(0)?;
    if !exists {
        return Ok(0);
    }
    let version: Option<i64> = client.query_one("SELECT max(version) FROM toolgate_schema", &[]).await?.try_get(0)?;
    Ok(usize::try_from(version.unwrap_or(0)).unwrap_or(0))
}
