//! Issue 16: `kansoku record` samples exported for the Firefox Profiler
//! (`--export firefox=FILE` on `show` and `record`), checked against the processed-profile
//! format by loading the JSON back: the tables `fxprof-processed-profile` writes must hold
//! together (every index in range), hold every recorded sample and marker hit, and name the
//! program as a library the profiler can symbolise — the library-relative address of each
//! sample, looked up in binutils' `nm` symbol table of the program, is the function kansoku
//! itself locates the sample in.

mod harness;
use harness::*;

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

use serde_json::Value;

fn s(p: &Path) -> String {
    p.display().to_string()
}

/// `kansoku record` of seed000; None (the reason printed) where perf sampling is refused.
fn record(seed: &Path, out: &Path, export: Option<&Path>, iterations: &str) -> Option<()> {
    let (r, e) = (s(out), export.map(|p| format!("firefox={}", s(p))));
    let mut args = vec!["record", "--time-period", "20000", "--marker", "func_M", "-o", &r];
    if let Some(e) = &e {
        args.extend(["--export", e]);
    }
    let seed = s(seed);
    args.extend(["--", &seed, iterations]);
    let o = kansoku(&args);
    let stderr = String::from_utf8_lossy(&o.stderr);
    if !o.status.success() && (stderr.contains("perf_event_paranoid") || stderr.contains("not supported") || stderr.contains("uprobe")) {
        skip(Missing::Machine, format!("perf sampling is not permitted here: {stderr}"));
        return None;
    }
    assert!(o.status.success(), "record failed: {stderr}");
    Some(())
}

/// The recording as `kansoku show --json` lists it: its modules and every event.
fn listing(rec: &Path) -> Value {
    let o = kansoku(&["show", &s(rec), "--json", "--limit", "0", "--by", "function"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    serde_json::from_slice(&o.stdout).unwrap()
}

/// The program's executable sections from `readelf -SW`: (start, end) addresses.
fn code_sections(program: &Path) -> Option<Vec<(u64, u64)>> {
    let o = Command::new("readelf").args(["-SW", &s(program)]).output().ok()?;
    let text = String::from_utf8_lossy(&o.stdout);
    let sections = text
        .lines()
        .filter_map(|l| {
            // [Nr] Name Type Address Off Size ES Flg …: after the "]", fields 2, 4 and 6.
            let f: Vec<&str> = l.split(']').nth(1)?.split_whitespace().collect();
            let (addr, size, flags) = (u64::from_str_radix(f.get(2)?, 16).ok()?, u64::from_str_radix(f.get(4)?, 16).ok()?, f.get(6)?);
            flags.contains('X').then_some((addr, addr + size))
        })
        .collect();
    Some(sections)
}

/// `nm`'s functions (start address → name) and `readelf`'s executable sections of a program.
type ProgramSymbols<'a> = (&'a BTreeMap<u64, String>, &'a [(u64, u64)]);

/// The program's function symbols from `nm`: start address → name.
fn nm_functions(program: &Path) -> Option<BTreeMap<u64, String>> {
    let o = Command::new("nm").args(["--defined-only", &s(program)]).output().ok()?;
    let text = String::from_utf8_lossy(&o.stdout);
    let functions = text
        .lines()
        .filter_map(|l| {
            let mut f = l.split_whitespace();
            let (addr, kind, name) = (f.next()?, f.next()?, f.next()?);
            matches!(kind, "T" | "t").then(|| Some((u64::from_str_radix(addr, 16).ok()?, name.to_string())))?
        })
        .collect();
    Some(functions)
}

/// The breakpad id of a GNU build id, computed here independently of the exporter: the
/// first 16 bytes as a little-endian GUID (first three fields reversed), uppercase, age 0.
fn breakpad_id(build_id: &str) -> String {
    let b: Vec<&str> = (0..32).step_by(2).map(|i| &build_id[i..i + 2]).collect();
    let order = [3, 2, 1, 0, 5, 4, 7, 6, 8, 9, 10, 11, 12, 13, 14, 15];
    order.iter().map(|&i| b[i].to_uppercase()).collect::<String>() + "0"
}

fn column(table: &Value, name: &str) -> Vec<Value> {
    table[name].as_array().unwrap_or_else(|| panic!("column {name} in {table:.200}")).clone()
}

/// An index column: every entry an integer below `len` (or null where `nullable`).
fn indexes(table: &Value, name: &str, len: usize, nullable: bool) -> Vec<Option<usize>> {
    column(table, name)
        .iter()
        .map(|v| match v.as_u64() {
            Some(i) => {
                assert!((i as usize) < len, "{name} index {i} out of range {len}");
                Some(i as usize)
            }
            None => {
                assert!(nullable && (v.is_null() || v.as_i64() == Some(-1)), "{name}: {v} is no index");
                None
            }
        })
        .collect()
}

/// Checks one exported profile against the recording it came from.
fn check_profile(profile: &Value, recording: &Value, seed: &Path) {
    // The format the crate writes: processed profile, its version stated.
    let meta = &profile["meta"];
    assert!(meta["preprocessedProfileVersion"].as_u64().unwrap() >= 48, "{meta:.300}");
    assert!(meta["version"].as_u64().is_some());
    assert_eq!(meta["product"], "seed000");

    // The program is a library with its path, build id and the breakpad id made from it.
    let modules = recording["modules"].as_array().unwrap();
    let program = modules.iter().find(|m| m["path"] == s(seed)).expect("the program in the module map");
    let build_id = program["build_id"].as_str().expect("the program's build id");
    let libs = profile["libs"].as_array().unwrap();
    let lib = libs.iter().position(|l| l["path"] == s(seed)).expect("the program among the libraries");
    assert_eq!(libs[lib]["codeId"], build_id);
    assert_eq!(libs[lib]["breakpadId"], breakpad_id(build_id));
    assert_eq!(libs[lib]["debugName"], "seed000");

    let threads = profile["threads"].as_array().unwrap();
    assert_eq!(threads.len(), 1, "one recorded thread");
    let t = &threads[0];
    let (samples, stacks, frames, funcs, resources) = (&t["samples"], &t["stackTable"], &t["frameTable"], &t["funcTable"], &t["resourceTable"]);
    let len = |table: &Value| table["length"].as_u64().unwrap() as usize;
    // Every index in range: samples → stacks → frames → funcs → resources → libs.
    let sample_stacks = indexes(samples, "stack", len(stacks), false);
    let stack_frames = indexes(stacks, "frame", len(frames), false);
    for (i, prefix) in indexes(stacks, "prefix", len(stacks), true).iter().enumerate() {
        assert!(prefix.is_none_or(|p| p < i), "stack {i}'s prefix comes after it");
    }
    let frame_funcs = indexes(frames, "func", len(funcs), false);
    let func_resources = indexes(funcs, "resource", len(resources), true);
    let resource_libs = indexes(resources, "lib", libs.len(), true);
    let addresses = column(frames, "address");
    // Function names are in the profile (the files' symbols embedded), not left to a symbol
    // server that cannot know the user's build: the profiler shows them wherever it runs.
    let strings = profile["shared"]["stringArray"].as_array().or_else(|| t["stringArray"].as_array()).expect("a string table");
    let func_names = column(funcs, "name");

    // One sample per recorded sample, in order, at the recorded time.
    let events = recording["events"].as_array().unwrap();
    let recorded: Vec<&Value> = events.iter().filter(|e| e["event"] == "sample").collect();
    assert_eq!(sample_stacks.len(), recorded.len(), "every recorded sample exported");
    let mut time_ms = 0.0;
    let deltas = column(samples, "timeDeltas");
    // The program's symbols, to look up the library-relative addresses the profiler will.
    let symbols = nm_functions(seed).zip(code_sections(seed));
    if symbols.is_none() {
        println!("not checked: nm or readelf is not installed, so the addresses are not looked up");
    }
    let mut in_program = 0;
    for (i, (stack, event)) in sample_stacks.iter().zip(&recorded).enumerate() {
        time_ms += deltas[i].as_f64().unwrap();
        let at = event["time_ns"].as_f64().unwrap() / 1e6;
        assert!((time_ms - at).abs() < 1e-3, "sample {i} at {time_ms} ms, recorded at {at} ms");
        let frame = stack_frames[stack.unwrap()].unwrap();
        let lib_of_frame = func_resources[frame_funcs[frame].unwrap()].and_then(|r| resource_libs[r]);
        let ip = u64::from_str_radix(event["addr"].as_str().unwrap().trim_start_matches("0x"), 16).unwrap();
        let module = modules.iter().find(|m| m["start"].as_u64().unwrap() <= ip && ip < m["end"].as_u64().unwrap());
        let address = addresses[frame].as_i64().unwrap();
        match module {
            Some(m) => {
                // A frame in a module has an address inside it, relative to its library.
                let size = m["end"].as_u64().unwrap() - m["start"].as_u64().unwrap();
                assert!(address >= 0 && lib_of_frame.is_some(), "sample {i} at {ip:#x} in {} has no library address", m["path"]);
                assert_eq!(libs[lib_of_frame.unwrap()]["path"], m["path"]);
                let offset = ip - m["start"].as_u64().unwrap();
                assert!(offset < size);
                if m["path"] == s(seed) {
                    in_program += 1;
                    check_symbol(symbols.as_ref().map(|(f, c)| (f, c.as_slice())), address as u64, event, i);
                    let name = strings[func_names[frame_funcs[frame].unwrap()].as_u64().unwrap() as usize].as_str().unwrap();
                    let function = event["location"].as_str().unwrap().split(':').next().unwrap();
                    assert_eq!(name, function, "sample {i}: the profile names its function");
                }
            }
            None => assert!(address == -1 && lib_of_frame.is_none(), "sample {i} outside the modules has a library frame"),
        }
    }
    let in_module = |e: &&&Value| {
        let ip = u64::from_str_radix(e["addr"].as_str().unwrap().trim_start_matches("0x"), 16).unwrap();
        modules.iter().any(|m| m["path"] == s(seed) && m["start"].as_u64().unwrap() <= ip && ip < m["end"].as_u64().unwrap())
    };
    let recorded_in_program = recorded.iter().filter(in_module).count();
    assert_eq!(in_program, recorded_in_program, "the program's samples");
    assert!(in_program > 0, "some samples fell in the program");

    // Marker hits as instant markers, iterations as intervals between consecutive hits.
    let markers = &t["markers"];
    let data = column(markers, "data");
    let (starts, ends, phases) = (column(markers, "startTime"), column(markers, "endTime"), column(markers, "phase"));
    let hits = recording["summary"]["markers"].as_u64().unwrap() as usize;
    let hit_rows: Vec<usize> = (0..data.len()).filter(|&i| data[i]["type"] == "KansokuMarkerHit").collect();
    let iteration_rows: Vec<usize> = (0..data.len()).filter(|&i| data[i]["type"] == "KansokuIteration").collect();
    assert_eq!(hit_rows.len(), hits, "every marker hit a marker");
    assert_eq!(iteration_rows.len(), hits - 1, "an iteration between each two hits");
    assert_eq!(hit_rows.len() + iteration_rows.len(), data.len());
    assert!(hit_rows.iter().all(|&i| phases[i] == 0), "hits are instants (phase 0)");
    let recorded_hits: Vec<f64> = events.iter().filter(|e| e["event"] == "marker").map(|e| e["time_ns"].as_f64().unwrap() / 1e6).collect();
    for (n, &i) in iteration_rows.iter().enumerate() {
        assert_eq!(phases[i], 1, "iterations are intervals (phase 1)");
        let (a, b) = (starts[i].as_f64().unwrap(), ends[i].as_f64().unwrap());
        assert!((a - recorded_hits[n]).abs() < 1e-3 && (b - recorded_hits[n + 1]).abs() < 1e-3, "iteration {n}: {a}..{b}");
    }
    let strings = column(t, "stringArray");
    let names = column(markers, "name");
    assert_eq!(strings[names[hit_rows[0]].as_u64().unwrap() as usize], "func_M");
}

/// The function `nm` puts at the library-relative address (ELF: the link-time address) is
/// the one kansoku locates the sample in: the nearest symbol below it in the same
/// executable section. In a section without one (`.plt`: its first entry, the resolver
/// stub, sits just after `.init`'s `_init`, which nm's nearest symbol would name) kansoku
/// names no function of nm's.
fn check_symbol(symbols: Option<ProgramSymbols<'_>>, address: u64, event: &Value, i: usize) {
    let Some((symbols, sections)) = symbols else { return };
    let location = event["location"].as_str().unwrap();
    let function = location.split(':').next().unwrap();
    let &(start, _) = sections.iter().find(|(a, b)| (*a..*b).contains(&address)).unwrap_or_else(|| panic!("sample {i}: {address:#x} in no executable section"));
    match symbols.range(start..=address).next_back() {
        Some((_, name)) => assert_eq!(name, function, "sample {i}: relative address {address:#x} is in {name}, kansoku says {location}"),
        None => assert!(!symbols.values().any(|n| n == function), "sample {i}: {address:#x} is in a section without symbols, kansoku says {location}"),
    }
}

#[test]
fn recorded_samples_export_to_a_firefox_profile_that_loads_back_whole() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let seed = kansoku_examples::build("seed000", d).unwrap();
    let (rec, at_record) = (d.join("r.ksk"), d.join("at-record.json"));
    if record(&seed, &rec, Some(&at_record), "50000").is_none() {
        return;
    }
    let recording = listing(&rec);
    if recording["summary"]["samples"].as_u64() == Some(0) {
        skip(Missing::Machine, "the run was too short for one cpu-clock sample");
        return;
    }
    let shown = d.join("shown.json");
    let o = kansoku(&["show", &s(&rec), "--export", &format!("firefox={}", s(&shown))]);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{stderr}");
    assert!(stderr.contains("firefox export written to") && stderr.contains("profiler.firefox.com"), "{stderr}");
    for file in [&shown, &at_record] {
        let profile: Value = serde_json::from_slice(&std::fs::read(file).unwrap()).unwrap();
        check_profile(&profile, &recording, &seed);
    }
}

#[test]
fn a_recording_that_is_not_samples_is_refused_naming_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let seed = kansoku_examples::build("seed000", d).unwrap();
    let exact = d.join("e.ksk");
    let o = kansoku(&["trace", "exact", "--marker", "func_M", "--iterations", "1", "-o", &s(&exact), "--", &s(&seed), "2"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let out = d.join("p.json");
    let o = kansoku(&["show", &s(&exact), "--export", &format!("firefox={}", s(&out))]);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success() && stderr.contains(&s(&exact)) && stderr.contains("not samples"), "{stderr}");
    // A format `show` cannot write is said before anything is read.
    let o = kansoku(&["show", &s(&exact), "--export", &format!("pprof={}", s(&out))]);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success() && stderr.contains("writes firefox"), "{stderr}");
    // Not a recording at all.
    std::fs::write(d.join("junk.ksk"), b"not a recording").unwrap();
    let o = kansoku(&["show", &s(&d.join("junk.ksk")), "--export", &format!("firefox={}", s(&out))]);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success() && stderr.contains("junk.ksk"), "{stderr}");
}

#[test]
fn a_perf_data_exports_every_sample_perf_script_lists() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let seed = kansoku_examples::build("seed000", d).unwrap();
    let data = d.join("perf.data");
    let Ok(rec) = Command::new("perf").args(["record", "-q", "-o", &s(&data), "-e", "cpu-clock:u", "-c", "20000", "--", &s(&seed), "2000000"]).output() else {
        skip(Missing::Installed { package: "linux-perf" }, "perf is not installed");
        return;
    };
    if !rec.status.success() {
        skip(Missing::Machine, format!("perf record is not permitted here: {}", String::from_utf8_lossy(&rec.stderr)));
        return;
    }
    let script = Command::new("perf").args(["script", "-i", &s(&data), "-F", "ip"]).output().unwrap();
    assert!(script.status.success(), "perf script: {}", String::from_utf8_lossy(&script.stderr));
    let listed = String::from_utf8_lossy(&script.stdout).lines().filter(|l| !l.trim().is_empty()).count();
    let out = d.join("p.json");
    let o = kansoku(&["show", &s(&data), "--export", &format!("firefox={}", s(&out))]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let profile: Value = serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap();
    let threads = profile["threads"].as_array().unwrap();
    let exported: u64 = threads.iter().map(|t| t["samples"]["length"].as_u64().unwrap()).sum();
    assert_eq!(exported as usize, listed, "a sample per sample perf script lists");
    let build_id = kansoku_binary::Program::open(&seed).unwrap().build_id.expect("gcc writes a build id");
    let libs = profile["libs"].as_array().unwrap();
    assert!(libs.iter().any(|l| l["path"] == s(&seed) && l["codeId"] == build_id.as_str()), "{libs:?}");
}
