//! Snapshots: the accessibility tree (`Accessibility.getFullAXTree`, every frame) rendered one
//! line per meaningful node, `- role "name" [ref=eN]`, indented by depth.
//!
//! A ref names one node of one document: it is minted for (the frame's loader id, the node's
//! backend DOM id) and kept for the tab's life, so the same node has the same ref in every
//! snapshot, and a ref whose document was replaced is known to be stale.

use std::collections::HashMap;
use std::fmt::Write as _;

use serde_json::{Value, json};

use crate::error::BrowserError;
use crate::page::Tab;

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

/// Most refs one tab keeps: a page that keeps making nodes cannot grow the table without end.
const MAX_REFS: usize = 200_000;

impl Refs {
    /// The ref of a node, minted on first sight.
    pub(crate) fn mint(&mut self, target: RefTarget) -> String {
        let key = (target.loader_id.clone(), target.backend_id);
        if let Some(r) = self.by_node.get(&key) {
            return r.clone();
        }
        if self.by_ref.len() >= MAX_REFS {
            // Old documents' refs go first; they are stale anyway.
            let live: std::collections::HashSet<String> = [target.loader_id.clone()].into();
            self.by_ref.retain(|_, t| live.contains(&t.loader_id));
            self.by_node.retain(|(loader, _), _| live.contains(loader));
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

/// Roles whose node is shown only through its children.
const PASS_THROUGH: &[&str] = &[
    "none",
    "generic",
    "presentation",
    "InlineTextBox",
    "LineBreak",
    "RootWebArea",
    "WebArea",
    "LayoutTable",
    "ListMarker",
];

/// One frame of the page.
#[derive(Debug, Clone)]
pub(crate) struct Frame {
    pub(crate) id: String,
    pub(crate) loader_id: String,
    /// The backend node id of the `<iframe>` that holds it (none for the main frame).
    owner: Option<i64>,
}

/// The frames of the tab, main frame first.
pub(crate) async fn frames(tab: &Tab) -> Result<Vec<Frame>, BrowserError> {
    let tree = tab.call("Page.getFrameTree", json!({})).await?;
    let mut out = Vec::new();
    let mut stack = vec![&tree["frameTree"]];
    while let Some(node) = stack.pop() {
        let frame = &node["frame"];
        let id = frame["id"].as_str().unwrap_or_default().to_owned();
        let owner = if frame["parentId"].is_null() {
            None
        } else {
            tab.call("DOM.getFrameOwner", json!({"frameId": id})).await.ok().and_then(|o| o["backendNodeId"].as_i64())
        };
        out.push(Frame { id, loader_id: frame["loaderId"].as_str().unwrap_or_default().to_owned(), owner });
        if let Some(children) = node["childFrames"].as_array() {
            // At most 50 frames: a page of nested frames cannot make a snapshot endless.
            for child in children.iter().rev().take(50usize.saturating_sub(out.len())) {
                stack.push(child);
            }
        }
    }
    Ok(out)
}

/// What to render.
#[derive(Debug, Clone, Default)]
pub(crate) struct Options {
    /// Most levels below the start.
    pub(crate) depth: Option<usize>,
    /// Start at this ref's node instead of the page.
    pub(crate) root: Option<String>,
}

struct Tree {
    nodes: HashMap<String, Value>,
    root: Option<String>,
    frame: Frame,
}

/// Renders the tab's accessibility tree.
pub(crate) async fn render(tab: &Tab, options: &Options) -> Result<String, BrowserError> {
    let frames = frames(tab).await?;
    let mut trees = Vec::new();
    for frame in &frames {
        let params = if frame.owner.is_none() { json!({}) } else { json!({"frameId": frame.id}) };
        let Ok(ax) = tab.call("Accessibility.getFullAXTree", params).await else { continue };
        let mut nodes = HashMap::new();
        let mut root = None;
        for node in ax["nodes"].as_array().into_iter().flatten() {
            let id = node["nodeId"].as_str().unwrap_or_default().to_owned();
            if root.is_none() && node["parentId"].is_null() {
                root = Some(id.clone());
            }
            nodes.insert(id, node.clone());
        }
        trees.push(Tree { nodes, root, frame: frame.clone() });
    }
    let Some(main) = trees.first() else {
        return Ok("(the page has no accessibility tree yet)".to_owned());
    };
    let mut out = String::new();
    let mut refs = tab.refs.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    let mut ctx = Render { trees: &trees, refs: &mut refs, out: &mut out, max_depth: options.depth, lines: 0 };
    match &options.root {
        None => {
            if let Some(root) = &main.root {
                ctx.node(0, root, 0, None);
            }
        }
        Some(r) => {
            let target = ctx.refs.get(r).cloned().ok_or_else(|| BrowserError::UnknownRef(r.clone()))?;
            let (tree, id) = trees
                .iter()
                .enumerate()
                .find_map(|(i, t)| {
                    (t.frame.id == target.frame_id && t.frame.loader_id == target.loader_id)
                        .then(|| {
                            t.nodes
                                .iter()
                                .find(|(_, n)| n["backendDOMNodeId"].as_i64() == Some(target.backend_id))
                                .map(|(id, _)| (i, id.clone()))
                        })
                        .flatten()
                })
                .ok_or_else(|| BrowserError::StaleRef(r.clone()))?;
            ctx.node(tree, &id, 0, None);
        }
    }
    Ok(out)
}

struct Render<'a> {
    trees: &'a [Tree],
    refs: &'a mut Refs,
    out: &'a mut String,
    max_depth: Option<usize>,
    lines: usize,
}

/// Most lines in one rendering (the character budget cuts it further).
const MAX_LINES: usize = 20_000;

impl Render<'_> {
    fn node(&mut self, tree: usize, id: &str, depth: usize, parent_name: Option<&str>) {
        if self.lines >= MAX_LINES || depth > 200 {
            return;
        }
        let t = &self.trees[tree];
        let Some(node) = t.nodes.get(id) else { return };
        let role = node["role"]["value"].as_str().unwrap_or_default();
        let name = node["name"]["value"].as_str().unwrap_or_default().trim();
        let ignored = node["ignored"].as_bool().unwrap_or(false);
        let backend = node["backendDOMNodeId"].as_i64();
        let shown = !ignored
            && !PASS_THROUGH.contains(&role)
            && !(role == "StaticText" && (name.is_empty() || Some(name) == parent_name));
        let mut next_depth = depth;
        if shown {
            if self.max_depth.is_some_and(|max| depth > max) {
                return;
            }
            let indent = "  ".repeat(depth);
            let line = if role == "StaticText" {
                format!("{indent}- text {}", quote(name))
            } else {
                let mut line = format!("{indent}- {role}");
                if !name.is_empty() {
                    let _ = write!(line, " {}", quote(name));
                }
                line.push_str(&properties(node));
                if let Some(backend) = backend {
                    let r = self.refs.mint(RefTarget {
                        frame_id: t.frame.id.clone(),
                        loader_id: t.frame.loader_id.clone(),
                        backend_id: backend,
                    });
                    let _ = write!(line, " [ref={r}]");
                }
                line
            };
            self.out.push_str(&line);
            self.out.push('\n');
            self.lines += 1;
            next_depth += 1;
        }
        let children: Vec<String> = node["childIds"]
            .as_array()
            .map(|c| c.iter().filter_map(|v| v.as_str().map(str::to_owned)).collect())
            .unwrap_or_default();
        let name_for_children = if shown { Some(name) } else { parent_name };
        let name_owned = name_for_children.map(str::to_owned);
        for child in children {
            self.node(tree, &child, next_depth, name_owned.as_deref());
        }
        // An iframe's document goes under the iframe's node.
        if let Some(backend) = backend {
            let inner: Vec<usize> =
                (0..self.trees.len()).filter(|&i| i != tree && self.trees[i].frame.owner == Some(backend)).collect();
            for i in inner {
                if let Some(root) = self.trees[i].root.clone() {
                    self.node(i, &root, next_depth, None);
                }
            }
        }
    }
}

/// The states worth a model's attention.
fn properties(node: &Value) -> String {
    let mut out = String::new();
    if let Some(value) = node["value"]["value"].as_str().filter(|v| !v.is_empty()) {
        let _ = write!(out, " value={}", quote(value));
    }
    for prop in node["properties"].as_array().into_iter().flatten() {
        let name = prop["name"].as_str().unwrap_or_default();
        let value = &prop["value"]["value"];
        match name {
            "checked" | "pressed" if value.as_str().is_some_and(|v| v != "false") => {
                let _ = write!(out, " [{name}]");
            }
            "checked" | "pressed" if value.as_bool() == Some(true) => {
                let _ = write!(out, " [{name}]");
            }
            "disabled" | "expanded" | "selected" | "required" | "focused" if value.as_bool() == Some(true) => {
                let _ = write!(out, " [{name}]");
            }
            "level" => {
                if let Some(level) = value.as_i64() {
                    let _ = write!(out, " [level={level}]");
                }
            }
            "url" => {
                if let Some(url) = value.as_str() {
                    let _ = write!(out, " url={}", quote(url));
                }
            }
            _ => {}
        }
    }
    out
}

/// A name in double quotes, one line, at most 200 characters.
fn quote(text: &str) -> String {
    let flat: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
    let mut clipped: String = flat.chars().take(200).collect();
    if flat.chars().count() > 200 {
        clipped.push('…');
    }
    format!("\"{}\"", clipped.replace('\\', "\\\\").replace('"', "\\\""))
}

/// Finds a ref's node now: its frame must still show the same document.
pub(crate) async fn resolve(tab: &Tab, r: &str) -> Result<RefTarget, BrowserError> {
    let r = r.trim().trim_start_matches("ref=");
    let target = {
        let refs = tab.refs.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        refs.get(r).cloned().ok_or_else(|| BrowserError::UnknownRef(r.to_owned()))?
    };
    let frames = frames(tab).await?;
    let current = frames.iter().any(|f| f.id == target.frame_id && f.loader_id == target.loader_id);
    if !current {
        return Err(BrowserError::StaleRef(r.to_owned()));
    }
    // The node may have been removed from a document that is still there.
    let resolved = tab.call("DOM.describeNode", json!({"backendNodeId": target.backend_id})).await;
    match resolved {
        Ok(node) if node["node"]["backendNodeId"].as_i64() == Some(target.backend_id) => {}
        _ => return Err(BrowserError::StaleRef(r.to_owned())),
    }
    let connected = tab
        .call("DOM.resolveNode", json!({"backendNodeId": target.backend_id}))
        .await
        .map_err(|_| BrowserError::StaleRef(r.to_owned()))?;
    let object = connected["object"]["objectId"].as_str().unwrap_or_default().to_owned();
    let alive = tab
        .call(
            "Runtime.callFunctionOn",
            json!({"objectId": object, "functionDeclaration": "function(){return this.isConnected}", "returnByValue": true}),
        )
        .await?;
    let _ = tab.call("Runtime.releaseObject", json!({"objectId": object})).await;
    if alive["result"]["value"].as_bool() != Some(true) {
        return Err(BrowserError::StaleRef(r.to_owned()));
    }
    Ok(target)
}
