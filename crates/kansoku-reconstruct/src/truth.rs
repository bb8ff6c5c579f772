//! The exact trace a reconstruction is judged against: one complete iteration of it (marker
//! hit to marker hit), the first iteration of a class, and the judgements (`compare`'s
//! report: exact-iteration scores, and for a time-weighted trace what it claims).

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use kansoku_binary::Symbolizer;
use kansoku_core::{Event, Location, RecordingKind, RecordingReader};
use serde::Serialize;

use crate::error::FileError;
use crate::trace_file::{function_of, TraceFile};
use crate::{compare, compare_order, compare_shares, Comparison, OrderComparison, ShareComparison};

/// `kansoku compare`'s result: the exact-iteration scores and, for a time-weighted trace,
/// the scores of what it claims (order of distinct instructions, time shares).
#[derive(Serialize)]
pub struct CompareReport {
    /// The trace scored against the exact iteration.
    #[serde(flatten)]
    pub comparison: Comparison,
    /// The exact iteration compared with, and the class (instructions between marker
    /// hits) the trace names, whose first exact iteration is the default.
    pub iteration: usize,
    /// The class the trace names, if it names one.
    pub class: Option<u64>,
    /// For a time-weighted trace: what it claims, judged.
    pub weighted: Option<WeightedComparison>,
    /// The exact trace ran on Valgrind's CPU: what of its iteration may differ on the real one.
    pub engine_note: Option<EngineNote>,
}

/// What of an exact iteration traced on the Valgrind engine lies in code whose path the
/// CPU's features choose (libc's string routines, the loader's lazy binding): there a
/// trace of the real CPU, which the samples come from, may run other instructions.
#[derive(Serialize)]
pub struct EngineNote {
    /// The engine that traced it (`valgrind`).
    pub engine: String,
    /// Instructions of the exact iteration.
    pub instructions: usize,
    /// Instructions of the iteration outside the traced program, per library.
    pub in_libraries: Vec<(String, usize)>,
}

/// [`EngineNote`] for `exact` when the Valgrind engine made it, else `None`.
pub fn engine_note(exact: &Path, iteration: usize) -> Result<Option<EngineNote>, FileError> {
    let mut reader = RecordingReader::open(exact)?;
    let engine = reader.header().parameters.get("engine").and_then(|e| e.as_str()).unwrap_or("ptrace").to_string();
    if engine != "valgrind" {
        return Ok(None);
    }
    let program = PathBuf::from(&reader.header().program);
    let program = program.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let mut modules: Vec<kansoku_core::Module> = Vec::new();
    let mut per_library: BTreeMap<String, usize> = BTreeMap::new();
    let (mut markers, mut instructions) = (0usize, 0usize);
    while let Some(event) = reader.next_event()? {
        match event {
            Event::Module(m) => modules.push(m),
            Event::Marker { .. } => {
                markers += 1;
                if markers == iteration + 2 {
                    break;
                }
            }
            Event::Instruction { addr } if markers == iteration + 1 || markers == 0 => {
                instructions += 1;
                let name = modules.iter().rev().find(|m| m.contains(addr)).map_or("(no module)", |m| m.short_name());
                if name != program {
                    *per_library.entry(name.to_string()).or_default() += 1;
                }
            }
            _ => {}
        }
    }
    let mut in_libraries: Vec<(String, usize)> = per_library.into_iter().collect();
    in_libraries.sort_by_key(|l| std::cmp::Reverse(l.1));
    Ok(Some(EngineNote { engine, instructions, in_libraries }))
}

/// A time-weighted trace judged by what it claims (the metrics are defined in
/// [`crate::metrics`] and docs/rooms/seed000-reconstruct.md).
#[derive(Serialize)]
pub struct WeightedComparison {
    /// The sampled recording the shares are taken from.
    pub samples: PathBuf,
    /// Samples between the first and the last marker hit (the iterations the trace stands for).
    pub samples_counted: usize,
    /// The order of distinct instructions against the exact iteration's.
    pub order: OrderComparison,
    /// Time shares by function.
    pub functions: ShareComparison,
    /// Time shares by block.
    pub blocks: ShareComparison,
}

/// Judges a time-weighted trace: its order against the exact iteration, its function and
/// block shares against the samples' (and the exact iteration's instructions').
pub fn compare_weighted(trace: &TraceFile, exact: &Path, iteration: usize, samples: &Path) -> Result<WeightedComparison, FileError> {
    let truth = exact_iteration_by(exact, iteration, |l| {
        let block = l.block.map_or_else(|| format!("{}:?", l.function), |b| format!("{}:{b}", l.function));
        (l.function_offset(), block)
    })?;
    let mut ids: HashMap<&str, u64> = HashMap::new();
    let t: Vec<u64> = truth.iter().map(|(k, _)| intern(&mut ids, k)).collect();
    let r: Vec<u64> = trace.keys.iter().map(|k| intern(&mut ids, k)).collect();
    let order = compare_order(&r, &t);
    let (sample_functions, sample_blocks) = crate::input::sample_groups(samples)?;
    let trace_functions: Vec<&str> = trace.keys.iter().map(|k| function_of(k)).collect();
    let exact_functions: Vec<&str> = truth.iter().map(|(k, _)| function_of(k)).collect();
    let exact_blocks: Vec<&str> = truth.iter().map(|(_, b)| b.as_str()).collect();
    Ok(WeightedComparison {
        samples: samples.to_path_buf(),
        samples_counted: sample_functions.len(),
        order,
        functions: compare_shares(&trace_functions, &as_strs(&sample_functions), &exact_functions),
        blocks: compare_shares(&as_strs(&trace.blocks), &as_strs(&sample_blocks), &exact_blocks),
    })
}

/// A number for each distinct key, in order of first appearance.
fn intern<'a>(ids: &mut HashMap<&'a str, u64>, key: &'a str) -> u64 {
    let n = ids.len() as u64;
    *ids.entry(key).or_insert(n)
}

fn as_strs(v: &[String]) -> Vec<&str> {
    v.iter().map(String::as_str).collect()
}

/// `function:offset` of every instruction of one complete iteration of an exact trace
/// (marker to next marker), or of the whole trace when it has no markers.
pub fn exact_iteration(path: &Path, iteration: usize) -> Result<Vec<String>, FileError> {
    exact_iteration_by(path, iteration, |l| l.function_offset())
}

/// An exact trace at `path`, opened and checked to be one.
fn open_exact(path: &Path) -> Result<RecordingReader, FileError> {
    let reader = RecordingReader::open(path)?;
    if reader.header().kind != RecordingKind::ExactTrace {
        return Err(FileError::NotExact { path: path.to_path_buf() });
    }
    Ok(reader)
}

/// [`exact_iteration`] with each instruction's location reduced by `key`.
pub(crate) fn exact_iteration_by<T>(path: &Path, iteration: usize, mut key: impl FnMut(Location) -> T) -> Result<Vec<T>, FileError> {
    let invalid = |what: String| FileError::Invalid { path: path.to_path_buf(), what };
    let mut reader = open_exact(path)?;
    let Some(end_marker) = iteration.checked_add(2) else {
        return Err(invalid(format!("iteration {iteration} cannot exist (marker hits are counted in 64 bits)")));
    };
    let mut sym = Symbolizer::new(&[]);
    let mut markers = 0usize;
    let mut all = Vec::new();
    let mut window = Vec::new();
    let mut complete = false;
    while let Some(event) = reader.next_event()? {
        match event {
            Event::Module(m) => sym.add_module(m),
            Event::Marker { .. } => {
                markers += 1;
                if markers == end_marker {
                    complete = true;
                    break;
                }
            }
            Event::Instruction { addr } => {
                if markers == iteration + 1 {
                    window.push(key(sym.locate(addr)));
                } else if markers == 0 && all.len() < 50_000_000 {
                    all.push(key(sym.locate(addr)));
                }
            }
            _ => {}
        }
    }
    if markers == 0 {
        if iteration != 0 {
            return Err(invalid(format!("the trace has no marker hits, so it is one iteration (0), not {iteration}")));
        }
        if all.is_empty() {
            return Err(invalid("the trace holds no instructions to compare with (was the recording cut before the first one?)".into()));
        }
        return Ok(all);
    }
    if !complete {
        return Err(invalid(format!("iteration {iteration} is not complete (the trace holds {markers} marker hits); trace more iterations")));
    }
    if window.is_empty() {
        return Err(invalid(format!("iteration {iteration} holds no instructions")));
    }
    Ok(window)
}

/// The first complete iteration of the exact trace at `path` that is `length` instructions
/// long (marker hit to marker hit): the iteration a trace of that class is compared with.
/// Without a length, or without markers, 0.
pub fn iteration_of_class(path: &Path, length: Option<u64>) -> Result<usize, FileError> {
    let Some(length) = length else { return Ok(0) };
    let mut reader = open_exact(path)?;
    let (mut markers, mut count) = (0usize, 0u64);
    let mut lengths: BTreeMap<u64, usize> = BTreeMap::new();
    while let Some(event) = reader.next_event()? {
        match event {
            Event::Marker { .. } => {
                if markers > 0 {
                    if count == length {
                        return Ok(markers - 1);
                    }
                    *lengths.entry(count).or_default() += 1;
                }
                markers += 1;
                count = 0;
            }
            Event::Instruction { .. } => count += 1,
            _ => {}
        }
    }
    if markers == 0 {
        return Ok(0);
    }
    let seen: Vec<String> = lengths.iter().rev().take(8).map(|(l, n)| format!("{n} × {l}")).collect();
    Err(FileError::Invalid {
        path: path.to_path_buf(),
        what: format!(
            "no complete iteration is {length} instructions long, the trace's class (its {} complete iterations: {}); give --iteration N, or trace more iterations",
            markers.saturating_sub(1),
            seen.join(", ")
        ),
    })
}

/// Compares `function:offset` keys with one iteration of an exact trace.
pub fn compare_keys(keys: &[String], exact: &Path, iteration: usize) -> Result<Comparison, FileError> {
    let truth = exact_iteration(exact, iteration)?;
    let mut ids: HashMap<&str, u64> = HashMap::new();
    let t: Vec<u64> = truth.iter().map(|k| intern(&mut ids, k)).collect();
    let r: Vec<u64> = keys.iter().map(|k| intern(&mut ids, k)).collect();
    Ok(compare(&r, &t))
}
