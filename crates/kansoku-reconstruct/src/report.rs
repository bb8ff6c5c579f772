//! One reconstruction of a recording file, as `kansoku reconstruct` makes it: the solver and
//! scores chosen (by default the best the recording allows, and why), the trace written and
//! compared with the exact iteration of its class, the other classes rebuilt into files of
//! their own, and everything the user should know as structured warnings.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::error::FileError;
use crate::input::{control_flow, load_samples, Loaded};
use crate::patent::Linkage;
use crate::trace_file::{trace_lines, trace_text};
use crate::truth::{compare_keys, iteration_of_class};
use crate::{reconstruct, Comparison, Granularity, Observation, Options, Reconstruction, Scores, Solver, Split, Warning, Weighting};

/// Where pair scores come from: the seed's tables, or control-flow distances (see
/// [`crate::flow`] for why).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Likelihood {
    /// The seed's tables over function, offset and block differences.
    Seed,
    /// Distances in the program's control-flow graph, where it can be read.
    Cfg,
}

impl std::str::FromStr for Likelihood {
    type Err = crate::error::UnknownChoice;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "seed" => Ok(Likelihood::Seed),
            "cfg" => Ok(Likelihood::Cfg),
            _ => Err(crate::error::UnknownChoice { what: "likelihood", name: s.to_string(), choices: "seed or cfg" }),
        }
    }
}

/// What to reconstruct, and how; `None` leaves the choice to the recording.
#[derive(Clone, Debug)]
pub struct Request {
    /// The sampled recording (`.ksk` or perf.data).
    pub recording: PathBuf,
    /// What an instruction is known by (function and offset, or blocks too).
    pub by: Granularity,
    /// How the samples are cut into iterations.
    pub split: Split,
    /// The solver; `None`: the best the recording allows.
    pub solver: Option<Solver>,
    /// Score tables (TOML, or JSON by extension) overriding the defaults.
    pub scores: Option<PathBuf>,
    /// Where pair scores come from; `None`: control flow when the program can be read.
    pub likelihood: Option<Likelihood>,
    /// The patent solver's `--top-k` (see [`crate::Options::top_k`]).
    pub top_k: Option<usize>,
    /// The patent solver's linkage.
    pub linkage: Linkage,
    /// Most distinct partial sequences to use (see [`crate::Options::sequences`]).
    pub sequences: Option<usize>,
    /// Sampling period in instructions, when the recording does not say.
    pub period: Option<u64>,
    /// The iteration class to rebuild, by length (see [`crate::Options::class`]).
    pub class: Option<u64>,
    /// The exact trace to score the result against.
    pub exact: Option<PathBuf>,
    /// The trace file to write.
    pub output: Option<PathBuf>,
    /// Asked between rounds: stop and return the best trace so far.
    pub stop: Option<fn() -> bool>,
}

impl Request {
    /// Everything left to the recording, nothing written or compared.
    pub fn new(recording: PathBuf) -> Request {
        Request {
            recording,
            by: Granularity::Function,
            split: Split::Marker,
            solver: None,
            scores: None,
            likelihood: None,
            top_k: None,
            linkage: Linkage::default(),
            sequences: None,
            period: None,
            class: None,
            exact: None,
            output: None,
            stop: None,
        }
    }
}

/// The reconstruction and, with an exact trace, its scores.
#[derive(Serialize)]
pub struct Report {
    /// The recording read.
    pub recording: PathBuf,
    /// The trace file written, if one was.
    pub output: Option<PathBuf>,
    /// What an instruction was known by.
    pub by: Granularity,
    /// Whether the samples count instructions or time.
    pub weighting: Weighting,
    /// The solver and scores used, and why (chosen by default, or asked for).
    pub choices: Choices,
    /// The trace and how it was made.
    #[serde(flatten)]
    pub reconstruction: Reconstruction,
    /// With an exact trace: how close the trace is to its iteration.
    pub comparison: Option<Comparison>,
    /// With an exact trace: the exact iteration compared with (the first of the trace's class).
    pub compared_iteration: Option<usize>,
    /// With an output file and iterations of several lengths: the other classes rebuilt.
    pub class_traces: Vec<ClassTrace>,
    /// Time recordings with marker hits: how long the iterations lasted.
    pub iteration_durations: Option<IterationDurations>,
    /// Everything the user should know, each with a kind and what would fix it: damaged or
    /// cut recordings, unsymbolised samples, iterations set aside, a solver replaced, an
    /// order the samples do not determine.
    pub warnings: Vec<Warning>,
}

/// How long a time recording's iterations lasted (marker hit to marker hit). Those without
/// a sample are the loop's own durations; those holding one were stretched by the sampling
/// interrupt, so their durations cannot class them (see [`crate::info::Durations`]).
#[derive(Serialize)]
pub struct IterationDurations {
    /// Iterations no sample fell in: the loop's own durations.
    pub without_sample: Option<crate::info::DurationSummary>,
    /// Iterations holding a sample (stretched by it).
    pub with_sample: Option<crate::info::DurationSummary>,
}

impl IterationDurations {
    /// One line for the text report.
    pub fn text(&self) -> String {
        let part = |s: &Option<crate::info::DurationSummary>, what: &str| match s {
            Some(s) => format!("{} {what}: p10 {} ns, median {} ns, p90 {} ns, longest {} ns", s.iterations, s.p10_ns, s.p50_ns, s.p90_ns, s.max_ns),
            None => format!("none {what}"),
        };
        format!(
            "iteration durations (marker to marker): {}; {} (stretched by the sampling interrupt)",
            part(&self.without_sample, "without a sample"),
            part(&self.with_sample, "with a sample")
        )
    }
}

/// Another class of iterations, rebuilt into its own file.
#[derive(Serialize)]
pub struct ClassTrace {
    /// The class's iteration length, in instructions.
    pub length: u64,
    /// Iterations of that length recorded.
    pub iterations: usize,
    /// Their share of all complete iterations (0–1).
    pub share: f64,
    /// Samples in them.
    pub samples: usize,
    /// The solver that rebuilt it.
    pub solver: Solver,
    /// Instructions in the rebuilt trace.
    pub trace_length: usize,
    /// Phase solver: positions of the iteration a sample covered.
    pub covered_positions: Option<u64>,
    /// The trace file written for it.
    pub output: PathBuf,
    /// With an exact trace: how close it is to an iteration of its class.
    pub comparison: Option<Comparison>,
    /// Which exact iteration it was compared with.
    pub compared_iteration: Option<usize>,
    /// What the user must know about this class's trace.
    pub warnings: Vec<Warning>,
}

/// Said of every time-sampled recording.
pub(crate) const TIME_WEIGHTED: &str = "time sampling (cpu-clock): the trace is execution-time-weighted, not one entry per executed instruction: an instruction appears about as often as time was spent on it, identical partial sequences are merged, and the order is that of the samples; read it as where the time goes and in what order, not as the iteration's exact instructions (an exact trace's lcs_ratio judges it poorly by design); with a PMU, `kansoku record --period N` samples instructions";

/// Most other classes rebuilt into files of their own.
const MAX_CLASS_TRACES: usize = 32;

/// The method used and why: by default the best the recording allows (phase with counts,
/// control-flow scores when the program can be read).
#[derive(Serialize, Clone, Debug)]
pub struct Choices {
    /// The solver used.
    pub solver: Solver,
    /// Why (asked for, or what the recording allowed).
    pub solver_reason: String,
    /// The pair scores used.
    pub likelihood: Likelihood,
    /// Why.
    pub likelihood_reason: String,
}

impl Default for Choices {
    fn default() -> Choices {
        Choices { solver: Solver::Patent, solver_reason: String::new(), likelihood: Likelihood::Seed, likelihood_reason: String::new() }
    }
}

/// The scores for `loaded`: the defaults or `req.scores`, with control-flow distances
/// unless the seed's tables are asked for or nothing of the program can be read.
fn choose_scores(req: &Request, loaded: &mut Loaded, choices: &mut Choices) -> Result<Scores, FileError> {
    let mut scores = match &req.scores {
        Some(f) => Scores::from_file(f, req.by, loaded.weighting)?,
        None => Scores::defaults(req.by, loaded.weighting),
    };
    choices.likelihood = req.likelihood.unwrap_or(Likelihood::Cfg);
    if req.likelihood.is_some() {
        choices.likelihood_reason = "asked (--likelihood)".into();
    }
    if choices.likelihood != Likelihood::Cfg {
        return Ok(scores);
    }
    let sampled: HashSet<u64> = loaded
        .observations
        .iter()
        .filter_map(|o| match o {
            Observation::Sample { info, .. } => Some(info.addr),
            Observation::Marker { .. } | Observation::Quiet { .. } => None,
        })
        .collect();
    let mut flow_warnings = Vec::new();
    let flow = control_flow(&loaded.modules, &sampled, loaded.marker.as_deref(), &mut flow_warnings);
    let (known, _) = flow.size();
    if req.likelihood.is_none() && known == 0 {
        // Nothing of the program could be read: the seed's tables, and say why.
        choices.likelihood = Likelihood::Seed;
        choices.likelihood_reason = format!(
            "the recorded program could not be read ({}); the seed's tables",
            if flow_warnings.is_empty() { "no sampled instruction decoded".to_string() } else { flow_warnings.join("; ") }
        );
        return Ok(scores);
    }
    if req.likelihood.is_none() {
        choices.likelihood_reason = format!("the recorded program was read: control-flow scores for {known} of {} sampled instructions; --likelihood seed for the seed's tables", sampled.len());
    }
    loaded.warnings.extend(flow_warnings.into_iter().map(|w| Warning::new("cfg_scores_partial", w, "make the sampled modules readable (or --likelihood seed)")));
    scores = scores.with_flow(flow);
    Ok(scores)
}

/// The solver for `loaded`: phase when it has instruction counts at samples and marker
/// hits, else the seed's loop.
fn choose_solver(req: &Request, loaded: &Loaded, choices: &mut Choices) {
    let counted = req.split == Split::Marker
        && loaded.observations.iter().any(|o| matches!(o, Observation::Marker { instructions: Some(_), .. }))
        && loaded.observations.iter().any(|o| matches!(o, Observation::Sample { instructions: Some(_), .. }));
    choices.solver = match req.solver {
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
}

/// Reconstructs the recording `req` names: the report and the trace's lines (written to
/// `req.output` when given, with the other classes beside it).
pub fn reconstruct_file(req: &Request, progress: &mut dyn FnMut(usize, usize)) -> Result<(Report, Vec<String>), FileError> {
    let mut loaded = load_samples(&req.recording)?;
    let mut choices = Choices::default();
    let scores = choose_scores(req, &mut loaded, &mut choices)?;
    choose_solver(req, &loaded, &mut choices);
    let options = Options {
        split: req.split.clone(),
        solver: choices.solver,
        scores,
        period: req.period.or(loaded.period),
        top_k: req.top_k.unwrap_or(if choices.likelihood == Likelihood::Cfg { 0 } else { 1 }),
        linkage: req.linkage,
        sequences: req.sequences,
        stop: req.stop,
        class: req.class,
    };
    let rec = reconstruct(&loaded.observations, &loaded.names, &options, progress)
        .map_err(|error| FileError::Reconstructing { doing: format!("reconstructing from {}", req.recording.display()), error })?;
    let (lines, comparison, compared_iteration) = write_and_compare(&req.output, req, &rec, &loaded)?;
    let mut warnings = std::mem::take(&mut loaded.warnings);
    if loaded.weighting == Weighting::Time {
        warnings.push(Warning::new("time_weighted", TIME_WEIGHTED, "with a PMU, `kansoku record --period N` samples instructions"));
    }
    if let (Some(f), true) = (&rec.fallback, req.solver.is_none()) {
        // Chosen, not asked: said in the choice too, and a warning all the same (the
        // replacement may not rebuild the exact iteration).
        choices.solver_reason = format!("{}; but {f}", choices.solver_reason);
    }
    warnings.extend(rec.warnings());
    let class_traces = match (&req.output, req.class) {
        (Some(out), None) => other_classes(out, req, &rec, &loaded, &options)?,
        _ => Vec::new(),
    };
    let durations = &loaded.durations;
    let iteration_durations = (loaded.weighting == Weighting::Time && durations.unsampled.summary().or(durations.sampled.summary()).is_some())
        .then(|| IterationDurations { without_sample: durations.unsampled.summary(), with_sample: durations.sampled.summary() });
    let report = Report {
        recording: req.recording.clone(),
        output: req.output.clone(),
        by: req.by,
        weighting: loaded.weighting,
        choices,
        reconstruction: rec,
        comparison,
        compared_iteration,
        class_traces,
        iteration_durations,
        warnings,
    };
    Ok((report, lines))
}

/// The classes other than `rec`'s that hold a sample per instruction, each rebuilt into
/// `OUT.class-LENGTH`.
fn other_classes(out: &Path, req: &Request, rec: &Reconstruction, loaded: &Loaded, options: &Options) -> Result<Vec<ClassTrace>, FileError> {
    let mut class_traces = Vec::new();
    let Some(classes) = &rec.classes else { return Ok(class_traces) };
    for c in classes.iter().filter(|c| Some(c.length) != rec.class && c.enough_samples()).take(MAX_CLASS_TRACES) {
        let file = PathBuf::from(format!("{}.class-{}", out.display(), c.length));
        let r = reconstruct(&loaded.observations, &loaded.names, &Options { class: Some(c.length), ..options.clone() }, &mut |_, _| {}).map_err(|error| {
            FileError::Reconstructing { doing: format!("reconstructing the class of {} instructions from {}", c.length, req.recording.display()), error }
        })?;
        let (_, comparison, compared_iteration) = write_and_compare(&Some(file.clone()), req, &r, loaded)?;
        class_traces.push(ClassTrace {
            length: c.length,
            iterations: c.iterations,
            share: c.share,
            samples: c.samples,
            solver: r.solver,
            trace_length: r.length,
            covered_positions: r.covered_positions,
            output: file,
            comparison,
            compared_iteration,
            // the recording's own warnings are the main trace's already
            warnings: r.warnings().into_iter().filter(|w| w.kind != "iterations_differ").collect(),
        });
    }
    Ok(class_traces)
}

/// A written trace's lines, its comparison with the exact iteration and which iteration.
type Written = (Vec<String>, Option<Comparison>, Option<usize>);

/// Writes `rec` into `output` (when given) and compares it with the exact iteration of its
/// class: the trace's lines, the comparison and the iteration compared with.
fn write_and_compare(output: &Option<PathBuf>, req: &Request, rec: &Reconstruction, loaded: &Loaded) -> Result<Written, FileError> {
    let lines = trace_lines(rec, &loaded.names);
    if let Some(out) = output {
        let text = trace_text(rec, &lines, req.by, loaded.weighting, &req.recording);
        std::fs::write(out, text).map_err(|cause| FileError::Io { doing: "writing", path: out.clone(), cause })?;
    }
    let class_length = rec.class.or(rec.split.iteration_length.filter(|_| rec.classes.is_some()));
    let (comparison, compared_iteration) = match &req.exact {
        Some(exact) => {
            let keys: Vec<String> = rec.trace.iter().map(|i| i.display(&loaded.names, Granularity::Function)).collect();
            let iteration = iteration_of_class(exact, class_length)?;
            (Some(compare_keys(&keys, exact, iteration)?), Some(iteration))
        }
        None => (None, None),
    };
    Ok((lines, comparison, compared_iteration))
}
