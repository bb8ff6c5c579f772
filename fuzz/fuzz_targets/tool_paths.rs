//! The stream of kansoku's Valgrind tool through the whole path analysis, as `kansoku paths`
//! reads it: superblock entries, and in paths mode the trie of counted paths, replayed
//! (node ids, parents, counts, open paths, snapshots all from the input), then the report.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let mut a = kansoku_paths::PathAnalysis::new(&kansoku_paths::AnalysisOptions { scope: kansoku_paths::Scope::All, ..Default::default() });
    let cut = data.first().map_or(0, |&b| b as usize).min(data.len());
    a.feed_tool_stream(&data[..cut]);
    a.feed_tool_stream(&data[cut..]);
    let _ = a.finish();
    let _ = a.report(Some(20), None);
});
