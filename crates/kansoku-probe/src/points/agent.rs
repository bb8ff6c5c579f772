//! The agent mechanism, kansoku's side: start the program with the probe agent
//! (`libkansoku_agent.so`, crate kansoku-agent) preloaded, hand it the plan and a shared
//! file, and drain the per-thread rings the agent writes while the program runs.
//!
//! The shared file is a memfd: it has no name to leak, the program inherits its
//! descriptor (so an exec'd image's agent finds it again), and kansoku keeps its mapping,
//! so every record the program wrote before it crashed or was killed is read after its
//! end. Time stamps are the invariant TSC where the CPU has one (read in a few
//! nanoseconds, no kernel entry) and are turned into CLOCK_MONOTONIC nanoseconds here,
//! from two (TSC, CLOCK_MONOTONIC) pairs read at the program's start and end.

use std::ffi::CString;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use kansoku_core::agent_abi::{self, *};
use kansoku_core::ExitStatus;
use kansoku_monitor::events::{Hit, PointRole};

use crate::events::{EventOutcome, Mechanism, Plan};
use crate::online::{Online, SwitchLog, MAX_HITS};
use crate::points::clock::{clock_pair, monotonic_ns, TimeBase};
use crate::points::follow::Resolver;
use crate::perf::{PerfRecord, SampleSource, SamplingClock, Session, SessionOptions, UprobeSpec};
use crate::spawn::{poll_child, ChildState, ExecGate, Progress};
use crate::ProbeError;

/// Calls of the agent's empty routine it times before `main` (the calibration).
pub const CALIBRATION_CALLS: u32 = 2000;
/// File name of the agent library.
pub const LIBRARY: &str = "libkansoku_agent.so";

fn agent_err(reason: impl Into<String>) -> ProbeError {
    ProbeError::Agent { reason: reason.into() }
}

/// Where the agent library is: `$KANSOKU_AGENT`, else beside the kansoku executable (cargo
/// puts both in `target/<profile>/`; a test binary runs from its `deps/` directory), else
/// the optimised build scripts/setup makes in `target/release/`.
pub fn library() -> Result<PathBuf, ProbeError> {
    if let Some(p) = std::env::var_os("KANSOKU_AGENT") {
        let p = PathBuf::from(p);
        return if p.is_file() { Ok(p) } else { Err(agent_err(format!("KANSOKU_AGENT names {}, which is not a file", p.display()))) };
    }
    let exe = std::env::current_exe().map_err(|e| agent_err(format!("where is kansoku itself? {e}")))?;
    let dir = exe.parent().unwrap_or(Path::new("."));
    // beside kansoku; above a test's deps/; the optimised one scripts/setup builds
    for candidate in [dir.join(LIBRARY), dir.join("..").join(LIBRARY), dir.join("../release").join(LIBRARY), dir.join("../../release").join(LIBRARY)] {
        if candidate.is_file() {
            return Ok(std::fs::canonicalize(&candidate).unwrap_or(candidate));
        }
    }
    Err(agent_err(format!("{LIBRARY} is not beside {} (build it with `cargo build --release -p kansoku-agent`, or name it in KANSOKU_AGENT)", exe.display())))
}

/// Why the agent cannot observe `program` (found as a shell would), if it cannot: it is
/// loaded by the dynamic linker, so a static executable does not load it. A `#!` script is
/// judged by the ELF program that runs it (a shim's interpreter loads the agent, and every
/// program it execs inherits it).
pub fn unsuitable(program: &Path) -> Option<String> {
    let program = match crate::spawn::resolve_program(program).and_then(|p| crate::spawn::elf_that_runs(&p, &[])) {
        Ok((p, _)) => p,
        Err(e) => return Some(e.to_string()),
    };
    match kansoku_binary::Program::open(&program) {
        Ok(p) if p.interpreter.is_none() => Some(format!("{} is statically linked: the dynamic linker that would preload the agent never runs", program.display())),
        Ok(_) => library().err().map(|e| e.to_string()),
        Err(e) => Some(e.to_string()),
    }
}

/// The CPU's time stamp counter runs at a constant rate through sleep states: then the
/// agent time-stamps with `rdtsc`; otherwise with CLOCK_MONOTONIC (the vDSO).
fn invariant_tsc() -> bool {
    let info = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let flags = info.lines().find(|l| l.starts_with("flags")).unwrap_or("");
    let has = |f: &str| flags.split_whitespace().any(|x| x == f);
    has("constant_tsc") && has("nonstop_tsc")
}


/// The memfd shared with the agent, mapped.
///
/// The observed program can reach the file (its descriptor is in `/proc/self/fd`) and
/// write into it, so everything read from it is outside input: a head that jumps more than
/// a ring ahead or goes back, a record naming a point the plan does not have (or an exit
/// bit its point does not have), a time stamp before the run or after the read, or going
/// back within a thread, makes the ring *broken*. A broken ring's hits up to the first
/// inconsistency are kept, what was inconsistent is said once ([`SharedFile::broken`]),
/// and it is read no more (its tail is moved to its head, so its writer never waits).
/// Each drain reads at most one ring's worth of records per ring: time and memory are
/// bounded whatever the file holds.
struct SharedFile {
    fd: OwnedFd,
    base: *mut u8,
    tails: Vec<u64>,
    /// Per ring, the last time stamp read (a thread's stamps do not go back).
    last_time: Vec<u64>,
    /// Per ring, whether it was found inconsistent.
    broken_ring: Vec<bool>,
    /// What was found inconsistent, in words.
    broken: Vec<String>,
    /// The checks records must pass, when the plan is known.
    checks: Option<RecordChecks>,
}

/// What a record may hold: its point is planned, its exit bit is its point's, its time
/// lies after `earliest` (the run's start, in the agent's clock) and not after the read.
struct RecordChecks {
    is_exit: Vec<bool>,
    earliest: u64,
    tsc: bool,
}

/// Time stamps may go back this much within a thread (the TSCs of two cores differ by
/// a few ticks, a migration between them can show it) or lie this far outside the run
/// before a ring counts as broken: 10^8 ticks or ns, tens of milliseconds.
const CLOCK_SLACK: u64 = 100_000_000;

impl RecordChecks {
    fn now(&self) -> u64 {
        if self.tsc {
            // SAFETY: rdtsc has no side effects; x86-64 has it.
            unsafe { core::arch::x86_64::_rdtsc() }
        } else {
            monotonic_ns()
        }
    }

    /// What is wrong with record `r`, read after `previous` in its ring, if anything.
    fn check(&self, r: &Record, previous: u64, now: &mut u64) -> Option<String> {
        let point = r.what >> 1;
        match self.is_exit.get(point as usize) {
            None => return Some(format!("names point {point}, and the plan has {}", self.is_exit.len())),
            Some(&exit) if exit != (r.what & 1 == 1) => return Some(format!("marks point {point} as {}, which it is not", if exit { "an entry" } else { "an exit" })),
            _ => {}
        }
        if r.time == 0 {
            return None;
        }
        if r.time > *now {
            // the stamp may have been written after `now` was read: read the clock again
            *now = self.now();
        }
        if r.time.saturating_add(CLOCK_SLACK) < self.earliest || r.time > now.saturating_add(CLOCK_SLACK) {
            return Some(format!("has time stamp {}, outside the run ({}..{})", r.time, self.earliest, now));
        }
        if r.time.saturating_add(CLOCK_SLACK) < previous {
            return Some(format!("has time stamp {}, before the thread's previous one ({previous})", r.time));
        }
        None
    }
}

impl SharedFile {
    fn create(tsc: bool) -> Result<SharedFile, ProbeError> {
        let fd = memfd("kansoku-agent")?;
        // SAFETY: an open descriptor of ours and a size; no memory is passed.
        if unsafe { libc::ftruncate(fd.as_raw_fd(), file_size() as libc::off_t) } != 0 {
            return Err(agent_err(format!("sizing the shared file: {}", std::io::Error::last_os_error())));
        }
        // SAFETY: a new shared mapping of our memfd at an address the kernel chooses: it
        // aliases no Rust memory; the result is checked before use.
        let p = unsafe { libc::mmap(std::ptr::null_mut(), file_size(), libc::PROT_READ | libc::PROT_WRITE, libc::MAP_SHARED, fd.as_raw_fd(), 0) };
        if p == libc::MAP_FAILED {
            return Err(agent_err(format!("mapping the shared file: {}", std::io::Error::last_os_error())));
        }
        let base = p as *mut u8;
        // SAFETY: the mapping is file_size() bytes, larger than Control, page-aligned, and
        // no program has the descriptor yet: these plain writes race with nothing.
        unsafe {
            let c = base as *mut Control;
            (*c).magic = MAGIC;
            (*c).version = VERSION;
            (*c).clock = if tsc { CLOCK_TSC } else { CLOCK_MONOTONIC };
            (*c).resolver = std::process::id();
        }
        Ok(SharedFile { fd, base, tails: vec![0; MAX_RINGS], last_time: vec![0; MAX_RINGS], broken_ring: vec![false; MAX_RINGS], broken: Vec::new(), checks: None })
    }

    fn control(&self) -> &Control {
        // SAFETY: the mapping lives as long as self and holds a Control at its start. The
        // program may write any of it: the fields the agent updates are atomics (shared
        // mutation through UnsafeCell), and the plain ones (magic, version, clock) are read
        // with read_volatile and checked, never trusted.
        unsafe { &*(self.base as *const Control) }
    }

    /// Moves every record written since the last call into `out` as hits still in the
    /// agent's time stamps; past `MAX_HITS` records are drained and counted, not kept. A
    /// record whose time stamp is not written yet (0) ends the ring's batch, unless `last`
    /// (the program has ended: it never will be; the record is dropped and counted).
    fn drain(&mut self, out: &mut Vec<Hit>, over: &mut u64, last: bool) -> u64 {
        let mut unstamped = 0;
        let rings = (self.control().rings_claimed.load(Ordering::Acquire) as usize).min(MAX_RINGS);
        let mut now = self.checks.as_ref().map_or(0, RecordChecks::now);
        for k in 0..rings {
            // SAFETY: ring k < MAX_RINGS lies inside the mapping of file_size() bytes;
            // its header is atomics, which any bytes are valid for.
            let header = unsafe { &*(self.base.add(ring_offset(k)) as *const RingHeader) };
            let head = header.head.load(Ordering::Acquire);
            let tail = self.tails[k];
            let tid = header.tid.load(Ordering::Relaxed);
            if self.broken_ring[k] {
                header.tail.store(head, Ordering::Release);
                continue;
            }
            // the tail is kansoku's: written back every time, in case it was overwritten
            if head <= tail || head - tail > RING_RECORDS {
                if head < tail || head - tail > RING_RECORDS {
                    let what = if head < tail { format!("its head went back from {tail} to {head}") } else { format!("its head jumped to {head}, more than a ring ({RING_RECORDS} records) ahead of the {tail} read") };
                    self.break_ring(k, tid, what);
                    header.tail.store(head, Ordering::Release);
                } else {
                    header.tail.store(tail, Ordering::Release);
                }
                continue;
            }
            // SAFETY: ring k (k < MAX_RINGS) lies inside the mapping: ring_offset places the
            // header and its RING_RECORDS records within file_size().
            let records = unsafe { self.base.add(ring_offset(k) + std::mem::size_of::<RingHeader>()) as *const Record };
            let mut done = head;
            for i in tail..head {
                // SAFETY: the index is taken modulo the ring's length, inside the mapping.
                let r = unsafe { std::ptr::read_volatile(records.add((i % RING_RECORDS) as usize)) };
                if let Some(wrong) = self.checks.as_ref().and_then(|c| c.check(&r, self.last_time[k], &mut now)) {
                    self.break_ring(k, tid, format!("its record {i} {wrong}"));
                    done = head;
                    break;
                }
                if r.time == 0 {
                    if !last {
                        done = i;
                        break;
                    }
                    unstamped += 1;
                    continue;
                }
                self.last_time[k] = r.time;
                if out.len() >= MAX_HITS {
                    *over += 1;
                    continue;
                }
                out.push(Hit { point: (r.what >> 1) as u32, tid, time_ns: r.time });
            }
            self.tails[k] = done;
            header.tail.store(done, Ordering::Release);
        }
        unstamped
    }

    fn break_ring(&mut self, k: usize, tid: u32, what: String) {
        self.broken_ring[k] = true;
        self.broken.push(format!("ring {k} (its header names thread {tid}): {what}; its later records were not read"));
    }
}

impl Drop for SharedFile {
    fn drop(&mut self) {
        // SAFETY: the mapping made in create, unmapped once, here; no reference into it outlives self.
        unsafe { libc::munmap(self.base.cast(), file_size()) };
    }
}

/// The plan as the agent reads it (see [`agent_abi::plan_line`]), and the names of its
/// functions of [`ANY_PROGRAM`] in the order of their lines (a plan resolved at run time).
fn plan_text(plan: &Plan) -> Result<(String, Vec<String>), ProbeError> {
    let program = std::fs::canonicalize(&plan.program).map_err(|e| agent_err(format!("{}: {e}", plan.program.display())))?;
    let mut text = String::new();
    let mut deferred = Vec::new();
    let calibration = plan.calibration.map(|(a, b)| [a, b]).unwrap_or([u32::MAX; 2]);
    if plan.points.len() > MAX_POINTS {
        return Err(agent_err(format!("{} points; the agent takes at most {MAX_POINTS}", plan.points.len())));
    }
    for (i, p) in plan.points.iter().enumerate() {
        let i = i as u32;
        if calibration.contains(&i) {
            continue;
        }
        // a function of the program that runs: each process asks kansoku where it is
        let any = plan.program_at_run_time && p.module.is_none();
        let module = if any { PathBuf::from(ANY_PROGRAM) } else { p.module.clone().unwrap_or_else(|| program.clone()) };
        let module = module.to_string_lossy();
        if module.contains(char::is_whitespace) {
            return Err(agent_err(format!("the path {module} has white space, which the agent's plan cannot carry")));
        }
        let name = p.point.name.split([':', '@']).next().unwrap_or("?");
        let ifunc = p.module.is_some();
        let line = match (p.point.role.clone(), p.is_return) {
            (PointRole::Entry(r), false) => {
                let exit = plan.points.iter().position(|q| q.is_return && q.point.role == PointRole::Exit(r)).map(|j| j as u32);
                plan_line(i, exit, Some(&module), p.vaddr, p.size, ifunc, name)
            }
            (PointRole::Exit(_), true) => continue, // with its entry
            // an exit alone: the entry is patched but records nothing (ENTRY = EXIT)
            (PointRole::Single, true) => plan_line(i, Some(i), Some(&module), p.vaddr, p.size, ifunc, name),
            (PointRole::Single, false) => plan_line(i, None, Some(&module), p.vaddr, p.size, ifunc, name),
            _ => return Err(agent_err(format!("point {} cannot be planted by the agent", p.point.name))),
        };
        text.push_str(&line);
        if any {
            deferred.push(name.to_string());
        }
    }
    if deferred.len() > MAX_DEFERRED {
        return Err(agent_err(format!("{} functions to find in the program that runs; the agent asks for at most {MAX_DEFERRED}", deferred.len())));
    }
    if let Some((a, b)) = plan.calibration {
        text.push_str(&format!("calibrate {a} {b} {CALIBRATION_CALLS}\n"));
    }
    Ok((text, deferred))
}

/// An anonymous shared file, without MFD_CLOEXEC: the program inherits the descriptor.
fn memfd(name: &str) -> Result<OwnedFd, ProbeError> {
    let name = CString::new(name).expect("no NUL");
    // SAFETY: a NUL-terminated name that outlives the call.
    let fd = unsafe { libc::memfd_create(name.as_ptr(), 0) };
    if fd < 0 {
        return Err(agent_err(format!("memfd_create: {}", std::io::Error::last_os_error())));
    }
    // SAFETY: memfd_create succeeded: a new descriptor nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

fn plan_memfd(text: &str) -> Result<OwnedFd, ProbeError> {
    let fd = memfd("kansoku-agent-plan")?;
    let mut f = std::fs::File::from(fd.try_clone().map_err(|e| agent_err(e.to_string()))?);
    std::io::Write::write_all(&mut f, text.as_bytes()).map_err(|e| agent_err(format!("writing the plan: {e}")))?;
    Ok(fd)
}

/// The shared file, the plan and the environment that loads the agent with them: what a
/// run with the agent needs before the program starts.
pub struct AgentSession {
    shared: SharedFile,
    _plan: OwnedFd,
    /// Variables to add to the program's environment.
    pub env: Vec<(String, String)>,
    /// Time stamps are TSC ticks (else CLOCK_MONOTONIC ns).
    pub tsc: bool,
    /// The agent library preloaded: its mapping in the program is probe code, whatever
    /// the file is called (`KANSOKU_AGENT` may name a copy under any name).
    pub library: AgentLibrary,
}

/// The agent's library file as the program maps it: its resolved path and its identity
/// (device major, minor, inode), which perf's mmap records carry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AgentLibrary {
    /// Canonical path of the library file (symbolic links resolved).
    pub path: PathBuf,
    /// The file's identity: device major, device minor, inode.
    pub file: (u32, u32, u64),
}

impl AgentLibrary {
    fn of(path: &Path) -> Result<AgentLibrary, ProbeError> {
        use std::os::unix::fs::MetadataExt;
        let path = std::fs::canonicalize(path).map_err(|e| agent_err(format!("{}: {e}", path.display())))?;
        let meta = std::fs::metadata(&path).map_err(|e| agent_err(format!("{}: {e}", path.display())))?;
        Ok(AgentLibrary { file: (libc::major(meta.dev()), libc::minor(meta.dev()), meta.ino()), path })
    }

    /// Whether a mapping of `path`, of the file `file` where known, is this library.
    pub fn is(&self, path: &str, file: Option<(u32, u32, u64)>) -> bool {
        file == Some(self.file) || Path::new(path) == self.path
    }
}

impl AgentSession {
    /// Prepares a run of `program` with the plan `text` ([`agent_abi::plan_line`]s). With
    /// `monotonic` the agent stamps hits with CLOCK_MONOTONIC, perf's clock, instead of the
    /// TSC (a few ns dearer, but comparable with samples as they arrive).
    pub fn new(program: &Path, text: &str, monotonic: bool) -> Result<AgentSession, ProbeError> {
        let library = AgentLibrary::of(&library()?)?;
        if let Some(why) = unsuitable(program) {
            return Err(agent_err(why));
        }
        let tsc = !monotonic && invariant_tsc();
        let shared = SharedFile::create(tsc)?;
        let plan = plan_memfd(text)?;
        let preload = match std::env::var("LD_PRELOAD") {
            Ok(old) if !old.is_empty() => format!("{}:{old}", library.path.display()),
            _ => library.path.display().to_string(),
        };
        let env = vec![
            ("LD_PRELOAD".to_string(), preload),
            (agent_abi::ENV_SHM.to_string(), format!("/proc/self/fd/{}", shared.fd.as_raw_fd())),
            (agent_abi::ENV_PLAN.to_string(), format!("/proc/self/fd/{}", plan.as_raw_fd())),
        ];
        Ok(AgentSession { shared, _plan: plan, env, tsc, library })
    }

    /// Hits written since the last call, in the agent's time stamps (see [`TimeBase`]).
    /// With `last` (the program has ended) records never stamped are dropped; returns
    /// their number.
    pub fn drain(&mut self, out: &mut Vec<Hit>, over: &mut u64, last: bool) -> u64 {
        self.shared.drain(out, over, last)
    }

    /// The control block at the start of the memory shared with the agent: clock, rings
    /// claimed, agents loaded, hits lost, and how each point was planted.
    pub fn control(&self) -> &Control {
        self.shared.control()
    }

    /// Checks every record against the plan from now on: `is_exit[p]` says whether point
    /// `p` is an exit; `earliest` is the run's start in the agent's clock.
    fn check_records(&mut self, is_exit: Vec<bool>, earliest: u64) {
        self.shared.checks = Some(RecordChecks { is_exit, earliest, tsc: self.tsc });
    }

    /// What was found inconsistent in the rings (the program wrote into them).
    pub fn broken(&self) -> Vec<String> {
        self.shared.broken.clone()
    }

    /// The address ranges of the agent's trampolines in the program.
    pub fn trampolines(&self) -> Vec<(u64, u64)> {
        self.control().pools.iter().map(|p| p.load(Ordering::Relaxed)).filter(|&b| b != 0).map(|b| (b, b + POOL_BYTES as u64)).collect()
    }

    /// Whether any process loaded the agent.
    pub fn loaded(&self) -> bool {
        self.control().agents.load(Ordering::Acquire) > 0
    }
}

/// Runs the program with the agent; its hits are analysed as they are read
/// (the crate's `online` module), and kept too with `keep_hits`.
pub fn run_agent(mut plan: Plan, args: &[String], keep_hits: bool, progress: &mut dyn FnMut(Progress)) -> Result<EventOutcome, ProbeError> {
    let (text, deferred) = plan_text(&plan)?;
    let mut session = AgentSession::new(&plan.program, &text, false)?;
    let tsc = session.tsc;
    session.control().hold.store(1, Ordering::Release);
    let start_pair = clock_pair();
    // the calibration's exit is a point of its own role but an exit in the ring
    let is_exit = plan.points.iter().enumerate().map(|(i, p)| p.is_return || plan.calibration.is_some_and(|(_, b)| b as usize == i)).collect();
    session.check_records(is_exit, if tsc { start_pair.0 } else { start_pair.1 });
    let points: Vec<_> = plan.points.iter().map(|p| p.point.clone()).collect();
    let mut online = Online::new(points, plan.routines.len(), plan.calibration, tsc, start_pair, keep_hits);
    let gate = ExecGate::spawn_with_env(&plan.program, args, &session.env)?;
    let mut resolver = Resolver::new(deferred, gate.pid.as_raw() as u32, session.library.path.clone());
    let mut switches = SwitchLog::open(gate.pid.as_raw());
    let start = Instant::now();
    let pid = gate.open();
    // records past what is kept are counted (the agent's hits are never all kept)
    let mut over = 0u64;
    let mut interrupted = false;
    let mut fallback = None;
    let mut fallback_notes = Vec::new();
    let mut held = true;
    let exit = loop {
        std::thread::sleep(Duration::from_micros(if held { 100 } else { 1000 }));
        resolver.serve(session.control());
        if held && (session.control().ready.load(Ordering::Acquire) != 0 || start.elapsed() > Duration::from_millis(HOLD_LIMIT_MS)) {
            if session.control().ready.load(Ordering::Acquire) != 0 {
                fallback = uprobe_fallback(&plan, session.control(), pid.as_raw(), &mut fallback_notes);
            }
            session.control().go.store(1, Ordering::Release);
            held = false;
        }
        session.drain(online.raw(), &mut over, false);
        if let Some((s, points)) = fallback.as_mut() {
            drain_uprobes(s, points, online.uprobe());
        }
        let pair = clock_pair();
        switches.drain();
        online.step(pair, &mut switches, !held, false, &mut |raw| {
            session.drain(raw, &mut over, false);
        });
        match poll_child(pid, &mut interrupted)? {
            ChildState::Ended(exit) => break exit,
            ChildState::Stopped(signal) => progress(Progress::Stopped { signal }),
            ChildState::Running => progress(Progress::Count(online.seen + online.pending() as u64)),
        }
    };
    if let Some((s, points)) = fallback.as_mut() {
        drain_uprobes(s, points, online.uprobe());
    }
    switches.drain();
    let measured_ns = start.elapsed().as_nanos() as u64;
    resolver.serve(session.control());
    // Children that outlived the program (forked, still writing) are not waited for.
    let unstamped = session.drain(online.raw(), &mut over, true);
    // The rate is read over at least 20 ms, so that a short run still gives it to 1e-4.
    std::thread::sleep(Duration::from_millis(20).saturating_sub(start.elapsed()));
    let end_pair = clock_pair();
    let time = TimeBase::new(tsc, start_pair, end_pair);
    let control = session.control();
    if !session.loaded() {
        if exit == ExitStatus::Exited(127) {
            return Err(ProbeError::Spawn { program: plan.program.clone(), reason: "exec failed (is it a program for this machine?)".into() });
        }
        return Err(agent_err(format!(
            "{} ran without loading the agent (LD_PRELOAD was not honoured: a set-user-ID program, or one that clears its environment?); use --mechanism uprobe",
            plan.program.display()
        )));
    }
    let mut broken = control_broken(&session, &plan);
    broken.extend(resolver.broken.iter().cloned());
    // what the agent planted is read from the control block: not when it was overwritten
    let mut notes = if broken.is_empty() { point_notes(&mut plan, control) } else { Vec::new() };
    if plan.program_at_run_time {
        // where the functions of the program that runs were found, by process
        notes.retain(|n| !n.contains(refusal(REFUSE_NOT_DEFINED)));
        notes.extend(resolver.statements());
        if resolver.unsaid > 0 {
            notes.push(format!("{} more statements about the programs the run started were not kept", resolver.unsaid));
        }
    }
    // a run in which no point was planted anywhere measured nothing: an error, not an
    // empty table (hits would show that an exec'd image's agent planted them)
    let calibration = plan.calibration.map_or(Vec::new(), |(a, b)| vec![a as usize, b as usize]);
    // patched, an alias of a patched one, or refused at an address (then a uprobe's)
    let planted = |i: usize| match control.points[i].state.load(Ordering::Acquire) {
        POINT_PATCHED | POINT_ALIAS => true,
        POINT_REFUSED => control.points[i].address.load(Ordering::Relaxed) != 0,
        _ => false,
    };
    let probes: Vec<usize> = (0..plan.points.len()).filter(|i| !calibration.contains(i)).collect();
    if broken.is_empty() && online.seen == 0 && online.pending() == 0 && !probes.is_empty() && !probes.iter().any(|&i| planted(i)) {
        return Err(agent_err(format!("no point was planted, so nothing was measured: {}", notes.join("; "))));
    }
    broken.extend(session.broken());
    online.step(end_pair, &mut switches, true, true, &mut |_| {});
    notes.extend(fallback_notes);
    if online.over > 0 {
        notes.push(format!("kansoku kept the first {MAX_HITS} hits for the timeline; {} more are in the report but not in the timeline", online.over));
    }
    if over > 0 {
        notes.push(format!("{over} records came faster than kansoku reads a ring ({MAX_HITS} in one read) and are counted as lost"));
    }
    if unstamped > 0 {
        notes.push(format!("{unstamped} entries were cut off by the program's end before their time stamp was written, and dropped"));
    }
    // a hit costs the agent nanoseconds: more than one lost per nanosecond on every CPU
    // is a count the program overwrote
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get()) as u64;
    let agent_lost = control.lost.load(Ordering::Relaxed);
    let lost = if agent_lost > measured_ns.max(1).saturating_mul(cpus) {
        broken.push(format!("the agent's count of lost hits reads {agent_lost}, more than one per nanosecond on each of the {cpus} CPUs over the {measured_ns} ns run: it was overwritten, and how many hits were lost is not known"));
        over
    } else {
        agent_lost + over
    };
    if let Some(why) = &switches.problem {
        notes.push(format!("times are wall-clock times: context switches could not be recorded ({why})"));
    }
    let clock_resolution_ns = time.resolution_ns();
    let points: Vec<_> = plan.points.iter().map(|p| p.point.clone()).collect();
    let hits = online.kept.take().unwrap_or_default();
    // the off-CPU stretches went into the analysis, and are kept with the hits
    let off_cpu = online.kept_off.take().unwrap_or_default();
    let analysed = online.report(&points, &plan.routines, measured_ns, clock_resolution_ns);
    Ok(EventOutcome { plan, mechanism: Mechanism::Agent, hits, analysed, measured_ns, exit, interrupted, lost, notes, off_cpu, clock_resolution_ns, broken })
}

/// The control block's fields kansoku wrote, changed, and point states the agent never
/// writes (a state it has no code for, an alias of a point the plan does not have): the
/// program wrote into the control block.
fn control_broken(session: &AgentSession, plan: &Plan) -> Vec<String> {
    let control = session.control();
    let mut broken = Vec::new();
    let clock = if session.tsc { CLOCK_TSC } else { CLOCK_MONOTONIC };
    // SAFETY: volatile reads of plain integers of the mapping, which the program may change.
    let (magic, version, got_clock) = unsafe { (std::ptr::read_volatile(&control.magic), std::ptr::read_volatile(&control.version), std::ptr::read_volatile(&control.clock)) };
    if (magic, version, got_clock) != (MAGIC, VERSION, clock) {
        broken.push(format!("the control block's magic, version and clock read 0x{magic:x}, {version}, {got_clock}, not what kansoku wrote (0x{MAGIC:x}, {VERSION}, {clock}); what the agent planted is not known"));
    }
    for (i, p) in plan.points.iter().enumerate() {
        let s = &control.points[i];
        let state = s.state.load(Ordering::Acquire);
        let alias = s.alias_of.load(Ordering::Relaxed);
        if state > POINT_ALIAS {
            broken.push(format!("point {} reads state {state}, which the agent never writes", p.point.name));
        } else if state == POINT_ALIAS && alias as usize >= plan.points.len() {
            broken.push(format!("point {} reads as an alias of point {alias}, and the plan has {}", p.point.name, plan.points.len()));
        }
    }
    broken
}

/// Uprobes on the functions the agent found but refused to patch (a branch into their
/// first bytes, say), opened while the agent holds the program before `main`. Returns the
/// session and, per uprobe, the plan's point.
fn uprobe_fallback(plan: &Plan, control: &Control, pid: i32, notes: &mut Vec<String>) -> Option<(Session, Vec<u32>)> {
    let maps = crate::procfs::read_maps(pid).ok()?;
    let mut specs = Vec::new();
    let mut points = Vec::new();
    for (i, p) in plan.points.iter().enumerate() {
        let s = &control.points[i];
        let address = s.address.load(Ordering::Relaxed);
        if s.state.load(Ordering::Acquire) != POINT_REFUSED || address == 0 {
            continue;
        }
        let reason = refusal(s.reason.load(Ordering::Relaxed));
        let Some(m) = maps.iter().find(|m| m.start <= address && address < m.end && m.path.starts_with('/')) else {
            notes.push(format!("{} was not probed: {reason}, and no file maps 0x{address:x} for a uprobe", p.point.name));
            continue;
        };
        let file_offset = address - m.start + m.file_offset;
        let path = PathBuf::from(&m.path);
        // the entry (or a lone exit) and, for a routine, its exit
        let exit_of = match (&p.point.role, p.is_return) {
            (PointRole::Entry(r), _) => plan.points.iter().position(|q| q.is_return && q.point.role == PointRole::Exit(*r)),
            _ => None,
        };
        specs.push(UprobeSpec { path: path.clone(), file_offset, is_return: p.is_return });
        points.push(i as u32);
        if let Some(j) = exit_of {
            specs.push(UprobeSpec { path, file_offset, is_return: true });
            points.push(j as u32);
        }
        notes.push(format!("{}: the agent refused it ({reason}); probed by uprobe instead", p.point.name.split(':').next().unwrap_or("?")));
    }
    if specs.is_empty() {
        return None;
    }
    let options = SessionOptions { clock: SamplingClock::CpuClock { period_ns: 1 << 40 }, uprobes: specs, buffer_pages: 256, enable_on_exec: false, ..SessionOptions::default() };
    match Session::open(pid, &options) {
        Ok(s) => Some((s, points)),
        Err(e) => {
            notes.push(format!("the uprobes for the functions the agent refused could not be opened: {e}"));
            None
        }
    }
}

fn drain_uprobes(session: &mut Session, points: &[u32], out: &mut Vec<Hit>) {
    session.drain(&mut |r| {
        if let PerfRecord::Sample(s) = r {
            if let SampleSource::Uprobe(k) = s.source {
                out.push(Hit { point: points[k], tid: s.tid, time_ns: s.time_ns });
            }
        }
    });
}

/// What the agent did with each point, in words; routines found at one address under
/// several names are renamed to carry all of them.
fn point_notes(plan: &mut Plan, control: &Control) -> Vec<String> {
    let mut notes = Vec::new();
    for i in 0..plan.points.len() {
        let s = &control.points[i];
        let name = plan.points[i].point.name.clone();
        match s.state.load(Ordering::Acquire) {
            POINT_REFUSED if s.address.load(Ordering::Relaxed) == 0 => {
                let reason = s.reason.load(Ordering::Relaxed);
                notes.push(format!("{name} was not probed: {}", refusal(reason)));
            }
            POINT_ALIAS => {
                let other = s.alias_of.load(Ordering::Relaxed) as usize;
                if let (PointRole::Entry(r), Some(PointRole::Entry(o))) = (plan.points[i].point.role.clone(), plan.points.get(other).map(|p| p.point.role.clone())) {
                    notes.push(format!("{} and {} are one function at run time (0x{:x}): counted once, as {0}", plan.routines[o], plan.routines[r], s.address.load(Ordering::Relaxed)));
                    plan.routines[o] = format!("{} = {}", plan.routines[o], plan.routines[r]);
                    plan.routines[r] = format!("{} (counted under {})", plan.routines[r], plan.routines[o]);
                }
            }
            POINT_PATCHED => {
                let address = s.address.load(Ordering::Relaxed);
                plan.points[i].point.address = address;
                if let PointRole::Entry(r) = plan.points[i].point.role {
                    for p in plan.points.iter_mut().filter(|p| p.point.role == PointRole::Exit(r)) {
                        p.point.address = address;
                    }
                }
            }
            _ => {}
        }
    }
    notes
}
