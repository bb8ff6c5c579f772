//! Formulas for a realistic L1 (32 KiB, 8-way, 64-byte lines): how far the method scales.
//! `cargo run --release -p kansoku-cache --example l1 -- KERNEL [FROM]` (T is fixed at 2;
//! FROM = smallest size the formulas are derived for, default 1).
use kansoku_cache::model::*;
use kansoku_cache::*;
fn main() {
    let args: Vec<String> = std::env::args().collect();
    let name = &args[1];
    let src = BUNDLED_KERNELS.iter().find(|(n, _)| n == name).expect("bundled kernel name").1;
    let k = parse_kernel(&format!("kernels/{name}.k"), src).unwrap();
    let mut fam = Family::all_varying(&k);
    if k.params.iter().any(|p| p == "T") {
        fam.varying.retain(|p| p != "T");
        fam.fixed.insert("T".into(), 2);
    }
    let c = CacheConfig::parse("32KiB,8-way,64B").unwrap();
    let lay = LayoutSpec::Consecutive { start: 0, align: 64 };
    let t = std::time::Instant::now();
    let mut opts = ModelOptions::new(fam.clone(), lay.clone(), vec![c]);
    if let Some(from) = args.get(2) {
        opts.n_min = from.parse().expect("FROM is a size");
    }
    match build_model(&k, &opts) {
        Ok(mut m) => {
            let m = m.pop().unwrap();
            let v = m.verified_max();
            let far = 2 * v + 3;
            let sim = Program::new(&k, &fam.params_at(far), &lay).unwrap().simulate(&[c]).pop().unwrap();
            let ev = m.eval_n(far).unwrap();
            let ok = ev.refs.iter().zip(&sim).all(|(e, s)| (e.accesses, e.compulsory, e.conflict) == (s.accesses as i128, s.compulsory as i128, s.other as i128));
            println!("{name} 32KiB,8-way,64B: built in {:.1} s, sampled {}..={v}, horizon {}, check at n={far}: {}", t.elapsed().as_secs_f64(), m.sampled_sizes.0, m.horizon, if ok { "equal" } else { "MISMATCH" });
        }
        Err(e) => println!("{name} 32KiB,8-way,64B: no formulas after {:.1} s: {e}", t.elapsed().as_secs_f64()),
    }
}
