//! `kansoku demo`: builds the bundled examples, runs every stage that exists, writes
//! everything into `kansoku-demo/` and prints a short summary. Each room adds a stage.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use kansoku_probe::ExactTraceOptions;

use super::trace::record_exact;

#[derive(clap::Args)]
pub struct Args {
    /// Where to write the demo's files.
    #[arg(long, default_value = "kansoku-demo")]
    pub dir: PathBuf,
}

type Stage = (&'static str, fn(&Path) -> Result<String>);

const STAGES: &[Stage] = &[
    ("exact trace (foundation)", exact_trace_stage),
    ("trace-call optimiser (seed 002)", super::tp::demo_stage),
    ("cache-miss formulas (seed 004)", super::cache::demo_stage),
    ("path profiling (seed 003)", super::paths::demo_stage),
    ("software monitor, sampling (seed 001)", super::monitor::demo_stage),
    ("software monitor, event timing (seed 001)", super::monitor::events_demo_stage),
    ("program waveform of seed000 (seed 001)", super::wave::demo_stage),
    ("instruction traces from samples (seed 000)", super::reconstruct::demo_stage),
];

pub fn run(args: Args) -> Result<()> {
    std::fs::create_dir_all(&args.dir).with_context(|| format!("creating {}", args.dir.display()))?;
    let mut summary = String::from("kansoku demo\n");
    let mut failed = Vec::new();
    for (name, stage) in STAGES {
        eprintln!("kansoku demo: {name} ...");
        let text = match stage(&args.dir) {
            Ok(text) => text,
            Err(e) => {
                failed.push(*name);
                format!("FAILED: {e:#}")
            }
        };
        let block = format!("\n== {name}\n{}\n", text.trim_end());
        print!("{block}");
        summary.push_str(&block);
    }
    let path = args.dir.join("summary.txt");
    std::fs::write(&path, &summary).with_context(|| format!("writing {}", path.display()))?;
    println!("\nEverything is in {}/ (summary in {}).", args.dir.display(), path.display());
    if !failed.is_empty() {
        anyhow::bail!("demo stage(s) failed: {}", failed.join(", "));
    }
    Ok(())
}

/// Builds the seed-000 example, lists func_M's blocks, and records the exact trace of ten
/// iterations of func_M — the ground truth the sampling methods are judged against.
fn exact_trace_stage(dir: &Path) -> Result<String> {
    let bin = dir.join("bin");
    let mut built = Vec::new();
    for e in kansoku_examples::EXAMPLES {
        kansoku_examples::build(e.name, &bin)?;
        built.push(e.name);
    }
    let program = bin.join("seed000");
    let p = kansoku_binary::Program::open(&program)?;
    let func_m = kansoku_binary::FunctionCfg::build(&p, p.function_named("func_M")?);
    let output = dir.join("seed000-exact.ksk");
    let options = ExactTraceOptions {
        engine: kansoku_probe::Engine::best().0,
        program: program.clone(),
        args: vec!["100".into()],
        marker: Some("func_M".into()),
        iterations: Some(10),
        max_instructions: None,
        data: false,
    };
    let r = record_exact(&options, &output)?;
    let per_iteration = r.instructions / r.marker_hits.max(1);
    Ok(format!(
        "built {} example programs into {}\n\
         func_M: {} instructions in {} basic blocks\n\
         exact trace of 10 iterations of func_M on the {} engine: {} instructions ({} per iteration) in {} ({:.2} s with the program's start and end)\n\
         look at it: kansoku show {} --limit 50",
        built.len(),
        bin.display(),
        func_m.instructions.len(),
        func_m.blocks.len(),
        r.engine,
        r.instructions,
        per_iteration,
        output.display(),
        r.seconds,
        output.display()
    ))
}
