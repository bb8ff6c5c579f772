//! Basic blocks, the control-flow graph of one function, dominators and natural loops.
//!
//! A block starts at the function entry, at every direct branch target inside the
//! function and after every control transfer (branch, call, return); it ends at a control
//! transfer or just before the next leader. Calls end blocks (as in seed 003, where paths
//! may be cut at calls) but keep a fall-through edge, since the callee returns.

use std::collections::BTreeSet;

use serde::Serialize;

use crate::decode::{decode_all, DecodedInstruction, InstructionKind};
use crate::jump_table::{self, JumpTable};
use crate::program::{FunctionSymbol, Program};

/// One basic block of a function.
#[derive(Clone, Debug, Serialize)]
pub struct BasicBlock {
    /// Block number inside the function, in address order (0 = entry).
    pub index: u32,
    /// Link-time address of the block's first byte.
    pub start: u64,
    /// One past the last byte of the block.
    pub end: u64,
    /// Index of the block's first instruction in [`FunctionCfg::instructions`].
    pub first_instruction: usize,
    /// Instructions in the block (at least 1).
    pub instruction_count: usize,
    /// Kind of the block's last instruction.
    pub terminator: InstructionKind,
    /// Successor block numbers inside the function.
    pub successors: Vec<u32>,
}

/// A natural loop found from a back edge `tail -> header` where `header` dominates `tail`.
#[derive(Clone, Debug, Serialize)]
pub struct Loop {
    /// The block every iteration enters by (it dominates the body).
    pub header: u32,
    /// Sources of the back edges into `header`.
    pub back_edge_tails: Vec<u32>,
    /// Blocks of the loop body, header included, sorted.
    pub blocks: Vec<u32>,
}

/// A decoded function: its instructions, blocks, CFG, dominator tree and loops.
#[derive(Clone, Debug, Serialize)]
pub struct FunctionCfg {
    /// The function's symbol name.
    pub name: String,
    /// Link-time address of its first byte.
    pub address: u64,
    /// Size in bytes (the symbol's, or up to the next symbol).
    pub size: u64,
    /// Every instruction, in address order.
    pub instructions: Vec<DecodedInstruction>,
    /// The basic blocks, in address order (`blocks[i].index == i`).
    pub blocks: Vec<BasicBlock>,
    /// Immediate dominator of each block (the entry's is itself); `None` if unreachable.
    pub idom: Vec<Option<u32>>,
    /// The natural loops, one per header.
    pub loops: Vec<Loop>,
    /// Switch tables followed: their `jmp` blocks have the table's targets as successors.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub jump_tables: Vec<JumpTable>,
    /// Addresses of indirect jumps (not GOT tail calls) whose targets are unknown: their
    /// blocks have no successors, so the CFG may miss edges and loops there.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub unresolved_jumps: Vec<u64>,
}

impl FunctionCfg {
    /// Decodes `function` of `program` and builds its CFG, following switch jump tables
    /// read from the program's data.
    pub fn build(program: &Program, function: &FunctionSymbol) -> FunctionCfg {
        let bytes = program.function_bytes(function).unwrap_or(&[]);
        let instructions = decode_all(bytes, function.address);
        let read = |addr: u64, len: usize| program.bytes_at(addr, len).map(<[u8]>::to_vec);
        let tables = find_jump_tables(&instructions, (function.address, function.address.saturating_add(function.size)), &read);
        Self::from_parts(function.name.clone(), function.address, function.size, instructions, tables)
    }

    /// Builds the CFG of already decoded instructions spanning `[address, address+size)`.
    /// Without the program's data no jump table is followed.
    #[cfg(test)]
    pub(crate) fn from_instructions(name: String, address: u64, size: u64, instructions: Vec<DecodedInstruction>) -> FunctionCfg {
        Self::from_parts(name, address, size, instructions, Vec::new())
    }

    fn from_parts(name: String, address: u64, size: u64, instructions: Vec<DecodedInstruction>, jump_tables: Vec<JumpTable>) -> FunctionCfg {
        let table_targets: jump_table::Tables = jump_tables.iter().map(|t| (t.jump, t.targets.as_slice())).collect();
        let blocks = split_blocks(address, size, &instructions, &table_targets);
        let idom = dominators(&blocks);
        let loops = natural_loops(&blocks, &idom);
        let unresolved_jumps = instructions
            .iter()
            .filter(|i| jump_table::is_table_candidate(i) && !table_targets.contains_key(&i.address))
            .map(|i| i.address)
            .collect();
        FunctionCfg { name, address, size, instructions, blocks, idom, loops, jump_tables, unresolved_jumps }
    }

    /// Index of the instruction starting exactly at `addr`.
    pub fn instruction_index(&self, addr: u64) -> Option<usize> {
        self.instructions.binary_search_by_key(&addr, |i| i.address).ok()
    }

    /// Index of the instruction whose bytes contain `addr` (for addresses inside an
    /// instruction, e.g. a sampled IP after skid or a misaligned decode).
    pub fn instruction_containing(&self, addr: u64) -> Option<usize> {
        let i = self.instructions.partition_point(|ins| ins.address <= addr).checked_sub(1)?;
        (addr < self.instructions[i].next_address()).then_some(i)
    }

    /// The block holding the instruction with index `instruction`.
    pub fn block_of_instruction(&self, instruction: usize) -> Option<&BasicBlock> {
        let b = self.blocks.partition_point(|b| b.first_instruction <= instruction).checked_sub(1)?;
        self.blocks.get(b)
    }

    /// The block starting exactly at `addr`.
    pub fn block_starting_at(&self, addr: u64) -> Option<&BasicBlock> {
        self.blocks.binary_search_by_key(&addr, |b| b.start).ok().map(|i| &self.blocks[i])
    }

    /// Does `a` dominate `b`?
    pub fn dominates(&self, a: u32, b: u32) -> bool {
        let mut cur = b;
        loop {
            if cur == a {
                return true;
            }
            match self.idom[cur as usize] {
                Some(p) if p != cur => cur = p,
                _ => return false,
            }
        }
    }

    /// Is `from -> to` a loop back edge (its target dominates its source)?
    pub fn is_back_edge(&self, from: u32, to: u32) -> bool {
        self.blocks[from as usize].successors.contains(&to) && self.dominates(to, from)
    }
}

/// The switch tables of a function's indirect jumps that can be bounded. A second round
/// resolves switches reached only through the cases of another one.
fn find_jump_tables(ins: &[DecodedInstruction], range: (u64, u64), read: &dyn Fn(u64, usize) -> Option<Vec<u8>>) -> Vec<JumpTable> {
    let mut pending: Vec<usize> = (0..ins.len()).filter(|&j| jump_table::is_table_candidate(&ins[j])).collect();
    let mut found: Vec<JumpTable> = Vec::new();
    if pending.is_empty() {
        return found;
    }
    let leaders = direct_targets(ins, range);
    let blocks = |tables: &jump_table::Tables| split_blocks(range.0, range.1 - range.0, ins, tables);
    let cx = jump_table::Context { read, range, leaders: &leaders, blocks: &blocks };
    for _round in 0..2 {
        let known: jump_table::Tables = found.iter().map(|t| (t.jump, t.targets.as_slice())).collect();
        let flow = std::cell::OnceCell::new();
        let new: Vec<JumpTable> = pending.iter().filter_map(|&j| jump_table::resolve(ins, j, &cx, &known, &flow)).collect();
        if new.is_empty() {
            break;
        }
        pending.retain(|&j| !new.iter().any(|t| t.jump == ins[j].address));
        found.extend(new);
    }
    found.sort_by_key(|t| t.jump);
    found
}

/// Targets of direct jumps that lie inside `[lo, hi)`.
fn direct_targets(ins: &[DecodedInstruction], (lo, hi): (u64, u64)) -> BTreeSet<u64> {
    ins.iter().filter(|i| i.kind.is_branch()).filter_map(|i| i.target).filter(|t| (lo..hi).contains(t)).collect()
}

fn split_blocks(address: u64, size: u64, ins: &[DecodedInstruction], tables: &jump_table::Tables) -> Vec<BasicBlock> {
    if ins.is_empty() {
        return Vec::new();
    }
    let mut leaders = direct_targets(ins, (address, address.saturating_add(size)));
    leaders.insert(ins[0].address);
    leaders.extend(tables.values().flat_map(|t| t.iter().copied()));
    for i in ins {
        if i.kind.ends_block() {
            leaders.insert(i.next_address());
        }
    }
    // Leaders that fall inside an instruction (overlapping code) cannot start a block.
    let starts: Vec<usize> = ins.iter().enumerate().filter(|(_, i)| leaders.contains(&i.address)).map(|(n, _)| n).collect();
    let mut blocks = Vec::with_capacity(starts.len());
    for (b, &first) in starts.iter().enumerate() {
        let last = starts.get(b + 1).map_or(ins.len(), |&n| n) - 1;
        blocks.push(BasicBlock {
            index: b as u32,
            start: ins[first].address,
            end: ins[last].next_address(),
            first_instruction: first,
            instruction_count: last - first + 1,
            terminator: ins[last].kind,
            successors: Vec::new(),
        });
    }
    let block_at = |addr: u64| blocks.binary_search_by_key(&addr, |b: &BasicBlock| b.start).ok().map(|i| i as u32);
    let mut succs = Vec::with_capacity(blocks.len());
    for b in &blocks {
        let last = &ins[b.first_instruction + b.instruction_count - 1];
        let mut s = Vec::new();
        let falls_through = matches!(last.kind, InstructionKind::Other | InstructionKind::ConditionalJump | InstructionKind::Call);
        if let (Some(t), true) = (last.target, last.kind.is_branch()) {
            s.extend(block_at(t));
        }
        if falls_through {
            s.extend(block_at(last.next_address()));
        }
        if let Some(targets) = tables.get(&last.address) {
            s.extend(targets.iter().filter_map(|&t| block_at(t)));
            s.sort_unstable();
        }
        s.dedup();
        succs.push(s);
    }
    for (b, s) in blocks.iter_mut().zip(succs) {
        b.successors = s;
    }
    blocks
}

/// Immediate dominators by the iterative algorithm of Cooper, Harvey and Kennedy over a
/// reverse post-order. Unreachable blocks get `None`.
fn dominators(blocks: &[BasicBlock]) -> Vec<Option<u32>> {
    let n = blocks.len();
    if n == 0 {
        return Vec::new();
    }
    // Reverse post-order by an explicit-stack DFS (functions can be large).
    let mut order = Vec::with_capacity(n);
    let mut seen = vec![false; n];
    let mut stack: Vec<(u32, usize)> = vec![(0, 0)];
    seen[0] = true;
    while let Some((b, next)) = stack.pop() {
        let succ = &blocks[b as usize].successors;
        if next < succ.len() {
            stack.push((b, next + 1));
            let s = succ[next];
            if !seen[s as usize] {
                seen[s as usize] = true;
                stack.push((s, 0));
            }
        } else {
            order.push(b);
        }
    }
    order.reverse();
    let mut rpo_index = vec![usize::MAX; n];
    for (i, &b) in order.iter().enumerate() {
        rpo_index[b as usize] = i;
    }
    let mut preds = vec![Vec::new(); n];
    for b in blocks {
        for &s in &b.successors {
            preds[s as usize].push(b.index);
        }
    }
    let mut idom: Vec<Option<u32>> = vec![None; n];
    idom[0] = Some(0);
    let intersect = |idom: &[Option<u32>], mut a: u32, mut b: u32| {
        while a != b {
            while rpo_index[a as usize] > rpo_index[b as usize] {
                a = idom[a as usize].expect("processed");
            }
            while rpo_index[b as usize] > rpo_index[a as usize] {
                b = idom[b as usize].expect("processed");
            }
        }
        a
    };
    let mut changed = true;
    while changed {
        changed = false;
        for &b in order.iter().skip(1) {
            let mut new = None;
            for &p in &preds[b as usize] {
                if idom[p as usize].is_some() {
                    new = Some(match new {
                        None => p,
                        Some(cur) => intersect(&idom, p, cur),
                    });
                }
            }
            if new.is_some() && idom[b as usize] != new {
                idom[b as usize] = new;
                changed = true;
            }
        }
    }
    idom
}

fn natural_loops(blocks: &[BasicBlock], idom: &[Option<u32>]) -> Vec<Loop> {
    let dominates = |a: u32, b: u32| {
        let mut cur = b;
        loop {
            if cur == a {
                return true;
            }
            match idom[cur as usize] {
                Some(p) if p != cur => cur = p,
                _ => return false,
            }
        }
    };
    let mut preds = vec![Vec::new(); blocks.len()];
    for b in blocks {
        for &s in &b.successors {
            preds[s as usize].push(b.index);
        }
    }
    let mut loops: Vec<Loop> = Vec::new();
    for b in blocks {
        for &h in &b.successors {
            if idom[b.index as usize].is_none() || !dominates(h, b.index) {
                continue;
            }
            // Body: the header plus everything that reaches the tail without the header.
            let mut body = BTreeSet::from([h]);
            let mut work = vec![b.index];
            while let Some(x) = work.pop() {
                if body.insert(x) {
                    work.extend(preds[x as usize].iter().copied());
                }
            }
            match loops.iter_mut().find(|l| l.header == h) {
                Some(l) => {
                    l.back_edge_tails.push(b.index);
                    let merged: BTreeSet<u32> = l.blocks.iter().copied().chain(body).collect();
                    l.blocks = merged.into_iter().collect();
                }
                None => loops.push(Loop { header: h, back_edge_tails: vec![b.index], blocks: body.into_iter().collect() }),
            }
        }
    }
    loops.sort_by_key(|l| l.header);
    loops
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::decode::decode_all;

    /// A hand-assembled loop: `0: xor eax,eax; 2: inc eax; 4: cmp eax,10; 7: jl 2; 9: ret`.
    #[test]
    fn loop_and_blocks_of_a_counted_loop() {
        let bytes = [0x31, 0xc0, 0xff, 0xc0, 0x83, 0xf8, 0x0a, 0x7c, 0xf9, 0xc3];
        let cfg = FunctionCfg::from_instructions("f".into(), 0x1000, bytes.len() as u64, decode_all(&bytes, 0x1000));
        let starts: Vec<u64> = cfg.blocks.iter().map(|b| b.start).collect();
        assert_eq!(starts, vec![0x1000, 0x1002, 0x1009]);
        assert_eq!(cfg.blocks[1].successors, vec![1, 2]);
        assert_eq!(cfg.loops.len(), 1);
        assert_eq!(cfg.loops[0].header, 1);
        assert_eq!(cfg.loops[0].blocks, vec![1]);
        assert!(cfg.is_back_edge(1, 1));
        assert!(cfg.dominates(0, 2));
    }
    /// `switch (edi) { case 0..=2 }` hand-assembled in the gcc shape, its table at 0x2000.
    fn switch_function(guard: [u8; 3]) -> (Vec<u8>, Vec<u8>) {
        let mut code = guard.to_vec(); // 0x1000: cmp edi/esi, 2
        code.extend([0x77, 0x1b]); // 0x1003: ja 0x1020
        code.extend([0x48, 0x8d, 0x15, 0xf4, 0x0f, 0, 0]); // 0x1005: lea rdx, [rip+0xff4] = 0x2000
        code.extend([0x48, 0x63, 0x04, 0xba]); // 0x100c: movsxd rax, dword [rdx+rdi*4]
        code.extend([0x48, 0x01, 0xd0, 0xff, 0xe0]); // 0x1010: add rax, rdx; 0x1013: jmp rax
        code.extend([0xb8, 1, 0, 0, 0, 0xc3, 0x31, 0xc0, 0xc3, 0xc3, 0x90, 0xc3]); // cases at 0x1015, 0x101b, 0x101e; default 0x1020
        let table = [0x1015i32, 0x101b, 0x101e].iter().flat_map(|t| (t - 0x2000).to_le_bytes()).collect();
        (code, table)
    }

    fn cfg_with_table_at_0x2000(code: &[u8], table: &[u8]) -> FunctionCfg {
        let ins = decode_all(code, 0x1000);
        let read = |a: u64, n: usize| table.get(usize::try_from(a.checked_sub(0x2000)?).ok()?..).and_then(|t| t.get(..n)).map(<[u8]>::to_vec);
        let size = code.len() as u64;
        let tables = find_jump_tables(&ins, (0x1000, 0x1000 + size), &read);
        FunctionCfg::from_parts("switch".into(), 0x1000, size, ins, tables)
    }

    #[test]
    fn a_guarded_table_gives_the_jump_its_cases() {
        let (code, table) = switch_function([0x83, 0xff, 0x02]);
        let cfg = cfg_with_table_at_0x2000(&code, &table);
        assert_eq!(cfg.jump_tables.len(), 1);
        assert_eq!((cfg.jump_tables[0].table, cfg.jump_tables[0].entries), (0x2000, 3));
        assert_eq!(cfg.jump_tables[0].targets, vec![0x1015, 0x101b, 0x101e]);
        let jump_block = cfg.block_of_instruction(cfg.instruction_index(0x1013).unwrap()).unwrap();
        let succ: Vec<u64> = jump_block.successors.iter().map(|&b| cfg.blocks[b as usize].start).collect();
        assert_eq!(succ, vec![0x1015, 0x101b, 0x101e]);
        assert!(cfg.unresolved_jumps.is_empty());
    }

    #[test]
    fn a_guard_on_another_register_bounds_nothing() {
        // cmp esi, 2 does not bound rdi: the table's size is unknown, the jump is counted.
        let (code, table) = switch_function([0x83, 0xfe, 0x02]);
        let cfg = cfg_with_table_at_0x2000(&code, &table);
        assert!(cfg.jump_tables.is_empty());
        assert_eq!(cfg.unresolved_jumps, vec![0x1013]);
        let jump_block = cfg.block_of_instruction(cfg.instruction_index(0x1013).unwrap()).unwrap();
        assert!(jump_block.successors.is_empty());
    }
}
