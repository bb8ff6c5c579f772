//! Inputs that crashed or ran away before (issue 15, items 1–3 and 9): each must now give
//! a clear error or a bounded result. The inputs are generated here.

use kansoku_cache::model::*;
use kansoku_cache::*;
use std::time::Duration;

fn parse_err(src: &str) -> String {
    parse_kernel("deep.k", src).unwrap_err().to_string()
}

/// Runs `f` on a thread with a small stack, as a check that nothing recurses per token.
fn on_small_stack<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    std::thread::Builder::new().stack_size(1 << 20).spawn(f).unwrap().join().expect("no stack overflow")
}

#[test]
fn deep_nesting_is_refused_with_a_position() {
    let parens = format!("param N;\ndouble A[N];\nfor (i = 0; i < N; i++)\n  A[i] = {}1{};\n", "(".repeat(6700), ")".repeat(6700));
    let e = on_small_stack(move || parse_err(&parens));
    assert!(e.starts_with("deep.k:4:") && e.contains("nested deeper"), "{e}");
    let signs = format!("param N;\ndouble A[N];\nfor (i = 0; i < N; i++)\n  A[i] = {}1;\n", "- ".repeat(20000));
    let e = on_small_stack(move || parse_err(&signs));
    assert!(e.starts_with("deep.k:4:") && e.contains("nested deeper"), "{e}");
    let calls = format!("param N;\ndouble A[N];\nfor (i = 0; i < N; i++)\n  A[i] = {}1{};\n", "f(".repeat(5000), ")".repeat(5000));
    let e = on_small_stack(move || parse_err(&calls));
    assert!(e.contains("nested deeper"), "{e}");
    let sum = format!("param N;\ndouble A[N];\nfor (i = 0; i < N; i++)\n  A[i] = 1{};\n", " + 1".repeat(100_000));
    let e = on_small_stack(move || parse_err(&sum));
    assert!(e.starts_with("deep.k:4:") && e.contains("operators in one statement"), "{e}");
    let mut loops = String::from("param N;\ndouble A[N];\n");
    for d in 0..20_000 {
        loops.push_str(&format!("for (i{d} = 0; i{d} < N; i{d}++)\n"));
    }
    loops.push_str("A[0] = 0;\n");
    let e = on_small_stack(move || parse_err(&loops));
    assert!(e.starts_with("deep.k:35:1:") && e.contains("loops nested deeper than 32"), "{e}");
    let ifs = format!("param N;\ndouble A[N];\nfor (i = 0; i < N; i++)\n{}A[i] = 0;\n", "if (i < N) ".repeat(20_000));
    let e = on_small_stack(move || parse_err(&ifs));
    assert!(e.starts_with("deep.k:4:") && e.contains("more than 64 conditions of nested ifs"), "{e}");
}

#[test]
fn far_apart_arrays_simulate_in_little_memory() {
    let k = parse_kernel("far.k", "param N;\ndouble A[N], B[N];\nfor (i = 0; i < N; i++)\n  A[i] = B[i] + A[i + 1000000000000];\n").unwrap();
    let params = parse_params("N=1000").unwrap();
    let cache = CacheConfig::parse("assoc=2,line=64,sets=64").unwrap();
    // Ordinary process addresses: a heap array and a stack array 40 TB apart.
    let bases = LayoutSpec::parse_bases("A=93824992231424,B=140737488338944").unwrap();
    let stats = simulate(&k, &params, &bases, cache).unwrap();
    assert_eq!(stats.iter().map(|s| s.accesses).sum::<u64>(), 3000);
    let p = Program::new(&k, &params, &bases).unwrap();
    assert_eq!(p.simulate_breakdown(cache).stats, stats);
    let e = Program::new(&k, &params, &LayoutSpec::Consecutive { start: 0, align: 9223372036854775807 }).err().unwrap().to_string();
    assert!(e.contains("beyond byte address 2^62"), "{e}");
    let e = Program::new(&k, &params, &LayoutSpec::parse_bases(&format!("A={},B=0", u64::MAX - 10)).unwrap()).err().unwrap().to_string();
    assert!(e.contains("array 'A'"), "{e}");
}

fn trisolv_formulas() -> KernelFormulas {
    let k = load_kernel(&std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("kernels/trisolv.k")).unwrap();
    build_model(&k, &ModelOptions::new(Family::all_varying(&k), LayoutSpec::default(), vec![CacheConfig::parse("assoc=1,line=32,sets=4").unwrap()])).unwrap().pop().unwrap()
}

#[test]
fn untrusted_formulas_are_refused_not_evaluated() {
    let good = trisolv_formulas();
    let n = parse_params("N=50").unwrap();
    assert!(good.eval(&n).is_ok());
    let json = serde_json::to_value(&good).unwrap();
    let damage = |edit: &dyn Fn(&mut serde_json::Value)| -> String {
        let mut v = json.clone();
        edit(&mut v);
        let f: KernelFormulas = serde_json::from_value(v).unwrap();
        f.eval(&n).unwrap_err().to_string()
    };
    let last = |v: &mut serde_json::Value| v["refs"][0]["compulsory"]["pieces"].as_array().unwrap().len() - 1;
    let e = damage(&|v| {
        let i = last(v);
        v["refs"][0]["compulsory"]["pieces"][i]["period"] = 0.into();
    });
    assert!(e.contains("P0 compulsory") && e.contains("period 0"), "{e}");
    let e = damage(&|v| {
        let i = last(v);
        v["refs"][0]["compulsory"]["pieces"][i]["period"] = 7.into();
    });
    assert!(e.contains("Newton tables for period 7"), "{e}");
    let e = damage(&|v| v["refs"][0]["accesses"]["pieces"][0]["from"] = 1000.into());
    assert!(e.contains("first piece starts at 1000"), "{e}");
}

#[test]
fn untrusted_set_formulas_are_refused_not_evaluated() {
    use kansoku_cache::sets::{build_set_model, SetFormulas, SetModelOptions};
    let k = load_kernel(&std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("kernels/trisolv.k")).unwrap();
    let extents = parse_params("N=16").unwrap();
    let k = k.with_fixed_extents(&extents).unwrap();
    let mut opts = SetModelOptions::new(LayoutSpec::default(), CacheConfig::parse("assoc=1,line=32,sets=4").unwrap());
    opts.extents = extents;
    let f = build_set_model(&k, &opts).unwrap();
    let p = parse_params("N=12").unwrap();
    assert!(f.eval(&p).is_ok());
    let json = serde_json::to_value(&f).unwrap();
    let damage = |edit: &dyn Fn(&mut serde_json::Value)| -> String {
        let mut v = json.clone();
        edit(&mut v);
        let f: SetFormulas = serde_json::from_value(v).unwrap();
        f.eval(&p).unwrap_err().to_string()
    };
    // a monomial is written [num, den, powers]
    let e = damage(&|v| {
        v["refs"][0]["accesses"]["cells"][0]["value"]["terms"][0][1] = 0.into();
    });
    assert!(e.contains("denominator 0"), "{e}");
    let e = damage(&|v| {
        v["refs"][0]["accesses"]["cells"][0]["value"]["terms"][0][2] = serde_json::json!([[99, 1]]);
    });
    assert!(e.contains("symbol 99"), "{e}");
    // and as an object with field names, as files written before did: still read
    let mut named = json.clone();
    let term = &mut named["refs"][0]["accesses"]["cells"][0]["value"]["terms"][0];
    *term = serde_json::json!({"num": term[0], "den": term[1], "powers": term[2]});
    let old: SetFormulas = serde_json::from_value(named).unwrap();
    assert_eq!(old.eval(&p).unwrap(), f.eval(&p).unwrap());
}

/// Interpolation checks its time budget after every simulated size (issue 15 item 9): with
/// the budget spent before it starts, it simulates one size and stops, and says so. Loop
/// bounds shifted by 2^40: every size is cheap, but the sizes needed are many (without the
/// check, minutes). Counted, not timed: the sizes simulated, seen by the progress callback
/// and said in the error; bench/hostile.sh times the same kernel with `--budget 10`.
#[test]
fn interpolation_keeps_to_its_time_budget() {
    let k = parse_kernel("shift.k", "param N;\ndouble A[N];\nfor (i = 1099511627776; i < N + 1099511627776; i++)\n  A[i - 1099511627776] = A[i - 1099511627776] + 1;\n").unwrap();
    let mut opts = ModelOptions::new(Family::all_varying(&k), LayoutSpec::default(), vec![CacheConfig::parse("assoc=2,line=32,sets=8").unwrap()]);
    let simulated = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let seen = simulated.clone();
    opts.progress = Some(Progress(std::sync::Arc::new(move |n| seen.lock().unwrap().push(n))));
    opts.time_budget = Some(Duration::ZERO);
    let e = build_model(&k, &opts).expect_err("a spent budget stops interpolation").to_string();
    assert_eq!(*simulated.lock().unwrap(), [1], "{e}");
    assert!(e.contains("out of its time budget") && e.contains("after simulating N = 1..=1 of the"), "{e}");
}

/// Found by fuzzing `kernel` (issue 15): a time loop of 6.7·10¹¹ iterations, which the
/// fuzz harness counted access by access before deciding whether to simulate, and which
/// `cache simulate` would have run for days without a word. [`Program::work`] counts what a
/// simulation costs without enumerating it and stops at its limit.
#[test]
fn a_simulation_of_days_is_measured_in_milliseconds() {
    let src = "param T, N;\ndouble A[N][N];\nfor (t = 0; t <= 666666666666; t++)\n  for (i = 1; i <= N + 7; i++)\n    for (j = 0; j <= N; j++)\n      A[i][j] = (A[i - 2][j - 1] + A[i][j - 1] + A[i + 9][j + 1]) / 9.0;\n";
    let k = parse_kernel("years.k", src).unwrap();
    let p = Program::new(&k, &parse_params("T=3,N=3").unwrap(), &LayoutSpec::default()).unwrap();
    // Exact counts of 10¹¹ iterations and more: they can only come from the closed form
    // (visiting them would not end; the runner's timeout turns a hang into a failure).
    let w = p.work(u64::MAX);
    // Per t: 10 iterations of i, each 4 iterations of j with 4 accesses; the body does not
    // depend on t, so it is counted once.
    assert_eq!((w.accesses, w.iterations, w.complete), (666_666_666_667 * 160, 666_666_666_667 * 11, true), "{w:?}");
    assert!(!p.work(100_000_000_000).complete);
    assert!(p.work(666_666_666_667 * 171).complete);
    // An outer loop of 10¹² iterations around a loop whose bounds depend on it, empty at
    // N = 0: iterations only, stopped at the limit.
    let k = parse_kernel("empty.k", "param N;\ndouble A[N];\nfor (t = 0; t < 1000000000000; t++)\n  for (i = t; i < t + N; i++)\n    A[i - t] = 0;\n").unwrap();
    let p = Program::new(&k, &parse_params("N=0").unwrap(), &LayoutSpec::default()).unwrap();
    let w = p.work(1_000_000);
    assert!(!w.complete && w.accesses == 0 && w.steps() > 1_000_000, "{w:?}");
    // One access in 10¹² iterations: the simulator still visits every one.
    let k = parse_kernel("guard.k", "param N;\ndouble A[N];\nfor (t = 0; t < 1000000000000; t++)\n  if (t < 1)\n    A[0] = 0;\n").unwrap();
    let w = Program::new(&k, &parse_params("N=1").unwrap(), &LayoutSpec::default()).unwrap().work(u64::MAX);
    assert_eq!((w.accesses, w.iterations), (1, 1_000_000_000_000), "{w:?}");
    // Found by fuzzing too: a loop of 3.4·10¹⁰ iterations with an empty body counts as no
    // work, and the simulator does not visit it either.
    let k = parse_kernel("empty-body.k", "param N;\ndouble A[20];\nfor (i = 0; i < N; i++) A[i] = 2;\nfor (j = -34444444444; j < N; j++) {\n}\n").unwrap();
    let p = Program::new(&k, &parse_params("N=3").unwrap(), &LayoutSpec::default()).unwrap();
    assert_eq!(p.work(100_000), Work { accesses: 3, iterations: 0, complete: true });
    assert_eq!(p.simulate(&[CacheConfig::parse("assoc=2,line=32,sets=4").unwrap()])[0].iter().map(|s| s.accesses).sum::<u64>(), 3);
}
