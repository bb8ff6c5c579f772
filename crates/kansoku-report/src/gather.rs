//! Reading a results directory, bounded: its files are outside input. Only regular files
//! are read (a FIFO or device would block or never end), symbolic links to directories
//! are not followed (a loop), and only a prefix of each file is read, within a total
//! budget: a huge file costs its prefix, not the machine's memory.

use std::io::Read;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use crate::{Manifest, ReportError, MANIFEST_FILE};

/// How much of a directory is read.
#[derive(Debug, Clone)]
pub struct Limits {
    /// Files listed at most; the rest are counted in a note.
    pub max_files: usize,
    /// Directory levels below the top that are walked.
    pub max_depth: usize,
    /// Bytes read of a picture (an SVG is shown whole or not at all).
    pub picture_bytes: u64,
    /// Bytes read of a JSON or CSV file (a cut JSON file cannot be parsed into tables).
    pub table_bytes: u64,
    /// Bytes read of any other file (text is shown up to a smaller limit anyway).
    pub other_bytes: u64,
    /// Bytes read of all files together; later files are listed without content.
    pub total_bytes: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Limits { max_files: 2000, max_depth: 6, picture_bytes: 8 << 20, table_bytes: 4 << 20, other_bytes: 256 << 10, total_bytes: 96 << 20 }
    }
}

/// One file of the directory.
#[derive(Debug, Clone, Default)]
pub struct Found {
    /// Relative to the directory, `/`-separated (lossy where the name is not UTF-8).
    pub path: String,
    /// The file's size on disk.
    pub size: u64,
    /// The bytes read: all of the file when `complete`, else a prefix.
    pub data: Vec<u8>,
    pub complete: bool,
    /// Why the file could not be read, if it could not.
    pub error: Option<String>,
}

/// What [`gather`] found.
#[derive(Debug, Clone, Default)]
pub struct Gathered {
    pub files: Vec<Found>,
    pub manifest: Option<Manifest>,
    /// What was skipped or could not be read, said once each.
    pub notes: Vec<String>,
}

/// Reads `dir` within `limits`. `exclude` names files not to list (the page itself, when
/// it is written into the directory it shows). The manifest is read, not listed.
pub fn gather(dir: &Path, exclude: &[PathBuf], limits: &Limits) -> Result<Gathered, ReportError> {
    let excluded: Vec<(u64, u64)> = exclude.iter().filter_map(|p| std::fs::metadata(p).ok()).map(|m| (m.dev(), m.ino())).collect();
    let mut paths = Vec::new();
    let mut g = Gathered::default();
    walk(dir, "", 0, limits, &excluded, &mut paths, &mut g.notes).map_err(|source| ReportError::Directory { path: dir.display().to_string(), source })?;
    paths.sort();
    if paths.len() > limits.max_files {
        g.notes.push(format!("{} files found; the first {} (by name) are listed", paths.len(), limits.max_files));
        paths.truncate(limits.max_files);
    }
    let mut budget = limits.total_bytes;
    for (relative, full, size) in paths {
        if relative == MANIFEST_FILE {
            // a broken manifest costs the commands, not the page
            match read_prefix(&full, limits.table_bytes).map_err(|e| e.to_string()).and_then(|(data, _)| Manifest::from_json(&full.display().to_string(), &data).map_err(|e| e.to_string())) {
                Ok(m) => g.manifest = Some(m),
                Err(e) => g.notes.push(format!("the manifest was not read, so no file names its command: {e}")),
            }
            continue;
        }
        let want = read_limit(&relative, limits).min(budget);
        let mut found = Found { path: relative, size, ..Found::default() };
        match read_prefix(&full, want) {
            Ok((data, complete)) => {
                budget -= data.len() as u64;
                found.complete = complete && data.len() as u64 == size;
                found.data = data;
            }
            Err(e) => found.error = Some(e.to_string()),
        }
        g.files.push(found);
    }
    if budget == 0 {
        g.notes.push(format!("the {} bytes read in all were used up: later files are listed without their content", limits.total_bytes));
    }
    Ok(g)
}

type Listed = (String, PathBuf, u64);

fn walk(dir: &Path, prefix: &str, depth: usize, limits: &Limits, excluded: &[(u64, u64)], out: &mut Vec<Listed>, notes: &mut Vec<String>) -> std::io::Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let name = entry.file_name().to_string_lossy().into_owned();
        let relative = if prefix.is_empty() { name } else { format!("{prefix}/{name}") };
        let path = entry.path();
        let Ok(link) = std::fs::symlink_metadata(&path) else { continue };
        if link.is_dir() {
            if depth + 1 < limits.max_depth {
                if let Err(e) = walk(&path, &relative, depth + 1, limits, excluded, out, notes) {
                    notes.push(format!("{}: not read: {e}", path.display()));
                }
            } else {
                notes.push(format!("{relative}/: deeper than {} levels, not read", limits.max_depth));
            }
            continue;
        }
        // A link is followed only to a regular file.
        match std::fs::metadata(&path) {
            Ok(m) if m.is_file() => {
                if !excluded.contains(&(m.dev(), m.ino())) {
                    out.push((relative, path, m.len()));
                }
            }
            Ok(m) if m.is_dir() => notes.push(format!("{relative}: a link to a directory, not followed")),
            Ok(_) => notes.push(format!("{relative}: not a regular file (a device, FIFO or socket), not read")),
            Err(e) => notes.push(format!("{relative}: {e}")),
        }
    }
    Ok(())
}

/// How much of a file to read, by what the page does with it.
fn read_limit(relative: &str, limits: &Limits) -> u64 {
    let name = relative.to_ascii_lowercase();
    let ext = name.rsplit_once('.').map_or("", |(_, e)| e);
    match ext {
        "svg" => limits.picture_bytes,
        "json" | "csv" => limits.table_bytes,
        // binary: enough to tell the kind
        "ksk" | "wasm" | "ktrace" | "gz" | "so" | "o" => 4096,
        _ if relative.starts_with("bin/") && !name.ends_with(".c") => 4096,
        _ => limits.other_bytes,
    }
}

/// The first `max` bytes of a regular file, and whether that was all of it. Opened
/// without blocking, in case the file was replaced by a FIFO since it was listed.
fn read_prefix(path: &Path, max: u64) -> std::io::Result<(Vec<u8>, bool)> {
    let file = std::fs::OpenOptions::new().read(true).custom_flags(libc_o_nonblock()).open(path)?;
    let mut data = Vec::new();
    file.take(max.saturating_add(1)).read_to_end(&mut data)?;
    let complete = data.len() as u64 <= max;
    data.truncate(max as usize);
    Ok((data, complete))
}

/// `O_NONBLOCK` on Linux (x86-64 and arm64 alike), without a libc dependency.
const fn libc_o_nonblock() -> i32 {
    0o4000
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefixes_budget_exclusions_and_fifos() {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(d.path().join("a.txt"), "x".repeat(100)).unwrap();
        std::fs::create_dir(d.path().join("sub")).unwrap();
        std::fs::write(d.path().join("sub/b.svg"), "<svg/>").unwrap();
        std::fs::write(d.path().join("index.html"), "old page").unwrap();
        std::os::unix::fs::symlink(d.path(), d.path().join("loop")).unwrap();
        let fifo = d.path().join("fifo");
        assert!(std::process::Command::new("mkfifo").arg(&fifo).status().unwrap().success());
        let limits = Limits { other_bytes: 10, ..Limits::default() };
        let g = gather(d.path(), &[d.path().join("index.html")], &limits).unwrap();
        let names: Vec<_> = g.files.iter().map(|f| f.path.as_str()).collect();
        assert_eq!(names, ["a.txt", "sub/b.svg"]);
        assert_eq!((g.files[0].data.len(), g.files[0].complete, g.files[0].size), (10, false, 100));
        assert!(g.files[1].complete);
        assert!(g.notes.iter().any(|n| n.contains("loop: a link to a directory")), "{:?}", g.notes);
        assert!(g.notes.iter().any(|n| n.contains("fifo: not a regular file")), "{:?}", g.notes);
    }

    #[test]
    fn a_broken_manifest_is_a_note() {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(d.path().join(MANIFEST_FILE), "{not json").unwrap();
        let g = gather(d.path(), &[], &Limits::default()).unwrap();
        assert!(g.manifest.is_none() && g.files.is_empty());
        assert!(g.notes[0].contains("kansoku-manifest.json: not a kansoku manifest"), "{:?}", g.notes);
    }

    #[test]
    fn a_missing_directory_is_an_error_naming_it() {
        let e = gather(Path::new("/nonexistent/kansoku-results"), &[], &Limits::default()).unwrap_err();
        assert!(e.to_string().starts_with("/nonexistent/kansoku-results: "), "{e}");
    }
}
