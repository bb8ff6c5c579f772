//! What the `kansoku cache` commands answer, apart from how they are asked and printed:
//! the kernel and its warm-up read from a command's file, the simulation report and its
//! JSON schema ([`SimReport`]), the model's choice of method and its fallbacks
//! ([`answer_model`]), the formulas' checks against the simulator, and the evaluation of
//! a formulas file ([`evaluate_file`]). Their text is in [`crate::report`].

use crate::check::{check_and_rebuild, check_points, MAX_CHECK_ACCESSES};
use crate::config::{parse_params, CacheConfig, DataInfo, LayoutSpec, ParamValues};
use crate::error::{CacheError, Result};
use crate::kernel::Kernel;
use crate::model::{build_model, Evaluation, Family, KernelFormulas, ModelOptions};
use crate::sets::{build_hierarchy_model, build_set_model, Alternative, RefSetEvaluation, RefSetFormulas, SetFormulas, SetModelOptions};
use crate::sim::{Inclusion, Program, RefStats, Start};
use serde::Serialize;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

/// What a command shows while it works: notes (on stderr), and a phase's progress.
pub trait Ui: Send + Sync {
    /// A note for the user (what was assumed, what fell back and why).
    fn note(&self, msg: &str);
    /// A phase starts; [`Ui::progress`] then reports its count.
    fn begin(&self, phase: Phase);
    /// How far the current phase is: `n` of its count (steps simulated; for
    /// [`Phase::Interpolating`], the size reached).
    fn progress(&self, n: u64);
    /// The phase ended.
    fn end(&self);
}

/// A long step of a command.
#[derive(Clone, Copy, Debug)]
pub enum Phase {
    /// A simulation of this many accesses, expected to take about this many seconds.
    Simulating {
        /// Accesses the simulation will make.
        accesses: u64,
        /// Its expected duration in seconds, from the simulator's measured speed.
        seconds: f64,
    },
    /// The set method: building sets and counting.
    BuildingSets,
    /// Interpolation: simulating size after size (the progress is the size).
    Interpolating,
}

/// A [`Ui`] that shows nothing.
pub struct Quiet;
impl Ui for Quiet {
    fn note(&self, _: &str) {}
    fn begin(&self, _: Phase) {}
    fn progress(&self, _: u64) {}
    fn end(&self) {}
}

/// A kernel file as a command names it: the kernel language, or PolyBench-style C
/// (`FILE.c`) with its `--function`, `-D` and `--size`.
#[derive(Clone, Debug, Default)]
pub struct Source {
    /// The kernel file (`.c`: PolyBench-style C; otherwise the kernel language).
    pub path: PathBuf,
    /// C input: lower this function's body instead of the `#pragma scop` region.
    pub function: Option<String>,
    /// C input: `-D NAME=VALUE` (`-D NAME` is `NAME=1`).
    pub defines: Vec<String>,
    /// C input: a dataset preset (MINI ... EXTRALARGE).
    pub size: Option<String>,
}

impl Source {
    /// The file at `path` with no C options.
    pub fn new(path: &Path) -> Source {
        Source { path: path.to_path_buf(), ..Source::default() }
    }

    /// PolyBench-style C input (`FILE.c`), rather than the kernel language.
    pub(crate) fn is_c(&self) -> bool {
        is_c(&self.path)
    }

    /// The arrays one after the other, as this input's program places them (PolyBench's
    /// page alignment for C), or at `bases` when given.
    pub fn layout(&self, bases: Option<&str>, start: u64, align: Option<u64>) -> Result<LayoutSpec> {
        match bases {
            Some(b) => LayoutSpec::parse_bases(b),
            None => Ok(LayoutSpec::default_for(self.is_c(), start, align)),
        }
    }

    fn c_input(&self, function: Option<String>) -> Result<crate::CInput> {
        let mut defines = Vec::new();
        for d in &self.defines {
            let (name, value) = d.split_once('=').unwrap_or((d.as_str(), "1"));
            if name.trim().is_empty() {
                return Err(CacheError::Input(format!("-D {d}: expected NAME=VALUE")));
            }
            defines.push((name.trim().to_string(), value.trim().to_string()));
        }
        Ok(crate::CInput { function, defines, preset: self.size.clone(), header: None })
    }

    /// The kernel, and the values its sizes got from a C file's `-D` or `--size` (empty for
    /// the kernel language, whose sizes come from `--param`).
    pub fn load(&self) -> Result<(Kernel, ParamValues)> {
        if self.is_c() {
            let lowered = crate::load_c_kernel(&self.path, &self.c_input(self.function.clone())?)?;
            return Ok((lowered.kernel, lowered.sizes.into_iter().collect()));
        }
        if self.function.is_some() || !self.defines.is_empty() || self.size.is_some() {
            return Err(CacheError::Input(format!("{}: --function, -D and --size are for C files (FILE.c); a kernel-language file takes --param", self.path.display())));
        }
        Ok((crate::load_kernel(&self.path)?, ParamValues::new()))
    }

    /// `--warm`'s code: a C file's function (`init_array`), or a kernel-language file.
    pub fn warmup(&self, warm: Option<&str>) -> Result<Option<Warmup>> {
        let Some(w) = warm else { return Ok(None) };
        let kernel = if self.is_c() {
            crate::load_c_warmup(&self.path, &self.c_input(None)?, w).map_err(|e| e.context(format!("--warm: reading {w} of {} as the code before the kernel", self.path.display())))?
        } else {
            crate::load_kernel(Path::new(w)).map_err(|e| e.context(format!("--warm {w}: for a kernel-language file, a kernel-language file of the code before the kernel")))?
        };
        Ok(Some(Warmup { kernel, name: w.to_string() }))
    }
}

fn is_c(path: &Path) -> bool {
    path.extension().is_some_and(|e| e == "c")
}

/// Parameter values, `X=10,Y=10`.
pub fn params(spec: &str) -> Result<ParamValues> {
    parse_params(spec)
}

/// `spec`'s values over the sizes a C file gave (the explicit ones win); none of either is `None`.
pub fn params_over(spec: Option<&str>, sizes: &ParamValues) -> Result<Option<ParamValues>> {
    let mut p = sizes.clone();
    if let Some(s) = spec {
        p.extend(params(s)?);
    }
    Ok((!p.is_empty()).then_some(p))
}

/// The reference `sel` (`S3:right:1` or `P2`) names, or an error listing the known ones.
pub fn find_ref(k: &Kernel, sel: &str) -> Result<usize> {
    k.find_ref(sel).ok_or_else(|| {
        let known: Vec<String> = k.refs.iter().map(|r| format!("P{} = {}:{}:{}", r.id, k.statements[r.stmt].label, r.side.as_str(), r.position)).collect();
        CacheError::Input(format!("no reference '{sel}' in {} (known: {})", k.file, known.join(", ")))
    })
}

/// `A=1,B=2`.
pub(crate) fn fmt_params(p: &ParamValues) -> String {
    p.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join(",")
}

/// Seconds as a person reads them: "40 s", "12 min", "3.5 h", "9 days".
pub(crate) fn fmt_duration(secs: f64) -> String {
    match secs {
        s if s < 120.0 => format!("{s:.0} s"),
        s if s < 7200.0 => format!("{:.0} min", s / 60.0),
        s if s < 172_800.0 => format!("{:.1} h", s / 3600.0),
        s => format!("{:.0} days", s / 86400.0),
    }
}

/// What runs before the kernel for `--warm`, and its name for reports.
pub struct Warmup {
    /// The loop nest run before the kernel, sharing its arrays by name.
    pub kernel: Kernel,
    /// What reports call it (the C function or the kernel-language file).
    pub name: String,
}

/// The caches a command simulates or models, and where the arrays are.
#[derive(Clone, Debug)]
pub struct Caches {
    /// L1 first.
    pub levels: Vec<CacheConfig>,
    /// How the levels below L1 relate to the ones above (one level: unused).
    pub inclusion: Inclusion,
    /// Where the arrays start in memory.
    pub layout: LayoutSpec,
    /// Simulate one access at a time ([`Program::every_access`]; for benchmarks).
    pub every_access: bool,
}

/// One reference's counts in a simulation report.
#[derive(Clone, Debug, Serialize)]
pub struct SimRow {
    /// The reference's number as `--ref` takes it (`P2`).
    pub reference: String,
    /// Label of the statement it is in (`S3`).
    pub statement: String,
    /// `left` (the write) or `right` (a read).
    pub side: String,
    /// Its position on that side, as in `S3:right:1`.
    pub position: usize,
    /// The reference as the source writes it (`A[k]`).
    pub text: String,
    /// Accesses it made (at a lower level: that reached the level).
    pub accesses: u64,
    /// Accesses whose line was in the cache.
    pub hits: u64,
    /// Misses on the first touch of the line by any reference.
    pub compulsory: u64,
    /// Misses on a line evicted since it was last in the cache (conflict and capacity).
    pub other: u64,
}

/// `kansoku cache simulate`'s answer (its JSON schema).
#[derive(Clone, Debug, Serialize)]
pub struct SimReport {
    /// The kernel file as named.
    pub kernel: String,
    /// The first level (L1) simulated.
    pub cache: CacheConfig,
    /// Where the arrays are.
    pub layout: String,
    /// The cache's state at the kernel's start (`"cold"`, or `{"warm": "init_array"}`).
    pub start: Start,
    /// The parameter values simulated.
    pub params: ParamValues,
    /// Each array's start address, element size and count, in declaration order.
    pub data: Vec<DataInfo>,
    /// The first level's counts, one row per reference in reference-number order.
    pub refs: Vec<SimRow>,
    /// Accesses of all references at the first level.
    pub total_accesses: u64,
    /// Misses (compulsory and other) of all references at the first level.
    pub total_misses: u64,
    /// Wall-clock seconds the simulation took (every level at once).
    pub seconds: f64,
    /// `total_accesses / seconds`: the simulator's measured speed on this run.
    pub accesses_per_second: f64,
    /// The inclusive levels below `cache` (`--l2`), each seeing the level above's misses.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub lower_levels: Vec<SimLevel>,
}

/// A level below the first in a simulation report.
#[derive(Clone, Debug, Serialize)]
pub struct SimLevel {
    /// This level's cache.
    pub cache: CacheConfig,
    /// How it relates to the levels above.
    pub inclusion: Inclusion,
    /// Its counts per reference: accesses are the ones that missed in the level above.
    pub refs: Vec<SimRow>,
    /// Accesses that reached this level, all references.
    pub total_accesses: u64,
    /// Misses at this level, all references.
    pub total_misses: u64,
}

/// The simulator's speed for estimates (measured 240–380 M accesses/s for one level, 46 M
/// for an L1+L2 hierarchy, BENCHMARKS seed 004).
pub(crate) const SIM_ACCESSES_PER_SECOND: f64 = 3e8;
/// The simulator's speed for estimates with more than one level, in accesses a second
/// (measured 46 M for L1+L2, BENCHMARKS seed 004).
pub(crate) const HIERARCHY_ACCESSES_PER_SECOND: f64 = 4.6e7;

/// Simulates `caches` on `k` at `p`, after counting the accesses: refused above
/// `max_accesses` steps, with the phase's progress on `ui`.
pub fn simulation_report(k: &Kernel, p: &ParamValues, caches: &Caches, max_accesses: u64, warm: Option<&Warmup>, ui: &dyn Ui) -> Result<SimReport> {
    let (layout, levels) = (&caches.layout, &caches.levels[..]);
    let mut prog = Program::new(k, p, layout)?;
    if caches.every_access {
        prog = prog.every_access();
    }
    if let Some(w) = warm {
        let align = match layout {
            LayoutSpec::Consecutive { align, .. } => *align,
            LayoutSpec::Bases(_) => 64,
        };
        prog = prog.warmed_by(&w.kernel, p, align).map_err(|e| e.context(format!("--warm {}", w.name)))?;
    }
    // a PolyBench program allocates its arrays before it initialises them
    let glibc = warm.is_some() && is_c(Path::new(&k.file)) && *layout == LayoutSpec::polybench();
    if glibc {
        prog = prog.allocated_by_glibc();
    }
    let what = warm.map(|w| if glibc { format!("PolyBench's allocation (glibc's posix_memalign) and {}", w.name) } else { w.name.clone() });
    let start = prog.start(what.as_deref().unwrap_or(""));
    let work = prog.work(max_accesses);
    let speed = if levels.len() == 1 { SIM_ACCESSES_PER_SECOND } else { HIERARCHY_ACCESSES_PER_SECOND };
    if !work.complete {
        return Err(CacheError::Input(format!(
            "{} at {}: the simulation would make more than {} accesses (about {} at {} M accesses/s); \
             --max-accesses N raises the limit of {}, or choose smaller sizes",
            k.file,
            fmt_params(p),
            work.steps(),
            fmt_duration(work.steps() as f64 / speed),
            speed / 1e6,
            max_accesses
        )));
    }
    ui.begin(Phase::Simulating { accesses: work.accesses, seconds: work.steps() as f64 / speed });
    let t = Instant::now();
    let progress = |n| ui.progress(n);
    let stats = if levels.len() == 1 { Ok(prog.simulate_reporting(levels, progress)) } else { prog.simulate_hierarchy_reporting(levels, caches.inclusion, progress) };
    ui.end();
    let mut stats = stats?;
    let secs = t.elapsed().as_secs_f64();
    let rows = |stats: &[RefStats]| -> Vec<SimRow> {
        k.refs
            .iter()
            .zip(stats)
            .map(|(r, s)| SimRow {
                reference: format!("P{}", r.id),
                statement: k.statements[r.stmt].label.clone(),
                side: r.side.as_str().into(),
                position: r.position,
                text: k.ref_text(r),
                accesses: s.accesses,
                hits: s.hits,
                compulsory: s.compulsory,
                other: s.other,
            })
            .collect()
    };
    let lower_levels = stats
        .drain(1..)
        .zip(&levels[1..])
        .map(|(st, c)| SimLevel { cache: *c, inclusion: caches.inclusion, refs: rows(&st), total_accesses: st.iter().map(|s| s.accesses).sum(), total_misses: st.iter().map(|s| s.misses()).sum() })
        .collect();
    let stats = &stats[0];
    let total: u64 = stats.iter().map(|s| s.accesses).sum();
    Ok(SimReport {
        kernel: k.file.clone(),
        cache: levels[0],
        layout: layout.describe(),
        start,
        params: p.clone(),
        data: prog.data.clone(),
        refs: rows(stats),
        total_accesses: total,
        total_misses: stats.iter().map(|s| s.misses()).sum(),
        seconds: secs,
        accesses_per_second: total as f64 / secs.max(1e-9),
        lower_levels,
    })
}

/// How `cache model` derives its formulas.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Method {
    /// The set method; where it cannot, interpolation, or one simulation at concrete sizes.
    Auto,
    /// The seed's set-based method.
    Sets,
    /// Exact interpolation of quasi-polynomials in one size variable from simulations.
    Interpolate,
}

/// `--budget`'s default.
pub const BUDGET: f64 = 120.0;

/// `--budget`'s default for `auto` at concrete sizes: the set method there gives one
/// number, which one simulation gives in well under a second (mvt MEDIUM on a 32 KiB
/// 8-way L1: 0.01 s), so `auto` should not wait minutes for it (with 120 s, 240 s
/// before it simulated). Ten of the eleven kernels the set method builds at MEDIUM
/// take under 10 s (docs/BENCHMARKS.md, seed 004, a realistic L1).
pub(crate) const BUDGET_AUTO_AT_A_POINT: f64 = 10.0;

/// The lexmin-chain threshold raced against the default construction (the
/// value measured on the 2-D stencils and mvt 8-way, docs/BENCHMARKS.md, seed 004).
pub(crate) const CHAIN_RACE_CHARS: usize = 4000;

/// Everything `cache model` is asked (see the CLI's options for each).
#[derive(Clone, Debug)]
pub struct ModelRequest {
    /// The kernel file and its C options.
    pub source: Source,
    /// The cache levels and the arrays' layout.
    pub caches: Caches,
    /// How to derive the formulas.
    pub method: Method,
    /// Set method: values of the parameters in array extents (`N=64`), loop bounds staying symbolic.
    pub extent: Option<String>,
    /// Seconds to give up after; `None`: [`BUDGET`], or [`BUDGET_AUTO_AT_A_POINT`] for `auto` at concrete sizes.
    pub budget: Option<f64>,
    /// Set method: build each distinct-line set as a lexmin chain once the previous one's isl
    /// text exceeds this many characters; `None`: off (and raced at [`CHAIN_RACE_CHARS`]).
    pub lexmin_chain: Option<usize>,
    /// Set method: give each distinct-line set but the last explicit divisions as it is built
    /// (true), rather than all at once when counting.
    pub stepwise_divisions: bool,
    /// Set method: build with the construction the options name only, racing no other.
    pub no_race: bool,
    /// Set method: the distinct-line sets in one chain over every access with a hit source,
    /// rather than apart per hit-source reference.
    pub one_chain: bool,
    /// Set method: references built at once, one a thread (0: one per core).
    pub jobs: usize,
    /// Set method: parameter points at which to compare the formulas with the simulator (0: no check).
    pub check: usize,
    /// Most accesses (loop steps included) a simulation may make before it is refused.
    pub max_accesses: u64,
    /// `--warm`: the C function or kernel-language file run first; `None`: a cold cache.
    pub warm: Option<String>,
    /// One reference (`S3:right:1` or `P2`); `None`: all.
    pub reference: Option<String>,
    /// Interpolation: parameters following the size variable n, each `PARAM` or `PARAM=a*n+b`.
    pub vary: Vec<String>,
    /// Interpolation: parameters held fixed while deriving (`T=2`).
    pub fix: Option<String>,
    /// Interpolation: the smallest size n the formulas are derived for.
    pub from: i64,
    /// Values to evaluate the formulas at (`X=10,Y=10`); for C input, default the sizes given.
    pub param: Option<String>,
    /// Also derive and show hit sources, conflict-miss factors and how each formula was derived.
    pub explain: bool,
}

impl ModelRequest {
    /// Seconds per construction: `budget`, else by what is asked (`at_a_point`: the
    /// formulas are for the given sizes only).
    fn budget(&self, at_a_point: bool) -> f64 {
        self.budget.unwrap_or(if at_a_point && self.method == Method::Auto { BUDGET_AUTO_AT_A_POINT } else { BUDGET })
    }
}

/// `cache model`'s answer.
pub enum ModelAnswer {
    /// Concrete sizes answered by the simulator (a warm start, an inclusive hierarchy, or
    /// the set method did not get there).
    Simulated(SimReport),
    /// The set method's formulas, and every level's counts at `--param` (the first first).
    Sets {
        /// The formulas, for every reference asked.
        formulas: SetFormulas,
        /// Counts at `--param`, one list per level, L1 first; `None` without values to evaluate at.
        evaluations: Option<Vec<Vec<RefSetEvaluation>>>,
        /// The parameter values evaluated at, as text for the report.
        at: String,
        /// Whether the report shows how each count was derived.
        explain: bool,
    },
    /// Interpolation's formulas in one size variable, and their value at `--param`.
    Interpolated {
        /// The formulas in the size variable n.
        formulas: KernelFormulas,
        /// Their value at `--param`; `None` without values to evaluate at.
        evaluation: Option<Evaluation>,
        /// Whether the report shows how each formula was derived.
        explain: bool,
    },
}

impl ModelAnswer {
    /// The formulas as `cache model -o FILE` writes them (for `cache eval`); none for a simulation.
    pub fn formulas_json(&self) -> Option<serde_json::Result<Vec<u8>>> {
        match self {
            ModelAnswer::Simulated(_) => None,
            ModelAnswer::Sets { formulas, .. } => Some(serde_json::to_vec(formulas)),
            ModelAnswer::Interpolated { formulas, .. } => Some(serde_json::to_vec(formulas)),
        }
    }
}

impl Serialize for ModelAnswer {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        #[derive(Serialize)]
        struct SetsOut<'a> {
            formulas: &'a SetFormulas,
            /// The formulas' own level (the last of a hierarchy).
            evaluation: Option<&'a Vec<RefSetEvaluation>>,
            /// Every level, the first first, for a hierarchy.
            #[serde(skip_serializing_if = "Option::is_none")]
            levels: Option<&'a Vec<Vec<RefSetEvaluation>>>,
        }
        #[derive(Serialize)]
        struct InterpolatedOut<'a> {
            formulas: &'a KernelFormulas,
            evaluation: &'a Option<Evaluation>,
        }
        match self {
            ModelAnswer::Simulated(r) => r.serialize(s),
            ModelAnswer::Sets { formulas, evaluations, .. } => {
                let levels = evaluations.as_ref().filter(|e| e.len() > 1);
                SetsOut { formulas, evaluation: evaluations.as_ref().and_then(|e| e.last()), levels }.serialize(s)
            }
            ModelAnswer::Interpolated { formulas, evaluation, .. } => InterpolatedOut { formulas, evaluation }.serialize(s),
        }
    }
}

/// `cache model`: the method asked for, and `auto`'s fallbacks. A C file's sizes (-D,
/// --size) are where the formulas are evaluated, unless `param` says otherwise; its arrays
/// are as large as those sizes, unless `extent` says otherwise. With neither, the question
/// is the misses at those sizes: the set method then works at that one point, much faster
/// than in all sizes.
pub fn answer_model(mut a: ModelRequest, ui: &Arc<dyn Ui>) -> Result<ModelAnswer> {
    let mut concrete = None;
    let mut at = None;
    if a.param.is_none() {
        let (_, sizes) = a.source.load()?;
        if !sizes.is_empty() {
            a.param = Some(fmt_params(&sizes));
            if a.extent.is_none() {
                a.extent = Some(fmt_params(&sizes));
                at = Some(sizes.clone());
            }
            concrete = Some(sizes);
        }
    }
    let simulate_within = |a: &ModelRequest, sizes: &ParamValues, warm: Option<&Warmup>, limit: u64| -> Result<ModelAnswer> {
        let (k, _) = a.source.load()?;
        Ok(ModelAnswer::Simulated(simulation_report(&k, sizes, &a.caches, limit, warm, ui.as_ref())?))
    };
    let simulate_at = |a: &ModelRequest, sizes: &ParamValues, warm: Option<&Warmup>| simulate_within(a, sizes, warm, a.max_accesses);
    let hierarchy = a.caches.levels.len() > 1;
    if a.warm.is_some() {
        // The formulas (both methods) count from an empty cache: a warm start is never
        // answered by them, and never answered cold without a word.
        let Some(sizes) = concrete else {
            return Err(CacheError::Input("--warm: the formulas count from a cold (empty) cache and cannot start warm; give concrete sizes (-D/--size) to simulate the warm start, or leave --warm out for cold formulas".into()));
        };
        ui.note(&format!("note: --warm: the formulas count from a cold cache; the warm start is answered by the simulator at {}", fmt_params(&sizes)));
        let warm = a.source.warmup(a.warm.as_deref())?;
        return simulate_at(&a, &sizes, warm.as_ref());
    }
    if hierarchy && !(a.caches.inclusion == Inclusion::NonInclusive && a.method != Method::Interpolate) {
        // LRU state of an inclusive L2 depends on what L1 filters out, and L1's on L2's
        // evictions, so a level's formulas alone do not give it (docs/rooms/seed004-cache.md,
        // "Two levels"); a non-inclusive L2 is modelled by the set method.
        let Some(sizes) = concrete else {
            return Err(CacheError::Input("--l2: the formulas of an inclusive hierarchy are not derived; give concrete sizes (-D/--size) to simulate it, or --non-inclusive for the lower levels' formulas by the set method".into()));
        };
        ui.note(&format!("note: --l2: the inclusive hierarchy is answered by the simulator at {}", fmt_params(&sizes)));
        return simulate_at(&a, &sizes, None);
    }
    let interpolation_args = !a.vary.is_empty() || a.fix.is_some() || a.from != 1;
    // Interpolation models one level: never a silent answer for L1 alone to an --l2 question.
    let one_level_only = |why: &str| CacheError::Input(format!("--l2 --non-inclusive: {why}; interpolation models one level (the set method models the hierarchy; concrete sizes, -D/--size, are simulated)"));
    if hierarchy && interpolation_args {
        return Err(one_level_only("--vary, --fix and --from are interpolation's"));
    }
    if let (Method::Auto, Some(sizes), false) = (a.method, &at, interpolation_args) {
        // The misses at concrete sizes: the method is chosen by what it costs, counted
        // before anything runs, never by the clock, so the same command takes the same
        // method on any machine. One simulation is never slower than the formulas'
        // construction and evaluation at one point, so it answers whenever --max-accesses
        // allows; the set method only beyond.
        let (k, _) = a.source.load()?;
        // One cache: what its simulator pays (an innermost loop's iterations between line
        // changes are counted, not made), so a kernel that walks rows (floyd-warshall at
        // LARGE) is simulated by count, not given to the set method's wall-clock budget.
        let prog = Program::new(&k, sizes, &a.caches.layout)?;
        let work = if hierarchy { prog.work(a.max_accesses) } else { prog.simulated_work(a.max_accesses, &a.caches.levels[0]) };
        if work.complete {
            ui.note(&format!(
                "note: method: one simulation ({} accesses it makes one at a time and loop iterations, counted; the set method is tried first only above --max-accesses {}); simulating at {} instead of building formulas (--method sets to build them)",
                work.steps(),
                a.max_accesses,
                fmt_params(sizes)
            ));
            // chosen by what the simulator pays, within --max-accesses: not refused for
            // every access it counts in runs
            return simulate_within(&a, sizes, None, u64::MAX);
        }
        ui.note(&format!("note: method: the set method, for {}: one simulation would make more than --max-accesses {} accesses (counted)", fmt_params(sizes), a.max_accesses));
        return sets_model(&a, Some(sizes), ui.as_ref()).map_err(|e| with_budget_hint(e, hierarchy));
    }
    let started = Instant::now();
    match a.method {
        Method::Interpolate => interpolate_model(&a, ui, 0.0),
        Method::Sets => sets_model(&a, at.as_ref(), ui.as_ref()).map_err(|e| with_budget_hint(e, hierarchy)),
        Method::Auto if interpolation_args => interpolate_model(&a, ui, 0.0),
        Method::Auto => match sets_model(&a, at.as_ref(), ui.as_ref()) {
            Ok(answer) => Ok(answer),
            // Concrete sizes: one simulation answers at once, where interpolation would
            // simulate many sizes and the set method has already run out of time.
            Err(e @ CacheError::SetsUnavailable { .. }) if concrete.is_some() => {
                let sizes = concrete.expect("checked");
                ui.note(&format!(
                    "note: the set method did not get there ({e}; {:.1} s); simulating at {} instead (--method sets --budget S to insist)",
                    started.elapsed().as_secs_f64(),
                    fmt_params(&sizes)
                ));
                simulate_at(&a, &sizes, None)
            }
            Err(e @ CacheError::SetsUnavailable { .. }) if hierarchy => Err(one_level_only(&format!("the set method did not get there ({})", with_budget_hint(e, true)))),
            Err(e @ CacheError::SetsUnavailable { .. }) => {
                // One --budget for the whole command: interpolation gets what the set
                // method left of it, not a budget of its own.
                let spent = started.elapsed().as_secs_f64();
                ui.note(&format!(
                    "note: the set method cannot be used here ({e}); using interpolation in one size variable (--method interpolate) with the {:.1} s left of --budget {}",
                    (a.budget(false) - spent).max(0.0),
                    a.budget(false)
                ));
                interpolate_model(&a, ui, spent)
            }
            Err(e) => Err(e),
        },
    }
}

/// Where the set method ran out of time and nothing fell back, what else there is: a
/// larger budget, and for one level interpolation (which models no hierarchy).
fn with_budget_hint(e: CacheError, hierarchy: bool) -> CacheError {
    let CacheError::SetsUnavailable { msg, budget: true } = &e else { return e };
    let other = if hierarchy { "" } else { ", or --method interpolate for formulas in one size variable" };
    CacheError::SetsUnavailable { msg: format!("{msg} (a larger --budget may get there{other})"), budget: true }
}

fn unavailable(msg: String) -> CacheError {
    CacheError::SetsUnavailable { msg, budget: false }
}

/// The set method. `at`: derive the formulas for these sizes only (see `SetModelOptions::at`).
fn sets_model(a: &ModelRequest, at: Option<&ParamValues>, ui: &dyn Ui) -> Result<ModelAnswer> {
    let (k, _) = a.source.load()?;
    let extents = a.extent.as_deref().map(params).transpose()?.unwrap_or_default();
    let k = k.with_fixed_extents(&extents).map_err(|e| unavailable(format!("{e} (--extent)")))?;
    let mut opts = SetModelOptions::new(a.caches.layout.clone(), a.caches.levels[0]);
    opts.extents = extents;
    opts.explain = a.explain;
    if let Some(at) = at {
        opts.at = at.clone();
        ui.note(&format!("note: formulas for {} only (give --extent to derive them in every size up to the extents)", fmt_params(at)));
    }
    opts.time_budget = Some(std::time::Duration::from_secs_f64(a.budget(at.is_some()).max(0.0)));
    opts.lexmin_chain_above = a.lexmin_chain;
    opts.sure_misses_first = a.lexmin_chain.is_some();
    opts.stepwise_divisions = a.stepwise_divisions;
    opts.split_by_source = !a.one_chain;
    // No construction is faster everywhere (docs/rooms/seed004-cache.md): stepwise
    // divisions win on 2mm, syr2k and symm 8-way, divisions at the count on gemm 4-way,
    // the lexmin chain on the 2-D stencils, nussinov and ludcmp; idle threads race the
    // others beside the first.
    if !a.no_race {
        opts.race = vec![Alternative::LexminChain(CHAIN_RACE_CHARS), Alternative::StepwiseDivisions, Alternative::DivisionsAtCount];
    }
    opts.jobs = a.jobs;
    let lower = a.caches.levels[1..].to_vec();
    if let Some(sel) = &a.reference {
        if !lower.is_empty() {
            return Err(CacheError::Input("--ref: a lower level sees the misses of every reference of the level above; model the hierarchy without --ref".into()));
        }
        opts.refs = vec![find_ref(&k, sel)?];
    }
    ui.begin(Phase::BuildingSets);
    let built = if lower.is_empty() { build_set_model(&k, &opts) } else { build_hierarchy_model(&k, &opts, &lower) };
    ui.end();
    if let Ok(f) = &built {
        let built_by = |pick: fn(&RefSetFormulas) -> bool| f.levels().iter().flat_map(|l| &l.refs).filter(|r| pick(r)).map(|r| r.reference.as_str()).collect::<std::collections::BTreeSet<_>>().into_iter().collect::<Vec<_>>();
        let other_divisions = format!("--divisions {}", if opts.stepwise_divisions { "at-count" } else { "stepwise" });
        for (construction, refs) in [(format!("the lexmin chain (--lexmin-chain {CHAIN_RACE_CHARS})"), built_by(|r| r.lexmin_chain)), (other_divisions, built_by(|r| r.other_divisions))] {
            if !refs.is_empty() {
                ui.note(&format!("note: {}: built with {construction}, which finished before the first construction or after it ran out of --budget", refs.join(", ")));
            }
        }
    }
    let mut f = match built {
        Ok(f) => f,
        Err(e) => match e.model_message() {
            Some(msg) => return Err(CacheError::SetsUnavailable { msg: msg.to_string(), budget: e.is_budget() }),
            None => return Err(e),
        },
    };
    check_against_simulation(&k, &mut f, a.check, &opts, ui)?;
    note_tables(&f, ui);
    // Every level's counts, the first level first.
    let evaluations = a.param.as_deref().map(|s| -> Result<_> { f.eval_levels(&params(s)?) }).transpose()?;
    Ok(ModelAnswer::Sets { formulas: f, evaluations, at: a.param.clone().unwrap_or_default(), explain: a.explain })
}

/// Compares `f` with the simulator at up to `n` of its parameter points, a reference
/// that differs built again with another construction ([`crate::check`]); when one
/// agrees with no construction, an error (nothing is written, `auto` falls back).
fn check_against_simulation(k: &Kernel, f: &mut SetFormulas, n: usize, opts: &SetModelOptions, ui: &dyn Ui) -> Result<()> {
    let t = Instant::now();
    let points = check_points(f, n);
    let checked_nothing = points.is_empty();
    let checked = check_and_rebuild(k, f, points, opts)?;
    for (d, alternative) in &checked.rebuilt {
        ui.note(&format!("note: {d}; building {} again with another construction", d.reference));
        ui.note(&format!("note: {}: built again with {alternative:?}, equal to the simulator at every point", d.reference));
    }
    if let Some(first) = checked.unmended.first() {
        ui.note(&format!("note: {first}; building {} again with another construction", first.reference));
        let more = if checked.unmended.len() > 1 { format!(" (and {} more)", checked.unmended.len() - 1) } else { String::new() };
        return Err(unavailable(format!("the formulas disagree with the simulator: {first}{more}, whichever construction builds them; isl's sets were not exact here, nothing written")));
    }
    if n > 0 && checked_nothing {
        ui.note(&format!("note: not checked against the simulator: no parameter point to check (a size without a bound — give --extent —, or over {MAX_CHECK_ACCESSES} accesses)"));
    } else if n > 0 {
        ui.note(&format!("note: checked against the simulator at {} parameter point{} ({:.2} s): every reference equal", f.checked_at.len(), if f.checked_at.len() == 1 { "" } else { "s" }, t.elapsed().as_secs_f64()));
    }
    Ok(())
}

/// Says which references have pieces that are tables rather than formulas.
fn note_tables(f: &SetFormulas, ui: &dyn Ui) {
    let levels = f.levels();
    let level = |i: usize| if levels.len() > 1 { format!("L{} ", i + 1) } else { String::new() };
    let tables: Vec<String> = levels.iter().enumerate().flat_map(|(i, l)| l.refs.iter().filter(|r| r.tabulated_pieces > 0).map(move |r| (i, r))).map(|(i, r)| format!("{}{} ({} piece{})", level(i), r.reference, r.tabulated_pieces, if r.tabulated_pieces == 1 { "" } else { "s" })).collect();
    if !tables.is_empty() {
        ui.note(&format!("note: {}: counted point by point over the sizes' box where the summation did not finish: a table of those points, exact there, not a formula", tables.join(", ")));
    }
}

/// Interpolation in one size variable `n` (`vary`, `fix`, `from`), within what is left of
/// the budget after `spent` seconds.
fn interpolate_model(a: &ModelRequest, ui: &Arc<dyn Ui>, spent: f64) -> Result<ModelAnswer> {
    let (k, _) = a.source.load()?;
    let fixed = a.fix.as_deref().map(params).transpose()?.unwrap_or_default();
    let mut varying = Vec::new();
    let mut ties = std::collections::BTreeMap::new();
    if a.vary.is_empty() {
        varying = k.params.iter().filter(|p| !fixed.contains_key(*p)).cloned().collect();
    } else {
        for item in &a.vary {
            let (name, tie) = Family::parse_vary_item(item)?;
            if tie != (1, 0) {
                ties.insert(name.clone(), tie);
            }
            varying.push(name);
        }
    }
    let family = Family { varying, fixed, ties };
    family.check(&k).map_err(|e| e.context(format!("choosing the size variable for {}", k.file)))?;
    let mut opts = ModelOptions::new(family, a.caches.layout.clone(), vec![a.caches.levels[0]]);
    opts.breakdown = a.explain;
    if a.from < 0 {
        return Err(CacheError::Input(format!("--from {} is negative; sizes start at 0 or 1", a.from)));
    }
    opts.n_min = a.from;
    opts.time_budget = Some(std::time::Duration::from_secs_f64((a.budget(false) - spent).max(0.0)));
    ui.begin(Phase::Interpolating);
    let shown = Arc::clone(ui);
    opts.progress = Some(crate::model::Progress(Arc::new(move |n| shown.progress(n as u64))));
    let built = build_model(&k, &opts);
    ui.end();
    let mut f = built.map_err(|e| e.context(format!("deriving formulas for {}", k.file)))?.pop().expect("one cache, one set of formulas");
    if let Some(sel) = &a.reference {
        let r = find_ref(&k, sel)?;
        f.refs.retain(|x| x.reference == format!("P{r}"));
    }
    let evaluation = a.param.as_deref().map(|s| f.eval(&params(s)?)).transpose()?;
    Ok(ModelAnswer::Interpolated { formulas: f, evaluation, explain: a.explain })
}

/// `cache eval`'s answer: the formulas' counts at `param`, how long evaluating took, and
/// with `--verify` the references where one simulation counts otherwise.
#[derive(Serialize)]
#[serde(untagged)]
pub enum EvalAnswer {
    /// A file of interpolated formulas.
    Interpolated {
        /// The parameter values evaluated at, as given.
        #[serde(skip)]
        param: String,
        /// The formulas read from the file.
        #[serde(skip)]
        formulas: Box<KernelFormulas>,
        /// Their counts at `param`.
        evaluation: Evaluation,
        /// Wall-clock time evaluating took, in microseconds.
        microseconds: f64,
        /// With `--verify`: one line per disagreement with the simulator (reference, level, counts); `None` without.
        #[serde(skip_serializing_if = "Option::is_none")]
        verify_mismatches: Option<Vec<String>>,
    },
    /// A file of set-method formulas.
    Sets {
        /// The parameter values evaluated at, as given.
        #[serde(skip)]
        param: String,
        /// The formulas' own level (the last of a hierarchy).
        evaluation: Vec<RefSetEvaluation>,
        /// Every level, the first first, for a hierarchy's formulas.
        #[serde(skip_serializing_if = "Vec::is_empty")]
        levels: Vec<EvalLevel>,
        /// Wall-clock time evaluating took, in microseconds.
        microseconds: f64,
        /// With `--verify`: one line per disagreement with the simulator (reference, level, counts); `None` without.
        #[serde(skip_serializing_if = "Option::is_none")]
        verify_mismatches: Option<Vec<String>>,
    },
}

/// One level's counts in a hierarchy's evaluation.
#[derive(Serialize)]
pub struct EvalLevel {
    /// That level's cache.
    pub cache: CacheConfig,
    /// Its counts per reference.
    pub evaluation: Vec<RefSetEvaluation>,
}

impl EvalAnswer {
    /// With `--verify`, the error to exit with when the simulator disagrees.
    pub fn disagreement(&self) -> Option<String> {
        let (m, at) = match self {
            EvalAnswer::Interpolated { verify_mismatches, param, .. } | EvalAnswer::Sets { verify_mismatches, param, .. } => (verify_mismatches, param),
        };
        m.as_ref().filter(|m| !m.is_empty()).map(|m| format!("the formulas disagree with the simulator at {at}:\n  {}", m.join("\n  ")))
    }
}

/// Evaluates a formulas file (`text`, read from `path`) at `param`; `verify`: simulate the
/// kernel (the one the formulas name when empty) and compare every count.
pub fn evaluate_file(path: &Path, text: &str, param: &str, verify: Option<&str>) -> Result<EvalAnswer> {
    let format = serde_json::from_str::<serde_json::Value>(text).ok().and_then(|v| v.get("format").and_then(|f| f.as_str()).map(String::from));
    let p = params(param)?;
    if format.as_deref() == Some(crate::sets::FORMAT) {
        let f: SetFormulas = serde_json::from_str(text).map_err(|e| CacheError::from(e).context(format!("{} is not a set-method formulas file", path.display())))?;
        let t = Instant::now();
        // A hierarchy's file holds every level (the first in `above`).
        let levels = f.levels();
        let evaluations = f.eval_levels(&p).map_err(|e| e.context(format!("evaluating {}", path.display())))?;
        let microseconds = t.elapsed().as_secs_f64() * 1e6;
        let verify_mismatches = match verify {
            None => None,
            Some(v) => {
                let k = verify_kernel(v, &f.kernel)?.with_fixed_extents(&f.extents).map_err(|e| CacheError::Input(e.to_string()))?;
                Some(crate::check::disagreements(&k, &f, std::slice::from_ref(&p))?.iter().map(|d| d.to_string()).collect())
            }
        };
        let all = if levels.len() > 1 { levels.iter().zip(&evaluations).map(|(l, e)| EvalLevel { cache: l.cache, evaluation: e.clone() }).collect() } else { Vec::new() };
        let own = evaluations.last().expect("at least one level").clone();
        return Ok(EvalAnswer::Sets { param: param.to_string(), evaluation: own, levels: all, microseconds, verify_mismatches });
    }
    let f: KernelFormulas = serde_json::from_str(text).map_err(|e| CacheError::from(e).context(format!("{} is not a formulas file written by `kansoku cache model -o`", path.display())))?;
    if f.format != "kansoku-cache-formulas/1" {
        return Err(CacheError::Input(format!("{}: unknown formulas format '{}'", path.display(), f.format)));
    }
    let t = Instant::now();
    let ev = f.eval(&p).map_err(|e| e.context(format!("evaluating {}", path.display())))?;
    let microseconds = t.elapsed().as_secs_f64() * 1e6;
    let verify_mismatches = match verify {
        None => None,
        Some(v) => {
            let k = verify_kernel(v, &f.kernel)?;
            let counts = ev.refs.iter().map(|e| (e.reference.as_str(), [e.accesses, e.compulsory, e.conflict]));
            let found = crate::check::compare_with_simulation(&k, &p, &f.layout, f.cache, counts)?;
            Some(
                found
                    .iter()
                    .map(|d| {
                        let ([a, c, x], [sa, sc, sx]) = (d.formulas, d.simulator);
                        format!("{}: formulas {a}/{c}/{x} simulator {sa}/{sc}/{sx} (accesses/compulsory/conflict)", d.reference)
                    })
                    .collect(),
            )
        }
    };
    Ok(EvalAnswer::Interpolated { param: param.to_string(), formulas: Box::new(f), evaluation: ev, microseconds, verify_mismatches })
}

/// The kernel `eval --verify` re-simulates: the one named, or the one the formulas name.
fn verify_kernel(path: &str, derived_from: &str) -> Result<Kernel> {
    let kpath = if path.is_empty() { PathBuf::from(derived_from) } else { PathBuf::from(path) };
    Ok(Source::new(&kpath).load().map_err(|e| e.context(format!("--verify needs the kernel the formulas were derived from ({derived_from})")))?.0)
}
