//! Switch jump tables: the targets of `jmp reg` (or `jmp [idx*8+table]`) when the code
//! before it loads the target from a table whose size a `cmp idx, N` / `ja` guard bounds.
//!
//! The shapes recognised are those gcc and clang emit for dense `switch` statements:
//!
//! ```text
//! cmp   eax, N ; ja default        (the guard: index <= N, so N+1 entries)
//! lea   rdx, [rip+T]               (PIE: 4-byte offsets relative to T)
//! movsxd rax, dword [rdx+rax*4]
//! add   rax, rdx
//! jmp   rax
//! ```
//!
//! and, without PIE, `jmp qword [rax*8+T]` or `mov rax, [rax*8+T]; jmp rax` (absolute
//! 8-byte entries). Anything else stays an unresolved indirect jump, which is counted.

use std::collections::{BTreeMap, BTreeSet, HashSet};

use iced_x86::{Instruction, InstructionInfoFactory, Mnemonic, OpAccess, OpKind, Register};
use serde::Serialize;

use crate::cfg::BasicBlock;
use crate::decode::DecodedInstruction;

/// Tables larger than this are not believed (no compiler emits one this big for a switch;
/// a misread guard could otherwise read megabytes of `.rodata` as code addresses).
const MAX_ENTRIES: u64 = 4096;
/// How far before the load the guard may be, in instructions.
const GUARD_WINDOW: usize = 24;

/// A resolved switch table.
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
pub struct JumpTable {
    /// Address of the indirect `jmp`.
    pub jump: u64,
    /// Address of the table in the file.
    pub table: u64,
    /// Entries read (the guard's bound).
    pub entries: u64,
    /// Distinct targets inside the function, sorted.
    pub targets: Vec<u64>,
}

/// How the entries of a table turn into addresses.
#[derive(Clone, Copy)]
enum Entries {
    /// 4-byte signed offsets from the table's own address (position-independent code),
    /// which this register holds where the offset is added to it.
    /// The register is read by the `add` at the given instruction index.
    Relative(Register, usize),
    /// 8-byte absolute addresses, in a table at this address.
    Absolute(u64),
}

/// The table load found before an indirect jump: which register indexes the table, the
/// instruction that reads it, and how its entries become addresses.
struct TableLoad {
    index: Register,
    load: usize,
    entries: Entries,
    /// The table address the load itself names (unoptimised code computes it twice).
    names_table: Option<u64>,
}

/// Is this instruction an indirect jump a table could explain (not a tail call through
/// the GOT, `jmp [rip+slot]`)?
pub fn is_table_candidate(ins: &DecodedInstruction) -> bool {
    let r = &ins.raw;
    ins.target.is_none()
        && r.mnemonic() == Mnemonic::Jmp
        && (r.op0_kind() == OpKind::Register || (r.op0_kind() == OpKind::Memory && r.memory_base() != Register::RIP))
}

/// The function's control flow with the tables known so far, to check that what the code
/// before a jump computed holds on every path into it.
pub(crate) struct Flow {
    blocks: Vec<BasicBlock>,
    preds: Vec<Vec<u32>>,
    /// Every indirect jump of the function has known targets: a block without
    /// predecessors is then unreachable (or an exception landing pad), not a table target.
    complete: bool,
    /// How many indirect jumps have no known targets.
    missing: usize,
}

impl Flow {
    fn new(ins: &[DecodedInstruction], cx: &Context, tables: &Tables) -> Self {
        let blocks = (cx.blocks)(tables);
        let mut preds = vec![Vec::new(); blocks.len()];
        for b in &blocks {
            for &s in &b.successors {
                preds[s as usize].push(b.index);
            }
        }
        let missing = ins.iter().filter(|i| is_table_candidate(i) && !tables.contains_key(&i.address)).count();
        Flow { blocks, preds, complete: missing == 0, missing }
    }
}

/// Tables followed so far: jump address → its targets.
pub type Tables<'t> = BTreeMap<u64, &'t [u64]>;

/// What [`resolve`] needs to know about the function besides its instructions.
pub struct Context<'a> {
    /// File bytes at a link-time address (the table in `.rodata`).
    pub read: &'a dyn Fn(u64, usize) -> Option<Vec<u8>>,
    /// The function's `[start, end)`.
    pub range: (u64, u64),
    /// Direct branch targets inside the function (join points).
    pub leaders: &'a BTreeSet<u64>,
    /// The function's blocks given the tables followed so far (jump address → targets).
    pub blocks: &'a dyn Fn(&Tables) -> Vec<BasicBlock>,
}

/// Resolves the table of the indirect jump `ins[jump]`, given the tables of the function
/// already resolved (`known`: their edges may be the only way into this jump). `known_flow`
/// caches the function's flow with those tables, the same for every jump of a round: built
/// once, not once per jump (a function with thousands of indirect jumps, such as an
/// interpreter's, made that quadratic).
pub(crate) fn resolve(ins: &[DecodedInstruction], jump: usize, cx: &Context, known: &Tables, known_flow: &std::cell::OnceCell<Flow>) -> Option<JumpTable> {
    let load = table_load(ins, jump)?;
    // A branch into the `add`/`jmp` after the load would bypass it. When the jump itself
    // loads (`jmp [rax*8+T]`), nothing lies between them.
    if load.load < jump && cx.leaders.range(ins[load.load + 1].address..=ins[jump].address).next().is_some() {
        return None;
    }
    let (entries, guard) = guard_bound(ins, &load, cx.leaders)?;
    let table = match load.entries {
        Entries::Absolute(table) => table,
        // First a candidate from the paths known without this table, then a check with
        // its edges added: a case looping back to the switch must not change the base.
        Entries::Relative(base, add) => table_base(ins, add, base, known_flow.get_or_init(|| Flow::new(ins, cx, known)), false).0?,
    };
    if load.names_table.is_some_and(|t| t != table) {
        return None;
    }
    let targets = read_targets(table, entries, load.entries, cx)?;
    // An edge of this or another table landing between guard and jump would bypass the guard.
    let between = |t: &u64| *t > ins[guard].address && *t <= ins[jump].address;
    if targets.iter().chain(known.values().flat_map(|t| t.iter())).any(between) {
        return None;
    }
    if let Entries::Relative(base, add) = load.entries {
        // The strict walk with this table's edges added sees what the walk over the known
        // flow sees, unless a target lands in a block that walk entered (the edge adds a
        // predecessor there, or splits it) or the edges complete the function's flow. Only
        // then is the flow built again with them: building it for every jump made huge
        // pseudo-functions (a stripped Go program's or Chromium's text) quadratic.
        let flow = known_flow.get_or_init(|| Flow::new(ins, cx, known));
        let (base_known, entered) = table_base(ins, add, base, flow, true);
        let block_of = |a: u64| flow.blocks.partition_point(|b| b.start <= a).checked_sub(1);
        let seen = targets.iter().any(|&t| block_of(t).is_some_and(|b| entered.contains(&b)));
        // (this jump is one of the flow's missing ones)
        let completes = flow.missing == 1;
        let checked = if seen || completes {
            let mut with_this = known.clone();
            with_this.insert(ins[jump].address, &targets);
            table_base(ins, add, base, &Flow::new(ins, cx, &with_this), true).0
        } else {
            base_known
        };
        if checked? != table {
            return None;
        }
    }
    Some(JumpTable { jump: ins[jump].address, table, entries, targets })
}

/// The distinct entries of the table that lie inside the function, sorted.
fn read_targets(table: u64, entries: u64, kind: Entries, cx: &Context) -> Option<Vec<u64>> {
    let width: u64 = match kind {
        Entries::Relative(..) => 4,
        Entries::Absolute(_) => 8,
    };
    let bytes = (cx.read)(table, usize::try_from(entries.checked_mul(width)?).ok()?)?;
    let (lo, hi) = cx.range;
    let mut targets: Vec<u64> = bytes
        .chunks_exact(width as usize)
        .filter_map(|e| match kind {
            Entries::Relative(..) => table.checked_add_signed(i64::from(i32::from_le_bytes(e.try_into().ok()?))),
            Entries::Absolute(_) => Some(u64::from_le_bytes(e.try_into().ok()?)),
        })
        .filter(|t| (lo..hi).contains(t))
        .collect();
    targets.sort_unstable();
    targets.dedup();
    (!targets.is_empty()).then_some(targets)
}

/// Finds the instruction that loads the jump's target from a table.
fn table_load(ins: &[DecodedInstruction], jump: usize) -> Option<TableLoad> {
    let jmp = &ins[jump].raw;
    if jmp.op0_kind() == OpKind::Memory {
        return absolute_operand(jmp).map(|(table, index)| TableLoad { index, load: jump, entries: Entries::Absolute(table), names_table: None });
    }
    let target = jmp.op0_register().full_register();
    let writer = last_writer(ins, jump, target)?;
    let w = &ins[writer].raw;
    match w.mnemonic() {
        // mov rax, [rax*8+T]; jmp rax
        Mnemonic::Mov if w.op1_kind() == OpKind::Memory => {
            absolute_operand(w).map(|(table, index)| TableLoad { index, load: writer, entries: Entries::Absolute(table), names_table: None })
        }
        // movsxd rax, [B+I*4]; add rax, B; jmp rax — B holds the table's address.
        Mnemonic::Add if w.op1_kind() == OpKind::Register => {
            let base = w.op1_register().full_register();
            let load = last_writer(ins, writer, target)?;
            let l = &ins[load].raw;
            if l.mnemonic() == Mnemonic::Cdqe {
                return unoptimised_load(ins, load, base, writer);
            }
            let shape = l.mnemonic() == Mnemonic::Movsxd && l.op1_kind() == OpKind::Memory && l.memory_displacement64() == 0;
            if !shape || l.memory_base().full_register() != base || l.memory_index_scale() != 4 || l.memory_index() == Register::None {
                return None;
            }
            // The base the load read is the base the add reads.
            if last_writer(ins, writer, base).is_some_and(|k| k > load) {
                return None;
            }
            Some(TableLoad { index: l.memory_index().full_register(), load, entries: Entries::Relative(base, writer), names_table: None })
        }
        _ => None,
    }
}

/// gcc's `-O0` table load, ending in `cdqe` (at `cdqe`) before `add rax, base` (at `add`):
///
/// ```text
/// lea rdx, [rax*4]        (the index, scaled: where the guard tracking starts)
/// lea rax, [rip+T]
/// mov eax, [rdx+rax]
/// cdqe
/// ```
fn unoptimised_load(ins: &[DecodedInstruction], cdqe: usize, base: Register, add: usize) -> Option<TableLoad> {
    let mov = last_writer(ins, cdqe, Register::RAX)?;
    let m = &ins[mov].raw;
    let shape = m.mnemonic() == Mnemonic::Mov
        && m.op0_kind() == OpKind::Register
        && m.op0_register() == Register::EAX
        && m.op1_kind() == OpKind::Memory
        && m.memory_index_scale() == 1
        && m.memory_displacement64() == 0
        && m.memory_base() != Register::None
        && m.memory_index() != Register::None;
    if !shape {
        return None;
    }
    let (a, b) = (last_writer(ins, mov, m.memory_base().full_register())?, last_writer(ins, mov, m.memory_index().full_register())?);
    let rip_lea = |k: usize| (ins[k].raw.mnemonic() == Mnemonic::Lea && ins[k].raw.memory_base() == Register::RIP).then(|| ins[k].raw.ip_rel_memory_address());
    let (table, table_lea, scaled) = match (rip_lea(a), rip_lea(b)) {
        (Some(t), None) => (t, a, b),
        (None, Some(t)) => (t, b, a),
        _ => return None,
    };
    let s = &ins[scaled].raw;
    let scales = s.mnemonic() == Mnemonic::Lea && s.memory_base() == Register::None && s.memory_index_scale() == 4 && s.memory_displacement64() == 0;
    // The table's lea comes after the scaling one, so the checks from `scaled` on cover it.
    if !scales || table_lea < scaled {
        return None;
    }
    Some(TableLoad { index: s.memory_index().full_register(), load: scaled, entries: Entries::Relative(base, add), names_table: Some(table) })
}

/// `[index*8 + T]` with no base register: an absolute table at `T`.
fn absolute_operand(i: &Instruction) -> Option<(u64, Register)> {
    let shape = i.memory_base() == Register::None && i.memory_index() != Register::None && i.memory_index_scale() == 8;
    shape.then(|| (i.memory_displacement64(), i.memory_index().full_register()))
}

/// The table address in `base` at instruction `at`: every definition of `base` reaching
/// `at` must be the same `lea base, [rip+T]` (gcc hoists it out of loops, so it may be
/// far away, and other paths may set `base` to something else).
/// The table base `base` holds at `at` (the one `lea` every path into it sets it with),
/// and the blocks the walk back from `at` entered.
fn table_base(ins: &[DecodedInstruction], at: usize, base: Register, flow: &Flow, strict: bool) -> (Option<u64>, HashSet<usize>) {
    let (writers, entered) = reaching_writers(ins, at, base, flow, strict);
    let table = writers.and_then(|writers| {
        let mut table = None;
        for w in writers {
            let w = &ins[w].raw;
            let t = (w.mnemonic() == Mnemonic::Lea && w.memory_base() == Register::RIP).then(|| w.ip_rel_memory_address())?;
            if table.replace(t).is_some_and(|old| old != t) {
                return None;
            }
        }
        table
    });
    (table, entered)
}

/// The instructions that last write `reg` on the paths into `at`, walking the CFG back.
/// `None` when some path reaches the function entry or a call that may clobber `reg`
/// without a write, or, if `strict`, a block without known predecessors that is not
/// alignment padding (not strict: such paths are ignored, to find a candidate that the
/// strict walk then checks). With them, the blocks the walk entered (a set, not a flag
/// per block: a walk is short, the function may be millions of blocks).
fn reaching_writers(ins: &[DecodedInstruction], at: usize, reg: Register, flow: &Flow, strict: bool) -> (Option<Vec<usize>>, HashSet<usize>) {
    let mut factory = InstructionInfoFactory::new();
    let block_of = |i: usize| flow.blocks.partition_point(|b| b.first_instruction <= i).checked_sub(1);
    // `visited` as the walk had it (the first block again only when a loop leads back to
    // it, then whole); `entered` adds the first block
    let (mut visited, mut entered) = (HashSet::new(), HashSet::new());
    let Some(first) = block_of(at) else { return (None, entered) };
    entered.insert(first);
    let mut work = vec![(first, at)];
    let mut writers = Vec::new();
    while let Some((b, end)) = work.pop() {
        let block = &flow.blocks[b];
        match (block.first_instruction..end).rev().find(|&k| writes(&mut factory, &ins[k].raw, reg) || clobbers(&ins[k].raw, reg)) {
            Some(k) if clobbers(&ins[k].raw, reg) => return (None, entered),
            Some(k) => writers.push(k),
            None if b == 0 => return (None, entered),
            None if flow.preds[b].is_empty() => {
                let padding = ins[block.first_instruction..end].iter().all(|i| matches!(i.raw.mnemonic(), Mnemonic::Nop | Mnemonic::Int3));
                if strict && !padding && !flow.complete {
                    return (None, entered);
                }
            }
            None => {
                for &p in &flow.preds[b] {
                    let p = p as usize;
                    if visited.insert(p) {
                        entered.insert(p);
                        work.push((p, flow.blocks[p].first_instruction + flow.blocks[p].instruction_count));
                    }
                }
            }
        }
    }
    (Some(writers), entered)
}

/// A call may overwrite every caller-saved register of the System V ABI.
fn clobbers(i: &Instruction, reg: Register) -> bool {
    use Register::*;
    i.mnemonic() == Mnemonic::Call && matches!(reg, RAX | RCX | RDX | RSI | RDI | R8 | R9 | R10 | R11)
}

/// The closest instruction before `at` that writes the full register `reg`.
fn last_writer(ins: &[DecodedInstruction], at: usize, reg: Register) -> Option<usize> {
    let mut factory = InstructionInfoFactory::new();
    (0..at).rev().find(|&k| writes(&mut factory, &ins[k].raw, reg))
}

fn writes(factory: &mut InstructionInfoFactory, i: &Instruction, reg: Register) -> bool {
    factory.info(i).used_registers().iter().any(|u| {
        u.register().full_register() == reg
            && matches!(u.access(), OpAccess::Write | OpAccess::CondWrite | OpAccess::ReadWrite | OpAccess::ReadCondWrite)
    })
}

/// Where the index value lives while walking back from the table load to its guard.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Tracked {
    Register(Register),
    /// gcc often compares the switch value in memory and loads it again after the guard:
    /// `cmp dword [rdi+rax*4], 8; ja ...; mov edx, [rdi+rax*4]`.
    Memory { base: Register, index: Register, scale: u32, displacement: u64, size: usize },
}

impl Tracked {
    fn memory_of(i: &Instruction) -> Tracked {
        Tracked::Memory {
            base: i.memory_base().full_register(),
            index: i.memory_index().full_register(),
            scale: i.memory_index_scale(),
            displacement: i.memory_displacement64(),
            size: i.memory_size().size(),
        }
    }

    /// Does `i` change the tracked value (or the registers addressing it)?
    fn changed_by(self, factory: &mut InstructionInfoFactory, i: &Instruction) -> bool {
        match self {
            Tracked::Register(r) => writes(factory, i, r),
            Tracked::Memory { base, index, displacement, size, .. } => {
                let info = factory.info(i);
                // A store elsewhere off the same base (gcc clears a flag beside the switch
                // value between guard and load: `mov byte [r14+0x2df], 0`) leaves it alone.
                let apart = |m: &iced_x86::UsedMemory| {
                    let (d, n) = (m.displacement(), m.memory_size().size() as u64);
                    let (t, tn) = (displacement, size as u64);
                    index == Register::None
                        && m.index() == Register::None
                        && m.base().full_register() == base
                        && n > 0
                        && (d.wrapping_sub(t) >= tn && t.wrapping_sub(d) >= n)
                };
                let stores = info
                    .used_memory()
                    .iter()
                    .any(|m| matches!(m.access(), OpAccess::Write | OpAccess::CondWrite | OpAccess::ReadWrite | OpAccess::ReadCondWrite) && !apart(m));
                stores || writes(factory, i, base) || (index != Register::None && writes(factory, i, index))
            }
        }
    }
}

/// The number of entries the guard allows: `cmp idx, N` followed by `ja` (N+1 entries) or
/// `jae` (N), with the index unchanged (or only copied, `mov eax, edi`, or loaded from the
/// compared memory) between the guard and the load, and no call between them. A branch
/// landing between guard and load must be a guard too (`cmp idx, N; jbe dispatch`, as gcc
/// emits when a loop re-enters the switch); the table then has the larger bound.
fn guard_bound(ins: &[DecodedInstruction], load: &TableLoad, leaders: &BTreeSet<u64>) -> Option<(u64, usize)> {
    let mut factory = InstructionInfoFactory::new();
    let mut index = Tracked::Register(load.index);
    let mut joins: Vec<(u64, Tracked)> = Vec::new();
    if leaders.contains(&ins[load.load].address) {
        joins.push((ins[load.load].address, index));
    }
    // clang -O0 spills the index, compares the register (`sub rax, N; ja`) and reloads the
    // spill: a register guard seen while tracking memory holds once the spill is found.
    let mut spilled_guard: Option<(Register, usize, u64)> = None;
    let first = load.load.saturating_sub(GUARD_WINDOW);
    for k in (first..load.load).rev() {
        let i = &ins[k].raw;
        let found = flag_user(ins, k, load.load).and_then(|b| Some((b, guard_at(i, &ins[b].raw, index)?)));
        let found = found.or_else(|| spilled_guard.filter(|&(r, ..)| stores(i, index, r)).map(|(_, b, n)| (b, n)));
        if let Some((branch, bound)) = found {
            // Joins between the guard's branch and the load were recorded on the way back.
            joins.retain(|&(at, _)| at > ins[branch].address);
            let mut bound = bound;
            for &(at, tracked) in &joins {
                bound = bound.max(entering_guard(ins, at, tracked, &mut factory)?);
            }
            return (bound > 0 && bound <= MAX_ENTRIES).then_some((bound, branch));
        }
        if i.mnemonic() == Mnemonic::Call {
            return None;
        }
        if spilled_guard.is_some_and(|(r, ..)| writes(&mut factory, i, r)) {
            spilled_guard = None;
        }
        if let (Tracked::Memory { .. }, None) = (index, spilled_guard) {
            spilled_guard = register_guard(ins, k, load.load);
        }
        if index.changed_by(&mut factory, i) {
            index = copied_from(i, index)?;
        }
        if leaders.contains(&ins[k].address) {
            joins.push((ins[k].address, index));
        }
    }
    None
}

/// `sub r, N` or `cmp r, N` at `k` followed by `ja`/`jae` before `end`: (r, branch, bound).
fn register_guard(ins: &[DecodedInstruction], k: usize, end: usize) -> Option<(Register, usize, u64)> {
    let i = &ins[k].raw;
    if !matches!(i.mnemonic(), Mnemonic::Sub | Mnemonic::Cmp) || i.op0_kind() != OpKind::Register {
        return None;
    }
    let r = i.op0_register().full_register();
    let branch = flag_user(ins, k, end)?;
    // As a `cmp` of the register's value before the `sub`.
    let bound = guard_at_cmp_like(i, &ins[branch].raw, Tracked::Register(r))?;
    Some((r, branch, bound))
}

/// Does `i` store exactly the register `r` into the tracked memory cell?
fn stores(i: &Instruction, index: Tracked, r: Register) -> bool {
    i.mnemonic() == Mnemonic::Mov
        && i.op0_kind() == OpKind::Memory
        && i.op1_kind() == OpKind::Register
        && i.op1_register().full_register() == r
        && i.op1_register().size() == 8
        && Tracked::memory_of(i) == index
}

/// The bound of every branch to `at` (a join point before the table load): each must be
/// `cmp index, N; jbe at` (N+1 entries) or `jb at` (N), nothing else.
fn entering_guard(ins: &[DecodedInstruction], at: u64, index: Tracked, factory: &mut InstructionInfoFactory) -> Option<u64> {
    let mut bound = 0;
    for (m, branch) in ins.iter().enumerate().filter(|(_, i)| i.target == Some(at) && i.kind.is_branch()) {
        let (k, cmp) = ins[..m].iter().enumerate().rev().find(|(_, i)| i.raw.rflags_modified() != 0 || i.kind != crate::InstructionKind::Other)?;
        if ins[k + 1..m].iter().any(|i| index.changed_by(factory, &i.raw)) {
            return None;
        }
        let n = compared_bound(&cmp.raw, index)?;
        bound = bound.max(match branch.raw.mnemonic() {
            Mnemonic::Jbe => n.checked_add(1)?,
            Mnemonic::Jb => n,
            _ => return None,
        });
    }
    Some(bound)
}

/// The conditional jump after `cmp` at `k` that reads its flags: the first one before `end`,
/// provided nothing between them sets flags (gcc schedules `lea`s between the two).
fn flag_user(ins: &[DecodedInstruction], k: usize, end: usize) -> Option<usize> {
    for (n, i) in ins.iter().enumerate().take(end).skip(k + 1) {
        if i.kind == crate::InstructionKind::ConditionalJump {
            return Some(n);
        }
        if i.raw.rflags_modified() != 0 || i.kind != crate::InstructionKind::Other {
            return None;
        }
    }
    None
}

/// A copy into the tracked register (`mov eax, edi`, `movzx`, `mov eax, [mem]`) moves the
/// tracking to its source, and a 64-bit `lea` into a register addressing the tracked
/// memory rewrites the address (`lea rcx, [rdx+12]` makes `[rax+rcx*4]` the cell
/// `[rax+rdx*4+48]` that clang compared); anything else changes the index after the guard.
fn copied_from(i: &Instruction, index: Tracked) -> Option<Tracked> {
    let dst = (i.op0_kind() == OpKind::Register).then(|| i.op0_register().full_register())?;
    match index {
        Tracked::Register(r) => {
            let copy = matches!(i.mnemonic(), Mnemonic::Mov | Mnemonic::Movzx) && dst == r;
            match i.op1_kind() {
                OpKind::Register if copy => Some(Tracked::Register(i.op1_register().full_register())),
                OpKind::Memory if copy && i.memory_base() != Register::RIP => Some(Tracked::memory_of(i)),
                _ => None,
            }
        }
        Tracked::Memory { base, index: idx, scale, displacement, size } => {
            let offset_lea = i.mnemonic() == Mnemonic::Lea
                && i.op0_register().size() == 8
                && i.memory_index() == Register::None
                && !matches!(i.memory_base(), Register::None | Register::RIP);
            if !offset_lea || base == idx {
                return None;
            }
            let (src, k) = (i.memory_base().full_register(), i.memory_displacement64());
            if dst == idx {
                Some(Tracked::Memory { base, index: src, scale, displacement: displacement.wrapping_add(k.wrapping_mul(u64::from(scale))), size })
            } else if dst == base {
                Some(Tracked::Memory { base: src, index: idx, scale, displacement: displacement.wrapping_add(k), size })
            } else {
                None
            }
        }
    }
}

/// `guard_at` for `sub` too: its flags are those of `cmp` with the same operands.
fn guard_at_cmp_like(i: &Instruction, branch: &Instruction, index: Tracked) -> Option<u64> {
    let mut as_cmp = *i;
    as_cmp.set_code(match i.code() {
        c if i.mnemonic() == Mnemonic::Cmp => c,
        iced_x86::Code::Sub_rm64_imm8 => iced_x86::Code::Cmp_rm64_imm8,
        iced_x86::Code::Sub_rm64_imm32 => iced_x86::Code::Cmp_rm64_imm32,
        iced_x86::Code::Sub_rm32_imm8 => iced_x86::Code::Cmp_rm32_imm8,
        iced_x86::Code::Sub_rm32_imm32 => iced_x86::Code::Cmp_rm32_imm32,
        iced_x86::Code::Sub_RAX_imm32 => iced_x86::Code::Cmp_RAX_imm32,
        iced_x86::Code::Sub_EAX_imm32 => iced_x86::Code::Cmp_EAX_imm32,
        _ => return None,
    });
    guard_at(&as_cmp, branch, index)
}

/// `cmp index, N` followed by `ja`/`jae`: the number of entries it allows.
fn guard_at(cmp: &Instruction, branch: &Instruction, index: Tracked) -> Option<u64> {
    let n = compared_bound(cmp, index)?;
    match branch.mnemonic() {
        Mnemonic::Ja => n.checked_add(1),
        Mnemonic::Jae => Some(n),
        _ => None,
    }
}

/// N of `cmp index, N`, as an unsigned number of the compared width (`cmp eax, -1` is
/// 0xffffffff, which no table passes).
fn compared_bound(cmp: &Instruction, index: Tracked) -> Option<u64> {
    let compares = cmp.mnemonic() == Mnemonic::Cmp
        && match index {
            Tracked::Register(r) => cmp.op0_kind() == OpKind::Register && cmp.op0_register().full_register() == r,
            Tracked::Memory { .. } => cmp.op0_kind() == OpKind::Memory && Tracked::memory_of(cmp) == index,
        };
    let immediate = matches!(cmp.op1_kind(), OpKind::Immediate8 | OpKind::Immediate8to32 | OpKind::Immediate8to64 | OpKind::Immediate32 | OpKind::Immediate32to64);
    if !compares || !immediate {
        return None;
    }
    let bytes = match index {
        Tracked::Register(_) => cmp.op0_register().size(),
        Tracked::Memory { size, .. } => size,
    };
    Some(cmp.immediate(1) & if bytes >= 8 { u64::MAX } else { (1u64 << (bytes * 8)) - 1 })
}
