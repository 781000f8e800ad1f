//! The decoders of the codes: packed 2-, 4- and 8-bit unsigned codes,
//! 4-bit signed and unsigned nibbles, and float codes by table, each with
//! its zero points.

use crate::hints;
use crate::real::{each_nibble, Real};

/// Reads logical codes and zero points.
pub(super) trait Decode: Sync {
    /// `code - zero_point` for integer codes, the value for float codes.
    fn value(&self, e: usize, zp: i32) -> f32;
    /// The zero point of the scale at `s`.
    fn zero_point(&self, s: usize) -> i32;
    /// Asks the cache for the codes of elements `e..e + n`.
    #[inline(always)]
    fn prefetch(&self, _e: usize, _n: usize) {}

    /// Dequantises the elements from `e` that share one scale and zero
    /// point into `out` (whole elements of `R`).
    #[inline(always)]
    fn fill_run<R: Real>(&self, e: usize, zp: i32, scale: f32, out: &mut [u8]) {
        for (j, o) in out.chunks_exact_mut(R::WIDTH).enumerate() {
            R::store(o, 0, self.value(e + j, zp) * scale);
        }
    }
}

pub(super) struct PackedCodes<'a> {
    pub(super) bytes: &'a [u8],
    pub(super) bits: u32,
    pub(super) zero_points: Option<&'a [u8]>,
    /// Blocks per row of the scales (the quantize axis is last).
    pub(super) blocks: usize,
    /// Whether the output is large enough to be written around the cache.
    pub(super) stream: bool,
}

impl Decode for PackedCodes<'_> {
    #[inline(always)]
    fn prefetch(&self, e: usize, n: usize) {
        let per = (8 / self.bits) as usize;
        prefetch_bytes(self.bytes, e / per, (e + n).div_ceil(per));
    }

    #[inline(always)]
    fn value(&self, e: usize, zp: i32) -> f32 {
        let code = match self.bits {
            8 => self.bytes[e],
            4 => (self.bytes[e >> 1] >> ((e & 1) * 4)) & 0x0f,
            _ => (self.bytes[e >> 2] >> ((e & 3) * 2)) & 0x03,
        };
        (i32::from(code) - zp) as f32
    }
    #[inline(always)]
    fn fill_run<R: Real>(&self, e: usize, zp: i32, scale: f32, out: &mut [u8]) {
        let len = out.len() / R::WIDTH;
        if self.bits != 4 || !e.is_multiple_of(2) || !len.is_multiple_of(2) {
            for (j, o) in out.chunks_exact_mut(R::WIDTH).enumerate() {
                R::store(o, 0, self.value(e + j, zp) * scale);
            }
            return;
        }
        // Two codes a byte, both written from one read: the hot loop of a
        // 4-bit embedding table, which the compiler vectorises.
        let bytes = &self.bytes[e / 2..(e + len) / 2];
        let mut outs = out.chunks_exact_mut(16 * R::WIDTH);
        let mut ins = bytes.chunks_exact(8);
        for (o, b) in (&mut outs).zip(&mut ins) {
            if let Ok(b) = <&[u8; 8]>::try_from(b) {
                R::nibbles16(o, b, zp, scale, self.stream);
            }
        }
        each_nibble::<R>(outs.into_remainder(), ins.remainder(), zp, scale);
    }

    fn zero_point(&self, s: usize) -> i32 {
        let Some(zp) = self.zero_points else {
            return 1 << (self.bits - 1);
        };
        let per = (8 / self.bits) as usize;
        let (row, col) = (s / self.blocks, s % self.blocks);
        let byte = zp[row * self.blocks.div_ceil(per) + col / per];
        let shift = (col % per) as u32 * self.bits;
        i32::from((byte >> shift) & ((1u16 << self.bits) - 1) as u8)
    }
}

pub(super) struct NibbleCodes<'a> {
    pub(super) bytes: &'a [u8],
    pub(super) signed: bool,
    pub(super) zero_points: Option<&'a [u8]>,
}

impl NibbleCodes<'_> {
    #[inline(always)]
    fn nibble(&self, b: u8) -> i32 {
        if self.signed {
            i32::from(((b << 4) as i8) >> 4)
        } else {
            i32::from(b & 0x0f)
        }
    }
}

impl Decode for NibbleCodes<'_> {
    #[inline(always)]
    fn value(&self, e: usize, zp: i32) -> f32 {
        (self.nibble(self.bytes[e]) - zp) as f32
    }
    fn zero_point(&self, s: usize) -> i32 {
        self.zero_points.map_or(0, |zp| self.nibble(zp[s]))
    }
}

pub(super) struct TableCodes<'a> {
    pub(super) bytes: &'a [u8],
    pub(super) values: &'a [f32; 256],
}

impl Decode for TableCodes<'_> {
    #[inline(always)]
    fn value(&self, e: usize, _zp: i32) -> f32 {
        self.values[usize::from(self.bytes[e])]
    }
    fn zero_point(&self, _s: usize) -> i32 {
        0
    }
}

/// Asks the cache for the lines of `bytes[start..end]` (clipped to
/// `bytes`); a hint, never a read.
#[inline(always)]
pub(super) fn prefetch_bytes(bytes: &[u8], start: usize, end: usize) {
    let end = end.min(bytes.len());
    hints::lines(
        bytes.as_ptr().wrapping_add(start),
        end.saturating_sub(start),
        false,
    );
}
