//! Names of PLT stubs (`memcpy@plt`), as objdump makes them: each stub jumps through a GOT
//! slot, and the dynamic relocation of that slot names the symbol it will hold.

use std::collections::HashMap;

use iced_x86::{Decoder, DecoderOptions, FlowControl, OpKind, Register};

/// One `.plt`, `.plt.sec` or `.plt.got` section.
pub struct PltSection<'a> {
    pub address: u64,
    pub bytes: &'a [u8],
    /// `sh_entsize`: 16 for `.plt`/`.plt.sec`, 8 or 16 for `.plt.got`.
    pub entry_size: u64,
}

/// A named stub: `(start, size, "name@plt")`.
pub type PltStub = (u64, u64, String);

/// Stubs of `section` whose GOT slot has a name in `slot_names` (GOT address → symbol).
/// The first entry of a lazy `.plt` (PLT0, the resolver trampoline) has no named slot and
/// stays unnamed, as in objdump.
pub fn plt_stubs(section: &PltSection, slot_names: &HashMap<u64, String>) -> Vec<PltStub> {
    // Entry sizes other than 8 and 16 are not produced by any linker we know; fall back to 16.
    let size = if matches!(section.entry_size, 8 | 16) { section.entry_size } else { 16 };
    section
        .bytes
        .chunks(size as usize)
        .enumerate()
        .filter_map(|(i, entry)| {
            let start = section.address.checked_add(i as u64 * size)?;
            let slot = got_slot(entry, start)?;
            let name = slot_names.get(&slot)?;
            Some((start, entry.len() as u64, format!("{name}@plt")))
        })
        .collect()
}

/// The GOT address an entry jumps through: its first `jmp qword ptr [rip+disp]`.
fn got_slot(entry: &[u8], ip: u64) -> Option<u64> {
    let mut decoder = Decoder::with_ip(64, entry, ip, DecoderOptions::NONE);
    while decoder.can_decode() {
        let ins = decoder.decode();
        if ins.is_invalid() {
            return None;
        }
        let indirect = ins.flow_control() == FlowControl::IndirectBranch;
        if indirect && ins.op0_kind() == OpKind::Memory && ins.memory_base() == Register::RIP {
            return Some(ins.ip_rel_memory_address());
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lazy_and_ibt_stubs_are_named_by_their_slot() {
        // PLT0: push [rip+0xff2]; jmp [rip+0xff4]; nop dword [rax]
        let mut bytes = vec![0xff, 0x35, 0xf2, 0x0f, 0, 0, 0xff, 0x25, 0xf4, 0x0f, 0, 0, 0x0f, 0x1f, 0x40, 0x00];
        // entry 1: jmp [rip+0xff2] (slot 0x2018 from ip 0x1010+6); push 0; jmp PLT0
        bytes.extend([0xff, 0x25, 0x02, 0x10, 0, 0, 0x68, 0, 0, 0, 0, 0xe9, 0xe0, 0xff, 0xff, 0xff]);
        // entry 2 (IBT, .plt.sec style): endbr64; bnd jmp [rip+..] (slot 0x2020); nop5
        bytes.extend([0xf3, 0x0f, 0x1e, 0xfa, 0xf2, 0xff, 0x25, 0xf5, 0x0f, 0, 0, 0x0f, 0x1f, 0x44, 0, 0]);
        let names = HashMap::from([(0x2018, "memcpy".to_string()), (0x2020, "free".to_string())]);
        let stubs = plt_stubs(&PltSection { address: 0x1000, bytes: &bytes, entry_size: 16 }, &names);
        assert_eq!(stubs, vec![(0x1010, 16, "memcpy@plt".into()), (0x1020, 16, "free@plt".into())]);
    }
}
