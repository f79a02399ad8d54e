//! `LISTEN` for changes other nodes make: one connection per store (outside the pool, which
//! recycles connections and would drop the subscription), on the store's thread, for both
//! channels: approvals decided (`toolgate_approvals`: the watchers' `wake`) and revisions raised
//! (`toolgate_revisions`: the values kept in memory, `revisions.rs`). One connection rather than
//! one per channel: a node's share of the server's connections is the pool's, and the two are
//! lost and found again together anyway.
//!
//! Notifications are lossy (a connection lost, a node restarted). So after each (re)connection,
//! once `LISTEN` is in place, the watchers are woken (they look at the database again) and every
//! revision is read again (priming); when the connection is lost, memory stops answering
//! revision reads at once and the watchers are woken. A connection can also die silently (a
//! network cut that sends no reset): a heartbeat query finds it within [`HEARTBEAT`] +
//! [`HEARTBEAT_WAIT`], the longest a silently lost notification can keep memory behind.
//!
//! With each heartbeat (and once subscribed) a probe goes out on a third channel and is timed
//! until it comes back: how late notifications arrive (`lag.rs`).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use deadpool_postgres::Pool;
use tokio::sync::mpsc;
use tokio_postgres::AsyncMessage;

use crate::lag::{self, NotifyLag};
use crate::revisions::{self, Revisions};
use crate::store::Connect;

/// How long a lost `LISTEN` connection waits before it connects again.
const RECONNECT_AFTER: Duration = Duration::from_secs(1);

/// How often the connection is asked whether it is still there.
pub(crate) const HEARTBEAT: Duration = Duration::from_secs(5);

/// How long the heartbeat's answer may take before the connection counts as lost.
pub(crate) const HEARTBEAT_WAIT: Duration = Duration::from_secs(5);

/// The channel the approvals trigger notifies (migration 5).
const APPROVALS: &str = "toolgate_approvals";

/// The `application_name` of each store's listening connection (what `pg_stat_activity`
/// shows, to tell it from the pool's).
pub const LISTEN_APPLICATION_NAME: &str = "toolgate-listen";

type Wake = Box<dyn Fn() + Send + Sync>;

/// What the listener keeps for the store: the revisions in memory and the approvals' watchers.
#[derive(Default)]
pub(crate) struct Heard {
    pub(crate) revisions: Revisions,
    /// How late notifications arrive, by this store's probes.
    pub(crate) lag: NotifyLag,
    watchers: Mutex<Vec<Wake>>,
}

impl std::fmt::Debug for Heard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Heard").field("revisions", &self.revisions).finish_non_exhaustive()
    }
}

impl Heard {
    /// Calls `wake` on every approval decided on any node, and after each (re)connection: at
    /// once if the connection is already subscribed (so whoever watches looks once it hears).
    pub(crate) fn watch_approvals(&self, wake: Wake) {
        let mut watchers = self.watchers.lock().unwrap_or_else(|e| e.into_inner());
        watchers.push(wake);
        // After the push: a subscription made in between wakes it with the others.
        if self.revisions.subscribed()
            && let Some(wake) = watchers.last()
        {
            wake();
        }
    }

    fn wake_watchers(&self) {
        for wake in self.watchers.lock().unwrap_or_else(|e| e.into_inner()).iter() {
            wake();
        }
    }

    /// Subscribed, and the revisions read since: memory is in step unless something moved
    /// its epoch since `epoch` (read before the connection was opened).
    fn subscribed(&self, epoch: u64, read: &HashMap<String, i64>) {
        self.revisions.set_subscribed(true);
        self.revisions.raise_all(read);
        self.revisions.primed(epoch);
        self.wake_watchers();
    }

    fn lost(&self) {
        self.lag.forget();
        self.revisions.set_subscribed(false);
        self.revisions.out_of_step();
        self.wake_watchers();
    }
}

/// What the connection's statements report to the loop that drives it.
enum Event {
    /// `LISTEN` is in place and the revisions were read after it.
    Subscribed(HashMap<String, i64>),
    /// A statement failed or the heartbeat went unanswered.
    Lost(String),
}

/// Sends a probe on [`lag::CHANNEL`] from a pooled connection (another server session than the
/// listening one); a failure only means no figure this time.
async fn probe(pool: &Pool, lag: &NotifyLag) {
    let sent = async {
        let client = pool.get().await.map_err(|e| e.to_string())?;
        // Timed from here: waiting for a pooled connection is not the notification's delay.
        let payload = lag.probe();
        client.execute("SELECT pg_notify($1, $2)", &[&lag::CHANNEL, &payload]).await.map_err(|e| e.to_string())
    };
    match tokio::time::timeout(HEARTBEAT_WAIT, sent).await {
        Ok(Ok(_)) => {}
        Ok(Err(e)) => tracing::debug!("PostgreSQL LISTEN: cannot send a lag probe: {e}"),
        Err(_) => tracing::debug!("PostgreSQL LISTEN: a lag probe was not sent within {HEARTBEAT_WAIT:?}"),
    }
}

/// Listens for as long as the store's thread runs; `pool` sends the lag probes.
pub(crate) async fn listen(connect: Arc<Connect>, pool: Pool, heard: Arc<Heard>) {
    let mut config = connect.config.clone();
    config.application_name(LISTEN_APPLICATION_NAME);
    loop {
        // Before connecting: a write of this node's that the priming below might miss moves
        // the epoch after this, so the priming does not count (`revisions.rs`).
        let epoch = heard.revisions.epoch();
        match config.connect(connect.tls.clone()).await {
            Ok((client, mut connection)) => {
                // The connection carries both the client's statements and the notifications:
                // it is driven here while the statements run in a task of their own.
                let (events, mut reported) = mpsc::unbounded_channel();
                let (pool, probed) = (pool.clone(), Arc::clone(&heard));
                let statements = tokio::spawn(async move {
                    let primed = async {
                        client
                            .batch_execute(&format!(
                                "LISTEN {APPROVALS}; LISTEN {}; LISTEN {}",
                                revisions::CHANNEL,
                                lag::CHANNEL
                            ))
                            .await?;
                        revisions::read_all(&client).await
                    };
                    match primed.await {
                        Ok(read) => {
                            let _ = events.send(Event::Subscribed(read));
                        }
                        Err(e) => {
                            let _ = events.send(Event::Lost(e.to_string()));
                            return;
                        }
                    }
                    loop {
                        probe(&pool, &probed.lag).await;
                        tokio::time::sleep(HEARTBEAT).await;
                        let lost = match tokio::time::timeout(HEARTBEAT_WAIT, client.simple_query("SELECT 1")).await {
                            Ok(Ok(_)) => continue,
                            Ok(Err(e)) => e.to_string(),
                            Err(_) => format!("no answer to a heartbeat within {HEARTBEAT_WAIT:?}"),
                        };
                        let _ = events.send(Event::Lost(lost));
                        return;
                    }
                });
                loop {
                    tokio::select! {
                        message = std::future::poll_fn(|cx| connection.poll_message(cx)) => match message {
                            Some(Ok(AsyncMessage::Notification(n))) => match n.channel() {
                                APPROVALS => heard.wake_watchers(),
                                revisions::CHANNEL => heard.revisions.notified(n.payload()),
                                lag::CHANNEL => heard.lag.heard(n.payload()),
                                _ => {}
                            },
                            Some(Ok(_)) => {}
                            Some(Err(e)) => {
                                tracing::warn!("PostgreSQL LISTEN: connection lost: {e}");
                                break;
                            }
                            None => break,
                        },
                        event = reported.recv() => match event {
                            Some(Event::Subscribed(read)) => heard.subscribed(epoch, &read),
                            Some(Event::Lost(why)) => {
                                tracing::warn!("PostgreSQL LISTEN: connection lost ({why}); connecting again");
                                break;
                            }
                            None => break,
                        },
                    }
                }
                statements.abort();
            }
            Err(e) => tracing::warn!("PostgreSQL LISTEN: cannot connect: {e}"),
        }
        heard.lost();
        tokio::time::sleep(RECONNECT_AFTER).await;
    }
}
