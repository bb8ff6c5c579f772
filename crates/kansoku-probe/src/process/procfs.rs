//! Readers of `/proc/PID/...`.

use std::collections::HashMap;

use kansoku_binary::maps::{code_modules, parse_maps, Mapping};
use kansoku_core::Module;

use crate::ProbeError;

/// The process's memory mappings.
pub(crate) fn read_maps(pid: i32) -> Result<Vec<Mapping>, ProbeError> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/maps")).map_err(|source| ProbeError::Proc { pid, file: "maps", cause: source })?;
    Ok(parse_maps(&text))
}

/// Reads executable mappings as modules, remembering build ids per file.
#[derive(Default)]
pub(crate) struct ModuleReader {
    build_ids: HashMap<String, Option<String>>,
}

impl ModuleReader {
    /// The executable file mappings of process `pid` as modules, each with its file's build
    /// id (read once per file path and remembered).
    pub fn code_modules(&mut self, pid: i32) -> Result<Vec<Module>, ProbeError> {
        let maps = read_maps(pid)?;
        Ok(code_modules(&maps, |path| {
            self.build_ids
                .entry(path.to_string())
                .or_insert_with(|| kansoku_binary::Program::open(path).ok().and_then(|p| p.build_id))
                .clone()
        }))
    }
}
