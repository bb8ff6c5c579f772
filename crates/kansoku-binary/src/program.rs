//! ELF files: symbols, segments, bytes at virtual addresses, DWARF lines.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use object::{Object, ObjectSection, ObjectSegment, ObjectSymbol, SectionKind, SymbolKind};
use serde::Serialize;

#[derive(Debug, thiserror::Error)]
pub enum BinaryError {
    #[error("cannot read {path}: {cause}")]
    Read { path: PathBuf, cause: std::io::Error },
    #[error("{path} is not an ELF program ({reason}); give the path of a compiled executable or shared library")]
    NotElf { path: PathBuf, reason: String },
    #[error("{path} is a {arch} binary; kansoku decodes x86-64 only")]
    WrongArchitecture { path: PathBuf, arch: String },
    #[error("{path}: no function named '{name}'{hint}")]
    NoSuchFunction { path: PathBuf, name: String, hint: String },
    #[error("{path}: address 0x{addr:x} is not inside any loaded code")]
    AddressOutsideCode { path: PathBuf, addr: u64 },
}

/// Where a function's symbol came from, which says how far to trust its bounds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SymbolSource {
    /// `.symtab`: full static symbols.
    Static,
    /// `.dynsym` only (a stripped binary's exported functions).
    Dynamic,
    /// No symbol: a stretch of an executable section between known functions.
    AddressRange,
}

/// A function of the program, at its link-time (file virtual) address.
#[derive(Clone, Debug, Serialize)]
pub struct FunctionSymbol {
    pub name: String,
    pub address: u64,
    pub size: u64,
    pub source: SymbolSource,
    /// Other names at the same address (e.g. `_IO_printf` for `printf`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub aliases: Vec<String>,
}

impl FunctionSymbol {
    pub fn contains(&self, addr: u64) -> bool {
        addr >= self.address && addr < self.address + self.size.max(1)
    }
}

/// A source position from DWARF.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct SourceLine {
    pub file: String,
    pub line: u32,
}

impl std::fmt::Display for SourceLine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let short = self.file.rsplit('/').next().unwrap_or(&self.file);
        write!(f, "{short}:{}", self.line)
    }
}

#[derive(Clone, Debug)]
struct LoadSegment {
    vaddr: u64,
    file_offset: u64,
    file_size: u64,
}

#[derive(Clone, Debug)]
struct CodeSection {
    name: String,
    address: u64,
    data_offset: usize,
    size: usize,
}

/// A parsed ELF program. Cheap to clone (shares its bytes).
#[derive(Clone)]
pub struct Program {
    path: PathBuf,
    data: Arc<Vec<u8>>,
    /// Position-independent (ET_DYN): loaded at a bias chosen at run time.
    pub is_pie: bool,
    pub build_id: Option<String>,
    pub has_static_symbols: bool,
    functions: Vec<FunctionSymbol>,
    segments: Vec<LoadSegment>,
    code: Vec<CodeSection>,
    lines: Arc<std::sync::OnceLock<Option<addr2line::Loader>>>,
}

impl std::fmt::Debug for Program {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Program").field("path", &self.path).field("functions", &self.functions.len()).finish()
    }
}

/// The largest program file read (the largest Debian shared libraries are a few hundred MB).
pub const MAX_PROGRAM_BYTES: u64 = 4 << 30;

impl Program {
    /// Reads and parses the ELF file at `path`. Paths come from recordings too, so only regular files
    /// up to [`MAX_PROGRAM_BYTES`] are read.
    pub fn open(path: impl AsRef<Path>) -> Result<Program, BinaryError> {
        let path = path.as_ref().to_path_buf();
        let data = kansoku_core::input::read_regular(&path, MAX_PROGRAM_BYTES).map_err(|source| BinaryError::Read { path: path.clone(), cause: source })?;
        Self::parse(path, data)
    }

    fn parse(path: PathBuf, data: Vec<u8>) -> Result<Program, BinaryError> {
        if data.len() < 4 || &data[..4] != b"\x7fELF" {
            let reason = if data.is_empty() { "the file is empty".to_string() } else { "no ELF magic at byte 0".to_string() };
            return Err(BinaryError::NotElf { path, reason });
        }
        let file = object::File::parse(&*data).map_err(|e| BinaryError::NotElf { path: path.clone(), reason: e.to_string() })?;
        if file.architecture() != object::Architecture::X86_64 {
            return Err(BinaryError::WrongArchitecture { path, arch: format!("{:?}", file.architecture()) });
        }
        let is_pie = file.kind() == object::ObjectKind::Dynamic;
        let build_id = file.build_id().ok().flatten().map(hex);
        let segments = file
            .segments()
            .map(|s| {
                let (off, size) = s.file_range();
                LoadSegment { vaddr: s.address(), file_offset: off, file_size: size }
            })
            .collect();
        let code: Vec<CodeSection> = file
            .sections()
            .filter(|s| s.kind() == SectionKind::Text)
            .filter_map(|s| {
                let (off, size) = s.file_range()?;
                Some(CodeSection {
                    name: s.name().unwrap_or("?").to_string(),
                    address: s.address(),
                    data_offset: off as usize,
                    size: size as usize,
                })
            })
            .collect();
        let has_static_symbols = file.symbols().any(|s| s.kind() == SymbolKind::Text);
        let functions = collect_functions(&file, &code, has_static_symbols);
        Ok(Program {
            path,
            data: Arc::new(data),
            is_pie,
            build_id,
            has_static_symbols,
            functions,
            segments,
            code,
            lines: Arc::new(std::sync::OnceLock::new()),
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Functions sorted by address, each with a non-zero size.
    pub fn functions(&self) -> &[FunctionSymbol] {
        &self.functions
    }

    /// The function containing the link-time address `addr`.
    pub fn function_at(&self, addr: u64) -> Option<&FunctionSymbol> {
        let i = self.functions.partition_point(|f| f.address <= addr);
        let f = self.functions.get(i.checked_sub(1)?)?;
        f.contains(addr).then_some(f)
    }

    /// The function called `name` (exact match, then demangled match).
    pub fn function_named(&self, name: &str) -> Result<&FunctionSymbol, BinaryError> {
        self.functions
            .iter()
            .find(|f| f.name == name || f.aliases.iter().any(|a| a == name))
            .or_else(|| self.functions.iter().find(|f| demangle(&f.name) == name))
            .ok_or_else(|| {
                let close: Vec<&str> = self
                    .functions
                    .iter()
                    .map(|f| f.name.as_str())
                    .filter(|n| n.contains(name) || name.contains(*n))
                    .take(5)
                    .collect();
                let hint = if close.is_empty() {
                    "; run `kansoku inspect PROGRAM` to list the functions".to_string()
                } else {
                    format!("; similar: {}", close.join(", "))
                };
                BinaryError::NoSuchFunction { path: self.path.clone(), name: name.to_string(), hint }
            })
    }

    /// The code bytes from `addr` to the end of its executable section.
    pub fn code_at(&self, addr: u64) -> Option<&[u8]> {
        let s = self.code.iter().find(|s| addr >= s.address && addr < s.address + s.size as u64)?;
        let start = s.data_offset + (addr - s.address) as usize;
        self.data.get(start..s.data_offset + s.size)
    }

    /// The code bytes of a function (clamped to its section).
    pub fn function_bytes(&self, f: &FunctionSymbol) -> Option<&[u8]> {
        let bytes = self.code_at(f.address)?;
        Some(&bytes[..(f.size as usize).min(bytes.len())])
    }

    /// The name of the executable section holding `addr`, e.g. `.text` or `.plt`.
    pub fn section_name(&self, addr: u64) -> Option<&str> {
        self.code.iter().find(|s| addr >= s.address && addr < s.address + s.size as u64).map(|s| s.name.as_str())
    }

    /// Link-time virtual address of a file offset (through the PT_LOAD segments).
    pub fn vaddr_of_file_offset(&self, offset: u64) -> Option<u64> {
        self.segments
            .iter()
            .find(|s| offset >= s.file_offset && offset < s.file_offset + s.file_size)
            .map(|s| s.vaddr + (offset - s.file_offset))
    }

    /// File offset of a link-time virtual address.
    pub fn file_offset_of_vaddr(&self, vaddr: u64) -> Option<u64> {
        self.segments
            .iter()
            .find(|s| vaddr >= s.vaddr && vaddr < s.vaddr + s.file_size)
            .map(|s| s.file_offset + (vaddr - s.vaddr))
    }

    /// Source file and line of a link-time address, when the program has DWARF lines.
    pub fn source_line(&self, addr: u64) -> Option<SourceLine> {
        let loader = self.lines.get_or_init(|| addr2line::Loader::new(&self.path).ok()).as_ref()?;
        let loc = loader.find_location(addr).ok()??;
        Some(SourceLine { file: loc.file?.to_string(), line: loc.line? })
    }
}

/// Demangles Rust and C++ symbol names; other names come back unchanged.
pub fn demangle(name: &str) -> String {
    if let Ok(d) = rustc_demangle::try_demangle(name) {
        return format!("{d:#}");
    }
    if name.starts_with("_Z") {
        if let Ok(sym) = cpp_demangle::Symbol::new(name) {
            if let Ok(s) = sym.demangle(&Default::default()) {
                return s;
            }
        }
    }
    name.to_string()
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Functions from `.symtab` (or `.dynsym` when stripped), deduplicated, with sizes filled
/// in for zero-sized symbols, and the remaining gaps of executable sections as
/// address-range pseudo functions so every code address has a name.
fn collect_functions(file: &object::File, code: &[CodeSection], has_static: bool) -> Vec<FunctionSymbol> {
    let mut funcs: Vec<FunctionSymbol> = Vec::new();
    let mut add = |sym: object::Symbol, source: SymbolSource| {
        if sym.kind() == SymbolKind::Text && sym.address() != 0 && sym.is_definition() {
            if let Ok(name) = sym.name() {
                if !name.is_empty() {
                    funcs.push(FunctionSymbol {
                        name: name.to_string(),
                        address: sym.address(),
                        size: sym.size(),
                        source,
                        aliases: Vec::new(),
                    });
                }
            }
        }
    };
    if has_static {
        file.symbols().for_each(|s| add(s, SymbolSource::Static));
    } else {
        file.dynamic_symbols().for_each(|s| add(s, SymbolSource::Dynamic));
    }
    // One function per address: the sized symbol with the plainest name (fewest leading
    // underscores, then shortest) is the name, the others are kept as aliases.
    let plainness = |f: &FunctionSymbol| (f.size == 0, f.name.len() - f.name.trim_start_matches('_').len(), f.name.len());
    funcs.sort_by(|a, b| a.address.cmp(&b.address).then_with(|| plainness(a).cmp(&plainness(b))));
    let mut merged: Vec<FunctionSymbol> = Vec::with_capacity(funcs.len());
    for f in funcs {
        match merged.last_mut() {
            Some(last) if last.address == f.address => {
                if !last.aliases.contains(&f.name) && last.name != f.name {
                    last.aliases.push(f.name);
                }
            }
            _ => merged.push(f),
        }
    }
    let mut funcs = merged;
    // Zero-sized symbols extend to the next symbol or the end of their section.
    for i in 0..funcs.len() {
        if funcs[i].size == 0 {
            let next = funcs.get(i + 1).map(|f| f.address);
            let section_end = code
                .iter()
                .find(|s| funcs[i].address >= s.address && funcs[i].address < s.address + s.size as u64)
                .map(|s| s.address + s.size as u64);
            let end = match (next, section_end) {
                (Some(n), Some(e)) => n.min(e),
                (Some(n), None) => n,
                (None, Some(e)) => e,
                (None, None) => funcs[i].address + 1,
            };
            funcs[i].size = end.saturating_sub(funcs[i].address).max(1);
        }
    }
    // With full static symbols the gaps are alignment padding; only a stripped binary needs
    // address-range pseudo functions so that every code address has a name.
    let mut gaps = Vec::new();
    for s in code.iter().filter(|_| !has_static) {
        let mut cursor = s.address;
        let end = s.address + s.size as u64;
        for f in funcs.iter().filter(|f| f.address >= s.address && f.address < end) {
            if f.address > cursor {
                gaps.push(gap(s, cursor, f.address));
            }
            cursor = cursor.max(f.address + f.size);
        }
        if cursor < end {
            gaps.push(gap(s, cursor, end));
        }
    }
    funcs.extend(gaps);
    funcs.sort_by_key(|f| f.address);
    funcs
}

fn gap(section: &CodeSection, start: u64, end: u64) -> FunctionSymbol {
    FunctionSymbol {
        name: format!("{}+0x{:x}", section.name, start - section.address),
        address: start,
        size: end - start,
        source: SymbolSource::AddressRange,
        aliases: Vec::new(),
    }
}
