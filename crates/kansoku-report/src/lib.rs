//! One self-contained HTML page of a results directory.
//!
//! The model: a results directory (the demo's `kansoku-demo/`, or any analysis run with
//! `-o DIR`) is a set of files; each file has a kind found from its name and its first
//! bytes, and each kind belongs to a room (seed 000…004, the foundation) and has a
//! caption that says what the figure or table means. A [`Manifest`], when the directory
//! has one, names the command that made each file.
//!
//! [`gather`] reads a directory into [`Found`] files (bounded: regular files only, a
//! prefix of each, a total budget); [`write_html`] turns them into the page. Nothing is
//! computed here that an analysis owns: the page shows what the files say.
//!
//! Everything in the page that comes from the directory (file names, contents, commands)
//! is outside input: it is escaped, pictures are embedded as `data:` images (an SVG shown
//! through `<img>` runs no script and cannot end the page's markup), and sizes are capped
//! with a note saying what was cut.
//!
//! The surface is what the CLI and the fuzz target call: [`gather`] with [`Limits`],
//! [`write_html`] of a [`Page`], the [`Manifest`] that `kansoku demo` writes. The kinds and
//! rooms, the tables and the escaping are the page's own.
#![deny(missing_docs)]

mod base64;
mod gather;
mod html;
mod kind;
mod manifest;
mod table;

pub use gather::{gather, Found, Gathered, Limits};
pub use html::{write_html, Page};
pub use manifest::{Manifest, Step, MANIFEST_FILE};

/// Why a results directory could not be read.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ReportError {
    /// The directory itself could not be listed.
    #[error("{path}: {source}")]
    Directory {
        /// The directory as given.
        path: String,
        /// Why listing it failed.
        source: std::io::Error,
    },
    /// The manifest exists but is not one this version reads.
    #[error("{path}: not a kansoku manifest: {message}")]
    Manifest {
        /// The manifest file.
        path: String,
        /// The JSON parser's message (line and column).
        message: String,
    },
}
