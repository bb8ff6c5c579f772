//! The kernel model: parameters, arrays, loops, statements and array references, i.e. the
//! seed's program, loop and array information (figures 2, 6 and 7 of the seed).

use crate::affine::Affine;
use serde::{Deserialize, Serialize};

/// A line/column position in the kernel source (1-based).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Pos {
    /// Source line, counted from 1.
    pub line: u32,
    /// Source column, counted from 1.
    pub col: u32,
}

/// A declared array: element type and sizes (affine in the parameters).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Array {
    /// The array's name in the kernel source.
    pub name: String,
    /// The element type as written in the declaration (`double`, `int`, ...).
    pub elem_type: String,
    /// Size of one element in bytes, derived from `elem_type`.
    pub elem_size: u64,
    /// Extent of each dimension in elements, outermost first; affine in the kernel's parameters.
    pub dims: Vec<Affine>,
    /// Where the declaration is in the source.
    pub pos: Pos,
}

/// A `for` loop: `for (var = lower; var < upper; var += step)`; `upper` is exclusive.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Loop {
    /// The loop variable's name, as used in subscripts and bounds.
    pub var: String,
    /// First value of the variable (inclusive); affine in the parameters and enclosing loop variables.
    pub lower: Affine,
    /// Exclusive bound: the loop runs while `var < upper`; affine like `lower`.
    pub upper: Affine,
    /// Amount added to the variable after each iteration.
    pub step: i64,
    /// Nesting level: 0 for an outermost loop, 1 for a loop directly inside it, ...
    pub depth: usize,
    /// Where the `for` keyword is in the source.
    pub pos: Pos,
}

/// Which side of an assignment a reference is on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Side {
    /// The assigned element (the write).
    Left,
    /// An element read by the statement's expression.
    Right,
}

impl Side {
    /// The lowercase name used in JSON and in the `S3:right:1` selector (`left` or `right`).
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
    /// This reference's index in [`Kernel::refs`]; `P{id}` is its seed position name.
    pub id: usize,
    /// Index of the statement containing it, in [`Kernel::statements`].
    pub stmt: usize,
    /// Whether it is read (right) or written (left).
    pub side: Side,
    /// 1-based position among the references of that side, left to right.
    pub position: usize,
    /// Index of the referenced array in [`Kernel::arrays`].
    pub array: usize,
    /// One index expression per array dimension, outermost first; affine in the parameters and enclosing loop variables.
    pub subscripts: Vec<Affine>,
    /// Enclosing loops, outermost first (indices into `Kernel::loops`).
    pub loops: Vec<usize>,
    /// True for the left-hand side's write, false for a read.
    pub is_write: bool,
    /// Where the reference is in the source.
    pub pos: Pos,
}

/// An assignment statement, labelled `S1`, `S2`, ... (or by its own `label:`).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Statement {
    /// The label the statement is reported under (`S1`, ... or its own).
    pub label: String,
    /// The statement's source text, for the program table.
    pub text: String,
    /// Reference ids in execution order.
    pub refs: Vec<usize>,
    /// Where the statement starts in the source.
    pub pos: Pos,
    /// The conditions of the enclosing `if`s, each `g >= 0` (empty: always executed).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub guards: Vec<Affine>,
}

/// The loop-nest tree.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum Node {
    /// A `for` loop and the nodes it encloses, in source order.
    Loop {
        /// Index of the loop in [`Kernel::loops`].
        id: usize,
        /// The enclosed loops and statements, in source order.
        body: Vec<Node>,
    },
    /// An assignment statement, by its index in [`Kernel::statements`].
    Stmt(usize),
}

/// An array extent [`Kernel::with_fixed_extents`] could not fix: it still depends on a
/// variable no value was given for.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("array '{array}' has extent {extent}: give a value for {}", variables.join(", "))]
#[non_exhaustive]
pub struct ExtentError {
    /// The array's name.
    pub array: String,
    /// The extent as written (affine in the parameters).
    pub extent: String,
    /// The extent's variables, each of which needs a value.
    pub variables: Vec<String>,
}

/// A parsed kernel.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Kernel {
    /// Name of the kernel's source file, for reports.
    pub file: String,
    /// The kernel's full source text.
    pub source: String,
    /// Symbolic sizes (parameters such as `N`) that bounds and dimensions may use, in declaration order; their values are given at analysis time.
    pub params: Vec<String>,
    /// Declared arrays, in declaration order; references point here by index.
    pub arrays: Vec<Array>,
    /// All loops, in source order; references and [`Node::Loop`] point here by index.
    pub loops: Vec<Loop>,
    /// All statements, in source order.
    pub statements: Vec<Statement>,
    /// All array references, numbered in execution order within each statement (see [`Reference`]).
    pub refs: Vec<Reference>,
    /// The top-level loop nest(s) and statements, in source order.
    pub body: Vec<Node>,
}

impl Kernel {
    /// Index in [`Kernel::arrays`] of the array called `name`, if declared.
    pub(crate) fn array_index(&self, name: &str) -> Option<usize> {
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
    pub(crate) fn ref_text(&self, r: &Reference) -> String {
        let mut s = self.arrays[r.array].name.clone();
        for sub in &r.subscripts {
            s.push_str(&format!("[{sub}]"));
        }
        s
    }

    /// The same kernel with array extents evaluated at `values` (the arrays' declared
    /// capacity), loop bounds untouched: what the set method models when extents would
    /// otherwise depend on parameters. The error names an extent that still has a variable.
    pub fn with_fixed_extents(&self, values: &std::collections::BTreeMap<String, i64>) -> Result<Kernel, ExtentError> {
        let mut k = self.clone();
        for a in &mut k.arrays {
            for d in &mut a.dims {
                let v = d.eval(&|n| values.get(n).copied()).ok_or_else(|| ExtentError {
                    array: a.name.clone(),
                    extent: d.to_string(),
                    variables: d.vars().map(str::to_string).collect(),
                })?;
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
