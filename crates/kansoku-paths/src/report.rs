//! The path table as data: symbolised paths, Ball–Larus ids, per-function coverage.
//! Field names are the documented JSON of `kansoku paths --json`.

use std::collections::{BTreeSet, HashMap};

use serde::Serialize;

use crate::analysis::{InputStats, PathAnalysis};
use crate::ballarus::BallLarus;
use crate::code::{BlockId, Scope};
use crate::profile::{BackEdgeMode, CallMode};

/// One block of a path, symbolised.
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
pub struct BlockRef {
    /// Function name, or `module+0xoffset` / `0xaddress` outside known functions.
    pub function: String,
    /// Basic-block number in the function's CFG (`kansoku inspect --function`).
    pub block: Option<u32>,
    /// Instructions into the block when it was entered in its middle.
    pub offset: u32,
    /// Link-time address (as in the file), hex.
    pub address: String,
    /// `file:line` when the program has DWARF.
    pub line: Option<String>,
    /// The same position with the file as DWARF names it (the exports need the whole path;
    /// not in the JSON, whose `line` stays short).
    #[serde(skip)]
    pub source: Option<kansoku_binary::SourceLine>,
    /// `address` as a number (not in the JSON).
    #[serde(skip)]
    pub link_address: u64,
}

impl BlockRef {
    fn short(&self) -> String {
        match self.block {
            Some(b) if self.offset == 0 => format!("BB{b}"),
            Some(b) => format!("BB{b}+{}", self.offset),
            None => self.address.clone(),
        }
    }
}

/// One distinct path.
#[derive(Clone, Debug, Serialize)]
pub struct PathRow {
    /// Position among the listed paths, 1 for the most frequent.
    pub rank: usize,
    /// How many times the path ran.
    pub count: u64,
    /// `function: BB0 BB1 BB3`, functions separated by ` | `.
    pub text: String,
    /// The path's blocks, in execution order.
    pub blocks: Vec<BlockRef>,
    /// Instructions executed along the path once.
    pub instructions: u64,
    /// Share of all executed (in-scope) instructions that this path's executions account
    /// for: count × instructions over the sum of that product over every path, the figure
    /// callgrind's inclusive cost per line adds up to.
    pub share: f64,
    /// Share of all executed (in-scope) block entries (what `share` was before: a path of
    /// many short blocks weighs more here than its time).
    pub block_share: f64,
    /// The path enters a block twice: a loop whose back edge the `--back-edges loops`
    /// rule did not cut (an irreducible loop or one the CFG does not see), so it has no
    /// Ball–Larus id.
    pub repeats_block: bool,
    /// Ball–Larus id in its function's DAG, when the path lies in one function and follows its edges.
    pub ball_larus: Option<u64>,
}

/// Per-function coverage.
#[derive(Clone, Debug, Serialize)]
pub struct FunctionRow {
    /// Function name.
    pub function: String,
    /// Path of the module holding it.
    pub module: String,
    /// Basic blocks of its CFG.
    pub blocks: usize,
    /// Of those, blocks that ran at least once.
    pub blocks_executed: usize,
    /// Entries into its blocks, all blocks together.
    pub block_executions: u64,
    /// Instructions executed in the function's blocks (callgrind's `Ir` of the function).
    pub instructions: u64,
    /// Distinct observed paths lying in this function.
    pub paths_observed: usize,
    /// Ball–Larus paths of the function's acyclic CFG (null when over 2^64).
    pub possible_paths: Option<u64>,
    /// Distinct Ball–Larus ids among the observed paths.
    pub possible_paths_run: usize,
    /// Distinct paths starting in this function that the report leaves out ([`Keep::Heaviest`]).
    pub paths_left_out: usize,
}

/// Which distinct paths a report lists. The summary and the per-function rows count every
/// path either way; what is left out is counted in [`Summary`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Keep {
    /// Every distinct path (a path-heavy program has hundreds of thousands).
    All,
    /// The `n` most frequent.
    Top(usize),
    /// The `overall` most frequent, and the `per_function` most frequent of each function
    /// (the function a path starts in): the report of the paths that matter, its size
    /// bounded by the functions run, not by the paths.
    Heaviest {
        /// Paths listed from the top of the whole run.
        overall: usize,
        /// Paths listed from the top of each function.
        per_function: usize,
    },
}

/// Totals of the whole run, over every distinct path whether listed or not.
#[derive(Clone, Debug, Serialize)]
pub struct Summary {
    /// Distinct paths counted.
    pub distinct_paths: usize,
    /// Executions of all paths together.
    pub paths_executed: u64,
    /// Block entries kept in paths (in scope).
    pub blocks_executed: u64,
    /// All block entries seen, including those outside the scope.
    pub blocks_seen: u64,
    /// Instructions executed along the paths (in scope): the denominator of `share`.
    pub instructions_executed: u64,
    /// Distinct blocks of the main program that ran.
    pub distinct_blocks: usize,
    /// Functions of the main program with a block that ran (the rows of [`PathReport::functions`]).
    pub functions_covered: usize,
    /// Block ids held by the path table (its memory, in 4-byte units).
    pub stored_blocks: usize,
    /// Distinct paths listed in `paths`.
    pub paths_listed: usize,
    /// Distinct paths not listed (see [`Keep`]), their executions and the instructions
    /// those executions ran.
    pub paths_left_out: usize,
    /// Executions of the paths not listed.
    pub executions_left_out: u64,
    /// Instructions those executions ran.
    pub instructions_left_out: u64,
}

/// Everything `kansoku paths` reports.
#[derive(Clone, Debug, Serialize)]
pub struct PathReport {
    /// How paths were cut at calls.
    pub calls: CallMode,
    /// Which branches cut paths as back edges.
    pub back_edges: BackEdgeMode,
    /// Which blocks paths kept.
    pub scope: Scope,
    /// The main program's path, when known.
    pub program: Option<String>,
    /// Totals of the run.
    pub summary: Summary,
    /// Counters about the input.
    pub input: InputStats,
    /// The listed paths, most frequent first (see [`Keep`]).
    pub paths: Vec<PathRow>,
    /// Coverage of each function of the main program that ran.
    pub functions: Vec<FunctionRow>,
    /// What the reader should know about the figures (missing symbols, damaged input, a crash).
    pub warnings: Vec<String>,
}

impl PathRow {
    /// The path's source lines, the file named once per run of lines in it:
    /// `paths.c:15,17 util.c:3`.
    pub fn lines(&self) -> String {
        let mut out = String::new();
        let mut file: Option<&str> = None;
        for l in self.blocks.iter().filter_map(|b| b.line.as_deref()) {
            let (f, n) = l.rsplit_once(':').unwrap_or((l, ""));
            if file == Some(f) {
                out.push(',');
                out.push_str(n);
            } else {
                if !out.is_empty() {
                    out.push(' ');
                }
                out.push_str(l);
                file = Some(f);
            }
        }
        out
    }
}

impl PathReport {
    /// The paths as CSV, one row each: rank, count, share, instructions, Ball–Larus
    /// number, the path's text and its source lines (RFC 4180 quoting).
    pub fn write_csv(&self, mut w: impl std::io::Write) -> std::io::Result<()> {
        writeln!(w, "rank,count,share,instructions,ball_larus,path,lines")?;
        let quote = |s: &str| format!("\"{}\"", s.replace('"', "\"\""));
        for r in &self.paths {
            let ball_larus = r.ball_larus.map(|x| x.to_string()).unwrap_or_default();
            writeln!(w, "{},{},{:.6},{},{},{},{}", r.rank, r.count, r.share, r.instructions, ball_larus, quote(&r.text), quote(&r.lines()))?;
        }
        w.flush()
    }

    /// How the program ended, when that bears on the paths: killed by a signal (the paths
    /// up to there are reported) or a non-zero exit status.
    pub fn ending(&self) -> Option<String> {
        match (self.input.exit, self.input.signal) {
            (_, Some(sig)) => Some(format!(
                "the program was killed by {}{}; the paths up to there are reported",
                kansoku_core::text::signal_name(sig),
                self.input.fault_address.map(|a| format!(" at 0x{a:x}")).unwrap_or_default()
            )),
            (Some(kansoku_core::ExitStatus::Exited(c)), None) if c != 0 => Some(format!("the program exited with status {c}")),
            _ => None,
        }
    }
}

impl PathAnalysis {
    fn block_ref(&mut self, b: BlockId) -> BlockRef {
        let info = self.code.block(b).clone();
        let function = match info.function {
            Some(f) => self.code.functions()[f as usize].name.clone(),
            None => match info.module {
                Some(m) => format!("{}+0x{:x}", self.code.symbolizer.modules()[m].short_name(), info.link.unwrap_or(0)),
                None => format!("0x{:x}", info.addr),
            },
        };
        let source = self.code.symbolizer.source_line(info.addr);
        let line = source.as_ref().map(|l| l.to_string());
        BlockRef { function, block: info.cfg_block, offset: info.offset, address: format!("0x{:x}", info.link.unwrap_or(info.addr)), line, source, link_address: info.link.unwrap_or(info.addr) }
    }

    /// Instructions executed along a path once.
    fn path_instructions(&self, path: &[BlockId]) -> u64 {
        path.iter().map(|&b| u64::from(self.code.block(b).instructions)).sum()
    }

    /// Text form of a path: `function: BB0 BB1 BB3`, functions separated by ` | `.
    pub(crate) fn path_text(blocks: &[BlockRef]) -> String {
        let mut out = String::new();
        let mut current: Option<&str> = None;
        for b in blocks {
            if current != Some(b.function.as_str()) {
                if current.is_some() {
                    out.push_str(" | ");
                }
                out.push_str(&b.function);
                out.push(':');
                current = Some(&b.function);
            }
            out.push(' ');
            out.push_str(&b.short());
        }
        out
    }

    /// The Ball–Larus numbering of a function (cached by the caller).
    fn ball_larus_of<'c>(&self, f: u32, cache: &'c mut HashMap<u32, BallLarus>) -> &'c BallLarus {
        cache.entry(f).or_insert_with(|| BallLarus::new(&self.code.functions()[f as usize].cfg, self.profiler.back_edges))
    }

    /// The function a path lies in, and its CFG block numbers, if it lies in one function
    /// and every block is a real block start.
    fn path_in_function(&self, path: &[BlockId]) -> Option<(u32, Vec<u32>)> {
        let first = self.code.block(*path.first()?).function?;
        let mut cfg_blocks = Vec::with_capacity(path.len());
        for &b in path {
            let info = self.code.block(b);
            if info.function != Some(first) || info.offset != 0 {
                return None;
            }
            cfg_blocks.push(info.cfg_block?);
        }
        Some((first, cfg_blocks))
    }

    /// The report: the `top` most frequent paths (all when `None`), optionally only those
    /// lying entirely in `function`.
    pub fn report(&mut self, top: Option<usize>, function: Option<&str>) -> PathReport {
        self.report_keeping(top.map_or(Keep::All, Keep::Top), function)
    }

    /// The report, listing the paths `keep` says (optionally only those lying entirely in
    /// `function`). Only listed paths are symbolised, so its memory and size grow with them.
    pub fn report_keeping(&mut self, keep: Keep, function: Option<&str>) -> PathReport {
        // Ties by the blocks' addresses: path ids follow the order paths were first met,
        // which differs between sources of the same run (the tool's trie is replayed in
        // its own order). Compared in place: a copy of every path would be the run's size.
        // The count and the first block's address are copied into the sort's elements, so
        // that most comparisons read no path (issue 43: the sort was a quarter of the
        // serial time after bzip2 -9 had ended, 161,267 paths); the order is the same,
        // distinct paths having distinct address sequences.
        let (paths, code) = (&self.profiler.paths, &self.code);
        let addrs = |id: u32| paths.path(id).iter().map(|&b| code.block(b).addr);
        let mut keyed: Vec<(u64, u64, u32)> =
            (0..paths.len() as u32).map(|id| (paths.count_of(id), paths.path(id).first().map_or(0, |&b| code.block(b).addr), id)).collect();
        keyed.sort_unstable_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)).then_with(|| addrs(a.2).cmp(addrs(b.2))));
        let order: Vec<u32> = keyed.into_iter().map(|(_, _, id)| id).collect();
        let mut bl_cache: HashMap<u32, BallLarus> = HashMap::new();
        // Per function: distinct observed paths and distinct BL ids.
        let mut per_function: HashMap<u32, (usize, BTreeSet<u128>)> = HashMap::new();
        let mut bl_ids: Vec<Option<u128>> = vec![None; order.len()];
        let mut total_instructions = 0u64;
        let mut repeating = 0usize;
        let mut repeats = RepeatCheck::default();
        let mut repeat_of = vec![false; order.len()];
        let mut instructions_of = vec![0u64; order.len()];
        for id in 0..self.profiler.paths.len() as u32 {
            let path = self.profiler.paths.path(id);
            let instructions = self.path_instructions(path);
            instructions_of[id as usize] = instructions;
            // saturating: counts come from outside too (a tool's trie, a recording)
            total_instructions = total_instructions.saturating_add(self.profiler.paths.count_of(id).saturating_mul(instructions));
            let r = repeats.repeats_block(path);
            repeat_of[id as usize] = r;
            repeating += usize::from(r);
            if let Some((f, cfg_blocks)) = self.path_in_function(path) {
                let bl = self.ball_larus_of(f, &mut bl_cache).path_id(&cfg_blocks);
                bl_ids[id as usize] = bl;
                let e = per_function.entry(f).or_default();
                e.0 += 1;
                if let Some(x) = bl {
                    e.1.insert(x);
                }
            }
        }
        let scope_blocks = self.profiler.blocks_in_scope.max(1) as f64;
        let scope_instructions = total_instructions.max(1) as f64;
        let mut rows = Vec::new();
        // Paths listed per function they start in, and those left out.
        let mut listed_in: HashMap<Option<u32>, usize> = HashMap::new();
        let mut left_out_in: HashMap<u32, usize> = HashMap::new();
        let (mut left_out, mut executions_left_out, mut instructions_left_out) = (0usize, 0u64, 0u64);
        // Position among the paths `function` lets through, most frequent first.
        let mut rank = 0;
        for &id in &order {
            let path = self.profiler.paths.path(id);
            if let Some(name) = function {
                let inside = path.iter().all(|&b| self.code.block(b).function.map(|f| self.code.functions()[f as usize].name == name).unwrap_or(false));
                if !inside {
                    continue;
                }
            }
            rank += 1;
            let count = self.profiler.paths.count_of(id);
            let instructions = instructions_of[id as usize];
            let home = path.first().and_then(|&b| self.code.block(b).function);
            let listed = listed_in.entry(home).or_insert(0);
            let kept = match keep {
                Keep::All => true,
                Keep::Top(t) => rows.len() < t,
                Keep::Heaviest { overall, per_function } => rank <= overall || *listed < per_function,
            };
            if !kept {
                if matches!(keep, Keep::Top(_)) {
                    break;
                }
                left_out += 1;
                executions_left_out = executions_left_out.saturating_add(count);
                instructions_left_out = instructions_left_out.saturating_add(count.saturating_mul(instructions));
                if let Some(f) = home {
                    *left_out_in.entry(f).or_insert(0) += 1;
                }
                continue;
            }
            *listed += 1;
            // copied: naming its blocks needs the analysis mutably (only listed paths)
            let path = path.to_vec();
            let blocks: Vec<BlockRef> = path.iter().map(|&b| self.block_ref(b)).collect();
            rows.push(PathRow {
                rank,
                count,
                text: Self::path_text(&blocks),
                blocks,
                instructions,
                share: count as f64 * instructions as f64 / scope_instructions,
                block_share: count as f64 * path.len() as f64 / scope_blocks,
                repeats_block: repeat_of[id as usize],
                ball_larus: bl_ids[id as usize].and_then(|x| u64::try_from(x).ok()),
            });
        }
        // Functions with executed in-scope blocks.
        let mut fstats: HashMap<u32, (BTreeSet<u32>, u64, u64)> = HashMap::new();
        for (b, info) in self.code.blocks().iter().enumerate() {
            let c = self.profiler.block_counts.get(b).copied().unwrap_or(0);
            if c == 0 || !info.in_program {
                continue;
            }
            if let (Some(f), Some(cb)) = (info.function, info.cfg_block) {
                let e = fstats.entry(f).or_default();
                e.0.insert(cb);
                e.1 = e.1.saturating_add(c);
                e.2 = e.2.saturating_add(c.saturating_mul(u64::from(info.instructions)));
            }
        }
        let mut functions: Vec<FunctionRow> = Vec::new();
        let mut fids: Vec<u32> = fstats.keys().copied().collect();
        // Ties by place in memory: function ids follow the order blocks were first met,
        // which differs between sources of the same run.
        let place = |f: u32| {
            let fi = &self.code.functions()[f as usize];
            (fi.module, fi.base)
        };
        fids.sort_by_key(|&f| (std::cmp::Reverse(fstats[&f].1), place(f)));
        for f in fids {
            let (blocks_set, execs, instructions) = &fstats[&f];
            let fi = &self.code.functions()[f as usize];
            let (observed, ids) = per_function.get(&f).cloned().unwrap_or_default();
            let possible = self.ball_larus_of(f, &mut bl_cache).num_paths.and_then(|n| u64::try_from(n).ok());
            let fi = fi.clone();
            functions.push(FunctionRow {
                function: fi.name.clone(),
                module: self.code.symbolizer.modules()[fi.module].short_name().to_string(),
                blocks: fi.cfg.blocks.len(),
                blocks_executed: blocks_set.len(),
                block_executions: *execs,
                instructions: *instructions,
                paths_observed: observed,
                possible_paths: possible,
                possible_paths_run: ids.len(),
                paths_left_out: left_out_in.get(&f).copied().unwrap_or(0),
            });
        }
        let distinct_blocks = self
            .code
            .blocks()
            .iter()
            .enumerate()
            .filter(|(b, info)| info.in_program && self.profiler.block_counts.get(*b).copied().unwrap_or(0) > 0)
            .count();
        let mut warnings = self.code.symbolizer.warnings.clone();
        if self.stats.garbled_lines > 0 {
            let ex: Vec<String> = self.stats.garbled_examples.iter().map(|(n, l)| format!("line {n}: {l:?}")).collect();
            warnings.push(format!(
                "{} line(s) of the Lackey output were not superblock entries and were skipped (the paths in progress were cut there): {}",
                self.stats.garbled_lines,
                ex.join("; ")
            ));
        }
        if self.stats.stream_damage > 0 {
            let ex: Vec<String> = self.stats.stream_damage_examples.iter().map(|(at, w)| format!("byte {at}: {w}")).collect();
            warnings.push(format!(
                "kansoku's Valgrind tool stream was damaged in {} place(s) (the paths in progress were cut there): {}",
                self.stats.stream_damage,
                ex.join("; ")
            ));
        }
        // Most of the run outside the program (a compressor whose work is in libz): the
        // paths shown are the small rest, and the user should know where the rest went.
        let (in_scope, seen) = (self.profiler.blocks_in_scope, self.profiler.blocks_seen);
        if matches!(self.code.scope, Scope::Program) && seen > 0 && in_scope.saturating_mul(2) < seen {
            warnings.push(format!(
                "only {in_scope} of the {seen} blocks executed ({:.1}%) are in the program itself; the rest ran in libraries or the loader: use --scope all to profile them",
                in_scope as f64 * 100.0 / seen as f64
            ));
        }
        if matches!(self.profiler.back_edges, BackEdgeMode::Loops) && repeating > 0 {
            warnings.push(format!(
                "{repeating} of {} distinct paths enter a block twice (a loop the dominator rule does not cut: irreducible, or through code the CFG does not see); they have no Ball–Larus id and are flagged repeats_block",
                self.profiler.paths.len()
            ));
        }
        if self.stats.unexpected_superblock_cuts > 1 {
            warnings.push(format!(
                "{} superblocks ended at an instruction that is not a branch, call or return (treated as continuations)",
                self.stats.unexpected_superblock_cuts
            ));
        }
        PathReport {
            calls: self.profiler.calls,
            back_edges: self.profiler.back_edges,
            scope: self.code.scope,
            program: self.code.program_path().map(str::to_string),
            summary: Summary {
                distinct_paths: self.profiler.paths.len(),
                paths_executed: self.profiler.paths.iter().map(|(_, c)| c).fold(0, u64::saturating_add),
                blocks_executed: self.profiler.blocks_in_scope,
                blocks_seen: self.profiler.blocks_seen,
                instructions_executed: total_instructions,
                distinct_blocks,
                functions_covered: functions.len(),
                stored_blocks: self.profiler.paths.stored_blocks(),
                paths_listed: rows.len(),
                paths_left_out: left_out,
                executions_left_out,
                instructions_left_out,
            },
            input: self.stats.clone(),
            paths: rows,
            functions,
            warnings,
        }
    }
}

/// Does a path enter some block twice? Each path's blocks are marked with a stamp of its
/// own in an array by block id: bzip2's 161,267 paths are 57 blocks long on average, and
/// a hash set per path, then a sorted copy, were a fifth, then a tenth of the serial time
/// after the program had ended (issue 43).
#[derive(Default)]
struct RepeatCheck {
    /// By block id: the stamp of the last path that entered it.
    seen: Vec<u32>,
    stamp: u32,
}

impl RepeatCheck {
    fn repeats_block(&mut self, path: &[BlockId]) -> bool {
        if self.stamp == u32::MAX {
            self.seen.iter_mut().for_each(|s| *s = 0);
            self.stamp = 0;
        }
        self.stamp += 1;
        for &b in path {
            if self.seen.len() <= b as usize {
                self.seen.resize(b as usize + 1, 0);
            }
            let s = &mut self.seen[b as usize];
            if *s == self.stamp {
                return true;
            }
            *s = self.stamp;
        }
        false
    }
}
