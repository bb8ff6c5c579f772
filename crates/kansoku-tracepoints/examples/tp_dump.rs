//! Debug helper: optimise a module and print both as WAT.
//! `cargo run -p kansoku-tracepoints --example tp_dump -- IN.wasm`
fn main() {
    let path = std::env::args().nth(1).expect("usage: tp_dump IN.wasm");
    let wasm = std::fs::read(&path).unwrap();
    println!("{}", wasmprinter::print_bytes(&wasm).unwrap());
    let opts = kansoku_tracepoints::OptimizeOptions { no_merge: std::env::var("NO_MERGE").is_ok(), ..Default::default() };
    match kansoku_tracepoints::optimize(&wasm, &opts) {
        Ok(o) => {
            println!(";; ---- optimised\n{}", wasmprinter::print_bytes(&o.wasm).unwrap());
            println!("{}", serde_json::to_string_pretty(&o.report).unwrap());
        }
        Err(e) => println!("error: {e}"),
    }
}
