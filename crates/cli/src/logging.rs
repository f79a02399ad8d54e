//! Logs to stderr, with credentials redacted: every formatted log event passes through the
//! leak detector before it is written, so a secret in a panic message, a hook's command line or
//! an error from a tool never reaches a terminal or a log file.

use std::io::{self, IsTerminal, Write};
use std::sync::{Arc, OnceLock};

use toolgate::guard::leak::LeakDetector;
use tracing_subscriber::fmt::MakeWriter;

/// Starts logging (`TOOLGATE_LOG`, default `warn`). Colour only on a terminal, and never with
/// `NO_COLOR` set (<https://no-color.org>): a log in a pipe or a file gets plain text.
pub(crate) fn init() {
    let filter = tracing_subscriber::EnvFilter::try_from_env("TOOLGATE_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    let ansi = colour(io::stderr().is_terminal(), std::env::var_os("NO_COLOR").as_deref());
    // The detector is built on the first log line: most runs write none, and compiling its
    // rules is most of what a short command would otherwise spend before doing anything.
    let writer = ScrubbedStderr(Arc::new(OnceLock::new()));
    let _ = tracing_subscriber::fmt().with_env_filter(filter).with_ansi(ansi).with_writer(writer).try_init();
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
