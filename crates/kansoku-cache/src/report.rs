//! The `kansoku cache` answers ([`crate::answer`]) as text, and the seed's worked example
//! as a demo stage.

use crate::answer::{fmt_params, simulation_report, Caches, EvalAnswer, ModelAnswer, SimReport, SimRow};
use crate::config::{parse_params, CacheConfig, LayoutSpec, ParamValues};
use crate::error::{CacheError, Result};
use crate::model::{build_model, Evaluation, Family, KernelFormulas, ModelOptions};
use crate::sets::{RefSetEvaluation, SetFormulas};
use crate::sim::{Inclusion, Program};
use std::fmt::{self, Display, Formatter};
use std::path::Path;

impl Display for SimReport {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        let l1 = if self.lower_levels.is_empty() { "" } else { "L1 " };
        writeln!(f, "{}  {l1}cache {}  {}", self.kernel, self.cache, fmt_params(&self.params))?;
        writeln!(f, "  layout: {}", self.layout)?;
        writeln!(f, "  cache at the kernel's start: {}", self.start.describe())?;
        sim_rows(f, &self.refs)?;
        writeln!(f, "  {} accesses, {} misses, {:.3} s ({:.1} M accesses/s)", self.total_accesses, self.total_misses, self.seconds, self.accesses_per_second / 1e6)?;
        for (i, l) in self.lower_levels.iter().enumerate() {
            let inclusion = if l.inclusion == Inclusion::Inclusive { "inclusive" } else { "non-inclusive" };
            writeln!(f, "L{} cache {} ({inclusion}; sees the L{} misses)", i + 2, l.cache, i + 1)?;
            sim_rows(f, &l.refs)?;
            writeln!(f, "  {} accesses, {} misses", l.total_accesses, l.total_misses)?;
        }
        Ok(())
    }
}

fn sim_rows(f: &mut Formatter<'_>, rows: &[SimRow]) -> fmt::Result {
    writeln!(f, "  {:<4} {:<14} {:<14} {:>12} {:>12} {:>11} {:>11}", "ref", "position", "reference", "accesses", "hits", "compulsory", "other")?;
    for r in rows {
        writeln!(f, "  {:<4} {:<14} {:<14} {:>12} {:>12} {:>11} {:>11}", r.reference, format!("{}:{}:{}", r.statement, r.side, r.position), r.text, r.accesses, r.hits, r.compulsory, r.other)?;
    }
    Ok(())
}

impl Display for ModelAnswer {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        match self {
            ModelAnswer::Simulated(r) => r.fmt(f),
            ModelAnswer::Sets { formulas, evaluations, at, explain } => {
                set_formulas(f, formulas, *explain)?;
                for (i, ev) in evaluations.iter().flatten().enumerate() {
                    set_eval(f, ev, &if formulas.above.is_some() { format!("{at} (L{})", i + 1) } else { at.clone() })?;
                }
                Ok(())
            }
            ModelAnswer::Interpolated { formulas: kf, evaluation, explain } => {
                write!(f, "{kf}")?;
                writeln!(f, "layout: {}", kf.layout.describe())?;
                writeln!(f, "cache at the kernel's start: {}", kf.start.describe())?;
                writeln!(f, "derived in {:.3} s from exact simulations at {} for n = {}..={} (horizon {})", kf.build_seconds, kf.family.describe("n"), kf.sampled_sizes.0, kf.sampled_sizes.1, kf.horizon)?;
                if *explain {
                    explain_interpolation(f, kf)?;
                }
                if let Some(ev) = evaluation {
                    interpolated_eval(f, ev, kf)?;
                }
                Ok(())
            }
        }
    }
}

fn set_formulas(f: &mut Formatter<'_>, sf: &SetFormulas, explain: bool) -> fmt::Result {
    let levels = sf.levels();
    for (i, level) in levels.iter().enumerate() {
        if levels.len() > 1 {
            writeln!(f, "{}L{} ({}):", if i == 0 { "" } else { "\n" }, i + 1, if i == 0 { "first level" } else { "non-inclusive; counts the accesses that miss the level above" })?;
        }
        level_formulas(f, level, explain)?;
    }
    if levels.len() > 1 {
        writeln!(f, "\nall {} levels built in {:.3} s", levels.len(), levels.iter().map(|l| l.build_seconds).sum::<f64>())?;
    }
    Ok(())
}

fn level_formulas(f: &mut Formatter<'_>, sf: &SetFormulas, explain: bool) -> fmt::Result {
    writeln!(f, "{}  cache {}  set method (isl + parametric counting); parameters {} with {}", sf.kernel, sf.cache, sf.params.join(", "), sf.context.show(&sf.params))?;
    writeln!(f, "  layout: {}", sf.layout.describe())?;
    writeln!(f, "  cache at the kernel's start: {}", sf.start.describe())?;
    if !sf.extents.is_empty() {
        writeln!(f, "  array extents fixed at {}", fmt_params(&sf.extents))?;
    }
    for r in &sf.refs {
        let tables = if r.tabulated_pieces > 0 { format!("; {} piece{} tabulated point by point", r.tabulated_pieces, if r.tabulated_pieces == 1 { "" } else { "s" }) } else { String::new() };
        writeln!(f, "\n{} {}:{}:{}  {}   ({:.3} s{tables})", r.reference, r.statement, r.side, r.position, r.text, r.build_seconds)?;
        writeln!(f, "  compulsory misses (first - second count) = sum of:")?;
        write!(f, "{}", r.compulsory)?;
        writeln!(f, "  conflict misses (third - fourth count) = sum of:")?;
        write!(f, "{}", r.conflict)?;
        if let Some(x) = explain.then_some(r.explain.as_ref()).flatten() {
            writeln!(f, "  sets (isl notation):")?;
            writeln!(f, "    access: {}", x.access)?;
            writeln!(f, "    hit condition: {}", x.hit_condition)?;
            writeln!(f, "    hit source (lexmax): {}", x.hit_source)?;
            writeln!(f, "    compulsory set (no hit source): {}", x.compulsory_set)?;
            for (who, set) in &x.conflict_factors {
                writeln!(f, "    conflict-miss factor {who}: {set}")?;
            }
            for (i, set) in x.distinct_lines.iter().enumerate() {
                writeln!(f, "    E_{} (>= {} distinct lines of the set in between, per array group [X] when counted per array; replaces the seed's split/common sets): {set}", i + 1, i + 1)?;
            }
            writeln!(f, "    conflict set (>= A distinct lines in between: E_A's domain, or disjoint parts joined by ∪ when counted per array): {}", x.conflict_set)?;
            if let Some(seed) = &x.seed_conflict {
                writeln!(f, "  the seed's split/common construction (sums per-factor line counts; a line two factors insert counts twice) would give:")?;
                write!(f, "{seed}")?;
            }
        }
    }
    writeln!(f, "\nbuilt in {:.3} s", sf.build_seconds)
}

fn set_eval(f: &mut Formatter<'_>, ev: &[RefSetEvaluation], at: &str) -> fmt::Result {
    writeln!(f, "\nEvaluation at {at}:")?;
    writeln!(f, "  {:<4} {:>14} {:>14} {:>12} {:>12}", "ref", "accesses", "hits", "compulsory", "conflict")?;
    for r in ev {
        writeln!(f, "  {:<4} {:>14} {:>14} {:>12} {:>12}", r.reference, r.accesses, r.hits, r.compulsory, r.conflict)?;
    }
    Ok(())
}

fn explain_interpolation(f: &mut Formatter<'_>, kf: &KernelFormulas) -> fmt::Result {
    writeln!(f, "\nHow each formula was derived (method: docs/rooms/seed004-cache.md):")?;
    writeln!(f, "  every size {}..={} was simulated exactly; a piece is a quasi-polynomial whose (D+1)-th differences", kf.sampled_sizes.0, kf.sampled_sizes.1)?;
    writeln!(f, "  with step = period vanish on all its sizes; the last piece needs >= 3 checks per residue class beyond the horizon {}.", kf.horizon)?;
    for r in &kf.refs {
        writeln!(f, "  {} {} (degree bound D = {}: enclosing loops whose trip count grows with the size)", r.reference, r.text, r.degree_bound)?;
        for (name, q) in [("accesses (first count)", &r.accesses), ("compulsory (first - second count)", &r.compulsory), ("conflict (third - fourth count)", &r.conflict)] {
            writeln!(f, "    {name}: {} piece(s), last from {} with period {}, {} checks per class, verified up to {}", q.pieces.len(), q.last_from(), q.period(), q.checks_per_class, q.verified_max)?;
            for p in &q.pieces {
                let to = p.to.map(|t| t.to_string()).unwrap_or_else(|| "inf".into());
                writeln!(f, "      [{}, {}] period {} Newton coefficients {:?}", p.from, to, p.period, p.newton)?;
            }
        }
        for (title, parts) in [("hit sources (second count by the reference that last touched the line)", &r.hit_sources), ("conflict-miss factors (conflict misses by the evicting reference)", &r.conflict_factors)] {
            if parts.is_empty() {
                continue;
            }
            writeln!(f, "    {title}:")?;
            for part in parts {
                for (cond, e) in part.count.pieces_text(&kf.size_var) {
                    writeln!(f, "      {:<4} {cond:<30} {e}", part.reference)?;
                }
            }
        }
    }
    Ok(())
}

fn interpolated_eval(f: &mut Formatter<'_>, ev: &Evaluation, kf: &KernelFormulas) -> fmt::Result {
    writeln!(f, "\nEvaluation at {} with n = {}:", kf.family.describe("n"), ev.n)?;
    writeln!(f, "  {:<4} {:>14} {:>14} {:>12} {:>12}", "ref", "accesses", "hits", "compulsory", "conflict")?;
    for r in &ev.refs {
        writeln!(f, "  {:<4} {:>14} {:>14} {:>12} {:>12}", r.reference, r.accesses, r.hits, r.compulsory, r.conflict)?;
        let show = |m: &std::collections::BTreeMap<String, i128>| m.iter().filter(|(_, v)| **v != 0).map(|(k, v)| format!("{k}: {v}")).collect::<Vec<_>>().join(", ");
        if !r.hit_sources.is_empty() {
            writeln!(f, "       hit sources {{{}}}  conflict-miss factors {{{}}}", show(&r.hit_sources), show(&r.conflict_factors))?;
        }
    }
    if ev.extrapolated {
        writeln!(f, "  note: {} is beyond the sizes checked against the simulator (up to {}); the value continues the verified quasi-polynomial", ev.n, ev.verified_max)?;
    }
    Ok(())
}

impl Display for EvalAnswer {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        let (verified, hierarchy) = match self {
            EvalAnswer::Interpolated { formulas, evaluation, microseconds, verify_mismatches, .. } => {
                interpolated_eval(f, evaluation, formulas)?;
                writeln!(f, "  evaluated in {microseconds:.1} µs")?;
                (verify_mismatches, false)
            }
            EvalAnswer::Sets { param, evaluation, levels, microseconds, verify_mismatches } => {
                if levels.is_empty() {
                    set_eval(f, evaluation, param)?;
                }
                for (i, l) in levels.iter().enumerate() {
                    set_eval(f, &l.evaluation, &format!("{param} (L{}, cache {})", i + 1, l.cache))?;
                }
                writeln!(f, "  evaluated in {microseconds:.1} µs")?;
                (verify_mismatches, levels.len() > 1)
            }
        };
        if verified.as_ref().is_some_and(|m| m.is_empty()) {
            writeln!(f, "  verified: the simulator gives the same counts for every reference{}", if hierarchy { " at every level (non-inclusive hierarchy)" } else { "" })?;
        }
        Ok(())
    }
}

/// The seed's worked example as a demo stage: writes `seed.k`, `seed-formulas.json`,
/// `seed-simulation.json` and `seed-set-formulas.json` into `dir` and returns a short summary.
pub fn demo_stage(dir: &Path) -> Result<String> {
    use crate::seed_example as ex;
    let write = |name: &str, bytes: &[u8]| -> Result<()> {
        let p = dir.join(name);
        std::fs::write(&p, bytes).map_err(|e| CacheError::Input(format!("cannot write {}: {e}", p.display())))
    };
    std::fs::create_dir_all(dir).map_err(|e| CacheError::Input(format!("cannot create {}: {e}", dir.display())))?;
    write("seed.k", ex::KERNEL.as_bytes())?;
    let k = crate::parse_kernel(&dir.join("seed.k").display().to_string(), ex::KERNEL)?;
    let layout = LayoutSpec::parse_bases(ex::BASES)?;
    let cache = CacheConfig::parse(ex::CACHE)?;
    let family = Family::all_varying(&k);
    let f = build_model(&k, &ModelOptions::new(family.clone(), layout.clone(), vec![cache]))?.pop().expect("one cache");
    write("seed-formulas.json", serde_json::to_string_pretty(&f)?.as_bytes())?;
    let p = parse_params("X=10,Y=10,Z=10")?;
    let caches = Caches { levels: vec![cache], inclusion: Inclusion::Inclusive, layout: layout.clone(), every_access: false };
    let rep = simulation_report(&k, &p, &caches, u64::MAX, None, &crate::answer::Quiet)?;
    write("seed-simulation.json", serde_json::to_string_pretty(&rep)?.as_bytes())?;
    let r = crate::answer::find_ref(&k, ex::REFERENCE)?;
    let ev = f.eval(&p)?;
    let (m, s) = (&ev.refs[r], &rep.refs[r]);
    if (m.compulsory, m.conflict) != (s.compulsory as i128, s.other as i128) {
        return Err(CacheError::Model(format!("seed example: formulas give {}+{} misses but the simulator {}+{}", m.compulsory, m.conflict, s.compulsory, s.other)));
    }
    // Agreement at 50 sizes spread over 1..=200.
    let mut agree = 0;
    for i in 0..50 {
        let n = 1 + (i * 37 + 11) % 200;
        let pn = family.params_at(n);
        let sim = Program::new(&k, &pn, &layout)?.simulate(&[cache]).pop().expect("one cache");
        let e = f.eval(&pn)?;
        if e.refs.iter().zip(&sim).all(|(a, b)| (a.compulsory, a.conflict) == (b.compulsory as i128, b.other as i128)) {
            agree += 1;
        }
    }
    // The seed's set-based method: formulas in X, Y, Z independently.
    let sf = crate::sets::build_set_model(&k, &crate::sets::SetModelOptions::new(layout.clone(), cache))?;
    write("seed-set-formulas.json", serde_json::to_string_pretty(&sf)?.as_bytes())?;
    let se = sf.eval(&p)?;
    let mut set_agree = 0;
    for i in 0..50i64 {
        let pt: ParamValues = [("X", 1 + (i * 37 + 11) % 200), ("Y", 1 + (i * 53 + 7) % 200), ("Z", 1 + (i * 91 + 3) % 200)].into_iter().map(|(n, v)| (n.to_string(), v)).collect();
        let sim = Program::new(&k, &pt, &layout)?.simulate(&[cache]).pop().expect("one cache");
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
