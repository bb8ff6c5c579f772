//! Instruction costs of one run, as the profile viewers want them: per instruction (with
//! its source line), per function, per call arc (calls and inclusive cost) and per call
//! stack. The path table says which paths ran; this says where the instructions went.
//!
//! Calls, inclusive costs and stacks come from a shadow call stack per thread
//! ([`CallTracker`]) fed the same basic-block entries as the path profiler, with
//! Callgrind's rules (callgrind/bbcc.c, `setup_bbcc`), so its costs are Callgrind's:
//!
//! * the block after a block ending in a call (not a system call) starts a frame, except
//!   a call into `.plt`: Callgrind skips it (`--skip-plt=yes`), so a stub's instructions
//!   are its caller's and its jump out is the call;
//! * a jump starts a frame, marked as entered by a jump, when it enters a named symbol at
//!   its first instruction (a tail call), another object or another kind of section
//!   (Valgrind's `.text`, `.plt` or neither: a `.plt.got` stub is a function of its own,
//!   the jump out of it another); a jump into the middle of another function stays in the
//!   frame it leaves (glibc's `mempcpy` jumping into `memcpy`'s body is `mempcpy`'s cost),
//!   and a fall-through stays in Valgrind's block, so in its frame;
//! * a jump out of the lazy binder (`_dl_runtime_resolve*`) first ends the binder's frame
//!   (Callgrind's `pop_on_jump`): the function bound is called by the binder's caller;
//! * a return ends the frames entered by jumps and then the one frame entered by a call;
//!   the code returned to is the frame below's, whichever function holds it.
//!
//! A frame's function is the named symbol holding its entry; code without one (known by
//! an unwind entry only, or none) is named, as Callgrind names it, by the entry's offset
//! in its module (`module+0x…`), or outside a module's `.text` (object `???` for
//! Valgrind) by its runtime address (`0x…`). Callgrind also ends frames the stack
//! pointer has left (`longjmp`); the blocks do not carry it, so those stay open until a
//! return.
//!
//! An instruction's cost goes to the function of the frame on top when it runs, as
//! Callgrind charges a block to its context, not to the symbol holding its address.
//! Each repetition of a `rep` string instruction is one more execution of it (VEX runs
//! each element as a new entry of the instruction; Callgrind counts it so). Without a
//! tracker, per-instruction counts come from the block counts and the function holding
//! each block.
//!
//! Cost is counted only for blocks in the analysis' scope; blocks out of scope still move
//! the stack, so a library call between two program functions keeps its frame. Frames
//! still open when the stream ends (a program that calls `exit`) are closed then, with the
//! cost they had so far, as Callgrind closes them when it dumps.

use std::collections::HashMap;

use kansoku_binary::InstructionKind;
use serde::Serialize;

use crate::analysis::PathAnalysis;
use crate::code::{BlockId, CodeMap, SectionKind};
use crate::fxhash::FxHashMap;
use crate::timeline::CallSink;

/// Deepest shadow call stack followed; deeper calls are counted in the deepest frame.
const MAX_DEPTH: usize = 1 << 16;

/// Is a function a symbol Valgrind names code by: not one known only by its unwind entry
/// or as a stretch between functions (`module+0xaddress`), nor a PLT stub kansoku named
/// from its relocation (`memcpy@plt`; Valgrind has no symbol there).
fn named(name: &str) -> bool {
    let unnamed = name.rsplit_once("+0x").is_some_and(|(m, hex)| !m.is_empty() && !hex.is_empty() && hex.bytes().all(|c| c.is_ascii_hexdigit()));
    !unnamed && !name.ends_with("@plt")
}

/// The function Callgrind gives a frame entered at block `b`: the named symbol holding
/// it, else the entry itself (Callgrind names code without a symbol by the address of the
/// block a frame entered it at).
fn frame_owner(code: &CodeMap, b: BlockId) -> Owner {
    match code.block(b).function {
        Some(f) if named(&code.functions()[f as usize].name) => Owner::Function(f),
        _ => Owner::Entry(b),
    }
}

/// Does block `b` start at a named symbol's first instruction (Callgrind's `is_entry`)?
fn is_entry(code: &CodeMap, b: BlockId) -> bool {
    let info = code.block(b);
    info.function.is_some_and(|f| {
        let f = &code.functions()[f as usize];
        f.base == info.addr && named(&f.name)
    })
}

/// The object Callgrind puts a block in: its module when in the module's `.text`, else
/// none (`???`).
fn object_of(code: &CodeMap, b: BlockId) -> Option<usize> {
    let info = code.block(b);
    (info.section == SectionKind::Text).then_some(info.module).flatten()
}

/// Is the jump from block `from` to block `to` a call for Callgrind (its call emulation,
/// `setup_bbcc`): into a named symbol's first instruction, or into another object or
/// section kind.
fn emulated_call(code: &CodeMap, from: BlockId, to: BlockId) -> bool {
    is_entry(code, to) || code.block(from).section != code.block(to).section || object_of(code, from) != object_of(code, to)
}

/// Does a jump out of block `b` leave the lazy binder (`_dl_runtime_resolve*`)? Callgrind
/// pops the binder's frame then (`pop_on_jump`): the function it jumps to is called by
/// the binder's caller.
fn pops_on_jump(code: &CodeMap, b: BlockId) -> bool {
    code.block(b).function.is_some_and(|f| code.functions()[f as usize].name.starts_with("_dl_runtime_resolve"))
}

/// Who owns a block for the call graph: a function, or code outside every known function
/// of a module (or of no module).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
enum Owner {
    Function(u32),
    /// Code no named symbol holds, by the block a frame entered it at.
    Entry(BlockId),
    Module(usize),
    Unknown,
}

fn owner_of(code: &CodeMap, b: BlockId) -> Owner {
    let info = code.block(b);
    match (info.function, info.module) {
        (Some(f), _) => Owner::Function(f),
        (None, Some(m)) => Owner::Module(m),
        (None, None) => Owner::Unknown,
    }
}

#[derive(Clone, Copy)]
struct Frame {
    /// Node of the call tree this frame's cost goes to.
    node: u32,
    owner: Owner,
    /// The caller's owner and the block whose last instruction made the call (None for
    /// the outermost frame of a thread).
    arc: Option<(Owner, BlockId)>,
    by_jump: bool,
    /// The thread's in-scope instructions when the frame started.
    entered_at: u64,
}

#[derive(Default)]
struct ThreadStack {
    frames: Vec<Frame>,
    prev: Option<BlockId>,
    instructions: u64,
    /// A `.plt` stub was entered by a call (from this block) and no frame was pushed
    /// since: the next frame entered by a jump is that call's.
    stub_called: Option<BlockId>,
}

#[derive(Default, Clone, Copy)]
struct ArcCost {
    calls: u64,
    inclusive: u64,
}

/// The shadow call stacks of one run, and what they accumulated.
#[derive(Default)]
pub struct CallTracker {
    /// Call tree: (parent node or u32::MAX for a root, owner) per node.
    nodes: Vec<(u32, Owner)>,
    node_index: FxHashMap<(u32, Owner), u32>,
    /// In-scope instructions executed in each node's frame itself.
    self_cost: Vec<u64>,
    arcs: FxHashMap<(Owner, BlockId, Owner), ArcCost>,
    current: ThreadStack,
    tid: u32,
    others: HashMap<u32, ThreadStack>,
    /// Instructions of every block entered so far, all threads, in scope or not: the
    /// timeline's clock where a trace has no time stamps.
    clock: u64,
    /// Where calls and marker hits go as they happen, when a timeline is asked for.
    timeline: Option<TimelineOut>,
    /// In-scope entries of each block per owner of the frame it ran in.
    entries: FxHashMap<(Owner, BlockId), u64>,
    /// In-scope repetitions of `rep` instructions (runtime address) per owner of the frame.
    repeats: FxHashMap<(Owner, u64), u64>,
}

/// The timeline's sink, the names it was given and the threads it was told of.
struct TimelineOut {
    sink: Box<dyn CallSink>,
    names: FxHashMap<Owner, String>,
    threads: std::collections::HashSet<u32>,
}

impl TimelineOut {
    /// Tells the sink of thread `tid` the first time it appears.
    fn thread(&mut self, tid: u32, code: &CodeMap) {
        if self.threads.insert(tid) {
            self.sink.thread(tid, code.program_path());
        }
    }
}

impl CallTracker {
    /// A tracker with no thread, no call and no cost yet.
    pub fn new() -> Self {
        Self::default()
    }

    fn node(&mut self, parent: u32, owner: Owner) -> u32 {
        if let Some(&n) = self.node_index.get(&(parent, owner)) {
            return n;
        }
        let n = self.nodes.len() as u32;
        self.nodes.push((parent, owner));
        self.self_cost.push(0);
        self.node_index.insert((parent, owner), n);
        n
    }

    /// Following blocks belong to thread `tid`.
    pub(crate) fn switch_thread(&mut self, tid: u32) {
        if tid == self.tid {
            return;
        }
        let next = self.others.remove(&tid).unwrap_or_default();
        let old = std::mem::replace(&mut self.current, next);
        self.others.insert(self.tid, old);
        self.tid = tid;
    }

    fn push(&mut self, owner: Owner, arc: Option<(Owner, BlockId)>, by_jump: bool, code: &CodeMap) {
        if let Some(t) = &mut self.timeline {
            t.thread(self.tid, code);
            let name = t.names.entry(owner).or_insert_with(|| owner_name(code, owner));
            t.sink.begin(self.tid, self.clock, name);
        }
        let parent = self.current.frames.last().map_or(u32::MAX, |f| f.node);
        let node = self.node(parent, owner);
        if let Some((caller, site)) = arc {
            self.arcs.entry((caller, site, owner)).or_default().calls += 1;
        }
        self.current.frames.push(Frame { node, owner, arc, by_jump, entered_at: self.current.instructions });
    }

    fn pop(&mut self) -> Option<Frame> {
        let f = self.current.frames.pop()?;
        if let Some(t) = &mut self.timeline {
            t.sink.end(self.tid, self.clock);
        }
        if let Some((caller, site)) = f.arc {
            self.arcs.entry((caller, site, f.owner)).or_default().inclusive += self.current.instructions - f.entered_at;
        }
        Some(f)
    }

    /// One executed basic block; `prev_end` is the kind of the previous block's last instruction.
    pub fn enter(&mut self, b: BlockId, prev_end: InstructionKind, code: &CodeMap) {
        let prev = self.current.prev.replace(b);
        match (prev, self.current.frames.last().copied()) {
            (Some(p), Some(top)) => {
                let call = match prev_end {
                    InstructionKind::Return => {
                        while self.current.frames.last().is_some_and(|f| f.by_jump) {
                            self.pop();
                        }
                        self.pop();
                        if self.current.frames.is_empty() {
                            // a return the stack did not see the call of
                            self.push(frame_owner(code, b), None, false, code);
                        }
                        None
                    }
                    InstructionKind::Call if !code.block(p).ends_in_syscall => Some(false),
                    // a fall-through stays in Valgrind's block: no new context
                    InstructionKind::Other => None,
                    _ => emulated_call(code, p, b).then_some(true),
                };
                match call {
                    // a call into `.plt` (Callgrind skips it): the caller's frame goes on, and
                    // the stub's jump out is the call
                    Some(by_jump) if code.block(b).section == SectionKind::Plt => {
                        if !by_jump {
                            self.current.stub_called = Some(p);
                        }
                    }
                    Some(by_jump) if self.current.frames.len() < MAX_DEPTH => {
                        let (mut arc, mut by_jump) = ((top.owner, p), by_jump);
                        if let Some(site) = self.current.stub_called.take().filter(|_| by_jump) {
                            // the first frame out of a called stub (directly, or through the
                            // lazy binder's PLT0) stands for that call
                            (arc, by_jump) = ((top.owner, site), false);
                        }
                        if by_jump && pops_on_jump(code, p) && self.current.frames.len() > 1 {
                            let binder = self.pop().expect("a frame");
                            if let Some(a) = binder.arc {
                                (arc, by_jump) = (a, binder.by_jump);
                            }
                        }
                        self.push(frame_owner(code, b), Some(arc), by_jump, code);
                    }
                    _ => {}
                }
            }
            _ => {
                if self.current.frames.is_empty() {
                    self.push(frame_owner(code, b), None, false, code);
                }
            }
        }
        let info = code.block(b);
        self.clock += u64::from(info.instructions);
        if info.in_program {
            let n = u64::from(info.instructions);
            self.current.instructions += n;
            if let Some(top) = self.current.frames.last() {
                self.self_cost[top.node as usize] += n;
                *self.entries.entry((top.owner, b)).or_insert(0) += 1;
            }
        }
    }

    /// `count` more executions of the `rep` instruction at `addr`, which ended the block
    /// this thread entered last.
    pub fn repeat(&mut self, addr: u64, count: u64, code: &CodeMap) {
        // The costs count each repetition (callgrind's Ir); the timeline's clock does not:
        // it is the recorded trace's instruction index, where a `rep` instruction is one
        // instruction, so calls and marker hits line up with the trace they came from.
        let Some(b) = self.current.prev else { return };
        if !code.block(b).in_program {
            return;
        }
        self.current.instructions += count;
        if let Some(top) = self.current.frames.last() {
            self.self_cost[top.node as usize] += count;
            *self.repeats.entry((top.owner, addr)).or_insert(0) += count;
        }
    }

    /// Tell `sink` of every call as its frame is pushed and popped, and of marker hits
    /// ([`PathAnalysis::stream_call_timeline`]).
    pub(crate) fn stream_timeline(&mut self, sink: Box<dyn CallSink>) {
        self.timeline = Some(TimelineOut { sink, names: FxHashMap::default(), threads: Default::default() });
    }

    /// The current thread entered the marker (for the timeline).
    pub fn marker(&mut self, code: &CodeMap) {
        if let Some(t) = &mut self.timeline {
            t.thread(self.tid, code);
            t.sink.marker(self.tid, self.clock);
        }
    }

    /// The stream ended: every thread's open frames are closed with their cost so far.
    pub fn finish(&mut self) {
        let mut tids: Vec<u32> = self.others.keys().copied().collect();
        tids.push(self.tid);
        tids.sort_unstable();
        for t in tids {
            self.switch_thread(t);
            while self.pop().is_some() {}
            self.current.prev = None;
        }
        if let Some(t) = &mut self.timeline {
            t.sink.finish(self.clock);
        }
    }
}

/// One instruction's executions.
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
pub struct InstructionCost {
    /// Link-time address (as in the module's file; the runtime address outside modules).
    pub address: u64,
    /// Source file (as DWARF names it) and line, when the module has line information.
    pub file: Option<String>,
    /// Source line (1-based), when the module has line information.
    pub line: Option<u32>,
    /// How often the instruction ran (callgrind's `Ir`).
    pub executions: u64,
}

/// One function (or stretch of code outside known functions) of the run.
#[derive(Clone, Debug, Serialize)]
pub struct FunctionCost {
    /// Function name (demangled), or `module+0xoffset` / `0xaddress` for code outside known functions.
    pub name: String,
    /// Path of the module holding it, when known.
    pub module: Option<String>,
    /// Its executed in-scope instructions, by address. Empty for a function that only
    /// appears on a call stack (out of scope, or never itself executing).
    pub instructions: Vec<InstructionCost>,
    /// Sum of `executions` over `instructions`: the function's self cost.
    pub self_instructions: u64,
}

/// Calls from one call site to one function, with the instructions they executed
/// (inclusive: the callee and everything it called, in scope).
#[derive(Clone, Debug, Serialize)]
pub struct CallCost {
    /// Index into [`CostProfile::functions`].
    pub caller: usize,
    /// Link-time address of the calling (or jumping) instruction.
    pub site: u64,
    /// Source file of the call site, as DWARF names it.
    pub site_file: Option<String>,
    /// Source line of the call site.
    pub site_line: Option<u32>,
    /// Index into [`CostProfile::functions`] of the function called.
    pub callee: usize,
    /// Address of the callee's entry (link-time) and its source line.
    pub callee_entry: u64,
    /// Source line of the callee's entry.
    pub callee_line: Option<u32>,
    /// How many times the site called the callee.
    pub calls: u64,
    /// In-scope instructions those calls executed, callee and everything below it included.
    pub inclusive: u64,
    /// Entered by a jump (tail call, PLT stub) rather than a call instruction.
    pub by_jump: bool,
}

/// One distinct call stack with the in-scope instructions executed in its innermost frame.
#[derive(Clone, Debug, Serialize)]
pub struct StackCost {
    /// Indexes into [`CostProfile::functions`], outermost first.
    pub frames: Vec<usize>,
    /// In-scope instructions executed with exactly this stack.
    pub instructions: u64,
}

/// Where the instructions of a run went: what the callgrind, pprof and collapsed-stack
/// exports write.
#[derive(Clone, Debug, Serialize)]
pub struct CostProfile {
    /// The main program's path, when known.
    pub program: Option<String>,
    /// Every function with a cost or on a call stack ([`CallCost`] and [`StackCost`] index it).
    pub functions: Vec<FunctionCost>,
    /// Empty when no call tracker ran.
    pub calls: Vec<CallCost>,
    /// Empty when no call tracker ran.
    pub stacks: Vec<StackCost>,
    /// In-scope instructions executed (the sum of every function's self cost).
    pub total_instructions: u64,
}

/// The name the exports give an owner: its function's, or the stretch it lies in.
fn owner_name(code: &CodeMap, owner: Owner) -> String {
    match owner {
        Owner::Function(f) => code.functions()[f as usize].name.clone(),
        // Callgrind's `0x…` name: the offset in the module, or outside a module's `.text`
        // (object `???` for Valgrind) the runtime address
        Owner::Entry(b) => {
            let info = code.block(b);
            match (object_of(code, b), info.link) {
                (Some(m), Some(link)) => format!("{}+{link:#x}", code.symbolizer.modules()[m].short_name()),
                _ => format!("{:#018x}", info.addr),
            }
        }
        Owner::Module(m) => format!("{} (outside known functions)", code.symbolizer.modules()[m].short_name()),
        Owner::Unknown => "(code outside every module)".to_string(),
    }
}

struct Names {
    index: HashMap<Owner, usize>,
    functions: Vec<FunctionCost>,
}

impl Names {
    fn get(&mut self, code: &CodeMap, owner: Owner) -> usize {
        if let Some(&i) = self.index.get(&owner) {
            return i;
        }
        let modules = code.symbolizer.modules();
        let module = match owner {
            Owner::Function(f) => Some(modules[code.functions()[f as usize].module].path.clone()),
            Owner::Entry(b) => object_of(code, b).map(|m| modules[m].path.clone()),
            Owner::Module(m) => Some(modules[m].path.clone()),
            Owner::Unknown => None,
        };
        let name = owner_name(code, owner);
        let i = self.functions.len();
        self.functions.push(FunctionCost { name, module, instructions: Vec::new(), self_instructions: 0 });
        self.index.insert(owner, i);
        i
    }
}

impl PathAnalysis {
    /// Link-time address of a runtime address (the runtime address outside modules).
    fn link_of(&mut self, addr: u64) -> u64 {
        self.code.symbolizer.resolve(addr).map_or(addr, |r| r.link_address)
    }

    /// Where the instructions went: per instruction and function (from the call tracker's
    /// frames when the analysis ran one, else from the block counts), per call arc and per
    /// stack (from the call tracker).
    pub fn costs(&mut self) -> CostProfile {
        let mut names = Names { index: HashMap::new(), functions: Vec::new() };
        // Per owner: runtime address → executions.
        let mut per_owner: HashMap<Owner, FxHashMap<u64, u64>> = HashMap::new();
        fn add(per_owner: &mut HashMap<Owner, FxHashMap<u64, u64>>, code: &mut CodeMap, owner: Owner, b: BlockId, count: u64) {
            let map = per_owner.entry(owner).or_default();
            for a in code.block_instructions(b) {
                *map.entry(a).or_insert(0) += count;
            }
        }
        match &self.call_tracker {
            // Callgrind's attribution: to the frame each block ran in.
            Some(t) => {
                let mut entries: Vec<((Owner, BlockId), u64)> = t.entries.iter().map(|(k, v)| (*k, *v)).collect();
                entries.sort_unstable();
                for ((owner, b), count) in entries {
                    add(&mut per_owner, &mut self.code, owner, b, count);
                }
                for (&(owner, a), &count) in &t.repeats {
                    *per_owner.entry(owner).or_default().entry(a).or_insert(0) += count;
                }
            }
            None => {
                for b in 0..self.code.blocks().len() as BlockId {
                    let count = self.profiler.block_counts.get(b as usize).copied().unwrap_or(0);
                    if count == 0 || !self.code.block(b).in_program {
                        continue;
                    }
                    let owner = owner_of(&self.code, b);
                    add(&mut per_owner, &mut self.code, owner, b, count);
                }
            }
        }
        let mut owners: Vec<Owner> = per_owner.keys().copied().collect();
        owners.sort();
        let mut total = 0;
        for owner in owners {
            let i = names.get(&self.code, owner);
            let mut addrs: Vec<(u64, u64)> = per_owner[&owner].iter().map(|(&a, &c)| (a, c)).collect();
            addrs.sort_unstable();
            let mut instructions = Vec::with_capacity(addrs.len());
            for (a, executions) in addrs {
                let source = self.code.symbolizer.source_line(a);
                instructions.push(InstructionCost {
                    address: self.link_of(a),
                    file: source.as_ref().map(|s| s.file.clone()),
                    line: source.map(|s| s.line),
                    executions,
                });
            }
            let f = &mut names.functions[i];
            f.self_instructions = instructions.iter().map(|x| x.executions).sum();
            total += f.self_instructions;
            f.instructions = instructions;
        }
        let mut calls = Vec::new();
        let mut stacks = Vec::new();
        if let Some(tracker) = self.call_tracker.take() {
            let mut arcs: Vec<((Owner, BlockId, Owner), ArcCost)> = tracker.arcs.iter().map(|(k, v)| (*k, *v)).collect();
            arcs.sort_unstable_by_key(|(k, _)| *k);
            for ((caller, site_block, callee), cost) in arcs {
                if cost.inclusive == 0 {
                    continue;
                }
                let site = self.code.block_instructions(site_block).last().copied().unwrap_or(self.code.block(site_block).addr);
                let by_jump = !matches!(self.code.block(site_block).terminator, InstructionKind::Call);
                let source = self.code.symbolizer.source_line(site);
                let callee_entry = match callee {
                    Owner::Function(f) => self.code.functions()[f as usize].base,
                    Owner::Entry(b) => self.code.block(b).addr,
                    _ => site,
                };
                calls.push(CallCost {
                    caller: names.get(&self.code, caller),
                    site: self.link_of(site),
                    site_file: source.as_ref().map(|s| s.file.clone()),
                    site_line: source.map(|s| s.line),
                    callee: names.get(&self.code, callee),
                    callee_entry: self.link_of(callee_entry),
                    callee_line: self.code.symbolizer.source_line(callee_entry).map(|s| s.line),
                    calls: cost.calls,
                    inclusive: cost.inclusive,
                    by_jump,
                });
            }
            for (n, &cost) in tracker.self_cost.iter().enumerate() {
                if cost == 0 {
                    continue;
                }
                let mut frames = Vec::new();
                let mut at = n as u32;
                while at != u32::MAX {
                    let (parent, owner) = tracker.nodes[at as usize];
                    frames.push(names.get(&self.code, owner));
                    at = parent;
                }
                frames.reverse();
                stacks.push(StackCost { frames, instructions: cost });
            }
            self.call_tracker = Some(tracker);
        }
        CostProfile { program: self.code.program_path().map(str::to_string), functions: names.functions, calls, stacks, total_instructions: total }
    }
}
