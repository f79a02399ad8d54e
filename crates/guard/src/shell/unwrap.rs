//! Removing wrapper commands (`env`, `sudo`, `timeout`, `sh -c`, ...) to find the program that
//! really runs.

use super::CommandClass;
use super::classify::env_assignment_risk;
use super::word::{Arg, basename};

/// How many wrappers deep [`unwrap`] looks before giving up (and asking for approval).
const MAX_WRAPPERS: usize = 16;

/// What is left after removing wrappers.
#[derive(Debug, Default)]
pub(crate) struct Unwrapped {
    /// The remaining argv (the real command), or the whole argv if nothing was unwrapped.
    pub args: Vec<Arg>,
    /// Wrappers removed, outermost first, with their options.
    pub wrappers: Vec<String>,
    /// Assignments made by `env NAME=value`.
    pub assignments: Vec<Arg>,
    /// Minimum class imposed by the wrappers (`sudo` is Dangerous), with the reason.
    pub floor: Vec<(CommandClass, String)>,
    /// True when a wrapper appends arguments the analysis cannot see (`xargs`).
    pub unknown_args: bool,
    /// A script to parse instead of a command (`sh -c SCRIPT`, `eval ARGS`).
    pub script: Option<Arg>,
}

/// Option syntax of one wrapper command.
struct Opts {
    /// Short options that take a value (attached or as the next argument).
    short_req: &'static str,
    /// Short options whose value can only be attached (`xargs -i{}`).
    short_opt: &'static str,
    /// Long options that take a value (`--user root` or `--user=root`).
    long_req: &'static [&'static str],
    /// Whether a lone `-N` (a number) is an option (`nice -10`).
    numeric: bool,
}

const NO_OPTS: Opts = Opts { short_req: "", short_opt: "", long_req: &[], numeric: false };

/// Parsed options of a wrapper: index of the first operand and the options seen.
struct Parsed {
    first_operand: usize,
    options: Vec<(String, Option<String>)>,
    all_literal: bool,
}

/// Parses getopt-style options starting at `args[start]`.
fn parse_opts(args: &[Arg], start: usize, spec: &Opts) -> Parsed {
    let mut i = start;
    let mut options = Vec::new();
    let mut all_literal = true;
    while i < args.len() {
        let a = &args[i];
        let t = a.text.as_str();
        if !a.literal {
            all_literal = false;
        }
        if t == "--" {
            i += 1;
            break;
        }
        if let Some(long) = t.strip_prefix("--") {
            let (name, value) = match long.split_once('=') {
                Some((n, v)) => (n, Some(v.to_string())),
                None => (long, None),
            };
            let takes = spec.long_req.iter().any(|full| !name.is_empty() && full.starts_with(name));
            if takes && value.is_none() {
                let v = args.get(i + 1).map(|a| a.text.clone());
                options.push((format!("--{name}"), v));
                i += 2;
            } else {
                options.push((format!("--{name}"), value));
                i += 1;
            }
            continue;
        }
        if t.len() > 1 && t.starts_with('-') {
            let body = &t[1..];
            if spec.numeric && body.chars().all(|c| c.is_ascii_digit()) {
                options.push((t.to_string(), None));
                i += 1;
                continue;
            }
            let mut consumed_next = false;
            for (pos, c) in body.char_indices() {
                let rest = &body[pos + c.len_utf8()..];
                if spec.short_req.contains(c) {
                    if rest.is_empty() {
                        let v = args.get(i + 1).map(|a| a.text.clone());
                        options.push((format!("-{c}"), v));
                        consumed_next = true;
                    } else {
                        options.push((format!("-{c}"), Some(rest.to_string())));
                    }
                    break;
                }
                if spec.short_opt.contains(c) {
                    options.push((format!("-{c}"), (!rest.is_empty()).then(|| rest.to_string())));
                    break;
                }
                options.push((format!("-{c}"), None));
            }
            i += if consumed_next { 2 } else { 1 };
            continue;
        }
        break;
    }
    Parsed { first_operand: i.min(args.len()), options, all_literal }
}

fn has_opt(p: &Parsed, names: &[&str]) -> bool {
    p.options.iter().any(|(o, _)| names.contains(&o.as_str()))
}

fn opt_value<'a>(p: &'a Parsed, names: &[&str]) -> Option<&'a str> {
    p.options.iter().find(|(o, _)| names.contains(&o.as_str())).and_then(|(_, v)| v.as_deref())
}

fn label(args: &[Arg], end: usize) -> String {
    let name = args.first().map(|a| basename(&a.text).to_string()).unwrap_or_default();
    let mut parts = vec![name];
    parts.extend(args.iter().take(end).skip(1).map(|a| a.text.clone()));
    parts.join(" ")
}

/// The shells whose `-c` argument is a script.
pub(crate) fn is_shell(name: &str) -> bool {
    matches!(
        name,
        "sh" | "bash" | "zsh" | "dash" | "ksh" | "mksh" | "ash" | "yash" | "posh" | "fish" | "csh" | "tcsh" | "rbash"
    )
}

/// Joins words into one script (`eval a b` runs `a b`).
fn join_script(args: &[Arg]) -> Arg {
    let mut out = Arg { text: String::new(), literal: true, taint: Default::default() };
    for (n, a) in args.iter().enumerate() {
        if n > 0 {
            out.text.push(' ');
        }
        out.text.push_str(&a.text);
        out.literal &= a.literal;
        out.taint.merge(a.taint);
    }
    out
}

/// Removes wrappers from `args`, recursively.
pub(crate) fn unwrap(args: Vec<Arg>) -> Unwrapped {
    let mut u = Unwrapped { args, ..Default::default() };
    for _ in 0..MAX_WRAPPERS {
        if !step(&mut u) {
            return u;
        }
        if u.script.is_some() {
            return u;
        }
    }
    u.floor.push((CommandClass::NeedsApproval, "more than 16 nested wrapper commands".into()));
    u
}

/// Removes one wrapper. Returns false when `u.args` does not start with a wrapper.
fn step(u: &mut Unwrapped) -> bool {
    let Some(first) = u.args.first() else { return false };
    if !first.literal {
        return false;
    }
    let name = basename(&first.text).to_string();
    let args = &u.args;
    let (parsed, extra_floor, label_end, next): (Parsed, Option<(CommandClass, String)>, usize, usize) = match name
        .as_str()
    {
        "env" => {
            let p = parse_opts(
                args,
                1,
                &Opts { short_req: "uCSP", long_req: &["unset", "chdir", "split-string"], ..NO_OPTS },
            );
            if let Some(s) = opt_value(&p, &["-S", "--split-string"]) {
                // `env -S 'cmd args'` splits its argument into words: a script.
                let literal = p.all_literal;
                let mut script = Arg { text: s.to_string(), literal, taint: Default::default() };
                let rest = join_script(&args[p.first_operand.min(args.len())..]);
                if !rest.text.is_empty() {
                    script.text.push(' ');
                    script.text.push_str(&rest.text);
                    script.literal &= rest.literal;
                }
                u.wrappers.push("env -S".into());
                u.script = Some(script);
                return true;
            }
            let mut i = p.first_operand;
            while let Some(a) = args.get(i) {
                match a.text.split_once('=') {
                    Some((n, _)) if is_name(n) => {
                        if !a.literal {
                            u.floor.push((CommandClass::NeedsApproval, format!("env sets {n} from an expansion")));
                        }
                        if let Some(r) = env_assignment_risk(n) {
                            u.floor.push((CommandClass::NeedsApproval, r));
                        }
                        u.assignments.push(a.clone());
                        i += 1;
                    }
                    _ => break,
                }
            }
            (p, None, i, i)
        }
        "time" => {
            let p = parse_opts(args, 1, &Opts { short_req: "fo", long_req: &["format", "output"], ..NO_OPTS });
            let floor = opt_value(&p, &["-o", "--output"])
                .map(|f| (CommandClass::NeedsApproval, format!("time writes its report to {f}")));
            let n = p.first_operand;
            (p, floor, n, n)
        }
        "nice" => {
            let p = parse_opts(args, 1, &Opts { short_req: "n", long_req: &["adjustment"], numeric: true, ..NO_OPTS });
            let n = p.first_operand;
            (p, None, n, n)
        }
        "nohup" | "builtin" | "unbuffer" => {
            let p = parse_opts(args, 1, &NO_OPTS);
            let n = p.first_operand;
            (p, None, n, n)
        }
        "setsid" => {
            let p = parse_opts(args, 1, &NO_OPTS);
            let n = p.first_operand;
            (p, None, n, n)
        }
        "ionice" => {
            let p =
                parse_opts(args, 1, &Opts { short_req: "cnp", long_req: &["class", "classdata", "pid"], ..NO_OPTS });
            let n = p.first_operand;
            (p, None, n, n)
        }
        "timeout" => {
            let p = parse_opts(args, 1, &Opts { short_req: "ks", long_req: &["kill-after", "signal"], ..NO_OPTS });
            let n = p.first_operand;
            // The first operand is the duration.
            (p, None, n + 1, n + 1)
        }
        "stdbuf" => {
            let p = parse_opts(args, 1, &Opts { short_req: "ioe", long_req: &["input", "output", "error"], ..NO_OPTS });
            let n = p.first_operand;
            (p, None, n, n)
        }
        "xargs" => {
            let p = parse_opts(
                args,
                1,
                &Opts {
                    short_req: "aEdILnPs",
                    short_opt: "iel",
                    long_req: &["arg-file", "delimiter", "max-args", "max-procs", "max-chars", "process-slot-var"],
                    numeric: false,
                },
            );
            u.unknown_args = true;
            let n = p.first_operand;
            if n >= args.len() {
                // `xargs` alone runs `echo`.
                u.wrappers.push(label(args, n));
                u.args = vec![Arg::lit("echo")];
                return true;
            }
            (p, None, n, n)
        }
        "sudo" => {
            let p = parse_opts(
                args,
                1,
                &Opts {
                    short_req: "ugCDhprtTUR",
                    long_req: &[
                        "user",
                        "group",
                        "close-from",
                        "chdir",
                        "host",
                        "prompt",
                        "role",
                        "type",
                        "command-timeout",
                        "other-user",
                        "chroot",
                    ],
                    ..NO_OPTS
                },
            );
            let n = p.first_operand;
            if n >= args.len() || has_opt(&p, &["-e", "--edit"]) {
                return false;
            }
            (p, Some((CommandClass::Dangerous, "runs with elevated privileges (sudo)".into())), n, n)
        }
        "doas" | "pkexec" | "run0" => {
            let p = parse_opts(args, 1, &Opts { short_req: "uC", long_req: &["user"], ..NO_OPTS });
            let n = p.first_operand;
            if n >= args.len() {
                return false;
            }
            (p, Some((CommandClass::Dangerous, format!("runs with elevated privileges ({name})"))), n, n)
        }
        "su" | "runuser" => {
            let p = parse_opts(
                args,
                1,
                &Opts { short_req: "cgGsuw", long_req: &["command", "group", "shell", "user"], ..NO_OPTS },
            );
            let Some(cmd) = opt_value(&p, &["-c", "--command"]) else { return false };
            let literal = p.all_literal;
            u.floor.push((CommandClass::Dangerous, format!("runs as another user ({name})")));
            u.wrappers.push(format!("{name} -c"));
            u.script = Some(Arg { text: cmd.to_string(), literal, taint: Default::default() });
            return true;
        }
        "busybox" => {
            let p = parse_opts(args, 1, &NO_OPTS);
            let n = p.first_operand;
            if n >= args.len() || !p.options.is_empty() {
                return false;
            }
            (p, None, n, n)
        }
        "command" => {
            let p = parse_opts(args, 1, &NO_OPTS);
            if has_opt(&p, &["-v", "-V"]) {
                // `command -v name` only looks the name up.
                return false;
            }
            let n = p.first_operand;
            (p, None, n, n)
        }
        "exec" => {
            let p = parse_opts(args, 1, &Opts { short_req: "a", ..NO_OPTS });
            let n = p.first_operand;
            (p, None, n, n)
        }
        "chroot" => {
            let p = parse_opts(args, 1, &Opts { long_req: &["userspec", "groups"], ..NO_OPTS });
            let n = p.first_operand;
            if n + 1 >= args.len() {
                return false;
            }
            (p, Some((CommandClass::NeedsApproval, "runs inside chroot".into())), n + 1, n + 1)
        }
        "eval" => {
            // `eval word...` where no word has shell syntax runs the words as a simple command:
            // unwrap in place (keeps `eval eval ... cmd` linear).
            if args.len() > 1 && args[1..].iter().all(|a| a.literal && !has_shell_syntax(&a.text)) {
                u.wrappers.push("eval".into());
                u.args.remove(0);
                return true;
            }
            let script = join_script(&args[1..]);
            u.wrappers.push("eval".into());
            u.script = Some(script);
            return true;
        }
        "trap" => {
            // `trap ACTION SIGNAL...`: ACTION is a script run later.
            let action = args.get(1).filter(|a| !a.text.starts_with('-'));
            let Some(action) = action.filter(|_| args.len() >= 3) else { return false };
            let action = action.clone();
            u.floor.push((CommandClass::NeedsApproval, "trap runs code when a signal or exit happens".into()));
            let signals: Vec<&str> = args[2..].iter().map(|a| a.text.as_str()).collect();
            u.wrappers.push(format!("trap ... {}", signals.join(" ")));
            u.script = Some(action);
            return true;
        }
        "watch" => {
            let p = parse_opts(args, 1, &Opts { short_req: "nqd", long_req: &["interval", "differences"], ..NO_OPTS });
            let n = p.first_operand;
            if n >= args.len() {
                return false;
            }
            let script = join_script(&args[n..]);
            u.floor.push((CommandClass::NeedsApproval, "watch runs the command repeatedly".into()));
            u.wrappers.push(label(args, n));
            u.script = Some(script);
            return true;
        }
        n if is_shell(n) => {
            let p = parse_opts(
                args,
                1,
                &Opts { short_req: "oO", long_req: &["rcfile", "init-file", "command"], ..NO_OPTS },
            );
            let command_mode = p.options.iter().any(|(o, _)| o == "-c" || o == "--command");
            if !command_mode {
                return false;
            }
            let Some(script) = args.get(p.first_operand) else {
                return false;
            };
            let mut script = script.clone();
            script.literal &= p.all_literal;
            u.wrappers.push(format!("{name} -c"));
            u.script = Some(script);
            return true;
        }
        _ => return false,
    };
    if !parsed.all_literal {
        u.floor.push((CommandClass::NeedsApproval, format!("options of {name} are not literal")));
    }
    if let Some(f) = extra_floor {
        u.floor.push(f);
    }
    let label_end = label_end.min(u.args.len());
    let next = next.min(u.args.len());
    if next >= u.args.len() {
        // A wrapper with nothing to run (`env`, `nice`): classify the wrapper itself.
        return false;
    }
    u.wrappers.push(label(&u.args, label_end.max(1)));
    u.args.drain(..next);
    true
}

/// Whether re-parsing `s` as shell input could give anything but the same single word.
fn has_shell_syntax(s: &str) -> bool {
    s.is_empty()
        || s.chars().any(|c| {
            c.is_whitespace()
                || matches!(
                    c,
                    ';' | '&'
                        | '|'
                        | '<'
                        | '>'
                        | '('
                        | ')'
                        | '$'
                        | '`'
                        | '"'
                        | '\''
                        | '\\'
                        | '*'
                        | '?'
                        | '['
                        | ']'
                        | '{'
                        | '}'
                        | '~'
                        | '#'
                        | '='
                        | '!'
                )
        })
}

/// Whether `s` is a valid shell variable name.
pub(crate) fn is_name(s: &str) -> bool {
    let mut chars = s.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lits(s: &str) -> Vec<Arg> {
        s.split_whitespace().map(Arg::lit).collect()
    }

    fn argv(u: &Unwrapped) -> Vec<&str> {
        u.args.iter().map(|a| a.text.as_str()).collect()
    }

    #[test]
    fn nested_wrappers() {
        let u = unwrap(lits("/usr/bin/env -i FOO=1 nice -n 5 timeout -s KILL 10 stdbuf -oL nohup rm -rf x"));
        assert_eq!(argv(&u), ["rm", "-rf", "x"]);
        assert_eq!(u.wrappers, ["env -i FOO=1", "nice -n 5", "timeout -s KILL 10", "stdbuf -oL", "nohup"]);
        assert_eq!(u.assignments.len(), 1);
    }

    #[test]
    fn sudo_and_busybox() {
        let u = unwrap(lits("sudo -u root busybox rm -rf /"));
        assert_eq!(argv(&u), ["rm", "-rf", "/"]);
        assert!(u.floor.iter().any(|(c, _)| *c == CommandClass::Dangerous));
    }

    #[test]
    fn shell_c() {
        let u = unwrap(lits("time bash -lc ls"));
        assert_eq!(u.script.map(|s| s.text).as_deref(), Some("ls"));
        assert_eq!(u.wrappers, ["time", "bash -c"]);
        let u = unwrap(lits("bash script.sh"));
        assert!(u.script.is_none());
        assert_eq!(argv(&u), ["bash", "script.sh"]);
    }

    #[test]
    fn xargs_and_env_alone() {
        let u = unwrap(lits("xargs -0 -n1 -I{} rm {}"));
        assert_eq!(argv(&u), ["rm", "{}"]);
        assert!(u.unknown_args);
        let u = unwrap(lits("env"));
        assert_eq!(argv(&u), ["env"]);
        let u = unwrap(lits("command -v git"));
        assert_eq!(argv(&u), ["command", "-v", "git"]);
    }
}
