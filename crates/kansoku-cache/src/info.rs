//! The seed's information tables for a kernel: program, data, position, cache, loop and
//! array information (figures 2–7), as data for printing or JSON.

use crate::config::{resolve_layout, CacheConfig, DataInfo, LayoutSpec, ParamValues};
use crate::error::Result;
use crate::kernel::Kernel;
use serde::Serialize;

#[derive(Clone, Debug, Serialize)]
pub struct ProgramLine {
    pub label: String,
    pub text: String,
    pub line: u32,
    /// The enclosing ifs' conditions, as `g >= 0` in the kernel's loop variables.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub guards: Vec<String>,
}

#[derive(Clone, Debug, Serialize)]
pub struct ArrayDecl {
    pub name: String,
    pub elem_type: String,
    pub elem_size: u64,
    pub sizes: Vec<String>,
}

#[derive(Clone, Debug, Serialize)]
pub struct LoopInfo {
    pub var: String,
    pub lower: String,
    /// Exclusive upper bound.
    pub upper: String,
    pub step: i64,
    pub depth: usize,
    pub line: u32,
}

#[derive(Clone, Debug, Serialize)]
pub struct ArrayRefInfo {
    /// `P0`, `P1`, ...
    pub position_number: String,
    pub statement: String,
    pub side: String,
    pub position: usize,
    pub array: String,
    pub subscripts: Vec<String>,
    pub loop_vars: Vec<String>,
    pub is_write: bool,
    pub line: u32,
    pub col: u32,
}

#[derive(Clone, Debug, Serialize)]
pub struct PositionInfo {
    pub statement: String,
    pub side: String,
    pub position: usize,
    pub reference: String,
}

/// All tables of the seed for one kernel.
#[derive(Clone, Debug, Serialize)]
pub struct KernelInfo {
    pub file: String,
    pub params: Vec<String>,
    pub program: Vec<ProgramLine>,
    pub arrays: Vec<ArrayDecl>,
    /// Concrete layout; present when parameter values were given (or none are needed).
    pub data: Option<Vec<DataInfo>>,
    pub position: Option<PositionInfo>,
    pub cache: CacheConfig,
    /// Where the arrays are ([`LayoutSpec::describe`]).
    pub layout: String,
    pub loops: Vec<LoopInfo>,
    pub references: Vec<ArrayRefInfo>,
}

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
