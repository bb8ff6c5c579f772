//! `kansoku monitor` (seed 001's sampling method) and `kansoku monitor events` (its event
//! method). Observing is `kansoku-probe`'s, the figures are `kansoku-monitor`'s, the
//! pictures `kansoku-plot`'s; this module runs the loop, prints and saves.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{bail, Context, Result};
use serde::Serialize;

use kansoku_export::Format;
use kansoku_monitor::events::{analyse_on_cpu, calibrate, calibration_differences, Calibration, EventReport};
use kansoku_monitor::sampling::{summarise, Observation, SummaryOptions};
use kansoku_monitor::sampling_report::MonitorReport;
use kansoku_probe::events::{record_events, Calibrate, EventOptions, Mechanism};
use kansoku_probe::spawn::{resolve_program, ExecGate, Progress};
use kansoku_probe::sysstat::{observe_run, Monitor, RunEnd, TargetStart, Watch};

use crate::output::{report, reportln, print_json, Table};

#[derive(clap::Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct Args {
    #[command(subcommand)]
    pub events: Option<MonitorCommand>,
    #[command(flatten)]
    pub sampling: SamplingArgs,
}

#[derive(clap::Subcommand)]
pub enum MonitorCommand {
    /// Event method: measurement points (uprobes or ptrace traps) with hits, call counts and execution times.
    Events(EventArgs),
}

#[derive(clap::Args)]
pub struct SamplingArgs {
    /// Observation interval in milliseconds (1 and up).
    #[arg(long, default_value_t = 100)]
    pub interval: u64,
    /// Stop after this many seconds (default: when the program ends, or Ctrl-C).
    #[arg(long)]
    pub duration: Option<f64>,
    /// Observe this running process (and the whole system).
    #[arg(long, conflicts_with = "program")]
    pub pid: Option<i32>,
    /// Sample the program's functions every NS nanoseconds of its CPU time (perf
    /// cpu-clock). Default: a tenth of --interval, between 100 µs and 10 ms.
    #[arg(long, value_name = "NS")]
    pub sample_period: Option<u64>,
    /// Sample only the program's first thread. By default every thread and every child
    /// process it starts is sampled (functions of children are shown as `name (program)`).
    #[arg(long)]
    pub no_follow: bool,
    /// Print JSON instead of tables.
    #[arg(long)]
    pub json: bool,
    /// Write the report (text, or JSON with --json) to FILE. Without it the report goes to
    /// stderr when a program is observed (its own stdout and stderr stay untouched), else
    /// to stdout.
    #[arg(short, long, value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// Write kiviat.svg, timeseries.svg, observations.json and summary.json into this directory.
    #[arg(long)]
    pub svg: Option<PathBuf>,
    /// Also write the series for a viewer, as FORMAT=FILE: `perfetto` (a counter track per
    /// series of timeseries.svg: CPU active, user, kernel, iowait, I-O busy, each device's
    /// busy percent; open it at ui.perfetto.dev).
    #[arg(long, value_name = "FORMAT=FILE", value_parser = crate::exports::parse_export)]
    pub export: Vec<crate::exports::Export>,
    /// The program to run and observe, after `--`.
    #[arg(last = true)]
    pub program: Vec<String>,
}

#[derive(clap::Args)]
pub struct EventArgs {
    /// A point: FUNC (entry and exit: a routine), FUNC:entry, FUNC:exit, FUNC+OFF or 0xADDR;
    /// FUNC@LIB for a function of a shared library the program loads (malloc@libc,
    /// deflate@libz, memcpy@libc.so.6). Repeatable.
    #[arg(long = "probe", required = true)]
    pub probes: Vec<String>,
    /// How points are planted: kansoku's in-process agent (the default for dynamically linked
    /// programs; about a hundred nanoseconds a hit), kernel uprobes (microseconds) or the seed's
    /// ptrace traps (tens of microseconds).
    #[arg(long, value_enum)]
    pub mechanism: Option<MechanismArg>,
    /// Measure the per-hit overhead and subtract it: with the agent, on an empty routine of the
    /// agent's own; with uprobe and trap, by two points on consecutive instructions (next to the
    /// first probe's entry, unless --calibrate-on says where).
    #[arg(long)]
    pub calibrate: bool,
    /// Calibrate at the entry of this function (implies --calibrate; uprobe and trap, and
    /// without --mechanism it means uprobe): a function called often and not itself measured,
    /// so the overhead does not depend on the order of the probes.
    #[arg(long, value_name = "FUNC")]
    pub calibrate_on: Option<String>,
    #[arg(long)]
    pub json: bool,
    /// Write the report (text, or JSON with --json) to FILE instead of stderr.
    #[arg(short, long, value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// Write a histogram SVG per routine into this directory.
    #[arg(long)]
    pub svg: Option<PathBuf>,
    /// Show at most this many points in the table.
    #[arg(long, default_value_t = 20)]
    pub limit: usize,
    /// Also write the run for a viewer, as FORMAT=FILE: `perfetto` (a Perfetto trace: one
    /// slice per call on its thread, off-CPU stretches under each thread, the calibration
    /// in the `kansoku` instant's arguments; open it at ui.perfetto.dev).
    #[arg(long, value_name = "FORMAT=FILE", value_parser = crate::exports::parse_export)]
    pub export: Vec<crate::exports::Export>,
    #[arg(last = true, required = true)]
    pub program: Vec<String>,
}

#[derive(Clone, Copy, clap::ValueEnum)]
pub enum MechanismArg {
    Agent,
    Uprobe,
    Trap,
}

pub fn run(args: Args) -> Result<()> {
    match args.events {
        Some(MonitorCommand::Events(e)) => run_events(e).map(|_| ()),
        None => run_sampling(args.sampling).map(|_| ()),
    }
}

pub fn run_sampling(args: SamplingArgs) -> Result<MonitorReport> {
    measure_sampling(args, true)
}

fn measure_sampling(args: SamplingArgs, print: bool) -> Result<MonitorReport> {
    if args.interval == 0 {
        bail!("--interval must be at least 1 ms");
    }
    kansoku_probe::interrupt::install();
    if print {
        let observes_program = args.pid.is_some() || !args.program.is_empty();
        crate::output::report_to(crate::output::report_target(args.output.as_deref(), observes_program))?;
    }
    let export_files = crate::exports::create_exports(&args.export, &[Format::Perfetto], "kansoku monitor")?;
    let interval = Duration::from_millis(args.interval);
    // By default ~10 function samples per interval of CPU time, every 100 µs to 10 ms.
    let period_ns = match args.sample_period {
        Some(0) => bail!("--sample-period must be at least 1 ns"),
        Some(ns) => ns,
        None => (args.interval * 1_000_000 / 10).clamp(100_000, 10_000_000),
    };
    let follow = !args.no_follow;
    let mut child = None;
    let (monitor, target) = if let Some(pid) = args.pid {
        let m = Monitor::new(Some((pid, TargetStart::Attach)), Some(period_ns), follow).with_context(|| format!("cannot observe process {pid}"))?;
        (m, Some(pid))
    } else if let Some((program, rest)) = args.program.split_first() {
        let path = resolve_program(Path::new(program))?;
        let gate = ExecGate::spawn(&path, rest)?;
        let pid = gate.pid.as_raw();
        let m = Monitor::new(Some((pid, TargetStart::AtExec)), Some(period_ns), follow)?;
        child = Some(gate.open());
        (m, Some(pid))
    } else {
        (Monitor::new(None, None, false)?, None)
    };
    let mut monitor = monitor;
    let mut warnings = Vec::new();
    if let Some(p) = &monitor.function_sampling_problem {
        eprintln!("kansoku: warning: {p}; CPU, device and thread figures are still taken from /proc");
        warnings.push(p.clone());
    } else if let Some(p) = &monitor.follow_problem {
        eprintln!("kansoku: warning: {p}");
        warnings.push(p.clone());
    }
    if args.duration.is_none() && target.is_none() {
        eprintln!("kansoku monitor: observing the system until Ctrl-C (or use --duration S)");
    }
    let watch = Watch { interval, child, duration: args.duration };
    let said_stopped = &mut |sig| eprintln!("kansoku: the program is stopped by {}; it runs on when it gets SIGCONT (or press Ctrl-C to end)", crate::output::signal_name(sig));
    let (observations, end) = observe_run(&mut monitor, &watch, said_stopped)?;
    let ended = match end {
        RunEnd::ProgramEnded(exit) => {
            crate::output::exit_as(exit);
            match exit {
                kansoku_core::ExitStatus::Killed(sig) => format!("the program was killed by {}", crate::output::signal_name(sig)),
                kansoku_core::ExitStatus::Exited(code) => format!("the program exited with status {code}"),
                kansoku_core::ExitStatus::Detached => "the program was detached".into(),
            }
        }
        RunEnd::TargetGone { pid, after_s } => {
            let msg = format!("process {pid} exited after {after_s:.2} s; reporting the {} observations taken so far", observations.len());
            eprintln!("kansoku: {msg}");
            msg
        }
        RunEnd::Interrupted(exit) => {
            if let Some(exit) = exit {
                crate::output::exit_as(exit);
            }
            "interrupted (Ctrl-C); everything observed so far is reported".into()
        }
        RunEnd::DurationElapsed(d) => format!("{d} s elapsed"),
    };
    if monitor.lost_samples > 0 {
        warnings.push(format!("{} function samples were lost (buffer full)", monitor.lost_samples));
    }
    if monitor.unattributed_samples > 0 {
        warnings.push(format!("{} function samples are not attributed: their process ended before its memory map could be read", monitor.unattributed_samples));
    }
    let summary = summarise(&observations, &SummaryOptions::default());
    if target.is_some() && monitor.function_sampling_problem.is_none() && summary.function_samples == 0 {
        warnings.push(format!(
            "no function samples: the program used less than one sampling period ({period_ns} ns) of CPU time; lower --sample-period to see its functions"
        ));
    }
    let report = MonitorReport { interval_ms: args.interval, target, ended, warnings, summary };
    if let Some(dir) = &args.svg {
        save_sampling(dir, &report, &observations)?;
    }
    if !print {
    } else if args.json {
        print_json(&report)?;
    } else {
        report!("{}", report.text());
        if let Some(dir) = &args.svg {
            reportln!("\nwrote {0}/kiviat.svg, {0}/timeseries.svg, {0}/summary.json, {0}/observations.json", dir.display());
        }
    }
    // after the report: an export that fails must not take the report with it
    for ((format, path), file) in args.export.iter().zip(export_files) {
        write_sampling_timeline(&args, &report, std::io::BufWriter::new(file)).with_context(|| format!("writing {}", path.display()))?;
        eprintln!("kansoku: {}", crate::exports::written(*format, path));
    }
    Ok(report)
}

/// The sampling series as Perfetto counters, under the target's process (or the system).
fn write_sampling_timeline(args: &SamplingArgs, r: &MonitorReport, out: impl std::io::Write) -> Result<()> {
    use kansoku_export::ArgValue::{Text, Uint};
    let title = match (args.program.first(), r.target) {
        (Some(program), _) => program.clone(),
        (None, Some(pid)) => format!("process {pid}"),
        (None, None) => "system".to_string(),
    };
    let devices: Vec<String> = r.summary.devices.iter().map(|d| d.name.clone()).collect();
    let metadata = vec![
        ("command".to_string(), Text("kansoku monitor".into())),
        ("target".into(), Text(title.clone())),
        ("ended".into(), Text(r.ended.clone())),
        ("time_axis".into(), Text("nanoseconds since the first observation; each value is the interval that ends there".into())),
        ("interval_ms".into(), Uint(r.interval_ms)),
        ("observations".into(), Uint(r.summary.observations as u64)),
    ];
    let timeline = kansoku_export::sampling_timeline(&title, r.target, &r.summary.series, &devices, metadata);
    kansoku_export::write_perfetto(&timeline, out)?;
    Ok(())
}

fn save_sampling(dir: &Path, report: &MonitorReport, observations: &[Observation]) -> Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    write(&dir.join("kiviat.svg"), &kansoku_monitor::pictures::kiviat(&report.summary))?;
    write(&dir.join("timeseries.svg"), &kansoku_monitor::pictures::busy_series(&report.summary))?;
    write(&dir.join("summary.json"), &serde_json::to_string_pretty(report)?)?;
    write(&dir.join("observations.json"), &serde_json::to_string(observations)?)?;
    Ok(())
}

fn write(path: &Path, text: &str) -> Result<()> {
    std::fs::write(path, text).with_context(|| format!("writing {}", path.display()))
}

/// What `kansoku monitor events --json` prints.
#[derive(Serialize)]
pub struct EventsJson {
    pub mechanism: String,
    pub program: String,
    pub exit: String,
    pub interrupted: bool,
    pub lost: u64,
    /// What was inconsistent in the agent's shared memory (the program wrote into it); the
    /// figures count only the hits read before each inconsistency.
    pub broken: Vec<String>,
    /// How the points were planted (a point whose module never loaded, one probed by
    /// uprobe instead), said in the report itself too, not only on stderr.
    pub notes: Vec<String>,
    pub calibration: Option<Calibration>,
    /// The first point of the calibration pair (a probe, or `calibrate:FUNC`).
    pub calibrated_at: Option<String>,
    pub report: EventReport,
}

/// The agent wherever it applies; uprobes otherwise, saying why.
fn default_mechanism(program: &Path) -> Mechanism {
    match kansoku_probe::agent::unsuitable(program) {
        None => Mechanism::Agent,
        Some(why) => {
            eprintln!("kansoku: probing by uprobe, not the agent: {why}");
            Mechanism::Uprobe
        }
    }
}

pub fn run_events(args: EventArgs) -> Result<EventsJson> {
    kansoku_probe::interrupt::install();
    crate::output::report_to(crate::output::report_target(args.output.as_deref(), true))?;
    let (program, rest) = args.program.split_first().context("no program given after --")?;
    let mechanism = match args.mechanism {
        Some(MechanismArg::Agent) => Mechanism::Agent,
        Some(MechanismArg::Uprobe) => Mechanism::Uprobe,
        Some(MechanismArg::Trap) => Mechanism::Trap,
        // two points on consecutive instructions of FUNC: a uprobe pair
        None if args.calibrate_on.is_some() => Mechanism::Uprobe,
        None => default_mechanism(Path::new(program)),
    };
    if mechanism == Mechanism::Uprobe && !kansoku_probe::perf::uprobes_available() {
        bail!("this kernel has no uprobe PMU (/sys/bus/event_source/devices/uprobe); use --mechanism trap");
    }
    let calibrate_at = match (&args.calibrate_on, args.calibrate) {
        (Some(f), _) => Calibrate::At(f.clone()),
        (None, true) => Calibrate::FirstProbe,
        (None, false) => Calibrate::Off,
    };
    let export_files = crate::exports::create_exports(&args.export, &[Format::Perfetto], "kansoku monitor events")?;
    // a timeline needs every hit; the report alone is analysed as the hits are read
    let options = EventOptions { program: PathBuf::from(program), args: rest.to_vec(), probes: args.probes.clone(), mechanism, calibrate: calibrate_at, keep_hits: !args.export.is_empty() };
    let bar = crate::output::spinner("measuring", "hits");
    let r = record_events(&options, &mut |p| match p {
        Progress::Count(n) => bar.set_position(n),
        Progress::Stopped { signal } => crate::output::say(&kansoku_probe::stops::said(program, signal, "measuring")),
    })?;
    bar.finish_and_clear();
    // the notes are in the report; said on stderr too when the report goes to a file
    if args.output.is_some() {
        for note in &r.notes {
            eprintln!("kansoku: {note}");
        }
    }
    let points: Vec<_> = r.plan.points.iter().map(|p| p.point.clone()).collect();
    let (calibration, report) = analysed(&r, &points);
    let calibrated_at = r.plan.calibration.map(|(a, _)| r.plan.points[a as usize].point.name.clone());
    if (args.calibrate || args.calibrate_on.is_some()) && calibration.is_none() {
        eprintln!("kansoku: warning: the calibration points were never hit in sequence; no overhead subtracted");
    }
    crate::output::exit_as(r.exit);
    let exit = match r.exit {
        kansoku_core::ExitStatus::Exited(c) => format!("exited with status {c}"),
        kansoku_core::ExitStatus::Killed(s) => format!("killed by {}", crate::output::signal_name(s)),
        other => format!("{other:?}"),
    };
    let out = EventsJson { mechanism: mechanism.to_string(), program: r.plan.program.display().to_string(), exit, interrupted: r.interrupted, lost: r.lost, broken: r.broken.clone(), notes: r.notes.clone(), calibration, calibrated_at, report };
    if let Some(dir) = &args.svg {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        for rt in &out.report.routines {
            if rt.calls > 0 {
                let title = format!("{}: {} calls, p50 {:.0} ns, mean {:.0} ns, max {:.0} ns", rt.name, rt.calls, rt.p50_ns, rt.mean_ns, rt.max_ns);
                let svg = kansoku_plot::log_histogram(&title, "execution time per call (log scale)", &rt.log_histogram);
                write(&dir.join(format!("{}-histogram.svg", rt.name)), &svg)?;
            }
        }
    }
    if args.json {
        print_json(&out)?;
    } else {
        report!("{}", events_text(&out, args.limit));
    }
    // after the report: an export that fails must not take the report with it
    for ((format, path), file) in args.export.iter().zip(export_files) {
        write_events_timeline(&out, &r, &points, std::io::BufWriter::new(file)).with_context(|| format!("writing {}", path.display()))?;
        eprintln!("kansoku: {}", crate::exports::written(*format, path));
    }
    Ok(out)
}

/// The calibration and the report of a run: the agent's, analysed while it ran; uprobe and
/// trap hits analysed now.
fn analysed(r: &kansoku_probe::events::EventOutcome, points: &[kansoku_monitor::events::Point]) -> (Option<Calibration>, EventReport) {
    if let Some((calibration, report)) = &r.analysed {
        return (*calibration, report.clone());
    }
    let calibration = r.plan.calibration.and_then(|(a, b)| calibrate(&calibration_differences(&r.hits, a, b)));
    (calibration, analyse_on_cpu(points, &r.plan.routines, &r.hits, calibration.map(|c| c.overhead_ns), r.measured_ns, &r.off_cpu, r.clock_resolution_ns))
}

/// The run as a Perfetto timeline: the calls as the analysis paired them, and what a
/// reader needs to trust the picture (how points were planted, what was calibrated).
fn write_events_timeline(e: &EventsJson, r: &kansoku_probe::events::EventOutcome, points: &[kansoku_monitor::events::Point], out: impl std::io::Write) -> Result<()> {
    let calls = kansoku_monitor::events::calls(points, &r.hits);
    // the calibration pair's thousands of hits would bury the program's own instants
    let calibration = r.plan.calibration.map_or(Vec::new(), |(a, b)| vec![a, b]);
    let hits: Vec<_> = r.hits.iter().filter(|h| !calibration.contains(&h.point)).copied().collect();
    let run = kansoku_export::EventRun { program: &e.program, points, routines: &r.plan.routines, hits: &hits, calls: &calls, off_cpu: &r.off_cpu, metadata: events_metadata(e) };
    kansoku_export::write_perfetto(&kansoku_export::events_timeline(run), out)?;
    Ok(())
}

/// The `kansoku` instant's arguments for an event-mode run.
fn events_metadata(e: &EventsJson) -> kansoku_export::Args {
    use kansoku_export::ArgValue::{Float, Text, Uint};
    let mut m = vec![
        ("command".to_string(), Text("kansoku monitor events".into())),
        ("program".into(), Text(e.program.clone())),
        ("mechanism".into(), Text(e.mechanism.clone())),
        ("exit".into(), Text(e.exit.clone())),
        ("time_axis".into(), Text("CLOCK_MONOTONIC nanoseconds".into())),
        ("slices".into(), Text("entry to exit hit of each completed call, as stamped: the report's times subtract the overhead per enclosed hit and the off-CPU time".into())),
        ("measured_ns".into(), Uint(e.report.measured_ns)),
        ("hits".into(), Uint(e.report.hits)),
        ("lost_hits".into(), Uint(e.lost)),
    ];
    match &e.calibration {
        Some(c) => m.extend([
            ("overhead_subtracted_ns".to_string(), Float(c.overhead_ns)),
            ("calibration_pairs".into(), Uint(c.samples as u64)),
            ("calibration_median_ns".into(), Float(c.median_ns)),
            ("calibration_p99_ns".into(), Float(c.p99_ns)),
            ("calibrated_at".into(), Text(e.calibrated_at.clone().unwrap_or_else(|| "the agent's own empty routine".into()))),
        ]),
        None => m.push(("overhead_subtracted_ns".into(), Text("none (no calibration: run with --calibrate)".into()))),
    }
    m
}

pub fn events_text(e: &EventsJson, limit: usize) -> String {
    let r = &e.report;
    let mut out = format!(
        "{} points by {} in {} ({}), {:.3} s, {} hits{}{}\n",
        r.points.len(),
        e.mechanism,
        e.program,
        e.exit,
        r.measured_ns as f64 / 1e9,
        r.hits,
        if e.lost > 0 { format!(", {} LOST", e.lost) } else { String::new() },
        if e.interrupted { " (interrupted: what was measured so far)" } else { "" }
    );
    for note in &e.notes {
        out.push_str(&format!("note: {note}\n"));
    }
    if !e.broken.is_empty() {
        out.push_str("THE AGENT'S SHARED MEMORY WAS OVERWRITTEN (the program wrote into it): the figures below count only the hits read before each inconsistency, and may be incomplete:\n");
        // a program that overwrote every ring gets the first few said, and a count
        for b in e.broken.iter().take(8) {
            out.push_str(&format!("  {b}\n"));
        }
        if e.broken.len() > 8 {
            out.push_str(&format!("  and {} more (all in --json)\n", e.broken.len() - 8));
        }
    }
    if let Some(c) = &e.calibration {
        let how = if e.mechanism == "agent" { "an empty routine of the agent's own, probed".to_string() } else { format!("two points on consecutive instructions at {}", e.calibrated_at.as_deref().unwrap_or("?")) };
        out.push_str(&format!(
            "overhead per hit ({how}, {} pairs): {:.1} ns subtracted per hit (mean of the middle 80 %; median {:.0} ns, mean {:.0} ns, p99 {:.0} ns)\n",
            c.samples,
            c.overhead_ns,
            c.median_ns,
            c.mean_ns,
            c.p99_ns
        ));
    }
    if r.clock_resolution_ns > 0.0 {
        out.push_str(&format!("the clock moves in {:.1} ns steps: p50 and p99 are taken between its steps, not on them\n", r.clock_resolution_ns));
    }
    if !r.routines.is_empty() {
        let mut t = Table::new(&["routine", "calls", "calls/s", "mean ns", "p50", "p99", "max", "exclusive mean", "uncorrected mean"]);
        for x in &r.routines {
            t.row(vec![
                x.name.clone(),
                x.calls.to_string(),
                format!("{:.1}", x.per_second),
                format!("{:.0}", x.mean_ns),
                format!("{:.0}", x.p50_ns),
                format!("{:.0}", x.p99_ns),
                format!("{:.0}", x.max_ns),
                format!("{:.0}", x.exclusive_mean_ns),
                format!("{:.0}", x.raw_mean_ns),
            ]);
            if x.unfinished + x.abandoned + x.unmatched_exits > 0 {
                out.push_str(&format!("note: {}: {} unfinished, {} abandoned, {} unmatched exits\n", x.name, x.unfinished, x.abandoned, x.unmatched_exits));
            }
            if x.preempted_ns + x.blocked_ns > 0.0 {
                out.push_str(&format!(
                    "note: {}: {:.3} ms preempted (in {} calls) and {:.3} ms blocked inside calls, left out of its on-CPU times\n",
                    x.name,
                    x.preempted_ns / 1e6,
                    x.preempted_calls,
                    x.blocked_ns / 1e6
                ));
            }
            if x.clamped_at_zero > 0 {
                out.push_str(&format!(
                    "note: {}: {} of {} calls ({:.0} %) measured shorter than the overhead subtracted and are reported as 0 ns: the routine is shorter than this mechanism resolves\n",
                    x.name,
                    x.clamped_at_zero,
                    x.calls,
                    100.0 * x.clamped_at_zero as f64 / x.calls.max(1) as f64
                ));
            }
        }
        out.push_str(&t.render());
    }
    let mut t = Table::new(&["point", "address", "hits", "hits/s"]);
    for p in r.points.iter().take(limit) {
        t.row(vec![p.name.clone(), crate::output::hex(p.address), p.hits.to_string(), format!("{:.1}", p.per_second)]);
    }
    out.push('\n');
    out.push_str(&t.render());
    if r.points.len() > limit {
        out.push_str(&format!("... {} more points (--limit, or --json for all)\n", r.points.len() - limit));
    }
    out
}

/// Demo: a short monitor run of the CPU-bound workload.
pub fn demo_stage(dir: &Path) -> Result<String> {
    let program = kansoku_examples::build("workload", &dir.join("bin"))?;
    let svg = dir.join("monitor");
    let args = SamplingArgs {
        interval: 50,
        duration: None,
        pid: None,
        json: true,
        output: None,
        sample_period: None,
        no_follow: false,
        svg: Some(svg.clone()),
        export: Vec::new(),
        program: vec![program.display().to_string(), "cpu".into(), "1".into(), "1".into()],
    };
    // Everything goes to the demo's files; the summary line below is the demo's output.
    let r = measure_sampling(args, false)?;
    let s = &r.summary;
    Ok(format!(
        "monitor of `workload cpu 1 1` every 50 ms: CPU active {:.1}%, CPU only {:.1}%, I-O busy {:.1}%, target {:.1}% of all CPU; top function {}\n\
         pictures: {}/kiviat.svg, {}/timeseries.svg",
        s.eight.cpu_active,
        s.eight.cpu_only,
        s.eight.io_busy,
        s.programs.first().map_or(0.0, |p| p.percent),
        s.functions.first().map_or("-".to_string(), |f| format!("{} ({:.0}% of samples)", f.name, f.percent)),
        svg.display(),
        svg.display()
    ))
}

/// Demo: event timing of the events example's functions, both mechanisms, calibrated.
pub fn events_demo_stage(dir: &Path) -> Result<String> {
    let program = kansoku_examples::build("events", &dir.join("bin"))?;
    let mut text = String::new();
    for mechanism in [MechanismArg::Trap, MechanismArg::Uprobe, MechanismArg::Agent] {
        if matches!(mechanism, MechanismArg::Uprobe) && !kansoku_probe::perf::uprobes_available() {
            text.push_str("uprobe: skipped (no uprobe PMU)\n");
            continue;
        }
        let options = EventOptions {
            program: program.clone(),
            args: vec!["50".into(), "200000".into()],
            probes: vec!["spin".into(), "leaf".into(), "recurse".into()],
            mechanism: match mechanism {
                MechanismArg::Trap => Mechanism::Trap,
                MechanismArg::Uprobe => Mechanism::Uprobe,
                MechanismArg::Agent => Mechanism::Agent,
            },
            calibrate: kansoku_probe::events::Calibrate::FirstProbe,
            keep_hits: false,
        };
        let r = match record_events(&options, &mut |_| {}) {
            Ok(r) => r,
            Err(e @ kansoku_probe::ProbeError::Agent { .. }) => {
                text.push_str(&format!("agent: skipped ({e})\n"));
                continue;
            }
            Err(e) => return Err(e.into()),
        };
        let points: Vec<_> = r.plan.points.iter().map(|p| p.point.clone()).collect();
        let (cal, rep) = analysed(&r, &points);
        let m = options.mechanism.to_string();
        for rt in &rep.routines {
            text.push_str(&format!("{m}: {} calls={} p50 {:.0} ns mean {:.0} ns (uncorrected {:.0})\n", rt.name, rt.calls, rt.p50_ns, rt.mean_ns, rt.raw_mean_ns));
        }
        if let Some(c) = cal {
            text.push_str(&format!("{m}: overhead per hit {:.1} ns (mean of the middle 80 % of {})\n", c.overhead_ns, c.samples));
        }
    }
    text.push_str("expected: spin 50 calls of 200000 ns (its own clock), leaf 150, recurse 250\n");
    Ok(text)
}
