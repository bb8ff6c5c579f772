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
        print_prelude(&args, &header, summary, &counted.modules, &counted.processes, None)?;
    }
    // Second pass: the events up to the limit, symbolised with the modules met so far.
    let mut reader = kansoku_perfdata::AnyRecording::open(&args.recording)?;
    let mut rows = Rows::new(args.by);
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
    rows.warn();
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
    let mut rows = Rows::new(args.by);
    // the modules met are each given to their process's symboliser before the events
    for (pid, m) in &head.modules {
        rows.symbolizer(*pid).add_module(m.clone());
    }
    let rows_out: Vec<serde_json::Value> = head.items.into_iter().filter_map(|i| rows.row(i)).collect();
    if args.json {
        let v = json!({"recording": args.recording, "header": header, "modules": modules_json(&head.modules), "summary": head.summary, "summary_complete": head.complete, "events": rows_out});
        emit(&format!("{}\n", serde_json::to_string(&v)?));
    } else {
        print_prelude(args, &header, &head.summary, &head.modules, &[], Some(head.complete))?;
        for row in &rows_out {
            emit(&event_line(row));
        }
    }
    rows.warn();
    Ok(())
}

/// The modules as JSON objects, each with its process's pid where the recording says it.
fn modules_json(modules: &[(Option<i32>, kansoku_core::Module)]) -> serde_json::Value {
    modules
        .iter()
        .map(|(pid, m)| {
            let mut v = json!(m);
            if let Some(pid) = pid {
                v["pid"] = json!(pid);
            }
            v
        })
        .collect()
}

fn processes_json(processes: &[kansoku_perfdata::ProcessCount]) -> serde_json::Value {
    processes.iter().map(|p| json!({"pid": p.pid, "name": p.name, "samples": p.samples})).collect()
}

/// Items of a recording turned into rows: each process symbolised with its own modules,
/// each sample with its process, thread and call chain where the recording has them.
struct Rows {
    by: By,
    /// By process (None: a kansoku recording's one process).
    symbolizers: std::collections::HashMap<Option<i32>, Symbolizer>,
    /// The current process: pid, name and thread name (perf.data).
    process: Option<(i32, String, String)>,
    tid: Option<u32>,
    stack: Option<Vec<u64>>,
}

impl Rows {
    fn new(by: By) -> Rows {
        Rows { by, symbolizers: Default::default(), process: None, tid: None, stack: None }
    }

    fn symbolizer(&mut self, pid: Option<i32>) -> &mut Symbolizer {
        self.symbolizers.entry(pid).or_insert_with(|| Symbolizer::new(&[]))
    }

    /// The row of an item; none for modules (given to the symboliser), contexts and stacks
    /// (carried into the rows after them).
    fn row(&mut self, item: kansoku_perfdata::Item) -> Option<serde_json::Value> {
        use kansoku_perfdata::Item;
        let pid = self.process.as_ref().map(|p| p.0);
        match item {
            Item::Context { pid, tid, process, thread } => {
                self.process = Some((pid, process, thread));
                self.tid = Some(tid as u32);
                None
            }
            Item::Stack(frames) => {
                self.stack = Some(frames);
                None
            }
            Item::Event(Event::Module(m)) => {
                self.symbolizer(pid).add_module(m);
                None
            }
            Item::Event(event) => {
                if let Event::Thread { tid: t } = &event {
                    self.tid = Some(*t);
                }
                let (by, tid, stack) = (self.by, self.tid, self.stack.take());
                let symbolizer = self.symbolizers.entry(pid).or_insert_with(|| Symbolizer::new(&[]));
                let mut row = event_row(&event, tid, symbolizer, by);
                if let (Some((pid, process, thread)), Event::Sample(_) | Event::Marker { .. }) = (&self.process, &event) {
                    row["pid"] = json!(pid);
                    row["process"] = json!(process);
                    row["thread"] = json!(thread);
                }
                if let Some(frames) = stack {
                    // a caller's frame is named by the call before its return address
                    let named: Vec<String> = frames.iter().enumerate().map(|(i, &a)| symbolizer.locate(if i == 0 { a } else { a.saturating_sub(1) }).function_offset()).collect();
                    row["stack"] = json!(frames.iter().map(|&a| hex(a)).collect::<Vec<_>>());
                    row["frames"] = json!(named);
                }
                Some(row)
            }
        }
    }

    fn warn(&self) {
        for w in self.symbolizers.values().flat_map(|s| &s.warnings).collect::<std::collections::BTreeSet<_>>() {
            eprintln!("kansoku: warning: {w}");
        }
    }
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
            "kansoku: {} samples ({} outside the recorded modules) in {} process(es) on {} thread(s), {} libraries, {} marker hits, {} iterations",
            summary.samples, summary.unmapped, summary.processes, summary.threads, summary.libraries, summary.hits, summary.iterations
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
        "sample" => {
            let mut line = format!("  {:<11} {:>14}  {}  t={}ns n={}", kind, e["addr"].as_str().unwrap_or(""), e["location"].as_str().unwrap_or(""), e["time_ns"], e["instructions"]);
            if let Some(pid) = e["pid"].as_i64() {
                line += &format!(" pid={pid} tid={} {}", e["tid"], e["thread"].as_str().unwrap_or(""));
            }
            for f in e["frames"].as_array().into_iter().flatten().skip(1) {
                line += &format!(" <- {}", f.as_str().unwrap_or(""));
            }
            line + "\n"
        }
        _ => {
            let mut rest = e.clone();
            rest.as_object_mut().map(|o| o.remove("event"));
            format!("  {kind:<11} {rest}\n")
        }
    }
}

/// `head`: Some(whether the recording ended within the limit) when only its head was read.
fn print_prelude(
    args: &Args,
    header: &kansoku_core::Header,
    summary: &kansoku_core::RecordingSummary,
    modules: &[(Option<i32>, kansoku_core::Module)],
    processes: &[kansoku_perfdata::ProcessCount],
    head: Option<bool>,
) -> Result<()> {
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
    if !processes.is_empty() {
        reportln!("processes  {} with samples (pid name samples)", processes.len());
        for p in processes {
            reportln!("  {:>8} {:<16} {}", p.pid, p.name, p.samples);
        }
    }
    reportln!("modules");
    for (i, (pid, m)) in modules.iter().enumerate() {
        let pid = pid.map(|p| format!("pid {p} ")).unwrap_or_default();
        reportln!("  [{i}] {pid}{}..{} off {} {} {}", hex(m.start), hex(m.end), hex(m.file_offset), m.path, m.build_id.as_deref().unwrap_or(""));
    }
    let limit = args.limit.unwrap_or(100);
    let more = head == Some(false) || (head.is_none() && limit != 0 && summary.events > limit);
    reportln!("events{}", if more { format!(" (first {limit})") } else { String::new() });
    Ok(())
}
