//! Inputs the fuzzer found (fuzz/seeds/tool_paths/regression-*), fed the way its
//! `tool_paths` target feeds them: every one is analysed and reported without a panic.
//! The test profile checks integer overflow, as the fuzzer's build does.

use kansoku_paths::{AnalysisOptions, PathAnalysis, Scope};

/// The fuzz target's steps: the stream cut where its first byte says, then the report.
fn analyse(data: &[u8]) {
    let mut a = PathAnalysis::new(&AnalysisOptions { scope: Scope::All, ..Default::default() });
    let cut = data.first().map_or(0, |&b| b as usize).min(data.len());
    a.feed_tool_stream(&data[..cut]);
    a.feed_tool_stream(&data[cut..]);
    let _ = a.finish();
    let _ = a.report(Some(20), None);
}

/// A replayed trie whose counts sum to u64::MAX superblocks, then one superblock more: the
/// count added 1 past the top (CI's fuzzing round, 2026-11-27); it saturates now.
#[test]
fn superblocks_past_the_top_of_a_replayed_trie() {
    analyse(include_bytes!("../../../fuzz/seeds/tool_paths/regression-superblocks-overflow"));
}

/// Path counts near 2^64 (the first finding, 2026-11-25): the report's totals saturate.
#[test]
fn path_counts_near_the_top() {
    analyse(include_bytes!("../../../fuzz/seeds/tool_paths/regression-count-overflow"));
}
