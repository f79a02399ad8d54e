//! A line that is not JSON on the stdio transport gets a JSON-RPC parse error back.
//!
//! rmcp drops such a line without a word (as the other SDKs do, to avoid an error storm with a
//! peer that echoes whatever it reads). JSON-RPC 2.0 (§5.1) asks for a `-32700` reply with a
//! `null` id, and a person typing at `toolgate serve` or a broken client deserves to hear that
//! its line was ignored. The reply is itself valid JSON, so a peer that echoes it sends a
//! response rmcp ignores: no storm.
//!
//! [`guard`] wraps the transport's reader and writer. The reader checks each complete line
//! (empty lines and any valid JSON, even of the wrong shape, pass on to rmcp, which answers
//! the latter with `-32600`), drops the others and owes a reply for each; the owed replies are
//! written between two of rmcp's messages, never inside one, by whichever side polls first.

use std::io;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll, ready};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// The reply to a line that is not JSON.
const PARSE_ERROR: &[u8] =
    b"{\"jsonrpc\":\"2.0\",\"id\":null,\"error\":{\"code\":-32700,\"message\":\"Parse error: the line is not JSON\"}}\n";

/// Lines longer than this are passed to rmcp unchecked (it drops lines over its own limit, 16 MiB).
const MAX_CHECKED_LINE: usize = 16 * 1024 * 1024;

/// The UTF-8 byte order mark, which JSON parsers may ignore (RFC 8259 §8.1), as rmcp does.
const BOM: &[u8] = b"\xEF\xBB\xBF";

/// Wraps a transport's `reader` and `writer` so that lines that are not JSON are answered with
/// a parse error instead of being dropped silently.
pub(crate) fn guard<R, W>(reader: R, writer: W) -> (GuardedReader<R, W>, GuardedWriter<W>)
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let out = Arc::new(Mutex::new(Replies { out: writer, at_line_start: true, owed: 0, written: 0 }));
    let reader = GuardedReader {
        inner: reader,
        out: Arc::clone(&out),
        line: Vec::new(),
        ready: Vec::new(),
        at: 0,
        eof: false,
        passthrough: false,
    };
    (reader, GuardedWriter(out))
}

/// The output stream and the parse-error replies owed on it.
#[derive(Debug)]
struct Replies<W> {
    out: W,
    /// Whether the last byte written ended a message (replies go only there).
    at_line_start: bool,
    /// Replies not yet (fully) written.
    owed: usize,
    /// Bytes of the first owed reply already written.
    written: usize,
}

impl<W: AsyncWrite + Unpin> Replies<W> {
    /// Writes the owed replies, if the stream is between messages.
    fn poll_drain(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        while self.owed > 0 && self.at_line_start {
            let n = ready!(Pin::new(&mut self.out).poll_write(cx, &PARSE_ERROR[self.written..]))?;
            if n == 0 {
                return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
            }
            self.written += n;
            if self.written == PARSE_ERROR.len() {
                self.written = 0;
                self.owed -= 1;
            }
        }
        Poll::Ready(Ok(()))
    }
}

fn lock<W>(out: &Mutex<Replies<W>>) -> MutexGuard<'_, Replies<W>> {
    out.lock().unwrap_or_else(|e| e.into_inner())
}

/// The reader side: passes rmcp every line that is JSON (or empty), owes a reply for the rest.
#[derive(Debug)]
pub(crate) struct GuardedReader<R, W> {
    inner: R,
    out: Arc<Mutex<Replies<W>>>,
    /// The line being read, up to its newline.
    line: Vec<u8>,
    /// Checked bytes for rmcp, from `at` on.
    ready: Vec<u8>,
    at: usize,
    eof: bool,
    /// The current line is too long to check: its bytes go straight to rmcp.
    passthrough: bool,
}

impl<R, W> GuardedReader<R, W> {
    /// Takes in bytes read from the stream.
    fn absorb(&mut self, mut bytes: &[u8]) -> usize {
        let mut bad = 0;
        while !bytes.is_empty() {
            let (part, newline) = match bytes.iter().position(|&b| b == b'\n') {
                Some(i) => (&bytes[..=i], true),
                None => (bytes, false),
            };
            bytes = &bytes[part.len()..];
            if self.passthrough {
                self.ready.extend_from_slice(part);
                self.passthrough = !newline;
                continue;
            }
            self.line.extend_from_slice(part);
            if newline {
                if is_json_or_blank(&self.line) {
                    self.ready.append(&mut self.line);
                } else {
                    self.line.clear();
                    bad += 1;
                }
            } else if self.line.len() > MAX_CHECKED_LINE {
                self.ready.append(&mut self.line);
                self.passthrough = true;
            }
        }
        bad
    }
}

/// Whether a line (with its newline) is empty or whitespace, or one JSON value.
fn is_json_or_blank(line: &[u8]) -> bool {
    let line = line.strip_prefix(BOM).unwrap_or(line);
    if line.iter().all(u8::is_ascii_whitespace) {
        return true;
    }
    serde_json::from_slice::<serde::de::IgnoredAny>(line).is_ok()
}

impl<R: AsyncRead + Unpin, W: AsyncWrite + Unpin> AsyncRead for GuardedReader<R, W> {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        loop {
            {
                // Replies owed: write them now if the writer is between messages (a write error
                // surfaces on rmcp's next write; a full pipe is retried on the next poll).
                let mut out = lock(&this.out);
                if out.owed > 0 && out.poll_drain(cx).is_ready() {
                    let _ = Pin::new(&mut out.out).poll_flush(cx);
                }
            }
            if this.at < this.ready.len() {
                let n = buf.remaining().min(this.ready.len() - this.at);
                buf.put_slice(&this.ready[this.at..this.at + n]);
                this.at += n;
                if this.at == this.ready.len() {
                    this.ready.clear();
                    this.at = 0;
                }
                return Poll::Ready(Ok(()));
            }
            if this.eof {
                return Poll::Ready(Ok(()));
            }
            let mut chunk = [0u8; 16 * 1024];
            let mut read = ReadBuf::new(&mut chunk);
            ready!(Pin::new(&mut this.inner).poll_read(cx, &mut read))?;
            if read.filled().is_empty() {
                // End of input: an unterminated last line goes to rmcp as it is.
                this.eof = true;
                this.ready.append(&mut this.line);
                continue;
            }
            let bad = this.absorb(read.filled());
            if bad > 0 {
                lock(&this.out).owed += bad;
            }
        }
    }
}

/// The writer side: rmcp's messages, with owed replies written between them.
#[derive(Debug)]
pub(crate) struct GuardedWriter<W>(Arc<Mutex<Replies<W>>>);

impl<W: AsyncWrite + Unpin> AsyncWrite for GuardedWriter<W> {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        let mut out = lock(&self.0);
        ready!(out.poll_drain(cx))?;
        let n = ready!(Pin::new(&mut out.out).poll_write(cx, buf))?;
        if n > 0 {
            out.at_line_start = buf[n - 1] == b'\n';
        }
        Poll::Ready(Ok(n))
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let mut out = lock(&self.0);
        ready!(out.poll_drain(cx))?;
        Pin::new(&mut out.out).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let mut out = lock(&self.0);
        ready!(out.poll_drain(cx))?;
        Pin::new(&mut out.out).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};

    use super::*;

    #[tokio::test]
    async fn lines_that_are_not_json_are_answered_and_the_rest_pass() {
        let (mut client_in, server_in) = tokio::io::duplex(1 << 16);
        let (server_out, client_out) = tokio::io::duplex(1 << 16);
        let (mut reader, mut writer) = guard(server_in, server_out);
        let input = "not json\n{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}\n\n\u{feff}[1]\n{\"a\":\n{\"x\":1}";
        client_in.write_all(input.as_bytes()).await.unwrap_or_default();
        drop(client_in);
        let mut passed = String::new();
        reader.read_to_string(&mut passed).await.unwrap_or_default();
        assert_eq!(passed, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}\n\n\u{feff}[1]\n{\"x\":1}");
        // rmcp's own message, then the two owed replies, each on its own line.
        writer.write_all(b"{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n").await.unwrap_or_default();
        writer.flush().await.unwrap_or_default();
        drop(writer);
        drop(reader);
        let mut lines = BufReader::new(client_out).lines();
        let mut got = Vec::new();
        while let Ok(Some(line)) = lines.next_line().await {
            got.push(line);
        }
        let errors = got.iter().filter(|l| l.contains("-32700") && l.contains("\"id\":null")).count();
        assert_eq!(errors, 2, "{got:?}");
        assert!(got.iter().any(|l| l == "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}"), "{got:?}");
        for line in &got {
            assert!(serde_json::from_str::<serde_json::Value>(line).is_ok(), "every line is JSON: {line}");
        }
    }

    #[tokio::test]
    async fn replies_never_split_a_message() {
        let (mut client_in, server_in) = tokio::io::duplex(1 << 16);
        let (server_out, client_out) = tokio::io::duplex(1 << 16);
        let (mut reader, mut writer) = guard(server_in, server_out);
        // rmcp is in the middle of a message when the bad line arrives.
        writer.write_all(b"{\"jsonrpc\":\"2.0\",").await.unwrap_or_default();
        client_in.write_all(b"garbage\n{}\n").await.unwrap_or_default();
        let mut buf = [0u8; 3];
        let n = reader.read(&mut buf).await.unwrap_or_default();
        assert_eq!(&buf[..n], b"{}\n");
        writer.write_all(b"\"id\":2,\"result\":{}}\n").await.unwrap_or_default();
        writer.flush().await.unwrap_or_default();
        drop(writer);
        drop(reader);
        let mut text = String::new();
        let mut client_out = client_out;
        client_out.read_to_string(&mut text).await.unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 2, "{text}");
        assert_eq!(lines[0], "{\"jsonrpc\":\"2.0\",\"id\":2,\"result\":{}}");
        assert!(lines[1].contains("-32700"), "{text}");
    }
}
