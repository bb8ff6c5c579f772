//! A trace file and the decoder: the first byte splits the input into trace and module.
#![no_main]
use kansoku_tracepoints::{decode, read_trace, TimestampMode};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = read_trace(data);
    let cut = data.first().map_or(0, |&b| b as usize * 16).min(data.len());
    let (trace, module) = data.split_at(cut);
    let _ = decode(trace, module, TimestampMode::Offsets);
});
