//! `kansoku demo`: builds the bundled examples, runs every stage that exists, writes
//! everything into `kansoku-demo/` and prints a short summary. Each room adds a stage, and
//! the commands that do its work to [`RECIPES`], which the demo writes as the directory's
//! manifest: `kansoku report` shows each file with the command that made it. The demo ends
//! by writing that page (`kansoku-demo/index.html`).

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
    ("instruction traces from samples (seed 000)", super::reconstruct_demo::demo_stage),
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
    write_manifest(&args.dir, &failed)?;
    println!("\nEverything is in {}/ (summary in {}).", args.dir.display(), path.display());
    // A demo whose report cannot be written still did its work: say so, keep the status.
    match super::report::write_report(&args.dir, None) {
        Ok(w) => println!("{}", super::report::written_line(&w)),
        Err(e) => eprintln!("kansoku demo: the report page was not written: {e:#}"),
    }
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

/// For each stage (by its name in [`STAGES`]), command lines that do the same work as the
/// stage (which calls the same code directly) and the files it writes; `{d}` is the demo's
/// directory. The first step naming a file is the one the report shows for it.
const RECIPES: &[(&str, &[&str], &[&str])] = &[
    ("the demo itself", &["kansoku demo --dir {d}"], &["summary.txt", "index.html"]),
    (
        "exact trace (foundation)",
        &["kansoku inspect {d}/bin/seed000 --function func_M", "kansoku trace exact --marker func_M --iterations 10 -o {d}/seed000-exact.ksk -- {d}/bin/seed000 100"],
        &["bin/", "seed000-exact.ksk"],
    ),
    (
        "trace-call optimiser (seed 002)",
        &[
            "clang --target=wasm32 (kansoku's bundled matrix.c, compiled as the tp tests do) -o {d}/tp-matrix.wasm",
            "kansoku tp optimize {d}/tp-matrix.wasm -o {d}/tp-matrix.opt.wasm --xlat-out {d}/tp-matrix.xlat.json --report > {d}/tp-optimize.txt",
            "kansoku tp run {d}/tp-matrix.wasm -o {d}/tp-matrix.ktrace -- 1",
            "kansoku tp run {d}/tp-matrix.opt.wasm -o {d}/tp-matrix.opt.ktrace -- 1",
            "kansoku tp decode {d}/tp-matrix.opt.ktrace --module {d}/tp-matrix.opt.wasm --timestamps subindex > {d}/tp-matrix.decoded.txt",
            "kansoku tp check {d}/tp-matrix.wasm {d}/tp-matrix.opt.wasm --timing 3 --json -- 1 > {d}/tp-check.json",
        ],
        &["tp-*"],
    ),
    (
        "cache-miss formulas (seed 004)",
        &[
            "kansoku cache model {d}/seed.k --cache assoc=2,line=32,sets=4 --base A=0,B=800,C=1600 --method interpolate -o {d}/seed-formulas.json",
            "kansoku cache simulate {d}/seed.k --cache assoc=2,line=32,sets=4 --base A=0,B=800,C=1600 --param X=10,Y=10,Z=10 --json > {d}/seed-simulation.json",
            "kansoku cache model {d}/seed.k --cache assoc=2,line=32,sets=4 --base A=0,B=800,C=1600 --method sets -o {d}/seed-set-formulas.json",
        ],
        &["seed.k", "seed-formulas.json", "seed-simulation.json", "seed-set-formulas.json"],
    ),
    ("path profiling (seed 003)", &["kansoku paths --function walk --top 10 --cfg walk --svg {d}/paths-walk.svg -o {d}/paths.csv -- {d}/bin/paths 1000 10"], &["paths.csv", "paths-walk.svg"]),
    ("software monitor, sampling (seed 001)", &["kansoku monitor --interval 50 --json --svg {d}/monitor -- {d}/bin/workload cpu 1 1"], &["monitor/"]),
    (
        "software monitor, event timing (seed 001)",
        &["kansoku monitor events --probe spin --probe leaf --probe recurse --mechanism trap --calibrate -- {d}/bin/events 50 200000", "(the same with --mechanism uprobe and --mechanism agent)"],
        &[],
    ),
    (
        "program waveform of seed000 (seed 001)",
        &["kansoku wave --exact --marker func_M --max-instructions 20000 --svg {d}/wave-seed000.svg -- {d}/bin/seed000 100000"],
        &["wave-seed000.svg", "wave-seed000-acf.svg"],
    ),
    (
        "instruction traces from samples (seed 000)",
        &[
            "kansoku trace exact --marker func_M --iterations 200 -o {d}/seed000-200.ksk -- {d}/bin/seed000 1000",
            "kansoku sample --period 7 {d}/seed000-200.ksk -o {d}/seed000-p7.ksk (and --period 101 -o {d}/seed000-p101.ksk)",
            "kansoku reconstruct {d}/seed000-p7.ksk --solver patent --likelihood seed --exact {d}/seed000-200.ksk -o {d}/seed000-p7-patent-seed.trace (and --solver exact, phase; p101 with --likelihood seed and cfg)",
            "kansoku compare {d}/seed000-p101-patent-cfg.trace {d}/seed000-200.ksk --svg FILE (the demo's timeline draws both p101 reconstructions under the exact iteration)",
            "kansoku record --period 100003 --marker func_M -o {d}/seed000-recorded.ksk -- {d}/bin/seed000 20000",
            "kansoku reconstruct {d}/seed000-recorded.ksk --solver patent --sequences 2000 --exact {d}/seed000-200.ksk -o {d}/seed000-recorded-patent.trace",
            "kansoku record --time-period 20000 --marker spin --marker-by agent -o {d}/events-recorded.ksk -- {d}/bin/events 100000 0",
        ],
        &["seed000-*", "events-recorded.ksk"],
    ),
];

/// Writes the directory's manifest from [`RECIPES`]; a failed stage's step says so.
fn write_manifest(dir: &Path, failed: &[&str]) -> Result<()> {
    let d = dir.display().to_string();
    let steps = RECIPES
        .iter()
        .map(|(name, commands, files)| kansoku_report::Step {
            title: if failed.contains(name) { format!("{name} (FAILED: see summary.txt)") } else { name.to_string() },
            commands: commands.iter().map(|c| c.replace("{d}", &d)).collect(),
            files: files.iter().map(|f| f.to_string()).collect(),
        })
        .collect();
    let m = kansoku_report::Manifest { made_by: format!("kansoku demo {}", env!("CARGO_PKG_VERSION")), steps };
    let path = dir.join(kansoku_report::MANIFEST_FILE);
    std::fs::write(&path, m.to_json()).with_context(|| format!("writing {}", path.display()))
}

/// Every stage has a recipe, so the report names a command for each stage's files: checked
/// when the CLI is compiled (the binary has no test harness of its own).
const _: () = assert!(every_stage_has_a_recipe(), "a stage in STAGES has no recipe in RECIPES");

const fn every_stage_has_a_recipe() -> bool {
    let mut s = 0;
    while s < STAGES.len() {
        let mut r = 0;
        while r < RECIPES.len() && !same(STAGES[s].0, RECIPES[r].0) {
            r += 1;
        }
        if r == RECIPES.len() {
            return false;
        }
        s += 1;
    }
    true
}

const fn same(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    if a.len() != b.len() {
        return false;
    }
    let mut i = 0;
    while i < a.len() && a[i] == b[i] {
        i += 1;
    }
    i == a.len()
}
