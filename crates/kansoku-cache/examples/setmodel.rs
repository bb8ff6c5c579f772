//! Development probe: build set formulas for a bundled kernel and compare with the simulator.
//! `cargo run --release -p kansoku-cache --example setmodel -- KERNEL CACHE EXTENTS POINT [POINT..]`
//! (`BUDGET=SECONDS` bounds the build, `CHAIN=4000` sets `lexmin_chain_above`, `SPLIT=CHARS|never`
//! sets `split_by_array_above`)
use kansoku_cache::{sets::*, *};
fn main() {
    let a: Vec<String> = std::env::args().collect();
    let src = BUNDLED_KERNELS.iter().find(|(n, _)| *n == a[1]).unwrap().1;
    let ext = parse_params(&a[3]).unwrap();
    let k = parse_kernel(&a[1], src).unwrap().with_fixed_extents(&ext).unwrap();
    let layout = if a[1] == "seed" { LayoutSpec::parse_bases(seed_example::BASES).unwrap() } else { LayoutSpec::default() };
    let cache = CacheConfig::parse(&a[2]).unwrap();
    let mut o = SetModelOptions::new(layout.clone(), cache);
    o.extents = ext.clone();
    o.time_budget = std::env::var("BUDGET").ok().map(|s| std::time::Duration::from_secs(s.parse().unwrap()));
    o.lexmin_chain_above = std::env::var("CHAIN").ok().map(|s| s.parse().unwrap());
    if let Ok(s) = std::env::var("SPLIT") {
        o.split_by_array_above = s.parse().ok(); // SPLIT=never: one chain over all lines
    }
    let t = std::time::Instant::now();
    let f = match build_set_model(&k, &o) {
        Ok(f) => f,
        Err(e) => { println!("{} {}: FAILED after {:.2}s: {e}", a[1], a[2], t.elapsed().as_secs_f64()); return; }
    };
    let cells: usize = f.refs.iter().map(|r| r.compulsory.cells.len() + r.conflict.cells.len()).sum();
    println!("{} {}: built in {:.2}s, {} cells; per ref {:?}", a[1], a[2], f.build_seconds, cells, f.refs.iter().map(|r| (r.build_seconds * 1000.0) as u64).collect::<Vec<_>>());
    for p in &a[4..] {
        let p = parse_params(p).unwrap();
        let e = f.eval(&p).unwrap();
        let s = simulate(&k, &p, &layout, cache).unwrap();
        let ok = e.iter().zip(&s).all(|(m, s)| (m.accesses, m.compulsory, m.conflict) == (s.accesses as i64, s.compulsory as i64, s.other as i64));
        println!("  {p:?}: {}", if ok { "equal".to_string() } else { format!("DIFFER model {:?} sim {:?}", e, s) });
    }
}
