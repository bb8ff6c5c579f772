//! Issue 43: real programs never break the analyses. Every function of a fixed sample of
//! Debian's files goes through what `kansoku inspect PROGRAM --function F` computes
//! (decode, blocks, jump tables, dominators, loops); a panic fails the test. The whole
//! distribution is swept by `bench/corpus-sweep.sh` (docs/BENCHMARKS.md).
//!
//! python3.11 is in the sample because it panicked: Debian builds it without PIE, so its
//! switches jump through absolute tables, `jmp [rax*8+T]`, where the load is the jump.

use std::path::Path;

use kansoku_binary::{FunctionCfg, Program};

const SAMPLE: [&str; 5] = [
    "/usr/bin/python3.11",
    "/usr/lib/x86_64-linux-gnu/libc.so.6",
    "/usr/lib/x86_64-linux-gnu/libz.so.1",
    "/usr/lib/x86_64-linux-gnu/liblzma.so.5",
    "/usr/bin/bzip2",
];

#[test]
fn every_function_of_the_sample_is_analysed() {
    for path in SAMPLE {
        assert!(Path::new(path).exists(), "{path} is missing: scripts/setup installs it (python3.11, libc6, zlib1g, liblzma5, bzip2)");
        let program = Program::open(path).unwrap();
        let (mut functions, mut tables, mut unresolved, mut absolute) = (0, 0, 0, 0);
        for f in program.functions() {
            let cfg = FunctionCfg::build(&program, f);
            for t in &cfg.jump_tables {
                assert!(t.targets.iter().all(|&a| cfg.block_starting_at(a).is_some()), "{path}: {} table at {:#x}", f.name, t.jump);
                let j = cfg.instruction_index(t.jump).unwrap();
                absolute += usize::from(cfg.instructions[j].text.starts_with("jmp qword ptr ["));
            }
            functions += 1;
            tables += cfg.jump_tables.len();
            unresolved += cfg.unresolved_jumps.len();
        }
        eprintln!("{path}: {functions} functions, {tables} jump tables followed ({absolute} jumped through directly), {unresolved} indirect jumps unresolved");
        assert!(functions > 0 && tables > 0, "{path}");
        // python3.11 (no PIE) dispatches through absolute tables: `jmp [reg*8+T]`, its
        // guard (`cmp reg, N; ja`) right before it, is followed with N+1 entries.
        if path == SAMPLE[0] {
            assert!(absolute > 0, "{path}");
        }
    }
}
