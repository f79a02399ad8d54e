//! Stage 2: may this caller see and use this tool?
//!
//! A simple profile + allow/deny model; the layered engine of `toolgate-policy` replaces it.

use toolgate_core::{CallContext, ToolError, ToolSpec};

use crate::config::ToolsConfig;

/// The policy stage's view of `[tools]`.
#[derive(Debug, Clone, Default)]
pub(crate) struct PolicyStage {
    config: ToolsConfig,
}

/// Groups each profile includes (seed 000 §5); `full` (the default) includes everything.
fn profile_groups(profile: &str) -> Option<&'static [&'static str]> {
    match profile {
        "full" => None,
        "coding" => Some(&["fs", "runtime", "sessions", "memory", "basic"]),
        "messaging" => Some(&["messaging"]),
        _ => Some(&[]), // `minimal`
    }
}

fn matches(entry: &str, spec: &ToolSpec) -> bool {
    match entry.strip_prefix("group:") {
        Some(group) => group == spec.group || group == "toolgate",
        None => entry == spec.name,
    }
}

impl PolicyStage {
    pub(crate) fn new(config: ToolsConfig) -> Self {
        PolicyStage { config }
    }

    /// Whether the tool is visible, and the trace of why.
    pub(crate) fn visible(&self, spec: &ToolSpec, _ctx: &CallContext) -> (bool, String) {
        let profile = self.config.profile.as_deref().unwrap_or("full");
        let mut visible = profile_groups(profile).is_none_or(|groups| groups.contains(&spec.group.as_str()));
        let mut trace = format!("profile {profile}: {}", if visible { "included" } else { "not included" });
        if visible && !self.config.allow.is_empty() {
            visible = self.config.allow.iter().any(|e| matches(e, spec));
            trace.push_str(if visible { "; allow list: listed" } else { "; allow list: not listed" });
        }
        if !visible && self.config.also_allow.iter().any(|e| matches(e, spec)) {
            visible = true;
            trace.push_str("; alsoAllow: added");
        }
        if let Some(entry) = self.config.deny.iter().find(|e| matches(e, spec)) {
            visible = false;
            trace.push_str(&format!("; deny `{entry}`"));
        }
        (visible, trace)
    }

    /// Refuses a call to a tool the caller may not use.
    pub(crate) fn check(&self, spec: &ToolSpec, ctx: &CallContext) -> Result<String, ToolError> {
        let (visible, trace) = self.visible(spec, ctx);
        if visible { Ok(trace) } else { Err(ToolError::Denied { tool: spec.name.clone(), reason: trace }) }
    }
}
