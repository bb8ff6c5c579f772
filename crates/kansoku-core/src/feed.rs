//! What a block source hands to an analysis (issue 11): `kansoku-probe::blocks` runs every
//! source of seed 003's path analysis — kansoku's Valgrind tool, Lackey, an exact trace on
//! either engine, a file — and feeds one [`BlockSink`]; the path analysis implements it.
//! (ripgrep's `Searcher`/`Sink` split is the model: the source knows how to read, the sink
//! what to do with what was read.)

use crate::event::Event;

/// What an analysis of executed blocks implements: each source calls the method of its
/// own form of input, and the sink turns all of them into the same blocks.
pub trait BlockSink {
    /// The next chunk of kansoku's Valgrind tool stream, cut anywhere.
    fn tool_stream(&mut self, bytes: &[u8]);
    /// One line of Lackey's log, without its newline.
    fn lackey_line(&mut self, line: &[u8]);
    /// One event of a recording or an exact trace.
    fn event(&mut self, event: &Event);
    /// How far the sink has got, in its own units, for a progress bar.
    fn progress(&self) -> u64;
}
