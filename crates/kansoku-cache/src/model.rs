//! The model: per reference, exact formulas for the number of accesses (the seed's first
//! count), compulsory misses (first − second count) and conflict misses (third − fourth
//! count) as piecewise quasi-polynomials in a size variable `n`.
//!
//! # Method (see `docs/rooms/seed004-cache.md`)
//! The parameters of the kernel are tied to one size variable: each parameter is either
//! *varying* (equal to `n`) or *fixed* at a given value. For such a family every count is
//! a Presburger-definable function of `n` (addresses, line and set numbers are affine
//! expressions with floor/mod by constants; "at least A distinct lines of the set between
//! two uses" is a bounded existential), hence, by the Presburger counting theorem, an
//! eventual quasi-polynomial: there are `n0`, a period `q` and a degree `D` such that for
//! every residue `r` the values `f(n0 + r + q·m)` are a polynomial of degree ≤ `D` in `m`.
//! `D` is bounded rigorously by the number of enclosing loops whose trip count grows with
//! `n` (a reference cannot miss more often than it executes).
//!
//! We obtain `f(n)` exactly from the simulator for `n = n_min ..= N`, find the smallest
//! `n0 + q·(D+1)` for which all (D+1)-th differences of step `q` vanish with at least
//! `evidence` independent checks per residue class, and store: a table for
//! `n_min <= n < n0`, and per residue the Newton coefficients (integers) of the
//! polynomial. The formula is therefore *exact on `n_min ..= verified_max`* by
//! construction and checked; beyond `verified_max` it is the unique continuation of the
//! verified quasi-polynomial, which is exact as long as no new piece starts later (tests
//! check it against the simulator far beyond the fitted range). Evaluations beyond
//! `verified_max` are reported as extrapolated.

use crate::config::{CacheConfig, LayoutSpec, ParamValues};
use crate::error::{CacheError, Result};
use crate::kernel::Kernel;
use crate::sim::{Breakdown, Program, RefStats};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt;

/// How the kernel's parameters depend on the size variable `n`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Family {
    /// Parameters that follow `n` (equal to `n` unless `ties` says `a·n + b`).
    pub varying: Vec<String>,
    /// Parameters held at a value.
    pub fixed: BTreeMap<String, i64>,
    /// Optional `(a, b)` per varying parameter: the parameter is `a·n + b` (`a >= 1`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub ties: BTreeMap<String, (i64, i64)>,
}

impl Family {
    /// All parameters varying together (the default for single-size kernels).
    pub fn all_varying(k: &Kernel) -> Family {
        Family { varying: k.params.clone(), fixed: BTreeMap::new(), ties: BTreeMap::new() }
    }

    /// `(a, b)` with parameter `p = a·n + b`.
    pub fn tie(&self, p: &str) -> (i64, i64) {
        self.ties.get(p).copied().unwrap_or((1, 0))
    }

    /// Parses one `--vary` item: `N`, `NJ=n+10`, `NK=2n`, `NK=2*n-1`.
    pub fn parse_vary_item(item: &str) -> Result<(String, (i64, i64))> {
        let bad = || CacheError::Params(format!("'{item}' is not PARAM or PARAM=a*n+b (e.g. NJ=n+10, NK=2n)"));
        let Some((name, e)) = item.split_once('=') else {
            return Ok((item.trim().to_string(), (1, 0)));
        };
        let e: String = e.chars().filter(|c| !c.is_whitespace()).collect();
        let npos = e.find('n').ok_or_else(bad)?;
        let a_text = e[..npos].trim_end_matches('*');
        let a: i64 = if a_text.is_empty() { 1 } else { a_text.parse().map_err(|_| bad())? };
        let rest = &e[npos + 1..];
        let b: i64 = if rest.is_empty() {
            0
        } else if let Some(r) = rest.strip_prefix('+') {
            r.parse().map_err(|_| bad())?
        } else if rest.starts_with('-') {
            rest.parse().map_err(|_| bad())?
        } else {
            return Err(bad());
        };
        if a < 1 {
            return Err(CacheError::Params(format!("'{item}': the factor of n must be at least 1")));
        }
        Ok((name.trim().to_string(), (a, b)))
    }

    /// `X = Y = Z = n` or `NI = n, NJ = n + 10, NK = 2n`.
    pub(crate) fn describe(&self, var: &str) -> String {
        if self.ties.values().all(|&t| t == (1, 0)) {
            return format!("{} = {var}", self.varying.join(" = "));
        }
        self.varying
            .iter()
            .map(|p| {
                let (a, b) = self.tie(p);
                let an = if a == 1 { var.to_string() } else { format!("{a}{var}") };
                match b {
                    0 => format!("{p} = {an}"),
                    b if b > 0 => format!("{p} = {an} + {b}"),
                    b => format!("{p} = {an} - {}", -b),
                }
            })
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// Checks the family against the kernel: every parameter is varying or fixed.
    pub fn check(&self, k: &Kernel) -> Result<()> {
        if self.varying.is_empty() {
            return Err(CacheError::Params("no varying parameter: name at least one with --vary".into()));
        }
        for p in &k.params {
            let v = self.varying.contains(p);
            let f = self.fixed.contains_key(p);
            if v == f {
                return Err(CacheError::Params(if v {
                    format!("parameter '{p}' is both varying and fixed")
                } else {
                    format!("parameter '{p}' is neither varying (--vary) nor fixed (--fix {p}=N)")
                }));
            }
        }
        for (p, (a, _)) in &self.ties {
            if !self.varying.contains(p) {
                return Err(CacheError::Params(format!("'{p}' has a tie to n but is not varying")));
            }
            if *a < 1 {
                return Err(CacheError::Params(format!("the factor of n for '{p}' must be at least 1")));
            }
        }
        for p in self.varying.iter().chain(self.fixed.keys()) {
            if !k.params.contains(p) {
                return Err(CacheError::Params(format!("'{p}' is not a parameter of {} (its parameters: {})", k.file, k.params.join(", "))));
            }
        }
        Ok(())
    }

    /// The parameter values at size `n`: fixed parameters at their value, each varying one at `a·n + b`.
    pub fn params_at(&self, n: i64) -> ParamValues {
        let mut m = self.fixed.clone();
        for v in &self.varying {
            let (a, b) = self.tie(v);
            m.insert(v.clone(), a * n + b);
        }
        m
    }

    /// The size `n` for concrete parameter values, or why they are outside the family.
    pub(crate) fn n_of(&self, values: &ParamValues) -> Result<i64> {
        for (p, v) in &self.fixed {
            match values.get(p) {
                Some(x) if x == v => {}
                Some(x) => {
                    return Err(CacheError::Params(format!(
                        "{p}={x} is outside the range these formulas were derived for: they hold for {p}={v} (derive them again with {p}={x} fixed, e.g. `--fix {p}={x}`)"
                    )))
                }
                None => {}
            }
        }
        let mut n = None;
        for p in &self.varying {
            let Some(&x) = values.get(p) else {
                return Err(CacheError::Params(format!("no value for varying parameter '{p}'")));
            };
            let (a, b) = self.tie(p);
            if (x - b).rem_euclid(a) != 0 {
                return Err(CacheError::Params(format!(
                    "{p}={x} is outside the range these formulas were derived for: they hold for {}",
                    self.describe("n")
                )));
            }
            let this = (x - b).div_euclid(a);
            match n {
                None => n = Some(this),
                Some(m) if m == this => {}
                Some(_) => {
                    let what = if self.ties.is_empty() { format!("{} all equal", self.varying.join(" = ")) } else { self.describe("n") };
                    return Err(CacheError::Params(format!("the formulas were derived for {what}; got {}", fmt_values(values))));
                }
            }
        }
        for p in values.keys() {
            if !self.varying.contains(p) && !self.fixed.contains_key(p) {
                return Err(CacheError::Params(format!("'{p}' is not a parameter of these formulas")));
            }
        }
        Ok(n.unwrap())
    }
}

fn fmt_values(v: &ParamValues) -> String {
    v.iter().map(|(k, x)| format!("{k}={x}")).collect::<Vec<_>>().join(",")
}

/// An exact rational number (for printing polynomials in `n`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Q {
    num: i128,
    den: i128,
}

fn gcd(a: i128, b: i128) -> i128 {
    let (mut a, mut b) = (a.abs(), b.abs());
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

impl Q {
    fn new(num: i128, den: i128) -> Q {
        let g = gcd(num, den).max(1);
        let s = if den < 0 { -1 } else { 1 };
        Q { num: s * num / g, den: s * den / g }
    }
    fn int(v: i128) -> Q {
        Q { num: v, den: 1 }
    }
    fn add(self, o: Q) -> Q {
        Q::new(self.num * o.den + o.num * self.den, self.den * o.den)
    }
    fn mul(self, o: Q) -> Q {
        Q::new(self.num * o.num, self.den * o.den)
    }
    fn is_zero(self) -> bool {
        self.num == 0
    }
}

/// The longest period a formulas file may give (fits use at most a few hundred).
const MAX_PERIOD_READ: i64 = 1 << 20;

/// What makes a [`QuasiPolynomial`] read from a file unfit for evaluation
/// ([`QuasiPolynomial::validate`]); `index` is the piece's place in `pieces`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum FormulaError {
    /// The formula has no piece at all.
    #[error("no pieces")]
    NoPieces,
    /// The first piece starts after `n_min`, leaving sizes without a value.
    #[error("the first piece starts at {from} after n_min {n_min}")]
    FirstPieceLate {
        /// Where the first piece starts.
        from: i64,
        /// The smallest size the formula claims to cover.
        n_min: i64,
    },
    /// A piece's period is below 1 or above what evaluation accepts from a file.
    #[error("pieces[{index}]: period {period} (must be 1 to {MAX_PERIOD_READ})")]
    Period {
        /// The piece.
        index: usize,
        /// Its period.
        period: i64,
    },
    /// A piece does not hold one Newton table per residue class.
    #[error("pieces[{index}]: {tables} Newton tables for period {period}")]
    Tables {
        /// The piece.
        index: usize,
        /// How many tables it holds.
        tables: usize,
        /// Its period (the number of tables it should hold).
        period: i64,
    },
    /// A Newton table is longer than 64 coefficients (degree above 63).
    #[error("pieces[{index}]: a Newton table longer than 64 (degree above 63)")]
    Degree {
        /// The piece.
        index: usize,
    },
    /// A piece does not start after the piece before it.
    #[error("pieces[{index}] starts at {from}, not after the piece before it")]
    Order {
        /// The piece.
        index: usize,
        /// Where it starts.
        from: i64,
    },
}

/// One piece of a quasi-polynomial: for `from <= n <= to` (no `to`: unbounded) with
/// `n = from + r + period·m` (`0 <= r < period`), the value is
/// `Σ_j newton[r][j] · C(m, j)` (Newton forward-difference form, integer coefficients).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Piece {
    /// First size `n` the piece covers (inclusive).
    pub from: i64,
    /// Last size `n` the piece covers (inclusive); `None` for the last, unbounded piece.
    pub to: Option<i64>,
    /// Period `q` of the quasi-polynomial: the number of residue classes, each with its own polynomial.
    pub period: i64,
    /// Per residue `r` (`0 <= r < period`), the polynomial's Newton coefficients, lowest order first:
    /// the value is `Σ_j newton[r][j] · C(m, j)`.
    pub newton: Vec<Vec<i64>>,
}

impl Piece {
    /// What evaluation relies on: a positive period with one Newton table per residue.
    fn validate(&self, index: usize) -> std::result::Result<(), FormulaError> {
        if self.period < 1 || self.period > MAX_PERIOD_READ {
            return Err(FormulaError::Period { index, period: self.period });
        }
        if self.newton.len() != self.period as usize {
            return Err(FormulaError::Tables { index, tables: self.newton.len(), period: self.period });
        }
        if self.newton.iter().any(|t| t.len() > 64) {
            return Err(FormulaError::Degree { index });
        }
        Ok(())
    }

    /// `None` when the value does not fit in 128 bits.
    fn eval(&self, n: i64) -> Option<i128> {
        let t = n.checked_sub(self.from)?;
        let (r, m) = ((t % self.period) as usize, (t / self.period) as i128);
        let mut binom: i128 = 1;
        let mut v: i128 = 0;
        for (j, &d) in self.newton[r].iter().enumerate() {
            v = v.checked_add((d as i128).checked_mul(binom)?)?;
            binom = binom.checked_mul(m - j as i128)? / (j as i128 + 1);
        }
        Some(v)
    }

    /// Polynomial in `n` (rational coefficients, constant term first) for residue `r`.
    fn poly_in_n(&self, r: usize) -> Vec<Q> {
        // Σ_j d_j C(m, j) with m = (n - s)/q, s = from + r.
        let s = (self.from + r as i64) as i128;
        let q = self.period as i128;
        let deg = self.newton[r].len();
        let mut out = vec![Q::int(0); deg.max(1)];
        for (j, &d) in self.newton[r].iter().enumerate() {
            // C(m, j) = Π_{i<j} (m - i) / j!, with m - i = (n - s - i·q)/q.
            let mut poly = vec![Q::int(1)];
            let mut fact = 1i128;
            for i in 0..j {
                let c = Q::new(-(s + i as i128 * q), q);
                let a = Q::new(1, q);
                let mut next = vec![Q::int(0); poly.len() + 1];
                for (k, &p) in poly.iter().enumerate() {
                    next[k] = next[k].add(p.mul(c));
                    next[k + 1] = next[k + 1].add(p.mul(a));
                }
                poly = next;
                fact *= i as i128 + 1;
            }
            for (k, p) in poly.iter().enumerate() {
                out[k] = out[k].add(p.mul(Q::new(d as i128, fact)));
            }
        }
        while out.len() > 1 && out.last().unwrap().is_zero() {
            out.pop();
        }
        out
    }
}

/// A piecewise quasi-polynomial in `n`, defined for `n >= n_min`; the last piece is
/// unbounded above.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct QuasiPolynomial {
    /// Smallest size `n` the formula is defined for.
    pub n_min: i64,
    /// Degree bound used when fitting.
    pub degree: u32,
    /// The pieces in increasing `n`, contiguous from `n_min`; the sizes before the periodic part are stored as period-1 constant pieces.
    pub pieces: Vec<Piece>,
    /// Every `n` in `n_min ..= verified_max` was checked against the simulator.
    pub verified_max: i64,
    /// Independent (D+1)-th-difference checks per residue class of the last piece.
    pub checks_per_class: i64,
}

impl QuasiPolynomial {
    /// Evaluates at `n` (`None` below `n_min`, or if the value exceeds 128 bits).
    pub fn eval(&self, n: i64) -> Option<i128> {
        if n < self.n_min {
            return None;
        }
        let i = self.pieces.partition_point(|p| p.from <= n).checked_sub(1)?;
        self.pieces[i].eval(n)
    }

    /// Checks a quasi-polynomial read from a file before it is evaluated: pieces in
    /// increasing order, the first one starting at `n_min` at the latest, each valid.
    pub fn validate(&self) -> std::result::Result<(), FormulaError> {
        let first = self.pieces.first().ok_or(FormulaError::NoPieces)?;
        if first.from > self.n_min {
            return Err(FormulaError::FirstPieceLate { from: first.from, n_min: self.n_min });
        }
        for (i, p) in self.pieces.iter().enumerate() {
            p.validate(i)?;
            if i > 0 && p.from <= self.pieces[i - 1].from {
                return Err(FormulaError::Order { index: i, from: p.from });
            }
        }
        Ok(())
    }

    /// Start of the last (unbounded) piece.
    pub(crate) fn last_from(&self) -> i64 {
        self.pieces.last().map(|p| p.from).unwrap_or(self.n_min)
    }

    /// Period of the last piece.
    pub fn period(&self) -> i64 {
        self.pieces.last().map(|p| p.period).unwrap_or(1)
    }

    /// Readable pieces: `(condition, expression)`.
    pub(crate) fn pieces_text(&self, var: &str) -> Vec<(String, String)> {
        let mut out = Vec::new();
        for p in &self.pieces {
            let range = match p.to {
                Some(t) if t == p.from => format!("{var} = {t}"),
                Some(t) => format!("{} <= {var} <= {t}", p.from),
                None => format!("{var} >= {}", p.from),
            };
            let polys: Vec<Vec<Q>> = (0..p.period as usize).map(|r| p.poly_in_n(r)).collect();
            let same_but_constant = polys.iter().all(|x| x.len() == polys[0].len() && x[1..] == polys[0][1..]);
            if polys.iter().all(|x| x == &polys[0]) {
                out.push((range, fmt_poly(&polys[0], var)));
            } else if same_but_constant {
                // Periodic number notation: [c_0, ..., c_{q-1}]_{n mod q}, indexed by n mod q.
                let mut consts = vec![Q::int(0); p.period as usize];
                for (r, poly) in polys.iter().enumerate() {
                    consts[(p.from + r as i64).rem_euclid(p.period) as usize] = poly[0];
                }
                let mut head = polys[0].clone();
                head[0] = Q::int(0);
                let expr = match ceil_form(&head, &consts, var) {
                    Some(e) => e,
                    None => {
                        let list = consts.iter().map(|c| fmt_poly(&[*c], var)).collect::<Vec<_>>().join(", ");
                        let head = fmt_poly(&head, var);
                        if head == "0" {
                            format!("[{list}]_({var} mod {})", p.period)
                        } else {
                            format!("{head} + [{list}]_({var} mod {})", p.period)
                        }
                    }
                };
                out.push((range, expr));
            } else {
                for (r, poly) in polys.iter().enumerate() {
                    let res = (p.from + r as i64).rem_euclid(p.period);
                    out.push((format!("{range}, {var} mod {} = {res}", p.period), fmt_poly(poly, var)));
                }
            }
        }
        out
    }
}

/// Writes `head(n) + c[n mod q]` with floor/ceiling when the periodic constant is that of
/// `a·q·ceil((n - s)/q)` for the linear coefficient `a` of the head:
/// `a·n + a·((s - n) mod q) + d = a·q·ceil((n - s)/q) + a·s + d`.
fn ceil_form(head: &[Q], consts: &[Q], var: &str) -> Option<String> {
    let q = consts.len() as i128;
    let a = *head.get(1)?;
    if a.is_zero() {
        return None;
    }
    let aq = a.mul(Q::int(q));
    if aq.den != 1 {
        return None;
    }
    for s in 0..q {
        let d = consts[0].add(Q::new(-(a.num * (s.rem_euclid(q))), a.den));
        let fits = (0..q).all(|r| consts[r as usize] == a.mul(Q::int((s - r).rem_euclid(q))).add(d));
        if !fits {
            continue;
        }
        // head without its linear term, plus a·q·ceil((n - s)/q) + (a·s + d).
        let mut rest = head.to_vec();
        rest[1] = Q::int(0);
        let konst = a.mul(Q::int(s)).add(d);
        let arg = if s == 0 { format!("{var}/{q}") } else { format!("({var} - {s})/{q}") };
        let ceil = if aq.num == 1 { format!("ceil({arg})") } else if aq.num == -1 { format!("-ceil({arg})") } else { format!("{}*ceil({arg})", aq.num) };
        let mut text = String::new();
        let rest_text = fmt_poly(&rest, var);
        if rest_text != "0" {
            text.push_str(&rest_text);
            text.push_str(if ceil.starts_with('-') { " - " } else { " + " });
            text.push_str(ceil.trim_start_matches('-'));
        } else {
            text.push_str(&ceil);
        }
        if !konst.is_zero() {
            let c = fmt_poly(&[konst], var);
            if let Some(m) = c.strip_prefix('-') {
                text.push_str(&format!(" - {m}"));
            } else {
                text.push_str(&format!(" + {c}"));
            }
        }
        return Some(text);
    }
    None
}

fn fmt_poly(p: &[Q], var: &str) -> String {
    let mut s = String::new();
    for (k, c) in p.iter().enumerate().rev() {
        if c.is_zero() && !(k == 0 && s.is_empty()) {
            continue;
        }
        let neg = c.num < 0;
        let mag = Q { num: c.num.abs(), den: c.den };
        if s.is_empty() {
            if neg {
                s.push('-');
            }
        } else {
            s.push_str(if neg { " - " } else { " + " });
        }
        let coef = if mag.den == 1 { mag.num.to_string() } else { format!("{}/{}", mag.num, mag.den) };
        match k {
            0 => s.push_str(&coef),
            _ => {
                if !(mag.num == 1 && mag.den == 1) {
                    s.push_str(&coef);
                    s.push('*');
                }
                s.push_str(var);
                if k > 1 {
                    s.push_str(&format!("^{k}"));
                }
            }
        }
    }
    s
}

/// Best suffix of `values[lo..=hi]` (indices into `values`, `values[i] = f(n_min + i)`)
/// that is a quasi-polynomial of degree <= `degree`: `(start index, period)`, choosing the
/// smallest `start + period·(D+1)`; each residue class needs `evidence` checks.
fn best_suffix(values: &[i64], lo: usize, hi: usize, degree: u32, max_period: i64, evidence: i64) -> Option<(usize, i64)> {
    let d1 = degree as i64 + 1;
    let mut binom = vec![1i128; d1 as usize + 1];
    for j in 1..=d1 as usize {
        binom[j] = binom[j - 1] * (d1 as i128 - j as i128 + 1) / j as i128;
    }
    let (lo, hi) = (lo as i64, hi as i64);
    let f = |i: i64| values[i as usize] as i128;
    let mut best: Option<(i64, i64)> = None;
    for q in 1..=max_period {
        let first_check = lo + q * d1;
        if first_check > hi {
            break;
        }
        let mut last_fail = None;
        for i in (first_check..=hi).rev() {
            let mut s: i128 = 0;
            for (j, b) in binom.iter().enumerate() {
                let t = f(i - j as i64 * q) * b;
                s += if j % 2 == 0 { t } else { -t };
            }
            if s != 0 {
                last_fail = Some(i);
                break;
            }
        }
        let start = match last_fail {
            Some(l) => l - q * d1 + 1,
            None => lo,
        };
        let checks = hi - (start + q * d1) + 1;
        if checks >= evidence * q && !matches!(best, Some((bs, bq)) if start + q * d1 >= bs + bq * d1) {
            best = Some((start, q));
        }
    }
    best.map(|(s, q)| (s as usize, q))
}

fn make_piece(values: &[i64], n_min: i64, start: usize, end: Option<usize>, q: i64, degree: u32) -> Piece {
    let d1 = degree as usize + 1;
    let newton = (0..q as usize)
        .map(|r| {
            let mut col: Vec<i128> = (0..d1).map(|m| start + r + q as usize * m).filter(|&i| i < values.len()).map(|i| values[i] as i128).collect();
            let mut coeffs = Vec::new();
            while !col.is_empty() {
                coeffs.push(col[0] as i64);
                col = col.windows(2).map(|w| w[1] - w[0]).collect();
            }
            while coeffs.len() > 1 && *coeffs.last().unwrap() == 0 {
                coeffs.pop();
            }
            coeffs
        })
        .collect();
    Piece { from: n_min + start as i64, to: end.map(|e| n_min + e as i64), period: q, newton }
}

/// Fits `values[i] = f(n_min + i)` with a piecewise quasi-polynomial whose last piece is
/// unbounded and backed by `evidence` checks per residue class; `None` when the data do
/// not show such a last piece for any period `<= max_period`. Earlier pieces are found
/// the same way on the remaining prefix (with one check per class), and what is left is
/// stored as constant runs. The result reproduces every given value exactly.
pub(crate) fn fit_quasi_polynomial(values: &[i64], n_min: i64, degree: u32, max_period: i64, evidence: i64) -> Option<QuasiPolynomial> {
    let hi = values.len() - 1;
    let (start, q) = best_suffix(values, 0, hi, degree, max_period, evidence)?;
    let checks_per_class = (hi as i64 - (start as i64 + q * (degree as i64 + 1)) + 1) / q;
    let mut pieces = vec![make_piece(values, n_min, start, None, q, degree)];
    let mut end = start; // exclusive end of what remains
    while end > 0 {
        match best_suffix(values, 0, end - 1, degree, max_period, 1) {
            Some((s, q)) if (end - s) as i64 >= 2 * q * (degree as i64 + 1) => {
                pieces.push(make_piece(values, n_min, s, Some(end - 1), q, degree));
                end = s;
            }
            _ => {
                // A constant run ending at end - 1.
                let v = values[end - 1];
                let mut s = end - 1;
                while s > 0 && values[s - 1] == v {
                    s -= 1;
                }
                pieces.push(Piece { from: n_min + s as i64, to: Some(n_min + end as i64 - 1), period: 1, newton: vec![vec![v]] });
                end = s;
            }
        }
    }
    pieces.reverse();
    let qp = QuasiPolynomial { n_min, degree, pieces, verified_max: n_min + hi as i64, checks_per_class };
    for (i, &v) in values.iter().enumerate() {
        assert_eq!(qp.eval(n_min + i as i64), Some(v as i128), "fit must reproduce the samples");
    }
    Some(qp)
}

/// The formulas of one reference.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct RefFormulas {
    /// `P0`, `P1`, ...
    pub reference: String,
    /// Label of the statement containing the reference.
    pub statement: String,
    /// `left` (the write) or `right` (a read).
    pub side: String,
    /// 1-based position among the references of that side, left to right.
    pub position: usize,
    /// The reference as text, e.g. `A[i][k]`.
    pub text: String,
    /// Degree bound used (number of enclosing loops whose trip count grows with `n`).
    pub degree_bound: u32,
    /// The seed's first count: executions of the reference.
    pub accesses: QuasiPolynomial,
    /// First count − second count: accesses whose line was never touched before.
    pub compulsory: QuasiPolynomial,
    /// Third count − fourth count: accesses whose line was evicted since its last use.
    pub conflict: QuasiPolynomial,
    /// With `--explain`: the second count split by hit source (the reference that last
    /// accessed the line before; hits and conflict misses alike).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub hit_sources: Vec<NamedFormula>,
    /// With `--explain`: conflict misses split by conflict-miss factor (the reference
    /// whose access evicted the line).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conflict_factors: Vec<NamedFormula>,
}

/// A count attributed to one reference.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct NamedFormula {
    /// The other reference the count is attributed to (`P0`, `P1`, ...).
    pub reference: String,
    /// The attributed count as a function of `n`.
    pub count: QuasiPolynomial,
}

/// All formulas of a kernel for one cache and layout.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct KernelFormulas {
    /// JSON format tag, `kansoku-cache-formulas/1`.
    pub format: String,
    /// Name of the kernel's source file.
    pub kernel: String,
    /// The cache these formulas count misses of (one [`KernelFormulas`] per cache of [`ModelOptions::caches`]).
    pub cache: CacheConfig,
    /// The array placement the formulas assume.
    pub layout: LayoutSpec,
    /// How the kernel's parameters follow the size variable `n`.
    pub family: Family,
    /// Name of the size variable in printed formulas.
    pub size_var: String,
    /// One entry per reference of the kernel, in reference order (`P0` first).
    pub refs: Vec<RefFormulas>,
    /// Simulated sizes used to derive the formulas.
    pub sampled_sizes: (i64, i64),
    /// See [`horizon`]: sizes up to here and some periods beyond were all simulated.
    pub horizon: i64,
    /// Wall-clock seconds of the whole build (simulations and fits for all caches of the build).
    pub build_seconds: f64,
    /// The cache's state at the kernel's start the formulas assume: always cold (the
    /// formulas count from an empty cache; a warm start is simulated).
    #[serde(default)]
    pub start: crate::sim::Start,
}

/// Counts of one reference from evaluating its formulas.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct RefEvaluation {
    /// The reference's seed position name, `P0`, `P1`, ...
    pub reference: String,
    /// Number of times the reference is executed at `n` (the seed's first count).
    pub accesses: i128,
    /// How many of those accesses are compulsory misses (first use of their line).
    pub compulsory: i128,
    /// How many are conflict misses (line evicted since its last use).
    pub conflict: i128,
    /// The remaining accesses, which hit: `accesses − compulsory − conflict`.
    pub hits: i128,
    /// Present when the formulas carry the breakdown (`model --explain`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub hit_sources: BTreeMap<String, i128>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    /// Present with the breakdown: conflict misses per conflict-miss factor (the reference whose access evicted the line).
    pub conflict_factors: BTreeMap<String, i128>,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
/// Every reference's counts at one size `n`, from [`KernelFormulas::eval`] or [`KernelFormulas::eval_n`].
pub struct Evaluation {
    /// The size variable's value the formulas were evaluated at.
    pub n: i64,
    /// True when `n` is beyond the range checked against the simulator.
    pub extrapolated: bool,
    /// Largest `n` up to which every formula was checked against the simulator (see [`KernelFormulas::verified_max`]).
    pub verified_max: i64,
    /// One entry per reference, in reference order.
    pub refs: Vec<RefEvaluation>,
}

impl KernelFormulas {
    /// Largest `n` up to which every formula of every reference was checked against the simulator (the smallest of their `verified_max`).
    pub fn verified_max(&self) -> i64 {
        self.refs.iter().flat_map(|r| [&r.accesses, &r.compulsory, &r.conflict]).map(|q| q.verified_max).min().unwrap_or(0)
    }
    /// Smallest size `n` the formulas are defined for (1 when there are no references).
    pub fn n_min(&self) -> i64 {
        self.refs.first().map(|r| r.accesses.n_min).unwrap_or(1)
    }

    /// Checks every formula (they may come from a file) before any is evaluated; the
    /// error names the reference and the count.
    pub fn validate(&self) -> Result<()> {
        for r in &self.refs {
            let named = r.hit_sources.iter().chain(&r.conflict_factors).map(|h| (format!("from {}", h.reference), &h.count));
            let counts = [("accesses".to_string(), &r.accesses), ("compulsory".into(), &r.compulsory), ("conflict".into(), &r.conflict)];
            for (what, q) in counts.into_iter().chain(named) {
                q.validate().map_err(|e| CacheError::Formulas(format!("{} {what}: {e}", r.reference)))?;
            }
        }
        Ok(())
    }

    /// Evaluates every reference's formulas at parameter values.
    pub fn eval(&self, values: &ParamValues) -> Result<Evaluation> {
        let n = self.family.n_of(values)?;
        self.eval_n(n)
    }

    /// Evaluates every reference's formulas at size `n` (after validating them); fails for `n` below
    /// [`KernelFormulas::n_min`] or a count beyond 128 bits, and marks `n` beyond
    /// [`KernelFormulas::verified_max`] as extrapolated.
    pub fn eval_n(&self, n: i64) -> Result<Evaluation> {
        if n < self.n_min() {
            return Err(CacheError::Params(format!(
                "{} = {n} is outside the range these formulas were derived for ({} >= {})",
                if self.family.ties.is_empty() { self.family.varying.join(" = ") } else { self.size_var.clone() },
                self.size_var,
                self.n_min()
            )));
        }
        self.validate()?;
        let too_big = || CacheError::Params(format!("{} = {n} is too large: a count exceeds 128 bits", self.size_var));
        let refs = self
            .refs
            .iter()
            .map(|r| {
                let a = r.accesses.eval(n).ok_or_else(too_big)?;
                let c = r.compulsory.eval(n).ok_or_else(too_big)?;
                let x = r.conflict.eval(n).ok_or_else(too_big)?;
                Ok(RefEvaluation {
                    reference: r.reference.clone(),
                    accesses: a,
                    compulsory: c,
                    conflict: x,
                    hits: a.checked_sub(c).and_then(|h| h.checked_sub(x)).ok_or_else(too_big)?,
                    hit_sources: r.hit_sources.iter().map(|h| Ok((h.reference.clone(), h.count.eval(n).ok_or_else(too_big)?))).collect::<Result<_>>()?,
                    conflict_factors: r.conflict_factors.iter().map(|h| Ok((h.reference.clone(), h.count.eval(n).ok_or_else(too_big)?))).collect::<Result<_>>()?,
                })
            })
            .collect::<Result<Vec<_>>>()?;
        let vm = self.verified_max();
        Ok(Evaluation { n, extrapolated: n > vm, verified_max: vm, refs })
    }
}

/// Options of [`build_model`].
#[derive(Clone, Debug)]
pub struct ModelOptions {
    /// How the parameters follow the size variable `n`.
    pub family: Family,
    /// Where the arrays are placed in memory.
    pub layout: LayoutSpec,
    /// The caches to derive formulas for; one [`KernelFormulas`] is built per cache, from the same simulations.
    pub caches: Vec<CacheConfig>,
    /// Smallest size `n` simulated and covered by the formulas.
    pub n_min: i64,
    /// Independent checks per residue class required to accept a period.
    pub evidence: i64,
    /// Largest period `q` the fit tries.
    pub max_period: i64,
    /// Give up beyond this size ...
    pub max_n: i64,
    /// ... or when the simulations would exceed this many accesses in total ...
    pub access_budget: u64,
    /// ... or after this much time (checked after every simulated size).
    pub time_budget: Option<std::time::Duration>,
    /// Also derive hit-source and conflict-factor formulas (slower; for `--explain`).
    pub breakdown: bool,
    /// Called after each simulated size with that size (for a progress display).
    pub progress: Option<Progress>,
}

/// A progress callback (see [`ModelOptions::progress`]).
#[derive(Clone)]
pub struct Progress(pub std::sync::Arc<dyn Fn(i64) + Send + Sync>);

impl fmt::Debug for Progress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Progress(..)")
    }
}

impl ModelOptions {
    /// Options with the defaults: `n` from 1, 3 checks per residue class, period up to 128, sizes up to
    /// 1 000 000, 40 000 000 000 simulated accesses in total, no time budget, no breakdown, no progress callback.
    pub fn new(family: Family, layout: LayoutSpec, caches: Vec<CacheConfig>) -> Self {
        ModelOptions { family, layout, caches, n_min: 1, evidence: 3, max_period: 128, max_n: 1_000_000, access_budget: 40_000_000_000, time_budget: None, breakdown: false, progress: None }
    }
}

/// Degree bound per reference: enclosing loops whose trip count depends on `n`.
pub fn degree_bounds(k: &Kernel, family: &Family) -> Vec<u32> {
    let mut grows = vec![false; k.loops.len()];
    for (i, l) in k.loops.iter().enumerate() {
        grows[i] = l.lower.vars().chain(l.upper.vars()).any(|v| {
            family.varying.iter().any(|p| p == v) || k.loops[..i].iter().enumerate().any(|(j, o)| grows[j] && o.var == v)
        });
    }
    k.refs.iter().map(|r| r.loops.iter().filter(|&&l| grows[l]).count() as u32).collect()
}

/// The *horizon*: a size beyond which, by the magnitude of the kernel's constants, no new
/// piece is expected to start. Pieces of a count in `n` begin where an affine quantity of
/// the kernel (an extent in elements, a loop bound) crosses a constant of the kernel: an
/// explicit base address, a fixed parameter, a constant in a bound, subscript or size, or
/// the cache capacity and line size in elements. The horizon is the sum of all of these
/// (in elements of the smallest element type). It is a heuristic bound, not a proof; the
/// model samples every size up to beyond it, and the tests check sizes past the samples.
pub fn horizon(k: &Kernel, family: &Family, layout: &LayoutSpec, caches: &[CacheConfig]) -> i64 {
    let min_elem = k.arrays.iter().map(|a| a.elem_size).min().unwrap_or(1).max(1) as i64;
    let mut h: i64 = 0;
    if let LayoutSpec::Bases(m) = layout {
        let lo = m.values().copied().min().unwrap_or(0) as i64;
        h += m.values().map(|&b| b as i64 - lo).max().unwrap_or(0) / min_elem;
    }
    if let LayoutSpec::Consecutive { align, .. } = layout {
        h += *align as i64 / min_elem;
    }
    h += family.fixed.values().map(|v| v.abs()).sum::<i64>();
    h += family.ties.values().map(|(_, b)| b.abs()).sum::<i64>();
    let konst = |a: &crate::affine::Affine| a.constant.abs();
    h += k.arrays.iter().flat_map(|a| a.dims.iter()).map(konst).max().unwrap_or(0);
    h += k.loops.iter().flat_map(|l| [konst(&l.lower), konst(&l.upper)]).max().unwrap_or(0);
    h += k.statements.iter().flat_map(|s| s.guards.iter()).map(konst).max().unwrap_or(0);
    h += k.refs.iter().flat_map(|r| r.subscripts.iter()).map(konst).max().unwrap_or(0);
    h += caches.iter().map(|c| (c.size_bytes() as i64 + c.line as i64) / min_elem).max().unwrap_or(0);
    h
}

pub(crate) fn gcd64(a: u64, b: u64) -> u64 {
    if b == 0 {
        a
    } else {
        gcd64(b, a % b)
    }
}

/// A *structural period* (in sizes): the mapping of addresses to sets repeats every
/// `sets·line` bytes and consecutive layouts round every base to `align` bytes, so the
/// counts' residue structure is expected to repeat with `lcm(sets·line, align)` measured
/// in elements. The last piece of every formula must be confirmed over `evidence` such
/// periods (not only over its own, possibly smaller, apparent period): a run of equal
/// values shorter than the true period must not pass for a constant piece.
pub(crate) fn structural_period(k: &Kernel, layout: &LayoutSpec, c: &CacheConfig) -> i64 {
    let e = k.arrays.iter().map(|a| a.elem_size).fold(0, gcd64).max(1);
    let m1 = c.sets as u64 * c.line as u64;
    let p1 = m1 / gcd64(m1, e);
    let p2 = match layout {
        LayoutSpec::Consecutive { align, .. } => *align / gcd64(*align, e),
        LayoutSpec::Bases(_) => 1,
    }
    .max(1);
    (p1 / gcd64(p1, p2) * p2).min(1 << 20) as i64
}

/// Builds formulas for every reference and every cache in `opts.caches`.
pub fn build_model(k: &Kernel, opts: &ModelOptions) -> Result<Vec<KernelFormulas>> {
    opts.family.check(k)?;
    for c in &opts.caches {
        c.validate().map_err(|e| CacheError::CacheConfig { spec: c.to_string(), msg: e.to_string() })?;
    }
    let start = std::time::Instant::now();
    let degs = degree_bounds(k, &opts.family);
    let nrefs = k.refs.len();
    let ncache = opts.caches.len();
    // samples[cache][n - n_min][ref]
    let mut samples: Vec<Vec<Vec<RefStats>>> = vec![vec![]; ncache];
    let mut spent: u64 = 0;
    let mut n_hi = opts.n_min - 1;
    let horizons: Vec<i64> = opts.caches.iter().map(|c| horizon(k, &opts.family, &opts.layout, std::slice::from_ref(c))).collect();
    let periods: Vec<i64> = opts.caches.iter().map(|c| structural_period(k, &opts.layout, c)).collect();
    let mut target = (opts.n_min + 24).max(*horizons.iter().max().unwrap_or(&0));
    let mut fitted: Vec<Vec<Option<[QuasiPolynomial; 3]>>> = vec![vec![None; nrefs]; ncache];
    type Named = Vec<NamedFormula>;
    let mut fitted_bd: Vec<Vec<(Named, Named)>> = vec![vec![(vec![], vec![]); nrefs]; ncache];
    let mut samples_bd: Vec<Vec<Breakdown>> = vec![vec![]; ncache];
    loop {
        while n_hi < target {
            let n = n_hi + 1;
            let prog = Program::new(k, &opts.family.params_at(n), &opts.layout)?;
            let res = if opts.breakdown {
                opts.caches
                    .iter()
                    .enumerate()
                    .map(|(c, cache)| {
                        let b = prog.simulate_breakdown(*cache);
                        let st = b.stats.clone();
                        samples_bd[c].push(b);
                        st
                    })
                    .collect()
            } else {
                prog.simulate(&opts.caches)
            };
            spent += res[0].iter().map(|s| s.accesses).sum::<u64>() * ncache as u64;
            for (c, r) in res.into_iter().enumerate() {
                samples[c].push(r);
            }
            n_hi = n;
            if let Some(p) = &opts.progress {
                (p.0)(n);
            }
            if opts.time_budget.is_some_and(|b| start.elapsed() > b) {
                return Err(CacheError::Model(format!(
                    "interpolation out of its time budget of {:.0} s after simulating {} = {}..={n_hi} of the {target} sizes it needs (the horizon grows with the cache capacity in elements and the structural period with the layout)",
                    opts.time_budget.unwrap_or_default().as_secs_f64(),
                    opts.family.varying.join("="),
                    opts.n_min
                )));
            }
        }
        let mut missing = Vec::new();
        for c in 0..ncache {
            for r in 0..nrefs {
                if fitted[c][r].is_some() {
                    continue;
                }
                let series = |f: &dyn Fn(&RefStats) -> u64| samples[c].iter().map(|s| f(&s[r]) as i64).collect::<Vec<_>>();
                let fit = |v: Vec<i64>| fit_quasi_polynomial(&v, opts.n_min, degs[r], opts.max_period, opts.evidence);
                let a = fit(series(&|s| s.accesses));
                let cm = fit(series(&|s| s.compulsory));
                let cf = fit(series(&|s| s.other));
                // The last piece must be confirmed beyond the horizon.
                let confirmed = |q: &QuasiPolynomial| {
                    q.verified_max >= horizons[c].max(q.last_from() + q.period() * (degs[r] as i64 + 1)) + q.period().max(periods[c]) * opts.evidence - 1
                };
                match (a, cm, cf) {
                    (Some(a), Some(cm), Some(cf)) if confirmed(&a) && confirmed(&cm) && confirmed(&cf) => fitted[c][r] = Some([a, cm, cf]),
                    _ => {
                        missing.push(format!("P{r} ({})", opts.caches[c]));
                        continue;
                    }
                }
                if opts.breakdown {
                    // Hit sources and conflict-miss factors per reference, the same way.
                    let mut ok = true;
                    let mut parts: [Named; 2] = [vec![], vec![]];
                    for (kind, part) in parts.iter_mut().enumerate() {
                        for src in 0..nrefs {
                            let v: Vec<i64> = samples_bd[c]
                                .iter()
                                .map(|b| (if kind == 0 { b.hit_source[r][src] } else { b.conflict_factor[r][src] }) as i64)
                                .collect();
                            if v.iter().all(|&x| x == 0) {
                                continue;
                            }
                            match fit(v) {
                                Some(q) if confirmed(&q) => part.push(NamedFormula { reference: format!("P{src}"), count: q }),
                                _ => ok = false,
                            }
                        }
                    }
                    if !ok {
                        fitted[c][r] = None;
                        missing.push(format!("P{r} breakdown ({})", opts.caches[c]));
                        continue;
                    }
                    let [h, f] = parts;
                    fitted_bd[c][r] = (h, f);
                }
            }
        }
        if missing.is_empty() {
            break;
        }
        // Grow the sampled range by half (at least 16 sizes).
        let next = target + ((target - opts.n_min + 1) / 2).max(16);
        // Estimate the cost of the next sizes from the last one (degree <= max bound).
        let last: u64 = samples[0].last().map(|s| s.iter().map(|x| x.accesses).sum()).unwrap_or(0) * ncache as u64;
        let growth = ((next as f64) / (target as f64)).powi(*degs.iter().max().unwrap_or(&1) as i32);
        let est = (last as f64 * growth * (next - target) as f64) as u64;
        if next > opts.max_n || spent + est > opts.access_budget {
            return Err(CacheError::Model(format!(
                "no exact quasi-polynomial confirmed for {} after simulating {} = {}..={n_hi} ({spent} cache accesses; the next sizes would exceed the budget of {} or the limit {}); \
                 the last piece must be confirmed past the horizon {} (grows with the cache capacity in elements) with periods up to {}. \
                 Derive the formulas for large sizes only (a larger --from), or use a smaller cache",
                missing.join(", "),
                opts.family.varying.join("="),
                opts.n_min,
                opts.access_budget,
                opts.max_n,
                horizons.iter().max().unwrap_or(&0),
                opts.max_period
            )));
        }
        // Re-verify fitted ones against the longer series as well: refit everything.
        for c in fitted.iter_mut() {
            c.iter_mut().for_each(|f| *f = None);
        }
        for c in fitted_bd.iter_mut() {
            c.iter_mut().for_each(|f| *f = (vec![], vec![]));
        }
        target = next;
    }
    let secs = start.elapsed().as_secs_f64();
    let size_var = if opts.family.varying.len() == 1 && opts.family.ties.is_empty() { opts.family.varying[0].clone() } else { "n".to_string() };
    Ok(opts
        .caches
        .iter()
        .enumerate()
        .map(|(c, cache)| KernelFormulas {
            format: "kansoku-cache-formulas/1".into(),
            kernel: k.file.clone(),
            cache: *cache,
            layout: opts.layout.clone(),
            family: opts.family.clone(),
            size_var: size_var.clone(),
            refs: k
                .refs
                .iter()
                .enumerate()
                .map(|(r, rf)| {
                    let [a, cm, cf] = fitted[c][r].clone().unwrap();
                    RefFormulas {
                        reference: format!("P{r}"),
                        statement: k.statements[rf.stmt].label.clone(),
                        side: rf.side.as_str().into(),
                        position: rf.position,
                        text: k.ref_text(rf),
                        degree_bound: degs[r],
                        accesses: a,
                        compulsory: cm,
                        conflict: cf,
                        hit_sources: fitted_bd[c][r].0.clone(),
                        conflict_factors: fitted_bd[c][r].1.clone(),
                    }
                })
                .collect(),
            sampled_sizes: (opts.n_min, n_hi),
            horizon: horizons[c],
            build_seconds: secs,
            start: crate::sim::Start::Cold,
        })
        .collect())
}

impl fmt::Display for KernelFormulas {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let v = &self.size_var;
        writeln!(f, "kernel {}  cache {}  {}{}", self.kernel, self.cache, self.family.describe(v), fixed_text(&self.family))?;
        for r in &self.refs {
            writeln!(f, "{} {} {}:{}:{}", r.reference, r.text, r.statement, r.side, r.position)?;
            for (name, q) in [("compulsory", &r.compulsory), ("conflict", &r.conflict)] {
                writeln!(f, "  {name}:")?;
                for (cond, e) in q.pieces_text(v) {
                    writeln!(f, "    {cond:<28} {e}")?;
                }
            }
        }
        Ok(())
    }
}

fn fixed_text(fam: &Family) -> String {
    if fam.fixed.is_empty() {
        String::new()
    } else {
        format!(", {}", fam.fixed.iter().map(|(k, v)| format!("{k} = {v}")).collect::<Vec<_>>().join(", "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ceil_div(a: i64, b: i64) -> i64 {
        (a + b - 1).div_euclid(b)
    }

    fn printed(f: impl Fn(i64) -> i64, degree: u32) -> Vec<(String, String)> {
        let values: Vec<i64> = (1..=200).map(&f).collect();
        let q = fit_quasi_polynomial(&values, 1, degree, 16, 3).unwrap();
        for n in 1..=400 {
            assert_eq!(q.eval(n), Some(f(n) as i128), "n={n}");
        }
        q.pieces_text("n")
    }

    #[test]
    fn floors_and_ceilings_are_printed_as_such() {
        assert_eq!(printed(|n| ceil_div(n, 4), 1), vec![("n >= 1".to_string(), "ceil(n/4)".to_string())]);
        assert_eq!(printed(|n| 3 * ceil_div(n - 1, 4) + 2, 1), vec![("n >= 1".to_string(), "3*ceil((n - 1)/4) + 2".to_string())]);
        assert_eq!(printed(|n| n * n + n.div_euclid(2), 2), vec![("n >= 1".to_string(), "n^2 + ceil((n - 1)/2)".to_string())]);
        assert_eq!(printed(|n| 5 * n - 7, 1), vec![("n >= 1".to_string(), "5*n - 7".to_string())]);
    }

    #[test]
    fn pieces_and_periodic_numbers_round_trip() {
        // A function with a start-up region, a kink at 50 and a period-3 quadratic part.
        let f = |n: i64| if n < 10 { 7 } else if n < 50 { 2 * n } else { n * n / 3 + [0, 5, 1][(n % 3) as usize] };
        let values: Vec<i64> = (1..=300).map(f).collect();
        let q = fit_quasi_polynomial(&values, 1, 2, 16, 3).unwrap();
        assert_eq!(q.last_from(), 50);
        assert_eq!(q.period(), 3);
        for n in 1..=1000 {
            assert_eq!(q.eval(n), Some(f(n) as i128));
        }
        let json = serde_json::to_string(&q).unwrap();
        let back: QuasiPolynomial = serde_json::from_str(&json).unwrap();
        assert_eq!(back, q);
    }

    #[test]
    fn too_little_data_gives_no_formula() {
        // D + 1 = 4 points determine a cubic; 3 more checks are required, 6 points give 2.
        let values: Vec<i64> = (1..=6).map(|n| n * n * n).collect();
        assert!(fit_quasi_polynomial(&values, 1, 3, 16, 2).is_some());
        assert!(fit_quasi_polynomial(&values, 1, 3, 16, 3).is_none());
    }
}
