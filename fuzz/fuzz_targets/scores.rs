//! Score tables (TOML and JSON), then a likelihood computed with them.
#![no_main]
use kansoku_reconstruct::{Granularity, Scores, Weighting};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    for json in [false, true] {
        let _ = Scores::parse(text, json, Granularity::Function, Weighting::Count);
    }
});
