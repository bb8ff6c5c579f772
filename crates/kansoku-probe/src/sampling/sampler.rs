//! Recording instruction-pointer samples of a program, with marker hits, into a `.ksk`.
//!
//! The program is forked and waits on a pipe until the perf events are open on it; they
//! are enabled by the kernel at its `exec` (`enable_on_exec`), so nothing of kansoku's
//! own start-up is sampled and the program is never stopped by another process.
//! Marker hits come from kansoku's in-process agent (an entry probe of tens of
//! nanoseconds, stamped with CLOCK_MONOTONIC, perf's clock) or from a uprobe in the same
//! perf group (microseconds, and the kernel's single-step slot shows up in the samples).
//! Agent hits and samples come from two streams: both are drained every few milliseconds
//! and written in time order up to a mark both have passed. Samples that land in probe
//! code (the agent's library or trampolines, the kernel's `[uprobes]` slot) are not the
//! program's: they are dropped and counted. Only the main thread is sampled (perf cannot combine inheritance
//! to new threads with per-sample counter reads).

use std::io::Write;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use nix::sys::wait::waitpid;
use nix::unistd::Pid;

use kansoku_binary::Program;
use kansoku_core::agent_abi::plan_line;
use kansoku_core::{Event, ExitStatus, Header, Module, RecordingKind, RecordingWriter, Sample};

use crate::agent::AgentSession;
use crate::perf::{PerfRecord, SampleSource, SamplingClock, Session, SessionOptions, UprobeSpec};
use crate::spawn::{poll_child, resolve_program, ChildState, ExecGate};
use crate::ProbeError;

/// cpu-clock period used when instruction sampling was asked for but no counter exists.
pub(crate) const FALLBACK_TIME_PERIOD_NS: u64 = 10_000;

/// The sampling clock: every `time_period` ns of CPU time if given; else every `period`
/// instructions (100,003 by default) where a hardware counter exists, else cpu-clock every
/// [`FALLBACK_TIME_PERIOD_NS`], with the reason for the fallback.
pub fn choose_clock(period: Option<u64>, time_period: Option<u64>) -> (SamplingClock, Option<String>) {
    if let Some(ns) = time_period {
        return (SamplingClock::CpuClock { period_ns: ns }, None);
    }
    match crate::perf::hardware_counters() {
        Ok(()) => (SamplingClock::Instructions { period: period.unwrap_or(100_003) }, None),
        Err(why) => (
            SamplingClock::CpuClock { period_ns: FALLBACK_TIME_PERIOD_NS },
            Some(format!("{why}; sampling cpu-clock every {FALLBACK_TIME_PERIOD_NS} ns instead (time sampling: the trace will be execution-time-weighted, and samples carry no instruction counts)")),
        ),
    }
}

/// The recording's header for samples of `program args` on `clock`, with the marker as
/// given, as symbolised (function and module) and what takes its hits — the parameters
/// `kansoku reconstruct` reads back.
pub fn recording_header(program: &std::path::Path, args: &[String], clock: SamplingClock, marker: Option<&str>, by_agent: bool) -> Result<Header, ProbeError> {
    let header = Header::new(RecordingKind::Samples, program.to_string_lossy(), args.to_vec());
    let mut header = match clock {
        SamplingClock::Instructions { period } => header.with_parameter("clock", "instructions").with_parameter("period", period),
        SamplingClock::CpuClock { period_ns } => header.with_parameter("clock", "cpu-clock").with_parameter("time_period_ns", period_ns),
    };
    if let Some(m) = marker {
        // `F`, `F@LIB` or `F@plt`; the header names the function samples will carry
        let (site, _) = crate::marker::resolve(&resolve_program(program)?, m)?;
        header = header
            .with_parameter("marker", m)
            .with_parameter("marker_function", site.function.as_str())
            .with_parameter("marker_module", site.module.to_string_lossy().as_ref())
            .with_parameter("marker_by", if by_agent { "agent" } else { "uprobe" });
    }
    Ok(header)
}

/// What to record.
#[derive(Clone, Debug)]
pub struct SampleRecordingOptions {
    /// The program to run (a name without `/` is looked up in `PATH`).
    pub program: PathBuf,
    /// Its arguments, without the program name.
    pub args: Vec<String>,
    /// What the sampling event counts and its period.
    pub clock: SamplingClock,
    /// Record entries of this function of the main program as marker hits.
    pub marker: Option<String>,
    /// Take marker hits from the agent (else from a uprobe).
    pub marker_by_agent: bool,
    /// Also count retired instructions (hardware counter) with `cpu-clock` sampling.
    pub count_instructions: bool,
}

/// What came out of a recording.
#[derive(Clone, Debug)]
pub struct SampleRecordingOutcome {
    /// The program that ran, its path resolved.
    pub program: PathBuf,
    /// Samples written to the recording (those in probe code not counted).
    pub samples: u64,
    /// Marker hits written to the recording.
    pub markers: u64,
    /// Records the kernel dropped because kansoku did not drain the buffer fast enough.
    pub lost: u64,
    /// Samples that landed in probe code (the agent's library or trampolines, the kernel's
    /// `[uprobes]` slot; with the agent, the dynamic linker's `__tls_get_addr` it calls),
    /// dropped.
    pub in_probe: u64,
    /// How the program ended.
    pub exit: ExitStatus,
    /// Wall time from the program's exec to the end of the recording.
    pub elapsed: Duration,
}

/// What [`record_samples`] tells its caller while the program runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RecordProgress {
    /// Samples written so far.
    Samples(u64),
    /// The program is stopped by this signal (it stopped itself, or a job-control stop):
    /// nothing happens until it gets a SIGCONT.
    Stopped {
        /// The stopping signal's number (SIGSTOP, SIGTSTP, ...).
        signal: i32,
    },
}

/// Runs the program to its end, sampling it, and streams modules, samples and marker hits
/// into `out`. `progress` hears how many samples there are so far, and when the program is
/// stopped.
pub fn record_samples<W: Write>(
    options: &SampleRecordingOptions,
    out: &mut RecordingWriter<W>,
    progress: &mut dyn FnMut(RecordProgress),
) -> Result<SampleRecordingOutcome, ProbeError> {
    let program_path = resolve_program(&options.program)?;
    let mut uprobes = Vec::new();
    let mut agent = None;
    if let Some(marker) = &options.marker {
        // `F`, `F@LIB` or `F@plt`, in the program or a library it loads (crate::marker)
        let (site, file) = crate::marker::resolve(&program_path, marker)?;
        if options.marker_by_agent {
            let path = std::fs::canonicalize(&site.module).unwrap_or_else(|_| site.module.clone());
            let text = plan_line(0, None, Some(&path.to_string_lossy()), site.vaddr, site.size, false, marker);
            // TSC stamps where the TSC is invariant (the stub reads the counter itself):
            // a CLOCK_MONOTONIC stamp is a vDSO call per hit, which on a tight loop took
            // most of the kept samples (issue 42). Converted to perf's clock in `take`.
            agent = Some(AgentSession::new(&program_path, &text, false)?);
        } else {
            let file_offset = file.file_offset_of_vaddr(site.vaddr).ok_or_else(|| ProbeError::MarkerNotMapped {
                marker: marker.clone(),
                program: site.module.clone(),
            })?;
            uprobes.push(UprobeSpec { path: site.module.clone(), file_offset, is_return: false });
        }
    }
    let env = agent.as_ref().map(|a| a.env.clone()).unwrap_or_default();
    let gate = ExecGate::spawn_with_env(&program_path, &options.args, &env)?;
    let session_options = SessionOptions {
        clock: options.clock,
        uprobes,
        count_instructions: options.count_instructions,
        ..SessionOptions::default()
    };
    let mut session = match Session::open(gate.pid.as_raw(), &session_options) {
        Ok(s) => s,
        Err(e) => {
            let pid = gate.pid;
            drop(gate); // closing the pipe ends the child without running the program
            let _ = waitpid(pid, None);
            return Err(ProbeError::Perf(e));
        }
    };
    let start = Instant::now();
    let pid = gate.open();
    let mut writer = SampleWriter {
        out,
        modules: Vec::new(),
        t0: None,
        samples: 0,
        markers: 0,
        in_probe: 0,
        pid,
        pending: Vec::new(),
        kansoku_code: Vec::new(),
        clock_anchor: crate::points::clock::clock_pair(),
        linker: None,
        with_agent: agent.is_some(),
        agent_library: agent.as_ref().map(|a| a.library.clone()),
    };
    let mut interrupted = false;
    let exit = loop {
        session.wait(if agent.is_some() { 1 } else { 50 });
        writer.take(&mut session, agent.as_mut(), false)?;
        match poll_child(pid, &mut interrupted)? {
            ChildState::Ended(exit) => break exit,
            ChildState::Stopped(signal) => progress(RecordProgress::Stopped { signal }),
            ChildState::Running => progress(RecordProgress::Samples(writer.samples)),
        }
    };
    writer.take(&mut session, agent.as_mut(), true)?;
    if let ExitStatus::Exited(127) = exit {
        if writer.samples == 0 {
            return Err(ProbeError::Spawn { program: program_path, reason: "exec failed (is it a program for this machine?)".into() });
        }
    }
    if let Some(a) = &agent {
        if !a.loaded() {
            return Err(ProbeError::Agent { reason: format!("{} ran without loading the agent (LD_PRELOAD not honoured); record with --marker-by uprobe", program_path.display()) });
        }
    }
    writer.out.write(&Event::Exit(exit))?;
    let lost = session.lost + agent.as_ref().map_or(0, |a| a.control().lost.load(std::sync::atomic::Ordering::Relaxed));
    Ok(SampleRecordingOutcome { program: program_path, samples: writer.samples, markers: writer.markers, lost, in_probe: writer.in_probe, exit, elapsed: start.elapsed() })
}

/// Turns perf records and agent hits into recording events, making sure each sample's
/// module is recorded before the sample and that events go out in time order.
struct SampleWriter<'a, W: Write> {
    out: &'a mut RecordingWriter<W>,
    modules: Vec<Module>,
    t0: Option<u64>,
    samples: u64,
    markers: u64,
    in_probe: u64,
    pid: Pid,
    /// Events not yet written: (CLOCK_MONOTONIC ns, event with absolute time).
    pending: Vec<(u64, Event)>,
    /// Address ranges of probe code (the agent's library and trampolines, `[uprobes]`).
    kansoku_code: Vec<(u64, u64)>,
    /// Where the agent's TSC stamps meet the samples' clock (CLOCK_MONOTONIC): first a
    /// (TSC, ns) pair read as the program starts, then the last hit converted. Each drain
    /// converts its hits on the line from here to a pair read then, so the conversion is
    /// continuous and marker times never go back between drains. (perf converts TSC with
    /// the mmap page's time_zero/time_mult/time_shift, but only where the kernel offers
    /// them — `cap_user_time_zero`, a native sched_clock; on a kvm-clock guest such as this
    /// session's VM the page holds zeros: measured with a cpu-clock event's page.)
    clock_anchor: (u64, u64),
    /// The dynamic linker as mapped, and read: with the agent, its `__tls_get_addr` is how
    /// the agent reaches its thread-local state on every hit (a cdylib's TLS is
    /// general-dynamic), so samples there are the agent's: dropped with the probe's code.
    /// Without call chains they cannot be told from the program's own dynamic-TLS reads,
    /// which the count then includes.
    linker: Option<(Module, Program)>,
    with_agent: bool,
    /// The agent's library file, whose mapping is probe code.
    agent_library: Option<crate::agent::AgentLibrary>,
}

/// Events younger than this stay pending: the other stream may still deliver older ones.
const MERGE_SLACK_NS: u64 = 2_000_000;

impl<W: Write> SampleWriter<'_, W> {
    fn take(&mut self, session: &mut Session, agent: Option<&mut AgentSession>, last: bool) -> Result<(), ProbeError> {
        let mark = crate::points::clock::clock_pair().1.saturating_sub(MERGE_SLACK_NS);
        let mut records = Vec::new();
        session.drain(&mut |r| records.push(r));
        if let Some(agent) = agent {
            let mut hits = Vec::new();
            let base = crate::points::clock::TimeBase::new(agent.tsc, self.clock_anchor, crate::points::clock::clock_pair());
            agent.drain(&mut hits, &mut 0, last);
            for h in hits {
                let time_ns = base.ns(h.time_ns);
                if agent.tsc && h.time_ns > self.clock_anchor.0 {
                    self.clock_anchor = (h.time_ns, time_ns);
                }
                self.pending.push((time_ns, Event::Marker { time_ns, instructions: None }));
            }
            if self.kansoku_code.len() < 2 {
                self.kansoku_code.extend(agent.trampolines());
            }
        }
        for r in records {
            match r {
                PerfRecord::Mmap(m) if m.executable && !m.path.is_empty() => {
                    // the agent's library by the file preloaded, not by its name
                    if self.agent_library.as_ref().is_some_and(|a| a.is(&m.path, m.file)) {
                        self.kansoku_code.push((m.start, m.start + m.len));
                    }
                    let module = Module {
                        build_id: if m.path.starts_with('/') { Program::open(&m.path).ok().and_then(|p| p.build_id) } else { None },
                        path: m.path,
                        start: m.start,
                        end: m.start + m.len,
                        file_offset: m.file_offset,
                    };
                    self.add_module(module)?;
                }
                PerfRecord::Sample(s) => match s.source {
                    SampleSource::Clock => self.pending.push((s.time_ns, Event::Sample(Sample { time_ns: s.time_ns, ip: s.ip, instructions: s.instructions }))),
                    SampleSource::Uprobe(_) => self.pending.push((s.time_ns, Event::Marker { time_ns: s.time_ns, instructions: s.instructions })),
                },
                _ => {}
            }
        }
        // stable: a marker and a sample at the same nanosecond keep their arrival order
        self.pending.sort_by_key(|(t, _)| *t);
        let ready = if last { self.pending.len() } else { self.pending.partition_point(|(t, _)| *t < mark) };
        let batch: Vec<(u64, Event)> = self.pending.drain(..ready).collect();
        for (time, event) in batch {
            let t0 = *self.t0.get_or_insert(time);
            let time_ns = time.saturating_sub(t0);
            match event {
                Event::Sample(s) => {
                    if !self.modules.iter().any(|m| m.contains(s.ip)) {
                        self.refresh_from_proc()?;
                    }
                    if self.kansoku_code.iter().any(|&(a, b)| s.ip >= a && s.ip < b) || self.in_agent_tls(s.ip) {
                        self.in_probe += 1;
                        continue;
                    }
                    self.out.write(&Event::Sample(Sample { time_ns, ..s }))?;
                    self.samples += 1;
                }
                Event::Marker { instructions, .. } => {
                    self.out.write(&Event::Marker { time_ns, instructions })?;
                    self.markers += 1;
                }
                _ => {}
            }
        }
        Ok(())
    }

    fn add_module(&mut self, module: Module) -> Result<(), ProbeError> {
        // the kernel's out-of-line single-step slot of uprobes: probe code, not the program's
        if module.path == "[uprobes]" && !self.kansoku_code.contains(&(module.start, module.end)) {
            self.kansoku_code.push((module.start, module.end));
        }
        let linker = std::path::Path::new(&module.path).file_name().is_some_and(|n| n.to_string_lossy().starts_with("ld-linux"));
        if self.with_agent && linker && self.linker.is_none() {
            self.linker = Program::open(&module.path).ok().map(|p| (module.clone(), p));
        }
        if !self.modules.iter().any(|k| k.start == module.start && k.path == module.path) {
            self.out.write(&Event::Module(module.clone()))?;
            self.modules.push(module);
        }
        Ok(())
    }

    /// Whether `ip` lies in the dynamic linker's TLS lookup (`__tls_get_addr`, its slow
    /// path, `update_get_addr`), which the agent calls on every hit.
    fn in_agent_tls(&self, ip: u64) -> bool {
        let Some((module, program)) = &self.linker else { return false };
        let Some(vaddr) = kansoku_binary::maps::link_address(module, program, ip) else { return false };
        program.function_at(vaddr).is_some_and(|f| f.name.starts_with("__tls_get_addr") || f.name == "update_get_addr")
    }

    /// Mappings made before the events were enabled (none normally) come from /proc.
    fn refresh_from_proc(&mut self) -> Result<(), ProbeError> {
        if let Ok(mods) = crate::procfs::ModuleReader::default().code_modules(self.pid.as_raw()) {
            for m in mods {
                self.add_module(m)?;
            }
        }
        Ok(())
    }
}
