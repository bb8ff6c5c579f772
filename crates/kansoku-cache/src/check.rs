//! Set-method formulas checked against the simulator before they are trusted.
//!
//! The set method's sets are exact only as far as isl's operations are. Debian's isl 0.25
//! coalesces some maps with existentials wrongly: gemver 8-way's P14 (extents 16), built
//! with `E_2` as a lexmin and the later `E_k` as existentials, had an `E_8` (the lines
//! above some line of `E_7`) whose domain held 10 points at N = 13 before
//! `isl_map_coalesce` and 11 after (the simulator: 10) — one access whose window holds 7
//! distinct lines counted as having 8. The same set built another way coalesced right. A
//! formula is therefore compared with a fresh simulation at a few parameter points
//! (`check_points`) before it is written; the check cannot prove a formula right
//! everywhere, but it keeps a wrong one from being handed out unnoticed.

use crate::config::{CacheConfig, LayoutSpec, ParamValues};
use crate::error::{CacheError, Result};
use crate::kernel::Kernel;
use crate::sets::{build_set_model, Alternative, RefSetFormulas, SetFormulas, SetModelOptions};
use crate::sim::{Inclusion, Program, RefStats};

/// A reference whose formula counts differ from the simulator's at one parameter point.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Disagreement {
    /// The reference as the formulas name it (a `--ref` selector such as `S3:right:1`).
    pub reference: String,
    /// The level (1: L1) when the formulas are a hierarchy's; `None`: one cache.
    pub level: Option<usize>,
    /// The parameter values of the simulation that disagrees.
    pub at: ParamValues,
    /// Accesses, compulsory and conflict misses by the formulas.
    pub formulas: [i128; 3],
    /// The same by the simulator.
    pub simulator: [u64; 3],
}

impl std::fmt::Display for Disagreement {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let [a, c, x] = self.formulas;
        let [sa, sc, sx] = self.simulator;
        if let Some(l) = self.level {
            write!(f, "L{l} ")?;
        }
        write!(f, "{} at {}: formulas {a}/{c}/{x}, simulator {sa}/{sc}/{sx} (accesses/compulsory/conflict)", self.reference, show(&self.at))
    }
}

fn show(p: &ParamValues) -> String {
    p.iter().map(|(n, v)| format!("{n}={v}")).collect::<Vec<_>>().join(",")
}

/// Simulated accesses above which a point is not checked: a few seconds of simulation,
/// against build times of seconds to a minute (PolyBench's MEDIUM sizes stay below).
pub(crate) const MAX_CHECK_ACCESSES: i64 = 300_000_000;

/// Up to `n` parameter points the formulas hold for, the same every run: every point of
/// the context when there are at most `n`, otherwise the box's largest and smallest corners
/// and points drawn by a fixed generator (most references' behaviour changes near the
/// extents, where arrays fill the cache sets, so the largest corner comes first). Points
/// whose simulation would exceed [`MAX_CHECK_ACCESSES`] are left out. Empty when a
/// parameter is unbounded.
pub fn check_points(f: &SetFormulas, n: usize) -> Vec<ParamValues> {
    let Some(ranges) = kansoku_ehrhart::param_box(&f.context, f.params.len()) else { return Vec::new() };
    let size = ranges.iter().try_fold(1u64, |acc, (lo, hi)| acc.checked_mul(u64::try_from(hi - lo + 1).ok()?));
    let mut candidates: Vec<Vec<i64>> = Vec::new();
    if size.is_some_and(|s| s <= n as u64) {
        // Every point, largest first.
        let mut p: Vec<i64> = ranges.iter().map(|r| r.1).collect();
        'all: loop {
            candidates.push(p.clone());
            for (d, v) in p.iter_mut().enumerate() {
                if *v > ranges[d].0 {
                    *v -= 1;
                    continue 'all;
                }
                *v = ranges[d].1;
            }
            break;
        }
    } else {
        candidates.push(ranges.iter().map(|r| r.1).collect());
        candidates.push(ranges.iter().map(|r| r.0).collect());
        let mut state: u64 = 0x9e37_79b9_7f4a_7c15;
        for _ in 0..4 * n {
            candidates.push(ranges.iter().map(|(lo, hi)| lo + (next(&mut state) % u64::try_from(hi - lo + 1).unwrap_or(1)) as i64).collect());
        }
    }
    let mut points: Vec<ParamValues> = Vec::new();
    for p in candidates {
        if points.len() == n {
            break;
        }
        let values: ParamValues = f.params.iter().cloned().zip(p.iter().copied()).collect();
        if f.context.contains(&p) && !points.contains(&values) && accesses(f, &values).is_some_and(|a| a <= MAX_CHECK_ACCESSES) {
            points.push(values);
        }
    }
    points
}

/// A 64-bit linear congruential step (Knuth's MMIX constants), upper bits out.
fn next(state: &mut u64) -> u64 {
    *state = state.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
    *state >> 33
}

/// All references' accesses at `p` by the formulas (`None` if they do not evaluate); of
/// the first level, for a hierarchy's.
fn accesses(f: &SetFormulas, p: &ParamValues) -> Option<i64> {
    f.levels()[0].eval(p).ok()?.iter().try_fold(0i64, |sum, e| sum.checked_add(e.accesses))
}

/// Every reference of `f` whose counts differ from a fresh simulation of `k` (the kernel
/// the formulas were built from, with the same fixed extents) at `points`; for a
/// non-inclusive hierarchy's formulas (`SetFormulas::above`), every level's against one
/// simulation of the hierarchy.
pub fn disagreements(k: &Kernel, f: &SetFormulas, points: &[ParamValues]) -> Result<Vec<Disagreement>> {
    let levels = f.levels();
    let caches: Vec<CacheConfig> = levels.iter().map(|l| l.cache).collect();
    let mut out = Vec::new();
    for p in points {
        let prog = Program::new(k, p, &f.layout)?;
        let sim = if caches.len() == 1 { prog.simulate(&caches) } else { prog.simulate_hierarchy(&caches, Inclusion::NonInclusive)? };
        for (i, (evaluation, sim)) in f.eval_levels(p)?.iter().zip(&sim).enumerate() {
            let counts = evaluation.iter().map(|e| (e.reference.as_str(), [e.accesses, e.compulsory, e.conflict].map(i128::from)));
            out.extend(compare(k, p, sim, (levels.len() > 1).then_some(i + 1), counts)?);
        }
    }
    Ok(out)
}

/// The references among `counts` (reference, [accesses, compulsory, conflict misses], by
/// any kind of formulas) whose counts differ from one simulation of `k` at `p`.
pub(crate) fn compare_with_simulation<'a>(k: &Kernel, p: &ParamValues, layout: &LayoutSpec, cache: CacheConfig, counts: impl IntoIterator<Item = (&'a str, [i128; 3])>) -> Result<Vec<Disagreement>> {
    let sim = Program::new(k, p, layout)?.simulate(&[cache]).pop().unwrap_or_default();
    compare(k, p, &sim, None, counts)
}

/// The references among `counts` whose counts differ from `sim`'s (one level's).
fn compare<'a>(k: &Kernel, p: &ParamValues, sim: &[RefStats], level: Option<usize>, counts: impl IntoIterator<Item = (&'a str, [i128; 3])>) -> Result<Vec<Disagreement>> {
    let mut out = Vec::new();
    for (reference, formulas) in counts {
        let r = k.find_ref(reference).ok_or_else(|| CacheError::Formulas(format!("the kernel has no reference {reference}")))?;
        let s = sim.get(r).ok_or_else(|| CacheError::Formulas(format!("the simulator gave no counts for {reference}")))?;
        let simulator = [s.accesses, s.compulsory, s.other];
        if formulas != simulator.map(i128::from) {
            out.push(Disagreement { reference: reference.to_string(), level, at: p.clone(), formulas, simulator });
        }
    }
    Ok(out)
}

/// What [`check_and_rebuild`] found: the references built again (with the construction
/// that agreed) and, when one agreed with no construction, the disagreements left (the
/// first is that reference's).
#[derive(Debug, Default)]
pub struct Checked {
    /// References built again: the disagreement that caused it, and the construction that agreed.
    pub rebuilt: Vec<(Disagreement, Alternative)>,
    /// Disagreements no construction mended (empty when every reference now agrees).
    pub unmended: Vec<Disagreement>,
}

/// Compares `f` with the simulator at `points`. A reference that differs is built again
/// with `opts.race`'s constructions the options do not use, one by one, and replaced by
/// the first that agrees at every point; the check stops at a reference none mends. With
/// nothing left unmended, `f.checked_at` lists the points.
pub fn check_and_rebuild(k: &Kernel, f: &mut SetFormulas, points: Vec<ParamValues>, opts: &SetModelOptions) -> Result<Checked> {
    let mut out = Checked::default();
    let mut bad = disagreements(k, f, &points)?;
    if f.above.is_some() && !bad.is_empty() {
        // A level below depends on the sets of the level above: not rebuilt one by one.
        out.unmended = bad;
        return Ok(out);
    }
    while let Some(first) = bad.first().cloned() {
        let Some((built, alternative)) = rebuild_agreeing(k, &first.reference, &points, opts)? else {
            out.unmended = bad;
            return Ok(out);
        };
        let slot = f.refs.iter_mut().find(|x| x.reference == first.reference).expect("a disagreement names a built reference");
        *slot = built;
        bad.retain(|d| d.reference != first.reference);
        out.rebuilt.push((first, alternative));
    }
    if let Some(above) = &mut f.above {
        above.checked_at = points.clone();
    }
    f.checked_at = points;
    Ok(out)
}

/// `reference` built with each of `opts.race`'s constructions the options do not use, in
/// turn: the first whose counts equal the simulator's at every point of `points`.
fn rebuild_agreeing(k: &Kernel, reference: &str, points: &[ParamValues], opts: &SetModelOptions) -> Result<Option<(RefSetFormulas, Alternative)>> {
    let r = k.find_ref(reference).ok_or_else(|| CacheError::Formulas(format!("the kernel has no reference {reference}")))?;
    for &alternative in &opts.race {
        let Some(mut o) = alternative.options(opts) else { continue };
        (o.refs, o.race, o.jobs) = (vec![r], Vec::new(), 1);
        let Ok(mut g) = build_set_model(k, &o) else { continue };
        if disagreements(k, &g, points)?.is_empty() {
            let built = g.refs.pop().expect("one reference was built").built_by(Some(alternative));
            return Ok(Some((built, alternative)));
        }
    }
    Ok(None)
}
