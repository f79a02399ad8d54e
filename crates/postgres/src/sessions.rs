//! [`SessionStore`] on PostgreSQL: agent sessions and their messages, team task boards, team
//! messages and handoff routes, with SQLite's semantics (`toolgate_store`'s `sessions.rs`) held
//! across nodes:
//!
//! - a session's messages are numbered under a transaction-level advisory lock on the session,
//!   so two nodes appending to one session never take the same number;
//! - a claim picks its task with `FOR UPDATE SKIP LOCKED`: of many claimers on any node one wins;
//! - a team's messages are inserted under a lock on the team, so their ids commit in order and a
//!   reader's "last read" marker never passes a message that commits later;
//! - a session left `running` is failed only by a process on the host that ran it (which can
//!   tell whether that process still runs); see [`SessionStore::sessions_fail_orphans`].

use tokio_postgres::Row;
use toolgate_store::{
    HandoffRoute, MessageRecord, SessionFilter, SessionRecord, SessionStore, StoreError, TaskFilter, TaskOrder,
    TeamMessage, TeamTask,
};

use crate::PgStore;
use crate::audit::node_name;
use crate::error::PgError;

#[path = "../../sandbox/src/process_token.rs"]
mod process_token;

const SESSION_COLUMNS: &str = "id, agent, member, parent, kind, label, status, depth, task, result, error, \
     input_tokens, output_tokens, cost_usd, created_ms, updated_ms, \
     (SELECT count(*) FROM agent_messages m WHERE m.session = s.id), only_tools";

const TASK_COLUMNS: &str = "id, team, subject, description, priority, status, owner, blocked_by::text, result, \
     created_ms, claimed_ms, lease_until_ms, claim_session, posted_session, posted_user";

const ROUTE_COLUMNS: &str = "conversation, member, from_agent, to_agent, to_session, reason, created_ms";

/// Words a team task search looks for, as SQLite's store takes them (every run of letters and
/// digits, lowercased, at most 32, no repeats): none of them is query syntax.
fn search_terms(query: &str) -> Vec<String> {
    let mut terms: Vec<String> = Vec::new();
    for word in query.split(|c: char| !c.is_alphanumeric()).filter(|w| !w.is_empty()) {
        let w = word.to_lowercase();
        if !terms.contains(&w) {
            terms.push(w);
        }
        if terms.len() == 32 {
            break;
        }
    }
    terms
}

/// `limit` 0 is "no limit" (SQL `LIMIT NULL`).
fn limit(n: usize) -> Option<i64> {
    (n > 0).then(|| i64::try_from(n).unwrap_or(i64::MAX))
}

fn to_u64(n: i64) -> u64 {
    u64::try_from(n).unwrap_or(0)
}

fn session_row(r: &Row) -> Result<SessionRecord, PgError> {
    Ok(SessionRecord {
        id: r.try_get(0)?,
        agent: r.try_get(1)?,
        user: r.try_get(2)?,
        parent: r.try_get(3)?,
        kind: r.try_get(4)?,
        label: r.try_get(5)?,
        status: r.try_get(6)?,
        depth: u32::try_from(r.try_get::<_, i64>(7)?).unwrap_or(0),
        task: r.try_get(8)?,
        result: r.try_get(9)?,
        error: r.try_get(10)?,
        input_tokens: to_u64(r.try_get(11)?),
        output_tokens: to_u64(r.try_get(12)?),
        cost_usd: r.try_get(13)?,
        created_ms: r.try_get(14)?,
        updated_ms: r.try_get(15)?,
        message_count: to_u64(r.try_get(16)?),
        // Written by this store as a JSON array; anything else reads as "no tools" (never as
        // "every tool").
        only_tools: r
            .try_get::<_, Option<String>>(17)?
            .map(|json| serde_json::from_str::<Vec<String>>(&json).unwrap_or_default()),
    })
}

fn task_row(r: &Row) -> Result<TeamTask, PgError> {
    let blocked: String = r.try_get(7)?;
    Ok(TeamTask {
        id: r.try_get(0)?,
        team: r.try_get(1)?,
        subject: r.try_get(2)?,
        description: r.try_get(3)?,
        priority: r.try_get(4)?,
        status: r.try_get(5)?,
        owner: r.try_get(6)?,
        blocked_by: serde_json::from_str(&blocked).unwrap_or_default(),
        result: r.try_get(8)?,
        created_ms: r.try_get(9)?,
        claimed_ms: r.try_get(10)?,
        lease_until_ms: r.try_get(11)?,
        claim_session: r.try_get(12)?,
        posted_session: r.try_get(13)?,
        posted_user: r.try_get(14)?,
    })
}

fn message_row(r: &Row) -> Result<TeamMessage, PgError> {
    Ok(TeamMessage {
        id: r.try_get(0)?,
        team: r.try_get(1)?,
        from: r.try_get(2)?,
        to: r.try_get(3)?,
        content: r.try_get(4)?,
        ts_ms: r.try_get(5)?,
    })
}

fn route_row(r: &Row) -> Result<HandoffRoute, PgError> {
    Ok(HandoffRoute {
        conversation: r.try_get(0)?,
        user: r.try_get(1)?,
        from_agent: r.try_get(2)?,
        to_agent: r.try_get(3)?,
        to_session: r.try_get(4)?,
        reason: r.try_get(5)?,
        created_ms: r.try_get(6)?,
    })
}

fn rows<T>(rows: &[Row], read: fn(&Row) -> Result<T, PgError>) -> Result<Vec<T>, PgError> {
    rows.iter().map(read).collect()
}

impl SessionStore for PgStore {
    fn session_create(&self, s: &SessionRecord) -> Result<(), StoreError> {
        let s = s.clone();
        let pid = std::process::id();
        let token = process_token::start_token(pid);
        self.run("creating an agent session", move |client| async move {
            let tools = s.only_tools.as_ref().map(|t| serde_json::Value::from(t.clone()).to_string());
            client
                .execute(
                    "INSERT INTO agent_sessions (id, agent, member, parent, kind, label, status, depth, task,
                         created_ms, updated_ms, only_tools, writer_node, writer_pid, writer_token)
                     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $10, $11, $12, $13, $14)",
                    &[
                        &s.id,
                        &s.agent,
                        &s.user,
                        &s.parent,
                        &s.kind,
                        &s.label,
                        &s.status,
                        &i64::from(s.depth),
                        &s.task,
                        &s.created_ms,
                        &tools,
                        &node_name(),
                        &i64::from(pid),
                        &token,
                    ],
                )
                .await?;
            Ok(())
        })
    }

    fn session(&self, id: &str) -> Result<Option<SessionRecord>, StoreError> {
        let id = id.to_owned();
        self.run("reading an agent session", move |client| async move {
            let sql = format!("SELECT {SESSION_COLUMNS} FROM agent_sessions s WHERE id = $1");
            client.query_opt(&sql, &[&id]).await?.as_ref().map(session_row).transpose()
        })
    }

    fn sessions(&self, filter: &SessionFilter<'_>) -> Result<Vec<SessionRecord>, StoreError> {
        let owned = |v: Option<&str>| v.map(str::to_owned);
        let (agent, parent, status, user, kind) =
            (owned(filter.agent), owned(filter.parent), owned(filter.status), owned(filter.user), owned(filter.kind));
        let n = limit(filter.limit);
        self.run("listing agent sessions", move |client| async move {
            let sql = format!(
                "SELECT {SESSION_COLUMNS} FROM agent_sessions s
                 WHERE ($1::text IS NULL OR agent = $1) AND ($2::text IS NULL OR parent = $2)
                   AND ($3::text IS NULL OR status = $3) AND ($5::text IS NULL OR member = $5)
                   AND ($6::text IS NULL OR kind = $6)
                 ORDER BY created_ms DESC, pos DESC LIMIT $4"
            );
            rows(&client.query(&sql, &[&agent, &parent, &status, &n, &user, &kind]).await?, session_row)
        })
    }

    fn session_finish(
        &self,
        id: &str,
        status: &str,
        result: Option<&str>,
        error: Option<&str>,
        now_ms: i64,
    ) -> Result<(), StoreError> {
        let (id, status) = (id.to_owned(), status.to_owned());
        let (result, error) = (result.map(str::to_owned), error.map(str::to_owned));
        self.run("updating an agent session", move |client| async move {
            client
                .execute(
                    "UPDATE agent_sessions SET status = $2, result = COALESCE($3, result), error = $4, updated_ms = $5
                     WHERE id = $1",
                    &[&id, &status, &result, &error, &now_ms],
                )
                .await?;
            Ok(())
        })
    }

    fn session_add_usage(&self, id: &str, input: u64, output: u64, cost: f64, now_ms: i64) -> Result<(), StoreError> {
        self.session_append_turn(id, &[], Some((input, output, cost)), now_ms).map(drop)
    }

    fn session_append(&self, session: &str, m: &MessageRecord) -> Result<i64, StoreError> {
        let seqs = self.session_append_turn(session, std::slice::from_ref(m), None, m.ts_ms)?;
        Ok(seqs.first().copied().unwrap_or_default())
    }

    fn session_append_turn(
        &self,
        session: &str,
        messages: &[MessageRecord],
        usage: Option<(u64, u64, f64)>,
        now_ms: i64,
    ) -> Result<Vec<i64>, StoreError> {
        if messages.is_empty() && usage.is_none() {
            return Ok(Vec::new());
        }
        let (session, messages) = (session.to_owned(), messages.to_vec());
        self.run("saving an agent turn", move |mut client| async move {
            let tx = client.transaction().await?;
            let mut seqs = Vec::with_capacity(messages.len());
            if !messages.is_empty() {
                // Appenders to one session take turns, on any node: the next number is theirs.
                tx.execute("SELECT pg_advisory_xact_lock(hashtext('toolgate-session:' || $1))", &[&session]).await?;
                let mut next: i64 = tx
                    .query_one("SELECT COALESCE(max(seq), 0) FROM agent_messages WHERE session = $1", &[&session])
                    .await?
                    .try_get(0)?;
                for m in &messages {
                    next += 1;
                    tx.execute(
                        "INSERT INTO agent_messages
                             (session, seq, role, content, tool_calls, tool_call_id, tool_name, is_error, ts_ms)
                         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
                        &[
                            &session,
                            &next,
                            &m.role,
                            &m.content,
                            &m.tool_calls,
                            &m.tool_call_id,
                            &m.tool_name,
                            &m.is_error,
                            &m.ts_ms,
                        ],
                    )
                    .await?;
                    seqs.push(next);
                }
            }
            let (input, output, cost) = usage.unwrap_or_default();
            let (input, output) = (i64::try_from(input).unwrap_or(i64::MAX), i64::try_from(output).unwrap_or(i64::MAX));
            tx.execute(
                "UPDATE agent_sessions SET input_tokens = input_tokens + $2, output_tokens = output_tokens + $3,
                     cost_usd = cost_usd + $4, updated_ms = $5 WHERE id = $1",
                &[&session, &input, &output, &cost, &now_ms],
            )
            .await?;
            tx.commit().await?;
            Ok(seqs)
        })
    }

    fn session_messages(&self, session: &str, last: usize) -> Result<Vec<MessageRecord>, StoreError> {
        let session = session.to_owned();
        let n = limit(last);
        self.run("reading agent messages", move |client| async move {
            let found = client
                .query(
                    "SELECT seq, role, content, tool_calls, tool_call_id, tool_name, is_error, ts_ms FROM (
                        SELECT * FROM agent_messages WHERE session = $1 ORDER BY seq DESC LIMIT $2
                     ) last ORDER BY seq",
                    &[&session, &n],
                )
                .await?;
            found
                .iter()
                .map(|r| {
                    Ok(MessageRecord {
                        seq: r.try_get(0)?,
                        role: r.try_get(1)?,
                        content: r.try_get(2)?,
                        tool_calls: r.try_get(3)?,
                        tool_call_id: r.try_get(4)?,
                        tool_name: r.try_get(5)?,
                        is_error: r.try_get(6)?,
                        ts_ms: r.try_get(7)?,
                    })
                })
                .collect()
        })
    }

    fn sessions_archive_idle(&self, before_ms: i64) -> Result<usize, StoreError> {
        self.run("archiving agent sessions", move |client| async move {
            let n = client
                .execute(
                    "UPDATE agent_sessions SET status = 'archived'
                     WHERE status IN ('done', 'failed', 'cancelled', 'stopped') AND updated_ms < $1",
                    &[&before_ms],
                )
                .await?;
            Ok(usize::try_from(n).unwrap_or(usize::MAX))
        })
    }

    /// Only sessions run on this host are judged: another host's process cannot be looked at
    /// from here, so its sessions wait for a toolgate on that host to start.
    fn sessions_fail_orphans(&self, now_ms: i64) -> Result<usize, StoreError> {
        self.run("closing orphaned agent sessions", move |client| async move {
            let here = node_name();
            let writers = client
                .query(
                    "SELECT DISTINCT writer_pid, writer_token FROM agent_sessions
                     WHERE status = 'running' AND writer_node = $1",
                    &[&here],
                )
                .await?;
            let mut closed = 0;
            for w in writers {
                let (pid, token): (Option<i64>, Option<String>) = (w.try_get(0)?, w.try_get(1)?);
                let alive = match (pid.and_then(|p| u32::try_from(p).ok()), token.as_deref()) {
                    (Some(pid), Some(token)) => process_token::start_token(pid).as_deref() == Some(token),
                    _ => false,
                };
                if alive {
                    continue;
                }
                closed += client
                    .execute(
                        "UPDATE agent_sessions SET status = 'failed', error = 'the process running it ended',
                         updated_ms = $1
                         WHERE status = 'running' AND writer_node = $2 AND writer_pid IS NOT DISTINCT FROM $3
                           AND writer_token IS NOT DISTINCT FROM $4",
                        &[&now_ms, &here, &pid, &token],
                    )
                    .await?;
            }
            Ok(usize::try_from(closed).unwrap_or(usize::MAX))
        })
    }

    fn team_task_create(&self, t: &TeamTask) -> Result<TeamTask, StoreError> {
        let t = t.clone();
        self.run("creating a team task", move |client| async move {
            let open: i64 = if t.blocked_by.is_empty() {
                0
            } else {
                client
                    .query_one(
                        "SELECT count(*) FROM team_tasks WHERE team = $1 AND status <> 'done' AND id = ANY($2)",
                        &[&t.team, &t.blocked_by],
                    )
                    .await?
                    .try_get(0)?
            };
            let status = if open > 0 { "blocked" } else { "pending" };
            let blocked = serde_json::to_string(&t.blocked_by).unwrap_or_else(|_| "[]".into());
            let sql = format!(
                "INSERT INTO team_tasks (team, subject, description, priority, status, blocked_by, created_ms,
                                         posted_session, posted_user)
                 VALUES ($1, $2, $3, $4, $5, $6::text::jsonb, $7, $8, $9) RETURNING {TASK_COLUMNS}"
            );
            let row = client
                .query_one(
                    &sql,
                    &[
                        &t.team,
                        &t.subject,
                        &t.description,
                        &t.priority,
                        &status,
                        &blocked,
                        &t.created_ms,
                        &t.posted_session,
                        &t.posted_user,
                    ],
                )
                .await?;
            task_row(&row)
        })
    }

    fn team_tasks(
        &self,
        team: &str,
        filter: TaskFilter,
        order: TaskOrder,
        n: usize,
    ) -> Result<Vec<TeamTask>, StoreError> {
        let status = match filter {
            TaskFilter::Active => "status <> 'done'",
            TaskFilter::Completed => "status = 'done'",
            TaskFilter::All => "true",
        };
        let order = match order {
            TaskOrder::Priority => "priority DESC, id",
            TaskOrder::Newest => "created_ms DESC, id DESC",
        };
        let sql =
            format!("SELECT {TASK_COLUMNS} FROM team_tasks WHERE team = $1 AND {status} ORDER BY {order} LIMIT $2");
        let (team, n) = (team.to_owned(), limit(n));
        self.run(
            "listing team tasks",
            move |client| async move { rows(&client.query(&sql, &[&team, &n]).await?, task_row) },
        )
    }

    fn team_tasks_search(&self, team: &str, query: &str, n: usize) -> Result<Vec<TeamTask>, StoreError> {
        let terms = search_terms(query);
        if terms.is_empty() {
            return Ok(Vec::new());
        }
        // Letters and digits only: none is `to_tsquery` syntax. Any word matches (`|`).
        let query = terms.join(" | ");
        let (team, n) = (team.to_owned(), limit(n));
        self.run("searching team tasks", move |client| async move {
            let sql = format!(
                "SELECT {TASK_COLUMNS} FROM (
                     SELECT *, ts_rank(to_tsvector('english', subject || ' ' || description || ' ' || COALESCE(result, '')),
                                       to_tsquery('english', $2)) AS rank
                     FROM team_tasks
                     WHERE team = $1
                       AND to_tsvector('english', subject || ' ' || description || ' ' || COALESCE(result, ''))
                           @@ to_tsquery('english', $2)
                 ) found ORDER BY rank DESC, id LIMIT $3"
            );
            rows(&client.query(&sql, &[&team, &query, &n]).await?, task_row)
        })
    }

    fn team_task_claim(
        &self,
        team: &str,
        id: Option<i64>,
        owner: &str,
        session: &str,
        now_ms: i64,
        lease_until_ms: i64,
    ) -> Result<Option<TeamTask>, StoreError> {
        let (team, owner, session) = (team.to_owned(), owner.to_owned(), session.to_owned());
        self.run("claiming a team task", move |client| async move {
            // The pick is locked, and rows another claimer holds are skipped: of many claimers
            // one wins each task. A lapsed claim is taken over here (no sweeper need have run).
            let sql = format!(
                "WITH pick AS MATERIALIZED (
                     SELECT id FROM team_tasks WHERE team = $1
                       AND (status = 'pending' OR (status = 'claimed' AND lease_until_ms < $4))
                       AND ($2::bigint IS NULL OR id = $2)
                     ORDER BY priority DESC, id LIMIT 1 FOR UPDATE SKIP LOCKED
                 )
                 UPDATE team_tasks t SET status = 'claimed', owner = $3, claim_session = $6, claimed_ms = $4,
                                         lease_until_ms = $5
                 FROM pick WHERE t.id = pick.id
                 RETURNING {}",
                TASK_COLUMNS.split(", ").map(|c| format!("t.{c}")).collect::<Vec<_>>().join(", ")
            );
            client
                .query_opt(&sql, &[&team, &id, &owner, &now_ms, &lease_until_ms, &session])
                .await?
                .as_ref()
                .map(task_row)
                .transpose()
        })
    }

    fn team_tasks_renew(&self, team: &str, session: &str, lease_until_ms: i64) -> Result<usize, StoreError> {
        let (team, session) = (team.to_owned(), session.to_owned());
        self.run("renewing team task leases", move |client| async move {
            let n = client
                .execute(
                    "UPDATE team_tasks SET lease_until_ms = $3
                     WHERE team = $1 AND claim_session = $2 AND status = 'claimed'",
                    &[&team, &session, &lease_until_ms],
                )
                .await?;
            Ok(usize::try_from(n).unwrap_or(usize::MAX))
        })
    }

    fn team_tasks_expire(&self, team: &str, now_ms: i64) -> Result<Vec<TeamTask>, StoreError> {
        let team = team.to_owned();
        self.run("expiring team task leases", move |client| async move {
            // The lapsed rows are locked as read (a sweeper beside this one skips them), released
            // in the same statement, and returned as they were.
            let sql = format!(
                "WITH lapsed AS MATERIALIZED (
                     SELECT {TASK_COLUMNS} FROM team_tasks
                     WHERE team = $1 AND status = 'claimed' AND lease_until_ms < $2 ORDER BY id FOR UPDATE SKIP LOCKED
                 ), released AS (
                     UPDATE team_tasks t SET status = 'pending', owner = NULL, claim_session = NULL,
                                             claimed_ms = NULL, lease_until_ms = NULL
                     FROM lapsed WHERE t.id = lapsed.id
                 )
                 SELECT * FROM lapsed ORDER BY id"
            );
            rows(&client.query(&sql, &[&team, &now_ms]).await?, task_row)
        })
    }

    fn team_task_complete(
        &self,
        team: &str,
        id: i64,
        owner: &str,
        result: &str,
    ) -> Result<Option<TeamTask>, StoreError> {
        let (team, owner, result) = (team.to_owned(), owner.to_owned(), result.to_owned());
        self.run("completing a team task", move |mut client| async move {
            let tx = client.transaction().await?;
            let sql = format!(
                "UPDATE team_tasks SET status = 'done', result = $4, lease_until_ms = NULL
                 WHERE team = $1 AND id = $2 AND owner = $3 AND status = 'claimed' RETURNING {TASK_COLUMNS}"
            );
            let done = tx.query_opt(&sql, &[&team, &id, &owner, &result]).await?.as_ref().map(task_row).transpose()?;
            if done.is_some() {
                tx.execute(
                    "UPDATE team_tasks SET status = 'pending' WHERE team = $1 AND status = 'blocked'
                       AND NOT EXISTS (SELECT 1 FROM jsonb_array_elements_text(team_tasks.blocked_by) b
                                       JOIN team_tasks d ON d.id = b::bigint WHERE d.status <> 'done')",
                    &[&team],
                )
                .await?;
            }
            tx.commit().await?;
            Ok(done)
        })
    }

    fn team_message_send(&self, m: &TeamMessage) -> Result<i64, StoreError> {
        let m = m.clone();
        self.run("sending a team message", move |mut client| async move {
            let tx = client.transaction().await?;
            // One sender per team at a time: ids commit in the order they are given, so a
            // reader's marker (the last id it read) never passes a message committed later.
            tx.execute("SELECT pg_advisory_xact_lock(hashtext('toolgate-team:' || $1))", &[&m.team]).await?;
            let id: i64 = tx
                .query_one(
                    "INSERT INTO team_messages (team, sender, recipient, content, ts_ms) VALUES ($1, $2, $3, $4, $5)
                     RETURNING id",
                    &[&m.team, &m.from, &m.to, &m.content, &m.ts_ms],
                )
                .await?
                .try_get(0)?;
            tx.commit().await?;
            Ok(id)
        })
    }

    fn team_messages(&self, team: &str, reader: &str, after: Option<i64>) -> Result<Vec<TeamMessage>, StoreError> {
        let (team, reader) = (team.to_owned(), reader.to_owned());
        self.run("reading team messages", move |client| async move {
            // With `after`: the next 200 after that id. Without: the newest 200, oldest first.
            let found = client
                .query(
                    "SELECT * FROM (
                         SELECT id, team, sender, recipient, content, ts_ms FROM team_messages
                         WHERE team = $1 AND id > COALESCE($3::bigint, 0)
                           AND (recipient IS NULL OR recipient = $2 OR sender = $2)
                         ORDER BY CASE WHEN $3::bigint IS NULL THEN -id ELSE id END LIMIT 200
                     ) page ORDER BY id",
                    &[&team, &reader, &after],
                )
                .await?;
            rows(&found, message_row)
        })
    }

    fn team_messages_unread(&self, team: &str, reader: &str, n: usize) -> Result<Vec<TeamMessage>, StoreError> {
        let (team, reader, n) = (team.to_owned(), reader.to_owned(), limit(n));
        self.run("reading team messages", move |mut client| async move {
            let tx = client.transaction().await?;
            // The reader's marker row, locked: two readers of one member take turns, and each
            // message is returned once.
            tx.execute(
                "INSERT INTO team_message_reads (team, reader, last_id) VALUES ($1, $2, 0) ON CONFLICT DO NOTHING",
                &[&team, &reader],
            )
            .await?;
            let last: i64 = tx
                .query_one(
                    "SELECT last_id FROM team_message_reads WHERE team = $1 AND reader = $2 FOR UPDATE",
                    &[&team, &reader],
                )
                .await?
                .try_get(0)?;
            let unread = rows(
                &tx.query(
                    "SELECT id, team, sender, recipient, content, ts_ms FROM team_messages
                     WHERE team = $1 AND sender <> $2 AND (recipient IS NULL OR recipient = $2) AND id > $3
                     ORDER BY id LIMIT $4",
                    &[&team, &reader, &last, &n],
                )
                .await?,
                message_row,
            )?;
            if let Some(newest) = unread.last() {
                tx.execute(
                    "UPDATE team_message_reads SET last_id = greatest(last_id, $3) WHERE team = $1 AND reader = $2",
                    &[&team, &reader, &newest.id],
                )
                .await?;
            }
            tx.commit().await?;
            Ok(unread)
        })
    }

    fn handoff_set(&self, route: &HandoffRoute) -> Result<(), StoreError> {
        let r = route.clone();
        self.run("recording a handoff", move |client| async move {
            client
                .execute(
                    &format!(
                        "INSERT INTO handoff_routes ({ROUTE_COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, $7)
                         ON CONFLICT (conversation) DO UPDATE SET member = excluded.member,
                             from_agent = excluded.from_agent, to_agent = excluded.to_agent,
                             to_session = excluded.to_session, reason = excluded.reason,
                             created_ms = excluded.created_ms"
                    ),
                    &[&r.conversation, &r.user, &r.from_agent, &r.to_agent, &r.to_session, &r.reason, &r.created_ms],
                )
                .await?;
            Ok(())
        })
    }

    fn handoff_route(&self, conversation: &str) -> Result<Option<HandoffRoute>, StoreError> {
        let conversation = conversation.to_owned();
        self.run("reading a handoff", move |client| async move {
            let sql = format!("SELECT {ROUTE_COLUMNS} FROM handoff_routes WHERE conversation = $1");
            client.query_opt(&sql, &[&conversation]).await?.as_ref().map(route_row).transpose()
        })
    }

    fn handoff_to(&self, to_session: &str) -> Result<Option<HandoffRoute>, StoreError> {
        let to_session = to_session.to_owned();
        self.run("reading a handoff", move |client| async move {
            let sql = format!("SELECT {ROUTE_COLUMNS} FROM handoff_routes WHERE to_session = $1 LIMIT 1");
            client.query_opt(&sql, &[&to_session]).await?.as_ref().map(route_row).transpose()
        })
    }

    fn handoff_clear(&self, conversation: &str) -> Result<bool, StoreError> {
        let conversation = conversation.to_owned();
        self.run("clearing a handoff", move |client| async move {
            Ok(client.execute("DELETE FROM handoff_routes WHERE conversation = $1", &[&conversation]).await? > 0)
        })
    }
}
