//! Runtime addresses → locations, through a recording's module map.

use std::collections::HashMap;
use std::sync::Arc;

use kansoku_core::{Location, Module};

use crate::cfg::FunctionCfg;
use crate::maps::link_address;
use crate::program::{demangle, Program, SourceLine};

/// Where a runtime address resolved to, before it is turned into a [`Location`].
#[derive(Clone, Debug)]
pub struct Resolved {
    /// Index of the module in the recording's module map.
    pub module: usize,
    /// Link-time address inside the module's file.
    pub link_address: u64,
    /// The decoded function holding it, when the module's file has one there.
    pub function: Option<Arc<FunctionCfg>>,
}

/// What [`Symbolizer::name`] finds: [`Resolved`] without the function's CFG.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Named {
    /// Index of the module in the recording's module map.
    pub module: usize,
    /// Link-time address inside the module's file.
    pub link_address: u64,
    /// The function's name, when a symbol covers the address.
    pub function: Option<String>,
}

/// Symbolises runtime addresses of one recording. Programs are opened lazily once per
/// path, functions decoded once each, and the last function is remembered, so streaming
/// millions of addresses costs a range check and a binary search each.
pub struct Symbolizer {
    modules: Vec<Module>,
    /// (start address, module index): the last module starting at or below an address is
    /// the one to check (a later module mapped at the same start wins). A set, not a sorted
    /// vector, so that a recording with 100 k Module events loads in n log n.
    by_start: std::collections::BTreeSet<(u64, usize)>,
    programs: HashMap<String, Option<Program>>,
    functions: HashMap<(usize, u64), Arc<FunctionCfg>>,
    last: Option<(usize, u64, u64, Arc<FunctionCfg>)>,
    /// Problems worth telling the user once (missing files, build-id mismatches).
    pub warnings: Vec<String>,
}

impl Symbolizer {
    /// A symbolizer over a recording's modules (more can be added as they appear).
    pub fn new(modules: &[Module]) -> Self {
        let mut s = Symbolizer {
            modules: Vec::new(),
            by_start: Default::default(),
            programs: HashMap::new(),
            functions: HashMap::new(),
            last: None,
            warnings: Vec::new(),
        };
        for m in modules {
            s.add_module(m.clone());
        }
        s
    }

    /// Adds a module that appeared later in the recording (e.g. after `dlopen`).
    pub fn add_module(&mut self, module: Module) {
        self.by_start.insert((module.start, self.modules.len()));
        self.modules.push(module);
    }

    /// The module map, in the order modules were added (the indices of [`Resolved`]).
    pub fn modules(&self) -> &[Module] {
        &self.modules
    }

    /// The module index holding `addr`.
    pub fn module_of(&self, addr: u64) -> Option<usize> {
        let &(_, m) = self.by_start.range(..=(addr, usize::MAX)).next_back()?;
        self.modules[m].contains(addr).then_some(m)
    }

    /// The parsed program behind module `index`, if its file can be read.
    pub fn program(&mut self, index: usize) -> Option<&Program> {
        let module = &self.modules[index];
        if !self.programs.contains_key(&module.path) {
            let loaded = if module.path.starts_with('/') {
                match Program::open(&module.path) {
                    Ok(p) => {
                        if let (Some(want), Some(have)) = (&module.build_id, &p.build_id) {
                            if want != have {
                                self.warnings.push(format!(
                                    "{}: build id {have} differs from the recorded {want}; symbols may be wrong (was the program rebuilt?)",
                                    module.path
                                ));
                            }
                        }
                        Some(p)
                    }
                    Err(e) => {
                        self.warnings.push(format!("cannot read symbols: {e}"));
                        None
                    }
                }
            } else {
                None
            };
            self.programs.insert(module.path.clone(), loaded);
        }
        self.programs.get(&self.modules[index].path).and_then(|p| p.as_ref())
    }

    /// Resolves a runtime address to its module, link-time address and function CFG.
    pub fn resolve(&mut self, addr: u64) -> Option<Resolved> {
        if let Some((m, lo, hi, cfg)) = &self.last {
            if addr >= *lo && addr < *hi {
                let module = *m;
                let link = link_address(&self.modules[module], self.programs[&self.modules[module].path].as_ref()?, addr)?;
                return Some(Resolved { module, link_address: link, function: Some(cfg.clone()) });
            }
        }
        let module = self.module_of(addr)?;
        // borrowed field by field, not cloned: a program holds every function's symbol
        self.program(module)?;
        let program = self.programs.get(&self.modules[module].path)?.as_ref()?;
        let link = link_address(&self.modules[module], program, addr)?;
        let Some(symbol) = program.function_at(link) else {
            return Some(Resolved { module, link_address: link, function: None });
        };
        let cfg = self
            .functions
            .entry((module, symbol.address))
            .or_insert_with(|| Arc::new(FunctionCfg::build(program, symbol)))
            .clone();
        let lo = addr - (link - symbol.address);
        self.last = Some((module, lo, lo + symbol.size, cfg.clone()));
        Some(Resolved { module, link_address: link, function: Some(cfg) })
    }

    /// The module, link-time address and function name of a runtime address, from the
    /// symbol (or unwind entry) that holds it: no decoding, for callers that only name
    /// addresses (a sampling monitor names every sample, and a CFG of a large function
    /// costs milliseconds). `function` is `None` outside every known function.
    pub fn name(&mut self, addr: u64) -> Option<Named> {
        let module = self.module_of(addr)?;
        self.program(module)?;
        let program = self.programs.get(&self.modules[module].path)?.as_ref()?;
        let link = link_address(&self.modules[module], program, addr)?;
        let function = program.function_at(link).map(|f| f.name.clone());
        Some(Named { module, link_address: link, function })
    }

    /// The location of a runtime address: function, instruction offset, block and offset
    /// in block. Addresses outside known functions get a `module+0xoffset` name.
    pub fn locate(&mut self, addr: u64) -> Location {
        let Some(r) = self.resolve(addr) else {
            let function = match self.module_of(addr) {
                Some(m) => format!("{}+0x{:x}", self.modules[m].short_name(), addr - self.modules[m].start + self.modules[m].file_offset),
                None => format!("0x{addr:x}"),
            };
            return Location { module: self.module_of(addr), function, offset: 0, block: None, block_offset: None };
        };
        let Some(cfg) = r.function else {
            let m = &self.modules[r.module];
            return Location {
                module: Some(r.module),
                function: format!("{}+0x{:x}", m.short_name(), r.link_address),
                offset: 0,
                block: None,
                block_offset: None,
            };
        };
        let name = demangle(&cfg.name);
        match cfg.instruction_containing(r.link_address) {
            Some(i) => {
                let block = cfg.block_of_instruction(i);
                Location {
                    module: Some(r.module),
                    function: name,
                    offset: i as u32,
                    block: block.map(|b| b.index),
                    block_offset: block.map(|b| (i - b.first_instruction) as u32),
                }
            }
            None => Location { module: Some(r.module), function: name, offset: 0, block: None, block_offset: None },
        }
    }

    /// Source line of a runtime address, when its program has DWARF.
    pub fn source_line(&mut self, addr: u64) -> Option<SourceLine> {
        let module = self.module_of(addr)?;
        self.program(module)?;
        let program = self.programs.get(&self.modules[module].path)?.as_ref()?;
        let link = link_address(&self.modules[module], program, addr)?;
        program.source_line(link)
    }
}
