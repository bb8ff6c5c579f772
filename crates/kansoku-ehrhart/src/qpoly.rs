//! Piecewise quasi-polynomials with floor terms: serialisable (JSON), evaluated exactly
//! with 128-bit rationals in microseconds, printed readably
//! (`1/2*X*floor((X + 3)/4) - 3   if X >= 8 and Y - X >= 0`).

use serde::{Deserialize, Serialize};
use std::fmt;

/// `floor((coeffs · params + constant) / den)`, `den >= 2`.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(from = "FloorRepr", into = "FloorRepr")]
pub struct Floor {
    /// One coefficient per parameter.
    pub coeffs: Vec<i64>,
    /// The constant added before dividing.
    pub constant: i64,
    /// The divisor, at least 2 when built here (a file's is checked to be at least 1).
    pub den: i64,
}

// Formula files hold hundreds of thousands of floors, monomials and constraints: written
// as short arrays (`[coeffs, constant, den]`) they take about half the bytes of objects
// with field names. Files written before, with the names, still read.

#[derive(Serialize, Deserialize)]
#[serde(untagged)]
enum FloorRepr {
    Short(Vec<i64>, i64, i64),
    Named { coeffs: Vec<i64>, constant: i64, den: i64 },
}

impl From<FloorRepr> for Floor {
    fn from(r: FloorRepr) -> Self {
        match r {
            FloorRepr::Short(coeffs, constant, den) | FloorRepr::Named { coeffs, constant, den } => Floor { coeffs, constant, den },
        }
    }
}

impl From<Floor> for FloorRepr {
    fn from(f: Floor) -> Self {
        FloorRepr::Short(f.coeffs, f.constant, f.den)
    }
}

#[derive(Serialize, Deserialize)]
#[serde(untagged)]
enum MonomialRepr {
    Short(i64, i64, Vec<(usize, u32)>),
    Named { num: i64, den: i64, powers: Vec<(usize, u32)> },
}

impl From<MonomialRepr> for Monomial {
    fn from(r: MonomialRepr) -> Self {
        match r {
            MonomialRepr::Short(num, den, powers) | MonomialRepr::Named { num, den, powers } => Monomial { num, den, powers },
        }
    }
}

impl From<Monomial> for MonomialRepr {
    fn from(m: Monomial) -> Self {
        MonomialRepr::Short(m.num, m.den, m.powers)
    }
}

#[derive(Serialize, Deserialize)]
#[serde(untagged)]
enum ConstraintRepr {
    Short(bool, Vec<i64>, i64),
    Named { equality: bool, coeffs: Vec<i64>, constant: i64 },
}

impl From<ConstraintRepr> for Constraint {
    fn from(r: ConstraintRepr) -> Self {
        match r {
            ConstraintRepr::Short(equality, coeffs, constant) | ConstraintRepr::Named { equality, coeffs, constant } => Constraint { equality, coeffs, constant },
        }
    }
}

impl From<Constraint> for ConstraintRepr {
    fn from(c: Constraint) -> Self {
        ConstraintRepr::Short(c.equality, c.coeffs, c.constant)
    }
}

/// `num/den · Π symbol^power`; symbols `0..p` are the parameters, `p..` the floors.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(from = "MonomialRepr", into = "MonomialRepr")]
pub struct Monomial {
    /// The coefficient's numerator.
    pub num: i64,
    /// The coefficient's denominator (nonzero).
    pub den: i64,
    /// `(symbol, power)` pairs: a symbol below the parameter count is a parameter, one at
    /// or above it indexes the expression's floors.
    pub powers: Vec<(usize, u32)>,
}

/// A polynomial in the parameters and floor terms with rational coefficients.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Expr {
    /// The floor terms the monomials' symbols `p..` refer to.
    pub floors: Vec<Floor>,
    /// The monomials summed; no term is zero.
    pub terms: Vec<Monomial>,
}

/// `coeffs · params + constant (= 0 | >= 0)`.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(from = "ConstraintRepr", into = "ConstraintRepr")]
pub struct Constraint {
    /// `= 0` when true, `>= 0` when false.
    pub equality: bool,
    /// One coefficient per parameter.
    pub coeffs: Vec<i64>,
    /// The constant term.
    pub constant: i64,
}

/// A convex domain of the parameters (conjunction of constraints).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Domain {
    /// All must hold; none means every parameter value.
    pub constraints: Vec<Constraint>,
}

/// A chamber and the count's quasi-polynomial in it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Cell {
    /// Where the value holds.
    pub domain: Domain,
    /// The count there.
    pub value: Expr,
}

/// A count as a function of named parameters: the sum of the values of the cells whose
/// domain holds the parameters (cells of one count are disjoint), valid on `context`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PwQp {
    /// The parameters' names, in the order of every coefficient list.
    pub params: Vec<String>,
    /// Where the formula was derived for (e.g. every parameter ≥ 1).
    pub context: Domain,
    /// Disjoint chambers, each with its quasi-polynomial; a point in none counts 0.
    pub cells: Vec<Cell>,
}

/// Exact rational with 128-bit parts (internal).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Rat {
    pub n: i128,
    pub d: i128,
}

pub(crate) fn gcd128(a: i128, b: i128) -> i128 {
    let (mut a, mut b) = (a.abs(), b.abs());
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

impl Rat {
    pub fn new(n: i128, d: i128) -> Rat {
        let s = if d < 0 { -1 } else { 1 };
        let g = gcd128(n, d).max(1);
        Rat { n: s * n / g, d: s * d / g }
    }
    pub fn int(n: i128) -> Rat {
        Rat { n, d: 1 }
    }
    pub fn zero() -> Rat {
        Rat { n: 0, d: 1 }
    }
    pub fn add(self, o: Rat) -> Rat {
        let g = gcd128(self.d, o.d).max(1);
        Rat::new(self.n * (o.d / g) + o.n * (self.d / g), self.d / g * o.d)
    }
    pub fn mul(self, o: Rat) -> Rat {
        let g1 = gcd128(self.n, o.d).max(1);
        let g2 = gcd128(o.n, self.d).max(1);
        Rat::new((self.n / g1) * (o.n / g2), (self.d / g2) * (o.d / g1))
    }
    /// `add` that says when 128 bits are not enough.
    pub fn checked_add(self, o: Rat) -> Option<Rat> {
        let g = gcd128(self.d, o.d).max(1);
        let n = self.n.checked_mul(o.d / g)?.checked_add(o.n.checked_mul(self.d / g)?)?;
        Some(Rat::new(n, (self.d / g).checked_mul(o.d)?))
    }
    /// `mul` that says when 128 bits are not enough.
    pub fn checked_mul(self, o: Rat) -> Option<Rat> {
        let g1 = gcd128(self.n, o.d).max(1);
        let g2 = gcd128(o.n, self.d).max(1);
        Some(Rat::new((self.n / g1).checked_mul(o.n / g2)?, (self.d / g2).checked_mul(o.d / g1)?))
    }
    pub fn is_zero(self) -> bool {
        self.n == 0
    }
}

/// Why an evaluation was refused.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[non_exhaustive]
pub enum EvalError {
    /// The number of values is not the number of parameters.
    #[error("expected {expected} parameter values, got {got}")]
    Arity {
        /// The formula's parameter count.
        expected: usize,
        /// The values given.
        got: usize,
    },
    /// The point (`N=5,M=3`) lies outside [`PwQp::context`].
    #[error("parameters outside the domain the formula was derived for: {0}")]
    OutsideContext(String),
    /// The value at the point (named) is a fraction: the formula is wrong there.
    #[error("the formula does not give an integer at {0}; it is not a count there")]
    NotInteger(String),
    /// The value at the point (named) overflows 128-bit arithmetic.
    #[error("the value at {0} does not fit in 128 bits")]
    TooLarge(String),
}

/// What is wrong with a formula read from outside ([`PwQp::validate`]); the message names
/// the place inside it (`cells[3].value.terms[1]`).
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[non_exhaustive]
pub enum FormulaError {
    /// A constraint of the context or a cell has a coefficient list of the wrong length.
    #[error("a constraint has {got} coefficients for {params} parameters")]
    ConstraintArity {
        /// Coefficients in the constraint.
        got: usize,
        /// Parameters of the formula.
        params: usize,
    },
    /// A floor term's divisor is below 1.
    #[error("cells[{cell}].value.floors[{floor}]: denominator {den} (must be at least 1)")]
    FloorDenominator {
        /// Index of the cell.
        cell: usize,
        /// Index of the floor term in the cell's value.
        floor: usize,
        /// The divisor found.
        den: i64,
    },
    /// A floor term's coefficient list has the wrong length.
    #[error("cells[{cell}].value.floors[{floor}]: {got} coefficients for {params} parameters")]
    FloorArity {
        /// Index of the cell.
        cell: usize,
        /// Index of the floor term in the cell's value.
        floor: usize,
        /// Coefficients in the floor term.
        got: usize,
        /// Parameters of the formula.
        params: usize,
    },
    /// A monomial's coefficient has denominator 0.
    #[error("cells[{cell}].value.terms[{term}]: denominator 0")]
    TermDenominator {
        /// Index of the cell.
        cell: usize,
        /// Index of the monomial in the cell's value.
        term: usize,
    },
    /// A monomial names a symbol beyond the parameters and floor terms.
    #[error("cells[{cell}].value.terms[{term}]: symbol {symbol}, but there are only {symbols} parameters and floor terms")]
    Symbol {
        /// Index of the cell.
        cell: usize,
        /// Index of the monomial in the cell's value.
        term: usize,
        /// The symbol named.
        symbol: usize,
        /// Parameters and floor terms there are.
        symbols: usize,
    },
}

fn dot(coeffs: &[i64], p: &[i64], constant: i64) -> i128 {
    coeffs.iter().zip(p).map(|(a, b)| *a as i128 * *b as i128).sum::<i128>() + constant as i128
}

impl Constraint {
    /// `p_s = v` among `np` parameters.
    pub fn pin(np: usize, s: usize, v: i64) -> Constraint {
        let mut coeffs = vec![0; np];
        coeffs[s] = -1;
        Constraint { equality: true, coeffs, constant: v }
    }

    /// Whether the parameter values `p` satisfy the constraint.
    pub fn holds(&self, p: &[i64]) -> bool {
        let v = dot(&self.coeffs, p, self.constant);
        if self.equality {
            v == 0
        } else {
            v >= 0
        }
    }
}

impl Domain {
    /// Whether the parameter values `p` satisfy every constraint.
    pub fn contains(&self, p: &[i64]) -> bool {
        self.constraints.iter().all(|c| c.holds(p))
    }

    /// The same conditions within `context`, sorted: of inequalities with the same
    /// coefficients only the tightest, none the context implies that way.
    fn tightened(&self, context: &Domain) -> Domain {
        let mut tightest: std::collections::BTreeMap<(bool, Vec<i64>), i64> = std::collections::BTreeMap::new();
        for c in &self.constraints {
            let k = tightest.entry((c.equality, c.coeffs.clone())).or_insert(c.constant);
            if !c.equality {
                *k = (*k).min(c.constant);
            } else if *k != c.constant {
                // Two different equalities on the same form: keep both (no point holds).
                return Domain { constraints: self.constraints.clone() };
            }
        }
        let implied = |equality: bool, coeffs: &Vec<i64>, constant: i64| {
            !equality && context.constraints.iter().any(|k| !k.equality && &k.coeffs == coeffs && k.constant <= constant)
        };
        Domain {
            constraints: tightest
                .into_iter()
                .filter(|((equality, coeffs), constant)| !implied(*equality, coeffs, *constant))
                .map(|((equality, coeffs), constant)| Constraint { equality, coeffs, constant })
                .collect(),
        }
    }
}

impl Expr {
    /// `self + other` with their floors shared; `None` when a coefficient would leave 64
    /// bits.
    fn plus(&self, other: &Expr, np: usize) -> Option<Expr> {
        let mut floors = self.floors.clone();
        let remap: Vec<usize> = other.floors.iter().map(|f| match floors.iter().position(|g| g == f) {
            Some(i) => i,
            None => {
                floors.push(f.clone());
                floors.len() - 1
            }
        }).collect();
        let mut sum: std::collections::BTreeMap<Vec<(usize, u32)>, Rat> = std::collections::BTreeMap::new();
        let moved = other.terms.iter().map(|m| {
            let mut powers: Vec<(usize, u32)> = m.powers.iter().map(|&(s, k)| (if s < np { s } else { np + remap[s - np] }, k)).collect();
            powers.sort();
            (powers, m)
        });
        for (powers, m) in self.terms.iter().map(|m| (m.powers.clone(), m)).chain(moved) {
            let r = Rat::new(m.num as i128, m.den as i128);
            let e = sum.entry(powers).or_insert(Rat::zero());
            *e = e.checked_add(r)?;
        }
        Some(Expr { floors, terms: monomials(sum)? })
    }

    /// `None` when an intermediate value leaves 128 bits.
    fn eval_rat(&self, p: &[i64]) -> Option<Rat> {
        let floors: Vec<i128> = self.floors.iter().map(|f| dot(&f.coeffs, p, f.constant).div_euclid(f.den as i128)).collect();
        let np = p.len();
        let mut total = Rat::zero();
        for m in &self.terms {
            let mut v: i128 = 1;
            for &(s, k) in &m.powers {
                let x = if s < np { p[s] as i128 } else { floors[s - np] };
                v = v.checked_mul(x.checked_pow(k)?)?;
            }
            total = total.checked_add(Rat::new((m.num as i128).checked_mul(v)?, m.den as i128))?;
        }
        Some(total)
    }

    /// Checks what evaluation relies on: nonzero denominators, symbols that exist (the
    /// expression is cell `cell`'s value).
    fn validate(&self, params: usize, cell: usize) -> Result<(), FormulaError> {
        for (floor, f) in self.floors.iter().enumerate() {
            if f.den < 1 {
                return Err(FormulaError::FloorDenominator { cell, floor, den: f.den });
            }
            if f.coeffs.len() != params {
                return Err(FormulaError::FloorArity { cell, floor, got: f.coeffs.len(), params });
            }
        }
        let symbols = params + self.floors.len();
        for (term, m) in self.terms.iter().enumerate() {
            if m.den == 0 {
                return Err(FormulaError::TermDenominator { cell, term });
            }
            if let Some(&(symbol, _)) = m.powers.iter().find(|(s, _)| *s >= symbols) {
                return Err(FormulaError::Symbol { cell, term, symbol, symbols });
            }
        }
        Ok(())
    }
}

impl PwQp {
    /// The exact value at the parameter values `p` (in `params` order).
    pub fn eval(&self, p: &[i64]) -> Result<i64, EvalError> {
        if p.len() != self.params.len() {
            return Err(EvalError::Arity { expected: self.params.len(), got: p.len() });
        }
        if !self.context.contains(p) {
            return Err(EvalError::OutsideContext(format!("{} (derived for {})", self.point(p), self.context.show(&self.params))));
        }
        let mut total = Rat::zero();
        for c in &self.cells {
            if c.domain.contains(p) {
                let v = c.value.eval_rat(p).ok_or_else(|| EvalError::TooLarge(self.point(p)))?;
                total = total.checked_add(v).ok_or_else(|| EvalError::TooLarge(self.point(p)))?;
            }
        }
        if total.d != 1 {
            return Err(EvalError::NotInteger(self.point(p)));
        }
        Ok(total.n as i64)
    }

    /// The same function in fewer bytes (issue 17: formula files past 1 MB): in each
    /// cell, of parallel inequalities only the tightest is kept and those the context
    /// already implies are dropped; cells whose conditions are then the same are merged
    /// into one (their values added: `eval` adds the values of every cell that holds), and
    /// zero values dropped. A merge that would leave 64-bit coefficients is not made.
    /// Then what each cell's box of parameter values fixes is substituted
    /// (`cellbox.rs`): pinned parameters and constant floor terms become numbers,
    /// a parameter with a few values may be split into cells of one value each, cells
    /// with no point are dropped.
    pub fn simplify(&mut self) {
        let context = &self.context;
        let mut merged: Vec<Cell> = Vec::new();
        let mut index: std::collections::HashMap<Vec<Constraint>, usize> = std::collections::HashMap::new();
        for mut cell in std::mem::take(&mut self.cells) {
            cell.domain = cell.domain.tightened(context);
            match index.get(&cell.domain.constraints) {
                Some(&i) => match merged[i].value.plus(&cell.value, self.params.len()) {
                    Some(sum) => merged[i].value = sum,
                    None => merged.push(cell),
                },
                None => {
                    index.insert(cell.domain.constraints.clone(), merged.len());
                    merged.push(cell);
                }
            }
        }
        let np = self.params.len();
        self.cells = merged.into_iter().flat_map(|c| crate::cellbox::shrink(c, context, np)).filter(|c| !c.value.terms.is_empty()).collect();
    }

    /// Checks a formula read from outside (a JSON file) before it is evaluated: every
    /// denominator nonzero, every symbol and coefficient list matching the parameters.
    /// The error names the cell and term.
    pub fn validate(&self) -> Result<(), FormulaError> {
        let np = self.params.len();
        let constraints = self.context.constraints.iter().chain(self.cells.iter().flat_map(|c| &c.domain.constraints));
        if let Some(c) = constraints.into_iter().find(|c| c.coeffs.len() != np) {
            return Err(FormulaError::ConstraintArity { got: c.coeffs.len(), params: np });
        }
        for (i, c) in self.cells.iter().enumerate() {
            c.value.validate(np, i)?;
        }
        Ok(())
    }

    fn point(&self, p: &[i64]) -> String {
        self.params.iter().zip(p).map(|(n, v)| format!("{n}={v}")).collect::<Vec<_>>().join(",")
    }
}

/// Like monomials added up (powers → coefficient) as terms, zeros dropped; `None` when a
/// coefficient leaves 64 bits.
pub(crate) fn monomials(sum: std::collections::BTreeMap<Vec<(usize, u32)>, Rat>) -> Option<Vec<Monomial>> {
    sum.into_iter()
        .filter(|(_, r)| !r.is_zero())
        .map(|(powers, r)| Some(Monomial { num: i64::try_from(r.n).ok()?, den: i64::try_from(r.d).ok()?, powers }))
        .collect()
}

pub(crate) fn show_linear(coeffs: &[i64], constant: i64, names: &[String]) -> String {
    let mut s = String::new();
    for (c, n) in coeffs.iter().zip(names) {
        if *c == 0 {
            continue;
        }
        let mag = c.abs();
        let term = if mag == 1 { n.clone() } else { format!("{mag}*{n}") };
        if s.is_empty() {
            s = if *c < 0 { format!("-{term}") } else { term };
        } else {
            s += &format!(" {} {term}", if *c < 0 { "-" } else { "+" });
        }
    }
    if s.is_empty() {
        return constant.to_string();
    }
    if constant != 0 {
        s += &format!(" {} {}", if constant < 0 { "-" } else { "+" }, constant.abs());
    }
    s
}

impl Domain {
    /// Readable conditions, e.g. `X >= 1 and -X + Z >= 3`, `N <= 16`, `NI = 40`: an
    /// upper bound or an equality is written with positive coefficients, and an
    /// inequality that holds wherever the equalities fix its parameters is left out (a
    /// size preset gives `NI = 40`, not `NI >= 1 and -NI >= -40 and -NI = -40`).
    pub fn show(&self, names: &[String]) -> String {
        let fixed = self.fixed_values();
        // Checked sums: a domain read from a file may hold extreme numbers.
        let implied = |c: &Constraint| {
            let all_fixed = c.coeffs.iter().zip(&fixed).all(|(&a, v)| a == 0 || v.is_some());
            let value = c.coeffs.iter().zip(&fixed).try_fold(i128::from(c.constant), |sum, (&a, v)| sum.checked_add(i128::from(a) * i128::from(v.unwrap_or(0))));
            !c.equality && all_fixed && value.is_some_and(|v| v >= 0)
        };
        let mut shown: Vec<String> = Vec::new();
        for c in self.constraints.iter().filter(|c| !implied(c)) {
            let negative = c.coeffs.iter().all(|&a| a <= 0) || (c.equality && c.coeffs.iter().find(|&&a| a != 0).is_some_and(|&a| a < 0));
            let text = if negative {
                let coeffs: Vec<i64> = c.coeffs.iter().map(|&a| a.saturating_neg()).collect();
                format!("{} {} {}", show_linear(&coeffs, 0, names), if c.equality { "=" } else { "<=" }, c.constant)
            } else {
                format!("{} {} {}", show_linear(&c.coeffs, 0, names), if c.equality { "=" } else { ">=" }, -i128::from(c.constant))
            };
            if !shown.contains(&text) {
                shown.push(text);
            }
        }
        if shown.is_empty() {
            "true".into()
        } else {
            shown.join(" and ")
        }
    }

    /// Per parameter, its value where an equality of one parameter fixes it.
    fn fixed_values(&self) -> Vec<Option<i64>> {
        let n = self.constraints.first().map_or(0, |c| c.coeffs.len());
        let mut fixed = vec![None; n];
        for c in self.constraints.iter().filter(|c| c.equality) {
            let mut nonzero = c.coeffs.iter().enumerate().filter(|(_, &a)| a != 0);
            if let (Some((p, &a)), None) = (nonzero.next(), nonzero.next()) {
                // Checked: the domain may come from a file.
                if c.constant.checked_rem(a) == Some(0) && p < n {
                    fixed[p] = c.constant.checked_div(a).and_then(i64::checked_neg);
                }
            }
        }
        fixed
    }
}

impl Expr {
    /// Readable polynomial with floor terms.
    pub fn show(&self, names: &[String]) -> String {
        let np = names.len();
        let sym = |s: usize| if s < np { names[s].clone() } else { let f = &self.floors[s - np]; format!("floor(({})/{})", show_linear(&f.coeffs, f.constant, names), f.den) };
        let mut out = String::new();
        for m in &self.terms {
            let mag = if m.den == 1 { m.num.abs().to_string() } else { format!("{}/{}", m.num.abs(), m.den) };
            let factors: Vec<String> = m.powers.iter().map(|&(s, k)| if k == 1 { sym(s) } else { format!("{}^{k}", sym(s)) }).collect();
            let body = match (mag.as_str(), factors.is_empty()) {
                (_, true) => mag,
                ("1", false) => factors.join("*"),
                _ => format!("{mag}*{}", factors.join("*")),
            };
            if out.is_empty() {
                out = if m.num < 0 { format!("-{body}") } else { body };
            } else {
                out += &format!(" {} {body}", if m.num < 0 { "-" } else { "+" });
            }
        }
        if out.is_empty() {
            "0".into()
        } else {
            out
        }
    }
}

impl fmt::Display for PwQp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let live: Vec<&Cell> = self.cells.iter().filter(|c| !c.value.terms.is_empty()).collect();
        if live.is_empty() {
            return writeln!(f, "    0");
        }
        for c in live {
            writeln!(f, "    {}   if {}", c.value.show(&self.params), c.domain.show(&self.params))?;
        }
        Ok(())
    }
}
