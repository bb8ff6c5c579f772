//! One program under ptrace, for every tracer of kansoku (`trace exact --engine ptrace`,
//! `wave --exact`, the trap mechanism of `monitor events`): it starts the program, waits
//! with Ctrl-C in mind, runs it to an address with a one-shot `int3`, keeps the books of
//! its threads, and detaches or ends it. One implementation, so that a fix to any of these
//! (a wait interrupted by the user's Ctrl-C, a thread's first stop arriving before its
//! clone event) reaches every tracer at once.

use std::path::Path;

use nix::errno::Errno;
use nix::sys::ptrace::{self, Options};
use nix::sys::signal::Signal;
use nix::sys::wait::{waitpid, WaitPidFlag, WaitStatus};
use nix::unistd::Pid;

use kansoku_binary::maps::runtime_address;
use kansoku_binary::Program;
use kansoku_core::ExitStatus;

use crate::{ProbeError, PTRACE_HINT};

/// How [`Tracee::run_to`] ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum RunTo {
    /// Thread `tid` is stopped at the address, the original byte back; other threads may
    /// still run until the next wait.
    Reached {
        /// The thread that hit the address.
        tid: Pid,
    },
    /// The program ended first (perhaps by the Ctrl-C or SIGTERM passed on to it).
    Ended(ExitStatus),
}

/// A program started under ptrace, stopped at its first instruction, leading a process
/// group of its own (so the tracer waits on the group and never reaps another child of
/// its host: tests run several tracers at once).
pub(crate) struct Tracee {
    pid: Pid,
    /// Every thread known, the main one first.
    threads: Vec<Pid>,
    /// Threads announced by a clone event whose first SIGSTOP is still to come.
    fresh: Vec<Pid>,
    /// Threads whose first SIGSTOP came before their clone event.
    seen_early: Vec<Pid>,
    /// Whether the user's SIGINT/SIGTERM has been passed on to the program.
    passed_on: bool,
    /// Signals the program got while the tracee ran (delivered to it).
    pub signals: Vec<i32>,
    /// The program's own stops (SIGSTOP...), said and held until SIGCONT.
    stops: crate::stops::Stops,
}

/// The error of a ptrace request on `pid`, with the fix when ptrace is refused.
pub(crate) fn ptrace_error(operation: &'static str, pid: Pid) -> impl Fn(Errno) -> ProbeError {
    move |errno| ProbeError::Ptrace { operation, pid: pid.as_raw(), errno, hint: if errno == Errno::EPERM { PTRACE_HINT } else { "" } }
}

impl Tracee {
    /// Starts `program` with `args` under ptrace with `options` (`PTRACE_O_EXITKILL` is
    /// always added: the program never runs on unobserved). On failure the program is ended.
    pub fn spawn(program: &Path, args: &[String], options: Options) -> Result<Tracee, ProbeError> {
        let pid = crate::spawn::spawn_traced(program, args)?;
        let tracee = Tracee { pid, threads: vec![pid], fresh: Vec::new(), seen_early: Vec::new(), passed_on: false, signals: Vec::new(), stops: Default::default() };
        if let Err(e) = ptrace::setoptions(pid, options | Options::PTRACE_O_EXITKILL) {
            tracee.kill();
            return Err(ptrace_error("SETOPTIONS", pid)(e));
        }
        Ok(tracee)
    }

    /// The program's process id (its main thread's id).
    pub fn pid(&self) -> Pid {
        self.pid
    }

    /// Every thread seen so far, the main one first.
    pub fn threads(&self) -> &[Pid] {
        &self.threads
    }

    /// The error of a ptrace request on one of this program's threads.
    pub fn error(&self, operation: &'static str, tid: Pid) -> impl Fn(Errno) -> ProbeError {
        ptrace_error(operation, tid)
    }

    /// Waits for the next stop or end of any of the program's threads. A wait that the
    /// user's Ctrl-C interrupts waits again: the caller checks
    /// [`crate::interrupt::requested`] itself and decides what to keep.
    pub fn wait(&self) -> Result<WaitStatus, ProbeError> {
        self.wait_for(Pid::from_raw(-self.pid.as_raw()))
    }

    /// As [`Tracee::wait`], for one thread.
    pub(crate) fn wait_for(&self, who: Pid) -> Result<WaitStatus, ProbeError> {
        loop {
            match waitpid(who, Some(WaitPidFlag::__WALL)) {
                Err(Errno::EINTR) => continue,
                Err(errno) => return Err(ProbeError::Wait { pid: self.pid.as_raw(), errno }),
                Ok(status) => return Ok(status),
            }
        }
    }

    /// As [`Tracee::wait`], and the first SIGINT/SIGTERM kansoku gets is passed on to the
    /// program, which leads a process group of its own and so never saw a terminal's
    /// Ctrl-C: it ends as it chooses. For waits in which the program runs freely.
    fn wait_passing_on(&mut self) -> Result<WaitStatus, ProbeError> {
        loop {
            match waitpid(Pid::from_raw(-self.pid.as_raw()), Some(WaitPidFlag::__WALL)) {
                Err(Errno::EINTR) => {
                    if let (false, Some(signal)) = (self.passed_on, crate::interrupt::received()) {
                        self.passed_on = true;
                        // SAFETY: kill with integer arguments.
                        unsafe { libc::kill(self.pid.as_raw(), signal) };
                    }
                }
                Err(errno) => return Err(ProbeError::Wait { pid: self.pid.as_raw(), errno }),
                Ok(status) => return Ok(status),
            }
        }
    }

    /// Runs the stopped program at full speed to the first execution of `address` by any
    /// thread (a one-shot `int3`), and leaves that thread stopped there with the original
    /// byte back. Signals the program gets on the way are delivered to it (and listed in
    /// [`Tracee::signals`]); new threads are followed; the user's Ctrl-C is passed on.
    pub(crate) fn run_to(&mut self, address: u64) -> Result<RunTo, ProbeError> {
        let pid = self.pid;
        let at = address as ptrace::AddressType;
        let word = ptrace::read(pid, at).map_err(ptrace_error("PEEKDATA", pid))?;
        ptrace::write(pid, at, (word & !0xff) | 0xcc).map_err(ptrace_error("POKEDATA", pid))?;
        let mut resume = vec![(pid, None)];
        loop {
            for (tid, signal) in resume.drain(..) {
                // a thread that has gone since its stop cannot be continued: nothing to do
                let _ = ptrace::cont(tid, signal);
            }
            match self.wait_passing_on()? {
                WaitStatus::Stopped(tid, Signal::SIGTRAP) => {
                    let mut regs = ptrace::getregs(tid).map_err(ptrace_error("GETREGS", tid))?;
                    if regs.rip == address + 1 {
                        ptrace::write(pid, at, word).map_err(ptrace_error("POKEDATA", pid))?;
                        regs.rip = address;
                        ptrace::setregs(tid, regs).map_err(ptrace_error("SETREGS", tid))?;
                        return Ok(RunTo::Reached { tid });
                    }
                    // a trap of the program's own (raise, kill): it is the program's
                    resume.push((tid, sent_by_a_process(tid).then_some(Signal::SIGTRAP)));
                }
                WaitStatus::Stopped(tid, Signal::SIGSTOP) if self.is_new_thread(tid) => resume.push((tid, None)),
                WaitStatus::Stopped(tid, signal) if self.program_stopped(tid, signal) => resume.push((tid, None)),
                WaitStatus::Stopped(tid, signal) => {
                    self.signals.push(signal as i32);
                    resume.push((tid, Some(signal)));
                }
                WaitStatus::PtraceEvent(tid, _, event) => {
                    if event == libc::PTRACE_EVENT_CLONE {
                        self.note_clone(tid);
                    }
                    resume.push((tid, None));
                }
                WaitStatus::Exited(tid, code) if tid == pid => return Ok(RunTo::Ended(ExitStatus::Exited(code))),
                WaitStatus::Signaled(tid, signal, _) if tid == pid => return Ok(RunTo::Ended(ExitStatus::Killed(signal as i32))),
                _ => {}
            }
        }
    }

    /// Runs the program to its ELF entry point, where the dynamic linker has mapped every
    /// library it loads at start: the place to resolve an address in a library.
    pub(crate) fn run_to_entry(&mut self, program_path: &Path) -> Result<RunTo, ProbeError> {
        let program = Program::open(program_path)?;
        let modules = crate::procfs::ModuleReader::default().code_modules(self.pid.as_raw())?;
        let entry = runtime_address(&modules, &program, &program_path.to_string_lossy(), program.entry)
            .ok_or_else(|| ProbeError::MarkerNotMapped { marker: "the entry point".into(), program: program_path.to_path_buf() })?;
        self.run_to(entry)
    }

    /// Is this stop a thread's first (the SIGSTOP of a new thread, which may come before
    /// its parent's clone event)? Registers the thread.
    pub(crate) fn is_new_thread(&mut self, tid: Pid) -> bool {
        if let Some(i) = self.fresh.iter().position(|&t| t == tid) {
            self.fresh.swap_remove(i);
            return true;
        }
        if !self.threads.contains(&tid) {
            // its stop came before the clone event: remember that its SIGSTOP is consumed
            self.threads.push(tid);
            self.seen_early.push(tid);
            return true;
        }
        false
    }

    /// Is this stop of `tid` the program stopping itself (the group-stop after a SIGSTOP,
    /// SIGTSTP... was delivered)? Then it has been said (once per stop, [`crate::stops::tell`])
    /// and held until a SIGCONT came (or the user's Ctrl-C): the caller resumes `tid`
    /// without a signal, and records no signal (its delivery was the stop before).
    pub(crate) fn program_stopped(&mut self, tid: Pid, signal: Signal) -> bool {
        self.stops.group_stop(self.pid, tid, signal, &mut crate::stops::tell)
    }

    /// Registers the thread that `parent`'s clone event announces.
    pub(crate) fn note_clone(&mut self, parent: Pid) {
        if let Ok(new) = ptrace::getevent(parent) {
            let new = Pid::from_raw(new as i32);
            if let Some(i) = self.seen_early.iter().position(|&t| t == new) {
                self.seen_early.swap_remove(i);
            } else {
                self.threads.push(new);
                self.fresh.push(new);
            }
        }
    }

    /// Stops observing: detaches every thread (`stopped` is stopped now; the others are
    /// waited for, mid-step or running) and waits for the program to end on its own.
    pub(crate) fn detach_all(&mut self, stopped: Pid) -> Result<ExitStatus, ProbeError> {
        let _ = ptrace::detach(stopped, None);
        loop {
            let status = match waitpid(Pid::from_raw(-self.pid.as_raw()), Some(WaitPidFlag::__WALL)) {
                Ok(status) => status,
                Err(Errno::EINTR) => continue,
                Err(Errno::ECHILD) => return Ok(ExitStatus::Detached),
                Err(errno) => return Err(ProbeError::Wait { pid: self.pid.as_raw(), errno }),
            };
            match status {
                WaitStatus::Stopped(tid, signal) => {
                    let deliver = (signal != Signal::SIGTRAP && signal != Signal::SIGSTOP).then_some(signal);
                    let _ = ptrace::detach(tid, deliver);
                }
                WaitStatus::PtraceEvent(tid, _, _) => {
                    let _ = ptrace::detach(tid, None);
                }
                WaitStatus::Exited(tid, code) if tid == self.pid => return Ok(ExitStatus::Exited(code)),
                WaitStatus::Signaled(tid, signal, _) if tid == self.pid => return Ok(ExitStatus::Killed(signal as i32)),
                _ => {}
            }
        }
    }

    /// Ends the program and every thread of it, and reaps it.
    pub fn kill(&self) {
        let group = Pid::from_raw(-self.pid.as_raw());
        let _ = nix::sys::signal::kill(group, Signal::SIGKILL);
        while let Ok(status) = waitpid(group, Some(WaitPidFlag::__WALL)) {
            if matches!(status, WaitStatus::Exited(p, _) | WaitStatus::Signaled(p, _, _) if p == self.pid) {
                break;
            }
        }
    }
}

/// Was the pending SIGTRAP of stopped thread `tid` sent by a process (kill, raise), rather
/// than raised by the CPU (an `int3`, a single step)?
fn sent_by_a_process(tid: Pid) -> bool {
    // SI_USER, SI_TKILL and SI_QUEUE are <= 0; the kernel's own traps are > 0
    ptrace::getsiginfo(tid).is_ok_and(|info| info.si_code <= 0)
}
