//! kansoku's timed results as [`Timeline`]s for the Perfetto writer: which result becomes
//! which lane, slice or instant. Nothing is measured or paired here; the analyses did it.

use std::collections::{BTreeSet, HashMap};
use std::io::Write;

use kansoku_monitor::events::{Call, Hit, OffCpu, Point, PointRole};
use kansoku_monitor::sampling::IntervalFigures;
use kansoku_monitor::wave::WavePoint;
use kansoku_paths::CallSink;

use crate::perfetto::{Args, CounterLane, Mark, PerfettoWriter, SideLane, Span, ThreadLane, Timeline};
use crate::ExportError;

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

/// A run's calls written to a Perfetto trace while the path analysis finds them
/// (`PathAnalysis::stream_call_timeline`, shared as `Arc<Mutex<…>>` so the caller can
/// [`CallsPerfetto::close`] it): one slice per call on its thread (calls nest as the
/// shadow call stack nested them), each marker hit as an instant `marker`, and the
/// iterations between a thread's marker hits (the last one to the end of the run) as
/// slices on a lane `iterations` under the thread. Threads are grouped under one process
/// whose id is the first thread's (the main thread's). Memory: a few words per thread;
/// the calls go to the file as they begin and end.
pub struct CallsPerfetto<W: Write> {
    w: PerfettoWriter<W>,
    /// The process: its id and track.
    process: Option<(u32, u64)>,
    threads: HashMap<u32, CallLanes>,
    calls: u64,
    markers: u64,
    instructions: u64,
    error: Option<ExportError>,
}

/// A thread's tracks: its calls, and its iterations (the lane, how many, the open one's start).
struct CallLanes {
    track: u64,
    iterations: Option<(u64, u64, u64)>,
}

impl<W: Write> CallsPerfetto<W> {
    /// A trace written into `out`.
    pub fn new(out: W) -> Self {
        CallsPerfetto { w: PerfettoWriter::new(out), process: None, threads: HashMap::new(), calls: 0, markers: 0, instructions: 0, error: None }
    }

    /// Calls written so far.
    pub fn calls(&self) -> u64 {
        self.calls
    }

    /// Marker hits written so far.
    pub fn markers(&self) -> u64 {
        self.markers
    }

    /// Where the run's instruction index ended (once it has).
    pub fn instructions(&self) -> u64 {
        self.instructions
    }

    /// Ends the trace: the `kansoku` instant with `metadata` at its first moment, on the
    /// process track, written last (Perfetto sorts a trace's events by time). The first
    /// error met while writing, if any; an error too if no call or hit was written.
    pub fn close(&mut self, metadata: &Args) -> Result<(), ExportError> {
        if let Some(e) = self.error.take() {
            return Err(e);
        }
        let (Some((_, process)), Some(first)) = (self.process, self.w.first_moment()) else { return Err(ExportError::Empty("perfetto")) };
        self.w.instant(process, first, "kansoku", metadata)?;
        self.w.flush()
    }

    fn keep(&mut self, result: Result<(), ExportError>) {
        if let Err(e) = result {
            self.error.get_or_insert(e);
        }
    }

    fn lanes(&mut self, tid: u32) -> Option<&mut CallLanes> {
        self.threads.get_mut(&tid)
    }

    fn add_thread(&mut self, tid: u32, program: Option<&str>) -> Result<(), ExportError> {
        let program = program.unwrap_or("program");
        let (pid, _) = match self.process {
            Some(p) => p,
            None => *self.process.insert((tid, self.w.process(Some(tid_id(tid)), program)?)),
        };
        let name = if tid == pid { format!("{} {tid}", program.rsplit('/').next().unwrap_or(program)) } else { format!("thread {tid}") };
        let track = self.w.thread(tid_id(pid), tid_id(tid), &name)?;
        self.threads.insert(tid, CallLanes { track, iterations: None });
        Ok(())
    }

    fn add_marker(&mut self, tid: u32, at: u64) -> Result<(), ExportError> {
        let Some(&mut CallLanes { track, iterations }) = self.lanes(tid) else { return Ok(()) };
        self.markers += 1;
        self.w.instant(track, at, "marker", &Vec::new())?;
        let (lane, done) = match iterations {
            Some((lane, done, start)) => {
                self.w.end(lane, at.max(start))?;
                (lane, done)
            }
            None => (self.w.lane(track, &format!("iterations {tid}"))?, 0),
        };
        self.w.begin(lane, at, &format!("iteration {}", done + 1), &Vec::new())?;
        if let Some(l) = self.lanes(tid) {
            l.iterations = Some((lane, done + 1, at));
        }
        Ok(())
    }
}

impl<W: Write + Send> CallSink for CallsPerfetto<W> {
    fn thread(&mut self, tid: u32, program: Option<&str>) {
        let r = self.add_thread(tid, program);
        self.keep(r);
    }
    fn begin(&mut self, tid: u32, at: u64, function: &str) {
        let Some(track) = self.lanes(tid).map(|l| l.track) else { return };
        self.calls += 1;
        let r = self.w.begin(track, at, function, &Vec::new());
        self.keep(r);
    }
    fn end(&mut self, tid: u32, at: u64) {
        let Some(track) = self.lanes(tid).map(|l| l.track) else { return };
        let r = self.w.end(track, at);
        self.keep(r);
    }
    fn marker(&mut self, tid: u32, at: u64) {
        let r = self.add_marker(tid, at);
        self.keep(r);
    }
    fn finish(&mut self, instructions: u64) {
        self.instructions = instructions;
        let mut open: Vec<(u32, u64, u64)> = self.threads.iter().filter_map(|(&tid, l)| l.iterations.map(|(lane, _, start)| (tid, lane, start))).collect();
        open.sort_unstable();
        for (_, lane, start) in open {
            let r = self.w.end(lane, instructions.max(start));
            self.keep(r);
        }
    }
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
