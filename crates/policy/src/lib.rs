//! Placeholder: this crate's first code arrives with its issue.
