//! The kernel language: a parse error names a position; a kernel that parses also
//! instantiates, counts its work and simulates (bounded) at small sizes.
#![no_main]
use kansoku_cache::*;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(src) = std::str::from_utf8(data) else { return };
    let Ok(k) = parse_kernel("fuzz.k", src) else { return };
    let params: ParamValues = k.params.iter().map(|p| (p.clone(), 3)).collect();
    let Ok(p) = Program::new(&k, &params, &LayoutSpec::default()) else { return };
    // Counted, not enumerated: a loop of 10^12 iterations must not time the harness out.
    if p.work(100_000).complete {
        let _ = p.simulate(&[CacheConfig::parse("assoc=2,line=32,sets=4").unwrap()]);
    }
});
