//! The browser against real Chromium and pages served on loopback.

mod support;

mod session;
mod tool;
