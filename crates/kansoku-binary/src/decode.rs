//! x86-64 decoding with iced-x86, reduced to what the analyses need: length, kind of
//! control transfer, direct target, memory operands and Intel-syntax text.

use iced_x86::{Decoder, DecoderOptions, FlowControl, Formatter, Instruction, IntelFormatter};
use serde::Serialize;

/// What an instruction does to control flow.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum InstructionKind {
    /// Falls through to the next instruction.
    Other,
    /// Unconditional direct or indirect jump.
    Jump,
    /// Conditional jump (also `loop`, `jrcxz`).
    ConditionalJump,
    /// Direct or indirect call.
    Call,
    /// `ret`: back to the caller.
    Return,
    /// `syscall`, `int`, `ud2` and similar: leaves the user-space flow.
    Interrupt,
}

impl InstructionKind {
    /// The four classes the seed and the issue speak of: branch / call / return / other.
    pub fn class(self) -> &'static str {
        match self {
            InstructionKind::Jump | InstructionKind::ConditionalJump => "branch",
            InstructionKind::Call => "call",
            InstructionKind::Return => "return",
            InstructionKind::Other | InstructionKind::Interrupt => "other",
        }
    }

    /// A jump, conditional or not (what a path profile counts as a branch).
    pub(crate) fn is_branch(self) -> bool {
        matches!(self, InstructionKind::Jump | InstructionKind::ConditionalJump)
    }

    /// Ends a basic block: any transfer of control.
    pub(crate) fn ends_block(self) -> bool {
        !matches!(self, InstructionKind::Other)
    }
}

/// One decoded instruction at a link-time (or runtime) address.
#[derive(Clone, Debug, Serialize)]
pub struct DecodedInstruction {
    /// Address of its first byte.
    pub address: u64,
    /// Encoded length in bytes (1–15).
    pub length: u8,
    /// How it transfers control, if it does.
    pub kind: InstructionKind,
    /// Target of a direct jump or call.
    pub target: Option<u64>,
    /// Intel-syntax disassembly (`cmp rax, rbx`).
    pub text: String,
    /// iced-x86's decoded instruction, for operand-level questions (jump tables, PLT stubs).
    #[serde(skip)]
    pub raw: Instruction,
}

impl DecodedInstruction {
    /// The address the instruction falls through to.
    pub fn next_address(&self) -> u64 {
        self.address + u64::from(self.length)
    }
}

fn kind_of(instr: &Instruction) -> InstructionKind {
    match instr.flow_control() {
        FlowControl::Next | FlowControl::XbeginXabortXend => InstructionKind::Other,
        FlowControl::UnconditionalBranch | FlowControl::IndirectBranch => InstructionKind::Jump,
        FlowControl::ConditionalBranch => InstructionKind::ConditionalJump,
        FlowControl::Call | FlowControl::IndirectCall => InstructionKind::Call,
        FlowControl::Return => InstructionKind::Return,
        FlowControl::Interrupt | FlowControl::Exception => InstructionKind::Interrupt,
    }
}

fn direct_target(instr: &Instruction) -> Option<u64> {
    match instr.flow_control() {
        FlowControl::UnconditionalBranch | FlowControl::ConditionalBranch | FlowControl::Call => {
            let t = instr.near_branch_target();
            (t != 0).then_some(t)
        }
        _ => None,
    }
}

/// Decodes every instruction of `bytes`, which start at address `ip`. Undecodable bytes
/// become one-byte `(bad)` instructions so a function's listing never stops early.
pub fn decode_all(bytes: &[u8], ip: u64) -> Vec<DecodedInstruction> {
    let mut decoder = Decoder::with_ip(64, bytes, ip, DecoderOptions::NONE);
    let mut formatter = IntelFormatter::new();
    let mut out = Vec::new();
    let mut instr = Instruction::default();
    while decoder.can_decode() {
        decoder.decode_out(&mut instr);
        let mut text = String::new();
        if instr.is_invalid() {
            text.push_str("(bad)");
        } else {
            formatter.format(&instr, &mut text);
        }
        out.push(DecodedInstruction {
            address: instr.ip(),
            length: instr.len() as u8,
            kind: if instr.is_invalid() { InstructionKind::Interrupt } else { kind_of(&instr) },
            target: direct_target(&instr),
            text,
            raw: instr,
        });
    }
    out
}

/// Decodes the single instruction at the start of `bytes` (at address `ip`).
pub fn decode_one(bytes: &[u8], ip: u64) -> Option<DecodedInstruction> {
    let mut decoder = Decoder::with_ip(64, bytes, ip, DecoderOptions::NONE);
    if !decoder.can_decode() {
        return None;
    }
    let instr = decoder.decode();
    if instr.is_invalid() {
        return None;
    }
    Some(DecodedInstruction {
        address: instr.ip(),
        length: instr.len() as u8,
        kind: kind_of(&instr),
        target: direct_target(&instr),
        text: String::new(),
        raw: instr,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_of_common_instructions() {
        // push rbp; mov rbp,rsp; je +2; call +0; ret
        let bytes = [0x55, 0x48, 0x89, 0xe5, 0x74, 0x02, 0xe8, 0, 0, 0, 0, 0xc3];
        let ins = decode_all(&bytes, 0x1000);
        let kinds: Vec<_> = ins.iter().map(|i| i.kind).collect();
        assert_eq!(
            kinds,
            vec![
                InstructionKind::Other,
                InstructionKind::Other,
                InstructionKind::ConditionalJump,
                InstructionKind::Call,
                InstructionKind::Return
            ]
        );
        assert_eq!(ins[2].target, Some(0x1008));
        assert_eq!(ins[3].target, Some(0x100b));
        assert_eq!(ins[0].text, "push rbp");
    }
}
