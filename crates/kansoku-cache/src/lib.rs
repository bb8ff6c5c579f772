//! # kansoku-cache — seed 004: cache-miss formulas for affine loop nests
//!
//! A kernel is written in a small C subset ([`parse_kernel`]): parameters, arrays with
//! element types and affine sizes, loop nests with affine bounds and statements with
//! affine subscripts. With a data layout ([`LayoutSpec`]) and a cache ([`CacheConfig`]):
//!
//! * [`kernel_info`] gives the seed's tables (program, data, position, cache, loop and
//!   array information; references numbered `P0`, `P1`, ... in execution order);
//! * [`Program::simulate`] is the exact oracle: an A-way set-associative LRU simulation
//!   of every access, counting per reference accesses, hits, compulsory and other misses;
//! * [`sets::build_set_model`] is the seed's set-based method (isl sets, parametric
//!   counting): per reference compulsory- and conflict-miss formulas as piecewise
//!   quasi-polynomials in all parameters, exact on their whole derivation domain;
//! * [`model::build_model`] derives, per reference, piecewise quasi-polynomial formulas
//!   in a size variable `n` (each parameter equal to `a·n + b` or fixed) for accesses,
//!   compulsory misses and conflict (other) misses — and, on request, per hit source and
//!   per conflict-miss factor — exact against the simulator on their verified range;
//!   [`model::KernelFormulas::eval`] evaluates them in about a microsecond. See
//!   `docs/rooms/seed004-cache.md` for the method and its domain of validity.
//!
//! ```
//! use kansoku_cache::{model::*, *};
//! let k = parse_kernel("seed.k", seed_example::KERNEL).unwrap();
//! let layout = LayoutSpec::parse_bases(seed_example::BASES).unwrap();
//! let cache = CacheConfig::parse(seed_example::CACHE).unwrap();
//! let f = build_model(&k, &ModelOptions::new(Family::all_varying(&k), layout, vec![cache])).unwrap().pop().unwrap();
//! let at10 = f.eval(&parse_params("X=10,Y=10,Z=10").unwrap()).unwrap();
//! let a_k = &at10.refs[k.find_ref(seed_example::REFERENCE).unwrap()];
//! assert_eq!((a_k.compulsory, a_k.conflict), (0, 1));
//! ```

#![deny(missing_docs)]

pub mod affine;
pub mod answer;
pub mod check;
pub mod config;
pub mod error;
pub mod info;
pub mod kernel;
pub mod model;
pub mod parse;
pub mod polybench;
pub mod report;
pub mod sets;
pub mod sim;

pub use config::{parse_params, CacheConfig, LayoutSpec, ParamValues};
pub use error::{BudgetStop, CacheError, Result};
pub use info::kernel_info;
pub use kansoku_isl::INTEGERS as ISL_INTEGERS;
pub use kernel::Kernel;
pub use parse::parse_kernel;
pub use polybench::{parse_c_kernel, parse_c_warmup, CInput, Lowered};
pub use sim::{simulate, HierarchySim, Inclusion, Program, RefStats, Start, Work};

/// Reads and parses a kernel file.
pub fn load_kernel(path: &std::path::Path) -> Result<Kernel> {
    use kansoku_core::input::{read_text, TextError, MAX_TEXT_BYTES};
    let file = path.display().to_string();
    let src = read_text(path, MAX_TEXT_BYTES).map_err(|e| match e {
        TextError::Utf8 { line, col, .. } => CacheError::Kernel { file: file.clone(), line, col, msg: "invalid UTF-8 (kernels are C text)".into() },
        TextError::Io(e) => CacheError::Kernel { file: file.clone(), line: 0, col: 0, msg: format!("cannot read: {e}") },
    })?;
    parse_kernel(&path.display().to_string(), &src)
}

/// Reads a PolyBench-style C file ([`polybench`]); the header it includes with `"..."` is
/// read from beside it when it exists (PolyBench keeps the dataset presets there).
pub fn load_c_kernel(path: &std::path::Path, input: &CInput) -> Result<Lowered> {
    let (src, input) = read_c(path, input)?;
    parse_c_kernel(&path.display().to_string(), &src, &input)
}

/// Reads `function` (`init_array`) of a PolyBench-style C file, with the header it includes
/// beside it, as the code that runs before the kernel ([`parse_c_warmup`]).
pub fn load_c_warmup(path: &std::path::Path, input: &CInput, function: &str) -> Result<Kernel> {
    let (src, input) = read_c(path, input)?;
    parse_c_warmup(&path.display().to_string(), &src, &input, function)
}

/// A C file's text, and `input` with the header it includes beside it (when none is given).
fn read_c(path: &std::path::Path, input: &CInput) -> Result<(String, CInput)> {
    let read = |p: &std::path::Path| -> Result<String> {
        use kansoku_core::input::{read_text, TextError, MAX_TEXT_BYTES};
        let file = p.display().to_string();
        read_text(p, MAX_TEXT_BYTES).map_err(|e| match e {
            TextError::Utf8 { line, col, .. } => CacheError::Kernel { file: file.clone(), line, col, msg: "invalid UTF-8 (C files are text)".into() },
            TextError::Io(e) => CacheError::Kernel { file: file.clone(), line: 0, col: 0, msg: format!("cannot read: {e}") },
        })
    };
    let src = read(path)?;
    let mut input = input.clone();
    if input.header.is_none() {
        let dir = path.parent().unwrap_or(std::path::Path::new("."));
        let found = polybench::local_includes(&src).into_iter().map(|h| dir.join(h)).find(|h| h.is_file());
        input.header = found.map(|h| read(&h).map(|text| (h.display().to_string(), text))).transpose()?;
    }
    Ok((src, input))
}

/// The kernels bundled with the crate (`kernels/*.k`): name and source.
pub const BUNDLED_KERNELS: &[(&str, &str)] = &[
    ("seed", include_str!("../kernels/seed.k")),
    ("gemm", include_str!("../kernels/gemm.k")),
    ("atax", include_str!("../kernels/atax.k")),
    ("mvt", include_str!("../kernels/mvt.k")),
    ("bicg", include_str!("../kernels/bicg.k")),
    ("jacobi1d", include_str!("../kernels/jacobi1d.k")),
    ("jacobi2d", include_str!("../kernels/jacobi2d.k")),
    ("seidel2d", include_str!("../kernels/seidel2d.k")),
    ("trisolv", include_str!("../kernels/trisolv.k")),
    ("gemm_rect", include_str!("../kernels/gemm_rect.k")),
];

/// The seed's worked example: kernel source, layout (`A=0,B=800,C=1600`), cache
/// (`assoc=2,line=32,sets=4`) and the reference studied (`S3:right:1`, i.e. `A[k]`).
pub mod seed_example {
    /// The seed's kernel source (the `kernels/seed.k` text).
    pub const KERNEL: &str = include_str!("../kernels/seed.k");
    /// Base addresses of its arrays, in bytes, in `--base` syntax.
    pub const BASES: &str = "A=0,B=800,C=1600";
    /// The cache studied, in `--cache` syntax: 2-way, 32-byte lines, 4 sets (256 bytes).
    pub const CACHE: &str = "assoc=2,line=32,sets=4";
    /// The reference studied, in `--ref` syntax: statement S3's first right-hand reference, `A[k]`.
    pub const REFERENCE: &str = "S3:right:1";
}
