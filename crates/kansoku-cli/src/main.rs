//! `kansoku` — observe what a program does while disturbing it as little as possible.
//!
//! This crate only orchestrates: it parses arguments, calls the library rooms, and prints
//! tables or JSON. Every subcommand lives in its own module under `commands/`.

/// `eprintln!` that never panics: std's panics when stderr cannot be written
/// (`2>/dev/full`, a full disk), which made kansoku exit 101 after its work was done. A
/// message that cannot be written is lost (there is nowhere else to say it); what kansoku
/// measured still goes where it was asked to, and the exit code is the command's. Defined
/// before the modules, so it shadows std's in every one of them.
macro_rules! eprintln {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr(), $($arg)*);
    }};
}

mod commands;
mod exports;
mod output;

use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};

#[derive(Parser)]
#[command(name = "kansoku", version, about = "Observe what programs do, exactly and cheaply", propagate_version = true)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// List a program's functions, or one function's basic blocks and instructions.
    Inspect(commands::inspect::Args),
    /// Record executions (exact: every instruction by ptrace single-stepping).
    #[command(subcommand)]
    Trace(commands::trace::TraceCommand),
    /// Print a recording's header and its events, symbolised.
    Show(commands::show::Args),
    /// Cache-miss formulas for affine loop kernels (seed 004): tables, exact LRU simulation, model, evaluation.
    #[command(subcommand)]
    Cache(commands::cache::CacheCommand),
    /// Trace-call optimiser for WebAssembly modules (seed 002): optimize, run, decode, check.
    #[command(subcommand)]
    Tp(commands::tp::TpCommand),
    /// Sample a program's instruction pointer (perf_event) with marker hits (seed 000).
    Record(commands::record::Args),
    /// Turn an exact trace into the recording sampling every P instructions would make.
    Sample(commands::sample::Args),
    /// Rebuild one iteration's instruction trace from samples (seed 000).
    Reconstruct(commands::reconstruct::Args),
    /// Score a reconstructed trace against the exact trace of one iteration.
    Compare(commands::reconstruct::CompareArgs),
    /// Path profile (seed 003): paths between back edges and calls, counted, from Valgrind/Lackey, the exact tracer or a file.
    Paths(commands::paths::Args),
    /// Software monitor (seed 001): CPU/device utilisation as eight items, per program and function; `monitor events` for measurement points.
    Monitor(commands::monitor::Args),
    /// Program waveform (seed 001): code and data addresses over time, autocorrelation, spectrum, dominant period.
    Wave(commands::wave::Args),
    /// One self-contained HTML page of a results directory: tables, pictures, what each means, the commands.
    Report(commands::report::Args),
    /// Build the bundled examples, run every stage, write kansoku-demo/ and its report page.
    Demo(commands::demo::Args),
}

fn main() {
    // Like other Unix tools, end quietly when the reader of our output goes away
    // (`kansoku ... | head`) instead of panicking on a failed write.
    // SAFETY: restoring the default action of SIGPIPE, before any thread starts; no
    // handler of ours is installed for it.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
    // `--version` says which isl integers seed 004's timings were made with.
    // Leaked once: clap keeps a &'static str.
    let long_version: &'static str = Box::leak(format!("{} (isl with {} integers)", env!("CARGO_PKG_VERSION"), kansoku_cache::ISL_INTEGERS).into_boxed_str());
    let matches = Cli::command().long_version(long_version).get_matches();
    let cli = Cli::from_arg_matches(&matches).unwrap_or_else(|e| e.exit());
    let result = match cli.command {
        Command::Inspect(args) => commands::inspect::run(args),
        Command::Trace(cmd) => commands::trace::run(cmd),
        Command::Show(args) => commands::show::run(args),
        Command::Cache(cmd) => commands::cache::run(cmd),
        Command::Tp(cmd) => commands::tp::run(cmd),
        Command::Record(args) => commands::record::run(args),
        Command::Sample(args) => commands::sample::run(args),
        Command::Reconstruct(args) => commands::reconstruct::run(args),
        Command::Compare(args) => commands::reconstruct::run_compare(args),
        Command::Paths(args) => commands::paths::run(args),
        Command::Monitor(args) => commands::monitor::run(args),
        Command::Wave(args) => commands::wave::run(args),
        Command::Report(args) => commands::report::run(args),
        Command::Demo(args) => commands::demo::run(args),
    };
    let result = result.and_then(|()| output::finish_report());
    if let Err(err) = result {
        eprintln!("kansoku: error: {err:#}");
        std::process::exit(1);
    }
    if let Some(code) = output::program_exit_code() {
        std::process::exit(code);
    }
}
