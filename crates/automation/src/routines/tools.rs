//! The routine tools (`routine_create|list|update|delete|history|run`, seed 004 §4.9) and
//! `cron` (seed 002 §5: `list`, `add`, `remove`), a thin tool over routines.

use std::borrow::Cow;
use std::sync::Arc;

use serde_json::{Map, Value, json};
use toolgate_core::{Annotations, CallContext, CallSafety, Tool, ToolError, ToolOutput, ToolSpec, async_trait};
use toolgate_store::StoredRoutine;

use super::schedule::{format_in, machine_zone};
use super::scheduler::{FireOutcome, RoutineError, Routines};
use super::spec::{ActionType, CatchUp, RoutineSpec, Trigger};

const GROUP: &str = "automation";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Create,
    List,
    Update,
    Delete,
    History,
    Run,
    Cron,
}

/// One routine tool.
struct RoutineTool {
    kind: Kind,
    spec: ToolSpec,
    routines: Arc<Routines>,
}

pub(super) fn tools(routines: &Arc<Routines>) -> Vec<Arc<dyn Tool>> {
    [Kind::Create, Kind::List, Kind::Update, Kind::Delete, Kind::History, Kind::Run, Kind::Cron]
        .into_iter()
        .map(|kind| Arc::new(RoutineTool { kind, spec: spec(kind), routines: Arc::clone(routines) }) as Arc<dyn Tool>)
        .collect()
}

fn definition_properties() -> Value {
    json!({
        "prompt": {"type": "string", "description": "What the routine does: the job's task (for `tool` actions, a note)"},
        "description": {"type": "string"},
        "schedule": {"type": "string", "description": "Cron expression for cron triggers: 5 fields, minute hour day-of-month month day-of-week (0 or 7 = Sunday), e.g. `0 9 * * 1-5`"},
        "timezone": {"type": "string", "description": "IANA time zone the schedule is read in, e.g. `America/New_York` (default: the machine's)"},
        "event_channel": {"type": "string", "enum": ["tool", "approval", "job", "file", "message"], "description": "Event source for event triggers"},
        "event_pattern": {"type": "string", "description": "Glob matched against the event's subject: a tool name (`exec`, `mcp__*`), a job title, a workspace path (`src/**`), `CHANNEL:sender`"},
        "context_paths": {"type": "array", "items": {"type": "string"}, "maxItems": 16, "description": "Workspace files attached to the prompt at every run"},
        "action_type": {"type": "string", "enum": ["full_job", "lightweight", "tool"], "description": "full_job (default): an agent job with tools; lightweight: one model answer, no tools; tool: one tool call (`tool` + `params`), no model needed"},
        "tool": {"type": "string", "description": "The tool a `tool` action calls"},
        "params": {"type": "object", "description": "Its parameters"},
        "cooldown_secs": {"type": "integer", "minimum": 0, "maximum": 31_536_000, "description": "Minimum seconds between two runs"},
        "catch_up": {"type": "string", "enum": ["skip", "once"], "description": "Cron fires missed while no server ran: skip them (default) or run the latest once"},
        "catch_up_max_age_secs": {"type": "integer", "minimum": 0, "description": "With catch_up = once: the oldest missed fire still run (default 3600)"},
        "agent": {"type": "string", "description": "The configured agent that runs full_job / lightweight routines (default: the first)"},
        "enabled": {"type": "boolean"}
    })
}

fn spec(kind: Kind) -> ToolSpec {
    let name_only = |desc: &str| {
        json!({
            "type": "object",
            "properties": {"name": {"type": "string", "description": desc}},
            "required": ["name"],
            "additionalProperties": false
        })
    };
    let (name, description, schema, annotations) = match kind {
        Kind::Create => {
            let mut props = definition_properties();
            props["name"] = json!({"type": "string", "description": "Unique name: letters, digits, `-`, `_` (a webhook's URL is /hooks/NAME)"});
            props["trigger_type"] = json!({"type": "string", "enum": ["cron", "event", "webhook", "manual"]});
            props["webhook_secret"] = json!({"type": "string", "description": "For webhook triggers: the HMAC secret (at least 16 characters); omitted, one is generated and shown once"});
            (
                "routine_create",
                "Create a routine: a prompt or a tool call run as a background job on a trigger — a cron schedule \
                 in a time zone, an event of the gate, a signed webhook at /hooks/NAME, or by hand (routine_run).",
                json!({"type": "object", "properties": props, "required": ["name", "trigger_type", "prompt"], "additionalProperties": false}),
                Annotations::LOCAL_WRITE,
            )
        }
        Kind::List => (
            "routine_list",
            "List your routines: trigger, schedule and time zone, next and last fire, enabled.",
            json!({"type": "object", "properties": {}, "additionalProperties": false}),
            Annotations::READ_ONLY,
        ),
        Kind::Update => {
            let mut props = definition_properties();
            props["name"] = json!({"type": "string"});
            (
                "routine_update",
                "Change a routine: any of enabled, prompt, schedule, timezone, description, context_paths, cooldown_secs, \
                 catch_up, action_type, tool, params, event_channel, event_pattern.",
                json!({"type": "object", "properties": props, "required": ["name"], "additionalProperties": false}),
                Annotations::LOCAL_WRITE,
            )
        }
        Kind::Delete => (
            "routine_delete",
            "Delete a routine permanently (its run history stays).",
            name_only("The routine"),
            Annotations::LOCAL_DESTRUCTIVE,
        ),
        Kind::History => (
            "routine_history",
            "A routine's past runs, newest first: when, what triggered it, its job and the job's state, or why it was skipped.",
            json!({
                "type": "object",
                "properties": {"name": {"type": "string"}, "limit": {"type": "integer", "minimum": 1, "maximum": 200}},
                "required": ["name"],
                "additionalProperties": false
            }),
            Annotations::READ_ONLY,
        ),
        Kind::Run => (
            "routine_run",
            "Run a routine now (its manual trigger); returns the job id.",
            name_only("The routine"),
            Annotations::LOCAL_WRITE,
        ),
        Kind::Cron => (
            "cron",
            "Schedule recurring tasks. `add` (schedule + prompt) creates a cron routine: with an agent session \
             behind the caller its prompt is injected into that session at each fire, otherwise it runs as a \
             background job (or, with `tool` + `params`, as one tool call). `list` shows them, `remove` (id) deletes one.",
            json!({
                "type": "object",
                "properties": {
                    "action": {"type": "string", "enum": ["list", "add", "remove"]},
                    "schedule": {"type": "string", "description": "Cron expression (5 fields) for add"},
                    "prompt": {"type": "string", "description": "Message to inject / task to run, for add"},
                    "id": {"type": "string", "description": "The entry to remove"},
                    "timezone": {"type": "string", "description": "IANA time zone (default: the machine's)"},
                    "tool": {"type": "string", "description": "Instead of a model: a tool to call at each fire"},
                    "params": {"type": "object"}
                },
                "required": ["action"],
                "additionalProperties": false
            }),
            Annotations::LOCAL_WRITE,
        ),
    };
    ToolSpec::new(name, description, schema).group(GROUP).annotations(annotations).trusted_output()
}

fn err(tool: &str, e: RoutineError) -> ToolError {
    match e {
        RoutineError::Invalid { pointer, message } => ToolError::invalid(tool, pointer, message),
        other => ToolError::failed(other.to_string()),
    }
}

fn str_param<'a>(p: &'a Value, key: &str) -> Option<&'a str> {
    p.get(key).and_then(Value::as_str)
}

fn name_param<'a>(tool: &str, p: &'a Value) -> Result<&'a str, ToolError> {
    str_param(p, "name").ok_or_else(|| ToolError::invalid(tool, "/name", "`name` is required"))
}

/// A definition from `routine_create`'s parameters.
fn spec_from(tool: &str, p: &Value) -> Result<RoutineSpec, ToolError> {
    let trigger: Trigger = serde_json::from_value(p["trigger_type"].clone()).map_err(|_| {
        ToolError::invalid(tool, "/trigger_type", "`trigger_type` is one of cron, event, webhook, manual")
    })?;
    let mut spec = RoutineSpec {
        trigger,
        prompt: String::new(),
        description: None,
        schedule: None,
        timezone: machine_zone(),
        event_channel: None,
        event_pattern: None,
        context_paths: Vec::new(),
        action_type: ActionType::FullJob,
        tool: None,
        params: None,
        cooldown_secs: 0,
        catch_up: CatchUp::Skip,
        catch_up_max_age_secs: 3600,
        agent: None,
        session: None,
    };
    apply(tool, &mut spec, p)?;
    Ok(spec)
}

/// Applies the definition parameters present in `p` to `spec`.
fn apply(tool: &str, spec: &mut RoutineSpec, p: &Value) -> Result<(), ToolError> {
    let Some(obj) = p.as_object() else { return Ok(()) };
    for (key, v) in obj {
        let text = || v.as_str().map(str::to_owned);
        match key.as_str() {
            "prompt" => spec.prompt = text().unwrap_or_default(),
            "description" => spec.description = text(),
            "schedule" => spec.schedule = text(),
            "timezone" => spec.timezone = text().unwrap_or_else(machine_zone),
            "event_channel" => spec.event_channel = text(),
            "event_pattern" => spec.event_pattern = text(),
            "context_paths" => {
                spec.context_paths =
                    v.as_array().into_iter().flatten().filter_map(Value::as_str).map(str::to_owned).collect();
            }
            "action_type" => {
                spec.action_type = serde_json::from_value(v.clone()).map_err(|_| {
                    ToolError::invalid(tool, "/action_type", "`action_type` is one of full_job, lightweight, tool")
                })?;
            }
            "tool" => spec.tool = text(),
            "params" => spec.params = Some(v.clone()),
            "cooldown_secs" => spec.cooldown_secs = v.as_u64().unwrap_or(0),
            "catch_up" => {
                spec.catch_up = serde_json::from_value(v.clone())
                    .map_err(|_| ToolError::invalid(tool, "/catch_up", "`catch_up` is `skip` or `once`"))?;
            }
            "catch_up_max_age_secs" => spec.catch_up_max_age_secs = v.as_u64().unwrap_or(3600),
            "agent" => spec.agent = text(),
            _ => {}
        }
    }
    Ok(())
}

/// One routine as the tools show it: times in its zone, the zone named.
fn describe(r: &StoredRoutine, spec: &RoutineSpec, http: bool) -> Value {
    let mut v = json!({
        "name": r.name,
        "trigger_type": spec.trigger.as_str(),
        "enabled": r.enabled,
        "timezone": spec.timezone,
        "action_type": spec.action_type.as_str(),
        "prompt": spec.prompt,
        "next_fire": r.next_fire_ms.map(|t| format_in(t, &spec.timezone)),
        "last_fire": r.last_fire_ms.map(|t| format_in(t, &spec.timezone)),
    });
    let o = v.as_object_mut().map(|o| o as &mut Map<String, Value>);
    if let Some(o) = o {
        if let Some(s) = &spec.schedule {
            o.insert("schedule".into(), json!(s));
        }
        if let Some(d) = &spec.description {
            o.insert("description".into(), json!(d));
        }
        if spec.trigger == Trigger::Event {
            o.insert("event_channel".into(), json!(spec.event_channel));
            o.insert("event_pattern".into(), json!(spec.event_pattern));
        }
        if spec.trigger == Trigger::Webhook {
            o.insert("webhook".into(), json!(format!("/hooks/{}", r.name)));
            if !http {
                o.insert(
                    "webhook_note".into(),
                    json!("no HTTP server in this process receives webhooks: run `toolgate serve --http ADDR`"),
                );
            }
        }
        if let Some(t) = &spec.tool {
            o.insert("tool".into(), json!(t));
            o.insert("params".into(), spec.params.clone().unwrap_or(json!({})));
        }
        if !spec.context_paths.is_empty() {
            o.insert("context_paths".into(), json!(spec.context_paths));
        }
        if spec.cooldown_secs > 0 {
            o.insert("cooldown_secs".into(), json!(spec.cooldown_secs));
        }
        if spec.trigger == Trigger::Cron {
            o.insert("catch_up".into(), json!(spec.catch_up));
        }
        if spec.session.is_some() {
            o.insert("injects_into_session".into(), json!(spec.session));
        }
    }
    v
}

fn outcome_json(o: &FireOutcome) -> Value {
    match o {
        FireOutcome::Started { job_id, .. } => json!({"status": "started", "job_id": job_id}),
        FireOutcome::Skipped(why) => json!({"status": "skipped", "reason": why}),
        FireOutcome::AlreadyFired => json!({"status": "already fired"}),
        FireOutcome::Failed(why) => json!({"status": "failed", "error": why}),
    }
}

impl RoutineTool {
    fn name(&self) -> &str {
        &self.spec.name
    }

    async fn create(&self, ctx: &CallContext, p: &Value) -> Result<ToolOutput, ToolError> {
        let tool = self.name();
        let name = name_param(tool, p)?;
        let spec = spec_from(tool, p)?;
        let enabled = p.get("enabled").and_then(Value::as_bool).unwrap_or(true);
        let secret = str_param(p, "webhook_secret").map(str::to_owned);
        let (r, shown) = self.routines.create(ctx, name, spec.clone(), enabled, secret).map_err(|e| err(tool, e))?;
        let mut out = json!({"created": describe(&r, &spec, self.routines.http())});
        let mut text = format!("Created routine `{name}` ({}, {}).", spec.trigger.as_str(), spec.action_type.as_str());
        if let Some(next) = r.next_fire_ms {
            text.push_str(&format!(" Next fire: {} ({}).", format_in(next, &spec.timezone), spec.timezone));
        }
        if spec.trigger == Trigger::Event && spec.event_channel.as_deref() == Some("message") {
            text.push_str(
                " It fires on messages that channels with `receive = true` take at POST /hooks/messages/CHANNEL \
                 of `toolgate serve --http` (docs/automation.md, \"Inbound messages\"); the subject is `CHANNEL:sender`.",
            );
        }
        if spec.trigger == Trigger::Webhook {
            text.push_str(&format!(
                " Webhook: POST /hooks/{name} with `X-Toolgate-Timestamp: UNIX_SECONDS` and \
                 `X-Toolgate-Signature: sha256=HEX(HMAC-SHA256(secret, TIMESTAMP + \".\" + BODY))`."
            ));
            if let Some(s) = shown {
                text.push_str(&format!(" Its secret (shown once, kept encrypted in the secrets store): {s}"));
                out["webhook_secret"] = json!(s);
            }
            if !self.routines.http() {
                text.push_str(" No HTTP server in this process receives webhooks: run `toolgate serve --http ADDR`.");
            }
        }
        Ok(ToolOutput::text(format!("{text}\n{}", serde_json::to_string_pretty(&out["created"]).unwrap_or_default()))
            .with_structured(out))
    }

    fn list(&self, ctx: &CallContext) -> Result<ToolOutput, ToolError> {
        let list = self.routines.list(&ctx.identity.user).map_err(|e| err(self.name(), e))?;
        let http = self.routines.http();
        let items: Vec<Value> = list.iter().map(|(r, s)| describe(r, s, http)).collect();
        let mut out = json!({"routines": items, "machine_timezone": machine_zone()});
        if list.iter().any(|(_, s)| s.trigger == Trigger::Webhook) && !http {
            out["note"] = json!("no HTTP server in this process receives webhooks: run `toolgate serve --http ADDR`");
        }
        let text = if items.is_empty() {
            "No routines. Create one with routine_create (or cron add).".to_owned()
        } else {
            serde_json::to_string_pretty(&out).unwrap_or_default()
        };
        Ok(ToolOutput::text(text).with_structured(out))
    }

    fn update(&self, ctx: &CallContext, p: &Value) -> Result<ToolOutput, ToolError> {
        let tool = self.name();
        let name = name_param(tool, p)?;
        let (r, mut spec) = self.routines.get(&ctx.identity.user, name).map_err(|e| err(tool, e))?;
        apply(tool, &mut spec, p)?;
        let enabled = p.get("enabled").and_then(Value::as_bool).unwrap_or(r.enabled);
        let r = self.routines.update(ctx, name, spec.clone(), enabled).map_err(|e| err(tool, e))?;
        let out = json!({"updated": describe(&r, &spec, self.routines.http())});
        Ok(ToolOutput::text(format!(
            "Updated routine `{name}`.\n{}",
            serde_json::to_string_pretty(&out["updated"]).unwrap_or_default()
        ))
        .with_structured(out))
    }

    fn delete(&self, ctx: &CallContext, p: &Value) -> Result<ToolOutput, ToolError> {
        let tool = self.name();
        let name = name_param(tool, p)?;
        self.routines.delete(&ctx.identity.user, name).map_err(|e| err(tool, e))?;
        Ok(ToolOutput::text(format!("Deleted routine `{name}`.")).with_structured(json!({"deleted": name})))
    }

    fn history(&self, ctx: &CallContext, p: &Value) -> Result<ToolOutput, ToolError> {
        let tool = self.name();
        let name = name_param(tool, p)?;
        let limit = p.get("limit").and_then(Value::as_u64).unwrap_or(20).clamp(1, 200) as usize;
        let (_, spec) = self.routines.get(&ctx.identity.user, name).map_err(|e| err(tool, e))?;
        let runs = self.routines.history(&ctx.identity.user, name, limit).map_err(|e| err(tool, e))?;
        let items: Vec<Value> = runs
            .iter()
            .map(|(f, job)| {
                json!({
                    "scheduled": format_in(f.scheduled_ms, &spec.timezone),
                    "scheduled_ms": f.scheduled_ms,
                    "fired": format_in(f.fired_ms, &spec.timezone),
                    "trigger": f.trigger,
                    "status": f.status,
                    "job_id": f.job_id,
                    "job": job,
                    "detail": f.detail,
                })
            })
            .collect();
        let out = json!({"name": name, "timezone": spec.timezone, "runs": items});
        let text = if items.is_empty() {
            format!("Routine `{name}` has not run yet.")
        } else {
            serde_json::to_string_pretty(&out).unwrap_or_default()
        };
        Ok(ToolOutput::text(text).with_structured(out))
    }

    async fn run(&self, ctx: &CallContext, p: &Value) -> Result<ToolOutput, ToolError> {
        let tool = self.name();
        let name = name_param(tool, p)?;
        let outcome = self.routines.run_now(&ctx.identity.user, name).await.map_err(|e| err(tool, e))?;
        let out = outcome_json(&outcome);
        let text = match &outcome {
            FireOutcome::Started { job_id, .. } => format!("Routine `{name}` started as job {job_id}."),
            FireOutcome::Skipped(why) => format!("Routine `{name}` did not run: {why}."),
            FireOutcome::AlreadyFired => format!("Routine `{name}` was just fired; try again."),
            FireOutcome::Failed(why) => {
                return Err(ToolError::failed(format!("routine `{name}` could not start: {why}")));
            }
        };
        Ok(ToolOutput::text(text).with_structured(out))
    }

    async fn cron(&self, ctx: &CallContext, p: &Value) -> Result<ToolOutput, ToolError> {
        let tool = self.name();
        match str_param(p, "action").unwrap_or_default() {
            "list" => {
                let list = self.routines.list(&ctx.identity.user).map_err(|e| err(tool, e))?;
                let items: Vec<Value> = list
                    .iter()
                    .filter(|(_, s)| s.trigger == Trigger::Cron)
                    .map(|(r, s)| {
                        json!({
                            "id": r.name,
                            "schedule": s.schedule,
                            "timezone": s.timezone,
                            "prompt": s.prompt,
                            "runs_as": if s.session.is_some() { "session_turn" } else { s.action_type.as_str() },
                            "injects_into_session": s.session,
                            "next_fire": r.next_fire_ms.map(|t| format_in(t, &s.timezone)),
                            "enabled": r.enabled,
                        })
                    })
                    .collect();
                let out = json!({"jobs": items});
                let text = if items.is_empty() {
                    "No cron entries.".to_owned()
                } else {
                    serde_json::to_string_pretty(&out).unwrap_or_default()
                };
                Ok(ToolOutput::text(text).with_structured(out))
            }
            "add" => {
                let schedule = str_param(p, "schedule").ok_or_else(|| {
                    ToolError::invalid(tool, "/schedule", "`add` needs `schedule`, e.g. `0 9 * * 1-5`")
                })?;
                let prompt = str_param(p, "prompt").unwrap_or_default();
                let use_tool = str_param(p, "tool").map(str::to_owned);
                let model = self.routines.setup().model_configured;
                // An agent session of toolgate's runtime is behind the call when the runtime
                // stores it for this user; a plain MCP client's session is not one.
                let in_session = self.routines.setup().runner.agent_session(&ctx.identity.user, &ctx.identity.session);
                let (action, session, how) = match (&use_tool, model) {
                    (Some(_), _) => (ActionType::Tool, None, "a `tool` routine: one tool call per fire, no model"),
                    (None, true) if in_session => (
                        ActionType::FullJob,
                        Some(ctx.identity.session.clone()),
                        "at each fire its prompt is appended to this agent session as a user message and the \
                         session runs one turn",
                    ),
                    (None, true) => (
                        ActionType::FullJob,
                        None,
                        "no agent session of toolgate's agent runtime is behind this call (a plain MCP client), \
                         so each fire runs the prompt as a new background agent job (`full_job`)",
                    ),
                    (None, false) => {
                        return Err(ToolError::invalid(
                            tool,
                            "/prompt",
                            "no model is configured, so a prompt has no one to run it: add `[providers.NAME]` and \
                             `[agents.NAME]` to toolgate.toml (docs/agents.md), or give `tool` and `params` to call a \
                             tool at each fire",
                        ));
                    }
                };
                let id = format!("cron-{}", &uuid::Uuid::new_v4().simple().to_string()[..8]);
                let spec = RoutineSpec {
                    trigger: Trigger::Cron,
                    prompt: prompt.to_owned(),
                    description: Some("added with the cron tool".into()),
                    schedule: Some(schedule.to_owned()),
                    timezone: str_param(p, "timezone").map_or_else(machine_zone, str::to_owned),
                    event_channel: None,
                    event_pattern: None,
                    context_paths: Vec::new(),
                    action_type: action,
                    tool: use_tool,
                    params: p.get("params").cloned(),
                    cooldown_secs: 0,
                    catch_up: CatchUp::Skip,
                    catch_up_max_age_secs: 3600,
                    agent: None,
                    session,
                };
                let (r, _) = self.routines.create(ctx, &id, spec.clone(), true, None).map_err(|e| err(tool, e))?;
                let next = r.next_fire_ms.map(|t| format_in(t, &spec.timezone));
                let out = json!({
                    "id": id,
                    "runs_as": if spec.session.is_some() { "session_turn" } else { action.as_str() },
                    "injects_into_session": spec.session,
                    "next_fire": next,
                    "timezone": spec.timezone,
                });
                Ok(ToolOutput::text(format!(
                    "Added cron entry {id} ({schedule}, {}): {how}. Next fire: {}.",
                    spec.timezone,
                    next.as_deref().unwrap_or("none")
                ))
                .with_structured(out))
            }
            "remove" => {
                let id = str_param(p, "id")
                    .ok_or_else(|| ToolError::invalid(tool, "/id", "`remove` needs `id` (see `list`)"))?;
                let (_, spec) = self.routines.get(&ctx.identity.user, id).map_err(|e| err(tool, e))?;
                if spec.trigger != Trigger::Cron {
                    return Err(ToolError::invalid(
                        tool,
                        "/id",
                        format!("`{id}` is not a cron entry; use routine_delete"),
                    ));
                }
                self.routines.delete(&ctx.identity.user, id).map_err(|e| err(tool, e))?;
                Ok(ToolOutput::text(format!("Removed cron entry {id}.")).with_structured(json!({"removed": id})))
            }
            other => Err(ToolError::invalid(tool, "/action", format!("unknown action `{other}`: list, add or remove"))),
        }
    }
}

#[async_trait]
impl Tool for RoutineTool {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    fn safety(&self, _params: &Value) -> CallSafety {
        CallSafety {
            read_only: matches!(self.kind, Kind::List | Kind::History),
            sensitive_params: Cow::Borrowed(if self.kind == Kind::Create { &["webhook_secret"] } else { &[] }),
            ..CallSafety::default()
        }
    }

    async fn execute(&self, ctx: &CallContext, params: Value) -> Result<ToolOutput, ToolError> {
        match self.kind {
            Kind::Create => self.create(ctx, &params).await,
            Kind::List => self.list(ctx),
            Kind::Update => self.update(ctx, &params),
            Kind::Delete => self.delete(ctx, &params),
            Kind::History => self.history(ctx, &params),
            Kind::Run => self.run(ctx, &params).await,
            Kind::Cron => self.cron(ctx, &params).await,
        }
    }
}
