//! What every mechanism of the event method shares: the plan of points it carries out
//! ([`Plan`], resolved from the user's specs by `events::plan` before anything runs) and
//! what a run gives back ([`EventOutcome`]). A file of its own so that the mechanisms
//! (`agent`, and the uprobes and traps in `events`) and the code that starts them depend on
//! it, not on each other.

use std::path::PathBuf;

use kansoku_core::ExitStatus;
use kansoku_monitor::events::{Calibration, EventReport, Hit, OffCpu, Point};

/// How points are planted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mechanism {
    /// kansoku's in-process agent (LD_PRELOAD, patched entries, shared-memory rings).
    Agent,
    /// The kernel's uprobes and uretprobes through perf_event, hits read from its ring buffers.
    Uprobe,
    /// ptrace breakpoints (int3) at a function's entry and at each of its return instructions: no kernel
    /// support needed beyond ptrace, but a stop of the program per hit.
    Trap,
}

impl std::fmt::Display for Mechanism {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Mechanism::Agent => "agent",
            Mechanism::Uprobe => "uprobe",
            Mechanism::Trap => "trap",
        })
    }
}

/// A point to plant, at a link-time address of the program.
#[derive(Clone, Debug)]
pub struct PlannedPoint {
    /// The point as analyses and reports know it (name, role; its address is `vaddr` until
    /// it is planted).
    pub point: Point,
    /// The shared library the point is in (`FUNC@LIB`); `None`: the program itself.
    pub module: Option<PathBuf>,
    /// Link-time address of the point in `module` (or in the program).
    pub vaddr: u64,
    /// The function's size in bytes (0 for a point that is not a function's entry).
    pub size: u64,
    /// For the uprobe mechanism: this point is a uretprobe on the function at `vaddr`.
    pub is_return: bool,
}

/// The points resolved from specs, before anything runs.
#[derive(Clone, Debug)]
pub struct Plan {
    /// The ELF program the points are in.
    pub program: PathBuf,
    /// Every point to plant; a routine's entry and exit points refer to `routines` by index.
    pub points: Vec<PlannedPoint>,
    /// Names of the routines measured (entry and exit pairs), as reports show them;
    /// several names at one address are one routine, `a = b`.
    pub routines: Vec<String>,
    /// Indices of the two calibration points (consecutive instructions), if any.
    pub calibration: Option<(u32, u32)>,
    /// The points of the program (`module` `None`) are not in `program` but in whatever
    /// program the run reaches by exec (a shim builds its program's path at run time):
    /// their address is 0 here, and the agent asks kansoku for it in each process.
    pub program_at_run_time: bool,
}

/// What a run produced.
#[derive(Clone, Debug)]
pub struct EventOutcome {
    /// The points that were planted.
    pub plan: Plan,
    /// How they were planted.
    pub mechanism: Mechanism,
    /// The hits, sorted by time (uprobe, trap); the agent's, when kept, in the order they
    /// were analysed (each thread's in the order they happened).
    pub hits: Vec<Hit>,
    /// The agent's run, analysed while it ran (with the calibration, if asked for); `None`
    /// when the hits are to be analysed ([`kansoku_monitor::events::analyse_on_cpu`]).
    pub analysed: Option<(Option<Calibration>, EventReport)>,
    /// Exec (or first trap) to exit, ns.
    pub measured_ns: u64,
    /// How the program ended.
    pub exit: ExitStatus,
    /// The user stopped the run (Ctrl-C or SIGTERM) before the program ended by itself.
    pub interrupted: bool,
    /// Hits the kernel dropped (uprobe ring buffers full) or the agent could not write.
    pub lost: u64,
    /// What the user should know about how the points were planted.
    pub notes: Vec<String>,
    /// The threads' stretches off the CPU (agent and uprobe runs: from the kernel's
    /// context-switch records), for on-CPU times; empty when not recorded.
    pub off_cpu: Vec<OffCpu>,
    /// The step the hits' clock moves in, ns, measured at the end of the run (0: it moved
    /// on every read, finer than a read takes). This VM's TSC moves in 10 ns steps.
    pub clock_resolution_ns: f64,
    /// What was found inconsistent in the agent's shared memory (the program wrote into
    /// it): the hits are those read before each inconsistency. Empty when nothing was.
    pub broken: Vec<String>,
}
