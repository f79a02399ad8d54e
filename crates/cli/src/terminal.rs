//! Asking for approval on the terminal `toolgate call` runs in.

use std::io::{BufRead, IsTerminal, Write};

use toolgate::{ApprovalAnswer, ApprovalRequest, Approver};

/// Asks on stderr and reads the answer from stdin, when both are a terminal.
#[derive(Debug)]
pub(crate) struct TerminalApprover;

impl TerminalApprover {
    /// Some when a person can answer here.
    pub(crate) fn if_attached() -> Option<Self> {
        (std::io::stdin().is_terminal() && std::io::stderr().is_terminal()).then_some(TerminalApprover)
    }
}

#[async_trait::async_trait]
impl Approver for TerminalApprover {
    async fn ask(&self, request: &ApprovalRequest) -> Option<ApprovalAnswer> {
        let prompt = format!("{request}Allow? [y]es once / [a]lways / [N]o: ");
        tokio::task::spawn_blocking(move || {
            let mut stderr = std::io::stderr();
            let _ = write!(stderr, "{prompt}");
            let _ = stderr.flush();
            let mut line = String::new();
            std::io::stdin().lock().read_line(&mut line).ok()?;
            Some(match line.trim().to_ascii_lowercase().as_str() {
                "y" | "yes" => ApprovalAnswer::AllowOnce,
                "a" | "always" => ApprovalAnswer::AllowAlways,
                _ => ApprovalAnswer::Deny { message: Some("the user said no".into()) },
            })
        })
        .await
        .ok()
        .flatten()
    }
}
