//! Seed 004, set method: build time, evaluation time, simulation time and break-even
//! size per kernel and cache (docs/BENCHMARKS.md, seed 004, table 4).
//! `cargo run --release -p kansoku-cache --example set_bench`
use kansoku_cache::{sets::*, *};
use std::time::Instant;

fn main() {
    // (kernel, cache, extents, the parameter point used for timing)
    let cases = [
        ("seed", "assoc=2,line=32,sets=4", "", "X=200,Y=200,Z=200"),
        ("seed", "assoc=8,line=32,sets=4", "", "X=200,Y=200,Z=200"),
        ("jacobi1d", "assoc=2,line=32,sets=4", "N=4096", "T=100,N=4096"),
        ("jacobi1d", "assoc=8,line=32,sets=4", "N=4096", "T=100,N=4096"),
        ("trisolv", "assoc=1,line=32,sets=4", "N=2048", "N=2048"),
        ("trisolv", "assoc=2,line=32,sets=4", "N=2048", "N=2048"),
        ("gemm", "assoc=2,line=32,sets=4", "N=64", "N=64"),
        ("atax", "assoc=2,line=32,sets=4", "N=256", "N=256"),
        ("mvt", "assoc=2,line=32,sets=4", "N=256", "N=256"),
        ("bicg", "assoc=2,line=32,sets=4", "N=256", "N=256"),
        ("jacobi2d", "assoc=1,line=32,sets=4", "N=16", "T=100,N=16"),
        ("seidel2d", "assoc=1,line=32,sets=4", "N=16", "T=100,N=16"),
    ];
    println!("| kernel | cache | extents | refs | build s | cells | eval all refs µs | point | accesses | sim s | M acc/s | break-even accesses (sim > build + eval) |");
    println!("|---|---|---|---|---|---|---|---|---|---|---|---|");
    for (kn, c, ext, point) in cases {
        let src = BUNDLED_KERNELS.iter().find(|(n, _)| *n == kn).unwrap().1;
        let e = parse_params(ext).unwrap();
        let k = parse_kernel(kn, src).unwrap().with_fixed_extents(&e).unwrap();
        let layout = if kn == "seed" { LayoutSpec::parse_bases(seed_example::BASES).unwrap() } else { LayoutSpec::default() };
        let cache = CacheConfig::parse(c).unwrap();
        let mut o = SetModelOptions::new(layout.clone(), cache);
        o.extents = e;
        let f = match build_set_model(&k, &o) {
            Ok(f) => f,
            Err(err) => {
                println!("| {kn} | {c} | {ext} | | failed: {err} |");
                continue;
            }
        };
        let cells: usize = f.refs.iter().map(|r| r.accesses.cells.len() + r.compulsory.cells.len() + r.conflict.cells.len()).sum();
        let p = parse_params(point).unwrap();
        let reps = 2000;
        let t = Instant::now();
        let mut sink = 0i64;
        for _ in 0..reps {
            sink += f.eval(&p).unwrap().iter().map(|r| r.conflict).sum::<i64>();
        }
        let eval_us = t.elapsed().as_secs_f64() * 1e6 / reps as f64;
        let prog = Program::new(&k, &p, &layout).unwrap();
        let t = Instant::now();
        let sim = prog.simulate(&[cache]).pop().unwrap();
        let sim_s = t.elapsed().as_secs_f64();
        let acc: u64 = sim.iter().map(|s| s.accesses).sum();
        let ok = f.eval(&p).unwrap().iter().zip(&sim).all(|(m, s)| (m.compulsory, m.conflict) == (s.compulsory as i64, s.other as i64));
        assert!(ok && sink >= 0, "{kn} {c}: formulas differ from the simulator at {point}");
        let rate = acc as f64 / sim_s;
        let break_even = (f.build_seconds + eval_us * 1e-6) * rate;
        println!("| {kn} | {c} | {ext} | {} | {:.2} | {cells} | {eval_us:.1} | {point} | {acc} | {sim_s:.4} | {:.0} | {:.2e} |", f.refs.len(), f.build_seconds, rate / 1e6, break_even);
    }
}
