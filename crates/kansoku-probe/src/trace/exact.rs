//! The exact tracer: every executed user-space instruction, by ptrace single-stepping
//! ([`Engine::Ptrace`]) or on kansoku's Valgrind tool ([`Engine::Valgrind`], see
//! [`crate::exact_valgrind`]); [`trace_exact`] runs the one the options name.
//!
//! All threads are traced (new ones through `PTRACE_O_TRACECLONE`); each stop of any
//! thread records that thread's next instruction, and a `Thread` event precedes a switch.
//! The first recorded thread is named too (a `Thread` event before its first instruction,
//! the main thread's tid being the process id), so a reader never has to guess which id the
//! thread of the events before the first switch has.
//! `rep`-prefixed string instructions trap once per repetition, so they appear once per
//! element they process — that is what single-stepping observes.
//!
//! With a marker, the program runs at full speed to the first entry of the marker
//! function (a one-shot int3 breakpoint), is traced from there, and is detached after the
//! requested number of iterations, so it finishes at full speed too.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use nix::sys::ptrace::{self, Options};
use nix::sys::signal::Signal;
use nix::sys::wait::WaitStatus;
use nix::unistd::Pid;

use kansoku_core::{Event, ExitStatus, Header, Module, RecordingKind, RecordingWriter};

use crate::procfs::ModuleReader;
use crate::spawn::resolve_program;
use crate::tracee::{ptrace_error as ptrace_err, RunTo, Tracee};
use crate::{interrupt, ProbeError};

/// What executes the program while it is traced.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Engine {
    /// Single-stepping on the real CPU: every instruction a ptrace stop (tens of thousands
    /// of instructions a second).
    #[default]
    Ptrace,
    /// kansoku's Valgrind tool: the program runs on Valgrind's emulated CPU, one record per
    /// executed block (tens of millions of instructions a second).
    Valgrind,
}

impl Engine {
    /// The engine's name as `--engine` and a recording's `engine` header parameter spell it.
    pub fn name(self) -> &'static str {
        match self {
            Engine::Ptrace => "ptrace",
            Engine::Valgrind => "valgrind",
        }
    }

    /// The fastest engine this build has: Valgrind when kansoku's tool was built, with the
    /// reason when it falls back to ptrace.
    pub fn best() -> (Engine, Option<crate::valgrind::ToolMissing>) {
        match crate::valgrind::tool_dir() {
            Ok(_) => (Engine::Valgrind, None),
            Err(why) => (Engine::Ptrace, Some(why)),
        }
    }
}

/// What to trace.
#[derive(Clone, Debug, Default)]
pub struct ExactTraceOptions {
    /// What runs the program (the library's default is ptrace; the command line picks
    /// [`Engine::best`]).
    pub engine: Engine,
    /// The program to run (a name without `/` is looked up in `PATH`).
    pub program: PathBuf,
    /// Its arguments, without the program name.
    pub args: Vec<String>,
    /// Start recording at the first entry of this function of the main program.
    pub marker: Option<String>,
    /// With a marker: stop after this many iterations (marker entry to next entry).
    pub iterations: Option<u64>,
    /// Stop after this many recorded instructions.
    pub max_instructions: Option<u64>,
    /// Record every memory access's address too (the Valgrind engine only).
    pub data: bool,
}

/// Why tracing ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StopReason {
    /// The program ran to its end (exit or fatal signal).
    ProgramEnded,
    /// The requested iterations of the marker window are recorded.
    WindowComplete,
    /// `max_instructions` was reached.
    InstructionLimit,
    /// The user pressed Ctrl-C.
    Interrupted,
    /// The marker function was never entered.
    MarkerNeverHit,
}

/// The result of a trace.
#[derive(Clone, Debug)]
pub struct TraceOutcome {
    /// The program that ran, its path resolved.
    pub program: PathBuf,
    /// Instructions recorded (inside the marker window, when there is one).
    pub instructions: u64,
    /// Entries of the marker function seen.
    pub marker_hits: u64,
    /// Threads seen while tracing (at least 1).
    pub threads: usize,
    /// Why tracing ended.
    pub stop: StopReason,
    /// How the program ended (after detaching, how it ended on its own).
    pub exit: ExitStatus,
    /// Signals delivered while tracing (a crash shows here).
    pub signals: Vec<i32>,
    /// Wall time spent tracing (what `instructions_per_second` divides by).
    pub elapsed: Duration,
}

impl TraceOutcome {
    /// Traced instructions per second of wall time.
    pub fn instructions_per_second(&self) -> f64 {
        self.instructions as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }
}

impl StopReason {
    /// The reason as a report names it: `program_ended`, `window_complete`, …
    pub fn name(self) -> &'static str {
        match self {
            StopReason::ProgramEnded => "program_ended",
            StopReason::WindowComplete => "window_complete",
            StopReason::InstructionLimit => "instruction_limit",
            StopReason::Interrupted => "interrupted",
            StopReason::MarkerNeverHit => "marker_never_hit",
        }
    }
}

/// The recording's header for an exact trace of `program` (resolved) with `options`: the
/// engine, the marker as given and as symbolised, the window's bounds, whether data
/// addresses are recorded — the parameters `kansoku show` and the analyses read back.
pub fn recording_header(program: &Path, options: &ExactTraceOptions) -> Result<Header, ProbeError> {
    let mut header = Header::new(RecordingKind::ExactTrace, program.to_string_lossy(), options.args.clone()).with_parameter("engine", options.engine.name());
    if let Some(m) = &options.marker {
        // `F`, `F@LIB` or `F@plt`; the header names the function as it is symbolised
        let (site, _) = crate::marker::resolve(program, m)?;
        header = header.with_parameter("marker", m.as_str()).with_parameter("marker_function", site.function.as_str());
    }
    if let Some(n) = options.iterations {
        header = header.with_parameter("iterations", n);
    }
    if let Some(n) = options.max_instructions {
        header = header.with_parameter("max_instructions", n);
    }
    if options.data {
        header = header.with_parameter("data", true);
    }
    Ok(header)
}

/// Resolves the program path, for headers and messages, the way [`trace_exact`] will.
pub fn resolve(program: &Path) -> Result<PathBuf, ProbeError> {
    resolve_program(program)
}

/// Runs the program on the options' engine and streams what it executes into `out`.
/// `progress` is called now and then with the number of instructions recorded so far.
pub fn trace_exact<W: Write>(
    options: &ExactTraceOptions,
    out: &mut RecordingWriter<W>,
    progress: &mut dyn FnMut(u64),
) -> Result<TraceOutcome, ProbeError> {
    match options.engine {
        Engine::Ptrace if options.data => Err(ProbeError::Spawn {
            program: options.program.clone(),
            reason: "data addresses are recorded by the Valgrind engine only (--engine valgrind)".into(),
        }),
        Engine::Ptrace => trace_ptrace(options, out, progress),
        Engine::Valgrind => crate::exact_valgrind::trace_valgrind(options, out, progress),
    }
}

/// The ptrace engine: single-steps every instruction.
fn trace_ptrace<W: Write>(
    options: &ExactTraceOptions,
    out: &mut RecordingWriter<W>,
    progress: &mut dyn FnMut(u64),
) -> Result<TraceOutcome, ProbeError> {
    let program_path = resolve_program(&options.program)?;
    // `F`, `F@LIB` or `F@plt` (crate::marker)
    let marker_site = match &options.marker {
        Some(spec) => Some(crate::marker::resolve(&program_path, spec)?),
        None => None,
    };
    let opts = Options::PTRACE_O_TRACECLONE | Options::PTRACE_O_TRACEEXIT;
    let tracee = Tracee::spawn(&program_path, &options.args, opts)?;
    let mut tracer = Tracer::new(tracee, program_path.clone(), options.max_instructions);
    tracer.refresh_modules(out)?;
    let start = Instant::now();

    if let Some((site, file)) = &marker_site {
        if site.in_library && !tracer.run_to(Target::Entry(&program_path))? {
            return Ok(tracer.outcome(StopReason::MarkerNeverHit, start));
        }
        tracer.refresh_modules(out)?;
        let addr = site.runtime_address(&tracer.modules, file).ok_or_else(|| ProbeError::MarkerNotMapped {
            marker: options.marker.clone().unwrap_or_default(),
            program: program_path.clone(),
        })?;
        tracer.marker = Some(addr);
        if !tracer.run_to(Target::Address(addr))? {
            return Ok(tracer.outcome(StopReason::MarkerNeverHit, start));
        }
    }
    tracer.iterations = options.iterations;
    let stop = tracer.step_loop(out, start, progress)?;
    Ok(tracer.outcome(stop, start))
}

/// Where [`Tracer::run_to`] runs the program.
enum Target<'a> {
    /// The ELF entry point of this program (its libraries are mapped there).
    Entry(&'a Path),
    Address(u64),
}

struct Tracer {
    tracee: Tracee,
    pid: Pid,
    program: PathBuf,
    modules: Vec<Module>,
    reader: ModuleReader,
    /// Runtime range known to be inside some module (skips the lookup for most steps).
    known: (u64, u64),
    marker: Option<u64>,
    iterations: Option<u64>,
    max_instructions: Option<u64>,
    instructions: u64,
    marker_hits: u64,
    current_thread: Pid,
    signals: Vec<i32>,
    exit: ExitStatus,
}

impl Tracer {
    fn new(tracee: Tracee, program: PathBuf, max_instructions: Option<u64>) -> Self {
        let pid = tracee.pid();
        Tracer {
            tracee,
            pid,
            program,
            modules: Vec::new(),
            reader: ModuleReader::default(),
            known: (0, 0),
            marker: None,
            iterations: None,
            max_instructions,
            instructions: 0,
            marker_hits: 0,
            current_thread: pid,
            signals: Vec::new(),
            exit: ExitStatus::Detached,
        }
    }

    fn outcome(&self, stop: StopReason, start: Instant) -> TraceOutcome {
        TraceOutcome {
            program: self.program.clone(),
            instructions: self.instructions,
            marker_hits: self.marker_hits,
            threads: self.tracee.threads().len().max(1),
            stop,
            exit: self.exit,
            signals: self.tracee.signals.iter().chain(&self.signals).copied().collect(),
            elapsed: start.elapsed(),
        }
    }

    /// Re-reads the memory map and records modules not seen before.
    fn refresh_modules<W: Write>(&mut self, out: &mut RecordingWriter<W>) -> Result<(), ProbeError> {
        let Ok(current) = self.reader.code_modules(self.pid.as_raw()) else {
            return Ok(()); // the process is gone; nothing new can appear
        };
        for m in current {
            if !self.modules.iter().any(|k| k.start == m.start && k.end == m.end && k.path == m.path) {
                out.write(&Event::Module(m.clone()))?;
                self.modules.push(m);
            }
        }
        Ok(())
    }

    fn note_address<W: Write>(&mut self, addr: u64, out: &mut RecordingWriter<W>) -> Result<(), ProbeError> {
        if addr >= self.known.0 && addr < self.known.1 {
            return Ok(());
        }
        if !self.modules.iter().any(|m| m.contains(addr)) {
            self.refresh_modules(out)?;
        }
        if let Some(m) = self.modules.iter().find(|m| m.contains(addr)) {
            self.known = (m.start, m.end);
        }
        Ok(())
    }

    /// Runs at full speed to the target (one-shot int3). Returns false if the program
    /// ended first.
    fn run_to(&mut self, target: Target) -> Result<bool, ProbeError> {
        let reached = match target {
            Target::Entry(program) => self.tracee.run_to_entry(program)?,
            Target::Address(addr) => self.tracee.run_to(addr)?,
        };
        match reached {
            // Other threads keep running until the step loop's first wait.
            RunTo::Reached { tid } => {
                self.current_thread = tid;
                Ok(true)
            }
            RunTo::Ended(exit) => {
                self.exit = exit;
                Ok(false)
            }
        }
    }

    /// The single-step loop. Records the instruction each stopped thread is about to
    /// execute, then steps it.
    fn step_loop<W: Write>(
        &mut self,
        out: &mut RecordingWriter<W>,
        start: Instant,
        progress: &mut dyn FnMut(u64),
    ) -> Result<StopReason, ProbeError> {
        let pid = self.pid;
        // None until the first recorded event: the first thread is named as well.
        let mut recorded_thread: Option<Pid> = None;
        // The thread to record and step next, with the signal to deliver.
        let mut next: Option<(Pid, Option<Signal>)> = Some((self.current_thread, None));
        loop {
            if let Some((tid, sig)) = next.take() {
                let rip = ptrace::getregs(tid).map_err(ptrace_err("GETREGS", tid))?.rip;
                if recorded_thread != Some(tid) {
                    out.write(&Event::Thread { tid: tid.as_raw() as u32 })?;
                    recorded_thread = Some(tid);
                }
                if Some(rip) == self.marker && sig.is_none() {
                    self.marker_hits += 1;
                    if self.iterations.is_some_and(|n| self.marker_hits > n) {
                        self.marker_hits -= 1;
                        out.write(&Event::Exit(ExitStatus::Detached))?;
                        return self.detach_all(tid, StopReason::WindowComplete);
                    }
                    let time_ns = start.elapsed().as_nanos() as u64;
                    out.write(&Event::Marker { time_ns, instructions: Some(self.instructions) })?;
                }
                if self.max_instructions.is_some_and(|n| self.instructions >= n) {
                    out.write(&Event::Exit(ExitStatus::Detached))?;
                    return self.detach_all(tid, StopReason::InstructionLimit);
                }
                if self.instructions & 0xffff == 0 {
                    progress(self.instructions);
                    if interrupt::requested() {
                        out.write(&Event::Exit(ExitStatus::Detached))?;
                        return self.detach_all(tid, StopReason::Interrupted);
                    }
                }
                self.note_address(rip, out)?;
                out.write(&Event::Instruction { addr: rip })?;
                self.instructions += 1;
                ptrace::step(tid, sig).map_err(ptrace_err("SINGLESTEP", tid))?;
            }
            match self.tracee.wait()? {
                WaitStatus::Stopped(tid, Signal::SIGTRAP) => next = Some((tid, None)),
                // A new thread's first stop.
                // A new thread's first stop (it may arrive before its parent's clone event).
                WaitStatus::Stopped(tid, Signal::SIGSTOP) if self.tracee.is_new_thread(tid) => next = Some((tid, None)),
                // The program stopped itself: said and held until SIGCONT; the instruction
                // at rip has not run, and was recorded before the stopping signal came.
                WaitStatus::Stopped(tid, sig) if self.tracee.program_stopped(tid, sig) => {
                    ptrace::step(tid, None).map_err(ptrace_err("SINGLESTEP", tid))?;
                }
                WaitStatus::Stopped(tid, sig) => {
                    self.signals.push(sig as i32);
                    out.write(&Event::Signal { signal: sig as i32 })?;
                    // Deliver it with the next step; the instruction at rip still runs
                    // (or the handler's first instruction, which we then record).
                    ptrace::step(tid, Some(sig)).map_err(ptrace_err("SINGLESTEP", tid))?;
                }
                WaitStatus::PtraceEvent(tid, _, event) => {
                    if event == libc::PTRACE_EVENT_CLONE {
                        self.tracee.note_clone(tid);
                    }
                    // Not an instruction boundary worth recording twice: step on silently.
                    ptrace::step(tid, None).map_err(ptrace_err("SINGLESTEP", tid))?;
                }
                WaitStatus::Exited(tid, code)
                    if tid == pid => {
                        self.exit = ExitStatus::Exited(code);
                        out.write(&Event::Exit(self.exit))?;
                        return Ok(StopReason::ProgramEnded);
                    }
                WaitStatus::Signaled(tid, sig, _)
                    if tid == pid => {
                        self.exit = ExitStatus::Killed(sig as i32);
                        out.write(&Event::Exit(self.exit))?;
                        return Ok(StopReason::ProgramEnded);
                    }
                _ => {}
            }
        }
    }

    /// Stops observing: detaches every thread (waiting for those still mid-step) and
    /// waits for the program to end on its own.
    fn detach_all(&mut self, stopped: Pid, reason: StopReason) -> Result<StopReason, ProbeError> {
        if reason == StopReason::Interrupted {
            // The program runs in its own process group, so the terminal's Ctrl-C did not
            // reach it: end it, as the user asked to stop the run.
            let _ = nix::sys::signal::kill(self.pid, Signal::SIGKILL);
        }
        self.exit = self.tracee.detach_all(stopped)?;
        Ok(reason)
    }
}
