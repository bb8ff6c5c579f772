//! `--solver patent`: the seed's loop. Similarity of every pair of current sequences,
//! pick the most similar pair (or the best of the top k), merge it into its most likely
//! combination pattern, replace, repeat until one sequence remains.
//!
//! Each group remembers each other group's similarity only through its best partner, so
//! a round costs one pass over the groups for the merged one (plus a rescan for groups
//! whose best partner disappeared), not all pairs again.

use crate::info::Info;
use crate::merge::{best_merge, order_likelihood, round_robin};
use crate::scores::Scores;

/// One current sequence: the original sequences it merges, in order, and their trace.
#[derive(Clone, Debug)]
struct Group {
    members: Vec<usize>,
    trace: Vec<Info>,
    likelihood: i64,
}

/// Similarity of two sequences: instructions compared from the head, pair by pair.
#[inline]
pub fn similarity(scores: &Scores, x: &[Info], y: &[Info]) -> i64 {
    x.iter().zip(y).map(|(a, b)| scores.similarity(a, b)).sum()
}

/// The outcome: the order of the original sequences and the merged trace.
#[derive(Clone, Debug)]
pub struct PatentResult {
    pub order: Vec<usize>,
    pub trace: Vec<Info>,
    pub likelihood: i64,
    pub merges: usize,
    /// Groups whose best partner was merged away and had to look again.
    pub rescans: usize,
}

/// Runs the seed's loop over `sequences` (non-empty ones). `top_k` ≥ 1: how many of the
/// most similar pairs (each group's best partner, best first) to try merging; the merge
/// whose pattern gains the most likelihood over its two parts is kept.
pub fn solve_patent(scores: &Scores, sequences: &[Vec<Info>], top_k: usize, progress: &mut dyn FnMut(usize, usize)) -> PatentResult {
    let n = sequences.len();
    let mut groups: Vec<Option<Group>> = sequences
        .iter()
        .enumerate()
        .map(|(i, s)| Some(Group { members: vec![i], trace: s.clone(), likelihood: order_likelihood(scores, &[s]) }))
        .collect();
    if n == 0 {
        return PatentResult { order: vec![], trace: vec![], likelihood: 0, merges: 0, rescans: 0 };
    }
    let mut best: Vec<Option<(i64, usize)>> = vec![None; n];
    // Every pair once (similarity is symmetric: it looks differences up by absolute value).
    for i in 0..n {
        let gi = &groups[i].as_ref().unwrap().trace;
        for j in i + 1..n {
            let s = similarity(scores, gi, &groups[j].as_ref().unwrap().trace);
            if best[i].map_or(true, |(bs, _)| s > bs) {
                best[i] = Some((s, j));
            }
            if best[j].map_or(true, |(bs, _)| s > bs) {
                best[j] = Some((s, i));
            }
        }
    }
    let mut alive = n;
    let mut merges = 0;
    let mut rescans = 0;
    let top_k = top_k.max(1);
    while alive > 1 {
        progress(n - alive, n - 1);
        // Candidate pairs: the groups with the best partners, best first.
        let mut candidates: Vec<(i64, usize, usize)> = Vec::with_capacity(top_k + 1);
        for (i, b) in best.iter().enumerate() {
            let Some((s, j)) = *b else { continue };
            let c = (s, i.min(j), i.max(j));
            if candidates.iter().any(|x| x.1 == c.1 && x.2 == c.2) {
                continue;
            }
            if candidates.len() == top_k && candidates.last().is_some_and(|l| !better(&c, l)) {
                continue;
            }
            let at = candidates.iter().position(|x| better(&c, x)).unwrap_or(candidates.len());
            candidates.insert(at, c);
            candidates.truncate(top_k);
        }
        let mut chosen: Option<(i64, usize, usize, Group)> = None;
        for &(_, i, j) in &candidates {
            let g = merge_groups(scores, sequences, groups[i].as_ref().unwrap(), groups[j].as_ref().unwrap());
            let gain = g.likelihood - groups[i].as_ref().unwrap().likelihood - groups[j].as_ref().unwrap().likelihood;
            if chosen.as_ref().map_or(true, |c| gain > c.0) {
                chosen = Some((gain, i, j, g));
            }
        }
        let (_, i, j, merged) = chosen.expect("at least two groups have partners");
        groups[i] = Some(merged);
        groups[j] = None;
        best[j] = None;
        alive -= 1;
        merges += 1;
        if alive == 1 {
            break;
        }
        // Update best partners.
        let mut best_i: Option<(i64, usize)> = None;
        for x in 0..n {
            if x == i || groups[x].is_none() {
                continue;
            }
            let s = similarity(scores, &groups[i].as_ref().unwrap().trace, &groups[x].as_ref().unwrap().trace);
            if best_i.map_or(true, |(bs, _)| s > bs) {
                best_i = Some((s, x));
            }
            match best[x] {
                Some((_, p)) if p == i || p == j => {}
                Some((bs, _)) if bs >= s => continue,
                _ => {
                    best[x] = Some((s, i));
                    continue;
                }
            }
            rescans += 1;
            best[x] = best_partner(scores, &groups, x);
        }
        best[i] = best_i;
    }
    progress(n - 1, n - 1);
    let g = groups.into_iter().flatten().next().unwrap();
    PatentResult { order: g.members, trace: g.trace, likelihood: g.likelihood, merges, rescans }
}

/// Higher similarity first, then lower indices (deterministic ties).
fn better(x: &(i64, usize, usize), y: &(i64, usize, usize)) -> bool {
    (x.0, std::cmp::Reverse(x.1), std::cmp::Reverse(x.2)) > (y.0, std::cmp::Reverse(y.1), std::cmp::Reverse(y.2))
}

fn best_partner(scores: &Scores, groups: &[Option<Group>], i: usize) -> Option<(i64, usize)> {
    let gi = groups[i].as_ref()?;
    let mut best: Option<(i64, usize)> = None;
    for (x, g) in groups.iter().enumerate() {
        if x == i {
            continue;
        }
        if let Some(g) = g {
            let s = similarity(scores, &gi.trace, &g.trace);
            if best.map_or(true, |(bs, _)| s > bs) {
                best = Some((s, x));
            }
        }
    }
    best
}

fn merge_groups(scores: &Scores, sequences: &[Vec<Info>], a: &Group, b: &Group) -> Group {
    let sa: Vec<&[Info]> = a.members.iter().map(|&m| sequences[m].as_slice()).collect();
    let sb: Vec<&[Info]> = b.members.iter().map(|&m| sequences[m].as_slice()).collect();
    let m = best_merge(scores, &sa, &sb);
    let members = m.apply(&a.members, &b.members);
    let ordered: Vec<&[Info]> = members.iter().map(|&i| sequences[i].as_slice()).collect();
    Group { trace: round_robin(&ordered), members, likelihood: m.likelihood }
}
