//! # kansoku-core — the shared vocabulary
//!
//! Everything the rooms of kansoku pass to each other lives here:
//!
//! * [`Module`] — a piece of a process's address space backed by a file (path, build id,
//!   load address), so a recording made on one machine can be symbolised on another.
//! * [`Event`] — one thing observed while a program ran: an executed instruction, a
//!   sample with its time and instruction count, a marker hit, a block start, an exit.
//! * [`Location`] — where an address lies in the program: module, function, offset in
//!   instructions, and (optionally) basic block and offset inside it.
//! * The `.ksk` recording format ([`recording`]): a versioned header followed by a
//!   compact, streamed sequence of events. Writers and readers never hold the whole run in
//!   memory; a truncated file is read up to its last complete event.
//!
//! Data flows one way: program → probe → recording → analysis → report. This crate is the
//! "recording" step and the names every other step uses.
#![deny(missing_docs)]

pub mod agent_abi;
pub mod event;
pub mod feed;
pub mod fxhash;
pub mod input;
pub mod location;
pub mod marker;
pub mod recording;
pub mod sbstream;
pub mod text;
pub mod varint;

pub use event::{Event, ExitStatus, Module, Sample};
pub use location::Location;
pub use recording::{
    summarize_events, Header, RecordingKind, RecordingError, RecordingReader, RecordingSummary, RecordingWriter,
};
