//! The path algorithm and Ball–Larus numbering against exact oracles.

use std::collections::{BTreeSet, HashMap};

use kansoku_binary::InstructionKind;
use kansoku_paths::ballarus::DagInput;
use kansoku_paths::{BackEdgeMode, BallLarus, BlockFacts, BlockId, CallMode, PathProfiler};
use proptest::prelude::*;

/// Blocks of a synthetic program: address i*16, all in function 0, all in scope.
struct Table {
    n: u32,
}

impl BlockFacts for Table {
    fn addr(&self, b: BlockId) -> u64 {
        u64::from(b) * 16
    }
    fn function(&self, _b: BlockId) -> Option<u32> {
        Some(0)
    }
    fn cfg_block(&self, b: BlockId) -> Option<u32> {
        Some(b)
    }
    fn is_loop_back_edge(&self, from: BlockId, to: BlockId) -> bool {
        to <= from && to < self.n
    }
    fn in_scope(&self, _b: BlockId) -> bool {
        true
    }
}

/// The seed's algorithm written the plain way: a list of (path, count), linear search.
fn naive(stream: &[(BlockId, InstructionKind)], calls: CallMode) -> Vec<(Vec<BlockId>, u64)> {
    let mut table: Vec<(Vec<BlockId>, u64)> = Vec::new();
    let record = |p: &mut Vec<BlockId>, table: &mut Vec<(Vec<BlockId>, u64)>| {
        if p.is_empty() {
            return;
        }
        match table.iter_mut().find(|(q, _)| q == p) {
            Some((_, c)) => *c += 1,
            None => table.push((p.clone(), 1)),
        }
        p.clear();
    };
    let mut path: Vec<BlockId> = Vec::new();
    let mut frames: Vec<Vec<BlockId>> = Vec::new();
    let mut prev: Option<BlockId> = None;
    for &(b, k) in stream {
        if let Some(p) = prev {
            match k {
                InstructionKind::Jump | InstructionKind::ConditionalJump
                    if b <= p => {
                        // block addresses are b * 16: target at or below the block left
                        record(&mut path, &mut table)
                    }
                InstructionKind::Call => match calls {
                    CallMode::Split => record(&mut path, &mut table),
                    CallMode::Through => {}
                    CallMode::Frames => frames.push(std::mem::take(&mut path)),
                },
                InstructionKind::Return => {
                    record(&mut path, &mut table);
                    if calls == CallMode::Frames {
                        if let Some(f) = frames.pop() {
                            path = f;
                        }
                    }
                }
                _ => {}
            }
        }
        path.push(b);
        prev = Some(b);
    }
    record(&mut path, &mut table);
    while let Some(mut f) = frames.pop() {
        record(&mut f, &mut table);
    }
    table
}

fn kind_strategy() -> impl Strategy<Value = InstructionKind> {
    prop_oneof![
        4 => Just(InstructionKind::Other),
        4 => Just(InstructionKind::ConditionalJump),
        2 => Just(InstructionKind::Jump),
        1 => Just(InstructionKind::Call),
        1 => Just(InstructionKind::Return),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    /// Interned counting equals the naive list on random block streams, in every call mode.
    #[test]
    fn path_counts_match_naive(stream in prop::collection::vec((0u32..12, kind_strategy()), 0..400), mode in 0..3usize) {
        let calls = [CallMode::Split, CallMode::Through, CallMode::Frames][mode];
        let facts = Table { n: 12 };
        let mut p = PathProfiler::new(calls, BackEdgeMode::Address);
        for &(b, k) in &stream {
            p.enter(b, k, &facts);
        }
        p.finish();
        let got: HashMap<Vec<BlockId>, u64> = p.paths.iter().map(|(q, c)| (q.to_vec(), c)).collect();
        let want: HashMap<Vec<BlockId>, u64> = naive(&stream, calls).into_iter().collect();
        prop_assert_eq!(&got, &want);
        // every block entry lands in exactly one path execution
        let blocks: u64 = got.iter().map(|(q, c)| q.len() as u64 * c).sum();
        prop_assert_eq!(blocks, stream.len() as u64);
        // interning: one stored copy per distinct path
        prop_assert_eq!(p.paths.stored_blocks(), got.keys().map(|q| q.len()).sum::<usize>());
    }

    /// Ball–Larus ids are a bijection from the DAG's ENTRY→EXIT paths onto 0..NumPaths.
    #[test]
    fn ball_larus_ids_are_a_bijection(
        n in 1usize..9,
        edges in prop::collection::vec((0usize..9, 0usize..9), 0..20),
        calls in prop::collection::vec(any::<bool>(), 9),
        exits in prop::collection::vec(any::<bool>(), 9),
    ) {
        let mut successors = vec![Vec::new(); n];
        for (u, v) in edges {
            if u < n && v < n && !successors[u].contains(&(v as u32)) {
                successors[u].push(v as u32);
            }
        }
        // address rule: back iff target at or below source
        let back: Vec<Vec<bool>> = successors.iter().enumerate().map(|(u, s)| s.iter().map(|&v| (v as usize) <= u).collect()).collect();
        let call: Vec<bool> = (0..n).map(|i| calls[i] && !successors[i].is_empty()).collect();
        let exit: Vec<bool> = (0..n).map(|i| exits[i] || successors[i].is_empty()).collect();
        let bl = BallLarus::from_input(&DagInput { successors, back, call, exit });
        let total = bl.num_paths.expect("small graphs do not overflow");
        let paths = bl.enumerate(100_000);
        prop_assert_eq!(paths.len() as u128, total);
        let ids: BTreeSet<u128> = paths.iter().map(|p| bl.path_id(p).expect("enumerated paths have ids")).collect();
        prop_assert_eq!(ids.len() as u128, total, "ids are distinct");
        if total > 0 {
            prop_assert_eq!(*ids.iter().next_back().unwrap(), total - 1);
            prop_assert_eq!(*ids.iter().next().unwrap(), 0);
        }
    }
}

#[test]
fn figure_two_by_hand() {
    // A=0 -> B=1 | C=2; B -> D=3; C -> D (fall through); D -> A (back) | E=4 (return)
    let successors = vec![vec![2, 1], vec![3], vec![3], vec![4, 0], vec![]];
    let back = vec![vec![false, false], vec![false], vec![false], vec![false, true], vec![]];
    let bl = BallLarus::from_input(&DagInput { successors, back, call: vec![false; 5], exit: vec![false, false, false, false, true] });
    assert_eq!(bl.num_paths, Some(4), "ABDE, ACDE, ABD, ACD");
    let mut ids: Vec<u128> = [[0, 1, 3, 4].as_slice(), &[0, 2, 3, 4], &[0, 1, 3], &[0, 2, 3]].iter().map(|p| bl.path_id(p).unwrap()).collect();
    ids.sort();
    assert_eq!(ids, vec![0, 1, 2, 3]);
    assert_eq!(bl.path_id(&[1, 3]), None, "B is not a path start");
}

/// Block 2 ends in a `syscall` (a "call" for the decoder that no `ret` ends).
struct WithSyscall;

impl BlockFacts for WithSyscall {
    fn addr(&self, b: BlockId) -> u64 {
        u64::from(b) * 16
    }
    fn function(&self, _b: BlockId) -> Option<u32> {
        Some(0)
    }
    fn cfg_block(&self, b: BlockId) -> Option<u32> {
        Some(b)
    }
    fn is_loop_back_edge(&self, _from: BlockId, _to: BlockId) -> bool {
        false
    }
    fn in_scope(&self, _b: BlockId) -> bool {
        true
    }
    fn ends_in_syscall(&self, b: BlockId) -> bool {
        b == 2
    }
}

#[test]
fn a_system_call_pushes_no_frame() {
    // 0 calls 1; 1 falls into 2, 2 makes a system call, the kernel returns to 3; 3 returns
    // to 4. In frames mode the callee's path is 1 2 3 and the caller's resumes: 0 4. A frame
    // pushed at the syscall would be popped by 3's return instead, burying 0's path.
    use InstructionKind::*;
    let stream = [(0, Other), (1, Call), (2, Other), (3, Call), (4, Return)];
    let mut p = PathProfiler::new(CallMode::Frames, BackEdgeMode::Address);
    for &(b, k) in &stream {
        p.enter(b, k, &WithSyscall);
    }
    p.finish();
    let mut got: Vec<(Vec<BlockId>, u64)> = p.paths.iter().map(|(q, c)| (q.to_vec(), c)).collect();
    got.sort();
    assert_eq!(got, vec![(vec![0, 4], 1), (vec![1, 2, 3], 1)]);
    // split mode still cuts there, as at every call
    let mut p = PathProfiler::new(CallMode::Split, BackEdgeMode::Address);
    for &(b, k) in &stream {
        p.enter(b, k, &WithSyscall);
    }
    p.finish();
    let mut got: Vec<Vec<BlockId>> = p.paths.iter().map(|(q, _)| q.to_vec()).collect();
    got.sort();
    assert_eq!(got, vec![vec![0], vec![1, 2], vec![3], vec![4]]);
}
