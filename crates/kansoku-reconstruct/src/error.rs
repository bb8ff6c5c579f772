use std::path::PathBuf;

/// Why a reconstruction could not be done; each says what the user can do.
#[derive(Debug, thiserror::Error)]
pub enum ReconstructError {
    #[error("the recording holds no samples; record longer or with a smaller period")]
    NoSamples,
    #[error("--split marker: the recording holds no marker events; record with --marker FUNC, or split with --split count:T (T = instructions per iteration) or --split function:NAME")]
    NoMarkers,
    #[error("--split marker: only one marker event, so no iteration is complete; record more iterations")]
    OneMarker,
    #[error("--split function:{0}: no sample lies in function {0}; pick a function that runs near the start of every iteration (see kansoku show)")]
    FunctionNeverSampled(String),
    #[error("{0}")]
    BadSplit(String),
    #[error("the sampling period must be at least 1 (got 0)")]
    ZeroPeriod,
    #[error("a skid of {skid} instructions is not below the period {period}: samples would overtake each other (real skid is a few instructions)")]
    SkidTooLarge { skid: u64, period: u64 },
    #[error("--split count:T needs the sampling period, but the recording does not name one; use --split marker or --split function:NAME")]
    NoPeriod,
    #[error("no partial sequence holds a sample; record more iterations or a smaller period")]
    NoSequences,
    #[error("--solver phase does not apply: {0}")]
    PhaseNotApplicable(String),
    #[error("{0}")]
    NoSuchClass(String),
    #[error("--solver exact: {0}")]
    TooLarge(String),
    #[error("score file {path}: {what}")]
    Scores { path: PathBuf, what: String },
}

/// Why a recording, an exact trace or a trace file could not be used; each names the file
/// (and the line, in a trace file).
#[derive(Debug, thiserror::Error)]
pub enum FileError {
    #[error(transparent)]
    Recording(#[from] kansoku_core::RecordingError),
    #[error("{path}: holds {kind:?}, not samples; record with `kansoku record`, or turn an exact trace into samples with `kansoku sample --period P`")]
    NotSamples { path: PathBuf, kind: kansoku_core::RecordingKind },
    #[error("{path}: not an exact trace; make one with `kansoku trace exact --marker FUNC`")]
    NotExact { path: PathBuf },
    #[error("{path}: {what}")]
    Invalid { path: PathBuf, what: String },
    #[error("{path}:{line}: {what}")]
    Line { path: PathBuf, line: usize, what: String },
    /// Text that is not UTF-8, located by line, column and byte.
    #[error("{path}:{error}")]
    Text { path: PathBuf, error: kansoku_core::input::TextError },
    #[error("{doing} {path}: {cause}")]
    Io { doing: &'static str, path: PathBuf, cause: std::io::Error },
    #[error(transparent)]
    Reconstruct(#[from] ReconstructError),
    #[error("{doing}: {error}")]
    Reconstructing { doing: String, error: ReconstructError },
}
