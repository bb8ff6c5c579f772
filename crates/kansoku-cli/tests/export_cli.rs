//! `kansoku paths --export FORMAT=FILE` opened by the viewers people use (issue 16):
//! `callgrind_annotate` (ships with Valgrind), `go tool pprof` (Debian golang-go) and the
//! collapsed-stack format flame graph tools read, on Debian's gzip, against kansoku's own
//! per-function counts and against `valgrind --tool=callgrind` of the same run.

mod harness;
use harness::{skip, Missing};

use std::collections::HashMap;
use std::path::Path;
use std::process::{Command, Output};

fn run(program: &str, args: &[&str]) -> Option<Output> {
    Command::new(program).args(args).output().ok()
}

/// Per-function `Ir` from `callgrind_annotate FILE` (`N (p%)  file:function [object]`),
/// and its PROGRAM TOTALS.
fn annotate(file: &Path) -> (HashMap<String, u64>, u64) {
    let o = run("callgrind_annotate", &["--threshold=100", file.to_str().unwrap()]).expect("callgrind_annotate runs");
    assert!(o.status.success(), "callgrind_annotate {}: {}", file.display(), String::from_utf8_lossy(&o.stderr));
    let text = String::from_utf8_lossy(&o.stdout);
    let number = |s: &str| s.replace(',', "").parse::<u64>().ok();
    let mut total = None;
    let mut functions = HashMap::new();
    for line in text.lines() {
        let line = line.trim();
        let Some((count, rest)) = line.split_once(' ') else { continue };
        let Some(n) = number(count) else { continue };
        if rest.contains("PROGRAM TOTALS") {
            total = Some(n);
        } else if let Some((_, f)) = rest.split_once(':') {
            let name = f.split(" [").next().unwrap().to_string();
            *functions.entry(name).or_insert(0) += n;
        }
    }
    (functions, total.expect("callgrind_annotate printed PROGRAM TOTALS"))
}

/// Calls per callee in a callgrind file (`cfn=` then `calls=N …`), names decompressed.
fn calls_per_callee(file: &Path) -> HashMap<String, u64> {
    let text = std::fs::read_to_string(file).unwrap();
    let (mut names, mut calls) = (HashMap::new(), HashMap::new());
    let mut callee: Option<String> = None;
    for line in text.lines() {
        let name = |spec: &str, names: &mut HashMap<String, String>| {
            let (id, name) = spec.split_once(") ").map(|(i, n)| (i.to_string(), Some(n.trim().to_string()))).unwrap_or((spec.trim_end_matches(')').to_string(), None));
            if let Some(n) = name {
                names.insert(id.clone(), n);
            }
            names.get(&id).cloned()
        };
        if let Some(spec) = line.strip_prefix("fn=(") {
            name(spec, &mut names);
        } else if let Some(spec) = line.strip_prefix("cfn=(") {
            callee = name(spec, &mut names);
        } else if let Some(rest) = line.strip_prefix("calls=") {
            let n: u64 = rest.split(' ').next().unwrap().parse().unwrap();
            *calls.entry(callee.clone().expect("calls= after cfn=")).or_insert(0) += n;
        }
    }
    calls
}

/// A fixed input for gzip: text with repeats, so deflate's match search works.
fn input(dir: &Path) -> String {
    let mut text = String::new();
    for i in 0..6000u32 {
        text.push_str(&format!("line {} of the kansoku export test: {}\n", i, i.wrapping_mul(2654435761) % 977));
    }
    let path = dir.join("in.txt");
    std::fs::write(&path, text).unwrap();
    path.to_str().unwrap().to_string()
}

#[test]
fn gzip_exports_open_in_callgrind_annotate_pprof_and_flame_graph_tools() {
    if run("valgrind", &["--version"]).is_none() {
        skip(Missing::Installed { package: "valgrind" }, "valgrind is not installed");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let input = input(d);
    let file = |n: &str| d.join(n).to_str().unwrap().to_string();
    let (cg, folded, pb, report) = (file("k.callgrind"), file("k.folded"), file("k.pb.gz"), file("report.json"));
    let o = Command::new(env!("CARGO_BIN_EXE_kansoku"))
        .args(["paths", "--top", "0", "-o", &report])
        .args(["--export", &format!("callgrind={cg}"), "--export", &format!("collapsed={folded}"), "--export", &format!("pprof={pb}")])
        .args(["--", "gzip", "-c", &input])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains(&format!("callgrind export written to {cg}: open with callgrind_annotate")), "{err}");
    let r: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap();
    let total = r["summary"]["instructions_executed"].as_u64().unwrap();
    let ours: HashMap<String, u64> =
        r["functions"].as_array().unwrap().iter().map(|f| (f["function"].as_str().unwrap().to_string(), f["instructions"].as_u64().unwrap())).collect();

    // callgrind_annotate reads the file: the report's instructions, and each element of a
    // rep string instruction once more (as Callgrind counts them; the path report counts
    // the instruction once per block entry). Per function the export follows Callgrind's
    // attribution, not the report's blocks (bzip2_exports_equal_callgrind_function_by_function).
    let (annotated, annotated_total) = annotate(Path::new(&cg));
    assert!(annotated_total >= total && annotated_total - total <= total / 10_000, "{annotated_total} vs {total}");
    assert!(annotated.len() >= 3, "{annotated:?}");

    // ... and they are Callgrind's own for the same run: gzip is stripped, Callgrind names
    // its functions 0x…ADDR where kansoku writes gzip+0xADDR; the boundaries of a few
    // blocks between adjacent functions differ (measured: ≤ 241 of 3.47 M).
    let vg = file("vg.callgrind");
    let o = Command::new("valgrind").args(["--tool=callgrind", &format!("--callgrind-out-file={vg}"), "gzip", "-c", &input]).output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let (theirs, _) = annotate(Path::new(&vg));
    let mut compared = 0;
    for (f, n) in ours.iter().filter(|(_, &n)| n * 100 >= total) {
        let addr = u64::from_str_radix(f.strip_prefix("gzip+0x").expect("stripped gzip: functions by address"), 16).unwrap();
        let v = theirs[&format!("0x{addr:016x}")];
        assert!(n.abs_diff(v) * 1000 <= v, "{f}: kansoku {n}, callgrind {v}");
        compared += 1;
    }
    assert!(compared >= 3, "{compared} functions above 1 %");
    // Calls: per gzip function called at least 100 times, Callgrind's count (measured: equal,
    // or one apart where the first entry is counted differently).
    let (our_calls, their_calls) = (calls_per_callee(Path::new(&cg)), calls_per_callee(Path::new(&vg)));
    let mut checked = 0;
    for (f, &n) in their_calls.iter().filter(|(f, &n)| f.starts_with("0x") && n >= 100) {
        let ours = our_calls.get(&format!("gzip+0x{:x}", u64::from_str_radix(&f[2..], 16).unwrap())).copied().unwrap_or(0);
        assert!(ours.abs_diff(n) <= 1, "calls of {f}: kansoku {ours}, callgrind {n}");
        checked += 1;
    }
    assert!(checked >= 2, "{their_calls:?}");

    // Collapsed stacks: `frame;frame count`, the counts summing to every instruction.
    let text = std::fs::read_to_string(&folded).unwrap();
    let mut sum = 0;
    for line in text.lines() {
        let (stack, n) = line.rsplit_once(' ').unwrap_or_else(|| panic!("{line:?}"));
        assert!(!stack.is_empty() && stack.split(';').all(|f| !f.is_empty()), "{line:?}");
        sum += n.parse::<u64>().unwrap();
    }
    assert_eq!(sum, annotated_total);

    // go tool pprof reads the profile.proto: the same total, the hottest function first.
    let Some(o) = run("go", &["tool", "pprof", "-top", &pb]) else {
        skip(Missing::Installed { package: "golang-go" }, "the pprof part: `go` is not installed");
        return;
    };
    let top = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{top}{}", String::from_utf8_lossy(&o.stderr));
    assert!(top.contains(&format!("of {annotated_total} total")), "{top}");
    let hottest = ours.iter().max_by_key(|(_, &n)| n).unwrap().0;
    let first_row = top.lines().skip_while(|l| !l.trim_start().starts_with("flat")).nth(1).unwrap();
    assert!(first_row.ends_with(hottest.as_str()), "{first_row} (expected {hottest})");
}

#[test]
fn bad_exports_are_refused_before_the_program_runs() {
    let o = Command::new(env!("CARGO_BIN_EXE_kansoku")).args(["paths", "--export", "speedscope=x", "--", "true"]).output().unwrap();
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("unknown export format `speedscope` (known: callgrind, collapsed, pprof, perfetto, firefox)"), "{err}");
    let o = Command::new(env!("CARGO_BIN_EXE_kansoku")).args(["paths", "--export", "pprof", "--", "true"]).output().unwrap();
    assert!(String::from_utf8_lossy(&o.stderr).contains("expected FORMAT=FILE"));
    // A file that cannot be created is said before the program runs (it would print here).
    let o = Command::new(env!("CARGO_BIN_EXE_kansoku")).args(["paths", "--export", "callgrind=/nonexistent/dir/k.cg", "--", "echo", "ran"]).output().unwrap();
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("creating /nonexistent/dir/k.cg"), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(o.stdout.is_empty(), "the program ran: {}", String::from_utf8_lossy(&o.stdout));
}

/// Self `Ir` per function and calls per callee of a callgrind file, keyed `object:function`
/// (an unnamed function, Callgrind's `0x…ADDR` or kansoku's `module+0xaddr`, as
/// `object+0xaddr`), and the file's total.
fn callgrind_costs(file: &Path) -> (HashMap<String, u64>, HashMap<String, u64>, u64) {
    let key = |ob: &str, f: &str| {
        let base = ob.rsplit('/').next().unwrap();
        let addr = f.strip_prefix("0x").or_else(|| f.rsplit_once("+0x").filter(|(m, _)| base.starts_with(m)).map(|(_, a)| a));
        match addr.and_then(|a| u64::from_str_radix(a, 16).ok()) {
            Some(a) => format!("{base}+{a:#x}"),
            None => format!("{base}:{f}"),
        }
    };
    let (mut costs, mut calls, mut total) = (HashMap::new(), HashMap::new(), 0);
    walk_callgrind(
        file,
        |ob, f, ir| {
            *costs.entry(key(ob, f)).or_insert(0) += ir;
            total += ir;
        },
        |_, _, cob, cf, n| *calls.entry(key(cob, cf)).or_insert(0) += n,
    );
    (costs, calls, total)
}

/// Reads a callgrind file: `cost(object, function, Ir)` for each cost line and
/// `call(object, function, callee's object, callee, calls)` for each `calls=` line (the
/// inclusive cost line after it is not a cost of the function).
fn walk_callgrind(file: &Path, mut cost: impl FnMut(&str, &str, u64), mut call: impl FnMut(&str, &str, &str, &str, u64)) {
    let text = std::fs::read_to_string(file).unwrap();
    let (mut obs, mut fns) = (HashMap::new(), HashMap::new());
    let name = |spec: &str, names: &mut HashMap<String, String>| -> String {
        match spec.strip_prefix('(').and_then(|s| s.split_once(')')) {
            Some((id, rest)) => {
                if let Some(n) = rest.strip_prefix(' ') {
                    names.insert(id.to_string(), n.to_string());
                }
                names[id].clone()
            }
            None => spec.to_string(),
        }
    };
    let (mut ob, mut cob, mut f, mut cf) = (String::new(), String::new(), String::new(), String::new());
    let mut inclusive_next = false;
    for line in text.lines() {
        if line.starts_with(|c: char| c.is_ascii_digit() || "+-*".contains(c)) {
            if !std::mem::take(&mut inclusive_next) {
                cost(&ob, &f, line.rsplit(' ').next().unwrap().parse().unwrap());
            }
        } else if let Some(s) = line.strip_prefix("ob=") {
            ob = name(s, &mut obs);
        } else if let Some(s) = line.strip_prefix("cob=") {
            cob = name(s, &mut obs);
        } else if let Some(s) = line.strip_prefix("fn=") {
            (f, cob) = (name(s, &mut fns), ob.clone());
        } else if let Some(s) = line.strip_prefix("cfn=") {
            cf = name(s, &mut fns);
        } else if let Some(s) = line.strip_prefix("calls=") {
            call(&ob, &f, &cob, &cf, s.split(' ').next().unwrap().parse().unwrap());
            (inclusive_next, cob) = (true, ob.clone());
        }
    }
}

/// Issue 43: on Debian's bzip2 (200 KB of python3.11 as input), `--scope all`, the
/// callgrind export is Callgrind's own, function by function: every function above 0.1 %
/// of the run has Callgrind's `Ir` and calls (by Callgrind's names), the totals within
/// 0.01 % (a rep string instruction counts once per element; code entered by a jump into
/// another function's middle stays with the function that jumped; PLT stubs are their
/// callers'). The collapsed and pprof exports of the same run give every function the
/// same cost, and pprof's stacks are whole (cumulative above flat).
#[test]
fn bzip2_exports_equal_callgrind_function_by_function() {
    if run("valgrind", &["--version"]).is_none() {
        skip(Missing::Installed { package: "valgrind" }, "valgrind is not installed");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let file = |n: &str| dir.path().join(n).to_str().unwrap().to_string();
    let input = file("in.bin");
    let python = std::fs::read("/usr/bin/python3.11").expect("python3.11 (scripts/setup --tests installs it)");
    std::fs::write(&input, &python[..200_000]).unwrap();
    let (cg, folded, pb, vg) = (file("k.callgrind"), file("k.folded"), file("k.pb.gz"), file("vg.callgrind"));
    let o = Command::new(env!("CARGO_BIN_EXE_kansoku"))
        .args(["paths", "--scope", "all", "--top", "0"])
        .args(["--export", &format!("callgrind={cg}"), "--export", &format!("collapsed={folded}"), "--export", &format!("pprof={pb}")])
        .args(["--", "bzip2", "-c", &input])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let o = Command::new("valgrind").args(["--tool=callgrind", &format!("--callgrind-out-file={vg}"), "bzip2", "-c", &input]).output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let (ours, our_calls, our_total) = callgrind_costs(Path::new(&cg));
    let (theirs, their_calls, their_total) = callgrind_costs(Path::new(&vg));
    assert!(our_total.abs_diff(their_total) * 10_000 <= their_total, "totals: kansoku {our_total}, callgrind {their_total}");
    let big: Vec<&String> = theirs.iter().filter(|(_, &n)| n * 1000 > their_total).map(|(f, _)| f).collect();
    assert!(big.len() >= 8, "{big:?}");
    for f in &big {
        assert_eq!(ours.get(*f), theirs.get(*f), "Ir of {f}");
        assert_eq!(our_calls.get(*f), their_calls.get(*f), "calls of {f}");
    }

    // Collapsed stacks: each function's innermost cost is its callgrind-export cost (by
    // name: both exports name functions alike).
    let by_name = |m: &HashMap<String, u64>| -> HashMap<String, u64> {
        let mut out = HashMap::new();
        for (k, &n) in m {
            let name = k.split_once(':').map_or(k.as_str(), |(_, f)| f).to_string();
            *out.entry(name).or_insert(0) += n;
        }
        out
    };
    let exported = by_name(&ours);
    let mut flat: HashMap<String, u64> = HashMap::new();
    for line in std::fs::read_to_string(&folded).unwrap().lines() {
        let (stack, n) = line.rsplit_once(' ').unwrap();
        *flat.entry(stack.rsplit(';').next().unwrap().to_string()).or_insert(0) += n.parse::<u64>().unwrap();
    }
    let named = |f: &str| f.split_once(':').map_or(f, |(_, n)| n).to_string();
    for f in &big {
        let f = named(f);
        if let Some(&n) = exported.get(&f) {
            assert_eq!(flat.get(&f), Some(&n), "collapsed cost of {f}");
        }
    }
    assert_eq!(flat.values().sum::<u64>(), our_total);

    // pprof: the same flat cost per function, and stacks: a function's cumulative cost
    // (every sample it is on) covers its callees.
    let Some(o) = run("go", &["tool", "pprof", "-raw", &pb]) else {
        skip(Missing::Installed { package: "golang-go" }, "the pprof part: `go` is not installed");
        return;
    };
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let raw = String::from_utf8_lossy(&o.stdout);
    let mut locations = HashMap::new();
    for line in raw.lines().skip_while(|l| !l.starts_with("Locations")).skip(1).take_while(|l| !l.starts_with("Mappings")) {
        let (id, rest) = line.trim().split_once(": ").unwrap();
        let rest = rest.splitn(3, ' ').nth(2).unwrap();
        let rest = rest.rsplit_once(" s=").unwrap().0;
        locations.insert(id.to_string(), rest.rsplit_once(' ').unwrap().0.to_string());
    }
    let (mut pflat, mut cum): (HashMap<String, u64>, HashMap<String, u64>) = (HashMap::new(), HashMap::new());
    for line in raw.lines().skip_while(|l| !l.starts_with("instructions/count")).skip(1).take_while(|l| !l.is_empty() && !l.starts_with("Locations")) {
        let (n, ids) = line.trim().split_once(": ").unwrap();
        let n: u64 = n.parse().unwrap();
        let frames: Vec<&String> = ids.split_whitespace().map(|i| &locations[i]).collect();
        *pflat.entry(frames[0].clone()).or_insert(0) += n;
        for f in frames.iter().collect::<std::collections::HashSet<_>>() {
            *cum.entry((*f).clone()).or_insert(0) += n;
        }
    }
    assert_eq!(pflat, flat, "pprof's flat cost per function is the collapsed stacks'");
    let compress_block = cum["BZ2_compressBlock"];
    assert!(compress_block > pflat["BZ2_compressBlock"] + pflat["BZ2_blockSort"], "cumulative {compress_block} covers BZ2_blockSort");
}

/// `rep stosb` of 1,000+ bytes and of none, a loop and a call per round.
const REP: &str = r#"#include <stdio.h>
static char buf[4096];
__attribute__((noinline)) void fill(char *p, unsigned long n, int v) {
    __asm__ volatile("rep stosb" : "+D"(p), "+c"(n) : "a"(v) : "memory");
}
__attribute__((noinline)) long sum(const char *p, int n) { long s = 0; for (int i = 0; i < n; i++) s += p[i]; return s; }
int main(void) {
    long s = 0;
    for (int i = 0; i < 20; i++) { fill(buf, 1000 + i, i); fill(buf, 0, i); s += sum(buf, 64); }
    printf("%ld\n", s);
    return 0;
}
"#;

/// Issue 43: costs read from an exact trace (`paths --source t.ksk`) are Callgrind's. A
/// trace lists a `rep` instruction once per element; Callgrind counts one execution more
/// (VEX's check of the count at zero), and ld.so's start-up code outside every function
/// is counted once per instruction (it was counted again from each instruction on: the
/// trace's costs came to more than its instructions). The program's functions equal
/// `valgrind --tool=callgrind`'s, and the whole run (`--scope all`) equals `paths` run
/// live on the same tool, function by function and in total.
#[test]
fn exact_trace_costs_equal_callgrind_and_the_live_run() {
    if run("valgrind", &["--version"]).is_none() {
        skip(Missing::Installed { package: "valgrind" }, "valgrind is not installed");
        return;
    }
    let exe = kansoku_examples::build_source("rep", REP, &kansoku_examples::test_build_dir().join("export_cli"), &["-O2", "-g"]).unwrap();
    let program = exe.to_str().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let file = |n: &str| dir.path().join(n).to_str().unwrap().to_string();
    let kansoku = |args: &[&str]| {
        let o = Command::new(env!("CARGO_BIN_EXE_kansoku")).args(args).output().unwrap();
        assert!(o.status.success(), "kansoku {args:?}: {}", String::from_utf8_lossy(&o.stderr));
    };
    let (trace, from_trace, live, program_only, vg) = (file("t.ksk"), file("t.callgrind"), file("l.callgrind"), file("p.callgrind"), file("vg.callgrind"));
    kansoku(&["trace", "exact", "-o", &trace, "--", program]);
    kansoku(&["paths", "--scope", "all", "--source", &trace, "--top", "0", "--export", &format!("callgrind={from_trace}")]);
    kansoku(&["paths", "--scope", "all", "--top", "0", "--export", &format!("callgrind={live}"), "--", program]);
    kansoku(&["paths", "--source", &trace, "--top", "0", "--export", &format!("callgrind={program_only}")]);
    let o = Command::new("valgrind").args(["--tool=callgrind", &format!("--callgrind-out-file={vg}"), program]).output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));

    let (traced, traced_calls, traced_total) = callgrind_costs(Path::new(&from_trace));
    let (ran, ran_calls, ran_total) = callgrind_costs(Path::new(&live));
    assert_eq!(traced_total, ran_total, "the trace's costs and the live run's");
    assert_eq!(traced, ran, "Ir per function, trace against live");
    assert_eq!(traced_calls, ran_calls, "calls per callee, trace against live");

    let (ours, our_calls, _) = callgrind_costs(Path::new(&program_only));
    let (theirs, their_calls, _) = callgrind_costs(Path::new(&vg));
    let base = exe.file_name().unwrap().to_str().unwrap();
    // the functions the program's source wrote (Callgrind names `_start` `(below main)`)
    for f in ["main", "fill", "sum"] {
        let f = format!("{base}:{f}");
        assert!(theirs.contains_key(&f), "{f} in {theirs:?}");
        assert_eq!(ours.get(&f), theirs.get(&f), "Ir of {f}, trace against callgrind");
    }
    // fill: 20 × (its other instructions, 1,000 + i elements + 1, and 1 for the empty one)
    let fill = theirs[&format!("{base}:fill")];
    assert!(fill > 20 * 1000 + 190 + 20, "fill {fill}");
    assert_eq!(our_calls.get(&format!("{base}:fill")), their_calls.get(&format!("{base}:fill")));
    assert_eq!(their_calls.get(&format!("{base}:fill")), Some(&40));
}

/// Calls per (caller, callee) from a callgrind file, for callers in object `object`
/// (callees outside every object's `.text`, Callgrind's `???`, summed under `???`).
fn callgrind_arcs(file: &Path, object: &str) -> HashMap<(String, String), u64> {
    let mut arcs = HashMap::new();
    walk_callgrind(
        file,
        |_, _, _| {},
        |ob, f, cob, cf, n| {
            if ob.rsplit('/').next() == Some(object) {
                let callee = if cob == "???" { "???".to_string() } else { format!("{}:{cf}", cob.rsplit('/').next().unwrap()) };
                *arcs.entry((f.to_string(), callee)).or_insert(0) += n;
            }
        },
    );
    arcs
}

/// Lazily bound calls (`.plt`, through ld.so's binder), one of them to a function whose
/// address the program also takes.
const LAZY: &str = r#"#include <dirent.h>
#include <stdlib.h>
void *(*volatile alloc)(size_t) = malloc;
__attribute__((noinline)) int listdir(const char *path) {
    DIR *d = opendir(path);
    int n = 0;
    if (!d) return -1;
    while (readdir(d)) n++;
    closedir(d);
    char *p = malloc(16);
    free(alloc(8));
    free(p);
    return n;
}
int main(void) { int n = 0; for (int i = 0; i < 3; i++) n += listdir("/"); return n < 0; }
"#;

/// Issue 43: the calls of a program's function are Callgrind's where the linker put stubs:
/// a lazily bound `.plt` call is the caller's call of the function bound (ld.so's binder
/// ends its frame as it jumps there, Callgrind's `pop_on_jump`), and a `.plt.got` stub (the
/// C runtime's call of `__cxa_finalize`), which Valgrind sees outside the module's `.text`
/// (object `???`) and does not skip, is a call of its own. The program's functions have Callgrind's Ir, and its call arcs
/// Callgrind's counts, `--scope all` as `paths` runs live.
#[test]
fn lazy_plt_and_plt_got_calls_equal_callgrind() {
    if run("valgrind", &["--version"]).is_none() {
        skip(Missing::Installed { package: "valgrind" }, "valgrind is not installed");
        return;
    }
    let exe = kansoku_examples::build_source("lazy", LAZY, &kansoku_examples::test_build_dir().join("export_cli"), &["-O2", "-g", "-Wl,-z,lazy"]).unwrap();
    let program = exe.to_str().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let (ours, theirs) = (dir.path().join("k.callgrind"), dir.path().join("vg.callgrind"));
    let o = Command::new(env!("CARGO_BIN_EXE_kansoku"))
        .args(["paths", "--scope", "all", "--top", "0", "--export", &format!("callgrind={}", ours.display()), "--", program])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let o = Command::new("valgrind").args(["--tool=callgrind", &format!("--callgrind-out-file={}", theirs.display()), program]).output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));

    let base = exe.file_name().unwrap().to_str().unwrap();
    let (our_arcs, their_arcs) = (callgrind_arcs(&ours, base), callgrind_arcs(&theirs, base));
    let arc = |f: &str, callee: &str| ("listdir".to_string(), format!("{f}{callee}"));
    assert_eq!(their_arcs.get(&arc("libc.so.6:", "opendir")), Some(&3), "{their_arcs:?}");
    assert_eq!(their_arcs.get(&arc("ld-linux-x86-64.so.2:", "_dl_runtime_resolve_xsave")), Some(&4), "{their_arcs:?}");
    let source = |arcs: &HashMap<(String, String), u64>| -> HashMap<(String, String), u64> {
        arcs.iter().filter(|((f, _), _)| f == "listdir" || f == "main").map(|(k, &v)| (k.clone(), v)).collect()
    };
    assert_eq!(source(&our_arcs), source(&their_arcs), "the calls of main and listdir");
    // the C runtime's `__cxa_finalize` call goes through `.plt.got`: one call into `???`
    let stub_calls = |arcs: &HashMap<(String, String), u64>| arcs.iter().filter(|((_, c), _)| c == "???").map(|(_, &n)| n).sum::<u64>();
    assert_eq!(stub_calls(&their_arcs), 1, "{their_arcs:?}");
    assert_eq!(stub_calls(&our_arcs), 1, "{our_arcs:?}");
    let (ir, _, _) = callgrind_costs(&ours);
    let (their_ir, _, _) = callgrind_costs(&theirs);
    for f in ["main", "listdir"] {
        let f = format!("{base}:{f}");
        assert_eq!(ir.get(&f), their_ir.get(&f), "Ir of {f}");
    }
}
