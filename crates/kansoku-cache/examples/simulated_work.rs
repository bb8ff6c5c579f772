//! Counts, without simulating, what one 32 KiB 8-way 64-byte L1 simulation of each
//! PolyBench-style C file costs at a dataset preset (issue 46): every access, and the
//! accesses the simulator makes one at a time (`Program::simulated_work`: innermost loops
//! from one line change to the next, outer iterations that repeat the one before counted,
//! and whole windows of outer iterations that repeat the first one translated, counted as
//! when the first comparison of the cache states matches).
//! `cargo run --release -p kansoku-cache --example simulated_work -- LARGE FILE.c...`
//! prints TSV: file, accesses, accesses made one at a time, their share, loop iterations;
//! with `--simulate` (or `--every-access`: one access at a time) after the preset it also
//! simulates, cold, as `kansoku cache simulate FILE --size PRESET --cache 32KiB,8-way,64B`
//! does, and adds the misses and the simulation's wall seconds.
use kansoku_cache::{load_c_kernel, CInput, CacheConfig, LayoutSpec, Program};

fn main() {
    let mut args = std::env::args().skip(1);
    let preset = args.next().expect("usage: simulated_work PRESET FILE.c...");
    let l1 = CacheConfig { assoc: 8, line: 64, sets: 64 };
    let mut args = args.peekable();
    let simulate = match args.peek().map(String::as_str) {
        Some("--simulate") => Some(false),
        Some("--every-access") => Some(true),
        _ => None,
    };
    if simulate.is_some() {
        args.next();
    }
    println!("file\taccesses\tmade one at a time\tshare\tloop iterations\tmisses\tseconds");
    for path in args {
        let input = CInput { preset: Some(preset.clone()), ..Default::default() };
        let lowered = match load_c_kernel(std::path::Path::new(&path), &input) {
            Ok(l) => l,
            Err(e) => {
                println!("{path}\t{e}");
                continue;
            }
        };
        let params = lowered.sizes.iter().cloned().collect();
        let prog = match Program::new(&lowered.kernel, &params, &LayoutSpec::polybench()) {
            Ok(p) => p,
            Err(e) => {
                println!("{path}\t{e}");
                continue;
            }
        };
        let (all, paid) = (prog.work(u64::MAX), prog.simulated_work(u64::MAX, &l1));
        let (misses, secs) = match simulate {
            Some(every) => {
                let prog = if every { prog.every_access() } else { prog };
                let t = std::time::Instant::now();
                let stats = prog.simulate(&[l1]).pop().expect("one cache");
                (stats.iter().map(|s| s.misses()).sum::<u64>().to_string(), format!("{:.2}", t.elapsed().as_secs_f64()))
            }
            None => ("-".into(), "-".into()),
        };
        println!("{path}\t{}\t{}\t{:.4}\t{}\t{misses}\t{secs}", all.accesses, paid.accesses, paid.accesses as f64 / all.accesses.max(1) as f64, paid.iterations);
    }
}
