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
pub const PRESETS: &[&str] = &["MINI", "SMALL", "MEDIUM", "LARGE", "EXTRALARGE"];

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
    pub kernel: Kernel,
    pub sizes: Vec<(String, i64)>,
}

/// Reads a PolyBench-style C file into a kernel (see the module documentation).
pub fn parse_c_kernel(file: &str, src: &str, input: &CInput) -> Result<Lowered> {
    let (text, sizes) = lower(file, src, input)?;
    Ok(Lowered { kernel: parse_kernel(file, &text)?, sizes })
}

/// The `#include "NAME"` files of a C source, in order (the CLI reads the one that exists).
pub fn local_includes(src: &str) -> Vec<String> {
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
}

/// `POLYBENCH_nD(name, EXTENT…, size…)`: the array and the pairs (run-time size, extent).
fn polybench_array(file: &str, text: &[u8], at: usize, dims: usize, args: &str) -> Result<(Variable, Vec<(String, String)>)> {
    let parts: Vec<String> = args.split(',').map(|a| a.trim().to_string()).collect();
    if parts.len() != 1 + 2 * dims || parts.iter().any(|p| p.is_empty()) {
        return Err(err(file, position(text, at), format!("POLYBENCH_{dims}D takes a name, {dims} extents and {dims} sizes, found ({args})")));
    }
    let extents = parts[1..=dims].to_vec();
    let sizes = parts[dims + 1..].iter().cloned().zip(extents.iter().cloned()).collect();
    Ok((Variable { name: parts[0].clone(), extents }, sizes))
}

/// Run-time size names and the sizes they stand for (`ni` → `NI`).
type SizeAliases = Vec<(String, String)>;

/// Declarations in `text[from..to]`, split at `split` (`,` for a parameter list, `;` for
/// statements): arrays, scalars of a floating type, and the run-time size names.
fn declarations(file: &str, text: &[u8], from: usize, to: usize, split: u8, float_type: &str) -> Result<(Vec<Variable>, SizeAliases)> {
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
        declaration(file, text, at, decl.trim(), float_type, &mut vars, &mut sizes)?;
        start = i + 1;
    }
    Ok((vars, sizes))
}

fn declaration(file: &str, text: &[u8], at: usize, decl: &str, float_type: &str, vars: &mut Vec<Variable>, sizes: &mut Vec<(String, String)>) -> Result<()> {
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
        let (v, s) = polybench_array(file, text, at, dims, &decl[open + 1..close])?;
        vars.push(v);
        sizes.extend(s);
        return Ok(());
    }
    let words: Vec<&str> = decl.split(|c: char| c.is_whitespace() || c == ',').filter(|w| !w.is_empty()).collect();
    let Some(ty) = words.first() else { return Ok(()) };
    let floating = matches!(*ty, "DATA_TYPE" | "double" | "float") || *ty == float_type;
    if !floating {
        // `int i, j;` loop counters, `int n` sizes (named by the arrays' declarations or
        // used as `_PB_N`): nothing to declare
        return Ok(());
    }
    for item in decl[decl.find(words[0]).unwrap_or(0) + words[0].len()..].split(',') {
        let item = item.trim();
        let name: String = item.chars().take_while(|&c| c.is_alphanumeric() || c == '_').collect();
        if name.is_empty() {
            return Err(err(file, position(text, at), format!("cannot read the declaration '{decl}'")));
        }
        let extents = item[name.len()..].split('[').skip(1).map(|e| e.trim_end().trim_end_matches(']').trim().to_string()).collect();
        vars.push(Variable { name, extents });
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
    let float_type = input.defines.iter().find(|(n, _)| n == "DATA_TYPE").map_or("double", |(_, v)| v.as_str()).to_string();
    if float_type != "double" && float_type != "float" {
        return Err(err(file, (1, 1), format!("DATA_TYPE={float_type}: only double and float are element types here")));
    }
    let close = matching(&text, region.params, (b'(', b')')).unwrap_or(region.params);
    let (mut vars, mut sizes) = declarations(file, &text, region.params + 1, close, b',', &float_type)?;
    let body = (close..region.start).find(|&i| text[i] == b'{').map_or(region.start, |b| b + 1);
    if body < region.start {
        let (v, s) = declarations(file, &text, body, region.start.saturating_sub(0), b';', &float_type)?;
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
            "DATA_TYPE" => Some(float_type.clone()),
            _ => size.clone(),
        };
        if let Some(r) = &replacement {
            if r.len() > e - s {
                return Err(err(file, position(&text, s), format!("'{name}' stands for '{r}', which is longer; write '{r}'")));
            }
            region_text[s..e].copy_from_slice(format!("{r:<width$}", width = e - s).as_bytes());
        }
        let upper = name.chars().all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_');
        let size = size.or_else(|| (upper && replacement.is_none() && vars.iter().all(|v| v.name != name)).then_some(name));
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
    let declarations = declaration_text(&params, &vars, &float_type);
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

fn declaration_text(params: &[String], vars: &[Variable], float_type: &str) -> String {
    let mut d = String::new();
    if !params.is_empty() {
        d.push_str(&format!("param {}; ", params.join(", ")));
    }
    for v in vars {
        let dims: String = v.extents.iter().map(|e| format!("[{e}]")).collect();
        d.push_str(&format!("{float_type} {}{dims}; ", v.name));
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
