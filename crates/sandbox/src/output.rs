//! Output capture: one pipe for stdout and stderr (so they interleave as the command wrote them),
//! streamed to a log file and kept in memory up to a cap (head + tail), so that endless output
//! never grows memory.

use std::collections::VecDeque;
use std::fs::File;
use std::io::Write;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};

/// What a command printed (stdout and stderr interleaved).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CapturedOutput {
    /// The start of the output; the whole output when not [`CapturedOutput::truncated`].
    pub head: String,
    /// The end of the output when truncated, empty otherwise.
    pub tail: String,
    /// How many bytes the command wrote in total.
    pub total_bytes: u64,
    /// Whether bytes between `head` and `tail` were dropped (they are in the log file, if any).
    pub truncated: bool,
    /// The full log, when one was requested.
    pub log_path: Option<PathBuf>,
}

impl CapturedOutput {
    /// The text for a reader: the whole output, or head, a marker saying how much was left out,
    /// and tail.
    pub fn text(&self) -> String {
        if !self.truncated {
            return self.head.clone();
        }
        let omitted = self.total_bytes.saturating_sub((self.head.len() + self.tail.len()) as u64);
        let log = match &self.log_path {
            Some(p) => format!("; full log: {}", p.display()),
            None => String::new(),
        };
        format!("{}\n[... {omitted} bytes of output omitted{log} ...]\n{}", self.head, self.tail)
    }
}

/// The in-memory part of the capture, shared between the pump task and the process handle.
#[derive(Debug)]
pub(crate) struct OutputBuffer {
    head_cap: usize,
    tail_cap: usize,
    head: Vec<u8>,
    tail: VecDeque<u8>,
    total: u64,
    /// Bytes not yet returned by `poll` (capped at `head_cap + tail_cap`; older ones dropped).
    pending: VecDeque<u8>,
    pending_dropped: u64,
    log: Option<File>,
    log_path: Option<PathBuf>,
    log_written: u64,
    log_max: u64,
    /// Set when the pipe reached EOF (every writer closed it).
    pub(crate) eof: bool,
}

impl OutputBuffer {
    pub(crate) fn new(cap: usize, log: Option<(File, PathBuf)>, log_max: u64) -> Self {
        let cap = cap.max(2);
        let head_cap = cap / 2;
        let (log, log_path) = match log {
            Some((f, p)) => (Some(f), Some(p)),
            None => (None, None),
        };
        OutputBuffer {
            head_cap,
            tail_cap: cap - head_cap,
            head: Vec::new(),
            tail: VecDeque::new(),
            total: 0,
            pending: VecDeque::new(),
            pending_dropped: 0,
            log,
            log_path,
            log_written: 0,
            log_max,
            eof: false,
        }
    }

    pub(crate) fn push(&mut self, mut data: &[u8]) {
        self.total += data.len() as u64;
        if let Some(log) = &mut self.log {
            let room = self.log_max.saturating_sub(self.log_written);
            let n = (data.len() as u64).min(room) as usize;
            if n > 0 && log.write_all(&data[..n]).is_ok() {
                self.log_written += n as u64;
            }
            if n < data.len() {
                let _ = log.write_all(b"\n[toolgate: log size limit reached, output no longer logged]\n");
                self.log = None;
            }
        }
        let cap = self.head_cap + self.tail_cap;
        let skip = data.len().saturating_sub(cap);
        self.pending_dropped += skip as u64;
        self.pending.extend(&data[skip..]);
        if self.pending.len() > cap {
            let drop = self.pending.len() - cap;
            self.pending.drain(..drop);
            self.pending_dropped += drop as u64;
        }
        if self.head.len() < self.head_cap {
            let n = (self.head_cap - self.head.len()).min(data.len());
            self.head.extend_from_slice(&data[..n]);
            data = &data[n..];
        }
        if data.len() >= self.tail_cap {
            self.tail.clear();
            self.tail.extend(&data[data.len() - self.tail_cap..]);
        } else {
            let overflow = (self.tail.len() + data.len()).saturating_sub(self.tail_cap);
            self.tail.drain(..overflow);
            self.tail.extend(data);
        }
    }

    /// The output written since the last poll (lossy UTF-8), with a note when some was dropped.
    pub(crate) fn poll(&mut self) -> String {
        let bytes: Vec<u8> = self.pending.drain(..).collect();
        let mut text = String::new();
        if self.pending_dropped > 0 {
            text.push_str(&format!("[... {} bytes dropped since the last poll ...]\n", self.pending_dropped));
            self.pending_dropped = 0;
        }
        text.push_str(&String::from_utf8_lossy(&bytes));
        text
    }

    pub(crate) fn snapshot(&self) -> CapturedOutput {
        let kept = (self.head.len() + self.tail.len()) as u64;
        let truncated = self.total > kept;
        let (head, tail) = if truncated {
            let tail: Vec<u8> = self.tail.iter().copied().collect();
            (utf8_head(&self.head), utf8_tail(&tail))
        } else {
            let mut all = self.head.clone();
            all.extend(self.tail.iter());
            (String::from_utf8_lossy(&all).into_owned(), String::new())
        };
        CapturedOutput { head, tail, total_bytes: self.total, truncated, log_path: self.log_path.clone() }
    }
}

/// The head, without a character cut in half at its end.
fn utf8_head(bytes: &[u8]) -> String {
    let mut end = bytes.len();
    if let Err(e) = std::str::from_utf8(bytes)
        && e.error_len().is_none()
    {
        end = e.valid_up_to();
    }
    String::from_utf8_lossy(&bytes[..end]).into_owned()
}

/// The tail, without a character cut in half at its start.
fn utf8_tail(bytes: &[u8]) -> String {
    let start = bytes.iter().take(4).position(|b| (b & 0xc0) != 0x80).unwrap_or(0);
    String::from_utf8_lossy(&bytes[start..]).into_owned()
}

/// The shared handle.
pub(crate) type SharedOutput = Arc<Mutex<OutputBuffer>>;

/// Locks the buffer, ignoring poisoning (the data stays consistent: every update is complete
/// before any code that could panic).
pub(crate) fn lock(out: &SharedOutput) -> MutexGuard<'_, OutputBuffer> {
    match out.lock() {
        Ok(g) => g,
        Err(poisoned) => poisoned.into_inner(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_head_and_tail_within_cap() {
        let mut b = OutputBuffer::new(10, None, 0);
        for _ in 0..1000 {
            b.push(b"0123456789abcdef");
        }
        let s = b.snapshot();
        assert!(s.truncated);
        assert_eq!(s.total_bytes, 16_000);
        assert_eq!(s.head, "01234");
        assert_eq!(s.tail, "bcdef");
        assert!(s.text().contains("omitted"));
        assert!(b.pending.len() <= 10);
    }

    #[test]
    fn small_output_is_whole() {
        let mut b = OutputBuffer::new(100, None, 0);
        b.push(b"hello ");
        b.push(b"world");
        let s = b.snapshot();
        assert!(!s.truncated);
        assert_eq!(s.text(), "hello world");
        assert_eq!(b.poll(), "hello world");
        assert_eq!(b.poll(), "");
    }
}
