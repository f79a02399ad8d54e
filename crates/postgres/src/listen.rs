//! `LISTEN` for changes other nodes make: a connection of its own (outside the pool, which
//! recycles connections and would drop the subscription), on the store's thread, that calls the
//! subscriber's `wake` on every notification of its channel. Notifications are lossy (a
//! connection lost, a node restarted), so `wake` is also called after every (re)connection:
//! whoever waits looks at the database again, and a missed notification costs only the time to
//! its next look.

use std::sync::Arc;
use std::time::Duration;

use tokio_postgres::AsyncMessage;

use crate::store::Connect;

/// How long a lost `LISTEN` connection waits before it connects again.
const RECONNECT_AFTER: Duration = Duration::from_secs(1);

/// Listens on `channel` for as long as the store's thread runs, calling `wake` on each
/// notification and after each (re)connection.
pub(crate) async fn listen(connect: Arc<Connect>, channel: &'static str, wake: Box<dyn Fn() + Send + Sync>) {
    loop {
        match connect.config.connect(connect.tls.clone()).await {
            Ok((client, mut connection)) => {
                // The connection carries both the client's statements and the notifications:
                // it is driven here while `LISTEN` is sent.
                let (listening, subscribed) = tokio::sync::oneshot::channel();
                let statement = async move {
                    let result = client.batch_execute(&format!("LISTEN {channel}")).await;
                    let _ = listening.send(result.is_ok());
                    // Kept until the connection ends: dropping the client would close it.
                    std::future::pending::<()>().await;
                };
                let statement = tokio::spawn(statement);
                let (mut subscribed, mut waiting_for_listen) = (subscribed, true);
                loop {
                    tokio::select! {
                        message = std::future::poll_fn(|cx| connection.poll_message(cx)) => match message {
                            Some(Ok(AsyncMessage::Notification(n))) if n.channel() == channel => wake(),
                            Some(Ok(_)) => {}
                            Some(Err(e)) => {
                                tracing::warn!("PostgreSQL LISTEN {channel}: connection lost: {e}");
                                break;
                            }
                            None => break,
                        },
                        ok = &mut subscribed, if waiting_for_listen => {
                            waiting_for_listen = false;
                            if ok.unwrap_or(false) {
                                // Subscribed: what changed before now is read by looking again.
                                wake();
                            } else {
                                tracing::warn!("PostgreSQL LISTEN {channel} failed; trying again");
                                break;
                            }
                        }
                    }
                }
                statement.abort();
            }
            Err(e) => tracing::warn!("PostgreSQL LISTEN {channel}: cannot connect: {e}"),
        }
        wake();
        tokio::time::sleep(RECONNECT_AFTER).await;
    }
}
