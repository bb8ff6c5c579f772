//! The Fourier transforms of seed 001's program waveform (`kansoku-monitor::wave` finds
//! periods with them): the normalised autocorrelation and the power spectrum of a signal,
//! both through `rustfft`.
#![deny(missing_docs)]

use rustfft::{num_complex::Complex, FftPlanner};

/// Normalised autocorrelation r(l) for l in 0..=n/2, via FFT with zero padding.
/// r(l) = Σ x(i)x(i+l) / (n−l) divided by the variance; r(0) = 1.
pub fn autocorrelation(signal: &[f64]) -> Vec<f64> {
    let n = signal.len();
    if n < 2 {
        return vec![1.0; n];
    }
    let mean = signal.iter().sum::<f64>() / n as f64;
    let size = (2 * n).next_power_of_two();
    let mut buf: Vec<Complex<f64>> = signal.iter().map(|&x| Complex::new(x - mean, 0.0)).collect();
    buf.resize(size, Complex::new(0.0, 0.0));
    let fft = FftPlanner::new().plan_fft_forward(size);
    fft.process(&mut buf);
    for c in buf.iter_mut() {
        *c = Complex::new(c.norm_sqr(), 0.0);
    }
    // The inverse transform of a real spectrum is the conjugate of its forward transform:
    // one plan (its twiddle table costs as much as a transform at 2^25 points), and only
    // the real part is used, which conjugation leaves as it is.
    fft.process(&mut buf);
    let var = buf[0].re / n as f64;
    (0..=n / 2)
        .map(|l| if var > 0.0 { buf[l].re / (n - l) as f64 / var } else { 0.0 })
        .collect()
}

/// Power spectrum |X(k)|² of the mean-removed signal for k in 0..=n/2.
pub fn power_spectrum(signal: &[f64]) -> Vec<f64> {
    let n = signal.len();
    if n == 0 {
        return Vec::new();
    }
    let mean = signal.iter().sum::<f64>() / n as f64;
    let mut buf: Vec<Complex<f64>> = signal.iter().map(|&x| Complex::new(x - mean, 0.0)).collect();
    FftPlanner::new().plan_fft_forward(n).process(&mut buf);
    buf[..=n / 2].iter().map(|c| c.norm_sqr() / n as f64).collect()
}
