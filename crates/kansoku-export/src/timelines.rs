//! kansoku's timed results as [`Timeline`]s for the Perfetto writer: which result becomes
//! which lane, slice or instant. Nothing is measured or paired here; the analyses did it.

use std::collections::BTreeSet;

use kansoku_monitor::events::{Call, Hit, OffCpu, Point, PointRole};

use crate::perfetto::{Args, Mark, SideLane, Span, ThreadLane, Timeline};

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
    Timeline { pid: tid_id(pid), process_name: run.program.to_string(), threads, counters: Vec::new(), metadata: run.metadata }
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
