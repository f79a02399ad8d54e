//! [`ProcessStore`]: which node holds each background process.

use toolgate_store::ProcessOwner;

use crate::{Area, on_every_backend_of};

fn process(id: &str, user: &str, node: &str, started_ms: i64) -> ProcessOwner {
    ProcessOwner {
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
        let a = db.connect().processes;
        a.process_record(&process("tg-proc-1", "ann", "a", 1)).unwrap();
        let mut no_url = process("tg-proc-2", "ann", "b", 2);
        no_url.node_url = None;
        a.process_record(&no_url).unwrap();
        a.process_record(&process("tg-proc-3", "bob", "a", 3)).unwrap();
        // Another node reads it.
        let b = db.connect().processes;
        assert_eq!(b.process_owner("tg-proc-1").unwrap(), Some(process("tg-proc-1", "ann", "a", 1)));
        assert_eq!(b.process_owner("tg-proc-2").unwrap(), Some(no_url.clone()));
        assert_eq!(b.process_owner("tg-proc-9").unwrap(), None);
        // A user's processes in a workspace, on every node, oldest first; never another user's
        // nor another workspace's.
        let ann: Vec<String> = b.processes_of("/srv/team", "ann").unwrap().into_iter().map(|p| p.id).collect();
        assert_eq!(ann, ["tg-proc-1", "tg-proc-2"]);
        assert!(b.processes_of("/srv/other", "ann").unwrap().is_empty());
        assert_eq!(b.processes_of("/srv/team", "bob").unwrap().len(), 1);
    });
}

#[test]
fn only_the_owning_node_forgets_a_process() {
    on_every_backend_of(Area::Processes, |db| {
        let store = db.connect().processes;
        store.process_record(&process("tg-proc-1", "ann", "a", 1)).unwrap();
        store.process_record(&process("tg-proc-2", "ann", "a", 2)).unwrap();
        store.process_record(&process("tg-proc-3", "ann", "b", 3)).unwrap();
        // Node b cannot remove a's row; a can, once.
        assert!(!store.process_forget("tg-proc-1", "b").unwrap());
        assert!(store.process_forget("tg-proc-1", "a").unwrap());
        assert!(!store.process_forget("tg-proc-1", "a").unwrap());
        assert_eq!(store.process_owner("tg-proc-1").unwrap(), None);
        // A node starting again drops what its previous run held, and nothing of another node.
        assert_eq!(store.processes_forget_node("a").unwrap(), 1);
        let left: Vec<String> = store.processes_of("/srv/team", "ann").unwrap().into_iter().map(|p| p.id).collect();
        assert_eq!(left, ["tg-proc-3"]);
        // Recording the same id again replaces the row (a node moving it cannot happen, but a
        // record written twice must not fail).
        store.process_record(&process("tg-proc-3", "ann", "b", 4)).unwrap();
        assert_eq!(store.process_owner("tg-proc-3").unwrap().unwrap().started_ms, 4);
    });
}
