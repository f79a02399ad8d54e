//! Argument rules: `exec(cargo test:*)`, `read(secrets/**)`, `web_fetch(domain:example.com)`.
//!
//! A rule has a tool part and a pattern part. The pattern is matched against the call's
//! [`Touches`], never against raw parameter strings. Restricting rules (deny, ask) match when
//! ANY touch matches and are read loosely (abbreviated options, reordered arguments, paths that
//! escape the workspace); allow rules match only when EVERY touch of their kind matches, strictly.

use globset::{GlobBuilder, GlobSet, GlobSetBuilder};
use toolgate_core::Touches;

use crate::ToolRef;
use crate::names::{Groups, NameMatcher, canonical, parse_name};

/// Read-only file tools that `read(...)` allow rules pre-approve.
const READ_TOOLS: &[&str] = &["read", "grep", "glob", "ls"];
/// File-changing tools that `write(...)` / `edit(...)` allow rules pre-approve.
const WRITE_TOOLS: &[&str] = &["write", "edit", "multi_edit", "apply_patch"];
/// Directories whose programs an allow rule recognizes by basename (`/usr/bin/cargo` is `cargo`).
const SYSTEM_BIN_DIRS: &[&str] =
    &["/bin", "/sbin", "/usr/bin", "/usr/sbin", "/usr/local/bin", "/usr/local/sbin", "/opt/homebrew/bin"];

/// How a rule is used, which decides how strictly it matches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mode {
    /// Deny or ask: match if any touch matches, loosely.
    Restrict,
    /// Allow: match if every touch of the rule's kind matches, strictly.
    Allow,
}

/// Which calls a rule is about.
#[derive(Debug, Clone, PartialEq, Eq)]
enum RuleTool {
    /// `exec(...)`: the commands of any call (restricting) / of `exec` calls (allow).
    Exec,
    /// `read(...)`: the reads of any call (restricting) / of read-only file tools (allow).
    Read,
    /// `write(...)`, `edit(...)`: the writes of any call (restricting) / of file-changing tools (allow).
    Write,
    /// Any other tool name or wildcard: calls of those tools only.
    Named(NameMatcher),
}

/// What a rule's pattern matches.
#[derive(Debug, Clone)]
enum Pattern {
    Command(CommandPattern),
    Paths { glob: PathPattern, reads: bool, writes: bool },
    Host(HostPattern),
}

/// One compiled argument rule.
#[derive(Debug, Clone)]
pub(crate) struct ArgRule {
    /// The entry as written.
    pub(crate) text: String,
    /// The tool the rule names, canonical (`exec` for `Bash(...)`): what it makes visible.
    name: NameMatcher,
    tool: RuleTool,
    pattern: Pattern,
}

/// Whether an entry is an argument rule (has a parenthesized pattern).
pub(crate) fn is_arg_rule(entry: &str) -> bool {
    entry.contains('(') || entry.contains(')')
}

impl ArgRule {
    /// Parses `tool(pattern)`.
    pub(crate) fn parse(entry: &str) -> Result<ArgRule, String> {
        let trimmed = entry.trim();
        let (tool, rest) =
            trimmed.split_once('(').ok_or_else(|| "an argument rule looks like `tool(pattern)`".to_owned())?;
        let spec = rest.strip_suffix(')').ok_or_else(|| "an argument rule must end with `)`".to_owned())?.trim();
        if spec.is_empty() {
            return Err("the pattern between the parentheses is empty".to_owned());
        }
        let tool = tool.trim();
        let name = parse_name(tool)?;
        let rule_tool = match canonical(tool).as_ref() {
            "exec" => RuleTool::Exec,
            "read" => RuleTool::Read,
            "write" | "edit" | "multi_edit" | "apply_patch" => RuleTool::Write,
            _ => match parse_name(tool)? {
                NameMatcher::Group(_) => {
                    return Err("an argument rule names one tool or a name wildcard, not a group".to_owned());
                }
                other => RuleTool::Named(other),
            },
        };
        let pattern = parse_pattern(&rule_tool, spec)?;
        Ok(ArgRule { text: trimmed.to_owned(), name, tool: rule_tool, pattern })
    }

    /// Whether the rule is about calls of `tool` when used in `mode`.
    pub(crate) fn applies_to(&self, tool: ToolRef<'_>, mode: Mode, groups: &Groups) -> bool {
        match (&self.tool, mode) {
            (RuleTool::Named(m), _) => m.matches(tool, groups),
            (_, Mode::Restrict) => true,
            (RuleTool::Exec, Mode::Allow) => tool.name == "exec",
            (RuleTool::Read, Mode::Allow) => READ_TOOLS.contains(&tool.name),
            (RuleTool::Write, Mode::Allow) => WRITE_TOOLS.contains(&tool.name),
        }
    }

    /// Whether the rule names `tool` (`read(src/**)` names `read`, not `grep`): what the rule
    /// makes visible in an allow list, and what "matches no registered tool" checks.
    pub(crate) fn tool_matches(&self, tool: ToolRef<'_>, groups: &Groups) -> bool {
        self.name.matches(tool, groups)
    }

    /// The named tool matcher, when the rule is about named tools.
    pub(crate) fn named(&self) -> Option<&NameMatcher> {
        match &self.tool {
            RuleTool::Named(m) => Some(m),
            _ => None,
        }
    }

    /// Matches the rule against a call's touches. Returns the touch that made it match (for the
    /// trace), or `None`.
    pub(crate) fn matches(&self, touches: &Touches, mode: Mode) -> Option<String> {
        match &self.pattern {
            Pattern::Command(p) => {
                let mut cmds = touches.commands.iter();
                match mode {
                    Mode::Restrict => cmds.find(|argv| p.matches_loose(argv)).map(|argv| show_argv(argv)),
                    Mode::Allow => {
                        let all = !touches.commands.is_empty() && cmds.all(|argv| p.matches_strict(argv));
                        all.then(|| touches.commands.iter().map(|a| show_argv(a)).collect::<Vec<_>>().join(" ; "))
                    }
                }
            }
            Pattern::Paths { glob, reads, writes } => {
                let mut paths: Vec<&String> = Vec::new();
                if *reads {
                    paths.extend(&touches.reads);
                }
                if *writes {
                    paths.extend(&touches.writes);
                }
                match mode {
                    Mode::Restrict => paths.into_iter().find(|p| glob.matches_loose(p)).map(|p| p.to_string()),
                    Mode::Allow => {
                        let all = !paths.is_empty() && paths.iter().all(|p| glob.matches_strict(p));
                        all.then(|| paths.iter().map(|p| p.as_str()).collect::<Vec<_>>().join(", "))
                    }
                }
            }
            Pattern::Host(h) => match mode {
                Mode::Restrict => touches.hosts.iter().find(|host| h.matches(host)).cloned(),
                Mode::Allow => {
                    let all = !touches.hosts.is_empty() && touches.hosts.iter().all(|host| h.matches(host));
                    all.then(|| touches.hosts.join(", "))
                }
            },
        }
    }
}

fn show_argv(argv: &[String]) -> String {
    argv.join(" ")
}

fn parse_pattern(tool: &RuleTool, spec: &str) -> Result<Pattern, String> {
    if let Some(domain) = spec.strip_prefix("domain:") {
        return match tool {
            RuleTool::Named(_) => Ok(Pattern::Host(HostPattern::parse(domain)?)),
            _ => Err("`domain:` patterns go with web tools, e.g. `web_fetch(domain:example.com)`".to_owned()),
        };
    }
    if let Some(cmd) = spec.strip_prefix("cmd:") {
        return match tool {
            RuleTool::Exec | RuleTool::Named(_) => Ok(Pattern::Command(CommandPattern::parse(cmd)?)),
            _ => Err("`cmd:` patterns go with `exec` or a named tool".to_owned()),
        };
    }
    if let Some(path) = spec.strip_prefix("path:") {
        return match tool {
            RuleTool::Exec => Err("`exec` rules match commands; use `read(...)` or `write(...)` for paths".to_owned()),
            RuleTool::Read => Ok(Pattern::Paths { glob: PathPattern::parse(path)?, reads: true, writes: false }),
            RuleTool::Write => Ok(Pattern::Paths { glob: PathPattern::parse(path)?, reads: false, writes: true }),
            RuleTool::Named(_) => Ok(Pattern::Paths { glob: PathPattern::parse(path)?, reads: true, writes: true }),
        };
    }
    match tool {
        RuleTool::Exec => Ok(Pattern::Command(CommandPattern::parse(spec)?)),
        RuleTool::Read => Ok(Pattern::Paths { glob: PathPattern::parse(spec)?, reads: true, writes: false }),
        RuleTool::Write => Ok(Pattern::Paths { glob: PathPattern::parse(spec)?, reads: false, writes: true }),
        RuleTool::Named(_) => {
            Err("say what the pattern matches: `domain:HOST`, `path:GLOB` or `cmd:COMMAND` (only `exec`, `read`, \
             `write` and `edit` rules may leave it out)"
                .to_owned())
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Commands

/// `cargo test:*` (argv prefix), `npm run build` (exact argv), `*` (any command).
#[derive(Debug, Clone)]
struct CommandPattern {
    /// `None` for `*`.
    argv: Option<Vec<String>>,
    prefix: bool,
}

impl CommandPattern {
    fn parse(spec: &str) -> Result<CommandPattern, String> {
        let spec = spec.trim();
        if spec == "*" {
            return Ok(CommandPattern { argv: None, prefix: true });
        }
        let (spec, mut prefix) = match spec.strip_suffix(":*") {
            Some(stem) => (stem, true),
            None => (spec, false),
        };
        let mut argv = split_words(spec)?;
        if argv.last().is_some_and(|w| w == "*") {
            argv.pop();
            prefix = true;
        }
        if argv.is_empty() {
            return Err("the command is empty".to_owned());
        }
        if argv.iter().any(|w| w.contains('*')) {
            return Err("`*` is only allowed at the end: `cargo test:*` or `cargo test *`".to_owned());
        }
        Ok(CommandPattern { argv: Some(argv), prefix })
    }

    /// Allow-rule matching: the program by exact name (or by basename from a system directory),
    /// then the arguments exactly (exact rule) or as a prefix (`:*` rule).
    fn matches_strict(&self, argv: &[String]) -> bool {
        let Some(rule) = &self.argv else { return !argv.is_empty() };
        let (Some(program), Some(rule_program)) = (argv.first(), rule.first()) else { return false };
        let program_ok = program == rule_program
            || (!rule_program.contains('/')
                && program.rsplit_once('/').is_some_and(|(dir, base)| {
                    base == rule_program && SYSTEM_BIN_DIRS.contains(&dir.trim_end_matches('/'))
                }));
        if !program_ok {
            return false;
        }
        let (args, rule_args) = (&argv[1..], &rule[1..]);
        if self.prefix { args.starts_with(rule_args) } else { args == rule_args }
    }

    /// Deny/ask matching, deliberately loose: the program by basename; the rule's other words
    /// in order anywhere in the argv; its options anywhere, abbreviated (`--forc`), with a value
    /// (`--force=yes`) or, for short options, clustered in any order (`-fr` for `-rf`).
    fn matches_loose(&self, argv: &[String]) -> bool {
        let Some(rule) = &self.argv else { return !argv.is_empty() };
        // Leading `NAME=value` words are assignments, never the program (should the analyzer
        // have left them in place).
        let start = argv.iter().take_while(|w| is_assignment(w)).count();
        let argv = &argv[start..];
        let (Some(program), Some(rule_program)) = (argv.first(), rule.first()) else { return false };
        if basename(program) != basename(rule_program) {
            return false;
        }
        let args = &argv[1..];
        let mut rest = args.iter();
        for word in &rule[1..] {
            if word.starts_with('-') && word.len() > 1 {
                if !args.iter().any(|arg| option_matches(word, arg, args)) {
                    return false;
                }
            } else if !rest.any(|arg| arg == word) {
                return false;
            }
        }
        true
    }
}

/// `NAME=value` with a shell variable name.
fn is_assignment(word: &str) -> bool {
    word.split_once('=').is_some_and(|(name, _)| {
        name.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
            && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
    })
}

fn basename(program: &str) -> &str {
    program.rsplit_once('/').map_or(program, |(_, base)| base)
}

/// Whether the argv word `arg` (or, for short clusters, the argv as a whole) supplies the rule
/// option `rule`.
fn option_matches(rule: &str, arg: &str, args: &[String]) -> bool {
    if arg == rule {
        return true;
    }
    if let Some(long) = rule.strip_prefix("--") {
        let Some(given) = arg.strip_prefix("--") else { return false };
        let given = given.split_once('=').map_or(given, |(name, _)| name);
        return !given.is_empty() && long.starts_with(given);
    }
    // A short option or cluster (`-rf`): every letter must be given in some short cluster.
    let letters = &rule[1..];
    letters
        .chars()
        .all(|letter| args.iter().any(|a| a.starts_with('-') && !a.starts_with("--") && a[1..].contains(letter)))
}

/// Splits a command pattern into words, honoring simple single and double quotes.
fn split_words(spec: &str) -> Result<Vec<String>, String> {
    let mut words = Vec::new();
    let mut word = String::new();
    let mut in_word = false;
    let mut quote: Option<char> = None;
    for c in spec.chars() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), c) => word.push(c),
            (None, '\'' | '"') => {
                quote = Some(c);
                in_word = true;
            }
            (None, c) if c.is_whitespace() => {
                if in_word {
                    words.push(std::mem::take(&mut word));
                    in_word = false;
                }
            }
            (None, c) => {
                word.push(c);
                in_word = true;
            }
        }
    }
    if quote.is_some() {
        return Err("unterminated quote in the command".to_owned());
    }
    if in_word {
        words.push(word);
    }
    Ok(words)
}

// ---------------------------------------------------------------------------------------------
// Paths

/// A gitignore-style glob over workspace-relative paths.
#[derive(Debug, Clone)]
struct PathPattern {
    /// Case-sensitive matcher (allow rules).
    exact: GlobSet,
    /// Case-insensitive matcher (deny/ask rules: `Secrets/key` on a case-insensitive disk).
    folded: GlobSet,
    /// The literal leading directories of an anchored pattern; `None` for an unanchored one
    /// (`*.env` matches at any depth).
    literal_prefix: Option<String>,
    /// Set when the pattern covers everything under one literal directory (`src/**`, `src`).
    covers_dir: Option<String>,
    /// The pattern's last component (`*.env`, `**`, `key`).
    last: String,
}

fn has_meta(s: &str) -> bool {
    s.contains(['*', '?', '[', ']', '{', '}', '\\'])
}

impl PathPattern {
    fn parse(spec: &str) -> Result<PathPattern, String> {
        let mut p = spec.trim();
        let mut anchored = false;
        if let Some(rest) = p.strip_prefix('/') {
            p = rest;
            anchored = true;
        }
        while let Some(rest) = p.strip_prefix("./") {
            p = rest;
            anchored = true;
        }
        let p = p.trim_end_matches('/');
        if p.is_empty() {
            return Err("the path pattern is empty".to_owned());
        }
        if p.split('/').any(|c| c == ".." || c == "." || c.is_empty()) {
            return Err("path patterns are workspace-relative: no `..`, `.` or empty components".to_owned());
        }
        // Gitignore: a slash at the start or in the middle anchors the pattern at the root.
        let anchored = anchored || p.contains('/');
        let base = if anchored { p.to_owned() } else { format!("**/{p}") };
        let mut globs = vec![base.clone()];
        if !base.ends_with("/**") {
            globs.push(format!("{base}/**"));
        }
        let build = |fold: bool| -> Result<GlobSet, String> {
            let mut set = GlobSetBuilder::new();
            for g in &globs {
                let glob = GlobBuilder::new(g)
                    .literal_separator(true)
                    .case_insensitive(fold)
                    .backslash_escape(true)
                    .build()
                    .map_err(|e| e.kind().to_string())?;
                set.add(glob);
            }
            set.build().map_err(|e| e.to_string())
        };
        let components: Vec<&str> = p.split('/').collect();
        let literal: Vec<&str> = components.iter().copied().take_while(|c| !has_meta(c)).collect();
        let literal_prefix = anchored.then(|| literal.join("/"));
        let covers_dir = if !anchored {
            None
        } else if literal.len() == components.len() {
            Some(p.to_owned())
        } else if components.len() == literal.len() + 1 && components.last() == Some(&"**") && !literal.is_empty() {
            Some(literal.join("/"))
        } else {
            None
        };
        let last = components.last().copied().unwrap_or("**").to_owned();
        Ok(PathPattern { exact: build(false)?, folded: build(true)?, literal_prefix, covers_dir, last })
    }

    /// Allow matching: the path stays inside the workspace and the pattern covers all of it
    /// (a glob touch such as `src/**/*.rs` only when the rule covers its whole directory).
    fn matches_strict(&self, path: &str) -> bool {
        let Some(path) = normalize(path) else { return false };
        let covered = |dir: &str| self.covers_dir.as_deref().is_some_and(|d| !d.is_empty() && under(dir, d));
        if has_meta(&path) || path.is_empty() {
            return covered(&literal_dir(&path));
        }
        self.exact.is_match(&path) || covered(&path)
    }

    /// Deny/ask matching: case-insensitive; a path escaping the workspace always matches; a glob
    /// or directory touch matches when it may contain a path the pattern matches.
    fn matches_loose(&self, path: &str) -> bool {
        let Some(path) = normalize(path) else { return true };
        if self.folded.is_match(&path) {
            return true;
        }
        let glob_touch = has_meta(&path) || path.is_empty();
        let dir = if glob_touch { literal_dir(&path) } else { path.clone() };
        let prefixes_meet = match &self.literal_prefix {
            None => glob_touch,
            Some(prefix) => {
                let (dir, prefix) = (dir.to_lowercase(), prefix.to_lowercase());
                if glob_touch {
                    under(&dir, &prefix) || under(&prefix, &dir)
                } else {
                    // A literal touch naming a directory above the pattern (`secrets` for
                    // `secrets/**`, `` for `config/*.key`) may read what the pattern protects.
                    under(&prefix, &dir)
                }
            }
        };
        // A glob touch whose file names cannot be the pattern's (`src/**/*.rs` against `*.env`).
        prefixes_meet && !(glob_touch && names_disjoint(path.rsplit('/').next().unwrap_or(""), &self.last))
    }
}

/// Whether two file-name patterns provably match no common name, compared case-insensitively.
/// Only literal names and `*SUFFIX` are understood; anything else may overlap.
fn names_disjoint(a: &str, b: &str) -> bool {
    let simple = |p: &str| -> Option<(bool, String)> {
        let (star, rest) = match p.strip_prefix('*') {
            Some(rest) => (true, rest),
            None => (false, p),
        };
        (!has_meta(rest) && !rest.is_empty()).then(|| (star, rest.to_lowercase()))
    };
    let (Some((a_star, a)), Some((b_star, b))) = (simple(a), simple(b)) else { return false };
    match (a_star, b_star) {
        (false, false) => a != b,
        (true, false) => !b.ends_with(&a),
        (false, true) => !a.ends_with(&b),
        (true, true) => !a.ends_with(&b) && !b.ends_with(&a),
    }
}

/// `a/b` is under `a` (and under itself); everything is under ``.
fn under(path: &str, dir: &str) -> bool {
    dir.is_empty() || path == dir || path.strip_prefix(dir).is_some_and(|rest| rest.starts_with('/'))
}

/// The literal leading directories of a glob touch (`src/**/*.rs` → `src`).
fn literal_dir(path: &str) -> String {
    path.split('/').take_while(|c| !has_meta(c)).collect::<Vec<_>>().join("/")
}

/// Normalizes a workspace-relative path: drops `.` and empty components, resolves `..`.
/// `None` when the path is absolute or climbs out of the workspace.
pub(crate) fn normalize(path: &str) -> Option<String> {
    if path.starts_with('/') || path.starts_with('~') || path.as_bytes().get(1) == Some(&b':') {
        return None;
    }
    let mut out: Vec<&str> = Vec::new();
    for c in path.split('/') {
        match c {
            "" | "." => {}
            ".." => {
                out.pop()?;
            }
            c => out.push(c),
        }
    }
    Some(out.join("/"))
}

// ---------------------------------------------------------------------------------------------
// Hosts

/// `domain:example.com` (the host and its subdomains) or `domain:*.example.com` (subdomains only).
#[derive(Debug, Clone)]
struct HostPattern {
    domain: String,
    subdomains_only: bool,
}

impl HostPattern {
    fn parse(spec: &str) -> Result<HostPattern, String> {
        let spec = spec.trim().trim_end_matches('.').to_ascii_lowercase();
        let (domain, subdomains_only) = match spec.strip_prefix("*.") {
            Some(rest) => (rest.to_owned(), true),
            None => (spec, false),
        };
        let valid = !domain.is_empty()
            && domain.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_' | ':' | '[' | ']'));
        if !valid || domain.contains('*') {
            return Err(
                "a domain pattern is a host name (`example.com`) or `*.example.com`, without scheme or path".to_owned()
            );
        }
        Ok(HostPattern { domain, subdomains_only })
    }

    fn matches(&self, host: &str) -> bool {
        let host = host.trim_end_matches('.').to_ascii_lowercase();
        let sub = host.strip_suffix(self.domain.as_str()).is_some_and(|rest| rest.ends_with('.'));
        sub || (!self.subdomains_only && host == self.domain)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn argv(s: &str) -> Vec<String> {
        s.split_whitespace().map(str::to_owned).collect()
    }

    #[test]
    fn commands() {
        // (rule, command, strict, loose)
        let cases = [
            ("cargo test:*", "cargo test", true, true),
            ("cargo test:*", "cargo test --all", true, true),
            ("cargo test:*", "cargo testx", false, false),
            ("cargo test:*", "cargo build", false, false),
            ("cargo test *", "cargo test -p x", true, true),
            ("npm run build", "npm run build", true, true),
            ("npm run build", "npm run build --prod", false, true),
            ("cargo test:*", "/usr/bin/cargo test", true, true),
            ("cargo test:*", "./cargo test", false, true),
            ("cargo test:*", "/work/ws/cargo test", false, true),
            ("git push --force:*", "git push origin --force", false, true),
            ("git push --force:*", "git push --forc", false, true),
            ("git push --force:*", "git push --force-with-lease", false, false),
            ("git push --force:*", "git push --force=yes", false, true),
            ("rm -rf:*", "rm -r -f x", false, true),
            ("rm -rf:*", "rm -fr x", false, true),
            ("rm -rf:*", "rm x", false, false),
            ("*", "anything at all", true, true),
            ("rm -rf:*", "FOO=1 _B=2 rm -rf x", false, true),
            ("cargo test:*", "RUSTC_WRAPPER=./evil cargo test", false, true),
            ("rm:*", "=x rm", false, false),
        ];
        for (rule, cmd, strict, loose) in cases {
            let p = CommandPattern::parse(rule).unwrap();
            assert_eq!(p.matches_strict(&argv(cmd)), strict, "strict {rule} vs {cmd}");
            assert_eq!(p.matches_loose(&argv(cmd)), loose, "loose {rule} vs {cmd}");
        }
        for bad in ["", ":*", "ca*go test", "echo 'unterminated"] {
            assert!(CommandPattern::parse(bad).is_err(), "{bad}");
        }
        assert_eq!(split_words("git commit -m 'a b'").unwrap(), ["git", "commit", "-m", "a b"]);
    }

    #[test]
    fn paths() {
        // (rule, path, strict, loose)
        let cases = [
            ("secrets/**", "secrets/key", true, true),
            ("secrets/**", "./secrets/key", true, true),
            ("secrets/**", "src/../secrets/key", true, true),
            ("secrets/**", "Secrets/key", false, true),
            ("secrets/**", "src/secrets/key", false, false),
            ("secrets/**", "secrets", true, true),
            ("secrets/**", "", false, true),
            ("secrets/**", "**/*.txt", false, true),
            ("secrets/**", "src/**", false, false),
            ("secrets/**", "../outside", false, true),
            ("secrets/**", "/etc/passwd", false, true),
            ("secrets", "secrets/deep/key", true, true),
            ("*.env", ".env", true, true),
            ("*.env", "prod.env", true, true),
            ("*.env", "a/b/prod.env", true, true),
            ("*.env", "**/*.rs", false, false),
            ("*.env", "**/*.ENV", false, true),
            ("*.env", "**/*", false, true),
            ("*.env", "src/**", false, true),
            ("config/*.key", "config/**/*.rs", false, false),
            ("config/*.key", "config/**/*.key", false, true),
            ("config/prod.key", "**/*.key", false, true),
            ("config/prod.key", "**/*.pem", false, false),
            ("src/**", "src", true, true),
            ("*.env", "src/main.rs", false, false),
            ("src/**", "src/main.rs", true, true),
            ("src/**", "src/**/*.rs", true, true),
            ("src/**", "src2/main.rs", false, false),
            ("src/*.rs", "src/a/b.rs", false, false),
            ("src/*.rs", "src/*.rs", false, true),
            ("/Cargo.toml", "Cargo.toml", true, true),
            ("/Cargo.toml", "sub/Cargo.toml", false, false),
        ];
        for (rule, path, strict, loose) in cases {
            let p = PathPattern::parse(rule).unwrap();
            assert_eq!(p.matches_strict(path), strict, "strict {rule} vs {path}");
            assert_eq!(p.matches_loose(path), loose, "loose {rule} vs {path}");
        }
        for bad in ["", "../x", "a/./b", "a[", "/"] {
            assert!(PathPattern::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn hosts() {
        let cases = [
            ("example.com", "example.com", true),
            ("example.com", "api.example.com", true),
            ("example.com", "API.Example.COM.", true),
            ("example.com", "badexample.com", false),
            ("example.com", "example.com.evil.net", false),
            ("*.example.com", "example.com", false),
            ("*.example.com", "a.example.com", true),
        ];
        for (rule, host, expect) in cases {
            assert_eq!(HostPattern::parse(rule).unwrap().matches(host), expect, "{rule} vs {host}");
        }
        for bad in ["", "https://example.com", "example.com/path", "*"] {
            assert!(HostPattern::parse(bad).is_err(), "{bad}");
        }
    }
}
