//! Stage 1, before resolve: the caller's dialect (`toolgate-dialect`). A call written in a seed
//! system's language becomes the canonical call every later stage sees; the tools a caller
//! lists are presented in its language.
//!
//! The dialect is `[agents.NAME] dialect` for an agent that has one, else `[gate] dialect`
//! (`--dialect`), which a reload replaces; a call another node forwarded is canonical.

use std::collections::BTreeMap;
use std::sync::{PoisonError, RwLock};

use toolgate_core::{CallContext, Registry, ToolSpec};
use toolgate_dialect::{Dialect, UnknownDialect};

use crate::config::Config;

#[derive(Debug)]
pub(crate) struct DialectStage {
    /// `[gate] dialect`.
    gate: RwLock<&'static Dialect>,
    /// `[agents.NAME] dialect`, where set.
    agents: BTreeMap<String, &'static Dialect>,
    /// The default dialect, for forwarded calls.
    canonical: &'static Dialect,
}

impl DialectStage {
    pub(crate) fn new(config: &Config) -> Result<Self, UnknownDialect> {
        let gate = toolgate_dialect::dialect(&config.gate.dialect)?;
        let agents = config
            .agents
            .iter()
            .filter_map(|(name, agent)| agent.dialect.as_deref().map(|d| (name, d)))
            .map(|(name, d)| Ok((name.clone(), toolgate_dialect::dialect(d)?)))
            .collect::<Result<_, UnknownDialect>>()?;
        let canonical = toolgate_dialect::dialect(toolgate_dialect::DEFAULT)?;
        Ok(DialectStage { gate: RwLock::new(gate), agents, canonical })
    }

    /// Puts a reloaded `[gate] dialect` in force; says whether it changed.
    pub(crate) fn replace(&self, config: &Config) -> Result<bool, UnknownDialect> {
        let dialect = toolgate_dialect::dialect(&config.gate.dialect)?;
        let mut gate = self.gate.write().unwrap_or_else(PoisonError::into_inner);
        let changed = gate.name() != dialect.name();
        *gate = dialect;
        Ok(changed)
    }

    /// The dialect `ctx`'s caller speaks. A call another node forwarded here
    /// ([`CallContext::forwarded_by`], from the key that node made for it) was read in its
    /// caller's dialect there and comes canonical: the default dialect, which leaves a canonical
    /// call as it is and its answer in toolgate's words, for that node to give its caller.
    pub(crate) fn of(&self, ctx: &CallContext) -> &'static Dialect {
        if ctx.forwarded_by.is_some() {
            return self.canonical;
        }
        match self.agents.get(&ctx.identity.agent) {
            Some(dialect) => dialect,
            None => *self.gate.read().unwrap_or_else(PoisonError::into_inner),
        }
    }

    /// The tools `ctx`'s caller sees, in its dialect, from the canonical tools it may see.
    pub(crate) fn present(&self, ctx: &CallContext, registry: &Registry, visible: Vec<ToolSpec>) -> Vec<ToolSpec> {
        let dialect = self.of(ctx);
        if dialect.is_default() {
            return visible;
        }
        let tagged: Vec<(ToolSpec, bool)> = visible
            .into_iter()
            .map(|spec| {
                let builtin = registry.resolve(&spec.name).is_some_and(|t| t.builtin);
                (spec, builtin)
            })
            .collect();
        dialect.present(&tagged)
    }
}
