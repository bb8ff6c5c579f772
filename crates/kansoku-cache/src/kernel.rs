//! The kernel model: parameters, arrays, loops, statements and array references, i.e. the
//! seed's program, loop and array information (figures 2, 6 and 7 of the seed).

use crate::affine::Affine;
use serde::{Deserialize, Serialize};

/// A line/column position in the kernel source (1-based).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Pos {
    pub line: u32,
    pub col: u32,
}

/// A declared array: element type and sizes (affine in the parameters).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Array {
    pub name: String,
    pub elem_type: String,
    pub elem_size: u64,
    pub dims: Vec<Affine>,
    pub pos: Pos,
}

/// A `for` loop: `for (var = lower; var < upper; var += step)`; `upper` is exclusive.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Loop {
    pub var: String,
    pub lower: Affine,
    pub upper: Affine,
    pub step: i64,
    pub depth: usize,
    pub pos: Pos,
}

/// Which side of an assignment a reference is on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Side {
    Left,
    Right,
}

impl Side {
    pub fn as_str(self) -> &'static str {
        match self {
            Side::Left => "left",
            Side::Right => "right",
        }
    }
}

/// One array reference in the source: the seed's "position" P0, P1, ...
/// References are numbered in execution order: right-hand side reads left to right,
/// then the write of the left-hand side.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Reference {
    pub id: usize,
    pub stmt: usize,
    pub side: Side,
    /// 1-based position among the references of that side, left to right.
    pub position: usize,
    pub array: usize,
    pub subscripts: Vec<Affine>,
    /// Enclosing loops, outermost first (indices into `Kernel::loops`).
    pub loops: Vec<usize>,
    pub is_write: bool,
    pub pos: Pos,
}

/// An assignment statement, labelled `S1`, `S2`, ... (or by its own `label:`).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Statement {
    pub label: String,
    pub text: String,
    /// Reference ids in execution order.
    pub refs: Vec<usize>,
    pub pos: Pos,
    /// The conditions of the enclosing `if`s, each `g >= 0` (empty: always executed).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub guards: Vec<Affine>,
}

/// The loop-nest tree.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum Node {
    Loop { id: usize, body: Vec<Node> },
    Stmt(usize),
}

/// A parsed kernel.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Kernel {
    pub file: String,
    pub source: String,
    pub params: Vec<String>,
    pub arrays: Vec<Array>,
    pub loops: Vec<Loop>,
    pub statements: Vec<Statement>,
    pub refs: Vec<Reference>,
    pub body: Vec<Node>,
}

impl Kernel {
    pub fn array_index(&self, name: &str) -> Option<usize> {
        self.arrays.iter().position(|a| a.name == name)
    }

    /// Finds a reference by `P3`, `3` or `S3:right:1` (statement label, side, position).
    pub fn find_ref(&self, sel: &str) -> Option<usize> {
        let s = sel.trim();
        if let Some(n) = s.strip_prefix('P').or(Some(s)).and_then(|t| t.parse::<usize>().ok()) {
            return (n < self.refs.len()).then_some(n);
        }
        let parts: Vec<&str> = s.split(':').collect();
        if parts.len() != 3 {
            return None;
        }
        let stmt = self.statements.iter().position(|st| st.label.eq_ignore_ascii_case(parts[0]))?;
        let side = match parts[1].to_ascii_lowercase().as_str() {
            "left" | "l" | "lhs" => Side::Left,
            "right" | "r" | "rhs" => Side::Right,
            _ => return None,
        };
        let position: usize = parts[2].parse().ok()?;
        self.refs.iter().position(|r| r.stmt == stmt && r.side == side && r.position == position)
    }

    /// Human-readable `A[i][k]`.
    pub fn ref_text(&self, r: &Reference) -> String {
        let mut s = self.arrays[r.array].name.clone();
        for sub in &r.subscripts {
            s.push_str(&format!("[{sub}]"));
        }
        s
    }

    /// The same kernel with array extents evaluated at `values` (the arrays' declared
    /// capacity), loop bounds untouched: what the set method models when extents would
    /// otherwise depend on parameters. `None` names an extent that still has a variable.
    pub fn with_fixed_extents(&self, values: &std::collections::BTreeMap<String, i64>) -> Result<Kernel, String> {
        let mut k = self.clone();
        for a in &mut k.arrays {
            for d in &mut a.dims {
                let v = d.eval(&|n| values.get(n).copied()).ok_or_else(|| format!("array '{}' has extent {d}: give a value for {}", a.name, d.vars().collect::<Vec<_>>().join(", ")))?;
                *d = Affine::constant(v);
            }
        }
        Ok(k)
    }

    /// Maximum loop depth of the nest.
    pub fn max_depth(&self) -> usize {
        self.loops.iter().map(|l| l.depth + 1).max().unwrap_or(0)
    }
}
