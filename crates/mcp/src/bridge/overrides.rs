//! A team gateway grant's `config_overrides`: per-caller settings of one bridged server (seed
//! 000 §12), checked when the grant is made and merged over the server's entry when a call
//! of that caller goes out.
//!
//! An override may change how the server runs for its caller, never which server it is: the
//! program, its endpoint, its working folder, its sandbox, whose credentials it uses and the
//! names its tools have are the entry's alone. What may be overridden:
//!
//! - `env`: merged over the server's `env` (a key of the grant wins), `${NAME}` expanded from
//!   toolgate's environment as for the server; never a variable that chooses what code a program
//!   loads or runs (`PATH`, `LD_PRELOAD`, `NODE_OPTIONS`, `PYTHONPATH`, ...) or where its network
//!   goes (the proxy variables the sandbox sets);
//! - `args`: appended after the server's own `args` (they reach the program the entry starts,
//!   never replace its own), and left out of what the sandbox lets the server read;
//! - `headers`: merged over the server's `headers` (a credential-looking one only on a
//!   `shared` server, as for the entry itself);
//! - `timeout_secs`: a deadline for the caller's calls, within the server's (it can shorten it,
//!   not lengthen it).

use std::collections::BTreeMap;

use serde_json::Value;

use super::ServerConfig;

/// The settings a grant may override, in the order an error lists them.
pub const OVERRIDABLE: [&str; 4] = ["env", "args", "headers", "timeout_secs"];

/// Most entries of one override list or table, and the longest value.
const MAX_ENTRIES: usize = 64;
const MAX_VALUE_BYTES: usize = 4096;
/// The longest deadline (a day), as for `timeout_secs` in the entry.
const MAX_TIMEOUT_SECS: f64 = 86_400.0;

/// Environment variables an override never sets: each chooses what code a program loads or
/// runs, or where its network goes, so setting one could run another program than the entry's
/// or route around its sandbox's proxy. A name ending in `*` covers every name it starts.
const PROTECTED_ENV: &[&str] = &[
    "PATH",
    "LD_*",
    "DYLD_*",
    "NODE_OPTIONS",
    "NODE_PATH",
    "PYTHON*",
    "PERL5*",
    "PERLLIB",
    "RUBYOPT",
    "RUBYLIB",
    "BASH_ENV",
    "ENV",
    "JAVA_TOOL_OPTIONS",
    "_JAVA_OPTIONS",
    "JDK_JAVA_OPTIONS",
    "CLASSPATH",
    "GCONV_PATH",
    "npm_config_*",
    "NPM_CONFIG_*",
    "UV_*",
    "PIP_*",
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "ALL_PROXY",
    "NO_PROXY",
    "http_proxy",
    "https_proxy",
    "all_proxy",
    "no_proxy",
    "TMPDIR",
    "PWD",
    "HOME",
];

/// A grant's overrides of one server's settings, checked.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ServerOverrides {
    /// Merged over the server's `env`.
    pub env: BTreeMap<String, String>,
    /// Appended after the server's `args`.
    pub args: Vec<String>,
    /// Merged over the server's `headers`.
    pub headers: BTreeMap<String, String>,
    /// The caller's deadline, within the server's.
    pub timeout_secs: Option<f64>,
}

impl ServerOverrides {
    /// Checks a grant's `config_overrides` (a JSON object; `null` and `{}` override nothing).
    /// The error names the key and why it is refused.
    pub fn parse(value: &Value) -> Result<ServerOverrides, String> {
        let object = match value {
            Value::Null => return Ok(ServerOverrides::default()),
            Value::Object(object) => object,
            _ => return Err("the server settings of a grant are a JSON object (`{\"env\": {\"MODE\": \"x\"}}`)".into()),
        };
        let mut out = ServerOverrides::default();
        for (key, value) in object {
            match key.as_str() {
                "env" => {
                    out.env = string_table(key, value)?;
                    for name in out.env.keys() {
                        check_env_name(name)?;
                    }
                }
                "args" => out.args = string_list(key, value)?,
                "headers" => {
                    out.headers = string_table(key, value)?;
                    for name in out.headers.keys() {
                        if http::HeaderName::try_from(name.as_str()).is_err() {
                            return Err(format!("`headers`: `{}` is not an HTTP header name", shown(name)));
                        }
                    }
                }
                "timeout_secs" => {
                    let secs = value.as_f64().filter(|s| s.is_finite() && *s > 0.0 && *s <= MAX_TIMEOUT_SECS);
                    out.timeout_secs = Some(secs.ok_or_else(|| {
                        format!("`timeout_secs` is a number of seconds above 0 and at most {MAX_TIMEOUT_SECS}")
                    })?);
                }
                other => return Err(refusal(other)),
            }
        }
        Ok(out)
    }

    /// Whether it changes nothing.
    pub fn is_empty(&self) -> bool {
        *self == ServerOverrides::default()
    }

    /// Whether the caller's calls need a connection of their own (its settings change how the
    /// server is started or reached): `env`, `args` or `headers`.
    pub fn needs_own_connection(&self) -> bool {
        !(self.env.is_empty() && self.args.is_empty() && self.headers.is_empty())
    }

    /// What names the connection these overrides open: calls whose overrides have the same key
    /// share it, no others.
    pub(crate) fn connection_key(&self) -> String {
        let key = serde_json::json!({"env": self.env, "args": self.args, "headers": self.headers});
        key.to_string()
    }

    /// Why these `args` cannot be appended to `server`'s, if they cannot: an entry with a
    /// command and no arguments of its own would take the first appended one as what to run
    /// (`npx PACKAGE`, `python SCRIPT`), so a grant's arguments would choose another program.
    pub fn args_problem(&self, server: &ServerConfig) -> Option<String> {
        (!self.args.is_empty() && server.command.is_some() && server.args.is_empty()).then(|| {
            "its `args` would be the program's first arguments (its entry has none), which can choose what it \
             runs; give the entry the arguments that start the server, then a grant may add to them"
                .to_owned()
        })
    }

    /// `server` with these overrides merged in.
    pub fn apply(&self, server: &ServerConfig) -> ServerConfig {
        let mut merged = server.clone();
        merged.env.extend(self.env.iter().map(|(k, v)| (k.clone(), v.clone())));
        merged.args.extend(self.args.iter().cloned());
        merged.headers.extend(self.headers.iter().map(|(k, v)| (k.clone(), v.clone())));
        merged
    }
}

/// Why a key is not one a grant may set.
fn refusal(key: &str) -> String {
    let why = match key {
        "command" | "url" | "transport" => "it says which server this is (another program or endpoint)",
        "cwd" => "it says where the program runs, which its sandbox reads",
        "sandbox" => "the server's sandbox is its entry's alone; a grant cannot widen or change it",
        "shared" => "it says whose credentials the server uses",
        "oauth" | "user_key_header" | "user_key_prefix" => "it says how the gateway signs in to the server",
        "prefix" => "it names the server's tools for every caller",
        "enabled" => "a grant is switched off with `toolgate admin grant disable ID`",
        "tools" => "a grant's own `--tool` and `--deny-tool` lists choose the server's tools it gives",
        _ => {
            return format!(
                "`{}` is not a setting a grant may override (they are: {})",
                shown(key),
                OVERRIDABLE.join(", ")
            );
        }
    };
    format!("`{key}` cannot be overridden by a grant: {why} (a grant may override: {})", OVERRIDABLE.join(", "))
}

/// A name from the grant, shown in an error: at most 64 characters, escaped.
fn shown(text: &str) -> String {
    text.chars().take(64).collect::<String>().escape_debug().to_string()
}

fn check_env_name(name: &str) -> Result<(), String> {
    let valid = !name.is_empty()
        && name.len() <= 128
        && !name.starts_with(|c: char| c.is_ascii_digit())
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_');
    if !valid {
        return Err(format!("`env`: `{}` is not an environment variable name", shown(name)));
    }
    let protected = PROTECTED_ENV.iter().find(|p| match p.strip_suffix('*') {
        Some(prefix) => name.starts_with(prefix),
        None => **p == name,
    });
    match protected {
        Some(_) => Err(format!(
            "`env`: `{name}` cannot be set by a grant: it chooses what code a program loads or runs, or where its \
             network goes"
        )),
        None => Ok(()),
    }
}

fn check_value(key: &str, value: &str) -> Result<(), String> {
    if value.len() > MAX_VALUE_BYTES || value.contains('\0') {
        return Err(format!("`{key}`: a value is at most {MAX_VALUE_BYTES} bytes, without NUL"));
    }
    Ok(())
}

fn string_table(key: &str, value: &Value) -> Result<BTreeMap<String, String>, String> {
    let Some(object) = value.as_object() else { return Err(format!("`{key}` is a table of names to strings")) };
    if object.len() > MAX_ENTRIES {
        return Err(format!("`{key}` has at most {MAX_ENTRIES} entries"));
    }
    object
        .iter()
        .map(|(name, v)| {
            let v = v.as_str().ok_or_else(|| format!("`{key}`: the value of `{}` is not a string", shown(name)))?;
            check_value(key, v)?;
            Ok((name.clone(), v.to_owned()))
        })
        .collect()
}

fn string_list(key: &str, value: &Value) -> Result<Vec<String>, String> {
    let Some(items) = value.as_array() else { return Err(format!("`{key}` is a list of strings")) };
    if items.len() > MAX_ENTRIES {
        return Err(format!("`{key}` has at most {MAX_ENTRIES} entries"));
    }
    items
        .iter()
        .map(|v| {
            let v = v.as_str().ok_or_else(|| format!("`{key}` is a list of strings"))?;
            check_value(key, v)?;
            Ok(v.to_owned())
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn settings_that_change_which_server_it_is_are_refused_with_the_key_and_why() {
        for (key, value, why) in [
            ("command", json!("/bin/sh"), "which server"),
            ("url", json!("http://127.0.0.1:9/mcp"), "which server"),
            ("transport", json!("sse"), "which server"),
            ("cwd", json!("/"), "where the program runs"),
            ("sandbox", json!({"enabled": false}), "sandbox"),
            ("shared", json!(true), "whose credentials"),
            ("oauth", json!({}), "signs in"),
            ("user_key_header", json!("Authorization"), "signs in"),
            ("prefix", json!(""), "names the server's tools"),
            ("tools", json!({"allow": ["x"]}), "--tool"),
            ("enabled", json!(false), "grant disable"),
            ("colour", json!("red"), "not a setting"),
        ] {
            let err = ServerOverrides::parse(&json!({ key: value })).unwrap_err();
            assert!(err.contains(&format!("`{key}`")) && err.contains(why), "{key}: {err}");
            assert!(err.contains("env, args, headers, timeout_secs"), "{key}: {err}");
        }
    }

    #[test]
    fn environment_variables_that_choose_code_or_network_are_refused() {
        for name in ["PATH", "LD_PRELOAD", "NODE_OPTIONS", "PYTHONPATH", "HTTPS_PROXY", "npm_config_registry"] {
            let err = ServerOverrides::parse(&json!({"env": {name: "x"}})).unwrap_err();
            assert!(err.contains(name) && err.contains("cannot be set"), "{name}: {err}");
        }
        for bad in ["", "1X", "A-B", "A B"] {
            assert!(ServerOverrides::parse(&json!({"env": {bad: "x"}})).is_err(), "{bad:?}");
        }
        assert!(ServerOverrides::parse(&json!({"env": {"MODE": 1}})).unwrap_err().contains("not a string"));
        assert!(ServerOverrides::parse(&json!({"env": {"MODE": "a\u{0}b"}})).is_err());
        assert!(ServerOverrides::parse(&json!({"headers": {"Bad Header": "x"}})).is_err());
        assert!(ServerOverrides::parse(&json!({"args": "--x"})).is_err());
        assert!(ServerOverrides::parse(&json!({"timeout_secs": -1})).is_err());
        assert!(ServerOverrides::parse(&json!({"timeout_secs": 1e9})).is_err());
        assert!(ServerOverrides::parse(&json!(["env"])).is_err());
    }

    #[test]
    fn arguments_are_never_the_first_ones_of_the_entrys_program() {
        let o = ServerOverrides::parse(&json!({"args": ["evil-package"]})).unwrap();
        let bare = ServerConfig { command: Some("npx".into()), ..Default::default() };
        assert!(o.args_problem(&bare).is_some_and(|p| p.contains("first arguments")));
        let started = ServerConfig { args: vec!["-y".into(), "@scope/server".into()], ..bare };
        assert!(o.args_problem(&started).is_none());
        assert!(
            ServerOverrides::parse(&json!({"env": {"MODE": "a"}}))
                .unwrap()
                .args_problem(&ServerConfig { command: Some("npx".into()), ..Default::default() })
                .is_none()
        );
    }

    #[test]
    fn overrides_merge_over_the_entry_and_leave_what_it_is_alone() {
        let server = ServerConfig {
            command: Some("srv".into()),
            args: vec!["--serve".into()],
            env: [("MODE".to_owned(), "plain".to_owned()), ("KEEP".to_owned(), "1".to_owned())].into(),
            ..Default::default()
        };
        let o =
            ServerOverrides::parse(&json!({"env": {"MODE": "a"}, "args": ["--verbose"], "timeout_secs": 5})).unwrap();
        let merged = o.apply(&server);
        assert_eq!(merged.env["MODE"], "a", "the grant's value wins");
        assert_eq!(merged.env["KEEP"], "1");
        assert_eq!(merged.args, ["--serve", "--verbose"], "appended, never replaced");
        assert_eq!((merged.command, merged.sandbox, merged.cwd), (server.command, server.sandbox, server.cwd));
        assert!(o.needs_own_connection());
        let deadline_only = ServerOverrides::parse(&json!({"timeout_secs": 5})).unwrap();
        assert!(!deadline_only.needs_own_connection() && !deadline_only.is_empty());
        assert!(ServerOverrides::parse(&json!({})).unwrap().is_empty());
        assert!(ServerOverrides::parse(&Value::Null).unwrap().is_empty());
        let same = ServerOverrides::parse(&json!({"args": ["--verbose"], "env": {"MODE": "a"}})).unwrap();
        assert_eq!(same.connection_key(), o.connection_key(), "the key ignores order and the deadline");
        let other = ServerOverrides::parse(&json!({"env": {"MODE": "b"}})).unwrap();
        assert_ne!(other.connection_key(), o.connection_key());
    }

    #[test]
    fn a_credential_header_override_needs_a_shared_server() {
        let server = ServerConfig { url: Some("https://mcp.example.com/mcp".into()), ..Default::default() };
        let o = ServerOverrides::parse(&json!({"headers": {"X-Api-Key": "k"}})).unwrap();
        assert!(o.apply(&server).gateway_problem("gh").is_some_and(|p| p.contains("X-Api-Key")));
        let shared = ServerConfig { shared: true, ..server.clone() };
        assert!(o.apply(&shared).gateway_problem("gh").is_none());
        let plain = ServerOverrides::parse(&json!({"headers": {"X-Org": "acme"}})).unwrap();
        assert!(plain.apply(&server).gateway_problem("gh").is_none());
    }
}
