//! What can be wrong with a policy configuration.

use std::fmt;

/// A policy configuration that cannot be compiled. The message names the list and the entry.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PolicyError {
    /// An entry in a list is malformed (bad tool name, rule syntax or glob).
    #[error("{list}: invalid entry `{entry}`: {reason}")]
    InvalidEntry {
        /// Where the entry is (`[tools].deny`, `[tools.agents.coder].allow`, ...).
        list: String,
        /// The entry as written.
        entry: String,
        /// What is wrong and how to write it.
        reason: String,
    },
    /// A custom group in `[tools.groups]` cannot be defined.
    #[error("[tools.groups].{group}: {reason}")]
    InvalidGroup {
        /// The group's name.
        group: String,
        /// What is wrong.
        reason: String,
    },
}

/// Something in the configuration that is accepted but probably not what was meant.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PolicyWarning {
    /// Where the entry is (`[tools].allow`, ...).
    pub list: String,
    /// The entry as written.
    pub entry: String,
    /// What is odd about it.
    pub kind: WarningKind,
}

/// The kinds of [`PolicyWarning`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum WarningKind {
    /// A tool name toolgate does not know (a typo, a plugin's tool, an MCP tool not loaded yet).
    UnknownTool,
    /// A group that is neither built in nor defined in `[tools.groups]`.
    UnknownGroup,
    /// An allow list whose entries are all unknown: nothing passes it until such tools appear.
    AllowMatchesNothing,
    /// An entry that matches none of the registered tools (from [`crate::Policy::known_tools`]).
    NoRegisteredTool,
}

impl fmt::Display for PolicyWarning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let PolicyWarning { list, entry, kind } = self;
        match kind {
            WarningKind::UnknownTool if entry.starts_with("mcp__") => write!(
                f,
                "{list}: `{entry}` names an MCP tool that is not loaded yet; the entry is kept and applies once the server registers it"
            ),
            WarningKind::UnknownTool => write!(
                f,
                "{list}: unknown tool `{entry}` (a typo?); the entry is kept and applies if such a tool is registered"
            ),
            WarningKind::UnknownGroup => write!(
                f,
                "{list}: unknown group `{entry}`; define it in [tools.groups] or check the spelling (it matches tools declaring that group)"
            ),
            WarningKind::AllowMatchesNothing => write!(
                f,
                "{list}: every entry names an unknown tool, so this allow list lets nothing through until such tools appear (it does not fail open)"
            ),
            WarningKind::NoRegisteredTool => {
                write!(f, "{list}: `{entry}` matches no registered tool; it is kept and applies once one appears")
            }
        }
    }
}
