//! `kansoku show FILE.ksk [--json] [--limit N] [--by function|block]`, and
//! `kansoku show REC --export firefox=FILE`: a sampled recording (`.ksk` or perf.data)
//! converted for the Firefox Profiler instead of listed.

use std::path::PathBuf;

use anyhow::{Context, Result};
use kansoku_binary::Symbolizer;
use kansoku_core::Event;
use serde_json::json;

use crate::output::{emit, hex, reportln, signal_name};

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
    let (summary, modules) = reader.summarize_with_modules()?;
    if let Some(offset) = summary.truncated_at {
        eprintln!(
            "kansoku: warning: {} ends early (last complete event before byte {offset}); showing what was recorded",
            args.recording.display()
        );
    }
    if args.json {
        // One object, its events written one per line as they are read.
        let prelude = json!({"recording": args.recording, "header": header, "modules": modules, "summary": summary});
        let text = serde_json::to_string(&prelude)?;
        let open = text.strip_suffix('}').unwrap_or(&text);
        emit(&format!("{open},\n\"events\": [\n"));
    } else {
        print_prelude(&args, &header, &summary, &modules, None)?;
    }
    // Second pass: the events up to the limit, symbolised with the modules met so far.
    let mut reader = kansoku_perfdata::AnyRecording::open(&args.recording)?;
    let mut symbolizer = Symbolizer::new(&[]);
    let mut tid = None;
    let mut shown = 0u64;
    while let Some(event) = reader.next_event()? {
        if let Event::Module(m) = &event {
            symbolizer.add_module(m.clone());
            continue;
        }
        if limit != 0 && shown >= limit {
            break;
        }
        if let Event::Thread { tid: t } = &event {
            tid = Some(*t);
        }
        let row = event_row(&event, tid, &mut symbolizer, args.by);
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
    for w in &symbolizer.warnings {
        eprintln!("kansoku: warning: {w}");
    }
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
    let mut symbolizer = Symbolizer::new(&head.modules);
    let mut tid = None;
    let rows: Vec<serde_json::Value> = head
        .events
        .iter()
        .map(|e| {
            if let Event::Thread { tid: t } = e {
                tid = Some(*t);
            }
            event_row(e, tid, &mut symbolizer, args.by)
        })
        .collect();
    if args.json {
        let v = json!({"recording": args.recording, "header": header, "modules": head.modules, "summary": head.summary, "summary_complete": head.complete, "events": rows});
        emit(&format!("{}\n", serde_json::to_string(&v)?));
    } else {
        print_prelude(args, &header, &head.summary, &head.modules, Some(head.complete))?;
        for row in &rows {
            emit(&event_line(row));
        }
    }
    for w in &symbolizer.warnings {
        eprintln!("kansoku: warning: {w}");
    }
    Ok(())
}

/// `--export`: each file written from its own pass over the recording.
fn export(args: &Args) -> Result<()> {
    let files = crate::exports::create_exports(&args.export, &[kansoku_export::Format::Firefox], "kansoku show")?;
    for ((format, path), file) in args.export.iter().zip(files) {
        let (summary, warnings) = crate::exports::write_firefox(&args.recording, file).with_context(|| format!("writing {}", path.display()))?;
        for w in warnings {
            eprintln!("kansoku: warning: {w}");
        }
        eprintln!(
            "kansoku: {} samples ({} outside the recorded modules) on {} thread(s), {} libraries, {} marker hits, {} iterations",
            summary.samples, summary.unmapped, summary.threads, summary.libraries, summary.hits, summary.iterations
        );
        eprintln!("kansoku: {}", crate::exports::written(*format, path));
    }
    Ok(())
}

/// One event as a JSON row (the text form is printed from it too).
fn event_row(event: &Event, tid: Option<u32>, symbolizer: &mut Symbolizer, by: By) -> serde_json::Value {
    let mut locate = |addr: u64| {
        let loc = symbolizer.locate(addr);
        match by {
            By::Function => loc.function_offset(),
            By::Block => loc.block_form(),
        }
    };
    match event {
        Event::Thread { tid: t } => json!({"event": "thread", "tid": t}),
        Event::Instruction { addr } => json!({"event": "instruction", "addr": hex(*addr), "location": locate(*addr), "tid": tid}),
        Event::Block { addr } => json!({"event": "block", "addr": hex(*addr), "location": locate(*addr), "tid": tid}),
        Event::Sample(s) => json!({"event": "sample", "addr": hex(s.ip), "location": locate(s.ip), "time_ns": s.time_ns, "instructions": s.instructions, "tid": tid}),
        Event::Marker { time_ns, instructions } => json!({"event": "marker", "time_ns": time_ns, "instructions": instructions, "tid": tid}),
        Event::Signal { signal } => json!({"event": "signal", "signal": signal, "tid": tid}),
        Event::Exit(e) => json!({"event": "exit", "status": e}),
        Event::Access { addr, write } => json!({"event": if *write { "write" } else { "read" }, "addr": hex(*addr), "tid": tid}),
        Event::Unknown { tag, len } => json!({"event": "unknown", "tag": tag, "len": len}),
        Event::Module(m) => json!({"event": "module", "path": m.path}),
    }
}

fn event_line(e: &serde_json::Value) -> String {
    let kind = e["event"].as_str().unwrap_or("?");
    match kind {
        "instruction" | "block" => format!("  {:<11} {:>14}  {}\n", kind, e["addr"].as_str().unwrap_or(""), e["location"].as_str().unwrap_or("")),
        "read" | "write" => format!("  {:<11} {:>14}\n", kind, e["addr"].as_str().unwrap_or("")),
        "sample" => format!("  {:<11} {:>14}  {}  t={}ns n={}\n", kind, e["addr"].as_str().unwrap_or(""), e["location"].as_str().unwrap_or(""), e["time_ns"], e["instructions"]),
        _ => {
            let mut rest = e.clone();
            rest.as_object_mut().map(|o| o.remove("event"));
            format!("  {kind:<11} {rest}\n")
        }
    }
}

/// `head`: Some(whether the recording ended within the limit) when only its head was read.
fn print_prelude(args: &Args, header: &kansoku_core::Header, summary: &kansoku_core::RecordingSummary, modules: &[kansoku_core::Module], head: Option<bool>) -> Result<()> {
    reportln!("recording  {}", args.recording.display());
    reportln!("kind       {}", serde_json::to_value(header.kind)?.as_str().unwrap_or("?"));
    reportln!("program    {} {}", header.program, header.args.join(" "));
    if !header.parameters.is_empty() {
        let params: Vec<String> = header.parameters.iter().map(|(k, v)| format!("{k}={v}")).collect();
        reportln!("parameters {}", params.join(" "));
    }
    let accesses = if summary.accesses > 0 { format!(", {} memory accesses", summary.accesses) } else { String::new() };
    let counts = if head == Some(false) { "counts of the first events (--limit: not read further; --counts reads it all)\n           " } else { "" };
    reportln!(
        "counts     {counts}{} events: {} instructions{accesses}, {} blocks, {} samples, {} marker hits, {} thread(s), {} signal(s); {} bytes",
        summary.events, summary.instructions, summary.blocks, summary.samples, summary.markers, summary.threads, summary.signals, summary.bytes
    );
    if let Some(exit) = summary.exit {
        reportln!("exit       {}", match exit {
            kansoku_core::ExitStatus::Exited(c) => format!("exited with status {c}"),
            kansoku_core::ExitStatus::Killed(s) => format!("killed by {}", signal_name(s)),
            kansoku_core::ExitStatus::Detached => "detached (observation stopped before the program ended)".into(),
        });
    }
    reportln!("modules");
    for (i, m) in modules.iter().enumerate() {
        reportln!("  [{i}] {}..{} off {} {} {}", hex(m.start), hex(m.end), hex(m.file_offset), m.path, m.build_id.as_deref().unwrap_or(""));
    }
    let limit = args.limit.unwrap_or(100);
    let more = head == Some(false) || (head.is_none() && limit != 0 && summary.events > limit);
    reportln!("events{}", if more { format!(" (first {limit})") } else { String::new() });
    Ok(())
}
