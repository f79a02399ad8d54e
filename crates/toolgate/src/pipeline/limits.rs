//! Stage 8: per-agent concurrency (at most `max_in_flight` running, `max_queued` waiting).

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use toolgate_core::ToolError;

/// One agent's slots.
#[derive(Debug)]
struct AgentSlots {
    running: Arc<Semaphore>,
    queued: AtomicUsize,
}

/// Concurrency slots for every agent.
#[derive(Debug)]
pub(crate) struct ConcurrencyLimits {
    max_in_flight: usize,
    max_queued: usize,
    agents: Mutex<HashMap<String, Arc<AgentSlots>>>,
}

impl ConcurrencyLimits {
    pub(crate) fn new(max_in_flight: usize, max_queued: usize) -> Self {
        ConcurrencyLimits { max_in_flight: max_in_flight.max(1), max_queued, agents: Mutex::new(HashMap::new()) }
    }

    fn slots(&self, agent: &str) -> Arc<AgentSlots> {
        let mut agents = self.agents.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(slots) = agents.get(agent) {
            return slots.clone();
        }
        let slots =
            Arc::new(AgentSlots { running: Arc::new(Semaphore::new(self.max_in_flight)), queued: AtomicUsize::new(0) });
        agents.insert(agent.to_owned(), slots.clone());
        slots
    }

    /// Waits for a running slot, or refuses at once when the queue is full. The slot is
    /// released when the permit drops.
    pub(crate) async fn acquire(&self, agent: &str) -> Result<OwnedSemaphorePermit, ToolError> {
        let slots = self.slots(agent);
        if let Ok(permit) = slots.running.clone().try_acquire_owned() {
            return Ok(permit);
        }
        let queued = slots.queued.fetch_add(1, Ordering::AcqRel);
        if queued >= self.max_queued {
            slots.queued.fetch_sub(1, Ordering::AcqRel);
            return Err(ToolError::TooManyConcurrentCalls {
                in_flight: self.max_in_flight - slots.running.available_permits(),
                queued,
                max_in_flight: self.max_in_flight,
                max_queued: self.max_queued,
            });
        }
        let _dequeue = Dequeue(&slots.queued);
        // The semaphore is never closed, so acquiring can only fail if it were.
        slots.running.clone().acquire_owned().await.map_err(|_| ToolError::Cancelled)
    }
}

/// Leaves the queue however the wait ends (acquired, or the caller gave up).
struct Dequeue<'a>(&'a AtomicUsize);

impl Drop for Dequeue<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn queue_then_refuse() {
        let limits = Arc::new(ConcurrencyLimits::new(2, 1));
        let a = limits.acquire("main").await.unwrap();
        let _b = limits.acquire("main").await.unwrap();
        let waiting = {
            let limits = limits.clone();
            tokio::spawn(async move { limits.acquire("main").await.map(drop) })
        };
        tokio::task::yield_now().await;
        while limits.slots("main").queued.load(Ordering::Acquire) == 0 {
            tokio::task::yield_now().await;
        }
        let refused = limits.acquire("main").await.unwrap_err();
        assert!(refused.to_string().contains("too many concurrent calls: 2 running and 1 queued"), "{refused}");
        assert!(limits.acquire("other-agent").await.is_ok(), "agents have their own slots");
        drop(a);
        waiting.await.unwrap().unwrap();
    }
}
