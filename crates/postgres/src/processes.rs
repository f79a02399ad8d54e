//! [`LocalStore`] on PostgreSQL: which node holds each background process and browser session,
//! as SQLite's (`toolgate-store`'s `processes.rs`), so a call about one that reaches another
//! node finds the node that holds it.

use tokio_postgres::Row;
use toolgate_store::{Local, LocalOwner, LocalStore, StoreError};

use crate::PgStore;
use crate::error::PgError;

const COLUMNS: &str = "id, workspace, for_user, node, node_url, command, started_ms";

fn owner(r: &Row) -> Result<LocalOwner, PgError> {
    Ok(LocalOwner {
        id: r.try_get(0)?,
        workspace: r.try_get(1)?,
        user: r.try_get(2)?,
        node: r.try_get(3)?,
        node_url: r.try_get(4)?,
        command: r.try_get(5)?,
        started_ms: r.try_get(6)?,
    })
}

impl LocalStore for PgStore {
    fn local_record(&self, kind: Local, p: &LocalOwner) -> Result<(), StoreError> {
        let p = p.clone();
        let table = kind.table();
        self.run("recording what a node holds", move |c| async move {
            let sql = format!(
                "INSERT INTO {table} ({COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, $7)
                 ON CONFLICT (id) DO UPDATE SET workspace = excluded.workspace, for_user = excluded.for_user,
                     node = excluded.node, node_url = excluded.node_url, command = excluded.command,
                     started_ms = excluded.started_ms"
            );
            c.execute(sql.as_str(), &[&p.id, &p.workspace, &p.user, &p.node, &p.node_url, &p.command, &p.started_ms])
                .await?;
            Ok(())
        })
    }

    fn local_owner(&self, kind: Local, id: &str) -> Result<Option<LocalOwner>, StoreError> {
        let id = id.to_owned();
        let table = kind.table();
        self.run("finding the node that holds an id", move |c| async move {
            let sql = format!("SELECT {COLUMNS} FROM {table} WHERE id = $1");
            c.query_opt(sql.as_str(), &[&id]).await?.as_ref().map(owner).transpose()
        })
    }

    fn locals_of(&self, kind: Local, workspace: &str, user: &str) -> Result<Vec<LocalOwner>, StoreError> {
        let (workspace, user) = (workspace.to_owned(), user.to_owned());
        let table = kind.table();
        self.run("listing what the nodes hold", move |c| async move {
            let sql = format!(
                "SELECT {COLUMNS} FROM {table} WHERE workspace = $1 AND for_user = $2
                 ORDER BY started_ms, id COLLATE \"C\""
            );
            c.query(sql.as_str(), &[&workspace, &user]).await?.iter().map(owner).collect()
        })
    }

    fn local_forget(&self, kind: Local, id: &str, node: &str) -> Result<bool, StoreError> {
        let (id, node) = (id.to_owned(), node.to_owned());
        let table = kind.table();
        self.run("forgetting what a node held", move |c| async move {
            let sql = format!("DELETE FROM {table} WHERE id = $1 AND node = $2");
            Ok(c.execute(sql.as_str(), &[&id, &node]).await? > 0)
        })
    }

    fn locals_forget_node(&self, node: &str) -> Result<usize, StoreError> {
        let node = node.to_owned();
        self.run("forgetting what a node held in its previous run", move |c| async move {
            let mut n = 0;
            for kind in Local::ALL {
                let sql = format!("DELETE FROM {} WHERE node = $1", kind.table());
                n += c.execute(sql.as_str(), &[&node]).await?;
            }
            Ok(usize::try_from(n).unwrap_or(usize::MAX))
        })
    }
}
