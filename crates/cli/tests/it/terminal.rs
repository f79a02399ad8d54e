//! `toolgate call` asks for approval on the terminal it runs in: driven through a real
//! pseudo-terminal (Python's `pty` module), with the real binary.

#![allow(clippy::unwrap_used)] // tests fail loudly on purpose

use std::path::Path;
use std::process::Command;

fn drive(workspace: &Path, answer: &str, args: &[&str]) -> (i32, String) {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/pty/answer.py");
    let out = Command::new("python3")
        .arg(script)
        .arg(answer)
        .arg(env!("CARGO_BIN_EXE_toolgate"))
        .arg("--workspace")
        .arg(workspace)
        .args(args)
        .output()
        .expect("python3 runs (it is on every machine of this project)");
    (out.status.code().unwrap_or(-1), String::from_utf8_lossy(&out.stdout).into_owned())
}

const WRITE_AGENTS: &str = r#"{"path": "AGENTS.md", "content": "be careful\n"}"#;

#[test]
fn yes_runs_the_call() {
    let dir = tempfile::tempdir().unwrap();
    let (code, screen) = drive(dir.path(), "y", &["call", "write", WRITE_AGENTS]);
    assert_eq!(code, 0, "{screen}");
    assert!(screen.contains("wants to run `write`"), "the prompt says what will run: {screen}");
    assert_eq!(std::fs::read_to_string(dir.path().join("AGENTS.md")).unwrap(), "be careful\n");
}

#[test]
fn no_refuses_it() {
    let dir = tempfile::tempdir().unwrap();
    let (code, screen) = drive(dir.path(), "n", &["call", "write", WRITE_AGENTS]);
    assert_eq!(code, 1, "{screen}");
    assert!(screen.contains("was not approved"), "{screen}");
    assert!(!dir.path().join("AGENTS.md").exists());
}

#[test]
fn always_is_remembered_across_runs() {
    let dir = tempfile::tempdir().unwrap();
    let (code, screen) = drive(dir.path(), "a", &["call", "write", WRITE_AGENTS]);
    assert_eq!(code, 0, "{screen}");
    let listed = Command::new(env!("CARGO_BIN_EXE_toolgate"))
        .args(["--workspace"])
        .arg(dir.path())
        .args(["approvals", "list"])
        .output()
        .unwrap();
    let listed = String::from_utf8_lossy(&listed.stdout).into_owned();
    assert!(listed.contains("write"), "{listed}");
    // A new run (a new session) with no terminal: the same call runs without asking. The file
    // is removed first, so write safety (read before overwriting) does not apply.
    std::fs::remove_file(dir.path().join("AGENTS.md")).unwrap();
    let again = Command::new(env!("CARGO_BIN_EXE_toolgate"))
        .arg("--workspace")
        .arg(dir.path())
        .args(["call", "write", WRITE_AGENTS])
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    assert!(again.status.success(), "granted always: {}", String::from_utf8_lossy(&again.stderr));
}

#[test]
fn without_a_terminal_the_call_is_refused_with_instructions() {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_toolgate"))
        .arg("--workspace")
        .arg(dir.path())
        .args(["call", "write", WRITE_AGENTS])
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("needs approval") && stderr.contains("toolgate call"), "{stderr}");
    assert!(!dir.path().join("AGENTS.md").exists());
}

/// Logs written to a pipe carry no ANSI colour codes (colour is for terminals only).
#[test]
fn logs_to_a_pipe_have_no_colour_codes() {
    let ws = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_toolgate"))
        .arg("--workspace")
        .arg(ws.path())
        // A stdio server whose client leaves at once: it logs that at debug level.
        .arg("serve")
        .stdin(std::process::Stdio::null())
        .env("TOOLGATE_LOG", "debug")
        .env_remove("NO_COLOR")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.contains("DEBUG"), "debug logs were written: {stderr}");
    assert!(!stderr.contains('\u{1b}'), "no escape codes in a pipe: {stderr:?}");
}
