//! Seeded pseudo-random numbers (splitmix64) for inputs that must be the
//! same on every run and need no dependency: the stable replay of
//! `tests/oracle.rs` and the index arrays of `benches/core.rs`.

/// The splitmix64 generator: a 64-bit state, one add and two multiplies a
/// number.
pub struct SplitMix64(pub u64);

impl SplitMix64 {
    /// The next number of the sequence.
    #[allow(clippy::should_implement_trait)] // not an iterator: it never ends
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
}
