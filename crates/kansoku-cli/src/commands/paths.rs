//! `kansoku paths [--source valgrind|step|FILE] [--calls ...] [--back-edges ...] -- PROGRAM ARGS...`
//! — seed 003's path profile of a program, from Valgrind/Lackey, the exact tracer or a file.

use std::fs::File;
use std::io::{BufReader, BufWriter, Read, Write};
use std::os::fd::{FromRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use kansoku_core::{ExitStatus, Header, RecordingKind, RecordingReader, RecordingWriter};
use kansoku_paths::{AnalysisOptions, BackEdgeMode, BlockKind, BlockRecorder, CallMode, PathAnalysis, PathReport, Scope};
use kansoku_probe::valgrind::{spawn_lackey, spawn_tool, tool_dir, LackeyOptions};
use kansoku_probe::{interrupt, trace_exact, ExactTraceOptions};
use serde::Serialize;

use crate::output::{reportln, print_json, signal_name, spinner, Table};

#[derive(Clone, Copy, Debug, clap::ValueEnum)]
pub enum CallsArg {
    Split,
    Through,
    Frames,
}

#[derive(Clone, Copy, Debug, clap::ValueEnum)]
pub enum BackEdgesArg {
    Address,
    Loops,
}

#[derive(Clone, Copy, Debug, clap::ValueEnum)]
pub enum ScopeArg {
    Program,
    All,
}

#[derive(clap::Args, Clone, Debug)]
pub struct Args {
    /// Where blocks come from: `valgrind` (kansoku's own Valgrind tool: superblock entries as
    /// a binary stream through a pipe; Lackey if the tool was not built), `lackey` (Valgrind's
    /// Lackey, its text trace through a pipe), `step` (the ptrace exact tracer), or a file: a
    /// `.ksk` recording (blocks or instructions) or a Lackey log written with
    /// `valgrind --tool=lackey --trace-superblocks=yes -v -v`.
    #[arg(long, default_value = "valgrind")]
    pub source: String,
    /// Calls and returns: `split` cuts at both, `through` does not cut at calls, `frames`
    /// keeps one path per stack frame (the caller's path resumes after the call).
    #[arg(long, value_enum, default_value = "split")]
    pub calls: CallsArg,
    /// Back edges: `address` (branch to a block at or below the one it leaves, the seed's
    /// rule) or `loops` (the CFG's loop back edges, by dominators).
    #[arg(long, value_enum, default_value = "address")]
    pub back_edges: BackEdgesArg,
    /// Keep only the main program's blocks in paths (`program`), or every block (`all`).
    #[arg(long, value_enum, default_value = "program")]
    pub scope: ScopeArg,
    /// Show the N most frequent paths.
    #[arg(long, default_value_t = 20)]
    pub top: usize,
    /// Show only paths lying entirely in this function.
    #[arg(long)]
    pub function: Option<String>,
    /// Print the report as JSON. While a program runs under observation the report goes to
    /// stderr (the program's stdout and stderr stay its own); from a file, to stdout.
    #[arg(long)]
    pub json: bool,
    /// Write every path to this file (CSV, or the whole JSON report when it ends in .json).
    #[arg(short, long)]
    pub output: Option<PathBuf>,
    /// Draw this function's CFG with block counts and the hottest paths (needs --svg or --dot).
    #[arg(long)]
    pub cfg: Option<String>,
    /// The CFG picture as SVG (rendered by Graphviz `dot`).
    #[arg(long, requires = "cfg")]
    pub svg: Option<PathBuf>,
    /// The CFG picture as DOT text.
    #[arg(long, requires = "cfg")]
    pub dot: Option<PathBuf>,
    /// Also record the basic-block stream into this .ksk, to analyse it again offline.
    #[arg(long)]
    pub record: Option<PathBuf>,
    /// The valgrind launcher to run.
    #[arg(long, default_value = "valgrind")]
    pub valgrind: PathBuf,
    /// The program and its arguments (not needed for a file source).
    #[arg(last = true, num_args = 0..)]
    pub command: Vec<String>,
}

/// What one analysis produced, besides the report.
pub struct PathsRun {
    pub analysis: PathAnalysis,
    pub report: PathReport,
    pub source: String,
    /// Wall time from start to the end of the input.
    pub elapsed: Duration,
    pub interrupted: bool,
}

fn options(args: &Args, program: Option<String>) -> AnalysisOptions {
    AnalysisOptions {
        calls: match args.calls {
            CallsArg::Split => CallMode::Split,
            CallsArg::Through => CallMode::Through,
            CallsArg::Frames => CallMode::Frames,
        },
        back_edges: match args.back_edges {
            BackEdgesArg::Address => BackEdgeMode::Address,
            BackEdgesArg::Loops => BackEdgeMode::Loops,
        },
        scope: match args.scope {
            ScopeArg::Program => Scope::Program,
            ScopeArg::All => Scope::All,
        },
        program,
        track_edges: args.cfg.is_some(),
    }
}

/// Calls `f` for every line of `input` (without the newline); stops early on Ctrl-C.
///
/// `pace`: for a live pipe. Valgrind writes every Lackey line with its own `write`; if we
/// wait in `read` each of those writes wakes us (two context switches per superblock).
/// When a read returns little, we sleep a moment instead, so the pipe (1 MiB) collects
/// thousands of lines per wake-up and Valgrind's writes never have to wake anyone.
fn for_each_line(mut input: impl Read, pace: bool, mut f: impl FnMut(&[u8])) -> std::io::Result<bool> {
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
                f(&buf[..filled]);
            }
            return Ok(false);
        }
        filled += n;
        if pace && n < (1 << 18) {
            std::thread::sleep(Duration::from_micros(8000));
        }
        let mut start = 0;
        while let Some(pos) = memchr(b'\n', &buf[start..filled]) {
            f(&buf[start..start + pos]);
            start += pos + 1;
        }
        buf.copy_within(start..filled, 0);
        filled -= start;
        if filled == buf.len() {
            // an absurdly long line: hand it over as it is
            f(&buf[..filled]);
            filled = 0;
        }
        chunks += 1;
        if chunks.is_multiple_of(16) && interrupt::requested() {
            return Ok(true);
        }
    }
}

#[inline]
fn memchr(needle: u8, hay: &[u8]) -> Option<usize> {
    hay.iter().position(|&c| c == needle)
}

/// Runs the analysis the arguments ask for.
pub fn analyse(args: &Args) -> Result<PathsRun> {
    let start = Instant::now();
    interrupt::install();
    let recorder = |program: &str, prog_args: Vec<String>, source: &str| -> Result<Option<BlockRecorder>> {
        match &args.record {
            Some(p) => Ok(Some(BlockRecorder::create(p, program, prog_args, source).with_context(|| format!("creating {}", p.display()))?)),
            None => Ok(None),
        }
    };
    let mut interrupted = false;
    let use_tool = args.source == "valgrind"
        && match tool_dir() {
            Ok(_) => true,
            Err(reason) => {
                eprintln!("kansoku: note: {reason}; using Valgrind's Lackey instead (slower: a text line and a write per superblock)");
                false
            }
        };
    let (mut analysis, source) = match args.source.as_str() {
        "valgrind" if use_tool => {
            let (program, prog_args) = split_command(args)?;
            let mut run = spawn_tool(&LackeyOptions { valgrind: args.valgrind.clone(), program: program.clone(), args: prog_args.clone() })
                .with_context(|| format!("starting kansoku's Valgrind tool on {}", program.display()))?;
            let resolved = run.program.to_string_lossy().into_owned();
            let mut analysis = PathAnalysis::new(&options(args, Some(resolved.clone())));
            if let Some(r) = recorder(&resolved, prog_args, "valgrind")? {
                analysis.record_into(r);
            }
            let bar = spinner("profiling paths under valgrind", "superblocks");
            let mut output = run.output.try_clone()?;
            let mut buf = vec![0u8; 1 << 20];
            let mut chunks = 0u64;
            loop {
                let n = match output.read(&mut buf) {
                    Ok(0) => break,
                    Ok(n) => n,
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                    Err(e) => return Err(e).context("reading kansoku's Valgrind tool stream"),
                };
                analysis.feed_tool_stream(&buf[..n]);
                chunks += 1;
                if chunks.is_multiple_of(16) {
                    bar.set_position(analysis.stats.superblocks);
                    if interrupt::requested() {
                        interrupted = true;
                        break;
                    }
                }
            }
            bar.finish_and_clear();
            if interrupted {
                run.kill();
            }
            let (status, log) = run.wait()?;
            if analysis.stats.superblocks == 0 && !interrupted {
                bail!("{} ran nothing under {}: it {}{}", program.display(), args.valgrind.display(), status_text(status), log_tail(&log));
            }
            analysis.feed_valgrind_log(&log);
            analysis.set_exit(status);
            (analysis, "valgrind".to_string())
        }
        "valgrind" | "lackey" => {
            let (program, prog_args) = split_command(args)?;
            let mut run = spawn_lackey(&LackeyOptions { valgrind: args.valgrind.clone(), program: program.clone(), args: prog_args.clone() })
                .with_context(|| format!("starting Valgrind's Lackey on {}", program.display()))?;
            let resolved = run.program.to_string_lossy().into_owned();
            let mut analysis = PathAnalysis::new(&options(args, Some(resolved.clone())));
            if let Some(r) = recorder(&resolved, prog_args, "lackey")? {
                analysis.record_into(r);
            }
            let bar = spinner("profiling paths under valgrind (Lackey)", "superblocks");
            let output = run.output.try_clone()?;
            let mut n = 0u64;
            interrupted = for_each_line(output, true, |line| {
                analysis.feed_lackey_line(line);
                n += 1;
                if n.is_multiple_of(1 << 20) {
                    bar.set_position(analysis.stats.superblocks);
                }
            })
            .context("reading Lackey's output")?;
            bar.finish_and_clear();
            if interrupted {
                run.kill();
            }
            let status = run.wait()?;
            if analysis.stats.superblocks == 0 && !interrupted {
                bail!("{} ran nothing under {} (Lackey): it {}", program.display(), args.valgrind.display(), status_text(status));
            }
            analysis.set_exit(status);
            (analysis, "lackey".to_string())
        }
        "step" => {
            let (program, prog_args) = split_command(args)?;
            let resolved = kansoku_probe::exact::resolve(&program)?;
            let resolved_s = resolved.to_string_lossy().into_owned();
            let mut analysis = PathAnalysis::new(&options(args, Some(resolved_s.clone())));
            if let Some(r) = recorder(&resolved_s, prog_args.clone(), "step")? {
                analysis.record_into(r);
            }
            let mut fds = [0i32; 2];
            if unsafe { libc_pipe(&mut fds) } != 0 {
                bail!("cannot create a pipe: {}", std::io::Error::last_os_error());
            }
            let (rd, wr) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
            let header = Header::new(RecordingKind::ExactTrace, resolved_s.clone(), prog_args.clone());
            let opts = ExactTraceOptions { program: resolved.clone(), args: prog_args, ..Default::default() };
            let tracer = std::thread::spawn(move || -> Result<kansoku_probe::TraceOutcome> {
                let mut writer = RecordingWriter::new(BufWriter::with_capacity(1 << 20, File::from(wr)), PathBuf::from("<pipe>"), &header)?;
                let outcome = trace_exact(&opts, &mut writer, &mut |_| {});
                let _ = writer.finish();
                Ok(outcome?)
            });
            let bar = spinner("profiling paths under single-stepping", "instructions");
            let mut reader = RecordingReader::new(BufReader::with_capacity(1 << 20, File::from(rd)), PathBuf::from("<exact tracer>"))
                .context("reading the exact tracer's stream")?;
            let mut n = 0u64;
            while let Some(e) = reader.next_event().context("reading the exact tracer's stream")? {
                analysis.feed_event(&e);
                n += 1;
                if n.is_multiple_of(1 << 20) {
                    bar.set_position(n);
                }
            }
            bar.finish_and_clear();
            let outcome = tracer.join().map_err(|_| anyhow::anyhow!("the exact tracer panicked"))??;
            if outcome.stop == kansoku_probe::StopReason::Interrupted {
                interrupted = true;
            }
            analysis.set_exit(outcome.exit);
            (analysis, "step".to_string())
        }
        file => {
            let path = PathBuf::from(file);
            let mut head = [0u8; 8];
            let n = File::open(&path)
                .and_then(|mut f| f.read(&mut head))
                .with_context(|| format!("--source {file}: cannot read it (use valgrind, step, a .ksk recording or a Lackey log)"))?;
            if n == 8 && &head == kansoku_core::recording::MAGIC {
                let mut reader = RecordingReader::open(&path).with_context(|| format!("opening {}", path.display()))?;
                let header = reader.header().clone();
                let mut analysis = PathAnalysis::new(&options(args, Some(header.program.clone())));
                analysis.block_kind = BlockKind::of_header(&header);
                if header.kind == RecordingKind::Samples {
                    bail!("{} holds samples, not blocks or instructions: path profiles need every block (record with `kansoku paths --record` or `kansoku trace exact`)", path.display());
                }
                if let Some(r) = recorder(&header.program, header.args.clone(), "recording")? {
                    analysis.record_into(r);
                }
                let bar = spinner("profiling paths", "events");
                let mut n = 0u64;
                loop {
                    match reader.next_event() {
                        Ok(Some(e)) => analysis.feed_event(&e),
                        Ok(None) => break,
                        Err(e) => {
                            eprintln!("kansoku: warning: {e}; the paths read so far are reported");
                            break;
                        }
                    }
                    n += 1;
                    if n.is_multiple_of(1 << 22) {
                        bar.set_position(n);
                        if interrupt::requested() {
                            interrupted = true;
                            break;
                        }
                    }
                }
                bar.finish_and_clear();
                if let Some(at) = reader.truncated_at() {
                    eprintln!("kansoku: warning: {} is cut off at byte {at}; the paths read up to there are reported", path.display());
                }
                (analysis, format!("recording {}", path.display()))
            } else if n >= 4 && &head[..4] == kansoku_paths::sbstream::MAGIC {
                // a saved stream of kansoku's Valgrind tool (`--out-fd=N N>FILE`)
                let mut analysis = PathAnalysis::new(&options(args, None));
                if let Some(r) = recorder("", Vec::new(), "valgrind stream")? {
                    analysis.record_into(r);
                }
                let mut f = File::open(&path).with_context(|| format!("opening {}", path.display()))?;
                let mut buf = vec![0u8; 1 << 20];
                loop {
                    let n = f.read(&mut buf).with_context(|| format!("reading {}", path.display()))?;
                    if n == 0 {
                        break;
                    }
                    analysis.feed_tool_stream(&buf[..n]);
                    if interrupt::requested() {
                        interrupted = true;
                        break;
                    }
                }
                (analysis, format!("kansoku Valgrind stream {}", path.display()))
            } else {
                let mut analysis = PathAnalysis::new(&options(args, None));
                if let Some(r) = recorder("", Vec::new(), "lackey log")? {
                    analysis.record_into(r);
                }
                let f = File::open(&path).with_context(|| format!("opening {}", path.display()))?;
                interrupted = for_each_line(f, false, |line| analysis.feed_lackey_line(line)).with_context(|| format!("reading {}", path.display()))?;
                if analysis.stats.superblocks == 0 {
                    bail!(
                        "{} holds no Lackey superblock lines (`SB <address>`): is it a log of `valgrind --tool=lackey --trace-superblocks=yes -v -v`?",
                        path.display()
                    );
                }
                (analysis, format!("Lackey log {}", path.display()))
            }
        }
    };
    analysis.finish().context("finishing the block recording")?;
    let elapsed = start.elapsed();
    let report = analysis.report(None, args.function.as_deref());
    Ok(PathsRun { analysis, report, source, elapsed, interrupted })
}

unsafe fn libc_pipe(fds: &mut [i32; 2]) -> i32 {
    extern "C" {
        fn pipe2(fds: *mut i32, flags: i32) -> i32;
    }
    const O_CLOEXEC: i32 = 0o2000000;
    pipe2(fds.as_mut_ptr(), O_CLOEXEC)
}

/// "exited with status 1" or "was killed by SIGSEGV (11)".
fn status_text(status: ExitStatus) -> String {
    match status {
        ExitStatus::Exited(c) => format!("exited with status {c}"),
        ExitStatus::Killed(s) => format!("was killed by {}", signal_name(s)),
        ExitStatus::Detached => "detached".into(),
    }
}

/// The last lines of Valgrind's own log, where it says why it ran nothing.
fn log_tail(log: &[u8]) -> String {
    let text = String::from_utf8_lossy(log);
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    let tail = &lines[lines.len().saturating_sub(5)..];
    if tail.is_empty() {
        " and wrote no log".into()
    } else {
        format!("; its log ends:\n{}", tail.join("\n"))
    }
}

fn split_command(args: &Args) -> Result<(PathBuf, Vec<String>)> {
    match args.command.split_first() {
        Some((p, rest)) => Ok((PathBuf::from(p), rest.to_vec())),
        None => bail!("--source {} needs the program to run: kansoku paths --source {} -- PROGRAM ARGS...", args.source, args.source),
    }
}

/// `paths.c:15,17` — a path's lines, the file named once.
fn lines_of(report_row: &kansoku_paths::PathRow) -> String {
    let mut out = String::new();
    let mut file: Option<String> = None;
    for b in &report_row.blocks {
        let Some(l) = &b.line else { continue };
        let (f, n) = l.rsplit_once(':').unwrap_or((l.as_str(), ""));
        if file.as_deref() == Some(f) {
            out.push(',');
            out.push_str(n);
        } else {
            if !out.is_empty() {
                out.push(' ');
            }
            out.push_str(l);
            file = Some(f.to_string());
        }
    }
    out
}

fn write_csv(report: &PathReport, path: &Path) -> Result<()> {
    let mut w = BufWriter::new(File::create(path).with_context(|| format!("creating {}", path.display()))?);
    writeln!(w, "rank,count,share,instructions,ball_larus,path,lines")?;
    for r in &report.paths {
        let quote = |s: &str| format!("\"{}\"", s.replace('"', "\"\""));
        writeln!(
            w,
            "{},{},{:.6},{},{},{},{}",
            r.rank,
            r.count,
            r.share,
            r.instructions,
            r.ball_larus.map(|x| x.to_string()).unwrap_or_default(),
            quote(&r.text),
            quote(&lines_of(r))
        )?;
    }
    w.flush()?;
    Ok(())
}

/// Renders DOT to SVG with Graphviz.
pub fn render_svg(dot: &str, svg: &Path) -> Result<()> {
    let mut child = std::process::Command::new("dot")
        .arg("-Tsvg")
        .arg("-o")
        .arg(svg)
        .stdin(std::process::Stdio::piped())
        .spawn()
        .context("running Graphviz `dot` (install graphviz: scripts/setup does; or write --dot and render it elsewhere)")?;
    child.stdin.take().unwrap().write_all(dot.as_bytes())?;
    let status = child.wait()?;
    if !status.success() {
        bail!("Graphviz `dot` failed ({status}) rendering {}", svg.display());
    }
    Ok(())
}

#[derive(Serialize)]
struct JsonOut<'a> {
    source: &'a str,
    seconds: f64,
    blocks_per_second: f64,
    interrupted: bool,
    #[serde(flatten)]
    report: &'a PathReport,
}

fn exit_text(report: &PathReport) -> Option<String> {
    match (report.input.exit, report.input.signal) {
        (_, Some(sig)) => Some(format!(
            "the program was killed by {}{}; the paths up to there are reported",
            signal_name(sig),
            report.input.fault_address.map(|a| format!(" at 0x{a:x}")).unwrap_or_default()
        )),
        (Some(ExitStatus::Exited(c)), None) if c != 0 => Some(format!("the program exited with status {c}")),
        _ => None,
    }
}

pub fn run(args: Args) -> Result<()> {
    if args.cfg.is_some() && args.svg.is_none() && args.dot.is_none() {
        bail!("--cfg FUNCTION needs --svg OUT.svg or --dot OUT.dot to write the picture to");
    }
    let runs_program = matches!(args.source.as_str(), "valgrind" | "lackey" | "step");
    crate::output::report_to(crate::output::report_target(None, runs_program))?;
    let mut r = analyse(&args)?;
    for name in [&args.function, &args.cfg].into_iter().flatten() {
        r.analysis.check_function(name)?;
    }
    if runs_program {
        // A program ran: kansoku ends as it did (a recording's program ran elsewhere).
        match (r.report.input.signal, r.report.input.exit) {
            (Some(sig), _) => crate::output::exit_as(ExitStatus::Killed(sig)),
            (None, Some(exit)) => crate::output::exit_as(exit),
            (None, None) => {}
        }
    }
    let blocks_per_second = r.report.summary.blocks_seen as f64 / r.elapsed.as_secs_f64().max(1e-9);
    if let Some(out) = &args.output {
        if out.extension().is_some_and(|e| e == "json") {
            let f = File::create(out).with_context(|| format!("creating {}", out.display()))?;
            let all = JsonOut { source: &r.source, seconds: r.elapsed.as_secs_f64(), blocks_per_second, interrupted: r.interrupted, report: &r.report };
            serde_json::to_writer_pretty(BufWriter::new(f), &all)?;
        } else {
            write_csv(&r.report, out)?;
        }
    }
    if let Some(f) = &args.cfg {
        let dot = r.analysis.cfg_dot(f, 3)?;
        if let Some(p) = &args.dot {
            std::fs::write(p, &dot).with_context(|| format!("writing {}", p.display()))?;
        }
        if let Some(p) = &args.svg {
            render_svg(&dot, p)?;
        }
    }
    let mut shown = r.report.clone();
    shown.paths.truncate(args.top);
    if args.json {
        return print_json(&JsonOut { source: &r.source, seconds: r.elapsed.as_secs_f64(), blocks_per_second, interrupted: r.interrupted, report: &shown });
    }
    for w in &r.report.warnings {
        eprintln!("kansoku: warning: {w}");
    }
    reportln!(
        "paths of {} (source {}, calls {:?}, back edges {:?}, scope {:?})",
        r.report.program.as_deref().unwrap_or("?"),
        r.source,
        r.report.calls,
        r.report.back_edges,
        r.report.scope
    );
    // share: of the instructions executed in scope (block_share in the JSON counts blocks).
    let mut t = Table::new(&[">#", ">count", ">share", ">instrs", ">BL id", "path", "lines"]);
    for p in &shown.paths {
        t.row(vec![
            p.rank.to_string(),
            p.count.to_string(),
            format!("{:.1}%", p.share * 100.0),
            p.instructions.to_string(),
            match (p.ball_larus, p.repeats_block) {
                (Some(x), _) => x.to_string(),
                (None, true) => "repeats".into(),
                (None, false) => "-".into(),
            },
            p.text.clone(),
            lines_of(p),
        ]);
    }
    t.print();
    let s = &r.report.summary;
    reportln!(
        "\n{} distinct paths, {} paths executed, {} blocks ({} distinct) in {} functions; {} blocks seen in all; {:.2} s ({:.1} M blocks/s)",
        s.distinct_paths,
        s.paths_executed,
        s.blocks_executed,
        s.distinct_blocks,
        s.functions_covered,
        s.blocks_seen,
        r.elapsed.as_secs_f64(),
        blocks_per_second / 1e6
    );
    let mut ft = Table::new(&["function", ">blocks run", ">executions", ">paths seen", ">BL paths run/possible"]);
    for f in r.report.functions.iter().take(args.top) {
        ft.row(vec![
            f.function.clone(),
            format!("{}/{}", f.blocks_executed, f.blocks),
            f.block_executions.to_string(),
            f.paths_observed.to_string(),
            format!("{}/{}", f.possible_paths_run, f.possible_paths.map(|n| n.to_string()).unwrap_or_else(|| "huge".into())),
        ]);
    }
    reportln!();
    ft.print();
    if let Some(t) = exit_text(&r.report) {
        reportln!("\n{t}");
    }
    if r.interrupted {
        reportln!("\ninterrupted: the paths up to the interruption are reported");
    }
    if let Some(p) = &args.record {
        reportln!("block stream recorded in {}", p.display());
    }
    Ok(())
}

/// The demo stage: the figure-2 program under Valgrind, its four paths, and the CFG picture.
pub fn demo_stage(dir: &Path) -> Result<String> {
    let bin = dir.join("bin");
    let program = kansoku_examples::build("paths", &bin)?;
    let svg = dir.join("paths-walk.svg");
    let args = Args {
        source: "valgrind".into(),
        calls: CallsArg::Split,
        back_edges: BackEdgesArg::Address,
        scope: ScopeArg::Program,
        top: 10,
        function: Some("walk".into()),
        json: false,
        output: Some(dir.join("paths.csv")),
        cfg: Some("walk".into()),
        svg: Some(svg.clone()),
        dot: None,
        record: None,
        valgrind: "valgrind".into(),
        command: vec![program.to_string_lossy().into_owned(), "1000".into(), "10".into()],
    };
    let mut r = analyse(&args)?;
    write_csv(&r.report, &dir.join("paths.csv"))?;
    let dot = r.analysis.cfg_dot("walk", 3)?;
    let picture = match render_svg(&dot, &svg) {
        Ok(()) => format!("CFG picture: {}", svg.display()),
        Err(e) => format!("CFG picture skipped: {e:#}"),
    };
    let mut text = "seed 003 figure 2 (walk: A=BB0 branches to B=BB1 or C=BB2, D=BB3 loops back to A or exits to E=BB4), 10 walks of 1000 elements under Valgrind/Lackey:\n".to_string();
    for p in &r.report.paths {
        text.push_str(&format!("  {:>6} x {}\n", p.count, p.text));
    }
    text.push_str(&format!(
        "{} blocks in {:.2} s; walk's paths in {}; {picture}\nrerun: kansoku paths --function walk -- {} 1000 10",
        r.report.summary.blocks_seen,
        r.elapsed.as_secs_f64(),
        dir.join("paths.csv").display(),
        program.display()
    ));
    Ok(text)
}
