//! How late notifications arrive (`/metrics`' `toolgate_store_notify_lag_seconds`): the
//! `LISTEN` connection's task sends a probe, `NOTIFY` on [`CHANNEL`] from a pooled connection
//! (another server session, as another node's change would be), and times it until the probe
//! comes back on the `LISTEN` connection. A round trip on this node's own monotonic clock: no
//! comparison of two machines' clocks, which may be skewed. What it measures is what delays
//! every other notification to this node too: the server's notification queue, the listening
//! session's delivery, and this node's loop that reads them.
//!
//! Every node listens on the channel and hears every node's probes: each store's carry a token
//! of its own, and only the probe it is waiting for counts. Anyone who may `NOTIFY` could send
//! one with this token (it is in the payloads every listener sees); the worst it does is put
//! one wrong figure in this gauge until the next probe. A probe that does not come back by the
//! next one counts as its time so far, so notifications that stall show as a growing figure.

use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// The channel the probes go on.
pub(crate) const CHANNEL: &str = "toolgate_lag";

/// No figure yet (or the connection was lost since the last one).
const NONE: u64 = u64::MAX;

/// One store's probes and the latest figure.
#[derive(Debug)]
pub(crate) struct NotifyLag {
    /// This store's probes' prefix, `<token>:`, told from other stores' (other nodes').
    token: String,
    /// The probe awaited: its number and when it was sent.
    sent: Mutex<Option<(u64, Instant)>>,
    /// The next probe's number.
    next: AtomicU64,
    /// The latest probe's round trip, microseconds; [`NONE`] when there is none.
    last_micros: AtomicU64,
}

impl Default for NotifyLag {
    fn default() -> Self {
        static STORES: AtomicU64 = AtomicU64::new(0);
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
        let token =
            format!("{:x}-{:x}-{:x}", std::process::id(), now.as_nanos(), STORES.fetch_add(1, Ordering::Relaxed));
        NotifyLag { token, sent: Mutex::new(None), next: AtomicU64::new(0), last_micros: AtomicU64::new(NONE) }
    }
}

impl NotifyLag {
    fn sent(&self) -> std::sync::MutexGuard<'_, Option<(u64, Instant)>> {
        self.sent.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// A new probe's payload, timed from now. A probe still awaited is given up, and its time
    /// so far (a lower bound of its lag) becomes the figure: notifications that stall show as
    /// a growing lag, not as the last one that came back.
    pub(crate) fn probe(&self) -> String {
        let n = self.next.fetch_add(1, Ordering::Relaxed);
        let mut sent = self.sent();
        if let Some((_, at)) = *sent {
            self.record(at);
        }
        *sent = Some((n, Instant::now()));
        format!("{}:{n}", self.token)
    }

    fn record(&self, sent_at: Instant) {
        let micros = u64::try_from(sent_at.elapsed().as_micros()).unwrap_or(NONE - 1);
        self.last_micros.store(micros, Ordering::Relaxed);
    }

    /// A payload heard on [`CHANNEL`]: when it is the probe awaited, its round trip is the
    /// latest figure. Anything else (another node's probe, an old one, garbage) is ignored.
    pub(crate) fn heard(&self, payload: &str) {
        let Some(n) = payload.strip_prefix(&self.token).and_then(|rest| rest.strip_prefix(':')) else { return };
        let Ok(n) = n.parse::<u64>() else { return };
        let mut sent = self.sent();
        let Some((awaited, at)) = *sent else { return };
        if awaited != n {
            return;
        }
        *sent = None;
        self.record(at);
    }

    /// The connection was lost: no figure until a probe comes back on the next one.
    pub(crate) fn forget(&self) {
        *self.sent() = None;
        self.last_micros.store(NONE, Ordering::Relaxed);
    }

    /// The latest probe's round trip, if one came back since the connection was made.
    pub(crate) fn last(&self) -> Option<Duration> {
        match self.last_micros.load(Ordering::Relaxed) {
            NONE => None,
            micros => Some(Duration::from_micros(micros)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_awaited_probe_of_this_store_counts() {
        let (lag, other) = (NotifyLag::default(), NotifyLag::default());
        assert_eq!(lag.last(), None);
        let first = lag.probe();
        let foreign = other.probe();
        for ignored in [foreign.as_str(), "", ":", "garbage", &format!("{}:x", lag.token), &format!("{}:7", lag.token)]
        {
            lag.heard(ignored);
            assert_eq!(lag.last(), None, "{ignored:?} is not the probe awaited");
        }
        std::thread::sleep(Duration::from_millis(2));
        // The first never came back: the next probe gives it up with its time so far.
        let second = lag.probe();
        let given_up = lag.last().expect("a lost probe counts as its time so far");
        assert!(given_up >= Duration::from_millis(2), "{given_up:?}");
        lag.heard(&first);
        assert_eq!(lag.last(), Some(given_up), "a probe given up counts no more");
        lag.heard(&second);
        let measured = lag.last().expect("the awaited probe came back");
        lag.heard(&second);
        assert_eq!(lag.last(), Some(measured), "a replay changes nothing");
        lag.forget();
        assert_eq!(lag.last(), None, "no figure once the connection is lost");
    }
}
