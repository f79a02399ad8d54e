//! A throwaway PostgreSQL cluster for tests: `initdb` in a temporary folder, a server that
//! listens only on a Unix socket in that folder (no TCP), databases made on demand, and the
//! server stopped (`pg_ctl stop -m immediate`) and the folder removed when the [`Cluster`] is
//! dropped.
//!
//! The server binaries come from Debian's `postgresql` package (`cargo xtask deps` installs
//! it): `initdb` and `pg_ctl` on `PATH`, or under `/usr/lib/postgresql/<version>/bin` (where
//! Debian puts them, off `PATH`). When they are missing, [`Cluster::start`] says so and names
//! `cargo xtask deps`: a test that needs PostgreSQL fails, never passes without it.
//!
//! `initdb` refuses to run as root, so under root every server command runs as the `postgres`
//! user (`runuser -u postgres --`) and the folder is given to that user. The cluster is made
//! for speed, not durability (`--no-sync`, `fsync=off`): it lives as long as one test. Its data
//! folder is a copy of a template that the first cluster on the machine makes with `initdb` (in
//! the temporary folder, one per server version): a copy takes a tenth of `initdb`'s time.

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};

/// Where Debian installs each PostgreSQL version's server binaries.
const DEBIAN_ROOT: &str = "/usr/lib/postgresql";

/// The account the server runs as when the tests run as root.
const SERVER_USER: &str = "postgres";

/// A running throwaway cluster; dropping it stops the server and removes its files.
#[derive(Debug)]
pub struct Cluster {
    bin: PathBuf,
    /// Holds the data folder, the socket and the log; removed on drop.
    dir: tempfile::TempDir,
    as_server_user: bool,
    databases: AtomicUsize,
}

impl Cluster {
    /// Creates and starts a cluster, or says why it cannot (binaries missing: run
    /// `cargo xtask deps`; `initdb` or the server failed: its output or log).
    pub fn start() -> Result<Cluster, String> {
        let bin = server_binaries().ok_or_else(|| {
            format!(
                "the PostgreSQL server binaries (`initdb`, `pg_ctl`) are neither on PATH nor under \
                 {DEBIAN_ROOT}/*/bin: run `cargo xtask deps` (it installs Debian's `postgresql`)"
            )
        })?;
        let as_server_user = is_root();
        let dir = tempfile::Builder::new()
            .prefix("tg-pg")
            .tempdir()
            .map_err(|e| format!("cannot create a folder for a PostgreSQL cluster: {e}"))?;
        if as_server_user {
            chown_to_server_user(dir.path())?;
        }
        let cluster = Cluster { bin, dir, as_server_user, databases: AtomicUsize::new(0) };
        cluster.init()?;
        cluster.start_server()?;
        Ok(cluster)
    }

    /// A URL for the `postgres` database as the `postgres` superuser, over the socket.
    pub fn url(&self) -> String {
        self.url_of("postgres")
    }

    /// Creates a new, empty database and returns its URL (each call a different name, so tests
    /// sharing a cluster do not share tables).
    pub fn database(&self) -> Result<String, String> {
        let name = format!("test_{}", self.databases.fetch_add(1, Ordering::Relaxed));
        let out = self
            .server_command("createdb")
            .args(["-h", &path_text(self.socket_dir()), "-U", SERVER_USER, &name])
            .stdin(Stdio::null())
            .output()
            .map_err(|e| format!("cannot run createdb: {e}"))?;
        if !out.status.success() {
            return Err(format!("createdb {name} failed: {}", String::from_utf8_lossy(&out.stderr).trim()));
        }
        Ok(self.url_of(&name))
    }

    /// The folder holding the server's Unix socket (`.s.PGSQL.5432`).
    pub fn socket_dir(&self) -> &Path {
        self.dir.path()
    }

    /// The server's log (what to read when a test's query fails oddly).
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.log_path()).unwrap_or_default()
    }

    fn url_of(&self, database: &str) -> String {
        format!("postgres://{SERVER_USER}@{}/{database}", percent_encode(&path_text(self.socket_dir())))
    }

    fn data_dir(&self) -> PathBuf {
        self.dir.path().join("data")
    }

    fn log_path(&self) -> PathBuf {
        self.dir.path().join("server.log")
    }

    /// Fills the data folder: a copy of this machine's template (one `initdb` for every
    /// cluster of a test run: about 1.5 s each otherwise), or `initdb` itself when no template
    /// can be made.
    fn init(&self) -> Result<(), String> {
        match self.template() {
            Ok(template) => {
                let out = self
                    .as_owner("cp")
                    .arg("-a")
                    .arg(&template)
                    .arg(self.data_dir())
                    .stdin(Stdio::null())
                    .output()
                    .map_err(|e| format!("cannot run cp: {e}"))?;
                if out.status.success() {
                    return Ok(());
                }
                Err(format!("cannot copy {}: {}", template.display(), String::from_utf8_lossy(&out.stderr).trim()))
            }
            Err(_) => self.initdb(&self.data_dir()),
        }
    }

    /// The template data folder in the temporary folder, made on first use. Several test
    /// processes may make one at once: each builds its own and renames it into place, and the
    /// loser uses the winner's. A folder of that name owned by another account (which could
    /// have put anything in it) is never used.
    fn template(&self) -> Result<PathBuf, String> {
        let uid = current_uid().ok_or("cannot tell the current user")?;
        let name = format!("toolgate-pg-template-v1{}", path_text(&self.bin).replace('/', "_"));
        let root = std::env::temp_dir().join(name);
        let data = root.join("data");
        let usable = |root: &Path| {
            std::fs::symlink_metadata(root).is_ok_and(|m| m.is_dir() && m.uid() == uid)
                && data.join("PG_VERSION").is_file()
        };
        if usable(&root) {
            return Ok(data);
        }
        let building = tempfile::Builder::new()
            .prefix("toolgate-pg-template-")
            .tempdir()
            .map_err(|e| format!("cannot create a folder for the template: {e}"))?;
        // Readable by the server's account, which owns only `data` inside.
        std::fs::set_permissions(building.path(), std::fs::Permissions::from_mode(0o755))
            .map_err(|e| format!("cannot open the template's folder: {e}"))?;
        let building_data = building.path().join("data");
        std::fs::create_dir(&building_data).map_err(|e| format!("cannot create the template's data folder: {e}"))?;
        std::fs::set_permissions(&building_data, std::fs::Permissions::from_mode(0o700))
            .map_err(|e| format!("cannot restrict the template's data folder: {e}"))?;
        if self.as_server_user {
            chown_to_server_user(&building_data)?;
        }
        self.initdb(&building_data)?;
        let building = building.keep();
        if std::fs::rename(&building, &root).is_err() {
            // Another process was first: its template is as good.
            let _ = std::fs::remove_dir_all(&building);
        }
        if usable(&root) { Ok(data) } else { Err(format!("no usable template at {}", root.display())) }
    }

    fn initdb(&self, data: &Path) -> Result<(), String> {
        let out = self
            .server_command("initdb")
            .args(["-D", &path_text(data)])
            .args(["-U", SERVER_USER, "-A", "trust", "-E", "UTF8", "--locale=C", "--no-sync"])
            .stdin(Stdio::null())
            .output()
            .map_err(|e| format!("cannot run initdb: {e}"))?;
        if out.status.success() {
            return Ok(());
        }
        Err(format!(
            "initdb failed: {}{}",
            String::from_utf8_lossy(&out.stdout).trim(),
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }

    /// Stops the server (`pg_ctl stop -m fast`: open connections are cut, as in a restart),
    /// keeping its files: [`Cluster::start_server`] starts it again on the same socket.
    pub fn stop_server(&self) -> Result<(), String> {
        let status = self
            .server_command("pg_ctl")
            .args(["-D", &path_text(&self.data_dir()), "-m", "fast", "-w", "-t", "60", "stop"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .map_err(|e| format!("cannot run pg_ctl: {e}"))?;
        if status.success() {
            return Ok(());
        }
        Err(format!("pg_ctl stop failed ({status}); the server's log:\n{}", self.log()))
    }

    /// Starts the server (again, after [`Cluster::stop_server`]) and waits until it answers.
    pub fn start_server(&self) -> Result<(), String> {
        // No TCP (`listen_addresses` empty): only the socket in this folder, which nobody else
        // knows. `-l` sends the server's output to a file and every stream of pg_ctl is null:
        // a pipe inherited by the server would never close and the test would hang on it.
        let options = format!(
            "-c listen_addresses='' -k {} -c fsync=off -c full_page_writes=off -c synchronous_commit=off",
            path_text(self.socket_dir())
        );
        let status = self
            .server_command("pg_ctl")
            .args(["-D", &path_text(&self.data_dir()), "-l", &path_text(&self.log_path()), "-o", &options])
            .args(["-w", "-t", "60", "start"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .map_err(|e| format!("cannot run pg_ctl: {e}"))?;
        if status.success() {
            return Ok(());
        }
        Err(format!("pg_ctl start failed ({status}); the server's log:\n{}", self.log()))
    }

    fn server_command(&self, program: &str) -> Command {
        self.as_owner(self.bin.join(program))
    }

    /// `program` run as the account that owns the cluster's files.
    fn as_owner(&self, program: impl AsRef<std::ffi::OsStr>) -> Command {
        if self.as_server_user {
            let mut command = Command::new("runuser");
            command.args(["-u", SERVER_USER, "--"]).arg(program);
            command
        } else {
            Command::new(program)
        }
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let _ = self
            .server_command("pg_ctl")
            .args(["-D", &path_text(&self.data_dir()), "-m", "immediate", "-w", "stop"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
    }
}

/// The folder with `initdb` and `pg_ctl`: on `PATH`, else the newest Debian version's.
fn server_binaries() -> Option<PathBuf> {
    let has_both = |dir: &Path| dir.join("initdb").is_file() && dir.join("pg_ctl").is_file();
    let on_path = std::env::var_os("PATH").and_then(|path| std::env::split_paths(&path).find(|dir| has_both(dir)));
    if let Some(dir) = on_path {
        // A link on PATH (`/usr/local/bin/initdb`) leads to the folder that also has
        // `createdb`, `psql` and `postgres` of the same version.
        return dir.join("initdb").canonicalize().ok().and_then(|real| Some(real.parent()?.to_owned())).or(Some(dir));
    }
    let mut versions: Vec<(u32, PathBuf)> = std::fs::read_dir(DEBIAN_ROOT)
        .ok()?
        .filter_map(Result::ok)
        .filter_map(|entry| {
            let version = entry.file_name().to_str()?.parse::<u32>().ok()?;
            let bin = entry.path().join("bin");
            has_both(&bin).then_some((version, bin))
        })
        .collect();
    versions.sort();
    versions.pop().map(|(_, bin)| bin)
}

/// Gives `dir` and what is in it to the server's account (initdb refuses root).
fn chown_to_server_user(dir: &Path) -> Result<(), String> {
    let owned = Command::new("chown")
        .args(["-R", &format!("{SERVER_USER}:"), &path_text(dir)])
        .output()
        .map_err(|e| format!("cannot run chown: {e}"))?;
    if owned.status.success() {
        return Ok(());
    }
    Err(format!(
        "cannot give {} to the `{SERVER_USER}` user (initdb refuses root; is Debian's \
         `postgresql` installed? run `cargo xtask deps`): {}",
        dir.display(),
        String::from_utf8_lossy(&owned.stderr).trim()
    ))
}

fn current_uid() -> Option<u32> {
    let out = Command::new("id").arg("-u").output().ok()?;
    String::from_utf8(out.stdout).ok()?.trim().parse().ok()
}

fn is_root() -> bool {
    current_uid() == Some(0)
}

fn path_text(path: &Path) -> String {
    path.to_string_lossy().into_owned()
}

/// A socket folder as a URL's host: every byte but unreserved ones percent-encoded (`/`
/// becomes `%2F`, which libpq and tokio-postgres read as a socket folder).
fn percent_encode(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A real cluster answers on its socket, a second database is separate, and dropping the
    /// cluster stops the server (its socket is gone).
    #[test]
    fn a_cluster_starts_serves_and_stops() {
        let cluster = Cluster::start().unwrap_or_else(|e| panic!("{e}"));
        let url = cluster.database().unwrap();
        assert!(url.starts_with("postgres://postgres@%2F"), "{url}");
        let socket = cluster.socket_dir().join(".s.PGSQL.5432");
        assert!(socket.exists(), "no socket; log:\n{}", cluster.log());
        let psql = |db: &str, sql: &str| {
            cluster
                .server_command("psql")
                .args(["-h", &path_text(cluster.socket_dir()), "-U", SERVER_USER, "-d", db, "-At", "-c", sql])
                .stdin(Stdio::null())
                .output()
                .unwrap()
        };
        let db = url.rsplit('/').next().unwrap().to_owned();
        let out = psql(&db, "SELECT current_database()");
        assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), db, "{}", String::from_utf8_lossy(&out.stderr));
        let out = psql(&db, "SHOW listen_addresses");
        assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "", "no TCP listener");
        drop(cluster);
        assert!(!socket.exists(), "the server is stopped and its folder removed");
    }

    #[test]
    fn socket_folders_are_encoded_as_url_hosts() {
        assert_eq!(percent_encode("/tmp/tg-pg a"), "%2Ftmp%2Ftg-pg%20a");
    }
}
