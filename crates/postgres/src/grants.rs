//! [`GrantStore`] on PostgreSQL: grants of both kinds and access requests; the same facts and
//! rules as SQLite's (`toolgate-store`'s `grants.rs`). Deciding an access request is one
//! transaction whose first statement moves the request from pending (`UPDATE ... WHERE status =
//! 'pending'`): a second decider, on any node, waits for the first's row lock and then finds
//! nothing pending, so the first decision wins and only it writes a grant.

use deadpool_postgres::GenericClient;
use tokio_postgres::Row;
use toolgate_store::{
    AccessDecision, AccessRequest, AccessStatus, Grant, GrantMode, GrantStore, StoreError, ToolGrant,
};

use crate::PgStore;
use crate::error::PgError;

const GRANT_COLUMNS: &str = "id, subject, server, tool_allow, tool_deny, enabled, config_overrides, mode, expires_ms, \
                             granted_by, request, note, created_ms, arg_rule";
const ACCESS_COLUMNS: &str = "id, requester, for_user, server, tool, reason, status, created_ms, decided_by, decided_ms, message, grant_id, \
     notify_error, notify_failed_ms";

/// How often filing an access request retries when the pending request it collided with was
/// decided in between (each retry needs another decision to land in that instant).
const FILE_ATTEMPTS: usize = 3;

/// Inserts a standing approval unless the same one is there (the decision writes it, and the
/// call that uses the decision again).
pub(crate) async fn insert_approval_grant(c: &impl GenericClient, g: &Grant) -> Result<(), PgError> {
    // A second grant of the same (user, agent, tool, subject) meets `grants_always`.
    c.execute(
        "INSERT INTO grants (subject, agent, tool_allow, mode, arg_subject, granted_by, note, created_ms)
         VALUES ($1, $2, $3, 'allow', $4, $1, $5, $6)
         ON CONFLICT DO NOTHING",
        &[&g.user, &g.agent, &json_list(std::slice::from_ref(&g.tool)), &g.subject, &g.shown, &g.created_ms],
    )
    .await?;
    Ok(())
}

fn json_list(list: &[String]) -> String {
    serde_json::to_string(list).unwrap_or_else(|_| "[]".to_owned())
}

fn bad(what: &str, e: impl std::fmt::Display) -> PgError {
    PgError::Data(format!("{what}: {e}"))
}

fn tool_grant_row(r: &Row) -> Result<ToolGrant, PgError> {
    let list = |i: usize| -> Result<Vec<String>, PgError> {
        let text: String = r.try_get(i)?;
        serde_json::from_str(&text).map_err(|e| bad("a grant's tool list is not a JSON list", e))
    };
    let overrides: String = r.try_get(6)?;
    let mode: String = r.try_get(7)?;
    Ok(ToolGrant {
        id: r.try_get(0)?,
        subject: r.try_get(1)?,
        server: r.try_get(2)?,
        tool_allow: list(3)?,
        tool_deny: list(4)?,
        enabled: r.try_get(5)?,
        config_overrides: serde_json::from_str(&overrides)
            .map_err(|e| bad("a grant's config overrides are not JSON", e))?,
        mode: GrantMode::parse(&mode).ok_or_else(|| PgError::Data(format!("unknown grant mode `{mode}`")))?,
        expires_ms: r.try_get(8)?,
        granted_by: r.try_get(9)?,
        request: r.try_get(10)?,
        note: r.try_get(11)?,
        created_ms: r.try_get(12)?,
        arg_rule: r.try_get(13)?,
    })
}

fn access_row(r: &Row) -> Result<AccessRequest, PgError> {
    let status: String = r.try_get(6)?;
    Ok(AccessRequest {
        id: r.try_get(0)?,
        requester: r.try_get(1)?,
        user: r.try_get(2)?,
        server: r.try_get(3)?,
        tool: r.try_get(4)?,
        reason: r.try_get(5)?,
        status: AccessStatus::parse(&status)
            .ok_or_else(|| PgError::Data(format!("unknown request status `{status}`")))?,
        created_ms: r.try_get(7)?,
        decided_by: r.try_get(8)?,
        decided_ms: r.try_get(9)?,
        message: r.try_get(10)?,
        grant_id: r.try_get(11)?,
        notify_error: r.try_get(12)?,
        notify_failed_ms: r.try_get(13)?,
    })
}

async fn insert_tool_grant(c: &impl GenericClient, g: &ToolGrant) -> Result<i64, PgError> {
    let overrides = if g.config_overrides.is_null() { "{}".to_owned() } else { g.config_overrides.to_string() };
    let row = c
        .query_one(
            "INSERT INTO grants (subject, server, tool_allow, tool_deny, enabled, config_overrides, mode, expires_ms,
                                 granted_by, request, note, created_ms, arg_rule)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)
             RETURNING id",
            &[
                &g.subject,
                &g.server,
                &json_list(&g.tool_allow),
                &json_list(&g.tool_deny),
                &g.enabled,
                &overrides,
                &g.mode.as_str(),
                &g.expires_ms,
                &g.granted_by,
                &g.request,
                &g.note,
                &g.created_ms,
                &g.arg_rule,
            ],
        )
        .await?;
    Ok(row.try_get(0)?)
}

async fn get_access(c: &impl GenericClient, id: i64) -> Result<Option<AccessRequest>, PgError> {
    let sql = format!("SELECT {ACCESS_COLUMNS} FROM access_requests WHERE id = $1");
    c.query_opt(sql.as_str(), &[&id]).await?.as_ref().map(access_row).transpose()
}

impl GrantStore for PgStore {
    fn grants_revision(&self) -> Result<i64, StoreError> {
        self.revision("grants")
    }

    fn grant_add(&self, grant: &Grant) -> Result<(), StoreError> {
        let g = grant.clone();
        self.run_changing("saving an approval grant", move |c| async move { insert_approval_grant(&c, &g).await })
    }

    fn grant_exists(&self, user: &str, agent: &str, tool: &str, subject: &str) -> Result<bool, StoreError> {
        let (user, agent, subject) = (user.to_owned(), agent.to_owned(), subject.to_owned());
        let tools = json_list(&[tool.to_owned()]);
        self.run("checking approval grants", move |c| async move {
            let stmt = c
                .prepare_cached(
                    "SELECT 1 FROM grants WHERE subject = $1 AND agent = $2 AND tool_allow = $3 AND arg_subject = $4
                       AND enabled",
                )
                .await?;
            Ok(c.query_opt(&stmt, &[&user, &agent, &tools, &subject]).await?.is_some())
        })
    }

    fn grants(&self) -> Result<Vec<Grant>, StoreError> {
        self.run("listing approval grants", |c| async move {
            let stmt = c
                .prepare_cached(
                    "SELECT id, subject, agent, tool_allow, arg_subject, note, created_ms FROM grants
                     WHERE arg_subject IS NOT NULL ORDER BY id",
                )
                .await?;
            let rows = c.query(&stmt, &[]).await?;
            rows.iter()
                .map(|r| {
                    let tools: String = r.try_get(3)?;
                    let tools: Vec<String> =
                        serde_json::from_str(&tools).map_err(|e| bad("a grant's tool list is not a JSON list", e))?;
                    Ok(Grant {
                        id: r.try_get(0)?,
                        user: r.try_get(1)?,
                        agent: r.try_get::<_, Option<String>>(2)?.unwrap_or_default(),
                        tool: tools.into_iter().next().unwrap_or_default(),
                        subject: r.try_get(4)?,
                        shown: r.try_get(5)?,
                        created_ms: r.try_get(6)?,
                    })
                })
                .collect()
        })
    }

    fn grant_revoke(&self, id: i64) -> Result<bool, StoreError> {
        self.run_changing("revoking a grant", move |mut c| async move {
            let tx = c.transaction().await?;
            let standing = tx
                .query_opt(
                    "SELECT subject, agent, tool_allow, arg_subject FROM grants
                     WHERE id = $1 AND arg_subject IS NOT NULL FOR UPDATE",
                    &[&id],
                )
                .await?;
            if let Some(row) = standing {
                let (user, agent, tools, subject): (String, Option<String>, String, String) =
                    (row.try_get(0)?, row.try_get(1)?, row.try_get(2)?, row.try_get(3)?);
                let tools: Vec<String> = serde_json::from_str(&tools).unwrap_or_default();
                for tool in tools.iter().filter(|_| agent.is_some()) {
                    let agent = agent.as_deref().unwrap_or_default();
                    crate::approvals::spend_allowed_always(&tx, &user, agent, tool, &subject).await?;
                }
            }
            let removed = tx.execute("DELETE FROM grants WHERE id = $1", &[&id]).await? > 0;
            tx.commit().await?;
            Ok(removed)
        })
    }

    fn tool_grant_add(&self, grant: &ToolGrant) -> Result<i64, StoreError> {
        let g = grant.clone();
        self.run_changing("adding a grant", move |c| async move { insert_tool_grant(&c, &g).await })
    }

    fn tool_grant_get(&self, id: i64) -> Result<Option<ToolGrant>, StoreError> {
        self.run("reading a grant", move |c| async move {
            let stmt = c
                .prepare_cached(&format!("SELECT {GRANT_COLUMNS} FROM grants WHERE id = $1 AND arg_subject IS NULL"))
                .await?;
            c.query_opt(&stmt, &[&id]).await?.as_ref().map(tool_grant_row).transpose()
        })
    }

    fn tool_grants(&self, subjects: Option<&[String]>) -> Result<Vec<ToolGrant>, StoreError> {
        let subjects = subjects.map(<[String]>::to_vec);
        self.run("listing grants", move |c| async move {
            let stmt = c
                .prepare_cached(&format!(
                    "SELECT {GRANT_COLUMNS} FROM grants WHERE arg_subject IS NULL
                       AND ($1::text[] IS NULL OR subject = ANY($1))
                     ORDER BY id"
                ))
                .await?;
            c.query(&stmt, &[&subjects]).await?.iter().map(tool_grant_row).collect()
        })
    }

    fn tool_grant_enable(&self, id: i64, enabled: bool) -> Result<bool, StoreError> {
        self.run_changing("turning a grant on or off", move |c| async move {
            let n = c
                .execute("UPDATE grants SET enabled = $2 WHERE id = $1 AND arg_subject IS NULL", &[&id, &enabled])
                .await?;
            Ok(n > 0)
        })
    }

    fn access_request(&self, request: &AccessRequest) -> Result<(i64, bool), StoreError> {
        let r = request.clone();
        self.run("filing an access request", move |c| async move {
            for _ in 0..FILE_ATTEMPTS {
                // The pending index makes a second filing (from any node) a no-op, and the
                // existing request is the answer.
                let inserted = c
                    .query_opt(
                        "INSERT INTO access_requests (requester, for_user, server, tool, reason, status, created_ms)
                         VALUES ($1, $2, $3, $4, $5, 'pending', $6)
                         ON CONFLICT (requester, coalesce(server, ''), coalesce(tool, '')) WHERE status = 'pending'
                         DO NOTHING
                         RETURNING id",
                        &[&r.requester, &r.user, &r.server, &r.tool, &r.reason, &r.created_ms],
                    )
                    .await?;
                if let Some(row) = inserted {
                    return Ok((row.try_get(0)?, true));
                }
                let existing = c
                    .query_opt(
                        "SELECT id FROM access_requests WHERE status = 'pending' AND requester = $1
                           AND coalesce(server, '') = coalesce($2, '') AND coalesce(tool, '') = coalesce($3, '')",
                        &[&r.requester, &r.server, &r.tool],
                    )
                    .await?;
                if let Some(row) = existing {
                    return Ok((row.try_get(0)?, false));
                }
            }
            Err(PgError::Data("the same access request kept being decided while it was filed again; try again".into()))
        })
    }

    fn access_get(&self, id: i64) -> Result<Option<AccessRequest>, StoreError> {
        self.run("reading an access request", move |c| async move { get_access(&c, id).await })
    }

    fn access_requests(
        &self,
        status: Option<AccessStatus>,
        requesters: Option<&[String]>,
    ) -> Result<Vec<AccessRequest>, StoreError> {
        let status = status.map(AccessStatus::as_str);
        let requesters = requesters.map(<[String]>::to_vec);
        self.run("listing access requests", move |c| async move {
            let stmt = c
                .prepare_cached(&format!(
                    "SELECT {ACCESS_COLUMNS} FROM access_requests
                     WHERE ($1::text IS NULL OR status = $1)
                       AND ($2::text[] IS NULL OR requester = ANY($2))
                     ORDER BY id DESC"
                ))
                .await?;
            c.query(&stmt, &[&status, &requesters]).await?.iter().map(access_row).collect()
        })
    }

    fn access_decide(&self, decision: &AccessDecision) -> Result<Option<AccessRequest>, StoreError> {
        let d = decision.clone();
        self.run_changing("deciding an access request", move |mut c| async move {
            let tx = c.transaction().await?;
            let status = if d.grant.is_some() { AccessStatus::Approved } else { AccessStatus::Rejected };
            // First, and only if still pending: a concurrent decider blocks on this row until
            // the first commits, then matches nothing.
            let moved = tx
                .execute(
                    "UPDATE access_requests SET status = $2, decided_by = $3, decided_ms = $4, message = $5
                     WHERE id = $1 AND status = 'pending'",
                    &[&d.id, &status.as_str(), &d.by, &d.at_ms, &d.message],
                )
                .await?;
            if moved == 0 {
                // No such request, or decided already: it comes back as it stands.
                drop(tx);
                return get_access(&c, d.id).await;
            }
            if let Some(grant) = &d.grant {
                let grant = ToolGrant { request: Some(d.id), ..grant.clone() };
                let grant_id = insert_tool_grant(&tx, &grant).await?;
                tx.execute("UPDATE access_requests SET grant_id = $2 WHERE id = $1", &[&d.id, &grant_id]).await?;
            }
            let decided = get_access(&tx, d.id).await?;
            tx.commit().await?;
            Ok(decided)
        })
    }

    fn access_notify_failed(&self, id: i64, error: &str, at_ms: i64) -> Result<bool, StoreError> {
        let error = error.to_owned();
        self.run("recording that a requester could not be told of a decision", move |c| async move {
            let n = c
                .execute(
                    "UPDATE access_requests SET notify_error = $2, notify_failed_ms = $3
                     WHERE id = $1 AND status <> 'pending'",
                    &[&id, &error, &at_ms],
                )
                .await?;
            Ok(n > 0)
        })
    }
}
