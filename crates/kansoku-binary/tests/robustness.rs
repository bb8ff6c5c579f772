//! Outside input: cut or garbled program files give errors, never panics.

use kansoku_binary::{FunctionCfg, Program};
use kansoku_examples::{build, test_build_dir};
use proptest::prelude::*;

fn seed000_bytes() -> Vec<u8> {
    std::fs::read(build("seed000", &test_build_dir()).unwrap()).unwrap()
}

/// Opens `bytes` as a program and, if that works, decodes its functions. Returns how
/// many functions were decoded.
fn exercise(bytes: &[u8], name: &str) -> usize {
    let mut decoded = 0;
    let path = std::env::temp_dir().join(format!("kansoku-robust-{}-{name}", std::process::id()));
    std::fs::write(&path, bytes).unwrap();
    if let Ok(p) = Program::open(&path) {
        for f in p.functions().iter().take(50) {
            let _ = FunctionCfg::build(&p, f);
            let _ = p.source_line(f.address);
            decoded += 1;
        }
    }
    let _ = std::fs::remove_file(&path);
    decoded
}

#[test]
fn the_uncut_program_decodes() {
    assert!(exercise(&seed000_bytes(), "whole") >= 5);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn truncated_programs_never_panic(cut in 0usize..20_000) {
        let bytes = seed000_bytes();
        let _ = exercise(&bytes[..cut.min(bytes.len())], "cut");
    }

    #[test]
    fn garbled_programs_never_panic(flips in proptest::collection::vec((0usize..20_000, any::<u8>()), 1..40)) {
        let mut bytes = seed000_bytes();
        for (at, value) in flips {
            let n = bytes.len();
            bytes[at % n] = value;
        }
        let _ = exercise(&bytes, "garbled");
    }
}

/// A stripped -O2 build of seed000: functions come from `.eh_frame`, names from the PLT
/// relocations, and `-O2` with a dense switch would add jump tables, so garbling it
/// exercises those parsers too.
fn stripped_bytes() -> Vec<u8> {
    let program = kansoku_examples::build_with("seed000", &test_build_dir(), &["-O2"]).unwrap();
    let copy = std::env::temp_dir().join(format!("kansoku-robust-{}-strip", std::process::id()));
    let ok = std::process::Command::new("strip").arg("-o").arg(&copy).arg(&program).status().unwrap().success();
    assert!(ok, "strip runs");
    let bytes = std::fs::read(&copy).unwrap();
    let _ = std::fs::remove_file(copy);
    bytes
}

#[test]
fn the_uncut_stripped_program_decodes() {
    assert!(exercise(&stripped_bytes(), "stripped-whole") >= 5);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn garbled_stripped_programs_never_panic(flips in proptest::collection::vec((0usize..20_000, any::<u8>()), 1..40)) {
        let mut bytes = stripped_bytes();
        for (at, value) in flips {
            let n = bytes.len();
            bytes[at % n] = value;
        }
        let _ = exercise(&bytes, "garbled-stripped");
    }
}
