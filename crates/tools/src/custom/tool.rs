//! [`CustomTool`]: one rendered template, analyzed and run like an `exec` call.

use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use toolgate_core::{Annotations, CallContext, CallSafety, Tool, ToolError, ToolOutput, ToolSpec};
use toolgate_guard::shell::CommandClass;

use super::{CustomToolDef, SecretSource, Template};
use crate::runtime::{DEADLINE_GRACE, Launch, Runtime, ShellCheck, resolve_workdir};

/// A user-defined shell-template tool. Build it with [`super::tools`].
#[derive(Debug)]
pub struct CustomTool {
    def: CustomToolDef,
    template: Template,
    spec: ToolSpec,
    runtime: Arc<Runtime>,
    secrets: Arc<dyn SecretSource>,
}

impl CustomTool {
    pub(super) fn new(
        def: CustomToolDef,
        template: Template,
        group: &str,
        runtime: Arc<Runtime>,
        secrets: Arc<dyn SecretSource>,
    ) -> Self {
        let description = format!(
            "{} (Runs a shell command in the sandbox, stopped after {} s; returns its exit code and output.)",
            def.description.trim_end(),
            def.timeout_seconds
        );
        let spec = ToolSpec::new(def.name.clone(), description, def.parameters.clone())
            .group(group)
            .annotations(Annotations::default());
        CustomTool { def, template, spec, runtime, secrets }
    }

    /// The definition the tool was built from.
    pub fn definition(&self) -> &CustomToolDef {
        &self.def
    }

    /// The command line this call would run.
    pub fn render(&self, params: &Value) -> Result<String, ToolError> {
        self.template.render(params).map_err(|e| ToolError::invalid(&self.def.name, "", e.to_string()))
    }

    fn check_agent(&self, ctx: &CallContext) -> Result<(), ToolError> {
        match &self.def.agent {
            Some(agent) if *agent != ctx.identity.agent => {
                Err(ToolError::UnknownTool { name: self.def.name.clone(), suggestion: None })
            }
            _ => Ok(()),
        }
    }
}

#[toolgate_core::async_trait]
impl Tool for CustomTool {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    fn safety(&self, params: &Value) -> CallSafety {
        let line = match self.render(params) {
            Ok(line) => line,
            Err(e) => return CallSafety { refusal: Some(e.to_string().into()), ..CallSafety::default() },
        };
        // The environment is the definition's (the user's), not the model's: unlike `exec`'s
        // `env` parameter, its names do not raise the class.
        let mut safety = ShellCheck::new(&line, &[]).safety(&self.def.name);
        safety.sensitive_params = std::borrow::Cow::Borrowed(&[]);
        safety.timeout = Some(Duration::from_secs(self.def.timeout_seconds) + DEADLINE_GRACE);
        safety
    }

    async fn execute(&self, ctx: &CallContext, params: Value) -> Result<ToolOutput, ToolError> {
        self.check_agent(ctx)?;
        let line = self.render(&params)?;
        let check = ShellCheck::new(&line, &[]);
        if let Some(refusal) = check.refusal(&self.def.name) {
            return Err(refusal);
        }
        let mut env = Vec::with_capacity(self.def.env.len());
        for (var, secret) in &self.def.env {
            match self.secrets.secret(secret) {
                Ok(Some(value)) if !value.contains('\0') => env.push((var.clone(), value)),
                Ok(Some(_)) => {
                    return Err(ToolError::failed(format!(
                        "the secret `{secret}` for `{var}` contains a NUL byte; ask the user to store it again"
                    )));
                }
                Ok(None) => {
                    return Err(ToolError::failed(format!(
                        "`{}` needs the secret `{secret}` (for `{var}`), which is not stored; ask the user to run \
                         `toolgate tools secret {secret}`",
                        self.def.name
                    )));
                }
                Err(e) => return Err(ToolError::failed(format!("cannot read the secret `{secret}`: {e}"))),
            }
        }
        let workdir = resolve_workdir(&self.def.name, &ctx.workspace, self.def.workdir.as_deref())?;
        let launch = Launch {
            program: self.runtime.bash.clone(),
            args: vec!["-c".to_owned(), line.clone()],
            workdir,
            env,
            display: line,
            safe: check.class == CommandClass::Safe,
            timeout: Some(Duration::from_secs(self.def.timeout_seconds)),
            background: false,
        };
        self.runtime.launch(ctx, launch).await
    }
}
