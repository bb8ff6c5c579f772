//! Lackey's log, one line at a time, as `kansoku paths --source lackey` reads it.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    for line in data.split(|&b| b == b'\n') {
        let _ = kansoku_paths::lackey::parse_line(line);
    }
});
