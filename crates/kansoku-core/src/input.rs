//! Reading files named by outside input (a path inside a recording, a `--module` option).
//!
//! A path in a recording may name anything: `/dev/zero` reads forever, a FIFO blocks
//! forever, a huge file fills memory. Analyses read only regular files, and only up to a
//! size that what they parse needs.

use std::io::{self, Read};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

/// Reads a regular file of at most `max_bytes` bytes. Anything else (a device, a FIFO, a
/// directory, a larger file) is an `InvalidInput` error saying what the path is.
pub fn read_regular(path: &Path, max_bytes: u64) -> io::Result<Vec<u8>> {
    let meta = std::fs::metadata(path)?;
    if !meta.is_file() {
        let kind = if meta.is_dir() { "a directory" } else { "not a regular file (a device, FIFO or socket)" };
        return Err(io::Error::new(io::ErrorKind::InvalidInput, format!("{kind}; only regular files are read")));
    }
    if meta.len() > max_bytes {
        return Err(io::Error::new(io::ErrorKind::InvalidInput, format!("{} bytes, more than the {max_bytes} read at most", meta.len())));
    }
    // Opened without blocking, in case the path was replaced by a FIFO since the check.
    let file = std::fs::OpenOptions::new().read(true).custom_flags(O_NONBLOCK).open(path)?;
    let mut data = Vec::with_capacity(meta.len() as usize);
    file.take(max_bytes + 1).read_to_end(&mut data)?;
    if data.len() as u64 > max_bytes {
        return Err(io::Error::new(io::ErrorKind::InvalidInput, format!("grew beyond the {max_bytes} bytes read at most")));
    }
    Ok(data)
}

/// `O_NONBLOCK` on Linux (x86-64 and arm64 alike).
const O_NONBLOCK: i32 = 0o4000;

/// Why a text file could not be read.
#[derive(Debug, thiserror::Error)]
pub enum TextError {
    /// Opening or reading failed (the OS's error).
    #[error("{0}")]
    Io(#[from] io::Error),
    /// The first byte that is not UTF-8, by line and column (1-based, in characters) and
    /// byte offset.
    #[error("{line}:{col}: invalid UTF-8 (byte {byte})")]
    Utf8 {
        /// Line of the bad byte, from 1.
        line: u32,
        /// Column, from 1, in characters.
        col: u32,
        /// Byte offset in the file, from 0.
        byte: u64,
    },
}

/// Reads a text file (a kernel, a score table, a trace, JSON) as [`read_regular`] does;
/// text that is not UTF-8 is an error locating the first bad byte.
pub fn read_text(path: &Path, max_bytes: u64) -> Result<String, TextError> {
    let data = read_regular(path, max_bytes)?;
    String::from_utf8(data).map_err(|e| {
        let bad = e.utf8_error().valid_up_to();
        let before = &e.as_bytes()[..bad];
        let line = before.iter().filter(|&&b| b == b'\n').count() + 1;
        let line_start = before.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
        // Columns in characters, as editors count them (the prefix is valid UTF-8).
        let col = String::from_utf8_lossy(&before[line_start..]).chars().count() + 1;
        TextError::Utf8 { line: line as u32, col: col as u32, byte: bad as u64 }
    })
}

/// The largest text input read (kernels, score tables, formulas files, traces).
pub const MAX_TEXT_BYTES: u64 = 1 << 30;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn devices_directories_and_large_files_are_refused() {
        let e = read_regular(Path::new("/dev/zero"), 1 << 20).unwrap_err();
        assert!(e.to_string().contains("not a regular file"), "{e}");
        let e = read_regular(Path::new("/tmp"), 1 << 20).unwrap_err();
        assert!(e.to_string().contains("directory"), "{e}");
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("fifo");
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        // SAFETY: a NUL-terminated path that outlives the call; mkfifo only reads it.
        assert_eq!(unsafe { libc_mkfifo(c.as_ptr(), 0o600) }, 0);
        let e = read_regular(&fifo, 1 << 20).unwrap_err();
        assert!(e.to_string().contains("not a regular file"), "{e}");
        let big = dir.path().join("big");
        std::fs::write(&big, vec![0u8; 2000]).unwrap();
        assert!(read_regular(&big, 1000).unwrap_err().to_string().contains("2000 bytes"));
        assert_eq!(read_regular(&big, 2000).unwrap().len(), 2000);
    }

    #[test]
    fn invalid_utf8_is_located() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("k.k");
        std::fs::write(&p, b"param N;\ndouble \xc3\xa9A[N], \xff;\n").unwrap();
        let e = read_text(&p, 1 << 20).unwrap_err();
        assert_eq!(e.to_string(), "2:15: invalid UTF-8 (byte 24)");
    }

    extern "C" {
        #[link_name = "mkfifo"]
        fn libc_mkfifo(path: *const std::ffi::c_char, mode: u32) -> i32;
    }
}
