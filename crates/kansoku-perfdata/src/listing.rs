//! What `kansoku show` prints of a recording: each item as a row (a JSON object, and a line
//! of text made from it), every process symbolised with its own modules, samples with
//! their process, thread and call chain; and the lines before the events.

use std::fmt::Write as _;
use std::path::Path;

use kansoku_binary::Symbolizer;
use kansoku_core::text::hex;
use kansoku_core::Event;
use serde_json::json;

use crate::{Item, ProcessCount};

/// How an address is named in a row.
#[derive(Clone, Copy, Debug)]
pub enum By {
    /// `function+offset`, the offset in instructions.
    Function,
    /// `function:BB:offset`.
    Block,
}

/// The modules as JSON objects, each with its process's pid where the recording says it.
pub fn modules_json(modules: &[(Option<i32>, kansoku_core::Module)]) -> serde_json::Value {
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

/// Samples per process, as JSON objects (pid, name, samples).
pub fn processes_json(processes: &[ProcessCount]) -> serde_json::Value {
    processes.iter().map(|p| json!({"pid": p.pid, "name": p.name, "samples": p.samples})).collect()
}

/// Items of a recording turned into rows: each process symbolised with its own modules,
/// each sample with its process, thread and call chain where the recording has them.
pub struct Rows {
    by: By,
    /// By process (None: a kansoku recording's one process).
    symbolizers: std::collections::HashMap<Option<i32>, Symbolizer>,
    /// The current process: pid, name and thread name (perf.data).
    process: Option<(i32, String, String)>,
    /// Signed as perf prints it: a tid fits in i32 (pid_max is at most 2^22), and a
    /// perf.data sample with no thread carries u32::MAX, which `perf script` shows as -1.
    tid: Option<i32>,
    stack: Option<Vec<u64>>,
}

impl Rows {
    /// Rows named by function or by block.
    pub fn new(by: By) -> Rows {
        Rows { by, symbolizers: Default::default(), process: None, tid: None, stack: None }
    }

    /// The symboliser of process `pid` (None: a kansoku recording's one process), made
    /// empty on first use; modules read ahead of the rows (a head) are added to it.
    pub fn symbolizer(&mut self, pid: Option<i32>) -> &mut Symbolizer {
        self.symbolizers.entry(pid).or_insert_with(|| Symbolizer::new(&[]))
    }

    /// The row of an item; none for modules (given to the symboliser), contexts and stacks
    /// (carried into the rows after them).
    pub fn row(&mut self, item: Item) -> Option<serde_json::Value> {
                let pid = self.process.as_ref().map(|p| p.0);
        match item {
            Item::Context { pid, tid, process, thread } => {
                self.process = Some((pid, process, thread));
                self.tid = Some(tid);
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
                    self.tid = Some(*t as i32);
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

    /// What the symbolisers could not do (a module not found, …), each said once.
    pub fn warnings(&self) -> Vec<String> {
        let set: std::collections::BTreeSet<&String> = self.symbolizers.values().flat_map(|s| &s.warnings).collect();
        set.into_iter().cloned().collect()
    }
}

/// One event as a JSON row (the text form is printed from it too).
fn event_row(event: &Event, tid: Option<i32>, symbolizer: &mut Symbolizer, by: By) -> serde_json::Value {
    let mut locate = |addr: u64| {
        let loc = symbolizer.locate(addr);
        match by {
            By::Function => loc.function_offset(),
            By::Block => loc.block_form(),
        }
    };
    match event {
        Event::Thread { tid: t } => json!({"event": "thread", "tid": *t as i32}),
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

/// A row as one line of `kansoku show`'s text.
pub fn event_line(e: &serde_json::Value) -> String {
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

/// The lines `kansoku show` prints before the events: the recording, its program and
/// parameters, the counts, how the program ended, its processes and modules. `head`:
/// Some(whether the recording ended within the limit) when only its head was read.
pub fn prelude_text(
    recording: &Path,
    limit: u64,
    header: &kansoku_core::Header,
    summary: &kansoku_core::RecordingSummary,
    modules: &[(Option<i32>, kansoku_core::Module)],
    processes: &[ProcessCount],
    head: Option<bool>,
) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "recording  {}", recording.display());
    let _ = writeln!(out, "kind       {}", serde_json::to_value(header.kind).ok().and_then(|v| v.as_str().map(str::to_string)).unwrap_or_else(|| "?".into()));
    let _ = writeln!(out, "program    {} {}", header.program, header.args.join(" "));
    if !header.parameters.is_empty() {
        let params: Vec<String> = header.parameters.iter().map(|(k, v)| format!("{k}={v}")).collect();
        let _ = writeln!(out, "parameters {}", params.join(" "));
    }
    let accesses = if summary.accesses > 0 { format!(", {} memory accesses", summary.accesses) } else { String::new() };
    let counts = if head == Some(false) { "counts of the first events (--limit: not read further; --counts reads it all)\n           " } else { "" };
    let _ = writeln!(out, 
        "counts     {counts}{} events: {} instructions{accesses}, {} blocks, {} samples, {} marker hits, {} thread(s), {} signal(s); {} bytes",
        summary.events, summary.instructions, summary.blocks, summary.samples, summary.markers, summary.threads, summary.signals, summary.bytes
    );
    if let Some(exit) = summary.exit {
        let _ = writeln!(out, "exit       {}", kansoku_core::text::exit_text(exit));
    }
    if !processes.is_empty() {
        let _ = writeln!(out, "processes  {} with samples (pid name samples)", processes.len());
        for p in processes {
            let _ = writeln!(out, "  {:>8} {:<16} {}", p.pid, p.name, p.samples);
        }
    }
    let _ = writeln!(out, "modules");
    for (i, (pid, m)) in modules.iter().enumerate() {
        let pid = pid.map(|p| format!("pid {p} ")).unwrap_or_default();
        let _ = writeln!(out, "  [{i}] {pid}{}..{} off {} {} {}", hex(m.start), hex(m.end), hex(m.file_offset), m.path, m.build_id.as_deref().unwrap_or(""));
    }
    let more = head == Some(false) || (head.is_none() && limit != 0 && summary.events > limit);
    let _ = writeln!(out, "events{}", if more { format!(" (first {limit})") } else { String::new() });
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use kansoku_core::event::Sample;

    /// A sample perf recorded with no thread (tid u32::MAX in the file) lists as `perf
    /// script` lists it, tid -1, whether the thread came as a context or as an event.
    #[test]
    fn a_sample_without_a_thread_lists_tid_minus_one() {
        let sample = || Item::Event(Event::Sample(Sample { time_ns: 1, ip: 0x10, instructions: None }));
        let mut rows = Rows::new(By::Function);
        rows.row(Item::Context { pid: 7, tid: -1, process: "p".into(), thread: "t".into() });
        assert_eq!(rows.row(sample()).unwrap()["tid"], -1);
        let mut rows = Rows::new(By::Function);
        assert_eq!(rows.row(Item::Event(Event::Thread { tid: u32::MAX })).unwrap()["tid"], -1);
        assert_eq!(rows.row(sample()).unwrap()["tid"], -1);
    }
}
