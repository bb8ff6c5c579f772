//! The manifest: which command made which files of a results directory. `kansoku demo`
//! writes one; a directory without it gets each kind's usual command instead.

use serde::{Deserialize, Serialize};

use crate::ReportError;

/// The manifest's file name inside a results directory.
pub const MANIFEST_FILE: &str = "kansoku-manifest.json";

/// What made a results directory, step by step.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Manifest {
    /// Who wrote the directory (`kansoku demo 0.1.0`).
    pub made_by: String,
    pub steps: Vec<Step>,
}

/// One step: its commands and the files they wrote.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Step {
    pub title: String,
    /// Command lines that make the same files (the demo calls the same code directly).
    pub commands: Vec<String>,
    /// Paths relative to the directory; `dir/` stands for everything under `dir`, and
    /// one `*` for any run of characters (`tp-*.ktrace`).
    pub files: Vec<String>,
}

impl Manifest {
    /// Reads a manifest's JSON; `path` names the file in the error.
    pub fn from_json(path: &str, data: &[u8]) -> Result<Self, ReportError> {
        serde_json::from_slice(data).map_err(|e| ReportError::Manifest { path: path.to_string(), message: e.to_string() })
    }

    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).unwrap_or_default()
    }

    /// The step that made `file` (a relative path), the first one that names it.
    pub fn step_for(&self, file: &str) -> Option<&Step> {
        self.steps.iter().find(|s| s.files.iter().any(|p| pattern_matches(p, file)))
    }
}

fn pattern_matches(pattern: &str, path: &str) -> bool {
    if let Some(dir) = pattern.strip_suffix('/') {
        return path.strip_prefix(dir).is_some_and(|rest| rest.starts_with('/'));
    }
    match pattern.split_once('*') {
        Some((head, tail)) => path.len() >= head.len() + tail.len() && path.starts_with(head) && path.ends_with(tail),
        None => pattern == path,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterns_name_files_directories_and_families() {
        assert!(pattern_matches("paths.csv", "paths.csv"));
        assert!(!pattern_matches("paths.csv", "paths.csv.bak"));
        assert!(pattern_matches("monitor/", "monitor/kiviat.svg"));
        assert!(!pattern_matches("monitor/", "monitoring.txt"));
        assert!(pattern_matches("tp-*.ktrace", "tp-matrix.opt.ktrace"));
        assert!(!pattern_matches("tp-*.ktrace", "tp-.ktrac"));
    }

    #[test]
    fn a_broken_manifest_names_its_file() {
        let e = Manifest::from_json("d/kansoku-manifest.json", b"{\"steps\": 3}").unwrap_err();
        assert!(e.to_string().starts_with("d/kansoku-manifest.json: not a kansoku manifest"), "{e}");
    }
}
