//! pprof's `profile.proto` (github.com/google/pprof, `proto/profile.proto`), the messages
//! written by hand with prost's derive attributes (field numbers from that schema), so no
//! `protoc` is needed at build time. The file is gzip-compressed, as pprof writes it.
//!
//! A cost profile becomes one sample per distinct call stack of the shadow call stack
//! (outermost frame last, as pprof wants), valued with the instructions executed with that
//! stack innermost: the same attribution as the callgrind and collapsed exports, so each
//! function's flat cost is its callgrind `Ir` and its cumulative cost covers its callees.
//! A location is one function (its first executed instruction's link-time address and its
//! source file).

use std::io::Write;

use flate2::write::GzEncoder;
use kansoku_paths::CostProfile;
use prost::Message;

use crate::{ExportError, Interner};

/// `perftools.profiles.Profile`.
#[derive(Clone, PartialEq, Message)]
pub(crate) struct Profile {
    #[prost(message, repeated, tag = "1")]
    pub sample_type: Vec<ValueType>,
    #[prost(message, repeated, tag = "2")]
    pub sample: Vec<Sample>,
    #[prost(message, repeated, tag = "3")]
    pub mapping: Vec<Mapping>,
    #[prost(message, repeated, tag = "4")]
    pub location: Vec<Location>,
    #[prost(message, repeated, tag = "5")]
    pub function: Vec<Function>,
    #[prost(string, repeated, tag = "6")]
    pub string_table: Vec<String>,
    #[prost(message, optional, tag = "11")]
    pub period_type: Option<ValueType>,
    #[prost(int64, tag = "12")]
    pub period: i64,
    #[prost(int64, repeated, tag = "13")]
    pub comment: Vec<i64>,
    #[prost(int64, tag = "14")]
    pub default_sample_type: i64,
}

/// `ValueType`: indexes into the string table.
#[derive(Clone, PartialEq, Message)]
pub(crate) struct ValueType {
    #[prost(int64, tag = "1")]
    pub r#type: i64,
    #[prost(int64, tag = "2")]
    pub unit: i64,
}

/// `Sample`: locations innermost first, one value per sample type.
#[derive(Clone, PartialEq, Message)]
pub(crate) struct Sample {
    #[prost(uint64, repeated, tag = "1")]
    pub location_id: Vec<u64>,
    #[prost(int64, repeated, tag = "2")]
    pub value: Vec<i64>,
    #[prost(message, repeated, tag = "3")]
    pub label: Vec<Label>,
}

/// `Label`: a string or numeric tag of a sample.
#[derive(Clone, PartialEq, Message)]
pub(crate) struct Label {
    #[prost(int64, tag = "1")]
    pub key: i64,
    #[prost(int64, tag = "2")]
    pub str: i64,
    #[prost(int64, tag = "3")]
    pub num: i64,
    #[prost(int64, tag = "4")]
    pub num_unit: i64,
}

/// `Mapping` (not written: a path's blocks carry their functions and lines already).
#[derive(Clone, PartialEq, Message)]
pub(crate) struct Mapping {
    #[prost(uint64, tag = "1")]
    pub id: u64,
}

/// `Location`: one address, with its line(s).
#[derive(Clone, PartialEq, Message)]
pub(crate) struct Location {
    #[prost(uint64, tag = "1")]
    pub id: u64,
    #[prost(uint64, tag = "2")]
    pub mapping_id: u64,
    #[prost(uint64, tag = "3")]
    pub address: u64,
    #[prost(message, repeated, tag = "4")]
    pub line: Vec<Line>,
}

/// `Line`: a function and a line number in it.
#[derive(Clone, PartialEq, Message)]
pub(crate) struct Line {
    #[prost(uint64, tag = "1")]
    pub function_id: u64,
    #[prost(int64, tag = "2")]
    pub line: i64,
}

/// `Function`: names and file are indexes into the string table.
#[derive(Clone, PartialEq, Message)]
pub(crate) struct Function {
    #[prost(uint64, tag = "1")]
    pub id: u64,
    #[prost(int64, tag = "2")]
    pub name: i64,
    #[prost(int64, tag = "3")]
    pub system_name: i64,
    #[prost(int64, tag = "4")]
    pub filename: i64,
    #[prost(int64, tag = "5")]
    pub start_line: i64,
}

/// The string table: index 0 is the empty string, as the format requires.
struct Strings(Interner);

impl Strings {
    fn new() -> Self {
        let mut names = Interner::default();
        names.intern("");
        Strings(names)
    }

    fn id(&mut self, s: &str) -> i64 {
        self.0.intern(s).0 as i64
    }
}

/// A value as pprof's signed 64-bit integer (saturating: counts past 2^63 do not occur in
/// runs we can observe, but a wrap would turn them negative).
fn value(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

/// The profile message for `profile`'s stacks; `comment` goes into the profile's comments
/// (`go tool pprof -comments`).
pub(crate) fn build_profile(profile: &CostProfile, comment: &str) -> Profile {
    let mut strings = Strings::new();
    let sample_type = vec![ValueType { r#type: strings.id("instructions"), unit: strings.id("count") }];
    let default_sample_type = strings.id("instructions");
    // One function and one location per function of the profile (ids from 1).
    let mut functions = Vec::with_capacity(profile.functions.len());
    let mut locations = Vec::with_capacity(profile.functions.len());
    for (i, f) in profile.functions.iter().enumerate() {
        let id = i as u64 + 1;
        let name = strings.id(&f.name);
        let first = f.instructions.first();
        let file = f.instructions.iter().find_map(|x| x.file.as_deref()).unwrap_or("");
        let line = f.instructions.iter().find_map(|x| x.line).map_or(0, i64::from);
        functions.push(Function { id, name, system_name: name, filename: strings.id(file), start_line: line });
        locations.push(Location { id, mapping_id: 0, address: first.map_or(0, |x| x.address), line: vec![Line { function_id: id, line }] });
    }
    let sample = profile
        .stacks
        .iter()
        .filter(|s| s.instructions > 0)
        .map(|s| Sample { location_id: s.frames.iter().rev().map(|&f| f as u64 + 1).collect(), value: vec![value(s.instructions)], label: Vec::new() })
        .collect();
    let comment = vec![strings.id(comment)];
    let period_type = Some(ValueType { r#type: strings.id("instructions"), unit: strings.id("count") });
    Profile {
        sample_type,
        sample,
        mapping: Vec::new(),
        location: locations,
        function: functions,
        string_table: strings.0.names,
        period_type,
        period: 1,
        comment,
        default_sample_type,
    }
}

/// The encoded (uncompressed) `profile.proto` message for `profile`.
pub fn pprof_profile(profile: &CostProfile, comment: &str) -> Vec<u8> {
    build_profile(profile, comment).encode_to_vec()
}

/// Writes `profile`'s call stacks as a gzip-compressed `profile.proto`. The profile must
/// have been made with the call tracker; one without stacks is [`ExportError::Empty`].
pub fn write_pprof(profile: &CostProfile, comment: &str, out: impl Write) -> Result<(), ExportError> {
    if profile.stacks.is_empty() {
        return Err(ExportError::Empty("pprof"));
    }
    let io = |source| ExportError::Write { format: "pprof", source };
    let mut gz = GzEncoder::new(out, flate2::Compression::default());
    gz.write_all(&pprof_profile(profile, comment)).map_err(io)?;
    gz.finish().map_err(io)?.flush().map_err(io)
}
