//! `cargo xtask bench summary`: a short run of every benchmark and one table of their headline
//! figures (metric, toolgate, peer, ratio, target, met), printed and written at the head of
//! `docs/benchmarks.md` with the date and the load average of the run.
//!
//! Each benchmark runs with `TOOLGATE_BENCH_QUICK=1` (fewer rounds, same steps) and prints its
//! rows as tagged lines (`toolgate-benchkit`'s `summary::Row::emit`); everything else it prints
//! goes by as usual. A benchmark that fails is a row of its own that says so, and the others
//! still run.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::Instant;

use anyhow::Context;
use serde_json::Value;

use crate::bench::{BENCHES, LOAD};

/// Where the table goes in `docs/benchmarks.md`: between these two lines, replaced on each run.
const BEGIN: &str = "<!-- bench summary: begin (cargo xtask bench summary writes this table) -->";
const END: &str = "<!-- bench summary: end -->";

pub(crate) fn run() -> anyhow::Result<()> {
    crate::deps::install()?;
    let started = Instant::now();
    let load_before = load_average();
    let mut rows: Vec<Value> = Vec::new();
    let mut failed: Vec<String> = Vec::new();
    // The load run's 30-second sample (its 5-minute run is `cargo xtask bench load`).
    for (package, bench, extra) in
        BENCHES.iter().map(|(p, b)| (p, b, &[][..])).chain([(&LOAD.0, &LOAD.1, &["--", "--secs", "30"][..])])
    {
        eprintln!("$ TOOLGATE_BENCH_QUICK=1 cargo bench --package {package} --bench {bench} {}", extra.join(" "));
        match collect(package, bench, extra) {
            Ok(found) => rows.extend(found),
            Err(e) => {
                eprintln!("xtask: benchmark {package}/{bench} failed: {e:#}");
                failed.push(format!("{package}/{bench}"));
            }
        }
    }
    let table = render(&rows, &failed);
    let header = format!(
        "Run on {} in {:.0} s, load average {} before and {} after (`cargo xtask bench summary`: each benchmark \
         in its short form; the sections below have the full runs).",
        today(),
        started.elapsed().as_secs_f64(),
        load_before,
        load_average(),
    );
    println!("\n{header}\n\n{table}");
    write_docs(&header, &table)?;
    if failed.is_empty() { Ok(()) } else { anyhow::bail!("benchmarks failed: {}", failed.join(", ")) }
}

/// Runs one benchmark in its short form, passing its output through, and returns its rows.
fn collect(package: &str, bench: &str, extra: &[&str]) -> anyhow::Result<Vec<Value>> {
    let mut child = Command::new("cargo")
        .args(["bench", "--package", package, "--bench", bench])
        .args(extra)
        .env("TOOLGATE_BENCH_QUICK", "1")
        .current_dir(crate::root())
        .stdout(Stdio::piped())
        .spawn()
        .context("cannot run cargo bench")?;
    let stdout = child.stdout.take().context("no stdout")?;
    let mut rows = Vec::new();
    for line in BufReader::new(stdout).lines() {
        let line = line?;
        match line.strip_prefix("@summary\t") {
            Some(json) => rows.push(serde_json::from_str(json).with_context(|| format!("a bad summary row: {json}"))?),
            None => println!("{line}"),
        }
    }
    let status = child.wait()?;
    anyhow::ensure!(status.success(), "exit {status}");
    Ok(rows)
}

/// The table, in Markdown.
fn render(rows: &[Value], failed: &[String]) -> String {
    let mut out = String::from("| metric | toolgate | peer | ratio | target | met |\n|---|---|---|---|---|---|\n");
    for row in rows {
        let unit = row["unit"].as_str().unwrap_or_default();
        let peer = match &row["peer"] {
            Value::Object(p) => format!("{} {}", figure(&p["value"], unit), p["name"].as_str().unwrap_or_default()),
            _ => "—".to_owned(),
        };
        let ratio = match (row["toolgate"].as_f64(), row["peer"]["value"].as_f64()) {
            (Some(t), Some(p)) if p != 0.0 => format!("{:.2}×", t / p),
            _ => "—".to_owned(),
        };
        let met = match row["met"].as_bool() {
            Some(true) => "met",
            Some(false) => "**not met**",
            None => "—",
        };
        out.push_str(&format!(
            "| {} | {} | {peer} | {ratio} | {} | {met} |\n",
            cell(row["metric"].as_str().unwrap_or_default()),
            figure(&row["toolgate"], unit),
            target(&row["target"], unit),
        ));
    }
    for bench in failed {
        out.push_str(&format!("| {} | failed to run | — | — | — | **not met** |\n", cell(bench)));
    }
    out
}

fn figure(v: &Value, unit: &str) -> String {
    match v.as_f64() {
        Some(x) if x.abs() >= 100.0 => format!("{x:.0} {unit}"),
        Some(x) if x.abs() >= 10.0 => format!("{x:.1} {unit}"),
        Some(x) => format!("{x:.2} {unit}"),
        None => "—".to_owned(),
    }
}

fn target(t: &Value, unit: &str) -> String {
    let v = t["value"].as_f64().unwrap_or_default();
    match t["kind"].as_str() {
        Some("at_most") => format!("≤ {}", figure(&t["value"], unit)),
        Some("at_least") => format!("≥ {}", figure(&t["value"], unit)),
        Some("ratio_at_most") => format!("≤ {v}× peer"),
        Some("ratio_at_least") => format!("≥ {v}× peer"),
        _ => "—".to_owned(),
    }
}

/// A table cell: no pipes or line breaks from a name.
fn cell(s: &str) -> String {
    s.replace('|', "/").replace('\n', " ")
}

/// Puts the table at the head of `docs/benchmarks.md`, after its title and first paragraph.
fn write_docs(header: &str, table: &str) -> anyhow::Result<()> {
    let path = crate::root().join("docs/benchmarks.md");
    let doc = std::fs::read_to_string(&path).with_context(|| format!("cannot read {}", path.display()))?;
    let block = format!("{BEGIN}\n## Summary\n\n{header}\n\n{table}{END}");
    let doc = match (doc.find(BEGIN), doc.find(END)) {
        (Some(b), Some(e)) if b < e => format!("{}{block}{}", &doc[..b], &doc[e + END.len()..]),
        _ => {
            // First run: after the opening paragraph (the first blank line after the title).
            let at = doc.find("\n## ").map_or(doc.len(), |i| i + 1);
            format!("{}{block}\n\n{}", &doc[..at], &doc[at..])
        }
    };
    std::fs::write(&path, doc).with_context(|| format!("cannot write {}", path.display()))
}

fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|s| s.split_whitespace().next().map(str::to_owned))
        .unwrap_or_else(|| "unknown".to_owned())
}

fn today() -> String {
    Command::new("date")
        .args(["-u", "+%Y-%m-%d %H:%M UTC"])
        .output()
        .ok()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn rows_render_with_ratio_target_and_verdict() {
        let rows = vec![
            json!({"metric": "screenshot p50", "unit": "ms", "toolgate": 12.0, "peer": {"name": "Playwright MCP", "value": 10.0},
                   "target": {"kind": "ratio_at_most", "value": 1.2}, "met": true}),
            json!({"metric": "echo | cold", "unit": "ms", "toolgate": 9.5, "peer": null,
                   "target": {"kind": "at_most", "value": 8.0}, "met": false}),
        ];
        let t = render(&rows, &["toolgate/gate".to_owned()]);
        assert!(t.contains("| screenshot p50 | 12.0 ms | 10.0 ms Playwright MCP | 1.20× | ≤ 1.2× peer | met |"), "{t}");
        assert!(t.contains("| echo / cold | 9.50 ms | — | — | ≤ 8.00 ms | **not met** |"), "{t}");
        assert!(t.contains("| toolgate/gate | failed to run |"), "{t}");
    }
}
