//! A routine's definition as stored (the JSON `spec` of [`toolgate_store::StoredRoutine`]) and
//! its checks: trigger, schedule and zone, event source, action, context paths.

use std::path::{Component, Path};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::schedule::{self, Schedule};

/// What fires a routine.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Trigger {
    /// A 5-field cron schedule in the routine's zone.
    Cron,
    /// An event of the gate (`event_channel` + `event_pattern`).
    Event,
    /// A signed POST to `/hooks/NAME`.
    Webhook,
    /// Only `routine_run` / `toolgate routine run`.
    Manual,
}

impl Trigger {
    /// Its name.
    pub fn as_str(self) -> &'static str {
        match self {
            Trigger::Cron => "cron",
            Trigger::Event => "event",
            Trigger::Webhook => "webhook",
            Trigger::Manual => "manual",
        }
    }
}

/// What a fire runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum ActionType {
    /// An agent job with tools (the default).
    #[default]
    FullJob,
    /// One model answer from the prompt and the context files, no tools.
    Lightweight,
    /// One tool call (`tool` + `params`): no model needed.
    Tool,
}

impl ActionType {
    /// Its name.
    pub fn as_str(self) -> &'static str {
        match self {
            ActionType::FullJob => "full_job",
            ActionType::Lightweight => "lightweight",
            ActionType::Tool => "tool",
        }
    }

    /// Whether it needs a configured model.
    pub fn needs_model(self) -> bool {
        self != ActionType::Tool
    }
}

/// What happens to cron fires missed while no scheduler ran.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum CatchUp {
    /// They are skipped (recorded as skipped); the next fire is the next one from now.
    #[default]
    Skip,
    /// The latest missed fire runs once, if it is not older than `catch_up_max_age_secs`.
    Once,
}

/// The event sources an `event` routine can listen to.
pub const EVENT_CHANNELS: [&str; 5] = ["tool", "approval", "job", "file", "message"];

/// A routine's definition.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RoutineSpec {
    /// What fires it.
    pub trigger: Trigger,
    /// The instruction (an agent's task, a lightweight question; for `tool`, a note).
    pub prompt: String,
    /// What it is for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// The cron expression (`cron` trigger).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schedule: Option<String>,
    /// The IANA zone the schedule is read in.
    pub timezone: String,
    /// The event source (`event` trigger).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub event_channel: Option<String>,
    /// The glob matched against the event's subject (`event` trigger).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub event_pattern: Option<String>,
    /// Workspace files attached to the prompt.
    #[serde(default)]
    pub context_paths: Vec<String>,
    /// What a fire runs.
    #[serde(default)]
    pub action_type: ActionType,
    /// The tool of a `tool` action.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool: Option<String>,
    /// Its parameters.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub params: Option<Value>,
    /// Minimum seconds between two fires.
    #[serde(default)]
    pub cooldown_secs: u64,
    /// Missed cron fires.
    #[serde(default)]
    pub catch_up: CatchUp,
    /// The oldest missed fire `catch_up = "once"` still runs, in seconds.
    #[serde(default = "default_max_age")]
    pub catch_up_max_age_secs: u64,
    /// The agent a `full_job` / `lightweight` run uses (default: the first configured).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<String>,
    /// The agent session the `cron` tool injects the prompt into, when it was made from one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session: Option<String>,
}

fn default_max_age() -> u64 {
    3600
}

/// Longest prompt a routine stores.
pub const MAX_PROMPT: usize = 16 * 1024;
/// Most context paths.
pub const MAX_CONTEXT_PATHS: usize = 16;

impl RoutineSpec {
    /// The parsed schedule of a cron routine.
    pub fn schedule(&self) -> Result<Option<Schedule>, schedule::ScheduleError> {
        match (&self.trigger, &self.schedule) {
            (Trigger::Cron, Some(s)) => Schedule::parse(s, &self.timezone).map(Some),
            _ => Ok(None),
        }
    }

    /// Checks everything that does not need the workspace or the store; an error is the
    /// message for the caller, with the JSON pointer of the parameter at fault.
    pub fn check(&self) -> Result<(), (&'static str, String)> {
        if self.prompt.trim().is_empty() && self.action_type != ActionType::Tool {
            return Err(("/prompt", "the prompt is empty; say what the routine should do".into()));
        }
        if self.prompt.len() > MAX_PROMPT {
            return Err(("/prompt", format!("the prompt is {} bytes; the limit is {MAX_PROMPT}", self.prompt.len())));
        }
        schedule::parse_zone(&self.timezone).map_err(|e| ("/timezone", e.to_string()))?;
        match self.trigger {
            Trigger::Cron => {
                let Some(expr) = &self.schedule else {
                    return Err((
                        "/schedule",
                        "a cron routine needs `schedule`, a 5-field cron expression such as `0 9 * * 1-5`".into(),
                    ));
                };
                Schedule::parse(expr, &self.timezone).map_err(|e| ("/schedule", e.to_string()))?;
            }
            Trigger::Event => {
                let channel = self.event_channel.as_deref().unwrap_or_default();
                if !EVENT_CHANNELS.contains(&channel) {
                    return Err((
                        "/event_channel",
                        format!(
                            "an event routine needs `event_channel`, one of {}; got `{channel}`",
                            EVENT_CHANNELS.join(", ")
                        ),
                    ));
                }
                let pattern = self.event_pattern.as_deref().unwrap_or_default();
                if pattern.is_empty() {
                    return Err((
                        "/event_pattern",
                        "an event routine needs `event_pattern`, a glob matched against the event's subject \
                         (a tool name such as `exec`, a path such as `src/**`, `*` for all)"
                            .into(),
                    ));
                }
                super::triggers::compile(pattern).map_err(|e| ("/event_pattern", e))?;
            }
            Trigger::Webhook | Trigger::Manual => {}
        }
        if self.trigger != Trigger::Cron && self.schedule.is_some() {
            return Err((
                "/schedule",
                format!("`schedule` is for cron routines; this one is `{}`", self.trigger.as_str()),
            ));
        }
        match self.action_type {
            ActionType::Tool => {
                if self.tool.as_deref().is_none_or(str::is_empty) {
                    return Err(("/tool", "a `tool` action needs `tool`, the name of the tool to call".into()));
                }
                if let Some(p) = &self.params
                    && !p.is_object()
                {
                    return Err(("/params", "`params` must be a JSON object of the tool's parameters".into()));
                }
            }
            _ if self.tool.is_some() => {
                return Err(("/tool", "`tool` is for `action_type = \"tool\"`".into()));
            }
            _ => {}
        }
        if self.context_paths.len() > MAX_CONTEXT_PATHS {
            return Err(("/context_paths", format!("at most {MAX_CONTEXT_PATHS} context paths")));
        }
        for (i, p) in self.context_paths.iter().enumerate() {
            lexically_inside(p).map_err(|why| ("/context_paths", format!("context path {i} `{p}` {why}")))?;
        }
        Ok(())
    }
}

/// A workspace-relative path that stays inside the workspace by its text alone (the real check,
/// through the file tools' confinement, follows at creation and at every fire).
pub fn lexically_inside(p: &str) -> Result<(), String> {
    if p.is_empty() {
        return Err("is empty".into());
    }
    if p.contains('\0') {
        return Err("contains a NUL byte".into());
    }
    let path = Path::new(p);
    let mut depth: i32 = 0;
    for c in path.components() {
        match c {
            Component::Prefix(_) | Component::RootDir => {
                return Err("is absolute; give a path relative to the workspace".into());
            }
            Component::ParentDir => {
                depth -= 1;
                if depth < 0 {
                    return Err("leaves the workspace (`..`); give a path inside it".into());
                }
            }
            Component::Normal(n) => {
                if depth == 0 && n == ".toolgate" {
                    return Err("is toolgate's own state folder, which no tool reads".into());
                }
                depth += 1;
            }
            Component::CurDir => {}
        }
    }
    if p.starts_with('~') {
        return Err("names a home folder; give a path relative to the workspace".into());
    }
    Ok(())
}

/// Paths a prompt names that lie outside the workspace: `../` that climbs out, `~/`, and
/// absolute paths not under `workspace`. A routine runs unattended, so its prompt is held to
/// the workspace up front (its tool calls are confined anyway).
pub fn prompt_escapes(prompt: &str, workspace: &Path) -> Option<String> {
    let ws = workspace.to_string_lossy();
    for raw in prompt.split(|c: char| c.is_whitespace() || matches!(c, '`' | '"' | '\'' | '(' | ')' | '<' | '>' | ','))
    {
        let token = raw.trim_end_matches(['.', ':', ';', '!', '?']);
        if token.is_empty() || token.contains("://") {
            continue;
        }
        if token.starts_with("~/") || token == "~" {
            return Some(token.to_owned());
        }
        if let Some(abs) = token.strip_prefix('/') {
            // Two or more segments: a path, not a lone `/` or `/hooks`-like word.
            if abs.contains('/') && !(token == ws || token.starts_with(&format!("{ws}/"))) {
                return Some(token.to_owned());
            }
            if token.starts_with(&format!("{ws}/")) && lexically_inside(&token[ws.len() + 1..]).is_err() {
                return Some(token.to_owned());
            }
            continue;
        }
        if token.contains("..") && token.contains('/') && lexically_inside(token).is_err() {
            return Some(token.to_owned());
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn context_paths_that_leave_the_workspace_are_refused_by_their_text() {
        for bad in ["../etc/passwd", "a/../../b", "/etc/passwd", ".toolgate/state.db", "~/.ssh/id_rsa", ""] {
            assert!(lexically_inside(bad).is_err(), "{bad}");
        }
        for good in ["notes.md", "docs/a.md", "a/../b.md", "./x"] {
            assert!(lexically_inside(good).is_ok(), "{good}");
        }
    }

    #[test]
    fn a_prompt_naming_paths_outside_the_workspace_is_caught() {
        let ws = Path::new("/work/ws");
        for bad in [
            "Summarize ../../etc/passwd please",
            "read `/etc/shadow` and send it",
            "cat ~/.ssh/id_rsa",
            "look at /work/ws/../other/secret.txt",
        ] {
            assert!(prompt_escapes(bad, ws).is_some(), "{bad}");
        }
        for good in [
            "Summarize docs/report.md and post to https://example.com/a/b",
            "check /work/ws/src/main.rs",
            "run the tests; fix and/or report",
            "compare a/../b.md",
        ] {
            assert_eq!(prompt_escapes(good, ws), None, "{good}");
        }
    }
}
