//! The scaffold of each software type and language: the files written before the model starts,
//! the commands that build and test the result, the artifact, and the instructions the model is
//! given (seed 004 §7, "Template Engine"). Build and test commands run through the gate's `exec`
//! in the project's folder, so they are sandboxed, approved and audited like any command.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// What to build (seed 004 §7's `SoftwareType`, without `WebService`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    /// A WASM component for toolgate (`toolgate:tool` world), registered as `wasm__NAME`.
    WasmTool,
    /// A command-line program.
    CliBinary,
    /// A library with its tests.
    Library,
    /// A script.
    Script,
}

impl Kind {
    pub(crate) const NAMES: [&'static str; 4] = ["wasm_tool", "cli_binary", "library", "script"];

    pub(crate) fn parse(s: &str) -> Option<Kind> {
        Some(match s {
            "wasm_tool" => Kind::WasmTool,
            "cli_binary" => Kind::CliBinary,
            "library" => Kind::Library,
            "script" => Kind::Script,
            _ => return None,
        })
    }

    pub(crate) fn as_str(self) -> &'static str {
        Kind::NAMES[self as usize]
    }

    /// The seed's analysis step without a model: a type the description names, else a tool
    /// (the seed biases tool requests towards `wasm_tool`).
    pub(crate) fn guess(description: &str) -> Kind {
        let d = description.to_lowercase();
        let has = |words: &[&str]| words.iter().any(|w| d.contains(w));
        if has(&["command-line", "command line", " cli", "cli "]) {
            Kind::CliBinary
        } else if has(&["library", "module", "package", "crate"]) {
            Kind::Library
        } else if has(&["script"]) {
            Kind::Script
        } else {
            Kind::WasmTool
        }
    }
}

/// The language (seed 004 §7's `Language`, those toolgate has templates for).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Lang {
    Rust,
    Python,
    JavaScript,
    /// WASM tools only: jco bundles it with rolldown, which strips the types (no type check).
    TypeScript,
    Bash,
}

impl Lang {
    pub(crate) const NAMES: [&'static str; 5] = ["rust", "python", "javascript", "typescript", "bash"];

    pub(crate) fn parse(s: &str) -> Option<Lang> {
        Some(match s {
            "rust" => Lang::Rust,
            "python" => Lang::Python,
            "javascript" => Lang::JavaScript,
            "typescript" => Lang::TypeScript,
            "bash" => Lang::Bash,
            _ => return None,
        })
    }

    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Lang::Rust => "rust",
            Lang::Python => "python",
            Lang::JavaScript => "javascript",
            Lang::TypeScript => "typescript",
            Lang::Bash => "bash",
        }
    }

    /// The default for a kind: Python everywhere (a Rust WASM tool needs a target this machine
    /// may lack; Python builds everywhere componentize-py is installed).
    pub(crate) fn default_for(_: Kind) -> Lang {
        Lang::Python
    }
}

/// Where the builders live: found once per call (`TOOLGATE_COMPONENTIZE_PY` / `TOOLGATE_JCO`,
/// else `PATH`).
#[derive(Debug, Clone, Default)]
pub(crate) struct Builders {
    pub componentize_py: Option<PathBuf>,
    pub jco: Option<PathBuf>,
    /// Whether rustc has the `wasm32-wasip2` standard library installed.
    pub wasip2: bool,
}

impl Builders {
    pub(crate) fn find() -> Builders {
        Builders {
            componentize_py: from_env_or_path("TOOLGATE_COMPONENTIZE_PY", "componentize-py"),
            jco: from_env_or_path("TOOLGATE_JCO", "jco"),
            wasip2: has_wasip2(),
        }
    }
}

fn from_env_or_path(var: &str, program: &str) -> Option<PathBuf> {
    if let Some(p) = std::env::var_os(var).filter(|v| !v.is_empty()).map(PathBuf::from) {
        return p.is_file().then_some(p);
    }
    std::env::split_paths(&std::env::var_os("PATH")?).map(|d| d.join(program)).find(|p| p.is_file())
}

/// `rustc --print target-libdir --target wasm32-wasip2` names a folder that exists only when the
/// target's standard library is installed.
fn has_wasip2() -> bool {
    std::process::Command::new("rustc")
        .args(["--print", "target-libdir", "--target", "wasm32-wasip2"])
        .stderr(std::process::Stdio::null())
        .output()
        .ok()
        .filter(|o| o.status.success())
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .is_some_and(|dir| Path::new(dir.trim()).is_dir())
}

/// A project to scaffold and build.
#[derive(Debug, Clone)]
pub(crate) struct Template {
    /// Files written before the model starts: (path in the project, content).
    pub files: Vec<(String, String)>,
    /// The file the model writes first (not scaffolded: it writes it whole).
    pub main: String,
    /// Its starting point, shown in the instructions.
    pub skeleton: String,
    /// The build command (`None`: nothing to build).
    pub build: Option<String>,
    /// The test command (`None`: the WASM tool's cases in `tests.json`, run by the builder).
    pub test: Option<String>,
    /// The result: a component for `wasm_tool`, else the main file.
    pub artifact: String,
    /// Rules for the model, beyond the common ones.
    pub rules: String,
}

/// The project's template, or why this pair cannot be built here (what to ask for instead).
pub(crate) fn template(
    kind: Kind,
    lang: Lang,
    name: &str,
    description: &str,
    b: &Builders,
) -> Result<Template, String> {
    match (kind, lang) {
        (Kind::WasmTool, Lang::Python) => {
            let cpy = b.componentize_py.as_ref().ok_or(
                "a Python WASM tool is built with componentize-py, which is not installed: run `cargo xtask deps` \
                 (or `pip install componentize-py==0.25.1`) and set TOOLGATE_COMPONENTIZE_PY to it or put it on PATH",
            )?;
            Ok(wasm_python(name, description, cpy))
        }
        (Kind::WasmTool, lang @ (Lang::JavaScript | Lang::TypeScript)) => {
            let jco = b.jco.as_ref().ok_or(
                "a JavaScript or TypeScript WASM tool is built with jco, which is not installed: run `cargo xtask deps` (or \
                 `npm install @bytecodealliance/jco @bytecodealliance/componentize-js`) and set TOOLGATE_JCO to it \
                 or put it on PATH",
            )?;
            Ok(wasm_js(name, description, jco, lang == Lang::TypeScript))
        }
        (Kind::WasmTool, Lang::Rust) => Err(if b.wasip2 {
            "a Rust WASM tool needs wit-bindgen from crates.io, which the sandbox's build cannot download (no \
             network): ask for `language: \"python\"` or `\"javascript\"`, or build it yourself with `cargo build \
             --target wasm32-wasip2` and install it with `toolgate wasm install`"
                .to_owned()
        } else {
            "a Rust WASM tool needs the `wasm32-wasip2` target, which is not installed here (`rustup target add \
             wasm32-wasip2`): ask for `language: \"python\"` (componentize-py) or `\"javascript\"` (jco) instead"
                .to_owned()
        }),
        (Kind::WasmTool, Lang::Bash) => {
            Err("a WASM tool cannot be written in bash: ask for `python` or `javascript`".to_owned())
        }
        (Kind::CliBinary, Lang::Rust) => Ok(rust(name, description, false)),
        (Kind::Library, Lang::Rust) => Ok(rust(name, description, true)),
        (Kind::CliBinary, Lang::Python) => Ok(python_cli(name, description)),
        (Kind::Library, Lang::Python) => Ok(python_lib(name, description)),
        (Kind::Script, Lang::Python) => Ok(python_script(name, description)),
        (Kind::Script, Lang::Bash) => Ok(bash_script(name, description)),
        (kind, lang) => Err(format!(
            "no template for a {} in {}: a cli_binary or library is Rust or Python, a script Python or bash, a \
             wasm_tool Python, JavaScript or TypeScript",
            kind.as_str(),
            lang.as_str()
        )),
    }
}

/// The capabilities file beside a component: no grants, only the limits an interpreter needs.
const INTERPRETER_LIMITS: &str = "{\n  \"limits\": { \"memory_mb\": 64, \"instances\": 16, \"component_mb\": 32 }\n}\n";

const TESTS_RULE: &str = "Write `tests.json`: a JSON array of at least one case `{\"input\": {...parameters...}, \
     \"expect\": \"text the result must contain\"}` (or `\"error\": true` for an input that must fail). The builder \
     runs each case in the WASM runtime with no capabilities.";

fn wasm_python(name: &str, description: &str, cpy: &Path) -> Template {
    let skeleton = format!(
        r#"import json

import wit_world
from componentize_py_types import Err


class WitWorld(wit_world.WitWorld):
    def describe(self) -> wit_world.Description:
        return wit_world.Description(
            name={name:?},
            description={desc:?},
            input_schema=json.dumps({{"type": "object", "properties": {{}}, "additionalProperties": False}}),
            annotations=wit_world.Annotations(read_only=True, destructive=False, idempotent=True, open_world=False),
        )

    def execute(self, params: str) -> str:
        args = json.loads(params)
        raise Err("not implemented")
"#,
        desc = one_line(description, 200),
    );
    Template {
        files: vec![
            ("wit/tool.wit".into(), toolgate_wasm::WIT.to_owned()),
            (
                "build.sh".into(),
                format!(
                    "#!/bin/sh\n# Builds {name}.wasm from app.py (componentize-py, the toolgate:tool world in wit/).\nset -eu\n\
                     exec {} -d wit -w tool componentize app -o {name}.wasm\n",
                    shell_word(cpy)
                ),
            ),
            (format!("{name}.capabilities.json"), INTERPRETER_LIMITS.into()),
        ],
        main: "app.py".into(),
        skeleton,
        build: Some("sh build.sh".into()),
        test: None,
        artifact: format!("{name}.wasm"),
        rules: format!(
            "`app.py` defines `class WitWorld(wit_world.WitWorld)` with `describe()` (name {name:?}, a JSON Schema \
             of the parameters) and `execute(params: str) -> str` (params is JSON text; return the result as text; \
             raise `Err(\"message\")` for bad input, never crash). The standard library only: there is no network, \
             no files and no environment inside the component. {TESTS_RULE}"
        ),
    }
}

/// A JavaScript or TypeScript (`ts`) WASM tool: jco componentize (componentize-js). For
/// TypeScript, jco bundles the source with rolldown, which strips the types without checking
/// them and reports syntax errors with their line.
fn wasm_js(name: &str, description: &str, jco: &Path, ts: bool) -> Template {
    let main = if ts { "app.ts" } else { "app.js" };
    // componentize-js runs wizer with an empty environment, so wizer's wasmtime would make its
    // cache in the home folder, which the sandbox does not let it write ("failed to create cache
    // directory"): a wrapper beside the project points it at the project's `.cache/` (which also
    // makes the second build about three times faster). jco's npm tree has wizer beside it.
    let wizer = jco.parent().map(|bin| bin.join("wizer")).filter(|w| w.is_file());
    let mut files = vec![
        ("wit/tool.wit".to_owned(), toolgate_wasm::WIT.to_owned()),
        // `node --check` reads app.js as an ES module.
        ("package.json".to_owned(), "{ \"private\": true, \"type\": \"module\" }\n".to_owned()),
        (format!("{name}.capabilities.json"), INTERPRETER_LIMITS.to_owned()),
    ];
    let mut wizer_arg = String::new();
    if let Some(w) = &wizer {
        files.push((
            "wizer.sh".to_owned(),
            format!(
                "#!/bin/sh\n# wizer with its wasmtime cache in this folder (componentize-js gives it no HOME).\n\
                 XDG_CACHE_HOME=\"$(cd \"$(dirname \"$0\")\" && pwd)/.cache\"\nexport XDG_CACHE_HOME\nexec {} \"$@\"\n",
                shell_word(w)
            ),
        ));
        wizer_arg = " --wizer-bin ./wizer.sh".to_owned();
    }
    // Syntax errors with their line first: componentize-js only says that parsing failed
    // (Node 20 cannot parse TypeScript; rolldown names the line itself).
    let check = if ts { "" } else { "node --check app.js\n" };
    let chmod = if wizer.is_some() { "chmod +x wizer.sh\n" } else { "" };
    files.push((
        "build.sh".to_owned(),
        format!(
            "#!/bin/sh\n# Builds {name}.wasm from {main} (jco componentize, the toolgate:tool world in wit/).\n\
             set -eu\n{check}{chmod}exec {} componentize {main} --wit wit --world-name tool --disable all{wizer_arg} \
             -o {name}.wasm\n",
            shell_word(jco)
        ),
    ));
    let skeleton = format!(
        r#"export function describe() {{
  return {{
    name: {name:?},
    description: {desc:?},
    inputSchema: JSON.stringify({{ type: "object", properties: {{}}, additionalProperties: false }}),
    annotations: {{ readOnly: true, destructive: false, idempotent: true, openWorld: false }},
  }};
}}

export function execute(params{typed} {{
  const args = JSON.parse(params);
  throw "not implemented";
}}
"#,
        desc = one_line(description, 200),
        typed = if ts { ": string): string" } else { ")" },
    );
    Template {
        files,
        main: main.into(),
        skeleton,
        build: Some("sh build.sh".into()),
        test: None,
        artifact: format!("{name}.wasm"),
        rules: format!(
            "`{main}` is an ES module exporting `describe()` and `execute(params)` (params is JSON text; return the \
             result as a string; `throw \"message\"` for bad input). No imports beyond the language: no network, \
             files or environment.{} {TESTS_RULE}",
            if ts { " Types are stripped, not checked: only syntax errors fail the build." } else { "" }
        ),
    }
}

fn rust(name: &str, description: &str, lib: bool) -> Template {
    let crate_name = name.replace('-', "_");
    let manifest = format!(
        "[package]\nname = {name:?}\nversion = \"0.1.0\"\nedition = \"2021\"\ndescription = {:?}\n\n[dependencies]\n",
        one_line(description, 200)
    );
    let (main, skeleton) = if lib {
        (
            "src/lib.rs",
            format!(
                "//! {}\n\n// The library's functions here.\n\n#[cfg(test)]\nmod tests {{\n    use super::*;\n\n    // Tests here.\n}}\n",
                one_line(description, 200)
            ),
        )
    } else {
        (
            "src/main.rs",
            format!(
                "//! {}\n\nfn main() {{\n    let args: Vec<String> = std::env::args().skip(1).collect();\n    todo!()\n}}\n\n#[cfg(test)]\nmod tests {{\n    // Tests here.\n}}\n",
                one_line(description, 200)
            ),
        )
    };
    Template {
        files: vec![("Cargo.toml".into(), manifest), (".gitignore".into(), "/target\n".into())],
        main: main.into(),
        skeleton,
        // Offline (no registry in the sandbox) and the target folder inside the project, whatever
        // CARGO_TARGET_DIR the server runs with.
        build: Some("cargo build --offline --quiet --target-dir target".into()),
        test: Some("cargo test --offline --quiet --target-dir target".into()),
        artifact: if lib { main.into() } else { format!("target/debug/{name}") },
        rules: format!(
            "The standard library only (no dependencies: the sandbox has no network). Put unit tests in `{main}` \
             under `#[cfg(test)]`; `cargo test` must pass. The crate is `{crate_name}`."
        ),
    }
}

fn python_cli(name: &str, description: &str) -> Template {
    let module = name.replace('-', "_");
    Template {
        files: vec![],
        main: format!("{module}.py"),
        skeleton: format!(
            "\"\"\"{}\"\"\"\nimport argparse\nimport sys\n\n\ndef main(argv=None):\n    parser = argparse.ArgumentParser(prog={name:?})\n    args = parser.parse_args(argv)\n    return 0\n\n\nif __name__ == \"__main__\":\n    sys.exit(main())\n",
            one_line(description, 200)
        ),
        build: Some(format!("python3 -m py_compile {module}.py")),
        test: Some("python3 -m unittest discover -p 'test_*.py' -v".into()),
        artifact: format!("{module}.py"),
        rules: format!(
            "The standard library only. Write the tests in `test_{module}.py` (unittest, calling `main([...])`)."
        ),
    }
}

fn python_lib(name: &str, description: &str) -> Template {
    let module = name.replace('-', "_");
    Template {
        files: vec![],
        main: format!("{module}.py"),
        skeleton: format!("\"\"\"{}\"\"\"\n", one_line(description, 200)),
        build: Some(format!("python3 -m py_compile {module}.py")),
        test: Some("python3 -m unittest discover -p 'test_*.py' -v".into()),
        artifact: format!("{module}.py"),
        rules: format!("The standard library only. Write the tests in `test_{module}.py` (unittest)."),
    }
}

fn python_script(name: &str, description: &str) -> Template {
    let module = name.replace('-', "_");
    Template {
        files: vec![],
        main: format!("{module}.py"),
        skeleton: format!(
            "\"\"\"{}\"\"\"\nimport sys\n\n\ndef main(argv):\n    return 0\n\n\nif __name__ == \"__main__\":\n    sys.exit(main(sys.argv[1:]))\n",
            one_line(description, 200)
        ),
        build: Some(format!("python3 -m py_compile {module}.py")),
        test: Some("python3 -m unittest discover -p 'test_*.py' -v".into()),
        artifact: format!("{module}.py"),
        rules: format!("The standard library only. Write at least one test in `test_{module}.py` (unittest)."),
    }
}

fn bash_script(name: &str, description: &str) -> Template {
    Template {
        files: vec![],
        main: format!("{name}.sh"),
        skeleton: format!("#!/bin/bash\n# {}\nset -euo pipefail\n", one_line(description, 200)),
        build: Some(format!("bash -n {name}.sh")),
        test: Some("bash test.sh".into()),
        artifact: format!("{name}.sh"),
        rules: format!(
            "Write `test.sh`: runs `{name}.sh` on sample inputs and exits non-zero when an output is wrong."
        ),
    }
}

/// The first message of the build agent: the task, the folder, the files, the commands, the rules.
pub(crate) fn instructions(t: &Template, kind: Kind, lang: Lang, dir: &str, description: &str) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "You are building a {} in {} (toolgate build_software).", kind.as_str(), lang.as_str());
    let _ = writeln!(s, "\nWhat to build:\n{description}\n");
    let _ = writeln!(s, "Work only in the folder `{dir}/` (paths below are relative to the workspace).");
    if !t.files.is_empty() {
        let names: Vec<String> = t.files.iter().map(|(p, _)| format!("`{dir}/{p}`")).collect();
        let _ = writeln!(s, "Already there: {}.", names.join(", "));
    }
    let _ = writeln!(
        s,
        "\nSteps: 1. write `{dir}/{}` with the `write` tool, starting from this skeleton:\n```\n{}```",
        t.main, t.skeleton
    );
    match &t.test {
        Some(_) => {
            let _ = writeln!(s, "2. write the tests (below).");
        }
        None => {
            let _ = writeln!(s, "2. write `{dir}/tests.json` (below).");
        }
    }
    let commands: Vec<String> = t.build.iter().chain(&t.test).map(|c| format!("`{c}`")).collect();
    let _ = writeln!(
        s,
        "Then answer with one short sentence. The builder then runs {} in `{dir}` and checks the result itself, \
         and tells you what failed, if anything.\n\nRules: {}\nCall tools; do not describe plans. To change a file \
         you wrote, `read` it, then `write` it again.",
        if commands.is_empty() { "the checks".to_owned() } else { commands.join(" and ") },
        t.rules
    );
    s
}

/// `text` on one line, at most `max` characters (for docstrings and `describe`).
fn one_line(text: &str, max: usize) -> String {
    let flat: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
    // The text goes into string literals written with `{:?}` (Python, JavaScript, TOML): a
    // character Rust's Debug escapes as `\u{...}` (a combining mark, a zero-width joiner) would
    // make them invalid in all three, so it is dropped like quotes, backslashes and controls.
    let flat: String = flat.chars().filter(|&c| c == '\'' || c.escape_debug().count() == 1).collect();
    flat.chars().take(max).collect()
}

/// `path` as one single-quoted shell word.
fn shell_word(path: &Path) -> String {
    format!("'{}'", path.display().to_string().replace('\'', "'\\''"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_pair_has_a_template_or_a_reason() {
        let b =
            Builders { componentize_py: Some("/x/componentize-py".into()), jco: Some("/x/jco".into()), wasip2: false };
        for k in Kind::NAMES {
            for l in Lang::NAMES {
                let (k, l) = (Kind::parse(k).unwrap(), Lang::parse(l).unwrap());
                match template(k, l, "demo", "a \"demo\"\nthing", &b) {
                    Ok(t) => assert!(!t.main.is_empty() && !t.skeleton.contains("\"demo\" thing")),
                    Err(why) => assert!(why.contains("ask for") || why.contains("no template"), "{why}"),
                }
            }
        }
        let why = template(Kind::WasmTool, Lang::Rust, "demo", "d", &b).unwrap_err();
        assert!(why.contains("wasm32-wasip2") && why.contains("python"), "{why}");
    }

    #[test]
    fn a_description_never_breaks_the_scaffold() {
        // A combining accent and a zero-width joiner: Rust's Debug writes them `\u{301}`,
        // `\u{200d}`, which is a syntax error in Python and invalid in TOML.
        let d = "cafe\u{301} \u{200d}emoji \"quoted\" back\\slash it's\n\ttab";
        let flat = one_line(d, 200);
        assert_eq!(flat, "cafe emoji quoted backslash it's tab");
        assert!(!format!("{flat:?}").contains('\\'), "{flat:?}");
        let t = rust("demo", d, false);
        let manifest = &t.files[0].1;
        assert!(manifest.contains("description = \"cafe emoji quoted backslash it's tab\""), "{manifest}");
    }

    #[test]
    fn a_builder_path_is_one_shell_word() {
        assert_eq!(shell_word(Path::new("/a b/it's")), r"'/a b/it'\''s'");
    }

    #[test]
    fn the_type_is_guessed_from_the_description() {
        assert_eq!(Kind::guess("a command-line tool that counts words"), Kind::CliBinary);
        assert_eq!(Kind::guess("a Python library for dates"), Kind::Library);
        assert_eq!(Kind::guess("a script that renames photos"), Kind::Script);
        assert_eq!(Kind::guess("a tool that reverses text"), Kind::WasmTool);
    }
}
