//! The clocks hits are stamped with: CLOCK_MONOTONIC (the kernel's, and the uprobe and
//! trap mechanisms'), the agent's TSC turned into it ([`TimeBase`]), and the step a clock
//! moves in ([`clock_step`]), which says how fine a time can be.

pub(crate) fn monotonic_ns() -> u64 {
    let mut t = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `t` is a timespec of ours that the call fills.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut t) };
    t.tv_sec as u64 * 1_000_000_000 + t.tv_nsec as u64
}

/// The step a clock moves in, in its own units, or 0 when it looks continuous. It is read
/// around waits of varying length: a continuous clock gives every difference, a stepping
/// one only multiples of its step (±1 where the step is not a whole number of units). A
/// VM's TSC can step by 24.45 ticks (10 ns) and take 2–3 steps to read, so a clock read
/// twice in a row never repeats: the step shows only as the gap between those clusters.
pub(crate) fn clock_step(read: impl Fn() -> u64) -> f64 {
    let mut deltas: Vec<u64> = (0..8192u64)
        .map(|i| {
            let t0 = read();
            let mut x = 0u64;
            for j in 0..i % 61 {
                x = std::hint::black_box(x + j);
            }
            read().wrapping_sub(t0)
        })
        .collect();
    deltas.sort_unstable();
    // Clusters: runs of differences each within 2 units of the one before; only clusters
    // of real weight count (an interrupt puts a stray difference far out).
    let mut clusters: Vec<(f64, usize)> = Vec::new();
    let mut run: Vec<u64> = Vec::new();
    for &d in &deltas {
        if run.last().is_some_and(|&l| d > l + 2) {
            clusters.push((run.iter().sum::<u64>() as f64 / run.len() as f64, run.len()));
            run.clear();
        }
        run.push(d);
    }
    clusters.push((run.iter().sum::<u64>() as f64 / run.len() as f64, run.len()));
    let heavy: Vec<f64> = clusters.iter().filter(|c| c.1 * 100 >= deltas.len()).map(|c| c.0).collect();
    if heavy.len() < 3 {
        return 0.0;
    }
    heavy.windows(2).map(|w| w[1] - w[0]).fold(f64::INFINITY, f64::min)
}

/// One (TSC, CLOCK_MONOTONIC) pair: the counter read between two clock reads.
pub(crate) fn clock_pair() -> (u64, u64) {
    let a = monotonic_ns();
    // SAFETY: rdtsc exists on every x86-64 CPU and reads no memory.
    let t = unsafe { core::arch::x86_64::_rdtsc() };
    let b = monotonic_ns();
    (t, a + (b - a) / 2)
}

/// Turns agent time stamps into CLOCK_MONOTONIC ns.
#[derive(Clone, Copy, Debug)]
pub struct TimeBase {
    tsc: bool,
    start: (u64, u64),
    ns_per_tick: f64,
}

impl TimeBase {
    pub(crate) fn new(tsc: bool, start: (u64, u64), end: (u64, u64)) -> TimeBase {
        let ticks = end.0.saturating_sub(start.0).max(1) as f64;
        TimeBase { tsc, start, ns_per_tick: end.1.saturating_sub(start.1) as f64 / ticks }
    }

    /// The step the agent's time stamps move in, ns (see `clock_step`).
    pub fn resolution_ns(&self) -> f64 {
        if self.tsc {
            // SAFETY: rdtsc exists on every x86-64 CPU and reads no memory.
            clock_step(|| unsafe { core::arch::x86_64::_rdtsc() }) * self.ns_per_tick
        } else {
            clock_step(monotonic_ns)
        }
    }

    /// Converts one of the agent's time stamps to CLOCK_MONOTONIC ns (TSC ticks through the
    /// rate measured over the run; monotonic stamps are returned as they are).
    pub fn ns(&self, stamp: u64) -> u64 {
        if !self.tsc {
            return stamp;
        }
        let ticks = stamp.wrapping_sub(self.start.0) as i64;
        (self.start.1 as i64).saturating_add((ticks as f64 * self.ns_per_tick) as i64).max(0) as u64
    }
}
