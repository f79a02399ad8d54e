//! The fixture tools the conformance suite calls by name, with the results its scenarios expect.

use std::sync::{Arc, LazyLock};
use std::time::Duration;

use rmcp::ErrorData as McpError;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, InputRequiredResult, JsonObject,
    ProgressNotificationParam, Tool,
};
use rmcp::service::{RequestContext, RoleServer};
use serde_json::{Value, json};

use super::ask::{self, Asked, Question};
use super::{Change, Fixtures, IMAGE_PNG, Level, WAV};

/// Pause between a fixture's notifications, so a client sees them arrive during the call.
const STEP: Duration = Duration::from_millis(50);

/// The input schema of `json_schema_2020_12_tool`: the 2020-12 keywords a server must pass
/// through untouched (SEP-1613, SEP-2106).
fn json_schema_2020_12() -> Value {
    json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "type": "object",
        "$defs": {"address": {
            "$anchor": "addressDef",
            "type": "object",
            "properties": {"street": {"type": "string"}, "city": {"type": "string"}},
        }},
        "properties": {
            "name": {"type": "string"},
            "address": {"$ref": "#/$defs/address"},
            "contactMethod": {"type": "string", "enum": ["phone", "email"]},
            "phone": {"type": "string"},
            "email": {"type": "string"},
        },
        "allOf": [{"anyOf": [{"required": ["phone"]}, {"required": ["email"]}]}],
        "if": {"properties": {"contactMethod": {"const": "phone"}}, "required": ["contactMethod"]},
        "then": {"required": ["phone"]},
        "else": {"required": ["email"]},
        "additionalProperties": false,
    })
}

/// `(name, description, input schema)` of every fixture tool.
fn specs() -> Vec<(&'static str, &'static str, Value)> {
    let none = || json!({"type": "object", "properties": {}});
    let string = |name: &str, description: &str| json!({"type": "object", "properties": {name: {"type": "string", "description": description}}, "required": [name]});
    vec![
        ("test_simple_text", "Returns a simple text response.", none()),
        ("test_image_content", "Returns a 1x1 PNG image.", none()),
        ("test_audio_content", "Returns a short WAV clip.", none()),
        ("test_embedded_resource", "Returns an embedded text resource.", none()),
        ("test_multiple_content_types", "Returns text, an image and an embedded resource.", none()),
        ("test_tool_with_logging", "Sends three log messages while it runs.", none()),
        ("test_error_handling", "Always fails with an error result.", none()),
        ("test_tool_with_progress", "Reports progress 0, 50 and 100 of 100.", none()),
        ("test_sampling", "Asks the client's LLM (sampling).", string("prompt", "The prompt to send to the LLM")),
        (
            "test_elicitation",
            "Asks the client's user (elicitation).",
            string("message", "The message to show the user"),
        ),
        ("test_elicitation_sep1034_defaults", "Elicitation with defaults for every primitive type (SEP-1034).", none()),
        ("test_elicitation_sep1330_enums", "Elicitation with the five enum forms (SEP-1330).", none()),
        ("json_schema_2020_12_tool", "Tool with JSON Schema 2020-12 features", json_schema_2020_12()),
        (
            "test_custom_header",
            "Echoes a parameter the client also sends as the Mcp-Param-Region header (SEP-2243).",
            json!({"type": "object", "properties": {"region": {"type": "string", "x-mcp-header": "Region"}}, "required": ["region"]}),
        ),
        ("test_missing_capability", "Needs the client's sampling capability.", none()),
        ("test_streaming_elicitation", "Asks the client's user in the middle of the call.", none()),
        ("test_logging_tool", "Logs at every level the request allows.", none()),
        ("test_input_required_result_elicitation", "Asks the user's name (SEP-2322).", none()),
        ("test_input_required_result_sampling", "Asks the client's LLM a question (SEP-2322).", none()),
        ("test_input_required_result_list_roots", "Asks the client's roots (SEP-2322).", none()),
        (
            "test_input_required_result_request_state",
            "Asks for a confirmation with a request state (SEP-2322).",
            none(),
        ),
        ("test_input_required_result_multiple_inputs", "Asks three things at once (SEP-2322).", none()),
        ("test_input_required_result_multi_round", "Asks two things one after the other (SEP-2322).", none()),
        ("test_input_required_result_tampered_state", "Refuses a tampered request state (SEP-2322).", none()),
        ("test_input_required_result_capabilities", "Asks only what the client declared it can answer.", none()),
        ("test_trigger_tool_change", "Announces a tools/list change to open listen streams.", none()),
        ("test_trigger_prompt_change", "Announces a prompts/list change to open listen streams.", none()),
    ]
}

/// Every fixture tool, built once.
pub(super) static TOOLS: LazyLock<Vec<Tool>> = LazyLock::new(|| {
    specs()
        .into_iter()
        .map(|(name, description, schema)| {
            let schema: JsonObject = match schema {
                Value::Object(map) => map,
                _ => JsonObject::new(),
            };
            Tool::new(name, description, Arc::new(schema))
        })
        .collect()
});

fn blocks(content: Value) -> Result<Vec<ContentBlock>, McpError> {
    serde_json::from_value(content).map_err(|e| McpError::internal_error(format!("fixture content: {e}"), None))
}

fn text(text: impl Into<String>) -> Result<CallToolResponse, McpError> {
    Ok(CallToolResult::success(vec![ContentBlock::text(text.into())]).into())
}

fn input_required(requests: rmcp::model::InputRequests, state: Option<String>) -> Result<CallToolResponse, McpError> {
    Ok(InputRequiredResult::new(Some(requests), state).into())
}

/// What an elicitation answer says, for the fixtures that echo it.
fn elicited(answer: &Value) -> String {
    format!(
        "action={}, content={}",
        answer["action"].as_str().unwrap_or("?"),
        answer.get("content").unwrap_or(&Value::Null)
    )
}

/// The text of a sampling answer (`content` is one block or, from 2025-11-25, possibly many).
fn sampled(answer: &Value) -> String {
    let content = &answer["content"];
    let block = if content.is_array() { &content[0] } else { content };
    block["text"].as_str().unwrap_or_default().to_owned()
}

impl Fixtures {
    /// Runs fixture tool `request.name`, or `None` when no fixture has that name.
    pub(crate) async fn call(
        &self,
        request: &CallToolRequestParams,
        context: &RequestContext<RoleServer>,
    ) -> Option<Result<CallToolResponse, McpError>> {
        let arg = |name: &str| {
            request.arguments.as_ref().and_then(|a| a.get(name)).and_then(Value::as_str).unwrap_or_default().to_owned()
        };
        let modern = super::modern(context);
        let responses = request.input_responses.as_ref();
        let result = match request.name.as_ref() {
            "test_simple_text" => text("This is a simple text response for testing."),
            "test_image_content" => blocks(json!([{"type": "image", "data": IMAGE_PNG, "mimeType": "image/png"}]))
                .map(|b| CallToolResult::success(b).into()),
            "test_audio_content" => blocks(json!([{"type": "audio", "data": WAV, "mimeType": "audio/wav"}]))
                .map(|b| CallToolResult::success(b).into()),
            "test_embedded_resource" => blocks(json!([{"type": "resource", "resource": {
                "uri": "test://embedded-resource", "mimeType": "text/plain", "text": "This is an embedded resource content.",
            }}]))
            .map(|b| CallToolResult::success(b).into()),
            "test_multiple_content_types" => blocks(json!([
                {"type": "text", "text": "Multiple content types test:"},
                {"type": "image", "data": IMAGE_PNG, "mimeType": "image/png"},
                {"type": "resource", "resource": {
                    "uri": "test://mixed-content-resource", "mimeType": "application/json", "text": r#"{"test":"data","value":123}"#,
                }},
            ]))
            .map(|b| CallToolResult::success(b).into()),
            "test_tool_with_logging" => {
                for (i, message) in ["Tool execution started", "Tool processing data", "Tool execution completed"].iter().enumerate() {
                    if i > 0 {
                        tokio::time::sleep(STEP).await;
                    }
                    self.log(context, Level::Info, message).await;
                }
                text("Logging tool finished: 3 messages sent.")
            }
            "test_error_handling" => Ok(CallToolResult::error(vec![ContentBlock::text(
                "This tool intentionally returns an error for testing",
            )])
            .into()),
            "test_tool_with_progress" => {
                let token = context.meta.get_progress_token();
                for (i, progress) in [0.0, 50.0, 100.0].into_iter().enumerate() {
                    if i > 0 {
                        tokio::time::sleep(STEP).await;
                    }
                    if let Some(token) = &token {
                        let mut note = ProgressNotificationParam::new(token.clone(), progress);
                        note.total = Some(100.0);
                        let _ = context.peer.notify_progress(note).await;
                    }
                }
                text("Progress tool finished.")
            }
            "test_logging_tool" => {
                for level in [Level::Debug, Level::Info, Level::Warning, Level::Error] {
                    self.log(context, level, "test_logging_tool message").await;
                }
                text("Logging done.")
            }
            "test_sampling" => {
                if let Err(e) = ask::require(context, "sampling") {
                    return Some(Ok(refusal(&e)));
                }
                match ask::ask(context, modern, responses, vec![Question::sample("llm", &arg("prompt"), 100)]).await {
                    Ok(Asked::Answers(a)) => text(format!("LLM response: {}", sampled(&a["llm"]))),
                    Ok(Asked::Pending(p)) => input_required(p, None),
                    Err(e) => Err(e),
                }
            }
            "test_elicitation" => {
                let schema = json!({"type": "object", "properties": {
                    "username": {"type": "string", "description": "User's response"},
                    "email": {"type": "string", "description": "User's email address"},
                }, "required": ["username", "email"]});
                self.elicit(context, modern, responses, Question::elicit("user", &arg("message"), schema), "User response")
                    .await
            }
            "test_elicitation_sep1034_defaults" => {
                let schema = json!({"type": "object", "properties": {
                    "name": {"type": "string", "default": "John Doe"},
                    "age": {"type": "integer", "default": 30},
                    "score": {"type": "number", "default": 95.5},
                    "status": {"type": "string", "enum": ["active", "inactive", "pending"], "default": "active"},
                    "verified": {"type": "boolean", "default": true},
                }});
                let question = Question::elicit("defaults", "Please review these values", schema);
                self.elicit(context, modern, responses, question, "Elicitation completed").await
            }
            "test_elicitation_sep1330_enums" => {
                let schema = json!({"type": "object", "properties": {
                    "untitledSingle": {"type": "string", "enum": ["option1", "option2", "option3"]},
                    "titledSingle": {"type": "string", "oneOf": [
                        {"const": "value1", "title": "First Option"},
                        {"const": "value2", "title": "Second Option"},
                        {"const": "value3", "title": "Third Option"},
                    ]},
                    "legacyEnum": {"type": "string", "enum": ["opt1", "opt2", "opt3"],
                        "enumNames": ["Option One", "Option Two", "Option Three"]},
                    "untitledMulti": {"type": "array", "items": {"type": "string", "enum": ["option1", "option2", "option3"]}},
                    "titledMulti": {"type": "array", "items": {"anyOf": [
                        {"const": "value1", "title": "First Choice"},
                        {"const": "value2", "title": "Second Choice"},
                        {"const": "value3", "title": "Third Choice"},
                    ]}},
                }});
                let question = Question::elicit("enums", "Please choose", schema);
                self.elicit(context, modern, responses, question, "Elicitation completed").await
            }
            "json_schema_2020_12_tool" => text(format!("Received: {}", Value::Object(request.arguments.clone().unwrap_or_default()))),
            "test_custom_header" => text(format!("Region: {}", arg("region"))),
            "test_missing_capability" => match ask::require(context, "sampling") {
                Err(e) => Err(e),
                Ok(()) => match ask::ask(context, modern, responses, vec![Question::sample("hello", "Say hello", 20)]).await {
                    Ok(Asked::Answers(a)) => text(format!("Sampled: {}", sampled(&a["hello"]))),
                    Ok(Asked::Pending(p)) => input_required(p, None),
                    Err(e) => Err(e),
                },
            },
            "test_streaming_elicitation" => match ask::require(context, "elicitation") {
                Err(e) => Err(e),
                Ok(()) => {
                    let schema = json!({"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]});
                    self.elicit(context, modern, responses, Question::elicit("go_on", "Continue?", schema), "Answered").await
                }
            },
            "test_input_required_result_elicitation" => {
                let question = Question::elicit("user_name", "What is your name?", name_schema("name"));
                match ask::ask(context, modern, responses, vec![question]).await {
                    Ok(Asked::Answers(a)) => {
                        let name = a["user_name"]["content"]["name"].as_str().unwrap_or("stranger");
                        text(format!("Hello, {name}!"))
                    }
                    Ok(Asked::Pending(p)) => input_required(p, None),
                    Err(e) => Err(e),
                }
            }
            "test_input_required_result_sampling" => {
                let question = Question::sample("capital_question", "What is the capital of France?", 100);
                match ask::ask(context, modern, responses, vec![question]).await {
                    Ok(Asked::Answers(a)) => text(format!("The client's LLM answered: {}", sampled(&a["capital_question"]))),
                    Ok(Asked::Pending(p)) => input_required(p, None),
                    Err(e) => Err(e),
                }
            }
            "test_input_required_result_list_roots" => {
                match ask::ask(context, modern, responses, vec![Question::roots("client_roots")]).await {
                    Ok(Asked::Answers(a)) => {
                        let roots = a["client_roots"]["roots"].as_array().cloned().unwrap_or_default();
                        let uris: Vec<&str> = roots.iter().filter_map(|r| r["uri"].as_str()).collect();
                        text(format!("Client roots: {}", uris.join(", ")))
                    }
                    Ok(Asked::Pending(p)) => input_required(p, None),
                    Err(e) => Err(e),
                }
            }
            name @ ("test_input_required_result_request_state" | "test_input_required_result_tampered_state") => {
                let confirm = || {
                    let schema = json!({"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]});
                    vec![Question::elicit("confirm", "Please confirm", schema)]
                };
                self.rounds(context, modern, request, name, vec![confirm()], "state-ok: confirmed").await
            }
            "test_input_required_result_multiple_inputs" => {
                let all = vec![
                    Question::elicit("user_name", "What is your name?", name_schema("name")),
                    Question::sample("greeting", "Generate a greeting", 50),
                    Question::roots("client_roots"),
                ];
                self.rounds(context, modern, request, "test_input_required_result_multiple_inputs", vec![all], "All three answers received.")
                    .await
            }
            "test_input_required_result_multi_round" => {
                let steps = vec![
                    vec![Question::elicit("step1", "Step 1: What is your name?", name_schema("name"))],
                    vec![Question::elicit("step2", "Step 2: What is your favorite color?", name_schema("color"))],
                ];
                self.rounds(context, modern, request, "test_input_required_result_multi_round", steps, "Both steps answered.").await
            }
            "test_input_required_result_capabilities" => {
                let mut questions = Vec::new();
                if ask::declared(context, "sampling") {
                    questions.push(Question::sample("sample", "Say something", 20));
                }
                if ask::declared(context, "elicitation") {
                    questions.push(Question::elicit("elicit", "What is your name?", name_schema("name")));
                }
                if ask::declared(context, "roots") {
                    questions.push(Question::roots("roots"));
                }
                match ask::ask(context, modern, responses, questions).await {
                    Ok(Asked::Answers(a)) => text(format!("Answered {} question(s) the client can answer.", a.len())),
                    Ok(Asked::Pending(p)) => input_required(p, None),
                    Err(e) => Err(e),
                }
            }
            "test_trigger_tool_change" => {
                self.announce(Change::Tools);
                text("Announced a tools/list change.")
            }
            "test_trigger_prompt_change" => {
                self.announce(Change::Prompts);
                text("Announced a prompts/list change.")
            }
            _ => return None,
        };
        Some(result)
    }

    /// Asks one elicitation and echoes the answer after `prefix`.
    async fn elicit(
        &self,
        context: &RequestContext<RoleServer>,
        modern: bool,
        responses: Option<&rmcp::model::InputResponses>,
        question: Question,
        prefix: &str,
    ) -> Result<CallToolResponse, McpError> {
        if let Err(e) = ask::require(context, "elicitation") {
            return Ok(refusal(&e));
        }
        let key = question.key;
        match ask::ask(context, modern, responses, vec![question]).await? {
            Asked::Answers(a) => text(format!("{prefix}: {}", elicited(&a[key]))),
            Asked::Pending(p) => input_required(p, None),
        }
    }

    /// A call that asks `rounds` of questions one after the other. On 2026-07-28 every round
    /// goes back to the client with a fresh `requestState`, which the retry must echo: a state
    /// that was not issued here for this tool and round is refused (`-32602`).
    async fn rounds(
        &self,
        context: &RequestContext<RoleServer>,
        modern: bool,
        request: &CallToolRequestParams,
        tool: &str,
        rounds: Vec<Vec<Question>>,
        done: &str,
    ) -> Result<CallToolResponse, McpError> {
        if !modern {
            for questions in rounds {
                if let Asked::Pending(p) = ask::ask(context, false, None, questions).await? {
                    return input_required(p, None);
                }
            }
            return text(done);
        }
        // Round n (1-based) was sent with a state standing for n; without one, nothing was asked.
        let answered = self.states.redeem(tool, request.request_state.as_deref())?;
        let total = rounds.len();
        for (index, questions) in rounds.into_iter().enumerate() {
            let round = u8::try_from(index + 1).unwrap_or(u8::MAX);
            if round < answered {
                continue;
            }
            let responses = if round == answered { request.input_responses.as_ref() } else { None };
            match ask::ask(context, true, responses, questions).await? {
                Asked::Answers(_) if index + 1 < total => continue,
                Asked::Answers(_) => return text(done),
                Asked::Pending(p) => return input_required(p, Some(self.states.issue(tool, round)?)),
            }
        }
        text(done)
    }
}

/// An object schema with one required string property.
fn name_schema(property: &str) -> Value {
    json!({"type": "object", "properties": {property: {"type": "string"}}, "required": [property]})
}

/// A tool failure the model reads: the client lacks what the tool needs.
fn refusal(error: &McpError) -> CallToolResponse {
    CallToolResult::error(vec![ContentBlock::text(format!(
        "{}: this tool needs a client capability the client did not declare",
        error.message
    ))])
    .into()
}
