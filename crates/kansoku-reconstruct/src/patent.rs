//! `--solver patent`: the seed's loop. Similarity of every pair of current sequences,
//! pick the most similar pair (or the best of the top k), merge it into its most likely
//! combination pattern, replace, repeat until one sequence remains.
//!
//! Each group remembers each other group's similarity only through its best partner, so
//! a round costs one pass over the groups for the merged one (plus a rescan for groups
//! whose best partner disappeared), not all pairs again.
//!
//! Which pair is "most similar" once groups hold several sequences ([`Linkage`]): the seed
//! compares a merged group's trace with the other's from the head, like two original
//! sequences ([`Linkage::Head`]). A merged trace interleaves its members, so its k-th
//! instruction lies at another place in the iteration than a single sequence's k-th, and
//! the comparison stops meaning neighbours. The default ([`Linkage::Member`], beyond the
//! seed) takes the similarity of the two groups' most similar original members: a group is
//! as close to another as any of its sequences is (single linkage), kept in a matrix of
//! the original pairs and updated by one max per merge.
//!
//! Speed: the similarity passes are where the time goes (70 % of the solver's time at
//! 10,000 sequences of 20 samples, measured with `perf`). They run on all cores (rayon)
//! and, for the default instruction information (function, offset), on instructions
//! packed into one `u64` each and scored through a flat table ([`Kernel`]): a third of
//! the memory traffic of [`Info`] and no branch on the granularity.

use rayon::prelude::*;

use crate::info::Info;
use crate::merge::{best_merge, order_likelihood, round_robin};
use crate::scores::{pack, Packed, Scores};

/// One current sequence: the original sequences it merges, in order, and their trace.
#[derive(Clone, Debug)]
struct Group {
    members: Vec<usize>,
    trace: Vec<Info>,
    /// The trace packed for [`Kernel::Packed`] (empty with [`Kernel::General`]).
    packed: Vec<u64>,
    likelihood: i64,
}

/// Similarity of two sequences: instructions compared from the head, pair by pair.
#[inline]
pub fn similarity(scores: &Scores, x: &[Info], y: &[Info]) -> i64 {
    x.iter().zip(y).map(|(a, b)| scores.similarity(a, b)).sum()
}

/// How the loop computes similarities. Both give exactly [`similarity`]'s values. One
/// kernel lives per solve, so the packed table's size does not matter.
#[allow(clippy::large_enum_variant)]
enum Kernel<'a> {
    /// The default scores on packed instructions ([`Packed`]).
    Packed(Packed),
    /// Anything else (block granularity, control-flow scores): [`Scores::similarity`].
    General(&'a Scores),
}

impl<'a> Kernel<'a> {
    fn new(scores: &'a Scores) -> Kernel<'a> {
        match scores.packed(true) {
            Some(p) => Kernel::Packed(p),
            None => Kernel::General(scores),
        }
    }

    fn pack(&self, trace: &[Info]) -> Vec<u64> {
        match self {
            Kernel::Packed(_) => trace.iter().map(pack).collect(),
            Kernel::General(_) => Vec::new(),
        }
    }

    #[inline]
    fn similarity(&self, x: &Group, y: &Group) -> i64 {
        match self {
            Kernel::Packed(p) => p.sum(&x.packed, &y.packed),
            Kernel::General(scores) => similarity(scores, &x.trace, &y.trace),
        }
    }
}

/// `--linkage`: how similar two groups are (see the module comment).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Linkage {
    /// The seed: the groups' traces compared from the head.
    Head,
    /// The most similar pair of original members (single linkage).
    #[default]
    Member,
}

impl std::str::FromStr for Linkage {
    type Err = crate::error::UnknownChoice;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "head" => Ok(Linkage::Head),
            "member" => Ok(Linkage::Member),
            _ => Err(crate::error::UnknownChoice { what: "linkage", name: s.to_string(), choices: "head or member" }),
        }
    }
}

/// Most sequences for [`Linkage::Member`]: its matrix holds n(n−1)/2 similarities
/// (200 MB at 10,000). Beyond, the loop compares from the head, and the result's
/// `linkage` (the JSON's) says so.
pub const MEMBER_LIMIT: usize = 16_000;

/// Group similarities: computed from the traces ([`Linkage::Head`]) or looked up in the
/// matrix of current groups, row i holding columns j > i ([`Linkage::Member`]).
enum Similarities<'a> {
    Head(&'a Kernel<'a>),
    Member { n: usize, matrix: Vec<i32> },
}

impl Similarities<'_> {
    /// Index of (i, j), i ≠ j, in the upper triangle stored row by row.
    #[inline]
    fn at(n: usize, i: usize, j: usize) -> usize {
        let (i, j) = if i < j { (i, j) } else { (j, i) };
        i * (2 * n - i - 1) / 2 + (j - i - 1)
    }

    #[inline]
    fn between(&self, groups: &[Option<Group>], i: usize, j: usize) -> i64 {
        match self {
            Similarities::Head(kernel) => kernel.similarity(groups[i].as_ref().expect("alive"), groups[j].as_ref().expect("alive")),
            Similarities::Member { n, matrix } => matrix[Self::at(*n, i, j)] as i64,
        }
    }

    /// Fewest groups a core takes in a parallel scan: a matrix look-up is too little work
    /// to hand out one by one (measured: at 489 sequences the loop spent 75 % of its time
    /// in the threads' yields), a trace comparison is not.
    fn min_len(&self) -> usize {
        match self {
            Similarities::Head(_) => 16,
            Similarities::Member { .. } => 8192,
        }
    }

    /// `j` merged into `i`: with single linkage, i's similarity to x becomes the larger
    /// of i's and j's.
    fn merged(&mut self, alive: &[usize], i: usize, j: usize) {
        if let Similarities::Member { n, matrix } = self {
            for &x in alive {
                if x != i && x != j {
                    let (a, b) = (Self::at(*n, i, x), Self::at(*n, j, x));
                    matrix[a] = matrix[a].max(matrix[b]);
                }
            }
        }
    }
}

/// A best partner: (similarity, index). Higher similarity wins, then the lower index —
/// the order a sequential scan with "strictly better replaces" would give.
type Partner = Option<(i64, usize)>;

fn prefer(a: Partner, b: Partner) -> Partner {
    match (a, b) {
        (Some(x), Some(y)) => Some(if y.0 > x.0 || (y.0 == x.0 && y.1 < x.1) { y } else { x }),
        (x, None) => x,
        (None, y) => y,
    }
}

/// The outcome: the order of the original sequences and the merged trace.
#[derive(Clone, Debug)]
pub struct PatentResult {
    /// The partial sequences' indices in the order found.
    pub order: Vec<usize>,
    /// The merged trace.
    pub trace: Vec<Info>,
    /// The trace's total likelihood.
    pub likelihood: i64,
    /// Merges made (one fewer than the groups there were, when all merged).
    pub merges: usize,
    /// Groups whose best partner was merged away and had to look again.
    pub rescans: usize,
    /// The linkage used ([`Linkage::Head`] beyond [`MEMBER_LIMIT`] sequences).
    pub linkage: Linkage,
    /// Stopped before one group remained (Ctrl-C): the groups were joined as they were.
    pub stopped: bool,
}

/// Every group's best partner, every pair computed once (similarity is symmetric: it
/// looks differences up by absolute value). Rows are spread over the cores; each worker
/// keeps its own partners for the columns and the workers' answers are combined. With
/// `keep`, the similarities are also returned as the upper-triangle matrix.
fn initial_partners(kernel: &Kernel, groups: &[Option<Group>], keep: bool) -> (Vec<Partner>, Option<Vec<i32>>) {
    let n = groups.len();
    let g = |i: usize| groups[i].as_ref().expect("all groups alive at the start");
    let mut matrix = if keep { vec![0i32; n * n.saturating_sub(1) / 2] } else { Vec::new() };
    let mut rows: Vec<(usize, &mut [i32])> = Vec::with_capacity(n);
    let mut rest = matrix.as_mut_slice();
    for i in 0..n {
        let len = if keep { n - i - 1 } else { 0 };
        let (row, tail) = rest.split_at_mut(len);
        rows.push((i, row));
        rest = tail;
    }
    let best = rows
        .into_par_iter()
        .fold(
            || vec![None; n],
            |mut best: Vec<Partner>, (i, row)| {
                let gi = g(i);
                for j in i + 1..n {
                    let s = kernel.similarity(gi, g(j));
                    if keep {
                        row[j - i - 1] = i32::try_from(s).unwrap_or(if s < 0 { i32::MIN } else { i32::MAX });
                    }
                    best[i] = prefer(best[i], Some((s, j)));
                    best[j] = prefer(best[j], Some((s, i)));
                }
                best
            },
        )
        .reduce(|| vec![None; n], |a, b| a.into_iter().zip(b).map(|(x, y)| prefer(x, y)).collect());
    (best, keep.then_some(matrix))
}

/// Runs the seed's loop over `sequences` (non-empty ones). `top_k` ≥ 1: how many of the
/// most similar pairs (each group's best partner, best first) to try merging; the merge
/// whose pattern gains the most likelihood over its two parts is kept.
pub fn solve_patent(scores: &Scores, sequences: &[Vec<Info>], top_k: usize, linkage: Linkage, progress: &mut dyn FnMut(usize, usize)) -> PatentResult {
    solve_patent_until(scores, sequences, top_k, linkage, progress, &|| false)
}

/// [`solve_patent`], polling `stop` before every merge: when it says so (Ctrl-C), the
/// groups merged so far are joined in the order of their first original sequence, and the
/// result's `stopped` says so.
pub(crate) fn solve_patent_until(
    scores: &Scores,
    sequences: &[Vec<Info>],
    top_k: usize,
    linkage: Linkage,
    progress: &mut dyn FnMut(usize, usize),
    stop: &dyn Fn() -> bool,
) -> PatentResult {
    let n = sequences.len();
    let kernel = Kernel::new(scores);
    let linkage = if n > MEMBER_LIMIT { Linkage::Head } else { linkage };
    let mut groups: Vec<Option<Group>> = sequences
        .iter()
        .enumerate()
        .map(|(i, s)| {
            Some(Group { members: vec![i], packed: kernel.pack(s), trace: s.clone(), likelihood: order_likelihood(scores, &[s]) })
        })
        .collect();
    if n == 0 {
        return PatentResult { order: vec![], trace: vec![], likelihood: 0, merges: 0, rescans: 0, linkage, stopped: false };
    }
    let (mut best, matrix) = initial_partners(&kernel, &groups, linkage == Linkage::Member);
    let mut similarities = match matrix {
        Some(matrix) => Similarities::Member { n, matrix },
        None => Similarities::Head(&kernel),
    };
    let mut alive_list: Vec<usize> = (0..n).collect();
    let mut alive = n;
    let mut merges = 0;
    let mut rescans = 0;
    let top_k = top_k.max(1);
    // Ties are the rule with control-flow scores only; the seed's scores keep its loop.
    let ties = if scores.has_flow() { TIES } else { 1 };
    while alive > 1 {
        progress(n - alive, n - 1);
        if stop() {
            let mut groups: Vec<Group> = groups.into_iter().flatten().collect();
            groups.sort_by_key(|g| g.members.iter().min().copied());
            let order: Vec<usize> = groups.into_iter().flat_map(|g| g.members).collect();
            let refs: Vec<&[Info]> = order.iter().map(|&i| sequences[i].as_slice()).collect();
            let likelihood = order_likelihood(scores, &refs);
            return PatentResult { trace: round_robin(&refs), order, likelihood, merges, rescans, linkage, stopped: true };
        }
        let candidates = candidate_pairs(&best, top_k, ties);
        // The candidates' merges are independent: computed in parallel, the first of
        // the largest gains kept.
        let merged: Vec<(i64, usize, usize, Group)> = candidates
            .par_iter()
            .map(|&(_, i, j)| {
                let (a, b) = (groups[i].as_ref().unwrap(), groups[j].as_ref().unwrap());
                let g = merge_groups(scores, &kernel, linkage, sequences, a, b);
                (g.likelihood - a.likelihood - b.likelihood, i, j, g)
            })
            .collect();
        let mut chosen: Option<(i64, usize, usize, Group)> = None;
        for m in merged {
            if chosen.as_ref().is_none_or(|c| m.0 > c.0) {
                chosen = Some(m);
            }
        }
        let (_, i, j, merged) = chosen.expect("at least two groups have partners");
        groups[i] = Some(merged);
        groups[j] = None;
        best[j] = None;
        alive_list.retain(|&x| x != j);
        alive -= 1;
        merges += 1;
        if alive == 1 {
            break;
        }
        similarities.merged(&alive_list, i, j);
        rescans += update_partners(&similarities, &groups, &alive_list, &mut best, i, j);
    }
    progress(n - 1, n - 1);
    let g = groups.into_iter().flatten().next().unwrap();
    PatentResult { order: g.members, trace: g.trace, likelihood: g.likelihood, merges, rescans, linkage, stopped: false }
}

/// Most pairs tried when several are equally the most similar (`--likelihood cfg`).
pub(crate) const TIES: usize = 4;

/// Candidate pairs: the groups with the best partners, best first: the `top_k` best, and
/// beyond them pairs exactly as similar as the best (up to `ties` in all). The seed
/// merges "the most similar pair" and does not say which of several; with control-flow
/// scores every pair of neighbours is equally similar, and taking the first by index
/// merged seed000's three func_B runs wrongly at P = 31. The loop keeps, among them, the
/// merge that gains the most likelihood.
fn candidate_pairs(best: &[Partner], top_k: usize, ties: usize) -> Vec<(i64, usize, usize)> {
    let mut candidates = ranked_pairs(best, top_k.max(ties));
    let top = candidates.first().map(|c| c.0);
    let mut kept = 0;
    candidates.retain(|c| {
        kept += 1;
        kept <= top_k || Some(c.0) == top
    });
    candidates
}

/// The `limit` most similar pairs among each group's best partner, best first.
fn ranked_pairs(best: &[Partner], top_k: usize) -> Vec<(i64, usize, usize)> {
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
    candidates
}

/// After `j` was merged into `i`: the merged group's similarity to every other group (in
/// parallel), which may become their best partner; groups whose partner was `i` or `j`
/// look again, unless single linkage shows the merged group is their best. Returns how
/// many looked again.
fn update_partners(similarities: &Similarities, groups: &[Option<Group>], alive: &[usize], best: &mut [Partner], i: usize, j: usize) -> usize {
    let sims: Vec<(usize, i64)> =
        alive.par_iter().with_min_len(similarities.min_len()).filter(|&&x| x != i).map(|&x| (x, similarities.between(groups, i, x))).collect();
    let mut best_i: Partner = None;
    let mut again = Vec::new();
    let single_linkage = matches!(similarities, Similarities::Member { .. });
    for &(x, s) in &sims {
        best_i = prefer(best_i, Some((s, x)));
        match best[x] {
            // With single linkage the merged group is at least as similar to x as i or j
            // was; strictly more, and it is x's best without a look (on a tie a group of
            // lower index may come first).
            Some((old, p)) if (p == i || p == j) && single_linkage && s > old => best[x] = Some((s, i)),
            Some((_, p)) if p == i || p == j => again.push(x),
            Some((bs, _)) if bs >= s => {}
            _ => best[x] = Some((s, i)),
        }
    }
    for &x in &again {
        best[x] = best_partner(similarities, groups, alive, x);
    }
    best[i] = best_i;
    again.len()
}

/// Higher similarity first, then lower indices (deterministic ties).
fn better(x: &(i64, usize, usize), y: &(i64, usize, usize)) -> bool {
    (x.0, std::cmp::Reverse(x.1), std::cmp::Reverse(x.2)) > (y.0, std::cmp::Reverse(y.1), std::cmp::Reverse(y.2))
}

/// The best partner of group `i` among the alive groups (comparing traces: in parallel).
fn best_partner(similarities: &Similarities, groups: &[Option<Group>], alive: &[usize], i: usize) -> Partner {
    groups[i].as_ref()?;
    if let Similarities::Member { n, matrix } = similarities {
        // A look-up per group: one tight loop beats handing the groups out.
        let mut best: Partner = None;
        for &x in alive.iter().filter(|&&x| x != i) {
            let s = matrix[Similarities::at(*n, i, x)] as i64;
            if best.is_none_or(|(b, _)| s > b) {
                best = Some((s, x));
            }
        }
        return best;
    }
    alive
        .par_iter()
        .with_min_len(similarities.min_len())
        .filter(|&&x| x != i)
        .map(|&x| Some((similarities.between(groups, i, x), x)))
        .reduce(|| None, prefer)
}

fn merge_groups(scores: &Scores, kernel: &Kernel, linkage: Linkage, sequences: &[Vec<Info>], a: &Group, b: &Group) -> Group {
    let sa: Vec<&[Info]> = a.members.iter().map(|&m| sequences[m].as_slice()).collect();
    let sb: Vec<&[Info]> = b.members.iter().map(|&m| sequences[m].as_slice()).collect();
    let m = best_merge(scores, &sa, &sb);
    let members = m.apply(&a.members, &b.members);
    let ordered: Vec<&[Info]> = members.iter().map(|&i| sequences[i].as_slice()).collect();
    let trace = round_robin(&ordered);
    // Only the seed's linkage compares merged traces.
    let packed = if linkage == Linkage::Head { kernel.pack(&trace) } else { Vec::new() };
    Group { packed, trace, members, likelihood: m.likelihood }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::info::{Granularity, Weighting};

    #[test]
    fn every_pair_has_its_own_cell() {
        for n in 2..40 {
            let mut seen = vec![false; n * (n - 1) / 2];
            for i in 0..n {
                for j in i + 1..n {
                    let k = Similarities::at(n, i, j);
                    assert_eq!(k, Similarities::at(n, j, i));
                    assert!(!std::mem::replace(&mut seen[k], true), "n {n}: ({i}, {j}) shares cell {k}");
                }
            }
            assert!(seen.iter().all(|&s| s));
        }
    }

    /// Single linkage: after a merge, a group is as similar to another as its most similar
    /// member — checked against the similarities computed afresh from the sequences.
    #[test]
    fn merged_groups_keep_their_members_best_similarity() {
        let scores = Scores::defaults(Granularity::Function, Weighting::Count);
        let seq = |o: &[i32]| -> Vec<Info> { o.iter().map(|&x| Info::new(0, x, x as u64)).collect() };
        let sequences = [seq(&[0, 5]), seq(&[1, 6]), seq(&[9, 3]), seq(&[2, 7])];
        let kernel = Kernel::new(&scores);
        let groups: Vec<Option<Group>> = sequences
            .iter()
            .enumerate()
            .map(|(i, s)| Some(Group { members: vec![i], packed: kernel.pack(s), trace: s.clone(), likelihood: 0 }))
            .collect();
        let (_, matrix) = initial_partners(&kernel, &groups, true);
        let mut sims = Similarities::Member { n: 4, matrix: matrix.unwrap() };
        sims.merged(&[0, 1, 2, 3], 0, 1);
        for x in [2, 3] {
            let want = similarity(&scores, &sequences[0], &sequences[x]).max(similarity(&scores, &sequences[1], &sequences[x]));
            assert_eq!(sims.between(&groups, 0, x), want);
        }
    }
}
