//! The `toolgate` command: a thin CLI over the `toolgate` library. Command-line parsing
//! (clap) here, one module per subcommand; `main` turns `run`'s result into an exit code.

/// `println!` for command output that survives a closed pipe (`toolgate tools | head`): the
/// rest of the output is dropped, and the command still finishes (audit records are written),
/// where `println!` would panic.
macro_rules! outln {
    ($($arg:tt)*) => {
        $crate::print_line(format_args!($($arg)*))
    };
}

mod admin;
mod admin_config;
mod admin_grants;
mod agent;
mod approvals;
mod audit;
mod call;
mod extensions;
mod gateway_page;
mod logging;
mod mcp;
mod memory;
mod models;
mod nodes;
mod policy;
mod sandbox;
mod serve;
mod terminal;
mod timings;
mod tools;
mod upstream_signin;
mod wasm;

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::{Parser, Subcommand};
use toolgate::Gate;
use toolgate::config::{ApprovalMode, Config, ConfigSources};

/// toolgate: a secure, fast tool runtime for AI agents.
#[derive(Debug, Parser)]
#[command(name = "toolgate", version, about, long_about = None)]
pub(crate) struct Cli {
    #[command(flatten)]
    global: GlobalArgs,
    #[command(subcommand)]
    command: Option<Command>,
}

/// Flags every subcommand honours.
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct GlobalArgs {
    /// The workspace every path is confined to (default: the current directory).
    #[arg(long, global = true, value_name = "DIR")]
    workspace: Option<PathBuf>,
    /// A config file to use instead of `<workspace>/toolgate.toml`.
    #[arg(long, global = true, value_name = "FILE")]
    config: Option<PathBuf>,
    /// Tool profile: minimal, coding, messaging or full.
    #[arg(long, global = true, value_name = "P")]
    profile: Option<String>,
    /// The agent making calls (default `main`).
    #[arg(long, global = true, value_name = "A")]
    agent: Option<String>,
    /// The model provider the calls come from (openai, anthropic, gemini, ...).
    #[arg(long, global = true, value_name = "P")]
    provider: Option<String>,
    /// Approval mode: untrusted, on-request or never.
    #[arg(long, global = true, value_name = "MODE")]
    approval: Option<ApprovalMode>,
    /// The tool language callers speak: toolgate (default), goclaw, linggen, gomini, openclaw or
    /// ironclaw (docs/dialects.md).
    #[arg(long, global = true, value_name = "NAME")]
    dialect: Option<String>,
    /// Print how long each start-up phase took to stderr when the command ends (config, store,
    /// registry, policy, runtime, the call, shutdown); also `TOOLGATE_TIMINGS=1`.
    #[arg(long, global = true, env = "TOOLGATE_TIMINGS", value_parser = clap::builder::BoolishValueParser::new())]
    timings: bool,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// List the tools this caller can see, or export them for a provider.
    Tools(tools::Args),
    /// Run one tool call through the whole pipeline.
    Call(call::Args),
    /// Show the audit log.
    Audit(audit::Args),
    /// Serve the tools to MCP clients over stdio (default) or Streamable HTTP (`--http`).
    Serve(serve::Args),
    /// Manage the external MCP servers whose tools the gate bridges in.
    #[command(subcommand)]
    Mcp(mcp::Command),
    /// List or revoke "allow always" approval grants.
    #[command(subcommand)]
    Approvals(approvals::Command),
    /// List or install the embedding models of memory search.
    #[command(subcommand)]
    Models(models::Command),
    /// Pair with other `toolgate serve` nodes, which the `nodes` tool runs tools on.
    #[command(subcommand)]
    Nodes(nodes::Command),
    /// Index the workspace's memory notes now, with a progress bar.
    #[command(subcommand)]
    Memory(memory::Command),
    /// Inspect the tool policy.
    #[command(subcommand)]
    Policy(policy::Command),
    /// Run configured agents and read their sessions (`[agents.NAME]`, docs/agents.md).
    #[command(subcommand)]
    Agent(agent::Command),
    /// Show what the sandbox can enforce on this machine and how commands run here.
    #[command(subcommand)]
    Sandbox(sandbox::Command),
    /// Install, list, inspect or remove WASM tools (components of the `toolgate:tool` world).
    #[command(subcommand)]
    Wasm(wasm::Command),
    /// Manage a team gateway's users, groups, agents and API keys (docs/gateway.md).
    #[command(subcommand)]
    Admin(admin::Command),
}

pub(crate) fn run() -> anyhow::Result<ExitCode> {
    let start = std::time::Instant::now();
    let cli = parse_call(std::env::args_os().collect()).unwrap_or_else(Cli::parse);
    if cli.global.timings {
        timings::enable(start);
    }
    logging::init();
    timings::lap("logging");
    let mut runtime = match &cli.command {
        // One call, then exit: a current-thread runtime starts no worker threads (blocking work
        // still has its pool), which a single call never needs.
        Some(Command::Call(_)) => tokio::runtime::Builder::new_current_thread(),
        _ => tokio::runtime::Builder::new_multi_thread(),
    };
    if let Some(Command::Serve(args)) = &cli.command {
        // Over stdio, one client, one request at a time: a second worker only wakes up for every
        // task rmcp spawns and hands it back (stdio echo median 105 -> 50 µs, `cargo xtask bench
        // mcp`). Blocking work (file tools, `spawn_blocking`) still has its own pool.
        runtime.worker_threads(if args.is_stdio() { 1 } else { http_workers() });
    }
    let runtime = runtime.enable_all().build().context("cannot start the async runtime")?;
    timings::lap("tokio runtime");
    let code = runtime.block_on(async move {
        let code = match cli.command {
            Some(Command::Tools(args)) => tools::run(&cli.global, args).await,
            Some(Command::Call(args)) => call::run(&cli.global, args).await,
            Some(Command::Audit(args)) => audit::run(&cli.global, args),
            Some(Command::Serve(args)) => serve::run(&cli.global, args).await,
            Some(Command::Policy(command)) => policy::run(&cli.global, command),
            Some(Command::Agent(command)) => agent::run(&cli.global, command).await,
            Some(Command::Sandbox(command)) => sandbox::run(&cli.global, command),
            Some(Command::Approvals(command)) => approvals::run(&cli.global, command),
            Some(Command::Nodes(command)) => nodes::run(&cli.global, command),
            Some(Command::Mcp(command)) => mcp::run(&cli.global, command).await,
            Some(Command::Models(command)) => models::run(&cli.global, command).await,
            Some(Command::Memory(command)) => memory::run(&cli.global, command),
            Some(Command::Wasm(command)) => wasm::run(&cli.global, command).await,
            Some(Command::Admin(command)) => admin::run(&cli.global, command),
            None => {
                tools::welcome(&cli.global)?;
                serve::run_default(&cli.global).await
            }
        };
        logging::stop_traces().await;
        code
    });
    // The command is done (a server has shut its gate down and flushed the audit log), so do not
    // wait on blocking threads still busy: dropping the runtime would wait for every one, and a
    // blocking read of stdin (`serve` over stdio when stdin and stdout are not both pipes: a
    // file, /dev/null, a socket pair from Node) returns only when the client closes stdin, so
    // after a signal the process would live on until then. Whatever they still hold dies with
    // the process (every child toolgate started does too, ARCHITECTURE.md).
    runtime.shutdown_timeout(RUNTIME_SHUTDOWN_GRACE);
    timings::lap("runtime shutdown");
    timings::print();
    code
}

/// `toolgate [GLOBAL FLAGS] call ...` parsed against the global flags and `call` alone: clap
/// makes every argument of every subcommand (over 300) before it parses, which each one-shot call
/// would pay at start. `None` for any other command, and for anything the short parse does not
/// accept (an error, `--help`, `--version`): the whole command then parses it, and says the
/// same as it always did.
fn parse_call(args: Vec<std::ffi::OsString>) -> Option<Cli> {
    use clap::{Args, FromArgMatches};
    let globals = GlobalArgs::augment_args(clap::Command::new("toolgate"));
    // The first word that is not a global flag (as `GlobalArgs` declares them) or its value must be
    // `call`.
    let mut words = args.iter().skip(1);
    loop {
        let word = words.next()?.to_str()?;
        if word == "call" {
            break;
        }
        let flag = word.strip_prefix("--")?;
        let (name, inline_value) = flag.split_once('=').map_or((flag, false), |(name, _)| (name, true));
        let global = globals.get_arguments().find(|a| a.get_long() == Some(name))?;
        if !inline_value && global.get_action().takes_values() {
            words.next()?;
        }
    }
    let command = globals.subcommand(call::Args::augment_args(clap::Command::new("call")));
    let matches = command.try_get_matches_from(args).ok()?;
    Cli::from_arg_matches(&matches).ok()
}

/// Async workers of `serve --http`: one per core but one, which is left to what does the work
/// of a call off the async threads (the blocking pool's file tools and sandbox starts, the audit
/// writer, SQLite). Each request hops between several tasks (the connection, rmcp's session
/// worker, the call); with a worker on every core, each hop can wake an idle worker on the other
/// core. On this project's 2-core machine one worker served one client's echo in 323 instead of
/// 397 µs (median) with 6,675 instead of 16,067 context switches per 2,200 calls, and 64 clients
/// at 318-322 instead of 273-301 calls/s (docs/benchmarks.md, MCP). `TOKIO_WORKER_THREADS` sets
/// it, as for any Tokio program.
fn http_workers() -> usize {
    let set = std::env::var("TOKIO_WORKER_THREADS").ok().and_then(|n| n.parse::<usize>().ok());
    set.filter(|&n| n > 0)
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get().saturating_sub(1).max(1)))
}

/// How long the runtime's threads get to end after the command is done; only a thread blocked
/// outside toolgate's control (a read of stdin) ever uses it up.
const RUNTIME_SHUTDOWN_GRACE: std::time::Duration = std::time::Duration::from_millis(200);

/// Writes one line to stdout; see [`outln!`]. Errors (a closed pipe, a full disk) end the
/// output quietly: the command's result does not depend on whether anyone reads it.
pub(crate) fn print_line(args: std::fmt::Arguments<'_>) {
    use std::io::Write;
    let _ = writeln!(std::io::stdout().lock(), "{args}");
}

impl GlobalArgs {
    pub(crate) fn workspace(&self) -> anyhow::Result<PathBuf> {
        let dir = match &self.workspace {
            Some(dir) => dir.clone(),
            None => std::env::current_dir().context("cannot read the current directory")?,
        };
        std::fs::canonicalize(&dir).with_context(|| format!("workspace {} does not exist", dir.display()))
    }

    /// The file named with `--config`, if any.
    pub(crate) fn config_file(&self) -> Option<&std::path::Path> {
        self.config.as_deref()
    }

    /// Loads every config layer, the flags last.
    pub(crate) fn load_config(&self) -> anyhow::Result<Config> {
        self.load_config_with(None)
    }

    /// With `[store] url`, the configuration several nodes share (`toolgate::shared_config`):
    /// this process's layers with the sections stored in the database on top.
    pub(crate) fn shared_config(
        &self,
        config: &Config,
    ) -> anyhow::Result<Option<std::sync::Arc<toolgate::shared_config::SharedConfig>>> {
        if config.store.url.is_none() {
            return Ok(None);
        }
        let global = self.clone();
        let load_with: toolgate::shared_config::LoadWith =
            Box::new(move |shared| global.load_config_with(shared).map_err(|e| format!("{e:#}")));
        toolgate::shared_config::SharedConfig::open(&config.store, load_with)
            .map_err(|e| anyhow::anyhow!("cannot read the shared configuration: {e}"))
    }

    /// Every config layer and, with `[store] url`, the sections every node shares on top (a
    /// node that cannot read them does not start: it would run a policy the others do not),
    /// with the shared configuration to follow.
    pub(crate) fn load_config_shared(
        &self,
    ) -> anyhow::Result<(Config, Option<std::sync::Arc<toolgate::shared_config::SharedConfig>>)> {
        let config = self.load_config()?;
        match self.shared_config(&config)? {
            Some(shared) => Ok((shared.load().map_err(|e| anyhow::anyhow!("{e}"))?, Some(shared))),
            None => Ok((config, None)),
        }
    }

    /// [`GlobalArgs::load_config`] with `shared` (the sections the nodes share) over every layer.
    fn load_config_with(&self, shared: Option<&toml::Table>) -> anyhow::Result<Config> {
        let workspace = self.workspace()?;
        let mut sources = ConfigSources::standard(&workspace, self.config.as_deref());
        let mut flag = |key: &str, value: Option<String>| {
            if let Some(v) = value {
                sources.flags.push((key.to_owned(), toml::Value::String(v)));
            }
        };
        flag("tools.profile", self.profile.clone());
        flag("gate.dialect", self.dialect.clone());
        flag("identity.agent", self.agent.clone());
        flag("identity.provider", self.provider.clone());
        flag(
            "approval.mode",
            self.approval.map(|m| match m {
                ApprovalMode::Untrusted => "untrusted".to_owned(),
                ApprovalMode::OnRequest => "on-request".to_owned(),
                ApprovalMode::Never => "never".to_owned(),
            }),
        );
        Ok(sources.load_with_shared(self.config.as_deref(), shared)?)
    }

    /// The workspace's state database (`.toolgate/state.db`) and its areas, the shared ones in
    /// PostgreSQL with `[store] url` (`toolgate::state`): what the admin commands change, on
    /// the same database the server uses.
    pub(crate) fn state(&self) -> anyhow::Result<(PathBuf, toolgate::store::Stores)> {
        let db = self.workspace()?.join(".toolgate/state.db");
        let stores =
            toolgate::state::open(&self.load_config()?.store, &db).context("cannot open the state database")?;
        Ok((db, stores))
    }

    /// A gate over the workspace with the loaded config, its agent runtime bound. `approver`:
    /// ask on this terminal.
    pub(crate) fn gate(&self, approver: bool) -> anyhow::Result<std::sync::Arc<Gate>> {
        self.gate_with(approver, false, |_| {})
    }

    /// [`Self::gate`] with the loaded config adjusted by `tweak` first; `one_shot`: the gate
    /// makes one call and ends with the process (`GateBuilder::one_shot`).
    pub(crate) fn gate_with(
        &self,
        approver: bool,
        one_shot: bool,
        tweak: impl FnOnce(&mut Config),
    ) -> anyhow::Result<std::sync::Arc<Gate>> {
        // With `[store] url`, the policy every node enforces applies to a one-off call too.
        let (mut config, _) = self.load_config_shared()?;
        tweak(&mut config);
        timings::lap("config load");
        let mut builder = Gate::builder(self.workspace()?).config(config).one_shot(one_shot);
        if approver && let Some(terminal) = terminal::TerminalApprover::if_attached() {
            builder = builder.approver(std::sync::Arc::new(terminal));
        }
        let gate = builder.build_shared()?;
        timings::lap_gate("gate build", &gate);
        Ok(gate)
    }
}

fn main() -> ExitCode {
    match run() {
        Ok(code) => code,
        Err(e) => {
            eprintln!("toolgate: {e:#}");
            ExitCode::from(2)
        }
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::{Cli, parse_call};

    fn argv(words: &[&str]) -> Vec<std::ffi::OsString> {
        std::iter::once("toolgate").chain(words.iter().copied()).map(Into::into).collect()
    }

    #[test]
    fn a_call_parses_the_same_against_call_alone_and_anything_else_is_left_to_the_whole_command() {
        let same = [
            &["call", "echo", r#"{"message":"hi"}"#][..],
            &["--workspace", "/tmp", "--timings", "call", "echo", "-", "--json"],
            &["--dialect=goclaw", "--approval", "never", "call", "--session", "s1", "exec", "--profile", "full"],
            &["call", "--workspace", "w", "read", "{}", "--agent", "a", "--provider", "openai", "--config", "c.toml"],
        ];
        for words in same {
            let short = parse_call(argv(words)).unwrap_or_else(|| panic!("{words:?}: not parsed against `call`"));
            let whole = Cli::try_parse_from(argv(words)).expect("the whole command parses it");
            assert_eq!(format!("{short:?}"), format!("{whole:?}"), "{words:?}");
        }
        let left = [
            &["tools"][..],
            &[],
            &["--version"],
            &["call", "--help"],
            &["call"],
            &["call", "echo", "{}", "--bogus"],
            &["--approval", "sometimes", "call", "echo"],
            &["--workspace"],
            &["-V"],
            &["--dialect", "call", "echo"],
            &["audit", "call"],
        ];
        for words in left {
            assert!(parse_call(argv(words)).is_none(), "{words:?}: parsed against `call` alone");
        }
    }
}
