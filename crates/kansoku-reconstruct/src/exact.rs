//! `--solver exact`: order all partial sequences at once to maximise the total likelihood
//! `Σ R(s_i, s_i+1) + W(s_n, s_1)` (see [`crate::merge`]) — an asymmetric travelling
//! salesman problem, so the result no longer depends on the greedy choices of the seed's
//! loop.
//!
//! Up to [`EXACT_LIMIT`] sequences: Held–Karp dynamic programming over subsets, exact.
//! Beyond: the better of the seed's order and a greedy chain, improved by Or-opt moves
//! (moving runs of 1–24 sequences) until no move gains, with an upper bound on the optimum
//! (each sequence's best successor) so the optimality gap is reported.

use crate::error::ReconstructError;
use crate::info::Info;
use crate::merge::{order_likelihood, round_robin, row_pair, wrap_pair};
use crate::scores::Scores;

/// Largest count solved exactly (Held–Karp is O(2^n · n^3) with the free first sequence).
pub const EXACT_LIMIT: usize = 13;
/// Largest count the heuristic handles (dense n×n score matrices).
pub const HEURISTIC_LIMIT: usize = 6000;

/// The order the exact solver found, and how sure it is.
#[derive(Clone, Debug)]
pub struct ExactResult {
    /// The partial sequences' indices in the order found.
    pub order: Vec<usize>,
    /// The trace that order gives.
    pub trace: Vec<Info>,
    /// The order's total likelihood.
    pub likelihood: i64,
    /// True when the order is proven optimal.
    pub optimal: bool,
    /// Upper bound on the optimum likelihood (equal to `likelihood` when optimal).
    pub upper_bound: i64,
    /// (upper_bound − likelihood) / |upper_bound|.
    pub gap: f64,
    /// Or-opt moves that improved the order (beyond the exact search's size).
    pub local_search_moves: usize,
}

/// R and W of every ordered pair of sequences (see [`crate::merge`]).
pub(crate) struct Matrix {
    pub(crate) n: usize,
    r: Vec<i32>,
    w: Option<Vec<i32>>,
}

impl Matrix {
    pub(crate) fn build(scores: &Scores, sequences: &[Vec<Info>]) -> Matrix {
        let n = sequences.len();
        let any_long = sequences.iter().any(|s| s.len() > 1);
        let mut r = vec![0i32; n * n];
        let mut w = any_long.then(|| vec![0i32; n * n]);
        for u in 0..n {
            for v in 0..n {
                if u != v {
                    r[u * n + v] = row_pair(scores, &sequences[u], &sequences[v]) as i32;
                }
                if let Some(w) = w.as_mut() {
                    w[u * n + v] = wrap_pair(scores, &sequences[u], &sequences[v]) as i32;
                }
            }
        }
        Matrix { n, r, w }
    }

    #[inline]
    fn r(&self, u: usize, v: usize) -> i64 {
        self.r[u * self.n + v] as i64
    }
    #[inline]
    fn w(&self, u: usize, v: usize) -> i64 {
        self.w.as_ref().map_or(0, |w| w[u * self.n + v] as i64)
    }
    /// The same scores, each multiplied by 2n + 1, plus `adjust(u, v, closing)` ∈ [−1, 1]
    /// (closing: the W score of `u` last and `v` first). An order's adjustments add up to
    /// at most n in size, so an order scoring less than another keeps scoring less, and
    /// only among orders of equal likelihood the adjustments decide — to avoid the edges
    /// of a found order, or to break ties at random. None when the scaled scores leave i32.
    pub(crate) fn reweighted(&self, adjust: impl Fn(usize, usize, bool) -> i64) -> Option<Matrix> {
        let n = self.n;
        let scale = 2 * n as i64 + 1;
        let cell = |x: i32, u: usize, v: usize, closing: bool| i32::try_from(x as i64 * scale + adjust(u, v, closing).clamp(-1, 1)).ok();
        let r: Vec<i32> = (0..n * n).map(|k| cell(self.r[k], k / n, k % n, false)).collect::<Option<_>>()?;
        let w: Option<Vec<i32>> = match &self.w {
            Some(w) => Some((0..n * n).map(|k| cell(w[k], k / n, k % n, true)).collect::<Option<_>>()?),
            None => None,
        };
        Some(Matrix { n, r, w })
    }

    /// The local search of [`solve_exact`]'s heuristic: the better of the greedy chain and
    /// `start`, each improved by Or-opt moves.
    pub(crate) fn search(&self, start: &[usize]) -> Vec<usize> {
        let (a, _) = or_opt(self, greedy_chain(self));
        let (b, _) = or_opt(self, start.to_vec());
        if self.total(&b) > self.total(&a) {
            b
        } else {
            a
        }
    }

    pub(crate) fn total(&self, order: &[usize]) -> i64 {
        if order.is_empty() {
            return 0;
        }
        order.windows(2).map(|p| self.r(p[0], p[1])).sum::<i64>() + self.w(order[order.len() - 1], order[0])
    }
}

/// Solves the ordering. `start` is an optional starting order (e.g. the seed's result).
pub(crate) fn solve_exact(scores: &Scores, sequences: &[Vec<Info>], start: Option<&[usize]>) -> Result<ExactResult, ReconstructError> {
    let n = sequences.len();
    if n > HEURISTIC_LIMIT {
        return Err(ReconstructError::TooLarge(format!(
            "{n} partial sequences exceed the {HEURISTIC_LIMIT} this solver holds in memory; use --solver patent or phase, or fewer sequences (--sequences N)"
        )));
    }
    let m = Matrix::build(scores, sequences);
    let (order, optimal, moves) = if n <= EXACT_LIMIT {
        (held_karp(&m), true, 0)
    } else {
        let mut best: Option<(i64, Vec<usize>, usize)> = None;
        let mut starts = vec![greedy_chain(&m)];
        if let Some(s) = start {
            starts.push(s.to_vec());
        }
        for s in starts {
            let (o, mv) = or_opt(&m, s);
            let t = m.total(&o);
            if best.as_ref().is_none_or(|b| t > b.0) {
                best = Some((t, o, mv));
            }
        }
        let (_, o, mv) = best.unwrap();
        (o, false, mv)
    };
    let likelihood = m.total(&order);
    let refs: Vec<&[Info]> = order.iter().map(|&i| sequences[i].as_slice()).collect();
    debug_assert_eq!(likelihood, order_likelihood(scores, &refs));
    let upper_bound = if optimal { likelihood } else { upper_bound(&m).max(likelihood) };
    let gap = if upper_bound == 0 { 0.0 } else { (upper_bound - likelihood) as f64 / (upper_bound as f64).abs() };
    Ok(ExactResult { trace: round_robin(&refs), order, likelihood, optimal, upper_bound, gap, local_search_moves: moves })
}

/// Held–Karp: best path through all nodes from each first node, closed by W(last, first).
fn held_karp(m: &Matrix) -> Vec<usize> {
    let n = m.n;
    if n <= 1 {
        return (0..n).collect();
    }
    let full = 1usize << n;
    let neg = i64::MIN / 4;
    let mut best: (i64, Vec<usize>) = (neg, vec![]);
    let mut dp = vec![neg; full * n];
    let mut parent = vec![u8::MAX; full * n];
    for first in 0..n {
        dp.iter_mut().for_each(|x| *x = neg);
        dp[(1 << first) * n + first] = 0;
        for mask in 0..full {
            if mask & (1 << first) == 0 {
                continue;
            }
            for last in 0..n {
                let cur = dp[mask * n + last];
                if cur == neg {
                    continue;
                }
                for next in 0..n {
                    if mask & (1 << next) != 0 {
                        continue;
                    }
                    let nm = mask | (1 << next);
                    let v = cur + m.r(last, next);
                    if v > dp[nm * n + next] {
                        dp[nm * n + next] = v;
                        parent[nm * n + next] = last as u8;
                    }
                }
            }
        }
        for last in 0..n {
            let v = dp[(full - 1) * n + last];
            if v == neg {
                continue;
            }
            let total = v + m.w(last, first);
            if total > best.0 {
                let mut order = Vec::with_capacity(n);
                let (mut mask, mut cur) = (full - 1, last);
                loop {
                    order.push(cur);
                    if cur == first && mask == 1 << first {
                        break;
                    }
                    let p = parent[mask * n + cur] as usize;
                    mask &= !(1 << cur);
                    cur = p;
                }
                order.reverse();
                best = (total, order);
            }
        }
    }
    best.1
}

/// Greedy chain: repeatedly join the heaviest edge whose ends are free (no cycles).
fn greedy_chain(m: &Matrix) -> Vec<usize> {
    let n = m.n;
    let mut edges: Vec<(i64, usize, usize)> = Vec::with_capacity(n * n);
    for u in 0..n {
        for v in 0..n {
            if u != v {
                edges.push((m.r(u, v), u, v));
            }
        }
    }
    edges.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)).then(a.2.cmp(&b.2)));
    let mut next = vec![usize::MAX; n];
    let mut prev = vec![usize::MAX; n];
    // Union-find on chains to avoid cycles.
    let mut root: Vec<usize> = (0..n).collect();
    fn find(root: &mut [usize], x: usize) -> usize {
        let mut x = x;
        while root[x] != x {
            root[x] = root[root[x]];
            x = root[x];
        }
        x
    }
    let mut joined = 0;
    for (_, u, v) in edges {
        if joined + 1 >= n {
            break;
        }
        if next[u] != usize::MAX || prev[v] != usize::MAX {
            continue;
        }
        let (ru, rv) = (find(&mut root, u), find(&mut root, v));
        if ru == rv {
            continue;
        }
        next[u] = v;
        prev[v] = u;
        root[ru] = rv;
        joined += 1;
    }
    // Concatenate the chains, each from its head, in order of their heads.
    let mut order = Vec::with_capacity(n);
    #[allow(clippy::needless_range_loop)] // h is a sequence index, not only prev's
    for h in 0..n {
        if prev[h] == usize::MAX {
            let mut x = h;
            loop {
                order.push(x);
                if next[x] == usize::MAX {
                    break;
                }
                x = next[x];
            }
        }
    }
    order
}

/// Longest run Or-opt moves. The classic 3 left seed000-like orders stuck at P ≥ T,
/// where whole call bodies (7–20 one-sample sequences) sit in the wrong place.
const OR_OPT_RUN: usize = 24;

/// Or-opt: move runs of 1..=OR_OPT_RUN consecutive sequences to the best other place while that
/// gains. Each move's gain is computed from the edges it changes (and the closing W edge).
fn or_opt(m: &Matrix, mut order: Vec<usize>) -> (Vec<usize>, usize) {
    let n = order.len();
    if n < 3 {
        return (order, 0);
    }
    let mut moves = 0;
    let mut improved = true;
    let mut rounds = 0;
    while improved && rounds < 50 {
        improved = false;
        rounds += 1;
        for len in 1..=OR_OPT_RUN.min(n - 1) {
            let mut i = 0;
            while i + len <= n {
                let before = m.total_local(&order, i, len);
                // Remove the run and find the best insertion point.
                let run: Vec<usize> = order[i..i + len].to_vec();
                let mut rest: Vec<usize> = Vec::with_capacity(n - len);
                rest.extend_from_slice(&order[..i]);
                rest.extend_from_slice(&order[i + len..]);
                let base = m.path_without(&order, i, len, &rest);
                let mut best: Option<(i64, usize)> = None;
                for q in 0..=rest.len() {
                    if q == i {
                        continue;
                    }
                    let gain = m.insert_gain(&rest, &run, q) + base - before;
                    if gain > 0 && best.is_none_or(|b| gain > b.0) {
                        best = Some((gain, q));
                    }
                }
                if let Some((_, q)) = best {
                    let mut new = rest;
                    new.splice(q..q, run);
                    order = new;
                    moves += 1;
                    improved = true;
                }
                i += 1;
            }
        }
    }
    (order, moves)
}

impl Matrix {
    /// Score of the edges touching the run order[i..i+len] plus the closing edge.
    pub(crate) fn total_local(&self, order: &[usize], i: usize, len: usize) -> i64 {
        let n = order.len();
        let mut s = 0;
        if i > 0 {
            s += self.r(order[i - 1], order[i]);
        }
        if i + len < n {
            s += self.r(order[i + len - 1], order[i + len]);
        }
        s + self.w(order[n - 1], order[0])
    }

    /// Score the remainder gains when the run is cut out: the joining edge (the closing
    /// edge is counted by `insert_gain`).
    pub(crate) fn path_without(&self, order: &[usize], i: usize, len: usize, _rest: &[usize]) -> i64 {
        if i > 0 && i + len < order.len() {
            self.r(order[i - 1], order[i + len])
        } else {
            0
        }
    }

    /// Gain of inserting `run` at position q of `rest`: new edges minus the broken one,
    /// plus the closing edge of the resulting order.
    pub(crate) fn insert_gain(&self, rest: &[usize], run: &[usize], q: usize) -> i64 {
        let mut s = 0;
        if q > 0 && q < rest.len() {
            s -= self.r(rest[q - 1], rest[q]);
        }
        if q > 0 {
            s += self.r(rest[q - 1], run[0]);
        }
        if q < rest.len() {
            s += self.r(run[run.len() - 1], rest[q]);
        }
        let first = if q == 0 { run[0] } else { rest[0] };
        let last = if q == rest.len() { run[run.len() - 1] } else { rest[rest.len() - 1] };
        s + self.w(last, first)
    }
}

/// Upper bound: each sequence is followed by one other through R, except the last, which
/// closes through W; so the total is at most Σ_u max_v max(R(u,v), W(u,v)), and the same
/// by predecessors. The smaller of both.
fn upper_bound(m: &Matrix) -> i64 {
    let n = m.n;
    let mut out = 0i64;
    let mut inn = vec![i64::MIN; n];
    for u in 0..n {
        let mut best = i64::MIN;
        #[allow(clippy::needless_range_loop)] // v is a sequence index for r and w too
        for v in 0..n {
            let x = if u != v { m.r(u, v).max(m.w(u, v)) } else { m.w(u, v) };
            best = best.max(x);
            inn[v] = inn[v].max(x);
        }
        out += best;
    }
    out.min(inn.iter().sum())
}
