//! The observed program is left alone (issue 14): Debian's gzip writes binary data to
//! stdout under every command that runs a program, and that stdout is byte-identical to a
//! run without kansoku; kansoku's report goes to stderr, or with `-o FILE` to the file (and
//! then stderr is the program's too).

mod harness;
use harness::*;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// A small input with random (incompressible) and text parts, and gzip's output for it.
fn gzip_input(dir: &Path) -> (PathBuf, Vec<u8>) {
    let input = dir.join("in.dat");
    let mut data: Vec<u8> = (0u32..6000).map(|i| (i.wrapping_mul(2654435761) >> 13) as u8).collect();
    for i in 0..800 {
        data.extend_from_slice(format!("{i}\n").as_bytes());
    }
    std::fs::write(&input, &data).unwrap();
    let plain = Command::new("gzip").arg("-c").arg(&input).output().expect("gzip (Debian's) is installed");
    assert!(plain.status.success());
    assert!(plain.stdout.len() > 1000 && plain.stdout.starts_with(&[0x1f, 0x8b]), "binary output");
    (input, plain.stdout)
}

/// Runs `kansoku ARGS -- gzip -c INPUT` and checks the program's stdout is untouched.
fn check(args: &[&str], input: &Path, want: &[u8]) -> Output {
    let mut all = args.to_vec();
    all.extend(["--", "gzip", "-c", s(input)]);
    let o = kansoku(&all);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{args:?}: {err}");
    assert!(o.stdout == want, "{args:?}: gzip's stdout changed ({} bytes, want {}); stderr:\n{err}", o.stdout.len(), want.len());
    o
}

#[test]
fn binary_stdout_is_the_programs_under_every_observer() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let (input, want) = gzip_input(d);

    // monitor: report on stderr; with -o, in the file and stderr stays empty (gzip writes none).
    let o = check(&["monitor", "--interval", "20"], &input, &want);
    assert!(String::from_utf8_lossy(&o.stderr).contains("CPU active"));
    let report = d.join("monitor.json");
    let o = check(&["monitor", "--interval", "20", "--json", "-o", s(&report)], &input, &want);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!err.contains("CPU active") && !err.contains('{'), "the report is in the file, not on stderr: {err}");
    let v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap();
    assert!(v["summary"]["observations"].as_u64().is_some());

    // monitor events, on gzip's entry point (it is stripped: no names).
    let elf = std::fs::read("/usr/bin/gzip").unwrap();
    let entry = u64::from_le_bytes(elf[24..32].try_into().unwrap()); // e_entry of an ELF64 header
    let probe = format!("0x{entry:x}");
    let mechanism = if kansoku_probe::perf::uprobes_available() { "uprobe" } else { "trap" };
    let o = check(&["monitor", "events", "--mechanism", mechanism, "--probe", &probe], &input, &want);
    assert!(String::from_utf8_lossy(&o.stderr).contains("hits"), "{}", String::from_utf8_lossy(&o.stderr));

    // paths under Valgrind: the text report on stderr, the JSON report in -o.
    let o = check(&["paths", "--scope", "all"], &input, &want);
    assert!(String::from_utf8_lossy(&o.stderr).contains("distinct paths"));
    let paths_json = d.join("paths.json");
    check(&["paths", "--scope", "all", "-o", s(&paths_json)], &input, &want);
    let v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&paths_json).unwrap()).unwrap();
    assert_eq!(v["source"], "valgrind");
    assert!(v["summary"]["blocks_seen"].as_u64().unwrap() > 1000);

    // the exact tracer: the first 20,000 instructions traced, the rest run untraced.
    let ksk = d.join("gzip.ksk");
    let o = check(&["trace", "exact", "--max-instructions", "20000", "-o", s(&ksk)], &input, &want);
    assert!(String::from_utf8_lossy(&o.stderr).contains("20000 instructions"), "{}", String::from_utf8_lossy(&o.stderr));

}

/// `record` and `wave` sample with perf_event (cpu-clock where there is no PMU).
#[test]
fn sampled_observers_leave_stdout_alone() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let (input, want) = gzip_input(d);
    let rec = d.join("r.ksk");
    let o = kansoku(&["record", "--time-period", "100000", "-o", s(&rec), "--json", "--", "gzip", "-c", s(&input)]);
    let err = String::from_utf8_lossy(&o.stderr);
    if !o.status.success() && (err.contains("perf_event_paranoid") || err.contains("not supported")) {
        skip(Missing::Machine, format!("perf sampling is not permitted here: {err}"));
        return;
    }
    assert!(o.status.success(), "{err}");
    assert!(o.stdout == want, "gzip's stdout changed under record");
    assert!(err.contains("\"samples\""), "the JSON outcome is on stderr: {err}");

    let wave = d.join("wave.json");
    check(&["wave", "--time-period", "20000", "--json", "-o", s(&wave)], &input, &want);
    let v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&wave).unwrap()).unwrap();
    assert!(v["points"].as_u64().is_some(), "{v}");
}
