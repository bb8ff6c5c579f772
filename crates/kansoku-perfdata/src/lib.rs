//! # kansoku-perfdata — what `perf record` wrote, read as a kansoku recording
//!
//! A performance engineer who already records with Linux perf keeps doing so: a
//! `perf.data` of timer samples (`-e cpu-clock`) and, optionally, a uprobe marker
//! (`perf probe -x PROG F`, then `-e probe_PROG:F`) becomes the same events a
//! `kansoku record --marker F` recording holds, so `kansoku reconstruct perf.data` rebuilds
//! the instruction trace of the marked region from it.
//!
//! | perf.data | kansoku event |
//! |---|---|
//! | `MMAP2`/`MMAP` of an executable mapping of the recorded process | [`Event::Module`], build id from the record or the file's build-id table |
//! | sample of a tracepoint event (a uprobe: `probe_PROG:F`) | [`Event::Marker`] |
//! | sample of any other event (cpu-clock, cycles…) | [`Event::Sample`] (and [`Event::Thread`] when the thread changes) |
//!
//! The header says what was recorded: the program and its arguments (perf's own command
//! line, after `--`, or the process's `exec`), `clock = cpu-clock` and the period when the
//! samples are timer samples, `marker` = F.
//!
//! A cut perf.data (perf killed, a copy cut short) is read to its last complete record:
//! perf writes its header last, so such a file says its data is longer than it is (or
//! empty); the reader walks the records to the last one the file holds whole, reads up to
//! there and says where it stopped ([`PerfDataReader::truncated_at`]). The names of the
//! events are then lost with the file's end: a tracepoint event is taken for the marker.
//!
//! Nothing here runs perf or a program: [`PerfDataReader`] turns a file into events.
//!
//! [`listing`] is what `kansoku show` prints of a recording: its items as rows.
#![deny(missing_docs)]

pub mod listing;

use std::cell::Cell;
use std::collections::{HashMap, HashSet, VecDeque};
use std::fs::File;
use std::io::{BufReader, Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::rc::Rc;

use kansoku_core::{Event, Header, Module, RecordingError, RecordingKind, Sample};
use linux_perf_data::linux_perf_event_reader::{EventRecord, Mmap2FileId, PerfEventType, RawEventRecord, RecordType, SamplingPolicy, SoftwareCounterType};
use linux_perf_data::{PerfFileReader, PerfFileRecord};

/// The magic a little-endian perf.data starts with.
const MAGIC: &[u8; 8] = b"PERFILE2";
/// perf's file header: magic, size, attr_size, the attrs, data and event-types sections
/// (offset and size each), then 256 bits of feature flags.
const HEADER_BYTES: usize = 104;
const DATA_OFFSET_AT: usize = 40;
const DATA_SIZE_AT: usize = 48;
const FEATURES_AT: usize = 72;
const EVENT_TYPES_AT: usize = 56;
/// `PROT_EXEC` in an `MMAP2` record's protection.
const PROT_EXEC: u32 = 4;
/// perf's call-chain context markers (`PERF_CONTEXT_HV`, `_KERNEL`, `_USER`…) are the
/// values from `-4095` up.
const PERF_CONTEXT_MAX: u64 = -4095i64 as u64;
/// The mappings kept per process for the processes it forks.
const MODULES_PER_PROCESS: usize = 4096;

/// Is this file a perf.data (by its first eight bytes)?
pub(crate) fn is_perf_data(path: &Path) -> bool {
    let mut magic = [0u8; 8];
    File::open(path).and_then(|mut f| f.read_exact(&mut magic)).is_ok() && &magic == MAGIC
}

/// Reads a perf.data as kansoku events, in time order.
pub struct PerfDataReader {
    path: PathBuf,
    header: Header,
    reader: PerfFileReader<Patched>,
    convert: Converter,
    truncated_at: Option<u64>,
    /// How far the file has been read: the byte a damaged record is reported at.
    position: Rc<Cell<u64>>,
    /// The process [`Self::next_event`] reads, chosen at its first call.
    selection: Option<Selection>,
    /// Which process of several that is, and which were left out (see
    /// [`Self::process_selection`]).
    selection_note: Option<String>,
}

/// One item of a recording read process by process ([`AnyRecording::next_item`]): what
/// `show` and the Firefox export read. A `perf record -a` holds many processes, each with
/// its own modules and threads; a `perf record -g` a call chain per sample.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Item {
    /// The items after it belong to this process and thread, named as perf names them
    /// (the command, at most 15 bytes; empty when the file does not say). Kansoku's own
    /// recordings are one process and never say so: their threads come as
    /// [`Event::Thread`].
    Context {
        /// Process id (perf's `pid`, the thread group).
        pid: i32,
        /// Thread id.
        tid: i32,
        /// The process's name (its main thread's comm).
        process: String,
        /// The thread's name (its comm).
        thread: String,
    },
    /// An event of the current process and thread (perf.data: never [`Event::Thread`]).
    Event(Event),
    /// The call chain of the sample after it (`perf record -g`), innermost first: the
    /// sampled address, then the return addresses, kernel frames first when the sample
    /// was taken in the kernel (perf's context markers left out).
    Stack(Vec<u64>),
}

/// What turns perf's records into items (apart from the reader, whose buffer the record
/// being turned borrows).
struct Converter {
    /// Per event (attribute index): is it the marker's uprobe?
    markers: Vec<bool>,
    /// The sample ids of tracepoint events, from the file's attribute section: a cut file
    /// has lost the event descriptions the attribute index of a record comes from.
    marker_ids: HashSet<u64>,
    build_ids: HashMap<Vec<u8>, String>,
    /// Each thread's name (perf's comm), by tid; a process's is its main thread's.
    names: HashMap<i32, String>,
    /// Each process's executable mappings so far: a process forked from it starts with
    /// them (the kernel writes no mapping record for what a child inherits).
    modules: HashMap<i32, Vec<Module>>,
    /// Mappings a forked process inherited, given as items before its first sample.
    inherited: HashMap<i32, Vec<Module>>,
    /// The processes that called exec, with the name they took, in order.
    execs: Execs,
    /// The (pid, tid) the last [`Item::Context`] named.
    context: Option<(i32, i32)>,
    start: Option<u64>,
    pending: VecDeque<Item>,
    warnings: Vec<String>,
}

/// The one process [`PerfDataReader::next_event`] reads (a kansoku recording is one).
struct Selection {
    pid: Option<i32>,
    /// The (pid, tid) of the items being read, and the tid last given as [`Event::Thread`].
    context: Option<(i32, i32)>,
    tid: Option<i32>,
}

/// The processes that called exec, with the name each took, in order.
pub type Execs = Vec<(i32, String)>;

/// The processes a perf.data holds samples of, from one pass over it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ProcessCount {
    /// Process id.
    pub pid: i32,
    /// Its name when its first sample was taken.
    pub name: String,
    /// Samples taken in it, marker hits included.
    pub samples: u64,
}

impl PerfDataReader {
    /// Opens a perf.data and reads its header, attributes and the records needed to name
    /// the program; a cut file is read to its last whole record. The error names the file
    /// and, for a damaged one, the byte.
    pub fn open(path: &Path) -> Result<Self, RecordingError> {
        let io = |cause| RecordingError::Io { path: path.to_path_buf(), cause };
        let corrupt = |offset, what: String| RecordingError::Corrupt { path: path.to_path_buf(), offset, what };
        let (mut patched, truncated_at) = Patched::open(path).map_err(io)?;
        let marker_ids = tracepoint_ids(&mut patched).map_err(io)?;
        let position = patched.seen.clone();
        let PerfFileReader { perf_file, record_iter } = PerfFileReader::parse_file(patched).map_err(|e| corrupt(position.get(), format!("not a readable perf.data: {e}")))?;
        let attrs = perf_file.event_attributes();
        let markers: Vec<bool> = attrs.iter().map(|a| matches!(a.attr.type_, PerfEventType::Tracepoint(_))).collect();
        // perf names a uprobe event GROUP:FUNCTION (`probe_seed000:func_M`); a cut file
        // has lost the names, and then the marker's hits are still marker hits, unnamed.
        let marker = attrs.iter().zip(&markers).find(|(_, &m)| m).and_then(|(a, _)| a.name()?.split(':').nth(1)).map(str::to_string);
        let sampler = attrs.iter().zip(&markers).find(|(_, &m)| !m).map(|(a, _)| &a.attr);
        let cmdline: Vec<String> = perf_file.cmdline().ok().flatten().unwrap_or_default().iter().map(|s| s.to_string()).collect();
        let (program, args) = program_of(&cmdline);
        let mut header = Header::new(RecordingKind::Samples, program, args).with_parameter("source", "perf.data");
        if let Some(attr) = sampler {
            let timer = matches!(attr.type_, PerfEventType::Software(SoftwareCounterType::CpuClock | SoftwareCounterType::TaskClock));
            header = header.with_parameter("clock", if timer { "cpu-clock" } else { "event" });
            if let SamplingPolicy::Period(p) = attr.sampling_policy {
                header = header.with_parameter(if timer { "time_period_ns" } else { "period" }, p.get());
            }
        }
        if let Some(m) = marker {
            header = header.with_parameter("marker", m.as_str()).with_parameter("marker_by", "uprobe");
        }
        let build_ids = perf_file.build_ids().unwrap_or_default().into_values().map(|d| (d.path, hex(&d.build_id))).collect();
        let reader = PerfFileReader { perf_file, record_iter };
        let convert = Converter {
            markers,
            marker_ids,
            build_ids,
            names: HashMap::new(),
            modules: HashMap::new(),
            inherited: HashMap::new(),
            execs: Vec::new(),
            context: None,
            start: None,
            pending: VecDeque::new(),
            warnings: Vec::new(),
        };
        Ok(PerfDataReader { path: path.to_path_buf(), header, reader, convert, truncated_at, position, selection: None, selection_note: None })
    }

    /// What the reader noticed: records perf lost (a cut file is [`Self::truncated_at`]).
    pub fn warnings(&self) -> &[String] {
        &self.convert.warnings
    }

    /// Once [`Self::next_event`] has read a file of several processes (`perf record -a`):
    /// which one it reads and the counts of those it leaves out.
    pub fn process_selection(&self) -> Option<&str> {
        self.selection_note.as_deref()
    }

    /// What was recorded (program, arguments, clock, period, marker), as a kansoku
    /// recording's header says it.
    pub fn header(&self) -> &Header {
        &self.header
    }

    /// Where a cut file was read up to (byte offset of the end of its last whole record).
    pub fn truncated_at(&self) -> Option<u64> {
        self.truncated_at
    }

    /// The next event of one process: a kansoku recording is one process, and so is
    /// what [`Self::next_event`] gives. A file of several (`perf record -a`) is read as the
    /// recorded program's process (the one that ran the program perf was given, or with
    /// the most samples), and [`Self::process_selection`] says so, with the counts of the others;
    /// [`Self::next_item`] reads them all. Call chains are left out.
    pub fn next_event(&mut self) -> Result<Option<Event>, RecordingError> {
        if self.selection.is_none() {
            let pid = self.select()?;
            self.selection = Some(Selection { pid, context: None, tid: None });
        }
        loop {
            let Some(item) = self.next_item()? else { return Ok(None) };
            let sel = self.selection.as_mut().expect("chosen above");
            match item {
                Item::Context { pid, tid, .. } => sel.context = Some((pid, tid)),
                Item::Stack(_) => {}
                Item::Event(e) => {
                    let Some((pid, tid)) = sel.context else { continue };
                    if sel.pid.is_some_and(|p| p != pid) {
                        continue;
                    }
                    if matches!(e, Event::Sample(_) | Event::Marker { .. }) && sel.tid != Some(tid) {
                        sel.tid = Some(tid);
                        self.convert.pending.push_front(Item::Event(e));
                        return Ok(Some(Event::Thread { tid: tid as u32 }));
                    }
                    return Ok(Some(e));
                }
            }
        }
    }

    /// The process [`Self::next_event`] reads, from a pass over the file (by a second
    /// reader): None when it holds samples of one process or none.
    fn select(&mut self) -> Result<Option<i32>, RecordingError> {
        let (counts, execs) = Self::open(&self.path)?.processes()?;
        let total: u64 = counts.iter().map(|c| c.samples).sum();
        if counts.len() <= 1 {
            return Ok(counts.first().map(|c| c.pid));
        }
        // the process that ran the recorded program (its exec took the program's name),
        // else the one with the most samples
        let program = self.header.program.rsplit('/').next().unwrap_or_default();
        let comm: String = program.chars().take(15).collect();
        let ran = |c: &&ProcessCount| execs.iter().any(|(p, n)| *p == c.pid && *n == comm);
        let chosen = counts.iter().filter(ran).max_by_key(|c| c.samples).or_else(|| counts.iter().max_by_key(|c| c.samples)).expect("two or more");
        let others: Vec<String> = counts.iter().filter(|c| c.pid != chosen.pid).take(5).map(|c| format!("{} `{}` {}", c.pid, c.name, c.samples)).collect();
        self.selection_note = Some(format!(
            "{} holds samples of {} processes ({total} samples); this reads one: pid {} `{}` ({} samples){}; the others ({}{}) are left out (`kansoku show` and its firefox export show them all)",
            self.path.display(),
            counts.len(),
            chosen.pid,
            chosen.name,
            chosen.samples,
            if ran(&chosen) { ", which ran the recorded program" } else { ", the most sampled" },
            others.join(", "),
            if counts.len() > 6 { ", …" } else { "" },
        ));
        Ok(Some(chosen.pid))
    }

    /// Samples per process (most first), and the processes that called exec with the
    /// name they took, reading the whole file.
    pub fn processes(mut self) -> Result<(Vec<ProcessCount>, Execs), RecordingError> {
        let mut counts: HashMap<i32, ProcessCount> = HashMap::new();
        let mut at = (0, String::new());
        while let Some(item) = self.next_item()? {
            match item {
                Item::Context { pid, process, .. } => at = (pid, process),
                Item::Event(Event::Sample(_) | Event::Marker { .. }) => {
                    counts.entry(at.0).or_insert_with(|| ProcessCount { pid: at.0, name: at.1.clone(), samples: 0 }).samples += 1;
                }
                _ => {}
            }
        }
        let mut counts: Vec<ProcessCount> = counts.into_values().collect();
        counts.sort_by_key(|c| (std::cmp::Reverse(c.samples), c.pid));
        Ok((counts, std::mem::take(&mut self.convert.execs)))
    }

    /// The next item of every process, with call chains: [`Item::Context`] before the
    /// items of another process or thread.
    pub fn next_item(&mut self) -> Result<Option<Item>, RecordingError> {
        loop {
            if let Some(e) = self.convert.pending.pop_front() {
                return Ok(Some(e));
            }
            let PerfFileReader { perf_file, record_iter } = &mut self.reader;
            let corrupt = |what: String| RecordingError::Corrupt { path: self.path.clone(), offset: self.position.get(), what };
            let record = record_iter.next_record(perf_file).map_err(|e| corrupt(e.to_string()))?;
            let Some(PerfFileRecord::EventRecord { attr_index, record }) = record else {
                if record.is_none() {
                    return Ok(None);
                }
                continue;
            };
            let time = record.timestamp();
            if !parseable(&record) {
                return Err(corrupt(format!("a {:?} record that claims more than perf writes", record.record_type)));
            }
            let parsed = record.parse().map_err(|e| corrupt(format!("a {:?} record: {e}", record.record_type)))?;
            let marker = self.convert.markers.get(attr_index).copied().unwrap_or(false);
            self.convert.take(parsed, time, marker);
        }
    }
}

impl Converter {
    /// One kernel record: queues the items it means.
    fn take(&mut self, record: EventRecord, time: Option<u64>, marker: bool) {
        match record {
            EventRecord::Comm(c) => {
                let name = String::from_utf8_lossy(&c.name.as_slice()).into_owned();
                if c.is_execve {
                    // a new image: what the process had mapped is gone
                    self.modules.remove(&c.pid);
                    self.inherited.remove(&c.pid);
                    self.execs.push((c.pid, name.clone()));
                }
                self.names.insert(c.tid, name);
                if self.context.is_some_and(|(p, t)| p == c.pid || t == c.tid) {
                    self.context = None;
                }
            }
            EventRecord::Fork(f) if f.pid != f.ppid && f.pid >= 0 => {
                // a new process: its parent's mappings and name, until it maps or execs
                if let Some(m) = self.modules.get(&f.ppid).filter(|m| !m.is_empty()) {
                    self.inherited.insert(f.pid, m.clone());
                }
                if let Some(n) = self.names.get(&f.ptid).cloned() {
                    self.names.entry(f.tid).or_insert(n);
                }
            }
            EventRecord::Fork(f) => {
                if let Some(n) = self.names.get(&f.pid).cloned() {
                    self.names.entry(f.tid).or_insert(n);
                }
            }
            // The kernel's own mappings (pid −1) are no process's.
            EventRecord::Mmap2(m) if m.protection & PROT_EXEC != 0 && m.pid >= 0 => {
                let path = m.path.as_slice().to_vec();
                let build_id = match &m.file_id {
                    Mmap2FileId::BuildId(b) => Some(hex(b)),
                    Mmap2FileId::InodeAndVersion(_) => self.build_ids.get(&path).cloned(),
                };
                self.module(m.pid, m.tid, path, build_id, m.address, m.length, m.page_offset);
            }
            EventRecord::Mmap(m) if m.is_executable && m.pid >= 0 => {
                let path = m.path.as_slice().to_vec();
                let build_id = self.build_ids.get(&path).cloned();
                self.module(m.pid, m.tid, path, build_id, m.address, m.length, m.page_offset);
            }
            EventRecord::Sample(s) => {
                let (Some(pid), Some(tid), Some(t)) = (s.pid, s.tid, time.or(s.timestamp)) else { return };
                self.enter(pid, tid);
                self.inherit(pid);
                let time_ns = t.saturating_sub(*self.start.get_or_insert(t));
                let marker = marker || s.id.is_some_and(|id| self.marker_ids.contains(&id));
                if let Some(chain) = &s.callchain {
                    // perf's context markers (PERF_CONTEXT_KERNEL, _USER…) are the top 4095 values
                    let frames: Vec<u64> = (0..chain.len()).filter_map(|i| chain.get(i)).filter(|&a| a < PERF_CONTEXT_MAX).collect();
                    self.pending.push_back(Item::Stack(frames));
                }
                self.pending.push_back(Item::Event(match marker {
                    true => Event::Marker { time_ns, instructions: None },
                    false => Event::Sample(Sample { time_ns, ip: s.ip.unwrap_or(0), instructions: None }),
                }));
            }
            EventRecord::Lost(l) => self.warnings.push(format!("perf lost {} records (its ring buffer was full)", l.count)),
            _ => {}
        }
    }

    /// The items after this are of `pid`'s thread `tid`: said when it changes.
    fn enter(&mut self, pid: i32, tid: i32) {
        if self.context == Some((pid, tid)) {
            return;
        }
        self.context = Some((pid, tid));
        let name = |t: i32| self.names.get(&t).cloned().unwrap_or_default();
        let (process, thread) = (name(pid), name(tid));
        self.pending.push_back(Item::Context { pid, tid, process, thread });
    }

    /// A forked process's inherited mappings, given before its first sample or mapping.
    fn inherit(&mut self, pid: i32) {
        if let Some(modules) = self.inherited.remove(&pid) {
            self.pending.extend(modules.iter().cloned().map(|m| Item::Event(Event::Module(m))));
            self.modules.entry(pid).or_default().extend(modules);
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn module(&mut self, pid: i32, tid: i32, path: Vec<u8>, build_id: Option<String>, start: u64, len: u64, file_offset: u64) {
        let path = String::from_utf8_lossy(&path).into_owned();
        let module = Module { path, build_id, start, end: start.saturating_add(len), file_offset };
        self.enter(pid, tid);
        // mapped over what it inherited: those are given first, the new one after them
        self.inherit(pid);
        let mine = self.modules.entry(pid).or_default();
        // bounded: a process that maps code without end passes on its first mappings
        if mine.len() < MODULES_PER_PROCESS {
            mine.push(module.clone());
        }
        self.pending.push_back(Item::Event(Event::Module(module)));
    }
}

/// Checks the parser asserts instead of reporting (it would panic): an `MMAP2` record
/// with a build id holds at most 20 bytes of it.
fn parseable(record: &RawEventRecord) -> bool {
    const WITH_BUILD_ID: u16 = 1 << 14;
    if record.record_type == RecordType::SAMPLE {
        return callchain_fits(record);
    }
    if record.record_type != RecordType::MMAP2 || record.misc & WITH_BUILD_ID == 0 {
        return true;
    }
    // pid, tid (4 each), address, length, page offset (8 each), then the build id's length
    record.data.get(32..33).and_then(|mut b| b.read_u8().ok()).is_some_and(|len| len <= 20)
}

/// A sample's call chain, if it has one, holds no more addresses than the record has
/// room for: the parser sizes it by multiplying the claimed count by 8, which overflows for
/// a count past 2^61 (found by fuzzing). The fields before it are walked as the parser
/// walks them; where they already run past the record, the parser says so itself.
fn callchain_fits(record: &RawEventRecord) -> bool {
    use linux_perf_data::linux_perf_event_reader::{ReadFormat, SampleFormat};
    let info = &record.parse_info;
    let (format, read) = (info.sample_format, info.read_format);
    if !format.contains(SampleFormat::CALLCHAIN) {
        return true;
    }
    let u64_at = |at: usize| -> Option<u64> {
        let mut b = record.data.get(at..at.checked_add(8)?)?;
        (0..8).try_fold(0u64, |v, i| Some(v | u64::from(b.read_u8().ok()?) << (8 * i)))
    };
    let fixed = [SampleFormat::IDENTIFIER, SampleFormat::IP, SampleFormat::TID, SampleFormat::TIME, SampleFormat::ADDR, SampleFormat::ID, SampleFormat::STREAM_ID, SampleFormat::CPU, SampleFormat::PERIOD];
    let mut at = 8 * fixed.iter().filter(|&&f| format.contains(f)).count();
    if format.contains(SampleFormat::READ) {
        let times = [ReadFormat::TOTAL_TIME_ENABLED, ReadFormat::TOTAL_TIME_RUNNING].iter().filter(|&&f| read.contains(f)).count();
        // the parser's reading: one value (GROUP set), or a count of values (GROUP not set)
        let words = if read.contains(ReadFormat::GROUP) {
            Some(1 + times + usize::from(read.contains(ReadFormat::ID)))
        } else {
            u64_at(at).and_then(|nr| usize::try_from(nr).ok()).and_then(|nr| nr.checked_mul(1 + usize::from(read.contains(ReadFormat::ID)))).and_then(|n| n.checked_add(1 + times))
        };
        match words.and_then(|w| w.checked_mul(8)).and_then(|b| at.checked_add(b)) {
            Some(next) if next <= record.data.len() => at = next,
            _ => return true,
        }
    }
    match u64_at(at) {
        Some(n) => n <= ((record.data.len() - at - 8) / 8) as u64,
        None => true,
    }
}

/// The program and its arguments from perf's own command line (`perf record … -- PROG
/// ARGS`, or the first word that is not an option or an option's value).
fn program_of(cmdline: &[String]) -> (String, Vec<String>) {
    let rest: Vec<String> = match cmdline.iter().position(|a| a == "--") {
        Some(i) => cmdline[i + 1..].to_vec(),
        None => Vec::new(),
    };
    match rest.split_first() {
        Some((p, args)) => (p.clone(), args.to_vec()),
        None => (cmdline.last().cloned().unwrap_or_default(), Vec::new()),
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// A perf.data opened for reading, with its header corrected when the file is cut: perf
/// writes the data section's size (and the feature sections after it) when it ends, so a
/// file perf did not finish claims more data than it holds, or none. The records are
/// walked (each starts with its size) to the last one the file holds whole; the header
/// then says the data ends there and that no feature sections follow.
struct Patched {
    file: BufReader<File>,
    header: [u8; HEADER_BYTES],
    pos: u64,
    /// `pos`, seen from the reader: where a damaged record was met.
    seen: Rc<Cell<u64>>,
}

impl Patched {
    fn open(path: &Path) -> std::io::Result<(Patched, Option<u64>)> {
        let mut file = BufReader::new(File::open(path)?);
        let mut header = [0u8; HEADER_BYTES];
        let len = file.get_ref().metadata()?.len();
        let bad = |what: String| std::io::Error::new(std::io::ErrorKind::InvalidData, what);
        if len < HEADER_BYTES as u64 {
            return Err(bad(format!("{len} bytes: too short for a perf.data header ({HEADER_BYTES} bytes)")));
        }
        file.read_exact(&mut header)?;
        if &header[..8] != MAGIC {
            return Err(bad("not a perf.data (no PERFILE2 magic at byte 0)".into()));
        }
        let field = |at: usize| u64::from_le_bytes(header[at..at + 8].try_into().expect("eight bytes"));
        let (offset, size) = (field(DATA_OFFSET_AT), field(DATA_SIZE_AT));
        if offset < HEADER_BYTES as u64 || offset > len {
            return Err(bad(format!("its data section starts at byte {offset}, outside the file's {len} bytes")));
        }
        sections_inside(&mut file, &header, len)?;
        // The event-types section is perf's format before 2011 (the attribute section has
        // carried the same since), and the parser trusts the id lists it names, whose
        // layout it reads its own way (fuzzing found 10^11-byte vectors sized from it):
        // it is left out, and the attributes are read from their own section.
        header[EVENT_TYPES_AT..EVENT_TYPES_AT + 16].fill(0);
        let mut truncated = None;
        // The records are walked even in a finished file: an AUXTRACE record's trace data
        // is sized by a field the parser allocates for before reading (found by fuzzing: a
        // claim of 10^14 bytes aborted); one that runs past the data ends it, as a cut would.
        let cut = size == 0 || offset.saturating_add(size) > len;
        let data_end = if cut { len } else { offset + size };
        let end = whole_records_end(&mut file, offset, data_end)?;
        if cut || end < data_end {
            header[DATA_SIZE_AT..DATA_SIZE_AT + 8].copy_from_slice(&(end - offset).to_le_bytes());
            header[FEATURES_AT..HEADER_BYTES].fill(0);
            truncated = Some(end);
        } else if !features_sane(&mut file, &header, offset + size, len)? {
            // perf.data's optional sections (event names, command line, build ids) are
            // read whole and trusted by the parser: damaged ones are left out rather than
            // risk an allocation the size of a corrupt count.
            header[FEATURES_AT..HEADER_BYTES].fill(0);
        }
        file.seek(SeekFrom::Start(0))?;
        Ok((Patched { file, header, pos: 0, seen: Rc::default() }, truncated))
    }
}

fn le64(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().expect("eight bytes"))
}

fn le32(b: &[u8], at: usize) -> u64 {
    u64::from(u32::from_le_bytes(b[at..at + 4].try_into().expect("four bytes")))
}

/// The attribute section, each attribute's ids and the event-types section lie inside
/// the file, and the attribute size is one perf writes (the parser sizes its tables by
/// these; a corrupt one would ask for terabytes). A section outside is `InvalidData`.
fn sections_inside(file: &mut BufReader<File>, header: &[u8; HEADER_BYTES], len: u64) -> std::io::Result<()> {
    let bad = |what: String| std::io::Error::new(std::io::ErrorKind::InvalidData, what);
    let inside = |at: u64, size: u64| at.checked_add(size).is_some_and(|end| end <= len);
    let (attr_size, attrs_at, attrs_len) = (le64(header, 16), le64(header, 24), le64(header, 32));
    if !(64..=4096).contains(&attr_size) || !inside(attrs_at, attrs_len) || attrs_len % attr_size != 0 {
        return Err(bad(format!("its attribute section ({attrs_len} bytes at {attrs_at}, {attr_size} each) does not fit the file's {len} bytes")));
    }
    // Each attribute ends with the offset and size of its list of ids, which the parser
    // sizes a vector by.
    let mut ids = [0u8; 16];
    for i in 0..attrs_len / attr_size {
        let at = attrs_at + i * attr_size;
        file.seek(SeekFrom::Start(at + attr_size - 16)).and_then(|_| file.read_exact(&mut ids))?;
        if !inside(le64(&ids, 0), le64(&ids, 8)) {
            return Err(bad(format!("attribute {i} (at byte {at}) has its ids outside the file")));
        }
    }
    Ok(())
}

/// Every optional section lies inside the file, and the two whose counts the parser
/// trusts — the event descriptions (feature 12) and the command line (11) — hold what
/// their counts say.
fn features_sane(file: &mut BufReader<File>, header: &[u8; HEADER_BYTES], table_at: u64, len: u64) -> std::io::Result<bool> {
    let bits: Vec<usize> = (0..256).filter(|&b| header[FEATURES_AT + b / 8] & (1 << (b % 8)) != 0).collect();
    let table_len = bits.len() as u64 * 16;
    if table_at.checked_add(table_len).is_none_or(|end| end > len) {
        return Ok(false);
    }
    let mut table = vec![0u8; table_len as usize];
    file.seek(SeekFrom::Start(table_at))?;
    file.read_exact(&mut table)?;
    for (k, &bit) in bits.iter().enumerate() {
        let (at, size) = (le64(&table, k * 16), le64(&table, k * 16 + 8));
        if at.checked_add(size).is_none_or(|end| end > len) || size > 1 << 30 {
            return Ok(false);
        }
        if bit == 11 || bit == 12 {
            let mut section = vec![0u8; size as usize];
            file.seek(SeekFrom::Start(at))?;
            file.read_exact(&mut section)?;
            let whole = if bit == 12 { event_descriptions_whole(&section) } else { strings_whole(&section, 0).is_some() };
            if !whole {
                return Ok(false);
            }
        }
    }
    Ok(true)
}

/// The command line: a count, then that many strings (each a u32 length and its bytes).
/// Returns where the strings end.
fn strings_whole(s: &[u8], from: usize) -> Option<usize> {
    let n = le32(s.get(from..from + 4)?, 0);
    (0..n).try_fold(from + 4, |at, _| string_end(s, at))
}

fn string_end(s: &[u8], at: usize) -> Option<usize> {
    let n = le32(s.get(at..at + 4)?, 0) as usize;
    let end = at.checked_add(4)?.checked_add(n)?;
    (end <= s.len()).then_some(end)
}

/// The event descriptions: count and attribute size, then per event its attribute, the
/// number of its ids, its name (a string) and the ids.
fn event_descriptions_whole(s: &[u8]) -> bool {
    let Some(head) = s.get(..8) else { return false };
    let (n, attr_size) = (le32(head, 0), le32(head, 4) as usize);
    let mut at = 8usize;
    for _ in 0..n {
        let Some(ids_at) = at.checked_add(attr_size) else { return false };
        let Some(nr_ids) = s.get(ids_at..ids_at + 4).map(|b| le32(b, 0) as usize) else { return false };
        let Some(end) = string_end(s, ids_at + 4) else { return false };
        at = match nr_ids.checked_mul(8).and_then(|b| end.checked_add(b)) {
            Some(next) if next <= s.len() => next,
            _ => return false,
        };
    }
    true
}

/// The ids of the file's tracepoint events (type 2), read from its attribute section:
/// each attribute (`attr_size` bytes) starts with its type (u32) and ends with the file
/// section (offset, size) of its ids. Bounded by the file: a section outside it is skipped.
fn tracepoint_ids(file: &mut Patched) -> std::io::Result<HashSet<u64>> {
    let field = |at: usize| u64::from_le_bytes(file.header[at..at + 8].try_into().expect("eight bytes"));
    let (attr_size, attrs_at, attrs_len) = (field(16), field(24), field(32));
    let len = file.file.get_ref().metadata()?.len();
    let mut ids = HashSet::new();
    if !(24..=4096).contains(&attr_size) || attrs_at.saturating_add(attrs_len) > len {
        return Ok(ids);
    }
    for i in 0..attrs_len / attr_size {
        let mut attr = vec![0u8; attr_size as usize];
        file.file.seek(SeekFrom::Start(attrs_at + i * attr_size))?;
        file.file.read_exact(&mut attr)?;
        let word = |at: usize| u64::from_le_bytes(attr[at..at + 8].try_into().expect("eight bytes"));
        let (ids_at, ids_len) = (word(attr.len() - 16), word(attr.len() - 8));
        if u32::from_le_bytes(attr[..4].try_into().expect("four bytes")) != 2 || ids_at.saturating_add(ids_len) > len || ids_len > 1 << 20 {
            continue;
        }
        let mut raw = vec![0u8; ids_len as usize];
        file.file.seek(SeekFrom::Start(ids_at))?;
        file.file.read_exact(&mut raw)?;
        ids.extend(raw.chunks_exact(8).map(|c| u64::from_le_bytes(c.try_into().expect("eight bytes"))));
    }
    file.seek(SeekFrom::Start(0))?;
    Ok(ids)
}

/// The end of the last record wholly inside the file, walking from the data section's
/// start (every record starts with its type (u32), misc (u16) and size (u16)).
fn whole_records_end(file: &mut BufReader<File>, offset: u64, len: u64) -> std::io::Result<u64> {
    /// PERF_RECORD_AUXTRACE: its record is followed by `size` bytes of trace data, the
    /// record's first field, which the parser allocates before it reads them.
    const AUXTRACE: u32 = 71;
    let mut at = offset.min(len);
    let mut head = [0u8; 8];
    file.seek(SeekFrom::Start(at))?;
    loop {
        if at + 8 > len {
            return Ok(at);
        }
        file.read_exact(&mut head)?;
        let kind = u32::from_le_bytes([head[0], head[1], head[2], head[3]]);
        let size = u64::from(u16::from_le_bytes([head[6], head[7]]));
        if size < 8 || at + size > len {
            return Ok(at);
        }
        let mut next = at + size;
        let mut read = 8;
        if kind == AUXTRACE {
            let mut aux = [0u8; 8];
            if size < 16 {
                return Ok(at);
            }
            file.read_exact(&mut aux)?;
            read += 8;
            match next.checked_add(u64::from_le_bytes(aux)) {
                Some(n) if n <= len => next = n,
                _ => return Ok(at),
            }
        }
        // within the buffer where the record is short: no read per record
        file.seek_relative(i64::try_from(next - at - read).unwrap_or(i64::MAX))?;
        at = next;
    }
}

impl Read for Patched {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        if self.pos < HEADER_BYTES as u64 {
            let from = self.pos as usize;
            let n = buf.len().min(HEADER_BYTES - from);
            buf[..n].copy_from_slice(&self.header[from..from + n]);
            self.pos += n as u64;
            self.seen.set(self.pos);
            self.file.seek(SeekFrom::Start(self.pos))?;
            return Ok(n);
        }
        let n = self.file.read(buf)?;
        self.pos += n as u64;
        self.seen.set(self.pos);
        Ok(n)
    }
}

impl Seek for Patched {
    fn seek(&mut self, to: SeekFrom) -> std::io::Result<u64> {
        self.pos = self.file.seek(to)?;
        self.seen.set(self.pos);
        Ok(self.pos)
    }
}

/// What [`AnyRecording::head`] read.
pub struct Head {
    /// The first items (modules aside): at most the limit of events, with the
    /// [`Item::Context`] and [`Item::Stack`] items among them.
    pub items: Vec<Item>,
    /// The Module events met while reading them, with their process where the recording
    /// says it (perf.data).
    pub modules: Vec<(Option<i32>, Module)>,
    /// Counts of the events and modules returned.
    pub summary: kansoku_core::RecordingSummary,
    /// The recording ended within the limit: the counts are the whole recording's.
    pub complete: bool,
}

/// What [`AnyRecording::summarize_items`] counted.
pub struct Summary {
    /// Counts of the events and modules, and the time span.
    pub summary: kansoku_core::RecordingSummary,
    /// The modules, each with its process where the recording says it (perf.data).
    pub modules: Vec<(Option<i32>, Module)>,
    /// Samples (and marker hits) per process, most first (perf.data).
    pub processes: Vec<ProcessCount>,
}

/// A recording of either kind, opened by what the file is: kansoku's `.ksk` or perf's
/// perf.data. The commands that read samples open files through this.
pub enum AnyRecording {
    /// A `.ksk` written by `kansoku record`.
    Kansoku(Box<kansoku_core::RecordingReader>),
    /// A perf.data written by `perf record`.
    Perf(Box<PerfDataReader>),
}

impl AnyRecording {
    /// Opens either kind, told apart by the file's first eight bytes (perf's magic).
    pub fn open(path: &Path) -> Result<AnyRecording, RecordingError> {
        if is_perf_data(path) {
            return Ok(AnyRecording::Perf(Box::new(PerfDataReader::open(path)?)));
        }
        Ok(AnyRecording::Kansoku(Box::new(kansoku_core::RecordingReader::open(path)?)))
    }

    /// The recording's header (for a perf.data, as [`PerfDataReader::header`] builds it).
    pub fn header(&self) -> &Header {
        match self {
            AnyRecording::Kansoku(r) => r.header(),
            AnyRecording::Perf(r) => r.header(),
        }
    }

    /// The next event of the one recorded process (for a perf.data of several, the one
    /// [`PerfDataReader::next_event`] selects); `None` at the end.
    pub fn next_event(&mut self) -> Result<Option<Event>, RecordingError> {
        match self {
            AnyRecording::Kansoku(r) => r.next_event(),
            AnyRecording::Perf(r) => r.next_event(),
        }
    }

    /// Where a cut file was read up to.
    pub fn truncated_at(&self) -> Option<u64> {
        match self {
            AnyRecording::Kansoku(r) => r.truncated_at(),
            AnyRecording::Perf(r) => r.truncated_at(),
        }
    }

    /// The next item of every process the recording holds, with call chains: a kansoku
    /// recording's events as they are, a perf.data's as [`PerfDataReader::next_item`]
    /// gives them.
    pub fn next_item(&mut self) -> Result<Option<Item>, RecordingError> {
        match self {
            AnyRecording::Kansoku(r) => Ok(r.next_event()?.map(Item::Event)),
            AnyRecording::Perf(r) => r.next_item(),
        }
    }

    /// Counts, the module map (with each module's process, perf.data) and the samples of
    /// each process (perf.data: every process; a kansoku recording's are not listed), in
    /// one pass over every process's items.
    pub fn summarize_items(mut self) -> Result<Summary, RecordingError> {
        let mut pids = Vec::new();
        let mut processes: HashMap<i32, ProcessCount> = HashMap::new();
        let mut at: Option<(i32, String)> = None;
        let (mut summary, modules) = kansoku_core::summarize_events(&mut || loop {
            match self.next_item()? {
                None => return Ok(None),
                Some(Item::Stack(_)) => {}
                Some(Item::Context { pid, tid, process, .. }) => {
                    at = Some((pid, process));
                    return Ok(Some(Event::Thread { tid: tid as u32 }));
                }
                Some(Item::Event(e)) => {
                    match (&e, &at) {
                        (Event::Module(_), _) => pids.push(at.as_ref().map(|a| a.0)),
                        (Event::Sample(_) | Event::Marker { .. }, Some((pid, name))) => {
                            processes.entry(*pid).or_insert_with(|| ProcessCount { pid: *pid, name: name.clone(), samples: 0 }).samples += 1;
                        }
                        _ => {}
                    }
                    return Ok(Some(e));
                }
            }
        })?;
        summary.truncated_at = self.truncated_at();
        if let AnyRecording::Kansoku(r) = &self {
            summary.bytes = r.bytes_read();
        }
        let mut processes: Vec<ProcessCount> = processes.into_values().collect();
        processes.sort_by_key(|c| (std::cmp::Reverse(c.samples), c.pid));
        Ok(Summary { summary, modules: pids.into_iter().zip(modules).collect(), processes })
    }

    /// Counts and the module map (one pass; open the file again for its events).
    pub fn summarize_with_modules(self) -> Result<(kansoku_core::RecordingSummary, Vec<Module>), RecordingError> {
        match self {
            AnyRecording::Kansoku(r) => r.summarize_with_modules(),
            AnyRecording::Perf(mut r) => {
                let (mut s, modules) = kansoku_core::summarize_events(&mut || r.next_event())?;
                s.truncated_at = r.truncated_at();
                Ok((s, modules))
            }
        }
    }

    /// The recording's first `limit` events other than modules, and the modules met before
    /// them, reading no further (`show --limit N`: a huge recording's head at once; the
    /// counts of the whole need [`Self::summarize_with_modules`]). `summary` counts what
    /// was read, `bytes` the bytes decoded (perf.data: 0, its reader does not count).
    pub fn head(mut self, limit: u64) -> Result<Head, RecordingError> {
        let mut items = Vec::new();
        let mut events = Vec::new();
        let mut modules = Vec::new();
        let mut complete = true;
        let (mut pid, mut shown) = (None, 0u64);
        while let Some(item) = self.next_item()? {
            match item {
                Item::Event(Event::Module(m)) => modules.push((pid, m)),
                // one event past the limit says the recording goes on
                Item::Event(_) if shown >= limit => {
                    complete = false;
                    break;
                }
                Item::Event(e) => {
                    shown += 1;
                    events.push(e.clone());
                    items.push(Item::Event(e));
                }
                Item::Context { pid: p, tid, .. } => {
                    pid = Some(p);
                    events.push(Event::Thread { tid: tid as u32 });
                    items.push(item);
                }
                Item::Stack(_) => items.push(item),
            }
        }
        let mut read = events.iter().cloned().map(Some).chain(modules.iter().map(|(_, m)| Some(Event::Module(m.clone()))));
        let (mut summary, _) = kansoku_core::summarize_events(&mut || Ok(read.next().flatten()))?;
        summary.truncated_at = self.truncated_at();
        summary.bytes = match &self {
            AnyRecording::Kansoku(r) => r.bytes_read(),
            AnyRecording::Perf(_) => 0,
        };
        Ok(Head { items, modules, summary, complete })
    }

    /// Which process of a perf.data of several [`Self::next_event`] reads, and which it
    /// leaves out ([`PerfDataReader::process_selection`]); a kansoku recording is one process.
    pub fn process_selection(&self) -> Option<&str> {
        match self {
            AnyRecording::Kansoku(_) => None,
            AnyRecording::Perf(r) => r.process_selection(),
        }
    }

    /// What the perf.data reader noticed (records perf lost); a cut file is
    /// [`Self::truncated_at`].
    pub fn warnings(&self) -> &[String] {
        match self {
            AnyRecording::Kansoku(_) => &[],
            AnyRecording::Perf(r) => r.warnings(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `show --limit N`: the head of a large recording is read without reading the rest.
    #[test]
    fn the_head_of_a_large_recording_reads_only_the_head() {
        use kansoku_core::{Header, RecordingKind, RecordingWriter};
        let path = std::env::temp_dir().join(format!("kansoku-head-{}.ksk", std::process::id()));
        let mut w = RecordingWriter::create(&path, &Header::new(RecordingKind::ExactTrace, "/bin/true", vec![])).unwrap();
        w.write(&Event::Module(Module { path: "/bin/true".into(), build_id: None, start: 0x1000, end: 0x9000, file_offset: 0 })).unwrap();
        // 4 M instructions scattered (no two alike in a row, so no run compresses them)
        for i in 0..4_000_000u64 {
            w.write(&Event::Instruction { addr: 0x1000 + (i * 7919) % 0x8000 }).unwrap();
        }
        w.finish().unwrap();
        let size = std::fs::metadata(&path).unwrap().len();
        let head = AnyRecording::open(&path).unwrap().head(10).unwrap();
        assert_eq!((head.items.len(), head.modules.len(), head.complete), (10, 1, false));
        assert_eq!((head.summary.instructions, head.summary.events), (10, 11));
        assert!(head.items.iter().all(|e| matches!(e, Item::Event(Event::Instruction { .. }))));
        assert!(size > 8 << 20 && head.summary.bytes < 4096, "{} of {size} bytes decoded", head.summary.bytes);
        // within the limit the head is the whole recording, counts and all
        let whole = AnyRecording::open(&path).unwrap().head(5_000_000).unwrap();
        let (summary, _) = AnyRecording::open(&path).unwrap().summarize_with_modules().unwrap();
        assert!(whole.complete && whole.summary.instructions == 4_000_000);
        assert_eq!((whole.summary.events, whole.summary.bytes), (summary.events, summary.bytes));
        std::fs::remove_file(&path).unwrap();
    }

    #[test]
    fn the_program_is_what_follows_the_double_dash() {
        let words = |s: &str| s.split(' ').map(String::from).collect::<Vec<_>>();
        assert_eq!(program_of(&words("perf record -e cpu-clock -o x -- /bin/prog 10 20")), ("/bin/prog".to_string(), words("10 20")));
        assert_eq!(program_of(&words("perf record ./prog")).0, "./prog");
        assert_eq!(program_of(&[]).0, "");
    }

    /// Inputs fuzzing found (kept as seeds of the perf_data target): each is read to an
    /// error or its end, never a panic (tests build with overflow checks, as the fuzzer does).
    #[test]
    fn fuzz_findings_are_errors_not_panics() {
        let dir = std::env::temp_dir().join(format!("kansoku-perfdata-fuzz-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let seeds = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/seeds/perf_data");
        let mut found = 0;
        for entry in std::fs::read_dir(&seeds).unwrap() {
            let path = entry.unwrap().path();
            if !path.file_name().unwrap().to_string_lossy().starts_with("regression-") {
                continue;
            }
            found += 1;
            let copy = dir.join(path.file_name().unwrap());
            std::fs::copy(&path, &copy).unwrap();
            if let Ok(mut r) = PerfDataReader::open(&copy) {
                let mut n = 0;
                while let Ok(Some(_)) = r.next_event() {
                    n += 1;
                    assert!(n < 1_000_000, "{}: runs on", path.display());
                }
            }
        }
        assert!(found >= 3, "the regression seeds are in {}", seeds.display());
    }

    #[test]
    fn what_is_not_a_perf_data_is_refused_by_name() {
        let dir = std::env::temp_dir().join(format!("kansoku-perfdata-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let f = dir.join("notes.txt");
        std::fs::write(&f, b"hello, this is not perf data at all, but long enough to read a header from it: 104 bytes and more, more, more").unwrap();
        assert!(!is_perf_data(&f));
        let e = PerfDataReader::open(&f).err().unwrap().to_string();
        assert!(e.contains("notes.txt") && e.contains("PERFILE2"), "{e}");
    }
}
