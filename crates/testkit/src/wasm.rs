//! Builds test components from WAT: a core module with the canonical ABI written out by hand,
//! wrapped into a component of the `toolgate:tool` world by `wit-component`.

use std::fmt::Write as _;

/// The world the components target.
pub const WIT: &str = include_str!("../../wasm/wit/tool.wit");

/// Where the description record and its strings live in the data segment.
const DESC_AT: u32 = 1024;
const STRINGS_AT: u32 = 2048;
/// Where `execute` writes its `result<string, string>`.
pub const RET_AT: u32 = 512;
/// Where the heap (`cabi_realloc`) starts.
const HEAP_AT: u32 = 16384;

/// A tool's description and the body of its `execute`.
#[derive(Debug)]
pub struct Guest<'a> {
    /// What `describe` returns as the tool's name.
    pub name: &'a str,
    /// What `describe` returns as its description.
    pub description: &'a str,
    /// What `describe` returns as its parameter schema (JSON text).
    pub schema: &'a str,
    /// Extra imports (WAT text).
    pub imports: &'a str,
    /// Extra module fields (functions, data) (WAT text).
    pub extra: &'a str,
    /// The body of `(func (export "execute") (param $p i32) (param $len i32) (result i32) ...)`.
    pub execute: &'a str,
    /// Initial memory in pages.
    pub pages: u32,
}

impl Default for Guest<'_> {
    fn default() -> Self {
        Guest {
            name: "echo",
            description: "Returns its parameters.",
            schema: r#"{"type":"object","properties":{"text":{"type":"string"}},"additionalProperties":false}"#,
            imports: "",
            extra: "",
            execute: ECHO,
            pages: 1,
        }
    }
}

/// `execute` returning `ok(params)`.
pub const ECHO: &str = "(call $ok (local.get $p) (local.get $len))";

fn escape(bytes: &[u8]) -> String {
    let mut s = String::new();
    for b in bytes {
        let _ = write!(s, "\\{b:02x}");
    }
    s
}

impl Guest<'_> {
    /// The core module's text.
    pub fn wat(&self) -> String {
        let mut strings = Vec::new();
        let mut record = Vec::new();
        for s in [self.name, self.description, self.schema] {
            let at = STRINGS_AT + strings.len() as u32;
            strings.extend_from_slice(s.as_bytes());
            record.extend_from_slice(&at.to_le_bytes());
            record.extend_from_slice(&(s.len() as u32).to_le_bytes());
        }
        record.extend_from_slice(&[1, 0, 1, 0]); // read-only, not destructive, idempotent, closed world
        format!(
            r#"(module
  {imports}
  (memory (export "memory") {pages})
  (global $heap (mut i32) (i32.const {HEAP_AT}))
  (data (i32.const {DESC_AT}) "{record}")
  (data (i32.const {STRINGS_AT}) "{strings}")
  (func $cabi_realloc (export "cabi_realloc") (param $old i32) (param $old_size i32) (param $align i32) (param $size i32) (result i32)
    (local $at i32) (local $end i32)
    (local.set $at (i32.and (i32.add (global.get $heap) (i32.sub (local.get $align) (i32.const 1)))
                            (i32.sub (i32.const 0) (local.get $align))))
    (local.set $end (i32.add (local.get $at) (local.get $size)))
    (if (i32.gt_u (local.get $end) (i32.mul (memory.size) (i32.const 65536)))
      (then (if (i32.eq (memory.grow (i32.add (i32.shr_u (i32.sub (local.get $end) (i32.mul (memory.size) (i32.const 65536))) (i32.const 16)) (i32.const 1))) (i32.const -1))
        (then unreachable))))
    (global.set $heap (local.get $end))
    (if (local.get $old_size) (then (memory.copy (local.get $at) (local.get $old) (local.get $old_size))))
    (local.get $at))
  (func $ok (param $ptr i32) (param $len i32) (result i32)
    (i32.store8 (i32.const {RET_AT}) (i32.const 0))
    (i32.store (i32.const {ret4}) (local.get $ptr))
    (i32.store (i32.const {ret8}) (local.get $len))
    (i32.const {RET_AT}))
  (func $err (param $ptr i32) (param $len i32) (result i32)
    (i32.store8 (i32.const {RET_AT}) (i32.const 1))
    (i32.store (i32.const {ret4}) (local.get $ptr))
    (i32.store (i32.const {ret8}) (local.get $len))
    (i32.const {RET_AT}))
  {extra}
  (func (export "describe") (result i32) (i32.const {DESC_AT}))
  (func (export "execute") (param $p i32) (param $len i32) (result i32)
    {execute})
)"#,
            imports = self.imports,
            pages = self.pages,
            record = escape(&record),
            strings = escape(&strings),
            ret4 = RET_AT + 4,
            ret8 = RET_AT + 8,
            extra = self.extra,
            execute = self.execute,
        )
    }

    /// The component's bytes.
    pub fn component(&self) -> Vec<u8> {
        component_of(&self.wat(), WIT, "tool")
    }
}

/// Wraps the core module `wat` into a component of `world` in `wit`.
pub fn component_of(wat: &str, wit: &str, world: &str) -> Vec<u8> {
    let mut module = wat::parse_str(wat).unwrap_or_else(|e| panic!("bad WAT: {e}\n{wat}"));
    let mut resolve = wit_parser::Resolve::default();
    let pkg = resolve.push_str("tool.wit", wit).expect("WIT parses");
    let world = resolve.select_world(&[pkg], Some(world)).expect("world exists");
    wit_component::embed_component_metadata(&mut module, &resolve, world, wit_component::StringEncoding::UTF8)
        .expect("metadata embeds");
    wit_component::ComponentEncoder::default()
        .module(&module)
        .expect("module accepted")
        .validate(true)
        .encode()
        .expect("component encodes")
}
