//! `--timings` (or `TOOLGATE_TIMINGS=1`): how long each start-up phase of a command took,
//! printed to stderr when the command ends (docs/benchmarks.md, "Cold start"). Off, a phase
//! costs one relaxed atomic load.

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

static ON: AtomicBool = AtomicBool::new(false);
static PHASES: Mutex<Option<Recorder>> = Mutex::new(None);

struct Recorder {
    start: Instant,
    last: Instant,
    /// (depth, name, time): depth 1 for the phases inside the gate's build.
    phases: Vec<(u8, String, Duration)>,
}

/// Starts recording; `start` is when `main` began.
pub(crate) fn enable(start: Instant) {
    let now = Instant::now();
    let mut phases = PHASES.lock().unwrap_or_else(|e| e.into_inner());
    *phases = Some(Recorder { start, last: start, phases: Vec::new() });
    ON.store(true, Ordering::Relaxed);
    drop(phases);
    // What ran before the flag was known (argument parsing) is the first phase.
    lap_at("arguments", now);
}

fn lap_at(name: &str, now: Instant) {
    let mut phases = PHASES.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(r) = phases.as_mut() {
        r.phases.push((0, name.to_owned(), now - r.last));
        r.last = now;
    }
}

/// Ends the phase `name`, begun where the last one ended.
pub(crate) fn lap(name: &str) {
    if ON.load(Ordering::Relaxed) {
        lap_at(name, Instant::now());
    }
}

/// Ends the phase `name` (the gate's build) with the gate's own phases under it.
pub(crate) fn lap_gate(name: &str, gate: &toolgate::Gate) {
    if !ON.load(Ordering::Relaxed) {
        return;
    }
    lap(name);
    let mut phases = PHASES.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(r) = phases.as_mut() {
        r.phases.extend(gate.build_timings().iter().map(|(n, d)| (1, n.clone(), *d)));
    }
}

/// Prints every phase to stderr, if recording.
pub(crate) fn print() {
    if !ON.load(Ordering::Relaxed) {
        return;
    }
    let phases = PHASES.lock().unwrap_or_else(|e| e.into_inner());
    let Some(r) = phases.as_ref() else { return };
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    let mut out = String::from("toolgate timings (ms):\n");
    for (depth, name, d) in &r.phases {
        let indent = if *depth == 0 { "" } else { "    " };
        out.push_str(&format!("  {indent}{:>8.3}  {name}\n", ms(*d)));
    }
    out.push_str(&format!(
        "  {:>8.3}  total, from main to here (process start-up, exit and teardown are not in it)\n",
        ms(r.last - r.start)
    ));
    eprint!("{out}");
}
