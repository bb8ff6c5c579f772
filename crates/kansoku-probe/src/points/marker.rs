//! Marker functions by name, wherever they live (issue 42), with one meaning for every
//! command that takes `--marker` (`trace exact`, `record`, `wave`, `reconstruct`): an
//! iteration starts at each entry of the function named.
//!
//! * `F` — the program's own `F`; when the program does not define it (it calls it
//!   through its PLT), the `F` of the first library that defines it, in the order the
//!   dynamic linker lists them, which is where its symbol lookup binds the calls.
//! * `F@LIB` — `F` of a shared library the program loads at start (`adler32@libz`,
//!   `@libz.so.1`, `@z`, or a path), uftrace's form as `kansoku tp` takes it.
//! * `F@plt` — the program's PLT stub of `F`: entered on every call through the PLT,
//!   including the first, which runs the dynamic linker's binding.
//!
//! A library is mapped by the dynamic linker after exec, so engines that need a runtime
//! address before the program runs (ptrace) run it to its entry point first
//! ([`MarkerSite::in_library`]); uprobes take the library's file and offset directly.

use std::path::{Path, PathBuf};

use kansoku_binary::Program;
use kansoku_core::Module;

use crate::events::{ifunc_implementation, libraries_of, library_matches};
use crate::ProbeError;

/// Where a marker spec points: a function entry in the program or one of its libraries.
#[derive(Clone, Debug)]
pub struct MarkerSite {
    /// What the user wrote (`adler32@libz`).
    pub spec: String,
    /// The function's name as samples are symbolised (`adler32`, `adler32@plt`).
    pub function: String,
    /// The file that holds it (canonical path for a library, the program's path as given otherwise).
    pub module: PathBuf,
    /// Whether `module` is a shared library rather than the program.
    pub in_library: bool,
    /// Link-time address of the entry in `module`.
    pub vaddr: u64,
    /// The function's size in bytes.
    pub size: u64,
}

pub use kansoku_core::marker::{marker_function_name, split_marker};

/// Resolves a marker spec against the program at `program_path` (and, for a library, the
/// libraries it loads at start). Returns the site and the opened file that holds it.
pub fn resolve(program_path: &Path, spec: &str) -> Result<(MarkerSite, Program), ProbeError> {
    let spec = spec.trim();
    let bad = |reason: String| ProbeError::Marker { spec: spec.into(), reason };
    let program = Program::open(program_path)?;
    let (name, lib) = split_marker(spec);
    let site = |function: &str, module: PathBuf, in_library: bool, vaddr: u64, size: u64| MarkerSite {
        spec: spec.to_string(),
        function: function.to_string(),
        module,
        in_library,
        vaddr,
        size,
    };
    let Some(lib) = lib else {
        // the program's own function first (a PLT stub is named `F@plt`, never `F`)
        let own_error = match program.function_named(name) {
            Ok(f) => {
                let s = site(&f.name, program_path.to_path_buf(), false, f.address, f.size);
                return Ok((s, program));
            }
            Err(e) => e,
        };
        if name.ends_with("@plt") || program.interpreter.is_none() {
            return Err(own_error.into());
        }
        let libraries = libraries_of(&program, program_path).map_err(bad)?;
        for (_, path) in &libraries {
            let Ok(library) = Program::open(path) else { continue };
            if let Some(found) = in_library(&library, path, name) {
                let (vaddr, size, function) = found.map_err(bad)?;
                return Ok((site(&function, path.clone(), true, vaddr, size), library));
            }
        }
        let listed: Vec<String> = libraries.iter().map(|(n, _)| n.clone()).collect();
        return Err(bad(format!("neither {} nor the libraries it loads at start ({}) define a function named '{name}' ({own_error})", program_path.display(), listed.join(", "))));
    };
    let path = if lib.contains('/') {
        std::fs::canonicalize(lib).map_err(|e| bad(format!("library {lib}: {e}")))?
    } else {
        let libraries = libraries_of(&program, program_path).map_err(bad)?;
        let file_name = |p: &PathBuf| p.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        let found = libraries.iter().find(|(listed, p)| library_matches(listed, lib) || library_matches(&file_name(p), lib));
        let names: Vec<&str> = libraries.iter().map(|(listed, _)| listed.as_str()).collect();
        found.map(|(_, p)| p.clone()).ok_or_else(|| bad(format!("{} loads no library '{lib}' at start (it loads: {})", program_path.display(), names.join(", "))))?
    };
    let library = Program::open(&path)?;
    match in_library(&library, &path, name) {
        Some(found) => {
            let (vaddr, size, function) = found.map_err(bad)?;
            Ok((site(&function, path, true, vaddr, size), library))
        }
        None => Err(bad(format!("{} defines no function named '{name}'", path.display()))),
    }
}

/// `name` in `library`: (link address, size, symbolised name), None when not there. A GNU
/// IFUNC (libc's `memcpy`) is the implementation the dynamic linker picks on this machine.
fn in_library(library: &Program, path: &Path, name: &str) -> Option<Result<(u64, u64, String), String>> {
    if library.ifunc_named(name).is_some() {
        let Some(vaddr) = ifunc_implementation(path, name) else {
            return Some(Err(format!("{name} is a GNU IFUNC of {} and kansoku could not resolve which implementation this machine runs", path.display())));
        };
        let f = library.function_at(vaddr).filter(|g| g.address == vaddr);
        return Some(Ok((vaddr, f.map_or(0, |g| g.size), f.map_or(name.to_string(), |g| g.name.clone()))));
    }
    let f = library.function_named(name).ok()?;
    Some(Ok((f.address, f.size, f.name.clone())))
}

impl MarkerSite {
    /// The entry's runtime address among `modules` (the process's map), once its file is
    /// mapped. `file` is the opened module ([`resolve`]'s second value).
    pub fn runtime_address(&self, modules: &[Module], file: &Program) -> Option<u64> {
        let offset = file.file_offset_of_vaddr(self.vaddr)?;
        let wanted = self.module.to_string_lossy();
        let canonical = std::fs::canonicalize(&self.module).ok();
        modules
            .iter()
            .filter(|m| m.path == wanted || (canonical.is_some() && std::fs::canonicalize(&m.path).ok() == canonical))
            .find(|m| offset >= m.file_offset && offset < m.file_offset + (m.end - m.start))
            .map(|m| m.start + (offset - m.file_offset))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn specs_split_as_documented() {
        assert_eq!(split_marker("adler32"), ("adler32", None));
        assert_eq!(split_marker("adler32@libz"), ("adler32", Some("libz")));
        assert_eq!(split_marker("adler32@plt"), ("adler32@plt", None));
        assert_eq!(split_marker("@x"), ("@x", None));
        assert_eq!(marker_function_name("adler32@libz.so.1"), "adler32");
        assert_eq!(marker_function_name("func_M"), "func_M");
    }
}
