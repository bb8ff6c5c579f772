//! `kansoku reconstruct --likelihood cfg`: the static successor relation of the recorded
//! programs, decoded from their binaries, for `kansoku_reconstruct::ControlFlow` (which
//! stays pure: it gets the relation as data).
//!
//! Successors of an instruction: the next one (fall-through, also after a conditional
//! branch, a call's return lands there via the callee's return), a direct branch's
//! target, a direct call's callee entry, and for a return every *return site* of its
//! function (the instruction after each direct call of it in the same file). Indirect
//! jumps and calls, and returns of functions never called directly, have unknown
//! successors: they are left out, and the reconstruction scores them with the seed's
//! tables.

use std::collections::{HashMap, HashSet};

use kansoku_binary::maps::runtime_address;
use kansoku_binary::{FunctionCfg, InstructionKind, Program};
use kansoku_core::Module;
use kansoku_reconstruct::ControlFlow;

/// Static successors of every decoded instruction of the modules holding `sampled`
/// addresses, in runtime addresses; the marker's entry when `marker` names a function.
/// Problems (unreadable files, unknown marker) come back as warnings: the seed's scores
/// then apply to what could not be decoded.
pub fn control_flow(modules: &[Module], sampled: &HashSet<u64>, marker: Option<&str>, warnings: &mut Vec<String>) -> ControlFlow {
    let mut successors: HashMap<u64, Vec<u64>> = HashMap::new();
    let mut calls: HashMap<u64, u64> = HashMap::new();
    let mut returns: HashSet<u64> = HashSet::new();
    let mut entry = None;
    for module in modules.iter().filter(|m| sampled.iter().any(|&a| m.contains(a))) {
        let program = match Program::open(&module.path) {
            Ok(p) => p,
            Err(e) => {
                warnings.push(format!("--likelihood cfg: cannot decode {}: {e}; its instructions get the seed's scores", module.path));
                continue;
            }
        };
        let to_runtime = |link: u64| runtime_address(modules, &program, &module.path, link);
        let decoded = decode(&program);
        for (from, next) in link_successors(&decoded) {
            let Some(from) = to_runtime(from) else { continue };
            let next: Vec<u64> = next.into_iter().filter_map(to_runtime).collect();
            successors.insert(from, next);
        }
        for i in decoded.iter().flat_map(|c| &c.instructions) {
            match i.kind {
                InstructionKind::Call => {
                    if let (Some(c), Some(s)) = (to_runtime(i.address), to_runtime(i.next_address())) {
                        calls.insert(c, s);
                    }
                }
                InstructionKind::Return => returns.extend(to_runtime(i.address)),
                _ => {}
            }
        }
        if let Some(name) = marker {
            if let Ok(f) = program.function_named(name) {
                entry = entry.or(to_runtime(f.address));
            }
        }
    }
    if let (Some(name), None) = (marker, entry) {
        warnings.push(format!("--likelihood cfg: marker function '{name}' not found in the sampled modules; the trace may start anywhere in the iteration"));
    }
    ControlFlow::new(&successors, sampled.iter().copied(), entry).with_calls(&calls, &returns)
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
