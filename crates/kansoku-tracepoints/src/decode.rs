//! The host decoder: expands merged records through the translation table.

use crate::decl::DeclTable;
use crate::error::{Result, TpError};
use crate::module::ModuleInfo;
use crate::tracefile::{module_hash, read_trace, TraceHeader};
use serde::Serialize;

/// How to rebuild the timestamps of events that were merged.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum TimestampMode {
    /// Merged timestamp plus the compiler's estimated offset, adjusted to stay strictly
    /// increasing in the original order.
    Offsets,
    /// The merged timestamp with a sub-index: 2000.1, 2000.2, ...
    Subindex,
}

impl std::str::FromStr for TimestampMode {
    type Err = TpError;
    fn from_str(s: &str) -> std::result::Result<Self, Self::Err> {
        match s {
            "offsets" => Ok(TimestampMode::Offsets),
            "subindex" => Ok(TimestampMode::Subindex),
            _ => Err(TpError::UnknownName("timestamp mode", s.to_string(), "offsets or subindex")),
        }
    }
}

/// One event as the unmodified program would have emitted it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Event {
    /// The trace point's id.
    pub id: u32,
    /// Its arguments, in call order.
    pub args: Vec<i32>,
    /// The record's clock value (per the trace's [`crate::Clock`]).
    pub timestamp: u64,
    /// 1-based position inside the merged record it came from (0 = not merged).
    pub subindex: u32,
}

impl Event {
    /// The timestamp as text: `2000` or, for merged events in sub-index mode, `2000.2`.
    pub fn timestamp_text(&self, mode: TimestampMode) -> String {
        if mode == TimestampMode::Subindex && self.subindex > 0 {
            format!("{}.{}", self.timestamp, self.subindex)
        } else {
            self.timestamp.to_string()
        }
    }
}

/// A decoded trace.
#[derive(Debug, Clone, Serialize)]
pub struct Decoded {
    /// The trace file's header.
    pub header: TraceHeader,
    /// The original events, merged records expanded through the translation table.
    pub events: Vec<Event>,
    /// Records in the file.
    pub records: u64,
    /// Records that were merged events and were expanded.
    pub expanded_records: u64,
    /// Why decoding stopped before the file's end (a cut record), when it did.
    pub truncated: Option<String>,
    /// The module's declarations, for names and filtering.
    #[serde(skip)]
    pub decls: DeclTable,
}

/// Decodes `trace` recorded from `module`.
pub fn decode(trace: &[u8], module: &[u8], mode: TimestampMode) -> Result<Decoded> {
    let data = read_trace(trace)?;
    let mh = module_hash(module);
    if data.header.module_hash != mh {
        return Err(TpError::ModuleMismatch { trace: data.header.module_hash, module: mh });
    }
    let info = ModuleInfo::parse(module)?;
    let table = info.xlat.clone().unwrap_or_default();
    let mut events = Vec::with_capacity(data.records.len());
    let mut expanded = 0;
    let mut prev_ts: Option<u64> = None;
    for (index, r) in data.records.iter().enumerate() {
        match table.entries.get(&r.id) {
            None => {
                events.push(Event { id: r.id, args: r.args.clone(), timestamp: r.timestamp, subindex: 0 });
                prev_ts = Some(r.timestamp);
            }
            Some(e) => {
                if r.args.len() != e.nargs as usize {
                    return Err(TpError::ArityMismatch { index: index as u64, id: r.id, got: r.args.len(), want: e.nargs as usize });
                }
                expanded += 1;
                let n = e.events.len();
                for (j, (ev, off)) in e.events.iter().zip(&e.offsets).enumerate() {
                    let args = ev
                        .args
                        .iter()
                        .map(|s| s.eval(&r.args))
                        .collect::<Option<Vec<i32>>>()
                        .ok_or_else(|| TpError::BadXlat(format!("entry {} refers past its arguments", r.id)))?;
                    let timestamp = match mode {
                        TimestampMode::Subindex => r.timestamp,
                        TimestampMode::Offsets => {
                            let est = (r.timestamp as i64 + *off as i64).max(0) as u64;
                            // keep strictly increasing, and leave room for the events after it
                            let lo = prev_ts.map(|p| p + 1).unwrap_or(0);
                            let hi = r.timestamp.saturating_sub((n - 1 - j) as u64);
                            if lo <= hi {
                                est.clamp(lo, hi)
                            } else {
                                lo
                            }
                        }
                    };
                    prev_ts = Some(timestamp);
                    events.push(Event { id: ev.id, args, timestamp, subindex: j as u32 + 1 });
                }
            }
        }
    }
    Ok(Decoded {
        header: data.header,
        events,
        records: data.records.len() as u64,
        expanded_records: expanded,
        truncated: data.truncated,
        decls: info.decls,
    })
}

/// Applies the declared meaning of the trace points to a stream: disabled points are dropped
/// and adjacent equal repeats of idempotent points collapse to one. Returns the stream and the
/// number of events dropped for each reason.
pub(crate) fn normalise(events: &[Event], decls: &DeclTable) -> (Vec<(u32, Vec<i32>)>, usize, usize) {
    let mut out: Vec<(u32, Vec<i32>)> = Vec::with_capacity(events.len());
    let (mut disabled, mut repeats) = (0, 0);
    for e in events {
        if decls.is_disabled(e.id) {
            disabled += 1;
            continue;
        }
        if decls.is_idempotent(e.id) && out.last().is_some_and(|(id, a)| *id == e.id && *a == e.args) {
            repeats += 1;
            continue;
        }
        out.push((e.id, e.args.clone()));
    }
    (out, disabled, repeats)
}
