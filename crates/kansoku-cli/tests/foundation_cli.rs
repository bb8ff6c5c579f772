//! The foundation's commands, run as a user runs them.

mod harness;
use harness::*;

mod browser;

use std::path::Path;
use std::process::{Command, Output};

use kansoku_examples::{build, test_build_dir};

fn text(o: &Output) -> (String, String) {
    (String::from_utf8_lossy(&o.stdout).into_owned(), String::from_utf8_lossy(&o.stderr).into_owned())
}

#[test]
fn inspect_lists_functions_and_blocks() {
    let p = build("seed000", &test_build_dir()).unwrap();
    let o = kansoku(&["inspect", p.to_str().unwrap()]);
    let (out, err) = text(&o);
    assert!(o.status.success(), "{err}");
    assert!(out.contains("func_M") && out.contains("seed000.c:12"), "{out}");

    let o = kansoku(&["inspect", p.to_str().unwrap(), "--function", "func_M", "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let instrs = v["instructions"].as_array().unwrap();
    let kinds: Vec<&str> = instrs.iter().map(|i| i["kind"].as_str().unwrap()).collect();
    assert_eq!(kinds, vec!["other", "other", "call", "call", "call", "call", "call", "other", "return"]);
    assert_eq!(v["blocks"].as_array().unwrap().len(), 6);
    assert_eq!(instrs[3]["target"], "func_B");
    assert_eq!(instrs[3]["block"], 1, "BB0 is push, mov, call func_A");
    assert_eq!(instrs[3]["offset_in_block"], 0);
}

#[test]
fn inspect_non_elf_is_a_clear_error() {
    let dir = test_build_dir();
    build("seed000", &dir).unwrap();
    let src = dir.join("seed000.c");
    let o = kansoku(&["inspect", src.to_str().unwrap()]);
    let (_, err) = text(&o);
    assert!(!o.status.success());
    assert!(err.contains("seed000.c") && err.contains("not an ELF program"), "{err}");
    assert!(!err.contains("panicked"), "{err}");
}

#[test]
fn trace_then_show() {
    let dir = tempfile::tempdir().unwrap();
    let p = build("seed000", &test_build_dir()).unwrap();
    let rec = dir.path().join("t.ksk");
    let o = kansoku(&["trace", "exact", "--marker", "func_M", "--iterations", "2", "-o", rec.to_str().unwrap(), "--json", "--", p.to_str().unwrap(), "5"]);
    let (_, err) = text(&o);
    assert!(o.status.success(), "{err}");
    // The outcome is on stderr (stdout is the program's), after any warning.
    let v: serde_json::Value = serde_json::from_str(&err[err.find("{\n").expect("JSON outcome")..]).unwrap();
    assert_eq!(v["marker_hits"], 2);
    assert_eq!(v["stop"], "window_complete");

    let o = kansoku(&["show", rec.to_str().unwrap(), "--limit", "20"]);
    let (out, err) = text(&o);
    assert!(o.status.success(), "{err}");
    assert!(out.contains("kind       exact_trace"), "{out}");
    assert!(out.contains("func_M:0:0"), "{out}");
    assert!(out.contains("func_A:0:0"), "{out}");

    let o = kansoku(&["show", rec.to_str().unwrap(), "--by", "function", "--json", "--limit", "0"]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let n = v["summary"]["instructions"].as_u64().unwrap();
    assert_eq!(n, 2 * 44, "two iterations of 44 instructions");
    let locs: Vec<&str> = v["events"].as_array().unwrap().iter().filter_map(|e| e["location"].as_str()).collect();
    assert_eq!(locs[0], "func_M:0");
    assert_eq!(&locs[..4], &["func_M:0", "func_M:1", "func_M:2", "func_A:0"]);

    // Cut the file: shown with a warning, not an error.
    let bytes = std::fs::read(&rec).unwrap();
    let cut = dir.path().join("cut.ksk");
    std::fs::write(&cut, &bytes[..bytes.len() - 30]).unwrap();
    let o = kansoku(&["show", cut.to_str().unwrap()]);
    let (out, err) = text(&o);
    assert!(o.status.success(), "{err}");
    assert!(err.contains("ends early"), "{err}");
    assert!(out.contains("func_M"), "{out}");
}

#[test]
fn show_refuses_foreign_and_corrupt_files() {
    let dir = tempfile::tempdir().unwrap();
    let p = build("seed000", &test_build_dir()).unwrap();
    let o = kansoku(&["show", p.to_str().unwrap()]);
    let (_, err) = text(&o);
    assert!(!o.status.success() && err.contains("not a kansoku recording"), "{err}");

    let rec = dir.path().join("t.ksk");
    let o = kansoku(&["trace", "exact", "--max-instructions", "100", "-o", rec.to_str().unwrap(), "--", p.to_str().unwrap()]);
    assert!(o.status.success());
    let mut bytes = std::fs::read(&rec).unwrap();
    let at = bytes.len() - 10;
    bytes[at] = 0x3f; // an event tag no version defines
    std::fs::write(&rec, &bytes).unwrap();
    let o = kansoku(&["show", rec.to_str().unwrap()]);
    let (_, err) = text(&o);
    assert!(!o.status.success(), "{err}");
    assert!(err.contains("corrupted at byte"), "{err}");
}

#[test]
fn trace_missing_program_names_it() {
    let o = kansoku(&["trace", "exact", "-o", "/tmp/never.ksk", "--", "/no/such/program"]);
    let (_, err) = text(&o);
    assert!(!o.status.success());
    assert!(err.contains("/no/such/program"), "{err}");
}

#[test]
fn demo_writes_its_directory() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("kansoku-demo");
    let o = kansoku(&["demo", "--dir", out.to_str().unwrap()]);
    let (stdout, err) = text(&o);
    assert!(o.status.success(), "{stdout}\n{err}");
    assert!(Path::new(&out.join("seed000-exact.ksk")).exists());
    let summary = std::fs::read_to_string(out.join("summary.txt")).unwrap();
    assert!(summary.contains("44 per iteration"), "{summary}");
    // seed 000: sparse samples rebuilt with both score tables, drawn, and a real recording
    assert!(summary.contains("sampled every 101 instructions") && summary.contains("kansoku record of seed000"), "{summary}");
    let svg = out.join("seed000-p101-timeline.svg");
    let png = dir.path().join("timeline.png");
    let r = Command::new("rsvg-convert").arg(&svg).arg("-o").arg(&png).status().expect("rsvg-convert (scripts/setup installs librsvg2-bin)");
    assert!(r.success() && std::fs::metadata(&png).unwrap().len() > 1000, "{} renders", svg.display());
    demo_page_opens_in_chromium(&out, &stdout, dir.path());
}

/// Issue 16: the demo ends with its report page, which names each file's command and whose
/// every picture headless Chromium draws; a screenshot of its top is taken.
fn demo_page_opens_in_chromium(out: &Path, stdout: &str, scratch: &Path) {
    let page = out.join("index.html");
    assert!(stdout.contains(&format!("{} (", page.display())), "the demo says where its page is: {stdout}");
    let html = std::fs::read_to_string(&page).unwrap();
    let pictures = browser::svgs(out);
    assert_eq!(html.matches("<img ").count(), pictures, "every picture of the demo embedded");
    assert!(html.contains("How this directory was made") && html.contains("Made by the step"), "the manifest's commands");
    for room in ["foundation", "seed000", "seed001", "seed002", "seed003", "seed004"] {
        assert!(html.contains(&format!("<section id=\"{room}\">")), "a section for {room}");
    }
    let Some(chromium) = browser::chromium() else {
        skip(Missing::Installed { package: "chromium" }, "opening the demo's page: chromium is not installed");
        return;
    };
    let (drawn, broken, _) = browser::pictures_drawn(&chromium, &page);
    assert_eq!((drawn, broken), (pictures as u64, 0), "every picture drawn by Chromium, none broken");
    let png = scratch.join("demo-page.png");
    let (width, height, bytes) = browser::screenshot(&chromium, &page, &png);
    assert!((width, height) == (1280, 2400) && bytes > 60_000, "screenshot {width}x{height}, {bytes} bytes");
    if let Some(keep) = std::env::var_os("KANSOKU_DEMO_SCREENSHOT") {
        std::fs::copy(&png, keep).unwrap();
    }
}

#[test]
fn closed_output_pipe_ends_quietly() {
    use std::io::{BufRead, BufReader};
    use std::process::Stdio;
    let libc = ["/lib/x86_64-linux-gnu/libc.so.6", "/usr/lib/x86_64-linux-gnu/libc.so.6"]
        .into_iter()
        .find(|p| Path::new(p).exists())
        .expect("glibc present");
    let mut child = Command::new(env!("CARGO_BIN_EXE_kansoku"))
        .args(["inspect", libc])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = String::new();
    BufReader::new(child.stdout.take().unwrap()).read_line(&mut first).unwrap();
    // The reader is gone now (like `| head -1`); thousands of lines are still to come.
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(first.contains("functions"), "{first}");
    assert!(!err.contains("panicked"), "{err}");
}

#[test]
fn unwritable_output_is_named_once() {
    let p = build("seed000", &test_build_dir()).unwrap();
    let o = kansoku(&["trace", "exact", "-o", "/nonexistent-dir/t.ksk", "--", p.to_str().unwrap()]);
    let (_, err) = text(&o);
    assert!(!o.status.success());
    assert!(err.contains("/nonexistent-dir/t.ksk"), "{err}");
    assert_eq!(err.matches("No such file or directory").count(), 1, "the cause is told once: {err}");
}
