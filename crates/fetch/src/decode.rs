//! Content decoding while the body streams in: gzip, deflate (zlib or raw) and brotli, with
//! the size cap applied to the DECODED bytes as they come out of the inflater, so a
//! decompression bomb stops at the cap instead of filling memory.

use std::io::{self, Write};

/// A `Write` sink that keeps at most `max` bytes and fails the write past it.
#[derive(Debug)]
pub(crate) struct Capped {
    pub(crate) buf: Vec<u8>,
    pub(crate) max: usize,
    pub(crate) over: bool,
}

impl Write for Capped {
    fn write(&mut self, data: &[u8]) -> io::Result<usize> {
        let room = self.max.saturating_sub(self.buf.len());
        if data.len() > room {
            self.buf.extend_from_slice(&data[..room]);
            self.over = true;
            return Err(io::Error::other(CapReached));
        }
        self.buf.extend_from_slice(data);
        Ok(data.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

#[derive(Debug)]
pub(crate) struct CapReached;

impl std::fmt::Display for CapReached {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("size cap reached")
    }
}

impl std::error::Error for CapReached {}

/// One body decoder.
pub(crate) enum Decoder {
    Identity(Capped),
    Gzip(Box<flate2::write::MultiGzDecoder<Capped>>),
    /// HTTP `deflate` is zlib; some servers send raw deflate: decided on the first byte.
    DeflatePending(Capped, Vec<u8>),
    Zlib(Box<flate2::write::ZlibDecoder<Capped>>),
    Raw(Box<flate2::write::DeflateDecoder<Capped>>),
    Brotli(Box<brotli_decompressor::DecompressorWriter<Capped>>),
    /// Finished or failed; the sink is taken.
    Done,
}

impl std::fmt::Debug for Decoder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Decoder::Identity(_) => "identity",
            Decoder::Gzip(_) => "gzip",
            Decoder::DeflatePending(..) | Decoder::Zlib(_) | Decoder::Raw(_) => "deflate",
            Decoder::Brotli(_) => "br",
            Decoder::Done => "done",
        })
    }
}

/// What went wrong while decoding.
pub(crate) enum DecodeError {
    /// The cap was reached; the sink holds exactly `max` bytes.
    Cap(Vec<u8>),
    /// Corrupt input.
    Corrupt(String),
}

impl Decoder {
    /// A decoder for a `Content-Encoding` value (`None` for an unsupported one).
    pub(crate) fn new(encoding: &str, max: usize) -> Option<Decoder> {
        let sink = Capped { buf: Vec::new(), max, over: false };
        Some(match encoding.trim().to_ascii_lowercase().as_str() {
            "" | "identity" => Decoder::Identity(sink),
            "gzip" | "x-gzip" => Decoder::Gzip(Box::new(flate2::write::MultiGzDecoder::new(sink))),
            "deflate" => Decoder::DeflatePending(sink, Vec::new()),
            "br" => Decoder::Brotli(Box::new(brotli_decompressor::DecompressorWriter::new(sink, 8192))),
            _ => return None,
        })
    }

    /// Decoded bytes so far.
    pub(crate) fn decoded_len(&self) -> usize {
        match self {
            Decoder::Identity(s) | Decoder::DeflatePending(s, _) => s.buf.len(),
            Decoder::Gzip(d) => d.get_ref().buf.len(),
            Decoder::Zlib(d) => d.get_ref().buf.len(),
            Decoder::Raw(d) => d.get_ref().buf.len(),
            Decoder::Brotli(d) => d.get_ref().buf.len(),
            Decoder::Done => 0,
        }
    }

    /// Feeds one chunk of the body as received.
    pub(crate) fn push(&mut self, chunk: &[u8]) -> Result<(), DecodeError> {
        if let Decoder::DeflatePending(_, pending) = self {
            pending.extend_from_slice(chunk);
            if pending.len() < 2 {
                return Ok(());
            }
            let zlib = pending[0] & 0x0f == 8 && (u16::from(pending[0]) << 8 | u16::from(pending[1])) % 31 == 0;
            let Decoder::DeflatePending(sink, pending) = std::mem::replace(self, Decoder::Done) else {
                return Ok(());
            };
            *self = if zlib {
                Decoder::Zlib(Box::new(flate2::write::ZlibDecoder::new(sink)))
            } else {
                Decoder::Raw(Box::new(flate2::write::DeflateDecoder::new(sink)))
            };
            return self.push(&pending);
        }
        let result = match self {
            Decoder::Identity(s) => s.write_all(chunk),
            Decoder::Gzip(d) => d.write_all(chunk),
            Decoder::Zlib(d) => d.write_all(chunk),
            Decoder::Raw(d) => d.write_all(chunk),
            Decoder::Brotli(d) => d.write_all(chunk),
            Decoder::DeflatePending(..) | Decoder::Done => Ok(()),
        };
        result.map_err(|e| self.fail(e))
    }

    fn fail(&mut self, e: io::Error) -> DecodeError {
        let over = self.sink_mut().is_some_and(|s| s.over);
        if over {
            let buf = self.sink_mut().map(|s| std::mem::take(&mut s.buf)).unwrap_or_default();
            *self = Decoder::Done;
            DecodeError::Cap(buf)
        } else {
            DecodeError::Corrupt(e.to_string())
        }
    }

    fn sink_mut(&mut self) -> Option<&mut Capped> {
        match self {
            Decoder::Identity(s) | Decoder::DeflatePending(s, _) => Some(s),
            Decoder::Gzip(d) => Some(d.get_mut()),
            Decoder::Zlib(d) => Some(d.get_mut()),
            Decoder::Raw(d) => Some(d.get_mut()),
            Decoder::Brotli(d) => Some(d.get_mut()),
            Decoder::Done => None,
        }
    }

    /// Ends the stream and returns the decoded body.
    pub(crate) fn finish(self) -> Result<Vec<u8>, DecodeError> {
        let map = |e: io::Error, over: bool, buf: Vec<u8>| {
            if over { DecodeError::Cap(buf) } else { DecodeError::Corrupt(e.to_string()) }
        };
        match self {
            Decoder::Identity(s) => Ok(s.buf),
            Decoder::DeflatePending(sink, pending) => {
                if pending.is_empty() {
                    return Ok(sink.buf);
                }
                let mut d = Decoder::Raw(Box::new(flate2::write::DeflateDecoder::new(sink)));
                d.push(&pending)?;
                d.finish()
            }
            Decoder::Gzip(mut d) => match d.try_finish() {
                Ok(()) => d.finish().map(|s| s.buf).map_err(|e| DecodeError::Corrupt(e.to_string())),
                Err(e) => {
                    let s = d.get_mut();
                    let over = s.over;
                    Err(map(e, over, std::mem::take(&mut s.buf)))
                }
            },
            Decoder::Zlib(mut d) => match d.try_finish() {
                Ok(()) => d.finish().map(|s| s.buf).map_err(|e| DecodeError::Corrupt(e.to_string())),
                Err(e) => {
                    let s = d.get_mut();
                    let over = s.over;
                    Err(map(e, over, std::mem::take(&mut s.buf)))
                }
            },
            Decoder::Raw(mut d) => match d.try_finish() {
                Ok(()) => d.finish().map(|s| s.buf).map_err(|e| DecodeError::Corrupt(e.to_string())),
                Err(e) => {
                    let s = d.get_mut();
                    let over = s.over;
                    Err(map(e, over, std::mem::take(&mut s.buf)))
                }
            },
            Decoder::Brotli(mut d) => match d.flush() {
                Ok(()) => {
                    d.into_inner().map(|s| s.buf).map_err(|_| DecodeError::Corrupt("truncated brotli stream".into()))
                }
                Err(e) => {
                    let s = d.get_mut();
                    let over = s.over;
                    Err(map(e, over, std::mem::take(&mut s.buf)))
                }
            },
            Decoder::Done => Ok(Vec::new()),
        }
    }
}
