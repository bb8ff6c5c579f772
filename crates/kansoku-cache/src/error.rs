//! Error types of the crate (thiserror; the CLI wraps them in anyhow).

use thiserror::Error;

/// Everything that can go wrong in this crate.
#[derive(Debug, Error)]
pub enum CacheError {
    /// The kernel source is not in the supported C subset.
    #[error("{file}:{line}:{col}: {msg}")]
    Kernel { file: String, line: u32, col: u32, msg: String },
    /// A `--cache` description could not be understood.
    #[error("cache '{spec}': {msg}")]
    CacheConfig { spec: String, msg: String },
    /// A `--base`/`--align` layout description is wrong or does not fit the kernel.
    #[error("layout: {0}")]
    Layout(String),
    /// Parameter values missing, malformed or outside the range a formula was derived for.
    #[error("parameters: {0}")]
    Params(String),
    /// A `--ref` selector names no reference.
    #[error("reference '{0}': {1}")]
    Reference(String, String),
    /// The model could not derive an exact formula within its budget.
    #[error("model: {0}")]
    Model(String),
    /// A formulas file holds something evaluation cannot trust (a zero period or
    /// denominator, a missing table, a symbol that does not exist): the path inside names where.
    #[error("formulas: {0}")]
    Formulas(String),
    /// Reading or writing formulas as JSON failed.
    #[error("formulas JSON: {0}")]
    Json(#[from] serde_json::Error),
}

pub type Result<T, E = CacheError> = std::result::Result<T, E>;
