//! Reading a results directory, bounded: its files are outside input. Only the
//! directory's own regular files are read (a FIFO or device would block or never end; a
//! link leading outside would put another file into a page that is shared), symbolic
//! links to directories are not followed (a loop), and only a prefix of each file is
//! read, within a total budget: a huge file costs its prefix, not the machine's memory.

use std::collections::HashSet;
use std::ffi::CString;
use std::io::Read;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
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
    /// Whether `data` is the whole file (else the limits cut it; the page says so).
    pub complete: bool,
    /// Why the file could not be read, if it could not.
    pub error: Option<String>,
}

/// What [`gather`] found.
#[derive(Debug, Clone, Default)]
pub struct Gathered {
    /// The regular files read, in path order.
    pub files: Vec<Found>,
    /// The directory's manifest, when it has one that reads.
    pub manifest: Option<Manifest>,
    /// What was skipped or could not be read, said once each.
    pub notes: Vec<String>,
}

/// Reads `dir` within `limits`. `exclude` names files not to list (the page itself, when
/// it is written into the directory it shows). The manifest is read, not listed.
///
/// Only what lies inside `dir` is read (a page is shared; a link to `~/.ssh/id_rsa` must
/// not put the key into it). The directory is walked through descriptors (`openat` with
/// `O_NOFOLLOW`), so the walk never leaves it even if a directory is swapped for a link
/// meanwhile; the files met as regular files are the directory's own, known by device and
/// inode. A link is followed only when it resolves to one of those. Every file is opened
/// first with `O_PATH` (which opens no device and never blocks), checked to be one of
/// them, and only then reopened to be read: what is read is what was checked.
pub fn gather(dir: &Path, exclude: &[PathBuf], limits: &Limits) -> Result<Gathered, ReportError> {
    let excluded: Vec<(u64, u64)> = exclude.iter().filter_map(|p| std::fs::metadata(p).ok()).map(|m| (m.dev(), m.ino())).collect();
    let mut w = Walk { limits, excluded: &excluded, listed: Vec::new(), links: Vec::new(), own: HashSet::new(), notes: Vec::new() };
    let to_error = |source| ReportError::Directory { path: dir.display().to_string(), source };
    // the directory named by the user is followed if it is a link: it is their choice
    let top = open_at(libc::AT_FDCWD, dir, libc::O_RDONLY | libc::O_DIRECTORY).map_err(to_error)?;
    w.walk(&top, dir, "", 0).map_err(to_error)?;
    let root = std::fs::canonicalize(dir).ok();
    let Walk { mut listed, links, own, mut notes, .. } = w;
    for (relative, path) in links {
        match identify(&path, true) {
            Ok((_, st)) if is_own(&st, &own) => {
                if !excluded.contains(&(st.st_dev, st.st_ino)) {
                    listed.push((relative, path, st.st_size as u64, true));
                }
            }
            Ok((_, st)) => {
                let outside = !root.as_ref().zip(std::fs::canonicalize(&path).ok()).is_some_and(|(r, t)| t.starts_with(r));
                notes.push(match st.st_mode & libc::S_IFMT {
                    _ if outside => format!("{relative}: a link leading outside the directory, not followed"),
                    libc::S_IFDIR => format!("{relative}: a link to a directory, not followed"),
                    libc::S_IFREG => format!("{relative}: a link to a file of the directory that was not read (deeper than {} levels), not followed", limits.max_depth),
                    _ => format!("{relative}: a link to a device, FIFO or socket, not opened"),
                });
            }
            Err(e) => notes.push(format!("{relative}: a link that leads nowhere readable ({e}), not followed")),
        }
    }
    listed.sort();
    let mut g = Gathered { notes, ..Gathered::default() };
    if listed.len() > limits.max_files {
        g.notes.push(format!("{} files found; the first {} (by name) are listed", listed.len(), limits.max_files));
        listed.truncate(limits.max_files);
    }
    let mut budget = limits.total_bytes;
    for (relative, full, size, follow) in listed {
        if relative == MANIFEST_FILE {
            // a broken manifest costs the commands, not the page
            match read_prefix(&full, follow, &own, limits.table_bytes).map_err(|e| e.to_string()).and_then(|(data, _)| Manifest::from_json(&full.display().to_string(), &data).map_err(|e| e.to_string())) {
                Ok(m) => g.manifest = Some(m),
                Err(e) => g.notes.push(format!("the manifest was not read, so no file names its command: {e}")),
            }
            continue;
        }
        let want = read_limit(&relative, limits).min(budget);
        let mut found = Found { path: relative, size, ..Found::default() };
        match read_prefix(&full, follow, &own, want) {
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

/// A file to read: relative name, path, size, and whether the path is a link to follow.
type Listed = (String, PathBuf, u64, bool);

struct Walk<'a> {
    limits: &'a Limits,
    excluded: &'a [(u64, u64)],
    listed: Vec<Listed>,
    /// Links met, resolved after the walk (their target may be a file met later).
    links: Vec<(String, PathBuf)>,
    /// Device and inode of every regular file met inside the directory.
    own: HashSet<(u64, u64)>,
    notes: Vec<String>,
}

impl Walk<'_> {
    /// Lists the directory open as `fd` (its path `path`, for the later reads and notes).
    fn walk(&mut self, fd: &OwnedFd, path: &Path, prefix: &str, depth: usize) -> std::io::Result<()> {
        // the names are listed through the descriptor, so they are this directory's
        let mut names: Vec<std::ffi::OsString> = std::fs::read_dir(format!("/proc/self/fd/{}", fd.as_raw_fd()))?.filter_map(|e| e.ok().map(|e| e.file_name())).collect();
        names.sort();
        for name in names {
            let shown = name.to_string_lossy();
            let relative = if prefix.is_empty() { shown.into_owned() } else { format!("{prefix}/{shown}") };
            let full = path.join(&name);
            let Ok(entry) = open_at(fd.as_raw_fd(), Path::new(&name), libc::O_PATH | libc::O_NOFOLLOW) else { continue };
            let Ok(st) = fstat(&entry) else { continue };
            match st.st_mode & libc::S_IFMT {
                libc::S_IFDIR if depth + 1 < self.limits.max_depth => {
                    match open_at(fd.as_raw_fd(), Path::new(&name), libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW) {
                        Ok(sub) => {
                            if let Err(e) = self.walk(&sub, &full, &relative, depth + 1) {
                                self.notes.push(format!("{relative}/: not read: {e}"));
                            }
                        }
                        Err(e) => self.notes.push(format!("{relative}/: not read: {e}")),
                    }
                }
                libc::S_IFDIR => self.notes.push(format!("{relative}/: deeper than {} levels, not read", self.limits.max_depth)),
                libc::S_IFREG => {
                    self.own.insert((st.st_dev, st.st_ino));
                    if !self.excluded.contains(&(st.st_dev, st.st_ino)) {
                        self.listed.push((relative, full, st.st_size as u64, false));
                    }
                }
                libc::S_IFLNK => self.links.push((relative, full)),
                _ => self.notes.push(format!("{relative}: not a regular file (a device, FIFO or socket), not read")),
            }
        }
        Ok(())
    }
}

fn is_own(st: &libc::stat, own: &HashSet<(u64, u64)>) -> bool {
    st.st_mode & libc::S_IFMT == libc::S_IFREG && own.contains(&(st.st_dev, st.st_ino))
}

/// `openat(dir, path, flags | O_CLOEXEC | O_NOCTTY)`.
fn open_at(dir: RawFd, path: &Path, flags: i32) -> std::io::Result<OwnedFd> {
    let c = CString::new(path.as_os_str().as_bytes()).map_err(|_| std::io::Error::from(std::io::ErrorKind::InvalidInput))?;
    // SAFETY: `c` is a NUL-terminated string that outlives the call; `dir` is AT_FDCWD
    // or a descriptor the caller holds open.
    let fd = unsafe { libc::openat(dir, c.as_ptr(), flags | libc::O_CLOEXEC | libc::O_NOCTTY) };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: `fd` was just returned by openat and nothing else owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

fn fstat(fd: &OwnedFd) -> std::io::Result<libc::stat> {
    let mut st = std::mem::MaybeUninit::<libc::stat>::uninit();
    // SAFETY: `st` is writable memory of the size fstat fills; `fd` is open.
    if unsafe { libc::fstat(fd.as_raw_fd(), st.as_mut_ptr()) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: fstat succeeded, so it filled `st`.
    Ok(unsafe { st.assume_init() })
}

/// `path` opened with `O_PATH` (opening no device, never blocking), following a final link
/// when `follow`, and what it is.
fn identify(path: &Path, follow: bool) -> std::io::Result<(OwnedFd, libc::stat)> {
    let fd = open_at(libc::AT_FDCWD, path, libc::O_PATH | if follow { 0 } else { libc::O_NOFOLLOW })?;
    let st = fstat(&fd)?;
    Ok((fd, st))
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

/// The first `max` bytes of one of the directory's own regular files, and whether that was
/// all of it. The file is identified before it is opened for reading (it may have been
/// replaced by a link, a FIFO or a device since it was listed), and the descriptor checked
/// is the one reopened, so nothing else can be read in its place.
fn read_prefix(path: &Path, follow: bool, own: &HashSet<(u64, u64)>, max: u64) -> std::io::Result<(Vec<u8>, bool)> {
    let (checked, st) = identify(path, follow)?;
    if !is_own(&st, own) {
        return Err(std::io::Error::other("changed since it was listed: no longer one of the directory's own regular files, not read"));
    }
    let file = std::fs::File::from(open_at(libc::AT_FDCWD, Path::new(&format!("/proc/self/fd/{}", checked.as_raw_fd())), libc::O_RDONLY | libc::O_NONBLOCK)?);
    let mut data = Vec::new();
    file.take(max.saturating_add(1)).read_to_end(&mut data)?;
    let complete = data.len() as u64 <= max;
    data.truncate(max as usize);
    Ok((data, complete))
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
    fn a_file_swapped_for_a_link_after_the_walk_is_not_read() {
        let d = tempfile::tempdir().unwrap();
        let outside = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(outside.path(), "SECRET").unwrap();
        let file = d.path().join("a.txt");
        std::fs::write(&file, "mine").unwrap();
        let m = std::fs::metadata(&file).unwrap();
        let own = HashSet::from([(m.dev(), m.ino())]);
        assert_eq!(read_prefix(&file, false, &own, 100).unwrap().0, b"mine");
        // as a racing program would do between the walk and the read
        std::fs::remove_file(&file).unwrap();
        std::os::unix::fs::symlink(outside.path(), &file).unwrap();
        for follow in [false, true] {
            let e = read_prefix(&file, follow, &own, 100).unwrap_err().to_string();
            assert!(!e.contains("SECRET"), "{e}");
        }
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
