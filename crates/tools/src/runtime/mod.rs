//! Placeholder: exec, process and execute_code arrive with their issue.
