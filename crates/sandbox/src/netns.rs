//! A network namespace for a process toolgate starts outside the sandbox (the browser family's
//! Chromium) whose only way out is a listener toolgate made inside it.
//!
//! [`NetNamespace::new`] creates the namespace on a short-lived thread of its own (`unshare`
//! moves only the calling thread), brings loopback up there and keeps a descriptor of it.
//! [`NetNamespace::listen_loopback`] binds `127.0.0.1:0` inside it: a socket stays in the
//! namespace it was made in, so the listener accepts connections from inside while whatever
//! toolgate does with them (the vetting proxy's own connections, made on other threads) leaves
//! from the host's namespace. [`NetNamespace::enter`] makes a command join it before exec. Inside,
//! there is only loopback: no route, no other address, no host port.
//!
//! Creating a network namespace needs `CAP_SYS_ADMIN`. An unprivileged toolgate would need a
//! user namespace first, which a thread of a multi-threaded process cannot create; there
//! [`NetNamespace::new`] fails and the caller decides what to do without one.

use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::process::CommandExt;

use libc::c_char;

/// A network namespace with loopback up, alive while this value (or a process in it) is.
#[derive(Debug)]
pub struct NetNamespace {
    ns: OwnedFd,
}

impl NetNamespace {
    /// A new network namespace with only loopback, up. Fails without `CAP_SYS_ADMIN` (not
    /// root, or a container that forbids it), with the system's reason.
    pub fn new() -> io::Result<NetNamespace> {
        on_own_thread(|| {
            // SAFETY: unshare on this thread only; no memory is passed.
            if unsafe { libc::unshare(libc::CLONE_NEWNET) } < 0 {
                return Err(io::Error::last_os_error());
            }
            loopback_up()?;
            let ns = std::fs::File::open("/proc/thread-self/ns/net")?;
            Ok(NetNamespace { ns: ns.into() })
        })
    }

    /// A TCP listener on `127.0.0.1` (a free port) inside the namespace.
    pub fn listen_loopback(&self) -> io::Result<std::net::TcpListener> {
        let fd = self.ns.as_raw_fd();
        on_own_thread(move || {
            // SAFETY: setns on this thread only, with a descriptor that outlives the call.
            if unsafe { libc::setns(fd, libc::CLONE_NEWNET) } < 0 {
                return Err(io::Error::last_os_error());
            }
            std::net::TcpListener::bind("127.0.0.1:0")
        })
    }

    /// Makes the process `cmd` starts join this namespace before it runs (call it before
    /// [`crate::contain`], so the namespaces that makes are made inside this one). Keep this
    /// value alive until the process has started.
    pub fn enter(&self, cmd: &mut std::process::Command) {
        let fd = self.ns.as_raw_fd();
        // SAFETY: the hook runs in the child between fork and exec and makes one
        // async-signal-safe system call on an integer; it allocates nothing. The descriptor is
        // open in the child (inherited; close-on-exec, so the command does not keep it).
        unsafe {
            cmd.pre_exec(move || {
                if libc::setns(fd, libc::CLONE_NEWNET) < 0 {
                    return Err(io::Error::last_os_error());
                }
                Ok(())
            });
        }
    }

    /// Whether process `pid` is in this namespace (for tests and status).
    pub fn contains_pid(&self, pid: u32) -> io::Result<bool> {
        use std::os::unix::fs::MetadataExt;
        let ours = std::fs::metadata(format!("/proc/self/fd/{}", self.ns.as_raw_fd()))?;
        let theirs = std::fs::metadata(format!("/proc/{pid}/ns/net"))?;
        Ok((ours.dev(), ours.ino()) == (theirs.dev(), theirs.ino()))
    }
}

/// Runs `f` on a new thread (namespace changes stay with that thread, which then ends).
fn on_own_thread<T: Send + 'static>(f: impl FnOnce() -> io::Result<T> + Send + 'static) -> io::Result<T> {
    std::thread::Builder::new()
        .name("toolgate-netns".to_owned())
        .spawn(f)?
        .join()
        .unwrap_or_else(|_| Err(io::Error::other("the network namespace thread panicked")))
}

/// Sets `lo` up in the calling thread's network namespace.
fn loopback_up() -> io::Result<()> {
    // SAFETY: a socket and an ioctl on a zeroed stack `ifreq`; the socket is closed by OwnedFd.
    unsafe {
        let sock = libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0);
        if sock < 0 {
            return Err(io::Error::last_os_error());
        }
        let sock = <OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(sock);
        let mut ifr: libc::ifreq = std::mem::zeroed();
        for (i, b) in b"lo".iter().enumerate() {
            ifr.ifr_name[i] = *b as c_char;
        }
        ifr.ifr_ifru.ifru_flags = (libc::IFF_UP | libc::IFF_RUNNING) as libc::c_short;
        if libc::ioctl(sock.as_raw_fd(), libc::SIOCSIFFLAGS as _, &ifr) < 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::io::{Read, Write};
    use std::net::TcpListener;

    use super::*;

    #[test]
    fn inside_reaches_only_its_own_listener_and_the_host_stays_out() {
        let ns = match NetNamespace::new() {
            Ok(ns) => ns,
            Err(e) => {
                // Unprivileged here: nothing to test; the browser falls back and says so.
                eprintln!("no network namespace on this machine: {e}");
                return;
            }
        };
        let inside = ns.listen_loopback().expect("a listener inside");
        let inside_addr = inside.local_addr().expect("addr");
        let host = TcpListener::bind("127.0.0.1:0").expect("a host listener");
        let host_addr = host.local_addr().expect("addr");
        // A process in the namespace: the listener made there answers, the host's does not
        // (its port is not even there: refused, not timed out).
        let script = format!(
            "exec 3<>/dev/tcp/127.0.0.1/{}; echo hi >&3; if exec 4<>/dev/tcp/127.0.0.1/{}; then echo host-reached; fi",
            inside_addr.port(),
            host_addr.port()
        );
        let mut cmd = std::process::Command::new("bash");
        cmd.args(["-c", &script]).stderr(std::process::Stdio::null()).stdout(std::process::Stdio::piped());
        ns.enter(&mut cmd);
        let child = cmd.spawn().expect("bash");
        let (mut conn, _) = inside.accept().expect("the inside listener is reached");
        let mut got = [0u8; 3];
        conn.read_exact(&mut got).expect("read");
        assert_eq!(&got, b"hi\n");
        let out = child.wait_with_output().expect("wait");
        assert!(!String::from_utf8_lossy(&out.stdout).contains("host-reached"), "the host's loopback was reached");
        // And the host can use the listener's connections as usual (the proxy's side).
        conn.write_all(b"ok").expect("write");
        host.set_nonblocking(true).expect("nonblocking");
        assert!(host.accept().is_err(), "the host listener saw a connection from inside");
    }
}
