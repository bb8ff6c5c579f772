//! Savings of the trace-call optimiser on the bundled C examples, measured in one run.
//!
//! `cargo run --release -p kansoku-tracepoints --example tp_bench [-- N [REPEATS]]`
//!
//! For each example: compile with clang, optimise, run original and optimised under wasmtime
//! (instruction clock) and check their decoded streams; then time untraced (all trace calls
//! stripped), original and optimised runs (ns clock, best of REPEATS, interleaved).
use kansoku_tracepoints::clang::{compile_c, example_sources};
use kansoku_tracepoints::{check, optimize, OptimizeOptions, RunOptions};

fn main() {
    let mut args = std::env::args().skip(1);
    let n: String = args.next().unwrap_or_else(|| "200".into());
    let repeats: u32 = args.next().map(|r| r.parse().expect("REPEATS")).unwrap_or(15);
    let dir = std::env::temp_dir().join(format!("kansoku-tp-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    println!("argument n = {n}, timing best of {repeats}");
    println!(
        "{:<13} {:>9} {:>9} {:>7} {:>10} {:>10} {:>7} {:>10} {:>10} {:>7} {:>9} {:>9} {:>6}",
        "program", "calls", "opt", "saved", "bytes", "opt", "saved", "instr", "opt", "saved", "ovh orig", "ovh opt", "ids"
    );
    let (mut c0, mut c1, mut b0, mut b1, mut i0, mut i1) = (0u64, 0u64, 0u64, 0u64, 0u64, 0u64);
    let (mut tu, mut ta, mut tb) = (0u64, 0u64, 0u64);
    for src in example_sources().unwrap() {
        let name = src.file_stem().unwrap().to_string_lossy().to_string();
        let out = dir.join(format!("{name}.wasm"));
        compile_c(&src, &out).unwrap_or_else(|e| panic!("{e}"));
        let wasm = std::fs::read(&out).unwrap();
        let o = optimize(&wasm, &OptimizeOptions::default()).unwrap();
        let r = check(&wasm, &o.wasm, &RunOptions { args: vec![n.clone()], ..Default::default() }, repeats).unwrap();
        assert!(r.identical, "{name}: streams differ");
        let t = r.timing.clone().unwrap();
        let (oi, pi) = (r.original.instructions.unwrap(), r.optimised.instructions.unwrap());
        println!(
            "{:<13} {:>9} {:>9} {:>6.1}% {:>10} {:>10} {:>6.1}% {:>10} {:>10} {:>6.1}% {:>8.2}x {:>8.2}x {:>6}",
            name,
            r.original.records,
            r.optimised.records,
            100.0 * r.calls_saved,
            r.original.bytes,
            r.optimised.bytes,
            100.0 * r.bytes_saved,
            oi,
            pi,
            100.0 * r.instructions_saved,
            t.original_overhead,
            t.optimised_overhead,
            o.report.new_ids_used
        );
        c0 += r.original.records;
        c1 += r.optimised.records;
        b0 += r.original.bytes;
        b1 += r.optimised.bytes;
        i0 += oi;
        i1 += pi;
        tu += t.untraced_ns;
        ta += t.original_ns;
        tb += t.optimised_ns;
    }
    let s = |a: u64, b: u64| 100.0 * (1.0 - b as f64 / a as f64);
    println!(
        "{:<13} {:>9} {:>9} {:>6.1}% {:>10} {:>10} {:>6.1}% {:>10} {:>10} {:>6.1}% {:>8.2}x {:>8.2}x",
        "TOTAL",
        c0,
        c1,
        s(c0, c1),
        b0,
        b1,
        s(b0, b1),
        i0,
        i1,
        s(i0, i1),
        ta as f64 / tu as f64,
        tb as f64 / tu as f64
    );
    println!("wall time summed over programs: untraced {:.3} ms, original {:.3} ms, optimised {:.3} ms", tu as f64 / 1e6, ta as f64 / 1e6, tb as f64 / 1e6);
    let _ = std::fs::remove_dir_all(&dir);
}
