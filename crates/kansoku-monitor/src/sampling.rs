//! The sampling method: observations every interval → the seed's eight items, CPU share
//! per program and per function, busy share per device (seed tables 2–4, figure 4).
//!
//! An [`Observation`] holds *cumulative* counters as the kernel reports them (clock ticks
//! of CPU time, milliseconds of device busy time, CPU ticks of the target and its
//! children) plus what was seen at that instant (thread states, functions sampled since
//! the previous observation). [`summarise`] differences consecutive observations.
//!
//! The seed sampled one CPU and one channel and classified each instant; here each
//! interval gives the *fraction* `a` of CPU capacity busy (all CPUs together, like
//! `vmstat`) and the fraction `b` of time the busiest device was busy. Within an interval
//! the two are taken as independent, so the overlap is `a·b`; summed over intervals:
//! CPU only = Σ(a − a·b), overlap = Σa·b, I-O only = Σ(b − a·b), I-O busy = Σb,
//! CPU wait = Σ(1 − a). The shorter the interval, the closer this is to the seed's
//! instant-by-instant classification.

use std::collections::BTreeMap;

use serde::Serialize;

/// Cumulative CPU time of all CPUs, in clock ticks (the `cpu` line of `/proc/stat`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct CpuTimes {
    /// Ticks in user mode (niced processes not included).
    pub user: u64,
    /// Ticks in user mode of niced (lowered-priority) processes.
    pub nice: u64,
    /// Ticks in kernel mode, interrupts not included.
    pub system: u64,
    /// Ticks idle with no I/O outstanding.
    pub idle: u64,
    /// Ticks idle while some I/O was outstanding.
    pub iowait: u64,
    /// Ticks servicing hardware interrupts.
    pub irq: u64,
    /// Ticks servicing softirqs.
    pub softirq: u64,
    /// Ticks stolen by the hypervisor for other guests.
    pub steal: u64,
}

impl CpuTimes {
    /// All ticks of every state: the CPU capacity the percentages are taken of.
    pub fn total(&self) -> u64 {
        self.user + self.nice + self.system + self.idle + self.iowait + self.irq + self.softirq + self.steal
    }
    /// User state: `us` of vmstat (user + nice).
    pub fn user_state(&self) -> u64 {
        self.user + self.nice
    }
    /// Kernel state: `sy` of vmstat (system + irq + softirq).
    pub fn kernel_state(&self) -> u64 {
        self.system + self.irq + self.softirq
    }
    fn minus(&self, earlier: &CpuTimes) -> CpuTimes {
        CpuTimes {
            user: self.user.saturating_sub(earlier.user),
            nice: self.nice.saturating_sub(earlier.nice),
            system: self.system.saturating_sub(earlier.system),
            idle: self.idle.saturating_sub(earlier.idle),
            iowait: self.iowait.saturating_sub(earlier.iowait),
            irq: self.irq.saturating_sub(earlier.irq),
            softirq: self.softirq.saturating_sub(earlier.softirq),
            steal: self.steal.saturating_sub(earlier.steal),
        }
    }
}

/// Cumulative counters of one block device (`/proc/diskstats`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct DeviceTimes {
    /// Device name as in `/proc/diskstats` (e.g. `sda`, `nvme0n1`).
    pub name: String,
    /// Milliseconds during which the device had I/O in flight (field 10, `io_ticks`).
    pub busy_ms: u64,
    /// Completed reads + writes (+ discards + flushes).
    pub ios: u64,
    /// Sectors (512 bytes each) read + written.
    pub sectors: u64,
}

/// Cumulative CPU ticks (user + system) of the target, its children, and the target's
/// threads with their scheduler state at the instant of observation.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct TargetTimes {
    /// Process id of the target.
    pub pid: i32,
    /// The target's own CPU ticks, user + system (`utime + stime`).
    pub target_ticks: u64,
    /// Live descendants' ticks plus the reaped children's (`cutime + cstime`).
    pub children_ticks: u64,
    /// `(tid, state)`, state being the letter of `/proc/PID/task/TID/stat` (R, S, D, ...).
    pub threads: Vec<(i32, char)>,
}

/// One observation.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Observation {
    /// Monotonic time since the measurement started, ns.
    pub time_ns: u64,
    /// Cumulative CPU time of all CPUs at this instant.
    pub cpu: CpuTimes,
    /// Cumulative counters of each block device at this instant.
    pub devices: Vec<DeviceTimes>,
    /// `None` once the target has gone (or when only the system is observed).
    pub target: Option<TargetTimes>,
    /// Functions of the target sampled (perf `cpu-clock`) since the previous observation.
    pub functions: Vec<String>,
}

/// The seed's eight items, as percentages of the measured time.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct EightItems {
    /// ① CPU busy (user + kernel state), percent of all CPU capacity.
    pub cpu_active: f64,
    /// ② CPU busy while no device was: Σ(a − a·b), percent.
    pub cpu_only: f64,
    /// ③ CPU busy and a device busy together: Σa·b, percent.
    pub cpu_io_overlap: f64,
    /// ④ A device busy while the CPU was not: Σ(b − a·b), percent.
    pub io_only: f64,
    /// ⑤ The busiest counted device's busy time, percent of the measured time.
    pub io_busy: f64,
    /// ⑥ CPU not busy (idle + iowait + steal), percent of all CPU capacity.
    pub cpu_wait: f64,
    /// ⑦ CPU in user state (user + nice), percent of all CPU capacity.
    pub user_state: f64,
    /// ⑧ CPU in kernel state (system + irq + softirq), percent of all CPU capacity.
    pub kernel_state: f64,
}

impl EightItems {
    /// `(label, percent)` in the seed's order ①..⑧ (for tables and the Kiviat graph).
    pub fn labelled(&self) -> [(&'static str, f64); 8] {
        [
            ("CPU active", self.cpu_active),
            ("CPU only", self.cpu_only),
            ("CPU/I-O overlap", self.cpu_io_overlap),
            ("I-O only", self.io_only),
            ("I-O busy", self.io_busy),
            ("CPU wait", self.cpu_wait),
            ("user state", self.user_state),
            ("kernel state", self.kernel_state),
        ]
    }
}

/// A name and its share in percent (of all CPU capacity, or of the target's samples).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Share {
    /// The program or function the share is of.
    pub name: String,
    /// Its share, percent (of all CPU capacity for a program, of the target's samples for a function).
    pub percent: f64,
    /// Samples or ticks behind the figure.
    pub count: u64,
}

/// Seed table 3/4 for one device.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct DeviceShare {
    /// Device name as in `/proc/diskstats`.
    pub name: String,
    /// Percent of the measured time the device was busy.
    pub busy_percent: f64,
    /// This device's share of all completed I/O requests, percent (seed table 4).
    pub io_share_percent: f64,
    /// Completed I/O requests during the measurement.
    pub ios: u64,
    /// Sectors (512 bytes each) transferred during the measurement.
    pub sectors: u64,
}

/// Figures of one interval, for the time series.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct IntervalFigures {
    /// End of the interval, seconds since the start.
    pub t_s: f64,
    /// CPU busy (user + kernel state) in the interval, percent of all CPU capacity.
    pub cpu_active: f64,
    /// CPU in user state (user + nice) in the interval, percent of all CPU capacity.
    pub user_state: f64,
    /// CPU in kernel state (system + irq + softirq) in the interval, percent of all CPU capacity.
    pub kernel_state: f64,
    /// CPU idle with I/O outstanding in the interval, percent of all CPU capacity.
    pub iowait: f64,
    /// The busiest counted device's busy time in the interval, percent.
    pub io_busy: f64,
    /// The interval's share of the seed's items that need CPU and I/O together (as the
    /// summary's, from the CPU busy fraction a and the I/O busy fraction b): CPU only
    /// a − ab, overlap ab, I-O only b − ab; and CPU wait (idle, iowait, steal).
    pub cpu_only: f64,
    /// CPU/I-O overlap (ab) in the interval, percent.
    pub cpu_io_overlap: f64,
    /// I-O only (b − ab) in the interval, percent.
    pub io_only: f64,
    /// CPU wait (idle + iowait + steal) in the interval, percent of all CPU capacity.
    pub cpu_wait: f64,
    /// Per device busy percent, in the order of [`Summary::devices`].
    pub devices: Vec<f64>,
}

/// Everything the sampling method reports.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Summary {
    /// Number of observations given (figures need at least two).
    pub observations: usize,
    /// Time from the first observation to the last, seconds.
    pub measured_s: f64,
    /// The seed's eight items over the whole measurement.
    pub eight: EightItems,
    /// Idle and iowait separately (vmstat's `id` and `wa`) and steal (`st`), percent.
    pub idle: f64,
    /// CPU idle with I/O outstanding (vmstat's `wa`), percent of all CPU capacity.
    pub iowait: f64,
    /// CPU time stolen by the hypervisor (vmstat's `st`), percent of all CPU capacity.
    pub steal: f64,
    /// CPU share per program: target, its children, the rest of the system (percent of
    /// all CPU capacity, so they add up to CPU active).
    pub programs: Vec<Share>,
    /// The target's functions, percent of the target's samples.
    pub functions: Vec<Share>,
    /// Function samples of the target in all, the base of [`Summary::functions`]' percentages.
    pub function_samples: u64,
    /// Busy share and I/O counts per device (seed tables 3 and 4).
    pub devices: Vec<DeviceShare>,
    /// How often each thread state was seen, summed over threads and observations.
    pub thread_states: BTreeMap<char, u64>,
    /// Figures of each interval between consecutive observations, in time order.
    pub series: Vec<IntervalFigures>,
}

/// Which devices count as "I/O" for the eight items: `None` = all given.
#[derive(Clone, Debug, Default)]
pub struct SummaryOptions {
    /// Names of the devices to count (as in `/proc/diskstats`); `None`: every device observed.
    pub devices: Option<Vec<String>>,
}

/// Differences consecutive observations and sums them into the seed's figures.
/// Fewer than two observations give an empty summary (nothing was measured).
pub fn summarise(observations: &[Observation], options: &SummaryOptions) -> Summary {
    let mut s = Summary { observations: observations.len(), ..Summary::default() };
    if observations.len() < 2 {
        return s;
    }
    let keep = |name: &str| options.devices.as_ref().is_none_or(|d| d.iter().any(|x| x == name));
    let mut device_names: Vec<String> = Vec::new();
    for o in observations {
        for d in &o.devices {
            if keep(&d.name) && !device_names.contains(&d.name) {
                device_names.push(d.name.clone());
            }
        }
    }
    let nd = device_names.len();
    let mut busy_ms = vec![0u64; nd];
    let mut ios = vec![0u64; nd];
    let mut sectors = vec![0u64; nd];
    let (mut wall_ns, mut ticks_total) = (0u64, 0u64);
    let mut sum = CpuTimes::default();
    let (mut a_sum, mut b_sum, mut ab_sum) = (0.0, 0.0, 0.0);
    let (mut target_ticks, mut children_ticks) = (0u64, 0u64);
    let mut weight_sum = 0.0;
    for w in observations.windows(2) {
        let (p, o) = (&w[0], &w[1]);
        let dt_ns = o.time_ns.saturating_sub(p.time_ns);
        let d = o.cpu.minus(&p.cpu);
        let total = d.total();
        if dt_ns == 0 {
            continue;
        }
        wall_ns += dt_ns;
        ticks_total += total;
        sum = CpuTimes {
            user: sum.user + d.user,
            nice: sum.nice + d.nice,
            system: sum.system + d.system,
            idle: sum.idle + d.idle,
            iowait: sum.iowait + d.iowait,
            irq: sum.irq + d.irq,
            softirq: sum.softirq + d.softirq,
            steal: sum.steal + d.steal,
        };
        // a: CPU busy fraction (ticks are coarse: an interval with no tick is skipped for a).
        let a = if total > 0 { (d.user_state() + d.kernel_state()) as f64 / total as f64 } else { 0.0 };
        let mut per_dev = Vec::with_capacity(nd);
        let mut b: f64 = 0.0;
        for (k, name) in device_names.iter().enumerate() {
            let cur = o.devices.iter().find(|x| &x.name == name);
            let prev = p.devices.iter().find(|x| &x.name == name);
            let (db, di, ds) = match (cur, prev) {
                (Some(c), Some(q)) => (c.busy_ms.saturating_sub(q.busy_ms), c.ios.saturating_sub(q.ios), c.sectors.saturating_sub(q.sectors)),
                _ => (0, 0, 0),
            };
            busy_ms[k] += db;
            ios[k] += di;
            sectors[k] += ds;
            let frac = (db as f64 * 1e6 / dt_ns as f64).min(1.0);
            per_dev.push(frac * 100.0);
            b = b.max(frac);
        }
        let wt = dt_ns as f64;
        weight_sum += wt;
        a_sum += a * wt;
        b_sum += b * wt;
        ab_sum += a * b * wt;
        if let (Some(pt), Some(ot)) = (&p.target, &o.target) {
            target_ticks += ot.target_ticks.saturating_sub(pt.target_ticks);
            children_ticks += ot.children_ticks.saturating_sub(pt.children_ticks);
        }
        let pct = |x: u64| if total > 0 { x as f64 * 100.0 / total as f64 } else { 0.0 };
        s.series.push(IntervalFigures {
            t_s: o.time_ns as f64 / 1e9,
            cpu_active: a * 100.0,
            user_state: pct(d.user_state()),
            kernel_state: pct(d.kernel_state()),
            iowait: pct(d.iowait),
            io_busy: b * 100.0,
            cpu_only: (a - a * b) * 100.0,
            cpu_io_overlap: a * b * 100.0,
            io_only: (b - a * b) * 100.0,
            cpu_wait: pct(d.idle + d.iowait + d.steal),
            devices: per_dev,
        });
    }
    s.measured_s = wall_ns as f64 / 1e9;
    let pct_ticks = |x: u64| if ticks_total > 0 { x as f64 * 100.0 / ticks_total as f64 } else { 0.0 };
    let (a, b, ab) = if weight_sum > 0.0 { (a_sum / weight_sum, b_sum / weight_sum, ab_sum / weight_sum) } else { (0.0, 0.0, 0.0) };
    s.eight = EightItems {
        // CPU active from the tick totals (exact sums), the split with I/O from the
        // per-interval products.
        cpu_active: pct_ticks(sum.user_state() + sum.kernel_state()),
        cpu_only: (a - ab) * 100.0,
        cpu_io_overlap: ab * 100.0,
        io_only: (b - ab) * 100.0,
        io_busy: b * 100.0,
        cpu_wait: pct_ticks(sum.idle + sum.iowait + sum.steal),
        user_state: pct_ticks(sum.user_state()),
        kernel_state: pct_ticks(sum.kernel_state()),
    };
    s.idle = pct_ticks(sum.idle);
    s.iowait = pct_ticks(sum.iowait);
    s.steal = pct_ticks(sum.steal);
    if observations.iter().any(|o| o.target.is_some()) {
        let active = sum.user_state() + sum.kernel_state();
        let rest = active.saturating_sub(target_ticks + children_ticks);
        s.programs = vec![
            Share { name: "target".into(), percent: pct_ticks(target_ticks), count: target_ticks },
            Share { name: "children of target".into(), percent: pct_ticks(children_ticks), count: children_ticks },
            Share { name: "rest of the system".into(), percent: pct_ticks(rest), count: rest },
        ];
    }
    let total_ios: u64 = ios.iter().sum();
    s.devices = device_names
        .iter()
        .enumerate()
        .map(|(k, name)| DeviceShare {
            name: name.clone(),
            busy_percent: if wall_ns > 0 { (busy_ms[k] as f64 * 1e6 / wall_ns as f64 * 100.0).min(100.0) } else { 0.0 },
            io_share_percent: if total_ios > 0 { ios[k] as f64 * 100.0 / total_ios as f64 } else { 0.0 },
            ios: ios[k],
            sectors: sectors[k],
        })
        .collect();
    let mut functions: BTreeMap<&str, u64> = BTreeMap::new();
    for o in observations {
        for f in &o.functions {
            *functions.entry(f).or_default() += 1;
        }
        if let Some(t) = &o.target {
            for (_, state) in &t.threads {
                *s.thread_states.entry(*state).or_default() += 1;
            }
        }
    }
    s.function_samples = functions.values().sum();
    s.functions = functions
        .into_iter()
        .map(|(name, count)| Share { name: name.to_string(), percent: count as f64 * 100.0 / s.function_samples.max(1) as f64, count })
        .collect();
    s.functions.sort_by(|a, b| b.count.cmp(&a.count).then(a.name.cmp(&b.name)));
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn obs(t_ms: u64, user: u64, system: u64, idle: u64, iowait: u64, busy_ms: u64, ios: u64) -> Observation {
        Observation {
            time_ns: t_ms * 1_000_000,
            cpu: CpuTimes { user, system, idle, iowait, ..CpuTimes::default() },
            devices: vec![DeviceTimes { name: "vda".into(), busy_ms, ios, sectors: ios * 8 }],
            target: None,
            functions: vec![],
        }
    }

    #[test]
    fn cpu_bound_intervals_are_cpu_only() {
        // 2 CPUs, 100 ticks/s: each 100 ms interval has 20 ticks; one CPU busy in user mode.
        let o: Vec<_> = (0..=10).map(|i| obs(i * 100, i * 10, 0, i * 10, 0, 0, 0)).collect();
        let s = summarise(&o, &SummaryOptions::default());
        assert_eq!(s.series.len(), 10);
        assert!((s.eight.cpu_active - 50.0).abs() < 1e-9);
        assert!((s.eight.cpu_only - 50.0).abs() < 1e-9);
        assert_eq!(s.eight.io_busy, 0.0);
        assert!((s.eight.cpu_wait - 50.0).abs() < 1e-9);
        assert!((s.eight.user_state - 50.0).abs() < 1e-9);
        assert!((s.measured_s - 1.0).abs() < 1e-12);
    }

    #[test]
    fn io_bound_intervals_are_io_only() {
        // The device is busy 90 ms of every 100 ms; the CPUs are 5% busy in the kernel.
        let o: Vec<_> = (0..=10).map(|i| obs(i * 100, 0, i, i * 10, i * 9, i * 90, i * 30)).collect();
        let s = summarise(&o, &SummaryOptions::default());
        assert!((s.eight.io_busy - 90.0).abs() < 1e-9);
        assert!((s.eight.cpu_active - 5.0).abs() < 1e-9);
        assert!((s.eight.cpu_io_overlap - 4.5).abs() < 1e-9);
        assert!((s.eight.io_only - 85.5).abs() < 1e-9);
        assert!((s.eight.cpu_only - 0.5).abs() < 1e-9);
        assert!((s.iowait - 45.0).abs() < 1e-9);
        assert_eq!(s.devices[0].ios, 300);
        assert!((s.devices[0].io_share_percent - 100.0).abs() < 1e-9);
        // The identities of the seed's items hold.
        let e = s.eight;
        assert!((e.cpu_only + e.cpu_io_overlap - e.cpu_active).abs() < 1e-9);
        assert!((e.io_only + e.cpu_io_overlap - e.io_busy).abs() < 1e-9);
        assert!((e.cpu_active + e.cpu_wait - 100.0).abs() < 1e-9);
        assert!((e.user_state + e.kernel_state - e.cpu_active).abs() < 1e-9);
    }

    #[test]
    fn program_and_function_shares() {
        let mut o: Vec<_> = (0..=4).map(|i| obs(i * 100, i * 20, 0, 0, 0, 0, 0)).collect();
        for (i, x) in o.iter_mut().enumerate() {
            let i = i as u64;
            x.target = Some(TargetTimes { pid: 7, target_ticks: i * 10, children_ticks: i * 5, threads: vec![(7, 'R')] });
            x.functions = if i == 0 { vec![] } else { vec!["f".into(), "f".into(), "g".into()] };
        }
        let s = summarise(&o, &SummaryOptions::default());
        assert_eq!(s.programs[0].percent, 50.0);
        assert_eq!(s.programs[1].percent, 25.0);
        assert_eq!(s.programs[2].percent, 25.0);
        assert_eq!(s.functions[0].name, "f");
        assert!((s.functions[0].percent - 200.0 / 3.0).abs() < 1e-9);
        assert_eq!(s.thread_states[&'R'], 5);
    }

    #[test]
    fn fewer_than_two_observations_measure_nothing() {
        let s = summarise(&[obs(0, 1, 1, 1, 1, 1, 1)], &SummaryOptions::default());
        assert_eq!(s.measured_s, 0.0);
        assert!(s.series.is_empty());
    }
}
