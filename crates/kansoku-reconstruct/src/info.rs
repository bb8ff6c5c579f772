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
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "function" => Ok(Granularity::Function),
            "block" => Ok(Granularity::Block),
            _ => Err(format!("unknown instruction information '{s}' (use function or block)")),
        }
    }
}

/// How the samples were taken: every P instructions, or every T nanoseconds of CPU time.
/// Time sampling yields an execution-time-weighted trace and uses tables peaking at 0.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Weighting {
    Count,
    Time,
}

/// One sampled instruction, reduced to its instruction information. `function` is an id
/// from [`Names`]; `block`/`block_offset` are −1 when the block is unknown.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Info {
    pub function: u32,
    pub offset: i32,
    pub block: i32,
    pub block_offset: i32,
    /// The runtime address that was sampled (kept to write and compare traces).
    pub addr: u64,
}

impl Info {
    pub fn new(function: u32, offset: i32, addr: u64) -> Info {
        Info { function, offset, block: -1, block_offset: -1, addr }
    }

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
    pub fn new() -> Names {
        Names::default()
    }

    pub fn intern(&mut self, name: &str) -> u32 {
        if let Some(&id) = self.index.get(name) {
            return id;
        }
        let id = self.names.len() as u32;
        self.names.push(name.to_string());
        self.index.insert(name.to_string(), id);
        id
    }

    pub fn get(&self, name: &str) -> Option<u32> {
        self.index.get(name).copied()
    }

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
    Sample { info: Info, time_ns: u64, instructions: Option<u64> },
    /// An entry of the marker function.
    Marker { time_ns: u64, instructions: Option<u64> },
    /// Complete iterations that no sample fell in, standing for the marker hits between
    /// two kept ones ([`Compactor`]): `iterations` of them, each `length` instructions
    /// long (when both hits carried counts), `duration_ns` in all.
    Quiet { iterations: u64, length: Option<u64>, duration_ns: u64 },
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
    pub fn push(&mut self, o: Observation) {
        match o {
            Observation::Marker { time_ns, instructions } => {
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

    pub fn finish(mut self) -> Vec<Observation> {
        self.flush();
        self.out
    }
}
