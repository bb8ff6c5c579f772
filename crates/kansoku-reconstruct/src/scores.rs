//! Similarity and likelihood score tables (the seed's figures 9, 10, 17 and 18).
//!
//! A table scores one pair of instruction informations:
//!
//! * different functions: `function_mismatch`;
//! * same function, `--by function`: `function_match + offset[d]`, d = offset difference;
//! * same function, `--by block`: `function_match`, plus `block_match + block_offset[d]`
//!   when the blocks are equal (d = difference of offsets in the block), else
//!   `block_diff[d]` (d = difference of block numbers).
//!
//! Similarity compares sequence `x[k]` with `y[k]`; its table is looked up with |d| (the
//! seed: "the absolute difference closest to 1 scores highest"). Likelihood compares a
//! pattern's consecutive instructions, `d = later − earlier`, signed (the seed: "positive
//! and closest to 1 scores highest"). Time-weighted recordings use tables peaking at 0.
//!
//! Files (`--scores FILE`, TOML or JSON) override any subset of the defaults:
//!
//! ```toml
//! [similarity]
//! function_match = 10
//! function_mismatch = 0
//! offset = { "0" = 5, "1" = 10, "2" = 6 }   # keys: differences; others score offset_default
//! offset_default = 0
//! [likelihood]
//! offset = { "1" = 10, "2" = 6, "-1" = 0 }
//! ```

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::error::ReconstructError;
use crate::flow::ControlFlow;
use crate::info::{Granularity, Info, Weighting};

const DENSE: i32 = 64;

/// Scores by difference: a dense array for −64..=64 and a default outside it and for
/// differences the table does not name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DiffScores {
    dense: Vec<i64>,
    named: BTreeMap<i32, i64>,
    default: i64,
}

impl DiffScores {
    /// A table of the `named` (difference, score) pairs, `default` for every other.
    pub fn new(named: &[(i32, i64)], default: i64) -> DiffScores {
        let named: BTreeMap<i32, i64> = named.iter().copied().collect();
        let dense = (-DENSE..=DENSE).map(|d| named.get(&d).copied().unwrap_or(default)).collect();
        DiffScores { dense, named, default }
    }

    /// Same scores for d and −d.
    pub(crate) fn symmetric(named: &[(i32, i64)], default: i64) -> DiffScores {
        let mut all: Vec<(i32, i64)> = named.to_vec();
        all.extend(named.iter().map(|&(d, s)| (-d, s)));
        DiffScores::new(&all, default)
    }

    /// The score of difference `d`.
    #[inline(always)]
    pub fn get(&self, d: i32) -> i64 {
        if (-DENSE..=DENSE).contains(&d) {
            self.dense[(d + DENSE) as usize]
        } else {
            self.named.get(&d).copied().unwrap_or(self.default)
        }
    }

    /// The differences the table names, with their scores.
    pub fn named(&self) -> &BTreeMap<i32, i64> {
        &self.named
    }

    /// The score of every difference not named.
    pub(crate) fn default_score(&self) -> i64 {
        self.default
    }
}

/// One score table (similarity or likelihood).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScoreTable {
    /// Added when the two instructions are in the same function.
    pub function_match: i64,
    /// The score when they are in different functions (nothing else is compared).
    pub function_mismatch: i64,
    /// `--by function`: by offset difference.
    pub offset: DiffScores,
    /// `--by block`: added when the block numbers are equal.
    pub block_match: i64,
    /// `--by block`: by block-number difference when the blocks differ.
    pub block_diff: DiffScores,
    /// `--by block`: by in-block offset difference when the blocks are equal.
    pub block_offset: DiffScores,
}

impl ScoreTable {
    /// The score of `b` after `a` (likelihood) or of `a` beside `b` (similarity,
    /// `absolute`: the shorter direction) from this table, by `flow`'s control-flow distance in
    /// place of the offset difference; `None` when the flow does not know the
    /// instructions (the caller then uses the seed's table).
    #[inline]
    pub(crate) fn flow_score(&self, flow: &ControlFlow, a: u64, b: u64, absolute: bool) -> Option<i64> {
        if !flow.knows(a) || (absolute && !flow.knows(b)) {
            return None;
        }
        let forward = flow.distance(a, b);
        let d = if absolute { forward.into_iter().chain(flow.distance(b, a)).min() } else { forward };
        // The same instruction again (not a self-loop like `rep movs`) is difference 0.
        let d = d.map(i32::from).or((a == b).then_some(0));
        Some(match d {
            Some(d) => self.function_match + self.offset.get(d),
            None => self.function_mismatch,
        })
    }
}

/// Both tables, the instruction information they compare, and the weighting.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Scores {
    /// What instructions are compared by (offsets, or blocks).
    pub by: Granularity,
    /// The recording's sampling, which chose the default tables.
    pub weighting: Weighting,
    /// How alike two instructions at the same index of two sequences are.
    pub similarity: ScoreTable,
    /// How likely one instruction directly follows another.
    pub likelihood: ScoreTable,
    /// `--likelihood cfg`: control-flow distances replace offset differences for the
    /// instructions the flow knows (both tables). `None`: the seed's scores.
    pub flow: Option<Arc<ControlFlow>>,
}

impl Scores {
    /// The defaults, following the seed: function match 10 / mismatch 0 (5 / 0 by block),
    /// similarity highest at |d| = 1 and likelihood at d = +1 for instruction-count
    /// sampling; both highest at d = 0 for time sampling.
    pub fn defaults(by: Granularity, weighting: Weighting) -> Scores {
        let (fm, bm) = match by {
            Granularity::Function => (10, 5),
            Granularity::Block => (5, 5),
        };
        let block_diff = DiffScores::symmetric(&[(1, 3), (2, 2), (3, 1)], 0);
        let (sim_offset, like_offset) = match weighting {
            Weighting::Count => (
                DiffScores::symmetric(&[(0, 5), (1, 10), (2, 6), (3, 3), (4, 1)], 0),
                DiffScores::new(&[(1, 10), (2, 6), (3, 4), (4, 2), (5, 1), (6, 1), (7, 1), (8, 1)], 0),
            ),
            Weighting::Time => (
                DiffScores::symmetric(&[(0, 10), (1, 8), (2, 5), (3, 3), (4, 1)], 0),
                DiffScores::new(&[(0, 10), (1, 8), (2, 5), (3, 3), (4, 1)], 0),
            ),
        };
        let table = |offset: DiffScores| ScoreTable {
            function_match: fm,
            function_mismatch: 0,
            offset: offset.clone(),
            block_match: bm,
            block_diff: block_diff.clone(),
            block_offset: offset,
        };
        Scores { by, weighting, similarity: table(sim_offset), likelihood: table(like_offset), flow: None }
    }

    /// Defaults overridden by a TOML (`.toml`) or JSON file.
    pub fn from_file(path: &Path, by: Granularity, weighting: Weighting) -> Result<Scores, ReconstructError> {
        let text = kansoku_core::input::read_text(path, kansoku_core::input::MAX_TEXT_BYTES)
            .map_err(|e| ReconstructError::Scores { path: path.to_path_buf(), what: e.to_string() })?;
        let json = path.extension().is_some_and(|e| e == "json");
        Self::parse(&text, json, by, weighting).map_err(|e| ReconstructError::Scores { path: path.to_path_buf(), what: e.to_string() })
    }

    /// Defaults overridden by the text of a score file (JSON when `json`, else TOML); the
    /// error says what is wrong and where.
    pub fn parse(text: &str, json: bool, by: Granularity, weighting: Weighting) -> Result<Scores, ScoresFileError> {
        let file: ScoresFile = if json {
            serde_json::from_str(text).map_err(|e| ScoresFileError::Syntax(e.to_string()))?
        } else {
            toml::from_str(text).map_err(|e| ScoresFileError::Syntax(e.to_string()))?
        };
        let mut scores = Scores::defaults(by, weighting);
        if let Some(t) = file.similarity {
            t.apply(&mut scores.similarity)?;
        }
        if let Some(t) = file.likelihood {
            t.apply(&mut scores.likelihood)?;
        }
        Ok(scores)
    }

    /// The same tables, scoring by control-flow distance where `flow` knows the
    /// instructions (see [`crate::flow`]).
    pub fn with_flow(mut self, flow: ControlFlow) -> Scores {
        self.flow = Some(Arc::new(flow));
        self
    }

    /// Whether control-flow distances are in use (`--likelihood cfg`).
    pub(crate) fn has_flow(&self) -> bool {
        self.flow.is_some()
    }

    /// Similarity of two instructions at the same index of two sequences (|d|).
    #[inline(always)]
    pub fn similarity(&self, a: &Info, b: &Info) -> i64 {
        if let Some(s) = self.flow.as_ref().and_then(|f| self.similarity.flow_score(f, a.addr, b.addr, true)) {
            return s;
        }
        score(&self.similarity, self.by, a, b, true)
    }

    /// Likelihood that `b` directly follows `a` (d = b − a).
    #[inline(always)]
    pub fn likelihood(&self, a: &Info, b: &Info) -> i64 {
        if let Some(s) = self.flow.as_ref().and_then(|f| self.likelihood.flow_score(f, a.addr, b.addr, false)) {
            return s;
        }
        score(&self.likelihood, self.by, a, b, false)
    }

    /// The tables as documented JSON (for `--json` and for writing a starting file).
    pub fn to_file(&self) -> ScoresFile {
        ScoresFile { similarity: Some(TableFile::from(&self.similarity)), likelihood: Some(TableFile::from(&self.likelihood)) }
    }
}

/// Offset differences a [`Packed`] table holds; larger ones share its last entry.
const PACKED_RANGE: i32 = 64;

/// The default instruction information (function, offset) with the seed's tables, in
/// the form the hot loops use: each instruction packed into one `u64`
/// (`function << 32 | offset`, see [`pack`]) and a flat table by offset difference —
/// a third of the memory traffic of [`Info`] and no branch on the granularity. It gives
/// exactly [`Scores::similarity`] resp. [`Scores::likelihood`].
#[derive(Clone, Debug)]
pub struct Packed {
    /// Index d + 64 (d = −64..=64): function_match + the offset score (similarity: of
    /// |d|); [`BEYOND`]: the score beyond ±64; [`MISMATCH`]: function_mismatch. A fixed
    /// array, so the hot loop has no bounds check and no branch.
    table: [i64; PACKED_LEN],
}

const BEYOND: usize = 2 * PACKED_RANGE as usize + 1;
const MISMATCH: usize = BEYOND + 1;
const PACKED_LEN: usize = MISMATCH + 1;

/// One instruction in [`Packed`] form.
#[inline]
pub fn pack(i: &Info) -> u64 {
    (i.function as u64) << 32 | i.offset as u32 as u64
}

impl Packed {
    /// Score of `b` after (or beside, for similarity) `a`.
    #[inline(always)]
    pub fn score(&self, a: u64, b: u64) -> i64 {
        let d = (b as u32 as i32).wrapping_sub(a as u32 as i32);
        // d + 64 wraps to a huge index when d < −64: both sides clamp to BEYOND.
        let at = (d.wrapping_add(PACKED_RANGE) as u32 as usize).min(BEYOND);
        let at = if (a ^ b) >> 32 != 0 { MISMATCH } else { at };
        self.table[at]
    }

    /// Σ_k score(x[k], y[k]).
    #[inline]
    pub fn sum(&self, x: &[u64], y: &[u64]) -> i64 {
        x.iter().zip(y).map(|(&a, &b)| self.score(a, b)).sum()
    }
}

impl Scores {
    /// The packed form of the similarity (`similarity` true) or likelihood table, when
    /// these scores have one: `--by function`, no control flow, no named difference
    /// beyond ±64.
    pub fn packed(&self, similarity: bool) -> Option<Packed> {
        let t = if similarity { &self.similarity } else { &self.likelihood };
        let fits = t.offset.named().keys().all(|d| d.abs() <= PACKED_RANGE);
        if self.by != Granularity::Function || self.flow.is_some() || !fits {
            return None;
        }
        let mut table = [0i64; PACKED_LEN];
        for d in -PACKED_RANGE..=PACKED_RANGE {
            table[(d + PACKED_RANGE) as usize] = t.function_match + t.offset.get(if similarity { d.abs() } else { d });
        }
        table[BEYOND] = t.function_match + t.offset.default_score();
        table[MISMATCH] = t.function_mismatch;
        Some(Packed { table })
    }
}

#[inline(always)]
fn score(t: &ScoreTable, by: Granularity, a: &Info, b: &Info, absolute: bool) -> i64 {
    if a.function != b.function {
        return t.function_mismatch;
    }
    if by == Granularity::Function {
        let d = b.offset - a.offset;
        return t.function_match + t.offset.get(if absolute { d.abs() } else { d });
    }
    let d = |x: i32, y: i32| if absolute { (y - x).abs() } else { y - x };
    match by {
        Granularity::Block if a.block >= 0 && b.block >= 0 => {
            if a.block == b.block {
                t.function_match + t.block_match + t.block_offset.get(d(a.block_offset, b.block_offset))
            } else {
                t.function_match + t.block_diff.get(d(a.block, b.block))
            }
        }
        _ => t.function_match + t.offset.get(d(a.offset, b.offset)),
    }
}

/// The file form of both tables; every field optional.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScoresFile {
    /// Overrides of the similarity table.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub similarity: Option<TableFile>,
    /// Overrides of the likelihood table.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub likelihood: Option<TableFile>,
}

/// The file form of one [`ScoreTable`]: a field left out keeps the default's value; a
/// difference table's keys are the differences as text (`"-3"`).
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TableFile {
    /// [`ScoreTable::function_match`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub function_match: Option<i64>,
    /// [`ScoreTable::function_mismatch`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub function_mismatch: Option<i64>,
    /// [`ScoreTable::offset`]'s named differences (replacing all of them).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub offset: Option<BTreeMap<String, i64>>,
    /// [`ScoreTable::offset`]'s default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub offset_default: Option<i64>,
    /// [`ScoreTable::block_match`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub block_match: Option<i64>,
    /// [`ScoreTable::block_diff`]'s named differences.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub block_diff: Option<BTreeMap<String, i64>>,
    /// [`ScoreTable::block_diff`]'s default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub block_diff_default: Option<i64>,
    /// [`ScoreTable::block_offset`]'s named differences.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub block_offset: Option<BTreeMap<String, i64>>,
    /// [`ScoreTable::block_offset`]'s default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub block_offset_default: Option<i64>,
}

/// What is wrong with a score file's text ([`Scores::parse`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ScoresFileError {
    /// The JSON or TOML does not parse into the file's fields (the parser's message, with
    /// line and column).
    #[error("{0}")]
    Syntax(String),
    /// A key of a difference table (`offset`, `block_diff`, `block_offset`) is not an integer.
    #[error("{field}: key '{key}' is not an integer difference")]
    Key {
        /// The table.
        field: &'static str,
        /// The key as written.
        key: String,
    },
    /// A score beyond ±[`MAX_SCORE`].
    #[error("score {name} = {value} is outside -{MAX_SCORE}..={MAX_SCORE}")]
    Range {
        /// The score (`function_match`, `offset.3`, `block_diff_default`).
        name: String,
        /// Its value.
        value: i64,
    },
}

fn parse_diffs(map: &Option<BTreeMap<String, i64>>, default: Option<i64>, old: &DiffScores, field: &'static str) -> Result<DiffScores, ScoresFileError> {
    let default = default.unwrap_or(old.default_score());
    let named: Vec<(i32, i64)> = match map {
        Some(m) => m
            .iter()
            .map(|(k, v)| {
                k.trim().parse::<i32>().map(|d| (d, *v)).map_err(|_| ScoresFileError::Key { field, key: k.clone() })
            })
            .collect::<Result<_, _>>()?,
        None => old.named().iter().map(|(k, v)| (*k, *v)).collect(),
    };
    Ok(DiffScores::new(&named, default))
}

impl TableFile {
    fn apply(&self, t: &mut ScoreTable) -> Result<(), ScoresFileError> {
        if let Some(v) = self.function_match {
            t.function_match = v;
        }
        if let Some(v) = self.function_mismatch {
            t.function_mismatch = v;
        }
        if let Some(v) = self.block_match {
            t.block_match = v;
        }
        t.offset = parse_diffs(&self.offset, self.offset_default, &t.offset, "offset")?;
        t.block_diff = parse_diffs(&self.block_diff, self.block_diff_default, &t.block_diff, "block_diff")?;
        t.block_offset = parse_diffs(&self.block_offset, self.block_offset_default, &t.block_offset, "block_offset")?;
        t.check_range()
    }
}

/// The largest score magnitude a table may hold. A likelihood sums one score per adjacent
/// pair of instructions, and the solvers add such sums again: with scores up to 2^30 a
/// sum over a billion pairs still fits in 64 bits, so no solver needs overflow checks.
pub const MAX_SCORE: i64 = 1 << 30;

impl ScoreTable {
    fn check_range(&self) -> Result<(), ScoresFileError> {
        let named = [("function_match", self.function_match), ("function_mismatch", self.function_mismatch), ("block_match", self.block_match)];
        let diffs = [("offset", &self.offset), ("block_diff", &self.block_diff), ("block_offset", &self.block_offset)];
        let all = named.into_iter().map(|(n, v)| (n.to_string(), v)).chain(diffs.into_iter().flat_map(|(n, d)| {
            d.named().iter().map(move |(k, v)| (format!("{n}.{k}"), *v)).chain(std::iter::once((format!("{n}_default"), d.default_score())))
        }));
        for (name, v) in all {
            if v.unsigned_abs() > MAX_SCORE as u64 {
                return Err(ScoresFileError::Range { name, value: v });
            }
        }
        Ok(())
    }
}

impl From<&ScoreTable> for TableFile {
    fn from(t: &ScoreTable) -> TableFile {
        let m = |d: &DiffScores| Some(d.named().iter().map(|(k, v)| (k.to_string(), *v)).collect());
        TableFile {
            function_match: Some(t.function_match),
            function_mismatch: Some(t.function_mismatch),
            offset: m(&t.offset),
            offset_default: Some(t.offset.default_score()),
            block_match: Some(t.block_match),
            block_diff: m(&t.block_diff),
            block_diff_default: Some(t.block_diff.default_score()),
            block_offset: m(&t.block_offset),
            block_offset_default: Some(t.block_offset.default_score()),
        }
    }
}
