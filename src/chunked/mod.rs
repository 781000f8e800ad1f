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
use crate::index::{IndexElem, IndexType};
use crate::layout::ArrayView;
use crate::mode::Mode;
use crate::offsets::resolve;
use crate::plan::{plan_op, Operator, Plan};
use crate::stand_in::{stand_in, StandIn};
use crate::validate::{check_numpy_size, checked_sizes};
use crate::walk::unravel;
use flat::{tuple_axes, TupleAxis, Tuples};
use grid::{chunk_of, Bounds};

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
/// coalesced and has lost them): the batch axes, gather's outer axes (those
/// between the batch axes and the first indexed one; gather_nd has none),
/// then the other axes of `indices` that hold positions.
fn row_axes(plan: &Plan<'_>) -> SmallVec<[RowAxis; 8]> {
    let b = plan.batch_dims;
    let index_axis = |i: usize| RowAxis {
        size: plan.indices.shape[i],
        index_stride: plan.indices.strides[i],
        data_axis: (i < b).then_some(i),
    };
    let outer = (b..plan.tuple[0].axis).map(|i| RowAxis {
        size: plan.data.shape[i],
        index_stride: 0,
        data_axis: Some(i),
    });
    (0..b)
        .map(index_axis)
        .chain(outer)
        .chain((b..plan.position_rank).map(index_axis))
        .collect()
}

/// The coordinates of a row on its axes ([`RowAxis`]), stepped in C order.
struct Coords(Vec<usize>);

impl Coords {
    /// At row `row` of `axes` (C order).
    fn new(axes: &[RowAxis], row: usize) -> Self {
        let sizes: SmallVec<[usize; 8]> = axes.iter().map(|a| a.size).collect();
        Coords(unravel(row, &sizes))
    }

    /// Steps to the next row of `axes`.
    #[inline(always)]
    fn step(&mut self, axes: &[RowAxis]) {
        for (c, a) in self.0.iter_mut().zip(axes).rev() {
            *c += 1;
            if *c < a.size {
                break;
            }
            *c = 0;
        }
    }
}

/// The rows of a plan over a grid of chunks, and how each finds its chunk:
/// the row axes walked ([`row_axes`], or those of them that hold positions
/// of `indices`) and, per axis of `data`, its chunk starts, its chunk at
/// each position when short ([`chunk_tables`]) and its stride in the
/// numbering of the chunks (C order over the axes numbered).
struct GridRows<'p> {
    plan: &'p Plan<'p>,
    axes: SmallVec<[RowAxis; 8]>,
    starts: &'p Bounds,
    tables: Vec<Option<Vec<u32>>>,
    strides: Vec<u64>,
}

impl GridRows<'_> {
    /// Puts in `place` the position on each leading axis of `data` that the
    /// row at `coords` reads (its coordinate on a row axis that walks
    /// `data`, its resolved index on an indexed axis) and numbers its chunk
    /// over those axes; `None` when an index reads nothing (mode "zero"),
    /// `Err` when one addresses nothing.
    ///
    /// # Safety
    /// `coords` is a row of `axes`, so a position of the plan's checked
    /// indices.
    #[inline(always)]
    unsafe fn chunk<T: IndexElem, const CLIP: bool, const ZERO: bool>(
        &self,
        coords: &Coords,
        place: &mut [usize],
    ) -> std::result::Result<Option<u64>, ()> {
        let plan = self.plan;
        let base = plan.indices.first();
        let number = |d: usize, p: usize| {
            chunk_of(&self.tables[d], &self.starts[d], p) as u64 * self.strides[d]
        };
        let (mut off, mut id) = (0isize, 0u64);
        for (c, a) in coords.0.iter().zip(&self.axes) {
            off += *c as isize * a.index_stride;
            if let Some(d) = a.data_axis {
                place[d] = *c;
                id += number(d, *c);
            }
        }
        for (j, t) in plan.tuple.iter().enumerate() {
            // SAFETY: `off` is the row's position of `indices` (caller), and
            // `j` a place in its tuple: inside its bytes by the checked-view
            // invariant (b).
            let v = unsafe { T::load(base.offset(off + j as isize * plan.tuple_stride)) };
            match resolve::<CLIP>(v, t.size, plan.wrap_negative) {
                Some(p) => {
                    place[t.axis] = p;
                    id += number(t.axis, p);
                }
                None if ZERO => return Ok(None),
                None => return Err(()),
            }
        }
        Ok(Some(id))
    }

    /// The tuples and their axes as the flat loops read them ([`tuple_axes`],
    /// `total` the number of chunks), when the rows are a flat list of
    /// tuples: one axis of `indices`, no batch axis, no outer axis of gather.
    fn flat(&self, total: u64) -> Option<(Tuples, Vec<TupleAxis>)> {
        let [row @ RowAxis {
            data_axis: None, ..
        }] = self.axes[..]
        else {
            return None;
        };
        let plan = self.plan;
        let each = plan.tuple.iter().map(|t| (t.axis, self.strides[t.axis]));
        let tuples = Tuples {
            base: plan.indices.first(),
            stride: row.index_stride,
            tuple_stride: plan.tuple_stride,
            wrap: plan.wrap_negative,
        };
        Some((tuples, tuple_axes(self.starts, each, total)?))
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
    Ok(Layout {
        out_shape: plan.out_shape().to_vec(),
        out_bytes,
        batch_dims: plan.batch_dims,
        indexed: plan.tuple.iter().map(|t| t.axis).collect(),
    })
}

/// The plan's own check of the indices, which finds the first bad index in
/// C order, with its error moved to the larger arrays of `whole`.
fn check_indices(plan: &Plan<'_>, mode: Mode, threads: usize, whole: Option<&Whole>) -> Result<()> {
    match (plan.validate(mode, threads), whole) {
        (Err(GatherError::IndexOutOfRange(mut bad)), Some(w)) => {
            for (p, o) in bad.position.iter_mut().zip(&w.index_offset) {
                *p += o;
            }
            bad.data_shape.clone_from(&w.data_shape);
            Err(GatherError::IndexOutOfRange(bad))
        }
        (checked, _) => checked,
    }
}

#[cfg(test)]
#[path = "chunked_tests.rs"]
mod tests;
