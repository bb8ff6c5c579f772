//! Seed 001's event method: measurement points planted in a program, each hit time-stamped.
//!
//! Three mechanisms:
//!
//! * [`Mechanism::Agent`] — kansoku's in-process agent ([`crate::agent`]): patched
//!   function entries, hits written to shared memory, tens of nanoseconds a hit.
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
//! link-time address of the program) or `FUNC+OFF` (a single point); `FUNC@LIB` names a
//! function of a shared library the program loads (uftrace's form). With the agent and
//! uprobes the kernel's context-switch records give each thread's time off the CPU, which
//! calls leave out (on-CPU times). With `calibrate`,
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

use crate::online::SwitchLog;
use crate::perf::{PerfRecord, SampleSource, SamplingClock, Session, SessionOptions, UprobeSpec};
use crate::points::clock::{clock_step, monotonic_ns};
pub use crate::points::plan::{EventOutcome, Mechanism, Plan, PlannedPoint};
use crate::spawn::{elf_that_runs, poll_child, programs_a_script_names, resolve_program, wait_retrying, ChildState, ExecGate, Progress};
use crate::tracee::{ptrace_error as ptrace_err, Tracee};
use crate::{interrupt, ProbeError};

/// At most this many uprobes share one perf group (the kernel caps a group's read size at 16 KiB).
pub const UPROBES_PER_SESSION: usize = 500;

/// What to measure.
#[derive(Clone, Debug)]
pub struct EventOptions {
    /// The program to run (a name without `/` is looked up in `PATH`; a `#!` script is
    /// probed in the ELF program that runs it).
    pub program: PathBuf,
    /// Its arguments, without the program name.
    pub args: Vec<String>,
    /// Probe specs as the user wrote them: `FUNC`, `FUNC@LIB`, `FUNC:entry`, `FUNC:exit`,
    /// `FUNC+OFFSET`, or a link-time address (`0x...` or decimal).
    pub probes: Vec<String>,
    /// How the points are planted.
    pub mechanism: Mechanism,
    /// Where the calibration pair goes, if anywhere.
    pub calibrate: Calibrate,
    /// Keep every hit in [`EventOutcome::hits`] (at most [`crate::online::MAX_HITS`]), for a
    /// timeline. The agent's hits are otherwise analysed as they are read and not kept
    /// (uprobe and trap hits are always kept).
    pub keep_hits: bool,
}

/// Where the seed's calibration pair (two points on consecutive instructions) goes.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum Calibrate {
    /// No calibration pair.
    #[default]
    Off,
    /// Next to the first probe's entry point.
    FirstProbe,
    /// At the entry of this function of the program (`--calibrate-on FUNC`): a place the
    /// user chose, often called and not itself measured, so the result does not depend on
    /// the order of the probes.
    At(String),
}

/// Why a probe spec could not be planted.
#[derive(Debug, thiserror::Error)]
pub enum SpecError {
    #[error("probe '{spec}': {program} has no function named '{name}' (list them with `kansoku inspect {program}`)")]
    /// The program (or library) has no function of that name.
    NoSuchFunction {
        /// The probe spec as given.
        spec: String,
        /// The function name looked for.
        name: String,
        /// The program or library looked in, as a path.
        program: String,
    },
    #[error("probe '{spec}': {reason}")]
    /// The spec is malformed or names something that cannot be probed with this mechanism.
    Bad {
        /// The probe spec as given.
        spec: String,
        /// What is wrong with it.
        reason: String,
    },
}

fn parse_number(s: &str) -> Option<u64> {
    match s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        Some(h) => u64::from_str_radix(h, 16).ok(),
        None => s.parse().ok(),
    }
}

/// The shared libraries a dynamic program loads at start, as its dynamic linker lists
/// them (`ld.so --list`, which reads the program without running it).
pub(crate) fn libraries_of(program: &Program, path: &Path) -> Result<Vec<(String, PathBuf)>, String> {
    let interpreter = program.interpreter.as_ref().ok_or_else(|| format!("{} is statically linked: it loads no shared libraries", path.display()))?;
    let out = std::process::Command::new(interpreter)
        .arg("--list")
        .arg(path)
        .stdin(std::process::Stdio::null())
        .output()
        .map_err(|e| format!("running {} --list {}: {e}", interpreter.display(), path.display()))?;
    let text = String::from_utf8_lossy(&out.stdout);
    // lines: `libz.so.1 => /lib/x86_64-linux-gnu/libz.so.1 (0x…)` or `/lib64/ld-linux-x86-64.so.2 (0x…)`;
    // kept: the name as listed (the soname) and the real file (the kernel's maps show that)
    Ok(text
        .lines()
        .filter_map(|l| {
            let l = l.trim();
            let (listed, rest) = l.split_once("=>").map_or((l.split_whitespace().next()?, l), |(n, p)| (n.trim(), p.trim()));
            let p = rest.split_whitespace().next()?;
            let listed = Path::new(listed).file_name()?.to_string_lossy().into_owned();
            p.starts_with('/').then(|| (listed, std::fs::canonicalize(p).unwrap_or_else(|_| PathBuf::from(p))))
        })
        .collect())
}

/// The library the dynamic linker's cache (`ldconfig -p`) lists for `lib` on this
/// machine's architecture: what `dlopen("libz.so.1")` loads.
pub(crate) fn cached_library(lib: &str) -> Option<PathBuf> {
    let out = ["/sbin/ldconfig", "/usr/sbin/ldconfig"].iter().find_map(|l| std::process::Command::new(l).arg("-p").stdin(std::process::Stdio::null()).output().ok())?;
    // lines: `\tlibz.so.1 (libc6,x86-64) => /lib/x86_64-linux-gnu/libz.so.1`
    String::from_utf8_lossy(&out.stdout).lines().find_map(|l| {
        let (left, path) = l.trim().split_once(" => ")?;
        let (name, kind) = left.split_once(' ')?;
        (kind.contains("x86-64") && library_matches(name, lib)).then(|| std::fs::canonicalize(path.trim()).unwrap_or_else(|_| PathBuf::from(path.trim())))
    })
}

/// Whether library file `name` is what the user called `lib`: `libz.so.1` is `libz.so.1`,
/// `libz`, `libz.so` and `z`.
pub(crate) fn library_matches(name: &str, lib: &str) -> bool {
    name == lib || name.starts_with(&format!("{lib}.")) || name.starts_with(&format!("lib{lib}."))
}

/// The program and the libraries named so far, opened once each.
struct Modules {
    program: Program,
    display: String,
    libraries: Option<Vec<(String, PathBuf)>>,
    opened: Vec<(PathBuf, Program)>,
    /// Points in libraries loaded after start can be planted (agent, uprobe).
    later: bool,
}

impl Modules {
    /// The module `lib` names (None: the program) and its path.
    fn module(&mut self, spec: &str, lib: Option<&str>) -> Result<(Option<PathBuf>, &Program), ProbeError> {
        let bad = |reason: String| ProbeError::Spec(SpecError::Bad { spec: spec.into(), reason });
        let Some(lib) = lib else { return Ok((None, &self.program)) };
        let path = if lib.contains('/') {
            std::fs::canonicalize(lib).map_err(|e| bad(format!("library {lib}: {e}")))?
        } else {
            if self.libraries.is_none() {
                self.libraries = Some(libraries_of(&self.program, self.program.path()).map_err(bad)?);
            }
            let all = self.libraries.as_ref().expect("listed above");
            let file_name = |p: &PathBuf| p.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
            let found = all.iter().find(|(listed, p)| library_matches(listed, lib) || library_matches(&file_name(p), lib));
            let names: Vec<&str> = all.iter().map(|(listed, _)| listed.as_str()).collect();
            match found {
                Some((_, p)) => p.clone(),
                // not loaded at start: the library `dlopen` finds by that name, planted
                // when the program loads it (the agent hooks the loader; a uprobe is on
                // the file)
                None => match cached_library(lib) {
                    Some(p) if self.later => p,
                    _ => return Err(bad(format!("{} loads no library '{lib}' at start (it loads: {}){}", self.display, names.join(", "), if self.later { ", and the dynamic linker's cache has none" } else { "; a library loaded later is probed with --mechanism agent or uprobe" }))),
                },
            }
        };
        if !self.opened.iter().any(|(p, _)| *p == path) {
            let program = Program::open(&path)?;
            self.opened.push((path.clone(), program));
        }
        let program = &self.opened.iter().find(|(p, _)| *p == path).expect("opened above").1;
        Ok((Some(path), program))
    }
}

/// Splits `FUNC@LIB` (uftrace's form) into the function and the library.
fn split_library(name: &str) -> (&str, Option<&str>) {
    match name.split_once('@') {
        Some((f, lib)) if !lib.is_empty() && !f.is_empty() => (f, Some(lib)),
        _ => (name, None),
    }
}

/// Resolves probe specs against the program (and, for `FUNC@LIB`, the libraries it loads).
pub fn plan(program_path: &Path, specs: &[String], mechanism: Mechanism, calibrate: &Calibrate) -> Result<Plan, ProbeError> {
    plan_in(program_path, specs, mechanism, calibrate, false)
}

/// [`plan`]; with `at_run_time`, the program's functions are left for the agent to find in
/// whatever program the run reaches ([`Plan::program_at_run_time`]).
fn plan_in(program_path: &Path, specs: &[String], mechanism: Mechanism, calibrate: &Calibrate, at_run_time: bool) -> Result<Plan, ProbeError> {
    let program = Program::open(program_path)?;
    let display = program_path.display().to_string();
    let later = matches!(mechanism, Mechanism::Agent | Mechanism::Uprobe);
    let mut modules = Modules { program, display: display.clone(), libraries: None, opened: Vec::new(), later };
    let mut points: Vec<PlannedPoint> = Vec::new();
    let mut routines: Vec<String> = Vec::new();
    let bad = |spec: &str, reason: String| ProbeError::Spec(SpecError::Bad { spec: spec.into(), reason });
    let single = |name: &str, module: &Option<PathBuf>, vaddr: u64, size: u64, is_return: bool| PlannedPoint {
        point: Point { name: name.into(), address: vaddr, role: PointRole::Single },
        module: module.clone(),
        vaddr,
        size,
        is_return,
    };
    for spec in specs {
        let spec = spec.trim();
        if spec.is_empty() {
            return Err(bad(spec, "empty probe spec".into()));
        }
        let program = &modules.program;
        // the program is known only when it runs: a place in it is named by a function
        let unknown_program = || bad(spec, format!("the program {display} starts is known only when it runs (a shim builds its path): name a function of it (FUNC, FUNC:entry or FUNC:exit), not an address or an offset"));
        if spec.starts_with("0x") || spec.chars().all(|c| c.is_ascii_digit()) {
            if at_run_time {
                return Err(unknown_program());
            }
            let vaddr = parse_number(spec).ok_or_else(|| bad(spec, "not an address".into()))?;
            if program.code_at(vaddr).is_none() {
                return Err(bad(spec, format!("address 0x{vaddr:x} is not in an executable section of {display}")));
            }
            points.push(single(spec, &None, vaddr, 0, false));
            continue;
        }
        if let Some((name, off)) = spec.split_once('+') {
            let (name, lib) = split_library(name);
            if at_run_time && lib.is_none() {
                return Err(unknown_program());
            }
            let (module, program) = modules.module(spec, lib)?;
            let f = program.function_named(name).map_err(|_| no_such(spec, name, program))?;
            let off = parse_number(off).ok_or_else(|| bad(spec, format!("offset '{off}' is not a number")))?;
            if off >= f.size.max(1) {
                return Err(bad(spec, format!("offset {off} is outside {name} ({} bytes)", f.size)));
            }
            let vaddr = f.address + off;
            let cfg = FunctionCfg::build(program, f);
            if cfg.instruction_index(vaddr).is_none() {
                return Err(bad(spec, format!("{name}+{off} is not the start of an instruction")));
            }
            if mechanism == Mechanism::Agent {
                return Err(bad(spec, "the agent probes function entries and exits; a point inside a function needs --mechanism uprobe or trap".into()));
            }
            points.push(single(spec, &module, vaddr, 0, false));
            continue;
        }
        // `FUNC:entry` / `FUNC:exit` alone are single points (hits and frequency);
        // `FUNC` is a routine (entry and exit paired into execution times).
        let (full, entry, exit) = match spec.rsplit_once(':') {
            Some((n, "entry")) => (n, true, false),
            Some((n, "exit")) => (n, false, true),
            Some((_, other)) => return Err(bad(spec, format!("unknown point kind ':{other}' (use :entry or :exit)"))),
            None => (spec, true, true),
        };
        let (name, lib) = split_library(full);
        let (module, program) = modules.module(spec, lib)?;
        let ifunc = |address: u64| kansoku_binary::FunctionSymbol { name: name.into(), address, size: 0, source: kansoku_binary::SymbolSource::Dynamic, aliases: Vec::new() };
        let f = match (&module, program.ifunc_named(name)) {
            // A GNU IFUNC: the dynamic linker picks the implementation for this CPU. The
            // agent asks it inside the process (address 0 tells it to); uprobes and traps
            // take the one it picks in kansoku's own process, on the same machine.
            (Some(lib), Some(_)) if mechanism == Mechanism::Agent => ifunc(0),
            (Some(lib), Some(_)) => {
                let vaddr = ifunc_implementation(lib, name).ok_or_else(|| {
                    bad(spec, format!("{name} is a GNU IFUNC of {} and kansoku could not resolve it in its own process; probe it with --mechanism agent", lib.display()))
                })?;
                let size = program.function_at(vaddr).filter(|g| g.address == vaddr).map_or(0, |g| g.size);
                kansoku_binary::FunctionSymbol { size, ..ifunc(vaddr) }
            }
            // the program's function, found by the agent in each program the run reaches
            (None, _) if at_run_time => ifunc(0),
            _ => program.function_named(name).map_err(|_| no_such(spec, name, program))?.clone(),
        };
        let exits = |program: &Program| -> Vec<u64> {
            let cfg = FunctionCfg::build(program, &f);
            cfg.instructions.iter().filter(|i| i.kind == InstructionKind::Return).map(|i| i.address).collect()
        };
        if !(entry && exit) {
            if entry {
                points.push(single(spec, &module, f.address, f.size, false));
            } else {
                match mechanism {
                    Mechanism::Uprobe | Mechanism::Agent => points.push(single(spec, &module, f.address, f.size, true)),
                    Mechanism::Trap => points.extend(exits(program).into_iter().map(|a| single(spec, &module, a, 0, false))),
                }
            }
            continue;
        }
        // Several names at one address are one routine, counted once under all its names.
        if let Some(same) = points.iter().position(|p| f.address != 0 && p.module == module && p.vaddr == f.address && matches!(p.point.role, PointRole::Entry(_))) {
            let PointRole::Entry(r) = points[same].point.role else { unreachable!() };
            if !routines[r].split(" = ").any(|n| n == full) {
                routines[r] = format!("{} = {full}", routines[r]);
            }
            continue;
        }
        routines.push(full.to_string());
        let r = routines.len() - 1;
        let routine = |name: String, vaddr: u64, size: u64, role: PointRole, is_return: bool| PlannedPoint {
            point: Point { name, address: vaddr, role },
            module: module.clone(),
            vaddr,
            size,
            is_return,
        };
        points.push(routine(format!("{full}:entry"), f.address, f.size, PointRole::Entry(r), false));
        match mechanism {
            Mechanism::Uprobe | Mechanism::Agent => points.push(routine(format!("{full}:exit"), f.address, f.size, PointRole::Exit(r), true)),
            Mechanism::Trap => {
                let rets = exits(program);
                if rets.is_empty() {
                    return Err(bad(spec, format!("{name} has no return instruction to plant an exit trap on (use --mechanism uprobe)")));
                }
                for a in rets {
                    points.push(routine(format!("{full}:exit@0x{a:x}"), a, 0, PointRole::Exit(r), false));
                }
            }
        }
    }
    let calibration = calibration_points(&mut points, &modules.program, mechanism, calibrate, &display)?;
    if points.is_empty() {
        return Err(bad("", "no probes given".into()));
    }
    Ok(Plan { program: program_path.to_path_buf(), points, routines, calibration, program_at_run_time: at_run_time })
}

/// The link-time address in `lib` of the implementation the dynamic linker picks for the
/// GNU IFUNC `name` on this machine, asked in kansoku's own process (for a library it has
/// loaded already: libc, libm).
pub(crate) fn ifunc_implementation(lib: &Path, name: &str) -> Option<u64> {
    use std::os::unix::ffi::OsStrExt;
    let path = std::ffi::CString::new(lib.as_os_str().as_bytes()).ok()?;
    let symbol = std::ffi::CString::new(name).ok()?;
    // SAFETY: NUL-terminated strings that outlive the calls; RTLD_NOLOAD only looks up a
    // library this process already has (no initialiser runs), and dlclose drops just the
    // reference it took, so the library, `a` and the name dladdr points to stay valid;
    // `info` is ours (all-zero is a valid Dl_info).
    unsafe {
        let handle = libc::dlopen(path.as_ptr(), libc::RTLD_NOLOAD | libc::RTLD_LAZY);
        if handle.is_null() {
            return None;
        }
        let a = libc::dlsym(handle, symbol.as_ptr());
        libc::dlclose(handle);
        let mut info: libc::Dl_info = std::mem::zeroed();
        if a.is_null() || libc::dladdr(a, &mut info) == 0 || info.dli_fname.is_null() {
            return None;
        }
        let file = std::ffi::CStr::from_ptr(info.dli_fname).to_string_lossy().into_owned();
        (std::fs::canonicalize(file).ok()? == lib).then(|| a as u64 - info.dli_fbase as u64)
    }
}

fn no_such(spec: &str, name: &str, program: &Program) -> ProbeError {
    let display = program.path().display().to_string();
    ProbeError::Spec(SpecError::NoSuchFunction { spec: spec.into(), name: name.into(), program: display })
}

/// Adds the seed's calibration pair and returns its two point indices. With the agent the
/// pair is the entry and exit of an empty routine of the agent's own (called by the agent
/// before `main`): exactly what a probe adds to a call. With uprobes and traps it is two
/// points on consecutive instructions, at `--calibrate-on FUNC` or next to the first probe.
fn calibration_points(points: &mut Vec<PlannedPoint>, program: &Program, mechanism: Mechanism, calibrate: &Calibrate, display: &str) -> Result<Option<(u32, u32)>, ProbeError> {
    let bad = |reason: String| ProbeError::Spec(SpecError::Bad { spec: "--calibrate".into(), reason });
    if *calibrate == Calibrate::Off {
        return Ok(None);
    }
    if mechanism == Mechanism::Agent {
        if let Calibrate::At(name) = calibrate {
            return Err(bad(format!("the agent calibrates on a routine of its own; --calibrate-on {name} is for uprobe and trap")));
        }
        for name in ["calibrate:agent:entry", "calibrate:agent:exit"] {
            points.push(PlannedPoint { point: Point { name: name.into(), address: 0, role: PointRole::Single }, module: None, vaddr: 0, size: 0, is_return: false });
        }
        return Ok(Some(((points.len() - 2) as u32, (points.len() - 1) as u32)));
    }
    let first = match calibrate {
        Calibrate::Off => unreachable!("returned above"),
        Calibrate::FirstProbe => points
            .iter()
            .position(|p| p.module.is_none() && !p.is_return && matches!(p.point.role, PointRole::Entry(_) | PointRole::Single))
            .ok_or_else(|| bad("needs an entry or single point of the program to calibrate next to".into()))?,
        Calibrate::At(name) => {
            let f = program.function_named(name).map_err(|_| no_such("--calibrate-on", name, program))?;
            let a = f.address;
            // a probe already there is the pair's first point; otherwise a point of its own
            match points.iter().position(|p| p.module.is_none() && p.vaddr == a && !p.is_return && matches!(p.point.role, PointRole::Entry(_) | PointRole::Single)) {
                Some(i) => i,
                None => {
                    points.push(PlannedPoint { point: Point { name: format!("calibrate:{name}"), address: a, role: PointRole::Single }, module: None, vaddr: a, size: 0, is_return: false });
                    points.len() - 1
                }
            }
        }
    };
    let a = points[first].vaddr;
    let bytes = program.code_at(a).ok_or_else(|| bad(format!("no code at 0x{a:x} in {display}")))?;
    let i = kansoku_binary::decode::decode_one(bytes, a).ok_or_else(|| bad(format!("cannot decode 0x{a:x}")))?;
    if i.kind != InstructionKind::Other {
        return Err(bad(format!("the instruction at 0x{a:x} transfers control; the next one is not consecutive in time")));
    }
    let next = i.next_address();
    points.push(PlannedPoint { point: Point { name: format!("calibrate@0x{next:x}"), address: next, role: PointRole::Single }, module: None, vaddr: next, size: 0, is_return: false });
    Ok(Some((first as u32, (points.len() - 1) as u32)))
}

/// Plans the points and runs the program to its end (or Ctrl-C) with them armed. A `#!`
/// script is run as the kernel runs it, and probed in the ELF program that runs it; a
/// function that program lacks is planned in the one program the script's text names
/// with it, else (a shim that builds its program's path at run time; the agent only)
/// found in each program the run starts, as it starts (`follow`).
pub fn record_events(options: &EventOptions, progress: &mut dyn FnMut(Progress)) -> Result<EventOutcome, ProbeError> {
    let program_path = resolve_program(&options.program)?;
    let (elf, args) = elf_that_runs(&program_path, &options.args)?;
    let mut followed = None;
    let plan = match plan(&elf, &options.probes, options.mechanism, &options.calibrate) {
        Err(ProbeError::Spec(SpecError::NoSuchFunction { spec, name, program })) if elf != program_path => {
            // a shim: the script's own words name the program it starts
            let named = programs_a_script_names(&program_path, &name);
            match named.as_slice() {
                [one] if options.mechanism != Mechanism::Trap => {
                    followed = Some(format!("'{name}' is planned in {}, which the script {} names (probed when it runs)", one.display(), program_path.display()));
                    let mut p = plan(one, &options.probes, options.mechanism, &options.calibrate)?;
                    for point in p.points.iter_mut().filter(|point| point.module.is_none()) {
                        point.module = Some(one.clone());
                    }
                    p.program = elf.clone();
                    p
                }
                // a shim that builds its program's path at run time: the agent, in every
                // program the run reaches, asks kansoku where the function is
                [] if options.mechanism == Mechanism::Agent => {
                    followed = Some(format!(
                        "'{name}' is not in {program} (which runs the script {}) nor in a program the script's text names: it is looked up in each program the run starts, as it starts",
                        program_path.display()
                    ));
                    plan_in(&elf, &options.probes, options.mechanism, &options.calibrate, true)?
                }
                _ => {
                    let why = match (named.as_slice(), options.mechanism) {
                        ([], Mechanism::Uprobe) => format!("nor does any program its text names: the program it starts is known only when it runs (its path is built then), and a uprobe is placed on a file before the run; the agent (--mechanism agent) finds '{name}' in each program the run starts"),
                        ([], _) => format!("nor does any program its text names: the program it starts is known only when it runs, and the trap mechanism stays in the first program (ptrace does not follow exec here); the agent (--mechanism agent) finds '{name}' in each program the run starts"),
                        ([_], _) => "the program its text names has it, but the trap mechanism stays in the first program (ptrace does not follow exec here): use the agent or uprobes".to_string(),
                        (several, _) => format!("and its text names several programs that have it ({}): name the one to probe", several.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(", ")),
                    };
                    return Err(ProbeError::Spec(SpecError::Bad {
                        spec,
                        reason: format!("{} is a script run by {program}, which has no function named '{name}', {why}", program_path.display()),
                    }));
                }
            }
        }
        other => other?,
    };
    let mut outcome = match options.mechanism {
        Mechanism::Agent => crate::agent::run_agent(plan, &args, options.keep_hits, progress),
        Mechanism::Uprobe => run_uprobes(plan, &args, progress),
        Mechanism::Trap => run_traps(plan, &args, progress),
    }?;
    outcome.notes.extend(followed);
    Ok(outcome)
}

/// Lifts the soft limit on open files to the hard limit (each uprobe is a file descriptor).
fn raise_fd_limit(need: u64) {
    // SAFETY: an rlimit of ours (all-zero is a valid value) that the calls read and fill.
    unsafe {
        let mut r: libc::rlimit = std::mem::zeroed();
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut r) == 0 && r.rlim_cur < need + 64 {
            r.rlim_cur = r.rlim_max.min((need + 64).max(r.rlim_cur));
            libc::setrlimit(libc::RLIMIT_NOFILE, &r);
        }
    }
}

/// The uprobes for `points` (file offsets in the program or their library).
pub(crate) fn uprobe_specs(plan: &Plan, points: &[PlannedPoint]) -> Result<Vec<UprobeSpec>, ProbeError> {
    let mut opened: Vec<(PathBuf, Program)> = vec![(plan.program.clone(), Program::open(&plan.program)?)];
    let mut specs = Vec::new();
    for p in points {
        let path = p.module.clone().unwrap_or_else(|| plan.program.clone());
        if !opened.iter().any(|(q, _)| *q == path) {
            opened.push((path.clone(), Program::open(&path)?));
        }
        let program = &opened.iter().find(|(q, _)| *q == path).expect("opened above").1;
        let file_offset = program.file_offset_of_vaddr(p.vaddr).ok_or_else(|| ProbeError::MarkerNotMapped { marker: p.point.name.clone(), program: path.clone() })?;
        specs.push(UprobeSpec { path, file_offset, is_return: p.is_return });
    }
    Ok(specs)
}

fn run_uprobes(plan: Plan, args: &[String], progress: &mut dyn FnMut(Progress)) -> Result<EventOutcome, ProbeError> {
    let specs = uprobe_specs(&plan, &plan.points)?;
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
    let mut switches = SwitchLog::open(gate.pid.as_raw());
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
        switches.drain();
        match poll_child(pid, &mut interrupted)? {
            ChildState::Ended(exit) => break exit,
            ChildState::Stopped(signal) => progress(Progress::Stopped { signal }),
            ChildState::Running => progress(Progress::Count(hits.len() as u64)),
        }
    };
    let measured_ns = start.elapsed().as_nanos() as u64;
    drain(&mut sessions, &mut hits);
    switches.drain();
    let lost = sessions.iter().map(|s| s.lost).sum();
    if exit == ExitStatus::Exited(127) && hits.is_empty() {
        return Err(ProbeError::Spawn { program: plan.program.clone(), reason: "exec failed (is it a program for this machine?)".into() });
    }
    hits.sort_by_key(|h| (h.time_ns, h.point));
    let notes = switches.problem.iter().map(|why| format!("times are wall-clock times: context switches could not be recorded ({why})")).collect();
    let clock_resolution_ns = clock_step(monotonic_ns);
    Ok(EventOutcome { plan, mechanism: Mechanism::Uprobe, hits, analysed: None, measured_ns, exit, interrupted, lost, notes, off_cpu: switches.off_cpu(), clock_resolution_ns, broken: Vec::new() })
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
    // SAFETY: cpu_set_t values of ours (all-zero is valid), passed with their size.
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

fn run_traps(plan: Plan, args: &[String], progress: &mut dyn FnMut(Progress)) -> Result<EventOutcome, ProbeError> {
    // Tracer and program share one CPU (the program inherits the affinity): a trap then
    // hands the CPU straight to the tracer and back, as on the seed's single-CPU machine,
    // instead of waking the tracer on another CPU that may be busy with other work.
    let old_affinity = pin_to_current_cpu();
    let result = run_traps_pinned(plan, args, progress);
    if let Some(old) = old_affinity {
        // SAFETY: the set pin_to_current_cpu read, passed with its size.
        unsafe { libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &old) };
    }
    result
}

fn run_traps_pinned(plan: Plan, args: &[String], progress: &mut dyn FnMut(Progress)) -> Result<EventOutcome, ProbeError> {
    let program = Program::open(&plan.program)?;
    let mut tracee = Tracee::spawn(&plan.program, args, Options::PTRACE_O_TRACECLONE)?;
    let pid = tracee.pid();
    let kill = |pid: Pid| {
        let _ = nix::sys::signal::kill(Pid::from_raw(-pid.as_raw()), Signal::SIGKILL);
    };
    let path = plan.program.to_string_lossy().into_owned();
    // Libraries are mapped by the dynamic linker after exec: run to the program's entry
    // point first, where they all are.
    if plan.points.iter().any(|p| p.module.is_some()) {
        match tracee.run_to_entry(&plan.program) {
            Ok(crate::tracee::RunTo::Reached { .. }) => {}
            Ok(crate::tracee::RunTo::Ended(_)) => {
                return Err(ProbeError::Spawn { program: plan.program.clone(), reason: "it ended before reaching its entry point".into() })
            }
            Err(e) => {
                tracee.kill();
                return Err(e);
            }
        }
    }
    let modules = crate::procfs::ModuleReader::default().code_modules(pid.as_raw())?;
    let mut libraries: Vec<(PathBuf, Program)> = Vec::new();
    // Plant: one int3 per distinct address.
    let mut traps: Vec<Trap> = Vec::new();
    for (i, p) in plan.points.iter().enumerate() {
        let (module_path, module) = match &p.module {
            None => (path.clone(), &program),
            Some(lib) => {
                if !libraries.iter().any(|(q, _)| q == lib) {
                    libraries.push((lib.clone(), Program::open(lib)?));
                }
                (lib.to_string_lossy().into_owned(), &libraries.iter().find(|(q, _)| q == lib).expect("opened above").1)
            }
        };
        let addr = kansoku_binary::maps::runtime_address(&modules, module, &module_path, p.vaddr).ok_or_else(|| ProbeError::MarkerNotMapped {
            marker: p.point.name.clone(),
            program: PathBuf::from(&module_path),
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
    let mut stops = crate::stops::Stops::default();
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
                    progress(Progress::Count(hits.len() as u64));
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
            // the program stopped itself: said, held until SIGCONT
            WaitStatus::Stopped(tid, sig) if stops.group_stop(pid, tid, sig, &mut |signal| progress(Progress::Stopped { signal })) => resume = Some((tid, None)),
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
    let clock_resolution_ns = clock_step(monotonic_ns);
    Ok(EventOutcome { plan, mechanism: Mechanism::Trap, hits, analysed: None, measured_ns, exit, interrupted, lost: 0, notes: Vec::new(), off_cpu: Vec::new(), clock_resolution_ns, broken: Vec::new() })
}

#[cfg(test)]
mod library_tests {
    use super::*;

    #[test]
    fn libraries_are_named_as_users_name_them() {
        for lib in ["libz.so.1", "libz", "z", "libz.so"] {
            assert!(library_matches("libz.so.1", lib), "{lib}");
        }
        assert!(library_matches("libc.so.6", "libc") && library_matches("libc.so.6", "c"));
        assert!(!library_matches("libzstd.so.1", "libz") && !library_matches("libz.so.1", "zstd"));
        assert_eq!(split_library("malloc@libc"), ("malloc", Some("libc")));
        assert_eq!(split_library("malloc"), ("malloc", None));
        assert_eq!(split_library("@libc"), ("@libc", None));
    }
}

#[cfg(test)]
mod clock_tests {
    use super::clock_step;
    use std::cell::Cell;

    /// A clock whose true time moves by a varying 30–90 units a read, shown in steps of
    /// `step` (0: as it is).
    fn fake_clock(step: f64) -> impl Fn() -> u64 {
        let (t, seed) = (Cell::new(1000.0f64), Cell::new(0x9E37_79B9u32));
        move || {
            let s = seed.get().wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
            seed.set(s);
            t.set(t.get() + 30.0 + (s >> 8) as f64 / (1u32 << 24) as f64 * 60.0);
            if step > 0.0 {
                ((t.get() / step).floor() * step).round() as u64
            } else {
                t.get() as u64
            }
        }
    }

    #[test]
    fn a_stepping_clock_is_told_from_a_continuous_one() {
        let step = clock_step(fake_clock(24.45));
        assert!((step - 24.45).abs() < 0.5, "{step}");
        assert_eq!(clock_step(fake_clock(0.0)), 0.0);
        // This machine's own clock: whatever it is, a step is a few ns at most.
        assert!(clock_step(super::monotonic_ns) < 100.0);
    }
}
