//! A sampled recording (kansoku's `.ksk` or perf's perf.data) read event by event into a
//! [`FirefoxProfile`]: every process and call chain it holds, and each module's link-time
//! address found in its file, which is what the profiler looks symbols up by.

use std::collections::HashMap;
use std::io::Write;
use std::path::Path;

use kansoku_core::{Header, Module, RecordingKind};
use kansoku_perfdata::{AnyRecording, Item};

use crate::firefox::{FirefoxProfile, FirefoxSummary, SampledRun};
use crate::ExportError;

/// Nominal time between samples when the recording samples on instructions (no time
/// period): the profiler only uses it to draw a sample's width.
const NOMINAL_INTERVAL_NS: u64 = 1_000_000;

/// Writes the Firefox Profiler profile of the sampled recording at `recording` to `out`.
/// Returns what was written and the warnings to show the user: modules whose file is not
/// readable here or not the recorded build, the reader's own warnings, a cut-off file.
pub fn write_firefox_recording(recording: &Path, out: impl Write) -> Result<(FirefoxSummary, Vec<String>), ExportError> {
    let mut reader = AnyRecording::open(recording)?;
    let header = reader.header().clone();
    if header.kind != RecordingKind::Samples {
        return Err(ExportError::NotSamples { path: recording.to_path_buf(), kind: format!("{:?}", header.kind) });
    }
    let mut profile = FirefoxProfile::new(sampled_run(&header));
    let mut images = ImageAddresses::default();
    // every process and call chain (a perf.data of `perf record -a -g`)
    while let Some(item) = reader.next_item()? {
        match item {
            Item::Context { pid, tid, process, thread } => profile.enter(pid, tid, &process, &thread),
            Item::Stack(frames) => profile.set_stack(frames),
            Item::Event(kansoku_core::Event::Module(m)) => {
                let image_address = images.of(&m);
                profile.add_module(&m, image_address, images.functions(&m))
            }
            Item::Event(e) => profile.add_event(&e),
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
fn sampled_run(header: &Header) -> SampledRun {
    let param = |k: &str| header.parameters.get(k);
    let time_period = param("time_period_ns").and_then(|v| v.as_u64()).filter(|_| param("clock").and_then(|c| c.as_str()) == Some("cpu-clock"));
    SampledRun {
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
    programs: HashMap<String, Option<kansoku_binary::Program>>,
    /// Each file's functions (link-time address, size, demangled name), once it was read.
    functions: HashMap<String, Vec<(u64, u64, String)>>,
    warnings: Vec<String>,
}

impl ImageAddresses {
    /// The functions of `m`'s file, when it was read by [`Self::of`] and is the recorded build.
    fn functions(&mut self, m: &Module) -> &[(u64, u64, String)] {
        let program = self.programs.get(&m.path).and_then(|p| p.as_ref()).filter(|p| m.build_id.is_none() || p.build_id == m.build_id);
        self.functions
            .entry(m.path.clone())
            .or_insert_with(|| program.map(|p| p.functions().iter().map(|f| (f.address, f.size, kansoku_binary::program::demangle(&f.name))).collect()).unwrap_or_default())
    }

    /// The link-time address of `m.file_offset` in `m`'s file. Where the file cannot be
    /// read, or is not the recorded one (another build id), the file offset stands in
    /// (equal for the usual PIE layout), said once.
    fn of(&mut self, m: &Module) -> u64 {
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
