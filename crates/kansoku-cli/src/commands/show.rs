//! `kansoku show FILE.ksk [--json] [--limit N] [--by function|block]`, and
//! `kansoku show REC --export firefox=FILE`: a sampled recording (`.ksk` or perf.data)
//! converted for the Firefox Profiler instead of listed.

use std::path::PathBuf;

use anyhow::{Context, Result};
use kansoku_core::Event;
use kansoku_perfdata::listing::{self, event_line, modules_json, processes_json, Rows};
use serde_json::json;

use crate::output::emit;

#[derive(clap::Args)]
pub struct Args {
    /// The recording to print.
    pub recording: PathBuf,
    /// Print at most N events (0 = all; without --limit, 100). Given, reading stops after
    /// them (a huge recording's head at once): the counts and modules are then those of
    /// what was read, unless --counts.
    #[arg(long)]
    pub limit: Option<u64>,
    /// Read the whole recording for its counts and module map even with --limit.
    #[arg(long)]
    pub counts: bool,
    /// Symbolise as `function:offset` or `function:BB:offset` (offsets in instructions).
    #[arg(long, value_enum, default_value_t = By::Block)]
    pub by: By,
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
    /// Convert instead of listing, as FORMAT=FILE: `firefox` (a sampled recording, kansoku's
    /// or perf's perf.data, as a Firefox Profiler profile: a thread per recorded thread, a
    /// sample per sample, the modules as libraries the profiler symbolises, marker hits and
    /// the iterations between them as markers).
    #[arg(long, value_name = "FORMAT=FILE", value_parser = crate::exports::parse_export)]
    pub export: Vec<crate::exports::Export>,
}

#[derive(Clone, Copy, clap::ValueEnum)]
pub enum By {
    Function,
    Block,
}

impl From<By> for listing::By {
    fn from(by: By) -> listing::By {
        match by {
            By::Function => listing::By::Function,
            By::Block => listing::By::Block,
        }
    }
}

fn warn(rows: &Rows) {
    for w in rows.warnings() {
        eprintln!("kansoku: warning: {w}");
    }
}

/// The lines before the events, where the report goes.
fn print_prelude(args: &Args, header: &kansoku_core::Header, summary: &kansoku_core::RecordingSummary, modules: &[(Option<i32>, kansoku_core::Module)], processes: &[kansoku_perfdata::ProcessCount], head: Option<bool>) {
    emit(&listing::prelude_text(&args.recording, args.limit.unwrap_or(100), header, summary, modules, processes, head));
}

pub fn run(args: Args) -> Result<()> {
    if !args.export.is_empty() {
        return export(&args);
    }
    let limit = args.limit.unwrap_or(100);
    if args.limit.is_some_and(|n| n > 0) && !args.counts {
        return show_head(&args, limit);
    }
    // First pass: counts and the module map, streamed (the events are not kept: a recording
    // of a billion events is shown in the memory of one).
    let reader = kansoku_perfdata::AnyRecording::open(&args.recording)?;
    let header = reader.header().clone();
    let counted = reader.summarize_items()?;
    let summary = &counted.summary;
    if let Some(offset) = summary.truncated_at {
        eprintln!(
            "kansoku: warning: {} ends early (last complete event before byte {offset}); showing what was recorded",
            args.recording.display()
        );
    }
    if args.json {
        // One object, its events written one per line as they are read.
        let mut prelude = json!({"recording": args.recording, "header": header, "modules": modules_json(&counted.modules), "summary": summary});
        if !counted.processes.is_empty() {
            prelude["processes"] = processes_json(&counted.processes);
        }
        let text = serde_json::to_string(&prelude)?;
        let open = text.strip_suffix('}').unwrap_or(&text);
        emit(&format!("{open},\n\"events\": [\n"));
    } else {
        print_prelude(&args, &header, summary, &counted.modules, &counted.processes, None);
    }
    // Second pass: the events up to the limit, symbolised with the modules met so far.
    let mut reader = kansoku_perfdata::AnyRecording::open(&args.recording)?;
    let mut rows = Rows::new(args.by.into());
    let mut shown = 0u64;
    while let Some(item) = reader.next_item()? {
        if limit != 0 && shown >= limit && matches!(item, kansoku_perfdata::Item::Event(ref e) if !matches!(e, Event::Module(_))) {
            break;
        }
        let Some(row) = rows.row(item) else { continue };
        if args.json {
            emit(&format!("{}{}", if shown > 0 { ",\n" } else { "" }, serde_json::to_string(&row)?));
        } else {
            emit(&event_line(&row));
        }
        shown += 1;
    }
    if args.json {
        emit("\n]}\n");
    }
    warn(&rows);
    Ok(())
}

/// `--limit N`: the first N events, reading no further; the counts are of what was read.
fn show_head(args: &Args, limit: u64) -> Result<()> {
    let reader = kansoku_perfdata::AnyRecording::open(&args.recording)?;
    let header = reader.header().clone();
    let head = reader.head(limit)?;
    if let Some(offset) = head.summary.truncated_at {
        eprintln!("kansoku: warning: {} ends early (last complete event before byte {offset}); showing what was recorded", args.recording.display());
    }
    let mut rows = Rows::new(args.by.into());
    // the modules met are each given to their process's symboliser before the events
    for (pid, m) in &head.modules {
        rows.symbolizer(*pid).add_module(m.clone());
    }
    let rows_out: Vec<serde_json::Value> = head.items.into_iter().filter_map(|i| rows.row(i)).collect();
    if args.json {
        let v = json!({"recording": args.recording, "header": header, "modules": modules_json(&head.modules), "summary": head.summary, "summary_complete": head.complete, "events": rows_out});
        emit(&format!("{}\n", serde_json::to_string(&v)?));
    } else {
        print_prelude(args, &header, &head.summary, &head.modules, &[], Some(head.complete));
        for row in &rows_out {
            emit(&event_line(row));
        }
    }
    warn(&rows);
    Ok(())
}

/// `--export`: each file written from its own pass over the recording.
fn export(args: &Args) -> Result<()> {
    let files = crate::exports::create_exports(&args.export, &[kansoku_export::Format::Firefox], "kansoku show")?;
    for ((format, path), file) in args.export.iter().zip(files) {
        let (summary, warnings) = kansoku_export::write_firefox_recording(&args.recording, file).with_context(|| format!("writing {}", path.display()))?;
        for w in warnings {
            eprintln!("kansoku: warning: {w}");
        }
        eprintln!(
            "kansoku: {} samples ({} outside the recorded modules) in {} process(es) on {} thread(s), {} libraries, {} marker hits, {} iterations",
            summary.samples, summary.unmapped, summary.processes, summary.threads, summary.libraries, summary.hits, summary.iterations
        );
        eprintln!("kansoku: {}", crate::exports::written(*format, path));
    }
    Ok(())
}
