//! The set-based method (isl + our parametric counter) against the simulator: the seed's
//! worked example at X = Y = Z = 10 and at random points with X, Y, Z independent.

use kansoku_cache::sets::*;
use kansoku_cache::*;

mod common;
use common::Rng;

fn seed_formulas() -> (Kernel, LayoutSpec, CacheConfig, SetFormulas) {
    let k = parse_kernel("seed.k", seed_example::KERNEL).unwrap();
    let layout = LayoutSpec::parse_bases(seed_example::BASES).unwrap();
    let cache = CacheConfig::parse(seed_example::CACHE).unwrap();
    let f = build_set_model(&k, &SetModelOptions::new(layout.clone(), cache)).unwrap();
    (k, layout, cache, f)
}

fn check_point(k: &Kernel, layout: &LayoutSpec, cache: CacheConfig, f: &SetFormulas, params: &ParamValues) {
    let sim = simulate(k, params, layout, cache).unwrap();
    let model = f.eval(params).unwrap();
    for (r, m) in model.iter().enumerate() {
        let idx: usize = m.reference[1..].parse().unwrap();
        let s = &sim[idx];
        assert_eq!(
            (m.accesses, m.compulsory, m.conflict),
            (s.accesses as i64, s.compulsory as i64, s.other as i64),
            "{} {} at {params:?} (formula #{r})",
            k.file,
            m.reference
        );
    }
}

#[test]
fn seed_worked_example_at_10() {
    let (k, layout, cache, f) = seed_formulas();
    let p = parse_params("X=10,Y=10,Z=10").unwrap();
    let a_k = k.find_ref(seed_example::REFERENCE).unwrap();
    let e = f.eval(&p).unwrap();
    let m = e.iter().find(|r| r.reference == format!("P{a_k}")).unwrap();
    assert_eq!((m.compulsory, m.conflict), (0, 1));
    check_point(&k, &layout, cache, &f, &p);
}

#[test]
fn seed_fifty_random_points_independent_parameters() {
    let (k, layout, cache, f) = seed_formulas();
    let mut rng = Rng(0x5eed_0004);
    for _ in 0..50 {
        let p: ParamValues = ["X", "Y", "Z"].iter().map(|n| (n.to_string(), rng.next(1, 200))).collect();
        check_point(&k, &layout, cache, &f, &p);
    }
}

#[test]
fn parameters_outside_the_context_are_refused() {
    let (_, _, _, f) = seed_formulas();
    let e = f.eval(&parse_params("X=0,Y=10,Z=10").unwrap()).unwrap_err().to_string();
    assert!(e.contains("X=0") && e.contains("outside the range"), "{e}");
    let e = f.eval(&parse_params("X=1,Y=10").unwrap()).unwrap_err().to_string();
    assert!(e.contains("no value for parameter 'Z'"), "{e}");
}

/// Where the seed's split/common construction is not exact: between two writes of A[0]
/// the loop reads B[i] twice (two references, one line). LRU keeps A[0] in a 2-line
/// cache (one other line), the seed's sum of per-factor line counts says 2 >= A = 2 and
/// predicts a conflict miss every iteration. Our distinct-line sets give the simulator's 0.
#[test]
fn the_seed_counts_a_line_inserted_by_two_references_twice() {
    let src = "param N;\ndouble A[8], B[100];\nfor (i = 0; i < N; i++)\n  A[0] = B[i] + B[i];\n";
    let k = parse_kernel("twice.k", src).unwrap();
    let layout = LayoutSpec::parse_bases("A=0,B=64").unwrap();
    let cache = CacheConfig::parse("assoc=2,line=8,sets=1").unwrap();
    let mut opts = SetModelOptions::new(layout.clone(), cache);
    opts.explain = true;
    let f = build_set_model(&k, &opts).unwrap();
    let a0 = f.refs.iter().find(|r| r.text == "A[0]").unwrap();
    let seed = a0.explain.as_ref().unwrap().seed_conflict.as_ref().unwrap();
    for n in [2i64, 10, 77] {
        let p = parse_params(&format!("N={n}")).unwrap();
        let sim = simulate(&k, &p, &layout, cache).unwrap();
        let ours = f.eval(&p).unwrap();
        let i = a0.reference[1..].parse::<usize>().unwrap();
        assert_eq!(sim[i].other, 0);
        assert_eq!(ours.iter().find(|r| r.reference == a0.reference).unwrap().conflict, 0);
        assert_eq!(seed.eval(&[n]).unwrap(), n - 1, "the seed's construction predicts a miss per iteration after the first");
    }
}
