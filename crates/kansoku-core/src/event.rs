//! What a recording holds: modules and the events observed while a program ran.

use serde::{Deserialize, Serialize};

/// A file mapped into the observed process: enough to find its symbols again later,
/// possibly on another machine (the build id tells whether the file is still the same).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Module {
    /// Path of the file, or a pseudo name such as `[vdso]`.
    pub path: String,
    /// GNU build id as lowercase hex, when the file has one.
    pub build_id: Option<String>,
    /// First runtime address of the mapping.
    pub start: u64,
    /// One past the last runtime address of the mapping.
    pub end: u64,
    /// File offset that `start` corresponds to.
    pub file_offset: u64,
}

impl Module {
    /// Whether the runtime address `addr` lies in the mapping.
    pub fn contains(&self, addr: u64) -> bool {
        (self.start..self.end).contains(&addr)
    }

    /// Short name for display: the file name without its directory.
    pub fn short_name(&self) -> &str {
        self.path.rsplit('/').next().unwrap_or(&self.path)
    }
}

/// One sample of the instruction pointer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Sample {
    /// Nanoseconds since the start of the recording.
    pub time_ns: u64,
    /// Sampled user-space instruction pointer.
    pub ip: u64,
    /// Retired user-space instructions of the thread so far, when the kernel reported it.
    pub instructions: Option<u64>,
}

/// How the observed program (or our observation of it) ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", content = "value", rename_all = "snake_case")]
pub enum ExitStatus {
    /// The program exited with this code.
    Exited(i32),
    /// The program was killed by this signal (a crash, or a kill from outside).
    Killed(i32),
    /// We stopped observing (window or limit reached) and let the program run on.
    Detached,
}

/// One observed event. Thread-specific events belong to the thread named by the last
/// [`Event::Thread`] before them (the main thread until one appears).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum Event {
    /// A module became known; modules are numbered in the order they appear.
    Module(Module),
    /// Following events belong to this thread id.
    Thread {
        /// The kernel's thread id.
        tid: u32,
    },
    /// One executed user-space instruction (exact traces).
    Instruction {
        /// Its runtime address.
        addr: u64,
    },
    /// A memory access of the instruction before it (exact traces with data addresses):
    /// its address, and whether it writes.
    Access {
        /// The data address accessed.
        addr: u64,
        /// True for a store, false for a load.
        write: bool,
    },
    /// A basic block started executing (block streams, e.g. from Valgrind).
    Block {
        /// The block's first runtime address.
        addr: u64,
    },
    /// A sampled instruction pointer.
    Sample(Sample),
    /// The marker function was entered.
    Marker {
        /// Nanoseconds since the start of the recording.
        time_ns: u64,
        /// Retired user-space instructions of the thread so far, when counted.
        instructions: Option<u64>,
    },
    /// A signal was delivered to the current thread (a crash shows here before the exit).
    Signal {
        /// The signal number.
        signal: i32,
    },
    /// The observation ended.
    Exit(ExitStatus),
    /// An event of a newer format version that this reader skips (its tag and length).
    Unknown {
        /// The event's tag byte.
        tag: u8,
        /// Its payload's length in bytes.
        len: u64,
    },
}
