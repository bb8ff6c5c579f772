// isl is MIT-licensed. scripts/setup builds it with isl's own small-integer arithmetic
// (imath-32) into KANSOKU_ISL_DIR (default below, the same as setup's), and it is linked
// statically from there: the set method runs about twice as fast as on Debian's libisl,
// whose GMP integers cost more than the work on them (docs/BENCHMARKS.md §5). Without that
// build, Debian's libisl-dev is linked instead: the same results, slower, and said so.
use std::path::PathBuf;

const DEFAULT_DIR: &str = "/opt/kansoku/isl-0.25-imath32-p1";

fn main() {
    println!("cargo:rerun-if-env-changed=KANSOKU_ISL_DIR");
    let dir = PathBuf::from(std::env::var("KANSOKU_ISL_DIR").unwrap_or_else(|_| DEFAULT_DIR.into()));
    let lib = dir.join("lib");
    let archive = lib.join("libisl.a");
    if archive.is_file() {
        println!("cargo:rerun-if-changed={}", archive.display());
        println!("cargo:rustc-link-search=native={}", lib.display());
        println!("cargo:rustc-link-lib=static=isl");
        println!("cargo:rustc-env=KANSOKU_ISL_INTEGERS=imath-32");
    } else {
        // A missing file named in rerun-if-changed would rebuild this crate every time;
        // scripts/setup touches this file when it has installed isl instead.
        println!("cargo:rerun-if-changed=build.rs");
        println!("cargo:warning=isl: {} not found, linking Debian's libisl (GMP integers): seed 004's set method runs about half as fast; scripts/setup builds the faster isl", archive.display());
        println!("cargo:rustc-link-lib=isl");
        println!("cargo:rustc-env=KANSOKU_ISL_INTEGERS=gmp");
    }
}
