//! `kansoku trace exact [--engine valgrind|ptrace] [--marker FUNC] [--iterations N] [--max-instructions N] [--data] -o FILE -- PROGRAM ARGS...`

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use kansoku_core::{ExitStatus, RecordingWriter};
use kansoku_probe::{trace_exact, Engine, ExactTraceOptions, TraceOutcome};
use serde::Serialize;

use crate::output::{reportln, print_json, signal_name, spinner};

#[derive(clap::Subcommand)]
pub enum TraceCommand {
    /// Record every user-space instruction of every thread (the ground truth): on
    /// kansoku's Valgrind tool (tens of millions of instructions/s) or by ptrace
    /// single-stepping on the real CPU (tens of thousands/s).
    Exact(ExactArgs),
}

/// `--engine`: what executes the traced program.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum EngineArg {
    /// kansoku's Valgrind tool, the default where it was built.
    Valgrind,
    /// ptrace single-stepping: the real CPU (its CPUID, its libc paths), 1000x slower.
    Ptrace,
}

/// The engine asked for, or the best one built (saying why when that is ptrace).
pub fn choose_engine(asked: Option<EngineArg>) -> Engine {
    match asked {
        Some(EngineArg::Valgrind) => Engine::Valgrind,
        Some(EngineArg::Ptrace) => Engine::Ptrace,
        None => {
            let (engine, why) = Engine::best();
            if let Some(why) = why {
                eprintln!("kansoku: note: exact traces use ptrace single-stepping (about 1000x slower): {why}");
            }
            engine
        }
    }
}

#[derive(clap::Args)]
pub struct ExactArgs {
    /// What executes the program: kansoku's Valgrind tool (default where built) or ptrace.
    #[arg(long, value_enum)]
    pub engine: Option<EngineArg>,
    /// Record only from the first entry of this function on: `F` (the program's, else the
    /// library's that defines it), `F@LIB` (`adler32@libz`) or `F@plt` (its PLT stub).
    #[arg(long)]
    pub marker: Option<String>,
    /// With --marker: stop after N iterations (marker entry to next entry) and let the
    /// program finish untraced.
    #[arg(long, requires = "marker")]
    pub iterations: Option<u64>,
    /// Stop after recording N instructions.
    #[arg(long)]
    pub max_instructions: Option<u64>,
    /// Record the address of every memory access (loads and stores), each after its
    /// instruction (the Valgrind engine).
    #[arg(long)]
    pub data: bool,
    /// The recording to write.
    #[arg(short, long)]
    pub output: PathBuf,
    /// Print the outcome as JSON (on stderr, as the rest of the outcome: stdout and
    /// stderr are the program's).
    #[arg(long)]
    pub json: bool,
    /// The program and its arguments.
    #[arg(last = true, required = true, num_args = 1..)]
    pub command: Vec<String>,
}

pub fn run(cmd: TraceCommand) -> Result<()> {
    match cmd {
        TraceCommand::Exact(args) => exact(args),
    }
}

#[derive(Serialize)]
pub struct ExactReport {
    pub output: PathBuf,
    pub program: PathBuf,
    pub engine: &'static str,
    pub instructions: u64,
    pub marker_hits: u64,
    pub threads: usize,
    pub stop: &'static str,
    pub exit: ExitStatus,
    pub signals: Vec<i32>,
    pub seconds: f64,
    pub instructions_per_second: f64,
    pub bytes: u64,
    pub bytes_per_instruction: f64,
}

/// Records an exact trace into `output`; shared by the command and the demo.
pub fn record_exact(options: &ExactTraceOptions, output: &Path) -> Result<ExactReport> {
    let program = kansoku_probe::exact::resolve(&options.program)?;
    let header = kansoku_probe::exact::recording_header(&program, options)?;
    let mut writer = RecordingWriter::create(output, &header)?;
    kansoku_probe::interrupt::install();
    crate::output::say_stops(&program.display().to_string(), "tracing");
    let bar = spinner("tracing", "instructions");
    let outcome = trace_exact(options, &mut writer, &mut |n| bar.set_position(n));
    bar.finish_and_clear();
    // Whatever happened, keep what was recorded.
    let outcome = match outcome {
        Ok(o) => {
            writer.finish()?;
            o
        }
        Err(e) => {
            let _ = writer.flush();
            return Err(e).with_context(|| format!("tracing {} (partial recording kept in {})", program.display(), output.display()));
        }
    };
    let bytes = std::fs::metadata(output).map(|m| m.len()).unwrap_or(0);
    Ok(report(&outcome, options.engine, output, bytes))
}

fn report(o: &TraceOutcome, engine: Engine, output: &Path, bytes: u64) -> ExactReport {
    ExactReport {
        output: output.to_path_buf(),
        program: o.program.clone(),
        engine: engine.name(),
        instructions: o.instructions,
        marker_hits: o.marker_hits,
        threads: o.threads,
        stop: o.stop.name(),
        exit: o.exit,
        signals: o.signals.clone(),
        seconds: o.elapsed.as_secs_f64(),
        instructions_per_second: o.instructions_per_second(),
        bytes,
        bytes_per_instruction: bytes as f64 / (o.instructions.max(1)) as f64,
    }
}

fn exact(args: ExactArgs) -> Result<()> {
    let options = ExactTraceOptions {
        engine: choose_engine(args.engine),
        program: PathBuf::from(&args.command[0]),
        args: args.command[1..].to_vec(),
        marker: args.marker,
        iterations: args.iterations,
        max_instructions: args.max_instructions,
        data: args.data,
    };
    crate::output::report_to(crate::output::ReportTo::Stderr)?;
    let r = record_exact(&options, &args.output)?;
    crate::output::exit_as(r.exit);
    if args.json {
        return print_json(&r);
    }
    reportln!(
        "{}: {} instructions, {} thread(s), {} marker hit(s) -> {} ({} bytes, {:.2} bytes/instruction)",
        r.program.display(),
        r.instructions,
        r.threads,
        r.marker_hits,
        r.output.display(),
        r.bytes,
        r.bytes_per_instruction
    );
    reportln!("traced by {} at {:.0} instructions/s for {:.2} s; stopped: {}", r.engine, r.instructions_per_second, r.seconds, r.stop.replace('_', " "));
    match r.exit {
        ExitStatus::Exited(c) => reportln!("program exited with status {c}"),
        ExitStatus::Killed(s) => reportln!("program was killed by {}; the recording holds everything up to it", signal_name(s)),
        ExitStatus::Detached => reportln!("program still running after tracing stopped"),
    }
    if r.stop == "marker_never_hit" {
        eprintln!("kansoku: warning: the marker function was never entered; nothing was recorded");
    }
    Ok(())
}
