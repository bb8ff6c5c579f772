//! The static successor relation of recorded programs, decoded from their binaries, in
//! runtime addresses: what `kansoku reconstruct --likelihood cfg` scores with (the
//! reconstruction gets it as data and stays free of binary decoding).
//!
//! Successors of an instruction: the next one (fall-through, also after a conditional
//! branch, a call's return lands there via the callee's return), a direct branch's
//! target, a direct call's callee entry, and for a return every *return site* of its
//! function (the instruction after each direct call of it in the same file). Indirect
//! jumps and calls, and returns of functions never called directly, have unknown
//! successors: they are left out, and the reconstruction scores them with the seed's
//! tables.

use std::collections::{HashMap, HashSet};

use kansoku_core::Module;

use crate::maps::runtime_address;
use crate::{FunctionCfg, InstructionKind, Program};

/// The relation over the modules that hold sampled addresses, in runtime addresses.
#[derive(Debug, Default)]
pub struct StaticSuccessors {
    /// Instruction → its known successors.
    pub successors: HashMap<u64, Vec<u64>>,
    /// Direct call instruction → the instruction after it (its return site).
    pub calls: HashMap<u64, u64>,
    /// Every return instruction.
    pub returns: HashSet<u64>,
    /// The marker function's entry, where a marker was named and found.
    pub entry: Option<u64>,
    /// What could not be decoded or found: those instructions have no known successors.
    pub warnings: Vec<String>,
}

/// Decodes every module of `modules` that holds one of the `sampled` addresses and
/// returns its successor relation; `marker`, a function name, gives the entry. A module
/// that cannot be read, or a marker that is not found, is said in the warnings.
pub fn static_successors(modules: &[Module], sampled: &HashSet<u64>, marker: Option<&str>) -> StaticSuccessors {
    let mut out = StaticSuccessors::default();
    for module in modules.iter().filter(|m| sampled.iter().any(|&a| m.contains(a))) {
        let program = match Program::open(&module.path) {
            Ok(p) => p,
            Err(e) => {
                out.warnings.push(format!("cannot decode {}: {e}; its instructions get the seed's scores", module.path));
                continue;
            }
        };
        let to_runtime = |link: u64| runtime_address(modules, &program, &module.path, link);
        let decoded = decode(&program);
        for (from, next) in link_successors(&decoded) {
            let Some(from) = to_runtime(from) else { continue };
            let next: Vec<u64> = next.into_iter().filter_map(to_runtime).collect();
            out.successors.insert(from, next);
        }
        for i in decoded.iter().flat_map(|c| &c.instructions) {
            match i.kind {
                InstructionKind::Call => {
                    if let (Some(c), Some(s)) = (to_runtime(i.address), to_runtime(i.next_address())) {
                        out.calls.insert(c, s);
                    }
                }
                InstructionKind::Return => out.returns.extend(to_runtime(i.address)),
                _ => {}
            }
        }
        if let Some(name) = marker {
            if let Ok(f) = program.function_named(name) {
                out.entry = out.entry.or(to_runtime(f.address));
            }
        }
    }
    if let (Some(name), None) = (marker, out.entry) {
        out.warnings.push(format!("marker function '{name}' not found in the sampled modules; the trace may start anywhere in the iteration"));
    }
    out
}

/// Every function of `program`, decoded.
fn decode(program: &Program) -> Vec<FunctionCfg> {
    program.functions().iter().map(|f| FunctionCfg::build(program, f)).collect()
}

/// Link-time successors of every decoded instruction whose successors are known.
fn link_successors(cfgs: &[FunctionCfg]) -> HashMap<u64, Vec<u64>> {
    let return_sites = return_sites(cfgs);
    let mut out = HashMap::new();
    for cfg in cfgs {
        for i in &cfg.instructions {
            let next = i.next_address();
            let repeated = i.raw.has_rep_prefix() || i.raw.has_repne_prefix();
            let successors = match (i.kind, i.target) {
                // `rep movs` and friends are stepped once per element: they follow themselves.
                (InstructionKind::Other, _) if repeated => vec![i.address, next],
                (InstructionKind::Other | InstructionKind::Interrupt, _) => vec![next],
                (InstructionKind::ConditionalJump, Some(t)) => vec![next, t],
                (InstructionKind::Jump | InstructionKind::Call, Some(t)) => vec![t],
                (InstructionKind::Return, _) => match return_sites.get(&cfg.address) {
                    Some(sites) => sites.clone(),
                    None => continue,
                },
                _ => continue, // indirect jump or call: unknown
            };
            out.insert(i.address, successors);
        }
    }
    out
}

/// Function entry → the instructions after its direct calls.
fn return_sites(cfgs: &[FunctionCfg]) -> HashMap<u64, Vec<u64>> {
    let mut sites: HashMap<u64, Vec<u64>> = HashMap::new();
    for i in cfgs.iter().flat_map(|c| &c.instructions) {
        if let (InstructionKind::Call, Some(t)) = (i.kind, i.target) {
            sites.entry(t).or_default().push(i.next_address());
        }
    }
    sites
}
