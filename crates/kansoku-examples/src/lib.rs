//! # kansoku-examples — bundled example programs
//!
//! Small C programs used by `kansoku demo`, by the tests of every room and by the
//! benchmarks. Their sources are compiled into this crate, so the demo works from an
//! installed binary; [`build`] writes a source next to its executable and compiles it with
//! the system C compiler (`$CC`, else `cc`), with debug information and without inlining
//! so functions and basic blocks stay recognisable.

#![deny(missing_docs)]

use std::path::{Path, PathBuf};
use std::process::Command;

/// One bundled program.
#[derive(Clone, Copy, Debug)]
pub struct Example {
    /// The name the program is built and found by (`seed000`).
    pub name: &'static str,
    /// Its C source, compiled in.
    pub source: &'static str,
    /// What the program shows, in one line.
    pub purpose: &'static str,
    /// Extra linker flags.
    pub libs: &'static [&'static str],
}

/// Every bundled program.
pub const EXAMPLES: &[Example] = &[
    Example {
        name: "seed000",
        source: include_str!("../c/seed000.c"),
        purpose: "seed 000: func_M calls func_A, func_B x3, func_C; main repeats func_M",
        libs: &[],
    },
    Example {
        name: "paths",
        source: include_str!("../c/paths.c"),
        purpose: "seed 003 figure 2: A -> B|C -> D -> A|E with a data-dependent branch",
        libs: &[],
    },
    Example {
        name: "matrix",
        source: include_str!("../c/matrix.c"),
        purpose: "nested loops: 8x8 matrix multiply",
        libs: &[],
    },
    Example {
        name: "recursion",
        source: include_str!("../c/recursion.c"),
        purpose: "calls and returns: recursive Fibonacci",
        libs: &[],
    },
    Example {
        name: "sorting",
        source: include_str!("../c/sorting.c"),
        purpose: "data-dependent branches: insertion sort of fixed pseudo-random data",
        libs: &[],
    },
    Example {
        name: "crash",
        source: include_str!("../c/crash.c"),
        purpose: "runs a little, then dereferences a null pointer",
        libs: &[],
    },
    Example {
        name: "threads",
        source: include_str!("../c/threads.c"),
        purpose: "two threads running the same loop",
        libs: &["-pthread"],
    },
    Example {
        name: "workload",
        source: include_str!("../c/workload.c"),
        purpose: "seed 001: a CPU-bound job (cpu SECONDS WORKERS) and an I/O-bound job (io SECONDS FILE)",
        libs: &[],
    },
    Example {
        name: "events",
        source: include_str!("../c/events.c"),
        purpose: "seed 001 event mode: spin(ns) timing itself, leaf x3, recurse(4), 1000 functions p0..p999 per round",
        libs: &[],
    },
    Example {
        name: "wave",
        source: include_str!("../c/wave.c"),
        purpose: "seed 001 waveform: a 51-instruction loop (wave loop N) and a two-phase job (wave phases N)",
        libs: &[],
    },
];

/// Flags every example is compiled with: debug lines for `file:line`, no inlining and no
/// sibling calls so every call in the source stays a call in the binary.
pub const CFLAGS: &[&str] = &["-O1", "-g", "-fno-inline", "-fno-optimize-sibling-calls", "-fno-omit-frame-pointer"];

/// Why a program could not be built.
#[derive(Debug, thiserror::Error)]
#[allow(missing_docs)] // the fields are what the messages say
pub enum BuildError {
    /// No bundled program has this name (the known names follow).
    #[error("no bundled example named '{0}' (known: {1})")]
    Unknown(String, String),
    /// The source or the program could not be written.
    #[error("cannot write {path}: {cause}")]
    Write { path: PathBuf, cause: std::io::Error },
    /// The C compiler could not be started.
    #[error("cannot run the C compiler '{compiler}': {cause}; install gcc (scripts/setup does) or set CC")]
    NoCompiler { compiler: String, cause: std::io::Error },
    /// The compiler refused the source.
    #[error("compiling {path} failed:\n{stderr}")]
    Compile { path: PathBuf, stderr: String },
}

/// The bundled program named `name`.
pub fn find(name: &str) -> Result<&'static Example, BuildError> {
    EXAMPLES.iter().find(|e| e.name == name).ok_or_else(|| {
        BuildError::Unknown(name.to_string(), EXAMPLES.iter().map(|e| e.name).collect::<Vec<_>>().join(", "))
    })
}

/// Writes `NAME.c` into `out_dir` and compiles it to `out_dir/NAME`. Returns the program
/// path. Recompiles only when the source changed, so tests can share builds.
pub fn build(name: &str, out_dir: &Path) -> Result<PathBuf, BuildError> {
    build_with(name, out_dir, &[])
}

/// Like [`build`] with extra compiler flags (the executable is named after them too).
pub fn build_with(name: &str, out_dir: &Path, extra_flags: &[&str]) -> Result<PathBuf, BuildError> {
    let example = find(name)?;
    let suffix: String = extra_flags.iter().map(|f| f.trim_start_matches('-').replace(['=', '/'], "_")).collect::<Vec<_>>().join("-");
    let stem = if suffix.is_empty() { name.to_string() } else { format!("{name}-{suffix}") };
    compile(&stem, example.source, out_dir, &[CFLAGS, extra_flags, example.libs].concat(), None)
}

/// Compiles a C program that is not one of the bundled examples (a test's own program,
/// `source` as text) to `out_dir/STEM`, with exactly `flags` (nothing of [`CFLAGS`] unless
/// given; libraries such as `-lz` last). Built as [`build`] builds: once per source and
/// flags (the flags are written into the kept `STEM.c` as a comment, so a change of either
/// rebuilds), atomically, so the tests of one run share it.
pub fn build_source(stem: &str, source: &str, out_dir: &Path, flags: &[&str]) -> Result<PathBuf, BuildError> {
    let recorded = format!("{source}\n/* kansoku-examples: built with {flags:?} */\n");
    compile(stem, &recorded, out_dir, flags, None)
}

/// [`build_source`] by a named compiler (`"clang"`; `"cc"`, Debian's gcc, even where `$CC`
/// names another), for a test whose check is about what one compiler emits (clang's XRay
/// sleds, gcc's and clang's jump tables, callgrind's counts of gcc's code). The compiler is recorded beside the flags, so a change of either
/// rebuilds; give each compiler's build a stem of its own.
pub fn build_source_by(compiler: &str, stem: &str, source: &str, out_dir: &Path, flags: &[&str]) -> Result<PathBuf, BuildError> {
    let recorded = format!("{source}\n/* kansoku-examples: built by {compiler} with {flags:?} */\n");
    compile(stem, &recorded, out_dir, flags, Some(compiler))
}

/// Compiles `text` into `out_dir/STEM` with `args` (compiler flags and libraries) by
/// `compiler` (else `$CC`, else `cc`), unless `STEM.c` there already holds `text` and the
/// program exists.
fn compile(stem: &str, text: &str, out_dir: &Path, args: &[&str], compiler: Option<&str>) -> Result<PathBuf, BuildError> {
    let (flags, libs): (Vec<&str>, Vec<&str>) = args.iter().partition(|a| !a.starts_with("-l"));
    std::fs::create_dir_all(out_dir).map_err(|source| BuildError::Write { path: out_dir.into(), cause: source })?;
    let source = out_dir.join(format!("{stem}.c"));
    let program = out_dir.join(stem);
    let unchanged = std::fs::read_to_string(&source).map(|s| s == text).unwrap_or(false);
    if unchanged && program.exists() {
        return Ok(program);
    }
    // Compile in a private directory and rename into place, so parallel tests never see
    // half a file; the prefix map makes DWARF name the final source path.
    // Unique per process *and* per call: test threads of one process build concurrently.
    static BUILDS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let call = BUILDS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let private = out_dir.join(format!(".build-{stem}-{}-{call}", std::process::id()));
    std::fs::create_dir_all(&private).map_err(|source| BuildError::Write { path: private.clone(), cause: source })?;
    let tmp_source = private.join(format!("{stem}.c"));
    std::fs::write(&tmp_source, text).map_err(|source| BuildError::Write { path: tmp_source.clone(), cause: source })?;
    let tmp_program = private.join(stem);
    let compiler = compiler.map(str::to_string).unwrap_or_else(|| std::env::var("CC").unwrap_or_else(|_| "cc".to_string()));
    let output = Command::new(&compiler)
        .args(&flags)
        .arg(format!("-fdebug-prefix-map={}={}", private.display(), out_dir.display()))
        .arg("-o")
        .arg(&tmp_program)
        .arg(&tmp_source)
        .args(&libs)
        .output()
        .map_err(|source| BuildError::NoCompiler { compiler: compiler.clone(), cause: source })?;
    if !output.status.success() {
        let _ = std::fs::remove_dir_all(&private);
        return Err(BuildError::Compile { path: source, stderr: String::from_utf8_lossy(&output.stderr).into_owned() });
    }
    std::fs::rename(&tmp_program, &program).map_err(|source| BuildError::Write { path: program.clone(), cause: source })?;
    std::fs::rename(&tmp_source, &source).map_err(|source_err| BuildError::Write { path: source.clone(), cause: source_err })?;
    let _ = std::fs::remove_dir_all(&private);
    Ok(program)
}

/// A shared build directory for tests: `target/kansoku-examples` under the workspace.
pub fn test_build_dir() -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target"));
    target.join("kansoku-examples")
}

/// Why a test cannot make its check on this machine: said to whoever runs the tests, never
/// a silent pass.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Missing {
    /// A program or file that `scripts/setup` installs (the Debian package named). Under
    /// `scripts/test`, which sets `KANSOKU_TEST_STRICT=1` after running the setup, its
    /// absence fails the test: the setup is what is broken.
    Installed {
        /// The Debian package that provides it.
        package: &'static str,
    },
    /// What this machine or kernel does not offer (a hardware PMU, uprobes, permission to
    /// sample) or a run that by chance gave nothing to check (a run shorter than one
    /// cpu-clock tick): never a failure, always said.
    Machine,
}

/// Says that the calling test skips its check (or the rest of it) and why, on stderr and
/// in `target/kansoku-skipped.txt` (one line per skip: the test's name and the reason),
/// which `scripts/test` prints after the run, so a skip reaches the runner's own summary
/// instead of counting as a pass unseen. Panics instead when `missing` is something
/// `scripts/setup` installs and `KANSOKU_TEST_STRICT` is set.
pub fn skip(missing: Missing, reason: impl std::fmt::Display) {
    // libtest names the thread after the test; a runner that gives each test a process of
    // its own (nextest) may run it on the main thread, and names it in the environment.
    let test = match std::thread::current().name() {
        Some(name) if name != "main" => name.to_string(),
        _ => std::env::var("NEXTEST_TEST_NAME").unwrap_or_else(|_| "a test".to_string()),
    };
    if let Missing::Installed { package } = missing {
        if std::env::var_os("KANSOKU_TEST_STRICT").is_some() {
            panic!("{test}: {reason}; `scripts/setup --tests` (which scripts/test runs) installs {package}, so the setup did not do its work");
        }
    }
    eprintln!("skipped: {reason}");
    let log = skipped_log();
    let line = format!("{test}: {}\n", reason.to_string().replace('\n', " "));
    // One write per line in append mode: lines of tests running in parallel do not mix.
    let appended = std::fs::OpenOptions::new().create(true).append(true).open(&log).and_then(|mut f| std::io::Write::write_all(&mut f, line.as_bytes()));
    if let Err(e) = appended {
        eprintln!("(could not note the skip in {}: {e})", log.display());
    }
}

/// Where [`skip`] notes the skips of a test run: `kansoku-skipped.txt` in the target
/// directory (`scripts/test` empties it before the run and prints it after).
pub fn skipped_log() -> PathBuf {
    test_build_dir().with_file_name("kansoku-skipped.txt")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_example_compiles_and_seed000_runs() {
        let dir = test_build_dir();
        for e in EXAMPLES {
            let p = build(e.name, &dir).unwrap();
            assert!(p.exists());
        }
        let status = Command::new(build("seed000", &dir).unwrap()).arg("3").status().unwrap();
        assert!(status.success());
    }

    #[test]
    fn unknown_example_is_named() {
        let err = find("nope").unwrap_err().to_string();
        assert!(err.contains("nope") && err.contains("seed000"), "{err}");
    }
}
