//! `kansoku tp`: the trace-point optimiser for WebAssembly modules (seed 002).
//!
//! `optimize` rewrites a module's trace calls and embeds the translation table, `run` runs a
//! module under wasmtime writing a binary trace, `decode` expands a trace back into the events
//! of the unmodified program, `check` proves both runs emit the same events.

use anyhow::{bail, Context, Result};
use clap::{Args, Subcommand};
use kansoku_tracepoints as tp;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

#[derive(Subcommand)]
pub enum TpCommand {
    /// Rewrite a module's trace calls: merge, drop derivable arguments, remove disabled points.
    Optimize(OptimizeArgs),
    /// Run a module under wasmtime, writing its trace records to a file.
    Run(RunArgs),
    /// Print the events of a trace as the unmodified program would have emitted them.
    Decode(DecodeArgs),
    /// Run the original and the optimised module and prove their decoded events are identical.
    Check(CheckArgs),
}

#[derive(Args)]
pub struct OptimizeArgs {
    /// Module compiled with kansoku_trace.h.
    pub input: PathBuf,
    /// Where to write the optimised module.
    #[arg(short, long)]
    pub output: PathBuf,
    /// Spend at most this many new event ids (merged events).
    #[arg(long)]
    pub max_new_ids: Option<u32>,
    /// A trace of a previous run of INPUT: its counts per id replace the loop-nesting estimate.
    #[arg(long)]
    pub profile: Option<PathBuf>,
    /// Declarations side file (lines `id=..;name=..;args=..;flags=..;move=..`).
    #[arg(long)]
    pub decls: Option<PathBuf>,
    /// Also write the translation table as JSON to this file.
    #[arg(long)]
    pub xlat_out: Option<PathBuf>,
    /// Print the full report: passes, iterations, table entries.
    #[arg(long)]
    pub report: bool,
    /// Print the report as JSON.
    #[arg(long)]
    pub json: bool,
}

#[derive(Args)]
pub struct RunArgs {
    pub module: PathBuf,
    /// Trace file to write (default: MODULE with extension .ktrace).
    #[arg(short, long)]
    pub output: Option<PathBuf>,
    /// Timestamps: executed wasm instructions or nanoseconds.
    #[arg(long, default_value = "instructions")]
    pub clock: tp::Clock,
    /// Exported function to call (default: run, main or _start).
    #[arg(long)]
    pub entry: Option<String>,
    /// Stop the module after this many seconds (the trace so far is kept).
    #[arg(long, value_name = "SECONDS", default_value_t = tp::DEFAULT_TIME_LIMIT.as_secs_f64())]
    pub time_limit: f64,
    #[arg(long)]
    pub json: bool,
    /// Arguments of the entry function.
    #[arg(last = true)]
    pub args: Vec<String>,
}

#[derive(Args)]
pub struct DecodeArgs {
    pub trace: PathBuf,
    /// The exact module that produced the trace.
    #[arg(long)]
    pub module: PathBuf,
    /// Rebuild merged timestamps from estimated offsets or as sub-indices (2000.1, 2000.2).
    #[arg(long, default_value = "offsets")]
    pub timestamps: tp::TimestampMode,
    /// Print at most this many events.
    #[arg(long)]
    pub limit: Option<usize>,
    #[arg(long)]
    pub json: bool,
}

#[derive(Args)]
pub struct CheckArgs {
    pub original: PathBuf,
    pub optimised: PathBuf,
    /// Exported function to call (default: run, main or _start).
    #[arg(long)]
    pub entry: Option<String>,
    /// Also time untraced, original and optimised runs, best of N each (0 = no timing).
    #[arg(long, default_value_t = 5)]
    pub timing: u32,
    #[arg(long)]
    pub json: bool,
    /// Arguments of the entry function.
    #[arg(last = true)]
    pub args: Vec<String>,
}

pub fn run(cmd: TpCommand) -> Result<()> {
    match cmd {
        TpCommand::Optimize(a) => optimize(a),
        TpCommand::Run(a) => run_cmd(a),
        TpCommand::Decode(a) => decode(a),
        TpCommand::Check(a) => check(a),
    }
}

/// The largest wasm module or trace read (far above any module the optimiser was measured on).
const MAX_INPUT_BYTES: u64 = 1 << 30;

fn read(path: &Path) -> Result<Vec<u8>> {
    kansoku_core::input::read_regular(path, MAX_INPUT_BYTES).with_context(|| format!("cannot read {}", path.display()))
}

fn write(path: &Path, bytes: &[u8]) -> Result<()> {
    std::fs::write(path, bytes).with_context(|| format!("cannot write {}", path.display()))
}

fn optimize(a: OptimizeArgs) -> Result<()> {
    let wasm = read(&a.input)?;
    let mut opts = tp::OptimizeOptions { max_new_ids: a.max_new_ids, ..Default::default() };
    if let Some(p) = &a.profile {
        let t = tp::read_trace(&read(p)?).with_context(|| format!("profile {}", p.display()))?;
        if t.header.module_hash != tp::tracefile::module_hash(&wasm) {
            eprintln!(
                "kansoku: warning: profile {} was recorded from another version of {}; using its counts per id anyway",
                p.display(),
                a.input.display()
            );
        }
        opts.profile = Some(tp::optimize::profile_from_trace(&t));
    }
    if let Some(d) = &a.decls {
        opts.extra_decls = Some(tp::DeclTable::parse(&read(d)?).with_context(|| format!("declarations {}", d.display()))?);
    }
    let o = tp::optimize(&wasm, &opts).with_context(|| format!("cannot optimise {}", a.input.display()))?;
    write(&a.output, &o.wasm)?;
    if let Some(x) = &a.xlat_out {
        write(x, serde_json::to_string_pretty(&o.table)?.as_bytes())?;
    }
    for w in &o.report.warnings {
        eprintln!("kansoku: warning: {w}");
    }
    if a.json {
        let v = serde_json::json!({ "input": a.input, "output": a.output, "report": o.report, "table": o.table });
        println!("{}", serde_json::to_string_pretty(&v)?);
        return Ok(());
    }
    print!("{}", tp::report::optimize_text(&a.input, &a.output, &o, a.report));
    Ok(())
}

fn run_cmd(a: RunArgs) -> Result<()> {
    let wasm = read(&a.module)?;
    let out = a.output.clone().unwrap_or_else(|| a.module.with_extension("ktrace"));
    let file = std::fs::File::create(&out).with_context(|| format!("cannot create {}", out.display()))?;
    if !(a.time_limit > 0.0 && a.time_limit.is_finite()) {
        bail!("--time-limit {} is not a positive number of seconds", a.time_limit);
    }
    let time_limit = Some(std::time::Duration::from_secs_f64(a.time_limit));
    let opts = tp::RunOptions { clock: a.clock, entry: a.entry.clone(), args: a.args.clone(), time_limit, optimise_code: true };
    let o = tp::run_module(&wasm, &opts, Box::new(std::io::BufWriter::new(file)))
        .with_context(|| format!("cannot run {}", a.module.display()))?;
    if a.json {
        let v = serde_json::json!({ "module": a.module, "trace": out, "clock": a.clock, "outcome": o });
        println!("{}", serde_json::to_string_pretty(&v)?);
    } else {
        println!(
            "{}: {}({}) = [{}]; {} trace records, {} bytes -> {}{}; {:.3} ms",
            a.module.display(),
            o.entry,
            a.args.join(", "),
            o.results.join(", "),
            o.records,
            o.bytes,
            out.display(),
            o.instructions.map(|i| format!("; {i} wasm instructions")).unwrap_or_default(),
            o.wall_ns as f64 / 1e6
        );
    }
    Ok(())
}

fn decode(a: DecodeArgs) -> Result<()> {
    let trace = read(&a.trace)?;
    let wasm = read(&a.module)?;
    let d = tp::decode(&trace, &wasm, a.timestamps)
        .with_context(|| format!("cannot decode {} with {}", a.trace.display(), a.module.display()))?;
    let n = a.limit.unwrap_or(usize::MAX).min(d.events.len());
    if a.json {
        let events = tp::report::events_json(&d, n, a.timestamps);
        let v = serde_json::json!({
            "trace": a.trace, "module": a.module, "clock": d.header.clock,
            "records": d.records, "expanded_records": d.expanded_records,
            "events_total": d.events.len(), "events": events, "truncated": d.truncated,
        });
        println!("{}", serde_json::to_string_pretty(&v)?);
    } else {
        // a long listing is often piped into `head`: a closed pipe ends the listing quietly
        let mut out = std::io::BufWriter::new(std::io::stdout().lock());
        let listed = tp::report::write_events(&mut out, &d, n, a.timestamps);
        match listed.and_then(|_| std::io::Write::flush(&mut out)) {
            Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => return Ok(()),
            other => other.context("cannot write to stdout")?,
        }
    }
    if let Some(t) = &d.truncated {
        eprintln!("kansoku: warning: {}: {t}", a.trace.display());
    }
    Ok(())
}

fn check(a: CheckArgs) -> Result<()> {
    let orig = read(&a.original)?;
    let opt = read(&a.optimised)?;
    let opts = tp::RunOptions { entry: a.entry.clone(), args: a.args.clone(), ..Default::default() };
    let r = tp::check(&orig, &opt, &opts, a.timing)
        .with_context(|| format!("cannot check {} against {}", a.optimised.display(), a.original.display()))?;
    if a.json {
        println!("{}", serde_json::to_string_pretty(&r)?);
    } else {
        print!("{}", tp::report::check_text(&a.original, &a.optimised, &r));
    }
    if !r.identical {
        bail!(
            "decoded event streams differ: {}",
            r.first_difference.clone().unwrap_or_else(|| "unknown difference".into())
        );
    }
    if !r.same_results {
        bail!("the entry function returned different values: {:?} vs {:?}", r.original.results, r.optimised.results);
    }
    Ok(())
}

/// The `kansoku demo` stage: compiles the matrix example with clang, optimises it, runs both
/// modules, checks them, and writes everything into `dir`. Returns a short summary.
pub fn demo_stage(dir: &Path) -> Result<String> {
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let src = tp::clang::examples_dir().join("matrix.c");
    let orig_path = dir.join("tp-matrix.wasm");
    let opt_path = dir.join("tp-matrix.opt.wasm");
    tp::clang::compile_c(&src, &orig_path).context("the tracepoints demo needs clang and lld: run scripts/setup")?;
    let wasm = read(&orig_path)?;
    let o = tp::optimize(&wasm, &tp::OptimizeOptions::default())?;
    write(&opt_path, &o.wasm)?;
    write(&dir.join("tp-matrix.xlat.json"), serde_json::to_string_pretty(&o.table)?.as_bytes())?;
    write(dir.join("tp-optimize.txt").as_path(), tp::report::optimize_text(&orig_path, &opt_path, &o, true).as_bytes())?;
    let opts = tp::RunOptions { args: vec!["1".into()], ..Default::default() };
    for (m, name) in [(&wasm, "tp-matrix.ktrace"), (&o.wasm, "tp-matrix.opt.ktrace")] {
        let (_, trace) = tp::run_to_vec(m, &opts)?;
        write(&dir.join(name), &trace)?;
    }
    let (_, trace) = tp::run_to_vec(&o.wasm, &opts)?;
    let d = tp::decode(&trace, &o.wasm, tp::TimestampMode::Subindex)?;
    let mut text = String::new();
    for e in &d.events {
        let _ = writeln!(text, "{} {} {:?}", e.timestamp_text(tp::TimestampMode::Subindex), e.id, e.args);
    }
    write(&dir.join("tp-matrix.decoded.txt"), text.as_bytes())?;
    let r = tp::check(&wasm, &o.wasm, &opts, 3)?;
    write(&dir.join("tp-check.json"), serde_json::to_string_pretty(&r)?.as_bytes())?;
    write(&dir.join("tp-check.txt"), tp::report::check_text(&orig_path, &opt_path, &r).as_bytes())?;
    if !r.identical {
        bail!("tracepoints demo: decoded streams differ: {:?}", r.first_difference);
    }
    Ok(format!(
        "tp: matrix.c traced events identical after optimisation; trace calls {} -> {} ({} fewer), bytes {} -> {} ({} fewer)\n\
         tp: files tp-matrix.wasm, tp-matrix.opt.wasm (table in section kansoku.xlat), tp-*.ktrace, tp-matrix.decoded.txt, tp-check.txt",
        r.original.records,
        r.optimised.records,
        tp::report::percent(r.calls_saved),
        r.original.bytes,
        r.optimised.bytes,
        tp::report::percent(r.bytes_saved)
    ))
}
