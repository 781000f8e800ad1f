//! Each operator's rules: the checks of its attributes and shapes, the
//! output shape, and its rows, tuple and slice as one walk ([`Plan`]).

use smallvec::SmallVec;

use super::{
    distinct_positions, streams, Operator, Plan, Shape, TupleAxis, PREFETCH_MIN_DATA_BYTES,
};
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

/// Plans `op`, either operator with its attributes (the one dispatch of
/// the crate), walking `data` with `walk` strides if given (see
/// [`plan_gather_nd_walking`]).
pub(crate) fn plan_op<'a>(
    op: Operator,
    data: ArrayView<'a>,
    indices: ArrayView<'a>,
    index_type: IndexType,
    walk: Option<&[isize]>,
) -> Result<Plan<'a>> {
    match op {
        Operator::GatherNd { batch_dims } => {
            plan_gather_nd_walking(data, indices, index_type, batch_dims, walk)
        }
        Operator::Gather { axis, batch_dims } => {
            plan_gather_walking(data, indices, index_type, axis, batch_dims, walk)
        }
    }
}

/// Plans `gather_nd` with ONNX GatherND-13 / OpenVINO GatherND-8 semantics.
pub fn plan_gather_nd<'a>(
    data: ArrayView<'a>,
    indices: ArrayView<'a>,
    index_type: IndexType,
    batch_dims: i64,
) -> Result<Plan<'a>> {
    plan_gather_nd_walking(data, indices, index_type, batch_dims, None)
}

/// [`plan_gather_nd`], walking `data` with `walk` strides instead of its
/// own when given: a prepared gather plans over a stand-in `data` with the
/// element strides of its shape, so that the offsets the plan computes are
/// element positions (see `prepared`).
#[inline(always)]
fn plan_gather_nd_walking<'a>(
    data: ArrayView<'a>,
    indices: ArrayView<'a>,
    index_type: IndexType,
    batch_dims: i64,
    walk: Option<&[isize]>,
) -> Result<Plan<'a>> {
    checked_views(&data, &indices, index_type)?;
    let (ds, is) = (data.shape, indices.shape);
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
    check_batch_shapes(ds, is, b, "gather_nd")?;

    let out_shape: Shape = is[..q - 1].iter().chain(&ds[b + k..]).copied().collect();
    let out_bytes = checked_sizes(&out_shape, data.itemsize)?;
    let mut zeros = SmallVec::new();
    let strides = walk.unwrap_or_else(|| walk_strides(&data, &mut zeros));

    let rows = coalesce((0..q - 1).map(|i| Dim {
        size: is[i],
        data_stride: if i < b { strides[i] } else { 0 },
        index_stride: indices.strides[i],
    }));
    let tuple = (b..b + k)
        .map(|axis| TupleAxis {
            axis,
            size: ds[axis],
            data_stride: strides[axis],
        })
        .collect();
    Ok(finish(Plan {
        data,
        indices,
        index_type,
        out_shape,
        out_bytes,
        rows,
        index_rows: index_walk(&indices, q - 1),
        position_rank: q - 1,
        tuple,
        tuple_stride: indices.strides[q - 1],
        slice: SliceLayout::new(&ds[b + k..], &strides[b + k..], data.itemsize),
        is_nd: true,
        batch_dims: b,
        // Set by `finish` from the fields above, or defaults that
        // `reject_negative_indices` and `with_cast` change.
        n_rows: 0,
        n_index_rows: 0,
        slice_bytes: 0,
        stream: false,
        prefetch: false,
        wrap_negative: true,
        cast: None,
    }))
}

/// Plans `gather` with OpenVINO Gather-8 / TensorFlow `gather` semantics.
pub fn plan_gather<'a>(
    data: ArrayView<'a>,
    indices: ArrayView<'a>,
    index_type: IndexType,
    axis: i64,
    batch_dims: i64,
) -> Result<Plan<'a>> {
    plan_gather_walking(data, indices, index_type, axis, batch_dims, None)
}

/// [`plan_gather`], walking `data` with `walk` strides when given (see
/// [`plan_gather_nd_walking`]).
#[inline(always)]
fn plan_gather_walking<'a>(
    data: ArrayView<'a>,
    indices: ArrayView<'a>,
    index_type: IndexType,
    axis: i64,
    batch_dims: i64,
    walk: Option<&[isize]>,
) -> Result<Plan<'a>> {
    checked_views(&data, &indices, index_type)?;
    let (ds, is) = (data.shape, indices.shape);
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
    check_batch_shapes(ds, is, b, "gather")?;

    let out_shape: Shape = ds[..a]
        .iter()
        .chain(&is[b..])
        .chain(&ds[a + 1..])
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
    let outer = (b..a).map(|i| Dim {
        size: ds[i],
        data_stride: strides[i],
        index_stride: 0,
    });
    let inner = (b..is.len()).map(|i| Dim {
        size: is[i],
        data_stride: 0,
        index_stride: indices.strides[i],
    });
    Ok(finish(Plan {
        data,
        indices,
        index_type,
        out_shape,
        out_bytes,
        rows: coalesce(batch.chain(outer).chain(inner)),
        index_rows: index_walk(&indices, is.len()),
        position_rank: is.len(),
        tuple: smallvec::smallvec![TupleAxis {
            axis: a,
            size: ds[a],
            data_stride: strides[a],
        }],
        tuple_stride: 0,
        slice: SliceLayout::new(&ds[a + 1..], &strides[a + 1..], data.itemsize),
        is_nd: false,
        batch_dims: b,
        // Set by `finish` from the fields above, or defaults that
        // `reject_negative_indices` and `with_cast` change.
        n_rows: 0,
        n_index_rows: 0,
        slice_bytes: 0,
        stream: false,
        prefetch: false,
        wrap_negative: true,
        cast: None,
    }))
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

// Inlined into both planners: a plan is several hundred bytes, and a call
// that is all overhead should not pay for moving it around.
#[inline(always)]
fn finish(mut p: Plan<'_>) -> Plan<'_> {
    p.n_rows = at_least_one_axis(&mut p.rows);
    p.n_index_rows = at_least_one_axis(&mut p.index_rows);
    p.slice_bytes = match &p.slice {
        SliceLayout::Contiguous { bytes } => *bytes,
        SliceLayout::Strided { run, outer } => run * outer.iter().map(|o| o.0).product::<usize>(),
    };
    p.stream = streams(&p.slice, p.out_bytes);
    p.prefetch = p.data.bytes.len() > PREFETCH_MIN_DATA_BYTES;
    p
}
