//! The `.ksk` recording format.
//!
//! ```text
//! magic   "KANSOKU\0"              8 bytes
//! version u16 little endian        (FORMAT_VERSION)
//! header  varint length + JSON     (Header: program, args, kind, parameters)
//! events  one after another        (see below)
//! trailer End tag + varint count   (absent if the writer was cut off)
//! ```
//!
//! Event encoding — chosen so that an exact trace costs about one byte per instruction:
//!
//! | first byte   | event | payload |
//! |--------------|-------|---------|
//! | `0x80..=0xff`| instruction, address delta `(b & 0x7f) - 64` from the previous instruction | none |
//! | `0x01`       | module | varint length + JSON [`Module`] |
//! | `0x02`       | instruction | zig-zag delta |
//! | `0x03`       | block start | zig-zag delta from the previous block start |
//! | `0x04`       | sample | zig-zag time delta, zig-zag ip delta, flag, [count delta] |
//! | `0x05`       | marker hit | zig-zag time delta, flag, [count delta] |
//! | `0x06`       | thread | varint tid |
//! | `0x07`       | signal | varint signal number |
//! | `0x08`       | exit | kind byte, zig-zag value |
//! | `0x09`       | end (trailer) | varint number of records before it |
//! | `0x0a`       | block shape (v2) | varint start address, varint n, n bytes: each instruction's length |
//! | `0x0b`       | executed block (v2) | zig-zag delta from the previous executed block's start: all its instructions ran |
//! | `0x0c`       | executed block, cut (v2) | zig-zag delta as above, varint count: only its first `count` instructions ran |
//! | `0x0d`       | memory accesses (v2) | varint n, n × (varint `index << 1 \| write`, zig-zag address delta): of the next executed block's (or instruction's) instructions |
//! | `0x40..=0x7f`| extension from a newer version | varint length + bytes, skipped |
//!
//! Times and instruction counts are shared deltas across samples and marker hits.
//!
//! **Executed blocks (format 2).** An exact trace from the Valgrind engine costs about two
//! bytes per executed block instead of one per instruction: each translated block's shape
//! (its start and instruction lengths) is written once, before its first execution, and
//! every execution is a short record naming its start. The reader expands each executed
//! block into the same [`Event::Instruction`]s a single-stepped trace holds, so consumers
//! never see blocks. The shapes travel in the recording itself (not decoded from the
//! program's files afterwards, as DynamoRIO's offline tracer does), so a recording stays
//! readable when the binaries change or the code was generated at run time. A later shape
//! for the same start replaces the earlier one (code rewritten at run time). With data
//! addresses, the accesses of a block come in one record before it, each naming its
//! instruction by index, and are read back as [`Event::Access`] events after the
//! instruction that made them.

use std::fs::File;
use std::io::{self, BufReader, BufWriter, Read, Write};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::event::{Event, ExitStatus, Module, Sample};
use crate::varint::{self, VarintError};

/// The first eight bytes of every recording.
pub const MAGIC: &[u8; 8] = b"KANSOKU\0";
/// The format version this build writes, and the newest it reads.
pub const FORMAT_VERSION: u16 = 2;
/// Instructions a block shape may hold (VEX translates at most 99; a record claiming more
/// is corrupt, which bounds what one record can make the reader allocate).
pub const MAX_SHAPE_INSTRUCTIONS: usize = 255;
/// The longest x86-64 instruction.
const MAX_INSTRUCTION_BYTES: u8 = 15;

const TAG_MODULE: u8 = 0x01;
const TAG_INSTRUCTION: u8 = 0x02;
const TAG_BLOCK: u8 = 0x03;
const TAG_SAMPLE: u8 = 0x04;
const TAG_MARKER: u8 = 0x05;
const TAG_THREAD: u8 = 0x06;
const TAG_SIGNAL: u8 = 0x07;
const TAG_EXIT: u8 = 0x08;
const TAG_END: u8 = 0x09;
const TAG_SHAPE: u8 = 0x0a;
const TAG_RUN: u8 = 0x0b;
const TAG_RUN_PART: u8 = 0x0c;
const TAG_ACCESSES: u8 = 0x0d;
/// Accesses one record may hold (VEX's superblocks touch memory far fewer times).
const MAX_ACCESSES: u64 = 1 << 16;
const SHORT_BIAS: i64 = 64;

/// What kind of observation a recording holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RecordingKind {
    /// Every executed user-space instruction (ptrace single-stepping, or kansoku's
    /// Valgrind tool: header parameter `engine`).
    ExactTrace,
    /// Instruction-pointer samples (perf_event or simulated from an exact trace).
    Samples,
    /// Basic-block start addresses (Valgrind/Lackey or a reduced exact trace).
    Blocks,
}

/// The recording's header: what was observed and how.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Header {
    /// What the events are (exact trace, samples, blocks).
    pub kind: RecordingKind,
    /// The observed program's path as given.
    pub program: String,
    /// The program's arguments, without the program.
    pub args: Vec<String>,
    /// Free-form parameters of the observation (period, marker, limits, ...).
    #[serde(default)]
    pub parameters: serde_json::Map<String, serde_json::Value>,
    /// Seconds since the Unix epoch when recording started.
    #[serde(default)]
    pub created: u64,
}

impl Header {
    /// A header stamped with the current time and no parameters.
    pub fn new(kind: RecordingKind, program: impl Into<String>, args: Vec<String>) -> Self {
        let created = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0);
        Header { kind, program: program.into(), args, parameters: Default::default(), created }
    }

    /// The header with one parameter set (`period`, `marker`, `engine`, …), replacing any
    /// value it had.
    pub fn with_parameter(mut self, key: &str, value: impl Into<serde_json::Value>) -> Self {
        self.parameters.insert(key.to_string(), value.into());
        self
    }
}

/// Errors reading or writing a recording. Each names the file, and the byte offset when
/// the content is at fault.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RecordingError {
    /// Opening, reading or writing the file failed.
    #[error("{path}: {cause}")]
    Io {
        /// The recording.
        path: PathBuf,
        /// The OS's error.
        cause: io::Error,
    },
    /// The file does not start with [`MAGIC`].
    #[error("{path}: not a kansoku recording (no KANSOKU magic at byte 0)")]
    NotARecording {
        /// The file.
        path: PathBuf,
    },
    /// A newer kansoku wrote it.
    #[error("{path}: recording format version {version} is newer than this kansoku understands ({FORMAT_VERSION}); upgrade kansoku")]
    UnsupportedVersion {
        /// The recording.
        path: PathBuf,
        /// The version its header gives.
        version: u16,
    },
    /// The content does not decode.
    #[error("{path}: corrupted at byte {offset}: {what}")]
    Corrupt {
        /// The recording.
        path: PathBuf,
        /// Byte offset of the damaged record.
        offset: u64,
        /// What is wrong there.
        what: String,
    },
}

/// Counts gathered while streaming through a recording.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct RecordingSummary {
    /// Events of every kind, modules included.
    pub events: u64,
    /// Instruction events (exact traces).
    pub instructions: u64,
    /// Block events.
    pub blocks: u64,
    /// Sample events.
    pub samples: u64,
    /// Marker hits.
    pub markers: u64,
    /// Memory accesses (exact traces with data addresses).
    pub accesses: u64,
    /// Thread switches.
    pub threads: u64,
    /// Signals delivered.
    pub signals: u64,
    /// Events of a newer version, skipped.
    pub unknown: u64,
    /// How the observation ended, when the recording says.
    pub exit: Option<ExitStatus>,
    /// Set when the file ended before its trailer: byte offset of the last complete event.
    pub truncated_at: Option<u64>,
    /// Bytes read.
    pub bytes: u64,
}

/// Delta-coding state shared by writer and reader.
#[derive(Default)]
struct DeltaState {
    instruction: u64,
    block: u64,
    /// Start of the previous executed block (format 2).
    run: u64,
    /// Address of the previous memory access (format 2).
    access: u64,
    sample_ip: u64,
    time_ns: u64,
    count: u64,
}

impl DeltaState {
    fn delta(prev: &mut u64, next: u64) -> i64 {
        let d = next.wrapping_sub(*prev) as i64;
        *prev = next;
        d
    }
    fn apply(prev: &mut u64, delta: i64) -> u64 {
        *prev = prev.wrapping_add(delta as u64);
        *prev
    }
}

/// Streams events into a `.ksk` file. Memory use does not depend on the run's length.
pub struct RecordingWriter<W: Write = BufWriter<File>> {
    out: W,
    path: PathBuf,
    state: DeltaState,
    events: u64,
    /// Flush at least this often (checked every [`FLUSH_CHECK_EVENTS`] events), so a
    /// recorder killed by SIGKILL or the OOM killer loses at most the last moments.
    flush_every: Option<std::time::Duration>,
    last_flush: std::time::Instant,
}

/// The shapes an executed block refers to, by start address (reader side).
type Shapes = std::collections::HashMap<u64, std::sync::Arc<[u8]>>;

/// Buffer size of a recording file: a SIGKILL loses at most this much ...
const FLUSH_BYTES: usize = 64 << 10;
/// ... or what was written in this time.
const FLUSH_INTERVAL: std::time::Duration = std::time::Duration::from_millis(100);
/// Reading the clock costs about as much as encoding a few events; look every so often.
const FLUSH_CHECK_EVENTS: u64 = 256;

impl RecordingWriter<BufWriter<File>> {
    /// Creates `path` and writes the header.
    pub fn create(path: impl AsRef<Path>, header: &Header) -> Result<Self, RecordingError> {
        let path = path.as_ref().to_path_buf();
        let file = File::create(&path).map_err(|source| RecordingError::Io { path: path.clone(), cause: source })?;
        // A full buffer is written out by itself: at most this much is lost on SIGKILL.
        let mut w = Self::new(BufWriter::with_capacity(FLUSH_BYTES, file), path, header)?;
        // The header is on disk before the first event: a killed recorder leaves a file
        // that says what it was recording.
        w.flush()?;
        w.flush_every = Some(FLUSH_INTERVAL);
        Ok(w)
    }
}

impl<W: Write> RecordingWriter<W> {
    /// Writes the header to `out`; `path` is only used in error messages.
    pub fn new(mut out: W, path: PathBuf, header: &Header) -> Result<Self, RecordingError> {
        let json = serde_json::to_vec(header).expect("header serialises");
        let io = |source| RecordingError::Io { path: path.clone(), cause: source };
        out.write_all(MAGIC).map_err(io)?;
        out.write_all(&FORMAT_VERSION.to_le_bytes()).map_err(io)?;
        varint::write_u64(&mut out, json.len() as u64).map_err(io)?;
        out.write_all(&json).map_err(io)?;
        Ok(RecordingWriter { out, path, state: DeltaState::default(), events: 0, flush_every: None, last_flush: std::time::Instant::now() })
    }

    /// Appends one event (delta-coded against the previous of its kind).
    pub fn write(&mut self, event: &Event) -> Result<(), RecordingError> {
        self.encode(event).map_err(|source| RecordingError::Io { path: self.path.clone(), cause: source })?;
        self.count_record()
    }

    /// Records the shape of a block: its start and each instruction's length in bytes
    /// (1..=15, at most [`MAX_SHAPE_INSTRUCTIONS`]). Write it before the first
    /// [`write_run`](Self::write_run) of that block, and again if the code there changes.
    pub fn write_shape(&mut self, start: u64, lengths: &[u8]) -> Result<(), RecordingError> {
        assert!(lengths.len() <= MAX_SHAPE_INSTRUCTIONS && lengths.iter().all(|&l| (1..=MAX_INSTRUCTION_BYTES).contains(&l)), "a block shape of {} instructions", lengths.len());
        let out = &mut self.out;
        let r = (|| {
            out.write_all(&[TAG_SHAPE])?;
            varint::write_u64(out, start)?;
            varint::write_u64(out, lengths.len() as u64)?;
            out.write_all(lengths)
        })();
        r.map_err(|source| RecordingError::Io { path: self.path.clone(), cause: source })?;
        self.count_record()
    }

    /// Records that the first `count` instructions of the block at `start` ran;
    /// `lengths` is the shape last written for `start`. A reader gives them as
    /// `count` [`Event::Instruction`]s.
    pub fn write_run(&mut self, start: u64, lengths: &[u8], count: usize) -> Result<(), RecordingError> {
        assert!(count > 0 && count <= lengths.len(), "a run of {count} of {} instructions", lengths.len());
        let st = &mut self.state;
        let d = DeltaState::delta(&mut st.run, start);
        // Later instruction events are deltas from the last instruction of this run.
        st.instruction = start + lengths[..count - 1].iter().map(|&l| u64::from(l)).sum::<u64>();
        let out = &mut self.out;
        let r = if count == lengths.len() {
            out.write_all(&[TAG_RUN]).and_then(|_| varint::write_i64(out, d))
        } else {
            out.write_all(&[TAG_RUN_PART]).and_then(|_| varint::write_i64(out, d)).and_then(|_| varint::write_u64(out, count as u64))
        };
        r.map_err(|source| RecordingError::Io { path: self.path.clone(), cause: source })?;
        self.count_record()
    }

    /// Records the memory accesses of the next [`write_run`](Self::write_run) (or the next
    /// instruction event): `(instruction index in it, address, writes)`, in execution order.
    pub fn write_accesses(&mut self, accesses: &[(u32, u64, bool)]) -> Result<(), RecordingError> {
        let out = &mut self.out;
        let st = &mut self.state;
        let r = (|| {
            out.write_all(&[TAG_ACCESSES])?;
            varint::write_u64(out, accesses.len() as u64)?;
            for &(index, addr, write) in accesses {
                varint::write_u64(out, u64::from(index) << 1 | u64::from(write))?;
                varint::write_i64(out, DeltaState::delta(&mut st.access, addr))?;
            }
            Ok(())
        })();
        r.map_err(|source| RecordingError::Io { path: self.path.clone(), cause: source })?;
        self.count_record()
    }

    fn count_record(&mut self) -> Result<(), RecordingError> {
        self.events += 1;
        if let Some(every) = self.flush_every {
            if self.events.is_multiple_of(FLUSH_CHECK_EVENTS) && self.last_flush.elapsed() >= every {
                self.flush()?;
            }
        }
        Ok(())
    }

    fn encode(&mut self, event: &Event) -> io::Result<()> {
        let out = &mut self.out;
        let st = &mut self.state;
        match event {
            Event::Instruction { addr } => {
                let d = DeltaState::delta(&mut st.instruction, *addr);
                if (-SHORT_BIAS..SHORT_BIAS).contains(&d) {
                    out.write_all(&[0x80 | (d + SHORT_BIAS) as u8])
                } else {
                    out.write_all(&[TAG_INSTRUCTION])?;
                    varint::write_i64(out, d)
                }
            }
            Event::Block { addr } => {
                out.write_all(&[TAG_BLOCK])?;
                varint::write_i64(out, DeltaState::delta(&mut st.block, *addr))
            }
            Event::Sample(s) => {
                out.write_all(&[TAG_SAMPLE])?;
                varint::write_i64(out, DeltaState::delta(&mut st.time_ns, s.time_ns))?;
                varint::write_i64(out, DeltaState::delta(&mut st.sample_ip, s.ip))?;
                write_count(out, &mut st.count, s.instructions)
            }
            Event::Marker { time_ns, instructions } => {
                out.write_all(&[TAG_MARKER])?;
                varint::write_i64(out, DeltaState::delta(&mut st.time_ns, *time_ns))?;
                write_count(out, &mut st.count, *instructions)
            }
            Event::Module(m) => {
                let json = serde_json::to_vec(m).expect("module serialises");
                out.write_all(&[TAG_MODULE])?;
                varint::write_u64(out, json.len() as u64)?;
                out.write_all(&json)
            }
            Event::Thread { tid } => {
                out.write_all(&[TAG_THREAD])?;
                varint::write_u64(out, u64::from(*tid))
            }
            Event::Signal { signal } => {
                out.write_all(&[TAG_SIGNAL])?;
                varint::write_i64(out, i64::from(*signal))
            }
            Event::Exit(status) => {
                let (kind, value) = match status {
                    ExitStatus::Exited(c) => (0u8, *c),
                    ExitStatus::Killed(s) => (1, *s),
                    ExitStatus::Detached => (2, 0),
                };
                out.write_all(&[TAG_EXIT, kind])?;
                varint::write_i64(out, i64::from(value))
            }
            Event::Access { .. } => Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "memory accesses are written with write_accesses, before their instruction",
            )),
            Event::Unknown { .. } => Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "unknown events are read-only and cannot be written",
            )),
        }
    }

    /// Writes the trailer and flushes. Returns the number of events written.
    pub fn finish(mut self) -> Result<u64, RecordingError> {
        let io = |source| RecordingError::Io { path: self.path.clone(), cause: source };
        self.out.write_all(&[TAG_END]).map_err(io)?;
        varint::write_u64(&mut self.out, self.events).map_err(io)?;
        self.out.flush().map_err(io)?;
        Ok(self.events)
    }

    /// Flushes what was written so far without ending the recording.
    pub fn flush(&mut self) -> Result<(), RecordingError> {
        self.last_flush = std::time::Instant::now();
        self.out.flush().map_err(|source| RecordingError::Io { path: self.path.clone(), cause: source })
    }
}

fn write_count<W: Write>(out: &mut W, prev: &mut u64, count: Option<u64>) -> io::Result<()> {
    match count {
        Some(c) => {
            out.write_all(&[1])?;
            varint::write_i64(out, DeltaState::delta(prev, c))
        }
        None => out.write_all(&[0]),
    }
}

/// Counts the bytes consumed from the underlying reader so errors can name an offset.
struct CountingReader<R> {
    inner: R,
    offset: u64,
}

impl<R: Read> Read for CountingReader<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.offset += n as u64;
        Ok(n)
    }
}

/// Why decoding one event stopped.
enum Stop {
    /// The file ended inside this event.
    Truncated,
    Corrupt(String),
    Io(io::Error),
}

impl From<VarintError> for Stop {
    fn from(e: VarintError) -> Self {
        match e {
            VarintError::Truncated => Stop::Truncated,
            VarintError::Overlong => Stop::Corrupt("varint longer than 10 bytes".into()),
        }
    }
}

/// Streams events out of a `.ksk` file, one at a time.
///
/// A file that ends early (the recorder was killed, the disk filled) is not an error: the
/// reader returns every complete event, then `None`, and [`Self::truncated_at`] says where
/// the readable part ended, so callers can warn and keep what was recorded.
pub struct RecordingReader<R: Read = BufReader<File>> {
    input: CountingReader<R>,
    path: PathBuf,
    header: Header,
    state: DeltaState,
    modules: Vec<Module>,
    /// Records read (what the trailer counts: an executed block is one record).
    records: u64,
    finished: bool,
    truncated_at: Option<u64>,
    shapes: Shapes,
    /// The executed block being handed out instruction by instruction.
    run: Option<Run>,
    /// Byte offset of the record being decoded (errors and truncation name it).
    record_start: u64,
    /// Accesses read for the next executed block or instruction, and those of the
    /// instruction just handed out, still to hand out (reversed).
    next_accesses: Vec<(u32, u64, bool)>,
    due: Vec<(u64, bool)>,
}

/// An executed block being expanded: the next instruction's address and position, and its
/// memory accesses (data mode), by instruction index, reversed for popping.
struct Run {
    lengths: std::sync::Arc<[u8]>,
    next: u64,
    pos: usize,
    count: usize,
    accesses: Vec<(u32, u64, bool)>,
}

impl RecordingReader<BufReader<File>> {
    /// Opens a recording and reads its header (1 MiB of buffer).
    pub fn open(path: impl AsRef<Path>) -> Result<Self, RecordingError> {
        let path = path.as_ref().to_path_buf();
        let file = File::open(&path).map_err(|source| RecordingError::Io { path: path.clone(), cause: source })?;
        Self::new(BufReader::with_capacity(1 << 20, file), path)
    }
}

impl<R: Read> RecordingReader<R> {
    /// Reads the header from `input`; `path` is only used in messages.
    pub fn new(input: R, path: PathBuf) -> Result<Self, RecordingError> {
        let mut input = CountingReader { inner: input, offset: 0 };
        let mut magic = [0u8; 8];
        if read_full(&mut input, &mut magic).is_err() || &magic != MAGIC {
            return Err(RecordingError::NotARecording { path });
        }
        let mut version = [0u8; 2];
        read_full(&mut input, &mut version).map_err(|_| corrupt(&path, 8, "file ends inside the version"))?;
        let version = u16::from_le_bytes(version);
        if version > FORMAT_VERSION || version == 0 {
            return Err(RecordingError::UnsupportedVersion { path, version });
        }
        let mut consumed = 0;
        let len = varint::read_u64(&mut input, &mut consumed)
            .map_err(|_| corrupt(&path, 10, "file ends inside the header length"))?;
        if len > 64 << 20 {
            return Err(corrupt(&path, 10, &format!("header length {len} is implausible")));
        }
        let start = input.offset;
        let mut json = vec![0u8; len as usize];
        read_full(&mut input, &mut json).map_err(|_| corrupt(&path, start, "file ends inside the header"))?;
        let header: Header = serde_json::from_slice(&json)
            .map_err(|e| corrupt(&path, start, &format!("header is not valid JSON: {e}")))?;
        Ok(RecordingReader {
            input,
            path,
            header,
            state: DeltaState::default(),
            modules: Vec::new(),
            records: 0,
            finished: false,
            truncated_at: None,
            shapes: Shapes::default(),
            run: None,
            record_start: 0,
            next_accesses: Vec::new(),
            due: Vec::new(),
        })
    }

    /// What was recorded and how.
    pub fn header(&self) -> &Header {
        &self.header
    }

    /// The file, as named in messages.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Modules seen so far (they precede the events that use them).
    pub fn modules(&self) -> &[Module] {
        &self.modules
    }

    /// Bytes of the file decoded so far (a reader that stops early has read this much, and
    /// at most its buffer more).
    pub fn bytes_read(&self) -> u64 {
        self.input.offset
    }

    /// Byte offset of the last complete event, if the file ended before its trailer.
    pub fn truncated_at(&self) -> Option<u64> {
        self.truncated_at
    }

    /// The next event, `Ok(None)` at the end (complete or truncated).
    pub fn next_event(&mut self) -> Result<Option<Event>, RecordingError> {
        if let Some((addr, write)) = self.due.pop() {
            return Ok(Some(Event::Access { addr, write }));
        }
        if let Some(addr) = self.next_of_run() {
            return Ok(Some(Event::Instruction { addr }));
        }
        if self.finished {
            return Ok(None);
        }
        match self.decode() {
            Ok(Some(event)) => {
                if let Event::Module(m) = &event {
                    self.modules.push(m.clone());
                }
                Ok(Some(event))
            }
            Ok(None) => {
                self.finished = true;
                Ok(None)
            }
            Err(Stop::Truncated) => {
                self.finished = true;
                self.truncated_at = Some(self.record_start);
                Ok(None)
            }
            Err(Stop::Corrupt(what)) => {
                self.finished = true;
                Err(corrupt(&self.path, self.record_start, &what))
            }
            Err(Stop::Io(source)) => {
                self.finished = true;
                Err(RecordingError::Io { path: self.path.clone(), cause: source })
            }
        }
    }

    /// The next instruction of the executed block being expanded, if any.
    #[inline]
    fn next_of_run(&mut self) -> Option<u64> {
        let run = self.run.as_mut()?;
        if run.pos == run.count {
            self.run = None;
            return None;
        }
        let addr = run.next;
        run.next = addr.wrapping_add(u64::from(run.lengths[run.pos]));
        // this instruction's accesses come out after it
        while let Some(&(k, a, w)) = run.accesses.last() {
            if k as usize != run.pos {
                break;
            }
            self.due.push((a, w));
            run.accesses.pop();
        }
        self.due.reverse();
        run.pos += 1;
        self.state.instruction = addr;
        Some(addr)
    }

    fn byte(&mut self) -> Result<Option<u8>, Stop> {
        let mut b = [0u8; 1];
        loop {
            return match self.input.read(&mut b) {
                Ok(0) => Ok(None),
                Ok(_) => Ok(Some(b[0])),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => Err(Stop::Io(e)),
            };
        }
    }

    fn u64(&mut self) -> Result<u64, Stop> {
        let mut n = 0;
        Ok(varint::read_u64(&mut self.input, &mut n)?)
    }

    fn i64(&mut self) -> Result<i64, Stop> {
        Ok(varint::unzigzag(self.u64()?))
    }

    fn count(&mut self) -> Result<Option<u64>, Stop> {
        match self.byte()?.ok_or(Stop::Truncated)? {
            0 => Ok(None),
            1 => {
                let d = self.i64()?;
                Ok(Some(DeltaState::apply(&mut self.state.count, d)))
            }
            f => Err(Stop::Corrupt(format!("instruction-count flag {f} is neither 0 nor 1"))),
        }
    }

    fn blob(&mut self, what: &str) -> Result<Vec<u8>, Stop> {
        let len = self.u64()?;
        if len > 16 << 20 {
            return Err(Stop::Corrupt(format!("{what} length {len} is implausible")));
        }
        let mut buf = vec![0u8; len as usize];
        read_full(&mut self.input, &mut buf).map_err(|_| Stop::Truncated)?;
        Ok(buf)
    }

    fn decode(&mut self) -> Result<Option<Event>, Stop> {
        loop {
            self.record_start = self.input.offset;
            let Some(tag) = self.byte()? else {
                // Clean end of file at an event boundary but without the trailer: the
                // writer was cut off between events.
                return Err(Stop::Truncated);
            };
            if tag == TAG_END {
                let count = self.u64()?;
                if count != self.records {
                    return Err(Stop::Corrupt(format!("trailer says {count} records but {} were read", self.records)));
                }
                return Ok(None);
            }
            let event = self.decode_record(tag)?;
            self.records += 1;
            if let Some(event) = event {
                if matches!(event, Event::Instruction { .. }) && !self.next_accesses.is_empty() {
                    // a single instruction's accesses (all of index 0)
                    self.due = self.next_accesses.drain(..).rev().map(|(_, a, w)| (a, w)).collect();
                }
                return Ok(Some(event));
            }
            if let Some(addr) = self.next_of_run() {
                return Ok(Some(Event::Instruction { addr }));
            }
        }
    }

    /// A block shape: kept for the executed blocks that name it.
    fn shape(&mut self) -> Result<(), Stop> {
        let start = self.u64()?;
        let n = self.u64()?;
        if n == 0 || n > MAX_SHAPE_INSTRUCTIONS as u64 {
            return Err(Stop::Corrupt(format!("a block shape of {n} instructions (1 to {MAX_SHAPE_INSTRUCTIONS})")));
        }
        let mut lengths = vec![0u8; n as usize];
        read_full(&mut self.input, &mut lengths).map_err(|_| Stop::Truncated)?;
        if let Some(bad) = lengths.iter().find(|&&l| l == 0 || l > MAX_INSTRUCTION_BYTES) {
            return Err(Stop::Corrupt(format!("a block shape at {start:#x} has an instruction of {bad} bytes")));
        }
        self.shapes.insert(start, lengths.into());
        Ok(())
    }

    /// An executed block: starts handing out its instructions.
    fn executed_block(&mut self, cut: bool) -> Result<(), Stop> {
        let d = self.i64()?;
        let count = if cut { Some(self.u64()?) } else { None };
        let start = DeltaState::apply(&mut self.state.run, d);
        let Some(lengths) = self.shapes.get(&start) else {
            return Err(Stop::Corrupt(format!("an executed block at {start:#x} whose shape was never recorded")));
        };
        let count = match count {
            None => lengths.len(),
            Some(c) if c >= 1 && c <= lengths.len() as u64 => c as usize,
            Some(c) => return Err(Stop::Corrupt(format!("an executed block at {start:#x} claims {c} of its {} instructions", lengths.len()))),
        };
        let mut accesses = std::mem::take(&mut self.next_accesses);
        if let Some(&(k, _, _)) = accesses.iter().find(|a| a.0 as usize >= count) {
            return Err(Stop::Corrupt(format!("a memory access of instruction {k} of an executed block at {start:#x} that ran {count}")));
        }
        accesses.reverse();
        self.run = Some(Run { lengths: lengths.clone(), next: start, pos: 0, count, accesses });
        Ok(())
    }

    /// The memory accesses of the next executed block or instruction.
    fn accesses(&mut self) -> Result<(), Stop> {
        let n = self.u64()?;
        if n > MAX_ACCESSES {
            return Err(Stop::Corrupt(format!("a record of {n} memory accesses (at most {MAX_ACCESSES})")));
        }
        let mut prev_index = 0;
        self.next_accesses.clear();
        for _ in 0..n {
            let v = self.u64()?;
            let index = u32::try_from(v >> 1).map_err(|_| Stop::Corrupt(format!("a memory access of instruction {}", v >> 1)))?;
            if index < prev_index {
                return Err(Stop::Corrupt("memory accesses out of instruction order".into()));
            }
            prev_index = index;
            let d = self.i64()?;
            let addr = DeltaState::apply(&mut self.state.access, d);
            self.next_accesses.push((index, addr, v & 1 == 1));
        }
        Ok(())
    }

    /// One record after its tag: an event, or `None` for a shape or an executed block
    /// (whose instructions [`Self::next_of_run`] hands out).
    fn decode_record(&mut self, tag: u8) -> Result<Option<Event>, Stop> {
        if tag & 0x80 != 0 {
            let d = i64::from(tag & 0x7f) - SHORT_BIAS;
            return Ok(Some(Event::Instruction { addr: DeltaState::apply(&mut self.state.instruction, d) }));
        }
        let event = match tag {
            TAG_SHAPE => {
                self.shape()?;
                return Ok(None);
            }
            TAG_RUN | TAG_RUN_PART => {
                self.executed_block(tag == TAG_RUN_PART)?;
                return Ok(None);
            }
            TAG_ACCESSES => {
                self.accesses()?;
                return Ok(None);
            }
            TAG_INSTRUCTION => {
                let d = self.i64()?;
                Event::Instruction { addr: DeltaState::apply(&mut self.state.instruction, d) }
            }
            TAG_BLOCK => {
                let d = self.i64()?;
                Event::Block { addr: DeltaState::apply(&mut self.state.block, d) }
            }
            TAG_SAMPLE => {
                let dt = self.i64()?;
                let dip = self.i64()?;
                let instructions = self.count()?;
                Event::Sample(Sample {
                    time_ns: DeltaState::apply(&mut self.state.time_ns, dt),
                    ip: DeltaState::apply(&mut self.state.sample_ip, dip),
                    instructions,
                })
            }
            TAG_MARKER => {
                let dt = self.i64()?;
                let instructions = self.count()?;
                Event::Marker { time_ns: DeltaState::apply(&mut self.state.time_ns, dt), instructions }
            }
            TAG_MODULE => {
                let json = self.blob("module")?;
                let m: Module = serde_json::from_slice(&json)
                    .map_err(|e| Stop::Corrupt(format!("module entry is not valid JSON: {e}")))?;
                Event::Module(m)
            }
            TAG_THREAD => {
                let tid = self.u64()?;
                let tid = u32::try_from(tid).map_err(|_| Stop::Corrupt(format!("thread id {tid} too large")))?;
                Event::Thread { tid }
            }
            TAG_SIGNAL => Event::Signal { signal: self.small_int("signal")? },
            TAG_EXIT => {
                let kind = self.byte()?.ok_or(Stop::Truncated)?;
                let value = self.small_int("exit value")?;
                Event::Exit(match kind {
                    0 => ExitStatus::Exited(value),
                    1 => ExitStatus::Killed(value),
                    2 => ExitStatus::Detached,
                    k => return Err(Stop::Corrupt(format!("exit kind {k} unknown"))),
                })
            }
            0x40..=0x7f => {
                let len = self.blob("extension event")?.len() as u64;
                Event::Unknown { tag, len }
            }
            other => return Err(Stop::Corrupt(format!("unknown event tag 0x{other:02x}"))),
        };
        Ok(Some(event))
    }

    fn small_int(&mut self, what: &str) -> Result<i32, Stop> {
        let v = self.i64()?;
        i32::try_from(v).map_err(|_| Stop::Corrupt(format!("{what} {v} out of range")))
    }

    /// Streams through the rest of the recording and counts what it holds.
    #[cfg(test)]
    pub(crate) fn summarize(self) -> Result<RecordingSummary, RecordingError> {
        self.summarize_with_modules().map(|(s, _)| s)
    }

    /// [`summarize`](Self::summarize), also keeping the Module events in order: what a
    /// reader needs before it prints events, in one pass and without holding the events.
    pub fn summarize_with_modules(mut self) -> Result<(RecordingSummary, Vec<Module>), RecordingError> {
        let (mut s, modules) = summarize_events(&mut || self.next_event())?;
        s.truncated_at = self.truncated_at;
        s.bytes = self.input.offset;
        Ok((s, modules))
    }
}

/// Counts of a stream of events, and its module map (for any reader of recordings: the
/// `.ksk` reader above, and kansoku-perfdata's for perf.data).
pub fn summarize_events(next: &mut dyn FnMut() -> Result<Option<Event>, RecordingError>) -> Result<(RecordingSummary, Vec<Module>), RecordingError> {
    let mut modules = Vec::new();
    let mut s = RecordingSummary::default();
    let mut tids = std::collections::HashSet::new();
    while let Some(event) = next()? {
        s.events += 1;
        match event {
            Event::Instruction { .. } => s.instructions += 1,
            Event::Access { .. } => s.accesses += 1,
            Event::Block { .. } => s.blocks += 1,
            Event::Sample(_) => s.samples += 1,
            Event::Marker { .. } => s.markers += 1,
            Event::Thread { tid } => {
                tids.insert(tid);
            }
            Event::Signal { .. } => s.signals += 1,
            Event::Exit(e) => s.exit = Some(e),
            Event::Unknown { .. } => s.unknown += 1,
            Event::Module(m) => modules.push(m),
        }
    }
    s.threads = tids.len().max(1) as u64;
    Ok((s, modules))
}

impl<R: Read> Iterator for RecordingReader<R> {
    type Item = Result<Event, RecordingError>;
    fn next(&mut self) -> Option<Self::Item> {
        self.next_event().transpose()
    }
}

fn read_full<R: Read>(input: &mut R, buf: &mut [u8]) -> io::Result<()> {
    input.read_exact(buf)
}

fn corrupt(path: &Path, offset: u64, what: &str) -> RecordingError {
    RecordingError::Corrupt { path: path.to_path_buf(), offset, what: what.to_string() }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn sample_events() -> Vec<Event> {
        vec![
            Event::Module(Module {
                path: "/bin/true".into(),
                build_id: Some("abcd".into()),
                start: 0x5555_0000,
                end: 0x5556_0000,
                file_offset: 0,
            }),
            Event::Instruction { addr: 0x5555_1000 },
            Event::Instruction { addr: 0x5555_1004 },
            Event::Instruction { addr: 0x7fff_0000_1000 },
            Event::Instruction { addr: 0x5555_1000 },
            Event::Thread { tid: 42 },
            Event::Marker { time_ns: 10, instructions: Some(100) },
            Event::Sample(Sample { time_ns: 20, ip: 0x5555_1008, instructions: Some(107) }),
            Event::Sample(Sample { time_ns: 15, ip: 0x5555_1000, instructions: None }),
            Event::Block { addr: 0x400000 },
            Event::Block { addr: 0x3fff00 },
            Event::Signal { signal: 11 },
            Event::Exit(ExitStatus::Killed(11)),
        ]
    }

    /// Encodes without the trailer, as a writer cut off mid-run leaves it.
    fn encode_unfinished(events: &[Event]) -> Vec<u8> {
        let header = Header::new(RecordingKind::ExactTrace, "/bin/true", vec!["x".into()]).with_parameter("period", 7);
        let mut w = RecordingWriter::new(Vec::new(), "mem".into(), &header).unwrap();
        for e in events {
            w.write(e).unwrap();
        }
        w.out
    }

    fn encode_finished(events: &[Event]) -> Vec<u8> {
        let header = Header::new(RecordingKind::ExactTrace, "/bin/true", vec![]);
        let mut buf = Vec::new();
        {
            let mut w = RecordingWriter::new(&mut buf, "mem".into(), &header).unwrap();
            for e in events {
                w.write(e).unwrap();
            }
            w.finish().unwrap();
        }
        buf
    }

    fn decode_all(bytes: &[u8]) -> (Vec<Event>, Option<u64>) {
        let mut r = RecordingReader::new(bytes, "mem".into()).unwrap();
        let mut out = Vec::new();
        while let Some(e) = r.next_event().unwrap() {
            out.push(e);
        }
        (out, r.truncated_at())
    }

    #[test]
    fn round_trip_all_event_kinds() {
        let events = sample_events();
        let bytes = encode_finished(&events);
        let (back, truncated) = decode_all(&bytes);
        assert_eq!(back, events);
        assert_eq!(truncated, None);
        let r = RecordingReader::new(&bytes[..], "mem".into()).unwrap();
        assert_eq!(r.header().args, Vec::<String>::new());
    }

    #[test]
    fn header_parameters_survive() {
        let bytes = encode_unfinished(&sample_events());
        let r = RecordingReader::new(&bytes[..], "mem".into()).unwrap();
        assert_eq!(r.header().parameters["period"], 7);
        assert_eq!(r.header().args, vec!["x".to_string()]);
    }

    #[test]
    fn truncated_file_keeps_every_complete_event() {
        let events = sample_events();
        let bytes = encode_finished(&events);
        // Cut at every possible byte inside the event stream: never an error, always a
        // prefix of the events, and a truncation offset unless the trailer survived.
        let header_end = {
            let empty = encode_finished(&[]);
            empty.len() - 2
        };
        for cut in header_end..bytes.len() {
            let (back, truncated) = decode_all(&bytes[..cut]);
            assert!(truncated.is_some(), "cut at {cut} not reported");
            assert_eq!(&events[..back.len()], &back[..]);
        }
    }

    #[test]
    fn foreign_file_is_refused() {
        let err = RecordingReader::new(&b"\x7fELF\x02\x01\x01\0\0\0"[..], "prog".into()).err().unwrap();
        assert!(err.to_string().contains("not a kansoku recording"), "{err}");
    }

    #[test]
    fn corrupted_tag_names_offset() {
        let mut bytes = encode_finished(&[Event::Thread { tid: 1 }]);
        let pos = bytes.len() - 4; // the thread tag
        bytes[pos] = 0x30;
        let mut r = RecordingReader::new(&bytes[..], "x.ksk".into()).unwrap();
        let err = r.next_event().unwrap_err().to_string();
        assert!(err.contains(&format!("byte {pos}")) && err.contains("0x30"), "{err}");
    }

    #[test]
    fn sequential_instructions_take_one_byte() {
        let events: Vec<Event> = (0..10_000u64).map(|i| Event::Instruction { addr: 0x401000 + (i % 50) * 4 }).collect();
        let bytes = encode_finished(&events);
        let empty = encode_finished(&[]).len();
        // The wrap-around every 50 instructions jumps back 196 bytes (long form, 3 bytes).
        assert!((bytes.len() - empty) < 10_000 * 11 / 10, "{} bytes", bytes.len() - empty);
    }

    /// A trace of executed blocks as the Valgrind engine writes it: shapes, whole and cut
    /// runs, mixed with ordinary events.
    fn blocks_trace(w: &mut RecordingWriter<&mut Vec<u8>>) -> Vec<Event> {
        let a: &[u8] = &[4, 3, 5, 2];
        let b: &[u8] = &[1, 7];
        w.write(&Event::Thread { tid: 9 }).unwrap();
        w.write_shape(0x401000, a).unwrap();
        w.write_run(0x401000, a, 4).unwrap();
        w.write_shape(0x7f00_0000_0000, b).unwrap();
        w.write_run(0x7f00_0000_0000, b, 2).unwrap();
        w.write_run(0x401000, a, 2).unwrap();
        // an ordinary instruction event after a run is a delta from the run's last one
        w.write(&Event::Instruction { addr: 0x401007 }).unwrap();
        w.write(&Event::Signal { signal: 11 }).unwrap();
        let i = |addr| Event::Instruction { addr };
        vec![
            Event::Thread { tid: 9 },
            i(0x401000), i(0x401004), i(0x401007), i(0x40100c),
            i(0x7f00_0000_0000), i(0x7f00_0000_0001),
            i(0x401000), i(0x401004),
            i(0x401007),
            Event::Signal { signal: 11 },
        ]
    }

    #[test]
    fn executed_blocks_read_as_instructions() {
        let header = Header::new(RecordingKind::ExactTrace, "/bin/true", vec![]);
        let mut buf = Vec::new();
        let mut w = RecordingWriter::new(&mut buf, "mem".into(), &header).unwrap();
        let want = blocks_trace(&mut w);
        w.finish().unwrap();
        let (back, truncated) = decode_all(&buf);
        assert_eq!((back, truncated), (want.clone(), None));
        let s = RecordingReader::new(&buf[..], "mem".into()).unwrap().summarize().unwrap();
        assert_eq!(s.instructions, 9);
        // Cut anywhere: a prefix of the instructions, never an error.
        let header_end = encode_finished(&[]).len() - 2;
        for cut in header_end..buf.len() {
            let (back, truncated) = decode_all(&buf[..cut]);
            assert!(truncated.is_some(), "cut at {cut} not reported");
            assert_eq!(&want[..back.len()], &back[..], "cut at {cut}");
        }
    }

    #[test]
    fn memory_accesses_follow_their_instructions() {
        let header = Header::new(RecordingKind::ExactTrace, "/bin/true", vec![]);
        let mut buf = Vec::new();
        let mut w = RecordingWriter::new(&mut buf, "mem".into(), &header).unwrap();
        let a: &[u8] = &[4, 3, 5];
        w.write_shape(0x401000, a).unwrap();
        // instruction 0 reads twice, instruction 2 writes; then a cut run: instruction 0 reads
        w.write_accesses(&[(0, 0x7fff_0000, false), (0, 0x7fff_0008, false), (2, 0x60_1000, true)]).unwrap();
        w.write_run(0x401000, a, 3).unwrap();
        w.write_accesses(&[(0, 0x60_1008, false)]).unwrap();
        w.write_run(0x401000, a, 1).unwrap();
        w.write_accesses(&[(0, 0x5, true)]).unwrap();
        w.write(&Event::Instruction { addr: 0x401004 }).unwrap();
        w.finish().unwrap();
        let i = |addr| Event::Instruction { addr };
        let r = |addr| Event::Access { addr, write: false };
        let want = vec![
            i(0x401000), r(0x7fff_0000), r(0x7fff_0008), i(0x401004), i(0x401007), Event::Access { addr: 0x60_1000, write: true },
            i(0x401000), r(0x60_1008),
            i(0x401004), Event::Access { addr: 0x5, write: true },
        ];
        assert_eq!(decode_all(&buf), (want.clone(), None));
        let s = RecordingReader::new(&buf[..], "mem".into()).unwrap().summarize().unwrap();
        assert_eq!((s.instructions, s.accesses), (5, 5));
        // cut anywhere: a prefix, never an error
        let header_end = encode_finished(&[]).len() - 2;
        for cut in header_end..buf.len() {
            let (back, _) = decode_all(&buf[..cut]);
            assert_eq!(&want[..back.len()], &back[..], "cut at {cut}");
        }
    }

    #[test]
    fn a_block_without_shape_names_its_offset() {
        let header = Header::new(RecordingKind::ExactTrace, "/bin/true", vec![]);
        let mut buf = Vec::new();
        let mut w = RecordingWriter::new(&mut buf, "mem".into(), &header).unwrap();
        w.write(&Event::Thread { tid: 1 }).unwrap();
        let at = w.out.len() as u64;
        // written as if the shape had been recorded, but it was not
        w.write_run(0x401000, &[1, 2], 2).unwrap();
        w.finish().unwrap();
        let mut r = RecordingReader::new(&buf[..], "t.ksk".into()).unwrap();
        assert_eq!(r.next_event().unwrap(), Some(Event::Thread { tid: 1 }));
        let err = r.next_event().unwrap_err().to_string();
        assert!(err.contains(&format!("t.ksk: corrupted at byte {at}")) && err.contains("0x401000") && err.contains("shape was never recorded"), "{err}");

        // a cut block claiming more instructions than its shape has
        let mut buf = Vec::new();
        let mut w = RecordingWriter::new(&mut buf, "mem".into(), &header).unwrap();
        w.write_shape(0x401000, &[1, 2]).unwrap();
        w.write_run(0x401000, &[1, 2, 3, 4], 3).unwrap();
        w.finish().unwrap();
        let err = RecordingReader::new(&buf[..], "t.ksk".into()).unwrap().summarize().unwrap_err().to_string();
        assert!(err.contains("0x401000 claims 3 of its 2 instructions"), "{err}");
    }

    #[test]
    fn version_1_recordings_stay_readable() {
        let events = sample_events();
        let mut bytes = encode_finished(&events);
        bytes[8..10].copy_from_slice(&1u16.to_le_bytes());
        assert_eq!(decode_all(&bytes), (events, None));
    }

    fn arb_event() -> impl Strategy<Value = Event> {
        prop_oneof![
            any::<u64>().prop_map(|addr| Event::Instruction { addr }),
            (0x400000u64..0x400100).prop_map(|addr| Event::Instruction { addr }),
            any::<u64>().prop_map(|addr| Event::Block { addr }),
            (any::<u64>(), any::<u64>(), proptest::option::of(any::<u64>()))
                .prop_map(|(t, ip, c)| Event::Sample(Sample { time_ns: t, ip, instructions: c })),
            (any::<u64>(), proptest::option::of(any::<u64>())).prop_map(|(t, c)| Event::Marker { time_ns: t, instructions: c }),
            any::<u32>().prop_map(|tid| Event::Thread { tid }),
            any::<i32>().prop_map(|signal| Event::Signal { signal }),
            any::<i32>().prop_map(|c| Event::Exit(ExitStatus::Exited(c))),
        ]
    }

    proptest! {
        #[test]
        fn any_event_sequence_round_trips(events in proptest::collection::vec(arb_event(), 0..200)) {
            let bytes = encode_finished(&events);
            let (back, truncated) = decode_all(&bytes);
            prop_assert_eq!(back, events);
            prop_assert_eq!(truncated, None);
        }

        #[test]
        fn garbage_never_panics(tail in proptest::collection::vec(any::<u8>(), 0..300)) {
            let mut bytes = encode_finished(&[]);
            bytes.truncate(bytes.len() - 2);
            bytes.extend(tail);
            let mut r = RecordingReader::new(&bytes[..], "g".into()).unwrap();
            for _ in 0..1000 {
                match r.next_event() {
                    Ok(Some(_)) => {}
                    _ => break,
                }
            }
        }
    }
}
