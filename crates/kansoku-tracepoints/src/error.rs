//! The one error type of the crate.

/// Everything that can go wrong while optimising, running or decoding.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TpError {
    /// The bytes are not a valid WebAssembly module.
    #[error("not a valid WebAssembly module: {0}")]
    Malformed(String),
    /// The module has no `kansoku.trace*` imports.
    #[error(
        "the module imports nothing from `kansoku`, so it has no trace points: include \
         kansoku_trace.h and call KTRACE(...) (its calls become imports of module `kansoku`)"
    )]
    NoTraceImports,
    /// An import the runtime or optimiser does not understand.
    #[error("unsupported import `{module}.{name}`: {reason}")]
    UnsupportedImport {
        /// The import's module name.
        module: String,
        /// The import's field name.
        name: String,
        /// What is not supported about it.
        reason: String,
    },
    /// Optimising a module twice is refused (its table would have to be composed).
    #[error("the module already has a `kansoku.xlat` translation table (it was optimised before); optimise the original module instead")]
    AlreadyOptimised,
    /// A `kansoku.decl` line that cannot be parsed.
    #[error("bad trace-point declaration `{line}`: {reason}")]
    BadDecl {
        /// The declaration line as written.
        line: String,
        /// What is wrong with it.
        reason: String,
    },
    /// A `kansoku.xlat` section that cannot be parsed.
    #[error("bad translation table (section kansoku.xlat): {0}")]
    BadXlat(String),
    /// A file that is not a kansoku trace.
    #[error("not a kansoku trace file: {0}")]
    BadTrace(String),
    /// The trace was recorded from a different module than the one given for decoding.
    #[error(
        "the trace was recorded from another module: its header names module hash {trace:016x}, \
         but the module given has hash {module:016x}; pass the exact .wasm that was run"
    )]
    ModuleMismatch {
        /// The module hash in the trace's header.
        trace: u64,
        /// The hash of the module given.
        module: u64,
    },
    /// A record whose argument count disagrees with the translation table.
    #[error("record {index} (id {id}) carries {got} arguments but the translation table says {want}")]
    ArityMismatch {
        /// The record's index in the trace, from 0.
        index: u64,
        /// Its trace id.
        id: u32,
        /// Arguments it carries.
        got: usize,
        /// Arguments the table's entry for the id expands.
        want: usize,
    },
    /// The entry function is missing or its parameters cannot be given.
    #[error("entry function: {0}")]
    Entry(String),
    /// Wasmtime failed to compile, link or run the module.
    #[error("running the module failed: {0}")]
    Runtime(String),
    /// wasm-encoder could not re-encode the module.
    #[error("re-encoding the module failed: {0}")]
    Encode(String),
    /// clang was missing or failed.
    #[error("compiling C to wasm failed: {0}")]
    Compiler(String),
    /// File or stream I/O.
    #[error("I/O error: {0}")]
    Io(#[from] std::io::Error),
    /// A clock or timestamp mode named by none of its names ([`std::str::FromStr`] of
    /// [`crate::Clock`] and [`crate::TimestampMode`]): the name and the ones accepted.
    #[error("unknown {0} `{1}` ({2})")]
    UnknownName(&'static str, String, &'static str),
}

impl From<wasmparser::BinaryReaderError> for TpError {
    fn from(e: wasmparser::BinaryReaderError) -> Self {
        TpError::Malformed(e.to_string())
    }
}

/// Result alias of the crate.
pub type Result<T, E = TpError> = std::result::Result<T, E>;
