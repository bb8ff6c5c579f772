//! Seed 001's program waveform: the address of the next instruction and the data
//! addresses it will reference, observed very often.
//!
//! * **Sampled** ([`WaveMode::Sampled`]): perf `cpu-clock` samples of the program with its
//!   user registers (`PERF_SAMPLE_REGS_USER`). The sampled IP is the instruction about to
//!   run and the registers are its inputs, so decoding it and evaluating its memory
//!   operands (base + index·scale + displacement, segment bases, implicit stack accesses of
//!   push/pop/call/ret, through iced-x86's used-memory list) gives exactly the data
//!   addresses it references — the seed combined "the next instruction" with its index,
//!   address and relocation registers the same way.
//! * **Exact** ([`WaveMode::Exact`]): every instruction from the first entry of a marker
//!   function, on one of the exact engines: kansoku's Valgrind tool with `--data=yes` (each
//!   memory access's address as the tool sees it, at emulator speed), or ptrace
//!   single-stepping with its registers (decoded as in sampled mode).
//!
//! Only one thread is observed: the main thread, or on the Valgrind engine the thread that
//! first enters the marker. The memory map is read while the program runs (and
//! at the end, in exact mode) to label heap, stack and file mappings.

use std::collections::HashMap;
use std::path::PathBuf;
use std::time::Instant;

use iced_x86::{InstructionInfoFactory, Register};
use nix::errno::Errno;
use nix::sys::ptrace::{self, Options};
use nix::sys::signal::Signal;
use nix::sys::wait::{waitpid, WaitStatus};

use kansoku_binary::maps::Mapping;
use kansoku_binary::Symbolizer;
use kansoku_core::{ExitStatus, Module};
use kansoku_monitor::wave::WavePoint;

use crate::perf::{self, PerfRecord, SampleSource, SamplingClock, Session, SessionOptions, X86_REGS_ALL};
use crate::spawn::{poll_child, resolve_program, ChildState, ExecGate};
use crate::tracee::{RunTo, Tracee};
use crate::{interrupt, ProbeError};

/// How the waveform is observed.
#[derive(Clone, Debug)]
pub enum WaveMode {
    /// cpu-clock samples every `period_ns` of the program's CPU time.
    Sampled {
        /// Sampling period in nanoseconds of the program's CPU time.
        period_ns: u64,
    },
    /// Hardware instruction-count samples every `period` instructions (needs a PMU).
    SampledInstructions {
        /// Sampling period in retired instructions.
        period: u64,
    },
    /// Every instruction from the first entry of `marker` (default `main`), at most `max_instructions`.
    Exact {
        /// Function whose first entry starts the trace (`F`, `F@LIB`, `F@plt`); `None` means `main`.
        marker: Option<String>,
        /// Most instructions traced; the trace stops there.
        max_instructions: u64,
    },
}

/// What `record_wave` runs and how it observes it.
#[derive(Clone, Debug)]
pub struct WaveOptions {
    /// The program to run (a name without `/` is looked up in `PATH`).
    pub program: PathBuf,
    /// Its arguments, without the program name.
    pub args: Vec<String>,
    /// Sampled or exact, and with which period or limit.
    pub mode: WaveMode,
    /// The engine of exact mode.
    pub engine: crate::Engine,
}

pub use kansoku_monitor::wave_report::WaveOutcome;

/// Turns sampled instructions into data addresses: decodes through the symbolizer's
/// programs (cached per address) and evaluates memory operands with the given registers.
struct DataAddresses {
    symbolizer: Symbolizer,
    cache: HashMap<u64, Option<iced_x86::Instruction>>,
    factory: InstructionInfoFactory,
}

impl DataAddresses {
    fn new(modules: &[Module]) -> Self {
        DataAddresses { symbolizer: Symbolizer::new(modules), cache: HashMap::new(), factory: InstructionInfoFactory::new() }
    }

    fn instruction(&mut self, ip: u64) -> Option<iced_x86::Instruction> {
        if let Some(i) = self.cache.get(&ip) {
            return *i;
        }
        let decoded = (|| {
            let r = self.symbolizer.resolve(ip)?;
            let program = self.symbolizer.program(r.module)?;
            let bytes = program.code_at(r.link_address)?;
            // Decode at the runtime address, so RIP-relative operands come out absolute.
            kansoku_binary::decode::decode_one(bytes, ip).map(|d| d.raw)
        })();
        self.cache.insert(ip, decoded);
        decoded
    }

    fn function(&mut self, ip: u64) -> Option<String> {
        self.symbolizer.resolve(ip).and_then(|r| r.function.map(|f| f.name.clone()))
    }

    /// The data addresses the instruction at `ip` references, given `reg` (a 64-bit
    /// register's value; segment bases for FS/GS).
    fn addresses(&mut self, ip: u64, reg: &dyn Fn(Register) -> Option<u64>) -> Option<Vec<u64>> {
        let instr = self.instruction(ip)?;
        let info = self.factory.info(&instr);
        let mut out = Vec::new();
        for m in info.used_memory() {
            let v = m.virtual_address(0, |r, _, _| match r {
                Register::CS | Register::DS | Register::ES | Register::SS => Some(0),
                r if r.is_gpr64() || r == Register::RIP || r == Register::FS || r == Register::GS => reg(r),
                r if r.is_gpr32() => reg(r.full_register()).map(|v| v & 0xffff_ffff),
                _ => None,
            });
            if let Some(a) = v {
                if !out.contains(&a) {
                    out.push(a);
                }
            }
        }
        Some(out)
    }
}

fn perf_reg(r: Register) -> Option<u32> {
    use perf::regs::*;
    Some(match r {
        Register::RAX => AX,
        Register::RBX => BX,
        Register::RCX => CX,
        Register::RDX => DX,
        Register::RSI => SI,
        Register::RDI => DI,
        Register::RBP => BP,
        Register::RSP => SP,
        Register::RIP => IP,
        r if (Register::R8 as u32..=Register::R15 as u32).contains(&(r as u32)) => R8 + (r as u32 - Register::R8 as u32),
        _ => return None,
    })
}

fn ptrace_reg(regs: &libc::user_regs_struct, r: Register) -> Option<u64> {
    Some(match r {
        Register::RAX => regs.rax,
        Register::RBX => regs.rbx,
        Register::RCX => regs.rcx,
        Register::RDX => regs.rdx,
        Register::RSI => regs.rsi,
        Register::RDI => regs.rdi,
        Register::RBP => regs.rbp,
        Register::RSP => regs.rsp,
        Register::RIP => regs.rip,
        Register::R8 => regs.r8,
        Register::R9 => regs.r9,
        Register::R10 => regs.r10,
        Register::R11 => regs.r11,
        Register::R12 => regs.r12,
        Register::R13 => regs.r13,
        Register::R14 => regs.r14,
        Register::R15 => regs.r15,
        Register::FS => regs.fs_base,
        Register::GS => regs.gs_base,
        _ => return None,
    })
}

/// Runs the program and observes its waveform.
pub fn record_wave(options: &WaveOptions, progress: &mut dyn FnMut(u64)) -> Result<WaveOutcome, ProbeError> {
    let program = resolve_program(&options.program)?;
    match &options.mode {
        WaveMode::Sampled { period_ns } => sampled(&program, &options.args, SamplingClock::CpuClock { period_ns: *period_ns }, progress),
        WaveMode::SampledInstructions { period } => sampled(&program, &options.args, SamplingClock::Instructions { period: *period }, progress),
        WaveMode::Exact { marker, max_instructions } => {
            let marker = marker.as_deref().unwrap_or("main");
            match options.engine {
                crate::Engine::Ptrace => exact(&program, &options.args, marker, *max_instructions, progress),
                crate::Engine::Valgrind => exact_valgrind(&program, &options.args, marker, *max_instructions, progress),
            }
        }
    }
}

/// The waveform's points from an exact trace on kansoku's Valgrind tool: one per
/// instruction of the first thread that runs after the marker, with its memory accesses.
#[derive(Default)]
struct WaveSink {
    points: Vec<WavePoint>,
    modules: Vec<Module>,
    /// The observed thread, and the one running now.
    observed: Option<u32>,
    running: u32,
    /// Valgrind's process (the program's address space is its own): its memory map.
    pid: Option<i32>,
    maps: Vec<Mapping>,
}

impl crate::exact_valgrind::ExactSink for WaveSink {
    fn module(&mut self, module: &Module) -> Result<(), ProbeError> {
        self.modules.push(module.clone());
        Ok(())
    }
    fn thread(&mut self, tid: u32) -> Result<(), ProbeError> {
        self.running = tid;
        Ok(())
    }
    fn block(&mut self, start: u64, shape: &crate::exact_valgrind::Shape, from: usize, to: usize, accesses: &[crate::exact_valgrind::Access]) -> Result<(), ProbeError> {
        if *self.observed.get_or_insert(self.running) != self.running {
            return Ok(());
        }
        let lengths = &shape.lengths[..];
        let mut code = start + lengths[..from].iter().map(|&l| u64::from(l)).sum::<u64>();
        // accesses come in execution order, so instruction by instruction
        let mut next = accesses.iter().position(|&(k, _, _)| k as usize >= from).unwrap_or(accesses.len());
        for (i, &len) in lengths.iter().enumerate().take(to).skip(from) {
            let mut data = Vec::new();
            while let Some(&(_, addr, _)) = accesses.get(next).filter(|&&(k, _, _)| k as usize == i) {
                data.push(addr);
                next += 1;
            }
            let n = self.points.len() as u64;
            self.points.push(WavePoint { time_ns: 0, instructions: Some(n), code, data });
            code += u64::from(len);
            if self.points.len().is_multiple_of(1 << 20) {
                self.read_maps();
            }
        }
        Ok(())
    }
    fn marker(&mut self, _: u64, _: u64) -> Result<(), ProbeError> {
        if self.maps.is_empty() {
            self.read_maps();
        }
        Ok(())
    }
    fn signal(&mut self, _: i32) -> Result<(), ProbeError> {
        Ok(())
    }
    fn exit(&mut self, _: ExitStatus) -> Result<(), ProbeError> {
        self.read_maps();
        Ok(())
    }
    fn process(&mut self, pid: i32) {
        self.pid = Some(pid);
    }
}

impl WaveSink {
    /// The program's mappings in Valgrind's process: without Valgrind's own (its tool
    /// executable, and the address space it reserves, anonymous gigabytes that would make
    /// one region of the whole picture).
    fn read_maps(&mut self) {
        let Some(m) = self.pid.and_then(|pid| crate::procfs::read_maps(pid).ok()).filter(|m| !m.is_empty()) else { return };
        self.maps = m
            .into_iter()
            .filter(|m| {
                let reserved = m.path.is_empty() && m.end - m.start >= 1 << 30;
                !(reserved || m.path.contains("/valgrind/"))
            })
            .collect();
    }
}

fn exact_valgrind(program: &std::path::Path, args: &[String], marker: &str, max: u64, progress: &mut dyn FnMut(u64)) -> Result<WaveOutcome, ProbeError> {
    let options = crate::ExactTraceOptions {
        engine: crate::Engine::Valgrind,
        program: program.to_path_buf(),
        args: args.to_vec(),
        marker: Some(marker.to_string()),
        iterations: None,
        max_instructions: Some(max),
        data: true,
    };
    // Room for every point at once: growing by doubling copies gigabytes at 10 M points.
    let mut sink = WaveSink { points: Vec::with_capacity(max.min(50_000_000) as usize), ..WaveSink::default() };
    let outcome = crate::exact_valgrind::run_transcribed(&options, true, false, &mut sink, progress)?;
    let mut data = DataAddresses::new(&sink.modules);
    let functions = sink.points.iter().map(|p| data.function(p.code)).collect();
    Ok(WaveOutcome {
        program: program.to_path_buf(),
        points: sink.points,
        functions,
        modules: sink.modules,
        maps: sink.maps,
        exit: (outcome.exit != ExitStatus::Detached).then_some(outcome.exit),
        interrupted: outcome.stop == crate::StopReason::Interrupted,
        lost: 0,
        undecoded: 0,
        clock: format!("every instruction from the first entry of {marker} (kansoku's Valgrind tool)"),
    })
}

fn sampled(program: &std::path::Path, args: &[String], clock: SamplingClock, progress: &mut dyn FnMut(u64)) -> Result<WaveOutcome, ProbeError> {
    let count_instructions = perf::hardware_counters().is_ok();
    let gate = ExecGate::spawn(program, args)?;
    let o = SessionOptions { clock, user_regs: X86_REGS_ALL, count_instructions, buffer_pages: 1024, enable_on_exec: true, ..SessionOptions::default() };
    let mut session = match Session::open(gate.pid.as_raw(), &o) {
        Ok(s) => s,
        Err(e) => {
            let pid = gate.pid;
            drop(gate);
            let _ = waitpid(pid, None);
            return Err(ProbeError::Perf(e));
        }
    };
    let pid = gate.open();
    let mut raw = Vec::new();
    let mut modules: Vec<Module> = Vec::new();
    let mut maps = Vec::new();
    let mut interrupted = false;
    let take = |session: &mut Session, raw: &mut Vec<perf::PerfSample>, modules: &mut Vec<Module>| {
        session.drain(&mut |r| match r {
            PerfRecord::Sample(s) if s.source == SampleSource::Clock && s.pid == pid.as_raw() as u32 && s.tid == pid.as_raw() as u32 => raw.push(s),
            PerfRecord::Mmap(m) if m.executable && !m.path.is_empty()
                && !modules.iter().any(|k| k.start == m.start && k.path == m.path) => {
                    modules.push(Module { path: m.path, build_id: None, start: m.start, end: m.start + m.len, file_offset: m.file_offset });
                }
            _ => {}
        });
    };
    let exit = loop {
        session.wait(20);
        take(&mut session, &mut raw, &mut modules);
        progress(raw.len() as u64);
        if let Ok(m) = crate::procfs::read_maps(pid.as_raw()) {
            if !m.is_empty() {
                maps = m;
            }
        }
        match poll_child(pid, &mut interrupted)? {
            ChildState::Ended(exit) => break exit,
            ChildState::Stopped(signal) => crate::stops::tell(signal),
            ChildState::Running => {}
        }
    };
    take(&mut session, &mut raw, &mut modules);
    if exit == ExitStatus::Exited(127) && raw.is_empty() {
        return Err(ProbeError::Spawn { program: program.to_path_buf(), reason: "exec failed (is it a program for this machine?)".into() });
    }
    // Modules from the memory map too (mappings made before exec-enable are not in the ring).
    for m in kansoku_binary::maps::code_modules(&maps, |_| None) {
        if !modules.iter().any(|k| k.start == m.start && k.path == m.path) {
            modules.push(m);
        }
    }
    let mut data = DataAddresses::new(&modules);
    let t0 = raw.first().map_or(0, |s| s.time_ns);
    let mut points = Vec::with_capacity(raw.len());
    let mut functions = Vec::with_capacity(raw.len());
    let mut undecoded = 0;
    for s in &raw {
        let regs = s.regs.clone().unwrap_or_default();
        let addrs = data.addresses(s.ip, &|r| perf_reg(r).and_then(|p| perf::register(&regs, X86_REGS_ALL, p)));
        if addrs.is_none() {
            undecoded += 1;
        }
        functions.push(data.function(s.ip));
        points.push(WavePoint { time_ns: s.time_ns - t0, instructions: s.instructions, code: s.ip, data: addrs.unwrap_or_default() });
    }
    Ok(WaveOutcome {
        program: program.to_path_buf(),
        points,
        functions,
        modules,
        maps,
        exit: Some(exit),
        interrupted,
        lost: session.lost,
        undecoded,
        clock: format!("{clock}{}", if count_instructions { " (with instruction counts)" } else { " (no hardware counter: no instruction counts)" }),
    })
}

fn exact(program_path: &std::path::Path, args: &[String], marker: &str, max: u64, progress: &mut dyn FnMut(u64)) -> Result<WaveOutcome, ProbeError> {
    // `F`, `F@LIB` or `F@plt` (crate::marker)
    let (site, file) = crate::marker::resolve(program_path, marker)?;
    let mut tracee = Tracee::spawn(program_path, args, Options::empty())?;
    let pid = tracee.pid();
    // Run to the marker (one-shot int3), through the entry point when it is in a library
    // (mapped by then); a Ctrl-C on the way is passed on to the program
    let reached = (|| {
        if site.in_library {
            if let RunTo::Ended(exit) = tracee.run_to_entry(program_path)? {
                return Ok((RunTo::Ended(exit), Vec::new()));
            }
        }
        let modules = crate::procfs::ModuleReader::default().code_modules(pid.as_raw())?;
        let addr = site
            .runtime_address(&modules, &file)
            .ok_or_else(|| ProbeError::MarkerNotMapped { marker: marker.into(), program: program_path.to_path_buf() })?;
        Ok((tracee.run_to(addr)?, modules))
    })();
    let modules = match reached {
        Ok((RunTo::Reached { .. }, modules)) => modules,
        Ok((RunTo::Ended(exit), modules)) => {
            let mut outcome = empty_outcome(program_path, modules, Some(exit));
            outcome.interrupted = interrupt::requested();
            return Ok(outcome);
        }
        Err(e) => {
            tracee.kill();
            return Err(e);
        }
    };
    let mut data = DataAddresses::new(&modules);
    let mut points = Vec::new();
    let mut functions = Vec::new();
    let mut undecoded = 0;
    let mut exit = None;
    let mut interrupted = false;
    let mut maps = crate::procfs::read_maps(pid.as_raw()).unwrap_or_default();
    let start = Instant::now();
    while (points.len() as u64) < max {
        if interrupt::requested() {
            interrupted = true;
            break;
        }
        let regs = ptrace::getregs(pid).map_err(tracee.error("GETREGS", pid))?;
        let addrs = data.addresses(regs.rip, &|r| ptrace_reg(&regs, r));
        if addrs.is_none() {
            undecoded += 1;
        }
        functions.push(data.function(regs.rip));
        points.push(WavePoint {
            time_ns: start.elapsed().as_nanos() as u64,
            instructions: Some(points.len() as u64),
            code: regs.rip,
            data: addrs.unwrap_or_default(),
        });
        if points.len() % 65536 == 0 {
            progress(points.len() as u64);
            if let Ok(m) = crate::procfs::read_maps(pid.as_raw()) {
                maps = m;
            }
        }
        ptrace::step(pid, None).map_err(tracee.error("SINGLESTEP", pid))?;
        match waitpid(pid, None) {
            Ok(WaitStatus::Stopped(_, Signal::SIGTRAP)) => {}
            Ok(WaitStatus::Stopped(_, s)) => {
                // Deliver the program's own signal on the next step; a stopping signal
                // stops it there, said and held until SIGCONT.
                let _ = ptrace::step(pid, Some(s));
                while let Ok(WaitStatus::Stopped(_, s)) = waitpid(pid, None) {
                    if !tracee.program_stopped(pid, s) {
                        break;
                    }
                    let _ = ptrace::step(pid, None);
                }
            }
            Ok(WaitStatus::Exited(_, code)) => {
                exit = Some(ExitStatus::Exited(code));
                break;
            }
            Ok(WaitStatus::Signaled(_, s, _)) => {
                exit = Some(ExitStatus::Killed(s as i32));
                break;
            }
            Ok(_) | Err(Errno::EINTR) => {}
            Err(errno) => return Err(ProbeError::Wait { pid: pid.as_raw(), errno }),
        }
    }
    if exit.is_none() {
        if let Ok(m) = crate::procfs::read_maps(pid.as_raw()) {
            maps = m;
        }
        tracee.kill();
    }
    Ok(WaveOutcome {
        program: program_path.to_path_buf(),
        points,
        functions,
        modules,
        maps,
        exit,
        interrupted,
        lost: 0,
        undecoded,
        clock: format!("single-step from the first entry of {marker}"),
    })
}

fn empty_outcome(program: &std::path::Path, modules: Vec<Module>, exit: Option<ExitStatus>) -> WaveOutcome {
    WaveOutcome {
        program: program.to_path_buf(),
        points: Vec::new(),
        functions: Vec::new(),
        modules,
        maps: Vec::new(),
        exit,
        interrupted: false,
        lost: 0,
        undecoded: 0,
        clock: "single-step (marker never reached)".into(),
    }
}
