//! Measurement points (seed 001's event method): where they go (`events`: the agent, uprobes
//! or ptrace traps), kansoku's side of the in-process agent (`agent`), and markers by name
//! (`marker`: `F`, `F@LIB`, `F@plt`), the agent's hits analysed as they are
//! read (`online`), and where a shim's program's functions are, asked by each process
//! at run time (`follow`). What they all share is below them, so none reaches back: the
//! plan of points and a run's outcome (`plan`), and the clocks hits are stamped with
//! (`clock`).

pub mod agent;
pub(crate) mod clock;
pub mod events;
pub(crate) mod follow;
pub mod marker;
pub(crate) mod plan;
pub(crate) mod online;
