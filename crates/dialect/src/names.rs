//! Tables read from the dialect files at build time (`build.rs`), so that what every gate and
//! every plain call needs does not parse the files: the names the registry protects, and
//! whether a call in the default dialect could be a seed's spelling at all.

include!(concat!(env!("OUT_DIR"), "/names.rs"));

/// Whether the default dialect knows a seed tool called `name` (any case) that runs another
/// tool than `canonical`.
pub(crate) fn names_other_tool(name: &str, canonical: &str) -> bool {
    let lower = name.to_ascii_lowercase();
    let from = ALIAS_TOOLS.partition_point(|(n, _)| *n < lower.as_str());
    ALIAS_TOOLS[from..].iter().take_while(|(n, _)| *n == lower).any(|(_, c)| *c != canonical)
}

/// Whether some seed maps a parameter spelled `key` onto the canonical tool `canonical`.
pub(crate) fn is_alias_param(canonical: &str, key: &str) -> bool {
    ALIAS_PARAMS.binary_search(&(canonical, key)).is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_build_time_tables_match_the_parsed_files() {
        let mut protected: Vec<String> = crate::all()
            .iter()
            .flat_map(|d| {
                let tools = d.tools.iter().flat_map(|t| [t.name.clone(), t.canonical.clone()]);
                tools.chain(d.missing.iter().map(|(n, _)| n.clone()))
            })
            .collect();
        protected.sort();
        protected.dedup();
        assert_eq!(PROTECTED, protected.iter().map(String::as_str).collect::<Vec<_>>());
        // Sorted, as the lookups' binary search needs.
        assert!(ALIAS_TOOLS.is_sorted() && ALIAS_PARAMS.is_sorted());
        let [tools, params] = crate::default::indexed();
        let tools: Vec<(&str, &str)> = tools.iter().map(|(n, c)| (n.as_str(), c.as_str())).collect();
        assert_eq!(ALIAS_TOOLS, tools);
        assert!(!params.is_empty(), "the index maps some parameter");
        for (canonical, key) in &params {
            assert!(is_alias_param(canonical, key), "{canonical}.{key} is mapped but not in ALIAS_PARAMS");
        }
        // IronClaw's `echo` is toolgate's, its `message` a plain rename; Linggen's `Bash` is `exec`.
        assert!(!names_other_tool("echo", "echo") && names_other_tool("BASH", "bash"));
        assert!(!is_alias_param("echo", "message"));
    }
}
