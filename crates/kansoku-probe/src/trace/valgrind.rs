//! Running a program under Valgrind with its superblock trace streamed through a pipe
//! (seed 003's block source), never through a file: either kansoku's own Valgrind tool
//! ([`spawn_tool`]; C source in `valgrind-tool/`, built by `build.rs`: superblock entries as
//! a binary stream, one `write` per 64 KiB frame) or Valgrind's Lackey ([`spawn_lackey`]).
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
use nix::sys::signal::Signal;

/// Sends `signal` to the process group that Valgrind (started with `process_group(0)`)
/// leads, so the program it runs and anything that program started get it too.
fn killpg(leader: u32, signal: Signal) -> nix::Result<()> {
    nix::sys::signal::killpg(nix::unistd::Pid::from_raw(leader as i32), signal)
}
use crate::ProbeError;

/// The instruction limit per superblock we ask VEX for (its default); the path analysis
/// treats a superblock of this many instructions that ends in a non-branch as a continuation.
pub(crate) const MAX_INSNS: usize = 50;

/// How to run Lackey.
#[derive(Clone, Debug)]
pub struct LackeyOptions {
    /// The valgrind launcher (`valgrind` along `$PATH` by default).
    pub valgrind: PathBuf,
    /// The program to run under Lackey (a name without `/` is looked up in `PATH`).
    pub program: PathBuf,
    /// Its arguments, without the program name.
    pub args: Vec<String>,
}

/// Valgrind's arguments for a superblock trace on log fd `fd` (shared with the benchmarks,
/// so the baseline runs exactly what kansoku runs).
pub(crate) fn lackey_arguments(fd: i32) -> Vec<String> {
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
    /// The valgrind process (the program runs inside it).
    pub child: Child,
    /// The read end of the pipe carrying Lackey's log.
    pub output: File,
    /// The program as resolved (the path Valgrind's module lines will name).
    pub program: PathBuf,
    /// Says when the program stops itself (Valgrind runs it in its own process).
    stops: Option<crate::stops::Watch>,
}

impl LackeyRun {
    /// Waits for Valgrind to end and tells how the program ended (Valgrind re-raises the
    /// program's fatal signal and passes on its exit code).
    pub fn wait(&mut self) -> Result<ExitStatus, ProbeError> {
        self.stops.take();
        let status = self.child.wait().map_err(|e| ProbeError::Spawn { program: self.program.clone(), reason: format!("waiting for valgrind: {e}") })?;
        Ok(exit_status(status))
    }

    /// Stops the program (Ctrl-C): kills Valgrind's process group.
    pub fn kill(&mut self) {
        let _ = killpg(self.child.id(), Signal::SIGKILL);
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
    let (child, output, _, program) = spawn_valgrind(options, false, &[])?;
    let stops = Some(crate::stops::Watch::child(child.id()));
    Ok(LackeyRun { child, output, program, stops })
}

/// A pipe with both ends close-on-exec (the child clears the flag on the ends it keeps just
/// before exec, so no other process we, or a test harness, start ever holds it open).
fn cloexec_pipe(program: &Path) -> Result<(OwnedFd, OwnedFd), ProbeError> {
    let mut fds = [0i32; 2];
    // SAFETY: `fds` is an array of two ints that pipe2 fills during the call.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(ProbeError::Spawn { program: program.to_path_buf(), reason: format!("cannot create a pipe: {}", std::io::Error::last_os_error()) });
    }
    // SAFETY: pipe2 succeeded, so both are new descriptors that nothing else owns.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

/// Spawns Valgrind with Lackey (`tool == false`: its log on the returned pipe) or with our
/// tool (its binary stream on the returned pipe, Valgrind's log on a second one), with
/// `extra` options for the tool.
fn spawn_valgrind(options: &LackeyOptions, tool: bool, extra: &[String]) -> Result<(Child, File, Option<File>, PathBuf), ProbeError> {
    let program = resolve_program(&options.program)?;
    let valgrind = find_valgrind(&options.valgrind)?;
    let lib = if tool { Some(tool_dir().map_err(|e| ProbeError::Spawn { program: program.clone(), reason: e.to_string() })?) } else { None };
    let (read_end, write_end) = cloexec_pipe(&program)?;
    let wfd = write_end.as_raw_fd();
    // A larger pipe lets Valgrind run ahead of the analysis for longer between wake-ups.
    // SAFETY: an open descriptor of ours and an integer argument; no memory is passed.
    unsafe {
        libc::fcntl(read_end.as_raw_fd(), libc::F_SETPIPE_SZ, 1 << 20);
    }
    let log = if tool { Some(cloexec_pipe(&program)?) } else { None };
    let lfd = log.as_ref().map(|(_, w)| w.as_raw_fd());
    let mut cmd = Command::new(&valgrind);
    match (&lib, lfd) {
        (Some(lib), Some(lfd)) => {
            cmd.args(tool_arguments(wfd, lfd)).args(extra).env("VALGRIND_LIB", lib);
        }
        _ => {
            cmd.args(lackey_arguments(wfd));
        }
    }
    cmd.arg(&program).args(&options.args).stdin(Stdio::inherit()).process_group(0);
    let parent = nix::unistd::getpid();
    // SAFETY: the closure runs in the forked child before exec, where only
    // async-signal-safe calls are allowed: prctl, getppid, _exit (die_with_parent) and
    // fcntl are; it allocates nothing and touches no lock.
    unsafe {
        cmd.pre_exec(move || {
            crate::spawn::die_with_parent(parent);
            for fd in std::iter::once(wfd).chain(lfd) {
                if libc::fcntl(fd, libc::F_SETFD, 0) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
            }
            Ok(())
        });
    }
    let child = cmd.spawn().map_err(|e| ProbeError::Spawn { program: valgrind.clone(), reason: format!("{e}") })?;
    drop(write_end);
    let log = log.map(|(r, w)| {
        drop(w);
        File::from(r)
    });
    Ok((child, File::from(read_end), log, program))
}

/// The `VALGRIND_LIB` directory holding kansoku's own Valgrind tool (built by this crate's
/// `build.rs`), or why there is none.
pub fn tool_dir() -> Result<PathBuf, ToolMissing> {
    match option_env!("KANSOKU_VALGRIND_TOOL_DIR") {
        Some(d) => {
            let dir = PathBuf::from(d);
            if dir.join("kansoku-amd64-linux").is_file() && dir.join("vgpreload_core-amd64-linux.so").exists() {
                Ok(dir)
            } else {
                Err(ToolMissing::Removed { dir })
            }
        }
        None => Err(ToolMissing::NotBuilt { why: option_env!("KANSOKU_VALGRIND_TOOL_ERROR").unwrap_or("kansoku's Valgrind tool was not built") }),
    }
}

/// Why kansoku's Valgrind tool cannot be used ([`tool_dir`]): callers fall back to ptrace
/// or Lackey and say this.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ToolMissing {
    /// `build.rs` could not build the tool (no Valgrind headers, no C compiler).
    #[error("{why}")]
    NotBuilt {
        /// `build.rs`'s reason, fixed at compile time.
        why: &'static str,
    },
    /// The tool was built, but its directory no longer holds it.
    #[error("kansoku's Valgrind tool is missing from {} (was the build directory removed?)", dir.display())]
    Removed {
        /// The directory the build put it in.
        dir: PathBuf,
    },
}

/// Valgrind's arguments for our tool: the binary superblock stream on `out_fd`, Valgrind's
/// own messages (a crash's signal and faulting instruction) on `log_fd`. The same VEX
/// settings as for Lackey, so superblocks end where the splitter expects.
pub(crate) fn tool_arguments(out_fd: i32, log_fd: i32) -> Vec<String> {
    vec![
        "--tool=kansoku".into(),
        format!("--out-fd={out_fd}"),
        "--vex-guest-chase=no".into(),
        format!("--vex-guest-max-insns={MAX_INSNS}"),
        "--vex-iropt-unroll-thresh=0".into(),
        "--vgdb=no".into(),
        format!("--log-fd={log_fd}"),
    ]
}

/// A running Valgrind with kansoku's tool: read `output` (the binary stream, see
/// `kansoku_core::sbstream`) to its end, then [`ToolRun::wait`].
pub struct ToolRun {
    /// The valgrind process (the program runs inside it).
    pub child: Child,
    /// The read end of the pipe carrying the tool's binary stream.
    pub output: File,
    /// Valgrind's log, collected by a thread (a few lines; read so Valgrind never blocks).
    log: Option<std::thread::JoinHandle<Vec<u8>>>,
    /// The program as resolved (the path the tool's module records will name).
    pub program: PathBuf,
    /// Set once Valgrind has been waited for (so a late SIGKILL hits no other process).
    ended: std::sync::Arc<std::sync::atomic::AtomicBool>,
    /// Says when the program stops itself (Valgrind runs it in its own process).
    stops: Option<crate::stops::Watch>,
}

impl ToolRun {
    /// Waits for Valgrind to end; returns how the program ended and Valgrind's log text.
    pub fn wait(&mut self) -> Result<(ExitStatus, Vec<u8>), ProbeError> {
        self.stops.take();
        let status = self.child.wait().map_err(|e| ProbeError::Spawn { program: self.program.clone(), reason: format!("waiting for valgrind: {e}") })?;
        self.ended.store(true, std::sync::atomic::Ordering::SeqCst);
        let log = self.log.take().and_then(|h| h.join().ok()).unwrap_or_default();
        Ok((exit_status(status), log))
    }

    /// Ends the program so that Valgrind still ends the run (its tool writes what it holds):
    /// SIGTERM to Valgrind's process group, SIGKILL after `grace` if the run has not ended.
    pub(crate) fn end_gently(&mut self, grace: std::time::Duration) {
        let pid = self.child.id();
        let _ = killpg(pid, Signal::SIGTERM);
        // a program stopped (SIGSTOP) acts on the SIGTERM only once continued
        let _ = killpg(pid, Signal::SIGCONT);
        let ended = self.ended.clone();
        std::thread::spawn(move || {
            std::thread::sleep(grace);
            if !ended.load(std::sync::atomic::Ordering::SeqCst) {
                let _ = killpg(pid, Signal::SIGKILL);
            }
        });
    }

    /// Stops the program (Ctrl-C): kills Valgrind's process group.
    pub fn kill(&mut self) {
        let _ = killpg(self.child.id(), Signal::SIGKILL);
    }
}

/// Starts Valgrind with kansoku's own tool (see [`tool_dir`]); fails with the reason when the
/// tool was not built, so the caller can fall back to [`spawn_lackey`].
pub fn spawn_tool(options: &LackeyOptions) -> Result<ToolRun, ProbeError> {
    spawn_tool_with(options, &[])
}

/// [`spawn_tool`] with more options for the tool (`--exact=yes` for the exact engine).
pub fn spawn_tool_with(options: &LackeyOptions, extra: &[String]) -> Result<ToolRun, ProbeError> {
    let (child, output, log, program) = spawn_valgrind(options, true, extra)?;
    let log = log.map(|mut f| {
        std::thread::spawn(move || {
            use std::io::Read;
            crate::stops::block_interrupts();
            let mut v = Vec::new();
            let _ = f.read_to_end(&mut v);
            v
        })
    });
    let stops = Some(crate::stops::Watch::child(child.id()));
    Ok(ToolRun { child, output, log, program, ended: Default::default(), stops })
}

/// Finds the valgrind launcher, with a message that says how to get it.
pub(crate) fn find_valgrind(valgrind: &Path) -> Result<PathBuf, ProbeError> {
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
