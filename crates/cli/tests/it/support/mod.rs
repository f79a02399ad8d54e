//! Harness pieces the CLI's tests share (what other crates' tests need too is in
//! `toolgate-testkit`).

pub mod gateway;
pub mod hooks;
pub mod llama;
pub mod npm;
pub mod pages;
pub mod python;
pub mod scripted;
pub mod signed;

use std::io::Write;
use std::path::Path;
use std::process::{Command, Output, Stdio};

fn run_toolgate(ws: &Path, args: &[&str], stdin: &str) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_toolgate"))
        .arg("--workspace")
        .arg(ws)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(stdin.as_bytes()).unwrap();
    child.wait_with_output().unwrap()
}

/// `toolgate --workspace WS ARGS` with `stdin`: whether it succeeded, and its stdout then stderr.
pub fn toolgate_with_input(ws: &Path, args: &[&str], stdin: &str) -> (bool, String) {
    let out = run_toolgate(ws, args, stdin);
    (out.status.success(), String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr))
}

/// [`toolgate_with_input`] that must succeed: its stdout.
pub fn toolgate_ok(ws: &Path, args: &[&str], stdin: &str) -> String {
    let out = run_toolgate(ws, args, stdin);
    let text = String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "toolgate {args:?}: {text}");
    String::from_utf8_lossy(&out.stdout).into_owned()
}
