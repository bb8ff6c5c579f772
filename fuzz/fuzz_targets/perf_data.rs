//! The perf.data reader on any bytes: events or an error naming the file and byte, never
//! a panic, never unbounded memory. The reader opens files (it corrects a cut file's header
//! in an overlay and reads the rest as it goes), so each input is written to one file in
//! /dev/shm first.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let path = std::path::PathBuf::from(format!("/dev/shm/kansoku-fuzz-perf-{}.data", std::process::id()));
    if std::fs::write(&path, data).is_err() {
        return;
    }
    if let Ok(mut r) = kansoku_perfdata::PerfDataReader::open(&path) {
        for _ in 0..100_000 {
            match r.next_event() {
                Ok(Some(_)) => {}
                _ => break,
            }
        }
    }
});
