//! `kansoku sample --period P [--skid N] [--seed S] EXACT.ksk -o REC.ksk`: an exact trace
//! turned into the recording that sampling every P instructions would have made.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use kansoku_core::{Header, RecordingKind, RecordingReader, RecordingWriter};
use kansoku_reconstruct::sampling::Sampler;
use serde::Serialize;

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

#[derive(Serialize)]
pub struct SampleReport {
    pub output: PathBuf,
    pub period: u64,
    pub skid: u64,
    pub instructions: u64,
    pub samples: u64,
    pub markers: u64,
}

/// Samples `exact` into `output`; shared by the command, the demo and the benchmarks.
pub fn sample_exact(exact: &Path, output: &Path, period: u64, skid: u64, seed: u64) -> Result<SampleReport> {
    if period == 0 {
        bail!("--period must be at least 1 (got 0): the counter overflows every P instructions");
    }
    let mut reader = RecordingReader::open(exact)?;
    if reader.header().kind != RecordingKind::ExactTrace {
        bail!("{}: not an exact trace (it holds {:?}); make one with `kansoku trace exact`", exact.display(), reader.header().kind);
    }
    let src = reader.header().clone();
    let mut header = Header::new(RecordingKind::Samples, src.program.clone(), src.args.clone())
        .with_parameter("clock", "instructions")
        .with_parameter("period", period)
        .with_parameter("skid", skid)
        .with_parameter("simulated_from", exact.to_string_lossy().to_string());
    if let Some(m) = src.parameters.get("marker_function") {
        header = header.with_parameter("marker_function", m.clone());
    }
    if let Some(m) = src.parameters.get("marker") {
        header = header.with_parameter("marker", m.clone());
    }
    let mut sampler = Sampler::new(period, skid, seed)?;
    let mut writer = RecordingWriter::create(output, &header)?;
    let mut failure = None;
    while let Some(event) = reader.next_event()? {
        sampler.feed(&event, &mut |e| {
            if failure.is_none() {
                if let Err(err) = writer.write(&e) {
                    failure = Some(err);
                }
            }
        });
        if let Some(e) = failure.take() {
            return Err(e).with_context(|| format!("writing {}", output.display()));
        }
    }
    if let Some(at) = reader.truncated_at() {
        eprintln!("kansoku: warning: {} is cut off at byte {at}; sampled what was readable", exact.display());
    }
    writer.finish()?;
    Ok(SampleReport {
        output: output.to_path_buf(),
        period,
        skid,
        instructions: sampler.instructions(),
        samples: sampler.samples,
        markers: sampler.markers,
    })
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
