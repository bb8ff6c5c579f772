//! What `kansoku inspect` shows of a program, as data: its functions, and one function's
//! blocks, loops, switch tables and instructions. Addresses are `0x…` strings, names
//! demangled, so the JSON a user reads is the table's text.

use std::fmt::Write as _;

use kansoku_core::text::{hex, Table};
use serde::Serialize;

use crate::program::{demangle, SymbolSource};
use crate::{FunctionCfg, FunctionSymbol, Program};

/// One function of the program's list.
#[derive(Serialize)]
pub struct FunctionRow {
    /// Demangled name.
    pub name: String,
    /// Entry address.
    pub address: String,
    /// Size in bytes.
    pub size: u64,
    /// Where the name came from.
    pub source: SymbolSource,
    /// The entry's source line, where debug lines say it.
    pub line: Option<String>,
}

/// One instruction of a function, placed in its block.
#[derive(Serialize)]
pub struct InstructionRow {
    /// Its block's index.
    pub block: u32,
    /// Its index within the block.
    pub offset_in_block: usize,
    /// Its index within the function.
    pub offset_in_function: usize,
    /// Its address.
    pub address: String,
    /// Its class (jump, call, return, …).
    pub kind: &'static str,
    /// A direct branch's or call's target, named by function and offset where known.
    pub target: Option<String>,
    /// Its disassembly.
    pub disassembly: String,
}

/// One basic block.
#[derive(Serialize)]
pub struct BlockRow {
    /// Its index.
    pub block: u32,
    /// First byte.
    pub start: String,
    /// One past the last byte.
    pub end: String,
    /// How many instructions it holds.
    pub instructions: usize,
    /// Indexes of the blocks control can pass to.
    pub successors: Vec<u32>,
}

/// One natural loop.
#[derive(Serialize)]
pub struct LoopRow {
    /// Its header block.
    pub header: u32,
    /// The blocks whose edges go back to the header.
    pub back_edge_tails: Vec<u32>,
    /// Every block of the loop.
    pub blocks: Vec<u32>,
}

/// One switch table followed.
#[derive(Serialize)]
pub struct JumpTableRow {
    /// The indirect `jmp`.
    pub jump: String,
    /// The table's address.
    pub table: String,
    /// Entries read.
    pub entries: u64,
    /// The distinct targets.
    pub targets: Vec<String>,
}

/// One function in full: `kansoku inspect PROGRAM --function NAME`.
#[derive(Serialize)]
pub struct FunctionDetail {
    /// Demangled name.
    pub name: String,
    /// Entry address.
    pub address: String,
    /// Size in bytes.
    pub size: u64,
    /// The entry's source line, where known.
    pub line: Option<String>,
    /// Its basic blocks.
    pub blocks: Vec<BlockRow>,
    /// Its natural loops.
    pub loops: Vec<LoopRow>,
    /// Switch tables followed (each `jmp` with its targets).
    pub jump_tables: Vec<JumpTableRow>,
    /// Indirect jumps whose targets could not be bounded: their blocks have no successors.
    pub unresolved_jumps: Vec<String>,
    /// Every instruction, block by block.
    pub instructions: Vec<InstructionRow>,
}

/// Every function of `program`, in its own order.
pub fn functions(program: &Program) -> Vec<FunctionRow> {
    program
        .functions()
        .iter()
        .map(|f| FunctionRow { name: demangle(&f.name), address: hex(f.address), size: f.size, source: f.source, line: program.source_line(f.address).map(|l| l.to_string()) })
        .collect()
}

/// `f` in full: its control-flow graph built, every instruction placed in its block.
pub fn function_detail(program: &Program, f: &FunctionSymbol) -> FunctionDetail {
    let cfg = FunctionCfg::build(program, f);
    let mut instructions = Vec::with_capacity(cfg.instructions.len());
    for b in &cfg.blocks {
        for k in 0..b.instruction_count {
            let i = &cfg.instructions[b.first_instruction + k];
            instructions.push(InstructionRow {
                block: b.index,
                offset_in_block: k,
                offset_in_function: b.first_instruction + k,
                address: hex(i.address),
                kind: i.kind.class(),
                target: i.target.map(|t| match program.function_at(t) {
                    Some(tf) if tf.address == t => demangle(&tf.name),
                    Some(tf) => format!("{}+0x{:x}", demangle(&tf.name), t - tf.address),
                    None => hex(t),
                }),
                disassembly: i.text.clone(),
            });
        }
    }
    FunctionDetail {
        name: demangle(&f.name),
        address: hex(f.address),
        size: f.size,
        line: program.source_line(f.address).map(|l| l.to_string()),
        blocks: cfg.blocks.iter().map(|b| BlockRow { block: b.index, start: hex(b.start), end: hex(b.end), instructions: b.instruction_count, successors: b.successors.clone() }).collect(),
        loops: cfg.loops.iter().map(|l| LoopRow { header: l.header, back_edge_tails: l.back_edge_tails.clone(), blocks: l.blocks.clone() }).collect(),
        jump_tables: cfg.jump_tables.iter().map(|t| JumpTableRow { jump: hex(t.jump), table: hex(t.table), entries: t.entries, targets: t.targets.iter().map(|&a| hex(a)).collect() }).collect(),
        unresolved_jumps: cfg.unresolved_jumps.iter().map(|&a| hex(a)).collect(),
        instructions,
    }
}

/// The program's functions as `kansoku inspect PROGRAM` prints them: a line on the
/// program and where its names came from, then one row per function.
pub fn functions_text(program: &Program, rows: &[FunctionRow]) -> String {
    let mut out = format!(
        "{}: {} functions, {}, build id {}\n",
        program.path().display(),
        rows.len(),
        if program.is_pie { "position-independent" } else { "fixed addresses" },
        program.build_id.as_deref().unwrap_or("none")
    );
    if let Some(debug) = &program.debug_file {
        let _ = writeln!(out, "(stripped: symbols and lines from the detached debug file {})", debug.display());
    } else if !program.has_static_symbols {
        out.push_str("(no static symbol table: names from dynamic symbols and PLT relocations, other functions from .eh_frame, named module+0xaddress)\n");
    }
    let mut t = Table::new(&["address", ">size", "source", "name"]);
    for r in rows {
        t.row(vec![r.address.clone(), r.size.to_string(), r.line.clone().unwrap_or_default(), r.name.clone()]);
    }
    out + &t.render()
}

impl FunctionDetail {
    /// The function as `kansoku inspect PROGRAM --function NAME` prints it: a summary
    /// line, every instruction in its block, then the blocks, loops and switch tables.
    pub fn text(&self) -> String {
        let mut out = format!(
            "{} at {} ({} bytes{}): {} instructions in {} basic blocks, {} loops{}\n",
            self.name,
            self.address,
            self.size,
            self.line.as_ref().map(|l| format!(", {l}")).unwrap_or_default(),
            self.instructions.len(),
            self.blocks.len(),
            self.loops.len(),
            self.indirect_jumps_note()
        );
        let mut t = Table::new(&[">BB", ">off/BB", ">off/fn", "address", "kind", "disassembly"]);
        for i in &self.instructions {
            let text = match &i.target {
                Some(target) => format!("{}  ; -> {target}", i.disassembly),
                None => i.disassembly.clone(),
            };
            t.row(vec![i.block.to_string(), i.offset_in_block.to_string(), i.offset_in_function.to_string(), i.address.clone(), i.kind.into(), text]);
        }
        out += &t.render();
        out.push('\n');
        for b in &self.blocks {
            let _ = writeln!(out, "BB{} {}..{} ({} instr) -> {:?}", b.block, b.start, b.end, b.instructions, b.successors);
        }
        for l in &self.loops {
            let _ = writeln!(out, "loop: header BB{}, back edges from {:?}, body {:?}", l.header, l.back_edge_tails, l.blocks);
        }
        for t in &self.jump_tables {
            let _ = writeln!(out, "jump table: jmp at {} reads {} entries at {} -> {} targets", t.jump, t.entries, t.table, t.targets.len());
        }
        for a in &self.unresolved_jumps {
            let _ = writeln!(out, "unresolved indirect jump at {a}: its targets are unknown, so its block has no successors");
        }
        out
    }

    /// `, 1 jump table followed, 2 indirect jumps unresolved`, or nothing when there are none.
    pub(crate) fn indirect_jumps_note(&self) -> String {
        let plural = |n: usize| if n == 1 { "" } else { "s" };
        let mut note = String::new();
        if !self.jump_tables.is_empty() {
            note += &format!(", {} jump table{} followed", self.jump_tables.len(), plural(self.jump_tables.len()));
        }
        if !self.unresolved_jumps.is_empty() {
            note += &format!(", {} indirect jump{} unresolved", self.unresolved_jumps.len(), plural(self.unresolved_jumps.len()));
        }
        note
    }
}
