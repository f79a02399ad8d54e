//! The compiled policy: visibility (the layered pipeline) and per-call decisions.

use std::collections::{BTreeMap, BTreeSet};

use toolgate_core::Touches;

use crate::config::{AgentPolicy, ChannelPolicy, PolicyConfig, Profile, ProviderPolicy};
use crate::error::{PolicyError, PolicyWarning, WarningKind};
use crate::names::{BUILTIN_GROUPS, Groups, NameMatcher, group_contains, parse_name};
use crate::rules::{ArgRule, Mode, is_arg_rule};
use crate::trace::{Effect, Stage, Trace};
use crate::{Caller, Decision, Parent, ToolRef, Verdict, Visibility};
// ---------------------------------------------------------------------------------------------
// Compiled form

#[derive(Debug, Clone)]
struct Entry {
    text: String,
    matcher: NameMatcher,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum LayerKind {
    Global,
    Provider,
    Agent,
    AgentProvider,
    Channel,
}

impl LayerKind {
    fn allow_stage(self) -> Stage {
        match self {
            LayerKind::Global => Stage::Allow,
            LayerKind::Provider => Stage::ProviderAllow,
            LayerKind::Agent => Stage::AgentAllow,
            LayerKind::AgentProvider => Stage::AgentProviderAllow,
            LayerKind::Channel => Stage::ChannelAllow,
        }
    }
}

/// One layer of lists (global, a provider, an agent, an agent's provider, a channel).
#[derive(Debug, Clone)]
struct Layer {
    kind: LayerKind,
    /// The TOML table, e.g. `[tools.agents.coder]`.
    table: String,
    profile: Option<Profile>,
    allow: Vec<Entry>,
    also_allow: Vec<Entry>,
    deny: Vec<Entry>,
    ask: Vec<Entry>,
    /// Argument rules from `allow` and `alsoAllow`, with the list each came from.
    allow_rules: Vec<(ArgRule, &'static str)>,
    ask_rules: Vec<ArgRule>,
    deny_rules: Vec<ArgRule>,
}

struct Lists<'c> {
    profile: Option<Profile>,
    allow: &'c [String],
    also_allow: &'c [String],
    deny: &'c [String],
    ask: &'c [String],
}

impl Layer {
    fn compile(kind: LayerKind, table: String, lists: Lists<'_>) -> Result<Layer, PolicyError> {
        let mut layer = Layer {
            kind,
            table,
            profile: lists.profile,
            allow: Vec::new(),
            also_allow: Vec::new(),
            deny: Vec::new(),
            ask: Vec::new(),
            allow_rules: Vec::new(),
            ask_rules: Vec::new(),
            deny_rules: Vec::new(),
        };
        for (key, entries) in
            [("allow", lists.allow), ("alsoAllow", lists.also_allow), ("deny", lists.deny), ("ask", lists.ask)]
        {
            for text in entries {
                let list = format!("{}.{key}", layer.table);
                let err =
                    |reason: String| PolicyError::InvalidEntry { list: list.clone(), entry: text.clone(), reason };
                if is_arg_rule(text) {
                    let rule = ArgRule::parse(text).map_err(err)?;
                    match key {
                        "allow" | "alsoAllow" => layer.allow_rules.push((rule, key)),
                        "deny" => layer.deny_rules.push(rule),
                        _ => layer.ask_rules.push(rule),
                    }
                } else {
                    let entry = Entry { text: text.trim().to_owned(), matcher: parse_name(text).map_err(err)? };
                    match key {
                        "allow" => layer.allow.push(entry),
                        "alsoAllow" => layer.also_allow.push(entry),
                        "deny" => layer.deny.push(entry),
                        _ => layer.ask.push(entry),
                    }
                }
            }
        }
        Ok(layer)
    }

    fn list(&self, key: &str) -> String {
        format!("{}.{key}", self.table)
    }

    /// Whether the allow list narrows visibility (it names at least one tool or group).
    fn restricts(&self) -> bool {
        !self.allow.is_empty()
    }

    /// The allow-list entry (or allow argument rule) naming `tool`.
    fn allow_match(&self, tool: ToolRef<'_>, groups: &Groups) -> Option<&str> {
        if let Some(e) = self.allow.iter().find(|e| e.matcher.matches(tool, groups)) {
            return Some(&e.text);
        }
        self.allow_rules
            .iter()
            .find(|(r, key)| *key == "allow" && r.tool_matches(tool, groups))
            .map(|(r, _)| r.text.as_str())
    }

    fn also_allow_match(&self, tool: ToolRef<'_>, groups: &Groups) -> Option<&str> {
        if let Some(e) = self.also_allow.iter().find(|e| e.matcher.matches(tool, groups)) {
            return Some(&e.text);
        }
        self.allow_rules
            .iter()
            .find(|(r, key)| *key == "alsoAllow" && r.tool_matches(tool, groups))
            .map(|(r, _)| r.text.as_str())
    }
}

/// A compiled policy: build it once from a [`PolicyConfig`] with [`Policy::new`], then ask it
/// [`Policy::visible`] when listing tools and [`Policy::decide`] before every call.
#[derive(Debug, Clone)]
pub struct Policy {
    profile: Option<Profile>,
    global: Layer,
    providers: Vec<(String, Layer)>,
    agents: BTreeMap<String, (Layer, Vec<(String, Layer)>)>,
    channels: BTreeMap<String, Layer>,
    subagent_deny: Vec<Entry>,
    leaf_deny: Vec<Entry>,
    subagent_lists_configured: (bool, bool),
    max_depth: u32,
    groups: Groups,
    warnings: Vec<PolicyWarning>,
}

fn provider_layer(kind: LayerKind, table: String, p: &ProviderPolicy) -> Result<Layer, PolicyError> {
    Layer::compile(
        kind,
        table,
        Lists { profile: p.profile, allow: &p.allow, also_allow: &p.also_allow, deny: &p.deny, ask: &p.ask },
    )
}

fn agent_layer(table: String, a: &AgentPolicy) -> Result<Layer, PolicyError> {
    Layer::compile(
        LayerKind::Agent,
        table,
        Lists { profile: None, allow: &a.allow, also_allow: &a.also_allow, deny: &a.deny, ask: &a.ask },
    )
}

fn channel_layer(table: String, c: &ChannelPolicy) -> Result<Layer, PolicyError> {
    Layer::compile(
        LayerKind::Channel,
        table,
        Lists { profile: None, allow: &c.allow, also_allow: &c.also_allow, deny: &c.deny, ask: &c.ask },
    )
}

/// A TOML key, quoted when it is not a bare key.
fn key(name: &str) -> String {
    if !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-') {
        name.to_owned()
    } else {
        format!("{name:?}")
    }
}

fn name_list(list: &str, entries: &[String]) -> Result<Vec<Entry>, PolicyError> {
    entries
        .iter()
        .map(|text| {
            let reason = if is_arg_rule(text) {
                Err("this list takes tool names, wildcards and groups, not argument rules".to_owned())
            } else {
                parse_name(text)
            };
            reason
                .map(|matcher| Entry { text: text.trim().to_owned(), matcher })
                .map_err(|reason| PolicyError::InvalidEntry { list: list.to_owned(), entry: text.clone(), reason })
        })
        .collect()
}

fn compile_groups(cfg: &BTreeMap<String, Vec<String>>) -> Result<Groups, PolicyError> {
    let mut groups = Groups::new();
    for (name, members) in cfg {
        let invalid = |reason: &str| PolicyError::InvalidGroup { group: name.clone(), reason: reason.to_owned() };
        if BUILTIN_GROUPS.contains(&name.as_str()) || name.starts_with("mcp:") {
            return Err(invalid(
                "this group is built in (tools declare it in their spec); choose another name for a custom group",
            ));
        }
        if parse_name(&format!("group:{name}")).is_err() {
            return Err(invalid("a group name uses letters, digits, `_`, `-`, `.` or `:`"));
        }
        let entries = name_list(&format!("[tools.groups].{}", key(name)), members)?;
        groups.insert(name.clone(), entries.into_iter().map(|e| e.matcher).collect());
    }
    // Reject cycles so that membership checks always terminate.
    fn visit<'g>(
        name: &'g str,
        groups: &'g Groups,
        path: &mut Vec<&'g str>,
        done: &mut BTreeSet<&'g str>,
    ) -> Result<(), String> {
        if done.contains(name) {
            return Ok(());
        }
        if path.contains(&name) {
            path.push(name);
            return Err(path.join(" -> "));
        }
        path.push(name);
        for m in groups.get(name).into_iter().flatten() {
            if let NameMatcher::Group(g) = m
                && groups.contains_key(g)
            {
                visit(g, groups, path, done)?;
            }
        }
        path.pop();
        done.insert(name);
        Ok(())
    }
    let mut done = BTreeSet::new();
    for name in groups.keys() {
        visit(name, &groups, &mut Vec::new(), &mut done).map_err(|cycle| PolicyError::InvalidGroup {
            group: name.clone(),
            reason: format!("groups include each other in a cycle ({cycle})"),
        })?;
    }
    Ok(groups)
}

impl Policy {
    /// Compiles a configuration: parses every entry and rule, builds the globs. Fails on the
    /// first malformed entry, naming it. Unknown tool names are kept (they match once such a
    /// tool appears) and reported by [`Policy::warnings`].
    pub fn new(cfg: PolicyConfig) -> Result<Policy, PolicyError> {
        let groups = compile_groups(&cfg.groups)?;
        let global = Layer::compile(
            LayerKind::Global,
            "[tools]".to_owned(),
            Lists { profile: None, allow: &cfg.allow, also_allow: &cfg.also_allow, deny: &cfg.deny, ask: &cfg.ask },
        )?;
        let mut providers = Vec::new();
        for (name, p) in &cfg.by_provider {
            providers.push((
                name.clone(),
                provider_layer(LayerKind::Provider, format!("[tools.byProvider.{}]", key(name)), p)?,
            ));
        }
        let mut agents = BTreeMap::new();
        for (name, a) in &cfg.agents {
            let table = format!("[tools.agents.{}]", key(name));
            let layer = agent_layer(table, a)?;
            let mut by_provider = Vec::new();
            for (provider, p) in &a.by_provider {
                let table = format!("[tools.agents.{}.byProvider.{}]", key(name), key(provider));
                by_provider.push((provider.clone(), provider_layer(LayerKind::AgentProvider, table, p)?));
            }
            agents.insert(name.clone(), (layer, by_provider));
        }
        let mut channels = BTreeMap::new();
        for (name, c) in &cfg.by_channel {
            channels.insert(name.clone(), channel_layer(format!("[tools.byChannel.{}]", key(name)), c)?);
        }
        let defaults = crate::config::SubagentPolicy::default();
        let subagent_deny = name_list("[tools.subagents].deny", &cfg.subagents.deny)?;
        let leaf_deny = name_list("[tools.subagents].leafDeny", &cfg.subagents.leaf_deny)?;
        let mut policy = Policy {
            profile: cfg.profile,
            global,
            providers,
            agents,
            channels,
            subagent_deny,
            leaf_deny,
            subagent_lists_configured: (
                cfg.subagents.deny != defaults.deny,
                cfg.subagents.leaf_deny != defaults.leaf_deny,
            ),
            max_depth: cfg.subagents.max_depth,
            groups,
            warnings: Vec::new(),
        };
        policy.warnings = policy.load_warnings();
        Ok(policy)
    }

    /// Entries accepted but probably wrong: unknown tool names and groups, allow lists that
    /// name only unknown tools. Computed once, by [`Policy::new`].
    pub fn warnings(&self) -> &[PolicyWarning] {
        &self.warnings
    }

    /// The configured profile, if any (`None` behaves as [`Profile::Full`]).
    pub fn profile(&self) -> Option<Profile> {
        self.profile
    }

    /// The maximum sub-agent depth.
    pub fn max_depth(&self) -> u32 {
        self.max_depth
    }

    fn all_layers(&self) -> impl Iterator<Item = &Layer> {
        std::iter::once(&self.global)
            .chain(self.providers.iter().map(|(_, l)| l))
            .chain(self.agents.values().flat_map(|(l, ps)| std::iter::once(l).chain(ps.iter().map(|(_, l)| l))))
            .chain(self.channels.values())
    }

    /// Every configured name entry and rule tool, with its list (defaults of the subagent lists
    /// excepted), for warnings.
    fn entries_for_warnings(&self) -> Vec<(String, &str, Option<&NameMatcher>, Option<&ArgRule>)> {
        let mut out = Vec::new();
        for layer in self.all_layers() {
            for (key, list) in
                [("allow", &layer.allow), ("alsoAllow", &layer.also_allow), ("deny", &layer.deny), ("ask", &layer.ask)]
            {
                for e in list {
                    out.push((layer.list(key), e.text.as_str(), Some(&e.matcher), None));
                }
            }
            for (r, key) in &layer.allow_rules {
                out.push((layer.list(key), r.text.as_str(), r.named(), Some(r)));
            }
            for r in &layer.deny_rules {
                out.push((layer.list("deny"), r.text.as_str(), r.named(), Some(r)));
            }
            for r in &layer.ask_rules {
                out.push((layer.list("ask"), r.text.as_str(), r.named(), Some(r)));
            }
        }
        if self.subagent_lists_configured.0 {
            for e in &self.subagent_deny {
                out.push(("[tools.subagents].deny".to_owned(), e.text.as_str(), Some(&e.matcher), None));
            }
        }
        if self.subagent_lists_configured.1 {
            for e in &self.leaf_deny {
                out.push(("[tools.subagents].leafDeny".to_owned(), e.text.as_str(), Some(&e.matcher), None));
            }
        }
        out
    }

    fn load_warnings(&self) -> Vec<PolicyWarning> {
        let mut warnings = Vec::new();
        for (list, entry, matcher, _) in self.entries_for_warnings() {
            let Some(m) = matcher else { continue };
            if m.unknown_at_load(&self.groups) {
                let kind = if matches!(m, NameMatcher::Group(_)) {
                    WarningKind::UnknownGroup
                } else {
                    WarningKind::UnknownTool
                };
                let entry = match m {
                    NameMatcher::Exact(name) if entry.contains('(') => name.clone(),
                    _ => entry.to_owned(),
                };
                warnings.push(PolicyWarning { list, entry, kind });
            }
        }
        for layer in self.all_layers() {
            let all_unknown = layer.allow.iter().all(|e| e.matcher.unknown_at_load(&self.groups))
                && layer
                    .allow_rules
                    .iter()
                    .filter(|(_, k)| *k == "allow")
                    .all(|(r, _)| r.named().is_some_and(|m| m.unknown_at_load(&self.groups)));
            if layer.restricts() && all_unknown {
                warnings.push(PolicyWarning {
                    list: layer.list("allow"),
                    entry: String::new(),
                    kind: WarningKind::AllowMatchesNothing,
                });
            }
        }
        warnings
    }

    /// Entries that match none of `tools` (call it once the registry is loaded, and again when
    /// MCP servers come and go). The entries stay in force either way.
    pub fn known_tools(&self, tools: &[ToolRef<'_>]) -> Vec<PolicyWarning> {
        let mut warnings = Vec::new();
        for (list, entry, matcher, rule) in self.entries_for_warnings() {
            let hit = match (matcher, rule) {
                (_, Some(rule)) => tools.iter().any(|t| rule.tool_matches(*t, &self.groups)),
                (Some(m), None) => tools.iter().any(|t| m.matches(*t, &self.groups)),
                (None, None) => true,
            };
            if !hit {
                warnings.push(PolicyWarning { list, entry: entry.to_owned(), kind: WarningKind::NoRegisteredTool });
            }
        }
        warnings
    }

    /// The layers that apply to a caller, in pipeline order: global, providers, agent,
    /// agent + provider, channel.
    fn layers(&self, caller: &Caller<'_>) -> Vec<&Layer> {
        let provider_matches = |key: &str| {
            caller.provider.is_some_and(|p| {
                let (p, key) = (p.to_ascii_lowercase(), key.to_ascii_lowercase());
                p == key || p.strip_prefix(key.as_str()).is_some_and(|rest| rest.starts_with('/'))
            })
        };
        let mut layers = vec![&self.global];
        layers.extend(self.providers.iter().filter(|(k, _)| provider_matches(k)).map(|(_, l)| l));
        if let Some((agent, by_provider)) = self.agents.get(caller.agent) {
            layers.push(agent);
            layers.extend(by_provider.iter().filter(|(k, _)| provider_matches(k)).map(|(_, l)| l));
        }
        if let Some(channel) = caller.channel.and_then(|c| self.channels.get(c)) {
            layers.push(channel);
        }
        layers
    }

    /// Whether `caller` may see `tool`, with the trace of every step.
    pub fn visible(&self, tool: ToolRef<'_>, caller: &Caller<'_>) -> Visibility {
        let mut trace = Trace::default();
        let (visible, rule) = self.visible_into(tool, caller, 0, &mut trace);
        Visibility { visible, rule, trace }
    }

    /// The names of the tools in `tools` that `caller` may see.
    pub fn visible_tools<'t>(&self, tools: &[ToolRef<'t>], caller: &Caller<'_>) -> Vec<&'t str> {
        tools.iter().filter(|t| self.visible_into(**t, caller, 0, &mut Trace::default()).0).map(|t| t.name).collect()
    }

    fn visible_into(
        &self,
        tool: ToolRef<'_>,
        caller: &Caller<'_>,
        level: u32,
        trace: &mut Trace,
    ) -> (bool, Option<String>) {
        let name = tool.name;
        let depth = caller.effective_depth();
        if depth > self.max_depth {
            trace.push(
                level,
                Stage::Depth,
                format!("{} > maxDepth {} ([tools.subagents].maxDepth): no tools at this depth", depth, self.max_depth),
                Effect::Removed,
            );
            return (false, Some(format!("depth {} beyond [tools.subagents].maxDepth {}", depth, self.max_depth)));
        }
        let mut visible = true;
        let mut rule: Option<String> = None;
        let hide = |visible: &mut bool, rule: &mut Option<String>, why: String| {
            if *visible {
                *visible = false;
                *rule = Some(why);
            }
        };

        // Step 1: the global profile.
        match self.profile {
            None => trace.push(
                level,
                Stage::Profile,
                format!(
                    "full (no profile configured; approvals and the sandbox protect a default setup): includes `{name}`"
                ),
                Effect::Kept,
            ),
            Some(p) => {
                self.profile_step(p, "[tools].profile", Stage::Profile, tool, level, trace, &mut visible, &mut rule)
            }
        }
        let layers = self.layers(caller);
        // Step 2: provider profiles (global and per-agent), each narrowing further.
        for layer in &layers {
            if let (Some(p), LayerKind::Provider | LayerKind::AgentProvider) = (layer.profile, layer.kind) {
                let list = layer.list("profile");
                self.profile_step(p, &list, Stage::ProviderProfile, tool, level, trace, &mut visible, &mut rule);
            }
        }
        // Steps 3 to 7: allow lists, each an intersection.
        for layer in &layers {
            if !layer.restricts() {
                continue;
            }
            let stage = layer.kind.allow_stage();
            let list = layer.list("allow");
            match layer.allow_match(tool, &self.groups) {
                Some(entry) if visible => {
                    trace.push(level, stage, format!("{list}: `{entry}` names `{name}`"), Effect::Kept)
                }
                Some(entry) => trace.push(
                    level,
                    stage,
                    format!("{list}: `{entry}` names `{name}` (already removed)"),
                    Effect::Unchanged,
                ),
                None => {
                    let effect = if visible { Effect::Removed } else { Effect::Unchanged };
                    trace.push(level, stage, format!("{list} does not name `{name}`"), effect);
                    hide(&mut visible, &mut rule, format!("{list} (it does not name `{name}`)"));
                }
            }
        }
        // Deny lists: global, provider, agent, agent + provider, channel. Final.
        let mut denied = false;
        for layer in &layers {
            if let Some(e) = layer.deny.iter().find(|e| e.matcher.matches(tool, &self.groups)) {
                let list = layer.list("deny");
                let effect = if visible { Effect::Removed } else { Effect::Unchanged };
                trace.push(level, Stage::Deny, format!("{list}: `{}` names `{name}`", e.text), effect);
                if !denied {
                    visible = false;
                    rule = Some(format!("`{}` in {list}", e.text));
                    denied = true;
                }
            }
        }
        // alsoAllow: additive, but never over a deny.
        for layer in &layers {
            if let Some(entry) = layer.also_allow_match(tool, &self.groups) {
                let list = layer.list("alsoAllow");
                let (detail, effect) = if denied {
                    (
                        format!("{list}: `{entry}` names `{name}`, but a deny list removed it (deny beats allow)"),
                        Effect::Unchanged,
                    )
                } else if visible {
                    (format!("{list}: `{entry}` names `{name}` (already visible)"), Effect::Unchanged)
                } else {
                    visible = true;
                    rule = None;
                    (format!("{list}: `{entry}` names `{name}`"), Effect::Added)
                };
                trace.push(level, Stage::AlsoAllow, detail, effect);
            }
        }
        // Subagent lists: no allow can re-open them.
        if depth >= 1 {
            let list = if self.subagent_lists_configured.0 {
                "[tools.subagents].deny"
            } else {
                "the default subagent deny list"
            };
            match self.subagent_deny.iter().find(|e| e.matcher.matches(tool, &self.groups)) {
                // The caller's own configured set (a research sub-agent's) passes this list only.
                Some(e) if caller.subagent_deny_exempt.iter().any(|t| t == name) => trace.push(
                    level,
                    Stage::SubagentDeny,
                    format!(
                        "depth {}: {list}: `{}` names `{name}`, but this sub-agent's own tool set \
                         ([agents_defaults] research_tools) lists it",
                        depth, e.text
                    ),
                    if visible { Effect::Kept } else { Effect::Unchanged },
                ),
                Some(e) => {
                    let effect = if visible { Effect::Removed } else { Effect::Unchanged };
                    trace.push(
                        level,
                        Stage::SubagentDeny,
                        format!("depth {}: {list}: `{}` names `{name}`", depth, e.text),
                        effect,
                    );
                    if visible {
                        visible = false;
                        rule = Some(format!("`{}` in {list}", e.text));
                    }
                }
                None => trace.push(
                    level,
                    Stage::SubagentDeny,
                    format!("depth {}: {list} does not name `{name}`", depth),
                    if visible { Effect::Kept } else { Effect::Unchanged },
                ),
            }
            if depth >= self.max_depth {
                let list = if self.subagent_lists_configured.1 {
                    "[tools.subagents].leafDeny"
                } else {
                    "the default leaf deny list"
                };
                match self.leaf_deny.iter().find(|e| e.matcher.matches(tool, &self.groups)) {
                    Some(e) => {
                        let effect = if visible { Effect::Removed } else { Effect::Unchanged };
                        trace.push(
                            level,
                            Stage::LeafDeny,
                            format!(
                                "depth {} is the maximum ({}): {list}: `{}` names `{name}`",
                                depth, self.max_depth, e.text
                            ),
                            effect,
                        );
                        if visible {
                            visible = false;
                            rule = Some(format!("`{}` in {list}", e.text));
                        }
                    }
                    None => trace.push(
                        level,
                        Stage::LeafDeny,
                        format!("depth {} is the maximum ({}): {list} does not name `{name}`", depth, self.max_depth),
                        if visible { Effect::Kept } else { Effect::Unchanged },
                    ),
                }
            }
        }
        // The parent: a sub-agent never sees what its parent does not.
        match caller.parent {
            Some(Parent::Caller(parent)) => {
                trace.push(
                    level,
                    Stage::Parent,
                    format!("checking parent agent `{}` (depth {})", parent.agent, parent.depth),
                    Effect::Unchanged,
                );
                let (parent_visible, parent_rule) = self.visible_into(tool, parent, level + 1, trace);
                if !parent_visible {
                    let why = parent_rule.map_or_else(String::new, |r| format!(": {r}"));
                    let effect = if visible { Effect::Removed } else { Effect::Unchanged };
                    trace.push(
                        level,
                        Stage::Parent,
                        format!("parent agent `{}` cannot see `{name}`{why}", parent.agent),
                        effect,
                    );
                    hide(&mut visible, &mut rule, format!("parent agent `{}`{why}", parent.agent));
                }
            }
            Some(Parent::Tools(set)) => {
                let has = set.contains(name);
                let effect = match (has, visible) {
                    (true, true) => Effect::Kept,
                    (false, true) => Effect::Removed,
                    _ => Effect::Unchanged,
                };
                let verb = if has { "includes" } else { "does not include" };
                trace.push(level, Stage::Parent, format!("the parent's tool set {verb} `{name}`"), effect);
                if !has {
                    hide(&mut visible, &mut rule, "the parent's tool set".to_owned());
                }
            }
            None => {}
        }
        (visible, rule)
    }

    #[allow(clippy::too_many_arguments)]
    fn profile_step(
        &self,
        profile: Profile,
        list: &str,
        stage: Stage,
        tool: ToolRef<'_>,
        level: u32,
        trace: &mut Trace,
        visible: &mut bool,
        rule: &mut Option<String>,
    ) {
        let name = tool.name;
        let hit = profile.entries().iter().find(|e| match e.strip_prefix("group:") {
            Some(group) => group_contains(group, tool, &self.groups),
            None => **e == "*" || **e == name,
        });
        match hit {
            Some(entry) => {
                let effect = if *visible { Effect::Kept } else { Effect::Unchanged };
                trace.push(level, stage, format!("{profile} (from {list}): `{entry}` includes `{name}`"), effect);
            }
            None => {
                let effect = if *visible { Effect::Removed } else { Effect::Unchanged };
                trace.push(level, stage, format!("{profile} (from {list}) does not include `{name}`"), effect);
                if *visible {
                    *visible = false;
                    *rule = Some(format!("profile `{profile}` ({list})"));
                }
            }
        }
    }

    /// Decides one call: hidden tools are denied; then argument rules, deny → ask → allow,
    /// first match wins; opaque touches never match an allow rule; a sub-agent's verdict is
    /// never more permissive than its parent's.
    pub fn decide(&self, tool: ToolRef<'_>, touches: &Touches, caller: &Caller<'_>) -> Decision {
        let mut trace = Trace::default();
        let (visible, rule) = self.visible_into(tool, caller, 0, &mut trace);
        if !visible {
            let why = rule.as_deref().unwrap_or("the policy");
            let reason = format!(
                "tool `{}` is not available to agent `{}`: hidden by {why}; run `toolgate policy explain {}` for the steps",
                tool.name, caller.agent, tool.name
            );
            return Decision { verdict: Verdict::Deny, rule, reason, trace };
        }
        let (verdict, rule, reason) = self.rules_into(tool, touches, caller, 0, &mut trace);
        Decision { verdict, rule, reason, trace }
    }

    fn rules_into(
        &self,
        tool: ToolRef<'_>,
        touches: &Touches,
        caller: &Caller<'_>,
        level: u32,
        trace: &mut Trace,
    ) -> (Verdict, Option<String>, String) {
        let own = self.own_rules(tool, touches, caller, level, trace);
        if own.0 == Verdict::Deny {
            return own;
        }
        let Some(Parent::Caller(parent)) = caller.parent else { return own };
        trace.push(
            level,
            Stage::Parent,
            format!("checking parent agent `{}`'s rules", parent.agent),
            Effect::Unchanged,
        );
        let (pv, prule, preason) = self.rules_into(tool, touches, parent, level + 1, trace);
        if pv.rank() > own.0.rank() {
            trace.push(
                level,
                Stage::Parent,
                format!("parent agent `{}` says {pv}, stricter than {}", parent.agent, own.0),
                pv.effect(),
            );
            let reason = format!("parent agent `{}`: {preason}", parent.agent);
            return (pv, prule.map(|r| format!("{r} (parent agent `{}`)", parent.agent)), reason);
        }
        own
    }

    fn own_rules(
        &self,
        tool: ToolRef<'_>,
        touches: &Touches,
        caller: &Caller<'_>,
        level: u32,
        trace: &mut Trace,
    ) -> (Verdict, Option<String>, String) {
        let layers = self.layers(caller);
        let g = &self.groups;
        let walked = walker_reads(tool, touches);
        let restrict_view = walked.as_ref().unwrap_or(touches);
        for layer in &layers {
            for r in &layer.deny_rules {
                if r.applies_to(tool, Mode::Restrict, g)
                    && let Some(what) = r.matches(restrict_view, Mode::Restrict)
                {
                    let list = layer.list("deny");
                    trace.push(
                        level,
                        Stage::DenyRule,
                        format!("`{}` from {list} matched `{what}`", r.text),
                        Effect::Deny,
                    );
                    let reason = format!("denied by rule `{}` in {list} (it matched `{what}`)", r.text);
                    return (Verdict::Deny, Some(format!("`{}` in {list}", r.text)), reason);
                }
            }
        }
        if touches.opaque {
            trace.push(
                level,
                Stage::Opaque,
                "the call could not be fully analyzed, so no allow rule can match it",
                Effect::Ask,
            );
            let reason = "the command could not be fully analyzed, so it needs approval".to_owned();
            return (Verdict::Ask, None, reason);
        }
        for layer in &layers {
            if let Some(e) = layer.ask.iter().find(|e| e.matcher.matches(tool, g)) {
                let list = layer.list("ask");
                trace.push(
                    level,
                    Stage::AskRule,
                    format!("`{}` from {list} names `{}`", e.text, tool.name),
                    Effect::Ask,
                );
                let reason = format!("every call of `{}` needs approval (`{}` in {list})", tool.name, e.text);
                return (Verdict::Ask, Some(format!("`{}` in {list}", e.text)), reason);
            }
            for r in &layer.ask_rules {
                if r.applies_to(tool, Mode::Restrict, g)
                    && let Some(what) = r.matches(restrict_view, Mode::Restrict)
                {
                    let list = layer.list("ask");
                    trace.push(
                        level,
                        Stage::AskRule,
                        format!("`{}` from {list} matched `{what}`", r.text),
                        Effect::Ask,
                    );
                    let reason = format!("rule `{}` in {list} asks for approval (it matched `{what}`)", r.text);
                    return (Verdict::Ask, Some(format!("`{}` in {list}", r.text)), reason);
                }
            }
        }
        for layer in &layers {
            for (r, key) in &layer.allow_rules {
                if r.applies_to(tool, Mode::Allow, g)
                    && let Some(what) = r.matches(touches, Mode::Allow)
                {
                    let list = layer.list(key);
                    trace.push(
                        level,
                        Stage::AllowRule,
                        format!("`{}` from {list} matched `{what}`", r.text),
                        Effect::Allow,
                    );
                    let reason = format!("pre-approved by rule `{}` in {list}", r.text);
                    return (Verdict::Allow, Some(format!("`{}` in {list}", r.text)), reason);
                }
            }
        }
        trace.push(
            level,
            Stage::NoRule,
            format!("no argument rule matched this call of `{}`", tool.name),
            Effect::ToolDefault,
        );
        let reason = format!("no policy rule decided; `{}`'s own approval requirement applies", tool.name);
        (Verdict::ToolDefault, None, reason)
    }
}

/// Tools that read a directory recursively when given one.
const WALKERS: &[&str] = &["grep", "glob"];

/// For deny and ask rules: a walker's literal read that names a directory (no `.` in its last
/// component, or the workspace root) is read as everything under it (`src` → `src/**`), so that
/// `read(*.env)` sees `grep path=src`. `None` when nothing changes.
fn walker_reads(tool: ToolRef<'_>, touches: &Touches) -> Option<Touches> {
    if !WALKERS.contains(&tool.name) {
        return None;
    }
    let is_dir = |p: &str| {
        let p = p.trim_end_matches('/');
        let last = p.rsplit('/').next().unwrap_or("");
        !p.contains(['*', '?', '[', '{']) && (last.is_empty() || last == "." || !last.contains('.'))
    };
    if !touches.reads.iter().any(|p| is_dir(p)) {
        return None;
    }
    let mut walked = touches.clone();
    for p in &mut walked.reads {
        if is_dir(p) {
            let dir = p.trim_end_matches('/');
            *p = if dir.is_empty() || dir == "." { "**".to_owned() } else { format!("{dir}/**") };
        }
    }
    Some(walked)
}
