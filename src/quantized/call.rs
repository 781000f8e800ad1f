//! The operator's entry points: the result's shape, and the call itself
//! (checked, then filled in the scales' type).

use super::fill::run;
use super::{BlockQuantized, Indices, ScaleType};
use crate::error::Result;
use crate::index::IndexType;
use crate::layout::ArrayView;
use crate::mode::Mode;
use crate::plan::{plan_op, Operator};
use crate::real::{BF16, F16, F32};
use crate::stand_in::StandIn;
use crate::validate::invalid;

/// The shape of the result for `indices` (of type `ty`) on data stored as
/// `stored` (of logical shape `shape`: packed codes hold several elements a
/// byte along the last axis), planned as the one-shot Gather along
/// `gather_axis` plans it (`shape[..g] + indices.shape + shape[g + 1..]`),
/// with its errors; with `mode` [`Mode::Raise`], after checking every index
/// against `[-s, s)`: the one-shot gather's `IndexOutOfRange` for the
/// first in C order that is not, naming `stored` (the operator itself reads
/// such an index as a zero row).
pub fn block_quantized_out_shape(
    stored: &[usize],
    shape: &[usize],
    gather_axis: usize,
    indices: ArrayView<'_>,
    ty: IndexType,
    mode: Mode,
    threads: usize,
) -> Result<Vec<usize>> {
    let packed = shape.len().saturating_sub(1);
    if stored.len() != shape.len()
        || stored[..packed] != shape[..packed]
        || stored.get(gather_axis) != shape.get(gather_axis)
    {
        return Err(invalid(
            "data's stored and logical shapes differ on more than the packed axis".into(),
        ));
    }
    let data = StandIn::new(stored, 1);
    let axis =
        i64::try_from(gather_axis).map_err(|_| invalid("gather_axis is too large".into()))?;
    let op = Operator::Gather {
        axis,
        batch_dims: 0,
    };
    let plan = plan_op(op, data.view(), indices, ty, None)?;
    if mode == Mode::Raise {
        plan.validate(Mode::Raise, threads)?;
    }
    // The axes after the gathered one as the operator counts them.
    let after = &shape[gather_axis + 1..];
    let mut out = plan.out_shape().to_vec();
    out.truncate(out.len() - after.len());
    out.extend_from_slice(after);
    Ok(out)
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
    match q.scale_type {
        ScaleType::Float32 => run::<F32>(q, indices, out, threads),
        ScaleType::Float16 => run::<F16>(q, indices, out, threads),
        ScaleType::BFloat16 => run::<BF16>(q, indices, out, threads),
    }
}
