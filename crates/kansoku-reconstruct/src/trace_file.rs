//! The reconstructed-trace file (`kansoku reconstruct -o`, read back by `kansoku compare`).
//!
//! Text: a `#` header line, `#` lines saying how the trace was sampled and from what, its
//! class and the span another order scores as well, then one instruction per line:
//! `0xADDRESS function:offset function:block:offset`.

use std::path::{Path, PathBuf};

use crate::error::FileError;
use crate::{Granularity, Names, Reconstruction, Weighting};

/// The header line that names the instructions where another order scores as well:
/// `# uncertain FIRST LAST: why`.
const UNCERTAIN: &str = "# uncertain";
/// The header line that names the trace's class: `# class LENGTH` (instructions between
/// marker hits); the exact iterations of that length are its class.
const CLASS: &str = "# class";
/// The header line that says how the trace was sampled: `# weighting time|count`.
const WEIGHTING: &str = "# weighting";
/// The header line that names the recording the trace was rebuilt from.
const RECORDING: &str = "# recording";

fn weighting_name(w: Weighting) -> &'static str {
    match w {
        Weighting::Time => "time",
        Weighting::Count => "count",
    }
}

/// A written trace: its instructions' `function:offset` keys, their blocks
/// (`function:BB`, `function:?` when unknown), the span where another order scores as well
/// (if the reconstruction found one), how it was sampled and from what.
pub struct TraceFile {
    /// Each instruction's `function:offset`, in trace order.
    pub keys: Vec<String>,
    /// Each instruction's block (`function:BB`, `function:?`).
    pub blocks: Vec<String>,
    /// First and last trace positions of the span another order scores as well on
    /// (`# uncertain FIRST LAST: why`).
    pub uncertain: Option<(usize, usize)>,
    /// How the recording it came from was sampled, when the file says.
    pub weighting: Option<Weighting>,
    /// The recording it was rebuilt from, when the file says.
    pub recording: Option<PathBuf>,
    /// The class it rebuilds (instructions between marker hits), when the file names one.
    pub class: Option<u64>,
}

/// The instruction lines of a reconstruction: `0xADDRESS function:offset function:block:offset`.
pub(crate) fn trace_lines(rec: &Reconstruction, names: &Names) -> Vec<String> {
    rec.trace.iter().map(|i| format!("0x{:x} {} {}", i.addr, i.display(names, Granularity::Function), i.display(names, Granularity::Block))).collect()
}

/// The text of a trace file holding `rec` (its `lines` from [`trace_lines`]), rebuilt by
/// `by` from the recording at `recording`, sampled as `weighting`.
pub(crate) fn trace_text(rec: &Reconstruction, lines: &[String], by: Granularity, weighting: Weighting, recording: &Path) -> String {
    let mut text = format!("# kansoku reconstructed trace: {} instructions, solver {:?}, by {:?}\n", rec.trace.len(), rec.solver, by).to_lowercase();
    // Read back by `kansoku compare`: how to judge the trace, and where its samples are.
    text.push_str(&format!("{WEIGHTING} {}\n{RECORDING} {}\n", weighting_name(weighting), recording.display()));
    if let Some(length) = rec.split.iteration_length.filter(|_| rec.classes.is_some()) {
        // Read back by `kansoku compare`: the exact iterations of this length are its class.
        text.push_str(&format!("{CLASS} {length}\n"));
    }
    if let Some(a) = &rec.alternative {
        // Read back by `kansoku compare --svg` to draw the span.
        text.push_str(&format!("{UNCERTAIN} {} {}: another order scores {} and gives a different trace here\n", a.first_difference, a.last_difference, a.likelihood));
    }
    for l in lines {
        text.push_str(l);
        text.push('\n');
    }
    text
}

/// `function:BB` of a trace line's `function:BB:offset` column (`function:?` when the line
/// has no block: that column then equals the `function:offset` one).
fn block_group(function_offset: &str, block_form: &str) -> String {
    let function = function_of(function_offset);
    match block_form.rsplit_once(':') {
        Some((block, _)) if block_form != function_offset => block.to_string(),
        _ => format!("{function}:?"),
    }
}

/// The function of a `function:offset` key.
pub fn function_of(key: &str) -> &str {
    key.rsplit_once(':').map_or(key, |(f, _)| f)
}

/// Reads a trace file: its `function:offset` column, blocks, header lines.
pub fn read_trace(path: &Path) -> Result<TraceFile, FileError> {
    let text = kansoku_core::input::read_text(path, kansoku_core::input::MAX_TEXT_BYTES).map_err(|e| match e {
        kansoku_core::input::TextError::Io(cause) => FileError::Io { doing: "reading", path: path.to_path_buf(), cause },
        error => FileError::Text { path: path.to_path_buf(), error },
    })?;
    let bad = |n: usize, what: String| FileError::Line { path: path.to_path_buf(), line: n + 1, what };
    let mut keys = Vec::new();
    let mut blocks = Vec::new();
    let mut uncertain = None;
    let (mut weighting, mut recording, mut class) = (None, None, None);
    for (n, line) in text.lines().enumerate() {
        if let Some(rest) = line.strip_prefix(CLASS) {
            class = Some(rest.trim().parse::<u64>().map_err(|_| bad(n, format!("expected `{CLASS} LENGTH`, found '{line}'")))?);
            continue;
        }
        if let Some(rest) = line.strip_prefix(WEIGHTING) {
            weighting = match rest.trim() {
                "time" => Some(Weighting::Time),
                "count" => Some(Weighting::Count),
                other => return Err(bad(n, format!("expected `{WEIGHTING} time` or `{WEIGHTING} count`, found '{other}'"))),
            };
            continue;
        }
        if let Some(rest) = line.strip_prefix(RECORDING) {
            recording = Some(PathBuf::from(rest.trim()));
            continue;
        }
        if let Some(rest) = line.strip_prefix(UNCERTAIN) {
            let span = rest.split(':').next().unwrap_or("");
            let mut bounds = span.split_whitespace().map(str::parse::<usize>);
            let (Some(Ok(first)), Some(Ok(last))) = (bounds.next(), bounds.next()) else {
                return Err(bad(n, format!("expected `{UNCERTAIN} FIRST LAST: ...`, found '{line}'")));
            };
            uncertain = Some((first, last));
            continue;
        }
        if line.starts_with('#') || line.trim().is_empty() {
            continue;
        }
        let mut columns = line.split_whitespace().skip(1);
        let Some(key) = columns.next() else {
            return Err(bad(n, format!("expected `0xADDRESS function:offset ...`, found '{line}' (is this a reconstructed trace?)")));
        };
        blocks.push(block_group(key, columns.next().unwrap_or(key)));
        keys.push(key.to_string());
    }
    Ok(TraceFile { keys, blocks, uncertain, weighting, recording, class })
}
