//! Which paths are sensitive to read or to write, as they appear in a command line.

use super::word::quote_for_display;
use super::{CommandClass, Redirect, RedirectKind};

/// Normalizes the spelling of a path for matching: `$HOME`/`${HOME}` become `~`, `/root` and
/// `/home/<user>` become `~`, repeated and `./` segments collapse.
pub(crate) fn normalize(path: &str) -> String {
    let mut p = path.trim_matches(|c| c == '"' || c == '\'').to_string();
    for home in ["${HOME}", "$HOME"] {
        if let Some(rest) = p.strip_prefix(home) {
            p = format!("~{rest}");
        }
    }
    if let Some(rest) = p.strip_prefix("/root") {
        if rest.is_empty() || rest.starts_with('/') {
            p = format!("~{rest}");
        }
    } else if let Some(rest) = p.strip_prefix("/home/") {
        let rest = rest.split_once('/').map(|(_, r)| format!("/{r}")).unwrap_or_default();
        p = format!("~{rest}");
    }
    if let Some(rest) = p.strip_prefix("~")
        && !rest.is_empty()
        && !rest.starts_with('/')
    {
        // `~user/...` is some user's home.
        let rest = rest.split_once('/').map(|(_, r)| format!("/{r}")).unwrap_or_default();
        p = format!("~{rest}");
    }
    while p.contains("//") {
        p = p.replace("//", "/");
    }
    while p.contains("/./") {
        p = p.replace("/./", "/");
    }
    if p.len() > 1 && p.ends_with('/') {
        p.pop();
    }
    p
}

const BLOCK_DEVICES: &[&str] = &[
    "/dev/sd",
    "/dev/hd",
    "/dev/vd",
    "/dev/xvd",
    "/dev/nvme",
    "/dev/mmcblk",
    "/dev/disk",
    "/dev/mapper/",
    "/dev/dm-",
    "/dev/loop",
    "/dev/md",
    "/dev/mem",
    "/dev/kmem",
    "/dev/port",
];

/// True for paths that name a disk or raw memory device.
pub(crate) fn is_block_device(path: &str) -> bool {
    let p = normalize(path);
    BLOCK_DEVICES.iter().any(|d| p.starts_with(d))
}

/// True for `/dev/tcp/...` and `/dev/udp/...`, bash's network pseudo-files.
pub(crate) fn is_network_device(text: &str) -> bool {
    let t = text.replace("//", "/");
    t.contains("/dev/tcp/") || t.contains("/dev/udp/")
}

fn segment_match(p: &str, dir: &str) -> bool {
    // `dir` like "/.ssh": matches "~/.ssh", "~/.ssh/x", "a/.ssh/x", ".ssh", ".ssh/x".
    let bare = &dir[1..];
    p.contains(&format!("{dir}/")) || p.ends_with(dir) || p == bare || p.starts_with(&format!("{bare}/"))
}

/// The risk of writing (creating, modifying, deleting, changing mode) `path`.
pub(crate) fn write_risk(path: &str) -> Option<(CommandClass, String)> {
    let p = normalize(path);
    let blocked = |what: &str| Some((CommandClass::Blocked, format!("writes to {what}")));
    let dangerous = |what: &str| Some((CommandClass::Dangerous, format!("writes to {what}")));
    if is_network_device(&p) {
        return Some((CommandClass::Blocked, "opens a network connection through /dev/tcp or /dev/udp".into()));
    }
    if segment_match(&p, "/.ssh") {
        return blocked("~/.ssh");
    }
    if is_block_device(&p) {
        return blocked(&format!("the disk device {p}"));
    }
    for f in [
        "/etc/passwd",
        "/etc/shadow",
        "/etc/sudoers",
        "/etc/group",
        "/etc/gshadow",
        "/etc/ld.so.preload",
        "/etc/crontab",
        "/etc/cron.",
        "/etc/pam.d",
        "/etc/ssh",
        "/proc/sysrq-trigger",
        "/boot",
    ] {
        if p.starts_with(f) {
            return blocked(f);
        }
    }
    for d in [
        "/etc",
        "/usr",
        "/bin",
        "/sbin",
        "/lib",
        "/lib64",
        "/opt",
        "/sys",
        "/proc",
        "/var/spool/cron",
        "/System",
        "/Library",
    ] {
        if p == d || p.starts_with(&format!("{d}/")) {
            return dangerous(&format!("the system directory {d}"));
        }
    }
    for f in [
        ".bashrc",
        ".bash_profile",
        ".bash_login",
        ".bash_logout",
        ".profile",
        ".zshrc",
        ".zshenv",
        ".zprofile",
        ".zlogin",
        ".config/fish/config.fish",
        ".gitconfig",
        ".npmrc",
        ".pypirc",
        ".netrc",
        ".git-credentials",
    ] {
        if p.ends_with(&format!("/{f}")) || p == f {
            return dangerous(&format!("the startup or credential file {f}"));
        }
    }
    for d in ["/.aws", "/.gnupg", "/.kube", "/.docker", "/.config/autostart", "/.config/systemd", "/.git/hooks"] {
        if segment_match(&p, d) {
            return dangerous(&d[1..]);
        }
    }
    if p == "~" || p == "/" {
        return dangerous(if p == "~" { "the home directory" } else { "the root directory" });
    }
    None
}

/// The risk of reading `path`: private keys, credentials, shell history.
pub(crate) fn read_risk(path: &str) -> Option<(CommandClass, String)> {
    let p = normalize(path);
    if is_network_device(&p) {
        return Some((CommandClass::Blocked, "opens a network connection through /dev/tcp or /dev/udp".into()));
    }
    let secret = |what: &str| Some((CommandClass::Dangerous, format!("reads the secret file {what}")));
    if segment_match(&p, "/.ssh") && !p.ends_with(".pub") && !p.ends_with("known_hosts") && !p.ends_with(".ssh") {
        return secret(&p);
    }
    for f in ["/etc/shadow", "/etc/gshadow", "/etc/sudoers"] {
        if p.starts_with(f) {
            return secret(f);
        }
    }
    for d in ["/.aws", "/.gnupg", "/.kube/config", "/.docker/config.json", "/.config/gh/hosts.yml", "/.password-store"]
    {
        if segment_match(&p, d) {
            return secret(&d[1..]);
        }
    }
    for f in [".netrc", ".git-credentials", ".bash_history", ".zsh_history", ".history", ".pgpass", ".my.cnf"] {
        if p.ends_with(&format!("/{f}")) || p == f {
            return secret(f);
        }
    }
    None
}

/// Directories made of secrets (`~/.ssh`, `~/.aws`, `~/.gnupg`): reading them whole leaks keys.
pub(crate) fn is_secret_dir(path: &str) -> bool {
    let p = normalize(path);
    ["/.ssh", "/.aws", "/.gnupg", "/.kube", "/.password-store", "/.docker"]
        .iter()
        .any(|d| p.ends_with(d) || p == d[1..])
}

/// Whether a redirect creates or modifies a file (not `/dev/null`, `/dev/stderr`, `&2`).
pub(crate) fn redirect_writes_file(r: &Redirect) -> bool {
    let writes = match r.kind {
        RedirectKind::Write
        | RedirectKind::Append
        | RedirectKind::ReadWrite
        | RedirectKind::Clobber
        | RedirectKind::OutputAndError
        | RedirectKind::AppendOutputAndError => true,
        // `>& file` writes to a file unless the target is a descriptor or `-`.
        RedirectKind::DuplicateOutput => !is_fd_target(&r.target),
        _ => false,
    };
    writes && !is_harmless_sink(&r.target)
}

fn is_fd_target(t: &str) -> bool {
    let t = t.trim_start_matches('&');
    t == "-" || (!t.is_empty() && t.trim_end_matches('-').chars().all(|c| c.is_ascii_digit()))
}

fn is_harmless_sink(t: &str) -> bool {
    matches!(t, "/dev/null" | "/dev/stdout" | "/dev/stderr" | "/dev/tty")
        || t.strip_prefix("/dev/fd/").is_some_and(|n| n.chars().all(|c| c.is_ascii_digit()))
}

/// The risk of a redirect: writing a file, a sensitive path, or a network device.
pub(crate) fn redirect_risk(r: &Redirect) -> Option<(CommandClass, String)> {
    match r.kind {
        RedirectKind::HereDocument | RedirectKind::HereString | RedirectKind::ProcessSubstitution => None,
        RedirectKind::Read | RedirectKind::DuplicateInput => read_risk(&r.target),
        _ if redirect_writes_file(r) => Some(
            write_risk(&r.target)
                .unwrap_or((CommandClass::NeedsApproval, format!("writes to {}", quote_for_display(&r.target)))),
        ),
        _ => is_network_device(&r.target)
            .then(|| (CommandClass::Blocked, "opens a network connection through /dev/tcp or /dev/udp".into())),
    }
}

/// A redirect as the user would write it.
pub(crate) fn display_redirect(r: &Redirect) -> String {
    let fd = r.fd.map(|f| f.to_string()).unwrap_or_default();
    let op = match r.kind {
        RedirectKind::Read => "<",
        RedirectKind::Write => ">",
        RedirectKind::Append => ">>",
        RedirectKind::ReadWrite => "<>",
        RedirectKind::Clobber => ">|",
        RedirectKind::DuplicateInput => "<&",
        RedirectKind::DuplicateOutput => ">&",
        RedirectKind::OutputAndError => "&>",
        RedirectKind::AppendOutputAndError => "&>>",
        RedirectKind::HereDocument => return format!("{fd}<<(here-document, {} bytes)", r.target.len()),
        RedirectKind::HereString => "<<<",
        RedirectKind::ProcessSubstitution => "",
    };
    format!("{fd}{op}{}", quote_for_display(&r.target))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalizes_home() {
        assert_eq!(normalize("$HOME/.ssh/"), "~/.ssh");
        assert_eq!(normalize("/home/bob//.ssh/./authorized_keys"), "~/.ssh/authorized_keys");
        assert_eq!(normalize("/root"), "~");
        assert_eq!(normalize("~alice/.bashrc"), "~/.bashrc");
    }

    #[test]
    fn risks() {
        assert_eq!(write_risk("~/.ssh/authorized_keys").map(|r| r.0), Some(CommandClass::Blocked));
        assert_eq!(write_risk("/dev/sda1").map(|r| r.0), Some(CommandClass::Blocked));
        assert_eq!(write_risk("/etc/hosts").map(|r| r.0), Some(CommandClass::Dangerous));
        assert_eq!(write_risk("~/.bashrc").map(|r| r.0), Some(CommandClass::Dangerous));
        assert_eq!(write_risk("target/out.txt"), None);
        assert_eq!(read_risk("~/.ssh/id_ed25519").map(|r| r.0), Some(CommandClass::Dangerous));
        assert_eq!(read_risk("~/.ssh/id_ed25519.pub"), None);
        assert_eq!(read_risk("src/main.rs"), None);
    }
}
