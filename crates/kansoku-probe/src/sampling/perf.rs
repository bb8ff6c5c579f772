//! The kernel's perf subsystem, reduced to what kansoku observes with it: a sampling
//! "clock" event (retired user instructions, or CPU time), uprobes as members of the same
//! group so their hits land in the same ring buffer in time order, and the records that
//! come out (samples, memory maps, lost-record notices).
//!
//! Hardware counters are not everywhere (virtual machines often have none):
//! [`hardware_counters`] tells, and callers fall back to `cpu-clock` and say so.

use std::ffi::CString;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::Path;
use std::sync::atomic::{fence, Ordering};

use perf_event_open_sys::bindings::{self as sys, perf_event_attr};

/// What a sampling event counts, and how often it samples.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SamplingClock {
    /// Every `period` retired user-space instructions (hardware `instructions` counter).
    Instructions {
        /// Instructions between two samples.
        period: u64,
    },
    /// Every `period_ns` nanoseconds of the task's CPU time (software `cpu-clock`).
    CpuClock {
        /// Nanoseconds of CPU time between two samples.
        period_ns: u64,
    },
}

impl std::fmt::Display for SamplingClock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SamplingClock::Instructions { period } => write!(f, "instructions:u every {period}"),
            SamplingClock::CpuClock { period_ns } => write!(f, "cpu-clock every {period_ns} ns"),
        }
    }
}

/// Why a perf event could not be opened, with the setting that decides it.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PerfError {
    /// `perf_event_open` refused an event.
    #[error("perf_event_open for {what} failed: {errno}{hint}")]
    Open {
        /// The event, e.g. `instructions:u` or a uprobe's file and offset.
        what: String,
        /// The kernel's error.
        errno: nix::errno::Errno,
        /// The setting that decides it (`kernel.perf_event_paranoid`, a missing PMU) and how
        /// to change it, with a leading space; empty when nothing is known.
        hint: String,
    },
    /// `PERF_EVENT_IOC_SET_OUTPUT` (a member's records into the leader's ring buffer) failed;
    /// the kernel's error.
    #[error("redirecting a perf event into the group's ring buffer failed: {0}")]
    Redirect(nix::errno::Errno),
    /// `mmap` of the ring buffer failed; the kernel's error.
    #[error("mapping the perf ring buffer failed: {0}")]
    Mmap(nix::errno::Errno),
    /// Uprobes cannot be opened: this kernel has no uprobe event source.
    #[error("the kernel has no uprobe PMU (/sys/bus/event_source/devices/uprobe): build it with CONFIG_UPROBE_EVENTS")]
    NoUprobePmu,
    /// A uprobe's file path (given here) cannot be passed to the kernel.
    #[error("path {0} contains a NUL byte")]
    BadPath(String),
    /// The hardware `instructions` counter cannot be opened ([`hardware_counters`]); the
    /// kernel's error.
    #[error("hardware counter 'instructions' unavailable: {0} (no PMU exposed to this machine?)")]
    NoHardwareCounter(nix::errno::Errno),
}

fn paranoid_hint(errno: nix::errno::Errno) -> String {
    use nix::errno::Errno;
    let level = std::fs::read_to_string("/proc/sys/kernel/perf_event_paranoid").unwrap_or_default();
    match errno {
        Errno::EACCES | Errno::EPERM => format!(
            " (kernel.perf_event_paranoid is {}; run as root, grant CAP_PERFMON, or lower it: `sysctl kernel.perf_event_paranoid=1`)",
            level.trim()
        ),
        Errno::ENOENT | Errno::EOPNOTSUPP | Errno::ENODEV => " (this event is not supported here: no such PMU on this machine or VM)".into(),
        _ => String::new(),
    }
}

/// The CPUs that are online (`/sys/devices/system/cpu/online`, e.g. `0-3,6`); CPU 0 alone
/// when that file cannot be read.
pub(crate) fn online_cpus() -> Vec<i32> {
    let text = std::fs::read_to_string("/sys/devices/system/cpu/online").unwrap_or_default();
    let mut cpus = Vec::new();
    for part in text.trim().split(',').filter(|p| !p.is_empty()) {
        let (a, b) = part.split_once('-').unwrap_or((part, part));
        if let (Ok(a), Ok(b)) = (a.parse::<i32>(), b.parse::<i32>()) {
            // Bounded: a garbled file cannot make us open millions of events.
            cpus.extend((a..=b.min(a.saturating_add(4095))).take(4096));
        }
    }
    if cpus.is_empty() {
        cpus.push(0);
    }
    cpus
}

/// Is the hardware `instructions` counter usable for user-space sampling here? `Err` says why not.
pub fn hardware_counters() -> Result<(), PerfError> {
    let mut attr = base_attr(sys::PERF_TYPE_HARDWARE, sys::PERF_COUNT_HW_INSTRUCTIONS as u64);
    attr.__bindgen_anon_1.sample_period = 1_000_000;
    attr.sample_type = sys::PERF_SAMPLE_IP as u64;
    match open(&mut attr, 0, -1, -1, "instructions:u") {
        Ok(_) => Ok(()),
        Err(PerfError::Open { errno, .. }) => Err(PerfError::NoHardwareCounter(errno)),
        Err(e) => Err(e),
    }
}

fn base_attr(type_: u32, config: u64) -> perf_event_attr {
    // SAFETY: perf_event_attr is a plain C struct of integers and unions of integers, for
    // which all-zero bytes are a valid value (and the kernel's documented default).
    let mut attr: perf_event_attr = unsafe { std::mem::zeroed() };
    attr.type_ = type_;
    attr.size = std::mem::size_of::<perf_event_attr>() as u32;
    attr.config = config;
    attr.set_exclude_kernel(1);
    attr.set_exclude_hv(1);
    attr
}

fn open(attr: &mut perf_event_attr, pid: i32, cpu: i32, group: i32, what: &str) -> Result<OwnedFd, PerfError> {
    // SAFETY: `attr` is a valid, initialised perf_event_attr that lives across the call
    // (the kernel reads it, and any path it points to, during the call only).
    let fd = unsafe { perf_event_open_sys::perf_event_open(attr, pid, cpu, group, sys::PERF_FLAG_FD_CLOEXEC as u64) };
    if fd < 0 {
        let errno = nix::errno::Errno::last();
        return Err(PerfError::Open { what: what.to_string(), errno, hint: paranoid_hint(errno) });
    }
    // SAFETY: the call succeeded, so `fd` is a new descriptor that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// A uprobe to plant: a file and an offset in it (not a virtual address).
#[derive(Clone, Debug)]
pub(crate) struct UprobeSpec {
    /// The ELF file (program or shared library) that holds the instruction to probe.
    pub path: std::path::PathBuf,
    /// Offset in that file of the instruction to probe (not a link-time address).
    pub file_offset: u64,
    /// A uretprobe: fires when the function returns.
    pub is_return: bool,
}

/// What a sample in a [`Session`] came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum SampleSource {
    /// The sampling clock (instructions or CPU time).
    Clock,
    /// The uprobe with this index in the session's list.
    Uprobe(usize),
}

/// One sample record.
#[derive(Clone, Debug)]
pub(crate) struct PerfSample {
    /// Which event of the session took it.
    pub source: SampleSource,
    /// Runtime address of the user-space instruction the task was at.
    pub ip: u64,
    /// Process id of the task.
    pub pid: u32,
    /// Thread id of the task.
    pub tid: u32,
    /// Kernel time stamp (CLOCK_MONOTONIC, ns).
    pub time_ns: u64,
    /// Retired user instructions of the task so far, when an instruction counter is open.
    pub instructions: Option<u64>,
    /// Sampled user registers, one per bit set in the session's register mask, in
    /// ascending bit order; read them with [`register`].
    pub regs: Option<Vec<u64>>,
}

/// An executable file mapped into the task.
#[derive(Clone, Debug)]
pub(crate) struct PerfMmap {
    /// Runtime address where the mapping starts.
    pub start: u64,
    /// Length of the mapping in bytes.
    pub len: u64,
    /// Offset in the file that `start` maps.
    pub file_offset: u64,
    /// The mapping's protection includes execute (`PROT_EXEC`).
    pub executable: bool,
    /// The file's path as the kernel names it (may be `[vdso]` or similar for special mappings).
    pub path: String,
    /// The mapped file as (device major, minor, inode), which names it whatever its path
    /// (None where the kernel sent a build id instead).
    pub file: Option<(u32, u32, u64)>,
}

/// A record from the ring buffer.
#[derive(Clone, Debug)]
pub(crate) enum PerfRecord {
    /// A sample of the clock or a uprobe hit.
    Sample(PerfSample),
    /// The task mapped an executable file.
    Mmap(PerfMmap),
    /// A thread left (`out`) or got back its CPU; `preempted`: it left still runnable.
    Switch {
        /// The thread that switched.
        tid: u32,
        /// Kernel time stamp of the switch (CLOCK_MONOTONIC, ns).
        time_ns: u64,
        /// It left the CPU (else it got the CPU back).
        out: bool,
        /// It left the CPU while still runnable (preempted), not to wait.
        preempted: bool,
    },
    /// The kernel dropped this many records because the buffer was full.
    Lost(u64),
}

/// perf's x86-64 register numbers (`arch/x86/include/uapi/asm/perf_regs.h`).
pub mod regs {
    /// perf's number of RAX, its bit in a register mask.
    pub const AX: u32 = 0;
    /// perf's number of RBX, its bit in a register mask.
    pub(crate) const BX: u32 = 1;
    /// perf's number of RCX, its bit in a register mask.
    pub(crate) const CX: u32 = 2;
    /// perf's number of RDX, its bit in a register mask.
    pub(crate) const DX: u32 = 3;
    /// perf's number of RSI, its bit in a register mask.
    pub(crate) const SI: u32 = 4;
    /// perf's number of RDI, its bit in a register mask.
    pub(crate) const DI: u32 = 5;
    /// perf's number of RBP (frame pointer), its bit in a register mask.
    pub(crate) const BP: u32 = 6;
    /// perf's number of RSP (stack pointer), its bit in a register mask.
    pub(crate) const SP: u32 = 7;
    /// perf's number of RIP (instruction pointer), its bit in a register mask.
    pub const IP: u32 = 8;
    /// perf's number of RFLAGS, its bit in a register mask.
    pub const FLAGS: u32 = 9;
    /// perf's number of R8, its bit in a register mask (R9 to R14 are 17 to 22).
    pub const R8: u32 = 16;
    /// perf's number of R15, its bit in a register mask.
    pub const R15: u32 = 23;
}

/// The general-purpose registers, IP and flags: what an effective-address computation
/// needs. (The segment registers cannot be sampled in 64-bit user mode.)
pub const X86_REGS_ALL: u64 = 0xff_ffff & !(0b11_1111 << 10);

/// Register `reg` (see [`regs`]) out of a sample taken with register mask `mask`.
pub fn register(values: &[u64], mask: u64, reg: u32) -> Option<u64> {
    if mask & (1 << reg) == 0 {
        return None;
    }
    values.get((mask & ((1u64 << reg) - 1)).count_ones() as usize).copied()
}

/// How to open a [`Session`].
#[derive(Clone, Debug)]
pub(crate) struct SessionOptions {
    /// The group leader: what it counts and how often it samples.
    pub clock: SamplingClock,
    /// Uprobes to add to the group; their samples are [`SampleSource::Uprobe`] by index here.
    pub uprobes: Vec<UprobeSpec>,
    /// Bit mask of user registers to sample (0 = none), e.g. [`X86_REGS_ALL`].
    pub user_regs: u64,
    /// Also count retired instructions (needs the hardware counter) for samples taken on
    /// `cpu-clock` and for uprobe hits.
    pub count_instructions: bool,
    /// Ring buffer size in pages (a power of two).
    pub buffer_pages: usize,
    /// Events start disabled and are enabled when the task calls exec.
    pub enable_on_exec: bool,
    /// Follow the task's future threads and child processes, on this CPU only: the kernel
    /// maps a ring buffer of an inherited event only when it is bound to one CPU, so a
    /// caller following a program opens one session per CPU (as `perf record` does).
    pub inherit_on_cpu: Option<i32>,
    /// Also report the task's context switches ([`PerfRecord::Switch`]).
    pub context_switches: bool,
}

impl Default for SessionOptions {
    fn default() -> Self {
        SessionOptions {
            clock: SamplingClock::CpuClock { period_ns: 1_000_000 },
            uprobes: Vec::new(),
            user_regs: 0,
            count_instructions: false,
            buffer_pages: 512,
            enable_on_exec: true,
            inherit_on_cpu: None,
            context_switches: false,
        }
    }
}

/// A group of perf events on one task sharing one ring buffer: the sampling clock as
/// leader, optionally an instruction counter, and uprobes.
pub(crate) struct Session {
    leader: OwnedFd,
    _members: Vec<OwnedFd>,
    /// Event id → source; `None` for the pure counter.
    ids: Vec<(u64, Option<SampleSource>)>,
    counter_id: Option<u64>,
    sample_type: u64,
    user_regs: u64,
    ring: Ring,
    /// Records the kernel dropped so far because the ring buffer was full (summed from
    /// [`PerfRecord::Lost`]).
    pub lost: u64,
}

impl Session {
    /// Opens the events on task `pid` (all on any CPU).
    pub fn open(pid: i32, options: &SessionOptions) -> Result<Session, PerfError> {
        let count = options.count_instructions || matches!(options.clock, SamplingClock::Instructions { .. });
        let mut sample_type = sys::PERF_SAMPLE_IDENTIFIER | sys::PERF_SAMPLE_IP | sys::PERF_SAMPLE_TID | sys::PERF_SAMPLE_TIME;
        if count {
            sample_type |= sys::PERF_SAMPLE_READ;
        }
        if options.user_regs != 0 {
            sample_type |= sys::PERF_SAMPLE_REGS_USER;
        }
        let sample_type = sample_type as u64;
        let configure = |attr: &mut perf_event_attr, period: u64| {
            attr.__bindgen_anon_1.sample_period = period;
            attr.sample_type = sample_type;
            attr.read_format = (sys::PERF_FORMAT_GROUP | sys::PERF_FORMAT_ID) as u64;
            attr.sample_regs_user = options.user_regs;
            attr.set_use_clockid(1);
            attr.clockid = libc::CLOCK_MONOTONIC;
            attr.set_sample_id_all(1);
            if options.enable_on_exec {
                attr.set_enable_on_exec(1);
                attr.set_disabled(1);
            }
        };
        let (mut attr, what) = match options.clock {
            SamplingClock::Instructions { period } => {
                let mut a = base_attr(sys::PERF_TYPE_HARDWARE, sys::PERF_COUNT_HW_INSTRUCTIONS as u64);
                configure(&mut a, period.max(1));
                (a, "instructions:u")
            }
            SamplingClock::CpuClock { period_ns } => {
                let mut a = base_attr(sys::PERF_TYPE_SOFTWARE, sys::PERF_COUNT_SW_CPU_CLOCK as u64);
                configure(&mut a, period_ns.max(1));
                (a, "cpu-clock")
            }
        };
        attr.set_mmap(1);
        attr.set_mmap2(1);
        if options.context_switches {
            attr.set_context_switch(1);
        }
        let cpu = match options.inherit_on_cpu {
            Some(cpu) => {
                // Group reads of inherited events are refused by older kernels, and a
                // clock-only session reads nothing.
                attr.set_inherit(1);
                if !count {
                    attr.read_format = 0;
                }
                attr.set_task(1);
                cpu
            }
            None => -1,
        };
        // Wake the reader when a quarter of the buffer is full rather than every few
        // samples: at 100 k samples/s each wake-up is a context switch the observed
        // program pays for on a small machine. The reader also drains on a timer.
        // SAFETY: sysconf reads a constant of the system; no memory is passed.
        let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) } as usize;
        attr.set_watermark(1);
        attr.__bindgen_anon_2.wakeup_watermark = (options.buffer_pages.next_power_of_two() * page / 4) as u32;
        let leader = open(&mut attr, pid, cpu, -1, what)?;
        let mut ids = vec![(event_id(&leader), Some(SampleSource::Clock))];
        let mut counter_id = matches!(options.clock, SamplingClock::Instructions { .. }).then_some(ids[0].0);
        let mut members = Vec::new();
        if count && counter_id.is_none() {
            let mut a = base_attr(sys::PERF_TYPE_HARDWARE, sys::PERF_COUNT_HW_INSTRUCTIONS as u64);
            configure(&mut a, 0);
            a.sample_type = 0;
            a.set_disabled(0);
            a.set_enable_on_exec(0);
            let fd = open(&mut a, pid, cpu, leader.as_raw_fd(), "instructions:u counter")?;
            counter_id = Some(event_id(&fd));
            ids.push((event_id(&fd), None));
            members.push(fd);
        }
        let uprobe_type = if options.uprobes.is_empty() { 0 } else { uprobe_pmu_type()? };
        for (i, probe) in options.uprobes.iter().enumerate() {
            let path = CString::new(probe.path.as_os_str().as_encoded_bytes())
                .map_err(|_| PerfError::BadPath(probe.path.display().to_string()))?;
            let mut a = base_attr(uprobe_type, u64::from(probe.is_return));
            configure(&mut a, 1);
            // The probe fires in the kernel's breakpoint handler: excluding the kernel
            // would drop every hit. Its sample still carries the user IP and registers.
            a.set_exclude_kernel(0);
            a.__bindgen_anon_3.uprobe_path = path.as_ptr() as u64;
            a.__bindgen_anon_4.probe_offset = probe.file_offset;
            let what = format!("uprobe {}+0x{:x}{}", probe.path.display(), probe.file_offset, if probe.is_return { " (return)" } else { "" });
            let fd = open(&mut a, pid, cpu, leader.as_raw_fd(), &what)?;
            ids.push((event_id(&fd), Some(SampleSource::Uprobe(i))));
            members.push(fd);
        }
        // The kernel redirects a member's records only into an event that already has
        // its ring buffer, so map first, then redirect.
        let ring = Ring::map(&leader, options.buffer_pages)?;
        for fd in &members {
            // SAFETY: both descriptors are open perf events owned here; the ioctl takes no memory.
            if unsafe { perf_event_open_sys::ioctls::SET_OUTPUT(fd.as_raw_fd(), leader.as_raw_fd()) } < 0 {
                return Err(PerfError::Redirect(nix::errno::Errno::last()));
            }
        }
        Ok(Session { leader, _members: members, ids, counter_id, sample_type, user_regs: options.user_regs, ring, lost: 0 })
    }

    /// Enables the group now (when not waiting for exec).
    pub(crate) fn enable(&self) {
        // SAFETY: the leader is an open perf event owned by this session; the ioctl takes a flag, no memory.
        unsafe {
            perf_event_open_sys::ioctls::ENABLE(self.leader.as_raw_fd(), sys::PERF_IOC_FLAG_GROUP);
        }
    }

    /// Waits up to `timeout_ms` for data.
    pub fn wait(&self, timeout_ms: i32) {
        let mut pfd = libc::pollfd { fd: self.leader.as_raw_fd(), events: libc::POLLIN, revents: 0 };
        // SAFETY: `pfd` is one valid pollfd that outlives the call, and the count says one.
        unsafe { libc::poll(&mut pfd, 1, timeout_ms) };
    }

    /// Hands every record now in the buffer to `sink`, oldest first.
    pub fn drain(&mut self, sink: &mut dyn FnMut(PerfRecord)) {
        let ids = &self.ids;
        let counter_id = self.counter_id;
        let sample_type = self.sample_type;
        let user_regs = self.user_regs;
        let mut lost = 0;
        self.ring.drain(&mut |kind, misc, body| {
            if let Some(r) = parse_record(kind, misc, body, ids, counter_id, sample_type, user_regs) {
                if let PerfRecord::Lost(n) = r {
                    lost += n;
                }
                sink(r);
            }
        });
        self.lost += lost;
    }
}

fn event_id(fd: &OwnedFd) -> u64 {
    let mut id = 0u64;
    // SAFETY: `fd` is an open perf event and `id` a u64 the kernel writes during the call.
    unsafe { perf_event_open_sys::ioctls::ID(fd.as_raw_fd(), &mut id) };
    id
}

fn uprobe_pmu_type() -> Result<u32, PerfError> {
    std::fs::read_to_string("/sys/bus/event_source/devices/uprobe/type")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .ok_or(PerfError::NoUprobePmu)
}

/// Is there a uprobe PMU? (Needed for marker hits and event-mode probes.)
pub fn uprobes_available() -> bool {
    Path::new("/sys/bus/event_source/devices/uprobe/type").exists()
}

/// A little-endian cursor over a record body.
struct Cursor<'a>(&'a [u8]);

impl Cursor<'_> {
    fn u64(&mut self) -> Option<u64> {
        let (head, rest) = self.0.split_first_chunk::<8>()?;
        self.0 = rest;
        Some(u64::from_le_bytes(*head))
    }
    fn u32(&mut self) -> Option<u32> {
        let (head, rest) = self.0.split_first_chunk::<4>()?;
        self.0 = rest;
        Some(u32::from_le_bytes(*head))
    }
}

fn parse_record(
    kind: u32,
    misc: u16,
    body: &[u8],
    ids: &[(u64, Option<SampleSource>)],
    counter_id: Option<u64>,
    sample_type: u64,
    user_regs: u64,
) -> Option<PerfRecord> {
    let mut c = Cursor(body);
    match kind {
        sys::PERF_RECORD_SAMPLE => {
            let id = c.u64()?;
            let source = ids.iter().find(|(i, _)| *i == id).and_then(|(_, s)| *s)?;
            let ip = c.u64()?;
            let pid = c.u32()?;
            let tid = c.u32()?;
            let time_ns = c.u64()?;
            let mut instructions = None;
            if sample_type & sys::PERF_SAMPLE_READ as u64 != 0 {
                let nr = c.u64()?;
                for _ in 0..nr {
                    let value = c.u64()?;
                    let vid = c.u64()?;
                    if Some(vid) == counter_id {
                        instructions = Some(value);
                    }
                }
            }
            let mut regs = None;
            if sample_type & sys::PERF_SAMPLE_REGS_USER as u64 != 0 {
                let abi = c.u64()?;
                if abi != 0 {
                    let n = user_regs.count_ones();
                    regs = Some((0..n).map(|_| c.u64()).collect::<Option<Vec<u64>>>()?);
                }
            }
            Some(PerfRecord::Sample(PerfSample { source, ip, pid, tid, time_ns, instructions, regs }))
        }
        sys::PERF_RECORD_MMAP2 => {
            let _pid = c.u32()?;
            let _tid = c.u32()?;
            let start = c.u64()?;
            let len = c.u64()?;
            let file_offset = c.u64()?;
            // Either device/inode/generation or a build id: 24 bytes either way.
            let (maj, min, ino, _generation) = (c.u32()?, c.u32()?, c.u64()?, c.u64()?);
            let file = (misc as u32 & sys::PERF_RECORD_MISC_MMAP_BUILD_ID == 0).then_some((maj, min, ino));
            let prot = c.u32()?;
            let _flags = c.u32()?;
            let name = c.0.split(|&b| b == 0).next().unwrap_or(&[]);
            Some(PerfRecord::Mmap(PerfMmap {
                start,
                len,
                file_offset,
                executable: prot & libc::PROT_EXEC as u32 != 0,
                path: String::from_utf8_lossy(name).into_owned(),
                file,
            }))
        }
        sys::PERF_RECORD_SWITCH => {
            // sample_id_all: pid, tid, time, identifier (the session's sample type)
            let _pid = c.u32()?;
            let tid = c.u32()?;
            let time_ns = c.u64()?;
            let out = misc as u32 & sys::PERF_RECORD_MISC_SWITCH_OUT != 0;
            let preempted = misc as u32 & sys::PERF_RECORD_MISC_SWITCH_OUT_PREEMPT != 0;
            Some(PerfRecord::Switch { tid, time_ns, out, preempted })
        }
        sys::PERF_RECORD_LOST => {
            let _id = c.u64()?;
            Some(PerfRecord::Lost(c.u64()?))
        }
        _ => None,
    }
}

/// The mmap'ed ring buffer: one metadata page, then 2^n data pages.
struct Ring {
    base: *mut u8,
    len: usize,
    data_offset: usize,
    data_size: usize,
    scratch: Vec<u8>,
}

// SAFETY: the mapping belongs to this Ring alone (no other Rust value points into it), so
// moving the Ring to another thread moves the only access to it.
unsafe impl Send for Ring {}

impl Ring {
    fn map(fd: &OwnedFd, pages: usize) -> Result<Ring, PerfError> {
        // SAFETY: sysconf reads a constant of the system; no memory is passed.
        let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) } as usize;
        let pages = pages.next_power_of_two().max(1);
        let len = page * (pages + 1);
        // SAFETY: a new shared mapping of the perf descriptor at an address the kernel
        // chooses: it aliases no Rust memory; the result is checked before use.
        let base = unsafe { libc::mmap(std::ptr::null_mut(), len, libc::PROT_READ | libc::PROT_WRITE, libc::MAP_SHARED, fd.as_raw_fd(), 0) };
        if base == libc::MAP_FAILED {
            return Err(PerfError::Mmap(nix::errno::Errno::last()));
        }
        Ok(Ring { base: base as *mut u8, len, data_offset: page, data_size: page * pages, scratch: Vec::new() })
    }

    fn meta(&self) -> *mut sys::perf_event_mmap_page {
        self.base as *mut sys::perf_event_mmap_page
    }

    fn drain(&mut self, f: &mut dyn FnMut(u32, u16, &[u8])) {
        let meta = self.meta();
        // SAFETY: `meta` is the first page of the live mapping, a perf_event_mmap_page that
        // the kernel updates concurrently: read and written only through volatile accesses
        // of aligned u64 fields, never through a reference to the page.
        let head = unsafe { std::ptr::read_volatile(&(*meta).data_head) };
        fence(Ordering::Acquire);
        // SAFETY: as for `head`.
        let mut tail = unsafe { std::ptr::read_volatile(&(*meta).data_tail) };
        // The kernel keeps writing the part of the data area past `head` while this reads
        // the part before it, so no `&[u8]` is made over the area (a reference to memory
        // that changes under it is undefined behaviour): each record is copied out of the
        // published part [tail, head) through the raw pointer.
        let data = RingData { base: self.base.wrapping_add(self.data_offset), size: self.data_size };
        while tail + 8 <= head {
            let at = (tail % self.data_size as u64) as usize;
            let mut header = [0u8; 8];
            data.copy_wrapping(at, &mut header);
            let kind = u32::from_le_bytes(header[0..4].try_into().unwrap());
            let misc = u16::from_le_bytes(header[4..6].try_into().unwrap());
            let size = u16::from_le_bytes(header[6..8].try_into().unwrap()) as usize;
            if size < 8 || size > self.data_size || tail + size as u64 > head {
                break;
            }
            self.scratch.resize(size - 8, 0);
            data.copy_wrapping((at + 8) % self.data_size, &mut self.scratch);
            f(kind, misc, &self.scratch);
            tail += size as u64;
        }
        fence(Ordering::Release);
        // SAFETY: as for `head`; data_tail is the one field the reader writes.
        unsafe { std::ptr::write_volatile(&mut (*meta).data_tail, tail) };
    }
}

/// The data area of a live perf ring: `size` bytes at `base`, read only by copying.
struct RingData {
    base: *const u8,
    size: usize,
}

impl RingData {
    /// Copies `out.len()` bytes starting at offset `at`, wrapping at the end of the area.
    fn copy_wrapping(&self, at: usize, out: &mut [u8]) {
        assert!(at < self.size && out.len() <= self.size, "a perf record of {} bytes at {at} in a ring of {}", out.len(), self.size);
        let first = out.len().min(self.size - at);
        // SAFETY: [at, at + first) and [0, out.len() - first) lie inside the mapped data
        // area (checked above); the caller reads only bytes before the published head,
        // which the kernel does not write until the tail passes them; `out` is ours.
        unsafe {
            std::ptr::copy_nonoverlapping(self.base.add(at), out.as_mut_ptr(), first);
            std::ptr::copy_nonoverlapping(self.base, out.as_mut_ptr().add(first), out.len() - first);
        }
    }
}

impl Drop for Ring {
    fn drop(&mut self) {
        // SAFETY: base and len are the mapping made in `map`, unmapped once, here.
        unsafe { libc::munmap(self.base as *mut libc::c_void, self.len) };
    }
}
