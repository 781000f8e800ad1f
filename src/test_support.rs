//! What the core's unit tests share: a small deterministic generator and a
//! view over plain bytes.

use crate::layout::ArrayView;

/// Tiny deterministic generator (xorshift64*).
pub(crate) struct Rng(pub(crate) u64);

impl Rng {
    pub(crate) fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    pub(crate) fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

/// The view of `bytes` as an array of `shape`, `strides` and `itemsize`.
pub(crate) fn view<'a>(
    bytes: &'a [u8],
    shape: &'a [usize],
    strides: &'a [isize],
    itemsize: usize,
) -> ArrayView<'a> {
    ArrayView {
        bytes,
        offset: 0,
        shape,
        strides,
        itemsize,
    }
}
