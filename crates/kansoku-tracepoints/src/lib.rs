//! kansoku-tracepoints — seed 002: reducing trace overhead by modifying trace operations.
//!
//! A program (C compiled by clang to WebAssembly) calls trace points through
//! `kansoku_trace.h`: each `KTRACE(id, ...)` is a call of the import `kansoku.traceN`. This
//! crate:
//! - [`optimize`] rewrites the module: merges the trace calls of a basic block into one call
//!   with a new id, drops arguments the host can rebuild, removes disabled points and repeats
//!   of idempotent ones, respects barriers, movement limits and an id budget, and iterates
//!   until the estimated cost stops falling; it writes the translation table into the custom
//!   section `kansoku.xlat` ([`xlat`]);
//! - [`runtime`] runs a module under wasmtime, writing binary trace records ([`tracefile`])
//!   with timestamps in executed instructions (fuel) or nanoseconds;
//! - [`decode`] expands merged records into exactly what the unmodified program would have
//!   emitted, timestamps rebuilt from offsets or sub-indices;
//! - [`check()`] runs both modules and compares their decoded streams;
//! - [`report`] words each result as the text `kansoku tp` prints.
#![deny(missing_docs)]

pub mod check;
pub mod clang;
pub mod decl;
pub mod decode;
pub mod error;
pub mod module;
pub mod optimize;
pub mod report;
pub mod runtime;
pub mod tracefile;
pub mod xlat;

pub use check::{check, CheckReport};
pub use decl::{DeclTable, TraceDecl};
pub use decode::{decode, Decoded, Event, TimestampMode};
pub use error::{Result, TpError};
pub use optimize::{optimize, OptimizeOptions, OptimizeReport, Optimized};
pub use runtime::{run_module, run_to_vec, RunOptions, RunOutcome, DEFAULT_TIME_LIMIT};
pub use tracefile::{read_trace, Clock, Record, TraceData};
pub use xlat::{ArgSource, XlatTable};
