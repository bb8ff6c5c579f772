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

use crate::info::Info;

/// Distances beyond this many instructions are not looked for: the seed's likelihood
/// table gives nothing beyond an offset difference of 8.
pub(crate) const MAX_DISTANCE: u8 = 8;

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
    /// Sampled call instructions → their return site (the next instruction).
    calls: HashMap<u64, u64>,
    /// Sampled return instructions.
    returns: HashSet<u64>,
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

    /// Adds the calls (call instruction → return site) and return instructions, for
    /// [`repair_nesting`]; only sampled ones are kept.
    pub(crate) fn with_calls(mut self, calls: &HashMap<u64, u64>, returns: &HashSet<u64>) -> ControlFlow {
        let sampled: HashSet<u64> = self.known.iter().copied().collect();
        self.calls = calls.iter().filter(|(c, _)| sampled.contains(c)).map(|(&c, &s)| (c, s)).collect();
        self.returns = returns.iter().copied().filter(|r| sampled.contains(r)).collect();
        self
    }

    /// Whether `addr`'s successors are known.
    pub fn knows(&self, addr: u64) -> bool {
        self.known.contains(&addr)
    }

    /// Fewest steps from `a` to `b` along the control flow, if within [`MAX_DISTANCE`].
    pub fn distance(&self, a: u64, b: u64) -> Option<u8> {
        self.distance.get(&(a, b)).copied()
    }

    /// Every (from, to) pair of sampled instructions within reach, and its distance.
    pub fn pairs(&self) -> impl Iterator<Item = ((u64, u64), u8)> + '_ {
        self.distance.iter().map(|(&k, &d)| (k, d))
    }

    /// How many sampled instructions the flow knows, and pairs within reach (reports).
    pub fn size(&self) -> (usize, usize) {
        (self.known.len(), self.distance.len())
    }
}

/// Where a reconstructed trace breaks call/return nesting: indices `k` of returns that are
/// followed by another instruction than the return site of the call they return from
/// (simulated with a stack from the start of the trace; returns past the start are not
/// judged). Each entry: (k, the expected return site).
pub(crate) fn nesting_breaks(trace: &[Info], flow: &ControlFlow) -> Vec<(usize, u64)> {
    let mut stack: Vec<u64> = Vec::new();
    let mut out = Vec::new();
    for (k, i) in trace.iter().enumerate() {
        if let Some(&site) = flow.calls.get(&i.addr) {
            stack.push(site);
        } else if flow.returns.contains(&i.addr) {
            if let (Some(site), Some(next)) = (stack.pop(), trace.get(k + 1)) {
                if next.addr != site {
                    out.push((k, site));
                }
            }
        }
    }
    out
}

/// Static successors cannot tell which call a return returns from: seed000's three
/// calls of func_B end in the same `ret`, whose successors are all three return sites,
/// so swapping the code after two of them scores the same and a solver may pick either.
/// The nesting of calls and returns can tell: after each solver, a return followed by the
/// wrong return site is repaired by moving the run that starts at the right return site
/// (after another return of the same function) there — a rotation of
/// `trace[k+1..=m]` — when that does not lower the likelihood of the trace's neighbours
/// and leaves fewer nesting breaks (`likelihood`: the scores' likelihood of `b` after `a`).
/// Returns how many repairs were made.
pub(crate) fn repair_nesting<L: Fn(&Info, &Info) -> i64>(trace: &mut [Info], flow: &ControlFlow, likelihood: &L) -> usize {
    let mut repairs = 0;
    let mut breaks = nesting_breaks(trace, flow).len();
    // Each repair removes at least one break: at most `breaks` rounds.
    while breaks > 0 {
        let Some((next, left)) = best_repair(trace, flow, likelihood, breaks) else { break };
        trace.copy_from_slice(&next);
        breaks = left;
        repairs += 1;
    }
    repairs
}

/// The first rotation that keeps the neighbours' likelihood and lowers the breaks.
fn best_repair<L: Fn(&Info, &Info) -> i64>(trace: &[Info], flow: &ControlFlow, likelihood: &L, breaks: usize) -> Option<(Vec<Info>, usize)> {
    for (k, site) in nesting_breaks(trace, flow) {
        let ret = trace[k];
        for j in k + 2..trace.len() {
            if trace[j].addr != site || !is_return_of(&trace[j - 1], &ret, flow) {
                continue;
            }
            let Some(m) = run_end(trace, flow, &ret, j) else { continue };
            let mut next = trace.to_vec();
            next[k + 1..=m].rotate_left(j - k - 1);
            if neighbours(likelihood, &next) < neighbours(likelihood, trace) {
                continue;
            }
            let left = nesting_breaks(&next, flow).len();
            if left < breaks {
                return Some((next, left));
            }
        }
    }
    None
}

/// Whether `i` is a return instruction of the function `ret` returns from.
fn is_return_of(i: &Info, ret: &Info, flow: &ControlFlow) -> bool {
    i.function == ret.function && flow.returns.contains(&i.addr)
}

/// The end of the run starting at a return site `j`: the first return of `ret`'s
/// function at the run's own call depth (calls inside the run are matched).
fn run_end(trace: &[Info], flow: &ControlFlow, ret: &Info, j: usize) -> Option<usize> {
    let mut depth = 0i64;
    for (m, i) in trace.iter().enumerate().skip(j) {
        if flow.calls.contains_key(&i.addr) {
            depth += 1;
        } else if flow.returns.contains(&i.addr) {
            depth -= 1;
            if depth == 0 && is_return_of(i, ret, flow) {
                return Some(m);
            }
            if depth < 0 {
                return None;
            }
        }
    }
    None
}

/// Σ likelihood of neighbouring instructions of a trace.
fn neighbours<L: Fn(&Info, &Info) -> i64>(likelihood: &L, trace: &[Info]) -> i64 {
    trace.windows(2).map(|w| likelihood(&w[0], &w[1])).sum()
}
