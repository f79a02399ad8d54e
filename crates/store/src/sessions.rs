//! Agent sessions: one row per agent run (a top-level run, a sub-agent, a delegation), its
//! messages in order, its token usage and cost; team task boards with atomic claims, team
//! messages, and handoff routes. The [`SessionStore`] trait and its SQLite implementation on
//! [`Store`] (tables `agent_sessions`, `agent_messages`, `team_tasks` with its full-text index
//! `team_tasks_fts`, `team_messages`, `team_message_reads`, `handoff_routes`: migrations 4, 9,
//! 10 and the teams migrations in `db.rs`).

use std::fmt::Debug;

use serde::{Deserialize, Serialize};

use crate::error::Context;
use crate::{Store, StoreError};

/// One agent session.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SessionRecord {
    /// Unique id.
    pub id: String,
    /// The agent that runs in it.
    pub agent: String,
    /// The user it acts for.
    pub user: String,
    /// The session that spawned or delegated it, if any.
    pub parent: Option<String>,
    /// `run`, `subagent`, `spawn` or `delegation`.
    pub kind: String,
    /// A short label given by whoever started it.
    pub label: Option<String>,
    /// `running`, `done`, `failed`, `cancelled`, `stopped` or `archived`.
    pub status: String,
    /// Sub-agent depth (0 for a top-level run).
    pub depth: u32,
    /// The task it was given (first user message).
    pub task: String,
    /// The final answer, when done.
    pub result: Option<String>,
    /// Why it failed or stopped.
    pub error: Option<String>,
    /// Prompt (input) tokens used so far.
    pub input_tokens: u64,
    /// Completion (output) tokens used so far.
    pub output_tokens: u64,
    /// Cost so far in US dollars, from the configured price table (0 when unknown).
    pub cost_usd: f64,
    /// Messages in the session.
    pub message_count: u64,
    /// Unix milliseconds.
    pub created_ms: i64,
    /// Unix milliseconds of the last change.
    pub updated_ms: i64,
    /// The only tools it may be offered, when its run was limited to some (a build agent's,
    /// a research spawn's): a continued session never gets more than it had.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub only_tools: Option<Vec<String>>,
}

/// One message of a session.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct MessageRecord {
    /// Position in the session, from 1.
    pub seq: i64,
    /// `system`, `user`, `assistant` or `tool`.
    pub role: String,
    /// The text.
    pub content: String,
    /// For an assistant turn: its tool calls as JSON (`[{"id","name","arguments"}]`).
    pub tool_calls: Option<String>,
    /// For a tool result: the call it answers.
    pub tool_call_id: Option<String>,
    /// For a tool result: the tool's name.
    pub tool_name: Option<String>,
    /// For a tool result: whether it is an error.
    pub is_error: bool,
    /// Unix milliseconds.
    pub ts_ms: i64,
}

/// Filters for [`SessionStore::sessions`].
#[derive(Debug, Clone, Default)]
pub struct SessionFilter<'a> {
    /// Only this agent's sessions.
    pub agent: Option<&'a str>,
    /// Only children of this session.
    pub parent: Option<&'a str>,
    /// Only sessions with this status.
    pub status: Option<&'a str>,
    /// Only this user's sessions.
    pub user: Option<&'a str>,
    /// Only sessions of this kind (`run`, `subagent`, `spawn`, `delegation`).
    pub kind: Option<&'a str>,
    /// At most this many, newest first (after the other filters).
    pub limit: usize,
}

/// One task on a team's board.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TeamTask {
    /// Row id.
    pub id: i64,
    /// The team.
    pub team: String,
    /// One line.
    pub subject: String,
    /// The details.
    pub description: String,
    /// Higher runs first.
    pub priority: i64,
    /// `pending`, `blocked`, `claimed` or `done`.
    pub status: String,
    /// The agent that claimed it.
    pub owner: Option<String>,
    /// Task ids that must be done first.
    pub blocked_by: Vec<i64>,
    /// What the owner reported when completing it.
    pub result: Option<String>,
    /// Unix milliseconds.
    pub created_ms: i64,
    /// When it was claimed (Unix milliseconds), while claimed.
    pub claimed_ms: Option<i64>,
    /// While claimed: when the claim lapses unless renewed (Unix milliseconds); past it,
    /// [`SessionStore::team_tasks_expire`] puts the task back to `pending`.
    pub lease_until_ms: Option<i64>,
    /// While claimed: the session that claimed it; only that session's run renews the lease.
    /// Not shown to models (tool output).
    #[serde(skip)]
    pub claim_session: Option<String>,
    /// The session that posted it: its result goes there. Not shown to models.
    #[serde(skip)]
    pub posted_session: Option<String>,
    /// The user of `posted_session`. Not shown to models.
    #[serde(skip)]
    pub posted_user: Option<String>,
}

/// Which tasks [`SessionStore::team_tasks`] lists.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TaskFilter {
    /// Not done yet: `pending`, `claimed` and `blocked`.
    #[default]
    Active,
    /// Done.
    Completed,
    /// Every task.
    All,
}

/// The order of [`SessionStore::team_tasks`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TaskOrder {
    /// Highest priority first, then oldest first.
    #[default]
    Priority,
    /// Newest first.
    Newest,
}

/// One message between team members.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TeamMessage {
    /// Row id.
    pub id: i64,
    /// The team.
    pub team: String,
    /// The sender.
    pub from: String,
    /// The recipient, or `None` for a broadcast.
    pub to: Option<String>,
    /// The text.
    pub content: String,
    /// Unix milliseconds.
    pub ts_ms: i64,
}

/// A handoff: the messages of a conversation go to another agent's session until cleared.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct HandoffRoute {
    /// The session the user talks to (the first agent's).
    pub conversation: String,
    /// Its user.
    pub user: String,
    /// The agent that handed the conversation off.
    pub from_agent: String,
    /// The agent now answering.
    pub to_agent: String,
    /// Its session.
    pub to_session: String,
    /// Why, as the handing agent wrote it.
    pub reason: String,
    /// Unix milliseconds.
    pub created_ms: i64,
}

/// Agent sessions and what hangs off them: each run's record and usage, its messages in order,
/// team task boards and team messages, and handoff routes. Times are Unix milliseconds given by
/// the caller.
pub trait SessionStore: Send + Sync + Debug {
    /// Records a new session (its message count and usage start at zero), as run by this
    /// process (see [`SessionStore::sessions_fail_orphans`]).
    fn session_create(&self, s: &SessionRecord) -> Result<(), StoreError>;

    /// One session, if it exists.
    fn session(&self, id: &str) -> Result<Option<SessionRecord>, StoreError>;

    /// Sessions matching `filter`, newest first.
    fn sessions(&self, filter: &SessionFilter<'_>) -> Result<Vec<SessionRecord>, StoreError>;

    /// Sets a session's status and error, and its result when given (`None` keeps the result).
    fn session_finish(
        &self,
        id: &str,
        status: &str,
        result: Option<&str>,
        error: Option<&str>,
        now_ms: i64,
    ) -> Result<(), StoreError>;

    /// Adds token usage and cost to a session.
    fn session_add_usage(&self, id: &str, input: u64, output: u64, cost: f64, now_ms: i64) -> Result<(), StoreError>;

    /// Appends a message to a session; returns its sequence number (1, 2, ... per session).
    fn session_append(&self, session: &str, m: &MessageRecord) -> Result<i64, StoreError>;

    /// Appends `messages` to a session in order and adds `usage` (input tokens, output tokens,
    /// cost in US dollars) to it, in one transaction: all of it is stored or none (an agent
    /// turn: the assistant's message, its tool results, the reply's usage). Returns the sequence
    /// numbers given to the messages.
    fn session_append_turn(
        &self,
        session: &str,
        messages: &[MessageRecord],
        usage: Option<(u64, u64, f64)>,
        now_ms: i64,
    ) -> Result<Vec<i64>, StoreError>;

    /// A session's messages in order; `last` keeps only the last so many (0: all).
    fn session_messages(&self, session: &str, last: usize) -> Result<Vec<MessageRecord>, StoreError>;

    /// Marks finished sessions (`done`, `failed`, `cancelled`, `stopped`) idle since before
    /// `before_ms` as `archived`; returns how many.
    fn sessions_archive_idle(&self, before_ms: i64) -> Result<usize, StoreError>;

    /// Marks sessions left `running` by a process that ended as `failed` (called at start);
    /// returns how many. A session another live toolgate runs (a `serve` beside this
    /// `toolgate call`) is left alone.
    fn sessions_fail_orphans(&self, now_ms: i64) -> Result<usize, StoreError>;

    /// Adds a task to a team's board and returns it with its id. It starts `blocked` when any
    /// of `blocked_by` is not done, else `pending`.
    fn team_task_create(&self, t: &TeamTask) -> Result<TeamTask, StoreError>;

    /// A team's tasks that pass `filter`, in `order`, at most `limit` (0: all).
    fn team_tasks(
        &self,
        team: &str,
        filter: TaskFilter,
        order: TaskOrder,
        limit: usize,
    ) -> Result<Vec<TeamTask>, StoreError>;

    /// A team's tasks matching `query` in their subject, description or result, best match
    /// first (full-text, BM25), at most `limit`. Every word of `query` is taken literally
    /// (quotes, `*`, `NEAR`, `-` are not search syntax); a task matching any word is found, one
    /// matching more ranks higher. A query without a letter or digit finds nothing.
    fn team_tasks_search(&self, team: &str, query: &str, limit: usize) -> Result<Vec<TeamTask>, StoreError>;

    /// Claims a pending task for `owner` in `session`, atomically: of many claimers (on any
    /// connection) exactly one wins. A claimed task whose lease ended before `now_ms` is
    /// claimable too (its holder stopped; no sweeper need have run). `id` `None` claims the
    /// next such task (highest priority, then oldest). The claim holds until `lease_until_ms`
    /// unless renewed ([`SessionStore::team_tasks_renew`]). Returns the task when this claim
    /// won, `None` when it is not claimable (any more), or no task is.
    fn team_task_claim(
        &self,
        team: &str,
        id: Option<i64>,
        owner: &str,
        session: &str,
        now_ms: i64,
        lease_until_ms: i64,
    ) -> Result<Option<TeamTask>, StoreError>;

    /// Extends the lease of every task claimed in `session` on `team` to `lease_until_ms`
    /// (by session, not by name: a crashed run's claims lapse even when its member runs again);
    /// returns how many.
    fn team_tasks_renew(&self, team: &str, session: &str, lease_until_ms: i64) -> Result<usize, StoreError>;

    /// Puts the claimed tasks of `team` whose lease ended before `now_ms` back to `pending`, in
    /// one step (of several processes sweeping at once, each task is returned to one). Returns
    /// them as they were, with the owner that let the lease lapse.
    fn team_tasks_expire(&self, team: &str, now_ms: i64) -> Result<Vec<TeamTask>, StoreError>;

    /// Completes a task claimed by `owner` and, in the same step, unblocks the tasks that waited
    /// only on done tasks. Returns the task, or `None` when `owner` does not hold it.
    fn team_task_complete(
        &self,
        team: &str,
        id: i64,
        owner: &str,
        result: &str,
    ) -> Result<Option<TeamTask>, StoreError>;

    /// Sends a team message (`to` = `None` broadcasts); returns its id (increasing).
    fn team_message_send(&self, m: &TeamMessage) -> Result<i64, StoreError>;

    /// Messages `reader` can see on a team (sent to it, broadcast, or sent by it), oldest first,
    /// at most 200: with `after`, the next ones after that id (paging forward); without, the
    /// newest ones, so a new message is never hidden behind old ones. Marks nothing read.
    fn team_messages(&self, team: &str, reader: &str, after: Option<i64>) -> Result<Vec<TeamMessage>, StoreError>;

    /// The messages `reader` has not read yet (sent to it, or broadcast by another member),
    /// oldest first, at most `limit` (0: all), marked read in the same transaction: a message is
    /// returned once, even to concurrent readers on other connections. What it sent itself is
    /// not unread for it.
    fn team_messages_unread(&self, team: &str, reader: &str, limit: usize) -> Result<Vec<TeamMessage>, StoreError>;

    /// Routes `route.conversation` to `route.to_session`, replacing an earlier route of it.
    fn handoff_set(&self, route: &HandoffRoute) -> Result<(), StoreError>;

    /// The route of a conversation, if it was handed off.
    fn handoff_route(&self, conversation: &str) -> Result<Option<HandoffRoute>, StoreError>;

    /// The route that hands a conversation to session `to_session`, if any.
    fn handoff_to(&self, to_session: &str) -> Result<Option<HandoffRoute>, StoreError>;

    /// Removes a conversation's route (its messages go to its own session again); returns
    /// whether there was one.
    fn handoff_clear(&self, conversation: &str) -> Result<bool, StoreError>;
}

const SESSION_COLUMNS: &str = "id, agent, user, parent, kind, label, status, depth, task, result, error,
    input_tokens, output_tokens, cost_usd, created_ms, updated_ms,
    (SELECT COUNT(*) FROM agent_messages m WHERE m.session = s.id),
    (SELECT tools FROM agent_session_tools t WHERE t.session = s.id)";

fn session_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<SessionRecord> {
    Ok(SessionRecord {
        id: r.get(0)?,
        agent: r.get(1)?,
        user: r.get(2)?,
        parent: r.get(3)?,
        kind: r.get(4)?,
        label: r.get(5)?,
        status: r.get(6)?,
        depth: r.get::<_, i64>(7)? as u32,
        task: r.get(8)?,
        result: r.get(9)?,
        error: r.get(10)?,
        input_tokens: r.get::<_, i64>(11)? as u64,
        output_tokens: r.get::<_, i64>(12)? as u64,
        cost_usd: r.get(13)?,
        created_ms: r.get(14)?,
        updated_ms: r.get(15)?,
        message_count: r.get::<_, i64>(16)? as u64,
        // Written by this store as a JSON array; anything else reads as "no tools" (never as
        // "every tool").
        only_tools: r
            .get::<_, Option<String>>(17)?
            .map(|json| serde_json::from_str::<Vec<String>>(&json).unwrap_or_default()),
    })
}

fn task_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<TeamTask> {
    let blocked: String = r.get(7)?;
    Ok(TeamTask {
        id: r.get(0)?,
        team: r.get(1)?,
        subject: r.get(2)?,
        description: r.get(3)?,
        priority: r.get(4)?,
        status: r.get(5)?,
        owner: r.get(6)?,
        blocked_by: serde_json::from_str(&blocked).unwrap_or_default(),
        result: r.get(8)?,
        created_ms: r.get(9)?,
        claimed_ms: r.get(10)?,
        lease_until_ms: r.get(11)?,
        claim_session: r.get(12)?,
        posted_session: r.get(13)?,
        posted_user: r.get(14)?,
    })
}

const TASK_COLUMNS: &str = "id, team, subject, description, priority, status, owner, blocked_by, result, created_ms, claimed_ms, lease_until_ms, claim_session, posted_session, posted_user";

fn message_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<TeamMessage> {
    Ok(TeamMessage {
        id: r.get(0)?,
        team: r.get(1)?,
        from: r.get(2)?,
        to: r.get(3)?,
        content: r.get(4)?,
        ts_ms: r.get(5)?,
    })
}

/// SQLite's "no limit".
fn sql_limit(limit: usize) -> i64 {
    if limit == 0 { -1 } else { i64::try_from(limit).unwrap_or(i64::MAX) }
}

const ROUTE_COLUMNS: &str = "conversation, user, from_agent, to_agent, to_session, reason, created_ms";

fn route_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<HandoffRoute> {
    Ok(HandoffRoute {
        conversation: r.get(0)?,
        user: r.get(1)?,
        from_agent: r.get(2)?,
        to_agent: r.get(3)?,
        to_session: r.get(4)?,
        reason: r.get(5)?,
        created_ms: r.get(6)?,
    })
}

impl SessionStore for Store {
    fn session_create(&self, s: &SessionRecord) -> Result<(), StoreError> {
        let writer = crate::audit::Writer::this_process();
        let tools = s.only_tools.as_ref().map(|t| serde_json::Value::from(t.clone()).to_string());
        self.with(|conn| {
            let tx = conn.unchecked_transaction().doing("creating an agent session")?;
            tx.execute(
                "INSERT INTO agent_sessions (id, agent, user, parent, kind, label, status, depth, task, created_ms,
                                             updated_ms, writer_pid, writer_token)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?10, ?11, ?12)",
                rusqlite::params![
                    s.id,
                    s.agent,
                    s.user,
                    s.parent,
                    s.kind,
                    s.label,
                    s.status,
                    s.depth as i64,
                    s.task,
                    s.created_ms,
                    writer.pid,
                    writer.token
                ],
            )
            .doing("creating an agent session")?;
            if let Some(tools) = tools {
                tx.execute("INSERT INTO agent_session_tools (session, tools) VALUES (?1, ?2)", [&s.id, &tools])
                    .doing("recording an agent session's tools")?;
            }
            tx.commit().doing("creating an agent session")
        })
    }

    fn session(&self, id: &str) -> Result<Option<SessionRecord>, StoreError> {
        self.with(|conn| {
            let sql = format!("SELECT {SESSION_COLUMNS} FROM agent_sessions s WHERE id = ?1");
            let mut stmt = conn.prepare_cached(&sql).doing("reading an agent session")?;
            let mut rows = stmt.query_map([id], session_row).doing("reading an agent session")?;
            rows.next().transpose().doing("reading an agent session")
        })
    }

    fn sessions(&self, filter: &SessionFilter<'_>) -> Result<Vec<SessionRecord>, StoreError> {
        self.with(|conn| {
            let sql = format!(
                "SELECT {SESSION_COLUMNS} FROM agent_sessions s
                 WHERE (?1 IS NULL OR agent = ?1) AND (?2 IS NULL OR parent = ?2) AND (?3 IS NULL OR status = ?3)
                   AND (?5 IS NULL OR user = ?5) AND (?6 IS NULL OR kind = ?6)
                 ORDER BY created_ms DESC, rowid DESC LIMIT ?4"
            );
            let mut stmt = conn.prepare_cached(&sql).doing("listing agent sessions")?;
            let limit = if filter.limit == 0 { -1 } else { filter.limit as i64 };
            let rows = stmt
                .query_map(
                    rusqlite::params![filter.agent, filter.parent, filter.status, limit, filter.user, filter.kind],
                    session_row,
                )
                .doing("listing agent sessions")?;
            rows.collect::<Result<Vec<_>, _>>().doing("listing agent sessions")
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
        self.with(|conn| {
            conn.execute(
                "UPDATE agent_sessions SET status = ?2, result = COALESCE(?3, result), error = ?4, updated_ms = ?5
                 WHERE id = ?1",
                rusqlite::params![id, status, result, error, now_ms],
            )
            .map(drop)
            .doing("updating an agent session")
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
        const DOING: &str = "saving an agent turn";
        self.with(|conn| {
            // IMMEDIATE: the write lock is taken before the next sequence number is read, so
            // two connections appending to one session cannot both take it.
            let tx =
                rusqlite::Transaction::new_unchecked(conn, rusqlite::TransactionBehavior::Immediate).doing(DOING)?;
            let mut seqs = Vec::with_capacity(messages.len());
            if !messages.is_empty() {
                let mut next: i64 = tx
                    .prepare_cached("SELECT COALESCE(MAX(seq), 0) FROM agent_messages WHERE session = ?1")
                    .and_then(|mut s| s.query_row([session], |r| r.get(0)))
                    .doing(DOING)?;
                let mut insert = tx
                    .prepare_cached(
                        "INSERT INTO agent_messages
                             (session, seq, role, content, tool_calls, tool_call_id, tool_name, is_error, ts_ms)
                         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
                    )
                    .doing(DOING)?;
                for m in messages {
                    next += 1;
                    insert
                        .execute(rusqlite::params![
                            session,
                            next,
                            m.role,
                            m.content,
                            m.tool_calls,
                            m.tool_call_id,
                            m.tool_name,
                            m.is_error,
                            m.ts_ms
                        ])
                        .doing(DOING)?;
                    seqs.push(next);
                }
            }
            let (input, output, cost) = usage.unwrap_or_default();
            tx.prepare_cached(
                "UPDATE agent_sessions SET input_tokens = input_tokens + ?2, output_tokens = output_tokens + ?3,
                     cost_usd = cost_usd + ?4, updated_ms = ?5 WHERE id = ?1",
            )
            .and_then(|mut s| s.execute(rusqlite::params![session, input as i64, output as i64, cost, now_ms]))
            .doing(DOING)?;
            tx.commit().doing(DOING)?;
            Ok(seqs)
        })
    }

    fn session_messages(&self, session: &str, last: usize) -> Result<Vec<MessageRecord>, StoreError> {
        self.with(|conn| {
            let mut stmt = conn
                .prepare_cached(
                    "SELECT seq, role, content, tool_calls, tool_call_id, tool_name, is_error, ts_ms FROM (
                        SELECT * FROM agent_messages WHERE session = ?1 ORDER BY seq DESC LIMIT ?2
                     ) ORDER BY seq",
                )
                .doing("reading agent messages")?;
            let limit = if last == 0 { -1 } else { last as i64 };
            let rows = stmt
                .query_map(rusqlite::params![session, limit], |r| {
                    Ok(MessageRecord {
                        seq: r.get(0)?,
                        role: r.get(1)?,
                        content: r.get(2)?,
                        tool_calls: r.get(3)?,
                        tool_call_id: r.get(4)?,
                        tool_name: r.get(5)?,
                        is_error: r.get(6)?,
                        ts_ms: r.get(7)?,
                    })
                })
                .doing("reading agent messages")?;
            rows.collect::<Result<Vec<_>, _>>().doing("reading agent messages")
        })
    }

    fn sessions_archive_idle(&self, before_ms: i64) -> Result<usize, StoreError> {
        self.with(|conn| {
            conn.execute(
                "UPDATE agent_sessions SET status = 'archived'
                 WHERE status IN ('done', 'failed', 'cancelled', 'stopped') AND updated_ms < ?1",
                [before_ms],
            )
            .doing("archiving agent sessions")
        })
    }

    fn sessions_fail_orphans(&self, now_ms: i64) -> Result<usize, StoreError> {
        self.with(|conn| {
            let writers: Vec<(Option<i64>, Option<String>)> = {
                let mut stmt = conn
                    .prepare_cached(
                        "SELECT DISTINCT writer_pid, writer_token FROM agent_sessions WHERE status = 'running'",
                    )
                    .doing("closing orphaned agent sessions")?;
                stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
                    .and_then(|rows| rows.collect::<Result<_, _>>())
                    .doing("closing orphaned agent sessions")?
            };
            let mut closed = 0;
            for (pid, token) in writers {
                if crate::audit::writer_alive(pid, token.as_deref()) {
                    continue;
                }
                closed += conn
                    .execute(
                        "UPDATE agent_sessions SET status = 'failed', error = 'the process running it ended',
                         updated_ms = ?1 WHERE status = 'running' AND writer_pid IS ?2 AND writer_token IS ?3",
                        rusqlite::params![now_ms, pid, token],
                    )
                    .doing("closing orphaned agent sessions")?;
            }
            Ok(closed)
        })
    }

    fn team_task_create(&self, t: &TeamTask) -> Result<TeamTask, StoreError> {
        self.with(|conn| {
            let blocked = serde_json::to_string(&t.blocked_by).unwrap_or_else(|_| "[]".into());
            let open: i64 = if t.blocked_by.is_empty() {
                0
            } else {
                let ids = serde_json::to_string(&t.blocked_by).unwrap_or_else(|_| "[]".into());
                conn.query_row(
                    "SELECT COUNT(*) FROM team_tasks WHERE team = ?1 AND status != 'done'
                       AND id IN (SELECT value FROM json_each(?2))",
                    rusqlite::params![t.team, ids],
                    |r| r.get(0),
                )
                .doing("creating a team task")?
            };
            let status = if open > 0 { "blocked" } else { "pending" };
            let sql = format!(
                "INSERT INTO team_tasks (team, subject, description, priority, status, blocked_by, created_ms,
                                         posted_session, posted_user)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9) RETURNING {TASK_COLUMNS}"
            );
            conn.query_row(
                &sql,
                rusqlite::params![
                    t.team,
                    t.subject,
                    t.description,
                    t.priority,
                    status,
                    blocked,
                    t.created_ms,
                    t.posted_session,
                    t.posted_user
                ],
                task_row,
            )
            .doing("creating a team task")
        })
    }

    fn team_tasks(
        &self,
        team: &str,
        filter: TaskFilter,
        order: TaskOrder,
        limit: usize,
    ) -> Result<Vec<TeamTask>, StoreError> {
        let status = match filter {
            TaskFilter::Active => "status != 'done'",
            TaskFilter::Completed => "status = 'done'",
            TaskFilter::All => "1",
        };
        let order = match order {
            TaskOrder::Priority => "priority DESC, id",
            TaskOrder::Newest => "created_ms DESC, id DESC",
        };
        self.with(|conn| {
            let sql =
                format!("SELECT {TASK_COLUMNS} FROM team_tasks WHERE team = ?1 AND {status} ORDER BY {order} LIMIT ?2");
            let mut stmt = conn.prepare_cached(&sql).doing("listing team tasks")?;
            let rows =
                stmt.query_map(rusqlite::params![team, sql_limit(limit)], task_row).doing("listing team tasks")?;
            rows.collect::<Result<Vec<_>, _>>().doing("listing team tasks")
        })
    }

    fn team_tasks_search(&self, team: &str, query: &str, limit: usize) -> Result<Vec<TeamTask>, StoreError> {
        // Every word quoted, so nothing a model writes is FTS5 syntax.
        let Some(expr) = crate::memory::fts_expression(query) else {
            return Ok(Vec::new());
        };
        self.with(|conn| {
            let columns = TASK_COLUMNS.split(", ").map(|c| format!("t.{c}")).collect::<Vec<_>>().join(", ");
            let sql = format!(
                "SELECT {columns} FROM team_tasks_fts JOIN team_tasks t ON t.id = team_tasks_fts.rowid
                 WHERE team_tasks_fts MATCH ?1 AND t.team = ?2
                 ORDER BY bm25(team_tasks_fts), t.id LIMIT ?3"
            );
            let mut stmt = conn.prepare_cached(&sql).doing("searching team tasks")?;
            let rows = stmt
                .query_map(rusqlite::params![expr, team, sql_limit(limit)], task_row)
                .doing("searching team tasks")?;
            rows.collect::<Result<Vec<_>, _>>().doing("searching team tasks")
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
        self.with(|conn| {
            // One statement: SQLite runs it under the write lock, so of many claimers one wins.
            // A lapsed claim is taken over here rather than waiting for a sweeper, which runs
            // only in a process whose runtime started the team.
            let sql = format!(
                "UPDATE team_tasks SET status = 'claimed', owner = ?3, claim_session = ?6, claimed_ms = ?4,
                                       lease_until_ms = ?5
                 WHERE id = (SELECT id FROM team_tasks WHERE team = ?1
                               AND (status = 'pending' OR (status = 'claimed' AND lease_until_ms < ?4))
                               AND (?2 IS NULL OR id = ?2) ORDER BY priority DESC, id LIMIT 1)
                 RETURNING {TASK_COLUMNS}"
            );
            let mut stmt = conn.prepare_cached(&sql).doing("claiming a team task")?;
            let mut rows = stmt
                .query_map(rusqlite::params![team, id, owner, now_ms, lease_until_ms, session], task_row)
                .doing("claiming a team task")?;
            rows.next().transpose().doing("claiming a team task")
        })
    }

    fn team_tasks_renew(&self, team: &str, session: &str, lease_until_ms: i64) -> Result<usize, StoreError> {
        self.with(|conn| {
            conn.execute(
                "UPDATE team_tasks SET lease_until_ms = ?3 WHERE team = ?1 AND claim_session = ?2 AND status = 'claimed'",
                rusqlite::params![team, session, lease_until_ms],
            )
            .doing("renewing team task leases")
        })
    }

    fn team_tasks_expire(&self, team: &str, now_ms: i64) -> Result<Vec<TeamTask>, StoreError> {
        self.with(|conn| {
            // Most sweeps find nothing: look first, without taking the write lock.
            let any: bool = conn
                .prepare_cached(
                    "SELECT EXISTS (SELECT 1 FROM team_tasks WHERE team = ?1 AND status = 'claimed' AND lease_until_ms < ?2)",
                )
                .and_then(|mut stmt| stmt.query_row(rusqlite::params![team, now_ms], |r| r.get(0)))
                .doing("expiring team task leases")?;
            if !any {
                return Ok(Vec::new());
            }
            // Read and release under one write lock, so each lapsed task is returned to one sweeper.
            let tx = rusqlite::Transaction::new_unchecked(conn, rusqlite::TransactionBehavior::Immediate)
                .doing("expiring team task leases")?;
            let lapsed = {
                let sql = format!(
                    "SELECT {TASK_COLUMNS} FROM team_tasks
                     WHERE team = ?1 AND status = 'claimed' AND lease_until_ms < ?2 ORDER BY id"
                );
                let mut stmt = tx.prepare_cached(&sql).doing("expiring team task leases")?;
                let rows =
                    stmt.query_map(rusqlite::params![team, now_ms], task_row).doing("expiring team task leases")?;
                rows.collect::<Result<Vec<_>, _>>().doing("expiring team task leases")?
            };
            for t in &lapsed {
                tx.execute(
                    "UPDATE team_tasks SET status = 'pending', owner = NULL, claim_session = NULL, claimed_ms = NULL,
                                           lease_until_ms = NULL
                     WHERE id = ?1",
                    [t.id],
                )
                .doing("expiring team task leases")?;
            }
            tx.commit().doing("expiring team task leases")?;
            Ok(lapsed)
        })
    }

    fn team_task_complete(
        &self,
        team: &str,
        id: i64,
        owner: &str,
        result: &str,
    ) -> Result<Option<TeamTask>, StoreError> {
        self.with(|conn| {
            let tx = conn.unchecked_transaction().doing("completing a team task")?;
            let sql = format!(
                "UPDATE team_tasks SET status = 'done', result = ?4, lease_until_ms = NULL
                 WHERE team = ?1 AND id = ?2 AND owner = ?3 AND status = 'claimed' RETURNING {TASK_COLUMNS}"
            );
            let done = {
                let mut stmt = tx.prepare_cached(&sql).doing("completing a team task")?;
                let mut rows = stmt
                    .query_map(rusqlite::params![team, id, owner, result], task_row)
                    .doing("completing a team task")?;
                rows.next().transpose().doing("completing a team task")?
            };
            if done.is_some() {
                tx.execute(
                    "UPDATE team_tasks SET status = 'pending' WHERE team = ?1 AND status = 'blocked'
                       AND NOT EXISTS (SELECT 1 FROM json_each(team_tasks.blocked_by) b
                                       JOIN team_tasks d ON d.id = b.value WHERE d.status != 'done')",
                    [team],
                )
                .doing("unblocking team tasks")?;
            }
            tx.commit().doing("completing a team task")?;
            Ok(done)
        })
    }

    fn team_message_send(&self, m: &TeamMessage) -> Result<i64, StoreError> {
        self.with(|conn| {
            conn.query_row(
                "INSERT INTO team_messages (team, sender, recipient, content, ts_ms) VALUES (?1, ?2, ?3, ?4, ?5)
                 RETURNING id",
                rusqlite::params![m.team, m.from, m.to, m.content, m.ts_ms],
                |r| r.get(0),
            )
            .doing("sending a team message")
        })
    }

    fn team_messages(&self, team: &str, reader: &str, after: Option<i64>) -> Result<Vec<TeamMessage>, StoreError> {
        self.with(|conn| {
            // With `after`: the next 200 after that id (paging forward). Without: the newest 200,
            // oldest first, so new messages are never hidden behind old ones.
            let mut stmt = conn
                .prepare_cached(
                    "SELECT * FROM (
                         SELECT id, team, sender, recipient, content, ts_ms FROM team_messages
                         WHERE team = ?1 AND id > COALESCE(?3, 0) AND (recipient IS NULL OR recipient = ?2 OR sender = ?2)
                         ORDER BY CASE WHEN ?3 IS NULL THEN -id ELSE id END LIMIT 200
                     ) ORDER BY id",
                )
                .doing("reading team messages")?;
            let rows = stmt.query_map(rusqlite::params![team, reader, after], message_row).doing("reading team messages")?;
            rows.collect::<Result<Vec<_>, _>>().doing("reading team messages")
        })
    }

    fn team_messages_unread(&self, team: &str, reader: &str, limit: usize) -> Result<Vec<TeamMessage>, StoreError> {
        self.with(|conn| {
            // The read marker is the last id returned: ids only grow (each is assigned under the
            // write lock), so nothing older can appear behind it. Immediate, so two readers of one
            // member on different connections cannot both take the same messages.
            let tx = rusqlite::Transaction::new_unchecked(conn, rusqlite::TransactionBehavior::Immediate)
                .doing("reading team messages")?;
            let unread = {
                let mut stmt = tx
                    .prepare_cached(
                        "SELECT id, team, sender, recipient, content, ts_ms FROM team_messages
                         WHERE team = ?1 AND sender != ?2 AND (recipient IS NULL OR recipient = ?2)
                           AND id > COALESCE((SELECT last_id FROM team_message_reads WHERE team = ?1 AND reader = ?2), 0)
                         ORDER BY id LIMIT ?3",
                    )
                    .doing("reading team messages")?;
                let rows = stmt
                    .query_map(rusqlite::params![team, reader, sql_limit(limit)], message_row)
                    .doing("reading team messages")?;
                rows.collect::<Result<Vec<_>, _>>().doing("reading team messages")?
            };
            if let Some(last) = unread.last() {
                tx.execute(
                    "INSERT INTO team_message_reads (team, reader, last_id) VALUES (?1, ?2, ?3)
                     ON CONFLICT (team, reader) DO UPDATE SET last_id = max(last_id, excluded.last_id)",
                    rusqlite::params![team, reader, last.id],
                )
                .doing("marking team messages read")?;
            }
            tx.commit().doing("reading team messages")?;
            Ok(unread)
        })
    }

    fn handoff_set(&self, route: &HandoffRoute) -> Result<(), StoreError> {
        self.with(|conn| {
            conn.execute(
                &format!("INSERT OR REPLACE INTO handoff_routes ({ROUTE_COLUMNS}) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)"),
                rusqlite::params![
                    route.conversation,
                    route.user,
                    route.from_agent,
                    route.to_agent,
                    route.to_session,
                    route.reason,
                    route.created_ms
                ],
            )
            .map(drop)
            .doing("recording a handoff")
        })
    }

    fn handoff_route(&self, conversation: &str) -> Result<Option<HandoffRoute>, StoreError> {
        self.with(|conn| {
            let sql = format!("SELECT {ROUTE_COLUMNS} FROM handoff_routes WHERE conversation = ?1");
            let mut stmt = conn.prepare_cached(&sql).doing("reading a handoff")?;
            let mut rows = stmt.query_map([conversation], route_row).doing("reading a handoff")?;
            rows.next().transpose().doing("reading a handoff")
        })
    }

    fn handoff_to(&self, to_session: &str) -> Result<Option<HandoffRoute>, StoreError> {
        self.with(|conn| {
            let sql = format!("SELECT {ROUTE_COLUMNS} FROM handoff_routes WHERE to_session = ?1");
            let mut stmt = conn.prepare_cached(&sql).doing("reading a handoff")?;
            let mut rows = stmt.query_map([to_session], route_row).doing("reading a handoff")?;
            rows.next().transpose().doing("reading a handoff")
        })
    }

    fn handoff_clear(&self, conversation: &str) -> Result<bool, StoreError> {
        self.with(|conn| {
            conn.execute("DELETE FROM handoff_routes WHERE conversation = ?1", [conversation])
                .map(|n| n > 0)
                .doing("clearing a handoff")
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn store() -> (tempfile::TempDir, Store) {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("state.db")).unwrap();
        (dir, store)
    }

    #[test]
    fn sessions_messages_and_usage() {
        let (_dir, store) = store();
        let s = SessionRecord {
            id: "s1".into(),
            agent: "main".into(),
            user: "local".into(),
            kind: "run".into(),
            status: "running".into(),
            task: "do it".into(),
            created_ms: 10,
            ..SessionRecord::default()
        };
        store.session_create(&s).unwrap();
        let child = SessionRecord { id: "s2".into(), parent: Some("s1".into()), created_ms: 11, ..s.clone() };
        store.session_create(&child).unwrap();
        for role in ["user", "assistant", "tool"] {
            let m = MessageRecord { role: role.into(), content: role.into(), ts_ms: 12, ..MessageRecord::default() };
            store.session_append("s1", &m).unwrap();
        }
        store.session_add_usage("s1", 100, 20, 0.5, 13).unwrap();
        store.session_add_usage("s1", 1, 2, 0.25, 14).unwrap();
        store.session_finish("s1", "done", Some("ok"), None, 15).unwrap();
        let got = store.session("s1").unwrap().unwrap();
        assert_eq!((got.input_tokens, got.output_tokens, got.message_count), (101, 22, 3));
        assert!((got.cost_usd - 0.75).abs() < 1e-9);
        assert_eq!((got.status.as_str(), got.result.as_deref()), ("done", Some("ok")));
        let msgs = store.session_messages("s1", 2).unwrap();
        assert_eq!(msgs.iter().map(|m| m.seq).collect::<Vec<_>>(), vec![2, 3]);
        let kids = store.sessions(&SessionFilter { parent: Some("s1"), limit: 20, ..Default::default() }).unwrap();
        assert_eq!(kids.len(), 1);
        assert_eq!(store.sessions_archive_idle(100).unwrap(), 1, "only the finished one");
        // s2 is run by this live process: not an orphan.
        assert_eq!(store.sessions_fail_orphans(200).unwrap(), 0);
        assert_eq!(store.session("s2").unwrap().unwrap().status, "running");
        // Once its writer is a process that ended, it is.
        let mut ended = std::process::Command::new("true").spawn().unwrap();
        let dead_pid = i64::from(ended.id());
        ended.wait().unwrap();
        store
            .with(|conn| {
                conn.execute("UPDATE agent_sessions SET writer_pid = ?1 WHERE id = 's2'", [dead_pid]).doing("test")
            })
            .unwrap();
        assert_eq!(store.sessions_fail_orphans(200).unwrap(), 1);
        assert_eq!(store.session("s2").unwrap().unwrap().status, "failed");
        assert!(store.session("nope").unwrap().is_none());
    }

    #[test]
    fn a_turn_that_fails_to_save_leaves_the_session_as_it_was() {
        let (_dir, store) = store();
        let s = SessionRecord { id: "s1".into(), status: "running".into(), ..SessionRecord::default() };
        store.session_create(&s).unwrap();
        let m = |role: &str, content: &str| MessageRecord {
            role: role.into(),
            content: content.into(),
            ..Default::default()
        };
        store.session_append_turn("s1", &[m("user", "go")], Some((1, 1, 0.5)), 5).unwrap();
        // The second message of the next turn is refused: the first must not stay behind.
        store
            .with(|conn| {
                conn.execute_batch(
                    "CREATE TRIGGER refuse BEFORE INSERT ON agent_messages WHEN NEW.content = 'boom'
                     BEGIN SELECT RAISE(ABORT, 'refused'); END",
                )
                .doing("test")
            })
            .unwrap();
        let err = store.session_append_turn("s1", &[m("assistant", "ok"), m("tool", "boom")], Some((7, 7, 1.0)), 9);
        assert!(err.unwrap_err().to_string().contains("saving an agent turn"));
        let got = store.session("s1").unwrap().unwrap();
        assert_eq!((got.message_count, got.input_tokens, got.output_tokens, got.updated_ms), (1, 1, 1, 5));
        assert!((got.cost_usd - 0.5).abs() < 1e-9);
        // The connection is usable again, numbering on from the stored messages.
        assert_eq!(store.session_append("s1", &m("user", "again")).unwrap(), 2);
    }

    #[test]
    fn team_tasks_claim_once_and_unblock() {
        let (dir, store) = store();
        let t = |subject: &str, blocked_by: Vec<i64>| TeamTask {
            team: "t".into(),
            subject: subject.into(),
            blocked_by,
            ..TeamTask::default()
        };
        let a = store.team_task_create(&t("a", vec![])).unwrap();
        let b = store.team_task_create(&t("b", vec![a.id])).unwrap();
        assert_eq!((a.status.as_str(), b.status.as_str()), ("pending", "blocked"));
        // Many claimers on separate connections: exactly one wins.
        let db = dir.path().join("state.db");
        let winners: usize = std::thread::scope(|scope| {
            let handles: Vec<_> = (0..16)
                .map(|i| {
                    let db = db.clone();
                    scope.spawn(move || {
                        let s = Store::open(&db).unwrap();
                        s.team_task_claim("t", Some(a.id), &format!("agent{i}"), &format!("s{i}"), 1, 2)
                            .unwrap()
                            .is_some() as usize
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).sum()
        });
        assert_eq!(winners, 1);
        let owner = store.team_tasks("t", TaskFilter::All, TaskOrder::Priority, 0).unwrap()[0].owner.clone().unwrap();
        assert!(store.team_task_complete("t", a.id, "someone-else", "x").unwrap().is_none());
        assert!(store.team_task_complete("t", a.id, &owner, "done").unwrap().is_some());
        let tasks = store.team_tasks_search("t", "B", 10).unwrap();
        assert_eq!(tasks[0].status, "pending", "b unblocked");
        store
            .team_message_send(&TeamMessage {
                team: "t".into(),
                from: "x".into(),
                content: "hi".into(),
                ..Default::default()
            })
            .unwrap();
        assert_eq!(store.team_messages("t", "y", None).unwrap().len(), 1);
        for i in 0..250 {
            let m = TeamMessage { team: "t".into(), from: "x".into(), content: format!("m{i}"), ..Default::default() };
            store.team_message_send(&m).unwrap();
        }
        let newest = store.team_messages("t", "y", None).unwrap();
        assert_eq!(newest.len(), 200);
        assert_eq!(newest.last().unwrap().content, "m249", "the newest message is never cut off");
        assert!(newest.windows(2).all(|w| w[0].id < w[1].id), "oldest first");
        let first = store.team_messages("t", "y", Some(0)).unwrap();
        assert_eq!((first[0].content.as_str(), first.len()), ("hi", 200));
        let next = store.team_messages("t", "y", Some(first.last().unwrap().id)).unwrap();
        assert_eq!(next.len(), 51, "paging forward from the last id read");
    }
}
