//! The `kansoku.xlat` section on any bytes: bounded memory, errors with an offset.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = kansoku_tracepoints::XlatTable::decode(data);
});
