//! Unpacking a skill archive (`.zip`, `.tar.gz`) for `skill_install`, treating every byte of it
//! as hostile: entries are checked before anything is written (no absolute paths, no `..`, no
//! links or devices, names in plain text), and the caps hold while inflating, so a
//! decompression bomb stops at the cap instead of filling the disk.

use std::io::Read;
use std::path::{Component, Path, PathBuf};

/// Caps while unpacking (the installer checks the unpacked skill again).
pub(crate) struct Caps {
    pub(crate) files: usize,
    pub(crate) file_bytes: u64,
    pub(crate) total_bytes: u64,
}

/// The archive kinds, recognised by their first bytes (not by a name the sender chose).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Zip,
    TarGz,
}

impl Kind {
    pub(crate) fn sniff(bytes: &[u8]) -> Option<Kind> {
        if bytes.starts_with(b"PK\x03\x04") {
            Some(Kind::Zip)
        } else if bytes.starts_with(&[0x1f, 0x8b]) {
            Some(Kind::TarGz)
        } else {
            None
        }
    }
}

/// Unpacks `bytes` into a new folder in `staging` (an empty folder) and returns the skill's
/// folder: the archive's single top-level folder holding `SKILL.md`, or, when `SKILL.md` is at
/// the archive's root, the unpacked folder renamed after the skill (a skill's folder is named
/// after it).
pub(crate) fn unpack(bytes: &[u8], staging: &Path, caps: &Caps) -> Result<PathBuf, String> {
    let into = staging.join("unpacked");
    let mut budget = Budget { caps, files: 0, total: 0 };
    match Kind::sniff(bytes) {
        Some(Kind::Zip) => unpack_zip(bytes, &into, &mut budget)?,
        Some(Kind::TarGz) => unpack_tar_gz(bytes, &into, &mut budget)?,
        None => return Err("it is neither a .zip nor a .tar.gz archive (checked by its first bytes)".into()),
    }
    if !into.join("SKILL.md").is_file() {
        return skill_root(&into);
    }
    let name = front_matter_name(&into.join("SKILL.md"))
        .filter(|n| super::valid_name(n))
        .ok_or("its SKILL.md has no valid `name` in its front matter")?;
    let named = staging.join(&name);
    std::fs::rename(&into, &named).map_err(|e| format!("cannot name the unpacked skill: {e}"))?;
    Ok(named)
}

/// The `name:` line of a SKILL.md's front matter (the installer then parses it fully).
fn front_matter_name(md: &Path) -> Option<String> {
    let text = std::fs::read_to_string(md).ok()?;
    let mut lines = text.lines();
    (lines.next()?.trim_end() == "---").then_some(())?;
    lines.take_while(|l| l.trim_end() != "---").find_map(|l| {
        let value = l.strip_prefix("name:")?.trim().trim_matches(|c| c == '"' || c == '\'');
        Some(value.to_owned())
    })
}

struct Budget<'a> {
    caps: &'a Caps,
    files: usize,
    total: u64,
}

impl Budget<'_> {
    /// Copies one entry's content into `to`, failing past the per-file or total cap.
    fn write(&mut self, name: &str, mut content: impl Read, to: &Path) -> Result<(), String> {
        self.files += 1;
        if self.files > self.caps.files {
            return Err(format!("it has more than {} files", self.caps.files));
        }
        let mut data = Vec::new();
        let limit = self.caps.file_bytes.min(self.caps.total_bytes - self.total.min(self.caps.total_bytes));
        content
            .by_ref()
            .take(limit + 1)
            .read_to_end(&mut data)
            .map_err(|e| format!("cannot read `{name}` in the archive: {e}"))?;
        if data.len() as u64 > self.caps.file_bytes {
            return Err(format!("`{name}` is larger than {} bytes unpacked", self.caps.file_bytes));
        }
        if data.len() as u64 > limit {
            return Err(format!("it is larger than {} bytes unpacked", self.caps.total_bytes));
        }
        self.total += data.len() as u64;
        if let Some(parent) = to.parent() {
            std::fs::create_dir_all(parent).map_err(|e| format!("cannot unpack `{name}`: {e}"))?;
        }
        std::fs::write(to, data).map_err(|e| format!("cannot unpack `{name}`: {e}"))
    }
}

/// The relative path an entry name stands for, or why it is refused.
fn entry_path(name: &str) -> Result<PathBuf, String> {
    let printable = name.chars().all(|c| !c.is_control()) && !name.contains('\\');
    if name.is_empty() || !printable {
        return Err(format!("the entry name {name:?} has control characters or backslashes"));
    }
    let path = Path::new(name);
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            Component::Normal(part) => out.push(part),
            Component::CurDir => {}
            Component::RootDir | Component::Prefix(_) => return Err(format!("the entry `{name}` is an absolute path")),
            Component::ParentDir => return Err(format!("the entry `{name}` climbs out with `..`")),
        }
    }
    if out.as_os_str().is_empty() {
        return Err(format!("the entry `{name}` names no file"));
    }
    Ok(out)
}

fn unpack_zip(bytes: &[u8], into: &Path, budget: &mut Budget<'_>) -> Result<(), String> {
    let mut zip = zip::ZipArchive::new(std::io::Cursor::new(bytes)).map_err(|e| format!("not a valid zip: {e}"))?;
    if zip.len() > budget.caps.files * 2 {
        return Err(format!("it has {} entries (at most {} files)", zip.len(), budget.caps.files));
    }
    for i in 0..zip.len() {
        let entry = zip.by_index(i).map_err(|e| format!("a zip entry cannot be read: {e}"))?;
        let name = entry.name().map_err(|e| format!("a zip entry has an unreadable name: {e}"))?.into_owned();
        let rel = entry_path(&name)?;
        if entry.is_symlink() {
            return Err(format!("the entry `{name}` is a symbolic link"));
        }
        if entry.is_dir() {
            continue;
        }
        if !entry.is_file() {
            return Err(format!("the entry `{name}` is not a plain file"));
        }
        budget.write(&name, entry, &into.join(rel))?;
    }
    Ok(())
}

fn unpack_tar_gz(bytes: &[u8], into: &Path, budget: &mut Budget<'_>) -> Result<(), String> {
    let mut tar = tar::Archive::new(flate2::read::GzDecoder::new(bytes));
    let entries = tar.entries().map_err(|e| format!("not a valid .tar.gz: {e}"))?;
    for entry in entries {
        let entry = entry.map_err(|e| format!("not a valid .tar.gz: {e}"))?;
        let name = String::from_utf8_lossy(&entry.path_bytes()).into_owned();
        let rel = entry_path(&name)?;
        match entry.header().entry_type() {
            tar::EntryType::Directory => {}
            tar::EntryType::Regular | tar::EntryType::Continuous => budget.write(&name, entry, &into.join(rel))?,
            tar::EntryType::Symlink | tar::EntryType::Link => {
                return Err(format!("the entry `{name}` is a link"));
            }
            // pax and GNU long-name headers are read by the tar crate itself, never returned.
            other => return Err(format!("the entry `{name}` is not a plain file ({other:?})")),
        }
    }
    Ok(())
}

/// The one top-level folder of `into`, when it holds `SKILL.md`.
fn skill_root(into: &Path) -> Result<PathBuf, String> {
    let entries: Vec<PathBuf> = std::fs::read_dir(into)
        .map_err(|e| format!("cannot read the unpacked archive: {e}"))?
        .flatten()
        .map(|e| e.path())
        .collect();
    match entries.as_slice() {
        [only] if only.is_dir() && only.join("SKILL.md").is_file() => Ok(only.clone()),
        _ => Err("it has no SKILL.md at its root or in its single top-level folder".into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entry_names_are_checked() {
        for bad in ["/etc/passwd", "../x", "a/../../x", "a\\b", "a\nb", "", "./"] {
            assert!(entry_path(bad).is_err(), "{bad:?}");
        }
        assert_eq!(entry_path("./pdf/SKILL.md").unwrap(), PathBuf::from("pdf/SKILL.md"));
    }

    #[test]
    fn kinds_are_sniffed_by_content() {
        assert_eq!(Kind::sniff(b"PK\x03\x04rest"), Some(Kind::Zip));
        assert_eq!(Kind::sniff(&[0x1f, 0x8b, 8]), Some(Kind::TarGz));
        assert_eq!(Kind::sniff(b"<html>"), None);
    }
}
