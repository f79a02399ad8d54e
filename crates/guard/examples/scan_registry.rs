//! Scans the cargo registry sources on this machine (`~/.cargo/registry/src`, or the directory
//! given as the first argument) with the built-in leak rules and prints how often each rule
//! fires, with a few samples, and what injection neutralizing finds. Registry code is real code with few real secrets: a rule that
//! fires often here fires on ordinary code.
//!
//! ```text
//! cargo run --release -p toolgate-guard --example scan_registry [DIR] [SAMPLES]
//! ```

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Instant;

use toolgate_guard::leak::LeakDetector;

fn main() {
    let mut args = std::env::args().skip(1);
    let root = args.next().map(PathBuf::from).unwrap_or_else(|| {
        let home = std::env::var_os("CARGO_HOME")
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from(std::env::var_os("HOME").unwrap_or_default()).join(".cargo"));
        home.join("registry/src")
    });
    let samples: usize = args.next().and_then(|s| s.parse().ok()).unwrap_or(5);
    let mut files = Vec::new();
    collect(&root, &mut files);
    files.sort();
    let detector = LeakDetector::new();
    let mut counts: BTreeMap<&'static str, usize> = BTreeMap::new();
    let mut shown: BTreeMap<&'static str, Vec<(String, String)>> = BTreeMap::new();
    let (mut bytes, mut scanned) = (0usize, 0usize);
    let mut suspicious_files = 0usize;
    let mut injection: BTreeMap<String, (usize, String)> = BTreeMap::new();
    let mut scan_time = std::time::Duration::ZERO;
    for path in &files {
        let Ok(raw) = std::fs::read(path) else { continue };
        if raw.len() > 4 << 20 || raw.contains(&0) {
            continue;
        }
        let text = String::from_utf8_lossy(&raw);
        bytes += text.len();
        scanned += 1;
        let t = Instant::now();
        let findings = detector.scan(&text);
        scan_time += t.elapsed();
        let n = toolgate_guard::injection::neutralize(&text);
        if n.suspicious {
            suspicious_files += 1;
            for w in &n.warnings {
                let kind = w.split(" at byte").next().unwrap_or(w).to_owned();
                let entry = injection.entry(kind).or_insert((0, String::new()));
                entry.0 += 1;
                if entry.1.is_empty() {
                    let rel = path.strip_prefix(&root).unwrap_or(path);
                    entry.1 = rel.components().skip(1).collect::<PathBuf>().display().to_string();
                }
            }
        }
        for f in findings {
            *counts.entry(f.rule_id).or_default() += 1;
            let list = shown.entry(f.rule_id).or_default();
            let line_start = text[..f.range.start].rfind('\n').map_or(0, |i| i + 1);
            let line_end = text[f.range.end..].find('\n').map_or(text.len(), |i| f.range.end + i);
            let line: String = text[line_start..line_end].trim().chars().take(160).collect();
            if list.len() < samples && !list.iter().any(|(l, _)| *l == line) {
                let rel = path.strip_prefix(&root).unwrap_or(path);
                let rel = rel.components().skip(1).collect::<PathBuf>();
                list.push((line, format!("{} [{}]", rel.display(), &text[f.range.clone()])));
            }
        }
    }
    println!(
        "scanned {scanned} files, {:.1} MB in {:.2} s ({:.0} MB/s scan only)",
        bytes as f64 / 1e6,
        scan_time.as_secs_f64(),
        bytes as f64 / 1e6 / scan_time.as_secs_f64().max(1e-9)
    );
    println!("injection: {suspicious_files} files would get the suspicious-content note");
    for (kind, (n, first)) in &injection {
        println!("{n:6}  {kind}  (first in {first})");
    }
    let total: usize = counts.values().sum();
    println!("{total} findings");
    let mut by_count: Vec<_> = counts.into_iter().collect();
    by_count.sort_by_key(|b| std::cmp::Reverse(b.1));
    for (rule, n) in by_count {
        println!("{n:6}  {rule}");
        for (line, at) in shown.get(rule).into_iter().flatten() {
            println!("          {at}\n              {line}");
        }
    }
}

fn collect(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for e in entries.flatten() {
        let Ok(ft) = e.file_type() else { continue };
        let p = e.path();
        if ft.is_dir() {
            collect(&p, out);
        } else if ft.is_file() {
            out.push(p);
        }
    }
}
