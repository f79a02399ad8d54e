//! A small agent that embeds toolgate's [`Gate`]: it offers the gate's tools to a model behind an
//! OpenAI-compatible Chat Completions endpoint (OpenAI, llama.cpp's server, vLLM, Ollama, ...),
//! and every tool call the model makes runs through `gate.call` — policy, parameter validation,
//! limits, the sandbox, output wrapping and the audit log — before its result goes back to the
//! model. When the model answers without calling a tool, the answer is printed.
//!
//! ```sh
//! cargo run -p toolgate-example-agent -- --url http://127.0.0.1:8080/v1 --tools read,ls "What does notes.txt say?"
//! OPENAI_BASE_URL=https://api.openai.com/v1 OPENAI_API_KEY=... \
//!     cargo run -p toolgate-example-agent -- --model gpt-4.1-mini "What does notes.txt say?"
//! ```
//!
//! With the small local model that `cargo xtask deps` installs (SmolLM2-135M-Instruct): it does
//! not call tools natively, so use `--json-schema`, offer it one or two tools and name the tool in
//! the prompt (asked "Read notes.txt." it answers without reading anything):
//!
//! ```sh
//! .cache/agent-model/venv/bin/python examples/agent/local_model.py    # serves it on 127.0.0.1:8080
//! cargo run -p toolgate-example-agent -- --json-schema --tools read "Use the read tool to read the file notes.txt."
//! ```
//!
//! The answer goes to stdout; what the model did (each tool call and its outcome) to stderr.
//! Copy this file: it uses only toolgate's public API (`Gate::builder`, `gate.context()`,
//! `gate.visible_tools`, `gate.call`, `toolgate::core::export`).

use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, bail};
use serde_json::{Value, json};
use toolgate::Gate;
use toolgate::core::CallContext;
use toolgate::core::export::{Provider, export_all};

const USAGE: &str = "\
usage: toolgate-example-agent [OPTIONS] PROMPT...

  --url URL        the endpoint's base URL, without /chat/completions
                   (env OPENAI_BASE_URL; default http://127.0.0.1:8080/v1, llama.cpp's server)
  --model NAME     the model to ask (env OPENAI_MODEL; default `local`); the API key, if any,
                   is read from OPENAI_API_KEY
  --workspace DIR  the folder the tools work in (default .)
  --tools A,B,...  offer only these tools (default: every tool the gate shows this caller)
  --json-schema    for small models that do not call tools natively: describe the tools in the
                   system prompt and constrain each reply with a JSON schema (response_format)
  --max-steps N    rounds of tool calls before the model must answer (default 8)";

/// Local models on a CPU can take minutes per reply.
const HTTP_TIMEOUT: Duration = Duration::from_secs(600);
/// How much of each tool result is shown on stderr.
const PREVIEW_CHARS: usize = 200;
/// In `--json-schema` mode, the `tool` value that ends the run.
const FINAL_ANSWER: &str = "final_answer";

#[tokio::main]
async fn main() -> ExitCode {
    match run().await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

async fn run() -> anyhow::Result<()> {
    let Some(args) = Args::parse(std::env::args().skip(1))? else {
        println!("{USAGE}");
        return Ok(());
    };

    // The gate: toolgate's built-in tools with their policy, limits and sandbox; its state (audit
    // log, approval grants) goes to <workspace>/.toolgate/. No approver is set, so a call that
    // needs a person's approval (a dangerous command, writing AGENTS.md, ...) is refused, and the
    // model is told why. An interactive agent would add one with `GateBuilder::approver`.
    let gate = Gate::builder(&args.workspace)
        .build()
        .with_context(|| format!("cannot build a gate for the workspace {}", args.workspace))?;
    let ctx = gate.context();

    // The tools this caller may see, in OpenAI's format. All of them are some 40 KB of schema,
    // a lot for a small model to choose from: --tools offers fewer.
    let mut specs = gate.visible_tools(&ctx);
    if let Some(only) = &args.tools {
        if let Some(missing) = only.iter().find(|name| !specs.iter().any(|s| &s.name == *name)) {
            bail!("--tools: there is no tool `{missing}` visible to this caller (see `toolgate tools`)");
        }
        specs.retain(|s| only.contains(&s.name));
    }
    let offered: Vec<String> = specs.iter().map(|s| s.name.clone()).collect();
    let model = Model::new(&args, export_all(&specs, Provider::OpenAi))?;
    eprintln!("offering {} tool(s) to {} at {}", offered.len(), args.model, model.url);

    let mut messages = vec![
        json!({"role": "system", "content": model.system_prompt()}),
        json!({"role": "user", "content": args.prompt}),
    ];
    for _ in 0..args.max_steps {
        let reply = model.complete(&messages, true).await?;
        messages.push(reply.message);
        if reply.calls.is_empty() {
            print_answer(&reply.text);
            return Ok(());
        }
        for call in &reply.calls {
            let result = run_call(&gate, &ctx, &offered, call).await;
            messages.push(model.result_message(call, &result));
        }
    }
    // Out of rounds: ask once more with the tools withdrawn, so the run ends with an answer.
    eprintln!("{} rounds of tool calls: asking for an answer without tools", args.max_steps);
    let reply = model.complete(&messages, false).await?;
    print_answer(&reply.text);
    Ok(())
}

/// Runs one call the model asked for through the gate and returns the text the model gets back:
/// the tool's output, or an error it can act on.
async fn run_call(gate: &Gate, ctx: &CallContext, offered: &[String], call: &Call) -> String {
    eprintln!("tool call: {} {}", call.name, call.arguments);
    // The gate runs any tool this caller may see; this agent runs only the ones it offered.
    let result = if !offered.contains(&call.name) {
        Err(format!("`{}` is not one of the tools offered: {}", call.name, offered.join(", ")))
    } else {
        // Some models send "" for a tool without parameters.
        let arguments = if call.arguments.trim().is_empty() { "{}" } else { &call.arguments };
        match serde_json::from_str::<Value>(arguments) {
            Err(e) => Err(format!("the arguments are not valid JSON: {e}")),
            // The whole pipeline: resolve, policy, validate, limits, approval, run, output, audit.
            // Its errors are written for the model to read.
            Ok(params) => {
                gate.call(ctx, &call.name, params).await.map(|out| out.text_content()).map_err(|e| e.to_string())
            }
        }
    };
    let text = match result {
        Ok(text) => text,
        Err(e) => format!("error: {e}"),
    };
    let preview: String = text.chars().take(PREVIEW_CHARS).collect();
    let more = if text.chars().count() > PREVIEW_CHARS { " ..." } else { "" };
    eprintln!("  -> {}{more}", preview.replace('\n', "\n     "));
    text
}

fn print_answer(text: &str) {
    if text.trim().is_empty() {
        println!("(the model's answer was empty)");
    } else {
        println!("{}", text.trim());
    }
}

/// A Chat Completions endpoint and how tools are offered to it.
#[derive(Debug)]
struct Model {
    http: reqwest::Client,
    /// `{base}/chat/completions`.
    url: String,
    name: String,
    api_key: Option<String>,
    /// The offered tools in OpenAI's format: `[{"type": "function", "function": {...}}]`.
    tools: Value,
    json_schema: bool,
}

/// One model reply.
#[derive(Debug)]
struct Reply {
    /// The assistant turn, as it goes back into the conversation.
    message: Value,
    /// Its text (the answer, when there are no calls).
    text: String,
    calls: Vec<Call>,
}

/// One tool call the model asked for.
#[derive(Debug)]
struct Call {
    id: String,
    name: String,
    /// JSON text, as the model wrote it.
    arguments: String,
}

impl Model {
    fn new(args: &Args, tools: Value) -> anyhow::Result<Model> {
        // reqwest is built with rustls but no crypto provider in this workspace: install ring's.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let http = reqwest::Client::builder()
            .no_proxy() // loopback models must not go through an HTTP proxy from the environment
            .connect_timeout(Duration::from_secs(10))
            .timeout(HTTP_TIMEOUT)
            .build()
            .context("cannot build the HTTP client")?;
        let url = format!("{}/chat/completions", args.url.trim_end_matches('/'));
        if !(url.starts_with("http://") || url.starts_with("https://")) {
            bail!("--url must start with http:// or https://, not `{}`", args.url);
        }
        let (name, api_key, json_schema) = (args.model.clone(), args.api_key.clone(), args.json_schema);
        Ok(Model { http, url, name, api_key, tools, json_schema })
    }

    fn system_prompt(&self) -> String {
        let mut prompt = String::from(
            "You are an assistant working in a folder of files. Use the tools to find out what you need, \
             then answer the user's question briefly.",
        );
        if self.json_schema {
            // The tools are not sent as `tools` in this mode: the model reads them here.
            prompt.push_str(&format!(
                "\n\nYou act by replying with one JSON object. To call a tool: {{\"tool\": NAME, \"arguments\": {{...}}}}. \
                 When you have the answer: {{\"tool\": \"{FINAL_ANSWER}\", \"answer\": \"...\"}}. Tools:\n"
            ));
            for f in self.functions() {
                let (name, description) =
                    (f["name"].as_str().unwrap_or_default(), f["description"].as_str().unwrap_or_default());
                prompt.push_str(&format!("- {name}: {description} Parameters: {}\n", f["parameters"]));
            }
        }
        prompt
    }

    /// The `function` objects of the offered tools.
    fn functions(&self) -> impl Iterator<Item = &Value> {
        self.tools.as_array().into_iter().flatten().map(|t| &t["function"])
    }

    /// Sends the conversation and reads the reply; `offer_tools: false` asks for an answer.
    async fn complete(&self, messages: &[Value], offer_tools: bool) -> anyhow::Result<Reply> {
        let mut body = json!({"model": self.name, "messages": messages});
        if self.json_schema {
            // Every reply is one step: a call of an offered tool with its own parameters, or the
            // answer. The server constrains decoding to the schema, so the call is well formed.
            let mut steps: Vec<Value> = Vec::new();
            if offer_tools {
                steps.extend(self.functions().map(|f| {
                    json!({"type": "object", "additionalProperties": false, "required": ["tool", "arguments"],
                           "properties": {"tool": {"const": f["name"]}, "arguments": f["parameters"]}})
                }));
            }
            steps.push(json!({"type": "object", "additionalProperties": false, "required": ["tool", "answer"],
                              "properties": {"tool": {"const": FINAL_ANSWER}, "answer": {"type": "string"}}}));
            body["response_format"] = json!({"type": "json_schema",
                "json_schema": {"name": "next_step", "strict": true, "schema": {"anyOf": steps}}});
        } else if self.functions().next().is_some() {
            body["tools"] = self.tools.clone();
            body["tool_choice"] = json!(if offer_tools { "auto" } else { "none" });
        }

        let mut request = self.http.post(&self.url).json(&body);
        if let Some(key) = &self.api_key {
            request = request.bearer_auth(key);
        }
        let response = request.send().await.with_context(|| format!("cannot reach {}", self.url))?;
        let status = response.status();
        if !status.is_success() {
            let text = response.text().await.unwrap_or_default();
            bail!("{} answered HTTP {status}: {}", self.url, text.chars().take(500).collect::<String>());
        }
        let reply: Value = response.json().await.with_context(|| format!("{} did not answer with JSON", self.url))?;
        let message = reply.pointer("/choices/0/message").cloned().context("the reply has no choices[0].message")?;
        let text = message["content"].as_str().unwrap_or_default().to_owned();
        Ok(if self.json_schema { json_step(text) } else { native_calls(message, text) })
    }

    /// A tool's result as the next message of the conversation.
    fn result_message(&self, call: &Call, result: &str) -> Value {
        if self.json_schema {
            json!({"role": "user", "content": format!("Tool `{}` returned:\n{result}", call.name)})
        } else {
            json!({"role": "tool", "tool_call_id": call.id, "content": result})
        }
    }
}

/// Native tool calling: `message.tool_calls[].function.{name, arguments}`.
fn native_calls(message: Value, text: String) -> Reply {
    let calls = message["tool_calls"]
        .as_array()
        .into_iter()
        .flatten()
        .enumerate()
        .map(|(i, c)| Call {
            id: c["id"].as_str().map_or_else(|| format!("call_{i}"), str::to_owned),
            name: c["function"]["name"].as_str().unwrap_or_default().to_owned(),
            // A string of JSON per the API; some servers send the object itself.
            arguments: match &c["function"]["arguments"] {
                Value::String(s) => s.clone(),
                Value::Null => String::new(),
                other => other.to_string(),
            },
        })
        .collect();
    Reply { message, text, calls }
}

/// `--json-schema` mode: the content is `{"tool": NAME, "arguments": {...}}` or
/// `{"tool": "final_answer", "answer": "..."}`. Anything else is taken as a plain answer.
fn json_step(text: String) -> Reply {
    let message = json!({"role": "assistant", "content": text});
    let step: Value = serde_json::from_str(text.trim()).unwrap_or(Value::Null);
    match step["tool"].as_str() {
        Some(name) if name != FINAL_ANSWER => {
            let call = Call { id: "step".to_owned(), name: name.to_owned(), arguments: step["arguments"].to_string() };
            Reply { message, text, calls: vec![call] }
        }
        _ => {
            let answer = step["answer"].as_str().map_or(text, str::to_owned);
            Reply { message, text: answer, calls: Vec::new() }
        }
    }
}

/// The command line (and environment).
#[derive(Debug)]
struct Args {
    url: String,
    model: String,
    api_key: Option<String>,
    workspace: String,
    tools: Option<Vec<String>>,
    json_schema: bool,
    max_steps: usize,
    prompt: String,
}

impl Args {
    /// `None` for `--help`.
    fn parse(mut argv: impl Iterator<Item = String>) -> anyhow::Result<Option<Args>> {
        let env = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
        let mut args = Args {
            url: env("OPENAI_BASE_URL").unwrap_or_else(|| "http://127.0.0.1:8080/v1".to_owned()),
            model: env("OPENAI_MODEL").unwrap_or_else(|| "local".to_owned()),
            api_key: env("OPENAI_API_KEY"),
            workspace: ".".to_owned(),
            tools: None,
            json_schema: false,
            max_steps: 8,
            prompt: String::new(),
        };
        let mut prompt = Vec::new();
        while let Some(arg) = argv.next() {
            let mut value = || argv.next().with_context(|| format!("{arg} needs a value\n\n{USAGE}"));
            match arg.as_str() {
                "-h" | "--help" => return Ok(None),
                "--url" => args.url = value()?,
                "--model" => args.model = value()?,
                "--workspace" => args.workspace = value()?,
                "--tools" => args.tools = Some(value()?.split(',').map(|t| t.trim().to_owned()).collect()),
                "--json-schema" => args.json_schema = true,
                "--max-steps" => args.max_steps = value()?.parse().context("--max-steps takes a number")?,
                flag if flag.starts_with("--") => bail!("unknown option {flag}\n\n{USAGE}"),
                _ => prompt.push(arg),
            }
        }
        args.prompt = prompt.join(" ");
        if args.prompt.trim().is_empty() {
            bail!("no prompt\n\n{USAGE}");
        }
        Ok(Some(args))
    }
}
