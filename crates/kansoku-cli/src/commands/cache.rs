//! `kansoku cache`: seed 004 — kernel tables, exact LRU simulation, miss formulas.

use anyhow::{bail, Context, Result};
use kansoku_cache::model::{build_model, Family, KernelFormulas, ModelOptions};
use kansoku_cache::{kernel_info, parse_params, CacheConfig, Inclusion, Kernel, LayoutSpec, ParamValues, Program, RefStats, Start};
use serde::Serialize;
use std::path::{Path, PathBuf};
use std::time::Instant;

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
}

impl CacheArgs {
    fn cache(&self) -> Result<CacheConfig> {
        Ok(CacheConfig::parse(&self.cache)?)
    }
    /// `--cache`, then `--l2` and `--l3` if given.
    fn levels(&self) -> Result<Vec<CacheConfig>> {
        let mut v = vec![self.cache()?];
        for lower in [&self.l2, &self.l3].into_iter().flatten() {
            v.push(CacheConfig::parse(lower)?);
        }
        Ok(v)
    }
    fn inclusion(&self) -> Inclusion {
        if self.non_inclusive {
            Inclusion::NonInclusive
        } else {
            Inclusion::Inclusive
        }
    }
    /// `--base`, else the arrays one after the other (PolyBench's page alignment for a C
    /// file `kernel`).
    fn layout(&self, kernel: &Path) -> Result<LayoutSpec> {
        match &self.base {
            Some(b) => Ok(LayoutSpec::parse_bases(b)?),
            None => Ok(LayoutSpec::default_for(is_c(kernel), self.start, self.align)),
        }
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
    /// The set method; when it cannot (extents depending on parameters without --extent, or over its
    /// --budget), interpolation, with a note saying why.
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
    /// Give up after this many seconds per construction tried (set method: a thread with
    /// no reference left to start builds the slowest one with the next other construction
    /// beside the first, the lexmin chain then the other --divisions, and references not
    /// built within the budget get them next; they may run until twice the budget has
    /// passed; a construction that won such a race goes first for the references after;
    /// then `auto` falls back to interpolation, which gets the budget again). Default 120;
    /// 10 for `auto` at concrete sizes, where one simulation answers in a second.
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

/// `--budget`'s default.
const BUDGET: f64 = 120.0;

/// `--budget`'s default for `auto` at concrete sizes: the set method there gives one
/// number, which one simulation gives in well under a second (mvt MEDIUM on a 32 KiB
/// 8-way L1: 0.01 s), so `auto` should not wait minutes for it (with 120 s, 240 s
/// before it simulated). Ten of the eleven kernels the set method builds at MEDIUM
/// take under 10 s (docs/BENCHMARKS.md, seed 004, a realistic L1).
const BUDGET_AUTO_AT_A_POINT: f64 = 10.0;

impl ModelArgs {
    /// Seconds per construction: `--budget`, else by what is asked (`at_a_point`: the
    /// formulas are for the given sizes only).
    fn budget(&self, at_a_point: bool) -> f64 {
        self.budget.unwrap_or(if at_a_point && self.method == Method::Auto { BUDGET_AUTO_AT_A_POINT } else { BUDGET })
    }
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

/// PolyBench-style C input (`FILE.c`), rather than the kernel language.
fn is_c(path: &Path) -> bool {
    path.extension().is_some_and(|e| e == "c")
}

pub fn run(cmd: CacheCommand) -> Result<()> {
    match cmd {
        CacheCommand::Info(a) => info(a),
        CacheCommand::Simulate(a) => simulate(a),
        CacheCommand::Model(a) => model(a),
        CacheCommand::Eval(a) => eval(a),
    }
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

/// A kernel file, and the values its sizes got from a C file's `-D` or `--size` (empty for
/// the kernel language, whose sizes come from `--param`).
fn load(path: &Path, c: &CArgs) -> Result<(Kernel, ParamValues)> {
    if is_c(path) {
        let input = kansoku_cache::CInput { function: c.function.clone(), defines: defines(c)?, preset: c.size.clone(), header: None };
        let lowered = kansoku_cache::load_c_kernel(path, &input)?;
        return Ok((lowered.kernel, lowered.sizes.into_iter().collect()));
    }
    if c.function.is_some() || !c.define.is_empty() || c.size.is_some() {
        bail!("{}: --function, -D and --size are for C files (FILE.c); a kernel-language file takes --param", path.display());
    }
    Ok((kansoku_cache::load_kernel(path)?, ParamValues::new()))
}

/// `-D NAME=VALUE` as pairs; `-D NAME` alone is `NAME=1`, as for the C preprocessor
/// (`-D DATA_TYPE_IS_INT`).
fn defines(c: &CArgs) -> Result<Vec<(String, String)>> {
    let mut defines = Vec::new();
    for d in &c.define {
        let (name, value) = d.split_once('=').unwrap_or((d.as_str(), "1"));
        if name.trim().is_empty() {
            bail!("-D {d}: expected NAME=VALUE");
        }
        defines.push((name.trim().to_string(), value.trim().to_string()));
    }
    Ok(defines)
}

/// `--param` values over the sizes a C file gave (the explicit ones win); none of either
/// is `None`.
fn params_over(spec: Option<&str>, sizes: &ParamValues) -> Result<Option<ParamValues>> {
    let mut p = sizes.clone();
    if let Some(s) = spec {
        p.extend(params(s)?);
    }
    Ok((!p.is_empty()).then_some(p))
}

fn params(spec: &str) -> Result<ParamValues> {
    Ok(parse_params(spec)?)
}

fn find_ref(k: &Kernel, sel: &str) -> Result<usize> {
    k.find_ref(sel).with_context(|| {
        let known: Vec<String> = k.refs.iter().map(|r| format!("P{} = {}:{}:{}", r.id, k.statements[r.stmt].label, r.side.as_str(), r.position)).collect();
        format!("no reference '{sel}' in {} (known: {})", k.file, known.join(", "))
    })
}

fn info(a: InfoArgs) -> Result<()> {
    let (k, sizes) = load(&a.kernel, &a.c)?;
    let p = params_over(a.param.as_deref(), &sizes)?;
    let pos = a.reference.as_deref().map(|s| find_ref(&k, s)).transpose()?;
    if a.cache.l2.is_some() {
        bail!("--l2 and --l3 apply to `cache simulate` and `cache model`; `info` describes one cache (--cache)");
    }
    let info = kernel_info(&k, a.cache.cache()?, &a.cache.layout(&a.kernel)?, p.as_ref(), pos)?;
    if a.json {
        crate::output::print_json(&info)?;
        return Ok(());
    }
    println!("Program information ({}), parameters: {}", info.file, if info.params.is_empty() { "none".into() } else { info.params.join(", ") });
    for s in &info.program {
        let guard = if s.guards.is_empty() { String::new() } else { format!("   (when {})", s.guards.join(" and ")) };
        println!("  {:<4} line {:<3} {}{guard}", s.label, s.line, s.text.split_whitespace().collect::<Vec<_>>().join(" "));
    }
    println!("\nData information");
    println!("  {:<8} {:<8} {:>9} {:>12} {:>14}", "array", "type", "elem size", "start", "elements");
    for (i, d) in info.arrays.iter().enumerate() {
        let (start, elems) = match &info.data {
            Some(data) => (data[i].start.to_string(), data[i].elems.to_string()),
            None => ("(give --param)".into(), d.sizes.join(" x ")),
        };
        println!("  {:<8} {:<8} {:>9} {:>12} {:>14}", d.name, d.elem_type, d.elem_size, start, elems);
    }
    if let Some(p) = &info.position {
        println!("\nPosition information\n  statement {}  side {}  position {}  ({})", p.statement, p.side, p.position, p.reference);
    }
    println!("  layout: {}", info.layout);
    println!("\nCache information\n  associativity A = {}  line size B = {}  sets S = {}  ({} bytes)", info.cache.assoc, info.cache.line, info.cache.sets, info.cache.size_bytes());
    println!("\nLoop information");
    for l in &info.loops {
        let step = if l.step == 1 { String::new() } else { format!(" step {}", l.step) };
        println!("  {}{} from {} while < {}{}   (line {})", "  ".repeat(l.depth), l.var, l.lower, l.upper, step, l.line);
    }
    println!("\nArray information");
    println!("  {:<4} {:<5} {:<6} {:>3}  {:<6} {:<20} loop variables", "pos", "stmt", "side", "n", "array", "subscripts");
    for r in &info.references {
        println!("  {:<4} {:<5} {:<6} {:>3}  {:<6} {:<20} {}", r.position_number, r.statement, r.side, r.position, r.array, r.subscripts.join(", "), r.loop_vars.join(", "));
    }
    Ok(())
}

#[derive(Serialize)]
struct SimRow {
    reference: String,
    statement: String,
    side: String,
    position: usize,
    text: String,
    accesses: u64,
    hits: u64,
    compulsory: u64,
    other: u64,
}

#[derive(Serialize)]
struct SimReport {
    kernel: String,
    cache: CacheConfig,
    /// Where the arrays are.
    layout: String,
    /// The cache's state at the kernel's start (`"cold"`, or `{"warm": "init_array"}`).
    start: Start,
    params: ParamValues,
    data: Vec<kansoku_cache::config::DataInfo>,
    refs: Vec<SimRow>,
    total_accesses: u64,
    total_misses: u64,
    seconds: f64,
    accesses_per_second: f64,
    /// The inclusive levels below `cache` (`--l2`), each seeing the level above's misses.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    lower_levels: Vec<SimLevel>,
}

#[derive(Serialize)]
struct SimLevel {
    cache: CacheConfig,
    inclusion: Inclusion,
    refs: Vec<SimRow>,
    total_accesses: u64,
    total_misses: u64,
}

/// The simulator's speed for estimates (measured 240–380 M accesses/s for one level, 46 M
/// for an L1+L2 hierarchy, BENCHMARKS seed 004).
const SIM_ACCESSES_PER_SECOND: f64 = 3e8;
const HIERARCHY_ACCESSES_PER_SECOND: f64 = 4.6e7;

/// Simulates `levels` on `k` at `p`, after counting the accesses: refused above `limit`,
/// with a progress bar when it takes more than about a second.
fn sim_report(k: &Kernel, p: &ParamValues, layout: &LayoutSpec, levels: &[CacheConfig], inclusion: Inclusion, limit: SimLimit, warm: Option<&Warmup>) -> Result<SimReport> {
    let mut prog = Program::new(k, p, layout)?;
    if let Some(w) = warm {
        let align = match layout {
            LayoutSpec::Consecutive { align, .. } => *align,
            LayoutSpec::Bases(_) => 64,
        };
        prog = prog.warmed_by(&w.kernel, p, align).with_context(|| format!("--warm {}", w.name))?;
    }
    // a PolyBench program allocates its arrays before it initialises them
    let glibc = warm.is_some() && is_c(Path::new(&k.file)) && *layout == LayoutSpec::polybench();
    if glibc {
        prog = prog.allocated_by_glibc();
    }
    let what = warm.map(|w| if glibc { format!("PolyBench's allocation (glibc's posix_memalign) and {}", w.name) } else { w.name.clone() });
    let start = prog.start(what.as_deref().unwrap_or(""));
    let work = prog.work(limit.max_accesses);
    let speed = if levels.len() == 1 { SIM_ACCESSES_PER_SECOND } else { HIERARCHY_ACCESSES_PER_SECOND };
    if !work.complete {
        bail!(
            "{} at {}: the simulation would make more than {} accesses (about {} at {} M accesses/s); \
             --max-accesses N raises the limit of {}, or choose smaller sizes",
            k.file,
            fmt_params(p),
            work.steps(),
            fmt_duration(work.steps() as f64 / speed),
            speed / 1e6,
            limit.max_accesses
        );
    }
    let bar = if work.steps() as f64 > speed { crate::output::bar("simulating", work.accesses) } else { indicatif::ProgressBar::hidden() };
    let t = Instant::now();
    let progress = |n| bar.set_position(n);
    let mut stats = if levels.len() == 1 { prog.simulate_reporting(levels, progress) } else { prog.simulate_hierarchy_reporting(levels, inclusion, progress)? };
    bar.finish_and_clear();
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
        .map(|(st, c)| SimLevel { cache: *c, inclusion, refs: rows(&st), total_accesses: st.iter().map(|s| s.accesses).sum(), total_misses: st.iter().map(|s| s.misses()).sum() })
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

/// What runs before the kernel for `--warm`, and its name for reports.
struct Warmup {
    kernel: Kernel,
    name: String,
}

/// `--warm`'s code: a C file's function (`init_array`), or a kernel-language file.
fn warmup(kernel: &Path, c: &CArgs, start: &StartArgs) -> Result<Option<Warmup>> {
    let Some(w) = &start.warm else { return Ok(None) };
    if is_c(kernel) {
        let input = kansoku_cache::CInput { function: None, defines: defines(c)?, preset: c.size.clone(), header: None };
        let k = kansoku_cache::load_c_warmup(kernel, &input, w).with_context(|| format!("--warm: reading {w} of {} as the code before the kernel", kernel.display()))?;
        return Ok(Some(Warmup { kernel: k, name: w.clone() }));
    }
    let k = kansoku_cache::load_kernel(Path::new(w)).with_context(|| format!("--warm {w}: for a kernel-language file, a kernel-language file of the code before the kernel"))?;
    Ok(Some(Warmup { kernel: k, name: w.clone() }))
}

fn simulate(a: SimulateArgs) -> Result<()> {
    let (k, sizes) = load(&a.kernel, &a.c)?;
    let p = params_over(a.param.as_deref(), &sizes)?.with_context(|| format!("{}: give the sizes with --param (or -D/--size for a C file)", a.kernel.display()))?;
    let warm = warmup(&a.kernel, &a.c, &a.start)?;
    let rep = sim_report(&k, &p, &a.cache.layout(&a.kernel)?, &a.cache.levels()?, a.cache.inclusion(), a.limit, warm.as_ref())?;
    print_simulation(&rep, a.json)
}

fn print_simulation(rep: &SimReport, json: bool) -> Result<()> {
    if json {
        crate::output::print_json(rep)?;
        return Ok(());
    }
    let l1 = if rep.lower_levels.is_empty() { "" } else { "L1 " };
    println!("{}  {l1}cache {}  {}", rep.kernel, rep.cache, fmt_params(&rep.params));
    println!("  layout: {}", rep.layout);
    println!("  cache at the kernel's start: {}", rep.start.describe());
    print_sim_rows(&rep.refs);
    println!("  {} accesses, {} misses, {:.3} s ({:.1} M accesses/s)", rep.total_accesses, rep.total_misses, rep.seconds, rep.accesses_per_second / 1e6);
    for (i, l) in rep.lower_levels.iter().enumerate() {
        let inclusion = if l.inclusion == Inclusion::Inclusive { "inclusive" } else { "non-inclusive" };
        println!("L{} cache {} ({inclusion}; sees the L{} misses)", i + 2, l.cache, i + 1);
        print_sim_rows(&l.refs);
        println!("  {} accesses, {} misses", l.total_accesses, l.total_misses);
    }
    Ok(())
}

fn print_sim_rows(rows: &[SimRow]) {
    println!("  {:<4} {:<14} {:<14} {:>12} {:>12} {:>11} {:>11}", "ref", "position", "reference", "accesses", "hits", "compulsory", "other");
    for r in rows {
        println!(
            "  {:<4} {:<14} {:<14} {:>12} {:>12} {:>11} {:>11}",
            r.reference,
            format!("{}:{}:{}", r.statement, r.side, r.position),
            r.text,
            r.accesses,
            r.hits,
            r.compulsory,
            r.other
        );
    }
}

/// Seconds as a person reads them: "40 s", "12 min", "3.5 h", "9 days".
fn fmt_duration(secs: f64) -> String {
    match secs {
        s if s < 120.0 => format!("{s:.0} s"),
        s if s < 7200.0 => format!("{:.0} min", s / 60.0),
        s if s < 172_800.0 => format!("{:.1} h", s / 3600.0),
        s => format!("{:.0} days", s / 86400.0),
    }
}

fn fmt_params(p: &ParamValues) -> String {
    p.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join(",")
}

fn model(mut a: ModelArgs) -> Result<()> {
    // A C file's sizes (-D, --size) are where the formulas are evaluated, unless --param
    // says otherwise; its arrays are as large as those sizes, unless --extent says otherwise.
    // With neither --param nor --extent, the question is the misses at those sizes: the
    // set method then works at that one point (`at`), much faster than in all sizes.
    let mut concrete = None;
    let mut at = None;
    if a.param.is_none() {
        let (_, sizes) = load(&a.kernel, &a.c)?;
        if !sizes.is_empty() {
            a.param = Some(fmt_params(&sizes));
            if a.extent.is_none() {
                a.extent = Some(fmt_params(&sizes));
                at = Some(sizes.clone());
            }
            concrete = Some(sizes);
        }
    }
    if a.start.warm.is_some() {
        // The formulas (both methods) count from an empty cache: a warm start is never
        // answered by them, and never answered cold without a word.
        let Some(sizes) = concrete else {
            bail!("--warm: the formulas count from a cold (empty) cache and cannot start warm; give concrete sizes (-D/--size) to simulate the warm start, or leave --warm out for cold formulas");
        };
        eprintln!("note: --warm: the formulas count from a cold cache; the warm start is answered by the simulator at {}", fmt_params(&sizes));
        let (k, _) = load(&a.kernel, &a.c)?;
        let warm = warmup(&a.kernel, &a.c, &a.start)?;
        return print_simulation(&sim_report(&k, &sizes, &a.cache.layout(&a.kernel)?, &a.cache.levels()?, a.cache.inclusion(), a.limit, warm.as_ref())?, a.json);
    }
    if a.cache.l2.is_some() && !(a.cache.non_inclusive && a.method != Method::Interpolate) {
        // LRU state of an inclusive L2 depends on what L1 filters out, and L1's on L2's
        // evictions, so a level's formulas alone do not give it (docs/rooms/seed004-cache.md,
        // "Two levels"); a non-inclusive L2 is modelled by the set method.
        let Some(sizes) = concrete else {
            bail!("--l2: the formulas of an inclusive hierarchy are not derived; give concrete sizes (-D/--size) to simulate it, or --non-inclusive for the lower levels' formulas by the set method");
        };
        eprintln!("note: --l2: the inclusive hierarchy is answered by the simulator at {}", fmt_params(&sizes));
        let (k, _) = load(&a.kernel, &a.c)?;
        return print_simulation(&sim_report(&k, &sizes, &a.cache.layout(&a.kernel)?, &a.cache.levels()?, a.cache.inclusion(), a.limit, None)?, a.json);
    }
    let interpolation_args = !a.vary.is_empty() || a.fix.is_some() || a.from != 1;
    // Interpolation models one level: never a silent answer for L1 alone to an --l2 question.
    let one_level_only = |why: &str| anyhow::anyhow!("--l2 --non-inclusive: {why}; interpolation models one level (the set method models the hierarchy; concrete sizes, -D/--size, are simulated)");
    if a.cache.l2.is_some() && interpolation_args {
        return Err(one_level_only("--vary, --fix and --from are interpolation's"));
    }
    let started = Instant::now();
    match a.method {
        Method::Interpolate => interpolate_model(a),
        Method::Sets => sets_model(&a, at.as_ref()).map_err(|e| with_budget_hint(e, a.cache.l2.is_some())),
        Method::Auto if interpolation_args => interpolate_model(a),
        Method::Auto => match sets_model(&a, at.as_ref()) {
            Ok(()) => Ok(()),
            // Concrete sizes: one simulation answers at once, where interpolation would
            // simulate many sizes and the set method has already run out of time.
            Err(e) if e.downcast_ref::<SetsUnavailable>().is_some() && concrete.is_some() => {
                let sizes = concrete.expect("checked");
                eprintln!(
                    "note: the set method did not get there ({e:#}; {:.1} s); simulating at {} instead (--method sets --budget S to insist)",
                    started.elapsed().as_secs_f64(),
                    fmt_params(&sizes)
                );
                let (k, _) = load(&a.kernel, &a.c)?;
                let rep = sim_report(&k, &sizes, &a.cache.layout(&a.kernel)?, &a.cache.levels()?, a.cache.inclusion(), a.limit, None)?;
                print_simulation(&rep, a.json)
            }
            Err(e) if e.downcast_ref::<SetsUnavailable>().is_some() && a.cache.l2.is_some() => Err(one_level_only(&format!("the set method did not get there ({:#})", with_budget_hint(e, true)))),
            Err(e) if e.downcast_ref::<SetsUnavailable>().is_some() => {
                eprintln!("note: the set method cannot be used here ({e:#}); using interpolation in one size variable (--method interpolate)");
                interpolate_model(a)
            }
            Err(e) => Err(e),
        },
    }
}

/// The set method could not be applied (extents, budget): `auto` falls back. `budget`:
/// it ran out of its time or isl's operations, so a larger `--budget` may get there.
#[derive(Debug)]
struct SetsUnavailable {
    msg: String,
    budget: bool,
}
impl SetsUnavailable {
    fn new(msg: String) -> Self {
        SetsUnavailable { msg, budget: false }
    }
}
impl std::fmt::Display for SetsUnavailable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.msg)
    }
}
impl std::error::Error for SetsUnavailable {}

/// Where the set method ran out of time and nothing fell back, what else there is: a
/// larger budget, and for one level interpolation (which models no hierarchy).
fn with_budget_hint(e: anyhow::Error, hierarchy: bool) -> anyhow::Error {
    let Some(SetsUnavailable { msg, budget: true }) = e.downcast_ref::<SetsUnavailable>() else { return e };
    let other = if hierarchy { "" } else { ", or --method interpolate for formulas in one size variable" };
    SetsUnavailable { msg: format!("{msg} (a larger --budget may get there{other})"), budget: true }.into()
}

/// The lexmin-chain threshold raced against the default construction (the
/// value measured on the 2-D stencils and mvt 8-way, docs/BENCHMARKS.md, seed 004).
const CHAIN_RACE_CHARS: usize = 4000;

/// `at`: derive the formulas for these sizes only (see `SetModelOptions::at`).
fn sets_model(a: &ModelArgs, at: Option<&ParamValues>) -> Result<()> {
    use kansoku_cache::sets::{build_hierarchy_model, build_set_model, Alternative, RefSetFormulas, SetModelOptions};
    let (k, _) = load(&a.kernel, &a.c)?;
    let extents = a.extent.as_deref().map(params).transpose()?.unwrap_or_default();
    let k = k.with_fixed_extents(&extents).map_err(|e| SetsUnavailable::new(format!("{e} (--extent)")))?;
    let mut opts = SetModelOptions::new(a.cache.layout(&a.kernel)?, a.cache.cache()?);
    opts.extents = extents;
    opts.explain = a.explain;
    if let Some(at) = at {
        opts.at = at.clone();
        eprintln!("note: formulas for {} only (give --extent to derive them in every size up to the extents)", fmt_params(at));
    }
    opts.time_budget = Some(std::time::Duration::from_secs_f64(a.budget(at.is_some()).max(0.0)));
    opts.lexmin_chain_above = a.lexmin_chain;
    opts.sure_misses_first = a.lexmin_chain.is_some();
    opts.stepwise_divisions = a.divisions == Divisions::Stepwise;
    opts.split_by_source = !a.one_chain;
    // No construction is faster everywhere (docs/rooms/seed004-cache.md): stepwise
    // divisions win on 2mm, syr2k and symm 8-way, divisions at the count on gemm 4-way,
    // the lexmin chain on the 2-D stencils, nussinov and ludcmp; idle threads race the
    // others beside the first.
    if !a.no_race {
        opts.race = vec![Alternative::LexminChain(CHAIN_RACE_CHARS), Alternative::StepwiseDivisions, Alternative::DivisionsAtCount];
    }
    opts.jobs = a.jobs;
    let lower = a.cache.levels()?.split_off(1);
    if let Some(sel) = &a.reference {
        if !lower.is_empty() {
            bail!("--ref: a lower level sees the misses of every reference of the level above; model the hierarchy without --ref");
        }
        opts.refs = vec![find_ref(&k, sel)?];
    }
    let bar = crate::output::spinner("building sets and counting", "");
    let built = if lower.is_empty() { build_set_model(&k, &opts) } else { build_hierarchy_model(&k, &opts, &lower) };
    bar.finish_and_clear();
    if let Ok(f) = &built {
        let built_by = |pick: fn(&RefSetFormulas) -> bool| f.levels().iter().flat_map(|l| &l.refs).filter(|r| pick(r)).map(|r| r.reference.as_str()).collect::<std::collections::BTreeSet<_>>().into_iter().collect::<Vec<_>>();
        let other_divisions = format!("--divisions {}", if opts.stepwise_divisions { "at-count" } else { "stepwise" });
        for (construction, refs) in [(format!("the lexmin chain (--lexmin-chain {CHAIN_RACE_CHARS})"), built_by(|r| r.lexmin_chain)), (other_divisions, built_by(|r| r.other_divisions))] {
            if !refs.is_empty() {
                eprintln!("note: {}: built with {construction}, which finished before the first construction or after it ran out of --budget", refs.join(", "));
            }
        }
    }
    let mut f = match built {
        Ok(f) => f,
        Err(e) => match e.model_message() {
            Some(msg) => return Err(SetsUnavailable { msg: msg.to_string(), budget: e.is_budget() }.into()),
            None => return Err(e.into()),
        },
    };
    check_against_simulation(&k, &mut f, a.check, &opts)?;
    note_tables(&f);
    if let Some(out) = &a.output {
        std::fs::write(out, serde_json::to_vec(&f)?).with_context(|| format!("cannot write {}", out.display()))?;
    }
    // Every level's counts, the first level first.
    let evaluations = a.param.as_deref().map(|s| -> Result<_> { let p = params(s)?; Ok(f.eval_levels(&p)?) }).transpose()?;
    if a.json {
        #[derive(Serialize)]
        struct Out<'a> {
            formulas: &'a kansoku_cache::sets::SetFormulas,
            /// The formulas' own level (the last of a hierarchy).
            evaluation: Option<&'a Vec<kansoku_cache::sets::RefSetEvaluation>>,
            /// Every level, the first first, for a hierarchy.
            #[serde(skip_serializing_if = "Option::is_none")]
            levels: Option<&'a Vec<Vec<kansoku_cache::sets::RefSetEvaluation>>>,
        }
        let levels = evaluations.as_ref().filter(|e| e.len() > 1);
        crate::output::print_json(&Out { formulas: &f, evaluation: evaluations.as_ref().and_then(|e| e.last()), levels })?;
        return Ok(());
    }
    print_set_formulas(&f, a.explain);
    for (i, ev) in evaluations.iter().flatten().enumerate() {
        let at = a.param.as_deref().unwrap_or("");
        print_set_eval(ev, &if f.above.is_some() { format!("{at} (L{})", i + 1) } else { at.to_string() });
    }
    if let Some(out) = &a.output {
        println!("formulas written to {}", out.display());
    }
    Ok(())
}

/// Compares `f` with the simulator at up to `n` of its parameter points, a reference
/// that differs built again with another construction (`kansoku_cache::check`); when one
/// agrees with no construction, an error (nothing is written, `auto` falls back).
fn check_against_simulation(k: &Kernel, f: &mut kansoku_cache::sets::SetFormulas, n: usize, opts: &kansoku_cache::sets::SetModelOptions) -> Result<()> {
    use kansoku_cache::check::{check_and_rebuild, check_points, MAX_CHECK_ACCESSES};
    let t = Instant::now();
    let points = check_points(f, n);
    let checked_nothing = points.is_empty();
    let checked = check_and_rebuild(k, f, points, opts)?;
    for (d, alternative) in &checked.rebuilt {
        eprintln!("note: {d}; building {} again with another construction", d.reference);
        eprintln!("note: {}: built again with {alternative:?}, equal to the simulator at every point", d.reference);
    }
    if let Some(first) = checked.unmended.first() {
        eprintln!("note: {first}; building {} again with another construction", first.reference);
        let more = if checked.unmended.len() > 1 { format!(" (and {} more)", checked.unmended.len() - 1) } else { String::new() };
        return Err(SetsUnavailable::new(format!("the formulas disagree with the simulator: {first}{more}, whichever construction builds them; isl's sets were not exact here, nothing written")).into());
    }
    if n > 0 && checked_nothing {
        eprintln!("note: not checked against the simulator: no parameter point to check (a size without a bound — give --extent —, or over {MAX_CHECK_ACCESSES} accesses)");
    } else if n > 0 {
        eprintln!("note: checked against the simulator at {} parameter point{} ({:.2} s): every reference equal", f.checked_at.len(), if f.checked_at.len() == 1 { "" } else { "s" }, t.elapsed().as_secs_f64());
    }
    Ok(())
}

/// Says which references have pieces that are tables rather than formulas.
fn note_tables(f: &kansoku_cache::sets::SetFormulas) {
    let levels = f.levels();
    let level = |i: usize| if levels.len() > 1 { format!("L{} ", i + 1) } else { String::new() };
    let tables: Vec<String> = levels.iter().enumerate().flat_map(|(i, l)| l.refs.iter().filter(|r| r.tabulated_pieces > 0).map(move |r| (i, r))).map(|(i, r)| format!("{}{} ({} piece{})", level(i), r.reference, r.tabulated_pieces, if r.tabulated_pieces == 1 { "" } else { "s" })).collect();
    if !tables.is_empty() {
        eprintln!("note: {}: counted point by point over the sizes' box where the summation did not finish: a table of those points, exact there, not a formula", tables.join(", "));
    }
}

fn print_set_formulas(f: &kansoku_cache::sets::SetFormulas, explain: bool) {
    let levels = f.levels();
    for (i, level) in levels.iter().enumerate() {
        if levels.len() > 1 {
            println!("{}L{} ({}):", if i == 0 { "" } else { "\n" }, i + 1, if i == 0 { "first level" } else { "non-inclusive; counts the accesses that miss the level above" });
        }
        print_level_formulas(level, explain);
    }
    if levels.len() > 1 {
        println!("\nall {} levels built in {:.3} s", levels.len(), levels.iter().map(|l| l.build_seconds).sum::<f64>());
    }
}

fn print_level_formulas(f: &kansoku_cache::sets::SetFormulas, explain: bool) {
    println!("{}  cache {}  set method (isl + parametric counting); parameters {} with {}", f.kernel, f.cache, f.params.join(", "), f.context.show(&f.params));
    println!("  layout: {}", f.layout.describe());
    println!("  cache at the kernel's start: {}", f.start.describe());
    if !f.extents.is_empty() {
        println!("  array extents fixed at {}", fmt_params(&f.extents));
    }
    for r in &f.refs {
        let tables = if r.tabulated_pieces > 0 { format!("; {} piece{} tabulated point by point", r.tabulated_pieces, if r.tabulated_pieces == 1 { "" } else { "s" }) } else { String::new() };
        println!("
{} {}:{}:{}  {}   ({:.3} s{tables})", r.reference, r.statement, r.side, r.position, r.text, r.build_seconds);
        println!("  compulsory misses (first - second count) = sum of:");
        print!("{}", r.compulsory);
        println!("  conflict misses (third - fourth count) = sum of:");
        print!("{}", r.conflict);
        if let Some(x) = explain.then_some(r.explain.as_ref()).flatten() {
            println!("  sets (isl notation):");
            println!("    access: {}", x.access);
            println!("    hit condition: {}", x.hit_condition);
            println!("    hit source (lexmax): {}", x.hit_source);
            println!("    compulsory set (no hit source): {}", x.compulsory_set);
            for (who, set) in &x.conflict_factors {
                println!("    conflict-miss factor {who}: {set}");
            }
            for (i, set) in x.distinct_lines.iter().enumerate() {
                println!("    E_{} (>= {} distinct lines of the set in between, per array group [X] when counted per array; replaces the seed's split/common sets): {set}", i + 1, i + 1);
            }
            println!("    conflict set (>= A distinct lines in between: E_A's domain, or disjoint parts joined by ∪ when counted per array): {}", x.conflict_set);
            if let Some(seed) = &x.seed_conflict {
                println!("  the seed's split/common construction (sums per-factor line counts; a line two factors insert counts twice) would give:");
                print!("{seed}");
            }
        }
    }
    println!("
built in {:.3} s", f.build_seconds);
}

fn print_set_eval(ev: &[kansoku_cache::sets::RefSetEvaluation], at: &str) {
    println!("
Evaluation at {at}:");
    println!("  {:<4} {:>14} {:>14} {:>12} {:>12}", "ref", "accesses", "hits", "compulsory", "conflict");
    for r in ev {
        println!("  {:<4} {:>14} {:>14} {:>12} {:>12}", r.reference, r.accesses, r.hits, r.compulsory, r.conflict);
    }
}

fn interpolate_model(a: ModelArgs) -> Result<()> {
    let (k, _) = load(&a.kernel, &a.c)?;
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
    family.check(&k).with_context(|| format!("choosing the size variable for {}", k.file))?;
    let cache = a.cache.cache()?;
    let mut opts = ModelOptions::new(family, a.cache.layout(&a.kernel)?, vec![cache]);
    opts.breakdown = a.explain;
    if a.from < 0 {
        bail!("--from {} is negative; sizes start at 0 or 1", a.from);
    }
    opts.n_min = a.from;
    opts.time_budget = Some(std::time::Duration::from_secs_f64(a.budget(false).max(0.0)));
    let bar = crate::output::spinner("deriving formulas: simulating size", "");
    let b2 = bar.clone();
    opts.progress = Some(kansoku_cache::model::Progress(std::sync::Arc::new(move |n| b2.set_position(n as u64))));
    let built = build_model(&k, &opts);
    bar.finish_and_clear();
    let mut f = built.with_context(|| format!("deriving formulas for {}", k.file))?.pop().unwrap();
    if let Some(sel) = &a.reference {
        let r = find_ref(&k, sel)?;
        f.refs.retain(|x| x.reference == format!("P{r}"));
    }
    if let Some(out) = &a.output {
        std::fs::write(out, serde_json::to_vec(&f)?).with_context(|| format!("cannot write {}", out.display()))?;
    }
    let evaluation = a.param.as_deref().map(|s| -> Result<_> { Ok(f.eval(&params(s)?)?) }).transpose()?;
    if a.json {
        #[derive(Serialize)]
        struct Out<'a> {
            formulas: &'a KernelFormulas,
            evaluation: Option<kansoku_cache::model::Evaluation>,
        }
        crate::output::print_json(&Out { formulas: &f, evaluation })?;
        return Ok(());
    }
    print!("{f}");
    println!("layout: {}", f.layout.describe());
    println!("cache at the kernel's start: {}", f.start.describe());
    println!(
        "derived in {:.3} s from exact simulations at {} for n = {}..={} (horizon {})",
        f.build_seconds,
        f.family.describe("n"),
        f.sampled_sizes.0,
        f.sampled_sizes.1,
        f.horizon
    );
    if a.explain {
        explain(&f);
    }
    if let Some(ev) = evaluation {
        print_eval(&ev, &f);
    }
    if let Some(out) = &a.output {
        println!("formulas written to {}", out.display());
    }
    Ok(())
}

fn explain(f: &KernelFormulas) {
    println!("\nHow each formula was derived (method: docs/rooms/seed004-cache.md):");
    println!("  every size {}..={} was simulated exactly; a piece is a quasi-polynomial whose (D+1)-th differences", f.sampled_sizes.0, f.sampled_sizes.1);
    println!("  with step = period vanish on all its sizes; the last piece needs >= 3 checks per residue class beyond the horizon {}.", f.horizon);
    for r in &f.refs {
        println!("  {} {} (degree bound D = {}: enclosing loops whose trip count grows with the size)", r.reference, r.text, r.degree_bound);
        for (name, q) in [("accesses (first count)", &r.accesses), ("compulsory (first - second count)", &r.compulsory), ("conflict (third - fourth count)", &r.conflict)] {
            println!("    {name}: {} piece(s), last from {} with period {}, {} checks per class, verified up to {}", q.pieces.len(), q.last_from(), q.period(), q.checks_per_class, q.verified_max);
            for p in &q.pieces {
                let to = p.to.map(|t| t.to_string()).unwrap_or_else(|| "inf".into());
                println!("      [{}, {}] period {} Newton coefficients {:?}", p.from, to, p.period, p.newton);
            }
        }
        for (title, parts) in [("hit sources (second count by the reference that last touched the line)", &r.hit_sources), ("conflict-miss factors (conflict misses by the evicting reference)", &r.conflict_factors)] {
            if parts.is_empty() {
                continue;
            }
            println!("    {title}:");
            for part in parts {
                for (cond, e) in part.count.pieces_text(&f.size_var) {
                    println!("      {:<4} {cond:<30} {e}", part.reference);
                }
            }
        }
    }
}

fn print_eval(ev: &kansoku_cache::model::Evaluation, f: &KernelFormulas) {
    println!("\nEvaluation at {} with n = {}:", f.family.describe("n"), ev.n);
    println!("  {:<4} {:>14} {:>14} {:>12} {:>12}", "ref", "accesses", "hits", "compulsory", "conflict");
    for r in &ev.refs {
        println!("  {:<4} {:>14} {:>14} {:>12} {:>12}", r.reference, r.accesses, r.hits, r.compulsory, r.conflict);
        let fmt = |m: &std::collections::BTreeMap<String, i128>| m.iter().filter(|(_, v)| **v != 0).map(|(k, v)| format!("{k}: {v}")).collect::<Vec<_>>().join(", ");
        if !r.hit_sources.is_empty() {
            println!("       hit sources {{{}}}  conflict-miss factors {{{}}}", fmt(&r.hit_sources), fmt(&r.conflict_factors));
        }
    }
    if ev.extrapolated {
        println!(
            "  note: {} is beyond the sizes checked against the simulator (up to {}); the value continues the verified quasi-polynomial",
            ev.n, ev.verified_max
        );
    }
}

fn eval(a: EvalArgs) -> Result<()> {
    let text = crate::output::read_text(&a.formulas).with_context(|| format!("cannot read formulas file {}", a.formulas.display()))?;
    let format = serde_json::from_str::<serde_json::Value>(&text).ok().and_then(|v| v.get("format").and_then(|f| f.as_str()).map(String::from));
    if format.as_deref() == Some(kansoku_cache::sets::FORMAT) {
        return eval_sets(&a, &text);
    }
    let f: KernelFormulas = serde_json::from_str(&text).with_context(|| format!("{} is not a formulas file written by `kansoku cache model -o`", a.formulas.display()))?;
    if f.format != "kansoku-cache-formulas/1" {
        bail!("{}: unknown formulas format '{}'", a.formulas.display(), f.format);
    }
    let p = params(&a.param)?;
    let t = Instant::now();
    let ev = f.eval(&p).with_context(|| format!("evaluating {}", a.formulas.display()))?;
    let micros = t.elapsed().as_secs_f64() * 1e6;
    let verified = match &a.verify {
        None => None,
        Some(path) => {
            let k = verify_kernel(path, &f.kernel)?;
            let counts = ev.refs.iter().map(|e| (e.reference.as_str(), [e.accesses, e.compulsory, e.conflict]));
            Some(mismatches_with_simulator(&k, &p, &f.layout, f.cache, counts)?)
        }
    };
    if a.json {
        #[derive(Serialize)]
        struct Out {
            evaluation: kansoku_cache::model::Evaluation,
            microseconds: f64,
            #[serde(skip_serializing_if = "Option::is_none")]
            verify_mismatches: Option<Vec<String>>,
        }
        crate::output::print_json(&Out { evaluation: ev, microseconds: micros, verify_mismatches: verified.clone() })?;
    } else {
        print_eval(&ev, &f);
        println!("  evaluated in {micros:.1} µs");
        if let Some(m) = &verified {
            if m.is_empty() {
                println!("  verified: the simulator gives the same counts for every reference");
            }
        }
    }
    if let Some(m) = verified {
        if !m.is_empty() {
            bail!("the formulas disagree with the simulator at {}:\n  {}", a.param, m.join("\n  "));
        }
    }
    Ok(())
}

/// The kernel `eval --verify` re-simulates: the one named, or the one the formulas name.
fn verify_kernel(path: &str, derived_from: &str) -> Result<Kernel> {
    let kpath = if path.is_empty() { PathBuf::from(derived_from) } else { PathBuf::from(path) };
    Ok(load(&kpath, &CArgs::default()).with_context(|| format!("--verify needs the kernel the formulas were derived from ({derived_from})"))?.0)
}

/// Every reference whose formula counts (accesses, compulsory, conflict) differ from one
/// simulation of `k` at `p` (`kansoku_cache::check::compare_with_simulation`), as lines.
fn mismatches_with_simulator<'a>(
    k: &Kernel,
    p: &ParamValues,
    layout: &LayoutSpec,
    cache: CacheConfig,
    counts: impl Iterator<Item = (&'a str, [i128; 3])>,
) -> Result<Vec<String>> {
    let found = kansoku_cache::check::compare_with_simulation(k, p, layout, cache, counts)?;
    Ok(found
        .iter()
        .map(|d| {
            let ([a, c, x], [sa, sc, sx]) = (d.formulas, d.simulator);
            format!("{}: formulas {a}/{c}/{x} simulator {sa}/{sc}/{sx} (accesses/compulsory/conflict)", d.reference)
        })
        .collect())
}

fn eval_sets(a: &EvalArgs, text: &str) -> Result<()> {
    let f: kansoku_cache::sets::SetFormulas = serde_json::from_str(text).with_context(|| format!("{} is not a set-method formulas file", a.formulas.display()))?;
    let p = params(&a.param)?;
    let t = Instant::now();
    // A hierarchy's file holds every level (the first in `above`).
    let levels = f.levels();
    let evaluations = f.eval_levels(&p).with_context(|| format!("evaluating {}", a.formulas.display()))?;
    let micros = t.elapsed().as_secs_f64() * 1e6;
    let verified = match &a.verify {
        None => None,
        Some(path) => {
            let k = verify_kernel(path, &f.kernel)?.with_fixed_extents(&f.extents).map_err(anyhow::Error::msg)?;
            let found = kansoku_cache::check::disagreements(&k, &f, std::slice::from_ref(&p))?;
            Some(found.iter().map(|d| d.to_string()).collect::<Vec<_>>())
        }
    };
    if a.json {
        #[derive(Serialize)]
        struct Level<'a> {
            cache: CacheConfig,
            evaluation: &'a [kansoku_cache::sets::RefSetEvaluation],
        }
        #[derive(Serialize)]
        struct Out<'a> {
            evaluation: &'a [kansoku_cache::sets::RefSetEvaluation],
            /// Every level, the first first, for a hierarchy's formulas.
            #[serde(skip_serializing_if = "Vec::is_empty")]
            levels: Vec<Level<'a>>,
            microseconds: f64,
            #[serde(skip_serializing_if = "Option::is_none")]
            verify_mismatches: Option<Vec<String>>,
        }
        let all: Vec<Level> = if levels.len() > 1 { levels.iter().zip(&evaluations).map(|(l, e)| Level { cache: l.cache, evaluation: e }).collect() } else { Vec::new() };
        let own = evaluations.last().expect("at least one level");
        crate::output::print_json(&Out { evaluation: own, levels: all, microseconds: micros, verify_mismatches: verified.clone() })?;
    } else {
        for (i, (l, e)) in levels.iter().zip(&evaluations).enumerate() {
            let label = if levels.len() > 1 { format!("{} (L{}, cache {})", a.param, i + 1, l.cache) } else { a.param.clone() };
            print_set_eval(e, &label);
        }
        println!("  evaluated in {micros:.1} µs");
        if verified.as_ref().is_some_and(|m| m.is_empty()) {
            println!("  verified: the simulator gives the same counts for every reference{}", if levels.len() > 1 { " at every level (non-inclusive hierarchy)" } else { "" });
        }
    }
    if let Some(m) = verified {
        if !m.is_empty() {
            bail!("the formulas disagree with the simulator at {}:\n  {}", a.param, m.join("\n  "));
        }
    }
    Ok(())
}

/// The seed's worked example as a demo stage: writes `seed.k`, `seed-formulas.json` and
/// `seed-simulation.json` into `dir` and returns a short summary.
pub fn demo_stage(dir: &Path) -> Result<String> {
    use kansoku_cache::seed_example as ex;
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let kpath = dir.join("seed.k");
    std::fs::write(&kpath, ex::KERNEL).with_context(|| format!("cannot write {}", kpath.display()))?;
    let k = kansoku_cache::parse_kernel(&kpath.display().to_string(), ex::KERNEL)?;
    let layout = LayoutSpec::parse_bases(ex::BASES)?;
    let cache = CacheConfig::parse(ex::CACHE)?;
    let family = Family::all_varying(&k);
    let f = build_model(&k, &ModelOptions::new(family.clone(), layout.clone(), vec![cache]))?.pop().unwrap();
    std::fs::write(dir.join("seed-formulas.json"), serde_json::to_string_pretty(&f)?)?;
    let p = parse_params("X=10,Y=10,Z=10")?;
    let rep = sim_report(&k, &p, &layout, &[cache], Inclusion::Inclusive, SimLimit { max_accesses: u64::MAX }, None)?;
    std::fs::write(dir.join("seed-simulation.json"), serde_json::to_string_pretty(&rep)?)?;
    let r = find_ref(&k, ex::REFERENCE)?;
    let ev = f.eval(&p)?;
    let (m, s) = (&ev.refs[r], &rep.refs[r]);
    if (m.compulsory, m.conflict) != (s.compulsory as i128, s.other as i128) {
        bail!("seed example: formulas give {}+{} misses but the simulator {}+{}", m.compulsory, m.conflict, s.compulsory, s.other);
    }
    // Agreement at 50 sizes spread over 1..=200.
    let mut agree = 0;
    for i in 0..50 {
        let n = 1 + (i * 37 + 11) % 200;
        let pn = family.params_at(n);
        let sim = Program::new(&k, &pn, &layout)?.simulate(&[cache]).pop().unwrap();
        let e = f.eval(&pn)?;
        if e.refs.iter().zip(&sim).all(|(a, b)| (a.compulsory, a.conflict) == (b.compulsory as i128, b.other as i128)) {
            agree += 1;
        }
    }
    // The seed's set-based method: formulas in X, Y, Z independently.
    let sf = kansoku_cache::sets::build_set_model(&k, &kansoku_cache::sets::SetModelOptions::new(layout.clone(), cache))?;
    std::fs::write(dir.join("seed-set-formulas.json"), serde_json::to_string_pretty(&sf)?)?;
    let se = sf.eval(&p)?;
    let mut set_agree = 0;
    for i in 0..50i64 {
        let pt: ParamValues = [("X", 1 + (i * 37 + 11) % 200), ("Y", 1 + (i * 53 + 7) % 200), ("Z", 1 + (i * 91 + 3) % 200)].into_iter().map(|(n, v)| (n.to_string(), v)).collect();
        let sim = Program::new(&k, &pt, &layout)?.simulate(&[cache]).pop().unwrap();
        let e = sf.eval(&pt)?;
        if e.iter().zip(&sim).all(|(a, b)| (a.compulsory, a.conflict) == (b.compulsory as i64, b.other as i64)) {
            set_agree += 1;
        }
    }
    Ok(format!(
        "cache (seed 004): A[k] at X=Y=Z=10 with {}: formulas {} compulsory + {} conflict miss, simulator {} + {}\n\
         formulas (built in {:.2} s) agree with the simulator for every reference at {agree}/50 sizes X=Y=Z in 1..200 -> {}\n\
         set method (formulas in X, Y, Z; built in {:.2} s): A[k] {} + {}, agree at {set_agree}/50 points (X, Y, Z independent) -> {}",
        ex::CACHE,
        m.compulsory,
        m.conflict,
        s.compulsory,
        s.other,
        f.build_seconds,
        dir.join("seed-formulas.json").display(),
        sf.build_seconds,
        se[r].compulsory,
        se[r].conflict,
        dir.join("seed-set-formulas.json").display()
    ))
}

#[cfg(test)]
mod tests {
    #[test]
    fn demo_stage_runs_the_seed_example() {
        let dir = std::env::temp_dir().join(format!("kansoku-cache-demo-{}", std::process::id()));
        let summary = super::demo_stage(&dir).unwrap();
        assert!(summary.contains("formulas 0 compulsory + 1 conflict miss, simulator 0 + 1"), "{summary}");
        assert!(summary.contains("50/50 sizes"), "{summary}");
        assert!(summary.contains("A[k] 0 + 1, agree at 50/50 points"), "{summary}");
        assert!(summary.lines().count() <= 3);
        for f in ["seed.k", "seed-formulas.json", "seed-simulation.json"] {
            assert!(dir.join(f).is_file(), "{f} written");
        }
        let f: kansoku_cache::model::KernelFormulas = serde_json::from_str(&std::fs::read_to_string(dir.join("seed-formulas.json")).unwrap()).unwrap();
        assert_eq!(f.refs.len(), 4);
        std::fs::remove_dir_all(&dir).ok();
    }
}
