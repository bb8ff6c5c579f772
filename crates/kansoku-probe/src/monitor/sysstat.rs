//! Readers of the system-wide and per-process counters the monitor samples:
//! `/proc/stat` (CPU time), `/proc/diskstats` (device busy time), `/proc/PID/stat` and
//! `/proc/PID/task/*/stat` (a process's CPU time, its threads' states, its children).
//!
//! Each reader returns cumulative counters as [`kansoku_monitor::sampling`] wants them;
//! the analysis differences them.

use std::path::Path;

use kansoku_monitor::sampling::{CpuTimes, DeviceTimes, TargetTimes};

use crate::ProbeError;

/// The `cpu` line of `/proc/stat` text.
pub(crate) fn parse_cpu_times(stat: &str) -> Option<CpuTimes> {
    let line = stat.lines().find(|l| l.starts_with("cpu "))?;
    let v: Vec<u64> = line.split_whitespace().skip(1).filter_map(|x| x.parse().ok()).collect();
    let g = |i: usize| v.get(i).copied().unwrap_or(0);
    // user nice system idle iowait irq softirq steal guest guest_nice (guest is inside user)
    Some(CpuTimes { user: g(0), nice: g(1), system: g(2), idle: g(3), iowait: g(4), irq: g(5), softirq: g(6), steal: g(7) })
}

/// Reads `/proc/stat`.
pub(crate) fn read_cpu_times() -> Result<CpuTimes, ProbeError> {
    let text = std::fs::read_to_string("/proc/stat").map_err(|source| ProbeError::Proc { pid: 0, file: "stat (system)", cause: source })?;
    parse_cpu_times(&text).ok_or_else(|| ProbeError::Proc {
        pid: 0,
        file: "stat (system)",
        cause: std::io::Error::new(std::io::ErrorKind::InvalidData, "no 'cpu' line"),
    })
}

/// `/proc/diskstats` text → whole block devices (names listed in `/sys/block`, or all
/// lines when `whole` is `None`). Partitions are left out: their busy time is inside their
/// disk's.
pub(crate) fn parse_diskstats(text: &str, whole: Option<&[String]>) -> Vec<DeviceTimes> {
    text.lines()
        .filter_map(|line| {
            let f: Vec<&str> = line.split_whitespace().collect();
            let name = *f.get(2)?;
            if let Some(w) = whole {
                if !w.iter().any(|x| x == name) {
                    return None;
                }
            }
            let n = |i: usize| f.get(i).and_then(|x| x.parse::<u64>().ok()).unwrap_or(0);
            // 3 reads, 5 sectors read, 7 writes, 9 sectors written, 12 io_ticks;
            // 14 discards, 16 sectors discarded, 18 flushes (newer kernels).
            Some(DeviceTimes { name: name.to_string(), busy_ms: n(12), ios: n(3) + n(7) + n(14) + n(18), sectors: n(5) + n(9) + n(16) })
        })
        .collect()
}

/// The whole block devices worth watching: `/sys/block` minus loop/ram/zram devices
/// that have never done any I/O.
pub(crate) fn block_devices() -> Vec<String> {
    let mut out: Vec<String> = std::fs::read_dir("/sys/block")
        .map(|d| d.filter_map(|e| e.ok()).map(|e| e.file_name().to_string_lossy().into_owned()).collect())
        .unwrap_or_default();
    out.sort();
    out
}

/// Reads `/proc/diskstats` for `devices`.
pub(crate) fn read_devices(devices: &[String]) -> Result<Vec<DeviceTimes>, ProbeError> {
    let text = std::fs::read_to_string("/proc/diskstats").map_err(|source| ProbeError::Proc { pid: 0, file: "diskstats", cause: source })?;
    Ok(parse_diskstats(&text, Some(devices)))
}

/// Fields of `/proc/PID/stat` after the command name: state, ppid, utime, stime,
/// cutime, cstime.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct ProcStat {
    /// Scheduler state letter: `R` running, `S` sleeping, `D` disk wait, `T` stopped, `Z` zombie...
    pub state: char,
    /// Parent process id (used to find the target's children).
    pub ppid: i32,
    /// CPU time in user mode, in clock ticks (`sysconf(_SC_CLK_TCK)`, usually 1/100 s).
    pub utime: u64,
    /// CPU time in kernel mode, in clock ticks.
    pub stime: u64,
    /// User-mode clock ticks of waited-for children (negative values read as 0).
    pub cutime: u64,
    /// Kernel-mode clock ticks of waited-for children (negative values read as 0).
    pub cstime: u64,
}

/// Parses `/proc/PID/stat` text (the command name may contain spaces and parentheses).
pub(crate) fn parse_proc_stat(text: &str) -> Option<ProcStat> {
    let rest = &text[text.rfind(')')? + 1..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    // After ')': state(0) ppid(1) pgrp session tty tpgid flags minflt cminflt majflt cmajflt
    // utime(11) stime(12) cutime(13) cstime(14)
    let n = |i: usize| f.get(i).and_then(|x| x.parse::<i64>().ok());
    Some(ProcStat {
        state: f.first()?.chars().next()?,
        ppid: n(1)? as i32,
        utime: n(11)? as u64,
        stime: n(12)? as u64,
        cutime: n(13)?.max(0) as u64,
        cstime: n(14)?.max(0) as u64,
    })
}

fn read_stat(path: &Path) -> Option<ProcStat> {
    parse_proc_stat(&std::fs::read_to_string(path).ok()?)
}

/// Does process `pid` exist (and is it not yet reaped)?
pub(crate) fn process_exists(pid: i32) -> bool {
    Path::new(&format!("/proc/{pid}/stat")).exists()
}

/// Reads the target's CPU ticks, its descendants' ticks and its threads' states.
/// `Ok(None)` when the process has gone (or is a zombie: it will not run again).
pub(crate) fn read_target(pid: i32) -> Result<Option<TargetTimes>, ProbeError> {
    let Some(main) = read_stat(Path::new(&format!("/proc/{pid}/stat"))) else { return Ok(None) };
    if main.state == 'Z' || main.state == 'X' {
        return Ok(None);
    }
    let mut threads = Vec::new();
    if let Ok(dir) = std::fs::read_dir(format!("/proc/{pid}/task")) {
        for e in dir.flatten() {
            let Ok(tid) = e.file_name().to_string_lossy().parse::<i32>() else { continue };
            if let Some(s) = read_stat(&e.path().join("stat")) {
                threads.push((tid, s.state));
            }
        }
    }
    threads.sort();
    // Descendants: walk /proc once, build the parent relation, collect pid's subtree.
    let mut parent_of = Vec::new();
    if let Ok(dir) = std::fs::read_dir("/proc") {
        for e in dir.flatten() {
            let Ok(p) = e.file_name().to_string_lossy().parse::<i32>() else { continue };
            if let Some(s) = read_stat(&e.path().join("stat")) {
                parent_of.push((p, s));
            }
        }
    }
    let mut subtree = vec![pid];
    let mut children_ticks = main.cutime + main.cstime;
    let mut i = 0;
    while i < subtree.len() {
        let parent = subtree[i];
        for (p, s) in &parent_of {
            if s.ppid == parent && !subtree.contains(p) {
                subtree.push(*p);
                // A live child's own time, plus what its reaped children left to it —
                // but those are counted when the grandchild was alive only if we saw it,
                // so take the child's cutime too (a reaped grandchild is gone from /proc).
                children_ticks += s.utime + s.stime + s.cutime + s.cstime;
            }
        }
        i += 1;
    }
    Ok(Some(TargetTimes { pid, target_ticks: main.utime + main.stime, children_ticks, threads }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_proc_stat_with_odd_names() {
        let s = "1234 (a (b) c) S 1 1234 1234 0 -1 4194304 100 0 0 0 17 3 5 2 20 0 1 0 100 0 0";
        let p = parse_proc_stat(s).unwrap();
        assert_eq!(p, ProcStat { state: 'S', ppid: 1, utime: 17, stime: 3, cutime: 5, cstime: 2 });
    }

    #[test]
    fn parses_cpu_line_and_diskstats() {
        let c = parse_cpu_times("cpu  10 1 5 100 7 0 2 3 0 0\ncpu0 1 1 1 1 1 1 1 1 0 0\n").unwrap();
        assert_eq!(c.total(), 128);
        assert_eq!(c.kernel_state(), 7);
        let d = parse_diskstats(
            " 254       0 vda 351904 9161 16110442 693175 26671 39744 35722712 127694 0 25640 823767 10550 28 11938648 2868 787 29\n 254 1 vda1 1 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0\n",
            Some(&["vda".to_string()]),
        );
        assert_eq!(d.len(), 1);
        assert_eq!(d[0].busy_ms, 25640);
        assert_eq!(d[0].ios, 351904 + 26671 + 10550 + 787);
    }
}

/// Takes [`Observation`](kansoku_monitor::sampling::Observation)s of the system and,
/// optionally, a target process: CPU time, devices, the target's ticks and threads, and
/// the functions a perf `cpu-clock` sampler saw the target's threads executing since the
/// previous observation.
pub struct Monitor {
    start: std::time::Instant,
    devices: Vec<String>,
    target: Option<i32>,
    sessions: Vec<crate::perf::Session>,
    /// One per process seen in samples: the target, and with following its children.
    symbolizers: std::collections::HashMap<u32, kansoku_binary::Symbolizer>,
    modules: crate::procfs::ModuleReader,
    /// Why functions are not sampled, if they are not (e.g. perf refused).
    pub function_sampling_problem: Option<String>,
    /// Why threads or children started later are not sampled, if they are not.
    pub follow_problem: Option<String>,
    /// Samples the kernel dropped because a perf ring buffer was full, summed over every session.
    pub lost_samples: u64,
    /// Samples of processes that ended before their memory map could be read: counted,
    /// not named.
    pub unattributed_samples: u64,
}

/// How the target is observed.
#[derive(Clone, Copy, Debug)]
pub enum TargetStart {
    /// A running process: its current threads are sampled from now on (threads and
    /// children it starts later are not).
    Attach,
    /// A gated child ([`crate::spawn::ExecGate`]) not yet exec'd: sampling starts at exec.
    AtExec,
}

impl Monitor {
    /// Starts observing. `sample_period_ns` is the perf cpu-clock period for function
    /// sampling (`None`: no function sampling). A target that does not exist is an error;
    /// perf refusing to sample it is not (the problem is kept in
    /// `function_sampling_problem` and the /proc figures are still taken).
    /// `follow`: with [`TargetStart::AtExec`], also sample every thread and child process
    /// the program starts (one inherited session per CPU).
    pub fn new(target: Option<(i32, TargetStart)>, sample_period_ns: Option<u64>, follow: bool) -> Result<Monitor, ProbeError> {
        let mut m = Monitor {
            start: std::time::Instant::now(),
            devices: block_devices(),
            target: target.map(|t| t.0),
            sessions: Vec::new(),
            symbolizers: std::collections::HashMap::new(),
            modules: crate::procfs::ModuleReader::default(),
            function_sampling_problem: None,
            follow_problem: None,
            lost_samples: 0,
            unattributed_samples: 0,
        };
        if let Some((pid, how)) = target {
            if !process_exists(pid) {
                return Err(ProbeError::NoSuchProcess { pid });
            }
            if let Some(period_ns) = sample_period_ns {
                m.open_sessions(pid, how, period_ns, follow);
            }
        }
        Ok(m)
    }

    /// Opens the function sampler: per CPU and inherited when following a program we
    /// start, else one session per existing thread.
    fn open_sessions(&mut self, pid: i32, how: TargetStart, period_ns: u64, follow: bool) {
        let options = |inherit_on_cpu| crate::perf::SessionOptions {
            clock: crate::perf::SamplingClock::CpuClock { period_ns },
            enable_on_exec: matches!(how, TargetStart::AtExec),
            buffer_pages: 64,
            inherit_on_cpu,
            ..Default::default()
        };
        if follow && matches!(how, TargetStart::AtExec) {
            let mut opened = Vec::new();
            for cpu in crate::perf::online_cpus() {
                match crate::perf::Session::open(pid, &options(Some(cpu))) {
                    Ok(s) => opened.push(s),
                    Err(e) => {
                        self.follow_problem = Some(format!("threads and child processes are not sampled (inherited sampling refused: {e}); only the first thread is"));
                        opened.clear();
                        break;
                    }
                }
            }
            if !opened.is_empty() {
                self.sessions = opened;
                return;
            }
        } else if matches!(how, TargetStart::Attach) {
            self.follow_problem = Some(format!("threads and child processes that process {pid} starts after kansoku attached are not sampled"));
        } else {
            self.follow_problem = Some("threads and child processes are not sampled (--follow off)".into());
        }
        let tids: Vec<i32> = match how {
            TargetStart::AtExec => vec![pid],
            TargetStart::Attach => read_target(pid).ok().flatten().map(|t| t.threads.iter().map(|x| x.0).collect()).unwrap_or_default(),
        };
        for tid in tids {
            match crate::perf::Session::open(tid, &options(None)) {
                Ok(s) => {
                    if matches!(how, TargetStart::Attach) {
                        s.enable();
                    }
                    self.sessions.push(s);
                }
                Err(e) => {
                    self.function_sampling_problem = Some(format!("functions of process {pid} are not sampled: {e}"));
                    break;
                }
            }
        }
    }

    /// The target being observed.
    pub fn target(&self) -> Option<i32> {
        self.target
    }

    /// One observation now.
    pub fn observe(&mut self) -> Result<kansoku_monitor::sampling::Observation, ProbeError> {
        let time_ns = self.start.elapsed().as_nanos() as u64;
        let cpu = read_cpu_times()?;
        let devices = read_devices(&self.devices)?;
        let target = match self.target {
            Some(pid) => read_target(pid)?,
            None => None,
        };
        let mut samples = Vec::new();
        for s in &mut self.sessions {
            s.drain(&mut |r| {
                if let crate::perf::PerfRecord::Sample(x) = r {
                    samples.push((x.pid, x.ip));
                }
            });
        }
        self.lost_samples = self.sessions.iter().map(|s| s.lost).sum();
        let mut functions = Vec::with_capacity(samples.len());
        for (pid, ip) in samples {
            match self.name_of(pid, ip) {
                Some(name) => functions.push(name),
                None => self.unattributed_samples += 1,
            }
        }
        Ok(kansoku_monitor::sampling::Observation { time_ns, cpu, devices, target, functions })
    }

    /// The function at `ip` in process `pid`, read from its memory map (again when `ip`
    /// lies in nothing mapped so far: a library loaded later, or a new program after exec).
    /// A child process's functions carry its program's name: `deflate (gzip)`. `None`
    /// when the process ended before its map was read.
    fn name_of(&mut self, pid: u32, ip: u64) -> Option<String> {
        let symbolizer = self.symbolizers.entry(pid).or_insert_with(|| kansoku_binary::Symbolizer::new(&[]));
        if symbolizer.module_of(ip).is_none() {
            if let Ok(mods) = self.modules.code_modules(pid as i32) {
                for m in mods {
                    if !symbolizer.modules().iter().any(|k| k.start == m.start && k.path == m.path) {
                        symbolizer.add_module(m);
                    }
                }
            }
        }
        let name = match symbolizer.name(ip) {
            Some(r) => match r.function {
                Some(f) => f,
                None => format!("{}+0x{:x}", short_path(&symbolizer.modules()[r.module].path), r.link_address),
            },
            None if symbolizer.modules().is_empty() => return None,
            None => format!("0x{ip:x}"),
        };
        if self.target == Some(pid as i32) {
            return Some(name);
        }
        let program = symbolizer.modules().first().map(|m| short_path(&m.path).to_string()).unwrap_or_default();
        Some(format!("{name} ({program})"))
    }
}

fn short_path(p: &str) -> &str {
    p.rsplit('/').next().unwrap_or(p)
}

/// What a monitored run watches and for how long.
pub struct Watch {
    /// Time between observations.
    pub interval: std::time::Duration,
    /// The program kansoku started (it is waited for and its exit status kept).
    pub child: Option<nix::unistd::Pid>,
    /// End after this many seconds.
    pub duration: Option<f64>,
}

/// Why a monitored run ended.
#[derive(Clone, Debug, PartialEq)]
pub enum RunEnd {
    /// The program kansoku started ended so.
    ProgramEnded(kansoku_core::ExitStatus),
    /// The observed process (not a child of kansoku's) is gone, this many seconds in.
    TargetGone {
        /// The process that was observed.
        pid: i32,
        /// Seconds from the start of observing until it was found gone.
        after_s: f64,
    },
    /// Ctrl-C or SIGTERM; the program kansoku started got the request and ended so.
    Interrupted(Option<kansoku_core::ExitStatus>),
    /// The requested duration elapsed.
    DurationElapsed(f64),
}

/// Observes every `interval` until the program ends, the target is gone, the user asks
/// to stop, or the duration elapses; `stopped` is told each time the program is stopped
/// by a signal (once per stop). The observations, the first taken at once, and why it ended.
pub fn observe_run(
    monitor: &mut Monitor,
    watch: &Watch,
    stopped: &mut dyn FnMut(i32),
) -> Result<(Vec<kansoku_monitor::sampling::Observation>, RunEnd), ProbeError> {
    use kansoku_core::ExitStatus;
    use nix::sys::wait::{waitpid, WaitPidFlag, WaitStatus};
    let start = std::time::Instant::now();
    let mut observations = vec![monitor.observe()?];
    let mut next = start + watch.interval;
    let end = loop {
        let now = std::time::Instant::now();
        if next > now {
            std::thread::sleep(next - now);
        }
        next += watch.interval;
        let o = monitor.observe()?;
        let gone = monitor.target.is_some() && o.target.is_none();
        observations.push(o);
        if let Some(c) = watch.child {
            // errors (ECHILD after the child was reaped elsewhere) leave the /proc check to tell
            match waitpid(c, Some(WaitPidFlag::WNOHANG | WaitPidFlag::WUNTRACED)) {
                // said once per stop: waitpid reports a stop once
                Ok(WaitStatus::Stopped(_, sig)) => stopped(sig as i32),
                Ok(WaitStatus::Exited(_, code)) => break RunEnd::ProgramEnded(ExitStatus::Exited(code)),
                Ok(WaitStatus::Signaled(_, sig, _)) => break RunEnd::ProgramEnded(ExitStatus::Killed(sig as i32)),
                _ => {}
            }
        }
        if gone {
            break RunEnd::TargetGone { pid: monitor.target.unwrap_or_default(), after_s: start.elapsed().as_secs_f64() };
        }
        if crate::interrupt::requested() {
            let Some(c) = watch.child else { break RunEnd::Interrupted(None) };
            // the program gets the request and ends as it chooses; kansoku ends as it did
            crate::interrupt::forward(c.as_raw());
            let exit = match crate::spawn::wait_retrying(c, None) {
                Ok(WaitStatus::Exited(_, code)) => Some(ExitStatus::Exited(code)),
                Ok(WaitStatus::Signaled(_, sig, _)) => Some(ExitStatus::Killed(sig as i32)),
                _ => None,
            };
            break RunEnd::Interrupted(exit);
        }
        if let Some(d) = watch.duration.filter(|&d| start.elapsed().as_secs_f64() >= d) {
            break RunEnd::DurationElapsed(d);
        }
    };
    Ok((observations, end))
}
