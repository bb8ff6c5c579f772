use kansoku_cache::*;

fn seed() -> Kernel {
    load_kernel(&std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("kernels/seed.k")).unwrap()
}

fn seed_layout() -> LayoutSpec {
    LayoutSpec::parse_bases("A=0,B=800,C=1600").unwrap()
}

#[test]
fn seed_tables_match_figure_7() {
    let k = seed();
    let p2 = k.find_ref("S3:right:1").unwrap();
    assert_eq!(p2, 2, "the seed calls A[k] in S3 position P2");
    let info = kernel_info(&k, CacheConfig::parse("assoc=2,line=32,sets=4").unwrap(), &seed_layout(), None, Some(p2)).unwrap();
    let r0 = &info.references[0];
    assert_eq!((r0.statement.as_str(), r0.side.as_str(), r0.position, r0.array.as_str()), ("S1", "left", 1, "A"));
    assert_eq!(r0.subscripts, vec!["i"]);
    assert_eq!(r0.loop_vars, vec!["i"]);
    let data = info.data.unwrap();
    assert_eq!(data.iter().map(|d| (d.start, d.elem_size, d.elems)).collect::<Vec<_>>(), vec![(0, 8, 100), (800, 8, 100), (1600, 8, 100)]);
    assert_eq!(info.references.len(), 4);
}

#[test]
fn seed_simulator_gives_zero_compulsory_one_conflict() {
    let k = seed();
    let params = parse_params("X=10,Y=10,Z=10").unwrap();
    let st = simulate(&k, &params, &seed_layout(), CacheConfig::parse("assoc=2,line=32,sets=4").unwrap()).unwrap();
    let p2 = st[k.find_ref("S3:right:1").unwrap()];
    assert_eq!(p2, RefStats { accesses: 10, hits: 9, compulsory: 0, other: 1 });
}

use kansoku_cache::model::*;

fn seed_cache() -> CacheConfig {
    CacheConfig::parse("assoc=2,line=32,sets=4").unwrap()
}

fn splitmix(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9E3779B97F4A7C15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58476D1CE4E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D049BB133111EB);
    z ^ (z >> 31)
}

/// The seed's figure 18: at X = Y = Z = 10 the formulas of A[k] give 0 compulsory and 1
/// conflict miss, as the simulator does; and at 50 random sizes in 1..200 every
/// reference's formulas equal the simulator.
#[test]
fn seed_formulas_worked_example_and_50_random_sizes() {
    let k = seed();
    let fam = Family::all_varying(&k);
    let m = build_model(&k, &ModelOptions::new(fam.clone(), seed_layout(), vec![seed_cache()])).unwrap().pop().unwrap();
    let ev = m.eval(&parse_params("X=10,Y=10,Z=10").unwrap()).unwrap();
    let p2 = &ev.refs[k.find_ref("S3:right:1").unwrap()];
    assert_eq!((p2.accesses, p2.compulsory, p2.conflict), (10, 0, 1));
    let mut st = 2026u64;
    for _ in 0..50 {
        let n = 1 + (splitmix(&mut st) % 200) as i64;
        let params = fam.params_at(n);
        let sim = simulate(&k, &params, &seed_layout(), seed_cache()).unwrap();
        let ev = m.eval(&params).unwrap();
        for (e, s) in ev.refs.iter().zip(&sim) {
            assert_eq!((e.accesses, e.compulsory, e.conflict), (s.accesses as i128, s.compulsory as i128, s.other as i128), "{} at n={n}", e.reference);
        }
    }
}

/// 50 random points (X, Y, Z) in 1..200: for each, formulas in Z are derived with X and Y
/// fixed (a one-variable family), then evaluated at Z and compared with the simulator.
#[test]
fn seed_50_random_points_with_formulas_in_z() {
    let k = seed();
    let mut st = 7u64;
    for _ in 0..50 {
        let x = 1 + (splitmix(&mut st) % 200) as i64;
        let y = 1 + (splitmix(&mut st) % 200) as i64;
        let z = 1 + (splitmix(&mut st) % 200) as i64;
        let fam = Family { varying: vec!["Z".into()], fixed: [("X".to_string(), x), ("Y".to_string(), y)].into(), ties: Default::default() };
        let m = build_model(&k, &ModelOptions::new(fam, seed_layout(), vec![seed_cache()])).unwrap().pop().unwrap();
        let params = parse_params(&format!("X={x},Y={y},Z={z}")).unwrap();
        let sim = simulate(&k, &params, &seed_layout(), seed_cache()).unwrap();
        let ev = m.eval(&params).unwrap();
        for (e, s) in ev.refs.iter().zip(&sim) {
            assert_eq!((e.accesses, e.compulsory, e.conflict), (s.accesses as i128, s.compulsory as i128, s.other as i128), "{} at X={x},Y={y},Z={z}", e.reference);
        }
    }
}

/// Paragraph 0153: misses while k goes from 3 to 7 are the difference of two evaluations.
#[test]
fn seed_difference_of_two_evaluations() {
    let k = seed();
    let fam = Family { varying: vec!["Z".into()], fixed: [("X".to_string(), 10), ("Y".to_string(), 10)].into(), ties: Default::default() };
    let m = build_model(&k, &ModelOptions::new(fam, seed_layout(), vec![seed_cache()])).unwrap().pop().unwrap();
    let p2 = k.find_ref("S3:right:1").unwrap();
    let at = |z: i64| {
        let e = &m.eval_n(z).unwrap().refs[p2];
        e.compulsory + e.conflict
    };
    // Count directly: misses of P2 at iterations k = 3..=7 from a trace of the simulation.
    let prog = Program::new(&k, &parse_params("X=10,Y=10,Z=8").unwrap(), &seed_layout()).unwrap();
    let mut sim = kansoku_cache::sim::CacheSim::new(seed_cache(), k.refs.len(), 0, 2400);
    let mut before = 0;
    let mut iter = 0;
    prog.for_each_access(|r, a| {
        if r == p2 {
            if iter == 3 {
                before = sim.stats[p2].misses();
            }
            iter += 1;
        }
        sim.access(r, a);
    });
    assert_eq!(at(8) - at(3), (sim.stats[p2].misses() - before) as i128);
    // k = 3..=7 reads A[3..=7]: lines 0 and 1, both still cached: no miss. The one
    // conflict miss of the run is A[8] (line 2, evicted by C[0] in set 2), at k = 8.
    assert_eq!(at(8) - at(3), 0);
    assert_eq!(at(9) - at(8), 1);
}

/// The seed's intermediate quantities in our terms: at X = Y = Z = 10, A[k] has hit
/// sources P0 (k = 0, 4, 8: the lines last written by A[i]) and P2 itself (the other
/// seven), and its one conflict miss (k = 8) has the factor P3 (C[0] evicted line 2).
#[test]
fn seed_breakdown_hit_sources_and_conflict_factors() {
    let k = seed();
    let mut opts = ModelOptions::new(Family::all_varying(&k), seed_layout(), vec![seed_cache()]);
    opts.breakdown = true;
    let m = build_model(&k, &opts).unwrap().pop().unwrap();
    let ev = m.eval(&parse_params("X=10,Y=10,Z=10").unwrap()).unwrap();
    let p2 = &ev.refs[2];
    assert_eq!(p2.hit_sources.iter().filter(|(_, v)| **v != 0).map(|(k, v)| (k.as_str(), *v)).collect::<Vec<_>>(), vec![("P0", 3), ("P2", 7)]);
    assert_eq!(p2.conflict_factors.iter().filter(|(_, v)| **v != 0).map(|(k, v)| (k.as_str(), *v)).collect::<Vec<_>>(), vec![("P3", 1)]);
    // At every sampled-or-beyond size the parts add up to the totals.
    for n in [1, 7, 10, 33, 150, 999] {
        let ev = m.eval_n(n).unwrap();
        for r in &ev.refs {
            assert_eq!(r.hit_sources.values().sum::<i128>(), r.accesses - r.compulsory, "{} n={n}", r.reference);
            assert_eq!(r.conflict_factors.values().sum::<i128>(), r.conflict, "{} n={n}", r.reference);
        }
        let prog = Program::new(&k, &Family::all_varying(&k).params_at(n), &seed_layout()).unwrap();
        let b = prog.simulate_breakdown(seed_cache());
        assert_eq!(b.stats, prog.simulate(&[seed_cache()]).pop().unwrap());
        for (r, e) in ev.refs.iter().enumerate() {
            for (src, v) in &e.hit_sources {
                let s: usize = src[1..].parse().unwrap();
                assert_eq!(*v, b.hit_source[r][s] as i128);
            }
            for (src, v) in &e.conflict_factors {
                let s: usize = src[1..].parse().unwrap();
                assert_eq!(*v, b.conflict_factor[r][s] as i128);
            }
        }
    }
}

/// The demo's seed-004 stage: the worked example's formulas against the simulator, in three
/// lines, with the kernel, formulas and simulation written beside them.
#[test]
fn demo_stage_runs_the_seed_example() {
    let dir = std::env::temp_dir().join(format!("kansoku-cache-demo-{}", std::process::id()));
    let summary = kansoku_cache::report::demo_stage(&dir).unwrap();
    assert!(summary.contains("formulas 0 compulsory + 1 conflict miss, simulator 0 + 1"), "{summary}");
    assert!(summary.contains("50/50 sizes"), "{summary}");
    assert!(summary.contains("A[k] 0 + 1, agree at 50/50 points"), "{summary}");
    assert!(summary.lines().count() <= 3);
    for f in ["seed.k", "seed-formulas.json", "seed-simulation.json"] {
        assert!(dir.join(f).is_file(), "{f} written");
    }
    let f: kansoku_cache::model::KernelFormulas = serde_json::from_str(&std::fs::read_to_string(dir.join("seed-formulas.json")).unwrap()).unwrap();
    assert_eq!(f.refs.len(), 4);
    std::fs::remove_dir_all(&dir).ok();
}
