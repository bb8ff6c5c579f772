//! The exact simulator: generates the kernel's accesses in program order (for each
//! statement: right-hand-side reads left to right, then the write; write-allocate, so a
//! write is an access like a read) and runs one or more A-way set-associative LRU caches
//! on them at once. Per reference it counts accesses, hits, compulsory misses (the first
//! touch of a line by any reference) and other misses (the line was in the cache before
//! and has been evicted: conflict and capacity misses).

use crate::affine::Affine;
use crate::config::{check_params, resolve_layout, CacheConfig, DataInfo, LayoutSpec, ParamValues};
use crate::error::{CacheError, Result};
use crate::kernel::{Kernel, Node};
use serde::{Deserialize, Serialize};

/// Per-reference counts from the simulator.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RefStats {
    /// Accesses the reference made (at a level below L1: that reached the level).
    pub accesses: u64,
    /// Accesses whose line was in the cache.
    pub hits: u64,
    /// Misses on the first touch of the line by any reference.
    pub compulsory: u64,
    /// Misses on a line that had been in the cache and was evicted (conflict and capacity).
    pub other: u64,
}

impl RefStats {
    /// All misses: compulsory plus other (`accesses - hits`).
    pub fn misses(&self) -> u64 {
        self.compulsory + self.other
    }
}

/// An affine form over the enclosing loop variables (by depth), parameters substituted.
#[derive(Clone, Debug, PartialEq, Eq)]
struct LinForm {
    constant: i64,
    terms: Vec<(usize, i64)>,
}

impl LinForm {
    /// The coefficient of the loop variable at `depth`.
    fn coeff(&self, depth: usize) -> i64 {
        self.terms.iter().filter(|(d, _)| *d == depth).map(|(_, c)| c).sum()
    }

    #[inline]
    fn eval(&self, vars: &[i64]) -> i64 {
        let mut v = self.constant;
        for &(d, c) in &self.terms {
            v += c * vars[d];
        }
        v
    }
}

#[derive(Clone, Debug)]
enum PNode {
    /// `invariant`: no bound or guard inside depends on this loop's variable, so every
    /// iteration runs the same number of accesses (a time loop around a stencil).
    /// `repeat`: for a loop of loops that is `invariant`, every reference of its body and how
    /// it moves from one iteration to the next ([`Moving`]), so that iterations touching the
    /// lines of the one before in the same order can be counted, not simulated.
    /// `warp`: for an `invariant` loop (of loops, or of statements: a column walk inside one
    /// instance of an innermost loop) whose references of one array all move alike, what
    /// translating whole stretches of its iterations needs ([`warp_iterations`]).
    Loop { depth: usize, lower: LinForm, upper: LinForm, step: i64, body: Vec<PNode>, innermost: bool, invariant: bool, repeat: Vec<Moving>, warp: Option<Box<WarpInfo>> },
    /// A statement's references, and its guards (each `g >= 0`; empty: always runs).
    Stmt(Vec<(usize, LinForm)>, Vec<LinForm>),
}

/// A kernel instantiated at concrete parameter values and layout: loops and byte
/// addresses as affine forms over the loop variables.
#[derive(Clone, Debug)]
pub struct Program {
    nodes: Vec<PNode>,
    nrefs: usize,
    depth: usize,
    /// Each array's start address, element size and count at these values, in declaration order.
    pub data: Vec<DataInfo>,
    addr_lo: i64,
    addr_hi: i64,
    /// What runs before the kernel, its accesses simulated but not counted (a warm start,
    /// [`Program::warmed_by`]); `None`: the kernel starts with an empty cache.
    warmup: Option<Box<Program>>,
    /// Byte addresses touched before the warm-up, oldest first ([`Program::allocated_by_glibc`]).
    touched_before: Vec<i64>,
    /// Simulate every access, also in runs of iterations that only hit ([`Program::every_access`]).
    every_access: bool,
}

/// The cache's state when the kernel starts.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Start {
    /// Empty: every line's first access misses (a `-DPOLYBENCH_TIME` build of PolyBench,
    /// which flushes the cache before the kernel).
    #[default]
    Cold,
    /// What the accesses of this code (`init_array`) left in it (a plain PolyBench build:
    /// the kernel runs right after the arrays are initialised).
    Warm(String),
}

impl Start {
    /// One line for reports.
    pub fn describe(&self) -> String {
        match self {
            Start::Cold => "cold: the cache is empty when the kernel starts (PolyBench with -DPOLYBENCH_TIME flushes it so)".into(),
            Start::Warm(after) => format!("warm: the cache holds what {after}'s accesses left in it (simulated, not counted)"),
        }
    }
}

fn subst(a: &Affine, params: &ParamValues, loop_vars: &[(String, usize)]) -> LinForm {
    let mut f = LinForm { constant: a.constant, terms: vec![] };
    for (name, &c) in &a.coeffs {
        if let Some(v) = params.get(name) {
            f.constant += c * v;
        } else if let Some((_, d)) = loop_vars.iter().find(|(n, _)| n == name) {
            f.terms.push((*d, c));
        } else {
            unreachable!("parser guarantees variables are in scope: {name}");
        }
    }
    f
}

impl Program {
    /// Instantiates `k` at `params` with `layout`.
    pub fn new(k: &Kernel, params: &ParamValues, layout: &LayoutSpec) -> Result<Program> {
        check_params(k, params)?;
        let data = resolve_layout(k, layout, params)?;
        // Per reference: byte address as an affine form over loop variables.
        let mut ref_forms = Vec::new();
        for r in &k.refs {
            let a = &k.arrays[r.array];
            let dims: Vec<i64> = a.dims.iter().map(|d| d.eval(&|n| params.get(n).copied()).unwrap()).collect();
            let mut lin = Affine::constant(0);
            for (i, s) in r.subscripts.iter().enumerate() {
                let stride: i64 = dims[i + 1..].iter().product();
                lin = lin.add(&s.scale(stride));
            }
            let lin = lin.scale(a.elem_size as i64).add(&Affine::constant(data[r.array].start as i64));
            let vars: Vec<(String, usize)> = r.loops.iter().map(|&l| (k.loops[l].var.clone(), k.loops[l].depth)).collect();
            ref_forms.push(subst(&lin, params, &vars));
        }
        // per reference its array, per array its first and last byte (for `WarpInfo`)
        let ref_array: Vec<usize> = k.refs.iter().map(|r| r.array).collect();
        let spans: Vec<(i64, i64)> = data.iter().map(|d| (d.start as i64, (d.start + d.elems * d.elem_size) as i64 - 1)).collect();
        let arrays = (ref_array.as_slice(), spans.as_slice());
        fn build(k: &Kernel, nodes: &[Node], params: &ParamValues, vars: &mut Vec<(String, usize)>, rf: &[LinForm], arrays: (&[usize], &[(i64, i64)])) -> Vec<PNode> {
            nodes
                .iter()
                .map(|n| match n {
                    Node::Stmt(s) => {
                        let st = &k.statements[*s];
                        PNode::Stmt(st.refs.iter().map(|&r| (r, rf[r].clone())).collect(), st.guards.iter().map(|g| subst(g, params, vars)).collect())
                    }
                    Node::Loop { id, body } => {
                        let l = &k.loops[*id];
                        let lower = subst(&l.lower, params, vars);
                        let upper = subst(&l.upper, params, vars);
                        vars.push((l.var.clone(), l.depth));
                        let body_nodes = build(k, body, params, vars, rf, arrays);
                        vars.pop();
                        // Unguarded statements only: their addresses advance by a constant.
                        let innermost = body_nodes.iter().all(|b| matches!(b, PNode::Stmt(_, g) if g.is_empty()));
                        let invariant = !mentions(&body_nodes, l.depth);
                        let repeat = if invariant { moving(&body_nodes, l.depth, l.step) } else { Vec::new() };
                        // also a loop of statements: a column walk whose references move
                        // by whole rows is warped inside one instance of the loop
                        let warp = if invariant { warp_info(&body_nodes, l.depth, l.step, arrays) } else { None };
                        PNode::Loop { depth: l.depth, lower, upper, step: l.step, body: body_nodes, innermost, invariant, repeat, warp }
                    }
                })
                .collect()
        }
        let nodes = build(k, &k.body, params, &mut vec![], &ref_forms, arrays);
        let addr_lo = data.iter().map(|d| d.start as i64).min().unwrap_or(0);
        let addr_hi = data.iter().map(|d| (d.start + d.elems * d.elem_size) as i64).max().unwrap_or(0);
        Ok(Program { nodes, nrefs: k.refs.len(), depth: k.max_depth(), data, addr_lo, addr_hi, warmup: None, touched_before: Vec::new(), every_access: false })
    }

    /// This program after `warm` (the program's initialisation, at the same `params`): the
    /// arrays `warm` shares with the kernel by name are the kernel's (same addresses), its
    /// others come after the kernel's, each aligned to `align`. Simulations then run
    /// `warm`'s accesses first and count only the kernel's.
    pub fn warmed_by(mut self, warm: &Kernel, params: &ParamValues, align: u64) -> Result<Program> {
        let params: ParamValues = params.iter().filter(|(n, _)| warm.params.contains(n)).map(|(n, v)| (n.clone(), *v)).collect();
        let mut next = self.data.iter().map(|d| d.start + d.elems * d.elem_size).max().unwrap_or(0);
        let align = align.max(1);
        let mut bases = std::collections::BTreeMap::new();
        for a in &warm.arrays {
            let start = match self.data.iter().find(|d| d.name == a.name) {
                Some(d) => {
                    if d.elem_size != a.elem_size {
                        return Err(CacheError::Layout(format!("array '{}' has {}-byte elements in the kernel and {}-byte ones in {} (the warm-up)", a.name, d.elem_size, a.elem_size, warm.file)));
                    }
                    d.start
                }
                None => {
                    let s = next.div_ceil(align) * align;
                    let one = resolve_layout(&Kernel { arrays: vec![a.clone()], ..warm.clone() }, &LayoutSpec::Consecutive { start: s, align }, &params)?;
                    next = s + one[0].elems * one[0].elem_size;
                    s
                }
            };
            bases.insert(a.name.clone(), start);
        }
        let w = Program::new(warm, &params, &LayoutSpec::Bases(bases))?;
        self.addr_lo = self.addr_lo.min(w.addr_lo);
        self.addr_hi = self.addr_hi.max(w.addr_hi);
        self.warmup = Some(Box::new(w));
        Ok(self)
    }

    /// The warm start of a PolyBench program also holds what its allocation touched: glibc's
    /// `posix_memalign(&p, 4096, bytes)` (PolyBench's `xmalloc`) writes the chunk's size
    /// field at `p - 8`, and, below the mmap threshold (128 KiB), gives the room after the
    /// array back as a free chunk whose header and list links it writes at `p + nb - 8` and
    /// `p + nb` (`nb` = bytes + 8 rounded up to 16, at least 32: glibc 2.36 `_int_memalign`).
    /// When the array's size is not a multiple of the line, that is the array's last line,
    /// which is then warm although the initialisation never writes the array (atax's `y` and
    /// `tmp`). Each array once, in declaration order, before the warm-up.
    pub fn allocated_by_glibc(mut self) -> Program {
        const MMAP_THRESHOLD: u64 = 128 * 1024;
        for d in &self.data {
            let (mem, bytes) = (d.start as i64, d.elems * d.elem_size);
            self.touched_before.push(mem - 8);
            // _int_malloc(nb + alignment + MINSIZE) comes from the heap below the threshold
            let nb = ((bytes + 8 + 15) & !15).max(32);
            if nb + 4096 + 32 < MMAP_THRESHOLD {
                self.touched_before.extend([mem + nb as i64 - 8, mem + nb as i64]);
            }
        }
        self
    }

    /// This program simulated one access at a time, as the plain simulator did (the same
    /// counts, for benchmarks): without it, an innermost loop's runs of iterations that
    /// only hit and change nothing are counted, not simulated (`CacheSim::skippable`), and
    /// so are the iterations of a loop of loops that repeat the one before (`repeat_iterations`)
    /// or a window of them translated (`warp_iterations`).
    pub fn every_access(mut self) -> Program {
        self.every_access = true;
        self
    }

    /// The cache's state at the kernel's start this program assumes.
    pub fn start(&self, warm_name: &str) -> Start {
        if self.warmup.is_some() {
            Start::Warm(warm_name.to_string())
        } else {
            Start::Cold
        }
    }

    /// The warm-up's accesses, all as one reference `r` (whose counts the caller drops).
    fn warm_up(&self, mut f: impl FnMut(usize, i64), r: usize) {
        for &a in &self.touched_before {
            f(r, a);
        }
        if let Some(w) = &self.warmup {
            w.for_each_access(|_, a| f(r, a));
        }
    }

    /// Calls `f(reference, byte address)` for every access in program order.
    pub fn for_each_access(&self, f: impl FnMut(usize, i64)) {
        self.run(&mut Each(f));
    }

    /// Runs every access in program order into `sink`, which may account for whole runs
    /// of an innermost loop's iterations at once ([`Sink::skip`]).
    fn run(&self, sink: &mut impl Sink) {
        let mut vars = vec![0i64; self.depth.max(1)];
        run_nodes(&self.nodes, &mut vars, sink);
    }

    /// What simulating this program costs, counted without simulating it, up to `limit`
    /// steps (see [`Work`]). A loop whose body is statements only is counted in closed form
    /// (its guards are intervals of its variable), so the count visits the iterations of the
    /// outer loops only: milliseconds where the simulation takes minutes, and bounded by
    /// `limit` where it would take years.
    pub fn work(&self, limit: u64) -> Work {
        self.count_work(limit, None)
    }

    /// [`Program::work`] as the simulator of one `cache` pays it: in an innermost loop it runs
    /// from one line change to the next (`CacheSim::runs`), and of a loop of loops' stretch of
    /// iterations that repeat the lines of the one before it simulates two
    /// (`repeat_iterations`), and of a loop warped by translation (a loop of loops, or an
    /// innermost loop whose references move by whole rows) the first iteration, one window
    /// and the iterations after the last whole window (`warp_iterations`, counted as when the
    /// first window's end state is its start translated; where it is not, the simulator tries
    /// the next window and makes more — in an innermost column walk typically until the walk
    /// has filled every way of the sets it touches, a few windows): `accesses` counts the ones
    /// it makes one at a time, not the iterations it counts as hits or as repeats.
    pub fn simulated_work(&self, limit: u64, cache: &CacheConfig) -> Work {
        if self.every_access {
            return self.work(limit);
        }
        self.count_work(limit, Some(Counted { line: cache.line as i64, assoc: cache.assoc as usize, sets: cache.sets as i64, warp: true }))
    }

    fn count_work(&self, limit: u64, lines: Lines) -> Work {
        // the warm-up is simulated too
        let mut w = self.warmup.as_ref().map_or(Work { accesses: 0, iterations: 0, complete: true }, |p| p.count_work(limit, None));
        // (the warm-up's accesses go one at a time, [`Program::warm_up`])
        let mut vars = vec![0i64; self.depth.max(1)];
        if w.complete {
            count_nodes(&self.nodes, &mut vars, limit, &mut w, lines);
        }
        w
    }

    /// Simulates all `caches` on this program's accesses at once.
    pub fn simulate(&self, caches: &[CacheConfig]) -> Vec<Vec<RefStats>> {
        self.simulate_reporting(caches, |_| {})
    }

    /// [`Program::simulate`], calling `progress(accesses so far)` every 2^24 accesses.
    pub fn simulate_reporting(&self, caches: &[CacheConfig], mut progress: impl FnMut(u64)) -> Vec<Vec<RefStats>> {
        // one reference more: the warm-up's accesses, dropped below
        let mut sims: Vec<CacheSim> = caches.iter().map(|c| CacheSim::new(*c, self.nrefs + 1, self.addr_lo, self.addr_hi)).collect();
        // Caches that differ only in associativity: one recency stack for all of them.
        let mut stack = Stacks::new(caches, self.nrefs + 1);
        self.warm_up(
            |r, a| match stack.as_mut() {
                Some(st) => st.access(r, a),
                None => sims.iter_mut().for_each(|s| s.access(r, a)),
            },
            self.nrefs,
        );
        let mut n = 0u64;
        if sims.len() == 1 && self.every_access {
            let s = &mut sims[0];
            self.for_each_access(|r, a| {
                s.access(r, a);
                tick(&mut n, &mut progress);
            });
        } else if sims.len() == 1 {
            // one cache: runs of iterations that only hit are counted, not simulated
            self.run(&mut Reporting { sink: &mut sims[0], n: 0, next: PROGRESS_MASK + 1, progress: &mut progress });
        } else if let Some(stack) = stack.as_mut() {
            self.for_each_access(|r, a| {
                stack.access(r, a);
                tick(&mut n, &mut progress);
            });
            stack.add_to(&mut sims);
        } else {
            self.for_each_access(|r, a| {
                for s in sims.iter_mut() {
                    s.access(r, a);
                }
                tick(&mut n, &mut progress);
            });
        }
        sims.into_iter()
            .map(|mut s| {
                s.stats.truncate(self.nrefs);
                s.stats
            })
            .collect()
    }
}

/// Progress is reported every 2^24 accesses (about 50 ms of simulation).
const PROGRESS_MASK: u64 = (1 << 24) - 1;

/// Counts one access, and reports the count every 2^24.
#[inline(always)]
fn tick(n: &mut u64, progress: &mut impl FnMut(u64)) {
    *n += 1;
    if *n & PROGRESS_MASK == 0 {
        progress(*n);
    }
}

/// The size of a simulation: its accesses and the iterations of the loops around them,
/// each costing the simulator about the same. Counted by [`Program::work`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Work {
    /// Accesses the simulation makes (every reference's, all statements).
    pub accesses: u64,
    /// Iterations of loops that contain other loops or guarded statements (the other
    /// loops' iterations are their accesses).
    pub iterations: u64,
    /// False when the count stopped at its limit: the true figures are larger.
    pub complete: bool,
}

impl Work {
    /// Accesses plus loop iterations: what the limit of [`Program::work`] bounds.
    pub fn steps(&self) -> u64 {
        self.accesses.saturating_add(self.iterations)
    }
}

/// A reference in the body of a loop of loops, seen from that loop (`PNode::Loop::repeat`):
/// every access it makes in one iteration moves by `delta` bytes in the next.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Moving {
    /// Its byte address without the terms of the variables of the loops inside.
    outer: LinForm,
    /// Its coefficient of the loop's variable times the loop's step, in bytes.
    delta: i64,
    /// The gcd of its coefficients of the variables of the loops inside (0: none): in one
    /// iteration its addresses are all ≡ `outer` modulo gcd(`inner`, line).
    inner: i64,
}

/// The gcd of two coefficients, whatever their signs (0 with 0: none).
fn gcd(a: i64, b: i64) -> i64 {
    crate::model::gcd64(a.unsigned_abs(), b.unsigned_abs()) as i64
}

/// Every reference in `body` (of the loop at `depth` stepping by `step`) as it moves from
/// one iteration to the next; references that move alike once.
fn moving(body: &[PNode], depth: usize, step: i64) -> Vec<Moving> {
    fn walk(nodes: &[PNode], depth: usize, step: i64, out: &mut Vec<Moving>) {
        for n in nodes {
            match n {
                PNode::Stmt(refs, _) => {
                    for (_, f) in refs {
                        let outer = LinForm { constant: f.constant, terms: f.terms.iter().filter(|(d, _)| *d <= depth).copied().collect() };
                        let inner = f.terms.iter().filter(|(d, _)| *d > depth).fold(0, |g, &(d, _)| gcd(g, f.coeff(d)));
                        let m = Moving { outer, delta: f.coeff(depth) * step, inner };
                        if !out.contains(&m) {
                            out.push(m);
                        }
                    }
                }
                PNode::Loop { body, .. } => walk(body, depth, step, out),
            }
        }
    }
    let mut out = Vec::new();
    walk(body, depth, step, &mut out);
    out
}

/// How many of the iterations after the one at `vars` of a loop whose body's references
/// move as `repeat` says touch the same lines in the same order as it, with lines of `line`
/// bytes. Sufficient, not necessary: a reference's addresses in one iteration are ≡ `o`
/// modulo g = gcd(inner, line), so each is at most `line - g + o` into its line, and all
/// stay in their lines when moved by `delta` while `o + delta` stays in `0..g`.
fn same_lines_ahead(repeat: &[Moving], vars: &[i64], line: i64) -> u64 {
    let mut k = u64::MAX;
    for m in repeat {
        if m.delta == 0 {
            continue;
        }
        let g = gcd(m.inner, line);
        if m.delta.abs() >= g {
            return 0;
        }
        let o = m.outer.eval(vars).rem_euclid(g);
        let room = if m.delta > 0 { g - 1 - o } else { o };
        k = k.min((room / m.delta.abs()) as u64);
        if k == 0 {
            return 0;
        }
    }
    k
}

/// Whether a bound or guard in `nodes` uses the loop variable at `depth`.
fn mentions(nodes: &[PNode], depth: usize) -> bool {
    let uses = |f: &LinForm| f.coeff(depth) != 0;
    nodes.iter().any(|n| match n {
        PNode::Stmt(_, guards) => guards.iter().any(uses),
        PNode::Loop { lower, upper, body, .. } => uses(lower) || uses(upper) || mentions(body, depth),
    })
}

/// Iterations of `lo + k·step`, below `hi`.
fn trips(lo: i64, hi: i64, step: i64) -> u64 {
    let (lo, hi, step) = (lo as i128, hi as i128, step as i128);
    u64::try_from(((hi - lo + step - 1).div_euclid(step)).max(0)).unwrap_or(u64::MAX)
}

/// Iterations of `lo + k·step` (`k ≥ 0`, below `hi`) at which every guard holds, each guard
/// being `c + a·v ≥ 0` in the loop variable `v`: the intersection of intervals of `k`.
fn guarded_trips(lo: i64, hi: i64, step: i64, guards: &[(i128, i128)]) -> u64 {
    let (mut kmin, mut kmax) = (0i128, trips(lo, hi, step) as i128 - 1);
    let (lo, step) = (lo as i128, step as i128);
    for &(c, a) in guards {
        // c + a·(lo + k·step) ≥ 0  ⇔  b + s·k ≥ 0
        let (b, s) = (c + a * lo, a * step);
        match s.signum() {
            0 if b < 0 => return 0,
            0 => {}
            1 => kmin = kmin.max((-b).div_euclid(s) + i128::from((-b).rem_euclid(s) != 0)),
            _ => kmax = kmax.min(b.div_euclid(-s)),
        }
    }
    u64::try_from((kmax - kmin + 1).max(0)).unwrap_or(u64::MAX)
}

fn count_nodes(nodes: &[PNode], vars: &mut [i64], limit: u64, w: &mut Work, lines: Lines) {
    for n in nodes {
        count_node(n, vars, limit, w, lines);
        if w.steps() > limit {
            w.complete = false;
        }
        if !w.complete {
            return;
        }
    }
}

fn count_node(n: &PNode, vars: &mut [i64], limit: u64, w: &mut Work, lines: Lines) {
    match n {
        PNode::Stmt(refs, guards) => {
            if guards.iter().all(|g| g.eval(vars) >= 0) {
                w.accesses = w.accesses.saturating_add(refs.len() as u64);
            }
        }
        PNode::Loop { depth, lower, upper, step, body, invariant, repeat, warp, .. } => {
            let (lo, hi) = (lower.eval(vars), upper.eval(vars));
            if lo >= hi {
                return;
            }
            let statements = body.iter().all(|b| matches!(b, PNode::Stmt(..)));
            if let Some(c) = lines.filter(|c| c.warp && *invariant) {
                if let Some(plan) = plan_for(warp.as_deref(), body, repeat, vars, (*depth, lo, hi, *step), (c.line, c.sets)) {
                    // as `warp_iterations` runs it when the first window's end state is the
                    // translation of its start: the first iteration, one window (no other
                    // translation inside it), the whole windows after it counted, the rest
                    let n = trips(lo, hi, *step);
                    let p = plan.period;
                    let inside = Some(Counted { warp: false, ..c });
                    let window_end = 1 + p;
                    let rest = window_end + (n - window_end) / p * p;
                    if statements {
                        // a loop of statements: every iteration makes the same accesses (no
                        // guard uses its variable), one at a time in the iterations simulated
                        let simulated = window_end + (n - rest);
                        let mut once = Work { accesses: 0, iterations: 0, complete: true };
                        vars[*depth] = lo;
                        count_nodes(body, vars, limit, &mut once, None);
                        w.accesses = w.accesses.saturating_add(once.accesses.saturating_mul(simulated));
                        if body.iter().any(|b| matches!(b, PNode::Stmt(_, g) if !g.is_empty())) {
                            w.iterations = w.iterations.saturating_add(simulated);
                        }
                        return;
                    }
                    for t in (0..window_end).chain(rest..n) {
                        vars[*depth] = lo + step * t as i64;
                        w.iterations = w.iterations.saturating_add(1);
                        count_nodes(body, vars, limit, w, if (1..window_end).contains(&t) { inside } else { lines });
                        if !w.complete || w.steps() > limit {
                            w.complete = false;
                            return;
                        }
                    }
                    return;
                }
            }
            if statements {
                count_statements(body, vars, *depth, (lo, hi, *step), w, lines);
                return;
            }
            if let Some(Counted { line, .. }) = lines.filter(|_| *invariant) {
                // as `run_nodes` runs it: two iterations of each stretch that touches the
                // same lines in the same order, the rest counted
                let n = trips(lo, hi, *step);
                let mut t = 0u64;
                while t < n {
                    vars[*depth] = lo + step * t as i64;
                    let same = same_lines_ahead(repeat, vars, line);
                    let simulated = if same == 0 || t + 1 == n { 1 } else { 2 };
                    for _ in 0..simulated {
                        vars[*depth] = lo + step * t as i64;
                        w.iterations = w.iterations.saturating_add(1);
                        count_nodes(body, vars, limit, w, lines);
                        if !w.complete || w.steps() > limit {
                            w.complete = false;
                            return;
                        }
                        t += 1;
                    }
                    if simulated == 2 {
                        t += (same - 1).min(n - t);
                    }
                }
                return;
            }
            if *invariant && lines.is_none() {
                // Every iteration costs the same: count one, multiply. (Not the runs of
                // hits: where a row starts in a line changes from one iteration to the next.)
                vars[*depth] = lo;
                let mut once = Work { accesses: 0, iterations: 0, complete: true };
                count_nodes(body, vars, limit, &mut once, lines);
                let n = trips(lo, hi, *step);
                w.accesses = w.accesses.saturating_add(once.accesses.saturating_mul(n));
                w.iterations = w.iterations.saturating_add(once.iterations.saturating_add(1).saturating_mul(n));
                w.complete &= once.complete;
                return;
            }
            let mut v = lo;
            while v < hi {
                vars[*depth] = v;
                w.iterations = w.iterations.saturating_add(1);
                count_nodes(body, vars, limit, w, lines);
                if !w.complete || w.steps() > limit {
                    w.complete = false;
                    return;
                }
                v += step;
            }
        }
    }
}

/// A loop of statements only: per statement, its guards as intervals of the loop variable.
fn count_statements(body: &[PNode], vars: &mut [i64], depth: usize, (lo, hi, step): (i64, i64, i64), w: &mut Work, lines: Lines) {
    vars[depth] = 0;
    if let Some(visited) = lines.and_then(|c| run_accesses(body, vars, depth, (lo, hi, step), c)) {
        w.accesses = w.accesses.saturating_add(visited);
        return;
    }
    for b in body {
        let PNode::Stmt(refs, guards) = b else { unreachable!("checked by the caller") };
        let linear: Vec<(i128, i128)> = guards.iter().map(|g| (g.eval(vars) as i128, g.coeff(depth) as i128)).collect();
        let trips = guarded_trips(lo, hi, step, &linear);
        w.accesses = w.accesses.saturating_add(trips.saturating_mul(refs.len() as u64));
    }
    // The simulator visits every iteration of a loop with guards, also where none holds.
    if body.iter().any(|b| matches!(b, PNode::Stmt(_, g) if !g.is_empty())) {
        w.iterations = w.iterations.saturating_add(trips(lo, hi, step));
    }
}

/// The cache whose runs of hits [`Program::simulated_work`] counts (`None`: every access).
type Lines = Option<Counted>;

/// The cache [`Program::simulated_work`] counts for, and whether a loop may be warped by a
/// translation here (not inside the window of another one: [`warp_iterations`]).
#[derive(Clone, Copy, Debug)]
struct Counted {
    line: i64,
    assoc: usize,
    sets: i64,
    warp: bool,
}

/// The accesses [`CacheSim::runs`] makes one at a time in an innermost loop of unguarded
/// statements (`vars[depth]` = 0), counted in closed form, or `None` where it does not run
/// the loop (guards, more accesses an iteration than ways or [`RUN_REFS`], an advance of a
/// line or more). At most one iteration per line change is simulated (with no more accesses
/// than ways, the iterations between are counted); the references that advance alike from
/// the same offset in a line change lines together, so each such group counts once.
fn run_accesses(body: &[PNode], vars: &[i64], depth: usize, (lo, hi, step): (i64, i64, i64), Counted { line, assoc, .. }: Counted) -> Option<u64> {
    // per reference (first address, advance); no allocation: counted once per loop instance
    let mut refs = [(0i64, 0i64); RUN_REFS];
    let mut m = 0;
    for b in body {
        let PNode::Stmt(r, guards) = b else { return None };
        if !guards.is_empty() || m + r.len() > assoc.min(RUN_REFS) {
            return None;
        }
        for (_, f) in r {
            refs[m] = (f.eval(vars) + f.coeff(depth) * lo, f.coeff(depth) * step);
            m += 1;
        }
    }
    if m == 0 || refs[..m].iter().any(|&(_, s)| s.abs() >= line) {
        return None;
    }
    let n = trips(lo, hi, step);
    let mut changes = 0u64;
    for (i, &(a, s)) in refs[..m].iter().enumerate() {
        let alike = |&(b, t): &(i64, i64)| t == s && b.rem_euclid(line) == a.rem_euclid(line);
        if s == 0 || refs[..i].iter().any(alike) {
            continue;
        }
        let last = a as i128 + (n as i128 - 1) * s as i128;
        changes = changes.saturating_add((last.div_euclid(line as i128) - (a as i128).div_euclid(line as i128)).unsigned_abs() as u64);
    }
    Some(changes.saturating_add(1).min(n).saturating_mul(m as u64))
}

/// Where [`Program::run`] sends the accesses.
trait Sink {
    /// One access by reference `r` to byte address `addr`.
    fn access(&mut self, r: usize, addr: i64);
    /// An innermost loop has just run one iteration whose accesses were `cur` (reference,
    /// address of the next iteration, advance per iteration), in this order, and `left`
    /// iterations remain: the number of them (at most `left`) the sink has accounted for
    /// without their accesses, 0 when it cannot.
    #[inline(always)]
    fn skip(&mut self, _cur: &[(usize, i64, i64)], _left: u64) -> u64 {
        0
    }
    /// Whether [`Sink::skip`] can ever account for iterations of a loop that accesses
    /// `cur` (asked once per loop, so that a loop where it cannot pays nothing for it).
    #[inline(always)]
    fn may_skip(&self, _cur: &[(usize, i64, i64)]) -> bool {
        false
    }
    /// The line size in bytes when the sink can count whole iterations of a loop of loops
    /// that repeat the one before ([`Sink::repeat`]), `None` when it cannot.
    #[inline(always)]
    fn repeat_line(&self) -> Option<i64> {
        None
    }
    /// Copies the counts so far into `into`, for [`Sink::repeat`].
    fn mark(&self, _into: &mut Vec<RefStats>) {}
    /// Adds `k` times what was counted since [`Sink::mark`] gave `since` (one iteration
    /// that `k` more repeat exactly); returns the accesses added.
    fn repeat(&mut self, _since: &[RefStats], _k: u64) -> u64 {
        0
    }
    /// The line size and number of sets when the sink can warp a loop by translating its
    /// cache state ([`warp_iterations`]) now; `None` when it cannot, or while it is already
    /// recording the window of another loop.
    #[inline(always)]
    fn warp_shape(&self) -> Option<(i64, i64)> {
        None
    }
    /// A window of `plan.period` iterations starts: keep the state and the counts, and
    /// record the misses of the lines of arrays that move.
    fn warp_begin(&mut self, _plan: &WarpPlan) {}
    /// The window has ended: when the state is the one it started from translated by
    /// `plan`, adds up to `windows` more windows' counts at once and translates the state
    /// to where they end. Returns the windows added and their accesses.
    fn warp_end(&mut self, _plan: &WarpPlan, _windows: u64) -> (u64, u64) {
        (0, 0)
    }
    /// Runs all `n` iterations (`n ≥ 1`) of an innermost loop whose accesses are `cur`
    /// (reference, address in the first iteration, advance per iteration), in this order.
    /// By default one iteration at a time, asking [`Sink::skip`] after each.
    #[inline(always)]
    fn inner(&mut self, cur: &mut [(usize, i64, i64)], n: u64) {
        let may_skip = self.may_skip(cur);
        let mut t = 0u64;
        while t < n {
            for e in cur.iter_mut() {
                self.access(e.0, e.1);
                e.1 += e.2;
            }
            t += 1;
            if may_skip && t < n {
                let k = self.skip(cur, n - t);
                if k > 0 {
                    for e in cur.iter_mut() {
                        e.1 += e.2 * k as i64;
                    }
                    t += k;
                }
            }
        }
    }
}

/// A closure as a [`Sink`] that sees every access.
struct Each<F>(F);
impl<F: FnMut(usize, i64)> Sink for Each<F> {
    #[inline(always)]
    fn access(&mut self, r: usize, addr: i64) {
        (self.0)(r, addr)
    }
}

/// A [`Sink`] that calls `progress(accesses so far)` every 2^24 accesses or so.
struct Reporting<'a, S, P> {
    sink: &'a mut S,
    n: u64,
    next: u64,
    progress: &'a mut P,
}
impl<S: Sink, P: FnMut(u64)> Reporting<'_, S, P> {
    #[inline(always)]
    fn count(&mut self, k: u64) {
        self.n += k;
        if self.n >= self.next {
            self.next = self.n + PROGRESS_MASK + 1;
            (self.progress)(self.n);
        }
    }
}
impl<S: Sink, P: FnMut(u64)> Sink for Reporting<'_, S, P> {
    #[inline(always)]
    fn access(&mut self, r: usize, addr: i64) {
        self.sink.access(r, addr);
        self.count(1);
    }
    #[inline(always)]
    fn skip(&mut self, cur: &[(usize, i64, i64)], left: u64) -> u64 {
        let k = self.sink.skip(cur, left);
        self.count(k * cur.len() as u64);
        k
    }
    #[inline(always)]
    fn may_skip(&self, cur: &[(usize, i64, i64)]) -> bool {
        self.sink.may_skip(cur)
    }
    #[inline(always)]
    fn repeat_line(&self) -> Option<i64> {
        self.sink.repeat_line()
    }
    fn mark(&self, into: &mut Vec<RefStats>) {
        self.sink.mark(into)
    }
    fn repeat(&mut self, since: &[RefStats], k: u64) -> u64 {
        let added = self.sink.repeat(since, k);
        self.count(added);
        added
    }
    #[inline(always)]
    fn warp_shape(&self) -> Option<(i64, i64)> {
        self.sink.warp_shape()
    }
    fn warp_begin(&mut self, plan: &WarpPlan) {
        self.sink.warp_begin(plan)
    }
    fn warp_end(&mut self, plan: &WarpPlan, windows: u64) -> (u64, u64) {
        let (k, added) = self.sink.warp_end(plan, windows);
        self.count(added);
        (k, added)
    }
    #[inline(always)]
    fn inner(&mut self, cur: &mut [(usize, i64, i64)], n: u64) {
        self.sink.inner(cur, n);
        self.count(n.saturating_mul(cur.len() as u64));
    }
}

#[inline(always)]
fn run_nodes(nodes: &[PNode], vars: &mut [i64], f: &mut impl Sink) {
    for n in nodes {
        match n {
            PNode::Stmt(refs, guards) => {
                if guards.iter().all(|g| g.eval(vars) >= 0) {
                    for (r, form) in refs {
                        f.access(*r, form.eval(vars));
                    }
                }
            }
            PNode::Loop { depth, lower, upper, step, body, innermost, invariant, repeat, warp } => {
                let lo = lower.eval(vars);
                let hi = upper.eval(vars);
                if lo >= hi {
                    continue;
                }
                if let Some(plan) = f.warp_shape().filter(|_| *invariant).and_then(|c| plan_for(warp.as_deref(), body, repeat, vars, (*depth, lo, hi, *step), c)) {
                    warp_iterations(body, vars, f, (*depth, lo, hi, *step), &plan, *innermost);
                    continue;
                }
                if let Some(line) = f.repeat_line().filter(|_| *invariant && !*innermost) {
                    repeat_iterations(body, vars, f, (*depth, lo, hi, *step), repeat, line);
                    continue;
                }
                if *innermost {
                    // Addresses advance by a constant per iteration: compute them once.
                    vars[*depth] = lo;
                    let mut cur: Vec<(usize, i64, i64)> = Vec::new();
                    for b in body {
                        if let PNode::Stmt(refs, _) = b {
                            for (r, form) in refs {
                                cur.push((*r, form.eval(vars), form.coeff(*depth) * step));
                            }
                        }
                    }
                    if cur.is_empty() {
                        // No access in the body: nothing to visit (a loop of 3·10^10 empty
                        // iterations timed the kernel fuzzer out).
                        continue;
                    }
                    // loop steps are positive (the loop runs while v < hi)
                    let n = ((hi - lo + step - 1) / step) as u64;
                    f.inner(&mut cur, n);
                    let v = lo + step * n as i64;
                    vars[*depth] = v;
                } else {
                    let mut v = lo;
                    while v < hi {
                        vars[*depth] = v;
                        run_nodes(body, vars, f);
                        v += step;
                    }
                }
            }
        }
    }
}

/// The iterations of a loop of loops at `depth` whose bounds and guards inside do not use
/// its variable, where a stretch of iterations touches the same lines in the same order
/// (`same_lines_ahead`: no reference leaves its lines): two of them are simulated, the
/// rest of the stretch repeats the second exactly and is counted (`Sink::repeat`). LRU
/// makes this exact: after a sequence S of accesses, each set holds S's lines of it, most
/// recent first, then the lines it held before that S did not touch; so S applied twice
/// leaves the state S applied once leaves, and every later S, from that state again,
/// makes the same hits and misses (all misses then of lines seen before). This is warping
/// (Morelli and Reineke, PLDI 2022) with the identity as the translation.
fn repeat_iterations(body: &[PNode], vars: &mut [i64], f: &mut impl Sink, (depth, lo, hi, step): (usize, i64, i64, i64), repeat: &[Moving], line: i64) {
    let n = trips(lo, hi, step);
    let mut mark = Vec::new();
    let mut t = 0u64;
    while t < n {
        vars[depth] = lo + step * t as i64;
        let same = same_lines_ahead(repeat, vars, line);
        run_nodes(body, vars, f);
        t += 1;
        if same == 0 || t == n {
            continue;
        }
        // the next iteration touches these lines in this order: it leaves the state it
        // finds, so each one after it like it makes its hits and misses again
        vars[depth] = lo + step * t as i64;
        f.mark(&mut mark);
        run_nodes(body, vars, f);
        t += 1;
        let k = (same - 1).min(n - t);
        if k > 0 {
            f.repeat(&mark, k);
            t += k;
        }
    }
}

/// What warping a loop of loops by translation needs, from its body alone
/// (`PNode::Loop::warp`; see [`warp_iterations`]).
#[derive(Clone, Debug)]
struct WarpInfo {
    /// The arrays the body moves: (array, bytes all its references move from one iteration
    /// to the next, never 0).
    shifts: Vec<(usize, i64)>,
    /// Per reference of the kernel, its array.
    ref_array: Vec<usize>,
    /// Per array, its first and last byte.
    spans: Vec<(i64, i64)>,
}

/// The [`WarpInfo`] of a loop at `depth` stepping by `step` whose bounds and guards inside do
/// not use its variable, or `None` when one array has references that move differently (one
/// translation per array is what makes a window's end state comparable with its start) or
/// none moves (the identity: `repeat_iterations`).
fn warp_info(body: &[PNode], depth: usize, step: i64, (ref_array, spans): (&[usize], &[(i64, i64)])) -> Option<Box<WarpInfo>> {
    fn walk(nodes: &[PNode], depth: usize, step: i64, ref_array: &[usize], by_array: &mut Vec<(usize, i64)>) -> bool {
        nodes.iter().all(|n| match n {
            PNode::Stmt(refs, _) => refs.iter().all(|(r, f)| {
                let (a, d) = (ref_array[*r], f.coeff(depth).saturating_mul(step));
                match by_array.iter().find(|(b, _)| *b == a) {
                    Some(&(_, e)) => e == d,
                    None => {
                        by_array.push((a, d));
                        true
                    }
                }
            }),
            PNode::Loop { body, .. } => walk(body, depth, step, ref_array, by_array),
        })
    }
    let mut by_array = Vec::new();
    if !walk(body, depth, step, ref_array, &mut by_array) {
        return None;
    }
    by_array.retain(|&(_, d)| d != 0);
    (!by_array.is_empty()).then(|| Box::new(WarpInfo { shifts: by_array, ref_array: ref_array.to_vec(), spans: spans.to_vec() }))
}

/// A loop instance's warping for one cache shape ([`plan_for`]).
#[derive(Clone, Debug)]
struct WarpPlan {
    /// Iterations in one window: the fewest after which every array's move is a whole
    /// number of times sets × line (each line stays in its set).
    period: u64,
    /// Per array that moves: its first and last line, and the lines it moves per window.
    arrays: Vec<(i64, i64, i64)>,
    /// Per reference, the index in `arrays` of its array when that array moves.
    moving: Vec<Option<usize>>,
}

impl WarpPlan {
    /// The index in `arrays` of the moving array that holds `line`.
    #[inline]
    fn array_of(&self, line: i64) -> Option<usize> {
        self.arrays.iter().position(|&(first, last, _)| (first..=last).contains(&line))
    }
}

/// The plan to warp the loop at `depth` (from `lo` below `hi` by `step`, the outer loops'
/// variables in `vars`) on a cache of `sets` sets of `line`-byte lines, or `None` where it
/// does not apply: no [`WarpInfo`]; no reference moves out of its lines from one iteration
/// to the next (then `same_lines_ahead` finds stretches for `repeat_iterations` where it
/// would take windows of sets × line / delta iterations); fewer than 1 + 2 windows of
/// iterations; two arrays share a line; or a reference may leave its array's bytes within
/// this loop (by intervals of the loop variables, guards left out: an over-approximation).
/// The last two make the translation of a line decided by the array its address lies in
/// the same as the one its reference moves by. Both the simulator and
/// [`Program::simulated_work`] ask this, so they warp the same loops.
fn plan_for(info: Option<&WarpInfo>, body: &[PNode], repeat: &[Moving], vars: &mut [i64], (depth, lo, hi, step): (usize, i64, i64, i64), (line, sets): (i64, i64)) -> Option<WarpPlan> {
    let info = info?;
    // where a reference moves within its lines, stretches of the identity are found instead
    if !repeat.iter().any(|m| m.delta != 0 && m.delta.abs() >= gcd(m.inner, line)) {
        return None;
    }
    let n = trips(lo, hi, step);
    let whole = line.checked_mul(sets)?;
    let mut period = 1u64;
    for &(_, d) in &info.shifts {
        let p = (whole / gcd(d, whole)) as u64;
        period = period.checked_mul(p / crate::model::gcd64(period, p))?;
        if period.checked_mul(2)?.checked_add(1)? > n {
            return None;
        }
    }
    // no two arrays share a line
    let mut spans: Vec<(i64, i64)> = info.spans.iter().copied().filter(|(a, b)| a <= b).collect();
    spans.sort();
    if spans.windows(2).any(|w| w[0].1.div_euclid(line) >= w[1].0.div_euclid(line)) {
        return None;
    }
    // every reference inside its array over the whole loop
    let mut bx: Vec<(i128, i128)> = vars.iter().map(|&v| (v as i128, v as i128)).collect();
    bx[depth] = (lo as i128, lo as i128 + (n as i128 - 1) * step as i128);
    fn range(f: &LinForm, bx: &[(i128, i128)]) -> (i128, i128) {
        f.terms.iter().fold((f.constant as i128, f.constant as i128), |(lo, hi), &(d, c)| {
            let (a, b) = (c as i128 * bx[d].0, c as i128 * bx[d].1);
            (lo + a.min(b), hi + a.max(b))
        })
    }
    fn inside(nodes: &[PNode], bx: &mut [(i128, i128)], info: &WarpInfo) -> bool {
        nodes.iter().all(|n| match n {
            PNode::Stmt(refs, _) => refs.iter().all(|(r, f)| {
                let (lo, hi) = range(f, bx);
                let (first, last) = info.spans[info.ref_array[*r]];
                first as i128 <= lo && hi <= last as i128
            }),
            PNode::Loop { depth, lower, upper, body, .. } => {
                let (from, to) = (range(lower, bx).0, range(upper, bx).1);
                if from >= to {
                    return true; // never runs
                }
                bx[*depth] = (from, to - 1);
                inside(body, bx, info)
            }
        })
    }
    if !inside(body, &mut bx, info) {
        return None;
    }
    let mut arrays = Vec::new();
    for &(a, d) in &info.shifts {
        let (first, last) = info.spans[a];
        arrays.push((first.div_euclid(line), last.div_euclid(line), d.checked_mul(period as i64)? / line));
    }
    let moving = info.ref_array.iter().map(|a| info.shifts.iter().position(|(b, _)| b == a)).collect();
    Some(WarpPlan { period, arrays, moving })
}

/// The iterations of a loop whose bounds and guards inside do not use its variable (a loop
/// of loops, or of statements: `innermost`, unguarded, run as `run_nodes` runs one), warped
/// by translation (Morelli and Reineke, PLDI 2022). Iteration t + p makes
/// iteration t's accesses with each array's references moved by the same `p·delta` bytes,
/// a whole number of times sets × line (`WarpPlan::period`): the translation φ that moves
/// each line of a moving array by its array's lines, and leaves every other line, keeps
/// each line in its set. After a first iteration (which may bring in what came before),
/// windows of p iterations are simulated; when the state (each set's tags, most recent
/// first) at a window's end is φ of the state at its start, every later window repeats it
/// under φ. Why: LRU decides hit or miss and the next state from which lines are equal and
/// which share a set; φ is injective and keeps sets on the window's start state and the
/// lines it accesses (two arrays share no line, every reference stays in its array:
/// `plan_for`; a cached line whose translations would leave its array limits how many
/// windows are added), so the window after, whose accesses are φ of this one's, from φ of
/// this one's start state, makes the same hits and misses and ends in φ of its end state —
/// and so on for every whole window that follows. Its counts are added that many times;
/// what differs is only which misses are first touches of a line: a miss in a later window
/// on a line of an array that does not move is of a line this window touched; on a moving
/// array's line y = φʲ(x) it is a first touch exactly when y was never seen, and only the
/// first miss of each such x in this window can be (a line first touched by a hit was
/// cached at the start, and so is its translate), so those are recorded and their
/// translates looked up in the lines seen, window after window, in order. The state is
/// then translated to the last window's end. When the states differ, the next window is
/// tried; the rest of the loop is simulated.
///
/// φ is taken set by set (`CacheSim::warp_windows`): in a set that no reference of a moving
/// array accessed in the window, the identity (the windows after it access the same lines
/// there, those of arrays that do not move; after the first iteration such a set no longer
/// changes, LRU being idempotent on a repeated sequence, and its state is compared all the
/// same). So lines of a moving array left in sets the loop never reaches (correlation's
/// walk down two columns uses half the sets; the other half hold earlier columns' lines)
/// do not stop the warp. An innermost loop of correlation, covariance or gramschmidt walks
/// columns of rows of 150 lines: windows of 32 iterations (150 × 32 lines, a multiple of
/// 64 sets), its states repeating once the walk has replaced every way of its sets.
fn warp_iterations(body: &[PNode], vars: &mut [i64], f: &mut impl Sink, (depth, lo, hi, step): (usize, i64, i64, i64), plan: &WarpPlan, innermost: bool) {
    let n = trips(lo, hi, step);
    let p = plan.period;
    // a loop of unguarded statements: (reference, address in the first iteration, advance)
    // computed once, its iterations run as `run_nodes` runs an innermost loop
    let mut cur: Vec<(usize, i64, i64)> = Vec::new();
    if innermost {
        vars[depth] = lo;
        for b in body {
            if let PNode::Stmt(refs, _) = b {
                for (r, form) in refs {
                    cur.push((*r, form.eval(vars), form.coeff(depth) * step));
                }
            }
        }
    }
    let first: Vec<i64> = cur.iter().map(|e| e.1).collect();
    // iterations `from..from + count`
    let mut iterations = |f: &mut _, vars: &mut [i64], from: u64, count: u64| {
        if count == 0 {
            return;
        }
        if innermost {
            for (e, &a) in cur.iter_mut().zip(&first) {
                e.1 = a + e.2 * from as i64;
            }
            Sink::inner(f, &mut cur, count);
        } else {
            for t in from..from + count {
                vars[depth] = lo + step * t as i64;
                run_nodes(body, vars, f);
            }
        }
    };
    iterations(f, vars, 0, 1);
    let mut t = 1u64;
    while t + 2 * p <= n {
        f.warp_begin(plan);
        iterations(f, vars, t, p);
        t += p;
        let (windows, _) = f.warp_end(plan, (n - t) / p);
        if windows > 0 {
            t += windows * p;
            break;
        }
    }
    iterations(f, vars, t, n - t);
    vars[depth] = lo + step * n as i64;
}

/// Set of lines touched so far: a bitmap in pages of `PAGE_LINES` lines, allocated only
/// where lines are touched. Arrays at ordinary process addresses (`0x5555…`, `0x7fff…`) lie
/// terabytes apart; one bitmap from the lowest to the highest line would need gigabytes,
/// pages need memory in proportion to the lines actually used. The pages stay where they
/// are; the few most recently used are found by comparing their keys, the others through
/// a hash map by a multiplicative hash. (Before, one page was kept aside and swapped with
/// the map's whenever the key changed: a column walk over two arrays, syr2k at LARGE,
/// spent 64 % of its time hashing with SipHash and moving pages in and out, perf.)
struct Seen {
    pages: Vec<Box<[u64; PAGE_WORDS]>>,
    index: std::collections::HashMap<i64, usize, std::hash::BuildHasherDefault<KeyHash>>,
    /// (key, page) of the most recently used pages, most recent first; `i64::MIN`: none.
    recent: [(i64, usize); RECENT_PAGES],
}

const PAGE_WORDS: usize = 4096;
const PAGE_LINES: i64 = PAGE_WORDS as i64 * 64;
const RECENT_PAGES: usize = 4;

/// A page key's hash: a multiplication by an odd constant, its high bits folded down
/// (hashbrown takes both the low bits and the top seven).
#[derive(Default)]
struct KeyHash(u64);

impl std::hash::Hasher for KeyHash {
    fn finish(&self) -> u64 {
        self.0 ^ (self.0 >> 29)
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 ^ b as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        }
    }
    fn write_i64(&mut self, k: i64) {
        self.0 = (k as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }
}

impl Seen {
    fn new() -> Seen {
        Seen { pages: Vec::new(), index: Default::default(), recent: [(i64::MIN, 0); RECENT_PAGES] }
    }

    #[inline]
    fn insert(&mut self, line: i64) -> bool {
        let key = line.div_euclid(PAGE_LINES);
        let p = if self.recent[0].0 == key {
            self.recent[0].1
        } else if self.recent[1].0 == key {
            // two arrays walked in turn: their pages take turns in front
            self.recent.swap(0, 1);
            self.recent[0].1
        } else {
            self.page(key)
        };
        let page = &mut self.pages[p];
        let off = line.rem_euclid(PAGE_LINES);
        let (w, b) = ((off >> 6) as usize, off & 63);
        let new = page[w] & (1 << b) == 0;
        page[w] |= 1 << b;
        new
    }

    /// Whether every line from `first` to `last` has been touched (a word at a time).
    fn all(&self, first: i64, last: i64) -> bool {
        let mut line = first;
        while line <= last {
            let key = line.div_euclid(PAGE_LINES);
            let Some(&p) = self.index.get(&key) else { return false };
            let page = &self.pages[p];
            let end = ((key + 1) * PAGE_LINES - 1).min(last);
            let (a, b) = (line.rem_euclid(PAGE_LINES), end.rem_euclid(PAGE_LINES));
            let (wa, wb) = ((a >> 6) as usize, (b >> 6) as usize);
            for (w, &word) in page.iter().enumerate().take(wb + 1).skip(wa) {
                let from = if w == wa { a & 63 } else { 0 };
                let to = if w == wb { b & 63 } else { 63 };
                let mask = (u64::MAX >> (63 - to)) & (u64::MAX << from);
                if word & mask != mask {
                    return false;
                }
            }
            line = end + 1;
        }
        true
    }

    /// The page of `key` (allocated if new), made the most recent.
    #[cold]
    fn page(&mut self, key: i64) -> usize {
        let at = match self.recent.iter().position(|&(k, _)| k == key) {
            Some(i) => i,
            None => {
                let next = self.pages.len();
                let p = *self.index.entry(key).or_insert(next);
                if p == next {
                    self.pages.push(Box::new([0; PAGE_WORDS]));
                }
                self.recent[RECENT_PAGES - 1] = (key, p);
                RECENT_PAGES - 1
            }
        };
        // not `rotate_right`, which goes through memmove (perf: a fifth of syr2k's time)
        let front = self.recent[at];
        for j in (1..=at).rev() {
            self.recent[j] = self.recent[j - 1];
        }
        self.recent[0] = front;
        front.1
    }
}

/// Makes `slot[i]` the most recently used tag of an LRU set (tags from most to least
/// recently used): the ones before it move back one place. A loop, not
/// `slice::rotate_right`, which goes through memmove: on sets of 2 to 16 tags that call
/// was a third of the simulator's time (perf, the interpolation of gemm).
#[inline(always)]
fn move_to_front(slot: &mut [i64], i: usize) {
    let tag = slot[i];
    for j in (1..=i).rev() {
        slot[j] = slot[j - 1];
    }
    slot[0] = tag;
}

/// Puts `line` at the front of a full LRU set, dropping the least recently used tag
/// (returned; `i64::MIN` for an empty way).
#[inline(always)]
fn push_front(slot: &mut [i64], line: i64) -> i64 {
    let last = slot.len() - 1;
    let victim = slot[last];
    for j in (1..=last).rev() {
        slot[j] = slot[j - 1];
    }
    slot[0] = line;
    victim
}

/// Several LRU caches with the same line size and number of sets, differing only in
/// associativity, simulated as one (LRU is a stack algorithm, Mattson et al. 1970): an
/// `A`-way set holds the `A` most recent lines of that set, so one recency stack per set,
/// as deep as the largest associativity, says for every cache whether an access hits — it
/// does where the line's depth in its stack is below that cache's associativity. So an
/// access is one lookup and one counter (per reference, the hits at each depth), and each
/// cache's counts are sums of those counters at the end; the caches' own tags are not
/// kept. The interpolation of gemm on four such caches spent 95 % of its time looking
/// every access up in each (perf).
struct Stacks {
    stack: CacheSim,
    /// Each cache's associativity, in the order of the caches.
    assocs: Vec<usize>,
    /// Per reference, `depths + 2` counters: the hits at each depth of the stack, then the
    /// first misses of a line and the other misses; each cache's counts are sums of these.
    hist: Vec<u64>,
}

impl Stacks {
    /// `None` unless there are several caches, all of one line size and number of sets.
    fn new(caches: &[CacheConfig], nrefs: usize) -> Option<Stacks> {
        let first = caches.first()?;
        if caches.len() < 2 || caches.iter().any(|c| (c.line, c.sets) != (first.line, first.sets)) {
            return None;
        }
        let assoc = caches.iter().map(|c| c.assoc).max().expect("several");
        let stack = CacheSim::new(CacheConfig { assoc, ..*first }, 0, 0, 0);
        Some(Stacks { stack, assocs: caches.iter().map(|c| c.assoc as usize).collect(), hist: vec![0; nrefs * (assoc as usize + 2)] })
    }

    /// One access of reference `r`.
    #[inline(always)]
    fn access(&mut self, r: usize, addr: i64) {
        let st = &mut self.stack;
        let line = st.line_of(addr);
        let set = st.set_of(line);
        let a = st.assoc;
        let slot = &mut st.tags[set * a..set * a + a];
        let at = match slot.iter().position(|&t| t == line) {
            Some(i) => {
                move_to_front(slot, i);
                i
            }
            None => {
                push_front(slot, line);
                if st.seen.insert(line) {
                    a
                } else {
                    a + 1
                }
            }
        };
        self.hist[r * (a + 2) + at] += 1;
    }

    /// Adds the counts so far to each of `sims` (the caches given to `new`, in order).
    fn add_to(&self, sims: &mut [CacheSim]) {
        let a = self.stack.assoc;
        for (sim, &ways) in sims.iter_mut().zip(&self.assocs) {
            for (s, row) in sim.stats.iter_mut().zip(self.hist.chunks(a + 2)) {
                s.accesses += row.iter().sum::<u64>();
                s.hits += row[..ways].iter().sum::<u64>();
                s.compulsory += row[a];
                s.other += row[ways..a].iter().sum::<u64>() + row[a + 1];
            }
        }
    }
}

impl CacheSim {
    /// Whether every line from `first` to `last` has been touched: known, or looked up
    /// when that costs less than `lookups` lines looked up one at a time (and remembered:
    /// a line once touched stays so).
    fn all_seen(&mut self, first: i64, last: i64, lookups: u64) -> bool {
        if self.all_seen.contains(&(first, last)) {
            return true;
        }
        if lookups == 0 || lookups < ((last - first) / 64 + 1) as u64 || !self.seen.all(first, last) {
            return false;
        }
        self.all_seen.push((first, last));
        true
    }

    /// The end of a window of a warped loop ([`Sink::warp_end`]) recorded in `rec`: when the
    /// state now is φ of the state at its start, adds up to `windows` more windows' counts
    /// and translates the state to where they end. φ, per set: in a set that a reference of
    /// a moving array accessed in the window, each line of a moving array moved by its
    /// array's lines per window, every other line kept; in any other set the identity (the
    /// windows after this one access the same lines there: references of arrays that do
    /// not move). Either keeps each line in its set and is injective on the lines there, so
    /// LRU, which works set by set, repeats the window's hits and misses under φ.
    fn warp_windows(&mut self, rec: &Recording, plan: &WarpPlan, windows: u64) -> (u64, u64) {
        if windows == 0 || rec.broken {
            return (0, 0);
        }
        // the state now is φ of the state at the window's start; and how many more windows
        // keep every line cached then inside its array (φ injective)
        let a = self.assoc;
        let mut m = windows;
        // per moving array, the cached line (at the start) nearest its end in the direction it moves
        let mut ahead: Vec<Option<i64>> = vec![None; plan.arrays.len()];
        for set in 0..self.sets as usize {
            let (then, now) = (&rec.tags[set * a..set * a + a], &self.tags[set * a..set * a + a]);
            if !rec.touched(set) {
                if then != now {
                    return (0, 0);
                }
                continue;
            }
            for (&then, &now) in then.iter().zip(now) {
                match plan.array_of(then).filter(|_| then != i64::MIN) {
                    None if now == then => {}
                    None => return (0, 0),
                    Some(i) => {
                        let shift = plan.arrays[i].2;
                        if now != then + shift {
                            return (0, 0);
                        }
                        ahead[i] = Some(match ahead[i] {
                            Some(x) if shift > 0 => x.max(then),
                            Some(x) => x.min(then),
                            None => then,
                        });
                    }
                }
            }
        }
        for (&(first, last, shift), x) in plan.arrays.iter().zip(ahead) {
            let Some(then) = x else { continue };
            let room = if shift > 0 { (last - then) / shift } else { (then - first) / -shift };
            if room < 1 {
                return (0, 0);
            }
            m = m.min(room as u64 - 1);
        }
        if m == 0 {
            return (0, 0);
        }
        // the first touches of lines in the windows added, in order; none in an array whose
        // every line was seen (a column walk over data initialised before: looking up each
        // translate was most of the time the warped windows took, perf on correlation)
        let fresh: Vec<bool> = (0..plan.arrays.len())
            .map(|i| {
                let (lo, hi, _) = plan.arrays[i];
                let lookups = m.saturating_mul(rec.firsts.iter().filter(|&&(r, _)| rec.moving[r] == Some(i)).count() as u64);
                !self.all_seen(lo, hi, lookups)
            })
            .collect();
        // nor those of a line whose translates this far were put in the lines seen before
        // (gramschmidt walks the same column of `Q` in every `j`: `CacheSim::translated`);
        // looking up lines already seen changes nothing, so skipping them keeps the order
        let firsts: Vec<(usize, i64, i64)> = rec
            .firsts
            .iter()
            .filter_map(|&(r, x)| {
                let i = rec.moving[r].expect("recorded for a moving array only");
                let shift = plan.arrays[i].2;
                let known = matches!(self.translated.get(&x), Some(&(s, j)) if s == shift && j >= m);
                (fresh[i] && !known).then_some((r, x, shift))
            })
            .collect();
        let mut first = vec![0u64; self.stats.len()];
        if !firsts.is_empty() {
            for j in 1..=m as i64 {
                for &(r, x, shift) in &firsts {
                    if self.seen.insert(x + j * shift) {
                        first[r] += 1;
                    }
                }
            }
            for &(_, x, shift) in &firsts {
                self.translated.insert(x, (shift, m));
            }
        }
        let mut added = 0u64;
        for ((s, b), f) in self.stats.iter_mut().zip(&rec.stats).zip(first) {
            let (accesses, hits, misses) = (s.accesses - b.accesses, s.hits - b.hits, s.misses() - b.misses());
            added += accesses * m;
            s.accesses += accesses * m;
            s.hits += hits * m;
            s.compulsory += f;
            s.other += misses * m - f;
        }
        let mj = m as i64;
        for set in (0..self.sets as usize).filter(|&set| rec.touched(set)) {
            for t in self.tags[set * a..set * a + a].iter_mut().filter(|t| **t != i64::MIN) {
                if let Some(i) = plan.array_of(*t) {
                    *t += mj * plan.arrays[i].2;
                }
            }
        }
        (m, added)
    }
}

/// One LRU cache being simulated.
pub struct CacheSim {
    assoc: usize,
    line_shift: Option<u32>,
    line: i64,
    set_mask: Option<i64>,
    sets: i64,
    /// Per set, `assoc` tags from most to least recently used; `i64::MIN` is empty.
    tags: Vec<i64>,
    seen: Seen,
    /// Counts so far, indexed by reference number (the kernel's `refs` order).
    pub stats: Vec<RefStats>,
    /// The window of a loop being warped ([`warp_iterations`]), while it runs.
    recording: Option<Box<Recording>>,
    /// The last window's recording, its bitmap cleared, for the next one: an innermost loop
    /// tries windows of a few dozen accesses, each would otherwise allocate and zero a bit
    /// per line of its moving arrays.
    spare: Option<Box<Recording>>,
    /// Ranges of lines every one of which has been touched ([`CacheSim::all_seen`]).
    all_seen: Vec<(i64, i64)>,
    /// Per line first missed in a warped window: (shift, k) when its translates by 1..=k
    /// times the shift have been put in the lines seen ([`CacheSim::warp_windows`]).
    translated: std::collections::HashMap<i64, (i64, u64), std::hash::BuildHasherDefault<KeyHash>>,
}

/// A window of a warped loop as it runs ([`Sink::warp_begin`]): the state and counts at its
/// start, and the first miss in it of each line of a moving array.
struct Recording {
    tags: Vec<i64>,
    stats: Vec<RefStats>,
    /// Per reference, the index of its array in the plan's `arrays` when that array moves.
    moving: Vec<Option<usize>>,
    /// Per moving array, its first line and where its bits start in `missed`.
    base: Vec<(i64, i64, usize)>,
    /// One bit per line of the moving arrays: missed already in this window.
    missed: Vec<u64>,
    /// (reference, line): the first miss in this window of each line of a moving array, in order.
    firsts: Vec<(usize, i64)>,
    /// A reference missed outside its array's lines (`plan_for` rules that out): no warp.
    broken: bool,
    /// One bit per set: a reference of a moving array accessed it in this window. In the
    /// other sets the windows after it make the same accesses to the same lines, so the
    /// state there must be the same at the window's end (the translation is the identity
    /// there); in these it must be translated.
    touched: Vec<u64>,
    /// Per moving array: every line of it was touched before the window (no first touch to
    /// record: [`CacheSim::all_seen`]).
    all_seen: Vec<bool>,
}

impl Recording {
    /// An access by reference `r` to a line of `set`.
    #[inline(always)]
    fn touch(&mut self, r: usize, set: usize) {
        if let Some(Some(_)) = self.moving.get(r) {
            self.touched[set / 64] |= 1 << (set % 64);
        }
    }

    /// Whether a reference of a moving array accessed `set` in this window.
    #[inline]
    fn touched(&self, set: usize) -> bool {
        self.touched[set / 64] & (1 << (set % 64)) != 0
    }

    /// A miss by reference `r` on `line`.
    #[inline]
    fn missed(&mut self, r: usize, line: i64) {
        let Some(&Some(a)) = self.moving.get(r) else { return };
        let (first, last, off) = self.base[a];
        if !(first..=last).contains(&line) {
            self.broken = true;
            return;
        }
        if self.all_seen[a] {
            return;
        }
        let bit = off + (line - first) as usize;
        let (w, b) = (bit / 64, bit % 64);
        if self.missed[w] & (1 << b) == 0 {
            self.missed[w] |= 1 << b;
            self.firsts.push((r, line));
        }
    }
}

impl CacheSim {
    /// An empty cache of shape `c` counting for `nrefs` references; `addr_lo`..`addr_hi`
    /// (the arrays' byte span) is accepted and no longer used.
    pub fn new(c: CacheConfig, nrefs: usize, addr_lo: i64, addr_hi: i64) -> CacheSim {
        let line = c.line as i64;
        // The span of the arrays no longer sizes anything (see `Seen`).
        let _ = (addr_lo, addr_hi);
        CacheSim {
            assoc: c.assoc as usize,
            line_shift: c.line.is_power_of_two().then(|| c.line.trailing_zeros()),
            line,
            set_mask: c.sets.is_power_of_two().then(|| c.sets as i64 - 1),
            sets: c.sets as i64,
            tags: vec![i64::MIN; c.assoc as usize * c.sets as usize],
            seen: Seen::new(),
            stats: vec![RefStats::default(); nrefs],
            recording: None,
            spare: None,
            all_seen: Vec::new(),
            translated: Default::default(),
        }
    }

    /// One access by reference `r` to byte address `addr`.
    #[inline(always)]
    pub fn access(&mut self, r: usize, addr: i64) {
        let line = self.line_of(addr);
        self.stats[r].accesses += 1;
        if self.lookup(r, line) {
            self.stats[r].hits += 1;
        }
    }

    /// Looks `line` up for reference `r` and makes it the most recent of its set; a miss
    /// is counted (compulsory or other), an access or a hit is not. Whether it hit.
    #[inline(always)]
    fn lookup(&mut self, r: usize, line: i64) -> bool {
        let set = self.set_of(line);
        if let Some(rec) = self.recording.as_deref_mut() {
            rec.touch(r, set);
        }
        let a = self.assoc;
        let slot = &mut self.tags[set * a..set * a + a];
        if slot[0] == line {
            return true;
        }
        if let Some(i) = slot.iter().position(|&t| t == line) {
            move_to_front(slot, i);
            return true;
        }
        push_front(slot, line);
        let st = &mut self.stats[r];
        if self.seen.insert(line) {
            st.compulsory += 1;
        } else {
            st.other += 1;
        }
        if let Some(rec) = self.recording.as_deref_mut() {
            rec.missed(r, line);
        }
        false
    }
}

impl CacheSim {
    #[inline(always)]
    fn set_of(&self, line: i64) -> usize {
        (match self.set_mask {
            Some(m) => line & m,
            None => line.rem_euclid(self.sets),
        }) as usize
    }

    #[inline(always)]
    fn line_of(&self, addr: i64) -> i64 {
        match self.line_shift {
            Some(s) => addr >> s,
            None => addr.div_euclid(self.line),
        }
    }

    /// How many of the `left` iterations to come of an innermost loop whose iteration
    /// just ran `cur` (see [`Sink::skip`]) hit on every access, leaving the cache as it
    /// is: those in which no reference leaves the line it accessed in the iteration that
    /// just ran, when all those lines are still in the cache. Then the lines of the
    /// iteration that ran are the most recent of their sets, in the order of their last
    /// access; each iteration after it only hits (a hit evicts nothing), on the same lines
    /// in the same order, so the LRU state after any number of them is the state after the
    /// one that ran, and every access is a hit. (The run-length idea of warping, Morelli and
    /// Reineke, PLDI 2022, for its simplest case: a repetition that changes nothing.)
    #[inline]
    fn skippable(&self, cur: &[(usize, i64, i64)], left: u64) -> u64 {
        let mut k = left;
        for &(_, next, stride) in cur {
            if stride == 0 {
                continue;
            }
            let line = self.line_of(next);
            if line != self.line_of(next - stride) {
                return 0;
            }
            // iterations from the next one on that stay in `line`
            let (first, end) = (line * self.line, line * self.line + self.line);
            let stay = if stride > 0 { (end - 1 - next) / stride + 1 } else { (next - first) / -stride + 1 };
            k = k.min(stay as u64);
        }
        if k == 0 {
            return 0;
        }
        // every line of the iteration still cached (an inclusive level below may have
        // taken one back; without one, it holds when no set got more lines than ways)
        let a = self.assoc;
        for e in cur {
            let line = self.line_of(e.1);
            let set = line.rem_euclid(self.sets) as usize;
            if !self.tags[set * a..set * a + a].contains(&line) {
                return 0;
            }
        }
        k
    }

    /// Counts `k` hits for each access of `cur`.
    fn credit_hits(&mut self, cur: &[(usize, i64, i64)], k: u64) {
        for &(r, _, _) in cur {
            let st = &mut self.stats[r];
            st.accesses += k;
            st.hits += k;
        }
    }
}

/// The most accesses per iteration [`CacheSim::runs`] keeps on the stack.
const RUN_REFS: usize = 16;

impl CacheSim {
    /// Iterations after one at `addr` whose accesses (advancing by `stride`, `2^shift` in
    /// magnitude when given) stay in its line.
    #[inline(always)]
    fn stay(&self, addr: i64, stride: i64, shift: Option<u32>) -> u64 {
        let first = self.line_of(addr) * self.line;
        let room = match stride.signum() {
            0 => return u64::MAX,
            1 => first + self.line - 1 - addr,
            _ => addr - first,
        };
        match shift {
            Some(s) => (room >> s) as u64,
            None => (room / stride.abs()) as u64,
        }
    }

    /// An innermost loop of `n` iterations from one line change to the next: the
    /// iterations in which some reference enters a new line are simulated access by access;
    /// the ones between, where every reference stays in the line it accessed in the
    /// iteration before, are counted as hits without being visited when the lines of that
    /// iteration are all still cached (see [`CacheSim::skippable`]: the LRU state is then
    /// left as it is). Per reference the iterations left in its line are kept as a
    /// countdown, recomputed only when it enters a new line, so a run costs a minimum over
    /// the references; the lines are surely cached when the iteration makes at most
    /// `assoc` accesses (they are then the most recent of their sets).
    fn runs(&mut self, cur: &[(usize, i64, i64)], n: u64) {
        let m = cur.len();
        let mut addr = [0i64; RUN_REFS];
        let mut same = [0u64; RUN_REFS];
        // a power-of-two advance: the countdown by a shift, not a division
        let mut shift = [None; RUN_REFS];
        for (i, e) in cur.iter().enumerate() {
            addr[i] = e.1;
            shift[i] = (e.2 != 0 && e.2.unsigned_abs().is_power_of_two()).then(|| e.2.unsigned_abs().trailing_zeros());
            same[i] = self.stay(e.1, e.2, shift[i]);
        }
        let sure = m <= self.assoc;
        let mut t = 0u64;
        loop {
            for i in 0..m {
                let line = self.line_of(addr[i]);
                self.lookup(cur[i].0, line);
            }
            t += 1;
            if t == n {
                break;
            }
            let k = same[..m].iter().copied().min().unwrap_or(u64::MAX).min(n - t);
            if k > 0 && (sure || self.all_cached(&addr[..m])) {
                for (i, e) in cur.iter().enumerate() {
                    addr[i] += e.2 * k as i64;
                    same[i] -= k;
                }
                t += k;
                if t == n {
                    break;
                }
            }
            for (i, e) in cur.iter().enumerate() {
                addr[i] += e.2;
                same[i] = match same[i] {
                    0 => self.stay(addr[i], e.2, shift[i]),
                    s => s - 1,
                };
            }
        }
    }

    /// Whether the lines of all these addresses are in the cache.
    fn all_cached(&self, addrs: &[i64]) -> bool {
        let a = self.assoc;
        addrs.iter().all(|&x| {
            let line = self.line_of(x);
            let set = self.set_of(line);
            self.tags[set * a..set * a + a].contains(&line)
        })
    }
}

impl Sink for CacheSim {
    /// Only where every reference stays in a line for more than one iteration.
    #[inline(always)]
    fn may_skip(&self, cur: &[(usize, i64, i64)]) -> bool {
        cur.iter().all(|e| e.2.abs() < self.line)
    }
    #[inline(always)]
    fn inner(&mut self, cur: &mut [(usize, i64, i64)], n: u64) {
        if cur.len() > RUN_REFS {
            for _ in 0..n {
                for e in cur.iter_mut() {
                    CacheSim::access(self, e.0, e.1);
                    e.1 += e.2;
                }
            }
            return;
        }
        let mut missed = [0u64; RUN_REFS];
        for (i, e) in cur.iter().enumerate() {
            missed[i] = self.stats[e.0].misses();
        }
        if self.may_skip(cur) {
            self.runs(cur, n);
        } else {
            for _ in 0..n {
                for e in cur.iter_mut() {
                    let line = self.line_of(e.1);
                    self.lookup(e.0, line);
                    e.1 += e.2;
                }
            }
        }
        // every iteration made every access; the ones that did not miss hit
        for (i, e) in cur.iter().enumerate() {
            let st = &mut self.stats[e.0];
            st.accesses += n;
            st.hits += n - (st.misses() - missed[i]);
        }
    }
    #[inline(always)]
    fn access(&mut self, r: usize, addr: i64) {
        CacheSim::access(self, r, addr)
    }
    #[inline(always)]
    fn skip(&mut self, cur: &[(usize, i64, i64)], left: u64) -> u64 {
        let k = self.skippable(cur, left);
        if k > 0 {
            self.credit_hits(cur, k);
        }
        k
    }
    #[inline(always)]
    fn repeat_line(&self) -> Option<i64> {
        Some(self.line)
    }
    fn mark(&self, into: &mut Vec<RefStats>) {
        into.clear();
        into.extend_from_slice(&self.stats);
    }
    #[inline(always)]
    fn warp_shape(&self) -> Option<(i64, i64)> {
        self.recording.is_none().then_some((self.line, self.sets))
    }
    fn warp_begin(&mut self, plan: &WarpPlan) {
        let mut rec = self.spare.take().unwrap_or_else(|| {
            Box::new(Recording { tags: Vec::new(), stats: Vec::new(), moving: Vec::new(), base: Vec::new(), missed: Vec::new(), firsts: Vec::new(), broken: false, touched: Vec::new(), all_seen: Vec::new() })
        });
        rec.base.clear();
        rec.all_seen.clear();
        let mut bits = 0usize;
        for &(first, last, _) in &plan.arrays {
            rec.base.push((first, last, bits));
            rec.all_seen.push(self.all_seen.contains(&(first, last)));
            bits += (last - first + 1) as usize;
        }
        // `missed` is all zeros here (cleared bit by bit after each window)
        if rec.missed.len() < bits.div_ceil(64) {
            rec.missed.resize(bits.div_ceil(64), 0);
        }
        rec.tags.clone_from(&self.tags);
        rec.stats.clone_from(&self.stats);
        rec.moving.clone_from(&plan.moving);
        rec.firsts.clear();
        rec.broken = false;
        rec.touched.clear();
        rec.touched.resize((self.sets as usize).div_ceil(64), 0);
        self.recording = Some(rec);
    }
    fn warp_end(&mut self, plan: &WarpPlan, windows: u64) -> (u64, u64) {
        let Some(mut rec) = self.recording.take() else { return (0, 0) };
        let done = self.warp_windows(&rec, plan, windows);
        // the bitmap back to zeros for the next window
        for &(r, x) in &rec.firsts {
            let a = rec.moving[r].expect("recorded for a moving array only");
            debug_assert!(!rec.all_seen[a]);
            let (first, _, off) = rec.base[a];
            let bit = off + (x - first) as usize;
            rec.missed[bit / 64] &= !(1 << (bit % 64));
        }
        self.spare = Some(rec);
        done
    }
    fn repeat(&mut self, since: &[RefStats], k: u64) -> u64 {
        let mut added = 0u64;
        for (s, b) in self.stats.iter_mut().zip(since) {
            // the repeated iteration's lines were all seen before it
            debug_assert_eq!(s.compulsory, b.compulsory, "a repeated iteration missed a line first");
            let accesses = (s.accesses - b.accesses) * k;
            added += accesses;
            s.accesses += accesses;
            s.hits += (s.hits - b.hits) * k;
            s.other += (s.other - b.other) * k;
        }
        added
    }
}

impl Sink for HierarchySim {
    /// Only where every reference stays in a line for more than one iteration.
    #[inline(always)]
    fn may_skip(&self, cur: &[(usize, i64, i64)]) -> bool {
        cur.iter().all(|e| e.2.abs() < self.levels[0].line)
    }
    #[inline(always)]
    fn access(&mut self, r: usize, addr: i64) {
        HierarchySim::access(self, r, addr)
    }
    /// Accesses that hit the first level reach no other: the first level's runs of hits
    /// are the hierarchy's.
    #[inline(always)]
    fn skip(&mut self, cur: &[(usize, i64, i64)], left: u64) -> u64 {
        let k = self.levels[0].skippable(cur, left);
        if k > 0 {
            self.levels[0].credit_hits(cur, k);
        }
        k
    }
}

impl CacheSim {
    /// Looks `line` up and makes it most recently used; on a miss inserts it and returns
    /// the line it evicted (for the hierarchy, which counts per level itself).
    fn touch(&mut self, line: i64) -> (bool, Option<i64>) {
        let a = self.assoc;
        let set = line.rem_euclid(self.sets) as usize;
        let slot = &mut self.tags[set * a..set * a + a];
        if let Some(i) = slot.iter().position(|&t| t == line) {
            move_to_front(slot, i);
            return (true, None);
        }
        let victim = push_front(slot, line);
        (false, (victim != i64::MIN).then_some(victim))
    }

    /// Removes `line` if present (inclusion: the level below evicted it).
    fn invalidate(&mut self, line: i64) {
        let a = self.assoc;
        let set = line.rem_euclid(self.sets) as usize;
        let slot = &mut self.tags[set * a..set * a + a];
        if let Some(i) = slot.iter().position(|&t| t == line) {
            slot[i..].rotate_left(1);
            slot[a - 1] = i64::MIN;
        }
    }
}

/// Whether a level's evictions leave the levels above it (`HierarchySim`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Inclusion {
    /// A line a level evicts is invalidated in every level above (back-invalidation).
    #[default]
    Inclusive,
    /// Non-inclusive, non-exclusive (NINE): a level's evictions leave the levels above
    /// alone, so each level sees exactly the misses of the one above, as it would alone
    /// on that stream — which is what lets the set method model it (`sets::build_hierarchy_model`).
    NonInclusive,
}

/// A cache hierarchy (L1, L2, …) with LRU in every level: an access that misses a level
/// goes to the next one; a hit updates only the level that hit (the levels below do not
/// see it, as in hardware); with [`Inclusion::Inclusive`] a line a level evicts is
/// invalidated in every level above it (back-invalidation keeps inclusion). Per level and
/// reference it counts the accesses that reached the level, hits, compulsory misses (first
/// touch of the line at that level) and other misses. All levels must share one line size.
pub struct HierarchySim {
    levels: Vec<CacheSim>,
    line: i64,
    inclusion: Inclusion,
}

impl HierarchySim {
    /// Empty caches, `levels[0]` being L1, counting for `nrefs` references under `inclusion`;
    /// an error when no level is given or the levels' line sizes differ.
    pub fn new(levels: &[CacheConfig], nrefs: usize, inclusion: Inclusion) -> Result<HierarchySim> {
        let line = levels.first().ok_or_else(|| CacheError::Model("a hierarchy needs at least one level".into()))?.line;
        if let Some(c) = levels.iter().find(|c| c.line != line) {
            return Err(CacheError::Model(format!("every level of a hierarchy needs the same line size ({line} B and {} B given)", c.line)));
        }
        Ok(HierarchySim { levels: levels.iter().map(|c| CacheSim::new(*c, nrefs, 0, 0)).collect(), line: line as i64, inclusion })
    }

    /// One access by reference `r` to byte address `addr`.
    pub fn access(&mut self, r: usize, addr: i64) {
        let line = addr.div_euclid(self.line);
        for l in 0..self.levels.len() {
            let level = &mut self.levels[l];
            let (hit, evicted) = level.touch(line);
            let first = !hit && level.seen.insert(line);
            let st = &mut level.stats[r];
            st.accesses += 1;
            match (hit, first) {
                (true, _) => st.hits += 1,
                (false, true) => st.compulsory += 1,
                (false, false) => st.other += 1,
            }
            if let Some(v) = evicted.filter(|_| l > 0 && self.inclusion == Inclusion::Inclusive) {
                for above in &mut self.levels[..l] {
                    above.invalidate(v);
                }
            }
            if hit {
                return;
            }
        }
    }

    /// Per level, per reference.
    pub fn stats(self) -> Vec<Vec<RefStats>> {
        self.levels.into_iter().map(|l| l.stats).collect()
    }
}

impl Program {
    /// Simulates a hierarchy (see [`HierarchySim`]) on this program's accesses.
    pub fn simulate_hierarchy(&self, levels: &[CacheConfig], inclusion: Inclusion) -> Result<Vec<Vec<RefStats>>> {
        self.simulate_hierarchy_reporting(levels, inclusion, |_| {})
    }

    /// [`Program::simulate_hierarchy`], calling `progress(accesses so far)` every 2^24 accesses.
    pub fn simulate_hierarchy_reporting(&self, levels: &[CacheConfig], inclusion: Inclusion, mut progress: impl FnMut(u64)) -> Result<Vec<Vec<RefStats>>> {
        let mut h = HierarchySim::new(levels, self.nrefs + 1, inclusion)?;
        self.warm_up(|r, a| h.access(r, a), self.nrefs);
        if self.every_access {
            let mut n = 0u64;
            self.for_each_access(|r, a| {
                h.access(r, a);
                tick(&mut n, &mut progress);
            });
        } else {
            self.run(&mut Reporting { sink: &mut h, n: 0, next: PROGRESS_MASK + 1, progress: &mut progress });
        }
        let mut stats = h.stats();
        stats.iter_mut().for_each(|s| s.truncate(self.nrefs));
        Ok(stats)
    }
}

/// Convenience: instantiate and simulate one cache.
pub fn simulate(k: &Kernel, params: &ParamValues, layout: &LayoutSpec, cache: CacheConfig) -> Result<Vec<RefStats>> {
    let p = Program::new(k, params, layout)?;
    Ok(p.simulate(&[cache]).pop().unwrap())
}

/// Number of accesses the kernel makes at `params` (without simulating a cache, nor
/// visiting the innermost loops' iterations).
pub fn count_accesses(k: &Kernel, params: &ParamValues, layout: &LayoutSpec) -> Result<u64> {
    Ok(Program::new(k, params, layout)?.work(u64::MAX).accesses)
}

#[allow(dead_code)]
fn _assert_send() {
    fn s<T: Send>() {}
    s::<Program>();
    let _ = CacheError::Model(String::new());
}

/// Per-reference breakdown in the seed's terms, from one exact simulation.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Breakdown {
    /// Counts per reference, indexed by reference number.
    pub stats: Vec<RefStats>,
    /// `hit_source[r][s]`: accesses of `r` whose line was last accessed by reference `s`
    /// (the seed's second count split by hit source; hits and conflict misses).
    pub hit_source: Vec<Vec<u64>>,
    /// `conflict_factor[r][e]`: conflict misses of `r` whose line was evicted by an access
    /// of reference `e` (the access that pushed it out of its set).
    pub conflict_factor: Vec<Vec<u64>>,
}

impl Program {
    /// Simulates one cache, also attributing every access to its hit source and every
    /// conflict miss to the reference whose access evicted the line.
    pub fn simulate_breakdown(&self, c: CacheConfig) -> Breakdown {
        const NONE: u32 = u32::MAX;
        let nrefs = self.nrefs;
        let line_size = c.line as i64;
        let lo = self.addr_lo.div_euclid(line_size) - 1024;
        let hi = self.addr_hi.div_euclid(line_size) + 1024;
        // Dense only while the arrays' lines are near each other; arrays at far apart
        // addresses go to the sparse map instead of an allocation the size of the gap.
        let dense_len = if (0..=DENSE_LINES_MAX).contains(&(hi - lo)) { (hi - lo) as usize } else { 0 };
        let mut lines = LineMap { lo, dense: vec![(NONE, NONE); dense_len], sparse: Default::default() };
        let a = c.assoc as usize;
        let mut tags = vec![i64::MIN; a * c.sets as usize];
        let mut out = Breakdown { stats: vec![RefStats::default(); nrefs], hit_source: vec![vec![0; nrefs]; nrefs], conflict_factor: vec![vec![0; nrefs]; nrefs] };
        self.for_each_access(|r, addr| {
            let line = addr.div_euclid(line_size);
            let set = line.rem_euclid(c.sets as i64) as usize;
            let slot = &mut tags[set * a..set * a + a];
            let st = &mut out.stats[r];
            st.accesses += 1;
            let (src, evictor) = lines.get(line);
            if src != NONE {
                out.hit_source[r][src as usize] += 1;
            }
            if let Some(i) = slot.iter().position(|&t| t == line) {
                move_to_front(slot, i);
                st.hits += 1;
            } else {
                if src == NONE {
                    st.compulsory += 1;
                } else {
                    st.other += 1;
                    out.conflict_factor[r][evictor as usize] += 1;
                }
                let victim = push_front(slot, line);
                if victim != i64::MIN {
                    let (vs, _) = lines.get(victim);
                    lines.set(victim, (vs, r as u32));
                }
            }
            lines.set(line, (r as u32, evictor));
        });
        out
    }
}

/// The most lines [`LineMap`] holds densely (32 MiB of entries).
const DENSE_LINES_MAX: i64 = 1 << 22;

/// Per line: (last reference, evicting reference); dense around the arrays, sparse outside.
struct LineMap {
    lo: i64,
    dense: Vec<(u32, u32)>,
    sparse: std::collections::HashMap<i64, (u32, u32)>,
}

impl LineMap {
    #[inline]
    fn get(&self, line: i64) -> (u32, u32) {
        let off = line - self.lo;
        if off >= 0 && (off as usize) < self.dense.len() {
            self.dense[off as usize]
        } else {
            self.sparse.get(&line).copied().unwrap_or((u32::MAX, u32::MAX))
        }
    }
    #[inline]
    fn set(&mut self, line: i64, v: (u32, u32)) {
        let off = line - self.lo;
        if off >= 0 && (off as usize) < self.dense.len() {
            self.dense[off as usize] = v;
        } else {
            self.sparse.insert(line, v);
        }
    }
}
