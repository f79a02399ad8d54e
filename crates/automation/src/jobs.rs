//! Background jobs: create_job, list_jobs, job_status, cancel_job, job_events, job_prompt.

use std::sync::Arc;

use toolgate_core::Tool;

use crate::Setup;

/// This module's tools.
pub(crate) fn tools(setup: &Setup) -> Vec<Arc<dyn Tool>> {
    let _ = setup;
    Vec::new()
}
