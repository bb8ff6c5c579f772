//! Functions of whatever program runs (issue 44): a shim that builds its program's path at
//! run time (pyenv's `exec "$PYENV_ROOT/libexec/pyenv" exec "$program"`) leaves kansoku no
//! text to find the program in before the run, so kansoku plans such a function in
//! [`ANY_PROGRAM`]. Each process that loads the agent asks kansoku where those functions
//! are in it (an [`Ask`] slot of the shared file) and waits, bounded, for the answer:
//! kansoku reads the process's `/proc/PID/exe` and maps itself, finds the functions with
//! its own symbol reader and writes their runtime addresses. The agent stays small (no ELF
//! reader of its own) and plants them as functions of the module that holds them; it then
//! writes what became of each, which the report names with the process and its program.

use std::sync::atomic::Ordering;

use kansoku_core::agent_abi::*;

use crate::{now, Module, Probe};

/// What the agent asked: the slot, and the probes of [`ANY_PROGRAM`] with kansoku's answer
/// (their index in the plan, and whether kansoku found them in this process).
pub(crate) struct Asked {
    slot: usize,
    probes: Vec<(usize, bool)>,
}

/// Waits 50 µs; false once `deadline` (CLOCK_MONOTONIC ns) passed or kansoku is gone.
unsafe fn wait(deadline: u64, resolver: u32, round: u32) -> bool {
    if now(false) > deadline {
        return false;
    }
    // every ~20 ms: is kansoku still there to answer?
    if round % 400 == 399 && libc::kill(resolver as libc::pid_t, 0) != 0 && std::io::Error::last_os_error().raw_os_error() == Some(libc::ESRCH) {
        return false;
    }
    let pause = libc::timespec { tv_sec: 0, tv_nsec: 50_000 };
    libc::nanosleep(&pause, std::ptr::null_mut());
    true
}

/// Asks kansoku where the plan's functions of [`ANY_PROGRAM`] are in this process, and
/// turns those it found into functions of the module that holds them. `None`: the plan
/// has none, or kansoku did not answer within [`HOLD_LIMIT_MS`] (they stay unplanted here).
pub(crate) unsafe fn where_they_are(control: *const Control, probes: &mut [Probe], modules: &[Module]) -> Option<Asked> {
    let deferred: Vec<usize> = (0..probes.len()).filter(|&k| probes[k].plan.in_any_program()).take(MAX_DEFERRED).collect();
    let resolver = std::ptr::read_volatile(std::ptr::addr_of!((*control).resolver));
    if deferred.is_empty() || resolver == 0 {
        return None;
    }
    let asks = &(*control).asks;
    let deadline = now(false) + HOLD_LIMIT_MS * 1_000_000;
    let mut round = 0;
    let slot = loop {
        if let Some(k) = asks.iter().position(|a| a.state.compare_exchange(ASK_FREE, ASK_CLAIMED, Ordering::AcqRel, Ordering::Relaxed).is_ok()) {
            break k;
        }
        if !wait(deadline, resolver, round) {
            return None;
        }
        round += 1;
    };
    let a = &asks[slot];
    a.pid.store(libc::getpid() as u32, Ordering::Relaxed);
    a.state.store(ASK_ASKED, Ordering::Release);
    while a.state.load(Ordering::Acquire) == ASK_ASKED {
        if !wait(deadline, resolver, round) {
            // unless kansoku answered meanwhile, the slot is left to kansoku to free
            if a.state.compare_exchange(ASK_ASKED, ASK_ABANDONED, Ordering::AcqRel, Ordering::Acquire).is_ok() {
                return None;
            }
            break;
        }
        round += 1;
    }
    if a.state.load(Ordering::Acquire) != ASK_ANSWERED {
        return None;
    }
    let mut asked = Asked { slot, probes: Vec::with_capacity(deferred.len()) };
    for (j, &k) in deferred.iter().enumerate() {
        let address = a.address[j].load(Ordering::Relaxed);
        let size = a.size[j].load(Ordering::Relaxed);
        // the module whose code holds it (kansoku's answer is checked against the
        // dynamic linker's list, not trusted to be code)
        let module = (address != 0).then(|| modules.iter().find(|m| m.code_start <= address && address < m.code_end)).flatten();
        if let Some(m) = module {
            let plan = &mut probes[k].plan;
            plan.module = Some(m.path.clone());
            plan.vaddr = address - m.base;
            plan.size = size;
            plan.ifunc = false;
        } else if address != 0 {
            probes[k].outcome = (POINT_REFUSED, REFUSE_NOT_LOADED);
        }
        asked.probes.push((k, address != 0));
    }
    Some(asked)
}

/// Writes what became of each function kansoku found, for the report, and hands the slot
/// back to kansoku.
pub(crate) unsafe fn say_what_was_planted(control: *const Control, asked: &Asked, probes: &[Probe]) {
    let a = &(*control).asks[asked.slot];
    for (j, &(k, found)) in asked.probes.iter().enumerate() {
        let (state, reason) = if found { probes[k].outcome } else { (POINT_UNSET, 0) };
        a.planted[j].store(state, Ordering::Relaxed);
        a.reason[j].store(reason, Ordering::Relaxed);
    }
    a.state.store(ASK_PLANTED, Ordering::Release);
}
