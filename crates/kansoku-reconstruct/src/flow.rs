//! Control-flow-aware scores (`--likelihood cfg`, beyond the seed).
//!
//! Why: the seed's tables know one relation between two instructions — the difference of
//! their offsets *inside one function*. Every call and every return scores as a function
//! mismatch (0), whichever call or return it is. When the period P is near or above the
//! iteration length T, each partial sequence holds one or two samples, and the order of
//! the code between calls is then not in the seed's scores at all: seed000's three calls
//! of func_B are indistinguishable and get chained into one run (lcs_ratio 0.6–0.8).
//!
//! The program binary knows more: each instruction's static successors — the next
//! instruction, a branch's target, a call's callee entry, a return's return sites (the
//! instructions after the calls of its function). [`ControlFlow`] holds, for every
//! sampled instruction, the fewest steps along those successors to every other sampled
//! instruction (up to [`MAX_DISTANCE`]), and the scores use that *control-flow distance*
//! where the seed uses the offset difference: a direct successor scores like the seed's
//! "offset + 1 in the same function", across functions too. The score of a pair still
//! depends on that pair only, so the likelihood of a pattern still decomposes into
//! pairwise terms and the exact merge stays exact.
//!
//! This crate stays pure: the CLI decodes the binary and passes the successor relation in
//! as data (runtime address → successor addresses).

use std::collections::{HashMap, HashSet, VecDeque};

use crate::scores::ScoreTable;

/// Distances beyond this many instructions are not looked for: the seed's likelihood
/// table gives nothing beyond an offset difference of 8.
pub const MAX_DISTANCE: u8 = 8;

/// Control-flow distances between sampled instructions, and where the region starts.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ControlFlow {
    /// Sampled instructions whose successors are known (decoded, no indirect jump).
    known: HashSet<u64>,
    /// (from, to) → fewest successor steps (≥ 1), for sampled `to` within [`MAX_DISTANCE`].
    distance: HashMap<(u64, u64), u8>,
    /// The region's first instruction (the marker function's entry), when known: a
    /// reconstructed iteration is a cycle, and this says where to open it.
    pub entry: Option<u64>,
}

impl ControlFlow {
    /// From the static successor relation (every decoded instruction → its successors;
    /// instructions whose successors are unknown are absent) and the sampled addresses.
    pub fn new(successors: &HashMap<u64, Vec<u64>>, sampled: impl IntoIterator<Item = u64>, entry: Option<u64>) -> ControlFlow {
        let sampled: HashSet<u64> = sampled.into_iter().collect();
        let mut flow = ControlFlow { entry, ..Default::default() };
        for &from in &sampled {
            if successors.contains_key(&from) {
                flow.known.insert(from);
                flow.search(successors, &sampled, from);
            }
        }
        flow
    }

    /// Breadth-first from `from`, recording the distance of every sampled instruction.
    fn search(&mut self, successors: &HashMap<u64, Vec<u64>>, sampled: &HashSet<u64>, from: u64) {
        let mut seen: HashSet<u64> = HashSet::new();
        let mut queue: VecDeque<(u64, u8)> = VecDeque::from([(from, 0)]);
        while let Some((at, d)) = queue.pop_front() {
            if d == MAX_DISTANCE {
                continue;
            }
            for &next in successors.get(&at).map(Vec::as_slice).unwrap_or(&[]) {
                if !seen.insert(next) {
                    continue;
                }
                if sampled.contains(&next) {
                    self.distance.insert((from, next), d + 1);
                }
                queue.push_back((next, d + 1));
            }
        }
    }

    /// Whether `addr`'s successors are known.
    pub fn knows(&self, addr: u64) -> bool {
        self.known.contains(&addr)
    }

    /// Fewest steps from `a` to `b` along the control flow, if within [`MAX_DISTANCE`].
    pub fn distance(&self, a: u64, b: u64) -> Option<u8> {
        self.distance.get(&(a, b)).copied()
    }

    /// The score of `b` after `a` (likelihood) or of `a` beside `b` (similarity,
    /// `absolute`: the shorter direction) from table `t`, by control-flow distance in
    /// place of the offset difference; `None` when the flow does not know the
    /// instructions (the caller then uses the seed's table).
    #[inline]
    pub fn score(&self, t: &ScoreTable, a: u64, b: u64, absolute: bool) -> Option<i64> {
        if !self.knows(a) || (absolute && !self.knows(b)) {
            return None;
        }
        let forward = self.distance(a, b);
        let d = if absolute { forward.into_iter().chain(self.distance(b, a)).min() } else { forward };
        // The same instruction again (not a self-loop like `rep movs`) is difference 0.
        let d = d.map(i32::from).or((a == b).then_some(0));
        Some(match d {
            Some(d) => t.function_match + t.offset.get(d),
            None => t.function_mismatch,
        })
    }

    /// How many sampled instructions the flow knows, and pairs within reach (reports).
    pub fn size(&self) -> (usize, usize) {
        (self.known.len(), self.distance.len())
    }
}
