//! Placeholder: the filesystem tools arrive with their issue.
