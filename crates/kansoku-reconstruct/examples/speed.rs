//! Reconstruction speed: N partial sequences of L samples each (default 10,000 × 20) from
//! a synthetic program trace (functions with straight runs, loops and calls), solved with
//! the seed's loop. Prints the time and the LCS ratio against the synthetic truth.
//!
//!     cargo run --release -p kansoku-reconstruct --example speed [N] [L] [TOP_K] [member|head|full]
//!
//! `full` goes through [`reconstruct`] as `kansoku reconstruct` does: one marker per
//! iteration (with instruction counts, so one iteration's worth of sequences is chosen),
//! identical sequences merged, and beyond `QUADRATIC_LIMIT` sequences the
//! candidate-neighbour ordering ([`kansoku_reconstruct::chain`]). `NO_LCS=1` skips the
//! comparison with the truth (its bit-parallel LCS dominates the run at 10^5 × 20).

use std::time::Instant;

use kansoku_reconstruct::merge::round_robin;
use kansoku_reconstruct::patent::{solve_patent, Linkage};
use kansoku_reconstruct::{compare, reconstruct, Granularity, Info, Names, Observation, Options, Scores, Solver, Split, Weighting};

fn main() {
    let mode = std::env::args().nth(4).unwrap_or_else(|| "member".into());
    let full = mode == "full";
    let linkage: Linkage = if full { Linkage::Member } else { mode.parse().expect("member, head or full") };
    let args: Vec<usize> = std::env::args().skip(1).take(3).map(|a| a.parse().expect("numbers")).collect();
    let n = args.first().copied().unwrap_or(10_000);
    let len = args.get(1).copied().unwrap_or(20);
    let top_k = args.get(2).copied().unwrap_or(1);
    let p = n; // period: n phases, one sequence each
    let t = n * len; // iteration length: every sequence holds exactly `len` samples
    let mut rng = 0x2545_f491_4f6c_dd1du64;
    let mut next = move || {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng
    };
    // Synthetic trace: 40 functions of 20..400 instructions; run straight, sometimes loop
    // back, sometimes call another function for a while and return.
    let sizes: Vec<i32> = (0..40).map(|_| 20 + (next() % 380) as i32).collect();
    let mut truth: Vec<Info> = Vec::with_capacity(t);
    let mut stack: Vec<(u32, i32)> = vec![(0, 0)];
    while truth.len() < t {
        let (f, o) = *stack.last().unwrap();
        truth.push(Info::new(f, o, ((f as u64) << 20) | o as u64));
        let r = next() % 100;
        let depth = stack.len();
        let size = sizes[f as usize];
        if r < 3 && depth < 6 {
            stack.last_mut().unwrap().1 = (o + 1) % size;
            let callee = (next() % 40) as u32;
            stack.push((callee, 0));
        } else if r < 6 && o > 8 {
            let back = (next() % 8) as i32;
            stack.last_mut().unwrap().1 = o - 1 - back;
        } else if o + 1 >= size {
            if depth > 1 {
                stack.pop();
            } else {
                stack.last_mut().unwrap().1 = 0;
            }
        } else {
            stack.last_mut().unwrap().1 = o + 1;
        }
    }
    // Sequence of phase r: positions r, r+P, ...; iterations arrive in a scrambled order.
    let mut phases: Vec<usize> = (0..p).collect();
    for i in (1..p).rev() {
        phases.swap(i, (next() % (i as u64 + 1)) as usize);
    }
    let sequences: Vec<Vec<Info>> = phases.iter().map(|&r| (0..len).map(|k| truth[r + k * p]).collect()).collect();
    let scores = Scores::defaults(Granularity::Function, Weighting::Count);
    if full {
        let mut observations = Vec::with_capacity(n * (len + 1) + 1);
        for (i, s) in sequences.iter().enumerate() {
            let at = (i * t) as u64;
            observations.push(Observation::Marker { time_ns: at, instructions: Some(at) });
            for (k, info) in s.iter().enumerate() {
                observations.push(Observation::Sample { info: *info, time_ns: at + k as u64, instructions: None });
            }
        }
        observations.push(Observation::Marker { time_ns: (n * t) as u64, instructions: Some((n * t) as u64) });
        let options = Options { split: Split::Marker, solver: Solver::Patent, scores, period: Some(p as u64), top_k, linkage, sequences: None, stop: None, class: None };
        let start = Instant::now();
        let r = reconstruct(&observations, &Names::new(), &options, &mut |_, _| {}).expect("reconstructs");
        let seconds = start.elapsed().as_secs_f64();
        let how = match &r.chain {
            Some(ch) => format!("candidate-neighbour ordering ({} pairs kept, {} chains)", ch.pairs_scored, ch.chains),
            None => format!("patent solver, top-k {top_k}"),
        };
        println!("reconstruct: {n} partial sequences x {len} samples ({t} instructions), {} distinct, {} used, {how}: {seconds:.2} s", r.distinct_sequences, r.sequences_used);
        if std::env::var_os("NO_LCS").is_some() {
            return;
        }
        // The LCS needs one bit row per distinct instruction: minutes and GBs at 2 M.
        let got: Vec<u64> = r.trace.iter().map(|i| i.addr).collect();
        let want: Vec<u64> = truth.iter().map(|i| i.addr).collect();
        let c = compare(&got, &want);
        println!("lcs_ratio {:.4}, position_accuracy {:.4}", c.lcs_ratio, c.position_accuracy);
        return;
    }
    let start = Instant::now();
    let result = solve_patent(&scores, &sequences, top_k, linkage, &mut |_, _| {});
    let seconds = start.elapsed().as_secs_f64();
    let refs: Vec<&[Info]> = result.order.iter().map(|&i| sequences[i].as_slice()).collect();
    assert_eq!(round_robin(&refs).len(), t);
    let got: Vec<u64> = result.trace.iter().map(|i| i.addr).collect();
    let want: Vec<u64> = truth.iter().map(|i| i.addr).collect();
    let c = compare(&got, &want);
    println!("patent solver: {n} partial sequences x {len} samples ({t} instructions), top-k {top_k}, {linkage:?} linkage: {seconds:.2} s, {} merges, {} rescans", result.merges, result.rescans);
    println!("lcs_ratio {:.4}, position_accuracy {:.4}", c.lcs_ratio, c.position_accuracy);
    println!("goal: <= 10 s -> {}", if seconds <= 10.0 { "met" } else { "NOT met" });
}
