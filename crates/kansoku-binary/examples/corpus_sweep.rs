//! The corpus sweep of issue 43: every function of every x86-64 ELF file under the given
//! files or directories goes through what `kansoku inspect PROGRAM --function F` computes
//! (the program's functions, the function's decode, CFG, jump tables, dominators and
//! loops), counting panics (each one named), files that are not programs kansoku reads,
//! functions, unresolved indirect jumps and time.
//!
//! `cargo run --release -p kansoku-binary --example corpus_sweep -- [--timeout SECS] /usr/bin /usr/lib/x86_64-linux-gnu`
//! (`bench/corpus-sweep.sh` runs it over the distribution's directories).
//!
//! With `--timeout SECS` each file is swept in a child process (this program, `--one FILE`)
//! that is killed after SECS: a file that takes longer is named, with the function it was
//! in (a watchdog in the child names a function still running after a minute), and the
//! sweep goes on. The ten slowest files are listed at the end.

use std::collections::HashSet;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

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
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    // The panics are counted and named below, not printed as they happen.
    std::panic::set_hook(Box::new(|_| {}));
    if args.first().map(String::as_str) == Some("--one") && args.len() == 2 {
        return one(Path::new(&args[1]));
    }
    let mut timeout = None;
    if args.first().map(String::as_str) == Some("--timeout") && args.len() > 2 {
        timeout = Some(Duration::from_secs_f64(args[1].parse().expect("--timeout SECS")));
        args.drain(..2);
    }
    let roots: Vec<PathBuf> = args.iter().map(PathBuf::from).collect();
    if roots.is_empty() {
        eprintln!("usage: corpus_sweep [--timeout SECS] FILE_OR_DIR...");
        std::process::exit(2);
    }
    let mut seen = HashSet::new();
    let mut files = Vec::new();
    for r in &roots {
        collect(r, &mut seen, &mut files);
    }
    files.sort();
    let start = Instant::now();
    let mut t = Totals::default();
    let mut timed_out = 0u64;
    let mut times: Vec<(f64, String)> = Vec::new();
    for f in &files {
        let at = Instant::now();
        match timeout {
            None => sweep_file(f, &mut t),
            Some(limit) => {
                if !sweep_in_child(f, limit, &mut t) {
                    timed_out += 1;
                }
            }
        }
        let took = at.elapsed().as_secs_f64();
        if took > 5.0 {
            println!("slow file: {} {took:.1} s", f.display());
        }
        times.push((took, f.display().to_string()));
    }
    let secs = start.elapsed().as_secs_f64();
    println!(
        "ELF files {} (not read as x86-64 programs: {}), functions {}, jump tables {}, unresolved indirect jumps {}, panics {}, {:.1} s",
        t.files, t.not_read, t.functions, t.jump_tables, t.unresolved_jumps, t.panics, secs
    );
    println!("slowest function: {} in {}, {:.2} s", t.slowest.2, t.slowest.1, t.slowest.0);
    times.sort_by(|a, b| b.0.total_cmp(&a.0));
    println!("slowest files:");
    for (took, f) in times.iter().take(10) {
        println!("  {took:8.1} s  {f}");
    }
    if timeout.is_some() {
        println!("files past the timeout: {timed_out}");
    }
    if t.panics > 0 || timed_out > 0 {
        std::process::exit(1);
    }
}

/// `--one FILE`: the child's sweep of one file, its totals on the last line of stdout.
fn one(path: &Path) {
    let mut t = Totals::default();
    sweep_file(path, &mut t);
    println!("TOTALS {} {} {} {} {} {} {}\t{}\t{}", t.files, t.not_read, t.functions, t.jump_tables, t.unresolved_jumps, t.panics, t.slowest.0, t.slowest.1, t.slowest.2);
}

/// Sweeps `path` in a child killed after `limit`; false when it was (the file is named,
/// with what the child said of its slow function).
fn sweep_in_child(path: &Path, limit: Duration, t: &mut Totals) -> bool {
    let exe = std::env::current_exe().expect("the sweep's own path");
    let out = std::env::temp_dir().join(format!("corpus-sweep-{}.out", std::process::id()));
    let file = std::fs::File::create(&out).expect("a temporary file");
    let mut child = Command::new(exe).arg("--one").arg(path).stdout(file).stderr(Stdio::inherit()).spawn().expect("the sweep's child");
    let at = Instant::now();
    let mut nap = Duration::from_millis(1);
    let done = loop {
        if child.try_wait().expect("waiting for the child").is_some() {
            break true;
        }
        if at.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            break false;
        }
        std::thread::sleep(nap);
        nap = (nap * 2).min(Duration::from_millis(50));
    };
    let text = std::fs::read_to_string(&out).unwrap_or_default();
    let _ = std::fs::remove_file(&out);
    for line in text.lines().filter(|l| !l.starts_with("TOTALS ")) {
        println!("{line}");
    }
    if !done {
        t.files += 1;
        println!("TIMEOUT {} after {:.0} s", path.display(), limit.as_secs_f64());
        return false;
    }
    let Some(totals) = text.lines().find_map(|l| l.strip_prefix("TOTALS ")) else {
        t.files += 1;
        t.panics += 1;
        println!("PANIC {}: the child ended without its totals", path.display());
        return true;
    };
    let mut parts = totals.split('\t');
    let n: Vec<f64> = parts.next().unwrap_or("").split(' ').filter_map(|w| w.parse().ok()).collect();
    if let [files, not_read, functions, tables, unresolved, panics, slowest] = n[..] {
        t.files += files as u64;
        t.not_read += not_read as u64;
        t.functions += functions as u64;
        t.jump_tables += tables as u64;
        t.unresolved_jumps += unresolved as u64;
        t.panics += panics as u64;
        if slowest > t.slowest.0 {
            t.slowest = (slowest, parts.next().unwrap_or("").to_string(), parts.next().unwrap_or("").to_string());
        }
    }
    true
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
    // The watchdog names a function still running after a minute (a file past the
    // parent's timeout is killed without a word of its own).
    let current: Arc<Mutex<(Instant, String)>> = Arc::new(Mutex::new((Instant::now(), String::new())));
    let watched = Arc::downgrade(&current);
    std::thread::spawn(move || {
        let mut named = String::new();
        while let Some(current) = watched.upgrade() {
            let (since, name) = current.lock().map(|c| (c.0, c.1.clone())).unwrap_or((Instant::now(), String::new()));
            drop(current);
            if since.elapsed() > Duration::from_secs(60) && name != named {
                println!("still running after 60 s: {name}");
                let _ = std::io::stdout().flush();
                named = name;
            }
            std::thread::sleep(Duration::from_secs(1));
        }
    });
    for f in program.functions() {
        t.functions += 1;
        if let Ok(mut c) = current.lock() {
            *c = (Instant::now(), format!("{} 0x{:x} in {}", f.name, f.address, path.display()));
        }
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
