//! Stage 5: a skill's `allowed-tools`, enforced (the Agent Skills field; some runtimes only display it).
//! A caller (user, agent, session) that reads a skill with `skill_read` has that skill active:
//! until it reads another skill, its calls are limited to the skill's `allowed-tools`, the
//! skill's own declared tools (group `skill:NAME`) and the skill tools themselves (so it can
//! switch or leave). A skill without `allowed-tools` limits nothing, and reading one ends the
//! limit of the previous skill.

use std::collections::HashMap;
use std::sync::Mutex;

use serde_json::Value;
use toolgate_core::{CallContext, ToolError, ToolOutput, ToolSpec, Touches};
use toolgate_policy::{ToolAllowance, ToolRef};

/// Callers remembered at most; past this the memory starts over (a limit is then lost, and the
/// model's calls fall back to policy alone).
const MAX_CALLERS: usize = 10_000;

/// (user, agent, session).
type Caller = (String, String, String);

/// The active skill of a caller.
#[derive(Debug)]
struct Active {
    skill: String,
    allowed: Vec<ToolAllowance>,
}

/// The stage.
#[derive(Debug, Default)]
pub(crate) struct SkillScope {
    active: Mutex<HashMap<Caller, Active>>,
}

fn caller(ctx: &CallContext) -> Caller {
    (ctx.identity.user.clone(), ctx.identity.agent.clone(), ctx.identity.session.clone())
}

impl SkillScope {
    /// After a successful `skill_read`: its skill becomes the caller's active one.
    pub(crate) fn after(&self, ctx: &CallContext, tool: &str, result: &Result<ToolOutput, ToolError>) {
        let Ok(out) = result else { return };
        if tool != "skill_read" {
            return;
        }
        let Some(s) = &out.meta else { return };
        let skill = s["name"].as_str().unwrap_or_default().to_owned();
        let entries: Vec<&str> =
            s["allowed_tools"].as_array().map(|a| a.iter().filter_map(Value::as_str).collect()).unwrap_or_default();
        let mut active = self.active.lock().unwrap_or_else(|e| e.into_inner());
        if entries.is_empty() {
            active.remove(&caller(ctx));
            return;
        }
        let allowed: Vec<ToolAllowance> = entries
            .iter()
            .filter_map(|e| {
                ToolAllowance::parse(e)
                    .map_err(|why| tracing::warn!(skill, entry = e, "allowed-tools entry ignored: {why}"))
                    .ok()
            })
            .collect();
        if active.len() >= MAX_CALLERS {
            active.clear();
        }
        active.insert(caller(ctx), Active { skill, allowed });
    }

    /// Refuses a call outside the caller's active skill's `allowed-tools`.
    pub(crate) fn check(&self, ctx: &CallContext, spec: &ToolSpec, touches: &Touches) -> Result<(), ToolError> {
        let active = self.active.lock().unwrap_or_else(|e| e.into_inner());
        // The usual case, on every call: no skill is being followed.
        if active.is_empty() {
            return Ok(());
        }
        let Some(a) = active.get(&caller(ctx)) else { return Ok(()) };
        let tool = ToolRef::new(&spec.name, &spec.group);
        if spec.group == "skills"
            || spec.group.strip_prefix("skill:") == Some(a.skill.as_str())
            || a.allowed.iter().any(|e| e.allows(tool, touches))
        {
            return Ok(());
        }
        let list: Vec<&str> = a.allowed.iter().map(ToolAllowance::as_str).collect();
        Err(ToolError::Denied {
            tool: spec.name.clone(),
            reason: format!(
                "the skill `{}` you are following allows only: {} (its allowed-tools). Do its task with those, \
                 or read another skill with skill_read to leave it",
                a.skill,
                if list.is_empty() { "its own tools".to_owned() } else { list.join(" ") }
            ),
        })
    }
}
