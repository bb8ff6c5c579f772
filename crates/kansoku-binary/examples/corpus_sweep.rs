//! The corpus sweep of issue 43: every function of every x86-64 ELF file under the given
//! files or directories goes through what `kansoku inspect PROGRAM --function F` computes
//! (the program's functions, the function's decode, CFG, jump tables, dominators and
//! loops), counting panics (each one named), files that are not programs kansoku reads,
//! functions, unresolved indirect jumps and time.
//!
//! `cargo run --release -p kansoku-binary --example corpus_sweep -- /usr/bin /usr/lib/x86_64-linux-gnu`
//! (`bench/corpus-sweep.sh` runs it over the distribution's directories).

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::time::Instant;

use kansoku_binary::{FunctionCfg, Program};

#[derive(Default)]
struct Totals {
    files: u64,
    not_read: u64,
    functions: u64,
    jump_tables: u64,
    unresolved_jumps: u64,
    panics: u64,
    /// The slowest function: seconds, file, name.
    slowest: (f64, String, String),
}

fn main() {
    let roots: Vec<PathBuf> = std::env::args_os().skip(1).map(PathBuf::from).collect();
    if roots.is_empty() {
        eprintln!("usage: corpus_sweep FILE_OR_DIR...");
        std::process::exit(2);
    }
    // The panics are counted and named below, not printed as they happen.
    std::panic::set_hook(Box::new(|_| {}));
    let mut seen = HashSet::new();
    let mut files = Vec::new();
    for r in &roots {
        collect(r, &mut seen, &mut files);
    }
    files.sort();
    let start = Instant::now();
    let mut t = Totals::default();
    for f in &files {
        let at = Instant::now();
        sweep_file(f, &mut t);
        let took = at.elapsed().as_secs_f64();
        if took > 5.0 {
            println!("slow file: {} {took:.1} s", f.display());
        }
    }
    let secs = start.elapsed().as_secs_f64();
    println!(
        "ELF files {} (not read as x86-64 programs: {}), functions {}, jump tables {}, unresolved indirect jumps {}, panics {}, {:.1} s",
        t.files, t.not_read, t.functions, t.jump_tables, t.unresolved_jumps, t.panics, secs
    );
    println!("slowest function: {} in {}, {:.2} s", t.slowest.2, t.slowest.1, t.slowest.0);
    if t.panics > 0 {
        std::process::exit(1);
    }
}

/// Regular files starting with the ELF magic, each once (symbolic links and hard links
/// to one file are one file).
fn collect(path: &Path, seen: &mut HashSet<(u64, u64)>, out: &mut Vec<PathBuf>) {
    use std::os::unix::fs::MetadataExt;
    let Ok(meta) = std::fs::metadata(path) else { return };
    if meta.is_dir() {
        // Directories are followed only where they really are (not through links).
        if std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_symlink()) {
            return;
        }
        let Ok(entries) = std::fs::read_dir(path) else { return };
        for e in entries.flatten() {
            collect(&e.path(), seen, out);
        }
    } else if meta.is_file() && seen.insert((meta.dev(), meta.ino())) && is_elf(path) {
        out.push(path.to_path_buf());
    }
}

fn is_elf(path: &Path) -> bool {
    use std::io::Read;
    let mut magic = [0u8; 4];
    std::fs::File::open(path).and_then(|mut f| f.read_exact(&mut magic)).is_ok() && &magic == b"\x7fELF"
}

fn sweep_file(path: &Path, t: &mut Totals) {
    t.files += 1;
    let program = match std::panic::catch_unwind(|| Program::open(path)) {
        Ok(Ok(p)) => p,
        Ok(Err(_)) => {
            t.not_read += 1;
            return;
        }
        Err(cause) => {
            t.panics += 1;
            println!("PANIC {} opening: {}", path.display(), message(&cause));
            return;
        }
    };
    for f in program.functions() {
        t.functions += 1;
        let at = Instant::now();
        match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| FunctionCfg::build(&program, f))) {
            Ok(cfg) => {
                let took = at.elapsed().as_secs_f64();
                if took > t.slowest.0 {
                    t.slowest = (took, path.display().to_string(), f.name.clone());
                }
                t.jump_tables += cfg.jump_tables.len() as u64;
                t.unresolved_jumps += cfg.unresolved_jumps.len() as u64;
            }
            Err(cause) => {
                t.panics += 1;
                println!("PANIC {} {} 0x{:x}: {}", path.display(), f.name, f.address, message(&cause));
            }
        }
    }
}

fn message(cause: &Box<dyn std::any::Any + Send>) -> String {
    cause.downcast_ref::<&str>().map(|s| s.to_string()).or_else(|| cause.downcast_ref::<String>().cloned()).unwrap_or_default()
}
