//! The browser against real Chromium and pages served on loopback.

// Not every test module uses every helper.
#[allow(dead_code)]
mod support;

mod session;
