//! Does the recording fix the order the solver found? Patent and exact maximise the
//! likelihood of an order of partial sequences; when another order scores as well and
//! yields a different trace, the samples cannot tell the two apart, and the trace is one
//! guess among equals. This looks for such an order — a *witness* — in two ways:
//!
//! 1. one move away: a run of up to [`RUN`] consecutive sequences moved elsewhere (the
//!    neighbourhood of the exact solver's Or-opt), best-scoring moves first;
//! 2. up to [`SEARCH_LIMIT`] sequences, new searches (the exact solver's greedy chain
//!    and Or-opt) on scores that prefer, among orders of equal likelihood, the one sharing
//!    the fewest neighbours with the found order, and break further ties at random
//!    ([`Matrix::reweighted`]).
//!
//! A witness proves the order is not fixed by the scores, and says where the two traces
//! differ. Finding none proves nothing beyond what was searched: the report says "no
//! witness found", not "unique".

use std::collections::HashSet;

use serde::Serialize;

use crate::exact::Matrix;
use crate::info::Info;
use crate::merge::round_robin;
use crate::scores::Scores;

/// Most sequences checked (n×n matrices of scores; the scan is O(RUN · n²)).
pub const LIMIT: usize = 3000;
/// Longest run of consecutive sequences moved.
pub(crate) const RUN: usize = 8;
/// Most moves whose trace is built and compared (the best-scoring first).
pub(crate) const TRIES: usize = 200;
/// Most sequences for the second way, a new search: its Or-opt costs as much as the exact
/// solver's own (measured: 1,725 sequences of a real recording, 12 s in all).
pub(crate) const SEARCH_LIMIT: usize = 1000;

/// An order that scores at least as well as the found one and gives a different trace.
#[derive(Clone, Debug, Serialize)]
pub struct Alternative {
    /// Its total likelihood (≥ the found order's).
    pub likelihood: i64,
    /// "one move" or "search" (see the module comment).
    pub found_by: &'static str,
    /// First and last trace positions where the two traces differ (the uncertain span).
    pub first_difference: usize,
    /// The last trace position where they differ.
    pub last_difference: usize,
    /// The order of the partial sequences and its finished trace.
    #[serde(skip)]
    pub order: Vec<usize>,
    /// The trace that order gives.
    #[serde(skip)]
    pub trace: Vec<Info>,
}

/// Looks for a witness. `trace` is the found order's trace after `finish` (the same
/// post-processing is applied to each candidate before comparing). None when there are
/// fewer than 3 or more than [`LIMIT`] sequences, or no witness was found.
pub fn alternative(
    scores: &Scores,
    sequences: &[Vec<Info>],
    order: &[usize],
    trace: &[Info],
    finish: &dyn Fn(&mut [Info]),
) -> Option<Alternative> {
    let n = order.len();
    if !(3..=LIMIT).contains(&n) {
        return None;
    }
    let m = Matrix::build(scores, sequences);
    let found = m.total(order);
    let witness = Witness { sequences, found_content: content(sequences, order), found: trace.iter().map(|i| i.addr).collect(), finish };
    let mut tried = 0;
    for &(gain, from, run, to) in &candidate_moves(&m, order) {
        if tried == TRIES {
            break;
        }
        let moved = apply_move(order, from, run, to);
        if witness.same_content(&moved) {
            continue;
        }
        tried += 1;
        if let Some(a) = witness.check(&moved, found + gain, "one move") {
            return Some(a);
        }
    }
    if n > SEARCH_LIMIT {
        return None;
    }
    let found_edges: HashSet<(usize, usize, bool)> =
        order.windows(2).map(|p| (p[0], p[1], false)).chain([(order[n - 1], order[0], true)]).collect();
    let restarts = restarts(n);
    for restart in 0..restarts {
        // Avoid the found order's edges; from the second search on, break the remaining
        // ties at random too (the greedy chain takes equal edges in index order).
        let adjust = |u: usize, v: usize, closing: bool| -> i64 {
            let avoid = -(found_edges.contains(&(u, v, closing)) as i64);
            let jitter = if restart == 0 { 0 } else { (mix(restart as u64, u, v, closing) & 1) as i64 };
            (avoid + jitter).clamp(-1, 1)
        };
        let other = m.reweighted(adjust)?.search(order);
        let likelihood = m.total(&other);
        if likelihood < found || witness.same_content(&other) {
            continue;
        }
        if let Some(a) = witness.check(&other, likelihood, "search") {
            return Some(a);
        }
    }
    None
}

/// How many new searches: the first avoids the found order's edges, the others also
/// break ties at random. A search costs about n² (5 ms at 101 sequences): 32 up to 128
/// sequences, fewer beyond, at least one. Measured: sortfixed at P = 101 (101 sequences)
/// needed more than 4 to find its witness.
fn restarts(n: usize) -> usize {
    (32 * 128 * 128 / n.max(1).pow(2)).clamp(1, 32)
}

/// A reproducible pseudo-random word for (restart, u, v, closing) (splitmix64).
fn mix(restart: u64, u: usize, v: usize, closing: bool) -> u64 {
    let mut z = restart.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ ((u as u64) << 32 | v as u64) ^ (closing as u64) << 63;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// The found order, to compare candidates with.
struct Witness<'a> {
    sequences: &'a [Vec<Info>],
    /// The found order as the addresses of its sequences' samples, sequence by sequence.
    found_content: Vec<Vec<u64>>,
    /// The found trace's addresses.
    found: Vec<u64>,
    finish: &'a dyn Fn(&mut [Info]),
}

impl Witness<'_> {
    /// Orders that differ only in which of several identical sequences goes where give
    /// the same trace.
    fn same_content(&self, order: &[usize]) -> bool {
        order.iter().zip(&self.found_content).all(|(&i, c)| self.sequences[i].iter().map(|x| x.addr).eq(c.iter().copied()))
    }

    /// The candidate's finished trace, when it differs from the found one (and is not a
    /// rotation of it: an iteration is a cycle).
    fn check(&self, order: &[usize], likelihood: i64, found_by: &'static str) -> Option<Alternative> {
        let refs: Vec<&[Info]> = order.iter().map(|&i| self.sequences[i].as_slice()).collect();
        let mut trace = round_robin(&refs);
        (self.finish)(&mut trace);
        let addrs: Vec<u64> = trace.iter().map(|i| i.addr).collect();
        if same_cycle(&self.found, &addrs) {
            return None;
        }
        let first = self.found.iter().zip(&addrs).position(|(a, b)| a != b).unwrap_or(self.found.len().min(addrs.len()));
        let last = (0..self.found.len().max(addrs.len())).rev().find(|&k| self.found.get(k) != addrs.get(k)).unwrap_or(first);
        Some(Alternative { likelihood, found_by, first_difference: first, last_difference: last, order: order.to_vec(), trace })
    }
}

fn content(sequences: &[Vec<Info>], order: &[usize]) -> Vec<Vec<u64>> {
    order.iter().map(|&i| sequences[i].iter().map(|x| x.addr).collect()).collect()
}

/// Most candidate moves kept: when nearly every move scores the same (up to RUN · n² of
/// them), memory stays bounded and the best-scoring are kept.
const KEPT_MOVES: usize = 100_000;

/// The moves of a run of 1..=RUN sequences that do not lower the likelihood, best first
/// (at most [`KEPT_MOVES`]): (gain, from, run, to).
fn candidate_moves(m: &Matrix, order: &[usize]) -> Vec<(i64, usize, usize, usize)> {
    let n = order.len();
    let mut out = Vec::new();
    let best_first = |out: &mut Vec<(i64, usize, usize, usize)>| {
        out.sort_by_key(|&(gain, ..)| std::cmp::Reverse(gain));
        out.truncate(KEPT_MOVES);
    };
    for run in 1..=RUN.min(n - 1) {
        for from in 0..=n - run {
            let before = m.total_local(order, from, run);
            let mut rest: Vec<usize> = Vec::with_capacity(n - run);
            rest.extend_from_slice(&order[..from]);
            rest.extend_from_slice(&order[from + run..]);
            let base = m.path_without(order, from, run, &rest);
            let moving = &order[from..from + run];
            for to in (0..=rest.len()).filter(|&to| to != from) {
                let gain = m.insert_gain(&rest, moving, to) + base - before;
                if gain >= 0 {
                    out.push((gain, from, run, to));
                }
            }
            if out.len() >= 2 * KEPT_MOVES {
                best_first(&mut out);
            }
        }
    }
    best_first(&mut out);
    out
}

fn apply_move(order: &[usize], from: usize, run: usize, to: usize) -> Vec<usize> {
    let mut rest: Vec<usize> = Vec::with_capacity(order.len());
    rest.extend_from_slice(&order[..from]);
    rest.extend_from_slice(&order[from + run..]);
    rest.splice(to..to, order[from..from + run].iter().copied());
    rest
}

/// Whether `b` is `a` or a rotation of it: an iteration is a cycle, and where a trace
/// without a marker entry starts is arbitrary. Linear time (Knuth–Morris–Pratt search of
/// `b` in `a` twice over): time-weighted traces repeat one address for long runs, where
/// comparing every rotation would be quadratic.
fn same_cycle(a: &[u64], b: &[u64]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    if a == b {
        return true;
    }
    // fail[k]: length of the longest proper border of b[..=k].
    let mut fail = vec![0usize; b.len()];
    let mut k = 0;
    for i in 1..b.len() {
        while k > 0 && b[i] != b[k] {
            k = fail[k - 1];
        }
        if b[i] == b[k] {
            k += 1;
        }
        fail[i] = k;
    }
    let mut matched = 0;
    for &x in a.iter().chain(a) {
        while matched > 0 && x != b[matched] {
            matched = fail[matched - 1];
        }
        if x == b[matched] {
            matched += 1;
            if matched == b.len() {
                return true;
            }
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::info::{Granularity, Weighting};

    fn seq(offsets: &[i32]) -> Vec<Info> {
        offsets.iter().map(|&o| Info::new(0, o, o as u64)).collect()
    }

    #[test]
    fn rotations_are_one_cycle() {
        assert!(same_cycle(&[1, 2, 3], &[2, 3, 1]));
        assert!(same_cycle(&[1, 2, 3], &[1, 2, 3]));
        assert!(!same_cycle(&[1, 2, 3], &[1, 3, 2]));
        assert!(!same_cycle(&[1, 2], &[1, 2, 3]));
        assert!(same_cycle(&[], &[]));
        // Long runs of one address (time-weighted traces), against every rotation.
        let a: Vec<u64> = [vec![7; 50], vec![1, 2], vec![7; 30], vec![3]].concat();
        for r in 0..a.len() {
            let mut b = a.clone();
            b.rotate_left(r);
            assert!(same_cycle(&a, &b), "rotation {r}");
            let last = b.len() - 1;
            b.swap(0, last);
            assert_eq!(same_cycle(&a, &b), naive_same_cycle(&a, &b), "rotation {r} swapped");
        }
    }

    fn naive_same_cycle(a: &[u64], b: &[u64]) -> bool {
        (0..a.len().max(1)).any(|r| {
            let mut c = a.to_vec();
            let shift = r.min(c.len());
            c.rotate_left(shift);
            c == b
        })
    }

    #[test]
    fn a_straight_run_is_fixed_by_its_samples() {
        // Offsets 0..12 sampled every 4: three sequences of three; only one order makes
        // every neighbour a +1 step.
        let scores = Scores::defaults(Granularity::Function, Weighting::Count);
        let sequences = vec![seq(&[0, 4, 8]), seq(&[1, 5, 9]), seq(&[2, 6, 10]), seq(&[3, 7, 11])];
        let order = [0, 1, 2, 3];
        let refs: Vec<&[Info]> = order.iter().map(|&i| sequences[i].as_slice()).collect();
        let trace = round_robin(&refs);
        assert!(alternative(&scores, &sequences, &order, &trace, &|_| {}).is_none());
    }

    #[test]
    fn single_samples_of_a_repeated_body_are_not() {
        // A body a b c run twice with a different instruction in the middle of each pass
        // (x, then y): one sample per sequence. x and y swapped scores the same.
        let scores = Scores::defaults(Granularity::Function, Weighting::Count);
        let trace_of = |o: &[i32]| seq(o);
        let sequences: Vec<Vec<Info>> = [0, 1, 20, 2, 0, 1, 30, 2].iter().map(|&o| trace_of(&[o])).collect();
        let order: Vec<usize> = (0..8).collect();
        let refs: Vec<&[Info]> = order.iter().map(|&i| sequences[i].as_slice()).collect();
        let trace = round_robin(&refs);
        let alt = alternative(&scores, &sequences, &order, &trace, &|_| {}).expect("x and y can swap");
        assert!(alt.likelihood >= crate::merge::order_likelihood(&scores, &refs));
        assert!(alt.first_difference <= alt.last_difference);
    }
}
