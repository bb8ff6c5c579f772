//! Error types of the crate (thiserror; the CLI wraps them in anyhow).

use thiserror::Error;

/// Everything that can go wrong in this crate.
#[derive(Debug, Error)]
pub enum CacheError {
    /// The kernel source is not in the supported C subset.
    #[error("{file}:{line}:{col}: {msg}")]
    Kernel {
        /// The kernel file as the user named it.
        file: String,
        /// 1-based line of the offending token (0 when the file could not be read at all).
        line: u32,
        /// 1-based column, in bytes, of the offending token (0 when the file could not be read).
        col: u32,
        /// What is wrong there, for the user.
        msg: String,
    },
    /// A `--cache` description could not be understood.
    #[error("cache '{spec}': {msg}")]
    CacheConfig {
        /// The `--cache` text as given.
        spec: String,
        /// What is wrong with it.
        msg: String,
    },
    /// A `--base`/`--align` layout description is wrong or does not fit the kernel.
    #[error("layout: {0}")]
    Layout(String),
    /// Parameter values missing, malformed or outside the range a formula was derived for.
    #[error("parameters: {0}")]
    Params(String),
    /// A `--ref` selector names no reference.
    #[error("reference '{0}': {1}")]
    Reference(String, String),
    /// The model could not derive an exact formula (isl failed, a construction does not
    /// apply, the formulas disagree with the simulator).
    #[error("model: {0}")]
    Model(String),
    /// The model ran out of its time budget (`--budget`): more time may get there, and a
    /// race may retry the reference with another construction.
    #[error("model: {0}")]
    OutOfTime(String),
    /// isl's sets grew past its operation budget: a larger budget may get there.
    #[error("model: {0}")]
    OutOfOperations(String),
    /// A formulas file holds something evaluation cannot trust (a zero period or
    /// denominator, a missing table, a symbol that does not exist): the path inside names where.
    #[error("formulas: {0}")]
    Formulas(String),
    /// The set method cannot be used here (extents depending on parameters, its budget,
    /// formulas that disagree with the simulator): `cache model`'s `auto` falls back.
    /// `budget`: it ran out of time or of isl's operations, so a larger budget may get there.
    #[error("{msg}")]
    SetsUnavailable {
        /// Why the set method cannot be used, for the user.
        msg: String,
        /// True when the cause is the budget (time or isl operations), so a larger budget may get there.
        budget: bool,
    },
    /// A command's input: options that do not go together, a file that cannot be read or
    /// written, a simulation refused before it starts.
    #[error("{0}")]
    Input(String),
    /// What was being done when `source` went wrong (the file, the stage).
    #[error("{what}")]
    Context {
        /// The file or stage being worked on, shown as the error's message.
        what: String,
        /// The error that happened there.
        #[source]
        source: Box<CacheError>,
    },
    /// Reading or writing formulas as JSON failed.
    #[error("formulas JSON: {0}")]
    Json(#[from] serde_json::Error),
}

impl CacheError {
    /// Whether a larger budget (time or isl operations) may get there.
    pub(crate) fn is_budget(&self) -> bool {
        matches!(self, Self::OutOfTime(_) | Self::OutOfOperations(_))
    }

    /// The model's message, for a model error of any kind.
    pub(crate) fn model_message(&self) -> Option<&str> {
        match self {
            Self::Model(m) | Self::OutOfTime(m) | Self::OutOfOperations(m) => Some(m),
            _ => None,
        }
    }

    /// This error, saying what was being done.
    pub fn context(self, what: impl Into<String>) -> Self {
        Self::Context { what: what.into(), source: Box::new(self) }
    }

    /// The same error with `f` applied to a model error's message (how far the build got,
    /// which level): the kind, and so what a caller can do about it, is kept.
    pub(crate) fn map_model_message(self, f: impl FnOnce(String) -> String) -> Self {
        match self {
            Self::Model(m) => Self::Model(f(m)),
            Self::OutOfTime(m) => Self::OutOfTime(f(m)),
            Self::OutOfOperations(m) => Self::OutOfOperations(f(m)),
            e => e,
        }
    }
}

/// This crate's result: errors are [`CacheError`] unless said otherwise.
pub type Result<T, E = CacheError> = std::result::Result<T, E>;
