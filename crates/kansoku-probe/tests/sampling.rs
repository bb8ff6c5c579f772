//! Sampling a real program through perf_event, with uprobe marker hits.

use kansoku_binary::Symbolizer;
use kansoku_core::{Event, ExitStatus, Header, RecordingKind, RecordingReader, RecordingWriter};
use kansoku_examples::{build, test_build_dir};
use kansoku_probe::perf::{self, SamplingClock};
use kansoku_probe::sampler::{record_samples, SampleRecordingOptions};

fn record(clock: SamplingClock, iterations: u64, marker: Option<&str>) -> (kansoku_probe::sampler::SampleRecordingOutcome, Vec<u8>) {
    let program = build("seed000", &test_build_dir()).unwrap();
    let options = SampleRecordingOptions {
        program,
        args: vec![iterations.to_string()],
        clock,
        marker: marker.map(str::to_string),
        count_instructions: false,
        marker_by_agent: false,
    };
    let mut bytes = Vec::new();
    let outcome = {
        let header = Header::new(RecordingKind::Samples, "seed000", vec![]);
        let mut w = RecordingWriter::new(&mut bytes, "mem".into(), &header).unwrap();
        let o = record_samples(&options, &mut w, &mut |_| {}).unwrap();
        w.finish().unwrap();
        o
    };
    (outcome, bytes)
}

#[test]
fn cpu_clock_samples_land_in_the_program_and_markers_are_exact() {
    if !perf::uprobes_available() {
        kansoku_examples::skip(kansoku_examples::Missing::Machine, "this kernel has no uprobe PMU");
        return;
    }
    let (outcome, bytes) = record(SamplingClock::CpuClock { period_ns: 20_000 }, 200_000, Some("func_M"));
    assert_eq!(outcome.exit, ExitStatus::Exited(0));
    assert_eq!(outcome.markers, 200_000, "one uprobe hit per call of func_M");
    assert!(outcome.samples > 20, "{outcome:?}");
    let mut reader = RecordingReader::new(&bytes[..], "mem".into()).unwrap();
    let mut sym = Symbolizer::new(&[]);
    let (mut inside, mut total) = (0, 0);
    let mut last_time = 0;
    while let Some(e) = reader.next_event().unwrap() {
        match e {
            Event::Module(m) => sym.add_module(m),
            Event::Sample(s) => {
                total += 1;
                assert!(s.time_ns >= last_time, "samples arrive in time order");
                last_time = s.time_ns;
                let f = sym.locate(s.ip).function;
                if f.starts_with("func_") || f == "main" {
                    inside += 1;
                }
            }
            Event::Marker { time_ns, .. } => {
                assert!(time_ns >= last_time);
                last_time = time_ns;
            }
            _ => {}
        }
    }
    assert_eq!(total, outcome.samples);
    // The uprobe's own cost lands in the kernel (excluded), so user samples are nearly all
    // in the loop of func_M and its callees.
    assert!(inside * 10 >= total * 9, "{inside} of {total} samples inside seed000's functions");
}

#[test]
fn hardware_instruction_sampling_when_available() {
    if let Err(why) = perf::hardware_counters() {
        kansoku_examples::skip(kansoku_examples::Missing::Machine, why);
        return;
    }
    let (outcome, bytes) = record(SamplingClock::Instructions { period: 10_007 }, 100_000, Some("func_M"));
    assert_eq!(outcome.markers, 100_000);
    // Every sample carries the running instruction count, rising.
    let mut last = 0;
    for e in RecordingReader::new(&bytes[..], "mem".into()).unwrap() {
        if let Event::Sample(s) = e.unwrap() {
            let n = s.instructions.expect("instruction count with hardware sampling");
            assert!(n >= last);
            last = n;
        }
    }
}

#[test]
fn missing_marker_is_named() {
    let program = build("seed000", &test_build_dir()).unwrap();
    let options = SampleRecordingOptions {
        program,
        args: vec![],
        clock: SamplingClock::CpuClock { period_ns: 1_000_000 },
        marker: Some("func_Z".into()),
        count_instructions: false,
        marker_by_agent: false,
    };
    let header = Header::new(RecordingKind::Samples, "x", vec![]);
    let mut w = RecordingWriter::new(Vec::new(), "mem".into(), &header).unwrap();
    let err = record_samples(&options, &mut w, &mut |_| {}).unwrap_err().to_string();
    assert!(err.contains("func_Z"), "{err}");
}

#[test]
fn register_positions_follow_the_mask() {
    let mask = perf::X86_REGS_ALL;
    let values: Vec<u64> = (0..mask.count_ones() as u64).collect();
    assert_eq!(perf::register(&values, mask, perf::regs::AX), Some(0));
    assert_eq!(perf::register(&values, mask, perf::regs::IP), Some(8));
    assert_eq!(perf::register(&values, mask, perf::regs::FLAGS), Some(9));
    assert_eq!(perf::register(&values, mask, perf::regs::R8), Some(10));
    assert_eq!(perf::register(&values, mask, perf::regs::R15), Some(17));
    assert_eq!(perf::register(&values, mask, 10), None, "CS is not sampled");
}
