//! The seccomp filter: a small classic-BPF program, built once in the parent and loaded in the
//! child with one `seccomp(2)` call.
//!
//! Landlock confines paths and TCP ports; this filter covers what Landlock cannot:
//!
//! - syscalls with no business in a development command (`ptrace`, the mount family, `kexec_*`,
//!   module loading, `setns`, `open_by_handle_at`, ...) kill the process with `SIGSYS`, which
//!   [`crate::Denial`] reports as "blocked by the sandbox";
//! - syscalls that programs probe and fall back from (`io_uring_*`, `bpf`, `perf_event_open`,
//!   `userfaultfd`, `keyctl`) fail with an errno, so `node` and friends keep working;
//! - new namespaces (`unshare`, `clone` with `CLONE_NEW*`) fail with `EPERM`; `clone3`, whose
//!   flags a filter cannot read, fails with `ENOSYS` so that libc falls back to `clone`;
//! - with the network off, `socket` for any family but `AF_UNIX` fails with `EAFNOSUPPORT`
//!   ("Address family not supported by protocol").

use libc::{c_long, sock_filter};

const BPF_LD_W_ABS: u16 = 0x20;
const BPF_JEQ_K: u16 = 0x15;
const BPF_JGE_K: u16 = 0x35;
const BPF_JSET_K: u16 = 0x45;
const BPF_RET_K: u16 = 0x06;

const RET_KILL_PROCESS: u32 = 0x8000_0000;
const RET_ERRNO: u32 = 0x0005_0000;
const RET_ALLOW: u32 = 0x7fff_0000;

const OFFSET_NR: u32 = 0;
const OFFSET_ARCH: u32 = 4;
const OFFSET_ARG0: u32 = 16;

#[cfg(target_arch = "x86_64")]
const AUDIT_ARCH: u32 = 0xc000_003e;
#[cfg(target_arch = "aarch64")]
const AUDIT_ARCH: u32 = 0xc000_00b7;

/// Every `CLONE_NEW*` flag: user, mount, PID, network, IPC, UTS, cgroup, time.
const CLONE_NEW_ANY: u32 = (libc::CLONE_NEWUSER
    | libc::CLONE_NEWNS
    | libc::CLONE_NEWPID
    | libc::CLONE_NEWNET
    | libc::CLONE_NEWIPC
    | libc::CLONE_NEWUTS
    | libc::CLONE_NEWCGROUP) as u32
    | 0x80; // CLONE_NEWTIME

/// Syscalls that kill the process with `SIGSYS`.
const KILLED: &[c_long] = &[
    libc::SYS_ptrace,
    libc::SYS_process_vm_readv,
    libc::SYS_process_vm_writev,
    libc::SYS_pidfd_getfd,
    libc::SYS_mount,
    libc::SYS_umount2,
    libc::SYS_pivot_root,
    libc::SYS_chroot,
    libc::SYS_move_mount,
    libc::SYS_open_tree,
    libc::SYS_fsopen,
    libc::SYS_fsconfig,
    libc::SYS_fsmount,
    libc::SYS_fspick,
    libc::SYS_mount_setattr,
    libc::SYS_kexec_load,
    libc::SYS_kexec_file_load,
    libc::SYS_init_module,
    libc::SYS_finit_module,
    libc::SYS_delete_module,
    libc::SYS_reboot,
    libc::SYS_swapon,
    libc::SYS_swapoff,
    libc::SYS_setns,
    libc::SYS_open_by_handle_at,
    libc::SYS_name_to_handle_at,
    libc::SYS_acct,
    libc::SYS_quotactl,
    libc::SYS_syslog,
    libc::SYS_vhangup,
    #[cfg(target_arch = "x86_64")]
    libc::SYS_iopl,
    #[cfg(target_arch = "x86_64")]
    libc::SYS_ioperm,
];

/// Syscalls that fail with an errno instead (probed by runtimes that fall back).
const REFUSED: &[(c_long, i32)] = &[
    (libc::SYS_io_uring_setup, libc::ENOSYS),
    (libc::SYS_io_uring_enter, libc::ENOSYS),
    (libc::SYS_io_uring_register, libc::ENOSYS),
    (libc::SYS_bpf, libc::EPERM),
    (libc::SYS_perf_event_open, libc::EACCES),
    (libc::SYS_userfaultfd, libc::EPERM),
    (libc::SYS_keyctl, libc::ENOSYS),
    (libc::SYS_add_key, libc::ENOSYS),
    (libc::SYS_request_key, libc::ENOSYS),
    (libc::SYS_clone3, libc::ENOSYS),
];

/// What the filter should contain.
#[derive(Debug, Clone, Copy)]
pub(crate) struct FilterOptions {
    /// Kill/refuse the dangerous syscalls and namespace creation (read-only, workspace-write).
    pub(crate) confine: bool,
    /// Refuse sockets other than `AF_UNIX`.
    pub(crate) network_off: bool,
}

fn stmt(code: u16, k: u32) -> sock_filter {
    sock_filter { code, jt: 0, jf: 0, k }
}

fn jump(code: u16, k: u32, jt: u8, jf: u8) -> sock_filter {
    sock_filter { code, jt, jf, k }
}

/// Builds the BPF program. The result is handed to the child, which loads it with
/// `seccomp(SECCOMP_SET_MODE_FILTER)` right before `execve`.
pub(crate) fn build_filter(options: FilterOptions) -> Vec<sock_filter> {
    let mut p = Vec::with_capacity(128);
    // A foreign architecture (e.g. i386 via int 0x80) could bypass the syscall numbers: kill.
    p.push(stmt(BPF_LD_W_ABS, OFFSET_ARCH));
    p.push(jump(BPF_JEQ_K, AUDIT_ARCH, 1, 0));
    p.push(stmt(BPF_RET_K, RET_KILL_PROCESS));
    p.push(stmt(BPF_LD_W_ABS, OFFSET_NR));
    #[cfg(target_arch = "x86_64")]
    {
        // The x32 ABI (nr | 0x4000_0000) has its own numbering: kill.
        p.push(jump(BPF_JGE_K, 0x4000_0000, 0, 1));
        p.push(stmt(BPF_RET_K, RET_KILL_PROCESS));
    }
    if options.confine {
        for &nr in KILLED {
            p.push(jump(BPF_JEQ_K, nr as u32, 0, 1));
            p.push(stmt(BPF_RET_K, RET_KILL_PROCESS));
        }
        for &(nr, errno) in REFUSED {
            p.push(jump(BPF_JEQ_K, nr as u32, 0, 1));
            p.push(stmt(BPF_RET_K, RET_ERRNO | errno as u32));
        }
        // clone / unshare with any CLONE_NEW* flag: EPERM (flags are the first argument of both).
        for nr in [libc::SYS_clone, libc::SYS_unshare] {
            p.push(jump(BPF_JEQ_K, nr as u32, 0, 4));
            p.push(stmt(BPF_LD_W_ABS, OFFSET_ARG0));
            p.push(jump(BPF_JSET_K, CLONE_NEW_ANY, 0, 1));
            p.push(stmt(BPF_RET_K, RET_ERRNO | libc::EPERM as u32));
            p.push(stmt(BPF_RET_K, RET_ALLOW));
        }
    }
    if options.network_off {
        for nr in [libc::SYS_socket, libc::SYS_socketpair] {
            p.push(jump(BPF_JEQ_K, nr as u32, 0, 4));
            p.push(stmt(BPF_LD_W_ABS, OFFSET_ARG0));
            p.push(jump(BPF_JEQ_K, libc::AF_UNIX as u32, 0, 1));
            p.push(stmt(BPF_RET_K, RET_ALLOW));
            p.push(stmt(BPF_RET_K, RET_ERRNO | libc::EAFNOSUPPORT as u32));
        }
    }
    p.push(stmt(BPF_RET_K, RET_ALLOW));
    p
}

/// Whether this kernel supports seccomp filters with `SECCOMP_RET_KILL_PROCESS`.
pub(crate) fn available() -> bool {
    const SECCOMP_GET_ACTION_AVAIL: libc::c_ulong = 2;
    let action: u32 = RET_KILL_PROCESS;
    // SAFETY: SECCOMP_GET_ACTION_AVAIL only reads the u32 that the pointer refers to, which
    // lives for the duration of the call.
    let ret = unsafe { libc::syscall(libc::SYS_seccomp, SECCOMP_GET_ACTION_AVAIL, 0, &action as *const u32) };
    ret == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn filter_ends_with_allow_and_fits_jumps() {
        let p = build_filter(FilterOptions { confine: true, network_off: true });
        assert!(p.len() < 4096);
        let last = p.last().map(|f| f.k);
        assert_eq!(last, Some(RET_ALLOW));
        let minimal = build_filter(FilterOptions { confine: false, network_off: false });
        assert!(minimal.len() < 10);
    }
}
