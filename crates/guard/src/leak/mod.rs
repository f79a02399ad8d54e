//! Placeholder: arrives with its issue.
