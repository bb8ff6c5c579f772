//! Cutting the samples into partial sequences, one per iteration of the region (the
//! seed's three ways: marker events, every T/P samples, a function known to start it).

use serde::Serialize;

use crate::error::ReconstructError;
use crate::info::{Info, Names, Observation};

/// How to cut (`--split marker|count:T|function:NAME`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Split {
    /// A new sequence at every marker event; samples before the first marker and after
    /// the last one (an iteration that may not have completed) are left out.
    Marker,
    /// Every T/P samples, T = instructions per iteration, P = the sampling period.
    Count {
        /// T: instructions per iteration.
        instructions: u64,
    },
    /// A new sequence at every sample in this function whose previous sample was not.
    Function(String),
}

impl std::str::FromStr for Split {
    type Err = crate::error::SplitSpecError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        use crate::error::SplitSpecError;
        if s == "marker" {
            return Ok(Split::Marker);
        }
        if let Some(t) = s.strip_prefix("count:") {
            let n: u64 = t.parse().map_err(|_| SplitSpecError::NotANumber(t.to_string()))?;
            if n == 0 {
                return Err(SplitSpecError::ZeroCount);
            }
            return Ok(Split::Count { instructions: n });
        }
        if let Some(f) = s.strip_prefix("function:") {
            if f.is_empty() {
                return Err(SplitSpecError::NoFunction);
            }
            return Ok(Split::Function(f.to_string()));
        }
        Err(SplitSpecError::Unknown(s.to_string()))
    }
}

/// The samples of one iteration, in order.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PartialSequence {
    /// Index of the iteration (0 = first complete iteration seen).
    pub iteration: usize,
    /// The iteration's samples, in recording order.
    pub samples: Vec<Info>,
    /// Per sample: instructions since the iteration's marker, when both counts are known.
    pub positions: Vec<Option<u64>>,
    /// Per sample: nanoseconds since the iteration's start.
    pub times: Vec<u64>,
    /// Instructions from this iteration's marker hit to the next, when both hits carry
    /// counts (`--split marker`): what sorts iterations into classes ([`crate::classes`]).
    pub length: Option<u64>,
}

/// Complete iterations that no sample fell in, read as one [`Observation::Quiet`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QuietRun {
    /// The first of them (its index among all iterations) and how many.
    pub first_iteration: usize,
    /// How many iterations.
    pub iterations: usize,
    /// Each one's length in instructions, when known.
    pub length: Option<u64>,
}

/// The partial sequences and what the cut learned about the iterations.
#[derive(Clone, Debug, Default)]
pub struct Splitting {
    /// One per iteration read one by one, empty ones included (their index still counts).
    pub sequences: Vec<PartialSequence>,
    /// The iterations without a sample that the recording collapsed ([`crate::info::Compactor`]).
    pub quiet: Vec<QuietRun>,
    /// Instructions per iteration when known (marker counts agree, or `count:T`).
    pub iteration_length: Option<u64>,
    /// Distinct iteration lengths seen between markers (1 when reproducible).
    pub distinct_lengths: usize,
    /// Samples not assigned to any sequence (before the first cut, after the last marker).
    pub dropped: usize,
    /// Samples read.
    pub samples: usize,
    /// Marker hits read.
    pub markers: usize,
}

impl Splitting {
    /// Sequences holding at least one sample.
    pub fn non_empty(&self) -> usize {
        self.sequences.iter().filter(|s| !s.samples.is_empty()).count()
    }

    /// Every iteration, with or without samples.
    pub fn iterations(&self) -> usize {
        self.sequences.len() + self.quiet.iter().map(|q| q.iterations).sum::<usize>()
    }
}

/// Samples and marker hits among `observations` (a quiet run stands for the hits between
/// the two kept ones around it).
fn counts(observations: &[Observation]) -> (usize, usize) {
    let (mut samples, mut markers, mut after_quiet) = (0usize, 0usize, false);
    for o in observations {
        match *o {
            Observation::Sample { .. } => samples += 1,
            Observation::Marker { .. } => markers += !std::mem::take(&mut after_quiet) as usize,
            Observation::Quiet { iterations, .. } => {
                // A, quiet runs of k iterations in all, B: k - 1 hits between, and B
                markers += iterations as usize;
                after_quiet = true;
            }
        }
    }
    (samples, markers)
}

/// Cuts the observations. `period` is the sampling period in instructions, if known.
pub fn split(observations: &[Observation], how: &Split, period: Option<u64>, names: &Names) -> Result<Splitting, ReconstructError> {
    if period == Some(0) {
        return Err(ReconstructError::ZeroPeriod);
    }
    let (samples, markers) = counts(observations);
    if samples == 0 {
        return Err(ReconstructError::NoSamples);
    }
    let mut out = Splitting { samples, markers, ..Default::default() };
    match how {
        Split::Marker => {
            if markers == 0 {
                return Err(ReconstructError::NoMarkers);
            }
            if markers == 1 {
                return Err(ReconstructError::OneMarker);
            }
            let mut current: Option<PartialSequence> = None;
            let mut start: (u64, Option<u64>) = (0, None);
            // How many iterations have each length (the median is the iteration length).
            let mut lengths: std::collections::BTreeMap<u64, usize> = std::collections::BTreeMap::new();
            let mut index = 0usize;
            for o in observations {
                match *o {
                    Observation::Marker { time_ns, instructions } => {
                        if let Some(mut seq) = current.take() {
                            if let (Some(a), Some(b)) = (start.1, instructions) {
                                *lengths.entry(b.saturating_sub(a)).or_default() += 1;
                                seq.length = Some(b.saturating_sub(a));
                            }
                            out.sequences.push(seq);
                            index += 1;
                        }
                        current = Some(PartialSequence { iteration: index, ..Default::default() });
                        start = (time_ns, instructions);
                    }
                    Observation::Quiet { iterations, length, .. } => {
                        // The iteration begun at the hit before is one of these.
                        current = None;
                        let iterations = iterations as usize;
                        if let Some(l) = length {
                            *lengths.entry(l).or_default() += iterations;
                        }
                        out.quiet.push(QuietRun { first_iteration: index, iterations, length });
                        index += iterations;
                    }
                    Observation::Sample { info, time_ns, instructions } => match current.as_mut() {
                        Some(seq) => {
                            seq.samples.push(info);
                            seq.positions.push(match (start.1, instructions) {
                                (Some(m), Some(c)) => Some(c.saturating_sub(m)),
                                _ => None,
                            });
                            seq.times.push(time_ns.saturating_sub(start.0));
                        }
                        None => out.dropped += 1,
                    },
                }
            }
            if let Some(last) = current {
                out.dropped += last.samples.len();
            }
            out.distinct_lengths = lengths.len();
            let counted: usize = lengths.values().sum();
            let mut below = 0usize;
            out.iteration_length = lengths.iter().find_map(|(&l, &n)| {
                below += n;
                (below > counted / 2).then_some(l)
            });
        }
        Split::Count { instructions } => {
            let p = period.ok_or(ReconstructError::NoPeriod)?;
            out.iteration_length = Some(*instructions);
            out.distinct_lengths = 1;
            let mut index: u64 = 0;
            for o in observations {
                if let Observation::Sample { info, time_ns, .. } = *o {
                    // Sample j lies about j*P instructions after the first: iteration j*P/T.
                    let iteration = (index * p / instructions) as usize;
                    while out.sequences.len() <= iteration {
                        let n = out.sequences.len();
                        out.sequences.push(PartialSequence { iteration: n, ..Default::default() });
                    }
                    let seq = &mut out.sequences[iteration];
                    seq.samples.push(info);
                    seq.positions.push(None);
                    seq.times.push(time_ns);
                    index += 1;
                }
            }
        }
        Split::Function(name) => {
            let target = names.get(name);
            let mut previous_in = false;
            let mut seen = false;
            for o in observations {
                if let Observation::Sample { info, time_ns, .. } = *o {
                    let inside = Some(info.function) == target;
                    if inside && !previous_in {
                        seen = true;
                        let n = out.sequences.len();
                        out.sequences.push(PartialSequence { iteration: n, ..Default::default() });
                    }
                    previous_in = inside;
                    match out.sequences.last_mut() {
                        Some(seq) => {
                            seq.samples.push(info);
                            seq.positions.push(None);
                            seq.times.push(time_ns);
                        }
                        None => out.dropped += 1,
                    }
                }
            }
            if !seen {
                return Err(ReconstructError::FunctionNeverSampled(name.clone()));
            }
        }
    }
    if out.non_empty() == 0 {
        return Err(ReconstructError::NoSequences);
    }
    Ok(out)
}

/// The sequences to merge: the first non-empty ones until they hold at least `budget`
/// samples (with period P coprime to the iteration length T, P consecutive iterations
/// hold exactly T samples, one per position), or all of them without a budget.
pub fn select(splitting: &Splitting, budget: Option<u64>, limit: Option<usize>) -> Vec<PartialSequence> {
    let mut chosen = Vec::new();
    let mut total = 0u64;
    for s in &splitting.sequences {
        if s.samples.is_empty() {
            continue;
        }
        if budget.is_some_and(|b| total >= b) || limit.is_some_and(|l| chosen.len() >= l) {
            break;
        }
        total += s.samples.len() as u64;
        chosen.push(s.clone());
    }
    chosen
}

/// A distinct partial sequence and how many iterations gave exactly these samples.
#[derive(Clone, Debug, PartialEq)]
pub struct Distinct {
    /// The samples (those of its first occurrence).
    pub sequence: PartialSequence,
    /// Iterations that gave exactly these samples.
    pub weight: usize,
}

/// Identical partial sequences merged into one, in the order of their first occurrence,
/// with their multiplicity as weight. Identical means the same instructions in the same
/// order and, when the samples carry positions (instructions since the marker), at the
/// same positions: then they are the same samples of the iteration again. Without
/// positions, only when `by_instructions_only` (time sampling: most iterations hold one
/// sample, and 10^5 of them are a few hundred distinct instructions); with count sampling
/// two sequences of the same instructions without positions may lie at different places
/// of the iteration (a function called twice), and are kept apart.
pub fn distinct(splitting: &Splitting, by_instructions_only: bool) -> Vec<Distinct> {
    let mut index: std::collections::HashMap<(&[Info], &[Option<u64>]), usize> = std::collections::HashMap::new();
    let mut out: Vec<Distinct> = Vec::new();
    for s in &splitting.sequences {
        if s.samples.is_empty() {
            continue;
        }
        let positioned = s.positions.iter().all(Option::is_some);
        if !positioned && !by_instructions_only {
            out.push(Distinct { sequence: s.clone(), weight: 1 });
            continue;
        }
        let key = (s.samples.as_slice(), if positioned { s.positions.as_slice() } else { &[][..] });
        match index.get(&key) {
            Some(&k) => out[k].weight += 1,
            None => {
                index.insert(key, out.len());
                out.push(Distinct { sequence: s.clone(), weight: 1 });
            }
        }
    }
    out
}

/// Most samples [`choose`] takes by weight (time sampling).
pub const SAMPLE_CAP: usize = 8000;

/// How the sequences to solve were chosen ([`choose`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Budget {
    /// The first distinct sequences until they hold one iteration's instructions (count
    /// sampling, iteration length known).
    Iteration,
    /// The heaviest distinct sequences, up to a number chosen for the solver's time.
    Heaviest,
    /// `--sequences N`: the first N distinct sequences.
    Requested,
}

/// The distinct sequences to merge, in first-occurrence order. With `limit` (`--sequences
/// N`): the first N. Else with `samples` (one iteration's length, count sampling): the first
/// until they hold that many samples (with period P coprime to the iteration length T, P
/// consecutive iterations hold exactly T samples, one per position), at most `cap`. Else the
/// heaviest (ties: the shorter, then the first seen) while they number at most `cap` and
/// hold at most [`SAMPLE_CAP`] samples, kept in first-occurrence order: an iteration that
/// took far longer than the others (the program descheduled, a page fault) holds thousands
/// of time samples once, and would cost more than all the frequent ones together.
pub fn choose(distinct: &[Distinct], samples: Option<u64>, limit: Option<usize>, cap: usize) -> (Vec<Distinct>, Budget) {
    if let Some(l) = limit {
        return (distinct.iter().take(l).cloned().collect(), Budget::Requested);
    }
    if let Some(b) = samples {
        let mut chosen = Vec::new();
        let mut total = 0u64;
        for d in distinct {
            if total >= b || chosen.len() >= cap {
                break;
            }
            total += d.sequence.samples.len() as u64;
            chosen.push(d.clone());
        }
        return (chosen, Budget::Iteration);
    }
    let mut by_weight: Vec<usize> = (0..distinct.len()).collect();
    by_weight.sort_by_key(|&i| (std::cmp::Reverse(distinct[i].weight), distinct[i].sequence.samples.len(), i));
    let mut total = 0usize;
    by_weight.retain(|&i| {
        let len = distinct[i].sequence.samples.len();
        if total + len > SAMPLE_CAP {
            return false;
        }
        total += len;
        true
    });
    by_weight.truncate(cap);
    by_weight.sort_unstable();
    (by_weight.into_iter().map(|i| distinct[i].clone()).collect(), Budget::Heaviest)
}

/// What the cut found, for reports.
#[derive(Clone, Debug, Serialize)]
pub struct SplitReport {
    /// Samples read.
    pub samples: usize,
    /// Marker hits read.
    pub markers: usize,
    /// Complete iterations, with or without samples.
    pub iterations: usize,
    /// Iterations holding a sample.
    pub non_empty: usize,
    /// Samples outside every iteration.
    pub dropped: usize,
    /// Instructions per iteration, when known.
    pub iteration_length: Option<u64>,
    /// Distinct iteration lengths seen (1 when reproducible).
    pub distinct_lengths: usize,
}

impl From<&Splitting> for SplitReport {
    fn from(s: &Splitting) -> SplitReport {
        SplitReport {
            samples: s.samples,
            markers: s.markers,
            iterations: s.iterations(),
            non_empty: s.non_empty(),
            dropped: s.dropped,
            iteration_length: s.iteration_length,
            distinct_lengths: s.distinct_lengths,
        }
    }
}
