//! Code without symbols (issue 14), checked on real compiled programs against independent
//! tools: a stripped program's functions come from `.eh_frame` and start where the
//! unstripped program's symbols start (readelf lists the FDEs); PLT stubs carry objdump's
//! `name@plt`; padding is no function; switch jump tables are followed so that loops are
//! those of the same switch compiled without a table.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

use kansoku_binary::program::SymbolSource;
use kansoku_binary::{FunctionCfg, FunctionSymbol, Program};
use kansoku_examples::{build_source_by, build_with, test_build_dir};

/// Distinguishes temporary files of test threads in one process.
fn unique() -> String {
    static N: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    format!("{}-{}", std::process::id(), N.fetch_add(1, std::sync::atomic::Ordering::Relaxed))
}

const GZIP: &str = "/usr/bin/gzip";
const LIBZ: &str = "/lib/x86_64-linux-gnu/libz.so.1";

/// Compiles tests/c/NAME.c with gcc (`cc`) and exactly `flags`.
fn compile(name: &str, flags: &[&str]) -> PathBuf {
    compile_with("cc", name, flags)
}

/// Compiles tests/c/NAME.c with `compiler` and exactly `flags` into the test build
/// directory, by the shared builder: once per compiler, flags and source in a test run,
/// whichever test threads and binaries ask.
fn compile_with(compiler: &str, name: &str, flags: &[&str]) -> PathBuf {
    let source = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/c").join(format!("{name}.c"))).unwrap();
    let stem = format!("{name}-{compiler}{}", flags.iter().map(|f| f.replace(['-', '=', ','], "_")).collect::<String>());
    build_source_by(compiler, &stem, &source, &test_build_dir().join("binary-tests"), flags).unwrap_or_else(|e| panic!("{e} (scripts/setup installs gcc and clang)"))
}

/// A stripped copy of `program` (`strip` from binutils).
fn stripped(program: &Path) -> PathBuf {
    let copy = PathBuf::from(format!("{}-stripped-{}", program.display(), unique()));
    let status = Command::new("strip").arg("-o").arg(&copy).arg(program).status().expect("strip runs");
    assert!(status.success());
    copy
}

/// `start -> end` of every FDE, as readelf prints them.
fn readelf_fdes(program: &Path) -> BTreeMap<u64, u64> {
    let out = Command::new("readelf").arg("--debug-dump=frames").arg(program).output().expect("readelf runs");
    let text = String::from_utf8_lossy(&out.stdout);
    text.lines()
        .filter(|l| l.contains(" FDE "))
        .filter_map(|l| {
            let (lo, hi) = l.split_once("pc=")?.1.split_once("..")?;
            Some((u64::from_str_radix(lo, 16).ok()?, u64::from_str_radix(hi.trim(), 16).ok()?))
        })
        .collect()
}

/// `address -> name@plt` as objdump names PLT stubs.
fn objdump_plt(program: &Path) -> BTreeMap<u64, String> {
    let out = Command::new("objdump").arg("-d").arg(program).output().expect("objdump runs");
    let text = String::from_utf8_lossy(&out.stdout);
    text.lines()
        .filter_map(|l| {
            let (addr, rest) = l.split_once(" <")?;
            let name = rest.strip_suffix(">:")?;
            name.ends_with("@plt").then(|| (u64::from_str_radix(addr, 16).ok(), name.to_string()))
        })
        .filter_map(|(a, n)| Some((a?, n)))
        .collect()
}

fn text_functions(p: &Program) -> Vec<&FunctionSymbol> {
    p.functions().iter().filter(|f| p.section_name(f.address) == Some(".text")).collect()
}

fn is_padding(cfg: &FunctionCfg) -> bool {
    cfg.instructions.iter().all(|i| i.text.starts_with("nop") || i.text.starts_with("int3"))
}

/// The crtstuff helpers gcc links into every program are compiled without unwind tables:
/// they have symbols but no FDE, so a stripped program cannot know where they start.
const WITHOUT_FDE: &[&str] = &["deregister_tm_clones", "register_tm_clones", "__do_global_dtors_aux", "frame_dummy"];

fn check_stripped_against_unstripped(program: &Path) {
    let full = Program::open(program).unwrap();
    let copy = stripped(program);
    let bare = Program::open(&copy).unwrap();
    assert!(full.has_static_symbols && !bare.has_static_symbols);
    let fdes = readelf_fdes(program);
    let module = copy.file_name().unwrap().to_str().unwrap().to_string();
    let bare_by_start: BTreeMap<u64, &FunctionSymbol> = text_functions(&bare).into_iter().map(|f| (f.address, f)).collect();
    let full_starts: BTreeSet<u64> = text_functions(&full).iter().map(|f| f.address).collect();
    let mut matched = 0;
    for f in text_functions(&full) {
        match fdes.get(&f.address) {
            Some(&end) => {
                let g = bare_by_start.get(&f.address).unwrap_or_else(|| panic!("{}: {} has an FDE but no stripped function", program.display(), f.name));
                assert_eq!((g.size, g.source), (end - f.address, SymbolSource::EhFrame), "{}", f.name);
                assert_eq!(g.name, format!("{module}+0x{:x}", f.address));
                assert_eq!(g.size, f.size, "{}: FDE range and symbol size", f.name);
                matched += 1;
            }
            None => assert!(WITHOUT_FDE.contains(&f.name.as_str()), "{}: {} has no FDE", program.display(), f.name),
        }
    }
    // Every stripped function starts where a symbol starts: none is invented, and the gaps
    // between FDE functions were alignment padding, not functions.
    for g in bare_by_start.values() {
        assert!(full_starts.contains(&g.address), "{}: {} starts at no symbol", program.display(), g.name);
        assert!(!g.name.starts_with('.'), "{}", g.name);
        assert!(!is_padding(&FunctionCfg::build(&bare, g)), "{} is only padding", g.name);
    }
    assert!(matched >= 3, "{}: only {matched} functions with FDEs", program.display());
    let _ = std::fs::remove_file(copy);
}

#[test]
fn stripped_functions_from_eh_frame_equal_the_unstripped_starts() {
    check_stripped_against_unstripped(&compile("interp", &["-O2", "-g"]));
    let dir = test_build_dir();
    for example in ["events", "sorting", "seed000"] {
        check_stripped_against_unstripped(&build_with(example, &dir, &["-O2"]).unwrap());
    }
}

#[test]
fn plt_stubs_are_named_as_objdump_names_them() {
    let program = compile("interp", &["-O2", "-g"]);
    let copy = stripped(&program);
    let mut programs = vec![program, copy.clone()];
    if Path::new(GZIP).exists() {
        programs.push(GZIP.into());
    }
    for p in &programs {
        let ours: BTreeMap<u64, String> = Program::open(p)
            .unwrap()
            .functions()
            .iter()
            .filter(|f| f.source == SymbolSource::Plt)
            .map(|f| (f.address, f.name.clone()))
            .collect();
        assert_eq!(ours, objdump_plt(p), "{}", p.display());
        assert!(ours.values().any(|n| n == "printf@plt" || n == "free@plt"), "{}: {ours:?}", p.display());
    }
    let _ = std::fs::remove_file(copy);
}

#[test]
fn debians_stripped_gzip_is_split_by_its_fdes() {
    if !Path::new(GZIP).exists() {
        kansoku_examples::skip(kansoku_examples::Missing::Installed { package: "gzip" }, format!("{GZIP} is not installed"));
        return;
    }
    let gzip = Program::open(GZIP).unwrap();
    assert!(!gzip.has_static_symbols, "Debian's gzip is stripped");
    let fdes = readelf_fdes(Path::new(GZIP));
    let mut from_fdes = 0;
    for (&start, &end) in &fdes {
        if gzip.section_name(start).is_some_and(|s| s.starts_with(".plt")) {
            continue; // the linker's FDEs for the PLT cover many named stubs
        }
        let f = gzip.function_at(start).unwrap();
        assert_eq!((f.address, f.size, f.source), (start, end - start, SymbolSource::EhFrame));
        assert_eq!(f.name, format!("gzip+0x{start:x}"));
        from_fdes += 1;
    }
    let text = text_functions(&gzip);
    let largest = text.iter().map(|f| f.size).max().unwrap();
    eprintln!("gzip: {} FDEs, {from_fdes} functions from them, {} in .text, largest {largest} bytes", fdes.len(), text.len());
    assert!(from_fdes + 2 >= fdes.len() && from_fdes > 100);
    assert!(largest < 8192, "no 57 KB pseudo function any more: {largest}");
    for f in gzip.functions() {
        assert!(!f.name.starts_with('.'), "{}", f.name);
        assert!(!is_padding(&FunctionCfg::build(&gzip, f)), "{} is only padding", f.name);
    }
}

/// How deep each loop is nested (number of loops whose body holds its header), sorted.
fn loop_nesting(cfg: &FunctionCfg) -> Vec<usize> {
    let mut depths: Vec<usize> = cfg.loops.iter().map(|l| cfg.loops.iter().filter(|o| o.blocks.contains(&l.header)).count()).collect();
    depths.sort();
    depths
}

/// `run` of interp.c built by `compiler` with `flags`.
fn run_cfg(compiler: &str, flags: &[&str]) -> FunctionCfg {
    let program = Program::open(compile_with(compiler, "interp", flags)).unwrap();
    FunctionCfg::build(&program, program.function_named("run").unwrap())
}

#[test]
fn switch_table_loops_equal_those_of_the_compare_tree_build() {
    // gcc and clang at every optimisation level, position-independent (4-byte relative
    // entries) and not (8-byte absolute entries): each table build against the same
    // compiler's -fno-jump-tables build. `-no-pie` alone only links position-independent
    // code at a fixed address; with `-fno-pie` gcc jumps through the table itself,
    // `jmp [rax*8+T]` (Debian's python3.11 is built so; issue 43: it panicked).
    let builds: [&[&str]; 7] = [&["-O0"], &["-O1"], &["-O2"], &["-Os"], &["-O3"], &["-O2", "-no-pie"], &["-O2", "-fno-pie", "-no-pie"]];
    for compiler in ["cc", "clang"] {
        for build in builds {
            let flags: Vec<&str> = build.iter().chain(&["-g"]).copied().collect();
            let table = run_cfg(compiler, &flags);
            let tree = run_cfg(compiler, &[&flags[..], &["-fno-jump-tables"]].concat());
            let what = format!("{compiler} {flags:?}");
            assert_eq!(table.jump_tables.len(), 1, "{what}: {:#x?}", table.unresolved_jumps);
            assert!(table.unresolved_jumps.is_empty() && tree.jump_tables.is_empty() && tree.unresolved_jumps.is_empty(), "{what}");
            // Nine opcodes, one entry each; every target starts a block of `run`.
            assert_eq!(table.jump_tables[0].entries, 9, "{what}");
            for t in &table.jump_tables[0].targets {
                assert!(table.block_starting_at(*t).is_some(), "{what}: target {t:#x} starts a block");
            }
            assert_eq!(table.loops.len(), tree.loops.len(), "{what}: table {:?}\ntree {:?}", table.loops, tree.loops);
            assert_eq!(loop_nesting(&table), loop_nesting(&tree), "{what}");
            assert!(table.loops.len() >= 2, "{what}: the dispatch loop and the SUM loop inside it");
        }
    }
    // And gcc's optimised build against its debug build (clang -O2 vectorises the SUM loop
    // into two, so only gcc keeps the same loops at both levels).
    let (optimised, debug) = (run_cfg("cc", &["-O2", "-g"]), run_cfg("cc", &["-O0", "-g"]));
    assert_eq!(loop_nesting(&optimised), loop_nesting(&debug));
}

#[test]
fn inflate_of_zlib_has_its_loops() {
    if !Path::new(LIBZ).exists() {
        kansoku_examples::skip(kansoku_examples::Missing::Installed { package: "zlib1g-dev" }, format!("{LIBZ} is not installed"));
        return;
    }
    let libz = Program::open(LIBZ).unwrap();
    let cfg = FunctionCfg::build(&libz, libz.function_named("inflate").unwrap());
    eprintln!("inflate: {} blocks, {} loops, {} tables", cfg.blocks.len(), cfg.loops.len(), cfg.jump_tables.len());
    assert!(!cfg.jump_tables.is_empty() && cfg.unresolved_jumps.is_empty(), "{:#x?}", cfg.unresolved_jumps);
    for t in cfg.jump_tables.iter().flat_map(|t| &t.targets) {
        assert!(cfg.block_starting_at(*t).is_some(), "target {t:#x} starts a block");
    }
    assert!(!cfg.loops.is_empty());
}

/// Every jump of the compilers' table shape (`movsxd r, [b+i*4]; add r, b; jmp r`) in
/// Debian's gzip, libz and liblzma is followed; what stays unresolved is some other
/// indirect jump (calls through function pointers, crtstuff's TM-clone hooks).
#[test]
fn every_table_shaped_jump_in_debian_libraries_is_followed() {
    let lzma = "/usr/lib/x86_64-linux-gnu/liblzma.so.5";
    for path in [GZIP, LIBZ, lzma].into_iter().filter(|p| Path::new(p).exists()) {
        let program = Program::open(path).unwrap();
        let (mut tables, mut others) = (0, 0);
        for f in program.functions() {
            let cfg = FunctionCfg::build(&program, f);
            for &jump in &cfg.unresolved_jumps {
                let j = cfg.instruction_index(jump).unwrap();
                let before: Vec<&str> = cfg.instructions[j.saturating_sub(2)..j].iter().map(|i| i.text.as_str()).collect();
                let table_shaped = before.len() == 2 && before[0].starts_with("movsxd") && before[1].starts_with("add");
                assert!(!table_shaped, "{path}: {} at {jump:#x} after {before:?}", f.name);
                others += 1;
            }
            for t in &cfg.jump_tables {
                assert!(t.targets.iter().all(|&a| cfg.block_starting_at(a).is_some()), "{path}: {} table at {:#x}", f.name, t.jump);
            }
            tables += cfg.jump_tables.len();
        }
        eprintln!("{path}: {tables} jump tables followed, {others} other indirect jumps");
        assert!(tables > 0);
    }
}

/// A program stripped as distributions strip it, its symbols kept in a debug file that
/// `.gnu_debuglink` names (binutils' recipe): without a build id, the file is found
/// beside the program and checked by the link's CRC-32, and gives back the unstripped
/// program's functions; a debug file that does not match (CRC) is not used.
#[test]
fn symbols_come_back_from_the_gnu_debuglink_file() {
    let full = compile("interp", &["-O2", "-g", "-Wl,--build-id=none"]);
    let dir = full.parent().unwrap().join(format!("debuglink-{}", unique()));
    std::fs::create_dir_all(&dir).unwrap();
    let (program, debug) = (dir.join("interp"), dir.join("interp.debug"));
    let run = |args: &[&std::ffi::OsStr]| assert!(Command::new("objcopy").args(args).status().expect("objcopy runs").success());
    run(&["--only-keep-debug".as_ref(), full.as_os_str(), debug.as_os_str()]);
    run(&["--strip-all".as_ref(), "--add-gnu-debuglink".as_ref(), debug.as_os_str(), full.as_os_str(), program.as_os_str()]);
    let unstripped = Program::open(&full).unwrap();
    let p = Program::open(&program).unwrap();
    assert!(!p.has_static_symbols && p.build_id.is_none());
    assert_eq!(p.debug_file.as_deref(), Some(debug.as_path()));
    let names = |p: &Program| text_functions(p).iter().map(|f| (f.address, f.name.clone())).collect::<Vec<_>>();
    assert_eq!(names(&p), names(&unstripped));
    assert!(p.function_named("run").is_ok() && p.source_line(p.function_named("run").unwrap().address).is_some());
    // Another build's debug file under the linked name: its CRC differs, it is not read.
    let other = compile("interp", &["-O1", "-g", "-Wl,--build-id=none"]);
    run(&["--only-keep-debug".as_ref(), other.as_os_str(), debug.as_os_str()]);
    let p = Program::open(&program).unwrap();
    assert!(p.debug_file.is_none() && p.function_named("run").is_err());
    std::fs::remove_dir_all(&dir).unwrap();
}
