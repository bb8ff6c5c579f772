//! `kansoku wave`: seed 001's program waveform — code and data addresses against time (or
//! instruction number), labelled by function / section / heap / stack — with the
//! autocorrelation, spectrum and dominant period the seed proposed as its next step.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use kansoku_monitor::wave::SignalAnalysis;
use kansoku_monitor::wave_report::{analyse, WaveReport};
use kansoku_probe::wave::{record_wave, WaveMode, WaveOptions, WaveOutcome};

use crate::output::{report, reportln, print_json};

#[derive(clap::Args)]
pub struct Args {
    /// Sample every N retired instructions (needs a hardware PMU).
    #[arg(long, conflicts_with_all = ["time_period", "exact"])]
    pub period: Option<u64>,
    /// Sample every NS nanoseconds of CPU time (perf cpu-clock). Default 20000.
    #[arg(long, conflicts_with = "exact")]
    pub time_period: Option<u64>,
    /// Every instruction from the first entry of --marker, with the data addresses it
    /// reads and writes (on kansoku's Valgrind tool where it is built, else ptrace).
    #[arg(long)]
    pub exact: bool,
    /// With --exact: what executes the program (default: valgrind where built).
    #[arg(long, value_enum, requires = "exact")]
    pub engine: Option<super::trace::EngineArg>,
    /// With --exact: start at the first entry of this function (`F`, `F@LIB` or `F@plt`).
    #[arg(long, default_value = "main")]
    pub marker: String,
    /// With --exact: stop after this many instructions.
    #[arg(long, default_value_t = 200_000)]
    pub max_instructions: u64,
    /// Write the waveform picture here (and the autocorrelation next to it, *-acf.svg).
    #[arg(long)]
    pub svg: Option<PathBuf>,
    #[arg(long)]
    pub json: bool,
    /// Write the report (text, or JSON with --json) to FILE instead of stderr.
    #[arg(short, long, value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// Also write the waveform for a viewer, as FORMAT=FILE: `perfetto` (counter tracks
    /// `code address` and `data address`, on nanoseconds or, with --exact, instruction
    /// numbers; open it at ui.perfetto.dev).
    #[arg(long, value_name = "FORMAT=FILE", value_parser = crate::exports::parse_export)]
    pub export: Vec<crate::exports::Export>,
    #[arg(last = true, required = true)]
    pub program: Vec<String>,
}

pub fn run(args: Args) -> Result<()> {
    kansoku_probe::interrupt::install();
    crate::output::report_to(crate::output::report_target(args.output.as_deref(), true))?;
    let (program, rest) = args.program.split_first().context("no program given after --")?;
    crate::output::say_stops(program, "observing");
    let mode = if args.exact {
        WaveMode::Exact { marker: Some(args.marker.clone()), max_instructions: args.max_instructions }
    } else if let Some(period) = args.period {
        if let Err(why) = kansoku_probe::perf::hardware_counters() {
            bail!("--period counts instructions, but {why}; use --time-period NS (cpu-clock) or --exact");
        }
        WaveMode::SampledInstructions { period }
    } else {
        WaveMode::Sampled { period_ns: args.time_period.unwrap_or(20_000) }
    };
    let export_files = crate::exports::create_exports(&args.export, &[kansoku_export::Format::Perfetto], "kansoku wave")?;
    let engine = if args.exact { super::trace::choose_engine(args.engine) } else { kansoku_probe::Engine::Ptrace };
    let options = WaveOptions { program: PathBuf::from(program), args: rest.to_vec(), mode, engine };
    let bar = crate::output::spinner("observing", "points");
    let outcome = record_wave(&options, &mut |n| bar.set_position(n))?;
    // ends as the program did, as the other commands that run one (issue 14)
    if let Some(exit) = outcome.exit {
        crate::output::exit_as(exit);
    }
    bar.finish_and_clear();
    let cpu_period_ns = match options.mode {
        WaveMode::Sampled { period_ns } => Some(period_ns),
        _ => None,
    };
    let (report, code, data) = analyse(&outcome, args.exact, cpu_period_ns);
    if let Some(svg) = &args.svg {
        save_svgs(svg, &outcome, &report, &code, &data, args.exact)?;
    }
    if args.json {
        print_json(&report)?;
    } else {
        report!("{}", report.text());
        if let Some(svg) = &args.svg {
            reportln!("wrote {} and {}", svg.display(), acf_path(svg).display());
        }
    }
    // after the report: an export that fails must not take the report with it
    for ((format, path), file) in args.export.iter().zip(export_files) {
        let metadata = wave_metadata(&report, args.exact);
        let timeline = kansoku_export::wave_timeline(&report.program, &outcome.points, args.exact, metadata);
        kansoku_export::write_perfetto(&timeline, std::io::BufWriter::new(file)).with_context(|| format!("writing {}", path.display()))?;
        eprintln!("kansoku: {}", crate::exports::written(*format, path));
    }
    Ok(())
}

/// The `kansoku` instant's arguments for a waveform.
fn wave_metadata(r: &WaveReport, exact: bool) -> kansoku_export::Args {
    use kansoku_export::ArgValue::{Text, Uint};
    let axis = if exact { "instruction number (every instruction from the marker)" } else { "nanoseconds since the first point" };
    vec![
        ("command".to_string(), Text("kansoku wave".into())),
        ("program".into(), Text(r.program.clone())),
        ("clock".into(), Text(r.clock.clone())),
        ("time_axis".into(), Text(axis.into())),
        ("data_address".into(), Text("the first memory operand of each point's instruction".into())),
        ("points".into(), Uint(r.points as u64)),
        ("points_with_data".into(), Uint(r.points_with_data as u64)),
    ]
}

fn acf_path(svg: &Path) -> PathBuf {
    let stem = svg.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_else(|| "wave".into());
    svg.with_file_name(format!("{stem}-acf.svg"))
}

fn save_svgs(svg: &Path, o: &WaveOutcome, r: &WaveReport, ca: &SignalAnalysis, da: &SignalAnalysis, exact: bool) -> Result<()> {
    if let Some(d) = svg.parent() {
        if !d.as_os_str().is_empty() {
            std::fs::create_dir_all(d).with_context(|| format!("creating {}", d.display()))?;
        }
    }
    let pictures = kansoku_monitor::pictures::waveform(o, r, exact);
    std::fs::write(svg, pictures).with_context(|| format!("writing {}", svg.display()))?;
    let acf = kansoku_monitor::pictures::autocorrelation(ca, da);
    let p = acf_path(svg);
    std::fs::write(&p, acf).with_context(|| format!("writing {}", p.display()))?;
    Ok(())
}

/// Demo: the exact waveform of seed 000's func_M loop and its detected period.
pub fn demo_stage(dir: &Path) -> Result<String> {
    let program = kansoku_examples::build("seed000", &dir.join("bin"))?;
    let options = WaveOptions {
        program: program.clone(),
        args: vec!["100000".into()],
        mode: WaveMode::Exact { marker: Some("func_M".into()), max_instructions: 20_000 },
        engine: kansoku_probe::Engine::best().0,
    };
    let o = record_wave(&options, &mut |_| {})?;
    let (r, ca, da) = analyse(&o, true, None);
    let svg = dir.join("wave-seed000.svg");
    save_svgs(&svg, &o, &r, &ca, &da, true)?;
    let p = r.code_period.as_ref().map_or("none".to_string(), |p| format!("{:.2} instructions (autocorrelation {:.3})", p.samples, p.autocorrelation));
    Ok(format!(
        "exact waveform of seed000 from func_M: {} instructions; code-address period {p}; functions recurring at it: {}\npicture: {} (autocorrelation: {})",
        r.points,
        r.functions.iter().take(6).map(|f| format!("{} {:.0}%", f.label, f.recurrence)).collect::<Vec<_>>().join(", "),
        svg.display(),
        acf_path(&svg).display()
    ))
}
