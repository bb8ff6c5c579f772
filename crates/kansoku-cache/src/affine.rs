//! Affine expressions over named integer variables (parameters and loop variables).

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt;

/// `constant + Σ coeff·var`, with integer coefficients.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Affine {
    /// The term without a variable.
    pub constant: i64,
    /// Coefficient of each variable, by name; variables with coefficient 0 are left out.
    pub coeffs: BTreeMap<String, i64>,
}

impl Affine {
    /// The expression `c`, using no variable.
    pub fn constant(c: i64) -> Self {
        Affine { constant: c, coeffs: BTreeMap::new() }
    }
    /// The expression `1·name`.
    pub fn var(name: &str) -> Self {
        let mut coeffs = BTreeMap::new();
        coeffs.insert(name.to_string(), 1);
        Affine { constant: 0, coeffs }
    }
    /// Whether the expression uses no variable (its value is `constant`).
    pub(crate) fn is_constant(&self) -> bool {
        self.coeffs.is_empty()
    }
    /// The sum `self + other`; terms that cancel are dropped.
    pub fn add(&self, other: &Affine) -> Affine {
        let mut r = self.clone();
        r.constant += other.constant;
        for (v, c) in &other.coeffs {
            *r.coeffs.entry(v.clone()).or_insert(0) += c;
        }
        r.coeffs.retain(|_, c| *c != 0);
        r
    }
    /// The product `k·self` (`k = 0` gives the constant 0).
    pub fn scale(&self, k: i64) -> Affine {
        if k == 0 {
            return Affine::constant(0);
        }
        Affine {
            constant: self.constant * k,
            coeffs: self.coeffs.iter().map(|(v, c)| (v.clone(), c * k)).collect(),
        }
    }
    /// The difference `self - other`.
    pub fn sub(&self, other: &Affine) -> Affine {
        self.add(&other.scale(-1))
    }
    /// Variables this expression uses.
    pub fn vars(&self) -> impl Iterator<Item = &str> {
        self.coeffs.keys().map(|s| s.as_str())
    }
    /// Evaluates with a lookup for variable values; `None` when a variable is unknown.
    pub fn eval(&self, lookup: &dyn Fn(&str) -> Option<i64>) -> Option<i64> {
        let mut v = self.constant;
        for (name, c) in &self.coeffs {
            v += c * lookup(name)?;
        }
        Some(v)
    }
}

impl fmt::Display for Affine {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut first = true;
        for (v, &c) in &self.coeffs {
            let (sign, mag) = if c < 0 { ("-", -c) } else { ("+", c) };
            if first {
                if c < 0 {
                    write!(f, "-")?;
                }
            } else {
                write!(f, " {sign} ")?;
            }
            if mag == 1 {
                write!(f, "{v}")?;
            } else {
                write!(f, "{mag}*{v}")?;
            }
            first = false;
        }
        if first {
            write!(f, "{}", self.constant)?;
        } else if self.constant != 0 {
            let (sign, mag) = if self.constant < 0 { ("-", -self.constant) } else { ("+", self.constant) };
            write!(f, " {sign} {mag}")?;
        }
        Ok(())
    }
}
