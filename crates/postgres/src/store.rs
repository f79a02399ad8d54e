//! [`PgStore`]: a connection pool to one PostgreSQL database, behind the store traits.

use std::sync::Arc;
use std::time::Duration;

use deadpool_postgres::{Manager, ManagerConfig, Object, Pool, RecyclingMethod, Runtime};
use tokio_postgres::Socket;
use tokio_postgres::tls::MakeTlsConnect;
use tokio_postgres_rustls::MakeRustlsConnect;
use toolgate_store::{SecretCipher, SecretError, StoreError};

use crate::bridge::Bridge;
use crate::error::PgError;
use crate::listen::{self, Heard};
use crate::{migrations, revisions};

/// Connections a store keeps at most (each node's share of the server's `max_connections`).
const POOL_SIZE: usize = 16;

/// How long a call waits for a connection, and a new connection for the server, before it
/// fails with an error saying so (instead of hanging while the database is down).
const CONNECT_WAIT: Duration = Duration::from_secs(10);

/// toolgate's state in one PostgreSQL database; cheap to clone (one pool, one thread).
#[derive(Debug, Clone)]
pub struct PgStore {
    bridge: Arc<Bridge>,
    /// How to open a connection of its own, outside the pool (`LISTEN`, `listen.rs`).
    connect: Arc<Connect>,
    /// The key secrets are sealed with (`secrets.rs`); none: secrets are refused.
    cipher: Option<Arc<SecretCipher>>,
    /// What the `LISTEN` connection hears: revisions kept in memory, approvals' watchers.
    heard: Arc<Heard>,
    /// The pool the store's thread uses, for its figures only ([`PgStore::pool_use`]).
    pool: Pool,
}

/// How a store's pool is used at one moment (`/metrics`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PoolUse {
    /// Connections open, in use or idle.
    pub open: usize,
    /// Open connections idle in the pool.
    pub idle: usize,
    /// Callers waiting for a connection (every one is in use and the pool is at its maximum).
    pub waiting: usize,
    /// The most connections the pool opens.
    pub max: usize,
}

/// What opening a connection takes: the parsed URL and the TLS connector.
pub(crate) struct Connect {
    pub(crate) config: tokio_postgres::Config,
    pub(crate) tls: Tls,
}

impl std::fmt::Debug for Connect {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the URL's password.
        f.debug_struct("Connect").field("hosts", &self.config.get_hosts()).finish_non_exhaustive()
    }
}

impl PgStore {
    /// Connects to the database at `url` (`postgres://user:password@host:port/database`, with
    /// libpq's parameters such as `sslmode=require`; a host that is a path, percent-encoded, is
    /// a Unix socket's folder) and brings its schema up to date.
    pub fn connect(url: &str) -> Result<PgStore, StoreError> {
        let mut config: tokio_postgres::Config = url.parse().map_err(|e: tokio_postgres::Error| {
            PgError::Db(e).doing("reading the PostgreSQL URL (expected postgres://user@host/database)")
        })?;
        // As libpq: no TLS over a Unix socket (the kernel carries it; a socket path is no name
        // a certificate could be checked against).
        let hosts = config.get_hosts();
        if !hosts.is_empty() && hosts.iter().all(|h| matches!(h, tokio_postgres::config::Host::Unix(_))) {
            config.ssl_mode(tokio_postgres::config::SslMode::Disable);
        }
        let tls = Tls(tokio_postgres_rustls::MakeRustlsConnect::new(tls_config()));
        let connect = Arc::new(Connect { config: config.clone(), tls: tls.clone() });
        let manager = Manager::from_config(config, tls, ManagerConfig { recycling_method: RecyclingMethod::Fast });
        let pool = Pool::builder(manager)
            .max_size(POOL_SIZE)
            .runtime(Runtime::Tokio1)
            .wait_timeout(Some(CONNECT_WAIT))
            .create_timeout(Some(CONNECT_WAIT))
            .recycle_timeout(Some(CONNECT_WAIT))
            .build()
            .map_err(|e| PgError::Data(e.to_string()).doing("setting up the PostgreSQL pool"))?;
        let bridge = Bridge::start(pool.clone()).map_err(|e| StoreError::Backend {
            doing: "starting the PostgreSQL store's thread",
            source: Box::new(e),
        })?;
        let store = PgStore { bridge: Arc::new(bridge), connect, cipher: None, heard: Arc::default(), pool };
        store.run("migrating the PostgreSQL schema", migrations::migrate)?;
        let (heard, pool) = (Arc::clone(&store.heard), store.pool.clone());
        store.spawn(|connect| listen::listen(connect, pool, heard))?;
        Ok(store)
    }

    /// This store with secrets sealed by `cipher`: the same key on every node
    /// (`TOOLGATE_SECRET_KEY`), so each reads what another stored.
    pub fn with_secret_cipher(mut self, cipher: SecretCipher) -> PgStore {
        self.cipher = Some(Arc::new(cipher));
        self
    }

    /// How the pool is used now.
    pub fn pool_use(&self) -> PoolUse {
        let status = self.pool.status();
        PoolUse { open: status.size, idle: status.available, waiting: status.waiting, max: status.max_size }
    }

    /// Whether this store keeps secrets (it was given their key).
    pub fn keeps_secrets(&self) -> bool {
        self.cipher.is_some()
    }

    pub(crate) fn cipher(&self) -> Result<&SecretCipher, SecretError> {
        self.cipher.as_deref().ok_or(SecretError::NoSharedKey)
    }

    /// The schema version the database has ([`crate::SCHEMA_VERSION`] once connected).
    pub fn schema_version(&self) -> Result<usize, StoreError> {
        self.run("reading the schema version", migrations::version)
    }

    /// The database's clock now, in Unix milliseconds: what a time compared across machines
    /// goes by (a lease another process wrote), where the caller's own clock may run apart.
    pub fn clock_ms(&self) -> Result<i64, StoreError> {
        self.run("reading the database's clock", |client| async move {
            let now: i64 = client
                .query_one("SELECT (extract(epoch FROM clock_timestamp()) * 1000)::bigint", &[])
                .await?
                .try_get(0)?;
            Ok(now)
        })
    }

    /// Whether this store answers revision reads from memory (its `LISTEN` connection is up
    /// and read every revision since it connected; `revisions.rs`), rather than the database.
    pub fn revisions_in_step(&self) -> bool {
        self.heard.revisions.in_step()
    }

    /// How long this node's latest probe notification took to come back on its `LISTEN`
    /// connection (`lag.rs`); `None` until one has since the connection was made.
    pub fn notify_lag(&self) -> Option<std::time::Duration> {
        self.heard.lag.last()
    }

    /// How many revision reads the database answered (rather than memory) since this store
    /// connected.
    pub fn revision_queries(&self) -> u64 {
        self.heard.revisions.queries()
    }

    /// A revision's value (`identity` or `grants`): from memory when it is in step, else from
    /// the database, and a read of the database made while the listener is subscribed puts
    /// memory back in step (`revisions.rs`).
    pub(crate) fn revision(&self, name: &'static str) -> Result<i64, StoreError> {
        let kept = &self.heard.revisions;
        if let Some(value) = kept.cached(name) {
            return Ok(value);
        }
        // Both before the read (`revisions.rs`).
        let (epoch, subscribed) = (kept.epoch(), kept.subscribed());
        kept.counted_query();
        let read = self.run("reading the revisions", |c| async move { revisions::read_all(&c).await })?;
        let value = *read.get(name).ok_or_else(|| {
            PgError::Data(format!("the database has no `{name}` revision row: was its schema changed by hand?"))
                .doing("reading the revisions")
        })?;
        kept.raise_all(&read);
        if subscribed {
            kept.primed(epoch);
        }
        Ok(value)
    }

    /// [`PgStore::run`] for a write that may raise a revision: once it has committed, memory
    /// stops answering, so the next read on this node sees the write (even before its
    /// notification arrives) and primes memory again.
    pub(crate) fn run_changing<T, W, F>(&self, doing: &'static str, work: W) -> Result<T, StoreError>
    where
        T: Send + 'static,
        W: FnOnce(Object) -> F + Send + 'static,
        F: Future<Output = Result<T, PgError>> + Send + 'static,
    {
        let done = self.run(doing, work);
        // Also after an error: the write may have committed before its answer was lost.
        self.heard.revisions.out_of_step();
        done
    }

    /// Calls `wake` on every approval decided on any node, and after each reconnection of the
    /// `LISTEN` connection.
    pub(crate) fn watch_approvals(&self, wake: Box<dyn Fn() + Send + Sync>) {
        self.heard.watch_approvals(wake);
    }

    /// Starts `task` on the store's thread, with what it needs to open a connection of its own.
    pub(crate) fn spawn<F>(&self, task: impl FnOnce(Arc<Connect>) -> F) -> Result<(), StoreError>
    where
        F: Future<Output = ()> + Send + 'static,
    {
        self.bridge.spawn(task(Arc::clone(&self.connect))).map_err(|e| e.doing("starting a background task"))
    }

    /// Runs `work` on the store's thread with a pooled connection; its error says what was
    /// being done.
    pub(crate) fn run<T, W, F>(&self, doing: &'static str, work: W) -> Result<T, StoreError>
    where
        T: Send + 'static,
        W: FnOnce(Object) -> F + Send + 'static,
        F: Future<Output = Result<T, PgError>> + Send + 'static,
    {
        self.bridge.run(work).map_err(|e| e.doing(doing))
    }

    /// [`PgStore::run`], keeping the error as it is (for a caller that retries what is
    /// [transient](PgError::is_transient)).
    pub(crate) fn try_run<T, W, F>(&self, work: W) -> Result<T, PgError>
    where
        T: Send + 'static,
        W: FnOnce(Object) -> F + Send + 'static,
        F: Future<Output = Result<T, PgError>> + Send + 'static,
    {
        self.bridge.run(work)
    }
}

/// rustls for the pool's connections. tokio-postgres asks for a connector even for a Unix
/// socket, whose name is empty, which rustls refuses as a server name: that connection never
/// uses TLS (`connect` turns it off), so any valid name stands in.
#[derive(Clone)]
pub(crate) struct Tls(MakeRustlsConnect);

impl MakeTlsConnect<Socket> for Tls {
    type Stream = <MakeRustlsConnect as MakeTlsConnect<Socket>>::Stream;
    type TlsConnect = <MakeRustlsConnect as MakeTlsConnect<Socket>>::TlsConnect;
    type Error = <MakeRustlsConnect as MakeTlsConnect<Socket>>::Error;

    fn make_tls_connect(&mut self, domain: &str) -> Result<Self::TlsConnect, Self::Error> {
        let domain = if domain.is_empty() { "localhost" } else { domain };
        <MakeRustlsConnect as MakeTlsConnect<Socket>>::make_tls_connect(&mut self.0, domain)
    }
}

/// TLS for connections that ask for it (`sslmode=prefer`, the default, or `require`): the
/// system's root certificates, rustls with ring (the provider the workspace's HTTP client uses).
/// A connection over a Unix socket never uses TLS.
fn tls_config() -> rustls::ClientConfig {
    let mut roots = rustls::RootCertStore::empty();
    // Certificates the system has but rustls cannot parse are skipped (as browsers do).
    let found = rustls_native_certs::load_native_certs();
    roots.add_parsable_certificates(found.certs);
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    match rustls::ClientConfig::builder_with_provider(provider).with_safe_default_protocol_versions() {
        Ok(builder) => builder.with_root_certificates(roots).with_no_client_auth(),
        // ring's default provider supports the default versions; kept as a fallback rather
        // than a panic.
        Err(_) => rustls::ClientConfig::builder().with_root_certificates(roots).with_no_client_auth(),
    }
}
