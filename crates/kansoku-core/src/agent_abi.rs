//! The shared-memory layout between kansoku and its in-process probe agent.
//!
//! kansoku creates one file (in `/dev/shm`), sizes it to [`file_size`] and names it to the
//! agent in the environment ([`ENV_SHM`]), with the probe plan beside it ([`ENV_PLAN`]).
//! Every process that loads the agent maps the file shared: the [`Control`] block at
//! offset 0, then [`MAX_RINGS`] rings. A thread claims a ring on its first hit
//! (`rings_claimed` is a counter), writes its pid and tid into the ring's header, and
//! from then on appends [`Record`]s: the record first, then `head` (Release). kansoku
//! drains `tail..head` (Acquire) while the program runs and once more after it ended, so
//! every record whose `head` store happened survives a crash or a SIGKILL of the program.
//!
//! Only plain integers and atomics live here; both sides are x86-64 Linux processes of the
//! same build, so `#[repr(C)]` fixes the layout.

use std::sync::atomic::{AtomicU32, AtomicU64};

/// Environment variable naming the shared file.
pub const ENV_SHM: &str = "KANSOKU_AGENT_SHM";
/// Environment variable naming the plan file (text, see [`plan_line`]).
pub const ENV_PLAN: &str = "KANSOKU_AGENT_PLAN";
/// "kansoku\x01" little-endian: the agent refuses a file without it.
pub const MAGIC: u64 = u64::from_le_bytes(*b"kansoku\x01");
/// Layout version; kansoku and the agent refuse each other's file when it differs.
pub const VERSION: u32 = 4;
/// Points a plan may name (entry and exit points count separately).
pub const MAX_POINTS: usize = 8192;
/// Threads (over all processes of one run) that get a ring of their own.
pub const MAX_RINGS: usize = 256;
/// Records per ring: 131,072 × 16 bytes = 2 MiB, 30 ms of a probe hit every 200 ns.
pub const RING_RECORDS: u64 = 1 << 17;

/// The longest the agent holds the program for kansoku's `go`.
pub const HOLD_LIMIT_MS: u64 = 10_000;

/// Trampoline pools the agent maps (each within ±2 GB of the code it patches).
pub const MAX_POOLS: usize = 64;
/// Bytes of one trampoline pool.
pub const POOL_BYTES: usize = 1 << 16;

/// `Control::clock`: time stamps are TSC ticks (invariant TSC) or CLOCK_MONOTONIC ns.
pub const CLOCK_TSC: u32 = 0;
/// `Control::clock`: time stamps are CLOCK_MONOTONIC nanoseconds (no invariant TSC).
pub const CLOCK_MONOTONIC: u32 = 1;

/// `PointState::state` values, written by the agent. Not yet handled (the agent has not
/// reached the point, or its module is not loaded).
pub const POINT_UNSET: u32 = 0;
/// The point's jump is planted: its hits come through the rings.
pub const POINT_PATCHED: u32 = 1;
/// The agent would not patch it; `reason` says why (a `REFUSE_*`), and kansoku may plant a uprobe instead.
pub const POINT_REFUSED: u32 = 2;
/// Another point of the plan resolved to the same address: its hits are this one's.
pub const POINT_ALIAS: u32 = 3;

/// Why the agent refused to patch a function (`PointState::reason`), each said in words by
/// [`refusal`].
/// The point's module is not loaded in the process.
pub const REFUSE_NOT_LOADED: u32 = 1;
/// The function is shorter than the 5-byte jump.
pub const REFUSE_TOO_SHORT: u32 = 2;
/// A branch lands inside the 5 bytes the patch overwrites.
pub const REFUSE_BRANCH_TARGET: u32 = 3;
/// The first instructions did not decode.
pub const REFUSE_UNDECODABLE: u32 = 4;
/// No trampoline memory within ±2 GB.
pub const REFUSE_NO_TRAMPOLINE: u32 = 5;
/// The displaced instructions cannot run from a trampoline (RIP-relative beyond reach…).
pub const REFUSE_NOT_RELOCATABLE: u32 = 6;
/// The dynamic linker does not know the IFUNC's symbol.
pub const REFUSE_NO_SYMBOL: u32 = 7;
/// `mprotect` would not make the code writable.
pub const REFUSE_PROTECT: u32 = 8;
/// A GNU IFUNC of a module loaded after start: the implementation is picked as the module
/// is relocated, after the agent plants its points.
pub const REFUSE_LATE_IFUNC: u32 = 9;
/// A function of the program that runs ([`ANY_PROGRAM`]), and no program of the run that
/// loaded the agent so far defines it (itself or in a library it loaded at start).
pub const REFUSE_NOT_DEFINED: u32 = 10;
/// The highest `REFUSE_*` code: kansoku takes a larger one as written by the program.
pub const REFUSE_LAST: u32 = REFUSE_NOT_DEFINED;

/// A reason code in words.
pub fn refusal(reason: u32) -> &'static str {
    match reason {
        REFUSE_NOT_LOADED => "its module is not loaded in the process",
        REFUSE_TOO_SHORT => "the function ends within the 5 bytes a jump needs",
        REFUSE_BRANCH_TARGET => "a branch of the function jumps into the 5 bytes the patch overwrites",
        REFUSE_UNDECODABLE => "its first instructions could not be decoded",
        REFUSE_NO_TRAMPOLINE => "no memory for a trampoline within ±2 GB of it",
        REFUSE_NOT_RELOCATABLE => "its first instructions cannot be moved to a trampoline",
        REFUSE_NO_SYMBOL => "the dynamic linker does not know the symbol",
        REFUSE_PROTECT => "its code could not be made writable (mprotect)",
        REFUSE_LATE_IFUNC => "it is a GNU IFUNC of a module loaded after start, resolved after the agent plants (probe it with --mechanism uprobe)",
        REFUSE_NOT_DEFINED => "no program the run started defines it (itself or in a library it loaded at start)",
        _ => "unknown reason",
    }
}

/// What became of one point in the process that loaded the agent first.
#[repr(C)]
pub struct PointState {
    /// A `POINT_*` value.
    pub state: AtomicU32,
    /// For [`POINT_REFUSED`]: a `REFUSE_*` code.
    pub reason: AtomicU32,
    /// Runtime address the point was planted at (IFUNCs: the implementation).
    pub address: AtomicU64,
    /// For [`POINT_ALIAS`]: the point whose hits these are.
    pub alias_of: AtomicU32,
    /// Keeps the layout 8-byte aligned; always 0.
    pub _pad: u32,
}

/// The block at offset 0 of the shared file.
#[repr(C)]
pub struct Control {
    /// [`MAGIC`], written by kansoku.
    pub magic: u64,
    /// [`VERSION`], written by kansoku.
    pub version: u32,
    /// [`CLOCK_TSC`] or [`CLOCK_MONOTONIC`], chosen by kansoku.
    pub clock: u32,
    /// Rings handed out so far (a thread's first hit takes the next); may exceed
    /// [`MAX_RINGS`], the rest lose their hits.
    pub rings_claimed: AtomicU32,
    /// Processes that loaded the agent and read the plan.
    pub agents: AtomicU32,
    /// Hits that found no ring (more than [`MAX_RINGS`] threads) or a ring kansoku did not
    /// drain for a second.
    pub lost: AtomicU64,
    /// The first agent sets this to 1 when it finished patching.
    pub ready: AtomicU32,
    /// Set by kansoku before the start: the first agent, once ready, waits (at most
    /// [`HOLD_LIMIT_MS`]) for `go`, so that kansoku can plant uprobes on the functions it
    /// refused before the program runs on.
    pub hold: AtomicU32,
    /// Set to 1 by kansoku when the held program may run on.
    pub go: AtomicU32,
    /// kansoku's process id, written before the start: an agent waits for an answer to its
    /// [`Ask`] only while that process lives.
    pub resolver: u32,
    /// Start addresses of the first agent's trampoline pools ([`POOL_BYTES`] each, 0 =
    /// none): a sample whose address falls there is in kansoku's code, not the program's.
    pub pools: [AtomicU64; MAX_POOLS],
    /// Questions of the agents whose plan has functions of [`ANY_PROGRAM`], one a process.
    pub asks: [Ask; MAX_ASKS],
    /// What became of each point of the plan, by point id.
    pub points: [PointState; MAX_POINTS],
}

/// Processes that can wait for kansoku's answer at once (more wait for a free slot).
pub const MAX_ASKS: usize = 16;
/// Probes of [`ANY_PROGRAM`] a plan may have (kansoku refuses more).
pub const MAX_DEFERRED: usize = 64;

/// `Ask::state`: the slot is free; an agent takes it with a compare-and-swap to [`ASK_CLAIMED`].
pub const ASK_FREE: u32 = 0;
/// An agent took the slot and is writing its pid.
pub const ASK_CLAIMED: u32 = 1;
/// The agent asks kansoku where the probes of [`ANY_PROGRAM`] are in its process, and waits.
pub const ASK_ASKED: u32 = 2;
/// kansoku wrote `address` and `size`; the agent plants.
pub const ASK_ANSWERED: u32 = 3;
/// The agent planted and wrote `planted` and `reason`; kansoku reads them and frees the slot.
pub const ASK_PLANTED: u32 = 4;
/// The agent stopped waiting (kansoku took longer than [`HOLD_LIMIT_MS`]); kansoku frees the slot.
pub const ASK_ABANDONED: u32 = 5;

/// One process's question (design of issue 44): a program started through a shim that
/// builds its program's path at run time. kansoku cannot find the program before the run,
/// so a function of "the program" is planned in [`ANY_PROGRAM`], and each process that
/// loads the agent asks kansoku, which reads the process's `/proc/PID/exe` and maps
/// itself (never a path the program wrote), finds the functions with its own symbol
/// reader (symbol tables, detached debug files) and answers with their runtime addresses.
/// Arrays are indexed by the probe's rank among the plan's [`ANY_PROGRAM`] lines.
#[repr(C)]
pub struct Ask {
    /// An `ASK_*` value.
    pub state: AtomicU32,
    /// The asking process (`getpid`); kansoku checks that it is one of the run's.
    pub pid: AtomicU32,
    /// Written by kansoku: the function's runtime address in the asking process (0: not
    /// defined there).
    pub address: [AtomicU64; MAX_DEFERRED],
    /// Written by kansoku: the function's size in bytes (0 when unknown).
    pub size: [AtomicU64; MAX_DEFERRED],
    /// Written by the agent after planting: a `POINT_*` value ([`POINT_UNSET`] where the
    /// function is not defined).
    pub planted: [AtomicU32; MAX_DEFERRED],
    /// Written by the agent: for [`POINT_REFUSED`], a `REFUSE_*` code.
    pub reason: [AtomicU32; MAX_DEFERRED],
}

/// Header of one ring, a cache line of its own.
#[repr(C, align(64))]
pub struct RingHeader {
    /// Process of the thread that claimed the ring.
    pub pid: AtomicU32,
    /// The thread that claimed the ring (its only writer).
    pub tid: AtomicU32,
    /// Records written (monotonic; index = head % RING_RECORDS).
    pub head: AtomicU64,
    /// Records drained by kansoku.
    pub tail: AtomicU64,
}

/// One hit: a time stamp and `point << 1 | is_exit` (an exit point is its own point id;
/// the bit is for readers of a raw ring). An entry's TSC stamp is written just after the
/// record is published (as late as can be before the call runs): a reader that finds time
/// 0 stops there and comes back.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Record {
    /// TSC ticks or CLOCK_MONOTONIC ns (per [`Control::clock`]); 0 while being written.
    pub time: u64,
    /// `point << 1 | is_exit`.
    pub what: u64,
}

/// Bytes of the [`Control`] block, rounded up to whole pages (the first ring's offset).
pub const fn control_size() -> usize {
    std::mem::size_of::<Control>().div_ceil(4096) * 4096
}

/// Bytes of one ring: its header and [`RING_RECORDS`] records.
pub const fn ring_size() -> usize {
    std::mem::size_of::<RingHeader>() + RING_RECORDS as usize * std::mem::size_of::<Record>()
}

/// Offset of ring `k` in the file.
pub const fn ring_offset(k: usize) -> usize {
    control_size() + k * ring_size()
}

/// Bytes of the whole shared file: the control block and [`MAX_RINGS`] rings.
pub const fn file_size() -> usize {
    ring_offset(MAX_RINGS)
}

/// The MODULE of a plan line for a function of whatever program runs (a shim builds its
/// program's path at run time): each process asks kansoku for it ([`Ask`]).
pub const ANY_PROGRAM: &str = "*";

/// One line of the plan file: `ENTRY EXIT MODULE VADDR SIZE IFUNC NAME`, where EXIT is `-`
/// for entry-only probes, MODULE is `-` for the main executable, [`ANY_PROGRAM`] or a library's path, VADDR
/// and SIZE are hex link-time values (VADDR 0 with IFUNC 1: ask the dynamic linker for
/// NAME's implementation), and NAME is for messages. A line `calibrate ENTRY EXIT COUNT`
/// asks the agent to call a routine of its own COUNT times with those two points on it.
pub fn plan_line(entry: u32, exit: Option<u32>, module: Option<&str>, vaddr: u64, size: u64, ifunc: bool, name: &str) -> String {
    format!(
        "{entry} {} {} {vaddr:x} {size:x} {} {name}\n",
        exit.map_or("-".to_string(), |e| e.to_string()),
        module.unwrap_or("-"),
        ifunc as u8
    )
}

/// A function to probe, as a plan line names it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PlannedProbe {
    /// Point id of its entry.
    pub entry: u32,
    /// Point id of its exit, when returns are timed too.
    pub exit: Option<u32>,
    /// The library's path, [`ANY_PROGRAM`], or `None` for the main executable.
    pub module: Option<String>,
    /// Link-time address (0 with `ifunc`: ask the dynamic linker).
    pub vaddr: u64,
    /// Size in bytes (bounds the patch's decoding).
    pub size: u64,
    /// A GNU IFUNC: patch the implementation the linker picks.
    pub ifunc: bool,
    /// The function's name, for messages.
    pub name: String,
}

impl PlannedProbe {
    /// Whether the function is of whatever program runs, found by asking kansoku.
    pub fn in_any_program(&self) -> bool {
        self.module.as_deref() == Some(ANY_PROGRAM)
    }
}

/// A plan line read back (the agent's side of [`plan_line`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PlanEntry {
    /// Probe a function.
    Probe(PlannedProbe),
    /// Call the agent's own routine `count` times under these two points (the probe's
    /// cost, subtracted from the timings).
    Calibrate {
        /// Point id of the routine's entry.
        entry: u32,
        /// Point id of its exit.
        exit: u32,
        /// Calls to make.
        count: u32,
    },
}

/// Parses one plan line; `None` for a malformed one (the agent skips it and says so).
pub fn parse_plan_line(line: &str) -> Option<PlanEntry> {
    let mut f = line.split_whitespace();
    let first = f.next()?;
    let point = |s: Option<&str>| s.and_then(|s| s.parse::<u32>().ok()).filter(|&p| (p as usize) < MAX_POINTS);
    if first == "calibrate" {
        let (entry, exit) = (point(f.next())?, point(f.next())?);
        let count = f.next()?.parse().ok()?;
        return Some(PlanEntry::Calibrate { entry, exit, count });
    }
    let entry = point(Some(first))?;
    let exit = match f.next()? {
        "-" => None,
        s => Some(point(Some(s))?),
    };
    let module = match f.next()? {
        "-" => None,
        s => Some(s.to_string()),
    };
    let vaddr = u64::from_str_radix(f.next()?, 16).ok()?;
    let size = u64::from_str_radix(f.next()?, 16).ok()?;
    let ifunc = match f.next()? {
        "0" => false,
        "1" => true,
        _ => return None,
    };
    let name = f.next()?.to_string();
    Some(PlanEntry::Probe(PlannedProbe { entry, exit, module, vaddr, size, ifunc, name }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plan_lines_read_back() {
        let l = plan_line(3, Some(4), Some("/lib/x86_64-linux-gnu/libz.so.1"), 0x1a2b, 0x40, false, "deflate");
        assert_eq!(
            parse_plan_line(&l),
            Some(PlanEntry::Probe(PlannedProbe { entry: 3, exit: Some(4), module: Some("/lib/x86_64-linux-gnu/libz.so.1".into()), vaddr: 0x1a2b, size: 0x40, ifunc: false, name: "deflate".into() }))
        );
        let l = plan_line(0, None, None, 0, 0, true, "memcpy");
        assert!(matches!(parse_plan_line(&l), Some(PlanEntry::Probe(PlannedProbe { exit: None, module: None, ifunc: true, .. }))));
        let l = plan_line(5, Some(6), Some(ANY_PROGRAM), 0, 0, false, "PyList_Append");
        assert!(matches!(parse_plan_line(&l), Some(PlanEntry::Probe(p)) if p.in_any_program() && p.exit == Some(6)));
        assert_eq!(parse_plan_line("calibrate 7 8 1000"), Some(PlanEntry::Calibrate { entry: 7, exit: 8, count: 1000 }));
        for bad in ["", "x", "1 - - zz 0 0 f", "1 - - 10 0 2 f", "99999 - - 10 0 0 f", "1 - - 10 0 0"] {
            assert_eq!(parse_plan_line(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn layout_is_page_aligned() {
        assert_eq!(control_size() % 4096, 0);
        assert_eq!(std::mem::size_of::<RingHeader>(), 64);
        assert_eq!(std::mem::size_of::<Ask>() % 8, 0);
        assert_eq!(std::mem::offset_of!(Control, pools) % 8, 0);
        assert_eq!(ring_size() % 64, 0);
    }
}
