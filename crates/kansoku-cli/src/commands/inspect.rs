//! `kansoku inspect PROGRAM [--function NAME] [--json]`

use std::path::PathBuf;

use anyhow::Result;
use kansoku_binary::{listing, Program};

use crate::output::{emit, print_json};

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

pub fn run(args: Args) -> Result<()> {
    let program = Program::open(&args.program)?;
    match &args.function {
        None => list_functions(&program, args.json),
        Some(name) => show_function(&program, name, args.json),
    }
}

fn list_functions(program: &Program, json: bool) -> Result<()> {
    let rows = listing::functions(program);
    if json {
        return print_json(&serde_json::json!({
            "program": program.path(),
            "pie": program.is_pie,
            "build_id": program.build_id,
            "functions": rows,
        }));
    }
    emit(&listing::functions_text(program, &rows));
    Ok(())
}

fn show_function(program: &Program, name: &str, json: bool) -> Result<()> {
    let f = program.function_named(name)?;
    let detail = listing::function_detail(program, f);
    if json {
        return print_json(&detail);
    }
    emit(&detail.text());
    Ok(())
}
