//! Reloading a running gate's extensions: `[gate] dialect`, the `[tools]` policy and the custom and skill tools
//! are rebuilt from a new configuration and swapped in without a restart (`toolgate serve`
//! watches the files through `toolgate-watch`), and `[mcp.servers]` is applied to a started MCP
//! bridge (servers added, changed, switched or removed; [`Gate::reload_mcp`]). Everything else
//! in the configuration (sandbox, approvals, limits, hooks, agents, memory, web) is read once,
//! at start.
//!
//! A reload is all or nothing: the new policy and every new tool are built and checked first,
//! and only then put in force; on an error the gate keeps what it had. Calls already running
//! finish on the definitions they started with (they hold their tool), and the registry's
//! change makes MCP clients get `notifications/tools/list_changed`.

use std::sync::PoisonError;

use crate::config::Config;
use crate::{Gate, GateError};

/// What a reload put in force.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reloaded {
    /// The custom and skill tools now registered.
    pub tools: Vec<String>,
    /// Those that were registered before and are gone now.
    pub removed: Vec<String>,
    /// MCP servers stopped (removed, switched off or changed; their tools unregistered).
    pub mcp_stopped: Vec<String>,
    /// MCP servers started (added, switched on or changed; they connect in the background).
    pub mcp_started: Vec<String>,
}

impl Gate {
    /// Puts `config`'s `[tools]` policy and custom and skill tools in force (see the module's
    /// documentation). On an error nothing changes.
    pub fn reload(&self, config: &Config) -> Result<Reloaded, GateError> {
        let policy = toolgate_policy::Policy::new(config.tools.policy.clone())?;
        // Checked before anything changes; put in force with the policy.
        toolgate_dialect::dialect(&config.gate.dialect)?;
        let services = self.services();
        let tools =
            crate::extensions::custom_tools(self.workspace(), config, services.stores.as_ref(), &services.runner)?;
        let names: Vec<String> = tools.iter().map(|t| t.spec().name.clone()).collect();
        let mut current = self.custom_names().lock().unwrap_or_else(PoisonError::into_inner);
        services.registry.swap_dynamic(tools, &current)?;
        self.policy_stage().replace(policy, &config.tools.policy);
        if self.dialect_stage().replace(config)? {
            // MCP clients list the tools again, under the new names.
            services.registry.touch();
        }
        let removed = current.iter().filter(|n| !names.contains(n)).cloned().collect();
        current.clone_from(&names);
        drop(current);
        let (mcp_stopped, mcp_started) = self.reload_mcp(&config.mcp);
        Ok(Reloaded { tools: names, removed, mcp_stopped, mcp_started })
    }
}
