//! Real programs, real Valgrind (kansoku's own tool and Lackey), real single-stepping: the
//! figure-2 paths, and identical path tables from both sources.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read};
use std::path::Path;

use kansoku_core::{Header, RecordingKind, RecordingReader, RecordingWriter};
use kansoku_examples::{build, test_build_dir};
use kansoku_paths::{AnalysisOptions, BackEdgeMode, CallMode, PathAnalysis, Scope};
use kansoku_probe::valgrind::{spawn_lackey, spawn_tool, LackeyOptions};
use kansoku_probe::{trace_exact, ExactTraceOptions};

fn opts(calls: CallMode, program: &Path) -> AnalysisOptions {
    AnalysisOptions { calls, back_edges: BackEdgeMode::Address, scope: Scope::Program, program: Some(program.to_string_lossy().into()), track_edges: false, track_calls: false }
}

fn valgrind_options(program: &Path, args: &[&str]) -> LackeyOptions {
    LackeyOptions { valgrind: "valgrind".into(), program: program.to_path_buf(), args: args.iter().map(|s| s.to_string()).collect() }
}

/// The program under kansoku's Valgrind tool: its whole binary stream and Valgrind's log.
fn tool_stream(program: &Path, args: &[&str]) -> (Vec<u8>, Vec<u8>, kansoku_core::ExitStatus, std::path::PathBuf) {
    let mut run = spawn_tool(&valgrind_options(program, args)).expect("valgrind starts with kansoku's tool (built by kansoku-probe's build.rs)");
    let mut bytes = Vec::new();
    run.output.read_to_end(&mut bytes).unwrap();
    let (exit, log) = run.wait().unwrap();
    (bytes, log, exit, run.program.clone())
}

/// A whole tool stream (and Valgrind's log) analysed with `options`, fed in `chunk`-byte
/// pieces; the stream must be undamaged.
fn analyse_stream(bytes: &[u8], log: &[u8], exit: kansoku_core::ExitStatus, options: &AnalysisOptions, chunk: usize) -> PathAnalysis {
    let mut a = PathAnalysis::new(options);
    for piece in bytes.chunks(chunk) {
        a.feed_tool_stream(piece);
    }
    a.feed_valgrind_log(log);
    a.set_exit(exit);
    a.finish().unwrap();
    assert_eq!(a.stats.stream_damage, 0, "{:?}", a.stats.stream_damage_examples);
    a
}

/// kansoku's own Valgrind tool (the default `--source valgrind`), fed in pieces of odd sizes.
fn via_valgrind(program: &Path, args: &[&str], calls: &[CallMode]) -> Vec<PathAnalysis> {
    let (bytes, log, exit, resolved) = tool_stream(program, args);
    assert!(bytes.starts_with(b"KSB1"), "a stream of frames");
    calls.iter().map(|&c| analyse_stream(&bytes, &log, exit, &opts(c, &resolved), 40_000)).collect()
}

fn via_lackey(program: &Path, args: &[&str], calls: &[CallMode]) -> Vec<PathAnalysis> {
    let mut run = spawn_lackey(&LackeyOptions {
        valgrind: "valgrind".into(),
        program: program.to_path_buf(),
        args: args.iter().map(|s| s.to_string()).collect(),
    })
    .expect("valgrind starts");
    let resolved = run.program.clone();
    let mut analyses: Vec<PathAnalysis> = calls.iter().map(|&c| PathAnalysis::new(&opts(c, &resolved))).collect();
    let mut reader = BufReader::new(&run.output);
    let mut line = Vec::new();
    while reader.read_until(b'\n', &mut line).unwrap() > 0 {
        let l = line.strip_suffix(b"\n").unwrap_or(&line);
        for a in &mut analyses {
            a.feed_lackey_line(l);
        }
        line.clear();
    }
    let exit = run.wait().unwrap();
    for a in &mut analyses {
        a.set_exit(exit);
        a.finish().unwrap();
    }
    analyses
}

fn via_step(program: &Path, args: &[&str], calls: &[CallMode]) -> Vec<PathAnalysis> {
    let dir = tempfile::tempdir().unwrap();
    let ksk = dir.path().join("t.ksk");
    let resolved = kansoku_probe::exact::resolve(program).unwrap();
    let args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
    let header = Header::new(RecordingKind::ExactTrace, resolved.to_string_lossy(), args.clone());
    let mut w = RecordingWriter::create(&ksk, &header).unwrap();
    let o = ExactTraceOptions { program: resolved.clone(), args, ..Default::default() };
    trace_exact(&o, &mut w, &mut |_| {}).expect("traced");
    w.finish().unwrap();
    calls
        .iter()
        .map(|&c| {
            let mut a = PathAnalysis::new(&opts(c, &resolved));
            let mut r = RecordingReader::open(&ksk).unwrap();
            while let Some(e) = r.next_event().unwrap() {
                a.feed_event(&e);
            }
            a.finish().unwrap();
            a
        })
        .collect()
}

fn table(a: &mut PathAnalysis) -> BTreeMap<String, u64> {
    a.report(None, None).paths.into_iter().map(|p| (p.text, p.count)).collect()
}

/// What walk(data + r%2, n) runs, computed from the data the program builds.
fn figure_two_expected(n: u64, repeat: u64) -> BTreeMap<String, u64> {
    let mut m = BTreeMap::new();
    for r in 0..repeat {
        for i in 0..n {
            let v = i + r % 2;
            let b = if v & 1 == 1 { "BB1" } else { "BB2" };
            let last = i == n - 1;
            let text = if last { format!("walk: BB0 {b} BB3 BB4") } else { format!("walk: BB0 {b} BB3") };
            *m.entry(text).or_insert(0) += 1;
        }
    }
    m
}

#[test]
fn figure_two_paths_from_both_sources() {
    let p = build("paths", &test_build_dir()).unwrap();
    let (n, repeat) = (7u64, 3u64);
    let args = ["7", "3"];
    let want = figure_two_expected(n, repeat);
    assert_eq!(want.len(), 4, "the inputs exercise ABDE, ACDE, ABD and ACD");
    for (name, mut a) in [
        ("valgrind", via_valgrind(&p, &args, &[CallMode::Split]).remove(0)),
        ("lackey", via_lackey(&p, &args, &[CallMode::Split]).remove(0)),
        ("step", via_step(&p, &args, &[CallMode::Split]).remove(0)),
    ] {
        let got: BTreeMap<String, u64> = table(&mut a).into_iter().filter(|(t, _)| t.starts_with("walk:")).collect();
        assert_eq!(got, want, "{name}");
        let r = a.report(None, Some("walk"));
        let walk = r.functions.iter().find(|f| f.function == "walk").unwrap();
        assert_eq!((walk.possible_paths, walk.possible_paths_run), (Some(4), 4), "{name}: all four Ball-Larus paths ran");
        let ids: std::collections::BTreeSet<u64> = r.paths.iter().map(|p| p.ball_larus.unwrap()).collect();
        assert_eq!(ids, (0..4).collect(), "{name}");
        // ABD: 3 blocks; its instruction count is the sum of A, B and D
        let abd = r.paths.iter().find(|p| p.text == "walk: BB0 BB1 BB3").unwrap();
        assert_eq!(abd.blocks[2].line.as_deref().map(|l| l.starts_with("paths.c:")), Some(true));
    }
}

#[test]
fn both_sources_agree_on_the_examples() {
    let modes = [CallMode::Split, CallMode::Through, CallMode::Frames];
    // threads 2000: the stepped trace still switches threads about 20,000 times (181,000 at
    // 20000, Valgrind's 3 at both), for 135,000 instructions single-stepped instead of 352,000
    for (name, args) in [("seed000", vec!["3"]), ("recursion", vec![]), ("sorting", vec![]), ("matrix", vec![]), ("crash", vec![]), ("threads", vec!["2000"])] {
        let p = build(name, &test_build_dir()).unwrap();
        let mut v = via_valgrind(&p, &args, &modes);
        let mut s = via_step(&p, &args, &modes);
        for (i, mode) in modes.iter().enumerate() {
            let (tv, ts) = (table(&mut v[i]), table(&mut s[i]));
            assert!(!tv.is_empty(), "{name} {mode:?}: no paths");
            if tv != ts {
                let only_v: Vec<_> = tv.iter().filter(|(k, c)| ts.get(*k) != Some(c)).take(8).collect();
                let only_s: Vec<_> = ts.iter().filter(|(k, c)| tv.get(*k) != Some(c)).take(8).collect();
                panic!("{name} {mode:?}: valgrind and step differ\nvalgrind only: {only_v:#?}\nstep only: {only_s:#?}");
            }
        }
        if name == "threads" {
            // each thread's blocks were analysed as that thread's own stream
            assert_eq!(v[0].stats.threads, 2, "valgrind names both threads");
            assert_eq!(s[0].stats.threads, 2, "the tracer names both threads");
        }
        if name == "crash" {
            assert_eq!(v[0].stats.signal, Some(11), "valgrind reports the SIGSEGV");
            assert_eq!(s[0].stats.signal, Some(11), "the tracer reports the SIGSEGV");
        }
    }
}

#[test]
fn recorded_block_stream_gives_the_same_paths() {
    let p = build("seed000", &test_build_dir()).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let ksk = dir.path().join("b.ksk");
    let mut run = spawn_lackey(&LackeyOptions { valgrind: "valgrind".into(), program: p.clone(), args: vec!["2".into()] }).unwrap();
    let resolved = run.program.clone();
    let mut live = PathAnalysis::new(&opts(CallMode::Frames, &resolved));
    live.record_into(kansoku_paths::BlockRecorder::create(&ksk, &resolved.to_string_lossy(), vec!["2".into()], "valgrind").unwrap());
    for line in BufReader::new(&run.output).split(b'\n') {
        live.feed_lackey_line(&line.unwrap());
    }
    live.set_exit(run.wait().unwrap());
    live.finish().unwrap();
    let mut reader = RecordingReader::open(&ksk).unwrap();
    let mut offline = PathAnalysis::new(&opts(CallMode::Frames, &resolved));
    offline.block_kind = kansoku_paths::BlockKind::of_header(reader.header());
    assert_eq!(offline.block_kind, kansoku_paths::BlockKind::Basic);
    while let Some(e) = reader.next_event().unwrap() {
        offline.feed_event(&e);
    }
    offline.finish().unwrap();
    assert_eq!(table(&mut live), table(&mut offline));
}

#[test]
fn garbled_lackey_line_is_reported_and_skipped() {
    let p = build("paths", &test_build_dir()).unwrap();
    let mut run = spawn_lackey(&LackeyOptions { valgrind: "valgrind".into(), program: p.clone(), args: vec!["5".into(), "1".into()] }).unwrap();
    let mut a = PathAnalysis::new(&opts(CallMode::Split, &run.program.clone()));
    let mut n = 0;
    for line in BufReader::new(&run.output).split(b'\n') {
        let line = line.unwrap();
        n += 1;
        if n == 2000 {
            a.feed_lackey_line(b"SB 0x4zz!");
        }
        a.feed_lackey_line(&line);
    }
    run.wait().unwrap();
    a.finish().unwrap();
    let r = a.report(None, None);
    assert_eq!(r.input.garbled_lines, 1);
    assert!(r.warnings.iter().any(|w| w.contains("line 2000") && w.contains("SB 0x4zz!")), "{:?}", r.warnings);
    assert!(r.paths.iter().any(|p| p.text.starts_with("walk:")), "analysis went on after the bad line");
}

#[test]
fn missing_valgrind_is_a_clear_error() {
    let p = build("paths", &test_build_dir()).unwrap();
    let err = spawn_lackey(&LackeyOptions { valgrind: "/nonexistent/valgrind".into(), program: p, args: vec![] }).err().expect("fails");
    let msg = err.to_string();
    assert!(msg.contains("/nonexistent/valgrind") && msg.contains("install") && msg.contains("--source step"), "{msg}");
}

#[test]
fn loop_back_edges_agree_with_the_address_rule_on_figure_two_and_matrix() {
    // In walk and multiply every backward branch is a loop back edge and vice versa, so the
    // two rules must cut identically there; the dominator rule is computed from the CFG, not
    // from addresses. Elsewhere they differ: a lazy-binding PLT stub jumps back to .plt[0],
    // a backward jump that is no loop, cut only by the address rule.
    for (name, function, args) in [("paths", "walk:", vec!["6", "2"]), ("matrix", "multiply:", vec![])] {
        let p = build(name, &test_build_dir()).unwrap();
        let resolved = kansoku_probe::exact::resolve(&p).unwrap();
        let mut by_rule = Vec::new();
        for rule in [BackEdgeMode::Address, BackEdgeMode::Loops] {
            let mut o = opts(CallMode::Split, &resolved);
            o.back_edges = rule;
            let mut run = spawn_lackey(&LackeyOptions { valgrind: "valgrind".into(), program: p.clone(), args: args.iter().map(|s| s.to_string()).collect() }).unwrap();
            let mut a = PathAnalysis::new(&o);
            for line in BufReader::new(&run.output).split(b'\n') {
                a.feed_lackey_line(&line.unwrap());
            }
            run.wait().unwrap();
            a.finish().unwrap();
            by_rule.push(table(&mut a));
        }
        let only = |t: &BTreeMap<String, u64>| t.iter().filter(|(k, _)| k.starts_with(function)).map(|(k, c)| (k.clone(), *c)).collect::<Vec<_>>();
        assert!(!only(&by_rule[0]).is_empty());
        assert_eq!(only(&by_rule[0]), only(&by_rule[1]), "{name}");
        if name == "paths" {
            let plt_alone = |t: &BTreeMap<String, u64>| t.keys().any(|k| k.starts_with("paths+0x1020:"));
            assert!(plt_alone(&by_rule[0]) && !plt_alone(&by_rule[1]), "the PLT's backward jump is cut only by the address rule");
        }
    }
}

#[test]
fn cut_and_garbled_tool_streams_are_reported_and_the_rest_analysed() {
    let p = build("paths", &test_build_dir()).unwrap();
    let (bytes, _, _, resolved) = tool_stream(&p, &["9", "3000"]);
    let run = |stream: &[u8]| {
        let mut a = PathAnalysis::new(&opts(CallMode::Split, &resolved));
        for chunk in stream.chunks(4093) {
            a.feed_tool_stream(chunk);
        }
        a.finish().unwrap();
        let walk: BTreeMap<String, u64> = table(&mut a).into_iter().filter(|(t, _)| t.starts_with("walk:")).collect();
        (a, walk)
    };
    let (whole, want) = run(&bytes);
    // Paths of the figure, or pieces of one where the stream was damaged: the path in
    // progress is cut there, the next one starts after the gap, so each cut leaves at most
    // two pieces, each a run of consecutive blocks of a figure path. Two cuts may leave
    // the same piece (both right after a BB0), so the pieces are counted, not the keys.
    let plausible = |walk: &BTreeMap<String, u64>, cuts: u64| {
        let partial: Vec<_> = walk.iter().filter(|(k, _)| !want.contains_key(*k)).collect();
        let blocks = |k: &str| format!(" {} ", k.trim_start_matches("walk:").trim());
        partial.iter().map(|(_, c)| **c).sum::<u64>() <= 2 * cuts && partial.iter().all(|(k, _)| want.keys().any(|w| blocks(w).contains(&blocks(k))))
    };
    assert_eq!(whole.stats.stream_damage, 0);
    assert_eq!(want, figure_two_expected(9, 3000));
    // frame boundaries, from the headers
    let mut frames = vec![0usize];
    while *frames.last().unwrap() < bytes.len() {
        let at = *frames.last().unwrap();
        let len = u32::from_le_bytes(bytes[at + 4..at + 8].try_into().unwrap()) as usize;
        frames.push(at + 8 + len);
    }
    assert_eq!(*frames.last().unwrap(), bytes.len());
    assert!(frames.len() >= 4, "the run fills several 64 KiB frames ({} bytes)", bytes.len());

    // cut off in the middle of the last frame: reported, everything before it analysed
    let last = frames[frames.len() - 2];
    let cut = &bytes[..last + (bytes.len() - last) / 2];
    let (mut a, walk) = run(cut);
    assert_eq!(a.stats.stream_damage, 1, "{:?}", a.stats.stream_damage_examples);
    assert!(a.stats.stream_damage_examples[0].1.contains("cut off"), "{:?}", a.stats.stream_damage_examples);
    assert!(a.stats.superblocks < whole.stats.superblocks && a.stats.superblocks > whole.stats.superblocks / 2);
    assert!(!walk.is_empty() && plausible(&walk, 1), "{walk:?}");
    let r = a.report(None, None);
    assert!(r.warnings.iter().any(|w| w.contains("damaged in 1 place") && w.contains("cut off")), "{:?}", r.warnings);

    // cut inside a frame header
    let (a, _) = run(&bytes[..frames[1] + 5]);
    assert_eq!(a.stats.stream_damage, 1);
    assert!(a.stats.stream_damage_examples[0].1.contains("frame header"), "{:?}", a.stats.stream_damage_examples);

    // garbage between two frames, and a frame whose payload was overwritten: both found,
    // skipped, and every other frame analysed. Tried at every frame boundary, since
    // where the frames end depends on the run.
    for k in 1..frames.len() - 2 {
        let mut garbled = bytes[..frames[k]].to_vec();
        garbled.extend_from_slice(b"SB 0x401000\n not a frame at all");
        garbled.extend_from_slice(&bytes[frames[k]..frames[k + 1]]);
        let bad = garbled.len() + 8;
        garbled.extend_from_slice(&bytes[frames[k + 1]..]);
        garbled[bad] = 0x19; // the frame's first record gets an unknown tag (0x07 … 0x17 are the exact and paths modes' records)
        let (a, walk) = run(&garbled);
        let damage = &a.stats.stream_damage_examples;
        assert_eq!(a.stats.stream_damage, 2, "frame {k}: {damage:?}");
        assert!(damage[0].1.contains("not a frame"), "frame {k}: {damage:?}");
        assert!(damage[1].1.contains("unknown record tag 0x19"), "frame {k}: {damage:?}");
        assert_eq!(damage[0].0, frames[k] as u64);
        assert!(a.stats.superblocks < whole.stats.superblocks);
        assert!(plausible(&walk, 2), "frame {k}, no invented paths: {walk:?}");
        // frames after the damage are analysed: the last walks' counts are there
        let total: u64 = walk.values().sum();
        assert!(total > want.values().sum::<u64>() / 2, "frame {k}: {total}");
    }
}

/// The program under kansoku's Valgrind tool counting paths itself (`--paths=MODE`),
/// analysed as `kansoku paths --count-in tool` does, the stream fed in pieces of odd sizes.
fn via_tool_paths(program: &Path, args: &[&str], calls: CallMode, scope: Scope, trie_nodes: Option<u32>) -> (PathAnalysis, usize) {
    let mode = if calls == CallMode::Through { "--paths=through" } else { "--paths=split" };
    let mut extra = vec![mode.to_string()];
    extra.extend(trie_nodes.map(|n| format!("--paths-nodes={n}")));
    let mut run = kansoku_probe::valgrind::spawn_tool_with(&valgrind_options(program, args), &extra).expect("valgrind starts with kansoku's tool");
    let mut bytes = Vec::new();
    run.output.read_to_end(&mut bytes).unwrap();
    let (exit, log) = run.wait().unwrap();
    let a = analyse_stream(&bytes, &log, exit, &AnalysisOptions { scope, ..opts(calls, &run.program) }, 777);
    // complete tries, and snapshots (before an execve) count 1000
    let mut tries = 0;
    kansoku_paths::sbstream::StreamDecoder::new().feed(&bytes, &mut |item| match item {
        kansoku_paths::sbstream::Item::PathsEnd { .. } => tries += 1,
        kansoku_paths::sbstream::Item::PathsSnapshot { .. } => tries += 1000,
        _ => {}
    });
    (a, tries)
}

/// Paths counted inside the tool (a trie of superblock paths, replayed by kansoku) equal
/// the paths of the stream of every superblock entry: every path and count, the blocks
/// seen and each block's count, in both call modes the tool counts, with the libraries in
/// scope, on every example (threads, a crash, recursion, the figure-2 loop); and again with
/// a trie the tool must write out and start again every 300 nodes (the paths in progress of
/// every thread carried over).
#[test]
fn paths_counted_in_the_tool_equal_the_stream() {
    let figure_two = build("paths", &test_build_dir()).unwrap();
    let exec = format!("exec {} 300 5", figure_two.display());
    for (name, args) in [("paths", vec!["300", "5"]), ("seed000", vec!["3"]), ("recursion", vec![]), ("sorting", vec![]), ("matrix", vec![]), ("crash", vec![]), ("threads", vec!["20000"]), ("sh", vec!["-c", &exec])] {
        // sh: the shell's paths up to its execve (the program it becomes runs untraced)
        let p = if name == "sh" { std::path::PathBuf::from("/bin/sh") } else { build(name, &test_build_dir()).unwrap() };
        let (bytes, log, exit, resolved) = tool_stream(&p, &args);
        // Two runs of `threads` differ in the C library (pthread_join waits on a futex in
        // one run and not in the next), and in `through` mode those returns cut `main`'s
        // path: there only the program's own paths of `split` mode are the same run to run.
        let deterministic = name != "threads";
        let (modes, scope) = if deterministic { (&[CallMode::Split, CallMode::Through][..], Scope::All) } else { (&[CallMode::Split][..], Scope::Program) };
        for &calls in modes {
            let mut streamed = analyse_stream(&bytes, &log, exit, &AnalysisOptions { scope, ..opts(calls, &resolved) }, bytes.len().max(1));
            let small_trie = matches!(name, "sorting" | "threads" | "crash").then_some(300);
            let (mut counted, tries) = via_tool_paths(&p, &args, calls, scope, small_trie);
            let want_tries = if small_trie.is_some() { tries > 2 } else if name == "sh" { tries == 1000 } else { tries == 1 };
            assert!(want_tries, "{name} {calls:?}: {tries} tries written (a snapshot counts 1000)");
            let (ts, tc) = (table(&mut streamed), table(&mut counted));
            assert!(ts.len() > 3, "{name} {calls:?}: paths");
            if ts != tc {
                let only_s: Vec<_> = ts.iter().filter(|(k, c)| tc.get(*k) != Some(c)).take(8).collect();
                let only_c: Vec<_> = tc.iter().filter(|(k, c)| ts.get(*k) != Some(c)).take(8).collect();
                panic!("{name} {calls:?}: the tool's count and the stream differ\nstream only: {only_s:#?}\ntool only: {only_c:#?}");
            }
            if !deterministic {
                assert_eq!((streamed.stats.threads, counted.stats.threads), (2, 2), "{name}");
                continue;
            }
            let (s, c) = (&streamed.profiler, &counted.profiler);
            assert_eq!((s.blocks_seen, s.blocks_in_scope), (c.blocks_seen, c.blocks_in_scope), "{name} {calls:?}: blocks");
            let nonzero = |v: &[u64], a: &PathAnalysis| -> BTreeMap<u64, u64> { v.iter().enumerate().filter(|(_, &n)| n > 0).map(|(b, &n)| (a.code.block(b as u32).addr, n)).collect() };
            assert_eq!(nonzero(&s.block_counts, &streamed), nonzero(&c.block_counts, &counted), "{name} {calls:?}: block counts");
            assert_eq!(streamed.stats.superblocks, counted.stats.superblocks, "{name} {calls:?}: superblocks");
            assert_eq!((streamed.stats.threads, streamed.stats.signal), (counted.stats.threads, counted.stats.signal), "{name} {calls:?}");
            assert!(counted.stats.stream_bytes * 4 < streamed.stats.stream_bytes || streamed.stats.stream_bytes < 200_000, "{name}: the trie is smaller than the stream");
        }
    }
}
