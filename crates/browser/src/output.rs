//! Files the browser family saves for the model: over-budget snapshots, screenshots, PDFs, in
//! the workspace's `browser-output/`.

use std::path::{Path, PathBuf};

use toolgate_core::ToolError;

/// The folder, relative to the workspace.
pub(crate) const OUTPUT_DIR: &str = "browser-output";

/// Writes `bytes` to a new file `STEM-TIME[-N].EXT` in the workspace's output folder; returns
/// its path relative to the workspace. The folder must be a real folder (not a link planted to
/// lead elsewhere), and a file is never replaced.
pub(crate) fn save(workspace: &Path, stem: &str, ext: &str, bytes: &[u8]) -> Result<PathBuf, ToolError> {
    let dir = workspace.join(OUTPUT_DIR);
    match std::fs::symlink_metadata(&dir) {
        Ok(meta) if meta.is_dir() => {}
        Ok(_) => {
            return Err(ToolError::failed(format!(
                "{OUTPUT_DIR} in the workspace is not a folder (a file or a link); remove it so the browser can save its output there"
            )));
        }
        Err(_) => std::fs::create_dir(&dir)
            .map_err(|e| ToolError::failed(format!("cannot create {OUTPUT_DIR}/ in the workspace: {e}")))?,
    }
    let stamp = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_millis()).unwrap_or(0);
    for n in 0..100 {
        let name = if n == 0 { format!("{stem}-{stamp}.{ext}") } else { format!("{stem}-{stamp}-{n}.{ext}") };
        // create_new refuses an existing name, a link included.
        match std::fs::OpenOptions::new().write(true).create_new(true).open(dir.join(&name)) {
            Ok(mut file) => {
                use std::io::Write as _;
                file.write_all(bytes)
                    .map_err(|e| ToolError::failed(format!("cannot write {OUTPUT_DIR}/{name}: {e}")))?;
                return Ok(Path::new(OUTPUT_DIR).join(name));
            }
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(ToolError::failed(format!("cannot create {OUTPUT_DIR}/{name}: {e}"))),
        }
    }
    Err(ToolError::failed(format!("cannot find a free file name in {OUTPUT_DIR}/")))
}
