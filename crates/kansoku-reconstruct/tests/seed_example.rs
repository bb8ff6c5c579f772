//! The seed's worked example, solvers on synthetic data, and bad input.

use kansoku_reconstruct::sampling::{seed_example, Sampler};
use kansoku_reconstruct::*;

fn options(solver: Solver, split: Split, period: Option<u64>) -> Options {
    Options {
        split,
        solver,
        scores: Scores::defaults(Granularity::Function, Weighting::Count),
        period,
        top_k: 1,
        linkage: patent::Linkage::default(),
        sequences: None,
        stop: None,
        class: None,
    }
}

fn run(obs: &[Observation], names: &Names, o: &Options) -> Reconstruction {
    reconstruct(obs, names, o, &mut |_, _| {}).unwrap()
}

#[test]
fn seed_worked_example_patent_rebuilds_the_50_instructions() {
    let (names, obs, truth) = seed_example(7, 7);
    // The seed's loop as written (merged traces compared from the head) and with single
    // linkage (the default).
    for linkage in [patent::Linkage::Head, patent::Linkage::Member] {
        let r = run(&obs, &names, &Options { linkage, ..options(Solver::Patent, Split::Marker, Some(7)) });
        // Seven partial sequences P-1..P-7, 50 samples: exactly one per position.
        assert_eq!(r.split.non_empty, 7);
        assert_eq!(r.samples_used, 50);
        assert_eq!(r.linkage, Some(linkage));
        let got: Vec<String> = r.trace.iter().map(|i| i.display(&names, Granularity::Function)).collect();
        let want: Vec<String> = truth.iter().map(|i| i.display(&names, Granularity::Function)).collect();
        assert_eq!(got, want, "{linkage:?}");
        assert_eq!(r.trace.len(), 50);
    }
}

#[test]
fn seed_worked_example_every_solver_and_split() {
    let (names, obs, truth) = seed_example(7, 40);
    let addrs: Vec<u64> = truth.iter().map(|i| i.addr).collect();
    for solver in [Solver::Patent, Solver::Exact, Solver::Phase] {
        for split in [Split::Marker, Split::Count { instructions: 50 }] {
            let r = run(&obs, &names, &options(solver, split.clone(), Some(7)));
            let got: Vec<u64> = r.trace.iter().map(|i| i.addr).collect();
            if split == Split::Marker {
                let c = compare(&got, &addrs);
                assert_eq!(c.lcs_ratio, 1.0, "{solver:?} {split:?}: {got:x?}");
                assert_eq!(c.position_accuracy, 1.0, "{solver:?} {split:?}");
            } else {
                // Cutting every T/P samples does not know where an iteration starts: the
                // result is the iteration's cycle, starting elsewhere.
                assert_eq!(got.len(), 50, "{solver:?}");
                let start = got.iter().position(|&a| a == addrs[0]).unwrap();
                let rotated: Vec<u64> = got[start..].iter().chain(&got[..start]).copied().collect();
                assert_eq!(rotated, addrs, "{solver:?} {split:?}: {got:x?}");
            }
        }
    }
}

#[test]
fn count_split_without_counts_falls_back_from_phase() {
    let (names, obs, _) = seed_example(7, 7);
    let r = run(&obs, &names, &options(Solver::Phase, Split::Count { instructions: 50 }, Some(7)));
    assert_eq!(r.solver, Solver::Patent);
    assert!(r.fallback.as_deref().unwrap().contains("phase does not apply"), "{:?}", r.fallback);
}

#[test]
fn exact_solver_reports_optimality() {
    let (names, obs, _) = seed_example(7, 7);
    let r = run(&obs, &names, &options(Solver::Exact, Split::Marker, Some(7)));
    assert_eq!(r.optimal, Some(true));
    assert_eq!(r.optimality_gap, Some(0.0));
    // 997 > 50: each iteration holds at most one sample; 50 singletons, heuristic.
    let (names, obs, truth) = seed_example(997, 997);
    let r = run(&obs, &names, &options(Solver::Exact, Split::Marker, Some(997)));
    assert_eq!(r.optimal, Some(false));
    let gap = r.optimality_gap.unwrap();
    assert!((0.0..1.0).contains(&gap), "gap {gap}");
    assert!(r.upper_bound.unwrap() >= r.likelihood.unwrap());
    // With P > T every sequence is one sample: the order of functions is not in the data
    // (every call/return scores as a mismatch either way), but the order found must be at
    // least as likely as the true one, and every instruction must be there once.
    let singles: Vec<&[Info]> = truth.iter().map(std::slice::from_ref).collect();
    let scores = Scores::defaults(Granularity::Function, Weighting::Count);
    assert!(r.likelihood.unwrap() >= merge::order_likelihood(&scores, &singles));
    let mut got: Vec<u64> = r.trace.iter().map(|i| i.addr).collect();
    let mut want: Vec<u64> = truth.iter().map(|i| i.addr).collect();
    got.sort_unstable();
    want.sort_unstable();
    assert_eq!(got, want);
}

#[test]
fn bad_input_gives_clear_errors() {
    let (names, obs, _) = seed_example(7, 7);
    let no_markers: Vec<Observation> = obs.iter().copied().filter(|o| matches!(o, Observation::Sample { .. })).collect();
    let e = reconstruct(&no_markers, &names, &options(Solver::Patent, Split::Marker, Some(7)), &mut |_, _| {}).unwrap_err();
    assert!(e.to_string().contains("no marker events"), "{e}");
    let e = reconstruct(&[], &names, &options(Solver::Patent, Split::Marker, Some(7)), &mut |_, _| {}).unwrap_err();
    assert!(e.to_string().contains("no samples"), "{e}");
    let e = reconstruct(&obs, &names, &options(Solver::Patent, Split::Count { instructions: 50 }, Some(0)), &mut |_, _| {}).unwrap_err();
    assert!(e.to_string().contains("period must be at least 1"), "{e}");
    assert!(Sampler::new(0, 0, 1).is_err());
    assert!("count:0".parse::<Split>().unwrap_err().to_string().contains("at least 1"));
    assert!("bogus".parse::<Split>().is_err());
    let e = reconstruct(&obs, &names, &options(Solver::Patent, Split::Function("nope".into()), Some(7)), &mut |_, _| {}).unwrap_err();
    assert!(e.to_string().contains("no sample lies in function nope"), "{e}");
    let e = reconstruct(&obs, &names, &options(Solver::Patent, Split::Count { instructions: 50 }, None), &mut |_, _| {}).unwrap_err();
    assert!(e.to_string().contains("needs the sampling period"), "{e}");
}

#[test]
fn function_split_on_the_seed_example() {
    let (names, obs, truth) = seed_example(7, 7);
    let r = run(&obs, &names, &options(Solver::Patent, Split::Function("func_A".into()), Some(7)));
    let got: Vec<u64> = r.trace.iter().map(|i| i.addr).collect();
    let want: Vec<u64> = truth.iter().map(|i| i.addr).collect();
    // Cut where func_A starts: the first iteration's samples before func_A is sampled are
    // dropped, so the sequences differ from marker cuts; the trace must still be close.
    let c = compare(&got, &want);
    assert!(c.lcs_ratio >= 0.9, "{c:?}");
}

#[test]
fn sampler_samples_every_period_with_markers() {
    use kansoku_core::Event;
    let mut s = Sampler::new(3, 0, 1).unwrap();
    let mut out = Vec::new();
    s.feed(&Event::Marker { time_ns: 0, instructions: Some(0) }, &mut |e| out.push(e));
    for a in 0..10u64 {
        s.feed(&Event::Instruction { addr: 0x100 + a }, &mut |e| out.push(e));
    }
    let ips: Vec<(u64, Option<u64>)> = out
        .iter()
        .filter_map(|e| match e {
            Event::Sample(s) => Some((s.ip, s.instructions)),
            _ => None,
        })
        .collect();
    assert_eq!(ips, vec![(0x102, Some(2)), (0x105, Some(5)), (0x108, Some(8))]);
    // With skid the reported instruction is at most `skid` later and counts stay consistent.
    let mut s = Sampler::new(5, 2, 7).unwrap();
    let mut samples = Vec::new();
    for a in 0..1000u64 {
        s.feed(&Event::Instruction { addr: a }, &mut |e| {
            if let Event::Sample(x) = e {
                samples.push(x)
            }
        });
    }
    assert!(samples.len() >= 198);
    for (k, x) in samples.iter().enumerate() {
        let overflow = 5 * k as u64 + 4;
        assert!(x.ip >= overflow && x.ip <= overflow + 2, "{x:?}");
        assert_eq!(x.instructions, Some(x.ip));
    }
}

/// Ctrl-C (`Options::stop`): the solvers return at once with every sampled instruction of
/// the sequences used, marked interrupted; the witness search is skipped.
#[test]
fn a_stop_returns_the_trace_so_far() {
    // Period 101 > 50 instructions: 50 one-sample sequences, beyond Held–Karp's 13, so
    // the exact solver starts from the seed's loop too.
    let (names, obs, _) = seed_example(101, 120);
    for solver in [Solver::Patent, Solver::Exact] {
        let o = Options { stop: Some(|| true), ..options(solver, Split::Marker, Some(101)) };
        let r = run(&obs, &names, &o);
        assert!(r.sequences_used > exact::EXACT_LIMIT, "{}", r.sequences_used);
        assert!(r.interrupted, "{solver:?}");
        assert_eq!(r.length, r.samples_used, "{solver:?}");
        assert_eq!(r.alternative_checked, Some(false));
        let o = Options { stop: Some(|| false), ..options(solver, Split::Marker, Some(101)) };
        assert!(!run(&obs, &names, &o).interrupted);
    }
}

/// Observations with the marker hits no sample separates collapsed, as `load_samples` reads them.
fn compacted(obs: &[Observation]) -> Vec<Observation> {
    let mut c = kansoku_reconstruct::info::Compactor::default();
    for o in obs {
        c.push(*o);
    }
    c.finish()
}

#[test]
fn collapsed_marker_hits_reconstruct_the_same() {
    // Iterations of 50 instructions: at period 997 most hold no sample and collapse into runs.
    for period in [7, 31, 101, 997] {
        let (names, obs, _) = seed_example(period, 3000);
        let short = compacted(&obs);
        if period > 500 {
            assert!(short.len() * 2 < obs.len(), "period {period}: {} of {}", short.len(), obs.len());
        }
        for solver in [Solver::Phase, Solver::Patent] {
            let o = options(solver, Split::Marker, Some(period));
            let (a, b) = (run(&obs, &names, &o), run(&short, &names, &o));
            assert_eq!(a.trace, b.trace, "period {period} {solver:?}");
            assert_eq!(serde_json::to_value(&a.split).unwrap(), serde_json::to_value(&b.split).unwrap(), "period {period}");
            assert_eq!((a.coverage_warning, a.missing_warning), (b.coverage_warning, b.missing_warning));
        }
    }
    // Iterations of three lengths (an odd first one, then 40 and 60 alternating in runs),
    // a sample in every 29th: the same classes, shares and first iterations.
    let mut names = Names::new();
    let f = names.intern("f");
    let (mut obs, mut at) = (Vec::new(), 0u64);
    for i in 0..700u64 {
        obs.push(Observation::Marker { time_ns: at, instructions: Some(at) });
        let length = if i == 0 { 150 } else if (i / 10) % 3 == 0 { 60 } else { 40 };
        if i % 29 == 3 {
            obs.push(Observation::Sample { info: Info::new(f, 1, 0x1004), time_ns: at + 1, instructions: Some(at + 1) });
        }
        at += length;
    }
    obs.push(Observation::Marker { time_ns: at, instructions: Some(at) });
    let short = compacted(&obs);
    assert!(short.len() * 2 < obs.len());
    let o = options(Solver::Patent, Split::Marker, Some(7));
    let (a, b) = (run(&obs, &names, &o), run(&short, &names, &o));
    assert_eq!(a.classes, b.classes);
    assert_eq!(a.classes.as_ref().map(Vec::len), Some(3));
    assert_eq!(serde_json::to_value(&a.split).unwrap(), serde_json::to_value(&b.split).unwrap());
}
