//! The kernel language: a parse error names a position; a kernel that parses also
//! instantiates and simulates (bounded) at small sizes.
#![no_main]
use kansoku_cache::*;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(src) = std::str::from_utf8(data) else { return };
    let Ok(k) = parse_kernel("fuzz.k", src) else { return };
    let params: ParamValues = k.params.iter().map(|p| (p.clone(), 3)).collect();
    let Ok(p) = Program::new(&k, &params, &LayoutSpec::default()) else { return };
    let mut n = 0u64;
    p.for_each_access(|_, _| n += 1);
    if n < 100_000 {
        let _ = p.simulate(&[CacheConfig::parse("assoc=2,line=32,sets=4").unwrap()]);
    }
});
