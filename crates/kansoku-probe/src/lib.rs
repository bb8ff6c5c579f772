//! # kansoku-probe — observing live Linux processes
//!
//! The only room of kansoku that talks to the kernel. Each observer writes what it sees
//! into a [`kansoku_core::RecordingWriter`], so analyses never need a live process.
//!
//! Five rooms, each a folder; their modules are re-exported here, so a user writes
//! `kansoku_probe::exact`, not the room:
//!
//! * **process/** — [`spawn`] (fork and exec, the exec gate, `poll_child`), [`tracee`] (one
//!   program under ptrace for every tracer: spawn, waits that survive Ctrl-C, run to an
//!   address, threads, detach), [`interrupt`] (Ctrl-C as a request to stop observing and
//!   keep what was recorded), [`procfs`] (memory maps as modules), [`stops`] (a program
//!   that stops itself: said once per stop by every command, held until SIGCONT).
//! * **trace/** — the ground truth: [`exact`] records every user-space instruction of every
//!   thread, optionally only inside a marker window, on ptrace single-stepping or on
//!   kansoku's Valgrind tool ([`exact_valgrind`]; the tool and Lackey in [`valgrind`]);
//!   [`blocks`] runs every block source of the path analysis into a `BlockSink`.
//! * **sampling/** — [`perf`] (perf_event sessions: instructions or cpu-clock, uprobes, the
//!   ring buffer) and [`sampler`] (samples and marker hits into a `.ksk`).
//! * **points/** — seed 001's event method: [`events`] (measurement points as the agent,
//!   uprobes or ptrace traps), [`agent`] (kansoku's side of the in-process agent),
//!   [`marker`] (marker functions by name: `F`, `F@LIB`, `F@plt`).
//! * **monitor/** — [`sysstat`] (`/proc/stat`, diskstats, a process's threads and children,
//!   the monitor's loop and function sampler) and [`wave`] (the program waveform's sampled
//!   or single-stepped code and data addresses).

#![deny(missing_docs)]

mod monitor;
mod points;
mod process;
mod sampling;
mod trace;

pub use monitor::{sysstat, wave};
pub use points::{agent, events, marker};
pub(crate) use points::online;
pub use process::{interrupt, procfs, spawn, stops, tracee};
pub use sampling::{perf, sampler};
pub use trace::{blocks, exact, exact_valgrind, valgrind};

pub use exact::{trace_exact, Engine, ExactTraceOptions, StopReason, TraceOutcome};

use std::path::PathBuf;

/// Why observing a process failed. Messages name the program or process and the fix.
#[derive(Debug, thiserror::Error)]
pub enum ProbeError {
    /// The program (or valgrind, or a block source file) could not be started, read or waited for.
    #[error("cannot run {program}: {reason}")]
    Spawn {
        /// The program or file that was to be run or read.
        program: PathBuf,
        /// What went wrong, in words (the OS error or kansoku's own complaint).
        reason: String,
    },
    /// A ptrace request was refused by the kernel.
    #[error("ptrace {operation} on process {pid} failed: {errno}{hint}")]
    Ptrace {
        /// The ptrace request that failed, e.g. `"GETREGS"` or `"SINGLESTEP"`.
        operation: &'static str,
        /// Process or thread id the request was made on.
        pid: i32,
        /// The kernel's error.
        errno: nix::errno::Errno,
        /// How to allow ptrace when the error is EPERM (with a leading space), else empty.
        hint: &'static str,
    },
    /// `waitpid` on an observed process failed.
    #[error("waiting for process {pid} failed: {errno}")]
    Wait {
        /// Process or thread id that was waited for.
        pid: i32,
        /// The kernel's error.
        errno: nix::errno::Errno,
    },
    /// A file under `/proc/PID/` could not be read.
    #[error("cannot read /proc/{pid}/{file}: {cause}")]
    Proc {
        /// Process whose `/proc` directory was read.
        pid: i32,
        /// File name inside `/proc/PID/`, e.g. `"maps"`.
        file: &'static str,
        /// The I/O error.
        cause: std::io::Error,
    },
    /// A marker or measurement point (or the entry point) has no address in the running process.
    #[error("marker function '{marker}' of {program} is not mapped into the process (is it in a shared library that is loaded later?)")]
    MarkerNotMapped {
        /// The marker's or point's name as the user wrote it (or "the entry point").
        marker: String,
        /// The observed program.
        program: PathBuf,
    },
    /// A perf_event session failed.
    #[error(transparent)]
    Perf(#[from] perf::PerfError),
    /// A measurement-point specification is wrong.
    #[error(transparent)]
    Spec(#[from] events::SpecError),
    /// A `--marker` specification (`F`, `F@LIB`, `F@plt`) cannot be resolved.
    #[error("--marker '{spec}': {reason}")]
    Marker {
        /// The specification as given.
        spec: String,
        /// Why it cannot be resolved.
        reason: String,
    },
    /// The process to attach to or watch is gone.
    #[error("process {pid} does not exist (or has already exited)")]
    NoSuchProcess {
        /// The process id asked for.
        pid: i32,
    },
    /// The observed program's binary (ELF, symbols, debug info) could not be read.
    #[error(transparent)]
    Binary(#[from] kansoku_binary::BinaryError),
    /// Writing or reading a `.ksk` recording failed.
    #[error(transparent)]
    Recording(#[from] kansoku_core::RecordingError),
    /// A file given as a block source holds something else.
    #[error("{path}: {why}")]
    NotBlocks {
        /// The file given.
        path: PathBuf,
        /// What it holds instead, or why it is not a block source.
        why: String,
    },
    /// kansoku's in-process probe agent failed (loading, its channel, or what it sent).
    #[error("kansoku's probe agent: {reason}")]
    Agent {
        /// What went wrong.
        reason: String,
    },
    /// The stream from kansoku's Valgrind tool is damaged or not what an exact trace expects.
    #[error("kansoku's Valgrind tool stream: {what}")]
    ToolStream {
        /// What is wrong, with the byte offset when known.
        what: String,
    },
}

/// The hint shown when ptrace is refused: which setting forbids it and how to allow it.
pub(crate) const PTRACE_HINT: &str = " (ptrace is restricted: run as root, or allow it with \
`sysctl kernel.yama.ptrace_scope=0`; inside a container, it needs CAP_SYS_PTRACE and a seccomp \
profile that permits ptrace)";
