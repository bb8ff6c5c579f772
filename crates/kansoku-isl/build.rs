// isl comes from Debian's libisl-dev (scripts/setup); it is MIT-licensed.
fn main() {
    println!("cargo:rustc-link-lib=isl");
}
