//! Scores of a reconstruction against the exact trace of one iteration (sequences of
//! instruction addresses).
//!
//! * `position_accuracy`: share of positions i < true length where both hold the same
//!   instruction.
//! * `lcs_ratio`: length of the longest common subsequence / true length — how much of
//!   the true order survives, insensitive to a few extra or missing instructions.
//! * `edit_distance`: insertions, deletions and substitutions turning one into the other
//!   (computed when len·len ≤ 4·10^8, else absent).
//! * `length_ratio`: reconstructed length / true length.

use std::collections::HashMap;

use serde::Serialize;

/// A reconstructed trace scored against the exact iteration, instruction by instruction.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Comparison {
    /// Instructions in the exact iteration.
    pub true_length: usize,
    /// Instructions in the reconstruction.
    pub reconstructed_length: usize,
    /// Share of positions holding the exact instruction (of the true length).
    pub position_accuracy: f64,
    /// Longest common subsequence, in instructions.
    pub lcs: usize,
    /// `lcs / true_length`: 1 when every instruction is there in order.
    pub lcs_ratio: f64,
    /// Levenshtein distance, when the two lengths' product is at most 4·10^8.
    pub edit_distance: Option<usize>,
    /// `reconstructed_length / true_length`.
    pub length_ratio: f64,
}

/// Scores a reconstruction (instruction keys) against the exact iteration's keys.
pub fn compare(reconstructed: &[u64], exact: &[u64]) -> Comparison {
    let n = exact.len();
    let same = reconstructed.iter().zip(exact).filter(|(a, b)| a == b).count();
    let lcs = lcs_length(reconstructed, exact);
    let ratio = |x: usize| if n == 0 { 0.0 } else { x as f64 / n as f64 };
    Comparison {
        true_length: n,
        reconstructed_length: reconstructed.len(),
        position_accuracy: ratio(same),
        lcs,
        lcs_ratio: ratio(lcs),
        edit_distance: ((reconstructed.len() as u128) * (n as u128) <= 400_000_000).then(|| edit_distance(reconstructed, exact)),
        length_ratio: ratio(reconstructed.len()),
    }
}

/// Longest common subsequence, bit-parallel (Hyyrö 2004): O(|a|·|b|/64).
pub(crate) fn lcs_length(a: &[u64], b: &[u64]) -> usize {
    if a.is_empty() || b.is_empty() {
        return 0;
    }
    let words = b.len().div_ceil(64);
    let mut masks: HashMap<u64, Vec<u64>> = HashMap::new();
    for (j, &x) in b.iter().enumerate() {
        masks.entry(x).or_insert_with(|| vec![0u64; words])[j / 64] |= 1 << (j % 64);
    }
    let mut v = vec![u64::MAX; words];
    for x in a {
        let Some(m) = masks.get(x) else { continue };
        let mut carry = 0u64;
        for k in 0..words {
            let u = v[k] & m[k];
            let (s1, c1) = v[k].overflowing_add(u);
            let (s2, c2) = s1.overflowing_add(carry);
            carry = (c1 | c2) as u64;
            v[k] = s2 | (v[k] - u);
        }
    }
    // Count zeros among the |b| valid bits only (carries into the padding are dropped).
    let rem = b.len() % 64;
    v.iter()
        .enumerate()
        .map(|(k, &w)| {
            let w = if k + 1 == words && rem != 0 { w | !((1u64 << rem) - 1) } else { w };
            w.count_zeros() as usize
        })
        .sum()
}

/// Plain Levenshtein distance with two rows.
pub fn edit_distance(a: &[u64], b: &[u64]) -> usize {
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    let mut cur = vec![0; b.len() + 1];
    for (i, x) in a.iter().enumerate() {
        cur[0] = i + 1;
        for (j, y) in b.iter().enumerate() {
            cur[j + 1] = (prev[j] + (x != y) as usize).min(prev[j + 1] + 1).min(cur[j] + 1);
        }
        std::mem::swap(&mut prev, &mut cur);
    }
    prev[b.len()]
}

/// A time-weighted trace (time sampling: an instruction appears about as often as time was
/// spent on it) judged by what it claims, not by the exact iteration's length:
///
/// * **order**: the instructions it shows, in the order it shows them, against the exact
///   iteration. Runs of one instruction are collapsed in both sequences (a run is time, not
///   repetition), the trace is restricted to instructions the iteration executes, and
///   `order_ratio` = LCS of the two collapsed sequences / the trace's collapsed length:
///   the share of the trace's steps that follow the true order. `coverage` = the share of
///   the iteration's distinct instructions that the trace shows at all.
/// * **shares** ([`ShareComparison`]): each function's (or block's) share of the trace
///   against the share of the recorded samples that fell there.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct OrderComparison {
    /// Distinct instructions of the exact iteration.
    pub exact_distinct: usize,
    /// Of those, the ones the trace shows.
    pub shown_distinct: usize,
    /// `shown_distinct / exact_distinct`.
    pub coverage: f64,
    /// Trace entries at instructions the iteration never executes (dropped before ordering).
    pub foreign_entries: usize,
    /// Length of the exact iteration with runs collapsed.
    pub exact_runs: usize,
    /// Length of the trace (restricted to the iteration's instructions) with runs collapsed.
    pub trace_runs: usize,
    /// Longest common subsequence of the two collapsed sequences.
    pub lcs: usize,
    /// `lcs / trace_runs`: 1 when everything the trace shows is in the true order.
    pub order_ratio: f64,
}

/// `sequence` with every run of one value reduced to one entry.
pub(crate) fn collapse_runs(sequence: &[u64]) -> Vec<u64> {
    let mut out: Vec<u64> = Vec::with_capacity(sequence.len());
    for &x in sequence {
        if out.last() != Some(&x) {
            out.push(x);
        }
    }
    out
}

/// The order part of judging a time-weighted trace (see [`OrderComparison`]).
pub fn compare_order(trace: &[u64], exact: &[u64]) -> OrderComparison {
    let executed: std::collections::HashSet<u64> = exact.iter().copied().collect();
    let kept: Vec<u64> = trace.iter().copied().filter(|x| executed.contains(x)).collect();
    let shown: std::collections::HashSet<u64> = kept.iter().copied().collect();
    let (t, r) = (collapse_runs(exact), collapse_runs(&kept));
    let lcs = lcs_length(&r, &t);
    let ratio = |a: usize, b: usize| if b == 0 { 0.0 } else { a as f64 / b as f64 };
    OrderComparison {
        exact_distinct: executed.len(),
        shown_distinct: shown.len(),
        coverage: ratio(shown.len(), executed.len()),
        foreign_entries: trace.len() - kept.len(),
        exact_runs: t.len(),
        trace_runs: r.len(),
        lcs,
        order_ratio: ratio(lcs, r.len()),
    }
}

/// One function's (or block's) share of a time-weighted trace, of the samples, and of the
/// exact iteration's instructions.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ShareRow {
    /// The function (or `function:BB` block).
    pub name: String,
    /// Share of the trace's entries: the time the trace claims was spent here.
    pub trace_share: f64,
    /// Share of the recorded samples that fell here: the time that was spent here.
    pub sample_share: f64,
    /// Share of the exact iteration's executed instructions (not time: a slow instruction,
    /// e.g. a cache miss, takes more time than its share of instructions).
    pub instruction_share: Option<f64>,
}

/// Shares by function or block, largest sample share first.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ShareComparison {
    /// One row per function or block, largest sample share first.
    pub rows: Vec<ShareRow>,
    /// Total variation distance between trace and sample shares, ½·Σ|trace − sample|:
    /// the share of time the trace puts in the wrong place (0 = every share right, 1 =
    /// disjoint).
    pub distance: f64,
    /// The same distance between sample shares and instruction shares: how far time is from
    /// instruction counts in this program (what an instruction-sampled trace would show).
    pub instruction_distance: Option<f64>,
}

fn shares_of<'a>(keys: impl Iterator<Item = &'a str>) -> (std::collections::HashMap<&'a str, f64>, usize) {
    let mut counts: std::collections::HashMap<&str, f64> = std::collections::HashMap::new();
    let mut total = 0usize;
    for k in keys {
        *counts.entry(k).or_default() += 1.0;
        total += 1;
    }
    for v in counts.values_mut() {
        *v /= total.max(1) as f64;
    }
    (counts, total)
}

fn total_variation(a: &std::collections::HashMap<&str, f64>, b: &std::collections::HashMap<&str, f64>) -> f64 {
    let keys: std::collections::HashSet<&&str> = a.keys().chain(b.keys()).collect();
    keys.into_iter().map(|k| (a.get(*k).unwrap_or(&0.0) - b.get(*k).unwrap_or(&0.0)).abs()).sum::<f64>() / 2.0
}

/// The shares part of judging a time-weighted trace: `trace`, `samples` and `exact` are the
/// group (function or block name) of each trace entry, sample and executed instruction;
/// `exact` may be empty (no exact trace at hand).
pub fn compare_shares(trace: &[&str], samples: &[&str], exact: &[&str]) -> ShareComparison {
    let (t, _) = shares_of(trace.iter().copied());
    let (s, _) = shares_of(samples.iter().copied());
    let (e, n_exact) = shares_of(exact.iter().copied());
    let names: std::collections::BTreeSet<&str> = t.keys().chain(s.keys()).chain(e.keys()).copied().collect();
    let mut rows: Vec<ShareRow> = names
        .into_iter()
        .map(|name| ShareRow {
            name: name.to_string(),
            trace_share: t.get(name).copied().unwrap_or(0.0),
            sample_share: s.get(name).copied().unwrap_or(0.0),
            instruction_share: (n_exact > 0).then(|| e.get(name).copied().unwrap_or(0.0)),
        })
        .collect();
    rows.sort_by(|a, b| b.sample_share.total_cmp(&a.sample_share).then(b.trace_share.total_cmp(&a.trace_share)));
    ShareComparison { rows, distance: total_variation(&t, &s), instruction_distance: (n_exact > 0).then(|| total_variation(&s, &e)) }
}

#[cfg(test)]
mod weighted_tests {
    use super::*;

    #[test]
    fn runs_collapse_and_order_is_judged_on_what_the_trace_shows() {
        assert_eq!(collapse_runs(&[1, 1, 2, 2, 2, 1, 3, 3]), vec![1, 2, 1, 3]);
        // exact iteration 1 2 3 4 5; the trace shows 1 (long), 2, 4 (long), 9 (foreign), 5
        let c = compare_order(&[1, 1, 1, 2, 4, 4, 9, 5], &[1, 2, 3, 4, 5]);
        assert_eq!((c.exact_distinct, c.shown_distinct, c.foreign_entries), (5, 4, 1));
        assert_eq!((c.exact_runs, c.trace_runs, c.lcs), (5, 4, 4));
        assert_eq!(c.order_ratio, 1.0);
        assert!((c.coverage - 0.8).abs() < 1e-12);
        // a swapped pair costs one step of the order
        let c = compare_order(&[1, 3, 2, 4], &[1, 2, 3, 4]);
        assert_eq!(c.lcs, 3);
        assert!((c.order_ratio - 0.75).abs() < 1e-12);
    }

    #[test]
    fn shares_and_their_distance() {
        let trace = ["f", "f", "f", "g"];
        let samples = ["f", "f", "g", "g"];
        let exact = ["f", "g", "g", "g", "g"];
        let c = compare_shares(&trace, &samples, &exact);
        assert_eq!(c.rows.len(), 2);
        let f = c.rows.iter().find(|r| r.name == "f").unwrap();
        assert_eq!((f.trace_share, f.sample_share, f.instruction_share), (0.75, 0.5, Some(0.2)));
        assert!((c.distance - 0.25).abs() < 1e-12);
        assert!((c.instruction_distance.unwrap() - 0.3).abs() < 1e-12);
        // identical distributions are at distance 0; without an exact trace no instruction shares
        let c = compare_shares(&samples, &samples, &[]);
        assert_eq!((c.distance, c.instruction_distance), (0.0, None));
        assert!(c.rows.iter().all(|r| r.instruction_share.is_none()));
    }
}
