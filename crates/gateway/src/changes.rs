//! Who must hear that their grants changed: each user's MCP sessions on this server watch a
//! counter ([`grant_changes`]) that [`Grants`](crate::Grants) moves whenever it writes a grant
//! (an approved access request, a grant added, revoked, turned on or off), and send their
//! client `notifications/tools/list_changed`, since what the user may list changed.
//!
//! The counters are the process's; a grant written by another process (`toolgate admin` on the
//! same store, another node) is seen by [`follow_store`], which polls the store's revisions and
//! tells every watching user when they moved.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use tokio::sync::watch;
use toolgate_store::{GrantStore, IdentityStore};

/// Everyone's counter, by user name; entries nobody watches are dropped as others are made.
fn counters() -> &'static Mutex<HashMap<String, watch::Sender<u64>>> {
    static COUNTERS: OnceLock<Mutex<HashMap<String, watch::Sender<u64>>>> = OnceLock::new();
    COUNTERS.get_or_init(Mutex::default)
}

/// A receiver that changes whenever a grant that may concern `user` is written in this process.
pub fn grant_changes(user: &str) -> watch::Receiver<u64> {
    let mut all = counters().lock().unwrap_or_else(|e| e.into_inner());
    all.retain(|_, tx| tx.receiver_count() > 0);
    all.entry(user.to_owned()).or_insert_with(|| watch::channel(0).0).subscribe()
}

/// A grant of `subject` changed: its user's sessions are told. A group's or an agent's grant
/// (or `None`: unknown) tells every watching user, who re-list and see what is theirs.
pub(crate) fn granted(subject: Option<&str>, is_user: bool) {
    let all = counters().lock().unwrap_or_else(|e| e.into_inner());
    match subject {
        Some(user) if is_user => {
            if let Some(tx) = all.get(user) {
                tx.send_modify(|n| *n += 1);
            }
        }
        _ => all.values().for_each(|tx| tx.send_modify(|n| *n += 1)),
    }
}

/// Until `stop`, reads the grants and identity revisions every `every` and, when either moved
/// (a grant written, a user added to a group, by any process on this store), tells every
/// watching user, who re-list. A change this process made was told already; telling again only
/// makes a client list once more. An unreadable store is skipped until it reads again.
pub async fn follow_store(
    grants: Arc<dyn GrantStore>,
    identity: Arc<dyn IdentityStore>,
    every: Duration,
    stop: impl std::future::Future<Output = ()>,
) {
    let read = || Some((grants.grants_revision().ok()?, identity.identity_revision().ok()?));
    let mut seen = read();
    tokio::pin!(stop);
    loop {
        tokio::select! {
            () = &mut stop => return,
            () = tokio::time::sleep(every) => {}
        }
        let now = read();
        if now.is_some() && now != seen {
            if seen.is_some() {
                granted(None, false);
            }
            seen = now;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_users_change_reaches_that_user_and_a_groups_reaches_everyone() {
        let mut ann = grant_changes("changes-ann");
        let mut bob = grant_changes("changes-bob");
        granted(Some("changes-ann"), true);
        assert!(ann.has_changed().unwrap() && !bob.has_changed().unwrap());
        ann.mark_unchanged();
        granted(Some("dev"), false);
        assert!(ann.has_changed().unwrap() && bob.has_changed().unwrap());
        bob.mark_unchanged();
        drop(ann);
        // Nobody watches ann any more: her counter goes with the next subscription.
        let _carl = grant_changes("changes-carl");
        assert!(!counters().lock().unwrap().contains_key("changes-ann"));
    }
}
