//! Issue 43: `perf record -a` and `perf record -g` files come through whole. Every process
//! of a system-wide recording and every frame of a call chain reach `show` (samples per
//! process and per call chain equal to what `perf script` lists) and the Firefox export
//! (a process per pid with its name, a thread per tid, the whole chain as the stack).
//!
//! The program forks, and parent and child each spin for a while in three nested
//! functions built with frame pointers (perf's `-g` walks them): a child's samples fall in
//! code it inherited, which no mapping record of its own names.

mod harness;
use harness::*;

use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::process::Command;

use serde_json::Value;

const PROGRAM: &str = r#"
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
static volatile unsigned long sink;
static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + t.tv_nsec / 1e9; }
__attribute__((noinline)) static void inner(unsigned long n) { for (unsigned long i = 0; i < n; i++) sink += i * i; }
__attribute__((noinline)) static void middle(unsigned long n) { inner(n); sink++; }
__attribute__((noinline)) static void outer(double seconds) { double end = now() + seconds; while (now() < end) middle(20000); }
int main(int argc, char **argv) {
    double seconds = argc > 1 ? atof(argv[1]) : 0.5;
    pid_t child = fork();
    outer(seconds);
    if (child > 0) waitpid(child, 0, 0);
    return 0;
}
"#;

fn s(p: &Path) -> String {
    p.display().to_string()
}

/// perf's call-chain context markers (PERF_CONTEXT_KERNEL, _USER…) are the top 4095 values.
const CONTEXT_MARKERS: u64 = -4095i64 as u64;

/// Samples per (pid, tid, call chain).
type Chains = BTreeMap<(i64, i64, Vec<u64>), u64>;

/// `perf record ARGS -- program`; None (the reason said) where perf cannot record.
fn perf_record(args: &[&str], data: &Path, program: &Path) -> Option<()> {
    let mut all = vec!["record", "-q", "-o"];
    let data = s(data);
    let program = s(program);
    all.push(&data);
    all.extend_from_slice(args);
    all.extend_from_slice(&["--", &program, "0.5"]);
    let Ok(rec) = Command::new("perf").args(&all).output() else {
        skip(Missing::Installed { package: "linux-perf" }, "perf is not installed");
        return None;
    };
    if !rec.status.success() {
        skip(Missing::Machine, format!("perf record {args:?} is not permitted here: {}", String::from_utf8_lossy(&rec.stderr)));
        return None;
    }
    Some(())
}

/// Samples per (pid, tid, call chain) as `perf script -D` dumps them: each sample's raw
/// record, its chain's addresses without perf's context markers (the sampled address alone
/// when it has no chain).
fn perf_script_chains(data: &Path) -> Chains {
    let o = Command::new("perf").args(["script", "-D", "-i", &s(data)]).output().unwrap();
    assert!(o.status.success(), "perf script -D: {}", String::from_utf8_lossy(&o.stderr));
    let text = String::from_utf8_lossy(&o.stdout);
    let mut counts = BTreeMap::new();
    let mut current: Option<(i64, i64, u64, Vec<u64>)> = None;
    let mut flush = |c: Option<(i64, i64, u64, Vec<u64>)>| {
        if let Some((pid, tid, ip, chain)) = c {
            let chain = if chain.is_empty() { vec![ip] } else { chain };
            *counts.entry((pid, tid, chain)).or_insert(0) += 1;
        }
    };
    for line in text.lines() {
        if let Some(rest) = line.split_once("PERF_RECORD_SAMPLE(").map(|(_, r)| r) {
            flush(current.take());
            // "IP, 0x2): 20271/20271: 0x7f62af5cc98b period: …"
            let mut fields = rest.split(": ").skip(1);
            let (pid, tid) = fields.next().and_then(|p| p.split_once('/')).unwrap();
            let ip = fields.next().unwrap().split_whitespace().next().unwrap();
            let ip = u64::from_str_radix(ip.trim_start_matches("0x"), 16).unwrap();
            current = Some((pid.trim().parse().unwrap(), tid.trim().parse().unwrap(), ip, Vec::new()));
        } else if let (Some(c), Some(entry)) = (current.as_mut(), line.strip_prefix(".....")) {
            if let Some((_, addr)) = entry.split_once(": ") {
                let addr = u64::from_str_radix(addr.trim(), 16).unwrap();
                if addr < CONTEXT_MARKERS {
                    c.3.push(addr);
                }
            }
        } else if !line.starts_with("...") && !line.starts_with(' ') && !line.starts_with('\t') {
            flush(current.take());
        }
    }
    flush(current);
    counts
}

/// Samples per pid as `perf script -F pid` lists them.
fn perf_script_pids(data: &Path) -> BTreeMap<i64, u64> {
    let o = Command::new("perf").args(["script", "-i", &s(data), "-F", "pid"]).output().unwrap();
    assert!(o.status.success(), "perf script: {}", String::from_utf8_lossy(&o.stderr));
    let mut counts = BTreeMap::new();
    for line in String::from_utf8_lossy(&o.stdout).lines().filter(|l| !l.trim().is_empty()) {
        *counts.entry(line.trim().parse::<i64>().unwrap()).or_insert(0) += 1;
    }
    counts
}

/// `kansoku show --json` of every event: samples per (pid, tid, call chain), and per pid.
fn shown_chains(data: &Path) -> (Chains, BTreeMap<i64, u64>, Value) {
    let v = ok_json(&["show", &s(data), "--json", "--limit", "0", "--by", "function"]);
    let hex = |v: &Value| u64::from_str_radix(v.as_str().unwrap().trim_start_matches("0x"), 16).unwrap();
    let (mut chains, mut pids) = (BTreeMap::new(), BTreeMap::new());
    for e in v["events"].as_array().unwrap().iter().filter(|e| e["event"] == "sample") {
        let (pid, tid) = (e["pid"].as_i64().expect("a perf.data sample names its process"), e["tid"].as_i64().unwrap());
        let chain: Vec<u64> = match e["stack"].as_array() {
            Some(frames) => frames.iter().map(hex).collect(),
            None => vec![hex(&e["addr"])],
        };
        *chains.entry((pid, tid, chain)).or_insert(0) += 1;
        *pids.entry(pid).or_insert(0) += 1;
    }
    (chains, pids, v)
}

/// Frames in a stack of the profile's stack table (each entry's prefix is its caller).
fn depth<'a>(prefix: &'a Value, mut stack: &'a Value) -> u64 {
    let mut n = 0;
    while let Some(i) = stack.as_u64() {
        n += 1;
        stack = &prefix[i as usize];
    }
    n
}

#[test]
fn every_process_and_call_chain_of_perf_record_a_and_g_comes_through() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let program = kansoku_examples::build_source("forks", PROGRAM, d, &["-O1", "-fno-omit-frame-pointer", "-fno-inline"]).unwrap();

    // -g: both processes of the program, with their call chains
    let g = d.join("g.data");
    let Some(()) = perf_record(&["-g", "-e", "cpu-clock", "-F", "1000"], &g, &program) else { return };
    let want = perf_script_chains(&g);
    let (got, pids, v) = shown_chains(&g);
    assert_eq!(pids, perf_script_pids(&g), "samples per process");
    assert_eq!(got, want, "samples per (pid, tid, call chain): kansoku show against perf script -D");
    assert!(pids.len() >= 2, "parent and child sampled: {pids:?}");
    // the chains are whole: a sample in inner is seen called from outer, called from main
    // (middle is missed when the sample falls before inner has set its frame pointer, and
    // gcc gives a leaf none of its own: perf's chain then skips it, and so does kansoku's)
    let ours = |f: &Value| f.as_str().unwrap().split(':').next().unwrap().to_string();
    let called = v["events"].as_array().unwrap().iter().filter_map(|e| e["frames"].as_array()).any(|f| {
        let names: Vec<String> = f.iter().map(ours).collect();
        let at = |n: &str| names.iter().position(|x| x == n);
        names.first().is_some_and(|n| n == "inner") && at("outer") < at("main") && at("outer").is_some()
    });
    assert!(called, "a sample in inner has outer and main as callers");
    // the child's samples are named too: it inherited the parent's mappings
    let child = *pids.keys().max().unwrap();
    let named = v["events"].as_array().unwrap().iter().filter(|e| e["pid"] == child && e["location"].as_str().is_some_and(|l| l.starts_with("inner"))).count();
    assert!(named > 0, "the forked child's samples are symbolised");

    // Firefox: a process per pid, a thread per tid, each sample's stack its chain
    let out = d.join("g.json");
    let o = kansoku(&["show", &s(&g), "--export", &format!("firefox={}", s(&out))]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let profile: Value = serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap();
    let mut per_thread: HashMap<(String, String), (u64, u64)> = HashMap::new();
    for ((pid, tid, chain), n) in &want {
        let user = chain.iter().filter(|&&a| a < 0xffff_8000_0000_0000).count() as u64;
        let kernel = u64::from(chain.len() as u64 > user);
        let e = per_thread.entry((pid.to_string(), tid.to_string())).or_default();
        e.0 += n;
        e.1 += n * (user + kernel);
    }
    let threads = profile["threads"].as_array().unwrap();
    let mut exported = HashMap::new();
    for t in threads {
        let (stacks, prefix) = (&t["samples"]["stack"], &t["stackTable"]["prefix"]);
        let frames: u64 = stacks.as_array().unwrap().iter().map(|s| depth(prefix, s)).sum();
        exported.insert((t["pid"].as_str().unwrap().to_string(), t["tid"].as_str().unwrap().to_string()), (t["samples"]["length"].as_u64().unwrap(), frames));
        assert_eq!(t["processName"], "forks", "{}", t["name"]);
    }
    assert_eq!(exported, per_thread, "per (pid, tid): samples and frames (a run of kernel frames is one)");

    // -a: every process of the machine, each sample under its own pid
    let a = d.join("a.data");
    let Some(()) = perf_record(&["-a", "-e", "cpu-clock", "-F", "500"], &a, &program) else { return };
    let want = perf_script_pids(&a);
    let (got, pids, v) = shown_chains(&a);
    assert_eq!(pids, want, "samples per process: kansoku show against perf script");
    assert_eq!(got, perf_script_chains(&a), "samples per (pid, tid, address)");
    assert!(want.len() >= 2, "{want:?}");
    let listed: Vec<i64> = v["processes"].as_array().unwrap().iter().map(|p| p["pid"].as_i64().unwrap()).collect();
    assert_eq!(listed.len(), want.len(), "the prelude lists every process with samples");
    let out = d.join("a.json");
    let o = kansoku(&["show", &s(&a), "--export", &format!("firefox={}", s(&out))]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let profile: Value = serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap();
    let mut per_pid: BTreeMap<i64, u64> = BTreeMap::new();
    for t in profile["threads"].as_array().unwrap() {
        *per_pid.entry(t["pid"].as_str().unwrap().parse().unwrap()).or_insert(0) += t["samples"]["length"].as_u64().unwrap();
    }
    assert_eq!(per_pid, want, "the Firefox export: samples per process, under their own pids");
}
