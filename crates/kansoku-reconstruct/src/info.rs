//! Instruction information: what each sample is reduced to before reconstruction.
//!
//! The seed annotates every sampled instruction with (function, offset in function) or,
//! in the finer variant, (function, basic-block number, offset in block). Offsets count
//! instructions, so a difference of 1 means neighbours in the trace.

use std::collections::HashMap;

use kansoku_core::Location;
use serde::Serialize;

/// Which instruction information the scores compare (`--by function|block`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Granularity {
    /// (function, offset in function).
    Function,
    /// (function, basic-block number, offset in block).
    Block,
}

impl std::str::FromStr for Granularity {
    type Err = crate::error::UnknownChoice;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "function" => Ok(Granularity::Function),
            "block" => Ok(Granularity::Block),
            _ => Err(crate::error::UnknownChoice { what: "instruction information", name: s.to_string(), choices: "function or block" }),
        }
    }
}

/// How the samples were taken: every P instructions, or every T nanoseconds of CPU time.
/// Time sampling yields an execution-time-weighted trace and uses tables peaking at 0.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Weighting {
    /// Every P retired instructions: each instruction equally likely to be sampled.
    Count,
    /// Every T ns of CPU time: instructions sampled in proportion to their time.
    Time,
}

/// One sampled instruction, reduced to its instruction information. `function` is an id
/// from [`Names`]; `block`/`block_offset` are −1 when the block is unknown.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Info {
    /// The function's id in [`Names`].
    pub function: u32,
    /// Byte offset from the function's start.
    pub offset: i32,
    /// Basic-block number in the function (address order), −1 when unknown.
    pub block: i32,
    /// Byte offset from the block's start, −1 when unknown.
    pub block_offset: i32,
    /// The runtime address that was sampled (kept to write and compare traces).
    pub addr: u64,
}

impl Info {
    /// An instruction known by function and offset only.
    pub fn new(function: u32, offset: i32, addr: u64) -> Info {
        Info { function, offset, block: -1, block_offset: -1, addr }
    }

    /// The same instruction with its block and offset in the block.
    pub fn with_block(mut self, block: i32, block_offset: i32) -> Info {
        self.block = block;
        self.block_offset = block_offset;
        self
    }

    /// `function:offset` or, with `Granularity::Block` and a known block,
    /// `function:BB:offset`.
    pub fn display(&self, names: &Names, by: Granularity) -> String {
        let f = names.name(self.function);
        if by == Granularity::Block && self.block >= 0 {
            format!("{f}:{}:{}", self.block, self.block_offset)
        } else {
            format!("{f}:{}", self.offset)
        }
    }
}

/// Interned function names, so comparing functions is comparing integers.
#[derive(Clone, Debug, Default)]
pub struct Names {
    names: Vec<String>,
    index: HashMap<String, u32>,
}

impl Names {
    /// No names yet.
    pub fn new() -> Names {
        Names::default()
    }

    /// The id of `name`, given a new one the first time.
    pub fn intern(&mut self, name: &str) -> u32 {
        if let Some(&id) = self.index.get(name) {
            return id;
        }
        let id = self.names.len() as u32;
        self.names.push(name.to_string());
        self.index.insert(name.to_string(), id);
        id
    }

    /// The id of `name`, if it was interned.
    pub fn get(&self, name: &str) -> Option<u32> {
        self.index.get(name).copied()
    }

    /// The name of `id` (`?` for an id never given).
    pub fn name(&self, id: u32) -> &str {
        self.names.get(id as usize).map(String::as_str).unwrap_or("?")
    }

    /// Instruction information of a symbolised address.
    pub fn info(&mut self, location: &Location, addr: u64) -> Info {
        let f = self.intern(&location.function);
        let info = Info::new(f, location.offset as i32, addr);
        match (location.block, location.block_offset) {
            (Some(b), Some(o)) => info.with_block(b as i32, o as i32),
            _ => info,
        }
    }
}

/// What reconstruction reads from a recording, in recording order.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Observation {
    /// A sampled instruction with the time and, when known, the running instruction count.
    Sample {
        /// The instruction sampled.
        info: Info,
        /// Nanoseconds since the recording's start.
        time_ns: u64,
        /// Retired instructions of the thread so far, when counted.
        instructions: Option<u64>,
    },
    /// An entry of the marker function.
    Marker {
        /// Nanoseconds since the recording's start.
        time_ns: u64,
        /// Retired instructions of the thread so far, when counted.
        instructions: Option<u64>,
    },
    /// Complete iterations that no sample fell in, standing for the marker hits between
    /// two kept ones ([`Compactor`]): `iterations` of them, each `length` instructions
    /// long (when both hits carried counts), `duration_ns` in all.
    Quiet {
        /// How many iterations.
        iterations: u64,
        /// Each one's length in instructions, when known.
        length: Option<u64>,
        /// Their total duration in ns.
        duration_ns: u64,
    },
}

/// Observations as they are read, with the marker hits that no sample separates
/// collapsed: a tight loop's 50 M hits at a few hundred thousand samples are mostly
/// iterations without a sample, and what reconstruction needs of those is how many there
/// were and how long they were. The first and last hit, and every hit next to a sample,
/// stay [`Observation::Marker`]s; between two kept hits A and B, the hits in between
/// become [`Observation::Quiet`]s (one per run of equal lengths), which together stand
/// for every iteration from A to B. Memory then follows the samples, not the hits.
#[derive(Default)]
pub struct Compactor {
    out: Vec<Observation>,
    /// How long every iteration lasted, with and without a sample.
    pub durations: Durations,
    /// The last marker hit read (time, count), and whether it was the last observation.
    last: Option<Hit>,
    after_marker: bool,
    /// A hit read right after another one, not yet known to be kept: its time and count,
    /// and the iteration that ends at it.
    held: Option<(Hit, Ended)>,
}

/// A marker hit: its time and, when known, the running instruction count.
type Hit = (u64, Option<u64>);
/// An iteration as a quiet run counts it: its length in instructions (when known), its
/// duration in ns.
type Ended = (Option<u64>, u64);

impl Compactor {
    /// Takes the next observation in recording order.
    pub fn push(&mut self, o: Observation) {
        match o {
            Observation::Marker { time_ns, instructions } => {
                if let Some((t0, _)) = self.last {
                    let d = time_ns.saturating_sub(t0);
                    if self.after_marker { self.durations.unsampled.add(d) } else { self.durations.sampled.add(d) }
                }
                if self.after_marker {
                    let (t0, i0) = self.last.expect("a marker was read");
                    let length = match (i0, instructions) {
                        (Some(a), Some(b)) => Some(b.saturating_sub(a)),
                        _ => None,
                    };
                    if let Some((_, ended)) = self.held.take() {
                        // The held hit lies between two hits: its iteration goes quiet.
                        self.quiet(ended);
                    }
                    self.held = Some(((time_ns, instructions), (length, time_ns.saturating_sub(t0))));
                } else {
                    self.out.push(o);
                }
                self.last = Some((time_ns, instructions));
                self.after_marker = true;
            }
            Observation::Sample { .. } | Observation::Quiet { .. } => {
                self.flush();
                self.out.push(o);
                self.after_marker = false;
            }
        }
    }

    /// One more quiet iteration at the end of the output.
    fn quiet(&mut self, (length, duration): Ended) {
        match self.out.last_mut() {
            Some(Observation::Quiet { iterations, length: l, duration_ns }) if *l == length => {
                *iterations += 1;
                *duration_ns += duration;
            }
            _ => self.out.push(Observation::Quiet { iterations: 1, length, duration_ns: duration }),
        }
    }

    /// Keeps the held hit: when quiet iterations precede it, the one ending at it is
    /// theirs too; else it is a plain second hit, and its iteration is the split's.
    fn flush(&mut self) {
        if let Some(((time_ns, instructions), ended)) = self.held.take() {
            if matches!(self.out.last(), Some(Observation::Quiet { .. })) {
                self.quiet(ended);
            }
            self.out.push(Observation::Marker { time_ns, instructions });
        }
    }

    /// The observations kept, quiet runs in place of the hits they stand for.
    pub fn finish(mut self) -> Vec<Observation> {
        self.flush();
        self.out
    }
}

/// How long iterations lasted (marker hit to marker hit), those no sample fell in apart
/// from those holding one. On a time recording an iteration holding a sample is one the
/// sampling interrupt stretched (by microseconds on this project's VM, against tens of
/// nanoseconds for a tight loop's iteration), so only the iterations without a sample say
/// how long the loop's iterations are; a sample dropped as probe code still stretched its
/// iteration, which then counts as one without a sample.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Durations {
    /// Iterations no sample fell in.
    pub unsampled: DurationHistogram,
    /// Iterations holding a sample.
    pub sampled: DurationHistogram,
}

/// Durations in ns in buckets of 1/16 octave (each within 4.4 % of its lower bound):
/// bounded memory whatever the number of iterations.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct DurationHistogram {
    buckets: Vec<u64>,
    count: u64,
    max: u64,
}

/// A [`DurationHistogram`] summed up: how many, percentiles (a bucket's lower bound) and
/// the longest, in ns.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct DurationSummary {
    /// Iterations counted.
    pub iterations: u64,
    /// 10th percentile, ns.
    pub p10_ns: u64,
    /// Median, ns.
    pub p50_ns: u64,
    /// 90th percentile, ns.
    pub p90_ns: u64,
    /// The longest, ns (exact, not a bucket).
    pub max_ns: u64,
}

const STEPS_PER_OCTAVE: f64 = 16.0;

impl DurationHistogram {
    /// Counts one iteration of `ns` nanoseconds.
    pub fn add(&mut self, ns: u64) {
        let i = ((ns.max(1) as f64).log2() * STEPS_PER_OCTAVE) as usize;
        if self.buckets.len() <= i {
            self.buckets.resize(i + 1, 0);
        }
        self.buckets[i] += 1;
        self.count += 1;
        self.max = self.max.max(ns);
    }

    /// The lower bound of the bucket holding the `q`-quantile.
    fn quantile(&self, q: f64) -> u64 {
        let rank = ((self.count as f64 * q).ceil() as u64).max(1);
        let mut seen = 0;
        for (i, &n) in self.buckets.iter().enumerate() {
            seen += n;
            if seen >= rank {
                return 2f64.powf(i as f64 / STEPS_PER_OCTAVE).round() as u64;
            }
        }
        self.max
    }

    /// None without a duration.
    pub fn summary(&self) -> Option<DurationSummary> {
        (self.count > 0).then(|| DurationSummary { iterations: self.count, p10_ns: self.quantile(0.1), p50_ns: self.quantile(0.5), p90_ns: self.quantile(0.9), max_ns: self.max })
    }
}

#[cfg(test)]
mod duration_tests {
    use super::*;

    #[test]
    fn durations_split_by_samples_in_bounded_buckets() {
        let mut c = Compactor::default();
        let mut t = 0;
        for i in 0..10_000u64 {
            c.push(Observation::Marker { time_ns: t, instructions: None });
            if i % 100 == 99 {
                // a sample stretches its iteration to 6 µs
                c.push(Observation::Sample { info: Info::new(0, 0, 0), time_ns: t + 10, instructions: None });
                t += 6_000;
            } else {
                t += if i % 2 == 0 { 40 } else { 80 };
            }
        }
        c.push(Observation::Marker { time_ns: t, instructions: None });
        let (u, s) = (c.durations.unsampled.summary().unwrap(), c.durations.sampled.summary().unwrap());
        assert_eq!((u.iterations, s.iterations), (9_900, 100));
        assert!(u.p10_ns <= 40 && u.p10_ns >= 38 && u.p90_ns <= 80 && u.p90_ns >= 77 && u.max_ns == 80, "{u:?}");
        assert!(s.p50_ns <= 6_000 && s.p50_ns >= 5_700 && s.max_ns == 6_000, "{s:?}");
        assert!(c.durations.unsampled.buckets.len() < 16 * 14);
        assert_eq!(DurationHistogram::default().summary(), None);
    }
}
