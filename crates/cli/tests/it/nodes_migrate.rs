//! `toolgate admin migrate --from sqlite:WS --to postgres://...` (issue 29): a single node's
//! state moved into the database several nodes will share, then served from there: the keys
//! people hold still work, grants still apply, and the audit log verifies to the same head hash.

use std::process::Command;

use toolgate_testkit::postgres::Cluster;
use toolgate_testkit::serve::HttpServer;

use crate::support::gateway::{Client, admin};

const TOOLGATE: &str = env!("CARGO_BIN_EXE_toolgate");
const SHARED_KEY: &str = "5b5b5b5b5b5b5b5b5b5b5b5b5b5b5b5b5b5b5b5b5b5b5b5b5b5b5b5b5b5b5b5b";

fn toolgate(ws: &std::path::Path, args: &[&str]) -> (bool, String, String) {
    let out = Command::new(TOOLGATE)
        .env("TOOLGATE_SECRET_KEY", SHARED_KEY)
        .arg("--workspace")
        .arg(ws)
        .args(args)
        .output()
        .unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn verified(ws: &std::path::Path) -> serde_json::Value {
    let (ok, out, err) = toolgate(ws, &["audit", "verify", "--json"]);
    assert!(ok, "{out}{err}");
    serde_json::from_str(out.trim()).unwrap()
}

#[test]
fn a_nodes_state_moves_into_the_shared_database_and_is_served_from_there() {
    let cluster = Cluster::start().unwrap_or_else(|e| panic!("{e}"));
    let url = cluster.database().unwrap_or_else(|e| panic!("{e}"));
    let ws = toolgate_testkit::serve::workspace();
    let gateway = "[gateway]\nenabled = true\ndefault_tools = [\"echo\"]\n";
    std::fs::write(ws.path().join("toolgate.toml"), gateway).unwrap();
    admin(ws.path(), &["user", "add", "ann", "--group", "devs"]);
    let key = admin(ws.path(), &["key", "create", "--user", "ann"]);
    admin(ws.path(), &["grant", "add", "--to", "devs", "--tool", "time"]);
    for message in ["one", "two", "three"] {
        let (ok, out, err) = toolgate(ws.path(), &["call", "echo", &format!(r#"{{"message":"{message}"}}"#)]);
        assert!(ok, "{out}{err}");
    }
    let before = verified(ws.path());
    assert_eq!(before["rows"], 3, "{before}");
    let local = toolgate::store::Store::open(&ws.path().join(".toolgate/state.db")).unwrap();
    let def = r#"{"name": "count_lines", "description": "Count lines.", "command": "wc -l < {{.path}}",
        "parameters": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}}"#;
    toolgate::extensions::add_custom_tool(&local, def).unwrap();
    drop(local);

    let from = format!("sqlite:{}", ws.path().display());
    let (ok, out, err) = toolgate(ws.path(), &["admin", "migrate", "--from", &from, "--to", &url]);
    assert!(ok, "{out}{err}");
    assert!(out.contains("2 principals, 1 memberships"), "ann and her group: {out}");
    assert!(out.contains("1 API keys") && out.contains("1 tool grants") && out.contains("3 audit rows"), "{out}");
    assert!(out.contains("1 custom tools"), "{out}");

    // The node now keeps its state in the shared database.
    std::fs::write(ws.path().join("toolgate.toml"), format!("{gateway}\n[store]\nurl = \"{url}\"\n")).unwrap();
    let after = verified(ws.path());
    assert_eq!(after["ends"]["head_hash"], before["ends"]["head_hash"], "the same chain, to the same head");
    assert_eq!(after["rows"], 3);
    let (_, tail, _) = toolgate(ws.path(), &["audit", "--json"]);
    assert!(["one", "two", "three"].iter().all(|m| tail.contains(&format!(r#"\"message\":\"{m}\""#))), "{tail}");
    assert!(admin(ws.path(), &["user", "list"]).contains("ann"));
    let (ok, tools, err) = toolgate(ws.path(), &["tools", "custom"]);
    assert!(ok && tools.contains("count_lines"), "the custom tool is read from the shared database: {tools}{err}");

    // A second move into the same database is refused before anything is written.
    let (ok, out, err) = toolgate(ws.path(), &["admin", "migrate", "--from", &from, "--to", &url]);
    assert!(!ok && err.contains("already holds state"), "{out}{err}");
    let (ok, _, err) = toolgate(ws.path(), &["admin", "migrate", "--from", "state.db", "--to", &url]);
    assert!(!ok && err.contains("expected sqlite:PATH"), "{err}");

    // A database that fails after the row-for-row copy committed (a trigger refusing custom
    // tools, as a full disk would): the error says what the database holds and what to do, and
    // a run into it as it is is refused with nothing more written.
    let broken = cluster.database().unwrap_or_else(|e| panic!("{e}"));
    let scratch = tempfile::tempdir().unwrap();
    drop(shared_stores(&broken, scratch.path()));
    crate::nodes_config::psql(
        &broken,
        &[
            "CREATE FUNCTION refuse() RETURNS trigger LANGUAGE plpgsql AS $$BEGIN RAISE EXCEPTION 'disk full'; END$$",
            "CREATE TRIGGER refuse BEFORE INSERT ON custom_tools FOR EACH ROW EXECUTE FUNCTION refuse()",
        ],
    );
    let (ok, out, err) = toolgate(ws.path(), &["admin", "migrate", "--from", &from, "--to", &broken]);
    let partway = "adding custom tool count_lines failed and the move stopped partway: the PostgreSQL database now \
                   holds the 1 rows copied row for row";
    assert!(!ok && err.contains(partway), "{out}{err}");
    let held = "2 principals, 1 memberships, 1 API keys, 0 secrets, 0 routines, 0 of the 1 custom tools from this node";
    assert!(err.contains(held) && err.contains("drop and recreate the database"), "{err}");
    assert!(err.contains("What failed: ") && err.trim_end().ends_with("disk full"), "the cause last: {err}");
    let (ok, out, err) = toolgate(ws.path(), &["admin", "migrate", "--from", &from, "--to", &broken]);
    assert!(!ok && err.contains("rows in principals") && err.contains("stopped partway"), "{out}{err}");
    assert_eq!(shared_stores(&broken, scratch.path()).identity.principals(None).unwrap().len(), 2, "nothing more");

    // ann's key, made before the move, works on a node serving from the shared database, and
    // her group's grant applies.
    let server = HttpServer::start_with_env(TOOLGATE, ws, &[], &[("TOOLGATE_SECRET_KEY", SHARED_KEY)]);
    let client = Client::connect(&server.url, &key);
    let listed = client.send(r#"{"jsonrpc":"2.0","id":2,"method":"tools/list"}"#);
    assert!(listed.contains(r#""name":"time""#), "{listed}");
    let reply = client.send(
        r#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"echo","arguments":{"message":"after"}}}"#,
    );
    assert!(reply.contains(r#""isError":false"#), "{reply}");
    drop(server);
    drop(cluster);
}

/// Now in Unix milliseconds.
fn now_ms() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as i64
}

/// The stores a node on the database at `url` uses (a scratch SQLite file for what stays local).
fn shared_stores(url: &str, scratch: &std::path::Path) -> toolgate::store::Stores {
    let config = toolgate::config::StoreConfig { url: Some(url.to_owned()), ..Default::default() };
    toolgate::state::open(&config, &scratch.join("scratch.db")).unwrap_or_else(|e| panic!("{e}"))
}

/// What a node left in its SQLite file besides identities and the audit log: an agent session
/// with its messages, a team's board and mailbox (one message already read by the lead), a
/// handoff route, a finished job and one the node was running, a pending approval, an access
/// request. Returns the approval's id.
fn seed_the_rest(db: &std::path::Path) -> i64 {
    use toolgate::store::*;
    let store = Store::open(db).unwrap();
    let now = now_ms();
    let session = SessionRecord {
        id: "sess-trip".into(),
        agent: "planner".into(),
        user: "ann".into(),
        kind: "run".into(),
        status: "done".into(),
        task: "plan the Lisbon trip".into(),
        result: Some("booked".into()),
        input_tokens: 120,
        output_tokens: 40,
        cost_usd: 0.25,
        created_ms: now - 5_000,
        updated_ms: now - 4_000,
        only_tools: Some(vec!["read".into()]),
        ..Default::default()
    };
    store.session_create(&session).unwrap();
    for (role, content) in [("user", "plan the Lisbon trip"), ("assistant", "booked the 9:00 flight")] {
        let m = MessageRecord { role: role.into(), content: content.into(), ts_ms: now - 4_500, ..Default::default() };
        store.session_append("sess-trip", &m).unwrap();
    }
    let task = |subject: &str, blocked_by: Vec<i64>| TeamTask {
        team: "crew".into(),
        subject: subject.into(),
        description: format!("{subject}, carefully"),
        status: "pending".into(),
        blocked_by,
        created_ms: now - 3_000,
        ..Default::default()
    };
    let first = store.team_task_create(&task("pack the bags", vec![])).unwrap();
    store.team_task_create(&task("board the plane", vec![first.id])).unwrap();
    let note = TeamMessage {
        team: "crew".into(),
        from: "lead".into(),
        content: "gate B12".into(),
        ts_ms: now - 2_000,
        ..Default::default()
    };
    store.team_message_send(&note).unwrap();
    assert_eq!(store.team_messages_unread("crew", "dev", 0).unwrap().len(), 1, "dev reads it before the move");
    store
        .handoff_set(&HandoffRoute {
            conversation: "conv-1".into(),
            user: "ann".into(),
            from_agent: "main".into(),
            to_agent: "planner".into(),
            to_session: "sess-trip".into(),
            reason: "travel".into(),
            created_ms: now - 1_000,
        })
        .unwrap();
    let job = |id: &str, state: &str| JobRecord {
        id: id.into(),
        user: "ann".into(),
        session: "default".into(),
        title: format!("job {id}"),
        description: "compile".into(),
        mode: "local".into(),
        project_dir: ".".into(),
        state: state.into(),
        created_ms: now - 2_000,
        spec: "{}".into(),
        ..Default::default()
    };
    store
        .job_create(&JobRecord {
            result: Some("built".into()),
            finished_ms: Some(now - 1_500),
            ..job("job-done", "completed")
        })
        .unwrap();
    store
        .job_create(&JobRecord {
            lease_owner: Some("node-a".into()),
            lease_until_ms: Some(now + 60_000),
            ..job("job-run", "queued")
        })
        .unwrap();
    assert!(store.job_start("job-run", "node-a", now - 1_000).unwrap(), "the node was running it when it stopped");
    let approval = ApprovalRecord {
        id: 0,
        call_id: "call-1".into(),
        user: "ann".into(),
        agent: "main".into(),
        session: "default".into(),
        tool: "write".into(),
        server: None,
        subject: "path:notes.txt".into(),
        args_digest: "d1".into(),
        shown: serde_json::json!({"params": {"path": "notes.txt"}}),
        reason: "write asks".into(),
        policy_revision: "rev1".into(),
        batch: None,
        created_ms: now - 1_000,
        expires_ms: now + 3_600_000,
        status: ApprovalStatus::Pending,
        decided_by: None,
        decided_ms: None,
        message: None,
        notify_error: None,
        used_ms: None,
        fallback_ms: None,
    };
    let approval_id = store.approval_add(&approval).unwrap();
    let request = AccessRequest {
        id: 0,
        requester: "ann".into(),
        user: "ann".into(),
        server: None,
        tool: Some("exec".into()),
        reason: "to build the site".into(),
        status: AccessStatus::Pending,
        created_ms: now - 500,
        decided_by: None,
        decided_ms: None,
        message: None,
        grant_id: None,
        notify_error: None,
        notify_failed_ms: None,
    };
    store.access_request(&request).unwrap();
    approval_id
}

/// Everything else a single node keeps moves too, as a restart on the shared database would find
/// it: ann's agent session and its messages (`toolgate agent sessions`/`history`), the team's
/// board and mailbox with its read markers, the handoff route, the job history (a job under a
/// live lease refuses the move with nothing written; once its lease lapsed it is copied as it
/// was and the shared database's sweep ends it `failed: interrupted`), the pending approval (still
/// pending, and decided on the new database), the access request, and ann's managed note,
/// found by `memory_search` on a node serving from PostgreSQL. A second move changes nothing;
/// a source row PostgreSQL cannot hold stops a move into a fresh database with nothing written.
#[test]
fn sessions_teams_jobs_approvals_requests_and_memory_move_too() {
    use toolgate::store::{AccessStatus, ApprovalFilter, ApprovalStatus, SessionFilter, TaskFilter, TaskOrder};

    let cluster = Cluster::start().unwrap_or_else(|e| panic!("{e}"));
    let url = cluster.database().unwrap_or_else(|e| panic!("{e}"));
    let ws = toolgate_testkit::serve::workspace();
    let config = "[gateway]\nenabled = true\ndefault_tools = [\"memory_write\", \"memory_search\", \"memory_read\"]\n\n\
         [approval]\nmode = \"never\"\n\n[memory]\nmode = \"managed\"\n\n[memory.embeddings]\nprovider = \"none\"\n";
    std::fs::write(ws.path().join("toolgate.toml"), config).unwrap();
    admin(ws.path(), &["user", "add", "ann"]);
    admin(ws.path(), &["user", "add", "bob"]);
    let ann = admin(ws.path(), &["key", "create", "--user", "ann"]);
    let bob = admin(ws.path(), &["key", "create", "--user", "bob"]);

    // ann writes a managed note through the node while it keeps everything in SQLite.
    let mut server = HttpServer::start_with_env(TOOLGATE, ws, &[], &[("TOOLGATE_SECRET_KEY", SHARED_KEY)]);
    let note = serde_json::json!({"target": "memory/trip.md", "content": "The flight to Lisbon launches at nine."});
    let (failed, wrote) = crate::nodes_shared::tool_call(&server, &ann, "memory_write", note);
    assert!(!failed, "{wrote}");
    let ws = std::mem::replace(&mut server.ws, tempfile::tempdir().unwrap());
    drop(server);
    let db = ws.path().join(".toolgate/state.db");
    let approval_id = seed_the_rest(&db);

    // job-run is held under a lease that has not lapsed: a toolgate may still be running it, so
    // the move is refused, naming it, with nothing written (the next move into the same
    // database, refused if it held anything, goes through).
    let from = format!("sqlite:{}", ws.path().display());
    let (ok, out, err) = toolgate(ws.path(), &["admin", "migrate", "--from", &from, "--to", &url]);
    assert!(!ok && err.contains("1 jobs (job-run) are held under a lease that has not lapsed"), "{out}{err}");
    assert!(err.contains("Stop the toolgate that runs them") && err.contains("Nothing was written"), "{err}");
    // Its toolgate stopped: the lease lapses.
    let lapsed_at = now_ms() - 1;
    let store = toolgate::store::Store::open(&db).unwrap();
    assert_eq!(toolgate::store::JobStore::jobs_renew(&store, "node-a", lapsed_at).unwrap(), ["job-run"]);
    drop(store);
    let (ok, out, err) = toolgate(ws.path(), &["admin", "migrate", "--from", &from, "--to", &url]);
    assert!(ok, "{out}{err}");
    for moved in [
        "1 agent sessions",
        "2 session messages",
        "2 team tasks",
        "1 team messages",
        "1 mailbox read markers",
        "1 handoff routes",
        "2 jobs",
        "1 approvals",
        "1 access requests",
        "1 memory notes",
        "(1 jobs whose lease had lapsed, copied as they were",
        "not moved: background process records",
    ] {
        assert!(out.contains(moved), "{moved:?} in {out}");
    }

    std::fs::write(ws.path().join("toolgate.toml"), format!("{config}\n[store]\nurl = \"{url}\"\n")).unwrap();
    let scratch = tempfile::tempdir().unwrap();
    let pg = shared_stores(&url, scratch.path());

    // The session and its messages, through the CLI of a node on PostgreSQL.
    let (ok, sessions, err) = toolgate(ws.path(), &["agent", "sessions", "--json"]);
    assert!(ok, "{err}");
    let sessions: serde_json::Value = serde_json::from_str(&sessions).unwrap();
    assert_eq!(sessions[0]["id"], "sess-trip", "{sessions}");
    assert_eq!((sessions[0]["message_count"].as_u64(), sessions[0]["user"].as_str()), (Some(2), Some("ann")));
    assert_eq!(sessions[0]["only_tools"], serde_json::json!(["read"]));
    let (ok, history, err) = toolgate(ws.path(), &["agent", "history", "sess-trip", "--json"]);
    assert!(ok && history.contains("booked the 9:00 flight"), "{history}{err}");

    // The team's board (ids and the dependency kept), its mailbox and who read what.
    let tasks = pg.sessions.team_tasks("crew", TaskFilter::All, TaskOrder::Newest, 0).unwrap();
    assert_eq!(tasks.len(), 2);
    let board = tasks.iter().find(|t| t.subject == "board the plane").unwrap();
    let pack = tasks.iter().find(|t| t.subject == "pack the bags").unwrap();
    assert_eq!(board.blocked_by, vec![pack.id]);
    assert_eq!(pg.sessions.team_tasks_search("crew", "bags", 5).unwrap()[0].id, pack.id, "searched by PostgreSQL");
    assert!(pg.sessions.team_messages_unread("crew", "dev", 0).unwrap().is_empty(), "dev had read it");
    let unread = pg.sessions.team_messages_unread("crew", "ops", 0).unwrap();
    assert_eq!(unread.iter().map(|m| m.content.as_str()).collect::<Vec<_>>(), ["gate B12"]);
    let next = pg.sessions.team_task_create(&toolgate::store::TeamTask {
        team: "crew".into(),
        subject: "land".into(),
        status: "pending".into(),
        ..Default::default()
    });
    assert!(next.unwrap().id > board.id, "new tasks are numbered after the moved ones");
    assert_eq!(pg.sessions.handoff_route("conv-1").unwrap().unwrap().to_session, "sess-trip");

    // Job history, with the job whose lease lapsed copied as it was, then ended by the shared
    // database's own sweep, with its event, as on one node.
    let done = pg.jobs.job("job-done").unwrap().unwrap();
    assert_eq!((done.state.as_str(), done.result.as_deref()), ("completed", Some("built")));
    let copied = pg.jobs.job("job-run").unwrap().unwrap();
    assert_eq!(
        (copied.state.as_str(), copied.lease_owner.as_deref(), copied.lease_until_ms),
        ("running", Some("node-a"), Some(lapsed_at))
    );
    assert_eq!(pg.jobs.jobs_interrupt_expired(now_ms()).unwrap(), ["job-run"]);
    let run = pg.jobs.job("job-run").unwrap().unwrap();
    assert_eq!(
        (run.state.as_str(), run.error.as_deref(), run.lease_owner.as_deref()),
        ("failed", Some("interrupted"), None)
    );
    let events = pg.jobs.job_events("job-run", 0, 100).unwrap();
    assert_eq!(events.last().unwrap().text, toolgate::store::JOB_INTERRUPTED_EVENT, "{events:?}");
    assert_eq!(events.len(), 3, "created, started, interrupted: {events:?}");
    assert!(events.windows(2).all(|w| w[0].seq < w[1].seq), "{events:?}");

    // The approval is still pending, under its id, and a person decides it on the new database.
    let (ok, pending, err) = toolgate(ws.path(), &["approvals", "pending", "--json"]);
    assert!(ok && pending.contains(&format!("\"id\":{approval_id}")), "{pending}{err}");
    let (ok, out, err) = toolgate(ws.path(), &["approvals", "approve", &approval_id.to_string(), "--as", "lee"]);
    assert!(ok, "{out}{err}");
    let decided = pg.approvals.approvals(&ApprovalFilter::default()).unwrap();
    assert_eq!(
        (decided.len(), decided[0].status, decided[0].decided_by.as_deref()),
        (1, ApprovalStatus::Allowed, Some("lee"))
    );

    // The access request.
    let requests = pg.grants.access_requests(Some(AccessStatus::Pending), None).unwrap();
    assert_eq!(
        (requests.len(), requests[0].tool.as_deref(), requests[0].reason.as_str()),
        (1, Some("exec"), "to build the site")
    );

    // ann's managed note, found through a node on PostgreSQL; bob's search does not find it.
    let server = HttpServer::start_with_env(TOOLGATE, ws, &[], &[("TOOLGATE_SECRET_KEY", SHARED_KEY)]);
    let (failed, found) =
        crate::nodes_shared::tool_call(&server, &ann, "memory_search", serde_json::json!({"query": "Lisbon flight"}));
    assert!(!failed && found.contains("memory/trip.md"), "{found}");
    let (_, bobs) =
        crate::nodes_shared::tool_call(&server, &bob, "memory_search", serde_json::json!({"query": "Lisbon"}));
    assert!(!bobs.contains("memory/trip.md"), "{bobs}");
    let mut server = server;
    let ws = std::mem::replace(&mut server.ws, tempfile::tempdir().unwrap());
    drop(server);

    // A second move is refused, and changes nothing.
    let before = pg.sessions.sessions(&SessionFilter { limit: 100, ..Default::default() }).unwrap();
    let (ok, out, err) = toolgate(ws.path(), &["admin", "migrate", "--from", &from, "--to", &url]);
    assert!(!ok && err.contains("already holds state") && err.contains("rows in agent_sessions"), "{out}{err}");
    assert_eq!(pg.sessions.sessions(&SessionFilter { limit: 100, ..Default::default() }).unwrap(), before);
    assert_eq!(pg.jobs.job("job-run").unwrap().unwrap(), run);

    // A message PostgreSQL cannot hold (a NUL character) stops a move into a fresh database
    // before anything is written, naming the row and what to do.
    let store = toolgate::store::Store::open(&db).unwrap();
    let bad = toolgate::store::MessageRecord {
        role: "tool".into(),
        content: "bytes\0after".into(),
        ts_ms: now_ms(),
        ..Default::default()
    };
    toolgate::store::SessionStore::session_append(&store, "sess-trip", &bad).unwrap();
    drop(store);
    let fresh = cluster.database().unwrap_or_else(|e| panic!("{e}"));
    let (ok, out, err) = toolgate(ws.path(), &["admin", "migrate", "--from", &from, "--to", &fresh]);
    assert!(!ok, "{out}");
    assert!(
        err.contains("agent_messages row 3") && err.contains("NUL") && err.contains("Nothing was written"),
        "{err}"
    );
    // An agent session a live process runs (this test's) stops the move too: its rows would
    // change in the file after they were copied.
    let store = toolgate::store::Store::open(&db).unwrap();
    let live = toolgate::store::SessionRecord {
        id: "sess-live".into(),
        agent: "planner".into(),
        user: "ann".into(),
        kind: "run".into(),
        status: "running".into(),
        task: "still thinking".into(),
        created_ms: now_ms(),
        updated_ms: now_ms(),
        ..Default::default()
    };
    toolgate::store::SessionStore::session_create(&store, &live).unwrap();
    let (ok, out, err) = toolgate(ws.path(), &["admin", "migrate", "--from", &from, "--to", &fresh]);
    assert!(!ok && err.contains("still running") && err.contains("agent sessions are in progress"), "{out}{err}");
    let running = toolgate::store::SessionStore::session(&store, "sess-live").unwrap().unwrap();
    assert_eq!(running.status, "running", "a live process's session is left alone");
    drop(store);
    let untouched = shared_stores(&fresh, scratch.path());
    assert!(untouched.identity.principals(None).unwrap().is_empty());
    assert!(untouched.sessions.sessions(&SessionFilter { limit: 10, ..Default::default() }).unwrap().is_empty());
    assert!(untouched.grants.access_requests(None, None).unwrap().is_empty());
    assert!(untouched.jobs.job("job-done").unwrap().is_none());
    drop(cluster);
}
