//! The trace-call optimiser on any module.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = kansoku_tracepoints::optimize(data, &kansoku_tracepoints::OptimizeOptions::default());
});
