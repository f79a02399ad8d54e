//! Links the `toolgate` binary with packed relative relocations (`-z pack-relative-relocs`,
//! DT_RELR) on x86-64 Linux with glibc 2.36 or later: the dynamic loader then reads a few KB of
//! relocation bitmaps at every start instead of 3.3 MB of `.rela.dyn` entries (docs/benchmarks.md,
//! "Cold start"). The linker marks the binary as needing `GLIBC_ABI_DT_RELR`, which an older
//! glibc does not have, so it is only done when this machine's glibc has it and the binary is
//! built for this machine (no cross build). `TOOLGATE_NO_RELR=1` leaves it out.

use std::process::Command;

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed=TOOLGATE_NO_RELR");
    let var = |name: &str| std::env::var(name).unwrap_or_default();
    let (target, host) = (var("TARGET"), var("HOST"));
    if target != host || target != "x86_64-unknown-linux-gnu" || !var("TOOLGATE_NO_RELR").is_empty() {
        return;
    }
    if glibc_version().is_some_and(|v| v >= (2, 36)) {
        println!("cargo:rustc-link-arg-bins=-Wl,-z,pack-relative-relocs");
    }
}

/// The C library's version, from `getconf GNU_LIBC_VERSION` ("glibc 2.36"); `None` for another
/// C library or when it cannot be told.
fn glibc_version() -> Option<(u32, u32)> {
    let out = Command::new("getconf").arg("GNU_LIBC_VERSION").output().ok()?;
    let text = String::from_utf8(out.stdout).ok()?;
    let version = text.trim().strip_prefix("glibc ")?;
    let mut parts = version.split('.');
    let major = parts.next()?.parse().ok()?;
    let minor = parts.next()?.trim_end_matches(|c: char| !c.is_ascii_digit()).parse().ok()?;
    Some((major, minor))
}
