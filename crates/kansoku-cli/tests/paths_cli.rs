//! `kansoku paths` as a user runs it: both live sources, a recording, exports, the CFG
//! picture, and bad input.

mod harness;
use harness::*;

use std::process::{Command, Output};

use kansoku_examples::{build, test_build_dir};

fn json(o: &Output) -> serde_json::Value {
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    serde_json::from_slice(&o.stdout).unwrap()
}

/// `kansoku paths ARGS -o FILE.json -- PROGRAM...`: a live run's whole report, read from the
/// file (stdout and stderr are the program's).
fn live_json(args: &[&str], program: &[&str]) -> serde_json::Value {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("report.json");
    let mut all = args.to_vec();
    all.extend(["-o", file.to_str().unwrap(), "--"]);
    all.extend(program);
    let o = kansoku(&all);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap()
}

fn walk_paths(v: &serde_json::Value) -> Vec<(String, u64)> {
    let mut p: Vec<(String, u64)> =
        v["paths"].as_array().unwrap().iter().map(|p| (p["text"].as_str().unwrap().to_string(), p["count"].as_u64().unwrap())).collect();
    p.sort();
    p
}

#[test]
fn figure_two_from_both_sources_and_a_recording() {
    let p = build("paths", &test_build_dir()).unwrap();
    let prog = p.to_str().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let ksk = dir.path().join("blocks.ksk");
    // 6 walks of 9 elements: even walks see 0..8 (last even: ACDE), odd ones 1..9 (last odd: ABDE)
    let want = vec![
        ("walk: BB0 BB1 BB3".to_string(), 24),      // ABD: 4 odd of 0..7 + 4 odd of 1..8, x3
        ("walk: BB0 BB1 BB3 BB4".to_string(), 3),   // ABDE
        ("walk: BB0 BB2 BB3".to_string(), 24),      // ACD
        ("walk: BB0 BB2 BB3 BB4".to_string(), 3),   // ACDE
    ];
    let rec = ksk.to_str().unwrap();
    let v = live_json(&["paths", "--function", "walk", "--record", rec], &[prog, "9", "6"]);
    assert_eq!(walk_paths(&v), want, "valgrind");
    assert_eq!(v["source"], "valgrind");
    let l = live_json(&["paths", "--source", "lackey", "--function", "walk"], &[prog, "9", "6"]);
    assert_eq!(walk_paths(&l), want, "lackey");
    assert_eq!(l["source"], "lackey");
    let s = live_json(&["paths", "--source", "step", "--function", "walk"], &[prog, "9", "6"]);
    assert_eq!(walk_paths(&s), want, "step");
    // an exact trace on the fastest engine (kansoku's Valgrind tool where it is built)
    let e = live_json(&["paths", "--source", "exact", "--function", "walk"], &[prog, "9", "6"]);
    assert_eq!(walk_paths(&e), want, "exact");
    assert!(e["source"].as_str().unwrap().starts_with("exact ("), "{}", e["source"]);
    // the whole tables too, not only walk's: the same paths from every live source
    let all = |source: &str| live_json(&["paths", "--source", source], &[prog, "300", "3"])["paths"].clone();
    let whole = all("valgrind");
    assert_eq!(all("exact"), whole);
    assert_eq!(all("step"), whole);
    let r = json(&kansoku(&["paths", "--source", rec, "--function", "walk", "--json"]));
    assert_eq!(walk_paths(&r), want, "recording");
    let walk = v["functions"].as_array().unwrap().iter().find(|f| f["function"] == "walk").unwrap();
    assert_eq!((walk["possible_paths"].as_u64(), walk["possible_paths_run"].as_u64()), (Some(4), Some(4)));
}

#[test]
fn exports_and_cfg_picture() {
    let p = build("paths", &test_build_dir()).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let (csv, svg) = (dir.path().join("p.csv"), dir.path().join("walk.svg"));
    let o = kansoku(&["paths", "--source", "step", "-o", csv.to_str().unwrap(), "--cfg", "walk", "--svg", svg.to_str().unwrap(), "--", p.to_str().unwrap(), "5", "2"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    // A program ran: the report is on stderr.
    let out = String::from_utf8_lossy(&o.stderr);
    assert!(out.contains("walk: BB0 BB1 BB3") && out.contains("distinct paths"), "{out}");
    let csv = std::fs::read_to_string(csv).unwrap();
    assert!(csv.starts_with("rank,count,share,instructions,ball_larus,path,lines\n"), "{csv}");
    assert!(csv.contains("\"walk: BB0 BB2 BB3 BB4\""), "{csv}");
    let svg = std::fs::read_to_string(svg).unwrap();
    assert!(svg.contains("<svg") && svg.contains("BB3") && svg.contains("path #1"), "picture has blocks and hot paths");
    let o = kansoku(&["paths", "--source", "step", "--cfg", "no_such_fn", "--dot", "/dev/null", "--", p.to_str().unwrap(), "2", "1"]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("no function named 'no_such_fn'"));
}

#[test]
fn crash_reports_paths_so_far_and_the_signal() {
    let p = build("crash", &test_build_dir()).unwrap();
    for source in ["valgrind", "lackey", "step"] {
        let o = kansoku(&["paths", "--source", source, "--", p.to_str().unwrap()]);
        let out = String::from_utf8_lossy(&o.stderr);
        // kansoku ends as the program did: killed by signal 11 is 128 + 11.
        assert_eq!(o.status.code(), Some(139), "{source}: {}", String::from_utf8_lossy(&o.stderr));
        assert!(out.contains("killed by SIGSEGV (11)") && out.contains("paths up to there"), "{source}: {out}");
        assert!(out.contains("main:"), "{source}: paths before the crash are listed\n{out}");
    }
}

#[test]
fn bad_input_is_explained() {
    let p = build("paths", &test_build_dir()).unwrap();
    let o = kansoku(&["paths", "--valgrind", "/nonexistent/valgrind", "--", p.to_str().unwrap()]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success() && err.contains("/nonexistent/valgrind") && err.contains("--source step"), "{err}");

    // A Lackey log with a garbled line in the middle.
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("lackey.log");
    let vg = Command::new("bash")
        .arg("-c")
        .arg(format!(
            "valgrind --tool=lackey --trace-superblocks=yes --basic-counts=no --vex-guest-chase=no --vex-iropt-unroll-thresh=0 -v -v --log-fd=9 {} 5 1 9>{}",
            p.display(),
            log.display()
        ))
        .status()
        .unwrap();
    assert!(vg.success());
    let mut text = std::fs::read_to_string(&log).unwrap();
    let at = text.match_indices("\nSB ").nth(3000).unwrap().0;
    text.insert_str(at, "\nSB 12345zz6");
    std::fs::write(&log, text).unwrap();
    let o = kansoku(&["paths", "--source", log.to_str().unwrap(), "--function", "walk"]);
    let (out, err) = (String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
    assert!(o.status.success(), "{err}");
    assert!(err.contains("not superblock entries") && err.contains("SB 12345zz6"), "{err}");
    assert!(out.contains("walk: BB0 BB2 BB3 BB4"), "{out}");

    let o = kansoku(&["paths", "--source", p.to_str().unwrap()]);
    assert!(!o.status.success() && String::from_utf8_lossy(&o.stderr).contains("no Lackey superblock lines"));
}

/// A compressor linked against Debian's zlib: nearly all of its blocks run in libz.so.
fn zlib_program() -> std::path::PathBuf {
    let src =
        "#include <zlib.h>\n#include <stdio.h>\n#include <stdlib.h>\n\
         __attribute__((noinline, used)) int never_called(int x) { return x * 3; }\n\
         int main(int argc, char **argv) {\n\
           int rounds = argc > 1 ? atoi(argv[1]) : 3;\n\
           static unsigned char in[65536], out[70000];\n\
           for (int i = 0; i < (int)sizeof in; i++) in[i] = (unsigned char)((i * 7) ^ (i >> 5));\n\
           unsigned long total = 0;\n\
           for (int r = 0; r < rounds; r++) { uLongf n = sizeof out; if (compress(out, &n, in, sizeof in) != Z_OK) return 2; total += n; }\n\
           printf(\"%lu\\n\", total);\n\
           return 0;\n\
         }\n";
    kansoku_examples::build_source("squeeze", src, &kansoku_examples::test_build_dir(), &["-O2", "-g", "-lz"]).expect("zlib1g-dev (scripts/setup)")
}

#[test]
fn work_outside_the_program_and_unknown_functions_are_said() {
    let prog = zlib_program();
    let prog = prog.to_str().unwrap();
    let o = kansoku(&["paths", "--", prog, "2"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert!(err.contains("blocks executed") && err.contains("use --scope all"), "{err}");
    let o = kansoku(&["paths", "--scope", "all", "--", prog, "2"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success() && !err.contains("use --scope all"), "{err}");

    let o = kansoku(&["paths", "--function", "no_such_thing", "--", prog, "1"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success() && err.contains("no function named 'no_such_thing'"), "{err}");
    let o = kansoku(&["paths", "--function", "never_called", "--", prog, "1"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success() && err.contains("function 'never_called' did not run"), "{err}");
    let o = kansoku(&["paths", "--function", "main", "--", prog, "1"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
}

/// The share column is the share of executed instructions (issue 14), the figure callgrind
/// reports: walk's paths add up to exactly callgrind's instruction count for walk (its
/// recursion levels `walk` and `walk'2` together), and to the same share within 0.1 point.
#[test]
fn path_shares_are_instruction_shares_equal_to_callgrinds() {
    let p = build("paths", &test_build_dir()).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let cg = dir.path().join("cg.out");
    let run = Command::new("valgrind")
        .arg("--tool=callgrind")
        .arg(format!("--callgrind-out-file={}", cg.display()))
        .arg(&p)
        .args(["1000", "200"])
        .output()
        .unwrap();
    assert!(run.status.success(), "{}", String::from_utf8_lossy(&run.stderr));
    let annotate = Command::new("callgrind_annotate").arg("--threshold=100").arg(&cg).output().unwrap();
    let text = String::from_utf8_lossy(&annotate.stdout);
    let ir = |line: &str| line.split_whitespace().next().unwrap().replace(',', "").parse::<u64>().unwrap();
    let total = text.lines().find(|l| l.contains("PROGRAM TOTALS")).map(ir).expect("callgrind totals");
    // Function lines only (the annotated source below repeats them after "=>").
    let walk: u64 = text.lines().filter(|l| !l.contains("=>") && (l.contains(":walk [") || l.contains(":walk'"))).map(ir).sum();
    assert!(walk > 1_000_000, "{text}");

    let json = dir.path().join("p.json");
    let o = kansoku(&["paths", "--scope", "all", "-o", json.to_str().unwrap(), "--", p.to_str().unwrap(), "1000", "200"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let walk_paths: Vec<&serde_json::Value> =
        v["paths"].as_array().unwrap().iter().filter(|p| p["text"].as_str().unwrap().starts_with("walk:") && !p["text"].as_str().unwrap().contains(" | ")).collect();
    let ours: u64 = walk_paths.iter().map(|p| p["count"].as_u64().unwrap() * p["instructions"].as_u64().unwrap()).sum();
    assert_eq!(ours, walk, "instructions in walk: kansoku paths vs callgrind");
    let share: f64 = walk_paths.iter().map(|p| p["share"].as_f64().unwrap()).sum();
    let cg_share = walk as f64 / total as f64;
    assert!((share - cg_share).abs() < 0.001, "walk's share {share} vs callgrind's {cg_share}");
}

/// An irreducible loop (two entries, neither dominating the other) has no dominator back
/// edge: under `--back-edges loops` its paths go round it and repeat blocks, which is said
/// and flagged (issue 14), not left as paths silently without a Ball–Larus id.
#[test]
fn loops_mode_flags_paths_that_repeat_blocks() {
    let dir = tempfile::tempdir().unwrap();
    let src =
        "#include <stdlib.h>\n\
         __attribute__((noinline)) int irr(int n, int x) { int i = 0; if (x) goto B; A: i++; if (i > n) return i; B: i += 2; if (i < n) goto A; return i; }\n\
         int main(int argc, char **argv) { int s = 0; for (int k = 0; k < 50; k++) s += irr(atoi(argv[1]), k & 1); return s == 0; }\n";
    let bin = kansoku_examples::build_source("irreducible", src, &kansoku_examples::test_build_dir(), &["-O1", "-g"]).unwrap();
    let json = dir.path().join("p.json");
    let o = kansoku(&["paths", "--back-edges", "loops", "--function", "irr", "-o", json.to_str().unwrap(), "--", bin.to_str().unwrap(), "40"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert!(err.contains("enter a block twice"), "{err}");
    let v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let flagged: Vec<&serde_json::Value> = v["paths"].as_array().unwrap().iter().filter(|p| p["repeats_block"] == true).collect();
    assert!(!flagged.is_empty() && flagged.iter().all(|p| p["ball_larus"].is_null()), "{}", v["paths"]);
    // The seed's address rule cuts every backward jump: no path repeats a block.
    let o = kansoku(&["paths", "--back-edges", "address", "--function", "irr", "-o", json.to_str().unwrap(), "--", bin.to_str().unwrap(), "40"]);
    assert!(o.status.success());
    let v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert!(v["paths"].as_array().unwrap().iter().all(|p| p["repeats_block"] == false), "{}", v["paths"]);
}

/// Paths counted inside kansoku's Valgrind tool (the default) equal the paths of the stream
/// of every superblock (`--count-in stream`), whole tables, on Debian's gzip and on a
/// program of ours linked against Debian's zlib, libraries in scope; and what the tool
/// cannot count is refused with the reason.
#[test]
fn paths_counted_in_the_tool_equal_the_stream_on_real_programs() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("input");
    let text: Vec<u8> = (0..200_000u32).flat_map(|i| format!("line {} of {}\n", i % 977, i % 13).into_bytes()).take(300_000).collect();
    std::fs::write(&input, text).unwrap();
    let zlib = zlib_program();
    for (name, program) in [("gzip", vec!["gzip", "-c", "-k", input.to_str().unwrap()]), ("zlib", vec![zlib.to_str().unwrap(), "2"])] {
        let counted = live_json(&["paths", "--scope", "all"], &program);
        let streamed = live_json(&["paths", "--scope", "all", "--count-in", "stream"], &program);
        assert_eq!((&counted["source"], &counted["counted_in"]), (&"valgrind".into(), &"tool".into()), "{name}");
        assert_eq!((&streamed["source"], &streamed["counted_in"]), (&"valgrind".into(), &"kansoku".into()), "{name}");
        let table = |v: &serde_json::Value| walk_paths(v);
        assert!(table(&counted).len() > 100, "{name}: {} paths", table(&counted).len());
        assert_eq!(table(&counted), table(&streamed), "{name}: the same paths and counts");
        assert_eq!(counted["summary"]["blocks_seen"], streamed["summary"]["blocks_seen"], "{name}");
        assert_eq!(counted["input"]["superblocks"], streamed["input"]["superblocks"], "{name}");
        let (tool_bytes, stream_bytes) = (counted["input"]["stream_bytes"].as_u64().unwrap(), streamed["input"]["stream_bytes"].as_u64().unwrap());
        assert!(tool_bytes * 10 < stream_bytes, "{name}: the tool's table ({tool_bytes} bytes) is far smaller than the stream ({stream_bytes})");
    }
    let o = kansoku(&["paths", "--count-in", "tool", "--calls", "frames", "--", "gzip", "-c", input.to_str().unwrap()]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success() && err.contains("--calls frames") && err.contains("--count-in stream"), "{err}");
}
