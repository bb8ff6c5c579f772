//! Exact-tracer throughput on the seed-000 example, without the CLI:
//! `cargo run --release -p kansoku-probe --example exact_speed [ITERATIONS]`.

use kansoku_core::{Header, RecordingKind, RecordingWriter};
use kansoku_probe::{trace_exact, ExactTraceOptions};

fn main() {
    let iterations: u64 = std::env::args().nth(1).and_then(|a| a.parse().ok()).unwrap_or(10_000);
    let program = kansoku_examples::build("seed000", &kansoku_examples::test_build_dir()).expect("builds seed000");
    let options = ExactTraceOptions {
        program,
        args: vec![(iterations + 1).to_string()],
        marker: Some("func_M".into()),
        iterations: Some(iterations),
        max_instructions: None,
        ..Default::default()
    };
    let header = Header::new(RecordingKind::ExactTrace, "seed000", vec![]);
    let mut sink = std::io::sink();
    let mut w = RecordingWriter::new(&mut sink, "/dev/null".into(), &header).unwrap();
    let o = trace_exact(&options, &mut w, &mut |_| {}).expect("traces");
    println!(
        "{} instructions in {:.2} s: {:.0} instructions/s ({:.1} us per instruction)",
        o.instructions,
        o.elapsed.as_secs_f64(),
        o.instructions_per_second(),
        1e6 / o.instructions_per_second()
    );
}
