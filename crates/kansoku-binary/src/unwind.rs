//! Function bounds from `.eh_frame`: every frame description entry (FDE) covers one
//! function (or one cold part of it), even in a stripped program, because the unwinder
//! needs them at run time. perf, Ghidra and angr use the same source for stripped code.

use gimli::{BaseAddresses, CieOrFde, EhFrame, LittleEndian, UnwindSection};

/// No real program has this many FDEs (libxul has ~200 k); the cap keeps a corrupt
/// section from looping long.
const MAX_FDES: usize = 4_000_000;

/// The section bytes and link-time addresses the FDE pointer encodings are relative to.
pub struct EhFrameInput<'a> {
    pub eh_frame: &'a [u8],
    pub eh_frame_address: u64,
    pub text_address: u64,
    pub got_address: Option<u64>,
}

/// `(start, size)` of every FDE with a non-empty range, sorted by start, duplicates
/// removed. A corrupt entry ends the walk: what was read before it is kept.
pub fn fde_ranges(input: &EhFrameInput) -> Vec<(u64, u64)> {
    let section = EhFrame::new(input.eh_frame, LittleEndian);
    let mut bases = BaseAddresses::default().set_eh_frame(input.eh_frame_address).set_text(input.text_address);
    if let Some(got) = input.got_address {
        bases = bases.set_got(got);
    }
    let mut entries = section.entries(&bases);
    let mut ranges = Vec::new();
    while let Ok(Some(entry)) = entries.next() {
        if ranges.len() >= MAX_FDES {
            break;
        }
        let CieOrFde::Fde(partial) = entry else { continue };
        // An FDE whose CIE cannot be read is skipped, not fatal: the others still hold.
        let Ok(fde) = partial.parse(EhFrame::cie_from_offset) else { continue };
        let (start, size) = (fde.initial_address(), fde.len());
        if size > 0 && start.checked_add(size).is_some() {
            ranges.push((start, size));
        }
    }
    ranges.sort_unstable();
    ranges.dedup_by_key(|r| r.0);
    ranges
}
