//! The agent's shared memory is outside input (issue 44): the observed program can find
//! the memfd in /proc/self/fd and write into it. Programs built here do, in the ways that
//! hung kansoku or made it print garbage before: ring heads moved forward, random bytes
//! over the control block and the rings, an absurd lost count; and the legitimate extremes
//! beside them, 300 threads (more than the 256 rings) and 200 forks. Each run must end with
//! the program's own exit status and a report that says what was inconsistent, in bounded
//! memory; a run that does not end within a generous limit is killed and fails.

mod harness;
use harness::kansoku_cmd;

mod agent_build;
use agent_build::agent;
use kansoku_core::agent_abi::{control_size, ring_size, MAX_RINGS};
use std::path::PathBuf;
use std::process::Stdio;
use std::time::{Duration, Instant};

const HOSTILE: &str = r#"
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

volatile long sink;
__attribute__((noinline)) void work(int n) { for (int i = 0; i < n; i++) sink += i; }

static unsigned char *shared(size_t *size) {
    const char *path = getenv("KANSOKU_AGENT_SHM");
    if (!path) { fprintf(stderr, "no KANSOKU_AGENT_SHM\n"); exit(3); }
    int fd = open(path, O_RDWR);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0) { perror(path); exit(3); }
    *size = st.st_size;
    void *p = mmap(0, st.st_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) { perror("mmap"); exit(3); }
    return p;
}

static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + t.tv_nsec * 1e-9; }
static void *thread_main(void *arg) { for (int i = 0; i < 1000; i++) work(1); return arg; }

int main(int argc, char **argv) {
    const char *mode = argv[1];
    size_t control = strtoul(argv[2], 0, 0), ring = strtoul(argv[3], 0, 0), rings = strtoul(argv[4], 0, 0), size;
    for (int i = 0; i < 1000; i++) work(3);
    if (!strcmp(mode, "heads")) {
        unsigned char *m = shared(&size);
        // 3 ms of moving every ring's head forward, and at least 64 passes of 4,096 records
        // (two rings' worth): on a loaded machine the 3 ms can pass in one preemption
        double end = now() + 0.003;
        for (int pass = 0; pass < 64 || now() < end; pass++)
            for (size_t k = 0; k < rings; k++) *(volatile uint64_t *)(m + control + k * ring + 8) += 4096;
        // The agent stores its own head at its next hit, which puts ring 0's back: wait
        // (at most 10 s) for kansoku's next drain to see the jump — a ring it finds broken
        // gets its tail set to the head it read. Drains come every few milliseconds, or
        // later on a loaded machine, where the jump was missed (CI of stop 48).
        volatile uint64_t *head = (volatile uint64_t *)(m + control + 8), *tail = head + 1;
        for (double give_up = now() + 10; *tail != *head && now() < give_up;) usleep(1000);
    } else if (!strcmp(mode, "random")) {
        unsigned char *m = shared(&size);
        uint64_t x = 0x9e3779b97f4a7c15;
        // the control block, every ring's header and the first 64 KiB of each ring's records
        for (size_t i = 0; i < control; i += 8) { x ^= x << 13; x ^= x >> 7; x ^= x << 17; *(uint64_t *)(m + i) = x; }
        for (size_t k = 0; k < rings; k++)
            for (size_t i = 0; i < 64 + 65536; i += 8) { x ^= x << 13; x ^= x >> 7; x ^= x << 17; *(uint64_t *)(m + control + k * ring + i) = x; }
    } else if (!strcmp(mode, "lost")) {
        unsigned char *m = shared(&size);
        *(volatile uint64_t *)(m + 24) = 3040900993826735515ull;
    } else if (!strcmp(mode, "threads")) {
        pthread_t t[300];
        for (int i = 0; i < 300; i++) pthread_create(&t[i], 0, thread_main, 0);
        for (int i = 0; i < 300; i++) pthread_join(t[i], 0);
    } else if (!strcmp(mode, "forks")) {
        for (int i = 0; i < 200; i++) {
            pid_t p = fork();
            if (p == 0) { work(5); _exit(0); }
            waitpid(p, 0, 0);
        }
    }
    for (int i = 0; i < 1000; i++) work(3);
    puts("done");
    return 7;
}
"#;

/// Builds a program of this file with `-O2 -g` and `flags` by the shared builder (once per
/// source and flags in a test run).
fn cc(name: &str, source: &str, flags: &[&str]) -> PathBuf {
    let dir = kansoku_examples::test_build_dir().join("agent_hostile_cli");
    kansoku_examples::build_source(name, source, &dir, &[&["-O2", "-g"], flags].concat()).unwrap_or_else(|e| panic!("{name}: {e}"))
}

fn hostile() -> PathBuf {
    cc("hostile", HOSTILE, &["-pthread"])
}

/// This test process's directory for reports.
fn scratch() -> PathBuf {
    let dir = std::env::temp_dir().join(format!("kansoku-agent-hostile-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// What one run gave: the JSON report, kansoku's exit code, its stdout (the program's)
/// and stderr, and its peak resident memory in KiB.
struct Run {
    report: serde_json::Value,
    code: Option<i32>,
    stdout: String,
    stderr: String,
    peak_kib: u64,
}

/// `kansoku monitor events --probe work` of the hostile program in `mode`; killed (and
/// the test failed) after 120 s. kansoku's peak memory is its VmHWM, read every 10 ms
/// while it runs (its rusage would include the program's, whose 256 rings of 2 MiB each
/// are faulted in when claimed).
fn run(mode: &str) -> Run {
    let report = scratch().join(format!("{mode}.json"));
    let mut child = kansoku_cmd()
        .args(["monitor", "events", "--mechanism", "agent", "--json", "--probe", "work", "-o"])
        .arg(&report)
        .arg("--")
        .arg(hostile())
        .args([mode, &control_size().to_string(), &ring_size().to_string(), &MAX_RINGS.to_string()])
        .env("KANSOKU_AGENT", agent())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let status = format!("/proc/{}/status", child.id());
    let start = Instant::now();
    let mut peak_kib = 0;
    while child.try_wait().unwrap().is_none() {
        if start.elapsed() > Duration::from_secs(120) {
            child.kill().unwrap();
            let o = child.wait_with_output().unwrap();
            panic!("{mode}: kansoku did not end within 120 s; killed. stderr: {}", String::from_utf8_lossy(&o.stderr));
        }
        let hwm = std::fs::read_to_string(&status).unwrap_or_default();
        if let Some(kib) = hwm.lines().find_map(|l| l.strip_prefix("VmHWM:")).and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok()) {
            peak_kib = peak_kib.max(kib);
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let o = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr).into_owned();
    let text = std::fs::read_to_string(&report).unwrap_or_else(|e| panic!("{mode}: no report ({e}): {stderr}"));
    Run { report: serde_json::from_str(&text).unwrap(), code: o.status.code(), stdout: String::from_utf8_lossy(&o.stdout).into_owned(), stderr, peak_kib }
}

fn calls(v: &serde_json::Value) -> u64 {
    v["report"]["routines"].as_array().unwrap().iter().find(|r| r["name"] == "work").unwrap()["calls"].as_u64().unwrap()
}

fn broken(v: &serde_json::Value) -> Vec<String> {
    v["broken"].as_array().unwrap().iter().map(|b| b.as_str().unwrap().to_string()).collect()
}

/// The program ran to its end as itself, and kansoku stayed within 256 MB.
fn ran_as_itself(r: &Run, mode: &str) {
    assert_eq!((r.code, r.stdout.as_str()), (Some(7), "done\n"), "{mode}: {}", r.stderr);
    assert!(r.peak_kib <= 256 << 10, "{mode}: kansoku's peak RSS {} KiB", r.peak_kib);
}

#[test]
fn heads_moved_forward_are_reported_not_followed() {
    let r = run("heads");
    ran_as_itself(&r, "heads");
    let b = broken(&r.report);
    assert!(b.iter().any(|s| s.starts_with("ring 0 ") && (s.contains("its head jumped to") || s.contains("its head went back"))), "{b:?}");
    // what was read before the heads moved, never more than the program made
    assert!(calls(&r.report) <= 2000, "{}", calls(&r.report));
}

#[test]
fn random_bytes_are_reported_and_nothing_read_from_them_is_printed() {
    let r = run("random");
    ran_as_itself(&r, "random");
    let b = broken(&r.report);
    assert!(b.iter().any(|s| s.starts_with("the control block's magic")), "{b:?}");
    assert!(b.iter().any(|s| s.starts_with("ring ")), "{b:?}");
    assert!(calls(&r.report) <= 2000, "{}", calls(&r.report));
    // the random lost count is not printed as a count
    assert_eq!(r.report["lost"], 0);
    assert!(r.report["report"]["hits"].as_u64().unwrap() <= 4000);
}

#[test]
fn an_absurd_lost_count_is_reported_not_printed() {
    let r = run("lost");
    ran_as_itself(&r, "lost");
    assert_eq!(r.report["lost"], 0);
    let b = broken(&r.report);
    assert!(b.iter().any(|s| s.contains("lost hits reads 3040900993826735515") && s.contains("not known")), "{b:?}");
    assert_eq!(calls(&r.report), 2000, "the rings themselves are intact");
}

#[test]
fn three_hundred_threads_fill_the_rings_and_the_rest_is_counted_lost() {
    let r = run("threads");
    ran_as_itself(&r, "threads");
    assert!(broken(&r.report).is_empty(), "{:?}", broken(&r.report));
    // the main thread and 255 workers get rings; the other 45 workers' 1,000 calls
    // (an entry and an exit each) are lost
    let lost = r.report["lost"].as_u64().unwrap();
    assert_eq!(calls(&r.report) + lost / 2, 2000 + 300 * 1000, "calls {} lost {lost}", calls(&r.report));
    assert_eq!(lost, 45 * 2000);
}

#[test]
fn two_hundred_forks_are_each_counted() {
    let r = run("forks");
    ran_as_itself(&r, "forks");
    assert!(broken(&r.report).is_empty(), "{:?}", broken(&r.report));
    assert_eq!((calls(&r.report), r.report["lost"].as_u64().unwrap()), (2000 + 200, 0));
}

/// `kill -TERM` or `kill -INT` to kansoku alone (as `timeout` or a service manager sends
/// it): the program gets the signal and cleans up, kansoku writes what it measured and
/// exits as the program did, as `time` and `perf stat` do (before: the program was
/// SIGKILLed and kansoku exited 137).
#[test]
fn a_signal_to_kansoku_reaches_the_program_which_ends_as_it_chooses() {
    let dir = scratch();
    let program = cc(
        "cleanup",
        r#"#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
volatile long sink;
volatile sig_atomic_t stop;
__attribute__((noinline)) void work(int n) { for (int i = 0; i < n; i++) sink += i; }
static void on_term(int s) { (void)s; stop = 1; }
int main(int argc, char **argv) {
    if (argv[1][0] == 'h') signal(SIGTERM, on_term);
    long calls = 0;
    while (!stop) { work(100); calls++; if (calls % 1000 == 0) usleep(1000); }
    printf("cleaned up after %ld calls\n", calls);
    return 3;
}
"#,
        &[],
    );
    for (mode, signal, code) in [("handles", libc::SIGTERM, 3), ("default", libc::SIGINT, 128 + libc::SIGINT)] {
        let report = dir.join(format!("signal-{mode}.json"));
        let mut child = kansoku_cmd()
            .args(["monitor", "events", "--mechanism", "agent", "--json", "--probe", "work", "-o"])
            .arg(&report)
            .arg("--")
            .arg(&program)
            .arg(mode)
            .env("KANSOKU_AGENT", agent())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        // wait until the program runs under the agent (its calls reach the ring), then signal kansoku alone
        std::thread::sleep(Duration::from_millis(1500));
        // SAFETY: kill with integer arguments.
        unsafe { libc::kill(child.id() as i32, signal) };
        let start = Instant::now();
        let o = loop {
            if child.try_wait().unwrap().is_some() {
                break child.wait_with_output().unwrap();
            }
            if start.elapsed() > Duration::from_secs(60) {
                child.kill().unwrap();
                let _ = child.wait();
                panic!("{mode}: kansoku did not end within 60 s of the signal");
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(code), "{mode}: {stderr}");
        let v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&report).unwrap_or_else(|e| panic!("{mode}: no report ({e}): {stderr}"))).unwrap();
        assert_eq!(v["interrupted"], true);
        if mode == "handles" {
            let out = String::from_utf8_lossy(&o.stdout);
            let made: u64 = out.trim().strip_prefix("cleaned up after ").and_then(|s| s.strip_suffix(" calls")).unwrap_or_else(|| panic!("{out}")).parse().unwrap();
            // every call the program made was counted: it ended on its own
            assert_eq!(calls(&v), made, "{stderr}");
        } else {
            assert!(v["exit"].as_str().unwrap().contains("SIGINT"), "{}", v["exit"]);
            assert!(calls(&v) > 0);
        }
    }
}

/// A program that stops itself (SIGSTOP) is announced while kansoku waits, by `monitor
/// events` (agent and uprobe) and `monitor`, as `record` did alone before; after SIGCONT
/// the run ends normally.
#[test]
fn a_program_that_stops_itself_is_announced() {
    let program = cc("stops", "#include <signal.h>\nvolatile long sink;\n__attribute__((noinline)) void work(int n) { for (int i = 0; i < n; i++) sink += i; }\nint main(void) { work(10); raise(SIGSTOP); work(10); return 0; }\n", &[]);
    let p = program.to_str().unwrap();
    for args in [
        vec!["monitor", "events", "--mechanism", "agent", "--probe", "work", "--", p],
        vec!["monitor", "events", "--mechanism", "uprobe", "--probe", "work", "--", p],
        vec!["monitor", "--interval", "50", "--", p],
    ] {
        let mut child = kansoku_cmd().args(&args).env("KANSOKU_AGENT", agent()).stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::piped()).spawn().unwrap();
        let k = child.id();
        // The program, once it has stopped itself; or nothing, if kansoku ends first (it then
        // says why). Neither seen is a hang, which the runner's timeout ends.
        let stopped = loop {
            if child.try_wait().unwrap().is_some() {
                break None;
            }
            let kids = std::fs::read_to_string(format!("/proc/{k}/task/{k}/children")).unwrap_or_default();
            let found = kids.split_whitespace().find(|pid| std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default().contains(") T "));
            if let Some(pid) = found {
                break Some(pid.parse::<i32>().unwrap());
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        if let Some(stopped) = stopped {
            // kansoku notices within its polling interval
            std::thread::sleep(Duration::from_millis(500));
            // SAFETY: kill with integer arguments.
            unsafe { libc::kill(stopped, libc::SIGCONT) };
        }
        let o = child.wait_with_output().unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        if args[1] == "events" && args[3] == "uprobe" && !o.status.success() && err.contains("uprobe") {
            kansoku_examples::skip(kansoku_examples::Missing::Machine, format!("the uprobe run: {err}"));
            continue;
        }
        assert!(stopped.is_some(), "{args:?}: kansoku ended ({}) and its program was never seen stopped: {err}", o.status);
        assert_eq!(o.status.code(), Some(0), "{args:?}: {err}");
        assert!(err.contains("is stopped by SIGSTOP") && err.contains("SIGCONT"), "{args:?}: {err}");
    }
}

/// A point whose module never loads is said in the report itself (-o too), and a run in
/// which no point was planted is an error, not an empty table with exit 0 (issue 44).
#[test]
fn a_run_where_no_point_was_planted_is_an_error() {
    let libz = "/usr/lib/x86_64-linux-gnu/libz.so.1";
    let report = scratch().join("unplanted.json");
    let crc32 = format!("crc32@{libz}");
    // `monitor events` by the agent with these probes on the hostile program, which makes
    // 2,000 calls of `work` and loads no libz
    let run = |probes: &[&str]| {
        kansoku_cmd()
            .args(["monitor", "events", "--mechanism", "agent", "--json"])
            .args(probes.iter().flat_map(|p| ["--probe", p]))
            .arg("-o")
            .arg(&report)
            .arg("--")
            .arg(hostile())
            .args(["none", "0", "0", "0"])
            .env("KANSOKU_AGENT", agent())
            .stdin(Stdio::null())
            .output()
            .unwrap()
    };
    // crc32 in libz is never planted
    let o = run(&[&crc32]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(err.contains("no point was planted") && err.contains("its module is not loaded"), "{err}");
    // beside a point that is planted, the unplanted one is a note of the report
    let o = run(&["work", &crc32]);
    assert_eq!(o.status.code(), Some(7), "{}", String::from_utf8_lossy(&o.stderr));
    let v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap();
    assert_eq!(calls(&v), 2000);
    let notes: Vec<&str> = v["notes"].as_array().unwrap().iter().filter_map(|n| n.as_str()).collect();
    assert!(notes.iter().any(|n| n.contains("crc32") && n.contains("its module is not loaded")), "{notes:?}");
}
