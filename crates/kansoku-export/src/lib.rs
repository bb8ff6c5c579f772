//! # kansoku-export — kansoku's results in the formats profile viewers read
//!
//! The analyses compute; this crate only writes what they computed in other people's
//! formats, so a result opens where performance engineers already look:
//!
//! | format | from | opened by |
//! |---|---|---|
//! | [`callgrind`] | [`CostProfile`]: instructions per instruction address and source line, call arcs with inclusive cost | `callgrind_annotate FILE`, `kcachegrind FILE` |
//! | [`collapsed`] | [`CostProfile`]: instructions per call stack | `flamegraph.pl`, `inferno-flamegraph`, speedscope |
//! | [`pprof`] | [`CostProfile`]: instructions per call stack (a sample per stack, a location per function), the same per-function costs as the callgrind and collapsed exports | `go tool pprof -top FILE`, `-http` |
//! | [`firefox`] | a sampled recording's events ([`FirefoxProfile`]): a process per recorded process (pid and name), a thread per recorded thread, a sample's call chain as its stack (`perf record -g`; else one frame, the sampled address), the recorded modules as libraries with path, build id and mapping so the profiler symbolises, marker hits as instant markers and the stretches between them as `iteration` interval markers (numbered) | profiler.firefox.com (Load a profile from file), `samply load FILE` |
//! | [`perfetto`] | [`Timeline`]: one process's threads with nested slices, instants, side lanes and counters, and the run's metadata; made by [`events_timeline`] (event mode: a slice per call, off-CPU stretches), [`CallsPerfetto`] (an exact trace's calls, marker hits, iterations on the instruction index, written as the path analysis finds them with [`PerfettoWriter`], in memory that follows the open calls), [`wave_timeline`] (code and data address counters), [`sampling_timeline`] (the monitor's series as counters) | ui.perfetto.dev, Perfetto's `trace_processor` |
//!
//! Every writer takes the data and an `impl Write`; nothing here reads files, runs
//! programs or prints.
//!
//! [`CostProfile`]: kansoku_paths::CostProfile
//! [`perfetto`]: write_perfetto
//! [`firefox`]: FirefoxProfile

#![deny(missing_docs)]

mod callgrind;
mod collapsed;
mod firefox;
mod firefox_recording;
mod perfetto;
mod pprof;
mod timelines;

pub use callgrind::write_callgrind;
pub use collapsed::write_collapsed;
pub use firefox::{FirefoxProfile, FirefoxSummary, SampledRun};
pub use firefox_recording::write_firefox_recording;
pub use perfetto::{write_perfetto, ArgValue, PerfettoWriter, Args, CounterLane, Mark, SideLane, Span, ThreadLane, Timeline};
pub use pprof::{pprof_profile, write_pprof};
pub use timelines::{events_timeline, sampling_timeline, wave_timeline, CallsPerfetto, EventRun};

/// Interned names: each distinct name gets the next index, in first-use order (callgrind's
/// name compression and pprof's string table both number their names this way).
#[derive(Default)]
struct Interner {
    index: std::collections::HashMap<String, usize>,
    names: Vec<String>,
}

impl Interner {
    /// The index of `name`, and whether this is its first use.
    fn intern(&mut self, name: &str) -> (usize, bool) {
        if let Some(&i) = self.index.get(name) {
            return (i, false);
        }
        let i = self.names.len();
        self.names.push(name.to_string());
        self.index.insert(name.to_string(), i);
        (i, true)
    }
}

/// The formats this crate writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Format {
    /// Callgrind's profile data format (`callgrind.out.*`).
    Callgrind,
    /// One line per call stack: `outer;inner count`.
    Collapsed,
    /// pprof's `profile.proto`, gzip-compressed as pprof writes it.
    Pprof,
    /// Perfetto's trace (`perfetto.protos.Trace`, TrackEvent packets).
    Perfetto,
    /// The Firefox Profiler's processed profile (JSON).
    Firefox,
}

impl Format {
    /// Every format, in the order the documentation lists them.
    pub const ALL: [Format; 5] = [Format::Callgrind, Format::Collapsed, Format::Pprof, Format::Perfetto, Format::Firefox];

    /// The name users type (`callgrind`, `collapsed`, `pprof`, `perfetto`, `firefox`).
    pub fn name(self) -> &'static str {
        match self {
            Format::Callgrind => "callgrind",
            Format::Collapsed => "collapsed",
            Format::Pprof => "pprof",
            Format::Perfetto => "perfetto",
            Format::Firefox => "firefox",
        }
    }

    /// The format a name names.
    pub fn from_name(name: &str) -> Option<Format> {
        Format::ALL.into_iter().find(|f| f.name() == name)
    }
}

/// What can go wrong while writing an export.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ExportError {
    /// The output could not be written.
    #[error("writing the {format} export: {source}")]
    Write {
        /// The format being written.
        format: &'static str,
        /// What the writer said.
        source: std::io::Error,
    },
    /// The recording to export could not be opened or read (the reader's error names the
    /// file and the byte).
    #[error(transparent)]
    Recording(#[from] kansoku_core::RecordingError),
    /// The recording holds something other than samples (an exact trace, events).
    #[error("{}: holds {kind}, not samples; the firefox export shows sampled recordings (`kansoku record`, `kansoku sample`, perf.data)", path.display())]
    NotSamples {
        /// The recording.
        path: std::path::PathBuf,
        /// What it holds.
        kind: String,
    },
    /// The profile has nothing to write (no instructions in scope, no event on a timeline).
    #[error("the {0} export would be empty: the analysis found nothing in scope to show")]
    Empty(&'static str),
    /// A slice of a timeline cannot be laid out as Perfetto requires (nested on its track).
    #[error("the perfetto export cannot show slice `{slice}` at {start} on track `{track}`: {why}")]
    Slice {
        /// The track's title.
        track: String,
        /// The slice's name.
        slice: String,
        /// Where it starts.
        start: u64,
        /// What is wrong with it.
        why: &'static str,
    },
}
