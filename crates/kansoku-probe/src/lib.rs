//! # kansoku-probe — observing live Linux processes
//!
//! The only room of kansoku that talks to the kernel. Each observer writes what it sees
//! into a [`kansoku_core::RecordingWriter`], so analyses never need a live process:
//!
//! * [`exact`] — the ground truth: run a program and record every user-space instruction
//!   of every thread, optionally only inside a marker window, on one of two engines:
//!   kansoku's Valgrind tool ([`exact_valgrind`], fast) or ptrace single-stepping (the real CPU).
//! * [`perf`] — perf_event sampling (instructions or cpu-clock), uprobes, ring buffer.
//! * [`sampler`] — a program's instruction-pointer samples and marker hits into a `.ksk`.
//! * [`procfs`] — readers of `/proc` (memory maps as modules).
//! * [`valgrind`] — kansoku's Valgrind tool and Valgrind's Lackey, their streams through pipes (seed 003).
//! * [`blocks`] — every block source of the path analysis (the tool, Lackey, an exact trace,
//!   a file) run one way into a `kansoku_core::feed::BlockSink`.
//! * [`tracee`] — one program under ptrace for every tracer: spawn, waits that survive
//!   Ctrl-C, run to an address, threads, detach.
//! * [`interrupt`] — Ctrl-C as a request to stop observing and keep what was recorded.
//! * [`sysstat`] — `/proc/stat`, `/proc/diskstats`, a process's CPU time, threads and children (seed 001 sampling).
//! * [`marker`] — marker functions by name: `F`, `F@LIB`, `F@plt` (issue 42).
//! * [`events`] — seed 001's event method: measurement points as uprobes or as ptrace traps (restore, step, re-arm).
//! * [`wave`] — seed 001's program waveform: sampled (or single-stepped) code and data addresses.

pub mod agent;
pub mod blocks;
pub mod exact;
pub mod exact_valgrind;
pub mod interrupt;
pub mod perf;
pub mod procfs;
pub mod sampler;
pub mod sysstat;
pub mod events;
pub mod marker;
pub mod wave;
pub mod spawn;
pub mod tracee;
pub mod valgrind;

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
