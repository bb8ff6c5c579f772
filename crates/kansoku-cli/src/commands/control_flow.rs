//! `kansoku reconstruct --likelihood cfg`: the recorded programs' static successor relation
//! (decoded by `kansoku_binary::static_successors`) handed to
//! `kansoku_reconstruct::ControlFlow`, which gets it as data.

use std::collections::HashSet;

use kansoku_core::Module;
use kansoku_reconstruct::ControlFlow;

/// The successor relation of the modules holding `sampled` addresses, as the
/// reconstruction scores it; what could not be decoded is added to `warnings`, named by
/// the option that asked for it.
pub fn control_flow(modules: &[Module], sampled: &HashSet<u64>, marker: Option<&str>, warnings: &mut Vec<String>) -> ControlFlow {
    let relation = kansoku_binary::static_successors(modules, sampled, marker);
    warnings.extend(relation.warnings.iter().map(|w| format!("--likelihood cfg: {w}")));
    ControlFlow::new(&relation.successors, sampled.iter().copied(), relation.entry).with_calls(&relation.calls, &relation.returns)
}
