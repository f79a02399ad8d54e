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
