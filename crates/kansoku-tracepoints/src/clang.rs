//! Compiling C trace-point programs to wasm with the system clang.

use crate::error::{Result, TpError};
use std::path::{Path, PathBuf};
use std::process::Command;

/// Directory of `kansoku_trace.h`.
pub(crate) fn include_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("include")
}

/// Directory of the bundled example programs.
pub fn examples_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("examples").join("c")
}

/// The bundled example programs, sorted by name.
pub fn example_sources() -> Result<Vec<PathBuf>> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(examples_dir())?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "c"))
        .collect();
    v.sort();
    Ok(v)
}

/// The clang command line used for trace-point programs.
pub(crate) fn clang_args(src: &Path, out: &Path) -> Vec<String> {
    vec![
        "--target=wasm32".into(),
        "-O2".into(),
        "-nostdlib".into(),
        "-Wl,--no-entry".into(),
        "-Wl,--export=run".into(),
        format!("-I{}", include_dir().display()),
        "-o".into(),
        out.display().to_string(),
        src.display().to_string(),
    ]
}

/// Compiles `src` to `out` with `clang --target=wasm32 -O2`.
pub fn compile_c(src: &Path, out: &Path) -> Result<()> {
    let clang = std::env::var("KANSOKU_CLANG").unwrap_or_else(|_| "clang".into());
    let res = Command::new(&clang).args(clang_args(src, out)).output().map_err(|e| {
        TpError::Compiler(format!(
            "cannot start `{clang}` ({e}); install clang and lld with scripts/setup"
        ))
    })?;
    if !res.status.success() {
        return Err(TpError::Compiler(format!(
            "{clang} failed on {}:\n{}\n(clang and lld, which provides wasm-ld, are installed by scripts/setup)",
            src.display(),
            String::from_utf8_lossy(&res.stderr)
        )));
    }
    Ok(())
}
