//! An approver for tests: answers from a script, in order, and remembers every request.
//! Shared by the test binaries of `toolgate` and `toolgate-cli`.

use std::sync::{Arc, Mutex};

use toolgate::core::async_trait;
use toolgate::{ApprovalAnswer, ApprovalRequest, Approver};

/// Answers approval requests from a script (then "no answer") and remembers them.
#[derive(Debug, Default)]
pub struct Scripted {
    answers: Mutex<Vec<ApprovalAnswer>>,
    /// Every request, in order.
    pub seen: Mutex<Vec<ApprovalRequest>>,
}

impl Scripted {
    /// An approver that gives `answers` in order, then no answer.
    pub fn new(answers: Vec<ApprovalAnswer>) -> Arc<Self> {
        Arc::new(Scripted { answers: Mutex::new(answers), ..Scripted::default() })
    }

    /// How many times a person would have been asked.
    pub fn asked(&self) -> usize {
        self.seen.lock().unwrap_or_else(|e| e.into_inner()).len()
    }
}

#[async_trait]
impl Approver for Scripted {
    async fn ask(&self, request: &ApprovalRequest) -> Option<ApprovalAnswer> {
        self.seen.lock().unwrap_or_else(|e| e.into_inner()).push(request.clone());
        let mut answers = self.answers.lock().unwrap_or_else(|e| e.into_inner());
        if answers.is_empty() { None } else { Some(answers.remove(0)) }
    }
}
