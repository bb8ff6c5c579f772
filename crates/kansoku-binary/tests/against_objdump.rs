//! Symbols, instructions and blocks of real compiled programs, checked against what
//! `objdump -d` (GNU binutils) shows for them.

use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;

use kansoku_binary::{FunctionCfg, InstructionKind, Program};
use kansoku_examples::{build, build_with, test_build_dir};

/// (address, mnemonic, direct target) of each instruction of `function`, from objdump.
fn objdump_function(program: &Path, function: &str) -> Vec<(u64, String, Option<u64>)> {
    let out = Command::new("objdump")
        .args(["-d", "--no-show-raw-insn", "-M", "intel"])
        .arg(format!("--disassemble={function}"))
        .arg(program)
        .output()
        .expect("objdump runs (scripts/setup installs binutils)");
    let text = String::from_utf8_lossy(&out.stdout);
    let mut rows = Vec::new();
    for line in text.lines() {
        let Some((addr, rest)) = line.trim_start().split_once(":\t") else { continue };
        let Ok(addr) = u64::from_str_radix(addr.trim(), 16) else { continue };
        let mut words = rest.split_whitespace();
        let mut mnemonic = words.next().unwrap_or("").to_string();
        if ["bnd", "notrack", "rep", "repz", "repnz", "lock", "data16", "cs"].contains(&mnemonic.as_str()) {
            mnemonic = words.next().unwrap_or("").to_string();
        }
        let target = words.next().and_then(|w| u64::from_str_radix(w, 16).ok()).filter(|_| mnemonic.starts_with('j') || mnemonic == "call");
        rows.push((addr, mnemonic, target));
    }
    rows
}

/// Block leaders derived independently from objdump's listing with the rule of the issue.
fn objdump_leaders(rows: &[(u64, String, Option<u64>)]) -> BTreeSet<u64> {
    let lo = rows[0].0;
    let hi = rows.last().unwrap().0;
    let mut leaders = BTreeSet::from([lo]);
    for (i, (_, m, t)) in rows.iter().enumerate() {
        let transfer = m.starts_with('j') || m == "call" || m.starts_with("ret");
        if m.starts_with('j') {
            if let Some(t) = t.filter(|t| (lo..=hi).contains(t)) {
                leaders.insert(t);
            }
        }
        if transfer {
            if let Some(next) = rows.get(i + 1) {
                leaders.insert(next.0);
            }
        }
    }
    leaders
}

fn check_function(program_path: &Path, name: &str) -> FunctionCfg {
    let program = Program::open(program_path).unwrap();
    let f = program.function_named(name).unwrap();
    let cfg = FunctionCfg::build(&program, f);
    let expected = objdump_function(program_path, name);
    assert!(!expected.is_empty(), "objdump shows nothing for {name}");
    assert_eq!(f.address, expected[0].0, "{name}: entry address");
    let ours: Vec<u64> = cfg.instructions.iter().map(|i| i.address).collect();
    let theirs: Vec<u64> = expected.iter().map(|r| r.0).collect();
    assert_eq!(ours, theirs, "{name}: instruction addresses");
    for (ins, (addr, mnemonic, target)) in cfg.instructions.iter().zip(&expected) {
        let our_mnemonic = ins.text.split_whitespace().next().unwrap_or("");
        let ok = our_mnemonic == mnemonic || mnemonic.starts_with(our_mnemonic) || our_mnemonic.starts_with(mnemonic.as_str());
        assert!(ok, "{name}@{addr:x}: ours '{}' objdump '{mnemonic}'", ins.text);
        if target.is_some() {
            assert_eq!(ins.target, *target, "{name}@{addr:x}: branch target");
        }
    }
    let starts: BTreeSet<u64> = cfg.blocks.iter().map(|b| b.start).collect();
    assert_eq!(starts, objdump_leaders(&expected), "{name}: block leaders");
    cfg
}

#[test]
fn functions_and_blocks_match_objdump() {
    let dir = test_build_dir();
    for (example, functions) in [
        ("seed000", &["func_A", "func_B", "func_M", "main"][..]),
        ("paths", &["walk", "main"][..]),
        ("matrix", &["multiply"][..]),
        ("sorting", &["insertion_sort", "main"][..]),
        ("recursion", &["fib", "work"][..]),
    ] {
        let p = build(example, &dir).unwrap();
        for f in functions {
            check_function(&p, f);
        }
    }
}

#[test]
fn seed000_shape() {
    let p = build("seed000", &test_build_dir()).unwrap();
    let program = Program::open(&p).unwrap();
    assert!(program.is_pie);
    assert!(program.build_id.is_some());
    let m = FunctionCfg::build(&program, program.function_named("func_M").unwrap());
    let calls: Vec<u64> = m.instructions.iter().filter(|i| i.kind == InstructionKind::Call).filter_map(|i| i.target).collect();
    let names: Vec<&str> = calls.iter().map(|&t| program.function_at(t).unwrap().name.as_str()).collect();
    assert_eq!(names, vec!["func_A", "func_B", "func_B", "func_B", "func_C"]);
    // Every call ends a block: entry+call A, then one block per following call, then pop/ret.
    assert_eq!(m.blocks.len(), 6);
    assert!(m.loops.is_empty());
    // main's loop around the call of func_M is found from dominators.
    let main = FunctionCfg::build(&program, program.function_named("main").unwrap());
    assert_eq!(main.loops.len(), 1, "{:#?}", main.loops);
    let header = &main.blocks[main.loops[0].header as usize];
    let first = &main.instructions[header.first_instruction];
    assert_eq!(first.kind, InstructionKind::Call);
    assert_eq!(program.function_at(first.target.unwrap()).unwrap().name, "func_M");
    // DWARF lines point into the source.
    let line = program.source_line(program.function_named("func_M").unwrap().address).unwrap();
    assert!(line.file.ends_with("seed000.c"), "{line:?}");
    assert_eq!(line.line, 12);
}

#[test]
fn nested_loops_of_matrix_multiply() {
    let p = build("matrix", &test_build_dir()).unwrap();
    let program = Program::open(&p).unwrap();
    let cfg = FunctionCfg::build(&program, program.function_named("multiply").unwrap());
    assert_eq!(cfg.loops.len(), 3, "three nested loops: {:#?}", cfg.loops);
    // Each loop's body contains the next inner one.
    let mut sizes: Vec<usize> = cfg.loops.iter().map(|l| l.blocks.len()).collect();
    sizes.sort();
    assert!(sizes[0] < sizes[1] && sizes[1] < sizes[2], "{sizes:?}");
}

#[test]
fn non_pie_program() {
    let p = build_with("seed000", &test_build_dir(), &["-no-pie"]).unwrap();
    let program = Program::open(&p).unwrap();
    assert!(!program.is_pie);
    let f = program.function_named("func_M").unwrap();
    assert!(f.address >= 0x400000, "{:x}", f.address);
    check_function(&p, "func_M");
}

#[test]
fn stripped_program_names_functions_by_module_and_address() {
    let dir = test_build_dir();
    let p = build("seed000", &dir).unwrap();
    let stripped = dir.join("seed000-stripped");
    let status = Command::new("strip").arg("-o").arg(&stripped).arg(&p).status().unwrap();
    assert!(status.success());
    let full = Program::open(&p).unwrap();
    let func_m = full.function_named("func_M").unwrap().address;
    let program = Program::open(&stripped).unwrap();
    assert!(!program.has_static_symbols);
    let covering = program.function_at(func_m).expect("func_M's address is covered");
    // Its .eh_frame entry gives func_M's exact start, named as perf names unnamed code.
    assert_eq!(covering.address, func_m);
    assert_eq!(covering.name, format!("seed000-stripped+0x{func_m:x}"));
    assert!(program.functions().iter().all(|f| !f.name.starts_with(".text")), "no bare section names");
}

#[test]
fn non_elf_path_is_a_clear_error() {
    let dir = test_build_dir();
    build("seed000", &dir).unwrap();
    let err = Program::open(dir.join("seed000.c")).unwrap_err().to_string();
    assert!(err.contains("seed000.c") && err.contains("not an ELF program"), "{err}");
    let err = Program::open(dir.join("does-not-exist")).unwrap_err().to_string();
    assert!(err.contains("does-not-exist"), "{err}");
}

#[test]
fn shared_library_functions() {
    // libc is a shared library with full dynamic symbols; printf must be found.
    let libc = ["/lib/x86_64-linux-gnu/libc.so.6", "/usr/lib/x86_64-linux-gnu/libc.so.6"]
        .into_iter()
        .find(|p| Path::new(p).exists())
        .expect("glibc present");
    let program = Program::open(libc).unwrap();
    let printf = program.function_named("printf").unwrap();
    assert!(printf.size > 0);
    let cfg = FunctionCfg::build(&program, printf);
    assert!(!cfg.blocks.is_empty());
}
