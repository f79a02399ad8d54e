//! Which environment variables a child process may see, and which names hold secrets.
//!
//! Child processes (sandboxed commands, stdio MCP servers) start from an empty environment plus
//! the [`SAFE_VARS`] allowlist: secrets in the server's own environment never reach a command a
//! model wrote. [`is_secret_name`] tells the leak detector which variables' values to look for
//! verbatim in outputs.

/// Variables a child process may inherit: locale, terminal, paths and tool settings that carry
/// no credentials.
pub const SAFE_VARS: &[&str] = &[
    "PATH",
    "HOME",
    "USER",
    "LOGNAME",
    "SHELL",
    "LANG",
    "LANGUAGE",
    "LC_ALL",
    "LC_CTYPE",
    "LC_MESSAGES",
    "LC_NUMERIC",
    "LC_TIME",
    "LC_COLLATE",
    "TERM",
    "COLORTERM",
    "NO_COLOR",
    "TZ",
    "TMPDIR",
    "PWD",
    "EDITOR",
    "PAGER",
    "COLUMNS",
    "LINES",
    "CARGO_HOME",
    "RUSTUP_HOME",
    "GOPATH",
    "GOROOT",
    "JAVA_HOME",
    "PYTHONPATH",
    "VIRTUAL_ENV",
    "NODE_PATH",
    "XDG_CACHE_HOME",
    "XDG_CONFIG_HOME",
    "XDG_DATA_HOME",
    "CI",
];

/// Whether `name` may be passed to a child process.
pub fn is_safe(name: &str) -> bool {
    SAFE_VARS.contains(&name) && !is_secret_name(name)
}

/// `(name, value)` pairs of `vars` that a child may see.
pub fn filter_safe<I, K, V>(vars: I) -> Vec<(K, V)>
where
    I: IntoIterator<Item = (K, V)>,
    K: AsRef<str>,
{
    vars.into_iter().filter(|(k, _)| is_safe(k.as_ref())).collect()
}

/// Variables that always hold secrets, whatever [`is_secret_name`]'s patterns say about their
/// names (URLs with passwords, key ids, webhook URLs, ...). The leak detector looks for their
/// values verbatim in every output.
pub const SECRET_VARS: &[&str] = &[
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "AZURE_CLIENT_SECRET",
    "AZURE_STORAGE_CONNECTION_STRING",
    "GOOGLE_API_KEY",
    "GITHUB_TOKEN",
    "GH_TOKEN",
    "GITLAB_TOKEN",
    "OPENAI_API_KEY",
    "ANTHROPIC_API_KEY",
    "HF_TOKEN",
    "HUGGING_FACE_HUB_TOKEN",
    "STRIPE_SECRET_KEY",
    "SLACK_BOT_TOKEN",
    "SLACK_WEBHOOK_URL",
    "DISCORD_WEBHOOK_URL",
    "NPM_TOKEN",
    "NODE_AUTH_TOKEN",
    "TWINE_PASSWORD",
    "CARGO_REGISTRY_TOKEN",
    "DOCKER_AUTH_CONFIG",
    "DATABASE_URL",
    "REDIS_URL",
    "MONGODB_URI",
    "MONGO_URL",
    "AMQP_URL",
    "SENTRY_DSN",
    "PGPASSWORD",
    "MYSQL_PWD",
    "VAULT_TOKEN",
    "CI_JOB_JWT",
    "ACTIONS_ID_TOKEN_REQUEST_TOKEN",
    "ACTIONS_RUNTIME_TOKEN",
];

/// Variables whose names look secret (`SESSION`, `AUTH`) but whose values are addresses, paths
/// or session types: treating them as secrets would redact every output that mentions them.
pub const NOT_SECRET_VARS: &[&str] = &[
    "DBUS_SESSION_BUS_ADDRESS",
    "DESKTOP_SESSION",
    "SESSION_MANAGER",
    "XDG_SESSION_ID",
    "XDG_SESSION_TYPE",
    "XDG_SESSION_CLASS",
    "XDG_SESSION_DESKTOP",
    "XDG_SESSION_PATH",
    "SSH_AUTH_SOCK",
    "XAUTHORITY",
    "GPG_AGENT_INFO",
    "KRB5CCNAME",
    "TOKENIZERS_PARALLELISM",
    "PASSWORD_STORE_DIR",
];

/// Whether a variable with this name holds a secret: one of [`SECRET_VARS`], or (unless it is one
/// of [`NOT_SECRET_VARS`] or names an author, `GIT_AUTHOR_NAME`) `*_KEY`, `*_TOKEN`, `*_SECRET`,
/// `*PASSWORD*`, `*PASSWD*`, `*_CREDENTIALS`, `*_PAT`, `*AUTH*`, `*COOKIE*`, `*_DSN`,
/// `*PRIVATE*`, `*SESSION*`, `*_KEY_ID`, `*_WEBHOOK_URL`, `*_DATABASE_URL`,
/// `*_CONNECTION_STRING` (case-insensitive).
pub fn is_secret_name(name: &str) -> bool {
    let upper = name.to_ascii_uppercase();
    if SECRET_VARS.contains(&upper.as_str()) {
        return true;
    }
    if NOT_SECRET_VARS.contains(&upper.as_str()) || upper.contains("AUTHOR") {
        return false;
    }
    const SUFFIXES: &[&str] = &[
        "_KEY",
        "_TOKEN",
        "_SECRET",
        "_CREDENTIALS",
        "_CREDENTIAL",
        "_PAT",
        "_DSN",
        "_APIKEY",
        "_KEY_ID",
        "_WEBHOOK_URL",
        "_DATABASE_URL",
        "_CONNECTION_STRING",
    ];
    const INFIXES: &[&str] =
        &["PASSWORD", "PASSWD", "SECRET", "TOKEN", "AUTH", "COOKIE", "PRIVATE", "SESSION", "API_KEY", "APIKEY"];
    SUFFIXES.iter().any(|s| upper.ends_with(s)) || INFIXES.iter().any(|s| upper.contains(s)) || upper == "KEY"
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_are_never_safe() {
        for name in ["AWS_SECRET_ACCESS_KEY", "GITHUB_TOKEN", "DB_PASSWORD", "OPENAI_API_KEY", "my_key", "SENTRY_DSN"] {
            assert!(is_secret_name(name), "{name}");
            assert!(!is_safe(name), "{name}");
        }
        for name in ["PATH", "HOME", "LANG", "TERM", "TZ"] {
            assert!(is_safe(name), "{name}");
            assert!(!is_secret_name(name), "{name}");
        }
        assert!(!is_safe("LD_PRELOAD"), "not on the allowlist");
        for name in ["DBUS_SESSION_BUS_ADDRESS", "SSH_AUTH_SOCK", "GIT_AUTHOR_NAME", "XAUTHORITY"] {
            assert!(!is_secret_name(name), "{name}");
        }
        for name in ["DATABASE_URL", "database_url", "AWS_ACCESS_KEY_ID", "SLACK_WEBHOOK_URL", "MAIN_DATABASE_URL"] {
            assert!(is_secret_name(name), "{name}");
        }
        let kept = filter_safe(vec![("PATH", "/bin"), ("GITHUB_TOKEN", "x"), ("LD_PRELOAD", "/x.so")]);
        assert_eq!(kept, vec![("PATH", "/bin")]);
    }
}
