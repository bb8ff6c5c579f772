//! LEB128 variable-length integers and zig-zag signed encoding.
//!
//! Consecutive instruction addresses differ by a few bytes, so storing deltas as varints
//! keeps an exact trace near one or two bytes per instruction.

use std::io::{self, Read, Write};

/// Writes `value` as unsigned LEB128.
pub fn write_u64<W: Write>(out: &mut W, mut value: u64) -> io::Result<()> {
    let mut buf = [0u8; 10];
    let mut n = 0;
    loop {
        let byte = (value & 0x7f) as u8;
        value >>= 7;
        if value == 0 {
            buf[n] = byte;
            n += 1;
            break;
        }
        buf[n] = byte | 0x80;
        n += 1;
    }
    out.write_all(&buf[..n])
}

/// Writes a signed value zig-zag encoded (small magnitudes of either sign stay short).
pub(crate) fn write_i64<W: Write>(out: &mut W, value: i64) -> io::Result<()> {
    write_u64(out, zigzag(value))
}

/// Maps a signed value to unsigned so that small magnitudes stay small (0, -1, 1, -2 → 0, 1, 2, 3).
pub fn zigzag(value: i64) -> u64 {
    ((value << 1) ^ (value >> 63)) as u64
}

/// The inverse of [`zigzag`].
pub fn unzigzag(value: u64) -> i64 {
    ((value >> 1) as i64) ^ -((value & 1) as i64)
}

/// Why a varint could not be read.
#[derive(Debug, PartialEq, Eq)]
pub enum VarintError {
    /// The input ended inside the number.
    Truncated,
    /// More than ten bytes: not a varint we wrote.
    Overlong,
}

/// Reads an unsigned LEB128 value, counting consumed bytes into `consumed`.
pub(crate) fn read_u64<R: Read>(input: &mut R, consumed: &mut u64) -> Result<u64, VarintError> {
    let mut result = 0u64;
    for i in 0..10 {
        let mut byte = [0u8; 1];
        match input.read(&mut byte) {
            Ok(1) => {}
            _ => return Err(VarintError::Truncated),
        }
        *consumed += 1;
        result |= u64::from(byte[0] & 0x7f) << (7 * i);
        if byte[0] & 0x80 == 0 {
            return Ok(result);
        }
    }
    Err(VarintError::Overlong)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn round_trip(v in any::<u64>(), s in any::<i64>()) {
            let mut buf = Vec::new();
            write_u64(&mut buf, v).unwrap();
            write_i64(&mut buf, s).unwrap();
            let mut cur = std::io::Cursor::new(buf);
            let mut n = 0;
            prop_assert_eq!(read_u64(&mut cur, &mut n).unwrap(), v);
            prop_assert_eq!(unzigzag(read_u64(&mut cur, &mut n).unwrap()), s);
        }
    }

    #[test]
    fn truncated_is_reported() {
        let mut cur = std::io::Cursor::new(vec![0x80u8, 0x80]);
        let mut n = 0;
        assert_eq!(read_u64(&mut cur, &mut n), Err(VarintError::Truncated));
    }
}
