//! What reaches a session between its model turns: announcements and queued messages.
//!
//! A finished asynchronous sub-agent or delegation is announced to the session that started
//! it (seed 000 §6, §7: GoClaw's announce queue, `delegate:{id}`), a team's lead is told when
//! its tasks complete, and `sessions_send` to a running session queues its message. A running
//! session takes everything waiting before its next model request, as one user message: items
//! that arrive close together are batched (the debounce). A session that is not running gets
//! them appended to its stored transcript, where `sessions_history` shows them and the next
//! turn of that conversation reads them; a session the runtime does not keep (an MCP client's)
//! keeps the last few in memory for `sessions_history`.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Messages a running session may have waiting (`sessions_send`); more are refused.
pub const MAX_QUEUED: usize = 32;
/// Bytes a running session may have waiting; an announcement past it goes to the session's
/// transcript at once (it is read by the turn after next), a message is refused.
const MAX_QUEUED_BYTES: usize = 4 << 20;
/// Announcements kept for a session the runtime does not store (an MCP client's), per session.
const KEPT_PER_SESSION: usize = 20;
/// Sessions whose announcements are kept in memory; the oldest session is forgotten first.
const KEPT_SESSIONS: usize = 256;
/// Bytes of kept announcements in all; the oldest session is forgotten first past it.
const KEPT_BYTES: usize = 16 << 20;

/// One item waiting for a session.
#[derive(Debug, Clone)]
pub(crate) struct Inbound {
    /// What the model reads (already scrubbed of secrets).
    pub text: String,
    /// A message sent with `sessions_send` (bounded), not an announcement.
    pub message: bool,
    /// When it arrived.
    pub at: Instant,
    /// When it arrived, on the wall clock (ms), for `sessions_history`.
    pub ts_ms: i64,
}

/// Where an item went.
#[derive(Debug)]
pub(crate) enum Delivery {
    /// Queued for the session's next model turn.
    Queued,
    /// The session is not running: the caller stores it.
    NotRunning(Inbound),
    /// The session already has [`MAX_QUEUED`] messages waiting.
    Full,
}

#[derive(Debug, Default)]
struct State {
    /// Sessions with a loop running now.
    live: HashSet<String>,
    queued: HashMap<String, Vec<Inbound>>,
    /// Announcements for sessions the runtime does not store, by (user, session), oldest
    /// session first.
    kept: VecDeque<((String, String), VecDeque<Inbound>)>,
    kept_bytes: usize,
}

/// The queues of every session.
#[derive(Debug, Default)]
pub(crate) struct Inbox {
    state: Mutex<State>,
}

impl Inbox {
    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Marks `session`'s loop as running: items for it are queued from now on.
    pub(crate) fn begin(&self, session: &str) {
        self.state().live.insert(session.to_owned());
    }

    /// Marks `session`'s loop as ended; returns what it did not take, for the transcript.
    /// Under the same lock as [`Inbox::push`], so nothing falls between the two.
    pub(crate) fn end(&self, session: &str) -> Vec<Inbound> {
        let mut s = self.state();
        s.live.remove(session);
        s.queued.remove(session).unwrap_or_default()
    }

    /// Queues `item` for a running `session`, or hands it back when the session is not running.
    pub(crate) fn push(&self, session: &str, item: Inbound) -> Delivery {
        let mut s = self.state();
        if !s.live.contains(session) {
            return Delivery::NotRunning(item);
        }
        let queue = s.queued.entry(session.to_owned()).or_default();
        let bytes: usize = queue.iter().map(|i| i.text.len()).sum::<usize>() + item.text.len();
        let messages = queue.iter().filter(|i| i.message).count();
        match (item.message, bytes > MAX_QUEUED_BYTES) {
            (true, over) if over || messages >= MAX_QUEUED => Delivery::Full,
            (false, true) => Delivery::NotRunning(item),
            _ => {
                queue.push(item);
                Delivery::Queued
            }
        }
    }

    /// Everything waiting for `session`, oldest first, and when the newest arrived.
    pub(crate) fn take(&self, session: &str) -> (Vec<Inbound>, Option<Instant>) {
        let items = self.state().queued.remove(session).unwrap_or_default();
        let newest = items.iter().map(|i| i.at).max();
        (items, newest)
    }

    /// Keeps an announcement for `user`'s session that the runtime does not store.
    pub(crate) fn keep(&self, user: &str, session: &str, item: Inbound) {
        let mut s = self.state();
        let key = (user.to_owned(), session.to_owned());
        s.kept_bytes += item.text.len();
        match s.kept.iter().position(|(k, _)| *k == key) {
            Some(pos) => {
                let items = &mut s.kept[pos].1;
                items.push_back(item);
                let dropped = if items.len() > KEPT_PER_SESSION { items.pop_front() } else { None };
                s.kept_bytes -= dropped.map_or(0, |d| d.text.len());
            }
            None => s.kept.push_back((key, VecDeque::from([item]))),
        }
        while s.kept.len() > KEPT_SESSIONS || (s.kept_bytes > KEPT_BYTES && s.kept.len() > 1) {
            let Some((_, items)) = s.kept.pop_front() else { break };
            s.kept_bytes -= items.iter().map(|i| i.text.len()).sum::<usize>();
        }
    }

    /// The announcements kept for `user`'s session, oldest first.
    pub(crate) fn kept(&self, user: &str, session: &str) -> Vec<Inbound> {
        let s = self.state();
        s.kept
            .iter()
            .find(|((u, id), _)| u == user && id == session)
            .map(|(_, items)| items.iter().cloned().collect())
            .unwrap_or_default()
    }
}

/// Waits until nothing new has arrived for `debounce` (at most four times it), so items that
/// arrive close together reach the model as one message.
pub(crate) async fn settle(inbox: &Inbox, session: &str, debounce: Duration) -> Vec<Inbound> {
    let (mut items, mut newest) = inbox.take(session);
    let deadline = Instant::now() + debounce * 4;
    while let Some(at) = newest {
        let quiet_at = at + debounce;
        let now = Instant::now();
        if quiet_at <= now || now >= deadline {
            break;
        }
        tokio::time::sleep(quiet_at.min(deadline) - now).await;
        let (more, n) = inbox.take(session);
        if more.is_empty() {
            break;
        }
        items.extend(more);
        newest = n;
    }
    items
}

/// The user message that carries `items` to the model.
pub(crate) fn as_message(items: &[Inbound]) -> String {
    items.iter().map(|i| i.text.as_str()).collect::<Vec<_>>().join("\n\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn item(text: &str, message: bool) -> Inbound {
        Inbound { text: text.to_owned(), message, at: Instant::now(), ts_ms: 0 }
    }

    #[test]
    fn a_session_that_is_not_running_gets_its_items_back_and_a_running_one_queues_them() {
        let inbox = Inbox::default();
        assert!(matches!(inbox.push("s", item("a", false)), Delivery::NotRunning(i) if i.text == "a"));
        inbox.begin("s");
        assert!(matches!(inbox.push("s", item("b", false)), Delivery::Queued));
        assert!(matches!(inbox.push("s", item("c", true)), Delivery::Queued));
        let (taken, newest) = inbox.take("s");
        assert_eq!(as_message(&taken), "b\n\nc");
        assert!(newest.is_some());
        assert!(matches!(inbox.push("s", item("d", false)), Delivery::Queued));
        let left = inbox.end("s");
        assert_eq!(left.len(), 1, "what the loop did not take goes back to the caller for the transcript");
        assert!(matches!(inbox.push("s", item("e", false)), Delivery::NotRunning(_)));
    }

    #[test]
    fn queued_messages_are_bounded_but_announcements_are_not() {
        let inbox = Inbox::default();
        inbox.begin("s");
        for i in 0..MAX_QUEUED {
            assert!(matches!(inbox.push("s", item(&i.to_string(), true)), Delivery::Queued));
        }
        assert!(matches!(inbox.push("s", item("one too many", true)), Delivery::Full));
        assert!(matches!(inbox.push("s", item("announcement", false)), Delivery::Queued));
    }

    #[test]
    fn kept_announcements_are_per_user_and_bounded_per_session_in_sessions_and_in_bytes() {
        let inbox = Inbox::default();
        for i in 0..KEPT_PER_SESSION + 5 {
            inbox.keep("ann", "mcp-a", item(&i.to_string(), false));
        }
        let kept = inbox.kept("ann", "mcp-a");
        assert_eq!(kept.len(), KEPT_PER_SESSION);
        assert_eq!(kept[0].text, "5", "the oldest go first");
        assert!(inbox.kept("bob", "mcp-a").is_empty(), "another user's caller of the same session id reads nothing");
        for i in 0..KEPT_SESSIONS {
            inbox.keep("ann", &format!("s{i}"), item("x", false));
        }
        assert!(inbox.kept("ann", "mcp-a").is_empty(), "the oldest session is forgotten first");
        assert_eq!(inbox.kept("ann", &format!("s{}", KEPT_SESSIONS - 1)).len(), 1);
        let big = "y".repeat(KEPT_BYTES / 4);
        for i in 0..8 {
            inbox.keep("ann", &format!("big{i}"), item(&big, false));
        }
        let s = inbox.state();
        assert!(s.kept_bytes <= KEPT_BYTES, "{}", s.kept_bytes);
        assert_eq!(s.kept_bytes, s.kept.iter().flat_map(|(_, i)| i).map(|i| i.text.len()).sum::<usize>());
    }

    #[test]
    fn a_running_sessions_queue_is_bounded_in_bytes() {
        let inbox = Inbox::default();
        inbox.begin("s");
        let big = "z".repeat(MAX_QUEUED_BYTES / 2 + 1);
        assert!(matches!(inbox.push("s", item(&big, false)), Delivery::Queued));
        assert!(matches!(inbox.push("s", item(&big, false)), Delivery::NotRunning(_)), "to the transcript instead");
        assert!(matches!(inbox.push("s", item(&big, true)), Delivery::Full), "a message is refused");
    }

    #[tokio::test]
    async fn items_that_arrive_close_together_are_taken_as_one_batch() {
        let inbox = std::sync::Arc::new(Inbox::default());
        inbox.begin("s");
        inbox.push("s", item("first", false));
        let late = inbox.clone();
        let pusher = tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(30)).await;
            late.push("s", item("second", false));
        });
        let batch = settle(&inbox, "s", Duration::from_millis(200)).await;
        pusher.await.unwrap();
        assert_eq!(as_message(&batch), "first\n\nsecond");
    }
}
