//! # kansoku-paths — path profiles from block streams (seed 003)
//!
//! A *path* is the sequence of basic blocks executed between two cuts. As in the seed
//! (Oshima et al., "Development of a path profiling tool using Valgrind"), for every
//! executed block we look at the last instruction of the previous block:
//!
//! * a branch whose target block starts at or below the block it leaves is a **back edge**
//!   and cuts the path ([`BackEdgeMode::Address`]); or, beyond the seed, the CFG's real loop
//!   back edges found with dominators ([`BackEdgeMode::Loops`]);
//! * a call or return cuts the path ([`CallMode::Split`]); the seed's second mode does not
//!   cut at calls ([`CallMode::Through`]); beyond the seed, [`CallMode::Frames`] keeps one
//!   path in progress per stack frame, so the caller's path resumes after the callee.
//!
//! At a cut the path is looked up in a hash table and counted, or inserted: paths are
//! interned ([`PathTable`]), so memory grows with the number of distinct paths, not with
//! the run. Every path that lies in one function also gets its Ball–Larus id
//! ([`BallLarus`]), and the report tells per function how many of its possible acyclic
//! paths ran.
//!
//! The block stream comes from kansoku's own Valgrind tool (a binary stream of superblock
//! entries: [`sbstream`]), from Valgrind's Lackey (`SB` lines: [`lackey`]), from the exact
//! tracer's instructions, or from a `.ksk` recording. Lackey superblocks are not basic
//! blocks; the `normalize` module splits every source into basic-block entries with our own decoder
//! ([`CodeMap`]), so all sources give the same paths.
//!
//! Analyses take data and return data: [`PathAnalysis`] is fed events or Lackey lines and
//! returns a [`PathReport`] and DOT text. Spawning Valgrind lives in `kansoku-probe`.
#![deny(missing_docs)]

pub mod analysis;
pub mod ballarus;
pub mod code;
pub mod costs;
mod dot;
pub mod lackey;
mod normalize;
pub mod profile;
mod replay;
pub mod report;
pub mod timeline;

/// The tool's stream format and the hasher moved to `kansoku-core` (the exact engine in
/// `kansoku-probe` reads the stream too); kept here under their old names.
pub use kansoku_core::{fxhash, sbstream};

pub use analysis::{AnalysisOptions, BlockKind, BlockRecorder, InputStats, PathAnalysis};
pub use ballarus::BallLarus;
pub use code::{BlockFacts, BlockId, CodeMap, Scope};
pub use costs::{CallCost, CallTracker, CostProfile, FunctionCost, InstructionCost, StackCost};
pub use dot::CfgError;
pub use profile::{BackEdgeMode, CallMode, PathProfiler, PathTable};
pub use report::{BlockRef, FunctionRow, Keep, PathReport, PathRow, Summary};
pub use timeline::{CallCollector, CallSink, CallSpan, CallTimeline};
