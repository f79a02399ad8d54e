//! The bearer token every HTTP request must carry.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use crate::Error;

/// The HTTP bearer token, stored in `<workspace>/.toolgate/http-token` (mode 0600).
#[derive(Clone)]
pub struct HttpToken {
    secret: String,
    path: PathBuf,
    created: bool,
}

impl std::fmt::Debug for HttpToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HttpToken").field("path", &self.path).field("created", &self.created).finish_non_exhaustive()
    }
}

impl HttpToken {
    /// The token file for `workspace`.
    pub fn path_in(workspace: &Path) -> PathBuf {
        workspace.join(".toolgate").join("http-token")
    }

    /// Reads the workspace's token, or generates one (256 random bits, hex) and stores it with
    /// mode 0600 on first start.
    pub fn load_or_create(workspace: &Path) -> Result<HttpToken, Error> {
        let path = Self::path_in(workspace);
        let err = |source| Error::Token { path: path.clone(), source };
        match std::fs::read_to_string(&path) {
            Ok(text) if !text.trim().is_empty() => {
                return Ok(HttpToken { secret: text.trim().to_owned(), path, created: false });
            }
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(err(e)),
        }
        let secret = random_hex(32).map_err(err)?;
        if let Some(dir) = path.parent() {
            // `.toolgate/` is its owner's alone (0700), whatever the umask.
            std::os::unix::fs::DirBuilderExt::mode(std::fs::DirBuilder::new().recursive(true), 0o700)
                .create(dir)
                .map_err(err)?;
        }
        let mut options = std::fs::OpenOptions::new();
        options.write(true).create(true).truncate(true);
        #[cfg(unix)]
        {
            use std::os::unix::fs::OpenOptionsExt;
            options.mode(0o600);
        }
        let mut file = options.open(&path).map_err(err)?;
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            file.set_permissions(std::fs::Permissions::from_mode(0o600)).map_err(err)?;
        }
        file.write_all(secret.as_bytes()).and_then(|()| file.write_all(b"\n")).map_err(err)?;
        Ok(HttpToken { secret, path, created: true })
    }

    /// A token with a known value (tests, or a token handed in by an operator).
    pub fn fixed(secret: impl Into<String>) -> HttpToken {
        HttpToken { secret: secret.into(), path: PathBuf::new(), created: false }
    }

    /// The secret, for printing once on first start.
    pub fn secret(&self) -> &str {
        &self.secret
    }

    /// Where it is stored.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Whether this start generated it (print it then, never again).
    pub fn created(&self) -> bool {
        self.created
    }

    /// Whether an `Authorization` header value carries this token (compared in constant time).
    pub fn admits(&self, authorization: Option<&[u8]>) -> bool {
        let Some(value) = authorization else { return false };
        let Some(given) = value.strip_prefix(b"Bearer ").or_else(|| value.strip_prefix(b"bearer ")) else {
            return false;
        };
        let expected = self.secret.as_bytes();
        let given = trim_ascii(given);
        if given.len() != expected.len() {
            return false;
        }
        given.iter().zip(expected).fold(0u8, |acc, (a, b)| acc | (a ^ b)) == 0
    }
}

fn trim_ascii(bytes: &[u8]) -> &[u8] {
    bytes.trim_ascii()
}

fn random_hex(bytes: usize) -> std::io::Result<String> {
    let mut buf = vec![0u8; bytes];
    std::fs::File::open("/dev/urandom")?.read_exact(&mut buf)?;
    Ok(buf.iter().map(|b| format!("{b:02x}")).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn token_is_created_once_with_mode_0600_and_then_reused() -> Result<(), Box<dyn std::error::Error>> {
        let dir = tempfile::tempdir()?;
        let first = HttpToken::load_or_create(dir.path())?;
        assert!(first.created());
        assert_eq!(first.secret().len(), 64);
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            assert_eq!(std::fs::metadata(first.path())?.permissions().mode() & 0o777, 0o600);
        }
        let second = HttpToken::load_or_create(dir.path())?;
        assert!(!second.created());
        assert_eq!(first.secret(), second.secret());
        Ok(())
    }

    #[test]
    fn only_the_exact_bearer_token_is_admitted() {
        let token = HttpToken::fixed("abc123");
        assert!(token.admits(Some(b"Bearer abc123")));
        assert!(!token.admits(Some(b"Bearer abc124")));
        assert!(!token.admits(Some(b"Bearer abc1234")));
        assert!(!token.admits(Some(b"Basic abc123")));
        assert!(!token.admits(None));
    }
}
