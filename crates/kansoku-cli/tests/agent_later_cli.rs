//! The agent probes what a program loads after start and how it is started (issue 44):
//! a library opened with `dlopen` (named as users name it, or by path), Debian's python3
//! importing a C extension module, counted as callgrind counts them; programs started
//! through `#!` scripts, `env` and shims, including shims that build their program's path
//! at run time (found in each program the run starts).

mod harness;
use harness::{kansoku_cmd, skip, stderr, Missing};

mod agent_build;
use agent_build::agent;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Stdio;

fn scratch() -> PathBuf {
    let d = kansoku_examples::test_build_dir().join("agent-later");
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// `kansoku monitor events --mechanism agent --json -o FILE --probe P… -- PROGRAM ARGS…`:
/// the report and the command's output.
fn events(probes: &[&str], program: &str, args: &[&str], name: &str) -> (serde_json::Value, std::process::Output) {
    events_with_path(probes, program, args, name, None)
}

/// [`events`] with kansoku's `PATH` set (what `#!/usr/bin/env NAME` searches).
fn events_with_path(probes: &[&str], program: &str, args: &[&str], name: &str, path: Option<&str>) -> (serde_json::Value, std::process::Output) {
    let report = scratch().join(format!("{name}-{}.json", std::process::id()));
    let _ = std::fs::remove_file(&report);
    let mut command = kansoku_cmd();
    if let Some(path) = path {
        command.env("PATH", path);
    }
    let out = command
        .env("KANSOKU_AGENT", agent())
        .args(["monitor", "events", "--mechanism", "agent", "--json", "-o"])
        .arg(&report)
        .args(probes.iter().flat_map(|p| ["--probe", p]))
        .arg("--")
        .arg(program)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let text = std::fs::read_to_string(&report).unwrap_or_else(|e| panic!("no report ({e}): {}", stderr(&out)));
    (serde_json::from_str(&text).unwrap(), out)
}

fn calls(v: &serde_json::Value, routine: &str) -> u64 {
    let r = v["report"]["routines"].as_array().unwrap().iter().find(|r| r["name"] == routine).unwrap_or_else(|| panic!("no routine {routine} in {v}"));
    r["calls"].as_u64().unwrap()
}

fn notes(v: &serde_json::Value) -> Vec<String> {
    v["notes"].as_array().unwrap().iter().filter_map(|n| n.as_str().map(String::from)).collect()
}

/// Calls per function name in a callgrind run of `program args`.
fn callgrind_calls(program: &str, args: &[&str]) -> HashMap<String, u64> {
    agent_build::callgrind_calls(Path::new(program), args, None, &scratch().join(format!("callgrind.{}", std::process::id())))
}

/// Loads Debian's zlib with `dlopen` after start (with a second argument: `dlmopen` into a
/// namespace of its own) and calls its crc32 N times.
const ZDL: &str = r#"#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
typedef unsigned long (*crc_fn)(unsigned long, const unsigned char *, unsigned);
int main(int argc, char **argv) {
    int n = argc > 1 ? atoi(argv[1]) : 1000;
    void *h = argc > 2 ? dlmopen(LM_ID_NEWLM, "libz.so.1", RTLD_NOW) : dlopen("libz.so.1", RTLD_NOW);
    if (!h) { fprintf(stderr, "%s\n", dlerror()); return 2; }
    crc_fn crc = (crc_fn)dlsym(h, "crc32");
    unsigned char buf[64];
    for (int i = 0; i < 64; i++) buf[i] = i;
    unsigned long c = 0;
    for (int i = 0; i < n; i++) c = crc(c, buf, sizeof buf);
    printf("crc %lx\n", c);
    dlclose(h);
    return 0;
}
"#;

#[test]
fn a_library_loaded_by_dlopen_is_counted_as_callgrind_counts_it() {
    let zdl = kansoku_examples::build_source("zdl", ZDL, &scratch(), &["-O2", "-ldl"]).unwrap();
    let zdl = zdl.to_str().unwrap();
    let libz = std::fs::canonicalize("/usr/lib/x86_64-linux-gnu/libz.so.1").unwrap();
    let by_path = format!("crc32@{}", libz.display());
    let want = callgrind_calls(zdl, &["1500"]);
    assert_eq!(want.get("crc32").copied(), Some(1500), "callgrind: {want:?}");
    for probe in ["crc32@libz", by_path.as_str()] {
        let (v, out) = events(&[probe], zdl, &["1500"], "zdl");
        assert!(out.status.success(), "{probe}: {}", stderr(&out));
        assert_eq!(String::from_utf8_lossy(&out.stdout), "crc 49e5e9a5\n");
        assert_eq!(calls(&v, probe), want["crc32"], "{probe}: kansoku agent vs callgrind");
        assert!(notes(&v).iter().all(|n| !n.contains("not probed")), "{:?}", notes(&v));
    }
}

/// A library that `dlmopen` loads into a new namespace, which `dl_iterate_phdr` does not
/// list: before, its point stayed unplanted ("its module is not loaded"); now the agent
/// reads the linker's namespaces and counts every call the program makes.
#[test]
fn a_library_loaded_by_dlmopen_into_its_own_namespace_is_counted() {
    let zdl = kansoku_examples::build_source("zdl", ZDL, &scratch(), &["-O2", "-ldl"]).unwrap();
    let (v, out) = events(&["crc32@libz"], zdl.to_str().unwrap(), &["1500", "namespace"], "zdl-ns");
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(String::from_utf8_lossy(&out.stdout), "crc 49e5e9a5\n");
    assert_eq!(calls(&v, "crc32@libz"), 1500, "{}", stderr(&out));
    assert!(notes(&v).iter().all(|n| !n.contains("not probed")), "{:?}", notes(&v));
}

#[test]
fn python3_importing_a_c_extension_module_is_counted_as_callgrind_counts_it() {
    let python = "/usr/bin/python3.11";
    let module = "/usr/lib/python3.11/lib-dynload/_bz2.cpython-311-x86_64-linux-gnu.so";
    if !Path::new(python).is_file() || !Path::new(module).is_file() {
        skip(Missing::Installed { package: "python3.11" }, format!("{python} or its _bz2 extension module is missing"));
        return;
    }
    // _bz2 and the libbz2 it links are loaded by the import, not at start
    let script = "import bz2\nfor i in range(40):\n    bz2.decompress(bz2.compress(bytes(range(256)) * (i + 1)))\n";
    let init = format!("PyInit__bz2@{module}");
    let probes = [init.as_str(), "BZ2_bzCompressInit@libbz2", "BZ2_bzCompress@libbz2", "BZ2_bzDecompress@libbz2"];
    let (v, out) = events(&probes, python, &["-c", script], "python-bz2");
    assert!(out.status.success(), "{}", stderr(&out));
    let want = callgrind_calls(python, &["-c", script]);
    for p in probes {
        let name = p.split('@').next().unwrap();
        let expected = want.get(name).copied().unwrap_or(0);
        assert!(expected > 0, "callgrind saw no call of {name}");
        assert_eq!(calls(&v, p), expected, "{p}: kansoku agent vs callgrind");
    }
    assert_eq!(calls(&v, &init), 1);
    assert_eq!(calls(&v, "BZ2_bzCompressInit@libbz2"), 40);
}

/// Writes an executable script.
fn script(name: &str, text: &str) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let p = scratch().join(name);
    let tmp = p.with_extension(format!("tmp{}", std::process::id()));
    std::fs::write(&tmp, text).unwrap();
    std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::rename(&tmp, &p).unwrap();
    p
}

#[test]
fn a_program_started_through_scripts_and_env_is_probed_in_the_elf_that_runs() {
    let zdl = kansoku_examples::build_source("zdl", ZDL, &scratch(), &["-O2", "-ldl"]).unwrap();
    // `#!PROGRAM ARG`: the kernel runs PROGRAM ARG SCRIPT; a probe of the program's own
    // function (main) and of the library it loads
    let launcher = script("launch-zdl", &format!("#!{} 700\n", zdl.display()));
    let (v, out) = events(&["main", "crc32@libz"], launcher.to_str().unwrap(), &[], "launcher");
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!((calls(&v, "main"), calls(&v, "crc32@libz")), (1, 700));
    // a shim: a shell script that execs the program; the shell has no `main`, the program
    // the script names has: planned there and counted when the exec comes (issue 44);
    // a function no program has is refused, naming what runs the script
    let shim = script("shim-zdl", &format!("#!/bin/sh\nexec {} 400 \"$@\"\n", zdl.display()));
    let (v, out) = events(&["main", "crc32@libz"], shim.to_str().unwrap(), &[], "shim-main");
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!((calls(&v, "main"), calls(&v, "crc32@libz")), (1, 400), "{}", stderr(&out));
    assert!(notes(&v).iter().any(|n| n.contains("'main' is planned in") && n.contains("zdl")), "{:?}", notes(&v));
    // (no program the text names has it: looked up in each program the run starts, and
    // none defines it)
    let out = kansoku_cmd().env("KANSOKU_AGENT", agent()).args(["monitor", "events", "--mechanism", "agent", "--probe", "no_such_function", "--"]).arg(&shim).output().unwrap();
    assert!(!out.status.success());
    assert!(stderr(&out).contains("'no_such_function' is defined by no program the run started") && stderr(&out).contains("/usr/bin/dash"), "{}", stderr(&out));
    let (v, out) = events(&["crc32@libz"], shim.to_str().unwrap(), &[], "shim");
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(calls(&v, "crc32@libz"), 400);
    assert!(notes(&v).iter().all(|n| !n.contains("not probed")), "{:?}", notes(&v));
    let python = "/usr/bin/python3.11";
    if !Path::new(python).is_file() {
        skip(Missing::Installed { package: "python3.11" }, format!("{python} is missing"));
        return;
    }
    // `#!/usr/bin/env python3.11`: env's lookup on PATH, done as env does it (a PATH
    // without pyenv's shims, which are scripts run by bash)
    let py = script("bz2-script", "#!/usr/bin/env python3.11\nimport bz2, sys\nfor i in range(int(sys.argv[1])):\n    bz2.compress(b'kansoku' * 100)\n");
    let (v, out) = events_with_path(&["BZ2_bzCompressInit@libbz2", "PyList_Append"], py.to_str().unwrap(), &["120"], "env-python", Some("/usr/bin:/bin"));
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(calls(&v, "BZ2_bzCompressInit@libbz2"), 120);
    assert!(v["program"].as_str().unwrap().contains("python3.11"), "{}", v["program"]);
}

/// A program that says how often it called `work` and which process it is.
const SHIMMED: &str = r#"#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
static volatile long sink;
__attribute__((noinline)) long work(long x) {
    sink += x;
    return sink * 3;
}
int main(int argc, char **argv) {
    int n = argc > 1 ? atoi(argv[1]) : 100;
    long s = 0;
    for (int i = 0; i < n; i++) s += work(i);
    printf("work %d %ld pid %d\n", n, s, (int)getpid());
    return 0;
}
"#;

/// A shim that builds its program's path at run time, two levels of exec deep (pyenv's
/// shape: a script execs a launcher, which execs a program named by what it computes):
/// no text names the program, so kansoku cannot plan `work` before the run. The agent in
/// each process asks kansoku where `work` is; the shells (dash, bash), `dirname` and
/// `echo` lack it and are passed through; the program has it. Counts equal the program's
/// own word and callgrind's, and the report names the process and program it was planted in.
#[test]
fn a_shim_that_builds_its_programs_path_at_run_time_is_followed_to_the_program() {
    let root = scratch().join("runtime-shim");
    let prog = kansoku_examples::build_source("prog", SHIMMED, &root.join("bin"), &["-O2"]).unwrap();
    std::fs::create_dir_all(root.join("libexec")).unwrap();
    let launcher = script("runtime-shim/libexec/launch", "#!/bin/bash\nname=$(echo pr)og\nexec \"$(dirname \"$0\")/../bin/$name\" \"$@\"\n");
    let shim = script("runtime-shim/shim", "#!/bin/sh\nexec \"$(dirname \"$0\")/libexec/$(echo launch)\" \"$@\"\n");
    assert!(launcher.is_file());
    let (v, out) = events(&["work", "main"], shim.to_str().unwrap(), &["250"], "runtime-shim");
    assert!(out.status.success(), "{}", stderr(&out));
    let said = String::from_utf8_lossy(&out.stdout).into_owned();
    let pid = said.trim().rsplit(' ').next().unwrap().to_string();
    assert!(said.starts_with("work 250 ") && pid.parse::<u32>().is_ok(), "the program's own output: {said:?}");
    let want = callgrind_calls(prog.to_str().unwrap(), &["250"]);
    assert_eq!(want.get("work").copied(), Some(250), "callgrind: {want:?}");
    assert_eq!((calls(&v, "work"), calls(&v, "main")), (250, 1), "{:?}", notes(&v));
    let prog = std::fs::canonicalize(&prog).unwrap();
    let planted = format!("'work' was planted in {} (pid {pid})", prog.display());
    assert!(notes(&v).iter().any(|n| n.starts_with(&planted)), "no note {planted:?} in {:?}", notes(&v));
    assert!(notes(&v).iter().any(|n| n.contains("'main' was planted in") && n.contains(&format!("(pid {pid})"))), "{:?}", notes(&v));
    assert!(notes(&v).iter().all(|n| !n.contains("not probed") && !n.contains("defined by no program")), "{:?}", notes(&v));

    // a function no program of the run defines: an error that says so, naming where it looked
    let out = kansoku_cmd().env("KANSOKU_AGENT", agent()).args(["monitor", "events", "--mechanism", "agent", "--probe", "not_in_any_program", "--"]).arg(&shim).arg("3").output().unwrap();
    assert!(!out.status.success());
    let err = stderr(&out);
    assert!(err.contains("'not_in_any_program' is defined by no program the run started") && err.contains(&prog.display().to_string()), "{err}");

    // uprobes are placed on a file before the run, and ptrace does not follow exec here:
    // both refuse, naming the agent
    for mechanism in ["uprobe", "trap"] {
        let out = kansoku_cmd().env("KANSOKU_AGENT", agent()).args(["monitor", "events", "--mechanism", mechanism, "--probe", "work", "--"]).arg(&shim).arg("3").output().unwrap();
        assert!(!out.status.success(), "{mechanism}");
        let err = stderr(&out);
        assert!(err.contains("known only when it runs") && err.contains("--mechanism agent"), "{mechanism}: {err}");
    }
}
