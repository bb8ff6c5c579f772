//! From what a source observes to basic-block entries.
//!
//! The path algorithm wants, for every executed basic block, its start and the kind of
//! the previous block's last instruction. Sources give less or more than that:
//!
//! * [`SuperblockSplitter`] — Valgrind/Lackey superblock entries. With chasing off a
//!   superblock runs from its entry to the first control transfer, `rep` instruction or the
//!   VEX instruction limit; it may cross leaders of our CFG (a block falling through into a
//!   branch target), which we split out, and a superblock cut at the limit is a
//!   *continuation*: the next entry is not a new block unless it is a leader.
//! * [`InstructionReducer`] — every executed instruction (the exact tracer): a block starts
//!   after a control transfer, at a leader reached by falling through, or after a jump in
//!   the address sequence that no instruction explains (a signal handler). A `rep`
//!   instruction repeating itself is not a new block.
//! * [`BasicBlockStream`] — already split entries (our own block recordings).
//!
//! All three produce identical entries for the same execution; the tests check that on
//! real programs.

use kansoku_binary::InstructionKind;

use crate::code::{BlockId, CodeMap, InsnInfo, SuperblockPlan};

/// VEX's default `--vex-guest-max-insns`: a superblock holds at most this many instructions.
pub(crate) const VEX_MAX_INSNS: usize = 50;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Prev {
    Start,
    /// The previous superblock ended with this control transfer.
    Transfer(InstructionKind),
    /// The previous superblock was cut before the next entry's address.
    Continuation,
    /// The previous superblock ended at a `rep` instruction (address, next address).
    Rep(u64, u64),
}

/// Splits Lackey superblock entries into basic-block entries (one entry of lookahead).
#[derive(Clone)]
pub struct SuperblockSplitter {
    /// The plan of the entry waiting for its successor (which says where it was left).
    pending: Option<u32>,
    prev: Prev,
    max_insns: usize,
    /// Superblocks that ended at a non-transfer other than the VEX limit (diagnostic).
    pub unexpected_cuts: u64,
    /// Repetitions of a `rep` string instruction seen since the caller last took them
    /// ([`SuperblockSplitter::take_repeats`]): VEX runs each element as one more entry of
    /// the instruction's superblock, and Callgrind counts each as one more execution of it.
    repeats: Repeats,
}

/// Repetitions of one `rep` instruction not yet taken by the caller.
#[derive(Clone, Copy, Debug, Default)]
pub struct Repeats {
    /// Runtime address of the instruction.
    pub addr: u64,
    /// Executions beyond the one its block's entry counts.
    pub count: u64,
}

impl Repeats {
    #[inline]
    fn add(&mut self, addr: u64) {
        self.addr = addr;
        self.count += 1;
    }

    /// The repetitions so far, if any, leaving none.
    #[inline]
    fn take(&mut self) -> Option<Repeats> {
        (self.count != 0).then(|| std::mem::take(self))
    }
}

impl SuperblockSplitter {
    /// A splitter for superblocks of at most `max_insns` instructions (Valgrind's VEX limit, `VEX_MAX_INSNS`).
    pub fn new(max_insns: usize) -> Self {
        SuperblockSplitter { pending: None, prev: Prev::Start, max_insns, unexpected_cuts: 0, repeats: Repeats::default() }
    }

    /// One superblock entry.
    #[inline]
    pub fn push(&mut self, addr: u64, code: &mut CodeMap, out: &mut impl FnMut(&mut CodeMap, BlockId, InstructionKind)) {
        let id = match self.pending {
            Some(p) => code.next_plan(p, addr, self.max_insns),
            None => code.plan_id(addr, self.max_insns),
        };
        if let Some(p) = self.pending.replace(id) {
            self.process(p, Some(addr), code, out);
        }
    }

    /// The stream ended (or was interrupted, e.g. by a crash at `fault`): the last
    /// superblock runs to its end, or to the faulting instruction.
    pub fn finish(&mut self, fault: Option<u64>, code: &mut CodeMap, out: &mut impl FnMut(&mut CodeMap, BlockId, InstructionKind)) {
        if let Some(p) = self.pending.take() {
            self.process(p, fault, code, out);
        }
        self.prev = Prev::Start;
    }

    /// Forgets the superblock in progress without emitting it (e.g. garbled input).
    pub(crate) fn reset(&mut self, code: &mut CodeMap, out: &mut impl FnMut(&mut CodeMap, BlockId, InstructionKind)) {
        self.finish(None, code, out);
    }

    /// The `rep` repetitions met since the last call: the caller takes them after every
    /// [`SuperblockSplitter::push`] and [`SuperblockSplitter::finish`] (at most one
    /// instruction's, since a repetition is a superblock of its own).
    #[inline]
    pub(crate) fn take_repeats(&mut self) -> Option<Repeats> {
        self.repeats.take()
    }

    /// The entry block of plan `id`, if this superblock starts a basic block.
    #[inline]
    fn enter(&mut self, id: u32, code: &mut CodeMap, out: &mut impl FnMut(&mut CodeMap, BlockId, InstructionKind)) {
        let p = code.plan(id);
        let kind = match self.prev {
            Prev::Start => Some(InstructionKind::Other),
            Prev::Transfer(k) => Some(k),
            Prev::Continuation => p.entry_leader.then_some(InstructionKind::Other),
            // the rep instruction's next element: same block, one more execution of it
            Prev::Rep(r, _) if p.entry == r => {
                self.repeats.add(r);
                None
            }
            Prev::Rep(_, n) if p.entry == n => p.entry_leader.then_some(InstructionKind::Other),
            Prev::Rep(..) => Some(InstructionKind::Other),
        };
        if let Some(k) = kind {
            let b = code.plan_entry_block(id);
            out(code, b, k)
        }
    }

    /// How many of the run's instructions ran before `next` was entered, and whether the
    /// superblock was left in the middle (so `next` continues it).
    #[inline]
    fn ran(&mut self, p: &SuperblockPlan, next: Option<u64>, code: &mut CodeMap) -> (u32, bool) {
        let Some(n) = next else { return (u32::MAX, false) };
        if p.limit_cut && n == p.end {
            return (u32::MAX, true);
        }
        // The usual ways out, a taken branch or falling off the end, need no search.
        if (p.last.transfers() && p.last.target == Some(n)) || n == p.end || n <= p.entry || n > p.last_addr {
            return (u32::MAX, false);
        }
        if p.last.rep && n == p.last_addr {
            // the superblock's last instruction, a rep string, repeats: it ran, and the
            // next entry is its next element (Callgrind counts each)
            return (u32::MAX, false);
        }
        let run = code.run(p.entry, self.max_insns);
        match run.insns[1..].binary_search(&n) {
            Ok(j) => {
                if !(run.last.rep && n == *run.insns.last().unwrap()) {
                    self.unexpected_cuts += 1;
                }
                (j as u32 + 1, true)
            }
            Err(_) => (u32::MAX, false),
        }
    }

    fn process(&mut self, id: u32, next: Option<u64>, code: &mut CodeMap, out: &mut impl FnMut(&mut CodeMap, BlockId, InstructionKind)) {
        self.enter(id, code, out);
        let p = code.plan(id);
        let (stop, cut) = self.ran(&p, next, code);
        let mut i = 0;
        while let Some((j, b)) = code.plan_leader(&p, i) {
            if j < stop {
                out(code, b, InstructionKind::Other);
            }
            i += 1;
        }
        self.prev = if cut {
            Prev::Continuation
        } else if p.last.rep {
            Prev::Rep(p.last_addr, p.end)
        } else if p.limit_cut {
            Prev::Transfer(InstructionKind::Other)
        } else {
            Prev::Transfer(p.last.kind)
        };
    }
}

/// Reduces an instruction stream (one thread) to basic-block entries.
///
/// A trace lists a `rep` string instruction once per element (once when its count is
/// zero), as a single-stepped CPU runs it. VEX, and so Callgrind, enters it once more after
/// the last element, to find the count at zero: an instruction listed k ≥ 2 times in a row
/// counts k + 1 executions, Callgrind's Ir. Listed once, it counts once: its count was
/// zero or one, which the trace cannot tell (Callgrind counts 1 or 2).
#[derive(Default)]
pub struct InstructionReducer {
    prev: Option<(u64, InsnInfo)>,
    repeats: Repeats,
    /// The instruction pushed last repeated a `rep` instruction.
    in_rep: bool,
}

impl InstructionReducer {
    /// Feeds the next executed instruction at `addr`; calls `out` with each basic block entered and the kind of the instruction that left the previous one.
    #[inline]
    pub fn push(&mut self, addr: u64, code: &mut CodeMap, out: &mut impl FnMut(&mut CodeMap, BlockId, InstructionKind)) {
        let info = code.insn(addr);
        let was_in_rep = std::mem::take(&mut self.in_rep);
        match self.prev {
            None => {
                let b = code.block_at(addr);
                out(code, b, InstructionKind::Other)
            }
            Some((pa, pi)) => {
                if pi.transfers() {
                    let b = code.block_at(addr);
                    out(code, b, pi.kind)
                } else if pi.rep && addr == pa {
                    // next element of a rep instruction: one more execution of it, and at
                    // its second listing the check after the last element
                    if !was_in_rep {
                        self.repeats.add(addr);
                    }
                    self.repeats.add(addr);
                    self.in_rep = true;
                } else if pi.len != 0 && addr == pa + pi.len as u64 {
                    if info.leader {
                        let b = code.block_at(addr);
                        out(code, b, InstructionKind::Other)
                    }
                } else {
                    let b = code.block_at(addr);
                    out(code, b, InstructionKind::Other)
                }
            }
        }
        self.prev = Some((addr, info));
    }

    /// The `rep` repetitions met since the last call (see [`SuperblockSplitter::take_repeats`]).
    #[inline]
    pub(crate) fn take_repeats(&mut self) -> Option<Repeats> {
        self.repeats.take()
    }
}

/// Already split block entries (our own `.ksk` block recordings): the previous block's
/// last instruction is its CFG terminator.
#[derive(Default)]
pub struct BasicBlockStream {
    prev: Option<BlockId>,
}

impl BasicBlockStream {
    /// Feeds the next block entry at `addr`; calls `out` with it and the previous block's terminator.
    #[inline]
    pub fn push(&mut self, addr: u64, code: &mut CodeMap, out: &mut impl FnMut(&mut CodeMap, BlockId, InstructionKind)) {
        let b = code.block_at(addr);
        let kind = match self.prev {
            Some(p) => code.block(p).terminator,
            None => InstructionKind::Other,
        };
        self.prev = Some(b);
        out(code, b, kind)
    }
}
