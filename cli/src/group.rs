//! The command's process group, as `redlock run` manages it: the signals it forwards to it,
//! the watcher process that kills it should `redlock` die, and waiting for it (and stopping
//! it) after the command itself has exited.

use std::time::Duration;

/// The signals `redlock run` forwards to the command's process group.
pub const FORWARDED: [libc::c_int; 6] = [
    libc::SIGINT,
    libc::SIGTERM,
    libc::SIGHUP,
    libc::SIGQUIT,
    libc::SIGUSR1,
    libc::SIGUSR2,
];

/// Signals the command's whole process group (the command and whatever it started).
pub fn signal_child(pid: i32, sig: libc::c_int) {
    // SAFETY: kill(2) on the process group our child leads (it has not been reaped yet).
    unsafe { libc::kill(-pid, sig) };
}

/// A small process forked from `redlock` that kills the command's whole process group with
/// SIGKILL if `redlock` dies without saying it is done: it waits on a pipe whose only write
/// end `redlock` holds, and end-of-file without a byte means `redlock` is gone. This covers
/// what the parent-death signal does not: the command's own children (they share its
/// process group unless they leave it), and systems without PR_SET_PDEATHSIG. If both
/// `redlock` and this watcher are SIGKILLed at once (a kill of `redlock`'s whole process
/// group), only the parent-death signal is left, on Linux, for the command itself.
pub struct GroupWatch {
    done: std::os::fd::OwnedFd,
    pid: libc::pid_t,
}

impl GroupWatch {
    /// Starts watching process group `pgid`; None if the pipe or the fork failed (the
    /// command then runs without this safety net, with a warning).
    pub fn start(pgid: libc::pid_t) -> Option<GroupWatch> {
        use std::os::fd::{AsRawFd, OwnedFd};
        // Close-on-exec (std's pipes always are): nothing exec'd later inherits either end.
        let (read, write) = std::io::pipe().ok()?;
        let (read, write) = (OwnedFd::from(read), OwnedFd::from(write));
        // SAFETY: fork in a multi-threaded process: the child calls only async-signal-safe
        // functions (sigaction, close, read, kill, _exit) and allocates nothing.
        let pid = unsafe { libc::fork() };
        if pid < 0 {
            return None;
        }
        if pid == 0 {
            // SAFETY: see above; every call gets valid arguments and the child never returns.
            unsafe { watch(read.as_raw_fd(), write.as_raw_fd(), pgid) }
        }
        drop(read);
        Some(GroupWatch { done: write, pid })
    }

    /// Tells the watcher the command has ended, so it exits without killing anything, and
    /// reaps it (it exits at once; waited for at most a second).
    pub fn finish(self) {
        use std::os::fd::AsRawFd;
        // SAFETY: write(2) of one byte from a valid buffer to a descriptor we own.
        unsafe { libc::write(self.done.as_raw_fd(), b"d".as_ptr().cast(), 1) };
        drop(self.done);
        for _ in 0..1000 {
            let mut status = 0;
            // SAFETY: waitpid(2) on our own child, non-blocking, with a valid status pointer.
            if unsafe { libc::waitpid(self.pid, &mut status, libc::WNOHANG) } != 0 {
                return;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
    }
}

/// The watcher's whole life, in the forked child.
///
/// # Safety
///
/// Only for the child of a fork: it calls async-signal-safe functions only and exits.
unsafe fn watch(read: libc::c_int, write: libc::c_int, pgid: libc::pid_t) -> ! {
    // SAFETY: plain system calls on valid descriptors and a zeroed (valid) sigaction.
    unsafe {
        // Our copy of the write end would keep the pipe open for ever.
        libc::close(write);
        // Signals meant for `redlock` (a Ctrl-C to its process group) must neither kill the
        // watcher nor run the inherited forwarding handler a second time.
        let mut ignore: libc::sigaction = std::mem::zeroed();
        ignore.sa_sigaction = libc::SIG_IGN;
        for sig in FORWARDED {
            libc::sigaction(sig, &ignore, std::ptr::null_mut());
        }
        // Hold none of `redlock`'s standard streams: whoever reads its output sees the end
        // when `redlock` exits, not when the watcher does.
        for fd in 0..3 {
            libc::close(fd);
        }
        let mut byte = 0u8;
        loop {
            match libc::read(read, (&mut byte as *mut u8).cast(), 1) {
                1 => libc::_exit(0),
                0 => {
                    libc::kill(-pgid, libc::SIGKILL);
                    libc::_exit(0);
                }
                // last_os_error only reads errno: no allocation.
                _ if std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted => {}
                _ => libc::_exit(1),
            }
        }
    }
}

/// True while a process is left in process group `pgid`, after reaping those of its
/// members that are our children (re-parented to us: see [`become_subreaper`]).
pub fn group_alive(pgid: i32) -> bool {
    let mut status = 0;
    // SAFETY: waitpid(2) on members of the group our command led, non-blocking, with a valid
    // status pointer; kill(2) with signal 0 only asks whether the group has a process.
    unsafe {
        while libc::waitpid(-pgid, &mut status, libc::WNOHANG) > 0 {}
        libc::kill(-pgid, 0) == 0
            || std::io::Error::last_os_error().raw_os_error() != Some(libc::ESRCH)
    }
}

/// Ends what is left of process group `pgid`: SIGTERM, then SIGKILL after `grace` ms; waits
/// (bounded) until it is gone.
pub fn stop_group(pgid: i32, grace: u64) {
    if !group_alive(pgid) {
        return;
    }
    signal_child(pgid, libc::SIGTERM);
    let until = std::time::Instant::now() + Duration::from_millis(grace);
    while group_alive(pgid) && std::time::Instant::now() < until {
        std::thread::sleep(Duration::from_millis(10));
    }
    if group_alive(pgid) {
        eprintln!("redlock run: the command's group ignored SIGTERM for {grace} ms; SIGKILL");
        signal_child(pgid, libc::SIGKILL);
        let until = std::time::Instant::now() + Duration::from_secs(10);
        while group_alive(pgid) && std::time::Instant::now() < until {
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

/// Makes this process the reaper of its orphaned descendants (Linux), so that the command's
/// background children, once the command exits, are ours to wait for: otherwise a zombie
/// that the system's init does not reap would look alive for ever.
#[cfg(any(target_os = "linux", target_os = "android"))]
pub fn become_subreaper() {
    // SAFETY: prctl(2) with an integer argument; it changes only this process's attributes.
    unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1 as libc::c_ulong, 0, 0, 0) };
}

/// Elsewhere the system's init reaps orphans.
#[cfg(not(any(target_os = "linux", target_os = "android")))]
pub fn become_subreaper() {}
