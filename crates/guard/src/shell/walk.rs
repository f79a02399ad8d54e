//! Walking the `brush-parser` syntax tree: collecting simple commands (after unwrapping),
//! shell features and pipeline-level risks.

use std::sync::LazyLock;

use brush_parser::ast;
use brush_parser::word::{WordPiece, WordPieceWithSource};

use super::classify::{self, Context, Verdict};
use super::paths::{self, is_network_device};
use super::unwrap;
use super::word::{Arg, Taint, basename, decode_ansi_c, unquoted_expands};
use super::{Analysis, CommandClass, Feature, Finding, MAX_INPUT_BYTES, Redirect, RedirectKind, SimpleCommand};

/// How deeply scripts may nest (substitutions inside `sh -c` inside `eval` ...).
const MAX_DEPTH: usize = 24;
/// How deeply brackets and compound commands may nest in one script before it is not parsed.
const MAX_NESTING: usize = 64;
/// How many simple commands one analysis collects before giving up.
const MAX_COMMANDS: usize = 4096;
/// How many bytes one analysis parses in total, nested scripts included.
const MAX_PARSED_BYTES: usize = 4 * MAX_INPUT_BYTES;
/// How many lines a failed parse retries one by one.
const MAX_SALVAGE_LINES: usize = 2000;

static OPTIONS: LazyLock<brush_parser::ParserOptions> = LazyLock::new(brush_parser::ParserOptions::default);

/// What a nested script inherits from the command around it.
#[derive(Debug, Clone, Default)]
struct Ctx {
    depth: usize,
    wrappers: Vec<String>,
    floor: Vec<(CommandClass, String)>,
    assignments: Vec<String>,
}

impl Ctx {
    fn deeper(&self) -> Self {
        Self { depth: self.depth + 1, ..self.clone() }
    }

    fn with_wrappers(&self, wrappers: &[String], floor: &[(CommandClass, String)], assignments: &[Arg]) -> Self {
        let mut c = self.deeper();
        c.wrappers.extend(wrappers.iter().cloned());
        c.floor.extend(floor.iter().cloned());
        c.assignments.extend(assignments.iter().map(|a| a.text.clone()));
        c
    }
}

/// A collected simple command and what the pipeline analysis needs to know about it.
#[derive(Debug)]
struct Cmd {
    sc: SimpleCommand,
    /// What the command writes to standard output.
    output: Taint,
    /// The command runs code it reads from standard input (`sh`, `python3 -`).
    stdin_code: bool,
    /// A wrapper (`xargs`) turns standard input into arguments of a code executor.
    args_from_stdin_exec: bool,
    /// A literal `echo`/`printf` whose output is known: the text.
    literal_output: Option<String>,
}

#[derive(Debug, Default)]
struct Walker {
    cmds: Vec<Cmd>,
    features: Vec<Feature>,
    findings: Vec<Finding>,
    parse_errors: Vec<String>,
    functions: Vec<String>,
    /// Variables assigned from downloaded or decoded content (`x=$(curl ...)`).
    tainted_vars: Vec<(String, Taint)>,
    /// Output process substitutions (`>(...)`) of the simple command being decoded.
    out_psubs: Vec<(usize, usize)>,
    /// Files written with downloaded or decoded content (`curl -o x.sh`, `curl ... > x.sh`).
    tainted_files: Vec<String>,
    background: usize,
    truncated: bool,
    parsed_bytes: usize,
}

/// Entry point behind [`super::analyze`].
pub(crate) fn analyze_top(input: &str) -> Analysis {
    let mut w = Walker::default();
    let ctx = Ctx::default();
    if input.len() > MAX_INPUT_BYTES {
        w.parse_errors
            .push(format!("the command is {} bytes long; at most {MAX_INPUT_BYTES} bytes are analyzed", input.len()));
    } else {
        w.script(input, &ctx, true);
    }
    if is_network_device(input) {
        w.finding(CommandClass::Blocked, "uses /dev/tcp or /dev/udp (network connection from the shell)");
    }
    w.finish()
}

impl Walker {
    fn feature(&mut self, f: Feature) {
        if !self.features.contains(&f) {
            self.features.push(f);
        }
    }

    fn finding(&mut self, class: CommandClass, reason: impl Into<String>) {
        let f = Finding { class, reason: reason.into() };
        if !self.findings.contains(&f) {
            self.findings.push(f);
        }
    }

    fn finish(self) -> Analysis {
        let mut class = CommandClass::Safe;
        for c in &self.cmds {
            class = class.max(c.sc.class);
        }
        for f in &self.findings {
            class = class.max(f.class);
        }
        let parse_error = self.parse_errors.into_iter().next();
        if parse_error.is_some() {
            class = class.max(CommandClass::NeedsApproval);
        }
        Analysis {
            commands: self.cmds.into_iter().map(|c| c.sc).collect(),
            class,
            features: self.features,
            findings: self.findings,
            parse_error,
        }
    }

    /// Parses and walks a script. On a syntax error at the top level, lines that parse on their
    /// own are still analyzed (bash runs the lines before a syntax error).
    fn script(&mut self, text: &str, ctx: &Ctx, top: bool) {
        if ctx.depth > MAX_DEPTH {
            self.parse_errors.push(format!("scripts are nested more than {MAX_DEPTH} levels deep"));
            return;
        }
        self.parsed_bytes += text.len();
        if self.parsed_bytes > MAX_PARSED_BYTES {
            self.parse_errors.push(format!("nested scripts add up to more than {MAX_PARSED_BYTES} bytes"));
            return;
        }
        if let Err(e) = check_nesting(text) {
            self.parse_errors.push(e);
            return;
        }
        match parse(text) {
            Ok(program) => self.program(&program, ctx),
            Err(e) => {
                self.parse_errors.push(e);
                if top || ctx.depth <= 2 {
                    for line in text.lines().take(MAX_SALVAGE_LINES) {
                        if check_nesting(line).is_ok()
                            && let Ok(p) = parse(line)
                        {
                            self.program(&p, ctx);
                        }
                    }
                }
            }
        }
    }

    fn program(&mut self, p: &ast::Program, ctx: &Ctx) {
        for cc in &p.complete_commands {
            self.list(cc, ctx);
        }
    }

    fn list(&mut self, list: &ast::CompoundList, ctx: &Ctx) {
        for item in &list.0 {
            self.and_or(&item.0, ctx);
            if matches!(item.1, ast::SeparatorOperator::Async) {
                self.background += 1;
                self.feature(Feature::Background);
                self.finding(CommandClass::NeedsApproval, "runs a command in the background (&)");
            }
        }
    }

    fn and_or(&mut self, l: &ast::AndOrList, ctx: &Ctx) {
        self.pipeline(&l.first, ctx);
        for next in &l.additional {
            match next {
                ast::AndOr::And(p) | ast::AndOr::Or(p) => self.pipeline(p, ctx),
            }
        }
    }

    fn pipeline(&mut self, p: &ast::Pipeline, ctx: &Ctx) {
        let mut stages: Vec<(usize, usize)> = Vec::with_capacity(p.seq.len());
        for c in &p.seq {
            let start = self.cmds.len();
            self.command(c, ctx);
            stages.push((start, self.cmds.len()));
        }
        if stages.len() > 1 {
            self.pipe_risks(&stages, ctx);
        }
    }

    /// Risks that only exist between the stages of a pipeline: `curl | sh`, reverse shells.
    fn pipe_risks(&mut self, stages: &[(usize, usize)], ctx: &Ctx) {
        let mut upstream = Taint::default();
        let mut upstream_names: Vec<String> = Vec::new();
        let net_stage = stages.iter().position(|&(s, e)| {
            self.cmds[s..e].iter().any(|c| c.sc.argv.first().is_some_and(|n| classify::is_network_pipe(basename(n))))
        });
        for (idx, &(s, e)) in stages.iter().enumerate() {
            if idx > 0 {
                let prev = stages[idx - 1];
                let literal_text = (prev.1 - prev.0 == 1).then(|| self.cmds[prev.0].literal_output.clone()).flatten();
                for i in s..e {
                    let c = &self.cmds[i];
                    let name = c.sc.argv.first().cloned().unwrap_or_default();
                    if c.stdin_code || c.args_from_stdin_exec {
                        if upstream.any() {
                            let why = format!(
                                "runs {} piped from {} ({} | {})",
                                upstream.describe(),
                                upstream_names.join(", "),
                                upstream_names.last().map(String::as_str).unwrap_or("..."),
                                basename(&name)
                            );
                            self.raise_cmd(i, CommandClass::Blocked, why);
                        } else if let Some(text) = &literal_text {
                            let why = format!("{} runs code piped from {}", basename(&name), upstream_names.join(", "));
                            self.raise_cmd(i, CommandClass::NeedsApproval, why);
                            let mut c2 = ctx.deeper();
                            c2.wrappers.extend(self.cmds[i].sc.wrappers.iter().cloned());
                            c2.wrappers.push(format!("{} (stdin)", basename(&name)));
                            self.feature(Feature::ShellScript);
                            let text = text.clone();
                            self.script(&text, &c2, false);
                        } else {
                            let why = format!("{} runs code piped from another command", basename(&name));
                            self.raise_cmd(i, CommandClass::Dangerous, why);
                        }
                    }
                }
            }
            if let Some(n) = net_stage
                && n != idx
            {
                for i in s..e {
                    if self.cmds[i].stdin_code {
                        self.raise_cmd(
                            i,
                            CommandClass::Blocked,
                            "connects a shell to a network tool in the same pipeline (reverse shell)".into(),
                        );
                    }
                }
            }
            for c in &self.cmds[s..e] {
                upstream.merge(c.output);
                if let Some(n) = c.sc.argv.first() {
                    let n = basename(n).to_string();
                    if !upstream_names.contains(&n) {
                        upstream_names.push(n);
                    }
                }
            }
        }
    }

    fn raise_cmd(&mut self, i: usize, class: CommandClass, why: String) {
        if let Some(c) = self.cmds.get_mut(i) {
            let mut v = Verdict { class: c.sc.class, reason: c.sc.reason.clone() };
            v.raise(class, why);
            c.sc.class = v.class;
            c.sc.reason = v.reason;
        }
    }

    fn command(&mut self, c: &ast::Command, ctx: &Ctx) {
        match c {
            ast::Command::Simple(s) => self.simple(s, ctx),
            ast::Command::Compound(cc, redirects) => {
                self.compound(cc, ctx);
                if let Some(r) = redirects {
                    self.loose_redirects(&r.0, ctx);
                }
            }
            ast::Command::Function(f) => self.function(f, ctx),
            ast::Command::ExtendedTest(t, redirects) => {
                self.feature(Feature::ControlFlow);
                self.test_expr(&t.expr, ctx);
                if let Some(r) = redirects {
                    self.loose_redirects(&r.0, ctx);
                }
            }
        }
    }

    fn test_expr(&mut self, e: &ast::ExtendedTestExpr, ctx: &Ctx) {
        match e {
            ast::ExtendedTestExpr::And(a, b) | ast::ExtendedTestExpr::Or(a, b) => {
                self.test_expr(a, ctx);
                self.test_expr(b, ctx);
            }
            ast::ExtendedTestExpr::Not(a) | ast::ExtendedTestExpr::Parenthesized(a) => self.test_expr(a, ctx),
            ast::ExtendedTestExpr::UnaryTest(_, w) => {
                self.word(w, ctx);
            }
            ast::ExtendedTestExpr::BinaryTest(_, a, b) => {
                self.word(a, ctx);
                self.word(b, ctx);
            }
        }
    }

    fn compound(&mut self, c: &ast::CompoundCommand, ctx: &Ctx) {
        match c {
            ast::CompoundCommand::Arithmetic(a) => {
                self.feature(Feature::ControlFlow);
                self.decode(&a.expr.value, ctx, true);
            }
            ast::CompoundCommand::ArithmeticForClause(f) => {
                self.feature(Feature::ControlFlow);
                for e in [&f.initializer, &f.condition, &f.updater].into_iter().flatten() {
                    self.decode(&e.value, ctx, true);
                }
                self.list(&f.body.list, ctx);
            }
            ast::CompoundCommand::BraceGroup(b) => {
                self.feature(Feature::BraceGroup);
                self.list(&b.list, ctx);
            }
            ast::CompoundCommand::Subshell(s) => {
                self.feature(Feature::Subshell);
                self.list(&s.list, ctx);
            }
            ast::CompoundCommand::ForClause(f) => {
                self.feature(Feature::ControlFlow);
                for w in f.values.iter().flatten() {
                    let a = self.word(w, ctx);
                    if a.taint.any() {
                        self.tainted_vars.push((f.variable_name.clone(), a.taint));
                    }
                }
                self.list(&f.body.list, ctx);
            }
            ast::CompoundCommand::CaseClause(c) => {
                self.feature(Feature::ControlFlow);
                self.word(&c.value, ctx);
                for item in &c.cases {
                    for p in &item.patterns {
                        self.word(p, ctx);
                    }
                    if let Some(l) = &item.cmd {
                        self.list(l, ctx);
                    }
                }
            }
            ast::CompoundCommand::IfClause(i) => {
                self.feature(Feature::ControlFlow);
                self.list(&i.condition, ctx);
                self.list(&i.then, ctx);
                for e in i.elses.iter().flatten() {
                    if let Some(c) = &e.condition {
                        self.list(c, ctx);
                    }
                    self.list(&e.body, ctx);
                }
            }
            ast::CompoundCommand::WhileClause(w) | ast::CompoundCommand::UntilClause(w) => {
                self.feature(Feature::ControlFlow);
                self.list(&w.0, ctx);
                self.list(&w.1.list, ctx);
            }
            ast::CompoundCommand::Coprocess(c) => {
                self.feature(Feature::Coprocess);
                self.finding(CommandClass::NeedsApproval, "starts a coprocess (coproc)");
                self.command(&c.body, ctx);
            }
        }
    }

    fn function(&mut self, f: &ast::FunctionDefinition, ctx: &Ctx) {
        let name = f.fname.value.clone();
        self.feature(Feature::FunctionDefinition { name: name.clone() });
        self.finding(CommandClass::NeedsApproval, format!("defines the shell function {name}"));
        self.functions.push(name.clone());
        let start = self.cmds.len();
        let bg = self.background;
        let mut c = ctx.clone();
        c.wrappers.push(format!("function {name}"));
        self.compound(&f.body.0, &c);
        if let Some(r) = &f.body.1 {
            self.loose_redirects(&r.0, &c);
        }
        let self_calls = self.cmds[start..].iter().filter(|c| c.sc.argv.first() == Some(&name)).count();
        if self_calls >= 2 || (self_calls >= 1 && self.background > bg) {
            self.finding(CommandClass::Blocked, format!("the function {name} calls itself repeatedly (fork bomb)"));
        }
    }

    /// Redirects that belong to a compound command or a wrapper, not to one simple command.
    fn loose_redirects(&mut self, redirects: &[ast::IoRedirect], ctx: &Ctx) {
        for r in redirects {
            let d = self.redirect(r, ctx);
            if let Some((class, why)) = paths::redirect_risk(&d.redirect) {
                self.finding(class, why);
            }
            self.feature(Feature::Redirect(d.redirect));
        }
    }

    fn simple(&mut self, s: &ast::SimpleCommand, ctx: &Ctx) {
        let mark = self.out_psubs.len();
        let mut assignments: Vec<Arg> = Vec::new();
        let mut redirects: Vec<Decoded> = Vec::new();
        let mut args: Vec<Arg> = Vec::new();
        for item in s.prefix.iter().flat_map(|p| p.0.iter()) {
            self.prefix_item(item, ctx, &mut assignments, &mut redirects, &mut args);
        }
        if let Some(w) = &s.word_or_name {
            let a = self.word(w, ctx);
            args.push(a);
        }
        for item in s.suffix.iter().flat_map(|p| p.0.iter()) {
            self.prefix_item(item, ctx, &mut assignments, &mut redirects, &mut args);
        }
        if args.is_empty() {
            for a in &assignments {
                let name = a.text.split_once('=').map_or(a.text.as_str(), |(n, _)| n).trim_end_matches('+');
                self.feature(Feature::Assignment { name: name.to_string() });
                if a.taint.any() {
                    self.tainted_vars.push((name.to_string(), a.taint));
                }
                if let Some(r) = classify::assignment_risk(name) {
                    self.finding(CommandClass::NeedsApproval, r);
                }
            }
            for d in redirects {
                if let Some((class, why)) = paths::redirect_risk(&d.redirect) {
                    self.finding(class, why);
                }
                self.feature(Feature::Redirect(d.redirect));
            }
            return;
        }
        let output = self.emit(args, assignments, redirects, ctx);
        // `cmd > >(sh)`: the substituted commands read this command's output.
        let psubs: Vec<(usize, usize)> = self.out_psubs.drain(mark.min(self.out_psubs.len())..).collect();
        for (s, e) in psubs {
            for i in s..e.min(self.cmds.len()) {
                if self.cmds[i].stdin_code {
                    let name = self.cmds[i].sc.argv.first().map(|n| basename(n).to_string()).unwrap_or_default();
                    if output.any() {
                        self.raise_cmd(i, CommandClass::Blocked, format!("{name} runs {} as code", output.describe()));
                    } else {
                        self.raise_cmd(
                            i,
                            CommandClass::Dangerous,
                            format!("{name} runs code written by another command"),
                        );
                    }
                }
            }
        }
    }

    fn prefix_item(
        &mut self,
        item: &ast::CommandPrefixOrSuffixItem,
        ctx: &Ctx,
        assignments: &mut Vec<Arg>,
        redirects: &mut Vec<Decoded>,
        args: &mut Vec<Arg>,
    ) {
        match item {
            ast::CommandPrefixOrSuffixItem::IoRedirect(r) => {
                let d = self.redirect(r, ctx);
                redirects.push(d);
            }
            ast::CommandPrefixOrSuffixItem::Word(w) => {
                let a = self.word(w, ctx);
                args.push(a);
            }
            ast::CommandPrefixOrSuffixItem::AssignmentWord(assignment, w) => {
                let a = self.assignment(assignment, w, ctx);
                if args.is_empty() {
                    assignments.push(a);
                } else {
                    // `export A=b`: an argument of a declaration builtin.
                    args.push(a);
                }
            }
            ast::CommandPrefixOrSuffixItem::ProcessSubstitution(kind, sub) => {
                let a = self.process_substitution(kind, sub, ctx);
                args.push(a);
            }
        }
    }

    fn assignment(&mut self, assignment: &ast::Assignment, w: &ast::Word, ctx: &Ctx) -> Arg {
        let mut taint = Taint::default();
        let mut literal = true;
        match &assignment.value {
            ast::AssignmentValue::Scalar(v) => {
                let a = self.word(v, ctx);
                taint.merge(a.taint);
                literal &= a.literal;
            }
            ast::AssignmentValue::Array(items) => {
                for (k, v) in items {
                    if let Some(k) = k {
                        let a = self.word(k, ctx);
                        taint.merge(a.taint);
                    }
                    let a = self.word(v, ctx);
                    taint.merge(a.taint);
                    literal &= a.literal;
                }
            }
        }
        Arg { text: w.value.clone(), literal, taint }
    }

    fn process_substitution(
        &mut self,
        kind: &ast::ProcessSubstitutionKind,
        sub: &ast::SubshellCommand,
        ctx: &Ctx,
    ) -> Arg {
        self.feature(Feature::ProcessSubstitution);
        let start = self.cmds.len();
        self.list(&sub.list, &ctx.deeper());
        if matches!(kind, ast::ProcessSubstitutionKind::Write) {
            self.out_psubs.push((start, self.cmds.len()));
        }
        let taint = self.output_taint_since(start);
        Arg { text: format!("{kind}{sub}"), literal: false, taint }
    }

    fn output_taint_since(&self, start: usize) -> Taint {
        let mut t = Taint::default();
        for c in self.cmds.get(start..).unwrap_or_default() {
            t.merge(c.output);
        }
        t
    }

    /// Unwraps, classifies and records one simple command (and what it runs in turn).
    /// Returns the taint of what the command writes to standard output.
    fn emit(&mut self, args: Vec<Arg>, assignments: Vec<Arg>, redirects: Vec<Decoded>, ctx: &Ctx) -> Taint {
        if self.cmds.len() >= MAX_COMMANDS {
            if !self.truncated {
                self.truncated = true;
                self.parse_errors.push(format!("more than {MAX_COMMANDS} commands; the rest was not analyzed"));
            }
            return Taint::default();
        }
        if args.first().is_some_and(|a| !a.literal) {
            self.feature(Feature::DynamicCommandName);
        }
        let u = unwrap::unwrap(args);
        if u.wrappers.iter().any(|w| w == "eval") {
            self.feature(Feature::Eval);
        }
        let c2 = ctx.with_wrappers(&u.wrappers, &u.floor, &u.assignments);

        if let Some(script) = &u.script {
            let is_eval = u.wrappers.last().is_some_and(|w| w == "eval");
            self.feature(if is_eval { Feature::Eval } else { Feature::ShellScript });
            // The wrapper's own assignments and redirects.
            let mut floor = Verdict::safe();
            for a in &assignments {
                let n = a.text.split_once('=').map_or(a.text.as_str(), |(n, _)| n);
                if let Some(r) = classify::env_assignment_risk(n) {
                    floor.raise(CommandClass::NeedsApproval, r);
                }
            }
            for d in &redirects {
                if let Some((class, why)) = paths::redirect_risk(&d.redirect) {
                    self.finding(class, why);
                }
                self.feature(Feature::Redirect(d.redirect.clone()));
            }
            let mut c3 = c2.clone();
            if let Some(r) = floor.reason {
                c3.floor.push((floor.class, r));
            }
            c3.assignments.extend(assignments.iter().map(|a| a.text.clone()));
            if script.literal {
                let text = script.text.clone();
                self.script(&text, &c3, false);
            } else {
                let mut v = Verdict::safe();
                if script.taint.any() {
                    v.raise(CommandClass::Blocked, format!("runs {} as code", script.taint.describe()));
                }
                v.raise(CommandClass::NeedsApproval, "runs a script built from expansions that cannot be checked");
                let mut argv: Vec<String> = u.args.iter().map(|a| a.text.clone()).collect();
                if is_eval {
                    argv.insert(0, "eval".into());
                    argv.truncate(1);
                    argv.push(script.text.clone());
                }
                let mut wrappers = ctx.wrappers.clone();
                wrappers.extend(u.wrappers.iter().cloned());
                // The last wrapper is the shell (or eval) itself, which the argv shows.
                wrappers.pop();
                self.push(
                    Cmd {
                        sc: SimpleCommand {
                            argv,
                            wrappers,
                            assignments: c3.assignments.clone(),
                            redirects: redirects.iter().map(|d| d.redirect.clone()).collect(),
                            class: v.class,
                            reason: v.reason,
                        },
                        output: script.taint,
                        // The script may read its code from standard input (`sh -c "$(cat)"`).
                        stdin_code: true,
                        args_from_stdin_exec: false,
                        literal_output: None,
                    },
                    &c3.floor,
                );
                // Parse the visible text too: `sh -c "rm -rf $DIR"` still runs `rm -rf`.
                // (Substitutions were already walked when the word was decoded.)
                if !has_substitution(&script.text) {
                    let text = script.text.clone();
                    self.script(&text, &c3, false);
                }
            }
            return script.taint;
        }

        let stdin_texts: Vec<String> = redirects.iter().filter_map(|d| d.stdin_text.clone()).collect();
        let mut v = classify::classify(&u.args, &Context { unknown_args: u.unknown_args, stdin_texts: &stdin_texts });
        let name = u.args.first().map(|a| basename(&a.text).to_string()).unwrap_or_default();
        for a in &assignments {
            let n = a.text.split_once('=').map_or(a.text.as_str(), |(n, _)| n);
            if let Some(r) = classify::env_assignment_risk(n) {
                v.raise(CommandClass::NeedsApproval, r);
            }
        }
        for d in &redirects {
            if let Some((class, why)) = paths::redirect_risk(&d.redirect) {
                v.raise(class, why);
            }
        }
        if self.functions.contains(&name) {
            v.raise(CommandClass::NeedsApproval, format!("calls the shell function {name}"));
        }
        if matches!(name.as_str(), "export" | "declare" | "typeset" | "local" | "readonly") {
            for a in u.args.iter().skip(1).filter(|a| a.taint.any()) {
                if let Some((n, _)) = a.text.split_once('=') {
                    self.tainted_vars.push((n.to_string(), a.taint));
                }
            }
        }
        let executes_args = classify::is_code_executor(&name);
        let downloaded = |p: &str| self.tainted_files.iter().any(|f| same_file(f, p));
        if u.args.first().is_some_and(|a| downloaded(&a.text))
            || (executes_args && u.args.iter().skip(1).any(|a| downloaded(&a.text)))
        {
            v.raise(CommandClass::Blocked, "runs a file that was downloaded or decoded earlier in this command");
        }
        if executes_args && let Some(t) = u.args.iter().skip(1).find(|a| a.taint.any()).map(|a| a.taint) {
            v.raise(CommandClass::Blocked, format!("{name} runs {} as code", t.describe()));
        }
        let stdin_code = classify::reads_code_from_stdin(&u.args);
        let stdin_redirect = redirects.iter().find(|d| d.stdin);
        if stdin_code
            && let Some(d) = stdin_redirect
            && d.taint.any()
        {
            v.raise(CommandClass::Blocked, format!("{name} runs {} as code", d.taint.describe()));
        }
        // Literal output of echo/printf, in case it is piped into a shell.
        let literal_output = match name.as_str() {
            "echo"
                if u.args.iter().skip(1).all(|a| a.literal && !a.text.contains('\\') && !a.text.starts_with('-')) =>
            {
                Some(u.args.iter().skip(1).map(|a| a.text.as_str()).collect::<Vec<_>>().join(" "))
            }
            "cat" if u.args.len() == 1 => stdin_redirect.filter(|d| d.literal).and_then(|d| d.stdin_text.clone()),
            "printf" if u.args.len() == 2 && u.args[1].literal && !u.args[1].text.contains(['\\', '%']) => {
                Some(u.args[1].text.clone())
            }
            _ => None,
        };
        let find_execs = if name == "find" { classify::find_exec_commands(&u.args) } else { Vec::new() };
        let heredoc_script =
            if stdin_code { stdin_redirect.and_then(|d| d.stdin_text.clone().map(|t| (t, d.literal))) } else { None };
        let mut wrappers = ctx.wrappers.clone();
        wrappers.extend(u.wrappers.iter().cloned());
        let mut all_assignments = ctx.assignments.clone();
        all_assignments.extend(u.assignments.iter().map(|a| a.text.clone()));
        all_assignments.extend(assignments.iter().map(|a| a.text.clone()));
        let output = classify::output_taint(&u.args);
        if output.any() {
            for d in redirects.iter().filter(|d| d.redirect.writes_file()) {
                self.tainted_files.push(d.redirect.target.clone());
            }
        }
        if output.remote {
            self.tainted_files.extend(classify::download_targets(&u.args));
        }
        let mut floor = ctx.floor.clone();
        floor.extend(u.floor.iter().cloned());
        self.push(
            Cmd {
                sc: SimpleCommand {
                    argv: u.args.iter().map(|a| a.text.clone()).collect(),
                    wrappers,
                    assignments: all_assignments,
                    redirects: redirects.iter().map(|d| d.redirect.clone()).collect(),
                    class: v.class,
                    reason: v.reason,
                },
                output,
                stdin_code: stdin_code && stdin_redirect.is_none(),
                args_from_stdin_exec: u.unknown_args && executes_args,
                literal_output,
            },
            &floor,
        );
        for (label, inner) in find_execs {
            let mut c3 = c2.clone();
            c3.wrappers.push(label);
            self.emit(inner, Vec::new(), Vec::new(), &c3);
        }
        if let Some((text, literal)) = heredoc_script {
            let mut c3 = c2.clone();
            c3.wrappers.push(format!("{name} (here-document)"));
            self.feature(Feature::ShellScript);
            if literal || !has_substitution(&text) {
                self.script(&text, &c3, false);
            }
        }
        output
    }

    fn push(&mut self, mut cmd: Cmd, floor: &[(CommandClass, String)]) {
        let mut v = Verdict { class: cmd.sc.class, reason: cmd.sc.reason.take() };
        for (class, why) in floor {
            v.raise(*class, why.clone());
        }
        cmd.sc.class = v.class;
        cmd.sc.reason = v.reason;
        self.cmds.push(cmd);
    }

    fn redirect(&mut self, r: &ast::IoRedirect, ctx: &Ctx) -> Decoded {
        let fd_of = |fd: &Option<ast::IoFd>| fd.as_ref().and_then(|f| u32::try_from(*f).ok());
        match r {
            ast::IoRedirect::File(fd, kind, target) => {
                let kind = match kind {
                    ast::IoFileRedirectKind::Read => RedirectKind::Read,
                    ast::IoFileRedirectKind::Write => RedirectKind::Write,
                    ast::IoFileRedirectKind::Append => RedirectKind::Append,
                    ast::IoFileRedirectKind::ReadAndWrite => RedirectKind::ReadWrite,
                    ast::IoFileRedirectKind::Clobber => RedirectKind::Clobber,
                    ast::IoFileRedirectKind::DuplicateInput => RedirectKind::DuplicateInput,
                    ast::IoFileRedirectKind::DuplicateOutput => RedirectKind::DuplicateOutput,
                };
                let fd = fd_of(fd);
                let reads_stdin = matches!(kind, RedirectKind::Read) && fd.is_none_or(|f| f == 0);
                let (text, taint, literal) = match target {
                    ast::IoFileRedirectTarget::Filename(w) | ast::IoFileRedirectTarget::Duplicate(w) => {
                        let a = self.word(w, ctx);
                        (a.text, a.taint, a.literal)
                    }
                    ast::IoFileRedirectTarget::Fd(n) => (format!("&{n}"), Taint::default(), true),
                    ast::IoFileRedirectTarget::ProcessSubstitution(k, sub) => {
                        let a = self.process_substitution(k, sub, ctx);
                        (a.text, a.taint, false)
                    }
                };
                Decoded {
                    redirect: Redirect { fd, kind, target: text },
                    stdin: reads_stdin,
                    stdin_text: None,
                    taint,
                    literal,
                }
            }
            ast::IoRedirect::HereDocument(fd, doc) => {
                self.feature(Feature::HereDocument);
                let body = doc.doc.value.clone();
                let (taint, literal) = if doc.requires_expansion {
                    let a = self.decode_heredoc(&body, ctx);
                    (a.taint, a.literal)
                } else {
                    (Taint::default(), true)
                };
                let fd = fd_of(fd);
                Decoded {
                    redirect: Redirect { fd, kind: RedirectKind::HereDocument, target: body.clone() },
                    stdin: fd.is_none_or(|f| f == 0),
                    stdin_text: Some(body),
                    taint,
                    literal,
                }
            }
            ast::IoRedirect::HereString(fd, w) => {
                self.feature(Feature::HereString);
                let a = self.word(w, ctx);
                let fd = fd_of(fd);
                Decoded {
                    redirect: Redirect { fd, kind: RedirectKind::HereString, target: a.text.clone() },
                    stdin: fd.is_none_or(|f| f == 0),
                    stdin_text: Some(a.text),
                    taint: a.taint,
                    literal: a.literal,
                }
            }
            ast::IoRedirect::OutputAndError(w, append) => {
                let a = self.word(w, ctx);
                let kind = if *append { RedirectKind::AppendOutputAndError } else { RedirectKind::OutputAndError };
                Decoded {
                    redirect: Redirect { fd: None, kind, target: a.text },
                    stdin: false,
                    stdin_text: None,
                    taint: a.taint,
                    literal: a.literal,
                }
            }
        }
    }

    fn word(&mut self, w: &ast::Word, ctx: &Ctx) -> Arg {
        self.decode(&w.value, ctx, false)
    }

    /// Decodes a raw word (or, with `inner`, the inside of `${...}`/`$((...))`), walking any
    /// command substitution in it.
    fn decode(&mut self, raw: &str, ctx: &Ctx, inner: bool) -> Arg {
        let mut arg = Arg { text: String::new(), literal: !inner, taint: Taint::default() };
        if ctx.depth > MAX_DEPTH {
            self.parse_errors.push(format!("words are nested more than {MAX_DEPTH} levels deep"));
            arg.text = raw.to_string();
            arg.literal = false;
            return arg;
        }
        match brush_parser::word::parse(raw, &OPTIONS) {
            Ok(pieces) => self.pieces(&pieces, raw, false, &mut arg, ctx),
            Err(e) => {
                arg.text = raw.to_string();
                arg.literal = false;
                if raw.contains("$(") || raw.contains('`') || raw.contains("<(") || raw.contains(">(") {
                    self.parse_errors.push(format!("could not parse the word {raw}: {e}"));
                }
            }
        }
        arg
    }

    fn decode_heredoc(&mut self, body: &str, ctx: &Ctx) -> Arg {
        let mut arg = Arg { text: String::new(), literal: true, taint: Taint::default() };
        match brush_parser::word::parse_heredoc(body, &OPTIONS) {
            Ok(pieces) => self.pieces(&pieces, body, true, &mut arg, ctx),
            Err(e) => {
                arg.literal = false;
                self.parse_errors.push(format!("could not parse a here-document: {e}"));
            }
        }
        arg
    }

    fn pieces(&mut self, pieces: &[WordPieceWithSource], raw: &str, quoted: bool, arg: &mut Arg, ctx: &Ctx) {
        for p in pieces {
            let src = raw.get(p.start_index..p.end_index).unwrap_or_default();
            match &p.piece {
                WordPiece::Text(s) => {
                    arg.text.push_str(s);
                    if !quoted && unquoted_expands(s) {
                        arg.literal = false;
                    }
                }
                WordPiece::SingleQuotedText(s) => arg.text.push_str(s),
                WordPiece::AnsiCQuotedText(s) => match decode_ansi_c(s) {
                    Some(d) => arg.text.push_str(&d),
                    None => {
                        arg.text.push_str(src);
                        arg.literal = false;
                    }
                },
                WordPiece::DoubleQuotedSequence(inner) | WordPiece::GettextDoubleQuotedSequence(inner) => {
                    self.pieces(inner, raw, true, arg, ctx);
                }
                WordPiece::TildeExpansion(t) => {
                    use brush_parser::word::TildeExpr;
                    match t {
                        TildeExpr::Home => arg.text.push('~'),
                        TildeExpr::UserHome(u) => {
                            arg.text.push('~');
                            arg.text.push_str(u);
                        }
                        _ => {
                            arg.text.push_str(src);
                            arg.literal = false;
                        }
                    }
                }
                WordPiece::ParameterExpansion(_) => {
                    arg.text.push_str(src);
                    arg.literal = false;
                    let name: String = src
                        .trim_start_matches('$')
                        .trim_start_matches('{')
                        .trim_start_matches('!')
                        .chars()
                        .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                        .collect();
                    for (v, t) in &self.tainted_vars {
                        if *v == name {
                            arg.taint.merge(*t);
                        }
                    }
                    let inner = src.strip_prefix("${").and_then(|s| s.strip_suffix('}'));
                    if let Some(inner) = inner
                        && (inner.contains('$') || inner.contains('`'))
                    {
                        let a = self.decode(inner, &ctx.deeper(), true);
                        arg.taint.merge(a.taint);
                    }
                }
                WordPiece::CommandSubstitution(s) => {
                    arg.text.push_str(src);
                    arg.literal = false;
                    self.feature(Feature::CommandSubstitution);
                    let t = self.substitution(s, ctx);
                    arg.taint.merge(t);
                }
                WordPiece::BackquotedCommandSubstitution(s) => {
                    arg.text.push_str(src);
                    arg.literal = false;
                    self.feature(Feature::Backticks);
                    let unescaped = unescape_backticks(s);
                    let t = self.substitution(&unescaped, ctx);
                    arg.taint.merge(t);
                }
                WordPiece::EscapeSequence(s) => {
                    let mut chars = s.chars();
                    chars.next();
                    let rest: String = chars.collect();
                    if rest != "\n" {
                        arg.text.push_str(&rest);
                    }
                }
                WordPiece::ArithmeticExpression(e) => {
                    arg.text.push_str(src);
                    arg.literal = false;
                    if e.value.contains('$') || e.value.contains('`') {
                        let a = self.decode(&e.value, &ctx.deeper(), true);
                        arg.taint.merge(a.taint);
                    }
                }
            }
        }
    }

    fn substitution(&mut self, text: &str, ctx: &Ctx) -> Taint {
        let start = self.cmds.len();
        self.script(text, &ctx.deeper(), false);
        self.output_taint_since(start)
    }
}

/// A decoded redirect and what it feeds to the command's standard input.
#[derive(Debug)]
struct Decoded {
    redirect: Redirect,
    /// The redirect replaces standard input.
    stdin: bool,
    /// The text fed to standard input (here-document body, here-string).
    stdin_text: Option<String>,
    taint: Taint,
    /// The target or body has no expansions.
    literal: bool,
}

/// Whether text contains a command or process substitution.
fn has_substitution(text: &str) -> bool {
    text.contains("$(") || text.contains('`') || text.contains("<(") || text.contains(">(")
}

/// Whether two spellings name the same file (`./x.sh` and `x.sh`).
fn same_file(a: &str, b: &str) -> bool {
    let a = paths::normalize(a);
    let b = paths::normalize(b);
    a.trim_start_matches("./") == b.trim_start_matches("./")
}

/// Inside backticks, `\$`, `` \` `` and `\\` stand for the character itself.
fn unescape_backticks(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\\'
            && let Some(&n) = chars.peek()
            && matches!(n, '$' | '`' | '\\')
        {
            out.push(n);
            chars.next();
            continue;
        }
        out.push(c);
    }
    out
}

fn parse(text: &str) -> Result<ast::Program, String> {
    let mut parser = brush_parser::Parser::new(std::io::BufReader::new(text.as_bytes()), &OPTIONS);
    parser.parse_program().map_err(|e| e.to_string())
}

/// Rejects scripts whose brackets or compound commands nest deeper than [`MAX_NESTING`], which
/// would make the recursive parser use too much stack.
fn check_nesting(text: &str) -> Result<(), String> {
    let mut depth: usize = 0;
    let mut max: usize = 0;
    for c in text.chars() {
        match c {
            '(' | '{' | '[' => {
                depth += 1;
                max = max.max(depth);
            }
            ')' | '}' | ']' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    let mut kw_depth: usize = 0;
    for w in text.split(|c: char| c.is_whitespace() || matches!(c, ';' | '&' | '|' | '(' | ')')) {
        match w {
            "if" | "case" | "do" | "{" | "select" | "function" => {
                kw_depth += 1;
                max = max.max(kw_depth);
            }
            "fi" | "esac" | "done" | "}" => kw_depth = kw_depth.saturating_sub(1),
            _ => {}
        }
    }
    if max > MAX_NESTING {
        return Err(format!("the command nests more than {MAX_NESTING} levels deep"));
    }
    Ok(())
}
