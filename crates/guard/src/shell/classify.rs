//! Classifying one unwrapped simple command: known-safe read-only tools with their flag
//! conditions, never-auto-approve patterns, and deny categories.

use super::CommandClass;
use super::paths::{self, is_block_device, is_network_device, read_risk, write_risk};
use super::word::{Arg, Taint, basename, quote_for_display};

/// The class of a command and the reason for the worst part of it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Verdict {
    pub class: CommandClass,
    pub reason: Option<String>,
}

impl Verdict {
    pub(crate) fn safe() -> Self {
        Self { class: CommandClass::Safe, reason: None }
    }

    /// Raises the class to `class` if that is worse; the first reason of the worst class wins.
    pub(crate) fn raise(&mut self, class: CommandClass, reason: impl Into<String>) {
        if class > self.class {
            self.class = class;
            self.reason = Some(reason.into());
        } else if class == self.class && self.reason.is_none() && class > CommandClass::Safe {
            self.reason = Some(reason.into());
        }
    }

    fn raise_opt(&mut self, r: Option<(CommandClass, String)>) {
        if let Some((c, why)) = r {
            self.raise(c, why);
        }
    }
}

/// What the classifier needs to know besides the argv.
#[derive(Debug, Default)]
pub(crate) struct Context<'a> {
    /// A wrapper (`xargs`) appends arguments the analysis cannot see.
    pub unknown_args: bool,
    /// Texts fed to the command's standard input by here-documents and here-strings.
    pub stdin_texts: &'a [String],
}

/// Commands that are read-only whatever their arguments.
const SAFE_ANY_ARGS: &[&str] = &[
    "cat",
    "echo",
    "printf",
    "true",
    "false",
    "pwd",
    "ls",
    "dir",
    "vdir",
    "head",
    "tail",
    "wc",
    "nl",
    "cut",
    "paste",
    "tr",
    "rev",
    "tac",
    "seq",
    "expr",
    "id",
    "whoami",
    "groups",
    "uname",
    "basename",
    "dirname",
    "realpath",
    "readlink",
    "stat",
    "file",
    "which",
    "whereis",
    "type",
    "column",
    "fold",
    "fmt",
    "grep",
    "egrep",
    "fgrep",
    "du",
    "df",
    "cmp",
    "comm",
    "diff",
    "join",
    "md5sum",
    "sha1sum",
    "sha224sum",
    "sha256sum",
    "sha384sum",
    "sha512sum",
    "b2sum",
    "cksum",
    "sum",
    "od",
    "hexdump",
    "strings",
    "test",
    "[",
    "sleep",
    "cd",
    "pushd",
    "popd",
    "dirs",
    ":",
    "wait",
    "jq",
    "free",
    "uptime",
    "nproc",
    "arch",
    "locale",
    "tty",
    "cal",
    "numfmt",
    "look",
    "yes",
    "ps",
    "pgrep",
    "exit",
    "return",
    "break",
    "continue",
    "shift",
    "read",
    "getopts",
    "let",
    "hash",
    "unset",
    "set",
    "shopt",
    "umask",
    "history",
    "jobs",
    "logname",
    "users",
    "who",
    "w",
    "lsb_release",
    "expand",
    "unexpand",
    "tsort",
    "factor",
];

/// Shells and interpreters: running one executes code the analysis cannot see.
pub(crate) fn is_interpreter(name: &str) -> bool {
    super::unwrap::is_shell(name)
        || matches!(
            name,
            "python"
                | "python2"
                | "python3"
                | "pypy"
                | "pypy3"
                | "perl"
                | "ruby"
                | "node"
                | "nodejs"
                | "deno"
                | "bun"
                | "php"
                | "lua"
                | "luajit"
                | "tclsh"
                | "wish"
                | "Rscript"
                | "osascript"
                | "pwsh"
                | "powershell"
                | "irb"
                | "jshell"
        )
        || (name.starts_with("python3.") && name[8..].chars().all(|c| c.is_ascii_digit()))
}

/// Commands that run code taken from their arguments (`awk PROGRAM`, `source FILE`).
pub(crate) fn is_code_executor(name: &str) -> bool {
    is_interpreter(name) || matches!(name, "source" | "." | "eval" | "awk" | "gawk" | "mawk" | "nawk" | "trap")
}

/// Network tools whose output is remote content.
fn is_downloader(name: &str) -> bool {
    matches!(
        name,
        "curl"
            | "wget"
            | "fetch"
            | "aria2c"
            | "http"
            | "https"
            | "xh"
            | "lwp-request"
            | "lwp-download"
            | "GET"
            | "nc"
            | "ncat"
            | "netcat"
            | "socat"
            | "telnet"
            | "ftp"
            | "tftp"
    )
}

/// Network tools that can carry a shell's input and output (reverse shells).
pub(crate) fn is_network_pipe(name: &str) -> bool {
    matches!(name, "nc" | "ncat" | "netcat" | "socat" | "telnet" | "openssl" | "cryptcat")
}

/// Whether the command reads the code it runs from standard input (`sh`, `python3 -`).
pub(crate) fn reads_code_from_stdin(args: &[Arg]) -> bool {
    let Some(first) = args.first() else { return false };
    let name = basename(&first.text);
    let rest = &args[1..];
    if is_code_executor(name)
        && rest.iter().any(|a| matches!(a.text.as_str(), "/dev/stdin" | "/dev/fd/0" | "/proc/self/fd/0"))
    {
        return true;
    }
    if !is_interpreter(name) {
        return false;
    }
    if rest.iter().any(|a| a.text == "-" || a.text == "-s") {
        return true;
    }
    // Options that take the code or a file from elsewhere.
    if rest.iter().any(|a| matches!(a.text.as_str(), "-c" | "-e" | "-E" | "-m" | "--command" | "-r" | "--eval")) {
        // Inline code that executes what it reads (`exec(sys.stdin.read())`, `eval <STDIN>`).
        let code = rest.iter().map(|a| a.text.to_ascii_lowercase()).collect::<Vec<_>>().join(" ");
        return code.contains("stdin") && (code.contains("exec") || code.contains("eval"));
    }
    !rest.iter().any(|a| !a.text.starts_with('-'))
}

/// What kind of content a command writes to its standard output.
pub(crate) fn output_taint(args: &[Arg]) -> Taint {
    let mut t = Taint::default();
    let Some(first) = args.first() else { return t };
    let name = basename(&first.text);
    for a in args {
        t.merge(a.taint);
    }
    if is_downloader(name) {
        t.remote = true;
    }
    let rest = &args[1..];
    let short_has = |c: char| rest.iter().any(|a| is_short_cluster(&a.text) && a.text.contains(c));
    match name {
        "base64" | "base32" | "basenc" => {
            t.decoded |= short_has('d') || short_has('D') || rest.iter().any(|a| long_is(&a.text, "decode"));
        }
        "xxd" => t.decoded |= short_has('r') || rest.iter().any(|a| a.text == "-revert"),
        "uudecode" | "openssl" | "gunzip" | "zcat" | "bzcat" | "xzcat" | "unxz" | "zstdcat" | "unzstd" | "rev"
        | "tr" | "bunzip2" | "lzcat" => t.decoded = true,
        "gzip" | "bzip2" | "xz" | "zstd" => t.decoded |= short_has('d') || short_has('c'),
        "printf" | "echo" => t.decoded |= rest.iter().any(|a| a.text.contains('\\') || a.text.contains("%b")),
        _ => {}
    }
    if is_interpreter(name) {
        let code = rest.iter().map(|a| a.text.to_ascii_lowercase()).collect::<Vec<_>>().join(" ");
        if ["urllib", "requests", "http", "socket", "fetch(", "net::", "open-uri"].iter().any(|k| code.contains(k)) {
            t.remote = true;
        }
        if ["b64decode", "base64", "decode(", "unpack", "fromcharcode", "atob("].iter().any(|k| code.contains(k)) {
            t.decoded = true;
        }
    }
    t
}

/// A variable that changes which programs run or how (`PATH`, `LD_PRELOAD`, `GIT_SSH_COMMAND`).
pub(crate) fn assignment_risk(name: &str) -> Option<String> {
    const EXACT: &[&str] = &[
        "PATH",
        "BASH_ENV",
        "ENV",
        "PROMPT_COMMAND",
        "IFS",
        "PS4",
        "SHELLOPTS",
        "BASHOPTS",
        "CDPATH",
        "HOME",
        "PAGER",
        "EDITOR",
        "VISUAL",
        "MANPAGER",
        "LESSOPEN",
        "LESSCLOSE",
        "SSH_ASKPASS",
        "SUDO_ASKPASS",
        "TAR_OPTIONS",
        "RUSTC_WRAPPER",
        "RUSTC",
        "RUSTDOCFLAGS",
        "RUSTFLAGS",
        "CC",
        "CXX",
        "LD",
        "MAKEFLAGS",
        "SHELL",
        "BROWSER",
        "TMPDIR",
        "XDG_CONFIG_HOME",
        "ZDOTDIR",
        "HISTFILE",
        "RIPGREP_CONFIG_PATH",
        "LESS",
        "SYSTEMD_PAGER",
        "JAVA_TOOL_OPTIONS",
        "_JAVA_OPTIONS",
        "CLASSPATH",
    ];
    const PREFIXES: &[&str] = &[
        "LD_",
        "DYLD_",
        "GIT_",
        "BASH_FUNC_",
        "PYTHON",
        "PERL",
        "RUBY",
        "NODE_",
        "npm_config_",
        "NPM_CONFIG_",
        "CARGO_",
        "GEM_",
        "BUNDLE_",
        "LUA_",
    ];
    (EXACT.contains(&name) || PREFIXES.iter().any(|p| name.starts_with(p)))
        .then(|| format!("sets {name}, which changes which programs run or how"))
}

/// A variable set for a command's environment (`NAME=value cmd`, `env NAME=value cmd`,
/// `export NAME=value`): anything but a short list of harmless locale and display variables
/// can change what a program runs (`RIPGREP_CONFIG_PATH`, `GIT_SSH_COMMAND`, `LD_PRELOAD`).
pub(crate) fn env_assignment_risk(name: &str) -> Option<String> {
    const HARMLESS: &[&str] = &[
        "LANG",
        "LANGUAGE",
        "TZ",
        "NO_COLOR",
        "FORCE_COLOR",
        "CLICOLOR",
        "CLICOLOR_FORCE",
        "TERM",
        "COLUMNS",
        "LINES",
        "RUST_BACKTRACE",
        "RUST_LOG",
        "CI",
        "COLORTERM",
        "GREP_COLOR",
        "GREP_COLORS",
        "LS_COLORS",
        "TIME_STYLE",
        "POSIXLY_CORRECT",
        "DEBIAN_FRONTEND",
    ];
    if HARMLESS.contains(&name) || name.starts_with("LC_") {
        return None;
    }
    Some(assignment_risk(name).unwrap_or_else(|| format!("sets {name} in the environment of the command")))
}

/// Whether `arg` is a GNU long option whose (possibly abbreviated) name means `--full`.
pub(crate) fn long_is(arg: &str, full: &str) -> bool {
    let Some(body) = arg.strip_prefix("--") else { return false };
    let name = body.split_once('=').map_or(body, |(n, _)| n);
    !name.is_empty() && full.starts_with(name)
}

fn any_long(args: &[Arg], fulls: &[&str]) -> Option<String> {
    args.iter().find(|a| fulls.iter().any(|f| long_is(&a.text, f))).map(|a| a.text.clone())
}

/// `-abc`: a cluster of short options (not `--x`, not `-` alone, not a negative number).
fn is_short_cluster(t: &str) -> bool {
    t.len() > 1 && t.starts_with('-') && !t.starts_with("--")
}

/// The short option letters of `args`, stopping in each cluster at a letter in `takes_value`.
fn short_letters(args: &[Arg], takes_value: &str) -> Vec<char> {
    let mut out = Vec::new();
    let mut skip_next = false;
    for a in args {
        if skip_next {
            skip_next = false;
            continue;
        }
        if a.text == "--" {
            break;
        }
        if !is_short_cluster(&a.text) {
            continue;
        }
        let body = &a.text[1..];
        for (i, c) in body.char_indices() {
            out.push(c);
            if takes_value.contains(c) {
                skip_next = i + c.len_utf8() == body.len();
                break;
            }
        }
    }
    out
}

/// The value of a short (`-o v`, `-ov`) or long (`--output v`, `--output=v`, `--out=v`) option.
fn option_value(args: &[Arg], short: Option<char>, long: Option<&str>, short_takes_value: &str) -> Option<String> {
    let mut i = 0;
    while i < args.len() {
        let t = &args[i].text;
        if t == "--" {
            return None;
        }
        if let Some(full) = long
            && long_is(t, full)
        {
            return match t.split_once('=') {
                Some((_, v)) => Some(v.to_string()),
                None => args.get(i + 1).map(|a| a.text.clone()),
            };
        }
        if let Some(s) = short
            && is_short_cluster(t)
        {
            let body = &t[1..];
            for (pos, c) in body.char_indices() {
                if c == s {
                    let rest = &body[pos + c.len_utf8()..];
                    return if rest.is_empty() {
                        args.get(i + 1).map(|a| a.text.clone())
                    } else {
                        Some(rest.to_string())
                    };
                }
                if short_takes_value.contains(c) {
                    break;
                }
            }
        }
        i += 1;
    }
    None
}

/// Operands: arguments that are not options (after `--`, everything).
fn operands<'a>(args: &'a [Arg], short_takes_value: &str, long_takes_value: &[&str]) -> Vec<&'a Arg> {
    let mut out = Vec::new();
    let mut i = 0;
    let mut opts_done = false;
    while i < args.len() {
        let a = &args[i];
        let t = a.text.as_str();
        if opts_done || t == "-" || !t.starts_with('-') {
            out.push(a);
        } else if t == "--" {
            opts_done = true;
        } else if t.starts_with("--") {
            if !t.contains('=') && long_takes_value.iter().any(|f| long_is(t, f)) {
                i += 1;
            }
        } else {
            let body = &t[1..];
            if let Some((pos, c)) = body.char_indices().find(|(_, c)| short_takes_value.contains(*c))
                && pos + c.len_utf8() == body.len()
            {
                i += 1;
            }
        }
        i += 1;
    }
    out
}

const SQL_PATTERNS: &[(&str, &str)] = &[
    ("drop table", "DROP TABLE"),
    ("drop database", "DROP DATABASE"),
    ("drop schema", "DROP SCHEMA"),
    ("drop index", "DROP INDEX"),
    ("drop view", "DROP VIEW"),
    ("drop user", "DROP USER"),
    ("truncate table", "TRUNCATE TABLE"),
    ("truncate ", "TRUNCATE"),
    ("delete from", "DELETE FROM"),
    ("flushall", "FLUSHALL"),
    ("flushdb", "FLUSHDB"),
    ("dropdatabase(", "dropDatabase()"),
];

fn sql_risk(text: &str) -> Option<String> {
    let lower: String = text.to_ascii_lowercase().split_whitespace().collect::<Vec<_>>().join(" ");
    for (pat, shown) in SQL_PATTERNS {
        if *pat == "truncate " {
            // Only the SQL statement, not the `truncate` command word.
            if lower.starts_with("truncate ") || lower.contains(";truncate ") || lower.contains("; truncate ") {
                return Some(format!("contains the destructive SQL statement {shown}"));
            }
            continue;
        }
        if lower.contains(pat) {
            return Some(format!("contains the destructive SQL statement {shown}"));
        }
    }
    None
}

/// `/`, `/*`, `~`, `$HOME`, `/usr`: targets whose recursive deletion destroys the system.
fn is_root_like(path: &str) -> bool {
    let p = paths::normalize(path);
    let p = p.strip_suffix("/*").unwrap_or(&p);
    let p = if p.is_empty() { "/" } else { p };
    matches!(p, "/" | "~" | "*" | "/*" | "~/*")
        || [
            "/bin",
            "/boot",
            "/dev",
            "/etc",
            "/home",
            "/lib",
            "/lib64",
            "/opt",
            "/proc",
            "/root",
            "/sbin",
            "/srv",
            "/sys",
            "/usr",
            "/var",
            "/Users",
            "/System",
            "/Library",
            "/Applications",
            "/mnt",
            "/media",
        ]
        .contains(&p)
}

/// Classifies one unwrapped simple command.
pub(crate) fn classify(args: &[Arg], ctx: &Context<'_>) -> Verdict {
    let mut v = Verdict::safe();
    let Some(first) = args.first() else { return v };
    if !first.literal {
        v.raise(CommandClass::NeedsApproval, format!("the command name {} is an expansion", first.text));
        return v;
    }
    let name = basename(&first.text);
    let rest = &args[1..];

    // Deny categories and secrets that can appear in any argument.
    for a in rest {
        if is_network_device(&a.text) {
            v.raise(CommandClass::Blocked, "opens a network connection through /dev/tcp or /dev/udp");
        }
        if let Some(r) = sql_risk(&a.text) {
            v.raise(CommandClass::Dangerous, r);
        }
        let path = a.text.split_once('=').map_or(a.text.as_str(), |(_, p)| p);
        let path = path.strip_prefix('@').unwrap_or(path);
        v.raise_opt(read_risk(path));
        if !matches!(name, "ls" | "stat" | "file" | "du" | "test" | "[" | "mkdir" | "echo" | "printf")
            && paths::is_secret_dir(path)
        {
            v.raise(CommandClass::Dangerous, format!("{name} reads the secret directory {path}"));
        }
    }
    for t in ctx.stdin_texts {
        if let Some(r) = sql_risk(t) {
            v.raise(CommandClass::Dangerous, r);
        }
    }

    let any_expansion = rest.iter().any(|a| !a.literal) || ctx.unknown_args;
    let mut flags_checked = false;

    match name {
        n if SAFE_ANY_ARGS.contains(&n) => {}
        "find" => {
            flags_checked = true;
            for a in rest {
                match a.text.as_str() {
                    "-exec" | "-execdir" | "-ok" | "-okdir" => {
                        v.raise(CommandClass::NeedsApproval, format!("find {} runs other commands", a.text))
                    }
                    "-delete" => v.raise(CommandClass::Dangerous, "find -delete deletes files"),
                    "-fprint" | "-fprint0" | "-fprintf" | "-fls" => {
                        v.raise(CommandClass::NeedsApproval, format!("find {} writes a file", a.text))
                    }
                    _ => {}
                }
            }
        }
        "rg" => {
            flags_checked = true;
            if let Some(o) = any_long(rest, &["pre", "hostname-bin", "search-zip"]) {
                v.raise(CommandClass::NeedsApproval, format!("rg {o} runs other programs"));
            }
            if short_letters(rest, "ABCEefgMmrTtj").contains(&'z') {
                v.raise(CommandClass::NeedsApproval, "rg -z runs decompression programs");
            }
        }
        "fd" | "fdfind" => {
            flags_checked = true;
            if let Some(o) = any_long(rest, &["exec", "exec-batch"]) {
                v.raise(CommandClass::NeedsApproval, format!("fd {o} runs other commands"));
            }
            let s = short_letters(rest, "deEtSoj");
            if s.contains(&'x') || s.contains(&'X') {
                v.raise(CommandClass::NeedsApproval, "fd -x runs other commands");
            }
        }
        "sed" => {
            flags_checked = true;
            classify_sed(rest, &mut v);
        }
        "sort" => {
            flags_checked = true;
            if let Some(o) = any_long(rest, &["compress-program"]) {
                v.raise(CommandClass::NeedsApproval, format!("sort {o} runs another program"));
            }
            if let Some(out) = option_value(rest, Some('o'), Some("output"), "kSTt") {
                raise_write(&mut v, &out, "sort -o");
            }
        }
        "base64" | "base32" | "basenc" => {
            flags_checked = true;
            if let Some(out) = option_value(rest, Some('o'), Some("output"), "bwi") {
                raise_write(&mut v, &out, name);
            }
        }
        "uniq" => {
            flags_checked = true;
            if let Some(out) = operands(rest, "fsw", &[]).get(1) {
                raise_write(&mut v, &out.text, "uniq");
            }
        }
        "xxd" => {
            flags_checked = true;
            if let Some(out) = operands(rest, "cglosn", &[]).get(1) {
                raise_write(&mut v, &out.text, "xxd");
            }
        }
        "tree" => {
            flags_checked = true;
            if let Some(out) = option_value(rest, Some('o'), None, "LPIH") {
                raise_write(&mut v, &out, "tree -o");
            }
        }
        "shuf" => {
            flags_checked = true;
            if let Some(out) = option_value(rest, Some('o'), Some("output"), "inN") {
                raise_write(&mut v, &out, "shuf -o");
            }
        }
        "date" => {
            flags_checked = true;
            if option_value(rest, Some('s'), Some("set"), "dfrI").is_some() || any_long(rest, &["set"]).is_some() {
                v.raise(CommandClass::NeedsApproval, "date --set changes the system clock");
            }
        }
        "hostname" => {
            flags_checked = true;
            if !operands(rest, "F", &["file"]).is_empty() || any_long(rest, &["file"]).is_some() {
                v.raise(CommandClass::NeedsApproval, "hostname NAME changes the host name");
            }
        }
        "tee" => {
            for o in operands(rest, "", &["output-error"]) {
                raise_write(&mut v, &o.text, "tee");
            }
        }
        "git" => classify_git(rest, &mut v, &mut flags_checked),
        "export" | "declare" | "typeset" | "local" | "readonly" => {
            for a in rest {
                if let Some((n, _)) = a.text.split_once('=')
                    && let Some(r) = env_assignment_risk(n.trim_end_matches('+'))
                {
                    v.raise(CommandClass::NeedsApproval, r);
                }
            }
        }
        "command" => {
            // Only `command -v/-V name` reaches here (other forms are unwrapped).
        }
        "rm" | "rmdir" | "unlink" => classify_rm(name, rest, &mut v),
        "shred" | "wipe" | "srm" => {
            v.raise(CommandClass::Dangerous, format!("{name} destroys file contents irreversibly"));
            for o in operands(rest, "nsu", &[]) {
                if is_block_device(&o.text) {
                    v.raise(CommandClass::Blocked, format!("{name} wipes the disk device {}", o.text));
                }
            }
        }
        n if n.starts_with("mkfs") || matches!(n, "mke2fs" | "mkswap" | "wipefs" | "mkdosfs" | "mkntfs" | "newfs") => {
            v.raise(CommandClass::Blocked, format!("{name} formats or wipes a filesystem"))
        }
        "fdisk" | "sfdisk" | "cfdisk" | "parted" | "gdisk" | "sgdisk" | "blkdiscard" | "badblocks" => {
            v.raise(CommandClass::Dangerous, format!("{name} changes disk partitions"))
        }
        "dd" => classify_dd(rest, &mut v),
        "shutdown" | "reboot" | "poweroff" | "halt" | "kexec" => {
            v.raise(CommandClass::Blocked, format!("{name} shuts down or restarts the machine"))
        }
        "init" | "telinit" if rest.iter().any(|a| matches!(a.text.as_str(), "0" | "6")) => {
            v.raise(CommandClass::Blocked, format!("{name} shuts down or restarts the machine"))
        }
        "systemctl" | "loginctl" => {
            if rest.iter().any(|a| matches!(a.text.as_str(), "poweroff" | "reboot" | "halt" | "kexec" | "soft-reboot"))
            {
                v.raise(CommandClass::Blocked, format!("{name} shuts down or restarts the machine"));
            }
            v.raise(CommandClass::NeedsApproval, format!("{name} controls system services"));
        }
        "kill" | "pkill" | "killall" | "killall5" => {
            if name == "killall5" || (name == "kill" && rest.last().is_some_and(|a| a.text == "-1")) {
                v.raise(CommandClass::Dangerous, format!("{name} signals every process"));
            }
            v.raise(CommandClass::NeedsApproval, format!("{name} stops processes"));
        }
        "chmod" | "chown" | "chgrp" => classify_chmod(name, rest, &mut v),
        "curl" | "wget" => classify_fetch(name, rest, &mut v),
        "nc" | "ncat" | "netcat" | "cryptcat" => {
            let s = short_letters(rest, "ecpsiwqIOTgGx");
            if s.contains(&'e') || s.contains(&'c') || any_long(rest, &["exec", "sh-exec", "lua-exec"]).is_some() {
                v.raise(CommandClass::Blocked, format!("{name} -e connects a program to the network (reverse shell)"));
            }
            v.raise(CommandClass::NeedsApproval, format!("{name} opens network connections"));
        }
        "socat" => {
            if rest.iter().any(|a| {
                let l = a.text.to_ascii_lowercase();
                l.contains("exec:") || l.contains("system:")
            }) {
                v.raise(CommandClass::Blocked, "socat EXEC/SYSTEM connects a program to the network (reverse shell)");
            }
            v.raise(CommandClass::NeedsApproval, "socat opens network connections");
        }
        "crontab" => {
            if short_letters(rest, "u").contains(&'r') {
                v.raise(CommandClass::Dangerous, "crontab -r deletes all scheduled jobs");
            }
            v.raise(CommandClass::NeedsApproval, "crontab changes scheduled jobs");
        }
        "iptables" | "ip6tables" | "nft" | "ufw" | "setenforce" | "sysctl" | "mount" | "umount" | "swapoff"
        | "swapon" | "insmod" | "rmmod" | "modprobe" | "passwd" | "chpasswd" | "useradd" | "userdel" | "usermod"
        | "groupadd" | "groupdel" | "visudo" | "chattr" | "sudo" | "su" | "doas" | "pkexec" | "run0" | "sudoedit" => {
            v.raise(CommandClass::Dangerous, format!("{name} changes system configuration or privileges"))
        }
        "mv" => {
            for o in operands(rest, "tS", &["target-directory", "suffix"]) {
                if o.text == "/dev/null" {
                    v.raise(CommandClass::Dangerous, "mv to /dev/null destroys the file");
                }
                raise_write(&mut v, &o.text, "mv");
            }
            if let Some(t) = option_value(rest, Some('t'), Some("target-directory"), "S") {
                raise_write(&mut v, &t, "mv");
            }
        }
        "cp" | "install" | "rsync" | "scp" | "ln" => {
            let ops = operands(rest, "tSgmoeB", &["target-directory", "suffix", "rsh", "exclude", "include", "filter"]);
            let target = option_value(rest, Some('t'), Some("target-directory"), "SgmoeB")
                .or_else(|| (ops.len() >= 2).then(|| ops[ops.len() - 1].text.clone()));
            match target {
                Some(t) => raise_write(&mut v, &t, name),
                None => v.raise(CommandClass::NeedsApproval, format!("{name} writes files")),
            }
            if name == "rsync" && any_long(rest, &["delete", "remove-source-files"]).is_some() {
                v.raise(CommandClass::Dangerous, "rsync --delete deletes files at the destination");
            }
        }
        "touch" | "mkdir" | "truncate" | "mkfifo" | "mknod" => {
            for o in operands(rest, "rtdsm", &["reference", "size", "date", "mode"]) {
                if name == "truncate" && is_root_like(&o.text) {
                    v.raise(CommandClass::Dangerous, format!("truncate {}", o.text));
                }
                raise_write(&mut v, &o.text, name);
            }
            v.raise(CommandClass::NeedsApproval, format!("{name} writes files"));
        }
        "docker" | "podman" | "kubectl" | "helm" | "terraform" | "tofu" | "pulumi" | "aws" | "gcloud" | "az"
        | "gsutil" | "doctl" | "heroku" | "fly" | "flyctl" => classify_cloud(name, rest, &mut v),
        "npm" | "pnpm" | "yarn" | "cargo" | "gem" | "twine" | "poetry" | "mvn" | "gradle" | "dotnet" | "uv"
            if rest
                .iter()
                .any(|a| matches!(a.text.as_str(), "publish" | "unpublish" | "yank" | "deploy" | "upload")) =>
        {
            v.raise(CommandClass::Dangerous, format!("{name} publishes a package (irreversible)"))
        }
        n if is_interpreter(n) => classify_interpreter(n, rest, &mut v),
        "source" | "." => v.raise(CommandClass::NeedsApproval, format!("{name} runs a script file")),
        "eval" | "trap" => v.raise(CommandClass::NeedsApproval, format!("{name} runs code built from expansions")),
        "alias" => v.raise(CommandClass::NeedsApproval, "alias changes what later commands run"),
        "env" | "printenv" => v.raise(CommandClass::NeedsApproval, format!("{name} prints environment variables")),
        _ => v.raise(CommandClass::NeedsApproval, format!("{name} is not a known read-only command")),
    }

    if flags_checked && any_expansion && v.class == CommandClass::Safe {
        v.raise(
            CommandClass::NeedsApproval,
            format!("{name} has arguments that are expansions, so its flags cannot be checked"),
        );
    }
    v
}

/// Marks a write to `path` by `what`: NeedsApproval, or worse for sensitive paths.
fn raise_write(v: &mut Verdict, path: &str, what: &str) {
    if path == "/dev/null" || path == "-" || path == "/dev/stdout" || path == "/dev/stderr" {
        return;
    }
    match write_risk(path) {
        Some((c, why)) => v.raise(c, format!("{what} {why}")),
        None => v.raise(CommandClass::NeedsApproval, format!("{what} writes to {}", quote_for_display(path))),
    }
}

fn classify_sed(rest: &[Arg], v: &mut Verdict) {
    let in_place = short_letters(rest, "efl").contains(&'i') || any_long(rest, &["in-place"]).is_some();
    if in_place {
        for o in operands(rest, "efl", &["expression", "file", "line-length"]) {
            raise_write(v, &o.text, "sed -i");
        }
        v.raise(CommandClass::NeedsApproval, "sed -i edits files in place");
        return;
    }
    // Only `sed -n N[,M]p [FILE...]` is known read-only (other scripts can write with `w` or
    // run commands with `e`).
    let mut n = false;
    let mut script: Option<&str> = None;
    let mut other = false;
    for a in rest {
        match a.text.as_str() {
            "-n" | "--quiet" | "--silent" => n = true,
            t if t.starts_with('-') && t != "-" => other = true,
            t if script.is_none() => script = Some(t),
            _ => {}
        }
    }
    let print_range = script.is_some_and(|s| {
        let Some(body) = s.strip_suffix('p') else { return false };
        let num = |x: &str| !x.is_empty() && (x == "$" || x.chars().all(|c| c.is_ascii_digit()));
        match body.split_once(',') {
            Some((a, b)) => num(a) && num(b),
            None => num(body),
        }
    });
    if !(n && print_range && !other) {
        v.raise(CommandClass::NeedsApproval, "sed script is not a known read-only form (sed -n 'N,Mp')");
    }
}

fn classify_rm(name: &str, rest: &[Arg], v: &mut Verdict) {
    let letters = short_letters(rest, "");
    let recursive = letters.iter().any(|c| matches!(c, 'r' | 'R')) || any_long(rest, &["recursive"]).is_some();
    let force = letters.contains(&'f') || any_long(rest, &["force"]).is_some();
    let ops = operands(rest, "", &[]);
    if any_long(rest, &["no-preserve-root"]).is_some() {
        v.raise(CommandClass::Blocked, "rm --no-preserve-root deletes the whole system");
    }
    if recursive || name == "rmdir" {
        for o in &ops {
            if is_root_like(&o.text) {
                v.raise(CommandClass::Blocked, format!("{name} deletes {} recursively", o.text));
            }
        }
    }
    for o in &ops {
        if let Some((c, why)) = write_risk(&o.text) {
            v.raise(c, format!("{name} {why}"));
        }
    }
    if recursive && force {
        v.raise(CommandClass::Dangerous, format!("{name} -rf deletes files recursively and irreversibly"));
    } else if recursive {
        v.raise(CommandClass::Dangerous, format!("{name} -r deletes directories recursively"));
    } else if force {
        v.raise(CommandClass::Dangerous, format!("{name} -f deletes files without asking"));
    }
    v.raise(CommandClass::NeedsApproval, format!("{name} deletes files"));
}

fn classify_dd(rest: &[Arg], v: &mut Verdict) {
    for a in rest {
        if let Some(of) = a.text.strip_prefix("of=") {
            if is_block_device(of) {
                v.raise(CommandClass::Blocked, format!("dd writes to the disk device {of}"));
            }
            raise_write(v, of, "dd");
        }
    }
    v.raise(CommandClass::NeedsApproval, "dd copies raw data");
}

fn classify_chmod(name: &str, rest: &[Arg], v: &mut Verdict) {
    let recursive = short_letters(rest, "").contains(&'R') || any_long(rest, &["recursive"]).is_some();
    let ops = operands(rest, "", &["reference", "from"]);
    if name == "chmod" {
        let mode = ops.first().map(|a| a.text.as_str()).unwrap_or_default();
        let world_writable = mode.ends_with("777")
            || mode.ends_with("666")
            || mode.contains("o+w")
            || mode.contains("a+w")
            || mode == "+w"
            || mode.contains("a+rwx")
            || mode.contains("o+rwx");
        let setuid = mode.contains("+s") || (mode.len() == 4 && mode.starts_with(['4', '2', '6']));
        if recursive && world_writable {
            v.raise(CommandClass::Dangerous, format!("chmod -R {mode} makes a tree writable by everyone"));
        }
        if setuid {
            v.raise(CommandClass::Dangerous, format!("chmod {mode} sets the setuid/setgid bit"));
        }
        for o in ops.iter().skip(1) {
            if is_root_like(&o.text) {
                v.raise(CommandClass::Dangerous, format!("chmod changes the mode of {}", o.text));
            }
            if let Some((c, why)) = write_risk(&o.text) {
                v.raise(c.min(CommandClass::Dangerous), format!("chmod {why}"));
            }
        }
    } else {
        for o in ops.iter().skip(1) {
            if recursive || is_root_like(&o.text) {
                v.raise(CommandClass::Dangerous, format!("{name} -R changes the owner of a whole tree"));
            }
            if let Some((c, why)) = write_risk(&o.text) {
                v.raise(c.min(CommandClass::Dangerous), format!("{name} {why}"));
            }
        }
    }
    v.raise(CommandClass::NeedsApproval, format!("{name} changes file permissions"));
}

fn classify_fetch(name: &str, rest: &[Arg], v: &mut Verdict) {
    // Uploads of local files.
    let mut uploads: Vec<String> = Vec::new();
    let mut i = 0;
    while i < rest.len() {
        let t = rest[i].text.as_str();
        let next = rest.get(i + 1).map(|a| a.text.as_str());
        let (opt, val) = match t.split_once('=') {
            Some((o, v)) if o.starts_with("--") => (o, Some(v)),
            _ => (t, None),
        };
        let data_opt = matches!(opt, "-d" | "-F" | "-T")
            || ["data", "data-binary", "data-urlencode", "data-raw", "form", "upload-file", "post-file", "body-file"]
                .iter()
                .any(|f| long_is(opt, f));
        if data_opt {
            let value = val.or(next).unwrap_or_default();
            let file = if matches!(opt, "-T")
                || long_is(opt, "upload-file")
                || long_is(opt, "post-file")
                || long_is(opt, "body-file")
            {
                Some(value)
            } else {
                value.split_once('@').map(|(_, f)| f).filter(|f| !f.is_empty())
            };
            if let Some(f) = file {
                uploads.push(f.to_string());
            }
            i += if val.is_none() { 2 } else { 1 };
            continue;
        }
        // `-d@file` attached.
        if let Some(f) = t.strip_prefix("-d@").or_else(|| t.strip_prefix("-T")).filter(|f| !f.is_empty()) {
            uploads.push(f.to_string());
        }
        i += 1;
    }
    for f in &uploads {
        match read_risk(f) {
            Some((_, why)) => v.raise(CommandClass::Blocked, format!("{name} uploads a secret: {why}")),
            None => v.raise(CommandClass::Dangerous, format!("{name} uploads the local file {f}")),
        }
    }
    let out = if name == "curl" {
        option_value(rest, Some('o'), Some("output"), "dFTHuXAebcEKmrwxyz")
    } else {
        option_value(rest, Some('O'), Some("output-document"), "oaPeUtTwQ")
    };
    if let Some(o) = out {
        raise_write(v, &o, name);
    }
    v.raise(CommandClass::NeedsApproval, format!("{name} accesses the network"));
}

fn classify_interpreter(name: &str, rest: &[Arg], v: &mut Verdict) {
    let code = rest.iter().map(|a| a.text.as_str()).collect::<Vec<_>>().join(" ");
    let lower = code.to_ascii_lowercase();
    let socket = lower.contains("socket")
        || lower.contains("tcpsocket")
        || lower.contains("fsockopen")
        || lower.contains("net.connect");
    let spawns = [
        "/bin/sh",
        "/bin/bash",
        "pty.spawn",
        "subprocess",
        "os.dup2",
        "exec(",
        "system(",
        "popen",
        "spawn(",
        "child_process",
        "sh -i",
    ]
    .iter()
    .any(|k| lower.contains(k));
    if socket && spawns {
        v.raise(CommandClass::Blocked, format!("{name} code connects a shell to the network (reverse shell)"));
    }
    if lower.contains("fork while fork") || lower.contains("os.fork()") && lower.contains("while") {
        v.raise(CommandClass::Blocked, format!("{name} code is a fork bomb"));
    }
    if rest.iter().any(|a| matches!(a.text.as_str(), "-c" | "-e" | "-E" | "-r" | "--eval" | "-p")) {
        v.raise(CommandClass::NeedsApproval, format!("{name} runs inline code that is not analyzed"));
    } else if rest.iter().any(|a| !a.text.starts_with('-')) {
        v.raise(CommandClass::NeedsApproval, format!("{name} runs a script file"));
    } else {
        v.raise(CommandClass::NeedsApproval, format!("{name} runs code from its input"));
    }
}

fn classify_cloud(name: &str, rest: &[Arg], v: &mut Verdict) {
    let words: Vec<&str> = rest.iter().map(|a| a.text.as_str()).collect();
    let has = |w: &str| words.contains(&w);
    let dangerous = match name {
        "docker" | "podman" => {
            (has("prune"))
                || (has("rm") || has("rmi")) && (has("-f") || has("--force"))
                || has("--privileged")
                || words.iter().any(|w| w.starts_with("/:") || w.starts_with("--volume=/:"))
        }
        "kubectl" | "helm" => has("delete") || has("uninstall") || has("drain"),
        "terraform" | "tofu" | "pulumi" => {
            has("destroy")
                || (has("apply") || has("up")) && words.iter().any(|w| w.contains("auto-approve") || *w == "--yes")
        }
        _ => words.iter().any(|w| {
            w.starts_with("delete")
                || w.starts_with("terminate")
                || w.starts_with("destroy")
                || *w == "rb"
                || *w == "rm"
        }),
    };
    if dangerous {
        v.raise(CommandClass::Dangerous, format!("{name} deletes or changes infrastructure irreversibly"));
    }
    v.raise(CommandClass::NeedsApproval, format!("{name} changes infrastructure"));
}

/// Git: global options, then a subcommand with its own flags.
fn classify_git(rest: &[Arg], v: &mut Verdict, flags_checked: &mut bool) {
    let mut i = 0;
    while i < rest.len() {
        let t = rest[i].text.as_str();
        match t {
            "-C" | "--namespace" | "--super-prefix" => i += 2,
            "-c" | "--config-env" => {
                v.raise(CommandClass::NeedsApproval, format!("git {t} sets configuration, which can run programs"));
                i += 2;
            }
            "-p"
            | "--paginate"
            | "-P"
            | "--no-pager"
            | "--bare"
            | "--literal-pathspecs"
            | "--no-replace-objects"
            | "--no-optional-locks"
            | "--glob-pathspecs"
            | "--noglob-pathspecs"
            | "--icase-pathspecs"
            | "--no-lazy-fetch" => i += 1,
            _ if t.starts_with("--config-env=") => {
                v.raise(CommandClass::NeedsApproval, "git --config-env sets configuration, which can run programs");
                i += 1;
            }
            _ if t.starts_with("-c") && t.len() > 2 => {
                v.raise(CommandClass::NeedsApproval, "git -c sets configuration, which can run programs");
                i += 1;
            }
            _ if t.starts_with("--exec-path") || t.starts_with("--git-dir") || t.starts_with("--work-tree") => {
                v.raise(CommandClass::NeedsApproval, format!("git {t} uses another repository or git installation"));
                if !t.contains('=') && (t == "--git-dir" || t == "--work-tree") {
                    i += 1;
                }
                i += 1;
            }
            _ if t.starts_with('-') => {
                v.raise(CommandClass::NeedsApproval, format!("unknown git option {t}"));
                i += 1;
            }
            _ => break,
        }
    }
    let Some(sub) = rest.get(i) else { return };
    let sub_args = &rest[i + 1..];
    if !sub.literal {
        v.raise(CommandClass::NeedsApproval, "the git subcommand is an expansion");
        return;
    }
    let words: Vec<&str> = sub_args.iter().map(|a| a.text.as_str()).collect();
    let has = |w: &str| words.contains(&w);
    let letters = short_letters(sub_args, "");
    const DIFF_UNSAFE: &[&str] = &["output", "ext-diff", "textconv", "exec", "open-files-in-pager", "upload-pack"];
    let check_read_only = |v: &mut Verdict| {
        if let Some(o) = any_long(sub_args, DIFF_UNSAFE) {
            let class = CommandClass::NeedsApproval;
            v.raise(class, format!("git {} {o} writes files or runs programs", sub.text));
        }
    };
    match sub.text.as_str() {
        "status" | "log" | "diff" | "show" | "blame" | "annotate" | "shortlog" | "rev-parse" | "rev-list"
        | "ls-files" | "ls-tree" | "cat-file" | "describe" | "merge-base" | "name-rev" | "show-ref"
        | "for-each-ref" | "count-objects" | "check-ignore" | "version" | "whatchanged" | "show-branch"
        | "diff-tree" | "diff-files" | "diff-index" | "var" | "cherry" | "range-diff" => {
            *flags_checked = true;
            check_read_only(v);
            return;
        }
        "grep" => {
            *flags_checked = true;
            check_read_only(v);
            if letters.contains(&'O') {
                v.raise(CommandClass::NeedsApproval, "git grep -O runs a pager program");
            }
            return;
        }
        "branch" => {
            *flags_checked = true;
            let modifying = [
                "delete",
                "move",
                "copy",
                "force",
                "set-upstream-to",
                "unset-upstream",
                "edit-description",
                "track",
                "no-track",
            ];
            let listing = has("--list") || letters.contains(&'l');
            if letters.contains(&'D')
                || (letters.contains(&'d') || any_long(sub_args, &["delete"]).is_some())
                    && (letters.contains(&'f') || any_long(sub_args, &["force"]).is_some())
            {
                v.raise(CommandClass::Dangerous, "git branch -D deletes a branch even if unmerged");
            }
            if letters.iter().any(|c| matches!(c, 'd' | 'D' | 'm' | 'M' | 'c' | 'C' | 'f' | 'u' | 't'))
                || any_long(sub_args, &modifying).is_some()
                || (!listing && sub_args.iter().any(|a| !a.text.starts_with('-')))
            {
                v.raise(CommandClass::NeedsApproval, "git branch changes branches");
            }
            return;
        }
        "tag" => {
            *flags_checked = true;
            let listing = has("--list") || letters.contains(&'l');
            if !(sub_args.is_empty() || listing)
                || letters.iter().any(|c| matches!(c, 'd' | 'a' | 's' | 'f' | 'm' | 'u'))
            {
                v.raise(CommandClass::NeedsApproval, "git tag changes tags");
            }
            return;
        }
        "remote" => {
            *flags_checked = true;
            if !sub_args.iter().all(|a| matches!(a.text.as_str(), "-v" | "--verbose")) {
                v.raise(CommandClass::NeedsApproval, "git remote changes or contacts remotes");
            }
            return;
        }
        "stash" if matches!(words.first(), Some(&"list") | Some(&"show")) => {
            *flags_checked = true;
            check_read_only(v);
            return;
        }
        "stash" if matches!(words.first(), Some(&"drop") | Some(&"clear")) => {
            v.raise(CommandClass::Dangerous, "git stash drop/clear discards stashed changes")
        }
        "push" => {
            let force = letters.contains(&'f')
                || letters.contains(&'d')
                || any_long(sub_args, &["force", "force-with-lease", "force-if-includes", "mirror", "delete", "prune"])
                    .is_some()
                || sub_args.iter().skip(1).any(|a| a.text.starts_with('+') || a.text.starts_with(':'));
            if force {
                v.raise(CommandClass::Dangerous, "git push --force/--delete rewrites or deletes remote history");
            }
            v.raise(CommandClass::NeedsApproval, "git push publishes commits");
        }
        "reset" if any_long(sub_args, &["hard"]).is_some() || has("--merge") || has("--keep") => {
            v.raise(CommandClass::Dangerous, "git reset --hard discards uncommitted changes")
        }
        "clean" if letters.contains(&'f') || any_long(sub_args, &["force"]).is_some() => {
            v.raise(CommandClass::Dangerous, "git clean -f deletes untracked files")
        }
        "checkout" | "switch"
            if has("--")
                || has(".")
                || letters.contains(&'f')
                || any_long(sub_args, &["force", "discard-changes"]).is_some() =>
        {
            v.raise(CommandClass::Dangerous, format!("git {} discards local changes", sub.text))
        }
        "restore" if !(has("--staged") || letters.contains(&'S')) || has("--worktree") || letters.contains(&'W') => {
            v.raise(CommandClass::Dangerous, "git restore discards local changes")
        }
        "reflog" if matches!(words.first(), Some(&"expire") | Some(&"delete")) => {
            v.raise(CommandClass::Dangerous, "git reflog expire/delete destroys recovery points")
        }
        "reflog" => {
            *flags_checked = true;
            check_read_only(v);
            return;
        }
        "gc" | "prune" if words.iter().any(|w| w.starts_with("--prune")) || sub.text == "prune" => {
            v.raise(CommandClass::Dangerous, "git prune deletes unreachable objects")
        }
        "filter-branch" | "filter-repo" => {
            v.raise(CommandClass::Dangerous, format!("git {} rewrites history", sub.text))
        }
        "update-ref" if letters.contains(&'d') => v.raise(CommandClass::Dangerous, "git update-ref -d deletes a ref"),
        _ => {}
    }
    v.raise(CommandClass::NeedsApproval, format!("git {} changes the repository or is not known read-only", sub.text));
}

/// The files a downloader writes (`curl -o FILE`, `wget -O FILE`).
pub(crate) fn download_targets(args: &[Arg]) -> Vec<String> {
    let Some(first) = args.first() else { return Vec::new() };
    let rest = &args[1..];
    let out = match basename(&first.text) {
        "curl" => option_value(rest, Some('o'), Some("output"), "dFTHuXAebcEKmrwxyz"),
        "wget" => option_value(rest, Some('O'), Some("output-document"), "oaPeUtTwQ"),
        _ => None,
    };
    out.into_iter().filter(|o| o != "-").collect()
}

/// The commands that `find -exec`/`-execdir`/`-ok`/`-okdir` runs (without the `{}` placeholder
/// semantics: `{}` stays in the argv).
pub(crate) fn find_exec_commands(args: &[Arg]) -> Vec<(String, Vec<Arg>)> {
    let mut out = Vec::new();
    let mut i = 1;
    while i < args.len() {
        let t = args[i].text.as_str();
        if matches!(t, "-exec" | "-execdir" | "-ok" | "-okdir") {
            let start = i + 1;
            let mut end = start;
            while end < args.len() && args[end].text != ";" && args[end].text != "+" {
                end += 1;
            }
            if end > start {
                out.push((format!("find {t}"), args[start..end].to_vec()));
            }
            i = end + 1;
            continue;
        }
        i += 1;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lits(s: &str) -> Vec<Arg> {
        s.split_whitespace().map(Arg::lit).collect()
    }

    #[test]
    fn long_abbreviations() {
        assert!(long_is("--out=x", "output"));
        assert!(long_is("--compress", "compress-program"));
        assert!(!long_is("--output-indicator-new=x", "output"));
        assert!(!long_is("--", "output"));
    }

    #[test]
    fn options() {
        assert_eq!(option_value(&lits("-k2 -ofile"), Some('o'), Some("output"), "k").as_deref(), Some("file"));
        assert_eq!(option_value(&lits("--outp f"), Some('o'), Some("output"), "k").as_deref(), Some("f"));
        assert_eq!(option_value(&lits("-k o"), Some('o'), Some("output"), "k"), None);
        let args = lits("-n 3 a -- -b");
        let ops = operands(&args, "n", &[]);
        assert_eq!(ops.iter().map(|a| a.text.as_str()).collect::<Vec<_>>(), ["a", "-b"]);
    }

    #[test]
    fn find_exec() {
        let cmds = find_exec_commands(&lits("find . -name x -exec rm -rf {} ; -print"));
        assert_eq!(cmds.len(), 1);
        assert_eq!(cmds[0].1.iter().map(|a| a.text.as_str()).collect::<Vec<_>>(), ["rm", "-rf", "{}"]);
    }

    #[test]
    fn stdin_readers() {
        assert!(reads_code_from_stdin(&lits("sh")));
        assert!(reads_code_from_stdin(&lits("bash -s -- x")));
        assert!(reads_code_from_stdin(&lits("python3 -")));
        assert!(!reads_code_from_stdin(&lits("python3 x.py")));
        assert!(!reads_code_from_stdin(&lits("cat")));
    }
}
