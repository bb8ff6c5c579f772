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

use crate::code::{BlockId, CodeMap, InsnInfo};

/// VEX's default `--vex-guest-max-insns`: a superblock holds at most this many instructions.
pub const VEX_MAX_INSNS: usize = 50;

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
pub struct SuperblockSplitter {
    pending: Option<u64>,
    prev: Prev,
    max_insns: usize,
    /// Superblocks that ended at a non-transfer other than the VEX limit (diagnostic).
    pub unexpected_cuts: u64,
}

impl SuperblockSplitter {
    pub fn new(max_insns: usize) -> Self {
        SuperblockSplitter { pending: None, prev: Prev::Start, max_insns, unexpected_cuts: 0 }
    }

    /// One superblock entry.
    #[inline]
    pub fn push(&mut self, addr: u64, code: &mut CodeMap, out: &mut impl FnMut(&mut CodeMap, BlockId, InstructionKind)) {
        if let Some(p) = self.pending.replace(addr) {
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
    pub fn reset(&mut self, code: &mut CodeMap, out: &mut impl FnMut(&mut CodeMap, BlockId, InstructionKind)) {
        self.finish(None, code, out);
    }

    fn process(&mut self, e: u64, next: Option<u64>, code: &mut CodeMap, out: &mut impl FnMut(&mut CodeMap, BlockId, InstructionKind)) {
        match self.prev {
            Prev::Start => {
                let b = code.block_at(e);
                out(code, b, InstructionKind::Other)
            }
            Prev::Transfer(k) => {
                let b = code.block_at(e);
                out(code, b, k)
            }
            Prev::Continuation => {
                if code.insn(e).leader {
                    let b = code.block_at(e);
                    out(code, b, InstructionKind::Other)
                }
            }
            Prev::Rep(r, n) => {
                if e == r {
                    // the rep instruction's next element: same block
                } else if e == n {
                    if code.insn(e).leader {
                        let b = code.block_at(e);
                        out(code, b, InstructionKind::Other)
                    }
                } else {
                    let b = code.block_at(e);
                    out(code, b, InstructionKind::Other)
                }
            }
        }
        let run = code.run(e, self.max_insns);
        let mut stop = run.insns.len();
        let mut cut = false;
        if let Some(n) = next {
            if run.limit_cut && n == run.end {
                cut = true;
            } else if !(run.last.transfers() && run.last.target == Some(n)) {
                if let Ok(j) = run.insns[1..].binary_search(&n) {
                    stop = j + 1;
                    cut = true;
                    if !(run.last.rep && n == *run.insns.last().unwrap()) {
                        self.unexpected_cuts += 1;
                    }
                }
            }
        }
        for &(j, b) in &run.leaders {
            if (j as usize) < stop {
                out(code, b, InstructionKind::Other);
            }
        }
        self.prev = if cut {
            Prev::Continuation
        } else if run.last.rep {
            Prev::Rep(*run.insns.last().unwrap(), run.end)
        } else if run.limit_cut {
            Prev::Transfer(InstructionKind::Other)
        } else {
            Prev::Transfer(run.last.kind)
        };
    }
}

/// Reduces an instruction stream (one thread) to basic-block entries.
#[derive(Default)]
pub struct InstructionReducer {
    prev: Option<(u64, InsnInfo)>,
}

impl InstructionReducer {
    #[inline]
    pub fn push(&mut self, addr: u64, code: &mut CodeMap, out: &mut impl FnMut(&mut CodeMap, BlockId, InstructionKind)) {
        let info = code.insn(addr);
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
                    // next element of a rep instruction
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
}

/// Already split block entries (our own `.ksk` block recordings): the previous block's
/// last instruction is its CFG terminator.
#[derive(Default)]
pub struct BasicBlockStream {
    prev: Option<BlockId>,
}

impl BasicBlockStream {
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
