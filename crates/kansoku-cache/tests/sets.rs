//! The set-based method (isl + our parametric counter) against the simulator: the seed's
//! worked example at X = Y = Z = 10 and at random points with X, Y, Z independent.

use kansoku_cache::sets::*;
use kansoku_cache::*;

/// A small deterministic generator (xorshift), so failures are reproducible.
struct Rng(u64);
impl Rng {
    fn next(&mut self, lo: i64, hi: i64) -> i64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        lo + (self.0 % (hi - lo + 1) as u64) as i64
    }
}

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
