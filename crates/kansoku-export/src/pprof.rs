//! pprof's `profile.proto` (github.com/google/pprof, `proto/profile.proto`), the messages
//! written by hand with prost's derive attributes (field numbers from that schema), so no
//! `protoc` is needed at build time. The file is gzip-compressed, as pprof writes it.
//!
//! A path profile becomes one sample per distinct path: its blocks are the sample's
//! locations, the path's last block innermost, so a flame graph of the profile draws each
//! path as a tower from its first block up to its last. A location is one block start
//! (its link-time address, and the block's function and source line); sample values are
//! the path's executions and the instructions they ran (the default).

use std::collections::HashMap;
use std::io::Write;

use flate2::write::GzEncoder;
use kansoku_paths::PathReport;
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

/// The profile message for `report` (every path in it); `comment` goes into the profile's
/// comments (`go tool pprof -comments`).
pub(crate) fn build_profile(report: &PathReport, comment: &str) -> Profile {
    let mut strings = Strings::new();
    let sample_type = vec![
        ValueType { r#type: strings.id("executions"), unit: strings.id("count") },
        ValueType { r#type: strings.id("instructions"), unit: strings.id("count") },
    ];
    let default_sample_type = strings.id("instructions");
    let mut functions: Vec<Function> = Vec::new();
    let mut function_ids: HashMap<(String, String), u64> = HashMap::new();
    let mut locations: Vec<Location> = Vec::new();
    let mut location_ids: HashMap<(String, u64), u64> = HashMap::new();
    let mut samples = Vec::with_capacity(report.paths.len());
    let (rank_key, bl_key) = (strings.id("rank"), strings.id("ball_larus"));
    for path in &report.paths {
        let mut ids = Vec::with_capacity(path.blocks.len());
        for block in path.blocks.iter().rev() {
            let key = (block.function.clone(), block.link_address);
            let id = match location_ids.get(&key) {
                Some(&id) => id,
                None => {
                    let file = block.source.as_ref().map_or("", |s| s.file.as_str());
                    let fkey = (block.function.clone(), file.to_string());
                    let function_id = match function_ids.get(&fkey) {
                        Some(&f) => f,
                        None => {
                            let f = functions.len() as u64 + 1;
                            let name = strings.id(&block.function);
                            functions.push(Function { id: f, name, system_name: name, filename: strings.id(file), start_line: 0 });
                            function_ids.insert(fkey, f);
                            f
                        }
                    };
                    let id = locations.len() as u64 + 1;
                    let line = block.source.as_ref().map_or(0, |s| i64::from(s.line));
                    locations.push(Location { id, mapping_id: 0, address: block.link_address, line: vec![Line { function_id, line }] });
                    location_ids.insert(key, id);
                    id
                }
            };
            ids.push(id);
        }
        let mut label = vec![Label { key: rank_key, str: 0, num: value(path.rank as u64), num_unit: 0 }];
        if let Some(bl) = path.ball_larus {
            label.push(Label { key: bl_key, str: 0, num: value(bl), num_unit: 0 });
        }
        samples.push(Sample { location_id: ids, value: vec![value(path.count), value(path.count.saturating_mul(path.instructions))], label });
    }
    let comment = vec![strings.id(comment)];
    let period_type = Some(ValueType { r#type: strings.id("instructions"), unit: strings.id("count") });
    Profile {
        sample_type,
        sample: samples,
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

/// The encoded (uncompressed) `profile.proto` message for `report`.
pub fn pprof_profile(report: &PathReport, comment: &str) -> Vec<u8> {
    build_profile(report, comment).encode_to_vec()
}

/// Writes `report`'s paths as a gzip-compressed `profile.proto`.
pub fn write_pprof(report: &PathReport, comment: &str, out: impl Write) -> Result<(), ExportError> {
    if report.paths.is_empty() {
        return Err(ExportError::Empty("pprof"));
    }
    let io = |source| ExportError::Write { format: "pprof", source };
    let mut gz = GzEncoder::new(out, flate2::Compression::default());
    gz.write_all(&pprof_profile(report, comment)).map_err(io)?;
    gz.finish().map_err(io)?.flush().map_err(io)
}
