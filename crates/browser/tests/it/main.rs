//! The browser against real Chromium and pages served on loopback.

mod support;

mod capture;
mod session;
mod tool;
