//! `kansoku reconstruct REC.ksk [--by function|block] [--split marker|count:T|function:NAME]
//! [--solver patent|exact|phase] [--scores FILE] [--top-k K] [--json] -o TRACE` and
//! `kansoku compare TRACE EXACT.ksk [--json]` (seed 000): options parsed, the work done by
//! `kansoku_reconstruct` (its `report`, `truth` and `trace_file` modules), the outcome printed.

use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use kansoku_core::{Event, RecordingReader};
use kansoku_reconstruct::patent::Linkage;
use kansoku_reconstruct::trace_file::read_trace;
use kansoku_reconstruct::truth::{compare_keys, compare_weighted, engine_note, exact_iteration, iteration_of_class, CompareReport, WeightedComparison};
use kansoku_reconstruct::{reconstruct_file, Comparison, Granularity, Likelihood, Reconstruction, Report, Request, Solver, Split, Weighting};

use crate::output::{print_json, Print, Table};

#[derive(clap::Args, Clone)]
pub struct Args {
    /// A sampled recording (`kansoku record` or `kansoku sample`).
    pub recording: PathBuf,
    /// Instruction information: function (function, offset) or block (function, BB, offset).
    #[arg(long, default_value = "function")]
    pub by: Granularity,
    /// How to cut the samples into partial sequences: marker, count:T (T instructions per
    /// iteration) or function:NAME.
    #[arg(long, default_value = "marker")]
    pub split: Split,
    /// patent (the seed's loop), exact (global order) or phase (placement by instruction
    /// count). Default: phase when the recording has instruction counts at samples and
    /// marker hits (--split marker), else patent; the choice is printed.
    #[arg(long)]
    pub solver: Option<Solver>,
    /// Similarity and likelihood tables (TOML, or JSON by extension) overriding the defaults.
    #[arg(long)]
    pub scores: Option<PathBuf>,
    /// Where pair scores come from: seed (the seed's tables: offset differences inside a
    /// function, every call and return a mismatch) or cfg (beyond the seed: distances
    /// along the program's control-flow graph, decoded from the binary, so calls and
    /// returns score like neighbours; both similarity and likelihood). Default: cfg when
    /// the recorded program can be read, else seed; the choice is printed.
    #[arg(long)]
    pub likelihood: Option<Likelihood>,
    /// Patent solver: try the K most similar pairs each round, keep the most likely merge;
    /// 0 runs the loop with K = 1, 2, 4, 8, 16 and keeps the most likely result. Default:
    /// 1 with the seed's scores, 0 with --likelihood cfg.
    #[arg(long)]
    pub top_k: Option<usize>,
    /// Patent solver: how similar two merged groups are. member (default, beyond the seed):
    /// as similar as their most similar original sequences; head (the seed): their merged
    /// traces compared from the head, like two original sequences.
    #[arg(long, default_value = "member")]
    pub linkage: Linkage,
    /// Use at most N partial sequences (default: enough to cover one iteration once when
    /// its length is known, else all).
    #[arg(long)]
    pub sequences: Option<usize>,
    /// Sampling period in instructions, when the recording does not say.
    #[arg(long)]
    pub period: Option<u64>,
    /// Rebuild the iterations this many instructions long (between marker hits). Default:
    /// when iterations differ in length, the class with the most iterations, and with -o
    /// each other class holding at least one sample per instruction into OUTPUT.class-LENGTH.
    #[arg(long)]
    pub class: Option<u64>,
    /// Score the result against this exact trace (its first complete iteration).
    #[arg(long)]
    pub exact: Option<PathBuf>,
    /// The trace file to write (default: print the trace).
    #[arg(short, long)]
    pub output: Option<PathBuf>,
    #[arg(long)]
    pub json: bool,
    /// Also write the reconstructed iteration for a viewer, as FORMAT=FILE: `perfetto`
    /// (its calls, recovered from the instructions as `kansoku paths` recovers them, as
    /// nested slices on the instruction index; open it at ui.perfetto.dev).
    #[arg(long, value_name = "FORMAT=FILE", value_parser = crate::exports::parse_export)]
    pub export: Vec<crate::exports::Export>,
}

impl Args {
    /// What the library is asked to do.
    pub fn request(&self) -> Request {
        Request {
            recording: self.recording.clone(),
            by: self.by,
            split: self.split.clone(),
            solver: self.solver,
            scores: self.scores.clone(),
            likelihood: self.likelihood,
            top_k: self.top_k,
            linkage: self.linkage,
            sequences: self.sequences,
            period: self.period,
            class: self.class,
            exact: self.exact.clone(),
            output: self.output.clone(),
            // Ctrl-C stops the solvers, which return the best trace so far.
            stop: Some(kansoku_probe::interrupt::requested),
        }
    }
}

#[derive(clap::Args)]
pub struct CompareArgs {
    /// A reconstructed trace (`kansoku reconstruct -o`).
    pub trace: PathBuf,
    /// The exact trace; its first complete marker-to-marker iteration (or all of it without markers).
    pub exact: PathBuf,
    /// Which complete iteration of the exact trace to compare with (0 = first). Default:
    /// the first of the trace's own class (the length its file names), else 0.
    #[arg(long)]
    pub iteration: Option<usize>,
    /// Also draw both traces as a timeline coloured by function, with the positions
    /// where they differ marked.
    #[arg(long)]
    pub svg: Option<PathBuf>,
    /// The sampled recording the trace was rebuilt from, for the time shares of a
    /// time-weighted trace (default: the recording the trace file names).
    #[arg(long)]
    pub samples: Option<PathBuf>,
    #[arg(long)]
    pub json: bool,
}

/// [`reconstruct_file`] with a progress bar; shared with the demo.
pub fn reconstruct_with_bar(request: &Request) -> Result<(Report, Vec<String>)> {
    if request.period == Some(0) {
        bail!("--period must be at least 1 (got 0)");
    }
    let bar = crate::output::bar("reconstructing", 0);
    let out = reconstruct_file(request, &mut |done, total| {
        bar.set_length(total as u64);
        bar.set_position(done as u64)
    })?;
    bar.finish_and_clear();
    Ok(out)
}

pub fn run(args: Args) -> Result<()> {
    // Ctrl-C stops the solvers, which return the best trace so far.
    kansoku_probe::interrupt::install();
    let export_files = crate::exports::create_exports(&args.export, &[kansoku_export::Format::Perfetto], "kansoku reconstruct")?;
    let (report, lines) = reconstruct_with_bar(&args.request())?;
    for ((format, path), file) in args.export.iter().zip(export_files) {
        write_reconstructed_timeline(&args, &report, std::io::BufWriter::new(file)).with_context(|| format!("writing {}", path.display()))?;
        eprintln!("kansoku: {}", crate::exports::written(*format, path));
    }
    let c = &report.choices;
    eprintln!("kansoku: solver {:?}: {}", report.reconstruction.solver, c.solver_reason);
    if c.solver != Solver::Phase || report.reconstruction.solver != Solver::Phase {
        eprintln!("kansoku: scores {:?}: {}", c.likelihood, c.likelihood_reason);
    }
    for n in notes(&report.reconstruction) {
        eprintln!("kansoku: {n}");
    }
    for w in &report.warnings {
        eprintln!("kansoku: warning: {} (fix: {})", w.message, w.fix);
    }
    if args.json {
        return print_json(&report);
    }
    let r = &report.reconstruction;
    println!(
        "{} samples, {} marker hits, {} iterations ({} with samples){}",
        r.split.samples,
        r.split.markers,
        r.split.iterations,
        r.split.non_empty,
        r.split.iteration_length.map(|t| format!(", {t} instructions per iteration")).unwrap_or_default()
    );
    println!(
        "solver {:?}: {} partial sequences, {} samples -> {} instructions{} in {:.3} s",
        r.solver,
        r.sequences_used,
        r.samples_used,
        r.length,
        if report.weighting == Weighting::Time { " (execution-time-weighted)" } else { "" },
        r.seconds
    );
    if let Some(l) = r.likelihood {
        println!("likelihood {l}");
    }
    if let (Some(opt), Some(ub), Some(gap)) = (r.optimal, r.upper_bound, r.optimality_gap) {
        println!("{}; upper bound {ub}, optimality gap {:.2}%", if opt { "proven optimal" } else { "heuristic" }, gap * 100.0);
    }
    if let Some(c) = r.covered_positions {
        println!("phase: {c} of {} positions covered, {} conflicting samples", r.split.iteration_length.unwrap_or(0), r.conflicts.unwrap_or(0));
    }
    if let Some(classes) = r.classes.as_ref().filter(|c| c.len() > 1) {
        let mut t = Table::new(&[">instructions", ">iterations", ">share", ">samples", "trace"]);
        for c in classes.iter().take(12) {
            let trace = if Some(c.length) == r.class {
                "this one".to_string()
            } else if let Some(ct) = report.class_traces.iter().find(|t| t.length == c.length) {
                ct.output.display().to_string()
            } else if c.enough_samples() {
                "--class to rebuild".to_string()
            } else {
                "set aside (fewer samples than instructions)".to_string()
            };
            t.row(vec![c.length.to_string(), c.iterations.to_string(), format!("{:.1} %", 100.0 * c.share), c.samples.to_string(), trace]);
        }
        println!("iteration classes ({} lengths):", classes.len());
        t.print();
    }
    if let Some(d) = &report.iteration_durations {
        println!("{}", d.text());
    }
    if let Some(c) = &report.comparison {
        if let Some(i) = report.compared_iteration {
            println!("compared with iteration {i} of the exact trace{}", r.class.map(|l| format!(" (the first of its class: {l} instructions)")).unwrap_or_default());
        }
        print_comparison(c);
    }
    for ct in &report.class_traces {
        println!(
            "class of {} instructions ({:.1} % of iterations): {} -> {}{}",
            ct.length,
            100.0 * ct.share,
            ct.trace_length,
            ct.output.display(),
            ct.comparison.as_ref().map(|c| format!(", lcs_ratio {:.4} against iteration {}", c.lcs_ratio, ct.compared_iteration.unwrap_or(0))).unwrap_or_default()
        );
        for w in &ct.warnings {
            println!("  warning: {}", w.message);
        }
    }
    match &args.output {
        Some(o) => println!("trace written to {}", o.display()),
        None => {
            for l in &lines {
                println!("{l}");
            }
        }
    }
    Ok(())
}

/// The reconstructed iteration as a Perfetto timeline: its instructions fed, with the
/// recording's module map, to the path analysis' shadow call stack (the same recovery as
/// for an exact trace), one marker hit at its start so the iteration shows as a slice.
fn write_reconstructed_timeline(args: &Args, report: &Report, out: impl std::io::Write + Send + 'static) -> Result<()> {
    use kansoku_export::ArgValue::{Text, Uint};
    let (_, modules) = RecordingReader::open(&args.recording)?.summarize_with_modules()?;
    let mut analysis = kansoku_paths::PathAnalysis::new(&kansoku_paths::AnalysisOptions { scope: kansoku_paths::Scope::All, ..Default::default() });
    let timeline = std::sync::Arc::new(std::sync::Mutex::new(kansoku_export::CallsPerfetto::new(out)));
    analysis.stream_call_timeline(Box::new(timeline.clone()));
    for m in modules {
        analysis.feed_event(&Event::Module(m));
    }
    analysis.feed_event(&Event::Marker { time_ns: 0, instructions: Some(0) });
    for i in &report.reconstruction.trace {
        analysis.feed_event(&Event::Instruction { addr: i.addr });
    }
    analysis.finish()?;
    let r = &report.reconstruction;
    let metadata = vec![
        ("command".to_string(), Text("kansoku reconstruct".into())),
        ("recording".into(), Text(args.recording.display().to_string())),
        ("solver".into(), Text(format!("{:?}", r.solver).to_lowercase())),
        ("time_axis".into(), Text("instruction index in the reconstructed iteration (no time stamps)".into())),
        ("slices".into(), Text("calls and returns recovered from the reconstructed instructions by a shadow call stack".into())),
        ("instructions".into(), Uint(r.trace.len() as u64)),
        ("samples_used".into(), Uint(r.samples_used as u64)),
    ];
    timeline.lock().unwrap_or_else(std::sync::PoisonError::into_inner).close(&metadata)?;
    Ok(())
}

/// What the user should know about how the work was bounded: the sequences used (identical
/// ones merged, the budget) and the solver that ordered them.
pub fn notes(r: &Reconstruction) -> Vec<String> {
    let mut out = Vec::new();
    if r.distinct_sequences > 0 {
        let how = match r.budget {
            kansoku_reconstruct::Budget::Iteration => "the first ones until they hold one iteration's instructions".to_string(),
            kansoku_reconstruct::Budget::Heaviest => {
                format!("the heaviest, at most {} sequences and {} samples", kansoku_reconstruct::HEAVIEST_CAP, kansoku_reconstruct::split::SAMPLE_CAP)
            }
            kansoku_reconstruct::Budget::Requested => "--sequences".to_string(),
        };
        out.push(format!(
            "{} iterations with samples hold {} distinct partial sequences (identical ones merged, weighted by how often they occur); using {} of them ({how}), standing for {} iterations; --sequences N to change",
            r.split.non_empty, r.distinct_sequences, r.sequences_used, r.iterations_used
        ));
    }
    if let Some(c) = &r.chain {
        out.push(format!(
            "{} sequences are beyond the {} the {:?} solver takes: ordered by candidate neighbours instead ({} pairs kept, {} chains joined)",
            r.sequences_used,
            if r.solver == Solver::Exact { kansoku_reconstruct::exact::HEURISTIC_LIMIT } else { kansoku_reconstruct::QUADRATIC_LIMIT },
            r.solver,
            c.pairs_scored,
            c.chains
        ));
    }
    out
}

pub fn print_comparison(c: &Comparison) {
    let mut t = Table::new(&["metric", ">value"]);
    t.row(vec!["true length".into(), c.true_length.to_string()]);
    t.row(vec!["reconstructed length".into(), c.reconstructed_length.to_string()]);
    t.row(vec!["position_accuracy".into(), format!("{:.4}", c.position_accuracy)]);
    t.row(vec!["lcs_ratio".into(), format!("{:.4}", c.lcs_ratio)]);
    t.row(vec!["edit_distance".into(), c.edit_distance.map_or("-".into(), |d| d.to_string())]);
    t.row(vec!["length_ratio".into(), format!("{:.4}", c.length_ratio)]);
    t.print();
}

/// A timeline row: its label, its instructions' keys, the span another order scores as
/// well (if any).
pub type Row<'a> = (&'a str, &'a [String], Option<(usize, usize)>);

/// Traces as rows coloured by function (the part of a `function:offset` key before the
/// last ':'), the exact one first; the plot marks where the rows differ.
pub fn timeline_svg(rows: &[Row], title: &str) -> String {
    let function_of = |k: &String| k.rsplit_once(':').map_or(k.clone(), |(f, _)| f.to_string());
    let mut functions: Vec<String> = Vec::new();
    let mut cells = |keys: &[String]| -> Vec<Option<usize>> {
        keys.iter()
            .map(|k| {
                let f = function_of(k);
                Some(functions.iter().position(|g| *g == f).unwrap_or_else(|| {
                    functions.push(f);
                    functions.len() - 1
                }))
            })
            .collect()
    };
    let rows: Vec<_> =
        rows.iter().map(|(label, keys, uncertain)| kansoku_plot::TimelineRow { label, cells: cells(keys), uncertain: *uncertain }).collect();
    let names: Vec<&str> = functions.iter().map(String::as_str).collect();
    kansoku_plot::timeline(title, "instruction in the iteration", &rows, &names)
}

pub fn run_compare(args: CompareArgs) -> Result<()> {
    let trace = read_trace(&args.trace)?;
    let iteration_index = match args.iteration {
        Some(i) => i,
        None => iteration_of_class(&args.exact, trace.class)?,
    };
    let why = match (args.iteration, trace.class) {
        (Some(_), _) => " (--iteration)".to_string(),
        (None, Some(l)) => format!(", the first of the trace's class ({l} instructions between marker hits)"),
        (None, None) => " (the trace names no class; --iteration N for another)".to_string(),
    };
    eprintln!("kansoku: compared with iteration {iteration_index} of {}{why}", args.exact.display());
    let c = compare_keys(&trace.keys, &args.exact, iteration_index)?;
    let samples = args.samples.clone().or_else(|| trace.recording.clone().filter(|_| trace.weighting == Some(Weighting::Time)));
    let weighted = match &samples {
        Some(s) if s.exists() || args.samples.is_some() => {
            Some(compare_weighted(&trace, &args.exact, iteration_index, s).with_context(|| format!("time shares of {}", args.trace.display()))?)
        }
        Some(s) => {
            eprintln!(
                "kansoku: warning: {} is time-weighted but its recording {} is gone: only the order is judged by lcs_ratio; give the recording with --samples",
                args.trace.display(),
                s.display()
            );
            None
        }
        None => None,
    };
    if let Some(svg) = &args.svg {
        let truth = exact_iteration(&args.exact, iteration_index)?;
        let rows = [("exact", truth.as_slice(), None), ("reconstructed", trace.keys.as_slice(), trace.uncertain)];
        let picture = timeline_svg(&rows, &format!("{} against the exact trace (lcs_ratio {:.3})", args.trace.display(), c.lcs_ratio));
        std::fs::write(svg, picture).with_context(|| format!("writing {}", svg.display()))?;
    }
    let note = engine_note(&args.exact, iteration_index)?;
    if args.json {
        return print_json(&CompareReport { comparison: c, iteration: iteration_index, class: trace.class, weighted, engine_note: note });
    }
    print_comparison(&c);
    if let Some(w) = &weighted {
        print_weighted(w);
    }
    if let Some(n) = note.filter(|n| !n.in_libraries.is_empty()) {
        let outside: usize = n.in_libraries.iter().map(|l| l.1).sum();
        let list: Vec<String> = n.in_libraries.iter().take(4).map(|(name, k)| format!("{name} {k}")).collect();
        println!(
            "note: the exact trace ran on Valgrind's CPU (engine valgrind): {outside} of the iteration's {} instructions are in libraries ({}), whose routines the CPU's features choose (libc's string functions, lazy binding); there the real CPU the samples come from may run others. `kansoku trace exact --engine ptrace` traces the real CPU.",
            n.instructions,
            list.join(", ")
        );
    }
    Ok(())
}

/// The time-weighted judgement: order and coverage, then the largest function shares and
/// both distances.
fn print_weighted(w: &WeightedComparison) {
    let o = &w.order;
    println!("time-weighted trace, judged by what it claims ({} samples of {} between marker hits):", w.samples_counted, w.samples.display());
    let mut t = Table::new(&["metric", ">value", "meaning"]);
    t.row(vec!["order_ratio".into(), format!("{:.4}", o.order_ratio), format!("{} of the trace's {} steps (runs collapsed) in the exact order", o.lcs, o.trace_runs)]);
    t.row(vec!["coverage".into(), format!("{:.4}", o.coverage), format!("{} of the iteration's {} distinct instructions shown", o.shown_distinct, o.exact_distinct)]);
    t.row(vec!["function share distance".into(), format!("{:.4}", w.functions.distance), "share of time the trace puts in the wrong function".into()]);
    t.row(vec!["block share distance".into(), format!("{:.4}", w.blocks.distance), "share of time the trace puts in the wrong block".into()]);
    if let Some(d) = w.functions.instruction_distance {
        t.row(vec!["time vs instructions (functions)".into(), format!("{d:.4}"), "how far sampled time is from instruction counts".into()]);
    }
    t.print();
    let mut f = Table::new(&["function", ">time in trace", ">time in samples", ">instructions (exact)"]);
    for r in w.functions.rows.iter().take(12) {
        let pct = |x: f64| format!("{:.1} %", 100.0 * x);
        f.row(vec![r.name.clone(), pct(r.trace_share), pct(r.sample_share), r.instruction_share.map_or("-".into(), pct)]);
    }
    f.print();
}
