//! Starting a program as a ptrace tracee.

use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use nix::sys::personality::{self, Persona};
use nix::sys::ptrace;
use nix::sys::wait::{waitpid, WaitStatus};
use nix::unistd::{execv, fork, ForkResult, Pid};

use crate::ProbeError;

/// Finds `program` the way a shell would: a path with a slash as is, else along `$PATH`.
pub fn resolve_program(program: &Path) -> Result<PathBuf, ProbeError> {
    let spawn_err = |reason: String| ProbeError::Spawn { program: program.to_path_buf(), reason };
    let candidate = if program.as_os_str().as_bytes().contains(&b'/') {
        program.to_path_buf()
    } else {
        std::env::var_os("PATH")
            .and_then(|paths| std::env::split_paths(&paths).map(|d| d.join(program)).find(|p| p.is_file()))
            .ok_or_else(|| spawn_err("not found in $PATH".into()))?
    };
    let meta = std::fs::metadata(&candidate).map_err(|e| spawn_err(format!("{e}")))?;
    if !meta.is_file() {
        return Err(spawn_err("not a regular file".into()));
    }
    if meta.permissions().mode() & 0o111 == 0 {
        return Err(spawn_err("not executable (chmod +x it?)".into()));
    }
    check_loadable(&candidate).map_err(spawn_err)?;
    candidate.canonicalize().map_err(|e| spawn_err(format!("{e}")))
}

/// The kernel runs ELF files and `#!` scripts; anything else fails only after exec (under
/// Valgrind as a silent empty run), so it is refused here, with what the file starts with.
fn check_loadable(path: &Path) -> Result<(), String> {
    use std::io::Read;
    let mut head = [0u8; 4];
    let n = std::fs::File::open(path).and_then(|mut f| f.read(&mut head)).map_err(|e| e.to_string())?;
    let head = &head[..n];
    if head == b"\x7fELF" || head.starts_with(b"#!") {
        return Ok(());
    }
    Err(format!("neither an ELF executable nor a #! script (it starts with {:?})", String::from_utf8_lossy(head)))
}

/// The program path and argument vector as C strings, built before `fork` (after it the
/// child may only make async-signal-safe calls).
fn c_argv(program: &Path, args: &[String]) -> Result<(CString, Vec<CString>), ProbeError> {
    let spawn_err = |reason: String| ProbeError::Spawn { program: program.to_path_buf(), reason };
    let path = CString::new(program.as_os_str().as_bytes()).map_err(|_| spawn_err("path contains a NUL byte".into()))?;
    let mut argv = vec![path.clone()];
    for a in args {
        argv.push(CString::new(a.as_bytes()).map_err(|_| spawn_err(format!("argument {a:?} contains a NUL byte")))?);
    }
    Ok((path, argv))
}

/// A forked child that waits for [`ExecGate::open`] before it execs the program, so that
/// observers (perf events with `enable_on_exec`) can be attached to it first. Dropping
/// the gate unopened ends the child without running the program.
pub struct ExecGate {
    /// The forked child's process id (the program's, once it execs).
    pub pid: Pid,
    write: std::os::fd::OwnedFd,
}

impl ExecGate {
    /// Forks the child that will exec `program` with `args` (kansoku's environment) when
    /// the gate is opened.
    pub fn spawn(program: &Path, args: &[String]) -> Result<ExecGate, ProbeError> {
        Self::spawn_with_env(program, args, &[])
    }

    /// As [`ExecGate::spawn`], with `env` set (or replaced) in the program's environment.
    pub(crate) fn spawn_with_env(program: &Path, args: &[String], env: &[(String, String)]) -> Result<ExecGate, ProbeError> {
        let spawn_err = |reason: String| ProbeError::Spawn { program: program.to_path_buf(), reason };
        let (path, argv) = c_argv(program, args)?;
        // Built before the fork: the child only execs.
        let envp: Vec<CString> = std::env::vars_os()
            .filter(|(k, _)| !env.iter().any(|(n, _)| k.as_os_str() == n.as_str()))
            .map(|(k, v)| [k.as_bytes(), b"=", v.as_bytes()].concat())
            .chain(env.iter().map(|(k, v)| format!("{k}={v}").into_bytes()))
            .filter_map(|b| CString::new(b).ok())
            .collect();
        let (read, write) = nix::unistd::pipe().map_err(|e| spawn_err(format!("pipe: {e}")))?;
        let parent = nix::unistd::getpid();
        // SAFETY: the child calls only async-signal-safe functions before exec or _exit
        // (prctl, getppid, close, read, execve): everything it needs (path, argv, envp) was
        // built before the fork, so it allocates nothing and takes no lock.
        match unsafe { fork() }.map_err(|e| spawn_err(format!("fork: {e}")))? {
            ForkResult::Child => {
                die_with_parent(parent);
                drop(write);
                let mut byte = [0u8; 1];
                // EOF without a byte: the parent gave up; do not run the program.
                if nix::unistd::read(std::os::fd::AsRawFd::as_raw_fd(&read), &mut byte) != Ok(1) {
                    // SAFETY: _exit ends the forked child at once, running no destructor or atexit handler of the parent's copy.
                    unsafe { libc::_exit(126) }
                }
                let _ = nix::unistd::execve(&path, &argv, &envp);
                // SAFETY: as above: exec failed, so the child ends without running the parent's cleanup.
                unsafe { libc::_exit(127) }
            }
            ForkResult::Parent { child } => Ok(ExecGate { pid: child, write }),
        }
    }

    /// Lets the child exec the program; returns its pid.
    pub fn open(self) -> Pid {
        let _ = nix::unistd::write(&self.write, &[1]);
        self.pid
    }
}

/// Forks and execs `program` with `args` under PTRACE_TRACEME, with address-space
/// randomisation off so that runs are reproducible. Returns once the child is stopped at
/// its first instruction (the exec stop). The child leads its own process group.
pub(crate) fn spawn_traced(program: &Path, args: &[String]) -> Result<Pid, ProbeError> {
    let spawn_err = |reason: String| ProbeError::Spawn { program: program.to_path_buf(), reason };
    let (path, argv) = c_argv(program, args)?;
    let parent = nix::unistd::getpid();
    // SAFETY: the child calls only async-signal-safe functions (prctl, getppid, ptrace,
    // personality, execv, _exit) on data built before the fork: no allocation, no lock.
    match unsafe { fork() }.map_err(|e| spawn_err(format!("fork failed: {e}")))? {
        ForkResult::Child => {
            die_with_parent(parent);
            let _ = ptrace::traceme();
            // Its own process group: the tracer waits on the group, not on every child.
            let _ = nix::unistd::setpgid(Pid::from_raw(0), Pid::from_raw(0));
            if let Ok(p) = personality::get() {
                let _ = personality::set(p | Persona::ADDR_NO_RANDOMIZE);
            }
            let _ = execv(&path, &argv);
            // SAFETY: exec failed; _exit ends the forked child without the parent's cleanup.
            unsafe { libc::_exit(127) }
        }
        ForkResult::Parent { child } => match waitpid(child, None) {
            Ok(WaitStatus::Stopped(_, nix::sys::signal::Signal::SIGTRAP)) => Ok(child),
            Ok(WaitStatus::Exited(_, 127)) => Err(spawn_err(
                "exec failed (is it a program for this machine?), or ptrace is not permitted here".into(),
            )),
            Ok(other) => Err(spawn_err(format!("unexpected first stop: {other:?}"))),
            Err(errno) => Err(ProbeError::Wait { pid: child.as_raw(), errno }),
        },
    }
}

/// What a run that waits for its program tells its caller meanwhile.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Progress {
    /// Hits (or records) so far.
    Count(u64),
    /// The program is stopped by this signal (it stopped itself, or a job-control stop):
    /// nothing happens until it gets a SIGCONT. Said once per stop.
    Stopped {
        /// The stopping signal's number (SIGSTOP, SIGTSTP, ...).
        signal: i32,
    },
}

/// What [`poll_child`] saw.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ChildState {
    /// Neither stopped nor ended: it is running or sleeping.
    Running,
    /// Stopped by this signal (SIGSTOP, SIGTSTP, ...): it runs on after a SIGCONT.
    Stopped(i32),
    /// It exited or was killed (and is now reaped), with this status.
    Ended(kansoku_core::ExitStatus),
}

/// One look at a child that runs freely while an observer drains its data: on Ctrl-C or
/// SIGTERM (first time only) the request is passed on to the child
/// ([`crate::interrupt::forward`]), which ends as it chooses; then whether it runs, is
/// stopped, or has ended.
/// `interrupted` records whether the user stopped the run.
pub(crate) fn poll_child(pid: Pid, interrupted: &mut bool) -> Result<ChildState, ProbeError> {
    use kansoku_core::ExitStatus;
    // the program gets the request (it can clean up) and ends as it chooses; a second
    // Ctrl-C ends kansoku, and the program with it (PR_SET_PDEATHSIG)
    if crate::interrupt::requested() && !*interrupted {
        *interrupted = true;
        crate::interrupt::forward(pid.as_raw());
    }
    let flags = nix::sys::wait::WaitPidFlag::WNOHANG | nix::sys::wait::WaitPidFlag::WUNTRACED;
    match waitpid(pid, Some(flags)) {
        Ok(WaitStatus::Exited(_, code)) => Ok(ChildState::Ended(ExitStatus::Exited(code))),
        Ok(WaitStatus::Signaled(_, sig, _)) => Ok(ChildState::Ended(ExitStatus::Killed(sig as i32))),
        Ok(WaitStatus::Stopped(_, sig)) => Ok(ChildState::Stopped(sig as i32)),
        Ok(_) | Err(nix::errno::Errno::EINTR) => Ok(ChildState::Running),
        Err(errno) => Err(ProbeError::Wait { pid: pid.as_raw(), errno }),
    }
}

/// `waitpid` that retries when a signal (the user's Ctrl-C) interrupts it: the caller's
/// loop checks for the interruption itself and finishes the recording.
pub(crate) fn wait_retrying(pid: Pid, flags: Option<nix::sys::wait::WaitPidFlag>) -> nix::Result<WaitStatus> {
    loop {
        match waitpid(pid, flags) {
            Err(nix::errno::Errno::EINTR) => continue,
            other => return other,
        }
    }
}

/// In a forked child before exec: dies with its observer. When kansoku is killed (even by
/// SIGKILL or the OOM killer) the observed program must not run on unobserved, reparented
/// to init. If the observer is already gone, the child ends at once.
pub(crate) fn die_with_parent(parent: Pid) {
    // SAFETY: prctl with integer arguments, getppid and _exit take no memory and are
    // async-signal-safe, as a forked child before exec requires.
    unsafe {
        libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
        if libc::getppid() != parent.as_raw() {
            libc::_exit(126);
        }
    }
}
