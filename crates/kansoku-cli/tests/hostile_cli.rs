//! Hostile input and hard stops, end to end (issue 15, items 7, 8, 11–16): each input or
//! stop that hung, panicked or lost a recording before. Inputs are generated here.

mod harness;
use harness::*;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use kansoku_core::{Event, ExitStatus, Header, Module, RecordingKind, RecordingReader, RecordingWriter};

/// An exact-trace recording with the given events (a finished file).
fn write_ksk(path: &std::path::Path, events: &[Event]) {
    let header = Header::new(RecordingKind::ExactTrace, "/bin/true", vec![]);
    let mut w = RecordingWriter::create(path, &header).unwrap();
    for e in events {
        w.write(e).unwrap();
    }
    w.finish().unwrap();
}

fn module(path: &str, start: u64) -> Event {
    Event::Module(Module { path: path.into(), build_id: None, start, end: start + 0x1000, file_offset: 0 })
}

#[test]
fn module_paths_that_are_devices_or_fifos_are_not_read() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("fifo");
    assert!(Command::new("mkfifo").arg(&fifo).status().unwrap().success());
    let ksk = dir.path().join("t.ksk");
    let fifo_path = fifo.to_str().unwrap();
    write_ksk(&ksk, &[module("/dev/zero", 0x1000), Event::Instruction { addr: 0x1010 }, module(fifo_path, 0x4000), Event::Instruction { addr: 0x4010 }]);
    // Opening the FIFO would block for ever: that kansoku ends at all is the check (the
    // runner's timeout, .config/nextest.toml, turns a hang into a failure).
    let o = kansoku(&["show", ksk.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let all = format!("{}{}", String::from_utf8_lossy(&o.stdout), stderr(&o));
    assert!(all.contains("/dev/zero") && all.contains("not a regular file"), "{all}");
}

/// 100,000 Module events at descending addresses, each of which landed at the front of a
/// sorted vector before (issue 15 item 8: show took 34 s): `show --counts` reads every one,
/// as the counts it prints say. How its time grows with the modules (n log n: twice the
/// modules, about twice the time) is measured in bench/hostile.sh, as a ratio.
#[test]
fn a_hundred_thousand_modules_are_all_read() {
    let dir = tempfile::tempdir().unwrap();
    let ksk = dir.path().join("many.ksk");
    // Descending start addresses: every insertion lands at the front of a sorted vector.
    let mut events = Vec::new();
    for i in (0..100_000u64).rev() {
        events.push(module("[anon]", 0x1000_0000 + i * 0x2000));
        events.push(Event::Instruction { addr: 0x1000_0010 + i * 0x2000 });
    }
    write_ksk(&ksk, &events);
    // --counts: every module is read (a plain --limit stops after five events)
    let v = ok_json(&["show", s(&ksk), "--limit", "5", "--counts", "--json"]);
    assert_eq!((v["summary"]["events"].as_u64(), v["summary"]["instructions"].as_u64()), (Some(200_000), Some(100_000)), "{}", v["summary"]);
    let modules = v["modules"].as_array().unwrap();
    assert_eq!(modules.len(), 100_000);
    // the map is the recording's, in its order: the last module read starts lowest
    assert_eq!(modules.last().unwrap()["start"].as_u64(), Some(0x1000_0000), "{}", modules.last().unwrap());
}

#[test]
fn compare_without_a_usable_iteration_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("rebuilt.txt");
    std::fs::write(&trace, "0x1010 main:0\n0x1014 main:1\n").unwrap();
    let exact = dir.path().join("exact.ksk");
    write_ksk(&exact, &[module("/bin/true", 0x1000), Event::Instruction { addr: 0x1010 }, Event::Exit(ExitStatus::Exited(0))]);
    let o = kansoku(&["compare", trace.to_str().unwrap(), exact.to_str().unwrap(), "--iteration", "18446744073709551615"]);
    assert!(!o.status.success() && stderr(&o).contains(&format!("{}: iteration 18446744073709551615 cannot exist", exact.display())), "{}", stderr(&o));
    let o = kansoku(&["compare", trace.to_str().unwrap(), exact.to_str().unwrap(), "--iteration", "5"]);
    assert!(!o.status.success() && stderr(&o).contains("no marker hits, so it is one iteration (0), not 5"), "{}", stderr(&o));
    let empty = dir.path().join("empty.ksk");
    write_ksk(&empty, &[Event::Exit(ExitStatus::Killed(9))]);
    let o = kansoku(&["compare", trace.to_str().unwrap(), empty.to_str().unwrap()]);
    assert!(!o.status.success() && stderr(&o).contains("no instructions"), "{}", stderr(&o));
}

#[test]
fn invalid_utf8_is_located_in_kernels_traces_and_score_tables() {
    let dir = tempfile::tempdir().unwrap();
    let k = dir.path().join("bad.k");
    std::fs::write(&k, b"param N;\ndouble A[N];\nfor (i = 0; i < N; i++)\n  A[i] = \xff;\n").unwrap();
    let o = kansoku(&["cache", "info", k.to_str().unwrap()]);
    assert!(!o.status.success() && stderr(&o).contains(&format!("{}:4:10: invalid UTF-8", k.display())), "{}", stderr(&o));
    let trace = dir.path().join("rebuilt.txt");
    std::fs::write(&trace, b"0x1010 main:0\n0x1014 ma\xc3in:1\n").unwrap();
    let exact = dir.path().join("exact.ksk");
    write_ksk(&exact, &[module("/bin/true", 0x1000), Event::Instruction { addr: 0x1010 }]);
    let o = kansoku(&["compare", trace.to_str().unwrap(), exact.to_str().unwrap()]);
    assert!(!o.status.success() && stderr(&o).contains(&format!("{}:2:10: invalid UTF-8 (byte 23)", trace.display())), "{}", stderr(&o));
}

/// Found by fuzzing (issue 15): a time loop of 6.7·10¹¹ iterations. `cache simulate` ran
/// for days without a word; now the accesses are counted first (in closed form) and a
/// simulation over `--max-accesses` is refused at once, naming the count and its time.
#[test]
fn a_simulation_of_days_is_refused_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let k = dir.path().join("years.k");
    let src = "param N;\ndouble A[N][N];\nfor (t = 0; t <= 666666666666; t++)\n  for (i = 1; i < N - 1; i++)\n    for (j = 1; j < N - 1; j++)\n      A[i][j] = (A[i - 1][j] + A[i + 1][j]) / 2.0;\n";
    std::fs::write(&k, src).unwrap();
    // Refused before any simulation: the count in the message is the work's closed form,
    // which a simulation would take days to reach.
    let o = kansoku(&["cache", "simulate", k.to_str().unwrap(), "--param", "N=10"]);
    let e = stderr(&o);
    assert!(!o.status.success() && o.stdout.is_empty(), "{e}");
    // 666,666,666,667 × (8 × 8 × 3 accesses + 8 iterations of i + 1 of t)
    assert!(e.contains("more than 134000000000067") && e.contains("days") && e.contains("at 300 M accesses/s") && e.contains("--max-accesses"), "{e}");
    // An L1+L2 hierarchy simulates about 6× slower: its estimate says so.
    let o = kansoku(&["cache", "simulate", k.to_str().unwrap(), "--param", "N=10", "--l2", "32KiB,8-way,64B"]);
    assert!(stderr(&o).contains("at 46 M accesses/s") && !o.status.success(), "{}", stderr(&o));
    // Ten steps of time: 1,920 accesses (2,010 with the loop iterations) simulate, and a
    // limit below that refuses them.
    std::fs::write(&k, src.replace("666666666666", "9")).unwrap();
    let o = kansoku(&["cache", "simulate", k.to_str().unwrap(), "--param", "N=10"]);
    assert!(String::from_utf8_lossy(&o.stdout).contains("1920 accesses"), "{}", stderr(&o));
    let o = kansoku(&["cache", "simulate", k.to_str().unwrap(), "--param", "N=10", "--max-accesses", "2000"]);
    assert!(stderr(&o).contains("more than 20") && !o.status.success(), "{}", stderr(&o));
}

/// The program kansoku started (its child), found through /proc.
fn child_of(pid: u32) -> Option<u32> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children")).ok()?;
    text.split_whitespace().next()?.parse().ok()
}

/// The program kansoku (`pid`) started, once it is there. Fails when kansoku ends without
/// one; a kansoku that neither starts a program nor ends is a hang, which the runner's
/// timeout ends (.config/nextest.toml).
fn wait_for_child(pid: u32) -> u32 {
    loop {
        if let Some(c) = child_of(pid) {
            return c;
        }
        assert!(alive(pid), "kansoku ended and started no program");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn alive(pid: u32) -> bool {
    // A zombie still has a /proc entry; its state is Z.
    std::fs::read_to_string(format!("/proc/{pid}/stat")).map(|s| !s.contains(") Z ")).unwrap_or(false)
}

/// A program that runs until killed, in C so that the trace is of our own loop.
fn spinner_program() -> std::path::PathBuf {
    let src = "int main(void) { volatile unsigned long n = 0; for (;;) n++; }\n";
    kansoku_examples::build_source("spin", src, &kansoku_examples::test_build_dir(), &["-O1"]).unwrap()
}

#[test]
fn sigkill_of_the_recorder_keeps_the_recording_and_ends_the_program() {
    let dir = tempfile::tempdir().unwrap();
    let spin = spinner_program();
    let ksk = dir.path().join("killed.ksk");
    let mut k = Command::new(env!("CARGO_BIN_EXE_kansoku"))
        .args(["trace", "exact", "-o", ksk.to_str().unwrap(), "--"])
        .arg(&spin)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let program = wait_for_child(k.id());
    // Killed once tracing is under way — its first 64 KiB on disk, however long the engine
    // took to start on a loaded machine (1.5 s was not always enough: 0 instructions) — and
    // half a second later.
    let t = Instant::now();
    while std::fs::metadata(&ksk).map_or(0, |m| m.len()) < 64 << 10 && t.elapsed() < Duration::from_secs(120) {
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(500));
    k.kill().unwrap();
    k.wait().unwrap();
    // Lost at most the last 100 ms or 64 KiB: what was written before is there.
    let mut r = RecordingReader::open(&ksk).unwrap();
    let mut instructions = 0u64;
    while let Some(e) = r.next_event().unwrap() {
        instructions += matches!(e, Event::Instruction { .. }) as u64;
    }
    assert!(r.truncated_at().is_some());
    assert!(instructions > 1000, "only {instructions} instructions kept");
    let t = Instant::now();
    while alive(program) && t.elapsed() < Duration::from_secs(5) {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(!alive(program), "the traced program runs on after its observer was killed");

    // `record` (perf sampling, no ptrace): the program must die with kansoku too.
    let rec = dir.path().join("killed-record.ksk");
    let mut k = Command::new(env!("CARGO_BIN_EXE_kansoku")).args(["record", "-o", rec.to_str().unwrap(), "--"]).arg(&spin).stdout(Stdio::null()).stderr(Stdio::piped()).spawn().unwrap();
    let program = wait_for_child(k.id());
    std::thread::sleep(Duration::from_millis(500));
    if !alive(k.id()) {
        let o = k.wait_with_output().unwrap();
        skip(Missing::Machine, format!("the record half: kansoku record cannot sample here: {}", String::from_utf8_lossy(&o.stderr)));
        return;
    }
    k.kill().unwrap();
    k.wait().unwrap();
    let t = Instant::now();
    while alive(program) && t.elapsed() < Duration::from_secs(5) {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(!alive(program), "the sampled program runs on after kansoku record was killed");
}

#[test]
fn ctrl_c_during_an_exact_trace_finishes_the_recording() {
    let dir = tempfile::tempdir().unwrap();
    let spin = spinner_program();
    // Before, 10 runs in 26 ended with "waiting for process N failed: EINTR" and no trailer.
    for round in 0..5 {
        let ksk = dir.path().join(format!("int{round}.ksk"));
        let k = Command::new(env!("CARGO_BIN_EXE_kansoku"))
            .args(["trace", "exact", "-o", ksk.to_str().unwrap(), "--"])
            .arg(&spin)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        wait_for_child(k.id());
        std::thread::sleep(Duration::from_millis(300 + 70 * round));
        unsafe { libc::kill(k.id() as i32, libc::SIGINT) };
        let o = k.wait_with_output().unwrap();
        assert!(!stderr(&o).contains("EINTR"), "round {round}: {}", stderr(&o));
        let mut r = RecordingReader::open(&ksk).unwrap();
        let mut exit = None;
        while let Some(e) = r.next_event().unwrap() {
            if let Event::Exit(x) = e {
                exit = Some(x);
            }
        }
        assert_eq!(r.truncated_at(), None, "round {round}: no trailer");
        assert!(exit.is_some(), "round {round}: no exit event");
    }
}

#[test]
fn a_program_that_stops_itself_is_reported() {
    let dir = tempfile::tempdir().unwrap();
    let rec = dir.path().join("stopped.ksk");
    let mut k = Command::new(env!("CARGO_BIN_EXE_kansoku"))
        .args(["record", "-o", rec.to_str().unwrap(), "--", "/bin/sh", "-c", "kill -STOP $$; exit 0"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let program = wait_for_child(k.id());
    // Give kansoku time to notice, then wake the program up.
    std::thread::sleep(Duration::from_millis(800));
    unsafe { libc::kill(program as i32, libc::SIGCONT) };
    let t = Instant::now();
    while alive(k.id()) && t.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(20));
    }
    if alive(k.id()) {
        k.kill().unwrap();
        panic!("kansoku record still waits after SIGCONT");
    }
    let o = k.wait_with_output().unwrap();
    let err = stderr(&o);
    if !o.status.success() && err.contains("perf") {
        skip(Missing::Machine, format!("kansoku record cannot sample here: {err}"));
        return;
    }
    assert!(err.contains("is stopped by SIGSTOP") && err.contains("SIGCONT"), "{err}");
}

/// `wave --exact --engine ptrace --marker F` interrupted before F is reached (issue 44):
/// before, the run-to-marker loop continued a tracee that was not stopped after the wait
/// was interrupted and failed with `ptrace CONT … ESRCH`, no report. Now the one
/// run-to-address of kansoku-probe waits again and passes the SIGINT on to the program
/// (its own process group never saw it), which ends by it: kansoku exits 130.
#[test]
fn ctrl_c_before_the_wave_marker_is_passed_on() {
    let src = "#include <unistd.h>\nvoid never(void) {}\nint main(int c, char **v) { (void)v; for (;;) { usleep(1000); if (c > 5) never(); } }\n";
    let prog = kansoku_examples::build_source("waits", src, &kansoku_examples::test_build_dir(), &["-O0", "-g"]).unwrap();
    let k = Command::new(env!("CARGO_BIN_EXE_kansoku"))
        .args(["wave", "--exact", "--engine", "ptrace", "--marker", "never", "--"])
        .arg(&prog)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_for_child(k.id());
    std::thread::sleep(Duration::from_millis(500));
    // SAFETY: kill with integer arguments.
    unsafe { libc::kill(k.id() as i32, libc::SIGINT) };
    let t = Instant::now();
    while alive(k.id()) && t.elapsed() < Duration::from_secs(30) {
        std::thread::sleep(Duration::from_millis(20));
    }
    let o = k.wait_with_output().unwrap();
    let err = stderr(&o);
    assert!(!err.contains("ESRCH"), "{err}");
    assert_eq!(o.status.code(), Some(130), "{err}");
}

/// A program that stops itself (SIGSTOP) after it wrote `before`, and on SIGCONT writes
/// `after` into the file named by its argument.
fn stopping_program() -> std::path::PathBuf {
    let src = "#include <signal.h>\n#include <stdio.h>\nvolatile long sink;\n__attribute__((noinline)) void late(void) { sink++; }\n\
               int main(int c, char **v) { FILE *f; if (c < 2) return 2; raise(SIGSTOP); late(); f = fopen(v[1], \"w\"); if (!f) return 3; fputs(\"after\", f); return fclose(f) != 0; }\n";
    kansoku_examples::build_source("stops_itself", src, &kansoku_examples::test_build_dir(), &["-O1", "-g"]).unwrap()
}

/// Runs `kansoku ARGS -- stops_itself FILE` and checks what every command does when the
/// program stops itself: kansoku says so on stderr (once), the program stays stopped
/// (it has not written FILE half a second later), and after a SIGCONT the run ends as
/// the program did, with FILE written.
fn a_stop_is_said_and_held(args: &[&str]) {
    use std::io::BufRead;
    let program = stopping_program();
    let dir = tempfile::tempdir().unwrap();
    let after = dir.path().join("after");
    let mut k = kansoku_cmd()
        .args(args)
        .arg("--")
        .arg(&program)
        .arg(&after)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let kid = k.id();
    let (lines, told) = std::sync::mpsc::channel();
    let err = k.stderr.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut all = String::new();
        for line in std::io::BufReader::new(err).lines().map_while(Result::ok) {
            let _ = lines.send(line.clone());
            all.push_str(&line);
            all.push('\n');
        }
        all
    });
    let t = Instant::now();
    loop {
        match told.recv_timeout(Duration::from_secs(60)) {
            Ok(line) if line.contains("is stopped by SIGSTOP") => break,
            Ok(_) => {}
            Err(e) => {
                let _ = k.kill();
                panic!("{args:?}: nothing said of the stop in {:?} ({e}): {}", t.elapsed(), reader.join().unwrap());
            }
        }
    }
    std::thread::sleep(Duration::from_millis(500));
    assert!(!after.exists(), "{args:?}: the program ran on while said to be stopped");
    let program_pid = child_of(kid).expect("the program is kansoku's child");
    // SAFETY: kill with integer arguments.
    unsafe { libc::kill(program_pid as i32, libc::SIGCONT) };
    let t = Instant::now();
    while alive(kid) && t.elapsed() < Duration::from_secs(60) {
        std::thread::sleep(Duration::from_millis(20));
    }
    if alive(kid) {
        let _ = k.kill();
        panic!("{args:?}: kansoku still waits after SIGCONT");
    }
    let status = k.wait().unwrap();
    let err = reader.join().unwrap();
    assert_eq!(status.code(), Some(0), "{args:?}: {err}");
    assert_eq!(std::fs::read_to_string(&after).unwrap_or_default(), "after", "{args:?}: {err}");
    assert_eq!(err.matches("is stopped by SIGSTOP").count(), 1, "{args:?}: {err}");
    assert!(err.contains("resumes when it gets SIGCONT"), "{args:?}: {err}");
}

fn valgrind_tool() -> bool {
    match kansoku_probe::valgrind::tool_dir() {
        Ok(_) => true,
        Err(why) => {
            skip(Missing::Installed { package: "valgrind" }, why);
            false
        }
    }
}

/// `trace exact` on both engines; by ptrace the program stops while run to the marker at
/// full speed. Before, the ptrace engine restarted the thread from its group-stop, and the
/// program ran on as if it had never stopped.
#[test]
fn trace_exact_says_a_stopped_program_and_waits_for_sigcont() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("t.ksk");
    a_stop_is_said_and_held(&["trace", "exact", "--engine", "ptrace", "--marker", "late", "-o", s(&out)]);
    if valgrind_tool() {
        a_stop_is_said_and_held(&["trace", "exact", "--engine", "valgrind", "-o", s(&out)]);
    }
}

/// `wave --exact` on both engines, the program stopping while it is single-stepped.
#[test]
fn wave_says_a_stopped_program_and_waits_for_sigcont() {
    a_stop_is_said_and_held(&["wave", "--exact", "--engine", "ptrace"]);
    if valgrind_tool() {
        a_stop_is_said_and_held(&["wave", "--exact", "--engine", "valgrind"]);
    }
}

/// `paths` (a live run under kansoku's Valgrind tool).
#[test]
fn paths_says_a_stopped_program_and_waits_for_sigcont() {
    if valgrind_tool() {
        a_stop_is_said_and_held(&["paths"]);
    }
}

/// The trap mechanism of `monitor events` (ptrace), as the agent and uprobes do.
#[test]
fn the_trap_mechanism_says_a_stopped_program_and_waits_for_sigcont() {
    a_stop_is_said_and_held(&["monitor", "events", "--mechanism", "trap", "--probe", "late"]);
}

/// Issue 43: `show --limit N` reads a recording's head only, so a recording corrupted after
/// its first records still shows them (the same events as before the damage); reading all
/// of it (`--counts`) says where it is corrupted.
#[test]
fn show_limit_reads_the_head_of_a_recording_corrupted_after_it() {
    let dir = tempfile::tempdir().unwrap();
    let (good, bad) = (dir.path().join("good.ksk"), dir.path().join("bad.ksk"));
    let mut events = vec![module("/bin/true", 0x1000)];
    events.extend((0..100_000u64).map(|i| Event::Instruction { addr: 0x1000 + (i * 7) % 0x1000 }));
    write_ksk(&good, &events);
    let mut bytes = std::fs::read(&good).unwrap();
    let at = bytes.len() / 4;
    bytes[at..].fill(0); // 0x00 is no event's tag
    std::fs::write(&bad, &bytes).unwrap();
    let head = |p: &std::path::Path| ok_json(&["show", p.to_str().unwrap(), "--json", "--limit", "10"]);
    let (before, after) = (head(&good), head(&bad));
    assert_eq!(after["events"].as_array().unwrap().len(), 10, "{after}");
    assert_eq!(after["events"], before["events"]);
    let o = kansoku(&["show", bad.to_str().unwrap(), "--counts", "--limit", "10"]);
    assert!(!o.status.success(), "{}", stderr(&o));
    let said = stderr(&o);
    let byte: usize = said
        .split_once(&format!("{}: corrupted at byte ", bad.display()))
        .and_then(|(_, rest)| rest.split(|c: char| !c.is_ascii_digit()).next()?.parse().ok())
        .unwrap_or_else(|| panic!("{said}"));
    // the damage starts mid-event or at one: said at the first byte no event can start with
    assert!((at.saturating_sub(16)..=at + 16).contains(&byte), "{said}");
}
