//! The trace-call optimiser: rewrites a module's `kansoku.traceN` calls.
//!
//! Passes, per function (see `docs/rooms/seed002-tracepoints.md`):
//! 1. **analysis** — one walk over the operators: basic blocks (split at every control
//!    operator), *segments* inside blocks (split further at barriers, at calls of functions
//!    that may trace, and at trace calls whose id is not a constant), loop depth, and value
//!    numbering of the operand stack and locals, so that each trace argument is known as a
//!    value number (`Const`, `Op(x, y)` or opaque) with the instructions that produced it;
//! 2. **removal** — calls of disabled trace points, and adjacent repeats (same id, same value
//!    numbers) of idempotent ones, are deleted together with their pure argument code;
//! 3. **grouping** — consecutive trace calls of one segment are grouped while no call would
//!    move further than its declared `move` limit (the merged call sits at the last member);
//! 4. **argument reduction** — per group: constants, duplicates, and values the host can
//!    compute (x·y, x+y, x−y, x<<c, x&y, x|y, x^y over emitted values) are not emitted;
//! 5. **budget** — each distinct group shape needs a new id; shapes are ranked by estimated
//!    saving (loop-nesting weight 10^depth, or counts from a profile) and the best are taken
//!    within `max_new_ids`; groups left over are split in halves and offered again in the next
//!    iteration (halves whose shape already has an id cost nothing);
//! 6. **iteration** — repeated until the estimated cost falls by less than 1%.
//!
//! The rewrite stores emitted values in fresh locals at their original call sites and emits
//! one `kansoku.traceE(new_id, ...)` call at the last member's place.

use crate::decl::DeclTable;
use crate::error::{Result, TpError};
use crate::module::{is_decl_section, KansokuImport, ModuleInfo};
use crate::tracefile::record_size;
use crate::xlat::{ArgSource, BinOp, XlatEntry, XlatEvent, XlatSizes, XlatTable};
use serde::Serialize;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::convert::Infallible;
use wasm_encoder::reencode::{utils, Error as ReError, Reencode};
use wasm_encoder::{Instruction, ValType as EncValType};
use wasmparser::{FrameKind, ModuleArity, Operator};

/// Relative cost of one executed trace call against one byte of trace data.
pub(crate) const CALL_COST: f64 = 20.0;

/// Options of `optimize`.
#[derive(Debug, Clone, Default)]
pub struct OptimizeOptions {
    /// At most this many new ids (merged events); `None` = unlimited.
    pub max_new_ids: Option<u32>,
    /// Executions per original id from a previous run (replaces the loop-nesting estimate).
    pub profile: Option<HashMap<u32, u64>>,
    /// Extra declarations (side file), added to those in the module.
    pub extra_decls: Option<DeclTable>,
    /// Remove every trace call (to build the untraced baseline).
    pub strip_all: bool,
    /// Do not merge or reduce arguments; only remove disabled/idempotent calls and barriers.
    pub no_merge: bool,
}

/// Estimated cost of the trace calls of a module.
#[derive(Debug, Clone, Copy, Default, Serialize, PartialEq)]
pub struct CostEstimate {
    /// Weighted executed trace calls.
    pub calls: f64,
    /// Weighted bytes of trace records.
    pub bytes: f64,
    /// Weighted wasm instructions spent on tracing (argument setup and calls).
    pub instructions: f64,
    /// `CALL_COST·calls + bytes + instructions`.
    pub total: f64,
}

/// What the optimiser did.
#[derive(Debug, Clone, Default, Serialize)]
pub struct OptimizeReport {
    /// Bytes of the module given.
    pub bytes_in: usize,
    /// Bytes of the rewritten module, translation table included.
    pub bytes_out: usize,
    /// `kansoku.traceN` call sites in the module given.
    pub trace_sites: usize,
    /// Sites deleted because their point is declared disabled.
    pub removed_disabled: usize,
    /// Sites deleted as adjacent repeats of an idempotent point.
    pub removed_idempotent: usize,
    /// `kansoku.barrier` calls deleted (they only constrain grouping).
    pub barriers_removed: usize,
    /// Trace calls left untouched because their id is not a constant or they are unreachable.
    pub unoptimisable_sites: usize,
    /// Groups of sites replaced by one merged call.
    pub groups_merged: usize,
    /// Sites in those groups.
    pub sites_merged: usize,
    /// New ids (merged shapes) given out.
    pub new_ids_used: u32,
    /// The budget of new ids asked for (`None`: unlimited).
    pub max_new_ids: Option<u32>,
    /// Distinct candidate shapes that did not get an id.
    pub shapes_over_budget: usize,
    /// Trace arguments passed by all sites before.
    pub args_before: usize,
    /// Trace arguments passed after (the rest the table supplies).
    pub args_after: usize,
    /// Arguments left out because they are constants (kept in the table).
    pub args_constant: usize,
    /// Arguments left out because another emitted argument has the same value.
    pub args_duplicate: usize,
    /// Arguments left out because the host computes them from emitted ones.
    pub args_derived: usize,
    /// Estimated cost before (index 0) and after each iteration.
    pub iterations: Vec<CostEstimate>,
    /// Size of the translation table written into the module.
    pub xlat: XlatSizes,
    /// What the optimiser left alone and why, said once each.
    pub warnings: Vec<String>,
}

/// The result of `optimize`.
pub struct Optimized {
    /// The rewritten module, with `kansoku.xlat` in it.
    pub wasm: Vec<u8>,
    /// The translation table (also in the module).
    pub table: XlatTable,
    /// What was done.
    pub report: OptimizeReport,
}

// ---------------------------------------------------------------- analysis

type Vn = u32;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum VnDef {
    Const(i32),
    Op(BinOp, Vn, Vn),
    Opaque,
}

#[derive(Default)]
struct Vns {
    defs: Vec<VnDef>,
    ops: HashMap<(BinOp, Vn, Vn), Vn>,
    consts: HashMap<i32, Vn>,
}

impl Vns {
    fn fresh(&mut self) -> Vn {
        self.defs.push(VnDef::Opaque);
        (self.defs.len() - 1) as Vn
    }
    fn konst(&mut self, c: i32) -> Vn {
        if let Some(v) = self.consts.get(&c) {
            return *v;
        }
        self.defs.push(VnDef::Const(c));
        let v = (self.defs.len() - 1) as Vn;
        self.consts.insert(c, v);
        v
    }
    fn op(&mut self, op: BinOp, a: Vn, b: Vn) -> Vn {
        if let (VnDef::Const(x), VnDef::Const(y)) = (self.defs[a as usize], self.defs[b as usize]) {
            return self.konst(op.apply(x, y));
        }
        let commutative = matches!(op, BinOp::Add | BinOp::Mul | BinOp::And | BinOp::Or | BinOp::Xor);
        let (a, b) = if commutative && b < a { (b, a) } else { (a, b) };
        if let Some(v) = self.ops.get(&(op, a, b)) {
            return *v;
        }
        self.defs.push(VnDef::Op(op, a, b));
        let v = (self.defs.len() - 1) as Vn;
        self.ops.insert((op, a, b), v);
        v
    }
    fn as_const(&self, v: Vn) -> Option<i32> {
        match self.defs[v as usize] {
            VnDef::Const(c) => Some(c),
            _ => None,
        }
    }
}

#[derive(Debug, Clone)]
struct Slot {
    vn: Vn,
    /// Instructions that computed this value, if they are all pure and can be deleted.
    prod: Option<Vec<usize>>,
}

#[derive(Debug, Clone)]
struct Site {
    instr: usize,
    seg: usize,
    id: u32,
    args: Vec<Slot>,
    id_prod: Option<Vec<usize>>,
    weight: f64,
}

struct FuncAnalysis<'a> {
    ops: Vec<Operator<'a>>,
    sites: Vec<Site>,
    barriers: Vec<usize>,
    vns: Vns,
    /// Params plus declared locals.
    num_locals: u32,
    locals: Vec<(u32, wasmparser::ValType)>,
}

struct Arity<'m, 'a>(&'m ModuleInfo<'a>);

impl ModuleArity for Arity<'_, '_> {
    fn sub_type_at(&self, type_idx: u32) -> Option<&wasmparser::SubType> {
        self.0.types.get(type_idx as usize)
    }
    fn tag_type_arity(&self, _at: u32) -> Option<(u32, u32)> {
        None
    }
    fn type_index_of_function(&self, function_idx: u32) -> Option<u32> {
        self.0.type_of_func(function_idx)
    }
    fn func_type_of_cont_type(&self, _c: &wasmparser::ContType) -> Option<&wasmparser::FuncType> {
        None
    }
    fn sub_type_of_ref_type(&self, _rt: &wasmparser::RefType) -> Option<&wasmparser::SubType> {
        None
    }
    fn control_stack_height(&self) -> u32 {
        0
    }
    fn label_block(&self, _depth: u32) -> Option<(wasmparser::BlockType, FrameKind)> {
        None
    }
}

fn binop(op: &Operator) -> Option<BinOp> {
    Some(match op {
        Operator::I32Add => BinOp::Add,
        Operator::I32Sub => BinOp::Sub,
        Operator::I32Mul => BinOp::Mul,
        Operator::I32Shl => BinOp::Shl,
        Operator::I32And => BinOp::And,
        Operator::I32Or => BinOp::Or,
        Operator::I32Xor => BinOp::Xor,
        _ => return None,
    })
}

/// Which defined functions may (transitively) emit trace records.
fn may_trace(m: &ModuleInfo) -> Result<Vec<bool>> {
    let n_imp = m.num_func_imports();
    let mut direct = vec![false; m.bodies.len()];
    let mut callees: Vec<Vec<u32>> = vec![Vec::new(); m.bodies.len()];
    for (i, body) in m.bodies.iter().enumerate() {
        for op in body.get_operators_reader()? {
            match op? {
                Operator::Call { function_index } | Operator::ReturnCall { function_index } => {
                    if function_index < n_imp {
                        if matches!(m.kansoku_import(function_index), Some(KansokuImport::Trace { .. })) {
                            direct[i] = true;
                        }
                    } else {
                        callees[i].push(function_index - n_imp);
                    }
                }
                Operator::CallIndirect { .. }
                | Operator::ReturnCallIndirect { .. }
                | Operator::CallRef { .. }
                | Operator::ReturnCallRef { .. } => direct[i] = true,
                _ => {}
            }
        }
    }
    let mut may = direct;
    loop {
        let mut changed = false;
        for i in 0..may.len() {
            if !may[i] && callees[i].iter().any(|&c| may[c as usize]) {
                may[i] = true;
                changed = true;
            }
        }
        if !changed {
            return Ok(may);
        }
    }
}

fn analyse_function<'a>(
    m: &ModuleInfo<'a>,
    fidx: usize,
    may: &[bool],
    profile_weight: &dyn Fn(u32) -> Option<f64>,
    unoptimisable: &mut usize,
) -> Result<FuncAnalysis<'a>> {
    let body = &m.bodies[fidx];
    let n_imp = m.num_func_imports();
    let ty = m.func_types[fidx];
    let n_params = m.func_sig(ty).map(|(p, _)| p.len() as u32).unwrap_or(0);
    let mut locals = Vec::new();
    let mut num_locals = n_params;
    for l in body.get_locals_reader()? {
        let (c, t) = l?;
        num_locals += c;
        locals.push((c, t));
    }
    let ops: Vec<Operator<'a>> = body.get_operators_reader()?.into_iter().collect::<std::result::Result<_, _>>()?;
    let arity = Arity(m);
    let mut vns = Vns::default();
    let mut stack: Vec<Slot> = Vec::new();
    let mut local_vn: HashMap<u32, Vn> = HashMap::new();
    let mut frames: Vec<bool> = Vec::new(); // is_loop
    let mut dead_from: Option<usize> = None; // frame depth at which code became unreachable
    let mut seg = 0usize;
    let mut sites = Vec::new();
    let mut barriers = Vec::new();

    for (i, op) in ops.iter().enumerate() {
        // control flow: every control operator ends the basic block
        let control = matches!(
            op,
            Operator::Block { .. }
                | Operator::Loop { .. }
                | Operator::If { .. }
                | Operator::Else
                | Operator::End
                | Operator::Br { .. }
                | Operator::BrIf { .. }
                | Operator::BrTable { .. }
                | Operator::Return
                | Operator::Unreachable
        );
        if control {
            stack.clear();
            local_vn.clear();
            seg += 1;
            match op {
                Operator::Block { .. } | Operator::If { .. } => frames.push(false),
                Operator::Loop { .. } => frames.push(true),
                Operator::Else if dead_from == Some(frames.len()) => dead_from = None,
                Operator::End => {
                    if dead_from == Some(frames.len()) {
                        dead_from = None;
                    }
                    frames.pop();
                }
                Operator::Br { .. } | Operator::BrTable { .. } | Operator::Return | Operator::Unreachable
                    if dead_from.is_none() =>
                {
                    dead_from = Some(frames.len());
                }
                _ => {}
            }
            continue;
        }
        if dead_from.is_some() {
            if let Operator::Call { function_index } = op {
                if matches!(m.kansoku_import(*function_index), Some(KansokuImport::Trace { .. })) {
                    *unoptimisable += 1;
                }
            }
            continue;
        }
        let pop = |stack: &mut Vec<Slot>, vns: &mut Vns| stack.pop().unwrap_or_else(|| Slot { vn: vns.fresh(), prod: None });
        match op {
            Operator::I32Const { value } => stack.push(Slot { vn: vns.konst(*value), prod: Some(vec![i]) }),
            Operator::LocalGet { local_index } => {
                let vn = *local_vn.entry(*local_index).or_insert_with(|| vns.fresh());
                stack.push(Slot { vn, prod: Some(vec![i]) });
            }
            Operator::LocalSet { local_index } => {
                let s = pop(&mut stack, &mut vns);
                local_vn.insert(*local_index, s.vn);
            }
            Operator::LocalTee { local_index } => {
                let s = pop(&mut stack, &mut vns);
                local_vn.insert(*local_index, s.vn);
                stack.push(Slot { vn: s.vn, prod: None });
            }
            Operator::GlobalGet { .. } => {
                let vn = vns.fresh();
                stack.push(Slot { vn, prod: Some(vec![i]) });
            }
            Operator::Call { function_index } if *function_index < n_imp && m.kansoku_import(*function_index).is_some() => {
                match m.kansoku_import(*function_index).unwrap() {
                    KansokuImport::Barrier => {
                        barriers.push(i);
                        seg += 1;
                    }
                    KansokuImport::Trace { nargs } => {
                        let mut args: Vec<Slot> = (0..nargs).map(|_| pop(&mut stack, &mut vns)).collect();
                        args.reverse();
                        let id = pop(&mut stack, &mut vns);
                        match vns.as_const(id.vn) {
                            Some(c) => {
                                let depth = frames.iter().filter(|l| **l).count() as i32;
                                let weight = profile_weight(c as u32).unwrap_or(10f64.powi(depth.min(6)));
                                sites.push(Site { instr: i, seg, id: c as u32, args, id_prod: id.prod, weight });
                            }
                            None => {
                                // an event whose id is only known at run time stays where it is
                                *unoptimisable += 1;
                                seg += 1;
                            }
                        }
                    }
                }
            }
            _ => {
                if let Some(b) = binop(op) {
                    let y = pop(&mut stack, &mut vns);
                    let x = pop(&mut stack, &mut vns);
                    let vn = vns.op(b, x.vn, y.vn);
                    let prod = match (x.prod, y.prod) {
                        (Some(mut a), Some(b)) => {
                            a.extend(b);
                            a.push(i);
                            Some(a)
                        }
                        _ => None,
                    };
                    stack.push(Slot { vn, prod });
                    continue;
                }
                if let Operator::Call { function_index } = op {
                    if *function_index >= n_imp && may[(*function_index - n_imp) as usize] {
                        seg += 1; // the callee may trace: nothing moves across the call
                    }
                }
                if matches!(op, Operator::CallIndirect { .. } | Operator::CallRef { .. }) {
                    seg += 1;
                }
                match op.operator_arity(&arity) {
                    Some((n_in, n_out)) => {
                        for _ in 0..n_in {
                            pop(&mut stack, &mut vns);
                        }
                        for _ in 0..n_out {
                            let vn = vns.fresh();
                            stack.push(Slot { vn, prod: None });
                        }
                    }
                    None => {
                        // unknown stack effect: forget everything, start a new segment
                        stack.clear();
                        local_vn.clear();
                        seg += 1;
                    }
                }
            }
        }
    }
    Ok(FuncAnalysis { ops, sites, barriers, vns, num_locals, locals })
}

// ---------------------------------------------------------------- planning

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct Shape {
    events: Vec<XlatEvent>,
    nargs: u32,
}

/// A planned merge of a group of sites of one function.
#[derive(Debug, Clone)]
struct Merge {
    func: usize,
    sites: Vec<usize>,
    emitted: Vec<Vn>,
    /// Per emitted value: `Some(local)` when the merged call can re-read it from the program's
    /// own local (read by a lone `local.get` not overwritten before the merged call).
    reread: Vec<Option<u32>>,
    shape: Shape,
    offsets: Vec<i32>,
    weight: f64,
    args_constant: usize,
    args_duplicate: usize,
    args_derived: usize,
}

impl Merge {
    fn cost(&self) -> CostEstimate {
        merged_cost(self.emitted.len(), self.reread.iter().filter(|r| r.is_some()).count())
    }
    fn saving(&self, fa: &FuncAnalysis) -> f64 {
        let before: f64 = self.sites.iter().map(|&s| site_cost(fa.sites[s].args.len()).total).sum();
        (before - self.cost().total) * self.weight
    }
}

fn site_cost(k: usize) -> CostEstimate {
    let bytes = record_size(k) as f64;
    let instructions = k as f64 + 2.0;
    CostEstimate { calls: 1.0, bytes, instructions, total: CALL_COST + bytes + instructions }
}

fn merged_cost(e: usize, reread: usize) -> CostEstimate {
    let bytes = record_size(e) as f64;
    // id and call; a value kept in a fresh local costs its computation, local.set and
    // local.get; a value re-read from the program's own local costs one local.get
    let stored = e - reread;
    let instructions = 2.0 + 3.0 * stored as f64 + reread as f64;
    CostEstimate { calls: 1.0, bytes, instructions, total: CALL_COST + bytes + instructions }
}

fn plan_merge(fa: &FuncAnalysis, func: usize, sites: &[usize]) -> Merge {
    let vns = &fa.vns;
    // all non-constant value numbers of the group
    let mut set: Vec<Vn> = Vec::new();
    let mut total_args = 0;
    for &s in sites {
        for a in &fa.sites[s].args {
            total_args += 1;
            if vns.as_const(a.vn).is_none() && !set.contains(&a.vn) {
                set.push(a.vn);
            }
        }
    }
    let in_set: HashSet<Vn> = set.iter().copied().collect();
    let avail = |v: Vn| in_set.contains(&v) || vns.as_const(v).is_some();
    let mut derived: HashSet<Vn> = HashSet::new();
    let mut by_vn: Vec<Vn> = set.clone();
    by_vn.sort_unstable_by(|a, b| b.cmp(a));
    for v in by_vn {
        if let VnDef::Op(_, a, b) = vns.defs[v as usize] {
            if avail(a) && avail(b) && a != v && b != v {
                derived.insert(v);
            }
        }
    }
    let emitted: Vec<Vn> = set.iter().copied().filter(|v| !derived.contains(v)).collect();
    fn source(v: Vn, vns: &Vns, emitted: &[Vn]) -> ArgSource {
        if let Some(c) = vns.as_const(v) {
            return ArgSource::Const(c);
        }
        if let Some(p) = emitted.iter().position(|e| *e == v) {
            return ArgSource::Pos(p as u32);
        }
        match vns.defs[v as usize] {
            VnDef::Op(op, a, b) => ArgSource::Expr(op, Box::new(source(a, vns, emitted)), Box::new(source(b, vns, emitted))),
            _ => unreachable!("derived value without definition"),
        }
    }
    let mut events = Vec::new();
    let mut args_constant = 0;
    let mut args_derived = 0;
    for &s in sites {
        let site = &fa.sites[s];
        let args = site.args.iter().map(|a| source(a.vn, vns, &emitted)).collect::<Vec<_>>();
        for a in &args {
            match a {
                ArgSource::Const(_) => args_constant += 1,
                ArgSource::Expr(..) => args_derived += 1,
                ArgSource::Pos(_) => {}
            }
        }
        events.push(XlatEvent { id: site.id, args });
    }
    let args_duplicate = total_args - args_constant - args_derived - emitted.len();
    let last = fa.sites[*sites.last().unwrap()].instr;
    let offsets = sites.iter().map(|&s| -((last - fa.sites[s].instr) as i32)).collect();
    let weight = sites.iter().map(|&s| fa.sites[s].weight).fold(0.0, f64::max);
    let reread = emitted
        .iter()
        .map(|v| {
            let (s, k) = sites
                .iter()
                .flat_map(|&s| (0..fa.sites[s].args.len()).map(move |k| (s, k)))
                .find(|&(s, k)| fa.sites[s].args[k].vn == *v)?;
            let prod = fa.sites[s].args[k].prod.as_ref()?;
            let [idx] = prod.as_slice() else { return None };
            let Operator::LocalGet { local_index } = fa.ops[*idx] else { return None };
            let overwritten = fa.ops[*idx + 1..last].iter().any(|op| {
                matches!(op, Operator::LocalSet { local_index: l } | Operator::LocalTee { local_index: l } if *l == local_index)
            });
            (!overwritten).then_some(local_index)
        })
        .collect();
    Merge {
        reread,
        func,
        sites: sites.to_vec(),
        shape: Shape { events, nargs: emitted.len() as u32 },
        emitted,
        offsets,
        weight,
        args_constant,
        args_duplicate,
        args_derived,
    }
}

fn worthwhile(fa: &FuncAnalysis, mg: &Merge) -> bool {
    mg.sites.len() >= 2 || mg.emitted.len() < fa.sites[mg.sites[0]].args.len()
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum SiteState {
    Kept,
    Removed,
    Merged,
}

fn estimate(fas: &[FuncAnalysis], states: &[Vec<SiteState>], merges: &[Merge]) -> CostEstimate {
    let mut c = CostEstimate::default();
    let mut add = |x: CostEstimate, w: f64| {
        c.calls += x.calls * w;
        c.bytes += x.bytes * w;
        c.instructions += x.instructions * w;
        c.total += x.total * w;
    };
    for (f, fa) in fas.iter().enumerate() {
        for (s, site) in fa.sites.iter().enumerate() {
            if states[f][s] == SiteState::Kept {
                add(site_cost(site.args.len()), site.weight);
            }
        }
    }
    for mg in merges {
        add(mg.cost(), mg.weight);
    }
    c
}

// ---------------------------------------------------------------- rewriting

struct Remap {
    n_imports: u32,
    added: u32,
}

impl Reencode for Remap {
    type Error = Infallible;
    fn function_index(&mut self, f: u32) -> std::result::Result<u32, ReError<Infallible>> {
        // Saturating: the `name` section's indices are not validated, and one past every
        // function must stay past every function (a fuzzing finding overflowed here).
        Ok(if f < self.n_imports { f } else { f.saturating_add(self.added) })
    }
}

struct Rewriter {
    remap: Remap,
    new_imports: Vec<(String, u32)>,
    new_type_params: Vec<u32>,
    bodies: Vec<wasm_encoder::Function>,
    warnings: Vec<String>,
}

impl Reencode for Rewriter {
    type Error = Infallible;
    fn function_index(&mut self, f: u32) -> std::result::Result<u32, ReError<Infallible>> {
        self.remap.function_index(f)
    }
    fn parse_type_section(
        &mut self,
        types: &mut wasm_encoder::TypeSection,
        section: wasmparser::TypeSectionReader<'_>,
    ) -> std::result::Result<(), ReError<Infallible>> {
        utils::parse_type_section(self, types, section)?;
        for &n in &self.new_type_params {
            types.ty().function(vec![EncValType::I32; n as usize + 1], vec![]);
        }
        Ok(())
    }
    fn parse_import_section(
        &mut self,
        imports: &mut wasm_encoder::ImportSection,
        section: wasmparser::ImportSectionReader<'_>,
    ) -> std::result::Result<(), ReError<Infallible>> {
        utils::parse_import_section(self, imports, section)?;
        for (name, ty) in &self.new_imports {
            imports.import("kansoku", name, wasm_encoder::EntityType::Function(*ty));
        }
        Ok(())
    }
    fn parse_code_section(
        &mut self,
        code: &mut wasm_encoder::CodeSection,
        _section: wasmparser::CodeSectionReader<'_>,
    ) -> std::result::Result<(), ReError<Infallible>> {
        for b in self.bodies.drain(..) {
            code.function(&b);
        }
        Ok(())
    }
    fn parse_custom_section(
        &mut self,
        module: &mut wasm_encoder::Module,
        section: wasmparser::CustomSectionReader<'_>,
    ) -> std::result::Result<(), ReError<Infallible>> {
        let name = section.name();
        if name.starts_with(".debug_") {
            self.warnings.push(format!(
                "dropped DWARF section `{name}`: code offsets changed and DWARF is not rewritten"
            ));
            return Ok(());
        }
        if name == "kansoku.xlat" {
            return Ok(());
        }
        utils::parse_custom_section(self, module, section)
    }
}

enum Action {
    Delete,
    /// Replace the trace call: for each stack value (id first, then arguments; absent if its
    /// producers were deleted) what to do with it, then what to append.
    Site { pops: Vec<Option<u32>>, then: Vec<Instruction<'static>> },
}

// ---------------------------------------------------------------- driver

/// Optimises the trace calls of `wasm`.
pub fn optimize(wasm: &[u8], opts: &OptimizeOptions) -> Result<Optimized> {
    let mut m = ModuleInfo::parse(wasm)?;
    if m.xlat.is_some() {
        return Err(TpError::AlreadyOptimised);
    }
    if !m.has_trace_imports() {
        return Err(TpError::NoTraceImports);
    }
    if let Some(d) = &opts.extra_decls {
        m.decls.extend(d.clone());
    }
    let decls = m.decls.clone();
    let mut report = OptimizeReport { bytes_in: wasm.len(), max_new_ids: opts.max_new_ids, ..Default::default() };
    let may = may_trace(&m)?;

    // profile: executions per id, spread over the sites of that id
    let mut fas: Vec<FuncAnalysis> = Vec::new();
    {
        let no_profile = |_: u32| None;
        for f in 0..m.bodies.len() {
            fas.push(analyse_function(&m, f, &may, &no_profile, &mut report.unoptimisable_sites)?);
        }
        if let Some(p) = &opts.profile {
            let mut sites_per_id: HashMap<u32, usize> = HashMap::new();
            for fa in &fas {
                for s in &fa.sites {
                    *sites_per_id.entry(s.id).or_default() += 1;
                }
            }
            for fa in fas.iter_mut() {
                for s in fa.sites.iter_mut() {
                    let n = p.get(&s.id).copied().unwrap_or(0);
                    s.weight = n as f64 / sites_per_id[&s.id] as f64;
                }
            }
        }
    }
    report.trace_sites = fas.iter().map(|f| f.sites.len()).sum();
    report.barriers_removed = fas.iter().map(|f| f.barriers.len()).sum();
    report.args_before = fas.iter().flat_map(|f| &f.sites).map(|s| s.args.len()).sum();

    let mut states: Vec<Vec<SiteState>> = fas.iter().map(|f| vec![SiteState::Kept; f.sites.len()]).collect();
    report.iterations.push(estimate(&fas, &states, &[]));

    // pass 2: removal of disabled points and adjacent idempotent repeats
    for (f, fa) in fas.iter().enumerate() {
        let mut prev: Option<usize> = None;
        for (s, site) in fa.sites.iter().enumerate() {
            if opts.strip_all || decls.is_disabled(site.id) {
                states[f][s] = SiteState::Removed;
                report.removed_disabled += 1;
                continue;
            }
            if let Some(p) = prev {
                let ps = &fa.sites[p];
                if ps.seg == site.seg
                    && ps.id == site.id
                    && decls.is_idempotent(site.id)
                    && ps.args.iter().map(|a| a.vn).eq(site.args.iter().map(|a| a.vn))
                {
                    states[f][s] = SiteState::Removed;
                    report.removed_idempotent += 1;
                    continue;
                }
            }
            prev = Some(s);
        }
    }

    // pass 3: groups within segments under movement limits
    let mut pending: Vec<(usize, Vec<usize>)> = Vec::new();
    if !opts.no_merge && !opts.strip_all {
        for (f, fa) in fas.iter().enumerate() {
            let mut cur: Vec<usize> = Vec::new();
            for (s, site) in fa.sites.iter().enumerate() {
                if states[f][s] != SiteState::Kept {
                    continue;
                }
                let fits = cur.first().is_some_and(|&c0| fa.sites[c0].seg == site.seg)
                    && cur.iter().all(|&c| {
                        let moved = (site.instr - fa.sites[c].instr) as u32;
                        decls.get(fa.sites[c].id).max_move.is_none_or(|lim| moved <= lim)
                    });
                if !fits && !cur.is_empty() {
                    pending.push((f, std::mem::take(&mut cur)));
                }
                cur.push(s);
            }
            if !cur.is_empty() {
                pending.push((f, cur));
            }
        }
    }

    // passes 4–6: argument reduction, id budget, iteration
    let mut merges: Vec<Merge> = Vec::new();
    let mut shape_ids: HashMap<Shape, u32> = HashMap::new();
    let max_orig = fas.iter().flat_map(|f| &f.sites).map(|s| s.id).chain(decls.decls.keys().copied()).max().unwrap_or(0);
    let base_id = (max_orig / 1000 + 1).saturating_mul(1000);
    let mut next_id = base_id;
    let mut last_cost = report.iterations[0];
    let mut over_budget: HashSet<Shape> = HashSet::new();
    for _iteration in 0..16 {
        let candidates: Vec<Merge> = pending
            .iter()
            .map(|(f, g)| plan_merge(&fas[*f], *f, g))
            .filter(|mg| worthwhile(&fas[mg.func], mg))
            .collect();
        let mut score: HashMap<Shape, f64> = HashMap::new();
        for mg in &candidates {
            *score.entry(mg.shape.clone()).or_default() += mg.saving(&fas[mg.func]).max(0.0);
        }
        let mut ranked: Vec<(Shape, f64)> =
            score.into_iter().filter(|(s, sc)| *sc > 0.0 || shape_ids.contains_key(s)).collect();
        ranked.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| format!("{:?}", a.0).cmp(&format!("{:?}", b.0))));
        for (shape, _) in ranked {
            if shape_ids.contains_key(&shape) {
                continue;
            }
            // New ids lie above every original id; a module whose ids reach the top of the
            // id space (found by fuzzing: u32::MAX) has none left, and its shapes stay unmerged.
            let ids_left = next_id < u32::MAX && next_id > max_orig;
            if !ids_left || opts.max_new_ids.is_some_and(|b| next_id - base_id >= b) {
                over_budget.insert(shape);
                continue;
            }
            shape_ids.insert(shape, next_id);
            next_id += 1;
        }
        let mut next_pending = Vec::new();
        let mut taken: HashSet<(usize, usize)> = HashSet::new();
        for mg in candidates {
            if shape_ids.contains_key(&mg.shape) {
                for &s in &mg.sites {
                    taken.insert((mg.func, s));
                }
                merges.push(mg);
            }
        }
        for (f, g) in pending {
            if g.iter().any(|s| taken.contains(&(f, *s))) {
                continue;
            }
            if g.len() >= 2 {
                let (a, b) = g.split_at(g.len() / 2);
                next_pending.push((f, a.to_vec()));
                next_pending.push((f, b.to_vec()));
            }
        }
        pending = next_pending;
        for mg in &merges {
            for &s in &mg.sites {
                states[mg.func][s] = SiteState::Merged;
            }
        }
        let cost = estimate(&fas, &states, &merges);
        report.iterations.push(cost);
        let fell = if last_cost.total > 0.0 { (last_cost.total - cost.total) / last_cost.total } else { 0.0 };
        last_cost = cost;
        if fell < 0.01 || pending.is_empty() {
            break;
        }
    }
    report.shapes_over_budget = over_budget.iter().filter(|s| !shape_ids.contains_key(*s)).count();
    report.new_ids_used = next_id - base_id;
    report.groups_merged = merges.len();
    report.sites_merged = merges.iter().map(|m| m.sites.len()).sum();
    for mg in &merges {
        report.args_constant += mg.args_constant;
        report.args_duplicate += mg.args_duplicate;
        report.args_derived += mg.args_derived;
    }
    let states_ref = &states;
    report.args_after = fas
        .iter()
        .enumerate()
        .flat_map(|(f, fa)| fa.sites.iter().enumerate().filter(move |(s, _)| states_ref[f][*s] == SiteState::Kept))
        .map(|(_, s)| s.args.len())
        .sum::<usize>()
        + merges.iter().map(|m| m.emitted.len()).sum::<usize>();

    // translation table
    let mut table = XlatTable { original_hash: crate::tracefile::module_hash(wasm), entries: BTreeMap::new() };
    for mg in &merges {
        let id = shape_ids[&mg.shape];
        table.entries.entry(id).or_insert_with(|| XlatEntry {
            new_id: id,
            nargs: mg.shape.nargs,
            events: mg.shape.events.clone(),
            offsets: mg.offsets.clone(),
        });
    }
    report.xlat = table.sizes();

    // new imports for arities the module lacks
    let n_imports = m.num_func_imports();
    let mut import_of_arity: HashMap<u32, u32> = HashMap::new();
    let mut new_imports = Vec::new();
    let mut new_type_params = Vec::new();
    let n_types = m.types.len() as u32;
    for mg in &merges {
        let e = mg.emitted.len() as u32;
        if import_of_arity.contains_key(&e) {
            continue;
        }
        let idx = match m.trace_import(e) {
            Some(i) => i,
            None => {
                let i = n_imports + new_imports.len() as u32;
                new_imports.push((format!("trace{e}"), n_types + new_type_params.len() as u32));
                new_type_params.push(e);
                i
            }
        };
        import_of_arity.insert(e, idx);
    }
    let added = new_imports.len() as u32;
    let mut remap = Remap { n_imports, added };

    // per-function actions
    let mut bodies = Vec::new();
    for (f, fa) in fas.iter().enumerate() {
        let mut actions: HashMap<usize, Action> = HashMap::new();
        let mut deleted: HashSet<usize> = HashSet::new();
        for &b in &fa.barriers {
            actions.insert(b, Action::Delete);
        }
        let mut max_slots = 0u32;
        let mut site_plan: HashMap<usize, (&Merge, usize)> = HashMap::new();
        for mg in merges.iter().filter(|m| m.func == f) {
            max_slots = max_slots.max(mg.emitted.len() as u32);
            for (j, &s) in mg.sites.iter().enumerate() {
                site_plan.insert(s, (mg, j));
            }
        }
        for (s, site) in fa.sites.iter().enumerate() {
            let state = states[f][s];
            if state == SiteState::Kept {
                continue;
            }
            // which values to keep, and in which local
            let mut pops: Vec<Option<u32>> = Vec::new();
            let mut then = Vec::new();
            let dispose = |slot: &Slot, keep_in: Option<u32>, deleted: &mut HashSet<usize>, pops: &mut Vec<Option<u32>>| {
                if keep_in.is_none() {
                    if let Some(p) = &slot.prod {
                        deleted.extend(p.iter().copied());
                        return;
                    }
                }
                pops.push(keep_in);
            };
            let id_slot = Slot { vn: 0, prod: site.id_prod.clone() };
            dispose(&id_slot, None, &mut deleted, &mut pops);
            if state == SiteState::Merged {
                let (mg, j) = site_plan[&s];
                for (k, a) in site.args.iter().enumerate() {
                    // store the value where it first occurs in the group
                    let first = mg.sites[..j]
                        .iter()
                        .all(|&o| fa.sites[o].args.iter().all(|x| x.vn != a.vn))
                        && site.args[..k].iter().all(|x| x.vn != a.vn);
                    let keep = mg
                        .emitted
                        .iter()
                        .position(|e| *e == a.vn)
                        .filter(|&p| first && mg.reread[p].is_none())
                        .map(|p| fa.num_locals + p as u32);
                    dispose(a, keep, &mut deleted, &mut pops);
                }
                if j == mg.sites.len() - 1 {
                    then.push(Instruction::I32Const(shape_ids[&mg.shape] as i32));
                    for p in 0..mg.emitted.len() {
                        then.push(Instruction::LocalGet(mg.reread[p].unwrap_or(fa.num_locals + p as u32)));
                    }
                    then.push(Instruction::Call(import_of_arity[&(mg.emitted.len() as u32)]));
                }
            } else {
                for a in &site.args {
                    dispose(a, None, &mut deleted, &mut pops);
                }
            }
            actions.insert(site.instr, Action::Site { pops, then });
        }
        let mut locals: Vec<(u32, EncValType)> = Vec::new();
        for (c, t) in &fa.locals {
            locals.push((*c, remap.val_type(*t).map_err(|e| TpError::Encode(e.to_string()))?));
        }
        if max_slots > 0 {
            locals.push((max_slots, EncValType::I32));
        }
        let mut func = wasm_encoder::Function::new(locals);
        for (i, op) in fa.ops.iter().enumerate() {
            if deleted.contains(&i) {
                continue;
            }
            match actions.get(&i) {
                Some(Action::Delete) => {}
                Some(Action::Site { pops, then }) => {
                    for p in pops.iter().rev() {
                        match p {
                            Some(l) => func.instruction(&Instruction::LocalSet(*l)),
                            None => func.instruction(&Instruction::Drop),
                        };
                    }
                    for ins in then {
                        func.instruction(ins);
                    }
                }
                None => {
                    let ins = remap.instruction(op.clone()).map_err(|e| TpError::Encode(e.to_string()))?;
                    func.instruction(&ins);
                }
            }
        }
        bodies.push(func);
    }

    let mut rw = Rewriter { remap, new_imports, new_type_params, bodies, warnings: Vec::new() };
    let mut module = wasm_encoder::Module::new();
    rw.parse_core_module(&mut module, wasmparser::Parser::new(0), wasm).map_err(|e| TpError::Encode(e.to_string()))?;
    if !m.custom_sections.iter().any(|n| is_decl_section(n)) && !decls.decls.is_empty() {
        // declarations from a side file travel with the module, for decoding
        let text: String = decls
            .decls
            .values()
            .map(|d| {
                let mut flags = Vec::new();
                if d.idempotent {
                    flags.push("idempotent");
                }
                if d.disabled {
                    flags.push("disabled");
                }
                format!(
                    "id={};name={};args={};flags={};move={}\n",
                    d.id,
                    d.name,
                    d.arg_names.join(","),
                    flags.join(","),
                    d.max_move.map(|x| x as i64).unwrap_or(-1)
                )
            })
            .collect();
        module.section(&wasm_encoder::CustomSection { name: "kansoku.decl".into(), data: text.as_bytes().into() });
    }
    let xlat_bytes = table.encode();
    module.section(&wasm_encoder::CustomSection { name: "kansoku.xlat".into(), data: xlat_bytes.as_slice().into() });
    let out = module.finish();
    wasmparser::Validator::new()
        .validate_all(&out)
        .map_err(|e| TpError::Encode(format!("the rewritten module does not validate: {e}")))?;
    report.warnings.extend(rw.warnings);
    report.bytes_out = out.len();
    Ok(Optimized { wasm: out, table, report })
}

/// Counts records per id in a trace: the profile `optimize` accepts.
pub fn profile_from_trace(trace: &crate::tracefile::TraceData) -> HashMap<u32, u64> {
    let mut p = HashMap::new();
    for r in &trace.records {
        *p.entry(r.id).or_default() += 1;
    }
    p
}
