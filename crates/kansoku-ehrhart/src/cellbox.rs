//! What a cell's box of parameter values fixes (issue 17: formula files past 1 MB).
//!
//! A count is derived for all parameter values, but a cell and its context often bound a
//! parameter tightly: `NQ <= 1` beside the context's `NQ >= 1` fixes it, `4 <= NP <= 5`
//! leaves two values. The counter's quasi-polynomials do not know that: doitgen's
//! conflict count at extents 16 has a cell with 53 floor terms and 12,498 monomials where
//! `NQ = 1` and `NP` is 4 or 5. Over such a box a parameter with one value is a number, a
//! floor term whose argument cannot cross a multiple of its denominator is a number, and a
//! parameter with a few values can be split into one cell per value, each of which
//! collapses the same way. Every step is exact: the value is unchanged at every point of
//! the cell's domain within the context (`eval` checks both before it evaluates).

use crate::qpoly::{monomials, Cell, Constraint, Domain, Expr, Floor, Monomial, Rat};
use std::collections::BTreeMap;

/// Inclusive bounds per parameter; `None` is unbounded.
type Bounds = Vec<(Option<i128>, Option<i128>)>;

/// At most this many values of a parameter are split into cells of their own (a split
/// is kept only when it is smaller). 8 left covariance 8-way's P11 (extents 16) with one
/// cell of 808 KB of JSON — `N = 16`, `5 <= M <= 16`, 42 floor terms of `M` in products
/// up to the fifth degree — once its conflict set came in more parts.
const MAX_SPLIT: i128 = 16;
/// Cells cheaper than this (see [`cost`]) are not split: little to gain.
const SPLIT_FROM: usize = 64;

/// The cell, over the box its domain and the context imply, in fewer monomials: none when
/// the domain holds no point, one cell, or one cell per value of a parameter with a few
/// values when that is smaller. The cell unchanged when 64 bits would not do.
pub(crate) fn shrink(cell: Cell, context: &Domain, np: usize) -> Vec<Cell> {
    let Some(b) = bounds(cell.domain.constraints.iter().chain(&context.constraints), np) else {
        return Vec::new();
    };
    // At most one split per parameter.
    shrink_within(cell, context, &b, np)
}

fn shrink_within(cell: Cell, context: &Domain, b: &Bounds, depth: usize) -> Vec<Cell> {
    let np = b.len();
    let Some(value) = cell.value.on_box(b) else {
        return vec![cell];
    };
    let whole = Cell { domain: cell.domain, value };
    let whole_cost = cost(&whole, np);
    if depth == 0 || whole_cost < SPLIT_FROM {
        return vec![whole];
    }
    // The parameter with the fewest values (more than one) is split into them.
    let narrowest = (0..np)
        .filter_map(|s| match b[s] {
            (Some(lo), Some(hi)) if hi > lo && hi - lo < MAX_SPLIT => Some((hi - lo, s, lo, hi)),
            _ => None,
        })
        .min();
    let Some((_, s, lo, hi)) = narrowest else {
        return vec![whole];
    };
    let mut parts = Vec::new();
    for v in lo..=hi {
        let Ok(v) = i64::try_from(v) else { return vec![whole] };
        let mut domain = whole.domain.clone();
        domain.constraints.push(Constraint::pin(np, s, v));
        let Some(pinned) = bounds(domain.constraints.iter().chain(&context.constraints), np) else {
            continue;
        };
        parts.extend(shrink_within(Cell { domain, value: whole.value.clone() }, context, &pinned, depth - 1));
    }
    if parts.iter().map(|c| cost(c, np)).sum::<usize>() < whole_cost {
        parts
    } else {
        vec![whole]
    }
}

/// About the cell's share of the file: symbols written per monomial, floor and constraint.
fn cost(cell: &Cell, np: usize) -> usize {
    cell.value.terms.iter().map(|m| 2 + m.powers.len()).sum::<usize>()
        + cell.value.floors.iter().map(|f| 2 + f.coeffs.len()).sum::<usize>()
        + cell.domain.constraints.len() * (2 + np)
}

/// Bounds of each parameter implied by the constraints, by interval propagation (each
/// constraint bounds each of its parameters by the others' bounds; three rounds). Sound,
/// not tight: the box may hold points the constraints exclude. `None` when it proves that
/// no integer point satisfies them.
pub(crate) fn bounds<'a>(constraints: impl Iterator<Item = &'a Constraint> + Clone, np: usize) -> Option<Bounds> {
    let mut b: Bounds = vec![(None, None); np];
    for _ in 0..3 {
        for c in constraints.clone() {
            // coeffs · p + constant >= 0, and <= 0 too for an equality.
            tighten(&mut b, &c.coeffs, c.constant as i128);
            if c.equality {
                let neg: Vec<i64> = c.coeffs.iter().map(|a| -a).collect();
                tighten(&mut b, &neg, -(c.constant as i128));
            }
        }
        if b.iter().any(|&(lo, hi)| matches!((lo, hi), (Some(l), Some(h)) if l > h)) {
            return None;
        }
    }
    Some(b)
}

/// From `coeffs · p + constant >= 0`: `a_j·p_j >= -(constant + max of the rest)`.
fn tighten(b: &mut Bounds, coeffs: &[i64], constant: i128) {
    for j in 0..b.len() {
        let a = coeffs[j] as i128;
        if a == 0 {
            continue;
        }
        let rest = coeffs.iter().enumerate().filter(|&(i, _)| i != j).try_fold(constant, |acc, (i, &c)| {
            let c = c as i128;
            let top = if c > 0 { b[i].1 } else if c < 0 { b[i].0 } else { Some(0) };
            acc.checked_add(c.checked_mul(top?)?)
        });
        let Some(rest) = rest else { continue };
        if a > 0 {
            let lo = (-rest).div_euclid(a) + i128::from((-rest).rem_euclid(a) != 0);
            b[j].0 = Some(b[j].0.map_or(lo, |l| l.max(lo)));
        } else {
            let hi = rest.div_euclid(-a);
            b[j].1 = Some(b[j].1.map_or(hi, |h| h.min(hi)));
        }
    }
}

impl Expr {
    /// The same values over the box: a parameter with one value and a floor term whose
    /// argument stays between two multiples of its denominator become numbers, pinned
    /// parameters are folded into the other floors' constants, and like monomials are
    /// added. `None` when a coefficient would leave 64 bits.
    fn on_box(&self, b: &Bounds) -> Option<Expr> {
        let np = b.len();
        let mut known: Vec<Option<i128>> = b.iter().map(|&(lo, hi)| if lo == hi { lo } else { None }).collect();
        // Floors left, with pinned parameters folded in; equal ones shared.
        let mut floors: Vec<Floor> = Vec::new();
        let mut symbol: Vec<usize> = (0..np).collect();
        for f in &self.floors {
            let (lo, hi) = linear_range(&f.coeffs, f.constant as i128, b);
            let den = f.den as i128;
            match (lo, hi) {
                (Some(lo), Some(hi)) if lo.div_euclid(den) == hi.div_euclid(den) => {
                    known.push(Some(lo.div_euclid(den)));
                    symbol.push(usize::MAX);
                }
                _ => {
                    let mut constant = f.constant as i128;
                    let mut coeffs = f.coeffs.clone();
                    for (s, a) in coeffs.iter_mut().enumerate() {
                        if let Some(v) = known[s] {
                            constant = constant.checked_add((*a as i128).checked_mul(v)?)?;
                            *a = 0;
                        }
                    }
                    let g = Floor { coeffs, constant: i64::try_from(constant).ok()?, den: f.den };
                    let at = floors.iter().position(|h| *h == g).unwrap_or_else(|| {
                        floors.push(g);
                        floors.len() - 1
                    });
                    known.push(None);
                    symbol.push(np + at);
                }
            }
        }
        let mut sum: BTreeMap<Vec<(usize, u32)>, Rat> = BTreeMap::new();
        for m in &self.terms {
            let mut coeff = Rat::new(m.num as i128, m.den as i128);
            let mut powers: BTreeMap<usize, u32> = BTreeMap::new();
            for &(s, k) in &m.powers {
                match known[s] {
                    Some(v) => coeff = coeff.checked_mul(Rat::int(v.checked_pow(k)?))?,
                    None => *powers.entry(symbol[s]).or_insert(0) += k,
                }
            }
            let e = sum.entry(powers.into_iter().collect()).or_insert(Rat::zero());
            *e = e.checked_add(coeff)?;
        }
        Some(Expr { floors, terms: monomials(sum)? }.without_unused_floors(np))
    }

    /// Floors no monomial uses are dropped and the others renumbered.
    fn without_unused_floors(self, np: usize) -> Expr {
        let used: Vec<bool> = (0..self.floors.len()).map(|i| self.terms.iter().any(|m| m.powers.iter().any(|&(s, _)| s == np + i))).collect();
        let mut new_index = vec![usize::MAX; self.floors.len()];
        let mut floors = Vec::new();
        for (i, f) in self.floors.into_iter().enumerate() {
            if used[i] {
                new_index[i] = np + floors.len();
                floors.push(f);
            }
        }
        let terms = self
            .terms
            .into_iter()
            .map(|m| Monomial { powers: m.powers.into_iter().map(|(s, k)| (if s < np { s } else { new_index[s - np] }, k)).collect(), ..m })
            .collect();
        Expr { floors, terms }
    }
}

/// The least and greatest value of `coeffs · p + constant` over the box.
fn linear_range(coeffs: &[i64], constant: i128, b: &Bounds) -> (Option<i128>, Option<i128>) {
    let mut lo = Some(constant);
    let mut hi = Some(constant);
    for (s, &a) in coeffs.iter().enumerate() {
        let a = a as i128;
        if a == 0 {
            continue;
        }
        let (at_lo, at_hi) = if a > 0 { (b[s].0, b[s].1) } else { (b[s].1, b[s].0) };
        lo = lo.zip(at_lo).and_then(|(l, v)| l.checked_add(a.checked_mul(v)?));
        hi = hi.zip(at_hi).and_then(|(h, v)| h.checked_add(a.checked_mul(v)?));
    }
    (lo, hi)
}
