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

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Comparison {
    pub true_length: usize,
    pub reconstructed_length: usize,
    pub position_accuracy: f64,
    pub lcs: usize,
    pub lcs_ratio: f64,
    pub edit_distance: Option<usize>,
    pub length_ratio: f64,
}

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
pub fn lcs_length(a: &[u64], b: &[u64]) -> usize {
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
