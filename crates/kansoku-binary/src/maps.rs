//! Process memory maps: parsing `/proc/PID/maps` text into modules, and translating
//! between runtime addresses and link-time addresses of a program.

use kansoku_core::Module;

use crate::program::Program;

/// One line of `/proc/PID/maps`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Mapping {
    /// First address of the mapping.
    pub start: u64,
    /// One past its last address.
    pub end: u64,
    /// The permission letters as the kernel prints them (`r-xp`).
    pub perms: String,
    /// Offset in the file of the mapping's first byte.
    pub file_offset: u64,
    /// File path, pseudo name (`[heap]`, `[stack]`, `[vdso]`) or empty for anonymous memory.
    pub path: String,
}

impl Mapping {
    /// Whether the mapping holds code (the `x` permission).
    pub fn is_executable(&self) -> bool {
        self.perms.as_bytes().get(2) == Some(&b'x')
    }
}

/// Parses the text of `/proc/PID/maps`. Lines that do not parse are skipped: the kernel
/// writes this file, so a bad line means a kernel format we do not know, not user error.
pub fn parse_maps(text: &str) -> Vec<Mapping> {
    text.lines().filter_map(parse_line).collect()
}

fn parse_line(line: &str) -> Option<Mapping> {
    let mut fields = line.splitn(6, ' ');
    let range = fields.next()?;
    let perms = fields.next()?.to_string();
    let offset = u64::from_str_radix(fields.next()?, 16).ok()?;
    let _dev = fields.next()?;
    let _inode = fields.next()?;
    let path = fields.next().unwrap_or("").trim_start().to_string();
    let (s, e) = range.split_once('-')?;
    Some(Mapping {
        start: u64::from_str_radix(s, 16).ok()?,
        end: u64::from_str_radix(e, 16).ok()?,
        perms,
        file_offset: offset,
        path,
    })
}

/// The executable mappings as modules (code is what instruction addresses point into).
/// `build_id` is looked up per file by the caller-supplied function, so tests can stub it
/// and the probe can cache it.
pub fn code_modules(mappings: &[Mapping], mut build_id: impl FnMut(&str) -> Option<String>) -> Vec<Module> {
    mappings
        .iter()
        .filter(|m| m.is_executable() && !m.path.is_empty())
        .map(|m| Module {
            path: m.path.clone(),
            build_id: if m.path.starts_with('/') { build_id(&m.path) } else { None },
            start: m.start,
            end: m.end,
            file_offset: m.file_offset,
        })
        .collect()
}

/// Runtime address → link-time address of `program`, through the module it was mapped as.
pub fn link_address(module: &Module, program: &Program, runtime: u64) -> Option<u64> {
    if !module.contains(runtime) {
        return None;
    }
    program.vaddr_of_file_offset(runtime - module.start + module.file_offset)
}

/// Link-time address of `program` → runtime address, using whichever of `modules` maps
/// the file offset that holds it. `program_path` must match the modules' paths.
pub fn runtime_address(modules: &[Module], program: &Program, program_path: &str, vaddr: u64) -> Option<u64> {
    let offset = program.file_offset_of_vaddr(vaddr)?;
    modules
        .iter()
        .filter(|m| m.path == program_path)
        .find(|m| offset >= m.file_offset && offset < m.file_offset + (m.end - m.start))
        .map(|m| m.start + (offset - m.file_offset))
}

/// The module map entry for an object Valgrind mapped with its `.text` (link address
/// `svma`) at runtime address `avma`: it covers the object's file from offset 0 up to its
/// last code byte, with the same bias, so [`link_address`] works.
pub fn module_from_text(path: &str, svma: u64, avma: u64) -> Option<Module> {
    let program = Program::open(path).ok()?;
    let text_offset = program.file_offset_of_vaddr(svma)?;
    // runtime address of file offset 0, for the segment holding .text
    let start = avma.checked_sub(text_offset)?;
    let mut end_offset = text_offset + program.code_at(svma).map(|b| b.len() as u64).unwrap_or(0);
    for f in program.functions() {
        if let Some(o) = program.file_offset_of_vaddr(f.address + f.size.saturating_sub(1)) {
            end_offset = end_offset.max(o + 1);
        }
    }
    Some(Module { path: path.to_string(), build_id: program.build_id.clone(), start, end: start + end_offset, file_offset: 0 })
}

#[cfg(test)]
mod tests {
    use super::*;

    const MAPS: &str = "\
5581a0a00000-5581a0a01000 r--p 00000000 fe:01 1234 /usr/bin/prog
5581a0a01000-5581a0a02000 r-xp 00001000 fe:01 1234 /usr/bin/prog
5581a1000000-5581a1021000 rw-p 00000000 00:00 0 [heap]
7f00aa028000-7f00aa1bd000 r-xp 00028000 fe:01 99 /usr/lib/x86_64-linux-gnu/libc.so.6
7ffd5e9f6000-7ffd5e9f8000 r-xp 00000000 00:00 0 [vdso]
7ffd5e900000-7ffd5e921000 rw-p 00000000 00:00 0 [stack]
7f00aa300000-7f00aa301000 r-xp 00000000 fe:01 7 /tmp/with space (deleted)
";

    #[test]
    fn parses_and_keeps_code() {
        let maps = parse_maps(MAPS);
        assert_eq!(maps.len(), 7);
        assert_eq!(maps[2].path, "[heap]");
        let code = code_modules(&maps, |p| Some(format!("id:{p}")));
        let paths: Vec<&str> = code.iter().map(|m| m.path.as_str()).collect();
        assert_eq!(paths, vec!["/usr/bin/prog", "/usr/lib/x86_64-linux-gnu/libc.so.6", "[vdso]", "/tmp/with space (deleted)"]);
        assert_eq!(code[0].file_offset, 0x1000);
        assert_eq!(code[2].build_id, None);
    }
}
