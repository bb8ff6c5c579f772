//! Benchmarks of seed 004 (figures in docs/BENCHMARKS.md, seed 004):
//!
//! ```text
//! cargo run --release -p kansoku-cache --example cache_bench
//! ```
//!
//! 1. Simulator throughput (accesses per second) on gemm, one cache at a time.
//! 2. Per bundled kernel, cache `assoc=2,line=32,sets=4`: time to build all formulas,
//!    time to evaluate all of them once, time of one simulation at the largest sampled
//!    size, and the crossover sizes: where one simulation costs more than one evaluation,
//!    and where it costs more than building the formulas and evaluating them.

use kansoku_cache::model::*;
use kansoku_cache::*;
use std::time::Instant;

fn kernel(name: &str, src: &str) -> Kernel {
    parse_kernel(&format!("kernels/{name}.k"), src).unwrap()
}

fn family(k: &Kernel) -> Family {
    let mut f = Family::all_varying(k);
    if k.params.iter().any(|p| p == "T") {
        f.varying.retain(|p| p != "T");
        f.fixed.insert("T".into(), 2);
    }
    f
}

fn layout(name: &str) -> LayoutSpec {
    if name == "seed" {
        LayoutSpec::parse_bases(seed_example::BASES).unwrap()
    } else {
        LayoutSpec::Consecutive { start: 0, align: 32 }
    }
}

fn time_sim(k: &Kernel, fam: &Family, lay: &LayoutSpec, c: CacheConfig, n: i64) -> (f64, u64) {
    let prog = Program::new(k, &fam.params_at(n), lay).unwrap();
    let t = Instant::now();
    let st = prog.simulate(&[c]).pop().unwrap();
    (t.elapsed().as_secs_f64(), st.iter().map(|s| s.accesses).sum())
}

fn main() {
    println!("# kansoku-cache benchmarks");
    println!("machine: {} cores; {}", std::thread::available_parallelism().map(|n| n.get()).unwrap_or(0), std::env::consts::ARCH);
    println!("\n## Simulator throughput (gemm, one cache)\n");
    println!("| kernel | N | cache | accesses | seconds | M accesses/s |");
    println!("|---|---|---|---|---|---|");
    let gemm = kernel("gemm", BUNDLED_KERNELS[1].1);
    let fam = family(&gemm);
    for spec in ["assoc=1,line=32,sets=4", "assoc=2,line=32,sets=4", "assoc=8,line=32,sets=4", "32KiB,8-way,64B", "1MiB,16-way,64B"] {
        let c = CacheConfig::parse(spec).unwrap();
        let n = 300;
        let mut best = f64::MAX;
        let mut acc = 0;
        for _ in 0..3 {
            let (s, a) = time_sim(&gemm, &fam, &layout("gemm"), c, n);
            best = best.min(s);
            acc = a;
        }
        println!("| gemm | {n} | {spec} | {acc} | {best:.3} | {:.1} |", acc as f64 / best / 1e6);
    }

    println!("\n## Formulas per kernel (cache assoc=2,line=32,sets=4)\n");
    println!("| kernel | refs | sampled sizes | horizon | build s | eval all refs µs | sim at n=largest sample: s | throughput M/s | n* (sim > eval) | n** (sim > build + eval) | far checks (formula = simulator) |");
    println!("|---|---|---|---|---|---|---|---|---|---|---|");
    let c = CacheConfig::parse(seed_example::CACHE).unwrap();
    for (name, src) in BUNDLED_KERNELS {
        let k = kernel(name, src);
        let fam = family(&k);
        let lay = layout(name);
        let t = Instant::now();
        let f = build_model(&k, &ModelOptions::new(fam.clone(), lay.clone(), vec![c])).unwrap().pop().unwrap();
        let build = t.elapsed().as_secs_f64();
        // Evaluation: every reference's three formulas at a size inside the sampled range.
        let n_eval = f.sampled_sizes.1;
        let reps = 200_000;
        let t = Instant::now();
        let mut sink = 0i128;
        for i in 0..reps {
            let ev = f.eval_n(n_eval - (i % 7)).unwrap();
            sink += ev.refs[0].conflict;
        }
        let eval_s = t.elapsed().as_secs_f64() / reps as f64;
        std::hint::black_box(sink);
        let (mut sim_s, mut sim_acc) = (f64::MAX, 0);
        for _ in 0..3 {
            let (s, a) = time_sim(&k, &fam, &lay, c, f.sampled_sizes.1);
            sim_s = sim_s.min(s);
            sim_acc = a;
        }
        let thr = sim_acc as f64 / sim_s;
        // Crossovers: accesses(n) from the formulas, time = accesses / throughput.
        let acc_at = |n: i64| -> f64 { f.eval_n(n).unwrap().refs.iter().map(|r| r.accesses as f64).sum() };
        let first_n = |limit: f64| -> String {
            let mut n = 1i64;
            while n < 1 << 40 {
                if acc_at(n) / thr > limit {
                    return n.to_string();
                }
                n = if n < 64 { n + 1 } else { n + n / 16 };
            }
            "never".into()
        };
        // Far beyond the sampled sizes: compare every reference with the simulator.
        let vmax = f.verified_max();
        let deg = *degree_bounds(&k, &fam).iter().max().unwrap();
        let far: Vec<i64> = if deg >= 3 { vec![2 * vmax, 3 * vmax + 1] } else { vec![2 * vmax + 3, 4 * vmax + 1, 8 * vmax + 5] };
        let mut checks = Vec::new();
        for &n in &far {
            let sim = Program::new(&k, &fam.params_at(n), &lay).unwrap().simulate(&[c]).pop().unwrap();
            let ev = f.eval_n(n).unwrap();
            let ok = ev.refs.iter().zip(&sim).all(|(e, s)| (e.accesses, e.compulsory, e.conflict) == (s.accesses as i128, s.compulsory as i128, s.other as i128));
            checks.push(format!("{n}:{}", if ok { "ok" } else { "MISMATCH" }));
        }
        println!(
            "| {name} | {} | {}..={} | {} | {build:.3} | {:.2} | {sim_s:.4} | {:.0} | {} | {} | {} |",
            k.refs.len(),
            f.sampled_sizes.0,
            f.sampled_sizes.1,
            f.horizon,
            eval_s * 1e6,
            thr / 1e6,
            first_n(eval_s),
            first_n(build + eval_s),
            checks.join(" ")
        );
    }
}
