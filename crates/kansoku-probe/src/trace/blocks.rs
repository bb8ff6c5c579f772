//! Every block source of seed 003's path analysis, run one way (issue 11): a program under
//! kansoku's Valgrind tool or Lackey, an exact trace on either engine, or a file (a `.ksk`
//! recording, a saved tool stream, a Lackey log). [`run_source`] reads the source — with
//! the progress callback, Ctrl-C and the program's end handled once, here — and feeds a
//! [`BlockSink`]; the command line only chooses the source.

use std::fs::File;
use std::io::{BufReader, BufWriter, Read};
use std::path::{Path, PathBuf};
use std::time::Duration;

use kansoku_core::feed::BlockSink;
use kansoku_core::{Event, ExitStatus, Header, Module, RecordingKind, RecordingReader, RecordingWriter};

use crate::exact::{Engine, ExactTraceOptions};
use crate::exact_valgrind::{run_transcribed, Access, ExactSink, Shape};
use crate::valgrind::{spawn_lackey, spawn_tool_with, LackeyOptions};
use crate::{interrupt, ProbeError};

/// Where the blocks come from.
#[derive(Clone, Debug)]
pub enum BlockSource {
    /// kansoku's Valgrind tool on a program.
    Tool(LackeyOptions),
    /// kansoku's Valgrind tool on a program, counting paths itself (`--paths`): a trie
    /// of superblock paths at the end instead of every entry.
    ToolPaths(LackeyOptions, ToolCuts),
    /// Valgrind's Lackey on a program (where the tool was not built).
    Lackey(LackeyOptions),
    /// An exact trace, on either engine.
    Exact(ExactTraceOptions),
    /// A `.ksk` recording.
    Recording(PathBuf),
    /// A saved stream of kansoku's Valgrind tool (`--out-fd=N N>FILE`).
    ToolStream(PathBuf),
    /// A Lackey log (`valgrind --tool=lackey --trace-superblocks=yes -v -v`).
    LackeyLog(PathBuf),
}

/// Where the tool cuts the paths it counts (the path profiler's call mode; back edges by
/// address).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ToolCuts {
    /// Calls and returns cut.
    Split,
    /// Returns cut, calls do not.
    Through,
}

/// How reading a source ended.
#[derive(Debug, Default)]
pub struct SourceRun {
    /// How the program ended (sources that run one).
    pub exit: Option<ExitStatus>,
    /// Ctrl-C stopped the reading (a running program was ended).
    pub interrupted: bool,
    /// Valgrind's own log (the tool's runs): how the program ended, and why a run failed.
    pub valgrind_log: Vec<u8>,
    /// A recording ended early, at this byte offset.
    pub truncated_at: Option<u64>,
    /// A recording could not be read past an error; what was read before it was fed.
    pub read_error: Option<String>,
}

impl BlockSource {
    /// A file, as what its first bytes say it holds.
    pub fn file(path: &Path) -> Result<Self, ProbeError> {
        let mut head = [0u8; 8];
        let n = File::open(path).and_then(|mut f| f.read(&mut head)).map_err(|e| ProbeError::Spawn {
            program: path.to_path_buf(),
            reason: format!("cannot read it ({e}): give valgrind, exact, a .ksk recording, a saved tool stream or a Lackey log"),
        })?;
        if n == 8 && &head == b"PERFILE2" {
            // Samples, not a block stream: paths need every executed block, which perf
            // records only with hardware tracing (intel_pt, branch stacks), not cpu-clock.
            return Err(ProbeError::NotBlocks {
                path: path.to_path_buf(),
                why: "a perf.data holds samples, not every executed block: paths come from --source valgrind, exact or a .ksk block recording; `kansoku reconstruct` and `show` read perf.data".into(),
            });
        }
        Ok(if n == 8 && &head == kansoku_core::recording::MAGIC {
            BlockSource::Recording(path.to_path_buf())
        } else if n >= 4 && &head[..4] == kansoku_core::sbstream::MAGIC {
            BlockSource::ToolStream(path.to_path_buf())
        } else {
            BlockSource::LackeyLog(path.to_path_buf())
        })
    }

    /// A short name for reports: `valgrind`, `lackey`, `exact (valgrind)`, `recording F`, ...
    pub fn name(&self) -> String {
        match self {
            BlockSource::Tool(_) => "valgrind".into(),
            BlockSource::ToolPaths(..) => "valgrind".into(),
            BlockSource::Lackey(_) => "lackey".into(),
            BlockSource::Exact(o) => format!("exact ({})", o.engine.name()),
            BlockSource::Recording(p) => format!("recording {}", p.display()),
            BlockSource::ToolStream(p) => format!("kansoku Valgrind stream {}", p.display()),
            BlockSource::LackeyLog(p) => format!("Lackey log {}", p.display()),
        }
    }

    /// The header of a recording (others have none).
    pub fn header(&self) -> Result<Option<Header>, ProbeError> {
        match self {
            BlockSource::Recording(p) => Ok(Some(RecordingReader::open(p)?.header().clone())),
            _ => Ok(None),
        }
    }

    /// The program the source runs (resolved as it will be run) or recorded, with its
    /// arguments; `None` for a saved stream or a log.
    pub fn program(&self) -> Result<Option<(String, Vec<String>)>, ProbeError> {
        let resolved = |p: &Path| crate::spawn::resolve_program(p).map(|r| r.to_string_lossy().into_owned());
        Ok(match self {
            BlockSource::Tool(o) | BlockSource::ToolPaths(o, _) | BlockSource::Lackey(o) => Some((resolved(&o.program)?, o.args.clone())),
            BlockSource::Exact(o) => Some((resolved(&o.program)?, o.args.clone())),
            BlockSource::Recording(_) => self.header()?.map(|h| (h.program, h.args)),
            BlockSource::ToolStream(_) | BlockSource::LackeyLog(_) => None,
        })
    }
}

/// Reads `source` into `sink` to its end, Ctrl-C or a program's end; `progress` gets the
/// sink's progress now and then.
pub fn run_source(source: &BlockSource, sink: &mut dyn BlockSink, progress: &mut dyn FnMut(u64)) -> Result<SourceRun, ProbeError> {
    match source {
        BlockSource::Tool(o) => tool(o, None, sink, progress),
        BlockSource::ToolPaths(o, cuts) => tool(o, Some(*cuts), sink, progress),
        BlockSource::Lackey(o) => {
            let mut run = spawn_lackey(o)?;
            let output = run.output.try_clone().map_err(|e| io_error(&run.program, e))?;
            let interrupted = lackey_lines(output, true, sink, progress).map_err(|e| io_error(&run.program, e))?;
            if interrupted {
                run.kill();
            }
            Ok(SourceRun { exit: Some(run.wait()?), interrupted, ..SourceRun::default() })
        }
        BlockSource::Exact(o) => exact(o, sink, progress),
        BlockSource::Recording(p) => recording(p, sink, progress),
        BlockSource::ToolStream(p) => {
            let mut f = File::open(p).map_err(|e| io_error(p, e))?;
            let mut buf = vec![0u8; 1 << 20];
            let mut run = SourceRun::default();
            loop {
                let n = f.read(&mut buf).map_err(|e| io_error(p, e))?;
                if n == 0 {
                    break;
                }
                sink.tool_stream(&buf[..n]);
                if interrupt::requested() {
                    run.interrupted = true;
                    break;
                }
            }
            Ok(run)
        }
        BlockSource::LackeyLog(p) => {
            let f = File::open(p).map_err(|e| io_error(p, e))?;
            let interrupted = lackey_lines(f, false, sink, &mut |_| {}).map_err(|e| io_error(p, e))?;
            Ok(SourceRun { interrupted, ..SourceRun::default() })
        }
    }
}

fn io_error(path: &Path, e: std::io::Error) -> ProbeError {
    ProbeError::Spawn { program: path.to_path_buf(), reason: format!("reading: {e}") }
}

/// kansoku's Valgrind tool: its stream in 1 MiB reads. Ctrl-C ends the program: in paths
/// mode gently (SIGTERM, so that Valgrind ends the run and the tool writes the paths it
/// counted; SIGKILL if it has not ended 5 s later), else at once.
fn tool(o: &LackeyOptions, paths: Option<ToolCuts>, sink: &mut dyn BlockSink, progress: &mut dyn FnMut(u64)) -> Result<SourceRun, ProbeError> {
    let extra: Vec<String> = paths
        .map(|cuts| match cuts {
            ToolCuts::Split => "--paths=split".to_string(),
            ToolCuts::Through => "--paths=through".to_string(),
        })
        .into_iter()
        .collect();
    let mut run = spawn_tool_with(o, &extra)?;
    let gentle = paths.is_some();
    let mut output = run.output.try_clone().map_err(|e| io_error(&run.program, e))?;
    let mut buf = vec![0u8; 1 << 20];
    let mut chunks = 0u64;
    let mut interrupted = false;
    loop {
        let n = match output.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            // the user's Ctrl-C (looked at below: the program may be stopped, writing nothing)
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => 0,
            Err(e) => return Err(io_error(&run.program, e)),
        };
        if n > 0 {
            sink.tool_stream(&buf[..n]);
            chunks += 1;
        }
        if n == 0 || gentle || chunks.is_multiple_of(16) {
            progress(sink.progress());
            if interrupt::requested() && !interrupted {
                interrupted = true;
                if !gentle {
                    break;
                }
                run.end_gently(Duration::from_secs(5));
            }
        }
    }
    if interrupted && !gentle {
        run.kill();
    }
    let (exit, valgrind_log) = run.wait()?;
    Ok(SourceRun { exit: Some(exit), interrupted, valgrind_log, ..SourceRun::default() })
}

/// A `.ksk` recording, event by event; an error ends the reading, not the analysis.
fn recording(p: &Path, sink: &mut dyn BlockSink, progress: &mut dyn FnMut(u64)) -> Result<SourceRun, ProbeError> {
    let mut reader = RecordingReader::open(p)?;
    let mut run = SourceRun::default();
    let mut n = 0u64;
    loop {
        match reader.next_event() {
            Ok(Some(e)) => sink.event(&e),
            Ok(None) => break,
            Err(e) => {
                run.read_error = Some(e.to_string());
                break;
            }
        }
        n += 1;
        if n.is_multiple_of(1 << 22) {
            progress(sink.progress());
            if interrupt::requested() {
                run.interrupted = true;
                break;
            }
        }
    }
    run.truncated_at = reader.truncated_at();
    Ok(run)
}

/// An exact trace: on the Valgrind engine straight into the sink; on ptrace through a
/// pipe from the tracer's thread (it writes a recording as it steps).
fn exact(o: &ExactTraceOptions, sink: &mut dyn BlockSink, progress: &mut dyn FnMut(u64)) -> Result<SourceRun, ProbeError> {
    if o.engine == Engine::Valgrind {
        let outcome = run_transcribed(o, false, true, &mut Events(sink), progress)?;
        let interrupted = outcome.stop == crate::StopReason::Interrupted;
        return Ok(SourceRun { exit: Some(outcome.exit), interrupted, ..SourceRun::default() });
    }
    let (rd, wr) = std::io::pipe().map_err(|e| io_error(&o.program, e))?;
    let header = Header::new(RecordingKind::ExactTrace, o.program.to_string_lossy(), o.args.clone());
    let options = o.clone();
    let tracer = std::thread::spawn(move || -> Result<crate::TraceOutcome, ProbeError> {
        let mut writer = RecordingWriter::new(BufWriter::with_capacity(1 << 20, wr), PathBuf::from("<pipe>"), &header)?;
        let outcome = crate::trace_exact(&options, &mut writer, &mut |_| {});
        let _ = writer.finish();
        outcome
    });
    let mut reader = RecordingReader::new(BufReader::with_capacity(1 << 20, rd), PathBuf::from("<exact tracer>"))?;
    let mut n = 0u64;
    while let Some(e) = reader.next_event()? {
        sink.event(&e);
        n += 1;
        if n.is_multiple_of(1 << 20) {
            progress(sink.progress());
        }
    }
    let outcome = tracer.join().map_err(|_| ProbeError::Spawn { program: o.program.clone(), reason: "the exact tracer panicked".into() })??;
    Ok(SourceRun { exit: Some(outcome.exit), interrupted: outcome.stop == crate::StopReason::Interrupted, ..SourceRun::default() })
}

/// The Valgrind engine's trace as the events a recording of it would hold.
struct Events<'a>(&'a mut dyn BlockSink);

impl ExactSink for Events<'_> {
    fn module(&mut self, module: &Module) -> Result<(), ProbeError> {
        self.0.event(&Event::Module(module.clone()));
        Ok(())
    }
    fn thread(&mut self, tid: u32) -> Result<(), ProbeError> {
        self.0.event(&Event::Thread { tid });
        Ok(())
    }
    fn block(&mut self, start: u64, shape: &Shape, from: usize, to: usize, _: &[Access]) -> Result<(), ProbeError> {
        let mut addr = start + shape.lengths[..from].iter().map(|&l| u64::from(l)).sum::<u64>();
        for &len in &shape.lengths[from..to] {
            self.0.event(&Event::Instruction { addr });
            addr += u64::from(len);
        }
        Ok(())
    }
    fn marker(&mut self, time_ns: u64, instructions: u64) -> Result<(), ProbeError> {
        self.0.event(&Event::Marker { time_ns, instructions: Some(instructions) });
        Ok(())
    }
    fn signal(&mut self, signal: i32) -> Result<(), ProbeError> {
        self.0.event(&Event::Signal { signal });
        Ok(())
    }
    fn exit(&mut self, exit: ExitStatus) -> Result<(), ProbeError> {
        self.0.event(&Event::Exit(exit));
        Ok(())
    }
}

/// Hands each line of `input` (without its newline) to the sink, its progress every 16
/// reads; returns whether Ctrl-C stopped it. `pace`: when the writer is slower than us
/// (Lackey's log, a write per line), wait a little between short reads instead of
/// spinning on them.
fn lackey_lines(mut input: impl Read, pace: bool, sink: &mut dyn BlockSink, progress: &mut dyn FnMut(u64)) -> std::io::Result<bool> {
    let mut buf = vec![0u8; 1 << 20];
    let mut filled = 0usize;
    let mut chunks = 0u64;
    loop {
        let n = match input.read(&mut buf[filled..]) {
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        if n == 0 {
            if filled > 0 {
                sink.lackey_line(&buf[..filled]);
            }
            return Ok(false);
        }
        filled += n;
        if pace && n < (1 << 18) {
            std::thread::sleep(Duration::from_micros(8000));
        }
        let mut start = 0;
        while let Some(pos) = buf[start..filled].iter().position(|&c| c == b'\n') {
            sink.lackey_line(&buf[start..start + pos]);
            start += pos + 1;
        }
        buf.copy_within(start..filled, 0);
        filled -= start;
        if filled == buf.len() {
            // an absurdly long line: hand it over as it is
            sink.lackey_line(&buf[..filled]);
            filled = 0;
        }
        chunks += 1;
        if chunks.is_multiple_of(16) {
            progress(sink.progress());
            if interrupt::requested() {
                return Ok(true);
            }
        }
    }
}
