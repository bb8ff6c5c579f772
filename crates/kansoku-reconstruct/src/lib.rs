//! # kansoku-reconstruct — seed 000: instruction traces from sparse samples
//!
//! Single-stepping a program slows it 1000×; sampling the instruction pointer every P
//! instructions (or T ns) barely disturbs it. If a region (one call of `func_M`) executes
//! the same instructions every time, the samples of many iterations, put together in the
//! right order, are one iteration's full trace. The model, in the seed's words:
//!
//! 1. **Instruction information** ([`info`]): each sample becomes (function, offset) or
//!    (function, basic block, offset in block), offsets counted in instructions.
//! 2. **Partial sequences** ([`split`]): one per iteration — cut at marker hits, every
//!    T/P samples, or where a known function starts.
//! 3. **Scores** ([`scores`]): similarity of two sequences (compared from the head, highest
//!    when offsets differ by 1: neighbours) and likelihood of a pattern (consecutive
//!    instructions, highest when the offset rises by exactly 1).
//! 4. **Solvers**: [`patent`] — the seed's greedy loop, with the best combination pattern
//!    of two groups found exactly by dynamic programming ([`merge`]); [`exact`] — a global
//!    order maximising total likelihood; [`phase`] — exact placement by instruction count
//!    since the marker, when the recording has counts.
//! 5. **Metrics** ([`metrics`]): position accuracy, LCS ratio, edit distance against the
//!    exact trace.
//!
//! Analyses take data and return data. Around them, the files: [`input`] symbolises a
//! sampled recording into [`Observation`]s, [`truth`] reads the exact trace a result is
//! judged against, [`trace_file`] writes and reads the reconstructed trace, and [`report`]
//! makes one reconstruction of a file as `kansoku reconstruct` does (the solver and scores
//! chosen, the classes rebuilt, the warnings); the CLI parses options and prints.
#![deny(missing_docs)]

pub mod ambiguity;
pub mod chain;
pub mod classes;
mod error;
pub mod exact;
pub mod flow;
pub mod info;
pub mod input;
pub mod merge;
pub mod metrics;
pub mod patent;
pub mod phase;
pub mod report;
pub mod sampling;
pub mod scores;
pub mod split;
pub mod trace_file;
pub mod truth;

pub use error::{FileError, ReconstructError, SplitSpecError, UnknownChoice};
pub use flow::ControlFlow;
pub use info::{Granularity, Info, Names, Observation, Weighting};
pub use input::{load_samples, Loaded};
pub use report::{reconstruct_file, Choices, ClassTrace, Likelihood, Report, Request};
pub use metrics::{compare, compare_order, compare_shares, Comparison, OrderComparison, ShareComparison, ShareRow};
pub use scores::{Scores, ScoresFileError};
pub use split::{Budget, PartialSequence, Split, SplitReport, Splitting};

use serde::Serialize;

/// `--solver`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Solver {
    /// The seed's greedy merging of the most similar sequences ([`patent`]).
    Patent,
    /// The order of most likelihood, searched with a bound ([`exact`]).
    Exact,
    /// Each sample placed at its instruction position in the iteration ([`phase`]).
    Phase,
}

impl std::str::FromStr for Solver {
    type Err = error::UnknownChoice;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "patent" => Ok(Solver::Patent),
            "exact" => Ok(Solver::Exact),
            "phase" => Ok(Solver::Phase),
            _ => Err(error::UnknownChoice { what: "solver", name: s.to_string(), choices: "patent, exact or phase" }),
        }
    }
}

/// Everything a reconstruction is asked to do.
#[derive(Clone, Debug)]
pub struct Options {
    /// How the samples are cut into iterations.
    pub split: Split,
    /// Which solver orders the partial sequences.
    pub solver: Solver,
    /// The similarity and likelihood tables.
    pub scores: Scores,
    /// Sampling period in instructions, when the recording was made by instruction count.
    pub period: Option<u64>,
    /// `--top-k` for the patent solver; 0 = [`TOP_K_SWEEP`], the most likely result kept.
    pub top_k: usize,
    /// `--linkage` for the patent solver: how similar merged groups are.
    pub linkage: patent::Linkage,
    /// Use at most this many distinct partial sequences (default: as many as cover one
    /// iteration once when its length is known, at most [`ITERATION_CAP`]; else the
    /// [`HEAVIEST_CAP`] heaviest).
    pub sequences: Option<usize>,
    /// Polled during long work (Ctrl-C): when it returns true the solvers stop and the
    /// best trace so far is returned, marked `interrupted`.
    pub stop: Option<fn() -> bool>,
    /// Rebuild the iterations of this length (instructions between marker hits) only.
    /// `None`: when iterations differ in length, the class with the most iterations
    /// ([`classes`]); the others are listed and set aside, with a warning.
    pub class: Option<u64>,
}

/// Most sequences the seed's loop takes (it keeps a matrix of all pairs: 200 MB at 10,000;
/// measured 5.3 s for 10,000 sequences of 20 samples, lcs 1.0, docs/BENCHMARKS.md); the
/// exact solver takes at most [`exact::HEURISTIC_LIMIT`]. Beyond, the sequences are
/// ordered by [`chain`], which scores only candidate neighbours: seconds at 10^5, but a
/// greedy order of lower quality, so the pairwise solvers are kept wherever they fit.
pub const QUADRATIC_LIMIT: usize = 10_000;

/// Most distinct sequences taken by weight by default (time sampling, or no iteration
/// length): the heaviest are the iterations seen most often.
pub const HEAVIEST_CAP: usize = 2000;

/// Most distinct sequences taken by default when one iteration's worth is chosen (count
/// sampling with a known iteration length: about one per period instruction).
pub const ITERATION_CAP: usize = 100_000;

/// A reconstructed trace and how it was made.
#[derive(Clone, Debug, Serialize)]
pub struct Reconstruction {
    /// The reconstructed iteration, one instruction each.
    #[serde(skip)]
    pub trace: Vec<Info>,
    /// Instructions in `trace`.
    pub length: usize,
    /// The solver asked for.
    pub requested: Solver,
    /// The solver that made the trace.
    pub solver: Solver,
    /// Why the requested solver was replaced, if it was.
    pub fallback: Option<String>,
    /// What splitting found.
    pub split: SplitReport,
    /// Distinct partial sequences the solver ordered.
    pub sequences_used: usize,
    /// Samples in them.
    pub samples_used: usize,
    /// Distinct non-empty partial sequences (identical ones merged), how the ones used were
    /// chosen, and how many iterations they stand for (the sum of their weights).
    pub distinct_sequences: usize,
    /// How the sequences used were chosen.
    pub budget: Budget,
    /// Iterations the sequences used stand for (the sum of their weights).
    pub iterations_used: usize,
    /// Beyond [`QUADRATIC_LIMIT`] sequences (exact: [`exact::HEURISTIC_LIMIT`]): the
    /// candidate-neighbour ordering used instead of the pairwise solvers.
    pub chain: Option<chain::ChainResult>,
    /// Stopped early (Ctrl-C): the trace is the best found until then.
    pub interrupted: bool,
    /// When the iterations recorded cannot put a sample on every instruction of the region
    /// (see [`coverage_warning`]).
    pub coverage_warning: Option<String>,
    /// Total likelihood of the final pattern (patent, exact).
    pub likelihood: Option<i64>,
    /// Patent: the `--top-k` whose result was kept, and the linkage used.
    pub top_k: Option<usize>,
    /// Patent: the linkage used.
    pub linkage: Option<patent::Linkage>,
    /// `exact`: whether proven optimal, the upper bound and the relative gap.
    pub optimal: Option<bool>,
    /// `exact`: the best likelihood any order could reach.
    pub upper_bound: Option<i64>,
    /// `exact`: (upper bound − likelihood) / |upper bound|.
    pub optimality_gap: Option<f64>,
    /// `phase`: positions covered of the iteration, and disagreeing samples.
    pub covered_positions: Option<u64>,
    /// `phase`: positions where samples disagree about the instruction.
    pub conflicts: Option<u64>,
    /// `--likelihood cfg`: returns moved to their right return site (see
    /// [`flow::repair_nesting`]).
    pub nesting_repairs: Option<usize>,
    /// Patent/exact: partial sequences holding a single sample, another order that scores
    /// at least as well and gives a different trace ([`ambiguity`]), and a warning when
    /// the order is not fixed by the samples (see [`order_warning`]).
    pub single_sample_sequences: Option<usize>,
    /// Another order scoring at least as well, with a different trace.
    pub alternative: Option<ambiguity::Alternative>,
    /// Whether the search for an alternative ran (at most [`ambiguity::LIMIT`] sequences).
    pub alternative_checked: Option<bool>,
    /// Why the order is not fixed by the samples, when it is not.
    pub order_warning: Option<String>,
    /// Iterations that differ in length: every class (most iterations first), the one
    /// this trace rebuilds, and the warning that the others are not in it.
    pub classes: Option<Vec<classes::IterationClass>>,
    /// The class rebuilt: its iteration length in instructions.
    pub class: Option<u64>,
    /// That the other classes are not in the trace.
    pub class_warning: Option<String>,
    /// `phase`: positions of the iteration no sample fell on (the trace lacks them).
    pub missing_warning: Option<String>,
    /// Wall-clock seconds the reconstruction took.
    pub seconds: f64,
}

/// Something the user must know about a trace: why it may not be the exact iteration of
/// its class, and what would fix that.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Warning {
    /// A stable name: `coverage`, `positions_missing`, `iterations_differ`,
    /// `solver_replaced`, `order_not_fixed`, `interrupted`, or one the caller adds.
    pub kind: String,
    /// What is wrong, in a sentence.
    pub message: String,
    /// What would fix it (a command-line change, or another recording).
    pub fix: String,
}

impl Warning {
    /// A warning of `kind` (see [`Warning::kind`]).
    pub fn new(kind: &str, message: impl Into<String>, fix: impl Into<String>) -> Warning {
        Warning { kind: kind.to_string(), message: message.into(), fix: fix.into() }
    }
}

impl Reconstruction {
    /// Every reason this trace may not be the exact iteration of its class, structured.
    pub fn warnings(&self) -> Vec<Warning> {
        let mut out = Vec::new();
        if let Some(w) = &self.class_warning {
            let fix = match &self.classes {
                Some(c) if c.len() > 1 => format!("--class LENGTH rebuilds another class (lengths: {})", c.iter().map(|c| c.length.to_string()).collect::<Vec<_>>().join(", ")),
                _ => "--class LENGTH rebuilds another class".into(),
            };
            out.push(Warning::new("iterations_differ", w.clone(), fix));
        }
        if let Some(w) = &self.coverage_warning {
            out.push(Warning::new("coverage", w.clone(), "record more iterations than the period, or sample with a shorter period that shares no factor with the iteration's length"));
        }
        if let Some(w) = &self.missing_warning {
            out.push(Warning::new("positions_missing", w.clone(), "record more iterations, or sample with a shorter period"));
        }
        if let Some(w) = &self.fallback {
            out.push(Warning::new("solver_replaced", w.clone(), "record instruction counts at samples and marker hits (kansoku record --period N, or kansoku sample) so --solver phase applies"));
        }
        if let Some(w) = &self.order_warning {
            out.push(Warning::new("order_not_fixed", w.clone(), "--solver phase with instruction counts, or a shorter period"));
        }
        if self.interrupted {
            out.push(Warning::new(
                "interrupted",
                format!("interrupted (Ctrl-C): this trace is the best found until then (the {} partial sequences merged as far as the solver came, the rest joined in recording order), not a finished reconstruction", self.sequences_used),
                "run again to the end",
            ));
        }
        out
    }
}

/// Cuts, selects and solves.
pub fn reconstruct(observations: &[Observation], names: &Names, options: &Options, progress: &mut dyn FnMut(usize, usize)) -> Result<Reconstruction, ReconstructError> {
    let started = std::time::Instant::now();
    let mut splitting = split::split(observations, &options.split, options.period, names)?;
    let (all_classes, class, class_warning) = choose_class(&splitting, options.class)?;
    if let Some(length) = class {
        splitting = classes::restrict(&splitting, length);
    }
    let mut rec = Reconstruction {
        trace: vec![],
        length: 0,
        requested: options.solver,
        solver: options.solver,
        fallback: None,
        split: SplitReport::from(&splitting),
        sequences_used: 0,
        samples_used: 0,
        distinct_sequences: 0,
        budget: Budget::Requested,
        iterations_used: 0,
        chain: None,
        interrupted: false,
        coverage_warning: coverage_warning(&splitting, options.period, options.scores.weighting),
        likelihood: None,
        top_k: None,
        linkage: None,
        optimal: None,
        upper_bound: None,
        optimality_gap: None,
        covered_positions: None,
        conflicts: None,
        nesting_repairs: None,
        single_sample_sequences: None,
        alternative: None,
        alternative_checked: None,
        order_warning: None,
        classes: all_classes,
        class,
        class_warning,
        missing_warning: None,
        seconds: 0.0,
    };
    if options.solver == Solver::Phase {
        match phase::solve_phase(&splitting) {
            Ok(p) => {
                rec.trace = p.trace;
                rec.sequences_used = splitting.non_empty();
                rec.samples_used = p.samples as usize;
                rec.covered_positions = Some(p.covered);
                rec.conflicts = Some(p.conflicts);
                if p.covered == p.iteration_length {
                    // Every position received a sample: the period's arithmetic (which
                    // assumes back-to-back iterations of one length; iterations of other
                    // classes in between shift the phase) did not limit this recording.
                    rec.coverage_warning = None;
                }
                if p.covered < p.iteration_length {
                    rec.missing_warning = Some(format!(
                        "{} of the iteration's {} instructions received no sample: the trace lacks them ({} samples in {} iterations)",
                        p.iteration_length - p.covered,
                        p.iteration_length,
                        p.samples,
                        splitting.iterations()
                    ));
                }
                return Ok(finish(rec, started));
            }
            Err(e) => {
                rec.fallback = Some(format!("{e}; using --solver patent instead"));
                rec.solver = Solver::Patent;
            }
        }
    }
    let iteration = match options.scores.weighting {
        Weighting::Count => splitting.iteration_length,
        Weighting::Time => None,
    };
    let distinct = split::distinct(&splitting, options.scores.weighting == Weighting::Time);
    rec.distinct_sequences = distinct.len();
    let cap = if iteration.is_some() { ITERATION_CAP } else { HEAVIEST_CAP };
    let (chosen, budget) = split::choose(&distinct, iteration, options.sequences, cap);
    rec.budget = budget;
    rec.iterations_used = chosen.iter().map(|d| d.weight).sum();
    let sequences: Vec<Vec<Info>> = chosen.into_iter().map(|d| d.sequence.samples).collect();
    rec.sequences_used = sequences.len();
    rec.samples_used = sequences.iter().map(Vec::len).sum();
    let stop = || options.stop.is_some_and(|f| f());
    let pairwise_limit = if rec.solver == Solver::Exact { exact::HEURISTIC_LIMIT } else { QUADRATIC_LIMIT };
    if sequences.len() > pairwise_limit {
        let mut r = chain::solve_chain(&options.scores, &sequences, progress, &stop);
        rec.trace = std::mem::take(&mut r.trace);
        rec.likelihood = Some(r.likelihood);
        rec.interrupted = r.stopped;
        rec.chain = Some(r);
        rec.nesting_repairs = finish_trace(&mut rec.trace, options);
        let single = sequences.iter().filter(|s| s.len() == 1).count();
        rec.single_sample_sequences = Some(single);
        rec.alternative_checked = Some(false);
        rec.order_warning = order_warning(single, sequences.len(), &splitting, options.period);
        return Ok(finish(rec, started));
    }
    let order = match rec.solver {
        Solver::Patent | Solver::Phase => {
            let r = solve_patent(&options.scores, &sequences, options.top_k, options.linkage, progress, &stop);
            rec.top_k = Some(r.top_k);
            rec.linkage = Some(r.result.linkage);
            rec.interrupted = r.result.stopped || stop();
            rec.trace = r.result.trace;
            rec.likelihood = Some(r.result.likelihood);
            r.result.order
        }
        Solver::Exact => {
            let start = if sequences.len() > exact::EXACT_LIMIT {
                let r = solve_patent(&options.scores, &sequences, options.top_k, options.linkage, progress, &stop);
                if r.result.stopped || stop() {
                    // Ctrl-C: the seed's loop as far as it came is the best trace so far.
                    rec.interrupted = true;
                    rec.trace = r.result.trace;
                    rec.likelihood = Some(r.result.likelihood);
                    rec.nesting_repairs = finish_trace(&mut rec.trace, options);
                    rec.alternative_checked = Some(false);
                    return Ok(finish(rec, started));
                }
                Some(r.result.order)
            } else {
                None
            };
            let r = exact::solve_exact(&options.scores, &sequences, start.as_deref())?;
            rec.trace = r.trace;
            rec.likelihood = Some(r.likelihood);
            rec.optimal = Some(r.optimal);
            rec.upper_bound = Some(r.upper_bound);
            rec.optimality_gap = Some(r.gap);
            r.order
        }
    };
    rec.nesting_repairs = finish_trace(&mut rec.trace, options);
    if rec.interrupted {
        rec.alternative_checked = Some(false);
        return Ok(finish(rec, started));
    }
    check_order(&mut rec, &sequences, &order, &splitting, options);
    Ok(finish(rec, started))
}

/// Which class of iterations to rebuild: `asked`, else (when lengths differ) the one with
/// the most iterations. Returns all classes, the one chosen and the warning that the
/// others are set aside.
fn choose_class(splitting: &split::Splitting, asked: Option<u64>) -> Result<(Option<Vec<classes::IterationClass>>, Option<u64>, Option<String>), ReconstructError> {
    let all = classes::by_length(splitting);
    let Some(list) = &all else {
        if let Some(length) = asked {
            return Err(ReconstructError::NoSuchClass(format!("--class {length}: the iterations' lengths are not known (the recording has no instruction counts at marker hits, or --split is not marker)")));
        }
        return Ok((None, None, None));
    };
    let chosen = match asked {
        Some(length) => list.iter().find(|c| c.length == length).ok_or_else(|| {
            ReconstructError::NoSuchClass(format!("--class {length}: no complete iteration is {length} instructions long (lengths: {})", list.iter().map(|c| c.length.to_string()).collect::<Vec<_>>().join(", ")))
        })?,
        None if list.len() == 1 => return Ok((all.clone(), None, None)),
        None => &list[0],
    };
    let others: Vec<&classes::IterationClass> = list.iter().filter(|c| c.length != chosen.length).collect();
    let warning = (!others.is_empty()).then(|| {
        let set_aside: usize = others.iter().map(|c| c.iterations).sum();
        let shown: Vec<String> = others.iter().take(6).map(|c| format!("{} × {} instructions (first: iteration {})", c.iterations, c.length, c.first_iteration)).collect();
        format!(
            "iterations differ in length: this trace is the class of {} instructions ({} of {} complete iterations, {:.1} %); {set_aside} iterations in {} other class(es) are not in it: {}{}",
            chosen.length,
            chosen.iterations,
            splitting.iterations(),
            chosen.share * 100.0,
            others.len(),
            shown.join(", "),
            if others.len() > 6 { ", …" } else { "" }
        )
    });
    Ok((all.clone(), Some(chosen.length), warning))
}

/// What follows every ordering: with control-flow scores, the cycle opened at the marker
/// function's entry and returns moved to their return sites. Returns the repairs made.
fn finish_trace(trace: &mut [Info], options: &Options) -> Option<usize> {
    let flow = options.scores.flow.as_ref()?;
    if let (Split::Marker, Some(entry)) = (&options.split, flow.entry) {
        open_at(trace, entry);
    }
    Some(flow::repair_nesting(trace, flow, &|a: &Info, b: &Info| options.scores.likelihood(a, b)))
}

/// Whether the samples fix the order found: a witness order when [`ambiguity`] finds one;
/// beyond [`ambiguity::LIMIT`] sequences, the single-sample rule of thumb.
fn check_order(rec: &mut Reconstruction, sequences: &[Vec<Info>], order: &[usize], splitting: &split::Splitting, options: &Options) {
    let single = sequences.iter().filter(|s| s.len() == 1).count();
    rec.single_sample_sequences = Some(single);
    let checked = (3..=ambiguity::LIMIT).contains(&sequences.len());
    rec.alternative_checked = Some(checked);
    if !checked {
        rec.order_warning = order_warning(single, sequences.len(), splitting, options.period);
        return;
    }
    let finish = |t: &mut [Info]| {
        finish_trace(t, options);
    };
    let mut order = order.to_vec();
    let mut adopted = 0;
    rec.alternative = loop {
        let alternative = ambiguity::alternative(&options.scores, sequences, &order, &rec.trace, &finish);
        match alternative {
            // The exact solver's search is a heuristic beyond EXACT_LIMIT sequences: an
            // order that scores higher is taken, and looked at again.
            Some(a) if rec.solver == Solver::Exact && Some(a.likelihood) > rec.likelihood && adopted < ADOPT_ROUNDS => {
                adopt(rec, sequences, &a.order, options);
                order = a.order;
                adopted += 1;
            }
            other => break other,
        }
    };
    rec.order_warning = rec.alternative.as_ref().map(|a| ambiguous_warning(a, rec.likelihood, rec.trace.len(), splitting, options.scores.has_flow()));
}

/// Most times the exact solver takes a more likely witness order and looks again.
const ADOPT_ROUNDS: usize = 4;

/// The exact solver takes `order`: its trace, likelihood and optimality gap.
fn adopt(rec: &mut Reconstruction, sequences: &[Vec<Info>], order: &[usize], options: &Options) {
    let refs: Vec<&[Info]> = order.iter().map(|&i| sequences[i].as_slice()).collect();
    let likelihood = merge::order_likelihood(&options.scores, &refs);
    rec.trace = merge::round_robin(&refs);
    rec.nesting_repairs = finish_trace(&mut rec.trace, options);
    rec.likelihood = Some(likelihood);
    if let Some(bound) = rec.upper_bound {
        rec.optimality_gap = Some(if bound == 0 { 0.0 } else { (bound - likelihood) as f64 / (bound as f64).abs() });
    }
}

/// The warning for a witness. As likely: the samples do not decide, say where the traces
/// differ and what would decide. More likely (patent only; exact takes it): the loop
/// stopped short of the best order.
fn ambiguous_warning(a: &ambiguity::Alternative, likelihood: Option<i64>, length: usize, splitting: &split::Splitting, has_flow: bool) -> String {
    let found = likelihood.unwrap_or(a.likelihood);
    let span = format!("differing at instructions {}..{} of {length}", a.first_difference, a.last_difference);
    if a.likelihood > found {
        return format!(
            "another order of the partial sequences scores higher ({} > {found}), {span}: this trace is not the most likely one; --solver exact searches further",
            a.likelihood
        );
    }
    // The seed's tables score every call and return as a mismatch: they may be what
    // cannot decide, not the samples.
    let scores = if has_flow { "" } else { "; --likelihood cfg scores calls and returns by the control flow and may decide" };
    format!(
        "the samples do not fix the order of the partial sequences: another order scores the same ({found}) and gives a different trace, {span}; this trace is one of equals there, not necessarily the run's; {}{scores}",
        remedy(splitting)
    )
}

/// What would place the samples: instruction counts for `--solver phase`, or a shorter
/// period.
fn remedy(splitting: &split::Splitting) -> String {
    if phase::solve_phase(splitting).is_ok() {
        return "the recording has instruction counts: --solver phase places every sample exactly".to_string();
    }
    let below = match splitting.iteration_length {
        Some(t) => format!(" (below the iteration's {t} instructions)"),
        None => String::new(),
    };
    format!("record instruction counts for --solver phase, or sample with a shorter period{below}")
}

/// Patent and exact order *partial sequences*; a sequence of one sample brings no order of
/// its own, only its instruction. When most sequences hold one sample (period ≥ iteration
/// length) the result is one of the orders the likelihood cannot tell apart: another order
/// of the same instructions with the same neighbours scores exactly the same (measured:
/// docs/BENCHMARKS.md, seed 000). Say so, and what would place the samples instead.
pub fn order_warning(single: usize, sequences: usize, splitting: &split::Splitting, period: Option<u64>) -> Option<String> {
    if sequences == 0 || single * 2 <= sequences {
        return None;
    }
    let remedy = remedy(splitting);
    let period = period.map(|p| format!(" at period {p}")).unwrap_or_default();
    Some(format!(
        "{single} of {sequences} partial sequences hold a single sample{period}: their order is not in the samples, and this trace is one of the orders that score the same, not necessarily the run's; {remedy}"
    ))
}

/// Whether the recorded iterations can cover the region. Sampling every P instructions, the
/// k-th sample of consecutive iterations moves by P mod T positions (T = instructions per
/// iteration), so every position receives a sample only after P iterations, and only when
/// P and T have no common factor (else only T/gcd(P, T) positions ever do). With fewer, the
/// trace misses instructions whatever the solver: say so, and how many are needed.
pub fn coverage_warning(splitting: &split::Splitting, period: Option<u64>, weighting: Weighting) -> Option<String> {
    let (Some(p), Some(t), Weighting::Count) = (period, splitting.iteration_length, weighting) else {
        return None;
    };
    if p == 0 || t == 0 {
        return None;
    }
    let iterations = splitting.iterations() as u64;
    let g = gcd(p, t);
    let mut out = Vec::new();
    if g > 1 {
        out.push(format!(
            "the period {p} and the iteration's {t} instructions share the factor {g}: only {} of the {t} positions can ever be sampled; choose a period with no common factor (e.g. {})",
            t / g,
            (p..).find(|&q| gcd(q, t) == 1).unwrap_or(p)
        ));
    }
    if iterations < p && p > 1 {
        let reach = (iterations.saturating_mul(t) / p).min(t / g);
        out.push(format!(
            "{iterations} complete iterations sampled every {p} instructions reach at most {reach} of the {t} instructions of the region: covering each needs at least {p} iterations (the period); record at least {p} iterations or sample with a shorter period"
        ));
    }
    (!out.is_empty()).then(|| out.join("; "))
}

fn gcd(mut a: u64, mut b: u64) -> u64 {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

/// `--top-k 0`: the k tried. The loop is greedy, and which k merges well depends on the
/// data; the seed judges patterns by their likelihood, so of these runs the most likely
/// result is kept (the first of equals).
pub const TOP_K_SWEEP: [usize; 5] = [1, 2, 4, 8, 16];

/// Most sequences the sweep runs on; beyond, k = 1 only. The sweep costs about 1 + 2 + 4 +
/// 8 + 16 merges per round where k = 1 costs one: measured on a cpu-clock recording of
/// 3 M calls of seed000's func_M (1,076 distinct sequences), 62 s against 10 s. The grid's
/// first four programs have at most 489 sequences and keep the sweep; crcmix (1,024) and
/// bsearch (736) at period 997 run k = 1 (both cells warn with a witness).
pub(crate) const SWEEP_LIMIT: usize = 512;

struct PatentRun {
    result: patent::PatentResult,
    top_k: usize,
}

/// The seed's loop with `top_k`, or with every k of [`TOP_K_SWEEP`] when `top_k` is 0.
fn solve_patent(scores: &Scores, sequences: &[Vec<Info>], top_k: usize, linkage: patent::Linkage, progress: &mut dyn FnMut(usize, usize), stop: &dyn Fn() -> bool) -> PatentRun {
    if top_k > 0 {
        return PatentRun { result: patent::solve_patent_until(scores, sequences, top_k, linkage, progress, stop), top_k };
    }
    if sequences.len() > SWEEP_LIMIT {
        return PatentRun { result: patent::solve_patent_until(scores, sequences, 1, linkage, progress, stop), top_k: 1 };
    }
    let mut best: Option<PatentRun> = None;
    for k in TOP_K_SWEEP {
        if best.is_some() && stop() {
            break;
        }
        let result = patent::solve_patent_until(scores, sequences, k, linkage, progress, stop);
        if best.as_ref().is_none_or(|b| result.likelihood > b.result.likelihood) {
            best = Some(PatentRun { result, top_k: k });
        }
    }
    best.expect("the sweep tries at least one k")
}

/// A reconstructed iteration is a cycle: the likelihood of a pattern does not say where
/// the iteration begins when every sequence holds one sample (P ≥ T), and any rotation
/// scores the same. With markers the region begins at the marker function's entry, so
/// the cycle is opened there (at its first occurrence; unchanged if it was not sampled).
fn open_at(trace: &mut [Info], entry: u64) {
    if let Some(at) = trace.iter().position(|i| i.addr == entry) {
        trace.rotate_left(at);
    }
}

fn finish(mut rec: Reconstruction, started: std::time::Instant) -> Reconstruction {
    rec.length = rec.trace.len();
    rec.seconds = started.elapsed().as_secs_f64();
    rec
}
