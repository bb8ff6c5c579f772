//! `kansoku inspect PROGRAM [--function NAME] [--json]`

use std::path::PathBuf;

use anyhow::Result;
use kansoku_binary::program::demangle;
use kansoku_binary::{FunctionCfg, Program};
use serde::Serialize;

use crate::output::{hex, print_json, Table};

#[derive(clap::Args)]
pub struct Args {
    /// The ELF program or shared library to read.
    pub program: PathBuf,
    /// Show this function's basic blocks and instructions.
    #[arg(long)]
    pub function: Option<String>,
    /// Print JSON instead of a table.
    #[arg(long)]
    pub json: bool,
}

#[derive(Serialize)]
struct FunctionRow {
    name: String,
    address: String,
    size: u64,
    source: kansoku_binary::program::SymbolSource,
    line: Option<String>,
}

#[derive(Serialize)]
struct InstructionRow {
    block: u32,
    offset_in_block: usize,
    offset_in_function: usize,
    address: String,
    kind: &'static str,
    target: Option<String>,
    disassembly: String,
}

#[derive(Serialize)]
struct BlockRow {
    block: u32,
    start: String,
    end: String,
    instructions: usize,
    successors: Vec<u32>,
}

#[derive(Serialize)]
struct LoopRow {
    header: u32,
    back_edge_tails: Vec<u32>,
    blocks: Vec<u32>,
}

#[derive(Serialize)]
struct FunctionDetail {
    name: String,
    address: String,
    size: u64,
    line: Option<String>,
    blocks: Vec<BlockRow>,
    loops: Vec<LoopRow>,
    /// Switch tables followed (each `jmp` with its targets).
    jump_tables: Vec<JumpTableRow>,
    /// Indirect jumps whose targets could not be bounded: their blocks have no successors.
    unresolved_jumps: Vec<String>,
    instructions: Vec<InstructionRow>,
}

#[derive(Serialize)]
struct JumpTableRow {
    jump: String,
    table: String,
    entries: u64,
    targets: Vec<String>,
}

pub fn run(args: Args) -> Result<()> {
    let program = Program::open(&args.program)?;
    match &args.function {
        None => list_functions(&program, args.json),
        Some(name) => show_function(&program, name, args.json),
    }
}

fn list_functions(program: &Program, json: bool) -> Result<()> {
    let rows: Vec<FunctionRow> = program
        .functions()
        .iter()
        .map(|f| FunctionRow {
            name: demangle(&f.name),
            address: hex(f.address),
            size: f.size,
            source: f.source,
            line: program.source_line(f.address).map(|l| l.to_string()),
        })
        .collect();
    if json {
        return print_json(&serde_json::json!({
            "program": program.path(),
            "pie": program.is_pie,
            "build_id": program.build_id,
            "functions": rows,
        }));
    }
    println!(
        "{}: {} functions, {}, build id {}",
        program.path().display(),
        rows.len(),
        if program.is_pie { "position-independent" } else { "fixed addresses" },
        program.build_id.as_deref().unwrap_or("none")
    );
    if let Some(debug) = &program.debug_file {
        println!("(stripped: symbols and lines from the detached debug file {})", debug.display());
    } else if !program.has_static_symbols {
        println!("(no static symbol table: names from dynamic symbols and PLT relocations, other functions from .eh_frame, named module+0xaddress)");
    }
    let mut t = Table::new(&["address", ">size", "source", "name"]);
    for r in &rows {
        t.row(vec![r.address.clone(), r.size.to_string(), r.line.clone().unwrap_or_default(), r.name.clone()]);
    }
    t.print();
    Ok(())
}

fn show_function(program: &Program, name: &str, json: bool) -> Result<()> {
    let f = program.function_named(name)?;
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
    let detail = FunctionDetail {
        name: demangle(&f.name),
        address: hex(f.address),
        size: f.size,
        line: program.source_line(f.address).map(|l| l.to_string()),
        blocks: cfg
            .blocks
            .iter()
            .map(|b| BlockRow { block: b.index, start: hex(b.start), end: hex(b.end), instructions: b.instruction_count, successors: b.successors.clone() })
            .collect(),
        loops: cfg.loops.iter().map(|l| LoopRow { header: l.header, back_edge_tails: l.back_edge_tails.clone(), blocks: l.blocks.clone() }).collect(),
        jump_tables: cfg
            .jump_tables
            .iter()
            .map(|t| JumpTableRow { jump: hex(t.jump), table: hex(t.table), entries: t.entries, targets: t.targets.iter().map(|&a| hex(a)).collect() })
            .collect(),
        unresolved_jumps: cfg.unresolved_jumps.iter().map(|&a| hex(a)).collect(),
        instructions,
    };
    if json {
        return print_json(&detail);
    }
    println!(
        "{} at {} ({} bytes{}): {} instructions in {} basic blocks, {} loops{}",
        detail.name,
        detail.address,
        detail.size,
        detail.line.as_ref().map(|l| format!(", {l}")).unwrap_or_default(),
        detail.instructions.len(),
        detail.blocks.len(),
        detail.loops.len(),
        indirect_jumps_note(&detail)
    );
    let mut t = Table::new(&[">BB", ">off/BB", ">off/fn", "address", "kind", "disassembly"]);
    for i in &detail.instructions {
        let text = match &i.target {
            Some(target) => format!("{}  ; -> {target}", i.disassembly),
            None => i.disassembly.clone(),
        };
        t.row(vec![i.block.to_string(), i.offset_in_block.to_string(), i.offset_in_function.to_string(), i.address.clone(), i.kind.into(), text]);
    }
    t.print();
    println!();
    for b in &detail.blocks {
        println!("BB{} {}..{} ({} instr) -> {:?}", b.block, b.start, b.end, b.instructions, b.successors);
    }
    for l in &detail.loops {
        println!("loop: header BB{}, back edges from {:?}, body {:?}", l.header, l.back_edge_tails, l.blocks);
    }
    for t in &detail.jump_tables {
        println!("jump table: jmp at {} reads {} entries at {} -> {} targets", t.jump, t.entries, t.table, t.targets.len());
    }
    for a in &detail.unresolved_jumps {
        println!("unresolved indirect jump at {a}: its targets are unknown, so its block has no successors");
    }
    Ok(())
}

/// `, 1 jump table followed, 2 indirect jumps unresolved`, or nothing when there are none.
fn indirect_jumps_note(d: &FunctionDetail) -> String {
    let mut parts = Vec::new();
    if !d.jump_tables.is_empty() {
        parts.push(format!("{} jump table{} followed", d.jump_tables.len(), if d.jump_tables.len() == 1 { "" } else { "s" }));
    }
    if !d.unresolved_jumps.is_empty() {
        parts.push(format!("{} indirect jump{} unresolved", d.unresolved_jumps.len(), if d.unresolved_jumps.len() == 1 { "" } else { "s" }));
    }
    parts.iter().map(|p| format!(", {p}")).collect()
}
