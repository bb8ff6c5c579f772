//! `kansoku sample --period P [--skid N] [--seed S] EXACT.ksk -o REC.ksk`: an exact trace
//! turned into the recording that sampling every P instructions would have made.

use std::path::{Path, PathBuf};

use anyhow::{bail, Result};
use kansoku_reconstruct::sampling::{sample_recording, SampleReport};

use crate::output::print_json;

#[derive(clap::Args)]
pub struct Args {
    /// Sample every P instructions.
    #[arg(long)]
    pub period: u64,
    /// Report the instruction up to N instructions after the overflow (uniformly random),
    /// as a late interrupt would.
    #[arg(long, default_value_t = 0)]
    pub skid: u64,
    /// Seed of the skid's random generator.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// The exact trace (from `kansoku trace exact`).
    pub exact: PathBuf,
    /// The sampled recording to write.
    #[arg(short, long)]
    pub output: PathBuf,
    #[arg(long)]
    pub json: bool,
}

/// Samples `exact` into `output`, the cut-off of a truncated trace said; shared by the
/// command and the demo.
pub fn sample_exact(exact: &Path, output: &Path, period: u64, skid: u64, seed: u64) -> Result<SampleReport> {
    if period == 0 {
        bail!("--period must be at least 1 (got 0): the counter overflows every P instructions");
    }
    let r = sample_recording(exact, output, period, skid, seed)?;
    if let Some(at) = r.truncated_at {
        eprintln!("kansoku: warning: {} is cut off at byte {at}; sampled what was readable", exact.display());
    }
    Ok(r)
}

pub fn run(args: Args) -> Result<()> {
    let r = sample_exact(&args.exact, &args.output, args.period, args.skid, args.seed)?;
    if args.json {
        return print_json(&r);
    }
    println!(
        "{} instructions sampled every {}{}: {} samples, {} marker hits -> {}",
        r.instructions,
        r.period,
        if r.skid > 0 { format!(" (skid up to {})", r.skid) } else { String::new() },
        r.samples,
        r.markers,
        r.output.display()
    );
    Ok(())
}
