//! `toolgate audit [--tail N] [--json]`: the latest calls, including those still running
//! ("started") and those a dead toolgate never completed ("interrupted"); `toolgate audit
//! verify`: checks the log's hash chain and names the first broken row (`docs/audit.md`). With
//! `[store] url`, both read the workspace's log in the shared database, every node's calls.

use std::process::ExitCode;

use anyhow::Context;
use toolgate::state::PgAuditLog;
use toolgate::store::{AuditRecord, AuditStore, ChainReport, GAP, INTERRUPTED, STARTED, Store, StoreError};

use super::GlobalArgs;

#[derive(Debug, clap::Args)]
#[command(args_conflicts_with_subcommands = true)]
pub(crate) struct Args {
    #[command(subcommand)]
    command: Option<Command>,
    /// How many of the latest calls to show.
    #[arg(long, default_value_t = 20)]
    tail: usize,
    /// One JSON object per line instead of a table.
    #[arg(long)]
    json: bool,
}

#[derive(Debug, clap::Subcommand)]
enum Command {
    /// Check the hash chain of the audit log: every completed row follows the one before it and
    /// still has the content it was written with. Exits 1 and names the first broken row if not.
    Verify {
        /// The report as one JSON object.
        #[arg(long)]
        json: bool,
    },
}

/// Where the workspace's log is: its state database, or the shared PostgreSQL database with
/// `[store] url` (`toolgate::state::shared_audit_reader`).
pub(crate) enum Log {
    Local(Store),
    Shared(PgAuditLog),
}

impl Log {
    /// The workspace's log; `None` when it has none yet (no state database, no shared store).
    pub(crate) fn open(global: &GlobalArgs, db: &std::path::Path) -> anyhow::Result<Option<Log>> {
        let store = global.load_config()?.store;
        if let Some(shared) = toolgate::state::shared_audit_reader(&store, &global.workspace()?)
            .context("cannot open the audit log in the shared database ([store] url)")?
        {
            return Ok(Some(Log::Shared(shared)));
        }
        if !db.exists() {
            return Ok(None);
        }
        Ok(Some(Log::Local(Store::open(db).context("cannot open the audit log")?)))
    }

    fn close_interrupted_calls(&self) -> Result<usize, StoreError> {
        match self {
            Log::Local(store) => store.close_interrupted_calls(),
            Log::Shared(log) => log.close_interrupted_calls(),
        }
    }

    pub(crate) fn tail(&self, n: usize) -> Result<Vec<AuditRecord>, StoreError> {
        match self {
            Log::Local(store) => store.audit_tail(n),
            Log::Shared(log) => log.audit_tail(n),
        }
    }

    fn verify(&self) -> Result<ChainReport, StoreError> {
        match self {
            Log::Local(store) => store.verify_audit_chain(),
            Log::Shared(log) => log.verify_chain(),
        }
    }
}

pub(crate) fn run(global: &GlobalArgs, args: Args) -> anyhow::Result<ExitCode> {
    let db = global.workspace()?.join(".toolgate/state.db");
    let log = Log::open(global, &db)?;
    if let Some(Command::Verify { json }) = args.command {
        let Some(log) = log else {
            anyhow::bail!(
                "no audit log at {}: nothing to verify (run toolgate in this workspace first, or pass --workspace)",
                db.display()
            );
        };
        return verify(&log, json);
    }
    let Some(store) = log else {
        outln!("no calls recorded yet in {} (run `toolgate call echo '{{\"message\":\"hi\"}}'` first)", db.display());
        return Ok(ExitCode::SUCCESS);
    };
    // Calls left "started" by a toolgate that died (kill -9, crash) show as "interrupted", and
    // a "gap" row marks where its log ends (records of its last few ms may be missing).
    if let Err(e) = store.close_interrupted_calls() {
        tracing::warn!("could not close interrupted calls in the audit log: {e}");
    }
    for r in store.tail(args.tail)? {
        if args.json {
            outln!("{}", serde_json::to_string(&r)?);
        } else {
            let when = chrono_like(r.ts_ms);
            let error = r.error.as_deref().map(|e| format!("  {}", first_line(e))).unwrap_or_default();
            // A call that is running ("started") or never completed ("interrupted"), and a gap,
            // have no duration or output; a subject (the unwrapped command, the path) says what ran.
            let (duration, bytes) = if r.outcome == STARTED || r.outcome == INTERRUPTED || r.outcome == GAP {
                ("-".to_owned(), "-".to_owned())
            } else {
                (r.duration_us.to_string(), r.output_bytes.to_string())
            };
            let subject = r.subject.as_deref().map(|s| format!("  [{}]", first_line(s))).unwrap_or_default();
            let detail = r.detail.as_deref().map(|d| format!("  -> {}", first_line(d))).unwrap_or_default();
            // The tool, and the name the caller used when its dialect or an alias differs.
            let tool = match &r.called_as {
                Some(called) => format!("{} (as {called})", r.tool),
                None => r.tool.clone(),
            };
            outln!(
                "{when}  {:<8} {:<14} {:<14} {duration:>8}µs {bytes:>7}B  {}{subject}{detail}{error}",
                r.agent,
                tool,
                r.outcome,
                r.params
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn verify(log: &Log, json: bool) -> anyhow::Result<ExitCode> {
    let report = log.verify().context("cannot read the audit log's chain")?;
    if json {
        outln!("{}", serde_json::to_string(&report)?);
    } else {
        let ends = &report.ends;
        match &report.broken {
            None => outln!(
                "audit chain intact: {} rows (positions {}..{}); head hash {}\n\
                 (keep the head hash elsewhere: a later verify that reaches it shows nothing before it was rewritten)",
                report.rows,
                ends.start_seq,
                ends.head_seq,
                ends.head_hash
            ),
            Some(b) => {
                let row =
                    if b.id.is_empty() { format!("row {}", b.seq) } else { format!("row {} (call {})", b.seq, b.id) };
                outln!(
                    "audit chain BROKEN at {row}: {}\n{} rows before it check out. The log was changed outside \
                     toolgate: compare it with a backup, and keep this database as evidence.",
                    b.reason,
                    report.rows
                );
            }
        }
    }
    Ok(if report.ok() { ExitCode::SUCCESS } else { ExitCode::from(1) })
}

fn first_line(s: &str) -> &str {
    s.lines().next().unwrap_or_default()
}

/// `YYYY-MM-DD HH:MM:SS` in UTC, without a date library.
pub(crate) fn chrono_like(ts_ms: i64) -> String {
    let secs = ts_ms.div_euclid(1000);
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    // Civil-from-days (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!("{y:04}-{m:02}-{d:02} {:02}:{:02}:{:02}", rem / 3600, rem % 3600 / 60, rem % 60)
}

#[cfg(test)]
mod tests {
    #[test]
    fn dates() {
        assert_eq!(super::chrono_like(0), "1970-01-01 00:00:00");
        assert_eq!(super::chrono_like(1_769_857_200_000), "2026-01-31 11:00:00");
    }
}
