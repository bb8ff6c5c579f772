//! Ctrl-C as a polite request: observers poll a flag, stop, and keep their recording.

use std::sync::atomic::{AtomicBool, Ordering};

static REQUESTED: AtomicBool = AtomicBool::new(false);

extern "C" fn on_interrupt(_: libc::c_int) {
    REQUESTED.store(true, Ordering::SeqCst);
}

/// Installs a SIGINT/SIGTERM handler that only sets a flag. A second Ctrl-C still stops
/// the process the usual way, in case an observer is stuck.
pub fn install() {
    unsafe {
        let mut action: libc::sigaction = std::mem::zeroed();
        action.sa_sigaction = on_interrupt as *const () as usize;
        action.sa_flags = libc::SA_RESETHAND;
        libc::sigaction(libc::SIGINT, &action, std::ptr::null_mut());
        libc::sigaction(libc::SIGTERM, &action, std::ptr::null_mut());
    }
}

/// Has the user asked to stop?
pub fn requested() -> bool {
    REQUESTED.load(Ordering::Relaxed)
}
