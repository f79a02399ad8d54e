//! Who must hear that their grants changed: each user's MCP sessions on this server watch a
//! counter ([`grant_changes`]) that [`Grants`](crate::Grants) moves whenever it writes a grant
//! (an approved access request, a grant added, revoked, turned on or off), and send their
//! client `notifications/tools/list_changed`, since what the user may list changed.
//!
//! The counters are the process's: a grant written by another process (`toolgate admin` on
//! the same store) reaches clients on their next `tools/list`, not by a notification.

use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};

use tokio::sync::watch;

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
