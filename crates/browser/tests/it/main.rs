//! The browser against real Chromium and pages served on loopback.

mod support;

mod capture;
mod network;
mod session;
mod tool;
