//! Paths counted inside kansoku's Valgrind tool (`--paths=split|through`, issue 11): the
//! tool keeps a trie of the superblock sequences between its cuts and writes it at the end
//! instead of every superblock entry. Here the trie is replayed through the same
//! [`SuperblockSplitter`] and [`PathProfiler`] as the stream, each trie edge once, weighted
//! by the number of tool paths through it.
//!
//! Why the result is the stream's: the tool cuts only where the profiler's rule cuts too
//! (see the tool's source), so no profiler path spans two tool paths, and the profiler's
//! state at a tool cut is "no path in progress" either way. The splitter needs one entry of
//! lookahead: the blocks of superblock `x` are emitted when its successor arrives, so they
//! are emitted on each edge `x -> c` with the weight of `c`'s subtree, and once more with
//! `x`'s own count for the paths that end at `x` (no successor: the superblock ran to its
//! end, as the tool's cut rule guarantees).

use crate::code::CodeMap;
use crate::normalize::{SuperblockSplitter, VEX_MAX_INSNS};
use crate::profile::{PathProfiler, ThreadState};

/// Node ids a trie may use: the tool writes its trie out at 2^22 nodes at most (ids below
/// that), so a hostile id costs at most that many 24-byte nodes.
const MAX_NODES: u32 = 1 << 22;
/// The deepest path the tool keeps (it gives up beyond, see its source): a deeper node is
/// damage, and the walk's stack stays within this many frames.
const MAX_DEPTH: usize = 1 << 16;

/// What is wrong with a path node record of the tool's trie (the node is left out).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum TrieNodeError {
    /// The node's id is not above the last one's.
    #[error("path node {id} comes after node {last}: ids must grow")]
    IdsMustGrow {
        /// The record's node id.
        id: u32,
        /// The id of the node before it.
        last: u32,
    },
    /// The node's id is beyond what the tool writes in one trie.
    #[error("path node {id}: the tool writes at most {MAX_NODES} nodes a trie")]
    TooManyNodes {
        /// The record's node id.
        id: u32,
    },
    /// The node's parent does not come before it.
    #[error("path node {id} names node {parent} as its parent: parents come first")]
    ParentAfterChild {
        /// The record's node id.
        id: u32,
        /// The parent it names.
        parent: u32,
    },
}

#[derive(Clone, Copy)]
struct Node {
    parent: u32,
    addr: u64,
    count: u64,
    /// A node the stream lost (a damaged frame): its subtree cannot be replayed.
    missing: bool,
}

/// One trie of the tool, as its records arrive.
#[derive(Default)]
pub struct ToolTrie {
    nodes: Vec<Node>,
    open: Vec<(u32, u32)>,
}

/// What replaying a trie did.
#[derive(Debug, Default)]
pub struct Replayed {
    /// Superblock entries the trie stands for (a path of k superblocks counts k each time).
    pub superblocks: u64,
    /// Paths that could not be replayed because a node on them was lost.
    pub lost_paths: u64,
    /// Superblocks that ended where neither a transfer nor the VEX limit explains (as [`crate::InputStats::unexpected_superblock_cuts`]).
    pub unexpected_cuts: u64,
}

impl ToolTrie {
    /// A node record; an error says what is wrong with it (the node is then left out).
    pub fn node(&mut self, id: u32, parent: u32, addr: u64, count: u64) -> Result<(), TrieNodeError> {
        if self.nodes.is_empty() {
            self.nodes.push(Node { parent: 0, addr: 0, count: 0, missing: false });
        }
        let next = self.nodes.len() as u32;
        if id < next {
            return Err(TrieNodeError::IdsMustGrow { id, last: next - 1 });
        }
        if id >= MAX_NODES {
            return Err(TrieNodeError::TooManyNodes { id });
        }
        if parent >= id {
            return Err(TrieNodeError::ParentAfterChild { id, parent });
        }
        // nodes skipped by a damaged frame
        self.nodes.resize(id as usize, Node { parent: 0, addr: 0, count: 0, missing: true });
        self.nodes.push(Node { parent, addr, count, missing: false });
        Ok(())
    }

    /// Thread `tid` ended inside the path of `node`.
    pub fn open(&mut self, tid: u32, node: u32) {
        self.open.push((tid, node));
    }

    /// The superblock addresses of the path of `node`, the first first (empty when a node
    /// on it is missing).
    fn addresses(&self, node: u32) -> Vec<u64> {
        let mut out = Vec::new();
        let mut at = node as usize;
        while at != 0 {
            let Some(n) = self.nodes.get(at) else { return Vec::new() };
            if n.missing {
                return Vec::new();
            }
            out.push(n.addr);
            at = n.parent as usize;
        }
        out.reverse();
        out
    }

    /// Takes the open path of thread `tid` out of the trie, as addresses: the end of the
    /// run may have to cut its last superblock at a faulting instruction.
    pub(crate) fn take_open(&mut self, tid: u32) -> Option<Vec<u64>> {
        let i = self.open.iter().rposition(|&(t, _)| t == tid)?;
        let (_, node) = self.open.remove(i);
        Some(self.addresses(node)).filter(|a| !a.is_empty())
    }

    /// Replays the trie into `profiler` (every open path but those taken counted once) and
    /// empties it for the next one.
    pub(crate) fn replay(&mut self, code: &mut CodeMap, profiler: &mut PathProfiler) -> Replayed {
        let mut done = Replayed::default();
        if self.nodes.is_empty() {
            self.open.clear();
            return done;
        }
        for &(_, node) in &self.open {
            if let Some(n) = self.nodes.get_mut(node as usize).filter(|n| node != 0 && !n.missing) {
                n.count = n.count.saturating_add(1);
            } else {
                done.lost_paths += 1;
            }
        }
        self.open.clear();
        let n = self.nodes.len();
        // weights: the paths through each node (parents come before children)
        let mut weight: Vec<u64> = self.nodes.iter().map(|x| if x.missing { 0 } else { x.count }).collect();
        for i in (1..n).rev() {
            let p = self.nodes[i].parent as usize;
            weight[p] = weight[p].saturating_add(weight[i]);
        }
        // children in id order (compressed rows)
        let mut first = vec![0u32; n + 1];
        for x in &self.nodes[1..] {
            first[x.parent as usize + 1] += 1;
        }
        for i in 0..n {
            first[i + 1] += first[i];
        }
        let mut fill = first.clone();
        let mut children = vec![0u32; n.saturating_sub(1)];
        for (i, x) in self.nodes.iter().enumerate().skip(1) {
            let slot = &mut fill[x.parent as usize];
            children[*slot as usize] = i as u32;
            *slot += 1;
        }
        let reached = walk(&self.nodes, &weight, &first, &children, code, profiler, &mut done);
        let total: u64 = self.nodes.iter().filter(|x| !x.missing).map(|x| x.count).fold(0, u64::saturating_add);
        done.lost_paths = done.lost_paths.saturating_add(total.saturating_sub(reached));
        self.nodes.clear();
        done
    }
}

/// A node being walked: the splitter and the profiler as they stand after its superblock
/// was pushed, and its next child to walk.
struct Frame {
    node: u32,
    next: u32,
    splitter: SuperblockSplitter,
    cursor: ThreadState,
}

/// One step of the splitter (`step`) from the profiler state `cursor`, its blocks standing
/// for `weight` executions each.
fn weighted(
    profiler: &mut PathProfiler,
    splitter: &mut SuperblockSplitter,
    cursor: ThreadState,
    weight: u64,
    done: &mut Replayed,
    step: impl FnOnce(&mut SuperblockSplitter, &mut CodeMap, &mut dyn FnMut(&mut CodeMap, crate::code::BlockId, kansoku_binary::InstructionKind)),
    code: &mut CodeMap,
) {
    profiler.set_cursor(cursor);
    profiler.set_weight(weight);
    let before = splitter.unexpected_cuts;
    step(splitter, code, &mut |code: &mut CodeMap, b, k| profiler.enter(b, k, &*code));
    done.unexpected_cuts = done.unexpected_cuts.saturating_add((splitter.unexpected_cuts - before).saturating_mul(weight));
}

/// Depth-first walk of the trie from the empty path; returns the paths replayed.
fn walk(
    nodes: &[Node],
    weight: &[u64],
    first: &[u32],
    children: &[u32],
    code: &mut CodeMap,
    profiler: &mut PathProfiler,
    done: &mut Replayed,
) -> u64 {
    let mut reached = 0u64;
    let mut stack = vec![Frame { node: 0, next: first[0], splitter: SuperblockSplitter::new(VEX_MAX_INSNS), cursor: ThreadState::default() }];
    while !stack.is_empty() {
        let depth = stack.len();
        let top = stack.last_mut().expect("not empty");
        let x = top.node as usize;
        if top.next < first[x + 1] {
            let c = children[top.next as usize];
            top.next += 1;
            let child = &nodes[c as usize];
            // deeper than the tool goes: its paths are counted as lost (see `replay`)
            if child.missing || weight[c as usize] == 0 || depth > MAX_DEPTH {
                continue;
            }
            let mut splitter = top.splitter.clone();
            weighted(profiler, &mut splitter, top.cursor.clone(), weight[c as usize], done, |s, code, mut out| s.push(child.addr, code, &mut out), code);
            done.superblocks = done.superblocks.saturating_add(weight[c as usize]);
            stack.push(Frame { node: c, next: first[c as usize], splitter, cursor: profiler.cursor() });
            continue;
        }
        // every child walked: the paths that end here
        let frame = stack.pop().expect("the top frame");
        let count = nodes[x].count;
        if x != 0 && count > 0 {
            let mut splitter = frame.splitter;
            weighted(profiler, &mut splitter, frame.cursor, count, done, |s, code, mut out| s.finish(None, code, &mut out), code);
            profiler.cut_thread();
            reached = reached.saturating_add(count);
        }
    }
    profiler.set_cursor(ThreadState::default());
    profiler.set_weight(1);
    reached
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nodes_out_of_order_are_refused_and_lost_nodes_counted() {
        let mut t = ToolTrie::default();
        assert!(t.node(0, 0, 1, 1).unwrap_err().to_string().contains("ids must grow"), "node 0 is the empty path");
        t.node(1, 0, 0x1000, 0).unwrap();
        assert!(t.node(1, 0, 0x1000, 0).unwrap_err().to_string().contains("ids must grow"));
        assert!(t.node(3, 3, 0x1000, 0).unwrap_err().to_string().contains("parents come first"));
        assert!(t.node(MAX_NODES, 1, 0x1000, 0).unwrap_err().to_string().contains("at most"));
        // node 2 lost: node 3 hangs under it
        t.node(3, 2, 0x2000, 5).unwrap();
        t.open(9, 3);
        assert_eq!(t.take_open(9), None, "an open path through a lost node has no addresses");
        t.open(9, 1);
        assert_eq!(t.take_open(9), Some(vec![0x1000]));
        let mut code = CodeMap::new(None, crate::code::Scope::All);
        let mut profiler = PathProfiler::new(crate::profile::CallMode::Split, crate::profile::BackEdgeMode::Address);
        let done = t.replay(&mut code, &mut profiler);
        assert_eq!(done.lost_paths, 5, "the five paths ending under the lost node");
        assert_eq!(done.superblocks, 0, "nothing replayable: node 1 ends no path");
    }

    #[test]
    fn a_path_deeper_than_the_tool_keeps_is_lost_not_walked() {
        let mut t = ToolTrie::default();
        let depth = MAX_DEPTH as u32 + 10;
        for id in 1..=depth {
            t.node(id, id - 1, 0x1000 + u64::from(id % 7) * 16, u64::from(id == depth || id == 100)).unwrap();
        }
        let mut code = CodeMap::new(None, crate::code::Scope::All);
        let mut profiler = PathProfiler::new(crate::profile::CallMode::Split, crate::profile::BackEdgeMode::Address);
        let done = t.replay(&mut code, &mut profiler);
        assert_eq!(done.lost_paths, 1, "the path ending below the depth bound");
        assert!(profiler.paths.iter().map(|(_, c)| c).sum::<u64>() > 0, "the shallow path is counted");
    }
}
