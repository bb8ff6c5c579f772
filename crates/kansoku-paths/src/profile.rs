//! The seed's path algorithm: cut the block sequence at back edges (and, by mode, at calls
//! and returns), look each finished path up in a hash table, count it or insert it.

use std::collections::HashMap;
use std::rc::Rc;

use kansoku_binary::InstructionKind;
use serde::Serialize;

use crate::code::{BlockFacts, BlockId};
use crate::fxhash::FxHashMap;

/// What calls and returns do to paths.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum CallMode {
    /// The seed's first mode: cut at calls and returns; a subroutine's paths hold only its blocks.
    Split,
    /// The seed's second mode: calls do not cut (paths continue into the callee); returns cut.
    Through,
    /// One path in progress per stack frame: a call suspends the caller's path, the callee's
    /// path ends at its return, and the caller's path resumes after the call.
    Frames,
}

/// How back edges are recognised.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum BackEdgeMode {
    /// The seed's heuristic: a branch whose target block starts at or below the start of the
    /// block it leaves (at, so that a one-block loop is cut too).
    Address,
    /// The CFG's loop back edges: the target dominates the source.
    Loops,
}

/// Paths stored once, counted many times. Memory grows with the number of distinct paths
/// (and their lengths), never with the length of the run.
///
/// A path in progress is a node of a trie of the paths seen so far: adding a block moves
/// to a child node, and a finished path is counted at its node, so a path is never hashed
/// or compared whole. Each node remembers the child it went to last: the blocks of a run
/// repeat, so the next block is nearly always that one and needs no hash lookup either.
/// Most nodes have one child (the blocks of a long path): a node's only child is its last
/// one, so a node with fewer than two children never looks in the hash table, which holds
/// only the children of nodes with two or more; the empty path's children (every path's
/// first block) are in an array by block id.
#[derive(Default)]
pub struct PathTable {
    nodes: Vec<PathNode>,
    /// Children of nodes with two or more (see [`PathNode::many`]).
    children: FxHashMap<(TrieNode, BlockId), TrieNode>,
    /// Children of the empty path, by block id (0: none yet; node 0 is no one's child).
    first: Vec<TrieNode>,
    paths: Vec<Rc<[BlockId]>>,
    counts: Vec<u64>,
}

/// A node of the path trie (an index into its nodes): 0 is the empty path.
type TrieNode = u32;
const NO_PATH: u32 = u32::MAX;

#[derive(Clone, Copy)]
struct PathNode {
    parent: TrieNode,
    block: BlockId,
    /// The path's id once it has been counted.
    path: u32,
    /// The last child taken: (block, node); block `BlockId::MAX` while the node has none.
    last_child: (BlockId, TrieNode),
    /// The node has two children or more: its children are in the hash table (with one, the
    /// child is `last_child`).
    many: bool,
}

impl PathTable {
    /// The empty path.
    pub(crate) const EMPTY: TrieNode = 0;

    fn root(&mut self) {
        if self.nodes.is_empty() {
            self.nodes.push(PathNode { parent: 0, block: BlockId::MAX, path: NO_PATH, last_child: (BlockId::MAX, 0), many: false });
        }
    }

    /// The path `node` followed by block `b`.
    #[inline]
    pub fn extend(&mut self, node: TrieNode, b: BlockId) -> TrieNode {
        self.root();
        let n = &self.nodes[node as usize];
        if n.last_child.0 == b {
            return n.last_child.1;
        }
        if node == Self::EMPTY {
            return self.first_block(b);
        }
        let (last, many) = (n.last_child, n.many);
        let child = if many {
            match self.children.get(&(node, b)) {
                Some(&c) => c,
                None => {
                    let c = self.new_node(node, b);
                    self.children.insert((node, b), c);
                    c
                }
            }
        } else {
            // no child yet, or one (`last`) that is not `b`: `b`'s node is new
            let c = self.new_node(node, b);
            if last.0 != BlockId::MAX {
                self.children.insert((node, last.0), last.1);
                self.children.insert((node, b), c);
                self.nodes[node as usize].many = true;
            }
            c
        };
        self.nodes[node as usize].last_child = (b, child);
        child
    }

    /// The path of the one block `b`.
    #[inline]
    fn first_block(&mut self, b: BlockId) -> TrieNode {
        if self.first.len() <= b as usize {
            self.first.resize(b as usize + 1, 0);
        }
        let mut c = self.first[b as usize];
        if c == 0 {
            c = self.new_node(Self::EMPTY, b);
            self.first[b as usize] = c;
        }
        self.nodes[Self::EMPTY as usize].last_child = (b, c);
        c
    }

    #[inline]
    fn new_node(&mut self, parent: TrieNode, b: BlockId) -> TrieNode {
        let c = self.nodes.len() as TrieNode;
        self.nodes.push(PathNode { parent, block: b, path: NO_PATH, last_child: (BlockId::MAX, 0), many: false });
        c
    }

    /// Counts one execution of the path ending at `node` (not the empty path); returns its id.
    #[inline]
    pub fn count_node(&mut self, node: TrieNode) -> u32 {
        self.count_node_by(node, 1)
    }

    /// Counts `times` executions of the path ending at `node` (not the empty path).
    #[inline]
    pub(crate) fn count_node_by(&mut self, node: TrieNode, times: u64) -> u32 {
        let id = self.nodes[node as usize].path;
        if id != NO_PATH {
            let c = &mut self.counts[id as usize];
            *c = c.saturating_add(times);
            return id;
        }
        let mut blocks = Vec::new();
        let mut at = node;
        while at != Self::EMPTY {
            blocks.push(self.nodes[at as usize].block);
            at = self.nodes[at as usize].parent;
        }
        blocks.reverse();
        let id = self.paths.len() as u32;
        self.paths.push(Rc::from(blocks));
        self.counts.push(times);
        self.nodes[node as usize].path = id;
        id
    }

    /// Counts one execution of `path` (not empty); returns its id.
    pub fn count(&mut self, path: &[BlockId]) -> u32 {
        let node = path.iter().fold(Self::EMPTY, |n, &b| self.extend(n, b));
        self.count_node(node)
    }

    /// Number of distinct paths.
    pub fn len(&self) -> usize {
        self.paths.len()
    }

    /// No path counted yet.
    pub fn is_empty(&self) -> bool {
        self.paths.is_empty()
    }

    /// The blocks of path `id`, in execution order.
    pub fn path(&self, id: u32) -> &[BlockId] {
        &self.paths[id as usize]
    }

    /// How many times path `id` ran.
    pub(crate) fn count_of(&self, id: u32) -> u64 {
        self.counts[id as usize]
    }

    /// (path, count) in id (first-seen) order.
    pub fn iter(&self) -> impl Iterator<Item = (&[BlockId], u64)> {
        self.paths.iter().map(|p| &p[..]).zip(self.counts.iter().copied())
    }

    /// Block ids stored in all paths (the memory the table holds, in block ids).
    pub fn stored_blocks(&self) -> usize {
        self.paths.iter().map(|p| p.len()).sum()
    }
}

/// One thread's paths in progress: nodes of the [`PathTable`] trie. Cloned as a cursor when
/// a trie of superblock paths is replayed ([`crate::replay`]).
#[derive(Default, Clone)]
pub(crate) struct ThreadState {
    path: TrieNode,
    frames: Vec<TrieNode>,
    prev: Option<BlockId>,
}

/// Deepest call stack followed in `frames` mode; deeper frames are cut instead of kept.
const MAX_FRAMES: usize = 1 << 16;

/// The path profiler: feed it basic-block entries, read the path table.
pub struct PathProfiler {
    /// Where paths are cut at calls and returns.
    pub calls: CallMode,
    /// Which branches cut paths as back edges.
    pub back_edges: BackEdgeMode,
    /// The distinct paths counted so far.
    pub paths: PathTable,
    state: ThreadState,
    tid: u32,
    others: HashMap<u32, ThreadState>,
    /// Executions of each block (indexed by block id), in scope or not.
    pub block_counts: Vec<u64>,
    /// Block entries seen, and those kept in paths.
    pub blocks_seen: u64,
    /// Block entries kept in paths (in [`crate::Scope`]).
    pub blocks_in_scope: u64,
    /// Transitions between consecutive blocks, when asked for (pictures).
    pub edges: Option<FxHashMap<(BlockId, BlockId), u64>>,
    /// How many executions each block entered stands for: 1 for a stream, a path's count
    /// when the distinct paths counted by kansoku's Valgrind tool are replayed.
    weight: u64,
}

impl PathProfiler {
    /// An empty profiler cutting paths as `calls` and `back_edges` say.
    pub fn new(calls: CallMode, back_edges: BackEdgeMode) -> Self {
        PathProfiler {
            calls,
            back_edges,
            paths: PathTable::default(),
            state: ThreadState::default(),
            tid: 0,
            others: HashMap::new(),
            block_counts: Vec::new(),
            blocks_seen: 0,
            blocks_in_scope: 0,
            edges: None,
            weight: 1,
        }
    }

    /// The following blocks stand for `weight` executions each (see [`crate::replay`]).
    pub(crate) fn set_weight(&mut self, weight: u64) {
        self.weight = weight;
    }

    /// The current thread's paths in progress (to come back to them with [`Self::set_cursor`]).
    pub(crate) fn cursor(&self) -> ThreadState {
        self.state.clone()
    }

    /// Makes `state` (from [`Self::cursor`]) the current thread's paths in progress.
    pub(crate) fn set_cursor(&mut self, state: ThreadState) {
        self.state = state;
    }

    /// Also count block-to-block transitions (for the CFG picture).
    pub fn track_edges(&mut self) {
        self.edges = Some(FxHashMap::default());
    }

    #[inline]
    fn cut(paths: &mut PathTable, path: &mut TrieNode, weight: u64) {
        if *path != PathTable::EMPTY {
            paths.count_node_by(*path, weight);
            *path = PathTable::EMPTY;
        }
    }

    /// Following blocks belong to thread `tid` (each thread has its own paths in progress).
    pub(crate) fn switch_thread(&mut self, tid: u32) {
        if tid == self.tid {
            return;
        }
        let next = self.others.remove(&tid).unwrap_or_default();
        let old = std::mem::replace(&mut self.state, next);
        self.others.insert(self.tid, old);
        self.tid = tid;
    }

    /// One executed basic block; `prev_end` is the kind of the previous block's last instruction.
    #[inline]
    pub fn enter(&mut self, b: BlockId, prev_end: InstructionKind, facts: &impl BlockFacts) {
        let w = self.weight;
        self.blocks_seen = self.blocks_seen.saturating_add(w);
        if self.block_counts.len() <= b as usize {
            self.block_counts.resize(b as usize + 1, 0);
        }
        let c = &mut self.block_counts[b as usize];
        *c = c.saturating_add(w);
        let st = &mut self.state;
        if let Some(p) = st.prev {
            if let Some(edges) = &mut self.edges {
                let e = edges.entry((p, b)).or_insert(0);
                *e = e.saturating_add(w);
            }
            match prev_end {
                InstructionKind::Jump | InstructionKind::ConditionalJump => {
                    let back = match self.back_edges {
                        BackEdgeMode::Address => facts.addr(b) <= facts.addr(p),
                        BackEdgeMode::Loops => facts.is_loop_back_edge(p, b),
                    };
                    if back {
                        Self::cut(&mut self.paths, &mut st.path, w);
                    }
                }
                InstructionKind::Call => match self.calls {
                    CallMode::Split => Self::cut(&mut self.paths, &mut st.path, w),
                    CallMode::Through => {}
                    // A system call is a "call" for our decoder, but the kernel comes back
                    // to the next instruction without a `ret`: a frame pushed here would
                    // never be popped, and the caller's path would be lost under it.
                    CallMode::Frames if facts.ends_in_syscall(p) => {}
                    CallMode::Frames => {
                        if st.frames.len() < MAX_FRAMES {
                            st.frames.push(std::mem::replace(&mut st.path, PathTable::EMPTY));
                        } else {
                            Self::cut(&mut self.paths, &mut st.path, w);
                        }
                    }
                },
                InstructionKind::Return => {
                    Self::cut(&mut self.paths, &mut st.path, w);
                    if self.calls == CallMode::Frames {
                        if let Some(caller) = st.frames.pop() {
                            st.path = caller;
                        }
                    }
                }
                InstructionKind::Other | InstructionKind::Interrupt => {}
            }
        }
        if facts.in_scope(b) {
            self.blocks_in_scope = self.blocks_in_scope.saturating_add(w);
            st.path = self.paths.extend(st.path, b);
        }
        st.prev = Some(b);
    }

    /// Cuts every path in progress (the current thread's, or all at the end of the stream):
    /// the seed writes the paths in progress at exit too.
    pub(crate) fn cut_thread(&mut self) {
        let w = self.weight;
        let st = &mut self.state;
        Self::cut(&mut self.paths, &mut st.path, w);
        while let Some(mut f) = st.frames.pop() {
            Self::cut(&mut self.paths, &mut f, w);
        }
        st.prev = None;
    }

    /// Ends the stream: every thread's paths in progress are counted.
    pub fn finish(&mut self) {
        self.cut_thread();
        let tids: Vec<u32> = self.others.keys().copied().collect();
        for t in tids {
            self.switch_thread(t);
            self.cut_thread();
        }
    }
}
