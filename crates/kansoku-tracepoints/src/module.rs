//! Reading a module: validation, the `kansoku` imports, declarations, table, functions.

use crate::decl::DeclTable;
use crate::error::{Result, TpError};
use crate::xlat::XlatTable;
use wasmparser::{FunctionBody, Parser, Payload, SubType, TypeRef, ValType};

/// What a function import of module `kansoku` is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KansokuImport {
    /// `kansoku.traceN`: an id and N i32 arguments.
    Trace {
        /// The i32 arguments after the id.
        nargs: u32,
    },
    /// `kansoku.barrier`: no trace call may move across it.
    Barrier,
}

/// One function import.
#[derive(Debug, Clone)]
pub struct FuncImport {
    /// The import's module name (`kansoku` for trace calls).
    pub module: String,
    /// The import's field name (`trace2`, `barrier`, …).
    pub name: String,
    /// Index of its function type in the type section.
    pub type_index: u32,
    /// What it is to kansoku, when it is one of `kansoku`'s imports.
    pub kansoku: Option<KansokuImport>,
}

/// A parsed, validated module.
pub struct ModuleInfo<'a> {
    /// The module's bytes, which the bodies borrow.
    pub bytes: &'a [u8],
    /// The type section's entries.
    pub types: Vec<SubType>,
    /// The function imports, in index order (they take the first function indices).
    pub func_imports: Vec<FuncImport>,
    /// Type index of each defined (non-imported) function.
    pub func_types: Vec<u32>,
    /// The code section's bodies, one per defined function.
    pub bodies: Vec<FunctionBody<'a>>,
    /// The `kansoku.decl` section's declarations (empty without one).
    pub decls: DeclTable,
    /// The `kansoku.xlat` translation table of an optimised module.
    pub xlat: Option<XlatTable>,
    /// Names of the custom sections, in order.
    pub custom_sections: Vec<String>,
    /// The exports: name, kind and index.
    pub exports: Vec<(String, wasmparser::ExternalKind, u32)>,
}

/// Section names under which `kansoku.decl` may appear.
pub(crate) fn is_decl_section(name: &str) -> bool {
    name == "kansoku.decl" || name == ".custom_section.kansoku.decl"
}

impl<'a> ModuleInfo<'a> {
    /// Validates and reads `bytes`.
    pub fn parse(bytes: &'a [u8]) -> Result<Self> {
        if bytes.len() < 8 || &bytes[..4] != b"\0asm" {
            return Err(TpError::Malformed("missing the `\\0asm` magic number at the start".into()));
        }
        wasmparser::Validator::new().validate_all(bytes).map_err(|e| TpError::Malformed(e.to_string()))?;
        let mut m = ModuleInfo {
            bytes,
            types: Vec::new(),
            func_imports: Vec::new(),
            func_types: Vec::new(),
            bodies: Vec::new(),
            decls: DeclTable::default(),
            xlat: None,
            custom_sections: Vec::new(),
            exports: Vec::new(),
        };
        for payload in Parser::new(0).parse_all(bytes) {
            match payload? {
                Payload::TypeSection(r) => {
                    for rg in r {
                        m.types.extend(rg?.into_types());
                    }
                }
                Payload::ImportSection(r) => {
                    for imp in r.into_imports() {
                        let imp = imp?;
                        // An exact import (custom descriptors) is a function all the same: missing
                        // it shifted every defined function's index (a fuzzing finding).
                        if let TypeRef::Func(t) | TypeRef::FuncExact(t) = imp.ty {
                            m.func_imports.push(FuncImport {
                                module: imp.module.to_string(),
                                name: imp.name.to_string(),
                                type_index: t,
                                kansoku: None,
                            });
                        }
                    }
                }
                Payload::FunctionSection(r) => {
                    for t in r {
                        m.func_types.push(t?);
                    }
                }
                Payload::ExportSection(r) => {
                    for e in r {
                        let e = e?;
                        m.exports.push((e.name.to_string(), e.kind, e.index));
                    }
                }
                Payload::CodeSectionEntry(body) => m.bodies.push(body),
                Payload::CustomSection(c) => {
                    m.custom_sections.push(c.name().to_string());
                    if is_decl_section(c.name()) {
                        m.decls.extend(DeclTable::parse(c.data())?);
                    } else if c.name() == "kansoku.xlat" {
                        m.xlat = Some(XlatTable::decode(c.data())?);
                    }
                }
                _ => {}
            }
        }
        for i in 0..m.func_imports.len() {
            if m.func_imports[i].module == "kansoku" {
                let k = m.classify(&m.func_imports[i])?;
                m.func_imports[i].kansoku = Some(k);
            }
        }
        Ok(m)
    }

    fn classify(&self, imp: &FuncImport) -> Result<KansokuImport> {
        let bad = |reason: String| TpError::UnsupportedImport { module: imp.module.clone(), name: imp.name.clone(), reason };
        let (params, results) = self.func_sig(imp.type_index).ok_or_else(|| bad("its type is not a function type".into()))?;
        if imp.name == "barrier" {
            if !params.is_empty() || !results.is_empty() {
                return Err(bad("`barrier` must have type () -> ()".into()));
            }
            return Ok(KansokuImport::Barrier);
        }
        let n: u32 = imp
            .name
            .strip_prefix("trace")
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| bad("module `kansoku` provides only `traceN` and `barrier`".into()))?;
        if params.len() != n as usize + 1 || params.iter().any(|p| *p != ValType::I32) || !results.is_empty() {
            return Err(bad(format!("`trace{n}` must take {} i32 (id and {n} arguments) and return nothing", n + 1)));
        }
        if n > 255 {
            return Err(bad("at most 255 arguments".into()));
        }
        Ok(KansokuImport::Trace { nargs: n })
    }

    /// Params and results of function type `t`.
    pub(crate) fn func_sig(&self, t: u32) -> Option<(&[ValType], &[ValType])> {
        match &self.types.get(t as usize)?.composite_type.inner {
            wasmparser::CompositeInnerType::Func(f) => Some((f.params(), f.results())),
            _ => None,
        }
    }

    /// Imported functions (the first defined function's index).
    pub fn num_func_imports(&self) -> u32 {
        self.func_imports.len() as u32
    }

    /// Type index of function `f` (imported or defined).
    pub(crate) fn type_of_func(&self, f: u32) -> Option<u32> {
        let n = self.num_func_imports();
        if f < n {
            Some(self.func_imports[f as usize].type_index)
        } else {
            self.func_types.get((f - n) as usize).copied()
        }
    }

    /// The `kansoku` meaning of function `f`, if it is such an import.
    pub(crate) fn kansoku_import(&self, f: u32) -> Option<KansokuImport> {
        self.func_imports.get(f as usize).and_then(|i| i.kansoku)
    }

    /// Whether the module calls any `kansoku.traceN` (it has something to optimise).
    pub(crate) fn has_trace_imports(&self) -> bool {
        self.func_imports.iter().any(|i| matches!(i.kansoku, Some(KansokuImport::Trace { .. })))
    }

    /// Index of the import `kansoku.traceN`, if the module has it.
    pub(crate) fn trace_import(&self, nargs: u32) -> Option<u32> {
        self.func_imports
            .iter()
            .position(|i| i.kansoku == Some(KansokuImport::Trace { nargs }))
            .map(|p| p as u32)
    }
}

/// Counts the calls of `kansoku.trace*` and `kansoku.barrier` in the code of a module:
/// `(trace calls, barrier calls)`.
pub fn count_trace_calls(wasm: &[u8]) -> Result<(usize, usize)> {
    let m = ModuleInfo::parse(wasm)?;
    let (mut t, mut b) = (0, 0);
    for body in &m.bodies {
        for op in body.get_operators_reader()? {
            if let wasmparser::Operator::Call { function_index } = op? {
                match m.kansoku_import(function_index) {
                    Some(KansokuImport::Trace { .. }) => t += 1,
                    Some(KansokuImport::Barrier) => b += 1,
                    None => {}
                }
            }
        }
    }
    Ok((t, b))
}
