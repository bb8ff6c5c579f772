//! Unit cases written in WAT: each optimises a small module, runs both under wasmtime and
//! checks the decoded streams, plus what the optimiser must and must not have done.

use kansoku_tracepoints::decode::{decode, TimestampMode};
use kansoku_tracepoints::module::count_trace_calls;
use kansoku_tracepoints::xlat::ArgSource;
use kansoku_tracepoints::{check, optimize, read_trace, run_module, run_to_vec, Clock, OptimizeOptions, Optimized, RunOptions, TpError};

const IMPORTS: &str = r#"
  (import "kansoku" "trace0" (func $t0 (param i32)))
  (import "kansoku" "trace1" (func $t1 (param i32 i32)))
  (import "kansoku" "trace2" (func $t2 (param i32 i32 i32)))
  (import "kansoku" "barrier" (func $bar))
"#;

fn module(decls: &str, body: &str) -> Vec<u8> {
    let src = format!(
        "(module {IMPORTS} (@custom \"kansoku.decl\" \"{decls}\") (func (export \"run\") (param $x i32) (result i32) (local $y i32) {body}))"
    );
    wat::parse_str(&src).unwrap_or_else(|e| panic!("bad test WAT: {e}\n{src}"))
}

fn opt(wasm: &[u8], o: &OptimizeOptions) -> Optimized {
    optimize(wasm, o).unwrap()
}

/// Optimises with default options and checks the streams for each argument; returns the output.
fn checked(wasm: &[u8], args: &[&str]) -> Optimized {
    let o = opt(wasm, &OptimizeOptions::default());
    for a in args {
        let r = check(wasm, &o.wasm, &RunOptions { args: vec![a.to_string()], ..Default::default() }, 0).unwrap();
        assert!(r.identical, "streams differ for x={a}: {:?}", r.first_difference);
        assert!(r.same_results);
    }
    o
}

fn calls(wasm: &[u8]) -> usize {
    count_trace_calls(wasm).unwrap().0
}

#[test]
fn straight_line_calls_merge_into_one() {
    let w = module(
        "",
        "(call $t1 (i32.const 1) (local.get $x))
         (call $t2 (i32.const 2) (local.get $x) (i32.const 9))
         (call $t0 (i32.const 3))
         (local.get $x)",
    );
    let o = checked(&w, &["5", "-7"]);
    assert_eq!(calls(&w), 3);
    assert_eq!(calls(&o.wasm), 1);
    assert_eq!(o.table.entries.len(), 1);
    let e = o.table.entries.values().next().unwrap();
    assert_eq!(e.events.iter().map(|e| e.id).collect::<Vec<_>>(), vec![1, 2, 3]);
    assert_eq!(e.nargs, 1, "x once; 9 is a constant");
    assert_eq!(e.events[1].args, vec![ArgSource::Pos(0), ArgSource::Const(9)]);
    assert!(e.offsets[0] < e.offsets[1] && e.offsets[1] < e.offsets[2] && e.offsets[2] == 0);
}

#[test]
fn derivable_arguments_are_not_emitted() {
    let w = module(
        "",
        "(local.set $y (i32.xor (local.get $x) (i32.const 0x55)))
         (call $t2 (i32.const 1) (local.get $x) (local.get $y))
         (call $t2 (i32.const 2) (i32.mul (local.get $x) (local.get $y)) (i32.add (local.get $y) (local.get $x)))
         (call $t2 (i32.const 3) (i32.sub (local.get $x) (local.get $y)) (i32.add (local.get $x) (i32.const 100)))
         (call $t2 (i32.const 4) (i32.shl (local.get $y) (i32.const 3)) (i32.const 42))
         (local.get $x)",
    );
    let o = checked(&w, &["3", "100000", "-1"]);
    let e = o.table.entries.values().next().unwrap();
    assert_eq!(e.events.len(), 4);
    // only x travels: even y = x ^ 0x55 is rebuilt by the host
    assert_eq!(e.nargs, 1, "{:?}", e.events);
    assert_eq!(e.events[0].args[1].display(), "($0 ^ 85)");
    assert_eq!(o.report.args_before, 8);
    assert_eq!(o.report.args_derived, 6);
    assert_eq!(o.report.args_constant, 1);
    assert!(matches!(e.events[1].args[0], ArgSource::Expr(..)));
}

#[test]
fn nothing_moves_across_a_barrier() {
    let w = module(
        "",
        "(call $t1 (i32.const 1) (local.get $x))
         (call $t1 (i32.const 2) (local.get $x))
         (call $bar)
         (call $t1 (i32.const 3) (local.get $x))
         (call $t1 (i32.const 4) (local.get $x))
         (local.get $x)",
    );
    let o = checked(&w, &["1"]);
    assert_eq!(calls(&o.wasm), 2, "one merged call on each side");
    assert_eq!(count_trace_calls(&o.wasm).unwrap().1, 0, "barrier calls are removed");
    assert_eq!(o.report.barriers_removed, 1);
    for e in o.table.entries.values() {
        let ids: Vec<u32> = e.events.iter().map(|e| e.id).collect();
        assert!(ids == vec![1, 2] || ids == vec![3, 4], "{ids:?}");
    }
}

#[test]
fn movement_limits_bound_merges() {
    let body = "(call $t1 (i32.const 1) (local.get $x))
         (local.set $y (i32.add (i32.mul (local.get $x) (local.get $x)) (i32.const 1)))
         (call $t1 (i32.const 2) (local.get $y))
         (local.get $x)";
    // the call of 1 is 9 instructions before the call of 2 (8 in between)
    for (limit, merged) in [("0", false), ("8", false), ("9", true), ("-1", true)] {
        let w = module(&format!("id=1;name=a;args=x;flags=;move={limit}\\n"), body);
        let o = checked(&w, &["4"]);
        assert_eq!(calls(&o.wasm), if merged { 1 } else { 2 }, "move={limit}");
    }
}

#[test]
fn disabled_points_and_idempotent_repeats_are_removed() {
    let w = module(
        "id=1;name=state;args=s;flags=idempotent;move=-1\\nid=2;name=dbg;args=x;flags=disabled;move=-1\\n",
        "(call $t1 (i32.const 1) (local.get $x))
         (call $t1 (i32.const 2) (local.get $x))
         (call $t1 (i32.const 1) (local.get $x))
         (call $t1 (i32.const 3) (local.get $x))
         (call $t1 (i32.const 1) (local.get $x))
         (call $t1 (i32.const 1) (i32.add (local.get $x) (i32.const 1)))
         (local.get $x)",
    );
    let o = opt(&w, &OptimizeOptions::default());
    assert_eq!(o.report.removed_disabled, 1);
    // 1(x) 1(x) adjacent once 2 is gone; 1(x) after 3 is not adjacent; 1(x+1) differs
    assert_eq!(o.report.removed_idempotent, 1);
    let r = check(&w, &o.wasm, &RunOptions { args: vec!["8".into()], ..Default::default() }, 0).unwrap();
    assert!(r.identical);
    assert!(!r.identical_raw, "the raw original stream has the disabled event");
    assert_eq!(r.disabled_events_dropped, 1);
    assert_eq!(r.idempotent_repeats_collapsed, 1);
    assert_eq!(r.events, 4);
}

#[test]
fn calls_to_tracing_functions_split_groups_but_others_do_not() {
    let src = format!(
        "(module {IMPORTS}
          (func $pure (param i32) (result i32) (i32.add (local.get 0) (i32.const 1)))
          (func $traces (param i32) (call $t1 (i32.const 9) (local.get 0)))
          (func (export \"run\") (param $x i32) (result i32)
            (call $t1 (i32.const 1) (local.get $x))
            (drop (call $pure (local.get $x)))
            (call $t1 (i32.const 2) (local.get $x))
            (call $traces (local.get $x))
            (call $t1 (i32.const 3) (local.get $x))
            (local.get $x)))"
    );
    let w = wat::parse_str(src).unwrap();
    let o = checked(&w, &["2"]);
    // 1 and 2 merge across the call of $pure; 3 stays after the call of $traces
    assert_eq!(calls(&o.wasm), 3);
    let e = o.table.entries.values().next().unwrap();
    assert_eq!(e.events.iter().map(|e| e.id).collect::<Vec<_>>(), vec![1, 2]);
}

#[test]
fn branches_merge_only_inside_their_blocks() {
    let w = module(
        "",
        "(call $t1 (i32.const 1) (local.get $x))
         (call $t1 (i32.const 2) (local.get $x))
         (if (i32.and (local.get $x) (i32.const 1))
           (then (call $t1 (i32.const 3) (local.get $x)) (call $t0 (i32.const 4)))
           (else (call $t0 (i32.const 5)) (call $t1 (i32.const 6) (i32.mul (local.get $x) (i32.const 3)))))
         (call $t1 (i32.const 7) (local.get $x))
         (local.get $x)",
    );
    let o = checked(&w, &["0", "1", "2", "3"]);
    assert_eq!(calls(&o.wasm), 4);
}

#[test]
fn the_id_budget_goes_to_the_loop() {
    let w = module(
        "",
        "(call $t1 (i32.const 1) (local.get $x))
         (call $t1 (i32.const 2) (local.get $x))
         (local.set $y (i32.const 0))
         (loop $l
           (call $t1 (i32.const 3) (local.get $y))
           (call $t1 (i32.const 4) (local.get $y))
           (local.set $y (i32.add (local.get $y) (i32.const 1)))
           (br_if $l (i32.lt_s (local.get $y) (local.get $x))))
         (local.get $x)",
    );
    let o = opt(&w, &OptimizeOptions { max_new_ids: Some(1), ..Default::default() });
    assert_eq!(o.report.new_ids_used, 1);
    assert_eq!(o.report.shapes_over_budget, 1);
    let e = o.table.entries.values().next().unwrap();
    assert_eq!(e.events.iter().map(|e| e.id).collect::<Vec<_>>(), vec![3, 4]);
    let r = check(&w, &o.wasm, &RunOptions { args: vec!["10".into()], ..Default::default() }, 0).unwrap();
    assert!(r.identical);
    assert_eq!((r.original.records, r.optimised.records), (22, 12));

    // a profile saying the first pair runs far more often moves the id there
    let profile = [(1u32, 1000u64), (2, 1000), (3, 10), (4, 10)].into_iter().collect();
    let o = opt(&w, &OptimizeOptions { max_new_ids: Some(1), profile: Some(profile), ..Default::default() });
    let e = o.table.entries.values().next().unwrap();
    assert_eq!(e.events.iter().map(|e| e.id).collect::<Vec<_>>(), vec![1, 2]);

    // with no budget both pairs merge
    let o = opt(&w, &OptimizeOptions::default());
    assert_eq!(o.report.new_ids_used, 2);
    assert!(o.report.iterations.len() >= 2);
}

#[test]
fn groups_over_budget_reuse_existing_shapes_in_later_iterations() {
    // four calls of the same pair: with one id, the 4-event group is over budget, and the
    // next iteration splits it into two pairs that reuse the pair's id
    let w = module(
        "",
        "(call $t1 (i32.const 1) (local.get $x))
         (call $t1 (i32.const 2) (local.get $x))
         (local.set $y (i32.const 0))
         (loop $l
           (call $t1 (i32.const 1) (local.get $y))
           (call $t1 (i32.const 2) (local.get $y))
           (local.set $y (i32.add (local.get $y) (i32.const 1)))
           (call $t1 (i32.const 1) (local.get $y))
           (call $t1 (i32.const 2) (local.get $y))
           (br_if $l (i32.lt_s (local.get $y) (local.get $x))))
         (local.get $x)",
    );
    let o = opt(&w, &OptimizeOptions { max_new_ids: Some(1), ..Default::default() });
    assert_eq!(o.report.new_ids_used, 1);
    assert!(o.report.iterations.len() >= 3, "{:?}", o.report.iterations);
    assert_eq!(calls(&o.wasm), 3);
    let r = check(&w, &o.wasm, &RunOptions { args: vec!["5".into()], ..Default::default() }, 0).unwrap();
    assert!(r.identical);
}

#[test]
fn timestamps_subindex_and_offsets() {
    let w = module(
        "",
        "(call $t1 (i32.const 1) (local.get $x))
         (local.set $y (i32.mul (local.get $x) (local.get $x)))
         (call $t1 (i32.const 2) (local.get $y))
         (call $t1 (i32.const 3) (local.get $x))
         (local.get $x)",
    );
    let o = checked(&w, &["3"]);
    let (_, trace) = run_to_vec(&o.wasm, &RunOptions { args: vec!["3".into()], ..Default::default() }).unwrap();
    let d = decode(&trace, &o.wasm, TimestampMode::Subindex).unwrap();
    let ts: Vec<String> = d.events.iter().map(|e| e.timestamp_text(TimestampMode::Subindex)).collect();
    let base = d.events[0].timestamp;
    assert_eq!(ts, vec![format!("{base}.1"), format!("{base}.2"), format!("{base}.3")]);
    let d = decode(&trace, &o.wasm, TimestampMode::Offsets).unwrap();
    assert!(d.events.windows(2).all(|w| w[0].timestamp < w[1].timestamp), "{:?}", d.events);
    assert_eq!(d.events[2].timestamp, base);
}

#[test]
fn custom_sections_are_kept_and_dwarf_dropped_with_a_warning() {
    let src = format!(
        "(module {IMPORTS} (@custom \"my.section\" \"keep me\") (@custom \".debug_info\" \"xx\")
           (func (export \"run\") (param i32) (result i32)
             (call $t1 (i32.const 1) (local.get 0)) (call $t1 (i32.const 2) (local.get 0)) (local.get 0)))"
    );
    let w = wat::parse_str(src).unwrap();
    let o = opt(&w, &OptimizeOptions::default());
    let info = kansoku_tracepoints::module::ModuleInfo::parse(&o.wasm).unwrap();
    assert!(info.custom_sections.iter().any(|n| n == "my.section"));
    assert!(!info.custom_sections.iter().any(|n| n == ".debug_info"));
    assert!(o.report.warnings.iter().any(|w| w.contains(".debug_info")));
}

#[test]
fn run_time_ids_stay_in_place() {
    let w = module(
        "",
        "(call $t1 (i32.const 1) (local.get $x))
         (call $t1 (local.get $x) (local.get $x))
         (call $t1 (i32.const 2) (local.get $x))
         (local.get $x)",
    );
    let o = checked(&w, &["77"]);
    assert_eq!(o.report.unoptimisable_sites, 1);
    assert_eq!(calls(&o.wasm), 3, "nothing moves across an event whose id is not a constant");
}

// ------------------------------------------------------------------ bad input

#[test]
fn malformed_wasm_is_a_clear_error() {
    let e = optimize(b"this is not wasm", &OptimizeOptions::default()).err().unwrap();
    assert!(matches!(e, TpError::Malformed(_)), "{e}");
    assert!(e.to_string().contains("not a valid WebAssembly module"));
    let w = module("", "(call $t0 (i32.const 1)) (local.get $x)");
    let e = optimize(&w[..w.len() - 5], &OptimizeOptions::default()).err().unwrap();
    assert!(matches!(e, TpError::Malformed(_)), "{e}");
    let e = run_to_vec(&w[..20], &RunOptions::default()).err().unwrap();
    assert!(matches!(e, TpError::Malformed(_)), "{e}");
}

#[test]
fn module_without_the_imports_is_a_clear_error() {
    let w = wat::parse_str("(module (func (export \"run\") (param i32) (result i32) (local.get 0)))").unwrap();
    let e = optimize(&w, &OptimizeOptions::default()).err().unwrap();
    assert!(matches!(e, TpError::NoTraceImports));
    assert!(e.to_string().contains("kansoku_trace.h"));
    let e = run_to_vec(&w, &RunOptions { args: vec!["1".into()], ..Default::default() }).err().unwrap();
    assert!(matches!(e, TpError::NoTraceImports));
    let w = wat::parse_str("(module (import \"kansoku\" \"print\" (func (param i32))))").unwrap();
    let e = optimize(&w, &OptimizeOptions::default()).err().unwrap();
    assert!(matches!(e, TpError::UnsupportedImport { .. }), "{e}");
}

#[test]
fn cut_trace_decodes_up_to_its_last_complete_record() {
    let w = module("", "(call $t1 (i32.const 1) (local.get $x)) (call $t1 (i32.const 2) (local.get $x)) (call $t0 (i32.const 3)) (local.get $x)");
    let (_, trace) = run_to_vec(&w, &RunOptions { args: vec!["1".into()], ..Default::default() }).unwrap();
    assert_eq!(read_trace(&trace).unwrap().records.len(), 3);
    // 16-byte header, records of 17, 17 and 13 bytes: cut inside the third
    let cut = &trace[..16 + 17 + 17 + 5];
    let d = decode(cut, &w, TimestampMode::Offsets).unwrap();
    assert_eq!(d.events.len(), 2);
    assert!(d.truncated.as_deref().unwrap().contains("cut short"));
    let e = decode(&trace[..10], &w, TimestampMode::Offsets).err().unwrap();
    assert!(matches!(e, TpError::BadTrace(_)), "{e}");
}

#[test]
fn trace_from_another_module_is_refused() {
    let w = module("", "(call $t1 (i32.const 1) (local.get $x)) (call $t1 (i32.const 2) (local.get $x)) (local.get $x)");
    let o = opt(&w, &OptimizeOptions::default());
    let (_, trace) = run_to_vec(&w, &RunOptions { args: vec!["1".into()], ..Default::default() }).unwrap();
    let e = decode(&trace, &o.wasm, TimestampMode::Offsets).err().unwrap();
    assert!(matches!(e, TpError::ModuleMismatch { .. }), "{e}");
    assert!(e.to_string().contains("another module"));
}

#[test]
fn optimising_twice_is_refused() {
    let w = module("", "(call $t1 (i32.const 1) (local.get $x)) (call $t1 (i32.const 2) (local.get $x)) (local.get $x)");
    let o = opt(&w, &OptimizeOptions::default());
    assert!(matches!(optimize(&o.wasm, &OptimizeOptions::default()), Err(TpError::AlreadyOptimised)));
}

/// Two trace records, then an endless loop (issue 15, item 10): the run is stopped at its
/// time limit, says so, and keeps the two records. The run goes on a thread of its own so
/// that a limit that does not stop it fails here by what was not seen (its end), after a
/// wait far past the limit, instead of hanging the suite; how soon after the limit a run
/// ends is not asserted (a loaded machine decides that).
#[test]
fn a_module_that_never_returns_is_stopped_and_its_trace_kept() {
    let w = module("", "(call $t0 (i32.const 1)) (call $t0 (i32.const 2)) (loop $forever (br $forever)) (local.get $x)");
    for clock in [Clock::Instructions, Clock::Ns] {
        let limit = std::time::Duration::from_millis(300);
        let path = std::env::temp_dir().join(format!("kansoku-forever-{}-{clock:?}.ktrace", std::process::id()));
        let out = Box::new(std::fs::File::create(&path).unwrap());
        let (ended, end) = std::sync::mpsc::channel();
        let wasm = w.clone();
        std::thread::spawn(move || {
            let r = run_module(&wasm, &RunOptions { clock, args: vec!["1".into()], time_limit: Some(limit), ..Default::default() }, out);
            let _ = ended.send(r.err().map(|e| e.to_string()));
        });
        let e = match end.recv_timeout(std::time::Duration::from_secs(120)) {
            Ok(e) => e.unwrap_or_else(|| panic!("{clock:?}: the endless loop returned")),
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => panic!("{clock:?}: not stopped by its time limit of {limit:?}: still running two minutes on"),
            Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => panic!("{clock:?}: the run panicked"),
        };
        assert!(e.contains("time limit") && e.contains("2 records"), "{e}");
        let trace = std::fs::read(&path).unwrap();
        let _ = std::fs::remove_file(&path);
        assert_eq!(read_trace(&trace).unwrap().records.len(), 2);
    }
}

/// A thread keeps its engines and compiled modules for its next runs (the runtime's
/// `compiled`): a run its time limit stopped must leave nothing that stops the next run on
/// the same engine, and a module run again from the cache gives the same trace.
#[test]
fn a_stopped_run_leaves_the_kept_engine_fit_for_the_next() {
    let forever = module("", "(call $t0 (i32.const 1)) (loop $forever (br $forever)) (local.get $x)");
    let ends = module("", "(call $t0 (i32.const 1)) (call $t0 (i32.const 2)) (local.get $x)");
    let opts = RunOptions { args: vec!["1".into()], time_limit: Some(std::time::Duration::from_millis(200)), ..Default::default() };
    let e = run_to_vec(&forever, &opts).err().unwrap();
    assert!(e.to_string().contains("time limit"), "{e}");
    let (first, trace) = run_to_vec(&ends, &opts).unwrap();
    let (again, trace_again) = run_to_vec(&ends, &opts).unwrap();
    assert_eq!((first.records, first.instructions, &first.results), (2, again.instructions, &again.results));
    assert_eq!(again.records, 2);
    assert_eq!(trace, trace_again);
}

/// Found by fuzzing (issue 15): event ids at the top of the id space (here -1 and -36,
/// i.e. 4294967295 and 4294967260) left no room for merged ids and overflowed the id
/// counter. The calls stay unmerged and the streams stay identical.
#[test]
fn ids_at_the_top_of_the_id_space_leave_calls_unmerged() {
    let w = module(
        "",
        "(call $t1 (i32.const -36) (local.get $x))
         (call $t1 (i32.const -1) (local.get $x))
         (call $t0 (i32.const 7))
         (local.get $x)",
    );
    let o = checked(&w, &["5"]);
    assert_eq!(calls(&o.wasm), calls(&w), "no ids left to merge into");
}

/// A module whose first import is an *exact* function import (custom descriptors, kind
/// 0x20), which the optimiser did not count as a function: every defined function's
/// index was off by one and a call to one indexed past the table (a fuzzing finding,
/// `wasm_optimize`). Written as bytes: `m.f` (exact, `[] -> []`), `kansoku.trace0`, and
/// `run` = `i32.const 5; call trace0; call m.f; call run`.
#[test]
fn an_exact_function_import_counts_as_a_function() {
    #[rustfmt::skip]
    let wasm: Vec<u8> = [
        &b"\0asm\x01\0\0\0"[..],
        &[0x01, 0x08, 0x02, 0x60, 0x01, 0x7f, 0x00, 0x60, 0x00, 0x00],
        &[0x02, 0x18, 0x02, 0x01, b'm', 0x01, b'f', 0x20, 0x01],
        &[0x07], b"kansoku", &[0x06], b"trace0", &[0x00, 0x00],
        &[0x03, 0x02, 0x01, 0x01],
        &[0x0a, 0x0c, 0x01, 0x0a, 0x00, 0x41, 0x05, 0x10, 0x01, 0x10, 0x00, 0x10, 0x02, 0x0b],
    ]
    .concat();
    wasmparser::Validator::new().validate_all(&wasm).expect("the test module validates");
    match optimize(&wasm, &OptimizeOptions::default()) {
        Ok(o) => assert_eq!(calls(&o.wasm), 1, "the one trace call is kept"),
        Err(e) => panic!("{e}"),
    }
}

/// Function indices in the `name` section are not validated: one naming function
/// 4294967295 overflowed the shift by the imports the optimiser adds (a fuzzing finding,
/// `wasm_optimize`; in release it wrapped, and the name landed on function 0). Such an
/// index stays past every function.
#[test]
fn a_name_for_a_function_that_does_not_exist_stays_so() {
    let mut w = module(
        "",
        "(call $t2 (i32.const 1) (local.get $x) (local.get $y))
         (call $t2 (i32.const 2) (i32.clz (local.get $x)) (local.get $x))
         (local.get $x)",
    );
    // A `name` section: function names, one entry, index u32::MAX, name "x".
    w.extend([0x00, 0x0f, 0x04, b'n', b'a', b'm', b'e', 0x01, 0x08, 0x01, 0xff, 0xff, 0xff, 0xff, 0x0f, 0x01, b'x']);
    let o = checked(&w, &["5"]);
    let imports = |wasm: &[u8]| kansoku_tracepoints::module::ModuleInfo::parse(wasm).unwrap().num_func_imports();
    assert!(imports(&o.wasm) > imports(&w), "the merge adds an import, shifting the defined functions");
    let total = imports(&o.wasm) + 1;
    for (index, name) in function_names(&o.wasm) {
        assert!(name != "x" || index >= total, "\"x\" names function {index}");
    }
}

/// The `name` section's function names: (index, name).
fn function_names(wasm: &[u8]) -> Vec<(u32, String)> {
    let mut out = Vec::new();
    for payload in wasmparser::Parser::new(0).parse_all(wasm) {
        let wasmparser::Payload::CustomSection(c) = payload.unwrap() else { continue };
        let wasmparser::KnownCustom::Name(names) = c.as_known() else { continue };
        for n in names {
            let wasmparser::Name::Function(map) = n.unwrap() else { continue };
            out.extend(map.into_iter().map(|naming| naming.map(|n| (n.index, n.name.to_string())).unwrap()));
        }
    }
    out
}
