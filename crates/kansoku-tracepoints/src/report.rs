//! The optimiser's, the checker's and the decoder's results as text and JSON, the forms
//! `kansoku tp` prints: the CLI chooses one and prints it, the words are the crate's.

use std::fmt::Write as _;
use std::path::Path;

use crate::{CheckReport, Decoded, Optimized, TimestampMode};

/// A saved fraction as a percentage with one decimal (0.253 → "25.3%").
pub fn percent(saved: f64) -> String {
    format!("{:.1}%", 100.0 * saved)
}

/// What `optimize` did, as the text `kansoku tp optimize` prints: sizes, sites merged and
/// removed, arguments dropped, the estimated savings, the table; with `full`, the cost of
/// every iteration and every table entry.
pub fn optimize_text(input: &Path, output: &Path, o: &Optimized, full: bool) -> String {
    let r = &o.report;
    let mut s = String::new();
    let first = r.iterations.first().copied().unwrap_or_default();
    let last = r.iterations.last().copied().unwrap_or_default();
    let saved = |a: f64, b: f64| if a > 0.0 { 1.0 - b / a } else { 0.0 };
    let _ = writeln!(s, "{} -> {} ({} -> {} bytes)", input.display(), output.display(), r.bytes_in, r.bytes_out);
    let _ = writeln!(
        s,
        "trace calls: {} sites; {} merged into {} calls; removed {} disabled, {} idempotent repeats, {} barriers",
        r.trace_sites, r.sites_merged, r.groups_merged, r.removed_disabled, r.removed_idempotent, r.barriers_removed
    );
    let _ = writeln!(
        s,
        "arguments: {} -> {} (constants {}, duplicates {}, derived {}); new ids {}{}",
        r.args_before,
        r.args_after,
        r.args_constant,
        r.args_duplicate,
        r.args_derived,
        r.new_ids_used,
        r.max_new_ids.map(|b| format!(" of {b} ({} shapes over budget)", r.shapes_over_budget)).unwrap_or_default()
    );
    let _ = writeln!(
        s,
        "estimated: calls {} fewer, bytes {} fewer, tracing instructions {} fewer ({} iterations)",
        percent(saved(first.calls, last.calls)),
        percent(saved(first.bytes, last.bytes)),
        percent(saved(first.instructions, last.instructions)),
        r.iterations.len() - 1
    );
    let _ = writeln!(
        s,
        "table kansoku.xlat: {} entries, {} bytes ({} without prefix sharing; {} entries share a prefix)",
        o.table.entries.len(),
        r.xlat.bytes,
        r.xlat.bytes_without_prefix_sharing,
        r.xlat.entries_sharing_a_prefix
    );
    if full {
        let _ = writeln!(s, "\niteration  calls        bytes          instructions   total");
        for (i, c) in r.iterations.iter().enumerate() {
            let _ = writeln!(s, "{i:9}  {:<11.0}  {:<13.0}  {:<13.0}  {:.0}", c.calls, c.bytes, c.instructions, c.total);
        }
        let _ = writeln!(s, "\nnew id  args  original events (offset: id(args))");
        for e in o.table.entries.values() {
            let evs: Vec<String> = e
                .events
                .iter()
                .zip(&e.offsets)
                .map(|(ev, off)| {
                    let args: Vec<String> = ev.args.iter().map(|a| a.display()).collect();
                    format!("{off:+}: {}({})", ev.id, args.join(", "))
                })
                .collect();
            let _ = writeln!(s, "{:6}  {:4}  {}", e.new_id, e.nargs, evs.join("  "));
        }
    }
    s
}

/// A [`check`](crate::check()) as the text `kansoku tp check` prints: whether the decoded
/// events are identical, and the original's and the optimised module's costs side by side.
pub fn check_text(orig: &Path, opt: &Path, r: &CheckReport) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "{}: decoded events {} ({} events; {} disabled dropped, {} idempotent repeats collapsed)",
        opt.display(),
        if r.identical { "IDENTICAL to the original's" } else { "DIFFER from the original's" },
        r.events,
        r.disabled_events_dropped,
        r.idempotent_repeats_collapsed
    );
    let _ = writeln!(s, "{:<22} {:>12} {:>12} {:>8}", "", orig.file_name().unwrap_or_default().to_string_lossy(), opt.file_name().unwrap_or_default().to_string_lossy(), "saved");
    let _ = writeln!(s, "{:<22} {:>12} {:>12} {:>8}", "trace calls executed", r.original.records, r.optimised.records, percent(r.calls_saved));
    let _ = writeln!(s, "{:<22} {:>12} {:>12} {:>8}", "trace bytes", r.original.bytes, r.optimised.bytes, percent(r.bytes_saved));
    let _ = writeln!(
        s,
        "{:<22} {:>12} {:>12} {:>8}",
        "wasm instructions",
        r.original.instructions.unwrap_or(0),
        r.optimised.instructions.unwrap_or(0),
        percent(r.instructions_saved)
    );
    if let Some(t) = &r.timing {
        let _ = writeln!(
            s,
            "{:<22} {:>11.2}x {:>11.2}x   (traced / untraced wall time, best of {}; untraced {:.3} ms)",
            "tracing overhead",
            t.original_overhead,
            t.optimised_overhead,
            t.repeats,
            t.untraced_ns as f64 / 1e6
        );
    }
    s
}

/// The first `n` decoded events as a table (timestamp, id, name, named arguments), then a
/// line of totals.
pub fn write_events(out: &mut impl std::io::Write, d: &Decoded, n: usize, mode: TimestampMode) -> std::io::Result<()> {
    let n = n.min(d.events.len());
    writeln!(out, "{:>16}  {:>6}  {:<16}  args", "timestamp", "id", "name")?;
    for e in &d.events[..n] {
        let name = d.decls.name(e.id).map(str::to_string).unwrap_or_else(|| format!("event{}", e.id));
        let names = d.decls.decls.get(&e.id).map(|x| x.arg_names.clone()).unwrap_or_default();
        let args: Vec<String> = e
            .args
            .iter()
            .enumerate()
            .map(|(i, v)| match names.get(i) {
                Some(nm) => format!("{nm}={v}"),
                None => v.to_string(),
            })
            .collect();
        writeln!(out, "{:>16}  {:>6}  {:<16}  {}", e.timestamp_text(mode), e.id, name, args.join(" "))?;
    }
    writeln!(
        out,
        "{} events from {} records ({} merged records expanded){}",
        d.events.len(),
        d.records,
        d.expanded_records,
        if n < d.events.len() { format!("; printed the first {n}") } else { String::new() }
    )
}

/// The first `n` decoded events as JSON objects: id, name, arguments, timestamp.
pub fn events_json(d: &Decoded, n: usize, mode: TimestampMode) -> Vec<serde_json::Value> {
    d.events[..n.min(d.events.len())]
        .iter()
        .map(|e| serde_json::json!({ "id": e.id, "name": d.decls.name(e.id), "args": e.args, "timestamp": e.timestamp_text(mode) }))
        .collect()
}
