//! Each operator's rules: the checks of its attributes and shapes, the
//! output shape, and its rows, tuple and slice as one walk ([`Plan`]).

use smallvec::SmallVec;

use super::{distinct_positions, prefetches, streams, Operator, Plan, Shape, TupleAxis};
use crate::error::{fmt_tuple, Result};
use crate::index::IndexType;
use crate::layout::{coalesce, ArrayView, Dim, Dims, SliceLayout};
use crate::validate::{check_batch_shapes, checked_sizes, checked_views, invalid};

/// The validation walk over the leading `rank` axes of `indices`: each
/// broadcast axis at length 1 (see [`distinct_positions`]), so that an index
/// is checked once however often it is broadcast. The first bad index in C
/// order has coordinate 0 on every such axis, so a row of this walk, unravelled
/// over the axes' distinct lengths, is still its exact position.
fn index_walk(indices: &ArrayView<'_>, rank: usize) -> Dims {
    coalesce(
        indices.shape[..rank]
            .iter()
            .zip(indices.strides)
            .map(|(&size, &index_stride)| Dim {
                size: distinct_positions(size, index_stride),
                data_stride: 0,
                index_stride,
            }),
    )
}

/// The strides a plan walks `data` with. An empty `data` is never read (its
/// rows are zero-filled or out of range), and its strides, checked against
/// no buffer, may be anything: it is walked with zero strides, so that no
/// offset arithmetic can overflow.
fn walk_strides<'s>(data: &ArrayView<'s>, zeros: &'s mut SmallVec<[isize; 8]>) -> &'s [isize] {
    if data.shape.contains(&0) {
        zeros.resize(data.strides.len(), 0);
        zeros
    } else {
        data.strides
    }
}

/// Plans `gather_nd` with ONNX GatherND-13 / OpenVINO GatherND-8 semantics.
pub fn plan_gather_nd<'a>(
    data: ArrayView<'a>,
    indices: ArrayView<'a>,
    index_type: IndexType,
    batch_dims: i64,
) -> Result<Plan<'a>> {
    plan_op(
        Operator::GatherNd { batch_dims },
        data,
        indices,
        index_type,
        None,
    )
}

/// Plans `gather` with OpenVINO Gather-8 / TensorFlow `gather` semantics.
pub fn plan_gather<'a>(
    data: ArrayView<'a>,
    indices: ArrayView<'a>,
    index_type: IndexType,
    axis: i64,
    batch_dims: i64,
) -> Result<Plan<'a>> {
    plan_op(
        Operator::Gather { axis, batch_dims },
        data,
        indices,
        index_type,
        None,
    )
}

/// Plans `op`, either operator with its attributes (the one planner of the
/// crate), walking `data` with `walk` strides instead of its own when
/// given: a prepared gather plans over a stand-in `data` with the element
/// strides of its shape, so that the offsets the plan computes are element
/// positions (see `prepared`).
///
/// Both operators are one walk: output rows over `b` batch axes (of `data`
/// and `indices` together), then gather's outer axes of `data` (before
/// `axis`), then the other axes of `indices` that hold positions; a tuple
/// of `k` indices into the axes of `data` from `t` on; the slice past them.
pub(crate) fn plan_op<'a>(
    op: Operator,
    data: ArrayView<'a>,
    indices: ArrayView<'a>,
    index_type: IndexType,
    walk: Option<&[isize]>,
) -> Result<Plan<'a>> {
    checked_views(&data, &indices, index_type)?;
    let (ds, is) = (data.shape, indices.shape);
    // (b, t, k, the axes of `indices` that hold positions).
    let (b, t, k, rank) = match op {
        Operator::GatherNd { batch_dims } => nd_axes(ds, is, batch_dims)?,
        Operator::Gather { axis, batch_dims } => gather_axes(ds, is, axis, batch_dims)?,
    };
    let is_nd = matches!(op, Operator::GatherNd { .. });
    check_batch_shapes(ds, is, b, if is_nd { "gather_nd" } else { "gather" })?;

    // The batch axes of `data` equal those of `indices` (just checked).
    let out_shape: Shape = ds[..t]
        .iter()
        .chain(&is[b..rank])
        .chain(&ds[t + k..])
        .copied()
        .collect();
    let out_bytes = checked_sizes(&out_shape, data.itemsize)?;
    let mut zeros = SmallVec::new();
    let strides = walk.unwrap_or_else(|| walk_strides(&data, &mut zeros));

    let batch = (0..b).map(|i| Dim {
        size: is[i],
        data_stride: strides[i],
        index_stride: indices.strides[i],
    });
    let outer = (b..t).map(|i| Dim {
        size: ds[i],
        data_stride: strides[i],
        index_stride: 0,
    });
    let inner = (b..rank).map(|i| Dim {
        size: is[i],
        data_stride: 0,
        index_stride: indices.strides[i],
    });
    let mut rows = coalesce(batch.chain(outer).chain(inner));
    let mut index_rows = index_walk(&indices, rank);
    let slice = SliceLayout::new(&ds[t + k..], &strides[t + k..], data.itemsize);
    Ok(Plan {
        data,
        indices,
        index_type,
        n_rows: at_least_one_axis(&mut rows),
        rows,
        n_index_rows: at_least_one_axis(&mut index_rows),
        index_rows,
        position_rank: rank,
        tuple: (t..t + k)
            .map(|axis| TupleAxis {
                axis,
                size: ds[axis],
                data_stride: strides[axis],
            })
            .collect(),
        tuple_stride: if is_nd { indices.strides[rank] } else { 0 },
        slice_bytes: match &slice {
            SliceLayout::Contiguous { bytes } => *bytes,
            SliceLayout::Strided { run, outer } => {
                run * outer.iter().map(|o| o.0).product::<usize>()
            }
        },
        stream: streams(&slice, out_bytes),
        slice,
        out_shape,
        out_bytes,
        is_nd,
        batch_dims: b,
        prefetch: prefetches(data.bytes.len()),
        // What `reject_negative_indices` and `with_cast` change.
        wrap_negative: true,
        cast: None,
    })
}

/// `gather_nd`'s attributes checked: `(b, t, k, rank)` as [`plan_op`]
/// walks them, the tuple along the last axis of `indices`.
#[inline(always)]
fn nd_axes(ds: &[usize], is: &[usize], batch_dims: i64) -> Result<(usize, usize, usize, usize)> {
    let (r, q) = (ds.len(), is.len());
    if r == 0 || q == 0 {
        return Err(invalid(format!(
            "gather_nd: data and indices must have rank >= 1, got data rank {r} and indices rank {q}"
        )));
    }
    let limit = r.min(q);
    let b = usize::try_from(batch_dims)
        .ok()
        .filter(|&b| b < limit)
        .ok_or_else(|| {
            invalid(format!(
                "gather_nd: batch_dims must satisfy 0 <= batch_dims < min(data.ndim, indices.ndim) = {limit}, \
                 got batch_dims={batch_dims}"
            ))
        })?;
    let k = is[q - 1];
    if k < 1 || k > r - b {
        return Err(invalid(format!(
            "gather_nd: indices.shape[-1] must be between 1 and data.ndim - batch_dims = {}, got {k} \
             (data shape {}, indices shape {}, batch_dims={b})",
            r - b,
            fmt_tuple(ds),
            fmt_tuple(is)
        )));
    }
    Ok((b, b, k, q - 1))
}

/// `gather`'s attributes checked and normalised: `(b, t, k, rank)` as
/// [`plan_op`] walks them, a tuple of one index into `axis`.
#[inline(always)]
fn gather_axes(
    ds: &[usize],
    is: &[usize],
    axis: i64,
    batch_dims: i64,
) -> Result<(usize, usize, usize, usize)> {
    let (r, q) = (ds.len() as i64, is.len() as i64);
    let a = if axis < 0 {
        axis.checked_add(r)
    } else {
        Some(axis)
    };
    let a = a.filter(|&a| (0..r).contains(&a)).ok_or_else(|| {
        invalid(format!(
            "gather: axis must be in [-data.ndim, data.ndim) = [{}, {r}), got axis={axis} (data shape {})",
            -r,
            fmt_tuple(ds)
        ))
    })? as usize;
    let b = if batch_dims < 0 {
        batch_dims.checked_add(q)
    } else {
        Some(batch_dims)
    };
    let b = b.filter(|&b| (0..=q).contains(&b)).ok_or_else(|| {
        invalid(format!(
            "gather: batch_dims must be in [-indices.ndim, indices.ndim] = [{}, {q}], got batch_dims={batch_dims}",
            -q
        ))
    })? as usize;
    if b > a {
        return Err(invalid(format!(
            "gather: batch_dims must not exceed axis after normalization, got batch_dims={b} and axis={a}"
        )));
    }
    Ok((b, a, 1, is.len()))
}

/// Walks always have at least one axis, so the kernels can run along the
/// innermost one; a single row is an axis of size 1.
#[inline(always)]
fn at_least_one_axis(dims: &mut Dims) -> usize {
    if dims.is_empty() {
        dims.push(Dim {
            size: 1,
            data_stride: 0,
            index_stride: 0,
        });
    }
    dims.iter().map(|d| d.size).product()
}
