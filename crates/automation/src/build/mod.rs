//! `build_software` (seed 004 §7): an agent builds a WASM tool, a CLI, a library or a script in
//! a project folder of the workspace (`builds/NAME/`), on the gate's agent runtime.
//!
//! - `templates`: each type and language's scaffold, build and test commands, and the
//!   instructions the model gets.
//! - `phases`: the loop (analyze → scaffold → implement → build → fix → test → validate →
//!   register) and its limits (10 model turns, 600 s, two text-only answers).
//! - `validate`: a WASM result checked against toolgate's own component world, then linked and
//!   tested in toolgate's WASM runtime.
//!
//! Everything runs as the caller: the agent's tool calls and the builder's build and test
//! commands go through the gate (`exec` is sandboxed and approved like any command), and a WASM
//! result is registered through `tool_install`, which always asks a person with its hash and
//! grants. The call itself always asks for approval (seed 004: "building software always
//! requires user confirmation").

use std::sync::Arc;

use serde_json::{Value, json};
use toolgate_core::{
    Annotations, ApprovalRequirement, CallContext, CallSafety, Tool, ToolError, ToolOutput, ToolSpec, Touches,
    async_trait,
};

use crate::Setup;

mod phases;
mod templates;
mod validate;

use templates::{Builders, Kind, Lang};

/// The tool's name.
const NAME: &str = "build_software";

/// The largest description accepted.
const MAX_DESCRIPTION: usize = 20_000;

/// The agent used when the call names none and one of this name is configured.
const DEFAULT_AGENT: &str = "builder";

/// This module's tools.
pub(crate) fn tools(setup: &Setup) -> Vec<Arc<dyn Tool>> {
    vec![Arc::new(BuildSoftware::new(setup.agents.clone()))]
}

/// The `build_software` tool.
struct BuildSoftware {
    spec: ToolSpec,
    agents: Option<Arc<toolgate_agent::Runtime>>,
}

impl BuildSoftware {
    fn new(agents: Option<Arc<toolgate_agent::Runtime>>) -> Self {
        let spec = ToolSpec::new(
            NAME,
            "Build software with an agent: a WASM tool for toolgate (Python, JavaScript or TypeScript; installed as wasm__NAME \
             after a person approves), a CLI or a library (Rust or Python, with tests), or a script (Python or \
             bash). The agent writes the code in builds/NAME/, the builder builds and tests it in the sandbox and \
             feeds errors back; at most 10 model turns and 600 s.",
            json!({
                "type": "object",
                "properties": {
                    "description": {"type": "string", "minLength": 1, "maxLength": MAX_DESCRIPTION,
                        "description": "What to build, in words: what it takes and what it returns."},
                    "type": {"type": "string", "enum": Kind::NAMES,
                        "description": "What kind of software (default: guessed from the description, else wasm_tool)."},
                    "language": {"type": "string", "enum": Lang::NAMES,
                        "description": "The language (default: python)."},
                    "name": {"type": "string", "pattern": "^[a-z][a-z0-9_-]{0,47}$",
                        "description": "The project's and tool's name (default: from the description)."},
                    "agent": {"type": "string", "maxLength": 64,
                        "description": "The configured agent that writes the code (default: `builder`, or the only agent)."},
                    "register": {"type": "boolean",
                        "description": "Install a built WASM tool (default true; installing asks a person)."}
                },
                "required": ["description"],
                "additionalProperties": false
            }),
        )
        .group("automation")
        .annotations(Annotations { read_only: false, destructive: false, idempotent: false, open_world: false });
        BuildSoftware { spec, agents }
    }
}

#[async_trait]
impl Tool for BuildSoftware {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    fn safety(&self, params: &Value) -> CallSafety {
        let what = params.get("description").and_then(Value::as_str).unwrap_or_default();
        let kind = params.get("type").and_then(Value::as_str).unwrap_or("(guessed)");
        let lang = params.get("language").and_then(Value::as_str).unwrap_or("python");
        CallSafety {
            approval: ApprovalRequirement::Always,
            approval_reason: Some(
                "an agent writes code in builds/ and runs its build and tests (each command through exec, sandboxed)"
                    .into(),
            ),
            approval_subject: Some(format!(
                "build a {kind} in {lang}: {}",
                what.chars().take(300).collect::<String>().escape_debug()
            )),
            touches: Touches { writes: vec!["builds/".to_owned()], ..Touches::default() },
            // The loop's own deadline (600 s) plus installing.
            timeout: Some(std::time::Duration::from_secs(660)),
            ..CallSafety::default()
        }
    }

    async fn execute(&self, ctx: &CallContext, params: Value) -> Result<ToolOutput, ToolError> {
        let rt = self.agents.clone().ok_or_else(no_model)?;
        if rt.config().agents.is_empty() {
            return Err(no_model());
        }
        let caller = rt.tool_caller().ok_or_else(|| ToolError::failed("toolgate is shutting down"))?;
        let description = str_param(&params, "description").unwrap_or_default().trim().to_owned();
        if description.is_empty() {
            return Err(ToolError::invalid(NAME, "/description", "say what to build"));
        }
        // Analyze: the type and language given, else from the description.
        let kind = match str_param(&params, "type") {
            Some(t) => Kind::parse(t)
                .ok_or_else(|| ToolError::invalid(NAME, "/type", format!("one of {}", Kind::NAMES.join(", "))))?,
            None => Kind::guess(&description),
        };
        let lang = match str_param(&params, "language") {
            Some(l) => Lang::parse(l)
                .ok_or_else(|| ToolError::invalid(NAME, "/language", format!("one of {}", Lang::NAMES.join(", "))))?,
            None => Lang::default_for(kind),
        };
        let name = match str_param(&params, "name") {
            Some(n) => n.to_owned(),
            None => name_from(&description),
        };
        let agent = pick_agent(&rt, str_param(&params, "agent"))?;
        let template = templates::template(kind, lang, &name, &description, &Builders::find())
            .map_err(|why| ToolError::invalid(NAME, "/language", why))?;
        let build = phases::Build {
            kind,
            lang,
            dir: phases::project_dir(&ctx.workspace, &name),
            name,
            description,
            template,
            agent,
            register: params.get("register").and_then(Value::as_bool).unwrap_or(true),
            limits: phases::Limits::default(),
        };
        phases::run(build, rt, caller, ctx).await
    }
}

fn str_param<'a>(params: &'a Value, key: &str) -> Option<&'a str> {
    params.get(key).and_then(Value::as_str)
}

fn no_model() -> ToolError {
    ToolError::failed(
        "build_software needs a model: add one to toolgate.toml, for example\n[providers.local]\nbase_url = \
         \"http://127.0.0.1:8080/v1\"\n\n[agents.builder]\ndescription = \"Writes and fixes code\"\nprovider = \
         \"local\"\nmodel = \"qwen2.5-coder\"\n(docs/automation.md, \"build_software\")",
    )
}

/// The agent asked for, else `builder`, else the only configured one.
fn pick_agent(rt: &toolgate_agent::Runtime, asked: Option<&str>) -> Result<String, ToolError> {
    let agents = &rt.config().agents;
    let known = || agents.keys().cloned().collect::<Vec<_>>().join(", ");
    match asked {
        Some(a) if agents.contains_key(a) => Ok(a.to_owned()),
        Some(a) => Err(ToolError::invalid(
            NAME,
            "/agent",
            format!("no agent {:?} is configured; the agents are: {}", a.chars().take(64).collect::<String>(), known()),
        )),
        None if agents.contains_key(DEFAULT_AGENT) => Ok(DEFAULT_AGENT.to_owned()),
        None if agents.len() == 1 => Ok(agents.keys().next().cloned().unwrap_or_default()),
        None => Err(ToolError::invalid(
            NAME,
            "/agent",
            format!(
                "say which agent builds (`agent`), or configure `[agents.{DEFAULT_AGENT}]`; the agents are: {}",
                known()
            ),
        )),
    }
}

/// A name from the description's first words: `[a-z][a-z0-9-]`, at most 32 characters.
fn name_from(description: &str) -> String {
    let words: Vec<String> = description
        .split(|c: char| !c.is_ascii_alphanumeric())
        .filter(|w| !w.is_empty())
        .take(4)
        .map(str::to_ascii_lowercase)
        .collect();
    let mut name: String = words.join("-").chars().take(32).collect();
    name = name.trim_end_matches('-').to_owned();
    if name.is_empty() {
        return "tool".to_owned();
    }
    if !name.starts_with(|c: char| c.is_ascii_lowercase()) {
        name.insert_str(0, "tool-");
    }
    name
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_come_from_the_description() {
        assert_eq!(name_from("Reverse the words of a sentence"), "reverse-the-words-of");
        assert_eq!(name_from("42 ways; to ../../etc"), "tool-42-ways-to-etc");
        assert_eq!(name_from("日本語"), "tool");
    }
}
