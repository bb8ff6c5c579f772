//! The seed's set-based method (paragraphs 0013–0153), made exact.
//!
//! Every access is a point of one *time* space `Ti[c0, v0, c1, v1, …, c_d, pos]` (a 2d+1
//! schedule: constant positions in the loop tree interleaved with loop variables, plus the
//! reference's place in its statement), so program order is lexicographic order. The
//! *line* of an access is `Li[floor(address / B)]`, affine in loop variables and
//! parameters with one floor. With isl (crate `kansoku-isl`), per reference R:
//!
//! * **hit condition** `{ t -> t' : t' ≺ t, line(t') = line(t) }` (earlier accesses of the
//!   same line, by any reference — also other arrays sharing the line);
//! * **hit source** = its parametric lexicographic maximum (PIP): the last earlier access;
//! * **compulsory misses** = accesses of R without a hit source;
//! * **conflict-miss factors**: per reference r, the lines r touches strictly between the
//!   hit source and the access that fall into the same cache set;
//! * **distinct-line sets** `E_k` (our exact replacement of the seed's split and common
//!   sets): accesses with at least k *distinct* such lines, built as
//!   `E_1 = lines`, `E_k = { t -> l ∈ lines(t) : ∃ l' ∈ E_{k-1}(t), l' < l }` — one range
//!   dimension at every step, so A steps instead of an A-fold product (optionally each
//!   `E_k` but the last given explicit divisions, `stepwise_divisions`); once `E_{k-1}` is
//!   large (`lexmin_chain_above`) the same set can be built as `{ l ∈ lines(t) : l > lexmin E_{k-1}(t) }` (lexmin
//!   chain, no existentials accumulate: the 2-D stencils with 4 and 8 ways, mvt 8-way);
//!   once one chain over all lines is large (`split_by_array_above`), each group of arrays
//!   whose lines never meet gets its own chain and the counts are added (gemm 8-way);
//!   no construction is the fastest everywhere, so several can be raced (`race`);
//! * **conflict misses** = domain of `E_A`: an A-way LRU evicts the line exactly when A
//!   distinct other lines of its set were used since its last use.
//!
//! Each counted set is coalesced, given explicit divisions, made disjoint and lifted
//! (divisions become variables with their two defining constraints, so each point has
//! exactly one lifted image); our counter (crate `kansoku-ehrhart`) counts each lifted
//! polytope parametrically. The result is a [`PwQp`]: a sum of piecewise quasi-polynomials
//! in all the kernel's parameters.
//!
//! **Limits.** Addresses must be affine: array extents (and so the layout) must not depend
//! on parameters; `ModelOptions::extents` fixes them. isl work is bounded
//! (`max_operations`); past it the build fails with a message naming the reference.

use crate::affine::Affine;
use crate::config::{resolve_layout, CacheConfig, LayoutSpec, ParamValues};
use crate::error::{BudgetStop, CacheError, Result};
use crate::kernel::{Kernel, Node};
use kansoku_ehrhart::qpoly::{Constraint, Domain, PwQp};
use kansoku_isl::{Ctx, Map, Set};
use serde::{Deserialize, Serialize};
use std::time::Instant;

/// JSON format tag of [`SetFormulas`].
pub const FORMAT: &str = "kansoku-cache-set-formulas/1";

/// Default of [`SetModelOptions::split_by_array_above`] (characters of isl text).
pub(crate) const SPLIT_BY_ARRAY_ABOVE: usize = 10_000;

/// Options of [`build_set_model`].
#[derive(Clone, Debug)]
pub struct SetModelOptions {
    /// Where the arrays are placed in memory; fixes each access's byte address and so its line and set.
    pub layout: LayoutSpec,
    /// The cache modelled: associativity A, line size B (bytes) and number of sets S.
    pub cache: CacheConfig,
    /// Values for parameters that appear in array extents (the arrays' declared capacity);
    /// loop bounds keep them symbolic. Empty when extents are constants.
    pub extents: ParamValues,
    /// Smallest value of every parameter the formulas are derived for.
    pub param_min: i64,
    /// Largest values of parameters the formulas are derived for. Parameters in `extents`
    /// default to their extent (indices stay inside the arrays; beyond, arrays would
    /// overlap and the sets — and formulas — grow much more complex).
    pub param_max: ParamValues,
    /// Derive the formulas for these parameter values only (a concrete query, e.g. a
    /// PolyBench size preset): the context fixes every listed parameter, so isl's
    /// operations meet no parametric pieces. The formulas hold at that point alone.
    pub at: ParamValues,
    /// Keep the intermediate sets as isl text (`--explain`).
    pub explain: bool,
    /// isl operation budget per reference (0 = unbounded).
    pub max_operations: u64,
    /// Only these references (all when empty).
    pub refs: Vec<usize>,
    /// Give up (an error naming the reference) when the whole build takes longer.
    pub time_budget: Option<std::time::Duration>,
    /// Build `E_k` as a lexmin chain once `E_{k-1}` exceeds this many characters of isl
    /// text (`None`: always the existential form). Same sets; much smaller for the 2-D
    /// stencils with 4 and 8 ways and mvt 8-way, but not verified faster everywhere.
    pub lexmin_chain_above: Option<usize>,
    /// Give every `E_k` that is extended further explicit divisions at once, so that the
    /// existentials of the default construction do not nest. Much faster for some
    /// references (doitgen 8-way's P3 at extents 16: 101 s → 12.5 s), much slower for
    /// others (gemm 4-way at extents 20: 12.7 s → over 120 s), so off by default here;
    /// the CLI turns it on and races divisions at the count beside it (`race`).
    pub stepwise_divisions: bool,
    /// Count the distinct lines per array (arrays whose lines never meet) once one chain
    /// over all lines exceeds this many characters of isl text (`None`: never). Same
    /// counts; gemm 8-way's `B[k][j]` with extents 20 builds in 75 s instead of > 10 min,
    /// but small chains are cheaper to count whole (bicg 2-way: the per-array parts
    /// exceeded the counter's budget). Ignored when `lexmin_chain_above` is set.
    pub split_by_array_above: Option<usize>,
    /// Build the distinct-line sets separately for the accesses of each hit-source
    /// reference and add the counts (each access has one hit source, so the parts are
    /// disjoint). A reference reused from a few others mixes short windows (a line reused
    /// in the next iteration) with windows across whole loop nests, and one chain over
    /// both can grow with the product: heat-3d 8-way's P0 (extents 16, lexmin chain) had
    /// not reached E_7 after 200 s, each step taking twice the last; per source it builds
    /// in 122 s; heat-3d 4-way 218 → 105 s in all; adi 4-way 52 → 44 s, correlation 4-way
    /// 26 → 11 s. But correlation 8-way went 63 → 114 s (each without the race, on GMP's
    /// isl). Off here, so that the tests pin a construction; on in the CLI (`--one-chain`
    /// turns it off), where with the race and imath-32 isl the gains are larger than the
    /// losses (docs/BENCHMARKS.md, seed 004).
    pub split_by_source: bool,
    /// Before the chain over all lines in an access's window, find the accesses one
    /// reference alone gives `assoc` distinct lines of their set, reference by reference
    /// (`sure_misses_by_reference`); the chain then runs on the rest. Same counts. Long
    /// windows hold many references' lines, and the chain over all of them is the slow
    /// step: heat-3d 8-way's P0 with the lexmin chain 56 → 21 s, P11 to 17 s. But with it
    /// in every construction of the race, adi 8-way built 28 of its 34 references in 120 s
    /// (all in 81 s without), so off here; the lexmin chain's alternative in the race turns
    /// it on, and so does the CLI's `--lexmin-chain`.
    pub sure_misses_first: bool,
    /// Other constructions of the same sets raced beside the one these options name, in
    /// this order (empty: none; an alternative the options already use is skipped).
    /// None is faster everywhere: divisions at the count win on gemm 4-way, the lexmin
    /// chain on the 2-D stencils, mvt and doitgen 8-way, stepwise divisions on 2mm, syr2k
    /// and symm 8-way, trmm and lu 4-way. A free thread builds the undecided reference
    /// that started first with its next alternative, and so does one more thread per
    /// alternative beyond the first once that reference has run a while (`Race`); the
    /// first attempt to succeed is kept, the others cancelled (every attempt keeps to the
    /// one budget, `time_budget` from the start of the build); a reference whose
    /// construction ran out of the budget with alternatives untried gets them next.
    pub race: Vec<Alternative>,
    /// References built at once, each on its own thread with its own isl context (they
    /// are independent); 0: one per available core.
    pub jobs: usize,
    /// Per reference (all of them, in order), the accesses that reach this cache, as an
    /// isl set of the access times (`Ti[…]`, in the kernel's parameters): the misses of
    /// the level above in a non-inclusive hierarchy (`build_hierarchy_model`). Empty:
    /// every access reaches it.
    pub reaching: Vec<String>,
    /// Keep each reference's misses (compulsory and conflict) as isl text
    /// (`RefSetFormulas::misses`), for the level below.
    pub keep_misses: bool,
}

/// A construction raced beside the one `SetModelOptions` names (`SetModelOptions::race`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Alternative {
    /// The lexmin chain once `E_{k-1}` exceeds this many characters (`lexmin_chain_above`).
    LexminChain(usize),
    /// Explicit divisions at every step (`stepwise_divisions` on).
    StepwiseDivisions,
    /// Divisions left to isl until the count (`stepwise_divisions` off).
    DivisionsAtCount,
}

impl Alternative {
    /// The options with this construction, `None` when they already use it.
    pub(crate) fn options(self, opts: &SetModelOptions) -> Option<SetModelOptions> {
        match self {
            Alternative::LexminChain(chars) if opts.lexmin_chain_above.is_none() => Some(SetModelOptions { lexmin_chain_above: Some(chars), sure_misses_first: true, ..opts.clone() }),
            Alternative::StepwiseDivisions if !opts.stepwise_divisions => Some(SetModelOptions { stepwise_divisions: true, ..opts.clone() }),
            Alternative::DivisionsAtCount if opts.stepwise_divisions => Some(SetModelOptions { stepwise_divisions: false, ..opts.clone() }),
            _ => None,
        }
    }
}

impl SetModelOptions {
    /// Options with every tuning knob at its default: all references, parameters from 1 up,
    /// no extents, no budget, no race, no explanation.
    pub fn new(layout: LayoutSpec, cache: CacheConfig) -> Self {
        SetModelOptions { layout, cache, extents: ParamValues::new(), param_min: 1, param_max: ParamValues::new(), at: ParamValues::new(), explain: false, max_operations: 0, refs: Vec::new(), time_budget: None, lexmin_chain_above: None, stepwise_divisions: false, split_by_array_above: Some(SPLIT_BY_ARRAY_ABOVE), split_by_source: false, sure_misses_first: false, race: Vec::new(), jobs: 0, reaching: Vec::new(), keep_misses: false }
    }
}

/// The intermediate sets of one reference, in isl syntax.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Explanation {
    /// The reference's accesses: time points mapped to the cache line they touch (`Ti[...] -> Li[...]`).
    pub access: String,
    /// Each access mapped to every earlier access of the same line (by any reference).
    pub hit_condition: String,
    /// Each access mapped to its last earlier access of the same line (lexicographic maximum of the hit condition).
    pub hit_source: String,
    /// The accesses with no earlier access of their line: the compulsory misses.
    pub compulsory_set: String,
    /// Per intervening reference: the lines it inserts into the set between hit source
    /// and access (the seed's conflict-miss factors).
    pub conflict_factors: Vec<(String, String)>,
    /// `E_k`, k = 1..=A: accesses with ≥ k distinct lines of their set in between.
    pub distinct_lines: Vec<String>,
    /// The accesses with at least A distinct other lines of their set since the hit source: the conflict misses (domain of `E_A`).
    pub conflict_set: String,
    /// Counts of each lifted disjoint piece, for checking by hand.
    pub counted_pieces: usize,
    /// The conflict misses as the seed's split and common sets count them (a miss unless
    /// the per-factor line counts sum to less than A): a line inserted by two factors
    /// counts twice there. `None` when there are too many combinations (> 256).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seed_conflict: Option<PwQp>,
}

/// The formulas of one reference.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct RefSetFormulas {
    /// The reference's seed position name, `P0`, `P1`, ...
    pub reference: String,
    /// Label of the statement containing it.
    pub statement: String,
    /// `left` (the write) or `right` (a read).
    pub side: String,
    /// 1-based position among the references of that side, left to right.
    pub position: usize,
    /// The reference as text, e.g. `A[i][k]` (subscripts printed in affine normal form).
    pub text: String,
    /// The seed's first count.
    pub accesses: PwQp,
    /// First − second count.
    pub compulsory: PwQp,
    /// Third − fourth count.
    pub conflict: PwQp,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    /// The intermediate sets behind the counts, when [`SetModelOptions::explain`] asked for them.
    pub explain: Option<Explanation>,
    /// Wall-clock seconds spent building this reference's formulas.
    pub build_seconds: f64,
    /// Built with the lexmin chain raced beside the options' construction (or after it ran
    /// out of the budget).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub lexmin_chain: bool,
    /// Built with the other choice of divisions (`stepwise_divisions` on when the options
    /// have it off, and the other way round) raced beside the options' construction.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub other_divisions: bool,
    /// Pieces of its counts that are tables of the sizes' box, counted point by point
    /// where the summation did not finish: exact there, but not formulas.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub tabulated_pieces: usize,
    /// Pieces of its conflict misses that one reference's lines alone made sure of
    /// (`SetModelOptions::sure_misses_first`); 0: none, or not tried.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub sure_pieces: usize,
    /// The accesses that miss, as isl text (`SetModelOptions::keep_misses`; not written).
    #[serde(skip)]
    pub misses: Option<String>,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

impl RefSetFormulas {
    /// Marks which of the race's other constructions built it (`None`: the options' own).
    pub(crate) fn built_by(self, by: Option<Alternative>) -> Self {
        let lexmin_chain = matches!(by, Some(Alternative::LexminChain(_)));
        let other_divisions = matches!(by, Some(Alternative::StepwiseDivisions | Alternative::DivisionsAtCount));
        RefSetFormulas { lexmin_chain, other_divisions, ..self }
    }
}

/// All formulas of a kernel for one cache and layout (JSON `kansoku-cache-set-formulas/1`).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct SetFormulas {
    /// JSON format tag, always [`FORMAT`]; checked when formulas are read back.
    pub format: String,
    /// Name of the kernel's source file.
    pub kernel: String,
    /// The cache the formulas count misses of.
    pub cache: CacheConfig,
    /// The array placement the formulas assume.
    pub layout: LayoutSpec,
    /// The extent values the formulas were built with ([`SetModelOptions::extents`]); the layout holds for these only.
    pub extents: ParamValues,
    /// The kernel's parameters, in declaration order: the variables of every formula.
    pub params: Vec<String>,
    /// Conditions on the parameters the formulas hold for.
    pub context: Domain,
    /// One entry per built reference, in reference order.
    pub refs: Vec<RefSetFormulas>,
    /// Wall-clock seconds for the whole build, all references included.
    pub build_seconds: f64,
    /// Parameter points where every reference was found equal to a fresh simulation
    /// (`check::check_points`; empty: not checked).
    #[serde(default)]
    pub checked_at: Vec<ParamValues>,
    /// The level above this one in a non-inclusive hierarchy, whose misses are the
    /// accesses these formulas count (`build_hierarchy_model`); `None`: a cache alone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub above: Option<Box<SetFormulas>>,
    /// The cache's state at the kernel's start the formulas assume: always cold (a warm
    /// start is simulated).
    #[serde(default)]
    pub start: crate::sim::Start,
}

/// Counts of one reference at a parameter point.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct RefSetEvaluation {
    /// The reference's seed position name, `P0`, `P1`, ...
    pub reference: String,
    /// Number of times the reference is executed (the seed's first count).
    pub accesses: i64,
    /// How many of those accesses are compulsory misses (first use of their line).
    pub compulsory: i64,
    /// How many are conflict misses (line evicted by A distinct lines of its set since its last use).
    pub conflict: i64,
    /// The remaining accesses, which hit: `accesses − compulsory − conflict`.
    pub hits: i64,
}

impl SetFormulas {
    /// Evaluates every reference's formulas; refuses parameters outside the context.
    pub fn eval(&self, values: &ParamValues) -> Result<Vec<RefSetEvaluation>> {
        let p = self.point(values)?;
        self.refs
            .iter()
            .map(|r| {
                let e = |what: &str, q: &PwQp| {
                    // The formulas may come from a file: check before trusting them.
                    q.validate().map_err(|e| CacheError::Formulas(format!("{}.{what}: {e}", r.reference)))?;
                    q.eval(&p).map_err(|e| CacheError::Params(format!("{}: {e}", r.reference)))
                };
                let (a, c, x) = (e("accesses", &r.accesses)?, e("compulsory", &r.compulsory)?, e("conflict", &r.conflict)?);
                let hits = a.checked_sub(c).and_then(|h| h.checked_sub(x)).ok_or_else(|| CacheError::Formulas(format!("{}: counts out of range", r.reference)))?;
                Ok(RefSetEvaluation { reference: r.reference.clone(), accesses: a, compulsory: c, conflict: x, hits })
            })
            .collect()
    }

    /// The levels of a hierarchy's formulas, the first level first (this one alone for a
    /// cache alone).
    pub fn levels(&self) -> Vec<&SetFormulas> {
        let mut out = match &self.above {
            Some(above) => above.levels(),
            None => Vec::new(),
        };
        out.push(self);
        out
    }

    /// [`SetFormulas::eval`] at every level, the first level first.
    pub(crate) fn eval_levels(&self, values: &ParamValues) -> Result<Vec<Vec<RefSetEvaluation>>> {
        self.levels().iter().map(|l| l.eval(values)).collect()
    }

    fn point(&self, values: &ParamValues) -> Result<Vec<i64>> {
        for name in values.keys() {
            if !self.params.contains(name) {
                return Err(CacheError::Params(format!("'{name}' is not a parameter of these formulas (parameters: {})", self.params.join(", "))));
            }
        }
        let p: Vec<i64> = self
            .params
            .iter()
            .map(|n| values.get(n).copied().ok_or_else(|| CacheError::Params(format!("no value for parameter '{n}' (give --param {n}=N)"))))
            .collect::<Result<_>>()?;
        if !self.context.contains(&p) {
            return Err(CacheError::Params(format!(
                "{} is outside the range these formulas were derived for ({})",
                self.params.iter().zip(&p).map(|(n, v)| format!("{n}={v}")).collect::<Vec<_>>().join(","),
                self.context.show(&self.params)
            )));
        }
        Ok(p)
    }
}

/// Names used inside isl text: tuple names and loop variables get prefixes so that they
/// cannot collide with parameter names.
const TIME: &str = "Ti";
const LINE: &str = "Li";

fn loop_var(name: &str) -> String {
    format!("v_{name}")
}

/// An affine expression in isl syntax: parameters by name, loop variables prefixed.
fn isl_affine(a: &Affine, params: &[String]) -> String {
    let mut s = a.constant.to_string();
    for (v, c) in &a.coeffs {
        let name = if params.contains(v) { v.clone() } else { loop_var(v) };
        s += &if *c < 0 { format!(" - {}*{name}", -c) } else { format!(" + {c}*{name}") };
    }
    s
}

/// Position of one access in the common time space, and its domain constraints.
struct AccessSpace {
    /// Tuple elements (constants or loop variables), padded to the common dimension.
    tuple: Vec<String>,
    constraints: Vec<String>,
}

/// The 2d+1 schedule: per reference its time tuple and iteration-domain constraints.
fn schedule(k: &Kernel) -> Vec<AccessSpace> {
    let depth = k.max_depth();
    let dim = 2 * depth + 2;
    let mut out: Vec<Option<AccessSpace>> = (0..k.refs.len()).map(|_| None).collect();
    fn walk(k: &Kernel, nodes: &[Node], prefix: &mut Vec<String>, cons: &mut Vec<String>, dim: usize, out: &mut Vec<Option<AccessSpace>>) {
        for (ci, n) in nodes.iter().enumerate() {
            match n {
                Node::Loop { id, body } => {
                    let l = &k.loops[*id];
                    let v = loop_var(&l.var);
                    let lo = isl_affine(&l.lower, &k.params);
                    let hi = isl_affine(&l.upper, &k.params);
                    prefix.push(ci.to_string());
                    prefix.push(v.clone());
                    cons.push(format!("{lo} <= {v} < {hi}"));
                    if l.step > 1 {
                        cons.push(format!("({v} - ({lo})) mod {} = 0", l.step));
                    }
                    walk(k, body, prefix, cons, dim, out);
                    prefix.truncate(prefix.len() - 2);
                    cons.pop();
                    if l.step > 1 {
                        cons.pop();
                    }
                }
                Node::Stmt(s) => {
                    for (pos, &r) in k.statements[*s].refs.iter().enumerate() {
                        let mut tuple = prefix.clone();
                        tuple.push(ci.to_string());
                        while tuple.len() < dim - 1 {
                            tuple.push("0".into());
                        }
                        tuple.push(pos.to_string());
                        // The enclosing ifs restrict the domain (each guard `g >= 0`).
                        let mut constraints = cons.clone();
                        constraints.extend(k.statements[*s].guards.iter().map(|g| format!("{} >= 0", isl_affine(g, &k.params))));
                        out[r] = Some(AccessSpace { tuple, constraints });
                    }
                }
            }
        }
    }
    walk(k, &k.body, &mut Vec::new(), &mut Vec::new(), dim, &mut out);
    out.into_iter().map(|a| a.expect("every reference is in the loop tree")).collect()
}

/// Byte address of a reference as an affine expression (extents must be constant).
fn address(k: &Kernel, r: usize, starts: &[u64], extents: &ParamValues) -> Result<Affine> {
    let rf = &k.refs[r];
    let a = &k.arrays[rf.array];
    let dims: Vec<i64> = a
        .dims
        .iter()
        .map(|d| {
            d.eval(&|n| extents.get(n).copied()).ok_or_else(|| {
                CacheError::Model(format!(
                    "array '{}' has extent {d}, which depends on a parameter: the set method needs constant extents \
                     (give --extent {}=VALUE for the arrays' capacity, or use --method interpolate)",
                    a.name,
                    d.vars().collect::<Vec<_>>().join(",")
                ))
            })
        })
        .collect::<Result<_>>()?;
    let mut lin = Affine::constant(0);
    for (i, s) in rf.subscripts.iter().enumerate() {
        let stride: i64 = dims[i + 1..].iter().product();
        lin = lin.add(&s.scale(stride));
    }
    Ok(lin.scale(a.elem_size as i64).add(&Affine::constant(starts[rf.array] as i64)))
}

struct Builder<'c> {
    ctx: &'c Ctx,
    params: String,
    dim: usize,
}

impl<'c> Builder<'c> {
    fn map(&self, body: &str) -> Result<Map<'c>> {
        let text = format!("{} -> {{ {body} }}", self.params);
        self.ctx.map(&text).map_err(|e| CacheError::Model(format!("{e} (in {text})")))
    }
    fn vars(&self, prefix: &str) -> Vec<String> {
        (0..self.dim).map(|i| format!("{prefix}{i}")).collect()
    }
    /// `{ Ti[a] -> Ti[b] : b ≺ a }`: the second access is earlier.
    fn earlier(&self) -> Result<Map<'c>> {
        let (a, b) = (self.vars("a"), self.vars("b"));
        let mut ors = Vec::new();
        for i in 0..self.dim {
            let mut c: Vec<String> = (0..i).map(|j| format!("{} = {}", b[j], a[j])).collect();
            c.push(format!("{} < {}", b[i], a[i]));
            ors.push(format!("({})", c.join(" and ")));
        }
        self.map(&format!("{TIME}[{}] -> {TIME}[{}] : {}", a.join(","), b.join(","), ors.join(" or ")))
    }
}

/// `KANSOKU_SET_TRACE=1`: one line per step on stderr (reference, step, seconds, size in
/// isl characters) — where the build time goes.
fn trace(reference: &str, step: &str, since: Instant, size: impl FnOnce() -> usize) {
    if std::env::var_os("KANSOKU_SET_TRACE").is_some() {
        eprintln!("{reference}: {step}: {:.3}s {} chars", since.elapsed().as_secs_f64(), size());
    }
}

fn m<T>(r: kansoku_isl::Result<T>, what: &str, reference: &str) -> Result<T> {
    // Out of its operation budget (`SetModelOptions::max_operations`) isl says "maximal
    // number of operations exceeded"; anything else is isl's own failure, which no larger
    // budget mends.
    r.map_err(|e| {
        if e.msg.contains("operations exceeded") {
            CacheError::OutOfOperations(format!("{reference}: {what}: {e} (the sets grew beyond the isl budget)"))
        } else {
            CacheError::Model(format!("{reference}: {what}: {e} (an error inside isl)"))
        }
    })
}

/// Builds the formulas of every (selected) reference.
pub fn build_set_model(k: &Kernel, opts: &SetModelOptions) -> Result<SetFormulas> {
    let t0 = Instant::now();
    opts.cache.validate().map_err(|e| CacheError::CacheConfig { spec: format!("{:?}", opts.cache), msg: e.to_string() })?;
    for p in &k.params {
        if p == TIME || p == LINE || p.starts_with("v_") {
            return Err(CacheError::Model(format!("parameter name '{p}' is reserved by the set method; rename it")));
        }
    }
    let data = resolve_layout(k, &opts.layout, &opts.extents_with_defaults(k))?;
    let starts: Vec<u64> = data.iter().map(|d| d.start).collect();
    let sched = schedule(k);
    let mut param_max = opts.param_max.clone();
    for (p, v) in &opts.extents {
        param_max.entry(p.clone()).or_insert(*v);
    }
    let np = k.params.len();
    let unit = |i: usize, sign: i64| (0..np).map(|j| if i == j { sign } else { 0 }).collect::<Vec<i64>>();
    let mut context = Domain { constraints: (0..np).map(|i| Constraint { equality: false, coeffs: unit(i, 1), constant: -opts.param_min }).collect() };
    let mut context_text: Vec<String> = k.params.iter().map(|p| format!("{p} >= {}", opts.param_min)).collect();
    for (i, p) in k.params.iter().enumerate() {
        if let Some(max) = param_max.get(p) {
            context.constraints.push(Constraint { equality: false, coeffs: unit(i, -1), constant: *max });
            context_text.push(format!("{p} <= {max}"));
        }
        if let Some(v) = opts.at.get(p) {
            context.constraints.push(Constraint { equality: true, coeffs: unit(i, -1), constant: *v });
            context_text.push(format!("{p} = {v}"));
        }
    }
    let mut access_text = Vec::new();
    for (r, sp) in sched.iter().enumerate() {
        let addr = isl_affine(&address(k, r, &starts, &opts.extents)?, &k.params);
        let cons: Vec<String> = sp.constraints.iter().chain(&context_text).cloned().collect();
        access_text.push(format!("{TIME}[{}] -> {LINE}[floor(({addr})/{})] : {}", sp.tuple.join(","), opts.cache.line, cons.join(" and ")));
    }
    let deadline = opts.time_budget.map(|b| t0 + b);
    if !opts.reaching.is_empty() {
        access_text = reaching_accesses(k, &access_text, &opts.reaching, deadline)?;
    }
    let selected: Vec<usize> = if opts.refs.is_empty() { (0..k.refs.len()).collect() } else { opts.refs.clone() };
    // The alternatives keep to the same budget: `--budget S` bounds the whole build (it
    // gave them until twice the budget, so a build that did not get there ended at 2 S:
    // bench/polybench-budget.sh).
    let alternatives: Vec<(Alternative, SetModelOptions)> = opts.race.iter().filter_map(|a| Some((*a, a.options(opts)?))).collect();
    let built = build_references(k, &selected, &access_text, opts, &context, deadline, &alternatives);
    let done = built.iter().filter(|b| b.result.is_ok()).count();
    let total = selected.len();
    let mut refs = Vec::new();
    for (r, Built { result, seconds, by }) in selected.into_iter().zip(built) {
        let by = by.map(|a| alternatives[a].0);
        // Say how far the build got.
        let RefCounts { accesses, compulsory, conflict, explain, misses, tabulated, sure_pieces } = result.map_err(|e| {
            if done == 0 {
                return e;
            }
            e.map_model_message(|m| format!("{m}; {done} of {total} references were built, in {:.1} s", t0.elapsed().as_secs_f64()))
        })?;
        let rf = &k.refs[r];
        refs.push(RefSetFormulas {
            reference: format!("P{r}"),
            statement: k.statements[rf.stmt].label.clone(),
            side: rf.side.as_str().into(),
            position: rf.position,
            text: k.ref_text(rf),
            accesses,
            compulsory,
            conflict,
            explain,
            build_seconds: seconds,
            lexmin_chain: false,
            other_divisions: false,
            tabulated_pieces: tabulated,
            sure_pieces,
            misses,
        }
        .built_by(by));
    }
    Ok(SetFormulas {
        format: FORMAT.into(),
        kernel: k.file.clone(),
        cache: opts.cache,
        layout: opts.layout.clone(),
        extents: opts.extents.clone(),
        params: k.params.clone(),
        context,
        refs,
        build_seconds: t0.elapsed().as_secs_f64(),
        checked_at: Vec::new(),
        above: None,
        start: crate::sim::Start::Cold,
    })
}

/// Formulas for the lower levels of a non-inclusive (NINE) hierarchy: the first level
/// (the options' cache) is built first, keeping each reference's misses as a set; the
/// next level (`lower[0]`) then sees exactly those accesses, in their order, and its LRU
/// state is that of a cache alone on that stream (a NINE level's evictions leave the
/// levels above alone, see `sim::Inclusion`); and so on down. So the set method applies
/// unchanged to the accesses that reach each level, and every level's counts are as
/// exact as L1's. The result is the last level's formulas, the one above it in `above`,
/// and so on up. An inclusive level is not modelled: its evictions change the misses of
/// the levels above, which change what reaches it.
pub fn build_hierarchy_model(k: &Kernel, opts: &SetModelOptions, lower: &[CacheConfig]) -> Result<SetFormulas> {
    if let Some(c) = lower.iter().find(|c| c.line != opts.cache.line) {
        return Err(CacheError::CacheConfig { spec: format!("{c:?}"), msg: format!("every level needs the first level's line size ({} B)", opts.cache.line) });
    }
    let levels: Vec<CacheConfig> = std::iter::once(opts.cache).chain(lower.iter().copied()).collect();
    // With a level below, every reference is needed: that level sees all their misses.
    let refs = if lower.is_empty() { opts.refs.clone() } else { Vec::new() };
    let mut above: Option<SetFormulas> = None;
    let mut reaching = Vec::new();
    for (i, &cache) in levels.iter().enumerate() {
        let last = i + 1 == levels.len();
        let level_opts = SetModelOptions { cache, reaching: std::mem::take(&mut reaching), keep_misses: !last, refs: refs.clone(), ..opts.clone() };
        // Which level did not get there, when one did not.
        let mut f = build_set_model(k, &level_opts).map_err(|e| e.map_model_message(|m| format!("L{}: {m}", i + 1)))?;
        if !last {
            reaching = f.refs.iter_mut().map(|r| r.misses.take().expect("kept")).collect();
        }
        f.above = above.take().map(Box::new);
        above = Some(f);
    }
    Ok(above.expect("at least the first level"))
}

/// Each access map of `access_text` restricted to the access times in `reaching` (same
/// order), as isl text again; isl is stopped at `deadline` (the level's budget).
fn reaching_accesses(k: &Kernel, access_text: &[String], reaching: &[String], deadline: Option<Instant>) -> Result<Vec<String>> {
    if reaching.len() != access_text.len() {
        return Err(CacheError::Model(format!("{} sets of reaching accesses for {} references", reaching.len(), access_text.len())));
    }
    let ctx = Ctx::new();
    let out = ctx.with_deadline(deadline, || restrict_to_reaching(&ctx, k, access_text, reaching));
    if ctx.aborted() {
        return Err(budget_exceeded("restricting the accesses to those that reach this level", stopped(&ctx)));
    }
    out
}

fn restrict_to_reaching(ctx: &Ctx, k: &Kernel, access_text: &[String], reaching: &[String]) -> Result<Vec<String>> {
    let b = Builder { ctx, params: format!("[{}]", k.params.join(",")), dim: 2 * k.max_depth() + 2 };
    let mut out = Vec::new();
    for (r, (text, set)) in access_text.iter().zip(reaching).enumerate() {
        let name = format!("P{r}");
        let times = ctx.set(set).map_err(|e| CacheError::Model(format!("{name}: reaching accesses: {e}")))?;
        // Explicit divisions: with L1's existentials left in, isl 0.25's lexmax of L2's
        // hit condition failed an internal assertion (cholesky, P2, extents 8).
        let times = m(m(times.set_compute_divs(), "reaching accesses", &name)?.set_coalesce(), "reaching accesses", &name)?;
        let restricted = m(b.map(text)?.map_intersect_domain(times), "reaching accesses", &name)?;
        if m(restricted.map_is_empty(), "reaching accesses", &name)? {
            // No access of this reference reaches the level (isl prints no map then).
            out.push(format!("{text} and 0 = 1"));
            continue;
        }
        // The text without the parameter prefix and braces, as `Builder::map` wants it.
        let full = restricted.to_string();
        let body = full.find('{').zip(full.rfind('}')).map(|(a, z)| &full[a + 1..z]).ok_or_else(|| CacheError::Model(format!("{name}: unexpected isl text {full}")))?;
        out.push(body.trim().to_string());
    }
    Ok(out)
}

impl SetModelOptions {
    /// Parameter values for resolving the layout: the extents (others do not matter once
    /// extents are constant, but `resolve_layout` wants every parameter it meets).
    fn extents_with_defaults(&self, k: &Kernel) -> ParamValues {
        let mut v = self.extents.clone();
        for p in &k.params {
            v.entry(p.clone()).or_insert(0);
        }
        v
    }
}

/// One reference's counts as one construction built them.
#[derive(Default)]
struct RefCounts {
    accesses: PwQp,
    compulsory: PwQp,
    conflict: PwQp,
    /// The sets as text (`explain`).
    explain: Option<Explanation>,
    /// The misses as text (`keep_misses`).
    misses: Option<String>,
    /// Pieces counted point by point ([`count_piece`]): tables, not formulas.
    tabulated: usize,
    /// Conflict pieces of sure misses ([`sure_misses_by_reference`]).
    sure_pieces: usize,
}

/// One reference's result, its build time in seconds (from the start of its first
/// construction), and the alternative that built it (`None`: the options' construction,
/// or no success).
struct Built {
    result: Result<RefCounts>,
    seconds: f64,
    by: Option<usize>,
}

/// Whether a reference failed for want of time (the construction may be retried).
fn out_of_budget(e: &CacheError) -> bool {
    matches!(e, CacheError::OutOfTime { .. })
}

/// Builds the references `refs` on `opts.jobs` threads (each reference has its own isl
/// context and counter: they share nothing), in any order; results in the order of
/// `refs`. With `alternatives`, a thread that finds no reference left to start does not
/// wait: it builds the undecided reference that started first (or ran out of its budget)
/// with its next untried construction, and the first attempt to succeed is kept, the
/// others cancelled. `deadline`: every attempt's.
fn build_references(k: &Kernel, refs: &[usize], access_text: &[String], opts: &SetModelOptions, context: &Domain, deadline: Option<Instant>, alternatives: &[(Alternative, SetModelOptions)]) -> Vec<Built> {
    let jobs = if opts.jobs == 0 { std::thread::available_parallelism().map_or(1, |n| n.get()) } else { opts.jobs }.max(1);
    let race_after = opts.time_budget.map_or(RACE_AFTER, |b| (b / 4).min(RACE_AFTER));
    let race = (std::sync::Mutex::new(Race::new(refs.len(), alternatives.len(), jobs, race_after)), std::sync::Condvar::new());
    // One flag per reference and construction: a win cancels every attempt on its
    // reference, a preemption (`Race::preempts`) one.
    let cancel: Cancel = refs.iter().map(|_| (0..=alternatives.len()).map(|_| Default::default()).collect()).collect();
    let construction = |attempt: usize| attempt.checked_sub(1).map_or("first construction".into(), |a| format!("{:?}", alternatives[a].0));
    std::thread::scope(|s| {
        // With two alternatives or more, racers beyond the jobs (see `Race::next_attempt`).
        let threads = jobs + alternatives.len().saturating_sub(1);
        for _ in 0..threads.min(((1 + alternatives.len()) * refs.len()).max(1)) {
            s.spawn(|| {
                while let Some((i, attempt)) = next_attempt(&race, &cancel, &|i, c, by| trace(&format!("P{}", refs[i]), &format!("{} preempted by {}", construction(c), construction(by)), Instant::now(), || 0)) {
                    let o = match attempt {
                        0 => opts,
                        a => &alternatives[a - 1].1,
                    };
                    let t = Instant::now();
                    let result = reference_formulas(k, refs[i], access_text, o, context, deadline, Some(&cancel[i][attempt]));
                    trace(&format!("P{}", refs[i]), &format!("{} {}", construction(attempt), if result.is_ok() { "built" } else { "gave up" }), t, || 0);
                    if lock(&race.0).finish(i, result, attempt) {
                        cancel[i].iter().for_each(|c| c.store(true, std::sync::atomic::Ordering::Relaxed));
                    }
                    race.1.notify_all();
                }
            });
        }
    });
    race.0.into_inner().unwrap_or_else(|p| p.into_inner()).results.into_iter().map(|b| b.expect("every reference is built by some thread")).collect()
}

/// How long a reference's first construction runs before a thread beyond the jobs races
/// it (at most; a quarter of the budget when that is shorter): most references build in
/// under a second, and racing them would only take a core from the others.
const RACE_AFTER: std::time::Duration = std::time::Duration::from_secs(5);

/// Per reference, per construction: set to cancel that attempt.
type Cancel = Vec<Vec<std::sync::atomic::AtomicBool>>;

/// Waits until there is an attempt for this thread (`None`: none will come). The flags
/// change under the race's lock, so that a preempted construction restarted later
/// (`Race::preempted`) starts with its flag down. `preempted(i, c, by)`: says so.
fn next_attempt(race: &(std::sync::Mutex<Race>, std::sync::Condvar), cancel: &Cancel, preempted: &dyn Fn(usize, usize, usize)) -> Option<(usize, usize)> {
    use std::sync::atomic::Ordering::Relaxed;
    let mut r = lock(&race.0);
    loop {
        match r.next_attempt(Instant::now()) {
            Next::Start(i, attempt) => {
                cancel[i][attempt].store(false, Relaxed);
                for c in std::mem::take(&mut r.to_cancel) {
                    cancel[i][c].store(true, Relaxed);
                    preempted(i, c, attempt);
                }
                return Some((i, attempt));
            }
            Next::Done => return None,
            Next::Wait(d) => r = race.1.wait_timeout(r, d).map_or_else(|p| p.into_inner().0, |(g, _)| g),
        }
    }
}

fn lock<T>(m: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// What a thread does next: start construction `.1` (0 the options', a ≥ 1 alternative
/// a − 1) on reference `.0`, wait (at most so long), or stop.
#[derive(Debug, PartialEq)]
enum Next {
    Start(usize, usize),
    Wait(std::time::Duration),
    Done,
}

/// Who builds what in [`build_references`]. Construction 0 is the options', a ≥ 1
/// alternative a − 1. A reference tries them in the order of their wins so far, the
/// options' first on a tie: a win counts when the construction decided a reference while
/// another still ran on it (a race it won), or after another failed or was preempted on
/// it. A construction that has won nothing while another won [`CLEAR_WINS`] races a
/// reference only once its attempts failed. heat-3d
/// 2-way: the lexmin chain won 17 of its 22 references, each raced beside the first
/// construction that could not finish (99 s; the chain alone 45 s; 59 s learning so).
/// A construction that has won races stops, when it races a reference, the attempts on it
/// of a construction that has won none and built no slow reference (`preempts`).
/// Per reference: its order, when its first attempt started, the attempts started, the
/// constructions running, those preempted (restarted when every other attempt failed),
/// the error kept while an attempt may still succeed (the first attempt's, when it
/// failed), and the result once decided.
struct Race {
    alternatives: usize,
    jobs: usize,
    race_after: std::time::Duration,
    next: usize,
    wins: Vec<usize>,
    /// Per construction, the references it built that had run `race_after` by then.
    slow_builds: Vec<usize>,
    order: Vec<Vec<usize>>,
    started: Vec<Option<Instant>>,
    tried: Vec<usize>,
    running: Vec<Vec<usize>>,
    first_attempt_running: Vec<bool>,
    preempted: Vec<Vec<usize>>,
    failure: Vec<Option<CacheError>>,
    results: Vec<Option<Built>>,
    /// The constructions the last start preempted on its reference, for the caller to
    /// cancel.
    to_cancel: Vec<usize>,
}

impl Race {
    fn new(n: usize, alternatives: usize, jobs: usize, race_after: std::time::Duration) -> Race {
        Race {
            alternatives,
            jobs,
            race_after,
            next: 0,
            wins: vec![0; alternatives + 1],
            slow_builds: vec![0; alternatives + 1],
            order: vec![Vec::new(); n],
            started: vec![None; n],
            tried: vec![0; n],
            running: vec![Vec::new(); n],
            first_attempt_running: vec![false; n],
            preempted: vec![Vec::new(); n],
            failure: (0..n).map(|_| None).collect(),
            results: (0..n).map(|_| None).collect(),
            to_cancel: Vec::new(),
        }
    }

    /// What a thread does next, at `now`: every reference's first attempt, at most `jobs`
    /// of them at a time; then the next construction of the undecided reference that
    /// started first and has one left worth racing — at once while fewer than `jobs`
    /// attempts run, else (a thread beyond the jobs, a racer: a slow reference then gets
    /// every construction at once instead of the last one after a core frees up — gemm
    /// 4-way at extents 20: 13 s alone, 60 s late) once the reference has run `race_after`.
    fn next_attempt(&mut self, now: Instant) -> Next {
        let n = self.started.len();
        let running: usize = self.running.iter().map(Vec::len).sum();
        let first_running = self.first_attempt_running.iter().filter(|&&r| r).count();
        if self.next < n && first_running < self.jobs {
            self.next += 1;
            self.started[self.next - 1] = Some(now);
            return self.start(self.next - 1);
        }
        let oldest = (0..n).filter_map(|i| Some((self.started[i]?, i))).filter(|&(_, i)| self.next_construction(i).is_some()).min();
        match oldest {
            Some((_, i)) if running < self.jobs => self.start(i),
            Some((t, i)) => match self.race_after.checked_sub(now.saturating_duration_since(t)) {
                Some(wait) if !wait.is_zero() => Next::Wait(wait),
                _ => self.start(i),
            },
            // A first attempt or an alternative may come once an attempt ends.
            None if self.next < n => Next::Wait(self.race_after),
            None => Next::Done,
        }
    }

    /// The construction reference `i` (started, undecided) gets next, if any: the next in
    /// its order when its attempts failed or that one is worth racing; else, once every
    /// attempt ended in failure, one preempted there.
    fn next_construction(&self, i: usize) -> Option<usize> {
        if self.results[i].is_some() {
            return None;
        }
        let next = self.order[i].get(self.tried[i]).copied().filter(|&c| self.failure[i].is_some() || self.worth_racing(c));
        next.or_else(|| self.preempted[i].first().copied().filter(|_| self.running[i].is_empty() && self.failure[i].is_some()))
    }

    /// Whether construction `c` may race a reference still being built.
    fn worth_racing(&self, c: usize) -> bool {
        self.wins[c] > 0 || self.wins.iter().all(|&w| w < CLEAR_WINS)
    }

    /// Whether construction `c`, racing a reference, stops the attempt of `d` on it: `c`
    /// has won races, `d` none, nor built a reference that ran long enough to be raced.
    /// heat-3d 4-way at extents 16: the first construction built no slow reference, the
    /// lexmin chain won P0 and then raced P2, beside the first construction that ran on
    /// it for 42 s in vain, taking a core from the chain.
    fn preempts(&self, c: usize, d: usize) -> bool {
        self.wins[c] > 0 && self.wins[d] == 0 && self.slow_builds[d] == 0
    }

    fn start(&mut self, i: usize) -> Next {
        if self.tried[i] == 0 {
            self.first_attempt_running[i] = true;
            let mut order: Vec<usize> = (0..=self.alternatives).collect();
            order.sort_by_key(|&c| std::cmp::Reverse(self.wins[c]));
            self.order[i] = order;
        }
        let c = self.next_construction(i).expect("started only with a construction to come");
        if self.order[i].get(self.tried[i]) == Some(&c) {
            self.tried[i] += 1;
        } else {
            self.preempted[i].retain(|&p| p != c);
        }
        self.to_cancel = self.running[i].iter().copied().filter(|&d| self.preempts(c, d)).collect();
        self.preempted[i].extend(&self.to_cancel);
        self.running[i].push(c);
        Next::Start(i, c)
    }

    /// Records an attempt's end; `true` when it decided the reference while other
    /// attempts still run (which are then cancelled). A cancelled loser's result is
    /// dropped, and so is a preempted attempt's failure; a failure out of the budget
    /// waits for the attempts running and those still to come; of several failures the
    /// first attempt's error is reported.
    fn finish(&mut self, i: usize, result: Result<RefCounts>, attempt: usize) -> bool {
        let first = self.order[i].first() == Some(&attempt);
        self.running[i].retain(|&c| c != attempt);
        if first {
            self.first_attempt_running[i] = false;
        }
        if self.results[i].is_some() {
            return false;
        }
        let seconds = self.started[i].map_or(0.0, |t| t.elapsed().as_secs_f64());
        match result {
            Ok(r) => {
                self.results[i] = Some(Built { result: Ok(r), seconds, by: attempt.checked_sub(1) });
                let won_a_race = !self.running[i].is_empty();
                // Deciding a reference another construction failed on, or was preempted
                // on, is a race won too: heat-3d 4-way's lexmin chain won P0, then P2
                // by preemption, then P3, and without counting P2 the first construction
                // went on racing P10 for 12.5 s in vain.
                let beat_another = won_a_race || !self.preempted[i].is_empty() || self.failure[i].is_some();
                self.wins[attempt] += usize::from(beat_another);
                self.slow_builds[attempt] += usize::from(seconds >= self.race_after.as_secs_f64());
                won_a_race
            }
            Err(e) => {
                if !self.preempted[i].contains(&attempt) && (first || self.failure[i].is_none()) {
                    self.failure[i] = Some(e);
                }
                let more_to_come = (self.tried[i] <= self.alternatives || !self.preempted[i].is_empty()) && self.failure[i].as_ref().is_some_and(out_of_budget);
                if self.running[i].is_empty() && !more_to_come {
                    // A reference whose only failure is a preempted attempt's cannot be
                    // here: the preempting attempt ran after it, and failed or decided.
                    let e = self.failure[i].take().unwrap_or_else(|| budget_exceeded(&format!("reference {i}"), BudgetStop::BetweenSteps { late_isl_operations: None }));
                    self.results[i] = Some(Built { result: Err(e), seconds, by: None });
                }
                false
            }
        }
    }
}

/// Races won by one construction, none by another, after which the other no longer
/// races (see [`Race`]).
const CLEAR_WINS: usize = 3;

/// `cancel`: another thread set it when the other construction of this reference won.
fn reference_formulas(k: &Kernel, r: usize, access_text: &[String], opts: &SetModelOptions, context: &Domain, deadline: Option<Instant>, cancel: Option<&std::sync::atomic::AtomicBool>) -> Result<RefCounts> {
    let ctx = Ctx::new();
    ctx.set_max_operations(opts.max_operations);
    let name = format!("P{r}");
    // The budget holds inside isl too: one lexmax once ran 3 minutes past a 10 s budget.
    let r = ctx.with_watchdog(deadline, cancel, || reference_sets(&ctx, k, (r, &name), access_text, opts, context, deadline));
    match r {
        // The counter stopped itself (it has a context of its own): it says where.
        Err(e @ CacheError::OutOfTime { stop: BudgetStop::InsideCount(_), .. }) => Err(e),
        _ if ctx.aborted() => Err(budget_exceeded(&name, stopped(&ctx))),
        r => r,
    }
}

/// Where an aborted context's work stopped: inside the operation the watchdog
/// interrupted, or between two operations (and how many ran to their end past the deadline).
fn stopped(ctx: &Ctx) -> BudgetStop {
    match ctx.interrupted() {
        Some(operation) => BudgetStop::InsideIsl { operation },
        None => BudgetStop::BetweenSteps { late_isl_operations: Some(ctx.late_operations()) },
    }
}

fn reference_sets(ctx: &Ctx, k: &Kernel, (r, name): (usize, &str), access_text: &[String], opts: &SetModelOptions, context: &Domain, deadline: Option<Instant>) -> Result<RefCounts> {
    let b = Builder { ctx, params: format!("[{}]", k.params.join(",")), dim: 2 * k.max_depth() + 2 };
    let t = Instant::now();
    let acc_r = b.map(&access_text[r])?;
    let acc_all = b.map(&access_text.join("; "))?;
    let earlier = b.earlier()?;
    // Hit condition: earlier accesses of the same line. Traced step by step: below a
    // cache level the access maps carry the misses above, and these steps can be the slow
    // ones (docs/BENCHMARKS.md, seed 004, two levels).
    let line_to_access = m(acc_all.clone().map_reverse(), "same line", name)?;
    let same_line = m(acc_r.clone().map_apply_range(line_to_access), "same line", name)?;
    trace(name, "same line", t, || same_line.to_string().len());
    let hit_condition = m(same_line.map_intersect(earlier.clone()), "hit condition", name)?;
    trace(name, "hit condition before coalescing", t, || hit_condition.to_string().len());
    let hit_condition = m(hit_condition.map_coalesce(), "hit condition", name)?;
    trace(name, "hit condition", t, || hit_condition.to_string().len());
    let t = Instant::now();
    let hit_source = m(hit_condition.clone().map_lexmax(), "hit source (lexmax)", name)?;
    trace(name, "hit source", t, || hit_source.to_string().len());
    let domain = m(acc_r.clone().map_domain(), "domain", name)?;
    let with_source = m(hit_source.clone().map_domain(), "domain of hit source", name)?;
    let compulsory_set = m(m(domain.clone().set_subtract(with_source.clone()), "compulsory", name)?.set_coalesce(), "compulsory", name)?;

    // Accesses strictly between the hit source and the access.
    let later = m(earlier.clone().map_reverse(), "order", name)?;
    let between = m(m(hit_source.clone().map_apply_range(later), "between", name)?.map_intersect(earlier), "between", name)?;
    let same_set = same_set_map(&b, &acc_r, opts.cache.sets, name)?;
    let lines = m(m(between.clone().map_apply_range(acc_all), "lines between", name)?.map_intersect(same_set.clone()), "lines between", name)?;
    let lines = m(lines.map_coalesce(), "lines between", name)?;
    trace(name, "E_1 (lines between)", t, || lines.to_string().len());

    // Lines of different groups (arrays whose lines never meet) are distinct, so the
    // distinct-line count is a sum over groups: each group's chain stays small (gemm 8-way,
    // B[k][j]: one chain over all lines grew to 131 000 characters at E_8).
    let groups = line_groups(&b, k, access_text, name)?;
    // Each access has one hit source, so the conflict set is a disjoint union over the
    // source references, and each part's windows are alike (`split_by_source`).
    let by_source = if opts.split_by_source { accesses_by_source(&b, &hit_source, access_text, name)? } else { vec![(String::new(), with_source.clone())] };
    let mut conflict_parts = Vec::new();
    let mut distinct = vec![String::new(); opts.cache.assoc as usize];
    let mut sure_pieces = 0;
    // Each reference's own lines first (`sure_misses_first`): not with `--explain`, whose
    // E_k are those of the whole window.
    let one_ref_lines = if opts.sure_misses_first && !opts.explain { lines_per_reference(&b, k, &between, &same_set, access_text, name)? } else { Vec::new() };
    for (source, part) in &by_source {
        let (sure, part) = sure_misses_by_reference(&b, &one_ref_lines, part.clone(), opts, (name, source), deadline)?;
        let whole = by_source.len() == 1 && sure.is_empty();
        sure_pieces += sure.len();
        conflict_parts.extend(sure);
        if !whole && is_empty(&part, "sure misses", name)? {
            continue;
        }
        let lines = if whole { lines.clone() } else { coalesced(m(lines.clone().map_intersect_domain(part.clone()), "lines between", name)?, Map::map_coalesce, name) };
        let part = &part;
        let (parts, texts) = conflict_set(&b, &lines, part, &groups, opts, name, deadline)?;
        conflict_parts.extend(parts);
        for (d, t) in distinct.iter_mut().zip(texts).filter(|(_, t)| !t.is_empty()) {
            let t = if by_source.len() == 1 { t } else { format!("[hit source {source}] {t}") };
            *d = if d.is_empty() { t } else { format!("{d}; {t}") };
        }
    }
    let distinct: Vec<String> = distinct.into_iter().map(|d| if d.is_empty() { "{ }".to_string() } else { d }).collect();

    let names = k.params.clone();
    let tabulated = std::cell::Cell::new(0);
    let c = |s: &Set<'_>| count(ctx, s, context, &names, name, deadline, &tabulated);
    out_of_time(ctx, deadline, name)?;
    let t = Instant::now();
    let (accesses, compulsory) = (c(&domain)?, c(&compulsory_set)?);
    trace(name, "count accesses + compulsory", t, || 0);
    let t = Instant::now();
    let mut conflict = kansoku_ehrhart::sum(conflict_parts.iter().map(c).collect::<Result<_>>()?, &names, context);
    conflict.simplify();
    trace(name, &format!("count conflict ({} cells)", conflict.cells.len()), t, || 0);
    let explain = if opts.explain {
        let mut factors = Vec::new();
        let mut factor_maps = Vec::new();
        for (q, text) in access_text.iter().enumerate() {
            if let Some(f) = conflict_factor(&b, &between, &same_set, text, name)? {
                factors.push((format!("P{q} {}", k.ref_text(&k.refs[q])), f.to_string()));
                factor_maps.push(f);
            }
        }
        let seed_conflict = match seed_style_conflict_set(&b, &factor_maps, &with_source, opts.cache.assoc, name)? {
            Some(set) => Some(c(&set)?),
            None => None,
        };
        let d = distinct;
        Some(Explanation {
            access: acc_r.to_string(),
            hit_condition: hit_condition.to_string(),
            hit_source: hit_source.to_string(),
            compulsory_set: compulsory_set.to_string(),
            conflict_factors: factors,
            distinct_lines: d,
            conflict_set: conflict_parts.iter().map(|p| p.to_string()).collect::<Vec<_>>().join(" ∪ "),
            counted_pieces: accesses.cells.len() + compulsory.cells.len() + conflict.cells.len(),
            seed_conflict,
        })
    } else {
        None
    };
    let misses = if opts.keep_misses { Some(miss_set(compulsory_set, &conflict_parts, name)?.to_string()) } else { None };
    Ok(RefCounts { accesses, compulsory, conflict, explain, misses, tabulated: tabulated.get(), sure_pieces })
}

/// The accesses that miss: compulsory, or with a conflict part.
fn miss_set<'c>(compulsory: Set<'c>, conflict_parts: &[Set<'c>], name: &str) -> Result<Set<'c>> {
    let mut all = compulsory;
    for part in conflict_parts {
        all = m(all.set_union(part.clone()), "misses", name)?;
    }
    m(all.set_coalesce(), "misses", name)
}

/// `part` coalesced (by `coalesce`: a set's or a map's), or as it is where isl's coalescing
/// fails: isl 0.25 stops on an internal check ("original tableau does not correspond to
/// original basic map") for some parts per hit source — nussinov's P16 and covariance's
/// P11 at SMALL on a 32 KiB 8-way L1, with Debian's GMP isl as with imath-32 —; the same
/// part uncoalesced is only larger. (An abort of the budget is not hidden: the next
/// operation fails too.)
fn coalesced<T: Clone>(part: T, coalesce: impl FnOnce(T) -> kansoku_isl::Result<T>, name: &str) -> T {
    coalesce(part.clone()).unwrap_or_else(|e| {
        trace(name, &format!("coalescing a part per source failed ({e}), kept uncoalesced"), Instant::now(), || 0);
        part
    })
}

/// The accesses with a hit source, by the reference of their hit source (disjoint: each
/// access has one), the empty ones left out, each with that reference's name. Split
/// further by the loop level that carries the reuse (short windows apart from long ones),
/// heat-3d 4-way took 130 s instead of 105: not done.
fn accesses_by_source<'c>(b: &Builder<'c>, hit_source: &Map<'c>, access_text: &[String], name: &str) -> Result<Vec<(String, Set<'c>)>> {
    let t = Instant::now();
    let mut out = Vec::new();
    for (q, text) in access_text.iter().enumerate() {
        let times = m(b.map(text)?.map_domain(), "hit source by reference", name)?;
        let part = m(m(hit_source.clone().map_intersect_range(times), "hit source by reference", name)?.map_domain(), "hit source by reference", name)?;
        let part = coalesced(part, Set::set_coalesce, name);
        if !is_empty(&part, "hit source by reference", name)? {
            out.push((format!("P{q}"), part));
        }
    }
    trace(name, &format!("split by source: {} references", out.len()), t, || 0);
    Ok(out)
}

/// The lines one reference (its access map as `text`) inserts into the access's set
/// between the hit source and the access — the seed's conflict factor, `lines` for that
/// reference alone; `None` where it inserts none.
fn conflict_factor<'c>(b: &Builder<'c>, between: &Map<'c>, same_set: &Map<'c>, text: &str, name: &str) -> Result<Option<Map<'c>>> {
    let f = m(m(between.clone().map_apply_range(b.map(text)?), "factor", name)?.map_intersect(same_set.clone()), "factor", name)?;
    let f = m(f.map_coalesce(), "factor", name)?;
    Ok((!m(f.map_is_empty(), "factor", name)?).then_some(f))
}

/// The conflict factors of the references whose accesses fall in some window, for
/// `sure_misses_by_reference`. A reference that repeats an earlier one of its statement
/// (heat-3d's `A[i][j][k]`, four times in each statement) is left out: its lines are the
/// same but at the statement's ends, so its chain would find next to nothing the first
/// one's did not.
fn lines_per_reference<'c>(b: &Builder<'c>, k: &Kernel, between: &Map<'c>, same_set: &Map<'c>, access_text: &[String], name: &str) -> Result<Vec<Map<'c>>> {
    let t = Instant::now();
    let repeats = |q: usize| k.refs[..q].iter().any(|e| (e.stmt, e.array, &e.subscripts) == (k.refs[q].stmt, k.refs[q].array, &k.refs[q].subscripts));
    let mut out = Vec::new();
    for (_, text) in access_text.iter().enumerate().filter(|(q, _)| !repeats(*q)) {
        out.extend(conflict_factor(b, between, same_set, text, name)?);
    }
    trace(name, &format!("lines per reference: {} references", out.len()), t, || 0);
    Ok(out)
}

/// The accesses of `part` that one reference alone gives at least A distinct lines of
/// their set in the window — misses whatever the other references add — as disjoint
/// pieces, and the rest of `part`, for the chain over all lines. Each reference's chain
/// runs on the rest the references before it left, so it shrinks as it goes. A window
/// spanning a whole loop nest holds many references' lines, and one chain over all of
/// them carries every reference's pieces through each lexmin (heat-3d 8-way's P0 with the
/// lexmin chain: 43 s in the part reused from the other nest; 10 s here, then 5 s for
/// the rest, which only small sizes leave).
fn sure_misses_by_reference<'c>(b: &Builder<'c>, one_ref_lines: &[Map<'c>], mut part: Set<'c>, opts: &SetModelOptions, (name, source): (&str, &str), deadline: Option<Instant>) -> Result<(Vec<Set<'c>>, Set<'c>)> {
    let t = Instant::now();
    let mut sure = Vec::new();
    for lines in one_ref_lines {
        let lines = coalesced(m(lines.clone().map_intersect_domain(part.clone()), "sure misses", name)?, Map::map_coalesce, name);
        if m(lines.map_is_empty(), "sure misses", name)? {
            continue;
        }
        let chain = distinct_line_chain(b, &lines, opts, name, deadline, None)?.expect("no size limit");
        let Some(e_a) = chain.get(opts.cache.assoc as usize - 1) else { continue };
        let misses = m(m(e_a.clone().map_domain(), "sure misses", name)?.set_coalesce(), "sure misses", name)?;
        if is_empty(&misses, "sure misses", name)? {
            continue;
        }
        part = m(m(part.set_subtract(misses.clone()), "sure misses", name)?.set_coalesce(), "sure misses", name)?;
        sure.push(misses);
        if is_empty(&part, "sure misses", name)? {
            break;
        }
    }
    if !one_ref_lines.is_empty() {
        trace(name, &format!("sure misses [{source}]: from {} references, the rest", sure.len()), t, || part.to_string().len());
    }
    Ok((sure, part))
}

/// The accesses with at least A distinct lines of their set between the hit source and
/// themselves, as disjoint parts, from `lines` (per access with a hit source in
/// `with_source`, the lines of its set in between), and with `--explain` each `E_k` as
/// text.
#[allow(clippy::too_many_arguments)]
fn conflict_set<'c>(b: &Builder<'c>, lines: &Map<'c>, with_source: &Set<'c>, groups: &[(String, Set<'c>)], opts: &SetModelOptions, name: &str, deadline: Option<Instant>) -> Result<(Vec<Set<'c>>, Vec<String>)> {
    // Not combined with the lexmin chain: the chain already keeps E_k small there, and
    // with both on the lexmin-chain tests (then one, `lexmin_chain_slow_pairs`) took 247 s
    // instead of 141 s (release).
    let give_up = opts.split_by_array_above.filter(|_| groups.len() > 1 && opts.lexmin_chain_above.is_none());
    let mut distinct = vec![String::new(); opts.cache.assoc as usize];
    let mut levels = Vec::new();
    if let Some(chain) = distinct_line_chain(b, lines, opts, name, deadline, give_up)? {
        for (i, e) in chain.iter().enumerate().filter(|_| opts.explain) {
            distinct[i] = e.to_string();
        }
        levels.push(chain);
    } else {
        trace(name, &format!("split by array: {} groups", groups.len()), Instant::now(), || 0);
        for (label, group_lines) in groups {
            let lines_g = m(m(lines.clone().map_intersect_range(group_lines.clone()), "lines of a group", name)?.map_coalesce(), "lines of a group", name)?;
            let chain = distinct_line_chain(b, &lines_g, opts, name, deadline, None)?.expect("no size limit");
            for (i, e) in chain.iter().enumerate().filter(|_| opts.explain) {
                let sep = if distinct[i].is_empty() { "" } else { "; " };
                distinct[i] += &format!("{sep}[{label}] {e}");
            }
            levels.push(chain);
        }
    }
    let t = Instant::now();
    let conflict_parts = at_least_lines(&levels, with_source, opts.cache.assoc as usize, name)?;
    trace(name, &format!("conflict set ({} parts)", conflict_parts.len()), t, || conflict_parts.iter().map(|p| p.to_string().len()).sum());
    Ok((conflict_parts, distinct))
}

/// `E_1 …`: `E_k` = the lines (per access) with at least k-1 distinct smaller lines of
/// `lines` — its domain = accesses with at least k distinct lines. Stops at the first
/// empty `E_k` (then every later one is empty) or at `E_A`; `None` once an `E_k` to be
/// extended exceeds `give_up_above` characters.
fn distinct_line_chain<'c>(b: &Builder<'c>, lines: &Map<'c>, opts: &SetModelOptions, name: &str, deadline: Option<Instant>, give_up_above: Option<usize>) -> Result<Option<Vec<Map<'c>>>> {
    let greater = b.map(&format!("{LINE}[x] -> {LINE}[y] : y > x"))?;
    let mut e_k = lines.clone();
    let mut out = vec![];
    // E_k = { l ∈ lines : l > some l' ∈ E_{k-1} } = { l ∈ lines : l > lexmin E_{k-1} }: the
    // same set either way. The existential form is cheap while E_{k-1} is small; once it
    // grows past `lexmin_chain_above` characters (the 2-D stencils with 4 and 8 ways: E_3 of
    // jacobi-2d's P3 reached 142 000), the k-th distinct line is taken as the lexmin of
    // E_{k-1} instead (a single-valued piecewise map, no accumulated existentials).
    let mut chain = false;
    for step in 2..=opts.cache.assoc {
        if m(e_k.map_is_empty(), "distinct lines", name)? {
            break;
        }
        if give_up_above.is_some_and(|limit| e_k.to_string().len() > limit) {
            return Ok(None);
        }
        out.push(e_k.clone());
        out_of_time(b.ctx, deadline, name)?;
        let t = Instant::now();
        if let Some(limit) = opts.lexmin_chain_above {
            chain = chain || e_k.to_string().len() > limit;
        }
        if chain {
            // isl 0.25's lexmin of E_{k-1} as built in memory (after apply_range,
            // intersect, coalesce) was wrong for mvt's P5 on an 8-way cache (E_8 non-empty
            // where at most 5 other lines share the set); the same set re-read from its
            // text gives the right lexmin (simulator-checked). So: re-read first.
            let text = e_k.to_string();
            e_k = b.ctx.map(&text).map_err(|e| CacheError::Model(format!("{name}: re-reading E_{}: {e}", step - 1)))?;
            e_k = m(e_k.map_lexmin(), "distinct lines (lexmin)", name)?;
        }
        let above = m(e_k.map_apply_range(greater.clone()), "distinct lines", name)?;
        e_k = m(m(lines.clone().map_intersect(above), "distinct lines", name)?.map_coalesce(), "distinct lines", name)?;
        // Explicit divisions in every E_k that is extended further (`stepwise_divisions`):
        // each step then adds one existential (the line l' below), eliminated while it is
        // alone. Left to the end, E_A holds A nested ones and isl eliminates them when
        // counting: doitgen 8-way's P3 (extents 16, default construction alone) spent 71 of
        // its 101 s there, 12.5 s with this step; but gemm 4-way at extents 20 went from
        // 12.7 s to over 120 s. Not on the last E_k, which is counted: there isl's own
        // choice of divisions gave the counter easier polytopes (adi 2-way's P15: 0.9 s;
        // 37 s with explicit divisions on E_2).
        if opts.stepwise_divisions && step < opts.cache.assoc {
            e_k = m(m(e_k.map_compute_divs(), "distinct lines", name)?.map_coalesce(), "distinct lines", name)?;
        }
        trace(name, &format!("E_{step}{}", if chain { " (lexmin chain)" } else { "" }), t, || e_k.to_string().len());
    }
    if out.len() < opts.cache.assoc as usize && !m(e_k.map_is_empty(), "distinct lines", name)? {
        out.push(e_k);
    }
    Ok(Some(out))
}

/// Accesses with at least `assoc` distinct lines in between, as disjoint parts (counted
/// one by one and summed: their union, coalesced, was the slow step — gemm 8-way,
/// B[k][j], extents 20: 1 000 000 characters after 460 s). From each group's chain
/// (`levels[g][j-1]` = `E_j`: its domain = accesses with ≥ j lines of group g): groups
/// share no line, so the count is a sum. Groups are combined by exact counts, shortest
/// chain first: `exact[s]` = accesses whose groups so far give exactly s < `assoc` lines
/// (disjoint); a group's `exactly[j]` = `dom E_j \ dom E_{j+1}` (small: one group's
/// chain) moves `exact[s]` on to `exact[s+j]`, and `exact[s] ∩ dom E_{assoc-s}` is a part
/// at once. Before, `reach[s]` = accesses with *at least* s lines, where `reach[assoc]`
/// absorbed every miss found so far and grew round by round: 3mm 8-way's P12 (7 groups,
/// windows spanning a whole other nest) spent 106 s combining and 72 s making that part
/// disjoint, 4.3 s and nothing this way; adi 8-way's P6 157 s → 11 s.
fn at_least_lines<'c>(levels: &[Vec<Map<'c>>], with_source: &Set<'c>, assoc: usize, name: &str) -> Result<Vec<Set<'c>>> {
    let mut order: Vec<&Vec<Map<'c>>> = levels.iter().collect();
    order.sort_by_key(|c| c.len());
    if let [only] = levels {
        // One group: E_A's domain (already inside `with_source`).
        return match only.get(assoc - 1) {
            Some(e_a) => chain_domains(std::slice::from_ref(e_a), name),
            None => Ok(vec![]),
        };
    }
    let mut exact: Vec<Option<Set<'c>>> = (0..assoc).map(|s| (s == 0).then(|| with_source.clone())).collect();
    let mut parts = Vec::new();
    for (round, chain) in order.iter().enumerate() {
        let t = Instant::now();
        // Explicit divisions before the domains are intersected and subtracted round by
        // round: left to isl, every operation and then the counter eliminate the same
        // existentials again (adi 8-way not built in 120 s → 81 s, gramschmidt 8-way 42 →
        // 29 s). Only here: on a one-group reference's domain, which goes to the counter
        // as it is, they gave it harder pieces (heat-3d 4-way 50.6 → 59.6 s).
        let at_least = chain_domains(chain, name)?.into_iter().map(|d| m(m(d.set_compute_divs(), "conflict set", name)?.set_coalesce(), "conflict set", name)).collect::<Result<Vec<_>>>()?;
        let last = round + 1 == order.len();
        let exactly = if last { Vec::new() } else { exactly_per_level(&at_least, with_source, assoc, name)? };
        let mut next: Vec<Option<Set<'c>>> = vec![None; assoc];
        for (r, prev) in exact.iter().enumerate() {
            let Some(prev) = prev else { continue };
            if let Some(full) = at_least.get(assoc - r - 1) {
                // Each factor made disjoint first, so that their intersection (the pairwise
                // intersections of their pieces) is disjoint already and the counter's
                // make_disjoint has nothing to split. Not coalesced: coalescing such
                // intersections cost gemm 8-way (extents 20) 26 of its 39 s of isl. Made
                // disjoint as a whole, gemm 8-way's P4 (extents 20) spent 69 s on one such
                // part and 20 s on another; this way 23 s and under 3 s (making E_5's
                // domain disjoint), test profile.
                let t = Instant::now();
                let disjoint = |s: &Set<'c>| m(s.clone().set_make_disjoint(), "conflict set", name);
                let part = m(disjoint(prev)?.set_intersect(disjoint(full)?), "conflict set", name)?;
                trace(name, &format!("part with {r} lines before: factors made disjoint"), t, || 0);
                if !is_empty(&part, "conflict set", name)? {
                    parts.push(part);
                }
            }
            for (j, level) in exactly.iter().enumerate().take(assoc - r) {
                let Some(level) = level else { continue };
                let piece = m(prev.clone().set_intersect(level.clone()), "conflict set", name)?;
                next[r + j] = Some(match next[r + j].take() {
                    None => piece,
                    Some(u) => m(u.set_union(piece), "conflict set", name)?,
                });
            }
        }
        for slot in next.iter_mut() {
            if let Some(s) = slot.take() {
                let s = m(s.set_coalesce(), "conflict set", name)?;
                if !is_empty(&s, "conflict set", name)? {
                    *slot = Some(s);
                }
            }
        }
        trace(name, &format!("round {round} ({} levels, {} parts so far): exactly s lines", chain.len(), parts.len()), t, || next.iter().flatten().map(|s| s.to_string().len()).sum());
        exact = next;
    }
    Ok(parts)
}

/// `exactly[j]` = accesses (with a hit source) one chain gives exactly j lines, j <
/// `assoc`; `None` where that is empty.
fn exactly_per_level<'c>(at_least: &[Set<'c>], with_source: &Set<'c>, assoc: usize, name: &str) -> Result<Vec<Option<Set<'c>>>> {
    let mut out = Vec::new();
    for j in 0..assoc.min(at_least.len() + 1) {
        let from = if j == 0 { with_source.clone() } else { at_least[j - 1].clone() };
        let set = match at_least.get(j) {
            Some(more) => m(m(from.set_subtract(more.clone()), "conflict set", name)?.set_coalesce(), "conflict set", name)?,
            None => from,
        };
        out.push((!is_empty(&set, "conflict set", name)?).then_some(set));
    }
    Ok(out)
}

/// `dom E_1, dom E_2, …` of one chain: accesses with ≥ 1, 2, … distinct lines.
fn chain_domains<'c>(chain: &[Map<'c>], name: &str) -> Result<Vec<Set<'c>>> {
    chain.iter().map(|e| m(m(e.clone().map_domain(), "conflict set", name)?.set_coalesce(), "conflict set", name)).collect()
}

/// Groups of arrays whose line sets (over the whole derivation domain) meet, as (label,
/// set of their lines): lines of different groups are never equal, so distinct lines
/// can be counted per group. Arrays that overlap (the seed example beyond X = 100) or
/// share a boundary line land in one group.
fn line_groups<'c>(b: &Builder<'c>, k: &Kernel, access_text: &[String], name: &str) -> Result<Vec<(String, Set<'c>)>> {
    let mut groups: Vec<(String, Set<'c>)> = Vec::new();
    for (a, array) in k.arrays.iter().enumerate() {
        let texts: Vec<&str> = access_text.iter().enumerate().filter(|(q, _)| k.refs[*q].array == a).map(|(_, t)| t.as_str()).collect();
        if texts.is_empty() {
            continue;
        }
        let mut lines = m(m(b.map(&texts.join("; "))?.map_range(), "array lines", name)?.set_coalesce(), "array lines", name)?;
        let mut label = array.name.clone();
        // Merge every existing group this array's lines meet.
        let mut kept = Vec::new();
        for (l, g) in groups {
            if is_empty(&m(g.clone().set_intersect(lines.clone()), "array lines", name)?, "array lines", name)? {
                kept.push((l, g));
            } else {
                label = format!("{l},{label}");
                lines = m(m(lines.set_union(g), "array lines", name)?.set_coalesce(), "array lines", name)?;
            }
        }
        kept.push((label, lines));
        groups = kept;
    }
    Ok(groups)
}

/// The seed's construction: per factor q the *split sets* `F_q^{=j}` (accesses whose window
/// holds exactly j distinct lines of q, j < A), the *common sets* `∩_q F_q^{=j_q}` with
/// `Σ j_q < A` (predicted hits), and the predicted conflict misses = accesses with a hit
/// source outside every common set. Exact per factor, but summing over factors counts a
/// line that two factors insert twice.
fn seed_style_conflict_set<'c>(b: &Builder<'c>, factors: &[Map<'c>], with_source: &Set<'c>, assoc: u32, name: &str) -> Result<Option<Set<'c>>> {
    let a = assoc as usize;
    let combos = count_combos(factors.len(), a - 1);
    if combos > 256 {
        return Ok(None);
    }
    let greater = b.map(&format!("{LINE}[x] -> {LINE}[y] : y > x"))?;
    // at_least[q][j] = accesses with >= j distinct lines of factor q (j = 0..=A).
    let mut at_least: Vec<Vec<Set<'c>>> = Vec::new();
    for f in factors {
        let mut levels = vec![with_source.clone()];
        let mut e = f.clone();
        for j in 1..=a {
            if j > 1 {
                let above = m(e.map_apply_range(greater.clone()), "seed split sets", name)?;
                e = m(m(f.clone().map_intersect(above), "seed split sets", name)?.map_coalesce(), "seed split sets", name)?;
            }
            levels.push(m(m(e.clone().map_domain(), "seed split sets", name)?.set_intersect(with_source.clone()), "seed split sets", name)?);
        }
        at_least.push(levels);
    }
    let exactly = |q: usize, j: usize| -> Result<Set<'c>> { m(at_least[q][j].clone().set_subtract(at_least[q][j + 1].clone()), "seed split sets", name) };
    let mut hits: Option<Set<'c>> = None;
    let mut js = vec![0usize; factors.len()];
    loop {
        if js.iter().sum::<usize>() < a {
            let mut common = with_source.clone();
            for (q, &j) in js.iter().enumerate() {
                common = m(common.set_intersect(exactly(q, j)?), "seed common sets", name)?;
            }
            hits = Some(match hits {
                None => common,
                Some(h) => m(h.set_union(common), "seed common sets", name)?,
            });
        }
        // Next assignment (odometer over 0..A per factor, sums >= A skipped above).
        let mut i = 0;
        while i < js.len() {
            js[i] += 1;
            if js[i] < a {
                break;
            }
            js[i] = 0;
            i += 1;
        }
        if i == js.len() {
            break;
        }
    }
    let misses = match hits {
        None => with_source.clone(),
        Some(h) => m(with_source.clone().set_subtract(h), "seed conflict set", name)?,
    };
    Ok(Some(m(misses.set_coalesce(), "seed conflict set", name)?))
}

/// Assignments the odometer visits: A^n (those with sum ≥ A are skipped); decides whether
/// the seed's construction is affordable.
fn count_combos(n: usize, max_sum: usize) -> usize {
    (0..n).fold(1usize, |acc, _| acc.saturating_mul(max_sum + 1))
}

/// `{ t -> l : l ≡ line(t) (mod S) }`: lines that share the access's cache set.
fn same_set_map<'c>(b: &Builder<'c>, acc_r: &Map<'c>, sets: u32, name: &str) -> Result<Map<'c>> {
    let congruent = b.map(&format!("{LINE}[x] -> {LINE}[y] : (y - x) mod {sets} = 0"))?;
    m(acc_r.clone().map_apply_range(congruent), "same set", name)
}

fn is_empty(set: &Set<'_>, what: &str, reference: &str) -> Result<bool> {
    m(set.set_is_empty(), what, reference)
}

/// The budget checked between two steps of `ctx`'s build.
fn out_of_time(ctx: &Ctx, deadline: Option<Instant>, reference: &str) -> Result<()> {
    if deadline.is_some_and(|d| Instant::now() > d) {
        return Err(budget_exceeded(reference, BudgetStop::BetweenSteps { late_isl_operations: Some(ctx.late_operations()) }));
    }
    Ok(())
}

fn budget_exceeded(reference: &str, stop: BudgetStop) -> CacheError {
    CacheError::OutOfTime { msg: format!("{reference}: the set method exceeded its time budget ({stop})"), stop }
}

/// Longest a lifted piece is summed before, when the parameters have few values, it is
/// counted point by point instead ([`kansoku_ehrhart::tabulate`]).
const PIECE_SLICE: std::time::Duration = std::time::Duration::from_secs(10);

/// Longest a lifted piece is summed whole before the variables with few values in the
/// sizes' box are cut into slices (most pieces take milliseconds; 2mm's second-level P2
/// had one that did not finish in a minute whole and took 0.01 s cut).
const WHOLE_SLICE: std::time::Duration = std::time::Duration::from_secs(2);

/// One lifted piece's count: summed symbolically; when that does not finish within
/// [`WHOLE_SLICE`] and every size is bounded, summed again with the variables that take
/// few values in the sizes' box cut into slices; past [`PIECE_SLICE`], and only where the
/// context leaves few parameter points, as a table of those points (exact there too).
fn count_piece(poly: &kansoku_ehrhart::Polytope, context: &Domain, names: &[String], reference: &str, deadline: Option<Instant>, tabulated: &std::cell::Cell<usize>) -> Result<PwQp> {
    count_piece_within(poly, context, names, (reference, deadline), (WHOLE_SLICE, PIECE_SLICE), tabulated)
}

/// [`count_piece`] with its times to sum whole and to sum in slices as arguments (a test
/// gives none, to reach the table).
fn count_piece_within(poly: &kansoku_ehrhart::Polytope, context: &Domain, names: &[String], (reference, deadline): (&str, Option<Instant>), (whole_slice, piece_slice): (std::time::Duration, std::time::Duration), tabulated: &std::cell::Cell<usize>) -> Result<PwQp> {
    use kansoku_ehrhart::EhrhartError::OutOfTime;
    let failed = |e: kansoku_ehrhart::EhrhartError| match e {
        OutOfTime(stop) => CacheError::OutOfTime { msg: format!("{reference}: counting: {e}"), stop: BudgetStop::InsideCount(stop) },
        e => CacheError::Model(format!("{reference}: counting: {e}")),
    };
    // One point (every size fixed) is counted by enumeration, which slices would not help.
    let several_points = kansoku_ehrhart::param_box(context, poly.n_params).is_some_and(|b| b.iter().any(|(lo, hi)| lo < hi));
    if !several_points {
        return kansoku_ehrhart::enumerate_until(poly, context, names, deadline).map_err(failed);
    }
    let start = Instant::now();
    let until = |slice: std::time::Duration| Some(deadline.map_or(start + slice, |d| d.min(start + slice)));
    let budget_left = || deadline.map_or(true, |d| Instant::now() < d);
    let tabulable = kansoku_ehrhart::table_box(context, poly.n_params).is_some();
    let whole = kansoku_ehrhart::enumerate_until(poly, context, names, until(whole_slice));
    if !(matches!(whole, Err(OutOfTime(_))) && budget_left()) {
        return whole.map_err(failed);
    }
    let t = Instant::now();
    let sliced = kansoku_ehrhart::enumerate_in_box_slices_until(poly, context, names, if tabulable { until(piece_slice) } else { deadline });
    trace(reference, &format!("piece cut into slices over the sizes' box: {}", if sliced.is_ok() { "counted" } else { "not counted" }), t, || 0);
    if !(tabulable && matches!(sliced, Err(OutOfTime(_))) && budget_left()) {
        return sliced.map_err(failed);
    }
    let t = Instant::now();
    let table = kansoku_ehrhart::tabulate(poly, context, names, deadline).map_err(failed)?.expect("the context is a small box");
    trace(reference, &format!("piece counted point by point: {} cells", table.cells.len()), t, || 0);
    tabulated.set(tabulated.get() + 1);
    Ok(table)
}

/// Parametric number of points of `set`: disjoint basic sets with explicit divisions,
/// lifted, each counted by kansoku-ehrhart.
/// `tabulated` counts the pieces that came out as tables.
fn count(ctx: &Ctx, set: &Set<'_>, context: &Domain, names: &[String], reference: &str, deadline: Option<Instant>, tabulated: &std::cell::Cell<usize>) -> Result<PwQp> {
    let t = Instant::now();
    let s = m(set.clone().set_compute_divs(), "explicit divisions", reference)?;
    trace(reference, "explicit divisions", t, || 0);
    let s = m(s.set_make_disjoint(), "disjoint", reference)?;
    trace(reference, "disjoint", t, || 0);
    let pieces = m(s.set_lifted_basic_sets(), "lift", reference)?;
    trace(reference, &format!("disjoint + lifted: {} pieces", pieces.len()), t, || 0);
    let mut parts = Vec::new();
    let n = pieces.len();
    let rows = std::env::var("KANSOKU_SET_TRACE").is_ok_and(|v| v == "rows");
    for (i, p) in pieces.into_iter().enumerate() {
        // The counter sees the deadline but not a cancelled race: between pieces, the
        // context's abort flag (set by the watchdog on either) ends a lost attempt
        // (correlation 8-way waited for P29's lost chain attempt: 82.6 s; now 56.0 s).
        if ctx.aborted() {
            return Err(budget_exceeded(reference, stopped(ctx)));
        }
        let poly = kansoku_ehrhart::Polytope { n_vars: p.n_set, n_params: p.n_param, equalities: p.equalities, inequalities: p.inequalities };
        // Before, too: a piece that runs out of the budget prints nothing after.
        trace(reference, &format!("piece {}/{n}: {} vars, {} eqs, {} ineqs", i + 1, poly.n_vars, poly.equalities.len(), poly.inequalities.len()), Instant::now(), || 0);
        // `KANSOKU_SET_TRACE=rows`: the piece itself, to count it again alone (before it
        // is counted: the piece that runs out of the budget is the one wanted).
        if rows {
            eprintln!("{reference}: rows (x…, params…, 1): eq {:?} ineq {:?}", poly.equalities, poly.inequalities);
        }
        let tp = Instant::now();
        parts.push(count_piece(&poly, context, names, reference, deadline, tabulated)?);
        if tp.elapsed().as_secs_f64() > 0.5 {
            trace(reference, &format!("slow piece: {} vars, {} eqs, {} ineqs, {} cells", poly.n_vars, poly.equalities.len(), poly.inequalities.len(), parts.last().map_or(0, |p| p.cells.len())), tp, || 0);
        }
    }
    let mut total = kansoku_ehrhart::sum(parts, names, context);
    total.simplify();
    Ok(total)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok() -> Result<RefCounts> {
        Ok(RefCounts::default())
    }

    fn late(r: &str) -> Result<RefCounts> {
        Err(budget_exceeded(r, BudgetStop::BetweenSteps { late_isl_operations: None }))
    }

    const SECOND: std::time::Duration = std::time::Duration::from_secs(1);

    /// A piece that does not sum in its time is tabulated over the sizes' box, equal to
    /// the formula at every point, and counted as a table; with time, it is a formula.
    #[test]
    fn a_piece_out_of_its_time_is_a_table_and_counted_as_one() {
        use kansoku_ehrhart::Polytope;
        // { x : 1 <= x <= N, x <= M } over 1 <= N, M <= 4: min(N, M) points.
        let poly = Polytope { n_vars: 1, n_params: 2, equalities: vec![], inequalities: vec![vec![1, 0, 0, -1], vec![-1, 1, 0, 0], vec![-1, 0, 1, 0]] };
        let bound = |p: usize, sign: i64, k: i64| Constraint { equality: false, coeffs: (0..2).map(|q| if q == p { sign } else { 0 }).collect(), constant: k };
        let context = Domain { constraints: vec![bound(0, 1, -1), bound(0, -1, 4), bound(1, 1, -1), bound(1, -1, 4)] };
        let names = vec!["N".to_string(), "M".to_string()];
        let tables = std::cell::Cell::new(0);
        let none = std::time::Duration::ZERO;
        let table = count_piece_within(&poly, &context, &names, ("P0", None), (none, none), &tables).unwrap();
        assert_eq!(tables.get(), 1);
        let formula = count_piece(&poly, &context, &names, "P0", None, &tables).unwrap();
        assert_eq!(tables.get(), 1, "with time, no table");
        assert!(formula.cells.len() < table.cells.len(), "{} cells against the table's {}", formula.cells.len(), table.cells.len());
        for (n, m) in (1..=4).flat_map(|n| (1..=4).map(move |m| (n, m))) {
            assert_eq!(table.eval(&[n, m]).unwrap(), n.min(m));
            assert_eq!(formula.eval(&[n, m]).unwrap(), n.min(m));
        }
    }

    /// A race on `jobs` threads whose racers wait one second, and the time 0.
    fn new_race(n: usize, alternatives: usize, jobs: usize) -> (Race, Instant) {
        (Race::new(n, alternatives, jobs, SECOND), Instant::now())
    }

    /// Two threads, two references, one alternative: every reference starts with the
    /// options' construction; then the idle thread races the alternative on the reference
    /// that started first; the first success is kept and cancels the other, whose result
    /// is dropped.
    #[test]
    fn an_alternative_races_the_default_and_the_first_success_is_kept() {
        let (mut race, t) = new_race(2, 1, 2);
        assert_eq!(race.next_attempt(t), Next::Start(0, 0));
        assert_eq!(race.next_attempt(t), Next::Start(1, 0));
        assert!(!race.finish(1, ok(), 0), "nothing to cancel");
        assert_eq!(race.next_attempt(t), Next::Start(0, 1), "the alternative beside the reference still running, at once: a core is free");
        assert_eq!(race.next_attempt(t), Next::Done, "reference 0 has both attempts");
        assert!(race.finish(0, ok(), 1), "the alternative won while the default runs: cancel it");
        assert!(!race.finish(0, late("P0"), 0), "the cancelled default is dropped");
        let results: Vec<Built> = race.results.into_iter().map(Option::unwrap).collect();
        assert!(results.iter().all(|r| r.result.is_ok()));
        assert_eq!((results[0].by, results[1].by), (Some(0), None), "built by the alternative, by the default");
    }

    /// A failure waits for the other attempt; of two failures the default's is reported;
    /// without alternatives nothing is started twice.
    #[test]
    fn a_failure_waits_for_the_other_attempt() {
        let (mut race, t) = new_race(1, 1, 2);
        assert_eq!(race.next_attempt(t), Next::Start(0, 0));
        assert_eq!(race.next_attempt(t), Next::Start(0, 1));
        race.finish(0, Err(CacheError::Model("chain failed".into())), 1);
        assert!(race.results[0].is_none(), "the default still runs");
        race.finish(0, late("P0"), 0);
        assert!(matches!(&race.results[0], Some(Built { result: Err(e), by: None, .. }) if out_of_budget(e)), "the default's error");

        let (mut alone, t) = new_race(1, 0, 2);
        assert_eq!(alone.next_attempt(t), Next::Start(0, 0));
        assert_eq!(alone.next_attempt(t), Next::Done);
        alone.finish(0, late("P0"), 0);
        assert!(matches!(&alone.results[0], Some(Built { result: Err(_), .. })));
    }

    /// One thread, two alternatives: a construction out of its budget is not decided
    /// yet; the thread then builds the same reference with each alternative in turn, and
    /// the first success is kept.
    #[test]
    fn out_of_budget_the_alternatives_come_next() {
        let (mut race, t) = new_race(1, 2, 1);
        assert_eq!(race.next_attempt(t), Next::Start(0, 0));
        race.finish(0, late("P0"), 0);
        assert!(race.results[0].is_none());
        assert_eq!(race.next_attempt(t), Next::Start(0, 1));
        race.finish(0, late("P0"), 1);
        assert!(race.results[0].is_none(), "the second alternative is still to come");
        assert_eq!(race.next_attempt(t), Next::Start(0, 2));
        race.finish(0, ok(), 2);
        assert!(matches!(&race.results[0], Some(Built { result: Ok(_), by: Some(1), .. })));
        assert_eq!(race.next_attempt(t), Next::Done);
    }

    /// Two jobs and a racer (three threads T1–T3), three references, two alternatives:
    /// the racer neither starts a third first attempt nor races a reference that has just
    /// started; once the oldest has run the racer's wait, it races it; a job's thread
    /// that frees up starts the next first attempt; a free core races at once.
    #[test]
    fn a_racer_waits_before_it_races() {
        let (mut race, t) = new_race(3, 2, 2);
        assert_eq!(race.next_attempt(t), Next::Start(0, 0), "T1");
        assert_eq!(race.next_attempt(t), Next::Start(1, 0), "T2");
        assert_eq!(race.next_attempt(t), Next::Wait(SECOND), "T3: two first attempts on two jobs");
        assert_eq!(race.next_attempt(t + SECOND / 4), Next::Wait(SECOND * 3 / 4));
        assert_eq!(race.next_attempt(t + SECOND), Next::Start(0, 1), "T3 races reference 0");
        race.finish(1, ok(), 0);
        assert_eq!(race.next_attempt(t + SECOND), Next::Start(2, 0), "T2 starts the last reference");
        race.finish(0, Err(CacheError::Model("isl failed".into())), 1);
        assert!(race.results[0].is_none(), "the default still runs");
        assert_eq!(race.next_attempt(t + SECOND), Next::Start(0, 2), "T3: reference 0 has run long enough");
        assert!(race.finish(0, ok(), 2), "cancels the default");
        assert!(matches!(&race.results[0], Some(Built { result: Ok(_), by: Some(1), .. })));
        assert_eq!(race.next_attempt(t + SECOND * 3 / 2), Next::Wait(SECOND / 2), "T3: reference 2 started half a second ago");
        race.finish(0, late("P0"), 0);
        assert_eq!(race.next_attempt(t + SECOND * 3 / 2), Next::Start(2, 1), "T1: a free core races at once");
        assert_eq!(race.next_attempt(t + SECOND * 2), Next::Start(2, 2), "T3");
        assert_eq!(race.next_attempt(t + SECOND * 2), Next::Done);
    }

    /// A construction that won a race goes first for the references started after it;
    /// the others follow, the options' first among them.
    #[test]
    fn the_winner_of_a_race_goes_first_next() {
        let (mut race, t) = new_race(3, 2, 2);
        assert_eq!(race.next_attempt(t), Next::Start(0, 0));
        assert_eq!(race.next_attempt(t), Next::Start(1, 0));
        assert_eq!(race.next_attempt(t + SECOND), Next::Start(0, 1), "the racer");
        assert!(race.finish(0, ok(), 1), "alternative 0 won a race");
        race.finish(0, late("P0"), 0);
        assert!(!race.finish(1, ok(), 0), "reference 1 built alone: no race won");
        assert_eq!(race.next_attempt(t + SECOND), Next::Start(2, 1), "reference 2 starts with the winner");
        race.finish(2, late("P2"), 1);
        assert!(race.results[2].is_none());
        assert_eq!(race.next_attempt(t + SECOND), Next::Start(2, 0), "then the options' construction");
        assert_eq!(race.next_attempt(t + SECOND), Next::Start(2, 2));
        race.finish(2, ok(), 0);
        assert!(matches!(&race.results[2], Some(Built { result: Ok(_), by: None, .. })));
    }

    /// Once a construction has won `CLEAR_WINS` races and another none, the loser no
    /// longer races the winner's references; it still comes when the winner fails.
    #[test]
    fn a_construction_that_never_wins_stops_racing() {
        let n = CLEAR_WINS + 1;
        let (mut race, t) = new_race(n, 1, 1);
        for i in 0..CLEAR_WINS {
            let first = race.next_attempt(t);
            let other = race.next_attempt(t + SECOND);
            assert_eq!([first, other], if i == 0 { [Next::Start(i, 0), Next::Start(i, 1)] } else { [Next::Start(i, 1), Next::Start(i, 0)] }, "reference {i}");
            assert!(race.finish(i, ok(), 1), "the alternative wins reference {i}");
            race.finish(i, late("P"), 0);
        }
        assert_eq!(race.next_attempt(t), Next::Start(CLEAR_WINS, 1), "the winner first");
        assert_eq!(race.next_attempt(t + SECOND * 2), Next::Done, "the loser does not race: this thread may stop");
        race.finish(CLEAR_WINS, late("P"), 1);
        assert_eq!(race.next_attempt(t + SECOND * 2), Next::Start(CLEAR_WINS, 0), "it comes after the winner failed");
    }

    /// Three references, one alternative, two jobs: references 0 and 1 start with the
    /// options' construction, the racer's alternative wins reference 0.
    fn alternative_won_reference_0() -> (Race, Instant) {
        let (mut race, t) = new_race(3, 1, 2);
        assert_eq!(race.next_attempt(t), Next::Start(0, 0));
        assert_eq!(race.next_attempt(t), Next::Start(1, 0));
        assert_eq!(race.next_attempt(t + SECOND), Next::Start(0, 1), "the racer");
        assert!(race.to_cancel.is_empty(), "no construction has won yet");
        assert!(race.finish(0, ok(), 1), "the alternative won a race");
        race.finish(0, late("P0"), 0);
        (race, t)
    }

    /// A construction that has won a race, racing a reference, preempts there one that
    /// has won none and built no slow reference; the preempted attempt's failure is
    /// dropped, and it is restarted once the winner failed too.
    #[test]
    fn a_winner_preempts_a_construction_that_never_won() {
        let (mut race, t) = alternative_won_reference_0();
        assert_eq!(race.next_attempt(t + SECOND), Next::Start(2, 1), "the last reference starts with the winner");
        assert_eq!(race.next_attempt(t + SECOND), Next::Start(1, 1), "the racer races reference 1 ...");
        assert_eq!(race.to_cancel, vec![0], "... and stops the options' construction there");
        assert!(!race.finish(1, late("P1"), 0));
        assert!(race.results[1].is_none() && race.failure[1].is_none(), "the preempted attempt's failure is dropped");
        race.finish(1, late("P1"), 1);
        assert!(race.results[1].is_none(), "the preempted construction is still to come");
        assert_eq!(race.next_attempt(t + SECOND), Next::Start(1, 0), "restarted");
        assert!(race.to_cancel.is_empty());
        race.finish(1, ok(), 0);
        assert!(matches!(&race.results[1], Some(Built { result: Ok(_), by: None, .. })));
    }

    /// Deciding a reference after another construction was preempted on it, or failed
    /// on it, counts as a win: the winner learns as fast as it preempts.
    #[test]
    fn deciding_a_reference_another_lost_is_a_win() {
        let (mut race, t) = alternative_won_reference_0();
        assert_eq!(race.wins, vec![0, 1]);
        assert_eq!(race.next_attempt(t + SECOND), Next::Start(2, 1));
        assert_eq!(race.next_attempt(t + SECOND), Next::Start(1, 1));
        assert_eq!(race.to_cancel, vec![0], "the options' construction preempted on reference 1");
        race.finish(1, late("P1"), 0);
        assert!(!race.finish(1, ok(), 1), "nothing left running to cancel");
        assert_eq!(race.wins, vec![0, 2], "reference 1 is a win");
        race.finish(2, late("P2"), 1);
        assert_eq!(race.next_attempt(t + SECOND), Next::Start(2, 0), "the other construction after a failure");
        race.finish(2, ok(), 0);
        assert_eq!(race.wins, vec![1, 2], "reference 2 is a win of the options' construction");
    }

    /// A construction that built a reference slow enough to be raced is not preempted:
    /// it may win where another is slow (adi 8-way at extents 16: the first construction
    /// built P6 in 47 s while the lexmin chain raced it in vain).
    #[test]
    fn a_construction_that_built_a_slow_reference_is_not_preempted() {
        let (mut race, t) = new_race(3, 1, 2);
        assert_eq!(race.next_attempt(t), Next::Start(0, 0));
        assert_eq!(race.next_attempt(t), Next::Start(1, 0));
        race.started[0] = Instant::now().checked_sub(2 * SECOND);
        assert!(!race.finish(0, ok(), 0), "built alone, after the racers' wait");
        assert_eq!(race.next_attempt(t), Next::Start(2, 0));
        assert_eq!(race.next_attempt(t + SECOND), Next::Start(1, 1), "the racer");
        assert!(race.finish(1, ok(), 1), "the alternative won");
        race.finish(1, late("P1"), 0);
        assert_eq!(race.next_attempt(t + SECOND), Next::Start(2, 1), "the winner races reference 2 ...");
        assert!(race.to_cancel.is_empty(), "... beside the options' construction");
    }

    /// An alternative the options already use is not raced again.
    #[test]
    fn an_alternative_the_options_use_is_skipped() {
        let mut opts = SetModelOptions::new(LayoutSpec::default(), CacheConfig::parse("assoc=2,line=32,sets=4").unwrap());
        assert!(Alternative::StepwiseDivisions.options(&opts).is_some_and(|o| o.stepwise_divisions));
        assert!(Alternative::DivisionsAtCount.options(&opts).is_none());
        opts.stepwise_divisions = true;
        assert!(Alternative::StepwiseDivisions.options(&opts).is_none());
        assert!(Alternative::DivisionsAtCount.options(&opts).is_some_and(|o| !o.stepwise_divisions));
        let chained = Alternative::LexminChain(4000).options(&opts).unwrap();
        assert_eq!((chained.lexmin_chain_above, chained.stepwise_divisions, chained.sure_misses_first), (Some(4000), true, true));
        assert!(Alternative::LexminChain(9).options(&chained).is_none());
    }
}
