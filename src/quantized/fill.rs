//! The fill of the output: rows split over threads, each dequantised in
//! runs of one scale.

use super::decode::{prefetch_bytes, Decode, NibbleCodes, PackedCodes, TableCodes};
use super::geometry::Geometry;
use super::{BlockQuantized, Codes, Indices};
use crate::error::Result;
use crate::hints::fence;
use crate::machine::tuning;
use crate::offsets::resolve;
use crate::real::Real;
use crate::split::split_rows;

/// What dequantising one output element costs, in bytes of sequential
/// copying (the unit of [`split_rows`]): a code read, a scale applied and a
/// wide value written, about eight bytes' worth.
const ELEMENT_COST: usize = 8;

/// The call, its buffers checked, in the scales' type `R`.
pub(super) fn run<R: Real>(
    q: &BlockQuantized<'_>,
    indices: Indices<'_>,
    out: &mut [u8],
    threads: usize,
) -> Result<()> {
    let geo = &Geometry::new(q, indices.len(), out.len(), R::WIDTH)?;
    match q.codes {
        Codes::Packed { bytes, bits } => {
            let d = PackedCodes {
                bytes,
                bits,
                zero_points: q.zero_points,
                blocks: geo.blocks,
                stream: geo.rows * geo.row * R::WIDTH >= tuning().stream_min_out_bytes,
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
    Ok(())
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
    // The first element of output row `r`'s source, if its index is in
    // range (negatives count from the end).
    let source = |r: usize| {
        let (m, n) = (r / geo.n, r % geo.n);
        let i = resolve::<false>(indices.get(n), geo.axis, true)?;
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
