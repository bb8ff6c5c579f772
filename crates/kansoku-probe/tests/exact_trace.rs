//! The exact tracer on real compiled programs.

use std::path::Path;

use kansoku_binary::{FunctionCfg, Program, Symbolizer};
use kansoku_core::{Event, ExitStatus, Header, RecordingKind, RecordingReader, RecordingWriter};
use kansoku_examples::{build, test_build_dir};
use kansoku_probe::{trace_exact, ExactTraceOptions, StopReason, TraceOutcome};

fn trace(example: &str, args: &[&str], marker: Option<&str>, iterations: Option<u64>, max: Option<u64>) -> (TraceOutcome, Vec<u8>) {
    let program = build(example, &test_build_dir()).unwrap();
    let options = ExactTraceOptions {
        program,
        args: args.iter().map(|s| s.to_string()).collect(),
        marker: marker.map(str::to_string),
        iterations,
        max_instructions: max,
        ..Default::default()
    };
    let header = Header::new(RecordingKind::ExactTrace, example, vec![]);
    let mut bytes = Vec::new();
    let outcome = {
        let mut w = RecordingWriter::new(&mut bytes, "mem".into(), &header).unwrap();
        let outcome = trace_exact(&options, &mut w, &mut |_| {}).unwrap();
        w.finish().unwrap();
        outcome
    };
    (outcome, bytes)
}

fn events(bytes: &[u8]) -> Vec<Event> {
    RecordingReader::new(bytes, "mem".into()).unwrap().map(|e| e.unwrap()).collect()
}

/// Runs of consecutive instructions in the same function: (function, instruction count).
fn function_runs(bytes: &[u8]) -> Vec<Vec<(String, usize)>> {
    let mut reader = RecordingReader::new(bytes, "mem".into()).unwrap();
    let mut sym = Symbolizer::new(&[]);
    let mut iterations: Vec<Vec<(String, usize)>> = Vec::new();
    while let Some(e) = reader.next_event().unwrap() {
        match e {
            Event::Module(m) => sym.add_module(m),
            Event::Marker { .. } => iterations.push(Vec::new()),
            Event::Instruction { addr } => {
                let f = sym.locate(addr).function;
                let it = iterations.last_mut().expect("instructions only inside the window");
                match it.last_mut() {
                    Some((name, n)) if *name == f => *n += 1,
                    _ => it.push((f, 1)),
                }
            }
            _ => {}
        }
    }
    iterations
}

fn instruction_count(program: &Path, function: &str) -> usize {
    let p = Program::open(program).unwrap();
    FunctionCfg::build(&p, p.function_named(function).unwrap()).instructions.len()
}

#[test]
fn seed000_iterations_run_a_b_b_b_c_with_the_predicted_counts() {
    let program = build("seed000", &test_build_dir()).unwrap();
    let (outcome, bytes) = trace("seed000", &["20"], Some("func_M"), Some(5), None);
    assert_eq!(outcome.stop, StopReason::WindowComplete);
    assert_eq!(outcome.marker_hits, 5);
    assert_eq!(outcome.exit, ExitStatus::Exited(0), "detached program finishes on its own");
    let iterations = function_runs(&bytes);
    assert_eq!(iterations.len(), 5);
    // func_A, func_B and func_C are straight-line code: each call executes every
    // instruction the disassembly shows, once.
    let a = instruction_count(&program, "func_A");
    let b = instruction_count(&program, "func_B");
    let c = instruction_count(&program, "func_C");
    let callees: Vec<(String, usize)> = iterations[0].iter().filter(|(f, _)| f.starts_with("func_") && f != "func_M").cloned().collect();
    assert_eq!(
        callees,
        vec![("func_A".into(), a), ("func_B".into(), b), ("func_B".into(), b), ("func_B".into(), b), ("func_C".into(), c)]
    );
    // func_M itself: its whole body runs once per iteration, between the calls.
    let m: usize = iterations[0].iter().filter(|(f, _)| f == "func_M").map(|(_, n)| n).sum();
    assert_eq!(m, instruction_count(&program, "func_M"));
    for it in &iterations[1..] {
        assert_eq!(it, &iterations[0], "every iteration executes the same instructions");
    }
    // The window holds whole iterations: instruction count is a multiple of one iteration.
    let per_iteration: usize = iterations[0].iter().map(|(_, n)| n).sum();
    assert_eq!(outcome.instructions as usize, 5 * per_iteration);
    // Identical addresses across iterations, not only identical names.
    let addrs: Vec<u64> = events(&bytes).into_iter().filter_map(|e| if let Event::Instruction { addr } = e { Some(addr) } else { None }).collect();
    for k in 1..5 {
        assert_eq!(&addrs[..per_iteration], &addrs[k * per_iteration..(k + 1) * per_iteration]);
    }
}

#[test]
fn whole_program_trace_ends_with_exit_and_knows_libc() {
    let (outcome, bytes) = trace("seed000", &["2"], None, None, None);
    assert_eq!(outcome.stop, StopReason::ProgramEnded);
    assert_eq!(outcome.exit, ExitStatus::Exited(0));
    assert!(outcome.instructions > 10_000, "dynamic loader and libc start-up are traced too");
    let evs = events(&bytes);
    assert_eq!(evs.last(), Some(&Event::Exit(ExitStatus::Exited(0))));
    let modules: Vec<String> = evs.iter().filter_map(|e| if let Event::Module(m) = e { Some(m.path.clone()) } else { None }).collect();
    assert!(modules.iter().any(|p| p.contains("libc.so")), "{modules:?}");
    assert!(modules.iter().any(|p| p.contains("ld-linux")), "{modules:?}");
    // Every instruction falls in a module recorded before it.
    let mut known = Vec::new();
    for e in &evs {
        match e {
            Event::Module(m) => known.push(m.clone()),
            Event::Instruction { addr } => assert!(known.iter().any(|m| m.contains(*addr)), "{addr:x} outside known modules"),
            _ => {}
        }
    }
}

#[test]
fn crash_is_reported_and_recording_kept() {
    let (outcome, bytes) = trace("crash", &["10"], None, None, None);
    assert_eq!(outcome.exit, ExitStatus::Killed(11));
    assert_eq!(outcome.signals, vec![11]);
    let evs = events(&bytes);
    assert!(evs.contains(&Event::Signal { signal: 11 }));
    assert_eq!(evs.last(), Some(&Event::Exit(ExitStatus::Killed(11))));
    let n = evs.iter().filter(|e| matches!(e, Event::Instruction { .. })).count();
    assert_eq!(n as u64, outcome.instructions);
}

#[test]
fn instruction_limit_detaches_and_program_finishes() {
    let (outcome, bytes) = trace("seed000", &["1000"], None, None, Some(5000));
    assert_eq!(outcome.stop, StopReason::InstructionLimit);
    assert_eq!(outcome.instructions, 5000);
    assert_eq!(outcome.exit, ExitStatus::Exited(0));
    assert_eq!(events(&bytes).last(), Some(&Event::Exit(ExitStatus::Detached)));
}

#[test]
fn all_threads_are_traced() {
    let (outcome, bytes) = trace("threads", &["200"], None, None, None);
    assert_eq!(outcome.exit, ExitStatus::Exited(0));
    assert!(outcome.threads >= 2, "{outcome:?}");
    // Both threads ran worker's loop: 200 iterations each, so worker's loop-closing
    // instruction is executed ~400 times spread over two thread ids.
    let tids: std::collections::HashSet<u32> =
        events(&bytes).iter().filter_map(|e| if let Event::Thread { tid } = e { Some(*tid) } else { None }).collect();
    assert!(tids.len() >= 2, "{tids:?}");
}

#[test]
fn marker_never_hit_and_missing_marker() {
    let program = build("seed000", &test_build_dir()).unwrap();
    let options = ExactTraceOptions { program: program.clone(), args: vec!["0".into()], marker: Some("func_M".into()), ..Default::default() };
    let header = Header::new(RecordingKind::ExactTrace, "x", vec![]);
    let mut w = RecordingWriter::new(Vec::new(), "mem".into(), &header).unwrap();
    let outcome = trace_exact(&options, &mut w, &mut |_| {}).unwrap();
    assert_eq!(outcome.stop, StopReason::MarkerNeverHit);
    assert_eq!(outcome.instructions, 0);

    let options = ExactTraceOptions { program, marker: Some("no_such_function".into()), ..Default::default() };
    let err = trace_exact(&options, &mut w, &mut |_| {}).unwrap_err().to_string();
    assert!(err.contains("no_such_function"), "{err}");
}

#[test]
fn missing_or_non_executable_program() {
    let header = Header::new(RecordingKind::ExactTrace, "x", vec![]);
    let mut w = RecordingWriter::new(Vec::new(), "mem".into(), &header).unwrap();
    let options = ExactTraceOptions { program: "/nonexistent/prog".into(), ..Default::default() };
    let err = trace_exact(&options, &mut w, &mut |_| {}).unwrap_err().to_string();
    assert!(err.contains("/nonexistent/prog"), "{err}");
    build("seed000", &test_build_dir()).unwrap();
    let options = ExactTraceOptions { program: test_build_dir().join("seed000.c"), ..Default::default() };
    let err = trace_exact(&options, &mut w, &mut |_| {}).unwrap_err().to_string();
    assert!(err.contains("seed000.c") && err.contains("not executable"), "{err}");
}

#[test]
fn truncated_real_recording_reads_up_to_last_event() {
    let (outcome, bytes) = trace("seed000", &["3"], Some("func_M"), Some(3), None);
    let cut = &bytes[..bytes.len() * 2 / 3];
    let mut reader = RecordingReader::new(cut, "cut.ksk".into()).unwrap();
    let mut n = 0;
    while let Some(e) = reader.next_event().unwrap() {
        if matches!(e, Event::Instruction { .. }) {
            n += 1;
        }
    }
    assert!(reader.truncated_at().is_some());
    assert!(n > 0 && n < outcome.instructions);
}
