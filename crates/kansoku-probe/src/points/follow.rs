//! kansoku's side of the functions of whatever program runs (issue 44).
//!
//! A shim that builds its program's path at run time (pyenv's `python3`: `exec
//! "/root/.pyenv/libexec/pyenv" exec "$program" "$@"`) names its program in no text
//! kansoku can read before the run. Such a probe is planned in
//! [`agent_abi::ANY_PROGRAM`]; every process that loads the agent asks where those
//! functions are in it ([`agent_abi::Ask`]), and waits, bounded, while kansoku's
//! [`Resolver`] answers from its poll loop: it checks that the asking pid is a process of
//! the run, reads that process's `/proc/PID/exe` and maps (never a path the program
//! wrote), looks the functions up with kansoku-binary (symbol tables, detached debug files)
//! in the program and then in the files it has mapped code of (the libraries loaded at
//! start, in load order), and answers with runtime addresses. Each file is read once a run.
//! The agent plants them and says what became of each; the report names the process and
//! the program each was planted in. Everything read from the slots is outside input: an
//! unknown state, a result for a question not asked, a pid outside the run are said, and
//! the work per poll is bounded (16 slots, files cached).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;

use kansoku_binary::Program;
use kansoku_core::agent_abi::{self, Ask, Control, ASK_ABANDONED, ASK_ANSWERED, ASK_ASKED, ASK_CLAIMED, ASK_FREE, ASK_PLANTED, MAX_ASKS, MAX_DEFERRED};

/// Statements kept of each kind (notes, inconsistencies): a program that writes the slots
/// in a loop gets the first few said and a count, not unbounded memory.
const MAX_SAID: usize = 16;
/// Distinct (function, program, library, outcome) records kept.
const MAX_RECORDS: usize = 256;
/// Pids named per record.
const PIDS_NAMED: usize = 4;
/// Files looked at per question (a process maps a few dozen).
const MAX_FILES: usize = 512;

/// Where a function is in a file: its file offset and size, per name asked.
type Found = Vec<Option<(u64, u64)>>;

/// A question answered, waiting for the agent's word on what it planted.
struct Pending {
    pid: u32,
    program: PathBuf,
    /// Per function, the file kansoku found it in (None: not in this process).
    found_in: Vec<Option<PathBuf>>,
}

/// Where a function was planted (or refused) in the processes of the run, one record per
/// (function, program, file, outcome).
#[derive(Clone, Debug)]
pub(crate) struct Planting {
    /// Index into the names asked.
    pub(crate) name: usize,
    /// The process's program (`/proc/PID/exe`).
    pub(crate) program: PathBuf,
    /// The file the function is in: the program or a library it loaded.
    pub(crate) file: PathBuf,
    /// `POINT_*` as the agent wrote it.
    pub(crate) state: u32,
    /// For a refusal, the `REFUSE_*` code.
    pub(crate) reason: u32,
    /// The first processes' pids.
    pub(crate) pids: Vec<u32>,
    /// Processes in all.
    pub(crate) processes: u64,
}

/// Answers the agents' questions during one run.
pub(crate) struct Resolver {
    /// The functions of [`agent_abi::ANY_PROGRAM`], in the order of their plan lines.
    names: Vec<String>,
    /// The program kansoku started: every asking process must descend from it.
    child: u32,
    /// The agent's own library, never searched.
    agent: PathBuf,
    files: HashMap<(u64, u64), Found>,
    pending: Vec<Option<Pending>>,
    pub(crate) planted: Vec<Planting>,
    /// The programs of the processes that asked, in order (the first 32).
    pub(crate) looked_in: Vec<PathBuf>,
    pub(crate) notes: Vec<String>,
    pub(crate) broken: Vec<String>,
    /// Statements not kept (past [`MAX_SAID`]).
    pub(crate) unsaid: u64,
}

impl Resolver {
    pub(crate) fn new(names: Vec<String>, child: u32, agent: PathBuf) -> Resolver {
        Resolver { names, child, agent, files: HashMap::new(), pending: (0..MAX_ASKS).map(|_| None).collect(), planted: Vec::new(), looked_in: Vec::new(), notes: Vec::new(), broken: Vec::new(), unsaid: 0 }
    }

    fn say(list: &mut Vec<String>, unsaid: &mut u64, what: String) {
        if list.len() < MAX_SAID {
            list.push(what);
        } else {
            *unsaid += 1;
        }
    }

    /// Answers every question asked since the last call and takes in what the agents
    /// planted. Bounded: one pass over the slots.
    pub(crate) fn serve(&mut self, control: &Control) {
        if self.names.is_empty() {
            return;
        }
        for (k, a) in control.asks.iter().enumerate() {
            match a.state.load(Ordering::Acquire) {
                ASK_FREE | ASK_CLAIMED | ASK_ANSWERED => {}
                ASK_ASKED => self.answer(k, a),
                ASK_PLANTED => {
                    match self.pending[k].take() {
                        Some(p) => self.take_in(k, a, p),
                        None => Self::say(&mut self.broken, &mut self.unsaid, format!("ask slot {k} reads \"planted\" for a question kansoku did not answer")),
                    }
                    a.state.store(ASK_FREE, Ordering::Release);
                }
                ASK_ABANDONED => {
                    let pid = self.pending[k].take().map_or(a.pid.load(Ordering::Relaxed), |p| p.pid);
                    Self::say(&mut self.notes, &mut self.unsaid, format!("process {pid} stopped waiting for kansoku to say where the probed functions are in it ({} ms): they were not probed there", agent_abi::HOLD_LIMIT_MS));
                    a.state.store(ASK_FREE, Ordering::Release);
                }
                other => {
                    Self::say(&mut self.broken, &mut self.unsaid, format!("ask slot {k} reads state {other}, which neither kansoku nor the agent writes"));
                    self.pending[k] = None;
                    a.state.store(ASK_FREE, Ordering::Release);
                }
            }
        }
    }

    fn answer(&mut self, k: usize, a: &Ask) {
        let pid = a.pid.load(Ordering::Relaxed);
        let found = match self.locate(pid) {
            Ok(found) => found,
            Err(why) => {
                Self::say(&mut self.notes, &mut self.unsaid, why);
                (PathBuf::new(), vec![None; self.names.len()])
            }
        };
        for j in 0..MAX_DEFERRED {
            let (address, size) = found.1.get(j).and_then(Option::as_ref).map_or((0, 0), |(a, s, _)| (*a, *s));
            a.address[j].store(address, Ordering::Relaxed);
            a.size[j].store(size, Ordering::Relaxed);
        }
        // (a failed exchange: the agent gave up meanwhile, and the next pass frees the slot)
        if a.state.compare_exchange(ASK_ASKED, ASK_ANSWERED, Ordering::AcqRel, Ordering::Acquire).is_ok() {
            let found_in = found.1.into_iter().map(|f| f.map(|(_, _, file)| file)).collect();
            self.pending[k] = Some(Pending { pid, program: found.0, found_in });
        }
    }

    /// Where each function is in process `pid`: its program, and per function the runtime
    /// address, size and file.
    #[allow(clippy::type_complexity)]
    fn locate(&mut self, pid: u32) -> Result<(PathBuf, Vec<Option<(u64, u64, PathBuf)>>), String> {
        if !self.in_run(pid) {
            return Err(format!("an agent asked for process {pid}, which is not one of the run's (its parents do not lead to process {}): not answered", self.child));
        }
        let program = std::fs::read_link(format!("/proc/{pid}/exe")).map_err(|e| format!("process {pid} asked where the probed functions are, and its program could not be read: {e}"))?;
        let maps = crate::procfs::read_maps(pid as i32).map_err(|e| format!("process {pid} asked where the probed functions are, and its maps could not be read: {e}"))?;
        if self.looked_in.len() < 32 && !self.looked_in.contains(&program) {
            self.looked_in.push(program.clone());
        }
        // the program first, then each file it has code mapped from, in load order
        let mut files: Vec<PathBuf> = vec![program.clone()];
        for m in maps.iter().filter(|m| m.is_executable() && m.path.starts_with('/')) {
            let path = PathBuf::from(&m.path);
            if files.len() < MAX_FILES && !files.contains(&path) && path != self.agent {
                files.push(path);
            }
        }
        let mut answer: Vec<Option<(u64, u64, PathBuf)>> = vec![None; self.names.len()];
        for file in files {
            if answer.iter().all(Option::is_some) {
                break;
            }
            let found = self.found_in(&file);
            let path = file.to_string_lossy();
            for (j, slot) in answer.iter_mut().enumerate().filter(|(_, s)| s.is_none()) {
                let Some((offset, size)) = found.get(j).copied().flatten() else { continue };
                // the executable mapping of that file that holds the offset
                let at = maps.iter().find(|m| m.is_executable() && m.path == path && m.file_offset <= offset && offset - m.file_offset < m.end - m.start);
                if let Some(m) = at {
                    *slot = Some((m.start + (offset - m.file_offset), size, file.clone()));
                }
            }
        }
        Ok((program, answer))
    }

    /// The functions asked for in `file`, read once a run (by the file's identity).
    fn found_in(&mut self, file: &Path) -> Found {
        use std::os::unix::fs::MetadataExt;
        let Ok(meta) = std::fs::metadata(file) else { return vec![None; self.names.len()] };
        let names = &self.names;
        self.files
            .entry((meta.dev(), meta.ino()))
            .or_insert_with(|| match Program::open(file) {
                Ok(program) => names
                    .iter()
                    .map(|name| {
                        // a GNU IFUNC's symbol is its resolver, not the function: not taken
                        if program.ifunc_named(name).is_some() {
                            return None;
                        }
                        let f = program.function_named(name).ok()?;
                        Some((program.file_offset_of_vaddr(f.address)?, f.size))
                    })
                    .collect(),
                Err(_) => vec![None; names.len()],
            })
            .clone()
    }

    /// Whether `pid`'s parents lead to the program kansoku started (bounded: 256 steps).
    fn in_run(&self, pid: u32) -> bool {
        let mut p = pid;
        for _ in 0..256 {
            if p == self.child {
                return true;
            }
            if p <= 1 {
                return false;
            }
            let Ok(stat) = std::fs::read_to_string(format!("/proc/{p}/stat")) else { return false };
            // `PID (COMM) STATE PPID …`: the name may hold anything, up to the last ')'
            let Some(ppid) = stat.rsplit_once(')').and_then(|(_, rest)| rest.split_whitespace().nth(1)).and_then(|s| s.parse().ok()) else { return false };
            p = ppid;
        }
        false
    }

    fn take_in(&mut self, k: usize, a: &Ask, p: Pending) {
        for (j, file) in p.found_in.iter().enumerate() {
            let Some(file) = file else { continue };
            let state = a.planted[j].load(Ordering::Relaxed);
            let reason = a.reason[j].load(Ordering::Relaxed);
            let valid = match state {
                agent_abi::POINT_PATCHED | agent_abi::POINT_ALIAS => true,
                agent_abi::POINT_REFUSED => (1..=agent_abi::REFUSE_LAST).contains(&reason),
                _ => false,
            };
            if !valid {
                Self::say(&mut self.broken, &mut self.unsaid, format!("ask slot {k} says {} was left in state {state} (reason {reason}) in process {}, which the agent never writes", self.names[j], p.pid));
                continue;
            }
            let same = |r: &Planting| r.name == j && r.program == p.program && r.file == *file && r.state == state && r.reason == reason;
            match self.planted.iter().position(same) {
                Some(i) => {
                    let r = &mut self.planted[i];
                    if r.pids.len() < PIDS_NAMED {
                        r.pids.push(p.pid);
                    }
                    r.processes += 1;
                }
                None if self.planted.len() < MAX_RECORDS => self.planted.push(Planting { name: j, program: p.program.clone(), file: file.clone(), state, reason, pids: vec![p.pid], processes: 1 }),
                None => self.unsaid += 1,
            }
        }
    }

    /// The report's words: where each function was planted, which no program defined.
    pub(crate) fn statements(&self) -> Vec<String> {
        let mut out = Vec::new();
        for r in &self.planted {
            let mut pids = r.pids.iter().map(u32::to_string).collect::<Vec<_>>().join(", ");
            if r.processes > r.pids.len() as u64 {
                pids = format!("{pids} and {} more", r.processes - r.pids.len() as u64);
            }
            let processes = if r.processes == 1 { format!("pid {pids}") } else { format!("{} processes: pids {pids}", r.processes) };
            let place = if r.file == r.program { format!("{} ({processes})", r.program.display()) } else { format!("{} of {} ({processes})", r.file.display(), r.program.display()) };
            let name = &self.names[r.name];
            out.push(match r.state {
                agent_abi::POINT_PATCHED => format!("'{name}' was planted in {place}, found as the run reached it"),
                agent_abi::POINT_ALIAS => format!("'{name}' is in {place} at the address of another probed function: counted under it"),
                _ => format!("'{name}' is in {place}, and the agent refused it there: {}", agent_abi::refusal(r.reason)),
            });
        }
        let programs = match self.looked_in.is_empty() {
            true => "no process of the run asked".to_string(),
            false => self.looked_in.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(", "),
        };
        for (j, name) in self.names.iter().enumerate() {
            if !self.planted.iter().any(|r| r.name == j) {
                out.push(format!("'{name}' is defined by no program the run started (kansoku looked in each program and the libraries it loaded at start: {programs})"));
            }
        }
        out.extend(self.notes.iter().cloned());
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::Ordering::SeqCst;

    fn zeroed_control() -> Box<Control> {
        let layout = std::alloc::Layout::new::<Control>();
        // SAFETY: Control is integers and atomics, for which all-zero bytes are valid; the
        // allocation has Control's layout and is owned by the Box from here on.
        unsafe {
            let p = std::alloc::alloc_zeroed(layout) as *mut Control;
            assert!(!p.is_null());
            Box::from_raw(p)
        }
    }

    /// The program can write any slot: states neither side writes, results for questions
    /// never asked, questions from processes outside the run, results in states the agent
    /// never writes. Each is said and the slot freed; only a real question of the run is
    /// answered, with the address kansoku found itself.
    #[test]
    fn what_the_program_writes_into_the_ask_slots_is_said_not_trusted() {
        let control = zeroed_control();
        // this test process stands for the run's program; every Rust program has `main`
        let mut r = Resolver::new(vec!["main".into(), "no_such_function_here".into()], std::process::id(), PathBuf::from("/nonexistent/libkansoku_agent.so"));
        control.asks[0].state.store(9, SeqCst);
        control.asks[1].state.store(ASK_PLANTED, SeqCst);
        control.asks[2].pid.store(1, SeqCst);
        control.asks[2].state.store(ASK_ASKED, SeqCst);
        control.asks[3].pid.store(std::process::id(), SeqCst);
        control.asks[3].state.store(ASK_ASKED, SeqCst);
        r.serve(&control);
        let states: Vec<u32> = control.asks[..4].iter().map(|a| a.state.load(SeqCst)).collect();
        assert_eq!(states, [ASK_FREE, ASK_FREE, ASK_ANSWERED, ASK_ANSWERED]);
        assert_eq!(r.broken.len(), 2, "{:?}", r.broken);
        assert!(r.broken[0].contains("state 9") && r.broken[1].contains("did not answer"), "{:?}", r.broken);
        assert!(r.notes.iter().any(|n| n.contains("process 1") && n.contains("not one of the run's")), "{:?}", r.notes);
        assert_eq!(control.asks[2].address[0].load(SeqCst), 0, "a process outside the run gets no address");
        let main = control.asks[3].address[0].load(SeqCst);
        let maps = crate::procfs::read_maps(std::process::id() as i32).unwrap();
        let exe = std::fs::read_link("/proc/self/exe").unwrap();
        assert!(maps.iter().any(|m| m.is_executable() && m.path == exe.to_string_lossy() && m.start <= main && main < m.end), "main at 0x{main:x}");
        assert_eq!(control.asks[3].address[1].load(SeqCst), 0);
        // the agent's word: a state it never writes, then a planting
        control.asks[3].planted[0].store(7, SeqCst);
        control.asks[3].state.store(ASK_PLANTED, SeqCst);
        r.serve(&control);
        assert_eq!(control.asks[3].state.load(SeqCst), ASK_FREE);
        assert!(r.broken.last().unwrap().contains("state 7"), "{:?}", r.broken);
        control.asks[3].state.store(ASK_ASKED, SeqCst);
        r.serve(&control);
        control.asks[3].planted[0].store(agent_abi::POINT_PATCHED, SeqCst);
        control.asks[3].state.store(ASK_PLANTED, SeqCst);
        r.serve(&control);
        let said = r.statements();
        let planted = format!("'main' was planted in {} (pid {})", exe.display(), std::process::id());
        assert!(said.iter().any(|s| s.starts_with(&planted)), "{said:?}");
        assert!(said.iter().any(|s| s.starts_with("'no_such_function_here' is defined by no program the run started") && s.contains(&exe.display().to_string())), "{said:?}");
        // a slot flooded with questions: the file is read once, the statements stay bounded
        for _ in 0..100 {
            control.asks[5].state.store(9, SeqCst);
            r.serve(&control);
        }
        assert!(r.broken.len() <= MAX_SAID && r.unsaid > 0);
    }
}
