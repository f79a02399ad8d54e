//! Line counts of large files for `read`, taken in the background and kept for later calls.
//!
//! `read` does not count the lines of a file over 8 MiB before it answers (12 million lines of a
//! 1 GB log take over a second). Instead the first page starts a count on a thread of its own and
//! says "at least N lines"; a later call on the same unchanged file gets the exact total and, from
//! the checkpoints the count left, jumps to any page without scanning the lines before it.
//!
//! A count is kept by the file's identity and version (device, inode, size, modification and
//! change time): any write changes the size or the times, so a changed file is counted again
//! instead of being reported with an old total. A count whose file changed while it was taken
//! is thrown away.

use std::collections::HashMap;
use std::fs::File;
use std::os::unix::fs::FileExt as _;
use std::sync::{Arc, Mutex, MutexGuard};

use rustix::fs::Stat;

/// A checkpoint every this many lines (183 for 12 million lines).
pub(crate) const STEP: u64 = 1 << 16;
/// Most counts kept; past it the finished ones are dropped.
const MAX_KEPT: usize = 64;
/// Most counts running at once (each is one thread reading one file).
const MAX_RUNNING: usize = 2;
/// Bytes read per `pread` while counting.
const CHUNK: usize = 1 << 20;

/// Which version of which file a count belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct Version {
    dev: u64,
    ino: u64,
    size: u64,
    mtime: (i64, i64),
    ctime: (i64, i64),
}

impl Version {
    #[allow(clippy::unnecessary_cast, clippy::useless_conversion)]
    fn of(stat: &Stat) -> Version {
        Version {
            dev: stat.st_dev as u64,
            ino: stat.st_ino as u64,
            size: u64::try_from(stat.st_size).unwrap_or(0),
            mtime: (stat.st_mtime as i64, stat.st_mtime_nsec as i64),
            ctime: (stat.st_ctime as i64, stat.st_ctime_nsec as i64),
        }
    }
}

/// The lines of one version of a file.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Counted {
    /// Lines, a last one without a newline included.
    pub(crate) total: u64,
    /// `starts[k]` is the byte offset where line `k * STEP + 1` starts.
    starts: Vec<u64>,
}

impl Counted {
    /// The checkpoint at or before line `line` (1-based): (lines before it, its byte offset).
    pub(crate) fn checkpoint(&self, line: u64) -> (u64, u64) {
        let k = usize::try_from(line.saturating_sub(1) / STEP).unwrap_or(usize::MAX).min(self.starts.len() - 1);
        (k as u64 * STEP, self.starts[k])
    }
}

#[derive(Debug)]
enum Entry {
    Counting,
    Done(Arc<Counted>),
}

/// The counts of one [`super::state::FsState`].
#[derive(Debug, Default)]
pub(crate) struct LineCounts {
    entries: Arc<Mutex<HashMap<Version, Entry>>>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl LineCounts {
    /// The count of the file whose metadata is `stat`, if this version was counted.
    pub(crate) fn get(&self, stat: &Stat) -> Option<Arc<Counted>> {
        match lock(&self.entries).get(&Version::of(stat)) {
            Some(Entry::Done(c)) => Some(c.clone()),
            _ => None,
        }
    }

    /// Starts counting `file` (metadata `stat`) on a thread of its own, unless this version is
    /// counted or being counted, or [`MAX_RUNNING`] counts are running (a later call starts it).
    pub(crate) fn start(&self, file: &File, stat: &Stat) {
        let version = Version::of(stat);
        let file = {
            let mut entries = lock(&self.entries);
            if entries.contains_key(&version)
                || entries.values().filter(|e| matches!(e, Entry::Counting)).count() >= MAX_RUNNING
            {
                return;
            }
            // Its own descriptor: `pread` leaves the caller's file position alone.
            let Ok(file) = file.try_clone() else { return };
            if entries.len() >= MAX_KEPT {
                entries.retain(|_, e| matches!(e, Entry::Counting));
            }
            entries.insert(version, Entry::Counting);
            file
        };
        let entries = self.entries.clone();
        let spawned = std::thread::Builder::new().name("read-line-count".to_owned()).spawn(move || {
            let counted = count(&file, version.size);
            let unchanged = rustix::fs::fstat(&file).is_ok_and(|now| Version::of(&now) == version);
            let mut entries = lock(&entries);
            match counted {
                Ok(c) if unchanged => entries.insert(version, Entry::Done(Arc::new(c))),
                _ => entries.remove(&version),
            };
        });
        if spawned.is_err() {
            lock(&self.entries).remove(&version);
        }
    }
}

/// Counts the lines of the first `size` bytes of `file`, with a checkpoint every [`STEP`] lines.
pub(crate) fn count(file: &File, size: u64) -> std::io::Result<Counted> {
    let mut buf = vec![0u8; CHUNK];
    let mut starts = vec![0u64];
    let mut newlines = 0u64;
    let mut at = 0u64;
    let mut last = None;
    while at < size {
        let want = usize::try_from(size - at).unwrap_or(usize::MAX).min(CHUNK);
        let n = match file.read_at(&mut buf[..want], at) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        let chunk = &buf[..n];
        // Most chunks hold no checkpoint: counted in one pass, walked only when one falls inside.
        let here = memchr::memchr_iter(b'\n', chunk).count() as u64;
        if (newlines + here) / STEP > newlines / STEP {
            for i in memchr::memchr_iter(b'\n', chunk) {
                newlines += 1;
                if newlines.is_multiple_of(STEP) {
                    starts.push(at + i as u64 + 1);
                }
            }
        } else {
            newlines += here;
        }
        last = chunk.last().copied();
        at += n as u64;
    }
    // A last line without a newline counts; a checkpoint at the very end starts no line.
    let total = newlines + u64::from(last.is_some_and(|b| b != b'\n'));
    if starts.len() > 1 && starts.last() == Some(&at) {
        starts.pop();
    }
    Ok(Counted { total, starts })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write as _;

    fn file_of(body: &[u8]) -> File {
        let mut f = tempfile::tempfile().unwrap_or_else(|e| panic!("{e}"));
        f.write_all(body).unwrap_or_else(|e| panic!("{e}"));
        f
    }

    #[test]
    fn counts_lines_and_places_checkpoints_at_line_starts() {
        let lines = STEP * 3 + 5;
        let body: Vec<u8> = (1..=lines).flat_map(|i| format!("{i}\n").into_bytes()).collect();
        let c = count(&file_of(&body), body.len() as u64).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(c.total, lines);
        assert_eq!(c.starts.len(), 4);
        for line in [1, 2, STEP, STEP + 1, STEP * 2 + 7, lines] {
            let (before, at) = c.checkpoint(line);
            assert!(before < line && line - before <= STEP, "{line}: {before}");
            let text = std::str::from_utf8(&body[at as usize..]).unwrap_or_default();
            assert!(text.starts_with(&format!("{}\n", before + 1)), "line {line}: {:?}", &text[..10]);
        }
    }

    #[test]
    fn a_last_line_without_newline_counts_and_empty_files_have_none() {
        let c = count(&file_of(b"a\nb"), 3).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(c.total, 2);
        let c = count(&file_of(b""), 0).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(c.total, 0);
        assert_eq!(c.checkpoint(1), (0, 0));
        // Exactly STEP lines: no checkpoint past the end.
        let body = "x\n".repeat(STEP as usize);
        let c = count(&file_of(body.as_bytes()), body.len() as u64).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!((c.total, c.starts.len()), (STEP, 1));
    }
}
