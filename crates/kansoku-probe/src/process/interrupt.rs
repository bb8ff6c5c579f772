//! Ctrl-C as a polite request: observers poll a flag, stop, and keep their recording; a
//! program started without ptrace gets the request too ([`forward`]) and ends as it chooses.

use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};

static REQUESTED: AtomicBool = AtomicBool::new(false);
/// The signal that asked, when another process sent it (`kill`, `timeout`, a service
/// manager) rather than the terminal: 0 otherwise.
static SENT: AtomicI32 = AtomicI32::new(0);
/// The signal that asked, however it came: 0 before any.
static RECEIVED: AtomicI32 = AtomicI32::new(0);

extern "C" fn on_interrupt(signal: libc::c_int, info: *mut libc::siginfo_t, _: *mut libc::c_void) {
    // SAFETY: the kernel passes a valid siginfo to an SA_SIGINFO handler.
    let code = if info.is_null() { libc::SI_KERNEL } else { unsafe { (*info).si_code } };
    // a terminal's Ctrl-C comes from the kernel (SI_KERNEL) to the whole foreground
    // process group, the program included; kill(2) and friends give SI_USER, SI_QUEUE, SI_TKILL (<= 0)
    if code <= 0 {
        SENT.store(signal, Ordering::SeqCst);
    }
    RECEIVED.store(signal, Ordering::SeqCst);
    REQUESTED.store(true, Ordering::SeqCst);
}

/// Installs a SIGINT/SIGTERM handler that only sets a flag. A second Ctrl-C still stops
/// the process the usual way, in case an observer is stuck.
pub fn install() {
    // SAFETY: a zeroed sigaction is valid; the handler only stores to atomics, which is
    // async-signal-safe.
    unsafe {
        let mut action: libc::sigaction = std::mem::zeroed();
        action.sa_sigaction = on_interrupt as *const () as usize;
        action.sa_flags = libc::SA_RESETHAND | libc::SA_SIGINFO;
        libc::sigaction(libc::SIGINT, &action, std::ptr::null_mut());
        libc::sigaction(libc::SIGTERM, &action, std::ptr::null_mut());
    }
}

/// Has the user asked to stop?
pub fn requested() -> bool {
    REQUESTED.load(Ordering::Relaxed)
}

/// Passes the request on to the observed program `pid`, as `time` and `perf stat` let it
/// reach the program: the signal kansoku got, when another process sent it to kansoku
/// alone (a terminal's Ctrl-C reached the program already). The program can clean up and
/// end as it chooses; kansoku then writes what it measured.
pub fn forward(pid: i32) {
    let signal = SENT.load(Ordering::SeqCst);
    if signal != 0 {
        // SAFETY: kill with integer arguments.
        unsafe { libc::kill(pid, signal) };
    }
}

/// The signal that asked (SIGINT or SIGTERM), however it came, once one has. A program
/// under ptrace leads a process group of its own, so a terminal's Ctrl-C never reaches it:
/// its tracer passes this on.
pub fn received() -> Option<i32> {
    Some(RECEIVED.load(Ordering::SeqCst)).filter(|&s| s != 0)
}
