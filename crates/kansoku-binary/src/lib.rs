//! # kansoku-binary — reading programs
//!
//! The model: a [`Program`] is an ELF file with its functions (from the static symbol
//! table, else the dynamic one, else address ranges of executable sections). A function
//! decodes into instructions ([`decode`]) and splits into basic blocks with a control-flow
//! graph and its loops ([`cfg`]). At run time a process maps programs at some address;
//! [`Symbolizer`] turns runtime addresses back into [`kansoku_core::Location`]s through the
//! recording's module map, including shared libraries such as libc.

pub mod cfg;
pub mod decode;
pub mod maps;
pub mod program;
pub mod symbolize;

pub use cfg::{BasicBlock, FunctionCfg, Loop};
pub use decode::{DecodedInstruction, InstructionKind};
pub use program::{BinaryError, FunctionSymbol, Program, SourceLine};
pub use symbolize::Symbolizer;
