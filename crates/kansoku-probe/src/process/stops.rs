//! A program that stops itself (`raise(SIGSTOP)`, `kill -STOP $$`, a terminal's SIGTSTP):
//! every observer says so, once per stop, and keeps waiting; the program runs on when it gets
//! SIGCONT, and the user's Ctrl-C still ends the run. One policy for every command:
//!
//! * a program under ptrace ([`Stops::group_stop`], used by [`crate::tracee::Tracee`] and the
//!   trap mechanism): after a stopping signal is delivered the tracer sees each thread's
//!   group-stop. Restarting it (as a tracer that only knows signal-delivery stops does)
//!   would let the program run on as if it had never stopped, so the thread is held until
//!   a SIGCONT is pending for it (or Ctrl-C comes), then resumed;
//! * a program that runs on its own under Valgrind ([`Watch`]): a thread looks at its state
//!   without reaping it.
//!
//! The front end says it: it installs the words once ([`on_stop`]); `record`, `monitor` and
//! `monitor events` by the agent or uprobes report the same through their progress
//! callbacks, in the same words ([`said`]).

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use nix::errno::Errno;
use nix::sys::ptrace;
use nix::sys::signal::Signal;
use nix::unistd::Pid;

type Hook = Arc<dyn Fn(i32) + Send + Sync>;

static HOOK: Mutex<Option<Hook>> = Mutex::new(None);

/// How often a held or watched program is looked at.
const POLL: Duration = Duration::from_millis(20);

/// Installs what is told, with the stopping signal, each time the observed program stops
/// (replacing what was installed before).
pub fn on_stop(hook: impl Fn(i32) + Send + Sync + 'static) {
    *HOOK.lock().unwrap_or_else(|e| e.into_inner()) = Some(Arc::new(hook));
}

/// Tells the installed hook that the program is stopped by `signal`.
pub fn tell(signal: i32) {
    let hook = HOOK.lock().unwrap_or_else(|e| e.into_inner()).clone();
    if let Some(hook) = hook {
        hook(signal);
    }
}

/// The words every command says when `program` is stopped by `signal`; `what` is what
/// resumes (`recording`, `tracing`, `measuring`...).
pub fn said(program: &str, signal: i32, what: &str) -> String {
    format!(
        "kansoku: {program} is stopped by {}; {what} resumes when it gets SIGCONT (or press Ctrl-C to end)",
        kansoku_core::text::signal_name(signal)
    )
}

/// The stops of one program under ptrace: which stop each thread last reported, so that
/// the other threads' reports of a stop already over are not taken for a new one.
#[derive(Default)]
pub struct Stops {
    /// Stops seen so far.
    stops: u64,
    /// The stop each thread last reported.
    reported: HashMap<i32, u64>,
}

impl Stops {
    /// Is this ptrace stop of thread `tid` (of program `pid`) by `signal` the program
    /// stopping (a group-stop after a stopping signal was delivered)? If so the caller
    /// resumes `tid` without a signal when this returns. A new stop is told (`tell`, once)
    /// and the thread held until a SIGCONT is pending for it or the user asks to end; the
    /// reports of the other threads for a stop already over return at once.
    pub(crate) fn group_stop(&mut self, pid: Pid, tid: Pid, signal: Signal, tell: &mut dyn FnMut(i32)) -> bool {
        if !matches!(signal, Signal::SIGSTOP | Signal::SIGTSTP | Signal::SIGTTIN | Signal::SIGTTOU) {
            return false;
        }
        // a signal-delivery stop has its siginfo; a group-stop has none
        if ptrace::getsiginfo(tid) != Err(Errno::EINVAL) {
            return false;
        }
        let last = self.reported.insert(tid.as_raw(), self.stops).unwrap_or(0);
        if last < self.stops {
            // this thread's report of the stop that was told (and is over)
            return true;
        }
        self.stops += 1;
        self.reported.insert(tid.as_raw(), self.stops);
        tell(signal as i32);
        while !continued(pid, tid) {
            if crate::interrupt::requested() {
                // it leads a process group of its own, so a terminal's Ctrl-C did not reach
                // it: it gets the request, and acts on it once resumed
                if let Some(signal) = crate::interrupt::received() {
                    // SAFETY: kill with integer arguments.
                    unsafe { libc::kill(pid.as_raw(), signal) };
                }
                break;
            }
            std::thread::sleep(POLL);
        }
        true
    }
}

/// Is a SIGCONT (or SIGKILL) pending for thread `tid` of `pid`, or is it gone or dying?
fn continued(pid: Pid, tid: Pid) -> bool {
    let field = |text: &str, name: &str| text.lines().find_map(|l| l.strip_prefix(name)).map(|v| v.trim().to_string());
    let pending = |text: &str, name: &str| field(text, name).and_then(|v| u64::from_str_radix(&v, 16).ok());
    let (Ok(process), Ok(thread)) = (std::fs::read_to_string(format!("/proc/{pid}/status")), std::fs::read_to_string(format!("/proc/{pid}/task/{tid}/status"))) else {
        return true;
    };
    let wake = (1u64 << (libc::SIGCONT - 1)) | (1u64 << (libc::SIGKILL - 1));
    let dying = field(&thread, "State:").is_none_or(|s| s.starts_with(['Z', 'X']));
    match (pending(&process, "ShdPnd:"), pending(&thread, "SigPnd:")) {
        (Some(shared), Some(own)) => dying || (shared | own) & wake != 0,
        _ => true,
    }
}

/// A program running on its own (not traced), looked at every few milliseconds without
/// being reaped: each stop is told once ([`tell`]). Stops looking when dropped.
pub struct Watch {
    done: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Watch {
    /// Watches child `pid` of this process.
    pub fn child(pid: u32) -> Watch {
        let done = Arc::new(AtomicBool::new(false));
        let flag = done.clone();
        let thread = std::thread::spawn(move || {
            block_interrupts();
            let mut told = false;
            while !flag.load(Ordering::SeqCst) {
                match stopped_by(pid) {
                    Err(()) => return,
                    Ok(Some(signal)) if !told => {
                        told = true;
                        tell(signal);
                    }
                    Ok(Some(_)) => {}
                    Ok(None) => told = false,
                }
                std::thread::sleep(POLL);
            }
        });
        Watch { done, thread: Some(thread) }
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        self.done.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// The signal child `pid` is stopped by, if it is; the stop stays waitable (`WNOWAIT`) and
/// an ended child is not reaped. `Err` once it is no child of ours any more.
fn stopped_by(pid: u32) -> Result<Option<i32>, ()> {
    // SAFETY: a zeroed siginfo_t is valid, and waitid fills it in during the call.
    let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
    // SAFETY: waitid with a valid siginfo pointer; WNOWAIT leaves the child waitable.
    let r = unsafe { libc::waitid(libc::P_PID, pid, &mut info, libc::WSTOPPED | libc::WNOHANG | libc::WNOWAIT) };
    if r != 0 {
        return Err(());
    }
    // SAFETY: waitid succeeded; si_pid and si_status are valid for a child's state change.
    let (who, code, status) = unsafe { (info.si_pid(), info.si_code, info.si_status()) };
    Ok((who != 0 && code == libc::CLD_STOPPED).then_some(status))
}

/// Blocks SIGINT and SIGTERM in the calling helper thread, so that the user's Ctrl-C
/// interrupts the observer's own blocking read or wait (which then looks at
/// [`crate::interrupt::requested`]), not a helper that would not.
pub(crate) fn block_interrupts() {
    let mut set = nix::sys::signal::SigSet::empty();
    set.add(Signal::SIGINT);
    set.add(Signal::SIGTERM);
    let _ = nix::sys::signal::pthread_sigmask(nix::sys::signal::SigmaskHow::SIG_BLOCK, Some(&set), None);
}
