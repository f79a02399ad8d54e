//! Stages 2 and 6: may this caller see this tool, and what does policy say about this call?
//!
//! Visibility is checked before the parameters are even validated (a hidden tool reveals
//! nothing about its schema); argument rules (`exec(cargo test:*)`, `read(secrets/**)`) are
//! checked after, against the [`Touches`] the tool reports for the validated parameters.

use std::sync::{Arc, PoisonError, RwLock};

use toolgate_core::{ApprovalRequirement, CallContext, CallSafety, ToolError, ToolSpec, Touches};
use toolgate_policy::{Caller, Decision, Policy, PolicyConfig, PolicyError, ToolRef, Verdict, Visibility};

/// The compiled `[tools]` policy, replaced whole when the configuration is reloaded.
#[derive(Debug)]
pub(crate) struct PolicyStage {
    policy: RwLock<Arc<Policy>>,
    /// The revision of the policy in force: a digest of its configuration, so the same policy
    /// has the same revision across restarts and any change makes a new one (an approval is
    /// bound to the revision it was asked under).
    revision: RwLock<String>,
}

impl PolicyStage {
    pub(crate) fn new(config: PolicyConfig) -> Result<Self, PolicyError> {
        let revision = revision(&config);
        Ok(PolicyStage { policy: RwLock::new(Arc::new(Policy::new(config)?)), revision: RwLock::new(revision) })
    }

    /// The revision of the policy in force.
    pub(crate) fn revision(&self) -> String {
        self.revision.read().unwrap_or_else(PoisonError::into_inner).clone()
    }

    /// The policy in force.
    pub(crate) fn policy(&self) -> Arc<Policy> {
        Arc::clone(&self.policy.read().unwrap_or_else(PoisonError::into_inner))
    }

    /// Puts `policy` in force for the calls that reach this stage from now on.
    pub(crate) fn replace(&self, policy: Policy, config: &PolicyConfig) {
        *self.policy.write().unwrap_or_else(PoisonError::into_inner) = Arc::new(policy);
        *self.revision.write().unwrap_or_else(PoisonError::into_inner) = revision(config);
    }

    /// Whether `ctx`'s caller may see the tool, with the trace.
    pub(crate) fn visible(&self, spec: &ToolSpec, ctx: &CallContext) -> Visibility {
        let policy = self.policy();
        with_caller(ctx, |caller| policy.visible(ToolRef::from(spec), caller))
    }

    /// Refuses a call to a hidden tool.
    pub(crate) fn check_visible(&self, spec: &ToolSpec, ctx: &CallContext) -> Result<(), ToolError> {
        let visibility = self.visible(spec, ctx);
        if visibility.visible {
            return Ok(());
        }
        let rule = visibility.rule.unwrap_or_else(|| "the configured profile".to_owned());
        Err(ToolError::Denied { tool: spec.name.clone(), reason: format!("the tool is hidden by {rule}") })
    }

    /// What policy says about this call (argument rules, for this caller and its ancestors).
    pub(crate) fn decision(&self, spec: &ToolSpec, touches: &Touches, ctx: &CallContext) -> Decision {
        let policy = self.policy();
        with_caller(ctx, |caller| policy.decide(ToolRef::from(spec), touches, caller))
    }

    /// Checks argument rules; a deny stops the call.
    pub(crate) fn decide(&self, spec: &ToolSpec, touches: &Touches, ctx: &CallContext) -> Result<Decision, ToolError> {
        let decision = self.decision(spec, touches, ctx);
        if decision.verdict == Verdict::Deny {
            return Err(ToolError::Denied { tool: spec.name.clone(), reason: decision.reason });
        }
        Ok(decision)
    }
}

/// `p` and the first 16 hex digits of the SHA-256 of the policy's configuration as JSON.
fn revision(config: &PolicyConfig) -> String {
    use sha2::{Digest, Sha256};
    let text = serde_json::to_string(config).unwrap_or_default();
    let digest = Sha256::digest(text.as_bytes());
    format!("p{}", digest.iter().take(8).map(|b| format!("{b:02x}")).collect::<String>())
}

/// The approval requirement after policy: `ask` rules always ask; `allow` rules pre-approve,
/// except calls the tool itself says must always be asked (a dangerous command).
pub(crate) fn apply_verdict(verdict: Verdict, safety: &mut CallSafety, decision: &Decision) {
    match verdict {
        Verdict::Ask => {
            safety.approval = ApprovalRequirement::Always;
            safety.approval_reason = Some(decision.reason.clone().into());
        }
        Verdict::Allow if safety.approval != ApprovalRequirement::Always => {
            safety.approval = ApprovalRequirement::Never
        }
        Verdict::Allow | Verdict::ToolDefault | Verdict::Deny => {}
    }
}

/// Runs `f` with the policy's view of `ctx`'s caller: a plain agent, or the last of its chain
/// of ancestors (so a sub-agent's policy is intersected with each ancestor's).
fn with_caller<R>(ctx: &CallContext, f: impl FnOnce(&Caller<'_>) -> R) -> R {
    if ctx.ancestors.is_empty() {
        let mut caller = Caller::agent(&ctx.identity.agent)
            .with_depth(ctx.subagent_depth)
            .with_subagent_deny_exempt(&ctx.subagent_deny_exempt);
        if let Some(provider) = &ctx.provider {
            caller = caller.with_provider(provider);
        }
        return f(&caller);
    }
    let chain: Vec<&str> =
        ctx.ancestors.iter().map(String::as_str).chain(std::iter::once(ctx.identity.agent.as_str())).collect();
    Caller::with_chain(&chain, ctx.provider.as_deref(), |caller| {
        let deeper = caller
            .with_depth(caller.depth.max(ctx.subagent_depth))
            .with_subagent_deny_exempt(&ctx.subagent_deny_exempt);
        f(&deeper)
    })
}
