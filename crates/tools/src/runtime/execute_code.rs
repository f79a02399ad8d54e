//! `execute_code`: run a snippet of Python, Node.js or Bash through the same sandbox and limits
//! as `exec`.

use std::borrow::Cow;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use toolgate_core::{
    Annotations, ApprovalRequirement, CallContext, CallSafety, RateClass, Tool, ToolError, ToolOutput, ToolSpec,
    Touches,
};
use toolgate_guard::shell::CommandClass;

use super::classify::{SENSITIVE, ShellCheck};
use super::exec::{DEADLINE_GRACE, Launch, opt_u64};
use super::{Runtime, find_interpreter};

const NAME: &str = "execute_code";
/// Longest snippet, in bytes (one argument of `execve` holds at most 128 KiB).
const MAX_CODE_BYTES: usize = 100_000;

/// A language `execute_code` runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Language {
    Python,
    Node,
    Bash,
}

impl Language {
    fn parse(s: &str) -> Option<Language> {
        match s.to_ascii_lowercase().as_str() {
            "python" | "python3" | "py" => Some(Language::Python),
            "node" | "javascript" | "js" | "nodejs" => Some(Language::Node),
            "bash" | "sh" | "shell" => Some(Language::Bash),
            _ => None,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Language::Python => "python",
            Language::Node => "node",
            Language::Bash => "bash",
        }
    }

    /// The flag that passes code on the command line.
    fn flag(self) -> &'static str {
        match self {
            Language::Python | Language::Bash => "-c",
            Language::Node => "-e",
        }
    }
}

/// The `execute_code` tool.
#[derive(Debug)]
pub struct ExecuteCodeTool {
    spec: ToolSpec,
    runtime: Arc<Runtime>,
}

impl ExecuteCodeTool {
    pub(crate) fn new(runtime: Arc<Runtime>) -> Self {
        let c = &runtime.config;
        let spec = ToolSpec::new(
            NAME,
            format!(
                "Run a snippet of Python, Node.js or Bash code in the workspace, in the same OS sandbox as `exec` \
                 ({} mode, network {}). Print what you want to see: the result is the exit code, the duration, \
                 the sandbox line and the output (stdout and stderr interleaved, at most {} characters, the \
                 middle cut). Stopped after `timeout` seconds (default {}, at most {}).",
                c.sandbox.mode, c.sandbox.network, c.output_max_chars, c.default_timeout_secs, c.max_timeout_secs
            ),
            json!({
                "type": "object",
                "properties": {
                    "language": { "type": "string", "enum": ["python", "node", "bash"], "description": "The language of `code`." },
                    "code": { "type": "string", "minLength": 1, "maxLength": MAX_CODE_BYTES, "description": "The program." },
                    "timeout": { "type": "integer", "minimum": 1, "maximum": c.max_timeout_secs, "description": format!("Seconds before it is stopped (default {}).", c.default_timeout_secs) }
                },
                "required": ["language", "code"],
                "additionalProperties": false
            }),
        )
        .group("runtime")
        .annotations(Annotations::default());
        ExecuteCodeTool { spec, runtime }
    }

    fn program(&self, language: Language) -> PathBuf {
        let i = &self.runtime.config.interpreters;
        match language {
            Language::Python => find_interpreter(&i.python),
            Language::Node => find_interpreter(&i.node),
            Language::Bash if i.bash == "bash" => self.runtime.bash.clone(),
            Language::Bash => find_interpreter(&i.bash),
        }
    }
}

#[toolgate_core::async_trait]
impl Tool for ExecuteCodeTool {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    fn safety(&self, params: &Value) -> CallSafety {
        let code = params.get("code").and_then(Value::as_str).unwrap_or_default();
        let language = params.get("language").and_then(Value::as_str).and_then(Language::parse);
        let mut safety = match language {
            Some(Language::Bash) => ShellCheck::new(code, &[]).safety(NAME),
            other => {
                let lang = other.map_or("unknown", Language::name);
                let program = other.map_or_else(|| lang.to_owned(), |l| self.program(l).display().to_string());
                CallSafety {
                    approval: ApprovalRequirement::UnlessAutoApproved,
                    approval_reason: Some(Cow::Owned(format!(
                        "`{NAME}` runs {lang} code, which toolgate does not analyze (it runs in the sandbox)"
                    ))),
                    approval_subject: Some(format!("{lang} code:\n{code}")),
                    sensitive_params: Cow::Borrowed(SENSITIVE),
                    timeout: None,
                    rate_class: RateClass::Exec,
                    touches: Touches {
                        commands: vec![vec![program, other.map_or("-c", Language::flag).to_owned(), code.to_owned()]],
                        opaque: true,
                        ..Touches::default()
                    },
                    refusal: None,
                    read_only: false,
                    inspect: false,
                    forwards: false,
                }
            }
        };
        // Code is run as a program, not as the commands the classifier saw: approval mode
        // `untrusted` keeps asking, even for bash code that reads like `ls`.
        safety.read_only = false;
        let secs = params.get("timeout").and_then(Value::as_u64).unwrap_or(self.runtime.config.default_timeout_secs);
        safety.timeout = Some(Duration::from_secs(secs.min(self.runtime.config.max_timeout_secs)) + DEADLINE_GRACE);
        safety
    }

    async fn execute(&self, ctx: &CallContext, params: Value) -> Result<ToolOutput, ToolError> {
        let raw = params.get("language").and_then(Value::as_str).unwrap_or_default();
        let language = Language::parse(raw).ok_or_else(|| {
            ToolError::invalid(NAME, "/language", format!("unknown language `{raw}`; use python, node or bash"))
        })?;
        let code = params
            .get("code")
            .and_then(Value::as_str)
            .filter(|c| !c.trim().is_empty())
            .ok_or_else(|| ToolError::invalid(NAME, "/code", "`code` is required: the program to run"))?;
        if code.len() > MAX_CODE_BYTES {
            return Err(ToolError::invalid(
                NAME,
                "/code",
                format!("at most {MAX_CODE_BYTES} bytes; write a file and `exec` it"),
            ));
        }
        if code.contains('\0') {
            return Err(ToolError::invalid(NAME, "/code", "the code cannot contain NUL bytes"));
        }
        let mut safe = false;
        if language == Language::Bash {
            let check = ShellCheck::new(code, &[]);
            if let Some(refusal) = check.refusal(NAME) {
                return Err(refusal);
            }
            safe = check.class == CommandClass::Safe;
        }
        let timeout = self.runtime.timeout(NAME, opt_u64(NAME, &params, "timeout")?)?;
        let launch = Launch {
            program: self.program(language),
            args: vec![language.flag().to_owned(), code.to_owned()],
            workdir: ctx.workspace.to_path_buf(),
            env: Vec::new(),
            display: format!("{} code", language.name()),
            safe,
            timeout: Some(timeout),
            background: false,
        };
        self.runtime.launch(ctx, launch).await
    }
}
