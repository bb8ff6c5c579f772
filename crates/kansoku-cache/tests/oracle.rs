//! Property tests: the fast simulator against a naive, independent LRU model (per set a
//! list of (line, last use time); a hash set of lines ever touched), and the formulas
//! against the simulator at random sizes and random caches.

use kansoku_cache::model::*;
use kansoku_cache::*;
use proptest::prelude::*;
use std::collections::{HashMap, HashSet};
use std::path::Path;

fn kernel(name: &str) -> Kernel {
    load_kernel(&Path::new(env!("CARGO_MANIFEST_DIR")).join("kernels").join(format!("{name}.k"))).unwrap()
}

/// Naive LRU: counts per reference (accesses, hits, compulsory, other).
fn naive(prog: &Program, nrefs: usize, c: CacheConfig) -> Vec<(u64, u64, u64, u64)> {
    let mut sets: HashMap<i64, Vec<(i64, u64)>> = HashMap::new();
    let mut seen = HashSet::new();
    let mut out = vec![(0, 0, 0, 0); nrefs];
    let mut time = 0u64;
    prog.for_each_access(|r, addr| {
        time += 1;
        let line = addr.div_euclid(c.line as i64);
        let set = sets.entry(line.rem_euclid(c.sets as i64)).or_default();
        out[r].0 += 1;
        if let Some(e) = set.iter_mut().find(|e| e.0 == line) {
            e.1 = time;
            out[r].1 += 1;
            return;
        }
        if set.len() == c.assoc as usize {
            let lru = set.iter().enumerate().min_by_key(|(_, e)| e.1).unwrap().0;
            set.remove(lru);
        }
        set.push((line, time));
        if seen.insert(line) {
            out[r].2 += 1;
        } else {
            out[r].3 += 1;
        }
    });
    out
}

fn cache_strategy() -> impl Strategy<Value = CacheConfig> {
    (1u32..=8, 0u32..=4, 1u32..=12).prop_map(|(assoc, lshift, sets)| CacheConfig { assoc, line: 8 << lshift, sets })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, .. ProptestConfig::default() })]

    #[test]
    fn simulator_equals_naive_lru(
        kname in prop::sample::select(vec!["seed", "atax", "mvt", "bicg", "jacobi1d", "jacobi2d", "seidel2d", "trisolv", "gemm"]),
        n in 1i64..24,
        cache in cache_strategy(),
        align in prop::sample::select(vec![1u64, 8, 32, 64, 100]),
        start in 0u64..200,
    ) {
        let k = kernel(kname);
        let params: ParamValues = k.params.iter().map(|p| (p.clone(), if p == "T" { 2 } else { n })).collect();
        let layout = if kname == "seed" { LayoutSpec::parse_bases("A=0,B=800,C=1600").unwrap() } else { LayoutSpec::Consecutive { start, align } };
        let prog = Program::new(&k, &params, &layout).unwrap();
        let fast = prog.simulate(&[cache]).pop().unwrap();
        let slow = naive(&prog, k.refs.len(), cache);
        for (r, (f, s)) in fast.iter().zip(&slow).enumerate() {
            prop_assert_eq!((f.accesses, f.hits, f.compulsory, f.other), *s, "P{}", r);
        }
    }

    #[test]
    fn seed_formulas_equal_simulator_for_random_caches(cache in cache_strategy(), points in prop::collection::vec(1i64..200, 5)) {
        let k = kernel("seed");
        let layout = LayoutSpec::parse_bases("A=0,B=800,C=1600").unwrap();
        let fam = Family::all_varying(&k);
        let m = build_model(&k, &ModelOptions::new(fam.clone(), layout.clone(), vec![cache])).unwrap().pop().unwrap();
        for n in points {
            let sim = simulate(&k, &fam.params_at(n), &layout, cache).unwrap();
            let ev = m.eval_n(n).unwrap();
            for (e, s) in ev.refs.iter().zip(&sim) {
                prop_assert_eq!((e.accesses, e.compulsory, e.conflict), (s.accesses as i128, s.compulsory as i128, s.other as i128), "{} n={}", e.reference, n);
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 16, .. ProptestConfig::default() })]

    /// The horizon heuristic under random small caches and layouts: formulas of every
    /// reference equal the simulator at sizes up to twice past the sampled range.
    #[test]
    fn formulas_extrapolate_exactly_for_random_small_caches(
        kname in prop::sample::select(vec!["atax", "mvt", "bicg", "trisolv", "jacobi1d", "jacobi2d", "seidel2d"]),
        assoc in 1u32..=4,
        lshift in 0u32..=3,
        sets in 1u32..=8,
        align in prop::sample::select(vec![8u64, 32, 64]),
        picks in prop::collection::vec(1i64..=1000, 3),
    ) {
        let cache = CacheConfig { assoc, line: 8 << lshift, sets };
        let k = kernel(kname);
        let mut fam = Family::all_varying(&k);
        if k.params.iter().any(|p| p == "T") {
            fam.varying.retain(|p| p != "T");
            fam.fixed.insert("T".into(), 2);
        }
        let layout = LayoutSpec::Consecutive { start: 0, align };
        let m = build_model(&k, &ModelOptions::new(fam.clone(), layout.clone(), vec![cache])).unwrap().pop().unwrap();
        let vmax = m.verified_max();
        for pick in picks {
            let n = vmax + 1 + pick % vmax;
            let sim = Program::new(&k, &fam.params_at(n), &layout).unwrap().simulate(&[cache]).pop().unwrap();
            let ev = m.eval_n(n).unwrap();
            prop_assert!(ev.extrapolated);
            for (e, s) in ev.refs.iter().zip(&sim) {
                prop_assert_eq!((e.accesses, e.compulsory, e.conflict), (s.accesses as i128, s.compulsory as i128, s.other as i128), "{} {} {} n={} vmax={}", kname, cache, e.reference, n, vmax);
            }
        }
    }
}

/// Naive two-level LRU, written from the rule and not from the simulator: per level per
/// set a list of (line, last use); an L1 miss looks in L2; inclusive, L2's victim leaves L1.
fn naive_two_levels(prog: &Program, nrefs: usize, l1: CacheConfig, l2: CacheConfig, inclusion: Inclusion) -> [Vec<(u64, u64, u64, u64)>; 2] {
    type Level = HashMap<i64, Vec<(i64, u64)>>;
    fn lookup(level: &mut Level, c: CacheConfig, line: i64, time: u64) -> (bool, Option<i64>) {
        let set = level.entry(line.rem_euclid(c.sets as i64)).or_default();
        if let Some(e) = set.iter_mut().find(|e| e.0 == line) {
            e.1 = time;
            return (true, None);
        }
        let mut victim = None;
        if set.len() == c.assoc as usize {
            let lru = set.iter().enumerate().min_by_key(|(_, e)| e.1).unwrap().0;
            victim = Some(set.remove(lru).0);
        }
        set.push((line, time));
        (false, victim)
    }
    let (mut a, mut b): (Level, Level) = Default::default();
    let (mut seen1, mut seen2) = (HashSet::new(), HashSet::new());
    let mut out = [vec![(0, 0, 0, 0); nrefs], vec![(0, 0, 0, 0); nrefs]];
    let mut time = 0u64;
    prog.for_each_access(|r, addr| {
        time += 1;
        let line = addr.div_euclid(l1.line as i64);
        out[0][r].0 += 1;
        if lookup(&mut a, l1, line, time).0 {
            out[0][r].1 += 1;
            return;
        }
        if seen1.insert(line) { out[0][r].2 += 1 } else { out[0][r].3 += 1 }
        out[1][r].0 += 1;
        let (hit, victim) = lookup(&mut b, l2, line, time);
        if hit {
            out[1][r].1 += 1;
        } else if seen2.insert(line) {
            out[1][r].2 += 1
        } else {
            out[1][r].3 += 1
        }
        if let Some(v) = victim.filter(|_| inclusion == Inclusion::Inclusive) {
            let set = a.entry(v.rem_euclid(l1.sets as i64)).or_default();
            set.retain(|e| e.0 != v);
        }
    });
    out
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, .. ProptestConfig::default() })]

    #[test]
    fn hierarchy_equals_naive(
        kname in prop::sample::select(vec!["seed", "atax", "mvt", "jacobi2d", "gemm"]),
        n in 1i64..20,
        (a1, s1, a2, s2) in (1u32..=4, 1u32..=8, 1u32..=8, 1u32..=16),
        lshift in 0u32..=3,
        inclusion in prop::sample::select(vec![Inclusion::Inclusive, Inclusion::NonInclusive]),
    ) {
        let k = kernel(kname);
        let params: ParamValues = k.params.iter().map(|p| (p.clone(), if p == "T" { 2 } else { n })).collect();
        let layout = if kname == "seed" { LayoutSpec::parse_bases("A=0,B=800,C=1600").unwrap() } else { LayoutSpec::default() };
        let prog = Program::new(&k, &params, &layout).unwrap();
        let (l1, l2) = (CacheConfig { assoc: a1, line: 8 << lshift, sets: s1 }, CacheConfig { assoc: a2, line: 8 << lshift, sets: s2 });
        let fast = prog.simulate_hierarchy(&[l1, l2], inclusion).unwrap();
        let slow = naive_two_levels(&prog, k.refs.len(), l1, l2, inclusion);
        for level in 0..2 {
            for (r, (f, s)) in fast[level].iter().zip(&slow[level]).enumerate() {
                prop_assert_eq!((f.accesses, f.hits, f.compulsory, f.other), *s, "L{} P{}", level + 1, r);
            }
        }
        // Non-inclusive, L1 is L1 alone: nothing below reaches into it.
        if inclusion == Inclusion::NonInclusive {
            prop_assert_eq!(&fast[0], &prog.simulate(&[l1]).pop().unwrap());
        }
    }
}

/// A second level that holds every line never back-invalidates: L1 counts as alone, and L2
/// sees only first touches (all its misses compulsory).
#[test]
fn large_second_level_leaves_l1_alone() {
    let k = kernel("gemm");
    let params: ParamValues = k.params.iter().map(|p| (p.clone(), 24)).collect();
    let prog = Program::new(&k, &params, &LayoutSpec::default()).unwrap();
    let l1 = CacheConfig { assoc: 2, line: 32, sets: 8 };
    let l2 = CacheConfig { assoc: 64, line: 32, sets: 64 };
    let h = prog.simulate_hierarchy(&[l1, l2], Inclusion::Inclusive).unwrap();
    let alone = prog.simulate(&[l1]).pop().unwrap();
    assert_eq!(h[0], alone);
    for (r, s) in h[1].iter().enumerate() {
        assert_eq!(s.accesses, alone[r].misses(), "P{r}");
        assert_eq!(s.other, 0, "P{r}");
        assert_eq!(s.compulsory, alone[r].compulsory, "P{r}");
    }
    // Unequal line sizes are refused with a reason.
    let e = prog.simulate_hierarchy(&[l1, CacheConfig { line: 64, ..l2 }], Inclusion::Inclusive).unwrap_err();
    assert!(e.to_string().contains("same line size"), "{e}");
}

/// Runs of hits counted at once (the default) give the counts of one access at a time
/// (`Program::every_access`), for one level and for both kinds of hierarchy, on every
/// bundled kernel with lines of 2 to 8 doubles (so that runs exist) and small caches (so
/// that lines leave before their runs end).
#[test]
fn counted_runs_of_hits_equal_every_access() {
    for (name, _) in BUNDLED_KERNELS {
        let k = kernel(name);
        for n in [7i64, 24] {
            let params: ParamValues = k.params.iter().map(|p| (p.clone(), if p == "T" { 3 } else { n })).collect();
            let layout = if *name == "seed" { LayoutSpec::parse_bases("A=0,B=800,C=1600").unwrap() } else { LayoutSpec::default() };
            let fast = Program::new(&k, &params, &layout).unwrap();
            let plain = fast.clone().every_access();
            for c in [CacheConfig { assoc: 2, line: 16, sets: 4 }, CacheConfig { assoc: 4, line: 64, sets: 8 }, CacheConfig { assoc: 8, line: 32, sets: 64 }] {
                assert_eq!(fast.simulate(&[c]), plain.simulate(&[c]), "{name} n={n} {c}");
            }
            let (l1, l2) = (CacheConfig { assoc: 2, line: 32, sets: 2 }, CacheConfig { assoc: 2, line: 32, sets: 4 });
            for inclusion in [Inclusion::Inclusive, Inclusion::NonInclusive] {
                assert_eq!(fast.simulate_hierarchy(&[l1, l2], inclusion).unwrap(), plain.simulate_hierarchy(&[l1, l2], inclusion).unwrap(), "{name} n={n} {inclusion:?}");
            }
        }
    }
}

/// One statement `W = R1 + R2 …;` (or `W = 1;`) of a random nest: `st`'s first index picks
/// the reference written, the others those read, each modulo `refs` (the three nest
/// generators below share it).
fn assignment<S: AsRef<str>>(st: &[usize], refs: &[S], indent: &str) -> String {
    let (w, r) = st.split_first().unwrap();
    let rhs: Vec<&str> = r.iter().map(|&i| refs[i % refs.len()].as_ref()).collect();
    let rhs = if rhs.is_empty() { "1".to_string() } else { rhs.join(" + ") };
    format!("{indent}{} = {rhs};\n", refs[w % refs.len()].as_ref())
}

/// The check of the property tests of iterations counted instead of simulated: the nest
/// `src` (file `name`) at `params`, laid out from `start` at `align`, warmed by itself or
/// cold, counts on `cache` what the plain simulator counts one access at a time and, cold,
/// what the naive LRU counts; and what the simulator is counted to make one at a time is at
/// most every access. A failure names the nest, cache and sizes.
fn skipping_equals_every_access(name: &str, src: &str, params: &[(&str, i64)], (start, align): (u64, u64), warm: bool, cache: CacheConfig) -> Result<(), TestCaseError> {
    let kern = parse_kernel(name, src).unwrap();
    let values: ParamValues = params.iter().map(|&(p, v)| (p.to_string(), v)).collect();
    let mut prog = Program::new(&kern, &values, &LayoutSpec::Consecutive { start, align }).unwrap();
    if warm {
        prog = prog.warmed_by(&kern, &values, align).unwrap();
    }
    let sizes: Vec<String> = params.iter().map(|(p, v)| format!("{p}={v}")).collect();
    let case = format!("{src}\n{cache} {}", sizes.join(" "));
    let fast = prog.simulate(&[cache]).pop().unwrap();
    let plain = prog.clone().every_access().simulate(&[cache]).pop().unwrap();
    prop_assert_eq!(&fast, &plain, "{}", case);
    if !warm {
        let slow = naive(&prog, kern.refs.len(), cache);
        for (r, (f, s)) in fast.iter().zip(&slow).enumerate() {
            prop_assert_eq!((f.accesses, f.hits, f.compulsory, f.other), *s, "P{}\n{}", r, case);
        }
    }
    let paid = prog.simulated_work(u64::MAX, &cache);
    prop_assert!(paid.complete && paid.accesses <= prog.work(u64::MAX).accesses);
    Ok(())
}

/// A random loop nest in the kernel language: two or three loops (the innermost from 0 or
/// from the outer variable, stepping by 1 to 3), one or two innermost statements of one
/// to six references each (rows, columns, diagonals, reversed vectors and invariants), arrays
/// of `char`, `int` or `double`: strides from 1 byte to more than a line, forward and back.
fn random_nest(depth3: bool, types: &[usize], lower_from_outer: bool, step: i64, stmts: &[Vec<usize>]) -> String {
    const TYPES: [&str; 3] = ["char", "int", "double"];
    let (o, v) = if depth3 { ("j", "k") } else { ("i", "j") };
    let refs = [
        format!("A[i][{v}]"),
        format!("A[{v}][i]"),
        format!("B[{o}][{v}]"),
        format!("B[{v}][{o}]"),
        format!("x[{v}]"),
        format!("x[N - {v}]"),
        format!("A[{o}][{o}]"),
        format!("B[{v}][{v}]"),
        format!("x[{v} + 1]"),
        format!("A[i][{v} + 1]"),
    ];
    let mut s = format!("param N;\n{} A[N + 2][N + 2];\n{} B[N + 2][N + 2];\n{} x[N + 2];\n", TYPES[types[0]], TYPES[types[1]], TYPES[types[2]]);
    s += "for (i = 0; i < N; i++)\n";
    if depth3 {
        s += "for (j = 0; j < N; j++)\n";
    }
    let lower = if lower_from_outer { o } else { "0" };
    s += &format!("for ({v} = {lower}; {v} < N; {v} += {step}) {{\n");
    for st in stmts {
        s += &assignment(st, &refs, "  ");
    }
    s += "}\n";
    s
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, .. ProptestConfig::default() })]

    /// The simulator's innermost loops, run from one line change to the next (runs of hits
    /// counted), equal the plain simulator's one access at a time on random nests, layouts
    /// and caches — also where an iteration makes more accesses than the cache has ways.
    #[test]
    fn runs_of_hits_equal_every_access_on_random_nests(
        depth3 in any::<bool>(),
        types in prop::collection::vec(0usize..3, 3),
        lower_from_outer in any::<bool>(),
        step in 1i64..=3,
        stmts in prop::collection::vec(prop::collection::vec(0usize..10, 1..=6), 1..=2),
        n in 1i64..14,
        (assoc, lshift, sets) in (1u32..=8, 0u32..=3, 1u32..=8),
        align in prop::sample::select(vec![1u64, 8, 64, 100]),
        start in 0u64..130,
    ) {
        let src = random_nest(depth3, &types, lower_from_outer, step, &stmts);
        let k = parse_kernel("random.k", &src).unwrap();
        let params: ParamValues = [("N".to_string(), n)].into_iter().collect();
        let prog = Program::new(&k, &params, &LayoutSpec::Consecutive { start, align }).unwrap();
        let cache = CacheConfig { assoc, line: 8 << lshift, sets };
        let fast = prog.simulate(&[cache]).pop().unwrap();
        let plain = prog.clone().every_access().simulate(&[cache]).pop().unwrap();
        prop_assert_eq!(&fast, &plain, "{}\n{}", src, cache);
        let slow = naive(&prog, k.refs.len(), cache);
        for (r, (f, s)) in fast.iter().zip(&slow).enumerate() {
            prop_assert_eq!((f.accesses, f.hits, f.compulsory, f.other), *s, "P{}\n{}", r, src);
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, .. ProptestConfig::default() })]

    /// Several caches that differ only in associativity, simulated at once (one recency
    /// stack per set for all of them, as the interpolation does), count what each counts
    /// simulated alone and what the naive LRU counts, cold and warmed by the nest itself.
    #[test]
    fn caches_differing_in_ways_at_once_equal_each_alone(
        depth3 in any::<bool>(),
        types in prop::collection::vec(0usize..3, 3),
        step in 1i64..=3,
        stmts in prop::collection::vec(prop::collection::vec(0usize..10, 1..=6), 1..=2),
        n in 1i64..14,
        ways in prop::collection::vec(1u32..=8, 2..=4),
        (lshift, sets) in (0u32..=3, 1u32..=8),
        align in prop::sample::select(vec![1u64, 8, 64, 100]),
        start in 0u64..130,
        warm in any::<bool>(),
    ) {
        let src = random_nest(depth3, &types, false, step, &stmts);
        let k = parse_kernel("random.k", &src).unwrap();
        let params: ParamValues = [("N".to_string(), n)].into_iter().collect();
        let mut prog = Program::new(&k, &params, &LayoutSpec::Consecutive { start, align }).unwrap();
        if warm {
            prog = prog.warmed_by(&k, &params, align).unwrap();
        }
        let caches: Vec<CacheConfig> = ways.iter().map(|&assoc| CacheConfig { assoc, line: 8 << lshift, sets }).collect();
        let together = prog.simulate(&caches);
        for (c, got) in caches.iter().zip(&together) {
            prop_assert_eq!(got, &prog.simulate(&[*c]).pop().unwrap(), "{}\n{}", src, c);
            if !warm {
                let slow = naive(&prog, k.refs.len(), *c);
                for (r, (f, s)) in got.iter().zip(&slow).enumerate() {
                    prop_assert_eq!((f.accesses, f.hits, f.compulsory, f.other), *s, "P{}\n{}\n{}", r, src, c);
                }
            }
        }
    }
}

/// A random nest of three loops whose two outer loops move references by less than a line
/// (`A[k][j]` walks a column in `k`, and `j` moves it by one element), so that iterations of
/// the outer loops touch the lines of the one before in the same order: an optional
/// statement in the `j` loop before the innermost one, one or two innermost statements,
/// arrays of `char`, `int` or `double` with rows of any length (so a row need not be a
/// whole number of lines), the innermost loop from 0 or from `i` (a triangle, as in syrk).
fn repeating_nest(types: &[usize], before: &[usize], lower_from_i: bool, step: i64, stmts: &[Vec<usize>]) -> String {
    const TYPES: [&str; 3] = ["char", "int", "double"];
    let refs = ["A[k][j]", "B[k][i]", "x[j]", "A[i][j]", "B[k][j + 1]", "x[k]", "A[j][k]", "y[i]", "B[N - k][j]", "A[k][N - j]", "y[j]", "B[k][k]"];
    let outer = ["x[j]", "A[i][j]", "y[i]", "y[j]", "B[j][i]"];
    let mut s = format!("param N, M;\n{t0} A[N + 2][M];\n{t1} B[N + 2][M];\n{t2} x[N + 2];\n{t2} y[N + 2];\n", t0 = TYPES[types[0]], t1 = TYPES[types[1]], t2 = TYPES[types[2]]);
    s += "for (i = 0; i < N; i++)\nfor (j = 0; j < N; j++) {\n";
    if !before.is_empty() {
        s += &assignment(before, &outer, "  ");
    }
    let lower = if lower_from_i { "i" } else { "0" };
    s += &format!("  for (k = {lower}; k < N; k += {step}) {{\n");
    for st in stmts {
        s += &assignment(st, &refs, "    ");
    }
    s += "  }\n}\n";
    s
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, .. ProptestConfig::default() })]

    /// Iterations of outer loops that touch the lines of the one before in the same order,
    /// counted (two simulated, the rest repeating the second: `sim::repeat_iterations`),
    /// equal the plain simulator's one access at a time and the naive LRU, cold and warmed
    /// by the nest itself, on random nests where the outer loops move references within a
    /// line, rows of any length, and random layouts and caches.
    #[test]
    fn repeated_outer_iterations_equal_every_access_on_random_nests(
        types in prop::collection::vec(0usize..3, 3),
        before in prop::collection::vec(0usize..5, 0..=3),
        lower_from_i in any::<bool>(),
        step in 1i64..=2,
        stmts in prop::collection::vec(prop::collection::vec(0usize..12, 1..=5), 1..=2),
        (n, m) in (1i64..12, 12i64..40),
        (assoc, lshift, sets) in (1u32..=8, 0u32..=3, 1u32..=8),
        align in prop::sample::select(vec![1u64, 8, 64, 100]),
        start in 0u64..130,
        warm in any::<bool>(),
    ) {
        let src = repeating_nest(&types, &before, lower_from_i, step, &stmts);
        let cache = CacheConfig { assoc, line: 8 << lshift, sets };
        skipping_equals_every_access("repeating.k", &src, &[("N", n), ("M", m)], (start, align), warm, cache)?;
    }
}

/// The case the proptest above shrank a mutant to (g taken as the line, so rows that are
/// not a whole number of lines were taken to stay in their lines): `int` rows of 96 bytes,
/// `A[k][j]` walked down a column in `k` while `j` moves it by 4 bytes, 1 way of 64 bytes.
#[test]
fn repeated_outer_iterations_of_rows_not_a_whole_number_of_lines() {
    let src = repeating_nest(&[1, 0, 0], &[], false, 1, &[vec![0]]);
    let k = parse_kernel("repeating.k", &src).unwrap();
    let params: ParamValues = [("N".to_string(), 3), ("M".to_string(), 24)].into_iter().collect();
    let prog = Program::new(&k, &params, &LayoutSpec::Consecutive { start: 81, align: 8 }).unwrap();
    let cache = CacheConfig { assoc: 1, line: 64, sets: 1 };
    let fast = prog.simulate(&[cache]).pop().unwrap();
    assert_eq!(fast, prog.clone().every_access().simulate(&[cache]).pop().unwrap(), "{src}");
    let slow = naive(&prog, k.refs.len(), cache);
    assert_eq!(fast.iter().map(|f| (f.accesses, f.hits, f.compulsory, f.other)).collect::<Vec<_>>(), slow, "{src}");
}

/// A random nest of three loops under an `i` loop that moves references by whole rows
/// (gemm's shape, issue 46): `C[i][j]` and `A[i][k]` move by their rows in `i` while
/// `B[k][j]` and `x[j]` stay, so the `i` loop is warped by translation
/// (`sim::warp_iterations`) wherever the rows' moves are whole numbers of times
/// sets × line within half the loop; rows of any length (moves that are and are not such
/// multiples), an optional loop before the innermost one in `i`, an optional nest before
/// the `i` loop that touches the first `P` rows of `C` or `A` (lines seen and cached before,
/// so windows differ in their first touches and the first windows' states do not repeat),
/// and, rarely, references that stop it: `A[k][i]` (one array moved by two coefficients),
/// `C[i][j + 1]` (past `C`'s end in the last row: a reference leaves its array), `y[i]` (a
/// move smaller than a line).
fn warping_nest(types: &[usize], prior: usize, before: &[usize], stmts: &[Vec<usize>]) -> String {
    const TYPES: [&str; 3] = ["char", "int", "double"];
    let refs = [
        "C[i][j]", "A[i][k]", "B[k][j]", "x[j]", "C[i][M - 1 - j]", "B[k][M - 1 - j]", "A[i][0]", "C[i][j]", "A[i][k]", "B[k][j]", "C[i][M - 1 - j]", "x[k]", "A[k][i]", "C[i][j + 1]", "y[i]",
    ];
    let outer = ["C[i][j]", "x[j]", "C[i][M - 1 - j]", "B[0][j]"];
    let mut s = format!("param N, M, K, P;\n{t0} A[N + K][N + K];\n{t1} B[K][M];\n{t2} C[N][M];\n{t1} x[M];\n{t0} y[N];\n", t0 = TYPES[types[0]], t1 = TYPES[types[1]], t2 = TYPES[types[2]]);
    match prior {
        1 => s += "for (i = 0; i < P; i++)\n  for (j = 0; j < M; j++)\n    C[i][j] = x[j];\n",
        2 => s += "for (i = 0; i < P; i++)\n  for (k = 0; k < K; k++)\n    A[i][k] = A[i][k] + 1;\n",
        _ => {}
    }
    s += "for (i = 0; i < N; i++) {\n";
    if !before.is_empty() {
        s += &format!("  for (j = 0; j < M; j++)\n{}", assignment(before, &outer, "    "));
    }
    s += "  for (k = 0; k < K; k++)\n    for (j = 0; j < M; j++) {\n";
    for st in stmts {
        s += &assignment(st, &refs, "      ");
    }
    s += "    }\n}\n";
    s
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, .. ProptestConfig::default() })]

    /// Outer iterations warped by translation (the cache state after a window of iterations
    /// compared with the state before it moved by each array's rows, the windows after it
    /// counted) equal the plain simulator's one access at a time and the naive LRU, cold and
    /// warmed by the nest itself, on gemm-shaped random nests, layouts (arrays sharing a
    /// line or not) and caches of 1–8 ways and 8–64-byte lines.
    #[test]
    fn translated_outer_iterations_equal_every_access_on_random_nests(
        types in prop::collection::vec(0usize..3, 3),
        prior in 0usize..3,
        before in prop::collection::vec(0usize..4, 0..=3),
        stmts in prop::collection::vec(prop::collection::vec(0usize..15, 1..=4), 1..=2),
        (n, k, m, p) in (1i64..=48, 1i64..=4, prop::sample::select(vec![1i64, 2, 3, 4, 6, 8, 12, 16]), 0i64..=48),
        (assoc, lshift, sets) in (1u32..=8, 0u32..=3, prop::sample::select(vec![1u32, 2, 3, 4, 8])),
        align in prop::sample::select(vec![1u64, 8, 64, 64, 512, 512]),
        start in 0u64..130,
        warm in any::<bool>(),
    ) {
        let src = warping_nest(&types, prior, &before, &stmts);
        let cache = CacheConfig { assoc, line: 8 << lshift, sets };
        skipping_equals_every_access("warping.k", &src, &[("N", n), ("M", m), ("K", k), ("P", p.min(n))], (start, align), warm, cache)?;
    }
}

/// gemm's `i` loop warped: with 8-byte lines, 2 sets and rows of 64 and 32 bytes every
/// iteration moves `C` and `A` by whole numbers of times sets × line, so after the first
/// iteration and one window of one iteration the other 38 are counted, not simulated
/// (`simulated_work` counts 2 of 40 iterations' accesses), and the counts equal the plain
/// simulator's and the naive LRU's.
#[test]
fn gemm_rows_warped_by_translation() {
    let src = "param N, M, K;\ndouble A[N][K];\ndouble B[K][M];\ndouble C[N][M];\nfor (i = 0; i < N; i++)\n  for (k = 0; k < K; k++)\n    for (j = 0; j < M; j++)\n      C[i][j] = C[i][j] + A[i][k] * B[k][j];\n";
    let k = parse_kernel("gemm.k", src).unwrap();
    let params: ParamValues = [("N".to_string(), 40), ("M".to_string(), 8), ("K".to_string(), 4)].into_iter().collect();
    let prog = Program::new(&k, &params, &LayoutSpec::Consecutive { start: 0, align: 64 }).unwrap();
    let cache = CacheConfig { assoc: 2, line: 8, sets: 2 };
    let fast = prog.simulate(&[cache]).pop().unwrap();
    assert_eq!(fast, prog.clone().every_access().simulate(&[cache]).pop().unwrap());
    let slow = naive(&prog, k.refs.len(), cache);
    assert_eq!(fast.iter().map(|f| (f.accesses, f.hits, f.compulsory, f.other)).collect::<Vec<_>>(), slow);
    let (all, paid) = (prog.work(u64::MAX), prog.simulated_work(u64::MAX, &cache));
    assert_eq!(all.accesses, 40 * 4 * 8 * 4);
    assert!(paid.accesses <= 2 * 4 * 8 * 4, "{paid:?}");
}

/// A random nest whose innermost loop walks columns (correlation's and gramschmidt's shape,
/// issue 46): in `k` the references `A[k][i]`, `A[k][j]`, `B[k][j]` and `B[N - 1 - k][j]` move
/// by whole rows (forward and back) while `x[j]`, `C[i][j]` and `C[j][i]` stay, so one
/// instance of the `k` loop is warped by translation (`sim::warp_iterations` on a loop of
/// statements) wherever the rows' moves are whole numbers of times sets × line; the outer
/// loops are triangles (`j` from `i`, `k` from `i` or `j`: the inner bounds move with the
/// outer variables); an optional statement in `j` before the `k` loop; an optional nest
/// before everything that touches the first `P` rows of `A` or all of `B` (lines seen
/// before, and arrays every line of which was seen, whose translates are then not looked
/// up); rows of any length, so some sets are never touched by the walk (where the state
/// must stay as it was) and some moves are not such multiples; and, rarely, references
/// that stop it: `A[i][k]` (one array moved by two coefficients), `x[k]` (a move smaller
/// than a line, so windows of many iterations).
fn column_walk_nest(types: &[usize], prior: usize, lower: usize, triangle: bool, before: &[usize], stmts: &[Vec<usize>]) -> String {
    const TYPES: [&str; 3] = ["char", "int", "double"];
    let refs = ["A[k][i]", "A[k][j]", "B[k][j]", "x[j]", "C[i][j]", "B[N - 1 - k][j]", "C[j][i]", "A[k][j]", "B[k][i]", "A[i][k]", "x[k]"];
    let outer = ["C[i][j]", "x[j]", "C[j][i]", "B[0][j]"];
    let mut s = format!("param N, M, P;\n{t0} A[N][M];\n{t1} B[N][M];\n{t2} C[M][M];\n{t1} x[N + M];\n", t0 = TYPES[types[0]], t1 = TYPES[types[1]], t2 = TYPES[types[2]]);
    match prior {
        1 => s += "for (k = 0; k < P; k++)\n  for (j = 0; j < M; j++)\n    A[k][j] = 1;\n",
        2 => s += "for (k = 0; k < N; k++)\n  for (j = 0; j < M; j++)\n    B[k][j] = 1;\n",
        _ => {}
    }
    let j0 = if triangle { "i" } else { "0" };
    s += &format!("for (i = 0; i < M; i++)\n  for (j = {j0}; j < M; j++) {{\n");
    if !before.is_empty() {
        s += &assignment(before, &outer, "    ");
    }
    let k0 = ["0", "i", "j"][lower];
    s += &format!("    for (k = {k0}; k < N; k++) {{\n");
    for st in stmts {
        s += &assignment(st, &refs, "      ");
    }
    s += "    }\n  }\n";
    s
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, .. ProptestConfig::default() })]

    /// Innermost loops warped by translation (windows of a column walk's iterations, the
    /// cache state after one compared, set by set, with the state before it: translated
    /// where the walk accessed the set, the same elsewhere) equal the plain simulator's one
    /// access at a time and the naive LRU, cold and warmed by the nest itself, on random
    /// column walks under triangular loops, layouts and caches of 1–8 ways and 8–64-byte lines.
    #[test]
    fn translated_inner_iterations_equal_every_access_on_random_nests(
        types in prop::collection::vec(0usize..3, 3),
        prior in 0usize..3,
        lower in 0usize..3,
        triangle in any::<bool>(),
        before in prop::collection::vec(0usize..4, 0..=3),
        stmts in prop::collection::vec(prop::collection::vec(0usize..11, 1..=4), 1..=2),
        (n, m, p) in (1i64..=64, prop::sample::select(vec![1i64, 2, 3, 4, 5, 8, 12, 16]), 0i64..=64),
        (assoc, lshift, sets) in (1u32..=8, 0u32..=3, prop::sample::select(vec![1u32, 2, 3, 4, 8])),
        align in prop::sample::select(vec![1u64, 8, 64, 64, 512, 512]),
        start in 0u64..130,
        warm in any::<bool>(),
    ) {
        let src = column_walk_nest(&types, prior, lower, triangle, &before, &stmts);
        let cache = CacheConfig { assoc, line: 8 << lshift, sets };
        skipping_equals_every_access("columns.k", &src, &[("N", n), ("M", m), ("P", p.min(n))], (start, align), warm, cache)?;
    }
}

/// correlation's product loop warped inside: `k` walks two columns of `double` rows of 4
/// lines (so every column's lines fall in one set of 4) while `C[i][j]` stays; windows of
/// one iteration, the state repeating once the walk has filled its sets, so most of the
/// `k` loop's iterations are counted, not simulated (`simulated_work` counts far fewer than
/// every access), and the counts equal the plain simulator's and the naive LRU's, with data
/// initialised before (every line seen: no first touch in the windows added) and without.
#[test]
fn column_walks_warped_by_translation() {
    for init in [false, true] {
        let mut src = "param N, M;\ndouble A[N][M];\ndouble C[M][M];\n".to_string();
        if init {
            src += "for (k = 0; k < N; k++)\n  for (j = 0; j < M; j++)\n    A[k][j] = 1;\n";
        }
        src += "for (i = 0; i < M; i++)\n  for (j = i; j < M; j++)\n    for (k = 0; k < N; k++)\n      C[i][j] = C[i][j] + A[k][i] * A[k][j];\n";
        let k = parse_kernel("corr.k", &src).unwrap();
        let params: ParamValues = [("N".to_string(), 200), ("M".to_string(), 32)].into_iter().collect();
        let prog = Program::new(&k, &params, &LayoutSpec::Consecutive { start: 0, align: 64 }).unwrap();
        let cache = CacheConfig { assoc: 2, line: 64, sets: 4 };
        let fast = prog.simulate(&[cache]).pop().unwrap();
        assert_eq!(fast, prog.clone().every_access().simulate(&[cache]).pop().unwrap(), "{src}");
        let slow = naive(&prog, k.refs.len(), cache);
        assert_eq!(fast.iter().map(|f| (f.accesses, f.hits, f.compulsory, f.other)).collect::<Vec<_>>(), slow, "{src}");
        let (all, paid) = (prog.work(u64::MAX), prog.simulated_work(u64::MAX, &cache));
        assert!(paid.accesses * 10 < all.accesses, "{paid:?} of {all:?}");
    }
}
