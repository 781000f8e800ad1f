//! Validation of shapes and attributes, the output shape, and the
//! decomposition of both operators into one walk:
//!
//! ```text
//! for row in rows (C order of the output without the slice axes):
//!     src = data + Σ row coords · data strides + Σ_j resolve(indices[row, j]) · tuple strides
//!     copy the slice at src to output row
//! ```
//!
//! `gather_nd` rows are `indices.shape[:-1]` (batch axes first) with a tuple
//! of `k` indices; `gather` rows are batch, outer (`data.shape[b:axis]`) and
//! `indices.shape[b:]` axes with a tuple of one index.

use crate::convert::Cast;
use crate::error::{fmt_tuple, GatherError, Result};
use crate::hints::{Ahead, STREAM_MIN_OUT_BYTES};
use crate::index::IndexType;
use smallvec::SmallVec;

use crate::layout::{coalesce, ArrayView, Dim, Dims, SliceLayout};
use crate::validate::{check_batch_shapes, checked_sizes, checked_views, invalid};

/// A result shape, inline for the ranks real calls have.
type Shape = SmallVec<[usize; 8]>;

/// One axis of `data` addressed by a position of the index tuple.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct TupleAxis {
    /// The axis number in `data` (for messages).
    pub axis: usize,
    pub size: usize,
    pub data_stride: isize,
}

/// Which operator a call runs, with its attributes as the caller gave them
/// (what [`plan_gather_nd`] and [`plan_gather`] take): the one description
/// the prepared and the chunked gathers share.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Operator {
    /// `gather_nd(data, indices, batch_dims)`.
    GatherNd {
        /// As for [`plan_gather_nd`].
        batch_dims: i64,
    },
    /// `gather(data, indices, axis, batch_dims)`.
    Gather {
        /// As for [`plan_gather`].
        axis: i64,
        /// As for [`plan_gather`].
        batch_dims: i64,
    },
}

/// Everything the kernel needs, computed once per call, with the arrays it
/// reads: checked views (see the checked-view invariant on [`ArrayView`]),
/// as `plan_gather` and `plan_gather_nd` check both before planning.
#[derive(Clone, Debug)]
pub struct Plan<'a> {
    pub(crate) data: ArrayView<'a>,
    pub(crate) indices: ArrayView<'a>,
    pub(crate) index_type: IndexType,
    pub(crate) out_shape: Shape,
    pub(crate) out_bytes: usize,
    /// The copy walk: output rows in C order, coalesced.
    pub(crate) rows: Dims,
    pub(crate) n_rows: usize,
    /// The validation walk: every distinct stored index position once, in C
    /// order of `indices` (the rows without gather's outer axes), coalesced;
    /// see [`index_walk`].
    pub(crate) index_rows: Dims,
    pub(crate) n_index_rows: usize,
    /// How many leading axes of `indices` a flat index-row number unravels
    /// over, for messages: all but the last for gather_nd, all for gather.
    pub(crate) position_rank: usize,
    pub(crate) tuple: SmallVec<[TupleAxis; 4]>,
    /// Byte stride between the elements of one index tuple.
    pub(crate) tuple_stride: isize,
    pub(crate) slice: SliceLayout,
    pub(crate) slice_bytes: usize,
    pub(crate) is_nd: bool,
    /// Whether the output is so much larger than the caches that rows are
    /// written with non-temporal stores (see `copy`).
    pub(crate) stream: bool,
    /// Whether a negative index counts from the end of its axis (else it
    /// is out of range, as in ONNX Gather-1 and OpenVINO Gather-1/7).
    pub(crate) wrap_negative: bool,
    /// Whether `data` is too large for the caches, so that asking for the
    /// next rows' bytes ahead of time pays.
    pub(crate) prefetch: bool,
    /// The conversion of every element on its way to the output (`dtype=`);
    /// then `slice_bytes` and `out_bytes` count the output type's bytes.
    pub(crate) cast: Option<Cast>,
}

/// Contiguous slices shorter than this are written with ordinary stores
/// even into a huge output. Measured on the 2-core EPYC VM (interleaved,
/// `benches/compare.py` cases): non-temporal stores made 64-byte rows
/// 25-40% slower (rows_1m_u8, gather_batch), were even at 256 bytes and
/// won from 512 bytes on (gather_axis0, tokens_b1, slices_128k).
const STREAM_MIN_SLICE_BYTES: usize = 256;

/// Whether a plan writes its output with non-temporal stores.
pub(crate) fn streams(slice: &SliceLayout, out_bytes: usize) -> bool {
    matches!(slice, SliceLayout::Contiguous { bytes } if *bytes >= STREAM_MIN_SLICE_BYTES)
        && out_bytes >= STREAM_MIN_OUT_BYTES
}

/// Above this, `data` is unlikely to sit in a core's L2 cache.
const PREFETCH_MIN_DATA_BYTES: usize = 4 << 20;

impl Plan<'_> {
    /// How far ahead, and into which cache, a copy of this plan's slices
    /// prefetches (only contiguous slices prefetch; a conversion,
    /// `dtype=`, reads slices of another width than it writes).
    #[inline]
    pub(crate) fn ahead(&self) -> Ahead {
        let read = match (&self.slice, self.cast) {
            (SliceLayout::Contiguous { bytes }, Some(_)) => *bytes,
            _ => self.slice_bytes,
        };
        Ahead::new(self.prefetch, self.n_rows, self.data.bytes.len(), read)
    }

    /// How many rows past a block the copy of its rows reads offsets of (to
    /// prefetch their slices), so that a kernel computing that many more
    /// offsets first keeps the prefetches going across blocks: only for a
    /// long call from a `data` beyond the caches (a short call paid more
    /// for the extra rounds than it gained).
    pub(crate) fn lookahead(&self) -> usize {
        let ahead = self.ahead();
        match self.slice {
            SliceLayout::Contiguous { .. } if ahead.far => ahead.rows,
            _ => 0,
        }
    }

    /// The shape of the result.
    pub fn out_shape(&self) -> &[usize] {
        &self.out_shape
    }

    /// The size of the result in bytes.
    pub fn out_bytes(&self) -> usize {
        self.out_bytes
    }

    /// Makes negative indices out of range instead of counting from the
    /// end of their axis (operators whose indices lie in `[0, s)`).
    pub fn reject_negative_indices(mut self) -> Self {
        self.wrap_negative = false;
        self
    }

    /// Makes the plan convert each element with `cast` as it gathers: the
    /// result holds `cast.to()` elements (`out_bytes` grows accordingly),
    /// each equal to NumPy's `astype` of the element gathered. `data`'s
    /// elements must be of `cast.from()`'s size.
    pub fn with_cast(mut self, cast: Cast) -> Result<Self> {
        let (from, to) = (cast.from().size(), cast.to().size());
        if self.data.itemsize != from {
            return Err(GatherError::InvalidArgument(format!(
                "a cast from {:?} reads {from}-byte elements, but data's are {} bytes",
                cast.from(),
                self.data.itemsize
            )));
        }
        let widen = |bytes: usize| {
            (bytes / from)
                .checked_mul(to)
                .filter(|&b| b <= isize::MAX as usize)
                .ok_or_else(|| {
                    GatherError::Overflow(format!(
                        "the result as {:?} would hold more than {} bytes",
                        cast.to(),
                        isize::MAX
                    ))
                })
        };
        self.out_bytes = widen(self.out_bytes)?;
        self.slice_bytes = widen(self.slice_bytes)?;
        // The conversion writes through the cache (no streaming stores).
        self.stream = false;
        self.cast = Some(cast);
        Ok(self)
    }

    /// Bytes a call moves: the result written plus the indices read.
    pub fn work_bytes(&self) -> usize {
        let reads = self
            .n_rows
            .max(self.n_index_rows)
            .saturating_mul(self.tuple.len());
        self.out_bytes
            .saturating_add(reads.saturating_mul(self.index_type.itemsize()))
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

/// How many positions of an axis of `indices` hold distinct stored values:
/// one for a broadcast axis (stride 0, as `np.broadcast_to` makes), which may
/// be of any length without a byte behind each position.
pub(crate) fn distinct_positions(size: usize, stride: isize) -> usize {
    if stride == 0 {
        size.min(1)
    } else {
        size
    }
}

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
    Ok(finish(PlanParts {
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
    Ok(finish(PlanParts {
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
    }))
}

struct PlanParts<'a> {
    data: ArrayView<'a>,
    indices: ArrayView<'a>,
    index_type: IndexType,
    out_shape: Shape,
    out_bytes: usize,
    rows: Dims,
    index_rows: Dims,
    position_rank: usize,
    tuple: SmallVec<[TupleAxis; 4]>,
    tuple_stride: isize,
    slice: SliceLayout,
    is_nd: bool,
}

/// Walks always have at least one axis, so the kernels can run along the
/// innermost one; a single row is an axis of size 1.
#[inline(always)]
fn at_least_one_axis(mut dims: Dims) -> Dims {
    if dims.is_empty() {
        dims.push(Dim {
            size: 1,
            data_stride: 0,
            index_stride: 0,
        });
    }
    dims
}

// Inlined into both planners: a plan is several hundred bytes, and a call
// that is all overhead should not pay for moving it around.
#[inline(always)]
fn finish(p: PlanParts<'_>) -> Plan<'_> {
    let rows = at_least_one_axis(p.rows);
    let index_rows = at_least_one_axis(p.index_rows);
    let count = |dims: &[Dim]| dims.iter().map(|d| d.size).product::<usize>();
    let slice_bytes = match &p.slice {
        SliceLayout::Contiguous { bytes } => *bytes,
        SliceLayout::Strided { run, outer } => run * outer.iter().map(|o| o.0).product::<usize>(),
    };
    Plan {
        data: p.data,
        indices: p.indices,
        index_type: p.index_type,
        n_rows: count(&rows),
        n_index_rows: count(&index_rows),
        out_shape: p.out_shape,
        out_bytes: p.out_bytes,
        rows,
        index_rows,
        position_rank: p.position_rank,
        tuple: p.tuple,
        tuple_stride: p.tuple_stride,
        stream: streams(&p.slice, p.out_bytes),
        slice: p.slice,
        slice_bytes,
        is_nd: p.is_nd,
        prefetch: p.data.bytes.len() > PREFETCH_MIN_DATA_BYTES,
        wrap_negative: true,
        cast: None,
    }
}

#[cfg(test)]
#[path = "plan_tests.rs"]
mod tests;
