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

const LIBC: &str = "/usr/lib/x86_64-linux-gnu/libc.so.6";

/// The text symbols `nm` reads from `file`: (address, name).
fn nm_functions(file: &Path) -> Vec<(u64, String)> {
    let out = std::process::Command::new("nm").arg("--defined-only").arg(file).output().expect("nm runs (binutils)");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| {
            let mut w = l.split_whitespace();
            let (a, kind, name) = (w.next()?, w.next()?, w.next()?);
            matches!(kind, "t" | "T").then(|| Some((u64::from_str_radix(a, 16).ok()?, name.to_string())))?
        })
        .collect()
}

/// Debian's libc is stripped; libc6-dbg installs its symbols under /usr/lib/debug by build
/// id, where gdb, perf and valgrind find them. Its local functions (`_int_malloc`) are
/// named, at the addresses `nm` reads from that file, and a runtime address inside one
/// is symbolised by that name, not `libc.so.6+0x...`.
#[test]
fn libc_s_local_functions_come_from_its_debug_file() {
    let libc = Program::open(LIBC).unwrap();
    assert!(!libc.has_static_symbols, "Debian's libc is stripped");
    let debug = libc.debug_file.clone().expect("libc6-dbg's file for libc's build id (scripts/setup installs libc6-dbg)");
    let id = libc.build_id.clone().unwrap();
    assert_eq!(debug, Path::new(&format!("/usr/lib/debug/.build-id/{}/{}.debug", &id[..2], &id[2..])));
    let nm = nm_functions(&debug);
    let in_text: Vec<&(u64, String)> = nm.iter().filter(|(a, _)| libc.section_name(*a) == Some(".text")).collect();
    assert!(in_text.len() > 2000, "{}", in_text.len());
    for (address, name) in &in_text {
        let f = libc.function_at(*address).unwrap_or_else(|| panic!("{name} at {address:#x}"));
        assert!(f.address == *address && (f.name == *name || f.aliases.contains(name)), "{name} at {address:#x}: {f:?}");
    }
    for name in ["_int_malloc", "_int_free"] {
        let f = libc.function_named(name).unwrap();
        assert_eq!(Some(f.address), nm.iter().find(|(_, n)| n == name).map(|(a, _)| *a));
        // mapped as the loader maps libc: its first segment at some page-aligned base
        let base = 0x7f00_0000_0000;
        let module = kansoku_core::Module { path: LIBC.into(), build_id: Some(id.clone()), start: base, end: base + 0x20_0000, file_offset: 0 };
        let mut symbolizer = kansoku_binary::Symbolizer::new(&[module]);
        let runtime = base + libc.file_offset_of_vaddr(f.address + 4).unwrap();
        assert_eq!(symbolizer.locate(runtime).function, name);
        assert_eq!(symbolizer.name(runtime).and_then(|n| n.function).as_deref(), Some(name));
    }
}
