//! The program waveform and its spectrum.
//!
//! A waveform is a series of [`WavePoint`]s: the address of the instruction about to run
//! and the data addresses it references, at a time (or instruction count). The seed
//! plotted these (a loop shows as a saw wave) and proposed autocorrelation and power
//! spectra as the next step; [`analyse_signal`] does that for one address signal and
//! reports the dominant period, [`repeating_functions`] which functions recur at it.
//! Addresses far outside the bulk of the signal (beyond three interquartile ranges) are
//! pulled in first, and a period is reported only when the data support it (an
//! autocorrelation peak above the noise level and a matching spectral peak).
//!
//! **Period detection.** The signal (addresses, mean removed) is autocorrelated through
//! an FFT (zero-padded, so the correlation is linear, not circular) and normalised by the
//! overlap length. Local maxima of the autocorrelation are candidate periods; the
//! dominant period is the *shortest* lag whose peak reaches 90% of the highest peak (a
//! periodic signal also peaks at every multiple of its period). It is refined by finding
//! the peaks near its multiples and dividing the farthest strong one's lag by its order,
//! with parabolic interpolation, so a period that is not a whole number of samples is
//! still found to a fraction of a sample. The power spectrum's strongest non-zero
//! frequency is reported beside it.

pub use kansoku_spectrum::{autocorrelation, power_spectrum};
use serde::Serialize;

/// One observation of the waveform.
#[derive(Clone, Debug, Default, Serialize)]
pub struct WavePoint {
    /// Time since the first point, ns (0 in single-step mode, where `instructions` counts).
    pub time_ns: u64,
    /// Instructions retired before this point, when known (exact mode; hardware counter).
    pub instructions: Option<u64>,
    /// Address of the instruction executing at this point (the code signal).
    pub code: u64,
    /// Effective addresses of the memory operands of the instruction at `code`.
    pub data: Vec<u64>,
}

/// What an address range is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum RegionKind {
    /// A function's code, from the program's or a library's symbols.
    Function,
    /// A section of the program's file (`.data`, `.bss`, ...) mapped in memory.
    Section,
    /// The process's heap (`[heap]`).
    Heap,
    /// The stack (the `[stack]` mapping).
    Stack,
    /// A mapping of another file: a shared library's code or data.
    Library,
    /// Anything else, such as an anonymous mapping.
    Other,
}

/// A labelled address range `[low, high)`.
#[derive(Clone, Debug, Serialize)]
pub struct Region {
    /// Name shown for the range: function, `file section`, `heap`, `stack`, ...
    pub label: String,
    /// First address of the range.
    pub low: u64,
    /// One past the last address of the range.
    pub high: u64,
    /// What kind of memory the range is.
    pub kind: RegionKind,
}

/// The dominant period of a signal.
#[derive(Clone, Debug, Serialize)]
pub struct Period {
    /// In samples (points of the series), refined to a fraction of a sample.
    pub samples: f64,
    /// Autocorrelation at that lag (1 = perfectly periodic).
    pub autocorrelation: f64,
    /// How many multiples of the period were found as peaks and used to refine it.
    pub multiples: usize,
}

/// A loop sweeping an array: its data address climbs through the array once per sweep and
/// jumps back (a sawtooth of one sweep's length), while the few accesses of each iteration
/// (the element, the stack, a second array) make a fast ripple on it. The ripple's period
/// is the autocorrelation's first strong peak, but the spectrum's strongest peak (bin `k`)
/// is the sweep. This is the sweep's period, from the autocorrelation's highest peak
/// within the spectrum's resolution of it (lags n/(k+1) to n/(k−1)), when the signal
/// returns there after falling away between (at least 0.5 of correlation lost over the
/// middle half of the lag, and the peak at least 0.8 of `candidate`'s): a slow drift,
/// whose autocorrelation only falls, gives none.
fn sawtooth_period(r: &[f64], n: usize, k: usize, candidate: &Period) -> Option<Period> {
    if k < 2 || (n as f64 / k as f64) < 1.5 * candidate.samples {
        return None;
    }
    let lo = (n as f64 / (k as f64 + 1.0)).floor() as usize;
    let hi = ((n as f64 / (k as f64 - 1.0)).ceil() as usize).min(r.len().saturating_sub(2));
    let l = peaks(r, lo.max(2)).into_iter().filter(|&l| l <= hi).max_by(|&a, &b| r[a].total_cmp(&r[b]))?;
    let dip = r[l / 4..=3 * l / 4].iter().copied().fold(f64::INFINITY, f64::min);
    (r[l] >= 0.8 * candidate.autocorrelation && dip <= r[l] - 0.5).then(|| Period { samples: refine(r, l), autocorrelation: r[l], multiples: 1 })
}

/// Autocorrelation, spectrum and period of one signal.
#[derive(Clone, Debug, Serialize)]
pub struct SignalAnalysis {
    /// Number of points in the signal.
    pub length: usize,
    /// The dominant period, when the data support one.
    pub period: Option<Period>,
    /// Why no period is reported when the autocorrelation had a candidate: the data do not
    /// support it (see [`analyse_signal`]).
    pub no_period: Option<String>,
    /// The strongest non-DC frequency of the power spectrum, as a period in samples.
    pub spectrum_peak_period_samples: Option<f64>,
    /// Normalised autocorrelation for lags 0..length/2.
    #[serde(skip)]
    pub autocorrelation: Vec<f64>,
    /// Power per frequency bin k (period length/k), for k in 0..=length/2.
    #[serde(skip)]
    pub power: Vec<f64>,
}

/// Parabolic interpolation of a peak at index i of `v`.
fn refine(v: &[f64], i: usize) -> f64 {
    if i == 0 || i + 1 >= v.len() {
        return i as f64;
    }
    let (a, b, c) = (v[i - 1], v[i], v[i + 1]);
    let d = a - 2.0 * b + c;
    if d.abs() < 1e-15 {
        i as f64
    } else {
        i as f64 + 0.5 * (a - c) / d
    }
}

/// Local maxima of the autocorrelation with lag ≥ `min_lag` (plateaus: first index).
fn peaks(r: &[f64], min_lag: usize) -> Vec<usize> {
    (min_lag.max(1)..r.len().saturating_sub(1)).filter(|&l| r[l] > r[l - 1] && r[l] >= r[l + 1]).collect()
}

/// The dominant period (see the module notes). `min_lag` excludes trivially short lags.
pub(crate) fn dominant_period(r: &[f64], min_lag: usize) -> Option<Period> {
    let ps = peaks(r, min_lag);
    let best = ps.iter().map(|&l| r[l]).fold(f64::NEG_INFINITY, f64::max);
    if !best.is_finite() || best <= 0.0 {
        return None;
    }
    let p0 = *ps.iter().find(|&&l| r[l] >= 0.9 * best)?;
    let base = refine(r, p0);
    // Farthest strong multiple.
    let mut estimate = base;
    let mut multiples = 1;
    let mut m = 2;
    loop {
        let centre = base * m as f64;
        let half = (base / 4.0).max(1.0);
        let lo = (centre - half).floor().max(1.0) as usize;
        let hi = (centre + half).ceil() as usize;
        if hi + 1 >= r.len() {
            break;
        }
        let Some(&l) = ps.iter().filter(|&&l| l >= lo && l <= hi).max_by(|&&a, &&b| r[a].total_cmp(&r[b])) else { break };
        if r[l] < 0.8 * r[p0] {
            break;
        }
        // The integer lag of the m-th peak, divided by m: within 1/(2m) of a sample.
        estimate = l as f64 / m as f64;
        multiples = m;
        m += 1;
    }
    Some(Period { samples: estimate, autocorrelation: r[p0], multiples })
}

/// Autocorrelation, spectrum and period of one signal. A candidate period is reported only
/// when the data support it (see [`support`]); otherwise `no_period` says why.
pub fn analyse_signal(signal: &[f64], min_lag: usize) -> SignalAnalysis {
    let clipped = clip_outliers(signal);
    let signal = clipped.as_slice();
    let r = autocorrelation(signal);
    let power = power_spectrum(signal);
    let peak_bin = power.iter().enumerate().skip(1).max_by(|a, b| a.1.total_cmp(b.1)).filter(|(_, p)| **p > 0.0).map(|(k, _)| k);
    let spectrum_peak_period_samples = peak_bin.map(|k| signal.len() as f64 / k as f64);
    let candidate = dominant_period(&r, min_lag);
    let (period, no_period) = match candidate {
        Some(p) => match support(&p, signal.len(), &power, peak_bin) {
            Ok(()) => (Some(p), None),
            // a sweep: the slow sawtooth the spectrum found, if the autocorrelation has it too
            Err(why) => match peak_bin.and_then(|k| sawtooth_period(&r, signal.len(), k, &p)).filter(|s| support(s, signal.len(), &power, peak_bin).is_ok()) {
                Some(s) => (Some(s), None),
                None => (None, Some(why)),
            },
        },
        None => (None, None),
    };
    SignalAnalysis { length: signal.len(), period, no_period, spectrum_peak_period_samples, autocorrelation: r, power }
}

/// [`analyse_signal`] of several signals at once, each on a thread of its own (the
/// waveform's code and data signals: two FFT-bound analyses of up to millions of points).
pub(crate) fn analyse_signals(signals: &[&[f64]], min_lag: usize) -> Vec<SignalAnalysis> {
    std::thread::scope(|scope| {
        let handles: Vec<_> = signals.iter().map(|s| scope.spawn(move || analyse_signal(s, min_lag))).collect();
        handles.into_iter().map(|h| h.join().expect("a signal analysis panicked")).collect()
    })
}

/// The signal with values beyond three interquartile ranges of the quartiles pulled in to
/// that fence. A few samples in a far-away library or the stack (addresses 2^46 away from
/// the program's) would otherwise carry nearly all the variance and bury the program's own
/// alternation between two functions; inside the fences nothing changes, so an exact
/// loop's sawtooth stays as it is.
fn clip_outliers(signal: &[f64]) -> Vec<f64> {
    // the two quartiles by selection, not a sort: linear in the length (10 M points)
    let mut scratch = signal.to_vec();
    let mut q = |f: f64| {
        if scratch.is_empty() {
            return 0.0;
        }
        let k = ((scratch.len() as f64 - 1.0) * f).round() as usize;
        *scratch.select_nth_unstable_by(k, f64::total_cmp).1
    };
    let (q1, q3) = (q(0.25), q(0.75));
    let iqr = q3 - q1;
    if iqr <= 0.0 {
        return signal.to_vec();
    }
    let (lo, hi) = (q1 - 3.0 * iqr, q3 + 3.0 * iqr);
    signal.iter().map(|&x| x.clamp(lo, hi)).collect()
}

/// Whether a candidate period stands out from noise, by two independent tests:
/// - its autocorrelation peak is at least four standard deviations of white noise's
///   autocorrelation at that lag (about 1/√(n−lag) after normalising by the overlap), so
///   the largest of the thousands of lags searched is rarely reached by chance;
/// - the power spectrum has a non-DC peak at least 2·ln(L) times the mean power of its L
///   bins (the expected maximum of L noise bins is about ln L times the mean), and that
///   peak is a harmonic m·n/period of the period (within the bins' resolution), so slow
///   drifts (red noise, whose power sits in the lowest bins) give no period.
fn support(p: &Period, n: usize, power: &[f64], peak_bin: Option<usize>) -> Result<(), String> {
    let lag = p.samples.round().max(1.0) as usize;
    let noise = 4.0 / ((n.saturating_sub(lag)).max(1) as f64).sqrt();
    if p.autocorrelation < noise {
        return Err(format!("autocorrelation peak {:.3} at lag {:.1} is below the noise level {:.3}", p.autocorrelation, p.samples, noise));
    }
    let bins = &power[1.min(power.len())..];
    let mean = bins.iter().sum::<f64>() / bins.len().max(1) as f64;
    let Some(k) = peak_bin else { return Err("the spectrum is flat".into()) };
    let ratio = power[k] / mean.max(f64::MIN_POSITIVE);
    let needed = 2.0 * (bins.len().max(2) as f64).ln();
    if ratio < needed {
        return Err(format!("no spectral peak stands out (strongest {ratio:.1}× the mean power, needs {needed:.1}×)"));
    }
    let fundamental = n as f64 / p.samples;
    let m = (k as f64 / fundamental).round().max(1.0);
    if (k as f64 - m * fundamental).abs() >= 0.75 + 0.05 * k as f64 {
        return Err(format!(
            "the spectrum's peak (period {:.1} samples) is not a harmonic of the autocorrelation's {:.1}",
            n as f64 / k as f64,
            p.samples
        ));
    }
    Ok(())
}

/// A function (or region) and how it recurs at a period.
#[derive(Clone, Debug, Serialize)]
pub struct Recurrence {
    /// The function or region, as named in the `names` given (unlabelled points have none).
    pub label: String,
    /// Share of all points, percent.
    pub share: f64,
    /// Of the points in this label, the percent whose point one period later is in the same label.
    pub recurrence: f64,
}

/// For each label (index into `names`, `None` = unlabelled), how much of the series it
/// takes and how often it recurs exactly one `period` (in points) later.
pub(crate) fn repeating_functions(labels: &[Option<usize>], names: &[String], period: usize) -> Vec<Recurrence> {
    let n = labels.len();
    let mut count = vec![0u64; names.len()];
    let mut pairs = vec![0u64; names.len()];
    let mut same = vec![0u64; names.len()];
    for (i, l) in labels.iter().enumerate() {
        let Some(l) = *l else { continue };
        count[l] += 1;
        if period > 0 && i + period < n {
            pairs[l] += 1;
            if labels[i + period] == Some(l) {
                same[l] += 1;
            }
        }
    }
    let mut out: Vec<Recurrence> = names
        .iter()
        .enumerate()
        .filter(|(i, _)| count[*i] > 0)
        .map(|(i, name)| Recurrence {
            label: name.clone(),
            share: count[i] as f64 * 100.0 / n.max(1) as f64,
            recurrence: if pairs[i] > 0 { same[i] as f64 * 100.0 / pairs[i] as f64 } else { 0.0 },
        })
        .collect();
    out.sort_by(|a, b| b.share.total_cmp(&a.share));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_array_sweep_gives_the_sweep_not_its_ripple() {
        // 9 sweeps of 3,000 points over an array (8 bytes a point), each point one of 7
        // accesses of an iteration (the element, then six around it): the ripple's period
        // is the autocorrelation's first peak, the sweep the spectrum's
        let signal: Vec<f64> = (0..27_000).map(|i| (0x10_0000 + (i % 3000) * 8 + (i % 7) * 40) as f64).collect();
        let a = analyse_signal(&signal, 2);
        let p = a.period.unwrap_or_else(|| panic!("no period: {:?}", a.no_period));
        assert!((p.samples - 3000.0).abs() < 1.0, "{p:?}");
        // a random walk (a slow drift) still gives none
        let mut x = 0.0f64;
        let mut rng = 88172645463325252u64;
        let walk: Vec<f64> = (0..27_000)
            .map(|_| {
                rng ^= rng << 13;
                rng ^= rng >> 7;
                rng ^= rng << 17;
                x += (rng % 1000) as f64 / 500.0 - 1.0;
                x
            })
            .collect();
        assert!(analyse_signal(&walk, 2).period.is_none());
    }

    #[test]
    fn sawtooth_period_is_found_exactly() {
        // A loop of 44 instructions: addresses climb, jump back.
        let signal: Vec<f64> = (0..5000).map(|i| (0x1000 + (i % 44) * 4) as f64).collect();
        let a = analyse_signal(&signal, 2);
        let p = a.period.unwrap();
        assert!((p.samples - 44.0).abs() < 1e-6, "{p:?}");
        assert!(p.autocorrelation > 0.99);
        assert!((a.spectrum_peak_period_samples.unwrap() - 44.0).abs() / 44.0 < 0.02);
    }

    #[test]
    fn non_integer_period_refines_within_one_percent() {
        // Period 37.3 samples, sampled: a phase signal with noise-free sawtooth.
        let period = 37.3;
        let signal: Vec<f64> = (0..20000).map(|i| ((i as f64 / period).fract() * 100.0).floor()).collect();
        let p = dominant_period(&autocorrelation(&signal), 2).unwrap();
        assert!((p.samples - period).abs() / period < 0.01, "{p:?}");
        assert!(p.multiples > 1);
    }

    #[test]
    fn noise_and_drift_have_no_period() {
        // White noise (a 64-bit LCG) and a random walk (red noise): the autocorrelation has
        // local maxima, but none the data support.
        let mut x = 0x9e3779b97f4a7c15u64;
        let mut next = || {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            (x >> 33) as f64
        };
        let white: Vec<f64> = (0..8000).map(|_| next()).collect();
        let a = analyse_signal(&white, 2);
        assert!(a.period.is_none(), "{:?}", a.period);
        // The autocorrelation did offer a candidate: the support tests turned it down.
        assert!(a.no_period.as_deref().is_some_and(|w| w.contains("noise level")), "{:?}", a.no_period);
        let mut level = 0.0;
        let walk: Vec<f64> = (0..8000)
            .map(|_| {
                level += next() / 2f64.powi(31) - 0.5;
                level
            })
            .collect();
        let a = analyse_signal(&walk, 2);
        assert!(a.period.is_none(), "{:?} {:?}", a.period, a.no_period);
        // The same noise with a loop in it still has its period.
        let looped: Vec<f64> = white.iter().enumerate().map(|(i, w)| (i % 44) as f64 * 4e8 + w).collect();
        let p = analyse_signal(&looped, 2).period.expect("a loop under noise");
        assert!((p.samples - 44.0).abs() < 0.5, "{p:?}");
    }

    #[test]
    fn autocorrelation_matches_brute_force() {
        let signal: Vec<f64> = (0..200).map(|i| ((i * 7919) % 101) as f64).collect();
        let r = autocorrelation(&signal);
        let n = signal.len();
        let mean = signal.iter().sum::<f64>() / n as f64;
        let var = signal.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / n as f64;
        for l in [0usize, 1, 5, 50, 100] {
            let brute = (0..n - l).map(|i| (signal[i] - mean) * (signal[i + l] - mean)).sum::<f64>() / (n - l) as f64 / var;
            assert!((r[l] - brute).abs() < 1e-9, "lag {l}: {} vs {brute}", r[l]);
        }
    }

    #[test]
    fn constant_signal_has_no_period() {
        assert!(analyse_signal(&[5.0; 100], 2).period.is_none());
    }

    #[test]
    fn recurrence_of_labels() {
        let labels: Vec<Option<usize>> = (0..100).map(|i| Some(if i % 10 < 3 { 0 } else { 1 })).collect();
        let r = repeating_functions(&labels, &["a".into(), "b".into(), "unused".into()], 10);
        assert_eq!(r.len(), 2);
        assert_eq!(r[0].label, "b");
        assert_eq!(r[0].share, 70.0);
        assert_eq!(r[0].recurrence, 100.0);
        let r = repeating_functions(&labels, &["a".into(), "b".into()], 5);
        assert!(r[1].recurrence < 1.0);
    }
}
