//! The eight kernels of issue 7 for a direct-mapped, 2-, 4- and 8-way cache: every
//! reference's formulas (accesses, compulsory, conflict) at 20 sizes equal the simulator.
//! Ten of the sizes lie beyond the range the formulas were derived from (extrapolation),
//! ten are random inside it (independent simulator runs, not the fitted samples).

use kansoku_cache::model::*;
use kansoku_cache::*;
use std::path::Path;

fn caches() -> Vec<CacheConfig> {
    ["assoc=1,line=32,sets=4", "assoc=2,line=32,sets=4", "assoc=4,line=32,sets=4", "assoc=8,line=32,sets=4"]
        .iter()
        .map(|s| CacheConfig::parse(s).unwrap())
        .collect()
}

/// Deterministic pseudo-random numbers (SplitMix64) for picking sizes.
fn splitmix(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9E3779B97F4A7C15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58476D1CE4E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D049BB133111EB);
    z ^ (z >> 31)
}

fn check_kernel(name: &str, fixed: &[(&str, i64)], beyond: i64) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("kernels").join(format!("{name}.k"));
    let k = load_kernel(&path).unwrap();
    let mut fam = Family::all_varying(&k);
    for (p, v) in fixed {
        fam.varying.retain(|x| x != p);
        fam.fixed.insert(p.to_string(), *v);
    }
    let layout = LayoutSpec::Consecutive { start: 0, align: 32 };
    let opts = ModelOptions::new(fam.clone(), layout.clone(), caches());
    let models = build_model(&k, &opts).unwrap();
    let vmax = models.iter().map(|m| m.verified_max()).min().unwrap();
    let mut seed = name.len() as u64 * 7919;
    let mut sizes: Vec<i64> = (1..=beyond).map(|d| vmax + d).collect();
    while sizes.len() < 20 {
        sizes.push(1 + (splitmix(&mut seed) % vmax as u64) as i64);
    }
    for &n in &sizes {
        let prog = Program::new(&k, &fam.params_at(n), &layout).unwrap();
        let sims = prog.simulate(&caches());
        for (m, sim) in models.iter().zip(&sims) {
            let ev = m.eval_n(n).unwrap();
            assert_eq!(ev.extrapolated, n > vmax);
            for (r, (e, s)) in ev.refs.iter().zip(sim).enumerate() {
                let got = (e.accesses, e.compulsory, e.conflict, e.hits);
                let want = (s.accesses as i128, s.compulsory as i128, s.other as i128, s.hits as i128);
                assert_eq!(got, want, "{name} P{r} {} at n={n} (verified up to {vmax})", m.cache);
            }
        }
    }
}

#[test]
fn gemm() {
    check_kernel("gemm", &[], 10);
}
#[test]
fn atax() {
    check_kernel("atax", &[], 10);
}
#[test]
fn mvt() {
    check_kernel("mvt", &[], 10);
}
#[test]
fn bicg() {
    check_kernel("bicg", &[], 10);
}
#[test]
fn jacobi_1d() {
    check_kernel("jacobi1d", &[("T", 2)], 10);
}
#[test]
fn jacobi_2d() {
    check_kernel("jacobi2d", &[("T", 2)], 10);
}
#[test]
fn seidel_2d() {
    check_kernel("seidel2d", &[("T", 2)], 10);
}
#[test]
fn trisolv_triangular() {
    check_kernel("trisolv", &[], 10);
}

/// A family that is not the diagonal: NI = n, NJ = 2n + 1, NK = 7 (rectangular gemm).
#[test]
fn gemm_rectangular_family_with_ties() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("kernels/gemm_rect.k");
    let k = load_kernel(&path).unwrap();
    let (ni, tni) = Family::parse_vary_item("NI").unwrap();
    let (nj, tnj) = Family::parse_vary_item("NJ=2n+1").unwrap();
    assert_eq!(tnj, (2, 1));
    let fam = Family { varying: vec![ni.clone(), nj.clone()], fixed: [("NK".to_string(), 7)].into(), ties: [(ni, tni), (nj, tnj)].into() };
    let layout = LayoutSpec::Consecutive { start: 0, align: 32 };
    let cs = caches();
    let models = build_model(&k, &ModelOptions::new(fam.clone(), layout.clone(), cs.clone())).unwrap();
    assert!(models[0].to_string().contains("NI = n, NJ = 2n + 1, NK = 7"), "{}", models[0]);
    let vmax = models.iter().map(|m| m.verified_max()).min().unwrap();
    let mut seed = 99u64;
    let mut sizes: Vec<i64> = (1..=10).map(|d| vmax + d).collect();
    while sizes.len() < 20 {
        sizes.push(1 + (splitmix(&mut seed) % vmax as u64) as i64);
    }
    for n in sizes {
        let params = fam.params_at(n);
        assert_eq!((params["NI"], params["NJ"], params["NK"]), (n, 2 * n + 1, 7));
        let sims = Program::new(&k, &params, &layout).unwrap().simulate(&cs);
        for (m, sim) in models.iter().zip(&sims) {
            // Through the parameter values, as `eval --param NI=..,NJ=..,NK=7` does.
            let ev = m.eval(&params).unwrap();
            for (e, s) in ev.refs.iter().zip(sim) {
                assert_eq!((e.accesses, e.compulsory, e.conflict), (s.accesses as i128, s.compulsory as i128, s.other as i128), "{} {} n={n}", e.reference, m.cache);
            }
        }
    }
    let e = models[0].eval(&parse_params("NI=5,NJ=10,NK=7").unwrap()).unwrap_err().to_string();
    assert!(e.contains("NJ=10 is outside the range") && e.contains("NJ = 2n + 1"), "{e}");
    let e = models[0].eval(&parse_params("NI=5,NJ=13,NK=7").unwrap()).unwrap_err().to_string();
    assert!(e.contains("derived for NI = n, NJ = 2n + 1"), "{e}");
}
