//! The bundled C examples: compiled with clang at test time, optimised, run under wasmtime
//! and checked: decoded streams of original and optimised modules must be identical.

use kansoku_tracepoints::clang::{compile_c, example_sources};
use kansoku_tracepoints::{check, optimize, OptimizeOptions, RunOptions};

fn compile(src: &std::path::Path, dir: &std::path::Path) -> Vec<u8> {
    let out = dir.join(src.file_stem().unwrap()).with_extension("wasm");
    if let Err(e) = compile_c(src, &out) {
        panic!("{e}\nThese tests compile C with clang --target=wasm32: run scripts/setup to install clang and lld.");
    }
    std::fs::read(&out).unwrap()
}

#[test]
fn every_example_checks_and_saves() {
    let dir = tempfile::tempdir().unwrap();
    let sources = example_sources().unwrap();
    assert!(sources.len() >= 6, "expected at least six example programs");
    let (mut calls0, mut calls1, mut bytes0, mut bytes1) = (0u64, 0u64, 0u64, 0u64);
    for src in &sources {
        let wasm = compile(src, dir.path());
        let opt = optimize(&wasm, &OptimizeOptions::default()).unwrap();
        let run = RunOptions { args: vec!["40".into()], ..Default::default() };
        let r = check(&wasm, &opt.wasm, &run, 0).unwrap();
        let name = src.file_stem().unwrap().to_string_lossy();
        println!(
            "{name:14} events {:6} calls {:6} -> {:6} ({:5.1}% fewer)  bytes {:7} -> {:7} ({:5.1}% fewer)  new ids {}",
            r.events,
            r.original.records,
            r.optimised.records,
            100.0 * r.calls_saved,
            r.original.bytes,
            r.optimised.bytes,
            100.0 * r.bytes_saved,
            opt.report.new_ids_used
        );
        assert!(r.identical, "{name}: decoded streams differ: {:?}", r.first_difference);
        assert!(r.same_results, "{name}: results differ");
        assert!(r.events > 0, "{name}: no events traced");
        // `sorting` is the negative control: one trace call per basic block, nothing to merge
        if name != "sorting" {
            assert!(r.optimised.records < r.original.records, "{name}: no trace call saved");
        } else {
            assert!(r.optimised.records <= r.original.records, "{name}: optimised emits more calls");
        }
        calls0 += r.original.records;
        calls1 += r.optimised.records;
        bytes0 += r.original.bytes;
        bytes1 += r.optimised.bytes;
    }
    let calls_saved = 1.0 - calls1 as f64 / calls0 as f64;
    let bytes_saved = 1.0 - bytes1 as f64 / bytes0 as f64;
    println!("total calls {calls0} -> {calls1} ({:.1}% fewer), bytes {bytes0} -> {bytes1} ({:.1}% fewer)", 100.0 * calls_saved, 100.0 * bytes_saved);
    assert!(calls_saved >= 0.40, "goal: at least 40% fewer trace calls, got {:.1}%", 100.0 * calls_saved);
    assert!(bytes_saved >= 0.30, "goal: at least 30% fewer bytes, got {:.1}%", 100.0 * bytes_saved);
}
