//! One analysis of one observed run: events or Lackey lines in, a path table out.

use std::collections::HashMap;
use std::fs::File;
use std::io::BufWriter;

use kansoku_binary::InstructionKind;
use kansoku_core::{Event, ExitStatus, Header, RecordingError, RecordingKind, RecordingWriter};

use crate::code::{BlockId, CodeMap, Scope};
use crate::costs::CallTracker;
use crate::lackey::{module_from_syms, parse_line, LackeyLine};
use crate::normalize::{BasicBlockStream, InstructionReducer, Repeats, SuperblockSplitter, VEX_MAX_INSNS};
use crate::profile::{BackEdgeMode, CallMode, PathProfiler};
use crate::replay::ToolTrie;
use crate::sbstream::{Item, StreamDecoder};
use crate::timeline::{CallCollector, CallSink, CallTimeline};

/// How an analysis cuts and what it keeps.
#[derive(Clone, Debug)]
pub struct AnalysisOptions {
    /// Where a path is cut at calls and returns (split, through, or one path per frame).
    pub calls: CallMode,
    /// Which branches count as back edges and cut the path (by address, or the CFG's loops).
    pub back_edges: BackEdgeMode,
    /// Which blocks paths keep: the main program's only, or every block of the process.
    pub scope: Scope,
    /// The main program's path as modules name it; by default the first module seen.
    pub program: Option<String>,
    /// Count block-to-block transitions too (needed for CFG pictures).
    pub track_edges: bool,
    /// Follow a shadow call stack per thread too (calls, inclusive costs and stacks of
    /// [`PathAnalysis::costs`], for the exports).
    pub track_calls: bool,
}

impl Default for AnalysisOptions {
    fn default() -> Self {
        AnalysisOptions { calls: CallMode::Split, back_edges: BackEdgeMode::Address, scope: Scope::Program, program: None, track_edges: false, track_calls: false }
    }
}

/// What the `Block` events of a recording are.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BlockKind {
    /// Lackey superblock entries (split with our decoder).
    Superblocks,
    /// Basic-block entries, already split (kansoku's own block recordings).
    Basic,
}

impl BlockKind {
    /// The kind a recording's header declares (`parameters.blocks`), superblocks by default.
    pub fn of_header(header: &Header) -> BlockKind {
        match header.parameters.get("blocks").and_then(|v| v.as_str()) {
            Some("basic") => BlockKind::Basic,
            _ => BlockKind::Superblocks,
        }
    }
}

/// Counters about the input itself.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct InputStats {
    /// Lines of Lackey output read (0 for other sources).
    pub lines: u64,
    /// Superblock entries read (Lackey `SB` lines or the tool stream's entries).
    pub superblocks: u64,
    /// Single instructions read from the exact tracer (`Instruction` events).
    pub instructions: u64,
    /// `Block` events read from a `.ksk` recording.
    pub block_events: u64,
    /// Paths of the modules mapped into the process, in the order they were seen.
    pub modules: Vec<String>,
    /// Lines of Lackey output that were not superblock entries nor Valgrind messages.
    pub garbled_lines: u64,
    /// The first few garbled lines: (line number, text).
    pub garbled_examples: Vec<(u64, String)>,
    /// Superblocks that ended where neither a transfer nor the VEX limit explains.
    pub unexpected_superblock_cuts: u64,
    /// Fatal signal of the observed program, if it crashed.
    pub signal: Option<i32>,
    /// Address of the faulting instruction, when Valgrind reported it.
    pub fault_address: Option<u64>,
    /// How the observed program ended (exit code or signal), when the input says.
    pub exit: Option<ExitStatus>,
    /// Distinct thread ids whose events were read.
    pub threads: u64,
    /// Bytes of kansoku's Valgrind tool stream read (0 for other sources).
    pub stream_bytes: u64,
    /// Places where that stream was damaged or cut (the paths in progress were cut there).
    pub stream_damage: u64,
    /// Superblocks entered as the tool counted them in paths mode (0 otherwise); at the end
    /// `superblocks` is this count (the trie leaves out the repetitions of rep strings).
    pub tool_entries: u64,
    /// The tool stopped counting paths here: a path too long for it (see the tool's source).
    pub tool_gave_up: Option<u64>,
    /// The first few: (byte offset, what happened).
    pub stream_damage_examples: Vec<(u64, String)>,
}

/// The profiler's thread for replaying paths counted by the tool (no kernel thread id is this).
const REPLAY_THREAD: u32 = u32::MAX;

/// Writes the basic-block stream an analysis sees into a `.ksk` (kind `blocks`,
/// `parameters.blocks = "basic"`), so it can be analysed again offline.
pub struct BlockRecorder {
    writer: RecordingWriter<BufWriter<File>>,
    error: Option<RecordingError>,
}

impl BlockRecorder {
    /// Creates the `.ksk` at `path` and writes its header: the observed `program` with its `args`, and `source` (where the blocks came from) as a parameter.
    pub fn create(path: &std::path::Path, program: &str, args: Vec<String>, source: &str) -> Result<Self, RecordingError> {
        let header = Header::new(RecordingKind::Blocks, program, args).with_parameter("blocks", "basic").with_parameter("source", source);
        Ok(BlockRecorder { writer: RecordingWriter::create(path, &header)?, error: None })
    }

    #[inline]
    fn write(&mut self, e: &Event) {
        if self.error.is_none() {
            if let Err(err) = self.writer.write(e) {
                self.error = Some(err);
            }
        }
    }

    /// Ends the recording; returns the events written, or the first write error met.
    pub fn finish(self) -> Result<u64, RecordingError> {
        if let Some(e) = self.error {
            return Err(e);
        }
        self.writer.finish()
    }
}

/// The analysis of one run.
pub struct PathAnalysis {
    /// The decoded and interned code of the observed process.
    pub code: CodeMap,
    /// The path profiler fed with the basic-block entries.
    pub profiler: PathProfiler,
    /// Counters about the input read so far.
    pub stats: InputStats,
    /// What the `Block` events fed are (superblocks to split, or basic blocks).
    pub block_kind: BlockKind,
    recorder: Option<BlockRecorder>,
    tid: u32,
    /// The current thread's splitters (kept out of the maps: one map lookup per event
    /// costs more than the rest of the analysis of a block).
    current: ThreadSplitters,
    parked: HashMap<u32, ThreadSplitters>,
    pending_object: Option<String>,
    awaiting_fault: bool,
    seen_tids: std::collections::HashSet<u32>,
    /// Decoder of kansoku's Valgrind tool stream, once such a stream is fed.
    stream: Option<StreamDecoder>,
    /// Shadow call stacks, when asked for ([`AnalysisOptions::track_calls`]).
    pub call_tracker: Option<CallTracker>,
    /// Every call, when kept ([`PathAnalysis::keep_call_timeline`]).
    kept_calls: Option<std::sync::Arc<std::sync::Mutex<CallCollector>>>,
    /// Paths counted by the tool (`--paths`): its trie as it arrives.
    tool_trie: ToolTrie,
    /// The open path of the last thread of the tool's last trie (thread, superblocks):
    /// replayed at the end, where a crash may cut its last superblock.
    tool_open: Option<(u32, Vec<u64>)>,
    /// The tool's snapshot before an execve: the paths if the stream ends after it.
    tool_snapshot: Option<ToolTrie>,
}

#[derive(Default)]
struct ThreadSplitters {
    superblocks: Option<SuperblockSplitter>,
    instructions: InstructionReducer,
    basic: BasicBlockStream,
}

fn emit<'a>(
    profiler: &'a mut PathProfiler,
    recorder: &'a mut Option<BlockRecorder>,
    tracker: &'a mut Option<CallTracker>,
) -> impl FnMut(&mut CodeMap, BlockId, InstructionKind) + 'a {
    move |code: &mut CodeMap, b: BlockId, k: InstructionKind| {
        profiler.enter(b, k, &*code);
        if let Some(t) = tracker {
            t.enter(b, k, code);
        }
        if let Some(r) = recorder {
            r.write(&Event::Block { addr: code.block(b).addr });
        }
    }
}

/// Repetitions of a `rep` instruction a splitter met: more executions of it for the costs.
#[inline]
fn repeated(tracker: &mut Option<CallTracker>, code: &CodeMap, repeats: Option<Repeats>) {
    if let (Some(t), Some(r)) = (tracker, repeats) {
        t.repeat(r.addr, r.count, code);
    }
}

impl PathAnalysis {
    /// An empty analysis that cuts and keeps as `options` say.
    pub fn new(options: &AnalysisOptions) -> Self {
        let mut profiler = PathProfiler::new(options.calls, options.back_edges);
        if options.track_edges {
            profiler.track_edges();
        }
        PathAnalysis {
            code: CodeMap::new(options.program.clone(), options.scope),
            profiler,
            stats: InputStats::default(),
            block_kind: BlockKind::Superblocks,
            recorder: None,
            tid: 0,
            current: ThreadSplitters::default(),
            parked: HashMap::new(),
            pending_object: None,
            awaiting_fault: false,
            seen_tids: Default::default(),
            stream: None,
            call_tracker: options.track_calls.then(CallTracker::new),
            kept_calls: None,
            tool_trie: ToolTrie::default(),
            tool_open: None,
            tool_snapshot: None,
        }
    }

    /// Also tell `sink` of every call and marker hit on the run's instruction index as
    /// they happen (starts a call tracker if none runs): memory that follows the open
    /// calls, not the run, unless the sink keeps them.
    pub fn stream_call_timeline(&mut self, sink: Box<dyn CallSink>) {
        self.call_tracker.get_or_insert_with(CallTracker::new).stream_timeline(sink);
    }

    /// Also keep every call and marker hit on the run's instruction index, for
    /// [`PathAnalysis::call_timeline`] (32 bytes a call).
    pub fn keep_call_timeline(&mut self) {
        let kept = std::sync::Arc::new(std::sync::Mutex::new(CallCollector::default()));
        self.stream_call_timeline(Box::new(kept.clone()));
        self.kept_calls = Some(kept);
    }

    /// Every call of the run on its instruction index, when kept
    /// ([`PathAnalysis::keep_call_timeline`]); `None` otherwise.
    pub fn call_timeline(&self) -> Option<CallTimeline> {
        let kept = self.kept_calls.as_ref()?;
        let collector = kept.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        Some(collector.timeline().clone())
    }

    /// Also write the basic-block stream into a recording.
    pub fn record_into(&mut self, recorder: BlockRecorder) {
        self.recorder = Some(recorder);
    }

    fn add_module(&mut self, m: kansoku_core::Module) {
        self.stats.modules.push(m.path.clone());
        if let Some(r) = &mut self.recorder {
            r.write(&Event::Module(m.clone()));
        }
        self.code.add_module(m);
    }

    fn switch_thread(&mut self, tid: u32) {
        if tid != self.tid {
            let next = self.parked.remove(&tid).unwrap_or_default();
            let old = std::mem::replace(&mut self.current, next);
            self.parked.insert(self.tid, old);
            self.tid = tid;
            self.profiler.switch_thread(tid);
            if let Some(t) = &mut self.call_tracker {
                t.switch_thread(tid);
            }
            if let Some(r) = &mut self.recorder {
                r.write(&Event::Thread { tid });
            }
        }
    }

    /// The following blocks are run by thread `tid` (an exact tracer's `Thread` event or a
    /// thread record of kansoku's Valgrind tool): each thread has its own paths in progress.
    fn thread(&mut self, tid: u32) {
        self.seen_tids.insert(tid);
        self.stats.threads = self.seen_tids.len() as u64;
        self.switch_thread(tid)
    }

    /// One event of a recording (or of the live exact tracer).
    pub fn feed_event(&mut self, event: &Event) {
        match event {
            Event::Module(m) => self.add_module(m.clone()),
            Event::Thread { tid } => self.thread(*tid),
            Event::Instruction { addr } => {
                self.stats.instructions += 1;
                self.current.instructions.push(*addr, &mut self.code, &mut emit(&mut self.profiler, &mut self.recorder, &mut self.call_tracker));
                repeated(&mut self.call_tracker, &self.code, self.current.instructions.take_repeats());
            }
            Event::Block { addr } => {
                self.stats.block_events += 1;
                match self.block_kind {
                    BlockKind::Basic => {
                        self.current.basic.push(*addr, &mut self.code, &mut emit(&mut self.profiler, &mut self.recorder, &mut self.call_tracker));
                    }
                    BlockKind::Superblocks => self.superblock(*addr),
                }
            }
            Event::Signal { signal } => {
                self.stats.signal = Some(*signal);
                if let Some(r) = &mut self.recorder {
                    r.write(&Event::Signal { signal: *signal });
                }
            }
            Event::Exit(status) => {
                self.stats.exit = Some(*status);
                if let ExitStatus::Killed(sig) = status {
                    self.stats.signal.get_or_insert(*sig);
                }
            }
            Event::Marker { .. } => {
                if let Some(t) = &mut self.call_tracker {
                    t.marker(&self.code);
                }
            }
            Event::Sample(_) | Event::Access { .. } | Event::Unknown { .. } => {}
        }
    }

    /// One line of Lackey output (without its newline).
    #[inline]
    pub fn feed_lackey_line(&mut self, line: &[u8]) {
        self.stats.lines += 1;
        match parse_line(line) {
            LackeyLine::Superblock(addr) => self.superblock(addr),
            LackeyLine::ObjectPath(p) => self.pending_object = Some(p.to_string()),
            LackeyLine::ObjectAddresses { svma, avma } => {
                if let Some(path) = self.pending_object.take() {
                    if let Some(m) = module_from_syms(&path, svma, avma) {
                        self.add_module(m);
                    }
                }
            }
            LackeyLine::FatalSignal(sig) => {
                self.stats.signal = Some(sig);
                self.awaiting_fault = true;
            }
            LackeyLine::At(addr) => {
                if self.awaiting_fault {
                    self.stats.fault_address = Some(addr);
                    self.awaiting_fault = false;
                }
            }
            LackeyLine::Message => {}
            LackeyLine::Garbled => {
                self.stats.garbled_lines += 1;
                if self.stats.garbled_examples.len() < 5 {
                    self.stats.garbled_examples.push((self.stats.lines, String::from_utf8_lossy(line).chars().take(120).collect()));
                }
                // A superblock may be missing here: end the one in progress and cut the paths.
                if let Some(s) = &mut self.current.superblocks {
                    s.reset(&mut self.code, &mut emit(&mut self.profiler, &mut self.recorder, &mut self.call_tracker));
                    repeated(&mut self.call_tracker, &self.code, s.take_repeats());
                }
                self.profiler.cut_thread();
            }
        }
    }

    /// The next chunk of kansoku's Valgrind tool stream ([`crate::sbstream`]), cut anywhere.
    pub fn feed_tool_stream(&mut self, data: &[u8]) {
        let mut d = self.stream.take().unwrap_or_default();
        d.feed(data, &mut |item| self.tool_item(item));
        self.stats.stream_bytes = d.bytes;
        self.stream = Some(d);
    }

    /// One superblock entered at `addr`, from any source (block events, Lackey, the tool):
    /// counted (saturating: a replayed trie's counts come from the input) and split into
    /// VEX's superblocks.
    #[inline]
    fn superblock(&mut self, addr: u64) {
        self.stats.superblocks = self.stats.superblocks.saturating_add(1);
        let s = self.current.superblocks.get_or_insert_with(|| SuperblockSplitter::new(VEX_MAX_INSNS));
        s.push(addr, &mut self.code, &mut emit(&mut self.profiler, &mut self.recorder, &mut self.call_tracker));
        repeated(&mut self.call_tracker, &self.code, s.take_repeats());
    }

    #[inline]
    fn tool_item(&mut self, item: Item) {
        match item {
            Item::Superblock(addr) => self.superblock(addr),
            Item::Module { avma, svma, path } => {
                if let Some(m) = module_from_syms(path, svma, avma) {
                    self.add_module(m);
                }
            }
            Item::Thread(tid) => self.thread(tid),
            // Exact-mode records: paths need superblock entries only (the tool does not
            // write these unless asked to with --exact=yes).
            Item::Shape { .. } | Item::Exit { .. } | Item::Signal { .. } | Item::Access { .. } => {}
            Item::PathNode { id, parent, addr, count } => {
                if let Err(what) = self.tool_trie.node(id, parent, addr, count) {
                    self.damage(None, what.to_string());
                }
            }
            Item::OpenPath { tid, node } => self.tool_trie.open(tid, node),
            Item::PathsEnd { .. } => {
                self.tool_snapshot = None;
                self.replay_tool_trie();
            }
            Item::PathsSnapshot { .. } => self.tool_snapshot = Some(std::mem::take(&mut self.tool_trie)),
            Item::Entries(n) => self.stats.tool_entries = self.stats.tool_entries.saturating_add(n),
            Item::PathsGaveUp(addr) => self.stats.tool_gave_up = Some(addr),
            Item::Damage { offset, what } => {
                self.damage(Some(offset), what);
                // Superblocks may be missing here: end the one in progress and cut the paths.
                if let Some(s) = &mut self.current.superblocks {
                    s.reset(&mut self.code, &mut emit(&mut self.profiler, &mut self.recorder, &mut self.call_tracker));
                    repeated(&mut self.call_tracker, &self.code, s.take_repeats());
                }
                self.profiler.cut_thread();
            }
        }
    }

    fn damage(&mut self, offset: Option<u64>, what: String) {
        self.stats.stream_damage += 1;
        if self.stats.stream_damage_examples.len() < 5 {
            self.stats.stream_damage_examples.push((offset.unwrap_or(self.stats.stream_bytes), what));
        }
    }

    /// A trie of paths counted by the tool is complete: replay it (the open path of the
    /// thread that ran last waits for the end).
    fn replay_tool_trie(&mut self) {
        let previous = self.tool_open.take();
        self.tool_open = self.tool_trie.take_open(self.tid).map(|a| (self.tid, a));
        if let Some((_, addrs)) = previous {
            self.replay_open(&addrs, None);
        }
        let tid = self.tid;
        self.profiler.switch_thread(REPLAY_THREAD);
        let done = self.tool_trie.replay(&mut self.code, &mut self.profiler);
        self.profiler.switch_thread(tid);
        self.stats.superblocks = self.stats.superblocks.saturating_add(done.superblocks);
        self.stats.unexpected_superblock_cuts = self.stats.unexpected_superblock_cuts.saturating_add(done.unexpected_cuts);
        if done.lost_paths > 0 {
            self.damage(None, format!("{} paths counted by the tool lost a node of their trie", done.lost_paths));
        }
    }

    /// One path of superblocks, run once, to the faulting instruction when given.
    fn replay_open(&mut self, addrs: &[u64], fault: Option<u64>) {
        let tid = self.tid;
        self.profiler.switch_thread(REPLAY_THREAD);
        let mut s = SuperblockSplitter::new(VEX_MAX_INSNS);
        let profiler = &mut self.profiler;
        for &a in addrs {
            s.push(a, &mut self.code, &mut |code: &mut CodeMap, b, k| profiler.enter(b, k, &*code));
        }
        s.finish(fault, &mut self.code, &mut |code: &mut CodeMap, b, k| profiler.enter(b, k, &*code));
        self.profiler.cut_thread();
        self.profiler.switch_thread(tid);
        self.stats.superblocks = self.stats.superblocks.saturating_add(addrs.len() as u64);
        self.stats.unexpected_superblock_cuts += s.unexpected_cuts;
    }

    /// What the input has given so far, in its own units (superblocks, instructions or
    /// block events), for a progress bar.
    pub fn input_units(&self) -> u64 {
        // in the tool's paths mode superblocks arrive as counts, then as a replayed trie
        // (saturating: a replayed trie's counts come from the input, up to u64::MAX)
        self.stats.superblocks.max(self.stats.tool_entries).saturating_add(self.stats.instructions).saturating_add(self.stats.block_events)
    }

    /// Valgrind's own log of a run with kansoku's tool: only how the program ended matters
    /// (`Process terminating with default action of signal N` and the faulting `at 0x…`).
    pub fn feed_valgrind_log(&mut self, text: &[u8]) {
        for line in text.split(|&c| c == b'\n') {
            match parse_line(line) {
                LackeyLine::FatalSignal(sig) => {
                    self.stats.signal = Some(sig);
                    self.awaiting_fault = true;
                }
                LackeyLine::At(addr) if self.awaiting_fault => {
                    self.stats.fault_address = Some(addr);
                    self.awaiting_fault = false;
                }
                _ => {}
            }
        }
    }

    /// The input ended: flush superblocks and paths in progress; finish the recording.
    pub fn finish(&mut self) -> Result<(), RecordingError> {
        if let Some(mut d) = self.stream.take() {
            d.finish(&mut |item| self.tool_item(item));
            self.stats.stream_bytes = d.bytes;
        }
        if let Some(snapshot) = self.tool_snapshot.take() {
            // the program went on as another program (execve): its paths end there
            self.tool_trie = snapshot;
            self.replay_tool_trie();
        }
        // The faulting instruction started executing (the exact tracer records it too).
        let fault = self.stats.fault_address.map(|f| f.saturating_add(u64::from(self.code.insn(f).len.max(1))));
        if let Some((tid, addrs)) = self.tool_open.take() {
            self.replay_open(&addrs, fault.filter(|_| tid == self.tid));
        }
        if self.stats.tool_entries > 0 {
            // the tool's own count: it also counts the repetitions of rep string
            // instructions, which it keeps out of its paths (they make no block)
            self.stats.superblocks = self.stats.tool_entries;
        }
        let mut tids: Vec<u32> = self.parked.keys().copied().chain(std::iter::once(self.tid)).collect();
        tids.sort_unstable();
        tids.dedup();
        let last_tid = self.tid;
        for tid in tids {
            self.switch_thread(tid);
            if let Some(mut s) = self.current.superblocks.take() {
                s.finish(fault.filter(|_| tid == last_tid), &mut self.code, &mut emit(&mut self.profiler, &mut self.recorder, &mut self.call_tracker));
                repeated(&mut self.call_tracker, &self.code, s.take_repeats());
                self.stats.unexpected_superblock_cuts += s.unexpected_cuts;
            }
        }
        self.profiler.finish();
        if let Some(t) = &mut self.call_tracker {
            t.finish();
        }
        if let Some(r) = self.recorder.take() {
            let mut r = r;
            if let Some(sig) = self.stats.signal {
                r.write(&Event::Signal { signal: sig });
            }
            if let Some(exit) = self.stats.exit {
                r.write(&Event::Exit(exit));
            }
            r.finish()?;
        }
        Ok(())
    }

    /// Sets the observed program's end (from the process status, for live sources).
    pub fn set_exit(&mut self, exit: ExitStatus) {
        self.stats.exit = Some(exit);
        if let ExitStatus::Killed(sig) = exit {
            self.stats.signal.get_or_insert(sig);
        }
    }
}

/// The path analysis as the sink of every block source (`kansoku-probe::blocks`).
impl kansoku_core::feed::BlockSink for PathAnalysis {
    fn tool_stream(&mut self, bytes: &[u8]) {
        self.feed_tool_stream(bytes)
    }
    fn lackey_line(&mut self, line: &[u8]) {
        self.feed_lackey_line(line)
    }
    fn event(&mut self, event: &Event) {
        self.feed_event(event)
    }
    fn progress(&self) -> u64 {
        self.input_units()
    }
}
