//! Outside input: cut or garbled program files give errors, never panics.

use kansoku_binary::{FunctionCfg, Program};
use kansoku_examples::{build, build_source_by, test_build_dir};
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

/// A stripped -O2 build of tests/c/interp.c: functions come from `.eh_frame`, names from
/// the PLT relocations, and its switch is a jump table in `.rodata`, so garbling it
/// exercises those parsers too.
/// Built once per test run by the shared builder; read once per test process.
fn stripped_bytes() -> Vec<u8> {
    static BYTES: std::sync::OnceLock<Vec<u8>> = std::sync::OnceLock::new();
    BYTES
        .get_or_init(|| {
            let source = std::fs::read_to_string(std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/c/interp.c")).unwrap();
            let dir = test_build_dir().join("binary-tests");
            let program = build_source_by("cc", "interp-cc_O2_s", &source, &dir, &["-O2", "-s"]).unwrap_or_else(|e| panic!("cc builds and strips (-s): {e}"));
            std::fs::read(program).unwrap()
        })
        .clone()
}

#[test]
fn the_uncut_stripped_program_decodes() {
    assert!(exercise(&stripped_bytes(), "stripped-whole") >= 5);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Flips only past the ELF and program headers (0x1000 on), where `.plt`, `.text`,
    /// `.rodata` and `.eh_frame` lie, so that most cases still open and reach the parsers.
    #[test]
    fn garbled_stripped_programs_never_panic(flips in proptest::collection::vec((0x1000usize..0x3000, any::<u8>()), 1..40)) {
        let mut bytes = stripped_bytes();
        for (at, value) in flips {
            let n = bytes.len();
            bytes[at % n] = value;
        }
        let _ = exercise(&bytes, "garbled-stripped");
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Flips in the last 2 KiB, where strip puts the section headers: section addresses,
    /// offsets, sizes and entry sizes become arbitrary.
    #[test]
    fn garbled_section_headers_never_panic(flips in proptest::collection::vec((1usize..2048, any::<u8>()), 1..20)) {
        let mut bytes = stripped_bytes();
        for (from_end, value) in flips {
            let n = bytes.len();
            bytes[n - from_end.min(n)] = value;
        }
        let _ = exercise(&bytes, "garbled-headers");
    }
}
