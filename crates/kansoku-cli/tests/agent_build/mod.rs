//! The probe agent for the tests that run programs under it (agent_cli.rs, perfetto_cli.rs,
//! agent_hostile_cli.rs, agent_later_cli.rs), and callgrind's call counts to set its
//! counts against.
#![allow(dead_code)] // each test file uses a part

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;

/// The agent, built optimised as users get it (a debug build would time its own slowness),
/// or the one `KANSOKU_AGENT` names (a build of one's own, while the tree's does not build).
pub fn agent() -> &'static Path {
    static AGENT: OnceLock<PathBuf> = OnceLock::new();
    AGENT.get_or_init(|| {
        if let Some(named) = std::env::var_os("KANSOKU_AGENT") {
            return PathBuf::from(named);
        }
        let status = Command::new(env!("CARGO")).args(["build", "--release", "-p", "kansoku-agent"]).current_dir(env!("CARGO_MANIFEST_DIR")).status().unwrap();
        assert!(status.success(), "building kansoku-agent");
        let target = std::env::var_os("CARGO_TARGET_DIR").map(PathBuf::from).unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target"));
        let lib = target.join("release/libkansoku_agent.so");
        assert!(lib.is_file(), "{} after the build", lib.display());
        lib
    })
}

/// Calls per callee in a callgrind run of `program args` (stdin from `stdin`, else none),
/// its output file at `out_file`: `cfn=(id) name` (or `(id)` again) then `calls=N`.
pub fn callgrind_calls(program: &Path, args: &[&str], stdin: Option<&Path>, out_file: &Path) -> HashMap<String, u64> {
    let status = Command::new("valgrind")
        .args(["--tool=callgrind", "-q"])
        .arg(format!("--callgrind-out-file={}", out_file.display()))
        .arg(program)
        .args(args)
        .stdin(match stdin {
            Some(p) => Stdio::from(std::fs::File::open(p).unwrap()),
            None => Stdio::null(),
        })
        .stdout(Stdio::null())
        .status()
        .unwrap();
    assert!(status.success());
    let text = std::fs::read_to_string(out_file).unwrap();
    let mut names: HashMap<String, String> = HashMap::new();
    let mut callee = String::new();
    let mut calls: HashMap<String, u64> = HashMap::new();
    // a name is given once, at the first `fn=` or `cfn=` of its id, then the id alone
    let mut name_of = |rest: &str| match rest.split_once(") ") {
        Some((id, name)) => {
            names.insert(format!("{id})"), name.to_string());
            name.to_string()
        }
        None => names.get(rest).cloned().unwrap_or_else(|| rest.to_string()),
    };
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("fn=") {
            name_of(rest);
        } else if let Some(rest) = line.strip_prefix("cfn=") {
            callee = name_of(rest);
        } else if let Some(rest) = line.strip_prefix("calls=") {
            let n: u64 = rest.split_whitespace().next().unwrap().parse().unwrap();
            *calls.entry(callee.clone()).or_insert(0) += n;
        }
    }
    calls
}
