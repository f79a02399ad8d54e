//! A whole-process timer: a command run `runs` times after one warm-up run, its wall time and its
//! CPU time (user + system of the child, from `getrusage(RUSAGE_CHILDREN)`) reported as min,
//! median and max. The method hyperfine uses, without its statistics on outliers.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Min, median and max of one measure.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Spread {
    /// The fastest run.
    pub min: Duration,
    /// The median run.
    pub median: Duration,
    /// The slowest run.
    pub max: Duration,
}

impl Spread {
    /// The spread of `samples` (at least one).
    pub fn of(mut samples: Vec<Duration>) -> Spread {
        assert!(!samples.is_empty(), "a spread of no samples");
        samples.sort();
        Spread { min: samples[0], median: samples[samples.len() / 2], max: samples[samples.len() - 1] }
    }
}

/// The figures of one command.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Timed {
    /// Wall time.
    pub wall: Spread,
    /// CPU time, user + system.
    pub cpu: Spread,
}

/// Runs `argv` in `cwd` once to warm up and `runs` more times, each to completion with its output
/// discarded. A run that fails is an error naming the command and its stderr.
pub fn time(argv: &[&str], cwd: &Path, runs: usize) -> Result<Timed, String> {
    once(argv, cwd)?;
    let mut wall = Vec::with_capacity(runs);
    let mut cpu = Vec::with_capacity(runs);
    for _ in 0..runs.max(1) {
        let (w, c) = once(argv, cwd)?;
        wall.push(w);
        cpu.push(c);
    }
    Ok(Timed { wall: Spread::of(wall), cpu: Spread::of(cpu) })
}

/// Like [`time`] for several commands side by side: each runs once to warm up, then `runs` rounds
/// in which every command runs once in turn, so that a change in the machine's load during the
/// run touches them all alike (paired, interleaved runs).
pub fn time_interleaved(commands: &[(&[&str], &Path)], runs: usize) -> Result<Vec<Timed>, String> {
    for (argv, cwd) in commands {
        once(argv, cwd)?;
    }
    let mut samples = vec![(Vec::with_capacity(runs), Vec::with_capacity(runs)); commands.len()];
    for _ in 0..runs.max(1) {
        for ((argv, cwd), (wall, cpu)) in commands.iter().zip(samples.iter_mut()) {
            let (w, c) = once(argv, cwd)?;
            wall.push(w);
            cpu.push(c);
        }
    }
    Ok(samples.into_iter().map(|(wall, cpu)| Timed { wall: Spread::of(wall), cpu: Spread::of(cpu) }).collect())
}

/// One run: its wall time and the CPU time of the child.
fn once(argv: &[&str], cwd: &Path) -> Result<(Duration, Duration), String> {
    let (program, args) = argv.split_first().ok_or("an empty command")?;
    let before = children_cpu();
    let start = Instant::now();
    let out = Command::new(program)
        .args(args)
        .current_dir(cwd)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .output()
        .map_err(|e| format!("cannot start `{program}`: {e}"))?;
    let wall = start.elapsed();
    if !out.status.success() {
        return Err(format!("`{}` failed ({}): {}", argv.join(" "), out.status, String::from_utf8_lossy(&out.stderr)));
    }
    Ok((wall, children_cpu().saturating_sub(before)))
}

/// CPU time (user + system) of every child reaped so far.
fn children_cpu() -> Duration {
    use nix::sys::resource::{UsageWho, getrusage};
    let Ok(usage) = getrusage(UsageWho::RUSAGE_CHILDREN) else { return Duration::ZERO };
    let tv = |t: nix::sys::time::TimeVal| {
        Duration::from_secs(u64::try_from(t.tv_sec()).unwrap_or(0))
            + Duration::from_micros(u64::try_from(t.tv_usec()).unwrap_or(0))
    };
    tv(usage.user_time()) + tv(usage.system_time())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_real_process_is_timed_and_a_failing_one_named() {
        let t = time(&["sh", "-c", "i=0; while [ $i -lt 20000 ]; do i=$((i+1)); done"], Path::new("/"), 3).unwrap();
        assert!(t.wall.min <= t.wall.median && t.wall.median <= t.wall.max);
        assert!(t.cpu.median > Duration::ZERO, "the loop used CPU: {t:?}");
        let e = time(&["sh", "-c", "echo nope >&2; exit 3"], Path::new("/"), 1).unwrap_err();
        assert!(e.contains("nope"), "{e}");
    }
}
