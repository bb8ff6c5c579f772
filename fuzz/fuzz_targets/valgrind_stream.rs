//! The stream of kansoku's Valgrind tool, fed in two chunks split anywhere.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let mut d = kansoku_paths::sbstream::StreamDecoder::new();
    let cut = data.first().map_or(0, |&b| b as usize).min(data.len());
    let mut items = 0u64;
    d.feed(&data[..cut], &mut |_| items += 1);
    d.feed(&data[cut..], &mut |_| items += 1);
    d.finish(&mut |_| items += 1);
});
