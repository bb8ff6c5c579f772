//! Bad input gives clear errors naming file:line:column (or the offending value).

use kansoku_cache::model::*;
use kansoku_cache::*;

fn err(src: &str) -> String {
    parse_kernel("k.k", src).unwrap_err().to_string()
}

#[test]
fn non_affine_subscript_names_line_and_column() {
    let e = err("param N;\ndouble A[N][N];\nfor (i = 0; i < N; i++)\n  for (j = 0; j < N; j++)\n    A[i * j][j] = 0;\n");
    assert!(e.starts_with("k.k:5:9:"), "{e}"); // the column of the offending '*'
    assert!(e.contains("not affine") && e.contains("product"), "{e}");
}

#[test]
fn indirect_subscript_is_refused() {
    let e = err("param N;\ndouble A[N]; int idx[N];\nfor (i = 0; i < N; i++)\n  A[idx[i]] = 0;\n");
    assert!(e.starts_with("k.k:4:5:") && e.contains("reads the array element 'idx"), "{e}");
}

#[test]
fn non_affine_bound_names_line_and_column() {
    let e = err("param N;\ndouble A[N];\nfor (i = 0; i < N * N; i++)\n  A[i] = 0;\n");
    assert!(e.starts_with("k.k:3:19:") && e.contains("loop upper bound is not affine"), "{e}");
}

#[test]
fn undeclared_array_names_line_and_column() {
    let e = err("param N;\ndouble A[N];\nfor (i = 0; i < N; i++)\n  A[i] = B[i];\n");
    assert_eq!(e, "k.k:4:10: undeclared array 'B'");
}

#[test]
fn undeclared_parameter_in_bound() {
    let e = err("double A[10];\nfor (i = 0; i < M; i++)\n  A[i] = 0;\n");
    assert!(e.starts_with("k.k:2:17:") && e.contains("'M' is undeclared"), "{e}");
}

#[test]
fn wrong_dimension_count() {
    let e = err("param N;\ndouble A[N][N];\nfor (i = 0; i < N; i++)\n  A[i] = 0;\n");
    assert!(e.starts_with("k.k:4:3:") && e.contains("2 dimension(s)"), "{e}");
}

#[test]
fn decreasing_loop_steps_by_one_or_is_refused_with_reason() {
    // counting down is read (issue 17: ludcmp, adi, deriche); its order is checked against
    // the simulator in tests/polybench_c.rs
    assert!(parse_kernel("k.k", "param N;\ndouble A[N];\nfor (i = N; i > 0; i--)\n  A[i - 1] = 0;\n").is_ok());
    let e = err("param N;\ndouble A[N];\nfor (i = N; i > 0; i -= 2)\n  A[i - 1] = 0;\n");
    assert!(e.starts_with("k.k:3:20:") && e.contains("step by one"), "{e}");
    let e = err("param N;\ndouble A[N];\nfor (i = N; i > 0; j--)\n  A[i - 1] = 0;\n");
    assert!(e.starts_with("k.k:3:20:") && e.contains("decrement must update 'i'"), "{e}");
}

#[test]
fn cache_line_must_be_power_of_two_but_sets_need_not() {
    let e = CacheConfig::parse("assoc=2,line=48,sets=4").unwrap_err().to_string();
    assert!(e.contains("line size 48 is not a power of two") && e.contains("refused"), "{e}");
    let c = CacheConfig::parse("assoc=3,line=64,sets=12").unwrap();
    assert_eq!((c.assoc, c.line, c.sets), (3, 64, 12));
    let c = CacheConfig::parse("32KiB,8-way,64B").unwrap();
    assert_eq!((c.assoc, c.line, c.sets), (8, 64, 64));
    let e = CacheConfig::parse("size=1000,8-way,64B").unwrap_err().to_string();
    assert!(e.contains("not a multiple"), "{e}");
}

#[test]
fn non_power_of_two_sets_simulate_like_the_naive_definition() {
    // 3 sets of 1 line: lines 0,1,2 map to sets 0,1,2; line 3 evicts line 0.
    let k = parse_kernel("k.k", "param N;\nchar A[N];\nfor (i = 0; i < N; i++)\n  A[i] = 0;\nfor (i = 0; i < N; i++)\n  A[i] = 0;\n").unwrap();
    let st = simulate(&k, &parse_params("N=32").unwrap(), &LayoutSpec::Consecutive { start: 0, align: 8 }, CacheConfig::parse("assoc=1,line=8,sets=3").unwrap()).unwrap();
    // First loop: 4 lines, 4 compulsory misses (line 3 evicts line 0 from set 0).
    // Second loop: line 0 misses (evicting line 3), lines 1 and 2 hit, line 3 misses.
    assert_eq!((st[0].compulsory, st[0].other), (4, 0));
    assert_eq!((st[1].compulsory, st[1].other, st[1].hits), (0, 2, 30));
}

#[test]
fn parameters_outside_the_derived_range_are_refused() {
    let k = load_kernel(&std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("kernels/jacobi1d.k")).unwrap();
    let fam = Family { varying: vec!["N".into()], fixed: [("T".to_string(), 2)].into(), ties: Default::default() };
    let m = build_model(&k, &ModelOptions::new(fam, LayoutSpec::default(), vec![CacheConfig::parse("assoc=2,line=32,sets=4").unwrap()])).unwrap().pop().unwrap();
    let e = m.eval(&parse_params("T=3,N=50").unwrap()).unwrap_err().to_string();
    assert!(e.contains("T=3 is outside the range") && e.contains("T=2"), "{e}");
    let e = m.eval(&parse_params("T=2,N=0").unwrap()).unwrap_err().to_string();
    assert!(e.contains("N = 0 is outside the range"), "{e}");
    let ok = m.eval(&parse_params("T=2,N=100000").unwrap()).unwrap();
    assert!(ok.extrapolated, "far beyond the checked sizes the result is flagged as extrapolated");
}

#[test]
fn missing_and_unknown_parameters() {
    let k = parse_kernel("k.k", "param N;\ndouble A[N];\nfor (i = 0; i < N; i++)\n  A[i] = 0;\n").unwrap();
    let e = simulate(&k, &parse_params("").unwrap(), &LayoutSpec::default(), CacheConfig::parse("assoc=1,line=32,sets=4").unwrap()).unwrap_err().to_string();
    assert!(e.contains("no value for parameter 'N'"), "{e}");
    let e = simulate(&k, &parse_params("N=3,M=4").unwrap(), &LayoutSpec::default(), CacheConfig::parse("assoc=1,line=32,sets=4").unwrap()).unwrap_err().to_string();
    assert!(e.contains("'M' is not a parameter"), "{e}");
    let e = LayoutSpec::parse_bases("A=0,B=8").unwrap().check(&k).unwrap_err().to_string();
    assert!(e.contains("'B', which is not an array"), "{e}");
}

#[test]
fn errors_come_in_source_order() {
    let e = err("param N;\ndouble A[N];\nfor (i = 0; i < N; i++)\n  A[i*i] = B[i];\n");
    assert!(e.starts_with("k.k:4:6:") && e.contains("not affine"), "{e}");
    let e = CacheConfig::parse("32KiB,8-way,48B").unwrap_err().to_string();
    assert!(e.contains("line size 48 is not a power of two"), "{e}");
}

#[test]
fn huge_constants_are_refused_not_overflowed() {
    let e = err("param N;\ndouble A[N];\nfor (i = 0; i < 2000000 * 2000000 * N; i++)\n  A[i] = 0;\n");
    assert!(e.contains("constants above 2^40"), "{e}");
    let e = err("param N;\ndouble A[99999999999999999999];\n");
    assert!(e.starts_with("k.k:2:10:") && e.contains("bad integer literal"), "{e}");
}

#[test]
fn sizes_too_large_for_exact_counts_are_refused() {
    let k = load_kernel(&std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("kernels/trisolv.k")).unwrap();
    let m = build_model(&k, &ModelOptions::new(Family::all_varying(&k), LayoutSpec::default(), vec![CacheConfig::parse("assoc=1,line=32,sets=4").unwrap()])).unwrap().pop().unwrap();
    // N^2/2 accesses fit easily at N = 10^12; i64::MAX-sized N does not fit in 128 bits.
    let ok = m.eval(&parse_params("N=1000000000000").unwrap()).unwrap();
    assert!(ok.refs.iter().any(|r| r.accesses > 10i128.pow(23)));
    let e = m.eval(&parse_params(&format!("N={}", i64::MAX)).unwrap()).unwrap_err().to_string();
    assert!(e.contains("too large"), "{e}");
}
