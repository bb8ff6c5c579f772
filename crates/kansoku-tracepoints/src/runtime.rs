//! Running a module under wasmtime with the `kansoku` imports writing trace records.

use crate::error::{Result, TpError};
use crate::module::{KansokuImport, ModuleInfo};
use crate::tracefile::{module_hash, Clock, TraceHeader, TraceWriter};
use serde::Serialize;
use std::io::Write;
use std::time::Instant;
use wasmtime::{Config, Engine, Linker, Module, Store, Val, ValType};

/// How to run a module.
#[derive(Debug, Clone)]
pub struct RunOptions {
    /// What the trace records' timestamps count.
    pub clock: Clock,
    /// Exported function to call; default: the first of `run`, `main`, `_start`.
    pub entry: Option<String>,
    /// Arguments for the entry function, parsed by its parameter types.
    pub args: Vec<String>,
    /// Stop a module that runs longer than this (one that never returns would run
    /// forever); the trace up to then is kept.
    pub time_limit: Option<std::time::Duration>,
    /// Let Cranelift optimise the module's machine code (the default). Off, compiling is
    /// cheaper and the run slower: for many short runs of small modules, where compiling is
    /// most of the cost (the property test of `check`). The trace and results are the same
    /// (Cranelift's optimisations keep the module's meaning; fuel is counted per wasm
    /// operator); `check`'s timing runs always optimise.
    pub optimise_code: bool,
}

/// The time limit of [`RunOptions::default`].
pub const DEFAULT_TIME_LIMIT: std::time::Duration = std::time::Duration::from_secs(600);

impl Default for RunOptions {
    fn default() -> Self {
        RunOptions { clock: Clock::Instructions, entry: None, args: Vec::new(), time_limit: Some(DEFAULT_TIME_LIMIT), optimise_code: true }
    }
}

/// What a run did.
#[derive(Debug, Clone, Serialize)]
pub struct RunOutcome {
    /// The exported function that was called.
    pub entry: String,
    /// Values the entry function returned.
    pub results: Vec<String>,
    /// Trace records written (= trace calls executed).
    pub records: u64,
    /// Bytes of the trace file, header included.
    pub bytes: u64,
    /// Wasm instructions executed (fuel), when the clock counts instructions.
    pub instructions: Option<u64>,
    /// Wall time of the entry call, in nanoseconds.
    pub wall_ns: u64,
}

struct HostState {
    writer: TraceWriter,
    clock: Clock,
    start: Instant,
    fuel0: u64,
}

const FUEL: u64 = u64::MAX / 4;

fn now(caller: &wasmtime::Caller<'_, HostState>) -> u64 {
    let st = caller.data();
    match st.clock {
        Clock::Instructions => st.fuel0 - caller.get_fuel().unwrap_or(st.fuel0),
        Clock::Ns => st.start.elapsed().as_nanos() as u64,
    }
}

/// Runs `wasm`, writing its trace to `out`.
pub fn run_module(wasm: &[u8], opts: &RunOptions, out: Box<dyn Write + Send>) -> Result<RunOutcome> {
    let info = ModuleInfo::parse(wasm)?;
    if !info.has_trace_imports() {
        return Err(TpError::NoTraceImports);
    }
    for imp in &info.func_imports {
        if imp.module != "kansoku" {
            return Err(TpError::UnsupportedImport {
                module: imp.module.clone(),
                name: imp.name.clone(),
                reason: "the runtime provides only module `kansoku`; build self-contained modules \
                         (clang --target=wasm32 -nostdlib)"
                    .into(),
            });
        }
    }
    let (engine, module) = compiled(wasm, opts.clock == Clock::Instructions, opts.time_limit.is_some(), opts.optimise_code)?;
    let header = TraceHeader { clock: opts.clock, module_hash: module_hash(wasm) };
    let mut writer = TraceWriter::new(out, header)?;
    // The header goes out first: a run stopped from outside still leaves a readable trace.
    writer.finish()?;
    let mut store = Store::new(&engine, HostState { writer, clock: opts.clock, start: Instant::now(), fuel0: FUEL });
    store.set_epoch_deadline(1);
    if opts.clock == Clock::Instructions {
        store.set_fuel(FUEL).map_err(|e| TpError::Runtime(format!("{e:#}")))?;
    }
    let mut linker: Linker<HostState> = Linker::new(&engine);
    for imp in &info.func_imports {
        match imp.kansoku {
            Some(KansokuImport::Trace { nargs }) => {
                let ty = wasmtime::FuncType::new(&engine, vec![ValType::I32; nargs as usize + 1], vec![]);
                linker
                    .func_new("kansoku", &imp.name, ty, move |mut caller, params, _results| {
                        let ts = now(&caller);
                        let id = params[0].unwrap_i32() as u32;
                        let mut args = [0i32; 256];
                        for (k, p) in params[1..].iter().enumerate() {
                            args[k] = p.unwrap_i32();
                        }
                        caller
                            .data_mut()
                            .writer
                            .record(id, ts, &args[..params.len() - 1])
                            .map_err(|e| wasmtime::Error::msg(e.to_string()))
                    })
                    .map_err(|e| TpError::Runtime(format!("{e:#}")))?;
            }
            Some(KansokuImport::Barrier) => {
                linker
                    .func_wrap("kansoku", "barrier", || {})
                    .map_err(|e| TpError::Runtime(format!("{e:#}")))?;
            }
            None => {}
        }
    }
    let instance = linker.instantiate(&mut store, &module).map_err(|e| TpError::Runtime(format!("{e:#}")))?;
    let entry = match &opts.entry {
        Some(e) => e.clone(),
        None => ["run", "main", "_start"]
            .iter()
            .find(|n| instance.get_func(&mut store, n).is_some())
            .map(|s| s.to_string())
            .ok_or_else(|| TpError::Entry("the module exports none of `run`, `main`, `_start`; name one with --entry".into()))?,
    };
    let func = instance
        .get_func(&mut store, &entry)
        .ok_or_else(|| TpError::Entry(format!("the module exports no function `{entry}`")))?;
    let ty = func.ty(&store);
    let params: Vec<ValType> = ty.params().collect();
    if params.len() != opts.args.len() {
        return Err(TpError::Entry(format!(
            "`{entry}` takes {} arguments, {} given (pass them after `--`)",
            params.len(),
            opts.args.len()
        )));
    }
    let mut vals = Vec::new();
    for (t, a) in params.iter().zip(&opts.args) {
        let bad = || TpError::Entry(format!("argument `{a}` is not a valid {t}"));
        vals.push(match t {
            ValType::I32 => Val::I32(a.parse::<i64>().map_err(|_| bad())? as i32),
            ValType::I64 => Val::I64(a.parse().map_err(|_| bad())?),
            ValType::F32 => Val::F32(a.parse::<f32>().map_err(|_| bad())?.to_bits()),
            ValType::F64 => Val::F64(a.parse::<f64>().map_err(|_| bad())?.to_bits()),
            _ => return Err(TpError::Entry(format!("parameter type {t} cannot be given on the command line"))),
        });
    }
    let mut results = vec![Val::I32(0); ty.results().len()];
    store.data_mut().start = Instant::now();
    let t0 = Instant::now();
    let watchdog = opts.time_limit.map(|limit| {
        let (done, wait) = std::sync::mpsc::channel::<()>();
        let engine = engine.clone();
        let thread = std::thread::spawn(move || {
            if wait.recv_timeout(limit) == Err(std::sync::mpsc::RecvTimeoutError::Timeout) {
                engine.increment_epoch();
            }
        });
        (done, thread)
    });
    let call = func.call(&mut store, &vals, &mut results);
    if let Some((done, thread)) = watchdog {
        // The engine is kept for the thread's next run: a tick must not land in it.
        drop(done);
        let _ = thread.join();
    }
    let wall_ns = t0.elapsed().as_nanos() as u64;
    let timed_out = opts.time_limit.filter(|&l| t0.elapsed() >= l && call.is_err());
    let instructions = if opts.clock == Clock::Instructions { store.get_fuel().ok().map(|f| FUEL - f) } else { None };
    let st = store.data_mut();
    st.writer.finish()?;
    if let Some(limit) = timed_out {
        return Err(TpError::Runtime(format!(
            "`{entry}` ran longer than its time limit of {} s and was stopped; the trace up to then ({} records) is kept",
            limit.as_secs_f64(),
            st.writer.records
        )));
    }
    call.map_err(|e| TpError::Runtime(format!("`{entry}` trapped: {e:#}")))?;
    let results = results
        .iter()
        .map(|v| match v {
            Val::I32(x) => x.to_string(),
            Val::I64(x) => x.to_string(),
            Val::F32(x) => f32::from_bits(*x).to_string(),
            Val::F64(x) => f64::from_bits(*x).to_string(),
            other => format!("{other:?}"),
        })
        .collect();
    Ok(RunOutcome { entry, results, records: st.writer.records, bytes: st.writer.bytes, instructions, wall_ns })
}

/// A module compiled for one engine configuration, kept for the thread's next runs.
struct Compiled {
    fuel: bool,
    epoch: bool,
    optimise: bool,
    wasm: Vec<u8>,
    engine: Engine,
    module: Module,
}

/// Compiled modules a thread keeps (the newest): `check` runs each of its modules
/// `timing_repeats` times, and Cranelift's compiling is most of a short run's cost.
const COMPILED_KEPT: usize = 4;

thread_local! {
    // Per thread, not per process: the time limit ticks its engine's epoch, which must
    // never reach a run of another thread.
    static COMPILED: std::cell::RefCell<Vec<Compiled>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// The engine (fuel counted, epoch interruption on or off, Cranelift optimising or not) and
/// `wasm` compiled for it: from the thread's cache when the same bytes were compiled for the
/// same configuration.
fn compiled(wasm: &[u8], fuel: bool, epoch: bool, optimise: bool) -> Result<(Engine, Module)> {
    COMPILED.with(|cache| {
        let mut cache = cache.borrow_mut();
        if let Some(k) = cache.iter().position(|c| c.fuel == fuel && c.epoch == epoch && c.optimise == optimise && c.wasm == wasm) {
            let hit = cache.remove(k);
            let found = (hit.engine.clone(), hit.module.clone());
            cache.push(hit);
            return Ok(found);
        }
        let engine = match cache.iter().find(|c| c.fuel == fuel && c.epoch == epoch && c.optimise == optimise) {
            Some(c) => c.engine.clone(),
            None => {
                let mut config = Config::new();
                config.consume_fuel(fuel);
                // The time limit interrupts the module at its next loop back edge or call.
                config.epoch_interruption(epoch);
                if !optimise {
                    config.cranelift_opt_level(wasmtime::OptLevel::None);
                }
                Engine::new(&config).map_err(|e| TpError::Runtime(format!("{e:#}")))?
            }
        };
        let module = Module::new(&engine, wasm).map_err(|e| TpError::Runtime(format!("{e:#}")))?;
        if cache.len() == COMPILED_KEPT {
            cache.remove(0);
        }
        cache.push(Compiled { fuel, epoch, optimise, wasm: wasm.to_vec(), engine: engine.clone(), module: module.clone() });
        Ok((engine, module))
    })
}

/// Runs `wasm` keeping the trace in memory.
pub fn run_to_vec(wasm: &[u8], opts: &RunOptions) -> Result<(RunOutcome, Vec<u8>)> {
    let s = crate::tracefile::SharedBuffer::default();
    let outcome = run_module(wasm, opts, Box::new(s.clone()))?;
    let bytes = s.take();
    Ok((outcome, bytes))
}
