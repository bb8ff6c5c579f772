//! The best combination pattern by dynamic programming equals the best of all C(a+b, a)
//! order-preserving interleavings enumerated by brute force, on random small groups.

use kansoku_reconstruct::merge::{best_merge, brute_force_merge, order_likelihood, walk_likelihood};
use std::collections::HashMap;

use kansoku_reconstruct::{ControlFlow, Granularity, Info, Scores, Weighting};
use proptest::prelude::*;

fn info() -> impl Strategy<Value = Info> {
    (0u32..3, 0i32..12, 0i32..4, 0i32..5).prop_map(|(f, o, b, bo)| Info::new(f, o, addr(f, o)).with_block(b, bo))
}

fn group() -> impl Strategy<Value = Vec<Vec<Info>>> {
    prop::collection::vec(prop::collection::vec(info(), 0..5), 1..5)
}

fn addr(f: u32, o: i32) -> u64 {
    (f as u64) << 16 | o as u64
}

/// Control-flow scores (`--likelihood cfg`) from a random successor relation over the
/// addresses `info()` makes: the likelihood must still decompose pairwise.
fn flow() -> impl Strategy<Value = Option<ControlFlow>> {
    let edge = (0u32..3, 0i32..12, 0u32..3, 0i32..12);
    prop::option::of(prop::collection::vec(edge, 0..60).prop_map(|edges| {
        let mut successors: HashMap<u64, Vec<u64>> = HashMap::new();
        for (f, o, g, p) in edges {
            successors.entry(addr(f, o)).or_default().push(addr(g, p));
        }
        let sampled = (0..3).flat_map(|f| (0..12).map(move |o| addr(f, o)));
        ControlFlow::new(&successors, sampled, None)
    }))
}

fn scores() -> impl Strategy<Value = Scores> {
    (prop::bool::ANY, prop::bool::ANY, flow()).prop_map(|(block, time, flow)| {
        let s = Scores::defaults(
            if block { Granularity::Block } else { Granularity::Function },
            if time { Weighting::Time } else { Weighting::Count },
        );
        match flow {
            Some(f) => s.with_flow(f),
            None => s,
        }
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]

    #[test]
    fn dp_equals_brute_force(a in group(), b in group(), scores in scores()) {
        let ra: Vec<&[Info]> = a.iter().map(Vec::as_slice).collect();
        let rb: Vec<&[Info]> = b.iter().map(Vec::as_slice).collect();
        let m = best_merge(&scores, &ra, &rb);
        let (brute, patterns) = brute_force_merge(&scores, &ra, &rb);
        // C(a+b, a) patterns were scored.
        let binom = |n: u64, k: u64| (1..=k).fold(1u64, |acc, i| acc * (n - k + i) / i);
        prop_assert_eq!(patterns, binom((a.len() + b.len()) as u64, a.len() as u64));
        prop_assert_eq!(m.likelihood, brute);
        // The returned pattern really has that likelihood and keeps both groups' order.
        let ia: Vec<usize> = (0..a.len()).collect();
        let ib: Vec<usize> = (a.len()..a.len() + b.len()).collect();
        let order = m.apply(&ia, &ib);
        let all: Vec<&[Info]> = a.iter().chain(b.iter()).map(Vec::as_slice).collect();
        let merged: Vec<&[Info]> = order.iter().map(|&i| all[i]).collect();
        prop_assert_eq!(walk_likelihood(&scores, &merged), brute);
        prop_assert_eq!(order_likelihood(&scores, &merged), brute);
        let pa: Vec<usize> = order.iter().copied().filter(|&i| i < a.len()).collect();
        let pb: Vec<usize> = order.iter().copied().filter(|&i| i >= a.len()).collect();
        prop_assert_eq!(pa, ia);
        prop_assert_eq!(pb, ib);
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    /// The packed form the patent loop and the merge use gives exactly the tables' scores,
    /// offsets beyond the flat table and negative ones included.
    #[test]
    fn packed_scores_equal_the_tables(f in 0u32..3, g in 0u32..3, o in -200i32..200, p in -200i32..200) {
        let scores = Scores::defaults(Granularity::Function, Weighting::Count);
        let (a, b) = (Info::new(f, o, 0), Info::new(g, p, 0));
        let (pa, pb) = (kansoku_reconstruct::scores::pack(&a), kansoku_reconstruct::scores::pack(&b));
        prop_assert_eq!(scores.packed(true).unwrap().score(pa, pb), scores.similarity(&a, &b));
        prop_assert_eq!(scores.packed(false).unwrap().score(pa, pb), scores.likelihood(&a, &b));
    }
}
