//! What a grant means on a team gateway (issue 28, items 4 and 6), through the real binary:
//! `toolgate admin grant add --mode ask --args RULE`, `toolgate serve --http` in gateway mode,
//! the official MCP Python SDK as the client, `toolgate approvals approve` from another process,
//! a sub-agent whose model is the scripted server (it stands in for the model only), and
//! `toolgate audit --json` naming what decided each call.

use std::path::Path;
use std::process::Command;

use serde_json::{Value, json};

use crate::support::gateway::{admin, grant_id};
use crate::support::python;
use crate::support::scripted::{Scripted, answer, call};

const TOOLGATE: &str = env!("CARGO_BIN_EXE_toolgate");

#[test]
fn bad_rules_and_wildcard_requests_are_refused_at_the_door() {
    let ws = toolgate_testkit::serve::workspace();
    std::fs::write(ws.path().join("toolgate.toml"), "[gateway]\nenabled = true\n").unwrap();
    admin(ws.path(), &["user", "add", "ann"]);
    for (args, why) in [
        (&["--tool", "exec", "--args", "exec(git *"][..], "must end with `)`"),
        (&["--tool", "exec", "--args", "exec"][..], "not an argument rule"),
        (&["--tool", "exec", "--args", "exec(g*t)"][..], "only allowed at the end"),
        (&["--tool", "exec", "--args", "read(src/**)"][..], "about none of the grant's tools"),
        (&["--tool", "exec", "--args", "exec(git\u{7}*)"][..], "control characters"),
        (&["--tool", "exec", "--mode", "sometimes"][..], "`allow`, `ask` or `deny`"),
    ] {
        let out = Command::new(TOOLGATE)
            .arg("--workspace")
            .arg(ws.path())
            .args(["admin", "grant", "add", "--to", "ann"])
            .args(args)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success() && err.contains(why), "{args:?}: {err}");
    }
    assert_eq!(admin(ws.path(), &["grant", "list"]), "", "nothing stored");
    let added = admin(ws.path(), &["grant", "add", "--to", "ann", "--tool", "exec", "--args", "exec(git *)"]);
    assert!(added.contains("allow ann exec for calls matching exec(git *)"), "{added}");
    let listed: Value = serde_json::from_str(&admin(ws.path(), &["grant", "list", "--json"])).unwrap();
    assert_eq!(listed["arg_rule"], "exec(git *)");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ask_grants_argument_rules_and_sub_agents_through_the_gateway() {
    // The sub-agent's model: it tries a tool Ann has no grant for, a command her rule refuses,
    // and the admin tool, then answers.
    let model = Scripted::start(vec![
        call("time", json!({"operation": "now"})),
        call("exec", json!({"command": "rm -rf sub"})),
        call("gateway", json!({"action": "status"})),
        answer("tried"),
    ])
    .await;
    let ws = toolgate_testkit::serve::workspace();
    std::fs::create_dir(ws.path().join("x")).unwrap();
    std::fs::create_dir(ws.path().join("sub")).unwrap();
    std::fs::write(
        ws.path().join("toolgate.toml"),
        format!(
            "[gateway]\nenabled = true\ndefault_tools = []\n\n[approval]\nwait_secs = 60\n\n\
             [providers.mock]\nbase_url = \"{}\"\n\n[agents.main]\nprovider = \"mock\"\nmodel = \"m\"\ndescription = \"main\"\n",
            model.url
        ),
    )
    .unwrap();
    admin(ws.path(), &["user", "add", "lee", "--admin"]);
    admin(ws.path(), &["user", "add", "ann"]);
    let git = grant_id(&admin(ws.path(), &["grant", "add", "--to", "ann", "--tool", "exec", "--args", "exec(git *)"]));
    let ask = grant_id(&admin(ws.path(), &["grant", "add", "--to", "ann", "--tool", "write", "--mode", "ask"]));
    admin(ws.path(), &["grant", "add", "--to", "ann", "--tool", "subagents"]);
    let key = admin(ws.path(), &["key", "create", "--user", "ann"]);

    let server = toolgate_testkit::serve::HttpServer::start_in(TOOLGATE, ws, &[]);
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/python/gateway_rules.py");
    let ws_path = server.ws.path().to_string_lossy().into_owned();
    let out = tokio::process::Command::new(python::sdk_python())
        .arg(script)
        .args([server.url.as_str(), TOOLGATE, ws_path.as_str(), key.as_str()])
        .output()
        .await
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains("all checks passed"),
        "gateway rules:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let approval: i64 = stdout.lines().find_map(|l| l.strip_prefix("approval: ")).unwrap().parse().unwrap();
    assert!(server.ws.path().join("sub").exists(), "the sub-agent's `rm -rf sub` did not run");

    let audit = Command::new(TOOLGATE)
        .arg("--workspace")
        .arg(server.ws.path())
        .args(["audit", "--json", "--tail", "200"])
        .output()
        .unwrap();
    let rows: Vec<Value> =
        String::from_utf8_lossy(&audit.stdout).lines().filter_map(|l| serde_json::from_str(l).ok()).collect();
    let row = |what: &dyn Fn(&Value) -> bool| rows.iter().find(|r| what(r)).cloned();
    let text = |r: &Value, k: &str| r[k].as_str().unwrap_or_default().to_owned();
    // Every row that reached the policy names its revision and the grant that decided.
    let git_row = row(&|r| r["tool"] == "exec" && text(r, "params").contains("git status")).expect("git status row");
    let decision = text(&git_row, "decision");
    assert!(
        decision.contains(&format!("gateway grant {git}: allow")) && decision.contains("policy revision p"),
        "{git_row}"
    );
    let rm_row = row(&|r| r["tool"] == "exec" && text(r, "params").contains("rm -rf x")).expect("rm row");
    assert!(rm_row["outcome"] == "denied" && text(&rm_row, "error").contains("exec(git *)"), "{rm_row}");
    let write_row = row(&|r| r["tool"] == "write" && r["outcome"] == "ok").expect("write row");
    let decision = text(&write_row, "decision");
    assert!(
        decision.contains(&format!("gateway grant {ask}: ask")) && decision.contains(&format!("approval {approval}")),
        "the ask grant and the approval that decided: {write_row}"
    );
    // The sub-agent had no more than Ann: offered only her granted tools, and each try beyond
    // them refused (a tool it was not offered by the runtime, a command by her rule at the gate).
    let offered: Vec<String> = model.requests()[0]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["function"]["name"].as_str().map(str::to_owned))
        .collect();
    assert!(offered.iter().any(|t| t == "exec"), "{offered:?}");
    assert!(!offered.iter().any(|t| t == "time" || t == "gateway" || t == "read"), "{offered:?}");
    let time_row = row(&|r| r["tool"] == "time").expect("the sub-agent's time call");
    assert!(matches!(time_row["outcome"].as_str(), Some("denied" | "unknown_tool")), "{time_row}");
    let sub_rm = row(&|r| r["tool"] == "exec" && text(r, "params").contains("rm -rf sub")).expect("sub rm row");
    assert!(sub_rm["outcome"] == "denied" && text(&sub_rm, "error").contains("exec(git *)"), "{sub_rm}");
    // `gateway` is not offered to it either; should the model name it anyway, it never runs.
    let admin_rows: Vec<&Value> = rows.iter().filter(|r| r["tool"] == "gateway").collect();
    assert!(admin_rows.iter().all(|r| r["outcome"] != "ok"), "{admin_rows:?}");
}
