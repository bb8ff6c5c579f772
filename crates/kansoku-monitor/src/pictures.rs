//! The seed's pictures of what was measured, as SVG text (drawn by `kansoku-plot`): the
//! Kiviat graph and the busy time series of a sampling run (seed 001 figure 4), the program
//! waveform and the autocorrelation of its address signals. The caller writes them where
//! it chooses.

use kansoku_plot::{Band, PointClass, Series};

use crate::sampling::{IntervalFigures, Summary};
use crate::wave::SignalAnalysis;
use crate::wave_report::{short, WaveOutcome, WaveReport};

/// The Kiviat graph of the eight items over the whole run (seed figure 4).
pub fn kiviat(s: &Summary) -> String {
    kansoku_plot::kiviat(&format!("Eight items over {:.1} s (seed 001 figure 4)", s.measured_s), &s.eight.labelled())
}

/// CPU states and device busy time per interval, percent.
pub fn busy_series(s: &Summary) -> String {
    let col = |f: &dyn Fn(&IntervalFigures) -> f64| s.series.iter().map(|x| (x.t_s, f(x))).collect::<Vec<_>>();
    let cpu = col(&|x| x.cpu_active);
    let user = col(&|x| x.user_state);
    let kernel = col(&|x| x.kernel_state);
    let iowait = col(&|x| x.iowait);
    let io = col(&|x| x.io_busy);
    let mut series = vec![
        Series { name: "CPU active", points: &cpu },
        Series { name: "user", points: &user },
        Series { name: "kernel", points: &kernel },
        Series { name: "iowait", points: &iowait },
        Series { name: "I-O busy (max device)", points: &io },
    ];
    // devices that did any I/O, each its own line
    let per_device: Vec<(String, Vec<(f64, f64)>)> = s
        .devices
        .iter()
        .enumerate()
        .filter(|(_, d)| d.ios > 0)
        .map(|(k, d)| (format!("{} busy", d.name), s.series.iter().map(|x| (x.t_s, x.devices.get(k).copied().unwrap_or(0.0))).collect()))
        .collect();
    for (name, points) in &per_device {
        series.push(Series { name, points });
    }
    kansoku_plot::time_series("CPU and device busy per interval", "seconds", "percent", &series, Some((0.0, 100.0)))
}

/// The program waveform: code and data addresses against instruction number (`exact`) or
/// time, over the labelled regions.
pub fn waveform(o: &WaveOutcome, r: &WaveReport, exact: bool) -> String {
    // The whole run, evenly thinned to at most 4000 points: a picture of millions of dots
    // says less, and the first 4000 alone hide every later phase.
    let stride = o.points.len().div_ceil(4000).max(1);
    let shown: Vec<usize> = (0..o.points.len()).step_by(stride).collect();
    let x = |i: usize| if exact { i as f64 } else { o.points[i].time_ns as f64 / 1e6 };
    let code: Vec<(f64, f64)> = shown.iter().map(|&i| (x(i), o.points[i].code as f64)).collect();
    let data: Vec<(f64, f64)> = shown.iter().flat_map(|&i| o.points[i].data.iter().map(move |&a| (x(i), a as f64))).collect();
    let bands: Vec<Band> = r.regions.iter().map(|g| Band { label: g.label.clone(), low: g.low as f64, high: g.high as f64 }).collect();
    let period = r.code_period.as_ref().map_or("no period".to_string(), |p| format!("code period {:.2} samples", p.samples));
    let title = format!("Program waveform of {}: {period}", short(&r.program));
    let x_label = format!("{} — {}", if exact { "instruction number" } else { "time (ms)" }, o.clock);
    kansoku_plot::waveform(&title, &x_label, &[PointClass { name: "code", points: &code }, PointClass { name: "data", points: &data }], &bands)
}

/// The autocorrelation of the code and data signals: eight periods, or without one the
/// first 100,000 lags, thinned to at most 4000 points (the autocorrelation of 10 M points
/// drawn lag by lag made a 41 MB picture).
pub fn autocorrelation(code: &SignalAnalysis, data: &SignalAnalysis) -> String {
    let lags = |a: &SignalAnalysis| {
        let max = a.period.as_ref().map_or(100_000, |p| ((p.samples * 8.0) as usize).max(16)).min(a.autocorrelation.len());
        let stride = max.div_ceil(4000).max(1);
        a.autocorrelation[..max].iter().enumerate().step_by(stride).map(|(l, v)| (l as f64, *v)).collect::<Vec<_>>()
    };
    let (c, d) = (lags(code), lags(data));
    kansoku_plot::time_series(
        "Autocorrelation of the address signals",
        "lag (samples)",
        "autocorrelation",
        &[Series { name: "code", points: &c }, Series { name: "data", points: &d }],
        Some((-1.0, 1.0)),
    )
}
