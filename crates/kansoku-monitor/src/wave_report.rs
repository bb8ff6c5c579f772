//! The waveform report (seed 001): a recorded waveform in, the periods of its code and
//! data signals in every unit known, the functions that recur at the code period, and the
//! labelled regions (functions, sections, heap, stack, libraries) out.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::Serialize;

use kansoku_binary::maps::Mapping;
use kansoku_binary::Symbolizer;
use kansoku_core::text::{hex, Table};
use kansoku_core::{ExitStatus, Module};

use crate::wave::{analyse_signals, repeating_functions, Recurrence, Region, RegionKind, SignalAnalysis, WavePoint};

/// A recorded waveform: what `kansoku_probe::wave::record_wave` returns.
#[derive(Clone, Debug)]
pub struct WaveOutcome {
    /// The program that was run and recorded.
    pub program: PathBuf,
    /// The points of the waveform, in time order.
    pub points: Vec<WavePoint>,
    /// Function name per point (symbolised code address), `None` when unknown.
    pub functions: Vec<Option<String>>,
    /// Modules (program and libraries) loaded, to symbolise code addresses.
    pub modules: Vec<Module>,
    /// The process's memory map, to label data addresses (heap, stack, sections, libraries).
    pub maps: Vec<Mapping>,
    /// How the program ended; `None` when it did not end under kansoku (e.g. detached).
    pub exit: Option<ExitStatus>,
    /// The recording was stopped by an interrupt (Ctrl-C) before the program ended.
    pub interrupted: bool,
    /// Samples the kernel dropped (perf ring buffer full); 0 when every one was kept.
    pub lost: u64,
    /// Points whose instruction could not be read or decoded (no data addresses for them).
    pub undecoded: u64,
    /// How the points were taken, in words (sampling clock or single-step), for the report.
    pub clock: String,
}

/// The dominant period of one signal in every unit that is known.
#[derive(Serialize)]
pub struct PeriodReport {
    /// The period in points of the series, refined to a fraction of a point.
    pub samples: f64,
    /// The period in seconds (CPU seconds with cpu-clock sampling, else from the mean time between points), when known.
    pub seconds: Option<f64>,
    /// The period in instructions retired, when instruction counts were recorded.
    pub instructions: Option<f64>,
    /// Autocorrelation at the period's lag (1 = perfectly periodic).
    pub autocorrelation: f64,
    /// Strongest non-DC frequency of the power spectrum, as a period in points.
    pub spectrum_peak_samples: Option<f64>,
}

/// What `kansoku wave` reports: the run, both signals' periods, the functions that recur
/// at the code period, the labelled regions.
#[derive(Serialize)]
pub struct WaveReport {
    /// The program's path, as text.
    pub program: String,
    /// How the points were taken, as in [`WaveOutcome::clock`].
    pub clock: String,
    /// Number of points recorded.
    pub points: usize,
    /// Points that carry at least one data address.
    pub points_with_data: usize,
    /// Points whose instruction could not be read or decoded.
    pub undecoded: u64,
    /// Samples the kernel dropped, as in [`WaveOutcome::lost`].
    pub lost: u64,
    /// The recording was stopped by an interrupt before the program ended.
    pub interrupted: bool,
    /// Mean time between points, ns (sampled modes).
    pub mean_interval_ns: Option<f64>,
    /// Dominant period of the code-address signal, when supported by the data.
    pub code_period: Option<PeriodReport>,
    /// Dominant period of the data-address signal, when supported by the data.
    pub data_period: Option<PeriodReport>,
    /// Why the code signal has no period, when a candidate was not supported by the data.
    pub code_no_period: Option<String>,
    /// Why the data signal has no period, when a candidate was not supported by the data.
    pub data_no_period: Option<String>,
    /// Functions by share, and how often each recurs one code period later.
    pub functions: Vec<Recurrence>,
    /// The labelled regions (functions and data regions), by low address.
    pub regions: Vec<Region>,
}

/// Labelled regions: the functions seen, and data regions (program sections, heap,
/// stack, other mappings) with the extent of the addresses observed in them.
pub fn regions(o: &WaveOutcome) -> Vec<Region> {
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

/// The file name of a path.
pub fn short(p: &str) -> &str {
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

impl WaveReport {
    /// The report as `kansoku wave` prints it: the points, each signal's period (or why
    /// none), the functions that recur at the code period, the address regions.
    pub fn text(&self) -> String {
        let r = self;
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
}
