//! Cache configuration (the seed's cache information: associativity A, line size B,
//! number of sets S) and data layout (the seed's data information: per array its start
//! address, element size and length).
//!
//! **Powers of two.** Associativity and number of sets may be any positive integer (some
//! real last-level caches have non-power-of-two set counts); the line size must be a
//! power of two, as on every real machine, because a line is an aligned block of bytes.
//! The simulator uses shifts and masks when both are powers of two and divisions
//! otherwise.

use crate::error::{CacheError, Result};
use crate::kernel::Kernel;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// An A-way set-associative LRU cache with S sets of B-byte lines.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CacheConfig {
    /// Associativity A: lines per set (1: direct mapped; at most 64).
    pub assoc: u32,
    /// Line size B, in bytes (a power of two).
    pub line: u32,
    /// Number of sets S (any positive integer).
    pub sets: u32,
}

impl CacheConfig {
    /// Capacity in bytes, A·B·S.
    pub fn size_bytes(&self) -> u64 {
        self.assoc as u64 * self.line as u64 * self.sets as u64
    }

    /// Parses `assoc=2,line=32,sets=4` (any order; `size=` may replace one of them) or
    /// `32KiB,8-way,64B` (size, ways — `direct` or `1-way` for direct mapped —, line).
    pub fn parse(spec: &str) -> Result<CacheConfig> {
        let bad = |msg: String| CacheError::CacheConfig { spec: spec.to_string(), msg };
        let (mut assoc, mut line, mut sets, mut size) = (None, None, None, None);
        for part in spec.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let lower = part.to_ascii_lowercase();
            if let Some((k, v)) = lower.split_once('=') {
                let val = parse_bytes(v.trim()).ok_or_else(|| bad(format!("'{part}': '{v}' is not a number")))?;
                match k.trim() {
                    "assoc" | "ways" | "a" => assoc = Some(val),
                    "line" | "block" | "b" => line = Some(val),
                    "sets" | "s" => sets = Some(val),
                    "size" => size = Some(val),
                    other => return Err(bad(format!("unknown key '{other}' (use assoc, line, sets, size)"))),
                }
            } else if lower == "direct" || lower == "direct-mapped" {
                assoc = Some(1);
            } else if let Some(w) = lower.strip_suffix("-way").or(lower.strip_suffix("way")) {
                assoc = Some(w.trim().parse().map_err(|_| bad(format!("'{part}' is not N-way")))?);
            } else if let Some(v) = lower.strip_suffix("kib").or(lower.strip_suffix("kb")).or(lower.strip_suffix('k')) {
                size = Some(v.trim().parse::<u64>().map_err(|_| bad(format!("bad size '{part}'")))? * 1024);
            } else if let Some(v) = lower.strip_suffix("mib").or(lower.strip_suffix("mb")).or(lower.strip_suffix('m')) {
                size = Some(v.trim().parse::<u64>().map_err(|_| bad(format!("bad size '{part}'")))? * 1024 * 1024);
            } else if let Some(v) = lower.strip_suffix('b') {
                line = Some(v.trim().parse().map_err(|_| bad(format!("bad line size '{part}'")))?);
            } else {
                return Err(bad(format!("cannot read '{part}' (examples: 'assoc=2,line=32,sets=4', '32KiB,8-way,64B')")));
            }
        }
        let assoc = assoc.ok_or_else(|| bad("associativity missing (assoc=N or N-way)".into()))?;
        let line = line.ok_or_else(|| bad("line size missing (line=N or NB)".into()))?;
        if !line.is_power_of_two() {
            return Err(bad(format!(
                "line size {line} is not a power of two (refused: lines are aligned power-of-two blocks; associativity and set count may be any positive integer)"
            )));
        }
        let sets = match (sets, size) {
            (Some(s), None) => s,
            (s, Some(sz)) => {
                let per_set = assoc * line;
                if per_set == 0 || sz % per_set != 0 {
                    return Err(bad(format!("size {sz} is not a multiple of ways x line = {per_set}")));
                }
                let derived = sz / per_set;
                if let Some(s) = s {
                    if s != derived {
                        return Err(bad(format!("sets={s} disagrees with size/(ways x line) = {derived}")));
                    }
                }
                derived
            }
            (None, None) => return Err(bad("number of sets missing (sets=N, or a total size like 32KiB)".into())),
        };
        let c = CacheConfig {
            assoc: u32::try_from(assoc).map_err(|_| bad("associativity too large".into()))?,
            line: u32::try_from(line).map_err(|_| bad("line size too large".into()))?,
            sets: u32::try_from(sets).map_err(|_| bad("too many sets".into()))?,
        };
        c.validate().map_err(|e| bad(e.to_string()))?;
        Ok(c)
    }

    /// Checks the configuration can be simulated (all at least 1, power-of-two line, at
    /// most 64 ways); the error says which rule is broken.
    pub fn validate(&self) -> std::result::Result<(), CacheConfigError> {
        if self.assoc == 0 || self.sets == 0 || self.line == 0 {
            return Err(CacheConfigError::Zero);
        }
        if !self.line.is_power_of_two() {
            return Err(CacheConfigError::LineNotPowerOfTwo { line: self.line });
        }
        if self.assoc > 64 {
            return Err(CacheConfigError::TooManyWays { assoc: self.assoc });
        }
        Ok(())
    }
}

/// Which rule of a simulable cache a [`CacheConfig`] breaks ([`CacheConfig::validate`]):
/// typed so a caller can tell them apart, worded for the user.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CacheConfigError {
    /// Associativity, line size or set count is zero.
    #[error("associativity, line size and sets must all be at least 1")]
    Zero,
    /// The line size is not a power of two (lines are aligned blocks).
    #[error("line size {line} is not a power of two (refused: lines are aligned power-of-two blocks; associativity and set count may be any positive integer)")]
    LineNotPowerOfTwo {
        /// The line size given, in bytes.
        line: u32,
    },
    /// More ways than the simulator supports (64).
    #[error("associativity {assoc} is above the supported 64")]
    TooManyWays {
        /// The associativity given.
        assoc: u32,
    },
}

impl std::fmt::Display for CacheConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "assoc={},line={},sets={}", self.assoc, self.line, self.sets)
    }
}

fn parse_bytes(v: &str) -> Option<u64> {
    let v = v.trim().to_ascii_lowercase();
    for (suf, mul) in [("kib", 1024u64), ("kb", 1024), ("k", 1024), ("mib", 1 << 20), ("mb", 1 << 20), ("m", 1 << 20), ("b", 1)] {
        if let Some(n) = v.strip_suffix(suf) {
            return n.trim().parse::<u64>().ok().map(|x| x * mul);
        }
    }
    v.parse().ok()
}

/// Where arrays live in memory.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum LayoutSpec {
    /// Arrays one after the other in declaration order, from `start`, each start rounded
    /// up to a multiple of `align` bytes.
    Consecutive {
        /// Byte address of the first array.
        start: u64,
        /// Alignment of every array's start, in bytes.
        align: u64,
    },
    /// Explicit start addresses per array (every array must be named).
    Bases(BTreeMap<String, u64>),
}

impl Default for LayoutSpec {
    fn default() -> Self {
        LayoutSpec::Consecutive { start: 0, align: 64 }
    }
}

/// PolyBench/C 4.2 allocates every array with `posix_memalign(&p, 4096, size)`
/// (utilities/polybench.c, `xmalloc`): each array starts on its own page.
pub(crate) const POLYBENCH_ALIGN: u64 = 4096;

impl LayoutSpec {
    /// The layout of a PolyBench program: arrays page-aligned, as `posix_memalign(…, 4096)`
    /// places them. Which pages they get is the allocator's; for a cache whose sets × line
    /// is at most 4096 bytes (a 32 KiB 8-way L1 with 64-byte lines: exactly 4096) every
    /// page-aligned placement maps each element to the same set, so the misses are those of
    /// the real program; for larger ones (an L2) the pages' own addresses matter too, and
    /// these are one after the other from `start`.
    pub fn polybench() -> LayoutSpec {
        LayoutSpec::Consecutive { start: 0, align: POLYBENCH_ALIGN }
    }

    /// The layout when none is given: PolyBench's for PolyBench-style C input (`c_input`),
    /// otherwise arrays one after the other at 64-byte boundaries; `align` (`--align`)
    /// overrides the alignment of either.
    pub(crate) fn default_for(c_input: bool, start: u64, align: Option<u64>) -> LayoutSpec {
        let align = align.unwrap_or(if c_input { POLYBENCH_ALIGN } else { 64 });
        LayoutSpec::Consecutive { start, align }
    }

    /// One line for reports: where the arrays are.
    pub(crate) fn describe(&self) -> String {
        match self {
            LayoutSpec::Consecutive { start, align: POLYBENCH_ALIGN } => {
                format!("PolyBench's: each array page-aligned (posix_memalign(…, 4096)), one after the other from {start}")
            }
            LayoutSpec::Consecutive { start, align } => format!("arrays one after the other from {start}, each aligned to {align} bytes"),
            LayoutSpec::Bases(m) => format!("base addresses given: {}", m.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join(",")),
        }
    }

    /// Parses `A=0,B=800,C=1600`.
    pub fn parse_bases(spec: &str) -> Result<LayoutSpec> {
        let mut m = BTreeMap::new();
        for part in spec.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (k, v) = part.split_once('=').ok_or_else(|| CacheError::Layout(format!("'{part}' is not ARRAY=ADDRESS")))?;
            let v = v.trim();
            let addr = if let Some(h) = v.strip_prefix("0x") { u64::from_str_radix(h, 16).ok() } else { v.parse().ok() };
            let addr = addr.ok_or_else(|| CacheError::Layout(format!("'{v}' is not an address")))?;
            m.insert(k.trim().to_string(), addr);
        }
        Ok(LayoutSpec::Bases(m))
    }

    /// Checks that the spec names exactly the kernel's arrays.
    pub fn check(&self, k: &Kernel) -> Result<()> {
        match self {
            LayoutSpec::Consecutive { align, .. } => {
                if *align == 0 {
                    return Err(CacheError::Layout("alignment must be at least 1".into()));
                }
            }
            LayoutSpec::Bases(m) => {
                for a in &k.arrays {
                    if !m.contains_key(&a.name) {
                        return Err(CacheError::Layout(format!("no base address for array '{}' (give --base {}=ADDR)", a.name, a.name)));
                    }
                }
                for name in m.keys() {
                    if k.array_index(name).is_none() {
                        return Err(CacheError::Layout(format!("--base names '{name}', which is not an array of {}", k.file)));
                    }
                }
            }
        }
        Ok(())
    }
}

/// Parameter values, e.g. from `X=10,Y=10,Z=10`.
pub type ParamValues = BTreeMap<String, i64>;

/// Parses `X=10,Y=10`.
pub fn parse_params(spec: &str) -> Result<ParamValues> {
    let mut m = BTreeMap::new();
    for part in spec.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let (k, v) = part.split_once('=').ok_or_else(|| CacheError::Params(format!("'{part}' is not NAME=VALUE")))?;
        let v: i64 = v.trim().parse().map_err(|_| CacheError::Params(format!("'{part}': '{}' is not an integer", v.trim())))?;
        m.insert(k.trim().to_string(), v);
    }
    Ok(m)
}

/// Checks that `values` gives every parameter of the kernel and nothing else.
pub(crate) fn check_params(k: &Kernel, values: &ParamValues) -> Result<()> {
    for p in &k.params {
        if !values.contains_key(p) {
            return Err(CacheError::Params(format!("no value for parameter '{p}' of {} (give --param {p}=N)", k.file)));
        }
    }
    for name in values.keys() {
        if !k.params.contains(name) {
            return Err(CacheError::Params(format!("'{name}' is not a parameter of {} (its parameters: {})", k.file, k.params.join(", "))));
        }
    }
    Ok(())
}

/// The concrete data information at given parameter values: start address, element
/// size and element count per array (the seed's figure 3).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct DataInfo {
    /// The array's name in the kernel.
    pub name: String,
    /// Byte address of its first element.
    pub start: u64,
    /// Size of one element, in bytes.
    pub elem_size: u64,
    /// Number of elements (the product of its extents at these parameter values).
    pub elems: u64,
}

/// Arrays must end below this byte address (see [`resolve_layout`]).
pub(crate) const ADDRESS_LIMIT: u64 = 1 << 62;

/// Resolves the layout at given parameter values.
pub(crate) fn resolve_layout(k: &Kernel, layout: &LayoutSpec, params: &ParamValues) -> Result<Vec<DataInfo>> {
    layout.check(k)?;
    let mut out = Vec::new();
    let mut next = match layout {
        LayoutSpec::Consecutive { start, .. } => *start,
        _ => 0,
    };
    for a in &k.arrays {
        let mut elems: i64 = 1;
        for d in &a.dims {
            let v = d.eval(&|n| params.get(n).copied()).ok_or_else(|| CacheError::Params(format!("size of '{}' needs parameters {:?}", a.name, d.vars().collect::<Vec<_>>())))?;
            if v < 0 {
                return Err(CacheError::Params(format!("array '{}' gets a negative size {d} = {v}", a.name)));
            }
            elems = elems.saturating_mul(v);
        }
        let bytes = (elems as u64).checked_mul(a.elem_size);
        let (start, end) = match layout {
            LayoutSpec::Consecutive { align, .. } => {
                let s = next.div_ceil(*align).checked_mul(*align);
                let end = s.zip(bytes).and_then(|(s, b)| s.checked_add(b));
                next = end.unwrap_or(u64::MAX);
                (s, end)
            }
            LayoutSpec::Bases(m) => (Some(m[&a.name]), bytes.and_then(|b| m[&a.name].checked_add(b))),
        };
        // Addresses are simulated as signed 64-bit byte numbers with room for subscripts
        // around them: an array must lie below 2^62.
        let (start, _) = match (start, end) {
            (Some(s), Some(e)) if e <= ADDRESS_LIMIT => (s, e),
            _ => {
                return Err(CacheError::Layout(format!(
                    "array '{}' would extend beyond byte address 2^62 (start and alignment must keep every array below 0x4000000000000000)",
                    a.name
                )))
            }
        };
        out.push(DataInfo { name: a.name.clone(), start, elem_size: a.elem_size, elems: elems as u64 });
    }
    Ok(out)
}
