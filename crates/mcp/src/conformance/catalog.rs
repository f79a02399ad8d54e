//! The fixture resources, resource template, prompts and completions.

use rmcp::ErrorData as McpError;
use rmcp::model::{
    CompleteRequestParams, CompleteResult, CompletionInfo, GetPromptRequestParams, GetPromptResponse, GetPromptResult,
    InputRequiredResult, ListPromptsResult, ListResourceTemplatesResult, ListResourcesResult, PromptMessage,
    ReadResourceResult, Reference, ResourceContents,
};
use rmcp::service::{RequestContext, RoleServer};
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use super::ask::{self, Asked, Question};
use super::{Fixtures, IMAGE_PNG};

/// The URI template of the one fixture template.
const TEMPLATE: &str = "test://template/{id}/data";

fn parse<T: DeserializeOwned>(value: Value) -> Result<T, McpError> {
    serde_json::from_value(value).map_err(|e| McpError::internal_error(format!("fixture: {e}"), None))
}

/// `resources/list`.
pub(super) fn resources() -> Result<ListResourcesResult, McpError> {
    let resources = parse(json!([
        {"uri": "test://static-text", "name": "static-text", "description": "A static text resource", "mimeType": "text/plain"},
        {"uri": "test://static-binary", "name": "static-binary", "description": "A static binary resource (PNG)", "mimeType": "image/png"},
        {"uri": "test://watched-resource", "name": "watched-resource", "description": "A resource to subscribe to", "mimeType": "text/plain"},
    ]))?;
    Ok(ListResourcesResult::with_all_items(resources))
}

/// `resources/templates/list`.
pub(super) fn templates() -> Result<ListResourceTemplatesResult, McpError> {
    let templates = parse(json!([{
        "uriTemplate": TEMPLATE, "name": "template-data", "description": "Data for one id", "mimeType": "application/json",
    }]))?;
    Ok(ListResourceTemplatesResult::with_all_items(templates))
}

/// `resources/read`: the static resources and the template; anything else is not found (with
/// the URI in `data`, SEP-2164).
pub(super) fn read(uri: &str) -> Result<ReadResourceResult, McpError> {
    let contents = match uri {
        "test://static-text" => {
            json!({"uri": uri, "mimeType": "text/plain", "text": "This is the content of the static text resource."})
        }
        "test://static-binary" => json!({"uri": uri, "mimeType": "image/png", "blob": IMAGE_PNG}),
        "test://watched-resource" => json!({"uri": uri, "mimeType": "text/plain", "text": "Watched resource content."}),
        _ => match template_id(uri) {
            Some(id) => {
                let data = json!({"id": id, "templateTest": true, "data": format!("Data for ID: {id}")});
                json!({"uri": uri, "mimeType": "application/json", "text": data.to_string()})
            }
            None => {
                return Err(McpError::resource_not_found(
                    "Resource not found: list the resources and templates to see what exists",
                    Some(json!({"uri": uri})),
                ));
            }
        },
    };
    let contents: ResourceContents = parse(contents)?;
    Ok(ReadResourceResult::new(vec![contents]))
}

/// The `{id}` of a URI matching [`TEMPLATE`]: one non-empty path segment.
fn template_id(uri: &str) -> Option<&str> {
    let id = uri.strip_prefix("test://template/")?.strip_suffix("/data")?;
    (!id.is_empty() && !id.contains('/')).then_some(id)
}

/// `prompts/list`.
pub(super) fn prompts() -> Result<ListPromptsResult, McpError> {
    let arg = |name: &str, description: &str| json!({"name": name, "description": description, "required": true});
    let prompts = parse(json!([
        {"name": "test_simple_prompt", "description": "A simple prompt without arguments"},
        {"name": "test_prompt_with_arguments", "description": "A prompt with two arguments",
            "arguments": [arg("arg1", "First test argument"), arg("arg2", "Second test argument")]},
        {"name": "test_prompt_with_embedded_resource", "description": "A prompt embedding a resource",
            "arguments": [arg("resourceUri", "URI of the resource to embed")]},
        {"name": "test_prompt_with_image", "description": "A prompt with an image"},
        {"name": "test_input_required_result_prompt", "description": "A prompt that first asks the user for context (SEP-2322)"},
    ]))?;
    Ok(ListPromptsResult::with_all_items(prompts))
}

impl Fixtures {
    /// `prompts/get`.
    pub(crate) async fn get_prompt(
        &self,
        request: &GetPromptRequestParams,
        context: &RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, McpError> {
        let arg = |name: &str| {
            request.arguments.as_ref().and_then(|a| a.get(name)).and_then(Value::as_str).unwrap_or_default().to_owned()
        };
        let user = |content: Value| json!({"role": "user", "content": content});
        let messages = match request.name.as_str() {
            "test_simple_prompt" => vec![user(json!({"type": "text", "text": "This is a simple prompt for testing."}))],
            "test_prompt_with_arguments" => vec![user(json!({"type": "text",
                "text": format!("Prompt with arguments: arg1='{}', arg2='{}'", arg("arg1"), arg("arg2"))}))],
            "test_prompt_with_embedded_resource" => vec![
                user(json!({"type": "resource", "resource": {
                    "uri": arg("resourceUri"), "mimeType": "text/plain", "text": "Embedded resource content for testing.",
                }})),
                user(json!({"type": "text", "text": "Please process the embedded resource above."})),
            ],
            "test_prompt_with_image" => vec![
                user(json!({"type": "image", "data": IMAGE_PNG, "mimeType": "image/png"})),
                user(json!({"type": "text", "text": "Please analyze the image above."})),
            ],
            "test_input_required_result_prompt" => {
                let schema =
                    json!({"type": "object", "properties": {"context": {"type": "string"}}, "required": ["context"]});
                let question = Question::elicit("user_context", "What context should the prompt use?", schema);
                let modern = super::modern(context);
                match ask::ask(context, modern, request.input_responses.as_ref(), vec![question]).await? {
                    Asked::Pending(p) => return Ok(InputRequiredResult::new(Some(p), None).into()),
                    Asked::Answers(a) => {
                        let given = a["user_context"]["content"]["context"].as_str().unwrap_or_default().to_owned();
                        vec![user(json!({"type": "text", "text": format!("Use this context: {given}")}))]
                    }
                }
            }
            _ => {
                return Err(McpError::invalid_params(
                    format!("unknown prompt `{}`: list the prompts to see their names", request.name),
                    None,
                ));
            }
        };
        let messages: Vec<PromptMessage> = parse(Value::Array(messages))?;
        Ok(GetPromptResult::new(messages).into())
    }
}

/// `completion/complete`: a few values for prompt arguments and the template's `id`, filtered
/// by the typed prefix.
pub(super) fn complete(request: &CompleteRequestParams) -> Result<CompleteResult, McpError> {
    let candidates: &[&str] = match &request.r#ref {
        Reference::Prompt(_) => &["paris", "park", "party", "test", "testing"],
        _ => &["1", "42", "123"],
    };
    let prefix = request.argument.value.as_str();
    let values: Vec<String> = candidates.iter().filter(|c| c.starts_with(prefix)).map(|c| (*c).to_owned()).collect();
    let total = u32::try_from(values.len()).ok();
    let mut info = CompletionInfo::default();
    info.values = values;
    info.total = total;
    info.has_more = Some(false);
    Ok(CompleteResult::new(info))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_template_takes_one_segment() {
        assert_eq!(template_id("test://template/123/data"), Some("123"));
        assert_eq!(template_id("test://template//data"), None);
        assert_eq!(template_id("test://template/1/2/data"), None);
        assert_eq!(template_id("test://other/1/data"), None);
    }

    #[test]
    fn unknown_resources_carry_their_uri() {
        let err = read("test://nope").err().map(|e| e.data);
        assert_eq!(err, Some(Some(json!({"uri": "test://nope"}))));
        assert!(read("test://template/7/data").is_ok());
    }
}
