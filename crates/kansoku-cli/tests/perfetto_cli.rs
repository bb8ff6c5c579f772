//! `--export perfetto=FILE` (issue 16) read by a consumer that is not kansoku: protoc
//! decodes each trace against Perfetto's own schema (`perfetto_trace.proto`, shipped in
//! the `tracing-perfetto` crate on crates.io; scripts/setup fetches it), and the decoded
//! slices, instants and counters are checked against kansoku's own report of the run.

mod harness;
use harness::{kansoku_cmd, ok, ok_json, skip, Missing};

mod agent_build;
use agent_build::agent;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;

/// The crate whose sources carry Perfetto's merged schema, `protos/perfetto_trace.proto`.
const SCHEMA_CRATE: &str = "tracing-perfetto";
const SCHEMA_VERSION: &str = "=0.1.5";

/// Perfetto's schema: `$KANSOKU_PERFETTO_PROTO`, or the file in the schema crate's sources
/// as cargo has them (offline first: scripts/setup fetched it). `Err` says why not.
fn perfetto_schema() -> Result<PathBuf, String> {
    if let Some(p) = std::env::var_os("KANSOKU_PERFETTO_PROTO") {
        return Ok(PathBuf::from(p));
    }
    let dir = std::env::temp_dir().join(format!("kansoku-perfetto-schema-{}", std::process::id()));
    std::fs::create_dir_all(dir.join("src")).map_err(|e| e.to_string())?;
    let manifest = format!("[package]\nname = \"schema-locator\"\nversion = \"0.0.0\"\nedition = \"2021\"\n\n[dependencies]\n{SCHEMA_CRATE} = \"{SCHEMA_VERSION}\"\n\n[workspace]\n");
    std::fs::write(dir.join("Cargo.toml"), manifest).map_err(|e| e.to_string())?;
    std::fs::write(dir.join("src/lib.rs"), "").map_err(|e| e.to_string())?;
    let mut why = String::new();
    for offline in [true, false] {
        let mut c = Command::new(env!("CARGO"));
        c.args(["metadata", "--format-version", "1", "--manifest-path"]).arg(dir.join("Cargo.toml"));
        if offline {
            c.arg("--offline");
        }
        let o = c.output().map_err(|e| format!("cargo metadata: {e}"))?;
        if !o.status.success() {
            why = String::from_utf8_lossy(&o.stderr).trim().to_string();
            continue;
        }
        let v: serde_json::Value = serde_json::from_slice(&o.stdout).map_err(|e| e.to_string())?;
        let package = v["packages"].as_array().and_then(|ps| ps.iter().find(|p| p["name"] == SCHEMA_CRATE));
        if let Some(manifest) = package.and_then(|p| p["manifest_path"].as_str()) {
            let proto = Path::new(manifest).with_file_name("protos/perfetto_trace.proto");
            let _ = std::fs::remove_dir_all(&dir);
            return if proto.is_file() { Ok(proto) } else { Err(format!("{} has no {}", SCHEMA_CRATE, proto.display())) };
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    Err(format!("cargo cannot get the {SCHEMA_CRATE} crate ({why})"))
}

/// protoc and the schema, or the reason the test is skipped (said on stderr).
fn consumer() -> Option<PathBuf> {
    if Command::new("protoc").arg("--version").output().is_err() {
        skip(Missing::Installed { package: "protobuf-compiler" }, "protoc is not installed");
        return None;
    }
    // found once: the tests of this file run in parallel and would share the locator's dir
    static SCHEMA: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    match SCHEMA.get_or_init(perfetto_schema) {
        Ok(p) => Some(p.clone()),
        Err(why) => {
            skip(Missing::Installed { package: "the tracing-perfetto crate's schema (cargo fetch)" }, format!("Perfetto's schema is not at hand: {why}"));
            None
        }
    }
}

/// A text-format message as protoc prints it: fields in order, a value or a message each.
#[derive(Debug, Default)]
struct Msg(Vec<(String, Field)>);

#[derive(Debug)]
enum Field {
    Value(String),
    Msg(Msg),
}

impl Msg {
    fn all<'a>(&'a self, name: &str) -> impl Iterator<Item = &'a Field> + 'a {
        let name = name.to_string();
        self.0.iter().filter(move |(n, _)| *n == name).map(|(_, f)| f)
    }
    fn msg(&self, name: &str) -> Option<&Msg> {
        self.all(name).find_map(|f| if let Field::Msg(m) = f { Some(m) } else { None })
    }
    /// A scalar, unquoted (strings as protoc escapes them: the names here need none).
    fn value(&self, name: &str) -> Option<&str> {
        self.all(name).find_map(|f| if let Field::Value(v) = f { Some(v.trim_matches('"')) } else { None })
    }
    fn number(&self, name: &str) -> Option<u64> {
        self.value(name).map(|v| v.parse().unwrap_or_else(|_| panic!("{name}: {v}")))
    }
}

/// Parses protoc's `--decode` output (`name: value` lines and `name {` … `}` blocks).
fn parse_text(text: &str) -> Msg {
    let mut stack = vec![(String::new(), Msg::default())];
    for line in text.lines().map(str::trim).filter(|l| !l.is_empty()) {
        if line == "}" {
            let (name, done) = stack.pop().expect("balanced braces");
            stack.last_mut().expect("an enclosing message").1 .0.push((name, Field::Msg(done)));
        } else if let Some(name) = line.strip_suffix(" {") {
            stack.push((name.to_string(), Msg::default()));
        } else {
            let (name, value) = line.split_once(": ").unwrap_or_else(|| panic!("unexpected protoc line: {line}"));
            stack.last_mut().unwrap().1 .0.push((name.to_string(), Field::Value(value.to_string())));
        }
    }
    assert_eq!(stack.len(), 1, "unbalanced protoc output");
    stack.pop().unwrap().1
}

/// `protoc --decode perfetto.protos.Trace` of `trace`, parsed.
fn decode(schema: &Path, trace: &Path) -> Msg {
    let dir = schema.parent().unwrap();
    let o = Command::new("protoc")
        .arg(format!("--proto_path={}", dir.display()))
        .args(["--decode", "perfetto.protos.Trace", "perfetto_trace.proto"])
        .stdin(Stdio::from(std::fs::File::open(trace).unwrap()))
        .output()
        .unwrap();
    assert!(o.status.success(), "protoc --decode {}: {}", trace.display(), String::from_utf8_lossy(&o.stderr));
    parse_text(&String::from_utf8(o.stdout).unwrap())
}

/// A decoded trace: its tracks by uuid and its events in file order.
struct Trace {
    tracks: HashMap<u64, Track>,
    events: Vec<Event>,
}

#[derive(Debug)]
struct Track {
    name: String,
    tid: Option<u64>,
    parent: Option<u64>,
    counter: bool,
}

#[derive(Debug)]
struct Event {
    at: u64,
    kind: String,
    track: u64,
    name: Option<String>,
    value: Option<f64>,
    args: HashMap<String, String>,
}

fn trace_of(m: &Msg) -> Trace {
    let (mut tracks, mut events) = (HashMap::new(), Vec::new());
    for p in m.all("packet").filter_map(|f| if let Field::Msg(p) = f { Some(p) } else { None }) {
        assert_eq!(p.number("trusted_packet_sequence_id"), Some(1), "every packet on one sequence");
        if let Some(d) = p.msg("track_descriptor") {
            let thread = d.msg("thread");
            let name = d.value("name").or_else(|| thread.and_then(|t| t.value("thread_name"))).or_else(|| d.msg("process").and_then(|p| p.value("process_name")));
            let track = Track { name: name.unwrap_or("").to_string(), tid: thread.and_then(|t| t.number("tid")), parent: d.number("parent_uuid"), counter: d.msg("counter").is_some() };
            tracks.insert(d.number("uuid").expect("a track has a uuid"), track);
        }
        if let Some(e) = p.msg("track_event") {
            let args = e.all("debug_annotations").filter_map(|f| if let Field::Msg(a) = f { Some(a) } else { None });
            let args = args.map(|a| (a.value("name").unwrap().to_string(), a.0.iter().find(|(n, _)| n.ends_with("_value")).map(|(_, f)| if let Field::Value(v) = f { v.trim_matches('"').to_string() } else { String::new() }).unwrap_or_default())).collect();
            events.push(Event {
                at: p.number("timestamp").expect("an event has a time"),
                kind: e.value("type").unwrap().to_string(),
                track: e.number("track_uuid").expect("an event has a track"),
                name: e.value("name").map(str::to_string),
                value: e.value("double_counter_value").map(|v| v.parse().unwrap()),
                args,
            });
        }
    }
    Trace { tracks, events }
}

/// A slice as the begin and end events lay it out: name, track, start, end, and the names
/// of the slices it is inside of (outermost first).
#[derive(Debug, Clone)]
struct Slice {
    name: String,
    track: u64,
    start: u64,
    end: u64,
    inside: Vec<String>,
}

/// Replays begin/end per track as Perfetto does (an end closes the innermost open slice);
/// panics if a track ends with open slices or goes back in time.
fn slices(t: &Trace) -> Vec<Slice> {
    let mut open: HashMap<u64, Vec<(String, u64)>> = HashMap::new();
    let mut last: HashMap<u64, u64> = HashMap::new();
    let mut done = Vec::new();
    for e in &t.events {
        assert!(t.tracks.contains_key(&e.track), "event on undescribed track {}", e.track);
        let prev = last.insert(e.track, e.at).unwrap_or(0);
        assert!(e.at >= prev, "track {} goes back in time: {} after {prev}", e.track, e.at);
        let stack = open.entry(e.track).or_default();
        match e.kind.as_str() {
            "TYPE_SLICE_BEGIN" => stack.push((e.name.clone().expect("a slice has a name"), e.at)),
            "TYPE_SLICE_END" => {
                let (name, start) = stack.pop().expect("an end closes an open slice");
                let inside = stack.iter().map(|(n, _)| n.clone()).collect();
                done.push(Slice { name, track: e.track, start, end: e.at, inside });
            }
            _ => {}
        }
    }
    for (track, stack) in open {
        assert!(stack.is_empty(), "track {track} ends with open slices {stack:?}");
    }
    done
}

fn count<'a>(names: impl Iterator<Item = &'a str>) -> HashMap<String, u64> {
    let mut n = HashMap::new();
    for name in names {
        *n.entry(name.to_string()).or_insert(0) += 1;
    }
    n
}


/// Two threads calling nested routines; `nap` sleeps (off the CPU, blocked), `tick` is a
/// single point (instants).
const THREADED: &str = r#"#include <pthread.h>
#include <unistd.h>
volatile long sink;
__attribute__((noinline)) void tick(void) { sink++; }
__attribute__((noinline)) void leaf(int i) { sink += i; }
__attribute__((noinline)) void nap(void) { usleep(1000); }
__attribute__((noinline)) void work(int n) { for (int i = 0; i < n; i++) leaf(i); nap(); tick(); }
__attribute__((noinline)) void rec(int d) { if (d > 0) rec(d - 1); sink--; }
static void *other(void *a) { (void)a; for (int i = 0; i < 5; i++) work(3); return 0; }
int main(void) {
    pthread_t t;
    pthread_create(&t, 0, other, 0);
    for (int i = 0; i < 4; i++) { work(2); rec(3); }
    pthread_join(t, 0);
    return 0;
}
"#;

fn build_threaded() -> PathBuf {
    kansoku_examples::build_source("threaded", THREADED, &kansoku_examples::test_build_dir().join("perfetto_cli"), &["-O2", "-g", "-pthread"]).unwrap()
}

/// CALLS, built once per test run.
fn build_calls() -> String {
    let exe = kansoku_examples::build_source("calls", CALLS, &kansoku_examples::test_build_dir().join("perfetto_cli"), &["-O2", "-g"]).unwrap();
    exe.to_str().unwrap().to_string()
}

#[test]
fn monitor_events_perfetto_trace_decodes_to_the_reported_calls_nesting_off_cpu_and_calibration() {
    let Some(schema) = consumer() else { return };
    let dir = tempfile::tempdir().unwrap();
    let program = build_threaded();
    let (report, trace) = (dir.path().join("report.json"), dir.path().join("run.pftrace"));
    let o = kansoku_cmd()
        .env("KANSOKU_AGENT", agent())
        .args(["monitor", "events", "--mechanism", "agent", "--calibrate", "--json"])
        .args(["--probe", "work", "--probe", "leaf", "--probe", "nap", "--probe", "rec", "--probe", "tick:entry"])
        .arg("-o")
        .arg(&report)
        .arg("--export")
        .arg(format!("perfetto={}", trace.display()))
        .arg("--")
        .arg(&program)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(o.stdout.is_empty(), "the program prints nothing, and neither does kansoku on stdout");
    assert!(String::from_utf8_lossy(&o.stderr).contains("perfetto export written to"), "{}", String::from_utf8_lossy(&o.stderr));
    let v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap();
    let t = trace_of(&decode(&schema, &trace));
    let all = slices(&t);

    // one slice per call the report counts, on thread tracks
    let on_threads: Vec<&Slice> = all.iter().filter(|s| t.tracks[&s.track].tid.is_some()).collect();
    let per_routine = count(on_threads.iter().map(|s| s.name.as_str()));
    for r in v["report"]["routines"].as_array().unwrap() {
        let name = r["name"].as_str().unwrap();
        assert_eq!(per_routine.get(name).copied().unwrap_or(0), r["calls"].as_u64().unwrap(), "slices of {name} vs the report's calls");
    }
    assert_eq!(per_routine.values().sum::<u64>(), 4 * 2 + 5 * 3 + 9 + 9 + 4 * 4, "leaf, nap, work, rec calls of the program");
    // nesting: leaf and nap inside work, rec inside rec down to depth 4, work at the top
    for s in &on_threads {
        let expected_parent = match s.name.as_str() {
            "leaf" | "nap" => Some("work"),
            "work" => None,
            "rec" => (!s.inside.is_empty()).then_some("rec"),
            other => panic!("unexpected slice {other}"),
        };
        assert_eq!(s.inside.last().map(String::as_str), expected_parent, "{s:?}");
    }
    assert_eq!(on_threads.iter().filter(|s| s.name == "rec").map(|s| s.inside.len()).max(), Some(3), "rec(3) nests four deep");
    // two threads: the main one with 4 work calls, the other with 5
    let works_per_thread = count(on_threads.iter().filter(|s| s.name == "work").map(|s| t.tracks[&s.track].name.as_str()));
    let mut works: Vec<u64> = works_per_thread.values().copied().collect();
    works.sort();
    assert_eq!(works, [4, 5], "{works_per_thread:?}");

    // tick's hits as instants, as many as the report's hits of the point
    let ticks = t.events.iter().filter(|e| e.kind == "TYPE_INSTANT" && e.name.as_deref() == Some("tick:entry")).count() as u64;
    let point = v["report"]["points"].as_array().unwrap().iter().find(|p| p["name"] == "tick:entry").unwrap();
    assert_eq!(ticks, point["hits"].as_u64().unwrap());
    assert_eq!(ticks, 9);

    // off-CPU lanes under the threads; nap's blocked time is inside their `blocked` slices
    let off: Vec<&Slice> = all.iter().filter(|s| t.tracks[&s.track].name.starts_with("off-CPU")).collect();
    assert!(off.iter().all(|s| t.tracks[&s.track].parent.is_some_and(|p| t.tracks[&p].tid.is_some())), "off-CPU lanes hang under thread tracks");
    let blocked: u64 = off.iter().filter(|s| s.name == "blocked").map(|s| s.end - s.start).sum();
    let nap = v["report"]["routines"].as_array().unwrap().iter().find(|r| r["name"] == "nap").unwrap();
    let nap_blocked = nap["blocked_ns"].as_f64().unwrap();
    assert!(nap_blocked >= 9.0 * 1e6 * 0.9, "nine naps of 1 ms are blocked time: {nap}");
    assert!(blocked as f64 >= nap_blocked, "off-CPU slices ({blocked} ns blocked) hold nap's blocked time ({nap_blocked} ns)");

    // the metadata instant: mechanism and the calibration the report subtracted
    let meta = t.events.iter().find(|e| e.name.as_deref() == Some("kansoku")).expect("a kansoku metadata instant");
    assert_eq!(meta.at, t.events.iter().map(|e| e.at).min().unwrap(), "metadata at the trace's first moment");
    assert_eq!(meta.args["mechanism"], "agent");
    assert_eq!(meta.args["time_axis"], "CLOCK_MONOTONIC nanoseconds");
    let overhead: f64 = meta.args["overhead_subtracted_ns"].parse().unwrap();
    let reported = v["calibration"]["overhead_ns"].as_f64().unwrap();
    assert!((overhead - reported).abs() <= 1e-9 * reported.abs().max(1.0), "{overhead} vs {reported}");
    assert_eq!(meta.args["calibration_pairs"], v["calibration"]["samples"].to_string());
    assert!(!t.events.iter().any(|e| e.name.as_deref().is_some_and(|n| n.starts_with("calibrate"))), "calibration hits are not drawn");
    eprintln!("events: slices {per_routine:?}, {ticks} tick instants, {} off-CPU slices ({blocked} ns blocked, nap {nap_blocked} ns), overhead {overhead} ns", off.len());
}

#[test]
fn an_export_a_command_cannot_write_is_refused_before_the_program_runs() {
    let o = kansoku_cmd().args(["monitor", "events", "--probe", "main", "--export", "pprof=x.pb.gz", "--", "echo", "ran"]).output().unwrap();
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("--export pprof: `kansoku monitor events` writes perfetto"), "{err}");
    assert!(o.stdout.is_empty(), "the program ran: {}", String::from_utf8_lossy(&o.stdout));
}

/// Nested calls, a recursion and a loop for the marker, single-threaded.
const CALLS: &str = r#"volatile long sink;
__attribute__((noinline)) void leaf(int i) { sink += i; }
__attribute__((noinline)) void rec(int d) { if (d > 0) rec(d - 1); sink--; }
__attribute__((noinline)) void work(int n) { for (int i = 0; i < n; i++) leaf(i); rec(2); }
int main(void) { for (int i = 0; i < 5; i++) work(3); return 0; }
"#;

/// Calls per callee in a callgrind file (`cfn=(id) name`, then `calls=N …`).
fn callgrind_calls(file: &Path) -> HashMap<String, u64> {
    let (mut names, mut calls) = (HashMap::new(), HashMap::new());
    let mut callee = String::new();
    for line in std::fs::read_to_string(file).unwrap().lines() {
        // a name is spelled out at its first use, by `fn=` or `cfn=`, then only its id
        let spec = line.strip_prefix("fn=(").or_else(|| line.strip_prefix("cfn=("));
        if let Some((id, name)) = spec.and_then(|s| s.split_once(')')) {
            if !name.trim().is_empty() {
                names.insert(id.to_string(), name.trim().to_string());
            }
            if line.starts_with("cfn=") {
                callee = names[id].clone();
            }
        } else if let Some(rest) = line.strip_prefix("calls=") {
            *calls.entry(callee.clone()).or_insert(0) += rest.split(' ').next().unwrap().parse::<u64>().unwrap();
        }
    }
    calls
}

#[test]
fn exact_trace_perfetto_export_has_the_calls_kansoku_counts_nested_with_markers_and_iterations() {
    let Some(schema) = consumer() else { return };
    let dir = tempfile::tempdir().unwrap();
    let d = |name: &str| dir.path().join(name).to_str().unwrap().to_string();
    let program = build_calls();

    // the whole run: slices per function = the calls kansoku's callgrind export counts
    ok(&["trace", "exact", "-o", &d("t.ksk"), "--", &program]);
    ok(&["paths", "--source", &d("t.ksk"), "--export", &format!("perfetto={}", d("t.pftrace")), "--export", &format!("callgrind={}", d("t.cg"))]);
    let t = trace_of(&decode(&schema, Path::new(&d("t.pftrace"))));
    let all = slices(&t);
    let per_function = count(all.iter().map(|s| s.name.as_str()));
    let calls = callgrind_calls(Path::new(&d("t.cg")));
    for f in ["work", "leaf", "rec"] {
        assert_eq!(per_function.get(f), calls.get(f), "{f}: slices vs the callgrind export's calls");
    }
    assert_eq!((per_function["work"], per_function["leaf"], per_function["rec"]), (5, 15, 15));
    for s in all.iter().filter(|s| ["work", "leaf", "rec"].contains(&s.name.as_str())) {
        let parent = s.inside.last().map(String::as_str);
        match s.name.as_str() {
            "work" => assert_eq!(parent, Some("main"), "{s:?}"),
            "leaf" => assert_eq!(parent, Some("work"), "{s:?}"),
            _ => assert!(matches!(parent, Some("work" | "rec")), "{s:?}"),
        }
    }
    assert_eq!(all.iter().filter(|s| s.name == "rec").map(|s| s.inside.iter().filter(|n| *n == "rec").count()).max(), Some(2), "rec(2) nests three deep");
    let meta = t.events.iter().find(|e| e.name.as_deref() == Some("kansoku")).expect("a kansoku metadata instant");
    assert!(meta.args["time_axis"].starts_with("instruction index"), "{:?}", meta.args);
    let show: serde_json::Value = ok_json(&["show", &d("t.ksk"), "--json", "--limit", "1", "--counts"]);
    // the index counts each basic block entry's instructions, a `rep` string instruction
    // once per entry where the trace lists every repetition: at most the trace's count
    let (index, traced) = (meta.args["instructions"].parse::<u64>().unwrap(), show["summary"]["instructions"].as_u64().unwrap());
    assert!(index <= traced && index as f64 >= 0.99 * traced as f64, "the index ends at {index}, the trace has {traced} instructions");
    eprintln!("whole run: {} slices (work {}, leaf {}, rec {}), index {index} of {traced} traced instructions", all.len(), per_function["work"], per_function["leaf"], per_function["rec"]);

    // a marker window: one instant per marker hit, one iteration slice from each
    ok(&["trace", "exact", "--marker", "work", "--iterations", "3", "-o", &d("m.ksk"), "--", &program]);
    ok(&["paths", "--source", &d("m.ksk"), "--export", &format!("perfetto={}", d("m.pftrace"))]);
    let t = trace_of(&decode(&schema, Path::new(&d("m.pftrace"))));
    let show: serde_json::Value = ok_json(&["show", &d("m.ksk"), "--json", "--limit", "1", "--counts"]);
    let hits = show["summary"]["markers"].as_u64().unwrap();
    assert!(hits >= 3, "{show}");
    let marks: Vec<u64> = t.events.iter().filter(|e| e.kind == "TYPE_INSTANT" && e.name.as_deref() == Some("marker")).map(|e| e.at).collect();
    assert_eq!(marks.len() as u64, hits);
    let all = slices(&t);
    let iterations: Vec<&Slice> = all.iter().filter(|s| t.tracks[&s.track].name.starts_with("iterations")).collect();
    assert_eq!(iterations.len() as u64, hits);
    eprintln!("marker window: {hits} marker hits, {} iterations, {} slices", iterations.len(), all.len());
    for (k, (it, at)) in iterations.iter().zip(&marks).enumerate() {
        assert_eq!((it.name.clone(), it.start), (format!("iteration {}", k + 1), *at));
        // each iteration starts where a call of work starts (the marker is work's entry)
        assert!(all.iter().any(|s| s.name == "work" && s.start.abs_diff(it.start) <= 8), "{it:?}");
    }
}

/// `(time, value)` of the counter track named `name`.
fn counter(t: &Trace, name: &str) -> Vec<(u64, f64)> {
    let (&uuid, track) = t.tracks.iter().find(|(_, tr)| tr.name == name).unwrap_or_else(|| panic!("no counter track {name}"));
    assert!(track.counter, "{name} is a counter track");
    t.events.iter().filter(|e| e.track == uuid).map(|e| {
        assert_eq!(e.kind, "TYPE_COUNTER");
        (e.at, e.value.expect("a counter event has a value"))
    }).collect()
}

#[test]
fn wave_perfetto_export_has_a_counter_value_per_point() {
    let Some(schema) = consumer() else { return };
    let dir = tempfile::tempdir().unwrap();
    let d = |name: &str| dir.path().join(name).to_str().unwrap().to_string();
    let program = build_calls();
    ok(&["wave", "--exact", "--marker", "work", "--max-instructions", "3000", "--json", "-o", &d("w.json"), "--export", &format!("perfetto={}", d("w.pftrace")), "--", &program]);
    let v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(d("w.json")).unwrap()).unwrap();
    let t = trace_of(&decode(&schema, Path::new(&d("w.pftrace"))));
    let code = counter(&t, "code address");
    let data = counter(&t, "data address");
    assert_eq!(code.len() as u64, v["points"].as_u64().unwrap(), "a code address per point");
    assert_eq!(data.len() as u64, v["points_with_data"].as_u64().unwrap(), "a data address per point with one");
    assert!(code.len() >= 1000, "{} points", code.len());
    // exact mode: the time axis is the instruction number, one per point, in order
    assert!(code.windows(2).all(|w| w[1].0 == w[0].0 + 1), "consecutive instruction numbers");
    // the code addresses lie in the functions the report's regions name
    let regions = v["regions"].as_array().unwrap();
    let in_region = |a: f64| regions.iter().any(|r| r["low"].as_f64().unwrap() <= a && a < r["high"].as_f64().unwrap());
    assert!(code.iter().all(|&(_, a)| in_region(a)), "code addresses inside the report's regions");
    let meta = t.events.iter().find(|e| e.name.as_deref() == Some("kansoku")).unwrap();
    assert!(meta.args["time_axis"].starts_with("instruction number"), "{:?}", meta.args);
    eprintln!("wave: {} code and {} data counter values", code.len(), data.len());
}

#[test]
fn monitor_perfetto_export_has_the_reported_series_as_counters() {
    let Some(schema) = consumer() else { return };
    let dir = tempfile::tempdir().unwrap();
    let d = |name: &str| dir.path().join(name).to_str().unwrap().to_string();
    let workload = kansoku_examples::build("workload", dir.path()).unwrap();
    ok(&["monitor", "--interval", "100", "--json", "-o", &d("m.json"), "--export", &format!("perfetto={}", d("m.pftrace")), "--", workload.to_str().unwrap(), "cpu", "1", "1"]);
    let v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(d("m.json")).unwrap()).unwrap();
    let t = trace_of(&decode(&schema, Path::new(&d("m.pftrace"))));
    let series = v["summary"]["series"].as_array().unwrap();
    assert!(series.len() >= 5, "{} intervals", series.len());
    let eight = [
        ("CPU active", "cpu_active"),
        ("CPU only", "cpu_only"),
        ("CPU/I-O overlap", "cpu_io_overlap"),
        ("I-O only", "io_only"),
        ("I-O busy (max device)", "io_busy"),
        ("CPU wait", "cpu_wait"),
        ("user state", "user_state"),
        ("kernel state", "kernel_state"),
    ];
    for (track, field) in eight.into_iter().chain([("iowait", "iowait")]) {
        let values = counter(&t, track);
        assert_eq!(values.len(), series.len(), "{track}: one value per interval");
        for ((at, value), x) in values.iter().zip(series) {
            let reported = x[field].as_f64().unwrap();
            assert!((value - reported).abs() <= 1e-9 * reported.abs().max(1.0), "{track}: {value} vs the report's {reported}");
            assert_eq!(*at, (x["t_s"].as_f64().unwrap() * 1e9) as u64);
        }
    }
    for (k, device) in v["summary"]["devices"].as_array().unwrap().iter().enumerate() {
        let values = counter(&t, &format!("{} busy", device["name"].as_str().unwrap()));
        let reported: Vec<f64> = series.iter().map(|x| x["devices"][k].as_f64().unwrap()).collect();
        // as for the tracks above: protoc prints a double with its own digits, so the last
        // bit may differ from the JSON's shortest form
        assert_eq!(values.len(), reported.len(), "{device}: one value per interval");
        for (value, r) in values.iter().map(|p| p.1).zip(reported) {
            assert!((value - r).abs() <= 1e-9 * r.abs().max(1.0), "{device}: {value} vs the report's {r}");
        }
    }
    // the items' identities hold per interval, as they do for the whole run
    for x in series {
        let f = |k: &str| x[k].as_f64().unwrap();
        assert!((f("cpu_only") + f("cpu_io_overlap") - f("cpu_active")).abs() < 0.5, "{x}");
        assert!((f("io_only") + f("cpu_io_overlap") - f("io_busy")).abs() < 1e-6, "{x}");
    }
    let cpu = counter(&t, "CPU active");
    eprintln!("monitor: {} intervals, CPU active max {:.1} %", cpu.len(), cpu.iter().map(|p| p.1).fold(0.0, f64::max));
}

#[test]
fn reconstructed_iteration_perfetto_export_has_the_calls_of_an_exact_iteration() {
    let Some(schema) = consumer() else { return };
    let dir = tempfile::tempdir().unwrap();
    let d = |name: &str| dir.path().join(name).to_str().unwrap().to_string();
    // recursion 4 200: each iteration of work calls fib(4), which calls fib 9 times in all
    let program = kansoku_examples::build("recursion", dir.path()).unwrap();
    ok(&["trace", "exact", "--marker", "work", "--iterations", "104", "-o", &d("e.ksk"), "--", program.to_str().unwrap(), "4", "200"]);
    ok(&["sample", "--period", "7", &d("e.ksk"), "-o", &d("r.ksk")]);
    ok(&["reconstruct", &d("r.ksk"), "--solver", "phase", "-o", &d("t.trace"), "--export", &format!("perfetto={}", d("r.pftrace"))]);
    let t = trace_of(&decode(&schema, Path::new(&d("r.pftrace"))));
    let all = slices(&t);
    let per_function = count(all.iter().map(|s| s.name.as_str()));
    // the exact trace's iterations, exported the same way: fib calls per iteration
    ok(&["paths", "--source", &d("e.ksk"), "--export", &format!("perfetto={}", d("e.pftrace"))]);
    let exact = trace_of(&decode(&schema, Path::new(&d("e.pftrace"))));
    let exact_slices = slices(&exact);
    let second = exact_slices.iter().find(|s| s.name == "iteration 2").expect("a second iteration");
    let fib_in_second = exact_slices.iter().filter(|s| s.name == "fib" && s.start >= second.start && s.end <= second.end).count() as u64;
    assert_eq!(fib_in_second, 9, "fib(4) calls fib 9 times");
    assert_eq!(per_function.get("fib").copied(), Some(fib_in_second), "reconstructed fib calls = an exact iteration's: {per_function:?}");
    for s in all.iter().filter(|s| s.name == "fib") {
        assert!(matches!(s.inside.last().map(String::as_str), Some("fib" | "work")), "{s:?}");
    }
    assert_eq!(all.iter().filter(|s| s.name == "fib").map(|s| s.inside.iter().filter(|n| *n == "fib").count()).max(), Some(3), "fib(4) nests four deep");
    let lines = std::fs::read_to_string(d("t.trace")).unwrap().lines().filter(|l| l.starts_with("0x")).count() as u64;
    let iteration = all.iter().find(|s| s.name == "iteration 1").expect("the iteration as a slice");
    assert_eq!(iteration.end - iteration.start, lines, "the iteration spans the reconstructed trace's instructions");
    eprintln!("reconstructed: {} slices, fib {}, iteration of {lines} instructions", all.len(), per_function["fib"]);
}
