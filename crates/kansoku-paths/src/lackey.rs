//! Reading what Valgrind's Lackey tool writes with `--trace-superblocks=yes -v -v`.
//!
//! ```text
//! SB 04001060                                   a superblock entry (runtime address)
//! --1234-- Reading syms from /usr/bin/prog      an object was mapped ...
//! --1234--    svma 0x0000001040, avma 0x0000109040   ... its .text link and runtime address
//! ==1234== Process terminating with default action of signal 11 (SIGSEGV)
//! ==1234==    at 0x109161: main (crash.c:12)    where it happened
//! ```
//!
//! The `Reading syms` lines come in stream order, before the first superblock of the
//! object, so the module map is known exactly when it is needed — the same guarantee our
//! `.ksk` recordings give with `Module` events.


/// One line of Lackey's output, classified.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LackeyLine<'a> {
    /// `SB ADDR`: a superblock entered at runtime address `ADDR`.
    Superblock(u64),
    /// `Reading syms from PATH`.
    ObjectPath(&'a str),
    /// `svma X, avma Y` following an object path.
    ObjectAddresses {
        /// Link-time address of the object's `.text` (as in its file).
        svma: u64,
        /// Runtime address it was mapped at.
        avma: u64,
    },
    /// `Process terminating with default action of signal N`.
    FatalSignal(i32),
    /// `at 0xADDR: ...` (first frame of a report).
    At(u64),
    /// Any other Valgrind message (`==PID==`, `--PID--`, `**PID**`) or debug continuation.
    Message,
    /// A line that should be a superblock entry but is not.
    Garbled,
}

fn hex(s: &[u8]) -> Option<u64> {
    if s.is_empty() || s.len() > 16 {
        return None;
    }
    let mut v: u64 = 0;
    for &c in s {
        let d = match c {
            b'0'..=b'9' => c - b'0',
            b'a'..=b'f' => c - b'a' + 10,
            b'A'..=b'F' => c - b'A' + 10,
            _ => return None,
        };
        v = (v << 4) | d as u64;
    }
    Some(v)
}

/// The part of a message line after its `==PID== ` / `--PID-- ` prefix.
fn message_body(line: &[u8]) -> Option<&[u8]> {
    let (open, close) = match line.first()? {
        b'=' => (b"==", b"=="),
        b'-' => (b"--", b"--"),
        b'*' => (b"**", b"**"),
        _ => return None,
    };
    if !line.starts_with(open) {
        return None;
    }
    let rest = &line[2..];
    let pid_len = rest.iter().take_while(|c| c.is_ascii_digit() || **c == b':').count();
    if pid_len == 0 || !rest[pid_len..].starts_with(close) {
        return None;
    }
    let body = &rest[pid_len + 2..];
    Some(body.strip_prefix(b" ").unwrap_or(body))
}

/// Classifies one line (without its newline).
#[inline]
pub fn parse_line(line: &[u8]) -> LackeyLine<'_> {
    if let Some(rest) = line.strip_prefix(b"SB ") {
        return match hex(rest) {
            Some(a) => LackeyLine::Superblock(a),
            None => LackeyLine::Garbled,
        };
    }
    if let Some(body) = message_body(line) {
        let body_str = std::str::from_utf8(body).unwrap_or("");
        let trimmed = body_str.trim_start();
        if let Some(path) = trimmed.strip_prefix("Reading syms from ") {
            return LackeyLine::ObjectPath(path.trim_end());
        }
        if let Some(rest) = trimmed.strip_prefix("svma 0x") {
            if let Some((s, a)) = rest.split_once(", avma 0x") {
                if let (Some(svma), Some(avma)) = (hex(s.as_bytes()), hex(a.trim_end().as_bytes())) {
                    return LackeyLine::ObjectAddresses { svma, avma };
                }
            }
        }
        if let Some(rest) = trimmed.strip_prefix("Process terminating with default action of signal ") {
            let n: String = rest.chars().take_while(|c| c.is_ascii_digit()).collect();
            if let Ok(sig) = n.parse() {
                return LackeyLine::FatalSignal(sig);
            }
        }
        if let Some(rest) = trimmed.strip_prefix("at 0x") {
            let h: String = rest.chars().take_while(|c| c.is_ascii_hexdigit()).collect();
            if let Some(a) = hex(h.as_bytes()) {
                return LackeyLine::At(a);
            }
        }
        return LackeyLine::Message;
    }
    // Valgrind's -v -v CFI dumps continue on lines of their own ("0x50: [0]={ ... }"),
    // and an empty line is harmless; everything else is not Lackey's.
    if line.is_empty() || (line.starts_with(b"0x") && line.contains(&b':')) {
        return LackeyLine::Message;
    }
    LackeyLine::Garbled
}

/// Moved to `kansoku-binary` (the exact engine in `kansoku-probe` needs it too).
pub use kansoku_binary::maps::module_from_text as module_from_syms;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classifies_lines() {
        assert_eq!(parse_line(b"SB 0401ab70"), LackeyLine::Superblock(0x401ab70));
        assert_eq!(parse_line(b"SB 04zz"), LackeyLine::Garbled);
        assert_eq!(parse_line(b"SB "), LackeyLine::Garbled);
        assert_eq!(parse_line(b"S"), LackeyLine::Garbled);
        assert_eq!(parse_line(b"hello from the program"), LackeyLine::Garbled);
        assert_eq!(parse_line(b"--7611-- Reading syms from /tmp/pp/t"), LackeyLine::ObjectPath("/tmp/pp/t"));
        assert_eq!(
            parse_line(b"--7611--    svma 0x0000001040, avma 0x0000109040"),
            LackeyLine::ObjectAddresses { svma: 0x1040, avma: 0x109040 }
        );
        assert_eq!(
            parse_line(b"==77== Process terminating with default action of signal 11 (SIGSEGV)"),
            LackeyLine::FatalSignal(11)
        );
        assert_eq!(parse_line(b"==77==    at 0x109161: main (crash.c:12)"), LackeyLine::At(0x109161));
        assert_eq!(parse_line(b"==77== Lackey, an example Valgrind tool"), LackeyLine::Message);
        assert_eq!(parse_line(b"0x50: [0]={ 0(r5) { u u } }"), LackeyLine::Message);
    }
}
