//! Builds kansoku's Valgrind tool (`valgrind-tool/kansoku_main.c`) when Valgrind's tool
//! headers and static libraries are installed (Debian: the `valgrind` package), and lays out
//! a `VALGRIND_LIB` directory for it: our `kansoku-amd64-linux` plus links to the stock files
//! of the installed Valgrind (`vgpreload_core-amd64-linux.so`, `default.supp`, ...).
//!
//! Never fails the build: when something is missing the crate gets the reason in
//! `KANSOKU_VALGRIND_TOOL_ERROR` instead of `KANSOKU_VALGRIND_TOOL_DIR`, and
//! `kansoku paths --source valgrind` falls back to Lackey and says why.

use std::path::{Path, PathBuf};
use std::process::Command;

const SOURCE: &str = "valgrind-tool/kansoku_main.c";

fn first_dir_with(candidates: &[&str], file: &str) -> Option<PathBuf> {
    candidates.iter().map(PathBuf::from).find(|d| d.join(file).exists())
}

fn run(cmd: &mut Command) -> Result<(), String> {
    let out = cmd.output().map_err(|e| format!("cannot run {:?}: {e}", cmd.get_program()))?;
    if out.status.success() {
        Ok(())
    } else {
        let err = String::from_utf8_lossy(&out.stderr);
        Err(format!("{:?} failed: {}", cmd.get_program(), err.lines().take(6).collect::<Vec<_>>().join(" | ")))
    }
}

fn build(out: &Path) -> Result<PathBuf, String> {
    let target = std::env::var("TARGET").unwrap_or_default();
    if target != "x86_64-unknown-linux-gnu" {
        return Err(format!("kansoku's Valgrind tool is built for x86_64 Linux only (target {target})"));
    }
    let include = first_dir_with(&["/usr/include/valgrind", "/usr/local/include/valgrind"], "pub_tool_tooliface.h")
        .ok_or("Valgrind's tool headers (pub_tool_tooliface.h) are not installed (Debian: apt-get install valgrind)")?;
    let static_libs = first_dir_with(
        &["/usr/lib/x86_64-linux-gnu/valgrind", "/usr/lib/valgrind", "/usr/libexec/valgrind", "/usr/local/lib/valgrind", "/usr/local/libexec/valgrind"],
        "libcoregrind-amd64-linux.a",
    )
    .ok_or("Valgrind's static libraries (libcoregrind-amd64-linux.a) are not installed")?;
    let stock = first_dir_with(
        &["/usr/libexec/valgrind", "/usr/lib/x86_64-linux-gnu/valgrind", "/usr/lib/valgrind", "/usr/local/libexec/valgrind", "/usr/local/lib/valgrind"],
        "vgpreload_core-amd64-linux.so",
    )
    .ok_or("Valgrind's installed files (vgpreload_core-amd64-linux.so) were not found")?;
    let cc = std::env::var("KANSOKU_VALGRIND_CC").unwrap_or_else(|_| "gcc".into());
    let obj = out.join("kansoku_main.o");
    // Valgrind's own tool flags: no libc, no stack protector, no builtins, static, not PIE.
    run(Command::new(&cc)
        .args(["-m64", "-O2", "-g", "-Wall", "-fno-stack-protector", "-fno-builtin", "-fno-strict-aliasing", "-fno-pie", "-fno-pic"])
        .args(["-fno-omit-frame-pointer", "-DVGA_amd64=1", "-DVGO_linux=1", "-DVGP_amd64_linux=1", "-DVGPV_amd64_linux_vanilla=1"])
        .arg(format!("-I{}", include.display()))
        .arg("-c")
        .arg(SOURCE)
        .arg("-o")
        .arg(&obj))?;
    let lib = out.join("valgrind-lib");
    let _ = std::fs::remove_dir_all(&lib);
    std::fs::create_dir_all(&lib).map_err(|e| format!("creating {}: {e}", lib.display()))?;
    let tool = lib.join("kansoku-amd64-linux");
    // Linked like Valgrind's stock tools: a static executable at Valgrind's load address,
    // entry `_start` from libcoregrind.
    run(Command::new(&cc)
        .args(["-m64", "-o"])
        .arg(&tool)
        .arg(&obj)
        .args(["-static", "-nodefaultlibs", "-nostartfiles", "-u", "_start", "-Wl,--build-id=none", "-Wl,-Ttext-segment=0x58000000"])
        .arg(static_libs.join("libcoregrind-amd64-linux.a"))
        .arg(static_libs.join("libvex-amd64-linux.a"))
        .arg(static_libs.join("libgcc-sup-amd64-linux.a"))
        .arg("-lgcc"))?;
    let entries = std::fs::read_dir(&stock).map_err(|e| format!("reading {}: {e}", stock.display()))?;
    for e in entries.flatten() {
        let name = e.file_name();
        if name == "kansoku-amd64-linux" {
            continue;
        }
        std::os::unix::fs::symlink(e.path(), lib.join(&name)).map_err(|err| format!("linking {}: {err}", e.path().display()))?;
    }
    Ok(lib)
}

fn main() {
    println!("cargo:rerun-if-changed={SOURCE}");
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed=KANSOKU_VALGRIND_CC");
    let out = PathBuf::from(std::env::var("OUT_DIR").expect("OUT_DIR"));
    match build(&out) {
        Ok(dir) => println!("cargo:rustc-env=KANSOKU_VALGRIND_TOOL_DIR={}", dir.display()),
        Err(reason) => {
            println!("cargo:warning=kansoku's Valgrind tool was not built ({reason}); --source valgrind will use Lackey");
            println!("cargo:rustc-env=KANSOKU_VALGRIND_TOOL_ERROR={}", reason.replace('\n', " "));
        }
    }
}
