//! Rewriting a function's entry: decide how many bytes the 5-byte `jmp` overwrites, check
//! that nothing jumps into them, move those instructions to a trampoline (iced-x86's block
//! encoder fixes their relative branches and RIP-relative operands), then write the jump.

use iced_x86::{BlockEncoder, BlockEncoderOptions, Decoder, DecoderOptions, FlowControl, Instruction, InstructionBlock, OpKind};

use kansoku_core::agent_abi::*;

/// Bytes of a `jmp rel32`.
const JMP_LEN: usize = 5;
/// Bytes read to find the instructions the jump overwrites (at most 5 + 14).
const PROLOGUE_WINDOW: usize = 32;
/// One trampoline's room: the 19-byte head, the moved instructions (which can grow when a
/// short branch becomes a long one) and the jump back.
const TRAMPOLINE_BYTES: usize = 128;

/// The instructions at a function's entry that a `jmp rel32` overwrites.
pub struct Prologue {
    /// The function's entry, where the jump is written (a runtime address).
    pub address: u64,
    /// The whole instructions the jump overwrites, moved to the trampoline (none for an
    /// XRay sled or an empty function, which are overwritten without moving anything).
    pub instructions: Vec<Instruction>,
    /// Bytes from `address` the patch replaces (at least 5: the jump, then `int3`s); a
    /// trampoline's moved instructions jump back to `address + len`.
    pub len: usize,
}

/// Decodes the whole instructions covering the first 5 bytes at `address`, refusing when
/// the function's control leaves before 5 bytes (the jump would overwrite what follows).
///
/// # Safety
/// `address` must point at readable code.
pub unsafe fn read_prologue(address: u64, size: u64) -> Result<Prologue, u32> {
    if size != 0 && size < JMP_LEN as u64 {
        return Err(REFUSE_TOO_SHORT);
    }
    let bytes = std::slice::from_raw_parts(address as *const u8, PROLOGUE_WINDOW);
    if let Some(len) = xray_sled(bytes) {
        // a sled reserved by the compiler: overwrite it, move nothing, continue after it
        return Ok(Prologue { address, instructions: Vec::new(), len });
    }
    let mut decoder = Decoder::with_ip(64, bytes, address, DecoderOptions::NONE);
    let mut instructions = Vec::new();
    let mut len = 0;
    while len < JMP_LEN {
        let i = decoder.decode();
        if i.is_invalid() {
            return Err(REFUSE_UNDECODABLE);
        }
        len += i.len();
        let leaves = matches!(i.flow_control(), FlowControl::Return | FlowControl::UnconditionalBranch | FlowControl::IndirectBranch | FlowControl::Interrupt | FlowControl::Exception);
        if leaves && len < JMP_LEN {
            return Err(REFUSE_TOO_SHORT);
        }
        instructions.push(i);
    }
    Ok(Prologue { address, instructions, len })
}

/// The entry of an empty function — a `ret` followed by at least four bytes of nops (the
/// alignment padding before the next function) — as the prologue a jump may overwrite:
/// the `ret` is replaced, the function is replaced whole, so nothing is moved. `None` when
/// the code at `address` looks different.
///
/// # Safety
/// `address` must point at readable code, 32 bytes of it.
pub unsafe fn empty_function(address: u64) -> Option<Prologue> {
    let bytes = std::slice::from_raw_parts(address as *const u8, PROLOGUE_WINDOW);
    if bytes[0] != 0xc3 {
        return None;
    }
    let mut decoder = Decoder::with_ip(64, &bytes[1..], address + 1, DecoderOptions::NONE);
    let mut len = 1;
    while len < JMP_LEN {
        let i = decoder.decode();
        if i.is_invalid() || i.mnemonic() != iced_x86::Mnemonic::Nop {
            return None;
        }
        len += i.len();
    }
    Some(Prologue { address, instructions: Vec::new(), len: JMP_LEN })
}

/// Writes `jmp [rip]; .quad target` (14 bytes) at `slot`.
///
/// # Safety
/// `slot` must be a writable slot from [`Pools`].
pub unsafe fn write_far_jump(slot: u64, target: u64) {
    let mut code = [0u8; 14];
    code[..6].copy_from_slice(&[0xff, 0x25, 0, 0, 0, 0]);
    code[6..].copy_from_slice(&target.to_le_bytes());
    std::ptr::copy_nonoverlapping(code.as_ptr(), slot as *mut u8, code.len());
}

/// Every target of a relative jump, conditional jump or call in `[start, end)`, sorted:
/// a linear sweep of a module's code. A branch into another function's first bytes comes
/// from anywhere (glibc's `mempcpy` jumps to `memmove` + 3), so the whole module is read,
/// once; data between functions can desynchronise the sweep for a few instructions, and a
/// false target it finds only refuses a patch.
///
/// # Safety
/// `[start, end)` must be readable.
pub unsafe fn branch_targets(start: u64, end: u64) -> Vec<u64> {
    let bytes = std::slice::from_raw_parts(start as *const u8, end.saturating_sub(start) as usize);
    let mut decoder = Decoder::with_ip(64, bytes, start, DecoderOptions::NONE);
    let mut targets = Vec::new();
    let mut i = Instruction::default();
    while decoder.can_decode() {
        decoder.decode_out(&mut i);
        if matches!(i.op0_kind(), OpKind::NearBranch64 | OpKind::NearBranch32 | OpKind::NearBranch16) {
            targets.push(i.near_branch_target());
        }
    }
    targets.sort_unstable();
    targets.dedup();
    targets
}

/// The length of an XRay entry sled at the start of `bytes` (clang's
/// `-fxray-instrument`: `jmp +9` over a 9-byte nop, 11 bytes the compiler reserved for
/// patching), if there is one. Its own jump is the only way into it, and it lands after it.
pub fn xray_sled(bytes: &[u8]) -> Option<usize> {
    const SLED: usize = 11;
    if bytes.len() < SLED || bytes[..2] != [0xeb, 0x09] {
        return None;
    }
    let mut decoder = Decoder::with_ip(64, &bytes[2..SLED], 0, DecoderOptions::NONE);
    let nop = decoder.decode();
    (nop.mnemonic() == iced_x86::Mnemonic::Nop && nop.len() == SLED - 2).then_some(SLED)
}

/// Refuses when a branch lands strictly inside the overwritten bytes: it would land in
/// the middle of the jump. `targets` is [`branch_targets`] of the function's module.
pub fn check_branch_targets(p: &Prologue, targets: &[u64]) -> Result<(), u32> {
    let first = targets.partition_point(|&t| t <= p.address);
    match targets.get(first) {
        Some(&t) if t < p.address + p.len as u64 => Err(REFUSE_BRANCH_TARGET),
        _ => Ok(()),
    }
}

/// Executable memory near the patched code, handed out in [`TRAMPOLINE_BYTES`] pieces.
#[derive(Default)]
pub struct Pools {
    pools: Vec<(u64, usize)>,
}

impl Pools {
    /// Where the pools are.
    pub fn bases(&self) -> impl Iterator<Item = u64> + '_ {
        self.pools.iter().map(|(b, _)| *b)
    }

    /// A trampoline slot whose whole range is within a `rel32` of `near`.
    pub fn slot_near(&mut self, near: u64) -> Option<u64> {
        let reachable = |a: u64| a.abs_diff(near) < (1 << 31) - POOL_BYTES as u64;
        if let Some((base, used)) = self.pools.iter_mut().find(|(b, u)| reachable(*b) && *u + TRAMPOLINE_BYTES <= POOL_BYTES) {
            let slot = *base + *used as u64;
            *used += TRAMPOLINE_BYTES;
            return Some(slot);
        }
        let base = map_near(near)?;
        self.pools.push((base, TRAMPOLINE_BYTES));
        Some(base)
    }
}

/// Maps a pool within ±1 GB of `near`, trying addresses below it first (where the gap
/// between a program and its heap usually is), then above.
fn map_near(near: u64) -> Option<u64> {
    const STEP: u64 = 1 << 20;
    let start = near & !(STEP - 1);
    for k in 1..1024u64 {
        for candidate in [start.checked_sub(k * STEP), start.checked_add(k * STEP)].into_iter().flatten() {
            if candidate < 1 << 16 {
                continue;
            }
            // SAFETY: MAP_FIXED_NOREPLACE never replaces an existing mapping: the kernel
            // maps new anonymous memory at `candidate` or fails, so no memory of the
            // program is touched; the result is checked before use.
            let p = unsafe {
                libc::mmap(
                    candidate as *mut libc::c_void,
                    POOL_BYTES,
                    libc::PROT_READ | libc::PROT_WRITE | libc::PROT_EXEC,
                    libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_FIXED_NOREPLACE,
                    -1,
                    0,
                )
            };
            if p != libc::MAP_FAILED {
                if p as u64 == candidate {
                    return Some(candidate);
                }
                // SAFETY: `p` is the mapping just made here (an older kernel ignored the
                // hint and placed it elsewhere); nothing else refers to it.
                unsafe { libc::munmap(p, POOL_BYTES) };
            }
        }
    }
    None
}

/// Writes the trampoline for `p` at `slot` and returns the address of its copy of the
/// prologue (where the entry stub continues):
///
/// ```text
/// slot:      push POINT ; jmp [rip] ; .quad entry_stub      (19 bytes)
/// slot+19:   the moved prologue ; jmp FUNCTION+len
/// ```
///
/// # Safety
/// `slot` must be a writable slot from [`Pools`].
pub unsafe fn write_trampoline(p: &Prologue, slot: u64, point: u32, entry_stub: u64) -> Result<u64, u32> {
    let mut code = Vec::with_capacity(TRAMPOLINE_BYTES);
    code.push(0x68);
    code.extend_from_slice(&point.to_le_bytes());
    code.extend_from_slice(&[0xff, 0x25, 0, 0, 0, 0]);
    code.extend_from_slice(&entry_stub.to_le_bytes());
    let continuation = slot + code.len() as u64;
    let mut moved = p.instructions.clone();
    moved.push(Instruction::with_branch(iced_x86::Code::Jmp_rel32_64, p.address + p.len as u64).map_err(|_| REFUSE_NOT_RELOCATABLE)?);
    let block = InstructionBlock::new(&moved, continuation);
    let encoded = BlockEncoder::encode(64, block, BlockEncoderOptions::NONE).map_err(|_| REFUSE_NOT_RELOCATABLE)?;
    code.extend_from_slice(&encoded.code_buffer);
    if code.len() > TRAMPOLINE_BYTES {
        return Err(REFUSE_NOT_RELOCATABLE);
    }
    std::ptr::copy_nonoverlapping(code.as_ptr(), slot as *mut u8, code.len());
    Ok(continuation)
}

/// Overwrites the prologue with `jmp slot`, the rest of its bytes with `int3`.
///
/// # Safety
/// Nothing may be executing the prologue (the agent patches before `main`).
pub unsafe fn write_jump(p: &Prologue, slot: u64) -> Result<(), u32> {
    let rel = slot as i64 - (p.address as i64 + JMP_LEN as i64);
    let rel = i32::try_from(rel).map_err(|_| REFUSE_NO_TRAMPOLINE)?;
    let page = p.address & !4095;
    let span = (p.address + p.len as u64 - page).div_ceil(4096) * 4096;
    if libc::mprotect(page as *mut libc::c_void, span as usize, libc::PROT_READ | libc::PROT_WRITE | libc::PROT_EXEC) != 0 {
        return Err(REFUSE_PROTECT);
    }
    let mut bytes = vec![0xccu8; p.len];
    bytes[0] = 0xe9;
    bytes[1..5].copy_from_slice(&rel.to_le_bytes());
    std::ptr::copy_nonoverlapping(bytes.as_ptr(), p.address as *mut u8, p.len);
    libc::mprotect(page as *mut libc::c_void, span as usize, libc::PROT_READ | libc::PROT_EXEC);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn xray_sleds_are_recognised_and_nothing_else() {
        let sled = [0xeb, 0x09, 0x66, 0x0f, 0x1f, 0x84, 0x00, 0x00, 0x02, 0x00, 0x00, 0x85, 0xff];
        assert_eq!(xray_sled(&sled), Some(11));
        // a short jump over something that is not one nop
        let not = [0xeb, 0x09, 0x48, 0x89, 0xf8, 0x90, 0x90, 0x90, 0x90, 0x90, 0x90, 0xc3];
        assert_eq!(xray_sled(&not), None);
        assert_eq!(xray_sled(&[0x0f, 0x1f, 0x44, 0x00, 0x00, 0xc3]), None);
    }
}
