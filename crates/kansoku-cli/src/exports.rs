//! `--export FORMAT=FILE`, shared by the commands that write results for other viewers:
//! the flag's parser, the check that a command can write the formats asked for, and the
//! files created before the program runs.

use std::fs::File;
use std::path::{Path, PathBuf};

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

/// Nominal time between samples when the recording samples on instructions (no time
/// period): the profiler only uses it to draw a sample's width.
const NOMINAL_INTERVAL_NS: u64 = 1_000_000;

/// `--export firefox=FILE` of a sampled recording (kansoku's `.ksk` or perf's perf.data):
/// read event by event into the profile, each module's link-time address found in its file.
/// Returns what was written and the warnings to print.
pub fn write_firefox(recording: &Path, out: File) -> Result<(kansoku_export::FirefoxSummary, Vec<String>)> {
    let mut reader = kansoku_perfdata::AnyRecording::open(recording)?;
    let header = reader.header().clone();
    if header.kind != kansoku_core::RecordingKind::Samples {
        bail!("{}: holds {:?}, not samples; the firefox export shows sampled recordings (`kansoku record`, `kansoku sample`, perf.data)", recording.display(), header.kind);
    }
    let mut profile = kansoku_export::FirefoxProfile::new(sampled_run(&header));
    let mut images = ImageAddresses::default();
    // every process and call chain (a perf.data of `perf record -a -g`)
    while let Some(item) = reader.next_item()? {
        match item {
            kansoku_perfdata::Item::Context { pid, tid, process, thread } => profile.enter(pid, tid, &process, &thread),
            kansoku_perfdata::Item::Stack(frames) => profile.set_stack(frames),
            kansoku_perfdata::Item::Event(kansoku_core::Event::Module(m)) => {
                let image_address = images.of(&m);
                profile.add_module(&m, image_address, images.functions(&m))
            }
            kansoku_perfdata::Item::Event(e) => profile.add_event(&e),
        }
    }
    let mut warnings = images.warnings;
    warnings.extend(reader.warnings().iter().cloned());
    if let Some(at) = reader.truncated_at() {
        warnings.push(format!("{} is cut off at byte {at}; exported what was readable", recording.display()));
    }
    Ok((profile.write(out)?, warnings))
}

/// The run as the profile states it, from the recording's header.
fn sampled_run(header: &kansoku_core::Header) -> kansoku_export::SampledRun {
    let param = |k: &str| header.parameters.get(k);
    let time_period = param("time_period_ns").and_then(|v| v.as_u64()).filter(|_| param("clock").and_then(|c| c.as_str()) == Some("cpu-clock"));
    kansoku_export::SampledRun {
        program: header.program.clone(),
        started_s: header.created,
        interval_ns: time_period.unwrap_or(NOMINAL_INTERVAL_NS),
        time_sampling: time_period.is_some(),
        marker: param("marker").and_then(|v| v.as_str()).map(str::to_string),
    }
}

/// Link-time addresses of recorded modules, each file read once.
#[derive(Default)]
struct ImageAddresses {
    programs: std::collections::HashMap<String, Option<kansoku_binary::Program>>,
    /// Each file's functions (link-time address, size, demangled name), once it was read.
    functions: std::collections::HashMap<String, Vec<(u64, u64, String)>>,
    warnings: Vec<String>,
}

impl ImageAddresses {
    /// The functions of `m`'s file, when it was read by [`Self::of`] and is the recorded build.
    fn functions(&mut self, m: &kansoku_core::Module) -> &[(u64, u64, String)] {
        let program = self.programs.get(&m.path).and_then(|p| p.as_ref()).filter(|p| m.build_id.is_none() || p.build_id == m.build_id);
        self.functions
            .entry(m.path.clone())
            .or_insert_with(|| program.map(|p| p.functions().iter().map(|f| (f.address, f.size, kansoku_binary::program::demangle(&f.name))).collect()).unwrap_or_default())
    }

    /// The link-time address of `m.file_offset` in `m`'s file: what the profiler looks
    /// symbols up by. Where the file cannot be read, or is not the recorded one (another
    /// build id), the file offset stands in (equal for the usual PIE layout), said once.
    fn of(&mut self, m: &kansoku_core::Module) -> u64 {
        let program = self.programs.entry(m.path.clone()).or_insert_with(|| kansoku_binary::Program::open(&m.path).ok());
        let found = program.as_ref().filter(|p| m.build_id.is_none() || p.build_id == m.build_id).and_then(|p| p.vaddr_of_file_offset(m.file_offset));
        match found {
            Some(a) => a,
            None => {
                if m.path.starts_with('/') && !self.warnings.iter().any(|w| w.starts_with(&m.path)) {
                    self.warnings.push(format!("{}: not readable here or not the recorded build; its addresses are given as file offsets, which the profiler may symbolise wrongly", m.path));
                }
                m.file_offset
            }
        }
    }
}
