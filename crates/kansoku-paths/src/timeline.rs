//! A run's calls on its instruction index, as the shadow call stacks ([`crate::CallTracker`])
//! see them: each call begins when its frame is pushed and ends when it is popped, so a
//! [`CallSink`] is told about every call in time order while the analysis runs, and what
//! it has to keep is its own business (a Perfetto writer keeps the open calls and writes
//! the rest out; [`CallCollector`] keeps every call, for small runs and tests).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use serde::Serialize;

/// Where the calls of a run go as they happen. Times are the run's instruction index
/// (instructions of the basic blocks entered before, all threads), never decreasing from
/// one call to the next; a thread's calls nest (an `end` closes its latest open call).
pub trait CallSink: Send {
    /// Thread `tid` has its first call or marker hit; `program` is the run's main
    /// program as the modules name it, when known.
    fn thread(&mut self, tid: u32, program: Option<&str>);
    /// A call of `function` begins on `tid` at `at`.
    fn begin(&mut self, tid: u32, at: u64, function: &str);
    /// The latest open call of `tid` ends at `at` (where the thread went on after it).
    fn end(&mut self, tid: u32, at: u64);
    /// The marker was entered on `tid` at `at`.
    fn marker(&mut self, tid: u32, at: u64);
    /// The run ended at index `instructions`, every call closed.
    fn finish(&mut self, instructions: u64);
}

/// A sink shared with whoever reads it after the run (the analysis owns its sink).
impl<T: CallSink> CallSink for Arc<Mutex<T>> {
    fn thread(&mut self, tid: u32, program: Option<&str>) {
        self.lock().unwrap_or_else(PoisonError::into_inner).thread(tid, program)
    }
    fn begin(&mut self, tid: u32, at: u64, function: &str) {
        self.lock().unwrap_or_else(PoisonError::into_inner).begin(tid, at, function)
    }
    fn end(&mut self, tid: u32, at: u64) {
        self.lock().unwrap_or_else(PoisonError::into_inner).end(tid, at)
    }
    fn marker(&mut self, tid: u32, at: u64) {
        self.lock().unwrap_or_else(PoisonError::into_inner).marker(tid, at)
    }
    fn finish(&mut self, instructions: u64) {
        self.lock().unwrap_or_else(PoisonError::into_inner).finish(instructions)
    }
}

/// One call (a frame of the shadow call stack) on the run's timeline. A thread's calls
/// nest: each lies within the frames that were open below it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct CallSpan {
    /// Thread that made the call.
    pub tid: u32,
    /// Index into [`CallTimeline::functions`].
    pub function: usize,
    /// The run's instruction index (all threads) at the call's first instruction.
    pub start: u64,
    /// The index where the thread went on after it (its caller, or the next frame); for
    /// a frame still open when the stream ended (a program that calls `exit`), the end.
    pub end: u64,
}

/// The calls of a run in order, on the instruction index: what a timeline viewer draws
/// from a trace without time stamps.
#[derive(Clone, Debug, Default, Serialize)]
pub struct CallTimeline {
    /// The main program's path, when known.
    pub program: Option<String>,
    /// Function names (or stretches outside known functions), as [`crate::CostProfile`] names them.
    pub functions: Vec<String>,
    /// Every call, in the order it ended.
    pub calls: Vec<CallSpan>,
    /// Marker hits: thread and instruction index.
    pub markers: Vec<(u32, u64)>,
    /// Instructions the run executed (the index's end).
    pub instructions: u64,
}

/// Keeps every call (32 bytes a call): a [`CallTimeline`].
#[derive(Default)]
pub struct CallCollector {
    timeline: CallTimeline,
    index: HashMap<String, usize>,
    open: HashMap<u32, Vec<(usize, u64)>>,
}

impl CallCollector {
    /// What was collected so far.
    pub fn timeline(&self) -> &CallTimeline {
        &self.timeline
    }
}

impl CallSink for CallCollector {
    fn thread(&mut self, _tid: u32, program: Option<&str>) {
        if self.timeline.program.is_none() {
            self.timeline.program = program.map(str::to_string);
        }
    }
    fn begin(&mut self, tid: u32, at: u64, function: &str) {
        let next = self.index.len();
        let f = *self.index.entry(function.to_string()).or_insert(next);
        if f == next {
            self.timeline.functions.push(function.to_string());
        }
        self.open.entry(tid).or_default().push((f, at));
    }
    fn end(&mut self, tid: u32, at: u64) {
        if let Some((function, start)) = self.open.get_mut(&tid).and_then(Vec::pop) {
            self.timeline.calls.push(CallSpan { tid, function, start, end: at });
        }
    }
    fn marker(&mut self, tid: u32, at: u64) {
        self.timeline.markers.push((tid, at));
    }
    fn finish(&mut self, instructions: u64) {
        self.timeline.instructions = instructions;
    }
}
