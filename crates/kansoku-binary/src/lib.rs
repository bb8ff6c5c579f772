//! # kansoku-binary — reading programs
//!
//! The model: a [`Program`] is an ELF file with its functions (from the static symbol
//! table, else that of its detached debug file found by build id or `.gnu_debuglink`,
//! else the dynamic one; PLT stubs named `memcpy@plt` from their relocations; in a
//! stripped program every `.eh_frame` entry is a function named `module+0xaddress`, as perf
//! names it, and other code outside alignment padding is an address range named the same
//! way). A function decodes into instructions ([`decode`]) and splits into basic blocks
//! with a control-flow graph and its loops ([`cfg`]), following switch jump tables whose
//! size a bounds check fixes ([`JumpTable`]). At run time a process maps programs at some
//! address; [`Symbolizer`] turns runtime addresses back into [`kansoku_core::Location`]s
//! through the recording's module map, including shared libraries such as libc.
//! [`listing`] is a program's functions and one function in full as data, what `kansoku
//! inspect` prints.
#![deny(missing_docs)]

pub mod cfg;
pub mod decode;
pub mod listing;
mod jump_table;
pub mod maps;
mod plt;
pub mod program;
mod successors;
pub mod symbolize;
mod unwind;

pub use cfg::{BasicBlock, FunctionCfg, Loop};
pub use decode::{DecodedInstruction, InstructionKind};
pub use jump_table::JumpTable;
pub use program::{BinaryError, FunctionSymbol, Program, SourceLine, SymbolSource};
pub use successors::{static_successors, StaticSuccessors};
pub use symbolize::Symbolizer;
