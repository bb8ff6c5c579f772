//! Combination patterns: ordered groups of partial sequences, their round-robin traces,
//! their likelihood, and the best order-preserving merge of two groups.
//!
//! A group is an ordered list of original partial sequences `s1..sm`. Its trace is their
//! round-robin interleave, row by row: `s1[0], s2[0], …, sm[0], s1[1], s2[1], …` (the seed's
//! P-4-5 = p4[0], p5[0], p4[1], …). A sequence shorter than the row leaves a *hole*; the
//! printed trace skips holes, and a pair of slots with a hole on either side scores
//! nothing (like a function mismatch with the seed's table) — so the likelihood of a
//! group is exactly
//!
//! ```text
//! likelihood(s1..sm) = Σ_{i<m} R(s_i, s_{i+1}) + W(s_m, s1)
//! R(u, v) = Σ_k like(u[k], v[k])        (neighbours in one row)
//! W(u, v) = Σ_k like(u[k], v[k+1])      (end of a row to the start of the next)
//! ```
//!
//! This decomposition is what lets [`best_merge`] find the most likely of all
//! C(a+b, a) order-preserving interleavings of two groups by dynamic programming over
//! (taken from A, taken from B, last taken from which) in O(a·b·len) time and 2 bits of
//! memory per cell, instead of enumerating them; [`brute_force_merge`] enumerates them
//! and the property tests check both agree.

use rayon::prelude::*;

use crate::info::Info;
use crate::scores::{pack, Packed, Scores};

/// R(u, v): likelihood of `v` following `u` in every row.
#[inline]
pub(crate) fn row_pair(scores: &Scores, u: &[Info], v: &[Info]) -> i64 {
    u.iter().zip(v).map(|(a, b)| scores.likelihood(a, b)).sum()
}

/// W(u, v): likelihood of row k ending with `u[k]` and row k+1 starting with `v[k+1]`.
#[inline]
pub(crate) fn wrap_pair(scores: &Scores, u: &[Info], v: &[Info]) -> i64 {
    if v.is_empty() {
        return 0;
    }
    u.iter().zip(&v[1..]).map(|(a, b)| scores.likelihood(a, b)).sum()
}

/// Slots of the round-robin interleave, holes included.
pub fn slots<'a>(sequences: &[&'a [Info]]) -> Vec<Option<&'a Info>> {
    let rows = sequences.iter().map(|s| s.len()).max().unwrap_or(0);
    let mut out = Vec::with_capacity(rows * sequences.len());
    for k in 0..rows {
        for s in sequences {
            out.push(s.get(k));
        }
    }
    out
}

/// The round-robin trace of sequences in this order, holes skipped.
pub fn round_robin(sequences: &[&[Info]]) -> Vec<Info> {
    slots(sequences).into_iter().flatten().copied().collect()
}

/// Likelihood of a pattern by walking its slots pair by pair (the seed's definition; a
/// pair with a hole scores 0). The oracle for the decomposed form.
pub fn walk_likelihood(scores: &Scores, sequences: &[&[Info]]) -> i64 {
    let s = slots(sequences);
    s.windows(2)
        .map(|w| match (w[0], w[1]) {
            (Some(a), Some(b)) => scores.likelihood(a, b),
            _ => 0,
        })
        .sum()
}

/// Likelihood by the decomposition (R between neighbours, W from last to first).
pub fn order_likelihood(scores: &Scores, sequences: &[&[Info]]) -> i64 {
    if sequences.is_empty() {
        return 0;
    }
    let inner: i64 = sequences.windows(2).map(|w| row_pair(scores, w[0], w[1])).sum();
    inner + wrap_pair(scores, sequences[sequences.len() - 1], sequences[0])
}

/// Which group each member of a merged order came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum From {
    /// The first group.
    A,
    /// The second group.
    B,
}

/// The best merge: the choice per position and its likelihood.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Merge {
    /// For each position of the merged order, the group its member came from.
    pub choices: Vec<From>,
    /// The merged order's total likelihood.
    pub likelihood: i64,
}

impl Merge {
    /// The merged order of member indices, given the two groups' member lists.
    pub fn apply<T: Copy>(&self, a: &[T], b: &[T]) -> Vec<T> {
        let (mut i, mut j) = (0, 0);
        self.choices
            .iter()
            .map(|c| match c {
                From::A => {
                    i += 1;
                    a[i - 1]
                }
                From::B => {
                    j += 1;
                    b[j - 1]
                }
            })
            .collect()
    }
}

const NONE: i64 = i64::MIN / 4;

/// The most likely order-preserving interleaving of groups `a` and `b` (each an ordered
/// list of sequences), found exactly by dynamic programming. Ties prefer taking from A.
pub fn best_merge(scores: &Scores, a: &[&[Info]], b: &[&[Info]]) -> Merge {
    let (na, nb) = (a.len(), b.len());
    if na == 0 || nb == 0 {
        let choices = if na == 0 { vec![From::B; nb] } else { vec![From::A; na] };
        let all: Vec<&[Info]> = if na == 0 { b.to_vec() } else { a.to_vec() };
        return Merge { choices, likelihood: order_likelihood(scores, &all) };
    }
    // Chains inside each group: R(a[i-1], a[i]).
    let chain = |g: &[&[Info]]| -> Vec<i64> {
        (0..g.len()).into_par_iter().map(|i| if i == 0 { 0 } else { row_pair(scores, g[i - 1], g[i]) }).collect()
    };
    let ca = chain(a);
    let cb = chain(b);
    let cross = Cross::new(scores, a, b);
    let w = nb + 1;
    // Scores per first choice f (0: A first, 1: B first) and last t (0: A, 1: B), two rows.
    let mut prev = vec![[[NONE; 2]; 2]; w];
    let mut cur = vec![[[NONE; 2]; 2]; w];
    // Backpointers: per f, per cell, bit t set when the predecessor's last was B.
    let mut back = [vec![0u8; (na + 1) * w], vec![0u8; (na + 1) * w]];
    for i in 0..=na {
        for j in 0..=nb {
            let mut cell = [[NONE; 2]; 2];
            if i == 1 && j == 0 {
                cell[0][0] = 0;
            }
            if i == 0 && j == 1 {
                cell[1][1] = 0;
            }
            // Cross pair scores for (a[i-1], b[j-1]) in both directions, computed once.
            let (rab, rba) = if i > 0 && j > 0 { cross.get(scores, a, b, i - 1, j - 1) } else { (0, 0) };
            for f in 0..2 {
                // Last from A: a[i-1] follows (i-1, j, A) via chain or (i-1, j, B) via b[j-1].
                if i > 0 && !(i == 1 && j == 0) {
                    let from_a = if i >= 2 { add(prev[j][f][0], ca[i - 1]) } else { NONE };
                    let from_b = if j >= 1 { add(prev[j][f][1], rba) } else { NONE };
                    if from_b > from_a {
                        cell[f][0] = from_b;
                        back[f][i * w + j] |= 1;
                    } else {
                        cell[f][0] = from_a;
                    }
                }
                // Last from B: b[j-1] follows (i, j-1, A) via a[i-1] or (i, j-1, B) via chain.
                if j > 0 && !(i == 0 && j == 1) {
                    let from_a = if i >= 1 { add(cur[j - 1][f][0], rab) } else { NONE };
                    let from_b = if j >= 2 { add(cur[j - 1][f][1], cb[j - 1]) } else { NONE };
                    if from_b > from_a {
                        cell[f][1] = from_b;
                        back[f][i * w + j] |= 2;
                    } else {
                        cell[f][1] = from_a;
                    }
                }
            }
            cur[j] = cell;
        }
        std::mem::swap(&mut prev, &mut cur);
    }
    // prev now holds row na. Close with W(last, first).
    let last = |t: usize| if t == 0 { a[na - 1] } else { b[nb - 1] };
    let first = |f: usize| if f == 0 { a[0] } else { b[0] };
    let mut best = (NONE, 0usize, 0usize);
    #[allow(clippy::needless_range_loop)] // f, t: which group came first and last
    for f in 0..2 {
        for t in 0..2 {
            let v = add(prev[nb][f][t], wrap_pair(scores, last(t), first(f)));
            if v > best.0 {
                best = (v, f, t);
            }
        }
    }
    let (likelihood, f, mut t) = best;
    let (mut i, mut j) = (na, nb);
    let mut choices = Vec::with_capacity(na + nb);
    while i + j > 0 {
        let bit = back[f][i * w + j] >> t & 1;
        if t == 0 {
            choices.push(From::A);
            i -= 1;
        } else {
            choices.push(From::B);
            j -= 1;
        }
        t = bit as usize;
    }
    choices.reverse();
    Merge { choices, likelihood }
}

/// Cells up to which the cross pairs are computed up front, in parallel (16 bytes each).
const CROSS_TABLE: usize = 1 << 20;

/// R(a[i], b[j]) and R(b[j], a[i]) for every cell of the merge: the bulk of its work.
/// Computed on all cores up front when the table is small enough, else cell by cell;
/// on packed instructions when the scores allow it ([`crate::scores::Packed`]).
/// The packed table and both groups' sequences, packed.
type PackedGroups = (Packed, Vec<Vec<u64>>, Vec<Vec<u64>>);

struct Cross {
    nb: usize,
    packed: Option<PackedGroups>,
    table: Option<Vec<(i64, i64)>>,
}

impl Cross {
    fn new(scores: &Scores, a: &[&[Info]], b: &[&[Info]]) -> Cross {
        let pack_all = |g: &[&[Info]]| -> Vec<Vec<u64>> { g.iter().map(|s| s.iter().map(pack).collect()).collect() };
        let packed = scores.packed(false).map(|p| (p, pack_all(a), pack_all(b)));
        let mut cross = Cross { nb: b.len(), packed, table: None };
        if a.len() * b.len() <= CROSS_TABLE {
            let nb = b.len();
            let c = &cross;
            let table = (0..a.len() * nb).into_par_iter().map(|k| c.compute(scores, a, b, k / nb, k % nb)).collect();
            cross.table = Some(table);
        }
        cross
    }

    #[inline]
    fn compute(&self, scores: &Scores, a: &[&[Info]], b: &[&[Info]], i: usize, j: usize) -> (i64, i64) {
        match &self.packed {
            Some((p, pa, pb)) => (p.sum(&pa[i], &pb[j]), p.sum(&pb[j], &pa[i])),
            None => (row_pair(scores, a[i], b[j]), row_pair(scores, b[j], a[i])),
        }
    }

    #[inline]
    fn get(&self, scores: &Scores, a: &[&[Info]], b: &[&[Info]], i: usize, j: usize) -> (i64, i64) {
        match &self.table {
            Some(t) => t[i * self.nb + j],
            None => self.compute(scores, a, b, i, j),
        }
    }
}

#[inline]
fn add(x: i64, y: i64) -> i64 {
    if x == NONE {
        NONE
    } else {
        x + y
    }
}

/// Enumerates every order-preserving interleaving of `a` and `b` and walks each pattern's
/// slots: the oracle for [`best_merge`] (exponential; small groups only). Returns the best
/// likelihood and how many patterns were scored.
pub fn brute_force_merge(scores: &Scores, a: &[&[Info]], b: &[&[Info]]) -> (i64, u64) {
    fn go<'a>(scores: &Scores, a: &[&'a [Info]], b: &[&'a [Info]], cur: &mut Vec<&'a [Info]>, best: &mut i64, count: &mut u64) {
        if a.is_empty() && b.is_empty() {
            *count += 1;
            *best = (*best).max(walk_likelihood(scores, cur));
            return;
        }
        if let Some((x, rest)) = a.split_first() {
            cur.push(x);
            go(scores, rest, b, cur, best, count);
            cur.pop();
        }
        if let Some((y, rest)) = b.split_first() {
            cur.push(y);
            go(scores, a, rest, cur, best, count);
            cur.pop();
        }
    }
    let mut best = i64::MIN;
    let mut count = 0;
    go(scores, a, b, &mut Vec::new(), &mut best, &mut count);
    (best, count)
}
