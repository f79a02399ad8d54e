//! Telling a process from a later one with the same pid, from `/proc`: plain `std`, no crate
//! dependencies, so that `toolgate-store` (which must not depend on this crate) includes this same
//! file with `#[path]` for its audit log's "started" rows.

/// A token that tells a process from a later one with the same pid (`<start>.<boot>`): its
/// start time in clock ticks since boot, and the head of the boot id. `None` when the process
/// does not exist or is a zombie.
pub(crate) fn start_token(pid: u32) -> Option<String> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) may hold spaces and parentheses: count from the last `)`.
    let rest = &stat[stat.rfind(')')? + 1..];
    let mut fields = rest.split_ascii_whitespace();
    // A zombie is dead: its parent has not reaped it yet (or never will, when that parent is
    // gone and the reaper it was handed to does not).
    if fields.next()? == "Z" {
        return None;
    }
    let start = fields.nth(18)?;
    let boot = std::fs::read_to_string("/proc/sys/kernel/random/boot_id").unwrap_or_default();
    Some(format!("{start}.{}", boot.trim().get(..8).unwrap_or("0")))
}
