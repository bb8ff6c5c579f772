//! `--export FORMAT=FILE`, shared by the commands that write results for other viewers:
//! the flag's parser, the check that a command can write the formats asked for, and the
//! files created before the program runs.

use std::fs::File;
use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use kansoku_export::Format;

/// One `--export`: the format and the file.
pub type Export = (Format, PathBuf);

/// `--export FORMAT=FILE`.
pub fn parse_export(s: &str) -> Result<Export, String> {
    let names = Format::ALL.map(Format::name).join(", ");
    let (name, file) = s.split_once('=').ok_or_else(|| format!("expected FORMAT=FILE (FORMAT one of {names})"))?;
    let format = Format::from_name(name).ok_or_else(|| format!("unknown export format `{name}` (known: {names})"))?;
    if file.is_empty() {
        return Err(format!("--export {name}= needs a file name after `=`"));
    }
    Ok((format, PathBuf::from(file)))
}

/// Creates the export files once every format asked for is one `command` writes (`can`):
/// a format it cannot write, or a path that cannot be created, is said at once, not after
/// a long run whose results would then be lost.
pub fn create_exports(exports: &[Export], can: &[Format], command: &str) -> Result<Vec<File>> {
    if let Some((format, _)) = exports.iter().find(|(f, _)| !can.contains(f)) {
        let names: Vec<&str> = can.iter().map(|f| f.name()).collect();
        bail!("--export {}: `{command}` writes {} (its results have no {} form)", format.name(), names.join(", "), format.name());
    }
    exports.iter().map(|(_, path)| File::create(path).with_context(|| format!("creating {}", path.display()))).collect()
}

/// What to say once an export is written: where it is and how to open it.
pub fn written(format: Format, path: &std::path::Path) -> String {
    let p = path.display();
    let open = match format {
        Format::Callgrind => format!("callgrind_annotate {p} (or kcachegrind {p})"),
        Format::Collapsed => format!("flamegraph.pl {p} > flame.svg (or inferno-flamegraph {p})"),
        Format::Pprof => format!("go tool pprof -top {p} (or -http=: {p})"),
        Format::Perfetto => format!("ui.perfetto.dev (Open trace file: {p}), or Perfetto's trace_processor {p}"),
        Format::Firefox => format!("profiler.firefox.com (Load a profile from file: {p}), or samply load {p}"),
        _ => p.to_string(),
    };
    format!("{} export written to {p}: open with {open}", format.name())
}
