//! Where an address lies in a program, in the seed-000 vocabulary.

use serde::{Deserialize, Serialize};

/// A code location: module, function, offset in instructions from the function entry and,
/// in the finer variant, the basic block and the offset (in instructions) inside it.
///
/// Offsets count instructions, not bytes, so a difference of 1 means neighbours in the
/// instruction trace — the property the similarity and likelihood scores rely on.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Location {
    /// Index into the recording's module map, if the address fell in a known module.
    pub module: Option<usize>,
    /// Function name, or a synthetic name such as `libc.so.6+0x2a1c0` when unknown.
    pub function: String,
    /// Offset in instructions from the function's entry.
    pub offset: u32,
    /// Basic-block number inside the function (0 = entry block).
    pub block: Option<u32>,
    /// Offset in instructions from the start of the block.
    pub block_offset: Option<u32>,
}

impl Location {
    /// `function:offset` — the coarse seed-000 instruction information.
    pub fn function_offset(&self) -> String {
        format!("{}:{}", self.function, self.offset)
    }

    /// `function:BB:offset` — the finer variant; falls back to `function:offset`.
    pub fn block_form(&self) -> String {
        match (self.block, self.block_offset) {
            (Some(b), Some(o)) => format!("{}:{}:{}", self.function, b, o),
            _ => self.function_offset(),
        }
    }
}
