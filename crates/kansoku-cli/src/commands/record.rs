//! `kansoku record [--period N | --time-period NS] [--marker FUNC] -o REC.ksk -- PROGRAM ARGS...`:
//! samples a program's user-space instruction pointer through perf_event (every N retired
//! instructions, or every NS of CPU time), with marker-function entries from kansoku's
//! in-process agent (or a uprobe). Without hardware counters it says so and samples
//! `cpu-clock`.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use kansoku_core::{ExitStatus, RecordingWriter};
use kansoku_probe::perf::SamplingClock;
use kansoku_probe::sampler::{record_samples, RecordProgress, SampleRecordingOptions};
use serde::Serialize;

use crate::output::{reportln, print_json, spinner};

#[derive(clap::Args)]
pub struct Args {
    /// Sample every N retired user-space instructions (hardware counter).
    #[arg(long, conflicts_with = "time_period")]
    pub period: Option<u64>,
    /// Sample every NS nanoseconds of the program's CPU time (cpu-clock).
    #[arg(long)]
    pub time_period: Option<u64>,
    /// Record entries of this function as marker hits: `F` (the program's, else the
    /// library's that defines it), `F@LIB` (`adler32@libz`) or `F@plt` (its PLT stub).
    #[arg(long)]
    pub marker: Option<String>,
    /// What takes the marker hits: kansoku's in-process agent (the default for dynamically
    /// linked programs sampled on cpu-clock: tens of nanoseconds a hit, nothing of it in the
    /// samples) or a kernel uprobe (microseconds, and counts retired instructions per hit
    /// where there is a PMU).
    #[arg(long, value_enum)]
    pub marker_by: Option<MarkerBy>,
    /// The recording to write.
    #[arg(short, long)]
    pub output: PathBuf,
    /// Print the outcome as JSON (on stderr: stdout and stderr are the program's).
    #[arg(long)]
    pub json: bool,
    /// Also write the recording for a viewer, as FORMAT=FILE: `firefox` (a Firefox Profiler
    /// profile; `kansoku show REC --export firefox=FILE` does the same later, perf.data too).
    #[arg(long, value_name = "FORMAT=FILE", value_parser = crate::exports::parse_export)]
    pub export: Vec<crate::exports::Export>,
    /// The program and its arguments.
    #[arg(last = true, required = true, num_args = 1..)]
    pub command: Vec<String>,
}

#[derive(Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum MarkerBy {
    Agent,
    Uprobe,
}

#[derive(Serialize)]
pub struct RecordReport {
    pub output: PathBuf,
    pub program: PathBuf,
    /// "instructions" or "cpu-clock".
    pub clock: &'static str,
    pub period: u64,
    /// Why instruction sampling was replaced by cpu-clock, if it was.
    pub fallback: Option<String>,
    pub samples: u64,
    pub markers: u64,
    /// "agent" or "uprobe" (None without --marker).
    pub marker_by: Option<&'static str>,
    /// Samples that landed in probe code (the agent, the kernel's uprobe slot), dropped.
    pub samples_in_probe: u64,
    pub lost: u64,
    pub exit: ExitStatus,
    pub seconds: f64,
}

/// The sampling clock (instructions when asked and available, else cpu-clock), a period of
/// 0 refused.
pub fn choose_clock(period: Option<u64>, time_period: Option<u64>) -> Result<(SamplingClock, Option<String>)> {
    if period == Some(0) || time_period == Some(0) {
        bail!("the sampling period must be at least 1 (got 0)");
    }
    Ok(kansoku_probe::sampler::choose_clock(period, time_period))
}

/// Records `program args` into `output`; shared by the command, the demo and benchmarks.
/// The agent takes marker hits wherever it applies (a dynamic program sampled on
/// cpu-clock: with instruction sampling the uprobe's per-hit instruction count is worth
/// its cost); otherwise a uprobe, saying why.
pub fn marker_by_agent(program: &Path, clock: SamplingClock, asked: Option<MarkerBy>) -> bool {
    match asked {
        Some(m) => m == MarkerBy::Agent,
        None if matches!(clock, SamplingClock::Instructions { .. }) => false,
        None => match kansoku_probe::agent::unsuitable(program) {
            Some(why) => {
                eprintln!("kansoku: marker hits by uprobe, not the agent: {why}");
                false
            }
            None => true,
        },
    }
}

pub fn record(program: &Path, args: &[String], clock: SamplingClock, marker: Option<&str>, by_agent: bool, output: &Path) -> Result<kansoku_probe::sampler::SampleRecordingOutcome> {
    let header = kansoku_probe::sampler::recording_header(program, args, clock, marker, by_agent)?;
    let mut writer = RecordingWriter::create(output, &header)?;
    kansoku_probe::interrupt::install();
    let options = SampleRecordingOptions {
        program: program.to_path_buf(),
        args: args.to_vec(),
        clock,
        marker: marker.map(str::to_string),
        marker_by_agent: by_agent && marker.is_some(),
        count_instructions: false,
    };
    let bar = spinner("sampling", "samples");
    let mut told_stopped = false;
    let outcome = record_samples(&options, &mut writer, &mut |p| match p {
        RecordProgress::Samples(n) => {
            told_stopped = false;
            bar.set_position(n)
        }
        RecordProgress::Stopped { signal } if !told_stopped => {
            told_stopped = true;
            crate::output::say(&kansoku_probe::stops::said(&program.display().to_string(), signal, "recording"));
        }
        RecordProgress::Stopped { .. } => {}
    });
    bar.finish_and_clear();
    match outcome {
        Ok(o) => {
            writer.finish()?;
            Ok(o)
        }
        Err(e) => {
            let _ = writer.flush();
            Err(e).with_context(|| format!("sampling {} (partial recording kept in {})", program.display(), output.display()))
        }
    }
}

pub fn run(args: Args) -> Result<()> {
    crate::output::report_to(crate::output::ReportTo::Stderr)?;
    let (clock, fallback) = choose_clock(args.period, args.time_period)?;
    if let Some(f) = &fallback {
        eprintln!("kansoku: warning: {f}");
    }
    let program = PathBuf::from(&args.command[0]);
    let export_files = crate::exports::create_exports(&args.export, &[kansoku_export::Format::Firefox], "kansoku record")?;
    let by_agent = args.marker.is_some() && marker_by_agent(&program, clock, args.marker_by);
    let o = record(&program, &args.command[1..], clock, args.marker.as_deref(), by_agent, &args.output)?;
    crate::output::exit_as(o.exit);
    for ((format, path), file) in args.export.iter().zip(export_files) {
        let (_, warnings) = kansoku_export::write_firefox_recording(&args.output, file).with_context(|| format!("writing {}", path.display()))?;
        warnings.iter().for_each(|w| eprintln!("kansoku: warning: {w}"));
        eprintln!("kansoku: {}", crate::exports::written(*format, path));
    }
    let (name, period) = match clock {
        SamplingClock::Instructions { period } => ("instructions", period),
        SamplingClock::CpuClock { period_ns } => ("cpu-clock", period_ns),
    };
    let r = RecordReport {
        output: args.output.clone(),
        program: o.program.clone(),
        clock: name,
        period,
        fallback,
        samples: o.samples,
        markers: o.markers,
        marker_by: args.marker.as_ref().map(|_| if by_agent { "agent" } else { "uprobe" }),
        samples_in_probe: o.in_probe,
        lost: o.lost,
        exit: o.exit,
        seconds: o.elapsed.as_secs_f64(),
    };
    if args.json {
        return print_json(&r);
    }
    reportln!(
        "{}: {} samples ({clock}), {} marker hits in {:.2} s -> {}",
        r.program.display(),
        r.samples,
        r.markers,
        r.seconds,
        r.output.display()
    );
    if r.samples_in_probe > 0 {
        eprintln!("kansoku: {} samples landed in probe code ({:.2} %) and were dropped, not recorded", r.samples_in_probe, 100.0 * r.samples_in_probe as f64 / (r.samples + r.samples_in_probe) as f64);
    }
    if r.lost > 0 {
        eprintln!("kansoku: warning: the kernel dropped {} records (buffer full); use a larger period", r.lost);
    }
    if args.marker.is_some() && r.markers == 0 {
        eprintln!("kansoku: warning: the marker function was never entered (or uprobes are unavailable); use --split count:T or function:NAME to reconstruct");
    }
    Ok(())
}
