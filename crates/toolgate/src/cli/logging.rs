//! Logs to stderr, with credentials redacted: every formatted log event passes through the
//! leak detector before it is written, so a secret in a panic message, a hook's command line or
//! an error from a tool never reaches a terminal or a log file.

use std::io::{self, Write};
use std::sync::Arc;

use toolgate::guard::leak::LeakDetector;
use tracing_subscriber::fmt::MakeWriter;

/// Starts logging (`TOOLGATE_LOG`, default `warn`).
pub(crate) fn init() {
    let filter = tracing_subscriber::EnvFilter::try_from_env("TOOLGATE_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    let writer = ScrubbedStderr(Arc::new(LeakDetector::new().from_env()));
    let _ = tracing_subscriber::fmt().with_env_filter(filter).with_writer(writer).try_init();
}

/// Makes a [`Line`] per log event.
#[derive(Clone)]
struct ScrubbedStderr(Arc<LeakDetector>);

impl<'a> MakeWriter<'a> for ScrubbedStderr {
    type Writer = Line;

    fn make_writer(&'a self) -> Line {
        Line { detector: Arc::clone(&self.0), buf: Vec::new(), sink: Box::new(io::stderr()) }
    }
}

/// Buffers one event, then writes it redacted to `sink` when dropped.
struct Line {
    detector: Arc<LeakDetector>,
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
        let redacted = self.detector.redact(&text);
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
        let mut line = Line { detector: Arc::new(LeakDetector::new()), buf: Vec::new(), sink: Box::new(sink.clone()) };
        write!(line, "hook failed: curl -H 'Authorization: token ghp_0123456789abcdefABCDEF0123456789abcd'").unwrap();
        drop(line);
        let written = String::from_utf8(sink.0.lock().unwrap().clone()).unwrap();
        assert!(written.starts_with("hook failed: curl"), "{written}");
        assert!(!written.contains("ghp_0123") && written.contains("[REDACTED:"), "{written}");
    }
}
