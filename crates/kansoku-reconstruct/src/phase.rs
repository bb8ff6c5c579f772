//! `--solver phase`: when marker hits and instruction counts are recorded, each sample's
//! position in its iteration is known exactly (instructions since the marker). Samples at
//! the same position must be the same instruction if the region is reproducible; the
//! trace is then every covered position in order.

use std::collections::BTreeMap;

use crate::error::ReconstructError;
use crate::info::Info;
use crate::split::Splitting;

/// Largest share of samples that may disagree with their position's majority before the
/// region is called not reproducible.
pub(crate) const MAX_CONFLICTS: f64 = 0.01;

/// The phase solver's trace and how much of the iteration the samples covered.
#[derive(Clone, Debug)]
pub struct PhaseResult {
    /// The instructions of the covered positions, in position order.
    pub trace: Vec<Info>,
    /// Positions 0..T; covered = positions that received a sample.
    pub iteration_length: u64,
    /// Positions that received a sample.
    pub covered: u64,
    /// Samples that disagreed with the majority at their position.
    pub conflicts: u64,
    /// Samples placed.
    pub samples: u64,
}

/// Places every sample of every complete iteration at its position.
pub(crate) fn solve_phase(splitting: &Splitting) -> Result<PhaseResult, ReconstructError> {
    let t = splitting.iteration_length.ok_or_else(|| {
        ReconstructError::PhaseNotApplicable("the recording has no instruction counts at marker hits (time sampling, or --split is not marker)".into())
    })?;
    if t == 0 {
        return Err(ReconstructError::PhaseNotApplicable("iterations are 0 instructions long".into()));
    }
    if splitting.distinct_lengths > 1 {
        return Err(ReconstructError::PhaseNotApplicable(format!(
            "iterations differ in length ({} different lengths between markers): the region is not reproducible",
            splitting.distinct_lengths
        )));
    }
    let mut at: BTreeMap<u64, BTreeMap<u64, (u64, Info)>> = BTreeMap::new();
    let mut samples = 0u64;
    for seq in &splitting.sequences {
        for (info, pos) in seq.samples.iter().zip(&seq.positions) {
            let Some(pos) = pos else {
                return Err(ReconstructError::PhaseNotApplicable("samples carry no instruction counts".into()));
            };
            if *pos >= t {
                continue;
            }
            samples += 1;
            at.entry(*pos).or_default().entry(info.addr).or_insert((0, *info)).0 += 1;
        }
    }
    if samples == 0 {
        return Err(ReconstructError::PhaseNotApplicable("no sample falls inside a complete iteration".into()));
    }
    let mut conflicts = 0u64;
    let mut trace = Vec::with_capacity(at.len());
    for by_addr in at.values() {
        let (count, info) = by_addr.values().max_by_key(|(c, i)| (*c, std::cmp::Reverse(i.addr))).copied().unwrap();
        let total: u64 = by_addr.values().map(|(c, _)| c).sum();
        conflicts += total - count;
        trace.push(info);
    }
    if conflicts as f64 > MAX_CONFLICTS * samples as f64 {
        return Err(ReconstructError::PhaseNotApplicable(format!(
            "{conflicts} of {samples} samples disagree with the other samples at their position: the region is not reproducible"
        )));
    }
    Ok(PhaseResult { trace, iteration_length: t, covered: at.len() as u64, conflicts, samples })
}
