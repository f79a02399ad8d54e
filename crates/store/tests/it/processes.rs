//! [`LocalStore`]: which node holds each background process and browser session.

use toolgate_store::{Local, LocalOwner};

use crate::{Area, on_every_backend_of};

fn process(id: &str, user: &str, node: &str, started_ms: i64) -> LocalOwner {
    LocalOwner {
        id: id.to_owned(),
        workspace: "/srv/team".to_owned(),
        user: user.to_owned(),
        node: node.to_owned(),
        node_url: Some(format!("http://{node}.internal:8080/mcp")),
        command: "sleep 60".to_owned(),
        started_ms,
    }
}

#[test]
fn a_process_is_found_from_another_connection_with_its_node_and_user() {
    on_every_backend_of(Area::Processes, |db| {
        let a = db.connect().locals;
        a.local_record(Local::Process, &process("tg-proc-1", "ann", "a", 1)).unwrap();
        let mut no_url = process("tg-proc-2", "ann", "b", 2);
        no_url.node_url = None;
        a.local_record(Local::Process, &no_url).unwrap();
        a.local_record(Local::Process, &process("tg-proc-3", "bob", "a", 3)).unwrap();
        // Another node reads it.
        let b = db.connect().locals;
        assert_eq!(b.local_owner(Local::Process, "tg-proc-1").unwrap(), Some(process("tg-proc-1", "ann", "a", 1)));
        assert_eq!(b.local_owner(Local::Process, "tg-proc-2").unwrap(), Some(no_url.clone()));
        assert_eq!(b.local_owner(Local::Process, "tg-proc-9").unwrap(), None);
        // A user's processes in a workspace, on every node, oldest first; never another user's
        // nor another workspace's.
        let ann: Vec<String> =
            b.locals_of(Local::Process, "/srv/team", "ann").unwrap().into_iter().map(|p| p.id).collect();
        assert_eq!(ann, ["tg-proc-1", "tg-proc-2"]);
        assert!(b.locals_of(Local::Process, "/srv/other", "ann").unwrap().is_empty());
        assert_eq!(b.locals_of(Local::Process, "/srv/team", "bob").unwrap().len(), 1);
    });
}

#[test]
fn only_the_owning_node_forgets_a_process() {
    on_every_backend_of(Area::Processes, |db| {
        let store = db.connect().locals;
        store.local_record(Local::Process, &process("tg-proc-1", "ann", "a", 1)).unwrap();
        store.local_record(Local::Process, &process("tg-proc-2", "ann", "a", 2)).unwrap();
        store.local_record(Local::Process, &process("tg-proc-3", "ann", "b", 3)).unwrap();
        // Node b cannot remove a's row; a can, once.
        assert!(!store.local_forget(Local::Process, "tg-proc-1", "b").unwrap());
        assert!(store.local_forget(Local::Process, "tg-proc-1", "a").unwrap());
        assert!(!store.local_forget(Local::Process, "tg-proc-1", "a").unwrap());
        assert_eq!(store.local_owner(Local::Process, "tg-proc-1").unwrap(), None);
        // A node starting again drops what its previous run held, and nothing of another node.
        assert_eq!(store.locals_forget_node("a").unwrap(), 1);
        let left: Vec<String> =
            store.locals_of(Local::Process, "/srv/team", "ann").unwrap().into_iter().map(|p| p.id).collect();
        assert_eq!(left, ["tg-proc-3"]);
        // Recording the same id again replaces the row (a node moving it cannot happen, but a
        // record written twice must not fail).
        store.local_record(Local::Process, &process("tg-proc-3", "ann", "b", 4)).unwrap();
        assert_eq!(store.local_owner(Local::Process, "tg-proc-3").unwrap().unwrap().started_ms, 4);
    });
}

/// Browser sessions are kept apart from processes: an id of one kind never finds the other's
/// record (a forged `session` naming a process id reaches no node), each kind is listed and
/// forgotten on its own, and a node starting again drops both.
#[test]
fn browser_sessions_are_recorded_apart_from_processes_and_dropped_with_their_node() {
    on_every_backend_of(Area::Processes, |db| {
        let a = db.connect().locals;
        let session = LocalOwner { command: "browser session".to_owned(), ..process("tg-browser-1", "ann", "a", 5) };
        a.local_record(Local::BrowserSession, &session).unwrap();
        a.local_record(Local::Process, &process("tg-proc-1", "ann", "a", 1)).unwrap();
        a.local_record(Local::BrowserSession, &process("tg-browser-2", "ann", "b", 6)).unwrap();
        let b = db.connect().locals;
        assert_eq!(b.local_owner(Local::BrowserSession, "tg-browser-1").unwrap(), Some(session));
        assert_eq!(b.local_owner(Local::BrowserSession, "tg-proc-1").unwrap(), None);
        assert_eq!(b.local_owner(Local::Process, "tg-browser-1").unwrap(), None);
        let ids = |kind| -> Vec<String> {
            b.locals_of(kind, "/srv/team", "ann").unwrap().into_iter().map(|p| p.id).collect()
        };
        assert_eq!(ids(Local::BrowserSession), ["tg-browser-1", "tg-browser-2"]);
        assert_eq!(ids(Local::Process), ["tg-proc-1"]);
        // Closed on its node: only that node's record of that kind goes.
        assert!(!b.local_forget(Local::Process, "tg-browser-1", "a").unwrap());
        assert!(!b.local_forget(Local::BrowserSession, "tg-browser-1", "b").unwrap());
        assert!(b.local_forget(Local::BrowserSession, "tg-browser-2", "b").unwrap());
        // Node a restarts: its session and its process are gone, counted together.
        assert_eq!(b.locals_forget_node("a").unwrap(), 2);
        assert!(ids(Local::BrowserSession).is_empty() && ids(Local::Process).is_empty());
    });
}
