//! # kansoku-monitor — seed 001's software monitor, as analyses
//!
//! The seed (a software monitor built into the NEAC 2200/700's operating system, 1978)
//! measures a system three ways; each is a module here, taking observations and returning
//! figures. Nothing here reads `/proc`, spawns or prints: `kansoku-probe` observes and
//! `kansoku-cli` reports.
//!
//! * [`sampling`] — the sampling method: periodic observations of CPU time (user, system,
//!   idle, iowait), device busy time and the target's threads and executing function,
//!   summarised as the seed's **eight items** (CPU active, CPU only, CPU/I-O overlap,
//!   I-O only, I-O busy, CPU wait, user state, kernel state), CPU share per program and
//!   per function, and busy share per device (tables 2–4, figure 4).
//! * [`sampling_report`] — a sampling run's report: the summary with how the run ended and
//!   its warnings, as JSON and as the seed's tables in text.
//! * [`events`] — the event method: time-stamped hits of measurement points become per
//!   point hits and frequency, and per routine calls and execution times (entry → exit per
//!   thread, correct under recursion), exclusive times, percentiles and histograms, with
//!   the per-hit probe overhead learnt from two points on consecutive instructions and
//!   subtracted.
//! * [`wave`] — the program waveform: code- and data-address series, their labelled
//!   regions, and (the seed's proposed next step) autocorrelation and power spectrum with
//!   the dominant period and the functions that repeat at it.
//! * [`wave_report`] — a recorded waveform ([`wave_report::WaveOutcome`]) to the report
//!   `kansoku wave` prints: periods in every unit known, recurring functions, regions.
//! * [`pictures`] — the seed's pictures as SVG text: Kiviat graph, busy series, waveform,
//!   autocorrelation.

#![deny(missing_docs)]

pub mod events;
pub mod sampling;
pub mod sampling_report;
pub mod wave;
pub mod wave_report;
pub mod pictures;
