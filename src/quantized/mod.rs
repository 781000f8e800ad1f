//! Gather and dequantise in one pass: the `com.microsoft` operator
//! `GatherBlockQuantized`. Only the rows the indices select are read and
//! dequantised; the dequantised table never exists.
//!
//! `data` is quantised block-wise along `quantize_axis`: each run of
//! `block_size` elements along that axis shares one scale (and one zero
//! point). The element at logical flat index `e` of `data` (C order) has
//! the scale at `x * nb * qn + (y / block_size) * qn + z`, where
//! `e = (x * q + y) * qn + z`, `q` is the quantize axis' length, `qn` the
//! product of the axes after it and `nb = ceil(q / block_size)` (as in
//! onnxruntime's CPU kernel). The arithmetic is onnxruntime's, so that the
//! results are bit for bit its own: `float(code - zero_point) * scale` in
//! `f32` for integer codes, `value(code) * scale` for float codes, then a
//! round to nearest even into the scales' type.

mod call;
mod decode;
mod fill;
mod geometry;

pub use call::{block_quantized_out_shape, gather_block_quantized};

/// How the quantised codes of `data` are stored, one logical element after
/// another in C order.
#[derive(Clone, Copy, Debug)]
pub enum Codes<'a> {
    /// `uint8` bytes, each holding `8 / bits` unsigned codes of `bits` bits
    /// (2, 4 or 8), the lowest bits first; the default zero point is
    /// `2^(bits-1)`, and zero points are packed the same way, row by row.
    Packed {
        /// The bytes, `elements * bits / 8` of them.
        bytes: &'a [u8],
        /// Bits per code: 2, 4 or 8.
        bits: u32,
    },
    /// One signed 4-bit code per byte, in the low nibble (ml_dtypes'
    /// `int4`); the default zero point is 0.
    Int4(&'a [u8]),
    /// One unsigned 4-bit code per byte, in the low nibble (ml_dtypes'
    /// `uint4`); the default zero point is 0.
    UInt4(&'a [u8]),
    /// One byte per element, a code whose value is `values[code]` (the 8-
    /// and 4-bit float types); no zero point.
    Table {
        /// The bytes, one per element.
        bytes: &'a [u8],
        /// The value of each of the 256 codes, exactly as `f32`.
        values: &'a [f32; 256],
    },
}

/// The type of the scales, which is also the output's.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ScaleType {
    /// IEEE `float32`.
    Float32,
    /// IEEE `float16`.
    Float16,
    /// `bfloat16`.
    BFloat16,
}

/// One `GatherBlockQuantized` call, its buffers given as native-endian bytes.
#[derive(Clone, Copy, Debug)]
pub struct BlockQuantized<'a> {
    /// The codes.
    pub codes: Codes<'a>,
    /// The logical shape of `data` (for [`Codes::Packed`], the last axis
    /// counts codes, not bytes).
    pub shape: &'a [usize],
    /// The scales, C-contiguous, of shape `shape` with the quantize axis
    /// replaced by its number of blocks.
    pub scales: &'a [u8],
    /// Their type (the output's).
    pub scale_type: ScaleType,
    /// Zero points stored as `codes` are (packed for [`Codes::Packed`]);
    /// `None` for the default.
    pub zero_points: Option<&'a [u8]>,
    /// The axis indices select along.
    pub gather_axis: usize,
    /// The axis the blocks run along.
    pub quantize_axis: usize,
    /// Elements per block along the quantize axis, at least 1.
    pub block_size: usize,
}

/// The indices, native-endian `i32` or `i64` bytes.
#[derive(Clone, Copy, Debug)]
pub enum Indices<'a> {
    /// `int32`.
    I32(&'a [u8]),
    /// `int64`.
    I64(&'a [u8]),
}

impl Indices<'_> {
    fn len(&self) -> usize {
        match self {
            Indices::I32(b) => b.len() / 4,
            Indices::I64(b) => b.len() / 8,
        }
    }

    fn get(&self, n: usize) -> i64 {
        match self {
            Indices::I32(b) => {
                let mut v = [0; 4];
                v.copy_from_slice(&b[4 * n..4 * n + 4]);
                i64::from(i32::from_ne_bytes(v))
            }
            Indices::I64(b) => {
                let mut v = [0; 8];
                v.copy_from_slice(&b[8 * n..8 * n + 8]);
                i64::from_ne_bytes(v)
            }
        }
    }
}

#[cfg(test)]
#[path = "quantized_tests.rs"]
mod tests;
