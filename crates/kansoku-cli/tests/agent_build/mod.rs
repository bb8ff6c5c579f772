//! The probe agent for the tests that run programs under it (agent_cli.rs, perfetto_cli.rs).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

/// The agent, built optimised as users get it (a debug build would time its own slowness).
pub fn agent() -> &'static Path {
    static AGENT: OnceLock<PathBuf> = OnceLock::new();
    AGENT.get_or_init(|| {
        let status = Command::new(env!("CARGO")).args(["build", "--release", "-p", "kansoku-agent"]).current_dir(env!("CARGO_MANIFEST_DIR")).status().unwrap();
        assert!(status.success(), "building kansoku-agent");
        let target = std::env::var_os("CARGO_TARGET_DIR").map(PathBuf::from).unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target"));
        let lib = target.join("release/libkansoku_agent.so");
        assert!(lib.is_file(), "{} after the build", lib.display());
        lib
    })
}
