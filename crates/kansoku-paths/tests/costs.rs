//! Where the instructions went (`PathAnalysis::costs`), on a real program under kansoku's
//! Valgrind tool: recursive Fibonacci, whose calls and stack depths are known in advance.

use std::io::Read;
use std::path::Path;

use kansoku_examples::{build, test_build_dir};
use kansoku_paths::{AnalysisOptions, BackEdgeMode, CallMode, CostProfile, PathAnalysis, PathReport, Scope};
use kansoku_probe::valgrind::{spawn_tool, LackeyOptions};

/// `recursion N REPEAT` under kansoku's tool, analysed with the call tracker.
fn analyse(program: &Path, args: &[&str], calls: CallMode) -> (PathReport, CostProfile) {
    let mut a = analysed(program, args, calls, false);
    (a.report(None, None), a.costs())
}

/// The analysis of `program ARGS` under kansoku's tool, its calls kept on a timeline if asked.
fn analysed(program: &Path, args: &[&str], calls: CallMode, timeline: bool) -> PathAnalysis {
    let options = LackeyOptions { valgrind: "valgrind".into(), program: program.to_path_buf(), args: args.iter().map(|s| s.to_string()).collect() };
    let mut run = spawn_tool(&options).expect("valgrind starts with kansoku's tool (built by kansoku-probe's build.rs)");
    let mut bytes = Vec::new();
    run.output.read_to_end(&mut bytes).unwrap();
    let (exit, log) = run.wait().unwrap();
    let resolved = run.program.clone();
    let mut a = PathAnalysis::new(&AnalysisOptions {
        calls,
        back_edges: BackEdgeMode::Address,
        scope: Scope::Program,
        program: Some(resolved.to_string_lossy().into()),
        track_edges: false,
        track_calls: true,
    });
    if timeline {
        a.keep_call_timeline();
    }
    a.feed_tool_stream(&bytes);
    a.feed_valgrind_log(&log);
    a.set_exit(exit);
    a.finish().unwrap();
    a
}

fn fib_calls(n: u64) -> u64 {
    // fib(n) calls itself 2·F(n+1) − 1 times in all, counting the outer call.
    let (mut a, mut b) = (0u64, 1u64);
    for _ in 0..n + 1 {
        (a, b) = (b, a + b);
    }
    2 * a - 1
}

#[test]
fn costs_of_recursive_fibonacci() {
    let program = build("recursion", &test_build_dir()).unwrap();
    let (n, repeat) = (12u64, 3u64);
    for calls in [CallMode::Split, CallMode::Frames] {
        let (report, costs) = analyse(&program, &[&n.to_string(), &repeat.to_string()], calls);
        // Every in-scope instruction once: per instruction, per function, per stack.
        assert_eq!(costs.total_instructions, report.summary.instructions_executed);
        let stacks: u64 = costs.stacks.iter().map(|s| s.instructions).sum();
        assert_eq!(stacks, costs.total_instructions);
        // Per function, the report's figure, except that the PLT stubs' instructions (and
        // the lazy binder's PLT0, outside every function) are their callers' (Callgrind's
        // --skip-plt): main calls atoi@plt and printf@plt.
        let cost_of = |name: &str| costs.functions.iter().find(|f| f.name == name).map_or(0, |f| f.self_instructions);
        let in_functions: u64 = report.functions.iter().map(|r| r.instructions).sum();
        let stubs: u64 = report.functions.iter().filter(|r| r.function.ends_with("@plt")).map(|r| r.instructions).sum::<u64>() + report.summary.instructions_executed - in_functions;
        assert!(stubs > 0, "main calls through PLT stubs");
        for row in report.functions.iter().filter(|r| !r.function.ends_with("@plt")) {
            if ["fib", "work", "twice"].contains(&row.function.as_str()) {
                assert_eq!(cost_of(&row.function), row.instructions, "{}", row.function);
            } else {
                // main and the startup and exit code call through stubs
                assert!((row.instructions..=row.instructions + stubs).contains(&cost_of(&row.function)), "{}: {} + stubs {stubs}", row.function, row.instructions);
            }
        }
        let index = |name: &str| costs.functions.iter().position(|f| f.name == name).unwrap();
        let (main, work, fib) = (index("main"), index("work"), index("fib"));
        let arcs = |from: usize, to: usize| -> (u64, u64) {
            costs.calls.iter().filter(|c| c.caller == from && c.callee == to).fold((0, 0), |(n, i), c| (n + c.calls, i + c.inclusive))
        };
        // main calls work once per repeat; work calls fib once; fib calls itself.
        assert_eq!(arcs(main, work).0, repeat);
        assert_eq!(arcs(work, fib).0, repeat);
        assert_eq!(arcs(fib, fib).0, repeat * (fib_calls(n) - 1));
        // All of fib's instructions ran below work's calls of it.
        assert_eq!(arcs(work, fib).1, costs.functions[fib].self_instructions);
        // The deepest stack holds fib(n), fib(n−1), …, fib(1): n frames of fib under work.
        let deepest = costs.stacks.iter().map(|s| s.frames.iter().filter(|&&f| f == fib).count()).max().unwrap();
        assert_eq!(deepest as u64, n);
        let under_work = costs.stacks.iter().filter(|s| s.frames.contains(&fib)).all(|s| {
            let w = s.frames.iter().position(|&f| f == work).unwrap();
            s.frames[w - 1] == main && s.frames[w + 1..].iter().all(|&f| f == fib || f == index("twice"))
        });
        assert!(under_work, "every stack with fib goes main → work → fib…");
        // Source lines: fib's instructions are in recursion.c.
        assert!(costs.functions[fib].instructions.iter().all(|i| i.file.as_deref().is_some_and(|f| f.ends_with("recursion.c")) && i.line.is_some()));
    }
}

#[test]
fn call_timeline_of_recursive_fibonacci_nests_every_call_the_costs_count() {
    let program = build("recursion", &test_build_dir()).unwrap();
    let (n, repeat) = (10u64, 2u64);
    let mut a = analysed(&program, &[&n.to_string(), &repeat.to_string()], CallMode::Split, true);
    let costs = a.costs();
    let t = a.call_timeline().expect("the timeline was kept");
    let named = |name: &str| t.functions.iter().position(|f| f == name).unwrap();
    let (work, fib) = (named("work"), named("fib"));
    let spans = |f: usize| t.calls.iter().filter(move |c| c.function == f);
    // as many calls as the call arcs count
    let arc_calls = |name: &str| costs.calls.iter().filter(|c| costs.functions[c.callee].name == name).map(|c| c.calls).sum::<u64>();
    assert_eq!(spans(fib).count() as u64, repeat * fib_calls(n));
    assert_eq!(spans(fib).count() as u64, arc_calls("fib"));
    assert_eq!(spans(work).count() as u64, arc_calls("work"));
    // every fib lies inside a work call, and n fib calls are open at the deepest point
    for c in spans(fib) {
        assert!(spans(work).any(|w| w.tid == c.tid && w.start < c.start && c.end <= w.end), "{c:?} inside a work call");
        assert!(c.start < c.end && c.end <= t.instructions);
    }
    let depth = spans(fib).map(|c| spans(fib).filter(|o| o.start <= c.start && c.end <= o.end).count()).max().unwrap();
    assert_eq!(depth as u64, n);
}
