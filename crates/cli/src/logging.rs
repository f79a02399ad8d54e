//! Logs to stderr, with credentials redacted: every formatted log event passes through the
//! leak detector before it is written, so a secret in a panic message, a hook's command line or
//! an error from a tool never reaches a terminal or a log file.

use std::io::{self, IsTerminal, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use anyhow::Context as _;
use toolgate::guard::leak::LeakDetector;
use toolgate::telemetry::{CALL_TARGET, Telemetry, TelemetryConfig, TraceLayer};
use tracing_subscriber::fmt::MakeWriter;
use tracing_subscriber::layer::SubscriberExt as _;
use tracing_subscriber::util::SubscriberInitExt as _;
use tracing_subscriber::{Layer as _, Registry, filter, reload};

/// The slot the trace exporter's layer goes in once a command has read its configuration.
type TraceSlot = reload::Handle<Option<TraceLayer<Registry>>, Registry>;

static TRACE_SLOT: OnceLock<TraceSlot> = OnceLock::new();

/// Whether call spans are made: only once an exporter is installed (until then their callsites
/// are disabled, so a call pays nothing for them).
static TRACING: AtomicBool = AtomicBool::new(false);

/// The running exporter, stopped by [`stop_traces`].
static EXPORTER: Mutex<Option<Telemetry>> = Mutex::new(None);

/// Starts logging (`TOOLGATE_LOG`, default `warn`). Colour only on a terminal, and never with
/// `NO_COLOR` set (<https://no-color.org>): a log in a pipe or a file gets plain text.
pub(crate) fn init() {
    let filter = tracing_subscriber::EnvFilter::try_from_env("TOOLGATE_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    let ansi = colour(io::stderr().is_terminal(), std::env::var_os("NO_COLOR").as_deref());
    // The detector is built on the first log line: most runs write none, and compiling its
    // rules is most of what a short command would otherwise spend before doing anything.
    let writer = ScrubbedStderr(Arc::new(OnceLock::new()));
    let log = tracing_subscriber::fmt::layer().with_ansi(ansi).with_writer(writer).with_filter(filter);
    // Only the call and stage spans reach the exporter: no log event, whose text may quote a
    // parameter, ever does.
    let (traces, slot) = reload::Layer::new(None);
    let traces = traces.with_filter(
        filter::filter_fn(|meta| meta.target() == CALL_TARGET && TRACING.load(Ordering::Acquire))
            .with_max_level_hint(tracing::Level::INFO),
    );
    if tracing_subscriber::registry().with(traces).with(log).try_init().is_ok() {
        let _ = TRACE_SLOT.set(slot);
    }
}

/// Starts exporting call spans over OTLP when `config` (or `OTEL_EXPORTER_OTLP_ENDPOINT`) names
/// a collector (`docs/gateway.md`, "Traces"); does nothing otherwise. Runs on the runtime.
pub(crate) fn start_traces(config: &TelemetryConfig) -> anyhow::Result<()> {
    let Some(slot) = TRACE_SLOT.get() else { return Ok(()) };
    let Some((exporter, layer)) = toolgate::telemetry::install::<Registry>(config).map_err(anyhow::Error::msg)? else {
        return Ok(());
    };
    let mut running = EXPORTER.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    if running.is_some() {
        return Ok(());
    }
    TRACING.store(true, Ordering::Release);
    // Reloading re-asks every callsite, so the spans' (cached) "disabled" becomes "enabled".
    slot.reload(Some(layer)).context("cannot add the trace exporter to the logging")?;
    *running = Some(exporter);
    Ok(())
}

/// Sends the spans not yet sent and stops the exporter, if one runs (at the end of a command,
/// while the runtime it sends on still runs).
pub(crate) async fn stop_traces() {
    let exporter = EXPORTER.lock().unwrap_or_else(std::sync::PoisonError::into_inner).take();
    if let Some(exporter) = exporter {
        // Shutting down blocks until the last batch is sent, which this runtime sends.
        let _ = tokio::task::spawn_blocking(move || exporter.shutdown()).await;
    }
}

/// Whether log lines get ANSI colours: only on a terminal, and not when `NO_COLOR` is set to
/// anything but the empty string.
fn colour(terminal: bool, no_color: Option<&std::ffi::OsStr>) -> bool {
    terminal && no_color.is_none_or(|v| v.is_empty())
}

/// Makes a [`Line`] per log event.
#[derive(Clone)]
struct ScrubbedStderr(Arc<OnceLock<LeakDetector>>);

impl<'a> MakeWriter<'a> for ScrubbedStderr {
    type Writer = Line;

    fn make_writer(&'a self) -> Line {
        Line { detector: Arc::clone(&self.0), buf: Vec::new(), sink: Box::new(io::stderr()) }
    }
}

/// Buffers one event, then writes it redacted to `sink` when dropped.
struct Line {
    detector: Arc<OnceLock<LeakDetector>>,
    buf: Vec<u8>,
    sink: Box<dyn Write + Send>,
}

impl Write for Line {
    fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
        self.buf.extend_from_slice(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl Drop for Line {
    fn drop(&mut self) {
        let text = String::from_utf8_lossy(&self.buf);
        let redacted = self.detector.get_or_init(|| LeakDetector::new().from_env()).redact(&text);
        let _ = self.sink.write_all(redacted.text.as_bytes());
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use super::*;

    /// A sink the test can read back.
    #[derive(Clone, Default)]
    struct Shared(Arc<Mutex<Vec<u8>>>);

    impl Write for Shared {
        fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(bytes);
            Ok(bytes.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn a_logged_secret_is_redacted_before_it_is_written() {
        let sink = Shared::default();
        let mut line = Line { detector: Arc::new(OnceLock::new()), buf: Vec::new(), sink: Box::new(sink.clone()) };
        write!(line, "hook failed: curl -H 'Authorization: token ghp_0123456789abcdefABCDEF0123456789abcd'").unwrap();
        drop(line);
        let written = String::from_utf8(sink.0.lock().unwrap().clone()).unwrap();
        assert!(written.starts_with("hook failed: curl"), "{written}");
        assert!(!written.contains("ghp_0123") && written.contains("[REDACTED:"), "{written}");
    }

    #[test]
    fn colour_only_on_a_terminal_without_no_color() {
        use std::ffi::OsStr;
        assert!(colour(true, None));
        assert!(colour(true, Some(OsStr::new(""))), "an empty NO_COLOR does not count");
        assert!(!colour(true, Some(OsStr::new("1"))));
        assert!(!colour(false, None), "a pipe or a file gets no ANSI codes");
    }
}
