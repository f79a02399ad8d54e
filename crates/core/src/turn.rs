//! One model turn's calls in order, with their approvals asked together (seed 004 §9).
//!
//! The agent runtime starts every call of a turn at once; each goes through the gate's stages
//! up to its approval on its own, so the calls that need a person are in the inbox together and
//! are decided one by one. Then each waits for its [`TurnSlot`] before it runs: call `i` runs
//! only after the runtime has taken call `i - 1`'s answer, so the calls still run in the order
//! the model gave them and a call that ends the run (a handoff, a cancel) keeps the later ones
//! from running at all.

use std::fmt;
use std::sync::Arc;

use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::ToolError;

/// The order of one turn's calls: which of them may run now.
pub struct TurnOrder {
    /// The index of the call that may run; every call before it has been answered.
    next: watch::Sender<usize>,
}

impl TurnOrder {
    /// A turn whose first call may run.
    pub fn new() -> Arc<Self> {
        Arc::new(TurnOrder { next: watch::channel(0).0 })
    }

    /// The place of call `index` in this turn.
    pub fn slot(self: &Arc<Self>, index: usize) -> TurnSlot {
        TurnSlot { order: Arc::clone(self), index }
    }

    /// Lets call `index` run (the calls before it have been answered).
    pub fn release(&self, index: usize) {
        self.next.send_if_modified(|next| {
            let moved = index > *next;
            *next = (*next).max(index);
            moved
        });
    }
}

impl fmt::Debug for TurnOrder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TurnOrder").field("next", &*self.next.borrow()).finish()
    }
}

/// One call's place in its turn ([`crate::CallContext::turn`]).
#[derive(Clone, Debug)]
pub struct TurnSlot {
    order: Arc<TurnOrder>,
    index: usize,
}

impl TurnSlot {
    /// Its index in the turn.
    pub fn index(&self) -> usize {
        self.index
    }

    /// Waits until the calls before this one have been answered, or `cancel` fires (the run
    /// ended before this call's turn came: it never runs).
    pub async fn wait(&self, cancel: &CancellationToken) -> Result<(), ToolError> {
        let mut next = self.order.next.subscribe();
        tokio::select! {
            reached = next.wait_for(|next| *next >= self.index) => reached.map(drop).map_err(|_| ToolError::Cancelled),
            () = cancel.cancelled() => Err(ToolError::Cancelled),
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use std::time::Duration;

    use super::*;

    #[tokio::test]
    async fn a_call_waits_for_the_ones_before_it() {
        let order = TurnOrder::new();
        let never = CancellationToken::new();
        order.slot(0).wait(&never).await.unwrap();
        let second = order.slot(2);
        let waiting = tokio::spawn(async move { second.wait(&CancellationToken::new()).await });
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert!(!waiting.is_finished(), "call 2 may not run before call 1 is answered");
        order.release(1);
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert!(!waiting.is_finished());
        order.release(2);
        waiting.await.unwrap().unwrap();
        order.release(1);
        order.slot(1).wait(&never).await.unwrap();
    }

    #[tokio::test]
    async fn a_cancelled_call_never_gets_its_turn() {
        let order = TurnOrder::new();
        let cancel = CancellationToken::new();
        cancel.cancel();
        assert!(matches!(order.slot(1).wait(&cancel).await, Err(ToolError::Cancelled)));
    }
}
