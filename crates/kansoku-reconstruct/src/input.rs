//! Reading a sampled recording for a reconstruction: its samples symbolised into
//! [`Observation`]s (the kernel's and the probe's code dropped and counted), how it was
//! sampled, and the control-flow scores of the recorded program.

use std::collections::HashSet;
use std::path::Path;

use kansoku_binary::Symbolizer;
use kansoku_core::{Event, Header, Module, RecordingKind};

use crate::error::FileError;
use crate::{ControlFlow, Names, Observation, Warning, Weighting};

/// A sampled recording, symbolised into observations.
pub struct Loaded {
    /// The recording's header.
    pub header: Header,
    /// The function names the observations' ids refer to.
    pub names: Names,
    /// Samples, marker hits and quiet runs, in recording order.
    pub observations: Vec<Observation>,
    /// Whether the samples count instructions or time.
    pub weighting: Weighting,
    /// The sampling period in instructions, when the recording names one.
    pub period: Option<u64>,
    /// The recorded modules (for control-flow scores).
    pub modules: Vec<Module>,
    /// The marker function the recording was cut at, when the header names it.
    pub marker: Option<String>,
    /// What loading found wrong (damage, unsymbolised samples, probe code dropped).
    pub warnings: Vec<Warning>,
    /// How long the iterations lasted, with and without a sample.
    pub durations: crate::info::Durations,
}

/// Addresses from here up are the kernel's (x86-64 canonical upper half).
const KERNEL_START: u64 = 0xffff_8000_0000_0000;

/// Reads and symbolises a sampled recording (`.ksk` or perf.data).
pub fn load_samples(path: &Path) -> Result<Loaded, FileError> {
    let mut reader = kansoku_perfdata::AnyRecording::open(path)?;
    let header = reader.header().clone();
    if header.kind != RecordingKind::Samples {
        return Err(FileError::NotSamples { path: path.to_path_buf(), kind: header.kind });
    }
    // The marker's function as samples are symbolised: named by the recorder, else from
    // the spec (`adler32@libz` → `adler32`; `adler32@plt` is the stub's own name).
    let marker = header
        .parameters
        .get("marker_function")
        .or_else(|| header.parameters.get("marker"))
        .and_then(|v| v.as_str())
        .map(|m| kansoku_core::marker::marker_function_name(m).to_string());
    let mut sym = Symbolizer::new(&[]);
    let mut names = Names::new();
    // Marker hits no sample separates are collapsed as they are read: memory follows the
    // samples, not the hits (50 M hits of a tight loop).
    let mut observations = crate::info::Compactor::default();
    let (mut kernel, mut outside, mut samples, mut at_marker) = (0u64, 0u64, 0u64, 0u64);
    while let Some(event) = reader.next_event()? {
        match event {
            Event::Module(m) => sym.add_module(m),
            Event::Sample(s) => {
                samples += 1;
                let loc = sym.locate(s.ip);
                // Not the program's code: the kernel, or outside every recorded module (the
                // uprobe trampoline page [uprobes] that the marker probe executes). Their
                // instructions are not the region's; dropped and counted.
                if s.ip >= KERNEL_START {
                    kernel += 1;
                    continue;
                }
                if loc.module.is_none() {
                    outside += 1;
                    continue;
                }
                at_marker += (loc.offset <= 1 && marker.as_deref() == Some(loc.function.as_str())) as u64;
                observations.push(Observation::Sample { info: names.info(&loc, s.ip), time_ns: s.time_ns, instructions: s.instructions });
            }
            Event::Marker { time_ns, instructions } => observations.push(Observation::Marker { time_ns, instructions }),
            _ => {}
        }
    }
    let mut warnings: Vec<Warning> = std::mem::take(&mut sym.warnings)
        .into_iter()
        .map(|w| Warning::new("unsymbolised", w, "keep the recorded program and libraries where they were recorded (or give their debug files)"))
        .collect();
    warnings.extend(reader.warnings().iter().map(|w| Warning::new("records_lost", w.clone(), "record with a larger ring buffer (perf record -m PAGES) or a longer period")));
    if let Some(note) = reader.process_selection() {
        warnings.push(Warning::new("other_processes_left_out", note.to_string(), "record the program alone (perf record without -a) to reconstruct it with nothing left out"));
    }
    if kernel + outside > 0 {
        let share = |n: u64| 100.0 * n as f64 / samples.max(1) as f64;
        warnings.push(Warning::new("samples_dropped", format!(
            "{} of {samples} samples dropped: {kernel} ({:.1} %) in kernel code, {outside} ({:.1} %) outside the recorded modules (the uprobe trampoline the marker probe runs, or code mapped without a module event); the trace holds the program's own instructions only",
            kernel + outside,
            share(kernel),
            share(outside)
        ), "nothing to fix: they are not the program's instructions; they are left out of the trace"));
    }
    if let Some(at) = reader.truncated_at() {
        warnings.push(Warning::new("recording_cut", format!("{} is cut off at byte {at}; using what was readable", path.display()), "record again and let the recorder finish"));
    }
    if at_marker * 10 > samples {
        // The marker's uprobe traps on the first instruction and resumes the program at the
        // second; a timer sample taken during the trap reports one of them as the user
        // address. Kept (the instructions do run), but said.
        warnings.push(Warning::new("probe_time_in_trace", format!(
            "{at_marker} of {samples} samples ({:.1} %) fell on the marker's first two instructions, where its uprobe traps into the kernel and resumes: most of that is the probe's time, not the program's; the trace and its time shares carry it",
            100.0 * at_marker as f64 / samples.max(1) as f64
        ), "kansoku record --marker-by agent (a marker of about 20 ns, no trap)"));
    }
    let weighting = match header.parameters.get("clock").and_then(|v| v.as_str()) {
        Some("cpu-clock") => Weighting::Time,
        _ => Weighting::Count,
    };
    let period = header.parameters.get("period").and_then(|v| v.as_u64());
    let modules = sym.modules().to_vec();
    let durations = std::mem::take(&mut observations.durations);
    let observations = observations.finish();
    Ok(Loaded { header, names, observations, weighting, period, modules, marker, warnings, durations })
}


/// The function and block (`function:BB`, `function:?`) of every sample of the program's
/// code between the first and the last marker hit (all samples when there are no markers).
pub(crate) fn sample_groups(path: &Path) -> Result<(Vec<String>, Vec<String>), FileError> {
    let loaded = load_samples(path)?;
    let marker_at: Vec<usize> =
        loaded.observations.iter().enumerate().filter(|(_, o)| matches!(o, Observation::Marker { .. })).map(|(i, _)| i).collect();
    let range = match (marker_at.first(), marker_at.last()) {
        (Some(&a), Some(&b)) if a < b => a..b,
        _ => 0..loaded.observations.len(),
    };
    let (mut functions, mut blocks) = (Vec::new(), Vec::new());
    for o in &loaded.observations[range] {
        if let Observation::Sample { info, .. } = o {
            let f = loaded.names.name(info.function);
            blocks.push(if info.block >= 0 { format!("{f}:{}", info.block) } else { format!("{f}:?") });
            functions.push(f.to_string());
        }
    }
    if functions.is_empty() {
        return Err(FileError::Invalid {
            path: path.to_path_buf(),
            what: "no samples of the program's code between marker hits, so there are no time shares to compare with".into(),
        });
    }
    Ok((functions, blocks))
}

/// The successor relation of the modules holding `sampled` addresses (decoded by
/// `kansoku_binary::static_successors`), as the reconstruction scores it; what could not
/// be decoded is added to `warnings`.
pub(crate) fn control_flow(modules: &[Module], sampled: &HashSet<u64>, marker: Option<&str>, warnings: &mut Vec<String>) -> ControlFlow {
    let relation = kansoku_binary::static_successors(modules, sampled, marker);
    warnings.extend(relation.warnings.iter().map(|w| format!("--likelihood cfg: {w}")));
    ControlFlow::new(&relation.successors, sampled.iter().copied(), relation.entry).with_calls(&relation.calls, &relation.returns)
}

