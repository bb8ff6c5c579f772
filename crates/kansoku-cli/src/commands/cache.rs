//! `kansoku cache`: seed 004 — kernel tables, exact LRU simulation, miss formulas. The
//! options are parsed here; what they ask is answered by `kansoku_cache::answer` and
//! printed as `kansoku_cache::report` writes it.

use anyhow::{Context, Result};
use kansoku_cache::answer::{self, Caches, ModelRequest, Phase, Source, Ui};
use kansoku_cache::{kernel_info, CacheConfig, Inclusion};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

const DEFAULT_CACHE: &str = "assoc=2,line=32,sets=4";

#[derive(clap::Subcommand)]
pub enum CacheCommand {
    /// Print the seed's tables for a kernel: program, data, position, cache, loop and array information.
    Info(InfoArgs),
    /// Simulate an A-way set-associative LRU cache exactly; per reference accesses, hits, compulsory and other misses.
    Simulate(SimulateArgs),
    /// Derive per-reference compulsory- and conflict-miss formulas: the seed's set-based method (piecewise
    /// quasi-polynomials in all parameters) or interpolation in one size variable.
    Model(ModelArgs),
    /// Evaluate formulas (from `cache model -o FILE`) at parameter values.
    Eval(EvalArgs),
}

#[derive(clap::Args, Clone)]
pub struct CacheArgs {
    /// Cache: `assoc=2,line=32,sets=4` or `32KiB,8-way,64B` (line size must be a power of two; ways and sets may be any positive number).
    #[arg(long, default_value = DEFAULT_CACHE)]
    pub cache: String,
    /// A second level below `--cache` (same line size), e.g. `256KiB,4-way,64B`: L1's misses
    /// go to L2. Inclusive by default (a line L2 evicts is removed from L1 too: simulated, and
    /// `cache model` answers from the simulator at concrete sizes); see `--non-inclusive`.
    #[arg(long)]
    pub l2: Option<String>,
    /// A third level below `--l2` (same line size), e.g. `8MiB,16-way,64B`: L2's misses go to it.
    #[arg(long, requires = "l2")]
    pub l3: Option<String>,
    /// The levels below L1 are non-inclusive (NINE): their evictions leave the levels above
    /// alone, so each sees exactly the misses of the one above, and `cache model` derives
    /// their formulas by the set method too (L1's first, then L2's from L1's miss sets, and
    /// so on, each level with its own --budget).
    #[arg(long, requires = "l2")]
    pub non_inclusive: bool,
    /// Base addresses of every array, e.g. `A=0,B=800,C=1600` (otherwise arrays are placed one after the other).
    #[arg(long)]
    pub base: Option<String>,
    /// Alignment in bytes of each array when placed one after the other (default: 4096 for
    /// PolyBench-style C, as PolyBench's posix_memalign(…, 4096) places them; 64 otherwise).
    #[arg(long)]
    pub align: Option<u64>,
    /// Address of the first array when placed one after the other.
    #[arg(long, default_value_t = 0)]
    pub start: u64,
    /// Simulate one access at a time, also where an innermost loop's iterations only hit
    /// (the same counts, slower; to measure what counting those runs saves).
    #[arg(long, hide = true)]
    pub every_access: bool,
}

impl CacheArgs {
    /// The levels (`--cache`, then `--l2` and `--l3`), their inclusion, and the layout:
    /// `--base`, else the arrays one after the other as `source`'s program places them.
    fn caches(&self, source: &Source) -> Result<Caches> {
        let levels = [Some(&self.cache), self.l2.as_ref(), self.l3.as_ref()].into_iter().flatten().map(|c| CacheConfig::parse(c)).collect::<Result<Vec<_>, _>>()?;
        let inclusion = if self.non_inclusive { Inclusion::NonInclusive } else { Inclusion::Inclusive };
        Ok(Caches { levels, inclusion, layout: source.layout(self.base.as_deref(), self.start, self.align)?, every_access: self.every_access })
    }
}

/// How long a simulation may be, counted before it starts.
#[derive(clap::Args, Clone, Copy)]
pub struct SimLimit {
    /// Refuse to simulate more than this many accesses (loop iterations without accesses
    /// count as accesses); the simulator runs 240–380 M accesses/s, so the default of 10^11
    /// is about five minutes. Counted in closed form before simulating: a kernel of days
    /// is refused at once.
    #[arg(long, default_value_t = 100_000_000_000)]
    pub max_accesses: u64,
}

#[derive(clap::Args)]
pub struct InfoArgs {
    /// Kernel file (C subset: `param`, array declarations, affine `for` loops, assignments),
    /// or PolyBench-style C (FILE.c).
    pub kernel: PathBuf,
    #[command(flatten)]
    pub cache: CacheArgs,
    #[command(flatten)]
    pub c: CArgs,
    /// Parameter values for the data table, e.g. `X=10,Y=10,Z=10`.
    #[arg(long)]
    pub param: Option<String>,
    /// The position studied: `S3:right:1` or `P2`.
    #[arg(long = "ref")]
    pub reference: Option<String>,
    /// Print JSON instead of tables.
    #[arg(long)]
    pub json: bool,
}

#[derive(clap::Args)]
pub struct SimulateArgs {
    /// Kernel file: the kernel language, or PolyBench-style C (FILE.c).
    pub kernel: PathBuf,
    #[command(flatten)]
    pub cache: CacheArgs,
    #[command(flatten)]
    pub c: CArgs,
    /// Parameter values, e.g. `X=10,Y=10,Z=10` (a C file's -D/--size give defaults).
    #[arg(long)]
    pub param: Option<String>,
    #[command(flatten)]
    pub limit: SimLimit,
    #[command(flatten)]
    pub start: StartArgs,
    #[arg(long)]
    pub json: bool,
}

/// When the set method's existentials get explicit divisions (`--divisions`).
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Divisions {
    Stepwise,
    AtCount,
}

/// How `cache model` derives its formulas.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Method {
    /// At concrete sizes (a C file's -D/--size, no --param or --extent): one simulation
    /// whenever --max-accesses allows it (counted before it runs, so the same command takes
    /// the same method on any machine), the set method only beyond. Otherwise the set
    /// method; when it cannot (extents depending on parameters without --extent, or over
    /// its --budget), interpolation, with a note saying why.
    Auto,
    /// The seed's set-based method: isl sets and parametric counting, formulas in all parameters.
    Sets,
    /// Exact interpolation of quasi-polynomials in one size variable from simulations.
    Interpolate,
}

#[derive(clap::Args)]
pub struct ModelArgs {
    /// Kernel file: the kernel language, or PolyBench-style C (FILE.c).
    pub kernel: PathBuf,
    #[command(flatten)]
    pub c: CArgs,
    /// Method (default: the set method, interpolation where it cannot be used).
    #[arg(long, value_enum, default_value = "auto")]
    pub method: Method,
    /// Set method: values of parameters in array extents (the arrays' declared capacity), e.g. `N=64`; loop
    /// bounds stay symbolic. Needed when extents depend on parameters (addresses must be affine).
    #[arg(long)]
    pub extent: Option<String>,
    /// Give up after this many seconds (set method: the whole build, every construction
    /// tried within it; a thread with no reference left to start builds the slowest one
    /// with the next other construction beside the first, the lexmin chain then the other
    /// --divisions, and references not built within the budget get them next while time
    /// is left; a construction that won such a race goes first for the references after;
    /// then `auto` falls back to interpolation, which gets the budget again). Default 120;
    /// 10 for `auto` at concrete sizes beyond --max-accesses.
    #[arg(long)]
    pub budget: Option<f64>,
    /// Set method: build each distinct-line set E_k as a lexmin chain once E_{k-1}'s isl text
    /// exceeds this many characters (same sets; measured much faster for the 2-D stencils with
    /// 4 and 8 ways and mvt 8-way, slower for gemm). With it, the accesses one reference's
    /// lines alone make misses are found first, reference by reference, and the chain over all
    /// lines runs on the rest (same counts; heat-3d 8-way's P0 56 → 21 s). Default: off, and
    /// raced with 4000 beside the first construction.
    #[arg(long, value_name = "CHARS")]
    pub lexmin_chain: Option<usize>,
    /// Set method: when the existentials of each distinct-line set E_k get explicit divisions.
    /// `stepwise`: each E_k but the last as it is built, so that they do not nest (much faster
    /// for many references with 4 and 8 ways); `at-count`: all at once when E_A is counted
    /// (faster for others, e.g. gemm 4-way at extents 20). The other choice is raced beside.
    #[arg(long, value_enum, default_value = "stepwise")]
    pub divisions: Divisions,
    /// Set method: build with the construction the options name only, racing no other
    /// (to time or trace one construction).
    #[arg(long)]
    pub no_race: bool,
    /// Set method: build the distinct-line sets in one chain over every access that has a
    /// hit source, instead of apart for the accesses of each hit-source reference (the
    /// default; same counts: heat-3d, correlation and fdtd-2d 4-way at extents 16 faster
    /// per source, 3mm and trmm 8-way slower; docs/BENCHMARKS.md, seed 004).
    #[arg(long, conflicts_with = "by_source")]
    pub one_chain: bool,
    /// Set method: the distinct-line sets apart per hit-source reference (the default; kept
    /// for the commands written before it was).
    #[arg(long, hide = true)]
    pub by_source: bool,
    /// Set method: references built at once, one per thread (default: one per core; one
    /// thread more races slow references with the other constructions).
    #[arg(long, short = 'j', default_value_t = 0, hide_default_value = true)]
    pub jobs: usize,
    /// Set method: compare the formulas with a fresh simulation at this many parameter
    /// points (every point when there are no more; 0: no check) before writing them; on a
    /// difference nothing is written and `auto` falls back (isl's coalescing is not always
    /// exact, docs/rooms/seed004-cache.md).
    #[arg(long, default_value_t = 16)]
    pub check: usize,
    #[command(flatten)]
    pub cache: CacheArgs,
    /// For the answers the simulator gives (`--l2`, or `auto` at concrete sizes when the set method does not get there).
    #[command(flatten)]
    pub limit: SimLimit,
    /// The formulas count from a cold cache; `--warm` is answered by the simulator at the
    /// sizes given (-D/--size), saying so.
    #[command(flatten)]
    pub start: StartArgs,
    /// One reference (`S3:right:1` or `P2`); default: all.
    #[arg(long = "ref", conflicts_with = "all")]
    pub reference: Option<String>,
    /// All references (the default).
    #[arg(long)]
    pub all: bool,
    /// Parameters that follow the size variable n (default: all not fixed, each equal to n); a parameter may be
    /// tied as `PARAM=a*n+b`, e.g. `--vary NI,NJ=2n+1`.
    #[arg(long, value_delimiter = ',')]
    pub vary: Vec<String>,
    /// Parameters held fixed while deriving, e.g. `T=2`.
    #[arg(long)]
    pub fix: Option<String>,
    /// Smallest size the formulas are derived for (default 1). With large caches the formulas need sizes past
    /// the cache capacity in elements; deriving them only from there on is much cheaper.
    #[arg(long, default_value_t = 1)]
    pub from: i64,
    /// Also evaluate the formulas at these values, e.g. `X=10,Y=10,Z=10`.
    #[arg(long)]
    pub param: Option<String>,
    /// Write the formulas as JSON to this file (for `kansoku cache eval`).
    #[arg(short, long)]
    pub output: Option<PathBuf>,
    /// Also derive and show the intermediate counts: hit sources (second count by the reference that last
    /// touched the line) and conflict-miss factors (conflict misses by the evicting reference), plus how
    /// each formula was derived (samples, horizon, periods, checks, Newton coefficients).
    #[arg(long)]
    pub explain: bool,
    #[arg(long)]
    pub json: bool,
}

#[derive(clap::Args)]
pub struct EvalArgs {
    /// Formulas written by `kansoku cache model -o FILE`.
    pub formulas: PathBuf,
    /// Parameter values, e.g. `X=10,Y=10,Z=10`.
    #[arg(long)]
    pub param: String,
    /// Also simulate the kernel at these values and compare every count (the kernel file named in the
    /// formulas, or the one given here).
    #[arg(long, num_args = 0..=1, default_missing_value = "")]
    pub verify: Option<String>,
    #[arg(long)]
    pub json: bool,
}


/// The cache's state when the kernel starts.
#[derive(clap::Args, Clone, Default)]
pub struct StartArgs {
    /// Start warm: the cache holds what the program's initialisation left in it, as in a
    /// plain PolyBench build (the kernel runs right after `init_array`). For a C file the
    /// function to run first (default `init_array`); for a kernel-language file, a
    /// kernel-language file whose nest runs first (arrays shared by name). Without it the
    /// cache is cold (empty), as in a `-DPOLYBENCH_TIME` build, which flushes it.
    #[arg(long, num_args = 0..=1, default_missing_value = "init_array", value_name = "FUNCTION|FILE")]
    pub warm: Option<String>,
}

/// How to read a C kernel file (`FILE.c`, PolyBench style).
#[derive(clap::Args, Clone, Default)]
pub struct CArgs {
    /// C input: lower this function's body instead of the `#pragma scop` region.
    #[arg(long)]
    pub function: Option<String>,
    /// C input: the value of a size, or the element type (`-D DATA_TYPE=int`: char, short,
    /// int, long, float, double; or `-D DATA_TYPE_IS_FLOAT` as PolyBench's headers read it),
    /// e.g. `-D N=400`; may be repeated.
    #[arg(short = 'D', long = "define", value_name = "NAME=VALUE")]
    pub define: Vec<String>,
    /// C input: a dataset preset (MINI, SMALL, MEDIUM, LARGE, EXTRALARGE), read from
    /// `#ifdef MEDIUM_DATASET` ... in the file or in the header it includes.
    #[arg(long)]
    pub size: Option<String>,
}

impl CArgs {
    /// The kernel file `path` as these options read it.
    fn source(&self, path: &Path) -> Source {
        Source { path: path.to_path_buf(), function: self.function.clone(), defines: self.define.clone(), size: self.size.clone() }
    }
}

impl From<Method> for answer::Method {
    fn from(m: Method) -> Self {
        match m {
            Method::Auto => answer::Method::Auto,
            Method::Sets => answer::Method::Sets,
            Method::Interpolate => answer::Method::Interpolate,
        }
    }
}

pub fn run(cmd: CacheCommand) -> Result<()> {
    match cmd {
        CacheCommand::Info(a) => info(a),
        CacheCommand::Simulate(a) => simulate(a),
        CacheCommand::Model(a) => model(a),
        CacheCommand::Eval(a) => eval(a),
    }
}

/// Notes on stderr, a phase's progress as a bar or spinner there (hidden when piped).
#[derive(Default)]
struct Terminal(Mutex<Option<indicatif::ProgressBar>>);

impl Ui for Terminal {
    fn note(&self, msg: &str) {
        eprintln!("{msg}");
    }
    fn begin(&self, phase: Phase) {
        let bar = match phase {
            // a bar only where it takes more than about a second
            Phase::Simulating { accesses, seconds } if seconds > 1.0 => crate::output::bar("simulating", accesses),
            Phase::Simulating { .. } => indicatif::ProgressBar::hidden(),
            Phase::BuildingSets => crate::output::spinner("building sets and counting", ""),
            Phase::Interpolating => crate::output::spinner("deriving formulas: simulating size", ""),
        };
        *self.0.lock().unwrap_or_else(|e| e.into_inner()) = Some(bar);
    }
    fn progress(&self, n: u64) {
        if let Some(b) = &*self.0.lock().unwrap_or_else(|e| e.into_inner()) {
            b.set_position(n);
        }
    }
    fn end(&self) {
        if let Some(b) = self.0.lock().unwrap_or_else(|e| e.into_inner()).take() {
            b.finish_and_clear();
        }
    }
}

fn info(a: InfoArgs) -> Result<()> {
    let source = a.c.source(&a.kernel);
    let (k, sizes) = source.load()?;
    let p = answer::params_over(a.param.as_deref(), &sizes)?;
    let pos = a.reference.as_deref().map(|s| answer::find_ref(&k, s)).transpose()?;
    if a.cache.l2.is_some() {
        anyhow::bail!("--l2 and --l3 apply to `cache simulate` and `cache model`; `info` describes one cache (--cache)");
    }
    let info = kernel_info(&k, a.cache.caches(&source)?.levels[0], &source.layout(a.cache.base.as_deref(), a.cache.start, a.cache.align)?, p.as_ref(), pos)?;
    print(&info, a.json)
}

/// `value` as JSON, or as its text.
fn print(value: &(impl serde::Serialize + std::fmt::Display), json: bool) -> Result<()> {
    if json {
        return crate::output::print_json(value);
    }
    print!("{value}");
    Ok(())
}

fn simulate(a: SimulateArgs) -> Result<()> {
    let source = a.c.source(&a.kernel);
    let (k, sizes) = source.load()?;
    let p = answer::params_over(a.param.as_deref(), &sizes)?.with_context(|| format!("{}: give the sizes with --param (or -D/--size for a C file)", a.kernel.display()))?;
    let warm = source.warmup(a.start.warm.as_deref())?;
    let rep = answer::simulation_report(&k, &p, &a.cache.caches(&source)?, a.limit.max_accesses, warm.as_ref(), &Terminal::default())?;
    print(&rep, a.json)
}

fn model(a: ModelArgs) -> Result<()> {
    let source = a.c.source(&a.kernel);
    let request = ModelRequest {
        caches: a.cache.caches(&source)?,
        source,
        method: a.method.into(),
        extent: a.extent,
        budget: a.budget,
        lexmin_chain: a.lexmin_chain,
        stepwise_divisions: a.divisions == Divisions::Stepwise,
        no_race: a.no_race,
        one_chain: a.one_chain,
        jobs: a.jobs,
        check: a.check,
        max_accesses: a.limit.max_accesses,
        warm: a.start.warm,
        reference: a.reference,
        vary: a.vary,
        fix: a.fix,
        from: a.from,
        param: a.param,
        explain: a.explain,
    };
    let ui: Arc<dyn Ui> = Arc::new(Terminal::default());
    let answer = answer::answer_model(request, &ui)?;
    let written = match (&a.output, answer.formulas_json()) {
        (Some(out), Some(bytes)) => {
            std::fs::write(out, bytes?).with_context(|| format!("cannot write {}", out.display()))?;
            Some(out)
        }
        _ => None,
    };
    print(&answer, a.json)?;
    if let Some(out) = written.filter(|_| !a.json) {
        println!("formulas written to {}", out.display());
    }
    Ok(())
}

fn eval(a: EvalArgs) -> Result<()> {
    let text = crate::output::read_text(&a.formulas).with_context(|| format!("cannot read formulas file {}", a.formulas.display()))?;
    let answer = answer::evaluate_file(&a.formulas, &text, &a.param, a.verify.as_deref())?;
    print(&answer, a.json)?;
    match answer.disagreement() {
        Some(d) => Err(anyhow::anyhow!(d)),
        None => Ok(()),
    }
}

/// The seed's worked example as a demo stage (`kansoku_cache::report::demo_stage`).
pub fn demo_stage(dir: &Path) -> Result<String> {
    Ok(kansoku_cache::report::demo_stage(dir)?)
}
