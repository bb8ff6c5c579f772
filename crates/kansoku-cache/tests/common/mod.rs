//! Shared by the tests (set method, PolyBench C).

/// A small deterministic generator (xorshift), so failures are reproducible.
pub struct Rng(pub u64);

impl Rng {
    /// A value in `lo..=hi`.
    pub fn next(&mut self, lo: i64, hi: i64) -> i64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        lo + (self.0 % (hi - lo + 1) as u64) as i64
    }
}
