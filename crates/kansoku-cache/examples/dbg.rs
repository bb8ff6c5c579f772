use kansoku_cache::*;
fn main() {
    let src = BUNDLED_KERNELS.iter().find(|(n, _)| *n == "bicg").unwrap().1;
    let k = parse_kernel("bicg.k", src).unwrap();
    let c = CacheConfig { assoc: 3, line: 8, sets: 3 };
    let lay = LayoutSpec::Consecutive { start: 0, align: 64 };
    for r in &k.refs { print!("P{} {} | ", r.id, k.ref_text(r)); }
    println!();
    for n in (120..=150).chain([200, 250, 300]) {
        let p: ParamValues = [("N".to_string(), n)].into();
        let st = simulate(&k, &p, &lay, c).unwrap();
        println!("{n}: {:?}", st.iter().map(|s| s.other).collect::<Vec<_>>());
    }
}
