//! The binary trace file written by the runtime.
//!
//! ```text
//! header (16 bytes): "KTRC" | version u8 = 1 | clock u8 (0 = instructions, 1 = ns) | 2 reserved
//!                    | module hash u64 LE (FNV-1a 64 of the .wasm that ran)
//! record:            id u32 LE | timestamp u64 LE | nargs u8 | nargs × i32 LE
//! ```
//! A record is 13 + 4·nargs bytes. A file cut short decodes up to its last complete record.

use crate::error::{Result, TpError};
use serde::Serialize;
use std::io::Write;

/// The first four bytes of a trace file.
pub const MAGIC: &[u8; 4] = b"KTRC";
/// Bytes of the header: magic, version, clock, two reserved, module hash.
pub(crate) const HEADER_LEN: usize = 16;

/// What the timestamps count.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Clock {
    /// Executed wasm instructions (wasmtime fuel consumed since the start).
    Instructions,
    /// Nanoseconds since the start of the run.
    Ns,
}

impl Clock {
    fn code(self) -> u8 {
        match self {
            Clock::Instructions => 0,
            Clock::Ns => 1,
        }
    }
}

impl std::str::FromStr for Clock {
    type Err = TpError;
    fn from_str(s: &str) -> std::result::Result<Self, Self::Err> {
        match s {
            "instructions" | "instr" | "fuel" => Ok(Clock::Instructions),
            "ns" => Ok(Clock::Ns),
            _ => Err(TpError::UnknownName("clock", s.to_string(), "instructions or ns")),
        }
    }
}

/// The header of a trace file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct TraceHeader {
    /// What the timestamps count.
    pub clock: Clock,
    /// [`module_hash`] of the module that wrote the trace.
    pub module_hash: u64,
}

/// One trace record as emitted by a trace call.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Record {
    /// The trace id passed (an original id, or a merged one of the table).
    pub id: u32,
    /// The clock's value at the call.
    pub timestamp: u64,
    /// The arguments passed, in order.
    pub args: Vec<i32>,
}

/// Size in bytes of a record with `nargs` arguments.
pub(crate) fn record_size(nargs: usize) -> u64 {
    13 + 4 * nargs as u64
}

/// FNV-1a 64-bit hash, used to tie a trace to the module that produced it.
pub fn module_hash(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in bytes {
        h ^= b as u64;
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

/// A buffered writer of trace records.
pub(crate) struct TraceWriter {
    out: Box<dyn Write + Send>,
    buf: Vec<u8>,
    /// Records written so far.
    pub records: u64,
    /// Bytes written so far, header included.
    pub bytes: u64,
}

impl TraceWriter {
    /// Writes the header to `out` and returns a writer for the records.
    pub fn new(mut out: Box<dyn Write + Send>, header: TraceHeader) -> Result<Self> {
        let mut h = Vec::with_capacity(HEADER_LEN);
        h.extend_from_slice(MAGIC);
        h.push(1);
        h.push(header.clock.code());
        h.extend_from_slice(&[0, 0]);
        h.extend_from_slice(&header.module_hash.to_le_bytes());
        out.write_all(&h)?;
        Ok(TraceWriter { out, buf: Vec::with_capacity(1 << 16), records: 0, bytes: HEADER_LEN as u64 })
    }

    /// Appends one record (buffered, 64 KiB at a time).
    pub fn record(&mut self, id: u32, timestamp: u64, args: &[i32]) -> Result<()> {
        self.buf.extend_from_slice(&id.to_le_bytes());
        self.buf.extend_from_slice(&timestamp.to_le_bytes());
        self.buf.push(args.len() as u8);
        for a in args {
            self.buf.extend_from_slice(&a.to_le_bytes());
        }
        self.records += 1;
        self.bytes += record_size(args.len());
        if self.buf.len() >= 1 << 16 {
            self.out.write_all(&self.buf)?;
            self.buf.clear();
        }
        Ok(())
    }

    /// Writes what is buffered and flushes.
    pub fn finish(&mut self) -> Result<()> {
        self.out.write_all(&self.buf)?;
        self.buf.clear();
        self.out.flush()?;
        Ok(())
    }
}

/// A parsed trace: header, the complete records, and where it was cut if it was.
#[derive(Debug, Clone, Serialize)]
pub struct TraceData {
    /// The file's header.
    pub header: TraceHeader,
    /// The complete records, in order.
    pub records: Vec<Record>,
    /// `Some(message)` when the file ends inside a record.
    pub truncated: Option<String>,
    /// Bytes of the file.
    pub bytes: u64,
}

/// Parses a trace file. A file cut inside a record keeps every complete record and says so in
/// `truncated`; a file that is not a trace at all is an error.
pub fn read_trace(bytes: &[u8]) -> Result<TraceData> {
    if bytes.len() < HEADER_LEN {
        return Err(TpError::BadTrace(format!("{} bytes, shorter than the 16-byte header", bytes.len())));
    }
    if &bytes[..4] != MAGIC {
        return Err(TpError::BadTrace("missing magic `KTRC` at the start".into()));
    }
    if bytes[4] != 1 {
        return Err(TpError::BadTrace(format!("unsupported version {}", bytes[4])));
    }
    let clock = match bytes[5] {
        0 => Clock::Instructions,
        1 => Clock::Ns,
        c => return Err(TpError::BadTrace(format!("unknown clock code {c}"))),
    };
    let module_hash = u64::from_le_bytes(bytes[8..16].try_into().unwrap());
    let mut records = Vec::new();
    let mut pos = HEADER_LEN;
    let mut truncated = None;
    while pos < bytes.len() {
        let rest = &bytes[pos..];
        if rest.len() < 13 || rest.len() < 13 + 4 * rest[12] as usize {
            truncated = Some(format!(
                "trace cut short: {} trailing bytes at offset {pos} do not form a complete record; \
                 decoded the {} complete records before it",
                rest.len(),
                records.len()
            ));
            break;
        }
        let id = u32::from_le_bytes(rest[0..4].try_into().unwrap());
        let timestamp = u64::from_le_bytes(rest[4..12].try_into().unwrap());
        let n = rest[12] as usize;
        let args = (0..n).map(|i| i32::from_le_bytes(rest[13 + 4 * i..17 + 4 * i].try_into().unwrap())).collect();
        records.push(Record { id, timestamp, args });
        pos += 13 + 4 * n;
    }
    Ok(TraceData { header: TraceHeader { clock, module_hash }, records, truncated, bytes: bytes.len() as u64 })
}

/// An in-memory trace sink that stays readable after the writer that owns a clone of it
/// is gone (the runtime hands its writer to wasmtime's store).
#[derive(Clone, Default)]
pub(crate) struct SharedBuffer(pub(crate) std::sync::Arc<std::sync::Mutex<Vec<u8>>>);

impl Write for SharedBuffer {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(b);
        Ok(b.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl SharedBuffer {
    /// Everything written so far (the buffer is left empty).
    pub(crate) fn take(&self) -> Vec<u8> {
        std::mem::take(&mut *self.0.lock().unwrap())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roundtrip_and_cut() {
        let s = SharedBuffer::default();
        let mut w = TraceWriter::new(Box::new(s.clone()), TraceHeader { clock: Clock::Ns, module_hash: 7 }).unwrap();
        w.record(1, 10, &[1, -2]).unwrap();
        w.record(2, 11, &[]).unwrap();
        w.finish().unwrap();
        let bytes = s.0.lock().unwrap().clone();
        assert_eq!(bytes.len() as u64, w.bytes);
        let t = read_trace(&bytes).unwrap();
        assert_eq!(t.records.len(), 2);
        assert_eq!(t.records[0].args, vec![1, -2]);
        assert!(t.truncated.is_none());
        let cut = read_trace(&bytes[..bytes.len() - 3]).unwrap();
        assert_eq!(cut.records.len(), 1);
        assert!(cut.truncated.unwrap().contains("cut short"));
        assert!(read_trace(b"hello world, not a trace").is_err());
    }
}
