//! `--timings` and `TOOLGATE_TIMINGS`: each start-up phase on stderr, the command's output and
//! its audit row unchanged; a bad value is refused with what was wrong. Through the real binary.

#![allow(clippy::unwrap_used)] // tests fail loudly on purpose

use std::path::Path;
use std::process::{Command, Output};

const TOOLGATE: &str = env!("CARGO_BIN_EXE_toolgate");

fn toolgate(ws: &Path, env: Option<&str>, args: &[&str]) -> Output {
    let mut cmd = Command::new(TOOLGATE);
    cmd.arg("--workspace").arg(ws).args(["--approval", "never"]).args(args).env_remove("TOOLGATE_TIMINGS");
    if let Some(v) = env {
        cmd.env("TOOLGATE_TIMINGS", v);
    }
    cmd.output().unwrap()
}

#[test]
fn timings_go_to_stderr_and_the_call_is_still_audited() {
    let ws = tempfile::tempdir().unwrap();
    let out = toolgate(ws.path(), None, &["--timings", "call", "echo", r#"{"message":"hi"}"#]);
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert_eq!(stdout.trim(), "hi", "the output is only the call's: {stdout}");
    for phase in ["arguments", "config load", "gate build", "store open", "tools: basic", "audit writer", "policy"] {
        assert!(stderr.contains(phase), "no `{phase}` in:\n{stderr}");
    }
    for phase in ["the call", "shutdown + audit flush", "gate drop", "runtime shutdown", "total"] {
        assert!(stderr.contains(phase), "no `{phase}` in:\n{stderr}");
    }
    // The environment variable does the same; a second call opens a database already current.
    let out = toolgate(ws.path(), Some("1"), &["call", "echo", r#"{"message":"again"}"#]);
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("gate build"));
    let audit = toolgate(ws.path(), None, &["audit"]);
    let text = String::from_utf8_lossy(&audit.stdout);
    assert_eq!(text.matches("echo").count(), 2, "both calls audited:\n{text}");
    // Off (unset or "0"), nothing is printed.
    for env in [None, Some("0")] {
        let out = toolgate(ws.path(), env, &["call", "echo", r#"{"message":"quiet"}"#]);
        assert!(out.status.success());
        assert!(out.stderr.is_empty(), "{}", String::from_utf8_lossy(&out.stderr));
    }
}

#[test]
fn a_bad_timings_value_is_refused_naming_it() {
    let ws = tempfile::tempdir().unwrap();
    let out = toolgate(ws.path(), Some("maybe"), &["call", "echo", r#"{"message":"hi"}"#]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("invalid value 'maybe' for '--timings'"), "{stderr}");
    assert!(out.stdout.is_empty(), "no call was made");
}
