//! ELF files: symbols, segments, bytes at virtual addresses, DWARF lines.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use object::{Object, ObjectSection, ObjectSegment, ObjectSymbol, ObjectSymbolTable, SectionKind, SymbolKind};
use serde::Serialize;

/// Why a program could not be opened or a function or address not found in it; every
/// variant names the file.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BinaryError {
    /// The file could not be read.
    #[error("cannot read {path}: {cause}")]
    Read {
        /// The program's path.
        path: PathBuf,
        /// The I/O error.
        cause: std::io::Error,
    },
    /// The file is not an ELF object the parser accepts.
    #[error("{path} is not an ELF program ({reason}); give the path of a compiled executable or shared library")]
    NotElf {
        /// The file's path.
        path: PathBuf,
        /// The ELF parser's message.
        reason: String,
    },
    /// An ELF file of another architecture.
    #[error("{path} is a {arch} binary; kansoku decodes x86-64 only")]
    WrongArchitecture {
        /// The program's path.
        path: PathBuf,
        /// The architecture the header names.
        arch: String,
    },
    /// No symbol of that name (the hint lists near names, or is empty).
    #[error("{path}: no function named '{name}'{hint}")]
    NoSuchFunction {
        /// The program's path.
        path: PathBuf,
        /// The name asked for.
        name: String,
        /// Text appended to the message: similar names, or how to list them.
        hint: String,
    },
    /// The address lies in no executable section.
    #[error("{path}: address 0x{addr:x} is not inside any loaded code")]
    AddressOutsideCode {
        /// The program's path.
        path: PathBuf,
        /// The link-time address asked for.
        addr: u64,
    },
}

/// Where a function's symbol came from, which says how far to trust its bounds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SymbolSource {
    /// `.symtab`: full static symbols.
    Static,
    /// `.dynsym` only (a stripped binary's exported functions).
    Dynamic,
    /// A stripped program's function found by its unwind entry (`.eh_frame` FDE); named
    /// `module+0xaddress` as perf names it.
    EhFrame,
    /// A PLT stub, named `symbol@plt` from the relocation of the GOT slot it jumps through.
    Plt,
    /// No symbol and no unwind entry: a stretch of an executable section between known
    /// functions that is not alignment padding, named `module+0xaddress`.
    AddressRange,
}

/// A function of the program, at its link-time (file virtual) address.
#[derive(Clone, Debug, Serialize)]
pub struct FunctionSymbol {
    /// The symbol's name as the file spells it (mangled; [`demangle`] for people),
    /// `memcpy@plt` for a PLT stub, `module+0xaddress` where there is no symbol.
    pub name: String,
    /// Link-time address of its first byte.
    pub address: u64,
    /// Size in bytes (0 when the symbol gives none).
    pub size: u64,
    /// Where the name and bounds came from.
    pub source: SymbolSource,
    /// Other names at the same address (e.g. `_IO_printf` for `printf`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub aliases: Vec<String>,
}

impl FunctionSymbol {
    /// Whether `addr` lies within the function (a size-0 symbol holds its one address).
    pub fn contains(&self, addr: u64) -> bool {
        addr >= self.address && addr < self.address.saturating_add(self.size.max(1))
    }
}

/// A source position from DWARF.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct SourceLine {
    /// The source file's path as DWARF gives it.
    pub file: String,
    /// Line number, from 1.
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

impl CodeSection {
    /// One past the last address (saturating: a corrupt header may put it past 2^64).
    fn end(&self) -> u64 {
        self.address.saturating_add(self.size as u64)
    }

    fn contains(&self, addr: u64) -> bool {
        addr >= self.address && addr < self.end()
    }
}

/// A parsed ELF program. Cheap to clone (shares its bytes).
#[derive(Clone)]
pub struct Program {
    path: PathBuf,
    data: Arc<Vec<u8>>,
    /// Position-independent (ET_DYN): loaded at a bias chosen at run time.
    pub is_pie: bool,
    /// The GNU build id in hex, when the file has one (matched against a recording's).
    pub build_id: Option<String>,
    /// Whether `.symtab` is present (not stripped): function bounds are exact.
    pub has_static_symbols: bool,
    /// The detached debug file whose symbols and lines name the functions of a stripped
    /// program (libc6-dbg's for libc), found by GNU build id or `.gnu_debuglink` as gdb,
    /// perf and valgrind find it ([`DEBUG_DIRECTORY`]).
    pub debug_file: Option<PathBuf>,
    /// The dynamic linker named in `PT_INTERP` (None: a static executable or a library).
    pub interpreter: Option<PathBuf>,
    /// The entry point (`e_entry`), a link-time address.
    pub entry: u64,
    functions: Vec<FunctionSymbol>,
    segments: Vec<LoadSegment>,
    code: Vec<CodeSection>,
    lines: std::rc::Rc<std::cell::OnceCell<Option<addr2line::Loader>>>,
}

impl std::fmt::Debug for Program {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Program").field("path", &self.path).field("functions", &self.functions.len()).finish()
    }
}

/// The largest program file read (the largest Debian shared libraries are a few hundred MB).
pub(crate) const MAX_PROGRAM_BYTES: u64 = 4 << 30;

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
        let interpreter = interpreter_of(&data);
        let entry = file.entry();
        let module = module_name(&path);
        let debug = if has_static_symbols { None } else { detached_debug(&path, &file, build_id.as_deref()) };
        let debug_object = debug.as_ref().and_then(|(_, bytes)| object::File::parse(&**bytes).ok());
        let functions = collect_functions(&file, &data, &code, has_static_symbols, debug_object.as_ref(), &module);
        let debug_file = debug_object.is_some().then(|| debug.map(|(p, _)| p)).flatten();
        Ok(Program {
            path,
            data: Arc::new(data),
            is_pie,
            build_id,
            has_static_symbols,
            debug_file,
            interpreter,
            entry,
            functions,
            segments,
            code,
            lines: std::rc::Rc::new(std::cell::OnceCell::new()),
        })
    }

    /// The file this program was opened from.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// `len` bytes of the file at link-time address `vaddr` (tables in `.rodata`), if
    /// they lie inside one loaded segment's file data.
    pub(crate) fn bytes_at(&self, vaddr: u64, len: usize) -> Option<&[u8]> {
        let s = self.segments.iter().find(|s| vaddr >= s.vaddr && vaddr - s.vaddr < s.file_size)?;
        let end_in_segment = (vaddr - s.vaddr).checked_add(len as u64)?;
        if end_in_segment > s.file_size {
            return None;
        }
        let start = usize::try_from(s.file_offset.checked_add(vaddr - s.vaddr)?).ok()?;
        self.data.get(start..start.checked_add(len)?)
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
    /// The resolver address of the GNU IFUNC symbol `name` (e.g. libc's `memcpy`): its
    /// implementation is chosen by the dynamic linker at run time, per machine.
    pub fn ifunc_named(&self, name: &str) -> Option<u64> {
        // any version: glibc keeps an old plain `memcpy@GLIBC_2.2.5` beside the default
        // `memcpy@@GLIBC_2.14`, an IFUNC, which is the one programs call
        let file = object::File::parse(&**self.data).ok()?;
        file.dynamic_symbols()
            .filter(|s| s.name() == Ok(name))
            .find(|s| matches!(s.flags(), object::SymbolFlags::Elf { st_info, .. } if st_info & 0xf == object::elf::STT_GNU_IFUNC))
            .map(|s| s.address())
    }

    /// The bytes of executable sections from link-time `addr` to the section's end;
    /// `None` outside code.
    pub fn code_at(&self, addr: u64) -> Option<&[u8]> {
        let s = self.code.iter().find(|s| s.contains(addr))?;
        let start = s.data_offset.checked_add(usize::try_from(addr - s.address).ok()?)?;
        self.data.get(start..s.data_offset.checked_add(s.size)?)
    }

    /// The code bytes of a function (clamped to its section).
    pub(crate) fn function_bytes(&self, f: &FunctionSymbol) -> Option<&[u8]> {
        let bytes = self.code_at(f.address)?;
        Some(&bytes[..(f.size as usize).min(bytes.len())])
    }

    /// The name of the executable section holding `addr`, e.g. `.text` or `.plt`.
    pub fn section_name(&self, addr: u64) -> Option<&str> {
        self.code.iter().find(|s| s.contains(addr)).map(|s| s.name.as_str())
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
        let loader = self.lines.get_or_init(|| addr2line::Loader::new(self.debug_file.as_ref().unwrap_or(&self.path)).ok()).as_ref()?;
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

fn module_name(path: &Path) -> String {
    path.file_name().map_or_else(|| path.display().to_string(), |n| n.to_string_lossy().into_owned())
}

/// Functions from `.symtab` (or `.dynsym` when stripped) and PLT stubs, deduplicated, with
/// sizes filled in for zero-sized symbols. A stripped program adds one function per
/// `.eh_frame` FDE, and the remaining gaps of executable sections that are not alignment
/// padding become address-range pseudo functions, so every code address has a name.
/// The path in the `PT_INTERP` program header, if there is one.
fn interpreter_of(data: &[u8]) -> Option<PathBuf> {
    use object::read::elf::{ElfFile64, ProgramHeader};
    let elf = ElfFile64::<object::Endianness>::parse(data).ok()?;
    let endian = elf.endian();
    let header = elf.elf_program_headers().iter().find(|h| h.p_type(endian) == object::elf::PT_INTERP)?;
    let bytes = header.data(endian, data).ok()?;
    let path = bytes.split(|&b| b == 0).next()?;
    Some(PathBuf::from(std::str::from_utf8(path).ok()?))
}

fn collect_functions(file: &object::File, data: &[u8], code: &[CodeSection], has_static: bool, debug: Option<&object::File>, module: &str) -> Vec<FunctionSymbol> {
    // A detached debug file's `.symtab` is the stripped program's own, at its addresses.
    let (symbols, has_static) = match debug {
        Some(d) => (symbol_functions(d, true), true),
        None => (symbol_functions(file, has_static), has_static),
    };
    let mut funcs = merge_aliases(symbols);
    add_unless_covered(&mut funcs, plt_functions(file, data));
    if !has_static {
        let unwind = crate::unwind::fde_ranges(&eh_frame_input(file, data));
        add_unless_covered(&mut funcs, unwind.into_iter().map(|(address, size)| unnamed(module, address, size, SymbolSource::EhFrame)).collect());
    }
    fill_zero_sizes(&mut funcs, code);
    // With full static symbols the gaps are alignment padding; only a stripped binary needs
    // address-range pseudo functions so that every code address has a name.
    if !has_static {
        let gaps = code_gaps(&funcs, code, data, module);
        funcs.extend(gaps);
        funcs.sort_by_key(|f| f.address);
    }
    funcs
}

fn symbol_functions(file: &object::File, has_static: bool) -> Vec<FunctionSymbol> {
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
    funcs
}

/// One function per address: among the sized symbols the name is the one Valgrind picks
/// (storage.c, `preferName`), so that names agree with Callgrind's: the shortest up to its
/// version (`@`), then a versioned one, then the first in byte order
/// (`_IO_file_underflow@@GLIBC_2.2.5` over `_IO_new_file_underflow`, `__getdents` over
/// `getdents64`); the others are kept as aliases.
fn merge_aliases(mut funcs: Vec<FunctionSymbol>) -> Vec<FunctionSymbol> {
    let preference = |f: &FunctionSymbol| {
        let unversioned = f.name.split('@').next().unwrap_or("").len();
        (f.size == 0, unversioned, !f.name.contains('@'))
    };
    funcs.sort_by(|a, b| a.address.cmp(&b.address).then_with(|| preference(a).cmp(&preference(b))).then_with(|| a.name.cmp(&b.name)));
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
    merged
}

/// Adds `extra` functions (PLT stubs, then FDE ranges) where no known function says more:
/// one starting at a symbol's address only lends its size to a zero-sized symbol; one
/// overlapping a known function is part of it (or, like the linker's FDE for all of
/// `.plt`, spans several) and is dropped.
fn add_unless_covered(funcs: &mut Vec<FunctionSymbol>, mut extra: Vec<FunctionSymbol>) {
    extra.sort_by_key(|f| f.address);
    extra.dedup_by_key(|f| f.address);
    let known = funcs.len();
    for e in extra {
        let i = funcs[..known].partition_point(|f| f.address <= e.address);
        if let Some(k) = i.checked_sub(1).filter(|&k| funcs[k].address == e.address) {
            if funcs[k].size == 0 {
                funcs[k].size = e.size;
            }
            continue;
        }
        let before = i.checked_sub(1).is_some_and(|k| funcs[k].size > 0 && funcs[k].contains(e.address));
        let after = funcs[..known].get(i).is_some_and(|next| next.address < e.address.saturating_add(e.size));
        if !before && !after {
            funcs.push(e);
        }
    }
    funcs.sort_by_key(|f| f.address);
}

/// Zero-sized symbols extend to the next function or the end of their section.
fn fill_zero_sizes(funcs: &mut [FunctionSymbol], code: &[CodeSection]) {
    for i in 0..funcs.len() {
        if funcs[i].size == 0 {
            let next = funcs.get(i + 1).map(|f| f.address);
            let section_end = code
                .iter()
                .find(|s| s.contains(funcs[i].address))
                .map(CodeSection::end);
            let end = match (next, section_end) {
                (Some(n), Some(e)) => n.min(e),
                (Some(n), None) => n,
                (None, Some(e)) => e,
                (None, None) => funcs[i].address.saturating_add(1),
            };
            funcs[i].size = end.saturating_sub(funcs[i].address).max(1);
        }
    }
}

/// Stretches of executable sections outside every function, with alignment padding
/// trimmed off; stretches that are only padding are no function at all.
fn code_gaps(funcs: &[FunctionSymbol], code: &[CodeSection], data: &[u8], module: &str) -> Vec<FunctionSymbol> {
    let mut gaps = Vec::new();
    for s in code {
        let end = s.end();
        let mut cursor = s.address;
        let mut push = |from: u64, to: u64| {
            let offset = s.data_offset.saturating_add((from - s.address) as usize);
            let bytes = data.get(offset..offset.saturating_add((to - from) as usize)).unwrap_or(&[]);
            for (a, b) in gap_pieces(bytes, from) {
                gaps.push(unnamed(module, a, b - a, SymbolSource::AddressRange));
            }
        };
        for f in funcs.iter().filter(|f| f.address >= s.address && f.address < end) {
            if f.address > cursor {
                push(cursor, f.address);
            }
            cursor = cursor.max(f.address.saturating_add(f.size));
        }
        if cursor < end {
            push(cursor, end);
        }
    }
    gaps
}

/// A gap's pseudo functions grow to this size before they are cut where functions part.
const GAP_PIECE: u64 = 64 << 10;
/// ... and are cut at any end of the flow past this size, padding or not.
const GAP_PIECE_MAX: u64 = 1 << 20;

/// The parts of `bytes` (at `ip`) between leading and trailing runs of `nop` (any length)
/// and `int3`, which compilers and linkers put between functions to align them. A gap
/// larger than [`GAP_PIECE`] is cut into pieces where functions part: after an end of the
/// flow (`ret`, `jmp`, `ud2`, `hlt`) and the padding after it (anywhere past
/// [`GAP_PIECE_MAX`]). A stripped program without unwind tables (Go's, most of
/// Chromium's text) was one gap of tens of megabytes, a pseudo function whose CFG took
/// minutes and gigabytes to build; its pieces are now about the size of functions.
fn gap_pieces(bytes: &[u8], ip: u64) -> Vec<(u64, u64)> {
    use iced_x86::{Decoder, DecoderOptions, FlowControl, Instruction, Mnemonic};
    let mut decoder = Decoder::with_ip(64, bytes, ip, DecoderOptions::NONE);
    let mut pieces = Vec::new();
    let mut instruction = Instruction::default();
    // the piece so far: its start, the end of its last instruction that is not padding,
    // whether that instruction ended the flow, and whether padding came after it
    let (mut start, mut end, mut stopped, mut padded) = (None::<u64>, 0u64, false, false);
    while decoder.can_decode() {
        decoder.decode_out(&mut instruction);
        if matches!(instruction.mnemonic(), Mnemonic::Nop | Mnemonic::Int3) {
            padded |= start.is_some();
            continue;
        }
        if let Some(s) = start {
            let long = end - s;
            if stopped && ((padded && long >= GAP_PIECE) || long >= GAP_PIECE_MAX) {
                pieces.push((s, end));
                start = None;
            }
        }
        start.get_or_insert(instruction.ip());
        end = instruction.next_ip();
        stopped = matches!(instruction.flow_control(), FlowControl::Return | FlowControl::UnconditionalBranch | FlowControl::IndirectBranch | FlowControl::Exception)
            || instruction.mnemonic() == Mnemonic::Hlt;
        padded = false;
    }
    pieces.extend(start.map(|s| (s, end)));
    pieces
}

fn unnamed(module: &str, address: u64, size: u64, source: SymbolSource) -> FunctionSymbol {
    FunctionSymbol { name: format!("{module}+0x{address:x}"), address, size, source, aliases: Vec::new() }
}

/// Where distributions install detached debug files (Debian's `-dbg` and `-dbgsym`
/// packages, Fedora's debuginfo): gdb's default `debug-file-directory`.
pub(crate) const DEBUG_DIRECTORY: &str = "/usr/lib/debug";

/// The largest detached debug file read (libLLVM's is over a gigabyte).
const MAX_DEBUG_BYTES: u64 = 2 << 30;

/// A stripped program's detached debug file, looked up as gdb does: by build id
/// (`DEBUG_DIRECTORY/.build-id/xx/rest.debug`), then by `.gnu_debuglink` beside the
/// program, in its `.debug/` directory and under `DEBUG_DIRECTORY` by its directory. A
/// file found is used only if it has the program's build id, or, when the program has
/// none, the CRC-32 the link names (a stale debug file would name the wrong functions).
fn detached_debug(path: &Path, file: &object::File, build_id: Option<&str>) -> Option<(PathBuf, Vec<u8>)> {
    let debug = Path::new(DEBUG_DIRECTORY);
    let mut candidates = Vec::new();
    if let Some(id) = build_id.filter(|id| id.len() > 2) {
        candidates.push(debug.join(".build-id").join(&id[..2]).join(format!("{}.debug", &id[2..])));
    }
    let link = file.gnu_debuglink().ok().flatten();
    if let Some((name, _)) = link {
        let name = Path::new(std::str::from_utf8(name).ok()?);
        let dir = path.parent().unwrap_or(Path::new("/"));
        candidates.push(dir.join(name));
        candidates.push(dir.join(".debug").join(name));
        candidates.push(debug.join(dir.strip_prefix("/").unwrap_or(dir)).join(name));
    }
    candidates.into_iter().filter(|c| c.as_path() != path).find_map(|c| {
        let bytes = kansoku_core::input::read_regular(&c, MAX_DEBUG_BYTES).ok()?;
        let debug_file = object::File::parse(&*bytes).ok()?;
        let matches = match build_id {
            Some(id) => debug_file.build_id().ok().flatten().map(hex).as_deref() == Some(id),
            None => link.is_some_and(|(_, crc)| crc32(&bytes) == crc),
        };
        matches.then_some((c, bytes))
    })
}

/// The CRC-32 (IEEE, reflected) that `.gnu_debuglink` records of its debug file.
fn crc32(bytes: &[u8]) -> u32 {
    let mut table = [0u32; 256];
    for (i, t) in table.iter_mut().enumerate() {
        *t = (0..8).fold(i as u32, |c, _| if c & 1 != 0 { 0xedb8_8320 ^ (c >> 1) } else { c >> 1 });
    }
    !bytes.iter().fold(!0u32, |c, &b| table[((c ^ u32::from(b)) & 0xff) as usize] ^ (c >> 8))
}

/// Where `.eh_frame` is and the bases its pointer encodings may be relative to.
fn eh_frame_input<'a>(file: &object::File, data: &'a [u8]) -> crate::unwind::EhFrameInput<'a> {
    let section_address = |name: &str| file.section_by_name(name).map(|s| s.address());
    let (eh_frame, eh_frame_address) = file
        .section_by_name(".eh_frame")
        .and_then(|s| {
            let (offset, size) = s.file_range()?;
            let bytes = data.get(usize::try_from(offset).ok()?..usize::try_from(offset.checked_add(size)?).ok()?)?;
            Some((bytes, s.address()))
        })
        .unwrap_or((&[], 0));
    crate::unwind::EhFrameInput {
        eh_frame,
        eh_frame_address,
        text_address: section_address(".text").unwrap_or(0),
        got_address: section_address(".got"),
    }
}

/// Named PLT stubs of every `.plt*` section: GOT slot → symbol from the dynamic
/// relocations (`.rela.plt` jump slots, `.rela.dyn` GLOB_DAT for `.plt.got`).
fn plt_functions(file: &object::File, data: &[u8]) -> Vec<FunctionSymbol> {
    let object::File::Elf64(elf) = file else { return Vec::new() };
    let mut slot_names = std::collections::HashMap::new();
    if let (Some(relocations), Some(symbols)) = (file.dynamic_relocations(), file.dynamic_symbol_table()) {
        for (slot, r) in relocations {
            if let object::RelocationTarget::Symbol(index) = r.target() {
                if let Some(name) = symbols.symbol_by_index(index).ok().and_then(|s| s.name().ok().map(str::to_string)) {
                    if !name.is_empty() {
                        slot_names.insert(slot, name);
                    }
                }
            }
        }
    }
    let mut stubs = Vec::new();
    for section in elf.sections() {
        use object::read::elf::SectionHeader;
        if !section.name().is_ok_and(|n| n.starts_with(".plt")) {
            continue;
        }
        let Some((offset, size)) = section.file_range() else { continue };
        let Some(bytes) = usize::try_from(offset).ok().and_then(|o| data.get(o..o.checked_add(usize::try_from(size).ok()?)?)) else { continue };
        let entry_size = section.elf_section_header().sh_entsize(elf.endian());
        let plt = crate::plt::PltSection { address: section.address(), bytes, entry_size };
        for (address, size, name) in crate::plt::plt_stubs(&plt, &slot_names) {
            stubs.push(FunctionSymbol { name, address, size, source: SymbolSource::Plt, aliases: Vec::new() });
        }
    }
    stubs
}

#[cfg(test)]
mod tests {
    #[test]
    fn crc32_is_the_ieee_checksum_debuglink_records() {
        // the standard check value of CRC-32/ISO-HDLC, which binutils' `--add-gnu-debuglink` uses
        assert_eq!(super::crc32(b"123456789"), 0xcbf4_3926);
        assert_eq!(super::crc32(b""), 0);
    }

    /// A gap of code without unwind entries (a stripped Go program's text) is cut where its
    /// functions part once it is past 64 KiB; a small one stays one range, padding trimmed.
    #[test]
    fn a_huge_gap_is_cut_into_pieces_where_functions_part() {
        // a function: `xor eax, eax; inc eax; ret` (5 bytes), then int3 padding to 16 bytes
        let function: Vec<u8> = [0x31, 0xc0, 0xff, 0xc0, 0xc3].into_iter().chain([0xcc; 11]).collect();
        let small: Vec<u8> = [0x90, 0x90].into_iter().chain(function.iter().copied().cycle().take(16 * 4)).collect();
        assert_eq!(super::gap_pieces(&small, 0x1000), vec![(0x1002, 0x1002 + 16 * 3 + 5)]);
        let huge: Vec<u8> = function.iter().copied().cycle().take(16 * 20_000).collect();
        let pieces = super::gap_pieces(&huge, 0x10000);
        assert!(pieces.len() >= 4, "{} pieces", pieces.len());
        for (k, &(start, end)) in pieces.iter().enumerate() {
            assert_eq!((start - 0x10000) % 16, 0, "piece {k} starts at a function");
            assert_eq!((end - 0x10000) % 16, 5, "piece {k} ends after a ret");
            assert!(end - start <= super::GAP_PIECE + 16, "piece {k}: {} bytes", end - start);
        }
        assert_eq!((pieces[0].0, pieces.last().unwrap().1), (0x10000, 0x10000 + 16 * 19_999 + 5));
    }
}
