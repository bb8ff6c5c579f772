//! Ball–Larus path numbering (Ball & Larus, *Efficient Path Profiling*, 1996) of one
//! function's acyclic CFG.
//!
//! The DAG has a virtual ENTRY and EXIT. Every back edge `u -> v` (by the same rule the
//! profiler cuts at) is replaced by dummy edges `ENTRY -> v` and `u -> EXIT`; a call block
//! gets `u -> EXIT` and its return site `ENTRY -> site` (paths are cut there in `split`
//! mode) while keeping the call's fall-through edge (`frames` mode resumes across it).
//! Returns, indirect jumps and blocks without successors go to EXIT. If cycles remain
//! (irreducible loops with `loops` back edges), DFS retreating edges are treated as back
//! edges too. Then `NumPaths(EXIT) = 1`, `NumPaths(v) = Σ NumPaths(w)` over v's edges, and
//! edge values are the running sums: the sum along any ENTRY→EXIT path is a distinct
//! number in `0..NumPaths(ENTRY)`.

use kansoku_binary::{FunctionCfg, InstructionKind};

use crate::profile::BackEdgeMode;

/// A node of the DAG.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Node {
    Block(u32),
    Exit,
}

/// A CFG reduced to what numbering needs (also built directly by tests).
#[derive(Clone, Debug)]
pub struct DagInput {
    /// Successors of each block.
    pub successors: Vec<Vec<u32>>,
    /// Is `u -> v` a back edge?
    pub back: Vec<Vec<bool>>,
    /// Does the block end in a call (its fall-through successor is a return site)?
    pub call: Vec<bool>,
    /// Does the block leave the function (return, indirect jump, no successors)?
    pub exit: Vec<bool>,
}

impl DagInput {
    /// The DAG of `cfg` with the edges that cut paths in `mode` marked as back edges.
    pub(crate) fn from_cfg(cfg: &FunctionCfg, mode: BackEdgeMode) -> Self {
        let n = cfg.blocks.len();
        let mut successors = Vec::with_capacity(n);
        let mut back = Vec::with_capacity(n);
        let mut call = Vec::with_capacity(n);
        let mut exit = Vec::with_capacity(n);
        for b in &cfg.blocks {
            let mut s = b.successors.clone();
            s.sort_unstable();
            s.dedup();
            let bk = s.iter().map(|&v| is_back_edge(cfg, b.index, v, mode)).collect();
            call.push(b.terminator == InstructionKind::Call);
            exit.push(matches!(b.terminator, InstructionKind::Return) || s.is_empty() || (b.terminator == InstructionKind::Jump && s.is_empty()));
            successors.push(s);
            back.push(bk);
        }
        DagInput { successors, back, call, exit }
    }
}

/// Does the CFG edge `from → to` cut paths in `mode`? The one rule for numbering paths
/// and for drawing the cut edges dashed in the CFG picture.
pub(crate) fn is_back_edge(cfg: &FunctionCfg, from: u32, to: u32, mode: BackEdgeMode) -> bool {
    let b = &cfg.blocks[from as usize];
    match mode {
        BackEdgeMode::Address => {
            matches!(b.terminator, InstructionKind::Jump | InstructionKind::ConditionalJump) && cfg.blocks[to as usize].start <= b.start
        }
        BackEdgeMode::Loops => cfg.dominates(to, from),
    }
}

/// Ball–Larus numbering of one function.
#[derive(Clone, Debug)]
pub struct BallLarus {
    /// Edges from ENTRY: (block, value).
    entry: Vec<(u32, u128)>,
    /// Edges of each block: (node, value).
    edges: Vec<Vec<(Node, u128)>>,
    /// Number of ENTRY→EXIT paths, if it fits in 128 bits.
    pub num_paths: Option<u128>,
}

impl BallLarus {
    /// Numbers the acyclic paths of `cfg`, back edges cut as `mode` says.
    pub fn new(cfg: &FunctionCfg, mode: BackEdgeMode) -> Self {
        Self::from_input(&DagInput::from_cfg(cfg, mode))
    }

    /// Numbers the acyclic paths of an already built DAG (tests give small hand-made ones).
    #[allow(clippy::needless_range_loop)] // block numbers index several parallel vectors
    pub fn from_input(input: &DagInput) -> Self {
        let n = input.successors.len();
        let mut entry: Vec<u32> = Vec::new();
        let mut edges: Vec<Vec<Node>> = vec![Vec::new(); n];
        if n > 0 {
            entry.push(0);
        }
        let add = |list: &mut Vec<Node>, node: Node| {
            if !list.contains(&node) {
                list.push(node)
            }
        };
        for u in 0..n {
            for (i, &v) in input.successors[u].iter().enumerate() {
                if input.back[u][i] {
                    if !entry.contains(&v) {
                        entry.push(v);
                    }
                    add(&mut edges[u], Node::Exit);
                } else {
                    add(&mut edges[u], Node::Block(v));
                    if input.call[u] && !entry.contains(&v) {
                        entry.push(v);
                    }
                }
            }
            if input.call[u] || input.exit[u] {
                add(&mut edges[u], Node::Exit);
            }
        }
        // Break remaining cycles: DFS from every ENTRY target, retreating edges become back edges.
        let mut state = vec![0u8; n]; // 0 new, 1 on stack, 2 done
        let mut order: Vec<u32> = Vec::with_capacity(n); // post-order
        let roots = entry.clone();
        for root in roots {
            if state[root as usize] != 0 {
                continue;
            }
            let mut stack: Vec<(u32, usize)> = vec![(root, 0)];
            state[root as usize] = 1;
            while let Some(&mut (u, ref mut i)) = stack.last_mut() {
                if *i < edges[u as usize].len() {
                    let e = edges[u as usize][*i];
                    *i += 1;
                    if let Node::Block(v) = e {
                        match state[v as usize] {
                            0 => {
                                state[v as usize] = 1;
                                stack.push((v, 0));
                            }
                            1 => {
                                // retreating edge u -> v: make it a back edge
                                let list = &mut edges[u as usize];
                                let pos = list.iter().position(|&x| x == Node::Block(v)).unwrap();
                                list.remove(pos);
                                if let Some(last) = stack.last_mut() {
                                    last.1 -= 1;
                                }
                                if !list.contains(&Node::Exit) {
                                    list.push(Node::Exit);
                                }
                                if !entry.contains(&v) {
                                    entry.push(v);
                                }
                            }
                            _ => {}
                        }
                    }
                } else {
                    state[u as usize] = 2;
                    order.push(u);
                    stack.pop();
                }
            }
        }
        // NumPaths in post-order (successors first).
        let mut num: Vec<Option<u128>> = vec![None; n];
        let mut valued: Vec<Vec<(Node, u128)>> = vec![Vec::new(); n];
        for &u in &order {
            let mut sum: Option<u128> = Some(0);
            for &e in &edges[u as usize] {
                let w = match e {
                    Node::Exit => Some(1),
                    Node::Block(v) => num[v as usize],
                };
                valued[u as usize].push((e, sum.unwrap_or(u128::MAX)));
                sum = match (sum, w) {
                    (Some(a), Some(b)) => a.checked_add(b),
                    _ => None,
                };
            }
            num[u as usize] = sum;
        }
        let mut entry_valued = Vec::with_capacity(entry.len());
        let mut total: Option<u128> = Some(0);
        for &v in &entry {
            entry_valued.push((v, total.unwrap_or(u128::MAX)));
            total = match (total, num[v as usize]) {
                (Some(a), Some(b)) => a.checked_add(b),
                _ => None,
            };
        }
        BallLarus { entry: entry_valued, edges: valued, num_paths: total }
    }

    /// The Ball–Larus id of a path of CFG blocks (ENTRY → blocks → EXIT), if every edge
    /// of it is in the DAG.
    pub fn path_id(&self, blocks: &[u32]) -> Option<u128> {
        self.num_paths?;
        let first = *blocks.first()?;
        let mut id = self.entry.iter().find(|e| e.0 == first)?.1;
        for w in blocks.windows(2) {
            let list = self.edges.get(w[0] as usize)?;
            id += list.iter().find(|e| e.0 == Node::Block(w[1]))?.1;
        }
        let last = *blocks.last()?;
        id += self.edges.get(last as usize)?.iter().find(|e| e.0 == Node::Exit)?.1;
        Some(id)
    }

    /// Every ENTRY→EXIT path as blocks (for tests; stops after `limit` paths).
    pub fn enumerate(&self, limit: usize) -> Vec<Vec<u32>> {
        let mut out = Vec::new();
        for &(v, _) in &self.entry {
            let mut path = vec![v];
            self.walk(&mut path, &mut out, limit);
        }
        out
    }

    fn walk(&self, path: &mut Vec<u32>, out: &mut Vec<Vec<u32>>, limit: usize) {
        if out.len() >= limit {
            return;
        }
        let u = *path.last().unwrap();
        for &(e, _) in &self.edges[u as usize] {
            match e {
                Node::Exit => out.push(path.clone()),
                Node::Block(v) => {
                    path.push(v);
                    self.walk(path, out, limit);
                    path.pop();
                }
            }
        }
    }
}
