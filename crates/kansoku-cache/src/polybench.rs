//! PolyBench-style C as kernel input (issue 17): the region between `#pragma scop` and
//! `#pragma endscop` (or the body of a function named by the caller) is lowered to the
//! kernel language, which stays the small core the set method reads.
//!
//! What is understood, as PolyBench/C 4.2 writes its kernels:
//! - the kernel function's parameters: `int ni` (a size), `DATA_TYPE alpha` (a scalar),
//!   `DATA_TYPE POLYBENCH_2D(A,NI,NK,ni,nk)` (an array with extents `NI` × `NK`; the lower
//!   case names are the same sizes at run time);
//! - local declarations before the region: `DATA_TYPE sum;`, `DATA_TYPE z[N];`,
//!   `DATA_TYPE POLYBENCH_1D(z,N,n);` (loop counters `int i, j;` need none);
//! - in the region: `_PB_NI` and `ni` stand for the size `NI`; `SCALAR_VAL(x)` is `x`;
//!   `SQRT_FUN`, `EXP_FUN`, `POW_FUN` are `sqrt`, `exp`, `pow`; `DATA_TYPE` is `double`
//!   (PolyBench's default; `float` with `DATA_TYPE=float` among the definitions);
//! - sizes from definitions given by the caller (`-D NI=200`) or from a dataset preset
//!   (`MEDIUM` reads `#define` lines inside `#ifdef MEDIUM_DATASET` … `#endif`, in the C
//!   file or the header beside it); sizes left without a value stay parameters.
//!
//! The lowered text keeps every line and column of the region (a macro name is replaced by
//! its meaning padded with spaces; the declarations go on the file's first line), so an
//! error in the region — a construct the kernel language does not have — names the C
//! file's own `file:line:column`.

use crate::error::{CacheError, Result};
use crate::kernel::Kernel;
use crate::parse::parse_kernel;

/// PolyBench's dataset presets, smallest first.
pub(crate) const PRESETS: &[&str] = &["MINI", "SMALL", "MEDIUM", "LARGE", "EXTRALARGE"];

/// How to read a PolyBench-style C file.
#[derive(Clone, Debug, Default)]
pub struct CInput {
    /// Lower the body of this function instead of the `#pragma scop` region.
    pub function: Option<String>,
    /// Values of sizes (and `DATA_TYPE=float|double`), as `-D NAME=VALUE` gives them.
    pub defines: Vec<(String, String)>,
    /// A dataset preset (`MINI` … `EXTRALARGE`).
    pub preset: Option<String>,
    /// The header the C file includes (its name and text), where PolyBench keeps the presets.
    pub header: Option<(String, String)>,
}

/// A lowered C file: the kernel, and the values its sizes got (from definitions or the
/// preset), in declaration order.
#[derive(Clone, Debug)]
pub struct Lowered {
    /// The kernel lowered from the C file's loop nest, sizes without a value left as parameters.
    pub kernel: Kernel,
    /// Each size that got a value (name, value in elements), in declaration order.
    pub sizes: Vec<(String, i64)>,
}

/// Reads a PolyBench-style C file into a kernel (see the module documentation).
pub fn parse_c_kernel(file: &str, src: &str, input: &CInput) -> Result<Lowered> {
    let (text, sizes) = lower(file, src, input)?;
    Ok(Lowered { kernel: parse_kernel(file, &text)?, sizes })
}

/// Reads the function `function` of a PolyBench-style C file (its `init_array`) as the
/// code that runs before the kernel (a warm start, [`crate::Program::warmed_by`]). Beyond
/// what [`parse_c_kernel`] reads: `*alpha = 1.5;` (a scalar of `main`, in a register by
/// the kernel's time) is no array access; `POLYBENCH_2D_ARRAY_DECL(B, DATA_TYPE, N, N, n, n);`
/// declares a temporary array (cholesky's, lu's and ludcmp's `B`), `(POLYBENCH_ARRAY(B))`
/// is `B` and `POLYBENCH_FREE_ARRAY(B);` does nothing to the cache.
pub fn parse_c_warmup(file: &str, src: &str, input: &CInput, function: &str) -> Result<Kernel> {
    let mut text = src.as_bytes().to_vec();
    let pad = |t: &mut Vec<u8>, from: usize, to: usize, with: &str| {
        let mut w = with.as_bytes().to_vec();
        w.resize(to - from, b' ');
        // keep the newlines: positions after stay those of the file
        for (i, c) in t[from..to].iter().enumerate() {
            if *c == b'\n' {
                w[i] = b'\n';
            }
        }
        t[from..to].copy_from_slice(&w);
    };
    // macro calls `NAME(args)` (and the `;` or `)` after, `then`), rewritten in place
    let rewrite = |t: &mut Vec<u8>, name: &str, then: Option<u8>, f: &dyn Fn(&[String]) -> Option<String>| {
        let mut from = 0;
        while let Some(p) = t[from..].windows(name.len()).position(|w| w == name.as_bytes()).map(|p| p + from) {
            from = p + name.len();
            if p > 0 && is_ident(t[p - 1]) || t.get(from).is_some_and(|&c| is_ident(c)) {
                continue;
            }
            let Some(open) = (from..t.len()).find(|&i| !t[i].is_ascii_whitespace()).filter(|&i| t[i] == b'(') else { continue };
            let Some(close) = matching(t, open, (b'(', b')')) else { continue };
            let args: Vec<String> = String::from_utf8_lossy(&t[open + 1..close]).split(',').map(|a| a.trim().to_string()).collect();
            let mut end = close + 1;
            if let Some(then) = then {
                match (end..t.len()).find(|&i| !t[i].is_ascii_whitespace()) {
                    Some(i) if t[i] == then => end = i + 1,
                    _ => continue,
                }
            }
            if let Some(r) = f(&args).filter(|r| r.len() <= end - p) {
                pad(t, p, end, &r);
            }
        }
    };
    rewrite(&mut text, "(POLYBENCH_ARRAY", Some(b')'), &|a| a.first().cloned());
    rewrite(&mut text, "POLYBENCH_ARRAY", None, &|a| a.first().cloned());
    rewrite(&mut text, "POLYBENCH_FREE_ARRAY", Some(b';'), &|_| Some(String::new()));
    for dims in 1..=5usize {
        rewrite(&mut text, &format!("POLYBENCH_{dims}D_ARRAY_DECL"), Some(b';'), &|a| {
            (a.len() == 2 + 2 * dims).then(|| format!("{} {}{};", a[1], a[0], a[2..2 + dims].iter().map(|e| format!("[{e}]")).collect::<String>()))
        });
    }
    // `*name = value;` at a statement's start: blanked
    let blanked = blank_comments(&String::from_utf8_lossy(&text));
    let mut i = 0;
    while i < blanked.len() {
        if blanked[i] == b'*' {
            let before = blanked[..i].iter().rposition(|c| !c.is_ascii_whitespace());
            let starts = before.map_or(true, |b| matches!(blanked[b], b';' | b'{' | b'}' | b')'));
            let name_end = (i + 1..blanked.len()).find(|&j| !is_ident(blanked[j]) && !blanked[j].is_ascii_whitespace() || blanked[j] == b'\n');
            let assigns = name_end.is_some_and(|e| blanked[e] == b'=' && blanked.get(e + 1) != Some(&b'='));
            if starts && assigns {
                if let Some(semi) = (i..blanked.len()).find(|&j| blanked[j] == b';') {
                    pad(&mut text, i, semi + 1, "");
                    i = semi + 1;
                    continue;
                }
            }
        }
        i += 1;
    }
    let text = split_chained_array_assignments(&text);
    let input = CInput { function: Some(function.to_string()), ..input.clone() };
    Ok(parse_c_kernel(file, &String::from_utf8_lossy(&text), &input)?.kernel)
}

/// `A[i] = B[i] = e;` (heat-3d's init_array) as `{B[i] = e; A[i] = B[i];}`: the same lines
/// written in the same order (the read of B[i] hits the line just written, which changes
/// no LRU state), so the cache the warm-up leaves is the same. The kernel language chains
/// assignments through scalars only. Lines are kept (the statement's own newlines move to
/// its end).
fn split_chained_array_assignments(text: &[u8]) -> Vec<u8> {
    let blanked = blank_comments(&String::from_utf8_lossy(text));
    let b = &blanked;
    // the end of `NAME[...]...` from `at`, if there is one
    let lvalue = |at: usize| -> Option<usize> {
        let mut e = (at..b.len()).find(|&j| !is_ident(b[j]))?;
        if e == at || b[at].is_ascii_digit() {
            return None;
        }
        let mut subscripted = false;
        loop {
            let next = (e..b.len()).find(|&j| !b[j].is_ascii_whitespace())?;
            if b[next] != b'[' {
                return subscripted.then_some(e);
            }
            e = matching(b, next, (b'[', b']'))? + 1;
            subscripted = true;
        }
    };
    // the position after a plain `=` (not `==`) that follows `at` (after spaces)
    let assign = |at: usize| -> Option<usize> {
        let eq = (at..b.len()).find(|&j| !b[j].is_ascii_whitespace())?;
        (b[eq] == b'=' && b.get(eq + 1) != Some(&b'=')).then_some(eq + 1)
    };
    let mut edits = Vec::new();
    let mut i = 0;
    while i < b.len() {
        let start_of_statement = is_ident(b[i]) && (i == 0 || !is_ident(b[i - 1])) && b[..i].iter().rposition(|c| !c.is_ascii_whitespace()).map_or(true, |p| matches!(b[p], b';' | b'{' | b'}' | b')'));
        if start_of_statement {
            let chained = lvalue(i).and_then(|e1| {
                let s2 = assign(e1)?;
                let s2 = (s2..b.len()).find(|&j| !b[j].is_ascii_whitespace())?;
                let e2 = lvalue(s2)?;
                let rest = assign(e2)?;
                let semi = (rest..b.len()).find(|&j| b[j] == b';')?;
                Some((e1, s2, e2, rest, semi))
            });
            if let Some((e1, s2, e2, rest, semi)) = chained {
                let t = |x: usize, y: usize| String::from_utf8_lossy(&text[x..y]).replace('\n', " ");
                let newlines = text[i..=semi].iter().filter(|&&c| c == b'\n').count();
                let first = t(i, e1);
                let second = t(s2, e2);
                let replacement = format!("{{{second} = {}; {first} = {second};}}{}", t(rest, semi), "\n".repeat(newlines));
                edits.push((i, semi + 1, replacement));
                i = semi + 1;
                continue;
            }
        }
        i += 1;
    }
    let mut out = text.to_vec();
    for (from, to, r) in edits.into_iter().rev() {
        out.splice(from..to, r.into_bytes());
    }
    out
}

/// The `#include "NAME"` files of a C source, in order (the CLI reads the one that exists).
pub(crate) fn local_includes(src: &str) -> Vec<String> {
    src.lines()
        .filter_map(|l| l.trim_start().strip_prefix('#'))
        .filter_map(|l| l.trim_start().strip_prefix("include"))
        .filter_map(|l| l.trim().strip_prefix('"').and_then(|r| r.split('"').next()))
        .map(str::to_string)
        .collect()
}

fn err(file: &str, at: (u32, u32), msg: impl Into<String>) -> CacheError {
    CacheError::Kernel { file: file.to_string(), line: at.0, col: at.1, msg: msg.into() }
}

/// The source with comments and string literals blanked (same length, newlines kept),
/// so later searches never match inside them and positions stay those of the file.
fn blank_comments(src: &str) -> Vec<u8> {
    let mut b = src.as_bytes().to_vec();
    let mut i = 0;
    let blank = |b: &mut Vec<u8>, from: usize, to: usize| {
        for c in &mut b[from..to] {
            if *c != b'\n' {
                *c = b' ';
            }
        }
    };
    while i < b.len() {
        let end = match (b[i], b.get(i + 1)) {
            (b'/', Some(b'/')) => b[i..].iter().position(|&c| c == b'\n').map_or(b.len(), |p| i + p),
            (b'/', Some(b'*')) => b[i + 2..].windows(2).position(|w| w == b"*/").map_or(b.len(), |p| i + 2 + p + 2),
            (b'"', _) => b[i + 1..].iter().position(|&c| c == b'"' || c == b'\n').map_or(b.len(), |p| i + 1 + p + 1),
            _ => {
                i += 1;
                continue;
            }
        };
        // keep `#include "x.h"` readable: only blank strings outside preprocessor lines
        let line_start = b[..i].iter().rposition(|&c| c == b'\n').map_or(0, |p| p + 1);
        if b[i] == b'"' && b[line_start..i].iter().find(|c| !c.is_ascii_whitespace()) == Some(&b'#') {
            i = end;
            continue;
        }
        let end = end.min(b.len());
        blank(&mut b, i, end);
        i = end;
    }
    b
}

/// 1-based line and column of byte `at`.
fn position(text: &[u8], at: usize) -> (u32, u32) {
    let before = &text[..at.min(text.len())];
    let line = before.iter().filter(|&&c| c == b'\n').count() as u32 + 1;
    let col = (at - before.iter().rposition(|&c| c == b'\n').map_or(0, |p| p + 1)) as u32 + 1;
    (line, col)
}

/// Where the region lies: its byte range, and the byte where the enclosing function's
/// parameter list starts.
struct Region {
    start: usize,
    end: usize,
    params: usize,
}

fn is_ident(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_'
}

/// Byte ranges of the identifiers in `text[from..to]`.
fn identifiers(text: &[u8], from: usize, to: usize) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    let mut i = from;
    while i < to {
        if is_ident(text[i]) && (i == 0 || !is_ident(text[i - 1])) {
            let e = (i..to).find(|&j| !is_ident(text[j])).unwrap_or(to);
            if !text[i].is_ascii_digit() {
                out.push((i, e));
            }
            i = e;
        } else {
            i += 1;
        }
    }
    out
}

/// The position of the bracket matching the one at `open`.
fn matching(text: &[u8], open: usize, (o, c): (u8, u8)) -> Option<usize> {
    let mut depth = 0i64;
    for (i, &ch) in text.iter().enumerate().skip(open) {
        if ch == o {
            depth += 1;
        } else if ch == c {
            depth -= 1;
            if depth == 0 {
                return Some(i);
            }
        }
    }
    None
}

/// The line range holding `#pragma NAME` (trimmed line equal), if any.
fn pragma_line(text: &[u8], name: &str, from: usize) -> Option<(usize, usize)> {
    let mut start = from;
    for line in text[from..].split(|&c| c == b'\n') {
        let end = start + line.len();
        let words: Vec<&[u8]> = line.split(|c| c.is_ascii_whitespace()).filter(|w| !w.is_empty()).collect();
        if words.len() == 2 && words[0] == b"#pragma" && words[1] == name.as_bytes() {
            return Some((start, end));
        }
        start = end + 1;
    }
    None
}

/// The parameter list's `(` of the function whose body (`{` at `body`) encloses a point.
fn header_of(text: &[u8], body: usize) -> Option<usize> {
    let close = text[..body].iter().rposition(|c| !c.is_ascii_whitespace())?;
    if text[close] != b')' {
        return None;
    }
    let mut depth = 0i64;
    for i in (0..=close).rev() {
        match text[i] {
            b')' => depth += 1,
            b'(' => {
                depth -= 1;
                if depth == 0 {
                    return Some(i);
                }
            }
            _ => {}
        }
    }
    None
}

fn find_region(file: &str, text: &[u8], input: &CInput) -> Result<Region> {
    if let Some(f) = &input.function {
        for (s, e) in identifiers(text, 0, text.len()) {
            if &text[s..e] != f.as_bytes() {
                continue;
            }
            let open = (e..text.len()).find(|&j| !text[j].is_ascii_whitespace());
            let Some(open) = open.filter(|&j| text[j] == b'(') else { continue };
            let Some(close) = matching(text, open, (b'(', b')')) else { continue };
            let Some(brace) = (close + 1..text.len()).find(|&j| !text[j].is_ascii_whitespace()).filter(|&j| text[j] == b'{') else { continue };
            let end = matching(text, brace, (b'{', b'}')).ok_or_else(|| err(file, position(text, brace), format!("the body of {f} has no closing '}}'")))?;
            return Ok(Region { start: brace + 1, end, params: open });
        }
        return Err(err(file, (1, 1), format!("no definition of a function '{f}' (name(...) {{ ... }})")));
    }
    let Some((_, scop_end)) = pragma_line(text, "scop", 0) else {
        return Err(err(file, (1, 1), "no `#pragma scop` region; mark the loop nest with `#pragma scop` … `#pragma endscop`, or name its function with --function"));
    };
    let Some((end, _)) = pragma_line(text, "endscop", scop_end) else {
        return Err(err(file, position(text, scop_end), "`#pragma scop` without a `#pragma endscop` after it"));
    };
    // the innermost `{` open at the region's start whose header is a parameter list
    let mut open = Vec::new();
    for (i, &c) in text[..scop_end].iter().enumerate() {
        match c {
            b'{' => open.push(i),
            b'}' => {
                open.pop();
            }
            _ => {}
        }
    }
    let params = open
        .iter()
        .rev()
        .find_map(|&b| header_of(text, b))
        .ok_or_else(|| err(file, position(text, scop_end), "the scop region is not inside a function definition"))?;
    Ok(Region { start: scop_end + 1, end, params })
}

/// An array or scalar the region may use.
#[derive(Debug)]
struct Variable {
    name: String,
    /// Extents (size names or numbers); empty for a scalar.
    extents: Vec<String>,
    /// The kernel-language element type (`double`, `int`, `char`, …).
    ty: String,
}

/// `POLYBENCH_nD(name, EXTENT…, size…)`: the array and the pairs (run-time size, extent).
fn polybench_array(file: &str, text: &[u8], at: usize, dims: usize, args: &str) -> Result<(Variable, Vec<(String, String)>)> {
    let parts: Vec<String> = args.split(',').map(|a| a.trim().to_string()).collect();
    if parts.len() != 1 + 2 * dims || parts.iter().any(|p| p.is_empty()) {
        return Err(err(file, position(text, at), format!("POLYBENCH_{dims}D takes a name, {dims} extents and {dims} sizes, found ({args})")));
    }
    let extents = parts[1..=dims].to_vec();
    let sizes = parts[dims + 1..].iter().cloned().zip(extents.iter().cloned()).collect();
    Ok((Variable { name: parts[0].clone(), extents, ty: "double".into() }, sizes))
}

/// Run-time size names and the sizes they stand for (`ni` → `NI`).
type SizeAliases = Vec<(String, String)>;

/// The element types of a C file: what `DATA_TYPE` is, and the file's `typedef`s of
/// element types (`typedef char base;` in nussinov).
#[derive(Debug)]
struct Types {
    data_type: String,
    typedefs: Vec<(String, String)>,
}

/// The C element types the kernel language has (their sizes are those of x86-64 and
/// AArch64 Linux, the LP64 model PolyBench is built with).
const C_TYPES: &[&str] = &["char", "short", "int", "long", "float", "double", "int8_t", "uint8_t", "int16_t", "uint16_t", "int32_t", "uint32_t", "int64_t", "uint64_t", "size_t"];

impl Types {
    /// The kernel-language type of a declaration's type words (`DATA_TYPE`, `base`,
    /// `unsigned char`, `const double`), `None` when it is not an element type.
    fn resolve(&self, words: &[&str]) -> Option<String> {
        let words: Vec<&str> = words.iter().copied().filter(|w| !matches!(*w, "const" | "static" | "register" | "volatile" | "signed" | "unsigned")).collect();
        let ty = match words.as_slice() {
            ["DATA_TYPE"] => self.data_type.clone(),
            [t] => self.typedefs.iter().find(|(n, _)| n == t).map_or(t.to_string(), |(_, v)| v.clone()),
            ["long", "long"] | ["long", "int"] | ["long", "long", "int"] => "long".into(),
            ["short", "int"] => "short".into(),
            _ => return None,
        };
        C_TYPES.contains(&ty.as_str()).then_some(ty)
    }

    fn is_floating(&self, words: &[&str]) -> bool {
        self.resolve(words).is_some_and(|t| t == "double" || t == "float")
    }
}

/// `#define NAME VALUE` lines of `text` with the `#ifdef`/`#ifndef` guard they are inside
/// (the innermost one; `None` outside every guard or inside `#if` expressions).
fn guarded_defines(text: &str) -> Vec<(Option<String>, String, String)> {
    let mut guards: Vec<Option<String>> = Vec::new();
    let mut out = Vec::new();
    for line in text.lines() {
        let t = line.trim_start();
        let Some(rest) = t.strip_prefix('#') else { continue };
        let words: Vec<&str> = rest.split_whitespace().collect();
        match words.as_slice() {
            ["ifdef", g, ..] => guards.push(Some(g.to_string())),
            ["ifndef", ..] | ["if", ..] => guards.push(None),
            ["endif", ..] => {
                guards.pop();
            }
            ["define", name, value @ ..] => out.push((guards.last().cloned().flatten(), name.to_string(), value.join(" "))),
            _ => {}
        }
    }
    out
}

/// What `DATA_TYPE` is, as the C preprocessor would decide it for PolyBench/C 4.2: a
/// definition given (`-D DATA_TYPE=int`, or `-D DATA_TYPE_IS_FLOAT`) first; otherwise the
/// header's default (`# define DATA_TYPE_IS_INT` in floyd-warshall.h, `…_IS_FLOAT` in
/// deriche.h) and its `#ifdef DATA_TYPE_IS_INT` … `# define DATA_TYPE int`; otherwise a
/// plain `#define DATA_TYPE T`; otherwise `double`, PolyBench's usual default.
fn data_type(file: &str, src: &str, input: &CInput) -> Result<Types> {
    let mut defs = guarded_defines(src);
    if let Some((_, h)) = &input.header {
        defs.extend(guarded_defines(h));
    }
    let given = |name: &str| input.defines.iter().find(|(n, _)| n == name).map(|(_, v)| v.clone());
    let kind = |d: &str| d.strip_prefix("DATA_TYPE_IS_").map(str::to_string);
    let chosen_kind = input.defines.iter().find_map(|(n, _)| kind(n)).or_else(|| defs.iter().find_map(|(_, n, _)| kind(n)));
    let ty = if let Some(t) = given("DATA_TYPE") {
        t
    } else if let Some(k) = chosen_kind {
        let guard = format!("DATA_TYPE_IS_{k}");
        let defined = defs.iter().find(|(g, n, _)| g.as_deref() == Some(guard.as_str()) && n == "DATA_TYPE").map(|(_, _, v)| v.clone());
        defined.unwrap_or_else(|| k.to_ascii_lowercase())
    } else {
        defs.iter().find(|(g, n, _)| n == "DATA_TYPE" && !g.as_deref().is_some_and(|g| g.starts_with("DATA_TYPE_IS_"))).map_or("double".to_string(), |(_, _, v)| v.clone())
    };
    let ty = ty.trim().to_string();
    let mut typedefs = Vec::new();
    for stmt in String::from_utf8_lossy(&blank_comments(src)).split(';') {
        let words: Vec<&str> = stmt.split_whitespace().collect();
        let from = words.iter().position(|w| *w == "typedef").unwrap_or(words.len());
        if let ["typedef", ty @ .., name] = &words[from..] {
            typedefs.push((name.to_string(), ty.join(" ")));
        }
    }
    let mut types = Types { data_type: String::new(), typedefs };
    types.data_type = types.resolve(&ty.split_whitespace().collect::<Vec<_>>()).ok_or_else(|| err(file, (1, 1), format!("DATA_TYPE={ty}: not an element type (char, short, int, long, float, double)")))?;
    let typedefs: Vec<(String, String)> = types.typedefs.iter().filter_map(|(n, t)| types.resolve(&t.split_whitespace().collect::<Vec<_>>()).map(|t| (n.clone(), t))).collect();
    types.typedefs = typedefs;
    Ok(types)
}

/// Declarations in `text[from..to]`, split at `split` (`,` for a parameter list, `;` for
/// statements): arrays of any element type, scalars of a floating type, and the run-time
/// size names.
fn declarations(file: &str, text: &[u8], from: usize, to: usize, split: u8, types: &Types) -> Result<(Vec<Variable>, SizeAliases)> {
    let (mut vars, mut sizes) = (Vec::new(), Vec::new());
    let mut start = from;
    let mut depth = 0i64;
    for i in from..=to {
        let c = if i < to { text[i] } else { split };
        match c {
            b'(' | b'[' => depth += 1,
            b')' | b']' => depth -= 1,
            _ => {}
        }
        if c != split || depth != 0 {
            continue;
        }
        let decl = String::from_utf8_lossy(&text[start..i]).to_string();
        let at = start + (decl.len() - decl.trim_start().len());
        declaration(file, text, at, decl.trim(), types, &mut vars, &mut sizes)?;
        start = i + 1;
    }
    Ok((vars, sizes))
}

fn declaration(file: &str, text: &[u8], at: usize, decl: &str, types: &Types, vars: &mut Vec<Variable>, sizes: &mut Vec<(String, String)>) -> Result<()> {
    if decl.is_empty() || decl.starts_with('#') {
        return Ok(());
    }
    if let Some(p) = decl.find("POLYBENCH_") {
        let rest = &decl[p + "POLYBENCH_".len()..];
        let dims = rest.chars().next().and_then(|c| c.to_digit(10)).unwrap_or(0) as usize;
        let (open, close) = (decl.find('('), decl.rfind(')'));
        let (Some(open), Some(close), 1..=5) = (open, close, dims) else {
            return Err(err(file, position(text, at), format!("cannot read the array declaration '{decl}'")));
        };
        let words: Vec<&str> = decl[..p].split_whitespace().collect();
        let ty = types.resolve(&words).ok_or_else(|| err(file, position(text, at), format!("'{}': not an element type (char, short, int, long, float, double, DATA_TYPE or a typedef of one)", words.join(" "))))?;
        let (mut v, s) = polybench_array(file, text, at, dims, &decl[open + 1..close])?;
        v.ty = ty;
        vars.push(v);
        sizes.extend(s);
        return Ok(());
    }
    let words: Vec<&str> = decl.split(|c: char| c.is_whitespace() || c == ',').filter(|w| !w.is_empty()).collect();
    // the type words: up to the first word followed by a name, an `[` or a `,`
    let type_len = words.iter().take_while(|w| types.resolve(&[w]).is_some() || matches!(**w, "const" | "static" | "register" | "volatile" | "signed" | "unsigned" | "DATA_TYPE")).count();
    if type_len == 0 {
        return Ok(());
    }
    let ty_words = &words[..type_len];
    let Some(ty) = types.resolve(ty_words) else { return Ok(()) };
    let floating = types.is_floating(ty_words);
    let after = decl.find(words[type_len - 1]).unwrap_or(0) + words[type_len - 1].len();
    for item in decl[after..].split(',') {
        // `DATA_TYPE *alpha` (init_array's out-parameters): the scalar it points to
        let item = item.trim().trim_start_matches('*').trim_start();
        let name: String = item.chars().take_while(|&c| c.is_alphanumeric() || c == '_').collect();
        if name.is_empty() {
            return Err(err(file, position(text, at), format!("cannot read the declaration '{decl}'")));
        }
        let extents: Vec<String> = item[name.len()..].split('[').skip(1).map(|e| e.trim_end().trim_end_matches(']').trim().to_string()).collect();
        // `int i, j;` loop counters and `int n` sizes (named by the arrays' declarations
        // or used as `_PB_N`) need no declaration; an integer array does
        if floating || !extents.is_empty() {
            vars.push(Variable { name, extents, ty: ty.clone() });
        }
    }
    Ok(())
}

/// `#define NAME VALUE` lines inside `#ifdef PRESET_DATASET` … `#endif` of `text`.
fn preset_values(text: &str, preset: &str) -> Vec<(String, String)> {
    let guard = format!("{preset}_DATASET");
    let mut inside = false;
    let mut out = Vec::new();
    for line in text.lines() {
        let words: Vec<&str> = line.trim_start().trim_start_matches('#').split_whitespace().collect();
        match words.as_slice() {
            ["ifdef", g] => inside = *g == guard,
            ["endif", ..] => inside = false,
            ["define", name, value, ..] if inside => out.push((name.to_string(), value.to_string())),
            _ => {}
        }
    }
    out
}

/// The kernel-language text of the region and the sizes' values (see the module docs).
fn lower(file: &str, src: &str, input: &CInput) -> Result<(String, Vec<(String, i64)>)> {
    let text = blank_comments(src);
    let region = find_region(file, &text, input)?;
    let types = data_type(file, src, input)?;
    let close = matching(&text, region.params, (b'(', b')')).unwrap_or(region.params);
    let (mut vars, mut sizes) = declarations(file, &text, region.params + 1, close, b',', &types)?;
    let body = (close..region.start).find(|&i| text[i] == b'{').map_or(region.start, |b| b + 1);
    if body < region.start {
        let (v, s) = declarations(file, &text, body, region.start.saturating_sub(0), b';', &types)?;
        vars.extend(v);
        sizes.extend(s);
    }
    // run-time size names (`ni`) and `_PB_NI` both stand for the extent name `NI`
    let extent_of = |name: &str| -> Option<String> {
        if let Some(e) = name.strip_prefix("_PB_") {
            return Some(e.to_string());
        }
        sizes.iter().find(|(s, e)| s == name && e.chars().all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_')).map(|(_, e)| e.clone())
    };
    let mut region_text: Vec<u8> = text[..region.end].to_vec();
    // sizes the region names: `_PB_X`, a run-time size, or an upper-case name (a macro)
    let mut used_sizes: Vec<String> = Vec::new();
    for (s, e) in identifiers(&text, region.start, region.end) {
        let name = String::from_utf8_lossy(&text[s..e]).to_string();
        if let Some(why) = unsupported(&name) {
            return Err(err(file, position(&text, s), format!("'{name}': {why}")));
        }
        let size = extent_of(&name);
        let replacement = match name.as_str() {
            "SCALAR_VAL" => Some(String::new()),
            "SQRT_FUN" => Some("sqrt".into()),
            "EXP_FUN" => Some("exp".into()),
            "POW_FUN" => Some("pow".into()),
            "DATA_TYPE" => Some(types.data_type.clone()),
            // a cast to a typedef (`(base)` in nussinov's init_array)
            _ if size.is_none() => types.typedefs.iter().find(|(n, _)| *n == name).map(|(_, t)| t.clone()),
            _ => size.clone(),
        };
        if let Some(r) = &replacement {
            if r.len() > e - s {
                return Err(err(file, position(&text, s), format!("'{name}' stands for '{r}', which is longer; write '{r}'")));
            }
            region_text[s..e].copy_from_slice(format!("{r:<width$}", width = e - s).as_bytes());
        }
        let upper = name.chars().all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_');
        // a name with a subscript is an array (a temporary declared in the region), not a size
        let subscripted = text[e..region.end].iter().find(|c| !c.is_ascii_whitespace()) == Some(&b'[');
        let size = size.or_else(|| (upper && !subscripted && replacement.is_none() && vars.iter().all(|v| v.name != name)).then_some(name));
        if let Some(size) = size.filter(|x| !used_sizes.contains(x)) {
            used_sizes.push(size);
        }
    }
    let mut params: Vec<String> = Vec::new();
    for name in vars.iter().flat_map(|v| v.extents.iter()).chain(used_sizes.iter()) {
        if name.chars().next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_') && !params.contains(name) {
            params.push(name.clone());
        }
    }
    let values = size_values(file, src, input, &params)?;
    let declarations = declaration_text(&params, &vars);
    // the declarations on line 1, everything before the region blanked, the region as is
    let mut out: Vec<u8> = region_text[..region.start].iter().map(|&c| if c == b'\n' { c } else { b' ' }).collect();
    let first_newline = out.iter().position(|&c| c == b'\n').unwrap_or(out.len());
    out.splice(..first_newline, declarations.into_bytes());
    out.extend_from_slice(&region_text[region.start..region.end]);
    Ok((String::from_utf8_lossy(&out).into_owned(), values))
}

/// Why a C keyword of the region has no counterpart in the kernel language, if it has none.
fn unsupported(word: &str) -> Option<&'static str> {
    Some(match word {
        "switch" | "case" => "switch is not in the kernel language (affine loop nests of assignments and ifs on affine conditions only: the set method needs every access's domain as a polyhedron)",
        "while" | "do" => "only `for` loops with affine bounds are in the kernel language",
        "return" | "goto" | "break" | "continue" => "control flow leaving a loop is not in the kernel language",
        _ => return None,
    })
}

/// The values of the sizes: `-D` definitions first, then the preset (in the C file, then
/// the header); a definition that is not a whole number is an error.
fn size_values(file: &str, src: &str, input: &CInput, params: &[String]) -> Result<Vec<(String, i64)>> {
    let mut known: Vec<(String, String)> = input.defines.clone();
    if let Some(p) = &input.preset {
        let p = p.to_uppercase();
        if !PRESETS.contains(&p.as_str()) {
            return Err(err(file, (1, 1), format!("unknown dataset size '{p}' (PolyBench has {})", PRESETS.join(", "))));
        }
        let mut found = preset_values(src, &p);
        if let Some((_, h)) = &input.header {
            found.extend(preset_values(h, &p));
        }
        if found.is_empty() {
            let header = input.header.as_ref().map_or("no header found beside it".to_string(), |(n, _)| format!("nor in {n}"));
            return Err(err(file, (1, 1), format!("no `#ifdef {p}_DATASET` sizes in this file ({header})")));
        }
        known.extend(found);
    }
    let mut values = Vec::new();
    for name in params {
        if let Some((_, v)) = known.iter().find(|(n, _)| n == name) {
            let v: i64 = v.trim().parse().map_err(|_| err(file, (1, 1), format!("size {name}={v} is not a whole number")))?;
            values.push((name.clone(), v));
        }
    }
    Ok(values)
}

fn declaration_text(params: &[String], vars: &[Variable]) -> String {
    let mut d = String::new();
    if !params.is_empty() {
        d.push_str(&format!("param {}; ", params.join(", ")));
    }
    for v in vars {
        let dims: String = v.extents.iter().map(|e| format!("[{e}]")).collect();
        d.push_str(&format!("{} {}{dims}; ", v.ty, v.name));
    }
    d
}

#[cfg(test)]
mod tests {
    use super::*;

    const GEMM: &str = r#"/* gemm.c: PolyBench-style, written for kansoku's tests */
#include <polybench.h>
#include "gemm.h"

static
void kernel_gemm(int ni, int nj, int nk,
		 DATA_TYPE alpha,
		 DATA_TYPE beta,
		 DATA_TYPE POLYBENCH_2D(C,NI,NJ,ni,nj),
		 DATA_TYPE POLYBENCH_2D(A,NI,NK,ni,nk),
		 DATA_TYPE POLYBENCH_2D(B,NK,NJ,nk,nj))
{
  int i, j, k;

#pragma scop
  for (i = 0; i < _PB_NI; i++) {
    for (j = 0; j < _PB_NJ; j++)
	C[i][j] *= beta;
    for (k = 0; k < _PB_NK; k++) {
       for (j = 0; j < _PB_NJ; j++)
	  C[i][j] += alpha * A[i][k] * B[k][j];
    }
  }
#pragma endscop

}
"#;

    const GEMM_H: &str = "# ifdef MINI_DATASET\n#   define NI 20\n#   define NJ 25\n#   define NK 30\n# endif\n# ifdef MEDIUM_DATASET\n#   define NI 200\n#   define NJ 220\n#   define NK 240\n# endif\n";

    #[test]
    fn gemm_lowers_with_its_sizes_and_arrays() {
        let l = parse_c_kernel("gemm.c", GEMM, &CInput::default()).unwrap();
        let k = &l.kernel;
        assert_eq!(k.params, vec!["NI", "NJ", "NK"]);
        let names: Vec<&str> = k.arrays.iter().map(|a| a.name.as_str()).collect();
        assert_eq!(names, vec!["C", "A", "B"]);
        assert_eq!(k.statements.len(), 2);
        assert!(l.sizes.is_empty());
        // the statements keep the C file's lines
        assert_eq!(k.statements.iter().map(|s| s.pos.line).collect::<Vec<_>>(), vec![18, 21]);
    }

    #[test]
    fn presets_and_definitions_give_sizes() {
        let input = CInput { preset: Some("medium".into()), header: Some(("gemm.h".into(), GEMM_H.into())), ..Default::default() };
        let l = parse_c_kernel("gemm.c", GEMM, &input).unwrap();
        assert_eq!(l.sizes, vec![("NI".into(), 200), ("NJ".into(), 220), ("NK".into(), 240)]);
        let input = CInput { defines: vec![("NJ".into(), "7".into())], preset: Some("MINI".into()), header: Some(("gemm.h".into(), GEMM_H.into())), ..Default::default() };
        assert_eq!(parse_c_kernel("gemm.c", GEMM, &input).unwrap().sizes, vec![("NI".into(), 20), ("NJ".into(), 7), ("NK".into(), 30)]);
        assert_eq!(local_includes(GEMM), vec!["gemm.h"]);
    }

    #[test]
    fn a_function_body_without_pragmas() {
        let src = GEMM.replace("#pragma scop", "").replace("#pragma endscop", "");
        let input = CInput { function: Some("kernel_gemm".into()), ..Default::default() };
        let l = parse_c_kernel("gemm.c", &src, &input).unwrap();
        assert_eq!(l.kernel.statements.len(), 2);
        let e = parse_c_kernel("gemm.c", &src, &CInput::default()).unwrap_err().to_string();
        assert!(e.contains("gemm.c:1:1") && e.contains("#pragma scop"), "{e}");
    }

    /// The element type of each array, as `name:type:size`.
    fn types(l: &Lowered) -> Vec<String> {
        l.kernel.arrays.iter().map(|a| format!("{}:{}:{}", a.name, a.elem_type, a.elem_size)).collect()
    }

    /// PolyBench/C 4.2's header logic for the default data type (floyd-warshall.h).
    const INT_HEADER: &str = "# if !defined(DATA_TYPE_IS_INT) && !defined(DATA_TYPE_IS_FLOAT) && !defined(DATA_TYPE_IS_DOUBLE)\n#  define DATA_TYPE_IS_INT\n# endif\n\
#ifdef DATA_TYPE_IS_INT\n#  define DATA_TYPE int\n#endif\n#ifdef DATA_TYPE_IS_FLOAT\n#  define DATA_TYPE float\n#  define SCALAR_VAL(x) x##f\n# endif\n\
#ifdef DATA_TYPE_IS_DOUBLE\n#  define DATA_TYPE double\n# endif\n";

    #[test]
    fn element_types_come_from_the_declarations_and_data_type() {
        let with = |defines: &[(&str, &str)], header: Option<&str>, src: &str| {
            let input = CInput { defines: defines.iter().map(|(n, v)| (n.to_string(), v.to_string())).collect(), header: header.map(|h| ("h.h".to_string(), h.to_string())), ..Default::default() };
            types(&parse_c_kernel("gemm.c", src, &input).unwrap())
        };
        // PolyBench's default, double
        assert_eq!(with(&[], None, GEMM), ["C:double:8", "A:double:8", "B:double:8"]);
        // the header's default (DATA_TYPE_IS_INT), and what -D overrides it with
        assert_eq!(with(&[], Some(INT_HEADER), GEMM), ["C:int:4", "A:int:4", "B:int:4"]);
        assert_eq!(with(&[("DATA_TYPE_IS_FLOAT", "1")], Some(INT_HEADER), GEMM), ["C:float:4", "A:float:4", "B:float:4"]);
        assert_eq!(with(&[("DATA_TYPE_IS_DOUBLE", "")], Some(INT_HEADER), GEMM), ["C:double:8", "A:double:8", "B:double:8"]);
        for (t, size) in [("char", 1), ("short", 2), ("int", 4), ("long", 8), ("float", 4), ("double", 8)] {
            assert_eq!(with(&[("DATA_TYPE", t)], Some(INT_HEADER), GEMM)[0], format!("C:{t}:{size}"));
        }
        // per array: a typedef (nussinov's `base`) and a plain C type beside DATA_TYPE
        let mixed = GEMM.replace("static\nvoid", "typedef char base;\nstatic\nvoid").replace("DATA_TYPE POLYBENCH_2D(A,", "base POLYBENCH_2D(A,").replace("DATA_TYPE POLYBENCH_2D(B,", "short POLYBENCH_2D(B,");
        assert_eq!(with(&[], None, &mixed), ["C:double:8", "A:char:1", "B:short:2"]);
        // a local integer array is declared; integer scalars (loop counters) are not
        let local = GEMM.replace("  int i, j, k;", "  int i, j, k;\n  long w[NI];");
        assert_eq!(with(&[], None, &local), ["C:double:8", "A:double:8", "B:double:8", "w:long:8"]);
        // not an element type
        let e = parse_c_kernel("gemm.c", GEMM, &CInput { defines: vec![("DATA_TYPE".into(), "complex".into())], ..Default::default() }).unwrap_err().to_string();
        assert!(e.contains("DATA_TYPE=complex: not an element type"), "{e}");
        let e = refused(&GEMM.replace("DATA_TYPE POLYBENCH_2D(A,", "struct_t POLYBENCH_2D(A,"));
        assert!(e.starts_with("bad.c:10:") && e.contains("'struct_t': not an element type"), "{e}");
    }

    #[test]
    fn a_warm_up_reads_init_array_as_polybench_writes_it() {
        // heat-3d's chained assignment, a scalar through a pointer, a temporary array
        let src = "static void init_array(int n, DATA_TYPE *alpha, DATA_TYPE POLYBENCH_1D(A,N,n), DATA_TYPE POLYBENCH_1D(B,N,n))\n{\n  int i;\n  *alpha = 1.5;\n  for (i = 0; i < n; i++)\n    A[i] = B[i] =\n      (DATA_TYPE) (i + n) / n;\n  POLYBENCH_1D_ARRAY_DECL(T, DATA_TYPE, N, n);\n  for (i = 0; i < n; i++)\n    (POLYBENCH_ARRAY(T))[i] = A[i];\n  POLYBENCH_FREE_ARRAY(T);\n  A[0] = 1;\n}\n";
        let k = parse_c_warmup("init.c", src, &CInput::default(), "init_array").unwrap();
        let refs: Vec<String> = k.refs.iter().map(|r| format!("{}{}", if r.is_write { "w " } else { "r " }, k.ref_text(r))).collect();
        assert_eq!(refs, ["w B[i]", "r B[i]", "w A[i]", "r A[i]", "w T[i]", "w A[0]"]);
        let names: Vec<&str> = k.arrays.iter().map(|a| a.name.as_str()).collect();
        assert_eq!(names, ["A", "B", "T"]);
        // the lines after the chained assignment keep their numbers
        assert_eq!(k.statements.last().unwrap().pos.line, 12);
    }

    fn refused(src: &str) -> String {
        parse_c_kernel("bad.c", src, &CInput::default()).unwrap_err().to_string()
    }

    #[test]
    fn unsupported_constructs_are_refused_at_their_position() {
        // a loop whose step is not a constant (line 16)
        let e = refused(&GEMM.replace("for (i = 0; i < _PB_NI; i++) {", "for (i = 1; i < _PB_NI; i *= 2) {"));
        assert!(e.starts_with("bad.c:16:") && e.contains("step"), "{e}");
        // a `while` loop
        let e = refused(&GEMM.replace("for (i = 0; i < _PB_NI; i++) {", "while (i < _PB_NI) {"));
        assert!(e.starts_with("bad.c:16:3: 'while'"), "{e}");
        // conditions the domains cannot take: on data, with `||`, `else` after two
        // inequalities; a switch
        let e = refused(&GEMM.replace("\tC[i][j] *= beta;", "\tif (C[i][j] > 0) C[i][j] *= beta;"));
        assert!(e.starts_with("bad.c:18:6: the condition is not affine: it reads the array element 'C[...]'"), "{e}");
        let e = refused(&GEMM.replace("\tC[i][j] *= beta;", "\tif (i > j || j > 3) C[i][j] *= beta;"));
        assert!(e.starts_with("bad.c:18:12: '||'"), "{e}");
        let e = refused(&GEMM.replace("\tC[i][j] *= beta;", "\tif (i > j && j > 3) C[i][j] *= beta; else C[i][j] = 0;"));
        assert!(e.starts_with("bad.c:18:") && e.contains("'else' after a condition of more than one inequality"), "{e}");
        let e = refused(&GEMM.replace("\tC[i][j] *= beta;", "\tswitch (i) { case 0: C[i][j] *= beta; }"));
        assert!(e.starts_with("bad.c:18:2: 'switch'"), "{e}");
        // a data-independent one is read
        let l = parse_c_kernel("ok.c", &GEMM.replace("\tC[i][j] *= beta;", "\tif (i > j) C[i][j] *= beta;"), &CInput::default()).unwrap();
        assert_eq!(l.kernel.statements[0].guards.len(), 1);
        // a non-affine subscript
        let e = refused(&GEMM.replace("A[i][k] * B[k][j]", "A[i*k][k] * B[k][j]"));
        assert!(e.starts_with("bad.c:21:"), "{e}");
        // an array the function does not declare
        let e = refused(&GEMM.replace("alpha * A[i][k]", "alpha * Z[i][k]"));
        assert!(e.starts_with("bad.c:21:"), "{e}");
        // a region outside every function, and one never closed
        let e = refused("#pragma scop\nA[0] = 1;\n#pragma endscop\n");
        assert!(e.contains("not inside a function"), "{e}");
        let e = refused(&GEMM.replace("#pragma endscop", ""));
        assert!(e.contains("without a `#pragma endscop`"), "{e}");
        // a malformed PolyBench declaration
        let e = refused(&GEMM.replace("POLYBENCH_2D(B,NK,NJ,nk,nj)", "POLYBENCH_2D(B,NK,nk)"));
        assert!(e.starts_with("bad.c:11:") && e.contains("POLYBENCH_2D takes"), "{e}");
    }
}
