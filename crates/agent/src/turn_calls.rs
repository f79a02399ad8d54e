//! One model turn's tool calls, started together and answered in order (seed 004 §9).
//!
//! When the caller orders turns ([`crate::ToolCaller::orders_turns`]: the gate), every call of the
//! turn is started at once with its [`TurnSlot`]: each goes through the gate's stages up to its
//! approval on its own, so the calls that need a person wait in the inbox together, and each is
//! decided on its own. The gate then holds a call until its slot is released, which happens
//! when the runtime has taken the answer of the call before it: the calls run in the model's
//! order, and a call that ends the run keeps the later ones from ever running. The futures are
//! polled only here (nothing is spawned), so dropping a [`TurnCalls`] drops the calls that did
//! not run. Other callers get the calls one by one, as before.

use std::future::{Future, poll_fn};
use std::pin::Pin;
use std::sync::Arc;
use std::task::Poll;

use tokio_util::sync::CancellationToken;
use toolgate_core::{ToolError, ToolOutput, TurnOrder};

use crate::model::ToolCall;
use crate::runner::Drive;

/// A call's answer and whether it reached the caller.
pub(crate) type Answer = (Result<ToolOutput, ToolError>, bool);

type Running<'t> = Pin<Box<dyn Future<Output = Answer> + Send + 't>>;

/// The calls of one turn.
pub(crate) struct TurnCalls<'t, 'a> {
    drive: &'t Drive<'a>,
    calls: &'t [ToolCall],
    batch: Option<&'t str>,
    /// One token per call, children of the run's: [`TurnCalls::end`] cancels the later ones.
    cancel: Vec<CancellationToken>,
    /// `Some` when the calls were started together.
    order: Option<Arc<TurnOrder>>,
    running: Vec<Option<Running<'t>>>,
    answered: Vec<Option<Answer>>,
}

impl<'t, 'a> TurnCalls<'t, 'a> {
    /// Starts `calls` (all of them when `drive`'s caller orders turns and there are several).
    pub(crate) fn new(
        drive: &'t Drive<'a>,
        calls: &'t [ToolCall],
        cancel: &CancellationToken,
        batch: Option<&'t str>,
    ) -> Self {
        let together = calls.len() > 1 && drive.caller.orders_turns();
        let mut turn = TurnCalls {
            drive,
            calls,
            batch,
            cancel: calls.iter().map(|_| cancel.child_token()).collect(),
            order: together.then(TurnOrder::new),
            running: calls.iter().map(|_| None).collect(),
            answered: calls.iter().map(|_| None).collect(),
        };
        if let Some(order) = turn.order.clone() {
            for i in 0..calls.len() {
                turn.start(i, Some(order.slot(i)));
            }
        }
        turn
    }

    fn start(&mut self, i: usize, slot: Option<toolgate_core::TurnSlot>) {
        let (drive, call, batch, cancel) = (self.drive, &self.calls[i], self.batch, self.cancel[i].clone());
        self.running[i] = Some(Box::pin(async move { drive.call_tool(call, &cancel, batch, slot).await }));
    }

    /// Call `i`'s answer (the calls before it answered already); then call `i + 1` may run.
    pub(crate) async fn answer(&mut self, i: usize) -> Answer {
        if self.running[i].is_none() && self.answered[i].is_none() {
            self.start(i, None);
        }
        let (running, answered) = (&mut self.running, &mut self.answered);
        let answer = poll_fn(|cx| {
            // Every started call moves on (to its approval, or its turn), not only call `i`.
            for (slot, answer) in running.iter_mut().zip(answered.iter_mut()) {
                if let Some(call) = slot
                    && let Poll::Ready(done) = call.as_mut().poll(cx)
                {
                    *answer = Some(done);
                    *slot = None;
                }
            }
            match answered[i].take() {
                Some(done) => Poll::Ready(done),
                None => Poll::Pending,
            }
        })
        .await;
        if let Some(order) = &self.order {
            order.release(i + 1);
        }
        answer
    }

    /// The run ends here: the calls not yet answered never run (their approvals, if asked,
    /// stay in the inbox until they expire).
    pub(crate) fn end(&mut self) {
        self.cancel.iter().for_each(CancellationToken::cancel);
        self.running.clear();
    }
}
