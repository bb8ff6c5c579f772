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
        assert_eq!(unsafe { libc_mkfifo(c.as_ptr(), 0o600) }, 0);
        let e = read_regular(&fifo, 1 << 20).unwrap_err();
        assert!(e.to_string().contains("not a regular file"), "{e}");
        let big = dir.path().join("big");
        std::fs::write(&big, vec![0u8; 2000]).unwrap();
        assert!(read_regular(&big, 1000).unwrap_err().to_string().contains("2000 bytes"));
        assert_eq!(read_regular(&big, 2000).unwrap().len(), 2000);
    }

    extern "C" {
        #[link_name = "mkfifo"]
        fn libc_mkfifo(path: *const std::ffi::c_char, mode: u32) -> i32;
    }
}
