//! `kansoku reconstruct REC.ksk [--by function|block] [--split marker|count:T|function:NAME]
//! [--solver patent|exact|phase] [--scores FILE] [--top-k K] [--json] -o TRACE` and
//! `kansoku compare TRACE EXACT.ksk [--json]` (seed 000).
//!
//! A TRACE file is text: a `#` header line, then one instruction per line:
//! `0xADDRESS function:offset function:block:offset`.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use kansoku_binary::Symbolizer;
use kansoku_core::{Event, Header, RecordingKind, RecordingReader};
use kansoku_reconstruct::patent::Linkage;
use kansoku_reconstruct::{
    compare, compare_order, compare_shares, reconstruct, Comparison, Granularity, Names, Observation, Options, OrderComparison, Reconstruction,
    Scores, ShareComparison, Solver, Split, Warning, Weighting,
};
use serde::Serialize;

use crate::output::{print_json, Table};

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

/// `--likelihood`: the seed's score tables, or control-flow distances (see
/// `kansoku_reconstruct::flow` for why).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Likelihood {
    Seed,
    Cfg,
}

impl std::str::FromStr for Likelihood {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "seed" => Ok(Likelihood::Seed),
            "cfg" => Ok(Likelihood::Cfg),
            _ => Err(format!("unknown likelihood '{s}' (use seed or cfg)")),
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

/// `kansoku compare`'s result: the exact-iteration scores and, for a time-weighted trace,
/// the scores of what it claims (order of distinct instructions, time shares).
#[derive(Serialize)]
pub struct CompareReport {
    #[serde(flatten)]
    pub comparison: Comparison,
    /// The exact iteration compared with, and the class (instructions between marker
    /// hits) the trace names, whose first exact iteration is the default.
    pub iteration: usize,
    pub class: Option<u64>,
    pub weighted: Option<WeightedComparison>,
    /// The exact trace ran on Valgrind's CPU: what of its iteration may differ on the real one.
    pub engine_note: Option<EngineNote>,
}

/// What of an exact iteration traced on the Valgrind engine lies in code whose path the
/// CPU's features choose (libc's string routines, the loader's lazy binding): there a
/// trace of the real CPU, which the samples come from, may run other instructions.
#[derive(Serialize)]
pub struct EngineNote {
    pub engine: String,
    pub instructions: usize,
    /// Instructions of the iteration outside the traced program, per library.
    pub in_libraries: Vec<(String, usize)>,
}

/// [`EngineNote`] for `exact` when the Valgrind engine made it, else `None`.
fn engine_note(exact: &Path, iteration: usize) -> Result<Option<EngineNote>> {
    let mut reader = RecordingReader::open(exact)?;
    let engine = reader.header().parameters.get("engine").and_then(|e| e.as_str()).unwrap_or("ptrace").to_string();
    if engine != "valgrind" {
        return Ok(None);
    }
    let program = std::path::PathBuf::from(&reader.header().program);
    let program = program.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let mut modules: Vec<kansoku_core::Module> = Vec::new();
    let mut per_library: BTreeMap<String, usize> = BTreeMap::new();
    let (mut markers, mut instructions) = (0usize, 0usize);
    while let Some(event) = reader.next_event()? {
        match event {
            Event::Module(m) => modules.push(m),
            Event::Marker { .. } => {
                markers += 1;
                if markers == iteration + 2 {
                    break;
                }
            }
            Event::Instruction { addr } if markers == iteration + 1 || markers == 0 => {
                instructions += 1;
                let name = modules.iter().rev().find(|m| m.contains(addr)).map_or("(no module)", |m| m.short_name());
                if name != program {
                    *per_library.entry(name.to_string()).or_default() += 1;
                }
            }
            _ => {}
        }
    }
    let mut in_libraries: Vec<(String, usize)> = per_library.into_iter().collect();
    in_libraries.sort_by_key(|l| std::cmp::Reverse(l.1));
    Ok(Some(EngineNote { engine, instructions, in_libraries }))
}

/// A time-weighted trace judged by what it claims (the metrics are defined in
/// `kansoku_reconstruct::metrics` and docs/rooms/seed000-reconstruct.md).
#[derive(Serialize)]
pub struct WeightedComparison {
    pub samples: PathBuf,
    /// Samples between the first and the last marker hit (the iterations the trace stands for).
    pub samples_counted: usize,
    pub order: OrderComparison,
    pub functions: ShareComparison,
    pub blocks: ShareComparison,
}

/// Judges a time-weighted trace: its order against the exact iteration, its function and
/// block shares against the samples' (and the exact iteration's instructions').
fn compare_weighted(trace: &TraceFile, exact: &Path, iteration: usize, samples: &Path) -> Result<WeightedComparison> {
    let truth = exact_iteration_by(exact, iteration, |l| {
        let block = l.block.map_or_else(|| format!("{}:?", l.function), |b| format!("{}:{b}", l.function));
        (l.function_offset(), block)
    })?;
    let mut ids: HashMap<&str, u64> = HashMap::new();
    let t: Vec<u64> = truth.iter().map(|(k, _)| intern(&mut ids, k)).collect();
    let r: Vec<u64> = trace.keys.iter().map(|k| intern(&mut ids, k)).collect();
    let order = compare_order(&r, &t);
    let (sample_functions, sample_blocks) = sample_groups(samples)?;
    let trace_functions: Vec<&str> = trace.keys.iter().map(|k| function_of(k)).collect();
    let exact_functions: Vec<&str> = truth.iter().map(|(k, _)| function_of(k)).collect();
    let exact_blocks: Vec<&str> = truth.iter().map(|(_, b)| b.as_str()).collect();
    Ok(WeightedComparison {
        samples: samples.to_path_buf(),
        samples_counted: sample_functions.len(),
        order,
        functions: compare_shares(&trace_functions, &as_strs(&sample_functions), &exact_functions),
        blocks: compare_shares(&as_strs(&trace.blocks), &as_strs(&sample_blocks), &exact_blocks),
    })
}

/// A number for each distinct key, in order of first appearance.
fn intern<'a>(ids: &mut HashMap<&'a str, u64>, key: &'a str) -> u64 {
    let n = ids.len() as u64;
    *ids.entry(key).or_insert(n)
}

fn as_strs(v: &[String]) -> Vec<&str> {
    v.iter().map(String::as_str).collect()
}

/// The function and block (`function:BB`, `function:?`) of every sample of the program's
/// code between the first and the last marker hit (all samples when there are no markers).
fn sample_groups(path: &Path) -> Result<(Vec<String>, Vec<String>)> {
    let loaded = load_samples(path)?;
    let marker_at: Vec<usize> =
        loaded.observations.iter().enumerate().filter(|(_, o)| matches!(o, Observation::Marker { .. })).map(|(i, _)| i).collect();
    let range = match (marker_at.first(), marker_at.last()) {
        (Some(&a), Some(&b)) if a < b => a..b,
        _ => 0..loaded.observations.len(),
    };
    let (mut functions, mut blocks) = (Vec::new(), Vec::new());
    for o in &loaded.observations[range] {
        if let Observation::Sample { info, .. } = o {
            let f = loaded.names.name(info.function);
            blocks.push(if info.block >= 0 { format!("{f}:{}", info.block) } else { format!("{f}:?") });
            functions.push(f.to_string());
        }
    }
    if functions.is_empty() {
        bail!("{}: no samples of the program's code between marker hits, so there are no time shares to compare with", path.display());
    }
    Ok((functions, blocks))
}

/// A sampled recording, symbolised into observations.
pub struct Loaded {
    #[allow(dead_code)] // kept for callers that report what was recorded
    pub header: Header,

    pub names: Names,
    pub observations: Vec<Observation>,
    pub weighting: Weighting,
    pub period: Option<u64>,
    /// The recorded modules (for `--likelihood cfg`).
    pub modules: Vec<kansoku_core::Module>,
    /// The marker function the recording was cut at, when the header names it.
    pub marker: Option<String>,
    pub warnings: Vec<Warning>,
}

/// Addresses from here up are the kernel's (x86-64 canonical upper half).
const KERNEL_START: u64 = 0xffff_8000_0000_0000;

/// Reads and symbolises a sampled recording.
pub fn load_samples(path: &Path) -> Result<Loaded> {
    let mut reader = kansoku_perfdata::AnyRecording::open(path)?;
    let header = reader.header().clone();
    if header.kind != RecordingKind::Samples {
        bail!(
            "{}: holds {:?}, not samples; record with `kansoku record`, or turn an exact trace into samples with `kansoku sample --period P`",
            path.display(),
            header.kind
        );
    }
    // The marker's function as samples are symbolised: named by the recorder, else from
    // the spec (`adler32@libz` → `adler32`; `adler32@plt` is the stub's own name).
    let marker = header
        .parameters
        .get("marker_function")
        .or_else(|| header.parameters.get("marker"))
        .and_then(|v| v.as_str())
        .map(|m| kansoku_probe::marker::marker_function_name(m).to_string());
    let mut sym = Symbolizer::new(&[]);
    let mut names = Names::new();
    let mut observations = Vec::new();
    let (mut kernel, mut outside, mut samples, mut at_marker) = (0u64, 0u64, 0u64, 0u64);
    while let Some(event) = reader.next_event()? {
        match event {
            Event::Module(m) => sym.add_module(m),
            Event::Sample(s) => {
                samples += 1;
                let loc = sym.locate(s.ip);
                // Not the program's code: the kernel, or outside every recorded module (the
                // uprobe trampoline page [uprobes] that the marker probe executes). Their
                // instructions are not the region's; dropped and counted.
                if s.ip >= KERNEL_START {
                    kernel += 1;
                    continue;
                }
                if loc.module.is_none() {
                    outside += 1;
                    continue;
                }
                at_marker += (loc.offset <= 1 && marker.as_deref() == Some(loc.function.as_str())) as u64;
                observations.push(Observation::Sample { info: names.info(&loc, s.ip), time_ns: s.time_ns, instructions: s.instructions });
            }
            Event::Marker { time_ns, instructions } => observations.push(Observation::Marker { time_ns, instructions }),
            _ => {}
        }
    }
    let mut warnings: Vec<Warning> = std::mem::take(&mut sym.warnings)
        .into_iter()
        .map(|w| Warning::new("unsymbolised", w, "keep the recorded program and libraries where they were recorded (or give their debug files)"))
        .collect();
    warnings.extend(reader.warnings().iter().map(|w| Warning::new("recording_damaged", w.clone(), "record again")));
    if kernel + outside > 0 {
        let share = |n: u64| 100.0 * n as f64 / samples.max(1) as f64;
        warnings.push(Warning::new("samples_dropped", format!(
            "{} of {samples} samples dropped: {kernel} ({:.1} %) in kernel code, {outside} ({:.1} %) outside the recorded modules (the uprobe trampoline the marker probe runs, or code mapped without a module event); the trace holds the program's own instructions only",
            kernel + outside,
            share(kernel),
            share(outside)
        ), "nothing to fix: they are not the program's instructions; they are left out of the trace"));
    }
    if let Some(at) = reader.truncated_at() {
        warnings.push(Warning::new("recording_cut", format!("{} is cut off at byte {at}; using what was readable", path.display()), "record again and let the recorder finish"));
    }
    if at_marker * 10 > samples {
        // The marker's uprobe traps on the first instruction and resumes the program at the
        // second; a timer sample taken during the trap reports one of them as the user
        // address. Kept (the instructions do run), but said.
        warnings.push(Warning::new("probe_time_in_trace", format!(
            "{at_marker} of {samples} samples ({:.1} %) fell on the marker's first two instructions, where its uprobe traps into the kernel and resumes: most of that is the probe's time, not the program's; the trace and its time shares carry it",
            100.0 * at_marker as f64 / samples.max(1) as f64
        ), "kansoku record --marker-by agent (a marker of about 20 ns, no trap)"));
    }
    let weighting = match header.parameters.get("clock").and_then(|v| v.as_str()) {
        Some("cpu-clock") => Weighting::Time,
        _ => Weighting::Count,
    };
    let period = header.parameters.get("period").and_then(|v| v.as_u64());
    let modules = sym.modules().to_vec();
    Ok(Loaded { header, names, observations, weighting, period, modules, marker, warnings })
}

/// The reconstruction and, with `--exact`, its scores.
#[derive(Serialize)]
pub struct Report {
    pub recording: PathBuf,
    pub output: Option<PathBuf>,
    pub by: Granularity,
    pub weighting: Weighting,
    /// The solver and scores used, and why (chosen by default, or asked for).
    pub choices: Choices,
    #[serde(flatten)]
    pub reconstruction: Reconstruction,
    pub comparison: Option<Comparison>,
    /// With --exact: the exact iteration compared with (the first of the trace's class).
    pub compared_iteration: Option<usize>,
    /// With -o and iterations of several lengths: the other classes rebuilt.
    pub class_traces: Vec<ClassTrace>,
    /// Everything the user should know, each with a kind and what would fix it: damaged or
    /// cut recordings, unsymbolised samples, iterations set aside, a solver replaced, an
    /// order the samples do not determine.
    pub warnings: Vec<Warning>,
}

/// Another class of iterations, rebuilt into its own file.
#[derive(Serialize)]
pub struct ClassTrace {
    pub length: u64,
    pub iterations: usize,
    pub share: f64,
    pub samples: usize,
    pub solver: Solver,
    pub trace_length: usize,
    pub covered_positions: Option<u64>,
    pub output: PathBuf,
    pub comparison: Option<Comparison>,
    pub compared_iteration: Option<usize>,
    pub warnings: Vec<Warning>,
}

/// Said of every time-sampled recording.
pub const TIME_WEIGHTED: &str = "time sampling (cpu-clock): the trace is execution-time-weighted, not one entry per executed instruction: an instruction appears about as often as time was spent on it, identical partial sequences are merged, and the order is that of the samples; read it as where the time goes and in what order, not as the iteration's exact instructions (an exact trace's lcs_ratio judges it poorly by design); with a PMU, `kansoku record --period N` samples instructions";

/// The method used and why: by default the best the recording allows (phase with counts,
/// control-flow scores when the program can be read).
#[derive(Serialize, Clone, Debug)]
pub struct Choices {
    pub solver: Solver,
    pub solver_reason: String,
    pub likelihood: Likelihood,
    pub likelihood_reason: String,
}

impl Default for Choices {
    fn default() -> Choices {
        Choices { solver: Solver::Patent, solver_reason: String::new(), likelihood: Likelihood::Seed, likelihood_reason: String::new() }
    }
}

/// Everything `kansoku reconstruct` does but printing; shared with the demo and benchmarks.
pub fn reconstruct_file(args: &Args) -> Result<(Report, Vec<String>, Names)> {
    let mut loaded = load_samples(&args.recording)?;
    let mut scores = match &args.scores {
        Some(f) => Scores::from_file(f, args.by, loaded.weighting)?,
        None => Scores::defaults(args.by, loaded.weighting),
    };
    let mut choices = Choices::default();
    let likelihood = match args.likelihood {
        Some(l) => {
            choices.likelihood_reason = "asked (--likelihood)".into();
            l
        }
        None => Likelihood::Cfg,
    };
    choices.likelihood = likelihood;
    if likelihood == Likelihood::Cfg {
        let sampled: HashSet<u64> = loaded
            .observations
            .iter()
            .filter_map(|o| match o {
                Observation::Sample { info, .. } => Some(info.addr),
                Observation::Marker { .. } => None,
            })
            .collect();
        let mut flow_warnings = Vec::new();
        let flow = super::control_flow::control_flow(&loaded.modules, &sampled, loaded.marker.as_deref(), &mut flow_warnings);
        let (known, _) = flow.size();
        if args.likelihood.is_none() && known == 0 {
            // Nothing of the program could be read: the seed's tables, and say why.
            choices.likelihood = Likelihood::Seed;
            choices.likelihood_reason = format!(
                "the recorded program could not be read ({}); the seed's tables",
                if flow_warnings.is_empty() { "no sampled instruction decoded".to_string() } else { flow_warnings.join("; ") }
            );
        } else {
            if args.likelihood.is_none() {
                choices.likelihood_reason = format!("the recorded program was read: control-flow scores for {known} of {} sampled instructions; --likelihood seed for the seed's tables", sampled.len());
            }
            loaded.warnings.extend(flow_warnings.into_iter().map(|w| Warning::new("cfg_scores_partial", w, "make the sampled modules readable (or --likelihood seed)")));
            scores = scores.with_flow(flow);
        }
    }
    let counted = args.split == Split::Marker
        && loaded.observations.iter().any(|o| matches!(o, Observation::Marker { instructions: Some(_), .. }))
        && loaded.observations.iter().any(|o| matches!(o, Observation::Sample { instructions: Some(_), .. }));
    choices.solver = match args.solver {
        Some(s) => {
            choices.solver_reason = "asked (--solver)".into();
            s
        }
        None if counted => {
            choices.solver_reason = "the recording has instruction counts at samples and marker hits: each sample placed by its position; --solver patent|exact to order partial sequences instead".into();
            Solver::Phase
        }
        None => {
            choices.solver_reason = "no instruction counts at samples and marker hits (time sampling, or not --split marker): the seed's loop".into();
            Solver::Patent
        }
    };
    let options = Options {
        split: args.split.clone(),
        solver: choices.solver,
        scores,
        period: args.period.or(loaded.period),
        top_k: args.top_k.unwrap_or(if choices.likelihood == Likelihood::Cfg { 0 } else { 1 }),
        linkage: args.linkage,
        sequences: args.sequences,
        stop: Some(kansoku_probe::interrupt::requested),
        class: args.class,
    };
    if args.period == Some(0) {
        bail!("--period must be at least 1 (got 0)");
    }
    let bar = crate::output::bar("reconstructing", 0);
    let rec = reconstruct(&loaded.observations, &loaded.names, &options, &mut |done, total| {
        bar.set_length(total as u64);
        bar.set_position(done as u64)
    })
    .with_context(|| format!("reconstructing from {}", args.recording.display()))?;
    bar.finish_and_clear();
    let (lines, comparison, compared_iteration) = write_and_compare(&args.output, args, &rec, &loaded)?;
    let mut warnings = std::mem::take(&mut loaded.warnings);
    if loaded.weighting == Weighting::Time {
        warnings.push(Warning::new("time_weighted", TIME_WEIGHTED, "with a PMU, `kansoku record --period N` samples instructions"));
    }
    if let (Some(f), true) = (&rec.fallback, args.solver.is_none()) {
        // Chosen, not asked: said in the choice too, and a warning all the same (the
        // replacement may not rebuild the exact iteration).
        choices.solver_reason = format!("{}; but {f}", choices.solver_reason);
    }
    warnings.extend(rec.warnings());
    let mut class_traces = Vec::new();
    if let (Some(out), Some(classes), None) = (&args.output, &rec.classes, args.class) {
        // The other classes that hold a sample per instruction, each into its own file.
        for c in classes.iter().filter(|c| Some(c.length) != rec.class && c.enough_samples()).take(MAX_CLASS_TRACES) {
            let file = Some(PathBuf::from(format!("{}.class-{}", out.display(), c.length)));
            let r = reconstruct(&loaded.observations, &loaded.names, &Options { class: Some(c.length), ..options.clone() }, &mut |_, _| {})
                .with_context(|| format!("reconstructing the class of {} instructions from {}", c.length, args.recording.display()))?;
            let (_, comparison, compared_iteration) = write_and_compare(&file, args, &r, &loaded)?;
            class_traces.push(ClassTrace {
                length: c.length,
                iterations: c.iterations,
                share: c.share,
                samples: c.samples,
                solver: r.solver,
                trace_length: r.length,
                covered_positions: r.covered_positions,
                output: file.expect("set above"),
                comparison,
                compared_iteration,
                // the recording's own warnings are the main trace's already
                warnings: r.warnings().into_iter().filter(|w| w.kind != "iterations_differ").collect(),
            });
        }
    }
    Ok((
        Report {
            recording: args.recording.clone(),
            output: args.output.clone(),
            by: args.by,
            weighting: loaded.weighting,
            choices,
            reconstruction: rec,
            comparison,
            compared_iteration,
            class_traces,
            warnings,
        },
        lines,
        loaded.names,
    ))
}

/// Writes `rec` into `output` (when given) and compares it with the exact iteration of its
/// class (`--exact`): the trace's lines, the comparison and the iteration compared with.
fn write_and_compare(output: &Option<PathBuf>, args: &Args, rec: &Reconstruction, loaded: &Loaded) -> Result<(Vec<String>, Option<Comparison>, Option<usize>)> {
    let lines: Vec<String> = rec
        .trace
        .iter()
        .map(|i| format!("0x{:x} {} {}", i.addr, i.display(&loaded.names, Granularity::Function), i.display(&loaded.names, Granularity::Block)))
        .collect();
    if let Some(out) = output {
        let mut text = format!(
            "# kansoku reconstructed trace: {} instructions, solver {:?}, by {:?}\n",
            rec.trace.len(),
            rec.solver,
            args.by,
        )
        .to_lowercase();
        // Read back by `kansoku compare`: how to judge the trace, and where its samples are.
        text.push_str(&format!("{WEIGHTING} {}\n{RECORDING} {}\n", weighting_name(loaded.weighting), args.recording.display()));
        if let Some(length) = rec.split.iteration_length.filter(|_| rec.classes.is_some()) {
            // Read back by `kansoku compare`: the exact iterations of this length are its class.
            text.push_str(&format!("{CLASS} {length}\n"));
        }
        if let Some(a) = &rec.alternative {
            // Read back by `kansoku compare --svg` to draw the span.
            text.push_str(&format!("{UNCERTAIN} {} {}: another order scores {} and gives a different trace here\n", a.first_difference, a.last_difference, a.likelihood));
        }
        for l in &lines {
            text.push_str(l);
            text.push('\n');
        }
        std::fs::write(out, text).with_context(|| format!("writing {}", out.display()))?;
    }
    let class_length = rec.class.or(rec.split.iteration_length.filter(|_| rec.classes.is_some()));
    let (comparison, compared_iteration) = match &args.exact {
        Some(exact) => {
            let keys: Vec<String> = rec.trace.iter().map(|i| i.display(&loaded.names, Granularity::Function)).collect();
            let iteration = iteration_of_class(exact, class_length)?;
            (Some(compare_keys(&keys, exact, iteration)?), Some(iteration))
        }
        None => (None, None),
    };
    Ok((lines, comparison, compared_iteration))
}

pub fn run(args: Args) -> Result<()> {
    // Ctrl-C stops the solvers, which return the best trace so far.
    kansoku_probe::interrupt::install();
    let export_files = crate::exports::create_exports(&args.export, &[kansoku_export::Format::Perfetto], "kansoku reconstruct")?;
    let (report, lines, _) = reconstruct_file(&args)?;
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
fn write_reconstructed_timeline(args: &Args, report: &Report, out: impl std::io::Write) -> Result<()> {
    use kansoku_export::ArgValue::{Text, Uint};
    let (_, modules) = RecordingReader::open(&args.recording)?.summarize_with_modules()?;
    let mut analysis = kansoku_paths::PathAnalysis::new(&kansoku_paths::AnalysisOptions { scope: kansoku_paths::Scope::All, ..Default::default() });
    analysis.keep_call_timeline();
    for m in modules {
        analysis.feed_event(&Event::Module(m));
    }
    analysis.feed_event(&Event::Marker { time_ns: 0, instructions: Some(0) });
    for i in &report.reconstruction.trace {
        analysis.feed_event(&Event::Instruction { addr: i.addr });
    }
    analysis.finish()?;
    let timeline = analysis.call_timeline().context("the call timeline was not kept")?;
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
    kansoku_export::write_perfetto(&kansoku_export::calls_timeline(kansoku_export::CallRun { timeline: &timeline, metadata }), out)?;
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

/// `function:offset` of every instruction of one complete iteration of an exact trace
/// (marker to next marker), or of the whole trace when it has no markers.
pub fn exact_iteration(path: &Path, iteration: usize) -> Result<Vec<String>> {
    exact_iteration_by(path, iteration, |l| l.function_offset())
}

/// [`exact_iteration`] with each instruction's location reduced by `key`.
fn exact_iteration_by<T>(path: &Path, iteration: usize, mut key: impl FnMut(kansoku_core::Location) -> T) -> Result<Vec<T>> {
    let mut reader = RecordingReader::open(path)?;
    if reader.header().kind != RecordingKind::ExactTrace {
        bail!("{}: not an exact trace; make one with `kansoku trace exact --marker FUNC`", path.display());
    }
    let Some(end_marker) = iteration.checked_add(2) else {
        bail!("{}: iteration {iteration} cannot exist (marker hits are counted in 64 bits)", path.display());
    };
    let mut sym = Symbolizer::new(&[]);
    let mut markers = 0usize;
    let mut all = Vec::new();
    let mut window = Vec::new();
    let mut complete = false;
    while let Some(event) = reader.next_event()? {
        match event {
            Event::Module(m) => sym.add_module(m),
            Event::Marker { .. } => {
                markers += 1;
                if markers == end_marker {
                    complete = true;
                    break;
                }
            }
            Event::Instruction { addr } => {
                if markers == iteration + 1 {
                    window.push(key(sym.locate(addr)));
                } else if markers == 0 && all.len() < 50_000_000 {
                    all.push(key(sym.locate(addr)));
                }
            }
            _ => {}
        }
    }
    if markers == 0 {
        if iteration != 0 {
            bail!("{}: the trace has no marker hits, so it is one iteration (0), not {iteration}", path.display());
        }
        if all.is_empty() {
            bail!("{}: the trace holds no instructions to compare with (was the recording cut before the first one?)", path.display());
        }
        return Ok(all);
    }
    if !complete {
        bail!("{}: iteration {iteration} is not complete (the trace holds {markers} marker hits); trace more iterations", path.display());
    }
    if window.is_empty() {
        bail!("{}: iteration {iteration} holds no instructions", path.display());
    }
    Ok(window)
}

/// The first complete iteration of the exact trace at `path` that is `length` instructions
/// long (marker hit to marker hit): the iteration a trace of that class is compared with.
/// Without a length, or without markers, 0.
pub fn iteration_of_class(path: &Path, length: Option<u64>) -> Result<usize> {
    let Some(length) = length else { return Ok(0) };
    let mut reader = RecordingReader::open(path)?;
    if reader.header().kind != RecordingKind::ExactTrace {
        bail!("{}: not an exact trace; make one with `kansoku trace exact --marker FUNC`", path.display());
    }
    let (mut markers, mut count) = (0usize, 0u64);
    let mut lengths: BTreeMap<u64, usize> = BTreeMap::new();
    while let Some(event) = reader.next_event()? {
        match event {
            Event::Marker { .. } => {
                if markers > 0 {
                    if count == length {
                        return Ok(markers - 1);
                    }
                    *lengths.entry(count).or_default() += 1;
                }
                markers += 1;
                count = 0;
            }
            Event::Instruction { .. } => count += 1,
            _ => {}
        }
    }
    if markers == 0 {
        return Ok(0);
    }
    let seen: Vec<String> = lengths.iter().rev().take(8).map(|(l, n)| format!("{n} × {l}")).collect();
    bail!(
        "{}: no complete iteration is {length} instructions long, the trace's class (its {} complete iterations: {}); give --iteration N, or trace more iterations",
        path.display(),
        markers.saturating_sub(1),
        seen.join(", ")
    )
}

/// Compares `function:offset` keys with one iteration of an exact trace.
pub fn compare_keys(keys: &[String], exact: &Path, iteration: usize) -> Result<Comparison> {
    let truth = exact_iteration(exact, iteration)?;
    let mut ids: HashMap<String, u64> = HashMap::new();
    let mut intern = |s: &String| -> u64 {
        let n = ids.len() as u64;
        *ids.entry(s.clone()).or_insert(n)
    };
    let t: Vec<u64> = truth.iter().map(&mut intern).collect();
    let r: Vec<u64> = keys.iter().map(&mut intern).collect();
    Ok(compare(&r, &t))
}

/// A timeline row: its label, its instructions' keys, the span another order scores as
/// well (if any).
type Row<'a> = (&'a str, &'a [String], Option<(usize, usize)>);

/// Traces as rows coloured by function (the part of a `function:offset` key before the
/// last ':'), the exact one first; the plot marks where the rows differ.
fn timeline_svg(rows: &[Row], title: &str) -> String {
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

/// The header line of a written trace that names the instructions where another order
/// scores as well: `# uncertain FIRST LAST: why`.
const UNCERTAIN: &str = "# uncertain";

/// The header line of a written trace that names its class: `# class LENGTH` (instructions
/// between marker hits); `kansoku compare` takes the exact iterations of that length.
const CLASS: &str = "# class";

/// Most other classes `reconstruct -o` rebuilds into files of their own.
const MAX_CLASS_TRACES: usize = 32;

/// The header line of a written trace that says how it was sampled: `# weighting time|count`.
const WEIGHTING: &str = "# weighting";
/// The header line of a written trace that names the recording it was rebuilt from.
const RECORDING: &str = "# recording";

fn weighting_name(w: Weighting) -> &'static str {
    match w {
        Weighting::Time => "time",
        Weighting::Count => "count",
    }
}

/// A trace written by `kansoku reconstruct -o`: its instructions' `function:offset` keys,
/// their blocks (`function:BB`, `function:?` when unknown), the span where another order
/// scores as well (if the reconstruction found one), how it was sampled and from what.
pub struct TraceFile {
    pub keys: Vec<String>,
    pub blocks: Vec<String>,
    pub uncertain: Option<(usize, usize)>,
    pub weighting: Option<Weighting>,
    pub recording: Option<PathBuf>,
    /// The class it rebuilds (instructions between marker hits), when the file names one.
    pub class: Option<u64>,
}

/// `function:BB` of a trace line's `function:BB:offset` column (`function:?` when the line
/// has no block: that column then equals the `function:offset` one).
fn block_group(function_offset: &str, block_form: &str) -> String {
    let function = function_of(function_offset);
    match block_form.rsplit_once(':') {
        Some((block, _)) if block_form != function_offset => block.to_string(),
        _ => format!("{function}:?"),
    }
}

/// The function of a `function:offset` key.
fn function_of(key: &str) -> &str {
    key.rsplit_once(':').map_or(key, |(f, _)| f)
}

/// Reads a TRACE file's `function:offset` column and its uncertain span.
pub fn read_trace(path: &Path) -> Result<TraceFile> {
    let text = crate::output::read_text(path).with_context(|| format!("reading {}", path.display()))?;
    let mut keys = Vec::new();
    let mut blocks = Vec::new();
    let mut uncertain = None;
    let (mut weighting, mut recording, mut class) = (None, None, None);
    for (n, line) in text.lines().enumerate() {
        if let Some(rest) = line.strip_prefix(CLASS) {
            class = Some(rest.trim().parse::<u64>().map_err(|_| anyhow::anyhow!("{}:{}: expected `{CLASS} LENGTH`, found '{line}'", path.display(), n + 1))?);
            continue;
        }
        if let Some(rest) = line.strip_prefix(WEIGHTING) {
            weighting = match rest.trim() {
                "time" => Some(Weighting::Time),
                "count" => Some(Weighting::Count),
                other => bail!("{}:{}: expected `{WEIGHTING} time` or `{WEIGHTING} count`, found '{other}'", path.display(), n + 1),
            };
            continue;
        }
        if let Some(rest) = line.strip_prefix(RECORDING) {
            recording = Some(PathBuf::from(rest.trim()));
            continue;
        }
        if let Some(rest) = line.strip_prefix(UNCERTAIN) {
            let span = rest.split(':').next().unwrap_or("");
            let mut bounds = span.split_whitespace().map(str::parse::<usize>);
            let (Some(Ok(first)), Some(Ok(last))) = (bounds.next(), bounds.next()) else {
                bail!("{}:{}: expected `{UNCERTAIN} FIRST LAST: ...`, found '{line}'", path.display(), n + 1);
            };
            uncertain = Some((first, last));
            continue;
        }
        if line.starts_with('#') || line.trim().is_empty() {
            continue;
        }
        let mut columns = line.split_whitespace().skip(1);
        let Some(key) = columns.next() else {
            bail!("{}:{}: expected `0xADDRESS function:offset ...`, found '{line}' (is this a `kansoku reconstruct -o` trace?)", path.display(), n + 1);
        };
        blocks.push(block_group(key, columns.next().unwrap_or(key)));
        keys.push(key.to_string());
    }
    Ok(TraceFile { keys, blocks, uncertain, weighting, recording, class })
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
        let args = demo_args(dir.join(format!("seed000-p{period}.ksk")), solver, likelihood, None, &exact, dir.join(name));
        let (report, _, _) = reconstruct_file(&args)?;
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
fn demo_args(recording: PathBuf, solver: Solver, likelihood: Likelihood, sequences: Option<usize>, exact: &Path, output: PathBuf) -> Args {
    Args {
        recording,
        by: Granularity::Function,
        split: Split::Marker,
        solver: Some(solver),
        scores: None,
        likelihood: Some(likelihood),
        top_k: None,
        linkage: Linkage::default(),
        sequences,
        period: None,
        class: None,
        exact: Some(exact.to_path_buf()),
        output: Some(output),
        json: false,
        export: Vec::new(),
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
    let args = demo_args(rec.clone(), Solver::Patent, Likelihood::Seed, Some(2000), exact, trace_path.clone());
    let (report, _, _) = reconstruct_file(&args)?;
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
