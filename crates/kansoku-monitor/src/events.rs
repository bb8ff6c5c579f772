//! The event method: measurement points, their hits, and routine execution times.
//!
//! A [`Point`] is an address that was armed (a uprobe or a trap); a [`Hit`] is one time
//! it fired, on one thread. A routine has entry points and exit points. Per thread, an
//! entry pushes an activation and an exit pops back to the innermost activation of the
//! same routine, so recursion and nesting are paired correctly; activations left open
//! at an exit of an outer routine (a `longjmp`, an exit point that was missed) are
//! dropped and counted as `abandoned`.
//!
//! **Overhead.** Every hit costs the program some time that falls between the time stamps
//! (the trap, the kernel, the tracer). The seed measured it by planting two points on
//! consecutive instructions: the time between their hits is one hit's cost, `c`. An
//! activation whose entry and exit enclose `k` other hits of the same thread contains
//! `(k + 1)·c` of probe time, which [`analyse`] subtracts when given `c`. Exclusive time
//! subtracts the (corrected) inclusive time of directly nested measured activations, as
//! the seed corrected a routine for the routines it calls.

use std::collections::HashMap;

use serde::Serialize;

/// What a point means.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub enum PointRole {
    /// Entry of routine number `.0`.
    Entry(usize),
    /// An exit of routine number `.0`.
    Exit(usize),
    /// A single point: hits and frequency only.
    Single,
}

/// One armed measurement point.
#[derive(Clone, Debug, Serialize)]
pub struct Point {
    /// The point's name as reports show it (for a routine: `name:entry` / `name:exit`).
    pub name: String,
    /// Runtime address (for a uretprobe: the function's entry, where it was planted).
    pub address: u64,
    /// What a hit of this point means: a routine's entry or exit, or a single point.
    pub role: PointRole,
}

/// One hit of point `point` on thread `tid` at `time_ns` (any monotonic clock).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Hit {
    /// Index of the point hit in the point list given to the analysis.
    pub point: u32,
    /// Thread (kernel thread id) that hit it; calls are paired per thread.
    pub tid: u32,
    /// When it was hit, ns on the recording's monotonic clock.
    pub time_ns: u64,
}

/// Per point figures.
#[derive(Clone, Debug, Serialize)]
pub struct PointStats {
    /// The point's name, as in [`Point::name`].
    pub name: String,
    /// Runtime address the point was planted at, as in [`Point::address`].
    pub address: u64,
    /// Times the point was hit in the run.
    pub hits: u64,
    /// Hits per second of the measured time.
    pub per_second: f64,
}

/// Per routine figures. Times in ns; `mean_ns` etc. are inclusive times per call after
/// the overhead correction (if any).
#[derive(Clone, Debug, Serialize)]
pub struct RoutineStats {
    /// The routine's name.
    pub name: String,
    /// Completed activations (entry and exit both seen).
    pub calls: u64,
    /// Entries never closed by the end of the measurement.
    pub unfinished: u64,
    /// Activations dropped because an outer routine exited first.
    pub abandoned: u64,
    /// Exits with no open activation of this routine on that thread.
    pub unmatched_exits: u64,
    /// Calls whose measured time was shorter than the overhead subtracted: reported as 0 ns.
    /// When many are, the routine is shorter than the mechanism can resolve.
    pub clamped_at_zero: u64,
    /// Calls per second of the measured time.
    pub per_second: f64,
    /// Mean inclusive time per completed call, ns, after the overhead correction.
    pub mean_ns: f64,
    /// Shortest call, ns, after the overhead correction.
    pub min_ns: f64,
    /// Median call (50th percentile), ns, after the overhead correction.
    pub p50_ns: f64,
    /// 99th-percentile call, ns, after the overhead correction.
    pub p99_ns: f64,
    /// Longest call, ns, after the overhead correction.
    pub max_ns: f64,
    /// Mean before the overhead correction.
    pub raw_mean_ns: f64,
    /// Mean exclusive time per call (nested measured routines subtracted).
    pub exclusive_mean_ns: f64,
    /// Calls during which the thread was preempted (taken off the CPU while runnable).
    pub preempted_calls: u64,
    /// Time those threads spent preempted inside calls: not in the times above.
    pub preempted_ns: f64,
    /// Time spent blocked (asleep in the kernel, waiting) inside calls: not in the times
    /// above either, which are on-CPU times when switches were recorded.
    pub blocked_ns: f64,
    /// Sum of exclusive times: the routine's own share of the run.
    pub exclusive_total_ns: f64,
    /// `(low_ns, high_ns, calls)`, 20 equal bins from min to max.
    pub histogram: Vec<(f64, f64, u64)>,
    /// `(low_ns, high_ns, calls)`, 24 bins of equal ratio from min to max (times under
    /// 1 ns counted from 1 ns): short and long calls both get bins, for the pictures.
    pub log_histogram: Vec<(f64, f64, u64)>,
}

/// Everything the event method reports.
#[derive(Clone, Debug, Serialize)]
pub struct EventReport {
    /// Length of the measured run, ns: the time rates (`per_second`) are taken over.
    pub measured_ns: u64,
    /// Hits counted in the run, every one given (also those of a point number outside the list).
    pub hits: u64,
    /// Per-hit probe overhead subtracted from call times, ns (`None`: none subtracted).
    pub overhead_ns: Option<f64>,
    /// The step of the clock the hits were stamped with, ns (0: exact).
    pub clock_resolution_ns: f64,
    /// Figures of each point, in the order of the point list.
    pub points: Vec<PointStats>,
    /// Figures of each routine, in the order of the routine list.
    pub routines: Vec<RoutineStats>,
}

struct Activation {
    entry_ns: u64,
    /// The thread's hits counted up to and including the entry: the hits inside the
    /// activation are the thread's count at its exit minus this (O(1), rather than
    /// counting a hit into every open activation: a routine left by `longjmp` 80,000
    /// times left 80,000 open and made that quadratic, 17.3 s).
    hits_at_entry: u64,
    /// Corrected inclusive time of directly nested completed activations.
    nested_ns: f64,
    /// The thread's off-CPU totals (preempted, blocked ns) before the entry: those inside
    /// the activation are the totals at its exit minus these.
    off_at_entry: (u64, u64),
}

/// The open activations of one thread, innermost last, with each routine's innermost one
/// found in O(1): an exit closes the innermost open activation of its routine and drops
/// those above it, each activation pushed and removed once (amortised O(1) per hit, even
/// when `longjmp` or exceptions leave thousands open).
struct OpenCalls<T> {
    stack: Vec<(usize, T)>,
    /// Per routine (by its index), the positions in `stack` of its open activations, ascending.
    positions: Vec<Vec<usize>>,
}

impl<T> Default for OpenCalls<T> {
    fn default() -> Self {
        OpenCalls { stack: Vec::new(), positions: Vec::new() }
    }
}

impl<T> OpenCalls<T> {
    fn push(&mut self, routine: usize, t: T) {
        if self.positions.len() <= routine {
            self.positions.resize_with(routine + 1, Vec::new);
        }
        self.positions[routine].push(self.stack.len());
        self.stack.push((routine, t));
    }

    /// Closes the innermost open activation of `routine` and returns it, after giving each
    /// activation above it (innermost first) to `dropped`; `None` when none is open.
    fn close(&mut self, routine: usize, mut dropped: impl FnMut(usize, T)) -> Option<T> {
        let pos = *self.positions.get(routine)?.last()?;
        while self.stack.len() > pos + 1 {
            let (r, t) = self.stack.pop().expect("above pos");
            self.positions[r].pop();
            dropped(r, t);
        }
        self.positions[routine].pop();
        self.stack.pop().map(|(_, t)| t)
    }

    fn innermost(&mut self) -> Option<&mut T> {
        self.stack.last_mut().map(|(_, t)| t)
    }

    fn routines(&self) -> impl Iterator<Item = usize> + '_ {
        self.stack.iter().map(|&(r, _)| r)
    }
}

/// A stretch of time a thread spent off its CPU (from a context switch out to the switch
/// back in), as the kernel reported it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct OffCpu {
    /// Thread (kernel thread id) that was switched out.
    pub tid: u32,
    /// When it was switched out, ns on the hits' clock.
    pub from_ns: u64,
    /// When it was switched back in, ns on the hits' clock.
    pub to_ns: u64,
    /// Switched out while still runnable (preempted), rather than asleep.
    pub preempted: bool,
}

/// How long a thread's off-CPU stretch is kept after the thread's latest hit has passed
/// its end (a thread's time stamps may go back a little: a migration between cores whose
/// counters differ); older ones live on only in the totals.
const OFF_CPU_KEPT_NS: u64 = 100_000_000;

/// One thread's stretches off the CPU, in time order as they arrive, each with the
/// thread's (preempted, blocked) totals before it: the off-CPU time before any moment is
/// found in logarithmic time, and the time inside an activation is the difference of two
/// such totals. Stretches that ended [`OFF_CPU_KEPT_NS`] before the thread's latest hit
/// are dropped (their time is in the totals): memory does not grow with the run.
#[derive(Default)]
struct OffLedger {
    recent: std::collections::VecDeque<(OffCpu, u64, u64)>,
    totals: (u64, u64),
    /// The stretches known that began before the time last asked for ([`OffLedger::before`]):
    /// a thread's hits come in time order, so the next one is found by stepping on from
    /// here, not by searching `recent` on every hit.
    begun: usize,
}

impl OffLedger {
    /// Adds a stretch; one that is empty, or begins before the last one ended, is not taken.
    fn push(&mut self, o: OffCpu) {
        if o.to_ns <= o.from_ns || self.recent.back().is_some_and(|(b, _, _)| o.from_ns < b.to_ns) {
            return;
        }
        self.recent.push_back((o, self.totals.0, self.totals.1));
        let len = o.to_ns - o.from_ns;
        if o.preempted {
            self.totals.0 += len;
        } else {
            self.totals.1 += len;
        }
    }

    /// The thread's (preempted, blocked) ns off the CPU before `t`.
    fn before(&mut self, t: u64) -> (u64, u64) {
        // the usual case: every stretch known ended before t
        if self.recent.back().is_none_or(|(o, _, _)| o.to_ns <= t) {
            return self.totals;
        }
        // the stretches that began before t: those begun before the time last asked for, and
        // the next few (stretches are kept in time order); a time that went back is searched
        let mut k = self.begun.min(self.recent.len());
        if k > 0 && self.recent[k - 1].0.from_ns >= t {
            k = self.recent.partition_point(|(o, _, _)| o.from_ns < t);
        }
        let mut steps = 0;
        while self.recent.get(k).is_some_and(|(o, _, _)| o.from_ns < t) {
            k += 1;
            steps += 1;
            if steps == 8 {
                k = self.recent.partition_point(|(o, _, _)| o.from_ns < t);
                break;
            }
        }
        self.begun = k;
        let Some(&(o, mut p, mut b)) = k.checked_sub(1).and_then(|i| self.recent.get(i)) else {
            return self.recent.front().map_or(self.totals, |&(_, p, b)| (p, b));
        };
        let part = t.min(o.to_ns) - o.from_ns;
        if o.preempted {
            p += part;
        } else {
            b += part;
        }
        (p, b)
    }

    /// Drops the stretches that ended long enough before `now`.
    fn forget_before(&mut self, now: u64) {
        while self.recent.front().is_some_and(|(o, _, _)| o.to_ns.saturating_add(OFF_CPU_KEPT_NS) <= now) {
            self.recent.pop_front();
            self.begun = self.begun.saturating_sub(1);
        }
    }
}

/// One thread's open activations, its hits so far and its time off the CPU.
#[derive(Default)]
struct ThreadState {
    open: OpenCalls<Activation>,
    hits: u64,
    off: OffLedger,
}

/// A hasher for small integer keys (thread ids, bucket keys): one multiply.
#[derive(Default)]
struct WordHasher(u64);

impl std::hash::Hasher for WordHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u64(u64::from(b));
        }
    }
    fn write_u64(&mut self, x: u64) {
        self.0 = (self.0.rotate_left(5) ^ x).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
    fn write_u32(&mut self, x: u32) {
        self.write_u64(u64::from(x));
    }
}

type WordMap<K, V> = HashMap<K, V, std::hash::BuildHasherDefault<WordHasher>>;

/// Leading bits of the mantissa a bucket of [`Distribution`] keeps: every whole number of
/// ns below 8,192 has a bucket of its own, larger values share one within 1/4,096.
const BUCKET_MANTISSA_BITS: u32 = 12;

/// Per bucket: calls, their sum, the first value, and whether another value came.
#[derive(Clone, Copy, Debug)]
struct Bucket {
    count: u64,
    sum: f64,
    first: f64,
    mixed: bool,
}

/// Call times (0 ns or more) in bounded memory: count, sum, min and max exact, and a
/// histogram whose buckets are the values' exponent and leading 12 bits of mantissa
/// (every whole ns below 8,192 its own bucket; larger values within 1/4,096 share one;
/// below 1/16 ns one bucket), at most 67 × 4,096 of them whatever the number of calls.
/// A bucket whose calls all took one time gives that time exactly, so the percentiles and
/// histograms equal those of every value kept and sorted unless two times within 1/4,096
/// of each other meet, which are then read as their mean.
#[derive(Clone, Debug, Default)]
pub(crate) struct Distribution {
    count: u64,
    sum: f64,
    min: f64,
    max: f64,
    /// The buckets in use, each with its key, in the order first used.
    buckets: Vec<(u64, Bucket)>,
    /// Key → position in `buckets`.
    index: WordMap<u64, u32>,
    /// Positions + 1 (0: none) of recently used buckets by a multiply of the key: a
    /// routine's calls fall in few buckets, and these are found without the map.
    memo: Vec<u32>,
}

/// Entries of [`Distribution`]'s memo (2^6: the top 6 bits of the key's hash).
const MEMO: usize = 64;

impl Distribution {
    /// Adds one call time, ns (negative and NaN count as 0).
    pub fn add(&mut self, v: f64) {
        // -0.0 and NaN as 0: times are not negative
        let v = if v > 0.0 { v } else { 0.0 };
        if self.count == 0 {
            (self.min, self.max) = (v, v);
        } else {
            self.min = self.min.min(v);
            self.max = self.max.max(v);
        }
        self.count += 1;
        self.sum += v;
        let key = if v < 1.0 / 16.0 { 0 } else { v.to_bits() >> (52 - BUCKET_MANTISSA_BITS) };
        let b = self.bucket(key, v);
        b.count += 1;
        b.sum += v;
        b.mixed |= b.first != v;
    }

    /// The bucket of `key`, made with `v` as its first value if new.
    fn bucket(&mut self, key: u64, v: f64) -> &mut Bucket {
        if self.memo.is_empty() {
            self.memo = vec![0; MEMO];
        }
        // (the key's low bits are the mantissa's last kept ones: whole ns share them)
        let m = (key.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 58) as usize;
        let k = match self.memo[m].checked_sub(1).map(|k| k as usize) {
            Some(k) if self.buckets[k].0 == key => k,
            _ => {
                let next = self.buckets.len() as u32;
                let k = *self.index.entry(key).or_insert(next) as usize;
                if k == self.buckets.len() {
                    self.buckets.push((key, Bucket { count: 0, sum: 0.0, first: v, mixed: false }));
                }
                self.memo[m] = k as u32 + 1;
                k
            }
        };
        &mut self.buckets[k].1
    }

    /// Number of call times added.
    pub fn count(&self) -> u64 {
        self.count
    }

    /// Mean of the call times added, ns (0 when none).
    pub fn mean(&self) -> f64 {
        if self.count > 0 { self.sum / self.count as f64 } else { 0.0 }
    }

    /// Shortest call time added, ns (0 when none).
    pub fn min(&self) -> f64 {
        self.min
    }

    /// Longest call time added, ns (0 when none).
    pub fn max(&self) -> f64 {
        self.max
    }

    /// Buckets in use (what the memory holds; the tests bound it).
    #[cfg(test)]
    fn buckets(&self) -> usize {
        self.buckets.len()
    }

    /// The values as (value, calls) in ascending order: a bucket's one value, or its mean.
    pub fn runs(&self) -> Vec<(f64, u64)> {
        let mut keyed = self.buckets.clone();
        keyed.sort_unstable_by_key(|&(k, _)| k);
        keyed.into_iter().map(|(_, b)| (if b.mixed { b.sum / b.count as f64 } else { b.first }, b.count)).collect()
    }
}

/// Per routine, what the analysis adds up as calls complete.
#[derive(Default)]
struct RoutineSums {
    times: Distribution,
    raw: f64,
    exclusive: f64,
    abandoned: u64,
    unmatched: u64,
    clamped: u64,
    preempted_calls: u64,
    preempted_ns: f64,
    blocked_ns: f64,
}

/// The event analysis, fed one hit at a time while the program runs: per thread its open
/// activations and off-CPU totals, per routine counts, sums and a [`Distribution`]. Its
/// memory holds no hit: it grows with threads, routines and activations left open, not
/// with the length of the run, and the report is ready when the last hit is in.
///
/// Feed each thread's off-CPU stretches ([`Analysis::off_cpu`]) before its hits that
/// follow them, and each thread's hits in time order; threads may interleave freely.
pub struct Analysis {
    roles: Vec<PointRole>,
    overhead_ns: Option<f64>,
    c: f64,
    point_hits: Vec<u64>,
    hits: u64,
    thread_index: WordMap<u32, usize>,
    threads: Vec<ThreadState>,
    last_thread: Option<(u32, usize)>,
    routines: Vec<RoutineSums>,
}

impl Analysis {
    /// An analysis of hits of `points` (routine numbers below `routines`), subtracting
    /// `overhead_ns` per enclosed hit (from [`calibrate`]).
    pub fn new(points: &[Point], routines: usize, overhead_ns: Option<f64>) -> Analysis {
        Analysis {
            roles: points.iter().map(|p| p.role.clone()).collect(),
            overhead_ns,
            c: overhead_ns.unwrap_or(0.0).max(0.0),
            point_hits: vec![0; points.len()],
            hits: 0,
            thread_index: WordMap::default(),
            threads: Vec::new(),
            last_thread: None,
            routines: (0..routines).map(|_| RoutineSums::default()).collect(),
        }
    }

    fn thread(&mut self, tid: u32) -> usize {
        if let Some((t, k)) = self.last_thread {
            if t == tid {
                return k;
            }
        }
        let next = self.threads.len();
        let k = *self.thread_index.entry(tid).or_insert(next);
        if k == next {
            self.threads.push(ThreadState::default());
        }
        self.last_thread = Some((tid, k));
        k
    }

    /// A stretch thread `o.tid` spent off its CPU: left out of the calls around it.
    pub fn off_cpu(&mut self, o: OffCpu) {
        let k = self.thread(o.tid);
        self.threads[k].off.push(o);
    }

    /// Hits counted so far.
    pub fn hits(&self) -> u64 {
        self.hits
    }

    /// Counts one hit and pairs it with the thread's open activations (entry opens one, exit
    /// closes the innermost open one of its routine). Hits of one thread come in time order.
    pub fn hit(&mut self, h: Hit) {
        self.hits += 1;
        let Some(role) = self.roles.get(h.point as usize) else { return };
        self.point_hits[h.point as usize] += 1;
        let role = role.clone();
        let k = self.thread(h.tid);
        let Analysis { threads, routines, c, .. } = self;
        let thread = &mut threads[k];
        // every hit of the thread counts inside every activation open on it
        thread.hits += 1;
        match role {
            PointRole::Entry(r) if r < routines.len() => {
                thread.off.forget_before(h.time_ns);
                let off_at_entry = thread.off.before(h.time_ns);
                thread.open.push(r, Activation { entry_ns: h.time_ns, hits_at_entry: thread.hits, nested_ns: 0.0, off_at_entry });
            }
            PointRole::Exit(r) if r < routines.len() => {
                let Some(a) = thread.open.close(r, |dropped, _| routines[dropped].abandoned += 1) else {
                    routines[r].unmatched += 1;
                    return;
                };
                let inner_hits = thread.hits - 1 - a.hits_at_entry;
                let off = thread.off.before(h.time_ns);
                let preempted = off.0.saturating_sub(a.off_at_entry.0) as f64;
                let blocked = off.1.saturating_sub(a.off_at_entry.1) as f64;
                let s = &mut routines[r];
                if preempted > 0.0 {
                    s.preempted_calls += 1;
                }
                s.preempted_ns += preempted;
                s.blocked_ns += blocked;
                let raw_ns = h.time_ns.saturating_sub(a.entry_ns) as f64 - preempted - blocked;
                let uncorrected = raw_ns - *c * (inner_hits + 1) as f64;
                if uncorrected < 0.0 {
                    s.clamped += 1;
                }
                let corrected = uncorrected.max(0.0);
                s.times.add(corrected);
                s.raw += raw_ns;
                s.exclusive += (corrected - a.nested_ns).max(0.0);
                if let Some(parent) = thread.open.innermost() {
                    parent.nested_ns += corrected;
                }
            }
            _ => {}
        }
    }

    /// The figures, with the points' names and addresses and the routines' names as they
    /// are known at the end; `measured_ns` is the length of the run for rates,
    /// `resolution_ns` the step of the clock the hits were stamped with (0: exact).
    pub fn report(self, points: &[Point], routines: &[String], measured_ns: u64, resolution_ns: f64) -> EventReport {
        let secs = (measured_ns as f64 / 1e9).max(1e-12);
        let mut unfinished = vec![0u64; self.routines.len()];
        for thread in &self.threads {
            for r in thread.open.routines() {
                unfinished[r] += 1;
            }
        }
        let point_stats = points
            .iter()
            .zip(&self.point_hits)
            .map(|(p, &n)| PointStats { name: p.name.clone(), address: p.address, hits: n, per_second: n as f64 / secs })
            .collect();
        let routine_stats = self
            .routines
            .iter()
            .zip(routines)
            .enumerate()
            .map(|(r, (s, name))| {
                let n = s.times.count();
                let runs = s.times.runs();
                let (lo, hi) = if n > 0 { (s.times.min(), s.times.max()) } else { (0.0, 0.0) };
                RoutineStats {
                    name: name.clone(),
                    calls: n,
                    unfinished: unfinished[r],
                    abandoned: s.abandoned,
                    unmatched_exits: s.unmatched,
                    clamped_at_zero: s.clamped,
                    per_second: n as f64 / secs,
                    mean_ns: s.times.mean(),
                    min_ns: lo,
                    p50_ns: quantile_of_runs(&runs, 0.50, resolution_ns),
                    p99_ns: quantile_of_runs(&runs, 0.99, resolution_ns),
                    max_ns: hi,
                    raw_mean_ns: if n > 0 { s.raw / n as f64 } else { 0.0 },
                    exclusive_mean_ns: if n > 0 { s.exclusive / n as f64 } else { 0.0 },
                    preempted_calls: s.preempted_calls,
                    preempted_ns: s.preempted_ns,
                    blocked_ns: s.blocked_ns,
                    exclusive_total_ns: s.exclusive,
                    histogram: histogram_of_runs(&runs, lo, hi, 20),
                    log_histogram: log_histogram_of_runs(&runs, lo, hi, 24),
                }
            })
            .collect();
        EventReport { measured_ns, hits: self.hits, overhead_ns: self.overhead_ns, clock_resolution_ns: resolution_ns, points: point_stats, routines: routine_stats }
    }
}

/// [`analyse`] with the threads' off-CPU stretches: each call's time excludes the time
/// its thread was switched out inside it, counted apart as preempted or blocked.
/// `resolution_ns` is the step of the clock the hits were stamped with (0: exact): the
/// percentiles are taken between its steps (`quantile_of_runs`).
pub fn analyse_on_cpu(points: &[Point], routines: &[String], hits: &[Hit], overhead_ns: Option<f64>, measured_ns: u64, off_cpu: &[OffCpu], resolution_ns: f64) -> EventReport {
    let mut a = Analysis::new(points, routines.len(), overhead_ns);
    let mut off = off_cpu.to_vec();
    off.sort_by_key(|o| (o.tid, o.from_ns));
    for o in off {
        a.off_cpu(o);
    }
    for &h in hits {
        a.hit(h);
    }
    a.report(points, routines, measured_ns, resolution_ns)
}

/// Pairs entries and exits per thread and computes the figures. `hits` must be in time
/// order per thread (a merged, time-sorted stream is fine). `overhead_ns` is the per-hit
/// cost to subtract (from [`calibrate`]); `measured_ns` the length of the run for rates.
pub fn analyse(points: &[Point], routines: &[String], hits: &[Hit], overhead_ns: Option<f64>, measured_ns: u64) -> EventReport {
    analyse_on_cpu(points, routines, hits, overhead_ns, measured_ns, &[], 0.0)
}

/// One completed call of a routine on one thread: its entry and exit hits' times, as the
/// clock gave them (no overhead or off-CPU time taken out: a timeline shows when it ran).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Call {
    /// The routine's index in the routine list.
    pub routine: usize,
    /// Thread (kernel thread id) the call ran on.
    pub tid: u32,
    /// Time of its entry hit, ns on the hits' clock.
    pub entry_ns: u64,
    /// Time of its exit hit, ns on the hits' clock.
    pub exit_ns: u64,
}

/// Every completed call, paired per thread exactly as [`analyse`] pairs them (an exit
/// closes the innermost open activation of its routine; activations above it are
/// abandoned), so a routine has as many calls here as [`RoutineStats::calls`] says. Calls
/// of one thread nest: each lies inside every call that was open at its entry and closed
/// after its exit. In the order of their exits.
pub fn calls(points: &[Point], hits: &[Hit]) -> Vec<Call> {
    let mut stacks: HashMap<u32, OpenCalls<u64>> = HashMap::new();
    let mut done = Vec::new();
    for h in hits {
        let Some(p) = points.get(h.point as usize) else { continue };
        let stack = stacks.entry(h.tid).or_default();
        match p.role {
            PointRole::Entry(r) => stack.push(r, h.time_ns),
            PointRole::Exit(r) => {
                let Some(entry_ns) = stack.close(r, |_, _| {}) else { continue };
                done.push(Call { routine: r, tid: h.tid, entry_ns, exit_ns: h.time_ns });
            }
            PointRole::Single => {}
        }
    }
    done
}

/// Nearest-rank percentile of sorted values.
pub fn percentile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let rank = (q * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

/// Sorted values as (value, how many) runs.
fn runs_of(sorted: &[f64]) -> Vec<(f64, u64)> {
    let mut runs: Vec<(f64, u64)> = Vec::new();
    for &v in sorted {
        match runs.last_mut() {
            Some((w, n)) if *w == v => *n += 1,
            _ => runs.push((v, 1)),
        }
    }
    runs
}

/// [`quantile_of_runs`] of sorted values: the tests' form (the report passes runs).
#[cfg(test)]
fn percentile_at_resolution(sorted: &[f64], q: f64, resolution_ns: f64) -> f64 {
    quantile_of_runs(&runs_of(sorted), q, resolution_ns)
}

/// The `q` quantile of times read from a clock that moves in steps of `resolution_ns`, of
/// values given as ascending (value, how many) runs. A time read as `v` is any true time
/// within half a step of `v`, so the quantile is taken of that spread-out distribution. On
/// a coarse clock the nearest-rank percentile always lands on a step: this VM's TSC moves
/// in 10 ns steps, which put the median of a 70 ns routine up to 5 ns (7 %) off, and a
/// different 5 ns from run to run. With `resolution_ns` 0 it is the nearest-rank percentile.
fn quantile_of_runs(runs: &[(f64, u64)], q: f64, resolution_ns: f64) -> f64 {
    let (Some(&(lo, _)), Some(&(hi, _))) = (runs.first(), runs.last()) else { return 0.0 };
    let n: u64 = runs.iter().map(|r| r.1).sum();
    if resolution_ns <= 0.0 {
        let rank = ((q * n as f64).ceil() as u64).clamp(1, n);
        let mut seen = 0;
        for &(v, k) in runs {
            seen += k;
            if seen >= rank {
                return v;
            }
        }
        return hi;
    }
    let half = resolution_ns / 2.0;
    // values and their sum below each run
    let mut counts = Vec::with_capacity(runs.len() + 1);
    let mut sums = Vec::with_capacity(runs.len() + 1);
    counts.push(0u64);
    sums.push(0.0f64);
    for &(v, k) in runs {
        counts.push(counts.last().copied().unwrap_or(0) + k);
        sums.push(sums.last().copied().unwrap_or(0.0) + v * k as f64);
    }
    // How many values lie below x, each spread evenly over [v - half, v + half].
    let below = |x: f64| {
        let a = runs.partition_point(|&(v, _)| v + half <= x);
        let b = runs.partition_point(|&(v, _)| v - half < x);
        let inside = (counts[b] - counts[a]) as f64;
        counts[a] as f64 + (inside * (x + half) - (sums[b] - sums[a])) / resolution_ns
    };
    let target = q.clamp(0.0, 1.0) * n as f64;
    let (mut low, mut high) = (lo - half, hi + half);
    for _ in 0..64 {
        let mid = (low + high) / 2.0;
        if below(mid) < target {
            low = mid;
        } else {
            high = mid;
        }
    }
    (low + high) / 2.0
}

/// `bins` equal bins from the smallest to the largest value.
pub fn histogram(sorted: &[f64], bins: usize) -> Vec<(f64, f64, u64)> {
    let (Some(&lo), Some(&hi)) = (sorted.first(), sorted.last()) else { return Vec::new() };
    histogram_of_runs(&runs_of(sorted), lo, hi, bins)
}

/// [`histogram`] of (value, how many) runs lying within `lo..=hi`.
fn histogram_of_runs(runs: &[(f64, u64)], lo: f64, hi: f64, bins: usize) -> Vec<(f64, f64, u64)> {
    if runs.is_empty() {
        return Vec::new();
    }
    let width = if hi > lo { (hi - lo) / bins as f64 } else { 1.0 };
    let mut counts = vec![0u64; bins];
    for &(v, k) in runs {
        let i = (((v - lo) / width) as usize).min(bins - 1);
        counts[i] += k;
    }
    counts.into_iter().enumerate().map(|(i, n)| (lo + i as f64 * width, lo + (i + 1) as f64 * width, n)).collect()
}

/// `bins` bins whose edges grow by one ratio from the smallest to the largest value, each
/// value at least 1 ns (a calibrated time can be 0): equal width on a log axis.
pub fn log_histogram(sorted: &[f64], bins: usize) -> Vec<(f64, f64, u64)> {
    let (Some(&lo), Some(&hi)) = (sorted.first(), sorted.last()) else { return Vec::new() };
    log_histogram_of_runs(&runs_of(sorted), lo, hi, bins)
}

/// [`log_histogram`] of (value, how many) runs lying within `lo..=hi`.
fn log_histogram_of_runs(runs: &[(f64, u64)], lo: f64, hi: f64, bins: usize) -> Vec<(f64, f64, u64)> {
    if runs.is_empty() {
        return Vec::new();
    }
    let (lo, hi) = (lo.max(1.0), hi.max(1.0));
    let (llo, lhi) = (lo.ln(), if hi > lo { hi.ln() } else { lo.ln() + 1.0 });
    let step = (lhi - llo) / bins as f64;
    let mut counts = vec![0u64; bins];
    for &(v, k) in runs {
        let i = (((v.max(1.0).ln() - llo) / step) as usize).min(bins - 1);
        counts[i] += k;
    }
    let edge = |i: usize| (llo + i as f64 * step).exp();
    counts.into_iter().enumerate().map(|(i, n)| (edge(i), edge(i + 1), n)).collect()
}
/// The seed's calibration: two points on consecutive instructions. Each hit of `first`
/// followed on the same thread by a hit of `second` (with no other hit of that thread
/// between) gives one difference: one hit's overhead. Returns the differences (ns).
pub fn calibration_differences(hits: &[Hit], first: u32, second: u32) -> Vec<f64> {
    let mut last: HashMap<u32, Hit> = HashMap::new();
    let mut out = Vec::new();
    for h in hits {
        if h.point == second {
            if let Some(prev) = last.get(&h.tid) {
                if prev.point == first {
                    out.push(h.time_ns.saturating_sub(prev.time_ns) as f64);
                }
            }
        }
        last.insert(h.tid, *h);
    }
    out
}

/// The per-hit overhead from calibration differences. The figure subtracted,
/// `overhead_ns`, is the mean of the middle 80 %: robust against the occasional preemption
/// like the median, and not stuck to one tick of a coarse clock (this machine's TSC, read
/// through a VM, moves in 10 ns steps: a median of 20 or 30 ns is ±10 ns on every call).
#[derive(Clone, Copy, Debug, Serialize)]
pub struct Calibration {
    /// Number of calibration differences the figures are taken from.
    pub samples: usize,
    /// The per-hit overhead to subtract, ns: mean of the middle 80 % of the differences.
    pub overhead_ns: f64,
    /// Median difference, ns.
    pub median_ns: f64,
    /// Mean of every difference, ns.
    pub mean_ns: f64,
    /// 99th-percentile difference, ns.
    pub p99_ns: f64,
}

/// The per-hit overhead learnt from `differences`, each the time in ns between hits of two
/// points on consecutive instructions (what one hit costs); `None` when there are none.
pub fn calibrate(differences: &[f64]) -> Option<Calibration> {
    if differences.is_empty() {
        return None;
    }
    let mut v = differences.to_vec();
    v.sort_by(|a, b| a.total_cmp(b));
    let cut = v.len() / 10;
    let middle = &v[cut..v.len() - cut];
    Some(Calibration {
        samples: v.len(),
        overhead_ns: middle.iter().sum::<f64>() / middle.len() as f64,
        median_ns: percentile(&v, 0.5),
        mean_ns: v.iter().sum::<f64>() / v.len() as f64,
        p99_ns: percentile(&v, 0.99),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pts() -> (Vec<Point>, Vec<String>) {
        let p = |name: &str, role| Point { name: name.into(), address: 0, role };
        (
            vec![
                p("f:entry", PointRole::Entry(0)),
                p("f:exit", PointRole::Exit(0)),
                p("g:entry", PointRole::Entry(1)),
                p("g:exit", PointRole::Exit(1)),
                p("x", PointRole::Single),
            ],
            vec!["f".into(), "g".into()],
        )
    }
    fn hit(point: u32, tid: u32, time_ns: u64) -> Hit {
        Hit { point, tid, time_ns }
    }

    #[test]
    fn recursion_pairs_innermost_first() {
        let (p, r) = pts();
        // f(0) { f(10) { } 30 } 100 on thread 1; thread 2 interleaved with g.
        let hits = [hit(0, 1, 0), hit(2, 2, 5), hit(0, 1, 10), hit(1, 1, 30), hit(3, 2, 45), hit(1, 1, 100)];
        let rep = analyse(&p, &r, &hits, None, 1_000_000_000);
        let f = &rep.routines[0];
        assert_eq!(f.calls, 2);
        assert_eq!((f.min_ns, f.max_ns), (20.0, 100.0));
        assert_eq!(f.mean_ns, 60.0);
        // Exclusive: inner 20, outer 100 - 20 = 80.
        assert_eq!(f.exclusive_total_ns, 100.0);
        assert_eq!(rep.routines[1].calls, 1);
        assert_eq!(rep.routines[1].mean_ns, 40.0);
        assert_eq!(rep.points[0].hits, 2);
        assert_eq!(rep.points[0].per_second, 2.0);
    }

    #[test]
    fn overhead_is_subtracted_per_enclosed_hit() {
        let (p, r) = pts();
        // f { g { x } } with every hit costing 10 ns of probe time between stamps:
        // true times f = 100 (own) + g, g = 50 (own); stamps chosen so that each hit
        // adds 10 ns between its stamp and the next one.
        let hits = [hit(0, 1, 0), hit(2, 1, 10), hit(4, 1, 20), hit(3, 1, 80), hit(1, 1, 190)];
        let rep = analyse(&p, &r, &hits, Some(10.0), 1);
        let (f, g) = (&rep.routines[0], &rep.routines[1]);
        // g: raw 70, encloses 1 hit: 70 - 2*10 = 50.
        assert_eq!(g.mean_ns, 50.0);
        // f: raw 190, encloses 3 hits (g.entry, x, g.exit): 190 - 4*10 = 150 = 100 + 50.
        assert_eq!(f.mean_ns, 150.0);
        assert_eq!(f.exclusive_mean_ns, 100.0);
        assert_eq!(f.raw_mean_ns, 190.0);
    }

    #[test]
    fn calls_shorter_than_the_overhead_are_counted_as_clamped() {
        let (p, r) = pts();
        // four calls of g measured 15, 25, 8 and 4 ns; 10 ns subtracted per call (its entry
        // hit lies between its two stamps): 5, 15, and two below zero, reported as 0
        let hits = [hit(2, 1, 0), hit(3, 1, 15), hit(2, 1, 100), hit(3, 1, 125), hit(2, 1, 200), hit(3, 1, 208), hit(2, 1, 300), hit(3, 1, 304)];
        let g = &analyse(&p, &r, &hits, Some(10.0), 1).routines[1];
        assert_eq!((g.calls, g.clamped_at_zero, g.min_ns, g.max_ns), (4, 2, 0.0, 15.0));
        // without a correction nothing is clamped
        assert_eq!(analyse(&p, &r, &hits, None, 1).routines[1].clamped_at_zero, 0);
    }

    #[test]
    fn calls_pair_as_analyse_does_and_nest() {
        let (p, r) = pts();
        // thread 1: f { f { } } then an unmatched f exit, g abandoned inside f; thread 2: g
        let hits = [hit(0, 1, 0), hit(2, 2, 5), hit(0, 1, 10), hit(1, 1, 30), hit(3, 2, 45), hit(1, 1, 100), hit(1, 1, 110), hit(0, 1, 120), hit(2, 1, 121), hit(1, 1, 130)];
        let all = calls(&p, &hits);
        let rep = analyse(&p, &r, &hits, None, 1);
        for (k, routine) in rep.routines.iter().enumerate() {
            assert_eq!(all.iter().filter(|c| c.routine == k).count() as u64, routine.calls, "{}", routine.name);
        }
        let on = |tid| all.iter().filter(|c| c.tid == tid).map(|c| (c.routine, c.entry_ns, c.exit_ns)).collect::<Vec<_>>();
        assert_eq!(on(1), [(0, 10, 30), (0, 0, 100), (0, 120, 130)]);
        assert_eq!(on(2), [(1, 5, 45)]);
    }

    #[test]
    fn unmatched_and_abandoned_are_counted() {
        let (p, r) = pts();
        let hits = [hit(1, 1, 0), hit(0, 1, 5), hit(2, 1, 6), hit(1, 1, 9), hit(0, 1, 20)];
        let rep = analyse(&p, &r, &hits, None, 1);
        assert_eq!(rep.routines[0].unmatched_exits, 1);
        assert_eq!(rep.routines[1].abandoned, 1);
        assert_eq!(rep.routines[0].calls, 1);
        assert_eq!(rep.routines[0].unfinished, 1);
    }

    #[test]
    fn time_off_the_cpu_is_not_the_routines_own() {
        let (p, r) = pts();
        // f on thread 1 from 0 to 100, preempted 10..30 and asleep 50..60 and 95..130
        // (partly after the exit); g on thread 2 from 0 to 100, nothing off.
        let hits = [hit(0, 1, 0), hit(2, 2, 0), hit(1, 1, 100), hit(3, 2, 100)];
        let off = |from_ns, to_ns, preempted| OffCpu { tid: 1, from_ns, to_ns, preempted };
        let rep = analyse_on_cpu(&p, &r, &hits, None, 1, &[off(10, 30, true), off(50, 60, false), off(95, 130, false), off(200, 300, true)], 0.0);
        let f = &rep.routines[0];
        assert_eq!((f.calls, f.preempted_calls, f.preempted_ns, f.blocked_ns), (1, 1, 20.0, 15.0));
        assert_eq!(f.mean_ns, 65.0);
        assert_eq!((rep.routines[1].mean_ns, rep.routines[1].preempted_calls), (100.0, 0));
        // without switches, wall time
        assert_eq!(analyse(&p, &r, &hits, None, 1).routines[0].mean_ns, 100.0);
    }

    #[test]
    fn calibration_pairs_consecutive_points() {
        let hits = [hit(0, 1, 0), hit(1, 1, 7), hit(0, 2, 3), hit(1, 2, 12), hit(0, 1, 50), hit(4, 1, 51), hit(1, 1, 60)];
        let d = calibration_differences(&hits, 0, 1);
        assert_eq!(d, vec![7.0, 9.0]);
        let c = calibrate(&d).unwrap();
        assert_eq!(c.samples, 2);
        assert_eq!(c.median_ns, 7.0);
        // the middle 80 % of 20 quantised differences: the two extremes at each end drop out
        let quantised: Vec<f64> = (0..20).map(|i| if i < 2 { 0.0 } else if i >= 18 { 1000.0 } else if i % 2 == 0 { 20.0 } else { 30.0 }).collect();
        assert_eq!(calibrate(&quantised).unwrap().overhead_ns, 25.0);
    }

    #[test]
    fn log_histogram_gives_short_and_long_calls_their_own_bins() {
        // 1000 calls of 40 ns and 3 of 2 ms: equal bins would put all but 3 in the first.
        let mut v = vec![40.0; 1000];
        v.extend([2e6, 2e6, 2e6]);
        let h = log_histogram(&v, 24);
        assert_eq!(h.len(), 24);
        assert_eq!(h[0].2, 1000);
        assert_eq!(h[23].2, 3);
        assert!((h[0].0 - 40.0).abs() < 1e-6 && (h[23].1 - 2e6).abs() < 1e-3);
        // Ratio-equal bins: every bin spans the same factor.
        let r = h[0].1 / h[0].0;
        assert!(h.iter().all(|b| (b.1 / b.0 - r).abs() < 1e-9));
        assert!(log_histogram(&[0.0, 0.0], 4).iter().map(|b| b.2).sum::<u64>() == 2);
    }

    #[test]
    fn percentiles_and_histogram() {
        let v: Vec<f64> = (1..=100).map(f64::from).collect();
        assert_eq!(percentile(&v, 0.5), 50.0);
        assert_eq!(percentile(&v, 0.99), 99.0);
        let h = histogram(&v, 20);
        assert_eq!(h.len(), 20);
        // 70 ns calls on a clock of 10 ns steps read 70 or 80 (when a step falls inside):
        // 30 % of 80s means 73 ns; the nearest rank says 70, the spread-out median 72.1.
        let mut coarse: Vec<f64> = [70.0; 70].into_iter().chain([80.0; 30]).collect();
        coarse.sort_by(f64::total_cmp);
        assert_eq!(percentile(&coarse, 0.5), 70.0);
        let m = percentile_at_resolution(&coarse, 0.5, 10.0);
        assert!((m - 72.14).abs() < 0.01, "{m}");
        // A fine clock changes nothing.
        assert_eq!(percentile_at_resolution(&v, 0.5, 0.0), 50.0);
        assert!((percentile_at_resolution(&v, 0.5, 1.0) - 50.0).abs() <= 0.5);
        assert_eq!(h.iter().map(|b| b.2).sum::<u64>(), 100);
    }

    /// The pairing as it was before the per-routine index: every hit scanned every open
    /// activation (quadratic under `longjmp`), simple enough to be right by reading it.
    /// Returns per routine (calls, abandoned, unmatched, unfinished, inner hits of each call).
    fn pairing_by_scanning(points: &[Point], routines: usize, hits: &[Hit]) -> Vec<(u64, u64, u64, u64, Vec<u64>)> {
        let mut out = vec![(0, 0, 0, 0, Vec::new()); routines];
        let mut stacks: HashMap<u32, Vec<(usize, u64)>> = HashMap::new();
        for h in hits {
            let stack = stacks.entry(h.tid).or_default();
            match points[h.point as usize].role {
                PointRole::Entry(r) => {
                    stack.iter_mut().for_each(|a| a.1 += 1);
                    stack.push((r, 0));
                }
                PointRole::Exit(r) => {
                    let Some(pos) = stack.iter().rposition(|a| a.0 == r) else {
                        out[r].2 += 1;
                        stack.iter_mut().for_each(|a| a.1 += 1);
                        continue;
                    };
                    for (d, _) in stack.drain(pos + 1..) {
                        out[d].1 += 1;
                    }
                    let (_, inner) = stack.pop().unwrap();
                    out[r].0 += 1;
                    out[r].4.push(inner);
                    stack.iter_mut().for_each(|a| a.1 += 1);
                }
                PointRole::Single => stack.iter_mut().for_each(|a| a.1 += 1),
            }
        }
        for a in stacks.values().flatten() {
            out[a.0].3 += 1;
        }
        out
    }

    proptest::proptest! {
        /// Entries, exits, lone exits, longjmp-like abandonment and singles on three
        /// threads: the indexed pairing counts exactly what scanning counts, and each
        /// call's overhead correction sees the same number of enclosed hits.
        #[test]
        fn indexed_pairing_equals_scanning(seq in proptest::collection::vec((0u32..5, 0u32..3), 0..400)) {
            let (p, r) = pts();
            let hits: Vec<Hit> = seq.iter().enumerate().map(|(i, &(point, tid))| hit(point, tid, i as u64 * 1000)).collect();
            let want = pairing_by_scanning(&p, r.len(), &hits);
            // with 1 ns charged per hit and 1000 ns between hits, the raw mean minus the
            // corrected mean gives the mean enclosed hits + 1
            let rep = analyse(&p, &r, &hits, Some(1.0), 1);
            for (k, (calls, abandoned, unmatched, unfinished, inner)) in want.iter().enumerate() {
                let got = &rep.routines[k];
                proptest::prop_assert_eq!((got.calls, got.abandoned, got.unmatched_exits, got.unfinished), (*calls, *abandoned, *unmatched, *unfinished));
                if *calls > 0 {
                    let mean_inner = inner.iter().sum::<u64>() as f64 / *calls as f64;
                    proptest::prop_assert!((got.raw_mean_ns - got.mean_ns - (mean_inner + 1.0)).abs() < 1e-6);
                }
            }
            let calls_listed = calls(&p, &hits);
            for (k, w) in want.iter().enumerate() {
                proptest::prop_assert_eq!(calls_listed.iter().filter(|c| c.routine == k).count() as u64, w.0);
            }
        }
    }

    proptest::proptest! {
        /// The ledger's off-CPU totals before a time, found by stepping on from the last
        /// time asked for, equal a sum over every stretch taken, whatever order the times
        /// come in (mostly ascending, now and then back or far ahead), with stretches added
        /// between the questions and old ones forgotten.
        #[test]
        fn off_cpu_before_a_time_equals_summing_every_stretch(steps in proptest::collection::vec((0u64..3, 1u64..400, 0u64..200, proptest::bool::ANY, 0u32..10), 1..300)) {
            let mut ledger = OffLedger::default();
            let mut taken: Vec<OffCpu> = Vec::new();
            let (mut next_from, mut t) = (0u64, 0u64);
            for &(kind, len, gap, preempted, jump) in &steps {
                if kind == 0 {
                    let from_ns = next_from.max(t.saturating_sub(500)) + gap;
                    let o = OffCpu { tid: 1, from_ns, to_ns: from_ns + len, preempted };
                    next_from = o.to_ns;
                    ledger.push(o);
                    taken.push(o);
                    continue;
                }
                t = match jump {
                    0 => t.saturating_sub(gap * 3),
                    1 => t + gap * 1_000_000,
                    _ => t + gap,
                };
                if kind == 1 {
                    ledger.forget_before(t);
                }
                let want = taken.iter().fold((0, 0), |(p, b), o| {
                    let part = t.min(o.to_ns).saturating_sub(o.from_ns);
                    if o.preempted { (p + part, b) } else { (p, b + part) }
                });
                proptest::prop_assert_eq!(ledger.before(t), want, "at {}", t);
            }
        }
    }

    #[test]
    fn eighty_thousand_longjmp_exits_count_exactly() {
        // g calls f, f longjmps back into g 80,000 times (f's exit never runs), then g
        // returns: every f is abandoned when g exits, g completes once
        let (p, r) = pts();
        let mut hits = vec![hit(2, 1, 0)];
        for i in 0..80_000u64 {
            hits.push(hit(0, 1, 1 + i));
        }
        hits.push(hit(3, 1, 100_000));
        // then f is left by longjmp 80,000 times with no enclosing probed routine: each
        // stays open to the end
        for i in 0..80_000u64 {
            hits.push(hit(0, 2, 200_000 + i));
        }
        let rep = analyse(&p, &r, &hits, Some(1.0), 1);
        let (f, g) = (&rep.routines[0], &rep.routines[1]);
        assert_eq!((f.calls, f.abandoned, f.unfinished), (0, 80_000, 80_000));
        assert_eq!((g.calls, g.abandoned), (1, 0));
        assert_eq!(g.raw_mean_ns - g.mean_ns, 80_001.0, "g encloses the 80,000 entries of f");
    }

    proptest::proptest! {
        /// The bounded distribution gives the figures of every value kept and sorted: exactly
        /// when no two distinct times share a bucket (whole ns below 8,192, and the times an
        /// overhead correction makes fractional), within 1/4,096 otherwise.
        #[test]
        fn distribution_equals_sorting_every_value(seq in proptest::collection::vec((0u64..20_000, 0u32..4), 1..600), small in proptest::bool::ANY, res in 0u32..3) {
            // below 256 ns the buckets are 1/16 ns or finer, and these times 0.3 ns apart or more
            let values: Vec<f64> = seq.iter().map(|&(ns, _)| if small { ns % 250 } else { ns }).zip(seq.iter().map(|s| s.1)).map(|(ns, k)| if ns < 256 { ns as f64 - 3.7 * f64::from(k) } else { ns as f64 * 1.000_01 }).map(|v| v.max(0.0)).collect();
            let mut d = Distribution::default();
            values.iter().for_each(|&v| d.add(v));
            let mut sorted = values.clone();
            sorted.sort_by(f64::total_cmp);
            let resolution = f64::from(res) * 10.0;
            let exact = sorted.iter().all(|&v| v < 256.0);
            let close = |a: f64, b: f64| if exact { (a - b).abs() <= 1e-9 * b.abs().max(1.0) } else { (a - b).abs() <= b.abs().max(1.0) / 4096.0 + resolution };
            let runs = d.runs();
            proptest::prop_assert_eq!(d.count(), values.len() as u64);
            proptest::prop_assert_eq!((d.min(), d.max()), (sorted[0], sorted[sorted.len() - 1]));
            for q in [0.5, 0.99] {
                let (got, want) = (quantile_of_runs(&runs, q, resolution), percentile_at_resolution(&sorted, q, resolution));
                proptest::prop_assert!(close(got, want), "q {} got {} want {}", q, got, want);
            }
            if exact {
                proptest::prop_assert_eq!(histogram_of_runs(&runs, d.min(), d.max(), 20), histogram(&sorted, 20));
                proptest::prop_assert_eq!(log_histogram_of_runs(&runs, d.min(), d.max(), 24), log_histogram(&sorted, 24));
            }
        }
    }

    #[test]
    fn a_distribution_is_bounded_whatever_the_number_of_calls() {
        // 2 M times spread from 1 ns to 10^12 ns: buckets, not values, are kept
        let mut d = Distribution::default();
        let mut x = 0x2545_F491_4F6C_DD1Du64;
        for _ in 0..2_000_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            d.add((x % 1_000_000_000_000) as f64 + 0.5);
        }
        assert_eq!(d.count(), 2_000_000);
        assert!(d.buckets() <= 67 * 4096, "{}", d.buckets());
    }
}
