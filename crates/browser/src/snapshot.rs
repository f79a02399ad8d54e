//! Snapshots: the accessibility tree rendered one line per meaningful node, with refs.

use std::collections::HashMap;

/// Where a ref points: a node of one document.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RefTarget {
    pub(crate) frame_id: String,
    pub(crate) loader_id: String,
    pub(crate) backend_id: i64,
}

/// A tab's refs: `eN` for each (document, backend node id) a snapshot showed, kept across
/// snapshots so the same node keeps its ref.
#[derive(Debug, Default)]
pub(crate) struct Refs {
    by_ref: HashMap<String, RefTarget>,
    by_node: HashMap<(String, i64), String>,
    next: u64,
}

impl Refs {
    /// The ref of a node, minted on first sight.
    pub(crate) fn mint(&mut self, target: RefTarget) -> String {
        let key = (target.loader_id.clone(), target.backend_id);
        if let Some(r) = self.by_node.get(&key) {
            return r.clone();
        }
        self.next += 1;
        let r = format!("e{}", self.next);
        self.by_node.insert(key, r.clone());
        self.by_ref.insert(r.clone(), target);
        r
    }

    pub(crate) fn get(&self, r: &str) -> Option<&RefTarget> {
        self.by_ref.get(r)
    }
}
