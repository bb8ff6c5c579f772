//! What the path algorithm needs to know about code, decided with our own decoder:
//! the basic block an address starts, the kind of a block's last instruction, where a
//! Lackey superblock really ends, and whether a CFG edge is a loop back edge.
//!
//! Everything is computed once per distinct address and cached, so a stream of millions
//! of blocks costs one hash lookup per block.

use std::sync::Arc;

use kansoku_binary::{decode::decode_one, FunctionCfg, InstructionKind, Symbolizer};
use kansoku_core::Module;

use crate::fxhash::FxHashMap;

/// Interned dynamic block: index into [`CodeMap::blocks`].
pub type BlockId = u32;

/// A block start as the path profiler sees it.
#[derive(Clone, Debug)]
pub struct BlockInfo {
    /// Runtime address of the block's first instruction.
    pub addr: u64,
    /// Index of the module holding the block (the symbolizer's), `None` outside every module.
    pub module: Option<usize>,
    /// Link-time address inside the module's file.
    pub link: Option<u64>,
    /// Index into [`CodeMap::functions`].
    pub function: Option<u32>,
    /// CFG block number inside the function.
    pub cfg_block: Option<u32>,
    /// Instructions from `addr` into the CFG block (0 for a real block start; more for a
    /// block entered in its middle, e.g. by an indirect jump).
    pub offset: u32,
    /// Instructions from `addr` to the end of the block.
    pub instructions: u32,
    /// Kind of the block's last instruction (`Other` when it falls through into a leader).
    pub terminator: InstructionKind,
    /// Does the block belong to the main program (the `--scope program` filter)?
    pub in_program: bool,
    /// CFG block numbers of successors that dominate this block (loop back edges).
    pub back_targets: Vec<u32>,
    /// The block's first control transfer is a system call (`syscall`, `sysenter`): our
    /// decoder calls it a call, but the kernel comes back to the next instruction without
    /// a `ret`.
    pub ends_in_syscall: bool,
    /// The kind of section holding the block, as Valgrind tells them apart.
    pub section: SectionKind,
}

/// Where a block lies, as Valgrind's debug info sees it (`VG_(DebugInfo_sect_kind)`): a
/// module's `.text`, its `.plt`, or elsewhere (`.plt.got`, `.plt.sec`, `.init`, `.fini`,
/// code outside every module). Valgrind knows an object only by its `.text`
/// (`VG_(find_DebugInfo)`), so Callgrind puts code elsewhere in object `???`, and skips
/// `.plt` code as its caller's (`--skip-plt=yes`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SectionKind {
    /// The module's `.text`: Valgrind knows the object.
    Text,
    /// The module's `.plt`: Callgrind charges it to the caller.
    Plt,
    /// Any other section, or code outside every module (Callgrind's object `???`).
    Other,
}

/// A function whose blocks were seen.
#[derive(Clone, Debug)]
pub struct FunctionInfo {
    /// The function's demangled name.
    pub name: String,
    /// Index of its module in the symbolizer.
    pub module: usize,
    /// Its decoded CFG (shared by every block of the function).
    pub cfg: Arc<FunctionCfg>,
    /// Runtime address of the function's entry.
    pub base: u64,
}

/// One decoded instruction, reduced to what block splitting needs.
#[derive(Clone, Copy, Debug)]
pub struct InsnInfo {
    /// Length in bytes; 0 when the bytes are unknown (no file, undecodable).
    pub len: u8,
    /// How the instruction transfers control, if it does.
    pub kind: InstructionKind,
    /// A `rep`-prefixed string instruction: repeats itself (a new Lackey superblock and a
    /// new single-step per element) without being a branch.
    pub rep: bool,
    /// Starts a basic block of our CFG.
    pub leader: bool,
    /// Direct branch target.
    pub target: Option<u64>,
    /// `syscall` or `sysenter` (kind `Call` for our decoder).
    pub syscall: bool,
}

impl InsnInfo {
    /// Ends a dynamic block: a control transfer (branch, call, return, syscall).
    pub fn transfers(&self) -> bool {
        self.kind != InstructionKind::Other
    }
}

/// The straight-line run Valgrind translates from a superblock entry (with chasing off):
/// instructions up to the first control transfer, `rep` instruction, or the VEX limit.
#[derive(Clone, Debug)]
pub struct Run {
    /// Addresses of the run's instructions, the entry first.
    pub insns: Vec<u64>,
    /// Leaders crossed after the entry: (index into `insns`, block).
    pub leaders: Vec<(u32, BlockId)>,
    /// Kind of the last instruction.
    pub last: InsnInfo,
    /// Address after the last instruction.
    pub end: u64,
    /// The run stopped at the instruction limit, not at a transfer or `rep`.
    pub limit_cut: bool,
}

/// A superblock entry as the splitter uses it on every execution, reduced from its [`Run`]
/// once: plain data, so that the hot loop copies it instead of looking up and counting
/// references to the run (the run is fetched only for a superblock left in the middle).
#[derive(Clone, Copy, Debug)]
pub struct SuperblockPlan {
    /// Runtime address of the superblock's entry.
    pub entry: u64,
    /// The block starting at the entry, interned on first use (`NO_BLOCK` until then: an
    /// entry that only continues a block never becomes one).
    entry_block: BlockId,
    /// The entry is a leader of our CFG.
    pub entry_leader: bool,
    /// `leaders[from..to]` of [`CodeMap::plan_leaders`]: leaders crossed after the entry.
    leaders: (u32, u32),
    /// The last instruction of the run.
    pub last: InsnInfo,
    /// Address of the last instruction.
    pub last_addr: u64,
    /// Address after the last instruction.
    pub end: u64,
    /// The run stopped at the VEX instruction limit, not at a transfer or `rep`.
    pub limit_cut: bool,
}

const NO_BLOCK: BlockId = BlockId::MAX;
/// No superblock entry is at this address: an empty slot of the successor caches.
const NO_ADDR: u64 = u64::MAX;

/// Facts the path profiler asks about blocks; [`CodeMap`] answers them from real code,
/// tests answer them from small tables.
pub trait BlockFacts {
    /// Runtime address of block `b`'s first instruction.
    fn addr(&self, b: BlockId) -> u64;
    /// The function block `b` lies in ([`CodeMap::functions`] index), if known.
    fn function(&self, b: BlockId) -> Option<u32>;
    /// CFG block number of `b` inside its function, if known.
    fn cfg_block(&self, b: BlockId) -> Option<u32>;
    /// Is `from -> to` a loop back edge of the CFG (target dominates source)?
    fn is_loop_back_edge(&self, from: BlockId, to: BlockId) -> bool;
    /// Is `b` kept in paths (the [`Scope`] filter)?
    fn in_scope(&self, b: BlockId) -> bool;
    /// Does the block end in a system call (a "call" that no `ret` ends)?
    fn ends_in_syscall(&self, _b: BlockId) -> bool {
        false
    }
}

/// Which blocks are kept in paths.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Scope {
    /// Only blocks of the main program (libraries and the loader still decide the cuts).
    Program,
    /// Every block of the process.
    All,
}

/// Decodes and interns the code of one observed process.
pub struct CodeMap {
    /// Module map and symbols of the process (runtime address to file, function and line).
    pub symbolizer: Symbolizer,
    program_path: Option<String>,
    /// Which blocks paths keep.
    pub scope: Scope,
    blocks: Vec<BlockInfo>,
    by_addr: FxHashMap<u64, BlockId>,
    functions: Vec<FunctionInfo>,
    function_index: FxHashMap<(usize, u64), u32>,
    insns: FxHashMap<u64, InsnInfo>,
    runs: FxHashMap<u64, Arc<Run>>,
    plans: Vec<SuperblockPlan>,
    plan_index: FxHashMap<u64, u32>,
    plan_leaders: Vec<(u32, BlockId)>,
    /// Per plan, the last two superblocks entered after it (address, plan): control flow
    /// repeats, so the next entry is nearly always one of them and needs no hash lookup.
    plan_next: Vec<[(u64, u32); 2]>,
}

impl CodeMap {
    /// `program_path`: the main program's path as modules name it (for `Scope::Program`).
    pub fn new(program_path: Option<String>, scope: Scope) -> Self {
        CodeMap {
            symbolizer: Symbolizer::new(&[]),
            program_path,
            scope,
            blocks: Vec::new(),
            by_addr: FxHashMap::default(),
            functions: Vec::new(),
            function_index: FxHashMap::default(),
            insns: FxHashMap::default(),
            runs: FxHashMap::default(),
            plans: Vec::new(),
            plan_index: FxHashMap::default(),
            plan_leaders: Vec::new(),
            plan_next: Vec::new(),
        }
    }

    /// Adds a mapped module; the first one added is the main program unless it was named.
    pub fn add_module(&mut self, module: Module) {
        if self.program_path.is_none() {
            // A recording's first module is the program itself.
            self.program_path = Some(module.path.clone());
        }
        self.symbolizer.add_module(module);
    }

    /// The main program's path, once known.
    pub fn program_path(&self) -> Option<&str> {
        self.program_path.as_deref()
    }

    /// Every interned block, indexed by [`BlockId`].
    pub fn blocks(&self) -> &[BlockInfo] {
        &self.blocks
    }

    /// Block `b`'s facts.
    pub fn block(&self, b: BlockId) -> &BlockInfo {
        &self.blocks[b as usize]
    }

    /// Every function whose blocks were seen (what [`BlockInfo::function`] indexes).
    pub fn functions(&self) -> &[FunctionInfo] {
        &self.functions
    }

    fn function_id(&mut self, module: usize, cfg: &Arc<FunctionCfg>, addr: u64, link: u64) -> u32 {
        if let Some(&f) = self.function_index.get(&(module, cfg.address)) {
            return f;
        }
        let id = self.functions.len() as u32;
        self.functions.push(FunctionInfo {
            name: kansoku_binary::program::demangle(&cfg.name),
            module,
            cfg: cfg.clone(),
            base: addr - (link - cfg.address),
        });
        self.function_index.insert((module, cfg.address), id);
        id
    }

    /// The instruction at a runtime address.
    pub fn insn(&mut self, addr: u64) -> InsnInfo {
        if let Some(i) = self.insns.get(&addr) {
            return *i;
        }
        let info = self.decode_insn(addr);
        self.insns.insert(addr, info);
        info
    }

    fn decode_insn(&mut self, addr: u64) -> InsnInfo {
        let unknown = InsnInfo { len: 0, kind: InstructionKind::Other, rep: false, leader: false, target: None, syscall: false };
        let Some(r) = self.symbolizer.resolve(addr) else { return unknown };
        let to_runtime = |t: u64| t.wrapping_add(addr).wrapping_sub(r.link_address);
        if let Some(cfg) = &r.function {
            if let Some(i) = cfg.instruction_index(r.link_address) {
                let ins = &cfg.instructions[i];
                return InsnInfo {
                    len: ins.length,
                    kind: ins.kind,
                    rep: is_rep(&ins.raw),
                    leader: cfg.block_starting_at(r.link_address).is_some(),
                    target: ins.target.map(to_runtime),
                    syscall: is_syscall(&ins.raw),
                };
            }
        }
        // Outside any function symbol (PLT0, ld.so's `_dl_start_user`) or misaligned with
        // our decode: decode here. Such a stretch has no CFG: its blocks run to the first
        // transfer, so only its first instruction (after a function or the module's start)
        // is a leader; a fall-through inside it stays in the block, as each instruction is
        // counted once (every instruction a leader counted `_dl_start_user`'s tail ten times).
        let first_of_stretch = r.function.is_none()
            && addr.checked_sub(1).and_then(|p| self.symbolizer.resolve(p)).map_or(true, |p| p.module != r.module || p.function.is_some());
        let Some(program) = self.symbolizer.program(r.module) else { return unknown };
        let Some(bytes) = program.code_at(r.link_address) else { return unknown };
        match decode_one(bytes, r.link_address) {
            Some(ins) => InsnInfo {
                len: ins.length,
                kind: ins.kind,
                rep: is_rep(&ins.raw),
                leader: first_of_stretch,
                target: ins.target.map(to_runtime),
                syscall: is_syscall(&ins.raw),
            },
            None => unknown,
        }
    }

    /// The block starting at a runtime address (interned).
    pub fn block_at(&mut self, addr: u64) -> BlockId {
        if let Some(&b) = self.by_addr.get(&addr) {
            return b;
        }
        let mut info = self.describe_block(addr);
        info.ends_in_syscall = self.first_transfer(addr).is_some_and(|i| i.syscall);
        let id = self.blocks.len() as BlockId;
        self.blocks.push(info);
        self.by_addr.insert(addr, id);
        id
    }

    fn describe_block(&mut self, addr: u64) -> BlockInfo {
        let module = self.symbolizer.module_of(addr);
        let in_program = match self.scope {
            Scope::All => true,
            Scope::Program => match (module, &self.program_path) {
                (Some(m), Some(p)) => &self.symbolizer.modules()[m].path == p,
                _ => false,
            },
        };
        let mut info = BlockInfo {
            addr,
            module,
            link: None,
            function: None,
            cfg_block: None,
            offset: 0,
            instructions: 1,
            terminator: InstructionKind::Other,
            in_program,
            back_targets: Vec::new(),
            ends_in_syscall: false,
            section: SectionKind::Other,
        };
        let Some(r) = self.symbolizer.resolve(addr) else { return info };
        info.link = Some(r.link_address);
        info.section = match self.symbolizer.program(r.module).and_then(|p| p.section_name(r.link_address)) {
            Some(".text") => SectionKind::Text,
            Some(".plt") => SectionKind::Plt,
            _ => SectionKind::Other,
        };
        if let Some(cfg) = &r.function {
            if let Some(i) = cfg.instruction_containing(r.link_address) {
                if let Some(b) = cfg.block_of_instruction(i) {
                    let f = self.function_id(r.module, cfg, addr, r.link_address);
                    info.function = Some(f);
                    info.cfg_block = Some(b.index);
                    info.offset = (i - b.first_instruction) as u32;
                    info.instructions = (b.first_instruction + b.instruction_count - i) as u32;
                    info.terminator = b.terminator;
                    info.back_targets = b.successors.iter().copied().filter(|&s| cfg.dominates(s, b.index)).collect();
                    return info;
                }
            }
        }
        // No CFG (PLT stubs, stripped code): walk the decoder to the first transfer, or to
        // the next leader it would fall into (a function's start).
        let mut a = addr;
        let mut n = 0;
        loop {
            let ins = self.insn(a);
            if n > 0 && ins.leader {
                info.terminator = InstructionKind::Other;
                break;
            }
            n += 1;
            if ins.len == 0 || ins.transfers() || n >= 256 {
                info.terminator = ins.kind;
                break;
            }
            a += ins.len as u64;
        }
        info.instructions = n;
        info
    }

    /// Runtime addresses of block `b`'s instructions, in order.
    pub(crate) fn block_instructions(&mut self, b: BlockId) -> Vec<u64> {
        let info = self.block(b);
        let (mut a, n) = (info.addr, info.instructions);
        let mut out = Vec::with_capacity(n as usize);
        for _ in 0..n {
            out.push(a);
            let len = self.insn(a).len;
            if len == 0 {
                break;
            }
            a += u64::from(len);
        }
        out
    }

    /// The first control transfer executed from `addr` on (None: unknown bytes first).
    fn first_transfer(&mut self, addr: u64) -> Option<InsnInfo> {
        let mut a = addr;
        for _ in 0..256 {
            let ins = self.insn(a);
            if ins.len == 0 {
                return None;
            }
            if ins.transfers() {
                return Some(ins);
            }
            a += ins.len as u64;
        }
        None
    }

    /// The run Valgrind executes from superblock entry `addr` with at most `max` instructions.
    pub fn run(&mut self, addr: u64, max: usize) -> Arc<Run> {
        if let Some(r) = self.runs.get(&addr) {
            return r.clone();
        }
        let mut insns = Vec::new();
        let mut leaders = Vec::new();
        let mut a = addr;
        let mut limit_cut = false;
        let last = loop {
            let ins = self.insn(a);
            if !insns.is_empty() && ins.leader {
                let b = self.block_at(a);
                leaders.push((insns.len() as u32, b));
            }
            insns.push(a);
            if ins.len == 0 || ins.transfers() || ins.rep {
                break ins;
            }
            a += ins.len as u64;
            if insns.len() >= max {
                limit_cut = true;
                break ins;
            }
        };
        let end = insns.last().copied().unwrap_or(addr) + last.len as u64;
        let run = Arc::new(Run { insns, leaders, last, end, limit_cut });
        self.runs.insert(addr, run.clone());
        run
    }
}

impl CodeMap {
    /// The plan of the superblock entry at `addr` (runs of at most `max` instructions).
    pub(crate) fn plan_id(&mut self, addr: u64, max: usize) -> u32 {
        if let Some(&id) = self.plan_index.get(&addr) {
            return id;
        }
        let run = self.run(addr, max);
        let from = self.plan_leaders.len() as u32;
        self.plan_leaders.extend_from_slice(&run.leaders);
        let id = self.plans.len() as u32;
        let entry_leader = self.insn(addr).leader;
        self.plans.push(SuperblockPlan {
            entry: addr,
            entry_block: NO_BLOCK,
            entry_leader,
            leaders: (from, self.plan_leaders.len() as u32),
            last: run.last,
            last_addr: run.insns.last().copied().unwrap_or(addr),
            end: run.end,
            limit_cut: run.limit_cut,
        });
        self.plan_next.push([(NO_ADDR, 0); 2]);
        self.plan_index.insert(addr, id);
        id
    }

    /// The plan of the superblock entered at `addr` right after plan `from`.
    #[inline]
    pub(crate) fn next_plan(&mut self, from: u32, addr: u64, max: usize) -> u32 {
        let seen = &mut self.plan_next[from as usize];
        if seen[0].0 == addr {
            return seen[0].1;
        }
        if seen[1].0 == addr {
            seen.swap(0, 1);
            return seen[0].1;
        }
        let id = self.plan_id(addr, max);
        let seen = &mut self.plan_next[from as usize];
        seen[1] = seen[0];
        seen[0] = (addr, id);
        id
    }

    /// Superblock plan `id` (as `plan_id` numbers them).
    #[inline]
    pub fn plan(&self, id: u32) -> SuperblockPlan {
        self.plans[id as usize]
    }

    /// The block starting at plan `id`'s entry.
    #[inline]
    pub(crate) fn plan_entry_block(&mut self, id: u32) -> BlockId {
        let b = self.plans[id as usize].entry_block;
        if b != NO_BLOCK {
            return b;
        }
        let b = self.block_at(self.plans[id as usize].entry);
        self.plans[id as usize].entry_block = b;
        b
    }

    /// The `i`th leader the plan's run crosses after its entry: (index of the instruction
    /// in the run, block).
    #[inline]
    pub(crate) fn plan_leader(&self, p: &SuperblockPlan, i: u32) -> Option<(u32, BlockId)> {
        let at = p.leaders.0 + i;
        (at < p.leaders.1).then(|| self.plan_leaders[at as usize])
    }
}

fn is_syscall(raw: &iced_x86::Instruction) -> bool {
    matches!(raw.mnemonic(), iced_x86::Mnemonic::Syscall | iced_x86::Mnemonic::Sysenter)
}

fn is_rep(raw: &iced_x86::Instruction) -> bool {
    raw.is_string_instruction() && (raw.has_rep_prefix() || raw.has_repne_prefix())
}

impl BlockFacts for CodeMap {
    #[inline]
    fn addr(&self, b: BlockId) -> u64 {
        self.blocks[b as usize].addr
    }
    #[inline]
    fn function(&self, b: BlockId) -> Option<u32> {
        self.blocks[b as usize].function
    }
    #[inline]
    fn cfg_block(&self, b: BlockId) -> Option<u32> {
        self.blocks[b as usize].cfg_block
    }
    #[inline]
    fn is_loop_back_edge(&self, from: BlockId, to: BlockId) -> bool {
        let (f, t) = (&self.blocks[from as usize], &self.blocks[to as usize]);
        match (f.function, t.function, t.cfg_block, t.offset) {
            (Some(a), Some(b), Some(target), 0) if a == b => f.back_targets.contains(&target),
            _ => false,
        }
    }
    #[inline]
    fn in_scope(&self, b: BlockId) -> bool {
        self.blocks[b as usize].in_program
    }
    #[inline]
    fn ends_in_syscall(&self, b: BlockId) -> bool {
        self.blocks[b as usize].ends_in_syscall
    }
}
