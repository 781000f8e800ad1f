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

use crate::error::{GatherError, Result};
use crate::hints::{self, fence, STREAM_MIN_OUT_BYTES};
use crate::real::{Real, BF16, F16, F32};
use crate::split::split_rows;

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

/// What dequantising one output element costs, in bytes of sequential
/// copying (the unit of [`split_rows`]): a code read, a scale applied and a
/// wide value written, about eight bytes' worth.
const ELEMENT_COST: usize = 8;

/// The shape of the result: `shape[..g] + indices_shape + shape[g + 1..]`.
pub fn block_quantized_out_shape(
    shape: &[usize],
    gather_axis: usize,
    indices_shape: &[usize],
) -> Vec<usize> {
    let g = gather_axis.min(shape.len());
    let mut out = shape[..g].to_vec();
    out.extend_from_slice(indices_shape);
    if g < shape.len() {
        out.extend_from_slice(&shape[g + 1..]);
    }
    out
}

/// Gathers the slices of `q`'s data that `indices` select along the gather
/// axis and dequantises them into `out` (native-endian elements of the
/// scale type, `out_shape`'s worth). An index in `[-s, s)` (negatives count
/// from the end) selects a slice; any other gives zeros, as the operator's
/// specification says. Uses up to `threads` threads.
pub fn gather_block_quantized(
    q: &BlockQuantized<'_>,
    indices: Indices<'_>,
    out: &mut [u8],
    threads: usize,
) -> Result<()> {
    let geo = Geometry::new(q, indices.len())?;
    let width = match q.scale_type {
        ScaleType::Float32 => 4,
        ScaleType::Float16 | ScaleType::BFloat16 => 2,
    };
    let out_elements = geo.rows.checked_mul(geo.row).ok_or_else(too_large)?;
    if out.len() != out_elements.checked_mul(width).ok_or_else(too_large)? {
        return Err(invalid(format!(
            "the output has {} bytes, the result needs {} elements of {width} bytes",
            out.len(),
            out_elements
        )));
    }
    check_scales_and_zero_points(q, &geo, width)?;
    match q.scale_type {
        ScaleType::Float32 => run::<F32>(q, &geo, indices, out, threads),
        ScaleType::Float16 => run::<F16>(q, &geo, indices, out, threads),
        ScaleType::BFloat16 => run::<BF16>(q, &geo, indices, out, threads),
    }
    Ok(())
}

fn invalid(msg: String) -> GatherError {
    GatherError::InvalidArgument(msg)
}

fn too_large() -> GatherError {
    GatherError::Overflow("GatherBlockQuantized: a size overflows 64 bits".into())
}

/// Checks the lengths of the scales and zero points against the shapes.
fn check_scales_and_zero_points(
    q: &BlockQuantized<'_>,
    geo: &Geometry,
    width: usize,
) -> Result<()> {
    let n_scales = geo.scale_count()?;
    if q.scales.len() != n_scales.checked_mul(width).ok_or_else(too_large)? {
        return Err(invalid(format!(
            "scales have {} bytes, the shapes need {n_scales} scales of {width} bytes",
            q.scales.len()
        )));
    }
    if let Some(zp) = q.zero_points {
        let need = match q.codes {
            Codes::Packed { bits, .. } => {
                let per = (8 / bits) as usize;
                geo.outer_q
                    .checked_mul(geo.blocks.div_ceil(per))
                    .ok_or_else(too_large)?
            }
            Codes::Int4(_) | Codes::UInt4(_) => n_scales,
            Codes::Table { .. } => {
                return Err(invalid(
                    "zero points are not allowed with float codes".into(),
                ))
            }
        };
        if zp.len() != need {
            return Err(invalid(format!(
                "zero points have {} bytes, the shapes need {need}",
                zp.len()
            )));
        }
    }
    Ok(())
}

/// The call reduced to sizes: output rows of `row` logical elements, and
/// where the scales of a logical element are.
struct Geometry {
    /// Output rows: the product of the axes before the gather axis, times
    /// the number of indices.
    rows: usize,
    /// The number of indices.
    n: usize,
    /// The gather axis' length.
    axis: usize,
    /// Logical elements per row: the product of the axes after the gather
    /// axis.
    row: usize,
    /// The quantize axis' length.
    q: usize,
    /// The product of the axes after the quantize axis.
    qn: usize,
    /// Blocks along the quantize axis.
    blocks: usize,
    /// The product of the axes before the quantize axis.
    outer_q: usize,
    /// Elements per block.
    block_size: usize,
}

impl Geometry {
    fn new(q: &BlockQuantized<'_>, n: usize) -> Result<Self> {
        let rank = q.shape.len();
        if q.gather_axis >= rank || q.quantize_axis >= rank {
            return Err(invalid(format!(
                "gather_axis {} and quantize_axis {} must be below the rank {rank}",
                q.gather_axis, q.quantize_axis
            )));
        }
        if q.block_size == 0 {
            return Err(invalid("block_size must be at least 1".into()));
        }
        let product = |dims: &[usize]| {
            dims.iter()
                .try_fold(1usize, |a, &d| a.checked_mul(d))
                .ok_or_else(too_large)
        };
        let (g, qa) = (q.gather_axis, q.quantize_axis);
        let elements = product(q.shape)?;
        let (bytes, per_byte) = match q.codes {
            Codes::Packed { bytes, bits } => {
                if !matches!(bits, 2 | 4 | 8) {
                    return Err(invalid(format!("bits must be 2, 4 or 8, got {bits}")));
                }
                let per = (8 / bits) as usize;
                if qa + 1 != rank || q.shape[rank - 1] % per != 0 {
                    return Err(invalid(
                        "packed codes need the quantize axis last, a whole number of bytes long"
                            .into(),
                    ));
                }
                (bytes, per)
            }
            Codes::Int4(b) | Codes::UInt4(b) | Codes::Table { bytes: b, .. } => (b, 1),
        };
        if bytes.len() != elements / per_byte {
            return Err(invalid(format!(
                "data has {} bytes, its shape needs {}",
                bytes.len(),
                elements / per_byte
            )));
        }
        let blocks = q.shape[qa].div_ceil(q.block_size);
        let outer = product(&q.shape[..g])?;
        Ok(Geometry {
            rows: outer.checked_mul(n).ok_or_else(too_large)?,
            n,
            axis: q.shape[g],
            row: product(&q.shape[g + 1..])?,
            q: q.shape[qa],
            qn: product(&q.shape[qa + 1..])?,
            blocks,
            outer_q: product(&q.shape[..qa])?,
            block_size: q.block_size,
        })
    }

    fn scale_count(&self) -> Result<usize> {
        self.outer_q
            .checked_mul(self.blocks)
            .and_then(|v| v.checked_mul(self.qn))
            .ok_or_else(too_large)
    }
}

/// Reads logical codes and zero points.
trait Decode: Sync {
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

struct PackedCodes<'a> {
    bytes: &'a [u8],
    bits: u32,
    zero_points: Option<&'a [u8]>,
    /// Blocks per row of the scales (the quantize axis is last).
    blocks: usize,
    /// Whether the output is large enough to be written around the cache.
    stream: bool,
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
        if self.bits != 4 || e % 2 != 0 || len % 2 != 0 {
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
        let tail = outs.into_remainder();
        for (pair, &b) in tail.chunks_exact_mut(2 * R::WIDTH).zip(ins.remainder()) {
            let lo = (i32::from(b & 0x0f) - zp) as f32 * scale;
            let hi = (i32::from(b >> 4) - zp) as f32 * scale;
            let (a, c) = pair.split_at_mut(R::WIDTH);
            R::store(a, 0, lo);
            R::store(c, 0, hi);
        }
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

struct NibbleCodes<'a> {
    bytes: &'a [u8],
    signed: bool,
    zero_points: Option<&'a [u8]>,
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

struct TableCodes<'a> {
    bytes: &'a [u8],
    values: &'a [f32; 256],
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

fn run<R: Real>(
    q: &BlockQuantized<'_>,
    geo: &Geometry,
    indices: Indices<'_>,
    out: &mut [u8],
    threads: usize,
) {
    match q.codes {
        Codes::Packed { bytes, bits } => {
            let d = PackedCodes {
                bytes,
                bits,
                zero_points: q.zero_points,
                blocks: geo.blocks,
                stream: geo.rows * geo.row * R::WIDTH >= STREAM_MIN_OUT_BYTES,
            };
            split::<R, _>(q.scales, geo, indices, &d, out, threads);
        }
        Codes::Int4(bytes) | Codes::UInt4(bytes) => {
            let d = NibbleCodes {
                bytes,
                signed: matches!(q.codes, Codes::Int4(_)),
                zero_points: q.zero_points,
            };
            split::<R, _>(q.scales, geo, indices, &d, out, threads);
        }
        Codes::Table { bytes, values } => {
            let d = TableCodes { bytes, values };
            split::<R, _>(q.scales, geo, indices, &d, out, threads);
        }
    }
}

/// Splits the output rows over tasks (disjoint chunks of `out`).
fn split<R: Real, D: Decode>(
    scales: &[u8],
    geo: &Geometry,
    indices: Indices<'_>,
    d: &D,
    out: &mut [u8],
    threads: usize,
) {
    let total = geo.rows * geo.row;
    if total == 0 {
        return;
    }
    let fill = |first: usize, chunk: &mut [u8]| {
        fill_rows::<R, D>(scales, geo, indices, d, first, chunk);
        // Our non-temporal stores are visible before the task is done.
        fence();
        Ok(())
    };
    let cost = total.saturating_mul(ELEMENT_COST);
    // `fill_rows` never fails (an index out of range is a zero row).
    let _ = split_rows(threads, geo.rows, cost, geo.row * R::WIDTH, out, &fill);
}

/// Fills output rows `first..` (as many as `out` holds).
fn fill_rows<R: Real, D: Decode>(
    scales: &[u8],
    geo: &Geometry,
    indices: Indices<'_>,
    d: &D,
    first: usize,
    out: &mut [u8],
) {
    let row_bytes = geo.row * R::WIDTH;
    let axis = i64::try_from(geo.axis).unwrap_or(i64::MAX);
    // The first element of output row `r`'s source, if its index is in range.
    let source = |r: usize| {
        let (m, n) = (r / geo.n, r % geo.n);
        let i = indices.get(n);
        if i < -axis || i >= axis {
            return None;
        }
        let i = if i < 0 { i + axis } else { i } as usize;
        Some((m * geo.axis + i) * geo.row)
    };
    let rows = out.len() / row_bytes.max(1);
    let mut next = if rows > 0 { source(first) } else { None };
    for (k, out_row) in out.chunks_exact_mut(row_bytes).enumerate() {
        let this = next;
        next = if k + 1 < rows {
            source(first + k + 1)
        } else {
            None
        };
        if let Some(e) = next {
            // The rows of a gather are scattered: ask for the next one's
            // codes and scales while this one is computed.
            d.prefetch(e, geo.row);
            if geo.qn == 1 {
                let s = e / geo.q * geo.blocks + e % geo.q / geo.block_size;
                let n = geo.row.div_ceil(geo.block_size) + 1;
                prefetch_bytes(scales, s * R::WIDTH, (s + n) * R::WIDTH);
            }
        }
        match this {
            Some(e0) => fill_row::<R, D>(scales, geo, d, e0, out_row),
            None => out_row.fill(0),
        }
    }
}

/// Asks the cache for the lines of `bytes[start..end]` (clipped to
/// `bytes`); a hint, never a read.
#[inline(always)]
fn prefetch_bytes(bytes: &[u8], start: usize, end: usize) {
    let end = end.min(bytes.len());
    hints::lines(
        bytes.as_ptr().wrapping_add(start),
        end.saturating_sub(start),
        false,
    );
}

/// Dequantises the `geo.row` logical elements from `e0` into `out`, in
/// runs whose scale is one (quantize axis innermost) or consecutive.
#[inline(always)]
fn fill_row<R: Real, D: Decode>(scales: &[u8], geo: &Geometry, d: &D, e0: usize, out: &mut [u8]) {
    if geo.qn == 1 {
        fill_row_innermost::<R, D>(scales, geo, d, e0, out);
        return;
    }
    let mut k = 0;
    while k < geo.row {
        let e = e0 + k;
        let z = e % geo.qn;
        let y = (e / geo.qn) % geo.q;
        let x = e / geo.qn / geo.q;
        let s0 = (x * geo.blocks + y / geo.block_size) * geo.qn + z;
        let len = (geo.qn - z).min(geo.row - k);
        for j in 0..len {
            let s = s0 + j;
            R::store(
                out,
                k + j,
                d.value(e + j, d.zero_point(s)) * R::load(scales, s),
            );
        }
        k += len;
    }
}

/// [`fill_row`] when the quantize axis is the last: runs of one scale,
/// one block after another, found without a division per run (a row of a
/// 4-bit embedding table has one run per 32 or so values).
#[inline(always)]
fn fill_row_innermost<R: Real, D: Decode>(
    scales: &[u8],
    geo: &Geometry,
    d: &D,
    e0: usize,
    out: &mut [u8],
) {
    let bs = geo.block_size;
    // e = x * q + y, y = block * bs + offset.
    let (mut x, mut y) = (e0 / geo.q, e0 % geo.q);
    let (mut block, mut offset) = (y / bs, y % bs);
    let mut k = 0;
    while k < geo.row {
        let len = (bs - offset).min(geo.q - y).min(geo.row - k);
        let s = x * geo.blocks + block;
        let scale = R::load(scales, s);
        let zp = d.zero_point(s);
        d.fill_run::<R>(
            e0 + k,
            zp,
            scale,
            &mut out[k * R::WIDTH..(k + len) * R::WIDTH],
        );
        k += len;
        y += len;
        offset += len;
        if y == geo.q {
            (x, y, block, offset) = (x + 1, 0, 0, 0);
        } else if offset == bs {
            (block, offset) = (block + 1, 0);
        }
    }
}

#[cfg(test)]
#[path = "dequantize_tests.rs"]
mod tests;
