//! The `.ksk` reader on any bytes: events or an error with an offset, never a panic.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(mut r) = kansoku_core::RecordingReader::new(data, "fuzz.ksk".into()) else { return };
    for _ in 0..100_000 {
        match r.next_event() {
            Ok(Some(_)) => {}
            _ => break,
        }
    }
});
