//! Ordering many partial sequences without comparing every pair (beyond
//! [`crate::QUADRATIC_LIMIT`] sequences for the seed's loop, [`crate::exact::HEURISTIC_LIMIT`]
//! for the exact solver, whose matrices grow with the square of their number).
//!
//! The likelihood of an order is `Σ R(s_i, s_i+1) + W(s_n, s_1)` ([`crate::merge`]), and
//! `R(x, y)` is only large when `y`'s samples are the control-flow (or offset) successors
//! of `x`'s, index by index. So the sequences that may follow `x` are found by looking up
//! the successors of `x`'s first two samples in an index of every sequence's first two
//! samples (then of its first one), at most [`CANDIDATES`] of them; only those pairs are
//! scored. The order is then built like the greedy edge heuristic of the travelling
//! salesman: candidate pairs by falling `R`, each taken when `x` has no successor yet, `y`
//! no predecessor, and they are not already on one chain; the chains left are joined by
//! their first instruction (function, offset). Time: O(n · CANDIDATES · length) to score,
//! O(E log E) to sort; memory: the candidate pairs.

use std::collections::HashMap;

use rayon::prelude::*;
use serde::Serialize;

use crate::info::Info;
use crate::merge::{order_likelihood, round_robin, row_pair};
use crate::scores::Scores;

/// Most sequences scored as possible successors of one sequence.
pub(crate) const CANDIDATES: usize = 48;
/// Most successor instructions looked up per sample (best scores first).
const NEAR: usize = 8;
/// Sample indices looked up per sequence.
const KEYS: usize = 3;
/// Most chains joined by scoring every end against every start.
const JOIN_LIMIT: usize = 4000;
/// Sequences scored between two looks at `progress` and `stop`.
const CHUNK: usize = 4096;

/// The order found and how.
#[derive(Clone, Debug, Serialize)]
pub struct ChainResult {
    /// The partial sequences' indices in the order found.
    #[serde(skip)]
    pub order: Vec<usize>,
    /// The trace that order gives.
    #[serde(skip)]
    pub trace: Vec<Info>,
    /// The order's total likelihood.
    pub likelihood: i64,
    /// Candidate pairs with a positive score (all pairs would be n·(n−1)).
    pub pairs_scored: usize,
    /// Chains the greedy pass over candidate pairs left (then joined, see the module comment).
    pub chains: usize,
    /// Stopped early (Ctrl-C): the pairs scored so far were used.
    pub stopped: bool,
}

/// Key of an instruction for the index: (function, offset).
#[inline]
fn key(i: &Info) -> u64 {
    ((i.function as u64) << 32) | (i.offset as u32 as u64)
}

/// The instructions that may follow `i` with a positive likelihood, best first: along the
/// control flow when the scores have it and it knows `i`, else by offset in the function.
struct Successors<'a> {
    scores: &'a Scores,
    /// Control flow: from → [(to, distance)] (sampled instructions only).
    flow: HashMap<u64, Vec<(u64, u8)>>,
    /// Address → key, for the flow's addresses.
    keys: HashMap<u64, u64>,
    /// Offset differences with a positive likelihood, best first.
    offsets: Vec<i32>,
}

impl<'a> Successors<'a> {
    fn new(scores: &'a Scores, sequences: &[Vec<Info>]) -> Successors<'a> {
        let table = &scores.likelihood.offset;
        let mut offsets: Vec<i32> = (-8..=8).filter(|&d| table.get(d) > 0).collect();
        offsets.sort_by_key(|&d| (std::cmp::Reverse(table.get(d)), d.abs(), d));
        let mut flow: HashMap<u64, Vec<(u64, u8)>> = HashMap::new();
        let mut keys = HashMap::new();
        if let Some(f) = scores.flow.as_ref() {
            for ((a, b), d) in f.pairs() {
                if table.get(i32::from(d)) > 0 {
                    flow.entry(a).or_default().push((b, d));
                }
            }
            for v in flow.values_mut() {
                v.sort_by_key(|&(b, d)| (std::cmp::Reverse(table.get(i32::from(d))), d, b));
                v.truncate(NEAR);
            }
            for s in sequences {
                for i in s {
                    keys.insert(i.addr, key(i));
                }
            }
        }
        Successors {
            scores,
            flow,
            keys,
            offsets,
        }
    }

    fn of(&self, i: &Info) -> Vec<u64> {
        if let Some(f) = self.scores.flow.as_ref() {
            if f.knows(i.addr) {
                let mut out = Vec::with_capacity(NEAR + 1);
                if self.scores.likelihood.offset.get(0) > 0 {
                    out.push(key(i));
                }
                out.extend(
                    self.flow
                        .get(&i.addr)
                        .into_iter()
                        .flatten()
                        .filter_map(|(b, _)| self.keys.get(b).copied()),
                );
                return out;
            }
        }
        self.offsets
            .iter()
            .take(NEAR)
            .map(|&d| {
                key(&Info {
                    offset: i.offset.wrapping_add(d),
                    ..*i
                })
            })
            .collect()
    }
}

/// Orders `sequences` (see the module comment). `progress(done, n)` is called as sequences
/// are scored; `stop` is polled, and when it says so the pairs scored so far are used.
pub(crate) fn solve_chain(
    scores: &Scores,
    sequences: &[Vec<Info>],
    progress: &mut dyn FnMut(usize, usize),
    stop: &dyn Fn() -> bool,
) -> ChainResult {
    let n = sequences.len();
    let successors = Successors::new(scores, sequences);
    // Sequences by their k-th sample, and by their k-th and (k+1)-th, k < KEYS: a call,
    // return or jump at one index hides the successor there, not at the next.
    let mut by_one: HashMap<(usize, u64), Vec<u32>> = HashMap::new();
    let mut by_two: HashMap<(usize, u64, u64), Vec<u32>> = HashMap::new();
    for (i, s) in sequences.iter().enumerate() {
        for k in 0..KEYS.min(s.len()) {
            by_one.entry((k, key(&s[k]))).or_default().push(i as u32);
            if let Some(b) = s.get(k + 1) {
                by_two
                    .entry((k, key(&s[k]), key(b)))
                    .or_default()
                    .push(i as u32);
            }
        }
    }
    let mut edges: Vec<(i64, u32, u32)> = Vec::new();
    let mut stopped = false;
    for chunk in (0..n).collect::<Vec<usize>>().chunks(CHUNK) {
        progress(chunk[0], n);
        if stop() {
            stopped = true;
            break;
        }
        edges.par_extend(chunk.par_iter().flat_map_iter(|&x| {
            let mut out = Vec::new();
            let s = &sequences[x];
            let mut candidates: Vec<u32> = Vec::with_capacity(CANDIDATES);
            let take = |bucket: Option<&Vec<u32>>, candidates: &mut Vec<u32>| {
                for &y in bucket.into_iter().flatten() {
                    if candidates.len() >= CANDIDATES {
                        return;
                    }
                    if y as usize != x && !candidates.contains(&y) {
                        candidates.push(y);
                    }
                }
            };
            let near: Vec<Vec<u64>> = s.iter().take(KEYS + 1).map(|i| successors.of(i)).collect();
            'pairs: for k in 0..KEYS.min(s.len().saturating_sub(1)) {
                for ka in &near[k] {
                    for kb in &near[k + 1] {
                        take(by_two.get(&(k, *ka, *kb)), &mut candidates);
                        if candidates.len() >= CANDIDATES {
                            break 'pairs;
                        }
                    }
                }
            }
            for (k, keys) in near.iter().enumerate().take(KEYS.min(s.len())) {
                for ka in keys {
                    take(by_one.get(&(k, *ka)), &mut candidates);
                }
            }
            for y in candidates {
                let r = row_pair(scores, s, &sequences[y as usize]);
                if r > 0 {
                    out.push((r, x as u32, y));
                }
            }
            out.into_iter()
        }));
    }
    let pairs_scored = edges.len();
    edges.par_sort_unstable_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)).then(a.2.cmp(&b.2)));
    let mut links = Links { next: vec![None; n], previous: vec![None; n], parent: (0..n as u32).collect() };
    for &(_, x, y) in &edges {
        links.join(x, y);
    }
    // The chains: while few enough, every chain's last sequence is scored against every
    // chain's first and the greedy pass runs again on those pairs (any score: the
    // candidates found no positive one); the rest are joined by their first instruction.
    let heads: Vec<usize> = (0..n).filter(|&i| links.previous[i].is_none()).collect();
    let chains = heads.len();
    if chains > 1 && chains <= JOIN_LIMIT && !stopped {
        let tails: Vec<usize> = heads
            .iter()
            .map(|&h| {
                let mut x = h;
                while let Some(y) = links.next[x] {
                    x = y as usize;
                }
                x
            })
            .collect();
        let mut joins: Vec<(i64, u32, u32)> = tails
            .par_iter()
            .enumerate()
            .flat_map_iter(|(i, &x)| {
                let heads = &heads;
                (0..heads.len()).filter(move |&j| j != i).map(move |j| {
                    (
                        row_pair(scores, &sequences[x], &sequences[heads[j]]),
                        x as u32,
                        heads[j] as u32,
                    )
                })
            })
            .collect();
        joins.par_sort_unstable_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)).then(a.2.cmp(&b.2)));
        for &(_, x, y) in &joins {
            links.join(x, y);
        }
    }
    let mut heads: Vec<usize> = (0..n).filter(|&i| links.previous[i].is_none()).collect();
    heads.sort_by_key(|&h| (sequences[h].first().map(|i| (i.function, i.offset)), h));
    let mut order = Vec::with_capacity(n);
    for &h in &heads {
        let mut at = Some(h as u32);
        while let Some(x) = at {
            order.push(x as usize);
            at = links.next[x as usize];
        }
    }
    debug_assert_eq!(order.len(), n);
    let refs: Vec<&[Info]> = order.iter().map(|&i| sequences[i].as_slice()).collect();
    let likelihood = order_likelihood(scores, &refs);
    progress(n, n);
    ChainResult {
        trace: round_robin(&refs),
        order,
        likelihood,
        pairs_scored,
        chains,
        stopped,
    }
}


/// Sequences joined into chains, best pair first: `x → y` is taken when `x` has no
/// successor yet, `y` no predecessor, and they are not already in one chain (union-find,
/// so no cycle closes).
struct Links {
    next: Vec<Option<u32>>,
    previous: Vec<Option<u32>>,
    parent: Vec<u32>,
}

impl Links {
    fn root(&mut self, mut x: u32) -> u32 {
        while self.parent[x as usize] != x {
            self.parent[x as usize] = self.parent[self.parent[x as usize] as usize];
            x = self.parent[x as usize];
        }
        x
    }

    fn join(&mut self, x: u32, y: u32) {
        if self.next[x as usize].is_some() || self.previous[y as usize].is_some() {
            return;
        }
        let (rx, ry) = (self.root(x), self.root(y));
        if rx == ry {
            return;
        }
        self.parent[rx as usize] = ry;
        self.next[x as usize] = Some(y);
        self.previous[y as usize] = Some(x);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::info::{Granularity, Weighting};

    /// A straight run of 3,880 instructions as 97 sequences of 40 samples (sequence j holds
    /// positions j, j + 97, …), given in a shuffled order: the chain puts them back.
    #[test]
    fn straight_code_comes_back_in_order() {
        let scores = Scores::defaults(Granularity::Function, Weighting::Count);
        let t: usize = 97 * 40;
        let p = 97;
        let truth: Vec<Info> = (0..t).map(|k| Info::new(0, k as i32, k as u64)).collect();
        // Sequence j holds positions j, j + p, j + 2p, ... (the round-robin layout), shuffled.
        let mut ids: Vec<usize> = (0..p).collect();
        ids.reverse();
        ids.swap(3, 50);
        let sequences: Vec<Vec<Info>> = ids
            .iter()
            .map(|&j| truth.iter().skip(j).step_by(p).copied().collect())
            .collect();
        let r = solve_chain(&scores, &sequences, &mut |_, _| {}, &|| false);
        let mut trace = r.trace.clone();
        let at = trace.iter().position(|i| i.offset == 0).unwrap();
        trace.rotate_left(at);
        assert_eq!(trace, truth);
        assert!(r.pairs_scored < p * p);
    }
}
