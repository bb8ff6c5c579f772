//! The one harness of the CLI tests: each test file says `mod harness;` and uses what it
//! needs. The binary under test is the one cargo built for this test run; example programs
//! come from `kansoku_examples` (built once per run into its shared directory, whatever
//! file asks), and a check a machine cannot make is skipped with
//! `kansoku_examples::skip`, which says so instead of passing silently.
#![allow(dead_code)] // each test file uses a part

use std::path::Path;
use std::process::{Command, Output};

#[allow(unused_imports)] // not every file skips
pub use kansoku_examples::{skip, Missing};

/// The `kansoku` command, to add arguments, stdin or environment to.
pub fn kansoku_cmd() -> Command {
    Command::new(env!("CARGO_BIN_EXE_kansoku"))
}

/// Runs `kansoku ARGS` to its end.
pub fn kansoku(args: &[&str]) -> Output {
    kansoku_cmd().args(args).output().expect("cannot start kansoku")
}

/// Runs `kansoku ARGS`, which must succeed; its stdout.
pub fn ok(args: &[&str]) -> String {
    let o = kansoku(args);
    assert!(o.status.success(), "kansoku {args:?} failed:\n{}", stderr(&o));
    String::from_utf8(o.stdout).expect("kansoku's stdout is UTF-8")
}

/// Runs `kansoku ARGS` (with `--json` among them), which must succeed; its stdout parsed.
pub fn ok_json(args: &[&str]) -> serde_json::Value {
    serde_json::from_str(&ok(args)).unwrap_or_else(|e| panic!("kansoku {args:?} printed no JSON: {e}"))
}

/// Runs `kansoku ARGS`, which must fail; its stderr.
pub fn fails(args: &[&str]) -> String {
    let o = kansoku(args);
    assert!(!o.status.success(), "kansoku {args:?} should fail");
    stderr(&o)
}

/// A finished command's stderr as text.
pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// A path as an argument.
pub fn s(p: &Path) -> &str {
    p.to_str().expect("test paths are UTF-8")
}
