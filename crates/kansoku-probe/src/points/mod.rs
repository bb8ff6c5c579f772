//! Measurement points (seed 001's event method): where they go (`events`: the agent, uprobes
//! or ptrace traps), kansoku's side of the in-process agent (`agent`), and markers by name
//! (`marker`: `F`, `F@LIB`, `F@plt`).

pub mod agent;
pub mod events;
pub mod marker;
