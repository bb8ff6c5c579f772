//! Starting a program as a ptrace tracee.

use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use nix::sys::personality::{self, Persona};
use nix::sys::ptrace;
use nix::sys::wait::{waitpid, WaitStatus};
use nix::unistd::{execv, fork, ForkResult, Pid};

use kansoku_binary::Program;

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

/// The ELF programs that the text of `script` names and that define a function `name`:
/// words that are a path to one (absolute, or from the script's folder) or a program
/// found on `PATH` — what a shim execs. Bounded: the first 64 KiB, 64 programs looked at.
pub fn programs_a_script_names(script: &Path, name: &str) -> Vec<PathBuf> {
    use std::io::Read;
    let mut text = Vec::new();
    if std::fs::File::open(script).and_then(|f| f.take(1 << 16).read_to_end(&mut text)).is_err() {
        return Vec::new();
    }
    let text = String::from_utf8_lossy(&text);
    let folder = script.parent().unwrap_or(Path::new("."));
    let mut seen: Vec<PathBuf> = Vec::new();
    let mut found = Vec::new();
    let words = text.lines().skip(1).flat_map(|l| l.split(|c: char| c.is_whitespace() || "\"'`;|&(){}<>=".contains(c)));
    for word in words.filter(|w| !w.is_empty() && !w.starts_with(['-', '$', '#'])) {
        let candidate = if word.contains('/') { folder.join(word) } else { PathBuf::from(word) };
        let Ok(path) = resolve_program(&candidate) else { continue };
        if seen.contains(&path) {
            continue;
        }
        seen.push(path.clone());
        if seen.len() > 64 {
            break;
        }
        if Program::open(&path).is_ok_and(|p| p.function_named(name).is_ok()) {
            found.push(path);
        }
    }
    found
}

/// How the kernel runs `program` with `args`: a `#!` script is run by its interpreter
/// (with the line's one optional argument, then the script's path, then `args`), up to
/// four scripts deep as the kernel allows, and `#!/usr/bin/env NAME` (or `env -S NAME
/// ARGS`) by the program env would find on `PATH`. Returns the ELF program that runs
/// and its arguments: what a probe of the program's functions is planted in. (A script
/// that runs another program as a child or by exec, a shim, is followed at run time: the
/// agent is loaded into every program it starts, and a uprobe is on a library's file.)
pub fn elf_that_runs(program: &Path, args: &[String]) -> Result<(PathBuf, Vec<String>), ProbeError> {
    use std::io::Read;
    let mut program = program.to_path_buf();
    let mut args = args.to_vec();
    for _ in 0..5 {
        let mut head = [0u8; 256];
        let n = std::fs::File::open(&program).and_then(|mut f| f.read(&mut head)).map_err(|e| ProbeError::Spawn { program: program.clone(), reason: e.to_string() })?;
        let head = &head[..n];
        if !head.starts_with(b"#!") {
            return Ok((program, args));
        }
        let bad = |reason: String| ProbeError::Spawn { program: program.clone(), reason };
        let line = head[2..].split(|&b| b == b'\n').next().unwrap_or_default();
        if line.len() == head.len() - 2 && n == head.len() {
            return Err(bad("its #! line is longer than the kernel reads (255 bytes)".into()));
        }
        let line = String::from_utf8_lossy(line);
        let line = line.trim();
        // the kernel's split: the interpreter, then the rest of the line as one argument
        let (interpreter, optional) = match line.split_once([' ', '\t']) {
            Some((i, rest)) if !rest.trim().is_empty() => (i, Some(rest.trim().to_string())),
            Some((i, _)) => (i, None),
            None => (line, None),
        };
        if interpreter.is_empty() {
            return Err(bad("its #! line names no interpreter".into()));
        }
        let mut next: Vec<String> = optional.iter().cloned().collect();
        next.push(program.to_string_lossy().into_owned());
        next.extend(args);
        let mut interpreter = PathBuf::from(interpreter);
        if interpreter.file_name().is_some_and(|f| f == "env") {
            // `env NAME` and `env -S NAME ARGS`: what env would exec (any other option of
            // env's, or a variable, leaves env to run, and the exec is followed)
            let split: Option<Vec<String>> = match optional.as_deref() {
                Some(o) if o.starts_with("-S") => Some(o[2..].split_whitespace().map(String::from).collect()),
                Some(o) if !o.starts_with('-') && !o.contains('=') && !o.contains(char::is_whitespace) => Some(vec![o.to_string()]),
                _ => None,
            };
            if let Some(words) = split.filter(|w| !w.is_empty() && !w[0].contains('=')) {
                interpreter = PathBuf::from(&words[0]);
                next = words[1..].iter().cloned().chain(next.into_iter().skip(1)).collect();
            }
        }
        program = resolve_program(&interpreter)?;
        args = next;
    }
    Err(ProbeError::Spawn { program, reason: "more than four #! interpreters deep (the kernel refuses that too)".into() })
}
