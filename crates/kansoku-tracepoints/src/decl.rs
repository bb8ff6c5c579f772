//! Per-trace-point declarations: name, argument names and flags.
//!
//! `KTRACE_DECL` in `kansoku_trace.h` places one text line per trace point into the custom
//! section `kansoku.decl` (LLVM 14 keeps the section name as `.custom_section.kansoku.decl`;
//! both are accepted). A side file with the same lines can be given instead.
//!
//! Line format: `id=<u32>;name=<text>;args=<a,b,..>;flags=<idempotent,disabled>;move=<n|-1>`.

use crate::error::{Result, TpError};
use serde::Serialize;
use std::collections::BTreeMap;

/// The declaration of one trace point.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TraceDecl {
    /// The id the program passes to its trace call.
    pub id: u32,
    /// The point's name, for decoded output.
    pub name: String,
    /// The arguments' names, in call order.
    pub arg_names: Vec<String>,
    /// Adjacent repeats with equal arguments carry no information and may be removed.
    pub idempotent: bool,
    /// Switched off: the optimiser removes every call.
    pub disabled: bool,
    /// How many wasm instructions the call may be moved; `None` = unlimited.
    pub max_move: Option<u32>,
}

impl TraceDecl {
    /// A declaration for an id nobody declared: enabled, not idempotent, movable anywhere.
    pub fn undeclared(id: u32) -> Self {
        TraceDecl { id, name: format!("event{id}"), arg_names: Vec::new(), idempotent: false, disabled: false, max_move: None }
    }
}

/// All declarations of a module, by id.
#[derive(Debug, Clone, Default, Serialize)]
pub struct DeclTable {
    /// Each declared point by id; an id not here is undeclared (enabled, not idempotent).
    pub decls: BTreeMap<u32, TraceDecl>,
}

impl DeclTable {
    /// Parses declaration lines separated by newlines or NUL bytes.
    pub fn parse(bytes: &[u8]) -> Result<Self> {
        let text = String::from_utf8_lossy(bytes);
        let mut decls = BTreeMap::new();
        for line in text.split(['\n', '\0']) {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let d = parse_line(line)?;
            decls.insert(d.id, d);
        }
        Ok(DeclTable { decls })
    }

    /// The declaration of `id`, or the default for undeclared ids.
    pub fn get(&self, id: u32) -> TraceDecl {
        self.decls.get(&id).cloned().unwrap_or_else(|| TraceDecl::undeclared(id))
    }

    /// Whether `id` is declared disabled: its calls may be removed.
    pub(crate) fn is_disabled(&self, id: u32) -> bool {
        self.decls.get(&id).is_some_and(|d| d.disabled)
    }

    /// Whether `id` is declared idempotent: adjacent equal repeats may be collapsed.
    pub(crate) fn is_idempotent(&self, id: u32) -> bool {
        self.decls.get(&id).is_some_and(|d| d.idempotent)
    }

    /// The declared name of `id`, if declared.
    pub fn name(&self, id: u32) -> Option<&str> {
        self.decls.get(&id).map(|d| d.name.as_str())
    }

    /// Merges `other` into `self` (entries of `other` win).
    pub fn extend(&mut self, other: DeclTable) {
        self.decls.extend(other.decls);
    }
}

fn parse_line(line: &str) -> Result<TraceDecl> {
    let bad = |reason: &str| TpError::BadDecl { line: line.to_string(), reason: reason.to_string() };
    let mut id = None;
    let mut d = TraceDecl::undeclared(0);
    let mut named = false;
    for field in line.split(';') {
        let field = field.trim();
        if field.is_empty() {
            continue;
        }
        let (k, v) = field.split_once('=').ok_or_else(|| bad("field without `=`"))?;
        match k.trim() {
            "id" => id = Some(v.trim().parse::<u32>().map_err(|_| bad("id is not an unsigned integer"))?),
            "name" => {
                d.name = v.trim().to_string();
                named = true;
            }
            "args" => {
                d.arg_names = v.split(',').map(|s| s.trim().to_string()).filter(|s| !s.is_empty()).collect()
            }
            "flags" => {
                for f in v.split(',').map(str::trim).filter(|s| !s.is_empty()) {
                    match f {
                        "idempotent" => d.idempotent = true,
                        "disabled" => d.disabled = true,
                        "enabled" => d.disabled = false,
                        _ => return Err(bad(&format!("unknown flag `{f}` (known: idempotent, disabled, enabled)"))),
                    }
                }
            }
            "move" => {
                let n: i64 = v.trim().parse().map_err(|_| bad("move is not an integer"))?;
                d.max_move = if n < 0 { None } else { Some(n as u32) };
            }
            other => return Err(bad(&format!("unknown field `{other}`"))),
        }
    }
    d.id = id.ok_or_else(|| bad("missing id="))?;
    if !named {
        d.name = format!("event{}", d.id);
    }
    Ok(d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_lines_with_nuls() {
        let t = DeclTable::parse(b"id=2;name=iter;args=i,s;flags=idempotent;move=20\n\0id=3;name=x;args=;flags=;move=-1\n\0").unwrap();
        assert_eq!(t.decls.len(), 2);
        let d = t.get(2);
        assert!(d.idempotent && !d.disabled);
        assert_eq!(d.max_move, Some(20));
        assert_eq!(d.arg_names, vec!["i", "s"]);
        assert_eq!(t.get(3).max_move, None);
        assert_eq!(t.get(9).name, "event9");
    }

    #[test]
    fn rejects_unknown_flag() {
        assert!(DeclTable::parse(b"id=1;flags=sometimes").is_err());
    }
}
