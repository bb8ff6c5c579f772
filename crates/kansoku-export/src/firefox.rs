//! The Firefox Profiler's processed profile format (the JSON `profiler.firefox.com` opens),
//! written through `fxprof-processed-profile`, the crate samply writes it with.
//!
//! A sampled recording becomes a process per recorded process (kansoku's recordings are
//! one; a `perf record -a` many, each with its pid and name, [`FirefoxProfile::enter`]), a
//! thread per recorded thread (tid and name), and one sample per recorded sample, whose
//! stack is its call chain where the recording has one (`perf record -g`,
//! [`FirefoxProfile::set_stack`]), else a single frame, the sampled instruction address.
//! Each recorded module becomes a library with its path, build id and mapping in its
//! process, so the profiler can symbolise the addresses itself; the frames hold
//! library-relative addresses, no names. A marker hit is an instant marker named after the
//! marker function, and the stretch from one hit to the next on the same thread an interval
//! marker `iteration` (its number a field), as the Perfetto export shows them.
//!
//! The profile is built as the recording is read (modules arrive before the samples that
//! fall in them, as in the recording) and written at the end: the crate keeps the whole
//! profile in memory, about what its JSON holds.

use std::collections::{HashMap, HashSet};
use std::io::Write;
use std::sync::Arc;

use fxprof_processed_profile::debugid::DebugId;
use fxprof_processed_profile::{
    CategoryColor, CategoryHandle, CategoryPairHandle, CpuDelta, Frame, FrameFlags, FrameInfo, LibraryHandle, LibraryInfo, Symbol, SymbolTable, MarkerFieldFlags, MarkerFieldFormat,
    MarkerTiming, ProcessHandle, Profile, ReferenceTimestamp, SamplingInterval, StaticSchemaMarker, StaticSchemaMarkerField, StringHandle,
    ThreadHandle, Timestamp,
};
use kansoku_core::{Event, Module};

use crate::ExportError;

/// User-space addresses end below this (x86-64's canonical lower half); above is the kernel.
const KERNEL_START: u64 = 0xffff_8000_0000_0000;

/// What the profile says about the run as a whole.
#[derive(Clone, Debug)]
pub struct SampledRun {
    /// The recorded program's path (the process's name is its file name).
    pub program: String,
    /// When recording started, in seconds since the Unix epoch (0 when unknown).
    pub started_s: u64,
    /// The sampling interval in nanoseconds, for the profiler's time axis; with time
    /// sampling (cpu-clock) also each sample's CPU time.
    pub interval_ns: u64,
    /// Whether `interval_ns` is CPU time per sample (cpu-clock) rather than a guess.
    pub time_sampling: bool,
    /// The marker function, naming the hit markers.
    pub marker: Option<String>,
}

/// What was written, for the command to report and tests to check.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FirefoxSummary {
    /// Samples written (all of them, whatever they fell in).
    pub samples: u64,
    /// Of those, samples in kernel code or outside every recorded module (labelled frames).
    pub unmapped: u64,
    /// Threads.
    pub threads: u64,
    /// Processes.
    pub processes: u64,
    /// Distinct recorded modules (by path and build id) given as libraries; the profile
    /// lists those the samples fell in.
    pub libraries: u64,
    /// Marker hits (instant markers).
    pub hits: u64,
    /// Iterations (interval markers between consecutive hits on one thread).
    pub iterations: u64,
}

/// One process's state while the recording is read.
#[derive(Default)]
struct ProcessState {
    /// Made at the process's first sample or marker hit: a process of a `perf record -a`
    /// that was never sampled is not in the profile.
    handle: Option<ProcessHandle>,
    /// Its libraries' mappings until then (library, start, end, relative address).
    waiting: Vec<(LibraryHandle, u64, u64, u32)>,
    /// The address ranges mapped to libraries: anything else gets a labelled frame.
    mapped: Vec<(u64, u64)>,
}

/// The process and thread the next events belong to, as the recording named them.
#[derive(Clone, Debug, Default)]
struct Context {
    /// None: the one process of a kansoku recording.
    pid: Option<i32>,
    tid: u32,
    process: String,
    thread: String,
}

/// One thread's state while the recording is read.
struct ThreadState {
    handle: ThreadHandle,
    /// Time and number of its last marker hit (the start of the iteration it opens).
    last_hit: Option<(u64, u64)>,
}

/// A sampled recording turned into a Firefox profile, event by event; [`Self::write`]
/// serialises it.
pub struct FirefoxProfile {
    profile: Profile,
    run: SampledRun,
    /// By pid (None: a kansoku recording's one process).
    processes: HashMap<Option<i32>, ProcessState>,
    threads: HashMap<(Option<i32>, u32), ThreadState>,
    /// The process and thread the next events belong to (`Thread` events and
    /// [`Self::enter`] switch it).
    current: Context,
    /// The call chain of the next sample, innermost first ([`Self::set_stack`]).
    stack: Option<Vec<u64>>,
    /// The libraries named so far, by path and build id.
    libraries: HashSet<(String, Option<String>)>,
    /// Each library file's functions as the profile's symbol table.
    symbol_tables: HashMap<String, Option<Arc<SymbolTable>>>,
    user: CategoryPairHandle,
    kernel: CategoryPairHandle,
    marker_name: StringHandle,
    iteration_name: StringHandle,
    summary: FirefoxSummary,
}

impl FirefoxProfile {
    /// An empty profile of one process.
    pub fn new(run: SampledRun) -> Self {
        let name = run.program.rsplit('/').next().unwrap_or(&run.program).to_string();
        let started = ReferenceTimestamp::from_millis_since_unix_epoch(run.started_s as f64 * 1000.0);
        let mut profile = Profile::new(&name, started, SamplingInterval::from_nanos(run.interval_ns.max(1)));
        profile.set_os_name("Linux");
        let user = profile.add_category("User", CategoryColor::Yellow).into();
        let kernel = profile.add_category("Kernel", CategoryColor::Orange).into();
        let marker_name = profile.intern_string(run.marker.as_deref().unwrap_or("marker"));
        let iteration_name = profile.intern_string("iteration");
        FirefoxProfile {
            profile,
            run,
            processes: HashMap::new(),
            threads: HashMap::new(),
            current: Context::default(),
            stack: None,
            libraries: HashSet::new(),
            symbol_tables: HashMap::new(),
            user,
            kernel,
            marker_name,
            iteration_name,
            summary: FirefoxSummary::default(),
        }
    }

    /// A recorded module, mapped at its runtime range. `image_address` is the address
    /// the module's file puts at `module.file_offset` (its link-time address: what the
    /// profiler's symbol lookup takes); only a reader of the file knows it, so the caller
    /// gives it, with the file's functions (link-time address, size, name): they go into
    /// the profile, so that it shows names wherever it is opened. Without them the
    /// profiler asks a symbol server, which knows Mozilla's builds, not the user's, and
    /// shows bare addresses.
    pub fn add_module(&mut self, module: &Module, image_address: u64, functions: &[(u64, u64, String)]) {
        let Ok(relative) = u32::try_from(image_address) else {
            // Beyond what the format's 32-bit relative addresses reach: its samples get a
            // labelled frame rather than a wrong address.
            return;
        };
        let name = module.short_name().to_string();
        let build_id = module.build_id.as_deref().and_then(build_id_bytes);
        let library = LibraryInfo {
            name: name.clone(),
            debug_name: name,
            path: module.path.clone(),
            debug_path: module.path.clone(),
            debug_id: build_id.as_deref().map(debug_id).unwrap_or_default(),
            code_id: module.build_id.clone(),
            arch: Some("x86_64".to_string()),
            symbol_table: self.symbol_table(&module.path, functions),
        };
        // One file mapped several times (code segments, a reload) is one library.
        if self.libraries.insert((module.path.clone(), module.build_id.clone())) {
            self.summary.libraries += 1;
        }
        let lib = self.profile.add_lib(library);
        let process = self.process();
        process.mapped.retain(|&(s, e)| e <= module.start || s >= module.end);
        process.mapped.push((module.start, module.end));
        match process.handle {
            Some(handle) => self.profile.add_lib_mapping(handle, lib, module.start, module.end, relative),
            None => process.waiting.push((lib, module.start, module.end, relative)),
        }
    }

    /// The events after this belong to process `pid` (named `process`) and its thread
    /// `tid` (named `thread`): a recording of several processes (`perf record -a`) says so
    /// before each process's modules and samples.
    pub fn enter(&mut self, pid: i32, tid: i32, process: &str, thread: &str) {
        self.current = Context { pid: Some(pid), tid: tid as u32, process: process.to_string(), thread: thread.to_string() };
    }

    /// The call chain of the next sample, innermost first (the sampled address, then the
    /// return addresses): its stack in the profile.
    pub fn set_stack(&mut self, frames: Vec<u64>) {
        self.stack = Some(frames);
    }

    /// The current process's state, made on first use.
    fn process(&mut self) -> &mut ProcessState {
        self.processes.entry(self.current.pid).or_default()
    }

    /// The current process in the profile, added at its first use with its libraries: a
    /// kansoku recording's named after the program (pid 0: the recording does not keep
    /// it), a perf.data's as perf named it.
    fn process_handle(&mut self) -> ProcessHandle {
        let (current, program) = (self.current.clone(), self.run.program.clone());
        let profile = &mut self.profile;
        let state = self.processes.entry(current.pid).or_default();
        if let Some(handle) = state.handle {
            return handle;
        }
        let short = program.rsplit('/').next().unwrap_or(&program);
        let name = if current.process.is_empty() { short } else { current.process.as_str() };
        let pid = current.pid.and_then(|p| u32::try_from(p).ok()).unwrap_or(0);
        let handle = profile.add_process(name, pid, Timestamp::from_nanos_since_reference(0));
        for (lib, start, end, relative) in state.waiting.drain(..) {
            profile.add_lib_mapping(handle, lib, start, end, relative);
        }
        state.handle = Some(handle);
        handle
    }

    /// The functions of the library at `path` as the profile's symbol table, made once per
    /// path (a library mapped several times shares it); none when nothing is known.
    fn symbol_table(&mut self, path: &str, functions: &[(u64, u64, String)]) -> Option<Arc<SymbolTable>> {
        self.symbol_tables
            .entry(path.to_string())
            .or_insert_with(|| {
                // relative addresses are 32 bits: a function beyond them cannot be named
                let symbols: Vec<Symbol> = functions
                    .iter()
                    .filter_map(|(address, size, name)| {
                        Some(Symbol { address: u32::try_from(*address).ok()?, size: u32::try_from(*size).ok().filter(|&s| s > 0), name: name.clone() })
                    })
                    .collect();
                (!symbols.is_empty()).then(|| Arc::new(SymbolTable::new(symbols)))
            })
            .clone()
    }

    /// A recording event: threads, samples and marker hits; the rest is not shown (modules
    /// come through [`Self::add_module`], which needs what only the file knows).
    pub fn add_event(&mut self, event: &Event) {
        match event {
            Event::Thread { tid } => self.current.tid = *tid,
            Event::Sample(s) => self.add_sample(s.time_ns, s.ip),
            Event::Marker { time_ns, .. } => self.add_hit(*time_ns),
            _ => {}
        }
    }

    /// The current thread's handle, the thread made on first use.
    fn thread(&mut self, time_ns: u64) -> &mut ThreadState {
        let process = self.process_handle();
        let (profile, current, program) = (&mut self.profile, &self.current, &self.run.program);
        let tid = current.tid;
        // a kansoku recording's first thread is its main one; a perf.data says which
        let is_main = match current.pid {
            Some(pid) => pid as u32 == tid,
            None => !self.threads.keys().any(|(p, _)| p.is_none()),
        };
        self.threads.entry((current.pid, tid)).or_insert_with(|| {
            let handle = profile.add_thread(process, tid, Timestamp::from_nanos_since_reference(time_ns), is_main);
            let short = program.rsplit('/').next().unwrap_or(program);
            // named with the tid perf prints: signed, -1 for a sample with no thread
            let name = match current.pid {
                Some(_) => format!("{} {}", if current.thread.is_empty() { &current.process } else { &current.thread }, tid as i32),
                None if tid == 0 => short.to_string(),
                None => format!("{short} {tid}"),
            };
            profile.set_thread_name(handle, &name);
            ThreadState { handle, last_hit: None }
        })
    }

    fn add_sample(&mut self, time_ns: u64, ip: u64) {
        let chain = self.stack.take().filter(|c| !c.is_empty()).unwrap_or_else(|| vec![ip]);
        let unmapped = !self.is_mapped(ip);
        let mut frames = Vec::with_capacity(chain.len());
        // caller-most first, as the profile takes them; a run of kernel frames is one
        for (i, &addr) in chain.iter().enumerate().rev() {
            if addr >= KERNEL_START && chain.get(i + 1).is_some_and(|&outer| outer >= KERNEL_START) {
                continue;
            }
            let frame = self.frame(addr, i == 0);
            frames.push(frame);
        }
        self.summary.unmapped += unmapped as u64;
        let cpu = if self.run.time_sampling { CpuDelta::from_nanos(self.run.interval_ns) } else { CpuDelta::ZERO };
        let handle = self.thread(time_ns).handle;
        let stack = self.profile.intern_stack_frames(handle, frames.into_iter());
        self.profile.add_sample(handle, Timestamp::from_nanos_since_reference(time_ns), stack, cpu, 1);
        self.summary.samples += 1;
    }

    fn is_mapped(&mut self, addr: u64) -> bool {
        self.process().mapped.iter().any(|&(s, e)| (s..e).contains(&addr))
    }

    /// A frame: its address where a library of the process maps it (the profiler turns it
    /// into the library-relative address; a caller's is a return address), else a label
    /// saying where it fell.
    fn frame(&mut self, addr: u64, leaf: bool) -> FrameInfo {
        let flags = FrameFlags::empty();
        if self.is_mapped(addr) {
            let frame = if leaf { Frame::InstructionPointer(addr) } else { Frame::ReturnAddress(addr) };
            return FrameInfo { frame, category_pair: self.user, flags };
        }
        let (label, category_pair) =
            if addr >= KERNEL_START { ("[kernel]", self.kernel) } else { ("[outside the recorded modules]", self.user) };
        FrameInfo { frame: Frame::Label(self.profile.intern_string(label)), category_pair, flags }
    }

    fn add_hit(&mut self, time_ns: u64) {
        let name = self.marker_name;
        let hit = self.summary.hits;
        let state = self.thread(time_ns);
        let (handle, previous) = (state.handle, state.last_hit.replace((time_ns, hit)));
        let at = Timestamp::from_nanos_since_reference(time_ns);
        self.profile.add_marker(handle, MarkerTiming::Instant(at), HitMarker { name, hit });
        self.summary.hits += 1;
        if let Some((start, number)) = previous {
            let name = self.iteration_name;
            let timing = MarkerTiming::Interval(Timestamp::from_nanos_since_reference(start), at);
            self.profile.add_marker(handle, timing, IterationMarker { name, number });
            self.summary.iterations += 1;
        }
    }

    /// Writes the profile's JSON.
    pub fn write(mut self, out: impl Write) -> Result<FirefoxSummary, ExportError> {
        if self.summary.samples == 0 && self.summary.hits == 0 {
            return Err(ExportError::Empty("firefox"));
        }
        self.summary.threads = self.threads.len() as u64;
        self.summary.processes = self.processes.values().filter(|p| p.handle.is_some()).count() as u64;
        let mut out = std::io::BufWriter::new(out);
        let write = |e: std::io::Error| ExportError::Write { format: "firefox", source: e };
        serde_json::to_writer(&mut out, &self.profile).map_err(|e| write(e.into()))?;
        out.flush().map_err(write)?;
        Ok(self.summary)
    }
}

/// The bytes of a build id written as hex (None when it is not hex).
fn build_id_bytes(hex: &str) -> Option<Vec<u8>> {
    if !hex.len().is_multiple_of(2) {
        return None;
    }
    (0..hex.len()).step_by(2).map(|i| u8::from_str_radix(hex.get(i..i + 2)?, 16).ok()).collect()
}

/// The debug id symbol servers and the profiler know an ELF file by: the first 16 bytes of
/// its GNU build id (zero-padded when shorter) read as a little-endian GUID, age 0.
fn debug_id(build_id: &[u8]) -> DebugId {
    let mut guid = [0u8; 16];
    let n = build_id.len().min(16);
    guid[..n].copy_from_slice(&build_id[..n]);
    DebugId::from_guid_age(&guid, 0).unwrap_or_default()
}

/// A marker hit: an instant marker named after the marker function.
struct HitMarker {
    name: StringHandle,
    hit: u64,
}

impl StaticSchemaMarker for HitMarker {
    const UNIQUE_MARKER_TYPE_NAME: &'static str = "KansokuMarkerHit";
    const DESCRIPTION: Option<&'static str> = Some("The marker function was entered (kansoku record --marker)");
    const TABLE_LABEL: Option<&'static str> = Some("{marker.name} hit {marker.data.hit}");
    const FIELDS: &'static [StaticSchemaMarkerField] =
        &[StaticSchemaMarkerField { key: "hit", label: "Hit", format: MarkerFieldFormat::Integer, flags: MarkerFieldFlags::empty() }];

    fn name(&self, _: &mut Profile) -> StringHandle {
        self.name
    }
    fn category(&self, _: &mut Profile) -> CategoryHandle {
        CategoryHandle::OTHER
    }
    fn string_field_value(&self, _: u32) -> StringHandle {
        self.name
    }
    fn number_field_value(&self, _: u32) -> f64 {
        self.hit as f64
    }
}

/// The stretch from one marker hit to the next on one thread: one iteration.
struct IterationMarker {
    name: StringHandle,
    number: u64,
}

impl StaticSchemaMarker for IterationMarker {
    const UNIQUE_MARKER_TYPE_NAME: &'static str = "KansokuIteration";
    const DESCRIPTION: Option<&'static str> = Some("From one marker hit to the next on this thread");
    // The number is a field, not part of the name: one name string for all iterations.
    const CHART_LABEL: Option<&'static str> = Some("{marker.name} {marker.data.iteration}");
    const TABLE_LABEL: Option<&'static str> = Some("{marker.name} {marker.data.iteration}");
    const FIELDS: &'static [StaticSchemaMarkerField] = &[StaticSchemaMarkerField {
        key: "iteration",
        label: "Iteration",
        format: MarkerFieldFormat::Integer,
        flags: MarkerFieldFlags::empty(),
    }];

    fn name(&self, _: &mut Profile) -> StringHandle {
        self.name
    }
    fn category(&self, _: &mut Profile) -> CategoryHandle {
        CategoryHandle::OTHER
    }
    fn string_field_value(&self, _: u32) -> StringHandle {
        self.name
    }
    fn number_field_value(&self, _: u32) -> f64 {
        self.number as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kansoku_core::Sample;

    #[test]
    fn a_build_id_becomes_the_breakpad_id_the_profiler_asks_symbol_servers_for() {
        let bytes = build_id_bytes("0102030405060708090a0b0c0d0e0f1011121314").unwrap();
        // The first three GUID fields byte-swapped, the rest as is, age 0 appended.
        assert_eq!(debug_id(&bytes).breakpad().to_string(), "0403020106050807090A0B0C0D0E0F100");
        assert_eq!(build_id_bytes("0g"), None);
        assert_eq!(build_id_bytes("abc"), None);
    }

    #[test]
    fn samples_hits_and_iterations_are_counted_per_thread() {
        let run = SampledRun { program: "/bin/p".into(), started_s: 0, interval_ns: 1000, time_sampling: true, marker: Some("f".into()) };
        let mut p = FirefoxProfile::new(run);
        let module = Module { path: "/bin/p".into(), build_id: Some("aa".into()), start: 0x1000, end: 0x2000, file_offset: 0x1000 };
        // the file's functions: 0x1800 (the samples) lies in `work`
        p.add_module(&module, 0x1000, &[(0x1700, 0x200, "work".into()), (0x1900, 0x10, "other".into())]);
        for tid in [7, 8] {
            p.add_event(&Event::Thread { tid });
            for t in 0..3 {
                p.add_event(&Event::Marker { time_ns: t * 10, instructions: None });
                p.add_event(&Event::Sample(Sample { time_ns: t * 10 + 5, ip: 0x1800, instructions: None }));
            }
        }
        p.add_event(&Event::Sample(Sample { time_ns: 99, ip: 0x9000, instructions: None }));
        let mut json = Vec::new();
        let s = p.write(&mut json).unwrap();
        assert_eq!((s.samples, s.unmapped, s.threads, s.libraries, s.hits, s.iterations), (7, 1, 2, 1, 6, 4));
        let v: serde_json::Value = serde_json::from_slice(&json).unwrap();
        assert_eq!(v["libs"][0]["codeId"], "aa");
        let strings = v["shared"]["stringArray"].as_array().or_else(|| v["threads"][0]["stringArray"].as_array()).unwrap();
        let name = &v["threads"][0]["funcTable"]["name"][0];
        assert_eq!(strings[name.as_u64().unwrap() as usize], "work", "the sampled function named from the embedded symbols");
    }

    #[test]
    fn nothing_recorded_is_an_error_not_an_empty_profile() {
        let run = SampledRun { program: "p".into(), started_s: 0, interval_ns: 0, time_sampling: false, marker: None };
        assert!(matches!(FirefoxProfile::new(run).write(Vec::new()), Err(ExportError::Empty("firefox"))));
    }
}
