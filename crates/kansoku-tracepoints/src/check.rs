//! `check`: runs the original and the optimised module and compares their decoded streams.

use crate::decode::{decode, normalise, TimestampMode};
use crate::error::Result;
use crate::optimize::{optimize, OptimizeOptions};
use crate::runtime::{run_to_vec, RunOptions, RunOutcome};
use crate::tracefile::Clock;
use serde::Serialize;

/// Result of comparing two runs.
#[derive(Debug, Clone, Serialize)]
pub struct CheckReport {
    /// The run of the module as given.
    pub original: RunOutcome,
    /// The run of the optimised module, same entry and arguments.
    pub optimised: RunOutcome,
    /// Decoded events of the original run (after applying declarations).
    pub events: usize,
    /// Decoded streams equal event by event (ids and arguments), before applying declarations.
    pub identical_raw: bool,
    /// Equal after dropping disabled points and collapsing idempotent repeats in both.
    pub identical: bool,
    /// Events of disabled points left out of the original's stream before comparing.
    pub disabled_events_dropped: usize,
    /// Adjacent equal repeats of idempotent points collapsed in the original's stream.
    pub idempotent_repeats_collapsed: usize,
    /// The entry functions returned the same values.
    pub same_results: bool,
    /// Where the two streams first differ (event index, both events), when they do.
    pub first_difference: Option<String>,
    /// 1 − optimised/original for trace calls executed.
    pub calls_saved: f64,
    /// 1 − optimised/original for the trace file's bytes.
    pub bytes_saved: f64,
    /// 1 − optimised/original for wasm instructions executed (0 when not counted).
    pub instructions_saved: f64,
    /// Wall-time overhead of tracing, when measured: traced ÷ untraced.
    pub timing: Option<Timing>,
}

/// Wall time of the three variants measured in one run (best of `repeats`).
#[derive(Debug, Clone, Serialize)]
pub struct Timing {
    /// Runs of each variant; the best is kept.
    pub repeats: u32,
    /// Nanoseconds of the module with its trace calls made no-ops.
    pub untraced_ns: u64,
    /// Nanoseconds of the original module, tracing.
    pub original_ns: u64,
    /// Nanoseconds of the optimised module, tracing.
    pub optimised_ns: u64,
    /// `original_ns / untraced_ns`.
    pub original_overhead: f64,
    /// `optimised_ns / untraced_ns`.
    pub optimised_overhead: f64,
}

fn ratio_saved(before: u64, after: u64) -> f64 {
    if before == 0 {
        0.0
    } else {
        1.0 - after as f64 / before as f64
    }
}

/// Runs both modules (instruction clock), decodes and compares. With `timing_repeats > 0`,
/// also times the original, optimised and untraced variants with the ns clock.
pub fn check(original: &[u8], optimised: &[u8], opts: &RunOptions, timing_repeats: u32) -> Result<CheckReport> {
    let ropts = RunOptions { clock: Clock::Instructions, ..opts.clone() };
    let (o1, t1) = run_to_vec(original, &ropts)?;
    let (o2, t2) = run_to_vec(optimised, &ropts)?;
    let d1 = decode(&t1, original, TimestampMode::Offsets)?;
    let d2 = decode(&t2, optimised, TimestampMode::Offsets)?;
    let raw1: Vec<_> = d1.events.iter().map(|e| (e.id, &e.args)).collect();
    let raw2: Vec<_> = d2.events.iter().map(|e| (e.id, &e.args)).collect();
    let identical_raw = raw1 == raw2;
    // declarations of both modules (a side file given to the optimiser lands in the output)
    let mut decls = d1.decls.clone();
    decls.extend(d2.decls.clone());
    let (n1, dis, rep) = normalise(&d1.events, &decls);
    let (n2, _, _) = normalise(&d2.events, &decls);
    let identical = n1 == n2;
    let first_difference = if identical {
        None
    } else {
        let i = n1.iter().zip(&n2).position(|(a, b)| a != b).unwrap_or(n1.len().min(n2.len()));
        Some(format!(
            "event {i}: original {:?}, optimised {:?} (lengths {} and {})",
            n1.get(i),
            n2.get(i),
            n1.len(),
            n2.len()
        ))
    };
    let timing = if timing_repeats > 0 {
        let untraced = optimize(original, &OptimizeOptions { strip_all: true, ..Default::default() })?.wasm;
        let nopts = RunOptions { clock: Clock::Ns, optimise_code: true, ..opts.clone() };
        let once = |w: &[u8]| -> Result<u64> { Ok(run_to_vec(w, &nopts)?.0.wall_ns.max(1)) };
        // interleave the variants so drifts of the machine hit all three alike
        let mut u = u64::MAX;
        let mut a = u64::MAX;
        let mut b = u64::MAX;
        for _ in 0..timing_repeats {
            u = u.min(once(&untraced)?);
            a = a.min(once(original)?);
            b = b.min(once(optimised)?);
        }
        Some(Timing {
            repeats: timing_repeats,
            untraced_ns: u,
            original_ns: a,
            optimised_ns: b,
            original_overhead: a as f64 / u as f64,
            optimised_overhead: b as f64 / u as f64,
        })
    } else {
        None
    };
    Ok(CheckReport {
        events: n1.len(),
        identical_raw,
        identical,
        disabled_events_dropped: dis,
        idempotent_repeats_collapsed: rep,
        same_results: o1.results == o2.results,
        first_difference,
        calls_saved: ratio_saved(o1.records, o2.records),
        bytes_saved: ratio_saved(o1.bytes, o2.bytes),
        instructions_saved: ratio_saved(o1.instructions.unwrap_or(0), o2.instructions.unwrap_or(0)),
        original: o1,
        optimised: o2,
        timing,
    })
}
