//! Lowers every PolyBench-style C file given and says what the kernel language made of it
//! (issue 17): `cargo run -p kansoku-cache --example polybench_c -- crates/kansoku-cache/polybench/*.c`.
fn main() {
    for path in std::env::args().skip(1) {
        let src = std::fs::read_to_string(&path).expect("readable");
        match kansoku_cache::parse_c_kernel(&path, &src, &Default::default()) {
            Ok(l) => println!("{path}: ok, {} statements, {} references, params {:?}", l.kernel.statements.len(), l.kernel.refs.len(), l.kernel.params),
            Err(e) => println!("{e}"),
        }
    }
}
