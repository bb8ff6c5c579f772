//! Seed 001's event method: measurement points planted in a program, each hit time-stamped.
//!
//! Two mechanisms:
//!
//! * [`Mechanism::Uprobe`] — kernel uprobes (entry) and uretprobes (exit) opened with
//!   `perf_event_open` on the program; hits arrive in perf ring buffers, time-stamped by
//!   the kernel (CLOCK_MONOTONIC). The program is never stopped by another process. A
//!   perf group's read format limits one group to about a thousand members, so the points
//!   are spread over several sessions of [`UPROBES_PER_SESSION`] and merged by time.
//! * [`Mechanism::Trap`] — the seed's own technique, with ptrace: each point's first
//!   instruction byte is replaced by `int3`; on the trap the tracer records the time
//!   (CLOCK_MONOTONIC, read by the tracer as it sees the stop), restores the original byte,
//!   moves the instruction pointer back, single-steps the original instruction, re-arms
//!   the trap and lets the program continue. A routine's exits are its `ret`
//!   instructions (decoded from the function), as the seed planted exit points.
//!
//! A probe spec is `FUNC` (entry and exit), `FUNC:entry`, `FUNC:exit`, `0xADDR` (a
//! link-time address of the program) or `FUNC+OFF` (a single point). With `calibrate`,
//! a point is added on the instruction after the first entry/single point: the time
//! between the two is one hit's cost (the seed measured 250 µs this way).

use std::path::{Path, PathBuf};
use std::time::Instant;

use nix::errno::Errno;
use nix::sys::ptrace::{self, Options};
use nix::sys::signal::Signal;
use nix::sys::wait::{waitpid, WaitPidFlag, WaitStatus};
use nix::unistd::Pid;

use kansoku_binary::{FunctionCfg, InstructionKind, Program};
use kansoku_core::ExitStatus;
use kansoku_monitor::events::{Hit, Point, PointRole};

use crate::perf::{PerfRecord, SampleSource, SamplingClock, Session, SessionOptions, UprobeSpec};
use crate::spawn::{poll_child, resolve_program, spawn_traced, wait_retrying, ChildState, ExecGate};
use crate::{interrupt, ProbeError, PTRACE_HINT};

/// At most this many uprobes share one perf group (the kernel caps a group's read size at 16 KiB).
pub const UPROBES_PER_SESSION: usize = 500;

/// How points are planted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mechanism {
    Uprobe,
    Trap,
}

impl std::fmt::Display for Mechanism {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Mechanism::Uprobe => "uprobe",
            Mechanism::Trap => "trap",
        })
    }
}

/// What to measure.
#[derive(Clone, Debug)]
pub struct EventOptions {
    pub program: PathBuf,
    pub args: Vec<String>,
    pub probes: Vec<String>,
    pub mechanism: Mechanism,
    pub calibrate: Calibrate,
}

/// Where the seed's calibration pair (two points on consecutive instructions) goes.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum Calibrate {
    #[default]
    Off,
    /// Next to the first probe's entry point.
    FirstProbe,
    /// At the entry of this function of the program (`--calibrate-on FUNC`): a place the
    /// user chose, often called and not itself measured, so the result does not depend on
    /// the order of the probes.
    At(String),
}

/// A point to plant, at a link-time address of the program.
#[derive(Clone, Debug)]
pub struct PlannedPoint {
    pub point: Point,
    pub vaddr: u64,
    /// For the uprobe mechanism: this point is a uretprobe on the function at `vaddr`.
    pub is_return: bool,
}

/// The points resolved from specs, before anything runs.
#[derive(Clone, Debug)]
pub struct Plan {
    pub program: PathBuf,
    pub points: Vec<PlannedPoint>,
    pub routines: Vec<String>,
    /// Indices of the two calibration points (consecutive instructions), if any.
    pub calibration: Option<(u32, u32)>,
}

/// What a run produced. Hits are sorted by time.
#[derive(Clone, Debug)]
pub struct EventOutcome {
    pub plan: Plan,
    pub mechanism: Mechanism,
    pub hits: Vec<Hit>,
    /// Exec (or first trap) to exit, ns.
    pub measured_ns: u64,
    pub exit: ExitStatus,
    pub interrupted: bool,
    /// Hits the kernel dropped (uprobe ring buffers full).
    pub lost: u64,
}

/// Why a probe spec could not be planted.
#[derive(Debug, thiserror::Error)]
pub enum SpecError {
    #[error("probe '{spec}': {program} has no function named '{name}' (list them with `kansoku inspect {program}`)")]
    NoSuchFunction { spec: String, name: String, program: String },
    #[error("probe '{spec}': {reason}")]
    Bad { spec: String, reason: String },
}

fn parse_number(s: &str) -> Option<u64> {
    match s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        Some(h) => u64::from_str_radix(h, 16).ok(),
        None => s.parse().ok(),
    }
}

/// Resolves probe specs against the program.
pub fn plan(program_path: &Path, specs: &[String], mechanism: Mechanism, calibrate: &Calibrate) -> Result<Plan, ProbeError> {
    let program = Program::open(program_path)?;
    let display = program_path.display().to_string();
    let mut points: Vec<PlannedPoint> = Vec::new();
    let mut routines: Vec<String> = Vec::new();
    let function = |spec: &str, name: &str| {
        program.function_named(name).map_err(|_| SpecError::NoSuchFunction { spec: spec.into(), name: name.into(), program: display.clone() })
    };
    let bad = |spec: &str, reason: String| ProbeError::Spec(SpecError::Bad { spec: spec.into(), reason });
    for spec in specs {
        let spec = spec.trim();
        if spec.is_empty() {
            return Err(bad(spec, "empty probe spec".into()));
        }
        if spec.starts_with("0x") || spec.chars().all(|c| c.is_ascii_digit()) {
            let vaddr = parse_number(spec).ok_or_else(|| bad(spec, "not an address".into()))?;
            if program.code_at(vaddr).is_none() {
                return Err(bad(spec, format!("address 0x{vaddr:x} is not in an executable section of {display}")));
            }
            points.push(PlannedPoint { point: Point { name: spec.into(), address: vaddr, role: PointRole::Single }, vaddr, is_return: false });
            continue;
        }
        if let Some((name, off)) = spec.split_once('+') {
            let f = function(spec, name)?;
            let off = parse_number(off).ok_or_else(|| bad(spec, format!("offset '{off}' is not a number")))?;
            if off >= f.size.max(1) {
                return Err(bad(spec, format!("offset {off} is outside {name} ({} bytes)", f.size)));
            }
            let vaddr = f.address + off;
            let cfg = FunctionCfg::build(&program, f);
            if cfg.instruction_index(vaddr).is_none() {
                return Err(bad(spec, format!("{name}+{off} is not the start of an instruction")));
            }
            points.push(PlannedPoint { point: Point { name: spec.into(), address: vaddr, role: PointRole::Single }, vaddr, is_return: false });
            continue;
        }
        // `FUNC:entry` / `FUNC:exit` alone are single points (hits and frequency);
        // `FUNC` is a routine (entry and exit paired into execution times).
        let (name, entry, exit) = match spec.rsplit_once(':') {
            Some((n, "entry")) => (n, true, false),
            Some((n, "exit")) => (n, false, true),
            Some((_, other)) => return Err(bad(spec, format!("unknown point kind ':{other}' (use :entry or :exit)"))),
            None => (spec, true, true),
        };
        let f = function(spec, name)?;
        if !(entry && exit) {
            if entry {
                points.push(PlannedPoint { point: Point { name: spec.into(), address: f.address, role: PointRole::Single }, vaddr: f.address, is_return: false });
            } else {
                match mechanism {
                    Mechanism::Uprobe => points.push(PlannedPoint { point: Point { name: spec.into(), address: f.address, role: PointRole::Single }, vaddr: f.address, is_return: true }),
                    Mechanism::Trap => {
                        let cfg = FunctionCfg::build(&program, f);
                        for i in cfg.instructions.iter().filter(|i| i.kind == InstructionKind::Return) {
                            points.push(PlannedPoint { point: Point { name: spec.into(), address: i.address, role: PointRole::Single }, vaddr: i.address, is_return: false });
                        }
                    }
                }
            }
            continue;
        }
        let r = match routines.iter().position(|x| x == name) {
            Some(r) => r,
            None => {
                routines.push(name.to_string());
                routines.len() - 1
            }
        };
        if entry {
            points.push(PlannedPoint { point: Point { name: format!("{name}:entry"), address: f.address, role: PointRole::Entry(r) }, vaddr: f.address, is_return: false });
        }
        if exit {
            match mechanism {
                Mechanism::Uprobe => points.push(PlannedPoint {
                    point: Point { name: format!("{name}:exit"), address: f.address, role: PointRole::Exit(r) },
                    vaddr: f.address,
                    is_return: true,
                }),
                Mechanism::Trap => {
                    let cfg = FunctionCfg::build(&program, f);
                    let rets: Vec<u64> = cfg.instructions.iter().filter(|i| i.kind == InstructionKind::Return).map(|i| i.address).collect();
                    if rets.is_empty() {
                        return Err(bad(spec, format!("{name} has no return instruction to plant an exit trap on (use --mechanism uprobe)")));
                    }
                    for a in rets {
                        points.push(PlannedPoint { point: Point { name: format!("{name}:exit@0x{a:x}"), address: a, role: PointRole::Exit(r) }, vaddr: a, is_return: false });
                    }
                }
            }
        }
    }
    let mut calibration = None;
    let first = match calibrate {
        Calibrate::Off => None,
        Calibrate::FirstProbe => Some(
            points
                .iter()
                .position(|p| !p.is_return && matches!(p.point.role, PointRole::Entry(_) | PointRole::Single))
                .ok_or_else(|| bad("--calibrate", "needs an entry or single point to calibrate next to".into()))?,
        ),
        Calibrate::At(name) => {
            let f = function("--calibrate-on", name)?;
            let a = f.address;
            // a probe already there is the pair's first point; otherwise a point of its own
            Some(match points.iter().position(|p| p.vaddr == a && !p.is_return && matches!(p.point.role, PointRole::Entry(_) | PointRole::Single)) {
                Some(i) => i,
                None => {
                    points.push(PlannedPoint { point: Point { name: format!("calibrate:{name}"), address: a, role: PointRole::Single }, vaddr: a, is_return: false });
                    points.len() - 1
                }
            })
        }
    };
    if let Some(first) = first {
        let a = points[first].vaddr;
        let bytes = program.code_at(a).ok_or_else(|| bad("--calibrate", format!("no code at 0x{a:x}")))?;
        let i = kansoku_binary::decode::decode_one(bytes, a).ok_or_else(|| bad("--calibrate", format!("cannot decode 0x{a:x}")))?;
        if i.kind != InstructionKind::Other {
            return Err(bad("--calibrate", format!("the instruction at 0x{a:x} transfers control; the next one is not consecutive in time")));
        }
        let next = i.next_address();
        points.push(PlannedPoint {
            point: Point { name: format!("calibrate@0x{next:x}"), address: next, role: PointRole::Single },
            vaddr: next,
            is_return: false,
        });
        calibration = Some((first as u32, (points.len() - 1) as u32));
    }
    if points.is_empty() {
        return Err(bad("", "no probes given".into()));
    }
    Ok(Plan { program: program_path.to_path_buf(), points, routines, calibration })
}

/// Plans the points and runs the program to its end (or Ctrl-C) with them armed.
pub fn record_events(options: &EventOptions, progress: &mut dyn FnMut(u64)) -> Result<EventOutcome, ProbeError> {
    let program_path = resolve_program(&options.program)?;
    let plan = plan(&program_path, &options.probes, options.mechanism, &options.calibrate)?;
    match options.mechanism {
        Mechanism::Uprobe => run_uprobes(plan, &options.args, progress),
        Mechanism::Trap => run_traps(plan, &options.args, progress),
    }
}

/// Lifts the soft limit on open files to the hard limit (each uprobe is a file descriptor).
fn raise_fd_limit(need: u64) {
    unsafe {
        let mut r: libc::rlimit = std::mem::zeroed();
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut r) == 0 && r.rlim_cur < need + 64 {
            r.rlim_cur = r.rlim_max.min((need + 64).max(r.rlim_cur));
            libc::setrlimit(libc::RLIMIT_NOFILE, &r);
        }
    }
}

fn run_uprobes(plan: Plan, args: &[String], progress: &mut dyn FnMut(u64)) -> Result<EventOutcome, ProbeError> {
    let program = Program::open(&plan.program)?;
    let mut specs = Vec::new();
    for p in &plan.points {
        let file_offset = program.file_offset_of_vaddr(p.vaddr).ok_or_else(|| ProbeError::MarkerNotMapped {
            marker: p.point.name.clone(),
            program: plan.program.clone(),
        })?;
        specs.push(UprobeSpec { path: plan.program.clone(), file_offset, is_return: p.is_return });
    }
    raise_fd_limit(specs.len() as u64 + specs.len().div_ceil(UPROBES_PER_SESSION) as u64);
    let gate = ExecGate::spawn(&plan.program, args)?;
    let mut sessions = Vec::new();
    for chunk in specs.chunks(UPROBES_PER_SESSION) {
        let o = SessionOptions {
            // The leader must be a sampling event; one sample per ~18 minutes of CPU is none.
            clock: SamplingClock::CpuClock { period_ns: 1 << 40 },
            uprobes: chunk.to_vec(),
            buffer_pages: 256,
            enable_on_exec: true,
            ..SessionOptions::default()
        };
        match Session::open(gate.pid.as_raw(), &o) {
            Ok(s) => sessions.push(s),
            Err(e) => {
                let pid = gate.pid;
                drop(gate);
                let _ = waitpid(pid, None);
                return Err(ProbeError::Perf(e));
            }
        }
    }
    let start = Instant::now();
    let pid = gate.open();
    let mut hits = Vec::new();
    let mut interrupted = false;
    let drain = |sessions: &mut Vec<Session>, hits: &mut Vec<Hit>| {
        for (k, s) in sessions.iter_mut().enumerate() {
            s.drain(&mut |r| {
                if let PerfRecord::Sample(sample) = r {
                    if let SampleSource::Uprobe(i) = sample.source {
                        hits.push(Hit { point: (k * UPROBES_PER_SESSION + i) as u32, tid: sample.tid, time_ns: sample.time_ns });
                    }
                }
            });
        }
    };
    let exit = loop {
        sessions[0].wait(20);
        drain(&mut sessions, &mut hits);
        progress(hits.len() as u64);
        if let ChildState::Ended(exit) = poll_child(pid, &mut interrupted)? {
            break exit;
        }
    };
    let measured_ns = start.elapsed().as_nanos() as u64;
    drain(&mut sessions, &mut hits);
    let lost = sessions.iter().map(|s| s.lost).sum();
    if exit == ExitStatus::Exited(127) && hits.is_empty() {
        return Err(ProbeError::Spawn { program: plan.program.clone(), reason: "exec failed (is it a program for this machine?)".into() });
    }
    hits.sort_by_key(|h| (h.time_ns, h.point));
    Ok(EventOutcome { plan, mechanism: Mechanism::Uprobe, hits, measured_ns, exit, interrupted, lost })
}

fn ptrace_err(operation: &'static str, pid: Pid) -> impl Fn(Errno) -> ProbeError {
    move |errno| ProbeError::Ptrace { operation, pid: pid.as_raw(), errno, hint: if errno == Errno::EPERM { PTRACE_HINT } else { "" } }
}

fn monotonic_ns() -> u64 {
    let mut t = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut t) };
    t.tv_sec as u64 * 1_000_000_000 + t.tv_nsec as u64
}

/// One armed address: the original byte and the points planted there.
struct Trap {
    address: u64,
    /// The original first byte of the instruction (low byte).
    original: i64,
    points: Vec<u32>,
}

/// Pins the calling thread to the CPU it is on; returns the previous affinity to restore.
fn pin_to_current_cpu() -> Option<libc::cpu_set_t> {
    unsafe {
        let mut old: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut old) != 0 {
            return None;
        }
        let cpu = libc::sched_getcpu();
        if cpu < 0 {
            return None;
        }
        let mut one: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu as usize, &mut one);
        (libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &one) == 0).then_some(old)
    }
}

fn run_traps(plan: Plan, args: &[String], progress: &mut dyn FnMut(u64)) -> Result<EventOutcome, ProbeError> {
    // Tracer and program share one CPU (the program inherits the affinity): a trap then
    // hands the CPU straight to the tracer and back, as on the seed's single-CPU machine,
    // instead of waking the tracer on another CPU that may be busy with other work.
    let old_affinity = pin_to_current_cpu();
    let result = run_traps_pinned(plan, args, progress);
    if let Some(old) = old_affinity {
        unsafe { libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &old) };
    }
    result
}

fn run_traps_pinned(plan: Plan, args: &[String], progress: &mut dyn FnMut(u64)) -> Result<EventOutcome, ProbeError> {
    let program = Program::open(&plan.program)?;
    let pid = spawn_traced(&plan.program, args)?;
    let kill = |pid: Pid| {
        let _ = nix::sys::signal::kill(Pid::from_raw(-pid.as_raw()), Signal::SIGKILL);
    };
    let opts = Options::PTRACE_O_TRACECLONE | Options::PTRACE_O_EXITKILL;
    if let Err(e) = ptrace::setoptions(pid, opts) {
        kill(pid);
        return Err(ptrace_err("SETOPTIONS", pid)(e));
    }
    let modules = crate::procfs::ModuleReader::default().code_modules(pid.as_raw())?;
    let path = plan.program.to_string_lossy().into_owned();
    // Plant: one int3 per distinct address.
    let mut traps: Vec<Trap> = Vec::new();
    for (i, p) in plan.points.iter().enumerate() {
        let addr = kansoku_binary::maps::runtime_address(&modules, &program, &path, p.vaddr).ok_or_else(|| ProbeError::MarkerNotMapped {
            marker: p.point.name.clone(),
            program: plan.program.clone(),
        })?;
        match traps.iter_mut().find(|t| t.address == addr) {
            Some(t) => t.points.push(i as u32),
            None => traps.push(Trap { address: addr, original: 0, points: vec![i as u32] }),
        }
    }
    for t in traps.iter_mut() {
        // Read after the previous points were armed: keep only this address's own byte.
        let word = ptrace::read(pid, t.address as ptrace::AddressType).map_err(ptrace_err("PEEKDATA", pid))?;
        t.original = word & 0xff;
        ptrace::write(pid, t.address as ptrace::AddressType, (word & !0xff) | 0xcc).map_err(ptrace_err("POKEDATA", pid))?;
    }
    traps.sort_by_key(|t| t.address);
    let group = Pid::from_raw(-pid.as_raw());
    let mut hits: Vec<Hit> = Vec::new();
    let mut interrupted = false;
    let start = Instant::now();
    let mut resume: Option<(Pid, Option<Signal>)> = Some((pid, None));
    let exit = loop {
        if let Some((tid, sig)) = resume.take() {
            let _ = ptrace::cont(tid, sig);
        }
        if interrupt::requested() && !interrupted {
            interrupted = true;
            kill(pid);
        }
        let status = match wait_retrying(group, Some(WaitPidFlag::__WALL)) {
            Ok(s) => s,
            Err(Errno::EINTR) => continue,
            Err(Errno::ECHILD) => break ExitStatus::Killed(libc::SIGKILL),
            Err(errno) => return Err(ProbeError::Wait { pid: pid.as_raw(), errno }),
        };
        match status {
            WaitStatus::Stopped(tid, Signal::SIGTRAP) => {
                let now = monotonic_ns();
                let mut regs = ptrace::getregs(tid).map_err(ptrace_err("GETREGS", tid))?;
                let at = regs.rip.wrapping_sub(1);
                let Ok(k) = traps.binary_search_by_key(&at, |t| t.address) else {
                    // Not ours (e.g. the program's own int3): deliver it.
                    resume = Some((tid, Some(Signal::SIGTRAP)));
                    continue;
                };
                let t = &traps[k];
                for &p in &t.points {
                    hits.push(Hit { point: p, tid: tid.as_raw() as u32, time_ns: now });
                }
                if hits.len().is_multiple_of(4096) {
                    progress(hits.len() as u64);
                }
                // Restore, step the original instruction, re-arm. Only the trap's own byte
                // is patched: the word may hold other armed points.
                let word = ptrace::read(tid, at as ptrace::AddressType).map_err(ptrace_err("PEEKDATA", tid))?;
                ptrace::write(tid, at as ptrace::AddressType, (word & !0xff) | (t.original & 0xff)).map_err(ptrace_err("POKEDATA", tid))?;
                regs.rip = at;
                ptrace::setregs(tid, regs).map_err(ptrace_err("SETREGS", tid))?;
                ptrace::step(tid, None).map_err(ptrace_err("SINGLESTEP", tid))?;
                let mut pending_signal = None;
                loop {
                    match wait_retrying(tid, Some(WaitPidFlag::__WALL)) {
                        Ok(WaitStatus::Stopped(_, Signal::SIGTRAP)) => break,
                        // A signal arrived during the step: deliver it after re-arming.
                        Ok(WaitStatus::Stopped(_, sig)) => {
                            pending_signal = Some(sig);
                            ptrace::step(tid, None).map_err(ptrace_err("SINGLESTEP", tid))?;
                        }
                        Ok(WaitStatus::PtraceEvent(..)) => {
                            ptrace::step(tid, None).map_err(ptrace_err("SINGLESTEP", tid))?;
                        }
                        Ok(_) => break, // exited during the step
                        Err(Errno::EINTR) => {}
                        Err(_) => break,
                    }
                }
                if let Ok(word) = ptrace::read(tid, at as ptrace::AddressType) {
                    let _ = ptrace::write(tid, at as ptrace::AddressType, (word & !0xff) | 0xcc);
                }
                resume = Some((tid, pending_signal));
            }
            WaitStatus::Stopped(tid, Signal::SIGSTOP) if tid != pid => resume = Some((tid, None)),
            WaitStatus::Stopped(tid, sig) => resume = Some((tid, Some(sig))),
            WaitStatus::PtraceEvent(tid, _, _) => resume = Some((tid, None)),
            WaitStatus::Exited(p, code) if p == pid => break ExitStatus::Exited(code),
            WaitStatus::Signaled(p, sig, _) if p == pid => break ExitStatus::Killed(sig as i32),
            _ => {}
        }
    };
    let measured_ns = start.elapsed().as_nanos() as u64;
    // Reap what is left of the group (threads exit with the process).
    while let Ok(s) = waitpid(group, Some(WaitPidFlag::__WALL | WaitPidFlag::WNOHANG)) {
        if s == WaitStatus::StillAlive {
            break;
        }
    }
    hits.sort_by_key(|h| (h.time_ns, h.point));
    Ok(EventOutcome { plan, mechanism: Mechanism::Trap, hits, measured_ns, exit, interrupted, lost: 0 })
}
