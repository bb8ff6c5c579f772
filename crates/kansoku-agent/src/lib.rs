//! kansoku's in-process probe agent (issue 12).
//!
//! kansoku starts the observed program with this library in `LD_PRELOAD` and two
//! environment variables: the shared file ([`agent_abi::ENV_SHM`]) and the plan
//! ([`agent_abi::ENV_PLAN`]). Before the program's `main` the agent's constructor finds
//! each planned function in the loaded modules, moves its first instructions to a
//! trampoline and writes a `jmp` over them ([`patch`]). From then on a probe hit is a few
//! dozen instructions in the program's own thread: the stubs ([`stubs`]) save registers
//! and read the time stamp counter, the handlers keep a shadow stack of return addresses
//! and append one 16-byte record to the thread's ring in the shared file. Nothing enters
//! the kernel per hit.
//!
//! Without [`agent_abi::ENV_SHM`] the library does nothing, so a child that inherits
//! `LD_PRELOAD` but not the variables runs untouched. A process that execs keeps both and
//! patches whatever of the plan its new image contains (the same libraries, or the same
//! program again): exec is followed. A forked child gets rings of its own. A function of
//! whatever program runs (a shim that builds its program's path at run time) is found by
//! asking kansoku in each process (module `ask`): the agent reads no symbol table itself.

#![deny(missing_docs)]

use std::cell::UnsafeCell;
use std::ffi::{CStr, CString};
use std::sync::atomic::{AtomicPtr, AtomicU64, Ordering};

use kansoku_core::agent_abi::{self, *};

mod ask;
pub mod patch;
mod stubs;

/// Activations a thread can have open at once; deeper calls are timed at entry only.
const SHADOW_DEPTH: usize = 1024;
const NO_EXIT: u32 = u32::MAX;

/// What the handlers read on every hit; written once by the constructor, before any hit.
struct Tables {
    control: *const Control,
    file: *mut u8,
    tsc: bool,
    /// Per entry point: where its moved prologue is.
    continuation: Box<[u64]>,
    /// Per entry point: its exit point, or [`NO_EXIT`].
    exit_of: Box<[u32]>,
}

static TABLES: AtomicPtr<Tables> = AtomicPtr::new(std::ptr::null_mut());
/// Bumped in a forked child so that its threads claim rings of their own.
static GENERATION: AtomicU64 = AtomicU64::new(0);

#[derive(Clone, Copy)]
struct Frame {
    /// Where the return address was (the stack pointer at the function's entry).
    slot: u64,
    /// The return address the stub replaced.
    ret: u64,
    exit: u32,
}

struct ThreadState {
    ring: *const RingHeader,
    records: *mut Record,
    head: u64,
    /// `tail + RING_RECORDS` as last read: below it the ring has room without looking.
    limit: u64,
    generation: u64,
    /// Inside a handler: a probed function called from there (or from a signal handler
    /// that interrupted it) passes through untimed.
    busy: bool,
    /// The agent's constructor is running on this thread: its own calls of probed
    /// functions (malloc, memcpy) are not the program's and are not counted at all.
    in_agent: bool,
    depth: usize,
    frames: [Frame; SHADOW_DEPTH],
}

thread_local! {
    static STATE: UnsafeCell<ThreadState> = const {
        UnsafeCell::new(ThreadState {
            ring: std::ptr::null(),
            records: std::ptr::null_mut(),
            head: 0,
            limit: 0,
            generation: u64::MAX,
            busy: false,
            in_agent: false,
            depth: 0,
            frames: [Frame { slot: 0, ret: 0, exit: 0 }; SHADOW_DEPTH],
        })
    };
}

/// This thread's state, reached without the dynamic linker. `STATE` is general-dynamic TLS
/// (a `cdylib`'s thread-locals are), so each `STATE.with` calls ld.so's `__tls_get_addr`:
/// on every hit that was a third of the marker's cost (issue 42). The agent is loaded by
/// `LD_PRELOAD`, at start, so it may use the static TLS block: [`stubs`] defines one
/// initial-exec slot, `kansoku_agent_tls`, read at `%fs` plus an offset the dynamic linker
/// wrote into the GOT. It holds the address of this thread's `STATE`, looked up once per
/// thread (null in a new thread's fresh TLS; a forked child keeps its thread's copy, which
/// points at the same, copied, `STATE`).
#[inline(always)]
fn state() -> *mut ThreadState {
    let p: *mut ThreadState;
    // SAFETY: reads this thread's own slot; `kansoku_agent_tls` is an 8-byte `.tbss` object
    // of the agent, and its GOT entry holds its offset from the thread pointer.
    unsafe {
        core::arch::asm!(
            "mov {p}, qword ptr [rip + kansoku_agent_tls@GOTTPOFF]",
            "mov {p}, qword ptr fs:[{p}]",
            p = out(reg) p,
            options(nostack, readonly, preserves_flags, pure),
        );
    }
    if p.is_null() {
        return state_first();
    }
    p
}

#[cold]
#[inline(never)]
fn state_first() -> *mut ThreadState {
    let p = STATE.with(|s| s.get());
    // SAFETY: writes this thread's own slot (see `state`).
    unsafe {
        core::arch::asm!(
            "mov {o}, qword ptr [rip + kansoku_agent_tls@GOTTPOFF]",
            "mov qword ptr fs:[{o}], {p}",
            o = out(reg) _,
            p = in(reg) p,
            options(nostack, preserves_flags),
        );
    }
    p
}

#[inline(always)]
fn now(tsc: bool) -> u64 {
    // (with the TSC the stubs read the counter themselves; this serves the calibration-free
    // paths and CLOCK_MONOTONIC, perf's clock, for `record --marker`)
    if tsc {
        // SAFETY: rdtsc exists on every x86-64 CPU and reads no memory.
        unsafe { core::arch::x86_64::_rdtsc() }
    } else {
        let mut t = libc::timespec { tv_sec: 0, tv_nsec: 0 };
        // SAFETY: `t` is a timespec of ours that the call fills.
        unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut t) };
        t.tv_sec as u64 * 1_000_000_000 + t.tv_nsec as u64
    }
}

/// What the entry handler tells the stub: where to continue, and where to write the
/// entry's time stamp (null: already written, or no record).
#[repr(C)]
struct EntryAnswer {
    continuation: u64,
    stamp: *mut u64,
}

/// Called by the entry stub: `point` is the entry point, `slot` the address of the return
/// address. With the TSC the stub reads the counter itself, after restoring the vector
/// registers, into the record this handler reserved (time 0 until then: the drainer waits
/// for it).
#[no_mangle]
unsafe extern "C" fn on_entry(point: u64, slot: *mut u64) -> EntryAnswer {
    let t = &*TABLES.load(Ordering::Relaxed);
    let continuation = *t.continuation.get_unchecked(point as usize);
    let stamp = (|| {
        let s = &mut *state();
        if s.busy || s.in_agent {
            if !s.in_agent {
                (*t.control).lost.fetch_add(1, Ordering::Relaxed);
            }
            return std::ptr::null_mut();
        }
        s.busy = true;
        let exit = *t.exit_of.get_unchecked(point as usize);
        if exit != NO_EXIT && s.depth < SHADOW_DEPTH {
            *s.frames.get_unchecked_mut(s.depth) = Frame { slot: slot as u64, ret: *slot, exit };
            s.depth += 1;
            *slot = stubs::kansoku_agent_exit_stub as *const () as u64;
        }
        // An exit probed alone is planted as entry = exit: its entry records nothing.
        let mut stamp = std::ptr::null_mut();
        if exit != point as u32 {
            let time = if t.tsc { 0 } else { now(false) };
            let record = append(s, t, point << 1, time);
            if t.tsc && !record.is_null() {
                stamp = std::ptr::addr_of_mut!((*record).time);
                if exit == NO_EXIT {
                    // no call to time: the stub need not wait for the counter (stubs.rs)
                    stamp = stamp.map_addr(|a| a | 1);
                }
            }
        }
        s.busy = false;
        stamp
    })();
    EntryAnswer { continuation, stamp }
}

/// Called by the exit stub with the stack pointer the function's `ret` left and the time
/// stamp counter it read first thing. Returns the real return address.
#[no_mangle]
unsafe extern "C" fn on_exit(sp: u64, tsc: u64) -> u64 {
    let t = &*TABLES.load(Ordering::Relaxed);
    let time = if t.tsc { tsc } else { now(false) };
    {
        let s = &mut *state();
        let slot = sp - 8;
        // The frame of this return; frames above it were left by longjmp (abandoned: the
        // analysis counts them when this exit arrives).
        let Some(k) = (0..s.depth).rev().find(|&k| s.frames[k].slot == slot) else {
            fatal(b"kansoku agent: a probed function returned through a frame it does not know; aborting\n");
        };
        let f = s.frames[k];
        s.depth = k;
        if !s.busy {
            s.busy = true;
            append(s, t, (f.exit as u64) << 1 | 1, time);
            s.busy = false;
        }
        f.ret
    }
}

/// C++ exceptions and Rust panics unwind through `_Unwind_RaiseException` (thread
/// cancellation through `_Unwind_ForcedUnwind`): the unwinder reads return addresses off the
/// stack, and one replaced by the exit stub has no unwind entry, so the unwind would fail
/// and the program terminate. The agent, preloaded, stands in front of both: before the
/// unwind starts it puts back every return address this thread's shadow stack replaced
/// (top first, and only where the stub's address is still there: a frame left by
/// `longjmp` may have had its slot reused). Those calls then end without an exit hit and
/// are reported as unfinished or abandoned, as the seed's missed exits were.
unsafe fn restore_return_addresses() {
    let stub = stubs::kansoku_agent_exit_stub as *const () as u64;
    STATE.with(|s| {
        let s = &mut *s.get();
        for f in s.frames[..s.depth].iter().rev() {
            let slot = f.slot as *mut u64;
            if *slot == stub {
                *slot = f.ret;
            }
        }
        s.depth = 0;
    });
}

/// The next definition of `name` after the agent (libgcc_s's), found once.
unsafe fn next_symbol(cache: &AtomicU64, name: &CStr) -> u64 {
    let mut f = cache.load(Ordering::Relaxed);
    if f == 0 {
        f = libc::dlsym(libc::RTLD_NEXT, name.as_ptr()) as u64;
        cache.store(f, Ordering::Relaxed);
    }
    f
}

/// # Safety
/// Called by the C++ runtime (or Rust's) with its exception object, as libgcc_s's is.
#[no_mangle]
pub unsafe extern "C" fn _Unwind_RaiseException(exception: *mut libc::c_void) -> libc::c_int {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    restore_return_addresses();
    match next_symbol(&NEXT, c"_Unwind_RaiseException") {
        0 => fatal(b"kansoku agent: no _Unwind_RaiseException to forward an exception to\n"),
        f => std::mem::transmute::<u64, unsafe extern "C" fn(*mut libc::c_void) -> libc::c_int>(f)(exception),
    }
}

/// # Safety
/// Called by the thread library with its exception object and stop function, as
/// libgcc_s's is.
#[no_mangle]
pub unsafe extern "C" fn _Unwind_ForcedUnwind(exception: *mut libc::c_void, stop: *mut libc::c_void, argument: *mut libc::c_void) -> libc::c_int {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    restore_return_addresses();
    match next_symbol(&NEXT, c"_Unwind_ForcedUnwind") {
        0 => fatal(b"kansoku agent: no _Unwind_ForcedUnwind to forward to\n"),
        f => std::mem::transmute::<u64, unsafe extern "C" fn(*mut libc::c_void, *mut libc::c_void, *mut libc::c_void) -> libc::c_int>(f)(exception, stop, argument),
    }
}

fn fatal(message: &[u8]) -> ! {
    // SAFETY: write reads `message.len()` bytes of a live slice; abort takes nothing.
    unsafe {
        libc::write(2, message.as_ptr().cast(), message.len());
        libc::abort()
    }
}

/// Appends one record to the thread's ring, claiming a ring first if the thread (or the
/// process, after a fork) has none. Returns the record (null when the hit was lost).
#[inline(always)]
unsafe fn append(s: &mut ThreadState, t: &Tables, what: u64, time: u64) -> *mut Record {
    if s.generation != GENERATION.load(Ordering::Relaxed) && !claim(s, t) {
        (*t.control).lost.fetch_add(1, Ordering::Relaxed);
        return std::ptr::null_mut();
    }
    if s.head >= s.limit && !wait_for_room(s, t) {
        (*t.control).lost.fetch_add(1, Ordering::Relaxed);
        return std::ptr::null_mut();
    }
    let record = s.records.add((s.head % RING_RECORDS) as usize);
    *record = Record { time, what };
    s.head += 1;
    (*s.ring).head.store(s.head, Ordering::Release);
    record
}

#[cold]
unsafe fn claim(s: &mut ThreadState, t: &Tables) -> bool {
    s.generation = GENERATION.load(Ordering::Relaxed);
    let k = (*t.control).rings_claimed.fetch_add(1, Ordering::Relaxed) as usize;
    if k >= MAX_RINGS {
        s.ring = std::ptr::null();
        return false;
    }
    let ring = t.file.add(ring_offset(k)) as *const RingHeader;
    (*ring).pid.store(libc::getpid() as u32, Ordering::Relaxed);
    (*ring).tid.store(libc::syscall(libc::SYS_gettid) as u32, Ordering::Relaxed);
    s.ring = ring;
    s.records = t.file.add(ring_offset(k) + std::mem::size_of::<RingHeader>()) as *mut Record;
    // Fault the ring's pages in now rather than one per 256 hits inside timed calls.
    for page in (0..RING_RECORDS as usize * std::mem::size_of::<Record>()).step_by(4096) {
        std::ptr::write_volatile((s.records as *mut u8).add(page), 0);
    }
    s.head = 0;
    s.limit = RING_RECORDS;
    true
}

/// The ring looked full: read kansoku's tail again, and wait for it to drain (up to a
/// second: kansoku drains every millisecond; longer means it is gone).
#[cold]
unsafe fn wait_for_room(s: &mut ThreadState, _t: &Tables) -> bool {
    if s.ring.is_null() {
        return false;
    }
    for _ in 0..20_000 {
        s.limit = (*s.ring).tail.load(Ordering::Acquire) + RING_RECORDS;
        if s.head < s.limit {
            return true;
        }
        let pause = libc::timespec { tv_sec: 0, tv_nsec: 50_000 };
        libc::nanosleep(&pause, std::ptr::null_mut());
    }
    false
}

extern "C" fn after_fork_in_child() {
    GENERATION.fetch_add(1, Ordering::Relaxed);
}

#[used]
#[link_section = ".init_array"]
static INIT: extern "C" fn() = init;

extern "C" fn init() {
    // SAFETY: STATE is this thread's own; while the initialiser runs nothing else of the
    // agent on this thread holds a reference into it (the probes are not planted yet).
    let in_agent = |on: bool| STATE.with(|s| unsafe { (*s.get()).in_agent = on });
    in_agent(true);
    // A panic must not unwind into the dynamic linker.
    // SAFETY: start runs once, from the program's initialisers, before main and before any
    // probe is planted, as it requires.
    let _ = std::panic::catch_unwind(|| unsafe { start() });
    in_agent(false);
}

/// A loaded module as the dynamic linker sees it.
struct Module {
    path: String,
    /// The name the dynamic linker gave it (with `base`, what tells one load from another).
    listed: String,
    base: u64,
    /// Its executable segments' extent: what the branch-target sweep reads.
    code_start: u64,
    code_end: u64,
    /// The sweep's result, made on the module's first probe.
    targets: Option<Vec<u64>>,
}

/// One function of the plan.
struct Probe {
    plan: PlannedProbe,
    /// The base of the module it was planted in: a module unloaded and loaded again is
    /// planted again.
    planted_in: Option<u64>,
    /// What became of it in this process: a `POINT_*` state and, when refused, a `REFUSE_*`.
    outcome: (u32, u32),
}

/// What planting needs, kept after the initialiser for the modules the program loads
/// later (`dlopen`, an interpreter's extension modules): the dynamic linker's notification
/// ([`hook_loader`]) plants their points before anything of theirs runs.
struct Planter {
    tables: *mut Tables,
    control: *const Control,
    first: bool,
    probes: Vec<Probe>,
    modules: Vec<Module>,
    pools: patch::Pools,
    /// (address, entry, exit) of every patched function.
    planted: Vec<(u64, u32, Option<u32>)>,
    /// The dynamic linker's counts of loads and unloads at the last look.
    seen: (u64, u64),
}

// SAFETY: the pointers are the leaked tables and the shared mapping, which live as long as
// the process; the Planter is only reached through PLANTER's lock.
unsafe impl Send for Planter {}

static PLANTER: std::sync::Mutex<Option<Planter>> = std::sync::Mutex::new(None);

impl Planter {
    /// Plants every probe not planted yet whose module is one of `fresh` (indices into
    /// `modules`). At start the first agent says which modules are not loaded; later, a
    /// point's state is written only while it still reads "not loaded" (the first agent's
    /// word stands otherwise).
    unsafe fn plant_in(&mut self, fresh: &[usize], at_start: bool) {
        let control = self.control;
        for k in 0..self.probes.len() {
            if self.probes[k].planted_in.is_some() {
                continue;
            }
            let p = self.probes[k].plan.clone();
            let Some(i) = fresh.iter().copied().find(|&i| Some(&self.modules[i].path) == p.module.as_ref()) else {
                if at_start && self.first {
                    // a function of the program that runs: no program defined it so far
                    let reason = if p.in_any_program() { REFUSE_NOT_DEFINED } else { REFUSE_NOT_LOADED };
                    set_state(control, p.entry, POINT_REFUSED, reason, 0, 0);
                }
                continue;
            };
            // a later image (after exec: `sh -c PROG`) or a later load planted what the
            // first image did not load: said, so the report does not call it unprobed
            let say = (at_start && self.first) || not_loaded_by_first(control, p.entry);
            let m = &mut self.modules[i];
            let (address, size) = match resolve(m, p.vaddr, p.size, p.ifunc && at_start, &p.name) {
                Some(a) => a,
                None => {
                    let reason = if at_start { REFUSE_NO_SYMBOL } else { REFUSE_LATE_IFUNC };
                    self.probes[k].outcome = (POINT_REFUSED, reason);
                    if say {
                        set_state(control, p.entry, POINT_REFUSED, reason, 0, 0);
                    }
                    continue;
                }
            };
            let (entry, exit) = (p.entry, p.exit);
            if let Some(&(_, other, other_exit)) = self.planted.iter().find(|q| q.0 == address) {
                self.probes[k].outcome = (POINT_ALIAS, 0);
                if say {
                    set_state(control, entry, POINT_ALIAS, 0, address, other);
                    if let (Some(e), Some(o)) = (exit, other_exit) {
                        set_state(control, e, POINT_ALIAS, 0, address, o);
                    }
                }
                continue;
            }
            let (start, end) = (m.code_start, m.code_end);
            let base = m.base;
            let targets = m.targets.get_or_insert_with(|| patch::branch_targets(start, end));
            match plant(&mut *self.tables, &mut self.pools, address, size, targets, entry, exit) {
                Ok(()) => {
                    self.planted.push((address, entry, exit));
                    self.probes[k].planted_in = Some(base);
                    self.probes[k].outcome = (POINT_PATCHED, 0);
                    if say {
                        set_state(control, entry, POINT_PATCHED, 0, address, 0);
                    }
                }
                Err(reason) => {
                    self.probes[k].outcome = (POINT_REFUSED, reason);
                    if say {
                        set_state(control, entry, POINT_REFUSED, reason, address, 0);
                    }
                }
            }
        }
    }

    /// The dynamic linker's list changed: forgets the modules unloaded since the last look
    /// and plants in the new ones.
    unsafe fn look_again(&mut self) {
        let counts = load_counts();
        if counts == self.seen {
            return;
        }
        self.seen = counts;
        let old = std::mem::take(&mut self.modules);
        let (modules, fresh) = loaded_modules(old);
        self.modules = modules;
        let modules = &self.modules;
        for p in self.probes.iter_mut() {
            // (a module listed at the same base is the same load: every unload was seen)
            if p.planted_in.is_some_and(|b| !modules.iter().any(|m| m.base == b && Some(&m.path) == p.plan.module.as_ref())) {
                p.planted_in = None;
            }
        }
        self.planted.retain(|q| modules.iter().any(|m| m.code_start <= q.0 && q.0 < m.code_end));
        if fresh.is_empty() {
            return;
        }
        self.plant_in(&fresh, false);
        if self.first {
            for (slot, base) in (*self.control).pools.iter().zip(self.pools.bases()) {
                slot.store(base, Ordering::Relaxed);
            }
        }
    }
}

unsafe fn start() {
    let Some(shm) = std::env::var_os(agent_abi::ENV_SHM) else { return };
    let Some(plan) = std::env::var_os(agent_abi::ENV_PLAN).and_then(|p| std::fs::read_to_string(p).ok()) else { return };
    let Some(file) = map_shared(&shm) else { return };
    let control = file as *const Control;
    if (*control).magic != MAGIC || (*control).version != VERSION {
        return;
    }
    let first = (*control).agents.fetch_add(1, Ordering::AcqRel) == 0;
    let tables = Box::new(Tables {
        control,
        file,
        tsc: (*control).clock == CLOCK_TSC,
        continuation: vec![0u64; MAX_POINTS].into_boxed_slice(),
        exit_of: vec![NO_EXIT; MAX_POINTS].into_boxed_slice(),
    });
    let tables = Box::into_raw(tables);
    TABLES.store(tables, Ordering::Release);
    libc::pthread_atfork(None, None, Some(after_fork_in_child));
    let mut probes = Vec::new();
    let mut calibration = None;
    for line in plan.lines() {
        match parse_plan_line(line) {
            Some(PlanEntry::Probe(plan)) => probes.push(Probe { plan, planted_in: None, outcome: (POINT_UNSET, 0) }),
            Some(PlanEntry::Calibrate { entry, exit, count }) => calibration = Some((entry, exit, count)),
            None => {}
        }
    }
    let (modules, fresh) = loaded_modules(Vec::new());
    // functions of whatever program runs (a shim's): kansoku says where they are here
    let asked = ask::where_they_are(control, &mut probes, &modules);
    let mut planter = Planter { tables, control, first, probes, modules, pools: patch::Pools::default(), planted: Vec::new(), seen: load_counts() };
    planter.plant_in(&fresh, true);
    if let Some(asked) = &asked {
        ask::say_what_was_planted(control, asked, &planter.probes);
    }
    if let (Some((entry, exit, count)), true) = (calibration, first) {
        calibrate(&mut *tables, &mut planter.pools, entry, exit, count);
    }
    // points of modules not loaded yet are planted when the program loads them
    if planter.probes.iter().any(|p| p.planted_in.is_none()) {
        hook_loader(&mut planter);
    }
    if first {
        for (slot, base) in (*control).pools.iter().zip(planter.pools.bases()) {
            slot.store(base, Ordering::Relaxed);
        }
    }
    *PLANTER.lock().unwrap_or_else(|e| e.into_inner()) = Some(planter);
    if first {
        (*control).ready.store(1, Ordering::Release);
        if (*control).hold.load(Ordering::Acquire) == 1 {
            let pause = libc::timespec { tv_sec: 0, tv_nsec: 100_000 };
            for _ in 0..HOLD_LIMIT_MS * 10 {
                if (*control).go.load(Ordering::Acquire) != 0 {
                    break;
                }
                libc::nanosleep(&pause, std::ptr::null_mut());
            }
        }
    }
}

/// The dynamic linker's `struct r_debug` (`<link.h>`), what debuggers read.
#[repr(C)]
struct RDebug {
    version: libc::c_int,
    map: *mut libc::c_void,
    /// The address of `_dl_debug_state`, the empty function the linker calls before and
    /// after it changes its list of modules.
    brk: u64,
    state: libc::c_int,
    ldbase: u64,
}
/// `r_state` once every module of a `dlopen` is mapped (before they are relocated and
/// their initialisers run).
const RT_CONSISTENT: libc::c_int = 0;

static R_DEBUG: AtomicPtr<RDebug> = AtomicPtr::new(std::ptr::null_mut());

/// Hooks the dynamic linker's notification, as a debugger does with a breakpoint: the
/// first bytes of `_dl_debug_state` (glibc's is a lone `ret` padded with nops) become a
/// jump to [`stubs::kansoku_agent_load_stub`], which calls [`on_load`] and returns to the
/// linker. Once `dlopen` has mapped its modules (RT_CONSISTENT) their points are planted,
/// before the linker relocates them, runs their initialisers and returns to the program:
/// no thread can be in their code yet. Without the hook (another C library, a linker
/// whose function looks different) modules loaded later stay unplanted, and the report
/// says so.
unsafe fn hook_loader(planter: &mut Planter) -> bool {
    // (RTLD_DEFAULT is the null handle in glibc)
    let r = libc::dlsym(std::ptr::null_mut(), c"_r_debug".as_ptr()) as *mut RDebug;
    if r.is_null() {
        return false;
    }
    let brk = std::ptr::read_volatile(std::ptr::addr_of!((*r).brk));
    let Some(m) = planter.modules.iter_mut().find(|m| m.code_start <= brk && brk + 32 <= m.code_end) else { return false };
    let Some(prologue) = patch::empty_function(brk) else { return false };
    let (start, end) = (m.code_start, m.code_end);
    let targets = m.targets.get_or_insert_with(|| patch::branch_targets(start, end));
    if patch::check_branch_targets(&prologue, targets).is_err() {
        return false;
    }
    let Some(slot) = planter.pools.slot_near(brk) else { return false };
    patch::write_far_jump(slot, stubs::kansoku_agent_load_stub as *const () as u64);
    R_DEBUG.store(r, Ordering::Release);
    patch::write_jump(&prologue, slot).is_ok()
}

/// The dynamic linker's notification (see [`hook_loader`]), called with its lock held.
#[no_mangle]
unsafe extern "C" fn on_load() {
    let r = R_DEBUG.load(Ordering::Acquire);
    if r.is_null() || std::ptr::read_volatile(std::ptr::addr_of!((*r).state)) != RT_CONSISTENT {
        return;
    }
    // (held: the agent's own look at the modules, which loads nothing)
    let Ok(mut guard) = PLANTER.try_lock() else { return };
    let Some(planter) = guard.as_mut() else { return };
    // SAFETY of the thread-local accesses: this thread's own state, not borrowed elsewhere
    // while the linker runs (no probe handler calls dlopen).
    let was = STATE.try_with(|s| std::mem::replace(&mut (*s.get()).in_agent, true)).unwrap_or(true);
    // a panic must not unwind into the dynamic linker
    let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| planter.look_again()));
    let _ = STATE.try_with(|s| (*s.get()).in_agent = was);
}

/// Whether the first agent left `point` refused because its module was not loaded there
/// (or, for a function of the program that runs, its program did not define it).
unsafe fn not_loaded_by_first(control: *const Control, point: u32) -> bool {
    let p = &(*control).points[point as usize];
    p.state.load(Ordering::Acquire) == POINT_REFUSED && matches!(p.reason.load(Ordering::Relaxed), REFUSE_NOT_LOADED | REFUSE_NOT_DEFINED)
}

unsafe fn set_state(control: *const Control, point: u32, state: u32, reason: u32, address: u64, alias_of: u32) {
    let p = &(*control).points[point as usize];
    p.reason.store(reason, Ordering::Relaxed);
    p.address.store(address, Ordering::Relaxed);
    p.alias_of.store(alias_of, Ordering::Relaxed);
    p.state.store(state, Ordering::Release);
}

unsafe fn plant(t: &mut Tables, pools: &mut patch::Pools, address: u64, size: u64, targets: &[u64], entry: u32, exit: Option<u32>) -> Result<(), u32> {
    let prologue = patch::read_prologue(address, size)?;
    patch::check_branch_targets(&prologue, targets)?;
    let slot = pools.slot_near(address).ok_or(REFUSE_NO_TRAMPOLINE)?;
    let continuation = patch::write_trampoline(&prologue, slot, entry, stubs::kansoku_agent_entry_stub as *const () as u64)?;
    t.continuation[entry as usize] = continuation;
    t.exit_of[entry as usize] = exit.unwrap_or(NO_EXIT);
    patch::write_jump(&prologue, slot)
}

/// The seed's calibration, on a routine of the agent's own: an empty function probed like
/// any other and called `count` times; each call's time is what a probe adds to a call.
unsafe fn calibrate(t: &mut Tables, pools: &mut patch::Pools, entry: u32, exit: u32, count: u32) {
    let address = stubs::kansoku_agent_empty as *const () as u64;
    // nothing branches into the routine: it is a nop and a ret
    let state = match plant(t, pools, address, stubs::EMPTY_SIZE, &[], entry, Some(exit)) {
        Ok(()) => (POINT_PATCHED, 0),
        Err(reason) => (POINT_REFUSED, reason),
    };
    set_state(t.control, entry, state.0, state.1, address, 0);
    if state.0 == POINT_PATCHED {
        // The thread's ring is claimed (and its pages faulted in) before the first timed
        // call, not inside it.
        STATE.with(|s| {
            let s = &mut *s.get();
            if s.generation != GENERATION.load(Ordering::Relaxed) {
                claim(s, t);
            }
        });
        let f: unsafe extern "C" fn() = std::ptr::read_volatile(&(stubs::kansoku_agent_empty as unsafe extern "C" fn()));
        STATE.with(|s| (*s.get()).in_agent = false);
        for _ in 0..count {
            f();
        }
        STATE.with(|s| (*s.get()).in_agent = true);
    }
}

/// A function's runtime address (and size for the branch-target scan; 0 when unknown).
/// With `ifunc`, the dynamic linker is asked first: for a GNU IFUNC it answers with the
/// implementation this machine's calls reach.
unsafe fn resolve(m: &Module, vaddr: u64, size: u64, ifunc: bool, name: &str) -> Option<(u64, u64)> {
    let linked = (vaddr != 0).then(|| m.base + vaddr);
    if ifunc {
        if let Some(a) = dynamic_symbol(m, name) {
            return Some((a, if Some(a) == linked { size } else { 0 }));
        }
    }
    linked.map(|a| (a, size))
}

unsafe fn dynamic_symbol(m: &Module, name: &str) -> Option<u64> {
    let path = CString::new(m.path.as_str()).ok()?;
    let name = CString::new(name).ok()?;
    let handle = libc::dlopen(path.as_ptr(), libc::RTLD_NOLOAD | libc::RTLD_LAZY);
    if handle.is_null() {
        return None;
    }
    let a = libc::dlsym(handle, name.as_ptr());
    libc::dlclose(handle);
    if a.is_null() {
        return None;
    }
    // dlsym searches the library's dependencies too: keep only an answer inside it.
    (a as u64 >= m.base && (a as u64) < m.code_end).then_some(a as u64)
}

unsafe fn map_shared(path: &std::ffi::OsStr) -> Option<*mut u8> {
    use std::os::unix::ffi::OsStrExt;
    let c = CString::new(path.as_bytes()).ok()?;
    let fd = libc::open(c.as_ptr(), libc::O_RDWR | libc::O_CLOEXEC);
    if fd < 0 {
        return None;
    }
    let p = libc::mmap(std::ptr::null_mut(), file_size(), libc::PROT_READ | libc::PROT_WRITE, libc::MAP_SHARED, fd, 0);
    libc::close(fd);
    (p != libc::MAP_FAILED).then_some(p as *mut u8)
}

fn real_path(p: &str) -> String {
    std::fs::canonicalize(p).map(|p| p.to_string_lossy().into_owned()).unwrap_or_else(|_| p.to_string())
}

/// `struct r_debug_extended` (glibc 2.35 and later, `r_version` 2): a namespace's
/// `r_debug` and the next namespace's (`dlmopen`), the base one first.
#[repr(C)]
struct RDebugExtended {
    base: RDebug,
    next: *const RDebugExtended,
}

/// The public head of the dynamic linker's `struct link_map` (`<link.h>`).
#[repr(C)]
struct LinkMap {
    addr: u64,
    name: *const libc::c_char,
    dynamic: *const libc::c_void,
    next: *const LinkMap,
    prev: *const LinkMap,
}

/// Adds the modules of every namespace but the base one (`dlmopen(LM_ID_NEWLM, ...)`),
/// which `dl_iterate_phdr` does not list, read from the linker's `r_debug_extended`
/// chain; each module's code extent from its program headers, mapped at its base. Bounded
/// (16 namespaces, glibc's `DL_NNS`; 4,096 modules each).
unsafe fn other_namespaces(out: &mut Vec<(String, u64, u64, u64)>) {
    let r = libc::dlsym(std::ptr::null_mut(), c"_r_debug".as_ptr()) as *const RDebugExtended;
    if r.is_null() || std::ptr::read_volatile(std::ptr::addr_of!((*r).base.version)) < 2 {
        return;
    }
    let mut ns = std::ptr::read_volatile(std::ptr::addr_of!((*r).next));
    for _ in 0..16 {
        if ns.is_null() {
            return;
        }
        let mut l = std::ptr::read_volatile(std::ptr::addr_of!((*ns).base.map)) as *const LinkMap;
        for _ in 0..4096 {
            if l.is_null() {
                break;
            }
            let name = if (*l).name.is_null() { "" } else { CStr::from_ptr((*l).name).to_str().unwrap_or("") };
            if !name.is_empty() && !out.iter().any(|m| m.1 == (*l).addr) {
                if let Some((start, end)) = code_extent((*l).addr) {
                    out.push((name.to_string(), (*l).addr, start, end));
                }
            }
            l = (*l).next;
        }
        ns = (*ns).next;
    }
}

/// The code extent of the shared object mapped at `base`, from its ELF program headers
/// (a shared object's first segment, with the headers, is mapped at its base).
unsafe fn code_extent(base: u64) -> Option<(u64, u64)> {
    if base == 0 {
        return None;
    }
    let header = &*(base as *const libc::Elf64_Ehdr);
    if header.e_ident[..4] != *b"\x7fELF" || header.e_phoff == 0 || header.e_phnum == 0 || header.e_phnum > 256 {
        return None;
    }
    let headers = std::slice::from_raw_parts((base + header.e_phoff) as *const libc::Elf64_Phdr, header.e_phnum as usize);
    let code = headers.iter().filter(|h| h.p_type == libc::PT_LOAD && h.p_flags & libc::PF_X != 0);
    let start = code.clone().map(|h| base + h.p_vaddr).min()?;
    let end = code.map(|h| base + h.p_vaddr + h.p_filesz).max()?;
    Some((start, end))
}

/// The dynamic linker's counts of modules loaded and unloaded so far.
unsafe fn load_counts() -> (u64, u64) {
    unsafe extern "C" fn first(info: *mut libc::dl_phdr_info, _size: usize, data: *mut libc::c_void) -> libc::c_int {
        *(data as *mut (u64, u64)) = ((*info).dlpi_adds, (*info).dlpi_subs);
        1
    }
    let mut counts = (0u64, 0u64);
    libc::dl_iterate_phdr(Some(first), &mut counts as *mut (u64, u64) as *mut libc::c_void);
    counts
}

/// The modules loaded now, and which of them are not in `known` (a module still loaded is
/// taken over from `known`, with its branch targets, and its path is not looked up again).
unsafe fn loaded_modules(mut known: Vec<Module>) -> (Vec<Module>, Vec<usize>) {
    /// A module as listed: its name, base and code extent.
    type Listed = (String, u64, u64, u64);
    unsafe extern "C" fn each(info: *mut libc::dl_phdr_info, _size: usize, data: *mut libc::c_void) -> libc::c_int {
        let out = &mut *(data as *mut Vec<Listed>);
        let info = &*info;
        let name = if info.dlpi_name.is_null() { "" } else { CStr::from_ptr(info.dlpi_name).to_str().unwrap_or("") };
        let headers = std::slice::from_raw_parts(info.dlpi_phdr, info.dlpi_phnum as usize);
        let code = headers.iter().filter(|h| h.p_type == libc::PT_LOAD && h.p_flags & libc::PF_X != 0);
        let code_start = code.clone().map(|h| info.dlpi_addr + h.p_vaddr).min().unwrap_or(0);
        let code_end = code.map(|h| info.dlpi_addr + h.p_vaddr + h.p_filesz).max().unwrap_or(0);
        out.push((name.to_string(), info.dlpi_addr, code_start, code_end));
        0
    }
    let mut listed: Vec<Listed> = Vec::new();
    libc::dl_iterate_phdr(Some(each), &mut listed as *mut Vec<Listed> as *mut libc::c_void);
    // dl_iterate_phdr lists the caller's namespace only: those of `dlmopen` too
    other_namespaces(&mut listed);
    let mut modules = Vec::new();
    let mut fresh = Vec::new();
    for (k, (name, base, code_start, code_end)) in listed.into_iter().enumerate() {
        if let Some(i) = known.iter().position(|m| m.listed == name && m.base == base) {
            modules.push(known.swap_remove(i));
            continue;
        }
        let path = if name.is_empty() && k == 0 { real_path("/proc/self/exe") } else { real_path(&name) };
        if !path.is_empty() {
            fresh.push(modules.len());
            modules.push(Module { path, listed: name, base, code_start, code_end, targets: None });
        }
    }
    (modules, fresh)
}
