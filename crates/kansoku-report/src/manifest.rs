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
    /// The steps in the order they ran.
    pub steps: Vec<Step>,
}

/// One step: its commands and the files they wrote.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Step {
    /// The step's heading on the page (`Seed 003 — path profiling`).
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

    /// The manifest as pretty JSON, as [`Manifest::from_json`] reads it back.
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).unwrap_or_default()
    }

    /// The step that made `file` (a relative path), the first one that names it.
    pub fn step_for(&self, file: &str) -> Option<&Step> {
        self.steps.iter().find(|s| s.files.iter().any(|p| pattern_matches(p, file)))
    }
}

impl Step {
    /// The commands of the step that write `file`: named after `-o`, `>`, `--svg` or
    /// `--xlat-out`; else those that name it; else all (the file is written implicitly).
    pub fn commands_for(&self, file: &str) -> Vec<&str> {
        let writes: Vec<&str> = self.commands.iter().map(String::as_str).filter(|c| names(c, file, true)).collect();
        if !writes.is_empty() {
            return writes;
        }
        let mentions: Vec<&str> = self.commands.iter().map(String::as_str).filter(|c| names(c, file, false)).collect();
        if !mentions.is_empty() {
            return mentions;
        }
        self.commands.iter().map(String::as_str).collect()
    }
}

/// Whether `command` names `file` (as a whole path component at the end of a word), and,
/// with `as_output`, right after an option that writes it.
fn names(command: &str, file: &str, as_output: bool) -> bool {
    command.match_indices(file).any(|(at, _)| {
        let before = &command[..at];
        let word_start = before.is_empty() || before.ends_with(['/', ' ']);
        let after = command[at + file.len()..].chars().next();
        let word_end = matches!(after, None | Some(' ') | Some(')'));
        let word = before.rsplit(' ').next().unwrap_or("");
        let option = before[..before.len() - word.len()].trim_end().rsplit(' ').next().unwrap_or("");
        word_start && word_end && (!as_output || matches!(option, "-o" | ">" | "--svg" | "--xlat-out"))
    })
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
    fn a_file_gets_the_commands_that_write_it() {
        let step = Step {
            title: "t".into(),
            commands: vec!["kansoku trace exact -o d/x-200.ksk -- p".into(), "kansoku sample d/x-200.ksk -o d/x-p7.ksk (and -o d/x-p101.ksk)".into(), "kansoku wave --svg d/w.svg".into()],
            files: vec![],
        };
        assert_eq!(step.commands_for("x-200.ksk"), [step.commands[0].as_str()]);
        assert_eq!(step.commands_for("x-p101.ksk"), [step.commands[1].as_str()]);
        assert_eq!(step.commands_for("w.svg"), [step.commands[2].as_str()]);
        assert_eq!(step.commands_for("w-acf.svg").len(), 3, "written implicitly: all");
        assert_eq!(step.commands_for("p").len(), 1, "named, not written");
    }

    #[test]
    fn a_broken_manifest_names_its_file() {
        let e = Manifest::from_json("d/kansoku-manifest.json", b"{\"steps\": 3}").unwrap_err();
        assert!(e.to_string().starts_with("d/kansoku-manifest.json: not a kansoku manifest"), "{e}");
    }
}
