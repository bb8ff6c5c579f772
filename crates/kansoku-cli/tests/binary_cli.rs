//! `kansoku inspect` on code without symbols (issue 14): stripped programs, PLT stubs and
//! switch jump tables, on real programs as a user runs it.

mod harness;
use harness::*;

use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;

use kansoku_examples::{build_with, test_build_dir};

const GZIP: &str = "/usr/bin/gzip";
const LIBZ: &str = "/lib/x86_64-linux-gnu/libz.so.1";

/// (address, name, source) of every function `inspect --json` lists.
fn functions(program: &Path) -> Vec<(u64, String, String)> {
    let v = ok_json(&["inspect", program.to_str().unwrap(), "--json"]);
    v["functions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            let address = u64::from_str_radix(f["address"].as_str().unwrap().trim_start_matches("0x"), 16).unwrap();
            (address, f["name"].as_str().unwrap().to_string(), f["source"].as_str().unwrap().to_string())
        })
        .collect()
}

#[test]
fn a_stripped_programs_functions_start_where_its_symbols_did() {
    let dir = test_build_dir();
    let program = build_with("sorting", &dir, &["-O2"]).unwrap();
    let copy = dir.join(format!("sorting-O2-stripped-cli-{}", std::process::id()));
    assert!(Command::new("strip").arg("-o").arg(&copy).arg(&program).status().unwrap().success());
    let full = functions(&program);
    let bare = functions(&copy);
    let _ = std::fs::remove_file(&copy);
    // The unstripped program's own functions (crtstuff's helpers have no unwind entry).
    let crt = ["deregister_tm_clones", "register_tm_clones", "__do_global_dtors_aux", "frame_dummy", "_init", "_fini"];
    let own: BTreeSet<u64> = full.iter().filter(|(_, n, s)| s == "static" && !crt.contains(&n.as_str())).map(|f| f.0).collect();
    let from_fdes: BTreeSet<u64> = bare.iter().filter(|f| f.2 == "eh_frame").map(|f| f.0).collect();
    assert_eq!(from_fdes, own, "stripped {bare:?}\nunstripped {full:?}");
    let main = full.iter().find(|f| f.1 == "main").unwrap().0;
    let module = copy.file_name().unwrap().to_str().unwrap();
    assert!(bare.iter().any(|f| f.0 == main && f.1 == format!("{module}+0x{main:x}")), "{bare:?}");
    assert!(bare.iter().all(|f| !f.1.starts_with('.')), "no bare section names: {bare:?}");
    let plt = |fs: &[(u64, String, String)]| fs.iter().filter(|f| f.1.ends_with("@plt")).cloned().collect::<Vec<_>>();
    assert!(!plt(&full).is_empty() && plt(&full) == plt(&bare), "{:?}", plt(&bare));
}

#[test]
fn debians_gzip_is_listed_by_its_functions() {
    if !Path::new(GZIP).exists() {
        skip(Missing::Installed { package: "gzip" }, format!("{GZIP} is not installed"));
        return;
    }
    let o = kansoku(&["inspect", GZIP]);
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success());
    assert!(out.contains(" gzip+0x") && out.contains(" memcpy@plt") && !out.contains(".text+0x"), "{out}");
    let fs = functions(Path::new(GZIP));
    assert!(fs.iter().filter(|f| f.2 == "eh_frame").count() > 100, "{fs:?}");
}

#[test]
fn inspect_follows_the_switch_of_zlibs_inflate() {
    if !Path::new(LIBZ).exists() {
        skip(Missing::Installed { package: "zlib1g-dev" }, format!("{LIBZ} is not installed"));
        return;
    }
    let o = kansoku(&["inspect", LIBZ, "--function", "inflate"]);
    let out = String::from_utf8_lossy(&o.stdout);
    let first = out.lines().next().unwrap_or("");
    assert!(first.contains("jump table followed") && !first.contains("unresolved"), "{first}");
    let v = ok_json(&["inspect", LIBZ, "--function", "inflate", "--json"]);
    let loops = v["loops"].as_array().unwrap().len();
    assert!(loops > 0 && first.contains(&format!(" {loops} loops")), "{first}");
    let tables = v["jump_tables"].as_array().unwrap();
    assert!(!tables.is_empty() && v["unresolved_jumps"].as_array().unwrap().is_empty());
    // The dispatch block's successors are the table's distinct targets.
    let block_starts: BTreeSet<&str> = v["blocks"].as_array().unwrap().iter().map(|b| b["start"].as_str().unwrap()).collect();
    for t in tables[0]["targets"].as_array().unwrap() {
        assert!(block_starts.contains(t.as_str().unwrap()), "{t} starts a block");
    }
}
