//! `kansoku wave`: seed 001's program waveform — code and data addresses against time (or
//! instruction number), labelled by function / section / heap / stack — with the
//! autocorrelation, spectrum and dominant period the seed proposed as its next step.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use serde::Serialize;

use kansoku_binary::Symbolizer;
use kansoku_monitor::wave::{analyse_signals, region_of, repeating_functions, Recurrence, Region, RegionKind, SignalAnalysis};
use kansoku_probe::wave::{record_wave, WaveMode, WaveOptions, WaveOutcome};

use crate::output::{report, reportln, hex, print_json, Table};

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

/// The dominant period of one signal in every unit that is known.
#[derive(Serialize)]
pub struct PeriodReport {
    pub samples: f64,
    pub seconds: Option<f64>,
    pub instructions: Option<f64>,
    pub autocorrelation: f64,
    pub spectrum_peak_samples: Option<f64>,
}

#[derive(Serialize)]
pub struct WaveReport {
    pub program: String,
    pub clock: String,
    pub points: usize,
    pub points_with_data: usize,
    pub undecoded: u64,
    pub lost: u64,
    pub interrupted: bool,
    /// Mean time between points, ns (sampled modes).
    pub mean_interval_ns: Option<f64>,
    pub code_period: Option<PeriodReport>,
    pub data_period: Option<PeriodReport>,
    /// Why the code signal has no period, when a candidate was not supported by the data.
    pub code_no_period: Option<String>,
    pub data_no_period: Option<String>,
    /// Functions by share, and how often each recurs one code period later.
    pub functions: Vec<Recurrence>,
    pub regions: Vec<Region>,
}

pub fn run(args: Args) -> Result<()> {
    kansoku_probe::interrupt::install();
    crate::output::report_to(crate::output::report_target(args.output.as_deref(), true))?;
    let (program, rest) = args.program.split_first().context("no program given after --")?;
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
        report!("{}", text(&report));
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

/// Labelled regions: the functions seen, and data regions (program sections, heap,
/// stack, other mappings) with the extent of the addresses observed in them.
fn regions(o: &WaveOutcome) -> Vec<Region> {
    let mut out: Vec<Region> = Vec::new();
    let mut sym = Symbolizer::new(&o.modules);
    let mut seen = std::collections::HashSet::new();
    for p in &o.points {
        if let Some(r) = sym.resolve(p.code) {
            if let Some(f) = r.function {
                let start = p.code.wrapping_sub(r.link_address.wrapping_sub(f.address));
                if seen.insert(start) {
                    out.push(Region { label: f.name.clone(), low: start, high: start + f.size.max(1), kind: RegionKind::Function });
                }
            }
        }
    }
    let program = kansoku_binary::Program::open(&o.program).ok();
    let path = o.program.to_string_lossy();
    let mut extents: BTreeMap<(String, u8), (u64, u64)> = BTreeMap::new();
    for p in &o.points {
        for &a in &p.data {
            let Some(m) = o.maps.iter().find(|m| a >= m.start && a < m.end) else { continue };
            let (label, kind) = if m.path == "[heap]" {
                ("heap".to_string(), 2)
            } else if m.path.starts_with("[stack") {
                ("stack".to_string(), 3)
            } else if m.path == path {
                let section = program.as_ref().and_then(|pr| pr.vaddr_of_file_offset(a - m.start + m.file_offset).and_then(|v| pr.section_name(v).map(str::to_string)));
                (format!("{} {}", short(&m.path), section.unwrap_or_else(|| m.perms.clone())), 1)
            } else if m.path.is_empty() {
                // one region per mapping: under Valgrind the heap and the stack are both
                // anonymous, and one extent over both would span the address space
                (format!("anonymous {:#x}", m.start), 5)
            } else {
                (format!("{} {}", short(&m.path), m.perms), 4)
            };
            let e = extents.entry((label, kind)).or_insert((a, a + 8));
            e.0 = e.0.min(a);
            e.1 = e.1.max(a + 8);
        }
    }
    for ((label, kind), (low, high)) in extents {
        let kind = match kind {
            1 => RegionKind::Section,
            2 => RegionKind::Heap,
            3 => RegionKind::Stack,
            4 => RegionKind::Library,
            _ => RegionKind::Other,
        };
        out.push(Region { label, low, high, kind });
    }
    out.sort_by_key(|r| r.low);
    out
}

fn short(p: &str) -> &str {
    p.rsplit('/').next().unwrap_or(p)
}

/// The code signal and a sample-and-hold data signal (the last data address seen).
/// `cpu_period_ns`: with cpu-clock sampling, a point is taken every that many ns of the
/// program's CPU time, so a period in points is that many CPU seconds; the wall-clock gap
/// between points would count time the program spent off the CPU.
pub fn analyse(o: &WaveOutcome, exact: bool, cpu_period_ns: Option<u64>) -> (WaveReport, SignalAnalysis, SignalAnalysis) {
    let code: Vec<f64> = o.points.iter().map(|p| p.code as f64).collect();
    let mut last = None;
    let data: Vec<f64> = o
        .points
        .iter()
        .filter_map(|p| {
            if let Some(&a) = p.data.first() {
                last = Some(a as f64);
            }
            last
        })
        .collect();
    let [ca, da]: [SignalAnalysis; 2] = analyse_signals(&[&code, &data], 2).try_into().expect("two analyses");
    let n = o.points.len();
    let mean_interval_ns = (!exact && n > 1).then(|| (o.points[n - 1].time_ns - o.points[0].time_ns) as f64 / (n - 1) as f64);
    let per_point_instructions = match (o.points.first().and_then(|p| p.instructions), o.points.last().and_then(|p| p.instructions)) {
        (Some(a), Some(b)) if n > 1 => Some((b - a) as f64 / (n - 1) as f64),
        _ => None,
    };
    let period = |a: &SignalAnalysis| {
        a.period.as_ref().map(|p| PeriodReport {
            samples: p.samples,
            seconds: cpu_period_ns.map(|dt| p.samples * dt as f64 / 1e9).or(mean_interval_ns.map(|dt| p.samples * dt / 1e9)),
            instructions: per_point_instructions.map(|k| p.samples * k),
            autocorrelation: p.autocorrelation,
            spectrum_peak_samples: a.spectrum_peak_period_samples,
        })
    };
    let mut names: Vec<String> = Vec::new();
    let labels: Vec<Option<usize>> = o
        .functions
        .iter()
        .map(|f| {
            f.as_ref().map(|f| match names.iter().position(|n| n == f) {
                Some(i) => i,
                None => {
                    names.push(f.clone());
                    names.len() - 1
                }
            })
        })
        .collect();
    let p = ca.period.as_ref().map_or(0, |p| p.samples.round() as usize);
    let functions = repeating_functions(&labels, &names, p);
    let report = WaveReport {
        program: o.program.display().to_string(),
        clock: o.clock.clone(),
        points: n,
        points_with_data: o.points.iter().filter(|p| !p.data.is_empty()).count(),
        undecoded: o.undecoded,
        lost: o.lost,
        interrupted: o.interrupted,
        mean_interval_ns,
        code_period: period(&ca),
        data_period: period(&da),
        code_no_period: ca.no_period.clone(),
        data_no_period: da.no_period.clone(),
        functions,
        regions: regions(o),
    };
    (report, ca, da)
}

fn save_svgs(svg: &Path, o: &WaveOutcome, r: &WaveReport, ca: &SignalAnalysis, da: &SignalAnalysis, exact: bool) -> Result<()> {
    if let Some(d) = svg.parent() {
        if !d.as_os_str().is_empty() {
            std::fs::create_dir_all(d).with_context(|| format!("creating {}", d.display()))?;
        }
    }
    // The whole run, evenly thinned to at most 4000 points: a picture of millions of dots
    // says less, and the first 4000 alone hide every later phase.
    let stride = o.points.len().div_ceil(4000).max(1);
    let shown: Vec<usize> = (0..o.points.len()).step_by(stride).collect();
    let x = |i: usize| if exact { i as f64 } else { o.points[i].time_ns as f64 / 1e6 };
    let code: Vec<(f64, f64)> = shown.iter().map(|&i| (x(i), o.points[i].code as f64)).collect();
    let data: Vec<(f64, f64)> = shown.iter().flat_map(|&i| o.points[i].data.iter().map(move |&a| (x(i), a as f64))).collect();
    let bands: Vec<kansoku_plot::Band> = r.regions.iter().map(|g| kansoku_plot::Band { label: g.label.clone(), low: g.low as f64, high: g.high as f64 }).collect();
    let period = r.code_period.as_ref().map_or("no period".to_string(), |p| format!("code period {:.2} samples", p.samples));
    let title = format!("Program waveform of {}: {period}", short(&r.program));
    let x_label = format!("{} — {}", if exact { "instruction number" } else { "time (ms)" }, o.clock);
    let pic = kansoku_plot::waveform(
        &title,
        &x_label,
        &[kansoku_plot::PointClass { name: "code", points: &code }, kansoku_plot::PointClass { name: "data", points: &data }],
        &bands,
    );
    std::fs::write(svg, pic).with_context(|| format!("writing {}", svg.display()))?;
    // Eight periods, or without one the first 100,000 lags; thinned to at most 4000 points
    // (the autocorrelation of 10 M points drawn lag by lag made a 41 MB picture).
    let lags = |a: &SignalAnalysis| {
        let max = a.period.as_ref().map_or(100_000, |p| ((p.samples * 8.0) as usize).max(16)).min(a.autocorrelation.len());
        let stride = max.div_ceil(4000).max(1);
        a.autocorrelation[..max].iter().enumerate().step_by(stride).map(|(l, v)| (l as f64, *v)).collect::<Vec<_>>()
    };
    let (c, d) = (lags(ca), lags(da));
    let acf = kansoku_plot::time_series(
        "Autocorrelation of the address signals",
        "lag (samples)",
        "autocorrelation",
        &[kansoku_plot::Series { name: "code", points: &c }, kansoku_plot::Series { name: "data", points: &d }],
        Some((-1.0, 1.0)),
    );
    let p = acf_path(svg);
    std::fs::write(&p, acf).with_context(|| format!("writing {}", p.display()))?;
    let _ = region_of;
    Ok(())
}

pub fn text(r: &WaveReport) -> String {
    let mut out = format!("{} points of {} ({}), {} with data addresses\n", r.points, r.program, r.clock, r.points_with_data);
    if let Some(dt) = r.mean_interval_ns {
        out.push_str(&format!("mean interval between points: {dt:.0} ns\n"));
    }
    if r.lost > 0 {
        out.push_str(&format!("warning: {} records lost\n", r.lost));
    }
    if r.interrupted {
        out.push_str("interrupted (Ctrl-C): analysed what was observed so far\n");
    }
    let mut t = Table::new(&["signal", "period (samples)", "seconds", "instructions", "autocorr.", "spectrum peak (samples)"]);
    for (name, p) in [("code address", &r.code_period), ("data address", &r.data_period)] {
        match p {
            Some(p) => t.row(vec![
                name.into(),
                format!("{:.3}", p.samples),
                p.seconds.map_or("-".into(), |s| format!("{s:.6}")),
                p.instructions.map_or("- (no counts)".into(), |i| format!("{i:.2}")),
                format!("{:.3}", p.autocorrelation),
                p.spectrum_peak_samples.map_or("-".into(), |s| format!("{s:.2}")),
            ]),
            None => t.row(vec![name.into(), "no period".into(), "-".into(), "-".into(), "-".into(), "-".into()]),
        }
    }
    out.push_str(&t.render());
    for (name, why) in [("code address", &r.code_no_period), ("data address", &r.data_no_period)] {
        if let Some(why) = why {
            out.push_str(&format!("{name}: no period: {why}\n"));
        }
    }
    let mut t = Table::new(&["function", "% of points", "% recurring one code period later"]);
    for f in r.functions.iter().take(12) {
        t.row(vec![f.label.clone(), format!("{:.1}", f.share), format!("{:.1}", f.recurrence)]);
    }
    out.push('\n');
    out.push_str(&t.render());
    let mut t = Table::new(&["region", "kind", "low", "high"]);
    for g in r.regions.iter().take(20) {
        t.row(vec![g.label.clone(), format!("{:?}", g.kind), hex(g.low), hex(g.high)]);
    }
    out.push('\n');
    out.push_str(&t.render());
    out
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
