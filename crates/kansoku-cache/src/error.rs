//! Error types of the crate (thiserror; the CLI wraps them in anyhow).

use thiserror::Error;

/// Where the set method found its time budget spent ([`CacheError::OutOfTime`]). The
/// budget is meant to hold *inside* one long isl operation or one long count, not only
/// between steps (one lexmax once ran 3 minutes past a 10 s budget, one sum 90 s): this
/// says which held, and how much work went on past the deadline, in units that do not
/// depend on the machine.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum BudgetStop {
    /// isl's abort hook stopped `operation` while it ran (the watchdog at the deadline).
    InsideIsl {
        /// The kansoku-isl operation that was stopped (`"map_lexmax"`, …).
        operation: &'static str,
    },
    /// The counter stopped inside its work (between residue classes of one sum, between
    /// chambers, while enumerating, or inside isl's scanner).
    InsideCount(kansoku_ehrhart::CountStop),
    /// A check between two steps of the build found the budget spent.
    BetweenSteps {
        /// isl operations that ran to their end after the deadline (`None`: not known
        /// where the error was made).
        late_isl_operations: Option<u64>,
    },
}

impl std::fmt::Display for BudgetStop {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            BudgetStop::InsideIsl { operation } => write!(f, "stopped inside isl's {operation}"),
            BudgetStop::InsideCount(c) => write!(f, "stopped in the counter, {c}"),
            BudgetStop::BetweenSteps { late_isl_operations: Some(n) } => write!(f, "found spent between steps, {n} isl operations after the deadline"),
            BudgetStop::BetweenSteps { late_isl_operations: None } => write!(f, "found spent between steps"),
        }
    }
}

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
    #[error("model: {msg}")]
    OutOfTime {
        /// What ran out, for the user (the reference, the stage, where it stopped).
        msg: String,
        /// Where the budget was found spent: inside an isl operation, inside the counter,
        /// or between two steps.
        stop: BudgetStop,
    },
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
        matches!(self, Self::OutOfTime { .. } | Self::OutOfOperations(_))
    }

    /// The model's message, for a model error of any kind.
    pub(crate) fn model_message(&self) -> Option<&str> {
        match self {
            Self::Model(m) | Self::OutOfTime { msg: m, .. } | Self::OutOfOperations(m) => Some(m),
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
            Self::OutOfTime { msg, stop } => Self::OutOfTime { msg: f(msg), stop },
            Self::OutOfOperations(m) => Self::OutOfOperations(f(m)),
            e => e,
        }
    }
}

/// This crate's result: errors are [`CacheError`] unless said otherwise.
pub type Result<T, E = CacheError> = std::result::Result<T, E>;
