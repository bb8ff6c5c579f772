//! The agent's hits analysed while the program runs (issue 44): kansoku drains the rings
//! every millisecond (and between parts of a long batch) and hands the hits to a [`kansoku_monitor::events::Analysis`], which
//! keeps counts, sums and distributions per routine and the open activations per thread,
//! never the hits. Memory stays flat over hours of a hot probe, and the report is ready
//! when the program ends.
//!
//! Two things must be known before a hit can be analysed:
//!
//! * **Its time in CLOCK_MONOTONIC ns**, the clock of the kernel's context switches, which
//!   calls leave out. The agent stamps with the TSC; every [`KNOT_NS`] kansoku reads a
//!   (TSC, CLOCK_MONOTONIC) pair after draining, and the hits drained since the previous
//!   pair are placed on the line between the two. A line through two pairs tens of
//!   milliseconds apart is exact to the pairs' own error (tens of ns), and no drift adds
//!   up over an hour, as one line through the run's start and end would.
//! * **The overhead to subtract** (`--calibrate`): the agent times its empty routine before
//!   `main`, before it says it is ready, so those hits are all in the rings when kansoku
//!   lets the program go; the hits wait until then.
//!
//! Context switches are paired into off-CPU stretches up to the same pair's time: every
//! switch before it was written to the kernel's buffers before kansoku read them.

use kansoku_monitor::events::{calibrate, calibration_differences, Analysis, Calibration, EventReport, Hit, OffCpu, Point};

use crate::perf::{PerfRecord, SamplingClock, Session, SessionOptions};
use crate::points::clock::TimeBase;

/// Hits kept in memory (16 bytes each): a program that runs on for hours under a hot probe
/// must not exhaust kansoku's memory. Later hits are counted as lost.
pub const MAX_HITS: usize = 64 << 20;

/// Hits wait this long (ns of CLOCK_MONOTONIC) for the next (TSC, CLOCK_MONOTONIC) pair.
pub const KNOT_NS: u64 = 20_000_000;

/// While a batch is analysed the rings are drained every this many hits: a batch of a hot
/// probe takes milliseconds, in which a ring (a few ms of a tight loop's hits) would fill
/// and the program wait for room.
const HITS_BETWEEN_DRAINS: usize = 16_384;

/// Those drains stop when this many hits wait for the next pair (8 MiB): when the analysis
/// is slower than the program, the rings fill and the program waits, as without them.
const RAW_ROOM: usize = 1 << 19;

/// The analysis of an agent run, fed batch by batch.
pub(crate) struct Online {
    points: Vec<Point>,
    routines: usize,
    /// The calibration pair's points, when calibrating.
    calibration_points: Option<(u32, u32)>,
    /// The calibration and the analysis, once the calibration is known.
    analysis: Option<(Option<Calibration>, Analysis)>,
    tsc: bool,
    /// The last (TSC, CLOCK_MONOTONIC) pair.
    knot: (u64, u64),
    /// Hits in the agent's stamps, since the last pair.
    raw: Vec<Hit>,
    /// Hits in ns waiting for the calibration.
    waiting: Vec<Hit>,
    /// Hits of uprobes (kansoku's fallback), stamped in ns already.
    uprobe: Vec<Hit>,
    /// Every hit in ns, in the order analysed, when they are kept (for an export).
    pub(crate) kept: Option<Vec<Hit>>,
    /// Every off-CPU stretch, when the hits are kept.
    pub(crate) kept_off: Option<Vec<OffCpu>>,
    /// Hits beyond what is kept, counted.
    pub(crate) over: u64,
    /// Hits read so far.
    pub(crate) seen: u64,
}

impl Online {
    pub(crate) fn new(points: Vec<Point>, routines: usize, calibration_points: Option<(u32, u32)>, tsc: bool, start: (u64, u64), keep: bool) -> Online {
        let analysis = calibration_points.is_none().then(|| (None, Analysis::new(&points, routines, None)));
        Online { points, routines, calibration_points, analysis, tsc, knot: start, raw: Vec::new(), waiting: Vec::new(), uprobe: Vec::new(), kept: keep.then(Vec::new), kept_off: keep.then(Vec::new), over: 0, seen: 0 }
    }

    /// The buffer the rings are drained into (hits in the agent's stamps).
    pub(crate) fn raw(&mut self) -> &mut Vec<Hit> {
        &mut self.raw
    }

    /// The buffer uprobe hits are drained into.
    pub(crate) fn uprobe(&mut self) -> &mut Vec<Hit> {
        &mut self.uprobe
    }

    /// Hits read and not yet analysed.
    pub(crate) fn pending(&self) -> usize {
        self.raw.len() + self.waiting.len() + self.uprobe.len()
    }

    /// Called after each drain with a (TSC, CLOCK_MONOTONIC) pair read after it: when the
    /// last pair is [`KNOT_NS`] old (or `last`: the program has ended), the hits drained
    /// since are put in ns and analysed. `calibrated`: every calibration hit has been
    /// drained (the program was let go). `refill` drains the rings into the buffer it is
    /// given; it is called between parts of a long batch (the program goes on meanwhile).
    pub(crate) fn step(&mut self, pair: (u64, u64), switches: &mut SwitchLog, calibrated: bool, last: bool, refill: &mut dyn FnMut(&mut Vec<Hit>)) {
        if !last && pair.1.saturating_sub(self.knot.1) < KNOT_NS {
            return;
        }
        let line = TimeBase::new(self.tsc, self.knot, pair);
        self.knot = pair;
        self.seen += (self.raw.len() + self.uprobe.len()) as u64;
        self.waiting.extend(self.raw.drain(..).map(|h| Hit { time_ns: line.ns(h.time_ns), ..h }));
        if !self.uprobe.is_empty() {
            // one thread's agent and uprobe hits, in the order they happened
            self.waiting.append(&mut self.uprobe);
            self.waiting.sort_by_key(|h| h.time_ns);
        }
        if self.analysis.is_none() && (calibrated || last) {
            let calibration = self.calibration_points.and_then(|(a, b)| calibrate(&calibration_differences(&self.waiting, a, b)));
            self.analysis = Some((calibration, Analysis::new(&self.points, self.routines, calibration.map(|c| c.overhead_ns))));
        }
        let Some((_, analysis)) = self.analysis.as_mut() else { return };
        let stretches = switches.stretches_until(if last { u64::MAX } else { pair.1 });
        for &o in &stretches {
            analysis.off_cpu(o);
        }
        if let Some(kept) = self.kept_off.as_mut() {
            kept.extend(stretches);
        }
        for part in self.waiting.chunks(HITS_BETWEEN_DRAINS) {
            for &h in part {
                analysis.hit(h);
            }
            if self.raw.len() < RAW_ROOM {
                refill(&mut self.raw);
            }
        }
        if let Some(kept) = self.kept.as_mut() {
            let room = MAX_HITS.saturating_sub(kept.len());
            self.over += self.waiting.len().saturating_sub(room) as u64;
            kept.extend(self.waiting.iter().take(room));
        }
        self.waiting.clear();
    }

    /// The report, with the points and routines as named at the end; `None` if [`step`]
    /// was never called with `last`.
    pub(crate) fn report(self, points: &[Point], routines: &[String], measured_ns: u64, resolution_ns: f64) -> Option<(Option<Calibration>, EventReport)> {
        let (calibration, analysis) = self.analysis?;
        Some((calibration, analysis.report(points, routines, measured_ns, resolution_ns)))
    }
}

/// Off-CPU stretches from context-switch records `(time, tid, out, preempted)` in time
/// order, paired per thread; `open` holds each thread's switch out not yet paired.
pub(crate) fn pair_switches(records: impl Iterator<Item = (u64, u32, bool, bool)>, open: &mut std::collections::HashMap<u32, (u64, bool)>) -> Vec<OffCpu> {
    let mut off = Vec::new();
    for (time_ns, tid, going, preempted) in records {
        if going {
            open.insert(tid, (time_ns, preempted));
        } else if let Some((from_ns, preempted)) = open.remove(&tid) {
            off.push(OffCpu { tid, from_ns, to_ns: time_ns, preempted });
        }
    }
    off
}

/// The program's context switches, from one inherited perf session per CPU (software
/// events: no PMU needed), turned into per-thread off-CPU stretches at the end: a thread
/// that leaves on one CPU comes back on another, so the records of all CPUs are put in
/// time order before outs and ins are paired.
pub(crate) struct SwitchLog {
    sessions: Vec<Session>,
    /// (time, tid, out, preempted) as drained.
    records: Vec<(u64, u32, bool, bool)>,
    /// Per thread, its switch out not yet paired with the switch back in.
    open: std::collections::HashMap<u32, (u64, bool)>,
    pub(crate) problem: Option<String>,
}

impl SwitchLog {
    pub(crate) fn open(pid: i32) -> SwitchLog {
        let mut log = SwitchLog { sessions: Vec::new(), records: Vec::new(), open: Default::default(), problem: None };
        for cpu in crate::perf::online_cpus() {
            let options = SessionOptions {
                clock: SamplingClock::CpuClock { period_ns: 1 << 40 },
                context_switches: true,
                inherit_on_cpu: Some(cpu),
                enable_on_exec: true,
                buffer_pages: 64,
                ..SessionOptions::default()
            };
            match Session::open(pid, &options) {
                Ok(s) => log.sessions.push(s),
                Err(e) => {
                    log.problem = Some(e.to_string());
                    log.sessions.clear();
                    break;
                }
            }
        }
        log
    }

    pub(crate) fn drain(&mut self) {
        let records = &mut self.records;
        for s in &mut self.sessions {
            s.drain(&mut |r| {
                if let PerfRecord::Switch { tid, time_ns, out, preempted } = r {
                    records.push((time_ns, tid, out, preempted));
                }
            });
        }
    }

    /// Every thread's stretches off the CPU (those not yet taken by [`Self::stretches_until`]).
    pub(crate) fn off_cpu(mut self) -> Vec<OffCpu> {
        self.drain();
        self.stretches_until(u64::MAX)
    }

    /// The stretches of the switches drained so far up to `until_ns` (every switch before
    /// it, when it was drained after that time), in time order; the later ones wait.
    pub(crate) fn stretches_until(&mut self, until_ns: u64) -> Vec<OffCpu> {
        self.records.sort_by_key(|r| r.0);
        let upto = self.records.partition_point(|r| r.0 <= until_ns);
        pair_switches(self.records.drain(..upto), &mut self.open)
    }
}
