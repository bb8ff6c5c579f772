//! The exact engine on kansoku's Valgrind tool (issue 11): every executed user-space
//! instruction, at emulator speed instead of one ptrace stop per instruction.
//!
//! The tool (`valgrind-tool/kansoku_main.c`, `--exact=yes`) writes each superblock's shape
//! (its instructions' lengths) once, when VEX translates it, then one short record per
//! executed superblock, plus a record where a superblock is left early (a fault, a `rep`
//! instruction whose count is zero), one per delivered signal and, with `--data=yes`, one
//! per memory access. [`Transcriber`] turns that stream into the events a single-stepped
//! trace holds — threads, marker hits, executed instructions, signals, the exit — and hands
//! them to an [`ExactSink`]: a `.ksk` recording (executed blocks written as format-2 block
//! records, about two bytes per block, that every reader expands into instructions), or
//! the waveform's points (`crate::wave`).
//!
//! Differences from the ptrace engine, by construction: Valgrind's virtual CPU announces
//! other CPUID features, so libc's `memcpy`/`strlen` variants chosen at start-up differ, and
//! Valgrind runs the dynamic loader's start-up in its own way; inside a marker window of the
//! program's own code both engines record the same instructions (tests in
//! `tests/exact_valgrind.rs`). A `rep` string instruction appears once per repetition in
//! both. After a marker window or an instruction limit, the program runs on to its end
//! under Valgrind (it cannot be detached from the emulator), its stream read and dropped.

use std::cell::Cell;
use std::io::{Read, Write};
use std::path::PathBuf;
use std::rc::Rc;
use std::time::Instant;

use kansoku_binary::maps::module_from_text;
use kansoku_binary::Program;
use kansoku_core::fxhash::FxHashMap;
use kansoku_core::sbstream::{ExitKind, Item, StreamDecoder};
use kansoku_core::{Event, ExitStatus, Module, RecordingWriter};

use crate::exact::{ExactTraceOptions, StopReason, TraceOutcome};
use crate::spawn::resolve_program;
use crate::valgrind::{spawn_tool_with, LackeyOptions};
use crate::{interrupt, ProbeError};

/// A memory access of a superblock's instruction: (its index, the address, whether it writes).
pub type Access = (u32, u64, bool);

/// A translated superblock: its instructions' lengths, and whether the recording has them.
pub struct Shape {
    /// Length in bytes of each of the superblock's instructions, in order; the first starts
    /// at the superblock's address.
    pub lengths: Box<[u8]>,
    written: Cell<bool>,
}

/// Where the transcribed trace goes.
pub(crate) trait ExactSink {
    /// A code module (an executable mapping of a file) the tool reported.
    fn module(&mut self, module: &Module) -> Result<(), ProbeError>;
    /// The following events belong to this thread.
    fn thread(&mut self, tid: u32) -> Result<(), ProbeError>;
    /// Instructions `from..to` of the superblock at `start` ran; `accesses` are the
    /// (instruction index, address, writes) of its memory accesses, in order (data mode only).
    fn block(&mut self, start: u64, shape: &Shape, from: usize, to: usize, accesses: &[Access]) -> Result<(), ProbeError>;
    /// The marker was entered, after `instructions` recorded instructions.
    fn marker(&mut self, time_ns: u64, instructions: u64) -> Result<(), ProbeError>;
    /// Signal number `signal` was delivered to the current thread.
    fn signal(&mut self, signal: i32) -> Result<(), ProbeError>;
    /// The observation ended (`Detached`: before the program did).
    fn exit(&mut self, exit: ExitStatus) -> Result<(), ProbeError>;
    /// The process the program runs in (Valgrind's: the program's address space is its own).
    fn process(&mut self, _pid: i32) {}
}

/// A `.ksk` recording: executed blocks as block records (a block's shape is written
/// before its first execution), instructions after a marker inside a block one by one.
impl<W: Write> ExactSink for RecordingWriter<W> {
    fn module(&mut self, module: &Module) -> Result<(), ProbeError> {
        Ok(self.write(&Event::Module(module.clone()))?)
    }
    fn thread(&mut self, tid: u32) -> Result<(), ProbeError> {
        Ok(self.write(&Event::Thread { tid })?)
    }
    fn block(&mut self, start: u64, shape: &Shape, from: usize, to: usize, accesses: &[Access]) -> Result<(), ProbeError> {
        let lengths = &shape.lengths[..];
        if from == 0 {
            if !shape.written.get() {
                self.write_shape(start, lengths)?;
                shape.written.set(true);
            }
            let ran: Vec<Access> = accesses.iter().copied().filter(|a| (a.0 as usize) < to).collect();
            if !ran.is_empty() {
                self.write_accesses(&ran)?;
            }
            self.write_run(start, lengths, to)?;
        } else {
            let mut addr = start + lengths[..from].iter().map(|&l| u64::from(l)).sum::<u64>();
            for (i, &len) in lengths.iter().enumerate().take(to).skip(from) {
                let mine: Vec<Access> = accesses.iter().filter(|a| a.0 as usize == i).map(|&(_, a, w)| (0, a, w)).collect();
                if !mine.is_empty() {
                    self.write_accesses(&mine)?;
                }
                self.write(&Event::Instruction { addr })?;
                addr += u64::from(len);
            }
        }
        Ok(())
    }
    fn marker(&mut self, time_ns: u64, instructions: u64) -> Result<(), ProbeError> {
        Ok(self.write(&Event::Marker { time_ns, instructions: Some(instructions) })?)
    }
    fn signal(&mut self, signal: i32) -> Result<(), ProbeError> {
        Ok(self.write(&Event::Signal { signal })?)
    }
    fn exit(&mut self, exit: ExitStatus) -> Result<(), ProbeError> {
        Ok(self.write(&Event::Exit(exit))?)
    }
}

/// The superblock entered last: how many of its instructions ran is known only when the
/// next record says whether it was left early.
struct Pending {
    addr: u64,
    shape: Rc<Shape>,
    count: usize,
}

/// Signals that stop the instruction that raised them (the record's `ip` is that
/// instruction); others arrive between superblocks.
fn synchronous(signal: i32) -> bool {
    matches!(signal, libc::SIGSEGV | libc::SIGBUS | libc::SIGFPE | libc::SIGILL | libc::SIGTRAP)
}

/// Turns the tool's exact-mode stream into an exact trace (see the module documentation).
pub(crate) struct Transcriber<'w, S: ExactSink> {
    out: &'w mut S,
    shapes: FxHashMap<u64, Rc<Shape>>,
    pending: Option<Pending>,
    /// Memory accesses of the pending superblock (data mode).
    accesses: Vec<Access>,
    /// The thread running now (kernel tid), and the last instruction each thread ran
    /// (a `rep` instruction entered again after its last repetition adds nothing).
    tid: u32,
    last_instruction: u64,
    last_by_thread: FxHashMap<u32, u64>,
    /// The thread the recording named last.
    recorded_thread: Option<u32>,
    recording: bool,
    /// The marker's site and the file holding it, until its module arrives; then its runtime address.
    marker_link: Option<(crate::marker::MarkerSite, Program)>,
    marker: Option<u64>,
    iterations: Option<u64>,
    max_instructions: Option<u64>,
    /// Instructions recorded (passed to the sink) so far.
    pub instructions: u64,
    /// Entries of the marker function seen so far.
    pub marker_hits: u64,
    /// Superblocks the stream said ran, recorded or not.
    pub blocks: u64,
    /// Thread ids seen in the stream, in the order first seen.
    pub threads: Vec<u32>,
    /// Signals delivered, in order.
    pub signals: Vec<i32>,
    /// The code modules the tool reported, in order.
    pub modules: Vec<Module>,
    /// Set when recording ended before the program did.
    pub stop: Option<StopReason>,
    /// The first failure (a write error, a damaged stream); recording stops there.
    pub error: Option<ProbeError>,
    start: Instant,
}

impl<'w, S: ExactSink> Transcriber<'w, S> {
    /// `marker`: the marker function's site and the file holding it.
    pub fn new(out: &'w mut S, options: &ExactTraceOptions, marker: Option<(crate::marker::MarkerSite, Program)>, start: Instant) -> Self {
        Transcriber {
            out,
            shapes: FxHashMap::default(),
            pending: None,
            accesses: Vec::new(),
            tid: 0,
            last_instruction: 0,
            last_by_thread: FxHashMap::default(),
            recorded_thread: None,
            recording: marker.is_none(),
            marker_link: marker,
            marker: None,
            iterations: options.iterations,
            max_instructions: options.max_instructions,
            instructions: 0,
            marker_hits: 0,
            blocks: 0,
            threads: Vec::new(),
            signals: Vec::new(),
            modules: Vec::new(),
            stop: None,
            error: None,
            start,
        }
    }

    /// Has recording ended (the window, the limit, an error)? The rest of the stream is dropped.
    pub fn done(&self) -> bool {
        self.stop.is_some() || self.error.is_some()
    }

    /// One item of the stream.
    #[inline]
    pub fn item(&mut self, item: Item) {
        if self.done() {
            return;
        }
        if let Err(e) = self.apply(item) {
            self.error = Some(e);
        }
    }

    fn apply(&mut self, item: Item) -> Result<(), ProbeError> {
        match item {
            Item::Superblock(addr) => {
                self.flush_pending()?;
                let Some(shape) = self.shapes.get(&addr) else {
                    return Err(ProbeError::ToolStream { what: format!("the superblock at {addr:#x} ran before its shape was written") });
                };
                self.blocks += 1;
                self.pending = Some(Pending { addr, count: shape.lengths.len(), shape: shape.clone() });
            }
            Item::Access { index, addr, write } => self.accesses.push((index, addr, write)),
            Item::Exit { index, kind } => self.left_early(index as usize, kind),
            Item::Shape { addr, lengths } => {
                self.flush_pending()?;
                self.shapes.insert(addr, Rc::new(Shape { lengths: lengths.into(), written: Cell::new(false) }));
            }
            Item::Thread(tid) => {
                self.flush_pending()?;
                self.last_by_thread.insert(self.tid, self.last_instruction);
                self.tid = tid;
                self.last_instruction = self.last_by_thread.get(&tid).copied().unwrap_or(0);
                if !self.threads.contains(&tid) {
                    self.threads.push(tid);
                }
            }
            Item::Signal { signal, ip } => self.signal(signal, Some(ip))?,
            Item::Module { avma, svma, path } => {
                self.flush_pending()?;
                if let Some(m) = module_from_text(path, svma, avma) {
                    self.out.module(&m)?;
                    self.modules.push(m);
                    self.resolve_marker();
                }
            }
            Item::Damage { offset, what } => return Err(ProbeError::ToolStream { what: format!("at byte {offset}: {what}") }),
            Item::PathNode { .. } | Item::PathsEnd { .. } | Item::PathsSnapshot { .. } | Item::OpenPath { .. } | Item::Entries(_) | Item::PathsGaveUp(_) => {
                return Err(ProbeError::ToolStream { what: "a paths-mode record in an exact trace (the tool ran with --paths)".into() })
            }
        }
        Ok(())
    }

    /// The marker's runtime address, once the program's module is known.
    fn resolve_marker(&mut self) {
        if let Some((site, file)) = &self.marker_link {
            if let Some(addr) = site.runtime_address(&self.modules, file) {
                self.marker = Some(addr);
                self.marker_link = None;
            }
        }
    }

    /// The superblock entered last was left in its instruction `index`.
    fn left_early(&mut self, index: usize, kind: ExitKind) {
        let Some(p) = &mut self.pending else { return };
        let ran = match kind {
            ExitKind::Before => index,
            ExitKind::After => index + 1,
            // Entered again after its last repetition: the instruction was recorded then.
            ExitKind::RepDone if index == 0 && self.last_instruction == p.addr => 0,
            ExitKind::RepDone => index + 1,
        };
        p.count = p.count.min(ran);
    }

    /// A fault at `ip`: the superblock ran up to and including that instruction (as a
    /// single-stepped trace records the faulting instruction before the signal).
    fn stop_at(&mut self, ip: u64) {
        let Some(p) = &mut self.pending else { return };
        let mut addr = p.addr;
        for (i, &len) in p.shape.lengths[..p.count].iter().enumerate() {
            if addr == ip {
                p.count = i + 1;
                return;
            }
            addr += u64::from(len);
        }
    }

    fn name_thread(&mut self) -> Result<(), ProbeError> {
        if self.recorded_thread != Some(self.tid) {
            self.out.thread(self.tid)?;
            self.recorded_thread = Some(self.tid);
        }
        Ok(())
    }

    /// Writes the instructions of the superblock entered last.
    fn flush_pending(&mut self) -> Result<(), ProbeError> {
        let Some(p) = self.pending.take() else { return Ok(()) };
        let accesses = std::mem::take(&mut self.accesses);
        let r = self.write_pending(&p, &accesses);
        // keep the allocation for the next superblock
        self.accesses = accesses;
        self.accesses.clear();
        r
    }

    fn write_pending(&mut self, p: &Pending, accesses: &[Access]) -> Result<(), ProbeError> {
        // nothing after the end of the window or the limit
        if p.count == 0 || self.done() {
            return Ok(());
        }
        let lengths = &p.shape.lengths[..];
        // Instruction addresses are only needed where the marker may lie.
        let end = p.addr + lengths[..p.count].iter().map(|&l| u64::from(l)).sum::<u64>();
        self.last_instruction = end - u64::from(lengths[p.count - 1]);
        match self.marker {
            Some(m) if m >= p.addr && m < end => {
                let mut at = p.addr;
                let mut i = 0;
                while at != m {
                    at += u64::from(lengths[i]);
                    i += 1;
                }
                self.segment(p, 0, i, accesses)?;
                if self.done() {
                    return Ok(());
                }
                self.marker_hit()?;
                if self.done() {
                    return Ok(());
                }
                self.segment(p, i, p.count, accesses)
            }
            _ => self.segment(p, 0, p.count, accesses),
        }
    }

    fn marker_hit(&mut self) -> Result<(), ProbeError> {
        self.marker_hits += 1;
        if self.iterations.is_some_and(|n| self.marker_hits > n) {
            self.marker_hits -= 1;
            return self.end(StopReason::WindowComplete);
        }
        self.recording = true;
        self.name_thread()?;
        let time_ns = self.start.elapsed().as_nanos() as u64;
        self.out.marker(time_ns, self.instructions)
    }

    /// Recording ends before the program does.
    fn end(&mut self, reason: StopReason) -> Result<(), ProbeError> {
        self.out.exit(ExitStatus::Detached)?;
        self.stop = Some(reason);
        Ok(())
    }

    /// Records instructions `from..to` of a superblock, within the instruction limit.
    fn segment(&mut self, p: &Pending, from: usize, to: usize, accesses: &[Access]) -> Result<(), ProbeError> {
        if !self.recording || from == to {
            return Ok(());
        }
        let mut to = to;
        if let Some(max) = self.max_instructions {
            let room = max.saturating_sub(self.instructions);
            if room == 0 {
                return self.end(StopReason::InstructionLimit);
            }
            to = to.min(from + room.min(usize::MAX as u64) as usize);
        }
        self.name_thread()?;
        self.out.block(p.addr, &p.shape, from, to, accesses)?;
        self.instructions += (to - from) as u64;
        Ok(())
    }

    /// The program was killed by `signal`, which Valgrind does not deliver (there is no
    /// handler): its log named the faulting instruction `ip`, if any.
    pub(crate) fn fatal_signal(&mut self, signal: i32, ip: Option<u64>) {
        if self.done() {
            return;
        }
        if let Err(e) = self.signal(signal, ip) {
            self.error = Some(e);
        }
    }

    /// A signal reaches the running thread at `ip` (the faulting instruction, for a
    /// synchronous one: the superblock ran up to it).
    fn signal(&mut self, signal: i32, ip: Option<u64>) -> Result<(), ProbeError> {
        if let Some(ip) = ip.filter(|_| synchronous(signal)) {
            self.stop_at(ip);
        }
        self.flush_pending()?;
        self.signals.push(signal);
        if self.recording && !self.done() {
            self.name_thread()?;
            self.out.signal(signal)?;
        }
        Ok(())
    }

    /// The stream ended: writes what the last superblock ran.
    pub fn finish(&mut self) {
        if let Err(e) = self.flush_pending() {
            self.error.get_or_insert(e);
        }
    }
}

/// Runs the program under kansoku's Valgrind tool and streams what it executes into `out`
/// (same options, events and outcome as the ptrace engine, [`crate::exact::trace_exact`]),
/// with every memory access when the options ask for data addresses.
pub(crate) fn trace_valgrind<W: Write>(options: &ExactTraceOptions, out: &mut RecordingWriter<W>, progress: &mut dyn FnMut(u64)) -> Result<TraceOutcome, ProbeError> {
    run_transcribed(options, options.data, true, out, progress)
}

/// Runs the program under the tool (`data`: with every memory access) into `sink`.
/// `drain`: after the window or the limit, let the program run on to its end (an exact
/// trace, as ptrace detaches); otherwise end it (the waveform, as its ptrace mode does).
pub(crate) fn run_transcribed<S: ExactSink>(options: &ExactTraceOptions, data: bool, drain: bool, out: &mut S, progress: &mut dyn FnMut(u64)) -> Result<TraceOutcome, ProbeError> {
    let program_path = resolve_program(&options.program)?;
    let marker = match &options.marker {
        Some(spec) => {
            // `F`, `F@LIB` or `F@plt` (crate::marker): resolved when its module arrives
            let (site, file) = crate::marker::resolve(&program_path, spec)?;
            Some((site, file))
        }
        None => None,
    };
    let start = Instant::now();
    let lackey = LackeyOptions { valgrind: PathBuf::from("valgrind"), program: program_path.clone(), args: options.args.clone() };
    let mut extra = vec!["--exact=yes".to_string()];
    if data {
        extra.push("--data=yes".into());
    }
    let mut run = spawn_tool_with(&lackey, &extra)?;
    out.process(run.child.id() as i32);
    let mut t = Transcriber::new(out, options, marker, start);
    let mut decoder = StreamDecoder::new();
    let mut buf = vec![0u8; 1 << 20];
    let mut interrupted = false;
    let mut reported = 0u64;
    loop {
        let n = match run.output.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            // the user's Ctrl-C (looked at below: the program may be stopped, writing nothing)
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => 0,
            Err(e) => {
                t.error.get_or_insert(ProbeError::ToolStream { what: format!("reading the stream: {e}") });
                break;
            }
        };
        if !t.done() {
            decoder.feed(&buf[..n], &mut |item| t.item(item));
            if t.done() && !drain && !interrupted {
                // the observation is over and the program is not wanted any more
                interrupted = true;
                run.kill();
            }
        }
        if t.instructions >= reported + (1 << 20) {
            reported = t.instructions;
            progress(reported);
        }
        if interrupt::requested() && !interrupted {
            interrupted = true;
            if !t.done() {
                t.finish();
                let _ = t.end(StopReason::Interrupted);
            }
            run.kill();
        }
    }
    if !t.done() {
        decoder.finish(&mut |item| t.item(item));
    }
    let (mut exit, log) = run.wait()?;
    if interrupted && t.stop.is_some() && t.stop != Some(StopReason::Interrupted) {
        // ended by us after the window, as the ptrace waveform ends its program
        exit = ExitStatus::Detached;
    }
    if let ExitStatus::Killed(signal) = exit {
        if !interrupted {
            t.fatal_signal(signal, fault_address(&log));
        }
    }
    t.finish();
    if let Some(e) = t.error.take() {
        return Err(e);
    }
    let never_hit = options.marker.is_some() && t.marker_hits == 0;
    let stop = match t.stop {
        Some(s) => s,
        None if never_hit => StopReason::MarkerNeverHit,
        None => {
            if let Some(complaint) = tool_failure(&log, exit) {
                return Err(ProbeError::Spawn { program: program_path, reason: complaint });
            }
            t.out.exit(exit)?;
            StopReason::ProgramEnded
        }
    };
    Ok(TraceOutcome {
        program: program_path,
        instructions: t.instructions,
        marker_hits: t.marker_hits,
        threads: t.threads.len().max(1),
        stop,
        exit,
        signals: t.signals.clone(),
        elapsed: start.elapsed(),
    })
}

/// The faulting instruction of a fatal signal, from Valgrind's log: the first `at 0x…`
/// after "Process terminating with default action of signal N".
fn fault_address(log: &[u8]) -> Option<u64> {
    let text = String::from_utf8_lossy(log);
    let mut lines = text.lines().skip_while(|l| !l.contains("Process terminating with default action of signal"));
    lines.next()?;
    let line = lines.find(|l| l.contains(" at 0x"))?;
    let hex: String = line.split(" at 0x").nth(1)?.chars().take_while(|c| c.is_ascii_hexdigit()).collect();
    u64::from_str_radix(&hex, 16).ok()
}

/// Valgrind itself refused to run (a bad option, a missing launcher): its log says why.
/// Valgrind exits with status 1 then, before any guest code ran.
fn tool_failure(log: &[u8], exit: ExitStatus) -> Option<String> {
    let text = String::from_utf8_lossy(log);
    let complaint = text.lines().find(|l| l.contains("valgrind: Bad option") || l.contains("Unknown option") || l.contains("failed to start tool"));
    match (complaint, exit) {
        (Some(line), ExitStatus::Exited(1)) => Some(format!("valgrind refused to run kansoku's tool: {}", line.trim())),
        _ => None,
    }
}
