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
    #[error("cannot run {program}: {reason}")]
    Spawn { program: PathBuf, reason: String },
    #[error("ptrace {operation} on process {pid} failed: {errno}{hint}")]
    Ptrace { operation: &'static str, pid: i32, errno: nix::errno::Errno, hint: &'static str },
    #[error("waiting for process {pid} failed: {errno}")]
    Wait { pid: i32, errno: nix::errno::Errno },
    #[error("cannot read /proc/{pid}/{file}: {cause}")]
    Proc { pid: i32, file: &'static str, cause: std::io::Error },
    #[error("marker function '{marker}' of {program} is not mapped into the process (is it in a shared library that is loaded later?)")]
    MarkerNotMapped { marker: String, program: PathBuf },
    #[error(transparent)]
    Perf(#[from] perf::PerfError),
    #[error(transparent)]
    Spec(#[from] events::SpecError),
    #[error("--marker '{spec}': {reason}")]
    Marker { spec: String, reason: String },
    #[error("process {pid} does not exist (or has already exited)")]
    NoSuchProcess { pid: i32 },
    #[error(transparent)]
    Binary(#[from] kansoku_binary::BinaryError),
    #[error(transparent)]
    Recording(#[from] kansoku_core::RecordingError),
    /// A file given as a block source holds something else.
    #[error("{path}: {why}")]
    NotBlocks { path: PathBuf, why: String },
    #[error("kansoku's probe agent: {reason}")]
    Agent { reason: String },
    #[error("kansoku's Valgrind tool stream: {what}")]
    ToolStream { what: String },
}

/// The hint shown when ptrace is refused: which setting forbids it and how to allow it.
pub(crate) const PTRACE_HINT: &str = " (ptrace is restricted: run as root, or allow it with \
`sysctl kernel.yama.ptrace_scope=0`; inside a container, it needs CAP_SYS_PTRACE and a seccomp \
profile that permits ptrace)";
