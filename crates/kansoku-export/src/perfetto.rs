//! Perfetto's trace format (`perfetto.protos.Trace`, the TrackEvent part of Perfetto's
//! `perfetto_trace.proto`), the messages written by hand with prost's derive attributes
//! (field numbers from that schema), as [`crate::pprof`] does: no `protoc` at build time.
//!
//! A [`Timeline`] is one process: thread lanes with nested slices and instants, lanes
//! beside a thread (off-CPU stretches, say) and counter lanes. The file is one `Trace`:
//! a `TrackDescriptor` packet per track first, then `TrackEvent` packets in time order,
//! all on one packet sequence. Slices are given as intervals; Perfetto wants a begin and
//! an end per slice, properly nested on each track, and laying them out so is the one
//! thing done here. Names are written in full on each event (no interning): simpler, and
//! the files stay a small multiple of kansoku's own.

use std::io::Write;

use prost::Message;

use crate::ExportError;

/// `perfetto.protos.TracePacket`: the fields kansoku writes.
#[derive(Clone, PartialEq, Message)]
struct TracePacket {
    #[prost(uint64, optional, tag = "8")]
    timestamp: Option<u64>,
    #[prost(uint32, optional, tag = "10")]
    trusted_packet_sequence_id: Option<u32>,
    #[prost(message, optional, tag = "11")]
    track_event: Option<TrackEvent>,
    #[prost(uint32, optional, tag = "13")]
    sequence_flags: Option<u32>,
    #[prost(message, optional, tag = "60")]
    track_descriptor: Option<TrackDescriptor>,
}

/// `TracePacket.SequenceFlags`: the first packet says the sequence starts clean; the
/// events say they belong to it (what Perfetto's own SDK writes).
const SEQ_INCREMENTAL_STATE_CLEARED: u32 = 1;
const SEQ_NEEDS_INCREMENTAL_STATE: u32 = 2;
/// Every packet of a kansoku trace is on this one sequence.
const SEQUENCE: u32 = 1;

/// `TrackDescriptor`.
#[derive(Clone, PartialEq, Message)]
struct TrackDescriptor {
    #[prost(uint64, optional, tag = "1")]
    uuid: Option<u64>,
    #[prost(string, optional, tag = "2")]
    name: Option<String>,
    #[prost(message, optional, tag = "3")]
    process: Option<ProcessDescriptor>,
    #[prost(message, optional, tag = "4")]
    thread: Option<ThreadDescriptor>,
    #[prost(uint64, optional, tag = "5")]
    parent_uuid: Option<u64>,
    #[prost(message, optional, tag = "8")]
    counter: Option<CounterDescriptor>,
}

/// `ProcessDescriptor`.
#[derive(Clone, PartialEq, Message)]
struct ProcessDescriptor {
    #[prost(int32, optional, tag = "1")]
    pid: Option<i32>,
    #[prost(string, optional, tag = "6")]
    process_name: Option<String>,
}

/// `ThreadDescriptor`.
#[derive(Clone, PartialEq, Message)]
struct ThreadDescriptor {
    #[prost(int32, optional, tag = "1")]
    pid: Option<i32>,
    #[prost(int32, optional, tag = "2")]
    tid: Option<i32>,
    #[prost(string, optional, tag = "5")]
    thread_name: Option<String>,
}

/// `CounterDescriptor`: only the free-text unit.
#[derive(Clone, PartialEq, Message)]
struct CounterDescriptor {
    #[prost(string, optional, tag = "6")]
    unit_name: Option<String>,
}

/// `TrackEvent.Type`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum EventType {
    SliceBegin = 1,
    SliceEnd = 2,
    Instant = 3,
    Counter = 4,
}

/// `TrackEvent`.
#[derive(Clone, PartialEq, Message)]
struct TrackEvent {
    #[prost(message, repeated, tag = "4")]
    debug_annotations: Vec<DebugAnnotation>,
    #[prost(int32, optional, tag = "9")]
    r#type: Option<i32>,
    #[prost(uint64, optional, tag = "11")]
    track_uuid: Option<u64>,
    #[prost(string, optional, tag = "23")]
    name: Option<String>,
    #[prost(double, optional, tag = "44")]
    double_counter_value: Option<f64>,
}

/// `DebugAnnotation`: a name and one value (the `value` oneof).
#[derive(Clone, PartialEq, Message)]
struct DebugAnnotation {
    #[prost(bool, optional, tag = "2")]
    bool_value: Option<bool>,
    #[prost(uint64, optional, tag = "3")]
    uint_value: Option<u64>,
    #[prost(int64, optional, tag = "4")]
    int_value: Option<i64>,
    #[prost(double, optional, tag = "5")]
    double_value: Option<f64>,
    #[prost(string, optional, tag = "6")]
    string_value: Option<String>,
    #[prost(string, optional, tag = "10")]
    name: Option<String>,
}

/// A value shown beside a slice, an instant or the trace (Perfetto's "args").
#[derive(Clone, Debug, PartialEq)]
pub enum ArgValue {
    /// Text.
    Text(String),
    /// A count or an address.
    Uint(u64),
    /// A signed number.
    Int(i64),
    /// A measured quantity.
    Float(f64),
    /// Yes or no.
    Bool(bool),
}

/// Named values (`(name, value)`), in the order they are shown.
pub type Args = Vec<(String, ArgValue)>;

/// One slice: `name` from `start` to `end` (the time axis's units: nanoseconds, or an
/// instruction index where there are no time stamps).
#[derive(Clone, Debug, PartialEq)]
pub struct Span {
    /// What ran (a routine's name, an iteration).
    pub name: String,
    /// First moment.
    pub start: u64,
    /// Last moment (not before `start`).
    pub end: u64,
    /// Shown when the slice is selected.
    pub args: Args,
}

/// One moment: a marker hit, a single measurement point.
#[derive(Clone, Debug, PartialEq)]
pub struct Mark {
    /// What happened.
    pub name: String,
    /// When.
    pub at: u64,
    /// Shown when the instant is selected.
    pub args: Args,
}

/// A lane of slices beside a thread (shown under it): off-CPU stretches, iterations.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SideLane {
    /// The lane's title.
    pub name: String,
    /// Its slices; they must nest (any two are disjoint or one holds the other).
    pub spans: Vec<Span>,
}

/// One thread: its nested slices and its instants.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ThreadLane {
    /// The kernel's thread id.
    pub tid: i32,
    /// The thread's title.
    pub name: String,
    /// Slices on the thread; they must nest (calls inside calls).
    pub spans: Vec<Span>,
    /// Instants on the thread.
    pub marks: Vec<Mark>,
    /// Lanes shown under the thread.
    pub side_lanes: Vec<SideLane>,
}

/// One counter: a value that changes over time.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct CounterLane {
    /// The counter's title.
    pub name: String,
    /// Its unit, shown beside the values (`%`, `address`).
    pub unit: String,
    /// `(time, value)`, in time order.
    pub points: Vec<(u64, f64)>,
}

/// What a Perfetto export shows: one process with its threads and counters, and the
/// run's metadata (shown as the arguments of an instant named `kansoku` at the trace's
/// first moment, on the process track).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Timeline {
    /// The process id its threads are grouped under; `None` where there is none to give
    /// (a waveform, the whole system): the process track is then a plain named track.
    pub pid: Option<i32>,
    /// The process's title (the program).
    pub process_name: String,
    /// Its threads.
    pub threads: Vec<ThreadLane>,
    /// Counters, shown under the process.
    pub counters: Vec<CounterLane>,
    /// How the run was made and what the time axis counts.
    pub metadata: Args,
}

/// A track event waiting to be written: its time, the order it was laid out in (ties
/// keep it), and the event.
struct Pending {
    at: u64,
    order: usize,
    event: TrackEvent,
}

/// Hands out track uuids (1, 2, …) and collects the descriptors and events.
#[derive(Default)]
struct Layout {
    descriptors: Vec<TrackDescriptor>,
    events: Vec<Pending>,
}

impl Layout {
    fn track(&mut self, mut descriptor: TrackDescriptor) -> u64 {
        let uuid = self.descriptors.len() as u64 + 1;
        descriptor.uuid = Some(uuid);
        self.descriptors.push(descriptor);
        uuid
    }

    fn event(&mut self, at: u64, kind: EventType, track: u64, name: Option<&str>, args: &Args) {
        let event = track_event(kind, track, name, args);
        // 0 is kept for the metadata instant
        let order = self.events.len() + 1;
        self.events.push(Pending { at, order, event });
    }

    fn counter(&mut self, at: u64, track: u64, value: f64) {
        let event = TrackEvent { r#type: Some(EventType::Counter as i32), track_uuid: Some(track), double_counter_value: Some(value), ..Default::default() };
        let order = self.events.len() + 1;
        self.events.push(Pending { at, order, event });
    }

    /// Begin and end events for `spans` on `track`: outer slices begin before and end
    /// after the slices they hold; a slice that ends where the next begins ends first
    /// (so a zero-length slice at a slice's end follows it rather than sits inside).
    fn spans(&mut self, track: u64, track_name: &str, spans: &[Span]) -> Result<(), ExportError> {
        let mut order: Vec<&Span> = spans.iter().collect();
        order.sort_by(|a, b| a.start.cmp(&b.start).then(b.end.cmp(&a.end)));
        let mut open: Vec<&Span> = Vec::new();
        for span in order {
            if span.end < span.start {
                return Err(ExportError::Slice { track: track_name.to_string(), slice: span.name.clone(), start: span.start, why: "it ends before it starts" });
            }
            while let Some(top) = open.last().filter(|top| top.end <= span.start) {
                self.event(top.end, EventType::SliceEnd, track, None, &Vec::new());
                open.pop();
            }
            if open.last().is_some_and(|top| top.end < span.end) {
                return Err(ExportError::Slice { track: track_name.to_string(), slice: span.name.clone(), start: span.start, why: "it overlaps a slice it is not inside of" });
            }
            self.event(span.start, EventType::SliceBegin, track, Some(&span.name), &span.args);
            open.push(span);
        }
        while let Some(top) = open.pop() {
            self.event(top.end, EventType::SliceEnd, track, None, &Vec::new());
        }
        Ok(())
    }
}

fn track_event(kind: EventType, track: u64, name: Option<&str>, args: &Args) -> TrackEvent {
    TrackEvent { debug_annotations: args.iter().map(annotation).collect(), r#type: Some(kind as i32), track_uuid: Some(track), name: name.map(str::to_string), double_counter_value: None }
}

fn annotation((name, value): &(String, ArgValue)) -> DebugAnnotation {
    let mut a = DebugAnnotation { name: Some(name.clone()), ..Default::default() };
    match value {
        ArgValue::Text(s) => a.string_value = Some(s.clone()),
        ArgValue::Uint(n) => a.uint_value = Some(*n),
        ArgValue::Int(n) => a.int_value = Some(*n),
        ArgValue::Float(x) => a.double_value = Some(*x),
        ArgValue::Bool(b) => a.bool_value = Some(*b),
    }
    a
}

fn process_descriptor(pid: Option<i32>, name: &str) -> TrackDescriptor {
    match pid {
        Some(pid) => TrackDescriptor { process: Some(ProcessDescriptor { pid: Some(pid), process_name: Some(name.to_string()) }), ..Default::default() },
        None => TrackDescriptor { name: Some(name.to_string()), ..Default::default() },
    }
}

fn thread_descriptor(pid: i32, tid: i32, name: &str) -> TrackDescriptor {
    TrackDescriptor { thread: Some(ThreadDescriptor { pid: Some(pid), tid: Some(tid), thread_name: Some(name.to_string()) }), ..Default::default() }
}

fn lane_descriptor(parent: u64, name: &str) -> TrackDescriptor {
    TrackDescriptor { name: Some(name.to_string()), parent_uuid: Some(parent), ..Default::default() }
}

fn lay_out(timeline: &Timeline) -> Result<Layout, ExportError> {
    let mut layout = Layout::default();
    let process = layout.track(process_descriptor(timeline.pid, &timeline.process_name));
    for thread in &timeline.threads {
        // a thread belongs to a process; without one it stands as its own
        let pid = timeline.pid.unwrap_or(thread.tid);
        let track = layout.track(thread_descriptor(pid, thread.tid, &thread.name));
        layout.spans(track, &thread.name, &thread.spans)?;
        for mark in &thread.marks {
            layout.event(mark.at, EventType::Instant, track, Some(&mark.name), &mark.args);
        }
        for lane in &thread.side_lanes {
            let side = layout.track(lane_descriptor(track, &lane.name));
            layout.spans(side, &lane.name, &lane.spans)?;
        }
    }
    for counter in &timeline.counters {
        let descriptor = CounterDescriptor { unit_name: Some(counter.unit.clone()) };
        let track = layout.track(TrackDescriptor { name: Some(counter.name.clone()), parent_uuid: Some(process), counter: Some(descriptor), ..Default::default() });
        for &(at, value) in &counter.points {
            layout.counter(at, track, value);
        }
    }
    let first = layout.events.iter().map(|p| p.at).min().unwrap_or(0);
    layout.event(first, EventType::Instant, process, Some("kansoku"), &timeline.metadata);
    // the metadata instant was laid out last but belongs first among its time's events
    if let Some(last) = layout.events.last_mut() {
        last.order = 0;
    }
    layout.events.sort_by_key(|p| (p.at, p.order));
    Ok(layout)
}

/// One `Trace.packet` field (number 1, length-delimited): a trace is their concatenation,
/// so packets are written one at a time.
fn write_packet(packet: &TracePacket, out: &mut impl Write) -> std::io::Result<()> {
    let mut bytes = Vec::with_capacity(packet.encoded_len() + 11);
    prost::encoding::encode_key(1, prost::encoding::WireType::LengthDelimited, &mut bytes);
    prost::encoding::encode_varint(packet.encoded_len() as u64, &mut bytes);
    packet.encode_raw(&mut bytes);
    out.write_all(&bytes)
}

/// Writes `timeline` as a Perfetto trace (open it at ui.perfetto.dev, or query it with
/// Perfetto's `trace_processor`). An error if a lane's slices do not nest or nothing
/// would be shown.
pub fn write_perfetto(timeline: &Timeline, out: impl Write) -> Result<(), ExportError> {
    let layout = lay_out(timeline)?;
    if layout.events.len() <= 1 {
        return Err(ExportError::Empty("perfetto"));
    }
    let mut w = PerfettoWriter::new(out);
    for descriptor in layout.descriptors {
        w.descriptor(descriptor)?;
    }
    for pending in layout.events {
        w.packet_event(pending.at, pending.event)?;
    }
    w.out.flush().map_err(io_error)
}

fn io_error(source: std::io::Error) -> ExportError {
    ExportError::Write { format: "perfetto", source }
}

/// A Perfetto trace written as it goes, for timelines too long to hold: tracks are
/// described when they are first needed, and events are written as they come, which must
/// be in time order on each track, each slice's end after the slices begun inside it.
/// What it keeps is a count of tracks and events.
pub struct PerfettoWriter<W: Write> {
    out: W,
    tracks: u64,
    events: u64,
    first_at: Option<u64>,
}

impl<W: Write> PerfettoWriter<W> {
    /// A trace written into `out`.
    pub fn new(out: W) -> Self {
        PerfettoWriter { out, tracks: 0, events: 0, first_at: None }
    }

    /// Writes a track's descriptor; its uuid is the next one (1, 2, …) unless given.
    fn descriptor(&mut self, mut descriptor: TrackDescriptor) -> Result<u64, ExportError> {
        self.tracks += 1;
        let uuid = *descriptor.uuid.get_or_insert(self.tracks);
        let flags = (self.tracks == 1).then_some(SEQ_INCREMENTAL_STATE_CLEARED);
        let packet = TracePacket { trusted_packet_sequence_id: Some(SEQUENCE), sequence_flags: flags, track_descriptor: Some(descriptor), ..Default::default() };
        write_packet(&packet, &mut self.out).map_err(io_error)?;
        Ok(uuid)
    }

    fn packet_event(&mut self, at: u64, event: TrackEvent) -> Result<(), ExportError> {
        self.events += 1;
        self.first_at = Some(self.first_at.map_or(at, |f| f.min(at)));
        let packet = TracePacket {
            timestamp: Some(at),
            trusted_packet_sequence_id: Some(SEQUENCE),
            sequence_flags: Some(SEQ_NEEDS_INCREMENTAL_STATE),
            track_event: Some(event),
            ..Default::default()
        };
        write_packet(&packet, &mut self.out).map_err(io_error)
    }

    /// A process's track (or, without a process id, a plain named track); returns its uuid.
    pub fn process(&mut self, pid: Option<i32>, name: &str) -> Result<u64, ExportError> {
        self.descriptor(process_descriptor(pid, name))
    }

    /// A thread's track, grouped under process `pid`.
    pub fn thread(&mut self, pid: i32, tid: i32, name: &str) -> Result<u64, ExportError> {
        self.descriptor(thread_descriptor(pid, tid, name))
    }

    /// A lane of slices shown under track `parent`.
    pub fn lane(&mut self, parent: u64, name: &str) -> Result<u64, ExportError> {
        self.descriptor(lane_descriptor(parent, name))
    }

    /// A slice named `name` begins on `track`.
    pub fn begin(&mut self, track: u64, at: u64, name: &str, args: &Args) -> Result<(), ExportError> {
        self.packet_event(at, track_event(EventType::SliceBegin, track, Some(name), args))
    }

    /// The latest slice begun on `track` ends.
    pub fn end(&mut self, track: u64, at: u64) -> Result<(), ExportError> {
        self.packet_event(at, track_event(EventType::SliceEnd, track, None, &Vec::new()))
    }

    /// An instant on `track`.
    pub fn instant(&mut self, track: u64, at: u64, name: &str, args: &Args) -> Result<(), ExportError> {
        self.packet_event(at, track_event(EventType::Instant, track, Some(name), args))
    }

    /// Events written so far.
    pub fn events(&self) -> u64 {
        self.events
    }

    /// The earliest moment of the events written so far.
    pub fn first_moment(&self) -> Option<u64> {
        self.first_at
    }

    /// Writes out what is buffered.
    pub fn flush(&mut self) -> Result<(), ExportError> {
        self.out.flush().map_err(io_error)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The trace read back with the same messages: `(type, track, name, time)` per event.
    fn events(bytes: &[u8]) -> Vec<(i32, u64, Option<String>, u64)> {
        #[derive(Clone, PartialEq, Message)]
        struct Trace {
            #[prost(message, repeated, tag = "1")]
            packet: Vec<TracePacket>,
        }
        let trace = Trace::decode(bytes).unwrap();
        trace.packet.into_iter().filter_map(|p| p.track_event.map(|e| (e.r#type.unwrap(), e.track_uuid.unwrap(), e.name, p.timestamp.unwrap()))).collect()
    }

    fn span(name: &str, start: u64, end: u64) -> Span {
        Span { name: name.into(), start, end, args: Vec::new() }
    }

    fn timeline(spans: Vec<Span>) -> Timeline {
        let thread = ThreadLane { tid: 7, name: "main".into(), spans, ..Default::default() };
        Timeline { pid: Some(7), process_name: "p".into(), threads: vec![thread], ..Default::default() }
    }

    #[test]
    fn nested_spans_become_begin_end_pairs_in_nesting_order() {
        // f [0, 100] holds g [10, 40] and g [40, 40] (zero length, right after the first g)
        let t = timeline(vec![span("g", 40, 40), span("f", 0, 100), span("g", 10, 40)]);
        let mut bytes = Vec::new();
        write_perfetto(&t, &mut bytes).unwrap();
        let got: Vec<(i32, Option<String>, u64)> = events(&bytes).into_iter().filter(|e| e.1 == 2).map(|(k, _, n, at)| (k, n, at)).collect();
        let b = |n: &str, at| (1, Some(n.to_string()), at);
        let e = |at| (2, None, at);
        assert_eq!(got, [b("f", 0), b("g", 10), e(40), b("g", 40), e(40), e(100)]);
    }

    #[test]
    fn overlapping_spans_are_refused_not_written_wrong() {
        let t = timeline(vec![span("f", 0, 100), span("g", 50, 150)]);
        let err = write_perfetto(&t, Vec::new()).unwrap_err();
        assert!(err.to_string().contains("overlaps"), "{err}");
        let err = write_perfetto(&timeline(vec![span("f", 9, 1)]), Vec::new()).unwrap_err();
        assert!(err.to_string().contains("ends before it starts"), "{err}");
    }

    #[test]
    fn calls_are_written_as_they_begin_and_end_with_iterations_and_the_metadata_last() {
        use kansoku_paths::CallSink;
        let mut bytes = Vec::new();
        let mut c = crate::CallsPerfetto::new(&mut bytes);
        c.thread(7, Some("/bin/p"));
        c.begin(7, 0, "main");
        c.marker(7, 5);
        c.begin(7, 5, "work");
        c.end(7, 9);
        c.marker(7, 9);
        c.end(7, 12);
        c.finish(12);
        assert_eq!((c.calls(), c.markers(), c.instructions()), (2, 2, 12));
        c.close(&vec![("instructions".into(), ArgValue::Uint(12))]).unwrap();
        let s = |n: &str| Some(n.to_string());
        // tracks: 1 the process, 2 its thread, 3 the thread's iterations
        let want = [
            (1, 2, s("main"), 0),
            (3, 2, s("marker"), 5),
            (1, 3, s("iteration 1"), 5),
            (1, 2, s("work"), 5),
            (2, 2, None, 9),
            (3, 2, s("marker"), 9),
            (2, 3, None, 9),
            (1, 3, s("iteration 2"), 9),
            (2, 2, None, 12),
            (2, 3, None, 12),
            (3, 1, s("kansoku"), 0),
        ];
        assert_eq!(events(&bytes), want);
        // nothing begun: an error, not an empty trace
        let mut empty = crate::CallsPerfetto::new(Vec::new());
        empty.finish(0);
        assert!(matches!(empty.close(&Vec::new()), Err(ExportError::Empty("perfetto"))));
    }

    #[test]
    fn metadata_comes_first_and_counters_carry_their_values() {
        let mut t = timeline(vec![span("f", 5, 9)]);
        t.metadata = vec![("clock".into(), ArgValue::Text("CLOCK_MONOTONIC".into()))];
        t.counters = vec![CounterLane { name: "cpu".into(), unit: "%".into(), points: vec![(3, 50.0), (8, 75.0)] }];
        let mut bytes = Vec::new();
        write_perfetto(&t, &mut bytes).unwrap();
        let got = events(&bytes);
        assert_eq!(got[0], (3, 1, Some("kansoku".into()), 3));
        let counter_times: Vec<u64> = got.iter().filter(|e| e.0 == 4).map(|e| e.3).collect();
        assert_eq!(counter_times, [3, 8]);
    }
}
