//! The crate's errors: what a reconstruction, a file or a choice's text got wrong.

use std::path::PathBuf;

/// Why a reconstruction could not be done; each says what the user can do.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ReconstructError {
    /// The recording has no sample events.
    #[error("the recording holds no samples; record longer or with a smaller period")]
    NoSamples,
    /// Splitting by marker, but the recording has no marker hit.
    #[error("--split marker: the recording holds no marker events; record with --marker FUNC, or split with --split count:T (T = instructions per iteration) or --split function:NAME")]
    NoMarkers,
    /// Splitting by marker, but one hit makes no complete iteration.
    #[error("--split marker: only one marker event, so no iteration is complete; record more iterations")]
    OneMarker,
    /// Splitting by a function (named) in which no sample lies.
    #[error("--split function:{0}: no sample lies in function {0}; pick a function that runs near the start of every iteration (see kansoku show)")]
    FunctionNeverSampled(String),
    /// The split asked for cannot be used with this recording (why).
    #[error("{0}")]
    BadSplit(String),
    /// A sampler was asked for period 0.
    #[error("the sampling period must be at least 1 (got 0)")]
    ZeroPeriod,
    /// A simulated skid at least as long as the period.
    #[error("a skid of {skid} instructions is not below the period {period}: samples would overtake each other (real skid is a few instructions)")]
    SkidTooLarge {
        /// The skid asked for, in instructions.
        skid: u64,
        /// The sampling period, in instructions.
        period: u64,
    },
    /// Splitting by count needs a period the recording does not name.
    #[error("--split count:T needs the sampling period, but the recording does not name one; use --split marker or --split function:NAME")]
    NoPeriod,
    /// Every partial sequence is empty.
    #[error("no partial sequence holds a sample; record more iterations or a smaller period")]
    NoSequences,
    /// The phase solver's conditions do not hold (which one).
    #[error("--solver phase does not apply: {0}")]
    PhaseNotApplicable(String),
    /// The iteration class asked for does not exist (the classes there are).
    #[error("{0}")]
    NoSuchClass(String),
    /// The exact solver's problem is beyond its limits (by how much).
    #[error("--solver exact: {0}")]
    TooLarge(String),
    /// A score file could not be read or used.
    #[error("score file {path}: {what}")]
    Scores {
        /// The score file.
        path: PathBuf,
        /// What is wrong with it, and where.
        what: String,
    },
}

/// Why a recording, an exact trace or a trace file could not be used; each names the file
/// (and the line, in a trace file).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum FileError {
    /// The recording could not be read.
    #[error(transparent)]
    Recording(#[from] kansoku_core::RecordingError),
    /// A recording of another kind where samples were needed.
    #[error("{path}: holds {kind:?}, not samples; record with `kansoku record`, or turn an exact trace into samples with `kansoku sample --period P`")]
    NotSamples {
        /// The recording.
        path: PathBuf,
        /// What it holds.
        kind: kansoku_core::RecordingKind,
    },
    /// A recording that is not an exact trace where one was needed.
    #[error("{path}: not an exact trace; make one with `kansoku trace exact --marker FUNC`")]
    NotExact {
        /// The recording.
        path: PathBuf,
    },
    /// The file reads but cannot be used (why).
    #[error("{path}: {what}")]
    Invalid {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        what: String,
    },
    /// A line of a trace file is wrong.
    #[error("{path}:{line}: {what}")]
    Line {
        /// The trace file.
        path: PathBuf,
        /// Line number, from 1.
        line: usize,
        /// What is wrong on it.
        what: String,
    },
    /// Text that is not UTF-8, located by line, column and byte.
    #[error("{path}:{error}")]
    Text {
        /// The file.
        path: PathBuf,
        /// Where the bad byte is.
        error: kansoku_core::input::TextError,
    },
    /// Reading or writing failed.
    #[error("{doing} {path}: {cause}")]
    Io {
        /// What was being done (`reading`, `writing`).
        doing: &'static str,
        /// The file.
        path: PathBuf,
        /// The OS's error.
        cause: std::io::Error,
    },
    /// The reconstruction itself failed.
    #[error(transparent)]
    Reconstruct(#[from] ReconstructError),
    /// The reconstruction of one part (named) failed.
    #[error("{doing}: {error}")]
    Reconstructing {
        /// Which part (an iteration class, a comparison).
        doing: String,
        /// Why.
        error: ReconstructError,
    },
}

/// A name given for one of the reconstruction's choices (solver, likelihood, instruction
/// information, linkage) that is none of them: what their [`std::str::FromStr`] returns.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown {what} '{name}' (use {choices})")]
pub struct UnknownChoice {
    /// What was being named (`solver`, `likelihood`).
    pub what: &'static str,
    /// The name given.
    pub name: String,
    /// The names accepted, in words.
    pub choices: &'static str,
}

/// Why a split's text (`marker`, `count:T`, `function:NAME`) does not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SplitSpecError {
    /// `count:T` with a T that is not a number.
    #[error("--split count:T: '{0}' is not a number of instructions")]
    NotANumber(String),
    /// `count:0`.
    #[error("--split count:T: T (instructions per iteration) must be at least 1")]
    ZeroCount,
    /// `function:` without a name.
    #[error("--split function:NAME needs a function name")]
    NoFunction,
    /// None of the forms (the text given).
    #[error("unknown split '{0}' (use marker, count:T or function:NAME)")]
    Unknown(String),
}
