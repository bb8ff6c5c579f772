//! `kansoku tp`: the command lines of issue 6, end to end on a clang-compiled example.

mod harness;
use harness::*;

use std::path::Path;

#[test]
fn optimize_run_decode_check() {
    let dir = tempfile::tempdir().unwrap();
    let d = |f: &str| dir.path().join(f).display().to_string();
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("../kansoku-tracepoints/examples/c/derived.c");
    kansoku_tracepoints::clang::compile_c(&src, Path::new(&d("in.wasm")))
        .unwrap_or_else(|e| panic!("{e}\nrun scripts/setup to install clang and lld"));

    let out = ok(&["tp", "optimize", &d("in.wasm"), "-o", &d("out.wasm"), "--max-new-ids", "4", "--report"]);
    assert!(out.contains("new id"), "{out}");
    let json: serde_json::Value = serde_json::from_str(&ok(&["tp", "optimize", &d("in.wasm"), "-o", &d("out.wasm"), "--json"])).unwrap();
    assert!(json["report"]["groups_merged"].as_u64().unwrap() >= 1);

    ok(&["tp", "run", &d("in.wasm"), "-o", &d("in.ktrace"), "--", "25"]);
    ok(&["tp", "run", &d("out.wasm"), "-o", &d("out.ktrace"), "--clock", "instructions", "--", "25"]);
    let a: serde_json::Value = serde_json::from_str(&ok(&["tp", "decode", &d("in.ktrace"), "--module", &d("in.wasm"), "--json"])).unwrap();
    let b: serde_json::Value =
        serde_json::from_str(&ok(&["tp", "decode", &d("out.ktrace"), "--module", &d("out.wasm"), "--json", "--timestamps", "subindex"])).unwrap();
    let strip = |v: &serde_json::Value| -> Vec<(u64, String)> {
        v["events"].as_array().unwrap().iter().map(|e| (e["id"].as_u64().unwrap(), e["args"].to_string())).collect()
    };
    assert_eq!(strip(&a), strip(&b));
    assert!(b["records"].as_u64().unwrap() < a["records"].as_u64().unwrap());
    assert!(b["events"][1]["timestamp"].as_str().unwrap().contains('.'), "sub-index timestamps");

    let out = ok(&["tp", "check", &d("in.wasm"), &d("out.wasm"), "--timing", "1", "--", "25"]);
    assert!(out.contains("IDENTICAL"), "{out}");

    // bad input: a trace decoded with the wrong module, and a file that is not wasm
    let o = kansoku(&["tp", "decode", &d("out.ktrace"), "--module", &d("in.wasm")]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("another module"));
    std::fs::write(d("bad.wasm"), b"garbage").unwrap();
    let o = kansoku(&["tp", "optimize", &d("bad.wasm"), "-o", &d("x.wasm")]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("not a valid WebAssembly module"));
}
