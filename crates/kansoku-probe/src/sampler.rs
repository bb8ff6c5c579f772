//! Recording instruction-pointer samples of a program, with marker hits, into a `.ksk`.
//!
//! The program is forked and waits on a pipe until the perf events are open on it; they
//! are enabled by the kernel at its `exec` (`enable_on_exec`), so nothing of kansoku's
//! own start-up is sampled and the program is never stopped by another process.
//! Marker hits come from a uprobe in the same perf group, so samples and hits arrive in
//! one time-ordered stream. Only the main thread is sampled (perf cannot combine
//! inheritance to new threads with per-sample counter reads).

use std::io::Write;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use nix::sys::wait::waitpid;
use nix::unistd::Pid;

use kansoku_binary::Program;
use kansoku_core::{Event, ExitStatus, Module, RecordingWriter, Sample};

use crate::perf::{PerfRecord, SampleSource, SamplingClock, Session, SessionOptions, UprobeSpec};
use crate::spawn::{poll_child, resolve_program, ChildState, ExecGate};
use crate::ProbeError;

/// What to record.
#[derive(Clone, Debug)]
pub struct SampleRecordingOptions {
    pub program: PathBuf,
    pub args: Vec<String>,
    pub clock: SamplingClock,
    /// Record entries of this function of the main program as marker hits.
    pub marker: Option<String>,
    /// Also count retired instructions (hardware counter) with `cpu-clock` sampling.
    pub count_instructions: bool,
}

/// What came out of a recording.
#[derive(Clone, Debug)]
pub struct SampleRecordingOutcome {
    pub program: PathBuf,
    pub samples: u64,
    pub markers: u64,
    /// Records the kernel dropped because kansoku did not drain the buffer fast enough.
    pub lost: u64,
    pub exit: ExitStatus,
    pub elapsed: Duration,
}

/// What [`record_samples`] tells its caller while the program runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RecordProgress {
    /// Samples written so far.
    Samples(u64),
    /// The program is stopped by this signal (it stopped itself, or a job-control stop):
    /// nothing happens until it gets a SIGCONT.
    Stopped { signal: i32 },
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
    if let Some(marker) = &options.marker {
        let program = Program::open(&program_path)?;
        let f = program.function_named(marker)?;
        let file_offset = program.file_offset_of_vaddr(f.address).ok_or_else(|| ProbeError::MarkerNotMapped {
            marker: marker.clone(),
            program: program_path.clone(),
        })?;
        uprobes.push(UprobeSpec { path: program_path.clone(), file_offset, is_return: false });
    }
    let gate = ExecGate::spawn(&program_path, &options.args)?;
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
    let mut writer = SampleWriter { out, modules: Vec::new(), t0: None, samples: 0, markers: 0, pid };
    let mut interrupted = false;
    let exit = loop {
        session.wait(50);
        writer.take(&mut session)?;
        match poll_child(pid, &mut interrupted)? {
            ChildState::Ended(exit) => break exit,
            ChildState::Stopped(signal) => progress(RecordProgress::Stopped { signal }),
            ChildState::Running => progress(RecordProgress::Samples(writer.samples)),
        }
    };
    writer.take(&mut session)?;
    if let ExitStatus::Exited(127) = exit {
        if writer.samples == 0 {
            return Err(ProbeError::Spawn { program: program_path, reason: "exec failed (is it a program for this machine?)".into() });
        }
    }
    writer.out.write(&Event::Exit(exit))?;
    Ok(SampleRecordingOutcome {
        program: program_path,
        samples: writer.samples,
        markers: writer.markers,
        lost: session.lost,
        exit,
        elapsed: start.elapsed(),
    })
}

/// Turns perf records into recording events, making sure each sample's module is
/// recorded before the sample.
struct SampleWriter<'a, W: Write> {
    out: &'a mut RecordingWriter<W>,
    modules: Vec<Module>,
    t0: Option<u64>,
    samples: u64,
    markers: u64,
    pid: Pid,
}

impl<W: Write> SampleWriter<'_, W> {
    fn take(&mut self, session: &mut Session) -> Result<(), ProbeError> {
        let mut records = Vec::new();
        session.drain(&mut |r| records.push(r));
        for r in records {
            match r {
                PerfRecord::Mmap(m) if m.executable && !m.path.is_empty() => {
                    let module = Module {
                        build_id: if m.path.starts_with('/') { Program::open(&m.path).ok().and_then(|p| p.build_id) } else { None },
                        path: m.path,
                        start: m.start,
                        end: m.start + m.len,
                        file_offset: m.file_offset,
                    };
                    self.add_module(module)?;
                }
                PerfRecord::Sample(s) => {
                    let t0 = *self.t0.get_or_insert(s.time_ns);
                    let time_ns = s.time_ns.saturating_sub(t0);
                    match s.source {
                        SampleSource::Clock => {
                            if !self.modules.iter().any(|m| m.contains(s.ip)) {
                                self.refresh_from_proc()?;
                            }
                            self.out.write(&Event::Sample(Sample { time_ns, ip: s.ip, instructions: s.instructions }))?;
                            self.samples += 1;
                        }
                        SampleSource::Uprobe(_) => {
                            self.out.write(&Event::Marker { time_ns, instructions: s.instructions })?;
                            self.markers += 1;
                        }
                    }
                }
                _ => {}
            }
        }
        Ok(())
    }

    fn add_module(&mut self, module: Module) -> Result<(), ProbeError> {
        if !self.modules.iter().any(|k| k.start == module.start && k.path == module.path) {
            self.out.write(&Event::Module(module.clone()))?;
            self.modules.push(module);
        }
        Ok(())
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
