//! kansoku's timed results as [`Timeline`]s for the Perfetto writer: which result becomes
//! which lane, slice or instant. Nothing is measured or paired here; the analyses did it.

use std::collections::BTreeSet;

use kansoku_monitor::events::{Call, Hit, OffCpu, Point, PointRole};
use kansoku_monitor::sampling::IntervalFigures;
use kansoku_monitor::wave::WavePoint;
use kansoku_paths::CallTimeline;

use crate::perfetto::{Args, CounterLane, Mark, SideLane, Span, ThreadLane, Timeline};

/// An event-mode run (seed 001) as its analysis left it.
pub struct EventRun<'a> {
    /// The program's title.
    pub program: &'a str,
    /// The points that were planted.
    pub points: &'a [Point],
    /// Routine names, by the index [`Call::routine`] holds.
    pub routines: &'a [String],
    /// The hits to show: those of single points (not a routine's entry or exit) become
    /// instants; the caller leaves out what would only bury them (a calibration's).
    pub hits: &'a [Hit],
    /// The completed calls (`kansoku_monitor::events::calls`).
    pub calls: &'a [Call],
    /// The threads' stretches off the CPU.
    pub off_cpu: &'a [OffCpu],
    /// How the run was made: mechanism, calibration, what the time axis is.
    pub metadata: Args,
}

/// One slice per completed call on its thread (calls nest as they nested), each hit of a
/// single point (not a routine's entry or exit) as an instant, and each off-CPU stretch
/// as a slice `preempted` or `blocked` on a lane `off-CPU` under its thread. Threads are
/// grouped under one process whose id is the lowest thread id seen: the main thread's,
/// which is the process id, unless the program forked.
pub fn events_timeline(run: EventRun) -> Timeline {
    let tids: BTreeSet<u32> = run.calls.iter().map(|c| c.tid).chain(run.hits.iter().map(|h| h.tid)).chain(run.off_cpu.iter().map(|o| o.tid)).collect();
    let pid = tids.first().copied().unwrap_or(0);
    let threads = tids.into_iter().map(|tid| event_thread(&run, tid, pid)).collect();
    Timeline { pid: Some(tid_id(pid)), process_name: run.program.to_string(), threads, counters: Vec::new(), metadata: run.metadata }
}

/// A kernel thread id as Perfetto's signed one (ids are below 2^22 on Linux).
fn tid_id(tid: u32) -> i32 {
    i32::try_from(tid).unwrap_or(i32::MAX)
}

fn event_thread(run: &EventRun, tid: u32, pid: u32) -> ThreadLane {
    let routine = |k: usize| run.routines.get(k).cloned().unwrap_or_else(|| format!("routine {k}"));
    let spans = run.calls.iter().filter(|c| c.tid == tid).map(|c| Span { name: routine(c.routine), start: c.entry_ns, end: c.exit_ns, args: Vec::new() }).collect();
    let single = |h: &&Hit| run.points.get(h.point as usize).is_some_and(|p| p.role == PointRole::Single);
    let marks = run
        .hits
        .iter()
        .filter(|h| h.tid == tid)
        .filter(single)
        .map(|h| Mark { name: run.points[h.point as usize].name.clone(), at: h.time_ns, args: Vec::new() })
        .collect();
    let off: Vec<Span> = run
        .off_cpu
        .iter()
        .filter(|o| o.tid == tid && o.to_ns >= o.from_ns)
        .map(|o| Span { name: if o.preempted { "preempted" } else { "blocked" }.to_string(), start: o.from_ns, end: o.to_ns, args: Vec::new() })
        .collect();
    let side_lanes = if off.is_empty() { Vec::new() } else { vec![SideLane { name: format!("off-CPU {tid}"), spans: off }] };
    let name = if tid == pid { format!("{} {tid}", run.program.rsplit('/').next().unwrap_or(run.program)) } else { format!("thread {tid}") };
    ThreadLane { tid: tid_id(tid), name, spans, marks, side_lanes }
}

/// A trace's calls on its instruction index (exact traces: `kansoku paths` of a `.ksk`
/// or of a program run exactly), with how it was made.
pub struct CallRun<'a> {
    /// What the analysis recovered: calls, marker hits, the index's end.
    pub timeline: &'a CallTimeline,
    /// How the run was made and what the time axis is.
    pub metadata: Args,
}

/// One slice per call on its thread (calls nest as the shadow call stack nested them),
/// each marker hit as an instant `marker`, and the iterations between a thread's marker
/// hits (the last one to the end of the trace) as slices on a lane `iterations` under
/// the thread. Threads are grouped as in [`events_timeline`].
pub fn calls_timeline(run: CallRun) -> Timeline {
    let t = run.timeline;
    let tids: BTreeSet<u32> = t.calls.iter().map(|c| c.tid).chain(t.markers.iter().map(|m| m.0)).collect();
    let pid = tids.iter().copied().find(|&tid| tid != 0).unwrap_or(0);
    let program = t.program.clone().unwrap_or_else(|| "program".to_string());
    let threads = tids.into_iter().map(|tid| call_thread(t, tid, pid, &program)).collect();
    Timeline { pid: Some(tid_id(pid)), process_name: program, threads, counters: Vec::new(), metadata: run.metadata }
}

fn call_thread(t: &CallTimeline, tid: u32, pid: u32, program: &str) -> ThreadLane {
    let function = |k: usize| t.functions.get(k).cloned().unwrap_or_else(|| format!("function {k}"));
    let spans = t.calls.iter().filter(|c| c.tid == tid).map(|c| Span { name: function(c.function), start: c.start, end: c.end, args: Vec::new() }).collect();
    let hits: Vec<u64> = t.markers.iter().filter(|m| m.0 == tid).map(|m| m.1).collect();
    let marks = hits.iter().map(|&at| Mark { name: "marker".to_string(), at, args: Vec::new() }).collect();
    let ends = hits.iter().skip(1).copied().chain(std::iter::once(t.instructions));
    let iterations: Vec<Span> = hits.iter().zip(ends).enumerate().map(|(k, (&start, end))| Span { name: format!("iteration {}", k + 1), start, end: end.max(start), args: Vec::new() }).collect();
    let side_lanes = if iterations.is_empty() { Vec::new() } else { vec![SideLane { name: format!("iterations {tid}"), spans: iterations }] };
    let name = if tid == pid { format!("{} {tid}", program.rsplit('/').next().unwrap_or(program)) } else { format!("thread {tid}") };
    ThreadLane { tid: tid_id(tid), name, spans, marks, side_lanes }
}

/// The program waveform as two counters: the code address of each point, and the first
/// data address its instruction reads or writes (points without one leave the counter
/// where it was). Time: the points' instruction numbers where they have them (exact
/// mode, `exact`), else their nanoseconds since the first point.
pub fn wave_timeline(program: &str, points: &[WavePoint], exact: bool, metadata: Args) -> Timeline {
    let at = |p: &WavePoint| if exact { p.instructions.unwrap_or(p.time_ns) } else { p.time_ns };
    let code = CounterLane { name: "code address".into(), unit: "address".into(), points: points.iter().map(|p| (at(p), p.code as f64)).collect() };
    let data_points = points.iter().filter_map(|p| p.data.first().map(|&d| (at(p), d as f64))).collect();
    let data = CounterLane { name: "data address".into(), unit: "address".into(), points: data_points };
    Timeline { pid: None, process_name: program.to_string(), threads: Vec::new(), counters: vec![code, data], metadata }
}

/// The sampling monitor's series (seed 001) as counters, one value per interval at its
/// end (nanoseconds since the start): the seed's eight items (CPU active, CPU only,
/// CPU/I-O overlap, I-O only, I-O busy, CPU wait, user state, kernel state), iowait, and
/// each device's busy percent (`devices` names them in the series' order), under
/// the observed process (`pid`) or, observing only the system, a track named `title`.
pub fn sampling_timeline(title: &str, pid: Option<i32>, series: &[IntervalFigures], devices: &[String], metadata: Args) -> Timeline {
    let at = |x: &IntervalFigures| (x.t_s.max(0.0) * 1e9) as u64;
    let lane = |name: &str, f: &dyn Fn(&IntervalFigures) -> f64| CounterLane { name: name.into(), unit: "%".into(), points: series.iter().map(|x| (at(x), f(x))).collect() };
    let mut counters = vec![
        lane("CPU active", &|x| x.cpu_active),
        lane("CPU only", &|x| x.cpu_only),
        lane("CPU/I-O overlap", &|x| x.cpu_io_overlap),
        lane("I-O only", &|x| x.io_only),
        lane("I-O busy (max device)", &|x| x.io_busy),
        lane("CPU wait", &|x| x.cpu_wait),
        lane("user state", &|x| x.user_state),
        lane("kernel state", &|x| x.kernel_state),
        lane("iowait", &|x| x.iowait),
    ];
    for (k, device) in devices.iter().enumerate() {
        counters.push(lane(&format!("{device} busy"), &|x| x.devices.get(k).copied().unwrap_or(0.0)));
    }
    Timeline { pid, process_name: title.to_string(), threads: Vec::new(), counters, metadata }
}
