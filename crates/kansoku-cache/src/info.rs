//! The seed's information tables for a kernel: program, data, position, cache, loop and
//! array information (figures 2–7), as data for printing or JSON.

use crate::config::{resolve_layout, CacheConfig, DataInfo, LayoutSpec, ParamValues};
use crate::error::Result;
use crate::kernel::Kernel;
use serde::Serialize;

#[derive(Clone, Debug, Serialize)]
/// One statement of the program table (seed figure 2).
pub struct ProgramLine {
    /// The statement's label (`S1`, ...).
    pub label: String,
    /// The statement's source text.
    pub text: String,
    /// Source line of the statement, counted from 1.
    pub line: u32,
    /// The enclosing ifs' conditions, as `g >= 0` in the kernel's loop variables.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub guards: Vec<String>,
}

#[derive(Clone, Debug, Serialize)]
/// One declared array of the data table (seed figure 3), as declared (sizes still symbolic).
pub struct ArrayDecl {
    /// The array's name in the source.
    pub name: String,
    /// Element type as written (`double`, ...).
    pub elem_type: String,
    /// Size of one element in bytes.
    pub elem_size: u64,
    /// Extent of each dimension in elements, outermost first, as expressions in the parameters.
    pub sizes: Vec<String>,
}

#[derive(Clone, Debug, Serialize)]
/// One loop of the loop table (seed figure 6).
pub struct LoopInfo {
    /// The loop variable's name.
    pub var: String,
    /// First value of the variable (inclusive), as an expression.
    pub lower: String,
    /// Exclusive upper bound.
    pub upper: String,
    /// Amount added to the variable after each iteration.
    pub step: i64,
    /// Nesting level: 0 for an outermost loop.
    pub depth: usize,
    /// Source line of the `for`, counted from 1.
    pub line: u32,
}

#[derive(Clone, Debug, Serialize)]
/// One array reference of the array table (seed figure 7).
pub struct ArrayRefInfo {
    /// `P0`, `P1`, ...
    pub position_number: String,
    /// Label of the statement containing the reference.
    pub statement: String,
    /// `left` (the write) or `right` (a read).
    pub side: String,
    /// 1-based position among the references of that side, left to right.
    pub position: usize,
    /// Name of the referenced array.
    pub array: String,
    /// One index expression per dimension, outermost first.
    pub subscripts: Vec<String>,
    /// The enclosing loops' variables, outermost first.
    pub loop_vars: Vec<String>,
    /// True for the left-hand side's write, false for a read.
    pub is_write: bool,
    /// Source line of the reference, counted from 1.
    pub line: u32,
    /// Source column of the reference, counted from 1.
    pub col: u32,
}

#[derive(Clone, Debug, Serialize)]
/// The reference selected for analysis (seed figure 4), when one was given.
pub struct PositionInfo {
    /// Label of the statement containing it.
    pub statement: String,
    /// `left` (the write) or `right` (a read).
    pub side: String,
    /// 1-based position among the references of that side.
    pub position: usize,
    /// Its seed position name, `P0`, `P1`, ...
    pub reference: String,
}

/// All tables of the seed for one kernel.
#[derive(Clone, Debug, Serialize)]
pub struct KernelInfo {
    /// Name of the kernel's source file.
    pub file: String,
    /// The kernel's symbolic size parameters, in declaration order.
    pub params: Vec<String>,
    /// The program table: one line per statement.
    pub program: Vec<ProgramLine>,
    /// The data table as declared: one entry per array, in declaration order.
    pub arrays: Vec<ArrayDecl>,
    /// Concrete layout; present when parameter values were given (or none are needed).
    pub data: Option<Vec<DataInfo>>,
    /// The selected reference, if a position was given.
    pub position: Option<PositionInfo>,
    /// The cache the analysis models: associativity, line size and set count (seed figure 5).
    pub cache: CacheConfig,
    /// Where the arrays are ([`LayoutSpec::describe`]).
    pub layout: String,
    /// The loop table, in source order.
    pub loops: Vec<LoopInfo>,
    /// The array table: every reference, in execution order.
    pub references: Vec<ArrayRefInfo>,
}

/// Builds the seed's tables for kernel `k`: `params` gives the parameter values that make the layout concrete
/// (without them, the data table's start addresses are left out unless every size is constant); `position`,
/// an index into [`Kernel::refs`] (must be in range), selects the reference shown in the position table.
///
/// Errors when the layout cannot be resolved with the given values (e.g. a parameter is missing).
pub fn kernel_info(k: &Kernel, cache: CacheConfig, layout: &LayoutSpec, params: Option<&ParamValues>, position: Option<usize>) -> Result<KernelInfo> {
    let empty = ParamValues::new();
    let data = match params {
        Some(p) => Some(resolve_layout(k, layout, p)?),
        None if k.arrays.iter().all(|a| a.dims.iter().all(|d| d.is_constant())) => Some(resolve_layout(k, layout, &empty)?),
        None => None,
    };
    Ok(KernelInfo {
        file: k.file.clone(),
        params: k.params.clone(),
        program: k.statements.iter().map(|s| ProgramLine { label: s.label.clone(), text: s.text.clone(), line: s.pos.line, guards: s.guards.iter().map(|g| format!("{g} >= 0")).collect() }).collect(),
        arrays: k
            .arrays
            .iter()
            .map(|a| ArrayDecl { name: a.name.clone(), elem_type: a.elem_type.clone(), elem_size: a.elem_size, sizes: a.dims.iter().map(|d| d.to_string()).collect() })
            .collect(),
        data,
        layout: layout.describe(),
        position: position.map(|p| {
            let r = &k.refs[p];
            PositionInfo { statement: k.statements[r.stmt].label.clone(), side: r.side.as_str().into(), position: r.position, reference: format!("P{p}") }
        }),
        cache,
        loops: k
            .loops
            .iter()
            .map(|l| LoopInfo { var: l.var.clone(), lower: l.lower.to_string(), upper: l.upper.to_string(), step: l.step, depth: l.depth, line: l.pos.line })
            .collect(),
        references: k
            .refs
            .iter()
            .map(|r| ArrayRefInfo {
                position_number: format!("P{}", r.id),
                statement: k.statements[r.stmt].label.clone(),
                side: r.side.as_str().into(),
                position: r.position,
                array: k.arrays[r.array].name.clone(),
                subscripts: r.subscripts.iter().map(|s| s.to_string()).collect(),
                loop_vars: r.loops.iter().map(|&l| k.loops[l].var.clone()).collect(),
                is_write: r.is_write,
                line: r.pos.line,
                col: r.pos.col,
            })
            .collect(),
    })
}

/// The seed's tables as text (`kansoku cache info`).
impl std::fmt::Display for KernelInfo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(f, "Program information ({}), parameters: {}", self.file, if self.params.is_empty() { "none".into() } else { self.params.join(", ") })?;
        for s in &self.program {
            let guard = if s.guards.is_empty() { String::new() } else { format!("   (when {})", s.guards.join(" and ")) };
            writeln!(f, "  {:<4} line {:<3} {}{guard}", s.label, s.line, s.text.split_whitespace().collect::<Vec<_>>().join(" "))?;
        }
        writeln!(f, "\nData information")?;
        writeln!(f, "  {:<8} {:<8} {:>9} {:>12} {:>14}", "array", "type", "elem size", "start", "elements")?;
        for (i, d) in self.arrays.iter().enumerate() {
            let (start, elems) = match &self.data {
                Some(data) => (data[i].start.to_string(), data[i].elems.to_string()),
                None => ("(give --param)".into(), d.sizes.join(" x ")),
            };
            writeln!(f, "  {:<8} {:<8} {:>9} {:>12} {:>14}", d.name, d.elem_type, d.elem_size, start, elems)?;
        }
        if let Some(p) = &self.position {
            writeln!(f, "\nPosition information\n  statement {}  side {}  position {}  ({})", p.statement, p.side, p.position, p.reference)?;
        }
        writeln!(f, "  layout: {}", self.layout)?;
        writeln!(f, "\nCache information\n  associativity A = {}  line size B = {}  sets S = {}  ({} bytes)", self.cache.assoc, self.cache.line, self.cache.sets, self.cache.size_bytes())?;
        writeln!(f, "\nLoop information")?;
        for l in &self.loops {
            let step = if l.step == 1 { String::new() } else { format!(" step {}", l.step) };
            writeln!(f, "  {}{} from {} while < {}{}   (line {})", "  ".repeat(l.depth), l.var, l.lower, l.upper, step, l.line)?;
        }
        writeln!(f, "\nArray information")?;
        writeln!(f, "  {:<4} {:<5} {:<6} {:>3}  {:<6} {:<20} loop variables", "pos", "stmt", "side", "n", "array", "subscripts")?;
        for r in &self.references {
            writeln!(f, "  {:<4} {:<5} {:<6} {:>3}  {:<6} {:<20} {}", r.position_number, r.statement, r.side, r.position, r.array, r.subscripts.join(", "), r.loop_vars.join(", "))?;
        }
        Ok(())
    }
}
