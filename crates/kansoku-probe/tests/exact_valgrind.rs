//! The exact engine on kansoku's Valgrind tool (issue 11) against the ptrace engine: the
//! same instructions inside marker windows of every example program (and of a program
//! of `rep` string instructions with counts of zero and more), threads, a crash, limits.
//! Skipped, with the reason printed, where kansoku's Valgrind tool was not built.

use std::path::{Path, PathBuf};

use kansoku_core::{Event, ExitStatus, Header, Module, RecordingKind, RecordingReader, RecordingWriter};
use kansoku_examples::{build, test_build_dir};
use kansoku_probe::{trace_exact, Engine, ExactTraceOptions, StopReason, TraceOutcome};

fn tool_missing() -> bool {
    match kansoku_probe::valgrind::tool_dir() {
        Ok(_) => false,
        Err(why) => {
            kansoku_examples::skip(kansoku_examples::Missing::Installed { package: "valgrind" }, why);
            true
        }
    }
}

fn trace(engine: Engine, program: &Path, args: &[&str], marker: Option<&str>, iterations: Option<u64>, max: Option<u64>) -> (TraceOutcome, Vec<Event>) {
    let options = ExactTraceOptions {
        engine,
        program: program.to_path_buf(),
        args: args.iter().map(|s| s.to_string()).collect(),
        marker: marker.map(str::to_string),
        iterations,
        max_instructions: max,
        data: false,
    };
    let header = Header::new(RecordingKind::ExactTrace, program.to_string_lossy(), vec![]);
    let mut bytes = Vec::new();
    let outcome = {
        let mut w = RecordingWriter::new(&mut bytes, "mem".into(), &header).unwrap();
        let outcome = trace_exact(&options, &mut w, &mut |_| {}).unwrap();
        w.finish().unwrap();
        outcome
    };
    let events = RecordingReader::new(&bytes[..], "mem".into()).unwrap().map(|e| e.unwrap()).collect();
    (outcome, events)
}

/// Each instruction as (file name, file offset): the two engines load programs at
/// different addresses.
fn placed(events: &[Event]) -> Vec<(String, u64)> {
    let mut modules: Vec<Module> = Vec::new();
    let mut out = Vec::new();
    for e in events {
        match e {
            Event::Module(m) => modules.push(m.clone()),
            Event::Instruction { addr } => {
                let m = modules.iter().rev().find(|m| m.contains(*addr)).unwrap_or_else(|| panic!("{addr:#x} outside every module"));
                out.push((m.short_name().to_string(), addr - m.start + m.file_offset));
            }
            _ => {}
        }
    }
    out
}

/// A program of `rep movsb` (counts 0 to 4) and `repe cmpsb` (counts 0 to 8, stopping
/// early where the bytes differ), around a store that makes them differ.
fn rep_program() -> PathBuf {
    let src = r#"#include <stdlib.h>
static char src[256], dst[256];
__attribute__((noinline)) void copy(long n) {
    void *d = dst, *s = src; long c = n;
    __asm__ volatile("rep movsb" : "+D"(d), "+S"(s), "+c"(c) : : "memory");
}
__attribute__((noinline)) long compare(long n) {
    void *d = dst, *s = src; long c = n; unsigned char r;
    __asm__ volatile("repe cmpsb; setne %3" : "+D"(d), "+S"(s), "+c"(c), "=r"(r) : : "memory", "cc");
    return r + c;
}
__attribute__((noinline)) void region(long i) {
    copy(i % 5);
    dst[i % 7] ^= 1;
    compare(i % 9);
}
int main(int argc, char **argv) {
    long n = atol(argv[1]);
    for (long i = 0; i < n; i++) region(i);
    return 0;
}
"#;
    kansoku_examples::build_source("rep_strings", src, &test_build_dir(), &["-O1", "-g"]).unwrap()
}

#[test]
fn both_engines_record_the_same_marker_windows() {
    if tool_missing() {
        return;
    }
    let dir = test_build_dir();
    let rep = rep_program();
    let cases: Vec<(PathBuf, &[&str], &str, u64)> = vec![
        (build("seed000", &dir).unwrap(), &["100"], "func_M", 20),
        // walk loops back to its own entry: every element is a marker hit
        (build("paths", &dir).unwrap(), &["50", "4"], "walk", 120),
        (build("matrix", &dir).unwrap(), &["4"], "multiply", 3),
        (build("recursion", &dir).unwrap(), &["12", "3"], "work", 2),
        (build("recursion", &dir).unwrap(), &["12"], "fib", 100),
        (build("sorting", &dir).unwrap(), &["40", "3"], "insertion_sort", 2),
        (rep.clone(), &["60"], "region", 50),
    ];
    for (program, args, marker, iterations) in cases {
        let (v, ve) = trace(Engine::Valgrind, &program, args, Some(marker), Some(iterations), None);
        let (p, pe) = trace(Engine::Ptrace, &program, args, Some(marker), Some(iterations), None);
        let name = program.display();
        assert_eq!((v.marker_hits, v.stop), (p.marker_hits, p.stop), "{name}");
        assert!(v.instructions > 100, "{name}: {v:?}");
        assert_eq!(v.instructions, p.instructions, "{name}");
        let (vi, pi) = (placed(&ve), placed(&pe));
        if let Some(i) = vi.iter().zip(&pi).position(|(a, b)| a != b) {
            panic!("{name}: instruction {i} differs: valgrind {:?}, ptrace {:?}", vi[i], pi[i]);
        }
        assert_eq!(vi.len(), pi.len(), "{name}");
        // Both name the thread, then the marker, at the same instruction counts.
        let markers = |e: &[Event]| e.iter().filter_map(|e| if let Event::Marker { instructions, .. } = e { *instructions } else { None }).collect::<Vec<_>>();
        assert_eq!(markers(&ve), markers(&pe), "{name}");
        assert_eq!(ve.last(), Some(&Event::Exit(ExitStatus::Detached)), "{name}");
    }
    std::fs::remove_file(rep).ok();
}

#[test]
fn every_thread_a_crash_and_limits() {
    if tool_missing() {
        return;
    }
    let dir = test_build_dir();
    // Threads: each thread's instructions in `worker` are the same in both engines.
    let threads = build("threads", &dir).unwrap();
    let per_thread = |events: &[Event]| {
        let mut tid = 0;
        let mut counts = std::collections::BTreeMap::<u32, usize>::new();
        let mut modules: Vec<Module> = Vec::new();
        for e in events {
            match e {
                Event::Module(m) => modules.push(m.clone()),
                Event::Thread { tid: t } => tid = *t,
                Event::Instruction { addr } if modules.iter().any(|m| m.contains(*addr) && m.short_name() == "threads") => *counts.entry(tid).or_default() += 1,
                _ => {}
            }
        }
        let mut c: Vec<usize> = counts.into_values().collect();
        c.sort();
        c
    };
    let (v, ve) = trace(Engine::Valgrind, &threads, &["300"], None, None, None);
    let (_, pe) = trace(Engine::Ptrace, &threads, &["300"], None, None, None);
    assert!(v.threads >= 2, "{v:?}");
    let (vc, pc) = (per_thread(&ve), per_thread(&pe));
    assert_eq!(vc.len(), 2, "{vc:?}");
    // the new thread runs worker alone; the main thread also runs main, so compare the
    // smaller count exactly (worker's 300 iterations) and the larger within main's calls
    assert_eq!(vc[0], pc[0], "valgrind {vc:?}, ptrace {pc:?}");
    assert_eq!(vc[1], pc[1], "valgrind {vc:?}, ptrace {pc:?}");

    // A crash: the faulting instruction is the last one recorded, then the signal and
    // the exit, as with ptrace.
    let crash = build("crash", &dir).unwrap();
    let (v, ve) = trace(Engine::Valgrind, &crash, &["10"], Some("main"), None, None);
    let (_, pe) = trace(Engine::Ptrace, &crash, &["10"], Some("main"), None, None);
    assert_eq!(v.exit, ExitStatus::Killed(11));
    assert_eq!(v.signals, vec![11]);
    let before_signal = |e: &[Event]| {
        let at = e.iter().position(|e| *e == Event::Signal { signal: 11 }).expect("a SIGSEGV event");
        placed(&e[..at]).last().cloned()
    };
    assert_eq!(before_signal(&ve), before_signal(&pe));
    assert_eq!(ve.last(), Some(&Event::Exit(ExitStatus::Killed(11))));

    // An instruction limit: exactly that many, the program finishes by itself.
    let seed = build("seed000", &dir).unwrap();
    let (v, ve) = trace(Engine::Valgrind, &seed, &["1000"], None, None, Some(5000));
    assert_eq!((v.stop, v.instructions, v.exit), (StopReason::InstructionLimit, 5000, ExitStatus::Exited(0)));
    assert_eq!(ve.iter().filter(|e| matches!(e, Event::Instruction { .. })).count(), 5000);
    assert_eq!(ve.last(), Some(&Event::Exit(ExitStatus::Detached)));

    // A marker never entered.
    let (v, _) = trace(Engine::Valgrind, &seed, &["0"], Some("func_M"), None, None);
    assert_eq!((v.stop, v.instructions), (StopReason::MarkerNeverHit, 0));
}

/// `--data`: every memory access follows its instruction. On a window of seed000 the
/// Valgrind engine's accesses are, instruction for instruction, as many as the ptrace
/// waveform decodes from the registers (iced-x86's memory operands, pushes, calls and
/// returns included), and at the same addresses relative to the first one.
#[test]
fn data_addresses_match_the_decoded_operands() {
    if tool_missing() {
        return;
    }
    let program = build("seed000", &test_build_dir()).unwrap();
    let n = 2000;
    let options = ExactTraceOptions {
        engine: Engine::Valgrind,
        program: program.clone(),
        args: vec!["100".into()],
        marker: Some("func_M".into()),
        max_instructions: Some(n),
        data: true,
        ..Default::default()
    };
    let header = Header::new(RecordingKind::ExactTrace, "seed000", vec![]);
    let mut bytes = Vec::new();
    {
        let mut w = RecordingWriter::new(&mut bytes, "mem".into(), &header).unwrap();
        trace_exact(&options, &mut w, &mut |_| {}).unwrap();
        w.finish().unwrap();
    }
    // per instruction: the addresses of its accesses
    let mut ours: Vec<Vec<u64>> = Vec::new();
    for e in RecordingReader::new(&bytes[..], "mem".into()).unwrap() {
        match e.unwrap() {
            Event::Instruction { .. } => ours.push(Vec::new()),
            Event::Access { addr, .. } => ours.last_mut().expect("an access after its instruction").push(addr),
            _ => {}
        }
    }
    assert_eq!(ours.len() as u64, n);
    let mode = kansoku_probe::wave::WaveMode::Exact { marker: Some("func_M".into()), max_instructions: n };
    let wave = kansoku_probe::wave::record_wave(&kansoku_probe::wave::WaveOptions { program, args: vec!["100".into()], mode, engine: Engine::Ptrace }, &mut |_| {}).unwrap();
    let theirs: Vec<Vec<u64>> = wave.points.iter().map(|p| p.data.clone()).collect();
    assert_eq!(ours.iter().map(Vec::len).collect::<Vec<_>>(), theirs.iter().map(Vec::len).collect::<Vec<_>>());
    assert!(ours.iter().map(Vec::len).sum::<usize>() > 500, "{} accesses", ours.iter().map(Vec::len).sum::<usize>());
    // the stack is elsewhere under Valgrind: compare stack accesses relative to the first
    let first = |v: &[Vec<u64>]| v.iter().flatten().copied().next().unwrap();
    let (a, b) = (first(&ours), first(&theirs));
    let rel = |v: &[Vec<u64>], base: u64| v.iter().map(|x| x.iter().map(|&d| d.wrapping_sub(base) as i64).filter(|d| d.abs() < 1 << 20).collect::<Vec<_>>()).collect::<Vec<_>>();
    assert_eq!(rel(&ours, a), rel(&theirs, b));
}
