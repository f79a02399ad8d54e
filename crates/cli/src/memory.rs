//! `toolgate memory index`: indexes the workspace's memory notes now, in the foreground, with a
//! progress bar (`serve` does the same on a background thread when it opens a workspace).

use std::io::{IsTerminal, Write};
use std::process::ExitCode;
use std::time::Instant;

use anyhow::Context;
use toolgate::store::memory::IndexProgress;

use super::GlobalArgs;

#[derive(Debug, clap::Subcommand)]
pub(crate) enum Command {
    /// Index every note under `MEMORY.md` and `memory/` now: words first, then meaning. Notes
    /// indexed before (this run, a `serve`, a killed run) are not done again; changed ones are.
    Index,
}

pub(crate) fn run(global: &GlobalArgs, command: Command) -> anyhow::Result<ExitCode> {
    match command {
        Command::Index => index(global),
    }
}

fn index(global: &GlobalArgs) -> anyhow::Result<ExitCode> {
    let gate = global.gate(false)?;
    let Some(memory) = gate.memory().cloned() else {
        anyhow::bail!("memory is disabled in this workspace's configuration ([memory] enabled = false)");
    };
    let tty = std::io::stderr().is_terminal();
    let start = Instant::now();
    let mut last_line = String::new();
    let mut show = |p: &IndexProgress| {
        let line = describe(p);
        // Plain lines when stderr is not a terminal: one per change of what is said.
        if line == last_line {
            return;
        }
        let mut err = std::io::stderr().lock();
        if tty {
            let _ = write!(err, "\r\x1b[2K{}", bar(p, &line));
        } else {
            let _ = writeln!(err, "{line}");
        }
        let _ = err.flush();
        last_line = line;
    };
    let done = memory.index_all(&mut show).context("indexing the memory notes failed")?;
    if tty {
        eprintln!();
    }
    let took = start.elapsed().as_secs_f64();
    let rate = if took > 0.0 { done.notes as f64 / took } else { 0.0 };
    if done.vectors && done.embedded < done.notes {
        // The embedder failed (the search result says why; so does the log).
        eprintln!(
            "memory index: {} notes indexed by words, {} of them by meaning; search says why the rest are not",
            done.notes, done.embedded
        );
        return Ok(ExitCode::from(1));
    }
    let how = if done.vectors { "by words and meaning" } else { "by words (no embedding model)" };
    eprintln!("memory index: all {} notes indexed {how} in {took:.1} s ({rate:.0} notes/s)", done.notes);
    Ok(ExitCode::SUCCESS)
}

/// What a progress line says.
fn describe(p: &IndexProgress) -> String {
    if p.text < p.notes {
        format!("indexing words: {} of {} notes", p.text, p.notes)
    } else if p.vectors {
        format!("embedding: {} of {} notes", p.embedded, p.notes)
    } else {
        format!("indexed: {} notes", p.notes)
    }
}

/// `[#####.....] line` for a terminal.
fn bar(p: &IndexProgress, line: &str) -> String {
    const WIDTH: usize = 30;
    let (done, of) = if p.text < p.notes || !p.vectors { (p.text, p.notes) } else { (p.embedded, p.notes) };
    let filled = (done.min(of) * WIDTH).checked_div(of).unwrap_or(WIDTH);
    format!("[{}{}] {line}", "#".repeat(filled), ".".repeat(WIDTH - filled))
}
