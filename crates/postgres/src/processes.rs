//! [`ProcessStore`] on PostgreSQL: which node holds each background process, as SQLite's
//! (`toolgate-store`'s `processes.rs`), so a `process` call that reaches another node finds the
//! node that runs the process.

use tokio_postgres::Row;
use toolgate_store::{ProcessOwner, ProcessStore, StoreError};

use crate::PgStore;
use crate::error::PgError;

const COLUMNS: &str = "id, workspace, for_user, node, node_url, command, started_ms";

fn owner(r: &Row) -> Result<ProcessOwner, PgError> {
    Ok(ProcessOwner {
        id: r.try_get(0)?,
        workspace: r.try_get(1)?,
        user: r.try_get(2)?,
        node: r.try_get(3)?,
        node_url: r.try_get(4)?,
        command: r.try_get(5)?,
        started_ms: r.try_get(6)?,
    })
}

impl ProcessStore for PgStore {
    fn process_record(&self, p: &ProcessOwner) -> Result<(), StoreError> {
        let p = p.clone();
        self.run("recording a background process", move |c| async move {
            let sql = format!(
                "INSERT INTO background_processes ({COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, $7)
                 ON CONFLICT (id) DO UPDATE SET workspace = excluded.workspace, for_user = excluded.for_user,
                     node = excluded.node, node_url = excluded.node_url, command = excluded.command,
                     started_ms = excluded.started_ms"
            );
            c.execute(sql.as_str(), &[&p.id, &p.workspace, &p.user, &p.node, &p.node_url, &p.command, &p.started_ms])
                .await?;
            Ok(())
        })
    }

    fn process_owner(&self, id: &str) -> Result<Option<ProcessOwner>, StoreError> {
        let id = id.to_owned();
        self.run("finding a background process", move |c| async move {
            let sql = format!("SELECT {COLUMNS} FROM background_processes WHERE id = $1");
            c.query_opt(sql.as_str(), &[&id]).await?.as_ref().map(owner).transpose()
        })
    }

    fn processes_of(&self, workspace: &str, user: &str) -> Result<Vec<ProcessOwner>, StoreError> {
        let (workspace, user) = (workspace.to_owned(), user.to_owned());
        self.run("listing background processes", move |c| async move {
            let sql = format!(
                "SELECT {COLUMNS} FROM background_processes WHERE workspace = $1 AND for_user = $2
                 ORDER BY started_ms, id COLLATE \"C\""
            );
            c.query(sql.as_str(), &[&workspace, &user]).await?.iter().map(owner).collect()
        })
    }

    fn process_forget(&self, id: &str, node: &str) -> Result<bool, StoreError> {
        let (id, node) = (id.to_owned(), node.to_owned());
        self.run("forgetting a background process", move |c| async move {
            Ok(c.execute("DELETE FROM background_processes WHERE id = $1 AND node = $2", &[&id, &node]).await? > 0)
        })
    }

    fn processes_forget_node(&self, node: &str) -> Result<usize, StoreError> {
        let node = node.to_owned();
        self.run("forgetting a node's background processes", move |c| async move {
            let n = c.execute("DELETE FROM background_processes WHERE node = $1", &[&node]).await?;
            Ok(usize::try_from(n).unwrap_or(usize::MAX))
        })
    }
}
