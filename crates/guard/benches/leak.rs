//! Throughput of the output pipeline's safety stages (leak scan + redact + injection
//! neutralizing) on 10 MB of mixed source code and logs with a few planted secrets, against a
//! baseline that runs every rule's regex separately over the whole text, in the same run.
//!
//! ```text
//! cargo bench -p toolgate-guard --bench leak
//! ```
//!
//! The corpus is built deterministically from the cargo registry sources on the machine (files
//! under `~/.cargo/registry/src`, sorted by path) interleaved with synthetic log lines; without
//! a registry it falls back to synthetic code. Before divan's table, `main` prints MB/s for each
//! stage and the ratio to the baseline, measured over the same corpus.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use divan::Bencher;
use divan::counter::BytesCount;
use toolgate_benchkit::summary::{Row, Target};
use toolgate_guard::injection::{neutralize, redact_and_neutralize};
use toolgate_guard::leak::LeakDetector;

const CORPUS_BYTES: usize = 10 << 20;

/// Fake secrets planted in the corpus (random filler in public formats).
const PLANTED: &[&str] = &[
    "export GITHUB_TOKEN=ghp_FAKEaB3dE5fG7hJ9kL1mN3pQ5rS7tU9vW1xY",
    "aws_access_key_id = AKIAFAKE2345ABCDEFGH",
    "DATABASE_URL=postgres://app:FAKEq8Zr2mX9tLw4KpB7@db.internal:5432/app",
    "Authorization: Bearer sk-proj-FAKE3nQ8vR2mX9tLw4KpB7nYc5hJ1dF6gS0aZ3xC8vB2nM7qW4eR9tY1uI6oP3aS5dF8gH",
    "STRIPE_SECRET_KEY=sk_live_FAKE9vR2mX9tLw4KpB7nYc5hJ1",
    "slack: xoxb-123456789012-1234567890123-FAKEaB3dE5fG7hJ9kL1mN3pQ",
    "password = \"hU7kq2Lm9x#4FAKE\"",
];

fn corpus() -> &'static str {
    static CORPUS: OnceLock<String> = OnceLock::new();
    CORPUS.get_or_init(build_corpus)
}

fn detector() -> &'static LeakDetector {
    static D: OnceLock<LeakDetector> = OnceLock::new();
    D.get_or_init(LeakDetector::new)
}

fn build_corpus() -> String {
    let mut files = Vec::new();
    if let Some(root) = registry_root() {
        collect(&root, &mut files);
    }
    files.sort();
    let mut out = String::with_capacity(CORPUS_BYTES + 4096);
    let mut rng = 0x2545_f491_4f6c_dd1du64;
    let mut files = files.into_iter();
    let mut planted = 0;
    while out.len() < CORPUS_BYTES {
        // ~64 KB of source code ...
        let start = out.len();
        while out.len() - start < 64 << 10 {
            match files.next() {
                Some(path) => {
                    if let Ok(text) = std::fs::read_to_string(&path) {
                        out.push_str(&text);
                    }
                }
                None => out.push_str(&synthetic_code(&mut rng)),
            }
        }
        // ... then ~24 KB of logs, now and then with a planted secret.
        let start = out.len();
        while out.len() - start < 24 << 10 {
            out.push_str(&log_line(&mut rng));
        }
        if out.len() / (1 << 20) > planted {
            out.push_str(PLANTED[planted % PLANTED.len()]);
            out.push('\n');
            planted += 1;
        }
    }
    let cut = toolgate_guard::output::floor_char_boundary(&out, CORPUS_BYTES);
    out.truncate(cut);
    out
}

fn registry_root() -> Option<PathBuf> {
    let home = std::env::var_os("CARGO_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cargo")))?;
    let root = home.join("registry/src");
    root.is_dir().then_some(root)
}

fn collect(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for e in entries.flatten() {
        let p = e.path();
        match e.file_type() {
            Ok(t) if t.is_dir() => collect(&p, out),
            Ok(t) if t.is_file() => {
                let ext = p.extension().and_then(|e| e.to_str()).unwrap_or("");
                if matches!(ext, "rs" | "md" | "toml" | "json" | "yml" | "yaml" | "txt" | "c" | "h" | "py") {
                    out.push(p);
                }
            }
            _ => {}
        }
    }
}

fn next(rng: &mut u64) -> u64 {
    *rng ^= *rng << 13;
    *rng ^= *rng >> 7;
    *rng ^= *rng << 17;
    *rng
}

fn log_line(rng: &mut u64) -> String {
    const LEVELS: &[&str] = &["INFO", "DEBUG", "WARN", "ERROR", "TRACE"];
    const MSGS: &[&str] = &[
        "request completed",
        "token refreshed for session",
        "cache miss for key",
        "retrying connection to upstream",
        "user authenticated via oauth",
        "secret rotation scheduled",
        "password policy check passed",
        "GET /api/v1/items?page=3&limit=50 200",
        "ignoring stale lock file",
    ];
    let r = next(rng);
    format!(
        "2026-11-21T05:{:02}:{:02}.{:03}Z {} svc::worker{}: {} id={:016x} took={}ms\n",
        r % 60,
        (r >> 8) % 60,
        (r >> 16) % 1000,
        LEVELS[(r >> 26) as usize % LEVELS.len()],
        (r >> 30) % 8,
        MSGS[(r >> 34) as usize % MSGS.len()],
        next(rng),
        (r >> 40) % 5000
    )
}

fn synthetic_code(rng: &mut u64) -> String {
    let r = next(rng);
    format!(
        "fn handler_{r:x}(key: &str, token: Option<Token>) -> Result<(), Error> {{\n    let map = HashMap::new();\n    \
         let secret_len = key.len() + {};\n    map.insert(key.to_owned(), token);\n    Ok(())\n}}\n",
        r % 100
    )
}

/// The gate's leak + injection stages, one automaton pass.
fn pipeline(text: &str) -> usize {
    let g = redact_and_neutralize(detector(), text);
    g.text.len() + g.findings.len()
}

/// The same stages composed from the two separate calls (two passes, two rewrites).
fn two_step(text: &str) -> usize {
    let redacted = detector().redact(text);
    let n = neutralize(&redacted.text);
    n.text.len() + redacted.findings.len()
}

/// Every rule's pattern compiled by the `regex` crate with its defaults (Unicode `\b`, `\s`,
/// `\w`), plus the generic rules' keyword regex: what a straightforward implementation runs.
fn unicode_baseline() -> Vec<regex::Regex> {
    detector()
        .rules()
        .iter()
        .filter_map(|r| r.pattern())
        .chain(["(?i)passw|pwd|passphrase|secret|token|key"])
        .filter_map(|p| regex::Regex::new(p).ok())
        .collect()
}

/// Best time of each closure over `rounds` rounds, the closures taking turns in every round so
/// that load from other processes hits them alike.
fn best_of(rounds: usize, fs: &mut [&mut dyn FnMut() -> usize]) -> Vec<Duration> {
    let mut best = vec![Duration::MAX; fs.len()];
    for f in fs.iter_mut() {
        std::hint::black_box(f()); // warm-up
    }
    for _ in 0..rounds {
        for (f, b) in fs.iter_mut().zip(best.iter_mut()) {
            let t = Instant::now();
            std::hint::black_box(f());
            *b = (*b).min(t.elapsed());
        }
    }
    best
}

fn main() {
    let t = Instant::now();
    let built = LeakDetector::new();
    println!("building the detector ({} rules): {:.1} ms", built.rules().len(), t.elapsed().as_secs_f64() * 1e3);
    let text = corpus();
    let d = detector();
    let mb = text.len() as f64 / 1e6;
    let mbs = |t: Duration| mb / t.as_secs_f64();
    let findings = d.scan(text);
    let naive = d.scan_naive(text);
    println!(
        "corpus: {mb:.1} MB, {} findings ({} from the naive scan) over {} rules",
        findings.len(),
        naive.len(),
        d.rules().len()
    );
    let mut ids: Vec<_> = findings.iter().map(|f| f.rule_id).collect();
    ids.dedup();
    println!("rules that fired: {ids:?}");
    let unicode = unicode_baseline();
    let times = best_of(
        toolgate_benchkit::rounds(7, 3),
        &mut [
            &mut || pipeline(text),
            &mut || two_step(text),
            &mut || d.scan(text).len(),
            &mut || d.redact(text).text.len(),
            &mut || neutralize(text).text.len(),
            &mut || d.scan_naive(text).len(),
            &mut || unicode.iter().map(|re| re.find_iter(text).count()).sum(),
        ],
    );
    let [full, two, scan, redact, neut, base, base_unicode] = times[..] else { return };
    println!("pipeline (scan + redact + neutralize): {:7.0} MB/s", mbs(full));
    println!("  as two calls (redact, neutralize):   {:7.0} MB/s", mbs(two));
    println!("  leak scan:                           {:7.0} MB/s", mbs(scan));
    println!("  leak redact (scan + rewrite):        {:7.0} MB/s", mbs(redact));
    println!("  neutralize:                          {:7.0} MB/s", mbs(neut));
    println!("baseline (each rule's regex, whole text): {:4.0} MB/s", mbs(base));
    println!("ratio pipeline / baseline: {:.1}x", base.as_secs_f64() / full.as_secs_f64());
    println!(
        "second baseline, `regex` crate in its default Unicode mode, each rule's pattern over the text \
         ({} of {} patterns compile): {:.0} MB/s, ratio {:.1}x",
        unicode.len(),
        d.rules().iter().filter(|r| r.pattern().is_some()).count() + 1,
        mbs(base_unicode),
        base_unicode.as_secs_f64() / full.as_secs_f64()
    );
    Row::new(format!("leak scan + output stage, {} rules", d.rules().len()), mbs(full), "MB/s")
        .target(Target::AtLeast(1000.0))
        .emit();
    Row::new("leak scan + output stage over the per-rule baseline", mbs(full), "MB/s")
        .peer("each rule's regex", mbs(base))
        .target(Target::RatioAtLeast(18.0))
        .emit();
    // The summary's short run skips divan's table.
    if !toolgate_benchkit::quick() {
        divan::main();
    }
}

#[divan::bench(sample_count = 10)]
fn full_pipeline(b: Bencher<'_, '_>) {
    let text = corpus();
    b.counter(BytesCount::new(text.len())).bench(|| pipeline(text));
}

#[divan::bench(sample_count = 10)]
fn leak_scan(b: Bencher<'_, '_>) {
    let text = corpus();
    b.counter(BytesCount::new(text.len())).bench(|| detector().scan(text).len());
}

#[divan::bench(sample_count = 10)]
fn neutralize_only(b: Bencher<'_, '_>) {
    let text = corpus();
    b.counter(BytesCount::new(text.len())).bench(|| neutralize(text).text.len());
}

#[divan::bench(sample_count = 3)]
fn baseline_each_rule_regex(b: Bencher<'_, '_>) {
    let text = corpus();
    b.counter(BytesCount::new(text.len())).bench(|| detector().scan_naive(text).len());
}
