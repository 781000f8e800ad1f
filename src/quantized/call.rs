//! The operator's entry points: the result's shape, and the call itself
//! (checked, then filled in the scales' type).

use super::fill::run;
use super::geometry::{check_scales_and_zero_points, invalid, too_large, Geometry};
use super::{BlockQuantized, Indices, ScaleType};
use crate::error::Result;
use crate::real::{BF16, F16, F32};

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
