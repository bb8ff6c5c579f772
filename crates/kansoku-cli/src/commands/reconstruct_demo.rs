//! The demo's seed-000 stage: an exact trace of seed000 sampled and rebuilt by each
//! solver, drawn against the exact trace, and real recordings by `kansoku record`.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use kansoku_reconstruct::trace_file::read_trace;
use kansoku_reconstruct::truth::{compare_weighted, exact_iteration};
use kansoku_reconstruct::{Likelihood, Reconstruction, Request, Solver, Weighting};

use super::reconstruct::{reconstruct_with_bar, timeline_svg};
use crate::output::Table;

/// Demo stage on seed000 (func_M is the repeated region): its exact trace of 60 calls,
/// sampled every 7 instructions and rebuilt by each solver; sampled every 101 (more than
/// two iterations per sample) and rebuilt with the seed's and the control-flow scores,
/// drawn as a timeline against the exact trace; and a real recording by `kansoku record`.
pub fn demo_stage(dir: &Path) -> Result<String> {
    let program = kansoku_examples::build("seed000", &dir.join("bin"))?;
    let exact = dir.join("seed000-200.ksk");
    let options = kansoku_probe::ExactTraceOptions {
        engine: kansoku_probe::Engine::best().0,
        program: program.clone(),
        args: vec!["1000".into()],
        marker: Some("func_M".into()),
        iterations: Some(200),
        max_instructions: None,
        data: false,
    };
    super::trace::record_exact(&options, &exact)?;
    let mut text = String::new();
    let mut t = Table::new(&["samples", "solver", "scores", ">length", ">lcs_ratio", ">position_accuracy", "another order as likely"]);
    let runs = [
        (7, Solver::Patent, Likelihood::Seed),
        (7, Solver::Exact, Likelihood::Seed),
        (7, Solver::Phase, Likelihood::Seed),
        (101, Solver::Patent, Likelihood::Seed),
        (101, Solver::Patent, Likelihood::Cfg),
    ];
    for period in [7, 101] {
        let rec = dir.join(format!("seed000-p{period}.ksk"));
        let s = super::sample::sample_exact(&exact, &rec, period, 0, 1)?;
        text.push_str(&format!("exact trace of 200 calls of func_M sampled every {period} instructions: {} samples -> {}\n", s.samples, rec.display()));
    }
    for (period, solver, likelihood) in runs {
        let name = format!("seed000-p{period}-{solver:?}-{likelihood:?}.trace").to_lowercase();
        let request = demo_request(dir.join(format!("seed000-p{period}.ksk")), solver, likelihood, None, &exact, dir.join(name));
        let (report, _) = reconstruct_with_bar(&request)?;
        let c = report.comparison.expect("compared");
        let row = [format!("every {period}"), format!("{solver:?}"), format!("{likelihood:?}")].map(|x| x.to_lowercase());
        let witness = witness_cell(&report.reconstruction);
        t.row(vec![row[0].clone(), row[1].clone(), row[2].clone(), c.reconstructed_length.to_string(), format!("{:.4}", c.lcs_ratio), format!("{:.4}", c.position_accuracy), witness]);
    }
    text.push_str(&t.render());
    let svg = dir.join("seed000-p101-timeline.svg");
    let truth = exact_iteration(&exact, 0)?;
    let seed = read_trace(&dir.join("seed000-p101-patent-seed.trace"))?;
    let cfg = read_trace(&dir.join("seed000-p101-patent-cfg.trace"))?;
    let rows = [("exact", truth.as_slice(), None), ("patent, seed scores", &seed.keys, seed.uncertain), ("patent, cfg scores", &cfg.keys, cfg.uncertain)];
    std::fs::write(&svg, timeline_svg(&rows, "seed000 func_M sampled every 101 instructions: one iteration rebuilt")).with_context(|| format!("writing {}", svg.display()))?;
    text.push_str(&format!(
        "picture: {} (exact trace above the two reconstructions; the strip marks where the seed scores' one differs; a hatched frame, where another order scores as well)\n",
        svg.display()
    ));
    text.push_str(&demo_recording(dir, &program, &exact)?);
    text.push_str(&demo_marker_share(dir)?);
    text.push_str(&format!("rerun: kansoku reconstruct {}/seed000-p101.ksk --likelihood cfg --exact {}", dir.display(), exact.display()));
    Ok(text)
}

/// The demo's witness column: none found, or the span where another order, at least as
/// likely, differs.
fn witness_cell(rec: &Reconstruction) -> String {
    match (&rec.alternative, rec.likelihood) {
        (Some(a), Some(l)) if a.likelihood > l => format!("more likely, differs at {}..{}", a.first_difference, a.last_difference),
        (Some(a), _) => format!("yes, differs at {}..{}", a.first_difference, a.last_difference),
        (None, _) if rec.alternative_checked == Some(true) => "none found".into(),
        (None, _) => "-".into(),
    }
}

/// `kansoku reconstruct REC --solver S --likelihood L [--sequences N] --exact EXACT -o OUT`.
fn demo_request(recording: PathBuf, solver: Solver, likelihood: Likelihood, sequences: Option<usize>, exact: &Path, output: PathBuf) -> Request {
    Request {
        solver: Some(solver),
        likelihood: Some(likelihood),
        sequences,
        exact: Some(exact.to_path_buf()),
        output: Some(output),
        stop: Some(kansoku_probe::interrupt::requested),
        ..Request::new(recording)
    }
}

/// How much of a recording lands in the marker probe's own code: on seed000 (16 ns an
/// iteration) a probe of ~50 ns is most of the time; on the events example (~9 µs a round)
/// it is under 1 %. The share is the probe's cost over an iteration's.
fn demo_marker_share(dir: &Path) -> Result<String> {
    let program = kansoku_examples::build("events", &dir.join("bin"))?;
    // every 20 µs: at 10 µs the timer interrupts themselves slow the probe's code (cold
    // caches after each) and its share doubles
    let clock = kansoku_probe::perf::SamplingClock::CpuClock { period_ns: 20_000 };
    if !super::record::marker_by_agent(&program, clock, None) {
        return Ok("marker share on the events example: skipped (the agent does not apply here)\n".into());
    }
    let rec = dir.join("events-recorded.ksk");
    let o = super::record::record(&program, &["100000".into(), "0".into()], clock, Some("spin"), true, &rec)?;
    let all = o.samples + o.in_probe;
    Ok(format!(
        "kansoku record of the events example (100000 rounds of ~9 us, cpu-clock every 20 us, marker spin by the agent): {} of {} samples in the probe's code ({:.2} %), dropped -> {}\n",
        o.in_probe,
        all,
        100.0 * o.in_probe as f64 / all.max(1) as f64,
        rec.display()
    ))
}

/// A real recording of seed000 by `kansoku record` (hardware counter, or the cpu-clock
/// fallback with the reason), rebuilt by the patent solver and scored.
fn demo_recording(dir: &Path, program: &Path, exact: &Path) -> Result<String> {
    let (clock, fallback) = super::record::choose_clock(Some(100_003), None)?;
    let rec = dir.join("seed000-recorded.ksk");
    let by_agent = super::record::marker_by_agent(program, clock, None);
    let o = super::record::record(program, &["20000".into()], clock, Some("func_M"), by_agent, &rec)?;
    let mut text = format!(
        "kansoku record of seed000 (20000 calls of func_M): {} samples, {} marker hits by {} ({} samples in the probe's code, dropped) -> {}\n",
        o.samples,
        o.markers,
        if by_agent { "the agent" } else { "uprobe" },
        o.in_probe,
        rec.display()
    );
    if let Some(why) = fallback {
        text.push_str(&format!("  note: {why}\n"));
    }
    // a time recording has no instruction count to choose "one iteration's worth" by
    let trace_path = dir.join("seed000-recorded-patent.trace");
    let request = demo_request(rec.clone(), Solver::Patent, Likelihood::Seed, Some(2000), exact, trace_path.clone());
    let (report, _) = reconstruct_with_bar(&request)?;
    let c = report.comparison.expect("compared");
    text.push_str(&format!(
        "  patent solver: {} instructions ({}), lcs_ratio {:.4} against the exact iteration of {}\n",
        c.reconstructed_length,
        if report.weighting == Weighting::Time { "execution-time-weighted" } else { "one per instruction" },
        c.lcs_ratio,
        c.true_length
    ));
    if report.weighting == Weighting::Time {
        let w = compare_weighted(&read_trace(&trace_path)?, exact, 0, &rec)?;
        text.push_str(&format!(
            "  judged as a time-weighted trace: order_ratio {:.4} ({} of {} steps in order), coverage {:.4} ({} of {} distinct instructions), time share distance {:.4} by function, {:.4} by block (sampled time vs instruction counts: {:.4})\n",
            w.order.order_ratio,
            w.order.lcs,
            w.order.trace_runs,
            w.order.coverage,
            w.order.shown_distinct,
            w.order.exact_distinct,
            w.functions.distance,
            w.blocks.distance,
            w.functions.instruction_distance.unwrap_or(0.0)
        ));
        text.push_str(&format!("  rerun: kansoku compare {} {}\n", trace_path.display(), exact.display()));
    }
    Ok(text)
}
