//! [`OutboxStore`]: messages kept after a failed send.

use toolgate_store::OutboxEntry;

use crate::{Area, on_every_backend_of};

fn entry(id: &str, user: &str, created_ms: i64) -> OutboxEntry {
    OutboxEntry {
        id: id.to_owned(),
        user: user.to_owned(),
        channel: "ops".to_owned(),
        address: "alerts@example.com".to_owned(),
        subject: Some("disk".to_owned()),
        content: "the disk is full".to_owned(),
        attempts: 3,
        last_error: "connection refused".to_owned(),
        created_ms,
    }
}

#[test]
fn entries_are_kept_listed_newest_first_by_user_and_deleted() {
    on_every_backend_of(Area::Outbox, |db| {
        let outbox = db.connect().outbox;
        outbox.outbox_put(&entry("a", "alice", 1)).unwrap();
        outbox.outbox_put(&entry("b", "bob", 2)).unwrap();
        outbox.outbox_put(&entry("c", "alice", 3)).unwrap();
        let alice = outbox.outbox_list(Some("alice"), 10).unwrap();
        assert_eq!(alice.iter().map(|e| e.id.as_str()).collect::<Vec<_>>(), ["c", "a"]);
        assert_eq!(alice[1], entry("a", "alice", 1));
        assert_eq!(outbox.outbox_list(None, 2).unwrap().len(), 2);
        assert_eq!(outbox.outbox_len().unwrap(), 3);
        let mut no_subject = entry("b", "bob", 2);
        no_subject.subject = None;
        outbox.outbox_put(&no_subject).unwrap();
        assert_eq!(outbox.outbox_list(Some("bob"), 10).unwrap(), [no_subject]);
        assert!(outbox.outbox_delete("a").unwrap());
        assert!(!outbox.outbox_delete("a").unwrap());
        // Kept across connections (another process sees it).
        assert_eq!(db.connect().outbox.outbox_list(None, 10).unwrap().len(), 2);
        assert_eq!(db.connect().outbox.outbox_len().unwrap(), 2);
    });
}
