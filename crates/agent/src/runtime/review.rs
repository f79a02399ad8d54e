//! Judging a delegate's work: quality gates on finished delegations (seed 000 §11) and the
//! generator/evaluator loop of `evaluate_loop` (§9). Both ask a reviewer for `APPROVED` or
//! `REJECTED: feedback`, and both run their own delegations with gates skipped, so a gate can
//! never trigger itself.

use std::sync::Arc;

use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;
use toolgate_core::CallContext;

use super::{RunSpec, Runtime, SessionKind, clip_text};
use crate::AgentError;
use crate::config::{GateKind, QualityGate};
use crate::runner::{RunOutcome, RunStatus};

/// Most rounds `evaluate_loop` runs (seed: default 3, cap 5).
pub const MAX_ROUNDS: u32 = 5;

/// Longest result handed to a command gate in `$TOOLGATE_RESULT` (an environment variable is
/// capped by the kernel at 128 KiB).
const MAX_GATE_INPUT: usize = 100_000;

/// A reviewer's judgement.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// The work passes.
    Approved,
    /// The work must change; what to change.
    Rejected(String),
}

/// Reads a reviewer's answer: `APPROVED` (any case, after leading punctuation such as `**`)
/// passes; `REJECTED: feedback` gives the feedback; anything else is a rejection whose feedback
/// is the whole answer, so an off-format reviewer never approves by accident.
pub fn verdict(answer: &str) -> Verdict {
    let text = answer.trim_start_matches(|c: char| !c.is_alphanumeric());
    let head: String = text.chars().take(8).collect::<String>().to_ascii_uppercase();
    if head.starts_with("APPROVED") {
        return Verdict::Approved;
    }
    if head.starts_with("REJECTED") {
        let rest = text[8..].trim_start_matches(|c: char| c == '*' || c == ':' || c.is_whitespace()).trim();
        return Verdict::Rejected(if rest.is_empty() { "no reason given".to_owned() } else { clip_text(rest, 4000) });
    }
    Verdict::Rejected(clip_text(answer.trim(), 4000))
}

/// What a reviewer agent is asked.
fn review_prompt(task: &str, criteria: &str, work: &str) -> String {
    let criteria = if criteria.trim().is_empty() { "it does the task well and correctly" } else { criteria };
    format!(
        "Review the work below. Reply with APPROVED if it meets the criteria; otherwise reply \
         REJECTED: followed by what must change.\n\nTask:\n{task}\n\nCriteria:\n{criteria}\n\nWork:\n{work}"
    )
}

/// How a gate's check went.
enum Check {
    Pass,
    Fail(String),
    /// The check itself could not run (denied, the reviewer failed): retrying the delegate
    /// would not help.
    Broken(String),
}

impl Runtime {
    /// Runs the delegating agent's quality gates on a finished delegation: each gate in order;
    /// a failed blocking gate sends the delegate its feedback and checks again, up to
    /// `max_retries` times.
    pub(super) async fn apply_gates(
        self: &Arc<Self>,
        spec: &RunSpec,
        parent_ctx: &CallContext,
        mut outcome: RunOutcome,
        cancel: &CancellationToken,
    ) -> RunOutcome {
        let gates = match self.cfg.agents.get(&parent_ctx.identity.agent) {
            Some(a) if !a.quality_gates.is_empty() => a.quality_gates.clone(),
            _ => return outcome,
        };
        let mut notes = Vec::new();
        for gate in &gates {
            let mut retries = 0;
            loop {
                if outcome.status != RunStatus::Done || cancel.is_cancelled() {
                    return outcome;
                }
                match self.check(gate, spec, parent_ctx, &outcome, cancel).await {
                    Check::Pass => break,
                    Check::Fail(feedback) if gate.block_on_failure && retries < gate.max_retries => {
                        retries += 1;
                        let ask = format!(
                            "A quality check ({}) did not pass your answer:\n{feedback}\n\nRevise your answer to fix this.",
                            gate.label()
                        );
                        let record = match self.store.session(&outcome.session) {
                            Ok(Some(r)) => r,
                            _ => return outcome,
                        };
                        match self
                            .continue_session(
                                &record,
                                &ask,
                                cancel.clone(),
                                spec.events.clone(),
                                parent_ctx.grants.clone(),
                            )
                            .await
                        {
                            Ok(o) => outcome = o,
                            Err(e) => return failed(outcome, format!("the revision could not run: {e}")),
                        }
                    }
                    Check::Fail(feedback) | Check::Broken(feedback) if gate.block_on_failure => {
                        let tries = if retries == 0 { String::new() } else { format!(" after {retries} revision(s)") };
                        let why = format!("quality gate ({}) failed{tries}: {feedback}", gate.label());
                        // The caller (`start`) records the session's end.
                        return failed(outcome, why);
                    }
                    Check::Fail(feedback) | Check::Broken(feedback) => {
                        notes.push(format!("[quality gate ({}) did not pass: {feedback}]", gate.label()));
                        break;
                    }
                }
            }
        }
        if !notes.is_empty() {
            outcome.answer = format!("{}\n\n{}", outcome.answer, notes.join("\n"));
        }
        outcome
    }

    /// One gate's check of `outcome`.
    async fn check(
        self: &Arc<Self>,
        gate: &QualityGate,
        spec: &RunSpec,
        parent_ctx: &CallContext,
        outcome: &RunOutcome,
        cancel: &CancellationToken,
    ) -> Check {
        match gate.kind {
            GateKind::Command => {
                let Ok(caller) = self.caller() else { return Check::Broken("the gate is not connected".into()) };
                let mut ctx = parent_ctx.clone();
                ctx.call_id = String::new();
                ctx.cancel = cancel.child_token();
                let result: String = outcome.answer.chars().take(MAX_GATE_INPUT).collect();
                let task: String = spec.task.chars().take(MAX_GATE_INPUT).collect();
                let params = json!({
                    "command": gate.command.as_deref().unwrap_or_default(),
                    "env": {"TOOLGATE_RESULT": result, "TOOLGATE_TASK": task},
                });
                match caller.call(&ctx, "exec", params).await {
                    Ok(out) => {
                        let code = out.meta.as_ref().and_then(|s| s.get("exit_code")).and_then(Value::as_i64);
                        let text = out.text_content();
                        let output = text.split_once("output:\n").map_or("", |(_, o)| o).trim();
                        match code {
                            Some(0) => Check::Pass,
                            Some(c) => Check::Fail(format!("exit code {c}: {}", clip_text(output, 4000))),
                            None => Check::Fail(clip_text(text.trim(), 4000)),
                        }
                    }
                    Err(e) => Check::Broken(format!("the command could not run: {e}")),
                }
            }
            GateKind::Agent => {
                let reviewer = gate.agent.clone().unwrap_or_default();
                let mut review = RunSpec::new(reviewer, review_prompt(&spec.task, "", &outcome.answer));
                review.kind = SessionKind::Delegation;
                review.label = Some(format!("quality gate of {}", outcome.session));
                review.skip_gates = true;
                review.internal = true;
                review.events = spec.events.clone();
                let mut ctx = parent_ctx.clone();
                ctx.cancel = cancel.clone();
                // Boxed as a trait object: a reviewer's run is a task whose end runs gates too,
                // so the future's type would otherwise contain itself.
                let run: std::pin::Pin<Box<dyn std::future::Future<Output = _> + Send + '_>> =
                    Box::pin(self.run_child(review, &ctx));
                match run.await {
                    Ok(o) if o.status == RunStatus::Done => match verdict(&o.answer) {
                        Verdict::Approved => Check::Pass,
                        Verdict::Rejected(feedback) => Check::Fail(feedback),
                    },
                    Ok(o) => Check::Broken(format!("the reviewer did not answer: {}", o.for_model())),
                    Err(e) => Check::Broken(format!("the reviewer could not run: {e}")),
                }
            }
        }
    }

    /// `evaluate_loop`: the generator writes, the evaluator judges against `criteria`, and the
    /// generator revises with the feedback, until approved or `max_rounds` (capped at
    /// [`MAX_ROUNDS`]). Each round is two synchronous delegations over the caller's links, with
    /// quality gates skipped.
    pub async fn evaluate_loop(
        self: &Arc<Self>,
        ctx: &CallContext,
        generator: &str,
        evaluator: &str,
        task: &str,
        criteria: &str,
        max_rounds: u32,
    ) -> Result<Value, AgentError> {
        // Both links are checked before either agent runs, so a refused loop costs nothing.
        let (from, user) = (&ctx.identity.agent, &ctx.identity.user);
        for agent in [generator, evaluator] {
            if self.cfg.link(from, agent, user).is_none() {
                let targets = self.cfg.targets(from, user);
                return Err(AgentError::Invalid(format!(
                    "agent `{from}` has no delegation link to `{}`; evaluate_loop delegates to both agents ({})",
                    super::clip(agent),
                    if targets.is_empty() {
                        "you have no links".to_owned()
                    } else {
                        format!("you can delegate to: {}", targets.join(", "))
                    }
                )));
            }
        }
        let rounds = max_rounds.clamp(1, MAX_ROUNDS);
        let mut draft = String::new();
        let mut feedback = String::new();
        for round in 1..=rounds {
            let prompt = if round == 1 {
                format!("{task}\n\nYour work will be reviewed against these criteria:\n{criteria}")
            } else {
                format!(
                    "{task}\n\nYour work will be reviewed against these criteria:\n{criteria}\n\nYour previous \
                     version:\n{draft}\n\nThe reviewer rejected it:\n{feedback}\n\nWrite a revised version."
                )
            };
            let generated =
                self.round(ctx, generator, prompt, format!("evaluate_loop round {round}: generator")).await?;
            if generated.status != RunStatus::Done {
                return Err(AgentError::Invalid(format!(
                    "the generator `{generator}` did not finish round {round}: {}",
                    generated.for_model()
                )));
            }
            draft = generated.answer;
            let judged = self
                .round(
                    ctx,
                    evaluator,
                    review_prompt(task, criteria, &draft),
                    format!("evaluate_loop round {round}: evaluator"),
                )
                .await?;
            if judged.status != RunStatus::Done {
                return Err(AgentError::Invalid(format!(
                    "the evaluator `{evaluator}` did not finish round {round}: {}",
                    judged.for_model()
                )));
            }
            match verdict(&judged.answer) {
                Verdict::Approved => return Ok(json!({"approved": true, "rounds": round, "output": draft})),
                Verdict::Rejected(f) => feedback = f,
            }
        }
        Ok(json!({"approved": false, "rounds": rounds, "output": draft, "feedback": feedback}))
    }

    async fn round(
        self: &Arc<Self>,
        ctx: &CallContext,
        agent: &str,
        prompt: String,
        label: String,
    ) -> Result<RunOutcome, AgentError> {
        let mut spec = RunSpec::new(agent, prompt);
        spec.kind = SessionKind::Delegation;
        spec.label = Some(label);
        spec.skip_gates = true;
        self.run_child(spec, ctx).await
    }
}

/// `outcome` turned into a failure with `why`.
fn failed(mut outcome: RunOutcome, why: String) -> RunOutcome {
    outcome.status = RunStatus::Failed;
    outcome.error = Some(why);
    outcome
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verdicts() {
        assert_eq!(verdict("APPROVED"), Verdict::Approved);
        assert_eq!(verdict("  **Approved.** Nice work"), Verdict::Approved);
        assert_eq!(verdict("REJECTED: too long"), Verdict::Rejected("too long".into()));
        assert_eq!(verdict("rejected - missing pricing"), Verdict::Rejected("- missing pricing".into()));
        assert_eq!(verdict("REJECTED"), Verdict::Rejected("no reason given".into()));
        assert_eq!(verdict("I think it is fine"), Verdict::Rejected("I think it is fine".into()));
        assert_eq!(verdict("Not APPROVED"), Verdict::Rejected("Not APPROVED".into()), "only a prefix approves");
        assert_eq!(verdict("é"), Verdict::Rejected("é".into()));
    }
}
