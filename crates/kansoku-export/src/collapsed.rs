//! Collapsed stacks, the input of flame graph tools (`flamegraph.pl`, `inferno`): one line
//! per distinct call stack, frames outermost first separated by `;`, then a space and the
//! instructions executed with that stack innermost.

use std::io::Write;

use kansoku_paths::CostProfile;

use crate::ExportError;

/// A frame name as the format allows it: `;` separates frames and a newline ends the
/// line, so both become `_` (no C or demangled Rust/C++ name normally holds them).
fn frame_name(name: &str) -> String {
    name.replace([';', '\n', '\r'], "_")
}

/// Writes `profile`'s stacks (one line each, heaviest first). The profile must have been
/// made with the call tracker (`AnalysisOptions::track_calls`); one without stacks is
/// [`ExportError::Empty`].
pub fn write_collapsed(profile: &CostProfile, mut out: impl Write) -> Result<(), ExportError> {
    if profile.stacks.is_empty() {
        return Err(ExportError::Empty("collapsed"));
    }
    let mut lines: Vec<(String, u64)> = profile
        .stacks
        .iter()
        .map(|s| {
            let names: Vec<String> = s.frames.iter().map(|&f| frame_name(&profile.functions[f].name)).collect();
            (names.join(";"), s.instructions)
        })
        .collect();
    lines.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    let io = |source| ExportError::Write { format: "collapsed", source };
    for (stack, n) in lines {
        writeln!(out, "{stack} {n}").map_err(io)?;
    }
    out.flush().map_err(io)
}
