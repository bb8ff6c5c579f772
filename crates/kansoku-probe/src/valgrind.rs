//! Running a program under Valgrind's Lackey tool with its superblock trace streamed
//! through a pipe (seed 003's block source), never through a file.
//!
//! Lackey writes one `SB <address>` line per superblock entry to Valgrind's log, which we
//! point at the write end of a pipe (`--log-fd`). Chasing is switched off
//! (`--vex-guest-chase=no`, Valgrind ≥ 3.17) so a superblock ends at every branch, call or
//! return, and `-v -v` makes Valgrind announce each object it maps with its link and runtime
//! `.text` addresses, in stream order — our module map.

use std::fs::File;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus as ProcessStatus, Stdio};

use kansoku_core::ExitStatus;

use crate::spawn::resolve_program;
use crate::ProbeError;

/// The instruction limit per superblock we ask VEX for (its default); the path analysis
/// treats a superblock of this many instructions that ends in a non-branch as a continuation.
pub const MAX_INSNS: usize = 50;

/// How to run Lackey.
#[derive(Clone, Debug)]
pub struct LackeyOptions {
    /// The valgrind launcher (`valgrind` along `$PATH` by default).
    pub valgrind: PathBuf,
    pub program: PathBuf,
    pub args: Vec<String>,
}

/// Valgrind's arguments for a superblock trace on log fd `fd` (shared with the benchmarks,
/// so the baseline runs exactly what kansoku runs).
pub fn lackey_arguments(fd: i32) -> Vec<String> {
    vec![
        "--tool=lackey".into(),
        "--trace-superblocks=yes".into(),
        "--basic-counts=no".into(),
        "--vex-guest-chase=no".into(),
        format!("--vex-guest-max-insns={MAX_INSNS}"),
        // VEX unrolls small self-loops, which would hide every second entry of the loop block.
        "--vex-iropt-unroll-thresh=0".into(),
        "--vgdb=no".into(),
        "-v".into(),
        "-v".into(),
        format!("--log-fd={fd}"),
    ]
}

/// A running Lackey: read `output` to its end, then [`LackeyRun::wait`].
pub struct LackeyRun {
    pub child: Child,
    /// The read end of the pipe carrying Lackey's log.
    pub output: File,
    /// The program as resolved (the path Valgrind's module lines will name).
    pub program: PathBuf,
}

impl LackeyRun {
    /// Waits for Valgrind to end and tells how the program ended (Valgrind re-raises the
    /// program's fatal signal and passes on its exit code).
    pub fn wait(&mut self) -> Result<ExitStatus, ProbeError> {
        let status = self.child.wait().map_err(|e| ProbeError::Spawn { program: self.program.clone(), reason: format!("waiting for valgrind: {e}") })?;
        Ok(exit_status(status))
    }

    /// Stops the program (Ctrl-C): kills Valgrind's process group.
    pub fn kill(&mut self) {
        let pid = self.child.id() as i32;
        unsafe {
            libc::kill(-pid, libc::SIGKILL);
        }
    }
}

fn exit_status(status: ProcessStatus) -> ExitStatus {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(c), _) => ExitStatus::Exited(c),
        (None, Some(s)) => ExitStatus::Killed(s),
        _ => ExitStatus::Exited(-1),
    }
}

/// Starts `valgrind --tool=lackey` on the program with its log on a pipe. The program's
/// own stdin/stdout/stderr are kansoku's; it leads its own process group so the terminal's
/// Ctrl-C reaches only kansoku, which then stops it and keeps the paths so far.
pub fn spawn_lackey(options: &LackeyOptions) -> Result<LackeyRun, ProbeError> {
    let program = resolve_program(&options.program)?;
    let valgrind = find_valgrind(&options.valgrind)?;
    let mut fds = [0i32; 2];
    // Both ends close-on-exec; the child clears the flag on its write end just before exec,
    // so no other process we (or a test harness) start ever holds the pipe open.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(ProbeError::Spawn { program, reason: format!("cannot create a pipe: {}", std::io::Error::last_os_error()) });
    }
    let (read_end, write_end) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    let wfd = write_end.as_raw_fd();
    // A larger pipe lets Valgrind run ahead of the analysis for longer between wake-ups.
    unsafe {
        libc::fcntl(read_end.as_raw_fd(), libc::F_SETPIPE_SZ, 1 << 20);
    }
    let mut cmd = Command::new(&valgrind);
    cmd.args(lackey_arguments(wfd)).arg(&program).args(&options.args).stdin(Stdio::inherit()).process_group(0);
    unsafe {
        cmd.pre_exec(move || {
            if libc::fcntl(wfd, libc::F_SETFD, 0) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let child = cmd.spawn().map_err(|e| ProbeError::Spawn { program: valgrind.clone(), reason: format!("{e}") })?;
    drop(write_end);
    Ok(LackeyRun { child, output: File::from(read_end), program })
}

/// Finds the valgrind launcher, with a message that says how to get it.
pub fn find_valgrind(valgrind: &Path) -> Result<PathBuf, ProbeError> {
    resolve_program(valgrind).map_err(|e| {
        let reason = match e {
            ProbeError::Spawn { reason, .. } => reason,
            other => other.to_string(),
        };
        ProbeError::Spawn {
            program: valgrind.to_path_buf(),
            reason: format!(
                "{reason}: Valgrind is needed for --source valgrind; install it (Debian: apt-get install valgrind, or scripts/setup), or use --source step"
            ),
        }
    })
}
