//! # kansoku-ehrhart — parametric counting of integer points
//!
//! Seed 004 counts its sets by "parametric discrete volume": the number of integer points
//! of a parametric polytope as a function of the parameters — an Ehrhart quasi-polynomial
//! per chamber. isl has no counter (barvinok has, but is not packaged in Debian), and
//! PolyLib's `Polyhedron_Enumerate` (Debian `libpolylib64-dev`, GPL-3) aborts the process
//! with "arithmetic overflow" on the seed's own lifted sets in its 64-bit build (measured;
//! docs/rooms/seed004-cache.md). So we count ourselves, by **summation over chambers**:
//!
//! * unit equalities are substituted away (a bijection of integer points);
//! * one variable x at a time: its lower bounds `L_i / a_i <= x` and upper bounds
//!   `x <= U_j / b_j` split the remaining space into chambers where bound i is the largest
//!   lower and j the smallest upper (ties broken by index, so chambers are disjoint) and
//!   the interval is rationally non-empty; an integer-empty chamber is dropped (isl);
//! * in each chamber the summand f is summed over `ceil(L_i/a_i) ..= floor(U_j/b_j)`:
//!   floor terms of f that contain x are removed by splitting x into residue classes
//!   `x = D·q + r`, and `Σ q^k` over `ceil(..) ..= floor(..)` is Faulhaber's polynomial
//!   evaluated at floor terms — exact also when the interval holds no integer (then the
//!   bounds differ by one and the sum is 0);
//! * after the last variable each chamber is a domain over the parameters with a
//!   polynomial in parameters and floor terms: a [`qpoly::Cell`].
#![deny(missing_docs)]

mod cellbox;
mod numeric;
pub mod qpoly;

use qpoly::{gcd128, Cell, Constraint, Domain, Expr as QExpr, Floor, Monomial, PwQp, Rat};
use std::collections::{BTreeMap, HashMap};

/// A parametric polytope: `{ x : E·(x, p, 1) = 0, I·(x, p, 1) >= 0 }`.
#[derive(Clone, Debug)]
pub struct Polytope {
    /// The counted variables `x` (the first columns of a row).
    pub n_vars: usize,
    /// The parameters `p` (the columns after the variables; the constant is last).
    pub n_params: usize,
    /// Rows `E` of `E·(x, p, 1) = 0`, each `n_vars + n_params + 1` long.
    pub equalities: Vec<Vec<i64>>,
    /// Rows `I` of `I·(x, p, 1) >= 0`, each `n_vars + n_params + 1` long.
    pub inequalities: Vec<Vec<i64>>,
}

/// Where a count found its deadline passed ([`EhrhartError::OutOfTime`]): a caller that
/// must tell a budget held *inside* a long count (one sum over many residue classes ran
/// 90 s past a 10 s budget before it was checked per class) from one found spent between
/// counts reads it here, in work units rather than seconds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum CountStop {
    /// Inside one sum over residue classes, before class `class` of `classes` (classes
    /// `0..class` summed; none begun after the deadline).
    ResidueClass {
        /// The class that was not begun (0-based).
        class: u64,
        /// The sum's residue classes.
        classes: u64,
    },
    /// Before splitting one more chamber (`chambers` split so far).
    Chamber {
        /// Chambers split before the deadline was seen passed.
        chambers: usize,
    },
    /// Enumerating points one by one, after `steps` steps.
    Enumeration {
        /// Enumeration steps made (checked every 65,536).
        steps: u64,
    },
    /// Inside isl's point scanner, aborted by its watchdog.
    IslScan,
}

impl std::fmt::Display for CountStop {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CountStop::ResidueClass { class, classes } => write!(f, "inside a sum, before residue class {} of {classes}", class + 1),
            CountStop::Chamber { chambers } => write!(f, "before a chamber, {chambers} split"),
            CountStop::Enumeration { steps } => write!(f, "enumerating, after {steps} steps"),
            CountStop::IslScan => write!(f, "inside isl's point scanner"),
        }
    }
}

/// Why a count was not made.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum EhrhartError {
    /// A constraint row is not `n_vars + n_params + 1` long.
    #[error("constraint row of length {got}, expected {expected}")]
    Shape {
        /// The row's length.
        got: usize,
        /// The length the polytope's dimensions ask for.
        expected: usize,
    },
    /// A counted variable has no lower or no upper bound: the count is infinite.
    #[error("the set is unbounded in a counted variable")]
    Unbounded,
    /// Summation split the space into more chambers than the limit (the limit given).
    #[error("counting grew beyond {0} chambers")]
    TooManyChambers(usize),
    /// The deadline passed before the count was finished; where the counter noticed.
    #[error("counting exceeded its time budget ({0})")]
    OutOfTime(CountStop),
    /// isl refused an operation the counter asked of it (isl's message).
    #[error("isl: {0}")]
    Isl(String),
    /// Counting one parameter point of a table failed (the point and why).
    #[error("a table's point: {0}")]
    Table(String),
}

/// Upper bound on chambers per count before giving up.
pub(crate) const MAX_CHAMBERS: usize = 20_000;

fn gcd(a: i64, b: i64) -> i64 {
    gcd128(a as i128, b as i128) as i64
}

type Row = Vec<i64>;

/// Divides a row by the gcd of its coefficients (constant rounded down: same integer points).
/// `None` when the row is a false constant; `Some(None)` when it is trivially true.
fn normalize(mut r: Row) -> Option<Option<Row>> {
    let w = r.len() - 1;
    let g = r[..w].iter().fold(0, |g, c| gcd(g, *c));
    if g == 0 {
        return if r[w] < 0 { None } else { Some(None) };
    }
    for c in r[..w].iter_mut() {
        *c /= g;
    }
    r[w] = r[w].div_euclid(g);
    Some(Some(r))
}

/// Adds `r` normalized to `rows` unless it is trivially true or already there; `false`
/// when it is a false constant (no integer point).
fn push_normalized(rows: &mut Vec<Row>, r: Row) -> bool {
    match normalize(r) {
        None => return false,
        Some(Some(r)) if !rows.contains(&r) => rows.push(r),
        _ => {}
    }
    true
}

impl Polytope {
    /// The polytope with every parameter the context fixes (`p = v`, a PolyBench file at
    /// its preset sizes) replaced by its value: the counter then meets no floor terms of
    /// parameters and no chambers over them. gemm MEDIUM on a 32 KiB 8-way L1 spent
    /// its whole budget summing polynomials in floor terms such as `floor((16*N + M + 30)/32)`
    /// whose value was one number. The parameter columns stay (zero), so the shape of
    /// the result is unchanged.
    fn with_fixed_params(&self, context: &Domain) -> Polytope {
        let mut out = self.clone();
        for c in context.constraints.iter().filter(|c| c.equality) {
            let nonzero: Vec<usize> = (0..c.coeffs.len()).filter(|&i| c.coeffs[i] != 0).collect();
            let [p] = nonzero[..] else { continue };
            // c·p + constant = 0 with c = ±1 gives p; other coefficients are left to isl.
            if c.coeffs[p].abs() != 1 || p >= self.n_params {
                continue;
            }
            let value = -c.constant * c.coeffs[p];
            let (col, w) = (self.n_vars + p, self.n_vars + self.n_params);
            let rows = out.equalities.iter().chain(&out.inequalities);
            // A constant past i64 keeps the parameter symbolic (exact either way).
            let Some(constants) = rows.map(|r| r[col].checked_mul(value)?.checked_add(r[w])).collect::<Option<Vec<i64>>>() else { continue };
            for (r, k) in out.equalities.iter_mut().chain(out.inequalities.iter_mut()).zip(constants) {
                r[w] = k;
                r[col] = 0;
            }
        }
        out
    }

    /// Substitutes every variable defined by an equality with coefficient ±1; an equality
    /// without one is first brought to one by the Omega test's equality elimination (its
    /// coefficients shrink by a third per step); what remains (conditions on the
    /// parameters, or an elimination that would overflow) becomes two inequalities.
    /// `None`: no integer point.
    fn to_inequalities(&self) -> Option<(Vec<bool>, Vec<Row>)> {
        let w = self.n_vars + self.n_params + 1;
        let mut eqs = self.equalities.clone();
        let mut ineqs = self.inequalities.clone();
        let mut live = vec![true; self.n_vars];
        let mut steps = 0;
        loop {
            if let Some((ei, v)) = eqs.iter().enumerate().find_map(|(ei, r)| (0..self.n_vars).find(|&v| r[v].abs() == 1).map(|v| (ei, v))) {
                let row = eqs.remove(ei);
                let s = row[v];
                for r in eqs.iter_mut().chain(ineqs.iter_mut()) {
                    let f = r[v] * s;
                    if f != 0 {
                        for j in 0..w {
                            r[j] -= f * row[j];
                        }
                    }
                }
                live[v] = false;
                continue;
            }
            // Lifted sets are full of `64·l = 8·(220·i + j) + c − r`: as two inequalities such
            // an equality makes floor terms with large denominators and thousands of residue
            // classes (gemm MEDIUM, 32 KiB 8-way: one piece took 20 s).
            let Some(ei) = eqs.iter().position(|r| r[..self.n_vars].iter().any(|c| *c != 0)) else { break };
            steps += 1;
            if steps > 256 {
                break; // the rest as inequalities
            }
            match omega_step(&mut eqs, ei, self.n_vars, &mut ineqs) {
                Omega::Shrunk => {}
                Omega::NoPoint => return None,
                Omega::Lattice => {
                    // A condition on the parameters modulo the variables' gcd.
                    let e = eqs.remove(ei);
                    ineqs.push(e.iter().map(|x| -x).collect());
                    ineqs.push(e);
                }
                Omega::Overflow => break,
            }
        }
        for e in eqs {
            let g = e[..w - 1].iter().fold(0, |g, c| gcd(g, *c));
            if g == 0 && e[w - 1] != 0 || g != 0 && e[w - 1] % g != 0 {
                return None;
            }
            ineqs.push(e.iter().map(|x| -x).collect());
            ineqs.push(e);
        }
        let mut out = Vec::new();
        for r in ineqs {
            if !push_normalized(&mut out, r) {
                return None;
            }
        }
        Some((live, out))
    }
}

/// `a mod̂ b = a − b·⌊a/b + 1/2⌋`: the residue of `a` nearest zero (Pugh's Omega test).
fn mod_hat(a: i128, b: i128) -> i128 {
    a - b * (2 * a + b).div_euclid(2 * b)
}

/// What one step of the Omega test's equality elimination did.
enum Omega {
    /// The equality's coefficients shrank (or one became ±1).
    Shrunk,
    /// The equality has no integer solution.
    NoPoint,
    /// The variables' coefficients share a factor the parameters' do not: a lattice
    /// condition on the parameters that no substitution removes (the gcd of the
    /// variables' coefficients is invariant under the steps).
    Lattice,
    /// 64 bits are not enough; nothing was changed.
    Overflow,
}

/// One step of the Omega test's equality elimination on `eqs[ei]` (Pugh, 1991), which
/// has no ±1 variable coefficient: with `a_k` its smallest variable coefficient and
/// `m = |a_k| + 1`, the variable `x_k` is replaced everywhere by
/// `−sign(a_k)·m·σ + Σ_{i≠k} sign(a_k)·(a_i mod̂ m)·x_i` (σ takes x_k's column). The map is
/// a bijection of integer points (σ is an integer exactly when the equality holds modulo
/// m), and the equality's coefficients shrink by about a third.
fn omega_step(eqs: &mut [Row], ei: usize, n_vars: usize, ineqs: &mut [Row]) -> Omega {
    let w = eqs[ei].len();
    let g = eqs[ei][..w - 1].iter().fold(0, |g, c| gcd(g, *c));
    if eqs[ei][w - 1] % g != 0 {
        return Omega::NoPoint;
    }
    eqs[ei].iter_mut().for_each(|c| *c /= g);
    let e = eqs[ei].clone();
    if e[..n_vars].iter().fold(0, |g, c| gcd(g, *c)) > 1 {
        return Omega::Lattice;
    }
    let Some(k) = (0..n_vars).filter(|&v| e[v] != 0).min_by_key(|&v| e[v].abs()) else { return Omega::Lattice };
    if e[k].abs() == 1 {
        return Omega::Shrunk; // the unit substitution takes it from here
    }
    let (sign, m) = (e[k].signum() as i128, e[k].abs() as i128 + 1);
    let expr: Vec<i128> = (0..w).map(|i| if i == k { -sign * m } else { sign * mod_hat(e[i] as i128, m) }).collect();
    let substituted = |r: &Row| -> Option<Row> {
        let f = r[k] as i128;
        (0..w).map(|i| {
            let v = if i == k { f.checked_mul(expr[k])? } else { (r[i] as i128).checked_add(f.checked_mul(expr[i])?)? };
            i64::try_from(v).ok()
        }).collect()
    };
    // All rows first, then commit: an overflow leaves the polytope as it was.
    let Some(new) = eqs.iter().chain(ineqs.iter()).map(substituted).collect::<Option<Vec<Row>>>() else { return Omega::Overflow };
    for (r, n) in eqs.iter_mut().chain(ineqs.iter_mut()).zip(new) {
        *r = n;
    }
    Omega::Shrunk
}

// ---------------------------------------------------------------------------------------
// Working expressions: polynomials over symbols. Symbols < w are columns (variables then
// parameters), w.. are interned floor atoms over columns, Q is the residue-class variable.

const Q: usize = usize::MAX;

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct Atom {
    coeffs: Vec<i64>,
    constant: i64,
    den: i64,
}

struct Atoms {
    w: usize,
    list: Vec<Atom>,
    index: HashMap<Atom, usize>,
}

type Mono = Vec<(usize, u32)>;

#[derive(Clone, Debug, Default, PartialEq)]
struct Poly(BTreeMap<Mono, Rat>);

impl Poly {
    fn constant(c: Rat) -> Poly {
        let mut m = BTreeMap::new();
        if !c.is_zero() {
            m.insert(vec![], c);
        }
        Poly(m)
    }
    fn sym(s: usize) -> Poly {
        let mut m = BTreeMap::new();
        m.insert(vec![(s, 1)], Rat::int(1));
        Poly(m)
    }
    fn add_term(&mut self, mono: Mono, c: Rat) {
        if c.is_zero() {
            return;
        }
        match self.0.entry(mono) {
            std::collections::btree_map::Entry::Vacant(v) => {
                v.insert(c);
            }
            std::collections::btree_map::Entry::Occupied(mut o) => {
                let sum = o.get().add(c);
                if sum.is_zero() {
                    o.remove();
                } else {
                    *o.get_mut() = sum;
                }
            }
        }
    }
    fn add_assign(&mut self, o: &Poly) {
        for (m, c) in &o.0 {
            self.add_term(m.clone(), *c);
        }
    }
    fn add(&self, o: &Poly) -> Poly {
        let mut r = self.clone();
        r.add_assign(o);
        r
    }
    fn scale(&self, k: Rat) -> Poly {
        if k.is_zero() {
            return Poly::default();
        }
        Poly(self.0.iter().map(|(m, c)| (m.clone(), c.mul(k))).collect())
    }
    fn mul(&self, o: &Poly) -> Poly {
        let mut r = Poly::default();
        for (m1, c1) in &self.0 {
            for (m2, c2) in &o.0 {
                r.add_term(mono_mul(m1, m2), c1.mul(*c2));
            }
        }
        r
    }
    /// self^0 ..= self^k.
    fn powers(&self, k: usize) -> Vec<Poly> {
        let mut out = vec![Poly::constant(Rat::int(1))];
        for i in 0..k {
            let next = out[i].mul(self);
            out.push(next);
        }
        out
    }
}

/// The product of two monomials, each sorted by symbol (as every `Mono` is): a merge, no
/// map (a count whose polynomials grew spent 17 % of its time in malloc and free).
fn mono_mul(a: &Mono, b: &Mono) -> Mono {
    let mut out = Vec::with_capacity(a.len() + b.len());
    let (mut i, mut j) = (0, 0);
    while i < a.len() && j < b.len() {
        match a[i].0.cmp(&b[j].0) {
            std::cmp::Ordering::Less => {
                out.push(a[i]);
                i += 1;
            }
            std::cmp::Ordering::Greater => {
                out.push(b[j]);
                j += 1;
            }
            std::cmp::Ordering::Equal => {
                out.push((a[i].0, a[i].1 + b[j].1));
                i += 1;
                j += 1;
            }
        }
    }
    out.extend_from_slice(&a[i..]);
    out.extend_from_slice(&b[j..]);
    out
}

impl Atoms {
    /// `floor((row[..w]·cols + row[w]) / den)` as a polynomial, canonical: linear when den
    /// divides every coefficient, otherwise an interned atom plus an integer.
    fn floor(&mut self, row: &[i64], den: i64) -> Poly {
        let w = self.w;
        let (mut coeffs, mut constant, mut den) = (row[..w].to_vec(), row[w], den);
        if den < 0 {
            coeffs.iter_mut().for_each(|c| *c = -*c);
            constant = -constant;
            den = -den;
        }
        let g = coeffs.iter().fold(den, |g, c| gcd(g, *c));
        if g > 1 {
            coeffs.iter_mut().for_each(|c| *c /= g);
            constant = constant.div_euclid(g);
            den /= g;
        }
        // floor(-y/d) = -floor((y + d - 1)/d): one canonical atom per pair, so terms cancel.
        let negate = coeffs.iter().find(|c| **c != 0).is_some_and(|c| *c < 0);
        if negate && den > 1 {
            let mut row: Row = coeffs.iter().map(|c| -c).collect();
            row.push(-constant + den - 1);
            return self.floor(&row, den).scale(Rat::int(-1));
        }
        let shift = constant.div_euclid(den);
        constant -= shift * den;
        let mut p = Poly::constant(Rat::int(shift as i128));
        if den == 1 {
            for (i, c) in coeffs.iter().enumerate() {
                if *c != 0 {
                    p.add_term(vec![(i, 1)], Rat::int(*c as i128));
                }
            }
            p.add_term(vec![], Rat::int(constant as i128));
            return p;
        }
        if coeffs.iter().all(|c| *c == 0) {
            return p; // 0 <= constant < den: floor is 0
        }
        let atom = Atom { coeffs, constant, den };
        let id = match self.index.get(&atom) {
            Some(id) => *id,
            None => {
                self.list.push(atom.clone());
                self.index.insert(atom, self.list.len() - 1);
                self.list.len() - 1
            }
        };
        p.add(&Poly::sym(w + id))
    }

    fn involves(&self, s: usize, x: usize) -> bool {
        s == x || (s >= self.w && s != Q && self.list[s - self.w].coeffs[x] != 0)
    }
}

/// Σ_{q=1}^{n} q^k as a polynomial in n (coefficients of n^0..n^{k+1}); Faulhaber with B1 = +1/2.
fn faulhaber(k: usize) -> Vec<Rat> {
    let binom = |n: usize, r: usize| -> i128 { (0..r).fold(1i128, |acc, i| acc * (n - i) as i128 / (i + 1) as i128) };
    let mut b = vec![Rat::int(1)];
    for m in 1..=k {
        let mut s = Rat::zero();
        for (j, bj) in b.iter().enumerate() {
            s = s.add(bj.mul(Rat::int(binom(m + 1, j))));
        }
        b.push(s.mul(Rat::new(-1, (m + 1) as i128)));
    }
    if k >= 1 {
        b[1] = Rat::new(1, 2);
    }
    let mut coeffs = vec![Rat::zero(); k + 2];
    for (j, bj) in b.iter().enumerate().take(k + 1) {
        coeffs[k + 1 - j] = coeffs[k + 1 - j].add(bj.mul(Rat::new(binom(k + 1, j), (k + 1) as i128)));
    }
    coeffs
}

/// Substitutes `x = D·Q + r` in `f`; atoms containing x lose it (D makes c·D/den integral).
fn substitute_residue(f: &Poly, x: usize, d: i64, r: i64, atoms: &mut Atoms) -> Poly {
    let w = atoms.w;
    let mut out = Poly::default();
    // Replacement of each symbol containing x, and its powers, computed once.
    let mut repl: HashMap<usize, Vec<Poly>> = HashMap::new();
    for (mono, c) in &f.0 {
        let mut plain: Mono = Vec::new();
        let mut term = Poly::constant(*c);
        for &(s, k) in mono {
            if s != x && !atoms.involves(s, x) {
                plain.push((s, k));
                continue;
            }
            if let std::collections::hash_map::Entry::Vacant(slot) = repl.entry(s) {
                let base = if s == x {
                    Poly::sym(Q).scale(Rat::int(d as i128)).add(&Poly::constant(Rat::int(r as i128)))
                } else {
                    let a = atoms.list[s - w].clone();
                    let cx = a.coeffs[x];
                    let mut row = a.coeffs.clone();
                    row.push(a.constant + cx * r);
                    row[x] = 0;
                    let rest = atoms.floor(&row, a.den);
                    Poly::sym(Q).scale(Rat::int((cx * d / a.den) as i128)).add(&rest)
                };
                slot.insert(vec![Poly::constant(Rat::int(1)), base]);
            }
            let pw = repl.get_mut(&s).expect("inserted above");
            while pw.len() <= k as usize {
                let next = pw[pw.len() - 1].mul(&pw[1]);
                pw.push(next);
            }
            term = term.mul(&pw[k as usize]);
        }
        if plain.is_empty() {
            out.add_assign(&term);
        } else {
            out.add_assign(&term.mul(&Poly(std::iter::once((plain, Rat::int(1))).collect())));
        }
    }
    out
}

/// [`EhrhartError::OutOfTime`] at `stop` once `deadline` has passed.
fn out_of_time(deadline: Option<std::time::Instant>, stop: impl FnOnce() -> CountStop) -> Result<(), EhrhartError> {
    match deadline {
        Some(d) if std::time::Instant::now() > d => Err(EhrhartError::OutOfTime(stop())),
        _ => Ok(()),
    }
}

/// Σ_{x = ceil(lo/a)}^{floor(hi/b)} f, where `lo`, `hi` are rows without x. Gives up after
/// `deadline`, checked per residue class: one sum over many classes of a large summand ran
/// 90 s past a 10 s budget (gemm MEDIUM, 8-way, docs/rooms/seed004-cache.md).
fn sum_over(f: &Poly, x: usize, (lo, a): (&Row, i64), (hi, b): (&Row, i64), atoms: &mut Atoms, deadline: Option<std::time::Instant>) -> Result<Poly, EhrhartError> {
    let w = atoms.w;
    let mut d: i64 = 1;
    for mono in f.0.keys() {
        for &(s, _) in mono {
            if s >= w && s != Q && atoms.involves(s, x) {
                let at = &atoms.list[s - w];
                let need = at.den / gcd(at.coeffs[x], at.den);
                d = d / gcd(d, need) * need;
            }
        }
    }
    let mut total = Poly::default();
    for r in 0..d {
        out_of_time(deadline, || CountStop::ResidueClass { class: r as u64, classes: d as u64 })?;
        let g = substitute_residue(f, x, d, r, atoms);
        // q from ceil((lo - a r)/(a d)) to floor((hi - b r)/(b d)).
        let mut neg_lo: Row = lo.iter().map(|v| -v).collect();
        neg_lo[w] += a * r;
        let q0_minus_1 = atoms.floor(&neg_lo, a * d).scale(Rat::int(-1)).add(&Poly::constant(Rat::int(-1)));
        let mut hi_r = hi.clone();
        hi_r[w] -= b * r;
        let q1 = atoms.floor(&hi_r, b * d);
        // Collect g by powers of Q.
        let mut by_power: BTreeMap<u32, Poly> = BTreeMap::new();
        for (mono, c) in &g.0 {
            let k = mono.iter().find(|(s, _)| *s == Q).map(|(_, k)| *k).unwrap_or(0);
            let rest: Mono = mono.iter().filter(|(s, _)| *s != Q).copied().collect();
            by_power.entry(k).or_default().add_term(rest, *c);
        }
        let top = by_power.keys().max().copied().unwrap_or(0) as usize + 1;
        let (p1, p0) = (q1.powers(top), q0_minus_1.powers(top));
        for (k, coeff) in by_power {
            let fh = faulhaber(k as usize);
            let mut s = Poly::default();
            for (i, c) in fh.iter().enumerate() {
                s.add_assign(&p1[i].scale(*c));
                s.add_assign(&p0[i].scale(Rat::new(-c.n, c.d)));
            }
            total.add_assign(&coeff.mul(&s));
        }
    }
    Ok(total)
}

/// Integer emptiness of `rows` (over w columns, params after n_vars) within the context.
fn is_empty(ctx: &kansoku_isl::Ctx, rows: &[Row], n_vars: usize, n_params: usize, context: &Domain) -> Result<bool, EhrhartError> {
    let name = |i: usize| if i < n_vars { format!("x{i}") } else { format!("p{}", i - n_vars) };
    let lin = |r: &[i64], c: i64| {
        let mut s = c.to_string();
        for (i, v) in r.iter().enumerate() {
            if *v != 0 {
                s += &format!(" + {v}*{}", name(i));
            }
        }
        s
    };
    let mut cons: Vec<String> = rows.iter().map(|r| format!("{} >= 0", lin(&r[..r.len() - 1], r[r.len() - 1]))).collect();
    for c in &context.constraints {
        let mut r = vec![0; n_vars];
        r.extend(&c.coeffs);
        cons.push(format!("{} {} 0", lin(&r, c.constant), if c.equality { "=" } else { ">=" }));
    }
    let params: Vec<String> = (0..n_params).map(|i| format!("p{i}")).collect();
    let vars: Vec<String> = (0..n_vars).map(|i| format!("x{i}")).collect();
    let text = format!("[{}] -> {{ [{}] : {} }}", params.join(","), vars.join(","), if cons.is_empty() { "true".into() } else { cons.join(" and ") });
    let s = ctx.set(&text).map_err(|e| EhrhartError::Isl(e.to_string()))?;
    s.set_is_empty().map_err(|e| EhrhartError::Isl(e.to_string()))
}

struct Counter<'a> {
    n_vars: usize,
    n_params: usize,
    context: &'a Domain,
    ctx: kansoku_isl::Ctx,
    atoms: Atoms,
    cells: Vec<(Vec<Row>, Poly)>,
    chambers: usize,
    deadline: Option<std::time::Instant>,
}

impl Counter<'_> {
    fn run(&mut self, rows: Vec<Row>, f: Poly, mut live: Vec<bool>) -> Result<(), EhrhartError> {
        self.chambers += 1;
        if self.chambers > MAX_CHAMBERS {
            return Err(EhrhartError::TooManyChambers(MAX_CHAMBERS));
        }
        out_of_time(self.deadline, || CountStop::Chamber { chambers: self.chambers - 1 })?;
        // Prefer a variable that no floor term of the summand contains (no residue
        // classes: one Faulhaber sum), then the one with the fewest chamber pairs.
        let pick = (0..self.n_vars).filter(|&v| live[v]).min_by_key(|&v| {
            let lo = rows.iter().filter(|r| r[v] > 0).count();
            let hi = rows.iter().filter(|r| r[v] < 0).count();
            let in_floor = f.0.keys().any(|m| m.iter().any(|&(s, _)| s >= self.atoms.w && s != Q && self.atoms.involves(s, v)));
            // Bounds with coefficient ±1 create no floor terms.
            let non_unit = rows.iter().filter(|r| r[v].abs() > 1).count();
            (in_floor, non_unit, lo * hi)
        });
        let Some(x) = pick else {
            self.cells.push((rows, f));
            return Ok(());
        };
        let w = self.n_vars + self.n_params;
        let lowers: Vec<(Row, i64)> = rows.iter().filter(|r| r[x] > 0).map(|r| {
            let mut l: Row = r.iter().map(|v| -v).collect();
            l[x] = 0;
            (l, r[x])
        }).collect();
        let uppers: Vec<(Row, i64)> = rows.iter().filter(|r| r[x] < 0).map(|r| {
            let mut u = r.clone();
            u[x] = 0;
            (u, -r[x])
        }).collect();
        if lowers.is_empty() || uppers.is_empty() {
            return Err(EhrhartError::Unbounded);
        }
        let others: Vec<Row> = rows.iter().filter(|r| r[x] == 0).cloned().collect();
        live[x] = false;
        let comb = |p: &Row, kp: i64, q: &Row, kq: i64, strict: bool| -> Row {
            // kp·p - kq·q >= (strict ? 1 : 0)
            let mut r: Row = (0..=w).map(|j| kp * p[j] - kq * q[j]).collect();
            if strict {
                r[w] -= 1;
            }
            r
        };
        for (i, (li, ai)) in lowers.iter().enumerate() {
            for (j, (uj, bj)) in uppers.iter().enumerate() {
                let mut new_rows = others.clone();
                let mut extra = Vec::new();
                for (k, (lk, ak)) in lowers.iter().enumerate() {
                    if k != i {
                        extra.push(comb(li, *ak, lk, *ai, k < i));
                    }
                }
                for (k, (uk, bk)) in uppers.iter().enumerate() {
                    if k != j {
                        extra.push(comb(uk, *bj, uj, *bk, k < j));
                    }
                }
                extra.push(comb(uj, *ai, li, *bj, false));
                let mut feasible = true;
                for r in extra {
                    feasible &= push_normalized(&mut new_rows, r);
                }
                if !feasible || is_empty(&self.ctx, &new_rows, self.n_vars, self.n_params, self.context)? {
                    continue;
                }
                let g = sum_over(&f, x, (li, *ai), (uj, *bj), &mut self.atoms, self.deadline)?;
                if g.0.is_empty() {
                    continue;
                }
                self.run(new_rows, g, live.clone())?;
            }
        }
        Ok(())
    }
}

/// Counts the integer points of `poly` as a function of its parameters, for parameters in
/// `context` (constraints over the parameters). The cells are disjoint.
pub fn enumerate(poly: &Polytope, context: &Domain, param_names: &[String]) -> Result<PwQp, EhrhartError> {
    enumerate_until(poly, context, param_names, None)
}

/// [`enumerate`], giving up with [`EhrhartError::OutOfTime`] after `deadline`.
pub fn enumerate_until(poly: &Polytope, context: &Domain, param_names: &[String], deadline: Option<std::time::Instant>) -> Result<PwQp, EhrhartError> {
    enumerate_with(poly, context, param_names, deadline, false)
}

/// [`enumerate_until`], also cutting into slices every variable that takes few values
/// with the parameters in `context`'s box (not only those pinned beside a parameter): the
/// second try for a piece whose summation does not finish soon. Exact as the other; its
/// slices' cells add up, so the result has more cells where the whole would have summed
/// (2mm 4-way at extents 16, every piece cut: 125 KB → 300 KB), hence not the first try.
pub fn enumerate_in_box_slices_until(poly: &Polytope, context: &Domain, param_names: &[String], deadline: Option<std::time::Instant>) -> Result<PwQp, EhrhartError> {
    enumerate_with(poly, context, param_names, deadline, true)
}

fn enumerate_with(poly: &Polytope, context: &Domain, param_names: &[String], deadline: Option<std::time::Instant>, box_slices: bool) -> Result<PwQp, EhrhartError> {
    let w = poly.n_vars + poly.n_params + 1;
    for r in poly.equalities.iter().chain(&poly.inequalities) {
        if r.len() != w {
            return Err(EhrhartError::Shape { got: r.len(), expected: w });
        }
    }
    let mut out = PwQp { params: param_names.to_vec(), context: context.clone(), cells: Vec::new() };
    let poly = &poly.with_fixed_params(context);
    let Some((live, rows)) = poly.to_inequalities() else {
        return Ok(out);
    };
    if rows.iter().all(|r| r[poly.n_vars..poly.n_vars + poly.n_params].iter().all(|c| *c == 0)) {
        let vars: Vec<usize> = (0..poly.n_vars).filter(|&v| live[v]).collect();
        let n = match numeric::count(&rows, &vars, deadline)? {
            Some(n) => Some(n),
            None => numeric::count_by_isl(&rows, &vars, deadline)?,
        };
        if let Some(Ok(n)) = n.map(i64::try_from) {
            if n > 0 {
                let value = QExpr { floors: vec![], terms: vec![Monomial { num: n, den: 1, powers: vec![] }] };
                out.cells.push(Cell { domain: Domain::default(), value });
            }
            return Ok(out);
        }
    }
    let mut c = Counter {
        n_vars: poly.n_vars,
        n_params: poly.n_params,
        context,
        ctx: kansoku_isl::Ctx::new(),
        atoms: Atoms { w: w - 1, list: Vec::new(), index: HashMap::new() },
        cells: Vec::new(),
        chambers: 0,
        deadline,
    };
    if is_empty(&c.ctx, &rows, poly.n_vars, poly.n_params, context)? {
        return Ok(out);
    }
    // The slices' cells overlap in the parameters: a PwQp adds the cells that hold.
    let bounds: Vec<Row> = if box_slices { context_rows(context, poly.n_vars) } else { Vec::new() };
    for (rows, live) in slices(rows, live, poly.n_vars, poly.n_params, &bounds) {
        c.run(rows, Poly::constant(Rat::int(1)), live)?;
    }
    for (rows, f) in std::mem::take(&mut c.cells) {
        out.cells.push(Cell { domain: param_domain(&rows, poly.n_vars), value: to_qexpr(&f, &c.atoms, poly.n_vars, poly.n_params)? });
    }
    Ok(out)
}

/// Most parameter points [`tabulate`] counts one by one.
pub(crate) const MAX_TABLE_POINTS: u64 = 1024;

/// The parameter points `context` allows as a box (each parameter's range from the
/// constraints), when every parameter is bounded and the box holds more than one point
/// (at one point a table would count the same again) and at most `MAX_TABLE_POINTS`:
/// the points [`tabulate`] would count (at most 1,024).
pub fn table_box(context: &Domain, n_params: usize) -> Option<Vec<(i64, i64)>> {
    let ranges = param_box(context, n_params)?;
    let points = ranges.iter().try_fold(1u64, |n, (lo, hi)| n.checked_mul(u64::try_from(hi - lo + 1).ok()?))?;
    (1 < points && points <= MAX_TABLE_POINTS).then_some(ranges)
}

/// Each parameter's range `(lo, hi)` as `context`'s constraints bound it (the box around
/// the points it allows), when every parameter is bounded both ways and the box is not empty.
pub fn param_box(context: &Domain, n_params: usize) -> Option<Vec<(i64, i64)>> {
    let b = cellbox::bounds(context.constraints.iter(), n_params)?;
    b.into_iter().map(|(lo, hi)| Some((i64::try_from(lo?).ok()?, i64::try_from(hi?).ok()?)).filter(|(lo, hi)| lo <= hi)).collect()
}

/// The count of `poly` point by point over the parameter points of `context`: one cell per
/// point (an equality per parameter, the number of integer points as its value), so exact
/// wherever the context holds. A table, not a formula: for a polytope whose summation does
/// not finish — correlation 8-way's P29 (extents 16) had one lifted piece of 11 variables,
/// two parity equalities and coefficients 16 and 32 still counting after two minutes —
/// while its parameters have few values. `None` when the context is not such a box.
pub fn tabulate(poly: &Polytope, context: &Domain, param_names: &[String], deadline: Option<std::time::Instant>) -> Result<Option<PwQp>, EhrhartError> {
    let np = poly.n_params;
    let Some(ranges) = table_box(context, np) else { return Ok(None) };
    let mut out = PwQp { params: param_names.to_vec(), context: context.clone(), cells: Vec::new() };
    let mut p: Vec<i64> = ranges.iter().map(|r| r.0).collect();
    'points: loop {
        if context.contains(&p) {
            let at_point = Domain { constraints: (0..np).map(|s| Constraint::pin(np, s, p[s])).collect() };
            let n = enumerate_until(poly, &at_point, param_names, deadline)?.eval(&p).map_err(|e| EhrhartError::Table(e.to_string()))?;
            if n != 0 {
                out.cells.push(Cell { domain: at_point, value: QExpr { floors: vec![], terms: vec![Monomial { num: n, den: 1, powers: vec![] }] } });
            }
        }
        // Next point (odometer over the box).
        for s in 0..np {
            if p[s] < ranges[s].1 {
                p[s] += 1;
                continue 'points;
            }
            p[s] = ranges[s].0;
        }
        return Ok(Some(out));
    }
}

/// Widest variable range enumerated by [`slices`], and most slices of one polytope.
const MAX_SLICE_WIDTH: i64 = 16;
const MAX_SLICES: usize = 64;

/// Splits the polytope on variables pinned to a few values beside the others that meet a
/// non-unit coefficient in some row: summed, such a variable makes floor terms of floor
/// terms and many residue classes; each slice substitutes it away. Pinned means a lower
/// and an upper bound with unit coefficients whose sum is a constant (`x = -L + j`, `j` in
/// `0..=width`), or a few values in all, the parameters within `bounds` (the context's
/// rows: with every size at most an extent, a lifted division such as `64·x9 ∈ [x3 − 8·x1
/// − 51, x3 − 8·x1 + 12]` can take two values). A covariance piece (4-way, extents 16)
/// with `1 ≤ x1 ≤ 7`, `x3 ∈ {M−4, M−3}` and `32·x8 ≥ 16·x1 + 17·x3 − 22` took 17 s to count
/// whole.
fn slices(rows: Vec<Row>, live: Vec<bool>, n_vars: usize, n_params: usize, bounds: &[Row]) -> Vec<(Vec<Row>, Vec<bool>)> {
    let mut done = Vec::new();
    let mut todo = vec![(rows, live)];
    while let Some((rows, live)) = todo.pop() {
        match narrow_variable(&rows, &live, n_vars, n_params, bounds) {
            Some((v, lower, width)) if done.len() + todo.len() + (width + 1) as usize <= MAX_SLICES => {
                let Some(cut) = (0..=width).map(|j| substitute_shift(&rows, v, &lower, j)).collect::<Option<Vec<_>>>() else {
                    done.push((rows, live)); // a coefficient past i64: counted whole
                    continue;
                };
                let mut live = live;
                live[v] = false;
                todo.extend(cut.into_iter().flatten().map(|slice| (slice, live.clone())));
            }
            _ => done.push((rows, live)),
        }
    }
    done
}

/// The narrowest live variable worth slicing: `(v, lower row, width)`.
fn narrow_variable(rows: &[Row], live: &[bool], n_vars: usize, n_params: usize, bounds: &[Row]) -> Option<(usize, Row, i64)> {
    let w = n_vars + n_params;
    let mut best: Option<(usize, Row, i64)> = None;
    // The piece within the parameters' box, for the variables' constant ranges.
    let boxed: Vec<Row> = if bounds.is_empty() { Vec::new() } else { rows.iter().chain(bounds).cloned().collect() };
    for v in (0..n_vars).filter(|&v| live[v]) {
        let meets_non_unit = rows.iter().any(|r| r[v] != 0 && (0..n_vars).any(|u| live[u] && r[u].abs() > 1));
        if !meets_non_unit {
            continue;
        }
        for lo in rows.iter().filter(|r| r[v] == 1) {
            for hi in rows.iter().filter(|r| r[v] == -1) {
                if (0..w).all(|j| lo[j] + hi[j] == 0) {
                    let width = lo[w] + hi[w];
                    if (0..=MAX_SLICE_WIDTH).contains(&width) && best.as_ref().map_or(true, |b| width < b.2) {
                        best = Some((v, lo.clone(), width));
                    }
                }
            }
        }
        if best.as_ref().is_some_and(|b| b.0 == v) || bounds.is_empty() {
            continue;
        }
        let Some((lo, hi)) = numeric::constant_range(&boxed, v, w) else { continue };
        let (Ok(lo), Ok(width)) = (i64::try_from(lo), i64::try_from(hi - lo)) else { continue };
        if width <= MAX_SLICE_WIDTH && best.as_ref().map_or(true, |b| width < b.2) {
            // `x_v − lo >= 0`: the slices are `x_v = lo + j`.
            let mut lower = vec![0; w + 1];
            (lower[v], lower[w]) = (1, -lo);
            best = Some((v, lower, width));
        }
    }
    best
}

/// `rows` with `x_v = -L + j`, where `lower` is `x_v + L >= 0`: `Some(None)` when a row
/// fails (an empty slice), `None` on overflow.
fn substitute_shift(rows: &[Row], v: usize, lower: &Row, j: i64) -> Option<Option<Vec<Row>>> {
    let w = lower.len() - 1;
    let mut out = Vec::new();
    for r in rows {
        let a = r[v];
        let mut s = r.clone();
        if a != 0 {
            // a·x_v + R >= 0 becomes R − a·L + a·j >= 0.
            for k in 0..=w {
                s[k] = s[k].checked_sub(a.checked_mul(lower[k])?)?;
            }
            s[w] = s[w].checked_add(a.checked_mul(j)?)?;
        }
        if !push_normalized(&mut out, s) {
            return Some(None);
        }
    }
    Some(Some(out))
}

/// The context's constraints as rows over the variables (none) and the parameters.
fn context_rows(context: &Domain, n_vars: usize) -> Vec<Row> {
    let mut out = Vec::new();
    for c in &context.constraints {
        let row: Row = std::iter::repeat(0).take(n_vars).chain(c.coeffs.iter().copied()).chain([c.constant]).collect();
        if c.equality {
            out.push(row.iter().map(|x| -x).collect());
        }
        out.push(row);
    }
    out
}

fn param_domain(rows: &[Row], n_vars: usize) -> Domain {
    Domain {
        constraints: rows
            .iter()
            .map(|r| Constraint { equality: false, coeffs: r[n_vars..r.len() - 1].to_vec(), constant: r[r.len() - 1] })
            .collect(),
    }
}

/// Converts a working polynomial over parameters and atoms into the output type.
fn to_qexpr(f: &Poly, atoms: &Atoms, n_vars: usize, n_params: usize) -> Result<QExpr, EhrhartError> {
    let w = atoms.w;
    let mut floors: Vec<Floor> = Vec::new();
    let mut remap: HashMap<usize, usize> = HashMap::new();
    let mut terms = Vec::new();
    for (mono, c) in &f.0 {
        let mut powers = Vec::new();
        for &(s, k) in mono {
            let sym = if s < w {
                if s < n_vars {
                    return Err(EhrhartError::Unbounded);
                }
                s - n_vars
            } else {
                let id = *remap.entry(s).or_insert_with(|| {
                    let a = &atoms.list[s - w];
                    floors.push(Floor { coeffs: a.coeffs[n_vars..].to_vec(), constant: a.constant, den: a.den });
                    floors.len() - 1
                });
                n_params + id
            };
            powers.push((sym, k));
        }
        powers.sort();
        terms.push(Monomial { num: c.n as i64, den: c.d as i64, powers });
    }
    Ok(QExpr { floors, terms })
}

/// Adds counts: the cells of all parts (each part's cells disjoint; parts are summed).
pub fn sum(parts: Vec<PwQp>, params: &[String], context: &Domain) -> PwQp {
    PwQp { params: params.to_vec(), context: context.clone(), cells: parts.into_iter().flat_map(|p| p.cells).collect() }
}

/// Helpers of the counters' tests.
#[cfg(test)]
pub(crate) mod testing {
    /// Rows `x_v >= 0` and `x_v <= max` for the first `vars` columns of rows `width` long
    /// (the constant last).
    pub fn box_rows(vars: usize, width: usize, max: i64) -> Vec<Vec<i64>> {
        let mut rows = Vec::new();
        for v in 0..vars {
            let mut lo = vec![0; width];
            lo[v] = 1;
            rows.push(lo);
            let mut hi = vec![0; width];
            hi[v] = -1;
            hi[width - 1] = max;
            rows.push(hi);
        }
        rows
    }

    /// A small deterministic generator: integers in `-m..=m`.
    pub fn random(seed: u64) -> impl FnMut(i64) -> i64 {
        let mut state = seed;
        move |m| {
            state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            ((state >> 33) % (2 * m as u64 + 1)) as i64 - m
        }
    }
}

#[cfg(test)]
mod tests {
    use super::testing::{box_rows, random};
    use super::*;

    fn ge(coeffs: Vec<i64>, constant: i64) -> Constraint {
        Constraint { equality: false, coeffs, constant }
    }

    /// A size preset's context reads as the preset: `NI = 40`, the bounds it implies
    /// left out, upper bounds as `<=`; a domain from a file with extreme numbers prints.
    #[test]
    fn a_domain_reads_as_written_by_hand() {
        let names = ["NI".to_string(), "NJ".to_string()];
        let eq = |coeffs: Vec<i64>, constant: i64| Constraint { equality: true, coeffs, constant };
        let preset = Domain { constraints: vec![ge(vec![1, 0], -1), ge(vec![0, 1], -1), ge(vec![-1, 0], 40), eq(vec![-1, 0], 40), ge(vec![0, -1], 50)] };
        assert_eq!(preset.show(&names), "NJ >= 1 and NI = 40 and NJ <= 50");
        let general = Domain { constraints: vec![ge(vec![-1, 1], -3), ge(vec![-2, -1], 9)] };
        assert_eq!(general.show(&names), "-NI + NJ >= 3 and 2*NI + NJ <= 9");
        let hostile = Domain { constraints: vec![eq(vec![-1, 0], i64::MIN), ge(vec![i64::MIN, 0], i64::MIN)] };
        assert!(hostile.show(&names).contains("NI ="));
        assert_eq!(Domain::default().show(&names), "true");
    }

    #[test]
    fn faulhaber_sums() {
        for k in 0..6usize {
            let c = faulhaber(k);
            for n in -5i128..8 {
                let v = c.iter().enumerate().fold(Rat::zero(), |acc, (i, ci)| acc.add(ci.mul(Rat::int(n.pow(i as u32)))));
                let expect: i128 = if n >= 0 { (1..=n).map(|q| q.pow(k as u32)).sum() } else { -(n + 1..=0).map(|q| q.pow(k as u32)).sum::<i128>() };
                assert_eq!(v, Rat::int(expect), "k={k} n={n}");
            }
        }
    }

    /// Triangle with a stride: { (i, j, q) : i = 3q, 0 <= j <= i < N }.
    #[test]
    fn triangle_with_stride() {
        let poly = Polytope { n_vars: 3, n_params: 1, equalities: vec![vec![1, 0, -3, 0, 0]], inequalities: vec![vec![0, 1, 0, 0, 0], vec![1, -1, 0, 0, 0], vec![-1, 0, 0, 1, -1]] };
        let names = vec!["N".to_string()];
        let ctx = Domain { constraints: vec![ge(vec![1], -1)] };
        let f = enumerate(&poly, &ctx, &names).unwrap();
        for n in 1..40i64 {
            let expect: i64 = (0..n).filter(|i| i % 3 == 0).map(|i| i + 1).sum();
            assert_eq!(f.eval(&[n]).unwrap(), expect, "N={n}\n{f}");
        }
    }

    /// The polytope on which PolyLib's 64-bit Ehrhart aborted (seed example, P1):
    /// { (a, b) : X-4 <= 4a <= X-1, 1 <= b, 4b <= Y-1, 4a <= 96 + 4b }.
    #[test]
    fn seed_piece_three_parameters() {
        let poly = Polytope {
            n_vars: 2,
            n_params: 3,
            equalities: vec![],
            inequalities: vec![vec![4, 0, -1, 0, 0, 4], vec![-4, 0, 1, 0, 0, -1], vec![-4, 4, 0, 0, 0, 96], vec![0, 1, 0, 0, 0, -1], vec![0, -4, 0, 1, 0, -1]],
        };
        let names: Vec<String> = ["X", "Y", "Z"].iter().map(|s| s.to_string()).collect();
        let ctx = Domain { constraints: (0..3).map(|i| ge((0..3).map(|j| (i == j) as i64).collect(), -1)).collect() };
        let f = enumerate(&poly, &ctx, &names).unwrap();
        for x in 1..120i64 {
            for y in (1..120i64).step_by(7) {
                let a = (x - 1).div_euclid(4);
                let expect = (1..=(y - 1).div_euclid(4)).filter(|b| 4 * a <= 96 + 4 * b).count() as i64;
                assert_eq!(f.eval(&[x, y, 5]).unwrap(), expect, "X={x} Y={y}\n{f}");
            }
        }
    }

    /// Equalities without a unit coefficient (eliminated by the Omega test's steps), in
    /// a parameter and with the parameter fixed (counted by enumeration), against brute
    /// force: `{ (x, y, z) ∈ [0, 6]³ : a·(x, y, z) = b·N + c, one random inequality }`.
    #[test]
    fn equalities_without_unit_coefficients() {
        let mut rnd = random(99);
        let names = vec!["N".to_string()];
        for _ in 0..60 {
            let (a, b, c) = ([rnd(12), rnd(12), rnd(12)], rnd(3), rnd(20));
            let extra = [rnd(5), rnd(5), rnd(5), rnd(3), rnd(15)];
            let mut ineqs = box_rows(3, 5, 6);
            ineqs.push(extra.to_vec());
            let poly = Polytope { n_vars: 3, n_params: 1, equalities: vec![vec![a[0], a[1], a[2], -b, -c]], inequalities: ineqs };
            let brute = |n: i64| {
                (0..343).filter(|i| {
                    let x = [i % 7, i / 7 % 7, i / 49];
                    let dot = |r: &[i64]| r[0] * x[0] + r[1] * x[1] + r[2] * x[2];
                    dot(&a) == b * n + c && dot(&extra) + extra[3] * n + extra[4] >= 0
                }).count() as i64
            };
            let ctx = Domain { constraints: vec![ge(vec![1], 0), ge(vec![-1], 12)] };
            let f = enumerate(&poly, &ctx, &names).unwrap();
            for n in 0..=12 {
                assert_eq!(f.eval(&[n]).unwrap(), brute(n), "N={n} a={a:?} b={b} c={c} extra={extra:?}\n{f}");
                let fixed = Domain { constraints: vec![Constraint { equality: true, coeffs: vec![-1], constant: n }] };
                let g = enumerate(&poly, &fixed, &names).unwrap();
                assert_eq!(g.eval(&[n]).unwrap(), brute(n), "fixed N={n} a={a:?} b={b} c={c} extra={extra:?}\n{g}");
            }
        }
    }

    /// `simplify` keeps the function: a sum of counts whose cells repeat (the same
    /// triangle twice, and a strip) evaluates the same everywhere with fewer cells.
    #[test]
    fn simplify_keeps_the_function_with_fewer_cells() {
        let names = vec!["N".to_string()];
        let ctx = Domain { constraints: vec![ge(vec![1], -1), ge(vec![-1], 60)] };
        let triangle = Polytope { n_vars: 3, n_params: 1, equalities: vec![vec![1, 0, -3, 0, 0]], inequalities: vec![vec![0, 1, 0, 0, 0], vec![1, -1, 0, 0, 0], vec![-1, 0, 0, 1, -1]] };
        let strip = Polytope { n_vars: 1, n_params: 1, equalities: vec![], inequalities: vec![vec![2, 0, 0], vec![-2, 1, 7]] };
        let t = enumerate(&triangle, &ctx, &names).unwrap();
        let parts = vec![t.clone(), enumerate(&strip, &ctx, &names).unwrap(), t];
        let whole = sum(parts, &names, &ctx);
        let mut small = whole.clone();
        small.simplify();
        assert!(small.cells.len() < whole.cells.len(), "{} cells, was {}", small.cells.len(), whole.cells.len());
        for n in 1..=60 {
            assert_eq!(small.eval(&[n]).unwrap(), whole.eval(&[n]).unwrap(), "N={n}\n{small}");
        }
    }

    /// `simplify` substitutes what a cell's box of parameter values fixes, exactly:
    /// `{ (x, y, z) : 0 <= 3x <= N + M, 0 <= 2y <= x + M, 0 <= 5z <= y + 2M }` with N in
    /// 1..=40 and M in 1..=3 (three values: split into cells of one value each) or 2..=2
    /// (a number), against the function before simplification at every point.
    #[test]
    fn simplify_substitutes_what_the_box_fixes() {
        let names = vec!["N".to_string(), "M".to_string()];
        let poly = Polytope {
            n_vars: 3,
            n_params: 2,
            equalities: vec![],
            inequalities: vec![vec![3, 0, 0, 0, 0, 0], vec![-3, 0, 0, 1, 1, 0], vec![0, 2, 0, 0, 0, 0], vec![1, -2, 0, 0, 1, 0], vec![0, 0, 5, 0, 0, 0], vec![0, 1, -5, 0, 2, 0]],
        };
        let monomials = |f: &PwQp| f.cells.iter().map(|c| c.value.terms.len()).sum::<usize>();
        for m_max in [3, 2] {
            // 2 <= M <= 2: a box the counter does not see as a fixed parameter.
            let m_min = if m_max == 2 { 2 } else { 1 };
            let ctx = Domain { constraints: vec![ge(vec![1, 0], -1), ge(vec![-1, 0], 40), ge(vec![0, 1], -m_min), ge(vec![0, -1], m_max)] };
            let whole = enumerate(&poly, &ctx, &names).unwrap();
            let mut small = whole.clone();
            small.simplify();
            assert!(monomials(&small) < monomials(&whole), "{} monomials, was {}\n{small}", monomials(&small), monomials(&whole));
            for n in 1..=40 {
                for m in 1..=m_max {
                    if ctx.contains(&[n, m]) {
                        assert_eq!(small.eval(&[n, m]).unwrap(), whole.eval(&[n, m]).unwrap(), "N={n} M={m}\n{small}");
                    }
                }
            }
            if m_max == 2 {
                let uses_m = small.cells.iter().any(|c| c.value.terms.iter().any(|t| t.powers.iter().any(|&(s, _)| s == 1)) || c.value.floors.iter().any(|f| f.coeffs[1] != 0));
                assert!(!uses_m, "M = 2 is a number:\n{small}");
            }
        }
    }

    /// A deadline already past stops both counters: the summation over chambers (a
    /// parameter left) and the partial enumeration (every parameter fixed; 10^8 points,
    /// more than one check interval of outer steps).
    #[test]
    fn both_counters_keep_to_the_deadline() {
        let names = vec!["N".to_string()];
        let past = Some(std::time::Instant::now() - std::time::Duration::from_secs(1));
        // { (i, j, k) : 0 <= i, j, k < N }
        let cube = Polytope { n_vars: 3, n_params: 1, equalities: vec![], inequalities: vec![vec![1, 0, 0, 0, 0], vec![0, 1, 0, 0, 0], vec![0, 0, 1, 0, 0], vec![-1, 0, 0, 1, -1], vec![0, -1, 0, 1, -1], vec![0, 0, -1, 1, -1]] };
        let free = Domain { constraints: vec![ge(vec![1], -1)] };
        assert!(matches!(enumerate_until(&cube, &free, &names, past), Err(EhrhartError::OutOfTime(CountStop::Chamber { chambers: 0 }))));
        let fixed = Domain { constraints: vec![Constraint { equality: true, coeffs: vec![-1], constant: 464 }] };
        assert!(matches!(enumerate_until(&cube, &fixed, &names, past), Err(EhrhartError::OutOfTime(CountStop::Enumeration { steps: 65_536 }))));
        assert_eq!(enumerate(&cube, &fixed, &names).unwrap().eval(&[464]).unwrap(), 464i64.pow(3));
    }

    /// A piece of covariance's conflict set (4-way, extents 16) that took 17 s whole:
    /// `1 <= a <= 7`, `a + 5 <= b`, `16M − 80 + a <= 16b <= 16M − 49 + a`,
    /// `16a + 17b − 22 <= 32c <= 16a + 16b` (six more variables fixed by equalities). It
    /// is cut into slices (`a`, then `b` in {M − 4, M − 3}) and counted exactly.
    #[test]
    fn pinned_variables_are_counted_in_slices() {
        let mut eqs = vec![vec![0; 12]; 6];
        for (r, (v, k)) in eqs.iter_mut().zip([(7, -1), (6, 0), (5, 0), (4, -3), (2, 0), (0, -2)]) {
            r[v] = 1;
            r[11] = k;
        }
        let ineqs = vec![
            vec![0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, -1],
            vec![0, -1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 7],
            vec![0, -1, 0, 1, 0, 0, 0, 0, 0, 0, 0, -5],
            vec![0, -1, 0, 16, 0, 0, 0, 0, 0, 0, -16, 80],
            vec![0, 1, 0, -16, 0, 0, 0, 0, 0, 0, 16, -49],
            vec![0, 1, 0, 1, 0, 0, 0, 0, -2, 0, 0, 0],
            vec![0, -16, 0, -17, 0, 0, 0, 0, 32, 0, 0, 22],
        ];
        let poly = Polytope { n_vars: 9, n_params: 2, equalities: eqs, inequalities: ineqs };
        let (live, rows) = poly.to_inequalities().unwrap();
        assert!(slices(rows, live, 9, 2, &[]).len() > 1, "the piece is not cut");
        let names = vec!["N".to_string(), "M".to_string()];
        let ctx = Domain { constraints: vec![ge(vec![1, 0], -1), ge(vec![-1, 0], 16), ge(vec![0, 1], -1), ge(vec![0, -1], 16)] };
        let f = enumerate(&poly, &ctx, &names).unwrap();
        for m in 1..=16i64 {
            let mut expect = 0;
            for a in 1..=7i64 {
                for b in a + 5..=m {
                    if 16 * m - 80 + a <= 16 * b && 16 * b <= 16 * m - 49 + a {
                        expect += (-40..=40).filter(|c| 16 * a + 17 * b - 22 <= 32 * c && 2 * c <= a + b).count() as i64;
                    }
                }
            }
            assert_eq!(f.eval(&[9, m]).unwrap(), expect, "M={m}\n{f}");
        }
    }

    /// A lifted piece of 2mm's second-level P2 (non-inclusive L2 below a 2-way L1, every
    /// size at most 8): five equalities, then five variables, one of them the lifted
    /// division `64·x9 ∈ [x3 − 8·x1 − 51, x3 − 8·x1 + 12]`. Summed whole it did not finish
    /// in a minute (release); with the sizes in their box, x9 takes two values and x5 and x8
    /// four each, and the slices count it at once. Against the count at each point (partial
    /// enumeration, another path), on a grid of the four sizes.
    #[test]
    fn variables_with_few_values_in_the_box_are_counted_in_slices() {
        let unit = |v: usize, k: i64| {
            let mut r = vec![0; 15];
            (r[v], r[14]) = (1, k);
            r
        };
        let eqs = vec![unit(7, -1), unit(6, 0), unit(4, -1), unit(2, 0), unit(0, 0)];
        let ineqs = vec![
            vec![0, 0, 0, 0, 0, 0, 0, 0, 0, 0, -1, 0, 0, 0, 8],
            vec![0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, -1, 0, 0, 8],
            vec![0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, -1],
            vec![0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, -1, 8],
            vec![0, -1, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, -1],
            vec![0, 0, 0, -1, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, -1],
            vec![0, 0, 0, -1, 0, 2, 0, 0, 0, 0, 0, 0, 0, 0, -3],
            vec![0, 0, 0, 1, 0, -3, 0, 0, 0, 0, 0, 0, 0, 0, 8],
            vec![0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0],
            vec![0, -1, 0, 0, 0, 1, 0, 0, 2, 0, 0, 0, 0, 0, -3],
            vec![0, -1, 0, 0, 0, -1, 0, 0, 2, 0, 0, 0, 1, 0, -1],
            vec![0, 1, 0, -1, 0, 0, 0, 0, -2, 0, 0, 0, 0, 0, 4],
            vec![0, 1, 0, 0, 0, 0, 0, 0, -2, 0, 0, 0, 0, 0, 0],
            vec![0, -2, 0, 0, 0, 0, 0, 0, 4, 0, 0, 0, -1, 0, 8],
            vec![0, 8, 0, -1, 0, 0, 0, 0, 0, 64, 0, 0, 0, 0, 51],
            vec![0, -8, 0, 1, 0, 0, 0, 0, 0, -64, 0, 0, 0, 0, 12],
            vec![0, 0, 0, 1, 0, 60, 0, 0, -16, -64, 0, 0, 0, 0, -228],
        ];
        let poly = Polytope { n_vars: 10, n_params: 4, equalities: eqs, inequalities: ineqs };
        let names: Vec<String> = ["NI", "NJ", "NK", "NL"].map(String::from).to_vec();
        let sizes = (0..4).flat_map(|p| [ge((0..4).map(|q| i64::from(p == q)).collect(), -1), ge((0..4).map(|q| -i64::from(p == q)).collect(), 8)]);
        let ctx = Domain { constraints: sizes.collect() };
        let (live, rows) = poly.with_fixed_params(&ctx).to_inequalities().unwrap();
        assert!(slices(rows.clone(), live.clone(), 10, 4, &context_rows(&ctx, 10)).len() > 1, "the piece is not cut");
        assert_eq!(slices(rows, live, 10, 4, &[]).len(), 1, "without the box, no variable is pinned");
        let t = std::time::Instant::now();
        let f = enumerate_in_box_slices_until(&poly, &ctx, &names, Some(t + std::time::Duration::from_secs(60))).unwrap();
        let mut nonzero = 0;
        for p in (1..=8).flat_map(|a| (1..=8).flat_map(move |b| [1, 4, 8].into_iter().flat_map(move |c| [1, 8].map(|d| [a, b, c, d])))) {
            let at = Domain { constraints: (0..4).map(|i| Constraint::pin(4, i, p[i])).collect() };
            let expect = enumerate(&poly, &at, &names).unwrap().eval(&p).unwrap();
            assert_eq!(f.eval(&p).unwrap(), expect, "at {p:?}");
            nonzero += usize::from(expect > 0);
        }
        assert!(nonzero > 10, "only {nonzero} points with a count");
    }

    /// The last piece correlation 8-way (extents 16) counted as a table: P29's, of the
    /// lexmin chain's construction, 11 variables, 7 equalities (one a parity) and 13
    /// inequalities over N and M, not summed in 8 s of slices. Its variables' ranges in
    /// the box were not found: Fourier–Motzkin in index order passed the row limit for
    /// every one. Eliminated fewest pairs first, every variable has at most 14 values, and
    /// the slices count it at once.
    #[test]
    fn a_piece_whose_ranges_need_a_good_elimination_order_is_cut() {
        let unit = |v: usize, k: i64| {
            let mut r = vec![0; 14];
            (r[v], r[13]) = (1, k);
            r
        };
        let eqs = vec![
            vec![0, 0, 0, 0, 0, -1, 0, 0, 0, 0, 2, 0, -1, -1],
            unit(7, -1),
            unit(6, 0),
            unit(4, -1),
            vec![0, -1, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, -1],
            unit(2, -1),
            unit(0, -3),
        ];
        let ineqs = vec![
            vec![0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, -1, 16],
            vec![0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, -6],
            vec![0, 0, 0, 0, 0, -1, 0, 0, 0, 0, 0, 0, 0, 7],
            vec![0, -1, 0, 0, 0, 16, 0, 0, 8, 0, 0, -16, 0, 144],
            vec![0, 1, 0, 0, 0, 0, 0, 0, -8, 0, 0, 0, 0, -1],
            vec![0, 1, 0, 0, 0, -16, 0, 0, -8, 0, 0, 16, 0, -113],
            vec![0, 0, 0, 0, 0, -1, 0, 0, 0, 2, 0, 0, 0, -1],
            vec![0, 0, 0, 0, 0, 1, 0, 0, 8, -2, 0, 0, 0, 7],
            vec![0, 1, 0, 0, 0, 1, 0, 0, 0, -2, 0, 0, 0, 0],
            vec![0, -1, 0, 0, 0, -2, 0, 0, 0, 3, 0, 0, 0, 3],
            vec![0, -14, 0, 0, 0, -14, 0, 0, 8, 28, 0, 0, -1, 22],
            vec![0, -31, 0, 0, 0, -15, 0, 0, 0, 30, 0, 0, 16, -17],
            vec![0, 0, 0, 0, 0, 15, 0, 0, -8, -30, 0, 0, 16, -24],
        ];
        let poly = Polytope { n_vars: 11, n_params: 2, equalities: eqs, inequalities: ineqs };
        let names: Vec<String> = ["N", "M"].map(String::from).to_vec();
        let sizes = (0..2).flat_map(|p| [ge((0..2).map(|q| i64::from(p == q)).collect(), -1), ge((0..2).map(|q| -i64::from(p == q)).collect(), 16)]);
        let ctx = Domain { constraints: sizes.collect() };
        let (live, rows) = poly.with_fixed_params(&ctx).to_inequalities().unwrap();
        assert!(slices(rows, live, 11, 2, &context_rows(&ctx, 11)).len() > 1, "the piece is not cut");
        let t = std::time::Instant::now();
        let f = enumerate_in_box_slices_until(&poly, &ctx, &names, Some(t + std::time::Duration::from_secs(60))).unwrap();
        let mut nonzero = 0;
        for p in (1..=16).flat_map(|n| (1..=16).map(move |m| [n, m])) {
            let at = Domain { constraints: (0..2).map(|i| Constraint::pin(2, i, p[i])).collect() };
            let expect = enumerate(&poly, &at, &names).unwrap().eval(&p).unwrap();
            assert_eq!(f.eval(&p).unwrap(), expect, "at {p:?}");
            nonzero += usize::from(expect > 0);
        }
        assert!(nonzero > 10, "only {nonzero} points with a count");
    }

    /// Random polytopes with a variable pinned to a few values beside the parameter
    /// (`N − w <= x <= N`) and a row of non-unit coefficients, against brute force.
    #[test]
    fn slices_count_what_the_whole_counts() {
        let mut rnd = random(7);
        let names = vec!["N".to_string()];
        let ctx = Domain { constraints: vec![ge(vec![1], 0), ge(vec![-1], 12)] };
        let mut cut = 0;
        for _ in 0..60 {
            let w = rnd(2) + 2;
            let extra = [rnd(5), rnd(5), rnd(5), rnd(3), rnd(15)];
            let mut ineqs = box_rows(3, 5, 6);
            ineqs[0] = vec![1, 0, 0, -1, w];
            ineqs[1] = vec![-1, 0, 0, 1, 0];
            ineqs.push(extra.to_vec());
            let poly = Polytope { n_vars: 3, n_params: 1, equalities: vec![], inequalities: ineqs };
            let (live, rows) = poly.to_inequalities().unwrap();
            cut += (slices(rows, live, 3, 1, &[]).len() > 1) as usize;
            let f = enumerate(&poly, &ctx, &names).unwrap();
            for n in 0..=12i64 {
                let brute = (n - w..=n).map(|x| (0..49).filter(|i| extra[0] * x + extra[1] * (i % 7) + extra[2] * (i / 7) + extra[3] * n + extra[4] >= 0).count() as i64).sum::<i64>();
                assert_eq!(f.eval(&[n]).unwrap(), brute, "N={n} w={w} extra={extra:?}\n{f}");
            }
        }
        assert!(cut > 20, "only {cut} of 60 polytopes were cut into slices");
    }

    /// correlation 8-way's P29 (extents 16): the lifted piece whose summation ran past two
    /// minutes, counted point by point over 1 <= N, M <= 16, against brute force (x9 and x10
    /// are the parities of x1 + x3 and x3 + x5; x0, x2, x4, x6, x7 fixed).
    #[test]
    fn a_piece_counted_point_by_point_equals_brute_force() {
        let e = |v: &[(usize, i64)], k: i64| -> Vec<i64> {
            let mut r = vec![0; 14];
            for &(c, a) in v {
                r[c] = a;
            }
            r[13] = k;
            r
        };
        let equalities = vec![e(&[(3, -1), (5, -1), (10, 2)], -1), e(&[(1, -1), (3, -1), (9, 2)], -1), e(&[(7, 1)], -1), e(&[(6, 1)], 0), e(&[(4, 1)], -1), e(&[(2, 1)], -1), e(&[(0, 1)], -3)];
        let inequalities = vec![
            e(&[(11, -1)], 16),
            e(&[(12, -1)], 16),
            e(&[(1, 1)], 0),
            e(&[(1, -1), (3, 1)], -9),
            e(&[(3, -1), (12, 1)], -1),
            e(&[(5, -1)], 11),
            e(&[(1, -1), (5, 16), (11, -16)], 143),
            e(&[(5, 1), (8, -2)], 0),
            e(&[(1, 1), (8, 32)], -112),
            e(&[(1, 1), (5, -16), (8, 32), (11, 16)], -240),
        ];
        let poly = Polytope { n_vars: 11, n_params: 2, equalities, inequalities };
        let names = vec!["N".to_string(), "M".to_string()];
        let ctx = Domain { constraints: vec![ge(vec![1, 0], -1), ge(vec![-1, 0], 16), ge(vec![0, 1], -1), ge(vec![0, -1], 16)] };
        let table = tabulate(&poly, &ctx, &names, None).unwrap().expect("256 points");
        let mut nonzero = 0;
        for n in 1..=16i64 {
            for m in 1..=16i64 {
                let mut brute = 0;
                for (x1, x3, x5, x8) in (0..=20).flat_map(|a| (-5..=20).flat_map(move |b| (0..=20).flat_map(move |c| (0..=20).map(move |d| (a, b, c, d))))) {
                    let odd = |v: i64| v.rem_euclid(2) == 1;
                    let ok = odd(x1 + x3) && odd(x3 + x5) && x3 - x1 >= 9 && x3 < m && x5 <= 11 && x1 <= 16 * x5 - 16 * n + 143 && 2 * x8 <= x5 && x1 + 32 * x8 >= 112 && x1 - 16 * x5 + 32 * x8 + 16 * n >= 240;
                    brute += ok as i64;
                }
                nonzero += (brute > 0) as usize;
                assert_eq!(table.eval(&[n, m]).unwrap(), brute, "N={n} M={m}");
            }
        }
        assert!(nonzero > 10, "only {nonzero} points have any");
        let unbounded = Domain { constraints: vec![ge(vec![1, 0], -1), ge(vec![0, 1], -1)] };
        assert!(tabulate(&poly, &unbounded, &names, None).unwrap().is_none());
    }

    /// Two parameters with a chamber wall: { i : 0 <= i < N, i < M }.
    #[test]
    fn two_parameters_min() {
        let poly = Polytope { n_vars: 1, n_params: 2, equalities: vec![], inequalities: vec![vec![1, 0, 0, 0], vec![-1, 1, 0, -1], vec![-1, 0, 1, -1]] };
        let names = vec!["N".to_string(), "M".to_string()];
        let ctx = Domain { constraints: vec![ge(vec![1, 0], -1), ge(vec![0, 1], -1)] };
        let f = enumerate(&poly, &ctx, &names).unwrap();
        for n in 1..15 {
            for m in 1..15 {
                assert_eq!(f.eval(&[n, m]).unwrap(), n.min(m), "{f}");
            }
        }
    }
}

#[cfg(test)]
mod deadline_inside_tests {
    use super::*;

    /// One lifted piece of gemm's B[k][j] conflict set at LARGE (NI, NJ, NK = 1000,
    /// 1100, 1200 fixed, 32 KiB 8-way L1; 13 variables): seconds to count.
    fn gemm_large_piece() -> (Polytope, Domain) {
        let eq = vec![vec![0, 0, 0, -1, 0, 0, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0, 0], vec![0, 0, 0, 0, 0, -1, 0, 0, 0, 0, 0, 8, 0, 0, 0, 0, 0], vec![0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, -2], vec![0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0], vec![0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0], vec![0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, -1], vec![1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0], vec![0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, -1200], vec![0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, -1100], vec![0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, -1000]];
        let ineq = vec![vec![0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, -1], vec![0, -1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 999], vec![0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0], vec![0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, -8], vec![0, 0, 0, -1100, 0, -1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1318888], vec![0, 0, 0, 0, 0, -1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1096], vec![0, 0, 0, 0, 0, -1, 0, 0, 1100, 0, 0, 0, 0, 0, 0, 0, 1088], vec![0, 0, 0, 0, 0, 1, 0, 0, -1100, 0, 0, 0, 0, 0, 0, 0, 4], vec![0, -193600, 0, 82500, 0, 1099, 0, 0, 0, 563200, 0, 0, 0, 0, 0, 0, 624792], vec![0, 193600, 0, -82500, 0, -1099, 0, 0, 0, -563200, 0, 0, 0, 0, 0, 0, -616000], vec![0, -76, 0, 76, 0, 1, 0, 0, 0, 0, 512, 0, 0, 0, 0, 0, 688], vec![0, 76, 0, -76, 0, -1, 0, 0, 0, 0, -512, 0, 0, 0, 0, 0, -536]];
        let point = [1000i64, 1100, 1200].iter().enumerate().map(|(i, v)| Constraint { equality: true, coeffs: (0..3).map(|j| i64::from(i == j)).collect(), constant: -v }).collect();
        (Polytope { n_vars: 13, n_params: 3, equalities: eq, inequalities: ineq }, Domain { constraints: point })
    }

    /// The deadline holds inside one long count, not only between counts: this piece
    /// takes seconds to enumerate (6.3 s here, 14 million steps), and with a deadline
    /// 100 ms after its start the enumeration stops itself part-way. Checked by where it
    /// stopped, not by a clock: a counter that looked at the deadline only between
    /// pieces or chambers would return the whole count.
    #[test]
    fn a_deadline_inside_one_long_count_stops_it_there() {
        let (p, c) = gemm_large_piece();
        let names: Vec<String> = ["NI", "NJ", "NK"].iter().map(|s| s.to_string()).collect();
        let deadline = std::time::Instant::now() + std::time::Duration::from_millis(100);
        let r = enumerate_until(&p, &c, &names, Some(deadline));
        assert!(matches!(r, Err(EhrhartError::OutOfTime(CountStop::Enumeration { .. }))), "{r:?}");
    }
}
