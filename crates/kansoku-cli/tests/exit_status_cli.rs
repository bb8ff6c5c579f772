//! kansoku exits as the observed program did (issue 14): its exit code, or 128 + N when
//! signal N killed it, as `time` and `perf stat` do; a failure to observe is kansoku's own 1.

mod harness;
use harness::*;
use std::process::Command;

fn code(args: &[&str]) -> Option<i32> {
    kansoku(args).status.code()
}

#[test]
fn the_programs_exit_status_is_passed_through() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("t.ksk");
    let out = out.to_str().unwrap();
    // Static, so that single-stepping it takes milliseconds: exits with argv[1], or raises
    // the signal -argv[1].
    let src = "#include <signal.h>\n#include <stdlib.h>\nint main(int c, char **v) { int n = atoi(v[1]); if (n < 0) raise(-n); return n; }\n";
    let ends = kansoku_examples::build_source("ends", src, &kansoku_examples::test_build_dir(), &["-O1", "-static"]).unwrap();
    let ends = ends.to_str().unwrap();
    assert_eq!(code(&["trace", "exact", "-o", out, "--", ends, "3"]), Some(3));
    assert_eq!(code(&["trace", "exact", "-o", out, "--", ends, "-11"]), Some(128 + 11));
    assert_eq!(code(&["paths", "--source", "step", "--", ends, "5"]), Some(5));
    assert_eq!(code(&["monitor", "--", "/bin/sh", "-c", "exit 3"]), Some(3));
    let rec = dir.path().join("r.ksk");
    match code(&["record", "-o", rec.to_str().unwrap(), "--", "/bin/sh", "-c", "exit 4"]) {
        Some(1) => skip(Missing::Machine, "record: it cannot sample here (perf_event_open refused)"),
        other => assert_eq!(other, Some(4)),
    }
    // Not a program at all: kansoku's own failure.
    let not_elf = dir.path().join("notes.txt");
    std::fs::write(&not_elf, "just text\n").unwrap();
    assert_eq!(code(&["trace", "exact", "-o", out, "--", not_elf.to_str().unwrap()]), Some(1));
}

#[test]
fn a_run_that_observed_nothing_is_a_failure() {
    let dir = tempfile::tempdir().unwrap();
    let not_elf = dir.path().join("notes.txt");
    std::fs::write(&not_elf, "just text\n").unwrap();
    let o = Command::new("chmod").arg("+x").arg(&not_elf).status().unwrap();
    assert!(o.success());
    let not_elf = not_elf.to_str().unwrap();
    for source in ["valgrind", "lackey", "step"] {
        let o = Command::new(env!("CARGO_BIN_EXE_kansoku")).args(["paths", "--source", source, "--", not_elf]).output().unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "{source}: {err}");
        assert!(err.contains("neither an ELF executable nor a #! script"), "{source}: {err}");
    }
    // A "valgrind" that runs nothing (here /bin/false) is not an empty profile.
    let o = Command::new(env!("CARGO_BIN_EXE_kansoku")).args(["paths", "--valgrind", "/bin/false", "--", "/bin/true"]).output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(err.contains("ran nothing under /bin/false") && err.contains("exited with status 1"), "{err}");
}

/// With stderr unwritable (`2>/dev/full`) kansoku's messages are lost, not a panic: before,
/// `trace exact` and `show` exited 101 after their work was done.
#[test]
fn a_full_stderr_is_no_panic() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("t.ksk");
    let src = "int main(int c, char **v) { (void)v; return c == 1 ? 6 : 0; }\n";
    let six = kansoku_examples::build_source("six", src, &kansoku_examples::test_build_dir(), &["-O1", "-static"]).unwrap();
    let full = || std::fs::OpenOptions::new().write(true).open("/dev/full").unwrap();
    let run = |args: &[&str]| Command::new(env!("CARGO_BIN_EXE_kansoku")).args(args).stdout(std::process::Stdio::null()).stderr(full()).status().unwrap().code();
    // its summary on stderr could not be written: kansoku's own failure (1), not a panic
    assert_eq!(run(&["trace", "exact", "--engine", "ptrace", "-o", out.to_str().unwrap(), "--", six.to_str().unwrap()]), Some(1));
    assert_eq!(run(&["show", out.to_str().unwrap()]), Some(0), "the recording was written whole");
    // a recording cut short: show warns on stderr, and shows what was recorded
    let cut = dir.path().join("cut.ksk");
    let bytes = std::fs::read(&out).unwrap();
    std::fs::write(&cut, &bytes[..bytes.len() / 2]).unwrap();
    assert_eq!(run(&["show", cut.to_str().unwrap()]), Some(0));
}
