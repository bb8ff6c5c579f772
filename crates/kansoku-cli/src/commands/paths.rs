//! `kansoku paths [--source valgrind|lackey|exact|step|FILE] [--calls ...] [--back-edges ...] -- PROGRAM ARGS...`
//! — seed 003's path profile of a program, from Valgrind/Lackey, the exact tracer or a file.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use kansoku_core::{ExitStatus, RecordingKind};
use kansoku_export::Format;
use kansoku_paths::{AnalysisOptions, BackEdgeMode, BlockKind, BlockRecorder, CallMode, Keep, PathAnalysis, PathReport, Scope};
use kansoku_probe::blocks::{run_source, BlockSource, ToolCuts};
use kansoku_probe::valgrind::{tool_dir, LackeyOptions};
use kansoku_probe::{interrupt, Engine, ExactTraceOptions};
use serde::Serialize;

use crate::output::{reportln, print_json, signal_name, spinner, Print, Table};

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

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum CountInArg {
    Auto,
    Tool,
    Stream,
}

#[derive(clap::Args, Clone, Debug)]
pub struct Args {
    /// Where blocks come from: `valgrind` (kansoku's own Valgrind tool: superblock entries as
    /// a binary stream through a pipe; Lackey if the tool was not built), `lackey` (Valgrind's
    /// Lackey, its text trace through a pipe), `exact` (an exact trace on the fastest engine:
    /// kansoku's Valgrind tool where built), `step` (an exact trace by ptrace single-stepping,
    /// on the real CPU), or a file: a `.ksk` recording (blocks or instructions), a saved
    /// stream of kansoku's tool, or a Lackey log written with
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
    /// In -o and --json, list also the N most frequent paths of each function (the function
    /// a path starts in); the rest is counted (`summary.paths_left_out`, per function
    /// `paths_left_out`), not listed.
    #[arg(long, default_value_t = 10, value_name = "N")]
    pub per_function: usize,
    /// List every distinct path in -o and --json (a path-heavy program has hundreds of
    /// thousands: bzip2 -9 on 10 MB, 106,874).
    #[arg(long)]
    pub all_paths: bool,
    /// Show only paths lying entirely in this function.
    #[arg(long)]
    pub function: Option<String>,
    /// Print the report as JSON. While a program runs under observation the report goes to
    /// stderr (the program's stdout and stderr stay its own); from a file, to stdout.
    #[arg(long)]
    pub json: bool,
    /// Write the paths to this file (CSV, or the whole JSON report when it ends in .json):
    /// the --top most frequent and the --per-function most frequent of each function, or
    /// every one with --all-paths.
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
    /// Also write the profile for a viewer, as FORMAT=FILE (repeatable): `callgrind`
    /// (instructions per function, line and call: `callgrind_annotate FILE`, `kcachegrind
    /// FILE`), `collapsed` (instructions per call stack: `flamegraph.pl FILE > out.svg`,
    /// `inferno-flamegraph`), `pprof` (instructions per call stack, gzipped profile.proto:
    /// `go tool pprof -top FILE`; the three give each function Callgrind's cost), `perfetto` (every call as a slice on its thread, marker hits and
    /// iterations, on the instruction index: ui.perfetto.dev).
    #[arg(long, value_name = "FORMAT=FILE", value_parser = crate::exports::parse_export)]
    pub export: Vec<(Format, PathBuf)>,
    /// The valgrind launcher to run.
    #[arg(long, default_value = "valgrind")]
    pub valgrind: PathBuf,
    /// Where `--source valgrind` counts paths: `tool` (inside kansoku's Valgrind tool, which
    /// writes only its table of distinct superblock paths at the end: the fast way), `stream`
    /// (every superblock entry streamed to kansoku, as needed by --cfg, --record, the
    /// callgrind, collapsed, pprof and perfetto exports, --calls frames and --back-edges loops), or
    /// `auto` (the tool whenever none of those is asked for). The path tables are the same.
    #[arg(long, value_enum, default_value = "auto")]
    pub count_in: CountInArg,
    /// The program and its arguments (not needed for a file source).
    #[arg(last = true, num_args = 0..)]
    pub command: Vec<String>,
}

/// The Perfetto export of a run's calls, written while the analysis runs.
type CallsTimeline = kansoku_export::CallsPerfetto<BufWriter<File>>;

/// What one analysis produced, besides the report.
pub struct PathsRun {
    /// The Perfetto export being written, to close once the run's figures are known.
    pub timeline: Option<Arc<Mutex<CallsTimeline>>>,
    pub analysis: PathAnalysis,
    pub report: PathReport,
    pub source: String,
    /// Where the paths were counted: `tool` (kansoku's Valgrind tool, `--count-in tool`) or
    /// `kansoku` (every entry streamed to the analysis).
    pub counted_in: &'static str,
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
        track_calls: args.export.iter().any(|(f, _)| matches!(f, Format::Callgrind | Format::Collapsed | Format::Pprof)),
    }
}

/// The formats a path profile is written in.
const PATH_EXPORTS: [Format; 4] = [Format::Callgrind, Format::Collapsed, Format::Pprof, Format::Perfetto];

/// Writes the `--export` files; returns one line per file saying how to open it.
fn write_exports(args: &Args, files: Vec<File>, r: &mut PathsRun) -> Result<Vec<String>> {
    let mut done = Vec::new();
    let costs = if args.export.iter().any(|(f, _)| matches!(f, Format::Callgrind | Format::Collapsed | Format::Pprof)) { Some(r.analysis.costs()) } else { None };
    let command = if args.command.is_empty() { args.source.clone() } else { args.command.join(" ") };
    for ((format, path), file) in args.export.iter().zip(files) {
        let out = BufWriter::new(file);
        let written = match format {
            Format::Callgrind => costs.as_ref().map(|c| kansoku_export::write_callgrind(c, &command, out)),
            Format::Collapsed => costs.as_ref().map(|c| kansoku_export::write_collapsed(c, out)),
            Format::Pprof => {
                let comment = format!("kansoku paths of {command} (source {}, scope {:?}): instructions per call stack", r.source, r.report.scope);
                costs.as_ref().map(|c| kansoku_export::write_pprof(c, &comment, out))
            }
            Format::Perfetto => r.timeline.as_ref().map(|t| {
                let mut t = t.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
                let metadata = calls_metadata(&command, r, &t);
                t.close(&metadata)
            }),
            _ => None,
        };
        match written {
            Some(result) => result.with_context(|| format!("writing {}", path.display()))?,
            None => bail!("--export {}: this build cannot write that format from a path profile", format.name()),
        }
        done.push(crate::exports::written(*format, path));
    }
    Ok(done)
}

/// The `kansoku` instant's arguments for a timeline of calls.
fn calls_metadata(command: &str, r: &PathsRun, t: &CallsTimeline) -> kansoku_export::Args {
    use kansoku_export::ArgValue::{Text, Uint};
    vec![
        ("command".to_string(), Text(format!("kansoku paths --source {}", r.source))),
        ("program".into(), Text(command.to_string())),
        ("time_axis".into(), Text("instruction index: instructions of the basic blocks entered before, all threads (a rep-prefixed instruction counts once per entry); the trace has no time stamps".into())),
        ("slices".into(), Text("calls and returns recovered from the instruction stream by a shadow call stack per thread; a jump into another function (tail call, PLT stub) opens a slice too".into())),
        ("instructions".into(), Uint(t.instructions())),
        ("calls".into(), Uint(t.calls())),
        ("marker_hits".into(), Uint(t.markers())),
    ]
}

/// The source `--source` names: a program under kansoku's Valgrind tool (Lackey where the
/// tool was not built, saying why), under Lackey, an exact trace (`exact`: the fastest
/// engine; `step`: ptrace single-stepping), or a file.
fn block_source(args: &Args) -> Result<BlockSource> {
    let program = || -> Result<(PathBuf, Vec<String>)> { split_command(args) };
    let lackey = |(program, args): (PathBuf, Vec<String>), valgrind: &Path| LackeyOptions { valgrind: valgrind.to_path_buf(), program, args };
    Ok(match args.source.as_str() {
        "valgrind" => match tool_dir() {
            Ok(_) => match tool_cuts(args)? {
                Some(cuts) => BlockSource::ToolPaths(lackey(program()?, &args.valgrind), cuts),
                None => BlockSource::Tool(lackey(program()?, &args.valgrind)),
            },
            Err(reason) => {
                eprintln!("kansoku: note: {reason}; using Valgrind's Lackey instead (slower: a text line and a write per superblock)");
                BlockSource::Lackey(lackey(program()?, &args.valgrind))
            }
        },
        "lackey" => BlockSource::Lackey(lackey(program()?, &args.valgrind)),
        "exact" | "step" => {
            let (program, prog_args) = program()?;
            let engine = if args.source == "step" { Engine::Ptrace } else { super::trace::choose_engine(None) };
            BlockSource::Exact(ExactTraceOptions { engine, program, args: prog_args, ..Default::default() })
        }
        file => BlockSource::file(Path::new(file)).with_context(|| format!("--source {file}"))?,
    })
}

/// Whether kansoku's Valgrind tool counts the paths itself (and how it cuts), by
/// `--count-in`: it can when only the path table is asked for, with back edges by address
/// and calls that split or go through.
fn tool_cuts(args: &Args) -> Result<Option<ToolCuts>> {
    let mut needs_stream = Vec::new();
    if args.cfg.is_some() {
        needs_stream.push("--cfg (block-to-block transitions)");
    }
    if args.record.is_some() {
        needs_stream.push("--record (every block)");
    }
    if args.export.iter().any(|(f, _)| matches!(f, Format::Callgrind | Format::Collapsed | Format::Pprof | Format::Perfetto)) {
        needs_stream.push("the callgrind, collapsed, pprof and perfetto exports (calls followed block by block)");
    }
    if matches!(args.calls, CallsArg::Frames) {
        needs_stream.push("--calls frames (a path stack per thread)");
    }
    if matches!(args.back_edges, BackEdgesArg::Loops) {
        needs_stream.push("--back-edges loops (the CFG's dominators)");
    }
    let cuts = if matches!(args.calls, CallsArg::Through) { ToolCuts::Through } else { ToolCuts::Split };
    Ok(match args.count_in {
        CountInArg::Stream => None,
        CountInArg::Auto => needs_stream.is_empty().then_some(cuts),
        CountInArg::Tool if needs_stream.is_empty() => Some(cuts),
        CountInArg::Tool => bail!("--count-in tool: the tool counts path tables only; {} need --count-in stream", needs_stream.join(", ")),
    })
}

/// The path analysis `args` ask for; the calls are written as a Perfetto trace into
/// `perfetto` as they are found, when given.
pub fn analyse(args: &Args, perfetto: Option<File>) -> Result<PathsRun> {
    let start = Instant::now();
    interrupt::install();
    let source = block_source(args)?;
    let name = source.name();
    let header = source.header().with_context(|| format!("opening {name}"))?;
    if header.as_ref().is_some_and(|h| h.kind == RecordingKind::Samples) {
        bail!("{name} holds samples, not blocks or instructions: path profiles need every block (record with `kansoku paths --record` or `kansoku trace exact`)");
    }
    let program = source.program().with_context(|| format!("starting {name}"))?;
    if let Some((p, _)) = &program {
        crate::output::say_stops(p, "profiling");
    }
    let mut analysis = PathAnalysis::new(&options(args, program.as_ref().map(|(p, _)| p.clone())));
    let timeline = perfetto.map(|file| Arc::new(Mutex::new(CallsTimeline::new(BufWriter::new(file)))));
    if let Some(t) = &timeline {
        analysis.stream_call_timeline(Box::new(t.clone()));
    }
    if let Some(h) = &header {
        analysis.block_kind = BlockKind::of_header(h);
    }
    if let Some(path) = &args.record {
        let (prog, prog_args) = program.clone().unwrap_or_default();
        let label = match &source {
            BlockSource::Tool(_) | BlockSource::ToolPaths(..) => "valgrind".to_string(),
            BlockSource::Lackey(_) => "lackey".to_string(),
            BlockSource::Exact(o) if o.engine == Engine::Ptrace => "step".to_string(),
            BlockSource::Exact(_) => "exact".to_string(),
            BlockSource::Recording(_) => "recording".to_string(),
            BlockSource::ToolStream(_) => "valgrind stream".to_string(),
            BlockSource::LackeyLog(_) => "lackey log".to_string(),
        };
        analysis.record_into(BlockRecorder::create(path, &prog, prog_args, &label).with_context(|| format!("creating {}", path.display()))?);
    }
    let bar = spinner(&format!("profiling paths ({name})"), "blocks");
    let run = run_source(&source, &mut analysis, &mut |n| bar.set_position(n)).with_context(|| format!("running {name}"))?;
    bar.finish_and_clear();
    if let Some(e) = &run.read_error {
        eprintln!("kansoku: warning: {e}; the paths read so far are reported");
    }
    if let Some(at) = run.truncated_at {
        eprintln!("kansoku: warning: {name} is cut off at byte {at}; the paths read up to there are reported");
    }
    let ran_nothing = analysis.input_units() == 0 && !run.interrupted;
    match (&source, run.exit) {
        (BlockSource::Tool(o) | BlockSource::ToolPaths(o, _), Some(status)) if ran_nothing => {
            bail!("{} ran nothing under {}: it {}{}", o.program.display(), o.valgrind.display(), status_text(status), log_tail(&run.valgrind_log))
        }
        (BlockSource::Lackey(o), Some(status)) if ran_nothing => bail!("{} ran nothing under {} (Lackey): it {}", o.program.display(), o.valgrind.display(), status_text(status)),
        (BlockSource::LackeyLog(p), _) if analysis.stats.superblocks == 0 => bail!(
            "{} holds no Lackey superblock lines (`SB <address>`): is it a log of `valgrind --tool=lackey --trace-superblocks=yes -v -v`?",
            p.display()
        ),
        _ => {}
    }
    if let Some(at) = analysis.stats.tool_gave_up {
        bail!(
            "kansoku's Valgrind tool met a path of more than 65536 superblocks without a cut it could be sure of (at {at:#x}: a loop whose back edge it cannot see) and stopped counting; run again with --count-in stream"
        );
    }
    if !run.valgrind_log.is_empty() {
        analysis.feed_valgrind_log(&run.valgrind_log);
    }
    if let Some(status) = run.exit {
        analysis.set_exit(status);
    }
    analysis.finish().context("finishing the block recording")?;
    let elapsed = start.elapsed();
    let keep = if args.all_paths { Keep::All } else { Keep::Heaviest { overall: args.top, per_function: args.per_function } };
    let report = analysis.report_keeping(keep, args.function.as_deref());
    let counted_in = if matches!(source, BlockSource::ToolPaths(..)) { "tool" } else { "kansoku" };
    let source = match &source {
        BlockSource::Exact(o) if o.engine == Engine::Ptrace => "step".to_string(),
        _ => name,
    };
    Ok(PathsRun { timeline, analysis, report, source, counted_in, elapsed, interrupted: run.interrupted })
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

fn write_csv(report: &PathReport, path: &Path) -> Result<()> {
    let file = File::create(path).with_context(|| format!("creating {}", path.display()))?;
    report.write_csv(BufWriter::new(file)).with_context(|| format!("writing {}", path.display()))
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
    counted_in: &'a str,
    seconds: f64,
    blocks_per_second: f64,
    interrupted: bool,
    #[serde(flatten)]
    report: &'a PathReport,
}

pub fn run(args: Args) -> Result<()> {
    if args.cfg.is_some() && args.svg.is_none() && args.dot.is_none() {
        bail!("--cfg FUNCTION needs --svg OUT.svg or --dot OUT.dot to write the picture to");
    }
    let runs_program = matches!(args.source.as_str(), "valgrind" | "lackey" | "exact" | "step");
    crate::output::report_to(crate::output::report_target(None, runs_program))?;
    let export_files = crate::exports::create_exports(&args.export, &PATH_EXPORTS, "kansoku paths")?;
    let perfetto = match args.export.iter().zip(&export_files).filter(|((f, _), _)| *f == Format::Perfetto).collect::<Vec<_>>()[..] {
        [] => None,
        [(_, file)] => Some(file.try_clone()?),
        _ => bail!("--export perfetto: one Perfetto file per run (it is written while the program runs)"),
    };
    let mut r = analyse(&args, perfetto)?;
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
            let all = JsonOut { source: &r.source, counted_in: r.counted_in, seconds: r.elapsed.as_secs_f64(), blocks_per_second, interrupted: r.interrupted, report: &r.report };
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
    let exported = write_exports(&args, export_files, &mut r)?;
    let mut shown = r.report.clone();
    shown.paths.truncate(args.top);
    if args.json {
        return print_json(&JsonOut { source: &r.source, counted_in: r.counted_in, seconds: r.elapsed.as_secs_f64(), blocks_per_second, interrupted: r.interrupted, report: &shown });
    }
    for w in &r.report.warnings {
        eprintln!("kansoku: warning: {w}");
    }
    reportln!(
        "paths of {} (source {}{}, calls {:?}, back edges {:?}, scope {:?})",
        r.report.program.as_deref().unwrap_or("?"),
        r.source,
        if r.counted_in == "tool" { ", counted in the tool" } else { "" },
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
            p.lines(),
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
    if s.paths_left_out > 0 {
        if let Some(out) = &args.output {
            reportln!(
                "{} paths listed in {} (the {} most frequent and the {} most frequent of each function); {} left out, {} executions ({:.1}% of the instructions): --all-paths lists every one",
                s.paths_listed,
                out.display(),
                args.top,
                args.per_function,
                s.paths_left_out,
                s.executions_left_out,
                s.instructions_left_out as f64 * 100.0 / s.instructions_executed.max(1) as f64
            );
        }
    }
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
    if let Some(t) = r.report.ending() {
        reportln!("\n{t}");
    }
    if r.interrupted {
        reportln!("\ninterrupted: the paths up to the interruption are reported");
    }
    if let Some(p) = &args.record {
        reportln!("block stream recorded in {}", p.display());
    }
    for line in exported {
        reportln!("{line}");
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
        per_function: 10,
        all_paths: true,
        function: Some("walk".into()),
        json: false,
        output: Some(dir.join("paths.csv")),
        cfg: Some("walk".into()),
        svg: Some(svg.clone()),
        dot: None,
        record: None,
        export: Vec::new(),
        valgrind: "valgrind".into(),
        count_in: CountInArg::Auto,
        command: vec![program.to_string_lossy().into_owned(), "1000".into(), "10".into()],
    };
    let mut r = analyse(&args, None)?;
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
