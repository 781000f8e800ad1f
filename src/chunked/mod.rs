//! Gathering from an array held as a grid of chunks (a dask or zarr array's
//! blocks), in one pass: each output row is copied straight from the chunk
//! its coordinates fall in, in index order, with no intermediate pieces.
//!
//! The rules, the output shape and the validation of the indices are the
//! one-shot gather's: a plan is made on a stand-in of the whole array (every
//! stride 0, one element of bytes) and its checks run unchanged, so errors
//! are exactly `plan_gather_nd`'s and `plan_gather`'s. Only the copy differs:
//! each row finds its chunk by the chunk boundaries of every axis. The axes
//! of the gathered slice must hold one chunk each (a caller splits its
//! output along them); every other axis may be chunked any way. A chunk
//! that is not given is never read: an index landing in one is an error.

use smallvec::SmallVec;

use crate::error::{GatherError, Result};
use crate::index::IndexType;
use crate::layout::ArrayView;
use crate::plan::{plan_op, Operator, Plan};
use crate::stand_in::{stand_in, StandIn};
use crate::validate::{check_numpy_size, checked_sizes};

mod flat;
mod gather;
mod grid;
mod ready;
mod touched;

pub use crate::snapshot::copy_and_digest;
pub use gather::gather_chunks;
pub use touched::touched_chunks;

/// Where the array and the indices of a call lie in larger ones, so that an
/// out-of-range index is reported as the one-shot gather on those would:
/// its position moved by `index_offset` (one entry per axis of `indices`
/// before the tuple axis), and `data_shape` as the data's shape.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Whole {
    /// The larger array's shape.
    pub data_shape: Vec<usize>,
    /// The position of `indices[0, ...]` in the larger indices.
    pub index_offset: Vec<usize>,
}

/// What the rules say about a call, from the shapes alone.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Layout {
    /// The result's shape.
    pub out_shape: Vec<usize>,
    /// The result's size in bytes.
    pub out_bytes: usize,
    /// The number of batch axes (`batch_dims`, normalized).
    pub batch_dims: usize,
    /// The axes of `data` an index tuple addresses, in tuple order.
    pub indexed: Vec<usize>,
}

/// An array held as chunks: the chunk sizes along every axis, and the
/// chunks given, each a checked-or-to-be-checked view with its grid
/// coordinates.
#[derive(Clone, Debug)]
pub struct ChunkGrid<'a> {
    /// Per axis, the sizes of its chunks in order (their sum is the axis).
    pub chunk_sizes: Vec<Vec<usize>>,
    /// The chunks given: grid coordinates and the chunk's view.
    pub chunks: Vec<(Vec<usize>, ArrayView<'a>)>,
    /// Bytes per element.
    pub itemsize: usize,
}

/// The one-shot plan of `indices` on an array of `shape` and `itemsize`,
/// over a stand-in of one-byte elements ([`StandIn`]), and the result's bytes
/// at the real `itemsize`: the same checks and errors as planning on the
/// array itself (its own size bound first, as the planner checks it before
/// the attributes; the result's after).
fn plan_whole<'a>(
    data: &'a StandIn,
    itemsize: usize,
    indices: ArrayView<'a>,
    ty: IndexType,
    op: Operator,
) -> Result<(Plan<'a>, usize)> {
    check_numpy_size("data", data.shape(), itemsize)?;
    let plan = plan_op(op, data.view(), indices, ty, None)?;
    let out_bytes = checked_sizes(plan.out_shape(), itemsize)?;
    Ok((plan, out_bytes))
}

/// One axis of the output rows: its length, its stride in `indices` (0
/// for gather's outer axes) and the axis of `data` it walks, if any.
#[derive(Clone, Copy, Debug)]
struct RowAxis {
    size: usize,
    index_stride: isize,
    data_axis: Option<usize>,
}

/// The rows of a plan as axes with their data axes (the plan's own walk is
/// coalesced and has lost them), the batch count and the first slice axis.
fn row_axes(plan: &Plan<'_>) -> (SmallVec<[RowAxis; 8]>, usize, usize) {
    let (ds, is, st) = (plan.data.shape, plan.indices.shape, plan.indices.strides);
    let first = plan.tuple[0].axis;
    let axis = |i: usize, data_axis| RowAxis {
        size: is[i],
        index_stride: st[i],
        data_axis,
    };
    let b = plan.batch_dims;
    if plan.is_nd {
        let rows = (0..is.len() - 1)
            .map(|i| axis(i, (i < b).then_some(i)))
            .collect();
        (rows, b, b + plan.tuple.len())
    } else {
        let outer = (b..first).map(|i| RowAxis {
            size: ds[i],
            index_stride: 0,
            data_axis: Some(i),
        });
        let rows = (0..b)
            .map(|i| axis(i, Some(i)))
            .chain(outer)
            .chain((b..is.len()).map(|i| axis(i, None)))
            .collect();
        (rows, b, first + 1)
    }
}

/// The shapes' verdict: the one-shot gather's errors for these shapes and
/// attributes (never for index values), and the result's layout.
pub fn chunked_layout(
    data_shape: &[usize],
    itemsize: usize,
    index_shape: &[usize],
    ty: IndexType,
    op: Operator,
) -> Result<Layout> {
    let data = StandIn::new(data_shape, itemsize);
    let zeros = vec![0isize; index_shape.len()];
    let indices = stand_in(index_shape, &zeros, ty.itemsize());
    let (plan, out_bytes) = plan_whole(&data, itemsize, indices, ty, op)?;
    let (_, batch_dims, _) = row_axes(&plan);
    Ok(Layout {
        out_shape: plan.out_shape().to_vec(),
        out_bytes,
        batch_dims,
        indexed: plan.tuple.iter().map(|t| t.axis).collect(),
    })
}

/// The one-shot error moved to the larger arrays of `whole`.
fn relocate(e: GatherError, whole: Option<&Whole>) -> GatherError {
    match (e, whole) {
        (GatherError::IndexOutOfRange(mut bad), Some(w)) => {
            for (p, o) in bad.position.iter_mut().zip(&w.index_offset) {
                *p += o;
            }
            bad.data_shape.clone_from(&w.data_shape);
            GatherError::IndexOutOfRange(bad)
        }
        (e, _) => e,
    }
}

#[cfg(test)]
#[path = "chunked_tests.rs"]
mod tests;
