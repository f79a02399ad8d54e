//! The browser against real Chromium and pages served on loopback.

mod support;

mod bad_pages;
mod capture;
mod network;
mod session;
mod tool;
